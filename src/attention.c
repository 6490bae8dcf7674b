/* The attention operator's API: the layer and its reverse walk, and what the projected form
 * (projected.c) and the KV cache's attend share with it: buffers, the call's positions and
 * context, the path. Nothing here is method-specific: methods act
 * only through their hooks.
 *
 * Legend: B batch, T queries, Tk keys (the layer's M memory + T), H heads, Hkv kv heads,
 * D head_dim, C = H*D, Ckv = Hkv*D.
 *
 * Two forms share one core (core.c: the transform stage, then the fused or the reference
 * executor over q, k, v): the projected form hands it the caller's q, k, v with their
 * positions; the layer is the projections, then the core, then wo. A method with a walk of its
 * own (complex: token ids and two streams) gets the context and its prepare here and does the
 * rest in its file. */
#include "layer.h"

pe_status pe_attention_set_dropout(pe_attention *a, double p, uint64_t seed, pe_err *err) {
    if (!(p >= 0 && p < 1)) return pe_error(err, PE_EINVAL, "dropout: probability %g is not within 0 .. 1 (1 excluded)", p);
    if (p > 0 && pe_attention_is_complex(a))
        return pe_error(err, PE_EINVAL, "dropout: method %s walks its own two streams and has no dropout", a->m->name);
    a->dropout = p, a->drop_seed = seed;
    return PE_OK;
}

pe_status pe_attention_init(pe_attention **out, const pe_config *cfg, int64_t C, pe_err *err) {
    *out = NULL;
    pe_attention *a = calloc(1, sizeof *a);
    if (!a) return pe_error(err, PE_ENOMEM, "out of memory");
    a->cfg = *cfg;
    pe_status st = pe__config_resolve(&a->cfg, C, err);
    if (st) {
        free(a);
        return st;
    }
    a->m = pe__method_get(a->cfg.method);
    if (a->m->variant) a->m = a->m->variant(&a->cfg);
    a->H = a->cfg.heads;
    a->Hkv = a->cfg.kv_heads;
    a->C = C;
    a->D = C / a->H;
    a->Ckv = a->Hkv * a->D;
    memset(a->specs, 0, sizeof a->specs);
    a->nparams = a->m->params ? a->m->params(&a->cfg, a->H, a->D, a->specs) : 0;
    PE_ASSERT(a->nparams < PE_MAX_PARAMS);
    if (a->cfg.attention_sinks) /* the layer's, after the method's: GPT-OSS starts them at N(0, 0.02) */
        a->specs[a->nparams++] = (pe_param_spec){"sinks", 1, {a->H}, 0, {PE_INIT_NORMAL, 0.02, 0}};
    for (int i = 0; i < a->nparams; i++) /* what the references use for tables they say nothing of */
        if (!a->specs[i].init.kind) a->specs[i].init = (pe_init){PE_INIT_NORMAL, 0.02, 0};
    *out = a;
    return PE_OK;
}

void pe_attention_free(pe_attention *a) {
    if (!a) return;
    if (a->m->release && a->ctx.state) a->m->release(&a->ctx);
    free(a->mem);
    free(a->pos);
    free(a->mask);
    free(a->ctx.tiles);
    free(a->ids);
    free(a->scratch.p);
    free(a->grad.p);
    free(a->lift.p);
    free(a->post.p);
    free(a);
}

const pe_config *pe_attention_config(const pe_attention *a) { return &a->cfg; }
void pe_attention_set_run_options(pe_attention *a, const pe_run_options *opt) {
    a->run = opt ? *opt : (pe_run_options){0};
    a->run.isa[sizeof a->run.isa - 1] = 0;
}
int64_t pe_attention_head_dim(const pe_attention *a) { return a->D; }
int pe_attention_has_memory(const pe_attention *a) { return (a->m->flags & PE__MEMORY) != 0; }
int pe_attention_is_complex(const pe_attention *a) { return (a->m->flags & PE__COMPLEX) != 0; }

int pe_attention_params(const pe_attention *a, pe_param_spec *specs) {
    if (specs) memcpy(specs, a->specs, sizeof(pe_param_spec) * a->nparams); /* NULL: the count alone */
    return a->nparams;
}

