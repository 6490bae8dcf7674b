/* An engine's step over the keys and values it keeps (pe_attention_forward_kvcache, and
 * pe_attention_forward_paged for vLLM's blocks): what a serving engine calls for every decode
 * step, with its own cache in its own rows or blocks. The keys and values are read in place;
 * few queries go through the decode path (exec/decode.c), the rest through the projected form. Keys and values that the method transforms (rope, xpos, floater)
 * are either transformed already, as an engine's cache holds them (`rotated`), or transformed
 * here into a copy, once; the queries are transformed here, and the output stage (rope_values)
 * runs last, as a pe_kv_cache does. Nothing is kept for backward. */
#include "layer.h"

/* The method's stages on rows held outside a call, at their own positions in an attention over
 * [lo, hi] (a cache's keys on append, its queries on attend, an engine's step): embed and
 * rotate hooks (pe__attention_apply), the output stage (pe__attention_output). */
pe_status pe__attention_apply(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                              int64_t hi, float *x, float *q, float *k, float *v, pe_err *err) {
    if (!(x && a->m->embed_forward) && !((q || k) && a->m->rotate_forward)) return PE_OK;
    pe__ctx ctx;
    pe_status st = pe__attention_context(a, w, n, pos, lo, hi, &ctx, err);
    if (!st && x && a->m->embed_forward) a->m->embed_forward(&ctx, x);
    if (!st && (q || k) && a->m->rotate_forward) a->m->rotate_forward(&ctx, q, k, v);
    pe__attention_release(a, &ctx);
    return st;
}

pe_status pe__attention_output(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                               int64_t hi, float *o, pe_err *err) {
    if (!(a->m->output_used && a->m->output_used(&a->cfg))) return PE_OK;
    pe__ctx ctx;
    pe_status st = pe__attention_context(a, w, n, pos, lo, hi, &ctx, err);
    if (!st) a->m->output_forward(&ctx, o);
    pe__attention_release(a, &ctx);
    return st;
}

/* Row b's positions of a call: queries at at->pos, else k_len - q_len + t (bottom-right, per
 * row); keys at at->key_pos, else 0 .. Tk-1; each on every axis; padding (past the row's
 * lengths) at the row's first key position, as the core pads, so that [lo, hi] is the real
 * tokens' range and no rotation reaches past it. */
static void call_positions(const pe_positions *at, int64_t B, int64_t T, int64_t Tk, int64_t A, int64_t *qpos,
                           int64_t *kpos, int64_t *lo, int64_t *hi) {
    *lo = INT64_MAX, *hi = INT64_MIN;
    for (int64_t b = 0; b < B; b++) {
        const int64_t kl = at && at->k_lens ? at->k_lens[b] : Tk, ql = at && at->q_lens ? at->q_lens[b] : T;
        for (int64_t t = 0; t < T; t++)
            for (int64_t x = 0; x < A; x++) {
                const int64_t p = t >= ql ? (at && at->key_pos ? at->key_pos[(at->key_pos_batched ? b * Tk : 0) * A + x] : 0)
                                  : at && at->pos ? at->pos[((at->pos_batched ? b * T : 0) + t) * A + x] : kl - ql + t;
                qpos[(b * T + t) * A + x] = p;
                if (t < ql) *lo = p < *lo ? p : *lo, *hi = p > *hi ? p : *hi;
            }
        for (int64_t u = 0; u < Tk; u++)
            for (int64_t x = 0; x < A; x++) {
                const int64_t p = at && at->key_pos ? at->key_pos[((at->key_pos_batched ? b * Tk : 0) + (u < kl ? u : 0)) * A + x]
                                                    : u < kl ? u : 0;
                kpos[(b * Tk + u) * A + x] = p;
                if (u < kl) *lo = p < *lo ? p : *lo, *hi = p > *hi ? p : *hi;
            }
    }
}

