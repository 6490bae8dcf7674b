/* The model-family table (src/rotary/hf_families.c): what each family's attention code decides
 * beyond config.json, read through pe_config_from_hf from small configs in each family's own key
 * names (values of the family's configuration class defaults where a test needs one):
 *   - which layers rotate (Cohere2: sliding only; EXAONE 4: all without a window; Llama 4 and
 *     SmolLM3: NoPE every 4th), which slide (Qwen2's max_window_layers), the pair layout (Cohere, GLM, GPT-J interleaved; GLM-4 MoE half;
 *     DeepSeek-V3 by rope_interleave), the slice (GPT-NeoX's rotary_pct, GPT-J's rotary_dim,
 *     GLM's 0.5 default), key aliases (n_layer, n_head, rotary_emb_base, d_model), kv heads
 *     (Falcon's multi_query and new_decoder_architecture), the softmax scale (Gemma 3's
 *     query_pre_attn_scalar, Granite's attention_multiplier), ALiBi (Bloom, MPT);
 *   - Ministral 3's query scaling by position (llama_4_scaling_beta on RoPE layers);
 *   - Gemma 4's per-layer head shapes and p-RoPE (proportional) on its global layers;
 *   - refusals, each naming what posenc lacks or the nearest family: an unknown model_type, none
 *     at all, Falcon's ALiBi, Gemma 2's soft-capping, LongCat's q scaling;
 *   - GPT-OSS's learned sinks (attention_sinks) and its class's YaRN;
 *   - hf_assume reads a config as the named family's code does;
 *   - the remote-code families (ChatGLM, Baichuan, EXAONE 3, Falcon's RefinedWeb) and
 *     the refusals of DeepSeek-V3.2, MiniCPM's sparse attention and ChatGLM's ambiguous keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* cfg from the layer of json (method, heads, the rest as pe_config_from_hf fills them) */
static pe_status read_json(const char *json, int64_t layer, const char *assume, pe_config *cfg, pe_hf_layer_info *info,
                           pe_err *err) {
    char path[] = "/tmp/posenc-fam-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, json, strlen(json)) == (ssize_t)strlen(json));
    close(fd);
    pe_config_init(cfg);
    pe_status st = assume ? pe_config_set(cfg, "hf_assume", assume, err) : PE_OK;
    if (!st) st = pe_config_from_hf(cfg, path, layer, info, err);
    unlink(path);
    return st;
}

static void ok(const char *json, int64_t layer, pe_config *cfg, pe_hf_layer_info *info) {
    pe_err err;
    if (read_json(json, layer, NULL, cfg, info, &err)) fail_msg("%s: %s", json, err.msg);
}

static void refused(const char *json, const char *assume, const char *needle) {
    pe_config cfg;
    pe_err err;
    if (read_json(json, 0, assume, &cfg, NULL, &err) == PE_OK) fail_msg("read a config it should refuse: %s", json);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' does not mention '%s'", err.msg, needle);
}

