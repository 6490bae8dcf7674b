/* Position-position matrices of a method (posmat.h). */
#include "posmat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/layer.h"
#include "../tools/safetensors.h"
#include "../train/trainer.h"

int pm_method(const pm_opts *o, pe_err *err) {
    for (int i = o->n_keys - 1; i >= 0; i--)
        if (!strcmp(o->keys[i], "method")) {
            int m = pe_method_from_name(o->vals[i]);
            if (m < 0) pe_error(err, PE_EKEY, "key 'method': unknown method '%s' (see: posenc methods)", o->vals[i]);
            return m;
        }
    pe_error(err, PE_EKEY, "no method given (--method NAME)");
    return -1;
}

/* the layer of the settings: heads and causal=false unless given (cope, causal only: true; its
 * masked scores are -inf, which the plots leave blank) */
static pe_status make_att(const pm_opts *o, pe_attention **att, pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    pe_status st = pe_config_set_all(&cfg, o->n_keys, o->keys, o->vals, err);
    char h[32];
    snprintf(h, sizeof h, "%lld", (long long)o->heads);
    if (!st && !pe_config_has(&cfg, PE_K_heads)) st = pe_config_set(&cfg, "heads", h, err);
    pe_method_info mi;
    if (!st && !pe_config_has(&cfg, PE_K_causal) && !(st = pe_method_describe(cfg.method, &mi, err)))
        st = pe_config_set(&cfg, "causal", mi.causal_only ? "true" : "false", err);
    if (!st) st = pe_attention_init(att, &cfg, o->C, err);
    return st;
}

pe_status pm_checkpoint(pm_opts *o, pm_ckpt *ck, pe_err *err) {
    memset(ck, 0, sizeof *ck);
    tr_options t;
    pe_status st = tr_checkpoint_options(o->from, &t, err);
    if (st == PE_EFORMAT) return PE_OK; /* not a checkpoint (or unreadable: the plain path says why) */
    if (st) return st;
    ck->is = 1, ck->layers = t.layers;
    snprintf(ck->method, sizeof ck->method, "%s", t.method);
    for (int i = 0; i < o->n_keys; i++)
        if (!strcmp(o->keys[i], "method") && strcmp(o->vals[i], t.method))
            return pe_error(err, PE_EKEY, "%s: a checkpoint of method %s, not %s", o->from, t.method, o->vals[i]);
    if (o->layer < 0 || o->layer >= t.layers)
        return pe_error(err, PE_EINVAL, "--layer %lld: %s has %lld block%s (0..%lld)", (long long)o->layer, o->from,
                        (long long)t.layers, t.layers == 1 ? "" : "s", (long long)t.layers - 1);
    ck->keys = calloc((size_t)o->n_keys + TR_MAX_KEYS + 2, sizeof(char *));
    ck->vals = calloc((size_t)o->n_keys + TR_MAX_KEYS + 2, sizeof(char *));
    if (!ck->keys || !ck->vals) return pe_error(err, PE_ENOMEM, "out of memory");
    /* the checkpoint's method and layer keys, then the settings' (which win) */
    int n = 0;
    ck->keys[n] = "method", ck->vals[n++] = ck->method;
    for (int k = 0; k < t.n_keys && k < 20; k++) {
        int over = 0;
        for (int i = 0; i < o->n_keys; i++) over |= !strcmp(o->keys[i], t.key[k]);
        if (over) continue;
        snprintf(ck->key[k], sizeof ck->key[k], "%s", t.key[k]), snprintf(ck->val[k], sizeof ck->val[k], "%s", t.val[k]);
        ck->keys[n] = ck->key[k], ck->vals[n++] = ck->val[k];
    }
    for (int i = 0; i < o->n_keys; i++) ck->keys[n] = o->keys[i], ck->vals[n++] = o->vals[i];
    o->keys = ck->keys, o->vals = ck->vals, o->n_keys = n;
    o->C = t.width, o->heads = t.heads, o->checkpoint = 1;
    return PE_OK;
}

