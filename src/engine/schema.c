/* JSON Schema to GBNF: one rule per schema node that needs one, shared rules for the JSON
 * primitives, objects in the schema's property order, integer bounds as digit-wise range
 * grammars. Which keywords are exact and which relaxed: see the table below. */
#include "engine/schema.h"
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "format/json.h"

/* What the grammar keeps of each keyword:
 *   exact:   type (and type arrays), properties/required in schema order, additionalProperties
 *            false, enum, const, items, prefixItems, minItems/maxItems up to SC_MAX_REPEAT,
 *            minLength/maxLength up to SC_MAX_REPEAT, anyOf/oneOf (as anyOf), allOf of object
 *            schemas, $ref into the document, integer minimum/maximum/exclusive* (any int64).
 *   bounded: integers have at most 18 digits, fractions 18, exponents 2; whitespace between
 *            tokens is "", " " or a newline and up to 20 spaces or tabs; strings use the
 *            short escapes and \uXXXX (surrogates paired), other characters raw.
 *   relaxed: maxItems/maxLength above SC_MAX_REPEAT (unbounded); number bounds (a minimum
 *            >= 0 only forbids the minus sign); formats date/time check digit ranges, not
 *            the calendar; oneOf is not exclusive; extra keys under additionalProperties
 *            true/{schema} beside properties may repeat a declared one; minLength/maxLength
 *            beside pattern are not kept; keywords beside $ref and beside anyOf/oneOf are
 *            ignored (nullable excepted).
 *   stricter (valid JSON the grammar refuses): members in another order than the schema's,
 *            whitespace beyond the bound, numbers beyond the digit bounds, \uXXXX for a
 *            character a const/enum/pattern literal spells raw.
 *   error:   the keywords in sc_unsupported, uniqueItems true, patterns beyond the subset of
 *            pattern_body, remote $refs and anchors, $ref cycles without text between. */

#define SC_MAX_DEPTH 96           /* schema nodes open at once, through $refs too */
#define SC_MAX_OUT ((size_t)4 << 20) /* bytes of grammar */
#define SC_MAX_WORK 200000        /* schema nodes visited */
#define SC_MAX_ENUM 4096
#define SC_MAX_REPEAT 1000        /* the largest {m,n} bound emitted */
#define SC_INT_DIGITS 18          /* 10^18 - 1 < 2^63: range arithmetic stays in int64 */
#define SC_NAME 64

enum {
    P_WS = 1 << 0, P_VALUE = 1 << 1, P_OBJECT = 1 << 2, P_ARRAY = 1 << 3, P_STRING = 1 << 4,
    P_CHAR = 1 << 5, P_NUMBER = 1 << 6, P_INTEGER = 1 << 7, P_BOOLEAN = 1 << 8, P_NULL = 1 << 9,
    P_DATE = 1 << 10, P_TIME = 1 << 11, P_DATE_S = 1 << 12, P_TIME_S = 1 << 13, P_DATETIME_S = 1 << 14,
    P_UUID_S = 1 << 15, P_COUNT = 16
};

/* The shared rules: name, body, the rules it uses. */
static const struct { const char *name, *body; unsigned deps; } sc_prims[P_COUNT] = {
    {"ws", "( \" \" | \"\\n\" [ \\t]{0,20} )?", 0},
    {"value", "object | array | string | number | boolean | null",
     P_OBJECT | P_ARRAY | P_STRING | P_NUMBER | P_BOOLEAN | P_NULL},
    {"object", "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"",
     P_WS | P_STRING | P_VALUE},
    {"array", "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"", P_WS | P_VALUE},
    {"string", "\"\\\"\" char* \"\\\"\"", P_CHAR},
    {"char", "[^\\\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\\\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )", 0},
    {"number", "\"-\"? ( \"0\" | [1-9] [0-9]{0,17} ) ( \".\" [0-9]{1,18} )? ( [eE] [-+]? [0-9]{1,2} )?", 0},
    {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,17} )", 0},
    {"boolean", "\"true\" | \"false\"", 0},
    {"null", "\"null\"", 0},
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )", 0},
    {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]{1,9} )? "
             "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", 0},
    {"date-string", "\"\\\"\" date \"\\\"\"", P_DATE},
    {"time-string", "\"\\\"\" time \"\\\"\"", P_TIME},
    {"date-time-string", "\"\\\"\" date \"T\" time \"\\\"\"", P_DATE | P_TIME},
    {"uuid-string", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                    "[0-9a-fA-F]{12} \"\\\"\"", 0},
};

/* Validation keywords whose meaning a grammar of ours cannot keep: an error, never ignored. */
static const char *const sc_unsupported[] = {
    "not", "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired",
    "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "contains",
    "minContains", "maxContains", "multipleOf", "minProperties", "maxProperties", "$dynamicRef",
    "$recursiveRef",
};

typedef struct {
    char *p;
    size_t n, cap;
    bool oom, big;
} sb;

typedef struct {
    const ak_json *node;
    char name[SC_NAME];
    bool active;  /* its rule is being built: a $ref to it is recursion */
    int open_at;  /* cv.level when it became active */
} sref;

typedef struct {
    const ak_json *root;
    sb out;
    unsigned used; /* P_* rules referenced */
    sref *refs;
    int n_refs, cap_refs;
    int depth, level, counter;
    long work;
    ak_err *err;
} cv;

/* ---- text ---- */

static void sb_put(sb *b, const char *s, size_t n) {
    if (b->oom || b->big) return;
    if (b->n + n + 1 > SC_MAX_OUT) { b->big = true; return; }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sb *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static ak_status sb_status(cv *c, const sb *b) {
    if (b->oom) return ak_fail(c->err, AK_ERR_NOMEM, "schema: out of memory");
    if (b->big) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: the grammar would exceed %zu bytes", SC_MAX_OUT);
    return AK_OK;
}

/* A GBNF string literal of n bytes (UTF-8 passes through; the matcher reads code points). */
static void put_lit(sb *o, const char *s, size_t n) {
    sb_puts(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') sb_puts(o, "\\\"");
        else if (ch == '\\') sb_puts(o, "\\\\");
        else if (ch == '\n') sb_puts(o, "\\n");
        else if (ch == '\r') sb_puts(o, "\\r");
        else if (ch == '\t') sb_puts(o, "\\t");
        else if (ch < 0x20 || ch == 0x7f) sb_printf(o, "\\x%02X", ch);
        else sb_put(o, (const char *)&s[i], 1);
    }
    sb_puts(o, "\"");
}

/* The JSON text of a string (quotes included), as a serializer writes it. */
static void json_str(sb *o, const char *s, size_t n) {
    sb_puts(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') sb_puts(o, "\\\"");
        else if (ch == '\\') sb_puts(o, "\\\\");
        else if (ch == '\n') sb_puts(o, "\\n");
        else if (ch == '\r') sb_puts(o, "\\r");
        else if (ch == '\t') sb_puts(o, "\\t");
        else if (ch == '\b') sb_puts(o, "\\b");
        else if (ch == '\f') sb_puts(o, "\\f");
        else if (ch < 0x20) sb_printf(o, "\\u%04x", ch);
        else sb_put(o, (const char *)&s[i], 1);
    }
    sb_puts(o, "\"");
}

/* The grammar literal matching the JSON string s exactly as json_str writes it. */
static void put_str_lit(sb *o, const char *s, size_t n) {
    sb t = {0};
    json_str(&t, s, n);
    if (t.oom || t.big) o->oom |= t.oom, o->big |= t.big;
    else put_lit(o, t.p, t.n);
    free(t.p);
}

static const char *use(cv *c, unsigned p) {
    c->used |= p;
    for (int i = 0; i < P_COUNT; i++)
        if (p == 1u << i) return sc_prims[i].name;
    return "value";
}

/* A fresh rule name: the hint made of [a-zA-Z0-9-], then "-" and a counter. Names end in
 * "-digits" after the last '-', so no two are equal and none is a shared rule's or root. */
static void new_name(cv *c, const char *hint, char out[SC_NAME]) {
    char h[33];
    size_t n = 0;
    for (const char *p = hint ? hint : ""; *p && n < 32; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!ok) ch = '-';
        if (ch == '-' && (n == 0 || h[n - 1] == '-')) continue;
        h[n++] = ch;
    }
    while (n && h[n - 1] == '-') n--;
    h[n] = 0;
    snprintf(out, SC_NAME, "%s-%d", n ? h : "r", ++c->counter);
}

