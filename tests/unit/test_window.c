/* The window key (sliding-window attention, FlashAttention's window_size): a windowed layer
 * equals the same layer given the window as an attn_mask, on every path (reference, fused,
 * decode through the KV cache), forward and backward, for methods of every kind; bad windows
 * are refused by name. The mask is built here from FlashAttention's rule alone (key j visible
 * to query i when i + Tk - T - left <= j <= i + Tk - T + right, -1: no limit; causal: right 0),
 * so the test does not share the library's visibility code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *const METHODS[] = {
    "method=none", "method=rope", "method=alibi", "method=t5 num_buckets=8 max_distance=12", "method=shaw max_rel=3",
    "method=huang3 max_rel=3", "method=xpos xpos_scale_base=64", "method=kerple kerple=power", "method=fire fire_init_L=8",
    "method=pope", "method=fope", "method=floater floater_dt=0.001", "method=deberta position_buckets=4 max_relative_positions=8 share_att_key=false",
    "method=tupe num_buckets=8 max_distance=12", "method=cope",
};
static const char *const WINDOWS[] = {"-1,-1", "3,0", "0,2", "5,5", "-1,3", "64,0", "100,-1", "0,0"};

static int visible(int causal, int64_t left, int64_t right, int64_t T, int64_t Tk, int64_t i, int64_t j) {
    const int64_t t = i + Tk - T;
    if (causal && j > t) return 0;
    if (left >= 0 && j < t - left) return 0;
    if (right >= 0 && j > t + right) return 0;
    return 1;
}

static pe_attention *layer(const char *settings, const char *window, int causal, int *kv, pe_layer *L, int rows) {
    char full[512];
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    for (int gqa = 1; gqa >= 0 && !att; gqa--) { /* kv_heads=2 where the method has grouped-query attention */
        snprintf(full, sizeof full, "%s heads=4 causal=%s%s%s%s", settings, causal ? "true" : "false",
                 gqa ? " kv_heads=2" : "", window ? " window=" : "", window ? window : "");
        if (pe_test_config(full, &cfg, &err) || pe_attention_init(&att, &cfg, 64, &err)) att = NULL;
        else *kv = gqa ? 2 : 4;
    }
    if (!att) fail_msg("%s: %s", full, err.msg);
    if (L && pe_layer_init(L, att, rows, 7, &err)) fail_msg("%s", err.msg);
    return att;
}

typedef struct shape {
    int64_t B, T, Tk;
} shape;

/* One method, window, causality and shape: the windowed layer on the reference and the fused
 * path against the masked layer on the reference path, o and every gradient. Returns 0 when
 * some query has no key (the case is skipped), 1 after comparing. */
