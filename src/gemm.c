/* Matrix products: OpenBLAS when built with it (PE_BLAS), a plain loop otherwise. */
#include "internal.h"

#ifdef PE_BLAS
#include <cblas.h>
#endif

void pe__gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc) {
    if (m == 0 || n == 0) return;
#ifdef PE_BLAS
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda,
                b, (int)ldb, beta, c, (int)ldc);
#else
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t l = 0; l < k; l++) {
                float av = trans_a ? a[l * lda + i] : a[i * lda + l];
                float bv = trans_b ? b[j * ldb + l] : b[l * ldb + j];
                acc += av * bv;
            }
            c[i * ldc + j] = alpha * acc + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
        }
#endif
}

void pe__dgemm(int trans_a, int accumulate, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
               const double *b, int64_t ldb, double *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
#ifdef PE_BLAS
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a,
                (int)lda, b, (int)ldb, accumulate ? 1.0 : 0.0, c, (int)ldc);
#else
    for (int64_t i = 0; i < m; i++) {
        double *ci = c + i * ldc;
        if (!accumulate)
            for (int64_t j = 0; j < n; j++) ci[j] = 0;
        for (int64_t l = 0; l < k; l++) {
            const double av = trans_a ? a[l * lda + i] : a[i * lda + l];
            for (int64_t j = 0; j < n; j++) ci[j] += av * b[l * ldb + j];
        }
    }
#endif
}

void pe__linear_forward(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                        int64_t out) {
    /* y starts as the bias rows and the product is added to it: one pass over y where a zeroed
     * y (BLAS's beta = 0 fills it) and a bias pass after it were two */
    if (b)
        for (int64_t r = 0; r < n; r++) memcpy(y + r * out, b, sizeof(float) * (size_t)out);
    pe__gemm(0, 1, n, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

/* forward was y = x W^T + b, so now: dx (+)= dy W, dW += dy^T x, db += sum_rows dy. */
void pe__linear_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                         const float *w, int64_t n, int64_t in, int64_t out) {
    if (dx) pe__gemm(0, 0, n, in, out, 1.0f, dy, out, w, in, accumulate ? 1.0f : 0.0f, dx, in);
    if (dw) pe__gemm(1, 0, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < out; c++) db[c] += dy[r * out + c];
}

/* The call's positions into a->pos: queries (B, T) from at->pos (NULL: q_default + t, or per
 * row k_len - q_len + t), keys (B, Tk) from at->key_pos (NULL: 0 .. Tk-1; keys_are_queries: the
 * queries' own); padding entries (past a row's lengths) take the row's first key position, so
 * that no hook reads them and max(positions) is over real tokens. The mask and lengths are
 * copied. Then the context every hook sees, and the method's prepare. */