static void emit_rule(cv *c, const char *name, const sb *body) {
    sb_puts(&c->out, name);
    sb_puts(&c->out, " ::= ");
    if (body->n) sb_put(&c->out, body->p, body->n);
    sb_puts(&c->out, "\n");
}

/* ---- schema access ---- */

static const ak_json *kw(const ak_json *s, const char *k) { return s && s->type == AK_JSON_OBJ ? ak_json_get(s, k) : NULL; }

static bool is_bool(const ak_json *v, bool b) { return v && v->type == AK_JSON_BOOL && v->b == b; }

/* A non-negative count keyword (minItems, maxLength, ...): -1 when absent. */
static ak_status count_kw(cv *c, const ak_json *s, const char *k, int64_t *out) {
    const ak_json *v = kw(s, k);
    *out = -1;
    if (!v) return AK_OK;
    double d;
    if (!ak_json_num(v, &d) || d < 0 || d >= 9e18 || d != floor(d))
        return ak_fail(c->err, AK_ERR_FORMAT, "schema: %s must be a non-negative integer", k);
    *out = (int64_t)d;
    return AK_OK;
}

static ak_status visit(cv *c, const ak_json *s, const char *hint, const char *forced, char ref[SC_NAME]);
static ak_status body(cv *c, const ak_json *s, const char *hint, sb *o);

/* ---- constants ---- */

static void put_num(sb *o, const ak_json *v) {
    if (v->is_int) { sb_printf(o, "\"%lld\"", (long long)v->i); return; }
    char t[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, v->num);
        if (strtod(t, NULL) == v->num) break;
    }
    put_lit(o, t, strlen(t));
}

/* The grammar of one JSON value exactly (whitespace allowed between its tokens). */
static void put_const(cv *c, sb *o, const ak_json *v) {
    switch (v->type) {
    case AK_JSON_NULL: sb_puts(o, "\"null\""); break;
    case AK_JSON_BOOL: sb_puts(o, v->b ? "\"true\"" : "\"false\""); break;
    case AK_JSON_NUM: put_num(o, v); break;
    case AK_JSON_STR: put_str_lit(o, v->s, v->len); break;
    case AK_JSON_ARR:
    case AK_JSON_OBJ: {
        bool obj = v->type == AK_JSON_OBJ;
        const char *ws = use(c, P_WS);
        sb_printf(o, "\"%c\" %s ", obj ? '{' : '[', ws);
        for (const ak_json *e = v->child; e; e = e->next) {
            if (e != v->child) sb_printf(o, "\",\" %s ", ws);
            if (obj) {
                put_str_lit(o, e->key, e->key_len);
                sb_printf(o, " %s \":\" %s ", ws, ws);
            }
            put_const(c, o, e);
            sb_printf(o, " %s ", ws);
        }
        sb_printf(o, "\"%c\"", obj ? '}' : ']');
        break;
    }
    }
}

/* ---- integers ---- */

static int64_t pow10i(int e) {
    int64_t p = 1;
    while (e-- > 0) p *= 10;
    return p;
}

