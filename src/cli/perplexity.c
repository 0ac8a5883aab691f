/* akunu perplexity: the standard sliding-window measure. The text is tokenized once
 * (with BOS), cut into non-overlapping windows of the context size; each window starts
 * with BOS and is evaluated in one pass, and only the second half of its positions is
 * scored, so every scored token sees at least ctx/2 tokens of context. */
#include "cli.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: akunu perplexity -m FILE -f TEXT_FILE [-c CTX (default 512)] [--chunks N (score the first N windows)]\n"
    "                        [--chunk N (prefill chunk)] [-t THREADS]\n";

int ak_cli_perplexity(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (!o.file) { fprintf(stderr, "akunu: -f TEXT_FILE is required\n%s", usage); return 2; }
    if (!o.ctx) o.ctx = 512;
    if (o.ctx < 16) { fprintf(stderr, "akunu: -c must be at least 16 for perplexity\n"); return 2; }
    size_t len;
    char *text = ak_cli_read_file(o.file, &len);
    if (!text) { fprintf(stderr, "akunu: cannot read '%s'\n", o.file); return 1; }
    if (strlen(text) != len) { fprintf(stderr, "akunu: '%s' contains NUL bytes: not a text file\n", o.file); free(text); return 1; }
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, true, &m, &s))) { free(text); return rc; }
    int n = 0, V = ak_model_vocab(m), C = o.ctx;
    int32_t *ids = ak_cli_tokens(m, text, true, false, &n);
    float *logits = malloc((size_t)C * V * sizeof(float));
    int n_win = n / C;
    if (o.chunks && o.chunks < n_win) n_win = o.chunks;
    if (!ids || !logits) { rc = 1; goto done; }
    if (n_win < 1) { fprintf(stderr, "akunu: the text has %d tokens; perplexity needs at least one window of %d\n", n, C); rc = 1; goto done; }
    fprintf(stderr, "perplexity: %d tokens, %d windows of %d, scoring positions %d..%d of each\n", n, n_win, C, C / 2, C - 1);
    int32_t bos = ak_token_bos(m);
    double nll = 0, nll2 = 0;
    long count = 0;
    double t0 = ak_cli_now();
    for (int w = 0; w < n_win; w++) {
        int32_t *win = ids + (size_t)w * C, first = win[0], next;
        ak_err err = {{0}};
        if (bos >= 0 && ak_model_adds_bos(m)) win[0] = bos;
        ak_session_reset(s);
        ak_status st = ak_prefill(s, win, C, &next, logits, &err);
        win[0] = first;
        if (st) { fprintf(stderr, "\nakunu: %s\n", err.msg); rc = 1; goto done; }
        for (int j = C / 2; j < C - 1; j++) {
            const float *l = logits + (size_t)j * V;
            float mx = l[0];
            for (int k = 1; k < V; k++) if (l[k] > mx) mx = l[k];
            double sum = 0;
            for (int k = 0; k < V; k++) sum += exp((double)l[k] - mx);
            double v = log(sum) + mx - l[win[j + 1]];
            nll += v;
            nll2 += v * v;
            count++;
        }
        double el = ak_cli_now() - t0;
        int bar = 30 * (w + 1) / n_win;
        fprintf(stderr, "\r[%.*s%*s] %d/%d  ppl %.4f  %.0f tok/s  ", bar, "##############################", 30 - bar, "", w + 1,
                n_win, exp(nll / count), (double)(w + 1) * C / el);
    }
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), err = ppl * sqrt(var > 0 ? var / (double)(count - 1) : 0);
    fprintf(stderr, "\n");
    printf("PPL = %.4f +/- %.5f  (%ld tokens scored, context %d)\n", ppl, err, count, C);
done:
    free(logits);
    free(ids);
    free(text);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
