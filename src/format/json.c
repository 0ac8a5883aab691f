/* Strict JSON (RFC 8259): values into an arena of linked nodes. Every byte read is
 * checked against the end pointer; strings must be valid UTF-8, escapes well formed
 * (surrogate pairs combined, lone surrogates rejected); numbers follow the grammar
 * exactly (no leading zeros, no bare '.', no NaN/Infinity). */
#include "format/json.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    double align_;       /* data below starts 8-byte aligned */
} chunk;

struct ak_json_doc {
    ak_json *root;
    chunk *head;
    size_t total;
};

typedef struct {
    const char *start, *p, *end;
    ak_json_doc *d;
    ak_err *err;
    ak_status st;
} parser;

static void *fail(parser *P, ak_status st, const char *what) {
    if (!P->st) P->st = ak_fail(P->err, st, "json: %s at byte %zu", what, (size_t)(P->p - P->start));
    return NULL;
}

static void *arena_alloc(parser *P, size_t n) {
    n = (n + 7) & ~(size_t)7;
    chunk *c = P->d->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ((size_t)64 << 10) ? n : ((size_t)64 << 10);
        if (P->d->total + cap > AK_JSON_MAX_ARENA) return fail(P, AK_ERR_FORMAT, "document too large");
        c = malloc(sizeof *c + cap);
        if (!c) return fail(P, AK_ERR_NOMEM, "out of memory");
        c->next = P->d->head;
        c->used = 0;
        c->cap = cap;
        P->d->head = c;
        P->d->total += cap;
    }
    void *r = (unsigned char *)(c + 1) + c->used;
    c->used += n;
    return r;
}

static ak_json *node(parser *P, ak_json_type t) {
    ak_json *v = arena_alloc(P, sizeof *v);
    if (v) { memset(v, 0, sizeof *v); v->type = t; }
    return v;
}

static void skip_ws(parser *P) {
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r')) P->p++;
}

static bool lit(parser *P, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n)) return false;
    P->p += n;
    return true;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid: no overlong
 * forms, no UTF-16 surrogates, nothing above U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++) if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

