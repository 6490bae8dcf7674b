/* The projected form (pe_attention_forward_qkv / backward_qkv): attention over q, k, v with
 * query and key positions and attn_mask.
 *   - the layer is projections + the projected form, for every method that has one: y, dx and
 *     every method tensor's gradient agree (Transformer-XL with memory included: keys at
 *     0 .. M+T-1, queries at M + t);
 *   - the fused path equals the reference path (asking for scores) with Tk != T, gapped key
 *     positions, decode steps, packed documents and windows in attn_mask, for every method the
 *     fused path takes: o, dq, dk, dv and the method's gradients;
 *   - what the form refuses: methods on (or reading) the input embedding, causal with Tk < T, a
 *     query left with no key (both paths), a key_pos given to the layer.
 * Nothing here is timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

/* y (n, out) = x (n, in) W^T + b */
static void linear(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in, int64_t out) {
    pe__gemm(0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    for (int64_t r = 0; b && r < n; r++)
        for (int64_t c = 0; c < out; c++) y[r * out + c] += b[c];
}

/* float32 sums in another order: relative to the tensor's scale */
static int64_t close_to(const char *what, const float *got, const float *want, int64_t n) {
    return pe_test_compare(what, got, want, n, 3e-5 * fmax(1.0, pe_test_maxabs(want, n)), 1e-4);
}

/* A layer of `settings` with H heads over width C, causal or not, and its random tensors (rows:
 * those of tables with free rows). */
static pe_attention *layer_of(const char *settings, int64_t H, int64_t C, int causal, uint64_t seed, int64_t rows,
                              pe_layer *L) {
    char full[512];
    pe_err err;
    snprintf(full, sizeof full, "%s heads=%lld causal=%s", settings, (long long)H, causal ? "true" : "false");
    pe_attention *att = pe_test_layer(full, C);
    if (L && pe_layer_init(L, att, rows, seed, &err)) fail_msg("%s", err.msg);
    return att;
}

/* Every method with a projected form, in the settings the layer tests use. */
static const char *const METHODS[] = {
    "method=none", "method=floater", "method=shaw max_rel=3", "method=xl", "method=xl same_length=true",
    "method=t5 num_buckets=8 max_distance=12", "method=tupe num_buckets=8 max_distance=12",
    "method=deberta position_buckets=4 max_relative_positions=8 share_att_key=false",
    "method=rope", "method=rope rope_scaling=longrope original_max_position_embeddings=8 max_position_embeddings=32",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=8", "method=huang1 max_rel=3",
    "method=huang2 max_rel=3", "method=huang3 max_rel=3", "method=huang4 max_rel=3", "method=alibi",
    "method=xpos xpos_scale_base=64", "method=kerple kerple=power", "method=fire fire_init_L=8",
};

/* y of the layer against wo (o of the projected form) + bo, and every gradient. */
static void layer_is_projections_plus_qkv(void **state) {
    const char *settings = *state;
    const int64_t B = 2, T = 9, H = 2, D = 4, C = H * D;
    const int xl = strstr(settings, "method=xl") != NULL;
    const int64_t M = xl ? 4 : 0, Tk = M + T;
    pe_layer L;
    pe_err err;
    pe_attention *att = layer_of(settings, H, C, 1, 5, 64, &L);
    pe_rng rng = {77};
    float *x = pe_test_uniform(B * T * C, &rng), *mems = pe_test_uniform(B * M * C, &rng), *dy = pe_test_uniform(B * T * C, &rng);
    int64_t pos[B * T];
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0, p = 3 * b; t < T; t++, p += 1 + (t * 5 + b) % 3) pos[b * T + t] = p;
    /* a packed row: attn_mask with two documents in row 1 (a query's own key always kept) */
    uint8_t mask[B * T * 13];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < Tk; j++) mask[(b * T + i) * Tk + j] = b == 0 || (j - M < 4) == (i < 4) || j >= M + i;

    for (int masked = 0; masked < 2; masked++)
        for (int path = 0; path < 2; path++) { /* 0: the reference path (scores asked for), 1: fused where allowed */
            float *y = malloc(sizeof(float) * B * T * C), *dx = malloc(sizeof(float) * B * T * C);
            float *scores = path ? NULL : malloc(sizeof(float) * B * H * T * Tk);
            pe_positions at = {.pos = xl ? NULL : pos, .pos_batched = 1, .mask = masked ? mask : NULL, .mask_batched = 1};
            pe_layer_zero_grad(&L);
            if (pe_attention_layer_forward(att, &L.w, x, M ? mems : NULL, M, B, T, &at, y, scores, NULL, &err) ||
                pe_attention_backward(att, &L.w, dy, dx, &L.g, &err))
                fail_msg("%s: layer: %s", settings, err.msg);
            float *want = malloc(sizeof(float) * L.n);
            memcpy(want, L.block + L.n, sizeof(float) * L.n);

            /* the same through the projections by hand */
            float *kvin = malloc(sizeof(float) * B * Tk * C), *q = malloc(sizeof(float) * B * T * C);
            float *k = malloc(sizeof(float) * B * Tk * C), *v = malloc(sizeof(float) * B * Tk * C);
            for (int64_t b = 0; b < B; b++) {
                memcpy(kvin + b * Tk * C, mems + b * M * C, sizeof(float) * M * C);
                memcpy(kvin + (b * Tk + M) * C, x + b * T * C, sizeof(float) * T * C);
            }
            linear(q, x, L.w.wq, L.w.bq, B * T, C, C);
            linear(k, kvin, L.w.wk, L.w.bk, B * Tk, C, C);
            linear(v, kvin, L.w.wv, L.w.bv, B * Tk, C, C);
            float *o = malloc(sizeof(float) * B * T * C), *y2 = malloc(sizeof(float) * B * T * C);
            pe_positions at2 = {.pos = xl ? NULL : pos, .pos_batched = 1, .key_pos = xl ? NULL : pos,
                                .key_pos_batched = 1, .mask = masked ? mask : NULL, .mask_batched = 1};
            if (pe_attention_forward_qkv(att, &L.w, q, k, v, B, T, Tk, &at2, o, scores, NULL, &err))
                fail_msg("%s: forward_qkv: %s", settings, err.msg);
            linear(y2, o, L.w.wo, L.w.bo, B * T, C, C);
            int64_t bad = close_to("y", y2, y, B * T * C);

            /* backward: dout = dy wo; dx = dq wq + dk wk + dv wv (the segment's keys) */
            float *dout = malloc(sizeof(float) * B * T * C), *dq = malloc(sizeof(float) * B * T * C);
            float *dk = malloc(sizeof(float) * B * Tk * C), *dv = malloc(sizeof(float) * B * Tk * C);
            float *dx2 = calloc((size_t)(B * T * C), sizeof(float)), *dkv = calloc((size_t)(B * Tk * C), sizeof(float));
            pe__gemm(0, 0, B * T, C, C, 1.0f, dy, C, L.w.wo, C, 0.0f, dout, C);
            pe_layer_zero_grad(&L);
            if (pe_attention_backward_qkv(att, &L.w, dout, dq, dk, dv, &L.g, &err))
                fail_msg("%s: backward_qkv: %s", settings, err.msg);
            pe__gemm(0, 0, B * T, C, C, 1.0f, dq, C, L.w.wq, C, 0.0f, dx2, C);
            pe__gemm(0, 0, B * Tk, C, C, 1.0f, dk, C, L.w.wk, C, 0.0f, dkv, C);
            pe__gemm(0, 0, B * Tk, C, C, 1.0f, dv, C, L.w.wv, C, 1.0f, dkv, C);
            for (int64_t b = 0; b < B; b++)
                for (int64_t e = 0; e < T * C; e++) dx2[b * T * C + e] += dkv[(b * Tk + M) * C + e];
            bad += close_to("dx", dx2, dx, B * T * C);
            for (int i = 0; i < L.np; i++) {
                if (!L.g.dparam[i]) continue;
                const int64_t at_ = L.g.dparam[i] - (L.block + L.n);
                int64_t n = 1;
                for (int d = 0; d < L.specs[i].ndim; d++) n *= L.specs[i].shape[d] >= 0 ? L.specs[i].shape[d] : L.w.param_rows[i];
                char what[80];
                snprintf(what, sizeof what, "d%s", L.specs[i].name);
                bad += close_to(what, L.g.dparam[i], want + at_, n);
            }
            if (bad) fail_msg("%s (%s, %s): %lld elements differ", settings, masked ? "masked" : "no mask",
                              path ? "fused" : "reference", (long long)bad);
            free(y), free(dx), free(scores), free(want), free(kvin), free(q), free(k), free(v), free(o), free(y2);
            free(dout), free(dq), free(dk), free(dv), free(dx2), free(dkv);
        }
    free(x), free(mems), free(dy);
    pe_layer_free(&L);
    pe_attention_free(att);
}

