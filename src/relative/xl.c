/* Transformer-XL (Dai et al. 2019; kimiyoung/transformer-xl RelPartialLearnableMultiHeadAttn):
 * segment memory and a sinusoidal relative term with two global biases.
 *   keys and values over [mems; x] (the core's memory), query i at absolute index M + i
 *   m    = M + i - j, then min(m, clamp_len) when clamp_len > 0
 *   R_m  = [sin(m w) | cos(m w)], w_t = 10000^(-2t/C)          (C wide)
 *   s_ij = scale ((q_i + r_w_bias_h) . k_j + (q_i + r_r_bias_h) . (R_m wr^T)_h)
 * causal defaults to true; with causal false m is negative above the diagonal. same_length
 * masks j <= M + i - mem_len (mem_len defaults to M). Positions are never read.
 *
 * The reference computes the position term for every (i, m) and realigns it with a
 * pad-and-shift trick that is only valid below the diagonal; here the term is gathered
 * directly: one (T, NR) product q Rk_h^T per (b, h) over the NR distinct (clamped)
 * distances, then s_ij picks column m(i, j). Rk = R wr^T is built once per forward. */
#include "../internal.h"

enum { R_W_BIAS, R_R_BIAS, WR };

typedef struct xl_state {
    int64_t lo, hi; /* distances of the table rows: lo .. hi (hi already clamped) */
    int64_t NR;     /* hi - lo + 1 */
    float *R;       /* (NR, C) R_m */
    float *Rk;      /* (NR, C) R wr^T; head h owns columns h*D .. h*D+D-1 */
    float *dRk;     /* (NR, C) gradient of Rk, accumulated by score_mod_backward */
    float *G;       /* (T, NR) scratch of score_mod: q_i . Rk_h[r], then its gradient g */
    float *uk;      /* (Tk) r_w_bias_h . k_j */
    float *vr;      /* (NR) r_r_bias_h . Rk_h[r], then gs */
} xl_state;

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H, (void)D;
    if (!pe_config_has(cfg, PE_K_causal)) cfg->causal = 1;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    if ((H * D) % 2)
        return pe_error(err, PE_ETENSOR, "width C=%lld must be even (xl's [sin | cos] R)",
                        (long long)(H * D));
    if (pe_config_has(cfg, PE_K_mem_len) && cfg->mem_len < 0)
        return pe_error(err, PE_EKEY, "key 'mem_len': %lld must be >= 0", (long long)cfg->mem_len);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg;
    s[R_W_BIAS] = (pe_param_spec){"r_w_bias", 2, {H, D}, 0, {0}};
    s[R_R_BIAS] = (pe_param_spec){"r_r_bias", 2, {H, D}, 0, {0}};
    s[WR] = (pe_param_spec){"wr", 2, {H * D, H * D}, 0, {0}};
    return 3;
}

static void release(pe__ctx *ctx) {
    xl_state *st = ctx->state;
    if (st) free(st->R), free(st->Rk), free(st->dRk), free(st->G);
    free(st);
    ctx->state = NULL;
}

