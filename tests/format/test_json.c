/* The strict JSON parser: values, escapes (surrogate pairs), numbers, lookups; then
 * invalid documents, every truncation, depth limit, duplicate keys and random byte
 * mutations. Inputs are copied into exact-size heap buffers (no NUL after them), so a
 * read past the end shows under AddressSanitizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "format/json.h"
#include "test_util.h"

static ak_status parse(const char *text, size_t len, ak_json_doc **doc, ak_err *err) {
    char *buf = malloc(len ? len : 1);
    memcpy(buf, text, len);
    err->msg[0] = 0;
    ak_status st = ak_json_parse(buf, len, doc, err);
    free(buf); /* the document keeps no pointer into the text */
    return st;
}

static void test_values(void) {
    const char *t = " {\"a\": [1, -2, 3.5, 1e3, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808],"
                    " \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u0000z\", \"t\": true, \"f\": false,"
                    " \"n\": null, \"o\": {\"k\": {}}, \"e\": [], \"u\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"} \n";
    ak_json_doc *d;
    ak_err err;
    ak_status st = parse(t, strlen(t), &d, &err);
    CHECK(st == AK_OK, "valid document: %s", err.msg);
    if (st) return;
    const ak_json *r = ak_json_root(d), *a = ak_json_get(r, "a");
    CHECK(r->type == AK_JSON_OBJ && r->len == 8, "root object of 8 members: %zu", r->len);
    CHECK(a && a->type == AK_JSON_ARR && a->len == 8, "array of 8");
    int64_t i;
    double x;
    const ak_json *e = a->child;
    CHECK(ak_json_int(e, &i) && i == 1 && e->is_int, "1");
    e = e->next;
    CHECK(ak_json_int(e, &i) && i == -2, "-2");
    e = e->next;
    CHECK(!ak_json_int(e, &i) && ak_json_num(e, &x) && x == 3.5 && !e->is_int, "3.5");
    e = e->next;
    CHECK(ak_json_int(e, &i) && i == 1000 && !e->is_int, "1e3 is integral");
    e = e->next;
    CHECK(ak_json_int(e, &i) && i == 0, "-0");
    e = e->next;
    CHECK(e->is_int && e->i == INT64_MAX, "INT64_MAX exact");
    e = e->next;
    CHECK(e->is_int && e->i == INT64_MIN, "INT64_MIN exact");
    e = e->next;
    CHECK(!e->is_int && !ak_json_int(e, &i) && e->num == 9223372036854775808.0, "2^63 out of int64 range");
    const ak_json *s = ak_json_get(r, "s");
    const char want[] = "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\0z";
    CHECK(s && s->type == AK_JSON_STR && s->len == sizeof want - 1 && !memcmp(s->s, want, sizeof want - 1) && s->s[s->len] == 0,
          "escapes decode (len %zu)", s ? s->len : 0);
    CHECK(ak_json_str_is(ak_json_get(r, "u"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), "raw UTF-8 kept");
    bool b;
    CHECK(ak_json_bool(ak_json_get(r, "t"), &b) && b && ak_json_bool(ak_json_get(r, "f"), &b) && !b, "booleans");
    CHECK(ak_json_get(r, "n")->type == AK_JSON_NULL && !ak_json_bool(ak_json_get(r, "n"), &b), "null");
    const ak_json *o = ak_json_get(ak_json_get(r, "o"), "k");
    CHECK(o && o->type == AK_JSON_OBJ && o->len == 0 && !o->child, "empty object");
    CHECK(ak_json_get(r, "e")->len == 0, "empty array");
    CHECK(!ak_json_get(r, "missing") && !ak_json_get(a, "a") && !ak_json_get(NULL, "a"), "lookups that miss");
    CHECK(!ak_json_int(NULL, &i) && !ak_json_num(s, &x) && !ak_json_str_is(a, "a"), "typed reads of the wrong type");
    ak_json_free(d);

    const char *scalars[] = {"0", "-1.5e-3", "\"\"", "true", "null", " [ ] "};
    for (size_t k = 0; k < sizeof scalars / sizeof *scalars; k++) {
        st = parse(scalars[k], strlen(scalars[k]), &d, &err);
        CHECK(st == AK_OK, "scalar document %s: %s", scalars[k], err.msg);
        if (!st) ak_json_free(d);
    }
}

