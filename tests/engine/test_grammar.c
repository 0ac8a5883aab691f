/* GBNF grammars: llama.cpp's grammars/ folder parses (AKUNU_LLAMA_GRAMMARS, fetched by
 * tests/engine/llama_grammars.sh); malformed grammars fail with their line and column;
 * the matcher's verdict on accepted and rejected strings, on every prefix and fed in
 * every split; random sentences of each grammar are accepted; the token mask equals a
 * brute-force check of every token along random sentences, on the fixture vocabularies
 * and the real Qwen one (models/, when present), cached or not. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include "engine/grammar.h"
#include "format/gguf.h"
#include "model/tokenizer.h"

#ifndef AK_MODELS
#define AK_MODELS "models"
#endif
#include "test_util.h"

static ak_grammar *parse(const char *text) {
    ak_grammar *g = NULL;
    ak_err err = {{0}};
    ak_status st = ak_grammar_parse(text, strlen(text), NULL, &g, &err);
    CHECK(st == AK_OK && g, "parse: %s\n%s", err.msg, text);
    return st ? NULL : g;
}

static ak_gmatch *matcher(const ak_grammar *g, const ak_gvocab *v) {
    ak_gmatch *m = NULL;
    ak_err err = {{0}};
    ak_status st = ak_gmatch_create(g, v, &m, &err);
    CHECK(st == AK_OK && m, "gmatch_create: %s", err.msg);
    return m;
}

/* ---- grammars -------------------------------------------------------------------- */

/* JSON, written for these tests (objects, arrays, strings with escapes, numbers). */
static const char *json_gbnf =
    "# any JSON value, optional white space between tokens\n"
    "root ::= ws value ws\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( member ( ws \",\" ws member )* )? ws \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array ::= \"[\" ws ( value ( ws \",\" ws value )* )? ws \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex{4} )\n"
    "hex ::= [0-9a-fA-F]\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "ws ::= [ \\t\\n]{0,8}\n";

typedef struct {
    const char *name, *text;
    const char *good[12], *bad[12];
} gcase;

static const gcase cases[] = {
    {"json", NULL,
     {"{}", "[]", "{\"a\": [1, 2.5, -3e+2, true, null]}", "\"caf\xc3\xa9 \\u00e9 \\n\"", "  [ {\"k\" : {}} ] ",
      "\"\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x80\"", "0", "-0.5E-7"},
     {"{", "[1,]", "01", "\"a", "{\"a\" 1}", "\"\\x\"", "[1 2]", "tru", "\"\x01\"", "1.", "\"\\u12g4\""}},
    {"reps", "root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} (\"d\" | \"e\")? x*\nx ::= \"xy\"\n",
     {"aabcc", "aabbbccc", "aabccd", "aabcccexyxy", "aabbccxy"},
     {"abcc", "aabbbbcc", "aabc", "aabccde", "aabccx", "aabccxyx", "aaabcc"}},
    {"classes", "root ::= [^a-z\\n]+ \".\" [\\x41-\\x43\\u00e9\\U0001F600] [^]\n",
     {"AB.A\xc3\xa9", "Z9 .\xf0\x9f\x98\x80" "a", "\xe4\xb8\xad.Cz"},
     {"a.Ax", "A\nB.Aa", ".Aa", "A.Da", "A.A", "A.\xc3\xa8x"}},
    {"utf8", "root ::= \"\xc3\xa9\" [\xe4\xb8\x80-\xe9\xbf\xbf]+ (\"\xf0\x9f\x98\x80\" | \"!\")\n",
     {"\xc3\xa9\xe4\xb8\xad\xe6\x96\x87!", "\xc3\xa9\xe4\xb8\x80\xf0\x9f\x98\x80"},
     {"\xc3\xa9!", "\xc3\xa8\xe4\xb8\xad!", "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x81", "\xc3\xa9\xe4\xb8\xad\xe6", "\xc3"}},
    {"multiline", "root ::= item+   # items\n\nitem ::=\n  \"<\" (\n    \"a\"\n  | \"b\" ) \">\"\n"
                  "  | \"-\"\n  | \"=\"\n",
     {"<a>", "<b><a>-", "=-="}, {"", "<>", "<a", "<c>", "a"}},
    {"any", "root ::= \"(\" . . \")\" \"\"\n", {"(ab)", "(\xc3\xa9\n)", "()))"}, {"(a)", "(abc)", "()"}},
    {"nullable", "root ::= a b c\na ::= \"x\"?\nb ::= \"\" | \"y\"\nc ::= (a b \"z\")*\n",
     {"", "x", "xy", "yz", "xyzz", "xz"}, {"zx", "yy", "xzy"}},
    {"dots", "root ::= . .?\n", {"a", "\xc3\xa9", "ab", "\n\xf0\x9f\x98\x80"}, {"", "abc", "\xc3", "\xff", "\xed\xa0\x80"}},
    {"empty-rule", "root ::= \"[\" e \"]\"\ne ::=\n", {"[]"}, {"[", "[ ]"}},
};

