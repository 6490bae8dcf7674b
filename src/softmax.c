/* Masked row softmax. Masked entries are -inf in s and exactly 0 in p; a row with every
 * entry masked gives all zeros (the core rejects such rows before they get here); a row with
 * a NaN gives NaN, never a silent 0 (the core then reports a non-finite output). A sink
 * (attention_sinks, HF GPT-OSS eager_attention_forward) is one more logit in every row's sum,
 * its column dropped: the row's weights sum to 1 - p_sink. The backward is the same formula:
 * the sink's dp is 0 (it has no value). */
#include "internal.h"

void pe__softmax_forward(const float *s, float *p, int64_t n, int64_t m, float sink) {
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
        mx = sink > mx ? sink : mx; /* the sink is one more entry of the row, without a value */
        double sum = sink == -INFINITY ? 0.0 : expf(sink - mx);
        for (int64_t j = 0; j < m; j++) {
            pi[j] = si[j] == -INFINITY ? 0.0f : expf(si[j] - mx);
            sum += pi[j];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < m; j++) pi[j] *= inv;
    }
}

void pe__softmax_sink_weights(const float *s, int64_t n, int64_t m, float sink, float *ps) {
    for (int64_t i = 0; i < n; i++) {
        const float *si = s + i * m;
        float mx = sink;
        int any = 0;
        for (int64_t j = 0; j < m; j++) mx = si[j] > mx ? si[j] : mx, any |= si[j] != -INFINITY;
        double sum = expf(sink - mx);
        for (int64_t j = 0; j < m; j++) sum += si[j] == -INFINITY ? 0.0f : expf(si[j] - mx);
        ps[i] = any ? (float)(expf(sink - mx) / sum) : 0.0f;
    }
}

/* forward was p = softmax(s), so now: ds = p * (dp - sum_j p_j dp_j), the sum in double over
 * 4 lanes combined in a fixed order (so it vectorises, and every build gives the same bits: a
 * scalar double chain was 3% of a small model's training step) */
PE_TILE_SIMD void pe__softmax_backward(const float *p, const float *dp, float *ds, int64_t n, int64_t m) {
    for (int64_t i = 0; i < n; i++) {
        const float *pi = p + i * m, *dpi = dp + i * m;
        float *dsi = ds + i * m;
        double lane[4] = {0, 0, 0, 0};
        int64_t j = 0;
        for (; j + 4 <= m; j += 4)
            for (int l = 0; l < 4; l++) lane[l] += (double)pi[j + l] * (double)dpi[j + l];
        for (; j < m; j++) lane[j & 3] += (double)pi[j] * (double)dpi[j];
        const float dot = (float)((lane[0] + lane[1]) + (lane[2] + lane[3]));
        for (j = 0; j < m; j++) dsi[j] = pi[j] * (dpi[j] - dot);
    }
}
