/* Per-token cost of the grammar mask (src/engine/grammar.c) on a real vocabulary: JSON
 * documents are tokenized and walked token by token as generation would, timing
 * ak_gmatch_mask at every step (what generation pays, first visits included), again at
 * the same state (the cached cost), and with a fresh matcher (no cached states at all).
 *     grammar_bench [MODEL.gguf ...]   (default: Qwen2.5-Coder 0.5B and Gemma 3 270M in models/) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_util.h"
#include "engine/grammar.h"
#include "format/gguf.h"

/* JSON as llama.cpp's json.gbnf has it: an object at the root, optional space. */
static const char *json_gbnf =
    "root ::= object\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\" ws\n"
    "number ::= \"-\"? ( [0-9] | [1-9] [0-9]{0,15} ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9] [1-9]{0,15} )? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* What a model asked for JSON writes: records, lists, nesting, prose in strings. */
static const char *docs[] = {
    "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"died\": 1852, \"fields\": [\"mathematics\", \"computing\"],\n"
    "  \"notes\": \"Wrote the first published algorithm intended for Babbage's Analytical Engine.\"}",
    "{\"id\": \"a3f9-22\", \"items\": [{\"sku\": \"X-100\", \"qty\": 2, \"price\": 19.99}, {\"sku\": \"Y-7\", \"qty\": 1, "
    "\"price\": 5.5}],\n  \"paid\": true, \"coupon\": null, \"total\": 45.48}",
    "{\"city\": \"M\xc3\xbcnchen\", \"country\": \"Deutschland\", \"greeting\": \"Gr\xc3\xbc\xc3\x9f Gott\", \"temps\": "
    "[-3.5, 0, 2.25e1], \"tags\": {\"beer\": true, \"sea\": false}}",
    "{\"question\": \"What is the capital of Japan?\", \"answer\": \"Tokyo (\xe6\x9d\xb1\xe4\xba\xac)\", "
    "\"confidence\": 0.97, \"sources\": [\"https://en.wikipedia.org/wiki/Tokyo\"], \"escaped\": \"line\\nbreak \\\"q\\\" "
    "\\u00e9\"}",
    "{\"config\": {\"model\": \"qwen2.5\", \"temperature\": 0.7, \"stop\": [\"\\n\\n\", \"END\"], \"retry\": {\"max\": 3, "
    "\"backoff_ms\": [100, 200, 400]}}, \"description\": \"A nested configuration object with a fairly long "
    "explanation string that goes on for a while, as model outputs often do, so that most steps are inside a string.\"}",
};

static double pct(double *v, int n, double q) {
    if (!n) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[(int)(q * (n - 1))];
}