static const gcase llama_cases[] = {
    {"arithmetic.gbnf", NULL, {"x=1\n", "(a +b)*c= 2\n", "ab1=(x)\nq=3\n"}, {"x=1", "=x\n", "x==1\n", "x=(1\n", "(a + b)=1\n"}},
    {"list.gbnf", NULL, {"- a\n", "- one\n- two \xe2\x9c\x93\n"}, {"- \n", "-a\n", "- a", "- a\r\n"}},
    {"chess.gbnf", NULL, {"1. e4 e5\n2. Nf3 Nc6\n", "1. O-O-O Qxd8+\n2. a8=Q# b1\n"},
     {"1. e4 e5\n", "1. e4\n", "1. e9 e5\n", "2. e4 e5\n", "1. e4 e5\n0. e4 e5\n"}},
    {"c.gbnf", NULL, {"int main(){return 0;}", "int f(int x){x = 1;while(x<3){x = x+1;}}"},
     {"int main(){", "main(){}", "int main(){return;}", "int f(){x=1;}"}},
    {"json.gbnf", NULL, {"{}", "{\"a\": [1, \"x\", {\"b\": null}]}"}, {"[]", "{\"a\":}", "{\"a\": 01}"}},
};

/* ---- verdicts ---------------------------------------------------------------------- */

/* Feeds s in pieces of the given sizes (0: byte by byte... cycling); returns how many bytes
 * were accepted before the first failure (n on success). */
static size_t feed_split(ak_gmatch *m, const char *s, size_t n, const int *sizes, int n_sizes) {
    size_t i = 0;
    for (int k = 0; i < n; k++) {
        size_t len = (size_t)sizes[k % n_sizes];
        if (len > n - i) len = n - i;
        if (!ak_gmatch_accept_bytes(m, s + i, len)) {
            /* a failed piece changes nothing: its bytes one by one find the exact spot */
            for (size_t j = 0; j < len; j++, i++)
                if (!ak_gmatch_accept_bytes(m, s + i, 1)) return i;
            CHECK(0, "a piece failed whose bytes one by one pass");
            return i;
        }
        i += len;
    }
    return n;
}

/* Whether s is a sentence, checking on the way that every prefix of an accepted string
 * is accepted, can_end only where a sentence ends, and that every split agrees. */
static bool sentence(const ak_grammar *g, ak_gmatch *m, const char *s, size_t n, const char *what) {
    static const int splits[][4] = {{1}, {2, 1, 3}, {1000000}, {5, 7, 1, 2}};
    size_t first = 0;
    bool end = false;
    for (int sp = 0; sp < 4; sp++) {
        ak_gmatch_reset(m);
        size_t got = feed_split(m, s, n, splits[sp], sp == 0 || sp == 2 ? 1 : sp == 1 ? 3 : 4);
        bool e = got == n && ak_gmatch_can_end(m);
        if (sp == 0) {
            first = got, end = e;
        } else {
            CHECK(got == first && e == end, "%s: split %d accepted %zu (byte by byte %zu), end %d vs %d: %.*s", what, sp,
                  got, first, e, end, (int)n, s);
        }
        if (sp == 0 && got < n) {
            /* the failed byte changed nothing: the prefix is still there */
            ak_gmatch *f = matcher(g, NULL);
            if (f) {
                CHECK(ak_gmatch_accept_bytes(f, s, got) && ak_gmatch_can_end(f) == ak_gmatch_can_end(m),
                      "%s: state after a rejected byte", what);
                ak_gmatch_free(f);
            }
        }
    }
    return first == n && end;
}

