# The real embedding model from scripts/get-model minilm (label real-model: fails, not
# skips, when the model is missing). Included from tests/CMakeLists.txt.
set_tests_properties(test_embed_real PROPERTIES LABELS "real-model")
set_property(TEST test_embed_real PROPERTY ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES}")
