/* Properties every method must have, driven by the method list:
 *   - explicit positions 0..T-1 give exactly what the default gives;
 *   - relative, bias and rotary methods are invariant when every position shifts by a
 *     constant; absolute ones (other than none) and those of ABSOLUTE_TERM are not;
 *   - a batch equals its sequences run one by one;
 *   - a [T] positions tensor is shared by the batch like the same [B, T] tensor;
 * plus exact tables: T5 buckets against HF's formula (tests/fixtures/tables). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

enum { B = 2, T = 7, H = 2, D = 4, C = H * D };

typedef struct fixture {
    pe_attention *att;
    pe_layer L;
    float x[B * T * C];
} fixture;

static void setup(fixture *f, int m, const char *extra) {
    char s[256];
    snprintf(s, sizeof s, "method=%s heads=%d causal=true %s", pe_method_name(m), H, extra);
    f->att = pe_test_layer(s, C);
    pe_err err;
    assert_int_equal(pe_layer_init(&f->L, f->att, 4096, 3, &err), PE_OK);
    pe_rng rng = {9};
    for (int i = 0; i < B * T * C; i++) f->x[i] = 2 * pe_rng_uniform(&rng) - 1;
}

static void teardown(fixture *f) {
    pe_layer_free(&f->L);
    pe_attention_free(f->att);
}

static void forward(fixture *f, const int64_t *pos, int batched, int64_t nb, const float *x, float *y) {
    pe_err err;
    pe_status st = pe_attention_forward(f->att, &f->L.w, x, NULL, 0, pos, batched, nb, T, y, NULL, NULL, &err);
    if (st) fail_msg("%s", err.msg);
}

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void positions_explicit_equal_default(void **state) {
    (void)state;
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        if (m == PE_METHOD_COMPLEX) continue; /* reads token ids, not x: tests/unit/test_complex.c */
        fixture f;
        setup(&f, m, "");
        int64_t pos[T];
        for (int t = 0; t < T; t++) pos[t] = t;
        float y0[B * T * C], y1[B * T * C];
        forward(&f, NULL, 0, B, f.x, y0);
        forward(&f, pos, 0, B, f.x, y1);
        if (memcmp(y0, y1, sizeof y0)) fail_msg("%s: explicit 0..T-1 differs from the default", pe_method_name(m));
        teardown(&f);
    }
}

/* Methods whose family (set by the hook they use) is not absolute but whose positional term
 * is: tupe adds its position-position term as a bias, read from pos_table row p + 1; fire
 * normalises by psi(max(i, |L init_L|)), the query's absolute position once past the
 * threshold (at most 512 in this layer, so the shift by 1000 crosses it); fope's Fourier
 * coefficients mix frequencies, and c_i c_j + s_i s_j depends on p_i - p_j alone only when they
 * are diagonal (RoPE). */
static const char *const ABSOLUTE_TERM[] = {"tupe", "fire", "fope"};

static int has_absolute_term(int m) {
    for (size_t i = 0; i < sizeof ABSOLUTE_TERM / sizeof ABSOLUTE_TERM[0]; i++)
        if (!strcmp(pe_method_name(m), ABSOLUTE_TERM[i])) return 1;
    return 0;
}

static void shift_invariance_by_family(void **state) {
    (void)state;
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        if (m == PE_METHOD_COMPLEX) continue; /* reads token ids, not x: tests/unit/test_complex.c */
        fixture f;
        setup(&f, m, "");
        int64_t pos[T], shifted[T];
        for (int t = 0; t < T; t++) pos[t] = 2 * t + 1, shifted[t] = pos[t] + 1000;
        float y0[B * T * C], y1[B * T * C];
        forward(&f, pos, 0, B, f.x, y0);
        forward(&f, shifted, 0, B, f.x, y1);
        double d = max_diff(y0, y1, B * T * C);
        pe_family fam = pe_method_family(m);
        int absolute = (fam == PE_FAMILY_ABSOLUTE && m != PE_METHOD_NONE) || has_absolute_term(m);
        printf("  %-12s moves by %.3g when positions shift by 1000\n", pe_method_name(m), d);
        if (absolute ? d < 1e-3 : d > 1e-5)
            fail_msg("%s (%s): shifting every position moved the output by %g", pe_method_name(m),
                     pe_family_name(fam), d);
        teardown(&f);
    }
}

static void batch_equals_sequences(void **state) {
    (void)state;
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        if (m == PE_METHOD_COMPLEX) continue; /* reads token ids, not x: tests/unit/test_complex.c */
        fixture f;
        setup(&f, m, "");
        int64_t pos[B * T];
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) pos[b * T + t] = 5 * b + 3 * t;
        float y[B * T * C], y1[T * C];
        forward(&f, pos, 1, B, f.x, y);
        for (int b = 0; b < B; b++) {
            forward(&f, pos + b * T, 0, 1, f.x + b * T * C, y1);
            if (max_diff(y + b * T * C, y1, T * C) > 1e-6)
                fail_msg("%s: sequence %d of the batch differs from running it alone", pe_method_name(m), b);
        }
        /* a [T] tensor is the same as that row repeated */
        int64_t rep[B * T];
        for (int b = 0; b < B; b++) memcpy(rep + b * T, pos, sizeof(int64_t) * T);
        float ya[B * T * C], yb[B * T * C];
        forward(&f, pos, 0, B, f.x, ya);
        forward(&f, rep, 1, B, f.x, yb);
        assert_memory_equal(ya, yb, sizeof ya);
        teardown(&f);
    }
}

static void t5_buckets_match_hf(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tables/t5_buckets.safetensors", pe_test_fixture_dir());
    pe_st_file f;
    pe_err err;
    if (pe_st_read(path, &f, &err)) fail_msg("%s", err.msg);
    const pe_tensor *rel = NULL;
    for (int i = 0; i < f.n; i++)
        if (!strcmp(f.t[i].name, "rel")) rel = &f.t[i];
    assert_non_null(rel);
    int tables = 0;
    for (int i = 0; i < f.n; i++) {
        long nb, md;
        int bidir;
        if (sscanf(f.t[i].name, "b_%ld_%ld_%d", &nb, &md, &bidir) != 3) continue;
        const int32_t *want = f.t[i].data;
        const int64_t *r = rel->data;
        for (int64_t e = 0; e < rel->shape[0]; e++) {
            int64_t got = pe__t5_bucket(r[e], bidir, nb, md);
            if (got != want[e])
                fail_msg("bucket(%lld, num_buckets %ld, max_distance %ld, bidirectional %d) = %lld, HF gives %d",
                         (long long)r[e], nb, md, bidir, (long long)got, want[e]);
        }
        tables++;
    }
    assert_true(tables >= 8);
    pe_st_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(positions_explicit_equal_default),
        cmocka_unit_test(shift_invariance_by_family),
        cmocka_unit_test(batch_equals_sequences),
        cmocka_unit_test(t5_buckets_match_hf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
