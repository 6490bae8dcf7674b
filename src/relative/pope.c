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
 * the lift is PoPE's only implementation of its maths). Angles and their cosines are formed in
 * double from exact positions and rounded once. The backward: from dq', dk' of the executor,
 * per frequency dq_d = sigmoid(q_d) (dq'_c cos + dq'_s sin), likewise
 * k, and ddelta[h, d] += sum_j sp(k_jd) (dk'_s cos - dk'_c sin), passed to pope_bias where the
 * clamp keeps it (-2 pi <= bias <= 0, ends included: PyTorch's clamp). softplus is PyTorch's
 * (x past 20: x itself, derivative 1). */
#include <math.h>

#include "../internal.h"

enum { BIAS };

typedef struct {
    double *w;   /* (R) frequencies */
    float *cs;   /* (B*T, R, 2) cos, sin of the queries' phases */
    float *kcs;  /* (H, Tk, R, 2) cos, sin of one row's key phases per query head, bias included */
    double *dph; /* (H, R) one (b, h)'s gradient of its key phases, per head */
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

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t R = ctx->cfg->rotary_dim, n = ctx->B * ctx->T;
    pope_state *st = calloc(1, sizeof *st);
    if (st) st->w = malloc(sizeof(double) * (size_t)R);
    if (st) st->cs = malloc(sizeof(float) * (size_t)(n * R * 2));
    if (st) st->kcs = malloc(sizeof(float) * (size_t)(ctx->H * ctx->Tk * R * 2));
    if (st) st->dph = malloc(sizeof(double) * (size_t)(ctx->H * R));
    if (!st || !st->w || !st->cs || !st->kcs || !st->dph) {
        if (st) free(st->w), free(st->cs), free(st->kcs), free(st->dph);
        free(st);
        return pe_error(err, PE_ENOMEM, "out of memory for the pope tables");
    }
    for (int64_t d = 0; d < R; d++) st->w[d] = pow(ctx->cfg->rope_base, -(double)d / (double)R);
    for (int64_t r = 0; r < n; r++)
        for (int64_t d = 0; d < R; d++) {
            const double a = (double)ctx->pos[r] * st->w[d];
            st->cs[(r * R + d) * 2] = (float)cos(a), st->cs[(r * R + d) * 2 + 1] = (float)sin(a);
        }
    ctx->state = st;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    pope_state *st = ctx->state;
    free(st->w), free(st->cs), free(st->kcs), free(st->dph), free(st);
    ctx->state = NULL;
}

/* PyTorch's softplus (beta 1, threshold 20) and its derivative */
static inline double softplus(double x) { return x > 20 ? x : log1p(exp(x)); }
static inline double softplus_grad(double x) { return x > 20 ? 1 : 1 / (1 + exp(-x)); }

static inline double clamp_bias(double b) { return b < -2 * PE_PI ? -2 * PE_PI : b > 0 ? 0 : b; }

/* The key phases of row b for query head h into head h's st->kcs, which it returns */
static const float *key_table(const pe__ctx *ctx, const pope_state *st, int64_t b, int64_t h) {
    const int64_t R = ctx->cfg->rotary_dim;
    const int64_t *kpos = ctx->kpos + b * ctx->Tk;
    const float *bias = ctx->w->param[BIAS] + h * R;
    float *kcs = st->kcs + h * ctx->Tk * R * 2;
    for (int64_t j = 0; j < ctx->Tk; j++)
        for (int64_t d = 0; d < R; d++) {
            const double a = (double)kpos[j] * st->w[d] + clamp_bias(bias[d]);
            kcs[(j * R + d) * 2] = (float)cos(a), kcs[(j * R + d) * 2 + 1] = (float)sin(a);
        }
    return kcs;
}

/* n rows x (row stride ld) -> y (n, W; row stride ldy): (sp(x_d) cos, sp(x_d) sin) per d < R,
 * then x_d for d >= R */
static void polar(int64_t n, int64_t R, int64_t D, const float *x, int64_t ld, const float *cs, float *y,
                  int64_t ldy) {
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * ld, *c = cs + r * R * 2;
        float *yr = y + r * ldy;
        for (int64_t d = 0; d < R; d++) {
            const float m = (float)softplus(xr[d]);
            yr[2 * d] = m * c[2 * d], yr[2 * d + 1] = m * c[2 * d + 1];
        }
        for (int64_t d = R; d < D; d++) yr[R + d] = xr[d];
    }
}

