/* The core: the transform stage, then an executor. Over q, k, v as projected, a method's
 * transform runs first, in place (the rotate hook: rotations, ODE biases, query scaling) or to
 * wider vectors (a lift: PoPE), and the call's executor attends over what it produced: the
 * fused path (exec/fused.c, tiles and an online softmax), or the reference path
 * (exec/reference.c, (T, Tk) scores); the decode path (exec/decode.c) serves few queries
 * against a cache. Every executor takes its keys from one visibility rule (pe__band_range).
 * Last, where the config asks for it, the method's output stage (rope_values: o rotated back at
 * the query positions). */
#include "layer.h"

/* A lifted method (pe__method.lift_width), on either executor: q and k lifted to width W >= D
 * per query head, attended as H heads of W with the plain score scale q'.k' over the values as
 * they are (pe__ctx.Dv = D), so that o and dout are the layer's own and the p v products stay D
 * wide. A lifted head is its own kv head: with kv_heads < heads each query head gets a copy of
 * its values (and its dv is summed back), else v and dv are read and written in place. The
 * lift is the method's only implementation of its maths. The lifted q', k' stay in a->lift for
 * backward, which lifts dq', dk' back through the method. */
static pe__ctx lifted_ctx(const pe__ctx *ctx, int64_t W) {
    pe__ctx sub = *ctx;
    sub.D = W, sub.C = ctx->H * W, sub.Ckv = ctx->H * W, sub.Hkv = ctx->H;
    return sub;
}

/* a->lift's parts: q', k' (H heads of W per row), v' (H heads of D; with kv_heads < heads), and
 * their gradients dq', dk', dv' */
typedef struct lifted {
    int64_t W, nq, nk, nv; /* floats of q', k', v' (nv 0: v read in place) */
    float *q, *k, *v, *dq, *dk, *dv;
} lifted;

/* The parts' sizes, and with base their places (a->lift: 2 (nq + nk + nv) floats) */
static lifted lifted_parts(const pe_attention *a, float *base) {
    const int64_t W = a->m->lift_width(&a->cfg, a->D);
    lifted l = {.W = W, .nq = a->B * a->T * a->H * W, .nk = a->B * a->Tk * a->H * W,
                .nv = a->Hkv < a->H ? a->B * a->Tk * a->H * a->D : 0};
    if (base) l.q = base, l.k = l.q + l.nq, l.v = l.k + l.nk, l.dq = l.v + l.nv, l.dk = l.dq + l.nq, l.dv = l.dk + l.nk;
    return l;
}

/* dst (rows, H, D) = head h / group of src (rows, row stride ld) */
static void repeat_heads(float *dst, const float *src, int64_t rows, int64_t ld, int64_t H, int64_t group, int64_t D) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++) memcpy(dst + (r * H + h) * D, src + r * ld + (h / group) * D, sizeof(float) * D);
}

/* The other way: head h / group of dst (rows, row stride ld) += src's head h, the heads of a
 * group added in order */
static void sum_heads(float *dst, const float *src, int64_t rows, int64_t ld, int64_t H, int64_t group, int64_t D) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++) {
            float *d = dst + r * ld + (h / group) * D;
            const float *x = src + (r * H + h) * D;
            for (int64_t e = 0; e < D; e++) d[e] += x[e];
        }
}

/* attention_sinks' gradient, the same for every executor: head h's logit sigma_h is one more
 * entry of each query's softmax whose value is 0, so dL/dsigma_h = sum_i p_sink_i (0 - delta_i)
 * with delta_i = sum_j p_ij dp_ij = do_i . o_i (as FlashAttention's backward forms it; with
 * dropout and value terms too, as o holds them). p_sink_i from the fused path's row statistics
 * (max m and 1 / sum, the sink included) or the reference path's scores. Fixed order: (b, i). */
