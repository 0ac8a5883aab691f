/* Tokenizer loading from GGUF metadata, special-token splitting, BOS/EOS rules,
 * pieces and the streaming detokenizer. The algorithms live in tokenizer_{spm,bpe,wpm}.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "model/tokenizer.h"
#include "model/tokenizer_int.h"
#include "model/unicode.h"

/* ---- loading ---- */

static const ak_gguf_kv *find_str_array(const ak_gguf *g, const char *key) {
    const ak_gguf_kv *kv = ak_gguf_find(g, key);
    if (!kv || kv->type != AK_GGUF_ARRAY || kv->arr_type != AK_GGUF_STRING) return NULL;
    return kv;
}

static int32_t get_id(const ak_gguf *g, const char *key, int32_t n_vocab) {
    int64_t v;
    if (!ak_gguf_get_i64(g, key, &v) || v < 0 || v >= n_vocab) return -1;
    return (int32_t)v;
}

static bool get_bool_or(const ak_gguf *g, const char *key, bool dflt) {
    bool b;
    return ak_gguf_get_bool(g, key, &b) ? b : dflt;
}

/* The decoded bytes of token id, written at dst; returns the length. */
static uint32_t make_piece(const ak_tokenizer *t, int32_t id, char *dst) {
    const char *s = t->arena + t->text_off[id];
    uint32_t n = t->text_len[id], o = 0;
    int type = t->types[id];
    if (type == AK_TT_CONTROL || type == AK_TT_UNKNOWN || type == AK_TT_USER) {
        memcpy(dst, s, n);
        return n;
    }
    if (t->model == AK_TOK_SPM && type == AK_TT_BYTE && n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
        char hex[3] = {s[3], s[4], 0}, *end;
        long v = strtol(hex, &end, 16);
        if (*end == 0) { dst[0] = (char)v; return 1; }
    }
    if (t->model == AK_TOK_BPE) { /* undo the byte -> unicode mapping */
        for (size_t i = 0; i < n;) {
            size_t adv;
            uint32_t cp = ak_utf8_next(s + i, n - i, &adv);
            int b = cp == AK_UTF8_INVALID ? -1 : ak_bpe_cp_byte(cp);
            if (b < 0) { memcpy(dst, s, n); return n; } /* not byte-level text: keep as is */
            dst[o++] = (char)b;
            i += adv;
        }
        return o;
    }
    for (size_t i = 0; i < n;) { /* SPM and WPM: U+2581 stands for a space */
        if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) { dst[o++] = ' '; i += 3; }
        else dst[o++] = s[i++];
    }
    return o;
}

typedef struct { const char *p; uint32_t len; int32_t id; } special_ent;

