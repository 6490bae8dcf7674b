/* Huang et al. 2020, "Improve Transformer Models with Better Relative Position Embeddings":
 * four ways for a = clip(i - j, -K, K) to enter the score (K = max_rel, default 64).
 *   huang1  s = scale (q_i.k_j) rel_scale[|a|, h]              rel_scale (K+1, H)
 *   huang2  s = scale (q_i.k_j) rel_scale[a + K, h]            rel_scale (2K+1, H)
 *   huang3  s = scale sum_d q_id k_jd rel_vec[a + K, d]        rel_vec (2K+1, D)
 *   huang4  s = scale (q_i.k_j + q_i.rel_vec[a+K] + k_j.rel_vec[a+K])   rel_vec (2K+1, D)
 * huang4 is HF BERT's relative_key_query (distance = i - j, row distance + max_pos - 1) when
 * K = max_position_embeddings - 1. Tables are shared by the heads (huang3, huang4) or hold one
 * column per head (huang1, huang2). All terms are tile hooks (score_mod), the same in every
 * executor, gathered per pair, O(T^2 D) like q.k. */
#include "../internal.h"

enum { REL };
enum { HUANG1 = 1, HUANG2, HUANG3, HUANG4 };

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H, (void)D;
    if (!pe_config_has(cfg, PE_K_max_rel)) cfg->max_rel = 64; /* shaw's is 16 */
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (cfg->max_rel < 0) return pe_error(err, PE_EKEY, "key 'max_rel': %lld must be >= 0", (long long)cfg->max_rel);
    return PE_OK;
}

static int variant(const pe__ctx *ctx) {
    int m = ctx->cfg->method;
    return m == PE_METHOD_HUANG1 ? HUANG1 : m == PE_METHOD_HUANG2 ? HUANG2 : m == PE_METHOD_HUANG3 ? HUANG3 : HUANG4;
}

static int params_scale_abs(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)D;
    s[REL] = (pe_param_spec){"rel_scale", 2, {cfg->max_rel + 1, H}, 0, {PE_INIT_CONST, 1, 0}};
    return 1;
}

static int params_scale(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)D;
    s[REL] = (pe_param_spec){"rel_scale", 2, {2 * cfg->max_rel + 1, H}, 0, {PE_INIT_CONST, 1, 0}};
    return 1;
}

static int params_vec(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)H;
    /* huang3 starts as plain attention (the paper gives no init); huang4 as HF BERT: N(0, 0.02) */
    s[REL] = (pe_param_spec){"rel_vec", 2, {2 * cfg->max_rel + 1, D}, 0,
                             cfg->method == PE_METHOD_HUANG3 ? (pe_init){PE_INIT_CONST, 1, 0} : (pe_init){PE_INIT_NORMAL, 0.02, 0}};
    return 1;
}

/* The tile's table rows: [*lo, *hi] of its pairs' rows, and each pair's row (|a| for huang1,
 * a + K otherwise) */
static void tile_rows(const pe__ctx *ctx, const pe__tile *t, int v, int64_t *lo, int64_t *hi) {
    const int64_t K = ctx->cfg->max_rel;
    int64_t a0, a1;
    pe__tile_offsets(ctx, t, -1, K, &a0, &a1);
    if (v != HUANG1) {
        *lo = a0 + K, *hi = a1 + K;
        return;
    }
    const int64_t m0 = a0 < 0 ? -a0 : a0, m1 = a1 < 0 ? -a1 : a1;
    *lo = a0 <= 0 && a1 >= 0 ? 0 : m0 < m1 ? m0 : m1;
    *hi = m0 > m1 ? m0 : m1;
}
static inline int64_t pair_row(const pe__ctx *ctx, const pe__tile *t, int v, int64_t i, int64_t j) {
    const int64_t K = ctx->cfg->max_rel; /* a call's positions lie within +-2^53: no overflow */
    const int64_t a = pe__clip(ctx->pos[t->b * ctx->T + t->i0 + i] - ctx->kpos[t->b * ctx->Tk + t->j0 + j], -K, K);
    return v == HUANG1 ? (a < 0 ? -a : a) : a + K;
}