static void sinks_backward(const pe_attention *a, const pe__ctx *ctx, const float *o, const float *dout) {
    const int64_t B = ctx->B, H = ctx->H, T = ctx->T, Tk = ctx->Tk, D = ctx->Dv, C = H * D;
    for (int64_t h = 0; h < H; h++) {
        double acc = 0;
        for (int64_t b = 0; b < B; b++) {
            int64_t Tb, Tkb, qoff;
            pe__row_lens(ctx, b, &Tb, &Tkb, &qoff);
            for (int64_t i = 0; i < Tb; i++) {
                float ps;
                if (a->fused) {
                    const float m = a->stats[(b * H + h) * T + i], il = a->stats[(B * H + b * H + h) * T + i];
                    ps = il > 0 ? expf(ctx->sinks[h] - m) * il : 0.0f;
                } else {
                    pe__softmax_sink_weights(a->s + ((b * H + h) * T + i) * Tk, 1, Tk, ctx->sinks[h], &ps);
                }
                const float *oi = o + (b * T + i) * C + h * D, *di = dout + (b * T + i) * C + h * D;
                double delta = 0;
                for (int64_t d = 0; d < D; d++) delta += (double)oi[d] * di[d];
                acc -= ps * delta;
            }
        }
        ctx->dsinks[h] += (float)acc;
    }
}

/* The call's executor over q, k, v of ctx's widths: fused (tiles, online softmax) or reference */
static pe_status execute_forward(pe_attention *a, pe__ctx *ctx, const float *q, const float *k, const float *v,
                                 float *o, float *scores, float *probs, pe_err *err) {
    if (!a->fused) return pe__reference_forward(a, ctx, q, k, v, o, scores, probs, err);
    a->drop_used = 0, a->seed_used = a->drop_seed;
    if (a->decode) return pe__decode_forward(ctx, a->m, q, k, v, ctx->Tk * ctx->Ckv, NULL, o, a->stats, err);
    return pe__fused_forward(ctx, a->m, q, k, v, o, a->stats, err);
}
static pe_status execute_backward(pe_attention *a, pe__ctx *ctx, const float *q, const float *k, const float *v,
                                  const float *o, const float *dout, float *dq, float *dk, float *dv, pe_err *err) {
    if (!a->fused) {
        pe_status st = pe__reference_backward(a, ctx, q, k, v, dout, dq, dk, dv, err);
        if (!st && ctx->dsinks) sinks_backward(a, ctx, o, dout);
        return st;
    }
    pe_status st = pe__fused_backward(ctx, a->m, a->specs, pe__method_params(a), q, k, v, o, a->stats, dout, dq, dk, dv, err);
    if (!st && ctx->dsinks) sinks_backward(a, ctx, o, dout);
    return st;
}

/* A lifted method on either executor: lift q, k, pad v, attend H heads of W, unpad o. */
static pe_status lifted_forward(pe_attention *a, float *scores, float *probs, pe_err *err) {
    pe__ctx *ctx = &a->ctx;
    const lifted size = lifted_parts(a, NULL);
    float *base = pe__scratch_get(&a->lift, (size_t)(2 * (size.nq + size.nk + size.nv)));
    if (!base) return pe_error(err, PE_ENOMEM, "out of memory for the lifted q, k and v of %s", a->m->name);
    const lifted l = lifted_parts(a, base);
    a->m->lift_forward(ctx, a->q, a->k, l.q, l.k);
    if (l.nv) repeat_heads(l.v, a->v, a->B * a->Tk, a->Ckv, a->H, a->H / a->Hkv, a->D);
    pe__ctx sub = lifted_ctx(ctx, l.W);
    pe_status st = execute_forward(a, &sub, l.q, l.k, l.nv ? l.v : a->v, a->o, scores, probs, err);
    ctx->tiles = sub.tiles; /* the mask census, made once for forward and backward */
    return st;
}