static int special_cmp(const void *a, const void *b) {
    const special_ent *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The trie of the special tokens' texts, built breadth first from the sorted texts:
 * node k stands for the texts e[lo[k]..hi[k]) that share its depth[k]-byte prefix;
 * those that end there come first (in id order), the others split by their next byte
 * into the children, which are therefore numbered consecutively. Each node but the
 * root is a distinct non-empty prefix, so there are at most 1 + the texts' bytes. */
static ak_status build_specials(ak_tokenizer *t, ak_err *err) {
    size_t n = 0, bytes = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (ak_tokenizer_is_special(t, i) && t->text_len[i] > 0) { n++; bytes += t->text_len[i]; }
    special_ent *e = malloc((n ? n : 1) * sizeof *e);
    uint32_t *lo = malloc(3 * (bytes + 1) * sizeof *lo), *hi = lo + bytes + 1, *depth = hi + bytes + 1;
    t->special = malloc((bytes + 1) * sizeof *t->special);
    if (!e || !lo || !t->special) {
        free(e); free(lo);
        return ak_fail(err, AK_ERR_NOMEM, "tokenizer: out of memory");
    }
    n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (ak_tokenizer_is_special(t, i) && t->text_len[i] > 0)
            e[n++] = (special_ent){t->arena + t->text_off[i], t->text_len[i], i};
    qsort(e, n, sizeof *e, special_cmp);
    t->special[0] = (ak_special_node){1, 0, -1, -1, 0};
    lo[0] = 0, hi[0] = (uint32_t)n, depth[0] = 0;
    uint32_t nn = 1;
    for (uint32_t k = 0; k < nn; k++) {
        ak_special_node *nd = &t->special[k];
        uint32_t i = lo[k], d = depth[k];
        for (; i < hi[k] && e[i].len == d; i++) {
            if (nd->id_any < 0) nd->id_any = e[i].id;
            if (nd->id_user < 0 && t->types[e[i].id] == AK_TT_USER) nd->id_user = e[i].id;
        }
        nd->child = nn;
        while (i < hi[k]) {
            unsigned char b = (unsigned char)e[i].p[d];
            uint32_t j = i + 1;
            while (j < hi[k] && (unsigned char)e[j].p[d] == b) j++;
            t->special[nn] = (ak_special_node){0, 0, -1, -1, b};
            lo[nn] = i, hi[nn] = j, depth[nn] = d + 1;
            if (k == 0) t->special_root[b] = nn;
            nn++;
            nd->n_child++;
            i = j;
        }
    }
    free(e);
    free(lo);
    return AK_OK;
}

static void mark_eog(ak_tokenizer *t) {
    static const char *const names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<end_of_utterance>"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        int32_t id = ak_tok_lookup(t, names[k], strlen(names[k]));
        if (id < 0 || (t->types[id] != AK_TT_CONTROL && t->types[id] != AK_TT_USER)) continue;
        t->flags[id] |= AK_TF_EOG;
        if (t->eot < 0 && k < 4) t->eot = id;
        if (t->eom < 0 && strcmp(names[k], "<|eom_id|>") == 0) t->eom = id;
    }
    int32_t ids[3] = {t->eos, t->eot, t->eom};
    for (int k = 0; k < 3; k++)
        if (ids[k] >= 0) t->flags[ids[k]] |= AK_TF_EOG;
    /* the list chain decode stops on: at most the 9 names and 3 ids above */
    for (size_t k = 0; k < sizeof names / sizeof names[0] + 3; k++) {
        int32_t id = k < 3 ? ids[k] : ak_tok_lookup(t, names[k - 3], strlen(names[k - 3]));
        bool dup = false;
        for (int j = 0; j < t->n_eog; j++) dup |= t->eog[j] == id;
        if (id >= 0 && (t->flags[id] & AK_TF_EOG) && !dup) t->eog[t->n_eog++] = id;
    }
}

