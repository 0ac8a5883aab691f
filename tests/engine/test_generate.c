/* ak_generate and the text it streams. The text side (engine/generate.h) is driven with
 * chosen ids of the llama fixture's SentencePiece vocabulary (all 256 byte tokens):
 * characters split across tokens never come out half, stop strings split across tokens
 * are held back and cut, end of generation and cancellation stop. The loop itself runs
 * the llama fixture: greedy ids equal Hugging Face's continuation, n_predict, the
 * context's end, cancellation within one token (the KV cache rewound to it), reuse of
 * the cached prefix, seeded sampling that reproduces, and each token's probabilities;
 * sampling in the table equals the host sampler, whatever the chunks and chains;
 * speculative decoding keeps the ids; a deferred grammar starts after its text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "engine/generate.h"
#include "fixture_util.h"
#include "model/model.h"
#include "test_util.h"

/* Everything the callback saw, and when. */
typedef struct {
    char text[4096];
    size_t len;
    int calls, cancel_at;   /* cancel_at: return 1 on that call (1-based); 0: never */
    bool bad_utf8;          /* a call ended inside a character */
} sink;

static bool utf8_whole(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static int on_piece(const char *text, size_t len, void *user) {
    sink *k = user;
    k->calls++;
    if (!utf8_whole(text, len)) k->bad_utf8 = true;
    if (k->len + len < sizeof k->text) {
        memcpy(k->text + k->len, text, len);
        k->len += len;
        k->text[k->len] = 0;
    }
    return k->cancel_at && k->calls >= k->cancel_at;
}

static int32_t byte_id(const ak_tokenizer *t, unsigned char b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    return ak_tokenizer_find(t, name, strlen(name));
}

/* Pushes the bytes of s one byte token each. */
static bool push_bytes(ak_textout *g, const char *s) {
    for (; *s; s++)
        if (!ak_textout_push(g, byte_id(g->tok, (unsigned char)*s))) return false;
    return true;
}

static void test_utf8(const ak_tokenizer *t) {
    sink k = {0};
    ak_textout g;
    ak_err err;
    CHECK(ak_textout_open(&g, t, false, NULL, 0, on_piece, &k, &err) == AK_OK, "%s", err.msg);
    /* the euro sign and an emoji, one byte per token: nothing shows until each is whole */
    CHECK(ak_textout_push(&g, byte_id(t, 0xE2)) && ak_textout_push(&g, byte_id(t, 0x82)), "push");
    CHECK(k.len == 0, "half a character was shown: %zu bytes", k.len);
    CHECK(ak_textout_push(&g, byte_id(t, 0xAC)) && !strcmp(k.text, "\xE2\x82\xAC"), "euro sign: '%s'", k.text);
    CHECK(push_bytes(&g, "a\xF0\x9F\x98\x80" "b"), "push");
    CHECK(!strcmp(k.text, "\xE2\x82\xAC" "a\xF0\x9F\x98\x80" "b") && !k.bad_utf8, "emoji: '%s'", k.text);
    /* a character cut short at the end: U+FFFD, and a stray continuation byte too */
    CHECK(push_bytes(&g, "\x80" "c\xE2\x82"), "push");
    ak_textout_finish(&g);
    CHECK(!strcmp(k.text, "\xE2\x82\xAC" "a\xF0\x9F\x98\x80" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD"), "invalid bytes: '%s'", k.text);
    CHECK(!k.bad_utf8 && g.stop == AK_STOP_NONE, "every call whole");
    ak_textout_close(&g);
}

static void test_stop_strings(const ak_tokenizer *t) {
    /* "hello world" as one byte per token: the stop "lo wo" starts in one token and
     * ends four later; "lo" must never show */
    const char *const stops[] = {"lo wo", "zz"};
    sink k = {0};
    ak_textout g;
    ak_err err;
    CHECK(ak_textout_open(&g, t, false, stops, 2, on_piece, &k, &err) == AK_OK, "%s", err.msg);
    CHECK(push_bytes(&g, "he") && !strcmp(k.text, "he"), "before the stop: '%s'", k.text);
    CHECK(ak_textout_push(&g, byte_id(t, 'l')) && !strcmp(k.text, "he"), "'l' held back: '%s'", k.text);
    CHECK(ak_textout_push(&g, byte_id(t, 'l')) && !strcmp(k.text, "hel"), "the first 'l' shown: '%s'", k.text);
    CHECK(ak_textout_push(&g, byte_id(t, 'o')) && ak_textout_push(&g, byte_id(t, ' ')) &&
              ak_textout_push(&g, byte_id(t, 'w')) && !strcmp(k.text, "hel"), "'lo w' held back: '%s'", k.text);
    CHECK(!ak_textout_push(&g, byte_id(t, 'o')) && g.stop == AK_STOP_STRING, "the stop string ends it");
    CHECK(!strcmp(k.text, "hel"), "cut before the stop: '%s'", k.text);
    ak_textout_finish(&g);
    CHECK(!strcmp(k.text, "hel"), "nothing after the stop: '%s'", k.text);
    ak_textout_close(&g);

    /* a prefix that never completes is shown once it cannot, or at the end */
    sink k2 = {0};
    CHECK(ak_textout_open(&g, t, false, stops, 2, on_piece, &k2, &err) == AK_OK, "%s", err.msg);
    CHECK(push_bytes(&g, "hello!"), "push");
    CHECK(!strcmp(k2.text, "hello!"), "released: '%s'", k2.text);
    CHECK(push_bytes(&g, "lo w"), "push");
    ak_textout_finish(&g);
    CHECK(!strcmp(k2.text, "hello!lo w") && g.stop == AK_STOP_NONE, "held text shown at the end: '%s'", k2.text);
    ak_textout_close(&g);
}

static void test_eog_cancel_special(const ak_tokenizer *t) {
    ak_textout g;
    ak_err err;
    sink k = {0};
    CHECK(ak_textout_open(&g, t, false, NULL, 0, on_piece, &k, &err) == AK_OK, "%s", err.msg);
    CHECK(push_bytes(&g, "ab") && !ak_textout_push(&g, ak_tokenizer_eos(t)) && g.stop == AK_STOP_EOG, "EOS ends it");
    ak_textout_finish(&g);
    CHECK(!strcmp(k.text, "ab"), "EOS shows no text: '%s'", k.text);
    ak_textout_close(&g);

    sink c = {.cancel_at = 2};
    CHECK(ak_textout_open(&g, t, false, NULL, 0, on_piece, &c, &err) == AK_OK, "%s", err.msg);
    CHECK(ak_textout_push(&g, byte_id(t, 'x')), "first piece goes on");
    CHECK(!ak_textout_push(&g, byte_id(t, 'y')) && g.stop == AK_STOP_CANCELLED, "the callback cancels");
    ak_textout_finish(&g);
    CHECK(!strcmp(c.text, "xy") && c.calls == 2, "no call after cancelling: '%s' %d", c.text, c.calls);
    ak_textout_close(&g);

    /* control tokens: hidden unless special (BOS here; EOG tokens never show) */
    for (int special = 0; special < 2; special++) {
        sink s = {0};
        CHECK(ak_textout_open(&g, t, special, NULL, 0, on_piece, &s, &err) == AK_OK, "%s", err.msg);
        ak_textout_push(&g, ak_tokenizer_bos(t));
        ak_textout_finish(&g);
        CHECK(!strcmp(s.text, special ? "<s>" : ""), "BOS with special=%d: '%s'", special, s.text);
        ak_textout_close(&g);
    }
}

/* ---- the loop on the llama fixture ---- */

/* on_token's view: every call checked for a sane distribution. */
typedef struct {
    int n, bad, cancel_at;
    float first;
} probe;

static int on_token(const ak_token_info *t, void *user) {
    probe *p = user;
    if (!p->n) p->first = t->logprob;
    p->n++;
    bool ok = t->n_top == 5 && t->logprob <= 0 && t->top[0].id == t->id && t->top[0].logprob == t->logprob;
    double mass = 0;
    for (int i = 0; i < t->n_top; i++) {
        mass += exp(t->top[i].logprob);
        ok = ok && (i == 0 || t->top[i].logprob <= t->top[i - 1].logprob);
    }
    if (!ok || mass > 1 + 1e-5) p->bad++;
    return p->cancel_at && p->n >= p->cancel_at;
}

static ak_session *session(ak_model *m, int n_ctx) {
    ak_session_params p = ak_session_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = 2;
    ak_session *s = NULL;
    ak_err err;
    CHECK(ak_session_create(m, &p, &s, &err) == AK_OK, "%s", err.msg);
    return s;
}

static void test_loop(const ak_fx *f, ak_model *m) {
    int32_t want[16];
    CHECK(ak_json_ints(f->manifest, "llama", "greedy_continuation", want, 16) == 16, "manifest continuation");
    ak_session *s = session(m, 64);
    if (!s) return;
    ak_err err;
    ak_generate_result r;
    int32_t ids[64];
    sink k = {0};

    /* greedy: Hugging Face's continuation, n_predict, the KV cache holds all but the last */
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = 16;
    p.ids_out = ids;
    p.ids_cap = 64;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, on_piece, &k, &r, &err) == AK_OK, "%s", err.msg);
    CHECK(r.n_generated == 16 && r.stop == AK_STOP_LENGTH && r.n_prompt == f->n_prompt && r.n_cached == 0,
          "greedy: %d generated, stop %d", r.n_generated, (int)r.stop);
    CHECK(!memcmp(ids, want, sizeof want), "greedy ids differ from Hugging Face's continuation");
    CHECK(ak_session_pos(s) == f->n_prompt + 15, "position %d", ak_session_pos(s));
    CHECK(!memcmp(ak_session_tokens(s), f->prompt, (size_t)f->n_prompt * 4) &&
              !memcmp(ak_session_tokens(s) + f->n_prompt, ids, 15 * 4), "the session's ids");
    /* the pieces one after the other (the stream keeps a SentencePiece leading space) */
    char text[4096];
    size_t tn = 0;
    for (int i = 0; i < 16; i++) {
        size_t pn = 0;
        CHECK(ak_token_to_piece(m, ids[i], false, text + tn, sizeof text - tn, &pn, &err) == AK_OK, "%s", err.msg);
        tn += pn;
    }
    CHECK(!k.bad_utf8 && (!utf8_whole(text, tn) || (k.len == tn && !memcmp(k.text, text, tn))),
          "streamed text '%s' is not the ids' text '%.*s'", k.text, (int)tn, text);

    /* the same prompt again reuses all but its last token; a longer one, the whole cache */
    int32_t longer[64];
    memcpy(longer, f->prompt, (size_t)f->n_prompt * 4);
    memcpy(longer + f->n_prompt, want, 8 * 4);
    int32_t again[16];
    p.ids_out = again;
    p.n_predict = 8;
    CHECK(ak_generate(s, longer, f->n_prompt + 8, &p, NULL, NULL, &r, &err) == AK_OK, "%s", err.msg);
    CHECK(r.n_cached == f->n_prompt + 8 - 1 && !memcmp(again, want + 8, 8 * 4), "prefix reuse: %d cached", r.n_cached);

    /* the context's end */
    ak_session *small = session(m, f->n_prompt + 5);
    if (small) {
        p.n_predict = -1;
        p.ids_out = ids;
        CHECK(ak_generate(small, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK, "%s", err.msg);
        CHECK(r.stop == AK_STOP_CONTEXT && r.n_generated == 5 && !memcmp(ids, want, 5 * 4), "context: %d, stop %d",
              r.n_generated, (int)r.stop);
        ak_session_free(small);
    }

    /* cancelling at the first piece: within one token, the cache rewound to it */
    int first_text = 0;
    for (size_t need = 0; first_text < 16; first_text++) {
        ak_token_to_piece(m, want[first_text], false, NULL, 0, &need, &err);
        if (need) break;
    }
    sink c = {.cancel_at = 1};
    p.n_predict = 16;
    ak_session_reset(s);
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, on_piece, &c, &r, &err) == AK_OK, "%s", err.msg);
    CHECK(r.stop == AK_STOP_CANCELLED && r.n_generated == first_text + 1 && c.calls == 1, "cancel: %d generated, %d calls",
          r.n_generated, c.calls);
    CHECK(ak_session_pos(s) == f->n_prompt + first_text, "rewound to %d, want %d", ak_session_pos(s),
          f->n_prompt + first_text);

    /* a stop string from the middle of the greedy text */
    if (k.len > 6) {
        char stop[4] = {k.text[k.len / 2], k.text[k.len / 2 + 1], k.text[k.len / 2 + 2], 0};
        const char *stops[] = {stop};
        char *at = strstr(k.text, stop);
        sink t = {0};
        p.stop = stops;
        p.n_stop = 1;
        CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, on_piece, &t, &r, &err) == AK_OK, "%s", err.msg);
        CHECK(r.stop == AK_STOP_STRING && t.len == (size_t)(at - k.text) && !memcmp(t.text, k.text, t.len),
              "stop '%s': got '%s'", stop, t.text);
        p.stop = NULL;
        p.n_stop = 0;
    }

    /* seeded sampling reproduces; another seed goes another way; top-k 1 is greedy */
    p.sampling = ak_sampling_default_params();
    p.sampling.temperature = 1.5f;
    p.sampling.top_k = 0;
    p.sampling.top_p = 1;
    p.sampling.min_p = 0;
    p.sampling.seed = 7;
    int32_t a[16], b[16], o[16];
    p.ids_out = a;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == 16, "%s", err.msg);
    p.ids_out = b;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == 16, "%s", err.msg);
    CHECK(!memcmp(a, b, sizeof a), "the same seed gives the same ids");
    bool differs = false;
    p.ids_out = o;
    for (uint64_t seed = 8; seed < 12 && !differs; seed++) {
        p.sampling.seed = seed;
        ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err);
        differs = memcmp(a, o, sizeof a) != 0;
    }
    CHECK(differs, "other seeds give other ids");
    p.sampling.top_k = 1;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && !memcmp(o, want, sizeof o),
          "top-k 1 is greedy");

    /* each token's probabilities: greedy picks the most likely, the first equals the
     * log-softmax of the prompt's last logits, and the alternatives come best first */
    probe pr = {0};
    p.sampling = (ak_sampling_params){0};
    p.on_token = on_token;
    p.token_user = &pr;
    p.n_top = 5;
    p.ids_out = o;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == 16, "%s", err.msg);
    CHECK(!memcmp(o, want, sizeof o) && pr.n == 16 && !pr.bad, "on_token: greedy ids, %d calls, %d bad", pr.n, pr.bad);
    float *lg = malloc((size_t)ak_model_vocab(m) * sizeof *lg);
    ak_session *fresh = session(m, 64);
    int32_t next;
    if (lg && fresh && ak_prefill(fresh, f->prompt, f->n_prompt, &next, lg, &err) == AK_OK) {
        double mx = lg[0], sum = 0;
        for (int i = 1; i < ak_model_vocab(m); i++) mx = lg[i] > mx ? lg[i] : mx;
        for (int i = 0; i < ak_model_vocab(m); i++) sum += exp(lg[i] - mx);
        double lp = lg[want[0]] - mx - log(sum);
        CHECK(fabs(pr.first - lp) < 1e-4, "first logprob %g, log-softmax %g", pr.first, lp);
    }
    free(lg);
    ak_session_free(fresh);
    probe stop = {.cancel_at = 3};
    p.token_user = &stop;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.stop == AK_STOP_CANCELLED &&
              r.n_generated == 3 && stop.n == 3, "on_token cancels: %d generated", r.n_generated);
    p.n_top = AK_MAX_TOP + 1;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_ERR_ARG, "n_top too large");
    p.on_token = NULL;
    p.n_top = 0;

    /* bad input */
    CHECK(ak_generate(s, f->prompt, 0, &p, NULL, NULL, &r, &err) == AK_ERR_ARG, "empty prompt");
    int32_t bad[2] = {1, 9999};
    CHECK(ak_generate(s, bad, 2, &p, NULL, NULL, &r, &err) == AK_ERR_ARG, "id outside the vocabulary: %s", err.msg);
    ak_session_free(s);
}