/* ---- the fused path in the projected form --------------------------------------------------- */

typedef struct qshape {
    const char *name;
    int64_t B, T, Tk, H, kv, D;
    int causal;
    int mask; /* 0 none, 1 packed documents of 37 (positions restart), 2 window of 50, 3 random */
} qshape;

static const qshape QSHAPES[] = {
    {"decode_gapped", 2, 1, 150, 2, 0, 16, 1, 0},
    {"chunk_gqa", 1, 37, 200, 4, 2, 20, 1, 0},
    {"packed_causal", 1, 150, 150, 2, 0, 8, 1, 1},
    {"window_chunk", 2, 70, 130, 3, 0, 8, 1, 2},
    {"random_cross", 1, 20, 9, 2, 0, 8, 0, 3},
    {"packed_bidir_batch", 2, 100, 100, 1, 0, 16, 0, 1},
};

static const char *const FUSED[] = {
    "method=none", "method=rope", "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8",
    "method=xpos xpos_scale_base=64", "method=alibi", "method=t5", "method=kerple kerple=log",
    "method=fire fire_init_L=8", "method=floater", "method=shaw max_rel=5", "method=huang1 max_rel=5",
    "method=huang3 max_rel=3", "method=huang4 max_rel=4",
};

/* The layer of settings at shape s (its heads, kv heads, causal) and its random tensors (rows:
 * those of tables with free rows); NULL where the method has no grouped-query attention. */
static pe_attention *qshape_layer(const char *settings, const qshape *s, int64_t rows, uint64_t seed, pe_layer *L) {
    const int64_t Hkv = s->kv ? s->kv : s->H;
    char full[512];
    snprintf(full, sizeof full, "%s heads=%lld kv_heads=%lld causal=%s", settings, (long long)s->H, (long long)Hkv,
             s->causal ? "true" : "false");
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    if (pe_test_config(full, &cfg, &err) || pe_attention_init(&att, &cfg, s->H * s->D, &err)) {
        if (s->kv) return NULL;
        fail_msg("%s: %s", full, err.msg);
    }
    if (pe_layer_init(L, att, rows, seed, &err)) fail_msg("%s", err.msg);
    return att;
}

typedef struct qrun {
    float *o, *dq, *dk, *dv, *grads;
} qrun;

static void qkv_run(pe_attention *att, pe_layer *L, const qshape *s, const float *q, const float *k, const float *v,
                    const pe_positions *at, const float *dout, float *scores, qrun *r) {
    const int64_t C = s->H * s->D, Ckv = (s->kv ? s->kv : s->H) * s->D;
    pe_err err;
    r->o = malloc(sizeof(float) * s->B * s->T * C), r->dq = malloc(sizeof(float) * s->B * s->T * C);
    r->dk = malloc(sizeof(float) * s->B * s->Tk * Ckv), r->dv = malloc(sizeof(float) * s->B * s->Tk * Ckv);
    r->grads = malloc(sizeof(float) * L->n);
    pe_layer_zero_grad(L);
    if (pe_attention_forward_qkv(att, &L->w, q, k, v, s->B, s->T, s->Tk, at, r->o, scores, NULL, &err) ||
        pe_attention_backward_qkv(att, &L->w, dout, r->dq, r->dk, r->dv, &L->g, &err))
        fail_msg("%s: %s", s->name, err.msg);
    memcpy(r->grads, L->block + L->n, sizeof(float) * L->n);
}

static void qrun_free(qrun *r) { free(r->o), free(r->dq), free(r->dk), free(r->dv), free(r->grads); }