void pe__gather_rows(float *dst, const float *k, const float *v, int64_t kv_stride, const float *const *rows, int64_t B,
                     int64_t Tk, int64_t Ckv) {
    const size_t row = sizeof(float) * (size_t)Ckv;
    for (int64_t b = 0; b < B; b++) {
        float *kd = dst + b * Tk * Ckv, *vd = dst + (B + b) * Tk * Ckv;
        if (!rows) {
            memcpy(kd, k + b * kv_stride, row * (size_t)Tk), memcpy(vd, v + b * kv_stride, row * (size_t)Tk);
            continue;
        }
        for (int64_t u = 0; u < Tk; u++)
            memcpy(kd + u * Ckv, rows[b * Tk + u], row), memcpy(vd + u * Ckv, rows[(B + b) * Tk + u], row);
    }
}

/* One step over keys at k, v (row stride kv_stride) or at rows (paged). */
static pe_status step(pe_attention *a, const pe_weights *w, const float *q, const float *k, const float *v,
                      int64_t kv_stride, const float *const *rows, int64_t B, int64_t T, int64_t Tk,
                      const pe_positions *at, int rotated, float *o, const char *fn, pe_err *err) {
    if (a->m->flags & (PE__INPUT | PE__LAYER_INPUT | PE__COMPLEX))
        return pe_error(err, PE_EINVAL, "%s: method %s has no projected form (it reads the layer's input)", fn, a->m->name);
    if (a->m->flags & PE__MEMORY)
        return pe_error(err, PE_EINVAL, "%s: method %s attends over its own memory, not a cache", fn, a->m->name);
    if (!a->m->rotate_forward) return pe__attention_attend_kv(a, w, q, k, v, kv_stride, rows, B, T, Tk, at, 0, o, err);

    /* the call's positions, explicit, and their range: the frame of every rotation here */
    const int64_t A = pe_attention_axes(a, w), C = a->C, Ckv = a->Ckv;
    if (at && at->pos && (at->axes > 1 ? at->axes : 1) != A)
        return pe_error(err, PE_EINVAL, "%s: positions of %lld axes, but the layer reads %lld", fn,
                        (long long)(at->axes > 1 ? at->axes : 1), (long long)A);
    /* a transform hook may change v too (floater adds its terms, rope_values rotates it) */
    const size_t nq = (size_t)(B * T * C), nk = rotated ? 0 : (size_t)(2 * B * Tk * Ckv);
    int64_t *qpos = malloc(sizeof(int64_t) * (size_t)(B * (T + Tk) * A));
    float *buf = malloc(sizeof(float) * (nq + nk));
    if (!qpos || !buf) {
        free(qpos), free(buf);
        return pe_error(err, PE_ENOMEM, "out of memory for the transformed queries of %lld rows", (long long)B);
    }
    int64_t *kpos = qpos + B * T * A, lo, hi;
    call_positions(at, B, T, Tk, A, qpos, kpos, &lo, &hi);
    float *qt = buf, *kt = buf + nq, *vt = kt + B * Tk * Ckv;
    memcpy(qt, q, sizeof(float) * nq);
    pe_status st = PE_OK;
    if (!rotated) { /* the keys and values into contiguous rows, transformed once */
        pe__gather_rows(kt, k, v, kv_stride, rows, B, Tk, Ckv);
        st = pe__attention_apply(a, w, B * Tk, kpos, lo, hi, NULL, NULL, kt, vt, err);
    }
    if (!st) st = pe__attention_apply(a, w, B * T, qpos, lo, hi, NULL, qt, NULL, NULL, err);
    pe_positions cat = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .axes = A,
                        .mask = at ? at->mask : NULL, .mask_batched = at ? at->mask_batched : 0,
                        .q_lens = at ? at->q_lens : NULL, .k_lens = at ? at->k_lens : NULL};
    if (!st && rotated) st = pe__attention_attend_kv(a, w, qt, k, v, kv_stride, rows, B, T, Tk, &cat, 1, o, err);
    else if (!st) st = pe__attention_attend_kv(a, w, qt, kt, vt, Tk * Ckv, NULL, B, T, Tk, &cat, 1, o, err);
    if (!st) st = pe__attention_output(a, w, B * T, qpos, lo, hi, o, err);
    free(qpos), free(buf);
    return st;
}

