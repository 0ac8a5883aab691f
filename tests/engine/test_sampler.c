/* Sampler: greedy and top-k=1 are argmax; temperature, top-k, top-p and min-p draw from
 * the distribution they promise (chi-square over many seeded draws on a small vocab);
 * seeds reproduce; repetition penalty as llama.cpp, presence and frequency penalties as
 * OpenAI defines them; stop strings and stream holdback. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/sampler.h"
#include "test_util.h"

#define V 8
#define DRAWS 40000

static ak_sampler *make(ak_sampling_params p, int vocab) {
    ak_sampler *s = NULL;
    ak_err err;
    ak_status st = ak_sampler_create(&p, vocab, &s, &err);
    CHECK(st == AK_OK && s, "create: %s", err.msg);
    return s;
}

static ak_sampling_params plain(float temp, uint64_t seed) {
    return (ak_sampling_params){.temperature = temp, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,
                               .penalty_last_n = 0, .seed = seed};
}

static const float base_logits[V] = {2.0f, 1.0f, 0.5f, 3.0f, -1.0f, 0.0f, 2.5f, -2.0f};

/* Draw DRAWS tokens and compare the counts with want[] (probabilities; 0 = must never
 * occur) by Pearson chi-square. 7 degrees of freedom at most: 30 is far beyond the 0.9999
 * quantile (about 29.9 for 7) yet catches any real bias at this many draws. */
static void check_dist(const char *what, ak_sampler *s, const double *want) {
    int count[V] = {0};
    float l[V];
    for (int d = 0; d < DRAWS; d++) {
        memcpy(l, base_logits, sizeof l);
        int32_t t = ak_sampler_sample(s, l, d, NULL);
        if (t >= 0 && t < V) count[t]++;
    }
    double chi = 0;
    for (int i = 0; i < V; i++) {
        if (want[i] == 0) {
            CHECK(count[i] == 0, "%s: token %d drawn %d times, must never be", what, i, count[i]);
            continue;
        }
        double e = want[i] * DRAWS;
        chi += (count[i] - e) * (count[i] - e) / e;
    }
    CHECK(chi < 30.0, "%s: chi-square %.1f", what, chi);
}

/* softmax(l / temp) restricted to keep[] */
static void softmax_subset(double temp, const int *keep, double *out) {
    double sum = 0;
    for (int i = 0; i < V; i++) sum += keep[i] ? exp(base_logits[i] / temp) : 0;
    for (int i = 0; i < V; i++) out[i] = keep[i] ? exp(base_logits[i] / temp) / sum : 0;
}

static void test_greedy(void) {
    uint64_t rs = 7;
    float l[1000];
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < 1000; i++) l[i] = ak_rand_f(&rs) * 10;
        int best = 0;
        for (int i = 1; i < 1000; i++)
            if (l[i] > l[best]) best = i;
        ak_sampler *g = make(plain(0, 1), 1000);
        ak_sampling_params k1 = plain(1.0f, 1);
        k1.top_k = 1;
        ak_sampler *k = make(k1, 1000);
        CHECK(ak_sampler_sample(g, l, 0, NULL) == best, "greedy = argmax");
        CHECK(ak_sampler_sample(k, l, 0, NULL) == best, "top_k 1 = argmax");
        ak_sampler_free(g);
        ak_sampler_free(k);
    }
    /* ties: the first index */
    float t[5] = {0, 3, 1, 3, 3};
    ak_sampler *g = make(plain(-1, 0), 5);
    CHECK(ak_sampler_sample(g, t, 0, NULL) == 1, "greedy tie");
    ak_sampler_free(g);
}

