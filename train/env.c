/* Process settings of training runs (env.h). */
#include "env.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif
#ifdef PE_BLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

void tr_env_thread(void) {
#ifdef HAVE_MXCSR
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
#endif
}

void tr_env_setup(int threads) {
#ifdef PE_BLAS
    openblas_set_num_threads(threads);
#endif
#ifdef _OPENMP
    omp_set_num_threads(threads); /* the library's own parallel regions (one run per core) */
#endif
    (void)threads;
    tr_env_thread();
}

const char *tr_env_blas_core(void) {
#ifdef PE_BLAS
    return openblas_get_corename();
#else
    return "";
#endif
}

/* The BLAS core to ask for: NULL when the library's own choice stands (doc/perf.md, item 2) */
static const char *blas_core_wanted(void) {
#if defined(PE_BLAS) && defined(__x86_64__) && defined(__GNUC__)
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *target = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        target = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        target = "Haswell";
    const char *core = openblas_get_corename();
    static const char *const OLD[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                      "Sandybridge", "Katmai", "Coppermine", "Northwood", "Banias", NULL};
    int old = 0;
    for (int i = 0; OLD[i]; i++) old |= core && !strcasecmp(core, OLD[i]);
    if (target && !strcasecmp(core ? core : "", "Haswell") && !strcmp(target, "SkylakeX")) old = 1;
    return target && old ? target : NULL;
#else
    return NULL;
#endif
}

void tr_env_select(const char *command, int argc, char **argv) {
#ifdef __linux__
    const char *core = blas_core_wanted();
    /* OpenMP's idle threads wait for the next region passively: spinning, libgomp's default, they
     * take the cores from the OpenBLAS threads of the projections that follow (doc/perf.md, item 3) */
    const int passive = !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT");
    if (!core && !passive) return;
    char **args = calloc((size_t)argc + 3, sizeof(char *));
    if (!args) return;
    args[0] = "posenc", args[1] = (char *)command;
    for (int i = 0; i < argc; i++) args[i + 2] = argv[i];
    if (core) setenv("OPENBLAS_CORETYPE", core, 1);
    if (passive) setenv("OMP_WAIT_POLICY", "passive", 1);
    /* the binary by its own path, so that the process keeps its name (ps, top, perf), not "exe" */
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) self[len] = 0;
    fflush(NULL);
    execv(len > 0 ? self : "/proc/self/exe", args);
    if (core) unsetenv("OPENBLAS_CORETYPE"); /* exec failed: carry on as the libraries chose */
    if (passive) unsetenv("OMP_WAIT_POLICY");
    free(args);
#else
    (void)command, (void)argc, (void)argv;
#endif
}

double tr_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void tr_format_time(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void tr_env_cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *p = strchr(line, ':') + 1;
            p += *p == ' ';
            p[strcspn(p, "\n")] = 0;
            snprintf(buf, n, "%s", p);
            break;
        }
    if (f) fclose(f);
}