static void check_case(const ak_grammar *g, const gcase *c) {
    ak_gmatch *m = matcher(g, NULL);
    if (!m) return;
    for (int i = 0; i < 12 && c->good[i]; i++)
        CHECK(sentence(g, m, c->good[i], strlen(c->good[i]), c->name), "%s: should accept \"%s\"", c->name, c->good[i]);
    for (int i = 0; i < 12 && c->bad[i]; i++)
        CHECK(!sentence(g, m, c->bad[i], strlen(c->bad[i]), c->name), "%s: should reject \"%s\"", c->name, c->bad[i]);
    ak_gmatch_free(m);
}

/* Random sentences: all accepted, can_end at their end, and not before in every case
 * where the grammar says so (can_end must at least hold at the end). */
static void check_random(const ak_grammar *g, const char *name, int count) {
    ak_gmatch *m = matcher(g, NULL);
    if (!m) return;
    uint64_t rng = 42;
    static char buf[1 << 16];
    int made = 0;
    for (int i = 0; i < count; i++) {
        size_t n = 0;
        if (!ak_grammar_sample(g, &rng, 12, buf, sizeof buf, &n)) continue;
        made++;
        CHECK(sentence(g, m, buf, n, name), "%s: random sentence rejected: %.*s", name, (int)n, buf);
    }
    CHECK(made > count / 2, "%s: only %d of %d random sentences made", name, made, count);
    ak_gmatch_free(m);
}

/* ---- errors ---------------------------------------------------------------------- */

static void check_error(const char *text, const char *want) {
    ak_grammar *g = NULL;
    ak_err err = {{0}};
    ak_status st = ak_grammar_parse(text, strlen(text), NULL, &g, &err);
    CHECK(st == AK_ERR_FORMAT && !g, "should fail: %s", text);
    CHECK(strstr(err.msg, want) != NULL, "error \"%s\" lacks \"%s\" for: %s", err.msg, want, text);
    ak_grammar_free(g);
}

static void test_errors(void) {
    check_error("root ::= \"a\" b\n", "line 1, column 14: undefined rule 'b'");
    check_error("root ::= a\n\na ::= \"x\n", "line 3, column 7: unterminated string literal");
    check_error("root ::= [a-\n", "line 1, column 10: unterminated character class");
    check_error("root ::= (\"a\" | \"b\"\n", "line 2, column 1: expected ')'");
    check_error("root ::= \"a\")\n", "line 1, column 13: unmatched ')'");
    check_error("root = \"a\"\n", "line 1, column 6: expected '::='");
    check_error("a ::= \"x\"\n", "line 1, column 1: the grammar has no start rule 'root'");
    check_error("root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]\n",
                "line 2, column 10: left recursion through rule 'expr'");
    check_error("root ::= a\na ::= b? c\nc ::= \"\" a \"x\"\nb ::= \"y\"\n", "left recursion");
    check_error("root ::= (\"x\"?)*\n", "line 1, column 10: left recursion");
    check_error("root ::= \"a\"{1000000}\n", "line 1, column 14: repetition count too large");
    check_error("root ::= \"a\"{3,2}\n", "line 1, column 18: repetition {m,n} with n < m");
    check_error("root ::= * \"a\"\n", "line 1, column 10: repetition without anything to repeat");
    check_error("root ::= \"\\q\"\n", "line 1, column 11: unknown escape");
    check_error("root ::= [z-a]\n", "line 1, column 13: character range is reversed");
    check_error("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule defined twice");
    check_error("root ::= \"\\xZZ\"\n", "line 1, column 13: expected a hexadecimal digit");
    check_error("root ::= \"\xff\"\n", "line 1, column 11: invalid UTF-8");
    check_error("root ::= ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
                "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
                "(((((((((((((((((((((((((((((((((((((((((((\"a\"",
                "nested too deeply");
    /* repetitions of repetitions: refused by size, quickly */
    {
        char big[2048] = "root ::=";
        for (int i = 0; i < 40; i++) strcat(big, " \"a\"{0,65536}");
        strcat(big, "\n");
        check_error(big, "grammar too large");
    }
    /* a root given by name */
    ak_grammar *g = NULL;
    ak_err err = {{0}};
    CHECK(ak_grammar_parse("start ::= \"x\"\n", 14, "start", &g, &err) == AK_OK && g, "named root: %s", err.msg);
    ak_grammar_free(g);
}

/* ---- llama.cpp's grammars ---------------------------------------------------------- */

static char *read_text(const char *dir, const char *name, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return ak_read_file(path, n);
}

