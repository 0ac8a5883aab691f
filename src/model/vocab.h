/* The vocabulary every tokenizer algorithm reads: the layout of ak_tokenizer (token
 * texts, types, a text -> id hash, byte-level BPE merges, special tokens), exact lookup,
 * and the merge queue SentencePiece and BPE share. */
#ifndef AK_VOCAB_H
#define AK_VOCAB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"

typedef struct ak_tokenizer ak_tokenizer;

/* tokenizer.ggml.token_type values */
enum { AK_TT_NORMAL = 1, AK_TT_UNKNOWN = 2, AK_TT_CONTROL = 3, AK_TT_USER = 4,
       AK_TT_UNUSED = 5, AK_TT_BYTE = 6 };

typedef enum { AK_TOK_SPM, AK_TOK_BPE, AK_TOK_WPM } ak_tok_model;
typedef enum { AK_PRE_GPT2, AK_PRE_LLAMA3, AK_PRE_QWEN2, AK_PRE_SMOLLM } ak_tok_pre;

enum { AK_TF_EOG = 1, AK_TF_SKIP = 2 /* piece is empty unless special */ };

struct ak_tokenizer {
    ak_tok_model model;
    ak_tok_pre pre;
    int32_t n_vocab;
    char *arena;               /* token texts, then decoded pieces */
    uint32_t *text_off, *text_len, *piece_off, *piece_len;
    float *scores;
    uint8_t *types, *flags;
    uint32_t *hash;            /* open addressing on text: id + 1, 0 = empty */
    uint32_t hash_mask;
    /* byte-level BPE merges: key (left << 32 | right) -> rank, merged id */
    uint64_t *merge_key;
    uint32_t *merge_rank;
    int32_t *merge_id;
    uint32_t merge_mask;
    int32_t byte_id[256];      /* SPM: <0xXX> token; BPE: token of the byte's mapped char */
    int32_t *special;          /* special ids grouped by first byte, longest first */
    uint32_t special_at[257];  /* start of each first-byte group in special */
    int32_t bos, eos, eot, eom, unk;
    uint32_t max_piece;        /* the longest decoded piece, bytes */
    int32_t eog[16];           /* every end-of-generation id, found once at load */
    int n_eog;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, lowercase;
    char pre_name[32];
};

/* Growing id output: counts past cap so the caller learns the size it needs. */
typedef struct { int32_t *ids; int cap; int n; } ak_tokout;
static inline void ak_tokout_push(ak_tokout *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* FNV-1a over the bytes: the hash of the text -> id table. */
uint32_t ak_vocab_hash(const char *s, size_t n);
int32_t ak_tok_lookup(const ak_tokenizer *t, const char *s, size_t len);
bool ak_tok_mergeable(const ak_tokenizer *t, int32_t id);

/* Merge queue shared by SPM and BPE: lowest priority first, then leftmost. */
typedef struct { double prio; int left, right; uint32_t len; } ak_bigram;
typedef struct { ak_bigram *a; size_t n, cap; } ak_bigram_heap;
bool ak_heap_push(ak_bigram_heap *h, ak_bigram b);
ak_bigram ak_heap_pop(ak_bigram_heap *h);

#endif
