/* akunu public C API: load a model once; text in and text out (tokenizer, chat
 * templates, sampling, ak_generate); the token-level calls under it (prefill, decode,
 * chain decode) and sentence embeddings. Every front end (the CLI, the server,
 * bindings) uses this header alone.
 *
 * Conventions: fallible calls return ak_status (AK_OK = 0) and fill an ak_err; sizes and
 * counts come back through out-parameters. A call that writes into a caller's buffer
 * takes (buf, cap, &n): *n receives the size the result needs; buf = NULL with cap = 0
 * only asks for that size (AK_OK); a buffer too small gives AK_ERR_ARG with *n set. The
 * library reads no environment variables and prints nothing. */
#ifndef AKUNU_H
#define AKUNU_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports (it is built with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define AK_API __attribute__((visibility("default")))
#else
#define AK_API
#endif

typedef enum {
    AK_OK = 0,
    AK_ERR_IO,          /* file could not be opened, read or mapped */
    AK_ERR_FORMAT,      /* the bytes do not follow the format */
    AK_ERR_UNSUPPORTED, /* valid input we do not handle (architecture, tensor type) */
    AK_ERR_NOMEM,
    AK_ERR_ARG,         /* caller passed something out of range */
    AK_ERR_BACKEND,
} ak_status;

/* Every fallible call fills one of these; msg is always NUL-terminated. */
typedef struct { char msg[512]; } ak_err;

typedef struct ak_model ak_model;
typedef struct ak_session ak_session;

/* ---- Diagnostics and debug knobs ---------------------------------------------------
 * Off by default. The CLI fills them from AKUNU_* environment variables; the library
 * never reads the environment. They are process-wide: set them before creating
 * sessions. Diagnostics (CUDA traces and profiles) go to log, one line per call. */
typedef void (*ak_log_fn)(const char *line, void *user);
typedef struct {
    bool cpu_scalar;       /* the portable scalar kernels only (no AVX2 / AVX-512) */
    bool cpu_no_vnni;      /* no VNNI int8 dot products */
    bool cpu_act_f32;      /* float activations for quantized weights, not 8-bit */
    bool cuda_no_pdl;      /* no programmatic dependent launch between kernels */
    bool cuda_stats;       /* log the host time of every replay */
    bool cuda_profile;     /* time every command (no graphs); logged when the session ends */
    bool cuda_trace;       /* log the timeline of decode position cuda_trace_pos */
    int cuda_trace_pos;
    const char *cuda_skip; /* decode command labels to leave out (measuring only: wrong output) */
    ak_log_fn log;         /* NULL: diagnostics go nowhere */
    void *log_user;
} ak_debug;
AK_API void ak_set_debug(const ak_debug *d);   /* NULL: all off */

/* ---- Models ------------------------------------------------------------------------ */

/* A GGUF file, or a Hugging Face / MLX safetensors directory. A GGUF file's tokenizer
 * and chat template are loaded with it. */
AK_API ak_status ak_model_load(const char *path, ak_model **out, ak_err *err);
AK_API void ak_model_free(ak_model *m);
AK_API int ak_model_vocab(const ak_model *m);
AK_API int ak_model_dim(const ak_model *m);
AK_API int ak_model_n_ctx_train(const ak_model *m);
AK_API const char *ak_model_arch_name(const ak_model *m);
AK_API bool ak_model_is_encoder(const ak_model *m);
/* Weight bytes one decode step reads (every matrix once, one embedding row), the number
 * of weight parameters, and the size of the file. */
AK_API uint64_t ak_model_decode_bytes(const ak_model *m);
AK_API uint64_t ak_model_params(const ak_model *m);
AK_API uint64_t ak_model_file_bytes(const ak_model *m);

/* ---- Tokenizer ---------------------------------------------------------------------
 * From the GGUF file (SentencePiece, byte-level BPE, WordPiece). A model without one
 * (a Hugging Face directory) fails these calls with AK_ERR_UNSUPPORTED. */
