/* RoPE-Mixed (Heo et al. 2024, naver-ai/rope-vit `compute_mixed_cis`): learned frequencies per
 * head and position axis. Pair t of head h at a token with positions p (A axes) rotates by
 *   angle = sum_a p[a] rope_freqs[a, h, t]
 * (rope_freqs [A, H, rotary_dim/2], A its rows; plain positions are A = 1). The pairs follow
 * rope_layout (interleaved by default: rope-vit's complex pairs). The angles are formed in
 * double from the float32 table and rounded once, as rope's; each head has its own table, so
 * heads rotate one at a time through rope's kernel. No scaling, no grouped-query attention.
 *
 * The gradient of rope_freqs: for y = R(angle) x, dL/dangle = -dy1 y2 + dy2 y1 per pair, and
 * dL/dfreqs[a, h, t] = sum over q and k rows of dL/dangle (p[a] - min p): adding a constant to
 * one axis of every position adds the same phase to every q and k of a pair, which no score
 * sees, so the sum of dL/dangle is 0 and the shift by min p only keeps large positions from
 * cancelling. */
#include "rotary.h"

typedef struct {
    float *cs;   /* (H, B*T, r/2, 2) per head: cos, sin of the queries */
    float *cs_k; /* (H, B*Tk, r/2, 2) of the keys, or cs when the keys are the queries */
    double *acc; /* (A, H, r/2) the gradient, summed by rotate_backward */
    /* kept between the layer's calls (PE__PERSIST): the tables' memory and the gradient's, and
     * what the tables were built from (the same positions and rope_freqs reuse them) */
    pe__scratch tab_q, tab_k, grad, built;
} mixed_state;

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_has(cfg, PE_K_rotary_dim)) cfg->rotary_dim = D;
    if (!pe_config_has(cfg, PE_K_rope_layout)) cfg->rope_layout = PE_ROPE_INTERLEAVED;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H;
    if (cfg->rotary_dim < 2 || cfg->rotary_dim % 2 || cfg->rotary_dim > D)
        return pe_error(err, PE_EKEY, "key 'rotary_dim': %lld is not even within 2 .. head_dim %lld",
                        (long long)cfg->rotary_dim, (long long)D);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)D;
    s[0] = (pe_param_spec){"rope_freqs", 3, {-1, H, cfg->rotary_dim / 2}, 0, {0}};
    return 1;
}

static int64_t axes(const pe_config *cfg, const pe_weights *w) {
    (void)cfg;
    return w->param[0] && w->param_rows[0] > 0 ? w->param_rows[0] : 1;
}

/* cs (H, n, half, 2) for n rows of A positions each: the angles in double, the kernels' sin
 * and cos (exec/vmath.h), rounded once; split across threads by head */
typedef struct table_job {
    const pe__ctx *ctx;
    const int64_t *pos;
    int64_t n;
    float *cs;
} table_job;

static void table_head(void *arg, int64_t h) {
    enum { CH = 64 };
    const table_job *j = arg;
    const pe__ctx *ctx = j->ctx;
    const int64_t H = ctx->H, half = ctx->cfg->rotary_dim / 2, A = ctx->A;
    const float *f = ctx->w->param[0];
    const pe__sincos_fn sincos = pe__sincos_kernel(ctx->run);
    double angle[CH], s[CH], c[CH];
    for (int64_t r = 0; r < j->n; r++)
        for (int64_t t0 = 0; t0 < half; t0 += CH) {
            const int64_t m = half - t0 < CH ? half - t0 : CH;
            for (int64_t t = 0; t < m; t++) {
                angle[t] = 0;
                for (int64_t a = 0; a < A; a++) angle[t] += (double)j->pos[r * A + a] * (double)f[(a * H + h) * half + t0 + t];
            }
            sincos(angle, s, c, m);
            float *e = j->cs + ((h * j->n + r) * half + t0) * 2;
            for (int64_t t = 0; t < m; t++) e[2 * t] = (float)c[t], e[2 * t + 1] = (float)s[t];
        }
}

static void table(const pe__ctx *ctx, const int64_t *pos, int64_t n, float *cs) {
    table_job j = {ctx, pos, n, cs};
    pe__parallel_for(ctx->run, 32.0 * ctx->H * n * (ctx->cfg->rotary_dim / 2), ctx->H, table_head, &j);
}

static void release(pe__ctx *ctx) {
    mixed_state *st = ctx->state;
    free(st->tab_q.p), free(st->tab_k.p), free(st->grad.p), free(st->built.p), free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    ctx->transforms = PE__TQ | PE__TK;
    ctx->rotates_from = ctx->cfg->rotary_dim == ctx->D ? ctx->transforms : 0; /* the kernel writes the rotated dims only */
    const int64_t H = ctx->H, half = ctx->cfg->rotary_dim / 2, n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, A = ctx->A;
    const int shared = ctx->kpos == ctx->pos;
    mixed_state *st = ctx->state ? ctx->state : calloc(1, sizeof *st); /* the layer's last tables, or new */
    ctx->state = st;
    if (st) st->cs = pe__scratch_get(&st->tab_q, (size_t)(H * n * half * 2));
    if (st) st->cs_k = shared ? st->cs : pe__scratch_get(&st->tab_k, (size_t)(H * nk * half * 2));
    if (st) st->acc = (double *)pe__scratch_get(&st->grad, (size_t)(2 * A * H * half));
    if (!st || !st->cs || !st->cs_k || !st->acc) {
        if (st) release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the rope_mixed tables");
    }
    const pe__bytes from[] = {{&n, sizeof n},
                              {&nk, sizeof nk},
                              {&A, sizeof A},
                              {&shared, sizeof shared},
                              {ctx->w->param[0], sizeof(float) * (size_t)(A * H * half)},
                              {ctx->pos, sizeof(int64_t) * (size_t)(n * A)},
                              {ctx->kpos, shared ? 0 : sizeof(int64_t) * (size_t)(nk * A)}};
    if (pe__inputs_same(&st->built, from, 7)) return PE_OK;
    table(ctx, ctx->pos, n, st->cs);
    if (!shared) table(ctx, ctx->kpos, nk, st->cs_k);
    return PE_OK;
}

