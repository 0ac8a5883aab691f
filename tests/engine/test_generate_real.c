/* ak_generate on a real chat model (SmolLM2-135M-Instruct, scripts/get-model): a short
 * question ends with the model's end-of-turn token, greedily (chain decode, the device's
 * stop list) and sampled; the table's sample command and the host sampler give the same
 * ids for a seed; the session then holds exactly the prompt and the reply but its last
 * token. Argument: the models folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "engine/session.h"
#include "test_util.h"

static int on_token(const ak_token_info *t, void *user) {
    (void)t; (void)user;
    return 0;
}

/* One reply; returns whether it ended its turn (then checked to end with EOG). With
 * host, on_token brings each step's logits to the host sampler. */
static bool reply(ak_model *m, ak_session *s, const int32_t *ids, int n, ak_sampling_params sp, bool host, int32_t *out,
                  int *n_out, const char *what) {
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = 128;
    p.sampling = sp;
    p.ids_out = out;
    p.ids_cap = 128;
    if (host) p.on_token = on_token;
    ak_generate_result r;
    ak_err err;
    *n_out = 0;
    CHECK(ak_generate(s, ids, n, &p, NULL, NULL, &r, &err) == AK_OK, "%s: %s", what, err.msg);
    *n_out = r.n_generated;
    CHECK(r.n_generated > 1 && r.n_generated <= 128 && (r.stop == AK_STOP_EOG || r.stop == AK_STOP_LENGTH),
          "%s: stop %d after %d tokens", what, (int)r.stop, r.n_generated);
    if (r.stop == AK_STOP_EOG) CHECK(ak_token_is_eog(m, out[r.n_generated - 1]), "%s: the last id is an end-of-generation token", what);
    for (int i = 0; i + 1 < r.n_generated; i++) CHECK(!ak_token_is_eog(m, out[i]), "%s: EOG at %d went on", what, i);
    /* the cache holds the prompt and the reply but its last id, whatever the stop (akunu.h) */
    CHECK(ak_session_pos(s) == n + r.n_generated - 1, "%s: position %d", what, ak_session_pos(s));
    return r.stop == AK_STOP_EOG;
}

/* The verification pass against decode steps on a real quantized model (int8
 * activations, where any difference in rounding grows to a different logit): every row's
 * logits are bitwise those of the decode step at its position, for 17 rows of random ids. */
static void verify_rounds_as_decode(const char *path) {
    ak_model *m = NULL;
    ak_session *a = NULL, *b = NULL;
    ak_err err;
    if (ak_model_load(path, &m, &err) || ak_session_create(m, NULL, &a, &err) || ak_session_create(m, NULL, &b, &err)) {
        CHECK(0, "%s: %s", path, err.msg);
        goto out;
    }
    int V = ak_model_vocab(m), n = ak_session_verify_rows(a);
    int32_t ids[64], picks[AK_SPEC_MAX + 1], next;
    uint64_t rs = 5;
    for (int i = 0; i < 64; i++) ids[i] = (int32_t)(ak_rand_u32(&rs) % 20000) + 100;
    float *lv = malloc((size_t)n * V * sizeof *lv), *ld = malloc((size_t)V * sizeof *ld);
    CHECK(ak_prefill(a, ids, 30, &next, NULL, &err) == AK_OK && ak_prefill(b, ids, 30, &next, NULL, &err) == AK_OK, "%s", err.msg);
    CHECK(ak_session_verify(a, ids + 30, n, picks, lv, &err) == AK_OK, "%s", err.msg);
    int rows_equal = 0;
    for (int r = 0; r < n; r++) {
        int32_t pick;
        CHECK(ak_decode(b, ids[30 + r], &pick, ld, &err) == AK_OK, "%s", err.msg);
        rows_equal += !memcmp(ld, lv + (size_t)r * V, (size_t)V * sizeof *ld) && pick == picks[r];
    }
    CHECK(rows_equal == n, "%s: %d of %d verified rows equal their decode step bitwise", path, rows_equal, n);
    free(lv);
    free(ld);
out:
    ak_session_free(a);
    ak_session_free(b);
    ak_model_free(m);
}

/* The real draft pair: Qwen2.5-Coder-0.5B drafting for the 1.5B (the same vocabulary)
 * gives the 1.5B's own greedy reply, most drafts accepted. */
