/* An engine's step over its own cache (pe_attention_forward_kvcache) equals the projected form
 * (pe_attention_forward_qkv) over contiguous copies of the same keys and values:
 *   - every method of the projected form, two rows of different filled lengths in rows of a
 *     larger capacity (kv_stride), gapped positions, grouped-query attention where the method
 *     has it, one query (the decode path) and a chunk of three;
 *   - rope, xpos and rope_values with keys handed raw (transformed here) and with keys the
 *     caller rotated itself (pe_attention_rotate), as an engine's cache keeps them;
 *   - the projected form with few queries (the decode kernel) against its reference path,
 *     output and every gradient (the fused backward reads the decode kernel's statistics);
 *   - paged keys (pe_attention_forward_paged): shuffled block tables of blocks of 4 and 16 keys,
 *     rotated or not, give the contiguous step's output; a table entry past the blocks is refused;
 *   - misuse: a short kv_stride, methods without a projected form.
 * Nothing here is timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static pe_attention *layer(const char *settings, int64_t C) {
    char full[512];
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    for (int gqa = 1; gqa >= 0 && !att; gqa--) {
        snprintf(full, sizeof full, "%s heads=4 causal=true%s", settings, gqa ? " kv_heads=2" : "");
        if (pe_test_config(full, &cfg, &err) || pe_attention_init(&att, &cfg, C, &err)) att = NULL;
    }
    if (!att) fail_msg("%s: %s", settings, err.msg);
    return att;
}

static const char *const METHODS[] = {
    "method=none", "method=rope", "method=rope rope_layout=interleaved rotary_dim=4 rotary_offset=2",
    "method=rope rope_values=true rope_layout=interleaved rotary_dim=4 rotary_offset=4 attention_sinks=true",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=16", "method=alibi",
    "method=t5 num_buckets=8 max_distance=12", "method=xpos xpos_scale_base=8", "method=kerple kerple=log",
    "method=fire fire_init_L=8", "method=floater", "method=shaw max_rel=3", "method=fope",
};

static void equals_the_projected_form(void **state) {
    (void)state;
    enum { B = 2, CAP = 24, MAXT = 3 };
    const int64_t C = 32, lens[B] = {21, 9};
    for (size_t mi = 0; mi < sizeof METHODS / sizeof METHODS[0]; mi++)
        for (int T = 1; T <= MAXT; T += 2)
            for (int rotated = 0; rotated <= 1; rotated++) {
                pe_attention *att = layer(METHODS[mi], C);
                const int64_t Ckv = C / pe_attention_config(att)->heads * pe_attention_config(att)->kv_heads;
                pe_layer L;
                pe_err err;
                if (pe_layer_init(&L, att, 0, 9, &err)) fail_msg("%s", err.msg);
                pe_rng rng = {11};
                float *kc = pe_test_uniform(B * CAP * Ckv, &rng), *vc = pe_test_uniform(B * CAP * Ckv, &rng);
                float *q = pe_test_uniform(B * T * C, &rng);
                int64_t kpos[B * CAP], qpos[B * MAXT], klen[B], qlen[B] = {T, T};
                int64_t lo = INT64_MAX, hi = INT64_MIN;
                for (int b = 0; b < B; b++) {
                    klen[b] = lens[b];
                    for (int u = 0; u < CAP; u++) kpos[b * CAP + u] = 3 * u + b; /* gapped */
                    for (int t = 0; t < T; t++) qpos[b * T + t] = kpos[b * CAP + lens[b] - T + t];
                    lo = kpos[b * CAP] < lo ? kpos[b * CAP] : lo;
                    hi = kpos[b * CAP + lens[b] - 1] > hi ? kpos[b * CAP + lens[b] - 1] : hi;
                }
                /* the projected form over contiguous copies of each row's filled keys */
                float *kk = calloc((size_t)(B * CAP * Ckv), sizeof(float)), *vv = calloc((size_t)(B * CAP * Ckv), sizeof(float));
                memcpy(kk, kc, sizeof(float) * B * CAP * Ckv), memcpy(vv, vc, sizeof(float) * B * CAP * Ckv);
                pe_positions at = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1,
                                   .k_lens = klen, .q_lens = qlen};
                float o1[B * MAXT * 32], o2[B * MAXT * 32];
                if (pe_attention_forward_qkv(att, &L.w, q, kk, vv, B, T, CAP, &at, o2, NULL, NULL, &err))
                    fail_msg("%s: %s", METHODS[mi], err.msg);
                /* the engine's cache: rows of capacity CAP + 5, rotated by the caller where asked */
                const int64_t stride = (CAP + 5) * Ckv;
                float *ke = calloc((size_t)(B * stride), sizeof(float)), *ve = calloc((size_t)(B * stride), sizeof(float));
                for (int b = 0; b < B; b++) {
                    memcpy(ke + b * stride, kc + b * CAP * Ckv, sizeof(float) * CAP * Ckv);
                    memcpy(ve + b * stride, vc + b * CAP * Ckv, sizeof(float) * CAP * Ckv);
                }
                const int can_rotate = strstr(METHODS[mi], "rope") || strstr(METHODS[mi], "xpos");
                if (rotated && !can_rotate) goto next;
                for (int b = 0; rotated && b < B; b++) {
                    const int64_t Hkv = pe_attention_config(att)->kv_heads;
                    if (pe_attention_rotate(att, &L.w, ke + b * stride, lens[b], Ckv, Hkv, kpos + b * CAP, lo, hi, PE_ROTATE_K, 0, &err))
                        fail_msg("%s: %s", METHODS[mi], err.msg);
                    if (strstr(METHODS[mi], "rope_values") &&
                        pe_attention_rotate(att, &L.w, ve + b * stride, lens[b], Ckv, Hkv, kpos + b * CAP, lo, hi, PE_ROTATE_K, 0, &err))
                        fail_msg("%s: %s", METHODS[mi], err.msg);
                }
                if (pe_attention_forward_kvcache(att, &L.w, q, ke, ve, stride, B, T, CAP, &at, rotated, o1, &err))
                    fail_msg("%s (T %d, rotated %d): %s", METHODS[mi], T, rotated, err.msg);
                char what[256];
                snprintf(what, sizeof what, "o (%s, T %d, rotated %d)", METHODS[mi], T, rotated);
                assert_int_equal(pe_test_compare(what, o1, o2, B * T * C, 3e-5 * fmax(1.0, pe_test_maxabs(o2, B * T * C)), 1e-4), 0);
            next:
                free(kc), free(vc), free(q), free(kk), free(vv), free(ke), free(ve);
                pe_layer_free(&L);
                pe_attention_free(att);
            }
}

