/* The vector prelude of one pass of kernels.c (PE_KPASS 512, 256 or 1): the target, the width
 * VEC, the vector types and their loads, stores, broadcasts, FMA, max, horizontal sums and the
 * exp polynomial, and the pass's names for its kernels (KN). Included once per pass, so no
 * include guard; simd_end.h undoes it. */
#if PE_KPASS == 512
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")
#endif
#define VEC 16
#define MRN 8 /* rows of the s = a bt microkernel (times 2 vectors of columns) */
#define NV 4  /* vectors per row of the accumulating microkernel (times MRR rows) */
#define SWAP {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}
#elif PE_KPASS == 256
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define VEC 8
#define MRN 4
#define NV 2
#define SWAP {1, 0, 3, 2, 5, 4, 7, 6}
#else
#define VEC 4
#define MRN 4
#define NV 2
#define SWAP {1, 0, 3, 2}
#endif
#define MRR 4

#define KCAT2(a, b) a##_##b
#define KCAT(a, b) KCAT2(a, b)
#define KN(x) KCAT(x, PE_KPASS)
#define vf KN(vf_t)
#define vi KN(vi_t)
#define vld KN(vld)
#define vst KN(vst)
#define vbc KN(vbc)
#define fmadd KN(fmadd)
#define vmax KN(vmax)
#define vexp KN(vexp)
#define hsum_tree KN(hsum_tree)
#define hmax KN(hmax)
#define mm_nt KN(mm_nt)
#define mm_acc KN(mm_acc)
#define mm_nt_tile KN(mm_nt_tile)
#define mm_acc_queries KN(mm_acc_queries)
#define mm_acc_keys KN(mm_acc_keys)
#define mask_tile KN(mask_tile)
#define tile_skipped KN(tile_skipped)
#define online_softmax KN(online_softmax)
#define pack_rows KN(pack_rows)

typedef float vf __attribute__((vector_size(VEC * 4)));
typedef int32_t vi __attribute__((vector_size(VEC * 4)));

#ifdef __clang__ /* clang (the fuzzing build) has no __builtin_shuffle: the same permutation by lanes */
static inline vf KN(shuf)(vf v, vi m) {
    vf r;
    for (int i = 0; i < VEC; i++) r[i] = v[m[i] & (VEC - 1)];
    return r;
}
#define SHUF(v, ...) KN(shuf)(v, __VA_ARGS__)
#else
#define SHUF(v, ...) __builtin_shuffle(v, __VA_ARGS__)
#endif

static inline vf vld(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vst(float *p, vf v) { memcpy(p, &v, sizeof v); }

#if PE_KPASS == 512
static inline vf vbc(float x) { return (vf)_mm512_set1_ps(x); } /* ({0} + x is an add: -0.0) */
static inline vf fmadd(vf a, vf b, vf c) { return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
/* b where either is NaN */
static inline vf vmax(vf a, vf b) { return (vf)_mm512_max_ps((__m512)a, (__m512)b); }
#elif PE_KPASS == 256
static inline vf vbc(float x) { return (vf)_mm256_set1_ps(x); }
static inline vf fmadd(vf a, vf b, vf c) { return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c); }
static inline vf vmax(vf a, vf b) { return (vf)_mm256_max_ps((__m256)a, (__m256)b); }
#else
static inline vf vbc(float x) { return (vf){x, x, x, x}; }
static inline vf fmadd(vf a, vf b, vf c) { return a * b + c; }
static inline vf vmax(vf a, vf b) {
    vi m = a > b;
    return (vf)(((vi)a & m) | ((vi)b & ~m));
}
#endif

/* Horizontal sum and max as trees of shuffles: log2(VEC) steps where a lane-by-lane loop is a
 * chain of VEC dependent operations (once per row and tile in the online softmax). */
#if VEC == 16
#define HTREE(op, v)                                                                           \
    v = op(v, SHUF(v, (vi){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}));           \
    v = op(v, SHUF(v, (vi){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11}));           \
    v = op(v, SHUF(v, (vi){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13}));           \
    v = op(v, SHUF(v, (vi)SWAP));
#elif VEC == 8
#define HTREE(op, v)                                                                           \
    v = op(v, SHUF(v, (vi){4, 5, 6, 7, 0, 1, 2, 3}));                                          \
    v = op(v, SHUF(v, (vi){2, 3, 0, 1, 6, 7, 4, 5}));                                          \
    v = op(v, SHUF(v, (vi)SWAP));
#else
#define HTREE(op, v)                                                                           \
    v = op(v, SHUF(v, (vi){2, 3, 0, 1}));                                                      \
    v = op(v, SHUF(v, (vi)SWAP));
#endif
static inline vf KN(vadd)(vf a, vf b) { return a + b; }
static inline float hsum_tree(vf v) {
    HTREE(KN(vadd), v)
    return v[0];
}
static inline float hmax(vf v) {
    HTREE(vmax, v)
    return v[0];
}
#undef HTREE

/* exp(x) for x <= 0 (softmax arguments); 0 below lo (and for -inf), NaN stays NaN. */
static inline vf vexp(vf x, float lo) {
    vi under = x < lo;
    x = vmax(vbc(lo), x);
    vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
    vf r = fmadd(n, vbc(-0.693359375f), x);                          /* exact: few bits */
    r = fmadd(n, vbc(2.12194440e-4f), r);
    vf p = fmadd(vbc(1.9875691500e-4f), r, vbc(1.3981999507e-3f));
    p = fmadd(p, r, vbc(8.3334519073e-3f));
    p = fmadd(p, r, vbc(4.1665795894e-2f));
    p = fmadd(p, r, vbc(1.6666665459e-1f));
    p = fmadd(p, r, vbc(5.0000001201e-1f));
    p = fmadd(p, r * r, r) + 1.0f;
    vi e = __builtin_convertvector(n, vi), e1 = e >> 1, e2 = e - e1; /* 2^n = 2^e1 2^e2 */
    vf y = p * (vf)((e1 + 127) << 23) * (vf)((e2 + 127) << 23);
    return (vf)((vi)y & ~under);
}

