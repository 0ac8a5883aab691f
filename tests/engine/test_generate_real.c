/* ak_generate on a real chat model (SmolLM2-135M-Instruct, scripts/get-model): a short
 * question ends with the model's end-of-turn token, greedily (chain decode, the device's
 * stop list) and sampled (the host sampler), and the session then holds exactly the
 * prompt and the reply but its last token. Argument: the models folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "test_util.h"

static void ends_its_turn(ak_model *m, ak_session *s, const int32_t *ids, int n, ak_sampling_params sp, const char *what) {
    ak_generate_params p = ak_generate_default_params();
    int32_t out[128];
    p.n_predict = 128;
    p.sampling = sp;
    p.ids_out = out;
    p.ids_cap = 128;
    ak_generate_result r;
    ak_err err;
    CHECK(ak_generate(s, ids, n, &p, NULL, NULL, &r, &err) == AK_OK, "%s: %s", what, err.msg);
    printf("%s: %d tokens, stop %d\n", what, r.n_generated, (int)r.stop);
    CHECK(r.stop == AK_STOP_EOG && r.n_generated > 1 && r.n_generated < 128, "%s: stop %d after %d tokens", what,
          (int)r.stop, r.n_generated);
    CHECK(ak_token_is_eog(m, out[r.n_generated - 1]), "%s: the last id is an end-of-generation token", what);
    for (int i = 0; i + 1 < r.n_generated; i++) CHECK(!ak_token_is_eog(m, out[i]), "%s: EOG at %d went on", what, i);
    CHECK(ak_session_pos(s) == n + r.n_generated - 1, "%s: position %d", what, ak_session_pos(s));
}

int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", argc > 1 ? argv[1] : "models");
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_err err;
    if (ak_model_load(path, &m, &err)) { CHECK(0, "%s (run scripts/get-model all)", err.msg); return ak_test_done(); }
    ak_chat_message q = {.role = "user", .content = "What is the capital of France?"};
    char *text = NULL;
    int32_t ids[256];
    int n = 0;
    CHECK(ak_chat_render(m, &q, 1, true, &text, &err) == AK_OK, "%s", err.msg);
    CHECK(text && ak_tokenize(m, text, strlen(text), false, true, ids, 256, &n, &err) == AK_OK, "%s", err.msg);
    CHECK(ak_session_create(m, NULL, &s, &err) == AK_OK, "%s", err.msg);
    if (s && n > 0) {
        ak_sampling_params greedy = {0};
        ends_its_turn(m, s, ids, n, greedy, "greedy");
        ak_sampling_params sampled = ak_sampling_default_params();
        sampled.temperature = 0.7f;
        sampled.seed = 1;
        ends_its_turn(m, s, ids, n, sampled, "sampled");
    }
    free(text);
    ak_session_free(s);
    ak_model_free(m);
    return ak_test_done();
}
