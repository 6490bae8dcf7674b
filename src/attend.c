/* pe_attend: the conformance contract by name (doc/spec/conformance.md). Checks every
 * tensor's name, dtype and shape against the layer's configuration, runs forward (and
 * backward when dy is given) and returns the contract's outputs. Complex-valued layers
 * (method complex) read `ids` in place of `x`, take an optional `dy_imag` and write `y_imag`
 * and no `dx`. */
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
        return pe_error(err, PE_ETENSOR, "tensor '%s': dtype %s, expected F32", t->name, pe_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = shape[d] == -1 ? t->shape[d] >= 1 : t->shape[d] == shape[d];
    if (!ok) {
        char want[96], got[96];
        shape_str(want, sizeof want, ndim, shape);
        shape_str(got, sizeof got, t->ndim, t->shape);
        if (shape[0] == -1) want[1] = 'N', memmove(want + 2, want + 3, strlen(want + 2));
        return pe_error(err, PE_ETENSOR, "tensor '%s': shape %s, expected %s", t->name, got, want);
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
    if (!t->data) return pe_error(err, PE_ENOMEM, "out of memory for output '%s'", name);
    (*n)++;
    return PE_OK;
}

/* An I32 or I64 tensor as a new int64 array (NULL: out of memory). */
static int64_t *to_i64(const pe_tensor *t) {
    int64_t n = numel(t);
    int64_t *v = malloc(sizeof(int64_t) * (n ? n : 1));
    if (v)
        for (int64_t i = 0; i < n; i++)
            v[i] = t->dtype == PE_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return v;
}

/* positions-like tensor t: I32/I64, [n] or (batched) [B, n]; with A >= 2 axes per position (a
 * multi-axis layer) [n, A] or (batched) [B, n, A] */
static pe_status check_index(const pe_tensor *t, int batched, int64_t B, int64_t n, int64_t A, const char *what,
                             pe_err *err) {
    if (t->dtype != PE_I32 && t->dtype != PE_I64)
        return pe_error(err, PE_ETENSOR, "tensor '%s': dtype %s, expected I32 or I64", t->name, pe_dtype_name(t->dtype));
    const int ax = A > 1;
    if ((t->ndim == 1 + ax && t->shape[0] == n && (!ax || t->shape[1] == A)) ||
        (batched && t->ndim == 2 + ax && t->shape[0] == B && t->shape[1] == n && (!ax || t->shape[2] == A)))
        return PE_OK;
    char got[96];
    shape_str(got, sizeof got, t->ndim, t->shape);
    if (ax)
        return pe_error(err, PE_ETENSOR, "tensor '%s': shape %s, expected [%s, %lld]%s (%s = %lld; the layer reads %lld "
                        "position axes)", t->name, got, what, (long long)A, batched ? " or [B, ...]" : "", what,
                        (long long)n, (long long)A);
    return pe_error(err, PE_ETENSOR, "tensor '%s': shape %s, expected [%s]%s (%s = %lld)", t->name, got, what,
                    batched ? " or [B, ...]" : "", what, (long long)n);
}

/* attn_mask: BOOL or U8, [T, Tk] or (batched) [B, T, Tk] */
static pe_status check_mask(const pe_tensor *t, int batched, int64_t B, int64_t T, int64_t Tk, pe_err *err) {
    if (t->dtype != PE_BOOL && t->dtype != PE_U8)
        return pe_error(err, PE_ETENSOR, "tensor 'attn_mask': dtype %s, expected BOOL or U8 (0 = masked)", pe_dtype_name(t->dtype));
    if ((t->ndim == 2 && t->shape[0] == T && t->shape[1] == Tk) ||
        (batched && t->ndim == 3 && t->shape[0] == B && t->shape[1] == T && t->shape[2] == Tk))
        return PE_OK;
    char got[96];
    shape_str(got, sizeof got, t->ndim, t->shape);
    return pe_error(err, PE_ETENSOR, "tensor 'attn_mask': shape %s, expected [T, Tk] = [%lld, %lld]%s", got, (long long)T,
                    (long long)Tk, batched ? " or [B, T, Tk]" : "");
}

void pe_tensors_free(pe_tensor *t, int n) {
    if (!t) return;
    for (int i = 0; i < n; i++) free(t[i].data);
    free(t);
}

/* The outputs become the caller's on success; on failure nothing stays allocated. */
static pe_status hand_out(pe_status st, pe_tensor *outs, int n_outs, pe_tensor **outs_p, int *n_outs_p) {
    if (st) {
        pe_tensors_free(outs, n_outs);
        return st;
    }
    *outs_p = outs;
    *n_outs_p = n_outs;
    return PE_OK;
}

/* What each form calls its tensors, for every message that names one: the input (and its dtype
 * and shapes), and the tensor whose last dimension is the width C that pe_attention_init
 * checks (its messages name no tensor: it is given a number). */
typedef struct form {
    const char *input, *dtype, *shapes, *width;
} form;
static const form LAYER_FORM = {"x", "F32", "[T, C] or [B, T, C]", "x"};
static const form COMPLEX_FORM = {"ids", "I32 or I64", "[T] or [B, T]", "wq"};
static const form PROJECTED_FORM = {"q", "F32", "[T, H*D] or [B, T, H*D]", "q"};

/* pe_attention_init with the form's names in the message */
static pe_status init_named(pe_attention **att, const pe_config *cfg, int64_t C, const form *f, pe_err *err) {
    pe_status st = pe_attention_init(att, cfg, C, err);
    if (st == PE_ETENSOR && !strncmp(err->msg, "width C=", 8)) {
        char inner[sizeof err->msg];
        snprintf(inner, sizeof inner, "%s", err->msg);
        return pe_error(err, st, "tensor '%s': %s", f->width, inner);
    }
    return st;
}

/* The tensors the projected form refuses: the layer's input, projections and memory. */
static const char *const LAYER_ONLY[] = {"x", "ids", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "mems", "dy", "dy_imag", NULL};

/* The projected form (doc/spec/conformance.md, "The projected form"): q, k, v with
 * positions, key_positions and attn_mask; o, scores, probs and with `do` dq, dk, dv, d<name>. */
static pe_status attend_qkv(const pe_config *cfg, int n_in, const pe_tensor *in, pe_tensor **outs_p, int *n_outs_p,
                            pe_err *err) {
    const char *method = pe_method_name(cfg->method);
    if (pe__method_get(cfg->method)->flags & PE__INPUT)
        return pe_error(err, PE_ETENSOR, "tensor 'q': method %s acts on the input embedding, not on q and k, so it has "
                                         "no projected form (give x and the projections)", method);
    for (int i = 0; LAYER_ONLY[i]; i++)
        if (find(n_in, in, LAYER_ONLY[i]))
            return pe_error(err, PE_ETENSOR, "tensor '%s' is not an input of the projected form (q, k, v given)", LAYER_ONLY[i]);
    const pe_tensor *q = find(n_in, in, "q"), *k = find(n_in, in, "k"), *v = find(n_in, in, "v");
    if (!k || !v) return pe_error(err, PE_ETENSOR, "tensor '%s' is missing (the projected form needs q, k and v)", k ? "v" : "k");
    const form *f = &PROJECTED_FORM;
    if (q->dtype != PE_F32)
        return pe_error(err, PE_ETENSOR, "tensor '%s': dtype %s, expected %s", f->input, pe_dtype_name(q->dtype), f->dtype);
    if (q->ndim != 2 && q->ndim != 3)
        return pe_error(err, PE_ETENSOR, "tensor '%s': expected %s, got %d dimensions", f->input, f->shapes, q->ndim);
    const int batched = q->ndim == 3;
    const int64_t B = batched ? q->shape[0] : 1, T = q->shape[batched], C = q->shape[batched + 1];
    if (B < 1 || T < 1 || C < 1) return pe_error(err, PE_ETENSOR, "tensor '%s': every dimension must be >= 1", f->input);
    if (k->ndim != q->ndim)
        return pe_error(err, PE_ETENSOR, "tensor 'k': %d dimensions, expected %d as q", k->ndim, q->ndim);
    const int64_t Tk = k->shape[batched];
    if (Tk < 1) return pe_error(err, PE_ETENSOR, "tensor 'k': Tk must be >= 1");

    pe_attention *att;
    pe_status st = init_named(&att, cfg, C, f, err);
    if (st) return st;
    const pe_config *rc = pe_attention_config(att);
    const int64_t H = rc->heads, D = pe_attention_head_dim(att), Ckv = rc->kv_heads * D;
    pe_param_spec specs[PE_MAX_PARAMS];
    const int np = pe_attention_params(att, specs);
    pe_weights w = {0};
    const pe_tensor *pos = NULL, *kpos = NULL, *mask = NULL, *dout = NULL;
    int64_t *pos64 = NULL, *kpos64 = NULL;
    pe_tensor *outs = NULL;
    int n_outs = 0;
    const int64_t qshape[3] = {B, T, C}, kshape[3] = {B, Tk, Ckv};
    for (int i = 0; i < n_in && !st; i++) {
        const pe_tensor *t = &in[i];
        const char *nm = t->name;
        int known = 0;
        for (int j = 0; j < np && !known; j++)
            if (!strcmp(nm, specs[j].name)) {
                known = 1;
                st = expect(t, specs[j].ndim, specs[j].shape, err);
                w.param[j] = t->data;
                w.param_rows[j] = t->shape[0];
            }
        if (known) continue;
        if (!strcmp(nm, "q")) st = expect(t, q->ndim, batched ? qshape : qshape + 1, err);
        else if (!strcmp(nm, "k") || !strcmp(nm, "v")) st = expect(t, q->ndim, batched ? kshape : kshape + 1, err);
        else if (!strcmp(nm, "do")) st = expect(dout = t, q->ndim, batched ? qshape : qshape + 1, err);
        else if (!strcmp(nm, "positions")) pos = t; /* checked below, once the method's tensors give its axes */
        else if (!strcmp(nm, "key_positions")) kpos = t;
        else if (!strcmp(nm, "attn_mask")) st = check_mask(mask = t, batched, B, T, Tk, err);
        else st = pe_error(err, PE_ETENSOR, "tensor '%s' is not an input of method %s", nm, method);
    }
    for (int j = 0; j < np && !st; j++)
        if (!specs[j].optional && !w.param[j])
            st = pe_error(err, PE_ETENSOR, "tensor '%s' is missing (method %s needs it)", specs[j].name, method);
    const int64_t A = pe_attention_axes(att, &w);
    if (!st && pos) st = check_index(pos, batched, B, T, A, "T", err);
    if (!st && kpos) st = check_index(kpos, batched, B, Tk, A, "Tk", err);
    if (!st && rc->causal && Tk < T)
        st = pe_error(err, PE_ETENSOR, "tensor 'k': causal attention needs Tk >= T (the queries are the last T of Tk "
                                       "tokens), got Tk = %lld, T = %lld", (long long)Tk, (long long)T);
    if (st) goto done;
    if ((pos && !(pos64 = to_i64(pos))) || (kpos && !(kpos64 = to_i64(kpos)))) {
        st = pe_error(err, PE_ENOMEM, "out of memory");
        goto done;
    }
    outs = calloc(4 + n_in, sizeof(pe_tensor));
    if (!outs) { st = pe_error(err, PE_ENOMEM, "out of memory"); goto done; }
    const int64_t sshape[4] = {B, H, T, Tk};
    if ((st = add_out(outs, &n_outs, "o", q->ndim, q->shape, err)) ||
        (st = add_out(outs, &n_outs, "scores", batched ? 4 : 3, batched ? sshape : sshape + 1, err)) ||
        (st = add_out(outs, &n_outs, "probs", batched ? 4 : 3, batched ? sshape : sshape + 1, err)))
        goto done;
    pe_positions at = {.pos = pos64, .pos_batched = pos && pos->ndim == 2 + (A > 1), .key_pos = kpos64,
                       .key_pos_batched = kpos && kpos->ndim == 2 + (A > 1), .mask = mask ? mask->data : NULL,
                       .mask_batched = mask && mask->ndim == 3, .axes = A};
    st = pe_attention_forward_qkv(att, &w, q->data, k->data, v->data, B, T, Tk, &at, outs[0].data, outs[1].data,
                                  outs[2].data, err);
    if (st || !dout) goto done;
    /* d<name> of every F32 input but do: dq, dk, dv first */
    float *dq = NULL, *dk = NULL, *dv = NULL;
    pe_grads g = {0};
    for (int i = 0; i < n_in && !st; i++) {
        const pe_tensor *t = &in[i];
        if (t->dtype != PE_F32 || !strcmp(t->name, "do")) continue;
        char name[80];
        snprintf(name, sizeof name, "d%s", t->name);
        if ((st = add_out(outs, &n_outs, name, t->ndim, t->shape, err))) goto done;
        float *d = outs[n_outs - 1].data;
        if (!strcmp(t->name, "q")) dq = d;
        else if (!strcmp(t->name, "k")) dk = d;
        else if (!strcmp(t->name, "v")) dv = d;
        else
            for (int j = 0; j < np; j++)
                if (!strcmp(t->name, specs[j].name)) g.dparam[j] = d;
    }
    st = pe_attention_backward_qkv(att, &w, dout->data, dq, dk, dv, &g, err);

done:
    free(pos64);
    free(kpos64);
    pe_attention_free(att);
    return hand_out(st, outs, n_outs, outs_p, n_outs_p);
}

pe_status pe_attend(int n_keys, const char *const *keys, const char *const *values, int n_in,
                    const pe_tensor *in, pe_tensor **outs_p, int *n_outs_p, pe_err *err) {
    *outs_p = NULL;
    *n_outs_p = 0;
    pe_config cfg;
    pe_config_init(&cfg);
    pe_status st = pe_config_set_all(&cfg, n_keys, keys, values, err);
    if (st) return st;
    if (cfg.method < 0) return pe_error(err, PE_EKEY, "key 'method' is required");
    /* the contract's finiteness rule: every float input finite (doc/spec/conformance.md) */
    for (int i = 0; i < n_in; i++)
        if (in[i].dtype == PE_F32 && in[i].data) {
            const float *v = in[i].data;
            for (int64_t e = 0, n = numel(&in[i]); e < n; e++)
                if (!isfinite(v[e]))
                    return pe_error(err, PE_ETENSOR, "tensor '%s': element %lld is %s: inputs must be finite", in[i].name,
                                    (long long)e, isnan(v[e]) ? "NaN" : v[e] > 0 ? "+Inf" : "-Inf");
        }

    if (find(n_in, in, "q")) return attend_qkv(&cfg, n_in, in, outs_p, n_outs_p, err);

    /* the layer's input: x [T, C] or [B, T, C]; complex: ids [T] or [B, T], C from wq */
    const int cx = (pe__method_get(cfg.method)->flags & PE__COMPLEX) != 0;
    const form *f = cx ? &COMPLEX_FORM : &LAYER_FORM;
    const pe_tensor *x = find(n_in, in, f->input);
    if (cx && find(n_in, in, LAYER_FORM.input))
        return pe_error(err, PE_ETENSOR, "tensor '%s' is not an input of method %s: it reads token ids from '%s'",
                        LAYER_FORM.input, pe_method_name(cfg.method), f->input);
    if (!x) return pe_error(err, PE_ETENSOR, "tensor '%s' is missing", f->input);
    if (cx ? x->dtype != PE_I32 && x->dtype != PE_I64 : x->dtype != PE_F32)
        return pe_error(err, PE_ETENSOR, "tensor '%s': dtype %s, expected %s", f->input, pe_dtype_name(x->dtype), f->dtype);
    if (x->ndim != 2 - cx && x->ndim != 3 - cx)
        return pe_error(err, PE_ETENSOR, "tensor '%s': expected %s, got %d dimensions", f->input, f->shapes, x->ndim);
    int batched = x->ndim == 3 - cx;
    int64_t B = batched ? x->shape[0] : 1, T = x->shape[batched], C = cx ? 0 : x->shape[x->ndim - 1];
    if (cx) {
        const pe_tensor *wq = find(n_in, in, "wq");
        if (!wq) return pe_error(err, PE_ETENSOR, "tensor 'wq' is missing");
        if (wq->ndim != 2) return pe_error(err, PE_ETENSOR, "tensor 'wq': expected [C, C], got %d dimensions", wq->ndim);
        C = wq->shape[1];
    }
    if (B < 1 || T < 1 || C < 1) return pe_error(err, PE_ETENSOR, "tensor '%s': every dimension must be >= 1", f->input);
    /* y's shape: x's; complex: ids' with C appended */
    int yndim = cx ? x->ndim + 1 : x->ndim;
    int64_t yshape[3] = {B, T, C};
    const int64_t *ys = batched ? yshape : yshape + 1;

    pe_attention *att;
    if ((st = init_named(&att, &cfg, C, f, err))) return st;
    const int64_t H = cfg.heads, D = pe_attention_head_dim(att), Ckv = pe_attention_config(att)->kv_heads * D;
    pe_param_spec specs[PE_MAX_PARAMS];
    int np = pe_attention_params(att, specs);
    int has_mem = pe_attention_has_memory(att);

    pe_weights w = {0};
    const pe_tensor *pos = NULL, *mems = NULL, *dy = NULL, *dy_im = NULL, *mask = NULL;
    int64_t M = 0;
    pe_tensor *outs = NULL;
    int n_outs = 0;
    int64_t *pos64 = NULL, *ids64 = NULL;

    /* every input: known name, right dtype and shape */
    for (int i = 0; i < n_in && !st; i++) {
        const pe_tensor *t = &in[i];
        const char *nm = t->name;
        int known = 0;
        if (strcmp(nm, f->input) == 0) continue;
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
            pos = t; /* checked below, once the method's tensors give its axes */
        } else if (strcmp(nm, "attn_mask") == 0) {
            mask = t; /* checked below, once the memory length is known */
        } else if (strcmp(nm, "dy") == 0) {
            dy = t;
            st = expect(t, yndim, ys, err);
        } else if (strcmp(nm, "dy_imag") == 0 && cx) {
            dy_im = t;
            st = expect(t, yndim, ys, err);
        } else if (strcmp(nm, "mems") == 0 && has_mem) {
            mems = t;
            M = t->ndim == x->ndim ? t->shape[t->ndim - 2] : 0;
            int64_t shape[3] = {B, M, C};
            st = expect(t, x->ndim, batched ? shape : shape + 1, err);
        } else {
            st = pe_error(err, PE_ETENSOR, "tensor '%s' is not an input of method %s", nm,
                          pe_method_name(cfg.method));
        }
    }
    if (!st && mask) st = check_mask(mask, batched, B, T, M + T, err);
    const int64_t A = pe_attention_axes(att, &w);
    if (!st && pos) st = check_index(pos, batched, B, T, A, "T", err);
    for (int k = 0; k < N_WEIGHTS && !st; k++)
        if (WEIGHTS[k].required && !find(n_in, in, WEIGHTS[k].name))
            st = pe_error(err, PE_ETENSOR, "tensor '%s' is missing", WEIGHTS[k].name);
    for (int k = 0; k < np && !st; k++)
        if (!specs[k].optional && !w.param[k])
            st = pe_error(err, PE_ETENSOR, "tensor '%s' is missing (method %s needs it)", specs[k].name,
                          pe_method_name(cfg.method));
    if (st) goto done;

    if (pos && !(pos64 = to_i64(pos))) { st = pe_error(err, PE_ENOMEM, "out of memory"); goto done; }

    /* outputs: y (complex: y_imag), scores, probs; with dy also dx (not complex) and d<name>
     * for every F32 input */
    outs = calloc(5 + n_in, sizeof(pe_tensor));
    if (!outs) { st = pe_error(err, PE_ENOMEM, "out of memory"); goto done; }
    int64_t sshape[4] = {B, H, T, M + T};
    if ((st = add_out(outs, &n_outs, "y", yndim, ys, err)) ||
        (cx && (st = add_out(outs, &n_outs, "y_imag", yndim, ys, err))) ||
        (st = add_out(outs, &n_outs, "scores", batched ? 4 : 3, batched ? sshape : sshape + 1, err)) ||
        (st = add_out(outs, &n_outs, "probs", batched ? 4 : 3, batched ? sshape : sshape + 1, err)))
        goto done;
    float *y = outs[0].data, *y_im = cx ? outs[1].data : NULL, *scores = outs[1 + cx].data,
          *probs = outs[2 + cx].data;
    if (cx) {
        if (!(ids64 = to_i64(x))) { st = pe_error(err, PE_ENOMEM, "out of memory"); goto done; }
        pe_positions at = {.pos = pos64, .pos_batched = pos && pos->ndim == 2,
                           .mask = mask ? mask->data : NULL, .mask_batched = mask && mask->ndim == 3};
        st = pe_attention_layer_forward_ids(att, &w, ids64, B, T, &at, y, y_im, scores, probs, err);
    } else {
        pe_positions at = {.pos = pos64, .pos_batched = pos && pos->ndim == 2 + (A > 1),
                           .mask = mask ? mask->data : NULL, .mask_batched = mask && mask->ndim == 3, .axes = A};
        st = pe_attention_layer_forward(att, &w, x->data, mems ? mems->data : NULL, M, B, T, &at, y, scores,
                                        probs, err);
    }
    if (st || !(dy || dy_im)) goto done;

    float *dx = NULL;
    if (!cx) {
        if ((st = add_out(outs, &n_outs, "dx", x->ndim, x->shape, err))) goto done;
        dx = outs[n_outs - 1].data;
    }
    pe_grads g = {0};
    for (int i = 0; i < n_in; i++) {
        const pe_tensor *t = &in[i];
        if (t->dtype != PE_F32 || !strcmp(t->name, "x") || !strcmp(t->name, "dy") ||
            !strcmp(t->name, "dy_imag") || !strcmp(t->name, "mems"))
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
    if (cx) st = pe_attention_backward_ids(att, &w, dy ? dy->data : NULL, dy_im ? dy_im->data : NULL, &g, err);
    else st = pe_attention_backward(att, &w, dy->data, dx, &g, err);

done:
    free(pos64);
    free(ids64);
    pe_attention_free(att);
    return hand_out(st, outs, n_outs, outs_p, n_outs_p);
}

/* ---- pe_encode: the absolute encoding, by name ------------------------------------------ */

/* Tensors of the layer that encode does not read (a conformance case can be its input). */
static int layer_tensor(const char *name) {
    static const char *const L[] = {"x", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo",
                                    "dy", "dy_imag", "mems", NULL};
    for (int i = 0; L[i]; i++)
        if (!strcmp(L[i], name)) return 1;
    return 0;
}

/* The width from the tensors: x's or wq's last dimension, else the method's first tensor
 * given, at the dimension that grows with C (the specs probed at C = 1 and C = 2). */
static int64_t width_of(const pe_config *cfg, int n_in, const pe_tensor *in) {
    const pe_tensor *t = find(n_in, in, "x");
    if (!t) t = find(n_in, in, "wq");
    if (t && t->ndim >= 1) return t->shape[t->ndim - 1];
    const pe__method *m = pe__method_get(cfg->method);
    if (!m->params) return 0;
    pe_param_spec s1[PE_MAX_PARAMS], s2[PE_MAX_PARAMS];
    int n = m->params(cfg, 1, 1, s1);
    m->params(cfg, 1, 2, s2);
    for (int i = 0; i < n; i++) {
        if (!(t = find(n_in, in, s1[i].name)) || t->ndim != s1[i].ndim) continue;
        for (int d = 0; d < s1[i].ndim; d++)
            if (s1[i].shape[d] == 1 && s2[i].shape[d] == 2) return t->shape[d];
    }
    return 0;
}

pe_status pe_encode(int n_keys, const char *const *keys, const char *const *values, int64_t C,
                    int n_in, const pe_tensor *in, pe_tensor **outs_p, int *n_outs_p, pe_err *err) {
    *outs_p = NULL;
    *n_outs_p = 0;
    pe_config cfg;
    pe_config_init(&cfg);
    pe_status st = pe_config_set_all(&cfg, n_keys, keys, values, err);
    if (st) return st;
    if (cfg.method < 0) return pe_error(err, PE_EKEY, "key 'method' is required");
    if (pe_method_family(cfg.method) != PE_FAMILY_ABSOLUTE) {
        char list[256] = "";
        for (int m = 0; m < PE_METHOD_COUNT; m++)
            if (pe_method_family(m) == PE_FAMILY_ABSOLUTE)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", pe_method_name(m));
        return pe_error(err, PE_EKEY, "method %s is not absolute: encode writes the P of %s", pe_method_name(cfg.method), list);
    }
    if (!pe_config_has(&cfg, PE_K_heads) && (st = pe_config_set(&cfg, "heads", "1", err))) return st;
    const pe__method *m = pe__method_get(cfg.method);
    const int cx = (m->flags & PE__COMPLEX) != 0;
    if (C <= 0 && (C = width_of(&cfg, n_in, in)) <= 0)
        return pe_error(err, PE_EINVAL, "the width C is unknown: give it (posenc encode --width C) or a tensor that has it");

    pe_attention *att;
    if ((st = pe_attention_init(&att, &cfg, C, err))) return st;
    const pe_config *rc = pe_attention_config(att);
    const int64_t D = pe_attention_head_dim(att);
    pe_param_spec specs[PE_MAX_PARAMS];
    int np = pe_attention_params(att, specs);
    pe_weights w = {0};
    const pe_tensor *pos = NULL, *ids = NULL;
    int64_t *pos64 = NULL, *ids64 = NULL, T = 0;
    pe_tensor *outs = NULL;
    int n_outs = 0;
    pe__ctx ctx = {0};

    for (int i = 0; i < n_in && !st; i++) {
        const pe_tensor *t = &in[i];
        int known = layer_tensor(t->name);
        for (int k = 0; k < np && !known; k++)
            if (!strcmp(t->name, specs[k].name)) {
                known = 1;
                st = expect(t, specs[k].ndim, specs[k].shape, err);
                w.param[k] = t->data;
                w.param_rows[k] = t->shape[0];
            }
        if (known) continue;
        if (!strcmp(t->name, "positions") || (cx && !strcmp(t->name, "ids"))) {
            if (t->dtype != PE_I32 && t->dtype != PE_I64)
                st = pe_error(err, PE_ETENSOR, "tensor '%s': dtype %s, expected I32 or I64", t->name, pe_dtype_name(t->dtype));
            else if (t->ndim != 1 || t->shape[0] < 1)
                st = pe_error(err, PE_ETENSOR, "tensor '%s': expected [T] with T >= 1, got %d dimensions", t->name, t->ndim);
            else if (T && t->shape[0] != T)
                st = pe_error(err, PE_ETENSOR, "tensor '%s': %lld entries, but %s has %lld", t->name,
                              (long long)t->shape[0], pos ? "positions" : "ids", (long long)T);
            T = t->shape[0];
            *(t->name[0] == 'p' ? &pos : &ids) = t;
        } else {
            st = pe_error(err, PE_ETENSOR, "tensor '%s' is not an input of method %s", t->name, pe_method_name(cfg.method));
        }
    }
    for (int k = 0; k < np && !st; k++)
        if (!specs[k].optional && !w.param[k])
            st = pe_error(err, PE_ETENSOR, "tensor '%s' is missing (method %s needs it)", specs[k].name, pe_method_name(cfg.method));
    if (!st && cx && !ids) st = pe_error(err, PE_ETENSOR, "tensor 'ids' is missing (method %s encodes token ids)", pe_method_name(cfg.method));
    if (!st && !pos && !cx) st = pe_error(err, PE_ETENSOR, "tensor 'positions' is missing: the positions to encode");
    if (st) goto done;
    if (!(pos64 = pos ? to_i64(pos) : malloc(sizeof(int64_t) * T)) || (cx && !(ids64 = to_i64(ids)))) {
        st = pe_error(err, PE_ENOMEM, "out of memory");
        goto done;
    }
    int64_t pmin = INT64_MAX, pmax = INT64_MIN;
    for (int64_t t = 0; t < T; t++) {
        if (!pos) pos64[t] = t;
        pmin = pos64[t] < pmin ? pos64[t] : pmin;
        pmax = pos64[t] > pmax ? pos64[t] : pmax;
    }

    /* the method's hooks on zeros: exactly what the layer adds */
    static const char *const NAMES[3][3] = {{"P"}, {"P_q", "P_k", "P_v"}, {"P_re", "P_im"}};
    const int kind = cx ? 2 : m->rotate_forward ? 1 : 0, n_p = kind == 1 ? 3 : kind == 2 ? 2 : 1;
    outs = calloc(n_p + 1, sizeof(pe_tensor));
    if (!outs) { st = pe_error(err, PE_ENOMEM, "out of memory"); goto done; }
    int64_t shape[2] = {T, C};
    for (int i = 0; i < n_p && !st; i++) st = add_out(outs, &n_outs, NAMES[kind][i], 2, shape, err);
    if (st) goto done;
    ctx = (pe__ctx){.cfg = rc, .B = 1, .T = T, .qoff = 0, .Tk = T, .kpos = pos64, .H = rc->heads, .Hkv = rc->kv_heads,
                    .D = D, .C = C, .Ckv = rc->kv_heads * D, .Dv = D, .pos = pos64, .pos_min = pmin,
                    .pos_max = pmax, .w = &w, .ids = ids64};
    if (m->prepare && (st = m->prepare(&ctx, err))) goto done;
    if (kind == 2) m->embed_pair(&ctx, outs[0].data, outs[1].data);
    else if (kind == 1) m->rotate_forward(&ctx, outs[0].data, outs[1].data, outs[2].data);
    else if (m->embed_forward) m->embed_forward(&ctx, outs[0].data);
    /* and the positions encoded, for plots */
    pe_tensor *p = &outs[n_outs++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "positions");
    p->dtype = PE_I64, p->ndim = 1, p->shape[0] = T, p->data = pos64;
    pos64 = NULL;

done:
    if (m->release && ctx.state) m->release(&ctx);
    free(pos64);
    free(ids64);
    pe_attention_free(att);
    return hand_out(st, outs, n_outs, outs_p, n_outs_p);
}
