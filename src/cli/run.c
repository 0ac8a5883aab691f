/* akunu run: prefill a prompt, then generate. With --prompt-ids the ids go in and
 * (--print-ids) come out; with -p the text is tokenized with the model's tokenizer,
 * wrapped in its chat template unless --raw, and the reply streams to stdout. */
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
    "  -c CTX  --chunk N  -t THREADS  --kv-f16|--kv-f32 (default: f16 on cuda, f32 on cpu)  --backend cpu|cuda|auto  -v\n";

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
    ak_generate_result r;
    rc = ak_generate(s, ids, n, &gp, ak_cli_print_piece, NULL, &r, &err) != AK_OK;
    printf("\n");
    if (rc) { fprintf(stderr, "akunu: %s\n", err.msg); goto done; }
    fprintf(stderr, "\n[prompt %d tokens, prefill %.1f tok/s | generated %d tokens, decode %.1f tok/s]\n", n,
            r.prefill_seconds > 0 ? n / r.prefill_seconds : 0.0, r.n_generated,
            r.decode_seconds > 0 ? r.n_generated / r.decode_seconds : 0.0);
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
