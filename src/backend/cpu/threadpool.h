/* Persistent thread pool: every job runs on all threads (the caller is thread 0);
 * inside a job, ak_pool_barrier synchronises them by spinning, never by syscall. */
#ifndef AK_THREADPOOL_H
#define AK_THREADPOOL_H

typedef struct ak_pool ak_pool;
typedef void (*ak_pool_fn)(void *ctx, int ith, int nth);

ak_pool *ak_pool_create(int n_threads);
void ak_pool_free(ak_pool *p);
int ak_pool_size(const ak_pool *p);
void ak_pool_run(ak_pool *p, ak_pool_fn fn, void *ctx);
void ak_pool_barrier(ak_pool *p);

#endif