static void which_layers_rotate(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    /* Cohere2: every 4th layer full and NoPE (Cohere2Attention.forward), the rest RoPE, interleaved */
    const char *cohere2 = "{\"model_type\": \"cohere2\", \"hidden_size\": 8192, \"num_attention_heads\": 64, "
                          "\"num_hidden_layers\": 40, \"sliding_window\": 4096, \"rope_theta\": 50000}";
    ok(cohere2, 0, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ROPE);
    assert_int_equal(c.rope_layout, PE_ROPE_INTERLEAVED);
    assert_string_equal(in.layer_type, "sliding_attention");
    assert_string_equal(in.family, "cohere2");
    ok(cohere2, 3, &c, &in);
    assert_int_equal(c.method, PE_METHOD_NONE);
    assert_string_equal(in.layer_type, "full_attention");
    /* EXAONE 4: the same pattern; without a window every layer rotates */
    ok("{\"model_type\": \"exaone4\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8}", 3, &c, &in);
    assert_int_equal(c.method, PE_METHOD_NONE);
    ok("{\"model_type\": \"exaone4\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8, "
       "\"sliding_window\": null}", 3, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ROPE);
    /* SmolLM3: no_rope_layer_interval 4 without a list; OLMo 3 windows but rotates every layer */
    ok("{\"model_type\": \"smollm3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8}", 7, &c, &in);
    assert_int_equal(c.method, PE_METHOD_NONE);
    ok("{\"model_type\": \"olmo3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8}", 3, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ROPE);
    assert_string_equal(in.layer_type, "full_attention");
    assert_true(c.rope_base == 500000.0); /* Olmo3Config.default_theta */
    /* Qwen2: sliding from max_window_layers on, only with use_sliding_window */
    const char *qwen = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                       "\"num_hidden_layers\": 4, \"sliding_window\": 32, \"max_window_layers\": 2%s}";
    char text[300];
    snprintf(text, sizeof text, qwen, ", \"use_sliding_window\": true");
    ok(text, 1, &c, &in);
    assert_string_equal(in.layer_type, "full_attention");
    ok(text, 2, &c, &in);
    assert_string_equal(in.layer_type, "sliding_attention");
    assert_int_equal(in.window, 32);
    snprintf(text, sizeof text, qwen, "");
    ok(text, 3, &c, &in);
    assert_string_equal(in.layer_type, "full_attention");
}

static void layouts_slices_aliases(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    /* GPT-NeoX: rotary_pct 0.25 of head 96 (24 dims), base rotary_emb_base */
    ok("{\"model_type\": \"gpt_neox\", \"hidden_size\": 6144, \"num_attention_heads\": 64, \"num_hidden_layers\": 44, "
       "\"rotary_pct\": 0.25, \"rotary_emb_base\": 10000}", 0, &c, &in);
    assert_int_equal(c.rotary_dim, 24);
    assert_int_equal(c.rope_layout, PE_ROPE_HALF);
    assert_true(c.rope_base == 10000);
    /* GPT-J: GPT-2's names, rotary_dim 64 of 256, pairs (2i, 2i + 1), base fixed at 10000 */
    ok("{\"model_type\": \"gptj\", \"n_embd\": 4096, \"n_head\": 16, \"n_layer\": 28, \"rotary_dim\": 64, "
       "\"rope_theta\": 99}", 27, &c, &in);
    assert_int_equal(c.heads, 16);
    assert_int_equal(in.head_dim, 256);
    assert_int_equal(in.n_layers, 28);
    assert_int_equal(c.rotary_dim, 64);
    assert_int_equal(c.rope_layout, PE_ROPE_INTERLEAVED);
    assert_true(c.rope_base == 10000);
    /* GLM-4: interleaved over the leading half by default; GLM-4 MoE half */
    const char *glm = "{\"model_type\": \"%s\", \"hidden_size\": 4096, \"num_attention_heads\": 32, \"head_dim\": 128, "
                      "\"num_key_value_heads\": 2, \"num_hidden_layers\": 40, \"rope_theta\": 10000}";
    char text[400];
    snprintf(text, sizeof text, glm, "glm4");
    ok(text, 0, &c, &in);
    assert_int_equal(c.rotary_dim, 64);
    assert_int_equal(c.rope_layout, PE_ROPE_INTERLEAVED);
    assert_int_equal(c.kv_heads, 2);
    snprintf(text, sizeof text, glm, "glm4_moe");
    ok(text, 0, &c, &in);
    assert_int_equal(c.rotary_dim, 64);
    assert_int_equal(c.rope_layout, PE_ROPE_HALF);
    /* DeepSeek-V3: the last 64 of 192, interleaved unless rope_interleave is false */
    const char *v3 = "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 7168, \"num_attention_heads\": 128, "
                     "\"num_hidden_layers\": 61, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64%s}";
    snprintf(text, sizeof text, v3, "");
    ok(text, 0, &c, &in);
    assert_int_equal(c.rotary_offset, 128);
    assert_int_equal(c.rope_layout, PE_ROPE_INTERLEAVED);
    snprintf(text, sizeof text, v3, ", \"rope_interleave\": false");
    ok(text, 0, &c, &in);
    assert_int_equal(c.rope_layout, PE_ROPE_HALF);
    /* a qk_rope_head_dim under Llama's code is not MLA: Llama's code does not read it */
    ok("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"qk_rope_head_dim\": 8}", 0, &c, &in);
    assert_int_equal(in.mla, 0);
    assert_int_equal(in.head_dim, 16);
}

