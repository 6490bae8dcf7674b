/* posenc bench: timing, memory and the PyTorch coprocess, shared by the sections (bench.h). */
#include <math.h>
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

#include "bench.h"
#include "../tools/layer.h"

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A pause between variants: thread pools that spin after a region (OpenBLAS's, OpenMP's,
 * PyTorch's) would otherwise slow the next one down on 2 cores (doc/perf.md, item 3). */
void bench_gap(void) {
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Large blocks mmapped and returned on free while the peak memory is measured (one run), then
 * kept by malloc for the timed runs, as in a steady loop (no page faults). glibc only. */
void bench_malloc_measure(int on) {
#ifdef __GLIBC__
    if (on) malloc_trim(0);
    mallopt(M_MMAP_THRESHOLD, on ? 64 * 1024 : 1 << 30);
    mallopt(M_TRIM_THRESHOLD, on ? 128 * 1024 : 1 << 30);
#else
    (void)on;
#endif
}

/* Peak resident memory: Linux resets VmHWM when "5" is written to clear_refs. */
int bench_peak_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}
double bench_status_mib(const char *key) {
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
pe_run_options bench_run;

int bench_threads(void) {
#ifdef _OPENMP
    return bench_run.threads > 0 ? bench_run.threads : omp_get_max_threads();
#else
    return 1;
#endif
}

float *bench_rand(int64_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * (size_t)n);
    pe_rng r = {seed};
    if (x)
        for (int64_t i = 0; i < n; i++) x[i] = 2 * pe_rng_uniform(&r) - 1;
    return x;
}

/* ---- PyTorch, a coprocess answering one request per line (bench/torch_bench.py) ---------- */

/* The Python that runs the PyTorch side: $POSENC_PYTHON, else the project's environment (.venv,
 * made by scripts/deps.sh) beside the scripts, as the bench runs from the repository root. */
const char *torch_python(void) {
    const char *py = getenv("POSENC_PYTHON");
    return py && *py ? py : ".venv/bin/python";
}

int torch_start(torchp *tp, const char *script, int threads) {
    memset(tp, 0, sizeof *tp);
    const char *py = torch_python();
    if (access(py, X_OK) || access(script, R_OK)) return 0;
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
        execl(py, py, script, "--serve", "--threads", th, (char *)NULL);
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
int torch_ask(torchp *tp, const char *req, double *v, int nv) {
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

void torch_stop(torchp *tp) {
    if (!tp->pid) return;
    fprintf(tp->to, "quit\n");
    fclose(tp->to), fclose(tp->from);
    waitpid(tp->pid, NULL, 0);
    tp->pid = 0;
}

void bench_copy(float *dst, const float *src, int64_t n, int nth) {
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

void bench_print_ratio(double num, double den) {
    if (isnan(num) || isnan(den)) printf(" — |");
    else printf(" %.1fx |", num / den);
}
void bench_print_ratio2(double num, double den) {
    if (isnan(num) || isnan(den)) printf(" — |");
    else printf(" %.2f |", num / den);
}
void bench_print_ms(double v) {
    if (isnan(v)) printf(" — |");
    else printf(" %.1f |", v);
}

/* Causal against full attention, from the rows of one run that have both: the fused path
 * skips the tiles above the diagonal, so at large T causal takes about half the time; PyTorch
 * eager masks a full T x T score matrix. */
