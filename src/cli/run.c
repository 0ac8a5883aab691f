/* akunu run: prefill a prompt, then generate. With --prompt-ids the ids go in and
 * (--print-ids) come out; with -p the text is tokenized with the model's tokenizer,
 * wrapped in its chat template unless --raw, and the reply streams to stdout, following a
 * grammar when asked (--json, --json-schema, --grammar, --grammar-file). */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: akunu run -m FILE (-p TEXT | --prompt-ids ID,ID,...) [-n N] [options]\n"
    "  -p TEXT            prompt text (wrapped in the model's chat template unless --raw;\n"
    "                     --no-bos: no BOS before a raw prompt; -v or --print-prompt shows it)\n"
    "  --prompt-ids IDS   prompt as token ids; --print-ids prints the generated ids\n"
    "  -n N               tokens to generate (default 256)\n"
    "  --greedy | --temp T --top-k K --top-p P --min-p P --repeat-penalty R --presence-penalty P\n"
    "             --frequency-penalty F --repeat-last-n N --seed S\n"
    "  --stop STR         stop when STR appears (repeatable)\n"
    "  --json | --json-schema FILE | --grammar GBNF | --grammar-file FILE\n"
    "                     the reply is a JSON object / validates against the schema / follows the GBNF grammar\n"
    "                     (llama.cpp's format); a thinking model (Qwen3) reasons freely up to </think> first\n"
    "  --spec ngram|draft [--draft-max K] [--draft-model FILE]\n"
    "                     speculative decoding: K drafted tokens checked in one pass (the same reply, fewer\n"
    "                     passes), drafted by prompt lookup (ngram, K 10) or a smaller model (draft, K 8)\n"
    "  -c CTX  --chunk N  -t THREADS  --kv f32|f16|q8_0|q4_0 (K and V; --kv-k, --kv-v: one; default f16 on cuda, f32 on cpu)  --backend cpu|cuda|auto  -v\n";

/* Prompt text for one user turn: the chat template when the file has one we render;
 * a file without one (a base model) gets the prompt as it is. */
static char *prompt_text(const ak_model *m, const char *user, bool raw, bool *templated) {
    *templated = false;
    if (raw) return strdup(user);
    ak_err err = {{0}};
    ak_chat_message msg = {.role = "user", .content = user};
    char *out = NULL;
    if (ak_chat_render(m, &msg, 1, true, &out, &err) == AK_OK) {
        *templated = true;
        return out;
    }
    if (ak_model_chat_template(m)) fprintf(stderr, "akunu: %s; using the prompt as it is (--raw)\n", err.msg);
    return strdup(user);
}

static char *read_text(const char *path) {
    size_t n;
    char *t = ak_cli_read_file(path, &n);
    if (!t) fprintf(stderr, "akunu: cannot read %s\n", path);
    return t;
}

/* The grammar the options ask for (malloc'd) in *out, NULL when none; 0 or an exit code. */
static int grammar_of(const ak_cli_opts *o, char **out) {
    *out = NULL;
    int given = !!o->grammar + !!o->grammar_file + !!o->schema_file + o->json;
    if (given > 1) { fprintf(stderr, "akunu: give one of --json, --json-schema, --grammar, --grammar-file\n"); return 2; }
    ak_err err = {{0}};
    char *g = NULL;
    if (o->json) g = strdup(ak_grammar_json_object());
    else if (o->grammar) g = strdup(o->grammar);
    else if (o->grammar_file && !(g = read_text(o->grammar_file))) return 1;
    else if (o->schema_file) {
        char *schema = read_text(o->schema_file);
        if (!schema) return 1;
        ak_status st = ak_json_schema_to_grammar(schema, strlen(schema), &g, &err);
        free(schema);
        if (st) { fprintf(stderr, "akunu: %s: %s\n", o->schema_file, err.msg); return 1; }
    }
    if (!given) return 0;
    if (!g) { fprintf(stderr, "akunu: out of memory\n"); return 1; }
    if (ak_grammar_check(g, &err)) {
        fprintf(stderr, "akunu: %s%s%s\n", o->grammar_file ? o->grammar_file : "", o->grammar_file ? ": " : "", err.msg);
        free(g);
        return 1;
    }
    *out = g;
    return 0;
}

