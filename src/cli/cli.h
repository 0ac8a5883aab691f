/* Shared pieces of the akunu command-line front end. */
#ifndef AK_CLI_H
#define AK_CLI_H
#include <stdbool.h>
#include <stdint.h>
#include "akunu.h"

#define AK_CLI_MAX_PROMPTS 256

typedef struct {
    const char *model, *out, *file;
    const char *prompts[AK_CLI_MAX_PROMPTS]; /* -p, repeatable (embed takes several) */
    int n_prompts;
    int32_t *ids;
    int n_ids;
    int n_predict, chunk, threads, ctx;
    int chunks;                    /* perplexity: score the first N windows; 0: all */
    bool greedy, print_ids, verbose, decode, raw, json, no_normalize, seed_set;
    bool no_bos, no_special;       /* tokenizing user text: add no BOS/EOS; special-token text stays text */
    bool special;                  /* detokenize: show control tokens */
    bool print_prompt;             /* run: the prompt as rendered, to stderr (-v too) */
    ak_kv_type kv, kv_v;           /* K and V cache types: AUTO (V: as K) unless --kv, --kv-k, --kv-v */
    ak_backend_kind backend;
    ak_sampling_params sp;
    const char *stops[16];
    int n_stops;
    const char *grammar, *grammar_file, *schema_file;   /* run: --grammar, --grammar-file, --json-schema */
    int spec, draft_max;           /* run: --spec ngram (1) | draft (2), --draft-max */
    const char *draft_model;       /* --draft-model */
} ak_cli_opts;

/* Parses common options; returns 0 on success, prints a message and returns 2 on error. */
int ak_cli_parse(int argc, char **argv, ak_cli_opts *o, const char *usage);
/* Loads the model and creates a session from the options. */
int ak_cli_open(const ak_cli_opts *o, bool logits_all, ak_model **m, ak_session **s);
/* The session part of ak_cli_open for a model already loaded (freed, and *m NULL, on failure). */
int ak_cli_session(const ak_cli_opts *o, bool logits_all, ak_model **m, ak_session **s);
/* The session's KV cache type as printed: "f16" or "f32". */
const char *ak_cli_kv_name(const ak_session *s);
/* The subcommands. */
int ak_cli_run(int argc, char **argv);
int ak_cli_logits(int argc, char **argv);
int ak_cli_bench(int argc, char **argv);
int ak_cli_tokenize(int argc, char **argv);
int ak_cli_chat(int argc, char **argv);
int ak_cli_embed(int argc, char **argv);
int ak_cli_perplexity(int argc, char **argv);
int ak_cli_detokenize(int argc, char **argv);
/* The HTTP server, a front end of its own (src/server/), reached through the CLI. */
int ak_cli_serve(int argc, char **argv);

/* The AKUNU_* debug variables (SCALAR, NO_VNNI, ACT_F32, CUDA_PDL=0, CUDA_STATS,
 * CUDA_PROFILE, CUDA_TRACE=POS, CUDA_SKIP=LABELS) into ak_set_debug, logging to stderr. */
void ak_cli_debug_from_env(void);
/* Tokenizes into a malloc'd array; prints the error and returns NULL on failure. */
int32_t *ak_cli_tokens(const ak_model *m, const char *text, bool add_special, bool parse_special, int *n);
/* ak_generate's piece callback of the front end: the text to stdout as it comes. */
int ak_cli_print_piece(const char *text, size_t len, void *user);
/* The generation parameters the options give. */
ak_generate_params ak_cli_gen_params(const ak_cli_opts *o);
double ak_cli_now(void);
/* A whole file, NUL-terminated, its length in *n (malloc'd); NULL when it cannot be read. */
char *ak_cli_read_file(const char *path, size_t *n);

#endif