static void test_invalid(void) {
    const char *bad[] = {
        "", " ", "{", "}", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{'a':1}", "[1 2]", "01", "1.", ".5",
        "-", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity", "1e999", "tru", "nul", "True", "\"abc",
        "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\tb\"",
        "\"a\nb\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
        "\"\xc3\"", "\"\xe2\x82\"", "[1] x", "{\"a\":1}{", "{\"a\":1,\"a\":2}", "{\"b\":1,\"a\":2,\"b\":3}", "[\"\\",
        "\"\\", "[-]", "[1,2", "{\"a\":[}",
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ak_json_doc *d = NULL;
        ak_err err;
        ak_status st = parse(bad[k], strlen(bad[k]), &d, &err);
        CHECK(st == AK_ERR_FORMAT && err.msg[0] && !d, "invalid #%zu '%s' accepted (st %d)", k, bad[k], st);
        if (!st) ak_json_free(d);
    }
    /* embedded NUL in the text is not whitespace */
    ak_json_doc *d = NULL;
    ak_err err;
    CHECK(parse("[1]\0", 4, &d, &err) == AK_ERR_FORMAT, "NUL after the value");
    CHECK(parse("[1,\0 2]", 7, &d, &err) == AK_ERR_FORMAT, "NUL inside");
}

static void test_depth(void) {
    char buf[2 * AK_JSON_MAX_DEPTH + 4];
    for (int depth = AK_JSON_MAX_DEPTH - 1; depth <= AK_JSON_MAX_DEPTH + 1; depth++) {
        for (int i = 0; i < depth; i++) { buf[i] = '['; buf[2 * depth - 1 - i] = ']'; }
        ak_json_doc *d = NULL;
        ak_err err;
        ak_status st = parse(buf, (size_t)(2 * depth), &d, &err);
        if (depth <= AK_JSON_MAX_DEPTH) CHECK(st == AK_OK, "depth %d: %s", depth, err.msg);
        else CHECK(st == AK_ERR_FORMAT && strstr(err.msg, "deep"), "depth %d accepted", depth);
        ak_json_free(d);
    }
    /* far deeper than the limit: fails fast, no stack exhaustion */
    size_t n = 1 << 20;
    char *deep = malloc(n);
    memset(deep, '[', n);
    ak_json_doc *d = NULL;
    ak_err err;
    CHECK(ak_json_parse(deep, n, &d, &err) == AK_ERR_FORMAT, "a million brackets");
    free(deep);
}

/* Every strict prefix of an object document is invalid; random mutations never crash
 * and either parse or fail with a message. */
static void test_truncation_and_mutation(void) {
    const char *t = "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                    "\"data_offsets\":[0,24]},\"s\":\"\\u00e9\\ud83d\\ude00\",\"x\":[-1.25e+2,true,false,null]}";
    size_t n = strlen(t);
    int fails = 0;
    for (size_t cut = 0; cut < n; cut++) {
        ak_json_doc *d = NULL;
        ak_err err;
        ak_status st = parse(t, cut, &d, &err);
        CHECK(st == AK_ERR_FORMAT && err.msg[0], "prefix of %zu bytes accepted", cut);
        if (!st) ak_json_free(d);
    }
    uint64_t rng = 42;
    char *buf = malloc(n);
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, t, n);
        int k = 1 + (int)(ak_rand_u32(&rng) % 3);
        for (int j = 0; j < k; j++) buf[ak_rand_u32(&rng) % n] = (char)(ak_rand_u32(&rng) & 0xff);
        ak_json_doc *d = NULL;
        ak_err err;
        err.msg[0] = 0;
        ak_status st = ak_json_parse(buf, n, &d, &err);
        if (st) { fails++; CHECK(err.msg[0] && !d, "mutation failed without a message"); }
        else ak_json_free(d);
    }
    free(buf);
    printf("json: %d of 20000 mutations rejected\n", fails);
}

/* Many members (duplicate check sorts) and a big array. */
static void test_large(void) {
    size_t cap = 1 << 22, n = 0;
    char *buf = malloc(cap);
    n += (size_t)sprintf(buf + n, "{");
    for (int i = 0; i < 50000; i++) n += (size_t)sprintf(buf + n, "%s\"k%d\":[%d]", i ? "," : "", i, i);
    n += (size_t)sprintf(buf + n, "}");
    ak_json_doc *d = NULL;
    ak_err err;
    ak_status st = ak_json_parse(buf, n, &d, &err);
    CHECK(st == AK_OK && ak_json_root(d)->len == 50000, "50000 members: %s", err.msg);
    int64_t v;
    CHECK(st == AK_OK && ak_json_int(ak_json_get(ak_json_get(ak_json_root(d), "k49999"), "x"), &v) == false, "lookup");
    if (!st) {
        const ak_json *e = ak_json_get(ak_json_root(d), "k49999");
        CHECK(e && e->type == AK_JSON_ARR && ak_json_int(e->child, &v) && v == 49999, "last member");
    }
    ak_json_free(d);
    /* the same with one duplicate at the end */
    n -= 1;
    n += (size_t)sprintf(buf + n, ",\"k123\":0}");
    CHECK(ak_json_parse(buf, n, &d, &err) == AK_ERR_FORMAT && strstr(err.msg, "duplicate"), "duplicate among many: %s", err.msg);
    free(buf);
}

int main(void) {
    test_values();
    test_invalid();
    test_depth();
    test_truncation_and_mutation();
    test_large();
    return ak_test_done();
}
