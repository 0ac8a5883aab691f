# Tokenizer tests on the real models that scripts/get-model fetches into models/
# (SmolLM2-135M-Instruct: gpt2 BPE; Gemma 3 270M: SentencePiece, 262k vocab).
# CI must run `scripts/get-model all` before ctest: this test fails, not skips, when
# the models are missing. The fixture-only part is the plain test_tokenizer.
# Included from tests/CMakeLists.txt after the test_*.c loop.
add_test(NAME test_tokenizer_real COMMAND test_tokenizer --real ${CMAKE_SOURCE_DIR}/models)
set_tests_properties(test_tokenizer_real PROPERTIES LABELS "real-model"
  ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES};AKUNU_SRC=${CMAKE_SOURCE_DIR}")
set_tests_properties(test_tokenizer PROPERTIES LABELS "fixtures"
  ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES};AKUNU_SRC=${CMAKE_SOURCE_DIR}")
