/* TUPE (Ke et al. 2020; guolinke/TUPE TransformerSentenceEncoder): untied positional
 * attention. The content term is the plain scale q.k; both positional terms depend only on
 * positions and parameters, so they are a bias (this file's hook, hence the bias family,
 * although the position-position term is absolute):
 *   pt     = LayerNorm(pos_table) (pos_ln_w, pos_ln_b, eps 1e-5); position p uses row p + 1
 *   A[a,b] = scale (pt_a uq^T + uq_b)_h . (pt_b uk^T + uk_b)_h,    scale = 1/sqrt(2D)
 *   s_ij   = scale q_i.k_j + A[i+1, j+1] + rel_bias[bucket(j - i), h]   (T5, bidirectional)
 * With tupe_cls the first token is [CLS] and, as the reference's encoder does, column 0
 * takes A[1, 1] ("others to [CLS]") and then row 0, its diagonal included, takes A[0, 0]
 * ("[CLS] to others"); its buckets are num_buckets for column 0, then num_buckets/2 for
 * row 0 (a bucket the bidirectional T5 formula never produces).
 *
 * prepare normalises and projects only the rows the call uses: one per token (b, t), then
 * table rows 0 and 1 for [CLS]. Their gradients gather in the state and flow to the
 * projections, the LayerNorm and the table in finish_backward. */
#include "../internal.h"

enum { POS_TABLE, POS_LN_W, POS_LN_B, UQ, UQ_B, UK, UK_B, REL_BIAS };

typedef struct tupe_state {
    int64_t U;      /* rows: B*T queries, B*Tk keys, then table rows 0 and 1 */
    int64_t *row;   /* (U) table row of each */
    float *xhat;    /* (U, C) (x - mean) / sqrt(var + eps) */
    float *rstd;    /* (U) 1 / sqrt(var + eps) */
    float *pt;      /* (U, C) LayerNorm output */
    float *pq, *pk; /* (U, C) pt uq^T + uq_b, pt uk^T + uk_b */
    float *dpq, *dpk; /* (U, C) their gradients, accumulated by score_mod_backward */
    float *cls;     /* (2, H) A[0, 0] and A[1, 1] per head, scale included */
    float *tile;    /* (T, Tk) scratch of the score_mod hooks: the pair terms, their gradients */
    float *dpt;     /* (U, C) scratch of finish_backward */
} tupe_state;

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_has(cfg, PE_K_scale)) cfg->scale = 1.0 / sqrt(2.0 * (double)D);
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    return pe__t5_check(cfg, 1, err);
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    int64_t C = H * D;
    s[POS_TABLE] = (pe_param_spec){"pos_table", 2, {-1, C}, 0, {0}};
    s[POS_LN_W] = (pe_param_spec){"pos_ln_w", 1, {C}, 0, {PE_INIT_CONST, 1, 0}};
    s[POS_LN_B] = (pe_param_spec){"pos_ln_b", 1, {C}, 0, {PE_INIT_CONST, 0, 0}};
    s[UQ] = (pe_param_spec){"uq", 2, {C, C}, 0, {0}};
    s[UQ_B] = (pe_param_spec){"uq_b", 1, {C}, 0, {PE_INIT_CONST, 0, 0}};
    s[UK] = (pe_param_spec){"uk", 2, {C, C}, 0, {0}};
    s[UK_B] = (pe_param_spec){"uk_b", 1, {C}, 0, {PE_INIT_CONST, 0, 0}};
    s[REL_BIAS] = (pe_param_spec){"rel_bias", 2, {cfg->num_buckets + 1, H}, 0, {0}};
    /* guolinke/TUPE: the positional attention and the relative bias are computed once and
     * added in every layer */
    for (int i = POS_TABLE; i <= REL_BIAS; i++) s[i].shared = 1;
    return 8;
}

