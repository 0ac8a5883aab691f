/* Tokenizer speed on pathological text: generates the inputs itself (deterministic),
 * tokenizes each with each vocabulary and prints MB/s (median of the runs) and the
 * token count; --write puts the same bytes in files for llama.cpp's llama-tokenize.
 *
 *   tokenize_bench [-r RUNS] [--scales 0.25,0.5,1] [--input A,B] [--vocab A,B] [--tsv]
 *                  [--max-s S] [--ids DIR] [--models DIR] [--corpus FILE] [NAME=FILE[:PRE]...]
 *   tokenize_bench --write DIR [--scales S] [--input A,B]
 *
 * Vocabularies default to the models scripts/get-model fetches (smollm2, gemma3, minilm)
 * and qwen2: the first *qwen2*.gguf in the models folder, else qwen2-pre: SmolLM2's
 * vocabulary with the qwen2 pre-tokenizer. NAME=FILE[:PRE] replaces the list (PRE: a
 * byte-level pre-tokenizer to use instead of the file's). Inputs that hold special-token
 * text run with and without special-token parsing; the others with it (as llama-tokenize).
 * --ids DIR writes each run's ids as llama-tokenize --ids prints them (DIR/INPUT.VOCAB.PARSE.ids).
 * A run slower than --max-s seconds (default 30) is not repeated. */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "format/gguf.h"
#include "model/tokenizer.h"
#include "bench_util.h"

#ifndef AKUNU_SRC
#define AKUNU_SRC "."
#endif

/* ---- the tokenizer, in one place ---- */

typedef struct { ak_gguf *g; ak_tokenizer *t; } vocab;

static bool vocab_open(vocab *v, const char *path, const char *pre) {
    ak_err err = {{0}};
    memset(v, 0, sizeof *v);
    if (ak_gguf_open(path, &v->g, &err) || ak_tokenizer_load(v->g, &v->t, &err) ||
        (pre && ak_tokenizer_set_pre(v->t, pre, &err))) {
        fprintf(stderr, "tokenize_bench: %s: %s\n", path, err.msg);
        ak_tokenizer_free(v->t);
        ak_gguf_close(v->g);
        return false;
    }
    return true;
}

static void vocab_close(vocab *v) { ak_tokenizer_free(v->t); ak_gguf_close(v->g); }

/* BOS/EOS as the file says (llama-tokenize's default); returns the count, -1 on error. */
static long tokenize(const vocab *v, const char *s, size_t n, bool parse_special, int32_t *ids, long cap) {
    ak_err err = {{0}};
    int got = 0;
    if (cap > 0x7FFFFFFF) cap = 0x7FFFFFFF;
    if (ak_tokenizer_encode(v->t, s, n, true, parse_special, ids, (int)cap, &got, &err)) {
        if (got > cap) return got; /* the caller grows ids and asks again */
        fprintf(stderr, "tokenize_bench: %s\n", err.msg);
        return -1;
    }
    return got;
}

/* ---- inputs ---- */

#define MB 1000000.0

typedef struct { char *p; size_t n, cap; } buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) { fprintf(stderr, "tokenize_bench: out of memory\n"); exit(1); }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static uint64_t rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static size_t put_cp(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

static const char *g_corpus_path = AKUNU_SRC "/tests/data/ppl/botchan.txt";
static buf g_corpus;

static void load_corpus(void) {
    if (g_corpus.n) return;
    FILE *f = fopen(g_corpus_path, "rb");
    if (!f) { fprintf(stderr, "tokenize_bench: cannot read %s (--corpus FILE)\n", g_corpus_path); exit(1); }
    char tmp[65536];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) put(&g_corpus, tmp, k);
    fclose(f);
}

/* The corpus with keep(c) bytes only, repeated to n bytes (cut before a UTF-8 lead). */
static void corpus_filtered(buf *b, size_t n, int mode) {
    load_corpus();
    while (b->n < n)
        for (size_t i = 0; i < g_corpus.n && b->n < n; i++) {
            unsigned char c = (unsigned char)g_corpus.p[i];
            bool keep = mode == 0 ? true
                      : mode == 1 ? !(c == ' ' || c == '\n' || c == '\r' || c == '\t')
                                  : ((c | 32) >= 'a' && (c | 32) <= 'z');
            if (keep) put(b, (const char *)&c, 1);
        }
    while (b->n > 0 && ((unsigned char)b->p[b->n - 1] & 0xC0) == 0x80) b->n--; /* ASCII corpus: no-op */
}

static void repeat(buf *b, const char *unit, size_t n) {
    size_t u = strlen(unit);
    while (b->n + u <= n) put(b, unit, u);
}

