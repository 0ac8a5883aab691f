/* Chat templates: recognise the family of a GGUF tokenizer.chat_template by its
 * distinctive text and render a conversation the way that template (run by HF
 * transformers' Jinja setup) would, with a small formatter per family. */
#ifndef AK_CHAT_H
#define AK_CHAT_H
#include <stdbool.h>
#include <stddef.h>
#include "akunu.h"

typedef enum {
    AK_CHAT_CHATML,       /* <|im_start|>role\n...<|im_end|>\n: SmolLM2, Qwen2/2.5, Hermes... */
    AK_CHAT_QWEN3,        /* ChatML plus Qwen3's <think> handling of assistant turns */
    AK_CHAT_LLAMA3,       /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    AK_CHAT_GEMMA,        /* <start_of_turn>user|model\n...<end_of_turn>\n (Gemma 1/2/3) */
    AK_CHAT_LLAMA2,       /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    AK_CHAT_MISTRAL,      /* <s>[INST] ... [/INST]...</s> (Mistral 7B Instruct v0.1/v0.2) */
    AK_CHAT_MISTRAL_NEMO, /* <s>[INST]...[/INST]...</s>, system before the last user turn */
    AK_CHAT_N_FAMILIES
} ak_chat_family;

typedef struct {
    ak_chat_family family;
    bool llama3_date;          /* Llama 3.1+: a system header with knowledge cutoff and date, and
                                  tool results as ipython turns holding a JSON string */
    bool tool_response;        /* Qwen 2.5 / 3: a run of tool messages becomes one user turn of
                                  <tool_response> blocks */
    char default_system[1024]; /* ChatML: system text the template inserts when the
                                  conversation has none; "" when it inserts none */
} ak_chat_template;

typedef struct {
    const char *bos, *eos;      /* the model's BOS / EOS token texts; NULL means "" */
    const char *date;           /* Llama 3.1+ "Today Date:"; NULL: "26 Jul 2024" (the templates' default) */
    bool add_generation_prompt; /* end with the header of an assistant turn (where the template has one) */
    bool disable_thinking;      /* Qwen3 enable_thinking=false: empty <think> block after the prompt */
    const char *tools;          /* a JSON array of tool definitions (OpenAI's); NULL or [] for none */
} ak_chat_opts;

/* "chatml", "qwen3", "llama3", "gemma", "llama2", "mistral", "mistral-nemo". */
const char *ak_chat_family_name(ak_chat_family f);

/* Plain ChatML without a default system message: a fallback for unknown templates. */
ak_chat_template ak_chat_template_chatml(void);

/* Family of a template text (need not be NUL-terminated). AK_ERR_UNSUPPORTED when the
 * text matches no family we render exactly. */
ak_status ak_chat_detect(const char *tmpl, size_t len, ak_chat_template *out, ak_err *err);

/* Render msgs[0..n) to NUL-terminated text in buf. *n_out receives the text length
 * (without the NUL) in every case where the conversation renders, so a caller can
 * pass buf = NULL, cap = 0 to learn the size (AK_OK), then allocate *n_out + 1.
 * AK_ERR_ARG: cap too small (buf then holds nothing useful), no messages, or a
 * conversation the template rejects (roles that do not alternate user/assistant,
 * a system message where the family has none). The text contains the BOS text where
 * the template puts it: tokenize it without adding another BOS. Role "tool" carries a
 * tool's result; an assistant message's tool_calls (JSON) render as the family writes
 * calls, and o->tools as it lists tools: ChatML (Qwen 2.5 / Hermes), Qwen3, Llama 3.1+;
 * other families refuse tools with AK_ERR_UNSUPPORTED. */
ak_status ak_chat_template_render(const ak_chat_template *t, const ak_chat_message *msgs, int n, const ak_chat_opts *o,
                         char *buf, size_t cap, size_t *n_out, ak_err *err);

/* The tool calls in a reply, as the family writes them: <tool_call>{"name", "arguments"}
 * </tool_call> blocks (ChatML, Qwen3), or the whole reply one {"name", "parameters"}
 * object (Llama 3.1+) or one {"name", "arguments"} object (ChatML, Qwen3: small models
 * drop the tags), perhaps in a ```json fence. *content: the rest of the reply (malloc'd; trimmed when calls
 * were found), *calls: malloc'd (ak_chat_calls_free). A block that does not parse stays
 * in the content. */
ak_status ak_chat_template_parse_calls(const ak_chat_template *t, const char *text, size_t len, ak_chat_call **calls,
                                       int *n_calls, char **content, ak_err *err);

#endif