AK_API bool ak_model_has_tokenizer(const ak_model *m);

/* Text (len bytes, need not be NUL-terminated) to ids. add_special: BOS/EOS as the file
 * says. parse_special: text spelling a control token (e.g. "<|im_start|>") becomes that
 * token; otherwise it is tokenized as plain text. */
AK_API ak_status ak_tokenize(const ak_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *ids, int cap, int *n_out, ak_err *err);
/* The bytes a token stands for; control tokens give "" unless special. Writes a NUL
 * after the bytes when cap leaves room. */
AK_API ak_status ak_token_to_piece(const ak_model *m, int32_t id, bool special, char *buf, size_t cap, size_t *n_out,
                            ak_err *err);
/* A whole sequence back to text (the SentencePiece space before the first word dropped). */
AK_API ak_status ak_detokenize(const ak_model *m, const int32_t *ids, int n, bool special, char *buf, size_t cap,
                        size_t *n_out, ak_err *err);
/* -1 where the model has none. */
AK_API int32_t ak_token_bos(const ak_model *m);
AK_API int32_t ak_token_eos(const ak_model *m);
AK_API int32_t ak_token_eot(const ak_model *m);
/* Does the tokenizer put BOS before a text (add_special)? */
AK_API bool ak_model_adds_bos(const ak_model *m);
/* End of generation: EOS, EOT and the turn-end control tokens (<|im_end|>, <end_of_turn>...). */
AK_API bool ak_token_is_eog(const ak_model *m, int32_t id);

/* Streaming detokenizer for generated tokens: never emits part of a UTF-8 character (an
 * incomplete one waits for the next token; bytes that can never form one come out as
 * U+FFFD). Push writes the text that is complete; buf = NULL, cap = 0 asks for its size
 * and consumes nothing. Flush emits what is left at the end. */
typedef struct ak_detokenizer ak_detokenizer;
AK_API ak_status ak_detokenizer_create(const ak_model *m, bool special, ak_detokenizer **out, ak_err *err);
AK_API ak_status ak_detokenizer_push(ak_detokenizer *d, int32_t id, char *buf, size_t cap, size_t *n_out, ak_err *err);
AK_API ak_status ak_detokenizer_flush(ak_detokenizer *d, char *buf, size_t cap, size_t *n_out, ak_err *err);
AK_API void ak_detokenizer_reset(ak_detokenizer *d);
AK_API void ak_detokenizer_free(ak_detokenizer *d);

/* ---- Chat templates ----------------------------------------------------------------
 * The file's tokenizer.chat_template, recognised by family (ChatML / Qwen 2.5, Qwen3,
 * Llama 3.x, Gemma, Llama 2, Mistral, Mistral Nemo) and rendered byte for byte as the
 * Jinja template renders it. Roles: system, user, assistant, tool. */
typedef struct {
    const char *role;
    const char *content;      /* may be NULL in an assistant message that only calls tools */
    const char *tool_calls;   /* assistant: the calls it made, a JSON array of OpenAI's
                                 {"type": "function", "function": {"name", "arguments"}} (or
                                 bare {"name", "arguments"}); arguments an object or a string of one */
} ak_chat_message;

/* The raw template text of the file (NUL-terminated), or NULL when it has none. */
AK_API const char *ak_model_chat_template(const ak_model *m);
/* The family the model renders with ("chatml", "qwen3", "llama3", "gemma", "llama2",
 * "mistral", "mistral-nemo"), or NULL: no template, or one that is not recognised. */
AK_API const char *ak_model_chat_family(const ak_model *m);
/* Use another template: a family name as above, or a template text to recognise. */
AK_API ak_status ak_model_set_chat_template(ak_model *m, const char *name_or_text, ak_err *err);
/* The conversation as the template renders it, NUL-terminated in *out (malloc'd: the
 * caller frees it). It holds BOS where the template puts it: tokenize it with
 * add_special = false and parse_special = true. AK_ERR_UNSUPPORTED: the model has no
 * template we render; AK_ERR_ARG: the template rejects the conversation (roles that do
 * not alternate, a role the family lacks). */
