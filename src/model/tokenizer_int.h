/* The tokenizer algorithms behind ak_tokenizer_encode: SentencePiece (tokenizer_spm.c),
 * byte-level BPE with its pre-tokenizers (tokenizer_bpe.c), WordPiece (tokenizer_wpm.c).
 * They read only the vocabulary (vocab.h). */
#ifndef AK_TOKENIZER_INT_H
#define AK_TOKENIZER_INT_H
#include "model/vocab.h"

/* Encode one run of text that holds no special token. after_special: the run starts
 * the text or follows a special token (SentencePiece's space-prefix rule). */
ak_status ak_spm_encode(const ak_tokenizer *t, const char *s, size_t len, bool after_special, ak_tokout *o);
ak_status ak_bpe_encode(const ak_tokenizer *t, const char *s, size_t len, ak_tokout *o);
ak_status ak_wpm_encode(const ak_tokenizer *t, const char *s, size_t len, ak_tokout *o);

/* Byte-level BPE support (tokenizer_bpe.c) */
uint32_t ak_bpe_byte_cp(unsigned char b);  /* GPT-2 byte -> unicode mapping */
int ak_bpe_cp_byte(uint32_t cp);           /* inverse; -1 if cp is not a mapped byte */
bool ak_bpe_pre_from_name(const char *name, ak_tok_pre *pre, bool *ignore_merges);
/* Pre-tokenizer words of s as end byte offsets; returns the count or -1 (no memory). */
long ak_bpe_split(ak_tok_pre pre, const char *s, size_t len, size_t **ends);

#endif
