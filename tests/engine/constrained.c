/* Constrained generation end to end (test_constrained.py checks what this writes):
 * under a grammar every reply parses and follows it, from a random-weight fixture (which
 * writes garbage unless constrained) and from the real default model, sampled in the
 * table and by the host sampler, with JSON mode and ten JSON Schemas (bounded, so even a
 * random model must finish). Writes DIR/NAME.schema.json and the replies DIR/NAME.samples
 * (NUL-separated); fails here when a reply does not end its turn or is not JSON.
 * Usage: constrained DIR MODELS_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "format/json.h"
#include "test_util.h"

static const struct { const char *name, *schema, *ask; } schemas[] = {
    {"person", "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 8}, \"age\": {\"type\": "
               "\"integer\", \"minimum\": 0, \"maximum\": 120}}, \"required\": [\"name\", \"age\"], \"additionalProperties\": false}",
     "Alice is 31 years old. Give her name and age."},
    {"flags", "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"boolean\"}, \"b\": {\"type\": \"boolean\"}, \"c\": "
              "{\"type\": \"null\"}}, \"required\": [\"a\", \"b\"], \"additionalProperties\": false}",
     "Set a to true and b to false."},
    {"color", "{\"enum\": [\"red\", \"green\", \"blue\"]}", "What color is the sky?"},
    {"points", "{\"type\": \"array\", \"items\": {\"type\": \"integer\", \"minimum\": -5, \"maximum\": 5}, \"minItems\": 2, "
               "\"maxItems\": 3}",
     "List two or three small integers."},
    {"nested", "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 999}, \"tags\": "
               "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 4}, \"maxItems\": 2}, \"meta\": {\"type\": "
               "\"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"ok\"], \"additionalProperties\": "
               "false}}, \"required\": [\"id\", \"meta\"], \"additionalProperties\": false}",
     "Make a record with id 7 and a meta object."},
    {"any_of", "{\"anyOf\": [{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9}, {\"type\": \"string\", \"maxLength\": 3}, "
               "{\"type\": \"null\"}]}",
     "Give a digit."},
    {"formats", "{\"type\": \"object\", \"properties\": {\"day\": {\"type\": \"string\", \"format\": \"date\"}, \"uuid\": "
                "{\"type\": \"string\", \"format\": \"uuid\"}}, \"required\": [\"day\", \"uuid\"], \"additionalProperties\": false}",
     "Give today's date and a random UUID."},
    {"consts", "{\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"event\"}, \"level\": {\"enum\": [1, 2, 3, "
               "\"high\"]}}, \"required\": [\"kind\", \"level\"], \"additionalProperties\": false}",
     "Report an event of a high level."},
    {"tuple", "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\", \"maxLength\": 5}, {\"type\": \"boolean\"}], "
              "\"items\": false}",
     "Give a short word and whether it is a verb."},
    {"refs", "{\"$defs\": {\"small\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 50}}, \"type\": \"object\", "
             "\"properties\": {\"x\": {\"$ref\": \"#/$defs/small\"}, \"y\": {\"$ref\": \"#/$defs/small\"}}, \"required\": "
             "[\"x\", \"y\"], \"additionalProperties\": false}",
     "Give a point with x = 3 and y = 4."},
};
enum { N_SCHEMAS = sizeof schemas / sizeof *schemas };

static int no_op(const ak_token_info *t, void *user) {
    (void)t; (void)user;
    return 0;
}

typedef struct { char text[8192]; size_t len; } reply;

static int collect(const char *text, size_t len, void *user) {
    reply *r = user;
    if (r->len + len < sizeof r->text) memcpy(r->text + r->len, text, len), r->len += len;
    return 0;
}

/* The prompt: the chat template when the model has one, else the question as text. */
static int32_t *prompt(ak_model *m, const char *ask, int *n) {
    ak_chat_message msg = {.role = "user", .content = ask};
    char *text = NULL;
    ak_err err;
    bool chat = ak_chat_render(m, &msg, 1, true, &text, &err) == AK_OK;
    if (!chat) text = strdup(ask);
    int32_t *ids = malloc(4096 * sizeof *ids);
    if (!text || !ids || ak_tokenize(m, text, strlen(text), !chat, chat, ids, 4096, n, &err)) {
        CHECK(0, "prompt: %s", err.msg);
        free(ids);
        ids = NULL;
    }
    free(text);
    return ids;
}

/* count replies under grammar g into DIR/name.samples; each must end its turn and parse,
 * but for at most run_on of them, which may still be writing at n_predict tokens: an
 * unbounded grammar (JSON mode) lets a sampled model ramble inside a string, which is the
 * model's doing (such a reply is a prefix of the grammar by construction, and is left out
 * of the samples the schema check reads) */