static void fused_qkv_matches_reference(void **state) {
    const char *settings = *state;
    int checked = 0;
    for (size_t si = 0; si < sizeof QSHAPES / sizeof QSHAPES[0]; si++) {
        const qshape *s = &QSHAPES[si];
        const int64_t Hkv = s->kv ? s->kv : s->H, C = s->H * s->D, Ckv = Hkv * s->D, B = s->B, T = s->T, Tk = s->Tk;
        pe_layer L;
        pe_attention *att = qshape_layer(settings, s, 512, 31 + si, &L);
        if (!att) continue; /* no grouped-query attention for this method */
        pe_rng rng = {500 + si};
        float *q = pe_test_uniform(B * T * C, &rng), *k = pe_test_uniform(B * Tk * Ckv, &rng), *v = pe_test_uniform(B * Tk * Ckv, &rng);
        float *dout = pe_test_uniform(B * T * C, &rng);
        int64_t *kpos = malloc(sizeof(int64_t) * B * Tk), *qpos = malloc(sizeof(int64_t) * B * T);
        uint8_t *mask = s->mask ? malloc((size_t)(B * T * Tk)) : NULL;
        for (int64_t b = 0; b < B; b++) {
            for (int64_t u = 0, p = 2 + 7 * b; u < Tk; u++, p += 1 + (u * 3 + b) % 3)
                kpos[b * Tk + u] = s->mask == 1 ? u % 37 : p; /* packed: positions restart per document */
            for (int64_t t = 0; t < T; t++) /* the last T keys' positions, or (cross) their own */
                qpos[b * T + t] = Tk >= T ? kpos[b * Tk + Tk - T + t] : 3 * t;
            for (int64_t i = 0; mask && i < T; i++)
                for (int64_t j = 0; j < Tk; j++) {
                    const int64_t ti = Tk - T + i; /* the query's token index */
                    uint8_t keep = s->mask == 1 ? j / 37 == ti / 37 : s->mask == 2 ? llabs(ti - j) < 50
                                                                   : pe_rng_uniform(&rng) < 0.4f || j == i % Tk;
                    mask[(b * T + i) * Tk + j] = keep;
                }
        }
        pe_positions at = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .mask = mask,
                           .mask_batched = 1};
        float *scores = malloc(sizeof(float) * B * s->H * T * Tk);
        qrun ref, fu;
        qkv_run(att, &L, s, q, k, v, &at, dout, scores, &ref);
        qkv_run(att, &L, s, q, k, v, &at, dout, NULL, &fu);
        const double cond = fmax(1.0, pe_test_maxabs(scores, B * s->H * T * Tk) / 32);
        const double floor = 2e-6 * fmax(1.0, pe_test_maxabs(ref.grads, L.n));
        int64_t bad = pe_test_compare("o", fu.o, ref.o, B * T * C, cond * 2e-5 * fmax(1, pe_test_maxabs(ref.o, B * T * C)), 1e-4) +
                      pe_test_compare("dq", fu.dq, ref.dq, B * T * C, cond * (2e-5 * pe_test_maxabs(ref.dq, B * T * C) + floor), 1e-4) +
                      pe_test_compare("dk", fu.dk, ref.dk, B * Tk * Ckv, cond * (2e-5 * pe_test_maxabs(ref.dk, B * Tk * Ckv) + floor), 1e-4) +
                      pe_test_compare("dv", fu.dv, ref.dv, B * Tk * Ckv, cond * (2e-5 * pe_test_maxabs(ref.dv, B * Tk * Ckv) + floor), 1e-4) +
                      pe_test_compare("d(method tensors)", fu.grads, ref.grads, L.n, cond * (2e-5 * pe_test_maxabs(ref.grads, L.n) + floor), 1e-4);
        if (bad) fail_msg("%s [%s]: %lld elements differ", settings, s->name, (long long)bad);
        qrun_free(&ref), qrun_free(&fu);
        free(q), free(k), free(v), free(dout), free(kpos), free(qpos), free(mask), free(scores);
        pe_layer_free(&L);
        pe_attention_free(att);
        checked++;
    }
    assert_true(checked >= 4);
}

/* ---- per-row lengths: a padded batch is its rows run alone ---------------------------------- */

static const char *const PADDED[] = {
    /* not dynamic NTK or LongRoPE: their frequencies follow max(positions) of the whole call */
    "method=none", "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8", "method=alibi",
    "method=t5", "method=shaw max_rel=3", "method=huang3 max_rel=3", "method=xl same_length=true mem_len=3",
    "method=tupe num_buckets=8 max_distance=12", "method=deberta position_buckets=4 max_relative_positions=8 share_att_key=false",
    "method=floater", "method=xpos xpos_scale_base=64", "method=fire fire_init_L=8",
};

/* Rows of lengths (q_lens, k_lens) padded to (T, Tk) with garbage in the padding, against one
 * call per row on its own tokens: o and dq, dk, dv of the real tokens, zeros in the padding,
 * the method's gradients summed over the rows; both paths, causal and not. */
static void padded_rows_are_rows(void **state) {
    const char *settings = *state;
    enum { B = 3 };
    const int64_t H = 2, D = 8, C = H * D, T = 70, Tk = 100;
    const int64_t qlen[B] = {70, 0, 33}, klen[B] = {100, 5, 64};
    for (int causal = 0; causal < 2; causal++)
        for (int path = 0; path < 2; path++) {
            pe_layer L;
            pe_attention *att = layer_of(settings, H, C, causal, 9, 512, &L), *one = layer_of(settings, H, C, causal, 9, 0, NULL);
            const pe_run_options run = {.path = path ? PE_PATH_REFERENCE : PE_PATH_FUSED};
            pe_attention_set_run_options(att, &run);
            pe_attention_set_run_options(one, &run);
            pe_rng rng = {99};
            float *q = pe_test_uniform(B * T * C, &rng), *k = pe_test_uniform(B * Tk * C, &rng), *v = pe_test_uniform(B * Tk * C, &rng);
            float *dout = pe_test_uniform(B * T * C, &rng);
            int64_t kpos[B * 100], qpos[B * 70];
            for (int64_t b = 0; b < B; b++) {
                for (int64_t u = 0, p = 4 * b; u < Tk; u++, p += 1 + (u + b) % 2) kpos[b * Tk + u] = u < klen[b] ? p : -1000;
                for (int64_t t = 0; t < T; t++) /* the last q_len keys' positions; garbage in the padding */
                    qpos[b * T + t] = t < qlen[b] ? kpos[b * Tk + klen[b] - qlen[b] + t] : 123456789;
            }
            pe_positions at = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .q_lens = qlen,
                               .k_lens = klen};
            qrun pad;
            const qshape sp = {"padded", B, T, Tk, H, 0, D, causal, 0};
            qkv_run(att, &L, &sp, q, k, v, &at, dout, NULL, &pad);
            float *sum = calloc((size_t)L.n, sizeof(float));
            int64_t bad = 0;
            for (int64_t b = 0; b < B; b++) {
                const int64_t Tb = qlen[b], Tkb = klen[b];
                for (int64_t i = Tb; i < T; i++)
                    for (int64_t e = 0; e < C; e++) bad += pad.o[(b * T + i) * C + e] != 0 || pad.dq[(b * T + i) * C + e] != 0;
                for (int64_t u = Tkb; u < Tk; u++)
                    for (int64_t e = 0; e < C; e++) bad += pad.dk[(b * Tk + u) * C + e] != 0 || pad.dv[(b * Tk + u) * C + e] != 0;
                if (Tb == 0) continue;
                qrun r;
                const qshape s1 = {"row", 1, Tb, Tkb, H, 0, D, causal, 0};
                pe_positions at1 = {.pos = qpos + b * T, .key_pos = kpos + b * Tk};
                float *qb = malloc(sizeof(float) * Tb * C), *kb = k + b * Tk * C, *vb = v + b * Tk * C;
                float *db = malloc(sizeof(float) * Tb * C);
                memcpy(qb, q + b * T * C, sizeof(float) * Tb * C), memcpy(db, dout + b * T * C, sizeof(float) * Tb * C);
                qkv_run(one, &L, &s1, qb, kb, vb, &at1, db, NULL, &r);
                bad += close_to("o", pad.o + b * T * C, r.o, Tb * C) + close_to("dq", pad.dq + b * T * C, r.dq, Tb * C) +
                       close_to("dk", pad.dk + b * Tk * C, r.dk, Tkb * C) + close_to("dv", pad.dv + b * Tk * C, r.dv, Tkb * C);
                for (size_t e = 0; e < (size_t)L.n; e++) sum[e] += r.grads[e];
                qrun_free(&r), free(qb), free(db);
            }
            bad += close_to("d(method tensors)", pad.grads, sum, L.n);
            if (bad) fail_msg("%s (%s, %s): %lld elements differ", settings, causal ? "causal" : "full",
                              path ? "reference" : "fused", (long long)bad);
            qrun_free(&pad), free(sum), free(q), free(k), free(v), free(dout);
            pe_layer_free(&L);
            pe_attention_free(att), pe_attention_free(one);
        }
}

