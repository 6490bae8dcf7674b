/* hf_config: the example configs of tests/hf (Llama-3.1, Qwen-YaRN, Phi-3-LongRoPE, dynamic
 * NTK with the rope_parameters schema) reproduce the frequencies and attention factors of HF's
 * formulas (tests/fixtures/tables/hf_configs.safetensors, written by tests/ref/m_rope.py), and
 * bad configs are clear errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "rotary/rotary.h"

/* The scenarios of m_rope.HF_SCENARIOS, in order, with each model's heads and head_dim. */
static const struct { const char *config; int64_t heads, head_dim; } SCENARIOS[] = {
    {"llama31", 32, 128}, {"qwen_yarn", 28, 128}, {"phi3_longrope", 32, 96},
    {"phi3_longrope", 32, 96}, {"dynamic_ntk", 16, 128}, {"dynamic_ntk", 16, 128},
};

static const pe_tensor *get(const pe_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    fail_msg("fixture tensor '%s' missing", name);
    return NULL;
}

static pe_attention *from_config(const char *config, int64_t heads, int64_t D, const char *extra_key,
                                 const char *extra_value, pe_err *err, pe_status *st) {
    pe_config cfg;
    pe_config_init(&cfg);
    char h[32], path[512];
    snprintf(h, sizeof h, "%lld", (long long)heads);
    snprintf(path, sizeof path, "%s", config);
    pe_attention *att = NULL;
    /* the file is read by pe_config_set (its errors are that call's), the layer made from it */
    if ((*st = pe_config_set(&cfg, "method", "rope", err)) || (*st = pe_config_set(&cfg, "heads", h, err)) ||
        (*st = pe_config_set(&cfg, "hf_config", path, err)) ||
        (extra_key && (*st = pe_config_set(&cfg, extra_key, extra_value, err))))
        return NULL;
    *st = pe_attention_init(&att, &cfg, heads * D, err);
    return att;
}

static void example_configs_match_hf(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tables/hf_configs.safetensors", pe_test_fixture_dir());
    pe_st_file f;
    pe_err err;
    if (pe_st_read(path, &f, &err)) fail_msg("%s", err.msg);
    for (size_t s = 0; s < sizeof SCENARIOS / sizeof SCENARIOS[0]; s++) {
        char name[64], config[256];
        snprintf(config, sizeof config, "tests/hf/%s.json", SCENARIOS[s].config);
        pe_status st;
        pe_attention *att = from_config(config, SCENARIOS[s].heads, SCENARIOS[s].head_dim, NULL, NULL, &err, &st);
        if (st) fail_msg("%s: %s", config, err.msg);
        const pe_config *cfg = pe_attention_config(att);
        snprintf(name, sizeof name, "s%zu_inv_freq", s);
        const pe_tensor *want = get(&f, name);
        snprintf(name, sizeof name, "s%zu_attn", s);
        double want_attn = ((const double *)get(&f, name)->data)[0];
        snprintf(name, sizeof name, "s%zu_n_pos", s);
        int64_t n_pos = ((const int64_t *)get(&f, name)->data)[0];
        assert_int_equal(want->shape[0], cfg->rotary_dim / 2);
        double inv[PE_MAX_ROPE_PAIRS];
        const float *factors = cfg->rope_scaling == PE_ROPE_LONGROPE
                                   ? cfg->hf_factors[pe__rope_longrope_uses_long(cfg, n_pos)] : NULL;
        double attn = pe__rope_freqs(cfg, n_pos, factors, inv);
        double dev = fabs(attn - want_attn) / want_attn;
        for (int64_t t = 0; t < want->shape[0]; t++)
            dev = fmax(dev, fabs(inv[t] - ((const double *)want->data)[t]) / ((const double *)want->data)[t]);
        printf("  %-14s n_pos %-6lld rotary_dim %-4lld attention factor %.9f  max relative deviation from HF %.2e\n",
               SCENARIOS[s].config, (long long)n_pos, (long long)cfg->rotary_dim, attn, dev);
        /* the LongRoPE tables are stored as float, as HF's float32 tensors */
        assert_true(dev < (cfg->rope_scaling == PE_ROPE_LONGROPE ? 1e-7 : 1e-12));
        pe_attention_free(att);
    }
    pe_st_free(&f);
}

static void write_file(const char *path, const char *text) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void expect_error(const char *json, const char *extra_key, const char *extra_value, const char *needle) {
    char path[] = "/tmp/posenc-hf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, json);
    pe_err err = {{0}};
    pe_status st;
    pe_attention *att = from_config(path, 2, 8, extra_key, extra_value, &err, &st);
    remove(path);
    if (st == PE_OK) {
        pe_attention_free(att);
        fail_msg("accepted a bad config: %s", json);
    }
    if (!strstr(err.msg, needle)) fail_msg("message '%s' does not mention '%s'", err.msg, needle);
}

