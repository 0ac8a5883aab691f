/* simple MODEL "QUESTION": the smallest program on akunu.h. It loads a model, renders
 * the question as a user chat message, and streams the greedy answer to stdout.
 *
 *   cc simple.c $(pkg-config --cflags --libs akunu) -o simple */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "akunu.h"

static int print_piece(const char *text, size_t len, void *user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;   /* non-zero would stop the generation */
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL \"QUESTION\"\n", argv[0]);
        return 2;
    }
    ak_err err = {"out of memory"};   /* what the malloc failures below report */
    ak_model *model = NULL;
    ak_session *session = NULL;
    char *prompt = NULL;
    int32_t *ids = NULL;
    int rc = 1;
    if (ak_model_load(argv[1], &model, &err)) goto fail;

    /* the question as the model's chat template wants it; a base model takes it as it is */
    ak_chat_message msg = {.role = "user", .content = argv[2]};
    bool templated = ak_chat_render(model, &msg, 1, true, &prompt, &err) == AK_OK;
    if (!templated) {
        if (!(prompt = malloc(strlen(argv[2]) + 1))) goto fail;
        strcpy(prompt, argv[2]);
    }

    /* a rendered template holds BOS and special tokens already; ask for the size first */
    int n = 0;
    if (ak_tokenize(model, prompt, strlen(prompt), !templated, templated, NULL, 0, &n, &err)) goto fail;
    if (!(ids = malloc((size_t)n * sizeof *ids))) goto fail;
    if (ak_tokenize(model, prompt, strlen(prompt), !templated, templated, ids, n, &n, &err)) goto fail;

    ak_session_params sp = ak_session_default_params();   /* CPU, the model's context up to 4096 */
    if (ak_session_create(model, &sp, &session, &err)) goto fail;
    ak_generate_params gp = ak_generate_default_params(); /* greedy, until the turn ends */
    gp.n_predict = 512;
    ak_generate_result res;
    if (ak_generate(session, ids, n, &gp, print_piece, NULL, &res, &err)) goto fail;
    printf("\n");
    rc = 0;
fail:
    if (rc) fprintf(stderr, "simple: %s\n", err.msg);
    free(ids);
    free(prompt);
    ak_session_free(session);
    ak_model_free(model);
    return rc;
}
