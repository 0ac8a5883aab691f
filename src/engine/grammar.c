/* GBNF grammars: a recursive-descent parser into flat rules, and a matcher that runs them
 * as a pushdown automaton over code points. Matcher states (sets of stacks) are interned,
 * so that a transition is computed once per (state, code point) and then looked up; the
 * allowed-token mask is a walk of the vocabulary's trie through those transitions, cached
 * per state. */
#include "engine/grammar.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"

/* Limits against hostile grammars: each gives a clear error rather than a blowup. */
enum {
    G_MAX_TEXT = 1 << 24,     /* bytes of grammar text */
    G_MAX_ELEMS = 1 << 21,    /* elements after repetitions are expanded */
    G_MAX_RULES = 1 << 20,
    G_MAX_NEST = 200,         /* parentheses */
    G_MAX_REPEAT = 1 << 16,   /* m and n of x{m,n} */
};

/* ---- parsed grammar ---------------------------------------------------------------- */

/* An element of an alternative: a reference to a rule, a character class, or the end of
 * the alternative. String literals are one class of one code point per character. */
enum { EL_END, EL_REF, EL_CHARS };
typedef struct {
    uint8_t kind, neg;
    uint32_t a, b; /* REF: a = rule; CHARS: ranges [a, a + b) of the range table */
    uint32_t at;   /* REF: byte offset of the reference in the text (for errors) */
} gel;

typedef struct {
    uint32_t alt, n_alt;     /* alternatives alts[alt .. alt + n_alt): each an element index */
    uint32_t name, name_len; /* into names; helper rules have none */
    uint32_t def_at, ref_at; /* where defined, where first referenced (text offsets) */
    bool defined;
} grule;

struct ak_grammar {
    gel *el;
    uint32_t n_el, cap_el;
    uint32_t *rng; /* pairs lo, hi (inclusive) */
    uint32_t n_rng, cap_rng;
    uint32_t *alts;
    uint32_t n_alts, cap_alts;
    grule *rule;
    uint32_t n_rule, cap_rule;
    char *names;
    uint32_t n_names, cap_names;
    uint32_t *name_tab; /* open addressing over named rules: rule id + 1, 0 = free */
    uint32_t cap_tab, n_named;
    uint32_t root;
};

/* Grows *p (element size sz) so that it holds need items; doubling, so appends are
 * amortised O(1). */
static bool grow(void **p, uint32_t *cap, uint32_t need, size_t sz) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * sz);
    if (!q) return false;
    *p = q;
    *cap = (uint32_t)nc;
    return true;
}

typedef struct {
    ak_grammar *g;
    const char *s;
    size_t n, pos;
    ak_err *err;
    ak_status st;
    int depth;
    uint32_t *seq; /* elements of the open sequences, innermost last (indices into el) */
    gel *sq;
    uint32_t n_sq, cap_sq;
    uint32_t *pend; /* alternatives of the open rules, innermost last */
    uint32_t n_pend, cap_pend;
} gparser;

/* Line and column (1-based, in bytes) of offset at in the text. */
static void locate(const char *s, size_t at, int *line, int *col) {
    int l = 1;
    size_t bol = 0;
    for (size_t i = 0; i < at; i++)
        if (s[i] == '\n') l++, bol = i + 1;
    *line = l;
    *col = (int)(at - bol) + 1;
}

static bool perr_at(gparser *p, size_t at, const char *what, const char *name, size_t name_len) {
    if (p->st) return false;
    int line, col;
    locate(p->s, at, &line, &col);
    if (name)
        p->st = ak_fail(p->err, AK_ERR_FORMAT, "line %d, column %d: %s '%.*s'", line, col, what,
                        (int)(name_len > 64 ? 64 : name_len), name);
    else
        p->st = ak_fail(p->err, AK_ERR_FORMAT, "line %d, column %d: %s", line, col, what);
    return false;
}
static bool perr(gparser *p, const char *what) { return perr_at(p, p->pos, what, NULL, 0); }
static bool nomem(gparser *p) {
    if (!p->st) p->st = ak_fail(p->err, AK_ERR_NOMEM, "grammar: out of memory");
    return false;
}

static int peek(const gparser *p) { return p->pos < p->n ? (unsigned char)p->s[p->pos] : -1; }

/* Spaces, tabs and # comments; newlines too where newline_ok (inside parentheses, after
 * `::=` and `|`): at the top level a newline ends the rule. */
static void skip_space(gparser *p, bool newline_ok) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->n && p->s[p->pos] != '\n' && p->s[p->pos] != '\r') p->pos++;
        } else {
            break;
        }
    }
}

static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* One UTF-8 code point of the grammar text; -1 (error set) when invalid. */
static long decode_text(gparser *p) {
    const unsigned char *u = (const unsigned char *)p->s;
    size_t i = p->pos;
    unsigned c = u[i];
    int k = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
    if (k < 0) return perr(p, "invalid UTF-8"), -1;
    uint32_t cp = k == 0 ? c : c & (0x3F >> k);
    for (int j = 1; j <= k; j++) {
        if (i + (size_t)j >= p->n || (u[i + j] & 0xC0) != 0x80) return perr(p, "invalid UTF-8"), -1;
        cp = cp << 6 | (u[i + j] & 0x3F);
    }
    static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return perr(p, "invalid UTF-8"), -1;
    p->pos = i + (size_t)k + 1;
    return (long)cp;
}

static long hex_digits(gparser *p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        int c = peek(p);
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return perr(p, "expected a hexadecimal digit"), -1;
        v = v << 4 | (uint32_t)d;
        p->pos++;
    }
    if (v > 0x10FFFF) return perr(p, "code point above U+10FFFF"), -1;
    return (long)v;
}

/* One character of a literal or class, escapes decoded; -1 on error. */
static long parse_char(gparser *p) {
    if (p->pos >= p->n) return perr(p, "unexpected end of grammar"), -1;
    if (p->s[p->pos] != '\\') return decode_text(p);
    size_t at = p->pos++;
    int c = peek(p);
    p->pos++;
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '\\': case '"': case '[': case ']': case '-': case '/': case '\'': case '^': return c;
    case 'x': return hex_digits(p, 2);
    case 'u': return hex_digits(p, 4);
    case 'U': return hex_digits(p, 8);
    default: return perr_at(p, at, "unknown escape", NULL, 0), -1;
    }
}

static bool push_range(gparser *p, uint32_t lo, uint32_t hi) {
    ak_grammar *g = p->g;
    if (g->n_rng + 2 > G_MAX_ELEMS * 2u) return perr(p, "grammar too large");
    if (!grow((void **)&g->rng, &g->cap_rng, g->n_rng + 2, sizeof *g->rng)) return nomem(p);
    g->rng[g->n_rng++] = lo;
    g->rng[g->n_rng++] = hi;
    return true;
}

/* Appends an element to the innermost open sequence. */
static bool push_sq(gparser *p, gel e) {
    if (p->g->n_el + p->n_sq + 1 > G_MAX_ELEMS) return perr(p, "grammar too large (repetitions expand to too many elements)");
    if (!grow((void **)&p->sq, &p->cap_sq, p->n_sq + 1, sizeof *p->sq)) return nomem(p);
    p->sq[p->n_sq++] = e;
    return true;
}