static int ndigits(int64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static void put_digits_class(sb *o, char lo, char hi) {
    if (lo == hi) sb_printf(o, "\"%c\"", lo);
    else sb_printf(o, "[%c-%c]", lo, hi);
}

static void put_any_digits(sb *o, int n) {
    if (n == 1) sb_puts(o, " [0-9]");
    else if (n > 1) sb_printf(o, " [0-9]{%d}", n);
}

/* The numerals from x to y, both of n digits (as text, x <= y), digit by digit. */
static void same_len(sb *o, const char *x, const char *y, int n) {
    if (n == 0) return;
    if (x[0] == y[0]) {
        sb_printf(o, "\"%c\"", x[0]);
        if (n > 1) {
            sb_puts(o, " ");
            same_len(o, x + 1, y + 1, n - 1);
        }
        return;
    }
    bool x0 = true, y9 = true;
    for (int i = 1; i < n; i++) x0 &= x[i] == '0', y9 &= y[i] == '9';
    char lo = x0 ? x[0] : (char)(x[0] + 1), hi = y9 ? y[0] : (char)(y[0] - 1);
    char nines[SC_INT_DIGITS + 1], zeros[SC_INT_DIGITS + 1];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    int alts = !x0 + (lo <= hi) + !y9;
    if (alts > 1) sb_puts(o, "( ");
    const char *sep = "";
    if (!x0) {
        sb_printf(o, "\"%c\" ", x[0]);
        same_len(o, x + 1, nines, n - 1);
        sep = " | ";
    }
    if (lo <= hi) {
        sb_puts(o, sep);
        put_digits_class(o, lo, hi);
        put_any_digits(o, n - 1);
        sep = " | ";
    }
    if (!y9) {
        sb_puts(o, sep);
        sb_printf(o, "\"%c\" ", y[0]);
        same_len(o, zeros, y + 1, n - 1);
    }
    if (alts > 1) sb_puts(o, " )");
}

/* Alternatives for the numerals from a to b (0 <= a <= b < 10^18), no leading zeros. */
static void range_nonneg(sb *o, int64_t a, int64_t b) {
    bool first = true;
    int la = ndigits(a), lb = ndigits(b);
    int full_from = 0; /* a run of whole lengths [full_from, L) not yet written */
    for (int L = la; L <= lb + 1; L++) {
        bool whole = false;
        int64_t lo = 0, hi = 0;
        if (L <= lb) {
            int64_t start = L == 1 ? 0 : pow10i(L - 1);
            lo = a > start ? a : start;
            hi = b < pow10i(L) - 1 ? b : pow10i(L) - 1;
            whole = L > 1 && lo == start && hi == pow10i(L) - 1;
        }
        if (whole) {
            if (!full_from) full_from = L;
            continue;
        }
        if (full_from) {
            if (!first) sb_puts(o, " | ");
            first = false;
            int m = full_from - 1, n = L - 2; /* digits after the first */
            if (m == n) { sb_puts(o, "[1-9]"); put_any_digits(o, m); }
            else sb_printf(o, "[1-9] [0-9]{%d,%d}", m, n);
            full_from = 0;
        }
        if (L > lb) break;
        char x[24], y[24];
        snprintf(x, sizeof x, "%lld", (long long)lo);
        snprintf(y, sizeof y, "%lld", (long long)hi);
        if (!first) sb_puts(o, " | ");
        first = false;
        same_len(o, x, y, L);
    }
}

/* A bound keyword as an integer limit: lower bounds round up, upper bounds down. */
static ak_status int_bound(cv *c, const ak_json *s, bool lower, bool *has, int64_t *v) {
    const int64_t lim = pow10i(SC_INT_DIGITS) - 1;
    const char *k = lower ? "minimum" : "maximum", *kx = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    const ak_json *b = kw(s, k), *bx = kw(s, kx);
    *has = false;
    *v = lower ? -lim : lim;
    for (int pass = 0; pass < 2; pass++) {
        const ak_json *e = pass ? bx : b;
        if (!e || e->type == AK_JSON_BOOL) continue;
        double d;
        if (!ak_json_num(e, &d)) return ak_fail(c->err, AK_ERR_FORMAT, "schema: %s must be a number", pass ? kx : k);
        /* draft 4: exclusiveMinimum: true makes minimum exclusive */
        bool excl = pass == 1 || is_bool(bx, true);
        if (d > 9.5e17 || d < -9.5e17) {
            if ((lower && d > 0) || (!lower && d < 0))
                return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: %s %g is beyond %d-digit integers", pass ? kx : k,
                               d, SC_INT_DIGITS);
            continue; /* below every integer the grammar writes: no bound */
        }
        double r = lower ? (excl ? floor(d) + 1 : ceil(d))
                         : (excl ? ceil(d) - 1 : floor(d));
        int64_t iv = (int64_t)r;
        if (iv < -lim) iv = -lim;
        if (iv > lim) iv = lim;
        if (!*has || (lower ? iv > *v : iv < *v)) *v = iv;
        *has = true;
    }
    return AK_OK;
}

static ak_status integer_body(cv *c, const ak_json *s, sb *o) {
    bool hl, hh;
    int64_t lo, hi;
    ak_status st = int_bound(c, s, true, &hl, &lo);
    if (!st) st = int_bound(c, s, false, &hh, &hi);
    if (st) return st;
    if (!hl && !hh) { sb_puts(o, use(c, P_INTEGER)); return AK_OK; }
    if (lo > hi) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: no integer lies between minimum and maximum");
    bool first = true;
    if (lo < 0) {
        sb_puts(o, "\"-\" ( ");
        range_nonneg(o, hi < 0 ? -hi : 1, -lo);
        sb_puts(o, " )");
        first = false;
    }
    if (hi >= 0) {
        if (!first) sb_puts(o, " | ");
        range_nonneg(o, lo > 0 ? lo : 0, hi);
    }
    return AK_OK;
}

static ak_status number_body(cv *c, const ak_json *s, sb *o) {
    bool hl;
    int64_t lo;
    /* only a lower bound >= 0 is kept (no minus sign); the rest is relaxed */
    ak_status st = int_bound(c, s, true, &hl, &lo);
    if (st == AK_ERR_UNSUPPORTED) st = AK_OK, hl = false;
    if (st) return st;
    const ak_json *m = kw(s, "minimum"), *mx = kw(s, "exclusiveMinimum");
    double d;
    bool nonneg = (ak_json_num(m, &d) && d >= 0) || (ak_json_num(mx, &d) && d >= 0);
    if (!nonneg) { sb_puts(o, use(c, P_NUMBER)); return AK_OK; }
    sb_puts(o, "( \"0\" | [1-9] [0-9]{0,17} ) ( \".\" [0-9]{1,18} )? ( [eE] [-+]? [0-9]{1,2} )?");
    return AK_OK;
}

/* ---- strings ---- */

/* item (one term) repeated m to n times (n < 0: unbounded); nothing when n is 0. */
static ak_status put_repeat(cv *c, sb *o, const char *what, const char *item, int64_t m, int64_t n) {
    if (m < 0) m = 0;
    if (m > SC_MAX_REPEAT) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: %s %lld is above %d", what,
                                          (long long)m, SC_MAX_REPEAT);
    if (n > SC_MAX_REPEAT) n = -1; /* relaxed: unbounded */
    if (n >= 0 && n < m) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: %s: the maximum is below the minimum", what);
    if (n == 0) return AK_OK;
    sb_puts(o, item);
    if (n < 0) {
        if (m == 0) sb_puts(o, "*");
        else if (m == 1) sb_puts(o, "+");
        else sb_printf(o, "{%lld,}", (long long)m);
    } else if (m == n) {
        if (m != 1) sb_printf(o, "{%lld}", (long long)m);
    } else if (m == 0 && n == 1) {
        sb_puts(o, "?");
    } else {
        sb_printf(o, "{%lld,%lld}", (long long)m, (long long)n);
    }
    sb_puts(o, " ");
    return AK_OK;
}

/* ---- pattern: a regex subset ---- */

/* A pattern (ECMA-262 subset) read into GBNF over the string's JSON text: literals,
 * escapes \d \w \s \D \W \S and escaped punctuation, ".", classes of ASCII (negated ones
 * take any other code point), groups ( ) (?: ), "|", * + ? {m} {m,} {m,n} (lazy forms
 * alike), ^ at the start and $ at the end (without them, any text around). Characters
 * that JSON escapes are matched in their short escaped form only. */
typedef struct {
    cv *c;
    const char *p, *end, *src;
    int depth;
} rx;

static ak_status rx_fail(rx *r, const char *why) {
    return ak_fail(r->c->err, AK_ERR_UNSUPPORTED, "schema: pattern \"%.100s\": %s at offset %d", r->src, why,
                   (int)(r->p - r->src));
}

typedef struct { uint8_t bit[16]; } aset; /* ASCII members */
static void aset_add(aset *a, int lo, int hi) {
    for (int ch = lo; ch <= hi && ch < 128; ch++) a->bit[ch >> 3] |= (uint8_t)(1u << (ch & 7));
}
static bool aset_has(const aset *a, int ch) { return a->bit[ch >> 3] >> (ch & 7) & 1; }

