# HF/MLX safetensors directories made from the fixtures by tools/make_mlx.py (through
# gen_hf_models.sh) for test_hf_models. Included from tests/CMakeLists.txt.
ak_test_data(gen_hf_models ENV AKUNU_HF_MODELS DIR ${CMAKE_BINARY_DIR}/hf_models TESTS test_hf_models test_text_api
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/model/gen_hf_models.sh ${AK_PYTHON} ${AKUNU_FIXTURES} ${CMAKE_BINARY_DIR}/hf_models)
