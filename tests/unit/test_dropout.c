/* Attention dropout (pe_attention_set_dropout): the same seed draws the same mask, another seed
 * another; about the rate of probabilities is zeroed and the rest divided by 1 - rate; the
 * backward is the derivative of that forward (finite differences, mask fixed by the seed), for
 * a plain, a bias, a rotary and a value-term method, in the layer and the projected form; a KV
 * cache attends without it; bad rates are errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { B = 2, T = 5, C = 8 };

typedef struct run {
    pe_attention *att;
    pe_layer L;
    float *x, *y, *r;
} run;

static double loss(void *p) {
    run *R = p;
    pe_err err;
    if (pe_attention_forward(R->att, &R->L.w, R->x, NULL, 0, NULL, 0, B, T, R->y, NULL, NULL, &err))
        fail_msg("forward: %s", err.msg);
    double s = 0;
    for (int i = 0; i < B * T * C; i++) s += (double)R->y[i] * R->r[i];
    return s;
}

static void gradients_are_the_derivative(void **state) {
    (void)state;
    static const char *const SETTINGS[] = {"method=none heads=2 causal=true", "method=alibi heads=2",
                                           "method=rope heads=2 causal=true", "method=shaw heads=2 max_rel=2"};
    for (size_t si = 0; si < sizeof SETTINGS / sizeof SETTINGS[0]; si++) {
        run R = {.att = pe_test_layer(SETTINGS[si], C)};
        pe_err err;
        pe_rng rng = {11 + si};
        if (pe_layer_init(&R.L, R.att, 0, 11 + si, &err)) fail_msg("%s", err.msg);
        R.x = pe_test_uniform(B * T * C, &rng), R.r = pe_test_uniform(B * T * C, &rng);
        R.y = malloc(sizeof(float) * B * T * C);
        assert_int_equal(pe_attention_set_dropout(R.att, 0.4, 1234, &err), PE_OK);
        loss(&R);
        float *dx = calloc(B * T * C, sizeof(float));
        pe_grads g = {0};
        float *dwq = calloc(C * C, sizeof(float)), *dwv = calloc(C * C, sizeof(float));
        g.dwq = dwq, g.dwv = dwv;
        if (pe_attention_backward(R.att, &R.L.w, R.r, dx, &g, &err)) fail_msg("backward: %s", err.msg);
        double worst = 0;
        for (int e = 0; e < B * T * C; e += 3)
            worst = fmax(worst, pe_test_fd_element(R.x + e, dx[e], 1e-2f, loss, &R, worst, SETTINGS[si], "x", e));
        for (int e = 0; e < C * C; e += 5) {
            worst = fmax(worst, pe_test_fd_element((float *)R.L.w.wq + e, dwq[e], 1e-2f, loss, &R, worst, SETTINGS[si], "wq", e));
            worst = fmax(worst, pe_test_fd_element((float *)R.L.w.wv + e, dwv[e], 1e-2f, loss, &R, worst, SETTINGS[si], "wv", e));
        }
        assert_true(worst <= 1);
        free(dx), free(dwq), free(dwv), free(R.x), free(R.y), free(R.r);
        pe_layer_free(&R.L);
        pe_attention_free(R.att);
    }
}

static void the_seed_draws_the_mask(void **state) {
    (void)state;
    enum { N = 64, H = 2 };
    pe_attention *att = pe_test_layer("method=none heads=2", 16);
    pe_err err;
    pe_rng rng = {5};
    float *q = pe_test_uniform(N * 16, &rng), *k = pe_test_uniform(N * 16, &rng), *v = pe_test_uniform(N * 16, &rng);
    float *o = malloc(sizeof(float) * N * 16), *p0 = malloc(sizeof(float) * H * N * N),
          *p1 = malloc(sizeof(float) * H * N * N), *p2 = malloc(sizeof(float) * H * N * N);
    float *o1 = malloc(sizeof(float) * N * 16);
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, N, N, NULL, o, NULL, p0, &err), PE_OK);
    assert_int_equal(pe_attention_set_dropout(att, 0.25, 99, &err), PE_OK);
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, N, N, NULL, o, NULL, p1, &err), PE_OK);
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, N, N, NULL, o1, NULL, p2, &err), PE_OK);
    assert_memory_equal(p1, p2, sizeof(float) * H * N * N); /* same seed, same mask */
    int64_t zeros = 0;
    for (int64_t e = 0; e < H * N * N; e++) {
        if (p1[e] == 0.0f) zeros++;
        else assert_true(fabsf(p1[e] - p0[e] / 0.75f) <= 1e-6f * fabsf(p1[e]) + 1e-12f);
    }
    const double rate = (double)zeros / (H * N * N); /* 8192 draws: sd 0.005 */
    assert_true(fabs(rate - 0.25) < 0.03);
    /* without probs (the output alone) the same mask: o equals p1 v */
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, N, N, NULL, o, NULL, NULL, &err), PE_OK);
    assert_memory_equal(o, o1, sizeof(float) * N * 16);
    assert_int_equal(pe_attention_set_dropout(att, 0.25, 100, &err), PE_OK);
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, N, N, NULL, o, NULL, p2, &err), PE_OK);
    assert_true(memcmp(p1, p2, sizeof(float) * H * N * N) != 0); /* another seed, another mask */
    assert_int_equal(pe_attention_set_dropout(att, 0, 0, &err), PE_OK);
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, v, 1, N, N, NULL, o, NULL, p2, &err), PE_OK);
    assert_memory_equal(p0, p2, sizeof(float) * H * N * N); /* off again */
    free(q), free(k), free(v), free(o), free(o1), free(p0), free(p1), free(p2);
    pe_attention_free(att);
}

static void caches_and_bad_rates(void **state) {
    (void)state;
    pe_attention *att = pe_test_layer("method=alibi heads=2 causal=true", 8);
    pe_err err;
    assert_int_equal(pe_attention_set_dropout(att, 1.0, 1, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "dropout"));
    assert_int_equal(pe_attention_set_dropout(att, -0.1, 1, &err), PE_EINVAL);
    assert_int_equal(pe_attention_set_dropout(att, NAN, 1, &err), PE_EINVAL);
    /* a cache decodes without dropout: its output is the dropout-free projected form's */
    pe_rng rng = {3};
    float *k = pe_test_uniform(6 * 8, &rng), *v = pe_test_uniform(6 * 8, &rng), *q = pe_test_uniform(8, &rng);
    float o1[8], o2[8];
    pe_kv_cache *c;
    assert_int_equal(pe_kv_cache_init(&c, att, 1, 16, &err), PE_OK);
    assert_int_equal(pe_kv_cache_append(c, NULL, k, v, 6, NULL, 0, NULL, &err), PE_OK);
    assert_int_equal(pe_kv_cache_attend(c, NULL, q, 1, NULL, o1, &err), PE_OK);
    assert_int_equal(pe_attention_set_dropout(att, 0.5, 7, &err), PE_OK);
    assert_int_equal(pe_kv_cache_attend(c, NULL, q, 1, NULL, o2, &err), PE_OK);
    assert_memory_equal(o1, o2, sizeof o1);
    pe_kv_cache_free(c);
    pe_attention *cx = pe_test_layer("method=complex heads=2", 8);
    assert_int_equal(pe_attention_set_dropout(cx, 0.1, 1, &err), PE_EINVAL);
    pe_attention_free(cx);
    free(k), free(v), free(q);
    pe_attention_free(att);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gradients_are_the_derivative),
        cmocka_unit_test(the_seed_draws_the_mask),
        cmocka_unit_test(caches_and_bad_rates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
