/* The model-family table (hf_family.h): one row per HF model_type, read from that family's
 * modeling_*.py and configuration_*.py in huggingface/transformers (paths below are under
 * src/transformers/models/, the commit of the stored copy that was read in brackets), or for a
 * family whose code ships with its checkpoints (ChatGLM, InternLM2, Baichuan) from the repository
 * named before the path (a copy of that code, or vLLM's reading of it). A row
 * states only what the code decides beyond config.json; the rest (rope_parameters, layer_types,
 * partial_rotary_factor, ...) is read from the config as every family writes it. */
#include <string.h>

#include "../internal.h"
#include "hf_family.h"

#define ROW(mt, src, ...) {.model_type = mt, .source = src, __VA_ARGS__}

static const hf_family FAMILIES[] = {
    /* Llama: rotate_half over the whole head, scaling head_dim**-0.5 */
    ROW("llama", "llama/modeling_llama.py LlamaAttention, rotate_half [5dd4a635]; configuration_llama.py LlamaConfig [008e5743]"),
    /* Llama's attention under other names (rotate_half over the whole head, head_dim**-0.5); Mistral's
     * passes the config's sliding_window to every layer (and MistralModel.forward masks by it), so a
     * config with one and no layer_types slides everywhere; MistralConfig's sliding_window is 4096 where
     * the config has none (MixtralConfig's None, Phi3Config's None) */
#define MISTRAL_WINDOW "mistral/modular_mistral.py MistralAttention.forward (sliding_window=config.sliding_window), " \
    "MistralModel.forward (create_sliding_window_causal_mask) [0096ba4f]; configuration_mistral.py MistralConfig "      \
    "(sliding_window 4096) [001f85b3]"
    ROW("mistral", "mistral/modeling_mistral.py MistralAttention, rotate_half [93e0020c]; " MISTRAL_WINDOW "; "
        "configuration_mistral.py MistralConfig [0b07a74c]", .slides = 1, .window_default = 4096),
    ROW("mistral3", "mistral3/configuration_mistral3.py Mistral3Config (a text_config without model_type is mistral) "
        "[ae005ce1]; mistral/modeling_mistral.py MistralAttention [93e0020c]; " MISTRAL_WINDOW, .slides = 1,
        .window_default = 4096),
    ROW("mixtral", "mixtral/modular_mixtral.py MixtralAttention(MistralAttention) [7792ab1a], MixtralModel(MistralModel) "
        "[008f5c8c]; " MISTRAL_WINDOW "; configuration_mixtral.py MixtralConfig [ad467bd7] (sliding_window None) [008e5743]", .theta_default = 1000000.0,
        .slides = 1),
    ROW("qwen2", "qwen2/modeling_qwen2.py Qwen2Attention, rotate_half [63bb7237]; configuration_qwen2.py Qwen2Config "
        "(layer_types: max_window_layers, use_sliding_window) [caa31776]", .qwen_windows = 1),
    ROW("qwen2_moe", "qwen2_moe/modular_qwen2_moe.py (LlamaAttention, rotate_half) [8fb1742f]; configuration_qwen2_moe.py "
        "Qwen2MoeConfig [765e4fbc]"),
    ROW("qwen3", "qwen3/modeling_qwen3.py Qwen3Attention (q_norm, k_norm before the rotation), rotate_half [9ee3f431]; "
        "configuration_qwen3.py Qwen3Config (layer_types: max_window_layers, use_sliding_window) [1f3ae2b3]", .qwen_windows = 1),
    ROW("qwen3_moe", "qwen3_moe/modeling_qwen3_moe.py Qwen3MoeAttention, rotate_half [16b6c53c]; configuration_qwen3_moe.py "
        "Qwen3MoeConfig [26f4b0f6]"),
    ROW("arcee", "arcee/modular_arcee.py ArceeConfig(LlamaConfig), ArceeForCausalLM(LlamaForCausalLM: Llama's attention; "
        "only the MLP differs) [1505215d]"),
    /* StarCoder2: Mistral's attention, the config's sliding_window on every layer (None by default) */
    ROW("starcoder2", "starcoder2/modular_starcoder2.py Starcoder2Attention (Mistral's rotate_half; forward: "
        "sliding_window=getattr(self.config, \"sliding_window\", None) on every layer) [ae005ce1]; "
        "configuration_starcoder2.py Starcoder2Config (sliding_window None) [77efc55c]", .slides = 1),
    ROW("gemma", "gemma/modeling_gemma.py GemmaAttention (scaling head_dim**-0.5), rotate_half [c4cdd1a0]; "
        "configuration_gemma.py GemmaConfig [008e5743]"),
    /* Gemma 2: query_pre_attn_scalar**-0.5, even layers slide; its tanh soft-capping of the
     * logits (attn_logit_softcapping, 50) posenc does not compute */
    ROW("gemma2", "gemma2/modeling_gemma2.py Gemma2Attention (scaling, softcap, sliding_window on even layers) "
        "[9a80143c]; configuration_gemma2.py Gemma2Config (layer_types (i + 1) % 2, attn_logit_softcapping 50) [008e5743]",
        .scale = HF_SCALE_QUERY_PRE_ATTN, .pattern = 2, .refuse_key = "attn_logit_softcapping", .refuse_default = 1,
        .refuse = "its attention logits are soft-capped (cap tanh(s / cap), attn_logit_softcapping), which posenc does "
                  "not compute"),
    /* Gemma 3: query_pre_attn_scalar**-0.5, every 6th layer full, sliding layers at
     * rope_local_base_freq without scaling (read from the config as every family writes it) */
    ROW("gemma3_text", "gemma3/modeling_gemma3.py Gemma3Attention (scaling), Gemma3DecoderLayer.forward "
        "(position_embeddings_local) [f14d0cbc]; modular_gemma3.py Gemma3TextConfig (sliding_window_pattern 6) [d903f323]",
        .scale = HF_SCALE_QUERY_PRE_ATTN, .pattern = 6, .theta_default = 1000000.0),
    ROW("gemma3", "gemma3/modeling_gemma3.py (text_config: gemma3_text) [f14d0cbc]", .scale = HF_SCALE_QUERY_PRE_ATTN,
        .pattern = 6, .theta_default = 1000000.0),
    /* Phi-2: the leading partial_rotary_factor (0.5) of the head */
    ROW("phi", "phi/modular_phi.py PhiAttention (rotary_ndims) [b39782da]; configuration_phi.py PhiConfig "
        "(partial_rotary_factor 0.5) [90f2781a]", .fraction_default = 0.5),
    /* Phi-3, Phi-3.5, Phi-4-mini (model_type phi3): rotate_half on the leading
     * int(head_dim * partial_rotary_factor) dims (Phi-4-mini's 0.75: 96 of 128), the LongRoPE factors
     * one per rotated pair; the config's sliding_window on every layer (Phi3Attention.forward) */
    ROW("phi3", "phi3/modular_phi3.py apply_rotary_pos_emb (rotary_dim = cos.shape[-1]), Phi3Attention.forward "
        "(sliding_window=config.sliding_window), Phi3Model (MistralModel's mask) [2b6c089d]; configuration_phi3.py "
        "Phi3Config [d7991107]", .slides = 1),
    ROW("phimoe", "phimoe/modular_phimoe.py PhimoeRotaryEmbedding.forward (short_mscale, long_mscale) [4a435530]; "
        "configuration_phimoe.py PhimoeConfig [23925e16]", .refuse_key = "rope_scaling",
        .refuse = "its LongRoPE multiplies cos and sin by short_mscale or long_mscale (PhimoeRotaryEmbedding.forward), "
                  "which posenc's longrope does not"),
    /* SmolLM3: NoPE every no_rope_layer_interval-th (4) layer, as no_rope_layers says */
    ROW("smollm3", "smollm3/modular_smollm3.py SmolLM3Attention (use_rope = no_rope_layers[layer_idx]), SmolLM3Config "
        "(no_rope_layer_interval 4) [cbc6e94a]", .rope_on = HF_ON_INTERVAL, .theta_default = 2000000.0),
    /* Granite: the softmax scale is attention_multiplier itself (default 1); its embedding_multiplier,
     * residual_multiplier and logits_scaling act outside attention (GraniteConfig [008e5743]) */
    ROW("granite", "granite/modular_granite.py GraniteAttention (scaling = attention_multiplier) [553b10de]; "
        "configuration_granite.py GraniteConfig [90f2781a]", .scale = HF_SCALE_MULTIPLIER),
    ROW("granitemoe", "granitemoe/modular_granitemoe.py GraniteMoeAttention (scaling = attention_multiplier) [94cb76e8]; "
        "configuration_granitemoe.py GraniteMoeConfig [546b1438]", .scale = HF_SCALE_MULTIPLIER),
    /* Qwen2-VL: M-RoPE sections of the half layout (mrope_section); Qwen3-VL's code interleaves
     * the sections whatever the config says */
    ROW("qwen2_vl", "qwen2_vl/modeling_qwen2_vl.py apply_multimodal_rotary_pos_emb [928b5565]; configuration_qwen2_vl.py "
        "Qwen2VLConfig [4efabc6e]", .theta_default = 1000000.0),
    ROW("qwen2_5_vl", "qwen2_5_vl/modular_qwen2_5_vl.py Qwen2_5_VLConfig(Qwen2VLConfig), "
        "Qwen2_5_VLForConditionalGeneration(Qwen2VLForConditionalGeneration: Qwen2-VL's decoder layers) [ad46b878]",
        .theta_default = 1000000.0),
    ROW("qwen3_vl_text", "qwen3_vl/modeling_qwen3_vl.py Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope [68a7b7e2]; "
        "configuration_qwen3_vl.py Qwen3VLTextConfig [e1b55167]", .sections_layout = "interleaved", .theta_default = 5000000.0),
    ROW("qwen3_vl", "qwen3_vl/configuration_qwen3_vl.py Qwen3VLConfig (text_config: qwen3_vl_text) [e1b55167]",
        .sections_layout = "interleaved", .theta_default = 5000000.0),
    /* GPT-OSS: Llama's rotation by halves, a learned sink logit per head in every softmax, even
     * layers sliding (128), YaRN x32 at base 150000 when the config gives no rope_scaling */
    ROW("gpt_oss", "gpt_oss/modular_gpt_oss.py GptOssAttention (sinks), eager_attention_forward (the sink column), "
        "_apply_rotary_emb (chunk into halves) [ede92a87]; configuration_gpt_oss.py GptOssConfig (head_dim 64, "
        "sliding_window 128, rope_theta 150000, rope_scaling yarn, layer_types (i + 1) % 2) [828a27fd]", .sinks = 1,
        .pattern = 2, .theta_default = 150000.0, .head_dim_default = 64, .window_default = 128,
        .rope_default = "{\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, \"beta_slow\": 1.0, "
                        "\"truncate\": false, \"original_max_position_embeddings\": 4096}"),
    /* Llama 4: NoPE every no_rope_layer_interval-th layer (no_rope_layers), complex pairs,
     * the NoPE layers' query temperature, default_theta 500000 */
    ROW("llama4_text", "llama4/modeling_llama4.py Llama4TextAttention (use_rope, attn_temperature_tuning), apply_rotary_emb "
        "(view_as_complex) [000c33fd]; configuration_llama4.py Llama4TextConfig (default_theta, no_rope_layer_interval) [008e5743]",
        .rope_on = HF_ON_INTERVAL, .layout = HF_INTERLEAVED, .temperature = 1, .chunked = 1, .theta_default = 500000.0),
    ROW("llama4", "llama4/configuration_llama4.py Llama4Config (text_config: llama4_text) [008e5743]", .rope_on = HF_ON_INTERVAL,
        .layout = HF_INTERLEAVED, .temperature = 1, .chunked = 1, .theta_default = 500000.0),
    /* Cohere: repeat_interleave(freqs, 2) and rotate_half on 0::2 / 1::2, default_theta 500000 */
    ROW("cohere", "cohere/modeling_cohere.py CohereRotaryEmbedding.forward, rotate_half [015bfeb8]; configuration_cohere.py "
        "CohereConfig.default_theta [008e5743]", .layout = HF_INTERLEAVED, .theta_default = 500000.0),
    /* Cohere2: RoPE only where the layer has a sliding window; every 4th layer full and NoPE */
    ROW("cohere2", "cohere2/modeling_cohere2.py Cohere2Attention.forward (if self.sliding_window is not None), "
        "Cohere2RotaryEmbedding [015bfeb8]; configuration_cohere2.py Cohere2Config.__post_init__ (sliding_window_pattern 4) "
        "[008e5743]", .rope_on = HF_ON_SLIDING, .layout = HF_INTERLEAVED, .pattern = 4),
    /* GLM, GLM-4: pairs (2i, 2i+1) of the leading int(head_dim * 0.5) dims */
    ROW("glm", "glm/modeling_glm.py apply_rotary_pos_emb (repeat_interleave), rotate_half (0::2, 1::2) [00d4b3d2]; "
        "configuration_glm.py GlmConfig (partial_rotary_factor 0.5) [008e5743]", .layout = HF_INTERLEAVED,
        .fraction_default = 0.5),
    ROW("glm4", "glm4/modeling_glm4.py apply_rotary_pos_emb, rotate_half [00d01786]; configuration_glm4.py Glm4Config "
        "(partial_rotary_factor 0.5) [008e5743]", .layout = HF_INTERLEAVED, .fraction_default = 0.5),
    /* GLM-4 MoE: Llama's rotate_half (not GLM's), leading half of the head */
    ROW("glm4_moe", "glm4_moe/modeling_glm4_moe.py rotate_half, apply_rotary_pos_emb [000c33fd]; configuration_glm4_moe.py "
        "Glm4MoeConfig (partial_rotary_factor 0.5) [c7ec229a]", .fraction_default = 0.5),
    /* GPT-NeoX: rotary_pct (0.25) of the head, base rotary_emb_base */
    ROW("gpt_neox", "gpt_neox/modular_gpt_neox.py GPTNeoXAttention (rotary_ndims), apply_rotary_pos_emb [fbc88309]; "
        "configuration_gpt_neox.py GPTNeoXConfig (rotary_pct 0.25, rotary_emb_base) [008e5743]",
        .theta = "rotary_emb_base|rope_theta", .fraction = "rotary_pct|partial_rotary_factor", .fraction_default = 0.25),
    /* GPT-J: rotate_every_two over the leading rotary_dim (64) dims, base 10000 fixed in
     * create_sinusoidal_positions, GPT-2's key names */
    ROW("gptj", "gptj/modeling_gptj.py create_sinusoidal_positions, rotate_every_two, GPTJAttention.forward [00b676f8]; "
        "configuration_gptj.py GPTJConfig (n_layer, n_head, n_embd, rotary_dim 64) [0bedd330]", .layout = HF_INTERLEAVED,
        .layers = "n_layer|num_hidden_layers", .heads = "n_head|num_attention_heads", .hidden = "n_embd|hidden_size",
        .theta = "-", .rotary_dim = "rotary_dim", .rotary_dim_default = 64, .theta_default = 10000.0),
    /* Falcon, its three shapes: 7B (multi_query: one kv head, parallel_attn), 40B/180B
     * (new_decoder_architecture: num_kv_heads), both Llama's rotation; falcon-rw (alibi: true, one kv
     * head per head) refused: its ALiBi is divided by sqrt(head_dim) with the scores. FalconConfig
     * takes n_embed for hidden_size where given */
#define FALCON_ALIBI .refuse_key = "alibi", .refuse = "its ALiBi (alibi: true) is added to the scores before they are " \
    "divided by sqrt(head_dim) (FalconAttention.forward), so its slopes are posenc's divided by sqrt(head_dim) "     \
    "(the tensor alibi_slopes would state them)"
#define FALCON_KEYS .layers = "num_hidden_layers|n_layer", .heads = "num_attention_heads|n_head", \
    .kv_heads = "num_kv_heads|n_head_kv", .hidden = "n_embed|hidden_size"
    ROW("falcon", "falcon/modeling_falcon.py FalconAttention.__init__ (num_kv_heads), FalconAttention.forward (alibi, "
        "inv_norm_factor), rotate_half [00dcc6dd]; configuration_falcon.py FalconConfig (multi_query, "
        "new_decoder_architecture, alibi) [5fd8edad], FalconConfig.__init__ (n_embed) [05585536]", .kv = HF_KV_FALCON,
        FALCON_KEYS, FALCON_ALIBI),
    /* Falcon's first configs (remote code; RefinedWeb: 40B, RefinedWebModel: 7B and falcon-rw): HF's
     * converter makes them falcon configs, n_head_kv becoming num_kv_heads with new_decoder_architecture
     * where present (absent: false); then Falcon's code */
#define REFINEDWEB(mt)                                                                                                \
    ROW(mt, "falcon/convert_custom_code_checkpoint.py (RefinedWeb, RefinedWebModel -> falcon; n_head, n_layer, "       \
        "n_head_kv renamed; new_decoder_architecture = n_head_kv present) [d05a9215]; falcon/modeling_falcon.py "       \
        "FalconAttention [00dcc6dd]", .kv = HF_KV_FALCON, .kv_flag = "n_head_kv", FALCON_KEYS, FALCON_ALIBI)
    REFINEDWEB("RefinedWeb"),
    REFINEDWEB("RefinedWebModel"),
#undef REFINEDWEB
    /* StableLM: the leading 0.25 of the head */
    ROW("stablelm", "stablelm/modeling_stablelm.py StableLmAttention (rotary_ndims), rotate_half [00dcc6dd]; "
        "configuration_stablelm.py StableLmConfig (partial_rotary_factor 0.25) [05cd1ec1]", .fraction_default = 0.25),
    /* OLMo: Llama's attention; clip_qkv clamps the projections before the heads form (the caller's q, k) */
    ROW("olmo", "olmo/modeling_olmo.py OlmoAttention, rotate_half [38e888f5]; modular_olmo.py OlmoAttention.forward "
        "(clip_qkv before the view and the rotation) [00a98e71]; configuration_olmo.py OlmoConfig [008e5743]"),
    ROW("olmo2", "olmo2/modeling_olmo2.py Olmo2Attention, rotate_half [000c33fd]; configuration_olmo2.py Olmo2Config [008e5743]"),
    /* OLMo 3: every layer rotates; windows on three of four layers; default_theta 500000 */
    ROW("olmo3", "olmo3/modeling_olmo3.py Olmo3Attention.forward [0233e509]; configuration_olmo3.py Olmo3Config "
        "(layer_types, default_theta) [008e5743]", .pattern = 4, .theta_default = 500000.0),
    /* EXAONE 4: RoPE on the sliding layers only (when a window is set), every 4th layer global NoPE */
    ROW("exaone4", "exaone4/modeling_exaone4.py Exaone4Attention.forward (if self.sliding_window is None or "
        "self.is_sliding) [0205eec1]; configuration_exaone4.py Exaone4Config (sliding_window_pattern 4) [008e5743]",
        .rope_on = HF_ON_NOT_GLOBAL, .pattern = 4),
    /* MiniCPM3: DeepSeek's latent attention, but rotate_half always and no mscale */
    ROW("minicpm3", "minicpm3/modeling_minicpm3.py MiniCPM3Attention (scaling qk_head_dim**-0.5), apply_rotary_pos_emb "
        "[3904ea4b]; configuration_minicpm3.py MiniCPM3Config [3904ea4b]", .mla = 1),
    /* EXAONE 3 / 3.5 (exaone): rotate_half over the whole hidden_size / num_attention_heads head (no
     * head_dim key read), scores / sqrt(head_dim), rope_theta and rope_scaling through HF's rope
     * functions, num_layers for the layer count */
    ROW("exaone", "exaone/modeling_exaone.py ExaoneSelfAttention (head_dim = embed_dim // num_heads, / "
        "math.sqrt(head_dim)), ExaoneRotaryEmbedding (ROPE_INIT_FUNCTIONS[rope_type]), rotate_half [12a9bfaa]; "
        "configuration_exaone.py ExaoneConfig (num_layers, attribute_map) [12a9bfaa]",
        .layers = "num_layers|num_hidden_layers", .head_dim_key = "-"),
    /* InternLM2 (remote code): Llama's rotate_half over hidden_size / num_attention_heads heads,
     * rope_theta, rope_scaling {type: linear | dynamic, factor} as HF Llama's of its time (dynamic:
     * the base from the cached length past max_position_embeddings), scores / sqrt(head_dim) */
    ROW("internlm2", "NanSang2000/S1mpleAgent (internlm2-chat-7b's files): modeling_internlm2.py InternLM2Attention "
        "(head_dim, _init_rope, / math.sqrt(head_dim)), InternLM2DynamicNTKScalingRotaryEmbedding, rotate_half "
        "[0143463e]", .head_dim_key = "-"),
    /* MiniCPM 1/2/4 (minicpm): Llama's attention and rotation (MiniCPMAttention(LlamaAttention),
     * scaling head_dim**-0.5); its longrope picks long_factor past original_max_position_embeddings as
     * HF's; scale_emb, scale_depth and dim_model_base scale embeddings, residuals and logits only;
     * InfLLM-v2 sparse attention (sparse_config) refused as the class refuses it */
    ROW("minicpm", "minicpm/modular_minicpm.py MiniCPMAttention(LlamaAttention), MiniCPMRotaryEmbedding.forward "
        "(longrope), MiniCPMDecoderLayer (residual_scale), MiniCPMModel.__init__ (sparse_config) [346cd6ff]",
        .refuse_key = "sparse_config",
        .refuse = "its InfLLM-v2 sparse attention (sparse_config) selects the keys each query attends to, which "
                  "posenc does not compute (HF's MiniCPMModel refuses it too)"),
    /* ChatGLM2/3 (chatglm, remote code): GLM's pairs (2i, 2i+1) on the leading kv_channels // 2 dims
     * of kv_channels-wide heads at base 10000 (fixed in RotaryEmbedding.forward_impl; a rope_theta
     * would state another), multi_query_group_num kv heads with multi_query_attention, softmax scale
     * kv_channels**-0.5 (CoreAttention: norm_factor times coeff, then the scores times coeff),
     * num_layers; positions 0, 1, ... (get_position_ids) */
    ROW("chatglm", "THUDM/language_filter_chatglm3: modeling_chatglm.py ChatGLMModel.__init__ (RotaryEmbedding("
        "rotary_dim // 2), rotary_dim = kv_channels), RotaryEmbedding.forward_impl (base 10000), apply_rotary_pos_emb "
        "(rot_dim, pairs), SelfAttention (multi_query_group_num), CoreAttention (norm_factor, coeff) [fc4c6766]; "
        "ChatGLM-6B's: samson-wang/chatglm-6b-huggingface: modeling_chatglm.py SelfAttention.forward "
        "(position_encoding_2d) [867860a6]; rope_ratio, original_rope: vllm-project/vllm "
        "vllm/model_executor/models/chatglm.py GLMAttention (base=10000 * rope_ratio, is_neox_style = not "
        "original_rope) [028aedf6], ztxz16/fastllm src/models/chatglm.cpp ChatGLMModel::UpdateRotaryPosEmb [15bcc217]",
        .layout = HF_INTERLEAVED, .fraction_default = 0.5, .theta_default = 10000.0, .layers = "num_layers",
        .head_dim_key = "kv_channels", .kv = HF_KV_FLAG, .kv_flag = "multi_query_attention",
        .kv_heads = "multi_query_group_num", .refuse_key = "position_encoding_2d|rope_ratio!=1|original_rope!=true",
        .refuse = "ChatGLM-6B's 2D positions (position_encoding_2d: half of each head rotates by the token's position, "
                  "half by its block's) posenc does not compute; and the modeling_chatglm.py each checkpoint ships "
                  "reads rope_ratio and original_rope its own way (fastllm divides the positions by rope_ratio for "
                  "one kind of file and multiplies the base 10000 for the other; vLLM multiplies the base, and "
                  "reads original_rope false as rotated halves), which the config does not say: write rope_theta "
                  "(10000 x rope_ratio) or rope_scaling {\"type\": \"linear\", \"factor\": rope_ratio} in its place"),
    /* Baichuan (remote code; model_type baichuan for every size): Baichuan-7B and Baichuan2-7B
     * rotate_half over the whole head (hidden_size 4096), Baichuan-13B and Baichuan2-13B ALiBi of
     * Press's slopes on the key index after QK^T / sqrt(head_dim), the rule vLLM's BaichuanForCausalLM
     * applies; one kv head per head (W_pack) */
    ROW("baichuan", "vllm-project/vllm vllm/model_executor/models/baichuan.py BaichuanForCausalLM.__init__ "
        "(hidden_size 4096: ROPE, else ALIBI), BaiChuanForCausalLM (ROPE), BaiChuanAttention (get_rope over head_dim, "
        "scaling head_dim**-0.5, _get_alibi_slopes) [6b065994]; jrd77/Baichuan2-13B-Chat: modeling_baichuan.py "
        "_get_interleave, _gen_alibi_mask, BaichuanAttention.forward (/ math.sqrt(head_dim) + mask) [35e3d5af]",
        .positions = HF_ALIBI, .rope_when = "hidden_size=4096", .head_dim_key = "-"),
    /* ERNIE 4.5: GLM-style pairs over the whole head, default_theta 500000 */
    ROW("ernie4_5", "ernie4_5/modeling_ernie4_5.py apply_rotary_pos_emb (repeat_interleave), rotate_half [016bc8ef]; "
        "configuration_ernie4_5.py Ernie4_5Config.default_theta [008e5743]", .layout = HF_INTERLEAVED,
        .theta_default = 500000.0),
    /* DeepSeek-V2: complex pairs of the last qk_rope_head_dim dims, scaling qk_head_dim**-0.5 */
    ROW("deepseek_v2", "deepseek_v2/modeling_deepseek_v2.py DeepseekV2Attention (scaling), apply_rotary_emb "
        "(view_as_complex) [0233e509]; configuration_deepseek_v2.py DeepseekV2Config [008e5743]",
        .layout = HF_INTERLEAVED, .mla = 1),
    /* DeepSeek-V3: rope_interleave (default true) picks the pairs; YaRN's mscale_all_dim squared
     * on the softmax scale */
    ROW("deepseek_v3", "deepseek_v3/modeling_deepseek_v3.py DeepseekV3Attention (scaling *= mscale * mscale, "
        "rope_interleave), apply_rotary_pos_emb_interleave [00b676f8]; configuration_deepseek_v3.py DeepseekV3Config "
        "[001f85b3]", .layout = HF_INTERLEAVED_KEY, .scale = HF_SCALE_MSCALE, .mla = 1),
    /* DeepSeek-V4: one kv head that is the keys and the values, rotated on the head's last
     * qk_rope_head_dim dims in adjacent pairs, the output rotated back; learned sinks; a window of
     * 128 over every layer's own keys, beside the CSA / HCA layers' compressed entries (base
     * compress_rope_theta with YaRN, attention factor 1) */
    ROW("deepseek_v4", "deepseek_v4/modeling_deepseek_v4.py DeepseekV4Attention.forward (kv rotated as the keys, "
        "attn_output rotated with -sin, sinks, scaling head_dim**-0.5, rope_layer_type main / compress), "
        "apply_rotary_pos_emb (the last rope_dim dims, pairs 0::2 / 1::2), DeepseekV4HCACompressor (entry positions "
        "i * compress_rate + first_window_position) [36145589]; configuration_deepseek_v4.py DeepseekV4Config "
        "(head_dim 512, num_key_value_heads 1, sliding_window 128, rope_theta 10000, compress_rope_theta 160000, "
        "__post_init__: layer_types, compress_rates, partial_rotary_factor, rope_parameters) [b5b741e5]",
        .layout = HF_INTERLEAVED, .sinks = 1, .head_dim_default = 512, .kv_heads_default = 1, .window_default = 128,
        .theta_default = 10000.0, .fraction_default = 64.0 / 512.0, .slice_last = 1, .values_rotated = 1,
        .compressed_layers = 1),
    /* Persimmon: the leading 0.5 of the head, base 25000 */
    ROW("persimmon", "persimmon/modeling_persimmon.py PersimmonAttention (rotary_ndims) [00dcc6dd]; "
        "configuration_persimmon.py PersimmonConfig (partial_rotary_factor 0.5, rope_theta 25000) [038869d4]",
        .fraction_default = 0.5, .theta_default = 25000.0),
    /* Nemotron: the leading 0.5 of the head */
    ROW("nemotron", "nemotron/modeling_nemotron.py apply_rotary_pos_emb (rot_dim) [001ccfcb]; configuration_nemotron.py "
        "NemotronConfig (partial_rotary_factor 0.5) [05cd1ec1]", .fraction_default = 0.5),
    /* Bloom: ALiBi, added after QK^T / sqrt(head_dim) (baddbmm's beta and alpha), GPT-2's key names */
    ROW("bloom", "bloom/modeling_bloom.py build_alibi_tensor, BloomAttention.forward (baddbmm beta, inv_norm_factor) "
        "[0078a6cd]", .positions = HF_ALIBI, .layers = "n_layer|num_hidden_layers", .heads = "n_head|num_attention_heads"),
    /* MPT: ALiBi always (alibi_bias_max 8: posenc's slopes), added after the scale */
    ROW("mpt", "mpt/modeling_mpt.py build_mpt_alibi_tensor (alibi_bias_max 8), MptModel.forward, MptAttention.forward "
        "[43526201]; configuration_mpt.py MptConfig (n_layers, n_heads, d_model) [79f1fc71]", .positions = HF_ALIBI,
        .layers = "n_layers", .heads = "n_heads", .hidden = "d_model"),
    /* ERNIE-4.5-VL: GLM-style pairs over the whole head, M-RoPE with rows and columns alternating
     * and time last (its mrope_section is (h, w, t), [22, 22, 20] when absent), default_theta 500000 */
#define ERNIE_VL(mt, text)                                                                                          \
    ROW(mt, text "ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py Ernie4_5_VLMoeTextRotaryEmbedding "                      \
        "(compute_default_rope_parameters, recomposition_to_3d), rotate_half_text [4f2fa85a]; "                        \
        "configuration_ernie4_5_vl_moe.py Ernie4_5_VL_MoeTextConfig.default_theta [1fa569fa]",                         \
        .layout = HF_INTERLEAVED, .theta_default = 500000.0, .sections_layout = "alternating",                       \
        .sections_order = "hwt", .sections_default = "[22, 22, 20]")
    ERNIE_VL("ernie4_5_vl_moe_text", ""),
    ERNIE_VL("ernie4_5_vl_moe", "configuration_ernie4_5_vl_moe.py Ernie4_5_VL_MoeConfig (text_config) [1fa569fa]; "),
#undef ERNIE_VL
    /* what posenc does not compute yet: refused by name */
    /* Ministral 3 (Mistral 3's text model): Mistral's rotation, every query times
     * 1 + beta ln(1 + floor(p / L0)) after it (llama_4_scaling_beta, L0 the rope parameters'
     * original_max_position_embeddings) */
    ROW("ministral3", "ministral3/modeling_ministral3.py Ministral3Attention.forward, _get_llama_4_attn_scale, rotate_half "
        "[00b364c7]; configuration_ministral3.py Ministral3Config (rope_parameters: yarn, llama_4_scaling_beta 0.1) "
        "[008e5743]"),
    /* Mistral 4: DeepSeek's latent attention (rope_interleave, mscale^2 on the scale) with the
     * same query scaling */
    ROW("mistral4", "mistral4/modeling_mistral4.py Mistral4Attention (yarn_apply_mscale, rope_interleave), "
        "get_llama_4_attn_scale [0205eec1]; configuration_mistral4.py Mistral4Config [008e5743]",
        .layout = HF_INTERLEAVED_KEY, .scale = HF_SCALE_MSCALE, .mla = 1),
    /* Gemma 4: softmax scale 1 (q_norm, k_norm); 5 sliding layers to 1 full, the last always
     * full; sliding layers rotate the whole head_dim at rope_type default (partial_rotary_factor
     * not read), full ones global_head_dim heads (num_global_key_value_heads with
     * attention_k_eq_v) at proportional RoPE (p-RoPE over the whole global head) */
#define GEMMA4(mt, text)                                                                                           \
    ROW(mt, text "gemma4/modeling_gemma4.py Gemma4TextAttention.__init__ (head_dim, use_alternative_attention, "        \
        "scaling 1.0), Gemma4TextRotaryEmbedding (head_dim_key global_head_dim, compute_default_rope_parameters) "    \
        "[c308a309]; configuration_gemma4.py Gemma4TextConfig (head_dim 256, global_head_dim 512, sliding_window 512, " \
        "layer_types, default rope_parameters) [351f643a]; modeling_rope_utils.py _compute_proportional_rope_parameters", \
        .scale = HF_SCALE_ONE, .pattern = 6, .last_full = 1, .global_shapes = 1, .global_head_dim_default = 512,     \
        .head_dim_default = 256, .default_whole_head = 1, .window_default = 512,                                     \
        .rope_default = "{\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}, "            \
                        "\"full_attention\": {\"rope_type\": \"proportional\", \"partial_rotary_factor\": 0.25, "       \
                        "\"rope_theta\": 1000000.0}}",                                                                \
        .refuse_key = "use_bidirectional_attention", .refuse_value = "all",                                            \
        .refuse = "use_bidirectional_attention all makes every layer bidirectional with a halved window "             \
                  "(Gemma4TextConfig.__post_init__), which posenc does not read")
    GEMMA4("gemma4_text", ""),
    GEMMA4("gemma4", "gemma4/configuration_gemma4.py Gemma4Config (text_config: gemma4_text) [351f643a]; "),
#undef GEMMA4
    /* DeepSeek-V3.2: DeepSeek-V3's MLA, but every layer's lightning indexer keeps only the index_topk
     * keys of highest learned score per query (a mask from its own projections) */
    ROW("deepseek_v32", "deepseek_v32/modular_deepseek_v32.py DeepseekV32Indexer.forward (topk of index_scores), "
        "DeepseekV32Attention.forward (index_mask) [01f8fa55]; configuration_deepseek_v32.py DeepseekV32Config "
        "(index_topk 2048, layer_types deepseek_sparse_attention) [008e5743]", .positions = HF_REFUSE,
        .refuse = "its DeepSeek Sparse Attention masks all but the index_topk (2048) keys a learned indexer scores "
                  "highest for each query, which posenc does not compute; with at most index_topk keys every key is "
                  "kept and it is DeepSeek-V3's attention (--assume deepseek_v3)"),
    ROW("longcat_flash", "longcat_flash/modeling_longcat_flash.py LongcatFlashMLA.forward (mla_scale_q_lora) [0205eec1]",
        .positions = HF_REFUSE,
        .refuse = "its latent attention scales q and the latent keys by sqrt(hidden / lora rank) around the rotation"),
    ROW("gpt_bigcode", "gpt_bigcode/modeling_gpt_bigcode.py GPTBigCodeAttention [00574544]", .positions = HF_REFUSE,
        .refuse = "its positions are learned absolute embeddings added to the input (method learned), not in attention"),
};
enum { N_FAMILIES = sizeof FAMILIES / sizeof FAMILIES[0] };

