/* An engine's step over the keys and values it keeps (pe_attention_forward_kvcache): what a
 * serving engine calls for every decode step, with its own cache in its own rows. The keys and
 * values are read in place; few queries go through the decode path (exec/decode.c), the rest
 * through the projected form. Keys and values that the method transforms (rope, xpos, floater)
 * are either transformed already, as an engine's cache holds them (`rotated`), or transformed
 * here into a copy, once; the queries are transformed here, and the output stage (rope_values)
 * runs last, as a pe_kv_cache does. Nothing is kept for backward. */
#include "layer.h"

/* The method's stages on rows held outside a call, at their own positions in an attention over
 * [lo, hi] (a cache's keys on append, its queries on attend, an engine's step): embed and
 * rotate hooks (pe__attention_apply), the output stage (pe__attention_output). */
pe_status pe__attention_apply(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                              int64_t hi, float *x, float *q, float *k, float *v, pe_err *err) {
    if (!(x && a->m->embed_forward) && !((q || k) && a->m->rotate_forward)) return PE_OK;
    pe__ctx ctx;
    pe_status st = pe__attention_context(a, w, n, pos, lo, hi, &ctx, err);
    if (!st && x && a->m->embed_forward) a->m->embed_forward(&ctx, x);
    if (!st && (q || k) && a->m->rotate_forward) a->m->rotate_forward(&ctx, q, k, v);
    pe__attention_release(a, &ctx);
    return st;
}

pe_status pe__attention_output(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                               int64_t hi, float *o, pe_err *err) {
    if (!(a->m->output_used && a->m->output_used(&a->cfg))) return PE_OK;
    pe__ctx ctx;
    pe_status st = pe__attention_context(a, w, n, pos, lo, hi, &ctx, err);
    if (!st) a->m->output_forward(&ctx, o);
    pe__attention_release(a, &ctx);
    return st;
}

/* Row b's positions of a call: queries at at->pos, else k_len - q_len + t (bottom-right, per
 * row); keys at at->key_pos, else 0 .. Tk-1; each on every axis; padding (past the row's
 * lengths) at the row's first key position, as the core pads, so that [lo, hi] is the real
 * tokens' range and no rotation reaches past it. */
static void call_positions(const pe_positions *at, int64_t B, int64_t T, int64_t Tk, int64_t A, int64_t *qpos,
                           int64_t *kpos, int64_t *lo, int64_t *hi) {
    *lo = INT64_MAX, *hi = INT64_MIN;
    for (int64_t b = 0; b < B; b++) {
        const int64_t kl = at && at->k_lens ? at->k_lens[b] : Tk, ql = at && at->q_lens ? at->q_lens[b] : T;
        for (int64_t t = 0; t < T; t++)
            for (int64_t x = 0; x < A; x++) {
                const int64_t p = t >= ql ? (at && at->key_pos ? at->key_pos[(at->key_pos_batched ? b * Tk : 0) * A + x] : 0)
                                  : at && at->pos ? at->pos[((at->pos_batched ? b * T : 0) + t) * A + x] : kl - ql + t;
                qpos[(b * T + t) * A + x] = p;
                if (t < ql) *lo = p < *lo ? p : *lo, *hi = p > *hi ? p : *hi;
            }
        for (int64_t u = 0; u < Tk; u++)
            for (int64_t x = 0; x < A; x++) {
                const int64_t p = at && at->key_pos ? at->key_pos[((at->key_pos_batched ? b * Tk : 0) + (u < kl ? u : 0)) * A + x]
                                                    : u < kl ? u : 0;
                kpos[(b * Tk + u) * A + x] = p;
                if (u < kl) *lo = p < *lo ? p : *lo, *hi = p > *hi ? p : *hi;
            }
    }
}

