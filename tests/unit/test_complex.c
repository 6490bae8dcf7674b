/* The complex-valued layer (method complex) through its own API, pe_attention_forward_ids /
 * pe_attention_backward_ids: finite differences of every table and weight (loss over both
 * outputs, and over each alone), a zero magnitude that must not give NaN, the properties
 * test_properties.c checks for x-based methods (explicit positions = default, not shift
 * invariant, batch = sequences), and the API's refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

typedef struct run {
    pe_attention *att;
    pe_layer L;
    int64_t B, T, C;
    float *y, *yi, *r, *ri; /* outputs and the loss weights of each */
    int64_t *ids, *pos;
    int use_re, use_im; /* which outputs the loss reads */
} run;

enum { V = 9 }; /* rows of the tables */

static void run_init(run *R, const char *keys, int64_t B, int64_t T, int64_t H, int64_t D, uint64_t seed) {
    char s[256];
    snprintf(s, sizeof s, "method=complex heads=%lld %s", (long long)H, keys);
    memset(R, 0, sizeof *R);
    R->B = B, R->T = T, R->C = H * D, R->use_re = R->use_im = 1;
    R->att = pe_test_layer(s, R->C);
    assert_true(pe_attention_is_complex(R->att));
    pe_err err;
    if (pe_layer_init(&R->L, R->att, V, seed, &err)) fail_msg("%s", err.msg);
    int64_t n = B * T * R->C;
    R->y = malloc(sizeof(float) * n), R->yi = malloc(sizeof(float) * n);
    R->r = malloc(sizeof(float) * n), R->ri = malloc(sizeof(float) * n);
    R->ids = malloc(sizeof(int64_t) * B * T), R->pos = malloc(sizeof(int64_t) * B * T);
    pe_rng rng = {seed + 1};
    for (int64_t i = 0; i < n; i++) R->r[i] = 2 * pe_rng_uniform(&rng) - 1, R->ri[i] = 2 * pe_rng_uniform(&rng) - 1;
    for (int64_t i = 0; i < B * T; i++) R->ids[i] = (int64_t)(pe_rng_next(&rng) % V), R->pos[i] = i % T;
}

static void run_free(run *R) {
    free(R->y), free(R->yi), free(R->r), free(R->ri), free(R->ids), free(R->pos);
    pe_layer_free(&R->L);
    pe_attention_free(R->att);
}

static void forward(run *R, const int64_t *pos, int batched, float *y, float *yi) {
    pe_err err;
    if (pe_attention_forward_ids(R->att, &R->L.w, R->ids, pos, batched, R->B, R->T, y, yi, NULL, NULL, &err))
        fail_msg("forward: %s", err.msg);
}

static double loss(run *R) {
    forward(R, R->pos, 1, R->y, R->yi);
    double s = 0;
    for (int64_t i = 0; i < R->B * R->T * R->C; i++)
        s += (R->use_re ? (double)R->y[i] * R->r[i] : 0) + (R->use_im ? (double)R->yi[i] * R->ri[i] : 0);
    return s;
}
static double loss_v(void *R) { return loss(R); }

static void backward(run *R) {
    pe_err err;
    pe_layer_zero_grad(&R->L);
    if (pe_attention_backward_ids(R->att, &R->L.w, R->use_re ? R->r : NULL, R->use_im ? R->ri : NULL, &R->L.g, &err))
        fail_msg("backward: %s", err.msg);
}

/* Every element of every tensor (the projections, biases, amp, freq, phase) against the
 * four-point stencil, with test_gradcheck.c's tolerance. */