/* The table covers every (i, j) of the (T, Tk) score, masked or not, so the gather never
 * leaves it: m = i - j over each row's query and key positions (the layer's queries sit at
 * M + t and its keys at 0 .. M+T-1, so m runs from -(T-1) to M + T - 1), clamped above. */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t C = ctx->C, clamp = ctx->cfg->clamp_len;
    double lo = INFINITY, hi = -INFINITY; /* double: no overflow for any positions */
    for (int64_t b = 0; b < ctx->B; b++) {
        int64_t qmin = INT64_MAX, qmax = INT64_MIN, kmin = INT64_MAX, kmax = INT64_MIN;
        for (int64_t t = 0; t < ctx->T; t++) {
            int64_t p = ctx->pos[b * ctx->T + t];
            qmin = p < qmin ? p : qmin, qmax = p > qmax ? p : qmax;
        }
        for (int64_t u = 0; u < ctx->Tk; u++) {
            int64_t p = ctx->kpos[b * ctx->Tk + u];
            kmin = p < kmin ? p : kmin, kmax = p > kmax ? p : kmax;
        }
        lo = fmin(lo, (double)qmin - (double)kmax), hi = fmax(hi, (double)qmax - (double)kmin);
    }
    if (clamp > 0 && (double)clamp < hi) hi = (double)clamp;
    if (lo > hi) lo = hi; /* every distance clamped */
    if ((hi - lo + 1) * (double)C > (double)(1 << 27))
        return pe_error(err, PE_EPOS, "positions: distances %.0f .. %.0f need a %.0f x %lld table, past xl's limit of 2^27 "
                                      "entries (use clamp_len)", lo, hi, hi - lo + 1, (long long)C);
    xl_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory");
    ctx->state = st;
    st->lo = (int64_t)lo;
    st->hi = (int64_t)hi;
    st->NR = st->hi - st->lo + 1;
    size_t n = (size_t)(st->NR * C);
    st->R = malloc(sizeof(float) * n);
    st->Rk = malloc(sizeof(float) * n);
    st->dRk = calloc(n, sizeof(float));
    st->G = malloc(sizeof(float) * (size_t)(ctx->T * st->NR + ctx->Tk + st->NR));
    if (st->G) st->uk = st->G + ctx->T * st->NR, st->vr = st->uk + ctx->Tk;
    double *row = malloc(sizeof(double) * C);
    if (!st->R || !st->Rk || !st->dRk || !st->G || !row) {
        free(row);
        return pe_error(err, PE_ENOMEM, "out of memory for xl's %lld x %lld distance table",
                        (long long)st->NR, (long long)C);
    }
    for (int64_t r = 0; r < st->NR; r++) {
        pe__sinusoidal_row(row, (double)(st->lo + r), C, PE_SIN_CONCAT, 10000.0);
        for (int64_t c = 0; c < C; c++) st->R[r * C + c] = (float)row[c];
    }
    free(row);
    pe__gemm(0, 1, st->NR, C, C, 1.0f, st->R, C, ctx->w->param[WR], C, 0.0f, st->Rk, C);
    return PE_OK;
}

/* Row of the table for query i, key j of row b: m = pos_i - kpos_j. */
static inline int64_t dist_index(const pe__ctx *ctx, const xl_state *st, int64_t b, int64_t i, int64_t j) {
    int64_t m = ctx->pos[b * ctx->T + i] - ctx->kpos[b * ctx->Tk + j];
    return (m < st->hi ? m : st->hi) - st->lo;
}

/* the whole score of head (t->b, t->h): the tile is the head (PE__SCORE_HEAD) */
static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h;
    const float *q = t->q, *k = t->k;
    (void)lds, (void)b, (void)h;
    const xl_state *st = ctx->state;
    const int64_t T = ctx->T, Tk = ctx->Tk, D = ctx->D, C = ctx->C, NR = st->NR;
    const float *u = ctx->w->param[R_W_BIAS] + h * D, *v = ctx->w->param[R_R_BIAS] + h * D;
    const float *Rk = st->Rk + h * D; /* (NR, D) row stride C */
    const float scale = (float)ctx->cfg->scale;
    float *G = st->G, *uk = st->uk, *vr = st->vr; /* (T, NR), (Tk), (NR) */
    pe__score_dot_forward(ctx, q, k, s);
    pe__gemm(0, 1, T, NR, D, 1.0f, q, C, Rk, C, 0.0f, G, NR);
    for (int64_t j = 0; j < Tk; j++) {
        float a = 0;
        for (int64_t d = 0; d < D; d++) a += u[d] * k[j * ctx->Ckv + d];
        uk[j] = a;
    }
    for (int64_t r = 0; r < NR; r++) {
        float a = 0;
        for (int64_t d = 0; d < D; d++) a += v[d] * Rk[r * C + d];
        vr[r] = a;
    }
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < Tk; j++) {
            int64_t r = dist_index(ctx, st, b, i, j);
            s[i * Tk + j] += scale * (uk[j] + G[i * NR + r] + vr[r]);
        }
}

