/* KERPLE (Chi et al. 2022): a conditionally positive definite kernel of the distance
 * d = |i - j| as a bias, per head h:
 *   log    s = scale q.k - r1_h ln(1 + r2_h d)
 *   power  s = scale q.k - r1_h d^r2_h
 * Tensors kerple_r1 [H], kerple_r2 [H]. The reference clamps r1, r2 to >= 0.01 in place after
 * each optimiser step; that is a training-time projection, so the layer uses them as given.
 * Kernel values and their derivatives are computed in double per entry of the tile. */
#include "../internal.h"

enum { R1, R2 };

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg, (void)D;
    /* chijames/KERPLE: log r1 ~ U(0, 2), r2 ~ U(0, 1); power the other way round */
    const int power = cfg->kerple == PE_KERPLE_POWER;
    s[R1] = (pe_param_spec){"kerple_r1", 1, {H}, 0, {PE_INIT_UNIFORM, 0, power ? 1 : 2}};
    s[R2] = (pe_param_spec){"kerple_r2", 1, {H}, 0, {PE_INIT_UNIFORM, 0, power ? 2 : 1}};
    s[R1].clamped = s[R2].clamped = 1, s[R1].clamp_min = s[R2].clamp_min = 0.01; /* the reference's clamps */
    return 2;
}

/* f(d) = ln(1 + r2 d) or d^r2, the kernel without its -r1 factor; *df = df/dr2. At d = 0 the
 * power form is 0^r2 (0 for r2 > 0) and its derivative d^r2 ln d is taken as 0 there, as
 * PyTorch's pow does for a zero base with a non-negative exponent (never 0 * -inf). */
static inline double kernel(int power, double r2, double d, double *df) {
    if (!power) {
        *df = d / (1.0 + r2 * d);
        return log(1.0 + r2 * d);
    }
    double f = pow(d, r2);
    *df = d > 0 ? f * log(d) : 0.0;
    return f;
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    int power = ctx->cfg->kerple == PE_KERPLE_POWER;
    double r1 = ctx->w->param[R1][h], r2 = ctx->w->param[R2][h], df;
    int64_t o0;
    if (pe__tile_diagonals(ctx, b, i0, ni, j0, nj, &o0)) { /* one kernel value per diagonal */
        double bd[PE_DIAG_MAX];
        for (int64_t d = 0; d < ni + nj - 1; d++) bd[d] = r1 * kernel(power, r2, (double)llabs(o0 + d), &df);
        for (int64_t i = 0; i < ni; i++) {
            const double *row = bd + ni - 1 - i;
            for (int64_t j = 0; j < nj; j++) s[i * lds + j] = (float)((double)s[i * lds + j] - row[j]);
        }
        return;
    }
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++) {
            int64_t d = pos[i0 + i] - kpos[j0 + j];
            double f = kernel(power, r2, (double)(d < 0 ? -d : d), &df);
            s[i * lds + j] = (float)((double)s[i * lds + j] - r1 * f);
        }
}

/* forward was s -= r1_h f(d; r2_h), so now: dr1_h -= sum ds f, dr2_h -= sum ds r1_h df/dr2 */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    float *dr1 = ctx->g->dparam[R1], *dr2 = ctx->g->dparam[R2];
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    int power = ctx->cfg->kerple == PE_KERPLE_POWER;
    double r1 = ctx->w->param[R1][h], r2 = ctx->w->param[R2][h], df, a1 = 0, a2 = 0;
    int64_t o0;
    if (pe__tile_diagonals(ctx, b, i0, ni, j0, nj, &o0)) {
        float dd[PE_DIAG_MAX];
        pe__diag_sums(dd, ds, lds, ni, nj);
        for (int64_t d = 0; d < ni + nj - 1; d++) {
            if (dd[d] == 0) continue; /* a diagonal masked whole; also keeps 0 * inf out */
            double f = kernel(power, r2, (double)llabs(o0 + d), &df);
            a1 += dd[d] * f;
            a2 += dd[d] * df;
        }
    } else {
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < nj; j++) {
                double g = ds[i * lds + j];
                if (g == 0) continue; /* masked entries; also keeps 0 * inf out */
                int64_t d = pos[i0 + i] - kpos[j0 + j];
                double f = kernel(power, r2, (double)(d < 0 ? -d : d), &df);
                a1 += g * f;
                a2 += g * df;
            }
    }
    if (dr1) dr1[h] -= (float)a1;
    if (dr2) dr2[h] -= (float)(r1 * a2);
}

const pe__method pe__method_kerple = {
    .name = "kerple",
    .reference = "Chi et al. 2022, KERPLE",
    .family = PE_FAMILY_BIAS,
    .keys = "kerple",
    .flags = PE__GQA | PE__FUSED,
    .params = params,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
