/* FoPE, Fourier Position Embedding (Hua et al. 2024; the form of vLLM's
 * rotary_embedding/fope.py). RoPE treats each pair of dims as one frequency; FoPE gives each
 * of the first F pairs a Fourier series over the kept frequencies instead:
 *   c[p, h, d] = sum_u cos(p w_u) fope_cos[h, u, d],   s[p, h, d] = sum_u sin(p w_u) fope_sin[h, u, d]
 * with w_u = rope_base^(-2u/D), u < F, and q and k (kv head h; a query head reads its group's)
 * transformed pair by pair in the half layout, (x1, x2) -> (x1 c - x2 s, x2 c + x1 s); pairs
 * d >= F pass through (c = 1, s = 0). F is fope_num_freq, or the frequencies above 2 pi /
 * max_position_embeddings (the paper's clipping: a frequency that does not complete a period
 * in the training length is zeroed), or every pair. With fope_cos = fope_sin = the identity it
 * is RoPE on the kept pairs, which is where the tensors start (plus N(0, 0.02)).
 *
 * Each row's (c, s) per kv head (one for all heads without fope_sep_head) is a table like
 * rope's, built in double from the float tensors and rounded once; the transformation is rope's
 * kernel with that table (its transpose, sin negated, is the backward's), one kv head's group
 * of heads at a time. The tensors' gradients: for y = M(c, s) x, dL/dc = dy1 x1 + dy2 x2 and
 * dL/ds = dy2 x1 - dy1 x2 per pair, summed over the heads that share a table and over q and k,
 * then dfope_cos[h, u, d] += cos(p w_u) dL/dc[p, h, d] (fope_sin with sin). The rows' cos and
 * sin (p w_u) are kept from forward for backward. */
#include <math.h>

#include "rotary.h"

enum { COS, SIN };

typedef struct {
    float *cs;    /* (Hc, B*T, D/2, 2) c, s of the queries, Hc tables (kv_heads, or 1: tables()) */
    float *cs_k;  /* (Hc, B*Tk, D/2, 2) of the keys, or cs when the keys are the queries */
    double *cw;   /* (B*T, 2F) cos(p w_u), then sin(p w_u), of the queries' positions */
    double *cw_k; /* (B*Tk, 2F) of the keys', or cw */
    float *cwf;   /* cw rounded to float: the coefficients' gradient is a float GEMM over it */
    float *cwf_k; /* cw_k's, or cwf */
    double *w;    /* (F) the kept frequencies */
    float *g;     /* (2, n or nk, Hc, F) dL/dc, dL/ds per row and table, summed by backward */
    double *f;    /* (2, Hc, F, F) fope_cos, fope_sin in double */
    double *acc;  /* (2F) one row's dL/dc, dL/ds as row_grads sums them */
    /* kept between the layer's calls (PE__PERSIST): the memory of the above, and what the
     * tables were built from (the same positions and tensors reuse them) */
    pe__scratch tab_q, tab_k, rows_q, rows_k, grad, built;
} fope_state;

/* F: the pairs that carry a Fourier series */
static int64_t n_freq(const pe_config *cfg, int64_t D) {
    if (pe_config_has(cfg, PE_K_fope_num_freq)) return cfg->fope_num_freq;
    int64_t F = D / 2;
    if (pe_config_has(cfg, PE_K_max_position_embeddings)) {
        F = 0;
        for (int64_t u = 0; u < D / 2; u++)
            F += pow(cfg->rope_base, -2.0 * (double)u / (double)D) > 2 * PE_PI / (double)cfg->max_position_embeddings;
    }
    return F;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H;
    if (D % 2) return pe_error(err, PE_EKEY, "method fope: head_dim %lld is odd (pairs of dims)", (long long)D);
    if (!(cfg->rope_base > 1)) return pe_error(err, PE_EKEY, "key 'rope_base' must be > 1");
    if (pe_config_has(cfg, PE_K_max_position_embeddings) && cfg->max_position_embeddings < 1)
        return pe_error(err, PE_EKEY, "key 'max_position_embeddings' must be >= 1");
    const int64_t F = n_freq(cfg, D);
    if (F < 1 || F > D / 2)
        return pe_error(err, PE_EKEY, "key 'fope_num_freq': %lld frequencies, expected 1 .. head_dim / 2 (%lld)%s",
                        (long long)F, (long long)(D / 2),
                        pe_config_has(cfg, PE_K_fope_num_freq) ? "" : " (max_position_embeddings keeps none)");
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)H;
    const int64_t F = n_freq(cfg, D), Hc = cfg->fope_sep_head ? cfg->kv_heads : 1;
    s[COS] = (pe_param_spec){"fope_cos", 3, {Hc, F, F}, 0, {PE_INIT_EYE_NORMAL, 0.02, 0}};
    s[SIN] = (pe_param_spec){"fope_sin", 3, {Hc, F, F}, 0, {PE_INIT_EYE_NORMAL, 0.02, 0}};
    return 2;
}

