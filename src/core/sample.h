/* Token choice from a row of logits, as the table's sample command and the host sampler
 * both make it: penalties over a window of recent ids, a mask of allowed ids (grammar),
 * then argmax, or top-k, top-p and min-p (on probabilities at temperature 1) and a
 * Gumbel-max draw at the temperature. The noise is a counter-based hash of (seed, index
 * of the token being chosen, id), so a seed gives the same ids whatever the chain length
 * or prefill chunking, on any backend, with no generator state to carry. */
#ifndef AK_SAMPLE_H
#define AK_SAMPLE_H
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include "core/kernels.h"   /* AK_HD */

/* What the table samples itself; wider settings are sampled on the host. The CUDA
 * command sorts one 4096-id slice per block and then the blocks' top-k lists in one
 * block: 128 * (524288 / 4096) ids at most. */
#define AK_SAMPLE_MAX_K 128
#define AK_SAMPLE_MAX_WINDOW 4096
#define AK_SAMPLE_MAX_VOCAB 524288
#define AK_SAMPLE_SLICE 4096

enum {
    AK_SAMPLE_ARGMAX = 0, /* the first index of the largest logit, nothing else */
    AK_SAMPLE_GREEDY,     /* penalties and mask, then argmax */
    AK_SAMPLE_DRAW,       /* penalties and mask, filters, Gumbel-max at the temperature */
};

/* The sample command's settings, at the start of the session's sample buffer (the
 * mask's words follow it when masked). 64 bytes. */
typedef struct {
    int32_t mode;
    int32_t top_k;          /* DRAW: keep the k most likely (ties: the smaller id); <= 0: all */
    int32_t last_n;         /* penalty window: the ids at the last_n positions before the one chosen */
    int32_t masked;         /* bit i of the mask: id i allowed */
    float temperature;      /* DRAW: > 0 */
    float top_p;            /* 1: off */
    float min_p;            /* 0: off */
    float repeat;           /* 1: off */
    float presence, frequency;
    uint64_t seed;
    int32_t pad[4];
} ak_sample_cfg;

/* Offset of the mask words in the sample buffer, and the buffer's size for a vocabulary
 * (config, mask, and the CPU's scratch: a candidate and a count per id). */
#define AK_SAMPLE_MASK_OFF 64
static inline uint64_t ak_sample_buf_bytes(int vocab) {
    uint64_t w = ((uint64_t)vocab + 31) / 32;
    return AK_SAMPLE_MASK_OFF + 4 * w + 12 * (uint64_t)vocab;
}

/* Uniform in (0, 1) from (seed, index, id): splitmix64's finaliser over the three. */
static inline AK_HD double ak_sample_unit(uint64_t seed, int64_t index, int32_t id) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    z += 0xD1B54A32D192ED03ull * (uint64_t)((uint32_t)id + 1u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * 0x1.0p-53;
}

/* The Gumbel-max score of a candidate: argmax over the kept ids of this is a draw from
 * softmax((l - mx) / t) over them. */
static inline AK_HD double ak_sample_score(float l, float mx, float t, uint64_t seed, int64_t index, int32_t id) {
    return ((double)l - (double)mx) / (double)t - log(-log(ak_sample_unit(seed, index, id)));
}

/* The repetition, presence and frequency penalties of llama.cpp / OpenAI on a logit
 * whose id occurs count times in the window. */
static inline AK_HD float ak_sample_penalize(float l, int count, const ak_sample_cfg *c) {
    l = l > 0 ? l / c->repeat : l * c->repeat;
    return l - (float)count * c->frequency - c->presence;
}

typedef struct {
    float logit;
    int32_t id;
} ak_sample_cand;

/* Candidates in the order the filters see them: larger logit first, ties by smaller id. */
static inline AK_HD bool ak_sample_before(float la, int32_t ia, float lb, int32_t ib) {
    return la > lb || (la == lb && ia < ib);
}

/* The reference: the id chosen at position index from logits[0..vocab) (changed in
 * place by penalties and the mask), window[0..n_window) the recent ids, mask NULL or
 * the allowed bits (ARGMAX with a mask is GREEDY). cands: vocab entries of scratch;
 * count: vocab zeros, left zero. */
int32_t ak_sample_pick(const ak_sample_cfg *c, float *logits, int vocab, const int32_t *window, int n_window,
                       const uint32_t *mask, int64_t index, ak_sample_cand *cands, int32_t *count);

#endif
