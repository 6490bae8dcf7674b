/* The KV cache (pe_kv_cache_*): decoding equals the layer over the whole prefix, and cached
 * keys re-rotated equal keys rotated from scratch.
 *   - every method with a cache, causal, two rows of different lengths (lens), gapped
 *     positions, grouped-query attention where the method has it, a prefill chunk then single
 *     tokens: each step's y equals the rows of pe_attention_layer_forward over the row's whole
 *     prefix, on the decode path and on the reference path; dynamic NTK and LongRoPE cross
 *     their switch and xPos re-centres on the way;
 *   - re-rotation at positions near 10^6 (dynamic NTK as the length grows, the LongRoPE switch,
 *     context shifts of rope and xpos) equals rotation from scratch to float32 rounding;
 *   - misuse: a full cache, an empty one, complex, data_alibi, floater's shift, bad lengths.
 * Nothing here is timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* A layer of settings (heads 4, kv_heads 2 where the method has grouped-query attention). */
static pe_attention *layer(const char *settings, int64_t C, int causal) {
    char full[512];
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    for (int gqa = 1; gqa >= 0 && !att; gqa--) {
        snprintf(full, sizeof full, "%s heads=4 causal=%s%s", settings, causal ? "true" : "false", gqa ? " kv_heads=2" : "");
        if (pe_test_config(full, &cfg, &err) || pe_attention_init(&att, &cfg, C, &err)) att = NULL;
    }
    if (!att) fail_msg("%s: %s", settings, err.msg);
    return att;
}

/* Every method with a cache; settings whose switches the positions below (up to ~40) cross. */
static const char *const METHODS[] = {
    "method=none", "method=sinusoidal", "method=learned", "method=floater", "method=shaw max_rel=3", "method=xl",
    "method=t5 num_buckets=8 max_distance=12", "method=tupe num_buckets=8 max_distance=12",
    "method=deberta position_buckets=4 max_relative_positions=8 share_att_key=false", "method=rope",
    "method=rope rope_layout=interleaved rotary_dim=4", "method=rope rotary_dim=2 rotary_offset=2",
    "method=rope llama_4_scaling_beta=0.2 original_max_position_embeddings=4",
    "method=rope rope_scaling=proportional rope_proportion=0.5 rope_base=1000000",
    "method=rope attention_sinks=true", "method=alibi attention_sinks=true",
    "method=rope rope_values=true rope_layout=interleaved rotary_dim=2 rotary_offset=2",
    "method=rope rope_values=true rope_scaling=dynamic rope_factor=2 max_position_embeddings=8",
    "method=none attn_temperature_tuning=true floor_scale=3 attn_scale=0.5",
    "method=none head_scale=true head_scale_init=0.7",
    "method=rope rope_scaling=longrope original_max_position_embeddings=16 max_position_embeddings=64",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=8",
    "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8", "method=huang1 max_rel=3",
    "method=huang3 max_rel=3", "method=huang4 max_rel=3", "method=alibi", "method=xpos xpos_scale_base=8",
    "method=pope", "method=pope rotary_dim=3 rope_base=100",
    "method=kerple kerple=log", "method=fire fire_init_L=8", "method=fope", "method=fope fope_num_freq=1 kv_heads=2",
    "method=cope npos_max=4",
};

enum { NSTEP = 7 };
static const int64_t STEP0[NSTEP] = {4, 1, 1, 2, 1, 1, 1}; /* row 0: 11 tokens */
static const int64_t STEP1[NSTEP] = {3, 1, 0, 2, 1, 1, 0}; /* row 1: 8 tokens */

