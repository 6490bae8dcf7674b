/* ALiBi (Press et al.): s = scale q.k - m_h (i - j) when causal, - m_h |i - j| otherwise.
 * Slopes as the reference's get_slopes (a geometric sequence for a power of two heads;
 * otherwise the closest power of two's slopes followed by every other slope of twice as
 * many), or a trainable alibi_slopes [H] tensor, which then gets a gradient. */
#include "../internal.h"

enum { SLOPES };

/* The first n slopes of a power of two p: start^(i+1), start = 2^(-8/p). */
/* Slope i of the geometric sequence for p heads (p a power of two). */
static double slope_pow2(int64_t p, int64_t i) {
    double start = pow(2.0, -pow(2.0, -(log2((double)p) - 3.0)));
    return start * pow(start, (double)i);
}

void pe_alibi_slopes(double *m, int64_t H) {
    int64_t p = 1;
    while (p * 2 <= H) p *= 2;
    for (int64_t i = 0; i < p; i++) m[i] = slope_pow2(p, i);
    for (int64_t i = 0; i < H - p; i++) m[p + i] = slope_pow2(2 * p, 2 * i); /* get_slopes(2p)[0::2][:H - p] */
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg, (void)D;
    s[SLOPES] = (pe_param_spec){"alibi_slopes", 1, {H}, 1, {PE_INIT_ALIBI_SLOPES, 0, 0}};
    return 1;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    float *slopes = malloc(sizeof(float) * ctx->H); /* (H) the state */
    double *m = malloc(sizeof(double) * ctx->H);
    if (!slopes || !m) {
        free(slopes), free(m);
        return pe_error(err, PE_ENOMEM, "out of memory");
    }
    const float *given = ctx->w->param[SLOPES];
    pe_alibi_slopes(m, ctx->H);
    for (int64_t h = 0; h < ctx->H; h++) slopes[h] = given ? given[h] : (float)m[h];
    free(m);
    ctx->state = slopes;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    free(ctx->state);
    ctx->state = NULL;
}

/* The distance the slope multiplies: i - j when causal, |i - j| otherwise. */
static inline float distance(int causal, int64_t i, int64_t j) {
    int64_t d = i - j;
    return (float)(causal ? d : d < 0 ? -d : d);
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    const int causal = ctx->cfg->causal;
    float m = ((const float *)ctx->state)[h];
    int64_t o0;
    if (pe__tile_diagonals(ctx, b, i0, ni, j0, nj, &o0)) { /* the same product, once per diagonal */
        float bd[PE_DIAG_MAX];
        for (int64_t d = 0; d < ni + nj - 1; d++) bd[d] = -(m * distance(causal, 0, o0 + d)); /* s + -x == s - x */
        pe__diag_add(s, lds, ni, nj, bd);
        return;
    }
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            s[i * lds + j] -= m * distance(causal, pos[i0 + i], kpos[j0 + j]);
}

/* forward was s -= m_h d_ij, so now: dm_h -= sum_ij ds_ij d_ij */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    float *dm = ctx->g->dparam[SLOPES];
    if (!dm || !ctx->w->param[SLOPES]) return;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    const int causal = ctx->cfg->causal;
    double acc = 0;
    int64_t o0;
    if (pe__tile_diagonals(ctx, b, i0, ni, j0, nj, &o0)) {
        float dd[PE_DIAG_MAX];
        pe__diag_sums(dd, ds, lds, ni, nj);
        for (int64_t d = 0; d < ni + nj - 1; d++) acc += (double)dd[d] * distance(causal, 0, o0 + d);
    } else {
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < nj; j++)
                acc += (double)ds[i * lds + j] * distance(causal, pos[i0 + i], kpos[j0 + j]);
    }
    dm[h] -= (float)acc;
}

const pe__method pe__method_alibi = {
    .name = "alibi",
    .reference = "Press et al. 2022, ALiBi (ofirpress/attention_with_linear_biases)",
    .family = PE_FAMILY_BIAS,
    .keys = "hf_config hf_layer hf_assume",
    .flags = PE__GQA | PE__FUSED,
    .params = params,
    .prepare = prepare,
    .release = release,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
