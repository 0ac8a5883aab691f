/* libFuzzer target: chat templates. The input is both a template text for family
 * detection (ak_chat_detect) and a conversation rendered by every family: byte 0 picks the
 * family, byte 1 the options (generation prompt, thinking off, Llama 3.1 date header,
 * Qwen tool responses, a default system text, tools), then NUL-separated fields, role
 * then content, where a one-byte role picks system/user/assistant/tool/ipython and a
 * longer one is used as it is; an assistant content that opens with '[' is taken as its
 * tool calls (JSON) too, and with the tools bit the first field is the tools' JSON. The
 * size query (no buffer) must give the length the rendering then writes, NUL included;
 * every reply's text is parsed back for tool calls. */
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "model/chat.h"

#define MAX_MSGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_err err;
    ak_chat_template t;
    ak_chat_detect((const char *)data, size, &t, &err);
    if (size < 2) return 0;
    t = ak_chat_template_chatml();
    t.family = (ak_chat_family)(data[0] % AK_CHAT_N_FAMILIES);
    t.llama3_date = data[1] & 4;
    t.tool_response = data[1] & 8;
    if (data[1] & 16) strcpy(t.default_system, "You are a fuzzer.");
    bool with_tools = data[1] & 32;
    ak_chat_opts o = {.bos = "<s>", .eos = "</s>", .add_generation_prompt = data[1] & 1, .disable_thinking = data[1] & 2};
    /* fields: a NUL-terminated copy split at NULs */
    char *text = malloc(size - 2 + 1);
    if (!text) return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = 0;
    static const char *const roles[] = {"system", "user", "assistant", "tool", "ipython"};
    ak_chat_message msgs[MAX_MSGS] = {{0}};
    int n = 0;
    char *p = text, *end = text + (size - 2);
    if (with_tools) {   /* the first field: the tools */
        o.tools = p;
        p += strlen(p) + 1;
    }
    while (p < end && n < MAX_MSGS) {
        char *role = p;
        p += strlen(p) + 1;
        if (p > end) break;
        char *content = p;
        p += strlen(p) + 1;
        msgs[n].role = strlen(role) == 1 ? roles[(unsigned char)role[0] % 5] : role;
        msgs[n].content = content;
        if (!strcmp(msgs[n].role, "assistant") && content[0] == '[') msgs[n].tool_calls = content;
        n++;
    }
    size_t need = 0, got = 0;
    if (ak_chat_template_render(&t, msgs, n, &o, NULL, 0, &need, &err) == AK_OK) {
        char *buf = malloc(need + 1);
        if (!buf) { free(text); return 0; }
        if (ak_chat_template_render(&t, msgs, n, &o, buf, need + 1, &got, &err) || got != need || buf[need]) abort();
        free(buf);
    }
    /* the last field as a reply to parse for calls */
    if (n) {
        ak_chat_call *calls = NULL;
        int nc = 0;
        char *content = NULL;
        const char *reply = msgs[n - 1].content;
        if (!ak_chat_template_parse_calls(&t, reply, strlen(reply), &calls, &nc, &content, &err)) {
            if (!content || strlen(content) > strlen(reply)) abort();
            for (int i = 0; i < nc; i++)
                if (!calls[i].name || !calls[i].arguments || calls[i].arguments[0] != '{') abort();
            ak_chat_calls_free(calls, nc);
            free(content);
        }
    }
    free(text);
    return 0;
}