/* \d \w \s and their negations into a (neg: the complement within ASCII) */
static bool rx_class_esc(char e, aset *a) {
    aset t = {{0}};
    char l = (char)(e | 0x20);
    if (l == 'd') aset_add(&t, '0', '9');
    else if (l == 'w') aset_add(&t, '0', '9'), aset_add(&t, 'a', 'z'), aset_add(&t, 'A', 'Z'), aset_add(&t, '_', '_');
    else if (l == 's') aset_add(&t, ' ', ' '), aset_add(&t, '\t', '\r');
    else return false;
    for (int i = 0; i < 16; i++) a->bit[i] |= e == l ? t.bit[i] : (uint8_t)~t.bit[i];
    return true;
}

/* One JSON-text item for the code points of a (neg: every code point but a's). */
static ak_status rx_put_set(rx *r, sb *o, const aset *a, bool neg) {
    sb cls = {0};
    for (int ch = 0x20; ch < 0x7f; ch++) {
        if (ch == '"' || ch == '\\' || !aset_has(a, ch)) continue; /* members, or what [^ ] leaves out */
        int hi = ch;
        while (hi + 1 < 0x7f && hi + 1 != '"' && hi + 1 != '\\' && aset_has(a, hi + 1)) hi++;
        sb_printf(&cls, "\\x%02X", ch);
        if (hi > ch) sb_printf(&cls, "-\\x%02X", hi);
        ch = hi;
    }
    const char *sep = "";
    sb_puts(o, "( ");
    if (neg || cls.n) {
        sb_printf(o, "[%s%s]", neg ? "^\\x00-\\x1F\\x22\\x5C" : "", cls.n ? cls.p : "");
        sep = " | ";
    }
    free(cls.p);
    static const struct { int ch; const char *esc; } e[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""},
                                                            {'\n', "\"\\\\n\""}, {'\t', "\"\\\\t\""},
                                                            {'\r', "\"\\\\r\""}, {'\b', "\"\\\\b\""},
                                                            {'\f', "\"\\\\f\""}};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        if (aset_has(a, e[i].ch) != neg) {
            sb_printf(o, "%s%s", sep, e[i].esc);
            sep = " | ";
        }
    if (!*sep) return rx_fail(r, "a class of characters that JSON writes as \\u escapes only");
    sb_puts(o, " )");
    return AK_OK;
}

static ak_status rx_alt(rx *r, sb *o);

static ak_status rx_atom(rx *r, sb *o) {
    char ch = *r->p++;
    aset a = {{0}};
    if (ch == '(') {
        if (++r->depth > 32) return rx_fail(r, "groups nested too deep");
        if (r->p < r->end && *r->p == '?') {
            if (r->end - r->p < 2 || r->p[1] != ':') return rx_fail(r, "lookarounds and named groups are not supported");
            r->p += 2;
        }
        sb_puts(o, "( ");
        ak_status st = rx_alt(r, o);
        if (st) return st;
        if (r->p >= r->end || *r->p != ')') return rx_fail(r, "a group without ')'");
        r->p++;
        r->depth--;
        sb_puts(o, " )");
        return AK_OK;
    }
    if (ch == '.') {
        aset_add(&a, '\n', '\n');
        return rx_put_set(r, o, &a, true);
    }
    if (ch == '[') {
        bool neg = r->p < r->end && *r->p == '^';
        if (neg) r->p++;
        bool first = true;
        while (r->p < r->end && (*r->p != ']' || first)) {
            first = false;
            int lo = (unsigned char)*r->p++;
            if (lo == '\\') {
                if (r->p >= r->end) return rx_fail(r, "a class ends in '\\'");
                char e = *r->p++;
                if (rx_class_esc(e, &a)) continue;
                if (e == 'n') lo = '\n';
                else if (e == 't') lo = '\t';
                else if (e == 'r') lo = '\r';
                else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
                    return rx_fail(r, "an escape in a class that is not supported");
                else lo = (unsigned char)e;
            }
            int hi = lo;
            if (r->end - r->p >= 2 && *r->p == '-' && r->p[1] != ']') {
                r->p++;
                hi = (unsigned char)*r->p++;
                if (hi == '\\') return rx_fail(r, "an escape as a range's end is not supported");
            }
            if (lo >= 128 || hi >= 128 || hi < lo) return rx_fail(r, "classes of ASCII characters only");
            aset_add(&a, lo, hi);
        }
        if (r->p >= r->end) return rx_fail(r, "a class without ']'");
        r->p++;
        return rx_put_set(r, o, &a, neg);
    }
    if (ch == '\\') {
        if (r->p >= r->end) return rx_fail(r, "a pattern ends in '\\'");
        char e = *r->p++;
        if (rx_class_esc(e, &a)) return rx_put_set(r, o, &a, false);
        if (e == 'n') ch = '\n';
        else if (e == 't') ch = '\t';
        else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
            return rx_fail(r, "an escape that is not supported");
        else ch = e;
    } else if (strchr("*+?{}|)^$]", ch)) {
        r->p--;
        return rx_fail(r, "a character that must be escaped");
    } else if ((unsigned char)ch >= 128) {
        r->p--;
        return rx_fail(r, "non-ASCII characters are not supported");
    }
    sb t = {0}; /* the character's JSON text, without the quotes */
    json_str(&t, &ch, 1);
    if (t.oom) o->oom = true;
    else put_lit(o, t.p + 1, t.n - 2);
    free(t.p);
    return AK_OK;
}

static ak_status rx_seq(rx *r, sb *o) {
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$' && r->p + 1 == r->end) return AK_OK;
        ak_status st = rx_atom(r, o);
        if (st) return st;
        if (r->p >= r->end) break;
        char q = *r->p;
        int64_t m = -2, n = -1;
        if (q == '*') m = 0;
        else if (q == '+') m = 1;
        else if (q == '?') m = 0, n = 1;
        else if (q == '{') {
            char *e;
            m = (int64_t)strtoll(r->p + 1, &e, 10);
            if (e == r->p + 1 || m < 0) return rx_fail(r, "a '{' that is not a repetition");
            n = m;
            if (*e == ',') {
                const char *f = e + 1;
                n = *f == '}' ? -1 : (int64_t)strtoll(f, &e, 10);
                if (n != -1 && e == f) return rx_fail(r, "a '{' that is not a repetition");
                if (n == -1) e = (char *)f;
            }
            if (e >= r->end || *e != '}') return rx_fail(r, "a '{' that is not a repetition");
            r->p = e;
        }
        if (m == -2) { sb_puts(o, " "); continue; }
        r->p++;
        if (r->p < r->end && *r->p == '?') r->p++; /* lazy: the same language */
        if (m > SC_MAX_REPEAT || n > SC_MAX_REPEAT) return rx_fail(r, "a repetition count above 1000");
        if (n >= 0 && n < m) return rx_fail(r, "a repetition {m,n} with n < m");
        /* wrap the atom just written: find it again by rewriting as a group */
        if (n == 0) { sb_puts(o, "{0} "); continue; }
        if (n < 0) sb_printf(o, m == 0 ? "*" : m == 1 ? "+" : "{%lld,}", (long long)m);
        else if (m == 0 && n == 1) sb_puts(o, "?");
        else if (m == n) sb_printf(o, "{%lld}", (long long)m);
        else sb_printf(o, "{%lld,%lld}", (long long)m, (long long)n);
        sb_puts(o, " ");
    }
    return AK_OK;
}