static void bench(const char *path) {
    ak_gguf *gg = NULL;
    ak_tokenizer *tok = NULL;
    ak_err err;
    if (ak_gguf_open(path, &gg, &err) || ak_tokenizer_load(gg, &tok, &err)) {
        printf("%s: %s (scripts/get-model)\n", path, err.msg);
        ak_gguf_close(gg);
        return;
    }
    ak_gguf_close(gg);
    int n_vocab = ak_tokenizer_n_vocab(tok);
    ak_grammar *g = NULL;
    ak_gvocab *v = NULL;
    ak_gmatch *m = NULL;
    double t0 = now_s();
    if (ak_grammar_parse(json_gbnf, strlen(json_gbnf), NULL, &g, &err) || ak_gvocab_create(tok, n_vocab, &v, &err) ||
        ak_gmatch_create(g, v, &m, &err)) {
        printf("%s: %s\n", path, err.msg);
        goto done;
    }
    double t_vocab = now_s() - t0;
    uint32_t *mask = malloc(((size_t)n_vocab + 31) / 32 * 4);
    enum { MAXT = 4096 };
    static double walk[MAXT], cached[MAXT], fresh[MAXT], miss[MAXT];
    static int32_t ids[1024];
    int n_walk = 0, n_fresh = 0, n_miss = 0;
    long allowed = 0;
    /* the slowest steps, and where they were (the last bytes before them) */
    enum { SLOW = 5 };
    double slow_t[SLOW] = {0};
    char slow_at[SLOW][24] = {{0}};
    double t_first = 0;
    for (size_t d = 0; d < sizeof docs / sizeof *docs; d++) {
        int n = 0;
        if (ak_tokenizer_encode(tok, docs[d], strlen(docs[d]), false, false, ids, 1024, &n, &err)) continue;
        ak_gmatch_reset(m);
        size_t done = 0;
        for (int i = 0; i <= n && n_walk < MAXT; i++) {
            double a = now_s();
            int c = ak_gmatch_mask(m, mask);
            double b = now_s();
            ak_gmatch_mask(m, mask);
            double e = now_s();
            walk[n_walk] = b - a, cached[n_walk] = e - b;
            if (n_walk == 0) t_first = b - a;
            int w = 0;
            for (int k = 1; k < SLOW; k++)
                if (slow_t[k] < slow_t[w]) w = k;
            if (b - a > slow_t[w]) {
                size_t len = 0, at = 0;
                char piece[512], tail[24] = {0};
                for (int k = 0; k < i; k++)
                    if (!ak_tokenizer_piece(tok, ids[k], false, piece, sizeof piece, &len, NULL))
                        for (size_t j = 0; j < len; j++, at++) {
                            if (at >= sizeof tail - 1) memmove(tail, tail + 1, sizeof tail - 2), at = sizeof tail - 2;
                            tail[at] = piece[j] == '\n' ? ' ' : piece[j];
                        }
                slow_t[w] = b - a;
                memcpy(slow_at[w], tail, sizeof tail);
            }
            /* a first visit: more than 4x the cached cost (cache hits are a copy) */
            if (b - a > 4 * (e - b)) miss[n_miss++] = b - a;
            n_walk++;
            allowed += c;
            /* the same state from nothing: a new matcher (no states, no masks cached) */
            if (d == 0 || d == 4) {
                ak_gmatch *f = NULL;
                if (!ak_gmatch_create(g, v, &f, &err)) {
                    char piece[512];
                    size_t len = 0;
                    for (int k = 0; k < i; k++)
                        if (!ak_tokenizer_piece(tok, ids[k], false, piece, sizeof piece, &len, NULL))
                            ak_gmatch_accept_bytes(f, piece, len);
                    double x = now_s();
                    ak_gmatch_mask(f, mask);
                    fresh[n_fresh++] = now_s() - x;
                    ak_gmatch_free(f);
                }
            }
            if (i == n) break;
            if (!(mask[ids[i] >> 5] >> (ids[i] & 31) & 1) || !ak_gmatch_accept_token(m, ids[i])) {
                printf("  doc %zu: token %d (%d of %d) not allowed\n", d, ids[i], i, n);
                break;
            }
            done++;
        }
        if (!ak_gmatch_can_end(m)) printf("  doc %zu: cannot end after %zu tokens\n", d, done);
    }
    double mean_walk = 0;
    for (int i = 0; i < n_walk; i++) mean_walk += walk[i];
    mean_walk /= n_walk ? n_walk : 1;
    printf("%s: %d tokens; vocabulary trie built in %.0f ms\n", path, n_vocab, t_vocab * 1e3);
    printf("  walk (what generation pays): %d steps, median %.1f us, p90 %.1f us, mean %.1f us; %.0f tokens allowed "
           "on average\n",
           n_walk, pct(walk, n_walk, 0.5) * 1e6, pct(walk, n_walk, 0.9) * 1e6, mean_walk * 1e6,
           (double)allowed / (n_walk ? n_walk : 1));
    printf("  cached (same state again): median %.1f us, p90 %.1f us\n", pct(cached, n_walk, 0.5) * 1e6,
           pct(cached, n_walk, 0.9) * 1e6);
    printf("  first visits in the walk: %d of %d, median %.1f us, p90 %.1f us\n", n_miss, n_walk, pct(miss, n_miss, 0.5) * 1e6,
           pct(miss, n_miss, 0.9) * 1e6);
    printf("  fresh matcher (nothing cached): %d states, median %.1f us, p90 %.1f us, max %.1f us\n", n_fresh,
           pct(fresh, n_fresh, 0.5) * 1e6, pct(fresh, n_fresh, 0.9) * 1e6, pct(fresh, n_fresh, 1.0) * 1e6);
    printf("  the walk's first step %.1f us; its slowest steps:", t_first * 1e6);
    for (int k = 0; k < SLOW; k++) printf(" %.0f us after \"%s\";", slow_t[k] * 1e6, slow_at[k]);
    printf("\n");
    free(mask);
done:
    ak_gmatch_free(m);
    ak_gvocab_free(v);
    ak_grammar_free(g);
    ak_tokenizer_free(tok);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) bench(argv[i]);
    } else {
        bench(AKUNU_SRC "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        bench(AKUNU_SRC "/models/gemma-3-270m-q4_k_m.gguf");
    }
    return 0;
}
