/* libFuzzer target: the server's request handling without a socket. Byte 0 picks the
 * endpoint (chat completions, completions, embeddings) and whether to go on; the rest is
 * the request body. ak_api_parse checks it into a job (chat template with tools,
 * tokenization, every parameter) or an OpenAI error; a job then gets its own body as
 * the "generated" text and is turned into the reply both ways, SSE chunks and one JSON
 * object, tool calls parsed from it where tools were given. Models: SmolLM2 (a ChatML
 * template) for generation, MiniLM for embeddings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server.h"

static ak_srv srv_gen, srv_emb;

static void open_model(ak_srv *s, const char *file) {
    char path[4096];
    ak_err err;
    snprintf(path, sizeof path, "%s/%s", AK_FUZZ_MODELS, file);
    if (ak_model_load(path, &s->m, &err)) {
        fprintf(stderr, "fuzz_server: %s (scripts/get-model all)\n", err.msg);
        exit(1);
    }
    snprintf(s->model_name, sizeof s->model_name, "%s", file);
    s->n_ctx = 512;
    s->o.max_tokens = 64;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    open_model(&srv_gen, "SmolLM2-135M-Instruct.Q4_1.gguf");
    open_model(&srv_emb, "all-MiniLM-L6-v2-f32.gguf");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const urls[] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/chat/completions"};
    int k = data[0] & 3;
    ak_srv *s = k == 2 ? &srv_emb : &srv_gen;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    ak_reply r = {0};
    ak_job *j = ak_api_parse(s, urls[k], body, len, &r);
    if (!j) {
        if (r.status < 400 || r.status > 599 || !r.body.len) abort();   /* an error must say so */
        ak_buf_free(&r.body);
        return 0;
    }
    if (data[0] & 4 && j->kind != AK_JOB_EMBED) {
        /* the body (valid UTF-8, as generated text always is) as the reply */
        ak_buf_add(&j->text, body, len);
        j->res.n_prompt = j->n_prompt;
        j->res.n_generated = 1;
        j->res.stop = (ak_stop_reason)(data[0] >> 3 & 3) + AK_STOP_EOG;
        j->stream = true;
        ak_api_stream_piece(j);
        ak_api_stream_end(j);
        ak_api_finish(j, &r);
        if (r.status != 200) abort();
    }
    ak_buf_free(&r.body);
    ak_job_release(j);
    return 0;
}