/* The attn_mask copy of a call (begin holds the positions). */
pe_status pe__layer_reserve_mask(pe_attention *a, int64_t B, int64_t T, int64_t Tk, int masked, pe_err *err) {
    if (masked && (size_t)(B * T * Tk) > a->mask_cap) {
        free(a->mask);
        a->mask = malloc((size_t)(B * T * Tk));
        a->mask_cap = a->mask ? (size_t)(B * T * Tk) : 0;
        if (!a->mask) return pe_error(err, PE_ENOMEM, "out of memory for the %lld x %lld attn_mask", (long long)T, (long long)Tk);
    }
    return PE_OK;
}

/* Carves the saved-activation block for (B, T, Tk); M > 0: the layer's memory. */
pe_status pe__layer_reserve(pe_attention *a, int64_t B, int64_t T, int64_t Tk, int64_t M, int layer,
                            int masked, pe_err *err) {
    const int64_t C = a->C, Ckv = a->Ckv, H = a->H;
    const int rot = a->m->rotate_forward != NULL, walk = a->m->walk_forward != NULL;
    size_t n = (size_t)(B * T * C) * 2 + (size_t)(B * Tk * Ckv) * 2 + (size_t)(B * H * T * (a->fused ? 1 : Tk)) * 2;
    if (layer) n += (size_t)(B * T * C);
    if (M) n += (size_t)(B * Tk * C);
    if (rot) n += (size_t)(B * T * C) + (size_t)(B * Tk * Ckv);
    if (walk) n = 0; /* the method's walk keeps its own activations; it needs the ids */
    if (walk) {
        free(a->ids);
        if (!(a->ids = malloc(sizeof(int64_t) * B * T))) return pe_error(err, PE_ENOMEM, "out of memory for ids");
    }
    if (n > a->mem_floats) {
        free(a->mem);
        a->mem = malloc(n * sizeof(float));
        a->mem_floats = a->mem ? n : 0;
        if (!a->mem) return pe_error(err, PE_ENOMEM, "out of memory for %zu floats of activations", n);
    }
    pe_status st = pe__layer_reserve_mask(a, B, T, Tk, masked, err);
    if (st || !n) return st;
    float *p = a->mem;
#define CARVE(field, count) (a->field = p, p += (count))
    CARVE(qbuf, B * T * C);
    CARVE(o, B * T * C);
    CARVE(kbuf, B * Tk * Ckv);
    CARVE(vbuf, B * Tk * Ckv);
    if (a->fused) {
        a->s = a->p = NULL;
        CARVE(stats, B * H * T * 2);
    } else {
        a->stats = NULL;
        CARVE(s, B * H * T * Tk);
        CARVE(p, B * H * T * Tk);
    }
    if (layer) CARVE(xebuf, B * T * C);
    else a->xebuf = NULL;
    if (M) CARVE(kvinbuf, B * Tk * C);
    else a->kvinbuf = NULL;
    if (rot) {
        CARVE(q_inbuf, B * T * C);
        CARVE(k_inbuf, B * Tk * Ckv);
    } else {
        a->q_inbuf = a->k_inbuf = NULL;
    }
#undef CARVE
    a->q = a->qbuf, a->k = a->kbuf, a->v = a->vbuf;
    a->q_in = a->q_inbuf, a->k_in = a->k_inbuf;
    return PE_OK;
}

/* An output the library hands back must be finite: a NaN or Inf anywhere upstream (an input, a
 * weight, a setting that derived a non-finite table) is an error, not a silent answer. One pass
 * over the output, far below the attention's cost. */