static void bad_configs_are_errors(void **state) {
    (void)state;
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2, \"original_max_position_embeddings\": 64, \"bogus\": 1}}",
                 NULL, NULL, "bogus");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"magic\"}}", NULL, NULL, "magic");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 16, \"rope_theta\": 10000}", NULL, NULL, "head_dim 16");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 2, \"rope_theta\": 10000}", NULL, NULL, "head_dim 32");
    expect_error("[1, 2]", NULL, NULL, "not a JSON object");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2}, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2}}",
                 NULL, NULL, "both");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2}}", NULL, NULL,
                 "original_max_position_embeddings");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"longrope\", \"original_max_position_embeddings\": 8, \"short_factor\": [1, 1, 1, 1], \"long_factor\": [1]}}",
                 NULL, NULL, "long_factor");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_theta\": \"big\"}", NULL, NULL, "rope_base");
    expect_error("{not json", NULL, NULL, "cannot read");
    /* values of the wrong type or count are refused, never read as something else (issue 32) */
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"num_hidden_layers\": 2, \"layer_types\": \"sliding_attention\"}", NULL, NULL,
                 "layer_types is not a list");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"num_hidden_layers\": 1, \"layer_types\": [\"full_attention\", \"full_attention\"]}",
                 NULL, NULL, "layer_types");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"num_hidden_layers\": 26.5}", NULL, NULL, "num_hidden_layers");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"num_hidden_layers\": true}", NULL, NULL, "num_hidden_layers");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"num_hidden_layers\": null}", NULL, NULL, "num_hidden_layers");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"num_hidden_layers\": 1e308}", NULL, NULL, "num_hidden_layers");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 4611686018427387904}", NULL, NULL, "head_dim");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8.5}", NULL, NULL, "head_dim is not an integer");
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"no_rope_layers\": 1}", NULL, NULL, "no_rope_layers is not a list");
    pe_err err;
    pe_status st;
    pe_attention *att = from_config("/nonexistent/config.json", 2, 8, NULL, NULL, &err, &st);
    assert_int_not_equal(st, PE_OK);
    assert_null(att);
}

static void explicit_keys_override(void **state) {
    (void)state;
    pe_err err;
    pe_status st;
    pe_attention *att = from_config("tests/hf/llama31.json", 32, 128, "rope_factor", "4", &err, &st);
    if (st) fail_msg("%s", err.msg);
    const pe_config *cfg = pe_attention_config(att);
    assert_true(cfg->rope_factor == 4);           /* given */
    assert_true(cfg->rope_base == 500000);        /* from the file */
    assert_int_equal(cfg->rope_scaling, PE_ROPE_LLAMA3);
    assert_int_equal(cfg->original_max_position_embeddings, 8192);
    pe_attention_free(att);
    att = from_config("tests/hf/dynamic_ntk.json", 16, 128, NULL, NULL, &err, &st);
    if (st) fail_msg("%s", err.msg);
    assert_int_equal(pe_attention_config(att)->rotary_dim, 64); /* partial_rotary_factor 0.5 */
    assert_int_equal(pe_attention_config(att)->max_position_embeddings, 4096);
    pe_attention_free(att);
}

/* M-RoPE from Qwen2-VL's and Qwen3-VL's config.json (the latter nested in text_config) */
static void mrope_configs(void **state) {
    (void)state;
    pe_err err;
    pe_status st;
    pe_attention *att = from_config("tests/hf/qwen2vl.json", 28, 128, NULL, NULL, &err, &st);
    if (st) fail_msg("%s", err.msg);
    const pe_config *cfg = pe_attention_config(att);
    assert_int_equal(cfg->rope_sections.n, 3);
    assert_int_equal(cfg->rope_sections.v[0], 16), assert_int_equal(cfg->rope_sections.v[1], 24);
    assert_int_equal(cfg->rope_sections.v[2], 24);
    assert_int_equal(cfg->rope_section_layout, PE_SECTIONS_CONTIGUOUS);
    assert_int_equal(cfg->rope_scaling, PE_ROPE_NONE);
    assert_true(cfg->rope_base == 1e6);
    assert_int_equal(pe_attention_axes(att, NULL), 3);
    pe_attention_free(att);
    att = from_config("tests/hf/qwen3vl.json", 32, 128, NULL, NULL, &err, &st);
    if (st) fail_msg("%s", err.msg);
    cfg = pe_attention_config(att);
    assert_int_equal(cfg->rope_sections.n, 3);
    assert_int_equal(cfg->rope_sections.v[0], 24);
    assert_int_equal(cfg->rope_section_layout, PE_SECTIONS_INTERLEAVED);
    assert_true(cfg->rope_base == 5e6);
    pe_attention_free(att);
    expect_error("{\"model_type\": \"llama\", \"head_dim\": 8, \"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [1, 1]}}", NULL, NULL,
                 "sum to 2 pairs");
}

