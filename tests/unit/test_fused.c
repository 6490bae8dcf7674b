/* The fused attention path against the reference path (its oracle): forward y and every
 * gradient (dx, the projections, the method's tensors) on random layers for every method the
 * fused path takes, over shapes that exercise the tiling: T = 1, T not a multiple of the tile,
 * several tiles, odd heads, grouped-query attention, head dims that are not a multiple of the
 * vector width, batches with gapped positions; causal and not; each instruction set the CPU
 * runs and several thread counts, which give the same bits. Asking for scores selects the
 * reference path.
 * Also: which methods are eligible, the denormal switches, and that the SIMD RoPE rotation is
 * bit-identical to the scalar loop. Nothing here is timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/fused.h"
#include "harness.h"

typedef struct shape {
    const char *name;
    int64_t B, T, H, D, kv; /* kv 0: = H */
    int causal, gapped;
} shape;

static const shape SHAPES[] = {
    {"t1", 1, 1, 2, 8, 0, 1, 0},
    {"h3_causal_gapped_batch", 2, 70, 3, 8, 0, 1, 1},
    {"gqa_d20_3tiles", 1, 130, 4, 20, 2, 0, 0},
    {"tile_d64_causal", 1, 64, 2, 64, 0, 1, 0},
    {"h1_gapped_batch", 2, 33, 1, 16, 0, 0, 1},
    {"gqa_causal_d24", 2, 97, 6, 24, 3, 1, 1},
    {"far_both_sides", 1, 260, 2, 8, 0, 0, 0}, /* a query block with far key tiles left and right */
};

/* Every method the fused path takes, with the settings that reach each regime; "-NAME"
 * drops an optional tensor (alibi's slopes: the reference's default). */
static const char *const SETTINGS[] = {
    "method=none",
    "method=rope",
    "method=rope rope_layout=interleaved rope_base=500",
    "method=rope rotary_dim=6",
    "method=rope rope_scaling=linear rope_factor=2",
    "method=rope rope_scaling=ntk rope_factor=3",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=16",
    "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8",
    "method=rope rope_scaling=llama3 rope_factor=8 original_max_position_embeddings=16",
    "method=rope rope_scaling=longrope original_max_position_embeddings=4 max_position_embeddings=16 rope_layout=interleaved",
    "method=xpos xpos_scale_base=64",
    "method=alibi -alibi_slopes",
    "method=alibi",
    "method=t5 num_buckets=8 max_distance=12",
    "method=t5",
    "method=kerple kerple=log",
    "method=kerple kerple=power",
    "method=fire fire_init_L=8",
    "method=sinusoidal",
    "method=learned",
    "method=floater",
    "method=shaw",
    "method=shaw max_rel=3",
    "method=shaw max_rel=0",
    "method=huang1 max_rel=5",
    "method=huang2 max_rel=5",
    "method=huang2",
    "method=huang3 max_rel=3",
    "method=huang3 max_rel=0",
    "method=huang3",
    "method=huang4 max_rel=4",
    "method=huang4",
    "method=fope",
    "method=fope fope_num_freq=2 fope_sep_head=false",
    "method=pope",
    "method=pope rotary_dim=5 rope_base=100 pope_bias_uniform_init=true",
    "method=data_alibi",
    "method=data_alibi post_log_scale=2.5 bias_init=0",
    "method=rope rotary_dim=4 rotary_offset=2",
    "method=rope llama_4_scaling_beta=0.1 original_max_position_embeddings=8",
    "method=rope rope_scaling=proportional rope_proportion=0.25 rope_base=1000000",
    "method=rope attention_sinks=true",
    "method=rope rope_values=true rope_layout=interleaved rotary_dim=2 rotary_offset=2 attention_sinks=true",
    "method=rope rope_values=true rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8",
    "method=alibi attention_sinks=true",
    "method=pope attention_sinks=true",
    "method=none attn_temperature_tuning=true floor_scale=3 attn_scale=0.5",
    "method=none head_scale=true head_scale_init=0.7",
};

/* Creates the layer, or NULL when this configuration is not allowed (grouped-query attention
 * for a method without it). */
