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
    if (C % 2) return pe__fail(err, PE_EKEY, "method sinusoidal needs an even width, C=%lld", (long long)C);
    if (cfg->sin_layout == PE_SIN_T2T && C < 4)
        return pe__fail(err, PE_EKEY, "sin_layout t2t needs a width of at least 4, C=%lld", (long long)C);
    if (!(cfg->sin_base > 0)) return pe__fail(err, PE_EKEY, "key 'sin_base' must be > 0");
    return PE_OK;
}

/* Writes P[p] (C) in double. */
void pe__sinusoidal_row(double *row, double p, int64_t C, int layout, double base) {
    int64_t half = C / 2;
    for (int64_t t = 0; t < half; t++) {
        double w = layout == PE_SIN_T2T ? exp(-(double)t * log(base) / (double)(half - 1))
                                        : pow(base, -2.0 * (double)t / (double)C);
        double sn = sin(p * w), cs = cos(p * w);
        if (layout == PE_SIN_INTERLEAVED) row[2 * t] = sn, row[2 * t + 1] = cs;
        else row[t] = sn, row[half + t] = cs;
    }
}

static void embed_forward(pe__ctx *ctx, float *x) {
    double *row = malloc(sizeof(double) * ctx->C);
    PE_ASSERT(row);
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++) {
        pe__sinusoidal_row(row, (double)(ctx->pos[bt] + ctx->cfg->shift), ctx->C,
                           ctx->cfg->sin_layout, ctx->cfg->sin_base);
        for (int64_t c = 0; c < ctx->C; c++) x[bt * ctx->C + c] = (float)((double)x[bt * ctx->C + c] + row[c]);
    }
    free(row);
}

const pe__method pe__method_sinusoidal = {
    .name = "sinusoidal",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "sin_layout sin_base shift",
    .flags = PE__GQA | PE__INPUT,
    .check = check,
    .embed_forward = embed_forward,
};