void pm_checkpoint_free(pm_ckpt *ck) {
    free(ck->keys), free(ck->vals);
    ck->keys = ck->vals = NULL;
}

/* A checkpoint's method tensors for pe_encode: h.<layer>.attn.<name> (per block), else
 * pe.<name> (shared by the blocks, or added at the input); --tensor NAME for a pos_table. */
static pe_status encode_from_checkpoint(const pm_opts *o, int m, int n_keys, const char **keys, const char **vals,
                                        pe_tensor *posn, pe_tensor *ids, pe_tensor **outs, int *n_outs, pe_err *err) {
    pe_st_file f;
    pe_status st = pe_st_read(o->from, &f, err);
    if (st) return st;
    pe_attention *att = NULL;
    st = make_att(o, &att, err);
    pe_param_spec specs[PE_MAX_PARAMS];
    int np = st ? 0 : pe_attention_params(att, specs), n = 0;
    pe_tensor in[PE_MAX_PARAMS + 2];
    in[n++] = *posn;
    if (ids) in[n++] = *ids;
    for (int i = 0; i < np && !st; i++) {
        if (specs[i].optional) continue;
        char own[96], shared[96];
        snprintf(own, sizeof own, "h.%lld.attn.%s", (long long)o->layer, specs[i].name);
        snprintf(shared, sizeof shared, "pe.%s", specs[i].name);
        int pick = o->tensor && !strcmp(specs[i].name, "pos_table");
        const pe_tensor *t = NULL;
        for (int j = 0; j < f.n && !t; j++)
            if (pick ? !strcmp(f.t[j].name, o->tensor) : !strcmp(f.t[j].name, own)) t = &f.t[j];
        for (int j = 0; j < f.n && !t && !pick; j++)
            if (!strcmp(f.t[j].name, shared)) t = &f.t[j];
        if (!t && pick) st = pe_error(err, PE_ETENSOR, "%s: no tensor '%s'", o->from, o->tensor);
        else if (!t)
            st = pe_error(err, PE_ETENSOR, "%s: no tensor '%s' or '%s' (method %s in block %lld)", o->from, own, shared,
                          pe_method_name(m), (long long)o->layer);
        else if (!strcmp(specs[i].name, "pos_table") && t->ndim == 2 && t->shape[0] < o->N)
            st = pe_error(err, PE_EPOS, "%s: %s has %lld rows, fewer than the %lld positions asked for", o->from, t->name,
                          (long long)t->shape[0], (long long)o->N);
        else {
            in[n] = *t;
            snprintf(in[n++].name, sizeof in[0].name, "%s", specs[i].name);
        }
    }
    if (!st) st = pe_encode(n_keys, keys, vals, o->C, n, in, outs, n_outs, err);
    pe_attention_free(att);
    pe_st_free(&f);
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
        st = pe_error(err, PE_ETENSOR, "%s: no tensor '%s'", o->from, o->tensor ? o->tensor : "pos_table (or pe.pos_table)");
    } else {
        pe_tensor in[2] = {f.t[found], *posn};
        snprintf(in[0].name, sizeof in[0].name, "pos_table");
        if (in[0].ndim == 2 && in[0].shape[0] < o->N)
            st = pe_error(err, PE_EPOS, "%s: pos_table has %lld rows, fewer than the %lld positions asked for", o->from,
                          (long long)in[0].shape[0], (long long)o->N);
        else
            st = pe_encode(n_keys, keys, vals, 0, 2, in, outs, n_outs, err);
    }
    pe_st_free(&f);
    return st;
}

/* --from with a method that is not absolute: plots and analyze of its scores and indices use
 * a random layer, so a file's tensors would be silently ignored. */
static pe_status from_refused(const pm_opts *o, int m, pe_err *err) {
    return pe_error(err, PE_EINVAL, "%s: --from reads the encoding of an absolute method (learned, floater, ...), not the %s method %s",
                    o->from, pe_family_name(pe_method_family(m)), pe_method_name(m));
}

