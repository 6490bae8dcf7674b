/* Huang et al. 2020, "Improve Transformer Models with Better Relative Position Embeddings":
 * four ways for a = clip(i - j, -K, K) to enter the score (K = max_rel, default 64).
 *   huang1  s = scale (q_i.k_j) rel_scale[|a|, h]              rel_scale (K+1, H)
 *   huang2  s = scale (q_i.k_j) rel_scale[a + K, h]            rel_scale (2K+1, H)
 *   huang3  s = scale sum_d q_id k_jd rel_vec[a + K, d]        rel_vec (2K+1, D)
 *   huang4  s = scale (q_i.k_j + q_i.rel_vec[a+K] + k_j.rel_vec[a+K])   rel_vec (2K+1, D)
 * huang4 is HF BERT's relative_key_query (distance = i - j, row distance + max_pos - 1) when
 * K = max_position_embeddings - 1. Tables are shared by the heads (huang3, huang4) or hold one
 * column per head (huang1, huang2). All terms are gathered per pair, O(T^2 D) like q.k. */
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

/* The table row of the pair (i, j): |a| for huang1, a + K otherwise. */
static inline int64_t row(int v, int64_t K, const int64_t *pos, const int64_t *kpos, int64_t i, int64_t j) {
    int64_t a = pe__clip(pos[i] - kpos[j], -K, K);
    return v == HUANG1 ? (a < 0 ? -a : a) : a + K;
}

/* huang1, huang2: a (T, Tk) scratch of scale_backward, once per call (not on the fused path,
 * which takes the terms per tile). */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int v = variant(ctx);
    if ((v == HUANG1 || v == HUANG2) && !ctx->fused && !(ctx->state = malloc(sizeof(float) * (size_t)(ctx->T * ctx->Tk))))
        return pe_error(err, PE_ENOMEM, "out of memory for a %lld x %lld score table", (long long)ctx->T, (long long)ctx->Tk);
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    free(ctx->state);
    ctx->state = NULL;
}

/* ---- huang1, huang2: s = (scale q.k) w[row, h] ------------------------------------------ */

static void scale_forward(pe__ctx *ctx, int64_t b, int64_t h, const float *q, const float *k,
                          float *s) {
    const int64_t T = ctx->T, H = ctx->H, K = ctx->cfg->max_rel;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const float *w = ctx->w->param[REL];
    const int v = variant(ctx);
    pe__score_dot_forward(ctx, q, k, s);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) s[i * ctx->Tk + j] *= w[row(v, K, pos, kpos, i, j) * H + h];
}

/* forward was s = c w[row, h] with c = scale q.k, so now: dw[row, h] += ds c, and c's own
 * backward takes ds w[row, h]. c is recomputed (one product) rather than saved. */
static void scale_backward(pe__ctx *ctx, int64_t b, int64_t h, const float *ds, const float *q,
                           const float *k, float *dq, float *dk) {
    const int64_t T = ctx->T, H = ctx->H, K = ctx->cfg->max_rel;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const float *w = ctx->w->param[REL];
    float *dw = ctx->g->dparam[REL];
    const int v = variant(ctx);
    float *t = ctx->state; /* (T, Tk) c, then ds w */
    if (dw) {
        pe__score_dot_forward(ctx, q, k, t);
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < ctx->Tk; j++) dw[row(v, K, pos, kpos, i, j) * H + h] += ds[i * ctx->Tk + j] * t[i * ctx->Tk + j];
    }
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) t[i * ctx->Tk + j] = ds[i * ctx->Tk + j] * w[row(v, K, pos, kpos, i, j) * H + h];
    pe__score_dot_backward(ctx, t, q, k, dq, dk);
}

/* ---- huang3: s = scale sum_d q_d k_d rel_vec[row, d] ------------------------------------ */

static void vec3_forward(pe__ctx *ctx, int64_t b, int64_t h, const float *q, const float *k,
                         float *s) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv, K = ctx->cfg->max_rel;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const float *rv = ctx->w->param[REL];
    const float scale = (float)ctx->cfg->scale;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            const float *qi = q + i * C, *kj = k + j * Ckv, *e = rv + row(HUANG3, K, pos, kpos, i, j) * D;
            float t = 0;
            for (int64_t d = 0; d < D; d++) t += qi[d] * kj[d] * e[d];
            s[i * ctx->Tk + j] = scale * t;
        }
}

/* forward was s_ij = scale sum_d q_id k_jd e_d (e = rel_vec[row]), so now, with g = scale ds_ij:
 * dq_id += g k_jd e_d, dk_jd += g q_id e_d, de_d += g q_id k_jd. */
