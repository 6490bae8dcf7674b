/* FLOATER's ODE solver: the dynamics h(t, y) = W2 [relu(W1 [y; t] + b1); t] + b2 over the three
 * rows (q, k, v) of the state, a classical RK4 step, and their vector-Jacobian products, all in
 * double; the 3-row matrix products by a kernel for the CPU (AVX2+FMA or portable vectors). */
#include "floater.h"

#ifdef PE_BLAS
#include <cblas.h>
#endif
/* an AVX2+FMA kernel, as exec/kernels.c builds its own (x86-64, GCC) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FLOATER_AVX2 1
#include <immintrin.h>
#endif

_Atomic int64_t pe__floater_steps_taken;

/* ---- the solver ------------------------------------------------------------------------ */

/* c (m, n) += a^T b for a (k, m), b (k, n) in double, c with row stride ldc: the weight
 * gradients, as one product over many pending rows. */
static void dgemm_tn(int64_t m, int64_t n, int64_t k, const double *a, const double *b, double *c,
                     int64_t ldc) {
#ifdef PE_BLAS
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)m, b,
                (int)n, 1.0, c, (int)ldc);
#else
    for (int64_t l = 0; l < k; l++)
        for (int64_t i = 0; i < m; i++) {
            double ai = a[l * m + i];
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] += ai * b[l * n + j];
        }
#endif
}

/* The dynamics' products take the three rows at once (mm3_fn): m is read once, 4 vectors of
 * columns at a time into 3 x 4 vector accumulators (12 independent chains keep the FMA units
 * busy). The columns are independent, so this vectorises without reassociating a sum: every
 * output adds its k terms in order to init (fused on FMA machines), and the column tail sums
 * in the same order. For 3 x 64 x 64, a BLAS gemv per row spends more on the call than on the
 * arithmetic. Written once for a vector V of W doubles, then instantiated for AVX2+FMA
 * (picked at run time) and for 16-byte vectors (any target): SET1 broadcasts a double,
 * MADD(a, b, c) = a b + c on vectors and MADD1 on doubles. */
#define MM3_KERNEL(name, V, W, SET1, MADD, MADD1)                                                 \
    static void name(const double *m, int64_t ldm, int64_t k, int64_t n, const double *x,         \
                     const double *init, double *out) {                                           \
        enum { NV = 4 }; /* vectors of columns per row */                                         \
        int64_t c = 0;                                                                            \
        for (; c + NV * W <= n; c += NV * W) {                                                    \
            V s[3][NV], mv[NV];                                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < 3; r++)                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                \
                V t = {0};                                                                        \
                if (init) memcpy(&t, init + c + v * W, sizeof t);                                 \
                s[r][v] = t;                                                                      \
            }                                                                                     \
            for (int64_t l = 0; l < k; l++) {                                                     \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                            \
                    V t;                                                                          \
                    memcpy(&t, m + l * ldm + c + v * W, sizeof t);                                \
                    mv[v] = t;                                                                    \
                }                                                                                 \
                _Pragma("GCC unroll 4") for (int r = 0; r < 3; r++) {                             \
                    V xb = SET1(x[r * k + l]);                                                    \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                          \
                        s[r][v] = MADD(xb, mv[v], s[r][v]);                                       \
                }                                                                                 \
            }                                                                                     \
            _Pragma("GCC unroll 4") for (int r = 0; r < 3; r++)                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                \
                V t = s[r][v];                                                                    \
                memcpy(out + r * n + c + v * W, &t, sizeof t);                                    \
            }                                                                                     \
        }                                                                                         \
        for (; c < n; c++)                                                                        \
            for (int r = 0; r < 3; r++) {                                                         \
                double a = init ? init[c] : 0.0;                                                  \
                for (int64_t l = 0; l < k; l++) a = MADD1(x[r * k + l], m[l * ldm + c], a);       \
                out[r * n + c] = a;                                                               \
            }                                                                                     \
    }

typedef double v2d __attribute__((vector_size(16)));
#define SET2(a) ((v2d){a, a})
#define MUL_ADD(a, b, c) ((c) + (a) * (b))
MM3_KERNEL(mm3_generic, v2d, 2, SET2, MUL_ADD, MUL_ADD)

#ifdef FLOATER_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma")
typedef double v4d __attribute__((vector_size(32)));
#define SET4(a) ((v4d)_mm256_set1_pd(a))
#define FMA4(a, b, c) ((v4d)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
MM3_KERNEL(mm3_avx2, v4d, 4, SET4, FMA4, __builtin_fma)
#pragma GCC pop_options
#endif

/* AVX2+FMA where the fused path's kernels (exec/kernels.c, same build condition) found AVX2 or
 * AVX-512 on this CPU; the layer's run options with isa "generic" select the portable one. */
mm3_fn *pe__floater_mm3_pick(const pe_run_options *run) {
#ifdef FLOATER_AVX2
    if (strcmp(pe__kernels_pick(run && run->isa[0] ? run->isa : NULL)->name, "generic")) return mm3_avx2;
#else
    (void)run;
#endif
    return mm3_generic;
}

/* out (3, C) = h(t, y) row by row; z (3, C) keeps the pre-activation W1 [y; t] + b1; a (3, C)
 * and tb (C): scratch. */
