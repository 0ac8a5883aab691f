# nomic-bert against tools/make_nomic.py's NumPy forward pass (needs gguf, numpy).
add_test(NAME gen_nomic COMMAND python3 ${CMAKE_SOURCE_DIR}/tools/make_nomic.py ${CMAKE_BINARY_DIR}/nomic)
set_tests_properties(gen_nomic PROPERTIES FIXTURES_SETUP nomic)
set_tests_properties(test_nomic PROPERTIES FIXTURES_REQUIRED nomic ENVIRONMENT "AKUNU_NOMIC_DIR=${CMAKE_BINARY_DIR}/nomic")