/* A string starting at the opening quote; decoded into the arena. */
static bool parse_string(parser *P, const char **out, size_t *out_len) {
    P->p++; /* '"' */
    const char *q = P->p;
    while (q < P->end && *q != '"') {
        if (*q != '\\') q++;
        else if (P->end - q >= 2) q += 2;
        else break;
    }
    if (q >= P->end || *q != '"') { fail(P, AK_ERR_FORMAT, "unterminated string"); return false; }
    char *o = arena_alloc(P, (size_t)(q - P->p) + 1), *o0 = o;
    if (!o) return false;
    while (P->p < q) {
        unsigned char c = (unsigned char)*P->p;
        if (c < 0x20) { fail(P, AK_ERR_FORMAT, "control character in string"); return false; }
        if (c >= 0x80) {
            size_t n = utf8_len((const unsigned char *)P->p, (size_t)(q - P->p));
            if (!n) { fail(P, AK_ERR_FORMAT, "invalid UTF-8 in string"); return false; }
            memcpy(o, P->p, n);
            o += n;
            P->p += n;
            continue;
        }
        if (c != '\\') { *o++ = (char)c; P->p++; continue; }
        char e = P->p[1]; /* exists: the scan above stepped over it */
        P->p += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            int u = q - P->p >= 4 ? hex4(P->p) : -1;
            if (u < 0) { fail(P, AK_ERR_FORMAT, "bad \\u escape"); return false; }
            P->p += 4;
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xDC00 && cp <= 0xDFFF) { fail(P, AK_ERR_FORMAT, "lone low surrogate"); return false; }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = q - P->p >= 6 && P->p[0] == '\\' && P->p[1] == 'u' ? hex4(P->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) { fail(P, AK_ERR_FORMAT, "lone high surrogate"); return false; }
                P->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            }
            o += put_utf8(o, cp);
            break;
        }
        default: fail(P, AK_ERR_FORMAT, "bad escape"); return false;
        }
    }
    *o = 0;
    P->p = q + 1;
    *out = o0;
    *out_len = (size_t)(o - o0);
    return true;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static ak_json *parse_number(parser *P) {
    const char *s = P->p, *q = s;
    if (q < P->end && *q == '-') q++;
    if (q >= P->end || !is_digit(*q)) return fail(P, AK_ERR_FORMAT, "bad number");
    if (*q == '0') q++;
    else while (q < P->end && is_digit(*q)) q++;
    bool integral = true;
    if (q < P->end && *q == '.') {
        integral = false;
        if (++q >= P->end || !is_digit(*q)) return fail(P, AK_ERR_FORMAT, "bad number");
        while (q < P->end && is_digit(*q)) q++;
    }
    if (q < P->end && (*q == 'e' || *q == 'E')) {
        integral = false;
        q++;
        if (q < P->end && (*q == '+' || *q == '-')) q++;
        if (q >= P->end || !is_digit(*q)) return fail(P, AK_ERR_FORMAT, "bad number");
        while (q < P->end && is_digit(*q)) q++;
    }
    char buf[512];
    size_t n = (size_t)(q - s);
    if (n >= sizeof buf) return fail(P, AK_ERR_FORMAT, "number too long");
    memcpy(buf, s, n);
    buf[n] = 0;
    ak_json *v = node(P, AK_JSON_NUM);
    if (!v) return NULL;
    char *endp;
    v->num = strtod(buf, &endp);
    if (endp != buf + n) return fail(P, AK_ERR_FORMAT, "bad number");
    if (!isfinite(v->num)) return fail(P, AK_ERR_FORMAT, "number out of range");
    if (integral) {
        bool neg = buf[0] == '-';
        uint64_t mag = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        bool fits = true;
        for (const char *d = buf + neg; *d && fits; d++) {
            uint64_t dv = (uint64_t)(*d - '0');
            if (mag > (lim - dv) / 10) fits = false;
            else mag = mag * 10 + dv;
        }
        if (fits) {
            v->is_int = true;
            v->i = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
        }
    }
    P->p = q;
    return v;
}