/* the tables: one per kv head with fope_sep_head, else one for all */
static int64_t tables(const pe__ctx *ctx) { return ctx->cfg->fope_sep_head ? ctx->Hkv : 1; }

/* cw (n, 2F) = cos, sin (p w_u) of n rows at pos, then cs (Hc, n, D/2, 2): table hc's (c, s)
 * = (cw fope_cos[hc], sw fope_sin[hc]) per row (products in double), (1, 0) past F */
static void table(const pe__ctx *ctx, const fope_state *st, const int64_t *pos, int64_t n, double *cw, float *cwf,
                  float *cs) {
    const int64_t F = n_freq(ctx->cfg, ctx->D), half = ctx->D / 2, Hc = tables(ctx);
    const pe__sincos_fn sincos = pe__sincos_kernel(ctx->run);
    for (int64_t r = 0; r < n; r++) {
        double *a = cw + r * 2 * F;
        for (int64_t u = 0; u < F; u++) a[u] = (double)pos[r] * st->w[u];
        sincos(a, a + F, a, F); /* in place: the sines go to the second half first */
        for (int64_t u = 0; u < 2 * F; u++) cwf[r * 2 * F + u] = (float)a[u];
    }
    double *c = (double *)st->g, *s = c + n * F; /* backward's scratch, free until then */
    for (int64_t hc = 0; hc < Hc; hc++) {
        pe__dgemm(0, 0, n, F, F, cw, 2 * F, st->f + hc * F * F, F, c, F);
        pe__dgemm(0, 0, n, F, F, cw + F, 2 * F, st->f + (Hc + hc) * F * F, F, s, F);
        for (int64_t r = 0; r < n; r++) {
            float *e = cs + (hc * n + r) * half * 2;
            for (int64_t d = 0; d < half; d++)
                e[2 * d] = d < F ? (float)c[r * F + d] : 1.0f, e[2 * d + 1] = d < F ? (float)s[r * F + d] : 0.0f;
        }
    }
}

