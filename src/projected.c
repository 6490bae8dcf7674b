/* The projected form (pe_attention_forward_qkv, backward_qkv) and the KV cache's attend over it:
 * the caller's q, k, v (or a cache's keys) through the layer's core, with what the run options
 * say it keeps for backward. The set-up it shares with the layer (buffers, positions and
 * context, the path) is attention.c's.
 *
 * Legend: B batch, T queries, Tk keys, H heads, Hkv kv heads, D head_dim, C = H*D, Ckv = Hkv*D. */
#include "layer.h"

/* forward_qkv's q, k, v for the core: copies into the layer's buffers (PE_SAVED_COPIES), or
 * the caller's arrays read in place, copied only where the transform stage rewrites them, and
 * not even then where it can write them from the caller's (rotates_from: the layer's buffer is
 * then only its output); the caller's q and k are then also the transform's inputs its
 * backward may read (q_in, k_in). */
static void take_inputs(pe_attention *a, const float *q, const float *k, const float *v) {
    const int64_t nq = a->B * a->T * a->C, nk = a->B * a->Tk * a->Ckv;
    const int kept = a->run.saved != PE_SAVED_COPIES;
    const unsigned rewritten = !kept ? PE__TQ | PE__TK | PE__TV : a->m->rotate_forward && !a->pre ? a->ctx.transforms : 0;
    const unsigned from = kept ? rewritten & a->ctx.rotates_from : 0, copied = rewritten & ~from;
    a->q = copied & PE__TQ ? memcpy(a->qbuf, q, sizeof(float) * nq) : from & PE__TQ ? a->qbuf : q;
    a->k = copied & PE__TK ? memcpy(a->kbuf, k, sizeof(float) * nk) : from & PE__TK ? a->kbuf : k;
    a->v = copied & PE__TV ? memcpy(a->vbuf, v, sizeof(float) * nk) : from & PE__TV ? a->vbuf : v;
    a->ctx.q_src = from & PE__TQ ? q : NULL, a->ctx.k_src = from & PE__TK ? k : NULL, a->ctx.v_src = from & PE__TV ? v : NULL;
    if (kept) a->q_in = q, a->k_in = k;
}

pe_status pe_attention_forward_qkv(pe_attention *a, const pe_weights *w, const float *q, const float *k,
                                   const float *v, int64_t B, int64_t T, int64_t Tk, const pe_positions *at,
                                   float *o, float *scores, float *probs, pe_err *err) {
    a->have_forward = 0;
    if ((a->m->flags & PE__INPUT) && !a->pre)
        return pe_error(err, PE_EINVAL, "method %s acts on the input embedding, not on q and k: it has no projected form",
                        a->m->name);
    if (a->m->flags & PE__LAYER_INPUT)
        return pe_error(err, PE_EINVAL, "method %s computes its terms from the layer input x, which q, k and v do not carry: "
                        "it has no projected form (run the layer on x)", a->m->name);
    if (B < 1 || T < 1 || Tk < 1)
        return pe_error(err, PE_EINVAL, "batch %lld, queries %lld and keys %lld must be >= 1", (long long)B,
                        (long long)T, (long long)Tk);
    if (!q || !k || !v || !o) return pe_error(err, PE_EINVAL, "q, k, v and o are required");
    pe_weights none = {0};
    if (!w) w = &none;
    a->fused = pe__layer_use_fused(a, B, T, Tk, Tk - T, scores || probs);
    /* few queries: the decode kernel (after the core's transform stage), which saves the fused
     * path's statistics for its backward */
    a->decode = a->run.path != PE_PATH_REFERENCE && !(scores || probs) && a->dropout == 0 &&
                pe__decode_eligible(a->m, 1, a->H, a->Hkv, T, at && at->mask);
    if (a->decode) a->fused = 1;
    a->layer = 0;
    a->M = 0;
    pe_status st = pe__layer_reserve(a, B, T, Tk, 0, 0, at && at->mask, err);
    if (st || (st = pe__layer_begin(a, w, B, T, Tk, at, Tk - T, 0, err))) return st;
    take_inputs(a, q, k, v);
    if ((st = pe__core_forward(a, scores, probs, err))) return st;
    memcpy(o, a->o, sizeof(float) * B * T * a->C);
    if ((st = pe__finite_out(o, B * T * a->C, "o", err))) return st;
    a->have_forward = a->run.saved != PE_SAVED_NONE;
    return PE_OK;
}

