# nomic-bert against tools/make_nomic.py's NumPy forward pass (needs gguf, numpy).
ak_test_data(gen_nomic ENV AKUNU_NOMIC_DIR DIR ${CMAKE_BINARY_DIR}/nomic TESTS test_nomic
  COMMAND ${AK_PYTHON} ${CMAKE_SOURCE_DIR}/tools/make_nomic.py ${CMAKE_BINARY_DIR}/nomic)
