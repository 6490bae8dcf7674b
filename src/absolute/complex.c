/* Complex-order embeddings (Wang et al. 2020, iclr-complex-order/complex-order, the translation
 * model): a word is a wave over positions. Token ids replace x:
 *   a   = freq[id] p + phase[id]                 (per dimension, double)
 *   re  = amp[id] cos(a),  im = amp[id] sin(a)   (B, T, C)
 * Both parts go through the same real projections (biases included), and the score is the
 * magnitude of the unconjugated complex product:
 *   Sre = Qre Kre^T - Qim Kim^T,  Sim = Qre Kim^T + Qim Kre^T,  s = scale |S|
 * scale 1/sqrt(2D) by default (the reference's temperature sqrt(2 d_k)). One softmax weights
 * both value streams; y and y_imag share wo and bo. The layer is this file's own walk
 * (walk_forward, walk_backward): the core's positions, masks and softmax, two streams of
 * everything else. No GQA, no memory: Tk = T, Ckv = C.
 *
 * |S| is not differentiable at S = 0: there the gradient is taken as 0 (the smallest
 * subgradient), so a zero score gives no NaN. Elsewhere ds/dSre = scale Sre / |S|, formed as a
 * ratio of magnitude at most 1 so that tiny |S| cannot overflow. */
#include "../internal.h"

enum { AMP, FREQ, PHASE };

/* What the walk keeps for backward, one block: the two streams' x', q, k, v, o (B, T, C) and
 * the probabilities (B, H, T, T). */
typedef struct complex_state {
    float *buf;
    float *xe, *xi, *q, *qi, *k, *ki, *v, *vi, *o, *oi, *p;
    float *prod; /* (2, T, T) scratch of the score hooks: Sre, Sim or their gradients */
} complex_state;

static void release(pe__ctx *ctx) {
    complex_state *st = ctx->state;
    if (st) free(st->buf);
    free(st);
    ctx->state = NULL;
}

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_has(cfg, PE_K_scale)) cfg->scale = 1.0 / sqrt(2.0 * (double)D);
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg;
    s[AMP] = (pe_param_spec){"amp", 2, {-1, H * D}, 0, {PE_INIT_NORMAL, 1, 0}};
    s[FREQ] = (pe_param_spec){"freq", 2, {-1, H * D}, 0, {PE_INIT_COMPLEX_FREQ, 0, 0}};
    s[PHASE] = (pe_param_spec){"phase", 2, {-1, H * D}, 1, {PE_INIT_CONST, 0, 0}};
    for (int i = AMP; i <= PHASE; i++) s[i].token_rows = 1; /* the word embeddings: a row per token id */
    return 3;
}

/* The tables must have the same rows V, and every id must be one of them. */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t *rows = ctx->w->param_rows;
    int64_t V = rows[AMP];
    if (rows[FREQ] != V)
        return pe_error(err, PE_ETENSOR, "tensor 'freq': %lld rows, expected %lld (the rows of amp)",
                        (long long)rows[FREQ], (long long)V);
    if (ctx->w->param[PHASE] && rows[PHASE] != V)
        return pe_error(err, PE_ETENSOR, "tensor 'phase': %lld rows, expected %lld (the rows of amp)",
                        (long long)rows[PHASE], (long long)V);
    if (!ctx->ids) return pe_error(err, PE_ETENSOR, "tensor 'ids' is missing (method complex reads token ids)");
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++)
        if (ctx->ids[bt] < 0 || ctx->ids[bt] >= V)
            return pe_error(err, PE_ETENSOR, "tensor 'ids': id %lld is outside the %lld rows of amp",
                            (long long)ctx->ids[bt], (long long)V);
    const int64_t n = ctx->B * ctx->T * ctx->C;
    complex_state *st = calloc(1, sizeof *st);
    if (st) st->buf = malloc(sizeof(float) * (size_t)(10 * n + ctx->B * ctx->H * ctx->T * ctx->T + 2 * ctx->T * ctx->T));
    if (!st || !st->buf) {
        free(st);
        return pe_error(err, PE_ENOMEM, "out of memory for the complex layer's activations");
    }
    float *b = st->buf;
    float **part[] = {&st->xe, &st->xi, &st->q, &st->qi, &st->k, &st->ki, &st->v, &st->vi, &st->o, &st->oi};
    for (int i = 0; i < 10; i++) *part[i] = b + i * n;
    st->p = b + 10 * n;
    st->prod = st->p + ctx->B * ctx->H * ctx->T * ctx->T;
    ctx->state = st;
    return PE_OK;
}

