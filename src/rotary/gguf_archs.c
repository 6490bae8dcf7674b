/* The GGUF architectures whose llama.cpp graph decides more than the generic keys (gguf.c):
 * Gemma, Gemma 3, DeepSeek-V2/V3 (MLA) and Llama 4, each read from the llama.cpp code named
 * with its commit in brackets (ggml-org/llama.cpp; src/llama-model.cpp at 00342301 holds the
 * load_hparams switch and the graphs of that tree, src/models/ the graphs of later ones). Each
 * rule edits the config the generic keys made, in the HF names its family row reads, or refuses
 * what the header cannot say: a key whose reading differs between llama.cpp versions is refused
 * unless it holds the value both read. */
#include <math.h>

#include "gguf.h"

static pe_status refuse(const char *path, pe_err *err, const char *arch, const char *why) {
    return pe_error(err, PE_EKEY, "hf_config %s: GGUF architecture '%s' is not read here: %s", path, arch, why);
}

static void drop_windows(json_t *c) {
    json_object_del(c, "sliding_window");
    json_object_del(c, "sliding_window_pattern");
    json_object_del(c, "layer_types");
    json_object_del(c, "rope_local_base_freq");
}

/* A scalar attention.sliding_window_pattern equal to want, or none */
static int pattern_is(const gguf *g, double want) {
    const gkv *pat = pe__gguf_find(g, "attention.sliding_window_pattern");
    double v;
    return !pat || (pat->n == 1 && pe__gguf_number(pat, 0, &v) && v == want);
}

/* Gemma: NEOX over the whole head (rope.dimension_count, else key_length), q scaled by
 * n_embd_head_v^-1/2 before build_attn's kq_scale 1 (src/models/gemma.cpp llama_model_gemma::graph
 * [860ee92d]): HF gemma's head_dim^-1/2 where the value width is the key width, as the converter
 * writes both from head_dim (conversion/gemma.py GemmaModel.set_gguf_parameters [061b8c5f]; llama.cpp's
 * default value width is embedding_length / head_count, src/llama-model.cpp load_hparams [00342301]). Its
 * load_hparams reads no window key (llama_model_gemma::load_arch_hparams), so none is kept. */
pe_status pe__gguf_gemma(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err) {
    double dv = floor(s->embd / s->heads0);
    const int k = pe__gguf_key(g, "attention.value_length", &dv);
    if (k < 0 || dv != s->hd)
        return refuse(path, err, "gemma", "llama.cpp's gemma scales q by attention.value_length^-1/2 (or embedding_length "
                      "/ head_count's), which differs here from the key width HF's gemma scales by");
    drop_windows(c);
    return PE_OK;
}

/* Gemma 3 (src/llama-model.cpp llama_model::load_hparams LLM_ARCH_GEMMA3 [00342301]; graph
 * src/models/gemma3.cpp llm_build_gemma3<iswa> [569a0092]): attention.sliding_window required;
 * 5 of every 6 layers slide (set_swa_pattern(6): layer il slides where il % 6 < 5,
 * src/llama-hparams.cpp [01b77b57]), rotating at base 10000 with freq_scale 1 (rope_freq_base_train_swa,
 * _scale_train_swa, fixed, through llama_model::get_rope_freq_base / _scale [00342301]), the others
 * at rope.freq_base with rope.scaling's factor: HF gemma3_text's rope_local_base_freq layers that
 * take no scaling. q is scaled by f_attention_scale before kq_scale 1: 1 / sqrt(embedding_length /
 * head_count(0)) (integer division) for the 62-layer model (LLM_TYPE_27B, from block_count), else
 * 1 / sqrt(key_length): HF's query_pre_attn_scalar^-1/2 with that scalar. 00342301's gemma3
 * reads neither attention.sliding_window_pattern nor rope.freq_base_swa (later gemma2 code reads
 * both: src/models/gemma2.cpp [82234e08]), so a file stating other values than these is refused
 * rather than read either way. YaRN is not read: posenc has not checked what llama.cpp's
 * context-wide YaRN does on the sliding layers. */