/* ---- finite differences of the projected form's backward ----------------------------------- */

typedef struct fd_run {
    pe_attention *att;
    pe_layer *L;
    float *q, *k, *v, *o, *r;
    int64_t B, T, Tk, C;
    const pe_positions *at;
} fd_run;

static double fd_loss(void *p) { /* sum o * r, in double */
    fd_run *R = p;
    pe_err err;
    if (pe_attention_forward_qkv(R->att, &R->L->w, R->q, R->k, R->v, R->B, R->T, R->Tk, R->at, R->o, NULL, NULL, &err))
        fail_msg("forward_qkv: %s", err.msg);
    double s = 0;
    for (int64_t i = 0; i < R->B * R->T * R->C; i++) s += (double)R->o[i] * R->r[i];
    return s;
}

/* dq, dk, dv and every method tensor's gradient against 4-point central differences: a chunk
 * of 3 queries against 7 keys at gapped positions, a random mask, two rows, causal. */
static void qkv_finite_differences(void **state) {
    const char *settings = *state;
    const int64_t B = 2, T = 3, Tk = 7, H = 2, D = 4, C = H * D;
    pe_layer L;
    pe_err err;
    pe_attention *att = layer_of(settings, H, C, 1, 21, 64, &L);
    pe_rng rng = {8};
    float *q = pe_test_uniform(B * T * C, &rng), *k = pe_test_uniform(B * Tk * C, &rng), *v = pe_test_uniform(B * Tk * C, &rng);
    float *r = pe_test_uniform(B * T * C, &rng), *o = malloc(sizeof(float) * B * T * C);
    float *dq = malloc(sizeof(float) * B * T * C), *dk = malloc(sizeof(float) * B * Tk * C), *dv = malloc(sizeof(float) * B * Tk * C);
    int64_t kpos[2 * 7], qpos[2 * 3];
    uint8_t mask[2 * 3 * 7];
    for (int64_t b = 0; b < B; b++) {
        for (int64_t u = 0, p = 1 + b; u < Tk; u++, p += 1 + (u + 2 * b) % 3) kpos[b * Tk + u] = p;
        for (int64_t t = 0; t < T; t++) qpos[b * T + t] = kpos[b * Tk + Tk - T + t];
        for (int64_t e = 0; e < T * Tk; e++) mask[b * T * Tk + e] = pe_rng_uniform(&rng) < 0.6f || e % Tk == Tk - T + e / Tk;
    }
    pe_positions at = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .mask = mask, .mask_batched = 1};
    fd_run R = {att, &L, q, k, v, o, r, B, T, Tk, C, &at};
    fd_loss(&R);
    pe_layer_zero_grad(&L);
    if (pe_attention_backward_qkv(att, &L.w, r, dq, dk, dv, &L.g, &err)) fail_msg("backward_qkv: %s", err.msg);
    double worst = 0;
    typedef struct { const char *name; float *x, *g; int64_t n; } fd_tensor;
    fd_tensor t[3 + PE_MAX_PARAMS] = {
        {"q", q, dq, B * T * C}, {"k", k, dk, B * Tk * C}, {"v", v, dv, B * Tk * C}};
    int nt = 3;
    for (int i = 0; i < L.np; i++) {
        if (!L.g.dparam[i]) continue;
        int64_t n = 1;
        for (int d = 0; d < L.specs[i].ndim; d++) n *= L.specs[i].shape[d] >= 0 ? L.specs[i].shape[d] : L.w.param_rows[i];
        t[nt++] = (fd_tensor){L.specs[i].name, (float *)L.w.param[i], L.g.dparam[i], n};
    }
    for (int i = 0; i < nt; i++) {
        double w = 0;
        for (int64_t e = 0; e < t[i].n; e++)
            w = fmax(w, pe_test_fd_element(&t[i].x[e], t[i].g[e], 1e-2f * fmaxf(1.0f, fabsf(t[i].x[e])), fd_loss, &R, w,
                                           settings, t[i].name, e));
        worst = fmax(worst, w);
    }
    fprintf(stderr, "  %-60s worst %.3g x tolerance\n", settings, worst);
    assert_true(worst <= 1);
    free(q), free(k), free(v), free(r), free(o), free(dq), free(dk), free(dv);
    pe_layer_free(&L);
    pe_attention_free(att);
}

/* ---- rotation on caller buffers ------------------------------------------------------------- */

static const char *const ROTARY[] = {
    "method=rope", "method=rope rope_layout=interleaved rotary_dim=6 rope_base=500",
    "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=8",
    "method=rope rope_scaling=longrope original_max_position_embeddings=8 max_position_embeddings=32",
    "method=xpos xpos_scale_base=64",
};

/* q and k rotated by pe_attention_rotate, then plain attention (none), equal the rotary
 * layer's projected form; the backward rotation is the transpose (<R x, y> = <x, R^T y>); the
 * table is the exact one. GQA, gapped positions, a span past LongRoPE's switch. */
