/* The vector maths of one pass of kernels.c, for the methods' per-token stages (no tile
 * touches them): sin and cos in double for the exact-angle tables, softplus and sigmoid for
 * PoPE's magnitudes. libm's scalar sincos and log1p were a third of PoPE's core and a fifth of
 * RoPE-Mixed's. Included by kernels.c inside a pass, after simd.h; no include guard. */

#if PE_KPASS != 1
#define vd KN(vd_t)
#define vl KN(vl_t)
typedef double vd __attribute__((vector_size(VEC * 4))); /* VEC / 2 doubles */
typedef int64_t vl __attribute__((vector_size(VEC * 4)));
#if PE_KPASS == 512
static inline vd KN(fmadd_pd)(vd a, vd b, vd c) { return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c); }
#else
static inline vd KN(fmadd_pd)(vd a, vd b, vd c) { return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c); }
#endif

/* sin and cos of one vector of angles, |x| <= 2^30: x = k pi/2 + r by two FMAs with pi/2 split
 * in two doubles (the reduction's error is |k| 2^-107 plus the FMAs' roundings, under 2^-52
 * absolute), then the Taylor series of sin and cos on |r| <= pi/4 to r^17 and r^18 (the first
 * term left out is below 1e-19), and k mod 4 picks and signs them. */
static inline void KN(sincos_vec)(vd x, vd *s, vd *c) {
    const vd magic = {0}, one = magic + 1.0;
    const vd t = x * 0x1.45f306dc9c883p-1 + (magic + 0x1.8p52); /* k + 1.5 2^52: k = round(x 2/pi) */
    const vd k = t - 0x1.8p52;
    vd r = KN(fmadd_pd)(-k, magic + 0x1.921fb54442d18p+0, x); /* pi/2 = P1 + P2 */
    r = KN(fmadd_pd)(-k, magic + 0x1.1a62633145c07p-54, r);
    const vd z = r * r;
    static const double inv_fact[17] = {/* 1 / n! for n = 2 .. 18 */
        1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320, 1.0 / 362880, 1.0 / 3628800,
        1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0, 1.0 / 87178291200.0, 1.0 / 1307674368000.0,
        1.0 / 20922789888000.0, 1.0 / 355687428096000.0, 1.0 / 6402373705728000.0};
    /* sin r = r + r z ps(z), ps's z^i (-1)^(i+1) / (2i + 3)!; cos r = 1 - z pc(z), pc's z^i (-1)^i / (2i + 2)! */
    vd ps = magic + inv_fact[15], pc = magic + inv_fact[16];
    for (int i = 6; i >= 0; i--) ps = KN(fmadd_pd)(ps, z, magic + (i % 2 ? 1 : -1) * inv_fact[2 * i + 1]);
    for (int i = 7; i >= 0; i--) pc = KN(fmadd_pd)(pc, z, magic + (i % 2 ? -1 : 1) * inv_fact[2 * i]);
    const vd sr = KN(fmadd_pd)(ps * z, r, r);
    const vd cr = KN(fmadd_pd)(-pc, z, one);
    const vl q = (vl)t & 3, odd = -(q & 1), sign = (vl)magic + INT64_MIN; /* the quadrant; the sign bit */
    const vl si = ((vl)sr & ~odd) | ((vl)cr & odd), co = ((vl)cr & ~odd) | ((vl)sr & odd);
    *s = (vd)(si ^ (sign & -((q >> 1) & 1)));       /* sin < 0 in quadrants 2, 3 */
    *c = (vd)(co ^ (sign & -(((q + 1) >> 1) & 1))); /* cos < 0 in quadrants 1, 2 */
}

/* s[i], c[i] = sin, cos x[i] (either may be NULL), within 3e-16 of libm's for |x| <= 2^30;
 * libm's for a vector holding a larger angle, an infinity or a NaN */
