/* posenc bench, the train section: `posenc train`'s model (train/) stepped in-process against
 * the same model in PyTorch eager (bench/torch_train.py, a coprocess), one thread each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef PE_BLAS
#include <cblas.h>
#endif
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

#include "../train/env.h"
#include "../train/kernels.h"
#include "../train/trainer.h"
#include "bench.h"
#include "cli.h"

/* ---- (h) training: posenc's trainer against the same model in PyTorch -------------------------- */
/* The methods bench/torch_train.py writes in PyTorch. */
static int torch_trains(const char *method) {
    static const char *const M[] = {"none", "rope", "alibi", "t5", NULL};
    for (int i = 0; M[i]; i++)
        if (!strcmp(M[i], method)) return 1;
    return 0;
}

/* posenc's side of one round: `warm` untimed steps, then `steps` timed ones, or as many as fill
 * `seconds` when steps is 0 (at least 3); tokens/s. */
static int train_round(tr_run *run, int64_t steps, double seconds, int warm, double *tps, pe_err *err) {
    double loss;
    int64_t tk, tokens = 0, n = 0;
    for (int i = 0; i < warm; i++)
        if (tr_run_step(run, &loss, &tk, err)) return 1;
    double t0 = bench_now();
    for (; steps ? n < steps : n < 3 || bench_now() - t0 < seconds; n++) {
        if (tr_run_step(run, &loss, &tk, err)) return 1;
        tokens += tk;
    }
    *tps = (double)tokens / (bench_now() - t0);
    return 0;
}

/* Every method at the trainer's default shape (batch 4 x 64, width 64, 2 layers, 4 heads) and at
 * batch 32: a tr_run of `posenc train` stepped in-process (batches of the lm task, forward,
 * backward, clipping, AdamW; FTZ/DAZ as `train` sets them), and bench/torch_train.py's model of
 * the same shape, vocabulary and parameter count, alternating rounds of the same number of steps
 * (the order swapped every round), each after 2 untimed steps. */
