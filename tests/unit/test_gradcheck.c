/* Finite-difference check of every backward: every method of posenc_methods.def, every
 * variant below, every element of every tensor (x, the projections, the biases and the
 * method's own tensors). loss = sum(y * r) in double; the numerical derivative uses the
 * four-point stencil (-f(2h) + 8f(h) - 8f(-h) + f(-2h)) / 12h. The library computes in
 * float32, so the check allows |num - ana| <= 2e-3 + 1e-2 |ana|: a missing or wrong term is
 * orders of magnitude above that at these sizes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct variant {
    const char *name;
    int64_t B, T, H, D;
    int causal, gapped, kv_heads; /* kv_heads 0: = H */
} variant;

static const variant VARIANTS[] = {
    {"basic", 1, 5, 2, 4, 0, 0, 0},
    {"t1", 1, 1, 2, 4, 1, 0, 0},
    {"h3_causal_gapped_batch", 2, 6, 3, 4, 1, 1, 0},
    {"gqa", 1, 5, 4, 4, 1, 0, 2},
};

/* Keys that make each method's check meaningful at these small sizes (clipping, log buckets
 * reached); methods not listed use their defaults. '|' separates settings checked in turn. */
static const char *method_keys(const char *method) {
    static const struct { const char *method, *keys; } K[] = {
        {"shaw", "max_rel=2"},
        {"t5", "num_buckets=8 max_distance=12"},
        {"none", "|attn_temperature_tuning=true floor_scale=2 attn_scale=0.5|head_scale=true head_scale_init=1.5|"
                 "head_scale=true attn_temperature_tuning=true floor_scale=2 attn_scale=0.5"},
        {"rope", "rotary_dim=2|rotary_dim=2 rotary_offset=2 rope_layout=interleaved|rope_scaling=longrope original_max_position_embeddings=4 "
                 "max_position_embeddings=16 rope_layout=interleaved|rope_scaling=yarn rope_factor=4 "
                 "original_max_position_embeddings=8|rope_sections=1,1|rope_sections=1,1 rope_section_layout=interleaved "
                 "rope_layout=interleaved|rope_sections=1,1 rope_section_freqs=per_axis|rope_sections=1,1 "
                 "rope_scaling=longrope original_max_position_embeddings=4 max_position_embeddings=16|llama_4_scaling_beta=0.3 "
                 "original_max_position_embeddings=2|llama_4_scaling_beta=0.3 rope_scaling=longrope "
                 "original_max_position_embeddings=4 max_position_embeddings=16|rope_scaling=proportional rope_proportion=0.5 rope_factor=2|attention_sinks=true|rope_values=true rotary_dim=2 rotary_offset=2 "
                 "rope_layout=interleaved|rope_values=true rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8 "
                 "attention_sinks=true"},
        {"rope_mixed", "|rope_layout=half rotary_dim=2"},
        {"huang1", "max_rel=3"}, {"huang2", "max_rel=3"}, {"huang3", "max_rel=3"}, {"huang4", "max_rel=3"},
        {"tupe", "num_buckets=8 max_distance=12|num_buckets=8 max_distance=12 tupe_cls=false"},
        {"xl", "clamp_len=3|same_length=true mem_len=2"},
        {"deberta", "position_buckets=4 max_relative_positions=8"},
        {"pope", "rope_base=10000|rotary_dim=3 rope_base=100"},
        {"xpos", "xpos_scale_base=8"},
        {"kerple", "kerple=log|kerple=power"},
        {"fire", "fire_init_L=8"},
        {"cope", "causal=true npos_max=3|causal=true npos_max=2 scale=0.8"}, /* causal only; the clamp reached */
        {"data_alibi", "post_log_scale=1|post_log_scale=-0.7 bias_init=2"}, /* causal (H gates) and not (2H) by the variants */
    };
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
        if (!strcmp(K[i].method, method)) return K[i].keys;
    return "";
}

typedef struct run {
    pe_attention *att;
    pe_layer L;
    const variant *v;
    int64_t C, n; /* n = B*T*C */
    float *x, *y, *r, *dx;
    int64_t *pos, A; /* (B, T, A): A position axes (rope_sections, rope_mixed) */
} run;

static double loss(run *R) {
    pe_err err;
    pe_positions at = {.pos = R->pos, .pos_batched = 1, .axes = R->A};
    pe_status st = pe_attention_layer_forward(R->att, &R->L.w, R->x, NULL, 0, R->v->B, R->v->T, &at, R->y, NULL,
                                              NULL, &err);
    if (st) fail_msg("forward: %s", err.msg);
    double s = 0;
    for (int64_t i = 0; i < R->n; i++) s += (double)R->y[i] * R->r[i];
    return s;
}
static double loss_v(void *R) { return loss(R); }

/* Returns the worst |num - ana| / (2e-3 + 1e-2 |ana|) over the tensor. */
static double check_tensor(run *R, const char *name, float *data, const float *grad, int64_t size,
                           const char *label) {
    double worst = 0;
    for (int64_t e = 0; e < size; e++)
        worst = fmax(worst, pe_test_fd_element(&data[e], grad[e], 1e-2f * fmaxf(1.0f, fabsf(data[e])), loss_v, R,
                                               worst, label, name, e));
    return worst;
}

