/* posenc bench: how fast posenc runs attention with positional encodings, as ratios measured
 * side by side in one run (absolute times move with the machine's load; ratios much less):
 *   rope      RoPE on q and k [T=4096, H=32, D=128], both layouts, against a copy of the same
 *             bytes (the bandwidth ceiling), 1 thread and all; PyTorch eager beside it
 *   attn      one attention layer (projections included), forward and backward, H=8, D=64,
 *             none/rope/alibi/t5, causal and not: the fused path against the reference path
 *             and PyTorch eager (bench/torch_bench.py, run as a coprocess so both interleave),
 *             with the peak memory of each
 *   denormal  the fused path with exp clamped (default), FTZ/DAZ, and gradual underflow
 *   gemm      BLAS sgemm on the attention shape against the fused attention core
 *   packed    8 documents packed in one row (block-diagonal attn_mask) against one document
 *   train     posenc train's model (train/) trained in-process for a few seconds per method and
 *             batch, tokens/s against the same model in PyTorch eager (bench/torch_train.py, a
 *             coprocess), one thread each, in alternating rounds
 * Like `train`, it selects OpenBLAS's AVX-512/AVX2 kernels (train/env.c) when the library
 * would run its SSE3 ones; PyTorch inherits the same OPENBLAS_CORETYPE. --readme FILE rewrites
 * the block between <!-- bench:begin --> and <!-- bench:end --> with a summary. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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

#include "../src/fused.h"
#include "../src/io/layer.h"
#include "../train/env.h"
#include "../train/trainer.h"
#include "cli.h"
#include "options.h"

enum { MAXL = 8 };

typedef struct bopts {
    int64_t T[MAXL];
    int nT;
    const char *methods[MAXL];
    int nm;
    int causal[2], ncausal;
    int reps, threads, torch, reference, quick;
    int64_t ref_max_T, torch_max_T, train_steps;
    const char *torch_path, *torch_train_path, *readme, *only;
} bopts;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A pause between variants: thread pools that spin after a region (OpenBLAS's, OpenMP's,
 * PyTorch's) would otherwise slow the next one down on 2 cores (PERF.md). */
static void gap(void) {
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Large blocks mmapped and returned on free while the peak memory is measured (one run), then
 * kept by malloc for the timed runs, as in a steady loop (no page faults). glibc only. */
static void malloc_measure(int on) {
#ifdef __GLIBC__
    if (on) malloc_trim(0);
    mallopt(M_MMAP_THRESHOLD, on ? 64 * 1024 : 1 << 30);
    mallopt(M_TRIM_THRESHOLD, on ? 128 * 1024 : 1 << 30);
#else
    (void)on;
#endif
}

/* Peak resident memory: Linux resets VmHWM when "5" is written to clear_refs. */
static int peak_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}
static double status_mib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double v = NAN;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = atof(line + n + 1) / 1024.0;
    if (f) fclose(f);
    return v;
}

/* How every layer and kernel of the benchmark runs: --threads, and per measurement the path
 * and the MXCSR/exp switches (set on each layer, pe_attention_set_run_options). */
static pe_run_options RUN;

static int nthreads(void) {
#ifdef _OPENMP
    return RUN.threads > 0 ? RUN.threads : omp_get_max_threads();
#else
    return 1;
#endif
}

static float *frand(int64_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * (size_t)n);
    pe_rng r = {seed};
    if (x)
        for (int64_t i = 0; i < n; i++) x[i] = 2 * pe_rng_uniform(&r) - 1;
    return x;
}

/* ---- PyTorch, a coprocess answering one request per line (bench/torch_bench.py) ---------- */
typedef struct torchp {
    FILE *to, *from;
    pid_t pid;
    char info[256];
} torchp;

