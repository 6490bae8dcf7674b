/* Transformer-XL's segment memory, which the method-wide sweeps (gradcheck, properties) never
 * pass: forward values against the reference are in the xl_* fixtures; here
 *   - recurrence: a segment with mems = the previous segment equals the tail of one run over
 *     both (causal; also with clamp_len and with same_length given an explicit mem_len);
 *   - a batch with batched mems equals its sequences run one by one with their own mems;
 *   - finite differences of every tensor with mems present (batched, T = 1, clamp_len,
 *     same_length, causal false); mems themselves get no gradient;
 *   - errors: an odd width, a negative mem_len, mems for a method without memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void fill(float *a, int64_t n, pe_rng *rng) {
    for (int64_t i = 0; i < n; i++) a[i] = 2 * pe_rng_uniform(rng) - 1;
}

static void forward(pe_attention *att, pe_layer *L, const float *x, const float *mems, int64_t M,
                    int64_t B, int64_t T, float *y) {
    pe_err err;
    if (pe_attention_forward(att, &L->w, x, mems, M, NULL, 0, B, T, y, NULL, NULL, &err))
        fail_msg("forward: %s", err.msg);
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* y(x2; mems = x1) equals the last T2 rows of y([x1; x2]) for causal attention: query
 * M + i sees the same keys at the same distances either way. */
static void recurrence_equals_one_run(void **state) {
    (void)state;
    enum { M = 5, T2 = 4, Tall = M + T2, H = 2, D = 4, C = H * D };
    const char *settings[] = {
        "method=xl heads=2",
        "method=xl heads=2 clamp_len=3",
        "method=xl heads=2 same_length=true mem_len=3",
        "method=xl heads=2 same_length=true mem_len=7 clamp_len=2",
    };
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        pe_attention *att = pe_test_layer(settings[s], C);
        pe_layer L;
        pe_err err;
        assert_int_equal(pe_layer_init(&L, att, 16, 11 + s, &err), PE_OK);
        pe_rng rng = {5 + s};
        float x[Tall * C], yall[Tall * C], y2[T2 * C];
        fill(x, Tall * C, &rng);
        forward(att, &L, x, NULL, 0, 1, Tall, yall);
        forward(att, &L, x + M * C, x, M, 1, T2, y2);
        double d = max_diff(yall + M * C, y2, T2 * C);
        if (d > 1e-5) fail_msg("'%s': segment with mems differs from the joint run by %g", settings[s], d);
        pe_layer_free(&L);
        pe_attention_free(att);
    }
}

static void batched_mems_equal_sequences(void **state) {
    (void)state;
    enum { B = 3, M = 4, T = 3, H = 2, D = 4, C = H * D };
    const char *settings[] = {"method=xl heads=2", "method=xl heads=2 causal=false clamp_len=2",
                              "method=xl heads=2 same_length=true"};
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        pe_attention *att = pe_test_layer(settings[s], C);
        pe_layer L;
        pe_err err;
        assert_int_equal(pe_layer_init(&L, att, 16, 3, &err), PE_OK);
        pe_rng rng = {17};
        float x[B * T * C], mems[B * M * C], y[B * T * C], y1[T * C];
        fill(x, B * T * C, &rng);
        fill(mems, B * M * C, &rng);
        forward(att, &L, x, mems, M, B, T, y);
        for (int b = 0; b < B; b++) {
            forward(att, &L, x + b * T * C, mems + b * M * C, M, 1, T, y1);
            if (max_diff(y + b * T * C, y1, T * C) > 1e-6)
                fail_msg("'%s': sequence %d of the batch differs from running it alone", settings[s], b);
        }
        pe_layer_free(&L);
        pe_attention_free(att);
    }
}

typedef struct fd_case {
    const char *settings;
    int64_t B, T, M, H, D;
} fd_case;

typedef struct run {
    pe_attention *att;
    pe_layer L;
    const fd_case *c;
    int64_t n; /* B*T*C */
    float *x, *mems, *y, *r;
} run;

static double loss(run *R) {
    forward(R->att, &R->L, R->x, R->mems, R->c->M, R->c->B, R->c->T, R->y);
    double s = 0;
    for (int64_t i = 0; i < R->n; i++) s += (double)R->y[i] * R->r[i];
    return s;
}
static double loss_v(void *R) { return loss(R); }

/* Worst |num - ana| / (2e-3 + 1e-2 |ana|), the four-point stencil of test_gradcheck.c. */
static double check_tensor(run *R, const char *name, float *data, const float *grad, int64_t size) {
    double worst = 0;
    for (int64_t e = 0; e < size; e++)
        worst = fmax(worst, pe_test_fd_element(&data[e], grad[e], 1e-2f * fmaxf(1.0f, fabsf(data[e])), loss_v, R,
                                               worst, R->c->settings, name, e));
    return worst;
}

