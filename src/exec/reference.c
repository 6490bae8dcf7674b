/* The reference executor: the (B, H, T, Tk) scores and probabilities materialised, every hook
 * per (b, h) (the tile hooks over the whole head, mask), dropout; the oracle the fused path is held to, and the
 * path of scores, probs, dropout and the methods no tile can hold (xl, deberta, tupe, cope).
 * Its softmax takes the kernels' exp (both paths then differ from libm's expf by the same few
 * ulps; the fixtures, float64, hold both). */
#include "../layer.h"
#include "fused.h" /* the kernels (the row softmax) */

/* Dropout's mask is a hash of (seed, b, h, i, j), so backward regenerates what forward drew
 * and no (B, H, T, Tk) mask is kept: splitmix64's finaliser on the element's index. */
static inline int dropout_keeps(uint64_t seed, uint64_t idx, uint32_t threshold) {
    uint64_t x = seed + (idx + 1) * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((x ^ (x >> 31)) >> 32) >= threshold;
}

/* out = in z / (1 - rate) for head (b, h) of the last forward, z its mask: p' from p, what the
 * values see (forward, and backward again, which then reads the mask off p'). */
static void dropout_apply(const pe_attention *a, int64_t b, int64_t h, const float *in, float *out) {
    const int64_t T = a->T, Tk = a->Tk;
    const uint32_t threshold = (uint32_t)(a->drop_used * 4294967296.0);
    const float scale = (float)(1.0 / (1.0 - a->drop_used));
    const uint64_t base = (uint64_t)((b * a->H + h) * T) * (uint64_t)Tk;
    for (int64_t e = 0; e < T * Tk; e++)
        out[e] = dropout_keeps(a->seed_used, base + (uint64_t)e, threshold) ? in[e] * scale : 0.0f;
}

int64_t pe__mask_scores(const pe__ctx *ctx, const pe__method *m, int64_t b, float *s) {
    const int64_t T = ctx->T, Tk = ctx->Tk;
    int64_t Tb, Tkb, qoff; /* the row's own lengths: padding after them */
    pe__row_lens(ctx, b, &Tb, &Tkb, &qoff);
    const pe__band band = pe__band_of(ctx->cfg);
    for (int64_t i = 0; i < T; i++) { /* padding queries see no key */
        int64_t lo = 0, hi = 0;
        if (i < Tb) pe__band_range(band, qoff, i, Tkb, &lo, &hi);
        for (int64_t j = 0; j < lo; j++) s[i * Tk + j] = -INFINITY;
        for (int64_t j = hi; j < Tk; j++) s[i * Tk + j] = -INFINITY;
    }
    if (ctx->mask) {
        const uint8_t *mk = ctx->mask + b * T * Tk;
        for (int64_t e = 0; e < T * Tk; e++)
            if (!mk[e]) s[e] = -INFINITY;
    }
    if (m && m->mask)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < Tk; j++)
                if (m->mask(ctx, b, i, j)) s[i * Tk + j] = -INFINITY;
    for (int64_t i = 0; i < Tb; i++) { /* padding queries have no key, by design */
        int64_t j = 0;
        while (j < Tk && s[i * Tk + j] == -INFINITY) j++;
        if (j == Tk) return i;
    }
    return -1;
}


pe_status pe__empty_row(const pe__ctx *ctx, const pe__method *m, int64_t b, int64_t i, pe_err *err) {
    int64_t T, Tk, qoff, lo, hi;
    pe__row_lens(ctx, b, &T, &Tk, &qoff);
    pe__band_range(pe__band_of(ctx->cfg), qoff, i, Tk, &lo, &hi);
    for (int64_t j = lo; j < hi; j++) /* a key kept: the scores, not the masks (+-Inf in q or k) */
        if ((!ctx->mask || ctx->mask[(b * ctx->T + i) * ctx->Tk + j]) && !(m && m->mask && m->mask(ctx, b, i, j)))
            return pe_error(err, PE_EINVAL, "query %lld of row %lld: its scores are not finite (NaN or Inf in q, k or "
                            "the method's terms)", (long long)i, (long long)b);
    return pe_error(err, PE_EINVAL, "query %lld has every key masked", (long long)i);
}

/* The tile hooks' view of head (b, h) as one tile of T x Tk (pe__tile): kt (D, Tk) the keys
 * transposed into a buffer for a hook that reads them (PE__SCORE_QK), else NULL. */
static pe__tile whole_tile(const pe__ctx *ctx, int64_t b, int64_t h, const float *q, const float *k, float *kt,
                           float *scratch) {
    const int64_t D = ctx->D, Tk = ctx->Tk;
    for (int64_t j = 0; kt && j < Tk; j++)
        for (int64_t d = 0; d < D; d++) kt[d * Tk + j] = k[j * ctx->Ckv + d];
    return (pe__tile){.b = b, .h = h, .ni = ctx->T, .nj = Tk, .q = q, .k = k, .kt = kt, .ldq = ctx->C,
                      .ldk = ctx->Ckv, .ldkt = Tk, .scratch = scratch};
}