static void finite_differences(void **state) {
    (void)state;
    static const struct {
        const char *name, *keys;
        int64_t B, T, H, D;
        int gapped, use_re, use_im;
    } V_[] = {
        {"basic", "", 1, 5, 2, 4, 0, 1, 1},
        {"t1", "causal=true", 1, 1, 2, 4, 0, 1, 1},
        {"h3 causal gapped batch", "causal=true", 2, 6, 3, 4, 1, 1, 1},
        {"dy only", "", 1, 4, 2, 3, 1, 1, 0},
        {"dy_imag only, scale 0.8", "scale=0.8", 1, 4, 2, 3, 0, 0, 1},
    };
    for (size_t v = 0; v < sizeof V_ / sizeof V_[0]; v++) {
        run R;
        run_init(&R, V_[v].keys, V_[v].B, V_[v].T, V_[v].H, V_[v].D, 30 + v);
        R.use_re = V_[v].use_re, R.use_im = V_[v].use_im;
        if (V_[v].gapped)
            for (int64_t i = 0; i < R.B * R.T; i++) R.pos[i] = 3 * (i / R.T) + (i % R.T) * (1 + (i * 7) % 4);
        loss(&R);
        backward(&R);
        const char *names[8 + PE_MAX_PARAMS];
        float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
        int64_t sizes[8 + PE_MAX_PARAMS];
        int nt = pe_layer_tensors(&R.L, names, data, grads, sizes);
        assert_int_equal(nt, 11);
        double worst = 0;
        for (int t = 0; t < nt; t++) {
            float *g = malloc(sizeof(float) * sizes[t]);
            memcpy(g, grads[t], sizeof(float) * sizes[t]);
            for (int64_t e = 0; e < sizes[t]; e++)
                worst = fmax(worst, pe_test_fd_element(&data[t][e], g[e], 1e-2f * fmaxf(1.0f, fabsf(data[t][e])),
                                                       loss_v, &R, worst, V_[v].name, names[t], e));
            free(g);
        }
        printf("  %-26s worst %.3g x tolerance\n", V_[v].name, worst);
        assert_true(worst <= 1);
        run_free(&R);
    }
}

/* amp = 0 and bq = bk = 0 make q = k = 0 in both parts: every S is 0, where |S| has no
 * derivative. The choice (gradient 0 there) keeps every gradient finite, and the query and
 * key weights, reached only through |S|, get exactly 0. */
static void zero_magnitude_gives_no_nan(void **state) {
    (void)state;
    run R;
    run_init(&R, "causal=true", 2, 5, 2, 4, 4);
    const char *names[8 + PE_MAX_PARAMS];
    float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
    int64_t sizes[8 + PE_MAX_PARAMS];
    int nt = pe_layer_tensors(&R.L, names, data, grads, sizes);
    for (int t = 0; t < nt; t++)
        if (!strcmp(names[t], "amp") || !strcmp(names[t], "bq") || !strcmp(names[t], "bk"))
            memset(data[t], 0, sizeof(float) * sizes[t]);
    float *scores = malloc(sizeof(float) * R.B * 2 * R.T * R.T);
    pe_err err;
    if (pe_attention_forward_ids(R.att, &R.L.w, R.ids, R.pos, 1, R.B, R.T, R.y, R.yi, scores, NULL, &err))
        fail_msg("%s", err.msg);
    for (int64_t b = 0; b < R.B * 2; b++)
        for (int64_t i = 0; i < R.T; i++)
            for (int64_t j = 0; j <= i; j++) assert_true(scores[(b * R.T + i) * R.T + j] == 0.0f);
    backward(&R);
    for (int t = 0; t < nt; t++)
        for (int64_t e = 0; e < sizes[t]; e++) {
            if (!isfinite(grads[t][e])) fail_msg("d%s[%lld] = %g", names[t], (long long)e, grads[t][e]);
            if ((!strcmp(names[t], "wq") || !strcmp(names[t], "wk") || !strcmp(names[t], "bq") ||
                 !strcmp(names[t], "bk")) && grads[t][e] != 0)
                fail_msg("d%s[%lld] = %g, expected 0 (|S| = 0 everywhere)", names[t], (long long)e, grads[t][e]);
        }
    /* one zero entry among nonzero ones: still finite everywhere */
    for (int t = 0; t < nt; t++)
        if (!strcmp(names[t], "amp"))
            for (int64_t e = 0; e < sizes[t]; e++) data[t][e] = e < sizes[t] / 2 ? 0.0f : 0.5f;
    loss(&R);
    backward(&R);
    for (int t = 0; t < nt; t++)
        for (int64_t e = 0; e < sizes[t]; e++)
            if (!isfinite(grads[t][e])) fail_msg("d%s[%lld] = %g", names[t], (long long)e, grads[t][e]);
    free(scores);
    run_free(&R);
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* test_properties.c's checks, for ids: explicit 0..T-1 = default (bitwise); shifting every
 * position moves the output (absolute); a batch equals its sequences; [T] positions are
 * shared like the same [B, T]. */
static void properties(void **state) {
    (void)state;
    run R;
    const int64_t B = 2, T = 7, C = 8, n = B * T * C;
    run_init(&R, "causal=true", B, T, 2, 4, 8);
    float *y0 = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n);
    float *i0 = malloc(sizeof(float) * n), *i1 = malloc(sizeof(float) * n);
    int64_t pos[B * T], shifted[B * T];
    for (int64_t t = 0; t < T; t++) pos[t] = t;
    forward(&R, NULL, 0, y0, i0);
    forward(&R, pos, 0, y1, i1);
    assert_memory_equal(y0, y1, sizeof(float) * n);
    assert_memory_equal(i0, i1, sizeof(float) * n);

    for (int64_t t = 0; t < T; t++) pos[t] = 2 * t + 1, shifted[t] = pos[t] + 1000;
    forward(&R, pos, 0, y0, i0);
    forward(&R, shifted, 0, y1, i1);
    double d = fmax(max_diff(y0, y1, n), max_diff(i0, i1, n));
    printf("  complex moves by %.3g when positions shift by 1000\n", d);
    assert_true(d > 1e-3);

    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) pos[b * T + t] = 5 * b + 3 * t;
    forward(&R, pos, 1, y0, i0);
    int64_t *ids = R.ids;
    for (int64_t b = 0; b < B; b++) {
        R.ids = ids + b * T, R.B = 1;
        forward(&R, pos + b * T, 0, y1, i1);
        R.ids = ids, R.B = B;
        if (max_diff(y0 + b * T * C, y1, T * C) > 1e-6 || max_diff(i0 + b * T * C, i1, T * C) > 1e-6)
            fail_msg("sequence %lld of the batch differs from running it alone", (long long)b);
    }
    for (int64_t b = 0; b < B; b++) memcpy(shifted + b * T, pos, sizeof(int64_t) * T);
    forward(&R, pos, 0, y0, i0);
    forward(&R, shifted, 1, y1, i1);
    assert_memory_equal(y0, y1, sizeof(float) * n);
    assert_memory_equal(i0, i1, sizeof(float) * n);
    free(y0), free(y1), free(i0), free(i1);
    run_free(&R);
}

