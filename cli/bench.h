/* posenc bench: what its sections share (cli/bench*.c). Every section measures posenc through
 * its public API (posenc.h) alone, as a user's program would. */
#ifndef PE_CLI_BENCH_H
#define PE_CLI_BENCH_H

#include <stdio.h>
#include <sys/types.h>

#include "posenc.h"

enum { MAXL = 8, MAXM = 32 }; /* lengths, methods */

/* The run's settings. The shapes of the sections with fixed shapes are here so that --quick
 * (a smoke run of every section, seconds in all) can shrink them. */
typedef struct bopts {
    int64_t T[MAXL];
    int nT;
    const char *methods[MAXM];
    int nm;
    int causal[2], ncausal;
    int reps, threads, torch, reference, quick;
    int64_t ref_max_T, torch_max_T, train_steps;
    int64_t rope_T;       /* rows of the rope section (4096) */
    int64_t decode_Tk[2]; /* cached keys of the decode section (4096, 32768) */
    int64_t gemm_T;       /* the gemm section's length (2048) */
    int64_t denormal_T;   /* the denormal section's length (2048) */
    const char *torch_path, *torch_train_path, *readme, *only;
} bopts;

/* How every layer and kernel of the benchmark runs: --threads, and per measurement the path
 * and the MXCSR/exp switches (set on each layer, pe_attention_set_run_options). */
extern pe_run_options bench_run;

double bench_now(void);
/* A pause between variants: thread pools that spin after a region (OpenBLAS's, OpenMP's,
 * PyTorch's) would otherwise slow the next one down on 2 cores. */
void bench_gap(void);
double bench_median(double *v, int n);
/* on: large blocks mmapped and returned on free (peak memory is measured); off: kept by malloc,
 * as in a steady loop. glibc only. */
void bench_malloc_measure(int on);
int bench_peak_reset(void);
double bench_status_mib(const char *key);
int bench_threads(void);
float *bench_rand(int64_t n, uint64_t seed);
void bench_copy(float *dst, const float *src, int64_t n, int nth);
void bench_print_ratio(double num, double den);  /* " 1.2x |" or " — |" */
void bench_print_ratio2(double num, double den); /* " 1.23 |" */
void bench_print_ms(double v);

/* PyTorch, a coprocess answering one request per line (bench/torch_bench.py, torch_train.py) */
typedef struct torchp {
    FILE *to, *from;
    pid_t pid;
    char info[256];
} torchp;
const char *torch_python(void); /* $POSENC_PYTHON or .venv/bin/python */
int torch_start(torchp *tp, const char *script, int threads);
/* Sends one request; fills up to nv numbers of the "ok ..." answer, returns how many (-1: error). */
int torch_ask(torchp *tp, const char *req, double *v, int nv);
void torch_stop(torchp *tp);

/* ---- the sections; each prints its tables and returns 0, or 1 after a message -------------- */
typedef struct rope_res {
    int threads[2];
    double copy[2], half[2], inter[2], table[2], torch; /* ms */
} rope_res;
int bench_rope(const bopts *o, torchp *tp, rope_res *R);

enum { FUSED, REF, TORCH };
typedef struct arow {
    const char *method;
    int64_t T;
    int causal;
    double f[3], b[3], mib[3]; /* ms, ms, MiB; NAN: not run */
} arow;
int bench_attn(const bopts *o, torchp *tp, arow *rows, int *nrows);
int bench_core(const bopts *o);
int bench_packed(const bopts *o);
int bench_denormal(const bopts *o, double res[4][2]);

/* the scale section: tokens/s of one process with 1 and 2 threads and of mpirun -n 2 (NAN: not
 * run, why says why), and rank 0's share of the time (%) and ms a step in the sums over ranks */
typedef struct scale_res {
    int64_t B, steps;
    int have_mpi;
    double tps[4], share, ms; /* 1 thread, 2 threads, 2 shares on 2 threads, mpirun -n 2 */
    char why[600];
} scale_res;
int bench_scale(const bopts *o, scale_res *R);

typedef struct gemm_res {
    double sgemm[2], fwd[2], bwd[2]; /* GFLOP/s at 1 thread and all; sgemm NAN without BLAS */
    int threads[2];
} gemm_res;
int bench_gemm(const bopts *o, gemm_res *G);

typedef struct decode_res {
    double step, copy, torch, shift, shift_copy, qkv, qkv_none, rotate, kvcache, paged; /* ms */
    double paged_x; /* paged over forward_kvcache: the median of the rounds' ratios */
} decode_res;
int bench_decode(const bopts *o, torchp *tp, decode_res D[4]);

typedef struct trow {
    const char *method;
    int64_t B, T, steps;
    double ours, torch;          /* tokens/s, median of the rounds; NAN: not run */
    double gemm_x;               /* posenc's step time over its GEMMs' alone (the bound: 1) */
    double all_x;                /* the same, the attention's products as GEMMs too (train --profile's second) */
    long long np_ours, np_torch; /* parameters: the same model has the same count */
    char why[160];               /* the trainer refused the method */
} trow;
int bench_train(const bopts *o, trow *rows, int *nrows, char *info, size_t ninfo, int *threads);

#endif