static int torch_start(torchp *tp, const char *script, int threads) {
    memset(tp, 0, sizeof *tp);
    if (access("/usr/bin/python3", X_OK) || access(script, R_OK)) return 0;
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        char th[16];
        snprintf(th, sizeof th, "%d", threads);
        setenv("OPENBLAS_NUM_THREADS", th, 1); /* torch sizes its own pools, not OpenBLAS's */
        dup2(in[0], 0), dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl("/usr/bin/python3", "python3", script, "--serve", "--threads", th, (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    tp->to = fdopen(in[1], "w"), tp->from = fdopen(out[0], "r"), tp->pid = pid;
    char line[256];
    if (!tp->to || !tp->from || !fgets(line, sizeof line, tp->from) || strncmp(line, "ready ", 6)) {
        if (tp->to) fclose(tp->to);
        if (tp->from) fclose(tp->from);
        waitpid(pid, NULL, 0);
        tp->pid = 0;
        return 0;
    }
    line[strcspn(line, "\n")] = 0;
    snprintf(tp->info, sizeof tp->info, "%s", line + 6);
    return 1;
}

/* Sends one request; fills up to nv numbers of the "ok ..." answer, returns how many (-1: error). */
static int torch_ask(torchp *tp, const char *req, double *v, int nv) {
    if (!tp->pid) return -1;
    char line[512];
    fprintf(tp->to, "%s\n", req);
    fflush(tp->to);
    if (!fgets(line, sizeof line, tp->from)) return -1;
    if (strncmp(line, "ok", 2)) {
        fprintf(stderr, "posenc bench: PyTorch: %s", line);
        return -1;
    }
    int n = 0;
    char *p = line + 2, *end;
    while (n < nv && (v[n] = strtod(p, &end), end != p)) p = end, n++;
    return n;
}

static void torch_stop(torchp *tp) {
    if (!tp->pid) return;
    fprintf(tp->to, "quit\n");
    fclose(tp->to), fclose(tp->from);
    waitpid(tp->pid, NULL, 0);
    tp->pid = 0;
}

/* ---- (a) RoPE against a copy ---------------------------------------------------------------- */
typedef struct rope_res {
    int threads[2];
    double copy[2], half[2], inter[2], table[2], torch; /* ms */
} rope_res;

static void par_copy(float *dst, const float *src, int64_t n, int nth) {
#ifdef _OPENMP
#pragma omp parallel num_threads(nth)
    {
        int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
        memcpy(dst + n * t / k, src + n * t / k, sizeof(float) * (size_t)(n * (t + 1) / k - n * t / k));
    }
#else
    (void)nth;
    memcpy(dst, src, sizeof(float) * (size_t)n);
#endif
}

static int bench_rope(const bopts *o, torchp *tp, rope_res *R) {
    const int64_t T = 4096, H = 32, D = 128, C = H * D, n = T * C, half = D / 2;
    float *q = frand(n, 1), *k = frand(n, 2), *q2 = malloc(sizeof(float) * n), *k2 = malloc(sizeof(float) * n);
    float *cs = malloc(sizeof(float) * T * half * 2);
    int64_t *pos = malloc(sizeof(int64_t) * T);
    double inv_freq[64];
    if (!q || !k || !q2 || !k2 || !cs || !pos) return cli_fail("bench: out of memory");
    for (int64_t t = 0; t < T; t++) pos[t] = t;
    for (int64_t t = 0; t < half; t++) inv_freq[t] = pow(10000.0, -2.0 * (double)t / (double)D);
    memcpy(q2, q, sizeof(float) * n), memcpy(k2, k, sizeof(float) * n); /* fault the pages in */
    const int reps = o->reps < 3 ? 5 : 2 * o->reps + 1;
    double v[16];
    R->threads[0] = 1, R->threads[1] = nthreads();
    for (int ti = 0; ti < 2; ti++) {
        const int nth = R->threads[ti];
        pe_run_options run = RUN;
        run.threads = nth;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            par_copy(q2, q, n, nth);
            par_copy(k2, k, n, nth);
            v[r] = now() - t0;
        }
        R->copy[ti] = median(v, reps) * 1e3;
        gap();
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            pe__rope_table(&run, cs, pos, 1, NULL, T, inv_freq, half, 1.0);
            v[r] = now() - t0;
        }
        R->table[ti] = median(v, reps) * 1e3;
        for (int layout = 0; layout < 2; layout++) {
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                pe__rope_rotate(&run, q, T, C, H, D, D, layout, cs, 1.0f);
                pe__rope_rotate(&run, k, T, C, H, D, D, layout, cs, 1.0f);
                v[r] = now() - t0;
            }
            (layout == PE_ROPE_HALF ? R->half : R->inter)[ti] = median(v, reps) * 1e3;
            gap();
        }
    }
    free(q), free(k), free(q2), free(k2), free(cs), free(pos);
    R->torch = NAN;
    char req[64];
    snprintf(req, sizeof req, "rope %lld %lld %lld %d", (long long)T, (long long)H, (long long)D, reps);
    double tv;
    if (o->torch && torch_ask(tp, req, &tv, 1) == 1) R->torch = tv;
    printf("## (a) RoPE on q and k [T=4096, H=32, D=128] f32, in place (%.0f MiB each), time relative to a copy of the same bytes\n\n",
           n * 4.0 / (1 << 20));
    printf("| threads | copy ms (GB/s) | rope half ms | x copy | %% of copy bandwidth | rope interleaved ms | x copy |"
           " %% of copy bandwidth | cos/sin table ms | half + table x copy |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < 2; ti++)
        printf("| %d | %.2f (%.1f) | %.2f | %.2f | %.0f%% | %.2f | %.2f | %.0f%% | %.2f | %.2f |\n", R->threads[ti],
               R->copy[ti], 2.0 * n * 4 / (R->copy[ti] * 1e-3) / 1e9, R->half[ti], R->half[ti] / R->copy[ti],
               100 * R->copy[ti] / R->half[ti], R->inter[ti], R->inter[ti] / R->copy[ti],
               100 * R->copy[ti] / R->inter[ti], R->table[ti], (R->half[ti] + R->table[ti]) / R->copy[ti]);
    printf("\nCopy bandwidth counts the bytes read and written. The table: angles and cos/sin in double, rounded once"
           " (exact to float32), built once per call for T positions x 64 pairs and shared by q, k and backward. ");
    if (!isnan(R->torch))
        printf("PyTorch eager `q cos + rotate_half(q) sin` (out of place, %d threads): %.2f ms = %.1f x copy.\n\n",
               R->threads[1], R->torch, R->torch / R->copy[1]);
    else
        printf("\n\n");
    return 0;
}

/* ---- (b, c) attention layers ----------------------------------------------------------------- */
enum { FUSED, REF, TORCH };
typedef struct arow {
    const char *method;
    int64_t T;
    int causal;
    double f[3], b[3], mib[3]; /* ms, ms, MiB; NAN: not run */
} arow;

/* The benchmark's layers: 8 heads of 64 (C = 512), the method's defaults. */
static pe_status bench_layer(const char *method, int causal, pe_attention **att, pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    const char *keys[] = {"method", "heads", "causal"}, *vals[] = {method, "8", causal ? "true" : "false"};
    *att = NULL;
    pe_status st = pe_config_set_all(&cfg, 3, keys, vals, err);
    return st ? st : pe_attention_init(att, &cfg, 512, err);
}

/* One layer's forward and backward (median of reps after a warm-up that also gives the peak
 * memory; warm == 0: the first run is timed too): H=8, D=64, batch 1, random weights; alibi
 * with its reference slopes. */