static void KN(sincos)(const double *x, double *s, double *c, int64_t n) {
    enum { L = VEC / 2 };
    for (int64_t i = 0; i < n; i += L) {
        const int64_t m = n - i < L ? n - i : L;
        double in[L] = {0}, so[L], co[L];
        const double *xp = x + i;
        if (m < L) memcpy(in, xp, sizeof(double) * (size_t)m), xp = in; /* the tail, padded */
        vd xv, sv, cv;
        memcpy(&xv, xp, sizeof xv);
        const vl far = (vl)((vd)((vl)xv & INT64_MAX) > 0x1p30) | (xv != xv); /* beyond 2^30, or NaN */
        int any = 0;
        for (int e = 0; e < L; e++) any |= far[e] != 0;
        if (any)
            for (int e = 0; e < L; e++) sv[e] = sin(xv[e]), cv[e] = cos(xv[e]);
        else
            KN(sincos_vec)(xv, &sv, &cv);
        if (m == L) {
            if (s) memcpy(s + i, &sv, sizeof sv);
            if (c) memcpy(c + i, &cv, sizeof cv);
            continue;
        }
        memcpy(so, &sv, sizeof sv), memcpy(co, &cv, sizeof cv);
        if (s) memcpy(s + i, so, sizeof(double) * (size_t)m);
        if (c) memcpy(c + i, co, sizeof(double) * (size_t)m);
    }
}
#undef vd
#undef vl
#else
/* the generic pass has no fused multiply-add for the reduction: libm's */
static void KN(sincos)(const double *x, double *s, double *c, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (s) s[i] = sin(x[i]);
        if (c) c[i] = cos(x[i]);
    }
}
#endif

/* sp[i] = softplus(x[i]) = log(1 + e^x), PyTorch's (beta 1, threshold 20: x itself past 20), and
 * sig[i] = its derivative, the sigmoid; either may be NULL. Both from u = e^-|x| (this pass's
 * exp, underflowing gradually): softplus = max(x, 0) + log1p(u), log1p(u) = 2 atanh(u / (2 + u))
 * by its series to z^15 (z <= 1/3: the first term left out is below 2e-9 of the sum), sigmoid
 * = 1 / (1 + u) or u / (1 + u). A few ulp from the correctly rounded values; NaN stays NaN. */
static void KN(softplus)(const float *x, float *sp, float *sig, int64_t n) {
    const vf zero = vbc(0.0f), one = vbc(1.0f);
    const vi absmask = (vi)vbc(0.0f) + 0x7fffffff;
    for (int64_t i = 0; i < n; i += VEC) {
        const int64_t m = n - i < VEC ? n - i : VEC;
        float in[VEC] = {0}, out[VEC];
        const float *xp = x + i;
        if (m < VEC) memcpy(in, xp, sizeof(float) * (size_t)m), xp = in; /* the tail, padded */
        const vf xv = vld(xp), ax = (vf)((vi)xv & absmask), u = vexp(-ax, -104.0f);
        if (sp) {
            const vf z = u / (u + 2.0f), w = z * z;
            vf p = vbc(1.0f / 15);
            p = fmadd(p, w, vbc(1.0f / 13));
            p = fmadd(p, w, vbc(1.0f / 11));
            p = fmadd(p, w, vbc(1.0f / 9));
            p = fmadd(p, w, vbc(1.0f / 7));
            p = fmadd(p, w, vbc(1.0f / 5));
            p = fmadd(p, w, vbc(1.0f / 3));
            p = fmadd(p, w, one);
            const vf y = vmax(xv, zero) + 2.0f * z * p;
            const vi big = xv > 20.0f;
            const vf r = (vf)(((vi)xv & big) | ((vi)y & ~big));
            if (m == VEC) vst(sp + i, r);
            else vst(out, r), memcpy(sp + i, out, sizeof(float) * (size_t)m);
        }
        if (sig) {
            const vi neg = xv < 0.0f;
            const vf r = (vf)(((vi)u & neg) | ((vi)one & ~neg)) / (u + 1.0f);
            if (m == VEC) vst(sig + i, r);
            else vst(out, r), memcpy(sig + i, out, sizeof(float) * (size_t)m);
        }
    }
}