static void heads_scales_alibi(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    /* Falcon: multi_query (7B) one kv head; new_decoder_architecture num_kv_heads */
    ok("{\"model_type\": \"falcon\", \"hidden_size\": 4544, \"num_attention_heads\": 71, \"num_hidden_layers\": 32, "
       "\"multi_query\": true}", 0, &c, &in);
    assert_int_equal(c.kv_heads, 1);
    ok("{\"model_type\": \"falcon\", \"hidden_size\": 8192, \"num_attention_heads\": 128, \"num_hidden_layers\": 60, "
       "\"new_decoder_architecture\": true, \"num_kv_heads\": 8}", 0, &c, &in);
    assert_int_equal(c.kv_heads, 8);
    /* Gemma 3: query_pre_attn_scalar^-1/2; every 6th layer global */
    ok("{\"model_type\": \"gemma3_text\", \"hidden_size\": 1152, \"num_attention_heads\": 4, \"head_dim\": 256, "
       "\"num_hidden_layers\": 26, \"query_pre_attn_scalar\": 256, \"rope_local_base_freq\": 10000, "
       "\"rope_theta\": 1000000}", 5, &c, &in);
    assert_true(fabs(c.scale - 1.0 / 16) < 1e-15);
    assert_string_equal(in.layer_type, "full_attention");
    assert_true(c.rope_base == 1000000);
    /* a query_pre_attn_scalar under Llama's code changes nothing */
    ok("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"query_pre_attn_scalar\": 4}", 0, &c, &in);
    assert_false(pe_config_is_set(&c, "scale"));
    /* Granite: attention_multiplier is the scale */
    ok("{\"model_type\": \"granite\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"attention_multiplier\": 0.0078125}",
       0, &c, &in);
    assert_true(c.scale == 0.0078125);
    /* Bloom and MPT: ALiBi layers, GPT-2's and MPT's names */
    ok("{\"model_type\": \"bloom\", \"hidden_size\": 1024, \"n_head\": 16, \"n_layer\": 24}", 23, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ALIBI);
    assert_int_equal(c.heads, 16);
    ok("{\"model_type\": \"mpt\", \"d_model\": 2048, \"n_heads\": 16, \"n_layers\": 24}", 0, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ALIBI);
    assert_int_equal(in.head_dim, 128);
}

static void ministral3_query_scaling(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    ok("{\"model_type\": \"mistral3\", \"text_config\": {\"model_type\": \"ministral3\", \"hidden_size\": 4096, "
       "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"num_hidden_layers\": 34, "
       "\"max_position_embeddings\": 262144, \"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1000000.0, "
       "\"factor\": 16.0, \"original_max_position_embeddings\": 16384, \"max_position_embeddings\": 262144, "
       "\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"mscale_all_dim\": 1.0, \"mscale\": 1.0, "
       "\"llama_4_scaling_beta\": 0.1}}}", 0, &c, &in);
    assert_string_equal(in.family, "ministral3");
    assert_true(c.llama_4_scaling_beta == 0.1);
    assert_int_equal(c.original_max_position_embeddings, 16384);
    assert_int_equal(c.rope_scaling, PE_ROPE_YARN);
    assert_false(pe_config_is_set(&c, "scale")); /* head_dim^-1/2, not DeepSeek's mscale^2 */
    pe_attention *att;
    pe_err err;
    if (pe_attention_init(&att, &c, 32 * 128, &err)) fail_msg("%s", err.msg);
    pe_attention_free(att);
}