static int attn_measure(const char *method, int64_t T, int causal, int reference, int reps, int warm,
                        double *f, double *b, double *mib) {
    const int64_t C = 512;
    pe_err err;
    pe_attention *att;
    pe_layer L;
    if (bench_layer(method, causal, &att, &err) || pe_layer_init(&L, att, T + 1, 3, &err)) {
        pe_attention_free(att);
        return cli_fail("bench: %s: %s", method, err.msg);
    }
    for (int i = 0; i < L.np; i++)
        if (!strcmp(L.specs[i].name, "alibi_slopes")) L.w.param[i] = NULL, L.g.dparam[i] = NULL;
    float *x = frand(T * C, 5), *dy = frand(T * C, 6), *y = calloc((size_t)(T * C), 4), *dx = calloc((size_t)(T * C), 4);
    if (!x || !dy || !y || !dx) return cli_fail("bench: out of memory");
    memset(y, 0, sizeof(float) * T * C), memset(dx, 0, sizeof(float) * T * C);
    pe_layer_zero_grad(&L);
    pe_run_options run = RUN;
    run.path = reference ? PE_PATH_REFERENCE : PE_PATH_FUSED;
    pe_attention_set_run_options(att, &run);
    malloc_measure(1);
    int tracked = peak_reset();
    double base = status_mib("VmRSS"), fv[32], bv[32];
    int rc = 0;
    for (int r = warm ? -1 : 0; r < reps && !rc; r++) {
        double t0 = now();
        rc = pe_attention_forward(att, &L.w, x, NULL, 0, NULL, 0, 1, T, y, NULL, NULL, &err);
        double t1 = now();
        if (!rc) rc = pe_attention_backward(att, &L.w, dy, dx, &L.g, &err);
        double t2 = now();
        if (r == (warm ? -1 : 0)) *mib = tracked ? status_mib("VmHWM") - base : NAN, malloc_measure(0);
        if (r >= 0) fv[r] = t1 - t0, bv[r] = t2 - t1;
    }
    if (rc) fprintf(stderr, "posenc: bench: %s: %s\n", method, err.msg);
    else *f = median(fv, reps) * 1e3, *b = median(bv, reps) * 1e3;
    free(x), free(dy), free(y), free(dx);
    pe_layer_free(&L);
    pe_attention_free(att);
    return rc ? 1 : 0;
}

static void print_ratio(double num, double den) {
    if (isnan(num) || isnan(den)) printf(" — |");
    else printf(" %.1fx |", num / den);
}
static void print_ratio2(double num, double den) {
    if (isnan(num) || isnan(den)) printf(" — |");
    else printf(" %.2f |", num / den);
}
static void print_ms(double v) {
    if (isnan(v)) printf(" — |");
    else printf(" %.1f |", v);
}

/* Causal against full attention, from the rows of one run that have both: the fused path
 * skips the tiles above the diagonal, so at large T causal takes about half the time; PyTorch
 * eager masks a full T x T score matrix. */
