/* The reference token choice (core/sample.h): what the CPU backend's sample command and
 * the host sampler run, and what the CUDA command is tested against. */
#include "core/sample.h"
#include <stdlib.h>
#include <string.h>

/* Each distinct id of the window once, with its count (count[] is zero again after). */
static void penalize(const ak_sample_cfg *c, float *logits, int vocab, const int32_t *win, int n, int32_t *count) {
    if (c->repeat == 1.0f && c->presence == 0 && c->frequency == 0) return;
    for (int i = 0; i < n; i++)
        if (win[i] >= 0 && win[i] < vocab) count[win[i]]++;
    for (int i = 0; i < n; i++) {
        int32_t t = win[i];
        if (t < 0 || t >= vocab || !count[t]) continue;   /* out of range, or done already */
        logits[t] = ak_sample_penalize(logits[t], count[t], c);
        count[t] = 0;
    }
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int cand_cmp(const void *a, const void *b) {
    const ak_sample_cand *x = a, *y = b;
    return ak_sample_before(x->logit, x->id, y->logit, y->id) ? -1 : ak_sample_before(y->logit, y->id, x->logit, x->id);
}

static bool before(ak_sample_cand a, ak_sample_cand b) { return ak_sample_before(a.logit, a.id, b.logit, b.id); }

/* Move the k best candidates to c[0..k) (Hoare quickselect, order inside unspecified). */
static void select_top(ak_sample_cand *c, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        ak_sample_cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (before(c[i], pivot)) i++;
            while (before(pivot, c[j])) j--;
            if (i <= j) {
                ak_sample_cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* The k best of logits, sorted (ties: the smaller id), into c; returns k. One pass that
 * keeps a sorted list: after the first few hundred ids, almost no id enters it. */
static int top_k_scan(const float *logits, int vocab, int k, ak_sample_cand *c) {
    int n = 0;
    for (int i = 0; i < vocab; i++) {
        float l = logits[i];
        if (n == k && !(l > c[k - 1].logit)) continue;   /* an equal logit has a larger id: not before */
        int lo = 0, hi = n;   /* the first entry l goes before */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (ak_sample_before(l, i, c[mid].logit, c[mid].id)) hi = mid;
            else lo = mid + 1;
        }
        int end = n < k ? n++ : k - 1;
        memmove(c + lo + 1, c + lo, (size_t)(end - lo) * sizeof *c);
        c[lo] = (ak_sample_cand){l, i};
    }
    return n;
}

/* Number of best candidates whose probability (at temperature 1, total sum) first
 * reaches top_p; sorts that prefix. Sorting only a growing prefix keeps a flat
 * distribution over a large vocabulary from costing a full sort. */
static int top_p_cut(ak_sample_cand *c, int n, float mx, double sum, float top_p, bool sorted) {
    for (int k = sorted ? n : 64;; k *= 4) {
        if (k >= n) k = n;
        else select_top(c, n, k);
        if (!sorted) qsort(c, (size_t)k, sizeof *c, cand_cmp);
        double acc = 0;
        for (int i = 0; i < k; i++) {
            acc += exp((double)c[i].logit - mx);
            if (acc >= top_p * sum) return i + 1;
        }
        if (k == n) return n;
    }
}

int32_t ak_sample_pick(const ak_sample_cfg *cfg, float *logits, int vocab, const int32_t *window, int n_window,
                       const uint32_t *mask, int64_t index, ak_sample_cand *c, int32_t *count) {
    if (cfg->mode == AK_SAMPLE_ARGMAX && !mask) return argmax(logits, vocab);
    if (window && n_window > 0) penalize(cfg, logits, vocab, window, n_window, count);
    if (mask)
        for (int i = 0; i < vocab; i++)
            if (!(mask[i >> 5] >> (i & 31) & 1)) logits[i] = -INFINITY;
    if (cfg->mode != AK_SAMPLE_DRAW) return argmax(logits, vocab);
    /* Candidates: the top k, and of those the ids within 40 nats (scaled by the
     * temperature when it is above 1) of the best; the rest carry less than 1e-12 of the
     * probability in float. */
    float t = cfg->temperature, mx, floor_;
    int n = 0;
    bool sorted = cfg->top_k > 0 && cfg->top_k < vocab;
    if (sorted) {
        n = top_k_scan(logits, vocab, cfg->top_k, c);
        mx = c[0].logit;
        floor_ = mx - 40.0f * (t > 1 ? t : 1.0f);
        while (n > 1 && c[n - 1].logit < floor_) n--;
    } else {
        mx = logits[argmax(logits, vocab)];
        floor_ = mx - 40.0f * (t > 1 ? t : 1.0f);
        for (int i = 0; i < vocab; i++)
            if (logits[i] >= floor_) c[n++] = (ak_sample_cand){logits[i], i};
    }
    /* top-p and min-p on probabilities at temperature 1, over the candidates left */
    if (cfg->top_p < 1.0f || cfg->min_p > 0) {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
        if (cfg->top_p < 1.0f) n = top_p_cut(c, n, mx, sum, cfg->top_p, sorted);
        if (cfg->min_p > 0) { /* p_i >= min_p * p_max  <=>  l_i >= mx + log(min_p) */
            double lim = (double)mx + log((double)cfg->min_p);
            int m = 0;
            for (int i = 0; i < n; i++)
                if ((double)c[i].logit >= lim) c[m++] = c[i];
            n = m; /* the best id always passes, n >= 1 */
        }
    }
    /* Gumbel-max: ties of the score (probability zero) go to the earlier candidate */
    int best = 0;
    double bs = -INFINITY;
    for (int i = 0; i < n; i++) {
        double s = ak_sample_score(c[i].logit, mx, t, cfg->seed, index, c[i].id);
        if (s > bs) bs = s, best = i;
    }
    return c[best].id;
}