static bool push_el(gparser *p, gel e) {
    ak_grammar *g = p->g;
    if (g->n_el + 1 > G_MAX_ELEMS) return perr(p, "grammar too large (repetitions expand to too many elements)");
    if (!grow((void **)&g->el, &g->cap_el, g->n_el + 1, sizeof *g->el)) return nomem(p);
    g->el[g->n_el++] = e;
    return true;
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* A new rule (named or a helper); UINT32_MAX on error. */
static uint32_t new_rule(gparser *p) {
    ak_grammar *g = p->g;
    if (g->n_rule + 1 > G_MAX_RULES) return perr(p, "too many rules"), UINT32_MAX;
    if (!grow((void **)&g->rule, &g->cap_rule, g->n_rule + 1, sizeof *g->rule)) return nomem(p), UINT32_MAX;
    g->rule[g->n_rule] = (grule){0};
    return g->n_rule++;
}

static void tab_insert(ak_grammar *g, uint32_t id) {
    uint32_t mask = g->cap_tab - 1, h = name_hash(g->names + g->rule[id].name, g->rule[id].name_len);
    while (g->name_tab[h & mask]) h++;
    g->name_tab[h & mask] = id + 1;
}

/* The rule named s[0..n), created (undefined) if new. */
static uint32_t rule_by_name(gparser *p, const char *s, size_t n) {
    ak_grammar *g = p->g;
    if (g->cap_tab) {
        uint32_t mask = g->cap_tab - 1;
        for (uint32_t h = name_hash(s, n);; h++) {
            uint32_t v = g->name_tab[h & mask];
            if (!v) break;
            grule *r = &g->rule[v - 1];
            if (r->name_len == n && !memcmp(g->names + r->name, s, n)) return v - 1;
        }
    }
    uint32_t id = new_rule(p);
    if (id == UINT32_MAX) return id;
    if (!grow((void **)&g->names, &g->cap_names, g->n_names + (uint32_t)n + 1, 1)) return nomem(p), UINT32_MAX;
    memcpy(g->names + g->n_names, s, n);
    g->rule[id].name = g->n_names;
    g->rule[id].name_len = (uint32_t)n;
    g->n_names += (uint32_t)n;
    /* the name table stays at most half full */
    if (2 * (++g->n_named) > g->cap_tab) {
        uint32_t nc = g->cap_tab ? g->cap_tab * 2 : 64;
        uint32_t *t = calloc(nc, sizeof *t);
        if (!t) return nomem(p), UINT32_MAX;
        free(g->name_tab);
        g->name_tab = t;
        g->cap_tab = nc;
        for (uint32_t i = 0; i <= id; i++)
            if (g->rule[i].name_len) tab_insert(g, i);
    } else {
        tab_insert(g, id);
    }
    return id;
}

/* Commits the alternatives pend[base..] as rule r's. */
static bool commit_rule(gparser *p, uint32_t r, uint32_t base) {
    ak_grammar *g = p->g;
    uint32_t n = p->n_pend - base;
    if (!grow((void **)&g->alts, &g->cap_alts, g->n_alts + n, sizeof *g->alts)) return nomem(p);
    memcpy(g->alts + g->n_alts, p->pend + base, n * sizeof *g->alts);
    g->rule[r].alt = g->n_alts;
    g->rule[r].n_alt = n;
    g->n_alts += n;
    p->n_pend = base;
    return true;
}

static bool push_pend(gparser *p, uint32_t start) {
    if (!grow((void **)&p->pend, &p->cap_pend, p->n_pend + 1, sizeof *p->pend)) return nomem(p);
    p->pend[p->n_pend++] = start;
    return true;
}

/* A helper rule whose alternatives are given element lists (n_alt of them, each of len
 * elements ending in END implicitly). */
static uint32_t helper_rule(gparser *p, const gel *const *alts, const int *lens, int n_alt) {
    uint32_t r = new_rule(p);
    if (r == UINT32_MAX) return r;
    uint32_t base = p->n_pend;
    for (int a = 0; a < n_alt; a++) {
        if (!push_pend(p, p->g->n_el)) return UINT32_MAX;
        for (int i = 0; i < lens[a]; i++)
            if (!push_el(p, alts[a][i])) return UINT32_MAX;
        if (!push_el(p, (gel){.kind = EL_END})) return UINT32_MAX;
    }
    if (!commit_rule(p, r, base)) return UINT32_MAX;
    p->g->rule[r].defined = true;
    return r;
}

static gel ref_el(uint32_t r, uint32_t at) { return (gel){.kind = EL_REF, .a = r, .at = at}; }

/* x* as a helper rule h ::= x h | "" (right recursion: the matcher drops finished tail
 * references, so its stacks do not grow with the count). */
static uint32_t star_rule(gparser *p, gel x) {
    uint32_t r = new_rule(p);
    if (r == UINT32_MAX) return r;
    uint32_t base = p->n_pend;
    if (!push_pend(p, p->g->n_el) || !push_el(p, x) || !push_el(p, ref_el(r, x.at)) ||
        !push_el(p, (gel){.kind = EL_END}) || !push_pend(p, p->g->n_el) || !push_el(p, (gel){.kind = EL_END}))
        return UINT32_MAX;
    if (!commit_rule(p, r, base)) return UINT32_MAX;
    p->g->rule[r].defined = true;
    return r;
}

static bool parse_uint(gparser *p, uint32_t *v) {
    int c = peek(p);
    if (c < '0' || c > '9') return perr(p, "expected a number");
    uint64_t x = 0;
    size_t at = p->pos;
    while ((c = peek(p)) >= '0' && c <= '9') {
        x = x * 10 + (uint64_t)(c - '0');
        if (x > G_MAX_REPEAT) return perr_at(p, at, "repetition count too large (at most 65536)", NULL, 0);
        p->pos++;
    }
    *v = (uint32_t)x;
    return true;
}

/* Applies a postfix operator to the last item of the open sequence, sq[last..]: a
 * literal of several characters becomes a helper rule first, so that x is one element. */
static bool repeat(gparser *p, uint32_t last, uint32_t m, uint32_t n /* UINT32_MAX: unbounded */) {
    uint32_t len = p->n_sq - last;
    if (len == 0) return true; /* "" repeated is still "" */
    if (len > 1) {
        const gel *alts[1] = {p->sq + last};
        int lens[1] = {(int)len};
        uint32_t r = helper_rule(p, alts, lens, 1);
        if (r == UINT32_MAX) return false;
        p->n_sq = last;
        if (!push_sq(p, ref_el(r, 0))) return false;
    }
    gel x = p->sq[--p->n_sq];
    for (uint32_t i = 0; i < m; i++)
        if (!push_sq(p, x)) return false;
    if (n == UINT32_MAX) {
        uint32_t h = star_rule(p, x);
        return h != UINT32_MAX && push_sq(p, ref_el(h, x.at));
    }
    if (n < m) return perr(p, "repetition {m,n} with n < m");
    /* n - m optional copies, nested: t1 ::= x t2 | "", ..., tk ::= x | "" (nested
     * rather than k independent options, so that a string matches in one way only) */
    uint32_t next = UINT32_MAX;
    for (uint32_t k = n - m; k > 0; k--) {
        gel a0[2] = {x, ref_el(next, x.at)};
        const gel *alts[2] = {a0, NULL};
        int lens[2] = {next == UINT32_MAX ? 1 : 2, 0};
        next = helper_rule(p, alts, lens, 2);
        if (next == UINT32_MAX) return false;
    }
    return next == UINT32_MAX || push_sq(p, ref_el(next, x.at));
}

static bool parse_alternates(gparser *p, uint32_t rule, bool nested);

static bool parse_class(gparser *p) {
    size_t at = p->pos++;
    gel e = {.kind = EL_CHARS, .a = p->g->n_rng};
    if (peek(p) == '^') e.neg = 1, p->pos++;
    for (;;) {
        if (p->pos >= p->n || p->s[p->pos] == '\n') return perr_at(p, at, "unterminated character class", NULL, 0);
        if (p->s[p->pos] == ']') break;
        long lo = parse_char(p);
        if (lo < 0) return false;
        long hi = lo;
        if (peek(p) == '-' && p->pos + 1 < p->n && p->s[p->pos + 1] != ']' && p->s[p->pos + 1] != '\n') {
            p->pos++;
            size_t hat = p->pos;
            hi = parse_char(p);
            if (hi < 0) return false;
            if (hi < lo) return perr_at(p, hat, "character range is reversed", NULL, 0);
        }
        if (!push_range(p, (uint32_t)lo, (uint32_t)hi)) return false;
        e.b++;
    }
    p->pos++;
    return push_sq(p, e);
}

static bool parse_sequence(gparser *p, bool nested) {
    uint32_t last = UINT32_MAX; /* where the item a postfix applies to starts in sq */
    for (;;) {
        skip_space(p, nested);
        int c = peek(p);
        size_t at = p->pos;
        if (c == '"') {
            p->pos++;
            last = p->n_sq;
            for (;;) {
                if (p->pos >= p->n || p->s[p->pos] == '\n') return perr_at(p, at, "unterminated string literal", NULL, 0);
                if (p->s[p->pos] == '"') break;
                long cp = parse_char(p);
                if (cp < 0) return false;
                gel e = {.kind = EL_CHARS, .a = p->g->n_rng, .b = 1};
                if (!push_range(p, (uint32_t)cp, (uint32_t)cp) || !push_sq(p, e)) return false;
            }
            p->pos++;
        } else if (c == '[') {
            last = p->n_sq;
            if (!parse_class(p)) return false;
        } else if (c == '.') {
            p->pos++;
            last = p->n_sq;
            if (!push_sq(p, (gel){.kind = EL_CHARS, .neg = 1, .a = p->g->n_rng, .b = 0})) return false;
        } else if (is_word(c)) {
            size_t s0 = p->pos;
            while (is_word(peek(p))) p->pos++;
            uint32_t r = rule_by_name(p, p->s + s0, p->pos - s0);
            if (r == UINT32_MAX) return false;
            if (!p->g->rule[r].defined && !p->g->rule[r].ref_at) p->g->rule[r].ref_at = (uint32_t)s0 + 1;
            last = p->n_sq;
            if (!push_sq(p, ref_el(r, (uint32_t)s0))) return false;
        } else if (c == '(') {
            if (++p->depth > G_MAX_NEST) return perr(p, "parentheses nested too deeply");
            p->pos++;
            uint32_t r = new_rule(p);
            if (r == UINT32_MAX) return false;
            if (!parse_alternates(p, r, true)) return false;
            skip_space(p, true);
            if (peek(p) != ')') return perr_at(p, p->pos, "expected ')'", NULL, 0);
            p->pos++;
            p->depth--;
            p->g->rule[r].defined = true;
            last = p->n_sq;
            if (!push_sq(p, ref_el(r, (uint32_t)at))) return false;
        } else if (c == '*' || c == '+' || c == '?') {
            if (last == UINT32_MAX) return perr(p, "repetition without anything to repeat");
            p->pos++;
            if (!repeat(p, last, c == '+' ? 1 : 0, c == '?' ? 1 : UINT32_MAX)) return false;
            last = UINT32_MAX;
        } else if (c == '{') {
            if (last == UINT32_MAX) return perr(p, "repetition without anything to repeat");
            p->pos++;
            skip_space(p, true);
            uint32_t m, n;
            if (!parse_uint(p, &m)) return false;
            skip_space(p, true);
            n = m;
            if (peek(p) == ',') {
                p->pos++;
                skip_space(p, true);
                n = UINT32_MAX;
                if (peek(p) != '}' && !parse_uint(p, &n)) return false;
                skip_space(p, true);
            }
            if (peek(p) != '}') return perr(p, "expected '}'");
            p->pos++;
            if (!repeat(p, last, m, n)) return false;
            last = UINT32_MAX;
        } else {
            return true; /* the caller decides what may end a sequence */
        }
    }
}

/* Commits the open sequence from base as one alternative. */
static bool end_alternative(gparser *p, uint32_t base) {
    if (!push_pend(p, p->g->n_el)) return false;
    for (uint32_t i = base; i < p->n_sq; i++)
        if (!push_el(p, p->sq[i])) return false;
    p->n_sq = base;
    return push_el(p, (gel){.kind = EL_END});
}

static bool parse_alternates(gparser *p, uint32_t rule, bool nested) {
    uint32_t pend_base = p->n_pend, seq_base = p->n_sq;
    for (;;) {
        skip_space(p, true);
        if (!parse_sequence(p, nested) || !end_alternative(p, seq_base)) return false;
        if (peek(p) == '|') {
            p->pos++;
            continue;
        }
        if (!nested) {
            /* a continuation line starting with `|` */
            size_t save = p->pos;
            skip_space(p, true);
            if (peek(p) == '|') {
                p->pos++;
                continue;
            }
            p->pos = save;
        }
        break;
    }
    return commit_rule(p, rule, pend_base);
}

/* ---- checks after parsing ---------------------------------------------------------- */

/* Rules that can match the empty string, by fixed point. */
static bool *nullable_rules(const ak_grammar *g) {
    bool *nul = calloc(g->n_rule ? g->n_rule : 1, 1);
    if (!nul) return NULL;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rule; r++) {
            if (nul[r]) continue;
            for (uint32_t a = 0; a < g->rule[r].n_alt && !nul[r]; a++) {
                uint32_t e = g->alts[g->rule[r].alt + a];
                while (g->el[e].kind == EL_REF && nul[g->el[e].a]) e++;
                if (g->el[e].kind == EL_END) nul[r] = changed = true;
            }
        }
    }
    return nul;
}