static ak_status rx_alt(rx *r, sb *o) {
    for (;;) {
        sb_puts(o, "( ");
        ak_status st = rx_seq(r, o);
        if (st) return st;
        sb_puts(o, " )");
        if (r->p >= r->end || *r->p != '|') return AK_OK;
        r->p++;
        sb_puts(o, " | ");
    }
}

static ak_status pattern_body(cv *c, const ak_json *pat, sb *o) {
    if (pat->type != AK_JSON_STR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: pattern must be a string");
    if (strlen(pat->s) != pat->len) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: pattern with a NUL");
    rx r = {c, pat->s, pat->s + pat->len, pat->s, 0};
    bool head = r.p < r.end && *r.p == '^';
    if (head) r.p++;
    sb_puts(o, "\"\\\"\" ");
    if (!head) sb_printf(o, "%s* ", use(c, P_CHAR));
    sb_puts(o, "( ");
    ak_status st = rx_alt(&r, o);
    if (st) return st;
    bool tail = r.p + 1 == r.end && *r.p == '$';
    if (tail) r.p++;
    if (r.p != r.end) return rx_fail(&r, "an unmatched ')'");
    sb_puts(o, " ) ");
    if (!tail) sb_printf(o, "%s* ", use(c, P_CHAR));
    sb_puts(o, "\"\\\"\"");
    return AK_OK;
}

static ak_status string_body(cv *c, const ak_json *s, sb *o) {
    const ak_json *f = kw(s, "format");
    static const struct { const char *name; unsigned p; } fmts[] = {
        {"date", P_DATE_S}, {"time", P_TIME_S}, {"date-time", P_DATETIME_S}, {"uuid", P_UUID_S}};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
        if (ak_json_str_is(f, fmts[i].name)) { sb_puts(o, use(c, fmts[i].p)); return AK_OK; }
    const ak_json *pat = kw(s, "pattern");
    if (pat) return pattern_body(c, pat, o); /* minLength/maxLength beside it: not kept */
    int64_t mn, mx;
    ak_status st = count_kw(c, s, "minLength", &mn);
    if (!st) st = count_kw(c, s, "maxLength", &mx);
    if (st) return st;
    if (mn <= 0 && mx < 0) { sb_puts(o, use(c, P_STRING)); return AK_OK; }
    sb_puts(o, "\"\\\"\" ");
    if ((st = put_repeat(c, o, "minLength/maxLength", use(c, P_CHAR), mn, mx))) return st;
    sb_puts(o, "\"\\\"\"");
    return AK_OK;
}

/* ---- arrays ---- */

static ak_status array_body(cv *c, const ak_json *s, const char *hint, sb *o) {
    const ak_json *prefix = kw(s, "prefixItems"), *items = kw(s, "items"), *rest;
    if (prefix && prefix->type != AK_JSON_ARR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: prefixItems must be an array");
    if (prefix) {
        rest = items;
    } else if (items && items->type == AK_JSON_ARR) { /* draft 4 tuples */
        prefix = items;
        rest = kw(s, "additionalItems");
    } else {
        rest = items;
    }
    int64_t mn, mx;
    ak_status st = count_kw(c, s, "minItems", &mn);
    if (!st) st = count_kw(c, s, "maxItems", &mx);
    if (st) return st;
    if (mn < 0) mn = 0;
    if (mx >= 0 && mx < mn) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: maxItems is below minItems");
    bool more = !is_bool(rest, false);
    int64_t np = prefix ? (int64_t)prefix->len : 0;
    if (!more && mn > np) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: minItems exceeds the items allowed");
    const char *ws = use(c, P_WS);
    int64_t upto = np; /* prefix items written */
    if (mx >= 0 && mx < upto) upto = mx;
    sb_printf(o, "\"[\" %s ", ws);
    c->level++;
    int open = 0;
    char ref[SC_NAME];
    const ak_json *e = prefix ? prefix->child : NULL;
    for (int64_t i = 0; i < upto && e; i++, e = e->next) {
        if (i >= mn) { sb_puts(o, "( "); open++; }
        if (i > 0) sb_printf(o, "\",\" %s ", ws);
        if ((st = visit(c, e, hint, NULL, ref))) goto done;
        sb_printf(o, "%s %s ", ref, ws);
    }
    if (more && (mx < 0 || mx > np)) {
        if ((st = visit(c, rest, hint, NULL, ref))) goto done;
        int64_t rmin = mn > np ? mn - np : 0, rmax = mx < 0 ? -1 : mx - np;
        char item[3 * SC_NAME + 16];
        snprintf(item, sizeof item, "( \",\" %s %s %s )", ws, ref, ws);
        if (np > 0) {
            if ((st = put_repeat(c, o, "minItems/maxItems", item, rmin, rmax))) goto done;
        } else {
            if (rmin == 0) sb_puts(o, "( ");
            sb_printf(o, "%s %s ", ref, ws);
            if ((st = put_repeat(c, o, "minItems/maxItems", item, rmin ? rmin - 1 : 0, rmax < 0 ? -1 : rmax - 1)))
                goto done;
            if (rmin == 0) sb_puts(o, ")? ");
        }
    }
    while (open--) sb_puts(o, ")? ");
    sb_puts(o, "\"]\"");
done:
    c->level--;
    return st;
}

/* ---- objects ---- */

typedef struct {
    const char *name;
    size_t len;
    const ak_json *schema; /* NULL: any value */
    bool req;
} prop;

typedef struct {
    prop *p;
    int n, cap;
    const ak_json *req[256]; /* the required arrays gathered */
    int n_req;
    bool has_props;
    const ak_json *addl; /* additionalProperties as last given (NULL: absent) */
} objspec;

static const ak_json *resolve(cv *c, const ak_json *s, ak_status *st);

static ak_status gather(cv *c, objspec *os, const ak_json *s, int depth) {
    if (depth > 16) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: allOf nested too deep");
    if (++c->work > SC_MAX_WORK) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: more than %d schema nodes", SC_MAX_WORK);
    ak_status st = AK_OK;
    s = resolve(c, s, &st);
    if (st) return st;
    if (is_bool(s, true)) return AK_OK;
    if (!s || s->type != AK_JSON_OBJ)
        return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: allOf of a schema that is not an object schema");
    static const char *const keep[] = {"type", "properties", "required", "additionalProperties", "allOf",
                                       "description", "title", "$schema", "$id", "default", "examples",
                                       "$comment", "$defs", "definitions", "$ref"};
    for (const ak_json *m = s->child; m && depth > 0; m = m->next) {
        bool ok = false;
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) ok |= strcmp(m->key, keep[i]) == 0;
        if (!ok) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: allOf with \"%s\" (only object schemas merge)", m->key);
    }
    const ak_json *t = kw(s, "type");
    if (depth > 0 && t && !ak_json_str_is(t, "object"))
        return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: allOf of a schema that is not an object schema");
    const ak_json *props = kw(s, "properties");
    if (props) {
        if (props->type != AK_JSON_OBJ) return ak_fail(c->err, AK_ERR_FORMAT, "schema: properties must be an object");
        os->has_props = true;
        for (const ak_json *m = props->child; m; m = m->next) {
            for (int i = 0; i < os->n; i++)
                if (os->p[i].len == m->key_len && !memcmp(os->p[i].name, m->key, m->key_len))
                    return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: allOf defines property \"%s\" twice", m->key);
            if (os->n == os->cap) {
                int cap = os->cap ? os->cap * 2 : 16;
                prop *p = realloc(os->p, (size_t)cap * sizeof *p);
                if (!p) return ak_fail(c->err, AK_ERR_NOMEM, "schema: out of memory");
                os->p = p, os->cap = cap;
            }
            os->p[os->n++] = (prop){m->key, m->key_len, m, false};
        }
    }
    const ak_json *req = kw(s, "required");
    if (req) {
        if (req->type != AK_JSON_ARR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: required must be an array");
        if (os->n_req == (int)(sizeof os->req / sizeof os->req[0]))
            return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: too many required lists");
        os->req[os->n_req++] = req;
    }
    const ak_json *a = kw(s, "additionalProperties");
    if (a) {
        if (a->type != AK_JSON_OBJ && a->type != AK_JSON_BOOL)
            return ak_fail(c->err, AK_ERR_FORMAT, "schema: additionalProperties must be a schema");
        if (!os->addl || !is_bool(os->addl, false)) os->addl = a; /* false wins */
    }
    const ak_json *all = kw(s, "allOf");
    if (all) {
        if (all->type != AK_JSON_ARR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: allOf must be an array");
        for (const ak_json *m = all->child; m && !st; m = m->next) st = gather(c, os, m, depth + 1);
    }
    return st;
}

/* Every required name marked (or added with any value when properties lacks it). */
static ak_status mark_required(cv *c, objspec *os) {
    for (int r = 0; r < os->n_req; r++)
        for (const ak_json *e = os->req[r]->child; e; e = e->next) {
            if (e->type != AK_JSON_STR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: required holds a non-string");
            int i = 0;
            while (i < os->n && !(os->p[i].len == e->len && !memcmp(os->p[i].name, e->s, e->len))) i++;
            if (i == os->n) {
                if (os->n == os->cap) {
                    int cap = os->cap ? os->cap * 2 : 16;
                    prop *p = realloc(os->p, (size_t)cap * sizeof *p);
                    if (!p) return ak_fail(c->err, AK_ERR_NOMEM, "schema: out of memory");
                    os->p = p, os->cap = cap;
                }
                os->p[os->n++] = (prop){e->s, e->len, NULL, false};
            }
            if (is_bool(os->p[i].schema, false))
                return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: required property \"%s\" has schema false", e->s);
            os->p[i].req = true;
        }
    return AK_OK;
}

/* kv_i: "key" ws ":" ws value ws */
static ak_status put_member(cv *c, sb *o, const prop *p, const char *hint) {
    char ref[SC_NAME];
    char h[SC_NAME];
    snprintf(h, sizeof h, "%s-%.*s", hint, (int)(p->len < 32 ? p->len : 32), p->name);
    ak_status st = visit(c, p->schema, h, NULL, ref);
    if (st) return st;
    const char *ws = use(c, P_WS);
    put_str_lit(o, p->name, p->len);
    sb_printf(o, " %s \":\" %s %s %s", ws, ws, ref, ws);
    return AK_OK;
}

static ak_status emit_named(cv *c, const char *hint, const sb *b, char name[SC_NAME]) {
    ak_status st = sb_status(c, b);
    if (st) return st;
    new_name(c, hint, name);
    emit_rule(c, name, b);
    return sb_status(c, &c->out);
}

/* Members in schema order; optional ones may be left out. a[i]: the members from i on, each
 * after a comma; b[i]: the same with the first one present written without a comma. */
static ak_status object_props(cv *c, objspec *os, const char *extra, const char *hint, sb *o) {
    int n = 0;
    for (int i = 0; i < os->n; i++) /* a property with schema false never appears */
        if (!is_bool(os->p[i].schema, false)) os->p[n++] = os->p[i];
    const char *ws = use(c, P_WS);
    char (*a)[SC_NAME] = calloc((size_t)n + 2, SC_NAME);
    char (*kv)[SC_NAME] = calloc((size_t)n + 1, SC_NAME);
    if (!a || !kv) { free(a), free(kv); return ak_fail(c->err, AK_ERR_NOMEM, "schema: out of memory"); }
    ak_status st = AK_OK;
    sb t = {0};
    char hk[SC_NAME];
    snprintf(hk, sizeof hk, "%s-kv", hint);
    for (int i = 0; i < n && !st; i++) { /* each member as a rule */
        t.n = 0;
        if (!(st = put_member(c, &t, &os->p[i], hint))) st = emit_named(c, hk, &t, kv[i]);
    }
    if (!st && extra) { /* a[n]: the extra members */
        t.n = 0;
        sb_printf(&t, "( \",\" %s %s )*", ws, extra);
        st = emit_named(c, hint, &t, a[n]);
    }
    for (int i = n - 1; i >= 1 && !st; i--) {
        t.n = 0;
        if (os->p[i].req) sb_printf(&t, "\",\" %s %s", ws, kv[i]);
        else sb_printf(&t, "( \",\" %s %s )?", ws, kv[i]);
        if (a[i + 1][0]) sb_printf(&t, " %s", a[i + 1]);
        st = emit_named(c, hint, &t, a[i]);
    }
    /* b from the first required member (or the end) back to the first */
    int r = 0;
    while (r < n && !os->p[r].req) r++;
    sb bx = {0}; /* b[i] as an expression; empty means nothing */
    if (!st) {
        if (r < n) {
            sb_printf(&bx, "%s%s%s", kv[r], a[r + 1][0] ? " " : "", a[r + 1]);
        } else if (extra) {
            sb_printf(&bx, "( %s %s )?", extra, a[n]);
        }
    }
    for (int i = r - 1; i >= 0 && !st; i--) {
        t.n = 0;
        if (bx.n) {
            char bn[SC_NAME];
            if ((st = emit_named(c, hint, &bx, bn))) break;
            sb_printf(&t, "%s%s%s | %s", kv[i], a[i + 1][0] ? " " : "", a[i + 1], bn);
        } else {
            sb_printf(&t, "( %s%s%s )?", kv[i], a[i + 1][0] ? " " : "", a[i + 1]);
        }
        bx.n = 0;
        sb_put(&bx, t.p, t.n);
        if (t.oom) bx.oom = true;
    }
    if (!st) st = sb_status(c, &bx);
    if (!st) {
        sb_printf(o, "\"{\" %s ", ws);
        if (bx.n) sb_printf(o, "( %s ) ", bx.p); /* it may hold alternatives */
        sb_puts(o, "\"}\"");
    }
    free(t.p), free(bx.p), free(a), free(kv);
    return st;
}

static ak_status object_body(cv *c, const ak_json *s, const char *hint, sb *o) {
    objspec os = {0};
    ak_status st = gather(c, &os, s, 0);
    if (!st) st = mark_required(c, &os);
    const char *ws = use(c, P_WS);
    c->level++;
    char xref[SC_NAME] = "", kvx[SC_NAME] = "";
    /* additionalProperties defaults to false beside properties (as llama.cpp's converter),
     * to true without */
    bool extra = os.addl ? !is_bool(os.addl, false) : !os.has_props;
    if (!st && extra) {
        sb t = {0};
        if (!(st = visit(c, os.addl, hint, NULL, xref))) {
            sb_printf(&t, "%s %s \":\" %s %s %s", use(c, P_STRING), ws, ws, xref, ws);
            char hx[SC_NAME];
            snprintf(hx, sizeof hx, "%s-extra", hint);
            st = emit_named(c, hx, &t, kvx);
        }
        free(t.p);
    }
    if (!st) {
        if (os.n == 0 && extra && !os.addl) sb_puts(o, use(c, P_OBJECT));
        else if (os.n == 0 && !extra) sb_printf(o, "\"{\" %s \"}\"", ws);
        else st = object_props(c, &os, extra ? kvx : NULL, hint, o);
    }
    c->level--;
    free(os.p);
    return st;
}

/* ---- $ref ---- */

/* The node a local JSON pointer ("#", "#/a/b", ~0 ~1 escapes) names. */
static const ak_json *pointer(cv *c, const char *ref, ak_status *st) {
    if (ref[0] != '#') {
        *st = ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: $ref \"%.200s\" is not local to the document", ref);
        return NULL;
    }
    const ak_json *v = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') {
        *st = ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: $ref \"%.200s\" (anchors) is not supported", ref);
        return NULL;
    }
    while (*p == '/') {
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            if (n + 1 >= sizeof seg) { v = NULL; break; }
            seg[n++] = ch;
        }
        seg[n] = 0;
        if (!v) break;
        if (v->type == AK_JSON_OBJ) {
            v = ak_json_get(v, seg);
        } else if (v->type == AK_JSON_ARR) {
            char *end;
            unsigned long k = strtoul(seg, &end, 10);
            const ak_json *e = v->child;
            if (!n || *end) e = NULL;
            for (unsigned long i = 0; e && i < k; i++) e = e->next;
            v = e;
        } else {
            v = NULL;
        }
        if (!v) break;
    }
    if (!v) *st = ak_fail(c->err, AK_ERR_FORMAT, "schema: $ref \"%.200s\" points nowhere", ref);
    return v;
}

