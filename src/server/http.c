/* HTTP through libmicrohttpd: a thread per connection (a request may wait for its job),
 * connection and per-address limits, a timeout for idle or slow clients, the body read
 * up to a cap (413 past it), the API key checked in constant time, a token bucket per
 * client address (429 with Retry-After), and Server-Sent Events streamed from a job as
 * its slot produces them. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "server.h"

#define AK_HTTP_TIMEOUT_S 30   /* idle connections (MHD), and a request's arrival (watch) */

typedef struct {
    ak_buf body;
} request;

/* ---- slow clients ---- */

/* MHD's timeout is for idle connections: a client sending a byte a second is never
 * idle. Every connection is watched from its start (or its previous request's end) until
 * its request has all come; past the timeout its socket is shut down, which MHD sees as
 * the client gone. */
typedef struct watch {
    struct watch *prev, *next;
    int fd;
    struct sockaddr_storage peer;   /* to tell the socket from a later one given the same fd */
    socklen_t peer_len;
    double since;
    bool busy;   /* the request is in: the handler or the reply owns the time now */
} watch;

/* Still the connection we watch: MHD may close an fd (and a new connection get the same
 * number) a moment before it says the connection closed. */
static bool same_peer(const watch *w) {
    struct sockaddr_storage a;
    socklen_t n = sizeof a;
    return w->peer_len && !getpeername(w->fd, (struct sockaddr *)&a, &n) && n == w->peer_len && !memcmp(&a, &w->peer, n);
}

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
    ak_srv *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        watch *w = calloc(1, sizeof *w);
        *socket_context = w;
        if (!w || !fi) return;
        w->fd = fi->connect_fd;
        w->since = ak_srv_now();
        socklen_t n = sizeof w->peer;
        if (!getpeername(w->fd, (struct sockaddr *)&w->peer, &n)) w->peer_len = n;
        pthread_mutex_lock(&s->cw_mu);
        w->next = s->cw_head;
        if (w->next) w->next->prev = w;
        s->cw_head = w;
        pthread_mutex_unlock(&s->cw_mu);
    } else if (*socket_context) {
        watch *w = *socket_context;
        pthread_mutex_lock(&s->cw_mu);
        if (w->prev) w->prev->next = w->next;
        else if (s->cw_head == w) s->cw_head = w->next;
        if (w->next) w->next->prev = w->prev;
        pthread_mutex_unlock(&s->cw_mu);
        free(w);
        *socket_context = NULL;
    }
}

static void watch_mark(ak_srv *s, struct MHD_Connection *c, bool busy) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    watch *w = ci ? ci->socket_context : NULL;
    if (!w) return;
    pthread_mutex_lock(&s->cw_mu);
    w->busy = busy;
    w->since = ak_srv_now();
    pthread_mutex_unlock(&s->cw_mu);
}

static void *watch_main(void *arg) {
    ak_srv *s = arg;
    pthread_mutex_lock(&s->cw_mu);
    while (s->cw_run) {
        double now = ak_srv_now();
        for (watch *w = s->cw_head; w; w = w->next)
            if (!w->busy && now - w->since > AK_HTTP_TIMEOUT_S && same_peer(w)) shutdown(w->fd, SHUT_RDWR);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 1;
        pthread_cond_timedwait(&s->cw_cv, &s->cw_mu, &t);
    }
    pthread_mutex_unlock(&s->cw_mu);
    return NULL;
}

/* ---- checks before the API ---- */

/* Compares every byte whatever differs first, so the time says nothing of the key. */
static bool key_ok(const char *want, const char *got) {
    size_t n = strlen(want), m = got ? strlen(got) : 0;
    unsigned char d = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(want[i] ^ (i < m ? got[i] : 0));
    return d == 0;
}

static void client_ip(struct MHD_Connection *c, char *ip, size_t cap) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(ip, cap, "?");
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, (socklen_t)cap);
}

/* A token bucket of rate_per_min per address, holding at most a minute's worth; 0 when
 * a request may go, else the seconds until it may. Addresses share a fixed table. */