/* Left recursion: a rule that reaches itself at the left edge (after nullable
 * elements only) would make the matcher expand forever. Depth-first search over those
 * edges, iterative (a chain of many rules must not overflow the C stack). */
static ak_status check_left_recursion(gparser *p) {
    ak_grammar *g = p->g;
    bool *nul = nullable_rules(g);
    uint8_t *color = calloc(g->n_rule ? g->n_rule : 1, 1);
    uint32_t *stk_r = malloc((g->n_rule + 1) * sizeof *stk_r), *stk_e = malloc((g->n_rule + 1) * sizeof *stk_e);
    uint32_t *stk_a = malloc((g->n_rule + 1) * sizeof *stk_a);
    if (!nul || !color || !stk_r || !stk_e || !stk_a) {
        nomem(p);
        goto done;
    }
    for (uint32_t s = 0; s < g->n_rule && !p->st; s++) {
        if (color[s]) continue;
        int top = 0;
        stk_r[0] = s, stk_a[0] = 0, stk_e[0] = UINT32_MAX;
        color[s] = 1;
        while (top >= 0 && !p->st) {
            uint32_t r = stk_r[top];
            /* the next left-edge reference of r: (alternative stk_a, element stk_e) */
            uint32_t e = stk_e[top];
            if (e == UINT32_MAX) {
                if (stk_a[top] >= g->rule[r].n_alt) {
                    color[r] = 2;
                    top--;
                    continue;
                }
                e = g->alts[g->rule[r].alt + stk_a[top]];
            }
            if (g->el[e].kind != EL_REF) {
                stk_a[top]++, stk_e[top] = UINT32_MAX;
                continue;
            }
            uint32_t t = g->el[e].a;
            stk_e[top] = nul[t] ? e + 1 : UINT32_MAX;
            if (!nul[t]) stk_a[top]++;
            if (color[t] == 1) {
                /* a cycle: name a named rule on it where there is one */
                uint32_t nr = t;
                for (int i = top; i >= 0 && !g->rule[nr].name_len; i--)
                    if (g->rule[stk_r[i]].name_len) nr = stk_r[i];
                const grule *rr = &g->rule[nr];
                perr_at(p, g->el[e].at, "left recursion through rule", rr->name_len ? g->names + rr->name : "(group)",
                        rr->name_len ? rr->name_len : 7);
            } else if (!color[t]) {
                color[t] = 1;
                top++;
                stk_r[top] = t, stk_a[top] = 0, stk_e[top] = UINT32_MAX;
            }
        }
    }
done:
    free(nul), free(color), free(stk_r), free(stk_e), free(stk_a);
    return p->st;
}

void ak_grammar_free(ak_grammar *g) {
    if (!g) return;
    free(g->el), free(g->rng), free(g->alts), free(g->rule), free(g->names), free(g->name_tab);
    free(g);
}

ak_status ak_grammar_parse(const char *text, size_t len, const char *root, ak_grammar **out, ak_err *err) {
    *out = NULL;
    if (!text && len) return ak_fail(err, AK_ERR_ARG, "grammar: NULL text");
    if (len > G_MAX_TEXT) return ak_fail(err, AK_ERR_FORMAT, "grammar: text too large (%zu bytes)", len);
    ak_grammar *g = calloc(1, sizeof *g);
    if (!g) return ak_fail(err, AK_ERR_NOMEM, "grammar: out of memory");
    gparser p = {.g = g, .s = text ? text : "", .n = len, .err = err};
    /* never NULL: a class without ranges (`.`) still points into it */
    if (!grow((void **)&g->rng, &g->cap_rng, 2, sizeof *g->rng)) nomem(&p);
    while (!p.st) {
        skip_space(&p, true);
        if (p.pos >= p.n) break;
        size_t at = p.pos;
        if (!is_word(peek(&p))) {
            perr(&p, "expected a rule name");
            break;
        }
        while (is_word(peek(&p))) p.pos++;
        uint32_t r = rule_by_name(&p, p.s + at, p.pos - at);
        if (r == UINT32_MAX) break;
        if (g->rule[r].defined) {
            perr_at(&p, at, "rule defined twice:", p.s + at, p.pos - at);
            break;
        }
        g->rule[r].defined = true; /* before the body: a reference to itself is no forward reference */
        g->rule[r].def_at = (uint32_t)at;
        skip_space(&p, false);
        if (p.pos + 3 > p.n || memcmp(p.s + p.pos, "::=", 3)) {
            perr(&p, "expected '::='");
            break;
        }
        p.pos += 3;
        if (!parse_alternates(&p, r, false)) break;
        skip_space(&p, false);
        int c = peek(&p);
        if (c != -1 && c != '\n' && c != '\r') {
            perr(&p, c == ')' ? "unmatched ')'" : "unexpected character");
            break;
        }
    }
    if (!p.st) {
        for (uint32_t r = 0; r < g->n_rule; r++) {
            if (!g->rule[r].defined) {
                perr_at(&p, g->rule[r].ref_at - 1, "undefined rule", g->names + g->rule[r].name, g->rule[r].name_len);
                break;
            }
        }
    }
    if (!p.st) {
        const char *rn = root ? root : "root";
        uint32_t id = UINT32_MAX;
        if (g->cap_tab) {
            uint32_t mask = g->cap_tab - 1;
            for (uint32_t h = name_hash(rn, strlen(rn));; h++) {
                uint32_t v = g->name_tab[h & mask];
                if (!v) break;
                if (g->rule[v - 1].name_len == strlen(rn) && !memcmp(g->names + g->rule[v - 1].name, rn, strlen(rn))) {
                    id = v - 1;
                    break;
                }
            }
        }
        if (id == UINT32_MAX) perr_at(&p, 0, "the grammar has no start rule", rn, strlen(rn));
        g->root = id;
    }
    if (!p.st) check_left_recursion(&p);
    free(p.sq), free(p.pend);
    if (p.st) {
        ak_grammar_free(g);
        return p.st;
    }
    *out = g;
    return AK_OK;
}

/* ---- matcher ------------------------------------------------------------------------ */

/* A stack is a list of element indices, bottom first: the top is the character class to
 * match next, the others where their rules continue afterwards. A settled stack's top is
 * always a class (or the stack is empty: the sentence may end there). A state is a set of
 * settled stacks in canonical order, interned: its content (per stack: length, then the
 * elements) lives in the arena, and transitions between state ids are cached. */
typedef struct {
    uint32_t off, len; /* content in arena */
    uint64_t hash;
    int32_t asc;       /* its row of ASCII transitions in asc (-1: none yet) */
    int32_t loop;      /* the vocabulary's loop table entry it stays in (-1: none, -2: not looked at) */
    bool can_end;
} gstate;

/* Open-addressing map from 64-bit keys to int32 values; key UINT64_MAX = free. */
typedef struct {
    uint64_t *key;
    int32_t *val;
    uint32_t cap, n;
} gmap;

/* Soft limits: past them the interned states are dropped at the next call (between
 * tokens), so memory stays bounded however long the generation. Hard limits: a single
 * call that would pass them (a hostile grammar) finds the continuation dead instead. */
enum {
    G_SOFT_ARENA = 1 << 22, G_HARD_ARENA = 1 << 25, /* uint32 entries */
    G_SOFT_STATES = 1 << 16, G_HARD_STATES = 1 << 21,
    G_MAX_WORK = 1 << 16,  /* stacks examined while settling one transition */
    G_MAX_DEPTH = 1 << 16, /* entries in one stack */
    G_MASK_CACHE = 64,     /* masks kept, least recently used dropped */
    G_LOOPS = 64,          /* loop classes kept per vocabulary */
    G_LOOP_STACKS = 64,    /* a state with more stacks is not looked at for a loop */
};

typedef struct {
    uint32_t cp, need, len; /* partial code point: bits so far, bytes missing, its length */
} gpart;

/* Code points as sorted, disjoint, non-adjacent inclusive ranges. */
typedef struct {
    uint32_t lo, hi;
} grange;

/* A loop class L of the vocabulary: a state that reads any code point of L and stays
 * itself allows every token whose bytes stay in L (base), whatever its stacks below
 * (what XGrammar calls context-independent tokens); the other tokens it may allow lie
 * under the trie nodes where a path in L first leaves it, grouped by (the partial code
 * point before, the byte) so that a group the state rejects costs one step. Built once
 * per (vocabulary, class), immutable once published. */
typedef struct {
    gpart from;
    uint32_t first, n; /* nodes node[first .. first + n) */
    uint8_t byte;
} ggroup;

typedef struct {
    grange *cls;
    uint32_t n_cls;
    uint64_t hash;
    uint32_t *base; /* [n_words] */
    int n_base;
    ggroup *group;
    uint32_t n_group;
    uint32_t *node;
} gloop;