static void draft_pair(const char *dir) {
    char p0[4096], p1[4096];
    snprintf(p0, sizeof p0, "%s/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", dir);
    snprintf(p1, sizeof p1, "%s/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", dir);
    ak_model *dm = NULL, *tm = NULL;
    ak_session *ds = NULL, *ts = NULL;
    ak_err err;
    char *text = NULL;
    if (ak_model_load(p0, &dm, &err) || ak_model_load(p1, &tm, &err) || ak_session_create(dm, NULL, &ds, &err) ||
        ak_session_create(tm, NULL, &ts, &err)) {
        CHECK(0, "%s (scripts/get-model all)", err.msg);
        goto out;
    }
    ak_chat_message q = {.role = "user", .content = "Write a C function that returns the larger of two ints."};
    int32_t ids[256], x[48], y[48];
    int n = 0;
    CHECK(ak_chat_render(tm, &q, 1, true, &text, &err) == AK_OK && text &&
              ak_tokenize(tm, text, strlen(text), false, true, ids, 256, &n, &err) == AK_OK, "%s", err.msg);
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = 48;
    p.ids_cap = 48;
    ak_generate_result r1, r2;
    p.ids_out = x;
    CHECK(n > 0 && ak_generate(ts, ids, n, &p, NULL, NULL, &r1, &err) == AK_OK, "%s", err.msg);
    p.ids_out = y;
    p.spec_draft = 6;
    p.draft = ds;
    CHECK(n > 0 && ak_generate(ts, ids, n, &p, NULL, NULL, &r2, &err) == AK_OK, "%s", err.msg);
    CHECK(r1.n_generated == r2.n_generated && !memcmp(x, y, (size_t)r1.n_generated * sizeof *x), "the draft pair changed the reply");
    CHECK(r2.n_accepted * 2 > r2.n_drafted, "the draft pair: %d of %d accepted", r2.n_accepted, r2.n_drafted);
    printf("draft pair: %d tokens, %d drafted, %d accepted\n", r2.n_generated, r2.n_drafted, r2.n_accepted);
out:
    free(text);
    ak_session_free(ds);
    ak_session_free(ts);
    ak_model_free(dm);
    ak_model_free(tm);
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
        int32_t a[128], b[128];
        int na, nb;
        CHECK(reply(m, s, ids, n, greedy, false, a, &na, "greedy"), "greedy: the reply ends its turn");
        printf("greedy: %d tokens\n", na);
        /* sampled in the table (chain decode) and by the host sampler: the same ids for a
         * seed, since both key the draw by (seed, position) */
        int ended = 0, same = 0;
        for (uint64_t seed = 1; seed <= 6; seed++) {
            ak_sampling_params sampled = ak_sampling_default_params();
            sampled.temperature = 0.7f;
            sampled.repeat_penalty = seed % 2 ? 1.1f : 1.0f;
            sampled.seed = seed;
            ended += reply(m, s, ids, n, sampled, false, a, &na, "sampled (table)");
            reply(m, s, ids, n, sampled, true, b, &nb, "sampled (host)");
            same += na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
            printf("seed %d: %d tokens (table), %d (host)\n", (int)seed, na, nb);
        }
        CHECK(ended >= 2, "%d of 6 sampled replies ended their turn", ended);
        CHECK(same == 6, "table and host sampler agree on %d of 6 seeds", same);
        /* speculative decoding on a task that repeats its prompt: the same ids, greedy and
         * sampled (int8 activations turn any difference in rounding into a different
         * logit, so the check must round as decoding does) */
        static const char task[] = "Repeat this list exactly: apples, pears, plums, cherries, grapes, lemons, limes, "
                                   "oranges, peaches, melons, figs, dates, kiwis, mangoes.";
        ak_chat_message t = {.role = "user", .content = task};
        char *tt = NULL;
        int32_t tids[256];
        int tn = 0;
        CHECK(ak_chat_render(m, &t, 1, true, &tt, &err) == AK_OK && tt &&
                  ak_tokenize(m, tt, strlen(tt), false, true, tids, 256, &tn, &err) == AK_OK, "%s", err.msg);
        for (int sampled = 0; sampled < 2 && tn > 0; sampled++) {
            ak_generate_params p = ak_generate_default_params();
            int32_t x[96], y[96];
            p.n_predict = 96;
            p.ids_cap = 96;
            if (sampled) p.sampling = ak_sampling_default_params(), p.sampling.seed = 5;
            ak_generate_result r1, r2;
            p.ids_out = x;
            CHECK(ak_generate(s, tids, tn, &p, NULL, NULL, &r1, &err) == AK_OK, "%s", err.msg);
            p.ids_out = y;
            p.spec_draft = 8;
            CHECK(ak_generate(s, tids, tn, &p, NULL, NULL, &r2, &err) == AK_OK, "%s", err.msg);
            CHECK(r1.n_generated == r2.n_generated && !memcmp(x, y, (size_t)r1.n_generated * sizeof *x),
                  "speculation changed the %s reply", sampled ? "sampled" : "greedy");
            CHECK(r2.n_accepted > 0, "%s: %d of %d drafts accepted", sampled ? "sampled" : "greedy", r2.n_accepted, r2.n_drafted);
            printf("spec %s: %d tokens, %d drafted, %d accepted\n", sampled ? "sampled" : "greedy", r2.n_generated,
                   r2.n_drafted, r2.n_accepted);
        }
        free(tt);
    }
    free(text);
    ak_session_free(s);
    ak_model_free(m);
    snprintf(path, sizeof path, "%s/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", argc > 1 ? argv[1] : "models");
    verify_rounds_as_decode(path);
    draft_pair(argc > 1 ? argv[1] : "models");
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", argc > 1 ? argv[1] : "models");
    verify_rounds_as_decode(path);
    return ak_test_done();
}