static int no_op(const ak_token_info *t, void *user) {
    (void)t; (void)user;
    return 0;
}

/* Sampling in the table: the same seed gives the same ids whatever the prefill chunk,
 * the chain lengths, and whether the table or the host sampler draws; the table refuses
 * what only the host samples; afterwards decode is greedy again. */
static void test_sampled_chain(const ak_fx *f, ak_model *m) {
    ak_sampling_params sp = ak_sampling_default_params();
    sp.temperature = 1.2f;
    sp.top_p = 0.9f;
    sp.repeat_penalty = 1.2f;
    sp.presence_penalty = 0.1f;
    sp.penalty_last_n = 16;
    sp.seed = 3;
    enum { N = 24 };
    int32_t ref[N], got[N];
    ak_err err;
    ak_generate_result r;
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = N;
    p.sampling = sp;
    const int chunks[] = {512, 1, 5};
    for (int c = 0; c < 3; c++) {
        ak_session_params sp2 = ak_session_default_params();
        sp2.n_ctx = 64;
        sp2.chunk = chunks[c];
        ak_session *s = NULL;
        if (ak_session_create(m, &sp2, &s, &err)) { CHECK(0, "%s", err.msg); return; }
        p.ids_out = c ? got : ref;
        p.ids_cap = N;
        p.on_token = NULL;
        CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == N, "%s", err.msg);
        if (c) CHECK(!memcmp(ref, got, sizeof ref), "prefill chunk %d: other sampled ids", chunks[c]);
        if (!c) {   /* ak_generate leaves the table greedy */
            int32_t want[2], next;
            ak_json_ints(f->manifest, "llama", "greedy_continuation", want, 2);
            ak_session_reset(s);
            CHECK(ak_prefill(s, f->prompt, f->n_prompt, &next, NULL, &err) == AK_OK && next == want[0], "greedy after generate");
        }
        if (c == 1) {   /* the host sampler (on_token brings the logits back) */
            p.on_token = no_op;
            CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == N, "%s", err.msg);
            CHECK(!memcmp(ref, got, sizeof ref), "the host sampler draws other ids than the table");
        }
        if (c == 2) {   /* the token calls: one chain of N - 1, or N - 1 chains of one */
            int32_t next, one[N];
            int n = 0;
            ak_session_reset(s);
            CHECK(ak_session_set_sampling(s, &sp, &err) == AK_OK, "%s", err.msg);
            CHECK(ak_prefill(s, f->prompt, f->n_prompt, &next, NULL, &err) == AK_OK && next == ref[0], "prefill samples");
            CHECK(ak_chain_decode(s, next, N - 1, NULL, 0, got, &n, &err) == AK_OK && n == N - 1 &&
                      !memcmp(got, ref + 1, (N - 1) * sizeof *got), "one chain: other ids");
            ak_session_rewind(s, f->n_prompt, &err);
            int32_t tok = next;
            for (int i = 0; i < N - 1; i++) {
                CHECK(ak_chain_decode(s, tok, 1, NULL, 0, &one[i], &n, &err) == AK_OK && n == 1, "%s", err.msg);
                tok = one[i];
            }
            CHECK(!memcmp(one, ref + 1, (N - 1) * sizeof *one), "chains of one: other ids");
            ak_sampling_params wide = sp;
            wide.top_k = 0;
            CHECK(ak_session_set_sampling(s, &wide, &err) == AK_ERR_UNSUPPORTED, "top-k off is the host's");
            wide.top_k = 40;
            wide.penalty_last_n = 5000;
            CHECK(ak_session_set_sampling(s, &wide, &err) == AK_ERR_UNSUPPORTED, "a window of 5000 is the host's");
            wide.top_k = 200;
            wide.penalty_last_n = 64;
            p.sampling = wide;   /* ak_generate takes it on the host, then decode is greedy again */
            p.on_token = NULL;
            CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK, "%s", err.msg);
            CHECK(ak_session_set_sampling(s, NULL, &err) == AK_OK, "%s", err.msg);
            int32_t want[2];
            ak_json_ints(f->manifest, "llama", "greedy_continuation", want, 2);
            ak_session_reset(s);
            CHECK(ak_prefill(s, f->prompt, f->n_prompt, &next, NULL, &err) == AK_OK && next == want[0], "greedy again");
            p.sampling = sp;
        }
        ak_session_free(s);
    }
}

