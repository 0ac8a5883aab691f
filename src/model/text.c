/* The model's text side in the public API: its tokenizer and chat template, read once
 * at load, behind ak_tokenize, ak_detokenize, the streaming detokenizer and
 * ak_chat_render. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "model/model.h"

static char *dup_text(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        if (n) memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

static char *token_text(const ak_tokenizer *t, int32_t id) {
    size_t len = 0;
    const char *p = id >= 0 ? ak_tokenizer_text(t, id, &len) : NULL;
    return p ? dup_text(p, len) : NULL;
}

ak_status ak_model_load_text(ak_model *m, ak_err *err) {
    if (!m->gguf) return AK_OK;
    ak_str s;
    if (ak_gguf_get_str(m->gguf, "tokenizer.ggml.model", &s)) {
        ak_status st = ak_tokenizer_load(m->gguf, &m->tok, err);
        /* an algorithm we lack leaves the weights usable with ids; broken bytes do not */
        if (st == AK_ERR_UNSUPPORTED) {
            snprintf(m->tok_why, sizeof m->tok_why, "%s", err ? err->msg : "tokenizer not supported");
            m->tok = NULL;
        } else if (st) {
            return st;
        }
    }
    if (m->tok) {
        m->bos = ak_tokenizer_bos(m->tok);
        m->eos = ak_tokenizer_eos(m->tok);
        m->bos_text = token_text(m->tok, m->bos);
        m->eos_text = token_text(m->tok, m->eos);
    }
    if (ak_gguf_get_str(m->gguf, "tokenizer.chat_template", &s)) {
        if (!(m->chat_text = dup_text(s.ptr, s.len))) return ak_fail(err, AK_ERR_NOMEM, "model: out of memory");
        ak_err e = {{0}};
        m->chat_ok = ak_chat_detect(s.ptr, s.len, &m->chat, &e) == AK_OK;
        if (!m->chat_ok) snprintf(m->chat_why, sizeof m->chat_why, "%s", e.msg);
    }
    return AK_OK;
}

void ak_model_free_text(ak_model *m) {
    ak_tokenizer_free(m->tok);
    free(m->chat_text);
    free(m->bos_text);
    free(m->eos_text);
}

/* ---- tokenizer -------------------------------------------------------------------- */

static ak_status need_tok(const ak_model *m, ak_err *err) {
    if (!m) return ak_fail(err, AK_ERR_ARG, "NULL model");
    if (m->tok) return AK_OK;
    if (m->tok_why[0]) return ak_fail(err, AK_ERR_UNSUPPORTED, "%s", m->tok_why);
    return ak_fail(err, AK_ERR_UNSUPPORTED, "this model has no tokenizer%s",
                   m->gguf ? " (the GGUF file has no tokenizer.ggml metadata)"
                           : " (a Hugging Face directory: tokenizer.json is not read; pass token ids)");
}

bool ak_model_has_tokenizer(const ak_model *m) { return m->tok != NULL; }

ak_status ak_tokenize(const ak_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *ids, int cap, int *n_out, ak_err *err) {
    ak_status st = need_tok(m, err);
    if (st) return st;
    if (!n_out || (!ids && cap) || cap < 0) return ak_fail(err, AK_ERR_ARG, "tokenize: bad arguments");
    st = ak_tokenizer_encode(m->tok, text, len, add_special, parse_special, ids, cap, n_out, err);
    return st == AK_ERR_ARG && !ids && !cap ? AK_OK : st;   /* a size query */
}

ak_status ak_token_to_piece(const ak_model *m, int32_t id, bool special, char *buf, size_t cap, size_t *n_out,
                            ak_err *err) {
    ak_status st = need_tok(m, err);
    if (st) return st;
    if (!n_out) return ak_fail(err, AK_ERR_ARG, "token piece: NULL size");
    return ak_tokenizer_piece(m->tok, id, special, buf, cap, n_out, err);
}

ak_status ak_detokenize(const ak_model *m, const int32_t *ids, int n, bool special, char *buf, size_t cap,
                        size_t *n_out, ak_err *err) {
    ak_status st = need_tok(m, err);
    if (st) return st;
    if (!n_out) return ak_fail(err, AK_ERR_ARG, "detokenize: NULL size");
    return ak_tokenizer_decode(m->tok, ids, n, special, buf, cap, n_out, err);
}

int32_t ak_token_bos(const ak_model *m) { return m->bos; }
int32_t ak_token_eos(const ak_model *m) { return m->eos; }
int32_t ak_token_eot(const ak_model *m) { return m->tok ? ak_tokenizer_eot(m->tok) : -1; }
bool ak_model_adds_bos(const ak_model *m) { return m->tok && ak_tokenizer_add_bos(m->tok); }

bool ak_token_is_eog(const ak_model *m, int32_t id) {
    return m->tok ? ak_tokenizer_is_eog(m->tok, id) : id >= 0 && id == m->eos;
}

