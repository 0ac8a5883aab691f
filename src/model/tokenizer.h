/* Tokenizers read from GGUF metadata: SentencePiece-style BPE over scores (`llama`),
 * byte-level BPE with merges and a named pre-tokenizer (`gpt2`), WordPiece (`bert`);
 * special tokens, BOS/EOS rules, end-of-generation ids and a streaming detokenizer. */
#ifndef AK_TOKENIZER_H
#define AK_TOKENIZER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"
#include "format/gguf.h"

typedef struct ak_tokenizer ak_tokenizer;

/* Copies everything it needs: the tokenizer outlives the gguf. */
ak_status ak_tokenizer_load(const ak_gguf *g, ak_tokenizer **out, ak_err *err);
void ak_tokenizer_free(ak_tokenizer *t);

/* add_special: BOS/EOS as tokenizer.ggml.add_bos_token / add_eos_token say.
 * parse_special: text spelling a control or unknown token becomes that token
 * (user-defined tokens are always recognised). Writes up to cap ids; *n_out is the
 * number the text needs; fails with AK_ERR_ARG when that exceeds cap. */
ak_status ak_tokenizer_encode(const ak_tokenizer *t, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *ids, int cap, int *n_out, ak_err *err);

/* The bytes token id stands for (control tokens give "" unless special), and a whole
 * sequence's, dropping the space that the SentencePiece add-space-prefix rule put
 * before the first word. The (buf, cap, &n) convention (core/err.h: ak_out_size);
 * AK_ERR_ARG for an id out of range. */
ak_status ak_tokenizer_piece(const ak_tokenizer *t, int32_t id, bool special, char *buf, size_t cap, size_t *n_out,
                             ak_err *err);
ak_status ak_tokenizer_decode(const ak_tokenizer *t, const int32_t *ids, int n, bool special, char *buf, size_t cap,
                              size_t *n_out, ak_err *err);

int32_t ak_tokenizer_n_vocab(const ak_tokenizer *t);
int32_t ak_tokenizer_bos(const ak_tokenizer *t); /* -1 if none */
int32_t ak_tokenizer_eos(const ak_tokenizer *t); /* -1 if none */
int32_t ak_tokenizer_eot(const ak_tokenizer *t); /* -1 if none */
bool ak_tokenizer_add_bos(const ak_tokenizer *t);
/* End of generation: eos, eot, eom and control tokens such as <|im_end|>, <end_of_turn>. */
bool ak_tokenizer_is_eog(const ak_tokenizer *t, int32_t id);
/* The longest piece any token decodes to, in bytes. */
size_t ak_tokenizer_max_piece(const ak_tokenizer *t);
/* Every end-of-generation id (at most 16), for chain decode's on-device stop check. */
int ak_tokenizer_eog_ids(const ak_tokenizer *t, const int32_t **ids);
/* Control (3), user-defined (4) and unknown (2) tokens: the ones special text can name. */
bool ak_tokenizer_is_special(const ak_tokenizer *t, int32_t id);
/* Exact vocabulary lookup of a token's stored text (e.g. "<|im_start|>"); -1 if absent. */
int32_t ak_tokenizer_find(const ak_tokenizer *t, const char *text, size_t len);
/* The token's text as stored in the file (not NUL-terminated); NULL for a bad id. */
const char *ak_tokenizer_text(const ak_tokenizer *t, int32_t id, size_t *len);
const char *ak_tokenizer_model_name(const ak_tokenizer *t); /* "llama", "gpt2", "bert" */
const char *ak_tokenizer_pre_name(const ak_tokenizer *t);

/* Byte-level BPE only: use another pre-tokenizer (tokenizer.ggml.pre names: gpt2,
 * llama-bpe, qwen2, smollm, ...). For tests and tools. */
ak_status ak_tokenizer_set_pre(ak_tokenizer *t, const char *pre, ak_err *err);
/* The words that byte-level pre-tokenizer pre (a tokenizer.ggml.pre name) makes of
 * text, without special-token handling: each word's end byte offset into ends (up to
 * cap; AK_ERR_ARG when more), the count in *n_out; AK_ERR_UNSUPPORTED for an unknown name. */
ak_status ak_pretokenize(const char *pre, const char *text, size_t len, size_t *ends, int cap, int *n_out, ak_err *err);

/* Streaming detokenizer: never emits part of a UTF-8 character. An incomplete
 * sequence waits for the next token; bytes that cannot start or continue a valid
 * sequence come out as U+FFFD (one per maximal invalid subpart, as Python's
 * errors="replace"). It emits pieces as they are: meant for generated tokens, it does
 * not drop the space a SentencePiece prompt starts with. */
typedef struct {
    unsigned char pend[4]; /* start of an incomplete sequence */
    int npend;
    bool special;          /* emit control tokens' text */
} ak_detok;

void ak_detok_init(ak_detok *d, bool special);
/* The (buf, cap, &n) convention; a size query or a buffer too small consumes nothing.
 * Flush emits what is left (U+FFFD for an unfinished sequence). */
ak_status ak_detok_push(ak_detok *d, const ak_tokenizer *t, int32_t id, char *out, size_t cap, size_t *n_out,
                        ak_err *err);
ak_status ak_detok_flush(ak_detok *d, char *out, size_t cap, size_t *n_out, ak_err *err);

#endif