static pe_attention *make_layer(const char *settings, const shape *s, char *drop, size_t ndrop) {
    char buf[512], full[640];
    snprintf(buf, sizeof buf, "%s", settings);
    drop[0] = 0;
    char *minus = strstr(buf, " -");
    if (minus) snprintf(drop, ndrop, "%s", minus + 2), *minus = 0;
    snprintf(full, sizeof full, "%s heads=%lld causal=%s", buf, (long long)s->H, s->causal ? "true" : "false");
    if (s->kv) snprintf(full + strlen(full), sizeof full - strlen(full), " kv_heads=%lld", (long long)s->kv);
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    if (pe_test_config(full, &cfg, &err) || pe_attention_init(&att, &cfg, s->H * s->D, &err)) {
        if (s->kv) return NULL;
        fail_msg("layer '%s': %s", settings, err.msg);
    }
    return att;
}

typedef struct result {
    float *y, *dx, *grads; /* grads: the layer's gradient block */
} result;

/* One forward and backward; scores != NULL selects the reference path. */
static void run(pe_attention *att, pe_layer *L, const shape *s, const float *x, const int64_t *pos,
                const float *dy, float *scores, result *r) {
    int64_t n = s->B * s->T * L->C;
    pe_err err;
    r->y = malloc(sizeof(float) * n), r->dx = malloc(sizeof(float) * n);
    r->grads = malloc(sizeof(float) * L->n);
    pe_layer_zero_grad(L);
    if (pe_attention_forward(att, &L->w, x, NULL, 0, pos, 1, s->B, s->T, r->y, scores, NULL, &err))
        fail_msg("forward: %s", err.msg);
    if (pe_attention_backward(att, &L->w, dy, r->dx, &L->g, &err)) fail_msg("backward: %s", err.msg);
    memcpy(r->grads, L->block + L->n, sizeof(float) * L->n);
}

static void result_free(result *r) { free(r->y), free(r->dx), free(r->grads); }

/* Float32 sums in another order: an error relative to the tensor's scale, with a floor
 * relative to every gradient's (dbk is 0 but for rounding without a rotation), and to the
 * logits' (an error of one ulp of s_max in a logit moves p by that much relatively:
 * floater's random layers reach |s| ~ 500). */
static int64_t compare(const char *what, const float *got, const float *want, int64_t n, double cond,
                       double floor) {
    return pe_test_compare(what, got, want, n, cond * (2e-5 * pe_test_maxabs(want, n) + floor), cond * 1e-4);
}

/* The fused runs: (instruction set, threads, no_ftz, denormals) */
typedef struct variant {
    const char *isa;
    int threads, no_ftz, denormals;
} variant;
static const variant VARIANTS[] = {
    {NULL, 3, 0, 0}, {"generic", 1, 0, 0}, {"avx2", 2, 1, 0}, {NULL, 2, 0, 1},
};

/* The fused path gives the same bits on 1 and 3 threads (private gradients summed in a fixed order) */
static void same_bits_across_threads(pe_attention *att, pe_layer *L, const shape *s, const float *x, const int64_t *pos,
                                     const float *dy) {
    const int64_t n = s->B * s->T * L->C;
    result one, three;
    pe_attention_set_run_options(att, &(pe_run_options){.path = PE_PATH_FUSED, .threads = 1});
    run(att, L, s, x, pos, dy, NULL, &one);
    pe_attention_set_run_options(att, &(pe_run_options){.path = PE_PATH_FUSED, .threads = 3});
    run(att, L, s, x, pos, dy, NULL, &three);
    pe_attention_set_run_options(att, NULL);
    assert_memory_equal(one.y, three.y, sizeof(float) * n);
    assert_memory_equal(one.dx, three.dx, sizeof(float) * n);
    assert_memory_equal(one.grads, three.grads, sizeof(float) * L->n);
    result_free(&one), result_free(&three);
}