static int find_ref(cv *c, const ak_json *node) {
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i].node == node) return i;
    return -1;
}

static int add_ref(cv *c, const ak_json *node, const char *name) {
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 16;
        sref *r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) return -1;
        c->refs = r, c->cap_refs = cap;
    }
    sref *r = &c->refs[c->n_refs];
    r->node = node;
    snprintf(r->name, SC_NAME, "%s", name);
    r->active = true;
    r->open_at = c->level;
    return c->n_refs++;
}

/* The target of a chain of bare $refs (for allOf, which merges what they name). */
static const ak_json *resolve(cv *c, const ak_json *s, ak_status *st) {
    for (int hops = 0; s && s->type == AK_JSON_OBJ; hops++) {
        const ak_json *r = kw(s, "$ref");
        if (!r) break;
        if (r->type != AK_JSON_STR) { *st = ak_fail(c->err, AK_ERR_FORMAT, "schema: $ref must be a string"); return NULL; }
        if (hops > 64) { *st = ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: $ref cycle without progress"); return NULL; }
        if (!(s = pointer(c, r->s, st))) return NULL;
    }
    return s;
}

static ak_status ref_body(cv *c, const ak_json *r, sb *o) {
    if (r->type != AK_JSON_STR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: $ref must be a string");
    ak_status st = AK_OK;
    const ak_json *t = pointer(c, r->s, &st);
    if (!t) return st;
    int i = find_ref(c, t);
    if (i >= 0) {
        if (c->refs[i].active && c->refs[i].open_at == c->level)
            return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: $ref \"%.200s\" comes back to itself without "
                           "any text between (left recursion)", r->s);
        sb_puts(o, c->refs[i].name);
        return AK_OK;
    }
    const char *slash = strrchr(r->s, '/');
    char name[SC_NAME], ref[SC_NAME];
    new_name(c, slash ? slash + 1 : "ref", name);
    if ((i = add_ref(c, t, name)) < 0) return ak_fail(c->err, AK_ERR_NOMEM, "schema: out of memory");
    st = visit(c, t, name, name, ref);
    c->refs[i].active = false;
    if (!st) sb_puts(o, name);
    return st;
}

/* ---- dispatch ---- */

static ak_status typed_body(cv *c, const ak_json *s, const char *t, const char *hint, sb *o) {
    if (!strcmp(t, "string")) return string_body(c, s, o);
    if (!strcmp(t, "integer")) return integer_body(c, s, o);
    if (!strcmp(t, "number")) return number_body(c, s, o);
    if (!strcmp(t, "boolean")) { sb_puts(o, use(c, P_BOOLEAN)); return AK_OK; }
    if (!strcmp(t, "null")) { sb_puts(o, use(c, P_NULL)); return AK_OK; }
    if (!strcmp(t, "object")) return object_body(c, s, hint, o);
    if (!strcmp(t, "array")) return array_body(c, s, hint, o);
    return ak_fail(c->err, AK_ERR_FORMAT, "schema: unknown type \"%.100s\"", t);
}

/* The type a schema without "type" stands for, from its keywords (NULL: any value). */
static const char *implied_type(const ak_json *s) {
    static const struct { const char *kw, *type; } by[] = {
        {"properties", "object"}, {"additionalProperties", "object"}, {"required", "object"},
        {"items", "array"}, {"prefixItems", "array"}, {"minItems", "array"}, {"maxItems", "array"},
        {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"}, {"format", "string"},
        {"minimum", "number"}, {"maximum", "number"}, {"exclusiveMinimum", "number"}, {"exclusiveMaximum", "number"},
    };
    for (size_t i = 0; i < sizeof by / sizeof by[0]; i++)
        if (kw(s, by[i].kw)) return by[i].type;
    return NULL;
}

static ak_status alternatives(cv *c, const ak_json *arr, const char *what, const char *hint, sb *o) {
    if (arr->type != AK_JSON_ARR || !arr->len)
        return ak_fail(c->err, AK_ERR_FORMAT, "schema: %s must be a non-empty array", what);
    if (arr->len > SC_MAX_ENUM) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: %s has over %d entries", what, SC_MAX_ENUM);
    char ref[SC_NAME];
    for (const ak_json *e = arr->child; e; e = e->next) {
        ak_status st = visit(c, e, hint, NULL, ref);
        if (st) return st;
        sb_printf(o, "%s%s", e == arr->child ? "" : " | ", ref);
    }
    return AK_OK;
}

static ak_status schema_body(cv *c, const ak_json *s, const char *hint, sb *o) {
    for (const ak_json *m = s->child; m; m = m->next) {
        for (size_t i = 0; i < sizeof sc_unsupported / sizeof sc_unsupported[0]; i++)
            if (!strcmp(m->key, sc_unsupported[i]))
                return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: the keyword \"%s\" is not supported", m->key);
        if (!strcmp(m->key, "uniqueItems") && is_bool(m, true))
            return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: the keyword \"uniqueItems\" is not supported");
    }
    const ak_json *v;
    if ((v = kw(s, "$ref"))) return ref_body(c, v, o);
    if ((v = kw(s, "const"))) { put_const(c, o, v); return AK_OK; }
    if ((v = kw(s, "enum"))) {
        if (v->type != AK_JSON_ARR || !v->len) return ak_fail(c->err, AK_ERR_FORMAT, "schema: enum must be a non-empty array");
        if (v->len > SC_MAX_ENUM) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: enum has over %d values", SC_MAX_ENUM);
        for (const ak_json *e = v->child; e; e = e->next) {
            if (e != v->child) sb_puts(o, " | ");
            put_const(c, o, e);
        }
        return AK_OK;
    }
    if ((v = kw(s, "anyOf")) || (v = kw(s, "oneOf"))) return alternatives(c, v, v->key, hint, o);
    if (kw(s, "allOf")) return object_body(c, s, hint, o);
    const ak_json *t = kw(s, "type");
    if (!t) {
        const char *it = implied_type(s);
        if (!it) { sb_puts(o, use(c, P_VALUE)); return AK_OK; }
        return typed_body(c, s, it, hint, o);
    }
    if (t->type == AK_JSON_STR) return typed_body(c, s, t->s, hint, o);
    if (t->type != AK_JSON_ARR || !t->len) return ak_fail(c->err, AK_ERR_FORMAT, "schema: type must be a string or an array");
    for (const ak_json *e = t->child; e; e = e->next) {
        if (e->type != AK_JSON_STR) return ak_fail(c->err, AK_ERR_FORMAT, "schema: type arrays hold strings");
        sb_puts(o, e == t->child ? "( " : " | ( ");
        ak_status st = typed_body(c, s, e->s, hint, o);
        if (st) return st;
        sb_puts(o, " )");
    }
    return AK_OK;
}

