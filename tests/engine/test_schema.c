/* JSON Schema to GBNF: for each schema, the grammar parses, hand-written valid instances
 * are accepted whole and invalid ones refused; random valid instances (generated from the
 * schema here) pass; random walks through the grammar give JSON that parses. Schema errors
 * come back as AK_ERR_*. `test_schema --dump DIR` writes the schemas and both kinds of
 * samples for test_schema.py, which checks them with Python's jsonschema. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/grammar.h"
#include "engine/schema.h"
#include "format/json.h"
#include "test_util.h"

typedef struct {
    const char *name, *schema;
    const char *valid[24], *invalid[24];
} tcase;

static const tcase cases[] = {
    {"person",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1},"
     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"email\":{\"type\":\"string\"},"
     "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},"
     "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
     {"{\"name\":\"Al\",\"age\":30}", "{\"name\":\"Al\",\"age\":0,\"tags\":[]}",
      "{\"name\":\"Al\",\"age\":150,\"email\":\"a@b\",\"tags\":[\"x\",\"y\",\"z\"]}",
      "{\n  \"name\": \"Al\",\n  \"age\": 7,\n  \"email\": \"\\u00e9\"\n}", "{ \"name\" : \"\xc3\xa9\" , \"age\" : 99 }"},
     {"{\"age\":30}", "{\"name\":\"Al\"}", "{\"name\":\"Al\",\"age\":30,\"x\":1}", "{\"name\":\"\",\"age\":1}",
      "{\"name\":\"Al\",\"age\":151}", "{\"name\":\"Al\",\"age\":-1}", "{\"name\":\"Al\",\"age\":030}",
      "{\"name\":\"Al\",\"age\":30,}", "{\"name\":\"Al\",\"age\":30,\"tags\":[\"a\",\"b\",\"c\",\"d\"]}",
      "{\"age\":30,\"name\":\"Al\"}", "{\"name\":\"Al\",,\"age\":1}", "{\"name\":\"Al\" \"age\":1}",
      "{\"name\":\"Al\",\"age\":1.5}", "{\"name\":\"Al\",\"age\":30}x", " {\"name\":\"Al\",\"age\":30}",
      "{\"name\":\"Al\",\"age\":30,\"tags\":[\"a\",]}", "{\"name\":\"A\nl\",\"age\":1}",
      "{\"name\":\"Al\",   \"age\":1}", "{\"name\":\"Al\",\"age\":1"}},
    {"all-optional",
     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
     "\"c\":{\"type\":\"integer\"}}}",
     {"{}", "{ }", "{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "{\"a\":1,\"c\":3}", "{\"b\":1,\"c\":2}", "{\"a\":1,\"b\":2}",
      "{\"a\":1,\"b\":2,\"c\":3}", "{\"a\":-0,\"b\":-12,\"c\":123456789012345678}"},
     {"{,\"a\":1}", "{\"a\":1,}", "{\"a\":1 \"b\":2}", "{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":1}", "{\"d\":1}",
      "{\"a\":1,,\"c\":1}", "{\"a\":1234567890123456789}", "{\"a\":+1}"}},
    {"interleaved",
     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
     "\"c\":{\"type\":\"integer\"},\"d\":{\"type\":\"integer\"},\"e\":{\"type\":\"integer\"}},"
     "\"required\":[\"d\",\"b\"]}",
     {"{\"b\":1,\"d\":2}", "{\"a\":0,\"b\":1,\"d\":2}", "{\"b\":1,\"c\":0,\"d\":2,\"e\":3}",
      "{\"a\":0,\"b\":1,\"c\":0,\"d\":2,\"e\":3}", "{\"b\":1,\"d\":2,\"e\":3}"},
     {"{\"a\":0,\"d\":2}", "{\"b\":1}", "{\"b\":1,\"d\":2,}", "{,\"b\":1,\"d\":2}", "{\"a\":0,\"b\":1,\"c\":0}",
      "{\"b\":1,\"c\":1,\"e\":1}", "{\"d\":2,\"b\":1}", "{}"}},
    {"nested",
     "{\"type\":\"object\",\"properties\":{\"address\":{\"type\":\"object\",\"properties\":{"
     "\"street\":{\"type\":\"string\"},\"number\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"street\"]},\"location\":{\"type\":\"object\",\"properties\":{\"lat\":{\"type\":\"number\"},"
     "\"lon\":{\"type\":\"number\"}},\"required\":[\"lat\",\"lon\"]}},\"required\":[\"address\",\"location\"]}",
     {"{\"address\":{\"street\":\"Main\"},\"location\":{\"lat\":1.5,\"lon\":-2e3}}",
      "{\"address\":{\"street\":\"Main\",\"number\":12},\"location\":{\"lat\":0,\"lon\":0.25}}",
      "{\n\t\"address\": {\n\t\t\"street\": \"x\"\n\t},\n\t\"location\": {\"lat\": 1, \"lon\": 2}\n}"},
     {"{\"address\":{},\"location\":{\"lat\":1,\"lon\":2}}", "{\"address\":{\"street\":\"x\",\"number\":0},"
      "\"location\":{\"lat\":1,\"lon\":2}}", "{\"address\":{\"street\":\"x\"}}",
      "{\"address\":{\"street\":\"x\"},\"location\":{\"lat\":1,\"lon\":2,\"alt\":3}}",
      "{\"address\":{\"street\":\"x\"},\"location\":{\"lat\":1.,\"lon\":2}}",
      "{\"address\":{\"street\":\"x\"},\"location\":{\"lat\":.5,\"lon\":2}}"}},
    {"array-bounds", "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}",
     {"[1,2]", "[1,2,3,4]", "[ 1 , 2 ]", "[\n  1,\n  2,\n  3\n]", "[-1,0]"},
     {"[]", "[1]", "[1,2,3,4,5]", "[1,2,]", "[01,2]", "[\"a\",1]", "[1 2]", "[,1,2]", "[1,2", "[1,2]]"}},
    {"enum",
     "{\"enum\":[\"red\",\"green\",\"blue\",42,null,true,{\"a\":[1,\"x\"]},\"quo\\\"te\",\"new\\nline\",-1.5,"
     "\"\xe6\x97\xa5\"]}",
     {"\"red\"", "\"green\"", "\"blue\"", "42", "null", "true", "{\"a\":[1,\"x\"]}", "{ \"a\" : [ 1 , \"x\" ] }",
      "\"quo\\\"te\"", "\"new\\nline\"", "-1.5", "\"\xe6\x97\xa5\""},
     {"\"Red\"", "43", "\"redd\"", "false", "{\"a\":[1]}", "\"red", "4", "\"new\nline\"", "{\"b\":[1,\"x\"]}"}},
    {"const",
     "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},\"r\":{\"type\":\"number\",\"minimum\":0}},"
     "\"required\":[\"kind\",\"r\"]}",
     {"{\"kind\":\"circle\",\"r\":1}", "{\"kind\":\"circle\",\"r\":0.5e-3}"},
     {"{\"kind\":\"square\",\"r\":1}", "{\"kind\":\"circle\",\"r\":-1}", "{\"kind\":\"circle\"}"}},
    {"anyof",
     "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"integer\",\"minimum\":10,\"maximum\":20},"
     "{\"type\":\"null\"}]}",
     {"\"abc\"", "\"\"", "10", "20", "15", "null", "\"\\u00e9\\n\\t\""},
     {"\"abcd\"", "9", "21", "true", "100", "-15", "1.5"}},
    {"ref-recursive",
     "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"integer\"},"
     "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"value\"]}},"
     "\"$ref\":\"#/$defs/node\"}",
     {"{\"value\":1}", "{\"value\":1,\"children\":[{\"value\":2,\"children\":[]},{\"value\":3}]}",
      "{\"value\":1,\"children\":[{\"value\":2,\"children\":[{\"value\":3,\"children\":[{\"value\":4}]}]}]}"},
     {"{\"children\":[]}", "{\"value\":1,\"children\":[{}]}", "{\"value\":1,\"children\":{}}"}},
    {"int-ranges",
     "{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"integer\",\"minimum\":0},"
     "\"n\":{\"type\":\"integer\",\"maximum\":-5},\"r\":{\"type\":\"integer\",\"minimum\":-40,\"maximum\":1234},"
     "\"x\":{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":10},"
     "\"b\":{\"type\":\"integer\",\"minimum\":1999,\"maximum\":2100}},\"required\":[\"p\",\"n\",\"r\",\"x\",\"b\"]}",
     {"{\"p\":0,\"n\":-5,\"r\":-40,\"x\":1,\"b\":1999}", "{\"p\":123456,\"n\":-100000,\"r\":1234,\"x\":9,\"b\":2100}",
      "{\"p\":7,\"n\":-6,\"r\":0,\"x\":5,\"b\":2024}", "{\"p\":10,\"n\":-99,\"r\":999,\"x\":2,\"b\":2000}"},
     {"{\"p\":-1,\"n\":-5,\"r\":0,\"x\":1,\"b\":2000}", "{\"p\":0,\"n\":-4,\"r\":0,\"x\":1,\"b\":2000}",
      "{\"p\":0,\"n\":5,\"r\":0,\"x\":1,\"b\":2000}", "{\"p\":0,\"n\":-5,\"r\":-41,\"x\":1,\"b\":2000}",
      "{\"p\":0,\"n\":-5,\"r\":1235,\"x\":1,\"b\":2000}", "{\"p\":0,\"n\":-5,\"r\":0,\"x\":0,\"b\":2000}",
      "{\"p\":0,\"n\":-5,\"r\":0,\"x\":10,\"b\":2000}", "{\"p\":0,\"n\":-5,\"r\":0,\"x\":1,\"b\":1998}",
      "{\"p\":0,\"n\":-5,\"r\":0,\"x\":1,\"b\":2101}", "{\"p\":0,\"n\":-5,\"r\":0,\"x\":1,\"b\":20000}",
      "{\"p\":00,\"n\":-5,\"r\":0,\"x\":1,\"b\":2000}", "{\"p\":0,\"n\":-05,\"r\":0,\"x\":1,\"b\":2000}"}},
    {"formats",
     "{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},"
     "\"t\":{\"type\":\"string\",\"format\":\"time\"},\"dt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},\"e\":{\"type\":\"string\",\"format\":\"email\"}},"
     "\"required\":[\"d\",\"t\",\"dt\",\"u\"]}",
     {"{\"d\":\"2024-02-29\",\"t\":\"23:59:60Z\",\"dt\":\"2024-01-01T00:00:00.123+05:30\","
      "\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
      "{\"d\":\"1999-12-31\",\"t\":\"08:00:00-01:00\",\"dt\":\"2024-01-01T00:00:00Z\","
      "\"u\":\"123E4567-E89B-12D3-A456-426614174000\",\"e\":\"a@b.c\"}"},
     {"{\"d\":\"2024-13-01\",\"t\":\"23:59:59Z\",\"dt\":\"2024-01-01T00:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
      "{\"d\":\"2024-01-01\",\"t\":\"24:00:00Z\",\"dt\":\"2024-01-01T00:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
      "{\"d\":\"2024-01-01\",\"t\":\"12:00:00\",\"dt\":\"2024-01-01T00:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
      "{\"d\":\"2024-01-01\",\"t\":\"12:00:00Z\",\"dt\":\"2024-01-01 00:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
      "{\"d\":\"2024-01-01\",\"t\":\"12:00:00Z\",\"dt\":\"2024-01-01T00:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-42661417400\"}",
      "{\"d\":\"2024-1-01\",\"t\":\"12:00:00Z\",\"dt\":\"2024-01-01T00:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}"}},
    {"type-array", "{\"type\":[\"string\",\"null\",\"integer\"]}", {"\"x\"", "null", "5", "-17", "\"\""},
     {"true", "1.5", "[]", "{}", "nul"}},
    {"tuple",
     "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"boolean\"}],"
     "\"items\":false,\"minItems\":2}",
     {"[\"a\",1]", "[\"a\",1,true]", "[ \"a\" , 1 , false ]"},
     {"[\"a\"]", "[\"a\",1,true,1]", "[1,\"a\"]", "[]", "[\"a\",1,]"}},
    {"tuple-rest",
     "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"}],\"items\":{\"type\":\"integer\",\"minimum\":0,"
     "\"maximum\":9},\"maxItems\":3}",
     {"[]", "[true]", "[false,1]", "[true,0,9]"}, {"[1]", "[true,10]", "[true,1,2,3]", "[true,-1]"}},
    {"additional-schema",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"],"
     "\"additionalProperties\":{\"type\":\"integer\"}}",
     {"{\"name\":\"x\"}", "{\"name\":\"x\",\"extra\":1,\"more\":2}"},
     {"{\"name\":\"x\",\"extra\":\"s\"}", "{}", "{\"name\":\"x\",\"extra\":1,}"}},
    {"free-object", "{\"type\":\"object\"}",
     {"{}", "{\"a\":[1,{\"b\":null}],\"c\":\"d\",\"e\":-1.5e+3}", "{\"a\":true,\"a\":false}"},
     {"[]", "{\"a\"}", "{\"a\":1,}", "{a:1}", "\"x\""}},
    {"map-of-bool", "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"}}",
     {"{}", "{\"x\":true,\"y\":false}"}, {"{\"x\":1}", "{\"x\":true,}"}},
    {"any", "{}", {"1", "\"s\"", "[1,[2,[3]]]", "{\"a\":{}}", "null", "-0.5"}, {"", "[", "tru", "{\"a\":1,}", "01"}},
    {"allof",
     "{\"allOf\":[{\"$ref\":\"#/$defs/base\"},{\"properties\":{\"extra\":{\"type\":\"boolean\"}},"
     "\"required\":[\"extra\"]}],\"$defs\":{\"base\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},"
     "\"required\":[\"id\"]}}}",
     {"{\"id\":1,\"extra\":true}"}, {"{\"id\":1}", "{\"extra\":true}", "{\"id\":1,\"extra\":true,\"z\":1}"}},
    {"string-length", "{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}",
     {"\"ab\"", "\"\\u00e9\\n\"", "\"\xe6\x97\xa5\xe6\x9c\xac\"", "\"abcd\"", "\"a\\\"\\\\\""},
     {"\"a\"", "\"abcde\"", "\"a\nb\"", "\"a\\xb\"", "\"\\u00g0ab\"", "ab"}},
    {"number", "{\"type\":\"number\"}", {"0", "-1.5", "1e10", "2.5E-3", "-0", "123.456e+7"},
     {"01", "1.", ".5", "+1", "--1", "NaN", "1e", "0x10", "1.5.2"}},
    {"nullable-defs",
     "{\"type\":\"object\",\"properties\":{\"p\":{\"$ref\":\"#/definitions/pt\"},\"q\":{\"type\":[\"object\",\"null\"],"
     "\"properties\":{\"z\":{\"type\":\"boolean\"}},\"required\":[\"z\"]}},\"required\":[\"p\",\"q\"],"
     "\"definitions\":{\"pt\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":2,\"maxItems\":2}}}",
     {"{\"p\":[1,2],\"q\":null}", "{\"p\":[1.5,-2],\"q\":{\"z\":true}}"},
     {"{\"p\":[1],\"q\":null}", "{\"p\":[1,2],\"q\":{}}", "{\"p\":[1,2,3],\"q\":null}"}},
    {"pattern", "{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3,5}(x|yz)?$\"}",
     {"\"AB-123\"", "\"XY-12345yz\"", "\"QQ-999x\""},
     {"\"A-123\"", "\"AB-12\"", "\"AB-123456\"", "\"ab-123\"", "\"AB-123z\"", "\"AB-123\\n\""}},
    {"pattern-search", "{\"type\":\"string\",\"pattern\":\"o\\\"k.[^a-c]\"}",
     {"\"o\\\"kxd\"", "\"zzo\\\"k\\\\dd\"", "\"\\u00e9o\\\"k\\tDD\"", "\"o\\\"k\\\"\\\"\""},
     {"\"o\\\"kxa\"", "\"o\\\"k\\nd\"", "\"ok\"", "\"xz\"", "\"o\\\"kx\""}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- a growable buffer ---- */