static ak_status load_merges(ak_tokenizer *t, const ak_gguf *g, ak_err *err) {
    const ak_gguf_kv *kv = find_str_array(g, "tokenizer.ggml.merges");
    if (!kv) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: gpt2 model without tokenizer.ggml.merges");
    if (kv->arr_n > 0x3FFFFFFF) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: too many merges");
    uint32_t cap = 64;
    while (cap < kv->arr_n * 2) cap <<= 1;
    t->merge_mask = cap - 1;
    t->merge_key = malloc(cap * sizeof *t->merge_key);
    t->merge_rank = malloc(cap * sizeof *t->merge_rank);
    t->merge_id = malloc(cap * sizeof *t->merge_id);
    if (!t->merge_key || !t->merge_rank || !t->merge_id) return ak_fail(err, AK_ERR_NOMEM, "tokenizer: out of memory");
    memset(t->merge_id, 0xFF, cap * sizeof *t->merge_id); /* -1 = empty slot */
    char buf[1024];
    for (uint64_t r = 0; r < kv->arr_n; r++) {
        ak_str m = kv->arr_str[r];
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: merge %llu has no space", (unsigned long long)r);
        size_t ll = (size_t)(sp - m.ptr), rl = m.len - ll - 1;
        int32_t a = ak_tok_lookup(t, m.ptr, ll), b = ak_tok_lookup(t, sp + 1, rl);
        if (a < 0 || b < 0 || ll + rl > sizeof buf) continue; /* unusable merge: never applies */
        memcpy(buf, m.ptr, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t c = ak_tok_lookup(t, buf, ll + rl);
        if (c < 0) continue;
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & t->merge_mask;
        while (t->merge_id[i] >= 0 && t->merge_key[i] != key) i = (i + 1) & t->merge_mask;
        if (t->merge_id[i] >= 0) continue; /* keep the first (best) rank */
        t->merge_key[i] = key;
        t->merge_rank[i] = (uint32_t)r;
        t->merge_id[i] = c;
    }
    return AK_OK;
}

static ak_status load_vocab(ak_tokenizer *t, const ak_gguf *g, ak_err *err) {
    const ak_gguf_kv *tok = find_str_array(g, "tokenizer.ggml.tokens");
    if (!tok) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: no tokenizer.ggml.tokens string array");
    if (tok->arr_n == 0 || tok->arr_n > (1u << 28)) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: bad vocab size %llu", (unsigned long long)tok->arr_n);
    int32_t n = t->n_vocab = (int32_t)tok->arr_n;
    const ak_gguf_kv *sc = ak_gguf_find(g, "tokenizer.ggml.scores"), *ty = ak_gguf_find(g, "tokenizer.ggml.token_type");
    if (sc && (sc->type != AK_GGUF_ARRAY || sc->arr_n != tok->arr_n)) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: scores do not match the vocab");
    if (ty && (ty->type != AK_GGUF_ARRAY || ty->arr_n != tok->arr_n)) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: token types do not match the vocab");
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += tok->arr_str[i].len;
    if (total > 0x7FFFFFFF) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: vocab text too large");
    size_t nn = (size_t)n;
    t->arena = malloc(2 * total + 1);
    t->text_off = malloc(nn * sizeof(uint32_t));
    t->text_len = malloc(nn * sizeof(uint32_t));
    t->piece_off = malloc(nn * sizeof(uint32_t));
    t->piece_len = malloc(nn * sizeof(uint32_t));
    t->scores = malloc(nn * sizeof(float));
    t->types = malloc(nn);
    t->flags = calloc(nn, 1);
    uint32_t cap = 64;
    while (cap < nn * 2) cap <<= 1;
    t->hash = calloc(cap, sizeof(uint32_t));
    t->hash_mask = cap - 1;
    if (!t->arena || !t->text_off || !t->text_len || !t->piece_off || !t->piece_len || !t->scores || !t->types ||
        !t->flags || !t->hash)
        return ak_fail(err, AK_ERR_NOMEM, "tokenizer: out of memory for %d tokens", n);
    size_t o = 0;
    for (int32_t i = 0; i < n; i++) {
        ak_str s = tok->arr_str[i];
        memcpy(t->arena + o, s.ptr, s.len);
        t->text_off[i] = (uint32_t)o;
        t->text_len[i] = (uint32_t)s.len;
        if (s.len > t->max_text_len) t->max_text_len = (uint32_t)s.len;
        o += s.len;
        double f = 0;
        int64_t k = AK_TT_NORMAL;
        if (sc && !ak_gguf_arr_f64(sc, (uint64_t)i, &f)) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: scores are not numeric");
        if (ty && !ak_gguf_arr_i64(ty, (uint64_t)i, &k)) return ak_fail(err, AK_ERR_FORMAT, "tokenizer: token types are not numeric");
        t->scores[i] = (float)f;
        t->types[i] = (k >= 0 && k <= AK_TT_BYTE) ? (uint8_t)k : AK_TT_NORMAL;
        /* a later duplicate replaces an earlier one, as a text -> id map would */
        uint32_t h = ak_vocab_hash(s.ptr, s.len) & t->hash_mask;
        for (;; h = (h + 1) & t->hash_mask) {
            uint32_t v = t->hash[h];
            if (!v) break;
            if (t->text_len[v - 1] == s.len && memcmp(t->arena + t->text_off[v - 1], s.ptr, s.len) == 0) break;
        }
        t->hash[h] = (uint32_t)i + 1;
    }
    for (int32_t i = 0; i < n; i++) {
        t->piece_off[i] = (uint32_t)o;
        t->piece_len[i] = make_piece(t, i, t->arena + o);
        if (t->piece_len[i] > t->max_piece) t->max_piece = t->piece_len[i];
        o += t->piece_len[i];
        if (t->types[i] == AK_TT_CONTROL || t->types[i] == AK_TT_UNKNOWN) t->flags[i] |= AK_TF_SKIP;
    }
    return AK_OK;
}

static void find_byte_tokens(ak_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char s[8];
        size_t n;
        if (t->model == AK_TOK_BPE) n = (size_t)ak_utf8_put(ak_bpe_byte_cp((unsigned char)b), s);
        else n = (size_t)snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_id[b] = ak_tok_lookup(t, s, n);
    }
}