struct ak_gvocab {
    int n_vocab, n_words;
    uint32_t n_tok;     /* ids below this may be in the trie */
    char *bytes;        /* every token's piece */
    uint32_t *boff;     /* [n_tok + 1] */
    bool *eog;          /* [n_tok] */
    int32_t eog_ids[16];
    int n_eog;
    /* trie in pre-order: node i's subtree is [i, end[i]); the tokens whose pieces end
     * there are sorted[tok[i] .. tok[i] + cnt[i]) */
    uint32_t n_nodes;
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *end, *tok, *cnt;
    int32_t *sorted;
    int max_depth;
    /* loop classes, built at a matcher's first need, shared by every matcher of this
     * vocabulary: published by compare-and-swap into a free slot, never changed after,
     * so matchers on other threads read them without locks */
    _Atomic(gloop *) *loops; /* [G_LOOPS] */
};

typedef struct {
    uint64_t h; /* hash of a result stack */
    uint32_t idx;
} gkey;

struct ak_gmatch {
    const ak_grammar *g;
    const ak_gvocab *v;
    gstate *st;
    uint32_t n_st, cap_st;
    uint32_t *arena;
    uint32_t n_arena, cap_arena;
    gmap intern; /* hash of content -> state id (collisions probe on) */
    gmap trans;  /* (state << 32 | code point or partial key) -> next state, -1 dead, or compat 0/1 */
    int32_t *asc; /* rows of 128 ASCII transitions (-2: not computed): most trie bytes are ASCII */
    uint32_t n_asc, cap_asc;
    bool overflow;
    int32_t cur; /* -1: none (never after create) */
    gpart part;
    /* scratch for settling: work stacks and results, each content in wk */
    uint32_t *wk;
    uint32_t n_wk, cap_wk;
    uint32_t *item; /* (off, len) pairs of work items still to settle */
    uint32_t n_item, cap_item;
    uint32_t *res; /* (off, len) pairs of settled results */
    uint32_t n_res, cap_res;
    gmap seen; /* hashes of work items and results already produced in this settle */
    gkey *order; /* results in canonical order */
    uint32_t cap_order;
    /* mask walk: per trie depth, the state and the partial code point */
    int32_t *w_st;
    gpart *w_part;
    /* scratch for loop classes */
    grange *lr, *lr2;
    uint32_t cap_lr, cap_lr2;
    /* mask cache */
    uint32_t *masks; /* [G_MASK_CACHE][n_words] */
    int32_t c_state[G_MASK_CACHE];
    uint32_t c_part[G_MASK_CACHE];
    uint64_t c_used[G_MASK_CACHE];
    int c_count[G_MASK_CACHE];
    uint64_t clock;
};

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_u32s(const uint32_t *a, uint32_t n, uint64_t h) {
    for (uint32_t i = 0; i < n; i++) h = mix64(h ^ (a[i] + 0x9e3779b97f4a7c15ULL * (i + 1)));
    return h;
}

static bool map_init(gmap *m, uint32_t cap) {
    m->key = malloc((size_t)cap * sizeof *m->key);
    m->val = malloc((size_t)cap * sizeof *m->val);
    if (!m->key || !m->val) return false;
    memset(m->key, 0xFF, (size_t)cap * sizeof *m->key);
    m->cap = cap, m->n = 0;
    return true;
}
static void map_free(gmap *m) { free(m->key), free(m->val); }
static void map_clear(gmap *m) {
    if (m->n) memset(m->key, 0xFF, (size_t)m->cap * sizeof *m->key);
    m->n = 0;
}
/* Slot of key: where it is, or the free slot where it would go. */
static uint32_t map_slot(const gmap *m, uint64_t key) {
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->key[i] != key && m->key[i] != UINT64_MAX) i = (i + 1) & mask;
    return i;
}
static bool map_get(const gmap *m, uint64_t key, int32_t *val) {
    uint32_t i = map_slot(m, key);
    if (m->key[i] == UINT64_MAX) return false;
    *val = m->val[i];
    return true;
}
/* Inserts a new key (not present); doubles at half full. */
static bool map_put(gmap *m, uint64_t key, int32_t val) {
    if (2 * (m->n + 1) > m->cap) {
        gmap b;
        if (!map_init(&b, m->cap * 2)) return false;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->key[i] != UINT64_MAX) {
                uint32_t j = map_slot(&b, m->key[i]);
                b.key[j] = m->key[i], b.val[j] = m->val[i];
            }
        b.n = m->n;
        map_free(m);
        *m = b;
    }
    uint32_t i = map_slot(m, key);
    m->key[i] = key, m->val[i] = val;
    m->n++;
    return true;
}

static bool class_match(const ak_grammar *g, const gel *e, uint32_t cp) {
    const uint32_t *r = g->rng + e->a;
    bool in = false;
    for (uint32_t i = 0; i < e->b && !in; i++) in = cp >= r[2 * i] && cp <= r[2 * i + 1];
    return in != (bool)e->neg;
}

/* Some code point in [lo, hi] is in the class. */
static bool class_meets(const ak_grammar *g, const gel *e, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->rng + e->a;
    if (!e->neg) {
        for (uint32_t i = 0; i < e->b; i++)
            if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return true;
        return false;
    }
    /* negated: [lo, hi] is not wholly covered by the ranges */
    for (uint32_t c = lo;;) {
        bool moved = false;
        for (uint32_t i = 0; i < e->b; i++)
            if (r[2 * i] <= c && r[2 * i + 1] >= c) {
                if (r[2 * i + 1] >= hi) return false;
                c = r[2 * i + 1] + 1, moved = true;
            }
        if (!moved) return true;
    }
}

static bool wk_reserve(ak_gmatch *m, uint32_t extra) {
    if ((uint64_t)m->n_wk + extra > G_HARD_ARENA) return false;
    return grow((void **)&m->wk, &m->cap_wk, m->n_wk + extra, sizeof *m->wk);
}

/* Queues stack wk[off..off+len) plus, if push != UINT32_MAX, one more entry, unless an
 * identical item was queued before in this settle. */
static bool queue_item(ak_gmatch *m, const uint32_t *src, uint32_t len, uint32_t push) {
    uint32_t n = len + (push != UINT32_MAX);
    if (n > G_MAX_DEPTH || m->n_item / 2 >= G_MAX_WORK) return false;
    uint64_t h = hash_u32s(src, len, 0x51ed);
    if (push != UINT32_MAX) h = hash_u32s(&push, 1, h);
    h = mix64(h ^ n) & ~(1ULL << 63); /* bit 63 clear: items; results have it set */
    int32_t at;
    if (map_get(&m->seen, h, &at)) return true; /* by 64-bit hash alone: a false match has odds ~n^2/2^64 */
    if (!map_put(&m->seen, h, 0)) return false;
    if (!wk_reserve(m, n)) return false;
    /* a src inside wk stays valid: queue_wk reserved the room before */
    if (len) memmove(m->wk + m->n_wk, src, (size_t)len * sizeof *src);
    if (push != UINT32_MAX) m->wk[m->n_wk + len] = push;
    if (!grow((void **)&m->item, &m->cap_item, m->n_item + 2, sizeof *m->item)) return false;
    m->item[m->n_item++] = m->n_wk;
    m->item[m->n_item++] = n;
    m->n_wk += n;
    return true;
}

/* queue_item for a source inside wk, given by offset (wk may move while reserving). */
static bool queue_wk(ak_gmatch *m, uint32_t off, uint32_t len, uint32_t push) {
    if (!wk_reserve(m, len + 1)) return false;
    return queue_item(m, m->wk + off, len, push);
}

/* Settles every queued item: ends of alternatives pop, references expand into their
 * alternatives; stacks whose top is a class (or empty ones) are the results. */
static bool settle(ak_gmatch *m) {
    const ak_grammar *g = m->g;
    uint32_t done = 0;
    while (done < m->n_item) {
        uint32_t off = m->item[done], len = m->item[done + 1];
        done += 2;
        for (;;) {
            if (len == 0) break;
            const gel *e = &g->el[m->wk[off + len - 1]];
            if (e->kind == EL_END) {
                len--;
                continue;
            }
            if (e->kind == EL_CHARS) break;
            /* a reference: continue after it (dropping a finished tail), then one item
             * per alternative */
            uint32_t r = e->a, next = m->wk[off + len - 1] + 1;
            if (g->el[next].kind == EL_END)
                len--;
            else
                m->wk[off + len - 1] = next;
            for (uint32_t a = 0; a < g->rule[r].n_alt; a++)
                if (!queue_wk(m, off, len, g->alts[g->rule[r].alt + a])) return false;
            len = UINT32_MAX; /* expanded: no result */
            break;
        }
        if (len == UINT32_MAX) continue;
        uint64_t h = mix64(hash_u32s(m->wk + off, len, 0x7e5) ^ len) | (1ULL << 63);
        int32_t dummy;
        if (map_get(&m->seen, h, &dummy)) continue;
        if (!map_put(&m->seen, h, 0)) return false;
        if (!grow((void **)&m->res, &m->cap_res, m->n_res + 2, sizeof *m->res)) return false;
        m->res[m->n_res++] = off;
        m->res[m->n_res++] = len;
    }
    return true;
}

/* Results are ordered by a hash of their content (qsort has no context argument, and
 * a global one would race between matchers on other threads). Two different stacks
 * with equal 64-bit hashes could order either way: the set would then be interned
 * twice, a wasted cache entry, never a wrong state. */