/* huang4: rel_vec transposed (D, 2K+1), for the per-row products */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    if (variant(ctx) != HUANG4) return PE_OK;
    const int64_t R = 2 * ctx->cfg->max_rel + 1, D = ctx->D;
    float *t = malloc(sizeof(float) * (size_t)(D * R));
    if (!t) return pe_error(err, PE_ENOMEM, "out of memory for huang4's table");
    for (int64_t r = 0; r < R; r++)
        for (int64_t d = 0; d < D; d++) t[d * R + r] = ctx->w->param[REL][r * D + d];
    ctx->state = t;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    free(ctx->state);
    ctx->state = NULL;
}

/* ---- huang1, huang2: s = (scale q.k) w[row, h] ------------------------------------------ */

static void scale_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t H = ctx->H;
    const float *w = ctx->w->param[REL] + t->h;
    const int v = variant(ctx);
    int64_t lo, hi;
    tile_rows(ctx, t, v, &lo, &hi);
    for (int64_t i = 0; i < t->ni; i++) {
        float *si = s + i * lds;
        if (lo == hi) { /* one row for the tile: a tile off the band */
            const float c = w[lo * H];
            for (int64_t j = 0; j < t->nj; j++) si[j] *= c;
            continue;
        }
        for (int64_t j = 0; j < t->nj; j++) si[j] *= w[pair_row(ctx, t, v, i, j) * H];
    }
}

/* forward was s = c w[row, h] with c = scale q.k (s_in), so now: dw[row, h] += ds c, and c's
 * own gradient is ds w[row, h]; off the band a tile row's dw is one sum in 8 lanes (pair by pair
 * it was a chain of adds through memory, 29% of a backward at T=2048) */
static void scale_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    const int64_t H = ctx->H;
    const float *w = ctx->w->param[REL] + t->h;
    float *dw = ctx->g->dparam[REL] ? ctx->g->dparam[REL] + t->h : NULL;
    const int v = variant(ctx);
    int64_t lo, hi;
    tile_rows(ctx, t, v, &lo, &hi);
    for (int64_t i = 0; i < t->ni; i++) {
        float *dsi = ds + i * lds;
        const float *si = s_in + i * lds;
        if (lo == hi) {
            if (dw) dw[lo * H] += pe__lane_dot(dsi, si, t->nj);
            const float c = w[lo * H];
            for (int64_t j = 0; j < t->nj; j++) dsi[j] *= c;
            continue;
        }
        for (int64_t j = 0; j < t->nj; j++) {
            const int64_t r = pair_row(ctx, t, v, i, j) * H;
            if (dw) dw[r] += dsi[j] * si[j];
            dsi[j] *= w[r];
        }
    }
}

/* ---- huang3: s = scale sum_d q_d k_d rel_vec[row, d] ------------------------------------ */

static int64_t vec3_scratch(const pe_config *cfg, int64_t D, int64_t rows, int64_t cols) {
    (void)cfg, (void)cols;
    return 2 * D + 2 * rows * (D + 16); /* q e and z of a query; of a tile (the fused path's, padded) */
}

/* A tile of one row e on the fused path, through its product: s = (scale q * e) k^T, qe
 * (pr, ldk) zero-padded */
static void vec3_uniform(const pe__ctx *ctx, const pe__tile *t, const float *e, float *qe, float *s) {
    const int64_t D = ctx->D, ld = t->ldk;
    const float scale = (float)ctx->cfg->scale;
    memset(qe, 0, sizeof(float) * (size_t)(t->pr * ld));
    for (int64_t i = 0; i < t->ni; i++)
        for (int64_t d = 0; d < D; d++) qe[i * ld + d] = scale * t->q[i * t->ldq + d] * e[d];
    t->mm(s, t->pc, qe, ld, 1, t->kt, t->ldkt, t->pr, ld, t->pc);
}

/* A pair's gradients in one pass over q, k, e: dq += g k e, dk += g q e, de += g q k (de may be
 * a sink: the rows are distinct, restrict lets the loop vectorise) */
static inline void grads3(float *restrict dq, float *restrict dk, float *restrict de, const float *restrict q,
                          const float *restrict k, const float *restrict e, float g, int64_t D) {
    for (int64_t d = 0; d < D; d++) {
        const float ge = g * e[d];
        dq[d] += ge * k[d];
        dk[d] += ge * q[d];
        de[d] += g * q[d] * k[d];
    }
}

