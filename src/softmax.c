/* Masked row softmax. Masked entries are -inf in s and exactly 0 in p; a row with every
 * entry masked gives all zeros (the core rejects such rows before they get here); a row with
 * a NaN gives NaN, never a silent 0 (the core then reports a non-finite output). */
#include "internal.h"

void pe__softmax_forward(const float *s, float *p, int64_t n, int64_t m) {
    for (int64_t i = 0; i < n; i++) {
        const float *si = s + i * m;
        float *pi = p + i * m;
        float mx = -INFINITY;
        int nan = 0;
        for (int64_t j = 0; j < m; j++) mx = si[j] > mx ? si[j] : mx, nan |= si[j] != si[j];
        if (nan) {
            for (int64_t j = 0; j < m; j++) pi[j] = NAN;
            continue;
        }
        if (mx == -INFINITY) {
            memset(pi, 0, sizeof(float) * m);
            continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < m; j++) {
            pi[j] = si[j] == -INFINITY ? 0.0f : expf(si[j] - mx);
            sum += pi[j];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < m; j++) pi[j] *= inv;
    }
}

/* forward was p = softmax(s), so now: ds = p * (dp - sum_j p_j dp_j) */
void pe__softmax_backward(const float *p, const float *dp, float *ds, int64_t n, int64_t m) {
    for (int64_t i = 0; i < n; i++) {
        const float *pi = p + i * m, *dpi = dp + i * m;
        float *dsi = ds + i * m;
        double dot = 0;
        for (int64_t j = 0; j < m; j++) dot += (double)pi[j] * dpi[j];
        for (int64_t j = 0; j < m; j++) dsi[j] = pi[j] * (dpi[j] - (float)dot);
    }
}