/* The projected form with few queries runs the decode kernel (after its transform stage) and
 * saves the fused path's statistics: its output and every gradient equal the reference path's. */
static void few_queries_decode_with_gradients(void **state) {
    (void)state;
    static const char *const M[] = {
        "method=none", "method=rope", "method=rope rope_values=true rotary_dim=4 rotary_offset=4 attention_sinks=true",
        "method=alibi", "method=t5 num_buckets=8 max_distance=12", "method=kerple kerple=log", "method=fire fire_init_L=8",
        "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8 window=5,0",
    };
    enum { B = 2, TK = 40, MAXT = 3 };
    const int64_t C = 32, klen[B] = {40, 23};
    for (size_t mi = 0; mi < sizeof M / sizeof M[0]; mi++)
        for (int T = 1; T <= MAXT; T += 2) {
            pe_attention *att = layer(M[mi], C);
            const int64_t Ckv = C / pe_attention_config(att)->heads * pe_attention_config(att)->kv_heads;
            pe_layer L;
            pe_err err;
            if (pe_layer_init(&L, att, 0, 5, &err)) fail_msg("%s", err.msg);
            pe_rng rng = {3};
            float *q = pe_test_uniform(B * T * C, &rng), *k = pe_test_uniform(B * TK * Ckv, &rng);
            float *v = pe_test_uniform(B * TK * Ckv, &rng), *dout = pe_test_uniform(B * T * C, &rng);
            int64_t qlen[B] = {T, T};
            pe_positions at = {.k_lens = klen, .q_lens = qlen};
            float *out[2][4], *grads[2];
            for (int path = 0; path < 2; path++) { /* 0: the default (decode), 1: the reference */
                pe_run_options run = {.path = path ? PE_PATH_REFERENCE : PE_PATH_AUTO};
                pe_attention_set_run_options(att, &run);
                out[path][0] = malloc(sizeof(float) * B * T * C), out[path][1] = malloc(sizeof(float) * B * T * C);
                out[path][2] = malloc(sizeof(float) * B * TK * Ckv), out[path][3] = malloc(sizeof(float) * B * TK * Ckv);
                pe_layer_zero_grad(&L);
                if (pe_attention_forward_qkv(att, &L.w, q, k, v, B, T, TK, &at, out[path][0], NULL, NULL, &err) ||
                    pe_attention_backward_qkv(att, &L.w, dout, out[path][1], out[path][2], out[path][3], &L.g, &err))
                    fail_msg("%s (T %d, path %d): %s", M[mi], T, path, err.msg);
                grads[path] = malloc(sizeof(float) * (L.n ? L.n : 1));
                memcpy(grads[path], L.block + L.n, sizeof(float) * L.n);
            }
            static const char *const NAMES[4] = {"o", "dq", "dk", "dv"};
            const int64_t n[4] = {B * T * C, B * T * C, B * TK * Ckv, B * TK * Ckv};
            int64_t bad = 0;
            for (int i = 0; i < 4; i++) {
                char what[256];
                snprintf(what, sizeof what, "%s (%s, T %d)", NAMES[i], M[mi], T);
                bad += pe_test_compare(what, out[0][i], out[1][i], n[i], 3e-5 * fmax(1.0, pe_test_maxabs(out[1][i], n[i])), 1e-4);
            }
            if (L.n) bad += pe_test_compare(M[mi], grads[0], grads[1], L.n, 3e-5 * fmax(1.0, pe_test_maxabs(grads[1], L.n)), 1e-4);
            assert_int_equal(bad, 0);
            for (int path = 0; path < 2; path++) {
                for (int i = 0; i < 4; i++) free(out[path][i]);
                free(grads[path]);
            }
            free(q), free(k), free(v), free(dout);
            pe_layer_free(&L);
            pe_attention_free(att);
        }
}

