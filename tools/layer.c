#include "layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>
#include <stdio.h>

#include "posenc.h"

uint64_t pe_rng_next(pe_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float pe_rng_uniform(pe_rng *r) { return (float)(pe_rng_next(r) >> 40) / (float)(1 << 24); }

float pe_rng_normal(pe_rng *r) {
    float u1 = pe_rng_uniform(r), u2 = pe_rng_uniform(r);
    return sqrtf(-2.0f * logf(u1 + 1e-12f)) * cosf(6.2831853f * u2);
}

static int64_t spec_numel(const pe_param_spec *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    return n;
}

/* Parameters that must be positive in any sensible layer (scales, rates); and FIRE's first
 * layer, so that w1 u + b1 > 0 for every u >= 0: no relu kink for finite differences to straddle. */
static int positive(const char *name) {
    static const char *const P[] = {"kerple_r1", "kerple_r2", "fire_c", "fire_L", "fire_w1", "fire_b1",
                                    "alibi_slopes", "amp", "pos_ln_w", NULL};
    for (int i = 0; P[i]; i++)
        if (!strcmp(P[i], name)) return 1;
    return 0;
}

pe_status pe_layer_init(pe_layer *L, const pe_attention *att, int64_t rows, uint64_t seed, pe_err *err) {
    memset(L, 0, sizeof *L);
    const pe_config *cfg = pe_attention_config(att);
    int64_t D = pe_attention_head_dim(att), C = cfg->heads * D, Ckv = cfg->kv_heads * D;
    L->C = C, L->Ckv = Ckv;
    L->np = pe_attention_params(att, L->specs);
    size_t n = (size_t)(2 * C * C + 2 * Ckv * C + 2 * C + 2 * Ckv);
    for (int i = 0; i < L->np; i++) {
        if (L->specs[i].shape[0] == -1) {
            /* free rows that count position axes (rope_mixed's rope_freqs) take `rows` only up to
             * PE_MAX_AXES (a test asking for axes); past it, the tables' rows: one axis */
            pe_weights probe = {0};
            static const float any = 0;
            probe.param[i] = &any, probe.param_rows[i] = rows;
            int axes = rows > PE_MAX_AXES && pe_attention_axes(att, &probe) == rows;
            L->specs[i].shape[0] = axes ? 1 : rows;
        }
        n += (size_t)spec_numel(&L->specs[i]);
    }
    L->n = n;
    L->block = calloc(2 * n, sizeof(float));
    if (!L->block) return pe_error(err, PE_ENOMEM, "out of memory");
    pe_rng rng = {seed};
    float *p = L->block, *g = L->block + n;
    float a = 1.0f / sqrtf((float)C);
#define TAKE(wf, gf, count, amp)                                                                \
    do {                                                                                        \
        L->w.wf = p, L->g.gf = g;                                                               \
        for (int64_t e = 0; e < (count); e++) p[e] = (amp) * (2.0f * pe_rng_uniform(&rng) - 1.0f); \
        p += (count), g += (count);                                                             \
    } while (0)
    TAKE(wq, dwq, C * C, a);
    TAKE(wk, dwk, Ckv * C, a);
    TAKE(wv, dwv, Ckv * C, a);
    TAKE(wo, dwo, C * C, a);
    TAKE(bq, dbq, C, 0.1f);
    TAKE(bk, dbk, Ckv, 0.1f);
    TAKE(bv, dbv, Ckv, 0.1f);
    TAKE(bo, dbo, C, 0.1f);
#undef TAKE
    for (int i = 0; i < L->np; i++) {
        int64_t count = spec_numel(&L->specs[i]);
        int pos = positive(L->specs[i].name);
        /* LongRoPE's factors stretch wavelengths: >= 1 */
        int factor = !strcmp(L->specs[i].name, "short_factor") || !strcmp(L->specs[i].name, "long_factor");
        /* PoPE's bias is clamped to [-2 pi, 0]: inside it, away from the ends (no kink) */
        int phase = !strcmp(L->specs[i].name, "pope_bias");
        for (int64_t e = 0; e < count; e++)
            p[e] = factor ? 1.0f + 3.0f * pe_rng_uniform(&rng)
                 : phase  ? -0.2f - 0.8f * pe_rng_uniform(&rng)
                 : pos    ? 0.2f + 0.8f * pe_rng_uniform(&rng)
                          : pe_rng_uniform(&rng) - 0.5f;
        L->w.param[i] = p, L->g.dparam[i] = g;
        L->w.param_rows[i] = L->specs[i].shape[0];
        p += count, g += count;
    }
    return PE_OK;
}

/* Draws n values of a method tensor (cols a row, rows = n / cols) from its reference
 * initialisation (pe_param_spec.init, the library's one description of it; posenc.torch draws
 * the same with torch's generator); C the layer's width (complex's frequencies). */
void pe_init_draw(const pe_init *in, int64_t n, int64_t cols, int64_t C, float *p, pe_rng *rng) {
    const int64_t rows = n / cols;
    double m[PE_MAX_ROPE_PAIRS];
    switch (in->kind) {
    case PE_INIT_UNIFORM:
        for (int64_t e = 0; e < n; e++) p[e] = (float)(in->a + (in->b - in->a) * pe_rng_uniform(rng));
        break;
    case PE_INIT_CONST:
        for (int64_t e = 0; e < n; e++) p[e] = (float)in->a;
        break;
    case PE_INIT_XAVIER: /* fan_in the columns, fan_out the rows */
        for (int64_t e = 0; e < n; e++) p[e] = (float)(sqrt(2.0 / (double)(rows + cols)) * pe_rng_normal(rng));
        break;
    case PE_INIT_LINEAR:
        for (int64_t e = 0; e < n; e++) p[e] = (float)((2 * pe_rng_uniform(rng) - 1) / sqrt(in->a));
        break;
    case PE_INIT_ALIBI_SLOPES: /* optional tensors are absent in the trainer; for completeness */
        pe_alibi_slopes(m, n < PE_MAX_ROPE_PAIRS ? n : PE_MAX_ROPE_PAIRS);
        for (int64_t e = 0; e < n && e < PE_MAX_ROPE_PAIRS; e++) p[e] = (float)m[e];
        break;
    case PE_INIT_EYE_NORMAL: /* the identity on each [cols, cols] block, plus noise */
        for (int64_t e = 0; e < n; e++)
            p[e] = (float)((e % (cols * cols)) / cols == e % cols ? 1.0 : 0.0) + (float)(in->a * pe_rng_normal(rng));
        break;
    case PE_INIT_COMPLEX_FREQ:
        for (int64_t r = 0; r < rows; r++)
            for (int64_t d = 0; d < cols; d++) p[r * cols + d] = (float)pow(10000.0, -2.0 * (double)(d / 2) / (double)C);
        break;
    default:
        for (int64_t e = 0; e < n; e++) p[e] = (float)(in->a * pe_rng_normal(rng));
    }
}

void pe_layer_zero_grad(pe_layer *L) { memset(L->block + L->n, 0, sizeof(float) * L->n); }

void pe_layer_free(pe_layer *L) {
    free(L->block);
    memset(L, 0, sizeof *L);
}

int pe_layer_tensors(pe_layer *L, const char **names, float **data, float **grads, int64_t *sizes) {
    static const char *const W[] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};
    const float *wp[] = {L->w.wq, L->w.wk, L->w.wv, L->w.wo, L->w.bq, L->w.bk, L->w.bv, L->w.bo};
    float *gp[] = {L->g.dwq, L->g.dwk, L->g.dwv, L->g.dwo, L->g.dbq, L->g.dbk, L->g.dbv, L->g.dbo};
    int64_t sz[] = {L->C * L->C, L->Ckv * L->C, L->Ckv * L->C, L->C * L->C, L->C, L->Ckv, L->Ckv, L->C};
    int n = 0;
    for (int i = 0; i < 8; i++, n++) names[n] = W[i], data[n] = (float *)wp[i], grads[n] = gp[i], sizes[n] = sz[i];
    for (int i = 0; i < L->np; i++, n++)
        names[n] = L->specs[i].name, data[n] = (float *)L->w.param[i], grads[n] = L->g.dparam[i],
        sizes[n] = spec_numel(&L->specs[i]);
    return n;
}