pe_status pe__gguf_gemma3(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err) {
    double w = 0, base = 10000;
    if (strcmp(s->kind, "none") && strcmp(s->kind, "linear"))
        return refuse(path, err, "gemma3", "its rope.scaling.type is not linear or none (posenc reads Gemma 3's linear "
                      "scaling of the global layers only)");
    if (pe__gguf_key(g, "attention.sliding_window", &w) <= 0 || !(w >= 1))
        return refuse(path, err, "gemma3", "no attention.sliding_window of 1 or more (llama.cpp's gemma3 load_hparams "
                      "requires one)");
    if (!pattern_is(g, 6))
        return refuse(path, err, "gemma3", "its attention.sliding_window_pattern is not 6, the period llama.cpp's gemma3 "
                      "sets (00342301) whatever the file says");
    const int k = pe__gguf_key(g, "rope.freq_base_swa", &base);
    if (k < 0 || base != 10000)
        return refuse(path, err, "gemma3", "its rope.freq_base_swa is not 10000, the sliding layers' base llama.cpp's "
                      "gemma3 sets (00342301) whatever the file says");
    json_object_del(c, "layer_types");
    json_object_set_new(c, "sliding_window_pattern", json_integer(6));
    json_object_set_new(c, "rope_local_base_freq", json_real(10000.0));
    const double scalar = s->layers == 62 ? floor(s->embd / s->heads0) : s->hd;
    if (!(scalar >= 1)) return pe__gguf_bad(path, err, "gemma3's attention scale is not defined (a head width below 1)");
    json_object_set_new(c, "query_pre_attn_scalar", pe__gguf_int(scalar));
    return PE_OK;
}

/* DeepSeek-V2/V3 (deepseek2; src/llama-model.cpp load_hparams LLM_ARCH_DEEPSEEK2 and
 * llm_build_deepseek2 [00342301], src/models/deepseek2.cpp llm_build_deepseek2 [07bede6a]; the
 * converter conversion/deepseek.py DeepseekV2Model.set_gguf_parameters [01a723dc]): the qk head is
 * attention.key_length_mla wide (qk_nope_head_dim + qk_rope_head_dim; with key_length_mla and
 * value_length_mla both set, is_mla, else attention.key_length), its last rope.dimension_count
 * (qk_rope_head_dim) dims rotate in NORM pairs, one rotated key slice shared by the heads (k_pe,
 * repeated in the decompressed form: one key per query head, whatever head_count_kv 1 of the
 * absorbed form says). Softmax scale mscale^2 / sqrt(key width) with mscale = attn_factor_org (1 +
 * 0.1 mscale_all_dim ln s), mscale_all_dim = rope.scaling.yarn_log_multiplier / 0.1 (the converter
 * writes 0.1 mscale_all_dim, [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]); cos and sin times attn_factor_org,
 * which is rope.scaling.attn_factor (llama_context::llama_context: yarn_attn_factor = get_mscale(s,
 * mscale) / get_mscale(s, mscale_all_dim) with mscale = mscale_all_dim for deepseek2, times the
 * file's attn_factor, src/llama-context.cpp [001d906a]); so HF deepseek_v3 with mscale =
 * mscale_all_dim and rope_interleave. Refused: an attn_factor other than 1, YaRN without
 * yarn_log_multiplier and linear scaling (the graph's rope attn_factor would divide cos and sin by
 * 1 + 0.1 ln s), Mistral Large's attention.temperature_scale. */
pe_status pe__gguf_deepseek2(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err) {
    double kmla = 0, vmla = 0, attn = 1, temp = 0, lm = 0;
    const int km = pe__gguf_key(g, "attention.key_length_mla", &kmla), vm = pe__gguf_key(g, "attention.value_length_mla", &vmla);
    if (km < 0 || vm < 0) return pe__gguf_bad(path, err, "attention.key_length_mla or value_length_mla is not a number");
    const double dk = kmla != 0 && vmla != 0 ? kmla : s->hd, r = s->rot;
    if (!(r >= 2) || fmod(r, 2) != 0 || !(dk >= r) || dk > 65536)
        return pe__gguf_bad(path, err, "rope.dimension_count is not an even part of the qk head (attention.key_length_mla)");
    if (pe__gguf_key(g, "rope.scaling.attn_factor", &attn) < 0 || attn != 1)
        return refuse(path, err, "deepseek2", "its rope.scaling.attn_factor is not 1 (llama.cpp would scale cos, sin and "
                      "mscale by it, which posenc's deepseek_v3 does not)");
    if (pe__gguf_key(g, "attention.temperature_scale", &temp) < 0 || temp != 0)
        return refuse(path, err, "deepseek2", "its attention.temperature_scale scales the queries by position (Mistral "
                      "Large's Llama 4 temperature tuning), which posenc does not read from a GGUF file");
    json_t *rs = json_object_get(c, "rope_scaling");
    const int yarn = !strcmp(s->kind, "yarn") && rs;
    if (rs && !yarn)
        return refuse(path, err, "deepseek2", "its rope.scaling.type is linear: llama.cpp's deepseek2 divides cos and sin by "
                      "1 + 0.1 ln s then, which HF's DeepSeek does not");
    if (yarn) {
        if (pe__gguf_key(g, "rope.scaling.yarn_log_multiplier", &lm) <= 0)
            return refuse(path, err, "deepseek2", "YaRN without rope.scaling.yarn_log_multiplier (llama.cpp then scales both "
                          "cos and sin and the logits by 1 + 0.1 ln s), not DeepSeek's YaRN");
        const double all = (double)((float)lm / 0.1f); /* hparams.rope_yarn_log_mul /= 0.1f */
        json_object_del(rs, "attention_factor");
        json_object_set_new(rs, "mscale", json_real(all));
        json_object_set_new(rs, "mscale_all_dim", json_real(all));
    }
    json_object_set_new(c, "qk_rope_head_dim", pe__gguf_int(r));
    json_object_set_new(c, "qk_nope_head_dim", pe__gguf_int((dk - r)));
    json_object_set_new(c, "head_dim", pe__gguf_int(dk));
    json_object_set_new(c, "num_key_value_heads", pe__gguf_int(s->heads));
    json_object_set_new(c, "rope_interleave", json_true());
    drop_windows(c);
    return PE_OK;
}

