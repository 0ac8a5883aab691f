/* UTF-8 decoding and the Unicode properties the tokenizers need (classes, whitespace,
 * lowercase, accent stripping), backed by the generated tables in unicode_data.h. */
#ifndef AK_UNICODE_H
#define AK_UNICODE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Codepoint classes (numbers shared with tools/gen_unicode.py). */
enum {
    AK_UC_OTHER = 0, /* unassigned, private use, surrogates, and invalid UTF-8 bytes */
    AK_UC_L = 1,     /* letters: Lu Ll Lt Lm Lo */
    AK_UC_N = 2,     /* numbers: Nd Nl No */
    AK_UC_P = 3,     /* punctuation: P* */
    AK_UC_S = 4,     /* symbols: S* */
    AK_UC_MN = 5,    /* nonspacing marks */
    AK_UC_M = 6,     /* other marks: Mc Me */
    AK_UC_Z = 7,     /* separators: Zs Zl Zp */
    AK_UC_CC = 8,    /* control characters */
    AK_UC_CF = 9,    /* format characters */
};

/* Returned by ak_utf8_next for a byte that does not start a valid sequence. */
#define AK_UTF8_INVALID 0xFFFFFFFFu

/* Decodes one codepoint at s[0..len) (len > 0); *adv = bytes used (1 for an invalid
 * byte, which yields AK_UTF8_INVALID). Rejects overlongs, surrogates, > U+10FFFF. */
uint32_t ak_utf8_next(const char *s, size_t len, size_t *adv);
/* Writes cp as UTF-8 into out (4 bytes room); returns the byte count (0 if invalid). */
int ak_utf8_put(uint32_t cp, char *out);
/* Length of the sequence a lead byte announces (1..4), 0 for a continuation or bad byte. */
int ak_utf8_lead_len(unsigned char b);

int ak_uc_class(uint32_t cp); /* AK_UC_OTHER for AK_UTF8_INVALID */
/* Regex \s: U+0009..U+000D, U+0085, and the Z classes (same set as White_Space). */
bool ak_uc_is_space(uint32_t cp);
uint32_t ak_uc_lower(uint32_t cp);
/* Canonical decomposition with nonspacing marks removed; writes up to 3 codepoints,
 * returns how many (cp itself when it has no decomposition; 0 for a lone Mn mark). */
int ak_uc_strip_accents(uint32_t cp, uint32_t out[3]);
/* The CJK ideograph blocks that BERT's basic tokenizer isolates. */
bool ak_uc_is_cjk(uint32_t cp);

#endif
