/* The vocabulary every tokenizer algorithm reads: the layout of ak_tokenizer (token
 * texts, types, a text -> id hash, byte-level BPE merges, a trie of the special tokens),
 * exact lookup, and the merge queue SentencePiece and BPE share. */
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

/* A node of the special-token trie: the text so far ends with byte; its children are
 * nodes child .. child + n_child - 1, sorted by byte. id_any / id_user: the smallest id
 * of a special / user-defined token whose whole text this node spells, or -1. */
typedef struct { uint32_t child, n_child; int32_t id_any, id_user; uint8_t byte; } ak_special_node;

struct ak_tokenizer {
    ak_tok_model model;
    ak_tok_pre pre;
    int32_t n_vocab;
    char *arena;               /* token texts, then decoded pieces */
    uint32_t *text_off, *text_len, *piece_off, *piece_len;
    uint32_t max_text_len;     /* the longest token text, in bytes */
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
    ak_special_node *special;  /* trie of the special tokens' texts; node 0 is the root */
    uint32_t special_root[256]; /* the root's child for each first byte; 0 = none */
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

/* Merge queue shared by SPM and BPE: the key of the pair that starts at each symbol,
 * priority << 32 | position (AK_PAIR_NONE: no pair there), lowest first, so that equal
 * priorities go leftmost first. A tournament tree: leaves t[n + i], each inner node
 * the smaller of its children t[2j], t[2j + 1], the smallest key at t[1]. */
#define AK_PAIR_NONE UINT64_MAX
typedef struct { uint64_t *t; size_t n, cap; } ak_pairq;
static inline uint64_t ak_pair_key(uint32_t prio, int pos) { return (uint64_t)prio << 32 | (uint32_t)pos; }
static inline int ak_pair_pos(uint64_t key) { return (int)(uint32_t)key; }
/* Room for n >= 1 leaves: set every one with ak_pairq_leaf, then ak_pairq_build. */
bool ak_pairq_reset(ak_pairq *q, size_t n);
static inline void ak_pairq_leaf(ak_pairq *q, size_t i, uint64_t key) { q->t[q->n + i] = key; }
void ak_pairq_build(ak_pairq *q);
static inline uint64_t ak_pairq_top(const ak_pairq *q) { return q->t[1]; }
void ak_pairq_set(ak_pairq *q, size_t i, uint64_t key);

#endif