/* Gemma 4 (modeling_gemma4.py Gemma4TextAttention): per-layer head shapes, p-RoPE on the global
 * layers, the class's defaults; the key route checks the width of the layer's own kind */
static void gemma4_layers(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    const char *g4 = "{\"model_type\": \"gemma4_text\", \"hidden_size\": 2816, \"num_hidden_layers\": 30, "
                     "\"num_attention_heads\": 16, \"num_key_value_heads\": 8, \"num_global_key_value_heads\": 2, "
                     "\"attention_k_eq_v\": true, \"sliding_window\": 1024, \"partial_rotary_factor\": 0.5}";
    ok(g4, 4, &c, &in); /* sliding: the whole 256-dim head, partial_rotary_factor not read, scale 1 */
    assert_string_equal(in.layer_type, "sliding_attention");
    assert_int_equal(in.head_dim, 256);
    assert_int_equal(in.window, 1024);
    assert_int_equal(c.kv_heads, 8);
    assert_false(pe_config_is_set(&c, "rotary_dim"));
    assert_int_equal(c.rope_scaling, PE_ROPE_NONE);
    assert_true(c.rope_base == 10000 && c.scale == 1);
    ok(g4, 5, &c, &in); /* global: 512-dim heads, 2 kv heads, a quarter of the frequencies */
    assert_string_equal(in.layer_type, "full_attention");
    assert_int_equal(in.head_dim, 512);
    assert_int_equal(c.kv_heads, 2);
    assert_int_equal(c.rope_scaling, PE_ROPE_PROPORTIONAL);
    assert_true(c.rope_proportion == 0.25 && c.rope_base == 1e6 && c.scale == 1);
    pe_attention *att;
    pe_err err;
    if (pe_attention_init(&att, &c, 16 * 512, &err)) fail_msg("%s", err.msg);
    double inv[256], attn;
    if (pe_rope_frequencies(pe_attention_config(att), 1, NULL, inv, &attn, &err)) fail_msg("%s", err.msg);
    for (int t = 0; t < 256; t++) /* HF: 1 / 1e6^(2t/512) for t < int(0.25 * 512 // 2), 0 after */
        assert_true(t < 64 ? fabs(inv[t] / pow(1e6, -2.0 * t / 512) - 1) < 1e-15 : inv[t] == 0);
    assert_true(attn == 1);
    pe_attention_free(att);
    /* the key route: a global layer is 512 wide, a sliding one 256 */
    char path[] = "/tmp/posenc-g4-XXXXXX", text[64];
    int fd = mkstemp(path);
    assert_true(fd >= 0 && write(fd, g4, strlen(g4)) == (ssize_t)strlen(g4));
    close(fd);
    for (int layer = 4; layer <= 5; layer++)
        for (int D = 256; D <= 512; D += 256) {
            pe_config_init(&c);
            snprintf(text, sizeof text, "%d", layer);
            if (pe_config_set(&c, "method", "rope", &err) || pe_config_set(&c, "heads", "16", &err) ||
                pe_config_set(&c, "hf_config", path, &err) || pe_config_set(&c, "hf_layer", text, &err))
                fail_msg("%s", err.msg);
            const pe_status st = pe_attention_init(&att, &c, 16 * D, &err);
            if ((st == PE_OK) != (D == (layer == 5 ? 512 : 256))) fail_msg("layer %d, head_dim %d: %s", layer, D, err.msg);
            if (!st) pe_attention_free(att);
        }
    unlink(path);
}