/* The angle of token bt, dimension c: freq p + phase, in double so large positions stay exact. */
static inline double angle(const pe__ctx *ctx, int64_t row, int64_t bt) {
    const float *phase = ctx->w->param[PHASE];
    return (double)ctx->w->param[FREQ][row] * (double)ctx->pos[bt] + (phase ? (double)phase[row] : 0.0);
}

static void embed_complex(pe__ctx *ctx, float *re, float *im) {
    const int64_t C = ctx->C;
    const float *amp = ctx->w->param[AMP];
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++)
        for (int64_t c = 0; c < C; c++) {
            int64_t row = ctx->ids[bt] * C + c;
            double a = angle(ctx, row, bt), r = amp[row];
            re[bt * C + c] = (float)(r * cos(a));
            im[bt * C + c] = (float)(r * sin(a));
        }
}

/* forward was re = r cos(a), im = r sin(a), a = w p + theta, so now:
 * dr += dre cos a + dim sin a;  da = r (dim cos a - dre sin a);  dw += da p;  dtheta += da */
static void embed_complex_backward(pe__ctx *ctx, const float *dre, const float *dim) {
    const int64_t C = ctx->C;
    const float *amp = ctx->w->param[AMP];
    float *damp = ctx->g->dparam[AMP], *dfreq = ctx->g->dparam[FREQ];
    float *dphase = ctx->w->param[PHASE] ? ctx->g->dparam[PHASE] : NULL;
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++)
        for (int64_t c = 0; c < C; c++) {
            int64_t row = ctx->ids[bt] * C + c;
            double a = angle(ctx, row, bt), ca = cos(a), sa = sin(a);
            double gr = dre[bt * C + c], gi = dim[bt * C + c];
            double da = (double)amp[row] * (gi * ca - gr * sa);
            if (damp) damp[row] += (float)(gr * ca + gi * sa);
            if (dfreq) dfreq[row] += (float)(da * (double)ctx->pos[bt]);
            if (dphase) dphase[row] += (float)da;
        }
}

/* Sre, Sim (T, T) of one (b, h). */
static void complex_product(const pe__ctx *ctx, const float *q, const float *k, const float *qi,
                            const float *ki, float *sre, float *sim) {
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C;
    pe__gemm(0, 1, T, T, D, 1.0f, q, C, k, C, 0.0f, sre, T);
    pe__gemm(0, 1, T, T, D, -1.0f, qi, C, ki, C, 1.0f, sre, T);
    pe__gemm(0, 1, T, T, D, 1.0f, q, C, ki, C, 0.0f, sim, T);
    pe__gemm(0, 1, T, T, D, 1.0f, qi, C, k, C, 1.0f, sim, T);
}

static void score_complex_forward(pe__ctx *ctx, int64_t b, int64_t h, const float *q,
                                  const float *k, const float *q_im, const float *k_im, float *s) {
    (void)b, (void)h;
    const int64_t T = ctx->T;
    const complex_state *st = ctx->state;
    float *sre = st->prod, *sim = sre + T * T;
    complex_product(ctx, q, k, q_im, k_im, sre, sim);
    for (int64_t e = 0; e < T * T; e++)
        s[e] = (float)(ctx->cfg->scale * sqrt((double)sre[e] * sre[e] + (double)sim[e] * sim[e]));
}

/* forward was s = scale |S|, S = Q K^T with complex Q, K (no conjugate), so now, with
 * gre = ds scale Sre/|S| and gim = ds scale Sim/|S| (both 0 where |S| = 0):
 *   dQre += gre Kre + gim Kim    dKre += gre^T Qre + gim^T Qim
 *   dQim += gim Kre - gre Kim    dKim += gim^T Qre - gre^T Qim
 * S is recomputed rather than kept: it costs what the forward did and saves 2 (B, H, T, T). */