static void attn_causal_table(const arow *rows, int nrows) {
    int header = 0;
    for (int r = 0; r < nrows; r++) {
        const arow *F = &rows[r], *Cz = NULL;
        if (F->causal) continue;
        for (int c = 0; c < nrows && !Cz; c++)
            if (rows[c].causal && rows[c].T == F->T && !strcmp(rows[c].method, F->method)) Cz = &rows[c];
        if (!Cz) continue;
        if (!header) {
            printf("## (b) causal over full attention: time of the causal layer / time of the full one, same method and T"
                   " (below 1: the masked work is skipped; about 0.5 is the ideal at large T)\n\n");
            printf("| method | T | fused fwd causal / full | fused bwd causal / full | PyTorch fwd causal / full |"
                   " PyTorch bwd causal / full |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
            header = 1;
        }
        printf("| %s | %lld |", F->method, (long long)F->T);
        print_ratio2(Cz->f[FUSED], F->f[FUSED]), print_ratio2(Cz->b[FUSED], F->b[FUSED]);
        print_ratio2(Cz->f[TORCH], F->f[TORCH]), print_ratio2(Cz->b[TORCH], F->b[TORCH]);
        printf("\n");
    }
    if (header) printf("\n");
}

static int bench_attn(const bopts *o, torchp *tp, arow *rows, int *nrows) {
    printf("## (b) attention layer, H=8, D=64, batch 1, forward and backward (projections included), median of %d"
           " after a warm-up (T >= 8192: one cold run)\n\n",
           o->reps);
    printf("Speed-ups are the other path's time over the fused path's (higher is better for posenc); `auto`:"
           " the path PE_PATH_AUTO's cost model picks for the shape.\n\n");
    printf("| method | T | causal | auto | fwd fused ms | fwd ref ms | fwd PyTorch ms | fused vs ref | fused vs PyTorch |"
           " bwd fused ms | bwd ref ms | bwd PyTorch ms | fused vs ref | fused vs PyTorch |"
           " peak MiB fused / ref / PyTorch |\n");
    printf("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    fflush(stdout);
    *nrows = 0;
    for (int ti = 0; ti < o->nT; ti++)
        for (int mi = 0; mi < o->nm; mi++)
            for (int ci = 0; ci < o->ncausal; ci++) {
                arow *R = &rows[(*nrows)++];
                *R = (arow){o->methods[mi], o->T[ti], o->causal[ci], {NAN, NAN, NAN}, {NAN, NAN, NAN}, {NAN, NAN, NAN}};
                const int big = R->T >= 8192, reps = big ? 1 : o->reps;
                if (attn_measure(R->method, R->T, R->causal, 0, reps, !big, &R->f[FUSED], &R->b[FUSED], &R->mib[FUSED]))
                    return 1;
                gap();
                if (o->reference && R->T <= o->ref_max_T) {
                    if (attn_measure(R->method, R->T, R->causal, 1, reps, !big, &R->f[REF], &R->b[REF], &R->mib[REF])) return 1;
                    gap();
                }
                if (o->torch && R->T <= o->torch_max_T) {
                    char req[128];
                    double v[3];
                    snprintf(req, sizeof req, "attn %s %lld %d %d", R->method, (long long)R->T, R->causal, reps);
                    if (torch_ask(tp, req, v, 3) == 3) R->f[TORCH] = v[0], R->b[TORCH] = v[1], R->mib[TORCH] = v[2];
                    gap();
                }
                printf("| %s | %lld | %s | %s |", R->method, (long long)R->T, R->causal ? "yes" : "no",
                       pe__fused_cheaper(1, 8, R->T, R->T, 0, 64, R->causal) ? "fused" : "T x T");
                print_ms(R->f[FUSED]), print_ms(R->f[REF]), print_ms(R->f[TORCH]);
                print_ratio(R->f[REF], R->f[FUSED]), print_ratio(R->f[TORCH], R->f[FUSED]);
                print_ms(R->b[FUSED]), print_ms(R->b[REF]), print_ms(R->b[TORCH]);
                print_ratio(R->b[REF], R->b[FUSED]), print_ratio(R->b[TORCH], R->b[FUSED]);
                printf(" %.0f / ", R->mib[FUSED]);
                printf(isnan(R->mib[REF]) ? "— / " : "%.0f / ", R->mib[REF]);
                printf(isnan(R->mib[TORCH]) ? "— |\n" : "%.0f |\n", R->mib[TORCH]);
                fflush(stdout);
            }
    printf("\n(c) peak MiB: growth of the resident set over one forward and backward (saved activations,"
           " scores, gradients, workspace; the layer's inputs and weights excluded). Reference path only to T=%lld,"
           " PyTorch only to T=%lld (their T x T buffers).\n\n",
           (long long)o->ref_max_T, (long long)o->torch_max_T);
    attn_causal_table(rows, *nrows);
    return 0;
}

/* ---- (f) packed rows: documents in one row with a block-diagonal attn_mask ------------------- */

/* Forward and backward of the projected form (rope, causal, H=8, D=64) over n documents of
 * T / n tokens: packed in one row of T (positions restarting, block-diagonal mask) when
 * packed, else one call per document; n = 1: one document of T. Median ms of reps. */
static int packed_measure(int64_t T, int n, int packed, int reps, double *f, double *b) {
    const int64_t C = 512, L = T / n, R = packed ? T : L;
    pe_err err;
    pe_attention *att;
    if (bench_layer("rope", 1, &att, &err)) return cli_fail("bench: packed: %s", err.msg);
    float *q = frand(T * C, 11), *k = frand(T * C, 12), *v = frand(T * C, 13), *dout = frand(T * C, 14);
    float *o = malloc(sizeof(float) * T * C), *g = malloc(sizeof(float) * 3 * T * C);
    int64_t *pos = malloc(sizeof(int64_t) * T);
    uint8_t *mask = packed && n > 1 ? malloc((size_t)(T * T)) : NULL;
    if (!q || !k || !v || !dout || !o || !g || !pos || (packed && n > 1 && !mask)) return cli_fail("bench: out of memory");
    for (int64_t t = 0; t < T; t++) pos[t] = t % L;
    for (int64_t i = 0; mask && i < T; i++)
        for (int64_t j = 0; j < T; j++) mask[i * T + j] = i / L == j / L;
    pe_positions at = {.pos = pos, .key_pos = pos, .mask = mask};
    double fv[32], bv[32];
    int rc = 0;
    for (int r = -1; r < reps && !rc; r++) {
        double tf = 0, tb = 0;
        for (int64_t d = 0; d < T / R && !rc; d++) { /* one call, or one per document */
            const int64_t o0 = d * R * C;
            double t0 = now();
            rc = pe_attention_forward_qkv(att, NULL, q + o0, k + o0, v + o0, 1, R, R, &at, o + o0, NULL, NULL, &err);
            double t1 = now();
            if (!rc) rc = pe_attention_backward_qkv(att, NULL, dout + o0, g, g + T * C, g + 2 * T * C, NULL, &err);
            tf += t1 - t0, tb += now() - t1;
        }
        if (r >= 0) fv[r] = tf, bv[r] = tb;
    }
    if (rc) fprintf(stderr, "posenc: bench: packed: %s\n", err.msg);
    else *f = median(fv, reps) * 1e3, *b = median(bv, reps) * 1e3;
    free(q), free(k), free(v), free(dout), free(o), free(g), free(pos), free(mask);
    pe_attention_free(att);
    return rc ? 1 : 0;
}

static int bench_packed(const bopts *o) {
    printf("## (f) packed rows: 8 documents in one row (positions restart, block-diagonal attn_mask), rope,"
           " causal, H=8, D=64, projected form forward and backward, fused path, median of %d\n\n", o->reps);
    printf("| T | one document of T: fwd / bwd ms | 8 documents of T/8 packed | 8 documents, one call each |"
           " packed vs one document (fwd / bwd) | packed vs separate calls |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < o->nT; ti++) {
        const int64_t T = o->T[ti];
        if (T % 8 || T > 8192) continue;
        double f[3], b[3];
        if (packed_measure(T, 1, 1, o->reps, &f[0], &b[0]) || packed_measure(T, 8, 1, o->reps, &f[1], &b[1]) ||
            packed_measure(T, 8, 0, o->reps, &f[2], &b[2]))
            return 1;
        printf("| %lld | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.2fx / %.2fx | %.2fx / %.2fx |\n", (long long)T, f[0],
               b[0], f[1], b[1], f[2], b[2], f[1] / f[0], b[1] / b[0], f[1] / f[2], b[1] / b[2]);
        fflush(stdout);
        gap();
    }
    printf("\nTiles the mask leaves no key in are skipped, so a packed row costs about what its documents cost"
           " (8 documents of T/8: 1/8 of the causal work of one document of T), plus one pass over the"
           " mask.\n\n");
    return 0;
}

/* ---- (g) decoding through the KV cache ---------------------------------------------------- */

/* One decode step (append a token's k and v, attend its query to the whole cache) of a layer
 * with H=32, Hkv=8, D=128 over a cache of Tk keys, against a copy of the cache's K and V bytes
 * (the cost of reading them once); then a context shift's re-rotation of every cached key
 * (rope) against a copy of the K bytes. Median ms of reps. */
static int decode_measure(const char *method, int64_t Tk, int reps, double *step, double *copy, double *shift,
                          double *shift_copy) {
    const int64_t H = 32, Hkv = 8, D = 128, C = H * D, Ckv = Hkv * D;
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    pe_kv_cache *kv = NULL;
    pe_config_init(&cfg);
    const char *keys[] = {"method", "heads", "kv_heads", "causal"}, *vals[] = {method, "32", "8", "true"};
    if (pe_config_set_all(&cfg, 4, keys, vals, &err) || pe_attention_init(&att, &cfg, C, &err))
        return cli_fail("bench: decode: %s", err.msg);
    pe_attention_set_run_options(att, &RUN);
    float *k = frand(Tk * Ckv, 21), *v = frand(Tk * Ckv, 22), *q = frand(C, 23), *o = malloc(sizeof(float) * C);
    float *dst = malloc(sizeof(float) * (size_t)(2 * Tk * Ckv));
    int rc = !k || !v || !q || !o || !dst;
    if (!rc) rc = pe_kv_cache_init(&kv, att, 1, Tk + reps + 8, &err) || pe_kv_cache_append(kv, NULL, k, v, Tk, NULL, 0, NULL, &err);
    double sv[32], cv[32], rv[32], kc[32];
    for (int r = -1; r < reps && !rc; r++) {
        double t0 = now();
        rc = pe_kv_cache_append(kv, NULL, k, v, 1, NULL, 0, NULL, &err) || pe_kv_cache_attend(kv, NULL, q, 1, NULL, o, &err);
        double t1 = now();
        par_copy(dst, k, Tk * Ckv, 1), par_copy(dst + Tk * Ckv, v, Tk * Ckv, 1);
        double t2 = now();
        if (!rc) rc = pe_kv_cache_shift(kv, NULL, 0, 0, 1, &err); /* every key moves one position back */
        double t3 = now();
        par_copy(dst, k, Tk * Ckv, 1);
        double t4 = now();
        if (r >= 0) sv[r] = t1 - t0, cv[r] = t2 - t1, rv[r] = t3 - t2, kc[r] = t4 - t3;
    }
    if (rc) fprintf(stderr, "posenc: bench: decode: %s\n", err.msg);
    else *step = median(sv, reps) * 1e3, *copy = median(cv, reps) * 1e3, *shift = median(rv, reps) * 1e3,
         *shift_copy = median(kc, reps) * 1e3;
    pe_kv_cache_free(kv);
    pe_attention_free(att);
    free(k), free(v), free(q), free(o), free(dst);
    return rc ? 1 : 0;
}

typedef struct decode_res {
    double step, copy, torch, shift, shift_copy;
} decode_res;

static int bench_decode(const bopts *o, torchp *tp, decode_res D[4]) {
    const int reps = o->reps < 5 ? 5 : o->reps;
    printf("## (g) decoding through the KV cache: one token, H=32, Hkv=8, D=128, f32, causal, median of %d, %d threads\n\n",
           reps, nthreads());
    printf("| method | cached keys | K+V MiB | step ms | copy of K+V ms (1 thread) | step x copy | PyTorch eager ms |"
           " PyTorch x posenc | shift re-rotation ms | x copy of K (1 thread) |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const char *const methods[] = {"rope", "alibi"};
    static const int64_t sizes[] = {4096, 32768};
    for (int mi = 0; mi < 2; mi++)
        for (int si = 0; si < 2; si++) {
            double st = 0, cp = 0, sh = 0, shc = 0, tv = NAN;
            if (decode_measure(methods[mi], sizes[si], reps, &st, &cp, &sh, &shc)) return 1;
            char req[96];
            snprintf(req, sizeof req, "decode %s %lld %d", methods[mi], (long long)sizes[si], reps);
            if (o->torch && torch_ask(tp, req, &tv, 1) != 1) tv = NAN;
            D[mi * 2 + si] = (decode_res){st, cp, tv, sh, shc};
            printf("| %s | %lld | %.0f | %.2f | %.2f | %.2f |", methods[mi], (long long)sizes[si],
                   sizes[si] * 8 * 128 * 8.0 / (1 << 20), st, cp, st / cp);
            if (isnan(tv)) printf(" | |");
            else printf(" %.2f | %.1f |", tv, tv / st);
            if (mi == 0) printf(" %.2f | %.2f |\n", sh, sh / shc);
            else printf(" | |\n");
            fflush(stdout);
            gap();
        }
    printf("\nA step appends the token's k and v (rope: the key rotated once) and attends its query to every cached"
           " key on the decode path, which reads K and V in place once for the 4 query heads of each kv head. The copy"
           " reads and writes the same bytes with one thread (memcpy). PyTorch eager: `q @ K^T`, softmax, `@ V` over"
           " the cached (Hkv, Tk, D) tensors without repeating them for the query heads, rope on the new q and k or"
           " ALiBi's bias. The shift moves every key one position back (llama.cpp's context shift), rotating K in place"
           " by one table of angle differences.\n\n");
    return 0;
}

/* ---- (d) denormals ----------------------------------------------------------------------------- */
static int bench_denormal(const bopts *o, double res[4][2]) {
    static const char *const name[4] = {"exp clamped to 0 below -87, FTZ/DAZ (default)", "exp clamped, no FTZ/DAZ",
                                        "exp underflows gradually, FTZ/DAZ", "exp underflows gradually, no FTZ/DAZ (IEEE)"};
    const int64_t T = 2048;
    double mib;
    printf("## (d) denormals: alibi, T=%lld, not causal (far logits reach exp(-1000)), fused path\n\n", (long long)T);
    printf("| exp and MXCSR | fwd ms | bwd ms | fwd x default | bwd x default |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int v = 0; v < 4; v++) {
        RUN.keep_mxcsr = v & 1, RUN.denormals = v >> 1;
        int rc = attn_measure("alibi", T, 0, 0, o->reps, 1, &res[v][0], &res[v][1], &mib);
        RUN.keep_mxcsr = RUN.denormals = 0;
        if (rc) return 1;
        printf("| %s | %.1f | %.1f | %.2f | %.2f |\n", name[v], res[v][0], res[v][1], res[v][0] / res[0][0],
               res[v][1] / res[0][1]);
        gap();
    }
    printf("\n");
    return 0;
}

/* ---- (e) GEMM ceiling against the fused core ---------------------------------------------------- */
typedef struct gemm_res {
    double sgemm[2], fwd[2], bwd[2]; /* GFLOP/s at 1 thread and all */
    int threads[2];
} gemm_res;

static int bench_gemm(const bopts *o, gemm_res *G) {
    const int64_t T = 2048, H = 8, D = 64, C = H * D;
    pe_err err;
    pe_attention *att;
    if (bench_layer("none", 0, &att, &err)) return cli_fail("bench: %s", err.msg);
    float *q = frand(T * C, 7), *k = frand(T * C, 8), *v = frand(T * C, 9), *dout = frand(T * C, 10);
    float *o_ = calloc((size_t)(T * C), 4), *st = calloc((size_t)(2 * H * T), 4), *g = calloc((size_t)(3 * T * C), 4);
    float *sc = calloc((size_t)(T * T), 4);
    int64_t *pos = malloc(sizeof(int64_t) * T);
    if (!q || !k || !v || !dout || !o_ || !st || !g || !sc || !pos) return cli_fail("bench: out of memory");
    for (int64_t t = 0; t < T; t++) pos[t] = t;
    pe_weights w = {0};
    pe_grads none = {0};
    pe__ctx ctx = {.cfg = pe_attention_config(att), .B = 1, .T = T, .qoff = 0, .Tk = T, .H = H, .Hkv = H, .D = D,
                   .C = C, .Ckv = C, .pos = pos, .kpos = pos, .pos_min = 0, .pos_max = T - 1, .w = &w, .g = &none};
    const pe__method *m = pe__method_get(PE_METHOD_NONE);
    const double fl = 4.0 * T * T * D * H; /* forward: two products of 2 T T D per head */
    const int reps = o->reps < 3 ? 3 : o->reps;
    double tv[32];
    G->threads[0] = 1, G->threads[1] = nthreads();
    for (int ti = 0; ti < 2; ti++) {
#ifdef PE_BLAS
        openblas_set_num_threads(G->threads[ti]);
#endif
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            pe__gemm(0, 1, T, T, D, 1.0f, q, C, k, C, 0.0f, sc, T); /* one head's q k^T */
            tv[r] = now() - t0;
        }
        G->sgemm[ti] = 2.0 * T * T * D / median(tv, reps) / 1e9;
        gap();
        pe_run_options run = RUN;
        run.threads = G->threads[ti];
        ctx.run = &run;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            pe__fused_forward(&ctx, m, q, k, v, o_, st, &err);
            tv[r] = now() - t0;
        }
        G->fwd[ti] = fl / median(tv, reps) / 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            pe__fused_backward(&ctx, m, NULL, 0, q, k, v, o_, st, dout, g, g + T * C, g + 2 * T * C, &err);
            tv[r] = now() - t0;
        }
        G->bwd[ti] = 2.5 * fl / median(tv, reps) / 1e9;
        ctx.run = NULL;
        gap();
    }
#ifdef PE_BLAS
    openblas_set_num_threads(G->threads[1]);
#endif
    printf("## (e) GEMM ceiling and the fused attention core: T=2048, H=8, D=64, not causal, GFLOP/s\n\n");
    printf("| threads | BLAS sgemm 2048x2048x64 (%s) | fused forward (%s kernels) | x sgemm | fused backward | x sgemm |\n",
           tr_env_blas_core(), pe__kernels_pick(NULL)->name);
    printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < 2; ti++)
        printf("| %d | %.1f | %.1f | %.2f | %.1f | %.2f |\n", G->threads[ti], G->sgemm[ti], G->fwd[ti],
               G->fwd[ti] / G->sgemm[ti], G->bwd[ti], G->bwd[ti] / G->sgemm[ti]);
    printf("\nForward counts 4 T^2 D H flops (q k^T and p v), backward 10 T^2 D H (s recomputed, dv, dp, dq, dk);"
           " exp, softmax and packing are not counted.\n\n");
    free(q), free(k), free(v), free(dout), free(o_), free(st), free(g), free(sc), free(pos);
    pe_attention_free(att);
    return 0;
}