static void rotation_on_caller_buffers(void **state) {
    const char *settings = *state;
    const int64_t T = 3, Tk = 9, H = 4, Hkv = 2, D = 8, C = H * D, Ckv = Hkv * D;
    char full[512];
    snprintf(full, sizeof full, "%s kv_heads=2", settings);
    pe_layer L;
    pe_err err;
    pe_attention *rot = layer_of(full, H, C, 1, 3, 64, &L), *plain = layer_of("method=none kv_heads=2", H, C, 1, 3, 0, NULL);
    pe_rng rng = {41};
    float *q = pe_test_uniform(T * C, &rng), *k = pe_test_uniform(Tk * Ckv, &rng), *v = pe_test_uniform(Tk * Ckv, &rng);
    float *o1 = malloc(sizeof(float) * T * C), *o2 = malloc(sizeof(float) * T * C);
    int64_t kpos[9], qpos[3];
    for (int64_t u = 0, p = 2; u < Tk; u++, p += 1 + u % 3) kpos[u] = p;
    for (int64_t t = 0; t < T; t++) qpos[t] = kpos[Tk - T + t];
    pe_positions at = {.pos = qpos, .key_pos = kpos};
    if (pe_attention_forward_qkv(rot, &L.w, q, k, v, 1, T, Tk, &at, o1, NULL, NULL, &err)) fail_msg("%s", err.msg);
    const int64_t lo = kpos[0], hi = kpos[Tk - 1];
    if (pe_attention_rotate(rot, &L.w, q, T, C, H, qpos, lo, hi, PE_ROTATE_Q, 0, &err) ||
        pe_attention_rotate(rot, &L.w, k, Tk, Ckv, Hkv, kpos, lo, hi, PE_ROTATE_K, 0, &err))
        fail_msg("rotate: %s", err.msg);
    if (pe_attention_forward_qkv(plain, NULL, q, k, v, 1, T, Tk, &at, o2, NULL, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(close_to("o", o2, o1, T * C), 0);
    /* the backward is the transpose: <R x, y> = <x, R^T y> over k's rows */
    float *x = pe_test_uniform(Tk * Ckv, &rng), *y = pe_test_uniform(Tk * Ckv, &rng), *rx = malloc(sizeof(float) * Tk * Ckv);
    float *ry = malloc(sizeof(float) * Tk * Ckv);
    memcpy(rx, x, sizeof(float) * Tk * Ckv), memcpy(ry, y, sizeof(float) * Tk * Ckv);
    if (pe_attention_rotate(rot, &L.w, rx, Tk, Ckv, Hkv, kpos, lo, hi, PE_ROTATE_K, 0, &err) ||
        pe_attention_rotate(rot, &L.w, ry, Tk, Ckv, Hkv, kpos, lo, hi, PE_ROTATE_K, 1, &err))
        fail_msg("rotate: %s", err.msg);
    double a = 0, b = 0;
    for (int64_t e = 0; e < Tk * Ckv; e++) a += (double)rx[e] * y[e], b += (double)x[e] * ry[e];
    assert_true(fabs(a - b) <= 1e-5 * (1 + fabs(a)));
    /* the table applied by the caller (pe_rotary_apply) is the layer's rotation, bit for bit */
    {
        float cs[9 * 64], *tx = malloc(sizeof(float) * Tk * Ckv);
        int64_t rd;
        int layout;
        memcpy(tx, x, sizeof(float) * Tk * Ckv);
        if (pe_attention_rotary_table(rot, &L.w, kpos, Tk, lo, hi, PE_ROTATE_K, cs, &rd, &layout, &err) ||
            pe_rotary_apply(NULL, tx + pe_attention_config(rot)->rotary_offset, Tk, Ckv, Hkv, D, rd, layout, cs, 0, &err))
            fail_msg("rotary_apply: %s", err.msg);
        assert_memory_equal(tx, rx, sizeof(float) * Tk * Ckv);
        assert_int_equal(pe_rotary_apply(NULL, tx, Tk, Ckv, Hkv, D, D + 2, layout, cs, 0, &err), PE_EINVAL);
        free(tx);
    }
    /* the table: rope without scaling at 10^6 is cos, sin of the exact angle */
    if (!strcmp(settings, "method=rope")) {
        int64_t p6[2] = {999999, 1000000}, rd;
        int layout;
        float cs[2 * 8];
        if (pe_attention_rotary_table(rot, &L.w, p6, 2, 0, 1000000, PE_ROTATE_K, cs, &rd, &layout, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(rd, D);
        assert_int_equal(layout, PE_ROPE_HALF);
        for (int r = 0; r < 2; r++)
            for (int t = 0; t < 4; t++) {
                double ang = (double)p6[r] * pow(10000.0, -2.0 * t / (double)D);
                assert_true(fabs(cs[(r * 4 + t) * 2] - cos(ang)) < 1e-7 && fabs(cs[(r * 4 + t) * 2 + 1] - sin(ang)) < 1e-7);
            }
        /* refused: a position outside the span, a method without a rotation */
        assert_int_equal(pe_attention_rotate(rot, &L.w, k, Tk, Ckv, Hkv, kpos, lo + 1, hi, PE_ROTATE_K, 0, &err), PE_EPOS);
        assert_int_equal(pe_attention_rotate(plain, NULL, k, Tk, Ckv, Hkv, kpos, lo, hi, PE_ROTATE_K, 0, &err), PE_EINVAL);
        assert_non_null(strstr(err.msg, "no rotation of caller buffers"));
        /* the transforms that are no rotation say why */
        static const char *const other[][2] = {{"method=fope", "Fourier"}, {"method=rope_mixed", "own learned"},
                                               {"method=floater", "ODE"}, {"method=none attn_temperature_tuning=true", "scales"}};
        for (int o = 0; o < 4; o++) {
            pe_layer L2;
            pe_attention *xa = layer_of(other[o][0], H, C, 1, 3, 64, &L2);
            int64_t p1[1] = {0};
            float row[32] = {0};
            assert_int_equal(pe_attention_rotate(xa, &L2.w, row, 1, C, H, p1, 0, 0, PE_ROTATE_Q, 0, &err), PE_EINVAL);
            assert_non_null(strstr(err.msg, other[o][1]));
            pe_layer_free(&L2);
            pe_attention_free(xa);
        }
    }
    free(q), free(k), free(v), free(o1), free(o2), free(x), free(y), free(rx), free(ry);
    pe_layer_free(&L);
    pe_attention_free(rot), pe_attention_free(plain);
}

/* ---- what the form refuses ------------------------------------------------------------------ */

static void refusals(void **state) {
    (void)state;
    const int64_t C = 8;
    float q[3 * 8] = {0}, k[3 * 8] = {0}, v[3 * 8] = {0}, o[3 * 8];
    pe_err err;
    const char *input[] = {"method=sinusoidal heads=2", "method=learned heads=2", "method=complex heads=2",
                           "method=data_alibi heads=2 causal=true"}; /* the last reads x for its gates */
    for (int i = 0; i < 4; i++) {
        pe_attention *att = pe_test_layer(input[i], C);
        pe_layer L;
        if (pe_layer_init(&L, att, 16, 1, &err)) fail_msg("%s", err.msg);
        assert_int_equal(pe_attention_forward_qkv(att, &L.w, q, k, v, 1, 3, 3, NULL, o, NULL, NULL, &err), PE_EINVAL);
        assert_non_null(strstr(err.msg, "no projected form"));
        pe_layer_free(&L);
        pe_attention_free(att);
    }
    pe_attention *att = pe_test_layer("method=none heads=2 causal=true", C);
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 2, NULL, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "at least as many keys"));
    /* a query with every key masked: an error on both paths */
    uint8_t mask[3 * 3] = {1, 0, 0, 0, 0, 0, 1, 1, 1};
    pe_positions at = {.mask = mask};
    float scores[2 * 3 * 3];
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 3, &at, o, scores, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "query 1 has every key masked"));
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 3, &at, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "query 1 has every key masked"));
    /* non-finite scores are said as such, not as masked keys (fused path) */
    float qn[3 * 8] = {0};
    qn[8] = NAN;
    assert_int_equal(pe_attention_forward_qkv(att, NULL, qn, k, v, 1, 3, 3, NULL, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    /* a key position out of range is named as the key's (was 'positions', issue 32) */
    int64_t kfar[3] = {0, 1, ((int64_t)1 << 53) + 1};
    pe_positions atk = {.key_pos = kfar};
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 3, &atk, o, NULL, NULL, &err), PE_EPOS);
    assert_non_null(strstr(err.msg, "tensor 'key_positions'"));
    /* ... and on the reference path: -Inf scores from an infinite key are not masked keys (issue 32) */
    float ki[3 * 8], qi[3 * 8];
    for (int e = 0; e < 3 * 8; e++) ki[e] = -INFINITY, qi[e] = 1.0f;
    assert_int_equal(pe_attention_forward_qkv(att, NULL, qi, ki, v, 1, 3, 3, NULL, o, scores, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    /* no backward after a failed forward, nor a layer backward after a projected forward */
    assert_int_equal(pe_attention_backward_qkv(att, NULL, o, NULL, NULL, NULL, NULL, &err), PE_EINVAL);
    mask[3] = 1;
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 3, &at, o, NULL, NULL, &err), PE_OK);
    assert_int_equal(pe_attention_backward(att, NULL, o, NULL, NULL, &err), PE_EINVAL);
    /* per-row lengths: in range, causal rows with as many keys as queries, projected form only */
    int64_t ql[1] = {4}, kl[1] = {3};
    pe_positions lens = {.q_lens = ql, .k_lens = kl};
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 3, &lens, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "lengths"));
    ql[0] = 3, kl[0] = 2;
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, 3, 3, &lens, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "as many keys as queries"));
    pe_attention_free(att);
    /* the layer's keys are its queries: no key_pos */
    att = pe_test_layer("method=rope heads=2", C);
    pe_layer L;
    if (pe_layer_init(&L, att, 16, 1, &err)) fail_msg("%s", err.msg);
    int64_t kp[3] = {0, 1, 2};
    pe_positions bad = {.key_pos = kp};
    assert_int_equal(pe_attention_layer_forward(att, &L.w, q, NULL, 0, 1, 3, &bad, o, NULL, NULL, &err), PE_EINVAL);
    int64_t ql2[1] = {2};
    pe_positions lens2 = {.q_lens = ql2};
    assert_int_equal(pe_attention_layer_forward(att, &L.w, q, NULL, 0, 1, 3, &lens2, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "projected form"));
    pe_layer_free(&L);
    pe_attention_free(att);
}

