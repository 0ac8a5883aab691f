/* akunu tokenize: the ids the model's tokenizer gives a text (with BOS/EOS as the file
 * says and special-token text recognised, unless --no-bos / --no-special / --raw);
 * --pieces prints each id with its text. */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: akunu tokenize -m FILE -p TEXT [--no-bos] [--no-special] [--raw] [--pieces]\n"
    "  --no-bos      add no BOS/EOS      --no-special  special-token text (<|im_start|>) stays text\n"
    "  --raw         both                --pieces      one line per id with its text\n";

int ak_cli_tokenize(int argc, char **argv) {
    bool pieces = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--pieces")) { pieces = true; memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof *argv); argc--; i--; }
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (o.n_prompts != 1) { fprintf(stderr, "akunu: give the text with -p\n%s", usage); return 2; }
    ak_model *m;
    ak_err err = {{0}};
    if (ak_model_load(o.model, &m, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); return 1; }
    int n = 0;
    int32_t *ids = ak_cli_tokens(m, o.prompts[0], !(o.raw || o.no_bos), !(o.raw || o.no_special), &n);
    if (!ids) rc = 1;
    for (int i = 0; ids && i < n; i++) {
        if (!pieces) { printf(i ? ",%d" : "%d", ids[i]); continue; }
        char buf[512];
        size_t k = 0;
        if (ak_token_to_piece(m, ids[i], true, buf, sizeof buf, &k, &err)) k = 0;
        printf("%6d  '%.*s'\n", ids[i], (int)k, buf);
    }
    if (ids && !pieces) printf("\n");
    free(ids);
    ak_model_free(m);
    return rc;
}
