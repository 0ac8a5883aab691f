/* Text written into a caller's buffer while it fits and counted always (so a first pass
 * with no buffer gives the size), and JSON written the way Python's json.dumps writes
 * it: what chat templates' tojson filter produces. */
#ifndef AK_PYJSON_H
#define AK_PYJSON_H
#include <stddef.h>
#include "format/json.h"

typedef struct {
    char *buf;       /* NULL: only count */
    size_t cap, len; /* bytes written while len + n < cap (room for a NUL stays) */
} ak_sbuf;

void ak_sbuf_put(ak_sbuf *o, const char *s, size_t n);
void ak_sbuf_puts(ak_sbuf *o, const char *s);
/* json.dumps(str, ensure_ascii=False): quotes, backslashes and control characters escaped. */
void ak_pyjson_string(ak_sbuf *o, const char *s, size_t n);
/* json.dumps(v, ensure_ascii=False, indent=indent or None when 0). */
void ak_pyjson_dump(ak_sbuf *o, const ak_json *v, int indent);

#endif
