/* Structured output in the public API: grammar checks, the JSON grammars (any object, a
 * JSON Schema), and the grammar of a tool call in the model's chat family's format. */
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "engine/grammar.h"
#include "engine/schema.h"
#include "model/chat.h"
#include "model/model.h"
#include "model/pyjson.h"

ak_status ak_grammar_check(const char *gbnf, ak_err *err) {
    if (!gbnf) return ak_fail(err, AK_ERR_ARG, "grammar: NULL");
    ak_grammar *g = NULL;
    ak_status st = ak_grammar_parse(gbnf, strlen(gbnf), NULL, &g, err);
    ak_grammar_free(g);
    if (!st) return AK_OK;
    char msg[sizeof err->msg];
    memcpy(msg, err->msg, sizeof msg);
    return ak_fail(err, AK_ERR_ARG, "grammar: %s", msg);
}

const char *ak_grammar_json_object(void) { return ak_schema_json_object_gbnf(); }

ak_status ak_json_schema_to_grammar(const char *schema, size_t len, char **gbnf, ak_err *err) {
    if (!schema || !gbnf) return ak_fail(err, AK_ERR_ARG, "json schema: NULL argument");
    *gbnf = NULL;
    return ak_schema_to_gbnf(schema, len, gbnf, err);
}

/* The schema of one call: {"name": NAME, KEY: the tool's parameters}, with the
 * parameters' $defs lifted to the top, where their "#/$defs/..." references point. */
static void call_schema(ak_sbuf *o, const ak_json *fn, const char *key) {
    const ak_json *name = ak_json_get(fn, "name"), *params = ak_json_get(fn, "parameters");
    ak_sbuf_puts(o, "{\"type\": \"object\", \"properties\": {\"name\": {\"const\": ");
    ak_pyjson_string(o, name->s, name->len);
    ak_sbuf_puts(o, "}, \"");
    ak_sbuf_puts(o, key);
    ak_sbuf_puts(o, "\": ");
    if (params && params->type == AK_JSON_OBJ) ak_pyjson_dump(o, params, 0);
    else ak_sbuf_puts(o, "{\"type\": \"object\"}");
    ak_sbuf_puts(o, "}, \"required\": [\"name\", \"");
    ak_sbuf_puts(o, key);
    ak_sbuf_puts(o, "\"]");
    static const char *const defs[] = {"$defs", "definitions"};
    for (int i = 0; i < 2; i++) {
        const ak_json *d = params ? ak_json_get(params, defs[i]) : NULL;
        if (!d) continue;
        ak_sbuf_puts(o, ", \"");
        ak_sbuf_puts(o, defs[i]);
        ak_sbuf_puts(o, "\": ");
        ak_pyjson_dump(o, d, 0);
    }
    ak_sbuf_puts(o, "}");
}

/* The call schemas of the tools (one of them, or the one named), as anyOf. */
static void tools_schema(ak_sbuf *o, const ak_json *tools, const char *name, const char *key) {
    ak_sbuf_puts(o, "{\"anyOf\": [");
    int k = 0;
    for (const ak_json *t = tools->child; t; t = t->next) {
        const ak_json *fn = ak_json_get(t, "function") ? ak_json_get(t, "function") : t;
        const ak_json *nm = ak_json_get(fn, "name");
        if (!nm || nm->type != AK_JSON_STR || (name && strcmp(nm->s, name))) continue;
        if (k++) ak_sbuf_puts(o, ", ");
        call_schema(o, fn, key);
    }
    ak_sbuf_puts(o, "]}");
}

ak_status ak_chat_tool_grammar(const ak_model *m, const char *tools, const char *name, char **gbnf, ak_err *err) {
    if (!m || !tools || !gbnf) return ak_fail(err, AK_ERR_ARG, "tool grammar: NULL argument");
    *gbnf = NULL;
    const char *fam = ak_model_chat_family(m);
    bool hermes = fam && (!strcmp(fam, "chatml") || !strcmp(fam, "qwen3")), llama = fam && !strcmp(fam, "llama3");
    if (!hermes && !llama)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "tool calls: the %s chat format has none", fam ? fam : "model's");
    ak_json_doc *doc = NULL;
    ak_status st = ak_json_parse(tools, strlen(tools), &doc, err);
    if (st) return ak_fail(err, AK_ERR_ARG, "tools: %s", err->msg);
    const ak_json *arr = ak_json_root(doc);
    int found = 0;
    for (const ak_json *t = arr->type == AK_JSON_ARR ? arr->child : NULL; t; t = t->next) {
        const ak_json *fn = ak_json_get(t, "function") ? ak_json_get(t, "function") : t;
        const ak_json *nm = ak_json_get(fn, "name");
        found += nm && nm->type == AK_JSON_STR && (!name || !strcmp(nm->s, name));
    }
    if (!found) {
        ak_json_free(doc);
        return ak_fail(err, AK_ERR_ARG, name ? "tools: no function named '%s'" : "tools: no function%s", name ? name : " in the list");
    }
    const char *key = hermes ? "arguments" : "parameters";
    ak_sbuf o = {0};
    tools_schema(&o, arr, name, key);   /* sized, then written */
    char *schema = malloc(o.len + 1);
    if (!schema) { ak_json_free(doc); return ak_fail(err, AK_ERR_NOMEM, "tool grammar: out of memory"); }
    ak_sbuf w = {schema, o.len + 1, 0};
    tools_schema(&w, arr, name, key);
    schema[w.len] = 0;
    ak_json_free(doc);
    char *inner = NULL;
    st = ak_schema_to_gbnf(schema, w.len, &inner, err);
    free(schema);
    if (st) return st;
    /* the schema's start rule becomes the call inside the family's frame */
    static const char head_h[] = "root ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n", head_l[] = "root ::= tool-call\n";
    const char *head = hermes ? head_h : head_l;
    size_t n = strlen(inner), hn = strlen(head);
    char *out = malloc(hn + n + 16);
    if (!out) { free(inner); return ak_fail(err, AK_ERR_NOMEM, "tool grammar: out of memory"); }
    memcpy(out, head, hn);
    size_t len = hn;
    for (size_t i = 0; i < n;) {   /* "root ::=" at a line start is renamed */
        if ((i == 0 || inner[i - 1] == '\n') && !strncmp(inner + i, "root ::=", 8)) {
            memcpy(out + len, "tool-call ::=", 13);
            len += 13;
            i += 8;
        } else {
            out[len++] = inner[i++];
        }
    }
    out[len] = 0;
    free(inner);
    *gbnf = out;
    return AK_OK;
}
