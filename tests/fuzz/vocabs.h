/* The vocabularies the text targets run over, loaded once: every tokenizer kind, real
 * ones where we have them. Byte 0 of an input picks one (its value modulo the count). */
#ifndef AK_FUZZ_VOCABS_H
#define AK_FUZZ_VOCABS_H
#include "model/tokenizer.h"

/* 0 SmolLM2 (byte-level BPE, smollm), 1 the llama fixture (SentencePiece, all byte
 * tokens), 2 the gemma3 fixture (SentencePiece), 3 the BERT fixture (WordPiece),
 * 4 Qwen2.5-Coder (byte-level BPE, qwen2; the default model). Exits when one is missing:
 * scripts/get-model all fetches the real ones. */
enum { AK_FUZZ_N_VOCABS = 5 };
extern ak_tokenizer *ak_fuzz_vocab[AK_FUZZ_N_VOCABS];
void ak_fuzz_load_vocabs(void);

#endif