static int rate_wait(ak_srv *s, const char *ip) {
    if (s->o.rate_per_min <= 0) return 0;
    double now = ak_srv_now(), rate = s->o.rate_per_min / 60.0;
    int wait = 0;
    pthread_mutex_lock(&s->rl_mu);
    size_t n = sizeof s->rl / sizeof s->rl[0], h = 5381, slot = 0;
    for (const char *p = ip; *p; p++) h = h * 33 + (unsigned char)*p;
    /* the address's entry among 8 probed slots; else one whose bucket has refilled (it
     * loses nothing), else the first, shared: a newcomer never refills another's bucket */
    size_t found = n, idle = n;
    for (size_t k = 0; k < 8 && found == n; k++) {
        size_t i = (h + k) % n;
        if (!strcmp(s->rl[i].ip, ip)) found = i;
        else if (idle == n && (!s->rl[i].ip[0] || s->rl[i].tokens + (now - s->rl[i].last) * rate >= s->o.rate_per_min)) idle = i;
    }
    slot = found < n ? found : idle < n ? idle : h % n;
    if (found == n && idle < n) { /* a new address: a full bucket */
        snprintf(s->rl[slot].ip, sizeof s->rl[slot].ip, "%s", ip);
        s->rl[slot].tokens = s->o.rate_per_min;
        s->rl[slot].last = now;
    }
    double t = s->rl[slot].tokens + (now - s->rl[slot].last) * rate;
    if (t > s->o.rate_per_min) t = s->o.rate_per_min;
    s->rl[slot].last = now;
    if (t >= 1) t -= 1;
    else wait = (int)((1 - t) / rate) + 1;
    s->rl[slot].tokens = t;
    pthread_mutex_unlock(&s->rl_mu);
    return wait;
}

/* ---- responses ---- */

static void count(ak_srv *s, int status) {
    int k = status / 100;
    if (k >= 0 && k < 6) atomic_fetch_add(&s->st.req_by_status[k], 1);
}

