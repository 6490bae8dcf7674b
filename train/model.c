/* The small Transformer (model.h): size table, flat parameter block, forward and backward.
 *
 * Legend: B batch, T tokens per sequence, N = B*T, V vocabulary, C width, F MLP width,
 * M memory tokens, P positions in a batch's range [pmin, pmax]. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/layer.h"
#include "kernels.h"
#include "env.h"
#include "model_impl.h"

/* the call, its seconds added to m->prof_<slot> when profiling */
#define TIMED(slot, call)                                          \
    do {                                                           \
        const double t0_ = m->profile ? tr_now() : 0;              \
        call;                                                      \
        if (m->profile) m->prof_##slot += tr_now() - t0_;          \
    } while (0)

/* ---- the model ------------------------------------------------------------------------------ */

static int add_tensor(tr_model *m, const char *name, int ndim, const int64_t *shape, int decay, pe_err *err) {
    if (m->nt == TR_MAX_TENSORS) return pe_error(err, PE_EINVAL, "more than %d tensors", TR_MAX_TENSORS);
    tr_tensor *t = &m->t[m->nt];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d], t->numel *= shape[d];
    t->decay = decay;
    t->min = -INFINITY;
    t->off = m->n;
    m->n += (size_t)t->numel;
    return m->nt++;
}

static int find_tensor(const tr_model *m, const char *name) {
    for (int i = 0; i < m->nt; i++)
        if (!strcmp(m->t[i].name, name)) return i;
    return -1;
}

/* Adds the method tensors of att: per layer under prefix, shared/input ones under "pe.". */
static pe_status add_method_tensors(tr_model *m, pe_attention *att, const char *prefix, int *idx, pe_err *err) {
    pe_param_spec specs[PE_MAX_PARAMS];
    int np = pe_attention_params(att, specs);
    for (int i = 0; i < np; i++) {
        idx[i] = -1;
        if (specs[i].optional) continue; /* optional tensors stay absent: the method's default */
        int64_t shape[PE_MAX_DIMS];
        for (int d = 0; d < specs[i].ndim; d++) shape[d] = specs[i].shape[d];
        if (shape[0] == -1) /* TUPE reads row p + 1; complex's tables are per token */
            shape[0] = specs[i].token_rows ? m->cfg.V : m->cfg.max_pos + 1;
        /* the reference model's own (pe_param_spec): one tensor for every layer, or per layer */
        int shared = !prefix || specs[i].shared;
        char name[64];
        if (shared && prefix && m->cfg.schedule[0]) /* two methods of a schedule may name a tensor alike */
            snprintf(name, sizeof name, "pe.%s.%s", pe_method_name(pe_attention_config(att)->method), specs[i].name);
        else snprintf(name, sizeof name, "%s%s", shared ? "pe." : prefix, specs[i].name);
        int t = find_tensor(m, name);
        if (t < 0) {
            t = add_tensor(m, name, specs[i].ndim, shape, specs[i].ndim >= 2, err);
            if (t < 0) return PE_EINVAL;
            m->t[t].method = 1;
            m->t[t].init = specs[i].init;
            m->t[t].min = specs[i].clamped ? (float)specs[i].clamp_min : -INFINITY;
            if (shared && specs[i].layernormed) {
                tr_normed *z = &m->normed[m->n_normed++];
                z->t = t;
                z->cols = shape[specs[i].ndim - 1];
                z->rows = m->t[t].numel / z->cols;
                char ln[80];
                snprintf(ln, sizeof ln, "%s.ln.weight", name);
                if ((z->tw = add_tensor(m, ln, 1, &z->cols, 0, err)) < 0) return PE_EINVAL;
                snprintf(ln, sizeof ln, "%s.ln.bias", name);
                if ((z->tb = add_tensor(m, ln, 1, &z->cols, 0, err)) < 0) return PE_EINVAL;
            }
        }
        idx[i] = t;
    }
    return PE_OK;
}

