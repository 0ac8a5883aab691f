/* The decoder fixtures (../shared/fixtures/hf) for the end-to-end tests of each backend:
 * the manifest's prompt and greedy continuations, Hugging Face's float32 logits, and
 * sessions run over the prompt. Failures go through CHECK (test_util.h). */
#ifndef AK_FIXTURE_UTIL_H
#define AK_FIXTURE_UTIL_H
#include "akunu.h"
#include <stdbool.h>
#include <stdint.h>

extern const char *const ak_fx_models[];
extern const int ak_fx_n_models;

/* Storage types and their tolerance: rel L2 against Hugging Face over all positions. */
typedef struct { const char *type; double tol; } ak_fx_type;
extern const ak_fx_type ak_fx_types[];
extern const int ak_fx_n_types;

typedef struct {
    char *manifest;
    int32_t prompt[64];
    int n_prompt;
    ak_backend_kind backend;
} ak_fx;

/* Reads the manifest and its prompt; false (and a failed check) if they are missing. */
bool ak_fx_open(ak_fx *f, ak_backend_kind backend);
void ak_fx_close(ak_fx *f);
/* Calls fn for every fixture model and storage type with the model loaded and the
 * model's Hugging Face logits (n_prompt x 512 floats). */
typedef void (*ak_fx_fn)(const ak_fx *f, const char *name, const ak_fx_type *ty, ak_model *m, const float *ref);
void ak_fx_each(const ak_fx *f, ak_fx_fn fn);
/* Logits of every prompt position, from one prefill in chunks of CHUNK (0: the default)
 * or from one decode step per token; the unfused table if asked. NULL on failure. */
float *ak_fx_logits(const ak_fx *f, ak_model *m, int chunk, bool decode, bool unfused, ak_kv_type kv);
/* Prefill + chain decode give the manifest's greedy continuation; chain decode equals
 * single decode steps; a stop token ends the chain right after it. */
void ak_fx_greedy(const ak_fx *f, ak_model *m, const char *name, const char *type, ak_kv_type kv);
/* A session of these parameters (the rest default); NULL and a failed check naming
 * `what` if it cannot be made. */
ak_session *ak_fx_session(ak_model *m, ak_backend_kind backend, int n_ctx, int chunk, ak_kv_type kv, bool logits_all,
                          const char *what);
/* The logits after one more id `next` through s (its cache as it stands, e.g. after
 * rejected drafts were taken back) into a, and a fresh session's over all of s's ids and
 * `next` into b (both vocab floats); false and a failed check if either fails. */
bool ak_fx_next_logits(ak_session *s, ak_session *fresh, int32_t next, float *a, float *b);
/* AK_KV_AUTO resolves to `want` on this backend and gives the same logits, bit for bit;
 * a KV type outside the enum is refused with a message. */
void ak_fx_kv_auto(const ak_fx *f, ak_model *m, ak_kv_type want);
#endif
