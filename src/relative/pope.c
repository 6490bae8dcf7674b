/* PoPE, Polar Coordinate Position Embedding (Gopalakrishnan et al. 2025, arXiv 2509.10534; the
 * conventions of lucidrains/PoPE-pytorch, PoPE_pytorch/pope.py). Each of the first R dims of a
 * head (rotary_dim, default D) is one frequency w_d = rope_base^(-d/R), d < R: q and k become
 * non-negative magnitudes softplus(x_d) with phases p w_d (queries) and p w_d + delta[h, d]
 * (keys), delta = clamp(pope_bias[h, d], -2 pi, 0) per query head h, i.e. the vectors of 2R
 * dims (mag cos, mag sin) per d, interleaved, followed by the D - R dims that pass through
 * unchanged. The score is the plain dot product of those:
 *   s_ij = scale (sum_{d<R} sp(q_id) sp(k_jd) cos((p_i - p_j) w_d - delta[h, d]) + sum_{d>=R} q_id k_jd)
 * which depends on the positions only through p_i - p_j.
 *
 * The transformed vectors are R + D wide, so PoPE is a lift, not a rotate hook (which keeps q and
 * k D wide): every head's q' (T, R + D) and k' (Tk, R + D), a key per query head (its bias), over
 * which either executor attends with the plain score s = scale q' k'^T (pe__method.lift_width;
 * the lift is PoPE's only implementation of its maths). The phases' cos and sin are rope's
 * exact-angle table (angles in double from exact positions, rounded once; one table for queries
 * and keys at the same positions), and a key's bias turns its phase by a rotation in float,
 * (cos, sin)(p w + delta) = (c cos delta - s sin delta, s cos delta + c sin delta), so the table
 * is not rebuilt per head. softplus and sigmoid are the kernels' vector ones (PyTorch's
 * softplus: x past 20 is x itself, derivative 1). The backward: from dq', dk' of the executor,
 * per frequency dq_d = sigmoid(q_d) (dq'_c cos + dq'_s sin), likewise k, and
 * ddelta[h, d] += sum_j sp(k_jd) (dk'_s cos - dk'_c sin), passed to pope_bias where the clamp
 * keeps it (-2 pi <= bias <= 0, ends included: PyTorch's clamp). */
#include <math.h>

#include "../rotary/rotary.h"

enum { BIAS };

typedef struct {
    double *w;   /* (R) frequencies */
    float *cs;   /* (B*T, R, 2) cos, sin of the queries' phases */
    float *cs_k; /* (B*Tk, R, 2) of the keys' phases without their bias, or cs at the queries' positions */
    float *rot;  /* (H, R, 2) cos, sin of query head h's key bias delta[h, d] */
    float *buf;  /* (Hkv, 4R) a row's softplus, sigmoid and turned phase, per kv head (one thread each) */
    double *dph; /* (H, R) one (b, h)'s gradient of its key phases, per head */
    /* kept between the layer's calls (PE__PERSIST): the phase tables' memory, and the
     * positions they were built at */
    pe__scratch tab_q, tab_k, built;
} pope_state;

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_has(cfg, PE_K_rotary_dim)) cfg->rotary_dim = D;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H;
    if (!(cfg->rope_base > 0) || !isfinite(cfg->rope_base))
        return pe_error(err, PE_EKEY, "key 'rope_base' must be a finite number > 0");
    if (cfg->rotary_dim < 1 || cfg->rotary_dim > D)
        return pe_error(err, PE_EKEY, "key 'rotary_dim': %lld is not within 1 .. head_dim (%lld)",
                        (long long)cfg->rotary_dim, (long long)D);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)D;
    /* the reference: zeros, or U(-2 pi, 0) with bias_uniform_init */
    s[BIAS] = (pe_param_spec){"pope_bias", 2, {H, cfg->rotary_dim}, 0,
                              cfg->pope_bias_uniform_init ? (pe_init){PE_INIT_UNIFORM, -2 * PE_PI, 0}
                                                          : (pe_init){PE_INIT_CONST, 0, 0}};
    return 1;
}

static void release(pe__ctx *ctx) {
    pope_state *st = ctx->state;
    free(st->tab_q.p), free(st->tab_k.p), free(st->built.p), free(st->w), free(st->rot), free(st->buf), free(st->dph);
    free(st);
    ctx->state = NULL;
}