ak_status ak_tokenizer_load(const ak_gguf *g, ak_tokenizer **out, ak_err *err) {
    *out = NULL;
    ak_str model;
    if (!ak_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return ak_fail(err, AK_ERR_FORMAT, "tokenizer: no tokenizer.ggml.model");
    ak_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ak_fail(err, AK_ERR_NOMEM, "tokenizer: out of memory");
    ak_status st = AK_OK;
    if (ak_str_eq(model, "llama")) t->model = AK_TOK_SPM;
    else if (ak_str_eq(model, "gpt2")) t->model = AK_TOK_BPE;
    else if (ak_str_eq(model, "bert")) t->model = AK_TOK_WPM;
    else {
        st = ak_fail(err, AK_ERR_UNSUPPORTED, "tokenizer: model '%.*s' not supported (llama, gpt2, bert)",
                     (int)(model.len > 64 ? 64 : model.len), model.ptr);
        goto fail;
    }
    if ((st = load_vocab(t, g, err))) goto fail;
    int32_t n = t->n_vocab;
    t->bos = get_id(g, "tokenizer.ggml.bos_token_id", n);
    t->eos = get_id(g, "tokenizer.ggml.eos_token_id", n);
    t->eot = get_id(g, "tokenizer.ggml.eot_token_id", n);
    t->eom = get_id(g, "tokenizer.ggml.eom_token_id", n);
    t->unk = get_id(g, "tokenizer.ggml.unknown_token_id", n);
    t->add_bos = get_bool_or(g, "tokenizer.ggml.add_bos_token", t->model != AK_TOK_BPE);
    t->add_eos = get_bool_or(g, "tokenizer.ggml.add_eos_token", t->model == AK_TOK_WPM);
    t->add_space_prefix = get_bool_or(g, "tokenizer.ggml.add_space_prefix", t->model == AK_TOK_SPM);
    t->lowercase = get_bool_or(g, "tokenizer.ggml.normalizer.lowercase", true);
    if (t->unk < 0) {
        const char *u = t->model == AK_TOK_WPM ? "[UNK]" : "<unk>";
        t->unk = ak_tok_lookup(t, u, strlen(u));
    }
    find_byte_tokens(t);
    if (t->model == AK_TOK_BPE) {
        ak_str pre = {"default", 7};
        ak_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(pre.len > 31 ? 31 : pre.len), pre.ptr);
        if ((st = ak_tokenizer_set_pre(t, name, err))) goto fail;
        if ((st = load_merges(t, g, err))) goto fail;
    } else {
        snprintf(t->pre_name, sizeof t->pre_name, "default");
    }
    if ((st = build_specials(t, err))) goto fail;
    mark_eog(t);
    *out = t;
    return AK_OK;
fail:
    ak_tokenizer_free(t);
    return st;
}