static void test_llama_grammars(void) {
    const char *dir = getenv("AKUNU_LLAMA_GRAMMARS");
    if (!dir || !*dir) {
        printf("note: AKUNU_LLAMA_GRAMMARS not set (tests/engine/llama_grammars.sh): llama.cpp's grammars skipped\n");
        return;
    }
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int n_files = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".gbnf")) continue;
        size_t n = 0;
        char *text = read_text(dir, de->d_name, &n);
        CHECK(text != NULL, "read %s", de->d_name);
        if (!text) continue;
        ak_grammar *g = NULL;
        ak_err err = {{0}};
        ak_status st = ak_grammar_parse(text, n, NULL, &g, &err);
        CHECK(st == AK_OK, "%s: %s", de->d_name, err.msg);
        if (g) check_random(g, de->d_name, 40);
        ak_grammar_free(g);
        free(text);
        n_files++;
    }
    closedir(d);
    CHECK(n_files >= 8, "only %d grammars in %s", n_files, dir);
    printf("llama.cpp grammars: %d parsed\n", n_files);
    for (size_t i = 0; i < sizeof llama_cases / sizeof *llama_cases; i++) {
        size_t n = 0;
        char *text = read_text(dir, llama_cases[i].name, &n);
        CHECK(text != NULL, "read %s", llama_cases[i].name);
        if (!text) continue;
        ak_grammar *g = NULL;
        ak_err err = {{0}};
        if (ak_grammar_parse(text, n, NULL, &g, &err) == AK_OK) check_case(g, &llama_cases[i]);
        ak_grammar_free(g);
        free(text);
    }
}

static void test_own_grammars(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ak_grammar *g = parse(cases[i].text ? cases[i].text : json_gbnf);
        if (!g) continue;
        check_case(g, &cases[i]);
        check_random(g, cases[i].name, 200);
        ak_grammar_free(g);
    }
}

/* ---- token masks ------------------------------------------------------------------- */

static ak_tokenizer *load_tok(const char *path) {
    ak_gguf *gg = NULL;
    ak_tokenizer *t = NULL;
    ak_err err = {{0}};
    if (ak_gguf_open(path, &gg, &err) || ak_tokenizer_load(gg, &t, &err)) t = NULL;
    ak_gguf_close(gg);
    return t;
}

static bool bit(const uint32_t *mask, int32_t t) { return mask[t >> 5] >> (t & 31) & 1; }

/* The brute-force mask: every token's piece (ak_tokenizer_piece, as the vocabulary reads
 * it) fed to a matcher without vocabulary at prefix s[0..n), one by one. */
static void brute_mask(const ak_grammar *g, const ak_tokenizer *tok, int n_vocab, const char *s, size_t n,
                       uint32_t *mask) {
    memset(mask, 0, (size_t)(n_vocab + 31) / 32 * 4);
    ak_gmatch *b = matcher(g, NULL);
    if (!b) return;
    CHECK(ak_gmatch_accept_bytes(b, s, n), "brute: prefix");
    bool end = ak_gmatch_can_end(b);
    int32_t nt = ak_tokenizer_n_vocab(tok);
    char piece[1024];
    for (int32_t t = 0; t < nt && t < n_vocab; t++) {
        size_t len = 0;
        if (ak_tokenizer_is_eog(tok, t)) {
            if (end) mask[t >> 5] |= 1u << (t & 31);
            continue;
        }
        if (ak_tokenizer_piece(tok, t, false, piece, sizeof piece, &len, NULL) || !len) continue;
        if (ak_gmatch_accept_bytes(b, piece, len)) {
            mask[t >> 5] |= 1u << (t & 31);
            ak_gmatch_reset(b);
            ak_gmatch_accept_bytes(b, s, n);
        }
    }
    ak_gmatch_free(b);
}

/* Masks along random sentences of g at up to max_states prefixes (every byte offset,
 * mid-character ones included, spread over the sentences): the mask equals the brute
 * force, counts its bits, and equals itself from the cache and from a fresh matcher. */