/* What the API refuses, with a message naming the problem. */
static void refusals(void **state) {
    (void)state;
    run R;
    run_init(&R, "", 1, 3, 2, 4, 2);
    pe_err err;
    float x[3 * 8] = {0};
    assert_int_equal(pe_attention_forward(R.att, &R.L.w, x, NULL, 0, NULL, 0, 1, 3, R.y, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "pe_attention_forward_ids"));
    loss(&R);
    assert_int_equal(pe_attention_backward(R.att, &R.L.w, R.r, x, &R.L.g, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "dx"));
    assert_int_equal(pe_attention_backward_ids(R.att, &R.L.w, NULL, NULL, &R.L.g, &err), PE_EINVAL);
    /* pe_attention_backward is the dy_imag = 0 case of backward_ids */
    float *g1 = malloc(sizeof(float) * 8 * 8);
    pe_layer_zero_grad(&R.L);
    assert_int_equal(pe_attention_backward(R.att, &R.L.w, R.r, NULL, &R.L.g, &err), PE_OK);
    memcpy(g1, R.L.g.dwq, sizeof(float) * 64);
    pe_layer_zero_grad(&R.L);
    assert_int_equal(pe_attention_backward_ids(R.att, &R.L.w, R.r, NULL, &R.L.g, &err), PE_OK);
    assert_memory_equal(g1, R.L.g.dwq, sizeof(float) * 64);
    free(g1);
    R.ids[1] = V;
    assert_int_equal(pe_attention_forward_ids(R.att, &R.L.w, R.ids, NULL, 0, 1, 3, R.y, R.yi, NULL, NULL, &err), PE_ETENSOR);
    assert_non_null(strstr(err.msg, "ids"));
    R.ids[1] = -1;
    assert_int_equal(pe_attention_forward_ids(R.att, &R.L.w, R.ids, NULL, 0, 1, 3, R.y, R.yi, NULL, NULL, &err), PE_ETENSOR);
    R.ids[1] = 0;
    R.L.w.param_rows[1] = V - 1; /* freq with fewer rows than amp */
    assert_int_equal(pe_attention_forward_ids(R.att, &R.L.w, R.ids, NULL, 0, 1, 3, R.y, R.yi, NULL, NULL, &err), PE_ETENSOR);
    assert_non_null(strstr(err.msg, "freq"));
    R.L.w.param_rows[1] = V;
    assert_int_equal(pe_attention_forward_ids(R.att, &R.L.w, R.ids, NULL, 0, 1, 3, R.y, NULL, NULL, NULL, &err), PE_EINVAL);
    run_free(&R);

    pe_attention *other = pe_test_layer("method=sinusoidal heads=2", 8);
    int64_t ids[3] = {0, 1, 2};
    float y[24], yi[24];
    assert_false(pe_attention_is_complex(other));
    pe_weights w = {0};
    assert_int_equal(pe_attention_forward_ids(other, &w, ids, NULL, 0, 1, 3, y, yi, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "pe_attention_forward"));
    assert_int_equal(pe_attention_backward_ids(other, &w, y, yi, NULL, &err), PE_EINVAL);
    pe_attention_free(other);

    /* no grouped-query attention, keys of the method only */
    pe_config cfg;
    pe_config_init(&cfg);
    const char *k[] = {"method", "heads", "kv_heads"}, *v[] = {"complex", "4", "2"};
    assert_int_equal(pe_config_set_all(&cfg, 3, k, v, &err), PE_OK);
    pe_attention *a;
    assert_int_not_equal(pe_attention_init(&a, &cfg, 8, &err), PE_OK);
}

