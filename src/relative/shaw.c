/* Shaw et al. 2018 (tensor2tensor): relative key and value vectors, clipped at distance K.
 *   r    = clip(j - i, -K, K) + K
 *   s_ij = scale q_i . (k_j + rel_k[r])
 *   o_i  = sum_j p_ij (v_j + rel_v[r])
 * Tables rel_k, rel_v (2K+1, D) are shared by the heads. Both terms are tile hooks, the same
 * in every executor: the products of a query block with the tables (qa = q rel_k^T, and in
 * backward dva = do rel_v^T) are formed once per block (PE__SCORE_BLOCK) and gathered per pair,
 * as the reference's efficient form does per sequence; their gradients gather per block too. */
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

/* Per thread: a header, then four (rows, 2K+1) tables of the query block: qa = q rel_k^T, its
 * gradient g, dva = do rel_v^T and the probability mass w of each row (forward: the tile's) */
enum { HEAD = 16 };
static int64_t tile_scratch(const pe_config *cfg, int64_t D, int64_t rows, int64_t cols) {
    (void)D, (void)cols;
    return HEAD + 4 * rows * (2 * cfg->max_rel + 1);
}
typedef struct block {
    int64_t R;
    float *qa, *g, *dva, *w;
} block;
static block block_of(const pe__ctx *ctx, const pe__tile *t) {
    const int64_t R = 2 * ctx->cfg->max_rel + 1, n = t->ni * R;
    block k = {.R = R, .qa = t->scratch + HEAD};
    k.g = k.qa + n, k.dva = k.g + n, k.w = k.dva + n;
    return k;
}

/* the clipped offset j - i the tables are read by (row it + K) */
static int64_t rel_index(const pe_config *cfg, int64_t i, int64_t j) { return pe__clip_diff(j, i, cfg->max_rel); }

/* pair (i, j)'s table row (a call's positions lie within +-2^53: no overflow) */
static inline int64_t pair_row(const pe__ctx *ctx, const pe__tile *t, int64_t i, int64_t j) {
    const int64_t K = ctx->cfg->max_rel;
    return pe__clip(ctx->kpos[t->b * ctx->Tk + t->j0 + j] - ctx->pos[t->b * ctx->T + t->i0 + i], -K, K) + K;
}
/* the one row every pair of the tile reads (a tile off the band |offset| < K), or -1 */
static int64_t uniform_row(const pe__ctx *ctx, const pe__tile *t) {
    int64_t lo, hi;
    pe__tile_offsets(ctx, t, 1, ctx->cfg->max_rel, &lo, &hi);
    return lo == hi ? lo + ctx->cfg->max_rel : -1;
}

/* Query row i of a tile reads table row ra for keys [0, a), rows r0 + j one key each for
 * [a, b) and row 2K for [b, nj): off the band (uniform row u) ra = u and a = b = nj; on it, when
 * its keys sit at consecutive positions (the usual case; runs says whether they do, else each
 * pair's row is looked up: pair_row), ra = 0 and r0 = K + d0, d0 the first key's offset from
 * the query. */
typedef struct run {
    int64_t a, b, r0, ra;
} run;
static int runs(const pe__ctx *ctx, const pe__tile *t) {
    const int64_t *kp = ctx->kpos + t->b * ctx->Tk + t->j0;
    for (int64_t j = 1; j < t->nj; j++)
        if (kp[j] != kp[0] + j) return 0;
    return 1;
}
static run run_of(const pe__ctx *ctx, const pe__tile *t, int64_t i, int64_t u) {
    if (u >= 0) return (run){t->nj, t->nj, 0, u};
    const int64_t K = ctx->cfg->max_rel, d0 = ctx->kpos[t->b * ctx->Tk + t->j0] - ctx->pos[t->b * ctx->T + t->i0 + i];
    run r = {pe__clip(1 - K - d0, 0, t->nj), pe__clip(K - d0, 0, t->nj), K + d0, 0};
    r.b = r.b < r.a ? r.a : r.b;
    return r;
}

