/* akunu serve: an OpenAI-compatible HTTP front end on akunu.h. HTTP comes from
 * libmicrohttpd (a thread per connection), JSON from cJSON; requests become jobs in a
 * bounded queue that N slots (each a session with its KV cache) take in order. */
#ifndef AK_SERVER_H
#define AK_SERVER_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"

typedef struct ak_srv ak_srv;

typedef struct {
    const char *model_path, *host, *api_key, *model_name;
    int port, ctx, threads, slots, max_queue, rate_per_min, timeout_s, max_tokens;
    int spec_draft;           /* --spec ngram: prompt-lookup drafts of up to this many tokens (0: off) */
    size_t max_body;
    ak_backend_kind backend;
    ak_kv_type kv, kv_v;   /* K and V cache types (AUTO: the session default; V: as K) */
    bool verbose;
} ak_srv_opts;

/* ---- jobs: one request's work, filled by the API layer, run by a slot ---------------- */

typedef enum { AK_JOB_CHAT, AK_JOB_COMPLETION, AK_JOB_EMBED } ak_job_kind;

/* A growing byte buffer (the reply's text, an SSE stream, a JSON body). */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} ak_buf;
void ak_buf_add(ak_buf *b, const char *s, size_t n);
void ak_buf_adds(ak_buf *b, const char *s);
void ak_buf_free(ak_buf *b);

/* One token's probabilities, kept for the logprobs of the reply. */
typedef struct {
    int32_t id;
    float logprob;
    int n_top;
    ak_token_prob top[AK_MAX_TOP];
} ak_job_prob;

typedef struct ak_job ak_job;
struct ak_job {
    ak_job_kind kind;
    ak_srv *srv;
    /* request */
    int32_t *prompt;
    int n_prompt;
    ak_generate_params gp;
    char **stops;             /* owned copies of the stop strings (gp.stop points here) */
    char *grammar;            /* owned: response_format's or a forced tool call's (gp.grammar points here) */
    bool stream, include_usage, logprobs, tools;
    char *id, *model;         /* "chatcmpl-..." and the model name echoed */
    int64_t created;
    int fd;                   /* the client's socket, watched for a hang-up */
    double deadline;          /* monotonic seconds; 0: none */
    /* embeddings: n_seq sequences of ids */
    int32_t **seqs;
    int *lens, n_seq;
    float *vectors;           /* n_seq * dim, filled by the slot */
    /* result, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ak_buf text;              /* everything generated so far (tool calls parsed from it at the end) */
    ak_buf sse;               /* SSE bytes not yet sent (stream) */
    size_t sse_sent;
    ak_job_prob *probs;       /* logprobs: every token's, in order */
    int n_probs, cap_probs, probs_sent;
    size_t text_sent;         /* stream: bytes of text already sent as content */
    bool held;                /* stream with tools: the reply may be a tool call, so no content goes out */
    bool opened;              /* stream: the first chunk (with the role) went out */
    ak_generate_result res;
    ak_status status;
    char err[512];
    bool done;
    atomic_bool cancelled;    /* the client went, its time ran out, or the server stops */
    atomic_int refs;          /* the connection and the slot each hold one */
};

ak_job *ak_job_new(ak_srv *s, ak_job_kind kind);
void ak_job_release(ak_job *j);

/* ---- the server -------------------------------------------------------------------- */

/* Counters for /metrics (monotonic; read without a lock). */
typedef struct {
    atomic_long req_by_status[6];   /* 2xx, 4xx, 5xx as [status / 100] */
    atomic_long requests;
    atomic_long prompt_tokens, cached_tokens, generated_tokens;
    atomic_long prefill_us, decode_us;   /* time spent, for tokens/s */
    atomic_long cancelled;
} ak_srv_stats;

typedef struct {
    ak_srv *srv;
    ak_session *s;
    pthread_t thread;
    pthread_cond_t cv;
    ak_job *job;              /* assigned, under the server's lock */
    bool busy;
    int cached;               /* tokens in its KV cache after its last job (for /metrics) */
    int index;
} ak_slot;

struct ak_srv {
    ak_srv_opts o;
    ak_model *m;
    char model_name[256];
    atomic_bool ready, stopping;
    pthread_mutex_t mu;       /* the queue and the slots' assignment */
    ak_job **queue;           /* a ring of max_queue jobs */
    int q_head, q_len;
    ak_slot *slots;
    int n_slots;
    ak_srv_stats st;
    void *httpd;              /* struct MHD_Daemon */
    /* rate limiting: a small table of client addresses and their token buckets */
    int n_ctx;                /* the slots' context */
    pthread_mutex_t rl_mu;
    struct { char ip[64]; double tokens, last; } rl[1024];
    /* slow clients (http.c): every connection while its request arrives, and a thread
     * that cuts those past the timeout however they trickle */
    pthread_mutex_t cw_mu;
    pthread_cond_t cw_cv;
    void *cw_head;
    pthread_t cw_thread;
    bool cw_run;
};

/* Queue a job (the slot that holds the longest prefix of its prompt takes it first);
 * false when the queue is full. */
bool ak_srv_submit(ak_srv *s, ak_job *j);
/* Start the slots' threads (the model is loaded); stop them, cancelling every job. */
ak_status ak_srv_start_slots(ak_srv *s, ak_err *err);
void ak_srv_stop_slots(ak_srv *s);
int ak_srv_queue_depth(ak_srv *s);
/* Wait until j is done (or, for a stream, until there is something to send). */
void ak_job_wait(ak_job *j);
double ak_srv_now(void);

/* ---- HTTP (http.c) and the OpenAI API (api.c) ---------------------------------------- */

ak_status ak_http_start(ak_srv *s, ak_err *err);
void ak_http_quiesce(ak_srv *s);
void ak_http_stop(ak_srv *s);

/* An HTTP answer the API layer hands back to http.c. */
typedef struct {
    int status;
    ak_buf body;
    const char *content_type;
    ak_job *stream;           /* set: the body is the job's SSE stream */
    int retry_after;          /* 429: seconds */
} ak_reply;

/* A request body for url into a job (prompt rendered and tokenized, parameters checked),
 * or NULL with the error in r; nothing is queued (the fuzz target's entry point too). */
ak_job *ak_api_parse(ak_srv *s, const char *url, const char *body, size_t len, ak_reply *r);
/* Route one complete request (the body as received). */
void ak_api_handle(ak_srv *s, const char *method, const char *url, const char *body, size_t len, int fd,
                   ak_reply *r);
/* OpenAI's error object. */
void ak_api_error(ak_reply *r, int status, const char *type, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The SSE chunks of a stream job so far, appended by the slot as it generates. */
void ak_api_stream_piece(ak_job *j);
void ak_api_stream_end(ak_job *j);
/* The non-streaming JSON body of a finished job. */
void ak_api_finish(ak_job *j, ak_reply *r);

/* Prometheus text exposition of the counters. */
void ak_metrics_text(ak_srv *s, ak_buf *out);

/* `akunu serve ...` (the CLI's main hands the subcommand over). */
int ak_cli_serve(int argc, char **argv);

/* The web chat page (page.html, compiled in). */
extern const unsigned char ak_page_html[];
extern const size_t ak_page_html_len;

#endif