/* A BEGIN or END tile of the head's one query block (PE__SCORE_BLOCK) to score_mod or its
 * backward: BEGIN with the head's keys, END with none */
static void block_phase(pe__ctx *ctx, void (*fwd)(pe__ctx *, const pe__tile *, float *, int64_t),
                        void (*bwd)(pe__ctx *, const pe__tile *, const float *, float *, int64_t), const pe__tile *t,
                        int phase) {
    pe__tile e = *t;
    e.phase = phase, e.nj = phase == PE__TILE_BEGIN ? t->nj : 0;
    if (fwd) fwd(ctx, &e, NULL, 0);
    if (bwd) bwd(ctx, &e, NULL, NULL, 0);
}

/* Buffers of the tile hooks over a whole head: kt (D, Tk), the method's scratch, and with
 * s_in the plain scores (T, Tk) for their backward; NULL when the method has no tile hook. */
static float *tile_buffers(const pe__ctx *ctx, const pe__method *m, int s_in, float **kt, float **scratch,
                           float **plain) {
    if (!m->score_mod && !m->value_mod) return *kt = *scratch = *plain = NULL;
    const int64_t T = ctx->T, Tk = ctx->Tk, D = ctx->D, nk = (m->flags & PE__SCORE_QK) ? D * Tk : 0;
    const int64_t ns = m->tile_scratch ? m->tile_scratch(ctx->cfg, D, T, Tk) : 0;
    float *buf = malloc(sizeof(float) * (size_t)(nk + ns + (s_in ? T * Tk : 0) + 1));
    if (!buf) return *kt = *scratch = *plain = NULL;
    *kt = nk ? buf : NULL, *scratch = buf + nk, *plain = s_in ? *scratch + ns : NULL;
    return buf;
}

/* The reference executor over one context (the call's, or a lifted method's: H heads of W,
 * values of Dv): per (b, h) the (T, Tk) scores (scale q.k and the score_mod over the head as
 * one tile), mask, softmax, dropout, o = p v and the value_mod; scores and probs copied out when
 * asked for. */
pe_status pe__reference_forward(pe_attention *a, pe__ctx *ctx, const float *q, const float *k, const float *v,
                                float *o, float *scores, float *probs, pe_err *err) {
    const int64_t B = ctx->B, T = ctx->T, Tk = ctx->Tk, H = ctx->H, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv,
                  group = H / ctx->Hkv, Dv = ctx->Dv, Co = H * Dv, Cv = ctx->Hkv * Dv;
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(ctx->run));
    const float lo = ctx->run && ctx->run->denormals ? -104.0f : -87.0f; /* as the fused path's */
    a->drop_used = a->dropout, a->seed_used = a->drop_seed;
    float *drop = a->drop_used > 0 && !probs ? malloc(sizeof(float) * T * Tk) : NULL;
    if (a->drop_used > 0 && !probs && !drop)
        return pe_error(err, PE_ENOMEM, "out of memory for %lld x %lld dropped probabilities", (long long)T, (long long)Tk);
    float *kt, *ts, *unused;
    float *tbuf = tile_buffers(ctx, a->m, 0, &kt, &ts, &unused);
    if ((a->m->score_mod || a->m->value_mod) && !tbuf) {
        free(drop);
        return pe_error(err, PE_ENOMEM, "out of memory for the method's %lld x %lld tile", (long long)T, (long long)Tk);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *qh = q + b * T * C + h * D;
            const float *kh = k + b * Tk * Ckv + (h / group) * D;
            const float *vh = v + b * Tk * Cv + (h / group) * Dv;
            float *s = a->s + (b * H + h) * T * Tk, *p = a->p + (b * H + h) * T * Tk;
            pe__tile t = tbuf ? whole_tile(ctx, b, h, qh, kh, kt, ts) : (pe__tile){0};
            if (a->m->flags & PE__SCORE_OWN) memset(s, 0, sizeof(float) * T * Tk);
            else pe__score_dot_forward(ctx, qh, kh, s);
            if (a->m->flags & PE__SCORE_BLOCK) block_phase(ctx, a->m->score_mod, NULL, &t, PE__TILE_BEGIN);
            if (a->m->score_mod) a->m->score_mod(ctx, &t, s, Tk);
            int64_t bad = pe__mask_scores(ctx, a->m, b, s);
            if (bad >= 0) {
                free(drop), free(tbuf);
                return pe__empty_row(ctx, a->m, b, bad, err);
            }
            K->softmax(s, p, T, Tk, ctx->sinks ? ctx->sinks[h] : -INFINITY, lo);
            float *oh = o + b * T * Co + h * Dv;
            const float *pv = p; /* what the values see: p, or p after dropout (then probs holds it) */
            if (a->drop_used > 0) {
                float *pd = probs ? probs + (b * H + h) * T * Tk : drop;
                dropout_apply(a, b, h, p, pd);
                pv = pd;
            }
            pe__gemm(0, 0, T, Dv, Tk, 1.0f, pv, Tk, vh, Cv, 0.0f, oh, Co);
            if (a->m->value_mod) a->m->value_mod(ctx, &t, pv, Tk, oh, Co);
        }
    free(drop), free(tbuf);
    if (scores) memcpy(scores, a->s, sizeof(float) * B * H * T * Tk);
    if (probs && !(a->drop_used > 0)) memcpy(probs, a->p, sizeof(float) * B * H * T * Tk);
    return PE_OK;
}

