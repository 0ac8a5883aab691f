/* akunu run: prefill a prompt, then chain-decode the continuation. */
#include "cli/cli.h"
#include <stdio.h>
#include <stdlib.h>

static const char *usage =
    "usage: akunu run -m FILE --prompt-ids ID,ID,... [-n N] [--greedy] [--print-ids] [--chunk N] [-t THREADS] [--backend cpu|cuda|auto]\n"
    "                 [-c CTX] [--kv-f16] [-v]\n";

int ak_cmd_run(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (!o.ids) { fprintf(stderr, "akunu: --prompt-ids is required (text prompts need a tokenizer)\n%s", usage); return 2; }
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, false, &m, &s))) { free(o.ids); return rc; }
    ak_err err = {{0}};
    int32_t next, *out = malloc(((size_t)o.n_predict + 1) * sizeof *out);
    int n_out = 0;
    if (!out) { rc = 1; fprintf(stderr, "akunu: out of memory\n"); goto done; }
    if (o.n_ids + o.n_predict > ak_session_n_ctx(s)) {
        fprintf(stderr, "akunu: prompt (%d tokens) plus %d to generate exceed the context of %d\n", o.n_ids, o.n_predict, ak_session_n_ctx(s));
        rc = 1;
        goto done;
    }
    if (ak_prefill(s, o.ids, o.n_ids, &next, NULL, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); rc = 1; goto done; }
    if (o.n_predict > 0) {
        out[0] = next;
        n_out = 1;
        int eos = ak_model_eos(m), more = 0;
        if (next != eos && o.n_predict > 1) {
            if (ak_chain_decode(s, next, o.n_predict - 1, &eos, eos >= 0, out + 1, &more, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); rc = 1; goto done; }
        }
        n_out += more;
    }
    if (o.print_ids) {
        for (int i = 0; i < n_out; i++) printf(i ? ",%d" : "%d", out[i]);
        printf("\n");
    }
done:
    free(out);
    free(o.ids);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
