/* Position-position matrices of a method (posmat.h). */
#include "posmat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/io/layer.h"
#include "../src/io/safetensors.h"

int pm_method(const pm_opts *o, pe_err *err) {
    for (int i = o->n_keys - 1; i >= 0; i--)
        if (!strcmp(o->keys[i], "method")) {
            int m = pe_method_from_name(o->vals[i]);
            if (m < 0) pe__fail(err, PE_EKEY, "key 'method': unknown method '%s' (see: posenc methods)", o->vals[i]);
            return m;
        }
    pe__fail(err, PE_EKEY, "no method given (--method NAME)");
    return -1;
}

/* the layer of the settings: heads and causal=false unless given */
static pe_status make_att(const pm_opts *o, pe_attention **att, pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    pe_status st = pe_config_set_all(&cfg, o->n_keys, o->keys, o->vals, err);
    char h[32];
    snprintf(h, sizeof h, "%lld", (long long)o->heads);
    if (!st && !pe_config_is_set(&cfg, "heads")) st = pe_config_set(&cfg, "heads", h, err);
    if (!st && !pe_config_is_set(&cfg, "causal")) st = pe_config_set(&cfg, "causal", "false", err);
    if (!st) st = pe_attention_init(att, &cfg, o->C, err);
    return st;
}

static pe_status encode_from_file(const pm_opts *o, int n_keys, const char **keys, const char **vals,
                                  pe_tensor *posn, pe_tensor **outs, int *n_outs, pe_err *err) {
    pe_st_file f;
    pe_status st = pe_st_read(o->from, &f, err);
    if (st) return st;
    const char *want[3] = {o->tensor, "pos_table", "pe.pos_table"};
    int found = -1;
    for (int w = o->tensor ? 0 : 1; w < (o->tensor ? 1 : 3) && found < 0; w++)
        for (int i = 0; i < f.n; i++)
            if (!strcmp(f.t[i].name, want[w])) found = i;
    if (found < 0) {
        st = pe__fail(err, PE_ETENSOR, "%s: no tensor '%s'", o->from, o->tensor ? o->tensor : "pos_table (or pe.pos_table)");
    } else {
        pe_tensor in[2] = {f.t[found], *posn};
        snprintf(in[0].name, sizeof in[0].name, "pos_table");
        if (in[0].ndim == 2 && in[0].shape[0] < o->N)
            st = pe__fail(err, PE_EPOS, "%s: pos_table has %lld rows, fewer than the %lld positions asked for", o->from,
                          (long long)in[0].shape[0], (long long)o->N);
        else
            st = pe_encode(n_keys, keys, vals, 0, 2, in, outs, n_outs, err);
    }
    pe_st_free(&f);
    return st;
}

pe_status pm_encoding(const pm_opts *o, pe_tensor **outs, int *n_outs, pe_err *err) {
    int m = pm_method(o, err);
    if (m < 0) return PE_EKEY;
    if (pe_method_family(m) != PE_FAMILY_ABSOLUTE)
        return pe__fail(err, PE_EINVAL, "method '%s' is %s, not absolute: it has no encoding P (try the similarity or relative plots)",
                        pe_method_name(m), pe_family_name(pe_method_family(m)));
    int64_t *pos = malloc(sizeof(int64_t) * 2 * (size_t)o->N);
    const char **keys = calloc((size_t)o->n_keys + 1, sizeof(char *)), **vals = calloc((size_t)o->n_keys + 1, sizeof(char *));
    if (!pos || !keys || !vals) {
        free(pos), free(keys), free(vals);
        return pe__fail(err, PE_ENOMEM, "out of memory");
    }
    for (int64_t t = 0; t < o->N; t++) pos[t] = t, pos[o->N + t] = 0;
    int nk = 0;
    for (int i = 0; i < o->n_keys; i++)
        if (strcmp(o->keys[i], "causal")) keys[nk] = o->keys[i], vals[nk++] = o->vals[i];
    pe_tensor posn = {.name = "positions", .dtype = PE_I64, .ndim = 1, .shape = {o->N}, .data = pos};
    pe_status st;
    if (o->from) {
        st = encode_from_file(o, nk, keys, vals, &posn, outs, n_outs, err);
    } else {
        /* the method's tensors from a random layer (learned, floater, complex) */
        pe_attention *att = NULL;
        pe_layer L = {0};
        st = make_att(o, &att, err);
        if (!st) st = pe_layer_init(&L, att, o->N + 1, o->seed, err); /* TUPE reads row p + 1 */
        pe_tensor in[PE_MAX_PARAMS + 2];
        int n = 0;
        in[n++] = posn;
        if (m == PE_METHOD_COMPLEX) /* one token everywhere: the encoding of position alone */
            in[n++] = (pe_tensor){.name = "ids", .dtype = PE_I64, .ndim = 1, .shape = {o->N}, .data = pos + o->N};
        for (int i = 0; !st && i < L.np; i++) {
            if (L.specs[i].optional) continue;
            pe_tensor *t = &in[n++];
            memset(t, 0, sizeof *t);
            snprintf(t->name, sizeof t->name, "%s", L.specs[i].name);
            t->dtype = PE_F32, t->ndim = L.specs[i].ndim, t->data = (void *)L.w.param[i];
            for (int d = 0; d < t->ndim; d++) t->shape[d] = L.specs[i].shape[d];
        }
        if (!st) st = pe_encode(nk, keys, vals, o->C, n, in, outs, n_outs, err);
        pe_layer_free(&L);
        pe_attention_free(att);
    }
    free(pos), free(keys), free(vals);
    return st;
}