const hf_family *pe__hf_family(const char *model_type) {
    for (int i = 0; model_type && i < N_FAMILIES; i++)
        if (!strcmp(FAMILIES[i].model_type, model_type)) return &FAMILIES[i];
    return NULL;
}

/* Levenshtein distance of short names (both cut at 63 characters) */
static int distance(const char *a, const char *b) {
    int na = (int)strlen(a), nb = (int)strlen(b), row[64];
    na = na > 63 ? 63 : na, nb = nb > 63 ? 63 : nb;
    for (int j = 0; j <= nb; j++) row[j] = j;
    for (int i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            const int up = row[j], change = diag + (a[i - 1] != b[j - 1]), gap = (up < row[j - 1] ? up : row[j - 1]) + 1;
            row[j] = change < gap ? change : gap;
            diag = up;
        }
    }
    return row[nb];
}

const char *pe__hf_family_nearest(const char *name) {
    const char *best = FAMILIES[0].model_type;
    int bd = 1 << 30;
    for (int i = 0; name && i < N_FAMILIES; i++) {
        const int d = distance(name, FAMILIES[i].model_type);
        if (d < bd && FAMILIES[i].positions != HF_REFUSE) bd = d, best = FAMILIES[i].model_type;
    }
    return best;
}

const char *pe_hf_family_name(int i, const char **source, const char **refused, const char **refused_when) {
    if (i < 0 || i >= N_FAMILIES) return NULL;
    if (source) *source = FAMILIES[i].source;
    if (refused) *refused = FAMILIES[i].refuse;
    if (refused_when) *refused_when = FAMILIES[i].positions == HF_REFUSE ? NULL : FAMILIES[i].refuse_key;
    return FAMILIES[i].model_type;
}
