/* GBNF grammars (the format of llama.cpp's grammars/ folder) and a matcher that follows
 * generated text byte by byte: which tokens may come next (a bitmask over the
 * vocabulary, computed from a trie of the tokens' bytes and cached per matcher state),
 * and whether the text so far is a whole sentence of the grammar (where end of
 * generation is allowed). Glossary: a "stack" is one pushdown-automaton path through the
 * rules; the matcher's state is the set of its live stacks. */
#ifndef AK_GRAMMAR_H
#define AK_GRAMMAR_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"
#include "model/tokenizer.h"

typedef struct ak_grammar ak_grammar;

/* Parses GBNF text (len bytes, need not be NUL-terminated): rules `name ::= ...`,
 * alternatives `|`, groups, `*` `+` `?` `{m}` `{m,}` `{m,n}`, string literals and
 * character classes (ranges, `^` negation, `.`) with escapes (\n \t \r \\ \" \] \xHH
 * \uHHHH \UHHHHHHHH), `#` comments. root names the start rule (NULL: "root").
 * AK_ERR_FORMAT with "line L, column C: ..." for a malformed grammar, an undefined rule,
 * or left recursion. */
ak_status ak_grammar_parse(const char *text, size_t len, const char *root, ak_grammar **out, ak_err *err);
void ak_grammar_free(ak_grammar *g);
/* A random sentence of the grammar into buf (for tests and fuzzing): alternatives drawn
 * from *rng while shallower than max_depth, shortest ones after. False when it does not
 * fit in cap bytes or the grammar has no finite sentence. */
bool ak_grammar_sample(const ak_grammar *g, uint64_t *rng, int max_depth, char *buf, size_t cap, size_t *n_out);

/* The vocabulary as the matcher sees it, built once per tokenizer: every token's bytes
 * (ak_tokenizer_piece, special = false) in a trie. n_vocab is the model's logit count,
 * which may exceed the tokenizer's (padded rows: never allowed). Control tokens and
 * empty pieces are never allowed, except the end-of-generation ids, allowed exactly
 * where the grammar can end. Matchers on several threads may share one: what it builds
 * at their first need (per loop class, the tokens that stay in it) is published
 * atomically and never changed after. */
typedef struct ak_gvocab ak_gvocab;
ak_status ak_gvocab_create(const ak_tokenizer *tok, int n_vocab, ak_gvocab **out, ak_err *err);
void ak_gvocab_free(ak_gvocab *v);
int ak_gvocab_n_vocab(const ak_gvocab *v);

/* A matcher: the grammar's state after the text accepted so far (v may be NULL when only
 * bytes are fed). Characters are Unicode code points of UTF-8 text; a token may end in
 * the middle of one. Matcher states are interned and their transitions and masks cached:
 * the tables grow amortised (no allocation once a state has been seen) and are bounded,
 * dropped between calls past their limits; the mask cache keeps 64 masks. */
typedef struct ak_gmatch ak_gmatch;
ak_status ak_gmatch_create(const ak_grammar *g, const ak_gvocab *v, ak_gmatch **out, ak_err *err);
void ak_gmatch_free(ak_gmatch *m);
/* Back to the start (nothing accepted). */
void ak_gmatch_reset(ak_gmatch *m);
/* Feeds n bytes; false (and the state unchanged) when the grammar cannot continue with them. */
bool ak_gmatch_accept_bytes(ak_gmatch *m, const char *s, size_t n);
/* The text so far is a whole sentence of the grammar. */
bool ak_gmatch_can_end(const ak_gmatch *m);
/* The tokens allowed now: bit i of mask[i / 32] for token i (ak_gvocab_n_vocab bits,
 * rounded up to whole words). Returns how many are allowed (0: a dead end, which a
 * well-formed grammar reaches only after a sentence ends without end-of-generation ids). */
int ak_gmatch_mask(ak_gmatch *m, uint32_t *mask);
/* Advances by one token's bytes: false (state unchanged) when the token is not allowed.
 * An end-of-generation id is accepted when the grammar can end, and changes nothing. */
bool ak_gmatch_accept_token(ak_gmatch *m, int32_t id);

#endif