void ak_tokenizer_free(ak_tokenizer *t) {
    if (!t) return;
    free(t->arena); free(t->text_off); free(t->text_len); free(t->piece_off); free(t->piece_len);
    free(t->scores); free(t->types); free(t->flags); free(t->hash);
    free(t->merge_key); free(t->merge_rank); free(t->merge_id); free(t->special);
    free(t);
}

ak_status ak_tokenizer_set_pre(ak_tokenizer *t, const char *pre, ak_err *err) {
    if (t->model != AK_TOK_BPE) return ak_fail(err, AK_ERR_ARG, "tokenizer: pre-tokenizers apply to gpt2 models only");
    if (!ak_bpe_pre_from_name(pre, &t->pre, &t->ignore_merges))
        return ak_fail(err, AK_ERR_UNSUPPORTED,
                       "tokenizer: pre-tokenizer '%s' not supported (gpt2, default, llama-bpe, llama3, qwen2, smollm)", pre);
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
    return AK_OK;
}

/* ---- encoding ---- */

static ak_status encode_run(const ak_tokenizer *t, const char *s, size_t len, bool after_special, ak_tokout *o) {
    if (len == 0) return AK_OK;
    switch (t->model) {
    case AK_TOK_SPM: return ak_spm_encode(t, s, len, after_special, o);
    case AK_TOK_BPE: return ak_bpe_encode(t, s, len, o);
    case AK_TOK_WPM: return ak_wpm_encode(t, s, len, o);
    }
    return AK_ERR_ARG;
}

/* The child of trie node k for byte b, or 0 (children are sorted by byte). */
static uint32_t special_child(const ak_special_node *nd, uint32_t k, unsigned char b) {
    uint32_t lo = nd[k].child, end = lo + nd[k].n_child, hi = end;
    while (lo < hi) {
        uint32_t m = lo + (hi - lo) / 2;
        if (nd[m].byte < b) lo = m + 1;
        else hi = m;
    }
    return lo < end && nd[lo].byte == b ? lo : 0;
}

/* Longest special token spelled at s[0..len) (the smallest id among equal texts), or
 * -1: one walk down the trie, at most as many steps as the longest special text. */
static int32_t match_special(const ak_tokenizer *t, const char *s, size_t len, bool parse_special) {
    int32_t best = -1;
    uint32_t k = t->special_root[(unsigned char)s[0]];
    for (size_t i = 1; k; i++) {
        int32_t id = parse_special ? t->special[k].id_any : t->special[k].id_user;
        if (id >= 0) best = id;
        if (i == len) break;
        k = special_child(t->special, k, (unsigned char)s[i]);
    }
    return best;
}

ak_status ak_tokenizer_encode(const ak_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *ids, int cap, int *n_out, ak_err *err) {
    ak_tokout o = {ids, cap < 0 ? 0 : cap, 0};
    *n_out = 0;
    if (!text && len) return ak_fail(err, AK_ERR_ARG, "tokenize: NULL text");
    if (add_special && t->add_bos && t->bos >= 0) ak_tokout_push(&o, t->bos);
    size_t run = 0;
    bool after_special = true;
    for (size_t i = 0; i < len;) {
        int32_t id = match_special(t, text + i, len - i, parse_special);
        if (id < 0) { i++; continue; }
        ak_status st = encode_run(t, text + run, i - run, after_special, &o);
        if (st) return ak_fail(err, st, "tokenize: out of memory");
        ak_tokout_push(&o, id);
        after_special = true;
        i += t->text_len[id];
        run = i;
    }
    ak_status st = encode_run(t, text + run, len - run, after_special, &o);
    if (st) return ak_fail(err, st, "tokenize: out of memory");
    if (add_special && t->add_eos && t->eos >= 0) ak_tokout_push(&o, t->eos);
    *n_out = o.n;
    if (o.n > o.cap) return ak_fail(err, AK_ERR_ARG, "tokenize: %d ids do not fit in %d", o.n, o.cap);
    return AK_OK;
}

/* ---- queries ---- */