pe_status pm_scores(const pm_opts *o, int zero_qk, double **S, int64_t *Hout, pe_err *err) {
    int m = pm_method(o, err);
    if (m < 0) return PE_EKEY;
    if (pe_method_family(m) == PE_FAMILY_ABSOLUTE)
        return pe__fail(err, PE_EINVAL, "method '%s' is absolute: its position-position matrix is P P^T (the encoding), not a score",
                        pe_method_name(m));
    pe_attention *att = NULL;
    pe_layer L = {0};
    float *buf = NULL;
    pe_status st = make_att(o, &att, err);
    if (!st) st = pe_layer_init(&L, att, o->N + 1, o->seed, err); /* TUPE reads row p + 1 */
    int64_t N = o->N, C = L.C, Ckv = L.Ckv, H = st ? 0 : pe_attention_config(att)->heads;
    if (!st && !(buf = calloc((size_t)(2 * C * C + 2 * Ckv * C + 2 * N * C + H * N * N), sizeof(float))))
        st = pe__fail(err, PE_ENOMEM, "out of memory");
    if (!st) {
        float *wq = buf, *wo = wq + C * C, *wk = wo + C * C, *wv = wk + Ckv * C, *x = wv + Ckv * C, *y = x + N * C,
              *sc = y + N * C;
        if (!zero_qk) { /* q = k = ones in every head: column 0 of wq, wk reads x = e_0 */
            for (int64_t r = 0; r < C; r++) wq[r * C] = 1;
            for (int64_t r = 0; r < Ckv; r++) wk[r * C] = 1;
        }
        for (int64_t t = 0; t < N; t++) x[t * C] = 1;
        pe_weights w = L.w;
        w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo, w.bq = w.bk = w.bv = w.bo = NULL;
        for (int i = 0; i < L.np; i++)
            if (L.specs[i].optional) w.param[i] = NULL;
        st = pe_attention_forward(att, &w, x, NULL, 0, NULL, 0, 1, N, y, sc, NULL, err);
        if (!st && !(*S = malloc(sizeof(double) * (size_t)(H * N * N)))) st = pe__fail(err, PE_ENOMEM, "out of memory");
        for (int64_t k = 0; !st && k < H * N * N; k++) (*S)[k] = sc[k];
        if (!st) *Hout = H;
    }
    free(buf);
    pe_layer_free(&L);
    pe_attention_free(att);
    return st;
}

pe_status pm_index(const pm_opts *o, double **S, pe_err *err) {
    int m = pm_method(o, err);
    if (m < 0) return PE_EKEY;
    if (m != PE_METHOD_SHAW && m != PE_METHOD_T5 && m != PE_METHOD_TUPE && m != PE_METHOD_DEBERTA)
        return pe__fail(err, PE_EINVAL, "method '%s' has no relative index (shaw, t5, tupe, deberta do); try --show bias",
                        pe_method_name(m));
    pe_attention *att = NULL;
    pe_status st = make_att(o, &att, err);
    if (st) return st;
    const pe_config *c = pe_attention_config(att);
    int64_t N = o->N;
    if (!(*S = malloc(sizeof(double) * (size_t)(N * N)))) st = pe__fail(err, PE_ENOMEM, "out of memory");
    int64_t span = c->position_buckets > 0 ? c->position_buckets : c->max_relative_positions;
    for (int64_t i = 0; !st && i < N; i++)
        for (int64_t j = 0; j < N; j++) {
            int64_t v;
            if (m == PE_METHOD_SHAW) v = pe__clip(j - i, -c->max_rel, c->max_rel);
            else if (m == PE_METHOD_T5) v = pe__t5_bucket(j - i, c->bidirectional, c->num_buckets, c->max_distance);
            else if (m == PE_METHOD_TUPE) v = pe__t5_bucket(j - i, 1, c->num_buckets, c->max_distance);
            else {
                v = i - j;
                if (c->position_buckets > 0) v = pe__deberta_bucket(v, c->position_buckets, c->max_relative_positions);
                v = pe__clip(v, -span, span - 1);
            }
            (*S)[i * N + j] = (double)v;
        }
    pe_attention_free(att);
    return st;
}
