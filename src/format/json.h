/* A small strict JSON parser (RFC 8259) for config.json and safetensors headers: the
 * whole document into one arena, depth- and size-limited, UTF-8 checked, duplicate
 * object keys rejected, every read bounded by the given length. */
#ifndef AK_JSON_H
#define AK_JSON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"

#define AK_JSON_MAX_DEPTH 64
#define AK_JSON_MAX_ARENA ((size_t)256 << 20)   /* bytes of parsed nodes and strings */

typedef enum { AK_JSON_NULL = 0, AK_JSON_BOOL, AK_JSON_NUM, AK_JSON_STR, AK_JSON_ARR, AK_JSON_OBJ } ak_json_type;

typedef struct ak_json ak_json;
struct ak_json {
    ak_json_type type;
    bool b;              /* BOOL */
    bool is_int;         /* NUM written without fraction or exponent and fitting int64: i is exact */
    int64_t i;
    double num;          /* NUM */
    const char *s;       /* STR: decoded UTF-8, NUL-terminated; may hold NULs (\u0000), see len */
    size_t len;          /* STR: bytes; ARR/OBJ: number of children */
    const char *key;     /* a member of an object: its decoded name (NUL-terminated) */
    size_t key_len;
    ak_json *child;      /* ARR/OBJ: first element / member, in document order */
    ak_json *next;       /* the next sibling */
};

typedef struct ak_json_doc ak_json_doc;

/* Parses len bytes (no NUL needed); the document must be one value with optional
 * surrounding whitespace. */
ak_status ak_json_parse(const char *text, size_t len, ak_json_doc **out, ak_err *err);
const ak_json *ak_json_root(const ak_json_doc *d);
void ak_json_free(ak_json_doc *d);

/* Member `key` of an object (NULL if v is not an object or has no such member). */
const ak_json *ak_json_get(const ak_json *v, const char *key);
/* Typed reads: false if v is NULL or of another type. ak_json_int accepts any number
 * with an integral value in int64 range (10 and 10.0 alike). */
bool ak_json_int(const ak_json *v, int64_t *out);
bool ak_json_num(const ak_json *v, double *out);
bool ak_json_bool(const ak_json *v, bool *out);
/* True if v is a string equal to s (no embedded NULs). */
bool ak_json_str_is(const ak_json *v, const char *s);

#endif