static void release(pe__ctx *ctx) {
    tupe_state *st = ctx->state;
    if (st) {
        free(st->row), free(st->xhat), free(st->rstd), free(st->pt), free(st->pq), free(st->pk);
        free(st->dpq), free(st->dpk), free(st->cls), free(st->tile), free(st->dpt);
    }
    free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const pe_weights *w = ctx->w;
    const int64_t N = w->param_rows[POS_TABLE], C = ctx->C, H = ctx->H, D = ctx->D;
    if (ctx->pos_min < 0 || ctx->pos_max + 1 >= N) {
        int64_t bad = ctx->pos_min < 0 ? ctx->pos_min : ctx->pos_max;
        return pe_error(err, PE_EPOS, "position %lld needs row %lld of pos_table, which has %lld rows (row 0 is [CLS])",
                        (long long)bad, (long long)(bad + 1), (long long)N);
    }
    tupe_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory");
    ctx->state = st;
    const int64_t BT = ctx->B * ctx->T, BTk = ctx->B * ctx->Tk, U = st->U = BT + BTk + 2;
    const size_t n = (size_t)(U * C);
    st->row = calloc((size_t)U, sizeof(int64_t));
    st->xhat = calloc(n, sizeof(float));
    st->rstd = calloc((size_t)U, sizeof(float));
    st->pt = calloc(n, sizeof(float));
    st->pq = calloc(n, sizeof(float));
    st->pk = calloc(n, sizeof(float));
    st->dpq = calloc(n, sizeof(float));
    st->dpk = calloc(n, sizeof(float));
    st->cls = calloc((size_t)(2 * H), sizeof(float));
    st->tile = malloc(sizeof(float) * (size_t)(ctx->T * ctx->Tk));
    st->dpt = malloc(sizeof(float) * n);
    if (!st->row || !st->xhat || !st->rstd || !st->pt || !st->pq || !st->pk || !st->dpq || !st->dpk || !st->cls ||
        !st->tile || !st->dpt)
        return pe_error(err, PE_ENOMEM, "out of memory for tupe's %lld positional rows", (long long)U);
    for (int64_t u = 0; u < BT; u++) st->row[u] = ctx->pos[u] + 1;
    for (int64_t u = 0; u < BTk; u++) st->row[BT + u] = ctx->kpos[u] + 1;
    st->row[U - 2] = 0, st->row[U - 1] = 1;

    /* LayerNorm in double, biased variance as torch */
    const float *table = w->param[POS_TABLE], *lw = w->param[POS_LN_W], *lb = w->param[POS_LN_B];
    for (int64_t u = 0; u < U; u++) {
        const float *x = table + st->row[u] * C;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < C; c++) mean += x[c];
        mean /= (double)C;
        for (int64_t c = 0; c < C; c++) var += ((double)x[c] - mean) * ((double)x[c] - mean);
        double rstd = 1.0 / sqrt(var / (double)C + 1e-5);
        st->rstd[u] = (float)rstd;
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)x[c] - mean) * rstd;
            st->xhat[u * C + c] = (float)xh;
            st->pt[u * C + c] = (float)(xh * lw[c] + lb[c]);
        }
    }
    pe__gemm(0, 1, U, C, C, 1.0f, st->pt, C, w->param[UQ], C, 0.0f, st->pq, C);
    pe__gemm(0, 1, U, C, C, 1.0f, st->pt, C, w->param[UK], C, 0.0f, st->pk, C);
    for (int64_t u = 0; u < U; u++)
        for (int64_t c = 0; c < C; c++) st->pq[u * C + c] += w->param[UQ_B][c], st->pk[u * C + c] += w->param[UK_B][c];
    const float scale = (float)ctx->cfg->scale;
    for (int64_t h = 0; h < H; h++)
        for (int64_t a = 0; a < 2; a++) {
            int64_t u = U - 2 + a;
            st->cls[a * H + h] = scale * pe__dot(st->pq + u * C + h * D, st->pk + u * C + h * D, D);
        }
    return PE_OK;
}