static void check_settings(const char *settings) {
    int checked = 0;
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
        const shape *s = &SHAPES[si];
        char drop[64];
        pe_attention *att = make_layer(settings, s, drop, sizeof drop);
        if (!att) continue;
        pe_layer L;
        pe_err err;
        if (pe_layer_init(&L, att, 512, 11 + si, &err)) fail_msg("%s", err.msg);
        for (int i = 0; i < L.np; i++)
            if (drop[0] && !strcmp(L.specs[i].name, drop)) L.w.param[i] = NULL, L.g.dparam[i] = NULL;
        const int64_t n = s->B * s->T * L.C, Tk = s->T;
        float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
        float *scores = malloc(sizeof(float) * s->B * s->H * s->T * Tk);
        int64_t *pos = malloc(sizeof(int64_t) * s->B * s->T);
        pe_rng rng = {1000 + si};
        for (int64_t i = 0; i < n; i++) x[i] = 2 * pe_rng_uniform(&rng) - 1, dy[i] = 2 * pe_rng_uniform(&rng) - 1;
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t t = 0, p = 5 * b; t < s->T; t++, p += s->gapped ? 1 + (t * 7 + b) % 4 : 1)
                pos[b * s->T + t] = p;

        result ref, fu;
        run(att, &L, s, x, pos, dy, scores, &ref);
        const double cond = fmax(1.0, pe_test_maxabs(scores, s->B * s->H * s->T * Tk) / 32);
        const double floor = 2e-6 * fmax(1.0, fmax(pe_test_maxabs(ref.grads, L.n), pe_test_maxabs(ref.dx, n)));
        const char *names[8 + PE_MAX_PARAMS];
        float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
        int64_t sizes[8 + PE_MAX_PARAMS];
        int nt = pe_layer_tensors(&L, names, data, grads, sizes);
        for (size_t vi = 0; vi < sizeof VARIANTS / sizeof VARIANTS[0]; vi++) {
            const variant *v = &VARIANTS[vi];
            if (v->isa && strcmp(pe__kernels_pick(v->isa)->name, v->isa)) continue; /* not on this CPU */
            pe_run_options opt = {.path = PE_PATH_FUSED, .threads = v->threads, .keep_mxcsr = v->no_ftz, .denormals = v->denormals};
            snprintf(opt.isa, sizeof opt.isa, "%s", v->isa ? v->isa : "");
            pe_attention_set_run_options(att, &opt);
            run(att, &L, s, x, pos, dy, NULL, &fu);
            pe_attention_set_run_options(att, NULL);
            char label[700];
            snprintf(label, sizeof label, "%s [%s, %s, %d threads%s%s]", settings, s->name,
                     pe__kernels_pick(v->isa)->name, v->threads, v->no_ftz ? ", no ftz" : "", v->denormals ? ", denormals" : "");
            int64_t bad = compare("y", fu.y, ref.y, n, cond, 2e-6) + compare("dx", fu.dx, ref.dx, n, cond, floor);
            for (int t = 0; t < nt; t++)
                if (grads[t]) { /* NULL: a dropped optional tensor */
                    char what[96];
                    snprintf(what, sizeof what, "d%s", names[t]);
                    int64_t at = grads[t] - (L.block + L.n);
                    bad += compare(what, fu.grads + at, ref.grads + at, sizes[t], cond, floor);
                }
            if (bad) fprintf(stderr, "  %s: %lld elements differ\n", label, (long long)bad);
            assert_int_equal(bad, 0);
            result_free(&fu);
            checked++;
        }
        same_bits_across_threads(att, &L, s, x, pos, dy);
        result_free(&ref);
        free(x), free(dy), free(scores), free(pos);
        pe_layer_free(&L);
        pe_attention_free(att);
    }
    assert_true(checked >= 2 * 5);
}

static void fused_matches_reference(void **state) { check_settings((const char *)*state); }

/* pope's lift splits its heads across threads only past a work threshold the shapes above stay
 * below: one layer large enough, grouped, the same bits for 1 and 3 threads */