static pe_status check_call(pe_attention *a, const float *q, const float *o, int64_t B, int64_t T, int64_t Tk,
                            const pe_positions *at, const char *fn, pe_err *err) {
    a->have_forward = 0;
    if (B < 1 || T < 1 || Tk < 1)
        return pe_error(err, PE_EINVAL, "%s: batch %lld, queries %lld and keys %lld must be >= 1", fn, (long long)B,
                        (long long)T, (long long)Tk);
    if (!q || !o) return pe_error(err, PE_EINVAL, "%s: q and o are required", fn);
    for (int64_t b = 0; at && at->k_lens && b < B; b++)
        if (at->k_lens[b] < 1 || at->k_lens[b] > Tk)
            return pe_error(err, PE_EINVAL, "%s: row %lld holds %lld keys, expected 1 .. %lld", fn, (long long)b,
                            (long long)at->k_lens[b], (long long)Tk);
    return PE_OK;
}

pe_status pe_attention_forward_kvcache(pe_attention *a, const pe_weights *w, const float *q, const float *k,
                                       const float *v, int64_t kv_stride, int64_t B, int64_t T, int64_t Tk,
                                       const pe_positions *at, int rotated, float *o, pe_err *err) {
    pe_status st = check_call(a, q, o, B, T, Tk, at, "forward_kvcache", err);
    if (st) return st;
    if (!k || !v) return pe_error(err, PE_EINVAL, "forward_kvcache: k_cache and v_cache are required");
    if (kv_stride < Tk * a->Ckv)
        return pe_error(err, PE_EINVAL, "forward_kvcache: kv_stride %lld is below Tk * kv_heads * head_dim (%lld)",
                        (long long)kv_stride, (long long)(Tk * a->Ckv));
    return step(a, w, q, k, v, kv_stride, NULL, B, T, Tk, at, rotated, o, "forward_kvcache", err);
}

pe_status pe_attention_forward_paged(pe_attention *a, const pe_weights *w, const float *q, const float *k_blocks,
                                     const float *v_blocks, int64_t n_blocks, int64_t block_size,
                                     const int32_t *block_table, int64_t max_blocks, int64_t B, int64_t T,
                                     const pe_positions *at, int rotated, float *o, pe_err *err) {
    if (block_size < 1 || max_blocks < 1 || n_blocks < 1 || max_blocks > INT64_MAX / block_size)
        return pe_error(err, PE_EINVAL, "forward_paged: block_size %lld, max_blocks %lld and n_blocks %lld must be >= 1",
                        (long long)block_size, (long long)max_blocks, (long long)n_blocks);
    const int64_t Tk = max_blocks * block_size, Ckv = a->Ckv;
    pe_status st = check_call(a, q, o, B, T, Tk, at, "forward_paged", err);
    if (st) return st;
    if (!k_blocks || !v_blocks || !block_table)
        return pe_error(err, PE_EINVAL, "forward_paged: k_blocks, v_blocks and block_table are required");
    if ((double)B * (double)Tk * 2 * sizeof(float *) > (double)(SIZE_MAX / 4))
        return pe_error(err, PE_EINVAL, "forward_paged: %lld rows of %lld keys are too many", (long long)B, (long long)Tk);
    /* every key's row and value's row, through the table; a row's padding at its first key */
    const float **rows = malloc(sizeof(float *) * (size_t)(2 * B * Tk));
    if (!rows) return pe_error(err, PE_ENOMEM, "out of memory for the block table's %lld rows", (long long)(B * Tk));
    for (int64_t b = 0; b < B && !st; b++) {
        const int64_t len = at && at->k_lens ? at->k_lens[b] : Tk;
        for (int64_t u = 0; u < Tk && !st; u++) {
            const int64_t at_u = u < len ? u : 0, blk = block_table[b * max_blocks + at_u / block_size];
            if (blk < 0 || blk >= n_blocks) {
                st = pe_error(err, PE_EINVAL, "forward_paged: block_table[%lld][%lld] is %lld, not within 0 .. %lld",
                              (long long)b, (long long)(at_u / block_size), (long long)blk, (long long)(n_blocks - 1));
                break;
            }
            const int64_t off = (blk * block_size + at_u % block_size) * Ckv;
            rows[b * Tk + u] = k_blocks + off, rows[(B + b) * Tk + u] = v_blocks + off;
        }
    }
    if (!st) st = step(a, w, q, NULL, NULL, 0, (const float *const *)rows, B, T, Tk, at, rotated, o, "forward_paged", err);
    free(rows);
    return st;
}
