# YaRN RoPE scaling (tests/model/test_yarn.c) against tools/gen_yarn_refs.py's Hugging Face
# references in tests/data/yarn. The glob in tests/CMakeLists.txt registers test_yarn
# (CPU); the CUDA run carries the label cuda and is skipped (77) without a GPU.
target_compile_definitions(test_yarn PRIVATE AK_YARN_DIR="${CMAKE_CURRENT_LIST_DIR}/../data/yarn")
if(AKUNU_HAVE_CUDA)
  add_test(NAME test_yarn_cuda COMMAND test_yarn cuda)
  set_tests_properties(test_yarn_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77)
endif()
