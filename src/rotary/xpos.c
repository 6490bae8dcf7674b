/* xPos (Sun et al., "A Length-Extrapolatable Transformer"), with the conventions of
 * lucidrains/rotary-embedding-torch: RoPE over the whole head in the interleaved layout
 * (pairs (2t, 2t+1)), theta_t = rope_base^(-2t/D), then pair t of the query is multiplied by
 * z_t^(c/B) and of the key by z_t^(-c/B), with
 *   z_t = (2t + g D) / ((1 + g) D),   c = p - floor(n/2),   n = max(positions) + 1,
 * B = xpos_scale_base, g = xpos_gamma. Scores then carry z_t^((c_i - c_j)/B): a decay with
 * the relative distance, so a global shift of positions changes nothing but rounding, and
 * neither does the choice of centre (see prepare).
 *
 * The scale folds into the rotation table: one (cos, sin) table per side, cos and sin times
 * z_t^(+-c/B), all in double (exact angles as rope.c) and rounded once to float; the rotation
 * kernel is rope's pe__rope_rotate. */
#include <float.h>

#include "rotary.h"

typedef struct {
    float *cs_q; /* (B*T, D/2, 2) cos, sin times z_t^(c/B) at the query positions */
    float *cs_k; /* (B*Tk, D/2, 2) times z_t^(-c/B) at the key positions */
    double *inv_freq, *z; /* (D/2) each */
    int64_t centre;
    /* kept between the layer's calls (PE__PERSIST): the tables' memory, and the positions they
     * were built at (a call at the same positions reuses them, as rope's) */
    pe__scratch tab_q, tab_k, built;
} xpos_state;

static double zeta(const pe_config *cfg, int64_t t, int64_t D) {
    double g = cfg->xpos_gamma;
    return (2.0 * (double)t + g * (double)D) / ((1.0 + g) * (double)D);
}

/* The centre of positions lo .. hi: floor((lo + hi + 1) / 2), without overflow (unsigned span). */
static int64_t midpoint(int64_t lo, int64_t hi) {
    const uint64_t span = (uint64_t)hi - (uint64_t)lo;
    return lo + (int64_t)(span / 2 + span % 2);
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H;
    if (D % 2) return pe_error(err, PE_EKEY, "key 'heads': xpos needs an even head_dim, not %lld", (long long)D);
    if (!(cfg->rope_base > 1)) return pe_error(err, PE_EKEY, "key 'rope_base' must be > 1");
    if (cfg->xpos_scale_base == 0) return pe_error(err, PE_EKEY, "key 'xpos_scale_base' must not be 0");
    /* z_t^(c/B) for real powers needs z_t > 0 for every pair (g > 0 or g < -1) */
    for (int64_t t = 0; t < D / 2; t++)
        if (!(zeta(cfg, t, D) > 0) || !isfinite(zeta(cfg, t, D)))
            return pe_error(err, PE_EKEY, "key 'xpos_gamma': %g makes z_%lld = (2t + g D)/((1 + g) D) <= 0",
                            cfg->xpos_gamma, (long long)t);
    return PE_OK;
}

/* One side's table: cs (n, D/2, 2) = (cos, sin)(p theta) z^(sign c/B) for n positions (the
 * kernels' sin and cos, 64 pairs at a time; the factor's power once per pair). */
static pe_status side(const pe__ctx *ctx, const int64_t *pos, int64_t n, double sign, int64_t centre,
                      const double *inv_freq, const double *z, float *cs, pe_err *err) {
    enum { CH = 64 };
    const pe_config *cfg = ctx->cfg;
    const int64_t half = ctx->D / 2;
    const pe__sincos_fn sincos = pe__sincos_kernel(ctx->run);
    double angle[CH], sn[CH], cn[CH];
    for (int64_t r = 0; r < n; r++) {
        const double p = (double)pos[r], power = (double)(pos[r] - centre) / cfg->xpos_scale_base;
        for (int64_t t0 = 0; t0 < half; t0 += CH) {
            const int64_t m = half - t0 < CH ? half - t0 : CH;
            for (int64_t t = 0; t < m; t++) angle[t] = p * inv_freq[t0 + t];
            sincos(angle, sn, cn, m);
            for (int64_t t = 0; t < m; t++) {
                const double f = pow(z[t0 + t], sign > 0 ? power : -power), other = 1 / f;
                /* both sides must stay normal floats, or q.k becomes 0 * inf; past this the
                 * score itself, z^(-(p_j - p_i)/B) for a key after the query, leaves float range */
                if (!(f >= FLT_MIN && f <= FLT_MAX && other >= FLT_MIN && other <= FLT_MAX))
                    return pe_error(err, PE_ETENSOR,
                                    "tensor 'positions': span %llu over xpos_scale_base %g puts the xpos scale "
                                    "z^(c/B) = %g of position %lld outside float range",
                                    (unsigned long long)((uint64_t)ctx->pos_max - (uint64_t)ctx->pos_min),
                                    cfg->xpos_scale_base, sign > 0 ? f : other, (long long)pos[r]);
                cs[(r * half + t0 + t) * 2 + 0] = (float)(cn[t] * f);
                cs[(r * half + t0 + t) * 2 + 1] = (float)(sn[t] * f);
            }
        }
    }
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    xpos_state *st = ctx->state;
    free(st->tab_q.p), free(st->tab_k.p), free(st->built.p), free(st->inv_freq), free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const pe_config *cfg = ctx->cfg;
    ctx->reads_inputs = 0; /* rotate_backward needs the gradients alone */
    ctx->transforms = ctx->rotates_from = PE__TQ | PE__TK; /* whole heads: from the caller's q, k too */
    int64_t D = ctx->D, half = D / 2, n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk;
    xpos_state *st = ctx->state ? ctx->state : calloc(1, sizeof *st); /* the layer's last tables, or new */
    ctx->state = st;
    if (st && !st->inv_freq && (st->inv_freq = malloc(sizeof(double) * 2 * half))) { /* the layer's shape alone */
        st->z = st->inv_freq + half;
        for (int64_t t = 0; t < half; t++) {
            st->inv_freq[t] = pow(cfg->rope_base, -2.0 * (double)t / (double)D);
            st->z[t] = zeta(cfg, t, D);
        }
    }
    if (st) st->cs_q = pe__scratch_get(&st->tab_q, (size_t)(n * half * 2));
    if (st) st->cs_k = pe__scratch_get(&st->tab_k, (size_t)(nk * half * 2));
    if (!st || !st->inv_freq || !st->cs_q || !st->cs_k) {
        if (st) release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the xpos tables");
    }
    /* Scores see only c_i - c_j, so any centre gives the same outputs; the midpoint
     * floor((min + max + 1) / 2) of queries and keys together equals the reference's
     * floor(n / 2) when positions start at 0 and otherwise keeps each factor z^(+-c/B) as
     * close to 1 as possible: far positions (10^5 with B = 512) stay within float range.
     * (midpoint: no overflow) */
    const int64_t centre = midpoint(ctx->pos_min, ctx->pos_max);
    const pe__bytes from[] = {{&n, sizeof n},
                              {&nk, sizeof nk},
                              {&centre, sizeof centre},
                              {ctx->pos, sizeof(int64_t) * (size_t)n},
                              {ctx->kpos, sizeof(int64_t) * (size_t)nk}};
    st->centre = centre;
    if (pe__inputs_same(&st->built, from, 5)) return PE_OK;
    pe_status s = side(ctx, ctx->pos, n, 1, centre, st->inv_freq, st->z, st->cs_q, err);
    if (!s) s = side(ctx, ctx->kpos, nk, -1, centre, st->inv_freq, st->z, st->cs_k, err);
    if (s) release(ctx);
    return s;
}

