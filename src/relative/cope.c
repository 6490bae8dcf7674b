/* CoPE, Contextual Position Encoding (Golovneva et al. 2024; facebookresearch/RAM,
 * projects/cope/src/cope/context_position.py, its default settings: gates from the attention's
 * own keys, logits divided by sqrt(D) after the position term is added). Positions count the
 * keys a query's gates let through instead of the tokens:
 *   a_ij = q_i.k_j,   g_ij = sigmoid(scale a_ij) m_ij,   p_ij = min(sum_{t >= j} g_it, P - 1)
 *   e_ij = (1 - w) q_i.E[:, floor p_ij] + w q_i.E[:, ceil p_ij],   w = p_ij - floor p_ij
 *   s_ij = scale (a_ij + e_ij)
 * m_ij is 1 where query i may read key j (its band: causal and window, pe__band_range; attn_mask;
 * padding), so the sum runs over the keys from j to the query's own; P = npos_max; E = pos_emb
 * (D, P), one table shared by the heads (the reference's [1, head_dim, npos] parameter, zeros
 * at first). Causal only: causal defaults to true, and causal=false is an error.
 *
 * Not fused: a row's positions are a suffix sum over all of its keys. One (b, h) at a time:
 * a = q k^T, the gates and positions in double, then the two gathered dots of each pair. The
 * table is read transposed (Et (P, D), rows contiguous), and its gradient gathered in double in
 * the same layout and added to dpos_emb by finish_backward. Backward of one row, with
 * de_ij = scale ds_ij:
 *   dq_i += de_ij ((1 - w) Et[fl] + w Et[c]),   dEt[fl] += de_ij (1 - w) q_i,   dEt[c] += de_ij w q_i
 *   dp_ij = de_ij q_i.(Et[c] - Et[fl])  (0 at the clamp, where fl = c = P - 1)
 *   dg_it = sum_{j <= t} dp_ij,   da_it = scale ds_it + scale dg_it g_it (1 - g_it) m_it
 * and a's gradient goes to q and k as the plain term's does. */
#include "../internal.h"

enum { POS_EMB };

/* The table's columns, at most; a row of positions (T x P) is never formed, so this bounds
 * only the table and its transposed copy. */
#define COPE_MAX_NPOS ((int64_t)1 << 24)

typedef struct {
    int64_t P;
    float *Et;    /* (P, D) pos_emb transposed */
    double *dEt;  /* (P, D) its gradient, summed over the backward's (b, h), zero between calls */
    float *a;     /* (T, Tk) q.k of one (b, h) */
    float *da;    /* (T, Tk) its gradient */
    double *g;    /* (T, Tk) gates, 0 where masked */
    double *p;    /* (T, Tk) positions, clamped */
} cope_state;

/* causal unless the settings say otherwise (and then check refuses them) */
static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H, (void)D;
    if (!pe_config_has(cfg, PE_K_causal)) cfg->causal = 1;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (!cfg->causal)
        return pe_error(err, PE_EKEY, "method cope is causal only (its positions count the keys up to the query): "
                                      "set causal=true");
    if (cfg->npos_max < 1 || cfg->npos_max > COPE_MAX_NPOS)
        return pe_error(err, PE_EKEY, "key 'npos_max': %lld must be in 1 .. %lld", (long long)cfg->npos_max,
                        (long long)COPE_MAX_NPOS);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)H;
    s[POS_EMB] = (pe_param_spec){"pos_emb", 2, {D, cfg->npos_max}, 0, {PE_INIT_CONST, 0, 0}};
    return 1;
}

static void release(pe__ctx *ctx) {
    cope_state *st = ctx->state;
    free(st->Et), free(st->dEt), free(st->a), free(st->da), free(st->g), free(st->p);
    free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t P = ctx->cfg->npos_max, D = ctx->D, n = ctx->T * ctx->Tk;
    cope_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory for the cope tables");
    ctx->state = st;
    st->P = P;
    st->Et = malloc(sizeof(float) * (size_t)(P * D));
    st->dEt = pe__calloc((size_t)(P * D), sizeof(double));
    st->a = malloc(sizeof(float) * (size_t)n), st->da = malloc(sizeof(float) * (size_t)n);
    st->g = malloc(sizeof(double) * (size_t)n), st->p = malloc(sizeof(double) * (size_t)n);
    if (!st->Et || !st->dEt || !st->a || !st->da || !st->g || !st->p) {
        release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the cope tables (%lld positions, %lld x %lld scores)",
                        (long long)P, (long long)ctx->T, (long long)ctx->Tk);
    }
    const float *E = ctx->w->param[POS_EMB];
    for (int64_t d = 0; d < D; d++)
        for (int64_t c = 0; c < P; c++) st->Et[c * D + d] = E[d * P + c];
    return PE_OK;
}