int32_t ak_tokenizer_n_vocab(const ak_tokenizer *t) { return t->n_vocab; }
int32_t ak_tokenizer_bos(const ak_tokenizer *t) { return t->bos; }
int32_t ak_tokenizer_eos(const ak_tokenizer *t) { return t->eos; }
int32_t ak_tokenizer_eot(const ak_tokenizer *t) { return t->eot; }
bool ak_tokenizer_add_bos(const ak_tokenizer *t) { return t->add_bos && t->bos >= 0; }

bool ak_tokenizer_is_eog(const ak_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->flags[id] & AK_TF_EOG);
}

size_t ak_tokenizer_max_piece(const ak_tokenizer *t) { return t->max_piece; }

int ak_tokenizer_eog_ids(const ak_tokenizer *t, const int32_t **ids) {
    *ids = t->eog;
    return t->n_eog;
}

bool ak_tokenizer_is_special(const ak_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return false;
    int k = t->types[id];
    return k == AK_TT_CONTROL || k == AK_TT_USER || k == AK_TT_UNKNOWN;
}

int32_t ak_tokenizer_find(const ak_tokenizer *t, const char *text, size_t len) {
    return ak_tok_lookup(t, text, len);
}

const char *ak_tokenizer_text(const ak_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->text_len[id];
    return t->arena + t->text_off[id];
}

const char *ak_tokenizer_model_name(const ak_tokenizer *t) {
    return t->model == AK_TOK_SPM ? "llama" : t->model == AK_TOK_BPE ? "gpt2" : "bert";
}

const char *ak_tokenizer_pre_name(const ak_tokenizer *t) { return t->pre_name; }

ak_status ak_pretokenize(const char *pre, const char *text, size_t len, size_t *ends, int cap, int *n_out, ak_err *err) {
    ak_tok_pre p;
    bool ignore;
    *n_out = 0;
    if (!ak_bpe_pre_from_name(pre, &p, &ignore)) return ak_fail(err, AK_ERR_UNSUPPORTED, "pre-tokenizer '%s' not supported", pre);
    size_t *e = NULL;
    long n = ak_bpe_split(p, text, len, &e);
    if (n < 0) return ak_fail(err, AK_ERR_NOMEM, "pre-tokenize: out of memory");
    for (long i = 0; i < n && i < cap; i++) ends[i] = e[i];
    free(e);
    *n_out = (int)n;
    if (n > cap) return ak_fail(err, AK_ERR_ARG, "pre-tokenize: %ld words do not fit in %d", n, cap);
    return AK_OK;
}

/* ---- decoding ---- */

static bool piece_of(const ak_tokenizer *t, int32_t id, bool special, const char **p, uint32_t *n) {
    if (id < 0 || id >= t->n_vocab) return false;
    *p = t->arena + t->piece_off[id];
    *n = (!special && (t->flags[id] & AK_TF_SKIP)) ? 0 : t->piece_len[id];
    return true;
}

static ak_status bad_id(int32_t id, const ak_tokenizer *t, ak_err *err) {
    return ak_fail(err, AK_ERR_ARG, "token id %d is outside the vocabulary (0..%d)", id, t->n_vocab - 1);
}

ak_status ak_tokenizer_piece(const ak_tokenizer *t, int32_t id, bool special, char *buf, size_t cap, size_t *n_out,
                             ak_err *err) {
    const char *p;
    uint32_t n;
    *n_out = 0;
    if (!piece_of(t, id, special, &p, &n)) return bad_id(id, t, err);
    ak_status st = ak_out_size(n, buf, cap, n_out, err);
    if (!st && buf && n) memcpy(buf, p, n);
    return st;
}

