# akunu serve's robustness tests (Python 3 standard library only) on the real models of
# scripts/get-model: hostile requests and clients, the API key, the rate limit and the
# queue, and 256 requests from 32 clients checked answer by answer. Each script bounds
# itself (a watchdog below its TIMEOUT) and stops every server it started.
if(AKUNU_HAVE_SERVER)
  set(AK_SERVER_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/server)
  set(AK_SMOLLM ${CMAKE_SOURCE_DIR}/models/SmolLM2-135M-Instruct.Q4_1.gguf)
  set(AK_MINILM ${CMAKE_SOURCE_DIR}/models/all-MiniLM-L6-v2-f32.gguf)
  add_test(NAME test_server_hostile COMMAND ${AK_PYTHON} ${AK_SERVER_TESTS}/test_hostile.py
           $<TARGET_FILE:akunu_cli> ${AK_SMOLLM} ${AK_MINILM})
  add_test(NAME test_server_auth_rate COMMAND ${AK_PYTHON} ${AK_SERVER_TESTS}/test_auth_rate.py
           $<TARGET_FILE:akunu_cli> ${AK_SMOLLM})
  add_test(NAME test_server_load COMMAND ${AK_PYTHON} ${AK_SERVER_TESTS}/test_load.py
           $<TARGET_FILE:akunu_cli> ${AK_SMOLLM})
  set_tests_properties(test_server_hostile PROPERTIES LABELS "server;real-model" TIMEOUT 1800)
  set_tests_properties(test_server_auth_rate PROPERTIES LABELS "server;real-model" TIMEOUT 900)
  set_tests_properties(test_server_load PROPERTIES LABELS "server;real-model" TIMEOUT 900)
endif()