/* What entry (i, j) (token indices; query i is token qoff + i of its row) takes: 0 the pair's
 * own term, 1 A[0, 0], 2 A[1, 1]. [CLS] is token 0. */
static inline int cls_kind(const pe__ctx *ctx, int64_t qoff, int64_t i, int64_t j) {
    if (!ctx->cfg->tupe_cls) return 0;
    return qoff + i == 0 ? 1 : j == 0 ? 2 : 0;
}

/* its relative term's bucket: T5's, bidirectional */
static int64_t rel_index(const pe_config *c, int64_t i, int64_t j) {
    return pe__t5_bucket(j - i, 1, c->num_buckets, c->max_distance);
}

static inline int64_t bucket_of(const pe__ctx *ctx, int kind, const int64_t *pos, const int64_t *kpos, int64_t i,
                                int64_t j) {
    const pe_config *c = ctx->cfg;
    if (kind == 1) return c->num_buckets / 2;
    if (kind == 2) return c->num_buckets;
    return rel_index(c, pos[i], kpos[j]);
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const tupe_state *st = ctx->state;
    const int64_t T = ctx->T, C = ctx->C, D = ctx->D, H = ctx->H;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const int64_t kr = ctx->B * T + b * ctx->Tk; /* the keys' first row */
    int64_t Tb, Tkb, qoff;
    pe__row_lens(ctx, b, &Tb, &Tkb, &qoff);
    const float *rel_bias = ctx->w->param[REL_BIAS];
    float *A = st->tile; /* (ni, nj) the tile's pair terms (tupe is not fused: ni nj <= T Tk) */
    pe__gemm(0, 1, ni, nj, D, (float)ctx->cfg->scale, st->pq + (b * T + i0) * C + h * D, C,
             st->pk + (kr + j0) * C + h * D, C, 0.0f, A, nj);
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++) {
            int kind = cls_kind(ctx, qoff, i0 + i, j0 + j);
            float a = kind ? st->cls[(kind - 1) * H + h] : A[i * nj + j];
            s[i * lds + j] += a + rel_bias[bucket_of(ctx, kind, pos, kpos, i0 + i, j0 + j) * H + h];
        }
}

/* forward was s += A_ij + rel_bias[b_ij, h] with A_ij = scale pq_i.pk_j (or a [CLS] constant
 * scale pq_r.pk_r of table row r), so now: drel_bias[b_ij, h] += ds_ij, and with
 * g_ij = scale ds_ij on pair entries: dpq_i += g pk, dpk_j += g^T pq; each [CLS] constant
 * sends scale sum(ds) pk_r to dpq_r and scale sum(ds) pq_r to dpk_r. */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    tupe_state *st = ctx->state;
    const int64_t T = ctx->T, C = ctx->C, D = ctx->D, H = ctx->H, U = st->U;
    const int64_t *pos = ctx->pos + b * T, *kpos = ctx->kpos + b * ctx->Tk;
    const int64_t kr = ctx->B * T + b * ctx->Tk; /* the keys' first row */
    int64_t Tb, Tkb, qoff;
    pe__row_lens(ctx, b, &Tb, &Tkb, &qoff);
    const float scale = (float)ctx->cfg->scale;
    float *drel = ctx->g->dparam[REL_BIAS];
    float *g = st->tile; /* (ni, nj) */
    float dcls[2] = {0, 0};
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++) {
            int kind = cls_kind(ctx, qoff, i0 + i, j0 + j);
            float d = ds[i * lds + j];
            if (drel) drel[bucket_of(ctx, kind, pos, kpos, i0 + i, j0 + j) * H + h] += d;
            if (kind) dcls[kind - 1] += d;
            g[i * nj + j] = kind ? 0.0f : scale * d;
        }
    pe__gemm(0, 0, ni, D, nj, 1.0f, g, nj, st->pk + (kr + j0) * C + h * D, C, 1.0f,
             st->dpq + (b * T + i0) * C + h * D, C);
    pe__gemm(1, 0, nj, D, ni, 1.0f, g, nj, st->pq + (b * T + i0) * C + h * D, C, 1.0f,
             st->dpk + (kr + j0) * C + h * D, C);
    for (int a = 0; a < 2; a++) {
        int64_t o = (U - 2 + a) * C + h * D;
        for (int64_t d = 0; d < D; d++) {
            st->dpq[o + d] += scale * dcls[a] * st->pk[o + d];
            st->dpk[o + d] += scale * dcls[a] * st->pq[o + d];
        }
    }
}

