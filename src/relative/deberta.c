/* DeBERTa disentangled attention (He et al.; HF DebertaV2, microsoft/DeBERTa).
 *   delta = i - j, log-bucketed when position_buckets > 0 (HF make_log_bucket_position)
 *   S     = position_buckets > 0 ? position_buckets : max_relative_positions
 *   r     = clamp(delta' + S, 0, 2S - 1)
 *   Kr    = E wk^T + bk,  Qr = E wq^T + bq    (share_att_key; else pos_key_*, pos_query_*)
 *   s_ij  = scale (q_i.k_j + q_i.Kr[r]_h + k_j.Qr[r]_h),  scale = 1/sqrt(D (1 + n))
 * E = rel_embeddings (2S, C), used as given. c2p is the second term, p2c the third; n counts
 * those of pos_att. HF's p2c gathers k_j.Qr with the transposed relative position negated,
 * -bucket(j - i) = bucket(i - j) (the bucket is odd), so both terms read the same r.
 *
 * Kr and Qr are built once per forward (prepare) with the index r of every (b, i, j); the
 * score backward accumulates dKr, dQr, and finish_backward sends them to E and to the
 * projection (wk/bk, wq/bq when shared, else pos_key_*, pos_query_*). */
#include "../internal.h"

enum { REL_EMB, POS_KEY_W, POS_KEY_B, POS_QUERY_W, POS_QUERY_B };

typedef struct {
    int64_t R;              /* 2S rows */
    int32_t *idx;           /* (B, T, T) r of each (b, i, j) */
    float *Kr, *Qr;         /* (R, C) or NULL when the term is off */
    float *dKr, *dQr;       /* (R, C) gradients, zero between backward passes */
} deberta_state;

/* HF make_log_bucket_position for one relative position, as PyTorch computes it with its
 * default float32: the ratio a/mid and both logs in float32 (the denominator's argument a
 * double rounded to float), ceil in float32. No clamp: distances far beyond max_position
 * keep growing and are clamped later by the index. A non-finite result (max_position - 1 ==
 * mid makes the denominator log 1 = 0) converts to int64 as x86 does: INT64_MIN. */
int64_t pe__deberta_bucket(int64_t rel, int64_t bucket_size, int64_t max_position) {
    int64_t mid = bucket_size / 2;
    if (rel <= mid && rel >= -mid) return rel; /* HF's abs_pos <= mid branch */
    int64_t a = rel < 0 ? -rel : rel;
    float ratio = (float)a / (float)mid;
    float denom = logf((float)((double)(max_position - 1) / (double)mid));
    float v = ceilf(logf(ratio) / denom * (float)(mid - 1)) + (float)mid;
    if (rel < 0) v = -v;
    if (!(v >= -9.2233720368547758e18f && v < 9.2233720368547758e18f)) return INT64_MIN;
    return (int64_t)v;
}

static int n_terms(const pe_config *cfg) {
    return !!(cfg->pos_att & PE_POS_ATT_C2P) + !!(cfg->pos_att & PE_POS_ATT_P2C);
}

static int64_t span(const pe_config *cfg) {
    return cfg->position_buckets > 0 ? cfg->position_buckets : cfg->max_relative_positions;
}

/* The relative index of a query at i and a key at j: delta = i - j, log-bucketed, clipped to
 * -S .. S - 1 (the table row is it + S) */