pe_status pe_attention_forward_kvcache(pe_attention *a, const pe_weights *w, const float *q, const float *k,
                                       const float *v, int64_t kv_stride, int64_t B, int64_t T, int64_t Tk,
                                       const pe_positions *at, int rotated, float *o, pe_err *err) {
    a->have_forward = 0;
    if (B < 1 || T < 1 || Tk < 1)
        return pe_error(err, PE_EINVAL, "forward_kvcache: batch %lld, queries %lld and keys %lld must be >= 1", (long long)B,
                        (long long)T, (long long)Tk);
    if (!q || !k || !v || !o) return pe_error(err, PE_EINVAL, "forward_kvcache: q, k_cache, v_cache and o are required");
    if (kv_stride < Tk * a->Ckv)
        return pe_error(err, PE_EINVAL, "forward_kvcache: kv_stride %lld is below Tk * kv_heads * head_dim (%lld)",
                        (long long)kv_stride, (long long)(Tk * a->Ckv));
    if (a->m->flags & (PE__INPUT | PE__LAYER_INPUT | PE__COMPLEX))
        return pe_error(err, PE_EINVAL, "forward_kvcache: method %s has no projected form (it reads the layer's input)",
                        a->m->name);
    if (a->m->flags & PE__MEMORY)
        return pe_error(err, PE_EINVAL, "forward_kvcache: method %s attends over its own memory, not a cache", a->m->name);
    const int transforms = a->m->rotate_forward != NULL;
    if (!transforms) return pe__attention_attend_kv(a, w, q, k, v, kv_stride, B, T, Tk, at, 0, o, err);

    /* the call's positions, explicit, and their range: the frame of every rotation here */
    const int64_t A = pe_attention_axes(a, w), C = a->C, Ckv = a->Ckv;
    if (at && at->pos && (at->axes > 1 ? at->axes : 1) != A)
        return pe_error(err, PE_EINVAL, "forward_kvcache: positions of %lld axes, but the layer reads %lld",
                        (long long)(at->axes > 1 ? at->axes : 1), (long long)A);
    /* a transform hook may change v too (floater adds its terms, rope_values rotates it) */
    const size_t nq = (size_t)(B * T * C), nk = rotated ? 0 : (size_t)(2 * B * Tk * Ckv);
    int64_t *qpos = malloc(sizeof(int64_t) * (size_t)(B * (T + Tk) * A));
    float *buf = malloc(sizeof(float) * (nq + nk));
    if (!qpos || !buf) {
        free(qpos), free(buf);
        return pe_error(err, PE_ENOMEM, "out of memory for the transformed queries of %lld rows", (long long)B);
    }
    int64_t *kpos = qpos + B * T * A, lo, hi;
    call_positions(at, B, T, Tk, A, qpos, kpos, &lo, &hi);
    float *qt = buf, *kt = buf + nq, *vt = kt + B * Tk * Ckv;
    memcpy(qt, q, sizeof(float) * nq);
    pe_status st = PE_OK;
    if (!rotated) { /* the keys (and values) into contiguous rows, transformed once */
        for (int64_t b = 0; b < B; b++) {
            memcpy(kt + b * Tk * Ckv, k + b * kv_stride, sizeof(float) * (size_t)(Tk * Ckv));
            memcpy(vt + b * Tk * Ckv, v + b * kv_stride, sizeof(float) * (size_t)(Tk * Ckv));
        }
        st = pe__attention_apply(a, w, B * Tk, kpos, lo, hi, NULL, NULL, kt, vt, err);
    }
    if (!st) st = pe__attention_apply(a, w, B * T, qpos, lo, hi, NULL, qt, NULL, NULL, err);
    pe_positions cat = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .axes = A,
                        .mask = at ? at->mask : NULL, .mask_batched = at ? at->mask_batched : 0,
                        .q_lens = at ? at->q_lens : NULL, .k_lens = at ? at->k_lens : NULL};
    if (!st)
        st = pe__attention_attend_kv(a, w, qt, rotated ? k : kt, rotated ? v : vt, rotated ? kv_stride : Tk * Ckv, B, T, Tk,
                                     &cat, 1, o, err);
    if (!st) st = pe__attention_output(a, w, B * T, qpos, lo, hi, o, err);
    free(qpos), free(buf);
    return st;
}
