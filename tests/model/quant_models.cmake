# The llama and qwen3 f32 fixtures rewritten into every type by tools/requant.py for
# test_quant_models, which also runs on the scalar kernels, and test_prefill_split. Included from tests/CMakeLists.txt.
add_test(NAME test_quant_models_scalar COMMAND test_quant_models)
set_tests_properties(test_quant_models_scalar PROPERTIES ENVIRONMENT "AKUNU_FIXTURES=${AKUNU_FIXTURES};AKUNU_SCALAR=1")
ak_test_data(gen_quant_models ENV AKUNU_QUANT_MODELS DIR ${CMAKE_BINARY_DIR}/quant_models
  TESTS test_quant_models test_quant_models_scalar test_prefill_split
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/model/gen_quant_models.sh ${AK_PYTHON} ${CMAKE_SOURCE_DIR}/tools/requant.py
          ${AKUNU_FIXTURES} ${CMAKE_BINARY_DIR}/quant_models F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K)
