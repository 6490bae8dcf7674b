/* What the model carries from one call to the next (model.h): Transformer-XL's segment memory,
 * and decoding, the forward of new tokens only, each block attending to its KV cache
 * (pe_kv_cache) of the tokens before them (tr_decoder). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "kernels.h"
#include "model_impl.h"

/* ---- memory ------------------------------------------------------------------------------- */
int tr_model_has_memory(const tr_model *m) { return m->has_mem; }

void tr_model_reset_memory(tr_model *m) { m->mem_B = m->mem_M = 0; }

const float *tr_model_memory(const tr_model *m, int64_t *B, int64_t *M) {
    *B = m->mem_B, *M = m->mem_M;
    return m->mem;
}

static pe_status reserve_mem(tr_model *m, int64_t B, int64_t M, pe_err *err) {
    int64_t n = m->cfg.layers * B * M * m->cfg.C;
    if (n > m->mem_cap) {
        free(m->mem);
        m->mem = malloc(sizeof(float) * (size_t)n);
        m->mem_cap = m->mem ? n : 0;
        if (!m->mem) return pe_error(err, PE_ENOMEM, "out of memory for the memory");
    }
    return PE_OK;
}

pe_status tr_model_set_memory(tr_model *m, const float *mem, int64_t B, int64_t M, pe_err *err) {
    pe_status st = reserve_mem(m, B, M, err);
    if (st) return st;
    if (M && B) memcpy(m->mem, mem, sizeof(float) * (size_t)(m->cfg.layers * B * M * m->cfg.C));
    m->mem_B = B, m->mem_M = M;
    return PE_OK;
}

void tr_model_update_memory(tr_model *m) {
    if (!m->has_mem || !m->have_forward) return;
    const int64_t B = m->B, T = m->T, C = m->cfg.C, N = B * T;
    int64_t M = m->cfg.mem_len < T ? m->cfg.mem_len : T;
    if (M < 1 || reserve_mem(m, B, M, NULL)) {
        m->mem_B = m->mem_M = 0;
        return;
    }
    /* a layer's memory is its attention input (after ln_1) of the last M tokens; the pre-LN
     * reference normalises the concatenation [mems; h], which is the same per token */
    for (int64_t l = 0; l < m->cfg.layers; l++)
        for (int64_t b = 0; b < B; b++)
            memcpy(m->mem + ((l * B + b) * M) * C, m->a.ln1 + l * N * C + (b * T + T - M) * C,
                   sizeof(float) * (size_t)(M * C));
    m->mem_B = B, m->mem_M = M;
}

/* ---- decoding through KV caches --------------------------------------------------------------- */

struct tr_decoder {
    tr_model *m;
    pe_kv_cache **kv; /* (layers) */
    int64_t max, n;   /* tokens cached so far */
    float *buf;
    int64_t cap;
};

pe_status tr_decoder_init(tr_decoder **out, tr_model *m, int64_t max_tokens, pe_err *err) {
    *out = NULL;
    if (tr_model_cfg(m)->bidirectional)
        return pe_error(err, PE_EINVAL, "a bidirectional model (--layout slots) reads its answer at once from the slots; it does not decode token by token");
    if (m->place == TR_PLACE_IDS)
        return pe_error(err, PE_EINVAL, "method %s is complex-valued: its block 0 has no KV cache", m->cfg.method);
    tr_decoder *d = calloc(1, sizeof *d);
    if (!d || !(d->kv = calloc((size_t)m->cfg.layers, sizeof *d->kv))) {
        free(d);
        return pe_error(err, PE_ENOMEM, "out of memory");
    }
    d->m = m, d->max = max_tokens;
    pe_status st = PE_OK;
    for (int64_t l = 0; l < m->cfg.layers && !st; l++) st = pe_kv_cache_init(&d->kv[l], m->layer[l].att, 1, max_tokens, err);
    for (int z = 0; z < m->n_normed && !st; z++) { /* the shared tables' LayerNorm, once: parameters are fixed */
        tr_normed *q = &m->normed[z];
        tr_layernorm_forward(q->y, q->mean, q->rstd, m->params + m->t[q->t].off, m->params + m->t[q->tw].off,
                             m->params + m->t[q->tb].off, q->rows, q->cols);
    }
    if (st) {
        tr_decoder_free(d);
        return st;
    }
    *out = d;
    return PE_OK;
}