/* sum_d a_d b_d c_d in eight lanes (a form the compiler vectorises without reassociating) */
static inline float dot3(const float *a, const float *b, const float *c, int64_t n) {
    float acc[8] = {0};
    int64_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int u = 0; u < 8; u++) acc[u] += a[d + u] * b[d + u] * c[d + u];
    for (; d < n; d++) acc[0] += a[d] * b[d] * c[d];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* The whole score (PE__SCORE_OWN). A tile of one row e (every tile off the band |a| < K) is a
 * product with q * e; the band's go pair by pair, the pairs the causal band or window masks left
 * at 0 (a causal diagonal tile: half its pairs). Sums run over d in the transposed keys. */
PE_TILE_SIMD static void vec3_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t D = ctx->D;
    const float scale = (float)ctx->cfg->scale, *rv = ctx->w->param[REL];
    int64_t lo, hi;
    tile_rows(ctx, t, HUANG3, &lo, &hi);
    if (lo == hi && t->mm) { /* s is zero (PE__SCORE_OWN) */
        vec3_uniform(ctx, t, rv + lo * D, t->scratch + 2 * D, s);
        return;
    }
    for (int64_t i = 0; i < t->ni; i++) {
        float *si = s + i * lds;
        memset(si, 0, sizeof(float) * (size_t)t->nj);
        if (lo == hi) {
            const float *e = rv + lo * D;
            for (int64_t d = 0; d < D; d++) pe__axpy(si, scale * t->q[i * t->ldq + d] * e[d], t->kt + d * t->ldkt, t->nj);
            continue;
        }
        const float *qi = t->q + i * t->ldq;
        int64_t ja, jb;
        pe__tile_row_visible(ctx, t, i, &ja, &jb);
        for (int64_t j = ja; j < jb; j++) si[j] = scale * dot3(qi, rv + pair_row(ctx, t, HUANG3, i, j) * D, t->k + j * t->ldk, D);
    }
}

/* forward was s_ij = scale sum_d q_id k_jd e_d (e = rel_vec[row]), so now, with g = scale ds_ij:
 * dq_id += g k_jd e_d, dk_jd += g q_id e_d, de_d += g q_id k_jd. One row e: z_i = sum_j g_ij
 * k_j, dq_i += z_i e, de += q_i z_i, dk_j += g_ij (q_i e). */
PE_TILE_SIMD static void vec3_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t D = ctx->D;
    const float scale = (float)ctx->cfg->scale, *rv = ctx->w->param[REL];
    float *drv = ctx->g->dparam[REL];
    int64_t lo, hi;
    tile_rows(ctx, t, HUANG3, &lo, &hi);
    float *qe = t->scratch, *z = qe + D;
    if (lo == hi && t->mm) { /* through the product: Z = G k, dk += G^T (q * e), g = scale ds */
        const int64_t ld = t->ldk;
        const float *e = rv + lo * D;
        float *QE = t->scratch + 2 * D, *Z = QE + t->pr * ld;
        memset(QE, 0, sizeof(float) * (size_t)(2 * t->pr * ld));
        for (int64_t i = 0; i < t->ni; i++)
            for (int64_t d = 0; d < D; d++) QE[i * ld + d] = scale * t->q[i * t->ldq + d] * e[d];
        t->mm(Z, ld, ds, lds, 1, t->k, ld, t->pr, t->pc, ld);
        t->mm(t->dk, ld, ds, 1, lds, QE, ld, t->pc, t->pr, ld);
        for (int64_t i = 0; i < t->ni; i++) {
            const float *qi = t->q + i * t->ldq, *zi = Z + i * ld;
            float *dqi = t->dq + i * t->ldq;
            for (int64_t d = 0; d < D; d++) dqi[d] += scale * zi[d] * e[d];
            if (drv)
                for (int64_t d = 0; d < D; d++) drv[lo * D + d] += scale * qi[d] * zi[d];
        }
        return;
    }
    for (int64_t i = 0; i < t->ni; i++) {
        const float *qi = t->q + i * t->ldq;
        float *dqi = t->dq + i * t->ldq;
        if (lo == hi) {
            const float *e = rv + lo * D;
            memset(z, 0, sizeof(float) * (size_t)D);
            for (int64_t d = 0; d < D; d++) qe[d] = qi[d] * e[d];
            for (int64_t j = 0; j < t->nj; j++) {
                const float g = scale * ds[i * lds + j];
                if (g == 0.0f) continue; /* masked */
                pe__axpy(z, g, t->k + j * t->ldk, D);
                pe__axpy(t->dk + j * t->ldk, g, qe, D);
            }
            for (int64_t d = 0; d < D; d++) dqi[d] += z[d] * e[d];
            if (drv)
                for (int64_t d = 0; d < D; d++) drv[lo * D + d] += qi[d] * z[d];
            continue;
        }
        int64_t ja, jb; /* the band's pairs; a masked one has ds = 0 (attn_mask's too) */
        pe__tile_row_visible(ctx, t, i, &ja, &jb);
        for (int64_t j = ja; j < jb; j++) {
            const float g = scale * ds[i * lds + j];
            if (g == 0.0f) continue; /* masked */
            const int64_t r = pair_row(ctx, t, HUANG3, i, j);
            grads3(dqi, t->dk + j * t->ldk, drv ? drv + r * D : z, qi, t->k + j * t->ldk, rv + r * D, g, D);
        }
    }
}