/* ---- what forward_qkv keeps for backward (pe_run_options.saved) ------------------------------ */

static const char *const SAVED[] = {
    "method=none", "method=none head_scale=true head_scale_init=0.7", "method=alibi", "method=t5",
    "method=rope", "method=rope rope_values=true rope_layout=interleaved rotary_dim=4 rotary_offset=4",
    "method=rope rope_scaling=longrope original_max_position_embeddings=8 max_position_embeddings=32",
    "method=xpos xpos_scale_base=64", "method=fope", "method=floater", "method=pope", "method=cope",
    "method=fire fire_init_L=8", "method=shaw max_rel=3",
};

/* The caller's q, k, v read in place (PE_SAVED_INPUTS) give the copies' bits, forward and
 * backward, on the decode, fused and reference paths, and are left as they were; PE_SAVED_NONE
 * gives the same o and refuses a backward. */
static void saved_inputs_are_copies(void **state) {
    const char *settings = *state;
    static const qshape shapes[] = {
        {"decode", 2, 1, 40, 4, 2, 8, 1, 0}, {"fused", 1, 70, 70, 2, 0, 8, 1, 0}, {"cross", 2, 5, 9, 2, 0, 8, 0, 0}};
    for (int si = 0; si < 3; si++) {
        const qshape *s = &shapes[si];
        const int64_t Hkv = s->kv ? s->kv : s->H, C = s->H * s->D, Ckv = Hkv * s->D, B = s->B, T = s->T, Tk = s->Tk;
        if (!s->causal && strstr(settings, "cope")) continue; /* causal only */
        pe_layer L;
        pe_attention *att = qshape_layer(settings, s, 128, 7 + si, &L);
        if (!att) continue; /* no grouped-query attention for this method */
        pe_err err;
        pe_rng rng = {900 + si};
        const int64_t nq = B * T * C, nk = B * Tk * Ckv;
        float *q = pe_test_uniform(nq, &rng), *k = pe_test_uniform(nk, &rng), *v = pe_test_uniform(nk, &rng);
        float *dout = pe_test_uniform(nq, &rng), *kept = malloc(sizeof(float) * (size_t)(nq + 2 * nk));
        memcpy(kept, q, sizeof(float) * nq), memcpy(kept + nq, k, sizeof(float) * nk), memcpy(kept + nq + nk, v, sizeof(float) * nk);
        for (int path = PE_PATH_AUTO; path <= PE_PATH_REFERENCE; path++) {
            qrun r[2];
            for (int mode = 0; mode < 2; mode++) {
                pe_attention_set_run_options(att, &(pe_run_options){.path = path, .saved = mode ? PE_SAVED_INPUTS : PE_SAVED_COPIES});
                qkv_run(att, &L, s, q, k, v, NULL, dout, NULL, &r[mode]);
            }
            if (memcmp(r[0].o, r[1].o, sizeof(float) * nq) || memcmp(r[0].dq, r[1].dq, sizeof(float) * nq) ||
                memcmp(r[0].dk, r[1].dk, sizeof(float) * nk) || memcmp(r[0].dv, r[1].dv, sizeof(float) * nk) ||
                memcmp(r[0].grads, r[1].grads, sizeof(float) * L.n))
                fail_msg("%s [%s, path %d]: the caller's arrays in place differ from copies", settings, s->name, path);
            if (memcmp(kept, q, sizeof(float) * nq) || memcmp(kept + nq, k, sizeof(float) * nk) ||
                memcmp(kept + nq + nk, v, sizeof(float) * nk))
                fail_msg("%s [%s]: forward or backward wrote the caller's q, k or v", settings, s->name);
            /* gradients over arrays the backward reads: dq over dout, dk over k (read in place
             * under PE_SAVED_INPUTS), dv over v; the same bits as separate arrays */
            for (int mode = 0; mode < 2; mode++) {
                float *q2 = malloc(sizeof(float) * nq), *d2 = malloc(sizeof(float) * nq), *k2 = malloc(sizeof(float) * nk),
                      *v2 = malloc(sizeof(float) * nk), *o2 = malloc(sizeof(float) * nq);
                memcpy(q2, q, sizeof(float) * nq), memcpy(d2, dout, sizeof(float) * nq);
                memcpy(k2, k, sizeof(float) * nk), memcpy(v2, v, sizeof(float) * nk);
                pe_attention_set_run_options(att, &(pe_run_options){.path = path, .saved = mode ? PE_SAVED_INPUTS : PE_SAVED_COPIES});
                pe_layer_zero_grad(&L);
                if (pe_attention_forward_qkv(att, &L.w, q2, k2, v2, B, T, Tk, NULL, o2, NULL, NULL, &err) ||
                    pe_attention_backward_qkv(att, &L.w, d2, d2, k2, v2, &L.g, &err))
                    fail_msg("%s [%s]: %s", settings, s->name, err.msg);
                if (memcmp(d2, r[0].dq, sizeof(float) * nq) || memcmp(k2, r[0].dk, sizeof(float) * nk) ||
                    memcmp(v2, r[0].dv, sizeof(float) * nk) || memcmp(L.block + L.n, r[0].grads, sizeof(float) * L.n))
                    fail_msg("%s [%s, path %d, saved %d]: gradients written over dout, k and v differ", settings, s->name,
                             path, mode);
                free(q2), free(d2), free(k2), free(v2), free(o2);
            }
            pe_attention_set_run_options(att, &(pe_run_options){.path = path, .saved = PE_SAVED_NONE});
            float *o = malloc(sizeof(float) * nq);
            if (pe_attention_forward_qkv(att, &L.w, q, k, v, B, T, Tk, NULL, o, NULL, NULL, &err)) fail_msg("%s", err.msg);
            assert_memory_equal(o, r[0].o, sizeof(float) * nq);
            assert_int_equal(pe_attention_backward_qkv(att, &L.w, dout, r[1].dq, NULL, NULL, &L.g, &err), PE_EINVAL);
            free(o);
            qrun_free(&r[0]), qrun_free(&r[1]);
        }
        free(q), free(k), free(v), free(dout), free(kept);
        pe_layer_free(&L);
        pe_attention_free(att);
    }
}

