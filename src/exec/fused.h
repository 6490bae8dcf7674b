/* The fused attention path, shared by fused.c (dispatch, threads, packing, gradients of the
 * bias tensors) and kernels.c (the tile loops and the RoPE rotation, compiled once per
 * instruction set and picked at run time).
 *
 * Legend as internal.h; dp = D rounded up to 16 (packed rows are zero-padded), tkp the packed
 * keys' stride (pe__key_stride: Tk rounded up to PE_BC, 16 more from 1024). A tile is PE_BR
 * queries x PE_BC keys of one (b, h). */
#ifndef PE_FUSED_H
#define PE_FUSED_H

#include "../rotary/rotary.h" /* the rotation kernel of rope.c and the vector maths of vmath.h */

enum { PE_BR = 64, PE_BC = 64, PE_DALIGN = 16 };

/* The key tiles [*j0, *j1) a block of ni queries from i0 visits: from the first query's first
 * key, rounded down to a tile, to the last query's last (the band's bounds rise with i) */
static inline void pe__band_tiles(pe__band band, int64_t qoff, int64_t i0, int64_t ni, int64_t Tk, int64_t *j0,
                                  int64_t *j1) {
    int64_t lo, hi, lo1, hi1;
    pe__band_range(band, qoff, i0, Tk, &lo, &hi);
    pe__band_range(band, qoff, i0 + ni - 1, Tk, &lo1, &hi1);
    *j0 = lo / PE_BC * PE_BC, *j1 = hi1;
}

/* A causal diagonal tile: its first PE_BR / 2 queries see none of its last PE_BC / 2 keys (the
 * band's bounds rise with the query), so the kernels' products skip that quarter. The skipped
 * entries are masked (p = 0), so every sum is the one the whole tile gives: only terms 0 v are
 * left out. */
enum { PE_HR = PE_BR / 2, PE_HC = PE_BC / 2 };
static inline int pe__diag_half(pe__band band, int64_t qoff, int64_t Tk, int64_t i0, int64_t j0) {
    int64_t lo, hi;
    pe__band_range(band, qoff, i0 + PE_HR - 1, Tk, &lo, &hi);
    return hi <= j0 + PE_HC;
}

/* the kernels' mm_acc (kernels.c) is pe__mm_fn (internal.h) */

/* One kernel call: forward of one query block, or backward of one (b, h). */
typedef struct pe__fjob {
    pe__ctx *ctx; /* what the tile hooks see (backward: the thread's copy, private gradients) */
    int64_t b, h, T, Tk, qoff, D, dp, tkp; /* T, Tk, qoff: row b's own (per-row lengths), the rest padding */
    int64_t Dv, dvp; /* the values' width (pe__ctx.Dv) and packed width: v, o, dout, dv */
    pe__band band; /* the keys each query sees (pe__band_range: causal, window) */
    /* attn_mask of row b (T, Tk), 0 = masked, or NULL; tiles (ceil(T/PE_BR), ceil(Tk/PE_BC)) of
     * row b: 0 every entry masked (the tile is skipped), 1 some, 2 none */
    const uint8_t *mask, *tiles;
    int64_t nkb, ldm; /* ldm: the mask's row stride (the call's Tk) */
    float scale; /* folded into the packed queries */
    float lo;    /* exp(x) is 0 below lo: -87 keeps every value normal, -104 underflows gradually */
    /* q, dq rows of this head: (T, D) with row stride ld; o, out, dout (T, Dv) with stride ldo */
    const float *q, *o, *dout;
    float *out, *dq;
    int64_t ld, ldo;
    /* the kv head, packed: kt (dp, tkp) and vt (dvp, tkp) transposed; kr (tkp, dp), v (tkp, dvp) */
    const float *kt, *kr, *v, *vt;
    /* row statistics of this head (T): the row max m and 1 / sum exp(s - m) */
    float *m, *il;
    /* backward: accumulators of the kv head's dk (tkp, dp) and dv (tkp, dvp) (the caller stores them) */
    float *dk, *dv;
    int64_t i0, ni; /* forward: the query block */
    /* scratch, 64-byte aligned: a, e (PE_BR, dp); c (PE_BR, dvp); s, t (PE_BR, PE_BC); r (4 PE_BR) */
    float *a, *c, *e, *s, *t, *r;
    /* the method's tile hooks (internal.h: score_mod, value_mod), or NULL; own: PE__SCORE_OWN */
    const pe__method *mod;
    int own;
    float *u;  /* scratch (PE_BR, PE_BC): the plain scores score_mod_backward reads (PE__SCORE_PLAIN) */
    float *ms; /* the method's tile scratch (tile_scratch floats) */
    pe__mm_fn mm;
} pe__fjob;