/* ---- huang4: s = scale (q.k + q.e + k.e), e = rel_vec[row] ------------------------------ */

/* Per thread: a header (the block's rows, block_rows), the block's q products and their
 * gradient (rows, up to 2K+1) each, then the tile's k products and theirs (cols, 2K+1) each */
enum { HEAD = 16 };
static int64_t vec4_scratch(const pe_config *cfg, int64_t D, int64_t rows, int64_t cols) {
    (void)D;
    return HEAD + 2 * (rows + cols) * (2 * cfg->max_rel + 1);
}

/* The table rows [*rlo, *rlo + *nb) a BEGIN tile's block reads: those of the pairs its query
 * rows see among the tile's keys (a causal block reads the rows of offsets >= 0 alone, about
 * half of them), kept in the header for its tiles and END; *nb = 0: none. */
static void block_rows(const pe__ctx *ctx, const pe__tile *t, int64_t *rlo, int64_t *nb) {
    const int64_t K = ctx->cfg->max_rel;
    int64_t lo, hi, h[2] = {0, 0};
    if (t->phase == PE__TILE_BEGIN) {
        if (pe__tile_visible_offsets(ctx, t, -1, K, &lo, &hi)) h[0] = lo + K, h[1] = hi - lo + 1;
        memcpy(t->scratch, h, sizeof h);
    } else memcpy(h, t->scratch, sizeof h);
    *rlo = h[0], *nb = h[1];
}

/* BEGIN: qa = q rel_vec^T of the block's queries and rows, once for its key tiles; per tile
 * the k products of its rows; the pairs the band masks are left alone */
static void vec4_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t R = 2 * ctx->cfg->max_rel + 1, D = ctx->D;
    float *qa = t->scratch + HEAD, *ka = qa + 2 * t->ni * R;
    int64_t rlo, nb;
    block_rows(ctx, t, &rlo, &nb);
    if (t->phase == PE__TILE_BEGIN) {
        pe__table_products(t->q, t->ldq, t->ni, ctx->state, R, D, rlo, nb, qa);
        return;
    }
    const float scale = (float)ctx->cfg->scale;
    const int64_t K = ctx->cfg->max_rel;
    int64_t lo, hi;
    if (!pe__tile_visible_offsets(ctx, t, -1, K, &lo, &hi)) return;
    lo += K, hi += K;
    const int64_t nr = hi - lo + 1, *pos = ctx->pos + t->b * ctx->T + t->i0, *kp = ctx->kpos + t->b * ctx->Tk + t->j0;
    pe__table_products(t->k, t->ldk, t->nj, ctx->state, R, D, lo, nr, ka);
    for (int64_t i = 0; i < t->ni; i++) {
        const float *qai = qa + i * nb; /* row r at r - rlo */
        float *si = s + i * lds;
        int64_t ja, jb;
        pe__tile_row_visible(ctx, t, i, &ja, &jb);
        if (lo == hi)
            for (int64_t j = ja; j < jb; j++) si[j] += scale * (qai[lo - rlo] + ka[j * nr]);
        else
            for (int64_t j = ja; j < jb; j++) { /* pair_row's, with the row's position hoisted */
                const int64_t r = pe__clip(pos[i] - kp[j], -K, K) + K;
                si[j] += scale * (qai[r - rlo] + ka[j * nr + r - lo]);
            }
    }
}