/* forward was s = scale (q_i.k_j + u.k_j + q_i.Rk[r_ij] + v.Rk[r_ij]) with u = r_w_bias_h,
 * v = r_r_bias_h, so now, with c_j = scale sum_i ds_ij and g[i, r] = scale sum_{j: r_ij = r} ds_ij
 * and gs[r] = sum_i g[i, r]:
 *   dq_i += scale sum_j ds_ij k_j + g[i] Rk      dk_j += scale sum_i ds_ij q_i + c_j u
 *   du   += sum_j c_j k_j                        dv   += sum_r gs[r] Rk[r]
 *   dRk[r] += sum_i g[i, r] q_i + gs[r] v        (to wr in finish_backward) */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    const int64_t b = t->b, h = t->h;
    const float *q = t->q, *k = t->k;
    float *dq = t->dq, *dk = t->dk;
    (void)s_in, (void)lds, (void)b, (void)h;
    xl_state *st = ctx->state;
    const int64_t T = ctx->T, Tk = ctx->Tk, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv, NR = st->NR;
    const float *u = ctx->w->param[R_W_BIAS] + h * D, *v = ctx->w->param[R_R_BIAS] + h * D;
    const float *Rk = st->Rk + h * D;
    float *du = ctx->g->dparam[R_W_BIAS] ? ctx->g->dparam[R_W_BIAS] + h * D : NULL;
    float *dv = ctx->g->dparam[R_R_BIAS] ? ctx->g->dparam[R_R_BIAS] + h * D : NULL;
    float *dRk = st->dRk + h * D;
    const float scale = (float)ctx->cfg->scale;
    float *g = st->G, *gs = st->vr; /* (T, NR), (NR) */
    memset(g, 0, sizeof(float) * T * NR), memset(gs, 0, sizeof(float) * NR);
    pe__score_dot_backward(ctx, ds, q, k, dq, dk);
    for (int64_t j = 0; j < Tk; j++) {
        float c = 0;
        for (int64_t i = 0; i < T; i++) c += ds[i * Tk + j];
        c *= scale;
        for (int64_t d = 0; d < D; d++) {
            dk[j * Ckv + d] += c * u[d];
            if (du) du[d] += c * k[j * Ckv + d];
        }
    }
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < Tk; j++) g[i * NR + dist_index(ctx, st, b, i, j)] += scale * ds[i * Tk + j];
    for (int64_t i = 0; i < T; i++)
        for (int64_t r = 0; r < NR; r++) gs[r] += g[i * NR + r];
    pe__gemm(0, 0, T, D, NR, 1.0f, g, NR, Rk, C, 1.0f, dq, C);
    pe__gemm(1, 0, NR, D, T, 1.0f, g, NR, q, C, 1.0f, dRk, C);
    for (int64_t r = 0; r < NR; r++)
        for (int64_t d = 0; d < D; d++) {
            dRk[r * C + d] += gs[r] * v[d];
            if (dv) dv[d] += gs[r] * Rk[r * C + d];
        }
}

/* forward was Rk = R wr^T, so now: dwr += dRk^T R. dRk is cleared for the next backward. */
static void finish_backward(pe__ctx *ctx) {
    xl_state *st = ctx->state;
    const int64_t C = ctx->C;
    float *dwr = ctx->g->dparam[WR];
    if (dwr) pe__gemm(1, 0, C, C, st->NR, 1.0f, st->dRk, C, st->R, C, 1.0f, dwr, C);
    memset(st->dRk, 0, sizeof(float) * st->NR * C);
}

/* same_length: every query sees at most mem_len keys before itself (token indices: query i
 * is key qoff + i of its row; mem_len defaults to qoff, the layer's memory length). */
static int mask(const pe__ctx *ctx, int64_t b, int64_t i, int64_t j) {
    if (!ctx->cfg->same_length) return 0;
    int64_t T, Tk, qoff;
    pe__row_lens(ctx, b, &T, &Tk, &qoff);
    int64_t mem_len = ctx->cfg->mem_len < 0 ? qoff : ctx->cfg->mem_len;
    return j <= qoff + i - mem_len;
}

const pe__method pe__method_xl = {
    .name = "xl",
    .reference = "Dai et al. 2019, Transformer-XL (kimiyoung/transformer-xl)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "clamp_len same_length mem_len",
    .flags = PE__MEMORY | PE__SCORE_OWN | PE__SCORE_QK | PE__SCORE_HEAD,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .finish_backward = finish_backward,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
    .mask = mask,
};
