# CUDA tests, built whenever the CUDA backend is (so CI, which has nvcc but no GPU,
# compiles them). They carry the label `cuda`: `ctest -L cuda` runs them, `ctest -LE cuda`
# leaves them out. Without a GPU they exit 77 and ctest reports them as skipped, so a
# plain `ctest` on a machine without a GPU stays green.
# The sources are not named test_*.c, so the glob in tests/CMakeLists.txt does not take them.
if(AKUNU_HAVE_CUDA)
  foreach(name cuda_kernels cuda_fixtures)
    add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.c)
    target_link_libraries(${name} PRIVATE aktest)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS cuda SKIP_RETURN_CODE 77
      ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES}")
  endforeach()
  # exactness at depth (tests/model/test_depth.c, every KV type) on the CUDA backend
  add_test(NAME test_depth_cuda COMMAND test_depth cuda)
  set_tests_properties(test_depth_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES}")
  # encoders against Hugging Face / NumPy (tests/model/test_bert.c, test_nomic.c)
  add_test(NAME test_bert_cuda COMMAND test_bert cuda)
  set_tests_properties(test_bert_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77
    ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES}")
  add_test(NAME test_nomic_cuda COMMAND test_nomic cuda)
  set_tests_properties(test_nomic_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED gen_nomic ENVIRONMENT "AKUNU_NOMIC_DIR=${CMAKE_BINARY_DIR}/nomic")
  # Hugging Face / MLX safetensors directories (every MLX bit width) on the GPU
  add_test(NAME test_hf_models_cuda COMMAND test_hf_models cuda)
  set_tests_properties(test_hf_models_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 300
    FIXTURES_REQUIRED gen_hf_models
    ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES};AKUNU_HF_MODELS=${CMAKE_BINARY_DIR}/hf_models")
  # prefill independent of how the prompt is cut (tests/engine/test_prefill_split.c)
  add_test(NAME test_prefill_split_cuda COMMAND test_prefill_split cuda)
  set_tests_properties(test_prefill_split_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 300
    FIXTURES_REQUIRED gen_quant_models
    ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES};AKUNU_QUANT_MODELS=${CMAKE_BINARY_DIR}/quant_models")
endif()
