/* Shared pieces of the akunu command-line front end. */
#ifndef AK_CLI_H
#define AK_CLI_H
#include "akunu.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *model, *out, *prompt;
    int32_t *ids;
    int n_ids;
    int n_predict, chunk, threads, ctx;
    bool greedy, print_ids, verbose, decode, kv_f16;
    ak_backend_kind backend;
} ak_cli_opts;

/* Parses common options; returns 0 on success, prints a message and returns 2 on error. */
int ak_cli_parse(int argc, char **argv, ak_cli_opts *o, const char *usage);
/* Loads the model and creates a session from the options. */
int ak_cli_open(const ak_cli_opts *o, bool logits_all, ak_model **m, ak_session **s);
int ak_cmd_run(int argc, char **argv);
int ak_cmd_logits(int argc, char **argv);
int ak_cmd_bench(int argc, char **argv);

#endif