static void vec3_backward(pe__ctx *ctx, int64_t b, int64_t h, const float *ds, const float *q,
                          const float *k, float *dq, float *dk) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv, K = ctx->cfg->max_rel;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const float *rv = ctx->w->param[REL];
    float *drv = ctx->g->dparam[REL];
    const float scale = (float)ctx->cfg->scale;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            float g = scale * ds[i * ctx->Tk + j];
            if (g == 0.0f) continue; /* masked entries */
            int64_t r = row(HUANG3, K, pos, kpos, i, j);
            const float *qi = q + i * C, *kj = k + j * Ckv, *e = rv + r * D;
            float *dqi = dq + i * C, *dkj = dk + j * Ckv;
            for (int64_t d = 0; d < D; d++) {
                dqi[d] += g * kj[d] * e[d];
                dkj[d] += g * qi[d] * e[d];
            }
            if (drv)
                for (int64_t d = 0; d < D; d++) drv[r * D + d] += g * qi[d] * kj[d];
        }
}

/* ---- huang4: s = scale (q.k + q.e + k.e), e = rel_vec[row] ------------------------------ */

static void vec4_forward(pe__ctx *ctx, int64_t b, int64_t h, const float *q, const float *k,
                         float *s) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv, K = ctx->cfg->max_rel;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const float *rv = ctx->w->param[REL];
    const float scale = (float)ctx->cfg->scale;
    pe__score_dot_forward(ctx, q, k, s);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            const float *e = rv + row(HUANG4, K, pos, kpos, i, j) * D;
            s[i * ctx->Tk + j] += scale * (pe__dot(q + i * C, e, D) + pe__dot(k + j * Ckv, e, D));
        }
}

/* forward was s_ij += scale (q_i.e + k_j.e), so now, with g = scale ds_ij:
 * dq_i += g e, dk_j += g e, de += g (q_i + k_j). */
static void vec4_backward(pe__ctx *ctx, int64_t b, int64_t h, const float *ds, const float *q,
                          const float *k, float *dq, float *dk) {
    (void)h;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv, K = ctx->cfg->max_rel;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const float *rv = ctx->w->param[REL];
    float *drv = ctx->g->dparam[REL];
    const float scale = (float)ctx->cfg->scale;
    pe__score_dot_backward(ctx, ds, q, k, dq, dk);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            float g = scale * ds[i * ctx->Tk + j];
            if (g == 0.0f) continue; /* masked entries */
            int64_t r = row(HUANG4, K, pos, kpos, i, j);
            pe__axpy(dq + i * C, g, rv + r * D, D);
            pe__axpy(dk + j * Ckv, g, rv + r * D, D);
            if (drv) {
                pe__axpy(drv + r * D, g, q + i * C, D);
                pe__axpy(drv + r * D, g, k + j * Ckv, D);
            }
        }
}

/* The same terms for the fused path (a = clip(i - j): sign -1); huang3's rel_vec is the
 * elementwise weight erow of q.k. */
static void rel_scale_abs(const pe_config *cfg, pe__rel *r) {
    *r = (pe__rel){.K = cfg->max_rel, .sign = -1, .abs = 1, .w = REL, .q = -1, .k = -1, .v = -1, .e = -1};
}
static void rel_scale(const pe_config *cfg, pe__rel *r) {
    *r = (pe__rel){.K = cfg->max_rel, .sign = -1, .abs = 0, .w = REL, .q = -1, .k = -1, .v = -1, .e = -1};
}
static void rel_vec3(const pe_config *cfg, pe__rel *r) {
    *r = (pe__rel){.K = cfg->max_rel, .sign = -1, .abs = 0, .w = -1, .q = -1, .k = -1, .v = -1, .e = REL};
}
static void rel_vec4(const pe_config *cfg, pe__rel *r) {
    *r = (pe__rel){.K = cfg->max_rel, .sign = -1, .abs = 0, .w = -1, .q = REL, .k = REL, .v = -1, .e = -1};
}

#define HUANG_METHOD(n, params_fn, fwd, bwd, rel_fn)                                                  \
    const pe__method pe__method_huang##n = {                                                  \
        .name = "huang" #n,                                                                   \
        .reference = "Huang et al. 2020, improve transformer models with better relative position embeddings", \
        .family = PE_FAMILY_RELATIVE,                                                         \
        .keys = "max_rel",                                                                    \
        .flags = PE__FUSED,                                                                   \
        .defaults = defaults,                                                                 \
        .check = check,                                                                       \
        .params = params_fn,                                                                  \
        .prepare = prepare,                                                                   \
        .release = release,                                                                   \
        .score_forward = fwd,                                                                 \
        .score_backward = bwd,                                                                \
        .rel = rel_fn,                                                                        \
    };

HUANG_METHOD(1, params_scale_abs, scale_forward, scale_backward, rel_scale_abs)
HUANG_METHOD(2, params_scale, scale_forward, scale_backward, rel_scale)
HUANG_METHOD(3, params_vec, vec3_forward, vec3_backward, rel_vec3)
HUANG_METHOD(4, params_vec, vec4_forward, vec4_backward, rel_vec4)
