/* Persistent thread pool. Workers spin briefly on the job counter and then sleep on a
 * condition variable, so an idle engine costs nothing while back-to-back commands
 * within a job meet at a spinning sense-reversing barrier. */
#include "backend/cpu/threadpool.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

struct ak_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic unsigned job_seq;   /* incremented per job; workers wait for a change */
    _Atomic int done;           /* workers finished with the current job */
    _Atomic int quit;
    ak_pool_fn fn;
    void *ctx;
    _Alignas(64) _Atomic int bar_count;
    _Alignas(64) _Atomic unsigned bar_sense;
};

typedef struct { ak_pool *p; int ith; } worker_arg;

static void spin_wait(int *spins) {
    if (++*spins < 4096) cpu_relax();
    else sched_yield();    /* oversubscribed: let the thread we wait for run */
}

void ak_pool_barrier(ak_pool *p) {
    if (p->n == 1) return;
    unsigned sense = atomic_load_explicit(&p->bar_sense, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->bar_sense, sense + 1, memory_order_release);
        return;
    }
    int spins = 0;
    while (atomic_load_explicit(&p->bar_sense, memory_order_acquire) == sense) spin_wait(&spins);
}

static void *worker(void *arg) {
    worker_arg *w = arg;
    ak_pool *p = w->p;
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->job_seq, memory_order_acquire) == seen && !atomic_load(&p->quit)) {
            if (++spins < 20000) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->job_seq) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load_explicit(&p->job_seq, memory_order_acquire);
        p->fn(p->ctx, w->ith, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel);
    }
    free(w);
    return NULL;
}

ak_pool *ak_pool_create(int n) {
    if (n < 1) n = 1;
    ak_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n;
    p->threads = calloc((size_t)n, sizeof *p->threads);
    if (!p->threads) { free(p); return NULL; }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 1; i < n; i++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w) { p->n = i; ak_pool_free(p); return NULL; }
        w->p = p;
        w->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, w) != 0) { free(w); p->n = i; ak_pool_free(p); return NULL; }
    }
    return p;
}

void ak_pool_free(ak_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int ak_pool_size(const ak_pool *p) { return p->n; }

void ak_pool_run(ak_pool *p, ak_pool_fn fn, void *ctx) {
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->done, 0);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->job_seq, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) != p->n - 1) spin_wait(&spins);
}