/* Llama 4 (src/llama-model.cpp load_hparams LLM_ARCH_LLAMA4 and llm_build_llama_iswa [00342301];
 * src/models/llama4.cpp llama_model_llama4::load_arch_hparams, graph [8a5c4e03]): NORM pairs over
 * the whole head (n_rot == n_embd_head asserted); every 4th layer NoPE (n_no_rope_layer_step,
 * default 4 in src/llama-hparams.h [027d5756], read from no key: use_rope where (il + 1) % 4 != 0),
 * the others chunked attention over chunks of 8192 (LLAMA_SWA_TYPE_CHUNKED, n_swa = 8192 whatever
 * attention.sliding_window says, set_swa_pattern(4): is_masked_swa masks keys before the query's
 * chunk, src/llama-hparams.cpp [01b77b57]); the NoPE layers' q times log(floor((p + 1) / 8192) + 1)
 * 0.1 + 1 (n_attn_temp_floor_scale 8192, f_attn_temp_scale 0.1, f_attn_temp_offset 1:
 * llm_graph_input_attn_temp::set_input, src/llama-graph.cpp [00395eb2]): HF Llama 4's temperature
 * tuning; kq_scale head^-1/2 (f_attention_scale unread); the L2 qk norm unless expert_count is 128
 * (use_kq_norm false for LLM_TYPE_17B_128E, Maverick); the rope_freqs factors (gguf.c). Refused:
 * attention.sliding_window 0 (MobileLLM: no chunks, and step n_layer leaves the last layer NoPE
 * with no temperature set), a sliding_window_pattern other than 4 and a rope.freq_base_swa other
 * than rope.freq_base (which 8a5c4e03 reads and 00342301 does not). */
pe_status pe__gguf_llama4(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err) {
    double w = 1, base = s->base, dv = s->hd, experts = 0;
    const int ks = pe__gguf_key(g, "attention.sliding_window", &w);
    if (ks < 0) return pe__gguf_bad(path, err, "attention.sliding_window is not a number");
    if (ks > 0 && w == 0)
        return refuse(path, err, "llama4", "attention.sliding_window 0 (MobileLLM): llama.cpp then sets no chunks and a "
                      "NoPE step of block_count, which leaves the last layer NoPE without a temperature scale");
    if (!pattern_is(g, 4))
        return refuse(path, err, "llama4", "its attention.sliding_window_pattern is not 4 (llama.cpp versions differ on "
                      "reading it: 00342301 sets 4, 8a5c4e03 reads the key)");
    if (pe__gguf_key(g, "rope.freq_base_swa", &base) < 0 || base != s->base)
        return refuse(path, err, "llama4", "its rope.freq_base_swa differs from rope.freq_base (read for the chunked "
                      "layers by 8a5c4e03, not by 00342301)");
    if (s->rot != s->hd || pe__gguf_key(g, "attention.value_length", &dv) < 0 || dv != s->hd)
        return pe__gguf_bad(path, err, "llama4's rope.dimension_count, key_length and value_length differ (llama.cpp "
                            "asserts they agree)");
    if (pe__gguf_key(g, "expert_count", &experts) < 0) return pe__gguf_bad(path, err, "expert_count is not a number");
    drop_windows(c);
    json_object_set_new(c, "attention_chunk_size", json_integer(8192));
    json_object_set_new(c, "no_rope_layer_interval", json_integer(4));
    json_object_set_new(c, "attn_temperature_tuning", json_true());
    json_object_set_new(c, "floor_scale", json_integer(8192));
    json_object_set_new(c, "attn_scale", json_real(0.1));
    json_object_set_new(c, "use_qk_norm", json_boolean(experts != 128));
    return PE_OK;
}