/* forward was pq = pt uq^T + uq_b, pk = pt uk^T + uk_b, pt = xhat lw + lb, xhat = LN(table[row]),
 * so now: duq += dpq^T pt, duq_b += sum dpq (k likewise); dpt = dpq uq + dpk uk;
 * dlw += sum dpt xhat, dlb += sum dpt; dtable[row] += rstd (dxh - mean(dxh) - xhat mean(dxh xhat))
 * with dxh = dpt lw. dpq, dpk are cleared for the next backward. */
static void finish_backward(pe__ctx *ctx) {
    tupe_state *st = ctx->state;
    const pe_weights *w = ctx->w;
    float *const *dp = ctx->g->dparam;
    const int64_t C = ctx->C, U = st->U;
    if (dp[UQ]) pe__gemm(1, 0, C, C, U, 1.0f, st->dpq, C, st->pt, C, 1.0f, dp[UQ], C);
    if (dp[UK]) pe__gemm(1, 0, C, C, U, 1.0f, st->dpk, C, st->pt, C, 1.0f, dp[UK], C);
    for (int64_t u = 0; u < U; u++)
        for (int64_t c = 0; c < C; c++) {
            if (dp[UQ_B]) dp[UQ_B][c] += st->dpq[u * C + c];
            if (dp[UK_B]) dp[UK_B][c] += st->dpk[u * C + c];
        }
    if (dp[POS_TABLE] || dp[POS_LN_W] || dp[POS_LN_B]) {
        float *dpt = st->dpt; /* (U, C) */
        pe__gemm(0, 0, U, C, C, 1.0f, st->dpq, C, w->param[UQ], C, 0.0f, dpt, C);
        pe__gemm(0, 0, U, C, C, 1.0f, st->dpk, C, w->param[UK], C, 1.0f, dpt, C);
        const float *lw = w->param[POS_LN_W];
        for (int64_t u = 0; u < U; u++) {
            const float *dy = dpt + u * C, *xh = st->xhat + u * C;
            double m1 = 0, m2 = 0; /* mean(dxh), mean(dxh xhat) */
            for (int64_t c = 0; c < C; c++) {
                if (dp[POS_LN_W]) dp[POS_LN_W][c] += dy[c] * xh[c];
                if (dp[POS_LN_B]) dp[POS_LN_B][c] += dy[c];
                m1 += (double)dy[c] * lw[c];
                m2 += (double)dy[c] * lw[c] * xh[c];
            }
            if (!dp[POS_TABLE]) continue;
            m1 /= (double)C, m2 /= (double)C;
            float *dt = dp[POS_TABLE] + st->row[u] * C;
            for (int64_t c = 0; c < C; c++)
                dt[c] += (float)(st->rstd[u] * ((double)dy[c] * lw[c] - m1 - xh[c] * m2));
        }
    }
    memset(st->dpq, 0, sizeof(float) * U * C);
    memset(st->dpk, 0, sizeof(float) * U * C);
}

const pe__method pe__method_tupe = {
    .name = "tupe",
    .reference = "Ke et al. 2021, TUPE (guolinke/TUPE)",
    .family = PE_FAMILY_BIAS,
    .keys = "num_buckets max_distance tupe_cls",
    .rel_index = rel_index,
    .fit_length = pe__t5_fit_length,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .finish_backward = finish_backward,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