static void init_values(tr_model *m, uint64_t seed) {
    pe_rng rng = {seed};
    for (int i = 0; i < m->nt; i++) {
        tr_tensor *t = &m->t[i];
        float *p = m->params + t->off;
        const char *base = strrchr(t->name, '.') ? strrchr(t->name, '.') + 1 : t->name;
        if (t->method) {
            tr_tensor ti = *t;
            /* the recipe's two choices on top of the references: learned position tables at
             * half the scaled tokens' size, GPT-2's wpe : wte ratio (0.01 : 0.02) (at the
             * references' N(0, 0.02) against tokens scaled by sqrt(C) the model ignores them
             * for the first thousand steps); FLOATER's initial value B(0) at 0 (its reference
             * N(0, 1) made one seed of three reach NaN logits at 8x the training length) */
            if (!strcmp(base, "pos_table") && m->place == TR_PLACE_INPUT) ti.init = (pe_init){PE_INIT_NORMAL, 0.5, 0};
            if (!strcmp(base, "floater_b0")) ti.init = (pe_init){PE_INIT_CONST, 0, 0};
            pe_init_draw(&ti.init, ti.numel, ti.ndim >= 2 ? ti.shape[ti.ndim - 1] : ti.numel, m->cfg.C, p, &rng);
            continue;
        }
        int kind_one = !strcmp(base, "weight") && t->ndim == 1; /* LayerNorm gains */
        float std = 0.02f;
        if (!strcmp(t->name, "wte")) std = 1.0f / sqrtf((float)m->cfg.C); /* fairseq: N(0, 1/C) */
        if (strstr(t->name, "mlp.proj.weight") || strstr(t->name, "attn.wo"))
            std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers); /* GPT-2's scaling of residual outputs */
        for (int64_t e = 0; e < t->numel; e++)
            p[e] = t->ndim >= 2 ? std * pe_rng_normal(&rng) : kind_one ? 1.0f : 0.0f;
    }
}

static pe_status reserve_acts(tr_model *m, int64_t N, pe_err *err) {
    tr_acts *a = &m->a;
    if (N <= a->cap) return PE_OK;
    const int64_t Ly = m->cfg.layers, C = m->cfg.C, F = m->cfg.F, V = m->cfg.V;
    size_t per = (size_t)((Ly + 1) * C + Ly * (3 * C + 4 + 3 * F) + C + 2 + V + 3 * C + F + V);
    free(a->block), free(a->in), free(a->tgt), free(a->pos), free(a->ids);
    memset(a, 0, sizeof *a);
    a->block = malloc(per * (size_t)N * sizeof(float));
    a->in = malloc(sizeof(int32_t) * (size_t)N), a->tgt = malloc(sizeof(int32_t) * (size_t)N);
    a->pos = malloc(sizeof(int64_t) * (size_t)N), a->ids = malloc(sizeof(int64_t) * (size_t)N);
    if (!a->block || !a->in || !a->tgt || !a->pos || !a->ids)
        return pe_error(err, PE_ENOMEM, "out of memory for the activations of %lld tokens", (long long)N);
    a->cap = N;
    float *p = a->block;
#define CARVE(f, count) (a->f = p, p += (count))
    CARVE(x, (Ly + 1) * N * C);
    CARVE(ln1, Ly * N * C);
    CARVE(xmid, Ly * N * C);
    CARVE(ln2, Ly * N * C);
    CARVE(ln1s, Ly * 2 * N);
    CARVE(ln2s, Ly * 2 * N);
    CARVE(fc, Ly * N * F);
    CARVE(act, Ly * N * F);
    CARVE(gt, Ly * N * F);
    CARVE(lnf, N * C);
    CARVE(lnfs, 2 * N);
    CARVE(probs, N * V);
    CARVE(tmp, N * C);
    CARVE(dx, N * C);
    CARVE(dln, N * C);
    CARVE(dfc, N * F);
    CARVE(dlogits, N * V);
#undef CARVE
    return PE_OK;
}