/* dx (+=) of n rows from dy (n, W; row stride ldy), the gradient of y = polar(x); dphase (R) +=
 * the phases' gradient (keys), or NULL */
static void polar_backward(int64_t n, int64_t R, int64_t D, const float *x, int64_t ld, const float *cs,
                           const float *dy, int64_t ldy, float *dx, double *dphase) {
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * ld, *c = cs + r * R * 2, *g = dy + r * ldy;
        float *dxr = dx + r * ld;
        for (int64_t d = 0; d < R; d++) {
            const double gc = g[2 * d], gs = g[2 * d + 1], co = c[2 * d], si = c[2 * d + 1];
            dxr[d] += (float)(softplus_grad(xr[d]) * (gc * co + gs * si));
            if (dphase) dphase[d] += (double)(float)softplus(xr[d]) * (gs * co - gc * si);
        }
        for (int64_t d = R; d < D; d++) dxr[d] += g[R + d];
    }
}

/* dk (+=) of one (b, h)'s keys from dk' (Tk, W; row stride ldy), kcs their phases, and
 * pope_bias[h] += the phases' gradient where the clamp keeps it */
static void key_backward(pe__ctx *ctx, const pope_state *st, int64_t h, const float *kcs, const float *k,
                         const float *dky, int64_t ldy, float *dk) {
    const int64_t R = ctx->cfg->rotary_dim;
    float *dbias = ctx->g->dparam[BIAS];
    double *dphase = dbias ? st->dph + h * R : NULL;
    if (dphase) memset(dphase, 0, sizeof(double) * (size_t)R);
    polar_backward(ctx->Tk, R, ctx->D, k, ctx->Ckv, kcs, dky, ldy, dk, dphase);
    const float *bias = ctx->w->param[BIAS] + h * R;
    for (int64_t d = 0; dphase && d < R; d++)
        if (bias[d] >= -2 * PE_PI && bias[d] <= 0) dbias[h * R + d] += (float)dphase[d];
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
    const pope_state *st = ctx->state;
    const int64_t T = ctx->T, Tk = ctx->Tk, H = ctx->H, D = ctx->D, R = ctx->cfg->rotary_dim, W = R + D;
    const int64_t group = H / ctx->Hkv, C = ctx->C, Ckv = ctx->Ckv;
    for (int64_t b = 0; b < ctx->B; b++)
        for (int64_t h = g * group; h < (g + 1) * group; h++) {
            const int64_t qo = b * T * C + h * D, ko = b * Tk * Ckv + g * D, wq = b * T * H * W + h * W,
                          wk = b * Tk * H * W + h * W;
            const float *cq = st->cs + b * T * R * 2, *kcs = key_table(ctx, st, b, h);
            if (j->qw) {
                polar(T, R, D, j->q + qo, C, cq, j->qw + wq, H * W);
                polar(Tk, R, D, j->k + ko, Ckv, kcs, j->kw + wk, H * W);
            } else {
                polar_backward(T, R, D, j->q + qo, C, cq, j->dqw + wq, H * W, j->dq + qo, NULL);
                key_backward(ctx, st, h, kcs, j->k + ko, j->dkw + wk, H * W, j->dk + ko);
            }
        }
}

/* a softplus and a sine and cosine in double per element: weigh them as ~64 multiply-adds */
static double lift_work(const pe__ctx *ctx) {
    return 64.0 * (double)ctx->B * ctx->H * (ctx->T + ctx->Tk) * ctx->cfg->rotary_dim;
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
    .flags = PE__GQA | PE__FUSED,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .lift_width = lift_width,
    .lift_forward = lift_forward,
    .lift_backward = lift_backward,
};
