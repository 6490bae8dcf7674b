/* The layer's state, shared by the files of the attention operator: the API and the walks
 * (attention.c), the projected form (projected.c), the core (core.c: the transform stage, then an executor), the reference
 * executor (exec/reference.c), the rotations on caller buffers (rotation.c). Methods never see
 * it: they see a pe__ctx (internal.h). */
#ifndef PE_LAYER_H
#define PE_LAYER_H

#include "internal.h"

struct pe_attention {
    pe_config cfg; /* resolved */
    const pe__method *m;
    int64_t H, Hkv, D, C, Ckv;
    int nparams;
    pe_param_spec specs[PE_MAX_PARAMS];

    /* Saved by the last forward, read by backward. */
    int have_forward;
    int layer; /* the last forward was the layer (x, projections), else the projected form */
    int pre;   /* the call's q, k, v have passed the method's transform stage already (a KV
                  cache's keys, transformed once on append): the core does not run it again */
    int64_t B, T, M, Tk;
    float *mem; /* one block, carved below */
    size_t mem_floats;
    const float *xe;   /* (B, T, C)  x' = x + P[pos] (layer): xebuf, or the caller's x itself where
                          no embedding rewrites it and the run options keep inputs (saved) */
    const float *kvin; /* (B, Tk, C) [mems; x']: kvinbuf, or xe when M = 0 */
    float *xebuf, *kvinbuf;
    /* q, k, v as the core reads them: the layer's own buffers below, or, for a forward_qkv
     * that keeps its inputs (pe_run_options.saved), the caller's arrays wherever the transform
     * stage leaves them alone */
    const float *q, *k, *v;    /* (B, T, C), (B, Tk, Ckv) twice */
    const float *q_in, *k_in;  /* q and k before the rotate hook, where its backward reads them */
    float *qbuf, *kbuf, *vbuf; /* the layer's: the projections' outputs, the copies, the transform's in place */
    float *q_inbuf, *k_inbuf;  /* copies of q_in, k_in (NULL without a rotate hook), unless q_in and k_in
                                  are the caller's arrays (forward_qkv keeping its inputs) */
    float *s;    /* (B, H, T, Tk) */
    float *p;    /* (B, H, T, Tk) */
    int fused;    /* the last forward ran the fused path: s, p are NULL and stats is set */
    int decode;   /* ... its decode kernel (few queries, forward_qkv): the same stats, the fused backward */
    float *stats; /* (2, B, H, T) its row max and 1 / row sum */
    float *o;    /* (B, T, C) */
    int64_t *pos; /* (B, T) then (B, Tk): query and key positions */
    size_t pos_cap;
    uint8_t *mask; /* (B, T, Tk) attn_mask, or NULL */
    size_t mask_cap;
    int has_mask;
    int64_t *ids; /* (B, T) token ids of a layer with its own walk (complex) */
    pe_run_options run;
    pe__ctx ctx;
    /* the fused path's packed keys, values and tile scratch, kept between calls: fresh pages
     * for them on every call cost a page fault each (2-3% of a T=2048 layer) */
    pe__scratch scratch;
    pe__scratch grad; /* backward's gradient buffers (dq, dk, dv, ...), kept for the same reason */
    pe__scratch lift; /* a lifted method's q, k, v and o on the fused path, and their gradients */
    pe__scratch post; /* the output stage's: the executor's o, then backward's dout through it */
    int post_used;    /* the last forward ran the output stage */
    /* attention dropout: set by pe_attention_set_dropout; the last forward's, for its backward */
    double dropout, drop_used;
    uint64_t drop_seed, seed_used;
};

/* attention_sinks' tensor is the layer's last, after the method's (pe_attention_init) */
static inline int pe__method_params(const pe_attention *a) { return a->nparams - (a->cfg.attention_sinks != 0); }
static inline const float *pe__sinks_of(const pe_attention *a, const pe_weights *w) {
    return a->cfg.attention_sinks ? w->param[a->nparams - 1] : NULL;
}
static inline float *pe__dsinks_of(const pe_attention *a, const pe_grads *g) {
    return a->cfg.attention_sinks ? g->dparam[a->nparams - 1] : NULL;
}

/* What the layer (attention.c) and the projected form (projected.c) share: the saved-activation
 * block for (B, T, Tk) (M > 0: the layer's memory; layer: x' too), the attn_mask's copy, the
 * call's positions, context and the method's prepare (begin), the path, and the check that an
 * output is finite (an error naming it otherwise). */
pe_status pe__layer_reserve(pe_attention *a, int64_t B, int64_t T, int64_t Tk, int64_t M, int layer, int masked,
                            pe_err *err);
pe_status pe__layer_reserve_mask(pe_attention *a, int64_t B, int64_t T, int64_t Tk, int masked, pe_err *err);
pe_status pe__layer_begin(pe_attention *a, const pe_weights *w, int64_t B, int64_t T, int64_t Tk,
                          const pe_positions *at, int64_t q_default, int keys_are_queries, pe_err *err);
int pe__layer_use_fused(const pe_attention *a, int64_t B, int64_t T, int64_t Tk, int64_t qoff, int want_scores);
pe_status pe__finite_out(const float *x, int64_t n, const char *name, pe_err *err);

/* The core over a->q, a->k, a->v as projected (core.c): the transform stage (the rotate hook in
 * place, or a lift), then the call's executor (a->fused: the fused path; else the reference
 * path over (B, H, T, Tk) scores); scores, probs out when asked for (reference only). Backward:
 * dout to dq, dk, dv, zeroed by the caller, the transform last. */
pe_status pe__core_forward(pe_attention *a, float *scores, float *probs, pe_err *err);
pe_status pe__core_backward(pe_attention *a, const float *dout, float *dq, float *dk, float *dv, pe_err *err);

/* The reference executor over one context's q, k, v (exec/reference.c): per (b, h) the
 * (T, Tk) scores (scale q.k, score_mod), mask, softmax, dropout, o = p v, value_mod,
 * into a->s, a->p; and its backward (dq, dk, dv added). */
pe_status pe__reference_forward(pe_attention *a, pe__ctx *ctx, const float *q, const float *k, const float *v,
                                float *o, float *scores, float *probs, pe_err *err);
pe_status pe__reference_backward(pe_attention *a, pe__ctx *ctx, const float *q, const float *k, const float *v,
                                 const float *dout, float *dq, float *dk, float *dv, pe_err *err);

#endif
