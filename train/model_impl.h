/* The model's state, shared by model.c (its tensors, forward and backward), state.c (memory and
 * decoding through KV caches) and conventions.c. Private to the trainer. */
#ifndef TR_MODEL_IMPL_H
#define TR_MODEL_IMPL_H

#include "model.h"

typedef struct tr_layer {
    float *ln1w, *ln1b, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo; /* (C) and (C, C) */
    float *ln2w, *ln2b, *fcw, *fcb, *prw, *prb;                 /* fcw (F, C), prw (C, F) */
    pe_attention *att;
    pe_weights w;
    pe_grads g;
} tr_layer;

/* A shared tensor that passes through a LayerNorm over its last dimension. */
typedef struct tr_normed {
    int t, tw, tb;      /* tensors: raw table, LayerNorm weight, bias */
    int64_t rows, cols;
    float *y, *dy;      /* (rows, cols) what the layers read, and its gradient */
    float *mean, *rstd; /* (rows) */
} tr_normed;

typedef struct tr_acts {
    float *block;
    int64_t cap; /* tokens */
    float *x;    /* (layers + 1, N, C) residual stream before each block, and the last */
    float *ln1, *xmid, *ln2;      /* (layers, N, C) */
    float *ln1s, *ln2s;           /* (layers, 2, N) mean, rstd */
    float *fc, *act, *gt;         /* (layers, N, F); gt: GELU's tanh, for its backward */
    float *lnf, *lnfs, *probs;    /* (N, C), (2, N), (N, V) */
    float *tmp, *dx, *dln, *dfc, *dlogits; /* backward scratch */
    int32_t *in, *tgt;
    int64_t *pos, *ids; /* (N) positions, token ids as int64 (complex layers) */
} tr_acts;

struct tr_model {
    tr_model_config cfg;
    tr_placement place;
    tr_tensor t[TR_MAX_TENSORS];
    int nt;
    float *params, *grads;
    size_t n;
    float *wte, *lnfw, *lnfb; /* (V, C), (C), (C) */
    int t_wte, t_lnfw, t_lnfb;
    tr_layer *layer;
    tr_normed normed[PE_MAX_PARAMS];
    int n_normed;

    /* input placement: a one-head layer with identity value and output projections and
     * zero queries and keys gives y = P[pos] for a zero x (one token per sequence) */
    pe_attention *probe;
    pe_weights probe_w;
    pe_grads probe_g;
    float *eye, *zero;            /* (C, C) */
    float *P, *dP, *px;           /* (P, C) */
    int64_t *ppos, pcap, pmin, pmax, pvalid; /* pvalid: P holds [pmin, pmax] (no tensors) */
    int probe_params;

    /* memory (layers, mem_B, mem_M, C) */
    float *mem;
    int64_t mem_B, mem_M, mem_cap;
    int has_mem;

    tr_acts a;
    int64_t B, T, count;
    int have_forward, used_mem;
    float *probs_out;    /* tr_model_attention: block probs_layer's probabilities go here */
    int64_t probs_layer;
    /* tr_model_profile: seconds in the attention layers and in the trainer's own GEMMs */
    int profile;
    float drop_p;           /* dropout of the next forward and backward (tr_model_set_dropout) */
    uint64_t drop_key;
    int64_t drop_row0;
    double prof_attn, prof_gemm;
};

/* The input placement's encoding of positions pos (N) into m->P, and backward: the probe's
 * tensors' gradient from dx (model_input.c) */
pe_status tr_model_input_forward(tr_model *m, const int64_t *pos, int64_t N, pe_err *err);
pe_status tr_model_input_backward(tr_model *m, pe_err *err);

/* The attention of a layer running method (conventions.c): heads, causal or not, the config's
 * keys that apply to the method, its scale where its reference leaves the scores unscaled, its
 * length-sized keys fitted to the training length, and layer's window of the config's windows
 * (layer -1: none). */
pe_status tr_make_attention(pe_attention **att, const tr_model_config *c, const char *method, int64_t heads,
                            int causal, int64_t layer, pe_err *err);

#endif
