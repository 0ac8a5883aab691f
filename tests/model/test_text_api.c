/* The text half of akunu.h on the llama fixture (SentencePiece, all byte tokens): the
 * (buf, cap, &n) convention of ak_tokenize / ak_token_to_piece / ak_detokenize (size
 * queries, buffers too small, exact fits), the streaming detokenizer (a size query
 * consumes nothing), end-of-generation queries, chat rendering by family name; and a
 * Hugging Face directory, which has no tokenizer (AKUNU_HF_MODELS). */
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "test_util.h"

static void test_tokens(ak_model *m) {
    ak_err err;
    const char *text = "Hello world, \xe2\x82\xac 42";
    size_t len = strlen(text);
    int n = -1;
    CHECK(ak_model_has_tokenizer(m), "the fixture has a tokenizer");
    CHECK(ak_tokenize(m, text, len, true, false, NULL, 0, &n, &err) == AK_OK && n > 3, "size query: %d", n);
    int32_t ids[64], few[2];
    int k = -1;
    CHECK(ak_tokenize(m, text, len, true, false, few, 2, &k, &err) == AK_ERR_ARG && k == n, "too small: %d", k);
    CHECK(ak_tokenize(m, text, len, true, false, ids, n, &k, &err) == AK_OK && k == n, "exact fit");
    CHECK(ids[0] == ak_token_bos(m) && ak_model_adds_bos(m), "BOS first (%d)", ids[0]);

    char out[256];
    size_t sz = 0;
    CHECK(ak_detokenize(m, ids, n, false, NULL, 0, &sz, &err) == AK_OK && sz == len, "detokenize size %zu", sz);
    CHECK(ak_detokenize(m, ids, n, false, out, len, &sz, &err) == AK_OK && !memcmp(out, text, len), "exact fit, no NUL");
    CHECK(ak_detokenize(m, ids, n, false, out, sizeof out, &sz, &err) == AK_OK && !strcmp(out, text), "round trip: '%s'", out);
    CHECK(ak_detokenize(m, ids, n, false, out, len - 1, &sz, &err) == AK_ERR_ARG && sz == len, "too small");
    int32_t bad = ak_model_vocab(m);
    CHECK(ak_detokenize(m, &bad, 1, false, out, sizeof out, &sz, &err) == AK_ERR_ARG && strstr(err.msg, "outside"),
          "id outside the vocabulary: %s", err.msg);

    int32_t bos = ak_token_bos(m);
    CHECK(ak_token_to_piece(m, bos, false, out, sizeof out, &sz, &err) == AK_OK && sz == 0 && out[0] == 0, "BOS hidden");
    CHECK(ak_token_to_piece(m, bos, true, out, sizeof out, &sz, &err) == AK_OK && !strcmp(out, "<s>"), "BOS shown: '%s'", out);
    CHECK(ak_token_to_piece(m, bos, true, NULL, 0, &sz, &err) == AK_OK && sz == 3, "piece size query");
    CHECK(ak_token_to_piece(m, -1, true, out, sizeof out, &sz, &err) == AK_ERR_ARG, "negative id");
    CHECK(ak_token_is_eog(m, ak_token_eos(m)) && !ak_token_is_eog(m, bos) && !ak_token_is_eog(m, -5), "EOG queries");
}

static void test_detokenizer(ak_model *m) {
    ak_err err;
    ak_detokenizer *d = NULL;
    CHECK(ak_detokenizer_create(m, false, &d, &err) == AK_OK && d, "%s", err.msg);
    if (!d) return;
    /* the euro sign is not in the 512-token vocabulary: it falls back to three byte tokens */
    int32_t ids[8], *euro = ids;
    int n = 0;
    CHECK(ak_tokenize(m, "\xe2\x82\xac", 3, false, false, ids, 8, &n, &err) == AK_OK && n >= 3, "euro: %d ids", n);
    if (n < 3) { ak_detokenizer_free(d); return; }
    euro = ids + n - 3;
    char out[16];
    size_t sz = 9;
    CHECK(ak_detokenizer_push(d, euro[0], NULL, 0, &sz, &err) == AK_OK && sz == 0, "held: size 0");
    CHECK(ak_detokenizer_push(d, euro[0], out, sizeof out, &sz, &err) == AK_OK && sz == 0, "first byte held");
    CHECK(ak_detokenizer_push(d, euro[1], out, sizeof out, &sz, &err) == AK_OK && sz == 0, "second byte held");
    /* asking twice changes nothing: the query consumed nothing */
    CHECK(ak_detokenizer_push(d, euro[2], NULL, 0, &sz, &err) == AK_OK && sz == 3, "size query: %zu", sz);
    CHECK(ak_detokenizer_push(d, euro[2], NULL, 0, &sz, &err) == AK_OK && sz == 3, "second size query: %zu", sz);
    CHECK(ak_detokenizer_push(d, euro[2], out, 2, &sz, &err) == AK_ERR_ARG && sz == 3, "too small");
    CHECK(ak_detokenizer_push(d, euro[2], out, sizeof out, &sz, &err) == AK_OK && !strcmp(out, "\xe2\x82\xac"), "euro");
    CHECK(ak_detokenizer_push(d, euro[0], out, sizeof out, &sz, &err) == AK_OK && sz == 0, "held again");
    CHECK(ak_detokenizer_flush(d, NULL, 0, &sz, &err) == AK_OK && sz == 3, "flush size");
    CHECK(ak_detokenizer_flush(d, out, sizeof out, &sz, &err) == AK_OK && !strcmp(out, "\xEF\xBF\xBD"), "U+FFFD");
    ak_detokenizer_push(d, euro[0], out, sizeof out, &sz, &err);
    ak_detokenizer_reset(d);
    CHECK(ak_detokenizer_flush(d, out, sizeof out, &sz, &err) == AK_OK && sz == 0, "reset forgets");
    ak_detokenizer_free(d);
}

