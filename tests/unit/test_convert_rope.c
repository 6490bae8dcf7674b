/* pe_rope_permute: permuted q/k rows with the other RoPE layout give the same attention, for
 * full and partial rotary_dim and grouped-query attention; permuting there and back is the
 * identity. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void same_attention(const char *extra, int64_t H, int64_t Hkv, int64_t D, int64_t rd) {
    int64_t C = H * D, T = 6;
    char s[256];
    snprintf(s, sizeof s, "method=rope heads=%lld kv_heads=%lld rope_layout=interleaved causal=true %s",
             (long long)H, (long long)Hkv, extra);
    pe_attention *a = pe_test_layer(s, C);
    snprintf(s, sizeof s, "method=rope heads=%lld kv_heads=%lld rope_layout=half causal=true %s",
             (long long)H, (long long)Hkv, extra);
    pe_attention *b = pe_test_layer(s, C);
    pe_layer L;
    pe_err err;
    assert_int_equal(pe_layer_init(&L, a, 1, 5, &err), PE_OK);
    float *x = malloc(sizeof(float) * T * C), *y1 = malloc(sizeof(float) * T * C), *y2 = malloc(sizeof(float) * T * C);
    pe_rng rng = {3};
    for (int64_t i = 0; i < T * C; i++) x[i] = pe_rng_normal(&rng);
    int64_t pos[6] = {0, 3, 4, 9, 100, 1000};
    assert_int_equal(pe_attention_forward(a, &L.w, x, NULL, 0, pos, 0, 1, T, y1, NULL, NULL, &err), PE_OK);

    float *w[4] = {(float *)L.w.wq, (float *)L.w.bq, (float *)L.w.wk, (float *)L.w.bk};
    float *keep[4];
    int64_t heads[4] = {H, H, Hkv, Hkv}, cols[4] = {C, 1, C, 1};
    for (int i = 0; i < 4; i++) {
        size_t n = (size_t)(heads[i] * D * cols[i]);
        keep[i] = malloc(sizeof(float) * n);
        memcpy(keep[i], w[i], sizeof(float) * n);
        assert_int_equal(pe_rope_permute(w[i], heads[i], D, rd, cols[i], PE_ROPE_HALF, &err), PE_OK);
    }
    assert_int_equal(pe_attention_forward(b, &L.w, x, NULL, 0, pos, 0, 1, T, y2, NULL, NULL, &err), PE_OK);
    assert_int_equal(pe_test_compare("y after conversion", y2, y1, T * C, 1e-6, 1e-5), 0);
    for (int i = 0; i < 4; i++) {
        size_t n = (size_t)(heads[i] * D * cols[i]);
        assert_int_equal(pe_rope_permute(w[i], heads[i], D, rd, cols[i], PE_ROPE_INTERLEAVED, &err), PE_OK);
        assert_memory_equal(w[i], keep[i], sizeof(float) * n); /* there and back */
        free(keep[i]);
    }
    free(x), free(y1), free(y2);
    pe_layer_free(&L);
    pe_attention_free(a);
    pe_attention_free(b);
}

static void full(void **state) { (void)state; same_attention("", 2, 2, 8, 8); }
static void partial(void **state) { (void)state; same_attention("rotary_dim=4", 3, 3, 6, 4); }
static void gqa_llama3(void **state) {
    (void)state;
    same_attention("rope_scaling=llama3 rope_factor=8 original_max_position_embeddings=16", 4, 2, 8, 8);
}

static void bad_arguments(void **state) {
    (void)state;
    float w[8] = {0};
    pe_err err;
    assert_int_not_equal(pe_rope_permute(w, 1, 8, 3, 1, PE_ROPE_HALF, &err), PE_OK);
    assert_int_not_equal(pe_rope_permute(w, 1, 8, 10, 1, PE_ROPE_HALF, &err), PE_OK);
    assert_int_not_equal(pe_rope_permute(w, 1, 8, 8, 1, 7, &err), PE_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full), cmocka_unit_test(partial), cmocka_unit_test(gqa_llama3),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