pe_status pe__finite_out(const float *x, int64_t n, const char *name, pe_err *err) {
    /* NaN and Inf have every exponent bit set: chunks are tested without a branch per element
     * (so the loop vectorises), the element is looked for only in a chunk that has one */
    int64_t i = 0;
    for (int64_t c0 = 0; c0 < n; c0 += 4096) {
        const int64_t c1 = n - c0 < 4096 ? n : c0 + 4096;
        uint32_t bad = 0;
        for (int64_t e = c0; e < c1; e++) {
            uint32_t u;
            memcpy(&u, x + e, sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (bad) {
            i = c0;
            break;
        }
        i = c1;
    }
    for (; i < n; i++)
        if (!isfinite(x[i]))
            return pe_error(err, PE_EINVAL, "output '%s' is not finite at element %lld (%s): an input, weight or setting "
                            "is NaN or Inf, or too large", name, (long long)i, isnan(x[i]) ? "NaN" : "Inf");
    return PE_OK;
}

/* Whether all a method adds to plain attention is its transform stage (embed, rotate): a call
 * whose q, k, v have passed it is then plain attention, needing neither the method's tables
 * (prepare) nor its tensors. */
static int transform_only(const pe__method *m) {
    return !m->score_mod && !m->value_mod && !m->mask && !m->lift_width &&
           !m->walk_forward;
}

/* The path of a call (pe_run_options.path): the fused one where the method allows it, nothing
 * asks for the (T, Tk) scores or probabilities, no dropout, and (PE_PATH_AUTO) it is the
 * cheaper of the two for this shape. */
int pe__layer_use_fused(const pe_attention *a, int64_t B, int64_t T, int64_t Tk, int64_t qoff, int want_scores) {
    if (a->run.path == PE_PATH_REFERENCE || want_scores || a->dropout > 0 || !pe__fused_eligible(a->m)) return 0;
    const int64_t D = a->m->lift_width ? a->m->lift_width(&a->cfg, a->D) : a->D; /* the width it attends at */
    return a->run.path == PE_PATH_FUSED || pe__fused_cheaper(B, a->H, T, Tk, qoff, D, pe__band_of(&a->cfg));
}

int pe_attention_path(const pe_attention *a, int64_t B, int64_t T, int64_t Tk, int want_scores) {
    return pe__layer_use_fused(a, B, T, Tk, Tk - T, want_scores) ? PE_PATH_FUSED : PE_PATH_REFERENCE;
}

int64_t pe_attention_axes(const pe_attention *a, const pe_weights *w) {
    static const pe_weights none = {0};
    return a->m->axes ? a->m->axes(&a->cfg, w ? w : &none) : 1;
}

/* Positions of one side into dst (B, n, A): from src ((B, n, A) when batched, else (n, A); A = 1
 * without axes), or, src NULL, start + t on every axis, where row b starts at klen[b] - qlen[b]
 * with per-row lengths (klen not NULL), else at start. */
static void fill_positions(int64_t *dst, const int64_t *src, int batched, int64_t B, int64_t n, int64_t A,
                           int64_t start, const int64_t *klen, const int64_t *qlen) {
    for (int64_t b = 0; b < B; b++) {
        const int64_t s0 = klen ? klen[b] - qlen[b] : start;
        for (int64_t t = 0; t < n; t++)
            for (int64_t x = 0; x < A; x++)
                dst[(b * n + t) * A + x] = src ? src[((batched ? b * n : 0) + t) * A + x] : s0 + t;
    }
}

/* The call's positions into a->pos: queries (B, T, A) from at->pos (NULL: q_default + t, or per
 * row k_len - q_len + t, on every axis), keys (B, Tk, A) from at->key_pos (NULL: 0 .. Tk-1;
 * keys_are_queries: the queries' own); padding entries (past a row's lengths) take the row's
 * first key position, so that no hook reads them and max(positions) is over real tokens. The
 * mask and lengths are copied. Then the context every hook sees, and the method's prepare. */
pe_status pe__layer_begin(pe_attention *a, const pe_weights *w, int64_t B, int64_t T, int64_t Tk,
                          const pe_positions *at, int64_t q_default, int keys_are_queries, pe_err *err) {
    const int plain = a->pre && transform_only(a->m); /* the method has nothing left to do */
    for (int i = plain ? pe__method_params(a) : 0; i < a->nparams; i++)
        if (!w->param[i] && !a->specs[i].optional)
            return pe_error(err, PE_ETENSOR, "tensor '%s' is required by %s%s", a->specs[i].name,
                            i < pe__method_params(a) ? "method " : "attention_sinks", i < pe__method_params(a) ? a->m->name : "");
    const int64_t A = pe_attention_axes(a, w), given = at && at->axes > 1 ? at->axes : 1;
    const int64_t *qp = at ? at->pos : NULL, *kp = at ? at->key_pos : NULL;
    if ((qp || kp) && given != A) {
        if (A == 1)
            return pe_error(err, PE_ETENSOR, "tensor 'positions': %lld axes per token, but method %s reads one position "
                            "(multi-axis positions: rope with rope_sections, rope_mixed)", (long long)given, a->m->name);
        return pe_error(err, PE_ETENSOR, "tensor 'positions': %lld ax%s per token, but the layer reads %lld (%s): give "
                        "[T, %lld] or [B, T, %lld]", (long long)given, given == 1 ? "is" : "es", (long long)A,
                        a->m->axes == NULL ? "" : a->cfg.rope_sections.n ? "rope_sections" : "rows of rope_freqs",
                        (long long)A, (long long)A);
    }
    const size_t need = (size_t)(B * (T + Tk) * A + 2 * B); /* positions, then the rows' lengths */
    if (need > a->pos_cap) {
        free(a->pos);
        a->pos = malloc(sizeof(int64_t) * need);
        a->pos_cap = a->pos ? need : 0;
        if (!a->pos) return pe_error(err, PE_ENOMEM, "out of memory for positions");
    }
    const int lens = at && (at->q_lens || at->k_lens);
    int64_t *pos = a->pos, *kpos = a->pos + B * T * A, *qlen = kpos + B * Tk * A, *klen = qlen + B;
    for (int64_t b = 0; b < B; b++) {
        qlen[b] = lens && at->q_lens ? at->q_lens[b] : T;
        klen[b] = lens && at->k_lens ? at->k_lens[b] : Tk;
        if (qlen[b] < 0 || qlen[b] > T || klen[b] < 1 || klen[b] > Tk)
            return pe_error(err, PE_EINVAL, "row %lld: lengths %lld queries and %lld keys, expected 0 .. %lld and 1 .. %lld",
                            (long long)b, (long long)qlen[b], (long long)klen[b], (long long)T, (long long)Tk);
        if (a->cfg.causal && klen[b] < qlen[b])
            return pe_error(err, PE_EINVAL, "row %lld: causal attention needs at least as many keys as queries (%lld keys, "
                            "%lld queries): the queries are the last of the row's tokens",
                            (long long)b, (long long)klen[b], (long long)qlen[b]);
    }
    fill_positions(pos, qp, at && at->pos_batched, B, T, A, q_default, lens ? klen : NULL, qlen);
    if (keys_are_queries) kpos = pos;
    else fill_positions(kpos, kp, at && at->key_pos_batched, B, Tk, A, 0, NULL, NULL);
    int64_t pmin = INT64_MAX, pmax = INT64_MIN;
    for (int64_t b = 0; b < B; b++) {
        const int64_t *fill = kpos + b * Tk * A;
        for (int64_t t = qlen[b]; lens && t < T; t++) memcpy(pos + (b * T + t) * A, fill, sizeof(int64_t) * A);
        for (int64_t u = klen[b]; lens && u < Tk; u++) memcpy(kpos + (b * Tk + u) * A, fill, sizeof(int64_t) * A);
        for (int64_t e = 0; e < T * A; e++) {
            const int64_t p = pos[b * T * A + e];
            pmin = p < pmin ? p : pmin, pmax = p > pmax ? p : pmax;
        }
        if (pmin < -PE_MAX_POSITION || pmax > PE_MAX_POSITION)
            return pe_error(err, PE_EPOS, "tensor 'positions': position %lld is beyond +-2^53 (positions must be exact in double)",
                            (long long)(pmin < -PE_MAX_POSITION ? pmin : pmax));
        for (int64_t e = 0; e < Tk * A && !keys_are_queries; e++) {
            const int64_t p = kpos[b * Tk * A + e];
            if (p < -PE_MAX_POSITION || p > PE_MAX_POSITION) /* the tensor that holds it, by name (issue 32) */
                return pe_error(err, PE_EPOS, "tensor 'key_positions': position %lld is beyond +-2^53 (positions must be "
                                "exact in double)", (long long)p);
            pmin = p < pmin ? p : pmin, pmax = p > pmax ? p : pmax;
        }
    }
    a->has_mask = at && at->mask;
    if (a->has_mask)
        for (int64_t b = 0; b < B; b++)
            memcpy(a->mask + b * T * Tk, at->mask + (at->mask_batched ? b * T * Tk : 0), (size_t)(T * Tk));

    pe__ctx *ctx = &a->ctx;
    void *kept = (a->m->flags & PE__PERSIST) ? ctx->state : NULL; /* the method's cache */
    if (!kept && a->m->release && ctx->state) a->m->release(ctx);
    free(ctx->tiles); /* the last call's mask census */
    *ctx = (pe__ctx){.cfg = &a->cfg, .B = B, .T = T, .Tk = Tk, .qoff = Tk - T, .H = a->H, .Hkv = a->Hkv,
                     .D = a->D, .C = a->C, .Ckv = a->Ckv, .Dv = a->D, .pos = pos, .kpos = kpos, .A = A, .pos_min = pmin,
                     .pos_max = pmax, .mask = a->has_mask ? a->mask : NULL, .q_len = lens ? qlen : NULL,
                     .k_len = lens ? klen : NULL, .fused = a->fused, .run = &a->run, .w = w, .g = NULL,
                     .state = kept, .ids = pe_attention_is_complex(a) ? a->ids : NULL, .scratch = &a->scratch,
                     .sinks = pe__sinks_of(a, w), .reads_inputs = 1,
                     .transforms = PE__TQ | PE__TK | PE__TV};
    a->B = B, a->T = T, a->Tk = Tk;
    pe_status st = a->m->prepare && !plain ? a->m->prepare(ctx, err) : PE_OK;
    return st;
}

/* The layer: x' = x + P[pos], the projections, the projected form's core, wo. */
static pe_status forward(pe_attention *a, const pe_weights *w, const float *x, const float *mems, int64_t M,
                         int64_t B, int64_t T, const pe_positions *at, float *y, float *scores, float *probs,
                         pe_err *err) {
    a->have_forward = 0;
    if (B < 1 || T < 1) return pe_error(err, PE_EINVAL, "batch %lld and length %lld must be >= 1", (long long)B, (long long)T);
    if (M < 0 || (M > 0 && !mems)) return pe_error(err, PE_EINVAL, "memory length %lld without mems", (long long)M);
    if (M > 0 && !(a->m->flags & PE__MEMORY))
        return pe_error(err, PE_ETENSOR, "tensor 'mems': method %s has no memory", a->m->name);
    if (!x || !w || !w->wq || !w->wk || !w->wv || !w->wo || !y)
        return pe_error(err, PE_EINVAL, "x, y and the weights wq, wk, wv, wo are required");
    if (at && at->key_pos) return pe_error(err, PE_EINVAL, "the layer's keys sit at the queries' positions: key_pos must be NULL");
    if (at && (at->q_lens || at->k_lens))
        return pe_error(err, PE_EINVAL, "per-row lengths are for the projected form (pe_attention_forward_qkv)");
    a->fused = pe__layer_use_fused(a, B, T, M + T, M, scores || probs);
    a->decode = 0;
    a->layer = 1;
    const int64_t C = a->C, Ckv = a->Ckv, Tk = M + T;
    pe_status st = pe__layer_reserve(a, B, T, Tk, M, 1, at && at->mask, err);
    if (st) return st;
    a->M = M;
    /* Transformer-XL's memory is more keys: queries at M + t, keys at 0 .. Tk-1; it reads no
     * positions. Every other layer's keys are its queries. */
    const int memory = (a->m->flags & PE__MEMORY) != 0;
    pe_positions xl_at = {.mask = at ? at->mask : NULL, .mask_batched = at ? at->mask_batched : 0};
    if ((st = pe__layer_begin(a, w, B, T, Tk, memory ? &xl_at : at, memory ? M : 0, !memory, err))) return st;
    pe__ctx *ctx = &a->ctx;

    /* pass 1: x' = x + P[pos], and [mems; x']. Where x passes unchanged and the caller keeps it
     * for backward (pe_run_options.saved, as for forward_qkv's q, k, v), x is read in place. */
    if (a->run.saved != PE_SAVED_COPIES && !a->m->embed_forward && !M) {
        a->xe = x;
    } else {
        memcpy(a->xebuf, x, sizeof(float) * B * T * C);
        if (a->m->embed_forward) a->m->embed_forward(ctx, a->xebuf);
        a->xe = a->xebuf;
    }
    a->kvin = a->xe;
    if (M) {
        for (int64_t b = 0; b < B; b++) {
            memcpy(a->kvinbuf + b * Tk * C, mems + b * M * C, sizeof(float) * M * C);
            memcpy(a->kvinbuf + (b * Tk + M) * C, a->xe + b * T * C, sizeof(float) * T * C);
        }
        a->kvin = a->kvinbuf;
    }
    /* pass 2: projections; then the projected form; pass 5: the output projection */
    pe__linear_forward(a->qbuf, a->xe, w->wq, w->bq, B * T, C, C);
    pe__linear_forward(a->kbuf, a->kvin, w->wk, w->bk, B * Tk, C, Ckv);
    pe__linear_forward(a->vbuf, a->kvin, w->wv, w->bv, B * Tk, C, Ckv);
    if ((st = pe__core_forward(a, scores, probs, err))) return st;
    pe__linear_forward(y, a->o, w->wo, w->bo, B * T, C, C);
    if ((st = pe__finite_out(y, B * T * C, "y", err))) return st;
    a->have_forward = a->run.saved != PE_SAVED_NONE;
    return PE_OK;
}

pe_status pe_attention_layer_forward(pe_attention *a, const pe_weights *w, const float *x, const float *mems,
                                     int64_t M, int64_t B, int64_t T, const pe_positions *at, float *y,
                                     float *scores, float *probs, pe_err *err) {
    if (pe_attention_is_complex(a)) {
        a->have_forward = 0;
        return pe_error(err, PE_EINVAL, "method %s reads token ids, not x: use pe_attention_forward_ids", a->m->name);
    }
    return forward(a, w, x, mems, M, B, T, at, y, scores, probs, err);
}

pe_status pe_attention_forward(pe_attention *a, const pe_weights *w, const float *x,
                               const float *mems, int64_t M, const int64_t *pos, int pos_batched,
                               int64_t B, int64_t T, float *y, float *scores, float *probs,
                               pe_err *err) {
    pe_positions at = {.pos = pos, .pos_batched = pos_batched};
    return pe_attention_layer_forward(a, w, x, mems, M, B, T, &at, y, scores, probs, err);
}

pe_status pe_attention_forward_ids(pe_attention *a, const pe_weights *w, const int64_t *ids,
                                   const int64_t *pos, int pos_batched, int64_t B, int64_t T,
                                   float *y, float *y_imag, float *scores, float *probs, pe_err *err) {
    pe_positions at = {.pos = pos, .pos_batched = pos_batched};
    return pe_attention_layer_forward_ids(a, w, ids, B, T, &at, y, y_imag, scores, probs, err);
}

pe_status pe_attention_layer_forward_ids(pe_attention *a, const pe_weights *w, const int64_t *ids, int64_t B,
                                         int64_t T, const pe_positions *at, float *y, float *y_imag,
                                         float *scores, float *probs, pe_err *err) {
    if (!pe_attention_is_complex(a)) {
        a->have_forward = 0;
        return pe_error(err, PE_EINVAL, "method %s reads x, not token ids: use pe_attention_forward", a->m->name);
    }
    if (B < 1 || T < 1) return pe_error(err, PE_EINVAL, "batch %lld and length %lld must be >= 1", (long long)B, (long long)T);
    if (!ids || !y || !y_imag || !w || !w->wq || !w->wk || !w->wv || !w->wo)
        return pe_error(err, PE_EINVAL, "ids, y, y_imag and the weights wq, wk, wv, wo are required");
    if (at && (at->key_pos || at->q_lens || at->k_lens))
        return pe_error(err, PE_EINVAL, "a layer on token ids takes positions and attn_mask only");
    a->layer = 1;
    a->M = 0;
    a->fused = 0;
    pe_status st = pe__layer_reserve(a, B, T, T, 0, 1, at && at->mask, err);
    if (st) return st;
    memcpy(a->ids, ids, sizeof(int64_t) * B * T); /* before prepare, which checks them */
    if ((st = pe__layer_begin(a, w, B, T, T, at, 0, 1, err)) || (st = a->m->walk_forward(&a->ctx, y, y_imag, scores, probs, err)) ||
        (st = pe__finite_out(y, B * T * a->C, "y", err)) || (st = pe__finite_out(y_imag, B * T * a->C, "y_imag", err)))
        return st;
    a->have_forward = 1;
    return PE_OK;
}

/* The layer's reverse walk: wo, the core's backward, the projections, the embedding. */
pe_status pe_attention_backward(pe_attention *a, const pe_weights *w, const float *dy, float *dx,
                                pe_grads *g, pe_err *err) {
    if (!a->have_forward || !a->layer) return pe_error(err, PE_EINVAL, "backward without a forward");
    if (pe_attention_is_complex(a) && dx)
        return pe_error(err, PE_EINVAL, "method %s has no dx (its input is token ids): pass dx = NULL", a->m->name);
    if (a->m->walk_backward) return pe_attention_backward_ids(a, w, dy, NULL, g, err);
    if (!dy) return pe_error(err, PE_EINVAL, "dy is required");
    pe_grads none = {0};
    if (!g) g = &none;
    const int64_t B = a->B, T = a->T, M = a->M, Tk = a->Tk, C = a->C, Ckv = a->Ckv;
    pe__ctx *ctx = &a->ctx;
    ctx->w = w;
    ctx->g = g;
    ctx->sinks = pe__sinks_of(a, w), ctx->dsinks = pe__dsinks_of(a, g);
    /* dout, dq, dx' (when the caller passes no dx), dk, dv, and with memory the gradient of [mems; x'] */
    const size_t n = (size_t)(B * T * C) * 3 + (size_t)(B * Tk * Ckv) * 2 + (size_t)(M ? B * Tk * C : 0);
    float *work = pe__scratch_get(&a->grad, n);
    if (!work) return pe_error(err, PE_ENOMEM, "out of memory for %zu floats of gradients", n);
    float *dout = work;                 /* (B, T, C) */
    float *dq = dout + B * T * C;       /* (B, T, C) */
    float *dk = dq + 2 * B * T * C;     /* (B, Tk, Ckv) */
    float *dv = dk + B * Tk * Ckv;      /* (B, Tk, Ckv) */
    float *dkvin = dv + B * Tk * Ckv;   /* (B, Tk, C), with memory */
    float *dxe = dx ? dx : dq + B * T * C; /* (B, T, C): the caller's dx, written whole */
    /* the core adds into dq, dk, dv; dout, dxe and dkvin are written whole before they are read */
    memset(dq, 0, sizeof(float) * (size_t)(B * T * C));
    memset(dk, 0, sizeof(float) * (size_t)(2 * B * Tk * Ckv));

    /* pass 5: y = o wo^T + bo; passes 4 .. 2: the projected form's backward */
    pe__linear_backward(dout, 0, g->dwo, g->dbo, dy, a->o, w->wo, B * T, C, C);
    pe_status st = pe__core_backward(a, dout, dq, dk, dv, err);
    if (st) {
        ctx->g = NULL;
        return st;
    }
    /* pass 2: the projections, their weights' gradients first (x' may be the caller's x, which a
     * dx sharing its memory overwrites); the keys' and values' share of dx' added to the
     * queries', in place without memory (the keys are x'), else through [mems; x'] */
    pe__linear_backward(NULL, 0, g->dwq, g->dbq, dq, a->xe, w->wq, B * T, C, C);
    pe__linear_backward(NULL, 0, g->dwk, g->dbk, dk, a->kvin, w->wk, B * Tk, C, Ckv);
    pe__linear_backward(NULL, 0, g->dwv, g->dbv, dv, a->kvin, w->wv, B * Tk, C, Ckv);
    pe__linear_backward(dxe, 0, NULL, NULL, dq, NULL, w->wq, B * T, C, C);
    if (!M) {
        pe__linear_backward(dxe, 1, NULL, NULL, dk, NULL, w->wk, B * T, C, Ckv);
        pe__linear_backward(dxe, 1, NULL, NULL, dv, NULL, w->wv, B * T, C, Ckv);
    } else {
        pe__linear_backward(dkvin, 0, NULL, NULL, dk, NULL, w->wk, B * Tk, C, Ckv);
        pe__linear_backward(dkvin, 1, NULL, NULL, dv, NULL, w->wv, B * Tk, C, Ckv);
        for (int64_t b = 0; b < B; b++) /* the segment's part of [mems; x']; mems get no gradient */
            for (int64_t i = 0; i < T * C; i++) dxe[b * T * C + i] += dkvin[(b * Tk + M) * C + i];
    }
    /* pass 1: x' = x + P[pos]; then the tables of prepare */
    if (a->m->embed_backward) a->m->embed_backward(ctx, dxe);
    if (a->m->finish_backward) a->m->finish_backward(ctx);
    st = pe__finite_out(dxe, B * T * C, "dx", err);
    ctx->g = NULL;
    return st;
}

pe_status pe_attention_backward_ids(pe_attention *a, const pe_weights *w, const float *dy,
                                    const float *dy_imag, pe_grads *g, pe_err *err) {
    if (!pe_attention_is_complex(a))
        return pe_error(err, PE_EINVAL, "method %s reads x: use pe_attention_backward", a->m->name);
    if (!a->have_forward) return pe_error(err, PE_EINVAL, "backward without a forward");
    if (!dy && !dy_imag) return pe_error(err, PE_EINVAL, "dy or dy_imag is required");
    pe_grads none = {0};
    a->ctx.w = w;
    a->ctx.g = g ? g : &none;
    pe_status st = a->m->walk_backward(&a->ctx, dy, dy_imag, err);
    if (!st && a->m->finish_backward) a->m->finish_backward(&a->ctx);
    a->ctx.g = NULL;
    return st;
}

pe_status pe__attention_context(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                                int64_t hi, pe__ctx *ctx, pe_err *err) {
    static const pe_weights none = {0};
    if (!w) w = &none;
    ctx->state = NULL;
    if (lo < -PE_MAX_POSITION || hi > PE_MAX_POSITION)
        return pe_error(err, PE_EPOS, "position %lld is beyond +-2^53 (positions must be exact in double)",
                        (long long)(lo < -PE_MAX_POSITION ? lo : hi));
    for (int i = 0; i < a->nparams; i++)
        if (!w->param[i] && !a->specs[i].optional)
            return pe_error(err, PE_ETENSOR, "tensor '%s' is required by method %s", a->specs[i].name, a->m->name);
    *ctx = (pe__ctx){.cfg = &a->cfg, .B = 1, .T = n, .Tk = n, .H = a->H, .Hkv = a->Hkv, .D = a->D, .C = a->C,
                     .Ckv = a->Ckv, .Dv = a->D, .pos = pos, .kpos = pos, .A = pe_attention_axes(a, w), .pos_min = lo, .pos_max = hi,
                     .run = &a->run, .w = w, .sinks = pe__sinks_of(a, w), .reads_inputs = 1,
                     .transforms = PE__TQ | PE__TK | PE__TV};
    return a->m->prepare ? a->m->prepare(ctx, err) : PE_OK;
}

void pe__attention_release(pe_attention *a, pe__ctx *ctx) {
    if (a->m->release && ctx->state) a->m->release(ctx);
}

const pe__method *pe__attention_method(const pe_attention *a) { return a->m; }
const pe_run_options *pe__attention_run(const pe_attention *a) { return &a->run; }