static void decode_equals_layer(void **state) {
    const char *settings = *state;
    const int64_t C = 16, B = 2, N0 = 11, N1 = 8, n[2] = {N0, N1};
    const int xl = strstr(settings, "method=xl") != NULL;
    for (int path = 0; path < 2; path++) {
        pe_attention *att = layer(settings, C, 1);
        pe_run_options run = {.path = path ? PE_PATH_REFERENCE : PE_PATH_FUSED};
        pe_attention_set_run_options(att, &run);
        pe_layer L;
        pe_err err;
        if (pe_layer_init(&L, att, 64, 9, &err)) fail_msg("%s", err.msg);
        pe_rng rng = {31};
        float *x[2] = {pe_test_uniform(N0 * C, &rng), pe_test_uniform(N1 * C, &rng)};
        int64_t pos[2][11];
        for (int b = 0; b < 2; b++)
            for (int64_t t = 0, p = 2 * b; t < n[b]; t++, p += xl ? 1 : 1 + (t * 7 + b) % 4) pos[b][t] = xl ? t : p;
        /* dynamic NTK and LongRoPE choose frequencies from the whole batch's positions: only row 0 */
        const int one_row = strstr(settings, "dynamic") || strstr(settings, "longrope");
        float *want = malloc(sizeof(float) * N0 * C);
        pe_kv_cache *kv;
        if (pe_kv_cache_init(&kv, att, B, 32, &err)) fail_msg("%s: %s", settings, err.msg);
        int64_t done[2] = {0, 0}, bad = 0;
        for (int s = 0; s < NSTEP; s++) {
            const int64_t lens[2] = {STEP0[s], one_row ? 0 : STEP1[s]}, T = STEP0[s];
            float *xs = calloc((size_t)(B * T * C), sizeof(float)), *y = malloc(sizeof(float) * B * T * C);
            int64_t ps[2 * 4] = {0};
            for (int b = 0; b < 2; b++)
                for (int64_t t = 0; t < lens[b]; t++) {
                    memcpy(xs + (b * T + t) * C, x[b] + (done[b] + t) * C, sizeof(float) * C);
                    ps[b * T + t] = pos[b][done[b] + t];
                }
            if (pe_kv_cache_layer_forward(kv, &L.w, xs, T, ps, 1, lens, y, &err))
                fail_msg("%s: step %d: %s", settings, s, err.msg);
            for (int b = 0; b < 2; b++) {
                /* the layer over the row's prefix up to these tokens */
                const int64_t np = done[b] + lens[b];
                if (lens[b] && pe_attention_forward(att, &L.w, x[b], NULL, 0, pos[b], 0, 1, np, want, NULL, NULL, &err))
                    fail_msg("%s: layer: %s", settings, err.msg);
                char what[64];
                snprintf(what, sizeof what, "y step %d row %d path %d", s, b, path);
                double sc = fmax(1.0, pe_test_maxabs(want, np * C));
                if (lens[b]) bad += pe_test_compare(what, y + b * T * C, want + done[b] * C, lens[b] * C, 3e-5 * sc, 1e-4);
                for (int64_t e = lens[b] * C; e < T * C; e++) /* padding: o = 0, y = bo */
                    bad += y[b * T * C + e] != (L.w.bo ? L.w.bo[e % C] : 0.0f);
                done[b] += lens[b];
            }
            free(xs), free(y);
        }
        assert_int_equal(bad, 0);
        assert_int_equal(pe_kv_cache_length(kv, 0), N0);
        assert_int_equal(pe_kv_cache_length(kv, 1), one_row ? 0 : N1);
        pe_kv_cache_free(kv);
        pe_layer_free(&L);
        pe_attention_free(att);
        free(x[0]), free(x[1]), free(want);
    }
}

/* ---- re-rotation ---------------------------------------------------------------------------- */

/* The cache's keys of row 0 against raw keys rotated from scratch at the cache's positions,
 * with the range [lo, hi] of a fresh attention over them: within a few float32 roundings. */
static int64_t keys_from_scratch(pe_kv_cache *kv, pe_attention *att, const pe_weights *w, const float *raw,
                                 const int64_t *raw_pos, int64_t lo, int64_t hi, const char *what) {
    const float *k;
    const int64_t *pos;
    int64_t n;
    pe_err err;
    if (pe_kv_cache_view(kv, 0, &k, NULL, &pos, &n, &err)) fail_msg("%s", err.msg);
    const int64_t Ckv = pe_attention_config(att)->kv_heads * pe_attention_head_dim(att);
    float *want = malloc(sizeof(float) * n * Ckv);
    for (int64_t u = 0; u < n; u++) { /* raw key of the cached position */
        int64_t r = 0;
        while (raw_pos[r] != pos[u]) r++;
        memcpy(want + u * Ckv, raw + r * Ckv, sizeof(float) * Ckv);
    }
    if (pe_attention_rotate(att, w, want, n, Ckv, Ckv / pe_attention_head_dim(att), pos, lo, hi, PE_ROTATE_K, 0, &err))
        fail_msg("%s: %s", what, err.msg);
    const double sc = pe_test_maxabs(want, n * Ckv);
    int64_t bad = pe_test_compare(what, k, want, n * Ckv, 6e-7 * sc, 0);
    free(want);
    return bad;
}