static const char *const g_specials[] = {
    "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>",
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "<unused42>",
    "<|im_start|>user\n", "<|im_end|>\n", "<file_sep>", "<filename>", "<|eot_id|>",
};
#define N_SPECIALS (sizeof g_specials / sizeof g_specials[0])

typedef struct {
    const char *name, *what;
    bool special; /* holds special-token text: run with and without parsing */
    double size;  /* bytes at scale 1 */
} input_def;

static const input_def g_inputs[] = {
    {"english", "tests/data/ppl/botchan.txt repeated", false, MB},
    {"nospace", "the corpus without whitespace", false, MB},
    {"letters", "the corpus' ASCII letters only: one word", false, MB},
    {"long_words", "the corpus' letters in 100-letter words", false, MB},
    {"repeat_a", "'a' repeated", false, MB},
    {"repeat_space", "' ' repeated", false, MB},
    {"repeat_newline", "'\\n' repeated", false, MB},
    {"repeat_digit", "'7' repeated", false, MB},
    {"repeat_dot", "'.' repeated", false, MB},
    {"repeat_cjk", "U+7684 repeated", false, MB},
    {"emoji", "100k emoji U+1F300..U+1F64F (LCG)", false, 400000},
    {"specials", "special-token strings concatenated (LCG)", true, MB},
    {"near_miss", "\"<|im_sta\" repeated", true, MB},
    {"near_mix", "proper prefixes of special strings (LCG)", true, MB},
    {"repeat_lt", "'<' repeated", true, MB},
};
#define N_INPUTS (sizeof g_inputs / sizeof g_inputs[0])

static void make_input(int which, double scale, buf *b) {
    size_t n = (size_t)(g_inputs[which].size * scale + 0.5);
    const char *name = g_inputs[which].name;
    uint64_t s = 0x5EED;
    b->n = 0;
    if (!strcmp(name, "english")) corpus_filtered(b, n, 0);
    else if (!strcmp(name, "nospace")) corpus_filtered(b, n, 1);
    else if (!strcmp(name, "letters")) corpus_filtered(b, n, 2);
    else if (!strcmp(name, "long_words")) {
        buf l = {0};
        corpus_filtered(&l, n, 2);
        for (size_t i = 0; b->n < n; i += 100) {
            size_t k = n - b->n < 101 ? n - b->n : 101;
            put(b, l.p + i, k - 1);
            put(b, " ", 1);
        }
        free(l.p);
    } else if (!strcmp(name, "repeat_a")) repeat(b, "a", n);
    else if (!strcmp(name, "repeat_space")) repeat(b, " ", n);
    else if (!strcmp(name, "repeat_newline")) repeat(b, "\n", n);
    else if (!strcmp(name, "repeat_digit")) repeat(b, "7", n);
    else if (!strcmp(name, "repeat_dot")) repeat(b, ".", n);
    else if (!strcmp(name, "repeat_cjk")) repeat(b, "\xE7\x9A\x84", n);
    else if (!strcmp(name, "near_miss")) repeat(b, "<|im_sta", n);
    else if (!strcmp(name, "repeat_lt")) repeat(b, "<", n);
    else if (!strcmp(name, "emoji")) {
        char e[4];
        while (b->n + 4 <= n) put(b, e, put_cp(0x1F300 + (uint32_t)(rnd(&s) % 0x350), e));
    } else if (!strcmp(name, "specials")) {
        for (;;) {
            const char *x = g_specials[rnd(&s) % N_SPECIALS];
            if (b->n + strlen(x) > n) break;
            put(b, x, strlen(x));
        }
    } else if (!strcmp(name, "near_mix")) {
        for (;;) {
            const char *x = g_specials[rnd(&s) % N_SPECIALS];
            size_t k = 1 + rnd(&s) % (strlen(x) - 1); /* a proper prefix */
            if (b->n + k > n) break;
            put(b, x, k);
        }
    }
}

/* ---- runs ---- */

typedef struct { char name[64]; char path[4096]; const char *pre; vocab v; double load_s; } vocab_ent;

static bool in_list(const char *list, const char *name) {
    if (!list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t k = c ? (size_t)(c - p) : strlen(p);
        if (k == n && !memcmp(p, name, n)) return true;
        p += k + (c ? 1 : 0);
    }
    return false;
}

static void write_ids(const char *dir, const char *in, const char *vn, bool ps, const int32_t *ids, long n) {
    char path[4608];
    snprintf(path, sizeof path, "%s/%s.%s.%s.ids", dir, in, vn, ps ? "special" : "plain");
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "tokenize_bench: cannot write %s\n", path); return; }
    fputc('[', f);
    for (long i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", ids[i]);
    fputs("]\n", f);
    fclose(f);
}

