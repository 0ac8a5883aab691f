# Reference-dequantization vectors from gguf-py (tools/gen_quant_vectors.py, needs gguf
# and numpy) for test_quants and test_mlx. Included from tests/CMakeLists.txt.
ak_test_data(gen_quant_vectors ENV AKUNU_QUANT_VECTORS DIR ${CMAKE_BINARY_DIR}/quant_vectors
  TESTS test_quants test_mlx
  COMMAND ${AK_PYTHON} ${CMAKE_SOURCE_DIR}/tools/gen_quant_vectors.py ${CMAKE_BINARY_DIR}/quant_vectors
          --fixtures ${AKUNU_FIXTURES})
