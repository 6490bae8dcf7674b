/* Sinusoidal absolute encoding (Vaswani et al. 2017): x' = x + P[pos + shift].
 * Three layouts of the same idea, all computed in double so that position 10^6 matches a
 * float64 reference:
 *   interleaved  P[p,2t] = sin(p w_t), P[p,2t+1] = cos(p w_t), w_t = base^(-2t/C)   (paper)
 *   concat       [sin(p w_t) | cos(p w_t)], same w_t                  (Transformer-XL, Marian)
 *   t2t          [sin | cos], w_t = exp(-t ln(base) / (C/2 - 1))      (tensor2tensor, fairseq)
 * No tensors, so no backward beyond the identity the core applies. */
#include "../internal.h"

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    int64_t C = H * D;
    if (C % 2) return pe_error(err, PE_EKEY, "method sinusoidal needs an even width, C=%lld", (long long)C);
    if (cfg->sin_layout == PE_SIN_T2T && C < 4)
        return pe_error(err, PE_EKEY, "sin_layout t2t needs a width of at least 4, C=%lld", (long long)C);
    if (!(cfg->sin_base > 0)) return pe_error(err, PE_EKEY, "key 'sin_base' must be > 0");
    return PE_OK;
}

/* Writes P[p] (C) in double. */
void pe__sinusoidal_pairs(double *sc, double p, int64_t C, int layout, double base, int64_t t0, int64_t n) {
    const int64_t half = C / 2;
    for (int64_t t = t0; t < t0 + n; t++) {
        double w = layout == PE_SIN_T2T ? exp(-(double)t * log(base) / (double)(half - 1))
                                        : pow(base, -2.0 * (double)t / (double)C);
        sc[2 * (t - t0)] = sin(p * w), sc[2 * (t - t0) + 1] = cos(p * w);
    }
}

void pe__sinusoidal_row(double *row, double p, int64_t C, int layout, double base) {
    const int64_t half = C / 2;
    for (int64_t t = 0; t < half; t++) {
        double sc[2];
        pe__sinusoidal_pairs(sc, p, C, layout, base, t, 1);
        if (layout == PE_SIN_INTERLEAVED) row[2 * t] = sc[0], row[2 * t + 1] = sc[1];
        else row[t] = sc[0], row[half + t] = sc[1];
    }
}

static void embed_forward(pe__ctx *ctx, float *x) {
    enum { CH = 256 }; /* the row in chunks of pairs: no allocation */
    const int64_t C = ctx->C, half = C / 2;
    double row[2 * CH];
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++) {
        const double p = (double)(ctx->pos[bt] + ctx->cfg->shift);
        float *xr = x + bt * C;
        for (int64_t t0 = 0; t0 < half; t0 += CH) {
            const int64_t n = half - t0 < CH ? half - t0 : CH;
            pe__sinusoidal_pairs(row, p, C, ctx->cfg->sin_layout, ctx->cfg->sin_base, t0, n);
            for (int64_t t = 0; t < n; t++) {
                int64_t a = ctx->cfg->sin_layout == PE_SIN_INTERLEAVED ? 2 * (t0 + t) : t0 + t;
                int64_t b = ctx->cfg->sin_layout == PE_SIN_INTERLEAVED ? a + 1 : half + t0 + t;
                xr[a] = (float)((double)xr[a] + row[2 * t]), xr[b] = (float)((double)xr[b] + row[2 * t + 1]);
            }
        }
    }
}

const pe__method pe__method_sinusoidal = {
    .name = "sinusoidal",
    .reference = "Vaswani et al. 2017; tensor2tensor",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "sin_layout sin_base shift",
    .flags = PE__GQA | PE__INPUT | PE__FUSED,
    .check = check,
    .embed_forward = embed_forward,
};