/* The layer under PE_SAVED_INPUTS reads x in place where nothing rewrites it (no absolute
 * encoding, no memory): y, dx and every gradient the copies' bits, x unchanged, a dx that
 * shares x's memory the same dx (the weights' gradients read x first); PE_SAVED_NONE: the same
 * y and a refused backward. */
static const char *const LAYER_SAVED[] = {
    "method=none", "method=rope", "method=alibi", "method=t5 num_buckets=8 max_distance=12", "method=sinusoidal",
    "method=xl", "method=data_alibi", "method=floater", "method=fire fire_init_L=8",
};

static void layer_reads_x_in_place(void **state) {
    const char *settings = *state;
    const int64_t B = 2, T = 70, H = 2, C = 16, n = B * T * C;
    const int64_t M = strstr(settings, "method=xl") ? 5 : 0;
    pe_layer L;
    pe_err err;
    pe_attention *att = layer_of(settings, H, C, 1, 11, 128, &L);
    pe_rng rng = {31};
    float *x = pe_test_uniform(n, &rng), *dy = pe_test_uniform(n, &rng), *mems = pe_test_uniform(B * (M + 1) * C, &rng);
    float *kept = malloc(sizeof(float) * n), *y[2], *dx[2], *grads[2];
    memcpy(kept, x, sizeof(float) * n);
    for (int mode = 0; mode < 2; mode++) {
        y[mode] = malloc(sizeof(float) * n), dx[mode] = malloc(sizeof(float) * n), grads[mode] = malloc(sizeof(float) * L.n);
        pe_attention_set_run_options(att, &(pe_run_options){.saved = mode ? PE_SAVED_INPUTS : PE_SAVED_COPIES});
        pe_layer_zero_grad(&L);
        if (pe_attention_layer_forward(att, &L.w, x, M ? mems : NULL, M, B, T, NULL, y[mode], NULL, NULL, &err) ||
            pe_attention_backward(att, &L.w, dy, dx[mode], &L.g, &err))
            fail_msg("%s: %s", settings, err.msg);
        memcpy(grads[mode], L.block + L.n, sizeof(float) * L.n);
    }
    if (memcmp(y[0], y[1], sizeof(float) * n) || memcmp(dx[0], dx[1], sizeof(float) * n) ||
        memcmp(grads[0], grads[1], sizeof(float) * L.n))
        fail_msg("%s: the layer reading x in place differs from its copy", settings);
    if (memcmp(kept, x, sizeof(float) * n)) fail_msg("%s: the layer wrote the caller's x", settings);
    /* dx over x itself */
    pe_layer_zero_grad(&L);
    if (pe_attention_layer_forward(att, &L.w, x, M ? mems : NULL, M, B, T, NULL, y[1], NULL, NULL, &err) ||
        pe_attention_backward(att, &L.w, dy, x, &L.g, &err))
        fail_msg("%s: %s", settings, err.msg);
    if (memcmp(x, dx[0], sizeof(float) * n) || memcmp(grads[0], L.block + L.n, sizeof(float) * L.n))
        fail_msg("%s: a dx sharing x's memory gave another gradient", settings);
    memcpy(x, kept, sizeof(float) * n);
    pe_attention_set_run_options(att, &(pe_run_options){.saved = PE_SAVED_NONE});
    if (pe_attention_layer_forward(att, &L.w, x, M ? mems : NULL, M, B, T, NULL, y[1], NULL, NULL, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(y[0], y[1], sizeof(float) * n);
    assert_int_equal(pe_attention_backward(att, &L.w, dy, dx[1], &L.g, &err), PE_EINVAL);
    for (int mode = 0; mode < 2; mode++) free(y[mode]), free(dx[mode]), free(grads[mode]);
    free(x), free(dy), free(mems), free(kept);
    pe_layer_free(&L);
    pe_attention_free(att);
}

/* The rotary methods keep their tables between a layer's calls (PE__PERSIST) and reuse them
 * when what they were built from is the same: every call of one layer, through positions that
 * change, repeat, change the frequencies (dynamic NTK past its length, LongRoPE's learned
 * factors), the keys' own positions and (last) the method's first tensor, gives a fresh layer's
 * bits, forward and backward. */
static const char *const TABLE_REUSE[] = {
    "method=rope", "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=8",
    "method=rope rope_scaling=longrope original_max_position_embeddings=8 max_position_embeddings=32",
    "method=rope rope_sections=2,2 rope_section_layout=interleaved",
    "method=xpos xpos_scale_base=16", "method=rope_mixed", "method=fope", "method=fope fope_sep_head=false",
    "method=pope pope_bias_uniform_init=true",
};

static void table_reuse(void **state) {
    const char *settings = *state;
    const qshape s = {"reuse", 2, 6, 6, 2, 0, 8, 1, 0};
    const int64_t C = s.H * s.D, n = s.B * s.T * C, A = strstr(settings, "rope_sections") ? 2 : 1;
    pe_layer L, F;
    pe_err err;
    pe_attention *att = qshape_layer(settings, &s, 64, 3, &L);
    pe_rng rng = {41};
    float *q = pe_test_uniform(n, &rng), *k = pe_test_uniform(n, &rng), *v = pe_test_uniform(n, &rng);
    float *dout = pe_test_uniform(n, &rng);
    /* positions of each call: 0.., shifted, the first again, past max_position_embeddings, keys apart */
    int64_t pos[5][2 * 6 * 2], kpos[2 * 6 * 2];
    for (int64_t e = 0; e < s.B * s.T * A; e++) {
        const int64_t t = e / A % s.T;
        pos[0][e] = t, pos[1][e] = t + 3, pos[2][e] = t, pos[3][e] = 5 * t + 1, pos[4][e] = t, kpos[e] = t + e % 2;
    }
    for (int call = 0; call < 6; call++) {
        const int c = call < 5 ? call : 4;
        if (call == 5 && L.w.param[0]) ((float *)L.w.param[0])[0] *= 1.5f; /* a tensor moved by a step */
        pe_positions at = {.pos = pos[c], .pos_batched = 1, .axes = (int)A, .key_pos = c == 4 ? kpos : NULL,
                           .key_pos_batched = 1};
        qrun r[2];
        qkv_run(att, &L, &s, q, k, v, &at, dout, NULL, &r[0]);
        pe_attention *fresh = qshape_layer(settings, &s, 64, 3, &F);
        for (size_t i = 0; i < L.n; i++) F.block[i] = L.block[i]; /* the same weights */
        qkv_run(fresh, &F, &s, q, k, v, &at, dout, NULL, &r[1]);
        if (memcmp(r[0].o, r[1].o, sizeof(float) * n) || memcmp(r[0].dq, r[1].dq, sizeof(float) * n) ||
            memcmp(r[0].dk, r[1].dk, sizeof(float) * n) || memcmp(r[0].grads, r[1].grads, sizeof(float) * L.n))
            fail_msg("%s: call %d differs from a fresh layer's", settings, call);
        qrun_free(&r[0]), qrun_free(&r[1]);
        pe_layer_free(&F);
        pe_attention_free(fresh);
    }
    (void)err;
    free(q), free(k), free(v), free(dout);
    pe_layer_free(&L);
    pe_attention_free(att);
}

int main(void) {
    enum { NM = sizeof METHODS / sizeof METHODS[0], NF = sizeof FUSED / sizeof FUSED[0], NP = sizeof PADDED / sizeof PADDED[0],
           NR = sizeof ROTARY / sizeof ROTARY[0], NS = sizeof SAVED / sizeof SAVED[0],
           NL = sizeof LAYER_SAVED / sizeof LAYER_SAVED[0], NU = sizeof TABLE_REUSE / sizeof TABLE_REUSE[0] };
    struct CMUnitTest tests[2 * NM + NF + NP + NR + NS + NL + NU + 1];
    int n = 0;
    for (int i = 0; i < NM; i++)
        tests[n++] = (struct CMUnitTest){METHODS[i], layer_is_projections_plus_qkv, NULL, NULL, (void *)METHODS[i]};
    for (int i = 0; i < NF; i++)
        tests[n++] = (struct CMUnitTest){FUSED[i], fused_qkv_matches_reference, NULL, NULL, (void *)FUSED[i]};
    for (int i = 0; i < NP; i++)
        tests[n++] = (struct CMUnitTest){PADDED[i], padded_rows_are_rows, NULL, NULL, (void *)PADDED[i]};
    for (int i = 0; i < NM; i++)
        tests[n++] = (struct CMUnitTest){METHODS[i], qkv_finite_differences, NULL, NULL, (void *)METHODS[i]};
    for (int i = 0; i < NR; i++)
        tests[n++] = (struct CMUnitTest){ROTARY[i], rotation_on_caller_buffers, NULL, NULL, (void *)ROTARY[i]};
    for (int i = 0; i < NS; i++)
        tests[n++] = (struct CMUnitTest){SAVED[i], saved_inputs_are_copies, NULL, NULL, (void *)SAVED[i]};
    for (int i = 0; i < NL; i++)
        tests[n++] = (struct CMUnitTest){LAYER_SAVED[i], layer_reads_x_in_place, NULL, NULL, (void *)LAYER_SAVED[i]};
    for (int i = 0; i < NU; i++)
        tests[n++] = (struct CMUnitTest){TABLE_REUSE[i], table_reuse, NULL, NULL, (void *)TABLE_REUSE[i]};
    tests[n++] = (struct CMUnitTest){"refusals", refusals, NULL, NULL, NULL};
    return _cmocka_run_group_tests("qkv", tests, n, NULL, NULL);
}
