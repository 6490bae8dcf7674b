/* The trainer's dense kernels (kernels.h). */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#ifdef PE_BLAS
#include <cblas.h>
#endif

/* Elementwise loops: `omp simd` where OpenMP is on, and one clone per vector width picked at
 * load time on x86-64 (the build targets the baseline ISA). */
#ifdef _OPENMP
#define TR_SIMD _Pragma("omp simd")
#else
#define TR_SIMD
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TR_CLONES
#endif
/* clang under the sanitizers (make fuzz) may leave an `omp simd` loop scalar: not an error */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

void tr_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
             int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
#ifdef PE_BLAS
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
#else
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t l = 0; l < k; l++)
                acc += (trans_a ? a[l * lda + i] : a[i * lda + l]) * (trans_b ? b[j * ldb + l] : b[l * ldb + j]);
            c[i * ldc + j] = alpha * acc + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
        }
#endif
}

void tr_linear_forward(float *y, const float *x, const float *w, const float *b, int64_t N,
                       int64_t In, int64_t Out) {
    if (b)
        for (int64_t r = 0; r < N; r++) memcpy(y + r * Out, b, sizeof(float) * (size_t)Out);
    tr_gemm(0, 1, N, Out, In, 1.0f, x, In, w, In, b ? 1.0f : 0.0f, y, Out);
}

void tr_linear_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int64_t N, int64_t In, int64_t Out) {
    if (dx) tr_gemm(0, 0, N, In, Out, 1.0f, dy, Out, w, In, accumulate ? 1.0f : 0.0f, dx, In);
    if (dw) tr_gemm(1, 0, Out, In, N, 1.0f, dy, Out, x, In, 1.0f, dw, In);
    if (db)
        for (int64_t r = 0; r < N; r++)
            for (int64_t o = 0; o < Out; o++) db[o] += dy[r * Out + o];
}

/* One linear's GEMMs, forward and backward, as tr_linear_forward/backward call them */
static void step_linear(float *y, float *dx, float *dw, const float *x, const float *w, int64_t N, int64_t In,
                        int64_t Out) {
    tr_gemm(0, 1, N, Out, In, 1.0f, x, In, w, In, 0.0f, y, Out);
    tr_gemm(0, 0, N, In, Out, 1.0f, y, Out, w, In, 0.0f, dx, In);
    tr_gemm(1, 0, Out, In, N, 1.0f, y, Out, x, In, 1.0f, dw, In);
}

double tr_step_gemm_seconds(int64_t N, int64_t layers, int64_t C, int64_t F, int64_t V, int reps) {
    const int64_t W = C > F ? (C > V ? C : V) : (F > V ? F : V);
    float *x = malloc(sizeof(float) * (size_t)(N * W)), *y = malloc(sizeof(float) * (size_t)(N * W));
    float *dx = malloc(sizeof(float) * (size_t)(N * W)), *w = malloc(sizeof(float) * (size_t)(W * W));
    float *dw = calloc((size_t)(W * W), sizeof(float));
    double best = NAN;
    if (x && y && dx && w && dw) {
        for (int64_t i = 0; i < N * W; i++) x[i] = 0.5f - (float)(i % 7) / 8;
        for (int64_t i = 0; i < W * W; i++) w[i] = (float)(i % 5) / 32 - 0.0625f;
        for (int r = 0; r < reps; r++) {
            const double t0 = tr_now();
            for (int64_t l = 0; l < layers; l++) {
                for (int p = 0; p < 4; p++) step_linear(y, dx, dw, x, w, N, C, C); /* q, k, v, o */
                step_linear(y, dx, dw, x, w, N, C, F), step_linear(y, dx, dw, x, w, N, F, C);
            }
            step_linear(y, dx, dw, x, w, N, C, V);
            const double t = tr_now() - t0;
            best = r == 0 || t < best ? t : best;
        }
    }
    free(x), free(y), free(dx), free(w), free(dw);
    return best;
}