AK_API ak_status ak_chat_render(const ak_model *m, const ak_chat_message *msgs, int n, bool add_generation_prompt,
                         char **out, ak_err *err);

/* As ak_chat_render, with tool definitions: tools is a JSON array of OpenAI's tool
 * objects, listed the way the family's template lists them (ChatML / Qwen 2.5 and the
 * Hermes-style ChatML models, Qwen3, Llama 3.1+); other families: AK_ERR_UNSUPPORTED. */
AK_API ak_status ak_chat_render_tools(const ak_model *m, const ak_chat_message *msgs, int n, const char *tools,
                                      bool add_generation_prompt, char **out, ak_err *err);

/* A tool call found in a reply: the function's name, and its arguments as JSON object text. */
typedef struct {
    char *name;
    char *arguments;
} ak_chat_call;
/* The tool calls a reply makes, in the model's family's format (<tool_call> blocks for
 * ChatML and Qwen, a {"name", "parameters"} reply for Llama 3.1+). *content receives the
 * rest of the reply and *calls the calls (both malloc'd; free the calls with
 * ak_chat_calls_free). A call that does not parse stays in the content. */
AK_API ak_status ak_chat_parse_calls(const ak_model *m, const char *text, size_t len, ak_chat_call **calls, int *n_calls,
                                     char **content, ak_err *err);
AK_API void ak_chat_calls_free(ak_chat_call *calls, int n);

/* ---- Sessions: the KV cache, the dispatch tables and a backend ---------------------- */

/* The KV cache's element type. AUTO: F16 on the CUDA backend (its prefill attention runs
 * on tensor cores from an F16 cache, and the cache is half the size), F32 on the CPU
 * (exact, and its attention reads F32 rows without a conversion) and for encoders. Q8_0
 * and Q4_0 (ggml's blocks of 32: a quarter and an eighth of F32's bytes, plus a scale a
 * block) need a head dimension that is a multiple of 32; the CPU backend takes them, K
 * and V each. */
typedef enum { AK_KV_F32 = 0, AK_KV_F16 = 1, AK_KV_AUTO = 2, AK_KV_Q8_0 = 3, AK_KV_Q4_0 = 4 } ak_kv_type;
typedef enum { AK_BACKEND_CPU = 0, AK_BACKEND_CUDA, AK_BACKEND_AUTO } ak_backend_kind;

typedef struct {
    int n_ctx;          /* 0: the model's context length, capped at 4096 */
    int chunk;          /* prefill chunk size in tokens; 0: 512 */
    int n_threads;      /* 0: one per core */
    ak_kv_type kv_type;     /* the K cache's, and the V cache's unless kv_type_v says otherwise */
    ak_kv_type kv_type_v;   /* the V cache's; AUTO (the default params'): as the K cache's */
    bool logits_all;    /* prefill keeps logits for every position, not only the last */
    ak_backend_kind backend; /* CPU by default; AUTO: CUDA if a GPU is present */
} ak_session_params;

AK_API ak_session_params ak_session_default_params(void);
AK_API ak_status ak_session_create(ak_model *m, const ak_session_params *p, ak_session **out, ak_err *err);
AK_API void ak_session_free(ak_session *s);