typedef struct {
    char *p;
    size_t n, cap;
} tb;

static void tb_put(tb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void tb_puts(tb *b, const char *s) { tb_put(b, s, strlen(s)); }
static void tb_printf(tb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void tb_printf(tb *b, const char *fmt, ...) {
    char t[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    tb_put(b, t, (size_t)n);
}

/* ---- random valid instances, from the schema ---- */

static uint64_t rng = 0x5eed;
static const tcase *g_case; /* for patterns: its valid strings are the generated ones */
static int rnd(int n) { return (int)(ak_rand_u32(&rng) % (uint32_t)n); }
static const ak_json *g_root;

static void gen_ws(tb *b) {
    int r = rnd(6);
    if (r == 1) tb_puts(b, " ");
    if (r == 2) {
        tb_puts(b, "\n");
        for (int i = rnd(6); i > 0; i--) tb_puts(b, rnd(2) ? " " : "\t");
    }
}

static void json_str(tb *b, const char *s, size_t n) {
    tb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') tb_printf(b, "\\%c", c);
        else if (c == '\n') tb_puts(b, "\\n");
        else if (c < 0x20) tb_printf(b, "\\u%04x", c);
        else tb_put(b, (const char *)&s[i], 1);
    }
    tb_puts(b, "\"");
}

static void put_json(tb *b, const ak_json *v) {
    switch (v->type) {
    case AK_JSON_NULL: tb_puts(b, "null"); break;
    case AK_JSON_BOOL: tb_puts(b, v->b ? "true" : "false"); break;
    case AK_JSON_NUM:
        if (v->is_int) tb_printf(b, "%lld", (long long)v->i);
        else tb_printf(b, "%.17g", v->num);
        break;
    case AK_JSON_STR: json_str(b, v->s, v->len); break;
    default:
        tb_puts(b, v->type == AK_JSON_OBJ ? "{" : "[");
        for (const ak_json *e = v->child; e; e = e->next) {
            if (e != v->child) tb_puts(b, ",");
            if (v->type == AK_JSON_OBJ) {
                json_str(b, e->key, e->key_len);
                tb_puts(b, ":");
            }
            put_json(b, e);
        }
        tb_puts(b, v->type == AK_JSON_OBJ ? "}" : "]");
    }
}

static const ak_json *tref(const ak_json *s) {
    const char *r = ak_json_get(s, "$ref")->s;
    if (!strcmp(r, "#")) return g_root;
    const char *slash = strrchr(r, '/');
    const ak_json *d = ak_json_get(g_root, "$defs");
    if (!d) d = ak_json_get(g_root, "definitions");
    return ak_json_get(d, slash + 1);
}

/* one code point each, as JSON text */
static const char *const pieces[] = {"a", "Z", "0", " ", "-", "\xc3\xa9", "\xe6\x97\xa5", "\\n", "\\\"", "\\\\",
                                     "\\u00e9", "\\/", "\\t", "~", "\\u0001"};

static void gen_string(tb *b, int mn, int mx) {
    if (mx < 0 || mx > mn + 8) mx = mn + 8;
    int n = mn + rnd(mx - mn + 1);
    tb_puts(b, "\"");
    for (int i = 0; i < n; i++) tb_puts(b, pieces[rnd((int)(sizeof pieces / sizeof pieces[0]))]);
    tb_puts(b, "\"");
}

static void gen(tb *b, const ak_json *s, int depth);

static void gen_any(tb *b, int depth) {
    switch (rnd(depth < 3 ? 7 : 5)) {
    case 0: tb_puts(b, "null"); break;
    case 1: tb_puts(b, rnd(2) ? "true" : "false"); break;
    case 2: tb_printf(b, "%d", rnd(2000) - 1000); break;
    case 3: tb_printf(b, "%d.%de%d", rnd(100), rnd(100), rnd(10)); break;
    case 4: gen_string(b, 0, 5); break;
    case 5:
        tb_puts(b, "[");
        for (int i = rnd(3); i >= 0; i--) {
            gen_ws(b);
            gen_any(b, depth + 1);
            gen_ws(b);
            if (i) tb_puts(b, ",");
        }
        tb_puts(b, "]");
        break;
    default:
        tb_puts(b, "{");
        gen_ws(b);
        for (int i = rnd(3); i > 0; i--) {
            tb_printf(b, "\"k%d\"", i);
            gen_ws(b);
            tb_puts(b, ":");
            gen_ws(b);
            gen_any(b, depth + 1);
            gen_ws(b);
            if (i > 1) tb_puts(b, ",");
        }
        tb_puts(b, "}");
    }
}

static double num_kw(const ak_json *s, const char *k, double def) {
    double d;
    return ak_json_num(ak_json_get(s, k), &d) ? d : def;
}

static void gen_object(tb *b, const ak_json *s, int depth) {
    const ak_json *list[8];
    int n = 0;
    const ak_json *all = ak_json_get(s, "allOf");
    if (all)
        for (const ak_json *m = all->child; m && n < 8; m = m->next) list[n++] = ak_json_get(m, "$ref") ? tref(m) : m;
    else list[n++] = s;
    tb_puts(b, "{");
    gen_ws(b);
    bool first = true;
    for (int k = 0; k < n; k++) {
        const ak_json *props = ak_json_get(list[k], "properties");
        for (const ak_json *p = props ? props->child : NULL; p; p = p->next) {
            bool req = false;
            for (int j = 0; j < n; j++) {
                const ak_json *r = ak_json_get(list[j], "required");
                for (const ak_json *e = r ? r->child : NULL; e; e = e->next) req |= ak_json_str_is(e, p->key);
            }
            if (!req && (depth > 3 || rnd(2))) continue;
            if (!first) {
                tb_puts(b, ",");
                gen_ws(b);
            }
            json_str(b, p->key, p->key_len);
            gen_ws(b);
            tb_puts(b, ":");
            gen_ws(b);
            gen(b, p, depth + 1);
            gen_ws(b);
            first = false;
        }
    }
    const ak_json *addl = ak_json_get(s, "additionalProperties");
    if ((addl && addl->type == AK_JSON_OBJ) || (!addl && !ak_json_get(s, "properties") && !all))
        for (int i = depth > 3 ? 0 : rnd(3); i > 0; i--) {
            if (!first) {
                tb_puts(b, ",");
                gen_ws(b);
            }
            tb_printf(b, "\"extra_%d\":", i);
            if (addl) gen(b, addl, depth + 1);
            else gen_any(b, depth + 1);
            first = false;
        }
    tb_puts(b, "}");
}

static void gen_array(tb *b, const ak_json *s, int depth) {
    const ak_json *pre = ak_json_get(s, "prefixItems"), *items = ak_json_get(s, "items");
    int np = pre ? (int)pre->len : 0;
    int mn = (int)num_kw(s, "minItems", 0), mx = (int)num_kw(s, "maxItems", -1);
    bool more = !(items && items->type == AK_JSON_BOOL && !items->b);
    if (!more && (mx < 0 || mx > np)) mx = np;
    if (mx < 0) mx = mn + 3;
    if (mx > mn + 3) mx = mn + 3;
    int n = depth > 3 ? mn : mn + rnd(mx - mn + 1);
    tb_puts(b, "[");
    const ak_json *e = pre ? pre->child : NULL;
    for (int i = 0; i < n; i++) {
        if (i) tb_puts(b, ",");
        gen_ws(b);
        if (e) gen(b, e, depth + 1), e = e->next;
        else if (items) gen(b, items, depth + 1);
        else gen_any(b, depth + 1);
        gen_ws(b);
    }
    tb_puts(b, "]");
}

static void gen_typed(tb *b, const ak_json *s, const char *t, int depth) {
    if (!strcmp(t, "object")) { gen_object(b, s, depth); return; }
    if (!strcmp(t, "array")) { gen_array(b, s, depth); return; }
    if (!strcmp(t, "boolean")) { tb_puts(b, rnd(2) ? "true" : "false"); return; }
    if (!strcmp(t, "null")) { tb_puts(b, "null"); return; }
    if (!strcmp(t, "integer")) {
        double lo = num_kw(s, "minimum", -1e6), hi = num_kw(s, "maximum", 1e6);
        lo = ak_json_get(s, "exclusiveMinimum") ? num_kw(s, "exclusiveMinimum", 0) + 1 : lo;
        hi = ak_json_get(s, "exclusiveMaximum") ? num_kw(s, "exclusiveMaximum", 0) - 1 : hi;
        if (hi - lo > 1e6) hi = lo + 1e6;
        long long v = (long long)lo + (rnd(4) ? rnd((int)(hi - lo) + 1) : rnd(2) ? 0 : (int)(hi - lo));
        tb_printf(b, "%lld", v);
        return;
    }
    if (!strcmp(t, "number")) {
        bool nonneg = ak_json_get(s, "minimum") != NULL;
        switch (rnd(4)) {
        case 0: tb_printf(b, "%d", rnd(1000) - (nonneg ? 0 : 500)); break;
        case 1: tb_printf(b, "%s%d.%d", !nonneg && rnd(2) ? "-" : "", rnd(100), rnd(1000)); break;
        case 2: tb_printf(b, "%d.%dE%s%d", rnd(10), rnd(10), rnd(2) ? "-" : "+", rnd(20)); break;
        default: tb_printf(b, "%de%d", rnd(10), rnd(5));
        }
        return;
    }
    const ak_json *f = ak_json_get(s, "format");
    if (ak_json_str_is(f, "date")) tb_printf(b, "\"%04d-%02d-%02d\"", rnd(10000), 1 + rnd(12), 1 + rnd(28));
    else if (ak_json_str_is(f, "time")) tb_printf(b, "\"%02d:%02d:%02d%s\"", rnd(24), rnd(60), rnd(60), rnd(2) ? "Z" : "+01:30");
    else if (ak_json_str_is(f, "date-time"))
        tb_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%dZ\"", rnd(10000), 1 + rnd(12), 1 + rnd(28), rnd(24), rnd(60), rnd(60), rnd(1000));
    else if (ak_json_str_is(f, "uuid"))
        tb_printf(b, "\"%08x-%04x-%04x-%04x-%04x%08x\"", ak_rand_u32(&rng), rnd(65536), rnd(65536), rnd(65536), rnd(65536),
                  ak_rand_u32(&rng));
    else if (ak_json_get(s, "pattern")) {
        int n = 0;
        while (g_case->valid[n]) n++;
        tb_puts(b, g_case->valid[rnd(n)]);
    } else gen_string(b, (int)num_kw(s, "minLength", 0), (int)num_kw(s, "maxLength", -1));
}

static void gen(tb *b, const ak_json *s, int depth) {
    if (s->type == AK_JSON_BOOL) { gen_any(b, depth); return; }
    const ak_json *v;
    if (ak_json_get(s, "$ref")) { gen(b, tref(s), depth); return; }
    if ((v = ak_json_get(s, "const"))) { put_json(b, v); return; }
    if ((v = ak_json_get(s, "enum"))) {
        const ak_json *e = v->child;
        for (int k = rnd((int)v->len); k > 0; k--) e = e->next;
        put_json(b, e);
        return;
    }
    if ((v = ak_json_get(s, "anyOf")) || (v = ak_json_get(s, "oneOf"))) {
        const ak_json *e = v->child;
        for (int k = rnd((int)v->len); k > 0; k--) e = e->next;
        gen(b, e, depth);
        return;
    }
    if (ak_json_get(s, "allOf")) { gen_object(b, s, depth); return; }
    const ak_json *t = ak_json_get(s, "type");
    if (!t) { gen_any(b, depth); return; }
    if (t->type == AK_JSON_STR) { gen_typed(b, s, t->s, depth); return; }
    const ak_json *e = t->child;
    for (int k = rnd((int)t->len); k > 0; k--) e = e->next;
    gen_typed(b, s, e->s, depth);
}

/* ---- random walks through the grammar ---- */

/* Bytes tried at each step, in random order; near the length limit closing bytes first. */
static bool walk(ak_gmatch *m, tb *out, int limit) {
    static const char closers[] = "\"]}0e";
    char alpha[100];
    int na = 0;
    for (int ch = 0x20; ch < 0x7f; ch++) alpha[na++] = (char)ch;
    alpha[na++] = '\n';
    alpha[na++] = '\t';
    ak_gmatch_reset(m);
    out->n = 0;
    tb_puts(out, "");
    while ((int)out->n < limit) {
        if (ak_gmatch_can_end(m) && rnd(out->n > 40 ? 3 : 8) == 0) return true;
        if (rnd(16) == 0 && ak_gmatch_accept_bytes(m, "\xc3\xa9", 2)) {
            tb_puts(out, "\xc3\xa9");
            continue;
        }
        bool moved = false;
        if ((int)out->n > limit / 3)
            for (const char *p = closers; *p && !moved; p++)
                if (ak_gmatch_accept_bytes(m, p, 1)) tb_put(out, p, 1), moved = true;
        for (int i = na - 1; i > 0 && !moved; i--) { /* a shuffle, tried as it goes */
            int j = rnd(i + 1);
            char t = alpha[i];
            alpha[i] = alpha[j], alpha[j] = t;
            if (ak_gmatch_accept_bytes(m, &alpha[i], 1)) tb_put(out, &alpha[i], 1), moved = true;
        }
        if (!moved && ak_gmatch_accept_bytes(m, &alpha[0], 1)) tb_put(out, &alpha[0], 1), moved = true;
        if (!moved) return ak_gmatch_can_end(m);
    }
    return false;
}

/* ---- driver ---- */

static bool accepts(ak_gmatch *m, const char *text) {
    ak_gmatch_reset(m);
    return ak_gmatch_accept_bytes(m, text, strlen(text)) && ak_gmatch_can_end(m);
}

static FILE *dump_open(const char *dir, int i, const char *what) {
    if (!dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/%02d-%s.%s", dir, i, cases[i].name, what);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    return f;
}

static void run_case(int i, const char *dump) {
    const tcase *tc = &cases[i];
    char *gbnf = NULL;
    ak_err err = {{0}};
    ak_status st = ak_schema_to_gbnf(tc->schema, strlen(tc->schema), &gbnf, &err);
    CHECK(st == AK_OK, "%s: convert: %s", tc->name, err.msg);
    if (st) return;
    ak_grammar *g = NULL;
    st = ak_grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err);
    CHECK(st == AK_OK, "%s: grammar: %s\n%s", tc->name, err.msg, gbnf);
    ak_gmatch *m = NULL;
    if (!st) st = ak_gmatch_create(g, NULL, &m, &err);
    CHECK(st == AK_OK, "%s: matcher: %s", tc->name, err.msg);
    if (st) goto out;
    for (int k = 0; tc->valid[k]; k++)
        CHECK(accepts(m, tc->valid[k]), "%s: refused valid %s\n%s", tc->name, tc->valid[k], gbnf);
    for (int k = 0; tc->invalid[k]; k++)
        CHECK(!accepts(m, tc->invalid[k]), "%s: accepted invalid %s\n%s", tc->name, tc->invalid[k], gbnf);
    ak_json_doc *doc;
    CHECK(ak_json_parse(tc->schema, strlen(tc->schema), &doc, &err) == AK_OK, "%s: schema JSON", tc->name);
    g_root = ak_json_root(doc);
    g_case = tc;
    FILE *fs = dump_open(dump, i, "schema.json"), *fv = dump_open(dump, i, "samples");
    if (fs) fputs(tc->schema, fs), fclose(fs);
    tb b = {0};
    for (int k = 0; k < 300; k++) { /* generated instances: the grammar must take them */
        b.n = 0;
        gen(&b, g_root, 0);
        bool ok = accepts(m, b.p);
        CHECK(ok, "%s: refused generated %s\n%s", tc->name, b.p, gbnf);
        if (fv) fwrite(b.p, 1, b.n + 1, fv);
    }
    int ended = 0;
    for (int k = 0; k < 150; k++) { /* grammar walks: JSON, and (test_schema.py) valid */
        if (!walk(m, &b, 400)) continue;
        ended++;
        ak_json_doc *d;
        st = ak_json_parse(b.p, b.n, &d, &err);
        CHECK(st == AK_OK, "%s: walk gave invalid JSON %s: %s", tc->name, b.p, err.msg);
        if (!st) ak_json_free(d);
        if (fv) fwrite(b.p, 1, b.n + 1, fv);
    }
    /* a search pattern needs its text by chance: walks rarely end there */
    CHECK(ended >= 10 || strstr(tc->name, "search"), "%s: only %d walks ended", tc->name, ended);
    if (fv) fclose(fv);
    free(b.p);
    ak_json_free(doc);
out:
    ak_gmatch_free(m);
    ak_grammar_free(g);
    free(gbnf);
}

static ak_status convert(const char *schema, ak_err *err) {
    char *g = NULL;
    ak_status st = ak_schema_to_gbnf(schema, strlen(schema), &g, err);
    if (!st) { /* whatever converts must parse */
        ak_grammar *gr = NULL;
        ak_err e2;
        CHECK(ak_grammar_parse(g, strlen(g), NULL, &gr, &e2) == AK_OK, "grammar of %.80s: %s", schema, e2.msg);
        ak_grammar_free(gr);
    }
    free(g);
    return st;
}

static void test_errors(void) {
    static const struct { const char *schema; ak_status st; const char *msg; } bad[] = {
        {"{", AK_ERR_FORMAT, "not JSON"},
        {"", AK_ERR_FORMAT, "not JSON"},
        {"{\"type\":\"string\"} x", AK_ERR_FORMAT, "not JSON"},
        {"{\"not\":{\"type\":\"string\"}}", AK_ERR_UNSUPPORTED, "\"not\""},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"multipleOf\":3}}}", AK_ERR_UNSUPPORTED, "multipleOf"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", AK_ERR_UNSUPPORTED, "uniqueItems"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", AK_ERR_UNSUPPORTED, "itself"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"null\"}]}},"
         "\"$ref\":\"#/$defs/a\"}", AK_ERR_UNSUPPORTED, "itself"},
        {"{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#\"}]}", AK_ERR_UNSUPPORTED, "itself"},
        {"{\"$ref\":\"#/$defs/missing\"}", AK_ERR_FORMAT, "points nowhere"},
        {"{\"$ref\":\"http://example.com/s.json\"}", AK_ERR_UNSUPPORTED, "not local"},
        {"{\"type\":\"strin\"}", AK_ERR_FORMAT, "unknown type"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", AK_ERR_UNSUPPORTED, "below"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", AK_ERR_UNSUPPORTED, "no integer"},
        {"{\"type\":\"string\",\"minLength\":100000}", AK_ERR_UNSUPPORTED, "minLength"},
        {"{\"type\":\"string\",\"minLength\":-1}", AK_ERR_FORMAT, "minLength"},
        {"{\"enum\":[]}", AK_ERR_FORMAT, "enum"},
        {"{\"pattern\":\"(?=a)b\"}", AK_ERR_UNSUPPORTED, "lookaround"},
        {"{\"pattern\":\"a{2,1}\"}", AK_ERR_UNSUPPORTED, "n < m"},
        {"{\"pattern\":\"(ab\"}", AK_ERR_UNSUPPORTED, "without ')'"},
        {"{\"pattern\":\"\\\\1\"}", AK_ERR_UNSUPPORTED, "escape"},
        {"{\"pattern\":\"[\xc3\xa9]\"}", AK_ERR_UNSUPPORTED, "ASCII"},
        {"{\"anyOf\":{}}", AK_ERR_FORMAT, "anyOf"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", AK_ERR_UNSUPPORTED, "allOf"},
        {"{\"allOf\":[{\"$ref\":\"#\"}]}", AK_ERR_UNSUPPORTED, "allOf"},
        {"false", AK_ERR_UNSUPPORTED, "false"},
        {"3", AK_ERR_FORMAT, "object or a boolean"},
        {"{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", AK_ERR_UNSUPPORTED, "false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ak_err err = {{0}};
        ak_status st = convert(bad[i].schema, &err);
        CHECK(st == bad[i].st, "error case %zu (%s): status %d, want %d (%s)", i, bad[i].schema, st, bad[i].st, err.msg);
        CHECK(strstr(err.msg, bad[i].msg) != NULL, "error case %zu: message \"%s\" lacks \"%s\"", i, err.msg, bad[i].msg);
    }
    ak_err err;
    char *g = (char *)1;
    CHECK(ak_schema_to_gbnf(NULL, 0, &g, &err) == AK_ERR_FORMAT && g == NULL, "empty schema");
    CHECK(ak_schema_to_gbnf("{}", 2, NULL, &err) == AK_ERR_ARG, "NULL out");

    /* bombs: a chain of $refs deeper than the limit, a huge enum, a doubling anyOf tower,
     * a long property list */
    tb b = {0};
    tb_puts(&b, "{\"$defs\":{");
    for (int i = 0; i < 300; i++)
        tb_printf(&b, "%s\"a%d\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a%d\"}}", i ? "," : "", i, i + 1);
    tb_puts(&b, ",\"a300\":{\"type\":\"null\"}},\"$ref\":\"#/$defs/a0\"}");
    CHECK(convert(b.p, &err) == AK_ERR_UNSUPPORTED && strstr(err.msg, "deeper"), "ref chain: %s", err.msg);
    b.n = 0;
    tb_puts(&b, "{\"enum\":[");
    for (int i = 0; i < 100000; i++) tb_printf(&b, "%s\"v%d\"", i ? "," : "", i);
    tb_puts(&b, "]}");
    CHECK(convert(b.p, &err) == AK_ERR_UNSUPPORTED && strstr(err.msg, "enum"), "huge enum: %s", err.msg);
    b.n = 0;
    tb_puts(&b, "{\"$defs\":{");
    for (int i = 0; i < 60; i++)
        tb_printf(&b, "%s\"d%d\":{\"type\":\"array\",\"items\":{\"anyOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":\"#/$defs/d%d\"}]}}",
                  i ? "," : "", i, i + 1, i + 1);
    tb_puts(&b, ",\"d60\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/d30\"}");
    CHECK(convert(b.p, &err) == AK_OK, "anyOf tower (refs are shared): %s", err.msg);
    b.n = 0;
    tb_puts(&b, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 2000; i++) tb_printf(&b, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    tb_puts(&b, "},\"required\":[\"p1999\"]}");
    CHECK(convert(b.p, &err) == AK_OK, "2000 properties: %s", err.msg);
    /* odd property names become rule names of [a-zA-Z0-9-] */
    CHECK(convert("{\"type\":\"object\",\"properties\":{\"a b::=\\\"|\":{\"type\":\"string\"},\"\":{\"type\":\"integer\"},"
                  "\"\xe6\x97\xa5\":{\"type\":\"boolean\"},\"-\":{\"type\":\"object\",\"properties\":{\"x\":{}}}},"
                  "\"required\":[\"\"]}", &err) == AK_OK, "odd names: %s", err.msg);
    free(b.p);
}

static void test_json_object(void) {
    const char *gbnf = ak_schema_json_object_gbnf();
    ak_grammar *g = NULL;
    ak_gmatch *m = NULL;
    ak_err err;
    CHECK(ak_grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err) == AK_OK, "json_object grammar: %s", err.msg);
    if (!g) return;
    CHECK(ak_gmatch_create(g, NULL, &m, &err) == AK_OK, "matcher: %s", err.msg);
    static const char *const ok[] = {"{}", "{\"a\":1}", "{\n  \"a\": [1, 2, {\"b\": null}],\n  \"c\": \"\\u00e9\"\n}"};
    static const char *const no[] = {"[]", "1", "\"s\"", "{\"a\":}", "{\"a\":1,}", "{\"a\":01}"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) CHECK(accepts(m, ok[i]), "json_object refused %s", ok[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) CHECK(!accepts(m, no[i]), "json_object accepted %s", no[i]);
    ak_gmatch_free(m);
    ak_grammar_free(g);
}

int main(int argc, char **argv) {
    const char *dump = argc == 3 && !strcmp(argv[1], "--dump") ? argv[2] : NULL;
    for (int i = 0; i < N_CASES; i++) run_case(i, dump);
    test_errors();
    test_json_object();
    return ak_test_done();
}
