/* The fused attention path, shared by fused.c (dispatch, threads, packing, gradients of the
 * bias tensors) and kernels.c (the tile loops and the RoPE rotation, compiled once per
 * instruction set and picked at run time).
 *
 * Legend as internal.h; dp = D rounded up to 16 (packed rows are zero-padded), tkp = Tk
 * rounded up to PE_BC. A tile is PE_BR queries x PE_BC keys of one (b, h). */
#ifndef PE_FUSED_H
#define PE_FUSED_H

#include "internal.h"

enum { PE_BR = 64, PE_BC = 64, PE_DALIGN = 16 };

typedef void (*pe__bias_fwd_fn)(pe__ctx *ctx, int64_t b, int64_t h, int64_t i0, int64_t ni,
                                int64_t j0, int64_t nj, float *s, int64_t lds);
typedef void (*pe__bias_bwd_fn)(pe__ctx *ctx, int64_t b, int64_t h, int64_t i0, int64_t ni,
                                int64_t j0, int64_t nj, const float *ds, int64_t lds);

/* One kernel call: forward of one query block, or backward of one (b, h). */
typedef struct pe__fjob {
    pe__ctx *ctx; /* what the bias hooks see (backward: the thread's copy, private gradients) */
    pe__bias_fwd_fn bias;
    pe__bias_bwd_fn bias_bwd;
    int64_t b, h, T, Tk, M, D, dp, tkp;
    int causal;
    float scale; /* folded into the packed queries */
    float lo;    /* exp(x) is 0 below lo: -87 keeps every value normal, -104 underflows gradually */
    /* q, o, dout, dq rows of this head: (T, D) with row stride ld */
    const float *q, *o, *dout;
    float *out, *dq;
    int64_t ld;
    /* the kv head, packed: kt, vt (dp, tkp) transposed; kr, v (tkp, dp) */
    const float *kt, *kr, *v, *vt;
    /* row statistics of this head (T): the row max m and 1 / sum exp(s - m) */
    float *m, *il;
    /* backward: (tkp, dp) accumulators of dk, dv of the kv head (the caller adds them) */
    float *dk, *dv;
    int64_t i0, ni; /* forward: the query block */
    /* scratch, 64-byte aligned: a, c, e (PE_BR, dp); s, t (PE_BR, PE_BC); r (4 PE_BR) */
    float *a, *c, *e, *s, *t, *r;
} pe__fjob;

typedef struct pe__kernels {
    const char *name; /* "avx512", "avx2", "generic" */
    /* Returns the first row of the block with every key masked (relative to i0), or -1. */
    int64_t (*forward)(const pe__fjob *j);
    void (*backward)(const pe__fjob *j);
    /* pe__rope_rotate over rows [r0, r1) */
    void (*rope)(float *x, int64_t r0, int64_t r1, int64_t ld, int64_t nh, int64_t D, int64_t rd,
                 int layout, const float *cs, float sin_sign);
} pe__kernels;

/* The kernels for isa ("avx512", "avx2", "generic"), or the best the CPU runs when isa is
 * NULL or not runnable here. */
const pe__kernels *pe__kernels_pick(const char *isa);

#endif