pe_status tr_model_init(tr_model **out, const tr_model_config *cfg, uint64_t seed, pe_err *err) {
    *out = NULL;
    if (cfg->V < 2 || cfg->layers < 1 || cfg->C < 2 || cfg->heads < 1 || cfg->F < 1 || cfg->max_pos < 1)
        return pe_error(err, PE_EINVAL, "model: need vocabulary >= 2, layers >= 1, width >= 2, heads >= 1, max_pos >= 1");
    if (cfg->C % cfg->heads) return pe_error(err, PE_EINVAL, "model: width %lld does not divide by %lld heads", (long long)cfg->C, (long long)cfg->heads);
    const char *why;
    tr_placement place = tr_method_placement(cfg->method, &why);
    const int nsched = tr_schedule_method(cfg->schedule, 0, NULL, 0);
    if (cfg->schedule[0] && !nsched) return pe_error(err, PE_EINVAL, "schedule '%s': need method names separated by commas", cfg->schedule);
    if (nsched > cfg->layers)
        return pe_error(err, PE_EINVAL, "schedule '%s': %d methods for %lld layers", cfg->schedule, nsched, (long long)cfg->layers);
    for (int i = 0; i < nsched; i++) {
        char lm[32];
        tr_schedule_method(cfg->schedule, i, lm, sizeof lm);
        /* a layer of a schedule holds its encoding in its attention: absolute encodings enter
         * once at the input and complex-valued ones replace block 0, so neither is per layer */
        tr_placement p = tr_method_placement(lm, &why);
        if (p == TR_PLACE_NONE) return pe_error(err, PE_EINVAL, "schedule: method '%s': %s", lm, why);
        if (p != TR_PLACE_LAYER && pe_method_from_name(lm) != PE_METHOD_NONE)
            return pe_error(err, PE_EINVAL, "schedule: method '%s' is not one of the layers' (absolute and complex-valued encodings are not per layer; none is)", lm);
    }
    for (int k = 0; k < cfg->n_keys && nsched; k++) {
        int used = 0;
        char lm[32];
        for (int i = 0; i < nsched && !used; i++) used = tr_key_applies((tr_schedule_method(cfg->schedule, i, lm, sizeof lm), lm), cfg->key[k]);
        if (!used) return pe_error(err, PE_EINVAL, "key '%s' applies to none of the methods of the schedule %s", cfg->key[k], cfg->schedule);
    }
    if (nsched) place = TR_PLACE_LAYER;
    else if (place == TR_PLACE_NONE) return pe_error(err, PE_EINVAL, "method %s: %s", cfg->method, why);
    if (place == TR_PLACE_IDS && cfg->layers < 1) return pe_error(err, PE_EINVAL, "method %s needs a layer", cfg->method);
    tr_model *m = calloc(1, sizeof *m);
    if (!m) return pe_error(err, PE_ENOMEM, "out of memory");
    m->cfg = *cfg;
    m->place = place;
    const int64_t Ly = cfg->layers, C = cfg->C, F = cfg->F, V = cfg->V;
    pe_status st = PE_OK;
    m->layer = calloc((size_t)Ly, sizeof(tr_layer));
    if (!m->layer) st = pe_error(err, PE_ENOMEM, "out of memory");

    /* the size table: llm.c's fill_in_parameter_sizes, by name */
    int idx[64][PE_MAX_PARAMS + 16];
    const int64_t sC[1] = {C}, sCC[2] = {C, C}, sFC[2] = {F, C}, sCF[2] = {C, F}, sF[1] = {F}, sVC[2] = {V, C};
    if (!st && (m->t_wte = add_tensor(m, "wte", 2, sVC, 1, err)) < 0) st = PE_EINVAL;
    if (!st && Ly > 64) st = pe_error(err, PE_EINVAL, "model: at most 64 layers");
    for (int64_t l = 0; l < Ly && !st; l++) {
        tr_layer *L = &m->layer[l];
        int own = place == TR_PLACE_LAYER || (place == TR_PLACE_IDS && l == 0);
        char lm[32];
        if (nsched) tr_schedule_method(cfg->schedule, l, lm, sizeof lm);
        else snprintf(lm, sizeof lm, "%s", own ? cfg->method : pe_method_name(PE_METHOD_NONE));
        st = tr_make_attention(&L->att, cfg, lm, cfg->heads, !cfg->bidirectional, l, err);
        if (st) break;
        /* the layer's input (a->ln1's slice of the layer) stays as it is until backward: the
         * layer reads it in place rather than copying it */
        pe_attention_set_run_options(L->att, &(pe_run_options){.saved = PE_SAVED_INPUTS});
        if (nsched && pe_attention_has_memory(L->att)) {
            /* the memory is every layer's input of the last segment, carried as one block */
            st = pe_error(err, PE_EINVAL, "schedule: method '%s' carries memory between segments; it trains alone, not in a schedule", lm);
            break;
        }
        if ((place == TR_PLACE_IDS && l == 0) != pe_attention_is_complex(L->att)) {
            st = pe_error(err, PE_EINVAL, "method %s: the trainer's convention and the layer disagree on token ids", cfg->method);
            break;
        }
        char pre[32], nm[96];
        snprintf(pre, sizeof pre, "h.%lld.", (long long)l);
        static const struct { const char *name; int which; } ROWS[] = {
            {"ln_1.weight", 0}, {"ln_1.bias", 0}, {"attn.wq", 1}, {"attn.bq", 0}, {"attn.wk", 1},
            {"attn.bk", 0},     {"attn.wv", 1},   {"attn.bv", 0}, {"attn.wo", 1}, {"attn.bo", 0},
            {"ln_2.weight", 0}, {"ln_2.bias", 0}, {"mlp.fc.weight", 2}, {"mlp.fc.bias", 3},
            {"mlp.proj.weight", 4}, {"mlp.proj.bias", 0}};
        for (int r = 0; r < 16 && !st; r++) {
            snprintf(nm, sizeof nm, "%s%s", pre, ROWS[r].name);
            const int64_t *shape = ROWS[r].which == 1 ? sCC : ROWS[r].which == 2 ? sFC : ROWS[r].which == 3 ? sF
                                 : ROWS[r].which == 4 ? sCF : sC;
            if ((idx[l][r] = add_tensor(m, nm, ROWS[r].which == 0 || ROWS[r].which == 3 ? 1 : 2, shape,
                                        ROWS[r].which == 1 || ROWS[r].which == 2 || ROWS[r].which == 4, err)) < 0)
                st = PE_EINVAL;
        }
        snprintf(pre, sizeof pre, "h.%lld.attn.", (long long)l);
        if (!st) st = add_method_tensors(m, L->att, pre, idx[l] + 16, err);
        /* a bidirectional model's batches are unrelated sequences without a previous segment:
         * Transformer-XL's relative attention runs without memory (as Ruoss et al.'s relative
         * encoding, models/positional_encodings.py, compute_attention_with_relative_encodings) */
        m->has_mem = pe_attention_has_memory(L->att) && !cfg->bidirectional;
    }
    int pidx[PE_MAX_PARAMS];
    if (!st && place == TR_PLACE_INPUT) {
        st = tr_make_attention(&m->probe, cfg, cfg->method, 1, 0, -1, err);
        if (!st) st = add_method_tensors(m, m->probe, NULL, pidx, err);
    }
    if (!st && ((m->t_lnfw = add_tensor(m, "ln_f.weight", 1, sC, 0, err)) < 0 ||
                (m->t_lnfb = add_tensor(m, "ln_f.bias", 1, sC, 0, err)) < 0))
        st = PE_EINVAL;
    if (!st) {
        m->params = calloc(2 * m->n, sizeof(float));
        if (!m->params) st = pe_error(err, PE_ENOMEM, "out of memory for %zu parameters", m->n);
    }
    if (st) {
        tr_model_free(m);
        return st;
    }
    m->grads = m->params + m->n;

    /* malloc_and_point_parameters */
#define PTR(i) (m->params + m->t[i].off)
#define GRD(i) (m->grads + m->t[i].off)
    m->wte = PTR(m->t_wte), m->lnfw = PTR(m->t_lnfw), m->lnfb = PTR(m->t_lnfb);
    for (int z = 0; z < m->n_normed; z++) {
        tr_normed *q = &m->normed[z];
        q->y = calloc((size_t)(2 * q->rows * q->cols + 2 * q->rows), sizeof(float));
        if (!q->y) st = pe_error(err, PE_ENOMEM, "out of memory");
        else q->dy = q->y + q->rows * q->cols, q->mean = q->dy + q->rows * q->cols, q->rstd = q->mean + q->rows;
    }
    for (int64_t l = 0; l < Ly && !st; l++) {
        tr_layer *L = &m->layer[l];
        float **f[16] = {&L->ln1w, &L->ln1b, &L->wq, &L->bq, &L->wk, &L->bk, &L->wv, &L->bv,
                         &L->wo, &L->bo, &L->ln2w, &L->ln2b, &L->fcw, &L->fcb, &L->prw, &L->prb};
        for (int r = 0; r < 16; r++) *f[r] = PTR(idx[l][r]);
        L->w = (pe_weights){.wq = L->wq, .wk = L->wk, .wv = L->wv, .wo = L->wo,
                            .bq = L->bq, .bk = L->bk, .bv = L->bv, .bo = L->bo};
        L->g = (pe_grads){.dwq = GRD(idx[l][2]), .dbq = GRD(idx[l][3]), .dwk = GRD(idx[l][4]),
                          .dbk = GRD(idx[l][5]), .dwv = GRD(idx[l][6]), .dbv = GRD(idx[l][7]),
                          .dwo = GRD(idx[l][8]), .dbo = GRD(idx[l][9])};
        pe_param_spec specs[PE_MAX_PARAMS];
        int np = pe_attention_params(L->att, specs);
        for (int i = 0; i < np; i++) {
            int t = idx[l][16 + i];
            if (t < 0) continue;
            L->w.param[i] = PTR(t), L->g.dparam[i] = GRD(t);
            L->w.param_rows[i] = m->t[t].shape[0];
            for (int z = 0; z < m->n_normed; z++)
                if (m->normed[z].t == t) L->w.param[i] = m->normed[z].y, L->g.dparam[i] = m->normed[z].dy;
        }
    }
    if (!st && m->probe) {
        m->eye = calloc((size_t)(2 * C * C), sizeof(float));
        if (!m->eye) st = pe_error(err, PE_ENOMEM, "out of memory");
        else {
            m->zero = m->eye + C * C;
            for (int64_t i = 0; i < C; i++) m->eye[i * C + i] = 1;
            m->probe_w = (pe_weights){.wq = m->zero, .wk = m->zero, .wv = m->eye, .wo = m->eye};
            pe_param_spec specs[PE_MAX_PARAMS];
            int np = pe_attention_params(m->probe, specs);
            for (int i = 0; i < np; i++) {
                if (pidx[i] < 0) continue;
                m->probe_w.param[i] = PTR(pidx[i]), m->probe_g.dparam[i] = GRD(pidx[i]);
                m->probe_w.param_rows[i] = m->t[pidx[i]].shape[0];
                m->probe_params++;
            }
        }
    }
#undef PTR
#undef GRD
    if (st) {
        tr_model_free(m);
        return st;
    }
    init_values(m, seed);
    *out = m;
    return PE_OK;
}

