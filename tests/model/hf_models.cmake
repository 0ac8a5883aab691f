# Hugging Face / MLX safetensors directories: tests/model/gen_hf_models.sh runs
# tools/make_mlx.py on the f32 fixtures (plain F32/F16/BF16, MLX 2-8 bits) into
# ${CMAKE_BINARY_DIR}/hf_models before test_hf_models runs. Needs python3 with numpy and
# gguf. Include from tests/CMakeLists.txt after the loop that creates the tests.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(AK_PYTHON ${Python3_EXECUTABLE})
else()
  set(AK_PYTHON python3)  # the setup test then fails and the dependent test is not run
endif()

set(AK_HF_MODELS ${CMAKE_BINARY_DIR}/hf_models)
add_test(NAME gen_hf_models
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/model/gen_hf_models.sh ${AK_PYTHON} ${AKUNU_FIXTURES} ${AK_HF_MODELS})
set_tests_properties(gen_hf_models PROPERTIES FIXTURES_SETUP hf_models)

if(NOT TEST test_hf_models)
  message(FATAL_ERROR "hf_models.cmake: test test_hf_models does not exist yet; include this file after ak_test()")
endif()
set_tests_properties(test_hf_models PROPERTIES FIXTURES_REQUIRED hf_models)
set_property(TEST test_hf_models APPEND PROPERTY ENVIRONMENT "AKUNU_HF_MODELS=${AK_HF_MODELS}")