/* BEGIN: qa of the block's queries, once for its key tiles; then per pair s += scale qa[i, r] */
static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const block k = block_of(ctx, t);
    if (t->phase == PE__TILE_BEGIN) {
        pe__table_products(t->q, t->ldq, t->ni, ctx->state, k.R, ctx->D, 0, k.R, k.qa);
        return;
    }
    const float scale = (float)ctx->cfg->scale;
    const int64_t u = uniform_row(ctx, t), K2 = 2 * ctx->cfg->max_rel;
    const int in_runs = u < 0 && runs(ctx, t);
    for (int64_t i = 0; i < t->ni; i++) {
        float *si = s + i * lds;
        const float *qa = k.qa + i * k.R;
        if (u >= 0 || in_runs) {
            const run r = run_of(ctx, t, i, u);
            const float c0 = scale * qa[r.ra], c1 = scale * qa[K2];
            for (int64_t j = 0; j < r.a; j++) si[j] += c0;
            for (int64_t j = r.a; j < r.b; j++) si[j] += scale * qa[r.r0 + j];
            for (int64_t j = r.b; j < t->nj; j++) si[j] += c1;
            continue;
        }
        for (int64_t j = 0; j < t->nj; j++) si[j] += scale * qa[pair_row(ctx, t, i, j)];
    }
}

/* forward was s += scale q_i . rel_k[r_ij], so now, with g[i, r] = scale sum_{j: r_ij = r} ds_ij
 * over the block's tiles: at END dq_i += g[i] rel_k, drel_k += g^T q, and the value terms'
 * drel_v += w^T do (value_mod_backward); ds is the plain term's as it was */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t D = ctx->D;
    const block k = block_of(ctx, t);
    if (t->phase == PE__TILE_BEGIN) {
        memset(k.g, 0, sizeof(float) * (size_t)(t->ni * k.R));
        t->scratch[0] = 0; /* dva not formed yet */
        return;
    }
    if (t->phase == PE__TILE_PAIRS) {
        const float scale = (float)ctx->cfg->scale;
        const int64_t u = uniform_row(ctx, t), K2 = 2 * ctx->cfg->max_rel;
        const int in_runs = u < 0 && runs(ctx, t);
        for (int64_t i = 0; i < t->ni; i++) {
            const float *dsi = ds + i * lds;
            float *g = k.g + i * k.R;
            if (u >= 0 || in_runs) {
                const run r = run_of(ctx, t, i, u);
                if (r.a) g[r.ra] += scale * pe__lane_sum(dsi, r.a);
                for (int64_t j = r.a; j < r.b; j++) g[r.r0 + j] += scale * dsi[j];
                if (r.b < t->nj) g[K2] += scale * pe__lane_sum(dsi + r.b, t->nj - r.b);
                continue;
            }
            for (int64_t j = 0; j < t->nj; j++) g[pair_row(ctx, t, i, j)] += scale * dsi[j];
        }
        return;
    }
    const float *rk = ctx->w->param[REL_K];
    float *drk = ctx->g->dparam[REL_K], *drv = ctx->g->dparam[REL_V];
    /* dq_i += sum_r g[i, r] rel_k[r], drel_k[r] += sum_i g[i, r] q_i, drel_v[r] += sum_i w[i, r] do_i;
     * zero weights (masked pairs, rows no pair reads) skipped */
    for (int64_t i = 0; i < t->ni; i++) pe__weighted_rows(t->dq + i * t->ldq, k.g + i * k.R, 1, k.R, rk, D, D);
    for (int64_t r = 0; drk && r < k.R; r++) pe__weighted_rows(drk + r * D, k.g + r, k.R, t->ni, t->q, t->ldq, D);
    for (int64_t r = 0; drv && t->scratch[0] != 0 && r < k.R; r++)
        pe__weighted_rows(drv + r * D, k.w + r, k.R, t->ni, t->dout, t->ldd, D);
}