static void dynamics(const floater_state *st, double t, const double *y, double *z, double *a,
                     double *tb, double *out) {
    const int64_t C = st->C;
    for (int64_t i = 0; i < C; i++) tb[i] = st->w1c[i] * t + st->b1[i]; /* the same for the 3 rows */
    st->mm3(st->w1t, C, C, C, y, tb, z);
    for (int64_t e = 0; e < 3 * C; e++) a[e] = z[e] > 0 ? z[e] : 0.0;
    for (int64_t i = 0; i < C; i++) tb[i] = st->w2c[i] * t + st->b2[i];
    st->mm3(st->w2t, C, C, C, a, tb, out);
}

/* One RK4 step of length h from (t0, y) into out (may alias y). Keeps its stages in stg
 * (STAGES blocks: inputs y1..y4, pre-activations z1..z4) for rk4_vjp; work: 6 blocks. */
void pe__floater_rk4(const floater_state *st, double t0, double h, const double *y, double *out,
                double *stg, double *work) {
    const int64_t n = 3 * st->C;
    double *ys = stg, *zs = stg + 4 * n, *a = work, *k = work + n, *tb = work + 5 * n; /* k: 4 blocks */
    memcpy(ys, y, sizeof(double) * n);
    const double c[4] = {0, h / 2, h / 2, h}; /* stage i reads y + c[i] k_{i-1} at t0 + c[i] */
    for (int s = 0; s < 4; s++) {
        if (s)
            for (int64_t e = 0; e < n; e++) ys[s * n + e] = y[e] + c[s] * k[(s - 1) * n + e];
        dynamics(st, t0 + c[s], ys + s * n, zs + s * n, a, tb, k + s * n);
    }
    for (int64_t e = 0; e < n; e++)
        out[e] = y[e] + h / 6 * (k[e] + 2 * k[n + e] + 2 * k[2 * n + e] + k[3 * n + e]);
    atomic_fetch_add_explicit(&pe__floater_steps_taken, 1, memory_order_relaxed);
}


void pe__floater_grads_flush(const floater_state *st, grads *gr) {
    const int64_t C = st->C;
    if (!gr->rows) return;
    dgemm_tn(C, C + 2, gr->rows, gr->g, gr->a, gr->w2, C + 2);
    dgemm_tn(C, C + 2, gr->rows, gr->dz, gr->b, gr->w1, C + 2);
    gr->rows = 0;
}

/* forward was out = W2 [relu(z); t] + b2, z = W1 [b; t] + b1 (rows of b independent), so now,
 * with g = dout: dW2 += g^T [a; t], db2 += sum g, dz = (g W2) * (z > 0), dW1 += dz^T [b; t],
 * db1 += sum dz, db = dz W1 (written, not accumulated). */
static void dynamics_vjp(const floater_state *st, grads *gr, double t, const double *b,
                         const double *z, const double *g, double *db) {
    const int64_t C = st->C, n = 3 * C;
    if (gr->rows + 3 > GRAD_ROWS) pe__floater_grads_flush(st, gr);
    double *dz = gr->dz + gr->rows * C;
    memcpy(gr->g + gr->rows * C, g, sizeof(double) * n);
    for (int64_t r = 0; r < 3; r++) {
        double *pa = gr->a + (gr->rows + r) * (C + 2), *pb = gr->b + (gr->rows + r) * (C + 2);
        const double *zr = z + r * C;
        for (int64_t i = 0; i < C; i++) pa[i] = zr[i] > 0 ? zr[i] : 0.0;
        memcpy(pb, b + r * C, sizeof(double) * C);
        pa[C] = pb[C] = t, pa[C + 1] = pb[C + 1] = 1.0;
    }
    st->mm3(st->w2, C + 1, C, C, g, NULL, dz);
    for (int64_t e = 0; e < n; e++) dz[e] = z[e] > 0 ? dz[e] : 0.0;
    gr->rows += 3;
    st->mm3(st->w1, C + 1, C, C, dz, NULL, db);
}

/* forward was out = y + h/6 (k1 + 2 k2 + 2 k3 + k4), k_s = h(t0 + c_s, y + c_s k_{s-1}), so
 * now, with lam = dout: dy += lam, dk_s = w_s lam (w = h/6, h/3, h/3, h/6); from the last stage
 * down, the stage input's gradient d = VJP of h at dk_s goes to dy and, times c_s, to
 * dk_{s-1}. stg: the step's stages (rk4). dy is accumulated (+=); lam may alias nothing;
 * work: 2 blocks. */
void pe__floater_rk4_vjp(const floater_state *st, grads *gr, double t0, double h, const double *stg,
                    const double *lam, double *dy, double *work) {
    const int64_t n = 3 * st->C;
    const double *ys = stg, *zs = stg + 4 * n;
    double *dk = work, *d = work + n;
    const double c[4] = {0, h / 2, h / 2, h}, wgt[4] = {h / 6, h / 3, h / 3, h / 6};
    for (int64_t e = 0; e < n; e++) dy[e] += lam[e], dk[e] = wgt[3] * lam[e];
    for (int s = 3; s >= 0; s--) {
        dynamics_vjp(st, gr, t0 + c[s], ys + s * n, zs + s * n, dk, d);
        if (s)
            for (int64_t e = 0; e < n; e++) dy[e] += d[e], dk[e] = wgt[s - 1] * lam[e] + c[s] * d[e];
        else
            for (int64_t e = 0; e < n; e++) dy[e] += d[e];
    }
}