double tr_step_attention_gemm_seconds(int64_t B, int64_t T, int64_t H, int64_t D, int64_t layers, int reps) {
    const int64_t n = B * H, hd = T * D, tt = T * T;
    float *q = malloc(sizeof(float) * (size_t)(3 * n * hd)), *p = malloc(sizeof(float) * (size_t)(2 * n * tt));
    double best = NAN;
    if (q && p) {
        float *k = q + n * hd, *o = k + n * hd, *s = p + n * tt;
        for (int64_t i = 0; i < 3 * n * hd; i++) q[i] = 0.5f - (float)(i % 7) / 8;
        for (int64_t i = 0; i < 2 * n * tt; i++) p[i] = (float)(i % 5) / 32;
        for (int r = 0; r < reps; r++) {
            const double t0 = tr_now();
            for (int64_t l = 0; l < layers; l++)
                for (int64_t h = 0; h < n; h++) {
                    float *qh = q + h * hd, *kh = k + h * hd, *oh = o + h * hd, *ph = p + h * tt, *sh = s + h * tt;
                    tr_gemm(0, 1, T, T, D, 1.0f, qh, D, kh, D, 0.0f, sh, T); /* s = q k^T */
                    tr_gemm(0, 0, T, D, T, 1.0f, ph, T, kh, D, 0.0f, oh, D); /* o = p v */
                    tr_gemm(1, 0, T, D, T, 1.0f, ph, T, qh, D, 0.0f, oh, D); /* dv = p^T do */
                    tr_gemm(0, 1, T, T, D, 1.0f, qh, D, kh, D, 0.0f, sh, T); /* dp = do v^T */
                    tr_gemm(0, 0, T, D, T, 1.0f, sh, T, kh, D, 0.0f, oh, D); /* dq = ds k */
                    tr_gemm(1, 0, T, D, T, 1.0f, sh, T, qh, D, 0.0f, oh, D); /* dk = ds^T q */
                }
            const double t = tr_now() - t0;
            best = r == 0 || t < best ? t : best;
        }
    }
    free(q), free(p);
    return best;
}

/* LayerNorm's row statistics go 8 rows at a time: each row's sums keep their order (the same
 * bits as one row at a time), but 8 independent chains of adds overlap where one row alone is a
 * chain of C dependent adds (LayerNorm was 10% of a training step). */
enum { LN_ROWS = 8 };

/* A full block's 8 rows go in the lanes of one vector, whose sums stay in a register (an
 * array of 8 went through the stack, a store-to-load chain on every add); each lane still adds
 * its row's columns in order, so the bits are those of one row at a time. */
typedef float ln_v8 __attribute__((vector_size(8 * sizeof(float))));
#define LN_COLUMN(x, C, c)                                                                                \
    ((ln_v8){(x)[c], (x)[(C) + (c)], (x)[2 * (C) + (c)], (x)[3 * (C) + (c)], (x)[4 * (C) + (c)],           \
             (x)[5 * (C) + (c)], (x)[6 * (C) + (c)], (x)[7 * (C) + (c)]})

static inline __attribute__((always_inline)) void ln_stats8(const float *x, int64_t C, float *mean, float *rstd) {
    ln_v8 m = {0}, v = {0};
    for (int64_t c = 0; c < C; c++) m += LN_COLUMN(x, C, c);
    m /= (float)C;
    for (int64_t c = 0; c < C; c++) {
        const ln_v8 d = LN_COLUMN(x, C, c) - m;
        v += d * d;
    }
    for (int k = 0; k < LN_ROWS; k++) mean[k] = m[k], rstd[k] = 1.0f / sqrtf(v[k] / (float)C + 1e-5f);
}