static void release(pe__ctx *ctx) {
    fope_state *st = ctx->state;
    free(st->tab_q.p), free(st->tab_k.p), free(st->rows_q.p), free(st->rows_k.p), free(st->grad.p), free(st->built.p);
    free(st->w), free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    ctx->transforms = ctx->rotates_from = PE__TQ | PE__TK; /* whole heads: from the caller's q, k too */
    const int64_t half = ctx->D / 2, n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, F = n_freq(ctx->cfg, ctx->D);
    const int64_t Hc = tables(ctx);
    const int shared = ctx->kpos == ctx->pos;
    const int64_t rows = n > nk ? n : nk;
    fope_state *st = ctx->state ? ctx->state : calloc(1, sizeof *st); /* the layer's last tables, or new */
    ctx->state = st;
    if (st && !st->w && (st->w = malloc(sizeof(double) * (size_t)(3 * F + 2 * Hc * F * F)))) { /* the layer's shape alone */
        st->f = st->w + F, st->acc = st->f + 2 * Hc * F * F;
        for (int64_t u = 0; u < F; u++) st->w[u] = pow(ctx->cfg->rope_base, -2.0 * (double)u / (double)ctx->D);
    }
    if (st) st->cs = pe__scratch_get(&st->tab_q, (size_t)(Hc * n * half * 2));
    if (st) st->cs_k = shared ? st->cs : pe__scratch_get(&st->tab_k, (size_t)(Hc * nk * half * 2));
    /* cw's doubles in float slots, then cwf */
    if (st) st->cw = (double *)pe__scratch_get(&st->rows_q, (size_t)(3 * n * 2 * F));
    if (st) st->cw_k = shared ? st->cw : (double *)pe__scratch_get(&st->rows_k, (size_t)(3 * nk * 2 * F));
    if (st) st->cwf = st->cw ? (float *)(st->cw + n * 2 * F) : NULL;
    if (st) st->cwf_k = st->cw_k ? (float *)(st->cw_k + nk * 2 * F) : NULL;
    /* the gradient's 2 Hc rows F floats, and table's 2 n F doubles before backward needs them */
    if (st) st->g = pe__scratch_get(&st->grad, (size_t)(2 * 2 * Hc * rows * F));
    if (!st || !st->w || !st->cs || !st->cs_k || !st->cw || !st->cw_k || !st->g) {
        if (st) release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the fope tables");
    }
    const pe__bytes from[] = {{&n, sizeof n},
                              {&nk, sizeof nk},
                              {&shared, sizeof shared},
                              {ctx->w->param[COS], sizeof(float) * (size_t)(Hc * F * F)},
                              {ctx->w->param[SIN], sizeof(float) * (size_t)(Hc * F * F)},
                              {ctx->pos, sizeof(int64_t) * (size_t)n},
                              {ctx->kpos, shared ? 0 : sizeof(int64_t) * (size_t)nk}};
    if (pe__inputs_same(&st->built, from, 7)) return PE_OK;
    for (int64_t e = 0; e < Hc * F * F; e++)
        st->f[e] = ctx->w->param[COS][e], st->f[Hc * F * F + e] = ctx->w->param[SIN][e];
    table(ctx, st, ctx->pos, n, st->cw, st->cwf, st->cs);
    if (!shared) table(ctx, st, ctx->kpos, nk, st->cw_k, st->cwf_k, st->cs_k);
    return PE_OK;
}

/* n rows (stride ld) of nh heads per kv head from x into y (y == x: in place), each kv head's
 * group by its table (all heads at once by one table without fope_sep_head); sign -1: back */
static void transform(const pe__ctx *ctx, float *y, const float *x, int64_t n, int64_t ld, int64_t nh, const float *cs,
                      float sign) {
    const int64_t D = ctx->D;
    if (tables(ctx) == 1) {
        pe__rope_rotate_from(ctx->run, y, x, n, ld, nh * ctx->Hkv, D, D, PE_ROPE_HALF, cs, sign);
        return;
    }
    for (int64_t h = 0; h < ctx->Hkv; h++)
        pe__rope_rotate_from(ctx->run, y + h * nh * D, x + h * nh * D, n, ld, nh, D, D, PE_ROPE_HALF,
                             cs + h * n * (D / 2) * 2, sign);
}

/* q, k from ctx's q_src, k_src where set (prepare's rotates_from), else in place */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    (void)v;
    const fope_state *st = ctx->state;
    if (q) transform(ctx, q, ctx->q_src ? ctx->q_src : q, ctx->B * ctx->T, ctx->C, ctx->H / ctx->Hkv, st->cs, 1.0f);
    if (k) transform(ctx, k, ctx->k_src ? ctx->k_src : k, ctx->B * ctx->Tk, ctx->Ckv, 1, st->cs_k, 1.0f);
}

/* one table's heads of one row (nh of them, D apart from x1, g1) added into dc, ds */
static void pair_sums(double *dc, double *ds, const float *x1, const float *g1, int64_t nh, int64_t D, int64_t F) {
    for (int64_t j = 0; j < nh; j++, x1 += D, g1 += D) {
        const float *x2 = x1 + D / 2, *g2 = g1 + D / 2;
        for (int64_t d = 0; d < F; d++) {
            dc[d] += (double)g1[d] * x1[d] + (double)g2[d] * x2[d];
            ds[d] += (double)g2[d] * x1[d] - (double)g1[d] * x2[d];
        }
    }
}

/* dL/dc, dL/ds of n rows into st->g (n, Hc, F) each: x before the transformation, dy after,
 * each table's query heads summed in order, then (x_k, dk: keys at the queries' positions) its
 * key heads; in double within a row, rounded once */