static void check_masks(const char *vname, const ak_tokenizer *tok, const ak_grammar *g, const char *gname,
                        const char *const *fixed, int max_states, uint64_t seed) {
    int n_vocab = ak_tokenizer_n_vocab(tok) + 7; /* padded rows, never allowed */
    ak_gvocab *v = NULL;
    ak_err err = {{0}};
    CHECK(ak_gvocab_create(tok, n_vocab, &v, &err) == AK_OK, "gvocab %s: %s", vname, err.msg);
    if (!v) return;
    CHECK(ak_gvocab_n_vocab(v) == n_vocab, "n_vocab");
    size_t words = (size_t)(n_vocab + 31) / 32;
    uint32_t *mask = malloc(words * 4), *again = malloc(words * 4), *ref = malloc(words * 4), *fresh = malloc(words * 4);
    ak_gmatch *m = matcher(g, v);
    static char buf[4096];
    int states = 0, in_string = 0, mid_char = 0, mismatches = 0;
    uint64_t rng = seed;
    int n_fixed = 0;
    while (fixed[n_fixed]) n_fixed++;
    for (int sent = 0; states < max_states && sent < 50 + n_fixed; sent++) {
        size_t n = 0;
        if (sent < n_fixed) {
            n = strlen(fixed[sent]);
            memcpy(buf, fixed[sent], n);
        } else if (!ak_grammar_sample(g, &rng, 6, buf, sizeof buf, &n)) {
            continue;
        }
        /* offsets: a few random ones per sentence, and the end */
        for (int k = 0; k < 6 && states < max_states; k++) {
            size_t at = k == 5 ? n : (size_t)(ak_rand_u32(&rng) % (n + 1));
            if (sent < n_fixed && k < 5) continue; /* a chosen prefix: its end only */
            ak_gmatch_reset(m);
            CHECK(ak_gmatch_accept_bytes(m, buf, at), "%s/%s: prefix of a sentence", vname, gname);
            int cnt = ak_gmatch_mask(m, mask);
            brute_mask(g, tok, n_vocab, buf, at, ref);
            int pop = 0, diff = 0;
            for (int32_t t = 0; t < n_vocab; t++) {
                pop += bit(mask, t);
                if (bit(mask, t) != bit(ref, t) && diff++ < 3)
                    CHECK(0, "%s/%s: token %d: mask %d, brute force %d after %zu bytes \"%.*s\"", vname, gname, t,
                          bit(mask, t), bit(ref, t), at, (int)at, buf);
            }
            mismatches += diff > 0;
            for (int32_t t = ak_tokenizer_n_vocab(tok); t < n_vocab; t++) CHECK(!bit(mask, t), "padded id %d allowed", t);
            CHECK(cnt == pop, "%s/%s: mask says %d allowed, %d bits", vname, gname, cnt, pop);
            /* cached, and fresh */
            CHECK(ak_gmatch_mask(m, again) == cnt && !memcmp(mask, again, words * 4), "%s/%s: cached mask differs", vname,
                  gname);
            ak_gmatch *f = matcher(g, v);
            if (f) {
                ak_gmatch_accept_bytes(f, buf, at);
                CHECK(ak_gmatch_mask(f, fresh) == cnt && !memcmp(mask, fresh, words * 4), "%s/%s: fresh mask differs",
                      vname, gname);
                ak_gmatch_free(f);
            }
            /* accept_token agrees with the mask on a few allowed tokens */
            for (int tries = 0, done = 0; tries < 200 && done < 3 && cnt; tries++) {
                int32_t t = (int32_t)(ak_rand_u32(&rng) % (uint32_t)n_vocab);
                if (!bit(mask, t)) {
                    CHECK(!ak_gmatch_accept_token(m, t), "%s/%s: accept_token %d outside the mask", vname, gname, t);
                    continue;
                }
                CHECK(ak_gmatch_accept_token(m, t), "%s/%s: accept_token %d inside the mask", vname, gname, t);
                ak_gmatch_reset(m);
                ak_gmatch_accept_bytes(m, buf, at);
                done++;
            }
            states++;
            in_string += at > 0 && cnt > ak_tokenizer_n_vocab(tok) / 2;
            mid_char += at > 0 && ((unsigned char)buf[at - 1] & 0xC0) && (at == n || ((unsigned char)buf[at] & 0xC0) == 0x80);
        }
    }
    printf("masks %s / %s: %d states (%d with most tokens allowed, %d mid-character), %d mismatched\n", vname, gname,
           states, in_string, mid_char, mismatches);
    ak_gmatch_free(m);
    free(mask), free(again), free(ref), free(fresh);
    ak_gvocab_free(v);
}