static int check(const char *settings, const char *window, int causal, shape sh) {
    const int64_t B = sh.B, T = sh.T, Tk = sh.Tk, H = 4, D = 16, C = H * D;
    int64_t left = -1, right = -1;
    sscanf(window, "%lld,%lld", (long long *)&left, (long long *)&right);
    uint8_t *mask = malloc((size_t)(T * Tk));
    for (int64_t i = 0; i < T; i++) {
        int any = 0;
        for (int64_t j = 0; j < Tk; j++) any |= mask[i * Tk + j] = (uint8_t)visible(causal, left, right, T, Tk, i, j);
        if (!any) {
            free(mask);
            return 0;
        }
    }
    int kv;
    pe_layer L;
    pe_attention *w = layer(settings, window, causal, &kv, &L, Tk + 8), *m = layer(settings, NULL, causal, &kv, NULL, 0);
    const int64_t Ckv = kv * D, nq = B * T * C, nk = B * Tk * Ckv;
    pe_rng rng = {11};
    float *q = pe_test_uniform(nq, &rng), *k = pe_test_uniform(nk, &rng), *v = pe_test_uniform(nk, &rng);
    float *dout = pe_test_uniform(nq, &rng);
    float *o[3], *g[3];
    pe_grads grads[3];
    int np = pe_attention_params(w, NULL);
    int64_t psize[PE_MAX_PARAMS];
    pe_param_spec specs[PE_MAX_PARAMS];
    pe_attention_params(w, specs);
    for (int p = 0; p < np; p++) {
        psize[p] = 1;
        for (int d = 0; d < specs[p].ndim; d++) psize[p] *= specs[p].shape[d] >= 0 ? specs[p].shape[d] : L.w.param_rows[p];
    }
    int64_t kpos[400], qpos[400];
    for (int64_t u = 0; u < Tk; u++) kpos[u] = 3 + u;
    for (int64_t t = 0; t < T; t++) qpos[t] = kpos[Tk - T + t];
    pe_positions at = {.pos = qpos, .key_pos = kpos}, atm = {.pos = qpos, .key_pos = kpos, .mask = mask};
    pe_err err;
    for (int r = 0; r < 3; r++) { /* 0: window, reference; 1: window, fused; 2: mask, reference */
        pe_attention *a = r == 2 ? m : w;
        pe_attention_set_run_options(a, &(pe_run_options){.path = r == 1 ? PE_PATH_FUSED : PE_PATH_REFERENCE});
        o[r] = malloc(sizeof(float) * (size_t)nq), g[r] = calloc((size_t)(nq + 2 * nk), sizeof(float));
        memset(&grads[r], 0, sizeof grads[r]);
        for (int p = 0; p < np; p++) grads[r].dparam[p] = calloc((size_t)psize[p], sizeof(float));
        if (pe_attention_forward_qkv(a, &L.w, q, k, v, B, T, Tk, r == 2 ? &atm : &at, o[r], NULL, NULL, &err) ||
            pe_attention_backward_qkv(a, &L.w, dout, g[r], g[r] + nq, g[r] + nq + nk, &grads[r], &err))
            fail_msg("%s window=%s causal=%d B=%lld T=%lld Tk=%lld path %d: %s", settings, window, causal, (long long)B,
                     (long long)T, (long long)Tk, r, err.msg);
    }
    char what[256];
    /* tolerances relative to the tensor's scale: floater's ODE biases grow with the position
     * (|o| ~ 200 at 150 here), and float rounding with them */
    const double so = 1 + pe_test_maxabs(o[2], nq), sg = 1 + pe_test_maxabs(g[2], nq + 2 * nk);
    for (int r = 0; r < 2; r++) {
        snprintf(what, sizeof what, "%s window=%s causal=%d T=%lld Tk=%lld %s: o", settings, window, causal, (long long)T,
                 (long long)Tk, r ? "fused" : "reference");
        assert_int_equal(pe_test_compare(what, o[r], o[2], nq, 1e-5 * so, 1e-4), 0);
        snprintf(what, sizeof what, "%s window=%s causal=%d %s: dq dk dv", settings, window, causal, r ? "fused" : "reference");
        assert_int_equal(pe_test_compare(what, g[r], g[2], nq + 2 * nk, 1e-5 * sg, 1e-4), 0);
        for (int p = 0; p < np; p++) {
            snprintf(what, sizeof what, "%s window=%s %s: d%s", settings, window, r ? "fused" : "reference", specs[p].name);
            assert_int_equal(pe_test_compare(what, grads[r].dparam[p], grads[2].dparam[p], psize[p],
                                             1e-5 * (1 + pe_test_maxabs(grads[2].dparam[p], psize[p])), 1e-4), 0);
        }
    }
    for (int r = 0; r < 3; r++) {
        free(o[r]), free(g[r]);
        for (int p = 0; p < np; p++) free(grads[r].dparam[p]);
    }
    free(q), free(k), free(v), free(dout), free(mask);
    pe_layer_free(&L);
    pe_attention_free(w), pe_attention_free(m);
    return 1;
}