/* Its backward: dout to dq, dk, dv (added), through each hook in reverse. */
pe_status pe__reference_backward(pe_attention *a, pe__ctx *ctx, const float *q, const float *k, const float *v,
                                 const float *dout, float *dq, float *dk, float *dv, pe_err *err) {
    const int64_t B = ctx->B, T = ctx->T, Tk = ctx->Tk, H = ctx->H, D = ctx->D, C = ctx->C, Ckv = ctx->Ckv,
                  group = H / ctx->Hkv, Dv = ctx->Dv, Co = H * Dv, Cv = ctx->Hkv * Dv;
    float *dp = malloc(sizeof(float) * T * Tk * 3), *ds = dp + T * Tk, *pd = ds + T * Tk; /* (T, Tk) each */
    float *kt, *ts, *plain;
    float *tbuf = tile_buffers(ctx, a->m, (a->m->flags & PE__SCORE_PLAIN) != 0, &kt, &ts, &plain);
    if (!dp || ((a->m->score_mod || a->m->value_mod) && !tbuf)) {
        free(dp), free(tbuf);
        return pe_error(err, PE_ENOMEM, "out of memory for %lld x %lld score gradients", (long long)T, (long long)Tk);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *qh = q + b * T * C + h * D;
            const float *kh = k + b * Tk * Ckv + (h / group) * D;
            const float *vh = v + b * Tk * Cv + (h / group) * Dv;
            const float *p = a->p + (b * H + h) * T * Tk;
            const float *douth = dout + b * T * Co + h * Dv;
            float *dqh = dq + b * T * C + h * D;
            float *dkh = dk + b * Tk * Ckv + (h / group) * D;
            float *dvh = dv + b * Tk * Cv + (h / group) * Dv;
            /* o = p v: dp = do v^T, dv += p^T do. With dropout o = p' v, p' = p z / (1 - rate):
             * dv += p'^T do, and dp = z / (1 - rate) (do v^T + the value terms' dp') */
            const float *pv = p;
            pe__tile t = tbuf ? whole_tile(ctx, b, h, qh, kh, kt, ts) : (pe__tile){0};
            t.dq = dqh, t.dk = dkh, t.dout = douth, t.ldd = Co;
            if (a->m->flags & PE__SCORE_BLOCK) block_phase(ctx, NULL, a->m->score_mod_backward, &t, PE__TILE_BEGIN);
            if (a->drop_used > 0) dropout_apply(a, b, h, p, pd), pv = pd;
            pe__gemm(0, 1, T, Tk, Dv, 1.0f, douth, Co, vh, Cv, 0.0f, dp, Tk);
            pe__gemm(1, 0, Tk, Dv, T, 1.0f, pv, Tk, douth, Co, 1.0f, dvh, Cv);
            if (a->m->value_mod_backward) a->m->value_mod_backward(ctx, &t, pv, Tk, douth, Co, dp, Tk);
            if (a->drop_used > 0) { /* the mask is pd's zeros: p' = 0 with p > 0 only where dropped, and
                                       where p = 0 the softmax's backward ignores dp */
                const float scale = (float)(1.0 / (1.0 - a->drop_used));
                for (int64_t e = 0; e < T * Tk; e++) dp[e] = pd[e] != 0.0f ? dp[e] * scale : 0.0f;
            }
            pe__softmax_backward(p, dp, ds, T, Tk);
            if (a->m->score_mod_backward) {
                if (plain) pe__score_dot_forward(ctx, qh, kh, plain);
                a->m->score_mod_backward(ctx, &t, plain, ds, Tk);
            }
            if (a->m->flags & PE__SCORE_BLOCK) block_phase(ctx, NULL, a->m->score_mod_backward, &t, PE__TILE_END);
            if (!(a->m->flags & PE__SCORE_OWN)) pe__score_dot_backward(ctx, ds, qh, kh, dqh, dkh);
        }
    free(dp), free(tbuf);
    return PE_OK;
}

void pe__score_dot_forward(const pe__ctx *ctx, const float *q, const float *k, float *s) {
    pe__gemm(0, 1, ctx->T, ctx->Tk, ctx->D, (float)ctx->cfg->scale, q, ctx->C, k, ctx->Ckv, 0.0f,
             s, ctx->Tk);
}

/* forward was s = scale q k^T, so now: dq += scale ds k, dk += scale ds^T q */
void pe__score_dot_backward(const pe__ctx *ctx, const float *ds, const float *q, const float *k,
                            float *dq, float *dk) {
    float scale = (float)ctx->cfg->scale;
    pe__gemm(0, 0, ctx->T, ctx->D, ctx->Tk, scale, ds, ctx->Tk, k, ctx->Ckv, 1.0f, dq, ctx->C);
    pe__gemm(1, 0, ctx->Tk, ctx->D, ctx->T, scale, ds, ctx->Tk, q, ctx->C, 1.0f, dk, ctx->Ckv);
}
