# Requantized-model tests: tools/requant.py rewrites llama and qwen3 f32 fixtures into
# every storage type under ${CMAKE_BINARY_DIR}/quant_models before test_quant_models
# runs; test_quant_models_scalar repeats it with AKUNU_SCALAR=1. Needs python3 with
# numpy and gguf. Include from tests/CMakeLists.txt after the loop that creates the tests.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(AK_PYTHON ${Python3_EXECUTABLE})
else()
  set(AK_PYTHON python3)  # the setup test then fails and the dependent tests are not run
endif()

set(AK_QUANT_MODELS ${CMAKE_BINARY_DIR}/quant_models)
set(AK_QUANT_TYPES "F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K")
add_test(NAME gen_quant_models
         COMMAND sh -c "set -e; mkdir -p \"$1\"; for m in llama qwen3; do for t in ${AK_QUANT_TYPES}; do \"$2\" \"$3\" \"$4/$m/$m-f32.gguf\" \"$1/$m-$t.gguf\" $t > \"$1/$m-$t.log\"; done; done"
                 sh ${AK_QUANT_MODELS} ${AK_PYTHON} ${CMAKE_SOURCE_DIR}/tools/requant.py ${AKUNU_FIXTURES})
set_tests_properties(gen_quant_models PROPERTIES FIXTURES_SETUP quant_models)

if(NOT TEST test_quant_models)
  message(FATAL_ERROR "quant_models.cmake: test test_quant_models does not exist yet; include this file after ak_test()")
endif()
add_test(NAME test_quant_models_scalar COMMAND test_quant_models)
set_tests_properties(test_quant_models_scalar PROPERTIES
  ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES};AKUNU_SCALAR=1")
foreach(t test_quant_models test_quant_models_scalar)
  set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED quant_models)
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "AKUNU_QUANT_MODELS=${AK_QUANT_MODELS}")
endforeach()
