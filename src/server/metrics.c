/* /metrics: the server's counters in Prometheus's text format. */
#include <stdio.h>
#include "server.h"

static void line(ak_buf *o, const char *name, const char *labels, double v) {
    char b[256];
    snprintf(b, sizeof b, "%s%s %.6g\n", name, labels, v);
    ak_buf_adds(o, b);
}

static void help(ak_buf *o, const char *name, const char *type, const char *what) {
    char b[256];
    snprintf(b, sizeof b, "# HELP %s %s\n# TYPE %s %s\n", name, what, name, type);
    ak_buf_adds(o, b);
}

void ak_metrics_text(ak_srv *s, ak_buf *o) {
    ak_srv_stats *t = &s->st;
    static const char *const cls[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
    help(o, "akunu_requests_total", "counter", "HTTP requests answered, by status class.");
    for (int k = 1; k < 6; k++) {
        char lab[32];
        snprintf(lab, sizeof lab, "{status=\"%s\"}", cls[k]);
        line(o, "akunu_requests_total", lab, (double)atomic_load(&t->req_by_status[k]));
    }
    help(o, "akunu_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    line(o, "akunu_prompt_tokens_total", "", (double)atomic_load(&t->prompt_tokens));
    help(o, "akunu_prompt_tokens_cached_total", "counter", "Prompt tokens a slot's KV cache held already.");
    line(o, "akunu_prompt_tokens_cached_total", "", (double)atomic_load(&t->cached_tokens));
    help(o, "akunu_generated_tokens_total", "counter", "Tokens generated.");
    line(o, "akunu_generated_tokens_total", "", (double)atomic_load(&t->generated_tokens));
    help(o, "akunu_requests_cancelled_total", "counter", "Requests stopped early (client gone, time limit).");
    line(o, "akunu_requests_cancelled_total", "", (double)atomic_load(&t->cancelled));
    double pu = (double)atomic_load(&t->prefill_us), du = (double)atomic_load(&t->decode_us);
    double prefilled = (double)(atomic_load(&t->prompt_tokens) - atomic_load(&t->cached_tokens));
    help(o, "akunu_prefill_tokens_per_second", "gauge", "Prompt tokens prefilled per second, over all requests.");
    line(o, "akunu_prefill_tokens_per_second", "", pu > 0 ? prefilled / (pu / 1e6) : 0);
    help(o, "akunu_decode_tokens_per_second", "gauge", "Tokens generated per second of decoding, over all requests.");
    line(o, "akunu_decode_tokens_per_second", "", du > 0 ? (double)atomic_load(&t->generated_tokens) / (du / 1e6) : 0);
    help(o, "akunu_queue_depth", "gauge", "Requests waiting for a slot.");
    line(o, "akunu_queue_depth", "", ak_srv_queue_depth(s));
    help(o, "akunu_kv_cache_tokens", "gauge", "Tokens held in each slot's KV cache, and its size.");
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        char lab[64];
        snprintf(lab, sizeof lab, "{slot=\"%d\"}", i);
        line(o, "akunu_kv_cache_tokens", lab, s->slots[i].cached);
        snprintf(lab, sizeof lab, "{slot=\"%d\",kind=\"capacity\"}", i);
        line(o, "akunu_kv_cache_tokens", lab, ak_session_n_ctx(s->slots[i].s));
    }
    pthread_mutex_unlock(&s->mu);
}
