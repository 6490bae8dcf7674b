/* RoPE (Su et al., RoFormer): rotate pairs of the first rotary_dim dims of every q and k
 * head by angle p * theta_t, theta_t = base^(-2t/rotary_dim) as modified by the scaling
 * (rope_scaling.c), cos and sin both multiplied by the scaling's attention factor.
 *
 * Pair layouts within one head of D dims (rotary_dim r, the rest passes through):
 *   half         pairs (t, t + r/2)   [c c c c s s s s . . ]   GPT-NeoX, HF Llama
 *   interleaved  pairs (2t, 2t + 1)   [c s c s c s c s . . ]   RoFormer, GPT-J, Meta
 *
 * Angles are exact: p * theta in double, cos/sin in double, then rounded once to float, so
 * position 10^6 matches a float64 reference (forming p * theta in float32, as many
 * implementations do, is off by ~0.06 rad there). The cos/sin table is built once per call
 * for the tokens' positions and shared by q, k and the backward. */
#include "../internal.h"

enum { SHORT_FACTOR, LONG_FACTOR };

typedef struct {
    float *cs; /* (B*T, r/2, 2) cos, sin; attention factor included */
} rope_state;

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_is_set(cfg, "rotary_dim")) cfg->rotary_dim = D;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H;
    return pe__rope_check(cfg, D, err);
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)H, (void)D;
    if (cfg->rope_scaling != PE_ROPE_LONGROPE) return 0;
    s[SHORT_FACTOR] = (pe_param_spec){"short_factor", 1, {cfg->rotary_dim / 2}, 0};
    s[LONG_FACTOR] = (pe_param_spec){"long_factor", 1, {cfg->rotary_dim / 2}, 0};
    return 2;
}

/* The (cos, sin) table of n positions for this configuration, scaled by the attention
 * factor: cs (n, r/2, 2). */
static void build_table(float *cs, const int64_t *pos, int64_t n, const double *inv_freq,
                        int64_t half, double attn) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t t = 0; t < half; t++) {
            double angle = (double)pos[i] * inv_freq[t];
            cs[(i * half + t) * 2 + 0] = (float)(cos(angle) * attn);
            cs[(i * half + t) * 2 + 1] = (float)(sin(angle) * attn);
        }
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    int64_t half = ctx->cfg->rotary_dim / 2, n = ctx->B * ctx->T;
    rope_state *st = calloc(1, sizeof *st);
    double *inv_freq = malloc(sizeof(double) * half);
    if (st) st->cs = malloc(sizeof(float) * n * half * 2);
    if (!st || !inv_freq || !st->cs) {
        if (st) free(st->cs);
        free(st), free(inv_freq);
        return pe__fail(err, PE_ENOMEM, "out of memory for the rope table");
    }
    int long_used;
    const float *const *prm = ctx->w->param;
    int longrope = ctx->cfg->rope_scaling == PE_ROPE_LONGROPE;
    double attn = pe__rope_freqs(ctx->cfg, ctx->pos_max + 1, longrope ? prm[SHORT_FACTOR] : NULL,
                                 longrope ? prm[LONG_FACTOR] : NULL, inv_freq, &long_used);
    build_table(st->cs, ctx->pos, n, inv_freq, half, attn);
    free(inv_freq);
    ctx->state = st;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    rope_state *st = ctx->state;
    free(st->cs);
    free(st);
    ctx->state = NULL;
}

void pe__rope_rotate(float *x, int64_t n, int64_t ld, int64_t nh, int64_t D, int64_t rd,
                     int layout, const float *cs, float sin_sign) {
    int64_t half = rd / 2;
    /* pair t is (x[a], x[a + step]) */
    int64_t stride = layout == PE_ROPE_HALF ? 1 : 2, step = layout == PE_ROPE_HALF ? half : 1;
    for (int64_t i = 0; i < n; i++) {
        const float *c = cs + i * half * 2;
        for (int64_t h = 0; h < nh; h++) {
            float *xh = x + i * ld + h * D;
            for (int64_t t = 0; t < half; t++) {
                float cs_ = c[2 * t], sn = sin_sign * c[2 * t + 1];
                float *a = xh + t * stride, *b = a + step;
                float x1 = *a, x2 = *b;
                *a = x1 * cs_ - x2 * sn;
                *b = x2 * cs_ + x1 * sn;
            }
        }
    }
}

/* Keys see the same positions as queries (rope has no memory). */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    (void)v;
    const rope_state *st = ctx->state;
    int64_t n = ctx->B * ctx->T, rd = ctx->cfg->rotary_dim;
    pe__rope_rotate(q, n, ctx->C, ctx->H, ctx->D, rd, ctx->cfg->rope_layout, st->cs, 1.0f);
    pe__rope_rotate(k, n, ctx->Ckv, ctx->Hkv, ctx->D, rd, ctx->cfg->rope_layout, st->cs, 1.0f);
}

/* forward was q' = R(theta) q (times the attention factor), so now: dq = R(-theta) dq' with
 * the same factor; likewise k. The frequencies have no gradient here (LongRoPE's factor
 * tables are fixed hyper-parameters of the checkpoint: their gradient is written as zero). */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in,
                            const float *k_in) {
    (void)dv, (void)q_in, (void)k_in;
    const rope_state *st = ctx->state;
    int64_t n = ctx->B * ctx->T, rd = ctx->cfg->rotary_dim;
    pe__rope_rotate(dq, n, ctx->C, ctx->H, ctx->D, rd, ctx->cfg->rope_layout, st->cs, -1.0f);
    pe__rope_rotate(dk, n, ctx->Ckv, ctx->Hkv, ctx->D, rd, ctx->cfg->rope_layout, st->cs, -1.0f);
}

const pe__method pe__method_rope = {
    .name = "rope",
    .family = PE_FAMILY_ROTARY,
    .keys = "rope_layout rope_base rotary_dim rope_scaling rope_factor "
            "original_max_position_embeddings max_position_embeddings beta_fast beta_slow mscale "
            "mscale_all_dim attention_factor yarn_truncate low_freq_factor high_freq_factor hf_config",
    .flags = PE__GQA,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .rotate_forward = rotate_forward,
    .rotate_backward = rotate_backward,
};
