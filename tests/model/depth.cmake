# Exactness at depth (tests/model/test_depth.c): the fixtures over 4200 ids against
# tools/gen_depth_refs.py's Hugging Face logits in tests/data/depth. The glob in
# tests/CMakeLists.txt registers test_depth (CPU); the CUDA run is in cuda_tests.cmake.
target_compile_definitions(test_depth PRIVATE AK_DEPTH_DIR="${CMAKE_CURRENT_LIST_DIR}/../data/depth")
set_tests_properties(test_depth PROPERTIES TIMEOUT 300)
