/* Internal session entry points (tests and tools): not part of the public API. */
#ifndef AK_SESSION_H
#define AK_SESSION_H
#include "akunu.h"

/* As ak_session_create; unfused builds both tables from the unfused kernel variants. */
ak_status ak_session_create_ex(ak_model *m, const ak_session_params *p, bool unfused, ak_session **out, ak_err *err);
/* The model a session runs. */
const ak_model *ak_session_model(const ak_session *s);

#endif