/* Name of the backend a session runs on ("cpu", "cuda"). */
AK_API const char *ak_session_backend(const ak_session *s);
/* CPU worker threads of the session (1 for GPU backends). */
AK_API int ak_session_threads(const ak_session *s);
/* The K and V cache types the session runs with (AUTO resolved). */
AK_API ak_kv_type ak_session_kv_type(const ak_session *s);
AK_API ak_kv_type ak_session_kv_type_v(const ak_session *s);
/* "f32", "f16", "q8_0", "q4_0", "auto"; and back (false: not one of them). */
AK_API const char *ak_kv_type_name(ak_kv_type t);
AK_API bool ak_kv_type_from_name(const char *name, ak_kv_type *out);
/* "cpu", "cuda" or "auto" as a backend kind (false: none of them). */
AK_API bool ak_backend_from_name(const char *name, ak_backend_kind *out);
/* Whether this build has the CUDA backend and a GPU is present. */
AK_API bool ak_cuda_available(void);
/* Number of commands the decode table runs per token (an encoder's table: per call). */
AK_API int ak_session_table_size(const ak_session *s);
/* Command i of that table as the backend runs it: label, kernel and the neighbours' work
 * fused into it, e.g. "layer.0.qkv  gemv (norm in)" (on a GPU a GEMV whose segments have
 * two weight types is a launch per type). false when i is out of range. */
AK_API bool ak_session_table_command(const ak_session *s, int i, char *buf, size_t size);
AK_API int ak_session_pos(const ak_session *s);
AK_API int ak_session_n_ctx(const ak_session *s);
/* The ids whose keys and values the KV cache holds, [0, pos). */
AK_API const int32_t *ak_session_tokens(const ak_session *s);
/* Forget the KV cache contents (position back to 0). */
AK_API void ak_session_reset(ak_session *s);
/* Keep only the first pos tokens of the KV cache (pos <= the current position), so a
 * conversation can continue from a common prefix. AK_ERR_ARG beyond ak_session_keep's reach. */
AK_API ak_status ak_session_rewind(ak_session *s, int pos, ak_err *err);
/* The largest position <= pos (and <= the current one) that ak_session_rewind can go back
 * to: pos itself, or else 0. A sliding-window layer's cache is a ring of its window and a
 * prefill chunk (CPU and CUDA), so rewinding needs the window before the new position
 * still there: a prefix reused from further back is prefilled again. */
AK_API int ak_session_keep(const ak_session *s, int pos);
/* The KV cache of one kind of layer: global layers keep every position of the context;
 * sliding-window layers (Gemma 2 and 3) a ring of rows. */
typedef struct {
    int layers;         /* layers of this kind */
    int rows;           /* positions each keeps per KV head */
    size_t bytes;       /* their K and V caches together */
} ak_kv_layers;
AK_API void ak_session_kv_layers(const ak_session *s, ak_kv_layers *global, ak_kv_layers *sliding);
/* Read bandwidth of the session's memory (host RAM or GPU memory), GB/s, measured now. */
AK_API ak_status ak_session_bandwidth(ak_session *s, double *gbps, ak_err *err);

/* ---- Sampling and generation -------------------------------------------------------- */

/* A zeroed struct is greedy decoding. Filters apply in llama.cpp's default order:
 * penalties, top-k, top-p, min-p (on probabilities at temperature 1), temperature, draw. */
typedef struct {
    float temperature;       /* <= 0: greedy (the first index of the largest logit) */
    int top_k;               /* keep the k most likely; <= 0: off; 1: greedy */
    float top_p;             /* keep the fewest most likely whose probability reaches top_p; 0 or >= 1: off */
    float min_p;             /* drop tokens less likely than min_p times the most likely; <= 0: off */
    float repeat_penalty;    /* 0 or 1: off; > 1 divides positive logits of recent tokens (multiplies negative) */
    float presence_penalty;  /* subtracted once from the logit of every recent token */
    float frequency_penalty; /* subtracted per occurrence among the recent tokens */
    int penalty_last_n;      /* how many recent tokens (prompt included) the penalties see */
    uint64_t seed;
} ak_sampling_params;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, penalties off over 64 tokens, seed 0 */
AK_API ak_sampling_params ak_sampling_default_params(void);