static void lift_threads(void **state) {
    (void)state;
    const shape s = {"lift", 2, 150, 8, 32, 4, 1, 1};
    char drop[64];
    pe_attention *att = make_layer("method=pope pope_bias_uniform_init=true", &s, drop, sizeof drop);
    pe_layer L;
    pe_err err;
    if (pe_layer_init(&L, att, 512, 7, &err)) fail_msg("%s", err.msg);
    const int64_t n = s.B * s.T * L.C;
    float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    int64_t *pos = malloc(sizeof(int64_t) * s.B * s.T);
    pe_rng rng = {77};
    for (int64_t i = 0; i < n; i++) x[i] = 2 * pe_rng_uniform(&rng) - 1, dy[i] = 2 * pe_rng_uniform(&rng) - 1;
    for (int64_t i = 0; i < s.B * s.T; i++) pos[i] = 3 * i;
    same_bits_across_threads(att, &L, &s, x, pos, dy);
    free(x), free(dy), free(pos);
    pe_layer_free(&L);
    pe_attention_free(att);
}

/* The methods the operator runs fused, and those it must not (per-(b, h) score hooks rather
 * than tile hooks, mask hooks, memory, complex-valued, or a bias
 * backward that gathers into state a finish hook reduces across heads; data_alibi's gathers by
 * head, which one work item owns): each method's own flag says so, and the flag agrees with its
 * hooks. PE_PATH_REFERENCE keeps one layer on the reference path while another runs fused. */