static void test_chat(ak_model *m) {
    ak_err err;
    char *out = NULL;
    ak_chat_message msgs[3] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}, {.role = "tool", .content = "{\"t\": 1}"}};
    CHECK(!ak_model_chat_template(m) && !ak_model_chat_family(m), "the fixture has no chat template");
    CHECK(ak_chat_render(m, msgs, 2, true, &out, &err) == AK_ERR_UNSUPPORTED && !out, "no template: %s", err.msg);
    CHECK(ak_model_set_chat_template(m, "chatml", &err) == AK_OK && !strcmp(ak_model_chat_family(m), "chatml"), "chatml");
    CHECK(ak_chat_render(m, msgs, 3, true, &out, &err) == AK_OK && out, "%s", err.msg);
    const char *want = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>tool\n{\"t\": 1}<|im_end|>\n<|im_start|>assistant\n";
    CHECK(out && !strcmp(out, want), "chatml: '%s'", out);
    free(out);
    out = NULL;
    CHECK(ak_model_set_chat_template(m, "gemma", &err) == AK_OK, "gemma");
    ak_chat_message twice[2] = {{.role = "user", .content = "a"}, {.role = "user", .content = "b"}};
    CHECK(ak_chat_render(m, twice, 2, true, &out, &err) == AK_ERR_ARG && !out, "gemma rejects: %s", err.msg);
    CHECK(ak_chat_render(m, msgs + 1, 1, false, &out, &err) == AK_OK && out && !strncmp(out, "<s><start_of_turn>user\nHi", 25),
          "gemma opens with the model's BOS text: '%s'", out);
    free(out);
    CHECK(ak_model_set_chat_template(m, "{{ nothing we know }}", &err) == AK_ERR_UNSUPPORTED, "unknown template");
    CHECK(!strcmp(ak_model_chat_family(m), "gemma"), "a failed set keeps the template");
}

static void test_no_tokenizer(void) {
    const char *dir = getenv("AKUNU_HF_MODELS");
    char path[4096];
    snprintf(path, sizeof path, "%s/llama-f32", dir ? dir : "hf_models");
    ak_model *m = NULL;
    ak_err err;
    if (ak_model_load(path, &m, &err)) { CHECK(0, "%s: %s", path, err.msg); return; }
    int n = 0;
    CHECK(!ak_model_has_tokenizer(m), "a Hugging Face directory has no tokenizer");
    CHECK(ak_tokenize(m, "x", 1, true, false, NULL, 0, &n, &err) == AK_ERR_UNSUPPORTED && strstr(err.msg, "token ids"),
          "tokenize says why: %s", err.msg);
    ak_detokenizer *d = NULL;
    CHECK(ak_detokenizer_create(m, false, &d, &err) == AK_ERR_UNSUPPORTED && !d, "no detokenizer");
    ak_session *s = NULL;
    if (ak_session_create(m, NULL, &s, &err) == AK_OK) {
        int32_t ids[2] = {1, 2};
        CHECK(ak_generate(s, ids, 2, NULL, NULL, NULL, NULL, &err) == AK_ERR_UNSUPPORTED, "generate: %s", err.msg);
        ak_session_free(s);
    }
    ak_model_free(m);
}

int main(void) {
    ak_model *m = NULL;
    ak_err err;
    if (ak_model_load(ak_fixture("llama/llama-f32.gguf"), &m, &err)) {
        CHECK(0, "%s", err.msg);
        return ak_test_done();
    }
    test_tokens(m);
    test_detokenizer(m);
    test_chat(m);
    ak_model_free(m);
    test_no_tokenizer();
    return ak_test_done();
}
