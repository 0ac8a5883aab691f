/* JSON Schema to GBNF (engine/grammar.h): the grammar of the JSON texts a schema accepts,
 * as far as a context-free grammar can say it, for response_format and tool arguments. */
#ifndef AK_SCHEMA_H
#define AK_SCHEMA_H
#include <stddef.h>
#include "akunu.h"

/* The GBNF (start rule "root") for the JSON documents that validate against the schema
 * (schema_json: len bytes of JSON). *out is malloc'd, NUL-terminated; the caller frees it.
 * AK_ERR_FORMAT: the schema is not JSON; AK_ERR_UNSUPPORTED: a keyword whose meaning the
 * grammar cannot keep (named in the message). */
ak_status ak_schema_to_gbnf(const char *schema_json, size_t len, char **out, ak_err *err);
/* The GBNF of any JSON object (response_format {"type": "json_object"}), NUL-terminated. */
const char *ak_schema_json_object_gbnf(void);

#endif
