/* What a HuggingFace model family's attention code decides beyond its config.json: which layers
 * rotate, the pair layout, the rotated slice, the keys it names differently, its defaults and its
 * softmax scale. One row per model_type (hf_families.c), each read from the family's own
 * modeling and configuration files (the row's `source`); hf_config.c reads a config through its
 * row and refuses a model_type without one. */
#ifndef PE_HF_FAMILY_H
#define PE_HF_FAMILY_H

#include <stdint.h>

enum { HF_ROPE, HF_ALIBI, HF_REFUSE };                                /* positions */
/* which layers rotate: all; only sliding ones (none without a window: Cohere2); all but the full
 * ones of a windowed model (every one without a window: EXAONE 4); Llama 4's interval */
enum { HF_ON_ALL, HF_ON_SLIDING, HF_ON_NOT_GLOBAL, HF_ON_INTERVAL };
enum { HF_HALF, HF_INTERLEAVED, HF_INTERLEAVED_KEY };                 /* pair layout */
/* softmax scale: head_dim^-1/2, query_pre_attn_scalar^-1/2, MLA's mscale^2, Granite's multiplier, 1 (Gemma 4) */
enum { HF_SCALE_HEAD_DIM, HF_SCALE_QUERY_PRE_ATTN, HF_SCALE_MSCALE, HF_SCALE_MULTIPLIER, HF_SCALE_ONE };
/* key/value heads: the kv_heads key; Falcon's (the key where kv_flag, new_decoder_architecture by
 * default, is set, else one head with multi_query (default true)); the key only where kv_flag is
 * true, else one per head (ChatGLM's multi_query_attention) */
enum { HF_KV_KEY, HF_KV_FALCON, HF_KV_FLAG };

typedef struct hf_family {
    const char *model_type;
    const char *source; /* the HF files and symbols the row was read from */
    unsigned char positions, rope_on, layout, scale, kv;
    unsigned char mla;         /* DeepSeek's latent attention: the rope slice is the head's last dims */
    unsigned char temperature; /* Llama 4's NoPE-layer query temperature */
    unsigned char chunked;     /* Llama 4: RoPE layers are chunked_attention, NoPE ones full */
    /* M-RoPE: the layout the family's code applies whatever the config says (rope_section_layout:
     * Qwen3-VL's interleaved, ERNIE-4.5-VL's alternating; NULL: mrope_interleaved's), the order
     * of the config's mrope_section as posenc's (t)ime, (h)eight, (w)idth axes (NULL: "thw"), and
     * the sections the code takes when the config has none (a JSON list, NULL: none) */
    const char *sections_layout, *sections_order, *sections_default;
    unsigned char pattern;     /* layer_types when absent: every pattern-th layer full, the rest sliding */
    unsigned char qwen_windows; /* layer_types when absent: sliding from layer max_window_layers (28) on,
                                   if use_sliding_window and a sliding_window (Qwen2, Qwen3) */
    /* the config's names where the family's differ (NULL: HF's usual name); '|' separates
     * names of which the first present counts (old and new configs); theta "-": the code fixes
     * the base at theta_default */
    const char *layers, *heads, *kv_heads, *hidden, *theta, *fraction, *rotary_dim;
    const char *head_dim_key; /* the head width's name ("-": hidden / heads whatever head_dim says) */
    const char *kv_flag;      /* the key HF_KV_FALCON and HF_KV_FLAG read (above) */
    /* "key=N": the layers rotate (RoPE) where the config's integer key is N, and run the row's
     * positions otherwise (Baichuan: RoPE at hidden_size 4096, ALiBi else) */
    const char *rope_when;
    unsigned char slides;     /* layer_types when absent: every layer slides where sliding_window is set */
    double fraction_default; /* > 0: rotated share of the head when the config gives none */
    double theta_default;    /* > 0: the base when the config gives none (a class default_theta) */
    int64_t rotary_dim_default;
    const char *refuse;      /* what the family does that posenc does not (yet): always (HF_REFUSE), or
                                where refuse_key holds: '|' separates terms of which any refuses, a term
                                "key" holds where the key is true, a number other than 0, a list or an
                                object (absent: refuse_default), "key!=V" where the key is present, not
                                null, and other than V (a number, true or false) */
    const char *refuse_key;
    unsigned char refuse_default;
    const char *refuse_value; /* refuse also where refuse_key is this string */
    /* Gemma 4: the layers that do not slide take global_head_dim (global_head_dim_default when
     * the config has none; 0 or null: head_dim) and, with attention_k_eq_v, num_global_key_value_heads */
    unsigned char global_shapes;
    int64_t global_head_dim_default, head_dim_default; /* the class defaults where the config has none */
    unsigned char last_full;      /* the last layer is full_attention whatever layer_types says */
    unsigned char default_whole_head; /* rope_type default rotates the whole head, whatever partial_rotary_factor says */
    const char *rope_default;     /* rope_parameters (JSON) when the config has none */
    int64_t window_default;       /* sliding_window when the config has none */
    unsigned char sinks;          /* learned attention sinks on every layer (attention_sinks) */
    int64_t kv_heads_default;     /* num_key_value_heads when the config has none (0: the query heads) */
    /* DeepSeek-V4: the rotated dims are the head's last (rotary_offset = head_dim - rotary_dim);
     * the values rotate with the keys and the output back (rope_values); the layer types and
     * their two rope sets come from compress_ratios, rope_theta, compress_rope_theta and the
     * YaRN of rope_scaling as DeepseekV4Config.__post_init__ derives them (hf_config.c) */
    unsigned char slice_last, values_rotated, compressed_layers;
} hf_family;

/* The row of model_type, or NULL. */
const hf_family *pe__hf_family(const char *model_type);
/* The known model_type nearest to name (edit distance), for a refusal's message. */
const char *pe__hf_family_nearest(const char *name);

#endif