static int cmp_key(const void *a, const void *b) {
    const gkey *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void scratch_reset(ak_gmatch *m) {
    m->n_wk = m->n_item = m->n_res = 0;
    map_clear(&m->seen);
}

/* Interns the results as a state: its id, or -1 (no stacks: dead; or over a limit). */
static int32_t intern_results(ak_gmatch *m) {
    uint32_t n = m->n_res / 2;
    if (!n) return -1;
    if (!grow((void **)&m->order, &m->cap_order, n, sizeof *m->order)) return m->overflow = true, -1;
    for (uint32_t i = 0; i < n; i++)
        m->order[i] = (gkey){hash_u32s(m->wk + m->res[2 * i], m->res[2 * i + 1], m->res[2 * i + 1]), i};
    qsort(m->order, n, sizeof *m->order, cmp_key);
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += 1 + m->res[2 * i + 1];
    if ((uint64_t)m->n_arena + total > G_HARD_ARENA || m->n_st + 1 > G_HARD_STATES) return m->overflow = true, -1;
    if (!grow((void **)&m->arena, &m->cap_arena, m->n_arena + total, sizeof *m->arena)) return m->overflow = true, -1;
    uint32_t *dst = m->arena + m->n_arena;
    bool can_end = false;
    for (uint32_t i = 0, k = 0; i < n; i++) {
        const uint32_t *r = m->res + 2 * m->order[i].idx;
        dst[k++] = r[1];
        memcpy(dst + k, m->wk + r[0], (size_t)r[1] * sizeof *dst);
        k += r[1];
        can_end |= r[1] == 0;
    }
    uint64_t h = hash_u32s(dst, total, 0xabc) & ~(1ULL << 63);
    /* find an equal state: probe the keys h, h+1, ... (equal hashes of different sets
     * take the next key) */
    for (uint64_t k = h;; k = (k + 1) & ~(1ULL << 63)) {
        int32_t id;
        if (!map_get(&m->intern, k, &id)) {
            if (!grow((void **)&m->st, &m->cap_st, m->n_st + 1, sizeof *m->st) || !map_put(&m->intern, k, (int32_t)m->n_st))
                return m->overflow = true, -1;
            m->st[m->n_st] =
                (gstate){.off = m->n_arena, .len = total, .hash = h, .asc = -1, .loop = -2, .can_end = can_end};
            m->n_arena += total;
            return (int32_t)m->n_st++;
        }
        const gstate *s = &m->st[id];
        if (s->len == total && !memcmp(m->arena + s->off, dst, (size_t)total * sizeof *dst)) return id;
    }
}

/* The state after state id reads code point cp (-1: dead), computed. */
static int32_t step_new(ak_gmatch *m, int32_t id, uint32_t cp) {
    scratch_reset(m);
    const ak_grammar *g = m->g;
    bool ok = true;
    for (uint32_t i = 0; ok && i < m->st[id].len;) {
        uint32_t len = m->arena[m->st[id].off + i];
        uint32_t off = m->st[id].off + i + 1;
        i += 1 + len;
        if (!len || !class_match(g, &g->el[m->arena[off + len - 1]], cp)) continue;
        /* the top is matched: its alternative continues at the next element */
        uint32_t top = m->arena[off + len - 1] + 1;
        ok = queue_item(m, m->arena + off, len - 1, top);
    }
    ok = ok && settle(m);
    if (!ok) m->overflow = true;
    return ok ? intern_results(m) : -1;
}

/* The same, cached: ASCII in the state's row, the rest in the transition map. */
static int32_t step(ak_gmatch *m, int32_t id, uint32_t cp) {
    if (cp < 128) {
        int32_t row = m->st[id].asc;
        if (row < 0 && (uint64_t)m->n_asc + 128 <= G_HARD_ARENA &&
            grow((void **)&m->asc, &m->cap_asc, m->n_asc + 128, sizeof *m->asc)) {
            row = m->st[id].asc = (int32_t)(m->n_asc / 128);
            for (int i = 0; i < 128; i++) m->asc[m->n_asc++] = -2;
        }
        if (row >= 0) {
            int32_t nx = m->asc[(size_t)row * 128 + cp];
            if (nx == -2) m->asc[(size_t)row * 128 + cp] = nx = step_new(m, id, cp);
            return nx;
        }
    }
    uint64_t key = (uint64_t)(uint32_t)id << 32 | cp;
    int32_t nx;
    if (map_get(&m->trans, key, &nx)) return nx;
    /* The next state depends only on which stacks' tops take cp: with up to 30 stacks,
     * that set (a bit per stack) is a key too, so of the thousands of code points a
     * negated class takes, one computes the step and the rest look it up. */
    uint32_t sig = 0, k = 0, i = 0;
    const gstate *s = &m->st[id];
    for (; i < s->len && k < 30; k++) {
        uint32_t len = m->arena[s->off + i];
        if (len && class_match(m->g, &m->g->el[m->arena[s->off + i + len]], cp)) sig |= 1u << k;
        i += 1 + len;
    }
    uint64_t skey = (uint64_t)(uint32_t)id << 32 | 0x40000000u | sig;
    bool by_sig = i >= s->len;
    if (!(by_sig && map_get(&m->trans, skey, &nx))) {
        nx = step_new(m, id, cp);
        if (by_sig && !map_put(&m->trans, skey, nx)) m->overflow = true;
    }
    if (!map_put(&m->trans, key, nx)) m->overflow = true;
    return nx;
}

/* The first state: the root rule's alternatives, settled. */
static int32_t initial_state(ak_gmatch *m) {
    scratch_reset(m);
    const grule *r = &m->g->rule[m->g->root];
    bool ok = true;
    for (uint32_t a = 0; ok && a < r->n_alt; a++) ok = queue_item(m, NULL, 0, m->g->alts[r->alt + a]);
    ok = ok && settle(m);
    if (!ok) m->overflow = true;
    return ok ? intern_results(m) : -1;
}

/* Code points starting with the partial sequence p: [lo, hi] (loose for surrogates). */
static void part_range(gpart p, uint32_t *lo, uint32_t *hi) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t shift = 6 * p.need;
    *lo = p.cp << shift;
    *hi = *lo | ((1u << shift) - 1);
    if (*lo < min_cp[p.len]) *lo = min_cp[p.len];
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
}

static uint32_t part_key(gpart p) { return p.need ? 0x80000000u | p.need << 24 | p.len << 21 | p.cp : 0; }

/* Some stack of state id can read a code point that begins with the partial p. */
static bool compatible(ak_gmatch *m, int32_t id, gpart p) {
    uint64_t key = (uint64_t)(uint32_t)id << 32 | part_key(p);
    int32_t v;
    if (map_get(&m->trans, key, &v)) return v;
    uint32_t lo, hi;
    part_range(p, &lo, &hi);
    bool ok = false;
    if (lo <= hi) {
        const gstate *s = &m->st[id];
        for (uint32_t i = 0; !ok && i < s->len;) {
            uint32_t len = m->arena[s->off + i];
            if (len) ok = class_meets(m->g, &m->g->el[m->arena[s->off + i + len]], lo, hi);
            i += 1 + len;
        }
    }
    if (!map_put(&m->trans, key, ok)) m->overflow = true;
    return ok;
}

/* One byte of UTF-8 after the partial p: 1 (and *cp) when it completes a code point, 0
 * when more bytes must follow, -1 when the bytes cannot be valid UTF-8 (a bad lead or
 * continuation byte, an overlong form, a surrogate, past U+10FFFF). */
static int utf8_next(gpart *p, unsigned char b, uint32_t *cp) {
    if (!p->need) {
        if (b < 0x80) return *cp = b, 1;
        if (b >= 0xC2 && b <= 0xDF) *p = (gpart){b & 0x1F, 1, 2};
        else if (b >= 0xE0 && b <= 0xEF) *p = (gpart){b & 0x0F, 2, 3};
        else if (b >= 0xF0 && b <= 0xF4) *p = (gpart){b & 0x07, 3, 4};
        else return -1;
        return 0;
    }
    if ((b & 0xC0) != 0x80) return -1;
    p->cp = p->cp << 6 | (b & 0x3F);
    if (--p->need) return 0;
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t c = p->cp, len = p->len;
    *p = (gpart){0, 0, 0};
    if (c < min_cp[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    return *cp = c, 1;
}

/* One byte from (id, p): false when it cannot be valid UTF-8 here or the grammar
 * rejects the character it completes. */
static bool step_byte(ak_gmatch *m, int32_t *id, gpart *p, unsigned char b) {
    uint32_t cp;
    int r = utf8_next(p, b, &cp);
    if (r <= 0) return r == 0;
    return (*id = step(m, *id, cp)) >= 0;
}

/* ---- loop classes ------------------------------------------------------------------ */

static int cmp_range(const void *a, const void *b) {
    const grange *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return (x->hi > y->hi) - (x->hi < y->hi);
}

/* Class e's code points as ranges into *out (grown): how many, UINT32_MAX when out of
 * memory. */
static uint32_t class_norm(const ak_grammar *g, const gel *e, grange **out, uint32_t *cap) {
    if (!grow((void **)out, cap, e->b + 1, sizeof **out)) return UINT32_MAX;
    grange *r = *out;
    for (uint32_t i = 0; i < e->b; i++) r[i] = (grange){g->rng[e->a + 2 * i], g->rng[e->a + 2 * i + 1]};
    qsort(r, e->b, sizeof *r, cmp_range);
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->b; i++) {
        if (n && r[i].lo <= r[n - 1].hi + 1) {
            if (r[i].hi > r[n - 1].hi) r[n - 1].hi = r[i].hi;
        } else {
            r[n++] = r[i];
        }
    }
    if (!e->neg) return n;
    /* the complement in [0, U+10FFFF], in place: the k-th gap is written at or before k */
    uint32_t j = 0, next = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t lo = r[k].lo, hi = r[k].hi;
        if (lo > next) r[j++] = (grange){next, lo - 1};
        next = hi + 1;
    }
    if (next <= 0x10FFFF) r[j++] = (grange){next, 0x10FFFF};
    return j;
}

