/* One layer of a HuggingFace config.json as hf_config.c reads it, and the helpers that turn it
 * into posenc keys (hf_keys.c): shared by the two files, private to the library. */
#ifndef PE_HF_LAYER_H
#define PE_HF_LAYER_H

#include <jansson.h>

#include "../internal.h"
#include "hf_family.h"

/* One layer as the config describes it. */
typedef struct hf_layer {
    const char *path;
    const hf_family *F; /* the family's row */
    json_t *root, *mc;  /* the file; the language model's config (text_config in a VLM) */
    json_t *rope;       /* the layer's rope parameters, or NULL */
    int64_t layer, n_layers, head_dim;
    int64_t base_head_dim; /* head_dim of the config (Gemma 4's global layers have their own) */
    int method; /* what the layer runs: PE_METHOD_ROPE, _NONE (NoPE) or _ALIBI */
    int chunked, mla; /* Llama 4's chunked RoPE layers; DeepSeek's latent attention */
    int global;       /* a Gemma 4 layer of global_head_dim heads */
    int64_t compress_rate; /* DeepSeek-V4: tokens per compressed entry of the layer (0: none) */
    const char *type;  /* HF layer type */
    double local_base; /* > 0: a Gemma 3 (v4 config) sliding layer's base, which takes no scaling */
    /* a GGUF file (gguf.c): what its header states directly, the rotated dims and the pair layout
     * of llama.cpp's rope type (gguf_rotary_dim 0: not a GGUF file) */
    int64_t gguf_rotary_dim;
    int gguf_layout;
    char gguf_arch[32];
} hf_layer;

/* The config's value of a key the family may name otherwise ("a|b": the first present), or NULL. */
json_t *pe__hf_key(json_t *o, const char *names, const char *usual);
int64_t pe__hf_int(json_t *o, const char *key, int64_t fallback);
/* HF configs write booleans as true/false, or (Llama 4's first releases) as a number */
int pe__hf_truthy(json_t *v, int fallback);
pe_status pe__hf_bad(const hf_layer *L, pe_err *err, const char *what);
/* Sets key from a JSON scalar unless the key was given explicitly. */
pe_status pe__hf_fill(pe_config *cfg, const char *key, json_t *v, const char *path, pe_err *err);
pe_status pe__hf_fill_real(pe_config *cfg, const char *key, double v, const char *path, pe_err *err);
/* The layer's keys onto cfg (D: the head_dim, or -1 where the file does not say). */
pe_status pe__hf_apply_layer(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err);

/* GGUF (gguf.c): whether path begins with GGUF's magic; its header (data, n bytes: the first
 * bytes of the file, and the file itself for the rope_freqs tensor's data past them, or NULL)
 * as the config of layer `layer` in HF's names, into L->root and L's gguf_ fields; and the same
 * from the file at path (its first 64 MiB). */
int pe__gguf_is(const char *path);
pe_status pe__gguf_read(const unsigned char *data, size_t n, FILE *file, const char *path, int64_t layer, hf_layer *L,
                        pe_err *err);
pe_status pe__gguf_load(const char *path, int64_t layer, hf_layer *L, pe_err *err);

#endif