int ak_model_eog_ids(const ak_model *m, const int32_t **ids) {
    if (m->tok) return ak_tokenizer_eog_ids(m->tok, ids);
    *ids = &m->eos;
    return m->eos >= 0;
}

/* ---- streaming detokenizer --------------------------------------------------------- */

struct ak_detokenizer {
    const ak_tokenizer *tok;
    ak_detok d;
};

ak_status ak_detokenizer_create(const ak_model *m, bool special, ak_detokenizer **out, ak_err *err) {
    *out = NULL;
    ak_status st = need_tok(m, err);
    if (st) return st;
    ak_detokenizer *d = calloc(1, sizeof *d);
    if (!d) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    d->tok = m->tok;
    ak_detok_init(&d->d, special);
    *out = d;
    return AK_OK;
}

ak_status ak_detokenizer_push(ak_detokenizer *d, int32_t id, char *buf, size_t cap, size_t *n_out, ak_err *err) {
    if (!d || !n_out) return ak_fail(err, AK_ERR_ARG, "detokenizer: NULL argument");
    return ak_detok_push(&d->d, d->tok, id, buf, cap, n_out, err);
}

ak_status ak_detokenizer_flush(ak_detokenizer *d, char *buf, size_t cap, size_t *n_out, ak_err *err) {
    if (!d || !n_out) return ak_fail(err, AK_ERR_ARG, "detokenizer: NULL argument");
    return ak_detok_flush(&d->d, buf, cap, n_out, err);
}

void ak_detokenizer_reset(ak_detokenizer *d) {
    if (d) ak_detok_init(&d->d, d->d.special);
}

void ak_detokenizer_free(ak_detokenizer *d) { free(d); }

/* ---- chat templates ---------------------------------------------------------------- */

const char *ak_model_chat_template(const ak_model *m) { return m->chat_text; }
const char *ak_model_chat_family(const ak_model *m) { return m->chat_ok ? ak_chat_family_name(m->chat.family) : NULL; }

ak_status ak_model_set_chat_template(ak_model *m, const char *name_or_text, ak_err *err) {
    if (!m || !name_or_text) return ak_fail(err, AK_ERR_ARG, "chat template: NULL argument");
    ak_chat_template t;
    for (int f = 0; f < AK_CHAT_N_FAMILIES; f++)
        if (!strcmp(name_or_text, ak_chat_family_name((ak_chat_family)f))) {
            t = ak_chat_template_chatml();
            t.family = (ak_chat_family)f;
            t.llama3_date = f == AK_CHAT_LLAMA3;      /* the current Llama 3.x form */
            t.tool_response = f == AK_CHAT_QWEN3;
            m->chat = t;
            m->chat_ok = true;
            return AK_OK;
        }
    ak_status st = ak_chat_detect(name_or_text, strlen(name_or_text), &t, err);
    if (st) return st;
    m->chat = t;
    m->chat_ok = true;
    return AK_OK;
}

static ak_status chat_ok(const ak_model *m, ak_err *err) {
    if (m->chat_ok) return AK_OK;
    if (m->chat_why[0]) return ak_fail(err, AK_ERR_UNSUPPORTED, "%s", m->chat_why);
    return ak_fail(err, AK_ERR_UNSUPPORTED, "the model has no chat template (a base model?)");
}

ak_status ak_chat_render_tools(const ak_model *m, const ak_chat_message *msgs, int n, const char *tools,
                               bool add_generation_prompt, char **out, ak_err *err) {
    if (!m || !out) return ak_fail(err, AK_ERR_ARG, "chat render: NULL argument");
    *out = NULL;
    ak_status st = chat_ok(m, err);
    if (st) return st;
    ak_chat_opts o = {.bos = m->bos_text, .eos = m->eos_text, .add_generation_prompt = add_generation_prompt,
                      .tools = tools};
    size_t len = 0;
    if ((st = ak_chat_template_render(&m->chat, msgs, n, &o, NULL, 0, &len, err))) return st;
    char *buf = malloc(len + 1);
    if (!buf) return ak_fail(err, AK_ERR_NOMEM, "chat render: out of memory");
    if ((st = ak_chat_template_render(&m->chat, msgs, n, &o, buf, len + 1, &len, err))) {
        free(buf);
        return st;
    }
    *out = buf;
    return AK_OK;
}

ak_status ak_chat_render(const ak_model *m, const ak_chat_message *msgs, int n, bool add_generation_prompt,
                         char **out, ak_err *err) {
    return ak_chat_render_tools(m, msgs, n, NULL, add_generation_prompt, out, err);
}

ak_status ak_chat_parse_calls(const ak_model *m, const char *text, size_t len, ak_chat_call **calls, int *n_calls,
                              char **content, ak_err *err) {
    if (!m || !calls || !n_calls || !content || (!text && len)) return ak_fail(err, AK_ERR_ARG, "chat: NULL argument");
    ak_status st = chat_ok(m, err);
    return st ? st : ak_chat_template_parse_calls(&m->chat, text ? text : "", len, calls, n_calls, content, err);
}