void tr_decoder_free(tr_decoder *d) {
    if (!d) return;
    for (int64_t l = 0; d->kv && l < d->m->cfg.layers; l++) pe_kv_cache_free(d->kv[l]);
    free(d->kv), free(d->buf), free(d);
}

int64_t tr_decoder_length(const tr_decoder *d) { return d->n; }

pe_status tr_decoder_step(tr_decoder *d, const int32_t *in, const int64_t *pos, int64_t n, float *probs, pe_err *err) {
    tr_model *m = d->m;
    const int64_t C = m->cfg.C, F = m->cfg.F, V = m->cfg.V;
    if (n < 1) return pe_error(err, PE_EINVAL, "decode: need at least one token");
    if (d->n + n > d->max)
        return pe_error(err, PE_EINVAL, "decode: %lld tokens would pass the %lld the caches hold", (long long)(d->n + n),
                        (long long)d->max);
    for (int64_t i = 0; i < n; i++)
        if (in[i] < 0 || in[i] >= V) return pe_error(err, PE_EINVAL, "token %d outside the vocabulary of %lld", in[i], (long long)V);
    if (n > d->cap) {
        free(d->buf);
        d->buf = malloc(sizeof(float) * (size_t)(n * (5 * C + 2 * F + 2)));
        d->cap = d->buf ? n : 0;
        if (!d->buf) return pe_error(err, PE_ENOMEM, "out of memory for %lld tokens", (long long)n);
    }
    float *x = d->buf, *ln = x + n * C, *y = ln + n * C, *xmid = y + n * C, *tmp = xmid + n * C, *fc = tmp + n * C,
          *act = fc + n * F, *stats = act + n * F;
    const float es = sqrtf((float)C); /* as tr_model_forward */
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++) x[i * C + c] = es * m->wte[(int64_t)in[i] * C + c];
    pe_status st;
    if (m->probe) { /* the absolute encoding, once, at the input */
        if ((st = tr_model_input_forward(m, pos, n, err))) return st;
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < C; c++) x[i * C + c] += m->P[(pos[i] - m->pmin) * C + c];
    }
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        tr_layer *L = &m->layer[l];
        tr_layernorm_forward(ln, stats, stats + n, x, L->ln1w, L->ln1b, n, C);
        if ((st = pe_kv_cache_layer_forward(d->kv[l], &L->w, ln, n, pos, 0, NULL, y, err))) return st;
        for (int64_t i = 0; i < n * C; i++) xmid[i] = x[i] + y[i];
        tr_layernorm_forward(ln, stats, stats + n, xmid, L->ln2w, L->ln2b, n, C);
        tr_linear_forward(fc, ln, L->fcw, L->fcb, n, C, F);
        tr_gelu_forward(act, NULL, fc, n * F);
        tr_linear_forward(tmp, act, L->prw, L->prb, n, F, C);
        for (int64_t i = 0; i < n * C; i++) x[i] = xmid[i] + tmp[i];
    }
    tr_layernorm_forward(ln, stats, stats + n, x, m->lnfw, m->lnfb, n, C);
    tr_linear_forward(probs, ln, m->wte, NULL, n, C, V);
    for (int64_t i = 0; i < n; i++) tr_softmax_row(probs + i * V, V);
    d->n += n;
    return PE_OK;
}

pe_status tr_model_check_positions(tr_model *m, int64_t lo, int64_t hi, pe_err *err) {
    for (int64_t l = -1; l < m->cfg.layers; l++) { /* the input layer, then every block's */
        pe_attention *att = l < 0 ? m->probe : m->layer[l].att;
        pe_status st = att ? pe_attention_check_positions(att, l < 0 ? &m->probe_w : &m->layer[l].w, lo, hi, err) : PE_OK;
        if (st) return st;
    }
    return PE_OK;
}