/* Per-layer schedules: each layer's settings as pe_config_from_hf gives them, and the
 * hf_config + hf_layer keys agreeing with it (the same reading of the file). */
static void per_layer_schedules(void **state) {
    (void)state;
    static const struct {
        const char *config;
        int64_t layer;
        const char *method, *type;
        double base, scale;
        int64_t rotary_dim, rotary_offset;
        int layout, tuning;
        int64_t window;
    } L[] = {
        {"llama4_scout", 0, "rope", "chunked_attention", 500000, 0.08838834764831843, 128, 0, PE_ROPE_INTERLEAVED, 0, 8192},
        {"llama4_scout", 3, "none", "full_attention", 0, 0.08838834764831843, 0, 0, 0, 1, 0},
        {"gemma3_27b", 4, "rope", "sliding_attention", 10000, 0.07715167498104596, 128, 0, PE_ROPE_HALF, 0, 1024},
        {"gemma3_27b", 5, "rope", "full_attention", 1e6, 0.07715167498104596, 128, 0, PE_ROPE_HALF, 0, 0},
        {"gemma3_1b_v5", 0, "rope", "sliding_attention", 10000, 0.0625, 256, 0, PE_ROPE_HALF, 0, 512},
        {"gemma3_1b_v5", 5, "rope", "full_attention", 1e6, 0.0625, 256, 0, PE_ROPE_HALF, 0, 0},
        /* (1 + 0.1 ln 40)^2 / sqrt(192): YaRN's mscale on the softmax scale, as DeepSeek-V3 */
        {"deepseek_v3", 9, "rope", "full_attention", 10000, 0.1352337788608801, 64, 128, PE_ROPE_INTERLEAVED, 0, 0},
        {"qwen3vl", 1, "rope", "full_attention", 5e6, 0.08838834764831843, 128, 0, PE_ROPE_HALF, 0, 0},
    };
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/hf/%s.json", L[i].config);
        pe_config cfg;
        pe_config_init(&cfg);
        pe_hf_layer_info info;
        pe_err err;
        if (pe_config_from_hf(&cfg, path, L[i].layer, &info, &err)) fail_msg("%s: %s", path, err.msg);
        pe_attention *att;
        if (pe_attention_init(&att, &cfg, cfg.heads * info.head_dim, &err)) fail_msg("%s: %s", path, err.msg);
        const pe_config *c = pe_attention_config(att);
        assert_string_equal(pe_method_name(c->method), L[i].method);
        assert_string_equal(info.layer_type, L[i].type);
        assert_int_equal(info.window, L[i].window);
        assert_true(fabs(c->scale - L[i].scale) < 1e-15 * L[i].scale);
        assert_int_equal(c->attn_temperature_tuning, L[i].tuning);
        if (L[i].tuning) assert_true(c->floor_scale == 8192 && c->attn_scale == 0.1);
        if (c->method == PE_METHOD_ROPE) {
            assert_true(c->rope_base == L[i].base);
            assert_int_equal(c->rotary_dim, L[i].rotary_dim);
            assert_int_equal(c->rotary_offset, L[i].rotary_offset);
            assert_int_equal(c->rope_layout, L[i].layout);
        }
        /* the keys route: method and heads given, the layer's settings from the file */
        pe_config k;
        pe_config_init(&k);
        char heads[32], layer[32];
        snprintf(heads, sizeof heads, "%lld", (long long)c->heads);
        snprintf(layer, sizeof layer, "%lld", (long long)L[i].layer);
        const char *keys[] = {"method", "heads", "hf_config", "hf_layer"};
        const char *vals[] = {L[i].method, heads, path, layer};
        pe_attention *att2;
        if (pe_config_set_all(&k, 4, keys, vals, &err) || pe_attention_init(&att2, &k, c->heads * info.head_dim, &err))
            fail_msg("%s layer %lld by keys: %s", path, (long long)L[i].layer, err.msg);
        const pe_config *c2 = pe_attention_config(att2);
        assert_true(c2->scale == c->scale && c2->rope_base == c->rope_base && c2->rotary_dim == c->rotary_dim &&
                    c2->rotary_offset == c->rotary_offset && c2->rope_layout == c->rope_layout &&
                    c2->rope_scaling == c->rope_scaling && c2->attn_temperature_tuning == c->attn_temperature_tuning);
        pe_attention_free(att2);
        pe_attention_free(att);
    }
    /* a layer of the other kind is an error naming it */
    pe_config k;
    pe_config_init(&k);
    pe_err err;
    const char *keys[] = {"method", "heads", "hf_config", "hf_layer"};
    const char *vals[] = {"rope", "40", "tests/hf/llama4_scout.json", "3"};
    pe_attention *att;
    assert_int_equal(pe_config_set_all(&k, 4, keys, vals, &err), PE_OK);
    assert_int_equal(pe_attention_init(&att, &k, 40 * 128, &err), PE_EKEY);
    assert_non_null(strstr(err.msg, "layer 3 is a NoPE layer (method none)"));
    vals[0] = "none", vals[3] = "0";
    pe_config_init(&k);
    assert_int_equal(pe_config_set_all(&k, 4, keys, vals, &err), PE_OK);
    assert_int_equal(pe_attention_init(&att, &k, 40 * 128, &err), PE_EKEY);
    assert_non_null(strstr(err.msg, "layer 0 is a RoPE layer (method rope)"));
}

