/* Token sampling on the host (the reference the table's sample command follows, in
 * core/sample.h): repetition, presence and frequency penalties, top-k, top-p, min-p,
 * temperature and a seeded draw over a logits array, with every buffer allocated once at
 * create; plus the stop-string scan a streaming front end needs. */
#ifndef AK_SAMPLER_H
#define AK_SAMPLER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"
#include "core/sample.h"

typedef struct ak_sampler ak_sampler;

/* The parameters are the public ak_sampling_params (akunu.h); AK_ERR_ARG for ones out
 * of range (NaN, negative window, infinite penalties). */
ak_status ak_sampling_check(const ak_sampling_params *p, ak_err *err);
ak_status ak_sampler_create(const ak_sampling_params *p, int vocab, ak_sampler **out, ak_err *err);
void ak_sampler_free(ak_sampler *s);
/* The sample command's settings for these parameters (mode ARGMAX when greedy without
 * penalties). */
ak_sample_cfg ak_sampler_cfg(const ak_sampling_params *p);
/* Forget the accepted tokens (the draws depend only on the seed and the position). */
void ak_sampler_reset(ak_sampler *s);

/* Pick the token at position index (its place in the context) from vocab logits, among
 * the ids mask allows (NULL: all). The penalties and the mask are applied to logits in
 * place; the filters order as llama.cpp's default chain: penalties, top-k, top-p, min-p
 * (on probabilities at temperature 1), then temperature and the draw, keyed by (seed,
 * index). Allocates nothing. Call ak_sampler_accept with the token that is actually used. */
int32_t ak_sampler_sample(ak_sampler *s, float *logits, int64_t index, const uint32_t *mask);
void ak_sampler_accept(ak_sampler *s, int32_t tok);

/* Stop strings over the text generated so far (text[0..n)). Returns true when one
 * occurs: *cut is where the earliest starts, the reply is text[0..cut). Otherwise
 * *cut = n and *hold is how many trailing bytes could be the start of a stop string:
 * stream text[0..n - hold) now and keep the rest until more text arrives. Empty or NULL
 * stop strings are ignored. */
bool ak_stop_scan(const char *text, size_t n, const char *const *stops, int n_stops, size_t *cut, size_t *hold);

#endif