static int key_cmp(const void *a, const void *b) {
    const ak_json *x = *(const ak_json *const *)a, *y = *(const ak_json *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static bool check_unique(parser *P, ak_json *obj) {
    if (obj->len < 2) return true;
    ak_json **v = malloc(obj->len * sizeof *v);
    if (!v) { fail(P, AK_ERR_NOMEM, "out of memory"); return false; }
    size_t i = 0;
    for (ak_json *c = obj->child; c; c = c->next) v[i++] = c;
    qsort(v, obj->len, sizeof *v, key_cmp);
    bool ok = true;
    for (i = 1; i < obj->len && ok; i++) ok = key_cmp(&v[i - 1], &v[i]) != 0;
    if (!ok) {
        char msg[96];
        snprintf(msg, sizeof msg, "duplicate key \"%.60s\"", v[i - 1]->key);
        fail(P, AK_ERR_FORMAT, msg);
    }
    free(v);
    return ok;
}

static ak_json *parse_value(parser *P, int depth);

/* Array or object: elements separated by commas, no trailing comma. */
static ak_json *parse_container(parser *P, int depth, bool is_obj) {
    if (depth >= AK_JSON_MAX_DEPTH) return fail(P, AK_ERR_FORMAT, "nested too deeply");
    ak_json *v = node(P, is_obj ? AK_JSON_OBJ : AK_JSON_ARR);
    if (!v) return NULL;
    char close = is_obj ? '}' : ']';
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == close) { P->p++; return v; }
    ak_json **tail = &v->child;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (is_obj) {
            skip_ws(P);
            if (P->p >= P->end || *P->p != '"') return fail(P, AK_ERR_FORMAT, "expected a member name");
            if (!parse_string(P, &key, &key_len)) return NULL;
            skip_ws(P);
            if (P->p >= P->end || *P->p != ':') return fail(P, AK_ERR_FORMAT, "expected ':'");
            P->p++;
        }
        ak_json *c = parse_value(P, depth + 1);
        if (!c) return NULL;
        c->key = key;
        c->key_len = key_len;
        *tail = c;
        tail = &c->next;
        v->len++;
        skip_ws(P);
        if (P->p >= P->end) return fail(P, AK_ERR_FORMAT, is_obj ? "unterminated object" : "unterminated array");
        if (*P->p == ',') { P->p++; continue; }
        if (*P->p == close) { P->p++; break; }
        return fail(P, AK_ERR_FORMAT, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    if (is_obj && !check_unique(P, v)) return NULL;
    return v;
}

static ak_json *parse_value(parser *P, int depth) {
    skip_ws(P);
    if (P->p >= P->end) return fail(P, AK_ERR_FORMAT, "unexpected end");
    ak_json *v;
    switch (*P->p) {
    case '{': return parse_container(P, depth, true);
    case '[': return parse_container(P, depth, false);
    case '"':
        if (!(v = node(P, AK_JSON_STR))) return NULL;
        return parse_string(P, &v->s, &v->len) ? v : NULL;
    case 't': case 'f': case 'n': {
        bool t = lit(P, "true"), f = !t && lit(P, "false"), nl = !t && !f && lit(P, "null");
        if (!t && !f && !nl) return fail(P, AK_ERR_FORMAT, "bad literal");
        if (!(v = node(P, nl ? AK_JSON_NULL : AK_JSON_BOOL))) return NULL;
        v->b = t;
        return v;
    }
    default:
        if (*P->p == '-' || is_digit(*P->p)) return parse_number(P);
        return fail(P, AK_ERR_FORMAT, "unexpected character");
    }
}

ak_status ak_json_parse(const char *text, size_t len, ak_json_doc **out, ak_err *err) {
    *out = NULL;
    ak_json_doc *d = calloc(1, sizeof *d);
    if (!d) return ak_fail(err, AK_ERR_NOMEM, "json: out of memory");
    parser P = {text, text, text + len, d, err, AK_OK};
    d->root = parse_value(&P, 0);
    if (d->root) {
        skip_ws(&P);
        if (P.p != P.end) fail(&P, AK_ERR_FORMAT, "trailing characters");
    }
    if (P.st) { ak_json_free(d); return P.st; }
    *out = d;
    return AK_OK;
}

const ak_json *ak_json_root(const ak_json_doc *d) { return d ? d->root : NULL; }

void ak_json_free(ak_json_doc *d) {
    if (!d) return;
    for (chunk *c = d->head, *n; c; c = n) { n = c->next; free(c); }
    free(d);
}

const ak_json *ak_json_get(const ak_json *v, const char *key) {
    if (!v || v->type != AK_JSON_OBJ) return NULL;
    size_t n = strlen(key);
    for (const ak_json *c = v->child; c; c = c->next)
        if (c->key_len == n && !memcmp(c->key, key, n)) return c;
    return NULL;
}

bool ak_json_int(const ak_json *v, int64_t *out) {
    if (!v || v->type != AK_JSON_NUM) return false;
    if (v->is_int) { *out = v->i; return true; }
    /* 2^63 is exactly representable; anything at or above it is out of range */
    if (!(v->num >= -9223372036854775808.0 && v->num < 9223372036854775808.0) || v->num != floor(v->num)) return false;
    *out = (int64_t)v->num;
    return true;
}

bool ak_json_num(const ak_json *v, double *out) {
    if (!v || v->type != AK_JSON_NUM) return false;
    *out = v->num;
    return true;
}

bool ak_json_bool(const ak_json *v, bool *out) {
    if (!v || v->type != AK_JSON_BOOL) return false;
    *out = v->b;
    return true;
}

bool ak_json_str_is(const ak_json *v, const char *s) {
    return v && v->type == AK_JSON_STR && strlen(s) == v->len && !memcmp(v->s, s, v->len);
}