static int check_settings(int m, const char *keys) {
    const char *method = pe_method_name(m);
    int checked = 0;
    for (size_t vi = 0; vi < sizeof VARIANTS / sizeof VARIANTS[0]; vi++) {
        const variant *v = &VARIANTS[vi];
        run R = {.v = v, .C = v->H * v->D};
        char settings[1280]; /* the method name and one setting of up to 1023 characters */
        snprintf(settings, sizeof settings, "method=%s heads=%lld causal=%s %s", method, (long long)v->H,
                 v->causal ? "true" : "false", keys);
        if (v->kv_heads) {
            pe_config probe;
            pe_err err;
            char kv[16];
            snprintf(kv, sizeof kv, "%d", v->kv_heads);
            pe_config_init(&probe);
            pe_config_set(&probe, "method", method, &err);
            pe_config_set(&probe, "heads", "4", &err);
            pe_config_set(&probe, "kv_heads", kv, &err);
            pe_config_set(&probe, "causal", "true", &err); /* cope is causal only; no method refuses causal */
            pe_attention *a;
            if (pe_attention_init(&a, &probe, R.C, &err)) continue; /* no grouped-query attention */
            pe_attention_free(a);
            snprintf(settings + strlen(settings), sizeof settings - strlen(settings), " kv_heads=%d", v->kv_heads);
        }
        R.att = pe_test_layer(settings, R.C);
        pe_err err;
        /* free rows: 64 positions of a table, or rope_mixed's two axes */
        if (pe_layer_init(&R.L, R.att, strcmp(method, "rope_mixed") ? 64 : 2, 7 + vi, &err)) fail_msg("%s", err.msg);
        R.A = pe_attention_axes(R.att, &R.L.w);
        R.n = v->B * v->T * R.C;
        R.x = malloc(sizeof(float) * R.n), R.y = malloc(sizeof(float) * R.n);
        R.r = malloc(sizeof(float) * R.n), R.dx = malloc(sizeof(float) * R.n);
        R.pos = malloc(sizeof(int64_t) * v->B * v->T * R.A);
        pe_rng rng = {42 + vi};
        for (int64_t i = 0; i < R.n; i++) R.x[i] = 2 * pe_rng_uniform(&rng) - 1, R.r[i] = 2 * pe_rng_uniform(&rng) - 1;
        for (int64_t b = 0; b < v->B; b++)
            for (int64_t t = 0, p = 3 * b; t < v->T; t++, p += v->gapped ? 1 + (t * 7 + b) % 4 : 1)
                for (int64_t a = 0; a < R.A; a++) R.pos[(b * v->T + t) * R.A + a] = a ? (p * (a + 2)) % 7 + a : p;

        loss(&R);
        pe_layer_zero_grad(&R.L);
        if (pe_attention_backward(R.att, &R.L.w, R.r, R.dx, &R.L.g, &err)) fail_msg("backward: %s", err.msg);
        float *dx = malloc(sizeof(float) * R.n);
        memcpy(dx, R.dx, sizeof(float) * R.n);

        char label[1400];
        snprintf(label, sizeof label, "%s [%s]", settings, v->name);
        double worst = check_tensor(&R, "x", R.x, dx, R.n, label);
        const char *names[8 + PE_MAX_PARAMS];
        float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
        int64_t sizes[8 + PE_MAX_PARAMS];
        int nt = pe_layer_tensors(&R.L, names, data, grads, sizes);
        for (int t = 0; t < nt; t++) worst = fmax(worst, check_tensor(&R, names[t], data[t], grads[t], sizes[t], label));
        printf("  %-40s worst %.3g x tolerance\n", label, worst);
        assert_true(worst <= 1.0);
        checked++;
        free(dx), free(R.x), free(R.y), free(R.r), free(R.dx), free(R.pos);
        pe_layer_free(&R.L);
        pe_attention_free(R.att);
    }
    return checked;
}

static void check_method(void **state) {
    int m = (int)(intptr_t)*state;
    if (m == PE_METHOD_COMPLEX) skip(); /* reads token ids, not x: tests/unit/test_complex.c */
    char all[1024];
    snprintf(all, sizeof all, "%s", method_keys(pe_method_name(m)));
    /* settings separated by '|', an empty one included (strtok_r would skip it: the method's
     * defaults were never checked where the list begins with '|') */
    for (char *keys = all;;) {
        char *bar = strchr(keys, '|');
        if (bar) *bar = 0;
        assert_true(check_settings(m, keys) >= 3);
        if (!bar) break;
        keys = bar + 1;
    }
}

int main(void) {
    struct CMUnitTest tests[PE_METHOD_COUNT];
    for (int m = 0; m < PE_METHOD_COUNT; m++)
        tests[m] = (struct CMUnitTest){pe_method_name(m), check_method, NULL, NULL, (void *)(intptr_t)m};
    return _cmocka_run_group_tests("gradcheck", tests, PE_METHOD_COUNT, NULL, NULL);
}