pe_status pm_encoding(const pm_opts *o, pe_tensor **outs, int *n_outs, pe_err *err) {
    int m = pm_method(o, err);
    if (m < 0) return PE_EKEY;
    if (pe_method_family(m) != PE_FAMILY_ABSOLUTE && o->from) return from_refused(o, m, err);
    if (pe_method_family(m) != PE_FAMILY_ABSOLUTE)
        return pe_error(err, PE_EINVAL, "method '%s' is %s, not absolute: it has no encoding P (try the similarity or relative plots)",
                        pe_method_name(m), pe_family_name(pe_method_family(m)));
    int64_t *pos = malloc(sizeof(int64_t) * 2 * (size_t)o->N);
    const char **keys = calloc((size_t)o->n_keys + 1, sizeof(char *)), **vals = calloc((size_t)o->n_keys + 1, sizeof(char *));
    if (!pos || !keys || !vals) {
        free(pos), free(keys), free(vals);
        return pe_error(err, PE_ENOMEM, "out of memory");
    }
    for (int64_t t = 0; t < o->N; t++) pos[t] = t, pos[o->N + t] = 0;
    int nk = 0;
    for (int i = 0; i < o->n_keys; i++)
        if (strcmp(o->keys[i], "causal")) keys[nk] = o->keys[i], vals[nk++] = o->vals[i];
    pe_tensor posn = {.name = "positions", .dtype = PE_I64, .ndim = 1, .shape = {o->N}, .data = pos};
    pe_status st;
    pe_tensor ids = {.name = "ids", .dtype = PE_I64, .ndim = 1, .shape = {o->N}, .data = pos + o->N};
    if (o->checkpoint) {
        st = encode_from_checkpoint(o, m, nk, keys, vals, &posn, m == PE_METHOD_COMPLEX ? &ids : NULL, outs, n_outs, err);
    } else if (o->from) {
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
        if (m == PE_METHOD_COMPLEX) in[n++] = ids; /* one token everywhere: the encoding of position alone */
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
        return pe_error(err, PE_EINVAL, "method '%s' is absolute: its position-position matrix is P P^T (the encoding), not a score",
                        pe_method_name(m));
    if (o->from) return from_refused(o, m, err);
    pe_attention *att = NULL;
    pe_layer L = {0};
    float *buf = NULL;
    pe_status st = make_att(o, &att, err);
    if (!st) st = pe_layer_init(&L, att, o->N + 1, o->seed, err); /* TUPE reads row p + 1 */
    int64_t N = o->N, C = L.C, Ckv = L.Ckv, H = st ? 0 : pe_attention_config(att)->heads;
    if (!st && !(buf = calloc((size_t)(2 * C * C + 2 * Ckv * C + 2 * N * C + H * N * N), sizeof(float))))
        st = pe_error(err, PE_ENOMEM, "out of memory");
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
        if (!st && !(*S = malloc(sizeof(double) * (size_t)(H * N * N)))) st = pe_error(err, PE_ENOMEM, "out of memory");
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
    pe_method_info mi;
    if (pe_method_describe(m, &mi, err)) return PE_EINVAL;
    if (!mi.relative_index)
        return pe_error(err, PE_EINVAL, "method '%s' has no relative index (a table row per offset); try --show bias",
                        pe_method_name(m));
    if (o->from) return from_refused(o, m, err);
    pe_attention *att = NULL;
    pe_status st = make_att(o, &att, err);
    if (st) return st;
    int64_t N = o->N;
    if (!(*S = malloc(sizeof(double) * (size_t)(N * N)))) st = pe_error(err, PE_ENOMEM, "out of memory");
    for (int64_t i = 0; !st && i < N; i++)
        for (int64_t j = 0; j < N && !st; j++) {
            int64_t v = 0;
            st = pe_attention_relative_index(att, i, j, &v, err);
            (*S)[i * N + j] = (double)v;
        }
    pe_attention_free(att);
    return st;
}
