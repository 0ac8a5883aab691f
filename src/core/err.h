/* Error helpers: every failure carries a status and a formatted message; diagnostics go
 * to the log callback the caller set (ak_set_debug), never to a stream. */
#ifndef AK_ERR_H
#define AK_ERR_H
#include "akunu.h"

ak_status ak_fail(ak_err *err, ak_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One line of diagnostics (no newline needed) to the log callback; nothing without one. */
void ak_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ak_log_set(ak_log_fn fn, void *user);

#endif