/* pe_attend: ids in place of x (x refused), dy_imag, y_imag, no dx, the default scale. */
static void attend_by_name(void **state) {
    (void)state;
    enum { T = 3, C = 4, NT = 12 };
    float w[4][C * C], amp[V * C], freq[V * C], dy[T * C], dyi[T * C], x[T * C];
    pe_rng rng = {77};
    for (int i = 0; i < 4; i++)
        for (int e = 0; e < C * C; e++) w[i][e] = pe_rng_uniform(&rng) - 0.5f;
    for (int e = 0; e < V * C; e++) amp[e] = pe_rng_uniform(&rng), freq[e] = pe_rng_uniform(&rng);
    for (int e = 0; e < T * C; e++) dy[e] = pe_rng_uniform(&rng), dyi[e] = pe_rng_uniform(&rng), x[e] = 0;
    int32_t ids[T] = {1, 0, 8};
    pe_tensor in[NT];
    memset(in, 0, sizeof in);
    int n = 0;
#define T2(nm, d, r, c) (snprintf(in[n].name, 64, "%s", nm), in[n].dtype = PE_F32, in[n].ndim = 2, in[n].shape[0] = r, in[n].shape[1] = c, in[n++].data = d)
    T2("wq", w[0], C, C), T2("wk", w[1], C, C), T2("wv", w[2], C, C), T2("wo", w[3], C, C);
    T2("amp", amp, V, C), T2("freq", freq, V, C), T2("dy", dy, T, C), T2("dy_imag", dyi, T, C);
#undef T2
    snprintf(in[n].name, 64, "ids"), in[n].dtype = PE_I32, in[n].ndim = 1, in[n].shape[0] = T, in[n++].data = ids;
    const char *k[] = {"method", "heads"}, *v[] = {"complex", "2"};
    pe_tensor *outs;
    int n_outs;
    pe_err err;
    if (pe_attend(2, k, v, n, in, &outs, &n_outs, &err)) fail_msg("%s", err.msg);
    const char *want[] = {"y", "y_imag", "scores", "probs", "dwq", "dwk", "dwv", "dwo", "damp", "dfreq"};
    assert_int_equal(n_outs, 10);
    for (int i = 0; i < 10; i++) assert_string_equal(outs[i].name, want[i]);
    assert_int_equal(outs[1].ndim, 2);
    pe_tensors_free(outs, n_outs);
    /* x is refused; ids on another method is an unknown tensor */
    snprintf(in[n].name, 64, "x"), in[n].dtype = PE_F32, in[n].ndim = 2, in[n].shape[0] = T, in[n].shape[1] = C, in[n++].data = x;
    assert_int_equal(pe_attend(2, k, v, n, in, &outs, &n_outs, &err), PE_ETENSOR);
    assert_non_null(strstr(err.msg, "'x'"));
    pe_tensor in2[6] = {in[0], in[1], in[2], in[3], in[n - 1], in[n - 2]}; /* w*, x, ids */
    const char *v2[] = {"none", "2"};
    assert_int_equal(pe_attend(2, k, v2, 6, in2, &outs, &n_outs, &err), PE_ETENSOR);
    assert_non_null(strstr(err.msg, "'ids'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(finite_differences),
        cmocka_unit_test(zero_magnitude_gives_no_nan),
        cmocka_unit_test(properties),
        cmocka_unit_test(refusals),
        cmocka_unit_test(attend_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
