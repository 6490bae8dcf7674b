/* The KV cache with multi-axis positions (M-RoPE: rope with rope_sections, positions (time, row,
 * column) per token):
 *   - decoding token by token equals the projected form over every key so far (contiguous and
 *     interleaved sections, GQA, YaRN; dynamic NTK, whose frame moves with the largest position,
 *     re-rotates the cached keys on every axis), on the decode path and the reference path;
 *   - a context shift on every axis, or on the time axis alone, equals attending the kept keys
 *     at their moved positions from scratch;
 *   - positions left to the cache continue from the row's largest + 1 on every axis (text after
 *     an image), and positions of another axis count are refused.
 * Nothing here is timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { A = 3, N = 12, H = 4, D = 8, C = H * D };

static const char *const SETTINGS[] = {
    "method=rope rope_sections=2,1,1",
    "method=rope rope_sections=2,1,1 rope_section_layout=interleaved rope_layout=interleaved kv_heads=2",
    "method=rope rope_sections=1,2,1 rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8",
    "method=rope rope_sections=2,1,1 rope_scaling=dynamic rope_factor=2 max_position_embeddings=8 kv_heads=1",
};

/* Qwen2-VL's layout of text:3, image:2x3, text:3 (pe_mrope_positions) */
static void positions(int64_t *pos) {
    const pe_span spans[] = {{.text = 3}, {.t = 1, .h = 2, .w = 3}, {.text = 3}};
    int64_t n, next;
    pe_err err;
    if (pe_mrope_positions(spans, 3, 1, 0, pos, &n, &next, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n, N);
}

static pe_attention *layer(const char *settings) {
    char full[512];
    pe_config cfg;
    pe_err err;
    pe_attention *att;
    snprintf(full, sizeof full, "%s heads=%d causal=true", settings, H);
    if (pe_test_config(full, &cfg, &err) || pe_attention_init(&att, &cfg, C, &err)) fail_msg("%s: %s", settings, err.msg);
    return att;
}

/* o of query q at positions qp (A) against the first n raw keys at kp (n, A): the projected form */
static void reference_o(pe_attention *att, const float *q, const int64_t *qp, const float *k, const float *v,
                        const int64_t *kp, int64_t n, float *o) {
    pe_err err;
    pe_positions at = {.pos = qp, .key_pos = kp, .axes = A};
    if (pe_attention_forward_qkv(att, NULL, q, k, v, 1, 1, n, &at, o, NULL, NULL, &err)) fail_msg("%s", err.msg);
}

static int64_t compare(const char *what, const float *got, const float *want) {
    return pe_test_compare(what, got, want, C, 3e-5 * fmax(1.0, pe_test_maxabs(want, C)), 1e-4);
}

static void decode_equals_projected(void **state) {
    const char *settings = *state;
    int64_t pos[N * A];
    positions(pos);
    pe_rng rng = {17};
    for (int path = 0; path < 2; path++) {
        pe_attention *att = layer(settings);
        pe_run_options run = {.path = path ? PE_PATH_REFERENCE : PE_PATH_AUTO};
        pe_attention_set_run_options(att, &run);
        const int64_t Ckv = pe_attention_config(att)->kv_heads * D;
        float *q = pe_test_uniform(N * C, &rng), *k = pe_test_uniform(N * Ckv, &rng), *v = pe_test_uniform(N * Ckv, &rng);
        float got[C], want[C];
        pe_kv_cache *kv;
        pe_err err;
        if (pe_kv_cache_init(&kv, att, 1, N, &err)) fail_msg("%s", err.msg);
        assert_int_equal(pe_kv_cache_axes(kv), A);
        int64_t bad = 0;
        for (int64_t t = 0; t < N; t++) {
            if (pe_kv_cache_append(kv, NULL, k + t * Ckv, v + t * Ckv, 1, pos + t * A, 0, NULL, &err))
                fail_msg("%s: append %lld: %s", settings, (long long)t, err.msg);
            pe_positions at = {.pos = pos + t * A, .axes = A};
            if (pe_kv_cache_attend(kv, NULL, q + t * C, 1, &at, got, &err)) fail_msg("%s: attend: %s", settings, err.msg);
            reference_o(att, q + t * C, pos + t * A, k, v, pos, t + 1, want);
            char what[96];
            snprintf(what, sizeof what, "%s step %lld path %d", settings, (long long)t, path);
            bad += compare(what, got, want);
        }
        assert_int_equal(bad, 0);
        pe_kv_cache_free(kv);
        pe_attention_free(att);
        free(q), free(k), free(v);
    }
}

/* keep 2, drop 3, the rest moved by delta per axis: the cache's attention equals the kept raw
 * keys at their moved positions */
static void shift_axes(void **state) {
    (void)state;
    static const int64_t DELTAS[][A] = {{3, 3, 3}, {3, 0, 0}, {0, 0, 0}, {-2, 1, 5}};
    int64_t pos[N * A];
    positions(pos);
    pe_rng rng = {23};
    pe_attention *att = layer("method=rope rope_sections=2,1,1");
    float *q = pe_test_uniform(C, &rng), *k = pe_test_uniform(N * C, &rng), *v = pe_test_uniform(N * C, &rng);
    for (size_t s = 0; s < sizeof DELTAS / sizeof DELTAS[0]; s++) {
        pe_kv_cache *kv;
        pe_err err;
        if (pe_kv_cache_init(&kv, att, 1, N, &err) || pe_kv_cache_append(kv, NULL, k, v, N, pos, 0, NULL, &err))
            fail_msg("%s", err.msg);
        const int64_t keep = 2, drop = 3, n = N - drop;
        if (s == 0 ? pe_kv_cache_shift(kv, NULL, keep, drop, DELTAS[s][0], &err)
                   : pe_kv_cache_shift_axes(kv, NULL, keep, drop, DELTAS[s], &err))
            fail_msg("shift: %s", err.msg);
        float kk[N * C], vv[N * C], got[C], want[C];
        int64_t kp[N * A];
        for (int64_t u = 0; u < n; u++) { /* the kept tokens, in order, at their new positions */
            const int64_t r = u < keep ? u : u + drop;
            memcpy(kk + u * C, k + r * C, sizeof(float) * C), memcpy(vv + u * C, v + r * C, sizeof(float) * C);
            for (int a = 0; a < A; a++) kp[u * A + a] = pos[r * A + a] - (u < keep ? 0 : DELTAS[s][a]);
        }
        const int64_t *cached;
        int64_t len;
        if (pe_kv_cache_view(kv, 0, NULL, NULL, &cached, &len, &err)) fail_msg("%s", err.msg);
        assert_int_equal(len, n);
        assert_memory_equal(cached, kp, sizeof(int64_t) * (size_t)(n * A));
        pe_positions at = {.pos = kp + (n - 1) * A, .axes = A};
        if (pe_kv_cache_attend(kv, NULL, q, 1, &at, got, &err)) fail_msg("%s", err.msg);
        reference_o(att, q, kp + (n - 1) * A, kk, vv, kp, n, want);
        char what[64];
        snprintf(what, sizeof what, "shift %zu", s);
        assert_int_equal(compare(what, got, want), 0);
        pe_kv_cache_free(kv);
    }
    pe_attention_free(att);
    free(q), free(k), free(v);
}

static void default_positions_and_misuse(void **state) {
    (void)state;
    int64_t pos[N * A];
    positions(pos);
    pe_rng rng = {29};
    pe_attention *att = layer("method=rope rope_sections=2,1,1");
    float *k = pe_test_uniform(N * C, &rng), q[C], o[C];
    pe_kv_cache *kv;
    pe_err err;
    if (pe_kv_cache_init(&kv, att, 1, N, &err) || pe_kv_cache_append(kv, NULL, k, k, 9, pos, 0, NULL, &err) ||
        pe_kv_cache_append(kv, NULL, k, k, 2, NULL, 0, NULL, &err)) /* text:3 image:2x3 then two unplaced tokens */
        fail_msg("%s", err.msg);
    const int64_t *cached, largest = 5; /* the image's rows 3..4, columns 3..5: its largest is 5 */
    if (pe_kv_cache_view(kv, 0, NULL, NULL, &cached, NULL, &err)) fail_msg("%s", err.msg);
    for (int a = 0; a < A; a++) {
        assert_int_equal(cached[9 * A + a], largest + 1);
        assert_int_equal(cached[10 * A + a], largest + 2);
    }
    memcpy(q, k, sizeof q);
    const int64_t one[1] = {7};
    pe_positions at = {.pos = one}; /* one axis for a cache of three */
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, 1, &at, o, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "axes"));
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, 1, NULL, o, &err), PE_OK); /* the row's last token's */
    pe_kv_cache_free(kv);
    pe_attention_free(att);
    /* rope_mixed's axes are its tensor's rows: no cache */
    pe_config cfg;
    if (pe_test_config("method=rope_mixed heads=4", &cfg, &err) || pe_attention_init(&att, &cfg, C, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(pe_kv_cache_init(&kv, att, 1, 8, &err), PE_EINVAL);
    pe_attention_free(att);
    free(k);
}

int main(void) {
    struct CMUnitTest tests[sizeof SETTINGS / sizeof SETTINGS[0] + 2];
    size_t n = 0;
    for (size_t i = 0; i < sizeof SETTINGS / sizeof SETTINGS[0]; i++)
        tests[n++] = (struct CMUnitTest){SETTINGS[i], decode_equals_projected, NULL, NULL, (void *)SETTINGS[i]};
    tests[n++] = (struct CMUnitTest){"shift_axes", shift_axes, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"default_positions_and_misuse", default_positions_and_misuse, NULL, NULL, NULL};
    return _cmocka_run_group_tests("cache_axes", tests, n, NULL, NULL);
}