/* o: the executor's (pe__core_backward's) */
static pe_status lifted_backward(pe_attention *a, const float *o, const float *dout, float *dq, float *dk, float *dv,
                                 pe_err *err) {
    pe__ctx *ctx = &a->ctx;
    const lifted l = lifted_parts(a, a->lift.p);
    memset(l.dq, 0, sizeof(float) * (size_t)(l.nq + l.nk + l.nv)); /* dq', dk', dv' */
    pe__ctx sub = lifted_ctx(ctx, l.W);
    pe_status st = execute_backward(a, &sub, l.q, l.k, l.nv ? l.v : a->v, o, dout, l.dq, l.dk, l.nv ? l.dv : dv, err);
    ctx->tiles = sub.tiles;
    if (st) return st;
    if (l.nv) sum_heads(dv, l.dv, a->B * a->Tk, a->Ckv, a->H, a->H / a->Hkv, a->D);
    a->m->lift_backward(ctx, a->q, a->k, l.dq, l.dk, dq, dk);
    return PE_OK;
}

/* Passes 3 and 4 over a->q, a->k, a->v (as projected): the transform stage (the rotate hook in
 * place, or a lift to W wide vectors), then the executor: scores, bias, mask, softmax and the
 * weighted values into a->o; then the output stage, the executor's o kept for backward. With
 * a->pre (a cache's transformed q, k, v) the cache runs both stages itself. */
pe_status pe__core_forward(pe_attention *a, float *scores, float *probs, pe_err *err) {
    pe__ctx *ctx = &a->ctx;
    if (a->m->rotate_forward && !a->pre) {
        if (ctx->reads_inputs && a->q_in == a->q_inbuf) { /* not the caller's arrays: keep a copy */
            memcpy(a->q_inbuf, a->qbuf, sizeof(float) * a->B * a->T * a->C);
            memcpy(a->k_inbuf, a->kbuf, sizeof(float) * a->B * a->Tk * a->Ckv);
        }
        /* what it rewrites sits in the layer's buffers (forward_qkv copied it there) */
        const unsigned t = ctx->transforms;
        a->m->rotate_forward(ctx, t & PE__TQ ? a->qbuf : NULL, t & PE__TK ? a->kbuf : NULL, t & PE__TV ? a->vbuf : NULL);
    }
    a->post_used = !a->pre && a->m->output_used && a->m->output_used(&a->cfg);
    pe_status st = a->m->lift_width ? lifted_forward(a, scores, probs, err)
                                    : execute_forward(a, ctx, a->q, a->k, a->v, a->o, scores, probs, err);
    if (st || !a->post_used) return st;
    const size_t n = (size_t)(a->B * a->T * a->C);
    float *kept = pe__scratch_get(&a->post, 2 * n); /* the executor's o, then room for dout */
    if (!kept) return pe_error(err, PE_ENOMEM, "out of memory for the output stage of %s", a->m->name);
    memcpy(kept, a->o, sizeof(float) * n);
    a->m->output_forward(ctx, a->o);
    return PE_OK;
}

/* The backward of core_forward: dout (B, T, C) to dq (B, T, C), dk, dv (B, Tk, Ckv), all
 * zeroed by the caller: the executor in reverse (fused: tiles recomputed), the transform last. */
pe_status pe__core_backward(pe_attention *a, const float *dout, float *dq, float *dk, float *dv, pe_err *err) {
    pe__ctx *ctx = &a->ctx;
    const float *o = a->o;
    if (a->post_used) { /* dout through the output stage's transpose, beside the executor's o */
        const size_t n = (size_t)(a->B * a->T * a->C);
        float *d = a->post.p + n;
        memcpy(d, dout, sizeof(float) * n);
        a->m->output_backward(ctx, d);
        o = a->post.p, dout = d;
    }
    pe_status st = a->m->lift_width ? lifted_backward(a, o, dout, dq, dk, dv, err)
                                    : execute_backward(a, ctx, a->q, a->k, a->v, o, dout, dq, dk, dv, err);
    if (st) return st;
    if (a->m->rotate_backward)
        a->m->rotate_backward(ctx, dq, dk, dv, ctx->reads_inputs ? a->q_in : NULL, ctx->reads_inputs ? a->k_in : NULL);
    return PE_OK;
}