static inline double clamp_bias(double b) { return b < -2 * PE_PI ? -2 * PE_PI : b > 0 ? 0 : b; }

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t R = ctx->cfg->rotary_dim, n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, H = ctx->H;
    const int shared = ctx->kpos == ctx->pos;
    pope_state *st = ctx->state ? ctx->state : calloc(1, sizeof *st); /* the layer's last tables, or new */
    ctx->state = st;
    if (st && !st->w) { /* what depends on the layer's shape alone */
        st->w = malloc(sizeof(double) * (size_t)R);
        st->rot = malloc(sizeof(float) * (size_t)(H * R * 2));
        st->buf = malloc(sizeof(float) * (size_t)(ctx->Hkv * R * 4));
        st->dph = malloc(sizeof(double) * (size_t)(H * R));
        for (int64_t d = 0; st->w && d < R; d++) st->w[d] = pow(ctx->cfg->rope_base, -(double)d / (double)R);
    }
    if (st) st->cs = pe__scratch_get(&st->tab_q, (size_t)(n * R * 2));
    if (st) st->cs_k = shared ? st->cs : pe__scratch_get(&st->tab_k, (size_t)(nk * R * 2));
    if (!st || !st->w || !st->cs || !st->cs_k || !st->rot || !st->buf || !st->dph) {
        if (st) release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the pope tables");
    }
    const float *bias = ctx->w->param[BIAS];
    for (int64_t e = 0; e < H * R; e++) {
        const double delta = clamp_bias(bias[e]);
        st->rot[2 * e] = (float)cos(delta), st->rot[2 * e + 1] = (float)sin(delta);
    }
    const pe__bytes from[] = {{&n, sizeof n},
                              {&nk, sizeof nk},
                              {&shared, sizeof shared},
                              {ctx->pos, sizeof(int64_t) * (size_t)n},
                              {ctx->kpos, shared ? 0 : sizeof(int64_t) * (size_t)nk}};
    if (pe__inputs_same(&st->built, from, 5)) return PE_OK;
    pe__rope_table(ctx->run, st->cs, ctx->pos, 1, NULL, n, st->w, R, 1.0);
    if (!shared) pe__rope_table(ctx->run, st->cs_k, ctx->kpos, 1, NULL, nk, st->w, R, 1.0);
    return PE_OK;
}

/* One row's lift: y (2R) = m_d (c_d, s_d), the phase (c, s) turned by rot's (cos, sin) when
 * rot is given (keys) */
PE_TILE_SIMD static void polar_row(const float *m, const float *cs, const float *rot, float *y, int64_t R) {
    if (rot)
        for (int64_t d = 0; d < R; d++) {
            const float c = cs[2 * d] * rot[2 * d] - cs[2 * d + 1] * rot[2 * d + 1];
            const float s = cs[2 * d + 1] * rot[2 * d] + cs[2 * d] * rot[2 * d + 1];
            y[2 * d] = m[d] * c, y[2 * d + 1] = m[d] * s;
        }
    else
        for (int64_t d = 0; d < R; d++) y[2 * d] = m[d] * cs[2 * d], y[2 * d + 1] = m[d] * cs[2 * d + 1];
}

/* n rows x (row stride ld) -> y (n, W; row stride ldy): (sp(x_d) cos, sp(x_d) sin) per d < R,
 * the phases cs (n, R, 2) turned by rot (or NULL), then x_d for d >= R; buf: R floats */
static void polar(pe__softplus_fn softplus, float *buf, int64_t n, int64_t R, int64_t D, const float *x, int64_t ld,
                  const float *cs, const float *rot, float *y, int64_t ldy) {
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * ld;
        float *yr = y + r * ldy;
        softplus(xr, buf, NULL, R);
        polar_row(buf, cs + r * R * 2, rot, yr, R);
        memcpy(yr + 2 * R, xr + R, sizeof(float) * (size_t)(D - R));
    }
}

/* One row's gradient: dx (R) += sig_d (g_c cos + g_s sin) at the phase cs turned by rot (or not:
 * NULL), and dphase (R) += sp_d (g_s cos - g_c sin) in double (keys; or NULL). Each loop without
 * a branch, so that it vectorises (one loop with both had stayed scalar: 3.7% of a causal
 * forward and backward at T=2048, now 2.4%); every element is the expression it was.
 * turned: 2R floats. */
PE_TILE_SIMD static void polar_row_backward(const float *sp, const float *sig, const float *cs, const float *rot,
                                            const float *g, float *dx, double *dphase, float *turned, int64_t R) {
    if (rot) {
        for (int64_t d = 0; d < R; d++) {
            turned[2 * d] = cs[2 * d] * rot[2 * d] - cs[2 * d + 1] * rot[2 * d + 1];
            turned[2 * d + 1] = cs[2 * d + 1] * rot[2 * d] + cs[2 * d] * rot[2 * d + 1];
        }
        cs = turned;
    }
    for (int64_t d = 0; d < R; d++) dx[d] += sig[d] * (g[2 * d] * cs[2 * d] + g[2 * d + 1] * cs[2 * d + 1]);
    if (dphase)
        for (int64_t d = 0; d < R; d++)
            dphase[d] += (double)sp[d] * ((double)g[2 * d + 1] * cs[2 * d] - (double)g[2 * d] * cs[2 * d + 1]);
}

/* dx (+=) of n rows from dy (n, W; row stride ldy), the gradient of y = polar(x); dphase (R) +=
 * the phases' gradient (keys), or NULL; buf: 4R floats */