void tr_model_free(tr_model *m) {
    if (!m) return;
    for (int64_t l = 0; m->layer && l < m->cfg.layers; l++) pe_attention_free(m->layer[l].att);
    free(m->layer);
    for (int z = 0; z < m->n_normed; z++) free(m->normed[z].y);
    pe_attention_free(m->probe);
    free(m->eye), free(m->P), free(m->ppos);
    free(m->mem);
    free(m->a.block), free(m->a.in), free(m->a.tgt), free(m->a.pos), free(m->a.ids);
    free(m->params);
    free(m);
}

const tr_model_config *tr_model_cfg(const tr_model *m) { return &m->cfg; }
float *tr_model_params(tr_model *m) { return m->params; }
float *tr_model_grads(tr_model *m) { return m->grads; }
size_t tr_model_size(const tr_model *m) { return m->n; }
int tr_model_tensors(const tr_model *m, const tr_tensor **t) {
    *t = m->t;
    return m->nt;
}
void tr_model_zero_grad(tr_model *m) { memset(m->grads, 0, sizeof(float) * m->n); }
const float *tr_model_probs(const tr_model *m) { return m->a.probs; }

void tr_model_project(tr_model *m) {
    for (int i = 0; i < m->nt; i++)
        if (m->t[i].min > -INFINITY) {
            float *p = m->params + m->t[i].off;
            for (int64_t e = 0; e < m->t[i].numel; e++) p[e] = p[e] < m->t[i].min ? m->t[i].min : p[e];
        }
}