/* Some code point of [lo, hi] is in r. */
static bool ranges_meet(const grange *r, uint32_t n, uint32_t lo, uint32_t hi) {
    uint32_t a = 0, b = n; /* the first range ending at or after lo */
    while (a < b) {
        uint32_t mid = (a + b) / 2;
        if (r[mid].hi < lo) a = mid + 1;
        else b = mid;
    }
    return a < n && r[a].lo <= hi;
}

/* How b lies in a: 0 disjoint, 1 wholly inside, 2 partly. */
static int ranges_rel(const grange *a, uint32_t na, const grange *b, uint32_t nb) {
    uint64_t in = 0, total = 0;
    for (uint32_t j = 0; j < nb; j++) total += (uint64_t)b[j].hi - b[j].lo + 1;
    for (uint32_t i = 0, j = 0; i < na && j < nb;) {
        uint32_t lo = a[i].lo > b[j].lo ? a[i].lo : b[j].lo, hi = a[i].hi < b[j].hi ? a[i].hi : b[j].hi;
        if (lo <= hi) in += (uint64_t)hi - lo + 1;
        if (a[i].hi < b[j].hi) i++;
        else j++;
    }
    return in == 0 ? 0 : in == total ? 1 : 2;
}

static void loop_free(gloop *L) {
    if (!L) return;
    free(L->cls), free(L->base), free(L->group), free(L->node);
    free(L);
}

