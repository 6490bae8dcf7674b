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