/* ---- forward and backward ------------------------------------------------------------------- */

pe_status tr_model_forward(tr_model *m, const int32_t *in, const int32_t *tgt, const int64_t *pos,
                           int64_t B, int64_t T, int use_mem, double *loss, int64_t *count,
                           pe_err *err) {
    m->have_forward = 0;
    const int64_t N = B * T, C = m->cfg.C, F = m->cfg.F, V = m->cfg.V, Ly = m->cfg.layers;
    pe_status st = reserve_acts(m, N, err);
    if (st) return st;
    tr_acts *a = &m->a;
    for (int64_t i = 0; i < N; i++) {
        if (in[i] < 0 || in[i] >= V) return pe_error(err, PE_EINVAL, "token %d outside the vocabulary of %lld", in[i], (long long)V);
        if (tgt[i] >= V) return pe_error(err, PE_EINVAL, "target %d outside the vocabulary of %lld", tgt[i], (long long)V);
        a->in[i] = in[i], a->tgt[i] = tgt[i], a->ids[i] = in[i];
        a->pos[i] = pos ? pos[i] : i % T;
    }
    m->B = B, m->T = T;

    /* embedding, plus the absolute encoding once */
    /* x0 = sqrt(C) wte[in] (+ P[pos]): the Transformer's (and fairseq's) scaling, so token and
     * position signals start at comparable sizes (wte ~ N(0, 1/C), P entries in [-1, 1]) */
    const float es = sqrtf((float)C);
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++) a->x[i * C + c] = es * m->wte[(int64_t)in[i] * C + c];
    if (m->probe) {
        if ((st = tr_model_input_forward(m, a->pos, N, err))) return st;
        for (int64_t i = 0; i < N; i++) {
            const float *p = m->P + (a->pos[i] - m->pmin) * C;
            for (int64_t c = 0; c < C; c++) a->x[i * C + c] += p[c];
        }
    }
    const float dp = m->drop_p;
    const int64_t t0 = m->drop_row0 * T;
    if (dp > 0) tr_dropout(a->x, a->x, N, C, dp, m->drop_key, 0, t0);
    for (int z = 0; z < m->n_normed; z++) {
        tr_normed *q = &m->normed[z];
        tr_layernorm_forward(q->y, q->mean, q->rstd, m->params + m->t[q->t].off, m->params + m->t[q->tw].off,
                             m->params + m->t[q->tb].off, q->rows, q->cols);
    }
    int64_t M = use_mem && m->has_mem && m->mem_B == B ? m->mem_M : 0;
    m->used_mem = M > 0;
    for (int64_t l = 0; l < Ly; l++) {
        tr_layer *L = &m->layer[l];
        float *x = a->x + l * N * C, *ln1 = a->ln1 + l * N * C, *xmid = a->xmid + l * N * C,
              *ln2 = a->ln2 + l * N * C, *fc = a->fc + l * N * F, *act = a->act + l * N * F,
              *xout = a->x + (l + 1) * N * C;
        if (m->place == TR_PLACE_IDS && l == 0) {
            /* the complex layer reads the ids: xmid = x + y + y_imag (dln holds y_imag) */
            TIMED(attn, st = pe_attention_forward_ids(L->att, &L->w, a->ids, a->pos, 1, B, T, a->tmp, a->dln, NULL,
                                                      l == m->probs_layer ? m->probs_out : NULL, err));
            if (st) return st;
            if (dp > 0) tr_dropout(a->tmp, a->tmp, N, C, dp, m->drop_key, 1 + 2 * l, t0);
            if (dp > 0) tr_dropout(a->dln, a->dln, N, C, dp, m->drop_key, 1 + 2 * l, t0);
            for (int64_t i = 0; i < N * C; i++) xmid[i] = x[i] + a->tmp[i] + a->dln[i];
        } else {
            tr_layernorm_forward(ln1, a->ln1s + l * 2 * N, a->ln1s + l * 2 * N + N, x, L->ln1w, L->ln1b, N, C);
            TIMED(attn, st = pe_attention_forward(L->att, &L->w, ln1, M ? m->mem + l * B * M * C : NULL, M, a->pos, 1, B,
                                                  T, a->tmp, NULL, l == m->probs_layer ? m->probs_out : NULL, err));
            if (st) return st;
            if (dp > 0) tr_dropout(a->tmp, a->tmp, N, C, dp, m->drop_key, 1 + 2 * l, t0);
            for (int64_t i = 0; i < N * C; i++) xmid[i] = x[i] + a->tmp[i];
        }
        tr_layernorm_forward(ln2, a->ln2s + l * 2 * N, a->ln2s + l * 2 * N + N, xmid, L->ln2w, L->ln2b, N, C);
        TIMED(gemm, tr_linear_forward(fc, ln2, L->fcw, L->fcb, N, C, F));
        tr_gelu_forward(act, a->gt + l * N * F, fc, N * F);
        TIMED(gemm, tr_linear_forward(a->tmp, act, L->prw, L->prb, N, F, C));
        if (dp > 0) tr_dropout(a->tmp, a->tmp, N, C, dp, m->drop_key, 2 + 2 * l, t0);
        for (int64_t i = 0; i < N * C; i++) xout[i] = xmid[i] + a->tmp[i];
    }
    tr_layernorm_forward(a->lnf, a->lnfs, a->lnfs + N, a->x + Ly * N * C, m->lnfw, m->lnfb, N, C);
    TIMED(gemm, tr_linear_forward(a->probs, a->lnf, m->wte, NULL, N, C, V)); /* tied output projection */
    double sum = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++) {
        tr_softmax_row(a->probs + i * V, V);
        if (tgt[i] >= 0) sum -= log(fmax((double)a->probs[i * V + tgt[i]], 1e-30)), n++;
    }
    m->count = n;
    *loss = n ? sum / (double)n : 0;
    if (count) *count = n;
    m->have_forward = 1;
    return PE_OK;
}

