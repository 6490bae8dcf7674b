/* DeBERTa and Huang et al. specifics:
 *   - the log buckets against HF's make_log_bucket_position, computed by PyTorch in float32
 *     over many regimes and distances up to 10^6 and beyond (tests/fixtures/tables);
 *   - configuration: method-dependent defaults (scale, max_rel) and the rejected settings;
 *   - a second backward of the same forward gives the same gradients (the derived tables'
 *     gradients are cleared once they reach the parameters). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

static void buckets_match_hf(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tables/deberta_buckets.safetensors", pe_test_fixture_dir());
    pe_st_file f;
    pe_err err;
    if (pe_st_read(path, &f, &err)) fail_msg("%s", err.msg);
    const pe_tensor *rel = NULL;
    for (int i = 0; i < f.n; i++)
        if (!strcmp(f.t[i].name, "rel")) rel = &f.t[i];
    assert_non_null(rel);
    int tables = 0;
    for (int i = 0; i < f.n; i++) {
        long bs, mp;
        if (sscanf(f.t[i].name, "b_%ld_%ld", &bs, &mp) != 2) continue;
        assert_int_equal(f.t[i].dtype, PE_I64);
        const int64_t *want = f.t[i].data, *r = rel->data;
        for (int64_t e = 0; e < rel->shape[0]; e++) {
            int64_t got = pe__deberta_bucket(r[e], bs, mp);
            if (got != want[e])
                fail_msg("bucket(%lld, position_buckets %ld, max_relative_positions %ld) = %lld, HF gives %lld",
                         (long long)r[e], bs, mp, (long long)got, (long long)want[e]);
        }
        tables++;
    }
    assert_true(tables >= 16);
    pe_st_free(&f);
}

static pe_status init(const char *settings, int64_t C, pe_attention **att, pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", settings);
    for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
        char *eq = strchr(w, '=');
        *eq = 0;
        pe_status st = pe_config_set(&cfg, w, eq + 1, err);
        if (st) return st;
    }
    return pe_attention_init(att, &cfg, C, err);
}

static void configuration(void **state) {
    (void)state;
    pe_attention *a;
    pe_err err;
    /* scale 1/sqrt(D (1 + n)) */
    assert_int_equal(init("method=deberta heads=2", 8, &a, &err), PE_OK);
    assert_true(fabs(pe_attention_config(a)->scale - 1 / sqrt(12.0)) < 1e-15);
    pe_param_spec s[PE_MAX_PARAMS];
    assert_int_equal(pe_attention_params(a, s), 1);
    assert_int_equal(s[0].shape[0], 512); /* 2 * position_buckets */
    pe_attention_free(a);
    assert_int_equal(init("method=deberta heads=2 pos_att=p2c share_att_key=false position_buckets=0 "
                          "max_relative_positions=7", 8, &a, &err), PE_OK);
    assert_true(fabs(pe_attention_config(a)->scale - 1 / sqrt(8.0)) < 1e-15);
    assert_int_equal(pe_attention_params(a, s), 5);
    assert_int_equal(s[0].shape[0], 14);
    assert_true(s[1].optional && !s[3].optional); /* pos_key_w unused, pos_query_w required */
    pe_attention_free(a);
    /* rejected */
    const char *bad[] = {"method=deberta heads=2 max_relative_positions=0",
                         "method=deberta heads=2 position_buckets=1",
                         "method=deberta heads=2 position_buckets=0 max_relative_positions=0",
                         "method=deberta heads=2 kv_heads=1", "method=huang3 heads=2 max_rel=-1",
                         "method=huang1 heads=2 kv_heads=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        if (init(bad[i], 8, &a, &err) == PE_OK) fail_msg("accepted: %s", bad[i]);
        assert_true(strlen(err.msg) > 0);
    }
    /* max_rel: 64 for huang, 16 for shaw */
    assert_int_equal(init("method=huang2 heads=2", 8, &a, &err), PE_OK);
    assert_int_equal(pe_attention_config(a)->max_rel, 64);
    pe_attention_free(a);
    assert_int_equal(init("method=shaw heads=2", 8, &a, &err), PE_OK);
    assert_int_equal(pe_attention_config(a)->max_rel, 16);
    pe_attention_free(a);
}

static void backward_twice(void **state) {
    (void)state;
    const char *settings[] = {"method=deberta heads=2 position_buckets=4 max_relative_positions=8",
                              "method=deberta heads=2 share_att_key=false pos_att=p2c|c2p",
                              "method=huang4 heads=2 max_rel=2"};
    enum { T = 5, C = 8 };
    for (size_t c = 0; c < sizeof settings / sizeof settings[0]; c++) {
        pe_attention *a = pe_test_layer(settings[c], C);
        pe_layer L;
        pe_err err;
        assert_int_equal(pe_layer_init(&L, a, 64, 5, &err), PE_OK);
        float x[T * C], y[T * C], dy[T * C], dx[T * C];
        pe_rng rng = {3};
        for (int i = 0; i < T * C; i++) x[i] = 2 * pe_rng_uniform(&rng) - 1, dy[i] = pe_rng_uniform(&rng);
        assert_int_equal(pe_attention_forward(a, &L.w, x, NULL, 0, NULL, 0, 1, T, y, NULL, NULL, &err), PE_OK);
        float *g1 = malloc(sizeof(float) * L.n);
        pe_layer_zero_grad(&L);
        assert_int_equal(pe_attention_backward(a, &L.w, dy, dx, &L.g, &err), PE_OK);
        memcpy(g1, L.block + L.n, sizeof(float) * L.n);
        pe_layer_zero_grad(&L);
        assert_int_equal(pe_attention_backward(a, &L.w, dy, dx, &L.g, &err), PE_OK);
        assert_memory_equal(g1, L.block + L.n, sizeof(float) * L.n);
        free(g1);
        pe_layer_free(&L);
        pe_attention_free(a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets_match_hf),
        cmocka_unit_test(configuration),
        cmocka_unit_test(backward_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