/* The first (in name order) *qwen2*.gguf in dir, any case. */
static bool find_qwen(const char *dir, char *name, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return false;
    name[0] = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        char low[256];
        if (n < 5 || n >= sizeof low || n >= cap) continue;
        for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)e->d_name[i]);
        if (strstr(low, "qwen2") && !strcmp(low + n - 5, ".gguf") && (!name[0] || strcmp(e->d_name, name) < 0))
            snprintf(name, cap, "%s", e->d_name);
    }
    closedir(d);
    return name[0] != 0;
}

static void usage(void) {
    fputs("usage: tokenize_bench [-r RUNS] [--scales 0.25,0.5,1] [--input A,B] [--vocab A,B] [--tsv]\n"
          "                      [--max-s S] [--ids DIR] [--models DIR] [--corpus FILE] [NAME=FILE[:PRE]...]\n"
          "       tokenize_bench --write DIR [--scales S] [--input A,B]\n"
          "       tokenize_bench --list\n", stderr);
}

int main(int argc, char **argv) {
    int runs = 3;
    double scales[8] = {1};
    int n_scales = 1;
    const char *inputs = NULL, *vocabs = NULL, *write_dir = NULL, *ids_dir = NULL;
    const char *models = AKUNU_SRC "/models";
    bool tsv = false;
    double max_s = 30;
    vocab_ent *ve = calloc(16, sizeof *ve);
    int nv = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-r") && val) { runs = atoi(val); i++; }
        else if (!strcmp(a, "--scales") && val) {
            n_scales = 0;
            for (char *p = argv[++i]; *p && n_scales < 8;) {
                scales[n_scales++] = strtod(p, &p);
                if (*p == ',') p++;
                else if (*p) { usage(); return 2; }
            }
        } else if (!strcmp(a, "--input") && val) { inputs = val; i++; }
        else if (!strcmp(a, "--vocab") && val) { vocabs = val; i++; }
        else if (!strcmp(a, "--write") && val) { write_dir = val; i++; }
        else if (!strcmp(a, "--ids") && val) { ids_dir = val; i++; }
        else if (!strcmp(a, "--models") && val) { models = val; i++; }
        else if (!strcmp(a, "--corpus") && val) { g_corpus_path = val; i++; }
        else if (!strcmp(a, "--max-s") && val) { max_s = atof(val); i++; }
        else if (!strcmp(a, "--tsv")) tsv = true;
        else if (!strcmp(a, "--list")) {
            for (size_t k = 0; k < N_INPUTS; k++)
                printf("%-15s %8.0f bytes  %s%s\n", g_inputs[k].name, g_inputs[k].size, g_inputs[k].what,
                       g_inputs[k].special ? " [special]" : "");
            return 0;
        } else if (strchr(a, '=') && a[0] != '-' && nv < 16) {
            const char *eq = strchr(a, '=');
            snprintf(ve[nv].name, sizeof ve[nv].name, "%.*s", (int)(eq - a), a);
            snprintf(ve[nv].path, sizeof ve[nv].path, "%s", eq + 1);
            char *colon = strrchr(ve[nv].path, ':');
            if (colon && !strstr(colon, "/")) { *colon = 0; ve[nv].pre = colon + 1; }
            nv++;
        } else { usage(); return 2; }
    }
    if (runs < 1 || n_scales < 1) { usage(); return 2; }
    buf in = {0};

    if (write_dir) {
        for (size_t k = 0; k < N_INPUTS; k++) {
            if (!in_list(inputs, g_inputs[k].name)) continue;
            for (int s = 0; s < n_scales; s++) {
                make_input((int)k, scales[s], &in);
                char path[4608];
                if (n_scales == 1 && scales[0] == 1) snprintf(path, sizeof path, "%s/%s.txt", write_dir, g_inputs[k].name);
                else snprintf(path, sizeof path, "%s/%s@%g.txt", write_dir, g_inputs[k].name, scales[s]);
                FILE *f = fopen(path, "wb");
                if (!f || fwrite(in.p, 1, in.n, f) != in.n || fclose(f)) {
                    fprintf(stderr, "tokenize_bench: cannot write %s\n", path);
                    return 1;
                }
            }
        }
        return 0;
    }

    if (nv == 0) { /* the default vocabularies */
        static const char *const def[][3] = {
            {"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", NULL},
            {"gemma3", "gemma-3-270m-q4_k_m.gguf", NULL},
            {"minilm", "all-MiniLM-L6-v2-f32.gguf", NULL},
        };
        for (int k = 0; k < 3; k++) {
            snprintf(ve[nv].name, sizeof ve[nv].name, "%s", def[k][0]);
            snprintf(ve[nv].path, sizeof ve[nv].path, "%s/%s", models, def[k][1]);
            nv++;
        }
        snprintf(ve[nv].name, sizeof ve[nv].name, "qwen2");
        snprintf(ve[nv].path, sizeof ve[nv].path, "%s/%s", models, def[0][1]);
        ve[nv].pre = "qwen2";
        char qwen[256];
        if (find_qwen(models, qwen, sizeof qwen)) {
            snprintf(ve[nv].path, sizeof ve[nv].path, "%s/%s", models, qwen);
            ve[nv].pre = NULL;
        }
        if (ve[nv].pre) snprintf(ve[nv].name, sizeof ve[nv].name, "qwen2-pre"); /* SmolLM2's vocabulary */
        nv++;
    }
    for (int k = 0; k < nv; k++) {
        if (!in_list(vocabs, ve[k].name)) continue;
        double t0 = now_s();
        if (!vocab_open(&ve[k].v, ve[k].path, ve[k].pre)) return 1;
        ve[k].load_s = now_s() - t0;
        fprintf(stderr, "# %s: %s%s%s (load %.0f ms)\n", ve[k].name, ve[k].path, ve[k].pre ? " with pre " : "",
                ve[k].pre ? ve[k].pre : "", 1e3 * ve[k].load_s);
    }

    if (tsv) printf("input\tvocab\tparse\tbytes\ttokens\tseconds\tMB_per_s\n");
    else {
        printf("| input | vocab | parse special | bytes | tokens | ms (median of %d) | MB/s | s/MB |%s\n", runs,
               n_scales > 1 ? " growth |" : "");
        printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |%s\n", n_scales > 1 ? " ---: |" : "");
    }
    long cap = 0;
    int32_t *ids = NULL;
    for (size_t k = 0; k < N_INPUTS; k++) {
        if (!in_list(inputs, g_inputs[k].name)) continue;
        for (int vi = 0; vi < nv; vi++) {
            if (!in_list(vocabs, ve[vi].name)) continue;
            for (int ps = 1; ps >= (g_inputs[k].special ? 0 : 1); ps--) {
                double t_first = 0, b_first = 0;
                for (int s = 0; s < n_scales; s++) {
                    make_input((int)k, scales[s], &in);
                    double t[64];
                    int done = 0;
                    long n = 0;
                    for (int r = 0; r < runs && r < 64; r++) {
                        if ((long)in.n * 2 + 16 > cap) {
                            cap = (long)in.n * 2 + 16;
                            ids = realloc(ids, (size_t)cap * sizeof *ids);
                        }
                        double t0 = now_s();
                        n = tokenize(&ve[vi].v, in.p, in.n, ps, ids, cap);
                        t[done++] = now_s() - t0;
                        if (n < 0) return 1;
                        if (n > cap) { cap = n; ids = realloc(ids, (size_t)cap * sizeof *ids); r--; done--; continue; }
                        if (t[done - 1] > max_s) break;
                    }
                    qsort(t, (size_t)done, sizeof t[0], cmp_d);
                    double med = t[done / 2], mbs = (double)in.n / MB / med;
                    if (ids_dir && s == n_scales - 1) write_ids(ids_dir, g_inputs[k].name, ve[vi].name, ps, ids, n);
                    if (tsv)
                        printf("%s\t%s\t%s\t%zu\t%ld\t%.6f\t%.3f\n", g_inputs[k].name, ve[vi].name, ps ? "yes" : "no",
                               in.n, n, med, mbs);
                    else {
                        printf("| %s | %s | %s | %zu | %ld | %.1f | %.2f | %.3f |", g_inputs[k].name, ve[vi].name,
                               ps ? "yes" : "no", in.n, n, 1e3 * med, mbs, med / ((double)in.n / MB));
                        /* growth: the exponent of time against size from the smallest scale */
                        if (s > 0) printf(" n^%.2f |", log(med / t_first) / log((double)in.n / b_first));
                        else if (n_scales > 1) printf(" |");
                        printf("%s\n", done < runs ? " (1 run)" : "");
                    }
                    fflush(stdout);
                    if (s == 0) { t_first = med; b_first = (double)in.n; }
                }
            }
        }
    }
    for (int k = 0; k < nv; k++)
        if (in_list(vocabs, ve[k].name)) vocab_close(&ve[k].v);
    free(ids); free(in.p); free(g_corpus.p); free(ve);
    return 0;
}
