/* pe_attend: the conformance contract by name (shared/spec/conformance.md). Checks every
 * tensor's name, dtype and shape against the layer's configuration, runs forward (and
 * backward when dy is given) and returns the contract's outputs. */
#include "internal.h"

#include <stddef.h>

/* The layer's own tensors: where each goes in pe_weights and pe_grads. */
static const struct {
    const char *name;
    size_t w_off, g_off;
    int kv;   /* rows are Ckv (key/value projections) rather than C */
    int ndim; /* 2: weight [out, C], 1: bias [out] */
    int required;
} WEIGHTS[] = {
#define W(n, kv, ndim, req) {#n, offsetof(pe_weights, n), offsetof(pe_grads, d##n), kv, ndim, req}
    W(wq, 0, 2, 1), W(wk, 1, 2, 1), W(wv, 1, 2, 1), W(wo, 0, 2, 1),
    W(bq, 0, 1, 0), W(bk, 1, 1, 0), W(bv, 1, 1, 0), W(bo, 0, 1, 0),
#undef W
};
enum { N_WEIGHTS = sizeof WEIGHTS / sizeof WEIGHTS[0] };

static const pe_tensor *find(int n, const pe_tensor *in, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(in[i].name, name) == 0) return &in[i];
    return NULL;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* Checks dtype F32 and the exact shape (shape[0] == -1 accepts any >= 1 rows). */
