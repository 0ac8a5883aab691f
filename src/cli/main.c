/* akunu: the command-line front end. One file per subcommand. */
#include "cli.h"
#include <stdio.h>
#include <string.h>

static const char *usage =
    "usage: akunu COMMAND [options]\n"
    "commands:\n"
    "  run      generate from a prompt (text or token ids)\n"
    "  chat     interactive chat (keeps the KV cache across turns)\n"
    "  tokenize print the token ids of a text\n"
    "  detokenize  print the text of token ids\n"
    "  embed    sentence embeddings from an encoder model\n"
    "  perplexity  perplexity of a text file\n"
    "  logits   write float32 logits for every prompt position\n"
    "  bench    measure prompt processing and generation speed\n"
    "  serve    an OpenAI-compatible HTTP server with a chat page\n"
    "run 'akunu COMMAND --help' for its options\n";

#ifndef AKUNU_SERVER
int ak_cli_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "akunu: this build has no server: it needs libmicrohttpd-dev and libcjson-dev at build time\n");
    return 1;
}
#endif

int main(int argc, char **argv) {
    if (argc < 2) { fputs(usage, stderr); return 2; }
    ak_cli_debug_from_env();
    if (!strcmp(argv[1], "run")) return ak_cli_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "logits")) return ak_cli_logits(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return ak_cli_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tokenize")) return ak_cli_tokenize(argc - 1, argv + 1);
    if (!strcmp(argv[1], "detokenize")) return ak_cli_detokenize(argc - 1, argv + 1);
    if (!strcmp(argv[1], "serve")) return ak_cli_serve(argc - 1, argv + 1);
    if (!strcmp(argv[1], "chat")) return ak_cli_chat(argc - 1, argv + 1);
    if (!strcmp(argv[1], "embed")) return ak_cli_embed(argc - 1, argv + 1);
    if (!strcmp(argv[1], "perplexity")) return ak_cli_perplexity(argc - 1, argv + 1);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { fputs(usage, stdout); return 0; }
    fprintf(stderr, "akunu: unknown command '%s'\n%s", argv[1], usage);
    return 2;
}