/* How ak_prefill, ak_decode and ak_chain_decode choose the next token from now on: the
 * table's sample command, on the device, so a sampled chain runs with no host round trip.
 * NULL (the default) is greedy argmax. The draw at each position is keyed by (seed,
 * position): the same seed gives the same ids whatever the chain lengths or prefill
 * chunks. The table takes top_k in 1..128 (or greedy), a penalty window of at most 4096
 * tokens and vocabularies up to 524288; other settings give AK_ERR_UNSUPPORTED
 * (ak_generate samples those on the host). ak_generate sets its own and restores greedy. */
AK_API ak_status ak_session_set_sampling(ak_session *s, const ak_sampling_params *p, ak_err *err);

typedef enum {
    AK_STOP_NONE = 0,
    AK_STOP_EOG,        /* the model ended its turn (an end-of-generation token) */
    AK_STOP_STRING,     /* a stop string appeared: the text ends before it */
    AK_STOP_LENGTH,     /* n_predict tokens */
    AK_STOP_CONTEXT,    /* the context is full */
    AK_STOP_CANCELLED,  /* the callback asked to stop */
} ak_stop_reason;

/* Receives the text as it becomes final: whole UTF-8 characters, never the start of a
 * stop string. Returns non-zero to stop generating. */
typedef int (*ak_piece_fn)(const char *text, size_t len, void *user);

/* A generated token and how likely the model found it and its alternatives. */
typedef struct {
    int32_t id;
    float logprob;
} ak_token_prob;
typedef struct {
    int32_t id;
    float logprob;                /* log p(id): the model's distribution (temperature 1, no penalties or filters) */
    const ak_token_prob *top;     /* the n_top most likely tokens, best first */
    int n_top;
} ak_token_info;
/* Receives every generated token but an end-of-generation one, before its text reaches
 * on_piece. Returns non-zero to stop generating. */
typedef int (*ak_token_fn)(const ak_token_info *t, void *user);

typedef struct {
    int n_predict;                /* most tokens to generate; < 0: until the turn or the context ends */
    ak_sampling_params sampling;
    const char *const *stop;      /* stop strings (n_stop of them; empty ones are ignored) */
    int n_stop;
    bool special;                 /* emit control tokens' text; an end-of-generation token never shows */
    int32_t *ids_out;             /* optional: the generated ids (at most ids_cap), EOG token included */
    int ids_cap;
    ak_token_fn on_token;         /* optional; brings every step's logits to the host (no chain decode) */
    void *token_user;
    int n_top;                    /* alternatives on_token receives, 0..AK_MAX_TOP */
    const char *grammar;          /* optional: GBNF (llama.cpp's format, start rule "root") the reply follows;
                                     end of generation is allowed only where a sentence of it is complete */
    const char *grammar_after;    /* optional: the grammar applies only after this text has been generated
                                     (a thinking model's "</think>"); the reasoning before it is free */
    int spec_draft;               /* speculative decoding: up to this many drafted tokens are checked in one
                                     pass of the model (0: off; at most AK_SPEC_MAX). The reply is the one
                                     decoding gives without it, greedy or sampled (the draws are keyed by
                                     position): on the CPU the check rounds every row bit for bit as its
                                     decode step; the CUDA backend checks with its prefill kernels, whose
                                     different rounding can flip a near tie */
    ak_session *draft;            /* with spec_draft: a session of a draft model with the same vocabulary,
                                     which writes the drafts; NULL: n-gram lookup in the prompt and the reply */
} ak_generate_params;
#define AK_SPEC_MAX 16
#define AK_MAX_TOP 20

/* n_predict -1, greedy, no stop strings. */
AK_API ak_generate_params ak_generate_default_params(void);

/* ---- Structured output: grammars for ak_generate_params.grammar ----------------------- */

