/* Internal session entry points (tests and tools): not part of the public API. */
#ifndef AK_SESSION_H
#define AK_SESSION_H
#include "akunu.h"
#include "core/sample.h"

/* As ak_session_create; unfused builds both tables from the unfused kernel variants. */
ak_status ak_session_create_ex(ak_model *m, const ak_session_params *p, bool unfused, ak_session **out, ak_err *err);
/* How the tables choose each token from now on (core/sample.h): NULL is argmax, the
 * default. AK_ERR_ARG for settings only the host sampler takes (top_k off or above
 * AK_SAMPLE_MAX_K, a longer penalty window). */
ak_status ak_session_set_sample(ak_session *s, const ak_sample_cfg *c, ak_err *err);
/* The allowed ids from now on (ceil(vocab / 32) words), or NULL for all. */
ak_status ak_session_set_mask(ak_session *s, const uint32_t *mask, ak_err *err);
/* The model's vocabulary as grammars see it, built at the first call and kept. */
typedef struct ak_gvocab ak_gvocab;
ak_status ak_session_gvocab(ak_session *s, const ak_gvocab **out, ak_err *err);
/* Speculative verification: ids[0..n) at positions pos..pos+n-1 in one pass; picks[i]
 * receives the table's choice for position pos+1+i (argmax or the sample command's
 * draw), logits (may be NULL) every row's n * vocab floats, and the cache then holds all n (rewind past a rejected draft). At most
 * ak_session_verify_rows(s) ids (AK_SPEC_MAX + 1, or the prefill chunk); the table is
 * built at the first call. */
int ak_session_verify_rows(const ak_session *s);
ak_status ak_session_verify(ak_session *s, const int32_t *ids, int n, int32_t *picks, float *logits, ak_err *err);
/* The model a session runs. */
const ak_model *ak_session_model(const ak_session *s);
/* The most tokens ak_generate decodes in one chain. It takes back those past a stop, so a
 * session's rings keep at least this many rows beyond the window (ak_session_keep). */
#define AK_CHAIN_MAX 64

#endif