/* Paged keys (pe_attention_forward_paged): blocks in a shuffled table give the contiguous
 * step's output bit for bit where both decode, and to rounding where a mask sends the call
 * through the projected form over the gathered keys. */
static void paged_equals_contiguous(void **state) {
    (void)state;
    static const char *const M[] = {"method=none", "method=rope", "method=alibi", "method=t5 num_buckets=8 max_distance=12",
                                    "method=rope rope_values=true rotary_dim=4 rotary_offset=4 attention_sinks=true"};
    enum { B = 2, TK = 48 };
    const int64_t C = 32, lens[B] = {37, 11};
    for (size_t mi = 0; mi < sizeof M / sizeof M[0]; mi++)
        for (int bs = 4; bs <= 16; bs *= 4)
            for (int variant = 0; variant < 4; variant++) { /* T 1 or 5, rotated or not, a mask or not */
                const int T = variant & 1 ? 5 : 1, rotated = (variant >> 1) & 1, masked = T == 5 && rotated;
                pe_attention *att = layer(M[mi], C);
                const int64_t Ckv = C / pe_attention_config(att)->heads * pe_attention_config(att)->kv_heads;
                const int64_t max_blocks = TK / bs, n_blocks = B * max_blocks + 3;
                pe_layer L;
                pe_err err;
                if (pe_layer_init(&L, att, 0, 7, &err)) fail_msg("%s", err.msg);
                pe_rng rng = {19};
                float *kc = pe_test_uniform(B * TK * Ckv, &rng), *vc = pe_test_uniform(B * TK * Ckv, &rng);
                float *q = pe_test_uniform(B * T * C, &rng);
                float *kb = calloc((size_t)(n_blocks * bs * Ckv), sizeof(float)), *vb = calloc((size_t)(n_blocks * bs * Ckv), sizeof(float));
                int32_t table[B * 48];
                int32_t perm[2 * 48 + 3];
                for (int64_t i = 0; i < n_blocks; i++) perm[i] = (int32_t)i;
                for (int64_t i = n_blocks - 1; i > 0; i--) { /* Fisher-Yates from the test's stream */
                    const int64_t r = (int64_t)(pe_rng_next(&rng) % (uint64_t)(i + 1));
                    const int32_t t = perm[i];
                    perm[i] = perm[r], perm[r] = t;
                }
                for (int b = 0; b < B; b++)
                    for (int64_t x = 0; x < max_blocks; x++) {
                        table[b * max_blocks + x] = perm[b * max_blocks + x];
                        memcpy(kb + perm[b * max_blocks + x] * bs * Ckv, kc + (b * TK + x * bs) * Ckv, sizeof(float) * bs * Ckv);
                        memcpy(vb + perm[b * max_blocks + x] * bs * Ckv, vc + (b * TK + x * bs) * Ckv, sizeof(float) * bs * Ckv);
                    }
                int64_t qlen[B] = {T, T};
                uint8_t mask[B * 5 * TK];
                for (int i = 0; i < B * 5 * TK; i++) mask[i] = (uint8_t)(i % 7 != 3);
                pe_positions at = {.k_lens = lens, .q_lens = qlen, .mask = masked ? mask : NULL, .mask_batched = 1};
                float o1[B * 5 * 32], o2[B * 5 * 32];
                if (pe_attention_forward_paged(att, &L.w, q, kb, vb, n_blocks, bs, table, max_blocks, B, T, &at, rotated, o1, &err) ||
                    pe_attention_forward_kvcache(att, &L.w, q, kc, vc, TK * Ckv, B, T, TK, &at, rotated, o2, &err))
                    fail_msg("%s (block %d, T %d, rotated %d): %s", M[mi], bs, T, rotated, err.msg);
                char what[256];
                snprintf(what, sizeof what, "paged o (%s, block %d, T %d, rotated %d, mask %d)", M[mi], bs, T, rotated, masked);
                if (!masked) assert_memory_equal(o1, o2, sizeof(float) * B * T * C);
                else assert_int_equal(pe_test_compare(what, o1, o2, B * T * C, 1e-6, 1e-6), 0);
                /* a table entry past the blocks */
                const int32_t keep = table[1]; /* row 0, block 1: within its 37 keys */
                table[1] = (int32_t)n_blocks;
                assert_int_equal(pe_attention_forward_paged(att, &L.w, q, kb, vb, n_blocks, bs, table, max_blocks, B, T, &at,
                                                            rotated, o1, &err), PE_EINVAL);
                assert_non_null(strstr(err.msg, "block_table[0][1]"));
                table[1] = keep;
                free(kc), free(vc), free(q), free(kb), free(vb);
                pe_layer_free(&L);
                pe_attention_free(att);
            }
}