/* Whether GBNF text parses: AK_ERR_ARG with "line L, column C: ..." when it does not. */
AK_API ak_status ak_grammar_check(const char *gbnf, ak_err *err);
/* The grammar of any JSON object (OpenAI's response_format {"type": "json_object"}). */
AK_API const char *ak_grammar_json_object(void);
/* The grammar of the JSON texts that validate against a JSON Schema (len bytes of JSON),
 * in *gbnf (malloc'd: free it). Properties come in the schema's order; keywords a
 * grammar cannot keep give AK_ERR_UNSUPPORTED naming them. */
AK_API ak_status ak_json_schema_to_grammar(const char *schema, size_t len, char **gbnf, ak_err *err);
/* The grammar of one tool call as the model's chat family writes it (the <tool_call>
 * block of ChatML / Qwen, Llama 3.1's {"name", "parameters"} reply), to one of the tools
 * (a JSON array of OpenAI's tool objects) or, when name is not NULL, to that one, with
 * the arguments following its parameters' schema. ak_chat_parse_calls reads the reply.
 * AK_ERR_UNSUPPORTED: a family without tool calls; AK_ERR_ARG: no such tool. */
AK_API ak_status ak_chat_tool_grammar(const ak_model *m, const char *tools, const char *name, char **gbnf, ak_err *err);

typedef struct {
    int n_prompt;                 /* prompt tokens */
    int n_cached;                 /* of which the KV cache already held (not prefilled again) */
    int n_generated;              /* generated tokens, an end-of-generation token included */
    ak_stop_reason stop;
    double prefill_seconds, decode_seconds;
    int n_drafted, n_accepted;    /* speculative decoding: drafted tokens, and those the model agreed with */
} ak_generate_result;

/* Generates a reply to prompt[0..n), the whole context: the session keeps the longest
 * prefix of it that its KV cache already holds and prefills the rest, then decodes
 * (chain decode with no host round trip when greedy), streaming text to on_piece (may
 * be NULL). Afterwards the cache holds the prompt and the generated tokens but the last. */
AK_API ak_status ak_generate(ak_session *s, const int32_t *prompt, int n, const ak_generate_params *p, ak_piece_fn on_piece,
                      void *user, ak_generate_result *result, ak_err *err);

/* ---- Tokens in, tokens out ---------------------------------------------------------- */

/* Run the prompt through the prefill path from the current position.
 * *next receives the next token (greedy, unless ak_session_set_sampling said otherwise). With logits_all, logits holds n*vocab
 * floats (row i = position pos+i); otherwise vocab floats for the last position.
 * logits may be NULL. */
AK_API ak_status ak_prefill(ak_session *s, const int32_t *ids, int n, int32_t *next, float *logits, ak_err *err);

/* One token through the decode table: writes the next token (as ak_prefill) and, if
 * logits is not NULL, vocab floats (after the penalties, when sampling applies them). */
AK_API ak_status ak_decode(ak_session *s, int32_t token, int32_t *next, float *logits, ak_err *err);

/* Chain decode: starting from token, generate up to n tokens with no host
 * round trip between them. out receives the generated ids; stops after a token
 * listed in stop (included). Returns the count in *n_out. */
AK_API ak_status ak_chain_decode(ak_session *s, int32_t token, int n, const int32_t *stop, int n_stop,
                          int32_t *out, int *n_out, ak_err *err);

/* ---- Embeddings (encoder models, BERT family) ----------------------------------------
 * ak_embed runs one sequence from position 0: hidden receives n*dim floats (may be NULL),
 * pooled dim floats by the model's pooling (mean, CLS or last; may be NULL),
 * L2-normalised if normalize. ak_embed_batch takes several sequences of different
 * lengths; pooled receives n_seq*dim floats. */
AK_API ak_status ak_embed(ak_session *s, const int32_t *ids, int n, float *hidden, float *pooled, bool normalize, ak_err *err);
AK_API ak_status ak_embed_batch(ak_session *s, const int32_t *const *ids, const int *lens, int n_seq, float *pooled,
                         bool normalize, ak_err *err);

#ifdef __cplusplus
}
#endif
#endif
