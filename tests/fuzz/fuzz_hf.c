/* libFuzzer target: a Hugging Face checkpoint folder → ak_model_load(dir). The input is
 * up to three files joined by marker lines, the way `head` prints several files:
 *     config.json bytes
 *     \n==> model.safetensors <==\n               safetensors bytes
 *     \n==> model.safetensors.index.json <==\n    index bytes (optional)
 * They are written into one folder per process (made once, rewritten every run, removed
 * at exit), since the loader reads a directory and nothing else. */
#include "akunu.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEP_ST "\n==> model.safetensors <==\n"
#define SEP_IDX "\n==> model.safetensors.index.json <==\n"

static char dir[64];
static char path_cfg[96], path_st[96], path_idx[96];
static volatile uint8_t sink;

static void cleanup(void) {
    unlink(path_cfg);
    unlink(path_st);
    unlink(path_idx);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/akunu-fuzz-hf-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("fuzz_hf: mkdtemp");
        exit(1);
    }
    snprintf(path_cfg, sizeof path_cfg, "%s/config.json", dir);
    snprintf(path_st, sizeof path_st, "%s/model.safetensors", dir);
    snprintf(path_idx, sizeof path_idx, "%s/model.safetensors.index.json", dir);
    atexit(cleanup);
    return 0;
}

/* The file holds exactly n bytes from p; p == NULL: the file is absent. */
static void put(const char *path, const uint8_t *p, size_t n) {
    unlink(path);
    if (!p) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort(); /* the harness's own folder: nothing the library did */
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) abort();
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

static const uint8_t *find(const uint8_t *p, size_t n, const char *s) {
    return memmem(p, n, s, strlen(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *end = data + size, *st = NULL, *idx = NULL;
    const uint8_t *s1 = find(data, size, SEP_ST);
    size_t n_cfg = s1 ? (size_t)(s1 - data) : size, n_st = 0, n_idx = 0;
    if (s1) {
        st = s1 + strlen(SEP_ST);
        const uint8_t *s2 = find(st, (size_t)(end - st), SEP_IDX);
        n_st = (size_t)((s2 ? s2 : end) - st);
        if (s2) {
            idx = s2 + strlen(SEP_IDX);
            n_idx = (size_t)(end - idx);
        }
    }
    put(path_cfg, data, n_cfg);
    put(path_st, st, n_st);
    put(path_idx, idx, n_idx);
    ak_model *m;
    ak_err err;
    if (ak_model_load(dir, &m, &err)) return 0;
    sink ^= (uint8_t)(ak_model_decode_bytes(m) ^ ak_model_params(m) ^ ak_model_file_bytes(m));
    sink ^= (uint8_t)(ak_model_vocab(m) ^ ak_model_dim(m) ^ ak_token_eos(m) ^ ak_model_is_encoder(m));
    ak_model_free(m);
    return 0;
}