static void window_is_its_mask(void **state) {
    const char *settings = *state;
    const int cope = strstr(settings, "cope") != NULL;
    static const shape shapes[] = {{2, 70, 150}, {1, 1, 40}, {1, 130, 130}, {2, 9, 9}};
    int checked = 0;
    for (size_t wi = 0; wi < sizeof WINDOWS / sizeof WINDOWS[0]; wi++)
        for (int causal = cope; causal < 2; causal++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                checked += check(settings, WINDOWS[wi], causal, shapes[si]);
    assert_true(checked >= (cope ? 20 : 40));
}

/* Decoding with a window through the KV cache (the decode path for one query, the projected
 * form for a block of them) equals the projected form over every cached key with the window's
 * mask. */
static void cache_with_window(void **state) {
    const char *settings = *state;
    const int64_t H = 4, D = 16, C = H * D, P = 50, steps = 12;
    int kv;
    pe_layer L;
    pe_attention *w = layer(settings, "8,0", 1, &kv, &L, P + steps + 2), *m = layer(settings, NULL, 1, &kv, NULL, 0);
    const int64_t Ckv = kv * D, N = P + steps;
    pe_rng rng = {5};
    float *q = pe_test_uniform(N * C, &rng), *k = pe_test_uniform(N * Ckv, &rng), *v = pe_test_uniform(N * Ckv, &rng);
    float *o1 = malloc(sizeof(float) * N * C), *o2 = malloc(sizeof(float) * N * C);
    uint8_t *mask = malloc((size_t)(N * N));
    pe_kv_cache *c;
    pe_err err;
    if (pe_kv_cache_init(&c, w, 1, N, &err)) fail_msg("%s", err.msg);
    for (int64_t t0 = 0, n = P; t0 < N; t0 += n, n = 1) { /* a prefill of P tokens, then one at a time */
        if (pe_kv_cache_append(c, &L.w, k + t0 * Ckv, v + t0 * Ckv, n, NULL, 0, NULL, &err) ||
            pe_kv_cache_attend(c, &L.w, q + t0 * C, n, NULL, o1 + t0 * C, &err))
            fail_msg("%s at %lld: %s", settings, (long long)t0, err.msg);
        const int64_t Tk = t0 + n;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < Tk; j++) mask[i * Tk + j] = (uint8_t)visible(1, 8, 0, n, Tk, i, j);
        pe_positions at = {.mask = mask};
        if (pe_attention_forward_qkv(m, &L.w, q + t0 * C, k, v, 1, n, Tk, &at, o2 + t0 * C, NULL, NULL, &err))
            fail_msg("%s", err.msg);
    }
    assert_int_equal(pe_test_compare(settings, o1, o2, N * C, 1e-5, 1e-4), 0);
    pe_kv_cache_free(c);
    free(q), free(k), free(v), free(o1), free(o2), free(mask);
    pe_layer_free(&L);
    pe_attention_free(w), pe_attention_free(m);
}

static void refusals(void **state) {
    (void)state;
    static const char *const bad[] = {"4", "1,2,3", "-2,0", "0,-5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pe_config cfg;
        pe_err err;
        pe_attention *att = NULL;
        char s[64];
        snprintf(s, sizeof s, "method=rope heads=2 window=%s", bad[i]);
        assert_int_equal(pe_test_config(s, &cfg, &err), PE_OK);
        assert_int_equal(pe_attention_init(&att, &cfg, 16, &err), PE_EKEY);
        assert_non_null(strstr(err.msg, "key 'window'"));
    }
    /* a window that leaves a query no key is the usual error: more queries than keys, not causal */
    pe_attention *att = pe_test_layer("method=none heads=2 window=0,0", 16);
    float q[3 * 16] = {0}, k[2 * 16] = {0}, o[3 * 16];
    pe_err err;
    assert_int_equal(pe_attention_forward_qkv(att, NULL, q, k, k, 1, 3, 2, NULL, o, NULL, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "every key masked"));
    pe_attention_free(att);
}

int main(void) {
    struct CMUnitTest tests[sizeof METHODS / sizeof METHODS[0] + 4];
    int n = 0;
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        tests[n++] = (struct CMUnitTest){METHODS[i], window_is_its_mask, NULL, NULL, (void *)METHODS[i]};
    static const char *const cached[] = {"method=rope", "method=alibi", "method=xpos xpos_scale_base=64"};
    for (size_t i = 0; i < 3; i++)
        tests[n++] = (struct CMUnitTest){cached[i], cache_with_window, NULL, NULL, (void *)cached[i]};
    tests[n++] = (struct CMUnitTest){"refusals", refusals, NULL, NULL, NULL};
    return _cmocka_run_group_tests("window", tests, (size_t)n, NULL, NULL);
}
