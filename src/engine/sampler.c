/* Token sampling: penalties, top-k/top-p/min-p filters, temperature and an xoshiro256**
 * generator, on buffers sized for the vocabulary once at create. */
#include "engine/sampler.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"

typedef struct {
    float logit;
    int32_t id;
} cand;

struct ak_sampler {
    ak_sampling_params p;
    int vocab;
    cand *cands;      /* [vocab] candidates of one draw */
    int32_t *count;   /* [vocab] occurrences in the window during a draw, all zero between draws */
    int32_t *history; /* ring of the last penalty_last_n accepted tokens */
    int n_hist, head;
    uint64_t rng[4];
};

ak_sampling_params ak_sampling_default_params(void) {
    return (ak_sampling_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                .repeat_penalty = 1.0f, .penalty_last_n = 64, .seed = 0};
}

/* ---- xoshiro256** (Blackman & Vigna), seeded through splitmix64 --------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t s[4]) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

void ak_sampler_reset(ak_sampler *s) {
    if (!s) return;
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->n_hist = s->head = 0;
}

ak_status ak_sampler_create(const ak_sampling_params *p, int vocab, ak_sampler **out, ak_err *err) {
    if (!p || !out || vocab <= 0) return ak_fail(err, AK_ERR_ARG, "sampler: bad arguments (vocab %d)", vocab);
    if (!(p->repeat_penalty >= 0) || !isfinite(p->repeat_penalty) || !isfinite(p->presence_penalty) ||
        !isfinite(p->frequency_penalty) || p->penalty_last_n < 0 || p->penalty_last_n > (1 << 24) ||
        isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p))
        return ak_fail(err, AK_ERR_ARG, "sampler: penalties must be finite (repeat_penalty >= 0), penalty_last_n in "
                                        "[0, 2^24], temperature, top_p and min_p numbers");
    ak_sampler *s = calloc(1, sizeof *s);
    if (!s) return ak_fail(err, AK_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    if (s->p.repeat_penalty == 0) s->p.repeat_penalty = 1;   /* a zeroed struct: off */
    if (s->p.top_p <= 0) s->p.top_p = 1;
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

/* llama.cpp's penalties: each distinct recent token once, its positive logit divided by
 * the repetition penalty (negative multiplied), then presence subtracted once and
 * frequency once per occurrence (OpenAI's definitions). */
static void apply_penalties(ak_sampler *s, float *logits) {
    const ak_sampling_params *p = &s->p;
    if (s->n_hist == 0 || (p->repeat_penalty == 1.0f && p->presence_penalty == 0 && p->frequency_penalty == 0)) return;
    for (int i = 0; i < s->n_hist; i++) s->count[s->history[i]]++;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->history[i];
        int32_t c = s->count[t];
        if (!c) continue;   /* done already */
        s->count[t] = 0;
        float l = logits[t];
        l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        logits[t] = l - (float)c * p->frequency_penalty - p->presence_penalty;
    }
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Larger logit first; ties by smaller id, so results do not depend on qsort. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool before(cand a, cand b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

/* Move the k best candidates to c[0..k) (Hoare quickselect, order inside unspecified). */
static void select_top(cand *c, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (before(c[i], pivot)) i++;
            while (before(pivot, c[j])) j--;
            if (i <= j) {
                cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* Number of best candidates whose probability (at temperature 1, total sum) first
 * reaches top_p; sorts that prefix. Sorting only a growing prefix keeps a flat
 * distribution over a large vocabulary from costing a full sort. */
static int top_p_cut(cand *c, int n, float mx, double sum, float top_p) {
    for (int k = 64;; k *= 4) {
        if (k >= n) k = n;
        else select_top(c, n, k);
        qsort(c, (size_t)k, sizeof *c, cand_cmp);
        double acc = 0;
        for (int i = 0; i < k; i++) {
            acc += exp((double)c[i].logit - mx) / sum;
            if (acc >= top_p) return i + 1;
        }
        if (k == n) return n;
    }
}

int32_t ak_sampler_sample(ak_sampler *s, float *logits) {
    const ak_sampling_params *p = &s->p;
    apply_penalties(s, logits);
    if (p->temperature <= 0 || p->top_k == 1) return argmax(logits, s->vocab);
    /* Candidates: tokens within 40 nats (scaled by temperature when it is above 1) of
     * the best; the rest carry less than 1e-12 of the probability in float. */
    float mx = logits[argmax(logits, s->vocab)];
    float floor_ = mx - 40.0f * (p->temperature > 1 ? p->temperature : 1.0f);
    cand *c = s->cands;
    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if (logits[i] >= floor_) c[n++] = (cand){logits[i], i};
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, n, p->top_k);
        n = p->top_k;
    }
    /* top-p and min-p on probabilities at temperature 1 */
    if (p->top_p < 1.0f || p->min_p > 0) {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
        if (p->top_p < 1.0f) n = top_p_cut(c, n, mx, sum, p->top_p);
        if (p->min_p > 0) { /* p_i >= min_p * p_max  <=>  l_i >= mx + log(min_p) */
            double lim = (double)mx + log((double)p->min_p);
            int m = 0;
            for (int i = 0; i < n; i++)
                if ((double)c[i].logit >= lim) c[m++] = c[i];
            n = m; /* the best token always passes, n >= 1 */
        }
    }
    /* temperature and the draw */
    double total = 0;
    for (int i = 0; i < n; i++) total += exp(((double)c[i].logit - mx) / p->temperature);
    double u = next_unit(s->rng) * total, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += exp(((double)c[i].logit - mx) / p->temperature);
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
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
