/* Shaw et al. 2018 (tensor2tensor): relative key and value vectors, clipped at distance K.
 *   r    = clip(j - i, -K, K) + K
 *   s_ij = scale q_i . (k_j + rel_k[r])
 *   o_i  = sum_j p_ij (v_j + rel_v[r])
 * Tables rel_k, rel_v (2K+1, D) are shared by the heads. Both terms are tile hooks, the same
 * in every executor: a tile reads the rows between its extreme offsets (x = r - lo), whose
 * products with its queries (qa = q rel_k^T, and in backward dva = do rel_v^T) it forms once
 * and gathers per pair, as the reference's efficient form does per sequence. */
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

/* rel_k and rel_v transposed, (D, 2K+1) each: the per-row products as sums of rows (axpy) */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t R = 2 * ctx->cfg->max_rel + 1, D = ctx->D;
    float *t = malloc(sizeof(float) * (size_t)(2 * D * R));
    if (!t) return pe_error(err, PE_ENOMEM, "out of memory for shaw's tables");
    for (int w = 0; w < 2; w++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t d = 0; d < D; d++) t[w * D * R + d * R + r] = ctx->w->param[w][r * D + d];
    ctx->state = t;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    free(ctx->state);
    ctx->state = NULL;
}

/* a tile's products with its rows: two (rows, 2K+1) tables */
static int64_t tile_scratch(const pe_config *cfg, int64_t D, int64_t rows, int64_t cols) {
    (void)D, (void)cols;
    return 2 * rows * (2 * cfg->max_rel + 1);
}

/* the clipped offset j - i the tables are read by (row it + K) */
static int64_t rel_index(const pe_config *cfg, int64_t i, int64_t j) { return pe__clip_diff(j, i, cfg->max_rel); }

/* The tile's rows lo .. lo + n - 1 (n = *nr) and its pairs' local rows x = r - lo into ix (ni, nj) */
static int64_t tile_rows(const pe__ctx *ctx, const pe__tile *t, int64_t *nr) {
    const int64_t K = ctx->cfg->max_rel;
    int64_t lo, hi;
    pe__tile_offsets(ctx, t, 1, K, &lo, &hi);
    *nr = hi - lo + 1;
    return lo + K;
}
static inline int64_t local_row(const pe__ctx *ctx, const pe__tile *t, int64_t lo, int64_t i, int64_t j) {
    const int64_t K = ctx->cfg->max_rel;
    return pe__clip_diff(ctx->kpos[t->b * ctx->Tk + t->j0 + j], ctx->pos[t->b * ctx->T + t->i0 + i], K) + K - lo;
}

/* out (ni, nr) = x (ni, D; ldx) times the transposed table tt (D, R) at rows lo .. lo + nr - 1 */
static void row_products(const float *x, int64_t ldx, int64_t ni, const float *tt, int64_t R, int64_t D, int64_t lo,
                         int64_t nr, float *out) {
    memset(out, 0, sizeof(float) * (size_t)(ni * nr));
    for (int64_t i = 0; i < ni; i++)
        for (int64_t d = 0; d < D; d++) pe__axpy(out + i * nr, x[i * ldx + d], tt + d * R + lo, nr);
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t R = 2 * ctx->cfg->max_rel + 1, D = ctx->D;
    const float scale = (float)ctx->cfg->scale;
    int64_t nr, lo = tile_rows(ctx, t, &nr);
    float *qa = t->scratch; /* (ni, nr) q_i . rel_k[lo + x] */
    row_products(t->q, t->ldq, t->ni, ctx->state, R, D, lo, nr, qa);
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t j = 0; j < t->nj; j++) s[i * lds + j] += scale * qa[i * nr + local_row(ctx, t, lo, i, j)];
}

/* forward was s += scale q_i . rel_k[r_ij], so now, with g[i, x] = scale sum_{j: r_ij = lo + x} ds_ij:
 * dq_i += g[i] rel_k, drel_k += g^T q; ds is the plain term's as it was */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t D = ctx->D;
    const float scale = (float)ctx->cfg->scale, *rk = ctx->w->param[REL_K];
    float *drk = ctx->g->dparam[REL_K];
    int64_t nr, lo = tile_rows(ctx, t, &nr);
    float *g = t->scratch; /* (ni, nr) */
    memset(g, 0, sizeof(float) * (size_t)(t->ni * nr));
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t j = 0; j < t->nj; j++) g[i * nr + local_row(ctx, t, lo, i, j)] += scale * ds[i * lds + j];
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t x = 0; x < nr; x++) {
            const float c = g[i * nr + x];
            if (c == 0.0f) continue; /* masked pairs, rows no pair reads */
            pe__axpy(t->dq + i * t->ldq, c, rk + (lo + x) * D, D);
            if (drk) pe__axpy(drk + (lo + x) * D, c, t->q + i * t->ldq, D);
        }
}

static void value_mod(pe__ctx *ctx, const pe__tile *t, const float *p, int64_t ldp, float *o, int64_t ldo) {
    const int64_t D = ctx->D;
    const float *rv = ctx->w->param[REL_V];
    int64_t nr, lo = tile_rows(ctx, t, &nr);
    float *w = t->scratch; /* (ni, nr) the weight of each row */
    memset(w, 0, sizeof(float) * (size_t)(t->ni * nr));
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t j = 0; j < t->nj; j++) w[i * nr + local_row(ctx, t, lo, i, j)] += p[i * ldp + j];
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t x = 0; x < nr; x++)
            if (w[i * nr + x] != 0.0f) pe__axpy(o + i * ldo, w[i * nr + x], rv + (lo + x) * D, D);
}

/* forward was o_i += sum_j p_ij rel_v[r_ij], so now: dp_ij += do_i . rel_v[r_ij],
 * drel_v[r] += sum_i w[i, r] do_i */
static void value_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *p, int64_t ldp, const float *dout,
                               int64_t ldd, float *dp, int64_t lddp) {
    const int64_t R = 2 * ctx->cfg->max_rel + 1, D = ctx->D;
    float *drv = ctx->g->dparam[REL_V];
    int64_t nr, lo = tile_rows(ctx, t, &nr);
    float *dva = t->scratch, *w = dva + t->ni * nr; /* (ni, nr) do_i . rel_v[lo + x], and the weights */
    row_products(dout, ldd, t->ni, (const float *)ctx->state + D * R, R, D, lo, nr, dva);
    memset(w, 0, sizeof(float) * (size_t)(t->ni * nr));
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t j = 0; j < t->nj; j++) {
            const int64_t x = local_row(ctx, t, lo, i, j);
            dp[i * lddp + j] += dva[i * nr + x];
            w[i * nr + x] += p[i * ldp + j];
        }
    if (drv)
        for (int64_t i = 0; i < t->ni; i++)
            for (int64_t x = 0; x < nr; x++)
                if (w[i * nr + x] != 0.0f) pe__axpy(drv + (lo + x) * D, w[i * nr + x], dout + i * ldd, D);
}

const pe__method pe__method_shaw = {
    .name = "shaw",
    .reference = "Shaw et al. 2018 (tensor2tensor)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "max_rel",
    .rel_index = rel_index,
    .flags = PE__FUSED | PE__SCORE_QK,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
    .value_mod = value_mod,
    .value_mod_backward = value_mod_backward,
    .tile_scratch = tile_scratch,
};