static pe_status expect(const pe_tensor *t, int ndim, const int64_t *shape, pe_err *err) {
    if (t->dtype != PE_F32)
        return pe__fail(err, PE_ETENSOR, "tensor '%s': dtype %s, expected F32", t->name, pe_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = shape[d] == -1 ? t->shape[d] >= 1 : t->shape[d] == shape[d];
    if (!ok) {
        char want[96], got[96];
        shape_str(want, sizeof want, ndim, shape);
        shape_str(got, sizeof got, t->ndim, t->shape);
        if (shape[0] == -1) want[1] = 'N', memmove(want + 2, want + 3, strlen(want + 2));
        return pe__fail(err, PE_ETENSOR, "tensor '%s': shape %s, expected %s", t->name, got, want);
    }
    return PE_OK;
}

static int64_t numel(const pe_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static pe_status add_out(pe_tensor *outs, int *n, const char *name, int ndim, const int64_t *shape,
                         pe_err *err) {
    pe_tensor *t = &outs[*n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = PE_F32;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * ndim);
    t->data = pe__calloc((size_t)numel(t), sizeof(float));
    if (!t->data) return pe__fail(err, PE_ENOMEM, "out of memory for output '%s'", name);
    (*n)++;
    return PE_OK;
}

void pe_tensors_free(pe_tensor *t, int n) {
    if (!t) return;
    for (int i = 0; i < n; i++) free(t[i].data);
    free(t);
}

pe_status pe_attend(int n_keys, const char *const *keys, const char *const *values, int n_in,
                    const pe_tensor *in, pe_tensor **outs_p, int *n_outs_p, pe_err *err) {
    *outs_p = NULL;
    *n_outs_p = 0;
    pe_config cfg;
    pe_config_init(&cfg);
    pe_status st = pe_config_set_all(&cfg, n_keys, keys, values, err);
    if (st) return st;
    if (cfg.method < 0) return pe__fail(err, PE_EKEY, "key 'method' is required");

    const pe_tensor *x = find(n_in, in, "x");
    if (!x) return pe__fail(err, PE_ETENSOR, "tensor 'x' is missing");
    if (x->dtype != PE_F32) return pe__fail(err, PE_ETENSOR, "tensor 'x': dtype %s, expected F32", pe_dtype_name(x->dtype));
    if (x->ndim != 2 && x->ndim != 3)
        return pe__fail(err, PE_ETENSOR, "tensor 'x': expected [T, C] or [B, T, C], got %d dimensions", x->ndim);
    int batched = x->ndim == 3;
    int64_t B = batched ? x->shape[0] : 1, T = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1];
    if (B < 1 || T < 1 || C < 1) return pe__fail(err, PE_ETENSOR, "tensor 'x': every dimension must be >= 1");

    pe_attention *att;
    if ((st = pe_attention_init(&att, &cfg, C, err))) return st;
    const int64_t H = cfg.heads, D = pe_attention_head_dim(att), Ckv = pe_attention_config(att)->kv_heads * D;
    pe_param_spec specs[PE_MAX_PARAMS];
    int np = pe_attention_params(att, specs);
    int has_mem = pe_attention_has_memory(att);

    pe_weights w = {0};
    const pe_tensor *pos = NULL, *mems = NULL, *dy = NULL;
    int64_t M = 0;
    pe_tensor *outs = NULL;
    int n_outs = 0;
    int64_t *pos64 = NULL;

    /* every input: known name, right dtype and shape */
    for (int i = 0; i < n_in && !st; i++) {
        const pe_tensor *t = &in[i];
        const char *nm = t->name;
        int known = 0;
        if (strcmp(nm, "x") == 0) continue;
        for (int k = 0; k < N_WEIGHTS && !known; k++) {
            if (strcmp(nm, WEIGHTS[k].name) != 0) continue;
            known = 1;
            int64_t shape[2] = {WEIGHTS[k].kv ? Ckv : C, C};
            st = expect(t, WEIGHTS[k].ndim, shape, err);
            *(const float **)((char *)&w + WEIGHTS[k].w_off) = t->data;
        }
        for (int k = 0; k < np && !known; k++) {
            if (strcmp(nm, specs[k].name) != 0) continue;
            known = 1;
            st = expect(t, specs[k].ndim, specs[k].shape, err);
            w.param[k] = t->data;
            w.param_rows[k] = t->shape[0];
        }
        if (known) continue;
        if (strcmp(nm, "positions") == 0) {
            pos = t;
            if (t->dtype != PE_I32 && t->dtype != PE_I64)
                st = pe__fail(err, PE_ETENSOR, "tensor 'positions': dtype %s, expected I32 or I64", pe_dtype_name(t->dtype));
            else if (!((t->ndim == 1 && t->shape[0] == T) ||
                       (batched && t->ndim == 2 && t->shape[0] == B && t->shape[1] == T))) {
                char got[96];
                shape_str(got, sizeof got, t->ndim, t->shape);
                st = pe__fail(err, PE_ETENSOR, "tensor 'positions': shape %s, expected [%lld]%s", got,
                              (long long)T, batched ? " or [B, T]" : "");
            }
        } else if (strcmp(nm, "dy") == 0) {
            dy = t;
            st = expect(t, x->ndim, x->shape, err);
        } else if (strcmp(nm, "mems") == 0 && has_mem) {
            mems = t;
            M = t->ndim == x->ndim ? t->shape[t->ndim - 2] : 0;
            int64_t shape[3] = {B, M, C};
            st = expect(t, x->ndim, batched ? shape : shape + 1, err);
        } else {
            st = pe__fail(err, PE_ETENSOR, "tensor '%s' is not an input of method %s", nm,
                          pe_method_name(cfg.method));
        }
    }
    for (int k = 0; k < N_WEIGHTS && !st; k++)
        if (WEIGHTS[k].required && !find(n_in, in, WEIGHTS[k].name))
            st = pe__fail(err, PE_ETENSOR, "tensor '%s' is missing", WEIGHTS[k].name);
    for (int k = 0; k < np && !st; k++)
        if (!specs[k].optional && !w.param[k])
            st = pe__fail(err, PE_ETENSOR, "tensor '%s' is missing (method %s needs it)", specs[k].name,
                          pe_method_name(cfg.method));
    if (st) goto done;

    if (pos) {
        int64_t n = numel(pos);
        pos64 = malloc(sizeof(int64_t) * n);
        if (!pos64) { st = pe__fail(err, PE_ENOMEM, "out of memory"); goto done; }
        for (int64_t i = 0; i < n; i++)
            pos64[i] = pos->dtype == PE_I64 ? ((const int64_t *)pos->data)[i] : ((const int32_t *)pos->data)[i];
    }

    /* outputs: y, scores, probs; with dy also dx and d<name> for every F32 input */
    outs = calloc(4 + n_in, sizeof(pe_tensor));
    if (!outs) { st = pe__fail(err, PE_ENOMEM, "out of memory"); goto done; }
    int64_t sshape[4] = {B, H, T, M + T};
    if ((st = add_out(outs, &n_outs, "y", x->ndim, x->shape, err)) ||
        (st = add_out(outs, &n_outs, "scores", batched ? 4 : 3, batched ? sshape : sshape + 1, err)) ||
        (st = add_out(outs, &n_outs, "probs", batched ? 4 : 3, batched ? sshape : sshape + 1, err)))
        goto done;
    st = pe_attention_forward(att, &w, x->data, mems ? mems->data : NULL, M, pos64,
                              pos && pos->ndim == 2, B, T, outs[0].data, outs[1].data, outs[2].data, err);
    if (st || !dy) goto done;

    if ((st = add_out(outs, &n_outs, "dx", x->ndim, x->shape, err))) goto done;
    pe_grads g = {0};
    for (int i = 0; i < n_in; i++) {
        const pe_tensor *t = &in[i];
        if (t->dtype != PE_F32 || !strcmp(t->name, "x") || !strcmp(t->name, "dy") || !strcmp(t->name, "mems"))
            continue;
        char name[80];
        snprintf(name, sizeof name, "d%s", t->name);
        if ((st = add_out(outs, &n_outs, name, t->ndim, t->shape, err))) goto done;
        float *d = outs[n_outs - 1].data, **slot = NULL;
        for (int k = 0; k < N_WEIGHTS && !slot; k++)
            if (!strcmp(t->name, WEIGHTS[k].name)) slot = (float **)((char *)&g + WEIGHTS[k].g_off);
        for (int k = 0; k < np && !slot; k++)
            if (!strcmp(t->name, specs[k].name)) slot = &g.dparam[k];
        PE_ASSERT(slot);
        *slot = d;
    }
    st = pe_attention_backward(att, &w, dy->data, outs[3].data, &g, err);

done:
    free(pos64);
    pe_attention_free(att);
    if (st) {
        pe_tensors_free(outs, n_outs);
        return st;
    }
    *outs_p = outs;
    *n_outs_p = n_outs;
    return PE_OK;
}