int bench_train(const bopts *o, trow *rows, int *nrows, char *info, size_t ninfo, int *threads) {
    const int th = o->threads ? o->threads : 1, warm = 2, rounds = o->reps;
    const double round_s = 1.0; /* seconds of posenc's training per round (--quick: 2 steps) */
    static const int64_t BATCH[2] = {4, 32};
    *threads = th, *nrows = 0;
    pe_err err;
    tr_options base;
    tr_options_default(&base);
    base.n_eval = 1, base.eval[0] = 1; /* no evaluation: the position range of training alone */
    tr_task task;
    if (tr_task_from_options(&task, &base, &err)) return cli_fail("bench: train: %s", err.msg);
    torchp tp = {0};
    int torch = o->torch && torch_start(&tp, o->torch_train_path, th);
    if (o->torch && !torch)
        fprintf(stderr, "posenc: bench: train: no PyTorch (%s with %s and torch: scripts/deps.sh makes .venv): its columns "
                "stay empty\n", o->torch_train_path, torch_python());
    snprintf(info, ninfo, "%s", torch ? tp.info : "not run");
#ifdef _OPENMP
    const int omp_before = omp_get_max_threads();
    omp_set_num_threads(th);
#endif
#ifdef PE_BLAS
    const int blas_before = openblas_get_num_threads();
    openblas_set_num_threads(th);
#endif
#ifdef HAVE_MXCSR
    const unsigned mxcsr = _mm_getcsr();
#endif
    tr_env_thread(); /* FTZ/DAZ, as posenc train */
    printf("## (h) training: `posenc train`'s model in C against the same model in PyTorch eager, %d thread%s each,"
           " OpenBLAS core %s for both\n\n",
           th, th == 1 ? "" : "s", tr_env_blas_core()[0] ? tr_env_blas_core() : "none");
    printf("%lld layers x %lld wide, %lld heads, MLP %lld, length %lld, vocabulary %lld (the lm task), AdamW, warm-up and"
           " cosine, clipping; PyTorch: %s (bench/torch_train.py, random tokens). Tokens/s: median of %d alternating"
           " round%s, each after %d untimed steps.\n\n",
           (long long)base.layers, (long long)base.width, (long long)base.heads, (long long)(4 * base.width),
           (long long)task.L, (long long)task.V, info, rounds, rounds == 1 ? "" : "s", warm);
    printf("| method | batch x length | parameters posenc / PyTorch | steps per round | posenc tok/s | PyTorch tok/s |"
           " posenc / PyTorch | posenc's step x its GEMMs | x all its GEMMs |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
           " ---: |\n");
    fflush(stdout);
    int rc = 0;
    for (int bi = 0; bi < 2 && !rc; bi++) {
        /* the bound: the step's GEMMs alone on its shapes (train --profile's) */
        const double gemms = tr_step_gemm_seconds(BATCH[bi] * task.L, base.layers, base.width, 4 * base.width, task.V, 5);
        const double attn = tr_step_attention_gemm_seconds(BATCH[bi], task.L, base.heads, base.width / base.heads, base.layers, 5);
        for (int mi = 0; mi < o->nm && !rc; mi++) {
            trow *R = &rows[(*nrows)++];
            *R = (trow){.method = o->methods[mi], .B = BATCH[bi], .T = task.L, .ours = NAN, .torch = NAN, .gemm_x = NAN, .all_x = NAN};
            tr_options opt = base;
            tr_run run;
            opt.batch = R->B;
            snprintf(opt.method, sizeof opt.method, "%s", R->method);
            if (tr_run_init(&run, &opt, &task, &err)) { /* a method the trainer does not take */
                snprintf(R->why, sizeof R->why, "%.159s", err.msg);
                printf("| %s | %lld x %lld | %s | | | | | | |\n", R->method, (long long)R->B, (long long)R->T, R->why);
                fflush(stdout);
                continue;
            }
            R->np_ours = (long long)tr_model_size(run.model);
            double tv[2][32], tps, v[3];
            int n[2] = {0, 0};
            R->steps = o->train_steps;
            if (!R->steps) { /* about round_s of posenc's steps, from a tenth of that */
                rc = train_round(&run, 0, round_s / 10, warm, &tps, &err);
                R->steps = rc ? 3 : (int64_t)(round_s * tps / (double)(R->B * R->T));
                R->steps = R->steps < 3 ? 3 : R->steps > 100000 ? 100000 : R->steps;
            }
            const int ask = torch && torch_trains(R->method);
            for (int r = 0; r < rounds && !rc; r++)
                for (int side = 0; side < 2 && !rc; side++) {
                    if ((side ^ (r & 1)) == 0) { /* posenc first in even rounds */
                        rc = train_round(&run, R->steps, 0, warm, &tps, &err);
                        if (!rc) tv[0][n[0]++] = tps;
                    } else if (ask) {
                        char req[160];
                        snprintf(req, sizeof req, "train %s %lld %lld %lld %lld %lld %lld %lld %d", R->method,
                                 (long long)R->B, (long long)R->T, (long long)base.width, (long long)base.layers,
                                 (long long)base.heads, (long long)task.V, (long long)R->steps, warm);
                        if (torch_ask(&tp, req, v, 3) == 3) tv[1][n[1]++] = v[0], R->np_torch = (long long)v[2];
                    }
                    bench_gap();
                }
            tr_run_free(&run);
            if (rc) {
                fprintf(stderr, "posenc: bench: train: %s: %s\n", R->method, err.msg);
                break;
            }
            R->ours = bench_median(tv[0], n[0]);
            if (n[1]) R->torch = bench_median(tv[1], n[1]);
            printf("| %s | %lld x %lld | %lld / ", R->method, (long long)R->B, (long long)R->T, R->np_ours);
            printf(R->np_torch ? "%lld |" : "— |", R->np_torch);
            printf(" %lld | %.1fk |", (long long)R->steps, R->ours / 1e3);
            if (isnan(R->torch)) printf(" — | — |");
            else printf(" %.1fk | %.2fx |", R->torch / 1e3, R->ours / R->torch);
            R->gemm_x = (double)(R->B * R->T) / R->ours / gemms;
            R->all_x = (double)(R->B * R->T) / R->ours / (gemms + attn);
            printf(" %.2fx | %.2fx |\n", R->gemm_x, R->all_x);
            fflush(stdout);
        }
    }
    torch_stop(&tp);
    tr_task_free(&task);
#ifdef HAVE_MXCSR
    _mm_setcsr(mxcsr);
#endif
#ifdef _OPENMP
    omp_set_num_threads(omp_before);
#endif
#ifdef PE_BLAS
    openblas_set_num_threads(blas_before);
#endif
    if (rc) return 1;
    printf("\nThe same model on both sides (the parameter counts say so): token embedding x sqrt(C), pre-LayerNorm"
           " blocks (attention with q, k, v, o projections and biases, GELU-tanh MLP), final LayerNorm, output tied"
           " to the embedding, cross-entropy; AdamW (betas 0.9, 0.95, decay 0.1 on matrices and tables), clipping"
           " at norm 1. posenc's steps include drawing its batches from the lm task; PyTorch's read pre-drawn random"
           " tokens. Methods PyTorch does not have here (bench/torch_train.py: none, rope, alibi, t5) leave its"
           " columns empty. The last column: posenc's step time over the time its GEMMs take alone on the same shapes"
           " (the 4 projections and the MLP of each layer and the tied output, forward and backward; `posenc train"
           " --profile` prints it too), 1 the bound; the next, over those and the attention's six products a head as GEMMs"
           " (q k^T, p v and their backward on every key, as PyTorch eager's bmm).\n\n");
    return 0;
}