static double ddot(const float *x, const float *y, int64_t n) {
    double s = 0;
    for (int64_t d = 0; d < n; d++) s += (double)x[d] * y[d];
    return s;
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* a = q k^T, the gates g and the clamped positions p of (b, h); rows past the row's queries
 * (padding) keep g = 0. */
static void positions(pe__ctx *ctx, cope_state *st, int64_t b, const float *q, const float *k) {
    const int64_t T = ctx->T, Tk = ctx->Tk;
    const double scale = ctx->cfg->scale, top = (double)(st->P - 1);
    const uint8_t *mk = ctx->mask ? ctx->mask + b * T * Tk : NULL;
    int64_t Tb, Tkb, qoff;
    pe__row_lens(ctx, b, &Tb, &Tkb, &qoff);
    pe__gemm(0, 1, T, Tk, ctx->D, 1.0f, q, ctx->C, k, ctx->Ckv, 0.0f, st->a, Tk);
    const pe__band band = pe__band_of(ctx->cfg);
    for (int64_t i = 0; i < T; i++) {
        double cum = 0;
        int64_t lo = 0, hi = 0; /* the keys the query sees: its gates */
        if (i < Tb) pe__band_range(band, qoff, i, Tkb, &lo, &hi);
        for (int64_t j = Tk - 1; j >= 0; j--) {
            const int64_t e = i * Tk + j;
            const int on = lo <= j && j < hi && (!mk || mk[e]);
            st->g[e] = on ? sigmoid(scale * (double)st->a[e]) : 0.0;
            cum += st->g[e];
            st->p[e] = cum < top ? cum : top;
        }
    }
}

/* the whole score of head (t->b, t->h): the tile is the head (PE__SCORE_HEAD) */
static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h;
    const float *q = t->q, *k = t->k;
    (void)lds, (void)b, (void)h;
    (void)h;
    cope_state *st = ctx->state;
    const int64_t T = ctx->T, Tk = ctx->Tk, D = ctx->D, C = ctx->C;
    const double scale = ctx->cfg->scale;
    positions(ctx, st, b, q, k);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < Tk; j++) {
            const int64_t e = i * Tk + j;
            /* every pair, as the reference: the mask sets the masked ones to -inf after this */
            const double p = st->p[e], fl = floor(p), w = p - fl;
            const int64_t f = (int64_t)fl, c = (int64_t)ceil(p);
            double pe = ddot(q + i * C, st->Et + f * D, D);
            if (c != f) pe = (1 - w) * pe + w * ddot(q + i * C, st->Et + c * D, D);
            s[e] = (float)(scale * ((double)st->a[e] + pe));
        }
}

static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    const int64_t b = t->b, h = t->h;
    const float *q = t->q, *k = t->k;
    float *dq = t->dq, *dk = t->dk;
    (void)s_in, (void)lds, (void)b, (void)h;
    (void)h;
    cope_state *st = ctx->state;
    const int64_t T = ctx->T, Tk = ctx->Tk, D = ctx->D, C = ctx->C;
    const double scale = ctx->cfg->scale;
    const int want_table = ctx->g->dparam[POS_EMB] != NULL;
    positions(ctx, st, b, q, k);
    for (int64_t i = 0; i < T; i++) {
        const float *qi = q + i * C;
        float *dqi = dq + i * C;
        double dg = 0; /* sum_{j <= t} dp_ij, carried along the row */
        for (int64_t j = 0; j < Tk; j++) {
            const int64_t e = i * Tk + j;
            const double de = scale * (double)ds[e];
            double dp = 0;
            if (de != 0) {
                const double p = st->p[e], fl = floor(p), w = p - fl;
                const int64_t f = (int64_t)fl, c = (int64_t)ceil(p);
                const float *Ef = st->Et + f * D, *Ec = st->Et + c * D;
                if (c != f) {
                    for (int64_t d = 0; d < D; d++) dqi[d] += (float)(de * ((1 - w) * Ef[d] + w * Ec[d]));
                    dp = de * (ddot(qi, Ec, D) - ddot(qi, Ef, D));
                } else {
                    for (int64_t d = 0; d < D; d++) dqi[d] += (float)(de * Ef[d]);
                }
                if (want_table) {
                    double *dEf = st->dEt + f * D, *dEc = st->dEt + c * D;
                    const double wf = c != f ? de * (1 - w) : de, wc = c != f ? de * w : 0;
                    for (int64_t d = 0; d < D; d++) dEf[d] += wf * qi[d];
                    if (c != f)
                        for (int64_t d = 0; d < D; d++) dEc[d] += wc * qi[d];
                }
            }
            dg += dp;
            const double g = st->g[e];
            st->da[e] = (float)(de + (g > 0 ? scale * dg * g * (1 - g) : 0.0));
        }
    }
    pe__gemm(0, 0, T, D, Tk, 1.0f, st->da, Tk, k, ctx->Ckv, 1.0f, dq, C);
    pe__gemm(1, 0, Tk, D, T, 1.0f, st->da, Tk, q, C, 1.0f, dk, ctx->Ckv);
}

/* dpos_emb[d, c] += dEt[c, d], and dEt is cleared for the next backward */
static void finish_backward(pe__ctx *ctx) {
    cope_state *st = ctx->state;
    const int64_t P = st->P, D = ctx->D;
    float *dE = ctx->g->dparam[POS_EMB];
    if (dE)
        for (int64_t c = 0; c < P; c++)
            for (int64_t d = 0; d < D; d++) dE[d * P + c] += (float)st->dEt[c * D + d];
    memset(st->dEt, 0, sizeof(double) * (size_t)(P * D));
}

/* facebookresearch/RAM's CoPE takes npos = block_size + 1, the training length's positions
 * 0 .. T (a count may reach T); past it positions clamp to the last column. So pos_emb has no
 * column that training never reaches. */
static void fit_length(pe_config *cfg, int64_t length) {
    if (pe_config_has(cfg, PE_K_npos_max)) return;
    cfg->npos_max = length + 1;
    pe__config_mark(cfg, PE_K_npos_max);
}

const pe__method pe__method_cope = {
    .name = "cope",
    .reference = "Golovneva et al. 2024, Contextual Position Encoding (facebookresearch/RAM projects/cope)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "npos_max",
    .flags = PE__GQA | PE__SCORE_OWN | PE__SCORE_QK | PE__SCORE_HEAD | PE__CAUSAL_ONLY,
    .fit_length = fit_length,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .finish_backward = finish_backward,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