/* Every head of n rows (stride ld) from x into y (y == x: in place) by its own table; sign -1:
 * back. */
static void rotate_heads(const pe__ctx *ctx, float *y, const float *x, int64_t n, int64_t ld, const float *cs, float sign) {
    const int64_t half = ctx->cfg->rotary_dim / 2;
    for (int64_t h = 0; h < ctx->H; h++)
        pe__rope_rotate_from(ctx->run, y + h * ctx->D, x + h * ctx->D, n, ld, 1, ctx->D, ctx->cfg->rotary_dim,
                             ctx->cfg->rope_layout, cs + h * n * half * 2, sign);
}

/* q, k from ctx's q_src, k_src where set (whole heads: prepare's rotates_from), else in place */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    (void)v;
    const mixed_state *st = ctx->state;
    if (q) rotate_heads(ctx, q, ctx->q_src ? ctx->q_src : q, ctx->B * ctx->T, ctx->C, st->cs, 1.0f);
    if (k) rotate_heads(ctx, k, ctx->k_src ? ctx->k_src : k, ctx->B * ctx->Tk, ctx->Ckv, st->cs_k, 1.0f);
}

/* dL/dangle (pe__rope_dangle, the same products) of pairs t0 .. t0 + m - 1 of one head's row:
 * x before the rotation, g after, c its table row */
PE_TILE_SIMD static void dangle_row(const float *x, const float *g, const float *c, int64_t half, int layout, int64_t t0,
                                    int64_t m, double *out) {
    const int64_t step = layout == PE_ROPE_HALF ? half : 1, stride = layout == PE_ROPE_HALF ? 1 : 2;
    for (int64_t t = 0; t < m; t++) {
        const int64_t e1 = (t0 + t) * stride, e2 = e1 + step;
        const double c0 = c[2 * (t0 + t)], s0 = c[2 * (t0 + t) + 1];
        const double y1 = (double)x[e1] * c0 - (double)x[e2] * s0, y2 = (double)x[e2] * c0 + (double)x[e1] * s0;
        out[t] = -(double)g[e1] * y2 + (double)g[e2] * y1;
    }
}

/* acc[a, h, t] += dL/dangle (p[a] - min p) over n rows: x_in before the rotation, dy after;
 * each entry's sum in row order */
static void freq_grad(const pe__ctx *ctx, const float *cs, const int64_t *pos, int64_t n, const float *x_in,
                      const float *dy, int64_t ld, double *acc) {
    enum { CH = 64 };
    const int64_t H = ctx->H, D = ctx->D, half = ctx->cfg->rotary_dim / 2, A = ctx->A;
    double da[CH];
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t t0 = 0; t0 < half; t0 += CH) {
                const int64_t m = half - t0 < CH ? half - t0 : CH;
                dangle_row(x_in + i * ld + h * D, dy + i * ld + h * D, cs + (h * n + i) * half * 2, half,
                           ctx->cfg->rope_layout, t0, m, da);
                for (int64_t a = 0; a < A; a++) {
                    const double p = (double)(pos[i * A + a] - ctx->pos_min);
                    double *ac = acc + (a * H + h) * half + t0;
                    for (int64_t t = 0; t < m; t++) ac[t] += da[t] * p;
                }
            }
}

static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in, const float *k_in) {
    (void)dv;
    const mixed_state *st = ctx->state;
    const int64_t n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, m = ctx->A * ctx->H * (ctx->cfg->rotary_dim / 2);
    float *dfreqs = ctx->g->dparam[0];
    if (dfreqs) {
        memset(st->acc, 0, sizeof(double) * (size_t)m);
        freq_grad(ctx, st->cs, ctx->pos, n, q_in, dq, ctx->C, st->acc);
        freq_grad(ctx, st->cs_k, ctx->kpos, nk, k_in, dk, ctx->Ckv, st->acc);
        for (int64_t e = 0; e < m; e++) dfreqs[e] += (float)st->acc[e];
    }
    rotate_heads(ctx, dq, dq, n, ctx->C, st->cs, -1.0f);
    rotate_heads(ctx, dk, dk, nk, ctx->Ckv, st->cs_k, -1.0f);
}

const pe__method pe__method_rope_mixed = {
    .name = "rope_mixed",
    .reference = "Heo et al. 2024, RoPE-Mixed (naver-ai/rope-vit)",
    .family = PE_FAMILY_ROTARY,
    .keys = "rope_layout rotary_dim",
    .flags = PE__FUSED | PE__PERSIST,
    /* rope-vit's compute_mixed_cis: frequencies per axis of image patches (x, y); on one axis it
     * is rope with learned frequencies */
    .axes_min = 2,
    .defaults = defaults,
    .check = check,
    .params = params,
    .axes = axes,
    .prepare = prepare,
    .release = release,
    .rotate_forward = rotate_forward,
    .not_a_rotation = "RoPE-Mixed rotates each head by its own learned frequencies over the position axes, no table "
                      "shared by the heads",
    .rotate_backward = rotate_backward,
};