/* hf_config is a front-end: pe_config_set reads the file (a new hf_layer reads it afresh,
 * keeping the keys given), pe_attention_init reads none; a failed reading stays an error. */
static void read_on_set(void **state) {
    (void)state;
    pe_err err;
    char tmp[] = "/tmp/posenc_hf_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    FILE *src = fopen("tests/hf/gemma3_27b.json", "rb"), *dst = fopen(tmp, "wb");
    assert_non_null(src), assert_non_null(dst);
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, src)) > 0;) assert_int_equal(fwrite(buf, 1, n, dst), n);
    fclose(src), fclose(dst);
    pe_config k;
    pe_config_init(&k);
    assert_int_equal(pe_config_set(&k, "method", "rope", &err), PE_OK);
    assert_int_equal(pe_config_set(&k, "heads", "32", &err), PE_OK);
    assert_int_equal(pe_config_set(&k, "hf_config", tmp, &err), PE_OK); /* layer 0: sliding, local base */
    assert_true(k.rope_base == 10000);
    assert_int_equal(pe_config_set(&k, "rotary_dim", "64", &err), PE_OK); /* given after the reading */
    assert_int_equal(pe_config_set(&k, "hf_layer", "5", &err), PE_OK);    /* global: the file's scaling */
    assert_true(k.rope_base == 1000000);
    assert_int_equal(k.rope_scaling, PE_ROPE_LINEAR);
    assert_true(k.rope_factor == 8);
    assert_int_equal(k.rotary_dim, 64); /* the key given stays */
    assert_int_equal(pe_config_set(&k, "hf_layer", "0", &err), PE_OK); /* back: layer 5's keys undone */
    assert_true(k.rope_base == 10000);
    assert_false(pe_config_has(&k, PE_K_rope_scaling));
    unlink(tmp); /* the layer is made from the config alone */
    pe_attention *att;
    if (pe_attention_init(&att, &k, 32 * 128, &err)) fail_msg("%s", err.msg);
    assert_true(pe_attention_config(att)->rope_base == 10000);
    assert_int_equal(pe_attention_config(att)->rotary_dim, 64);
    pe_attention_free(att);
    /* a reading that failed is pe_config_set's error, and leaves the config as it was */
    pe_config_init(&k);
    assert_int_equal(pe_config_set(&k, "method", "rope", &err), PE_OK);
    assert_int_equal(pe_config_set(&k, "heads", "2", &err), PE_OK);
    pe_config was = k;
    assert_int_equal(pe_config_set(&k, "hf_config", tmp, &err), PE_EKEY);
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_memory_equal(&was, &k, sizeof k);
    /* a file without head_dim: partial_rotary_factor takes the layer's when it is made */
    FILE *f = fopen(tmp, "wb");
    assert_non_null(f);
    fputs("{\"model_type\": \"llama\", \"rope_theta\": 5000, \"partial_rotary_factor\": 0.5}", f);
    fclose(f);
    pe_config_init(&k);
    const char *keys[] = {"hf_config", "method", "heads"}, *vals[] = {tmp, "rope", "2"};
    assert_int_equal(pe_config_set_all(&k, 3, keys, vals, &err), PE_OK);
    unlink(tmp);
    if (pe_attention_init(&att, &k, 2 * 24, &err)) fail_msg("%s", err.msg);
    assert_int_equal(pe_attention_config(att)->rotary_dim, 12);
    assert_true(pe_attention_config(att)->rope_base == 5000);
    pe_attention_free(att);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read_on_set),
        cmocka_unit_test(example_configs_match_hf),
        cmocka_unit_test(bad_configs_are_errors),
        cmocka_unit_test(explicit_keys_override),
        cmocka_unit_test(mrope_configs),
        cmocka_unit_test(per_layer_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