static void misuse(void **state) {
    (void)state;
    pe_attention *att = layer("method=rope", 32);
    pe_layer L;
    pe_err err;
    if (pe_layer_init(&L, att, 0, 1, &err)) fail_msg("%s", err.msg);
    float q[32] = {0}, k[4 * 16] = {0}, o[32];
    assert_int_equal(pe_attention_forward_kvcache(att, &L.w, q, k, k, 15, 1, 1, 1, NULL, 0, o, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "kv_stride"));
    assert_int_equal(pe_attention_forward_kvcache(att, &L.w, q, k, k, 16, 1, 0, 1, NULL, 0, o, &err), PE_EINVAL);
    assert_int_equal(pe_attention_forward_kvcache(att, &L.w, NULL, k, k, 16, 1, 1, 1, NULL, 0, o, &err), PE_EINVAL);
    pe_layer_free(&L);
    pe_attention_free(att);
    static const char *const NO_FORM[] = {"method=sinusoidal", "method=learned", "method=complex", "method=xl"};
    for (size_t i = 0; i < sizeof NO_FORM / sizeof NO_FORM[0]; i++) {
        att = layer(NO_FORM[i], 32);
        if (pe_layer_init(&L, att, 0, 1, &err)) fail_msg("%s", err.msg);
        assert_int_equal(pe_attention_forward_kvcache(att, &L.w, q, k, k, 32, 1, 1, 1, NULL, 0, o, &err), PE_EINVAL);
        pe_layer_free(&L);
        pe_attention_free(att);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(equals_the_projected_form),
        cmocka_unit_test(few_queries_decode_with_gradients),
        cmocka_unit_test(paged_equals_contiguous),
        cmocka_unit_test(misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