static int run_text(const ak_cli_opts *o, ak_model *m, ak_session *s) {
    bool templated;
    char *text = prompt_text(m, o->prompts[0], o->raw, &templated);
    int n = 0, rc = 1;
    /* a rendered template already holds the BOS text; parse its special tokens */
    int32_t *ids = text ? ak_cli_tokens(m, text, !templated && !o->no_bos, templated, &n) : NULL;
    ak_err err = {{0}};
    if (!ids) goto done;
    if (o->print_prompt) fprintf(stderr, "akunu: the prompt (%d tokens%s):\n%s\n", n, templated ? ", chat template" : "", text);
    if (n == 0) { fprintf(stderr, "akunu: the prompt is empty\n"); goto done; }
    if (n >= ak_session_n_ctx(s)) {
        fprintf(stderr, "akunu: the prompt is %d tokens; the context holds %d (raise -c)\n", n, ak_session_n_ctx(s));
        goto done;
    }
    ak_generate_params gp = ak_cli_gen_params(o);
    char *grammar = NULL;
    if ((rc = grammar_of(o, &grammar))) goto done;
    rc = 1;
    gp.grammar = grammar;
    const char *fam = ak_model_chat_family(m);
    if (grammar && templated && fam && !strcmp(fam, "qwen3")) gp.grammar_after = "</think>";   /* it thinks first */
    ak_model *dm = NULL;
    ak_session *ds = NULL;
    if (o->spec == 2) {
        ak_session_params dp = ak_session_default_params();
        dp.n_ctx = ak_session_n_ctx(s);
        dp.n_threads = o->threads;
        dp.backend = o->backend;
        dp.kv_type = o->kv;
        dp.kv_type_v = o->kv_v;
        if (ak_model_load(o->draft_model, &dm, &err) || ak_session_create(dm, &dp, &ds, &err)) {
            fprintf(stderr, "akunu: draft model %s: %s\n", o->draft_model, err.msg);
            free(grammar);
            ak_model_free(dm);
            goto done;
        }
    }
    gp.spec_draft = o->spec ? o->draft_max : 0;
    gp.draft = ds;
    ak_generate_result r;
    rc = ak_generate(s, ids, n, &gp, ak_cli_print_piece, NULL, &r, &err) != AK_OK;
    free(grammar);
    ak_session_free(ds);
    ak_model_free(dm);
    printf("\n");
    if (rc) { fprintf(stderr, "akunu: %s\n", err.msg); goto done; }
    fprintf(stderr, "\n[prompt %d tokens, prefill %.1f tok/s | generated %d tokens, decode %.1f tok/s]\n", n,
            r.prefill_seconds > 0 ? n / r.prefill_seconds : 0.0, r.n_generated,
            r.decode_seconds > 0 ? r.n_generated / r.decode_seconds : 0.0);
    if (o->spec)
        fprintf(stderr, "[speculative: %d drafted, %d accepted (%.0f%%)]\n", r.n_drafted, r.n_accepted,
                r.n_drafted ? 100.0 * r.n_accepted / r.n_drafted : 0.0);
done:
    free(ids);
    free(text);
    return rc;
}

static int run_ids(const ak_cli_opts *o, ak_model *m, ak_session *s) {
    ak_err err = {{0}};
    int32_t next, *out = malloc(((size_t)o->n_predict + 1) * sizeof *out);
    int n_out = 0, rc = 0;
    if (!out) { fprintf(stderr, "akunu: out of memory\n"); return 1; }
    if (o->n_ids + o->n_predict > ak_session_n_ctx(s)) {
        fprintf(stderr, "akunu: prompt (%d tokens) plus %d to generate exceed the context of %d\n", o->n_ids, o->n_predict,
                ak_session_n_ctx(s));
        free(out);
        return 1;
    }
    if (ak_prefill(s, o->ids, o->n_ids, &next, NULL, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); free(out); return 1; }
    if (o->n_predict > 0) {
        out[0] = next;
        n_out = 1;
        int32_t eos = ak_token_eos(m);
        int more = 0;
        if (next != eos && o->n_predict > 1 &&
            ak_chain_decode(s, next, o->n_predict - 1, &eos, eos >= 0, out + 1, &more, &err)) {
            fprintf(stderr, "akunu: %s\n", err.msg);
            rc = 1;
        }
        n_out += more;
    }
    if (!rc && o->print_ids) {
        for (int i = 0; i < n_out; i++) printf(i ? ",%d" : "%d", out[i]);
        printf("\n");
    }
    free(out);
    return rc;
}

int ak_cli_run(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (!o.ids == !o.n_prompts) { fprintf(stderr, "akunu: give one of -p TEXT or --prompt-ids\n%s", usage); free(o.ids); return 2; }
    if (o.ids && (o.json || o.grammar || o.grammar_file || o.schema_file)) {
        fprintf(stderr, "akunu: a grammar needs a text prompt (-p)\n");
        free(o.ids);
        return 2;
    }
    if (o.ids) o.greedy = true;   /* ids in, ids out: the on-device argmax */
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, false, &m, &s))) { free(o.ids); return rc; }
    rc = o.ids ? run_ids(&o, m, s) : run_text(&o, m, s);
    free(o.ids);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