ak_status ak_tokenizer_decode(const ak_tokenizer *t, const int32_t *ids, int n, bool special, char *buf, size_t cap,
                              size_t *n_out, ak_err *err) {
    size_t o = 0;
    bool first = t->model == AK_TOK_SPM && t->add_space_prefix;
    *n_out = 0;
    if (n < 0 || (n && !ids)) return ak_fail(err, AK_ERR_ARG, "detokenize: bad arguments");
    for (int i = 0; i < n; i++) {
        const char *p;
        uint32_t k;
        if (!piece_of(t, ids[i], special, &p, &k)) return bad_id(ids[i], t, err);
        if (first && k > 0) {
            first = false;
            if (p[0] == ' ') { p++; k--; }
        }
        if (buf && k && o + k <= cap) memcpy(buf + o, p, k);
        o += k;
    }
    return ak_out_size(o, buf, cap, n_out, err);
}

void ak_detok_init(ak_detok *d, bool special) {
    memset(d, 0, sizeof *d);
    d->special = special;
}

/* Is c a valid k-th byte (k >= 1) of a sequence led by lead (Unicode Table 3-7)? */
static bool utf8_cont_ok(unsigned char lead, int k, unsigned char c) {
    if ((c & 0xC0) != 0x80) return false;
    if (k != 1) return true;
    if (lead == 0xE0) return c >= 0xA0;
    if (lead == 0xED) return c <= 0x9F;
    if (lead == 0xF0) return c >= 0x90;
    if (lead == 0xF4) return c <= 0x8F;
    return true;
}

/* Runs the UTF-8 check over pend + p: writes valid text (and U+FFFD for maximal
 * invalid subparts) to out when out is not NULL; returns the output size and leaves
 * in rest/nrest an incomplete tail. */
static int sanitize(const unsigned char *pend, int np, const char *p, uint32_t n, char *out,
                    unsigned char rest[4], int *nrest) {
    size_t total = (size_t)np + n;
    int o = 0;
#define AT(i) ((i) < (size_t)np ? pend[i] : (unsigned char)p[(i) - (size_t)np])
    *nrest = 0;
    for (size_t i = 0; i < total;) {
        unsigned char b = AT(i);
        int L = ak_utf8_lead_len(b);
        if (L == 1) { if (out) out[o] = (char)b; o++; i++; continue; }
        int k = 1;
        while (L > 1 && k < L && i + (size_t)k < total && utf8_cont_ok(b, k, AT(i + (size_t)k))) k++;
        if (L > 1 && k == L) {
            for (int j = 0; j < L; j++) if (out) out[o + j] = (char)AT(i + (size_t)j);
            o += L;
            i += (size_t)L;
        } else if (L > 1 && i + (size_t)k == total) { /* valid so far, cut short: wait */
            for (int j = 0; j < k; j++) rest[j] = AT(i + (size_t)j);
            *nrest = k;
            break;
        } else {
            if (out) memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)(L > 1 ? k : 1);
        }
    }
#undef AT
    return o;
}

ak_status ak_detok_push(ak_detok *d, const ak_tokenizer *t, int32_t id, char *out, size_t cap, size_t *n_out,
                        ak_err *err) {
    const char *p;
    uint32_t n;
    *n_out = 0;
    if (!piece_of(t, id, d->special, &p, &n)) return bad_id(id, t, err);
    if (n > (1u << 26)) return ak_fail(err, AK_ERR_ARG, "token %d: a piece of %u bytes", id, n);
    unsigned char rest[4];
    int nrest;
    size_t need = (size_t)sanitize(d->pend, d->npend, p, n, NULL, rest, &nrest);
    ak_status st = ak_out_size(need, out, cap, n_out, err);
    if (st || !out) return st;   /* a size query or too small: nothing consumed */
    sanitize(d->pend, d->npend, p, n, out, rest, &nrest);
    memcpy(d->pend, rest, (size_t)nrest);
    d->npend = nrest;
    return AK_OK;
}

ak_status ak_detok_flush(ak_detok *d, char *out, size_t cap, size_t *n_out, ak_err *err) {
    ak_status st = ak_out_size(d->npend ? 3 : 0, out, cap, n_out, err);
    if (st || !out) return st;
    if (d->npend) memcpy(out, "\xEF\xBF\xBD", 3);
    d->npend = 0;
    return AK_OK;
}