/* rope with dynamic NTK (frequencies change at every token past max_position_embeddings) and
 * LongRoPE (short to long factors): keys cached near position 10^6 or before the switch, then
 * more appended, then a context shift; the cached keys equal keys rotated from scratch (rope:
 * the frame is the frequencies, which a fresh attention over the same positions chooses), and
 * a query attending to the cache equals the projected form over the raw keys (xpos too, whose
 * frame, the centre of its scale, is the cache's own). */
static void rerotation_is_exact(void **state) {
    (void)state;
    static const struct {
        const char *settings;
        int64_t p0;                 /* the first position */
        int64_t keep, drop, delta;  /* the shift after the appends (drop 0: none) */
    } CASES[] = {
        {"method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=4096", 999990, 0, 0, 0},
        {"method=rope rope_scaling=longrope original_max_position_embeddings=1000000 max_position_embeddings=4000000",
         999990, 0, 0, 0},
        {"method=rope", 999990, 2, 5, 5},
        {"method=rope rotary_dim=2 rotary_offset=2 rope_layout=interleaved", 999990, 2, 5, 5},
        {"method=rope rope_values=true rotary_dim=8 rotary_offset=8 rope_layout=interleaved", 999990, 2, 5, 5},
        {"method=rope rope_values=true rope_scaling=dynamic rope_factor=2 max_position_embeddings=4096", 999990, 3, 4, 700},
        {"method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=4096", 999990, 3, 4, 700},
        {"method=rope rope_scaling=longrope original_max_position_embeddings=1000000 max_position_embeddings=4000000",
         999990, 0, 2, 900},
        {"method=rope rope_scaling=longrope original_max_position_embeddings=1000000 max_position_embeddings=4000000",
         999990, 1, 0, -20},
        {"method=xpos xpos_scale_base=512", 999990, 1, 3, 3},
        {"method=xpos xpos_scale_base=4", 100, 0, 2, 6},
    };
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        const int64_t C = 64, N = 16, Ckv = 32; /* heads 4, kv_heads 2, head_dim 16 */
        const int rope = strstr(CASES[ci].settings, "xpos") == NULL;
        pe_attention *att = layer(CASES[ci].settings, C, 1);
        pe_layer L;
        pe_err err;
        if (pe_layer_init(&L, att, 0, 3, &err)) fail_msg("%s", err.msg);
        if (strstr(CASES[ci].settings, "longrope")) /* long factors apart from the short ones */
            for (int64_t t = 0; t < 8; t++) ((float *)L.w.param[0])[t] = 1.0f + 0.1f * t, ((float *)L.w.param[1])[t] = 2.0f + 0.5f * t;
        pe_rng rng = {5};
        float *k = pe_test_uniform(N * Ckv, &rng), *v = pe_test_uniform(N * Ckv, &rng), *q = pe_test_uniform(C, &rng);
        int64_t pos[16];
        for (int64_t u = 0; u < N; u++) pos[u] = CASES[ci].p0 + u;
        pe_kv_cache *kv;
        if (pe_kv_cache_init(&kv, att, 1, 64, &err)) fail_msg("%s", err.msg);
        /* 10 tokens, then 6 one by one: the frame changes on the way */
        if (pe_kv_cache_append(kv, &L.w, k, v, 10, pos, 0, NULL, &err)) fail_msg("%s", err.msg);
        for (int64_t u = 10; u < N; u++)
            if (pe_kv_cache_append(kv, &L.w, k + u * Ckv, v + u * Ckv, 1, pos + u, 0, NULL, &err)) fail_msg("%s", err.msg);
        char what[200];
        int64_t bad = 0;
        if (rope) {
            snprintf(what, sizeof what, "appended keys (%s)", CASES[ci].settings);
            bad += keys_from_scratch(kv, att, &L.w, k, pos, pos[0], pos[N - 1], what);
        }
        const int64_t keep = CASES[ci].keep, drop = CASES[ci].drop, d = CASES[ci].delta;
        if (drop || d) {
            if (pe_kv_cache_shift(kv, &L.w, keep, drop, d, &err)) fail_msg("%s", err.msg);
            assert_int_equal(pe_kv_cache_length(kv, 0), N - drop);
        }
        /* the surviving keys at their new positions, and their range */
        int64_t raw_pos[16], n = 0, lo = INT64_MAX, hi = INT64_MIN;
        float *raw = malloc(sizeof(float) * N * Ckv), *rv = malloc(sizeof(float) * N * Ckv);
        for (int64_t u = 0; u < N; u++) {
            if (u >= keep && u < keep + drop) continue;
            raw_pos[n] = u < keep ? pos[u] : pos[u] - d;
            lo = raw_pos[n] < lo ? raw_pos[n] : lo, hi = raw_pos[n] > hi ? raw_pos[n] : hi;
            memcpy(raw + n * Ckv, k + u * Ckv, sizeof(float) * Ckv), memcpy(rv + n * Ckv, v + u * Ckv, sizeof(float) * Ckv);
            n++;
        }
        if (rope && (drop || d)) {
            snprintf(what, sizeof what, "shifted keys (%s)", CASES[ci].settings);
            bad += keys_from_scratch(kv, att, &L.w, raw, raw_pos, lo, hi, what);
        }
        /* one query at the last token's position against the cache and against the raw keys */
        float o1[64], o2[64];
        int64_t qp = raw_pos[n - 1];
        pe_positions at = {.pos = &qp}, at2 = {.pos = &qp, .key_pos = raw_pos};
        if (pe_kv_cache_attend(kv, &L.w, q, 1, &at, o1, &err) ||
            pe_attention_forward_qkv(att, &L.w, q, raw, rv, 1, 1, n, &at2, o2, NULL, NULL, &err))
            fail_msg("%s: %s", CASES[ci].settings, err.msg);
        snprintf(what, sizeof what, "o (%s)", CASES[ci].settings);
        bad += pe_test_compare(what, o1, o2, C, 3e-5 * fmax(1.0, pe_test_maxabs(o2, C)), 1e-4);
        assert_int_equal(bad, 0);
        pe_kv_cache_free(kv);
        pe_layer_free(&L);
        pe_attention_free(att);
        free(k), free(v), free(q), free(raw), free(rv);
    }
}