static ak_status body(cv *c, const ak_json *s, const char *hint, sb *o) {
    if (++c->work > SC_MAX_WORK) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: more than %d schema nodes", SC_MAX_WORK);
    if (!s || is_bool(s, true)) { sb_puts(o, use(c, P_VALUE)); return AK_OK; }
    if (is_bool(s, false)) return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: false (no value) as a value's schema");
    if (s->type != AK_JSON_OBJ) return ak_fail(c->err, AK_ERR_FORMAT, "schema: a schema must be an object or a boolean");
    const ak_json *nl = kw(s, "nullable"); /* OpenAPI */
    if (!is_bool(nl, true)) return schema_body(c, s, hint, o);
    sb_puts(o, "( ");
    ak_status st = schema_body(c, s, hint, o);
    sb_printf(o, " ) | %s", use(c, P_NULL));
    return st;
}

static bool is_ident(const sb *b) {
    if (!b->n || b->n >= SC_NAME) return false;
    for (size_t i = 0; i < b->n; i++) {
        char ch = b->p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
    }
    return true;
}

/* The rule for schema s: a shared rule or a new one (named forced when given); ref gets
 * its name. */
static ak_status visit(cv *c, const ak_json *s, const char *hint, const char *forced, char ref[SC_NAME]) {
    if (c->depth >= SC_MAX_DEPTH)
        return ak_fail(c->err, AK_ERR_UNSUPPORTED, "schema: nested deeper than %d schemas", SC_MAX_DEPTH);
    c->depth++;
    sb t = {0};
    ak_status st = body(c, s, hint, &t);
    if (!st) st = sb_status(c, &t);
    if (!st) {
        if (!forced && is_ident(&t)) snprintf(ref, SC_NAME, "%s", t.p);
        else if (forced) {
            emit_rule(c, forced, &t);
            snprintf(ref, SC_NAME, "%s", forced);
            st = sb_status(c, &c->out);
        } else {
            st = emit_named(c, hint, &t, ref);
        }
    }
    free(t.p);
    c->depth--;
    return st;
}

