/* JSON written the way Python's json.dumps(v, ensure_ascii=False[, indent=N]) writes it,
 * which is what chat templates' tojson filter produces: ", " and ": " separators (","
 * at line ends when indented), keys in document order, non-ASCII text as it is, and
 * floats as Python's repr writes them. */
#include "model/pyjson.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ak_sbuf_put(ak_sbuf *o, const char *s, size_t n) {
    if (o->buf && o->len + n < o->cap) memcpy(o->buf + o->len, s, n);
    o->len += n;
}

void ak_sbuf_puts(ak_sbuf *o, const char *s) { ak_sbuf_put(o, s, strlen(s)); }

#define put ak_sbuf_put
#define puts_ ak_sbuf_puts

void ak_pyjson_string(ak_sbuf *o, const char *s, size_t n) {
    puts_(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" :
                        c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        char u[8];
        if (!e && c < 0x20) snprintf(u, sizeof u, "\\u%04x", c), e = u;
        if (e) puts_(o, e);
        else put(o, s + i, 1);
    }
    puts_(o, "\"");
}

/* repr(float): the shortest digits that read back the same, in exponent form below 1e-4
 * and from 1e16 up, with ".0" on integral values. */
static void put_float(ak_sbuf *o, double v) {
    char b[40];
    if (isnan(v)) { puts_(o, "NaN"); return; }
    if (isinf(v)) { puts_(o, v < 0 ? "-Infinity" : "Infinity"); return; }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(b, sizeof b, "%.*e", prec - 1, v);
        if (strtod(b, NULL) == v) break;
    }
    /* digits and decimal exponent of the shortest form */
    snprintf(b, sizeof b, "%.*e", prec - 1, v);
    char *ep = strchr(b, 'e');
    int exp10 = atoi(ep + 1);
    *ep = 0;
    char digits[24];
    size_t nd = 0;
    bool neg = b[0] == '-';
    for (char *p = b; *p; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;   /* trailing zeros of the mantissa */
    digits[nd] = 0;
    char out[64];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (exp10 < -4 || exp10 >= 16) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (size_t i = 1; i < nd; i++) out[k++] = digits[i];
        }
        k += (size_t)snprintf(out + k, sizeof out - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -exp10 - 1; i++) out[k++] = '0';
        for (size_t i = 0; i < nd; i++) out[k++] = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++) out[k++] = (size_t)i < nd ? digits[i] : '0';
        out[k++] = '.';
        if ((size_t)exp10 + 1 < nd)
            for (size_t i = (size_t)exp10 + 1; i < nd; i++) out[k++] = digits[i];
        else
            out[k++] = '0';
    }
    put(o, out, k);
}

static void newline(ak_sbuf *o, int indent, int level) {
    puts_(o, "\n");
    for (int i = 0; i < indent * level; i++) puts_(o, " ");
}

static void dump(ak_sbuf *o, const ak_json *v, int indent, int level) {
    switch (v->type) {
    case AK_JSON_NULL: puts_(o, "null"); return;
    case AK_JSON_BOOL: puts_(o, v->b ? "true" : "false"); return;
    case AK_JSON_STR: ak_pyjson_string(o, v->s, v->len); return;
    case AK_JSON_NUM: {
        if (!v->is_int) { put_float(o, v->num); return; }
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)v->i);
        puts_(o, b);
        return;
    }
    case AK_JSON_ARR:
    case AK_JSON_OBJ: {
        bool obj = v->type == AK_JSON_OBJ;
        puts_(o, obj ? "{" : "[");
        if (!v->child) { puts_(o, obj ? "}" : "]"); return; }
        for (const ak_json *c = v->child; c; c = c->next) {
            if (indent > 0) newline(o, indent, level + 1);
            if (obj) {
                ak_pyjson_string(o, c->key, c->key_len);
                puts_(o, ": ");
            }
            dump(o, c, indent, level + 1);
            if (c->next) puts_(o, indent > 0 ? "," : ", ");
        }
        if (indent > 0) newline(o, indent, level);
        puts_(o, obj ? "}" : "]");
        return;
    }
    }
}

void ak_pyjson_dump(ak_sbuf *o, const ak_json *v, int indent) { dump(o, v, indent, 0); }
