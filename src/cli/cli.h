/* Shared pieces of the akunu command-line front end. */
#ifndef AK_CLI_H
#define AK_CLI_H
#include "akunu.h"
#include <stdbool.h>
#include <stdint.h>

#include "engine/sampler.h"
#include "model/chat.h"
#include "model/tokenizer.h"

#define AK_CLI_MAX_PROMPTS 256

typedef struct {
    const char *model, *out, *file;
    const char *prompts[AK_CLI_MAX_PROMPTS]; /* -p, repeatable (embed takes several) */
    int n_prompts;
    int32_t *ids;
    int n_ids;
    int n_predict, chunk, threads, ctx;
    bool greedy, print_ids, verbose, decode, raw, json, no_normalize, seed_set;
    ak_kv_type kv;                 /* AUTO unless --kv-f16 / --kv-f32 */
    ak_backend_kind backend;
    ak_sampler_params sp;
    const char *stops[16];
    int n_stops;
} ak_cli_opts;

/* Parses common options; returns 0 on success, prints a message and returns 2 on error. */
int ak_cli_parse(int argc, char **argv, ak_cli_opts *o, const char *usage);
/* Loads the model and creates a session from the options. */
int ak_cli_open(const ak_cli_opts *o, bool logits_all, ak_model **m, ak_session **s);
/* The session's KV cache type as printed: "f16" or "f32". */
const char *ak_cli_kv_name(const ak_session *s);
int ak_cmd_run(int argc, char **argv);
int ak_cmd_logits(int argc, char **argv);
int ak_cmd_bench(int argc, char **argv);
int ak_cmd_tokenize(int argc, char **argv);
int ak_cmd_chat(int argc, char **argv);
int ak_cmd_embed(int argc, char **argv);
int ak_cmd_perplexity(int argc, char **argv);

/* The model's tokenizer (from its GGUF metadata); prints the error and returns NULL. */
ak_tokenizer *ak_cli_tokenizer(const ak_model *m);
/* Tokenizes into a malloc'd array; prints the error and returns NULL on failure. */
int32_t *ak_cli_tokenize(const ak_tokenizer *t, const char *text, bool add_special, bool parse_special, int *n);

/* Generation from a prompt already in the KV cache: first is the token the prefill
 * produced, logits its logits (sampling only). Streams text to stdout as it comes,
 * holding back what could start a stop string; stops at end of generation, a stop
 * string, n_predict tokens or the context's end. The reply text (malloc'd) and the
 * ids that entered the KV cache are returned for chat. */
typedef struct {
    char *text;
    size_t len;
    int n_gen;          /* tokens generated (including a final end-of-generation token) */
    int32_t *ids;       /* the generated ids; all but the last are in the KV cache */
    double seconds;     /* decode time */
} ak_cli_reply;

int ak_cli_generate(ak_session *s, const ak_tokenizer *t, const ak_cli_opts *o, ak_sampler *smp, int32_t first,
                    float *logits, ak_cli_reply *r);
double ak_cli_now(void);

/* The file's chat template and the BOS/EOS texts templates insert. Returns 1 when the
 * file has a template we render, 0 when it has none, -1 when its family is unknown
 * (err says why); in the last two cases ct is plain ChatML. */
typedef struct { ak_chat_template ct; char *bos, *eos; } ak_cli_chat;
int ak_cli_chat_open(const ak_model *m, const ak_tokenizer *t, ak_cli_chat *c, ak_err *err);
void ak_cli_chat_close(ak_cli_chat *c);
/* The conversation rendered with the generation prompt (malloc'd); prints the error and
 * returns NULL when the template rejects it. */
char *ak_cli_chat_render(const ak_cli_chat *c, const ak_chat_msg *msgs, int n);

#endif
