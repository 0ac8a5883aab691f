/* Error helpers: every failure carries a status and a formatted message; diagnostics go
 * to the log callback the caller set (ak_set_debug), never to a stream. */
#ifndef AK_ERR_H
#define AK_ERR_H
#include "akunu.h"

ak_status ak_fail(ak_err *err, ak_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The (buf, cap, &n) convention of every call that writes bytes for its caller: *n_out =
 * need; buf NULL with cap 0 only asks (AK_OK); need > cap is AK_ERR_ARG; otherwise the
 * caller writes the bytes, and this writes a NUL after them when cap leaves room. */
ak_status ak_out_size(size_t need, char *buf, size_t cap, size_t *n_out, ak_err *err);

/* One line of diagnostics (no newline needed) to the log callback; nothing without one. */
void ak_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ak_log_set(ak_log_fn fn, void *user);

#endif
