/* Loads the fuzz targets' vocabularies from the fixtures and models/ (paths given by
 * CMake: AK_FUZZ_FIXTURES, AK_FUZZ_MODELS). */
#include "vocabs.h"
#include <stdio.h>
#include <stdlib.h>
#include "format/gguf.h"

ak_tokenizer *ak_fuzz_vocab[AK_FUZZ_N_VOCABS];

static ak_tokenizer *load(const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    ak_gguf *g = NULL;
    ak_tokenizer *t = NULL;
    ak_err err;
    if (ak_gguf_open(path, &g, &err) || ak_tokenizer_load(g, &t, &err)) {
        fprintf(stderr, "fuzz: cannot load the vocabulary of %s: %s (scripts/get-model all)\n", path, err.msg);
        exit(1);
    }
    ak_gguf_close(g);
    return t;
}

void ak_fuzz_load_vocabs(void) {
    if (ak_fuzz_vocab[0]) return;
    ak_fuzz_vocab[0] = load(AK_FUZZ_MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf");
    ak_fuzz_vocab[1] = load(AK_FUZZ_FIXTURES, "llama/llama-f32.gguf");
    ak_fuzz_vocab[2] = load(AK_FUZZ_FIXTURES, "gemma3/gemma3-f32.gguf");
    ak_fuzz_vocab[3] = load(AK_FUZZ_FIXTURES, "bert/bert-f32.gguf");
    ak_fuzz_vocab[4] = load(AK_FUZZ_MODELS, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
}