static int64_t rel_index(const pe_config *cfg, int64_t i, int64_t j) {
    int64_t d = i - j;
    if (cfg->position_buckets > 0) d = pe__deberta_bucket(d, cfg->position_buckets, cfg->max_relative_positions);
    return pe__clip(d, -span(cfg), span(cfg) - 1);
}

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_has(cfg, PE_K_scale)) cfg->scale = 1.0 / sqrt((double)D * (1 + n_terms(cfg)));
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (cfg->position_buckets > 0 && cfg->max_relative_positions <= 0)
        return pe_error(err, PE_EKEY, "key 'max_relative_positions': %lld must be > 0 with position_buckets %lld",
                        (long long)cfg->max_relative_positions, (long long)cfg->position_buckets);
    if (cfg->position_buckets == 1) /* HF divides by position_buckets / 2 */
        return pe_error(err, PE_EKEY, "key 'position_buckets': 1 is not allowed (0 or less: no buckets; else >= 2)");
    if (cfg->position_buckets <= 0 && cfg->max_relative_positions < 1)
        return pe_error(err, PE_EKEY, "key 'max_relative_positions': %lld must be >= 1 without position_buckets",
                        (long long)cfg->max_relative_positions);
    if (span(cfg) > (1 << 29))
        return pe_error(err, PE_EKEY, "key '%s': %lld is too large (at most %d)",
                        cfg->position_buckets > 0 ? "position_buckets" : "max_relative_positions",
                        (long long)span(cfg), 1 << 29);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    const int64_t C = H * D, R = 2 * span(cfg);
    int c2p = cfg->pos_att & PE_POS_ATT_C2P, p2c = cfg->pos_att & PE_POS_ATT_P2C;
    /* HF DebertaV2: one rel_embeddings table in the encoder, LayerNorm'ed, shared by the layers */
    s[REL_EMB] = (pe_param_spec){"rel_embeddings", 2, {R, C}, 0, {0}, .shared = 1, .layernormed = 1};
    if (cfg->share_att_key) return 1;
    /* a projection the configuration does not use may still be given (its gradient is 0) */
    s[POS_KEY_W] = (pe_param_spec){"pos_key_w", 2, {C, C}, !c2p, {0}};
    s[POS_KEY_B] = (pe_param_spec){"pos_key_b", 1, {C}, 1, {PE_INIT_CONST, 0, 0}};
    s[POS_QUERY_W] = (pe_param_spec){"pos_query_w", 2, {C, C}, !p2c, {0}};
    s[POS_QUERY_B] = (pe_param_spec){"pos_query_b", 1, {C}, 1, {PE_INIT_CONST, 0, 0}};
    return 5;
}

/* The projection of the c2p term (key side) or of the p2c term (query side). */
static void projection(const pe__ctx *ctx, int key, const float **w, const float **b, float **dw,
                       float **db) {
    const pe_weights *W = ctx->w;
    pe_grads *g = ctx->g;
    if (ctx->cfg->share_att_key) {
        *w = key ? W->wk : W->wq, *b = key ? W->bk : W->bq;
        if (dw) *dw = key ? g->dwk : g->dwq, *db = key ? g->dbk : g->dbq;
    } else {
        int i = key ? POS_KEY_W : POS_QUERY_W;
        *w = W->param[i], *b = W->param[i + 1];
        if (dw) *dw = g->dparam[i], *db = g->dparam[i + 1];
    }
}

static void release(pe__ctx *ctx) {
    deberta_state *st = ctx->state;
    free(st->idx), free(st->Kr), free(st->Qr), free(st->dKr), free(st->dQr);
    free(st);
    ctx->state = NULL;
}

/* Kr, Qr (R, C) = E W^T + b */
static void project(const pe__ctx *ctx, int key, float *out, int64_t R) {
    const float *w, *b;
    projection(ctx, key, &w, &b, NULL, NULL);
    const int64_t C = ctx->C;
    pe__gemm(0, 1, R, C, C, 1.0f, ctx->w->param[REL_EMB], C, w, C, 0.0f, out, C);
    if (b)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) out[r * C + c] += b[c];
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const pe_config *cfg = ctx->cfg;
    if (cfg->share_att_key && (!ctx->w->wq || !ctx->w->wk))
        return pe_error(err, PE_EKEY, "key 'share_att_key': true projects the relative embeddings with wq and wk, which "
                                      "the projected form does not have: set it false and pass pos_query_w, pos_key_w");
    const int64_t B = ctx->B, T = ctx->T, C = ctx->C, S = span(cfg), R = 2 * S;
    int c2p = cfg->pos_att & PE_POS_ATT_C2P, p2c = cfg->pos_att & PE_POS_ATT_P2C;
    deberta_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory for the deberta tables");
    ctx->state = st;
    st->R = R;
    st->idx = malloc(sizeof(int32_t) * B * T * ctx->Tk);
    if (c2p) st->Kr = malloc(sizeof(float) * R * C), st->dKr = pe__calloc((size_t)(R * C), sizeof(float));
    if (p2c) st->Qr = malloc(sizeof(float) * R * C), st->dQr = pe__calloc((size_t)(R * C), sizeof(float));
    if (!st->idx || (c2p && (!st->Kr || !st->dKr)) || (p2c && (!st->Qr || !st->dQr))) {
        release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the deberta tables (2S = %lld rows)", (long long)R);
    }
    for (int64_t b = 0; b < B; b++) {
        const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < ctx->Tk; j++)
                st->idx[(b * T + i) * ctx->Tk + j] = (int32_t)(rel_index(cfg, pos[i], kpos[j]) + S);
    }
    if (c2p) project(ctx, 1, st->Kr, R);
    if (p2c) project(ctx, 0, st->Qr, R);
    return PE_OK;
}

