/* Error helpers. */
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
