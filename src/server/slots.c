/* The slots: N sessions, each with its own thread and KV cache, taking jobs from one
 * bounded queue in order. A job goes to the idle slot whose cache holds the longest
 * prefix of its prompt (a chat's next turn, a shared system prompt), so ak_generate
 * prefills only what is new. A job stops early when its client hangs up, when its time
 * is up, or at shutdown. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include "server.h"

double ak_srv_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- buffers and jobs ---- */

void ak_buf_add(ak_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void ak_buf_adds(ak_buf *b, const char *s) { ak_buf_add(b, s, strlen(s)); }

void ak_buf_free(ak_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

ak_job *ak_job_new(ak_srv *s, ak_job_kind kind) {
    ak_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->srv = s;
    j->fd = -1;
    j->gp = ak_generate_default_params();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->refs, 1);
    return j;
}

void ak_job_release(ak_job *j) {
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    free(j->prompt);
    for (int i = 0; j->stops && i < j->gp.n_stop; i++) free(j->stops[i]);
    free(j->stops);
    free(j->grammar);
    for (int i = 0; j->seqs && i < j->n_seq; i++) free(j->seqs[i]);
    free(j->seqs);
    free(j->lens);
    free(j->vectors);
    free(j->id);
    free(j->model);
    free(j->probs);
    ak_buf_free(&j->text);
    ak_buf_free(&j->sse);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void ak_job_wait(ak_job *j) {
    pthread_mutex_lock(&j->mu);
    while (!j->done) pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
}

static void finish(ak_job *j, ak_status st, const char *msg) {
    pthread_mutex_lock(&j->mu);
    j->status = st;
    if (msg) snprintf(j->err, sizeof j->err, "%s", msg);
    if (j->stream) ak_api_stream_end(j);
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* ---- running a job ---- */

/* The client closed its end: poll says hang-up, or the socket reads as ended. */
static bool peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
    char c;
    return (p.revents & POLLIN) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static bool keep_going(ak_job *j) {
    if (j->cancelled || atomic_load(&j->srv->stopping) || peer_gone(j->fd) || (j->deadline && ak_srv_now() > j->deadline)) {
        j->cancelled = true;
        return false;
    }
    return true;
}

static int on_piece(const char *text, size_t len, void *user) {
    ak_job *j = user;
    pthread_mutex_lock(&j->mu);
    ak_buf_add(&j->text, text, len);
    if (j->stream) ak_api_stream_piece(j);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return !keep_going(j);
}

static int on_token(const ak_token_info *t, void *user) {
    ak_job *j = user;
    pthread_mutex_lock(&j->mu);
    if (j->n_probs == j->cap_probs) {
        int cap = j->cap_probs ? 2 * j->cap_probs : 64;
        ak_job_prob *p = realloc(j->probs, (size_t)cap * sizeof *p);
        if (!p) { pthread_mutex_unlock(&j->mu); return 1; }
        j->probs = p;
        j->cap_probs = cap;
    }
    ak_job_prob *p = &j->probs[j->n_probs++];
    p->id = t->id;
    p->logprob = t->logprob;
    p->n_top = t->n_top;
    memcpy(p->top, t->top, (size_t)t->n_top * sizeof *t->top);
    pthread_mutex_unlock(&j->mu);
    return !keep_going(j);
}

static void run_generate(ak_slot *sl, ak_job *j) {
    ak_err err = {{0}};
    j->gp.on_token = j->logprobs ? on_token : NULL;
    j->gp.token_user = j;
    ak_generate_result res;
    ak_status st = ak_generate(sl->s, j->prompt, j->n_prompt, &j->gp, on_piece, j, &res, &err);
    ak_srv_stats *t = &j->srv->st;
    if (!st) {
        pthread_mutex_lock(&j->mu);
        j->res = res;
        pthread_mutex_unlock(&j->mu);
        atomic_fetch_add(&t->prompt_tokens, res.n_prompt);
        atomic_fetch_add(&t->cached_tokens, res.n_cached);
        atomic_fetch_add(&t->generated_tokens, res.n_generated);
        atomic_fetch_add(&t->prefill_us, (long)(res.prefill_seconds * 1e6));
        atomic_fetch_add(&t->decode_us, (long)(res.decode_seconds * 1e6));
        if (res.stop == AK_STOP_CANCELLED) atomic_fetch_add(&t->cancelled, 1);
        if (res.stop == AK_STOP_CANCELLED && atomic_load(&j->srv->stopping)) {
            finish(j, AK_ERR_BACKEND, "the server is shutting down");
            return;
        }
        if (res.stop == AK_STOP_CANCELLED && j->deadline && ak_srv_now() > j->deadline) {
            snprintf(err.msg, sizeof err.msg, "the request ran past the server's time limit (--timeout %d s)", j->srv->o.timeout_s);
            finish(j, AK_ERR_BACKEND, err.msg);
            return;
        }
    }
    finish(j, st, st ? err.msg : NULL);
}

static void run_embed(ak_slot *sl, ak_job *j) {
    ak_err err = {{0}};
    ak_status st = AK_OK;
    int dim = ak_model_dim(j->srv->m);
    for (int i = 0; i < j->n_seq && !st; i += 32) {   /* batches of 32 (packed into few calls), cancellable between */
        if (!keep_going(j)) {
            atomic_fetch_add(&j->srv->st.cancelled, 1);
            st = AK_ERR_ARG;
            snprintf(err.msg, sizeof err.msg, "cancelled");
            break;
        }
        int k = j->n_seq - i < 32 ? j->n_seq - i : 32;
        st = ak_embed_batch(sl->s, (const int32_t *const *)j->seqs + i, j->lens + i, k, j->vectors + (size_t)i * dim, true, &err);
        for (int q = i; q < i + k; q++) atomic_fetch_add(&j->srv->st.prompt_tokens, j->lens[q]);
    }
    finish(j, st, st ? err.msg : NULL);
}

/* ---- the queue ---- */

/* Under s->mu: hand queued jobs to idle slots, each to the idle slot whose cache shares
 * the longest prefix with its prompt. */
static void assign(ak_srv *s) {
    while (s->q_len > 0) {
        ak_job *j = s->queue[s->q_head];
        int best = -1, best_len = -1;
        for (int i = 0; i < s->n_slots; i++) {
            ak_slot *sl = &s->slots[i];
            if (sl->busy) continue;
            const int32_t *have = ak_session_tokens(sl->s);
            int pos = ak_session_pos(sl->s), k = 0;
            while (j->prompt && k < pos && k < j->n_prompt && have[k] == j->prompt[k]) k++;
            k = ak_session_keep(sl->s, k);   /* what ak_generate can reuse of it */
            if (k > best_len) best = i, best_len = k;
        }
        if (best < 0) return;
        s->q_head = (s->q_head + 1) % s->o.max_queue;
        s->q_len--;
        s->slots[best].job = j;
        s->slots[best].busy = true;
        pthread_cond_signal(&s->slots[best].cv);
    }
}

bool ak_srv_submit(ak_srv *s, ak_job *j) {
    pthread_mutex_lock(&s->mu);
    bool ok = !atomic_load(&s->stopping) && s->q_len < s->o.max_queue;
    if (ok) {
        atomic_fetch_add(&j->refs, 1);   /* the slot's */
        s->queue[(s->q_head + s->q_len) % s->o.max_queue] = j;
        s->q_len++;
        assign(s);
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int ak_srv_queue_depth(ak_srv *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->q_len;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void *slot_main(void *arg) {
    ak_slot *sl = arg;
    ak_srv *s = sl->srv;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!sl->job && !atomic_load(&s->stopping)) pthread_cond_wait(&sl->cv, &s->mu);
        ak_job *j = sl->job;
        if (!j) break;   /* stopping, nothing assigned */
        pthread_mutex_unlock(&s->mu);
        if (j->kind == AK_JOB_EMBED) run_embed(sl, j);
        else run_generate(sl, j);
        ak_job_release(j);
        pthread_mutex_lock(&s->mu);
        sl->job = NULL;
        sl->busy = false;
        sl->cached = ak_session_pos(sl->s);
        assign(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

ak_status ak_srv_start_slots(ak_srv *s, ak_err *err) {
    s->queue = calloc((size_t)s->o.max_queue, sizeof *s->queue);
    s->slots = calloc((size_t)s->o.slots, sizeof *s->slots);
    if (!s->queue || !s->slots) return AK_ERR_NOMEM;
    ak_session_params p = ak_session_default_params();
    p.n_ctx = s->o.ctx;
    p.n_threads = s->o.threads;
    p.kv_type = s->o.kv;
    p.kv_type_v = s->o.kv_v;
    p.backend = s->o.backend;
    for (int i = 0; i < s->o.slots; i++) {
        ak_slot *sl = &s->slots[i];
        sl->srv = s;
        sl->index = i;
        pthread_cond_init(&sl->cv, NULL);
        ak_status st = ak_session_create(s->m, &p, &sl->s, err);
        if (!st && pthread_create(&sl->thread, NULL, slot_main, sl)) st = AK_ERR_NOMEM;
        if (st) {
            s->n_slots = i;   /* the ones that started */
            pthread_cond_destroy(&sl->cv);
            ak_session_free(sl->s);
            sl->s = NULL;
            return st;
        }
        s->n_slots = i + 1;
    }
    s->n_ctx = ak_session_n_ctx(s->slots[0].s);
    return AK_OK;
}

void ak_srv_stop_slots(ak_srv *s) {
    atomic_store(&s->stopping, true);
    pthread_mutex_lock(&s->mu);
    /* queued jobs end unanswered by a slot: their connections say 503 */
    for (; s->q_len > 0; s->q_len--, s->q_head = (s->q_head + 1) % s->o.max_queue) {
        ak_job *j = s->queue[s->q_head];
        j->cancelled = true;
        finish(j, AK_ERR_BACKEND, "the server is shutting down");
        ak_job_release(j);
    }
    for (int i = 0; i < s->n_slots; i++) {
        if (s->slots[i].job) s->slots[i].job->cancelled = true;
        pthread_cond_signal(&s->slots[i].cv);
    }
    int n = s->n_slots;
    s->n_slots = 0;   /* /metrics reads the slots under s->mu: from here it sees none */
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) {
        pthread_join(s->slots[i].thread, NULL);
        pthread_cond_destroy(&s->slots[i].cv);
        ak_session_free(s->slots[i].s);
    }
    pthread_mutex_lock(&s->mu);
    free(s->slots);
    free(s->queue);
    s->slots = NULL;
    s->queue = NULL;
    pthread_mutex_unlock(&s->mu);
}