pe_status tr_model_attention(tr_model *m, const int32_t *in, const int64_t *pos, int64_t T, int64_t layer,
                             float *probs, pe_err *err) {
    if (layer < 0 || layer >= m->cfg.layers)
        return pe_error(err, PE_EINVAL, "layer %lld: the model has layers 0..%lld", (long long)layer, (long long)m->cfg.layers - 1);
    int32_t *tgt = malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    if (!tgt) return pe_error(err, PE_ENOMEM, "out of memory");
    for (int64_t i = 0; i < T; i++) tgt[i] = -1; /* nothing scored: only the activations matter */
    double loss;
    m->probs_out = probs, m->probs_layer = layer;
    pe_status st = tr_model_forward(m, in, tgt, pos, 1, T, 0, &loss, NULL, err);
    m->probs_out = NULL;
    free(tgt);
    return st;
}

void tr_model_set_count(tr_model *m, int64_t n) { m->count = n; }
void tr_model_set_dropout(tr_model *m, double p, uint64_t key, int64_t row0) {
    m->drop_p = (float)p, m->drop_key = key, m->drop_row0 = row0;
}
void tr_model_profile(tr_model *m, int on) { m->profile = on; }
void tr_model_profile_read(tr_model *m, double *attn, double *gemm, int zero) {
    *attn = m->prof_attn, *gemm = m->prof_gemm;
    if (zero) m->prof_attn = m->prof_gemm = 0;
}