typedef struct {
    uint64_t key; /* part_key(from) << 8 | byte */
    uint32_t node;
    gpart from;
} gfront;
static int cmp_front(const void *a, const void *b) {
    const gfront *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

/* The loop entry of class cls: one walk of the trie down the paths that stay in cls.
 * A byte that cannot be valid UTF-8 there (or a partial code point no code point can
 * complete) is rejected from every state: such nodes are neither base nor frontier. */
static gloop *loop_build(const ak_gvocab *v, const grange *cls, uint32_t n_cls, uint64_t hash) {
    gloop *L = calloc(1, sizeof *L);
    gpart *pp = malloc(((size_t)v->max_depth + 1) * sizeof *pp);
    gfront *fr = NULL;
    uint32_t n_fr = 0, cap_fr = 0;
    if (!L || !pp || !(L->cls = malloc((n_cls ? n_cls : 1) * sizeof *cls)) ||
        !(L->base = calloc((size_t)v->n_words, sizeof *L->base)))
        goto fail;
    memcpy(L->cls, cls, n_cls * sizeof *cls);
    L->n_cls = n_cls, L->hash = hash;
    bool asc[128];
    for (uint32_t c = 0; c < 128; c++) asc[c] = ranges_meet(cls, n_cls, c, c);
    pp[0] = (gpart){0, 0, 0};
    for (uint32_t i = 1; i < v->n_nodes;) {
        uint32_t d = v->depth[i], cp, lo, hi;
        gpart p = pp[d - 1];
        int r = utf8_next(&p, v->byte[i], &cp), in;
        if (r < 0) {
            in = -1;
        } else if (r == 0) {
            part_range(p, &lo, &hi);
            in = lo > hi ? -1 : ranges_meet(cls, n_cls, lo, hi);
        } else {
            in = cp < 128 ? asc[cp] : ranges_meet(cls, n_cls, cp, cp);
        }
        if (in == 1) {
            pp[d] = p;
            for (uint32_t k = 0; k < v->cnt[i]; k++) {
                int32_t t = v->sorted[v->tok[i] + k];
                L->base[t >> 5] |= 1u << (t & 31);
            }
            L->n_base += (int)v->cnt[i];
            i++;
            continue;
        }
        if (in == 0) {
            if (!grow((void **)&fr, &cap_fr, n_fr + 1, sizeof *fr)) goto fail;
            fr[n_fr++] = (gfront){(uint64_t)part_key(pp[d - 1]) << 8 | v->byte[i], i, pp[d - 1]};
        }
        i = v->end[i];
    }
    if (n_fr) qsort(fr, n_fr, sizeof *fr, cmp_front);   /* fr is NULL when no byte leaves the loop */
    if (!(L->node = malloc((n_fr ? n_fr : 1) * sizeof *L->node)) || !(L->group = malloc((n_fr ? n_fr : 1) * sizeof *L->group)))
        goto fail;
    for (uint32_t i = 0; i < n_fr; i++) {
        if (!i || fr[i].key != fr[i - 1].key)
            L->group[L->n_group++] = (ggroup){fr[i].from, i, 0, (uint8_t)(fr[i].key & 0xFF)};
        L->group[L->n_group - 1].n++;
        L->node[i] = fr[i].node;
    }
    free(pp), free(fr);
    return L;
fail:
    free(pp), free(fr), loop_free(L);
    return NULL;
}

/* The slot of class cls in the vocabulary's table, built and published if new; -1 when
 * the table is full or memory is short. Two matchers may build the same class at once:
 * the first to publish wins, the other frees its copy. */
static int32_t loop_get(const ak_gvocab *v, const grange *cls, uint32_t n_cls) {
    uint64_t h = 0x100b;
    for (uint32_t i = 0; i < n_cls; i++) h = mix64(h ^ ((uint64_t)cls[i].lo << 32 | cls[i].hi));
    gloop *mine = NULL;
    for (int32_t k = 0; k < G_LOOPS; k++) {
        gloop *L = atomic_load_explicit(&v->loops[k], memory_order_acquire);
        if (!L) {
            if (!mine && !(mine = loop_build(v, cls, n_cls, h))) return -1;
            gloop *expect = NULL;
            if (atomic_compare_exchange_strong_explicit(&v->loops[k], &expect, mine, memory_order_acq_rel,
                                                        memory_order_acquire))
                return k;
            L = expect; /* another matcher's, published meanwhile */
        }
        if (L->hash == h && L->n_cls == n_cls && !memcmp(L->cls, cls, n_cls * sizeof *cls)) {
            loop_free(mine);
            return k;
        }
    }
    loop_free(mine);
    return -1;
}

/* The loop class state id stays in: the class L of one of its stack tops such that
 * every other top holds all of L or none of it (then every code point of L takes the
 * same stacks, so leads to one state) and that state is id itself. Inside a JSON string
 * L is the string's character class. -1: none. */
static int32_t state_loop(ak_gmatch *m, int32_t id) {
    if (m->st[id].loop != -2) return m->st[id].loop;
    m->st[id].loop = -1;
    const ak_grammar *g = m->g;
    uint32_t tops[G_LOOP_STACKS], n_tops = 0;
    const gstate s = m->st[id];
    for (uint32_t i = 0; i < s.len;) {
        uint32_t len = m->arena[s.off + i];
        if (len) {
            if (n_tops == G_LOOP_STACKS) return -1;
            tops[n_tops++] = m->arena[s.off + i + len];
        }
        i += 1 + len;
    }
    for (uint32_t c = 0; c < n_tops; c++) {
        bool seen = false;
        for (uint32_t k = 0; k < c && !seen; k++) seen = tops[k] == tops[c];
        if (seen) continue;
        uint32_t n = class_norm(g, &g->el[tops[c]], &m->lr, &m->cap_lr);
        if (n == UINT32_MAX || n == 0) continue;
        bool ok = true;
        for (uint32_t k = 0; k < n_tops && ok; k++) {
            if (tops[k] == tops[c]) continue;
            uint32_t n2 = class_norm(g, &g->el[tops[k]], &m->lr2, &m->cap_lr2);
            ok = n2 != UINT32_MAX && ranges_rel(m->lr2, n2, m->lr, n) != 2;
        }
        /* a code point of L that UTF-8 can carry (not a surrogate) */
        uint32_t c0 = UINT32_MAX;
        for (uint32_t k = 0; k < n && c0 == UINT32_MAX && ok; k++) {
            uint32_t lo = m->lr[k].lo >= 0xD800 && m->lr[k].lo <= 0xDFFF ? 0xE000 : m->lr[k].lo;
            if (lo <= m->lr[k].hi) c0 = lo;
        }
        if (!ok || c0 == UINT32_MAX || step(m, id, c0) != id) continue;
        return m->st[id].loop = loop_get(m->v, m->lr, n);
    }
    return -1;
}

/* ---- vocabulary --------------------------------------------------------------------- */

/* A token for sorting by bytes, self-contained (no global context for qsort). */
typedef struct {
    const char *p;
    uint32_t len;
    int32_t id;
} gtok;
static int cmp_tok(const void *a, const void *b) {
    const gtok *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void ak_gvocab_free(ak_gvocab *v) {
    if (!v) return;
    free(v->bytes), free(v->boff), free(v->eog), free(v->byte), free(v->depth), free(v->end), free(v->tok), free(v->cnt);
    free(v->sorted);
    if (v->loops)
        for (int k = 0; k < G_LOOPS; k++) loop_free(atomic_load_explicit(&v->loops[k], memory_order_acquire));
    free(v->loops);
    free(v);
}

int ak_gvocab_n_vocab(const ak_gvocab *v) { return v->n_vocab; }

/* The trie from the tokens sorted by their bytes: one pass, each token opening the nodes
 * below its common prefix with the one before. */
static bool build_trie(ak_gvocab *v, uint32_t n_sorted) {
    uint64_t n_nodes = 1;
    for (uint32_t i = 0; i < n_sorted; i++) {
        int32_t t = v->sorted[i];
        uint32_t len = v->boff[t + 1] - v->boff[t], common = 0;
        if (i) {
            int32_t u = v->sorted[i - 1];
            uint32_t lu = v->boff[u + 1] - v->boff[u];
            while (common < len && common < lu && v->bytes[v->boff[t] + common] == v->bytes[v->boff[u] + common]) common++;
        }
        n_nodes += len - common;
    }
    if (n_nodes >= UINT32_MAX / 2) return false;
    v->n_nodes = (uint32_t)n_nodes;
    v->byte = malloc(n_nodes);
    v->depth = malloc(n_nodes * sizeof *v->depth);
    v->end = malloc(n_nodes * sizeof *v->end);
    v->tok = malloc((n_nodes + 1) * sizeof *v->tok);
    v->cnt = calloc(n_nodes, sizeof *v->cnt);
    uint32_t *path = malloc(((size_t)v->max_depth + 1) * sizeof *path);
    if (!v->byte || !v->depth || !v->end || !v->tok || !v->cnt || !path) return free(path), false;
    uint32_t n = 1, open = 1; /* nodes made; path[0 .. open) are the nodes still open */
    path[0] = 0;
    v->byte[0] = 0, v->depth[0] = 0, v->tok[0] = 0;
    for (uint32_t i = 0; i < n_sorted; i++) {
        int32_t t = v->sorted[i];
        const unsigned char *b = (const unsigned char *)v->bytes + v->boff[t];
        uint32_t len = v->boff[t + 1] - v->boff[t], common = 0;
        if (i) {
            int32_t u = v->sorted[i - 1];
            uint32_t lu = v->boff[u + 1] - v->boff[u];
            while (common < len && common < lu && b[common] == (unsigned char)v->bytes[v->boff[u] + common]) common++;
        }
        /* close the nodes deeper than the common prefix */
        while (open > common + 1) v->end[path[--open]] = n;
        for (uint32_t d = common; d < len; d++) {
            v->byte[n] = b[d];
            v->depth[n] = (uint16_t)(d + 1);
            v->tok[n] = i; /* its tokens (if any) start here in sorted order */
            path[open++] = n++;
        }
        /* the token ends at path[len]; a duplicate piece at the same node, right after
         * the first in sorted order */
        v->cnt[path[len]]++;
    }
    while (open > 0) v->end[path[--open]] = n;
    v->tok[n] = n_sorted;
    free(path);
    return true;
}

ak_status ak_gvocab_create(const ak_tokenizer *tok, int n_vocab, ak_gvocab **out, ak_err *err) {
    *out = NULL;
    int32_t nt = ak_tokenizer_n_vocab(tok);
    if (n_vocab < 1) return ak_fail(err, AK_ERR_ARG, "grammar vocabulary: n_vocab %d", n_vocab);
    if (nt > n_vocab) nt = n_vocab;
    ak_gvocab *v = calloc(1, sizeof *v);
    if (!v) return ak_fail(err, AK_ERR_NOMEM, "grammar vocabulary: out of memory");
    v->n_vocab = n_vocab;
    v->n_words = (n_vocab + 31) / 32;
    v->n_tok = (uint32_t)nt;
    size_t cap = 1 << 16, used = 0;
    v->bytes = malloc(cap);
    v->boff = malloc(((size_t)nt + 1) * sizeof *v->boff);
    v->eog = calloc((size_t)nt + 1, 1);
    v->sorted = malloc(((size_t)nt + 1) * sizeof *v->sorted);
    v->loops = malloc(G_LOOPS * sizeof *v->loops);
    ak_status st = AK_ERR_NOMEM;
    if (!v->bytes || !v->boff || !v->eog || !v->sorted || !v->loops) goto nomem;
    for (int k = 0; k < G_LOOPS; k++) atomic_init(&v->loops[k], NULL);
    const int32_t *eogs;
    int ne = ak_tokenizer_eog_ids(tok, &eogs);
    for (int i = 0; i < ne && i < 16; i++)
        if (eogs[i] >= 0 && eogs[i] < nt) v->eog_ids[v->n_eog++] = eogs[i];
    uint32_t n_sorted = 0;
    for (int32_t t = 0; t < nt; t++) {
        v->boff[t] = (uint32_t)used;
        v->eog[t] = ak_tokenizer_is_eog(tok, t);
        size_t need = 0;
        if (v->eog[t]) continue;
        if ((st = ak_tokenizer_piece(tok, t, false, NULL, 0, &need, err))) goto fail;
        if (used + need + 1 > UINT32_MAX / 2) {
            st = ak_fail(err, AK_ERR_FORMAT, "grammar vocabulary: pieces too large");
            goto fail;
        }
        if (used + need + 1 > cap) {
            while (used + need + 1 > cap) cap *= 2;
            char *b = realloc(v->bytes, cap);
            if (!b) goto nomem;
            v->bytes = b;
        }
        if ((st = ak_tokenizer_piece(tok, t, false, v->bytes + used, need + 1, &need, err))) goto fail;
        used += need;
        if (need) {
            v->sorted[n_sorted++] = t;
            if ((int)need > v->max_depth) v->max_depth = (int)need;
        }
    }
    v->boff[nt] = (uint32_t)used;
    if (v->max_depth > 65535) {
        st = ak_fail(err, AK_ERR_FORMAT, "grammar vocabulary: a piece of %d bytes", v->max_depth);
        goto fail;
    }
    gtok *keys = malloc(((size_t)n_sorted + 1) * sizeof *keys);
    if (!keys) goto nomem;
    for (uint32_t i = 0; i < n_sorted; i++) {
        int32_t t = v->sorted[i];
        keys[i] = (gtok){v->bytes + v->boff[t], v->boff[t + 1] - v->boff[t], t};
    }
    qsort(keys, n_sorted, sizeof *keys, cmp_tok);
    for (uint32_t i = 0; i < n_sorted; i++) v->sorted[i] = keys[i].id;
    free(keys);
    if (!build_trie(v, n_sorted)) goto nomem;
    *out = v;
    return AK_OK;
nomem:
    st = ak_fail(err, AK_ERR_NOMEM, "grammar vocabulary: out of memory");
fail:
    ak_gvocab_free(v);
    return st;
}

/* ---- matcher: public ---------------------------------------------------------------- */

void ak_gmatch_free(ak_gmatch *m) {
    if (!m) return;
    free(m->st), free(m->arena), free(m->asc), map_free(&m->intern), map_free(&m->trans);
    free(m->wk), free(m->item), free(m->res), map_free(&m->seen), free(m->order);
    free(m->w_st), free(m->w_part), free(m->masks), free(m->lr), free(m->lr2);
    free(m);
}

static void cache_clear(ak_gmatch *m) {
    for (int i = 0; i < G_MASK_CACHE; i++) m->c_state[i] = -1, m->c_used[i] = 0;
}

/* Drops every interned state but the current one (between calls, when past the soft
 * limits): ids change, so the transition and mask caches go too. */
static void flush(ak_gmatch *m) {
    const gstate cur = m->st[m->cur];
    scratch_reset(m);
    /* the current state's stacks as results, then interned afresh */
    if (!grow((void **)&m->wk, &m->cap_wk, cur.len, sizeof *m->wk) ||
        !grow((void **)&m->res, &m->cap_res, 2 * cur.len + 2, sizeof *m->res))
        return; /* keep everything: the next call tries again */
    memcpy(m->wk, m->arena + cur.off, (size_t)cur.len * sizeof *m->wk);
    for (uint32_t i = 0; i < cur.len;) {
        m->res[m->n_res++] = i + 1;
        m->res[m->n_res++] = m->wk[i];
        i += 1 + m->wk[i];
    }
    m->n_wk = cur.len;
    m->n_st = 0, m->n_arena = 0, m->n_asc = 0;
    map_clear(&m->intern), map_clear(&m->trans);
    cache_clear(m);
    m->overflow = false;
    m->cur = intern_results(m);
}

static void maybe_flush(ak_gmatch *m) {
    if (m->n_arena > G_SOFT_ARENA || m->n_asc > G_SOFT_ARENA || m->n_st > G_SOFT_STATES || m->trans.n > 4 * G_SOFT_STATES ||
        m->overflow)
        flush(m);
}

ak_status ak_gmatch_create(const ak_grammar *g, const ak_gvocab *v, ak_gmatch **out, ak_err *err) {
    *out = NULL;
    ak_gmatch *m = calloc(1, sizeof *m);
    if (!m) return ak_fail(err, AK_ERR_NOMEM, "grammar matcher: out of memory");
    m->g = g, m->v = v;
    bool ok = map_init(&m->intern, 1024) && map_init(&m->trans, 4096) && map_init(&m->seen, 256);
    if (ok && v) {
        m->w_st = malloc(((size_t)v->max_depth + 1) * sizeof *m->w_st);
        m->w_part = malloc(((size_t)v->max_depth + 1) * sizeof *m->w_part);
        m->masks = malloc((size_t)G_MASK_CACHE * (size_t)v->n_words * sizeof *m->masks);
        ok = m->w_st && m->w_part && m->masks;
    }
    if (!ok) {
        ak_gmatch_free(m);
        return ak_fail(err, AK_ERR_NOMEM, "grammar matcher: out of memory");
    }
    cache_clear(m);
    m->cur = initial_state(m);
    if (m->cur < 0) {
        ak_gmatch_free(m);
        return ak_fail(err, AK_ERR_FORMAT, "grammar matcher: the start rule expands past the limits");
    }
    *out = m;
    return AK_OK;
}

void ak_gmatch_reset(ak_gmatch *m) {
    maybe_flush(m);
    int32_t id = initial_state(m);
    if (id >= 0) m->cur = id; /* it fit at create, so it fits after a flush */
    m->part = (gpart){0, 0, 0};
}

bool ak_gmatch_accept_bytes(ak_gmatch *m, const char *s, size_t n) {
    maybe_flush(m);
    int32_t id = m->cur;
    gpart p = m->part;
    for (size_t i = 0; i < n; i++)
        if (!step_byte(m, &id, &p, (unsigned char)s[i])) return false;
    if (p.need && !compatible(m, id, p)) return false;
    m->cur = id, m->part = p;
    return true;
}

bool ak_gmatch_can_end(const ak_gmatch *m) { return !m->part.need && m->st[m->cur].can_end; }

bool ak_gmatch_accept_token(ak_gmatch *m, int32_t id) {
    const ak_gvocab *v = m->v;
    if (!v || id < 0 || (uint32_t)id >= v->n_tok) return false;
    if (v->eog[id]) return ak_gmatch_can_end(m);
    uint32_t len = v->boff[id + 1] - v->boff[id];
    return len && ak_gmatch_accept_bytes(m, v->bytes + v->boff[id], len);
}

/* The trie walk over nodes [lo, hi), their parents' states in w_st and w_part: every
 * node whose bytes the grammar accepts marks the tokens ending there; a rejected node
 * skips its whole subtree. */
static int walk_range(ak_gmatch *m, uint32_t lo, uint32_t hi, uint32_t *mask) {
    const ak_gvocab *v = m->v;
    int allowed = 0;
    for (uint32_t i = lo; i < hi;) {
        uint32_t d = v->depth[i];
        int32_t id = m->w_st[d - 1];
        gpart p = m->w_part[d - 1];
        /* mid-character, the subtree lives only if some class can take a code point
         * with these leading bytes: this prunes the many multi-byte subtrees at once */
        if (!step_byte(m, &id, &p, v->byte[i]) || (p.need && !compatible(m, id, p))) {
            i = v->end[i];
            continue;
        }
        m->w_st[d] = id, m->w_part[d] = p;
        uint32_t c = v->cnt[i];
        for (uint32_t k = 0; k < c; k++) {
            int32_t t = v->sorted[v->tok[i] + k];
            mask[t >> 5] |= 1u << (t & 31);
        }
        allowed += (int)c;
        i++;
    }
    return allowed;
}

/* A state in loop L: L's tokens at once, then the groups where bytes leave L, each
 * stepped once from the state and, if it lives, its nodes' subtrees walked. */
static int walk_loop(ak_gmatch *m, const gloop *L, uint32_t *mask) {
    const ak_gvocab *v = m->v;
    memcpy(mask, L->base, (size_t)v->n_words * sizeof *mask);
    int allowed = L->n_base;
    for (uint32_t gi = 0; gi < L->n_group; gi++) {
        const ggroup *gr = &L->group[gi];
        int32_t id = m->cur;
        gpart p = gr->from;
        if (!step_byte(m, &id, &p, gr->byte) || (p.need && !compatible(m, id, p))) continue;
        for (uint32_t k = gr->first; k < gr->first + gr->n; k++) {
            uint32_t f = L->node[k], d = v->depth[f];
            m->w_st[d] = id, m->w_part[d] = p;
            for (uint32_t j = 0; j < v->cnt[f]; j++) {
                int32_t t = v->sorted[v->tok[f] + j];
                mask[t >> 5] |= 1u << (t & 31);
            }
            allowed += (int)v->cnt[f] + walk_range(m, f + 1, v->end[f], mask);
        }
    }
    return allowed;
}

/* The mask of the current state into a zeroed mask. */
static int walk(ak_gmatch *m, uint32_t *mask) {
    const ak_gvocab *v = m->v;
    int allowed;
    int32_t loop = m->part.need ? -1 : state_loop(m, m->cur);
    if (loop >= 0) {
        allowed = walk_loop(m, atomic_load_explicit(&v->loops[loop], memory_order_acquire), mask);
    } else {
        m->w_st[0] = m->cur, m->w_part[0] = m->part;
        allowed = walk_range(m, 1, v->n_nodes, mask);
    }
    if (ak_gmatch_can_end(m))
        for (int k = 0; k < v->n_eog; k++) {
            int32_t t = v->eog_ids[k];
            if (!(mask[t >> 5] >> (t & 31) & 1)) allowed++;
            mask[t >> 5] |= 1u << (t & 31);
        }
    return allowed;
}

int ak_gmatch_mask(ak_gmatch *m, uint32_t *mask) {
    const ak_gvocab *v = m->v;
    if (!v) return 0;
    maybe_flush(m);
    size_t bytes = (size_t)v->n_words * sizeof *mask;
    uint32_t pk = part_key(m->part);
    int lru = 0;
    m->clock++;
    for (int i = 0; i < G_MASK_CACHE; i++) {
        if (m->c_state[i] == m->cur && m->c_part[i] == pk && m->c_used[i]) {
            memcpy(mask, m->masks + (size_t)i * v->n_words, bytes);
            m->c_used[i] = m->clock;
            return m->c_count[i];
        }
        if (m->c_used[i] < m->c_used[lru]) lru = i;
    }
    memset(mask, 0, bytes);
    bool over = m->overflow;
    int n = walk(m, mask);
    if (m->overflow && !over) return n; /* past a limit: not a mask to keep */
    memcpy(m->masks + (size_t)lru * v->n_words, mask, bytes);
    m->c_state[lru] = m->cur, m->c_part[lru] = pk, m->c_used[lru] = m->clock, m->c_count[lru] = n;
    return n;
}

/* ---- random sentences --------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ULL;
    return mix64(*s);
}

/* A random code point of class e (valid, not a surrogate); false if none is found. */
static bool sample_char(const ak_grammar *g, const gel *e, uint64_t *rng, uint32_t *cp) {
    const uint32_t *r = g->rng + e->a;
    if (!e->neg) {
        if (!e->b) return false;
        uint32_t k = (uint32_t)(rng_next(rng) % e->b), lo = r[2 * k], hi = r[2 * k + 1];
        for (int tries = 0; tries < 16; tries++) {
            uint32_t c = lo + (uint32_t)(rng_next(rng) % ((uint64_t)hi - lo + 1));
            if (c < 0xD800 || c > 0xDFFF) return *cp = c, true;
        }
        return lo < 0xD800 ? (*cp = lo, true) : hi > 0xDFFF ? (*cp = hi, true) : false;
    }
    /* negated: mostly printable ASCII, sometimes anything up to U+FFFF and beyond */
    static const uint32_t span[3] = {0x7F, 0x3000, 0x10FFFF};
    for (int tries = 0; tries < 64; tries++) {
        uint32_t c = (uint32_t)(rng_next(rng) % (span[rng_next(rng) % 3] + 1));
        if ((c >= 0xD800 && c <= 0xDFFF) || !class_match(g, e, c)) continue;
        return *cp = c, true;
    }
    for (uint32_t c = 0; c <= 0x10FFFF; c++)
        if ((c < 0xD800 || c > 0xDFFF) && class_match(g, e, c)) return *cp = c, true;
    return false;
}

static size_t put_utf8(char *o, uint32_t c) {
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000)
        return o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 0x3F)), o[2] = (char)(0x80 | (c & 0x3F)), 3;
    o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (char)(0x80 | (c >> 6 & 0x3F)), o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