static void score_complex_backward(pe__ctx *ctx, int64_t b, int64_t h, const float *ds,
                                   const float *q, const float *k, const float *q_im,
                                   const float *k_im, float *dq, float *dk, float *dq_im,
                                   float *dk_im) {
    (void)b, (void)h;
    const int64_t T = ctx->T, D = ctx->D, C = ctx->C;
    const complex_state *st = ctx->state;
    float *gre = st->prod, *gim = gre + T * T;
    complex_product(ctx, q, k, q_im, k_im, gre, gim);
    for (int64_t e = 0; e < T * T; e++) {
        double re = gre[e], im = gim[e], m = sqrt(re * re + im * im);
        double g = m > 0 ? ctx->cfg->scale * ds[e] : 0.0;
        gre[e] = m > 0 ? (float)(g * (re / m)) : 0.0f;
        gim[e] = m > 0 ? (float)(g * (im / m)) : 0.0f;
    }
    pe__gemm(0, 0, T, D, T, 1.0f, gre, T, k, C, 1.0f, dq, C);
    pe__gemm(0, 0, T, D, T, 1.0f, gim, T, k_im, C, 1.0f, dq, C);
    pe__gemm(1, 0, T, D, T, 1.0f, gre, T, q, C, 1.0f, dk, C);
    pe__gemm(1, 0, T, D, T, 1.0f, gim, T, q_im, C, 1.0f, dk, C);
    pe__gemm(0, 0, T, D, T, 1.0f, gim, T, k, C, 1.0f, dq_im, C);
    pe__gemm(0, 0, T, D, T, -1.0f, gre, T, k_im, C, 1.0f, dq_im, C);
    pe__gemm(1, 0, T, D, T, 1.0f, gim, T, q, C, 1.0f, dk_im, C);
    pe__gemm(1, 0, T, D, T, -1.0f, gre, T, q_im, C, 1.0f, dk_im, C);
}

/* The layer: both parts embedded and projected, one softmax of scale |S| (causal and masks
 * from the core), both value streams, both outputs through wo. */
static pe_status walk_forward(pe__ctx *ctx, float *y, float *y_im, float *scores, float *probs, pe_err *err) {
    complex_state *st = ctx->state;
    const pe_weights *w = ctx->w;
    const int64_t B = ctx->B, T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C;
    embed_complex(ctx, st->xe, st->xi);
    pe__linear_forward(st->q, st->xe, w->wq, w->bq, B * T, C, C);
    pe__linear_forward(st->k, st->xe, w->wk, w->bk, B * T, C, C);
    pe__linear_forward(st->v, st->xe, w->wv, w->bv, B * T, C, C);
    pe__linear_forward(st->qi, st->xi, w->wq, w->bq, B * T, C, C);
    pe__linear_forward(st->ki, st->xi, w->wk, w->bk, B * T, C, C);
    pe__linear_forward(st->vi, st->xi, w->wv, w->bv, B * T, C, C);
    float *s = scores ? NULL : malloc(sizeof(float) * T * T);
    if (!scores && !s) return pe_error(err, PE_ENOMEM, "out of memory for the %lld x %lld scores", (long long)T, (long long)T);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t at = b * T * C + h * D;
            float *sh = scores ? scores + (b * H + h) * T * T : s, *p = st->p + (b * H + h) * T * T;
            score_complex_forward(ctx, b, h, st->q + at, st->k + at, st->qi + at, st->ki + at, sh);
            int64_t bad = pe__mask_scores(ctx, NULL, b, sh);
            if (bad >= 0) {
                free(s);
                return pe_error(err, PE_EINVAL, "query %lld has every key masked", (long long)bad);
            }
            pe__softmax_forward(sh, p, T, T, -INFINITY);
            pe__gemm(0, 0, T, D, T, 1.0f, p, T, st->v + at, C, 0.0f, st->o + at, C);
            pe__gemm(0, 0, T, D, T, 1.0f, p, T, st->vi + at, C, 0.0f, st->oi + at, C);
        }
    free(s);
    pe__linear_forward(y, st->o, w->wo, w->bo, B * T, C, C);
    pe__linear_forward(y_im, st->oi, w->wo, w->bo, B * T, C, C);
    if (probs) memcpy(probs, st->p, sizeof(float) * B * H * T * T);
    return PE_OK;
}

