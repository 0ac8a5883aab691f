/* The host sampler: the public sampling parameters checked and turned into the sample
 * command's settings (core/sample.h), a ring of recent ids for the penalties, and the
 * buffers the reference pick needs, sized for the vocabulary once at create. */
#include "engine/sampler.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"

struct ak_sampler {
    ak_sampling_params p;
    ak_sample_cfg cfg;
    int vocab;
    ak_sample_cand *cands; /* [vocab] candidates of one draw */
    int32_t *count;        /* [vocab] occurrences in the window during a draw, all zero between draws */
    int32_t *history;      /* ring of the last penalty_last_n accepted tokens */
    int n_hist, head;
};

ak_sampling_params ak_sampling_default_params(void) {
    return (ak_sampling_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                .repeat_penalty = 1.0f, .penalty_last_n = 64, .seed = 0};
}

static bool penalties_on(const ak_sampling_params *p) {
    return (p->repeat_penalty != 0 && p->repeat_penalty != 1) || p->presence_penalty != 0 || p->frequency_penalty != 0;
}

ak_sample_cfg ak_sampler_cfg(const ak_sampling_params *p) {
    ak_sample_cfg c;
    memset(&c, 0, sizeof c);
    bool greedy = p->temperature <= 0 || p->top_k == 1;
    c.mode = greedy ? (penalties_on(p) ? AK_SAMPLE_GREEDY : AK_SAMPLE_ARGMAX) : AK_SAMPLE_DRAW;
    c.top_k = p->top_k > 0 ? p->top_k : 0;
    c.last_n = penalties_on(p) ? p->penalty_last_n : 0;
    c.temperature = p->temperature;
    c.top_p = p->top_p > 0 && p->top_p < 1 ? p->top_p : 1.0f;
    c.min_p = p->min_p > 0 ? p->min_p : 0;
    c.repeat = p->repeat_penalty != 0 ? p->repeat_penalty : 1.0f;   /* a zeroed struct: off */
    c.presence = p->presence_penalty;
    c.frequency = p->frequency_penalty;
    c.seed = p->seed;
    return c;
}

void ak_sampler_reset(ak_sampler *s) {
    if (s) s->n_hist = s->head = 0;
}

ak_status ak_sampling_check(const ak_sampling_params *p, ak_err *err) {
    if (!(p->repeat_penalty >= 0) || !isfinite(p->repeat_penalty) || !isfinite(p->presence_penalty) ||
        !isfinite(p->frequency_penalty) || p->penalty_last_n < 0 || p->penalty_last_n > (1 << 24) ||
        isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p))
        return ak_fail(err, AK_ERR_ARG, "sampler: penalties must be finite (repeat_penalty >= 0), penalty_last_n in "
                                        "[0, 2^24], temperature, top_p and min_p numbers");
    return AK_OK;
}

ak_status ak_sampler_create(const ak_sampling_params *p, int vocab, ak_sampler **out, ak_err *err) {
    if (!p || !out || vocab <= 0) return ak_fail(err, AK_ERR_ARG, "sampler: bad arguments (vocab %d)", vocab);
    ak_status st = ak_sampling_check(p, err);
    if (st) return st;
    ak_sampler *s = calloc(1, sizeof *s);
    if (!s) return ak_fail(err, AK_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->cfg = ak_sampler_cfg(p);
    s->vocab = vocab;
    s->cands = malloc((size_t)vocab * sizeof *s->cands);
    s->count = calloc((size_t)vocab, sizeof *s->count);
    s->history = malloc((size_t)(p->penalty_last_n > 0 ? p->penalty_last_n : 1) * sizeof *s->history);
    if (!s->cands || !s->count || !s->history) {
        ak_sampler_free(s);
        return ak_fail(err, AK_ERR_NOMEM, "sampler: out of memory for vocab %d", vocab);
    }
    ak_sampler_reset(s);
    *out = s;
    return AK_OK;
}

void ak_sampler_free(ak_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->count);
    free(s->history);
    free(s);
}

void ak_sampler_accept(ak_sampler *s, int32_t tok) {
    if (!s || s->p.penalty_last_n <= 0 || tok < 0 || tok >= s->vocab) return;
    s->history[s->head] = tok;
    s->head = (s->head + 1) % s->p.penalty_last_n;
    if (s->n_hist < s->p.penalty_last_n) s->n_hist++;
}

int32_t ak_sampler_sample(ak_sampler *s, float *logits, int64_t index, const uint32_t *mask) {
    return ak_sample_pick(&s->cfg, logits, s->vocab, s->history, s->n_hist, mask, index, s->cands, s->count);
}

bool ak_stop_scan(const char *text, size_t n, const char *const *stops, int n_stops, size_t *cut, size_t *hold) {
    size_t best = n, keep = 0;
    bool found = false;
    for (int k = 0; k < n_stops; k++) {
        const char *st = stops ? stops[k] : NULL;
        size_t m = st ? strlen(st) : 0;
        if (!m) continue;
        for (size_t i = 0; m <= n && i + m <= n && i < best; i++)
            if (text[i] == st[0] && !memcmp(text + i, st, m)) {
                best = i;
                found = true;
                break;
            }
        /* longest proper prefix of st that ends the text */
        for (size_t l = (m - 1 < n ? m - 1 : n); l > keep; l--)
            if (!memcmp(text + n - l, st, l)) {
                keep = l;
                break;
            }
    }
    if (cut) *cut = best;
    if (hold) *hold = found ? 0 : keep;
    return found;
}
