/* posenc generate --checkpoint FILE --prompt TEXT [--tokens N] [--temperature X] [--seed S] [--check]
 * Samples text from a `posenc train --save` checkpoint through one KV cache per block
 * (tr_decoder): the prompt in one step, then one token per step, printed as it comes. Greedy
 * at temperature 0. --check also runs the model over the whole sequence at every step and
 * prints the largest difference of the next-token probabilities (and log-probabilities) from
 * the cache's. Positions are those of evaluation: 0, 1, ... plus SHAPE's shift, or the sorted
 * draw of randomized positions. Models with a per-layer schedule decode alike (a cache per
 * block, each with its block's method). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/layer.h"
#include "../train/trainer.h"
#include "cli.h"
#include "options.h"

/* The next token from probabilities p (V): argmax at temperature 0, else p^(1/temp) sampled. */
static int32_t sample(const float *p, int64_t V, double temp, pe_rng *rng) {
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++) best = p[v] > p[best] ? (int32_t)v : best;
    if (temp == 0) return best;
    double sum = 0, w[256];
    for (int64_t v = 0; v < V; v++) sum += w[v] = p[v] > 0 ? exp(log((double)p[v] / p[best]) / temp) : 0;
    double u = pe_rng_uniform(rng) * sum;
    for (int64_t v = 0; v < V; v++)
        if ((u -= w[v]) < 0) return (int32_t)v;
    return best;
}

enum { GENERATE_MAX_PROMPT = 16384 };

int cli_generate(int argc, char **argv) {
    generate_args a;
    int rc;
    if (arg_start(&ARGS_GENERATE, argc, argv, &a, &rc)) return rc;
    const char *ckpt = a.checkpoint, *prompt = a.prompt;
    const double temp = a.temperature;
    const long long tokens = a.tokens, seed = a.seed;
    const int check = a.check;
    const int64_t P = (int64_t)strlen(prompt), N = (int64_t)tokens;
    if (!P) return cli_fail("generate: --prompt is empty (give at least one character)");
    if (P > GENERATE_MAX_PROMPT) /* it runs as one step: (P x P) scores per head, P x V probabilities */
        return cli_fail("generate: --prompt of %lld characters is past the limit of %d", (long long)P, GENERATE_MAX_PROMPT);

    pe_err err = {{0}};
    tr_options opt;
    if (tr_checkpoint_options(ckpt, &opt, &err)) return cli_fail("%s", err.msg);
    tr_task task;
    tr_run run;
    if (tr_task_from_options(&task, &opt, &err)) return cli_fail("%s: %s", ckpt, err.msg);
    if (tr_run_init(&run, &opt, &task, &err)) {
        tr_task_free(&task);
        return cli_fail("%s: %s", ckpt, err.msg);
    }
    rc = tr_run_load(&run, ckpt, &err) ? cli_fail("%s", err.msg) : 0;
    const int64_t V = task.V, total = P + N;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)total);
    float *probs = malloc(sizeof(float) * (size_t)(P * V));
    int32_t *tgt = malloc(sizeof(int32_t) * (size_t)total); /* the full forward's: none scored */
    if (!rc && (!ids || !pos || !probs || !tgt)) rc = cli_fail("out of memory");
    for (int64_t t = 0; !rc && t < P; t++) {
        unsigned char c = (unsigned char)prompt[t];
        if (task.ids[c] < 0) {
            char vocab[260] = "";
            for (int v = 0, n = 0; v < V; v++)
                if (task.chars[v] >= 32 && task.chars[v] < 127) vocab[n++] = (char)task.chars[v];
            rc = cli_fail("--prompt: character %lld (byte 0x%02x) is not in the vocabulary of the checkpoint's task %s: \"%s\"",
                          (long long)t, c, opt.task, vocab);
        }
        ids[t] = task.ids[c];
    }
    /* as at evaluation: 0, 1, ... (plus SHAPE's shift), or randomized positions drawn once for
     * the whole sequence, so the prompt's are a prefix of the sequence's */
    if (!rc && tr_run_positions(&run, total, 0, pos, &err))
        rc = cli_fail("generate: the prompt and --tokens %lld: %s (ask for fewer tokens)", (long long)N, err.msg);
    if (!rc && tr_model_check_positions(run.model, pos[0], pos[total - 1], &err))
        rc = cli_fail("generate: the prompt and --tokens %lld need positions %lld .. %lld: %s (ask for fewer tokens)",
                      (long long)N, (long long)pos[0], (long long)pos[total - 1], err.msg);
    tr_decoder *dec = NULL;
    int cached = 1;
    if (!rc && tr_model_cfg(run.model)->bidirectional)
        rc = cli_fail("generate: a bidirectional model (--layout slots) reads its whole answer at once from the slots; it does not generate text");
    if (!rc && tr_decoder_init(&dec, run.model, total, &err)) { /* complex-valued: the whole sequence each step */
        fprintf(stderr, "posenc: generate: %s; every step runs the model over the whole sequence\n", err.msg);
        cached = 0;
    }
    if (!rc) fwrite(prompt, 1, (size_t)P, stdout), fflush(stdout);
    pe_rng rng = {(uint64_t)seed * 2654435761u + 1};
    double dev = 0, dev_log = 0;
    int64_t n = P; /* tokens so far */
    for (int64_t step = 0; !rc && step <= N; step++) {
        /* the probabilities of the token after the first n: the prompt in one step, then one */
        const float *p = NULL;
        if (cached) {
            const int64_t from = step ? n - 1 : 0, len = n - from;
            if (tr_decoder_step(dec, ids + from, pos + from, len, probs, &err)) {
                rc = cli_fail("generate: step %lld: %s", (long long)step, err.msg);
                break;
            }
            p = probs + (len - 1) * V;
        }
        if (check || !cached) {
            double loss;
            for (int64_t t = 0; t < n; t++) tgt[t] = -1;
            if (tr_model_forward(run.model, ids, tgt, pos, 1, n, 0, &loss, NULL, &err)) {
                rc = cli_fail("generate: step %lld: %s", (long long)step, err.msg);
                break;
            }
            const float *pf = tr_model_probs(run.model) + (n - 1) * V;
            if (cached)
                for (int64_t v = 0; v < V; v++) { /* NaN-aware: a NaN on either side is an infinite deviation */
                    const double d = fabs((double)p[v] - pf[v]);
                    dev = isnan(d) ? INFINITY : fmax(dev, d);
                    if (pf[v] > 1e-6) dev_log = fmax(dev_log, fabs(log((double)p[v] / pf[v])));
                }
            else
                p = pf;
        }
        int64_t bad = -1;
        for (int64_t v = 0; v < V && bad < 0; v++)
            if (!isfinite(p[v])) bad = v;
        if (bad >= 0) {
            rc = cli_fail("generate: step %lld: the probability of token %lld is %s: the model's logits overflow (its "
                          "weights are too large for float32)", (long long)step, (long long)bad, isnan(p[bad]) ? "NaN" : "infinite");
            break;
        }
        if (step == N) break;
        ids[n] = sample(p, V, temp, &rng);
        putchar(task.chars[ids[n]]);
        fflush(stdout);
        n++;
    }
    if (!rc) putchar('\n');
    if (!rc && check && cached)
        printf("check: %lld steps, max |p_cache - p_full| = %.3g, max |log p_cache - log p_full| = %.3g (p_full > 1e-6)\n",
               (long long)(N + 1), dev, dev_log);
    tr_decoder_free(dec);
    free(ids), free(pos), free(probs), free(tgt);
    tr_run_free(&run);
    tr_task_free(&task);
    return rc;
}