static void run(ak_model *m, ak_session *s, const char *dir, const char *name, const char *g, const char *ask, int count,
                float temp, int n_predict, int run_on, const char *what) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.samples", dir, name);
    FILE *f = fopen(path, "ab");
    CHECK(f != NULL, "cannot write %s", path);
    int n = 0;
    int32_t *ids = prompt(m, ask, &n);
    if (!f || !ids) { if (f) fclose(f); free(ids); return; }
    int ended = 0, parsed = 0, ran_on = 0;
    for (int i = 0; i < count; i++) {
        ak_generate_params p = ak_generate_default_params();
        p.n_predict = n_predict;
        p.grammar = g;
        p.sampling = ak_sampling_default_params();
        p.sampling.temperature = i % 4 == 3 ? 0 : temp;
        p.sampling.seed = 1000u + (uint64_t)i;
        if (i % 3 == 1) p.on_token = no_op;   /* the host sampler under the mask */
        if (i % 5 == 2) p.sampling.repeat_penalty = 1.3f;
        reply r = {.len = 0};
        ak_generate_result res;
        ak_err err;
        if (ak_generate(s, ids, n, &p, collect, &r, &res, &err)) { CHECK(0, "%s %s: %s", what, name, err.msg); continue; }
        ended += res.stop == AK_STOP_EOG;
        ak_json_doc *d = NULL;
        bool ok = ak_json_parse(r.text, r.len, &d, &err) == AK_OK;
        parsed += ok;
        if (!ok || res.stop != AK_STOP_EOG)
            fprintf(stderr, "%s %s #%d (stop %d): %.*s\n", what, name, i, (int)res.stop, (int)r.len, r.text);
        ak_json_free(d);
        if (res.stop == AK_STOP_LENGTH && res.n_generated == n_predict && !ok) {
            ran_on++;
            continue;
        }
        fwrite(r.text, 1, r.len, f);
        fputc(0, f);
    }
    CHECK(ended + ran_on == count && parsed == ended && ran_on <= run_on,
          "%s %s: %d of %d replies ended their turn, %d parse, %d still writing at %d tokens (at most %d may)", what, name,
          ended, count, parsed, ran_on, n_predict, run_on);
    printf("%s %s: %d replies, %d ended, %d parse, %d still writing at %d tokens\n", what, name, count, ended, parsed, ran_on,
           n_predict);
    fclose(f);
    free(ids);
}

static void write_file(const char *dir, const char *name, const char *ext, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0, "cannot write %s", path);
    if (f) fclose(f);
}

/* JSON mode and the ten schemas on one model; per is the replies per schema. */
static void model(const char *path, const char *dir, const char *tag, int per, int json_n, float temp) {
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_err err;
    ak_session_params sp = ak_session_default_params();
    sp.n_ctx = 1024;
    if (ak_model_load(path, &m, &err) || ak_session_create(m, &sp, &s, &err)) {
        CHECK(0, "%s: %s", path, err.msg);
        ak_model_free(m);
        return;
    }
    char name[128];
    for (int k = 0; k < N_SCHEMAS; k++) {
        char *g = NULL;
        CHECK(ak_json_schema_to_grammar(schemas[k].schema, strlen(schemas[k].schema), &g, &err) == AK_OK, "%s: %s",
              schemas[k].name, err.msg);
        snprintf(name, sizeof name, "%s-%s", tag, schemas[k].name);
        write_file(dir, name, ".schema.json", schemas[k].schema);
        if (g) run(m, s, dir, name, g, schemas[k].ask, per, temp, 200, 0, tag);   /* bounded: every reply ends */
        free(g);
    }
    if (json_n) {
        snprintf(name, sizeof name, "%s-json_object", tag);
        write_file(dir, name, ".schema.json", "{\"type\": \"object\"}");
        run(m, s, dir, name, ak_grammar_json_object(),
            "Reply with a JSON object with three fields: the name, country and population of Paris.", json_n, temp, 400,
            json_n / 20, tag);
    }
    ak_session_free(s);
    ak_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: constrained DIR MODELS_DIR\n"); return 2; }
    char path[4096];
    /* a random-weight model: nothing but the grammar makes its replies JSON */
    model(ak_fixture("llama/llama-f32.gguf"), argv[1], "fixture", 10, 0, 1.0f);
    snprintf(path, sizeof path, "%s/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", argv[2]);
    model(path, argv[1], "qwen", 10, 100, 0.7f);   /* the temperature a chat client sends */
    return ak_test_done();
}