/* forward was s_ij += scale (q_i.e + k_j.e), so now, with gq[i, r], gk[j, r] the sums of
 * g = scale ds_ij over the pairs of row r: dk_j += gk[j] e, de += gk^T k per tile, and at END
 * dq_i += gq[i] e, de += gq^T q; the plain term keeps ds. The pairs the band masks have
 * ds = 0 and are left out. */
PE_TILE_SIMD static void vec4_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t R = 2 * ctx->cfg->max_rel + 1, D = ctx->D;
    const float *rv = ctx->w->param[REL];
    float *drv = ctx->g->dparam[REL];
    float *gq = t->scratch + HEAD + t->ni * R, *gk = gq + t->ni * R + t->nj * R;
    int64_t rlo, nb;
    block_rows(ctx, t, &rlo, &nb);
    if (t->phase == PE__TILE_BEGIN) {
        memset(gq, 0, sizeof(float) * (size_t)(t->ni * nb));
        return;
    }
    if (t->phase == PE__TILE_END) { /* dq_i += sum_r gq[i, r] e_r; de_r += sum_i gq[i, r] q_i */
        for (int64_t i = 0; i < t->ni; i++) pe__weighted_rows(t->dq + i * t->ldq, gq + i * nb, 1, nb, rv + rlo * D, D, D);
        for (int64_t x = 0; drv && x < nb; x++) pe__weighted_rows(drv + (rlo + x) * D, gq + x, nb, t->ni, t->q, t->ldq, D);
        return;
    }
    const int64_t K = ctx->cfg->max_rel;
    int64_t lo, hi;
    if (!pe__tile_visible_offsets(ctx, t, -1, K, &lo, &hi)) return;
    lo += K, hi += K;
    const int64_t nr = hi - lo + 1;
    memset(gk, 0, sizeof(float) * (size_t)(t->nj * nr));
    const float scale = (float)ctx->cfg->scale;
    const int64_t *pos = ctx->pos + t->b * ctx->T + t->i0, *kp = ctx->kpos + t->b * ctx->Tk + t->j0;
    for (int64_t i = 0; i < t->ni; i++) {
        float *gqi = gq + i * nb; /* row r at r - rlo */
        int64_t ja, jb;
        pe__tile_row_visible(ctx, t, i, &ja, &jb);
        for (int64_t j = ja; j < jb; j++) {
            const float g = scale * ds[i * lds + j];
            const int64_t r = lo == hi ? lo : pe__clip(pos[i] - kp[j], -K, K) + K; /* pair_row's */
            gqi[r - rlo] += g, gk[j * nr + r - lo] += g;
        }
    }
    for (int64_t j = 0; j < t->nj; j++) pe__weighted_rows(t->dk + j * t->ldk, gk + j * nr, 1, nr, rv + lo * D, D, D);
    for (int64_t x = 0; drv && x < nr; x++) pe__weighted_rows(drv + (lo + x) * D, gk + x, nr, t->nj, t->k, t->ldk, D);
}

#define HUANG_METHOD(n, params_fn, mod, mod_bwd, scratch_fn, reads)                             \
    const pe__method pe__method_huang##n = {                                                  \
        .name = "huang" #n,                                                                   \
        .reference = "Huang et al. 2020, improve transformer models with better relative position embeddings", \
        .family = PE_FAMILY_RELATIVE,                                                         \
        .keys = "max_rel",                                                                    \
        .flags = PE__FUSED | (reads),                                                         \
        .defaults = defaults,                                                                 \
        .check = check,                                                                       \
        .params = params_fn,                                                                  \
        .prepare = prepare,                                                                   \
        .release = release,                                                                   \
        .score_mod = mod,                                                                     \
        .score_mod_backward = mod_bwd,                                                        \
        .tile_scratch = scratch_fn,                                                           \
    };

HUANG_METHOD(1, params_scale_abs, scale_mod, scale_mod_backward, NULL, PE__SCORE_PLAIN)
HUANG_METHOD(2, params_scale, scale_mod, scale_mod_backward, NULL, PE__SCORE_PLAIN)
HUANG_METHOD(3, params_vec, vec3_mod, vec3_mod_backward, vec3_scratch, PE__SCORE_OWN | PE__SCORE_QK)
HUANG_METHOD(4, params_vec, vec4_mod, vec4_mod_backward, vec4_scratch, PE__SCORE_QK | PE__SCORE_BLOCK)
