/* The property metrics of `posenc analyze` (cli/props.c) on small constructed matrices whose
 * values are worked out by hand:
 *   - a Toeplitz (offset-only) matrix is perfectly translation invariant, and symmetric when even;
 *   - -|i - j| is perfectly monotone on both sides, |i - j| perfectly anti-monotone;
 *   - j - i is antisymmetric (symmetry 0) and monotone on one side only;
 *   - a 2 x 2 matrix computed by hand; Spearman with ties; a constant matrix is undefined;
 *   - the Gram matrix of the library's sinusoidal encoding is translation invariant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "props.h"

#define EPS 1e-12

static void toeplitz_is_translation_invariant(void **state) {
    (void)state;
    enum { N = 9 };
    double S[N * N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) S[i * N + j] = cos(0.3 * (i - j)) + 0.5 * sin(0.7 * (j - i)) + 0.1 * (j - i);
    pr_props p;
    pr_measure(S, N, &p);
    assert_true(fabs(p.translation - 1) < EPS);
    /* the same with the odd part removed is also symmetric */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) S[i * N + j] = cos(0.3 * (i - j)) + 2 * cos(0.05 * (i - j));
    pr_measure(S, N, &p);
    assert_true(fabs(p.translation - 1) < EPS);
    assert_true(fabs(p.symmetry - 1) < EPS);
    /* breaking it along one diagonal lowers it below 1 */
    S[0 * N + 1] += 1;
    pr_measure(S, N, &p);
    assert_true(p.translation < 1 - 1e-3);
    assert_true(p.symmetry < 1 - 1e-3);
}

static void distance_is_monotone(void **state) {
    (void)state;
    enum { N = 7 };
    double S[N * N];
    pr_props p;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) S[i * N + j] = -fabs((double)(i - j));
    pr_measure(S, N, &p);
    assert_true(fabs(p.mono_fwd - 1) < EPS && fabs(p.mono_bwd - 1) < EPS && fabs(p.monotonicity - 1) < EPS);
    assert_true(fabs(p.translation - 1) < EPS && fabs(p.symmetry - 1) < EPS);
    /* any decreasing function of the distance scores the same: ranks only */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) S[i * N + j] = exp(-0.5 * (i - j) * (i - j));
    pr_measure(S, N, &p);
    assert_true(fabs(p.monotonicity - 1) < EPS);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) S[i * N + j] = fabs((double)(i - j));
    pr_measure(S, N, &p);
    assert_true(fabs(p.monotonicity + 1) < EPS);
}

static void antisymmetric(void **state) {
    (void)state;
    enum { N = 6 };
    double S[N * N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) S[i * N + j] = j - i;
    pr_props p;
    pr_measure(S, N, &p);
    assert_true(fabs(p.symmetry) < EPS);
    assert_true(fabs(p.translation - 1) < EPS);
    /* forward the value grows with the offset (-1), backward it falls (+1) */
    assert_true(fabs(p.mono_fwd + 1) < EPS && fabs(p.mono_bwd - 1) < EPS && fabs(p.monotonicity) < EPS);
}

/* S = [[1, 2], [3, 4]]: mean 2.5, total sum of squares 5; the main diagonal {1, 4} holds 4.5 of
 * it (the off-diagonals are single cells), so translation = 1 - 4.5/5 = 0.1; the antisymmetric
 * part is +-0.5, squares 0.5, so symmetry = 1 - 0.5/5 = 0.9; row 0 forward (1 -> 2) rises: -1,
 * row 1 backward (offset 1 -> 3, offset 0 -> 4) falls: +1. */
static void two_by_two_by_hand(void **state) {
    (void)state;
    double S[4] = {1, 2, 3, 4};
    pr_props p;
    pr_measure(S, 2, &p);
    assert_true(fabs(p.translation - 0.1) < EPS);
    assert_true(fabs(p.symmetry - 0.9) < EPS);
    assert_true(fabs(p.mono_fwd + 1) < EPS && fabs(p.mono_bwd - 1) < EPS && fabs(p.monotonicity) < EPS);
}

static void spearman_and_degenerate(void **state) {
    (void)state;
    double x[3] = {1, 2, 3}, y[3] = {1, 1, 2};
    /* ranks 0 1 2 against 0.5 0.5 2: 1.5 / sqrt(2 * 1.5) */
    assert_true(fabs(pr_spearman(x, y, 3) - 1.5 / sqrt(3.0)) < EPS);
    assert_true(isnan(pr_spearman(x, x, 1)));
    double c[3] = {5, 5, 5};
    assert_true(isnan(pr_spearman(x, c, 3)));
    double S[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
    pr_props p;
    pr_measure(S, 3, &p);
    assert_true(isnan(p.translation) && isnan(p.symmetry) && isnan(p.monotonicity));
}

static void gram_and_cosine(void **state) {
    (void)state;
    float A[4] = {3, 4, 0, 2};
    double S[4];
    pr_gram(A, A, 2, 2, 0, S);
    assert_true(S[0] == 25 && S[1] == 8 && S[2] == 8 && S[3] == 4);
    pr_gram(A, A, 2, 2, 1, S);
    assert_true(fabs(S[0] - 1) < 1e-12 && fabs(S[1] - 0.8) < 1e-12 && fabs(S[3] - 1) < 1e-12);
}

/* sin(w i) sin(w j) + cos(w i) cos(w j) = cos(w (i - j)): P P^T of the sinusoidal encoding
 * depends on the offset only, so it scores translation 1 up to float32 rounding */
static void sinusoidal_gram_is_translation_invariant(void **state) {
    (void)state;
    enum { N = 32, C = 16 };
    int64_t pos[N];
    for (int i = 0; i < N; i++) pos[i] = i;
    pe_tensor in = {.name = "positions", .dtype = PE_I64, .ndim = 1, .shape = {N}, .data = pos};
    const char *k[] = {"method"}, *v[] = {"sinusoidal"};
    pe_tensor *out = NULL;
    int n = 0;
    pe_err err;
    if (pe_encode(1, k, v, C, 1, &in, &out, &n, &err)) fail_msg("encode: %s", err.msg);
    double S[N * N];
    pr_gram(out[0].data, out[0].data, N, C, 0, S);
    pe_tensors_free(out, n);
    pr_props p;
    pr_measure(S, N, &p);
    assert_true(p.translation > 1 - 1e-6);
    assert_true(p.symmetry > 1 - 1e-12);
    assert_true(p.monotonicity > 0.3); /* decays with distance, though not strictly */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(toeplitz_is_translation_invariant),
        cmocka_unit_test(distance_is_monotone),
        cmocka_unit_test(antisymmetric),
        cmocka_unit_test(two_by_two_by_hand),
        cmocka_unit_test(spearman_and_degenerate),
        cmocka_unit_test(gram_and_cosine),
        cmocka_unit_test(sinusoidal_gram_is_translation_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