static void row_grads(const pe__ctx *ctx, const fope_state *st, int64_t n, const float *x, const float *dy, int64_t ld,
                      int64_t nh, const float *x_k, const float *dk, int64_t ld_k) {
    const int64_t D = ctx->D, F = n_freq(ctx->cfg, D), Hc = tables(ctx), per = ctx->Hkv / Hc;
    float *gc = st->g, *gs = st->g + n * Hc * F;
    double *dc = st->acc, *ds = dc + F;
    for (int64_t r = 0; r < n; r++)
        for (int64_t hc = 0; hc < Hc; hc++) {
            for (int64_t d = 0; d < F; d++) dc[d] = 0, ds[d] = 0;
            const int64_t at = r * ld + hc * per * nh * D;
            pair_sums(dc, ds, x + at, dy + at, per * nh, D, F);
            if (x_k) pair_sums(dc, ds, x_k + r * ld_k + hc * per * D, dk + r * ld_k + hc * per * D, per, D, F);
            for (int64_t d = 0; d < F; d++)
                gc[(r * Hc + hc) * F + d] = (float)dc[d], gs[(r * Hc + hc) * F + d] = (float)ds[d];
        }
}

/* The tensors' gradients from st->g's n rows and their cos, sin (p w_u), cwf: dfope_cos[hc] +=
 * cwf^T dL/dc[:, hc], dfope_sin likewise. Float GEMMs: in double they were 3% of a causal
 * forward and backward at T=2048; the float sums over its 4096 rows are within 4e-7 of the
 * largest element of the double ones */
static void coef_grad(pe__ctx *ctx, const fope_state *st, const float *cwf, int64_t n) {
    const int64_t F = n_freq(ctx->cfg, ctx->D), Hc = tables(ctx), W = Hc * F;
    float *dfc = ctx->g->dparam[COS], *dfs = ctx->g->dparam[SIN];
    for (int64_t hc = 0; hc < Hc; hc++) {
        if (dfc) pe__gemm(1, 0, F, F, n, 1.0f, cwf, 2 * F, st->g + hc * F, W, 1.0f, dfc + hc * F * F, F);
        if (dfs) pe__gemm(1, 0, F, F, n, 1.0f, cwf + F, 2 * F, st->g + n * W + hc * F, W, 1.0f, dfs + hc * F * F, F);
    }
}

/* forward was q' = M q, k' = M k, M = [[c, -s], [s, c]] per pair: dq = M^T dq', likewise k,
 * M^T being the kernel's rotation with sin negated */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in, const float *k_in) {
    (void)dv;
    const fope_state *st = ctx->state;
    const int64_t n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, group = ctx->H / ctx->Hkv;
    if (ctx->g->dparam[COS] || ctx->g->dparam[SIN]) {
        /* keys at the queries' positions share their rows' cos and sin: one product for both */
        const int shared = st->cw_k == st->cw;
        row_grads(ctx, st, n, q_in, dq, ctx->C, group, shared ? k_in : NULL, dk, ctx->Ckv);
        coef_grad(ctx, st, st->cwf, n);
        if (!shared) row_grads(ctx, st, nk, k_in, dk, ctx->Ckv, 1, NULL, NULL, 0), coef_grad(ctx, st, st->cwf_k, nk);
    }
    transform(ctx, dq, dq, n, ctx->C, group, st->cs, -1.0f);
    transform(ctx, dk, dk, nk, ctx->Ckv, 1, st->cs_k, -1.0f);
}

const pe__method pe__method_fope = {
    .name = "fope",
    .reference = "Hua et al. 2024, Fourier Position Embedding (the form of vLLM rotary_embedding/fope.py)",
    .family = PE_FAMILY_ROTARY,
    .keys = "rope_base fope_num_freq fope_sep_head max_position_embeddings",
    .flags = PE__GQA | PE__FUSED | PE__PERSIST,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .rotate_forward = rotate_forward,
    .not_a_rotation = "FoPE mixes each pair by learned Fourier coefficients per kv head (c^2 + s^2 is not 1), no rotation "
                      "by one angle and no table shared by the heads",
    .rotate_backward = rotate_backward,
};