/* mean and rstd of rows [0, n) of x (n <= LN_ROWS) */
static inline void ln_stats(const float *x, int64_t C, int64_t n, float *mean, float *rstd) {
    float m[LN_ROWS] = {0}, v[LN_ROWS] = {0};
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < n; k++) m[k] += x[k * C + c];
    for (int64_t k = 0; k < n; k++) m[k] /= (float)C;
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < n; k++) v[k] += (x[k * C + c] - m[k]) * (x[k * C + c] - m[k]);
    for (int64_t k = 0; k < n; k++) mean[k] = m[k], rstd[k] = 1.0f / sqrtf(v[k] / (float)C + 1e-5f);
}

TR_CLONES void tr_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int64_t N, int64_t C) {
    for (int64_t r0 = 0; r0 < N; r0 += LN_ROWS) {
        const int64_t n = N - r0 < LN_ROWS ? N - r0 : LN_ROWS;
        if (n == LN_ROWS) ln_stats8(x + r0 * C, C, mean + r0, rstd + r0);
        else ln_stats(x + r0 * C, C, n, mean + r0, rstd + r0);
        for (int64_t r = r0; r < r0 + n; r++) {
            const float *xr = x + r * C, m = mean[r], s = rstd[r];
            TR_SIMD
            for (int64_t c = 0; c < C; c++) y[r * C + c] = (xr[c] - m) * s * w[c] + b[c];
        }
    }
}

/* ln_grad_sums of a full block, its rows in the lanes (ln_stats8) */
static inline __attribute__((always_inline)) void ln_grad_sums8(const float *dy, const float *x, const float *mean, const float *rstd,
                                 const float *w, int64_t C, float *a, float *bsum) {
    ln_v8 sa = {0}, sb = {0}, m = {0}, s = {0};
    for (int k = 0; k < LN_ROWS; k++) m[k] = mean[k], s[k] = rstd[k];
    for (int64_t c = 0; c < C; c++) {
        const ln_v8 nv = (LN_COLUMN(x, C, c) - m) * s, dn = LN_COLUMN(dy, C, c) * w[c];
        sa += dn, sb += dn * nv;
    }
    for (int k = 0; k < LN_ROWS; k++) a[k] = sa[k] / (float)C, bsum[k] = sb[k] / (float)C;
}

/* a = sum dn, bsum = sum dn n of rows [0, n) (n <= LN_ROWS), each divided by C */
static inline void ln_grad_sums(const float *dy, const float *x, const float *mean, const float *rstd,
                                const float *w, int64_t C, int64_t n, float *a, float *bsum) {
    float sa[LN_ROWS] = {0}, sb[LN_ROWS] = {0};
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < n; k++) {
            float nv = (x[k * C + c] - mean[k]) * rstd[k], dn = dy[k * C + c] * w[c];
            sa[k] += dn, sb[k] += dn * nv;
        }
    for (int64_t k = 0; k < n; k++) a[k] = sa[k] / (float)C, bsum[k] = sb[k] / (float)C;
}

/* forward was y = n w + b with n = (x - mean) rstd, so now: dw += dy n, db += dy,
 * dx += rstd (dn - mean(dn) - n mean(dn n)) with dn = dy w. */
TR_CLONES void tr_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *mean, const float *rstd, const float *w, int64_t N, int64_t C) {
    for (int64_t r0 = 0; r0 < N; r0 += LN_ROWS) {
        const int64_t n = N - r0 < LN_ROWS ? N - r0 : LN_ROWS;
        float a[LN_ROWS], bsum[LN_ROWS];
        if (n == LN_ROWS) ln_grad_sums8(dy + r0 * C, x + r0 * C, mean + r0, rstd + r0, w, C, a, bsum);
        else ln_grad_sums(dy + r0 * C, x + r0 * C, mean + r0, rstd + r0, w, C, n, a, bsum);
        for (int64_t r = r0; r < r0 + n; r++) {
            const float *dyr = dy + r * C, *xr = x + r * C, m = mean[r], s = rstd[r], ar = a[r - r0], br = bsum[r - r0];
            TR_SIMD /* dx, dw, db and the inputs never overlap */
            for (int64_t c = 0; c < C; c++) {
                float nv = (xr[c] - m) * s, dn = dyr[c] * w[c];
                db[c] += dyr[c];
                dw[c] += nv * dyr[c];
                dx[r * C + c] += s * (dn - ar - nv * br);
            }
        }
    }
}

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */

/* tanh as a rational function (odd degree 13 over even degree 6, the minimax fit Eigen
 * uses), within a few float ulps on the clamped range and branch-free, so loops over it
 * vectorise; libm's tanhf was 40% of a training step. The clamp to [-c, c] is an integer
 * min of |x|'s bits (non-negative floats order as their bits), the sign put back: gcc keeps
 * a float compare as a branch below AVX-512 (it may trap), which left both GELU loops
 * scalar, 18% of a step on an AVX2 machine. Same bits for every finite x and for +-inf. */
static inline float fast_tanh(float x) {
    const float cf = 7.90531110763549805f; /* where the fit reaches 1 */
    uint32_t u, c;
    memcpy(&c, &cf, sizeof c), memcpy(&u, &x, sizeof u);
    const uint32_t a = u & 0x7fffffffu;
    u = (u & 0x80000000u) | (a < c ? a : c);
    memcpy(&x, &u, sizeof x);
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

TR_CLONES void tr_gelu_forward(float *y, float *t, const float *x, int64_t n) {
    if (t) {
        TR_SIMD
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            t[i] = fast_tanh(GELU_S * (v + 0.044715f * v * v * v));
            y[i] = 0.5f * v * (1.0f + t[i]);
        }
        return;
    }
    TR_SIMD
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + fast_tanh(GELU_S * (v + 0.044715f * v * v * v)));
    }
}

/* forward was y = 0.5 x (1 + tanh u), u = s (x + 0.044715 x^3), so now:
 * dx = dy (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 * 0.044715 x^2)) */
TR_CLONES void tr_gelu_backward(float *d, const float *x, const float *t, int64_t n) {
    TR_SIMD
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], dudx = GELU_S * (1.0f + 3.0f * 0.044715f * v * v);
        d[i] *= 0.5f * (1.0f + t[i]) + 0.5f * v * (1.0f - t[i] * t[i]) * dudx;
    }
}

void tr_softmax_row(float *z, int64_t n) {
    float mx = z[0];
    for (int64_t i = 1; i < n; i++) mx = z[i] > mx ? z[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (z[i] = expf(z[i] - mx));
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) z[i] *= inv;
}

/* The mask of an element is a hash of (key, site, token, channel): splitmix64's finaliser
 * of (key, site, token) once a row, then MurmurHash3's 32-bit finaliser (fmix32, smhasher) of
 * that and the channel, which vectorises (32-bit multiplies) where a 64-bit hash per element
 * stayed scalar below AVX-512. */
TR_CLONES void tr_dropout(float *y, const float *x, int64_t n, int64_t C, float p, uint64_t key, int64_t site,
                          int64_t t0) {
    const uint32_t cut = (uint32_t)((double)p * 4294967296.0); /* dropped: a hash below */
    const float keep = 1.0f / (1.0f - p);
    for (int64_t r = 0; r < n; r++) {
        uint64_t z = key ^ ((uint64_t)site * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(t0 + r) * 0xd6e8feb86659fd93ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const uint32_t row = (uint32_t)(z >> 32) ^ (uint32_t)z;
        float *yr = y + r * C;
        const float *xr = x + r * C;
        TR_SIMD
        for (int64_t c = 0; c < C; c++) {
            uint32_t h = row + (uint32_t)c * 0x9e3779b9u;
            h ^= h >> 16, h *= 0x85ebca6bu, h ^= h >> 13, h *= 0xc2b2ae35u, h ^= h >> 16;
            yr[c] = xr[c] * (h < cut ? 0.0f : keep);
        }
    }
}