static void gpt_oss_sinks(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    ok("{\"model_type\": \"gpt_oss\", \"num_hidden_layers\": 24, \"num_attention_heads\": 64, "
       "\"num_key_value_heads\": 8}", 0, &c, &in);
    assert_true(c.attention_sinks);
    assert_string_equal(in.layer_type, "sliding_attention");
    assert_int_equal(in.window, 128);
    assert_int_equal(in.head_dim, 64);
    assert_int_equal(c.rope_scaling, PE_ROPE_YARN); /* GptOssConfig's rope_scaling */
    assert_true(c.rope_factor == 32 && c.rope_base == 150000 && !c.yarn_truncate);
    assert_int_equal(c.original_max_position_embeddings, 4096);
    ok("{\"model_type\": \"gpt_oss\", \"num_hidden_layers\": 24, \"num_attention_heads\": 64, "
       "\"rope_scaling\": null}", 1, &c, &in); /* null stays none */
    assert_int_equal(c.rope_scaling, PE_ROPE_NONE);
    assert_string_equal(in.layer_type, "full_attention");
}

/* The families of issue 28's list read from their own code (remote code included): ChatGLM's
 * interleaved half head of kv_channels width and its multi_query groups, Baichuan's positions by
 * size, EXAONE 3's head width from hidden_size alone, Falcon's first (RefinedWeb) configs, the
 * window Mistral's code puts on every layer, and the refusals of ChatGLM's ambiguous keys,
 * MiniCPM's sparse attention and DeepSeek-V3.2's indexer. */
static void remote_code_families(void **state) {
    (void)state;
    pe_config c;
    pe_hf_layer_info in;
    /* ChatGLM3: pairs (2i, 2i+1) on the leading kv_channels / 2 dims, base 10000, groups with multi_query_attention */
    const char *glm = "{\"model_type\": \"chatglm\", \"hidden_size\": 4096, \"num_attention_heads\": 32, "
                      "\"num_layers\": 28, \"kv_channels\": 96, \"multi_query_attention\": %s, "
                      "\"multi_query_group_num\": 2, \"original_rope\": true}";
    char text[600];
    snprintf(text, sizeof text, glm, "true");
    ok(text, 27, &c, &in);
    assert_int_equal(in.n_layers, 28);
    assert_int_equal(in.head_dim, 96);
    assert_int_equal(c.rotary_dim, 48);
    assert_int_equal(c.rope_layout, PE_ROPE_INTERLEAVED);
    assert_true(c.rope_base == 10000);
    assert_int_equal(c.kv_heads, 2);
    snprintf(text, sizeof text, glm, "false");
    ok(text, 0, &c, &in);
    assert_false(c.kv_heads == 2);
    /* Baichuan: RoPE at hidden_size 4096 (7B), ALiBi otherwise (13B), head width hidden / heads */
    ok("{\"model_type\": \"baichuan\", \"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_hidden_layers\": 32}",
       0, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ROPE);
    assert_int_equal(c.rope_layout, PE_ROPE_HALF);
    ok("{\"model_type\": \"baichuan\", \"hidden_size\": 5120, \"num_attention_heads\": 40, \"num_hidden_layers\": 40}",
       39, &c, &in);
    assert_int_equal(c.method, PE_METHOD_ALIBI);
    assert_int_equal(in.head_dim, 128);
    /* EXAONE 3: num_layers, and a head_dim key its code does not read */
    ok("{\"model_type\": \"exaone\", \"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_layers\": 32, "
       "\"head_dim\": 64, \"rope_theta\": 1000000}", 31, &c, &in);
    assert_int_equal(in.head_dim, 128);
    assert_true(c.rope_base == 1000000);
    /* Falcon-40B's RefinedWeb config: n_head_kv makes the grouped layout (HF's converter) */
    ok("{\"model_type\": \"RefinedWeb\", \"hidden_size\": 8192, \"n_head\": 128, \"n_head_kv\": 8, \"n_layer\": 60}",
       59, &c, &in);
    assert_int_equal(c.kv_heads, 8);
    assert_int_equal(in.n_layers, 60);
    ok("{\"model_type\": \"RefinedWebModel\", \"hidden_size\": 4544, \"n_head\": 71, \"n_layer\": 32, "
       "\"multi_query\": true}", 0, &c, &in);
    assert_int_equal(c.kv_heads, 1);
    /* Mistral: the config's window (4096 where it has none) on every layer; null: none */
    ok("{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_hidden_layers\": 32}",
       5, &c, &in);
    assert_string_equal(in.layer_type, "sliding_attention");
    assert_int_equal(in.window, 4096);
    ok("{\"model_type\": \"mixtral\", \"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_hidden_layers\": 32}",
       5, &c, &in);
    assert_string_equal(in.layer_type, "full_attention");
    ok("{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
       "\"sliding_window\": null}", 5, &c, &in);
    assert_string_equal(in.layer_type, "full_attention");
    /* refusals */
    const char *base = "\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2";
    snprintf(text, sizeof text, "{\"model_type\": \"chatglm\", \"position_encoding_2d\": true, %s}", base);
    refused(text, NULL, "2D positions");
    snprintf(text, sizeof text, "{\"model_type\": \"chatglm\", \"rope_ratio\": 16, %s}", base);
    refused(text, NULL, "rope_ratio");
    snprintf(text, sizeof text, "{\"model_type\": \"chatglm\", \"rope_ratio\": 1, \"original_rope\": false, %s}", base);
    refused(text, NULL, "original_rope");
    snprintf(text, sizeof text, "{\"model_type\": \"chatglm\", \"rope_ratio\": 1.0, \"original_rope\": true, %s}", base);
    ok(text, 0, &c, &in);
    snprintf(text, sizeof text, "{\"model_type\": \"minicpm\", \"sparse_config\": {\"kernel_size\": 32}, %s}", base);
    refused(text, NULL, "InfLLM-v2");
    snprintf(text, sizeof text, "{\"model_type\": \"deepseek_v32\", %s}", base);
    refused(text, NULL, "index_topk");
}