/* Pair t at position p: the angle p theta_t and the scale z_t^(+-(p - c)/B) of q or k. */
static void rotary_angle(const pe__ctx *ctx, int which, const int64_t *pp, int64_t t, double *angle, double *scale) {
    const xpos_state *st = ctx->state;
    const int64_t p = pp[0]; /* one axis */
    double power = (double)(p - st->centre) / ctx->cfg->xpos_scale_base;
    *angle = (double)p * st->inv_freq[t], *scale = pow(st->z[t], which ? -power : power);
}

/* Any centre gives the same scores, so a cache keeps its centre until the attention's own
 * midpoint is more than B/2 away (each factor then stays within z^(+-1/2) of the layer's
 * own): keys are re-scaled once per B/2 positions of growth, not at every token. */
static int rotary_frame(const pe_config *cfg, int64_t D, const int64_t cur[2], int64_t lo, int64_t hi) {
    (void)D;
    return fabs((double)midpoint(lo, hi) - (double)midpoint(cur[0], cur[1])) > fabs(cfg->xpos_scale_base) / 2;
}

static const float *rotary_table(const pe__ctx *ctx, int which, int64_t *rd, int *layout) {
    const xpos_state *st = ctx->state;
    *rd = ctx->D, *layout = PE_ROPE_INTERLEAVED;
    return which ? st->cs_k : st->cs_q;
}

/* q' = z^(c/B) R(theta) q at the query positions, k' = z^(-c/B) R(theta) k at the keys' (either
 * may be NULL); from ctx's q_src, k_src where set (prepare's rotates_from), else in place. */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    (void)v;
    const xpos_state *st = ctx->state;
    int64_t D = ctx->D;
    if (q)
        pe__rope_rotate_from(ctx->run, q, ctx->q_src ? ctx->q_src : q, ctx->B * ctx->T, ctx->C, ctx->H, D, D,
                             PE_ROPE_INTERLEAVED, st->cs_q, 1.0f);
    if (k)
        pe__rope_rotate_from(ctx->run, k, ctx->k_src ? ctx->k_src : k, ctx->B * ctx->Tk, ctx->Ckv, ctx->Hkv, D, D,
                             PE_ROPE_INTERLEAVED, st->cs_k, 1.0f);
}

/* forward was q' = s R(theta) q with a scalar s per pair, so now: dq = s R(-theta) dq', the
 * same table rotated back; likewise k with 1/s. No parameters. */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in,
                            const float *k_in) {
    (void)dv, (void)q_in, (void)k_in;
    const xpos_state *st = ctx->state;
    int64_t D = ctx->D;
    pe__rope_rotate(ctx->run, dq, ctx->B * ctx->T, ctx->C, ctx->H, D, D, PE_ROPE_INTERLEAVED, st->cs_q, -1.0f);
    pe__rope_rotate(ctx->run, dk, ctx->B * ctx->Tk, ctx->Ckv, ctx->Hkv, D, D, PE_ROPE_INTERLEAVED, st->cs_k, -1.0f);
}

const pe__method pe__method_xpos = {
    .name = "xpos",
    .reference = "Sun et al. 2023, xPos (torchscale, lucidrains/rotary-embedding-torch)",
    .family = PE_FAMILY_ROTARY,
    .keys = "rope_base xpos_scale_base xpos_gamma",
    .flags = PE__GQA | PE__FUSED | PE__PERSIST,
    .check = check,
    .prepare = prepare,
    .release = release,
    .rotate_forward = rotate_forward,
    .rotate_backward = rotate_backward,
    .rotary_table = rotary_table,
    .rotary_angle = rotary_angle,
    .rotary_frame = rotary_frame,
};
