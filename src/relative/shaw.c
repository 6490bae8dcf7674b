/* Shaw et al. 2018 (tensor2tensor): relative key and value vectors, clipped at distance K.
 *   r    = clip(j - i, -K, K) + K
 *   s_ij = scale q_i . (k_j + rel_k[r])
 *   o_i  = sum_j p_ij (v_j + rel_v[r])
 * Tables rel_k, rel_v (2K+1, D) are shared by the heads. Both extra terms are gathered
 * through a (T, 2K+1) table per (b, h), as the reference's efficient form does. */
#include "../internal.h"

enum { REL_K, REL_V };

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (cfg->max_rel < 0) return pe_error(err, PE_EKEY, "key 'max_rel': %lld must be >= 0", (long long)cfg->max_rel);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)H;
    /* tensor2tensor: uniform_unit_scaling, U(+-sqrt(3 / rows)) */
    const double a = sqrt(3.0 / (double)(2 * cfg->max_rel + 1));
    s[REL_K] = (pe_param_spec){"rel_k", 2, {2 * cfg->max_rel + 1, D}, 0, {PE_INIT_UNIFORM, -a, a}};
    s[REL_V] = (pe_param_spec){"rel_v", 2, {2 * cfg->max_rel + 1, D}, 0, {PE_INIT_UNIFORM, -a, a}};
    return 2;
}

/* Scratch of the score and value hooks, two (T, 2K+1) tables, allocated once per call (none
 * on the fused path, which computes the terms per tile). */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t R = 2 * ctx->cfg->max_rel + 1;
    if (!ctx->fused && !(ctx->state = malloc(sizeof(float) * (size_t)(2 * ctx->T * R))))
        return pe_error(err, PE_ENOMEM, "out of memory for shaw's %lld x %lld tables", (long long)ctx->T, (long long)R);
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    free(ctx->state);
    ctx->state = NULL;
}

/* the clipped offset j - i the tables are read by (row it + K) */
static int64_t rel_index(const pe_config *cfg, int64_t i, int64_t j) { return pe__clip(j - i, -cfg->max_rel, cfg->max_rel); }
static inline int64_t table_row(const pe__ctx *ctx, const int64_t *pos, const int64_t *kpos, int64_t i, int64_t j) {
    return rel_index(ctx->cfg, pos[i], kpos[j]) + ctx->cfg->max_rel;
}

static void score_forward(pe__ctx *ctx, int64_t b, int64_t h, const float *q, const float *k,
                          float *s) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, R = 2 * ctx->cfg->max_rel + 1;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    float *qr = ctx->state; /* (T, R) q_i . rel_k[r] */
    pe__score_dot_forward(ctx, q, k, s);
    pe__gemm(0, 1, T, R, D, 1.0f, q, ctx->C, ctx->w->param[REL_K], D, 0.0f, qr, R);
    float scale = (float)ctx->cfg->scale;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) s[i * ctx->Tk + j] += scale * qr[i * R + table_row(ctx, pos, kpos, i, j)];
}

/* forward was s += scale q_i . rel_k[r_ij], so now, with g[i, r] = scale sum_{j: r_ij = r} ds_ij:
 * dq_i += g[i] rel_k, drel_k += g^T q */
static void score_backward(pe__ctx *ctx, int64_t b, int64_t h, const float *ds, const float *q,
                           const float *k, float *dq, float *dk) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, R = 2 * ctx->cfg->max_rel + 1;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    float *g = ctx->state; /* (T, R) */
    memset(g, 0, sizeof(float) * T * R);
    pe__score_dot_backward(ctx, ds, q, k, dq, dk);
    float scale = (float)ctx->cfg->scale;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) g[i * R + table_row(ctx, pos, kpos, i, j)] += scale * ds[i * ctx->Tk + j];
    pe__gemm(0, 0, T, D, R, 1.0f, g, R, ctx->w->param[REL_K], D, 1.0f, dq, ctx->C);
    if (ctx->g->dparam[REL_K]) pe__gemm(1, 0, R, D, T, 1.0f, g, R, q, ctx->C, 1.0f, ctx->g->dparam[REL_K], D);
}

static void value_forward(pe__ctx *ctx, int64_t b, int64_t h, const float *p, float *o) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, R = 2 * ctx->cfg->max_rel + 1;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    float *pr = ctx->state; /* (T, R) probability mass per index */
    memset(pr, 0, sizeof(float) * T * R);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) pr[i * R + table_row(ctx, pos, kpos, i, j)] += p[i * ctx->Tk + j];
    pe__gemm(0, 0, T, D, R, 1.0f, pr, R, ctx->w->param[REL_V], D, 1.0f, o, ctx->C);
}

/* forward was o_i += sum_j p_ij rel_v[r_ij], so now: dp_ij += do_i . rel_v[r_ij],
 * drel_v[r] += sum_i pr[i, r] do_i */
static void value_backward(pe__ctx *ctx, int64_t b, int64_t h, const float *p, const float *dout,
                           float *dp) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, R = 2 * ctx->cfg->max_rel + 1;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    float *dr = ctx->state, *pr = dr + T * R; /* (T, R) do_i . rel_v[r], and the mass */
    memset(pr, 0, sizeof(float) * T * R);
    pe__gemm(0, 1, T, R, D, 1.0f, dout, ctx->C, ctx->w->param[REL_V], D, 0.0f, dr, R);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            int64_t r = table_row(ctx, pos, kpos, i, j);
            dp[i * ctx->Tk + j] += dr[i * R + r];
            pr[i * R + r] += p[i * ctx->Tk + j];
        }
    if (ctx->g->dparam[REL_V]) pe__gemm(1, 0, R, D, T, 1.0f, pr, R, dout, ctx->C, 1.0f, ctx->g->dparam[REL_V], D);
}

/* The same terms for the fused path: row clip(j - i, -K, K) + K of rel_k (query) and rel_v. */
static void rel(const pe_config *cfg, pe__rel *r) {
    *r = (pe__rel){.K = cfg->max_rel, .sign = 1, .abs = 0, .w = -1, .q = REL_K, .k = -1, .v = REL_V, .e = -1};
}

const pe__method pe__method_shaw = {
    .name = "shaw",
    .reference = "Shaw et al. 2018 (tensor2tensor)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "max_rel",
    .rel_index = rel_index,
    .flags = PE__FUSED,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .score_forward = score_forward,
    .score_backward = score_backward,
    .value_forward = value_forward,
    .value_backward = value_backward,
    .rel = rel,
};