pe_status tr_model_backward(tr_model *m, pe_err *err) {
    if (!m->have_forward) return pe_error(err, PE_EINVAL, "backward without a forward");
    const int64_t N = m->B * m->T, C = m->cfg.C, F = m->cfg.F, V = m->cfg.V, Ly = m->cfg.layers;
    tr_acts *a = &m->a;
    float *g = m->grads;
    float *dwte = g + m->t[m->t_wte].off;
#define GRAD(p) (g + ((p) - m->params)) /* the gradient of a parameter pointer */

    /* forward was loss = mean_i -log softmax(lnf_i wte^T)[tgt_i], so now:
     * dlogits = (p - onehot) / count on scored rows */
    float inv = m->count ? 1.0f / (float)m->count : 0.0f;
    for (int64_t i = 0; i < N; i++) {
        float *d = a->dlogits + i * V;
        if (a->tgt[i] < 0) {
            memset(d, 0, sizeof(float) * V);
            continue;
        }
        for (int64_t v = 0; v < V; v++) d[v] = a->probs[i * V + v] * inv;
        d[a->tgt[i]] -= inv;
    }
    TIMED(gemm, tr_linear_backward(a->dln, 0, dwte, NULL, a->dlogits, a->lnf, m->wte, N, C, V));
    memset(a->dx, 0, sizeof(float) * (size_t)(N * C));
    tr_layernorm_backward(a->dx, g + m->t[m->t_lnfw].off, g + m->t[m->t_lnfb].off, a->dln,
                          a->x + Ly * N * C, a->lnfs, a->lnfs + N, m->lnfw, N, C);
    for (int z = 0; z < m->n_normed; z++)
        memset(m->normed[z].dy, 0, sizeof(float) * (size_t)(m->normed[z].rows * m->normed[z].cols));

    /* forward was y' = dropout(y) before each residual sum, so now: dy = dy' on the kept
     * elements (scaled), 0 on the dropped ones, from the same hash (tmp holds it) */
    const float dp = m->drop_p;
    const int64_t t0 = m->drop_row0 * m->T;
    for (int64_t l = Ly - 1; l >= 0; l--) {
        tr_layer *L = &m->layer[l];
        float *x = a->x + l * N * C, *xmid = a->xmid + l * N * C, *ln2 = a->ln2 + l * N * C,
              *fc = a->fc + l * N * F, *act = a->act + l * N * F;
        /* forward was xout = xmid + gelu(ln2 fcw^T + fcb) prw^T + prb, ln2 = LN(xmid), so now:
         * dx (the gradient of xout) flows to xmid unchanged, plus through the MLP */
        const float *dy = a->dx;
        if (dp > 0) tr_dropout(a->tmp, a->dx, N, C, dp, m->drop_key, 2 + 2 * l, t0), dy = a->tmp;
        TIMED(gemm, tr_linear_backward(a->dfc, 0, GRAD(L->prw), GRAD(L->prb), dy, act, L->prw, N, F, C));
        tr_gelu_backward(a->dfc, fc, a->gt + l * N * F, N * F);
        TIMED(gemm, tr_linear_backward(a->dln, 0, GRAD(L->fcw), GRAD(L->fcb), a->dfc, ln2, L->fcw, N, C, F));
        tr_layernorm_backward(a->dx, GRAD(L->ln2w), GRAD(L->ln2b), a->dln, xmid, a->ln2s + l * 2 * N,
                              a->ln2s + l * 2 * N + N, L->ln2w, N, C);
        pe_status st;
        dy = a->dx;
        if (dp > 0) tr_dropout(a->tmp, a->dx, N, C, dp, m->drop_key, 1 + 2 * l, t0), dy = a->tmp;
        if (m->place == TR_PLACE_IDS && l == 0) {
            /* forward was xmid = x + y + y_imag of the ids, so now: dx flows to x unchanged,
             * and is the gradient of both outputs */
            TIMED(attn, st = pe_attention_backward_ids(L->att, &L->w, dy, dy, &L->g, err));
            if (st) return st;
            continue;
        }
        /* forward was xmid = x + attn(LN(x)), so now: dx flows to x, plus through attention */
        TIMED(attn, st = pe_attention_backward(L->att, &L->w, dy, a->dln, &L->g, err));
        if (st) return st;
        tr_layernorm_backward(a->dx, GRAD(L->ln1w), GRAD(L->ln1b), a->dln, x, a->ln1s + l * 2 * N,
                              a->ln1s + l * 2 * N + N, L->ln1w, N, C);
    }
    /* forward was table' = LN(table) for every layer, so now: the layers' sum flows back */
    for (int z = 0; z < m->n_normed; z++) {
        tr_normed *q = &m->normed[z];
        float *dt = g + m->t[q->t].off;
        tr_layernorm_backward(dt, g + m->t[q->tw].off, g + m->t[q->tb].off, q->dy, m->params + m->t[q->t].off,
                              q->mean, q->rstd, m->params + m->t[q->tw].off, q->rows, q->cols);
    }
    if (dp > 0) tr_dropout(a->dx, a->dx, N, C, dp, m->drop_key, 0, t0);
    /* forward was x0 = sqrt(C) wte[in] + P[pos], so now: dwte[in] += sqrt(C) dx, dP[pos] += dx */
    const float es = sqrtf((float)C);
    for (int64_t i = 0; i < N; i++) {
        float *d = dwte + (int64_t)a->in[i] * C;
        for (int64_t c = 0; c < C; c++) d[c] += es * a->dx[i * C + c];
    }
#undef GRAD
    return tr_model_input_backward(m, err);
}
