# llama.cpp's grammars/ folder for test_grammar (from PyPI's llama-cpp-python sdist).
ak_test_data(gen_llama_grammars ENV AKUNU_LLAMA_GRAMMARS DIR ${CMAKE_BINARY_DIR}/llama_grammars TESTS test_grammar
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/engine/llama_grammars.sh ${CMAKE_BINARY_DIR}/llama_grammars)
target_compile_definitions(test_grammar PRIVATE AK_MODELS="${CMAKE_SOURCE_DIR}/models")