static pe_status attend_kv(pe_attention *a, const pe_weights *w, const float *q, const float *k, const float *v,
                           int64_t kv_stride, const float *const *rows, int64_t B, int64_t T, int64_t Tk,
                           const pe_positions *at, float *o, pe_err *err) {
    a->have_forward = 0;
    pe_weights none = {0};
    if (!w) w = &none;
    pe_status st;
    const int masked = at && at->mask;
    if (a->run.path != PE_PATH_REFERENCE && pe__decode_eligible(a->m, a->pre, a->H, a->Hkv, T, masked)) {
        a->fused = 1, a->layer = 0, a->M = 0;
        if ((st = pe__layer_reserve_mask(a, B, T, Tk, masked, err)) || (st = pe__layer_begin(a, w, B, T, Tk, at, Tk - T, 0, err)))
            return st;
        if ((st = pe__decode_forward(&a->ctx, a->m, q, k, v, kv_stride, rows, o, NULL, err))) return st;
        return pe__finite_out(o, B * T * a->C, "o", err);
    }
    float *buf = NULL; /* the projected form reads (B, Tk, Ckv) */
    const int64_t Ckv = a->Ckv;
    if (rows || (B > 1 && kv_stride != Tk * Ckv)) {
        if (!(buf = malloc(sizeof(float) * (size_t)(2 * B * Tk * Ckv))))
            return pe_error(err, PE_ENOMEM, "out of memory for %lld cached keys", (long long)(B * Tk));
        pe__gather_rows(buf, k, v, kv_stride, rows, B, Tk, Ckv);
        k = buf, v = buf + B * Tk * Ckv;
    }
    st = pe_attention_forward_qkv(a, w, q, k, v, B, T, Tk, at, o, NULL, NULL, err);
    a->have_forward = 0;
    free(buf);
    return st;
}

pe_status pe__attention_attend_kv(pe_attention *a, const pe_weights *w, const float *q, const float *k,
                                  const float *v, int64_t kv_stride, const float *const *rows, int64_t B, int64_t T,
                                  int64_t Tk, const pe_positions *at, int transformed, float *o, pe_err *err) {
    const double rate = a->dropout; /* a cache decodes: no dropout, and no backward, so its keys are read in place */
    const int saved = a->run.saved;
    a->dropout = 0, a->run.saved = PE_SAVED_NONE;
    a->pre = transformed;
    pe_status st = attend_kv(a, w, q, k, v, kv_stride, rows, B, T, Tk, at, o, err);
    a->dropout = rate, a->run.saved = saved;
    a->pre = 0;
    return st;
}

/* Whether [a, a + na) and [b, b + nb) (floats) share memory (b NULL: no) */
static int overlaps(const float *a, int64_t na, const float *b, int64_t nb) {
    return b && (uintptr_t)a < (uintptr_t)(b + nb) && (uintptr_t)b < (uintptr_t)(a + na);
}

pe_status pe_attention_backward_qkv(pe_attention *a, const pe_weights *w, const float *dout, float *dq,
                                    float *dk, float *dv, pe_grads *g, pe_err *err) {
    if (!a->have_forward || a->layer)
        return pe_error(err, PE_EINVAL, "backward_qkv without a forward_qkv");
    if (!dout) return pe_error(err, PE_EINVAL, "dout is required");
    pe_grads none = {0};
    pe_weights wnone = {0};
    const int64_t nq = a->B * a->T * a->C, nk = a->B * a->Tk * a->Ckv;
    /* the core adds into dq, dk, dv: the caller's arrays, zeroed, where nothing the backward
     * reads (dout, the saved q, k, v and the transform's inputs) nor another of them shares
     * their memory; else (and for NULL) a scratch copied out at the end */
    float *given[3] = {dq, dk, dv}, *into[3];
    const int64_t len[3] = {nq, nk, nk};
    const float *reads[6] = {dout, a->q, a->k, a->v, a->q_in, a->k_in};
    const int64_t rlen[6] = {nq, nq, nk, nk, nq, nk};
    float *work = pe__scratch_get(&a->grad, (size_t)(nq + 2 * nk));
    if (!work) return pe_error(err, PE_ENOMEM, "out of memory for %lld floats of gradients", (long long)(nq + 2 * nk));
    for (int i = 0, direct; i < 3; i++) {
        direct = given[i] != NULL;
        for (int r = 0; r < 6 && direct; r++) direct = !overlaps(given[i], len[i], reads[r], rlen[r]);
        for (int o = 0; o < 3 && direct; o++) direct = o == i || !overlaps(given[i], len[i], given[o], len[o]);
        into[i] = direct ? given[i] : work + (i ? nq + (i - 1) * nk : 0);
        memset(into[i], 0, sizeof(float) * (size_t)len[i]);
    }
    a->ctx.w = w ? w : &wnone;
    a->ctx.g = g ? g : &none;
    a->ctx.sinks = pe__sinks_of(a, a->ctx.w), a->ctx.dsinks = pe__dsinks_of(a, a->ctx.g);
    pe_status st = pe__core_backward(a, dout, into[0], into[1], into[2], err);
    if (!st && a->m->finish_backward) a->m->finish_backward(&a->ctx);
    static const char *const name[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3 && !st; i++) st = pe__finite_out(into[i], len[i], name[i], err);
    for (int i = 0; i < 3 && !st; i++)
        if (given[i] && into[i] != given[i]) memcpy(given[i], into[i], sizeof(float) * (size_t)len[i]);
    a->ctx.g = NULL;
    return st;
}