/* ---- (h) training: posenc's trainer against the same model in PyTorch -------------------------- */
typedef struct trow {
    const char *method;
    int64_t B, T, steps;
    double ours, torch;           /* tokens/s, median of the rounds; NAN: not run */
    long long np_ours, np_torch;  /* parameters: the same model has the same count */
    char why[160];                /* the trainer refused the method */
} trow;

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
    double t0 = now();
    for (; steps ? n < steps : n < 3 || now() - t0 < seconds; n++) {
        if (tr_run_step(run, &loss, &tk, err)) return 1;
        tokens += tk;
    }
    *tps = (double)tokens / (now() - t0);
    return 0;
}

/* Every method at the trainer's default shape (batch 4 x 64, width 64, 2 layers, 4 heads) and at
 * batch 32: a tr_run of `posenc train` stepped in-process (batches of the lm task, forward,
 * backward, clipping, AdamW; FTZ/DAZ as `train` sets them), and bench/torch_train.py's model of
 * the same shape, vocabulary and parameter count, alternating rounds of the same number of steps
 * (the order swapped every round), each after 2 untimed steps. */
static int bench_train(const bopts *o, trow *rows, int *nrows, char *info, size_t ninfo, int *threads) {
    const int th = o->threads ? o->threads : 1, warm = 2, rounds = o->reps;
    const double round_s = o->quick ? 0.4 : 1.0; /* seconds of posenc's training per round */
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
        fprintf(stderr, "posenc: bench: train: no PyTorch (%s with /usr/bin/python3 and torch): its columns stay empty\n",
                o->torch_train_path);
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
           " posenc / PyTorch |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n");
    fflush(stdout);
    int rc = 0;
    for (int bi = 0; bi < 2 && !rc; bi++)
        for (int mi = 0; mi < o->nm && !rc; mi++) {
            trow *R = &rows[(*nrows)++];
            *R = (trow){o->methods[mi], BATCH[bi], task.L, 0, NAN, NAN, 0, 0, ""};
            tr_options opt = base;
            tr_run run;
            opt.batch = R->B;
            snprintf(opt.method, sizeof opt.method, "%s", R->method);
            if (tr_run_init(&run, &opt, &task, &err)) { /* a method the trainer does not take */
                snprintf(R->why, sizeof R->why, "%.159s", err.msg);
                printf("| %s | %lld x %lld | %s | | | | |\n", R->method, (long long)R->B, (long long)R->T, R->why);
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
                    gap();
                }
            tr_run_free(&run);
            if (rc) {
                fprintf(stderr, "posenc: bench: train: %s: %s\n", R->method, err.msg);
                break;
            }
            R->ours = median(tv[0], n[0]);
            if (n[1]) R->torch = median(tv[1], n[1]);
            printf("| %s | %lld x %lld | %lld / ", R->method, (long long)R->B, (long long)R->T, R->np_ours);
            printf(R->np_torch ? "%lld |" : "— |", R->np_torch);
            printf(" %lld | %.1fk |", (long long)R->steps, R->ours / 1e3);
            if (isnan(R->torch)) printf(" — | — |\n");
            else printf(" %.1fk | %.2fx |\n", R->torch / 1e3, R->ours / R->torch);
            fflush(stdout);
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
           " columns empty.\n\n");
    return 0;
}

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *p = strchr(line, ':') + 2;
            p[strcspn(p, "\n")] = 0;
            snprintf(buf, n, "%s", p);
            break;
        }
    if (f) fclose(f);
}