/* Grammars for the masks, each with chosen prefixes checked first. JSON's: inside
 * strings (a key, a value, in an array, nested; right after the quote, an escape, a
 * multi-byte character), mid-character, mid-escape. The others: loops over multi-byte
 * classes (bytes leave them mid-character, into another live class), a class another
 * top overlaps (no loop: its code points do not all lead to one state), loops after
 * loops. */
static const struct {
    const char *text, *fixed[16];
} mask_gbnf[] = {
    {NULL, /* json_gbnf */
     {"{\"key\": \"val", "[\"\\u00", "{\"a\": \"caf\xc3", "[1.5e", " {\"a\": tr", "[\"\xe4\xb8", "[\"x\", \"\xf0\x9f\x98",
      "{\"\\", "{\"", "[\"a\\n", "{\"k\": [{\"x\": \"\\u00e9", "[\"\xc3\xa9", "{\"a\": {\"b\": \"c d", "[[\"\xe4\xb8\xad",
      "{\"k\": \"v\", \"w\": \"\xf0\x9f\x98\x80 x"}},
    {"root ::= \"\xc3\xa9\" [\xe4\xb8\x80-\xe9\xbf\xbf]* [^a-z]{0,3} (\"\xf0\x9f\x98\x80\" | \"!\" | \" \")\n", {NULL}},
    {"root ::= ( [a-z ]+ \"\\n\" ){1,4}\n", {NULL}},
    {"root ::= ( [^\\u00e0-\\u00ff\\u4e00-\\u9fff\\n]* ( \"\\n\" | [\\u00e0-\\u00e9] \"!\" ) | [\\u4e00-\\u9fff]+ \".\" ){1,3}\n",
     {"ab", "", "x\n", "\xe4\xb8\xad", "\xe4\xb8\xad\xe6\x96\x87", "a\xc3", "\xc3\xa0!", "q \xe2\x82\xac"}},
    {"root ::= \"<\" [^>a]* ( \"a\" [^>]* )? \">\" ( [a-z]* [a-f0-9] )*\n", {"<", "<bc", "<ba", "<bab", "<x>", "<x>q"}},
};

static void test_masks(void) {
    static const struct {
        const char *name, *path;
        int states;
    } vocabs[] = {
        {"llama fixture", "llama/llama-f32.gguf", 60},
        {"gemma3 fixture", "gemma3/gemma3-f32.gguf", 60},
        {"qwen2.5", NULL, 40},
    };
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        ak_tokenizer *tok = NULL;
        if (vocabs[i].path) {
            tok = load_tok(ak_fixture(vocabs[i].path));
            CHECK(tok != NULL, "load %s", vocabs[i].path);
        } else {
            tok = load_tok(AK_MODELS "/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
            if (!tok) printf("note: no models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (scripts/get-model): its masks skipped\n");
        }
        if (!tok) continue;
        for (size_t k = 0; k < sizeof mask_gbnf / sizeof *mask_gbnf; k++) {
            ak_grammar *g = parse(mask_gbnf[k].text ? mask_gbnf[k].text : json_gbnf);
            if (g)
                check_masks(vocabs[i].name, tok, g, k ? "own" : "json", mask_gbnf[k].fixed,
                            k ? vocabs[i].states / 3 + 6 : vocabs[i].states + 8, 1000 + k);
            ak_grammar_free(g);
        }
        ak_tokenizer_free(tok);
    }
}

/* More states than the matcher keeps: its tables are dropped between calls (a flush)
 * and the walk goes on from the current state. */
static void test_many_states(void) {
    ak_grammar *g = parse("root ::= [a-c]{0,65536} \"!\"\n");
    if (!g) return;
    ak_gmatch *m = matcher(g, NULL);
    bool ok = true;
    for (int i = 0; i < 65536 && ok; i++) ok = ak_gmatch_accept_bytes(m, &"abc"[i % 3], 1);
    CHECK(ok, "65536 letters");
    CHECK(!ak_gmatch_accept_bytes(m, "a", 1), "a 65537th letter");
    CHECK(!ak_gmatch_can_end(m) && ak_gmatch_accept_bytes(m, "!", 1) && ak_gmatch_can_end(m), "the end");
    ak_gmatch_reset(m);
    CHECK(ak_gmatch_accept_bytes(m, "ab!", 3) && ak_gmatch_can_end(m), "after reset");
    ak_gmatch_free(m);
    ak_grammar_free(g);
}

int main(void) {
    test_errors();
    test_own_grammars();
    test_llama_grammars();
    test_masks();
    test_many_states();
    return ak_test_done();
}