static void polar_backward(pe__softplus_fn softplus, float *buf, int64_t n, int64_t R, int64_t D, const float *x,
                           int64_t ld, const float *cs, const float *rot, const float *dy, int64_t ldy, float *dx,
                           double *dphase) {
    float *sp = buf, *sig = buf + R;
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * ld, *g = dy + r * ldy;
        float *dxr = dx + r * ld;
        softplus(xr, dphase ? sp : NULL, sig, R);
        polar_row_backward(sp, sig, cs + r * R * 2, rot, g, dxr, dphase, buf + 2 * R, R);
        for (int64_t d = R; d < D; d++) dxr[d] += g[R + d];
    }
}

/* The lift: every (b, h)'s q' and k' (a key per query head: its bias), and back. Split by kv head g across threads: one thread forms the
 * heads of g and adds into g's dk and its heads' pope_bias rows, rows b in order, so the sums
 * are those of one thread. */
static int64_t lift_width(const pe_config *cfg, int64_t D) { return cfg->rotary_dim + D; }

typedef struct lift_job {
    pe__ctx *ctx;
    const float *q, *k;
    float *qw, *kw;             /* forward */
    const float *dqw, *dkw;     /* backward */
    float *dq, *dk;
} lift_job;

static void lift_group(void *arg, int64_t g) {
    const lift_job *j = arg;
    pe__ctx *ctx = j->ctx;
    pope_state *st = ctx->state;
    const int64_t T = ctx->T, Tk = ctx->Tk, H = ctx->H, D = ctx->D, R = ctx->cfg->rotary_dim, W = R + D;
    const int64_t group = H / ctx->Hkv, C = ctx->C, Ckv = ctx->Ckv;
    const pe__softplus_fn softplus = pe__softplus_kernel(ctx->run);
    float *buf = st->buf + g * 4 * R, *dbias = ctx->g ? ctx->g->dparam[BIAS] : NULL;
    const float *bias = ctx->w->param[BIAS];
    for (int64_t b = 0; b < ctx->B; b++)
        for (int64_t h = g * group; h < (g + 1) * group; h++) {
            const int64_t qo = b * T * C + h * D, ko = b * Tk * Ckv + g * D, wq = b * T * H * W + h * W,
                          wk = b * Tk * H * W + h * W;
            const float *cq = st->cs + b * T * R * 2, *ck = st->cs_k + b * Tk * R * 2, *rot = st->rot + h * R * 2;
            if (j->qw) {
                polar(softplus, buf, T, R, D, j->q + qo, C, cq, NULL, j->qw + wq, H * W);
                polar(softplus, buf, Tk, R, D, j->k + ko, Ckv, ck, rot, j->kw + wk, H * W);
                continue;
            }
            polar_backward(softplus, buf, T, R, D, j->q + qo, C, cq, NULL, j->dqw + wq, H * W, j->dq + qo, NULL);
            double *dphase = dbias ? st->dph + h * R : NULL; /* pope_bias[h] += where the clamp keeps it */
            if (dphase) memset(dphase, 0, sizeof(double) * (size_t)R);
            polar_backward(softplus, buf, Tk, R, D, j->k + ko, Ckv, ck, rot, j->dkw + wk, H * W, j->dk + ko, dphase);
            for (int64_t d = 0; dphase && d < R; d++)
                if (bias[h * R + d] >= -2 * PE_PI && bias[h * R + d] <= 0) dbias[h * R + d] += (float)dphase[d];
        }
}

/* a vector softplus (or sigmoid) and a turned phase per element: weigh them as ~16 multiply-adds */
static double lift_work(const pe__ctx *ctx) {
    return 16.0 * (double)ctx->B * ctx->H * (ctx->T + ctx->Tk) * ctx->cfg->rotary_dim;
}

static void lift_forward(pe__ctx *ctx, const float *q, const float *k, float *qw, float *kw) {
    lift_job j = {.ctx = ctx, .q = q, .k = k, .qw = qw, .kw = kw};
    pe__parallel_for(ctx->run, lift_work(ctx), ctx->Hkv, lift_group, &j);
}

static void lift_backward(pe__ctx *ctx, const float *q, const float *k, const float *dqw, const float *dkw, float *dq,
                          float *dk) {
    lift_job j = {.ctx = ctx, .q = q, .k = k, .dqw = dqw, .dkw = dkw, .dq = dq, .dk = dk};
    pe__parallel_for(ctx->run, lift_work(ctx), ctx->Hkv, lift_group, &j);
}

const pe__method pe__method_pope = {
    .name = "pope",
    .reference = "Gopalakrishnan et al. 2025, polar coordinate position embedding (lucidrains/PoPE-pytorch)",
    .family = PE_FAMILY_RELATIVE,
    .keys = "rope_base rotary_dim pope_bias_uniform_init",
    .flags = PE__GQA | PE__FUSED | PE__PERSIST,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .lift_width = lift_width,
    .lift_forward = lift_forward,
    .lift_backward = lift_backward,
};
