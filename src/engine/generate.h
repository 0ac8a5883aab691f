/* The text side of ak_generate, apart so that tests can drive it with chosen ids: the
 * streaming detokenizer, stop strings held back until they can no longer match, end
 * of generation, and the caller's callback (which may cancel). */
#ifndef AK_GENERATE_H
#define AK_GENERATE_H
#include "akunu.h"
#include "model/tokenizer.h"

typedef struct {
    const ak_tokenizer *tok;
    const char *const *stops;
    int n_stop;
    ak_piece_fn fn;
    void *user;
    ak_detok d;
    char *buf;             /* not shown yet: a tail that could start a stop string, then the newest piece */
    size_t len, cap;       /* cap: the longest stop string and the longest piece, sized once */
    ak_stop_reason stop;   /* NONE while generation may go on */
} ak_textout;

ak_status ak_textout_open(ak_textout *g, const ak_tokenizer *tok, bool special, const char *const *stop, int n_stop,
                          ak_piece_fn fn, void *user, ak_err *err);
void ak_textout_close(ak_textout *g);
/* One generated id: false when generation ends with it (end of generation, a stop
 * string, or the callback cancelled; stop says which). */
bool ak_textout_push(ak_textout *g, int32_t id);
/* The end of generation: what was held back or unfinished is shown. */
void ak_textout_finish(ak_textout *g);

#endif