/* per tile, the rows between its extreme offsets: o_i += sum_x w[i, x] rel_v[lo + x] */
static void value_mod(pe__ctx *ctx, const pe__tile *t, const float *p, int64_t ldp, float *o, int64_t ldo) {
    const int64_t D = ctx->D, K = ctx->cfg->max_rel;
    const float *rv = ctx->w->param[REL_V];
    int64_t lo, hi;
    pe__tile_offsets(ctx, t, 1, K, &lo, &hi);
    lo += K, hi += K;
    const int64_t nr = hi - lo + 1;
    float *w = block_of(ctx, t).w; /* (ni, nr) the weight of each row */
    memset(w, 0, sizeof(float) * (size_t)(t->ni * nr));
    const int in_runs = nr > 1 && runs(ctx, t);
    for (int64_t i = 0; i < t->ni; i++) {
        const float *pi = p + i * ldp;
        float *wi = w + i * nr - lo;
        if (nr == 1) {
            wi[lo] = pe__lane_sum(pi, t->nj);
        } else if (in_runs) {
            const run r = run_of(ctx, t, i, -1);
            if (r.a) wi[0] = pe__lane_sum(pi, r.a); /* rows 0 and 2K lie in [lo, hi] when read */
            for (int64_t j = r.a; j < r.b; j++) wi[r.r0 + j] = pi[j];
            if (r.b < t->nj) wi[2 * K] = pe__lane_sum(pi + r.b, t->nj - r.b);
        } else {
            for (int64_t j = 0; j < t->nj; j++) wi[pair_row(ctx, t, i, j)] += pi[j];
        }
    }
    for (int64_t i = 0; i < t->ni; i++) pe__weighted_rows(o + i * ldo, w + i * nr, 1, nr, rv + lo * D, D, D);
}

/* forward was o_i += sum_j p_ij rel_v[r_ij], so now dp_ij += do_i . rel_v[r_ij] (dva, formed
 * once per block), and the block's mass w[i, r] += p_ij, which END turns into drel_v */
static void value_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *p, int64_t ldp, const float *dout,
                               int64_t ldd, float *dp, int64_t lddp) {
    const block k = block_of(ctx, t);
    if (t->scratch[0] == 0) {
        pe__table_products(dout, ldd, t->ni, (const float *)ctx->state + ctx->D * k.R, k.R, ctx->D, 0, k.R, k.dva);
        memset(k.w, 0, sizeof(float) * (size_t)(t->ni * k.R));
        t->scratch[0] = 1;
    }
    const int64_t u = uniform_row(ctx, t), K2 = 2 * ctx->cfg->max_rel;
    const int in_runs = u < 0 && runs(ctx, t);
    for (int64_t i = 0; i < t->ni; i++) {
        const float *pi = p + i * ldp, *dva = k.dva + i * k.R;
        float *dpi = dp + i * lddp, *w = k.w + i * k.R;
        if (u >= 0 || in_runs) {
            const run r = run_of(ctx, t, i, u);
            for (int64_t j = 0; j < r.a; j++) dpi[j] += dva[r.ra];
            for (int64_t j = r.a; j < r.b; j++) dpi[j] += dva[r.r0 + j], w[r.r0 + j] += pi[j];
            for (int64_t j = r.b; j < t->nj; j++) dpi[j] += dva[K2];
            if (r.a) w[r.ra] += pe__lane_sum(pi, r.a);
            if (r.b < t->nj) w[K2] += pe__lane_sum(pi + r.b, t->nj - r.b);
            continue;
        }
        for (int64_t j = 0; j < t->nj; j++) {
            const int64_t r = pair_row(ctx, t, i, j);
            dpi[j] += dva[r];
            w[r] += pi[j];
        }
    }
}

const pe__method pe__method_shaw = {
    .name = "shaw",
    .reference = "Shaw et al. 2018 (tensor2tensor)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "max_rel",
    .rel_index = rel_index,
    .flags = PE__FUSED | PE__SCORE_QK | PE__SCORE_BLOCK,
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