static void gradients_with_mems(void **state) {
    (void)state;
    static const fd_case CASES[] = {
        {"method=xl heads=2", 2, 4, 3, 2, 4},
        {"method=xl heads=2", 1, 1, 4, 2, 4},
        {"method=xl heads=3 causal=false clamp_len=3", 1, 3, 5, 3, 2},
        {"method=xl heads=2 same_length=true mem_len=4 clamp_len=2", 2, 4, 3, 2, 4},
        {"method=xl heads=2 same_length=true causal=false", 1, 4, 2, 2, 4},
    };
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        const fd_case *c = &CASES[ci];
        const int64_t C = c->H * c->D;
        run R = {.c = c, .n = c->B * c->T * C};
        R.att = pe_test_layer(c->settings, C);
        pe_err err;
        assert_int_equal(pe_layer_init(&R.L, R.att, 16, 23 + ci, &err), PE_OK);
        R.x = malloc(sizeof(float) * R.n), R.y = malloc(sizeof(float) * R.n);
        R.r = malloc(sizeof(float) * R.n), R.mems = malloc(sizeof(float) * c->B * c->M * C);
        float *dx = malloc(sizeof(float) * R.n);
        pe_rng rng = {101 + ci};
        fill(R.x, R.n, &rng), fill(R.r, R.n, &rng), fill(R.mems, c->B * c->M * C, &rng);

        loss(&R);
        pe_layer_zero_grad(&R.L);
        if (pe_attention_backward(R.att, &R.L.w, R.r, dx, &R.L.g, &err)) fail_msg("backward: %s", err.msg);
        double worst = check_tensor(&R, "x", R.x, dx, R.n);
        const char *names[8 + PE_MAX_PARAMS];
        float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
        int64_t sizes[8 + PE_MAX_PARAMS];
        int nt = pe_layer_tensors(&R.L, names, data, grads, sizes);
        for (int t = 0; t < nt; t++) worst = fmax(worst, check_tensor(&R, names[t], data[t], grads[t], sizes[t]));

        /* a second backward of the same forward gives the same gradients (the state's
         * accumulated table gradient was cleared) */
        float *dwr = NULL, *first = NULL;
        int64_t nwr = 0;
        for (int t = 0; t < nt; t++)
            if (!strcmp(names[t], "wr")) dwr = grads[t], nwr = sizes[t];
        assert_non_null(dwr);
        loss(&R);
        pe_layer_zero_grad(&R.L);
        assert_int_equal(pe_attention_backward(R.att, &R.L.w, R.r, dx, &R.L.g, &err), PE_OK);
        first = malloc(sizeof(float) * nwr);
        memcpy(first, dwr, sizeof(float) * nwr);
        pe_layer_zero_grad(&R.L);
        assert_int_equal(pe_attention_backward(R.att, &R.L.w, R.r, dx, &R.L.g, &err), PE_OK);
        assert_memory_equal(first, dwr, sizeof(float) * nwr);

        printf("  %-56s B=%lld T=%lld M=%lld worst %.3g x tolerance\n", c->settings, (long long)c->B,
               (long long)c->T, (long long)c->M, worst);
        assert_true(worst <= 1.0);
        free(first), free(dx), free(R.x), free(R.y), free(R.r), free(R.mems);
        pe_layer_free(&R.L);
        pe_attention_free(R.att);
    }
}

static pe_status init_status(const char *const *keys, const char *const *vals, int n, int64_t C,
                             pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    pe_attention *att = NULL;
    pe_status st = pe_config_set_all(&cfg, n, keys, vals, err);
    if (!st) st = pe_attention_init(&att, &cfg, C, err);
    pe_attention_free(att);
    return st;
}

static void errors(void **state) {
    (void)state;
    pe_err err = {{0}};
    const char *k2[] = {"method", "heads"}, *odd[] = {"xl", "3"};
    assert_int_equal(init_status(k2, odd, 2, 9, &err), PE_ETENSOR); /* C = 9 */
    assert_non_null(strstr(err.msg, "even"));
    const char *k3[] = {"method", "heads", "mem_len"}, *neg[] = {"xl", "2", "-1"};
    assert_int_equal(init_status(k3, neg, 3, 8, &err), PE_EKEY);
    assert_non_null(strstr(err.msg, "mem_len"));

    /* mems for a method without memory */
    pe_attention *att = pe_test_layer("method=t5 heads=2", 8);
    pe_layer L;
    assert_int_equal(pe_layer_init(&L, att, 16, 1, &err), PE_OK);
    float x[2 * 8] = {0}, mems[3 * 8] = {0}, y[2 * 8];
    assert_int_equal(pe_attention_forward(att, &L.w, x, mems, 3, NULL, 0, 1, 2, y, NULL, NULL, &err), PE_ETENSOR);
    assert_non_null(strstr(err.msg, "mems"));
    pe_layer_free(&L);
    pe_attention_free(att);

    /* same_length with mem_len 0 leaves a query no key */
    att = pe_test_layer("method=xl heads=2 same_length=true mem_len=0", 8);
    assert_int_equal(pe_layer_init(&L, att, 16, 1, &err), PE_OK);
    assert_int_equal(pe_attention_forward(att, &L.w, x, mems, 3, NULL, 0, 1, 2, y, NULL, NULL, &err), PE_EINVAL);
    pe_layer_free(&L);
    pe_attention_free(att);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recurrence_equals_one_run),
        cmocka_unit_test(batched_mems_equal_sequences),
        cmocka_unit_test(gradients_with_mems),
        cmocka_unit_test(errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
