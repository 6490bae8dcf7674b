/* How the executors run: threads (OpenMP when the compiler has it), the kernels of the CPU,
 * FTZ/DAZ for the duration of a call, aligned scratch kept between calls, and the rotation and
 * its exact-angle table split across threads (used by rope, xpos and the cache). */
#include "fused.h"

const pe_run_options pe__run_defaults = {0};

const char *pe__isa_of(const pe_run_options *run) { return run && run->isa[0] ? run->isa : NULL; }
const char *pe_run_kernels(const pe_run_options *opt) {
    char isa[sizeof opt->isa] = "";
    if (opt) memcpy(isa, opt->isa, sizeof isa - 1); /* the caller's may lack its terminator */
    return pe__kernels_pick(isa[0] ? isa : NULL)->name;
}

/* Threads for a call of about `work` multiply-adds: small calls (tests, the trainer's tiny
 * layers) stay on one thread, since starting and joining a team (whose idle threads spin on
 * a busy 2-core machine) costs more than the work. */
int pe__run_threads(const pe_run_options *run, double work) {
#ifdef _OPENMP
    if (work < (double)(1 << 22)) return 1;
    if (omp_in_parallel()) return 1; /* e.g. the trainer's one run per core */
    return run && run->threads > 0 ? run->threads : omp_get_max_threads();
#else
    (void)run, (void)work;
    return 1;
#endif
}

unsigned pe__ftz_enter(const pe_run_options *run) {
#ifdef PE_MXCSR
    unsigned old = _mm_getcsr();
    if (!run->keep_mxcsr) _mm_setcsr(old | 0x8040); /* FTZ | DAZ */
    return old;
#else
    (void)run;
    return 0;
#endif
}

void pe__ftz_leave(const pe_run_options *run, unsigned old) {
#ifdef PE_MXCSR
    if (!run->keep_mxcsr) _mm_setcsr(old);
#else
    (void)run, (void)old;
#endif
}

float *pe__falloc(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

float *pe__scratch_get(pe__scratch *sc, size_t n) {
    if (sc->n < n) {
        free(sc->p);
        sc->p = pe__falloc(n), sc->n = sc->p ? n : 0;
    }
    return sc->p;
}

/* key->p: the byte count (a size_t), then the bytes; SIZE_MAX: nothing valid */
int pe__inputs_same(pe__scratch *key, const pe__bytes *parts, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += parts[i].n;
    size_t have = SIZE_MAX;
    if (key->p) memcpy(&have, key->p, sizeof have);
    int same = have == total;
    const char *at = key->p ? (const char *)key->p + sizeof have : NULL;
    for (int i = 0; i < n && same; at += parts[i].n, i++) same = !parts[i].n || !memcmp(at, parts[i].p, parts[i].n);
    if (same) return 1;
    char *k = (char *)pe__scratch_get(key, (sizeof have + total + sizeof(float) - 1) / sizeof(float));
    if (!k) return 0;
    memcpy(k, &total, sizeof total);
    size_t off = sizeof total;
    for (int i = 0; i < n; off += parts[i].n, i++)
        if (parts[i].n) memcpy(k + off, parts[i].p, parts[i].n);
    return 0;
}

void pe__parallel_for(const pe_run_options *run, double work, int64_t n, void (*fn)(void *arg, int64_t i), void *arg) {
    const int nth = pe__run_threads(run, work);
    PE_OMP(omp parallel for num_threads(nth) schedule(static))
    for (int64_t i = 0; i < n; i++) fn(arg, i);
}

/* RoPE's rotation (declared in internal.h, used by rope and xpos): the rows split across
 * threads, each through the SIMD kernel. */
void pe__rope_rotate_from(const pe_run_options *run, float *y, const float *x, int64_t n, int64_t ld, int64_t nh,
                          int64_t D, int64_t rd, int layout, const float *cs, float sin_sign) {
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(run));
    const int nth = pe__run_threads(run, (double)n * nh * rd * 16); /* memory-bound: weigh it up */
    PE_OMP(omp parallel num_threads(nth))
    {
        const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t r0 = n * tid / nt, r1 = n * (tid + 1) / nt;
        K->rope(y, x, r0, r1, ld, nh, D, rd, layout, cs, sin_sign);
    }
}

void pe__rope_rotate(const pe_run_options *run, float *x, int64_t n, int64_t ld, int64_t nh, int64_t D, int64_t rd,
                     int layout, const float *cs, float sin_sign) {
    pe__rope_rotate_from(run, x, x, n, ld, nh, D, rd, layout, cs, sin_sign);
}

pe__sincos_fn pe__sincos_kernel(const pe_run_options *run) { return pe__kernels_pick(pe__isa_of(run))->sincos; }
pe__softplus_fn pe__softplus_kernel(const pe_run_options *run) { return pe__kernels_pick(pe__isa_of(run))->softplus; }

/* One row of rope's table: pair t at pos[axis[t]] (axis NULL: pos[0]), 64 pairs at a time */
static void rope_row(pe__sincos_fn sc, float *cs, const int64_t *pos, const uint8_t *axis, const double *inv_freq,
                     int64_t half, double attn) {
    enum { CH = 64 };
    double angle[CH], s[CH], c[CH];
    for (int64_t t0 = 0; t0 < half; t0 += CH) {
        const int64_t n = half - t0 < CH ? half - t0 : CH;
        for (int64_t t = 0; t < n; t++) angle[t] = (double)pos[axis ? axis[t0 + t] : 0] * inv_freq[t0 + t];
        sc(angle, s, c, n);
        for (int64_t t = 0; t < n; t++)
            cs[(t0 + t) * 2 + 0] = (float)(c[t] * attn), cs[(t0 + t) * 2 + 1] = (float)(s[t] * attn);
    }
}

/* The exact-angle table of rope (declared in internal.h): angle and cos/sin in double,
 * rounded once to float; the rows split across threads. A batch's rows share their
 * positions, so where the call's range of positions is shorter than its rows, each position's
 * row is computed once and the rows copy it. */
void pe__rope_table(const pe_run_options *run, float *cs, const int64_t *pos, int64_t A, const uint8_t *axis,
                    int64_t n, const double *inv_freq, int64_t half, double attn) {
    if (n < 1) return;
    int64_t lo = pos[0], hi = pos[0];
    for (int64_t i = 1; A == 1 && i < n; i++) lo = pos[i] < lo ? pos[i] : lo, hi = pos[i] > hi ? pos[i] : hi;
    const uint64_t span = (uint64_t)hi - (uint64_t)lo; /* wraps for no range shorter than the rows */
    float *tab = A == 1 && span < (uint64_t)(n - 1) ? malloc(sizeof(float) * (size_t)((span + 1) * half * 2)) : NULL;
    const int64_t rows = tab ? (int64_t)span + 1 : n;
    const int nth = pe__run_threads(run, (double)rows * half * 32); /* sin and cos in double */
    const pe__sincos_fn sc = pe__sincos_kernel(run);
    PE_OMP(omp parallel for num_threads(nth) schedule(static))
    for (int64_t i = 0; i < rows; i++) {
        const int64_t p = lo + i;
        if (tab) rope_row(sc, tab + i * half * 2, &p, NULL, inv_freq, half, attn);
        else rope_row(sc, cs + i * half * 2, pos + i * A, axis, inv_freq, half, attn);
    }
    if (!tab) return;
    for (int64_t i = 0; i < n; i++) memcpy(cs + i * half * 2, tab + (pos[i] - lo) * half * 2, sizeof(float) * half * 2);
    free(tab);
}
