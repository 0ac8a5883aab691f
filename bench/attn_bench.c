/* Decode attention alone: one query row over DEPTH keys of a KV cache, for the head
 * shapes of the real models, F32 and F16 caches, on 1 and 2 threads. Calls cycle over
 * enough layers' caches (>= 256 MB) that K and V come from memory, as in a decode step.
 * Prints microseconds a layer and the K/V bytes read per second.
 * Not a test. Build by hand:
 *   gcc -O2 -Isrc -Iinclude bench/attn_bench.c build/libakunu.a -lm -lpthread -o attn_bench
 *   ./attn_bench [DEPTH [SHAPE [LEVEL]]]   (default 4096, every shape (SHAPE: part of a
 *   name, "" for all), the CPU's SIMD level (0 scalar, 1 AVX2, 2 AVX-512)) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "bench_util.h"

typedef struct { ak_cpu_cmd *c; int nc, ith, nth; ak_cpu_tls tls; int reps; pthread_barrier_t *bar; } worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < w->reps; r++) {
        ak_cpu_attn_decode(&w->c[r % w->nc], w->ith, w->nth, &w->tls);
        pthread_barrier_wait(w->bar);   /* the pool's barrier after a command */
    }
    return NULL;
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 4096;
    struct { const char *name; int nh, nkv, hd; } shapes[] = {
        {"SmolLM2-135M 9/3x64", 9, 3, 64}, {"Qwen2.5-0.5B 14/2x64", 14, 2, 64},
        {"Gemma3-270M 4/1x256", 4, 1, 256}, {"Llama-8B 32/8x128", 32, 8, 128},
    };
    ak_cpu_detect();
    if (argc > 3 && atoi(argv[3]) < ak_cpu_simd) ak_cpu_simd = atoi(argv[3]);
    printf("simd level %d, depth %d\n| shape | cache | threads | us/layer | K+V GB/s |\n| --- | --- | ---: | ---: | ---: |\n", ak_cpu_simd, depth);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int f16 = 0; f16 < 2; f16++) {
            if (argc > 2 && *argv[2] && !strstr(shapes[si].name, argv[2])) continue;
            int nh = shapes[si].nh, nkv = shapes[si].nkv, hd = shapes[si].hd, max_seq = depth + 1;
            size_t cn = (size_t)nkv * max_seq * hd, es = f16 ? 2 : 4;
            int layers = (int)(256e6 / ((double)cn * es * 2)) + 1;
            uint8_t *k = malloc(cn * es * layers), *v = malloc(cn * es * layers);
            float *q = malloc((size_t)nh * hd * 4), *out = malloc((size_t)nh * hd * 4);
            for (size_t i = 0; i < cn * layers; i++) {
                if (f16) { ((uint16_t *)k)[i] = ak_f32_to_f16((float)(i % 97) / 97.f - 0.5f); ((uint16_t *)v)[i] = ak_f32_to_f16((float)(i % 89) / 89.f - 0.5f); }
                else { ((float *)k)[i] = (float)(i % 97) / 97.f - 0.5f; ((float *)v)[i] = (float)(i % 89) / 89.f - 0.5f; }
            }
            for (int i = 0; i < nh * hd; i++) q[i] = (float)(i % 13) / 13.f - 0.5f;
            ak_p_attn p = {.n = 1, .pos = depth - 1, .kv_len = depth, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd,
                           .ld_q = nh * hd, .max_seq = max_seq, .kt = f16 ? AK_F16 : AK_F32, .vt = f16 ? AK_F16 : AK_F32, .causal = 1, .scale = 0.125f};
            size_t counts, bytes;
            ak_cpu_shared_need(AK_K_ATTN_DECODE, &p, &counts, &bytes);
            ak_cpu_shared sh = {calloc(counts, sizeof(int)), aligned_alloc(64, (bytes + 63) & ~(size_t)63)};
            ak_cpu_cmd *c = calloc((size_t)layers, sizeof *c);
            for (int l = 0; l < layers; l++) {
                memcpy(c[l].p, &p, sizeof p);
                c[l].b[0] = q; c[l].b[1] = k + cn * es * l; c[l].b[2] = v + cn * es * l; c[l].b[3] = out;
                c[l].sh = sh;
            }
            size_t sn = ak_cpu_scratch_need(AK_K_ATTN_DECODE, &p);
            for (int nth = 1; nth <= 2; nth++) {
                int reps = 4 * layers;
                double best = 1e30;
                for (int trial = 0; trial < 3; trial++) {
                    pthread_barrier_t bar;
                    pthread_barrier_init(&bar, NULL, (unsigned)nth);
                    worker w[2];
                    pthread_t t[2];
                    for (int i = 0; i < nth; i++) w[i] = (worker){c, layers, i, nth, {malloc(sn * 4), sn}, reps, &bar};
                    double t0 = now_s();
                    for (int i = 1; i < nth; i++) pthread_create(&t[i], NULL, work, &w[i]);
                    work(&w[0]);
                    for (int i = 1; i < nth; i++) pthread_join(t[i], NULL);
                    double dt = (now_s() - t0) / reps;
                    if (dt < best) best = dt;
                    for (int i = 0; i < nth; i++) free(w[i].tls.scratch);
                    pthread_barrier_destroy(&bar);
                }
                printf("| %s | %s | %d | %.1f | %.1f |\n", shapes[si].name, f16 ? "f16" : "f32", nth, best * 1e6,
                       (double)depth * nkv * hd * es * 2 / best / 1e9);
            }
            free(k); free(v); free(q); free(out); free(sh.count); free(sh.data); free(c);
        }
    return 0;
}