bool ak_grammar_sample(const ak_grammar *g, uint64_t *rng, int max_depth, char *buf, size_t cap, size_t *n_out) {
    /* the shortest sentence of each rule (by fixed point), to finish once past max_depth */
    enum { INF = 1 << 30 };
    uint32_t *cost = malloc((size_t)(g->n_rule ? g->n_rule : 1) * sizeof *cost);
    uint32_t scap = 1024, n = 0;
    uint32_t *stk = malloc(2 * (size_t)scap * sizeof *stk); /* pairs (element, depth) */
    bool ok = cost && stk;
    for (uint32_t r = 0; ok && r < g->n_rule; r++) cost[r] = INF;
    for (int changed = 1, iter = 0; ok && changed && iter < 100000; iter++) {
        changed = 0;
        for (uint32_t r = 0; r < g->n_rule; r++)
            for (uint32_t a = 0; a < g->rule[r].n_alt; a++) {
                uint64_t c = 0;
                for (uint32_t e = g->alts[g->rule[r].alt + a]; g->el[e].kind != EL_END && c < INF; e++)
                    c += g->el[e].kind == EL_CHARS ? 1 : cost[g->el[e].a];
                if (c < cost[r]) cost[r] = (uint32_t)c, changed = 1;
            }
    }
    ok = ok && cost[g->root] < INF;
    size_t len = 0;
    if (ok) stk[n++] = UINT32_MAX, stk[n++] = 0; /* UINT32_MAX: expand the root */
    while (ok && n) {
        uint32_t depth = stk[--n], e = stk[--n];
        uint32_t r = g->root;
        if (e != UINT32_MAX) {
            const gel *x = &g->el[e];
            if (x->kind == EL_END) continue;
            if (g->el[e + 1].kind != EL_END) stk[n++] = e + 1, stk[n++] = depth; /* the rest of the alternative */
            if (x->kind == EL_CHARS) {
                uint32_t c;
                if (!sample_char(g, x, rng, &c) || len + 4 > cap) {
                    ok = false;
                    break;
                }
                len += put_utf8(buf + len, c);
                continue;
            }
            r = x->a;
        }
        /* pick an alternative: any finite one while shallow, a shortest one past max_depth */
        const grule *rr = &g->rule[r];
        uint32_t pick = UINT32_MAX, best = INF, n_ok = 0;
        for (uint32_t a = 0; a < rr->n_alt; a++) {
            uint64_t c = 0;
            for (uint32_t k = g->alts[rr->alt + a]; g->el[k].kind != EL_END && c < INF; k++)
                c += g->el[k].kind == EL_CHARS ? 1 : cost[g->el[k].a];
            if (c >= INF) continue;
            n_ok++;
            if ((int)depth >= max_depth ? c < best : rng_next(rng) % n_ok == 0) pick = a, best = (uint32_t)c;
        }
        if (pick == UINT32_MAX) {
            ok = false;
            break;
        }
        if (n + 2 > 2 * scap) {
            if (scap >= (1u << 24)) {
                ok = false;
                break;
            }
            uint32_t *q = realloc(stk, 4 * (size_t)scap * sizeof *stk);
            if (!q) {
                ok = false;
                break;
            }
            stk = q, scap *= 2;
        }
        stk[n++] = g->alts[rr->alt + pick], stk[n++] = depth + 1;
    }
    free(cost), free(stk);
    if (ok) *n_out = len;
    return ok;
}
