/* akunu detokenize: token ids back to text (control tokens shown with --special). */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>

static const char *usage = "usage: akunu detokenize -m FILE --ids ID,ID,... [--special]\n";

int ak_cli_detokenize(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (!o.ids) { fprintf(stderr, "akunu: give the ids with --ids\n%s", usage); return 2; }
    ak_model *m;
    ak_err err = {{0}};
    if (ak_model_load(o.model, &m, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); free(o.ids); return 1; }
    size_t n = 0;
    char *text = NULL;
    rc = 1;
    if (ak_detokenize(m, o.ids, o.n_ids, o.special, NULL, 0, &n, &err) == AK_OK && (text = malloc(n + 1)) &&
        ak_detokenize(m, o.ids, o.n_ids, o.special, text, n + 1, &n, &err) == AK_OK) {
        fwrite(text, 1, n, stdout);
        printf("\n");
        rc = 0;
    } else {
        fprintf(stderr, "akunu: %s\n", err.msg[0] ? err.msg : "out of memory");
    }
    free(text);
    free(o.ids);
    ak_model_free(m);
    return rc;
}