/* A deferred grammar (grammar_after, a thinking model's "</think>"): the reply is free
 * until the start text has appeared, then follows the grammar to its end. The start text
 * is the greedy reply's second and third tokens, so the free part is greedy's. */
static void test_grammar_after(const ak_fx *f, ak_model *m) {
    ak_session *s = session(m, 128);
    if (!s) return;
    ak_err err;
    int32_t want[16];
    CHECK(ak_json_ints(f->manifest, "llama", "greedy_continuation", want, 16) == 16, "manifest continuation");
    char start[256];
    size_t sn = 0;
    for (int i = 1; i < 3; i++) {   /* (token 0 is a lone byte: the stream shows it as U+FFFD) */
        size_t k = 0;
        CHECK(ak_token_to_piece(m, want[i], false, start + sn, sizeof start - sn, &k, &err) == AK_OK, "%s", err.msg);
        sn += k;
    }
    start[sn] = 0;
    sink k = {0};
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = 40;
    p.grammar = "root ::= \"<\" [0-9]{3} \">\"";
    p.grammar_after = start;
    ak_generate_result r;
    CHECK(sn > 0 && ak_generate(s, f->prompt, f->n_prompt, &p, on_piece, &k, &r, &err) == AK_OK, "%s", err.msg);
    const char *tail = k.text + (k.len >= 5 ? k.len - 5 : 0);
    bool form = k.len >= sn + 5 && tail[0] == '<' && tail[4] == '>' && !memcmp(tail - sn, start, sn);
    for (int i = 1; i < 4 && form; i++) form = tail[i] >= '0' && tail[i] <= '9';
    CHECK(r.stop == AK_STOP_EOG && form && r.n_generated == 3 + 5 + 1,
          "deferred grammar: '%s' should be greedy's first tokens, '%s', <ddd> and the end (stop %d, %d tokens)", k.text,
          start, (int)r.stop, r.n_generated);
    /* a start text that never appears leaves the reply free: greedy's ids */
    int32_t ids[16];
    p.n_predict = 16;
    p.ids_out = ids;
    p.ids_cap = 16;
    p.grammar_after = "\x01never\x02";
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && !memcmp(ids, want, sizeof ids),
          "a grammar that never starts changed the reply");
    /* a bad grammar is refused with where */
    p.grammar = "root ::= [z-a]";
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_ERR_ARG && strstr(err.msg, "line 1"),
          "a bad grammar: %s", err.msg);
    ak_session_free(s);
}