static void test_distributions(void) {
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    double want[V];
    /* temperature 1, 0.5, 2 */
    const float temps[3] = {1.0f, 0.5f, 2.0f};
    for (int i = 0; i < 3; i++) {
        ak_sampler *s = make(plain(temps[i], 100 + i), V);
        softmax_subset(temps[i], all, want);
        char what[64];
        snprintf(what, sizeof what, "temperature %.1f", temps[i]);
        check_dist(what, s, want);
        ak_sampler_free(s);
    }
    /* top-k 3: tokens 3 (3.0), 6 (2.5), 0 (2.0), at temperature 0.7 */
    ak_sampling_params p = plain(0.7f, 11);
    p.top_k = 3;
    ak_sampler *s = make(p, V);
    int k3[V] = {1, 0, 0, 1, 0, 0, 1, 0};
    softmax_subset(0.7, k3, want);
    check_dist("top-k 3", s, want);
    ak_sampler_free(s);
    /* top-p 0.9 at T=1: probabilities sorted 3:.441 6:.268 0:.162 1:.060 ... -> the first
     * three sum to .871 < .9, the fourth crosses: keep {3, 6, 0, 1}; drawn at T = 1.5 */
    double p1[V];
    softmax_subset(1.0, all, p1);
    CHECK(p1[3] + p1[6] + p1[0] < 0.9 && p1[3] + p1[6] + p1[0] + p1[1] >= 0.9, "top-p fixture");
    p = plain(1.5f, 12);
    p.top_p = 0.9f;
    s = make(p, V);
    int tp[V] = {1, 1, 0, 1, 0, 0, 1, 0};
    softmax_subset(1.5, tp, want);
    check_dist("top-p 0.9", s, want);
    ak_sampler_free(s);
    /* min-p 0.2: keep p_i >= 0.2 p_max, i.e. l_i >= 3 + ln 0.2 = 1.39: {0, 3, 6} */
    p = plain(1.0f, 13);
    p.min_p = 0.2f;
    s = make(p, V);
    softmax_subset(1.0, k3, want);
    check_dist("min-p 0.2", s, want);
    ak_sampler_free(s);
    /* all together: top-k 5 {3,6,0,1,2}, top-p 0.9 of those at T=1, min-p 0.1 (l >= 0.70) */
    p = plain(0.8f, 14);
    p.top_k = 5;
    p.top_p = 0.9f;
    p.min_p = 0.1f;
    s = make(p, V);
    double q5 = 0;
    int k5[V] = {1, 1, 1, 1, 0, 0, 1, 0}, keep[V] = {0};
    softmax_subset(1.0, k5, want);
    const int order[5] = {3, 6, 0, 1, 2};
    for (int i = 0; i < 5; i++) {
        keep[order[i]] = 1;
        q5 += want[order[i]];
        if (q5 >= 0.9) break;
    }
    for (int i = 0; i < V; i++)
        if (base_logits[i] < 3.0 + log(0.1)) keep[i] = 0;
    softmax_subset(0.8, keep, want);
    check_dist("top-k + top-p + min-p", s, want);
    ak_sampler_free(s);
}

static void test_seeds(void) {
    uint64_t rs = 3;
    float base[512], l[512];
    for (int i = 0; i < 512; i++) base[i] = ak_rand_f(&rs) * 3;
    int32_t a[64], b[64], c[64];
    ak_sampling_params p = ak_sampling_default_params();
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    p.temperature = 1.0f;
    p.seed = 42;
    ak_sampler *s1 = make(p, 512), *s2 = make(p, 512);
    p.seed = 43;
    ak_sampler *s3 = make(p, 512);
    int same = 1, diff = 0;
    for (int i = 0; i < 64; i++) {
        memcpy(l, base, sizeof l), a[i] = ak_sampler_sample(s1, l, i, NULL);
        memcpy(l, base, sizeof l), b[i] = ak_sampler_sample(s2, l, i, NULL);
        memcpy(l, base, sizeof l), c[i] = ak_sampler_sample(s3, l, i, NULL);
        same &= a[i] == b[i];
        diff += a[i] != c[i];
    }
    CHECK(same, "same seed, same sequence");
    CHECK(diff > 32, "different seed, different sequence (%d of 64 differ)", diff);
    /* the draw depends on (seed, position) alone */
    ak_sampler_reset(s1);
    same = 1;
    for (int i = 0; i < 64; i++) memcpy(l, base, sizeof l), same &= ak_sampler_sample(s1, l, i, NULL) == a[i];
    CHECK(same, "the same positions replay the sequence");
    ak_sampler_free(s1);
    ak_sampler_free(s2);
    ak_sampler_free(s3);
}