static void eligibility(void **state) {
    (void)state;
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        const pe__method *d = pe__method_get(m);
        int hooks_allow = !(d->flags & (PE__MEMORY | PE__COMPLEX)) && !d->mask && !d->walk_forward &&
                          !(d->flags & PE__SCORE_HEAD) &&
                          !(d->score_mod_backward && d->finish_backward);
        if (pe__fused_eligible(d) && !hooks_allow) fail_msg("%s is flagged fused but its hooks need the reference path", d->name);
    }
    static const char *const yes[] = {"none", "sinusoidal", "learned", "floater", "rope", "xpos", "alibi",
                                      "t5", "kerple", "fire", "shaw", "huang1", "huang2", "huang3", "huang4",
                                      "fope", "pope", "data_alibi"};
    static const char *const no[] = {"xl", "deberta", "tupe", "complex", "cope"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true(pe__fused_eligible(pe__method_get(pe_method_from_name(yes[i]))));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false(pe__fused_eligible(pe__method_get(pe_method_from_name(no[i]))));
    /* two layers, one forced to the reference path: each keeps its own (the fused one saves
     * no scores, so asking a fused layer for nothing and comparing both outputs suffices) */
    const int64_t C = 16, T = 70;
    pe_attention *a = pe_test_layer("method=rope heads=2 causal=true", C), *b = pe_test_layer("method=rope heads=2 causal=true", C);
    pe_layer L;
    pe_err err;
    if (pe_layer_init(&L, a, 16, 3, &err)) fail_msg("%s", err.msg);
    pe_attention_set_run_options(a, &(pe_run_options){.path = PE_PATH_FUSED});
    pe_attention_set_run_options(b, &(pe_run_options){.path = PE_PATH_REFERENCE, .isa = "generic", .threads = 1});
    float *x = calloc((size_t)(T * C), sizeof(float)), *ya = malloc(sizeof(float) * T * C), *yb = malloc(sizeof(float) * T * C);
    pe_rng rng = {5};
    for (int64_t i = 0; i < T * C; i++) x[i] = 2 * pe_rng_uniform(&rng) - 1;
    if (pe_attention_forward(a, &L.w, x, NULL, 0, NULL, 0, 1, T, ya, NULL, NULL, &err) ||
        pe_attention_forward(b, &L.w, x, NULL, 0, NULL, 0, 1, T, yb, NULL, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(pe_test_compare("y", ya, yb, T * C, 1e-5, 1e-4), 0);
    free(x), free(ya), free(yb);
    pe_layer_free(&L);
    pe_attention_free(a), pe_attention_free(b);
    /* PE_PATH_AUTO's cost model: short sequences on the T x T path, long ones fused, a decode
     * step of one query against many keys on the T x T path (a 64-row tile for one row), and
     * never the T x T path past its 2^24 scores */
    assert_false(pe__fused_cheaper(1, 8, 16, 16, 0, 64, pe__band_make(1, -1, -1)));
    assert_false(pe__fused_cheaper(1, 32, 32, 32, 0, 64, pe__band_make(0, -1, -1)));
    assert_true(pe__fused_cheaper(1, 8, 64, 64, 0, 64, pe__band_make(0, -1, -1)));
    assert_true(pe__fused_cheaper(4, 4, 64, 64, 0, 16, pe__band_make(1, -1, -1))); /* the trainer's lm layers */
    assert_true(pe__fused_cheaper(1, 8, 512, 512, 0, 64, pe__band_make(1, -1, -1)));
    assert_false(pe__fused_cheaper(1, 8, 1, 4096, 4095, 64, pe__band_make(1, -1, -1)));
    assert_true(pe__fused_cheaper(64, 32, 32, 8192, 8160, 64, pe__band_make(1, -1, -1)));
    /* the same through the public API (pe_attention_path): the model's pick, a forced path, the
     * scores only the reference path has, and a method the fused path does not take */
    pe_attention *r = pe_test_layer("method=rope heads=8 causal=true", 512), *x5 = pe_test_layer("method=xl heads=8", 512);
    assert_int_equal(pe_attention_path(r, 1, 16, 16, 0), PE_PATH_REFERENCE);
    assert_int_equal(pe_attention_path(r, 1, 512, 512, 0), PE_PATH_FUSED);
    assert_int_equal(pe_attention_path(r, 1, 512, 512, 1), PE_PATH_REFERENCE);
    assert_int_equal(pe_attention_path(x5, 1, 512, 512, 0), PE_PATH_REFERENCE);
    pe_attention_set_run_options(r, &(pe_run_options){.path = PE_PATH_FUSED});
    assert_int_equal(pe_attention_path(r, 1, 16, 16, 0), PE_PATH_FUSED);
    pe_attention_free(r), pe_attention_free(x5);
    /* the kernels' name: what the CPU runs, or the one asked for (an unterminated isa is read
     * to its size) */
    assert_string_equal(pe_run_kernels(&(pe_run_options){.isa = "generic"}), "generic");
    assert_string_equal(pe_run_kernels(NULL), pe__kernels_pick(NULL)->name);
    pe_run_options junk;
    memset(&junk, 'x', sizeof junk);
    assert_string_equal(pe_run_kernels(&junk), pe__kernels_pick(NULL)->name);
}

/* The scalar rotation the SIMD kernel replaced (rope.c before it), the oracle of bit identity. */
static void rope_scalar(float *x, int64_t n, int64_t ld, int64_t nh, int64_t D, int64_t rd, int layout,
                        const float *cs, float sin_sign) {
    int64_t half = rd / 2, stride = layout == PE_ROPE_HALF ? 1 : 2, step = layout == PE_ROPE_HALF ? half : 1;
    for (int64_t i = 0; i < n; i++) {
        const float *c = cs + i * half * 2;
        for (int64_t h = 0; h < nh; h++) {
            float *xh = x + i * ld + h * D;
            for (int64_t t = 0; t < half; t++) {
                float cs_ = c[2 * t], sn = sin_sign * c[2 * t + 1];
                float *a = xh + t * stride, *b = a + step;
                float x1 = *a, x2 = *b;
                *a = x1 * cs_ - x2 * sn;
                *b = x2 * cs_ + x1 * sn;
            }
        }
    }
}

static void rope_bit_identical(void **state) {
    (void)state;
    const char *isas[] = {"generic", "avx2", "avx512"};
    const int64_t Ds[] = {40, 128, 6, 1100, 16, 8}; /* 16, 8: a head's rotated slice is one vector of avx512, avx2 */
    for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++) {
        const int64_t D = Ds[di], nh = 3, n = 300, ld = nh * D + 5;
        const int64_t rds[] = {D, D - 2, 2};
        for (size_t ri = 0; ri < 3; ri++) {
            const int64_t rd = rds[ri], half = rd / 2;
            if (rd < 2) continue;
            float *x = malloc(sizeof(float) * n * ld), *want = malloc(sizeof(float) * n * ld);
            float *got = malloc(sizeof(float) * n * ld), *cs = malloc(sizeof(float) * n * half * 2);
            pe_rng rng = {(uint64_t)(7 + di * 3 + ri)};
            for (int64_t i = 0; i < n * ld; i++) x[i] = pe_rng_normal(&rng);
            for (int64_t i = 0; i < n * half; i++) {
                double a = 1000.0 * pe_rng_uniform(&rng);
                cs[2 * i] = (float)(0.9 * cos(a)), cs[2 * i + 1] = (float)(0.9 * sin(a));
            }
            for (int layout = 0; layout < 2; layout++)
                for (int sg = -1; sg <= 1; sg += 2)
                    for (size_t k = 0; k < 3; k++) {
                        if (strcmp(pe__kernels_pick(isas[k])->name, isas[k])) continue;
                        memcpy(want, x, sizeof(float) * n * ld);
                        memcpy(got, x, sizeof(float) * n * ld);
                        rope_scalar(want, n, ld, nh, D, rd, layout, cs, (float)sg);
                        pe_run_options opt = {0};
                        snprintf(opt.isa, sizeof opt.isa, "%s", isas[k]);
                        pe__rope_rotate(&opt, got, n, ld, nh, D, rd, layout, cs, (float)sg);
                        if (memcmp(got, want, sizeof(float) * n * ld))
                            fail_msg("rope %s D=%lld rd=%lld layout %d sign %d differs", isas[k], (long long)D,
                                     (long long)rd, layout, sg);
                    }
            free(x), free(want), free(got), free(cs);
        }
    }
}

/* The kernels' row softmax (the reference executor's) against pe__softmax_forward with libm's
 * expf: within a few ulps for rows of every length around the vector widths, masked entries
 * exactly 0, rows with every entry masked all 0, a NaN or +inf anywhere a row of NaN, a sink's
 * share left out of the row; and the same rules on every instruction set. */
static void softmax_kernel(void **state) {
    (void)state;
    const char *isas[] = {"generic", "avx2", "avx512"};
    enum { N = 5, M = 70 };
    float s[N * M], want[N * M], got[N * M];
    pe_rng rng = {11};
    for (size_t k = 0; k < 3; k++) {
        const pe__kernels *K = pe__kernels_pick(isas[k]);
        if (strcmp(K->name, isas[k])) continue;
        for (int64_t m = 1; m <= M; m++)
            for (int sink_on = 0; sink_on < 2; sink_on++) {
                for (int64_t e = 0; e < N * m; e++) s[e] = 4.0f * pe_rng_normal(&rng);
                for (int64_t e = 0; e < N * m; e += 3) s[e] = -INFINITY; /* masked */
                for (int64_t j = 0; j < m; j++) s[2 * m + j] = -INFINITY; /* row 2: all masked */
                s[3 * m + m / 2] = NAN;                                     /* row 3: a NaN */
                s[4 * m + m - 1] = INFINITY;                                /* row 4: +inf */
                const float sink = sink_on ? 1.5f : -INFINITY;
                pe__softmax_forward(s, want, N, m, sink);
                K->softmax(s, got, N, m, sink, -104.0f);
                for (int64_t e = 0; e < N * m; e++) {
                    const int64_t row = e / m;
                    if (row == 2) assert_true(got[e] == 0.0f);
                    else if (row >= 3) assert_true(isnan(got[e]));
                    else if (s[e] == -INFINITY) assert_true(got[e] == 0.0f);
                    else if (fabsf(got[e] - want[e]) > 4e-7f * want[e] + 1e-30f)
                        fail_msg("%s m=%lld sink %d: p[%lld] %.9g, libm's %.9g", isas[k], (long long)m, sink_on,
                                 (long long)e, got[e], want[e]);
                }
            }
    }
}

/* The kernels' vector maths against libm in double: sin and cos within 4e-16 over angles a
 * table meets (positions to 10^6 times frequencies to 1, the quadrants' edges, tiny, negative),
 * libm's own past 2^30 and for an infinity or a NaN; softplus and sigmoid within 6 2^-24 of the
 * values in double (relative; 2 denormal steps below 1e-38) from -110 (gradual underflow) to 40
 * (past the threshold: x itself), NaN and the infinities as PyTorch's; every length around the
 * vector widths, every ISA. */
static void vmath_kernels(void **state) {
    (void)state;
    const char *isas[] = {"generic", "avx2", "avx512"};
    enum { N = 4099 };
    double *x = malloc(sizeof(double) * N), *s = malloc(sizeof(double) * N), *c = malloc(sizeof(double) * N);
    float *f = malloc(sizeof(float) * N), *sp = malloc(sizeof(float) * N), *sg = malloc(sizeof(float) * N);
    pe_rng rng = {5};
    for (int64_t i = 0; i < N; i++) {
        const int kind = (int)(i % 5);
        const double u = pe_rng_uniform(&rng);
        x[i] = kind == 0 ? (double)(int64_t)(1e6 * u) * pow(10000.0, -u)     /* a table's angle */
               : kind == 1 ? (double)(i % 64 - 32) * 0x1.921fb54442d18p+0 + (u - 0.5) * 1e-9 /* near k pi/2 */
               : kind == 2 ? (u - 0.5) * 1e-12 : kind == 3 ? -100.0 * u : (u - 0.5) * 0x1p31;
        f[i] = (float)(150.0 * u - 110.0);
    }
    x[7] = INFINITY, x[8] = -INFINITY, x[9] = NAN, x[10] = 0x1p30, x[11] = -0x1p30 - 1;
    f[7] = INFINITY, f[8] = -INFINITY, f[9] = NAN, f[10] = 20.0f, f[11] = 20.000002f, f[12] = 0.0f, f[13] = -0.0f;
    for (size_t k = 0; k < 3; k++) {
        const pe__kernels *K = pe__kernels_pick(isas[k]);
        if (strcmp(K->name, isas[k])) continue;
        for (int64_t n = N - 40; n <= N; n += 13) {
            K->sincos(x, s, c, n);
            K->softplus(f, sp, sg, n);
            for (int64_t i = 0; i < n; i++) {
                const double ws = sin(x[i]), wc = cos(x[i]);
                if (isnan(ws) ? !isnan(s[i]) || !isnan(c[i]) : fabs(s[i] - ws) > 4e-16 || fabs(c[i] - wc) > 4e-16)
                    fail_msg("%s sincos(%.17g): %.17g %.17g, libm's %.17g %.17g", isas[k], x[i], s[i], c[i], ws, wc);
                const double v = f[i], wsp = v > 20 ? v : log1p(exp(v)), wsg = 1 / (1 + exp(-v));
                if (isnan(v) ? !isnan(sp[i]) || !isnan(sg[i])
                             : fabs(sp[i] - wsp) > 6 * 0x1p-24 * fabs(wsp) + 3e-45 || fabs(sg[i] - wsg) > 6 * 0x1p-24 * wsg + 3e-45)
                    fail_msg("%s softplus(%.9g): %.9g %.9g, in double %.9g %.9g", isas[k], v, sp[i], sg[i], wsp, wsg);
            }
        }
        K->softplus(f, NULL, sg, 5), K->softplus(f, sp, NULL, 5), K->sincos(x, NULL, c, 3), K->sincos(x, s, NULL, 3);
    }
    free(x), free(s), free(c), free(f), free(sp), free(sg);
}

int main(void) {
    enum { NS = sizeof SETTINGS / sizeof SETTINGS[0] };
    struct CMUnitTest tests[NS + 5];
    tests[0] = (struct CMUnitTest){"eligibility", eligibility, NULL, NULL, NULL};
    tests[1] = (struct CMUnitTest){"rope_bit_identical", rope_bit_identical, NULL, NULL, NULL};
    tests[2] = (struct CMUnitTest){"lift_threads", lift_threads, NULL, NULL, NULL};
    tests[3] = (struct CMUnitTest){"softmax_kernel", softmax_kernel, NULL, NULL, NULL};
    tests[4] = (struct CMUnitTest){"vmath_kernels", vmath_kernels, NULL, NULL, NULL};
    for (int i = 0; i < NS; i++)
        tests[i + 5] = (struct CMUnitTest){SETTINGS[i], fused_matches_reference, NULL, NULL, (void *)SETTINGS[i]};
    const char *only = getenv("POSENC_TEST_FILTER"); /* e.g. "method=pope*": one method's settings */
    if (only) cmocka_set_test_filter(only);
    return _cmocka_run_group_tests("fused", tests, NS + 5, NULL, NULL);
}