/* ---- misuse --------------------------------------------------------------------------------- */

static void misuse(void **state) {
    (void)state;
    const int64_t C = 8;
    pe_err err;
    pe_kv_cache *kv = NULL;
    float k[4 * 8] = {0}, v[4 * 8] = {0}, q[4 * 8] = {0}, o[4 * 8];
    pe_attention *cx = layer("method=complex", C, 1);
    assert_int_equal(pe_kv_cache_init(&kv, cx, 1, 8, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "complex-valued"));
    pe_attention_free(cx);
    pe_attention *da = layer("method=data_alibi", C, 1); /* its gates read every token's x */
    assert_int_equal(pe_kv_cache_init(&kv, da, 1, 8, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "layer input x"));
    assert_null(kv);
    pe_attention_free(da);

    pe_attention *att = layer("method=rope", C, 1);
    const int64_t Ckv = 4; /* kv_heads 2 of head_dim 2 */
    assert_int_equal(pe_kv_cache_init(&kv, att, 1, 0, &err), PE_EINVAL);
    if (pe_kv_cache_init(&kv, att, 1, 3, &err)) fail_msg("%s", err.msg);
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, 1, NULL, o, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    if (pe_kv_cache_append(kv, NULL, k, v, 2, NULL, 0, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(pe_kv_cache_append(kv, NULL, k, v, 2, NULL, 0, NULL, &err), PE_EINVAL); /* 2 + 2 > 3 */
    assert_non_null(strstr(err.msg, "kv_cache full"));
    assert_int_equal(pe_kv_cache_length(kv, 0), 2); /* nothing appended */
    const int64_t lens[1] = {3};
    assert_int_equal(pe_kv_cache_append(kv, NULL, k, v, 2, NULL, 0, lens, &err), PE_EINVAL);
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, 3, NULL, o, &err), PE_EINVAL); /* 3 queries, 2 tokens */
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, 2, NULL, o, &err), PE_OK);
    assert_int_equal(pe_kv_cache_shift(kv, NULL, 1, 2, 2, &err), PE_EINVAL); /* 1 + 2 > 2 */
    pe_positions kp = {.key_pos = (int64_t[]){0, 1}};
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, 1, &kp, o, &err), PE_EINVAL);
    (void)Ckv;
    pe_kv_cache_free(kv);
    pe_attention_free(att);

    pe_attention *fl = layer("method=floater", C, 1);
    pe_layer L;
    if (pe_layer_init(&L, fl, 0, 1, &err)) fail_msg("%s", err.msg);
    if (pe_kv_cache_init(&kv, fl, 1, 8, &err)) fail_msg("%s", err.msg);
    float kf[2 * 8] = {0}, vf[2 * 8] = {0};
    if (pe_kv_cache_append(kv, &L.w, kf, vf, 2, NULL, 0, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(pe_kv_cache_shift(kv, &L.w, 0, 1, 1, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "appended again"));
    assert_int_equal(pe_kv_cache_shift(kv, &L.w, 0, 1, 0, &err), PE_OK); /* dropping alone is fine */
    assert_int_equal(pe_kv_cache_length(kv, 0), 1);
    pe_kv_cache_free(kv);
    pe_layer_free(&L);
    pe_attention_free(fl);
}

/* Integers a caller may give (issue 32's reproducers): each call fails, changes nothing, and the
 * cache still answers as before. Was: keep = n_drop = INT64_MAX overflowed the length check
 * (heap corruption), n = 2^62 with lens of 1 wrapped B n (a segfault), positions past 2^53 were
 * taken and only the next attend failed. */
static void hostile_integers(void **state) {
    (void)state;
    const int64_t C = 8;
    pe_err err;
    pe_kv_cache *kv = NULL;
    float k[4 * 8] = {0}, v[4 * 8] = {0}, q[4 * 8] = {0}, o1[4 * 8], o2[4 * 8];
    for (int e = 0; e < 4 * 8; e++) k[e] = 0.1f * (float)(e % 7), v[e] = 0.2f * (float)(e % 5), q[e] = 0.05f * (float)e;
    pe_attention *att = layer("method=rope", C, 1);
    if (pe_kv_cache_init(&kv, att, 1, 8, &err)) fail_msg("%s", err.msg);
    if (pe_kv_cache_append(kv, NULL, k, v, 3, NULL, 0, NULL, &err)) fail_msg("%s", err.msg);
    if (pe_kv_cache_attend(kv, NULL, q, 1, NULL, o1, &err)) fail_msg("%s", err.msg);
    const int64_t big[][3] = {{INT64_MAX, INT64_MAX, 0}, {1, INT64_MAX, 0}, {INT64_MAX, 1, 0},
                              {0, 1, INT64_MIN}, {0, 1, INT64_MAX}, {0, 1, -((int64_t)1 << 53) - 5}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        assert_int_not_equal(pe_kv_cache_shift(kv, NULL, big[i][0], big[i][1], big[i][2], &err), PE_OK);
        assert_int_equal(pe_kv_cache_length(kv, 0), 3);
    }
    const int64_t one[1] = {1}, far[1] = {INT64_MAX}, past[1] = {((int64_t)1 << 53) + 1};
    assert_int_equal(pe_kv_cache_append(kv, NULL, k, v, (int64_t)1 << 62, NULL, 0, one, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "overflow"));
    assert_int_not_equal(pe_kv_cache_append(kv, NULL, k, v, 1, far, 0, NULL, &err), PE_OK);
    assert_int_not_equal(pe_kv_cache_append(kv, NULL, k, v, 1, past, 0, NULL, &err), PE_OK);
    assert_non_null(strstr(err.msg, "2^53"));
    assert_int_equal(pe_kv_cache_attend(kv, NULL, q, (int64_t)1 << 62, NULL, o2, &err), PE_EINVAL);
    assert_int_equal(pe_kv_cache_length(kv, 0), 3);
    if (pe_kv_cache_attend(kv, NULL, q, 1, NULL, o2, &err)) fail_msg("after the refusals: %s", err.msg);
    assert_memory_equal(o1, o2, sizeof(float) * C);
    pe_kv_cache_free(kv);
    pe_attention_free(att);
}

/* What fuzz_cache found: a failing call changes nothing.
 *   - a shift with keep = INT64_MAX when a row is empty (the other rows hold tokens) is a status,
 *     not a signed overflow in the empty row's loop;
 *   - a shift whose new frame the method cannot make (xPos's scale past float range) is refused
 *     before a token moves;
 *   - pe_kv_cache_layer_forward whose attend fails (learned: a position past pos_table) takes its
 *     tokens back out. */
static void failed_calls_change_nothing(void **state) {
    (void)state;
    const int64_t C = 8;
    pe_err err;
    float k[2 * 8 * 8], v[2 * 8 * 8], x[2 * 8], y[2 * 8];
    for (int e = 0; e < 2 * 8 * 8; e++) k[e] = 0.1f * (float)(e % 7), v[e] = 0.2f * (float)(e % 5);
    for (int e = 0; e < 2 * 8; e++) x[e] = 0.03f * (float)e;
    pe_kv_cache *kv;

    pe_attention *att = layer("method=rope", C, 1);
    if (pe_kv_cache_init(&kv, att, 2, 8, &err)) fail_msg("%s", err.msg);
    const int64_t lens[2] = {3, 0};
    if (pe_kv_cache_append(kv, NULL, k, v, 3, NULL, 0, lens, &err)) fail_msg("%s", err.msg);
    assert_int_not_equal(pe_kv_cache_shift(kv, NULL, INT64_MAX, 1, 0, &err), PE_OK);
    assert_int_not_equal(pe_kv_cache_shift(kv, NULL, 1, INT64_MAX, 0, &err), PE_OK);
    assert_int_equal(pe_kv_cache_length(kv, 0), 3);
    pe_kv_cache_free(kv);
    pe_attention_free(att);

    att = layer("method=xpos xpos_scale_base=8", C, 1);
    if (pe_kv_cache_init(&kv, att, 1, 8, &err)) fail_msg("%s", err.msg);
    if (pe_kv_cache_append(kv, NULL, k, v, 6, NULL, 0, NULL, &err)) fail_msg("%s", err.msg);
    const int64_t *pos;
    int64_t n, before[6];
    if (pe_kv_cache_view(kv, 0, NULL, NULL, &pos, &n, &err)) fail_msg("%s", err.msg);
    memcpy(before, pos, sizeof before);
    assert_int_not_equal(pe_kv_cache_shift(kv, NULL, 3, 0, (int64_t)1 << 20, &err), PE_OK);
    assert_non_null(strstr(err.msg, "xpos scale"));
    if (pe_kv_cache_view(kv, 0, NULL, NULL, &pos, &n, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n, 6);
    assert_memory_equal(pos, before, sizeof before);
    pe_kv_cache_free(kv);
    pe_attention_free(att);

    /* keys below position 0 under rope's query scaling (the scaling is the queries'; fuzz_cache:
     * the keys' context refused them, and a shift then failed after moving its tokens) */
    att = layer("method=rope llama_4_scaling_beta=0.2 original_max_position_embeddings=4", C, 1);
    if (pe_kv_cache_init(&kv, att, 1, 8, &err)) fail_msg("%s", err.msg);
    const int64_t below[3] = {-1, 0, 1};
    if (pe_kv_cache_append(kv, NULL, k, v, 3, below, 0, NULL, &err)) fail_msg("%s", err.msg);
    if (pe_kv_cache_shift(kv, NULL, 0, 1, 5, &err)) fail_msg("%s", err.msg);
    if (pe_kv_cache_view(kv, 0, NULL, NULL, &pos, &n, &err)) fail_msg("%s", err.msg);
    assert_true(n == 2 && pos[0] == -5 && pos[1] == -4);
    pe_kv_cache_free(kv);
    pe_attention_free(att);

    att = layer("method=learned", C, 1);
    pe_layer L;
    if (pe_layer_init(&L, att, 4, 3, &err)) fail_msg("%s", err.msg); /* pos_table of 4 rows */
    if (pe_kv_cache_init(&kv, att, 1, 8, &err)) fail_msg("%s", err.msg);
    const int64_t p3[2] = {2, 3}, p9[1] = {9};
    if (pe_kv_cache_layer_forward(kv, &L.w, x, 2, p3, 0, NULL, y, &err)) fail_msg("%s", err.msg);
    assert_int_not_equal(pe_kv_cache_layer_forward(kv, &L.w, x, 1, p9, 0, NULL, y, &err), PE_OK);
    assert_int_equal(pe_kv_cache_length(kv, 0), 2);
    pe_kv_cache_free(kv);
    pe_layer_free(&L);
    pe_attention_free(att);
}

int main(void) {
    enum { NM = sizeof METHODS / sizeof METHODS[0] };
    struct CMUnitTest tests[NM + 4];
    int n = 0;
    for (int i = 0; i < NM; i++)
        tests[n++] = (struct CMUnitTest){METHODS[i], decode_equals_layer, NULL, NULL, (void *)METHODS[i]};
    tests[n++] = (struct CMUnitTest){"rerotation", rerotation_is_exact, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"misuse", misuse, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"hostile_integers", hostile_integers, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"failed_calls_change_nothing", failed_calls_change_nothing, NULL, NULL, NULL};
    return _cmocka_run_group_tests("cache", tests, n, NULL, NULL);
}
