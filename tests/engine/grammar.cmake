# llama.cpp's grammars/ folder for test_grammar (from PyPI's llama-cpp-python sdist).
ak_test_data(gen_llama_grammars ENV AKUNU_LLAMA_GRAMMARS DIR ${CMAKE_BINARY_DIR}/llama_grammars TESTS test_grammar
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/engine/llama_grammars.sh ${CMAKE_BINARY_DIR}/llama_grammars)
target_compile_definitions(test_grammar PRIVATE AK_MODELS="${CMAKE_SOURCE_DIR}/models")

# Constrained generation (tests/engine/constrained.c) checked with jsonschema: a random-weight
# fixture and the real default model under JSON mode and ten schemas.
add_executable(constrained ${CMAKE_CURRENT_SOURCE_DIR}/engine/constrained.c)
target_link_libraries(constrained PRIVATE aktest)
add_test(NAME test_constrained COMMAND ${AK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/engine/test_constrained.py
         $<TARGET_FILE:constrained> ${CMAKE_SOURCE_DIR}/models)
set_tests_properties(test_constrained PROPERTIES LABELS "real-model" TIMEOUT 1200
                     ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES}")