/* One (b, h): s (T, Tk) = scale (q k^T + c2p + p2c). The position terms are gathered per pair
 * (O(T^2 D), like q k^T) rather than through a (T, 2S) table, so a wide span costs nothing. */
/* the whole score of head (t->b, t->h): the tile is the head (PE__SCORE_HEAD) */
static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h;
    const float *q = t->q, *k = t->k;
    (void)lds, (void)b, (void)h;
    const deberta_state *st = ctx->state;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv;
    const int32_t *idx = st->idx + b * T * ctx->Tk;
    const float scale = (float)ctx->cfg->scale;
    const float *Kr = st->Kr ? st->Kr + h * D : NULL, *Qr = st->Qr ? st->Qr + h * D : NULL;
    pe__score_dot_forward(ctx, q, k, s);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            int64_t r = idx[i * ctx->Tk + j];
            float acc = 0;
            if (Kr) acc += pe__dot(q + i * C, Kr + r * C, D);
            if (Qr) acc += pe__dot(k + j * Ckv, Qr + r * C, D);
            s[i * ctx->Tk + j] += scale * acc;
        }
}

/* forward was s_ij += scale (q_i.Kr[r] + k_j.Qr[r]), so now, with g = scale ds_ij:
 * dq_i += g Kr[r], dKr[r] += g q_i, dk_j += g Qr[r], dQr[r] += g k_j (head h's columns). */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    const int64_t b = t->b, h = t->h;
    const float *q = t->q, *k = t->k;
    float *dq = t->dq, *dk = t->dk;
    (void)s_in, (void)lds, (void)b, (void)h;
    deberta_state *st = ctx->state;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv;
    const int32_t *idx = st->idx + b * T * ctx->Tk;
    const float scale = (float)ctx->cfg->scale;
    const float *Kr = st->Kr ? st->Kr + h * D : NULL, *Qr = st->Qr ? st->Qr + h * D : NULL;
    float *dKr = st->dKr ? st->dKr + h * D : NULL, *dQr = st->dQr ? st->dQr + h * D : NULL;
    pe__score_dot_backward(ctx, ds, q, k, dq, dk);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < ctx->Tk; j++) {
            float g = scale * ds[i * ctx->Tk + j];
            if (g == 0.0f) continue; /* masked entries */
            int64_t r = idx[i * ctx->Tk + j];
            if (Kr) {
                pe__axpy(dq + i * C, g, Kr + r * C, D);
                pe__axpy(dKr + r * C, g, q + i * C, D);
            }
            if (Qr) {
                pe__axpy(dk + j * Ckv, g, Qr + r * C, D);
                pe__axpy(dQr + r * C, g, k + j * Ckv, D);
            }
        }
}

/* forward was P = E W^T + b (P = Kr or Qr), so now: dE += dP W, dW += dP^T E, db += sum_r dP;
 * then dP is cleared for the next backward. */
static void project_backward(pe__ctx *ctx, int key, float *dP, int64_t R) {
    const float *w, *b;
    float *dw, *db;
    projection(ctx, key, &w, &b, &dw, &db);
    const int64_t C = ctx->C;
    const float *E = ctx->w->param[REL_EMB];
    float *dE = ctx->g->dparam[REL_EMB];
    if (dE) pe__gemm(0, 0, R, C, C, 1.0f, dP, C, w, C, 1.0f, dE, C);
    if (dw) pe__gemm(1, 0, C, C, R, 1.0f, dP, C, E, C, 1.0f, dw, C);
    if (db)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) db[c] += dP[r * C + c];
    memset(dP, 0, sizeof(float) * R * C);
}

static void finish_backward(pe__ctx *ctx) {
    deberta_state *st = ctx->state;
    if (st->dKr) project_backward(ctx, 1, st->dKr, st->R);
    if (st->dQr) project_backward(ctx, 0, st->dQr, st->R);
}

const pe__method pe__method_deberta = {
    .name = "deberta",
    .reference = "He et al. 2021, DeBERTa (HF DebertaV2, microsoft/DeBERTa)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "position_buckets max_relative_positions pos_att share_att_key",
    .rel_index = rel_index,
    .flags = PE__SCORE_OWN | PE__SCORE_QK | PE__SCORE_HEAD,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .finish_backward = finish_backward,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