ak_status ak_schema_to_gbnf(const char *schema_json, size_t len, char **out, ak_err *err) {
    if (!out || (!schema_json && len)) return ak_fail(err, AK_ERR_ARG, "schema: NULL argument");
    *out = NULL;
    ak_json_doc *doc;
    ak_status st = ak_json_parse(schema_json ? schema_json : "", len, &doc, err);
    if (st) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return st == AK_ERR_NOMEM ? st : ak_fail(err, AK_ERR_FORMAT, "schema: not JSON: %.400s", why);
    }
    cv c = {.root = ak_json_root(doc), .err = err};
    char ref[SC_NAME];
    if (add_ref(&c, c.root, "root") < 0) st = ak_fail(err, AK_ERR_NOMEM, "schema: out of memory");
    if (!st) st = visit(&c, c.root, "root", "root", ref);
    if (!st) {
        unsigned used = c.used, prev = 0;
        while (used != prev) { /* close over the shared rules' dependencies */
            prev = used;
            for (int i = 0; i < P_COUNT; i++)
                if (used & (1u << i)) used |= sc_prims[i].deps;
        }
        for (int i = 0; i < P_COUNT; i++)
            if (used & (1u << i)) sb_printf(&c.out, "%s ::= %s\n", sc_prims[i].name, sc_prims[i].body);
        st = sb_status(&c, &c.out);
    }
    if (!st) *out = c.out.p;
    else free(c.out.p);
    free(c.refs);
    ak_json_free(doc);
    return st;
}

const char *ak_schema_json_object_gbnf(void) {
    return "root ::= object\n"
           "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
           "value ::= object | array | string | number | boolean | null\n"
           "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
           "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
           "string ::= \"\\\"\" char* \"\\\"\"\n"
           "char ::= [^\\\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\\\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )\n"
           "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,17} ) ( \".\" [0-9]{1,18} )? ( [eE] [-+]? [0-9]{1,2} )?\n"
           "boolean ::= \"true\" | \"false\"\n"
           "null ::= \"null\"\n";
}
