/* Error helpers: every failure carries a status and a formatted message. */
#ifndef AK_ERR_H
#define AK_ERR_H
#include "akunu.h"

ak_status ak_fail(ak_err *err, ak_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