static void loadavg(char *buf, size_t n) {
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, n, "%.1f %.1f %.1f", a, b, c);
    if (f) fclose(f);
}

static int parse_list(const char *s, const char **out, int max) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *t = strtok(buf, ","); t && n < max; t = strtok(NULL, ",")) out[n++] = t;
    return n;
}

static int want(const bopts *o, const char *section) {
    if (!o->only) return 1;
    const char *p = strstr(o->only, section);
    return p && (p == o->only || p[-1] == ',');
}

static const char *const SECTIONS[] = {"rope", "attn", "decode", "denormal", "gemm", "packed", "train", NULL};
static const char *section_name(int i) { return SECTIONS[i]; }

int cli_bench(int argc, char **argv) {
    bench_args a;
    int rc;
    if (arg_start(&ARGS_BENCH, argc, argv, &a, &rc)) return rc;
    bopts o = {.T = {512, 2048, 8192}, .nT = 3, .causal = {0, 1}, .ncausal = 2, .reps = 3, .torch = !a.no_torch,
               .reference = !a.no_reference, .ref_max_T = a.ref_max_length, .torch_max_T = a.torch_max_length,
               .torch_path = a.torch, .torch_train_path = a.torch_train, .readme = a.readme, .only = a.only,
               .threads = (int)a.threads, .quick = a.quick, .train_steps = a.steps};
    if (a.quick) o.nT = 2, o.reps = 1;
    if (a.reps) o.reps = (int)a.reps;
    if (a.lengths) {
        long long l[MAXL];
        if ((o.nT = arg_int_list("bench", "--length", a.lengths, 1, 1 << 17, l, MAXL)) < 0) return 2;
        for (int t = 0; t < o.nT; t++) o.T[t] = l[t];
    }
    o.nm = parse_list(a.methods, o.methods, MAXL);
    for (int m = 0, k; m < o.nm; m++)
        if (arg_method("bench", "--methods", o.methods[m], &k)) return 2;
    if (!strcmp(a.causal, "yes")) o.causal[0] = 1, o.ncausal = 1;
    else if (!strcmp(a.causal, "no")) o.causal[0] = 0, o.ncausal = 1;
    if (o.only) { /* every section named is one */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o.only);
        for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            int known = 0;
            for (int i = 0; SECTIONS[i]; i++) known |= !strcmp(w, SECTIONS[i]);
            const char *best = known ? NULL : arg_nearest(w, section_name);
            if (!known && best) return cli_fail("bench: --only: unknown section '%s' (did you mean %s?)", w, best);
            if (!known) return cli_fail("bench: --only: unknown section '%s' (rope, attn, decode, denormal, gemm, packed, train)", w);
        }
    }
    /* the README's block must be there before the minutes of measuring, not after */
    if (o.readme && cli_readme_block("bench", o.readme, "bench", NULL)) return 2;
    tr_env_blas_select("bench", argc, argv); /* re-executes with OPENBLAS_CORETYPE when that helps */
    malloc_measure(0);
    if (o.threads) {
        RUN.threads = o.threads;
#ifdef _OPENMP
        omp_set_num_threads(o.threads);
#endif
#ifdef PE_BLAS
        openblas_set_num_threads(o.threads);
#endif
    }
    const int nth = nthreads();
    char cpu[256], load0[64], load1[64];
    cpu_model(cpu, sizeof cpu);
    loadavg(load0, sizeof load0);
    torchp tp = {0};
    const int torch_wanted = o.torch; /* the train section starts its own */
    if (o.torch && (want(&o, "rope") || want(&o, "attn") || want(&o, "decode"))) {
        o.torch = torch_start(&tp, o.torch_path, nth);
        if (!o.torch) fprintf(stderr, "posenc: bench: no PyTorch (%s with /usr/bin/python3 and torch): its columns stay empty\n", o.torch_path);
    } else
        o.torch = 0;
    printf("# posenc bench\n\n%s, %d threads, OpenBLAS core %s, fused kernels %s; PyTorch: %s; load average at start %s\n\n",
           cpu, nth, tr_env_blas_core()[0] ? tr_env_blas_core() : "none", pe__kernels_pick(NULL)->name,
           o.torch ? tp.info : torch_wanted && want(&o, "train") ? "its own process in the train section" : "not run", load0);
    fflush(stdout);
    rope_res RR;
    memset(&RR, 0, sizeof RR);
    arow rows[MAXL * MAXL * 2];
    int nrows = 0;
    double den[4][2];
    gemm_res G;
    int did_rope = 0, did_den = 0, did_gemm = 0, did_dec = 0, ntrain = 0, train_threads = 1;
    decode_res dec[4];
    trow train[2 * MAXL];
    char train_info[256] = "";
    if (!rc && want(&o, "rope")) rc = bench_rope(&o, &tp, &RR), did_rope = !rc;
    if (!rc && want(&o, "attn")) rc = bench_attn(&o, &tp, rows, &nrows);
    if (!rc && want(&o, "decode")) rc = bench_decode(&o, &tp, dec), did_dec = !rc;
    torch_stop(&tp);
    if (!rc && want(&o, "denormal")) rc = bench_denormal(&o, den), did_den = !rc;
    if (!rc && want(&o, "gemm")) rc = bench_gemm(&o, &G), did_gemm = !rc;
    if (!rc && want(&o, "packed")) rc = bench_packed(&o);
    o.torch = torch_wanted;
    if (!rc && want(&o, "train")) rc = bench_train(&o, train, &ntrain, train_info, sizeof train_info, &train_threads);
    loadavg(load1, sizeof load1);
    printf("Load average at the end: %s (%s).\n", load1, "other processes share these cores: compare ratios, not times");
    if (rc || !o.readme) return rc;

    /* the README's summary, from the same measurements */
    char *block = NULL;
    size_t len = 0;
    FILE *md = open_memstream(&block, &len);
    if (!md) return cli_fail("bench: out of memory");
    fprintf(md, "Measured by `make bench-readme` (`posenc bench --readme README.md`) on %s, %d threads, OpenBLAS core %s,"
                " fused kernels %s, PyTorch %s; load average %s at the start and %s at the end: the machine was shared,"
                " so the ratios (measured side by side in one run) are what counts, not the times.\n\n",
            cpu, nth, tr_env_blas_core()[0] ? tr_env_blas_core() : "none", pe__kernels_pick(NULL)->name,
            tp.info[0] ? tp.info : "not run", load0, load1);
    if (did_rope)
        fprintf(md, "RoPE on q and k [T=4096, H=32, D=128], in place, %d threads: %.2fx the time of a copy of the same bytes"
                    " (`half`, %.0f%% of copy bandwidth), %.2fx (`interleaved`); 1 thread: %.2fx, %.2fx. With the exact-angle"
                    " cos/sin table built for the call: %.2fx (%d threads), %.2fx (1 thread). PyTorch eager: %.1fx copy.\n\n",
                RR.threads[1], RR.half[1] / RR.copy[1], 100 * RR.copy[1] / RR.half[1], RR.inter[1] / RR.copy[1],
                RR.half[0] / RR.copy[0], RR.inter[0] / RR.copy[0], (RR.half[1] + RR.table[1]) / RR.copy[1], RR.threads[1],
                (RR.half[0] + RR.table[0]) / RR.copy[0], RR.torch / RR.copy[1]);
    if (nrows) {
        fprintf(md, "Attention layer (projections included), H=8, D=64: speed-up of the fused path over the reference path"
                    " and over PyTorch eager (times of theirs / ours), and peak memory growth:\n\n");
        fprintf(md, "| method | T | causal | fwd ms | vs ref | vs PyTorch | bwd ms | vs ref | vs PyTorch | MiB fused / ref / PyTorch |\n");
        fprintf(md, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
        for (int r = 0; r < nrows; r++) {
            const arow *R = &rows[r];
            fprintf(md, "| `%s` | %lld | %s | %.1f | ", R->method, (long long)R->T, R->causal ? "yes" : "no", R->f[FUSED]);
            fprintf(md, isnan(R->f[REF]) ? "— | " : "%.1fx | ", R->f[REF] / R->f[FUSED]);
            fprintf(md, isnan(R->f[TORCH]) ? "— | " : "%.1fx | ", R->f[TORCH] / R->f[FUSED]);
            fprintf(md, "%.1f | ", R->b[FUSED]);
            fprintf(md, isnan(R->b[REF]) ? "— | " : "%.1fx | ", R->b[REF] / R->b[FUSED]);
            fprintf(md, isnan(R->b[TORCH]) ? "— | " : "%.1fx | ", R->b[TORCH] / R->b[FUSED]);
            fprintf(md, "%.0f / ", R->mib[FUSED]);
            fprintf(md, isnan(R->mib[REF]) ? "— / " : "%.0f / ", R->mib[REF]);
            fprintf(md, isnan(R->mib[TORCH]) ? "— |\n" : "%.0f |\n", R->mib[TORCH]);
        }
        fprintf(md, "\n");
    }
    if (did_dec) {
        fprintf(md, "Decoding one token through the KV cache (H=32, Hkv=8, D=128, %d threads): the step against a copy"
                    " of the cache's K and V bytes (one thread) and PyTorch eager's time over ours:", nth);
        static const char *const dm[2] = {"rope", "alibi"};
        for (int i = 0; i < 4; i++)
            fprintf(md, "%s `%s` %d keys %.2fx", i ? "," : "", dm[i / 2], i % 2 ? 32768 : 4096, dec[i].step / dec[i].copy);
        fprintf(md, ".");
        if (!isnan(dec[0].torch))
            for (int i = 0; i < 4; i++)
                fprintf(md, "%s `%s` %d: PyTorch %.1fx", i ? "," : " PyTorch eager:", dm[i / 2], i % 2 ? 32768 : 4096,
                        dec[i].torch / dec[i].step);
        fprintf(md, "%s A context shift re-rotates 32768 cached keys in %.2fx the time of a copy of K.\n\n",
                isnan(dec[0].torch) ? "" : ".", dec[1].shift / dec[1].shift_copy);
    }
    if (did_den)
        fprintf(md, "Denormals (alibi, T=2048, not causal; the fused path clamps exp and sets FTZ/DAZ in its threads):"
                    " without FTZ/DAZ forward/backward take %.2fx/%.2fx the time, with IEEE gradual underflow throughout"
                    " %.2fx/%.2fx.\n\n",
                den[1][0] / den[0][0], den[1][1] / den[0][1], den[3][0] / den[0][0], den[3][1] / den[0][1]);
    if (did_gemm)
        fprintf(md, "GEMM ceiling: the fused core (`none`, T=2048, not causal) runs at %.0f GFLOP/s forward and %.0f backward"
                    " with %d threads, %.2fx and %.2fx of OpenBLAS sgemm on the 2048x2048x64 product (%.0f GFLOP/s).\n",
                G.fwd[1], G.bwd[1], G.threads[1], G.fwd[1] / G.sgemm[1], G.bwd[1] / G.sgemm[1], G.sgemm[1]);
    if (ntrain) {
        fprintf(md, "%sTraining: `posenc train`'s model (2 layers x 64 wide, 4 heads, length 64, AdamW) in C against the same"
                    " model in PyTorch eager (`bench/torch_train.py`, %s), %d thread%s each, tokens/s:\n\n",
                did_gemm ? "\n" : "", train_info, train_threads, train_threads == 1 ? "" : "s");
        fprintf(md, "| method | batch x length | posenc tok/s | PyTorch tok/s | posenc / PyTorch |\n| --- | --- | ---: | ---: | ---: |\n");
        for (int r = 0; r < ntrain; r++) {
            const trow *R = &train[r];
            if (R->why[0]) continue;
            fprintf(md, "| `%s` | %lld x %lld | %.1fk |", R->method, (long long)R->B, (long long)R->T, R->ours / 1e3);
            if (isnan(R->torch)) fprintf(md, " — | — |\n");
            else fprintf(md, " %.1fk | %.2fx |\n", R->torch / 1e3, R->ours / R->torch);
        }
    }
    fclose(md);
    rc = cli_readme_block("bench", o.readme, "bench", block);
    free(block);
    if (!rc) printf("Wrote the summary into %s.\n", o.readme);
    return rc;
}