/* One piece of a decode call (pe__decode_forward): keys [u0, u1) of row b, every kv head at
 * once so that K and V are read in place, in order, once. Rows: Rg per kv head g (group x T
 * rounded up to 4, the rest zero), local row x < group T being query x % T of head
 * g group + x / T. Results are partial (split over key ranges): the running max m, sum l and
 * the unnormalised acc of every row, combined by the caller. */
enum { PE_DECODE_ROWS = 256 }; /* Hkv Rg at most */
typedef struct pe__djob {
    pe__ctx *ctx;
    const pe__method *mod; /* its score_mod, a bias (no PE__SCORE_QK), or NULL */
    int64_t b, Hkv, group, T, Tk, qoff, D, dp, Rg; /* T, Tk, qoff: row b's own */
    int64_t u0, u1;
    pe__band band;
    float scale, lo;
    const float *q;     /* row b's queries: query t of head h at q + t ld + h D */
    int64_t ld;
    const float *k, *v; /* row b's keys: key u at k + u ldk, kv head g at + g D */
    int64_t ldk;
    const float *const *krows, *const *vrows; /* paged keys: key u's row at krows[u] (NULL: k + u ldk) */
    float *qs; /* scratch (Hkv Rg, dp), 64-byte aligned */
    float *s;  /* scratch (max(Hkv Rg, PE_BR), PE_BC) */
    float *acc, *m, *l; /* out: (Hkv Rg, dp), (Hkv Rg), (Hkv Rg) */
} pe__djob;

typedef struct pe__kernels {
    const char *name; /* "avx512", "avx2", "generic" */
    /* Returns the first row of the block with every key masked (relative to i0), or -1. */
    int64_t (*forward)(const pe__fjob *j);
    void (*backward)(const pe__fjob *j);
    /* pe__rope_rotate_from over rows [r0, r1) */
    void (*rope)(float *y, const float *x, int64_t r0, int64_t r1, int64_t ld, int64_t nh, int64_t D, int64_t rd,
                 int layout, const float *cs, float sin_sign);
    pe__mm_fn mm; /* rows % 4 == 0, dp % 16 == 0 */
    void (*decode)(const pe__djob *j);
    /* the reference executor's row softmax: pe__softmax_forward with exp below lo 0 */
    void (*softmax)(const float *s, float *p, int64_t n, int64_t m, float sink, float lo);
    pe__sincos_fn sincos;     /* vmath.h */
    pe__softplus_fn softplus;
} pe__kernels;

/* The kernels for isa ("avx512", "avx2", "generic"), or the best the CPU runs when isa is
 * NULL or not runnable here. */
const pe__kernels *pe__kernels_pick(const char *isa);

/* ---- how the executors run (run.c) ------------------------------------------------------- */
#ifdef _OPENMP
#include <omp.h>
#define PE_OMP(x) _Pragma(#x)
#else
#define PE_OMP(x)
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
#endif
#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define PE_MXCSR 1
#endif


extern const pe_run_options pe__run_defaults; /* a zeroed pe_run_options */
static inline int64_t pe__round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
/* The packed keys' row stride: Tk rounded up to a tile, plus 16 floats from 1024 keys. A stride
 * of 4 KiB or a multiple (T = 1024, 2048, 4096) puts the rows of a tile's transposed keys in
 * the same few sets of L1; one line more spreads them (5-9% of the core at those lengths). Below
 * it the padding bought nothing and cost the trainer's 64-key rows 5-10% of a step. */
static inline int64_t pe__key_stride(int64_t Tk) {
    const int64_t tkp = pe__round_up(Tk, PE_BC);
    return tkp >= 1024 ? tkp + 16 : tkp;
}
/* run->isa, or NULL (the best the CPU runs) */
const char *pe__isa_of(const pe_run_options *run);
/* Threads for a call of about `work` multiply-adds: small calls stay on one thread, and so does
 * a call inside another parallel region (the trainer's one run per core). */
int pe__run_threads(const pe_run_options *run, double work);
/* FTZ/DAZ in the calling thread unless run->keep_mxcsr (returns the MXCSR to restore) */
unsigned pe__ftz_enter(const pe_run_options *run);
void pe__ftz_leave(const pe_run_options *run, unsigned old);
/* n floats, 64-byte aligned (free) */
float *pe__falloc(size_t n);

#endif