static void test_penalty(void) {
    ak_sampling_params p = plain(0, 0);
    p.repeat_penalty = 2.0f;
    p.penalty_last_n = 3;
    ak_sampler *s = make(p, 6);
    float l[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    /* token 0 twice (penalised once), token 2 negative: 4 -> 2, -1 -> -2 */
    ak_sampler_accept(s, 0);
    ak_sampler_accept(s, 2);
    ak_sampler_accept(s, 0);
    CHECK(ak_sampler_sample(s, l, 0, NULL) == 1, "penalty moves greedy from 0 to 1");
    CHECK(l[0] == 2.0f && l[2] == -2.0f && l[1] == 3.5f && l[3] == 2.0f, "penalised logits %g %g", l[0], l[2]);
    /* the window is 3: after three more tokens, 0 and 2 are forgotten */
    ak_sampler_accept(s, 3);
    ak_sampler_accept(s, 4);
    ak_sampler_accept(s, 5);
    float m[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    CHECK(ak_sampler_sample(s, m, 0, NULL) == 0 && m[0] == 4.0f && m[3] == 1.0f && m[4] == 0.25f && m[5] == -6.0f,
          "window slides: %g %g %g %g", m[0], m[3], m[4], m[5]);
    ak_sampler_reset(s);
    float r[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    CHECK(ak_sampler_sample(s, r, 0, NULL) == 0 && r[3] == 2.0f, "reset clears the history");
    ak_sampler_free(s);
    /* invalid parameters */
    ak_sampler *bad = NULL;
    ak_err err;
    p.repeat_penalty = -1;
    CHECK(ak_sampler_create(&p, 6, &bad, &err) == AK_ERR_ARG && !bad, "negative penalty rejected");
    p.repeat_penalty = 1;
    p.frequency_penalty = NAN;
    CHECK(ak_sampler_create(&p, 6, &bad, &err) == AK_ERR_ARG && !bad, "NaN frequency penalty rejected");
    p.frequency_penalty = 0;
    CHECK(ak_sampler_create(&p, 0, &bad, &err) == AK_ERR_ARG, "vocab 0 rejected");
    /* a zeroed struct: greedy, every penalty off */
    ak_sampling_params z = {0};
    s = make(z, 6);
    float q[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    ak_sampler_accept(s, 0);
    CHECK(ak_sampler_sample(s, q, 0, NULL) == 0 && q[0] == 4.0f, "zeroed parameters: greedy, no penalty");
    ak_sampler_free(s);
}

/* OpenAI's presence and frequency penalties over the window, after the repetition
 * penalty: l - count * frequency - presence, once per distinct token. */
static void test_presence_frequency(void) {
    ak_sampling_params p = plain(0, 0);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.penalty_last_n = 3;
    ak_sampler *s = make(p, 6);
    ak_sampler_accept(s, 0);
    ak_sampler_accept(s, 2);
    ak_sampler_accept(s, 0);
    float l[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    CHECK(ak_sampler_sample(s, l, 0, NULL) == 1, "penalties move greedy from 0 to 1");
    CHECK(l[0] == 3.0f && l[2] == -1.75f && l[1] == 3.5f && l[5] == -3.0f, "presence/frequency: %g %g %g %g", l[0],
          l[2], l[1], l[5]);
    ak_sampler_free(s);
    p.repeat_penalty = 2.0f;
    s = make(p, 6);
    ak_sampler_accept(s, 0);
    ak_sampler_accept(s, 0);
    float m[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    ak_sampler_sample(s, m, 0, NULL);
    CHECK(m[0] == 1.0f, "repetition then presence and frequency: 4 / 2 - 2 * 0.25 - 0.5 = 1, got %g", m[0]);
    /* negative penalties encourage repeats */
    ak_sampler_free(s);
    p.repeat_penalty = 1;
    p.presence_penalty = -2;
    p.frequency_penalty = 0;
    s = make(p, 6);
    ak_sampler_accept(s, 3);
    float r[6] = {4, 3.5f, -1, 2, 0.5f, -3};
    CHECK(ak_sampler_sample(s, r, 0, NULL) == 0 && r[3] == 4.0f, "negative presence: %g", r[3]);
    ak_sampler_free(s);
}

static void stop_case(const char *text, const char *const *stops, int n, bool found, size_t cut, size_t hold) {
    size_t c = 99, h = 99;
    bool f = ak_stop_scan(text, strlen(text), stops, n, &c, &h);
    CHECK(f == found && c == cut && h == hold, "stop '%s': found %d cut %zu hold %zu, want %d %zu %zu", text, f, c, h,
          found, cut, hold);
}

static void test_stop(void) {
    const char *const s1[] = {"</s>", "\nUser:"};
    stop_case("Hello world", s1, 2, false, 11, 0);
    stop_case("Hello </", s1, 2, false, 8, 2);
    stop_case("Hello <", s1, 2, false, 7, 1);
    stop_case("Hello </s", s1, 2, false, 9, 3);
    stop_case("Hello </s>", s1, 2, true, 6, 0);
    stop_case("Hello </s> more", s1, 2, true, 6, 0);
    stop_case("Line\nUs", s1, 2, false, 7, 3);
    stop_case("a\nUser: b </s>", s1, 2, true, 1, 0); /* the earliest wins */
    stop_case("</s>", s1, 2, true, 0, 0);
    stop_case("", s1, 2, false, 0, 0);
    stop_case("<<", s1, 2, false, 2, 1);
    const char *const s2[] = {"abab", "", NULL, "xyz"};
    stop_case("zzaba", s2, 4, false, 5, 3);   /* "aba" could start "abab" */
    stop_case("zzabab", s2, 4, true, 2, 0);
    stop_case("xy", s2, 4, false, 2, 2);      /* shorter than the stop string */
    stop_case("hello", NULL, 0, false, 5, 0);
}

int main(void) {
    test_greedy();
    test_distributions();
    test_seeds();
    test_penalty();
    test_presence_frequency();
    test_stop();
    return ak_test_done();
}
