# Quantization reference tests: tools/gen_quant_vectors.py writes the expected values
# (gguf-py for the ggml formats and the fixture tensors, an independent NumPy model for
# MLX affine) before test_quants and test_mlx run. Needs python3 with numpy and gguf.
# Include from tests/CMakeLists.txt after the loop that creates the tests.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(AK_PYTHON ${Python3_EXECUTABLE})
else()
  set(AK_PYTHON python3)  # the setup test then fails and the dependent tests are not run
endif()

set(AK_QUANT_VECTORS ${CMAKE_BINARY_DIR}/quant_vectors)
add_test(NAME gen_quant_vectors
         COMMAND ${AK_PYTHON} ${CMAKE_SOURCE_DIR}/tools/gen_quant_vectors.py ${AK_QUANT_VECTORS}
                 --fixtures ${AKUNU_FIXTURES})
set_tests_properties(gen_quant_vectors PROPERTIES FIXTURES_SETUP quant_vectors)

foreach(t test_quants test_mlx)
  if(NOT TEST ${t})
    message(FATAL_ERROR "quants.cmake: test ${t} does not exist yet; include this file after ak_test()")
  endif()
  set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED quant_vectors)
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "AKUNU_QUANT_VECTORS=${AK_QUANT_VECTORS}")
endforeach()