static void refusals(void **state) {
    (void)state;
    const char *base = "\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2";
    char text[400];
    snprintf(text, sizeof text, "{\"model_type\": \"lama\", %s}", base);
    refused(text, NULL, "nearest known: llama");
    snprintf(text, sizeof text, "{%s}", base);
    refused(text, NULL, "no model_type");
    refused(text, "lamma", "'lamma' is not a family posenc knows (nearest: llama");
    snprintf(text, sizeof text, "{\"model_type\": \"falcon\", \"alibi\": true, %s}", base);
    refused(text, NULL, "sqrt(head_dim)");
    snprintf(text, sizeof text, "{\"model_type\": \"gemma2\", %s}", base);
    refused(text, NULL, "soft-capped");
    snprintf(text, sizeof text, "{\"model_type\": \"longcat_flash\", %s}", base);
    refused(text, NULL, "sqrt(hidden / lora rank)");
    /* hf_assume: a config of an unknown family read as Llama's code reads it */
    pe_config c;
    pe_hf_layer_info in;
    pe_err err;
    snprintf(text, sizeof text, "{\"model_type\": \"my_llama\", \"rope_theta\": 321, %s}", base);
    if (read_json(text, 1, "llama", &c, &in, &err)) fail_msg("%s", err.msg);
    assert_true(c.rope_base == 321);
    assert_string_equal(in.family, "llama");
    /* Gemma 2 with the soft-capping switched off is read */
    snprintf(text, sizeof text, "{\"model_type\": \"gemma2\", \"attn_logit_softcapping\": null, "
             "\"query_pre_attn_scalar\": 144, %s}", base);
    if (read_json(text, 1, NULL, &c, &in, &err)) fail_msg("%s", err.msg);
    assert_true(fabs(c.scale - 1.0 / 12) < 1e-15);
    assert_string_equal(in.layer_type, "full_attention");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(which_layers_rotate),
        cmocka_unit_test(layouts_slices_aliases),
        cmocka_unit_test(heads_scales_alibi),
        cmocka_unit_test(ministral3_query_scaling),
        cmocka_unit_test(gemma4_layers),
        cmocka_unit_test(gpt_oss_sinks),
        cmocka_unit_test(refusals),
        cmocka_unit_test(remote_code_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