static enum MHD_Result send_reply(ak_srv *s, struct MHD_Connection *c, ak_reply *r) {
    count(s, r->status);
    struct MHD_Response *resp = MHD_create_response_from_buffer(r->body.len, r->body.p ? r->body.p : (void *)"",
                                                                MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    if (r->retry_after > 0) {
        char b[16];
        snprintf(b, sizeof b, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", b);
    }
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* SSE: hand MHD what the slot appended; wait while there is nothing yet. A request
 * queued behind others, or a long prompt, can leave a stream without data for longer
 * than MHD's idle timeout, which then closed it: after AK_SSE_KEEPALIVE_S of waiting a
 * comment line goes out instead (clients skip lines that start with ':'). */
#define AK_SSE_KEEPALIVE_S 10
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    ak_job *j = cls;
    static const char keepalive[] = ": keep-alive\n\n";
    pthread_mutex_lock(&j->mu);
    for (int waited = 0; j->sse_sent == j->sse.len && !j->done; waited++) {
        if (waited == AK_SSE_KEEPALIVE_S && max >= sizeof keepalive - 1) {
            pthread_mutex_unlock(&j->mu);
            memcpy(buf, keepalive, sizeof keepalive - 1);
            return (ssize_t)(sizeof keepalive - 1);
        }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 1;
        pthread_cond_timedwait(&j->cv, &j->mu, &t);
    }
    ssize_t n = 0;
    if (j->sse_sent < j->sse.len) {
        size_t k = j->sse.len - j->sse_sent;
        if (k > max) k = max;
        memcpy(buf, j->sse.p + j->sse_sent, k);
        j->sse_sent += k;
        if (j->sse_sent == j->sse.len) j->sse_sent = j->sse.len = 0;   /* all sent: start over */
        n = (ssize_t)k;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

/* The stream ended (its end sent, or the client gone): the job stops if it still runs. */
static void sse_free(void *cls) {
    ak_job *j = cls;
    j->cancelled = true;
    ak_job_release(j);
}

static enum MHD_Result send_stream(ak_srv *s, struct MHD_Connection *c, ak_job *j) {
    count(s, 200);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, j, sse_free);
    if (!resp) { sse_free(j); return MHD_NO; }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ok = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* ---- the handler ---- */

static void route(ak_srv *s, struct MHD_Connection *c, const char *url, const char *method, request *q, ak_reply *r) {
    if (!strcmp(method, "GET") && (!strcmp(url, "/") || !strcmp(url, "/index.html"))) {
        r->status = 200;
        r->content_type = "text/html; charset=utf-8";
        ak_buf_add(&r->body, (const char *)ak_page_html, ak_page_html_len);
        return;
    }
    if (!strcmp(url, "/health")) {
        bool ok = atomic_load(&s->ready);
        r->status = ok ? 200 : 503;
        ak_buf_adds(&r->body, ok ? "{\"status\": \"ok\"}" : "{\"status\": \"loading\"}");
        return;
    }
    if (!strcmp(url, "/metrics")) {
        r->status = 200;
        r->content_type = "text/plain; version=0.0.4";
        ak_metrics_text(s, &r->body);
        return;
    }
    if (s->o.api_key) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        const char *got = auth && !strncmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
        if (!key_ok(s->o.api_key, got)) {
            ak_api_error(r, 401, "authentication_error", "invalid_api_key", "a valid API key is needed (Authorization: Bearer KEY)");
            return;
        }
    }
    char ip[64];
    client_ip(c, ip, sizeof ip);
    int wait = rate_wait(s, ip);
    if (wait) {
        ak_api_error(r, 429, "rate_limit_error", "rate_limit_exceeded", "more than %d requests a minute from %s", s->o.rate_per_min, ip);
        r->retry_after = wait;
        return;
    }
    if (!atomic_load(&s->ready)) {
        ak_api_error(r, 503, "server_error", "loading", "the model is still loading");
        r->retry_after = 1;
        return;
    }
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    ak_api_handle(s, method, url, q->body.p ? q->body.p : "", q->body.len, fi ? fi->connect_fd : -1, r);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    ak_srv *s = cls;
    request *q = *con_cls;
    if (!q) { /* the headers: the body follows in later calls */
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        *con_cls = q;
        atomic_fetch_add(&s->st.requests, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->o.max_body) { /* refused before its body is read */
            ak_reply r = {0};
            ak_api_error(&r, 413, "invalid_request_error", "request_too_large", "the request body is larger than %zu bytes", s->o.max_body);
            enum MHD_Result ok = send_reply(s, c, &r);
            ak_buf_free(&r.body);
            return ok;
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (q->body.len + *upload_size > s->o.max_body) return MHD_NO;   /* a body past the cap: hang up */
        ak_buf_add(&q->body, upload, *upload_size);
        if (q->body.oom) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (!strcmp(method, "OPTIONS")) { /* CORS preflight */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        enum MHD_Result ok = MHD_queue_response(c, 204, resp);
        MHD_destroy_response(resp);
        count(s, 204);
        return ok;
    }
    watch_mark(s, c, true);
    ak_reply r = {0};
    route(s, c, url, method, q, &r);
    enum MHD_Result ok = r.stream ? send_stream(s, c, r.stream) : send_reply(s, c, &r);
    ak_buf_free(&r.body);
    return ok;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)code;
    watch_mark(cls, c, false);   /* the next request on this connection starts its clock */
    request *q = *con_cls;
    if (q) ak_buf_free(&q->body);
    free(q);
    *con_cls = NULL;
}

ak_status ak_http_start(ak_srv *s, ak_err *err) {
    pthread_mutex_init(&s->cw_mu, NULL);
    pthread_cond_init(&s->cw_cv, NULL);
    s->cw_run = true;
    if (pthread_create(&s->cw_thread, NULL, watch_main, s)) {
        s->cw_run = false;
        snprintf(err->msg, sizeof err->msg, "cannot start a thread");
        return AK_ERR_NOMEM;
    }
    struct sockaddr_in a4 = {0};
    struct sockaddr_in6 a6 = {0};
    const struct sockaddr *addr;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    if (inet_pton(AF_INET, s->o.host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)s->o.port);
        addr = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, s->o.host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)s->o.port);
        addr = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err->msg, sizeof err->msg, "--host: '%.200s' is not an IPv4 or IPv6 address", s->o.host);
        return AK_ERR_ARG;
    }
    s->httpd = MHD_start_daemon(flags, (uint16_t)s->o.port, NULL, NULL, handler, s,
                                MHD_OPTION_SOCK_ADDR, addr,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)64,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)AK_HTTP_TIMEOUT_S,   /* idle clients */
                                MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                                MHD_OPTION_NOTIFY_CONNECTION, notify_connection, s,
                                MHD_OPTION_END);
    if (!s->httpd) {
        ak_http_stop(s);   /* the watcher */
        snprintf(err->msg, sizeof err->msg, "cannot listen on %.200s:%d (in use, or not allowed)", s->o.host, s->o.port);
        return AK_ERR_IO;
    }
    if (s->o.port == 0) { /* report the port the system chose */
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->httpd, MHD_DAEMON_INFO_BIND_PORT);
        if (di) s->o.port = di->port;
    }
    return AK_OK;
}

/* Stop taking connections; connections still open end once their jobs do. */
void ak_http_quiesce(ak_srv *s) {
    if (s->httpd) MHD_quiesce_daemon(s->httpd);
}

void ak_http_stop(ak_srv *s) {
    if (s->httpd) MHD_stop_daemon(s->httpd);
    s->httpd = NULL;
    if (s->cw_run) {
        pthread_mutex_lock(&s->cw_mu);
        s->cw_run = false;
        pthread_cond_signal(&s->cw_cv);
        pthread_mutex_unlock(&s->cw_mu);
        pthread_join(s->cw_thread, NULL);
        pthread_cond_destroy(&s->cw_cv);
        pthread_mutex_destroy(&s->cw_mu);
    }
}
