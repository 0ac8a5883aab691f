/* Error helpers and the diagnostics log. */
#include "core/err.h"
#include <stdarg.h>
#include <stdio.h>

ak_status ak_fail(ak_err *err, ak_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

ak_status ak_out_size(size_t need, char *buf, size_t cap, size_t *n_out, ak_err *err) {
    if (n_out) *n_out = need;
    if (!buf && !cap) return AK_OK;
    if (!buf) return ak_fail(err, AK_ERR_ARG, "NULL buffer with a capacity of %zu", cap);
    if (need > cap) return ak_fail(err, AK_ERR_ARG, "the result needs %zu bytes, the buffer holds %zu", need, cap);
    if (need < cap) buf[need] = 0;
    return AK_OK;
}

static ak_log_fn log_fn;
static void *log_user;

void ak_log_set(ak_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void ak_logf(const char *fmt, ...) {
    if (!log_fn) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_fn(line, log_user);
}