/* Its reverse: dy, dy_im (either NULL: zero) back to the projections and the tables. */
static pe_status walk_backward(pe__ctx *ctx, const float *dy, const float *dy_im, pe_err *err) {
    const complex_state *st = ctx->state;
    const pe_weights *w = ctx->w;
    pe_grads *g = ctx->g;
    const int64_t B = ctx->B, T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C, n = B * T * C;
    /* do, dq, dk, dv and dx' of each stream, a zero dy, and (T, T) dp, ds */
    float *work = calloc((size_t)(11 * n + 2 * T * T), sizeof(float));
    if (!work) return pe_error(err, PE_ENOMEM, "out of memory for %lld floats of gradients", (long long)(11 * n));
    float *dO = work, *dOi = work + n, *dq = work + 2 * n, *dqi = work + 3 * n, *dk = work + 4 * n;
    float *dki = work + 5 * n, *dv = work + 6 * n, *dvi = work + 7 * n, *dx = work + 8 * n, *dxi = work + 9 * n;
    float *zero = work + 10 * n, *dp = work + 11 * n, *ds = dp + T * T;
    pe__linear_backward(dO, 0, g->dwo, g->dbo, dy ? dy : zero, st->o, w->wo, B * T, C, C);
    pe__linear_backward(dOi, 0, g->dwo, g->dbo, dy_im ? dy_im : zero, st->oi, w->wo, B * T, C, C);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t at = b * T * C + h * D;
            const float *p = st->p + (b * H + h) * T * T;
            /* o = p v, o_im = p v_im: dp = do v^T + do_im v_im^T, dv += p^T do, dv_im += p^T do_im */
            pe__gemm(0, 1, T, T, D, 1.0f, dO + at, C, st->v + at, C, 0.0f, dp, T);
            pe__gemm(0, 1, T, T, D, 1.0f, dOi + at, C, st->vi + at, C, 1.0f, dp, T);
            pe__gemm(1, 0, T, D, T, 1.0f, p, T, dO + at, C, 1.0f, dv + at, C);
            pe__gemm(1, 0, T, D, T, 1.0f, p, T, dOi + at, C, 1.0f, dvi + at, C);
            pe__softmax_backward(p, dp, ds, T, T);
            score_complex_backward(ctx, b, h, ds, st->q + at, st->k + at, st->qi + at, st->ki + at, dq + at,
                                   dk + at, dqi + at, dki + at);
        }
    const float *const dstream[2][3] = {{dq, dk, dv}, {dqi, dki, dvi}};
    const float *const xin[2] = {st->xe, st->xi};
    float *const dxs[2] = {dx, dxi};
    for (int r = 0; r < 2; r++) { /* x' W^T + b of both streams: the same weights */
        pe__linear_backward(dxs[r], 0, g->dwq, g->dbq, dstream[r][0], xin[r], w->wq, B * T, C, C);
        pe__linear_backward(dxs[r], 1, g->dwk, g->dbk, dstream[r][1], xin[r], w->wk, B * T, C, C);
        pe__linear_backward(dxs[r], 1, g->dwv, g->dbv, dstream[r][2], xin[r], w->wv, B * T, C, C);
    }
    embed_complex_backward(ctx, dx, dxi);
    free(work);
    return PE_OK;
}

const pe__method pe__method_complex = {
    .name = "complex",
    .reference = "Wang et al. 2020, complex-order word embeddings (iclr-complex-order)",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "",
    .flags = PE__COMPLEX | PE__INPUT,
    .defaults = defaults,
    .params = params,
    .prepare = prepare,
    .release = release,
    .walk_forward = walk_forward,
    .walk_backward = walk_backward,
    .embed_pair = embed_complex,
};