/* Speculative decoding: the same ids as plain decoding, greedy and sampled, drafted by
 * prompt lookup or by a draft model (the fixture in F16 drafting for its F32 self); the
 * cache after rejected drafts is the cache of the ids kept (the next logits equal a
 * fresh session's over the same ids). */
static void test_spec(const ak_fx *f, ak_model *m) {
    enum { N = 48 };
    ak_err err;
    ak_model *dm = NULL;
    ak_session *s = session(m, 128), *ds = NULL, *fresh = session(m, 128);
    if (ak_model_load(ak_fixture("llama/llama-f16.gguf"), &dm, &err)) CHECK(0, "%s", err.msg);
    else ds = session(dm, 128);
    if (!s || !ds || !fresh) goto out;
    for (int sampled = 0; sampled < 2; sampled++)
        for (int how = 0; how < 3; how++) {   /* no speculation, n-gram lookup, the draft model */
            int32_t ref[N], got[N];
            ak_generate_params p = ak_generate_default_params();
            p.n_predict = N;
            p.ids_cap = N;
            if (sampled) {
                p.sampling = ak_sampling_default_params();
                p.sampling.temperature = 0.9f;
                p.sampling.seed = 11;
            }
            ak_generate_result r;
            p.ids_out = ref;
            CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == N, "%s", err.msg);
            if (!how) continue;
            p.ids_out = got;
            p.spec_draft = how == 1 ? 16 : 4;
            p.draft = how == 2 ? ds : NULL;
            ak_session_reset(s);
            CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == N, "%s", err.msg);
            CHECK(!memcmp(ref, got, sizeof ref), "speculation (%s, %s) changed the ids", how == 1 ? "n-gram" : "draft model",
                  sampled ? "sampled" : "greedy");
            CHECK(r.n_accepted <= r.n_drafted && (how == 1 || r.n_accepted > r.n_drafted / 2),
                  "%s: %d of %d drafts accepted", how == 1 ? "n-gram" : "draft model", r.n_accepted, r.n_drafted);
            printf("spec %s %s: %d drafted, %d accepted\n", how == 1 ? "n-gram" : "draft", sampled ? "sampled" : "greedy",
                   r.n_drafted, r.n_accepted);
            if (how == 1 && !sampled) {
                CHECK(r.n_drafted > r.n_accepted, "n-gram: some drafts rejected (%d of %d)", r.n_accepted, r.n_drafted);
                /* the cache holds the prompt and the ids but the last: one more token's logits
                 * equal a fresh session's over the same ids */
                float *a = malloc((size_t)ak_model_vocab(m) * sizeof *a), *b = malloc((size_t)ak_model_vocab(m) * sizeof *b);
                if (!a || !b) CHECK(0, "out of memory");
                else if (ak_fx_next_logits(s, fresh, got[N - 1], a, b)) {
                    double worst = 0;
                    for (int i = 0; i < ak_model_vocab(m); i++) worst = fmax(worst, fabs(a[i] - b[i]));
                    CHECK(worst < 1e-4, "the cache after rejected drafts: logits differ by %g", worst);
                }
                free(a); free(b);
            }
        }
    ak_generate_params p = ak_generate_default_params();
    p.spec_draft = AK_SPEC_MAX + 1;
    ak_generate_result r;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_ERR_ARG, "spec_draft too large");
    p.spec_draft = 4;
    p.draft = s;
    CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_ERR_ARG, "the target drafting for itself");
out:
    ak_session_free(s);
    ak_session_free(ds);
    ak_session_free(fresh);
    ak_model_free(dm);
}

int main(void) {
    ak_fx f;
    if (!ak_fx_open(&f, AK_BACKEND_CPU)) return ak_test_done();
    ak_model *m = NULL;
    ak_err err;
    if (ak_model_load(ak_fixture("llama/llama-f32.gguf"), &m, &err)) {
        CHECK(0, "%s", err.msg);
    } else {
        CHECK(m->tok != NULL, "the fixture's tokenizer loads with the model");
        if (m->tok) {
            test_utf8(m->tok);
            test_stop_strings(m->tok);
            test_eog_cancel_special(m->tok);
        }
        test_loop(&f, m);
        test_sampled_chain(&f, m);
        test_spec(&f, m);
        test_grammar_after(&f, m);
        ak_model_free(m);
    }
    ak_fx_close(&f);
    return ak_test_done();
}
