/* posenc's model front-ends: a layer's settings from a HuggingFace config.json, the positions
 * of a vision-language sequence (M-RoPE), checkpoints between RoPE layouts. */
#ifndef POSENC_MODELS_H
#define POSENC_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a model's layers from its HuggingFace config.json --------------------------------- */
/* What a layer of the model needs beyond posenc's settings: the caller applies the window as
 * an attn_mask (posenc's masks), and the model's qk-norm and MLA projections around the layer. */
#define PE_HF_LAYER_INFO_BYTES 256 /* fixed, as pe_config's: a new field appends at the end */
typedef union pe_hf_layer_info {
    struct {
        int64_t n_layers, head_dim; /* num_hidden_layers; the qk head (MLA: nope + rope dims) */
        char layer_type[40];        /* HF's: full_attention, sliding_attention, chunked_attention */
        int64_t window;             /* sliding_window or attention_chunk_size of the layer; 0: none */
        int chunked;                /* window is Llama 4's attention chunk (blocks of keys), not a slide */
        int mla;                    /* DeepSeek's multi-head latent attention: one rotated key head */
        int qk_norm;                /* Llama 4: q and k L2-normalised after the rotation */
        char family[32];            /* the row of posenc's family table that read it (its model_type) */
        char gguf_arch[32];         /* a GGUF file's general.architecture (llama.cpp's), else "" */
        /* DeepSeek-V4: each of the layer's compressed entries stands for compress_rate tokens (4,
         * 128; 0: none); the caller appends them as keys at their blocks' first positions,
         * visible once their block has passed (attn_mask) */
        int64_t compress_rate;
    };
    unsigned char bytes_[PE_HF_LAYER_INFO_BYTES];
} pe_hf_layer_info;
/* Layer `layer` (0-based) of a HuggingFace config.json, or of a GGUF file (llama.cpp's: its
 * header's metadata, read as the config of the HF family its architecture comes from, the pairs
 * as llama.cpp's rope type lays them out), as posenc settings, read as the code of
 * its family (model_type, or cfg's hf_assume) applies positions: method (rope; none for a NoPE
 * layer of Llama 4, SmolLM3, Cohere2, EXAONE 4; alibi for Bloom and MPT), heads, kv_heads,
 * causal, the rope keys of the layer's type (HF v5 rope_parameters per layer type, Gemma 3's
 * local base), the rotated slice (rotary_dim, rotary_offset), the softmax scale where the model
 * sets one, and NoPE's temperature tuning. Keys already set in cfg keep their values. info may be NULL. The key
 * hf_config (with hf_layer) does the same for a layer whose method and heads are given. */
pe_status pe_config_from_hf(pe_config *cfg, const char *path, int64_t layer, pe_hf_layer_info *info, pe_err *err);
/* The families hf_config reads: the i-th row of posenc's family table, its model_type (NULL past
 * the last row), the HF files and symbols it was read from, and, for a family posenc refuses,
 * what it does that posenc does not compute (NULL otherwise): always, or (refused_when, the
 * config key) only where that key says so (Falcon's alibi, Gemma 2's soft-capping). A config
 * whose model_type has no row is refused; the key hf_assume names the row to read it with. Any
 * pointer may be NULL. */
const char *pe_hf_family_name(int i, const char **source, const char **refused, const char **refused_when);

/* ---- multi-axis positions of a vision-language sequence --------------------------------- */
/* One span of a sequence: `text` tokens of text (t, h, w unused), or (text = 0) an image or
 * video of t x h x w patches, which the model's spatial merge turns into t x (h/merge) x
 * (w/merge) tokens; seconds: a video's seconds per temporal patch (Qwen2.5-VL), 0 for images. */
typedef struct pe_span {
    int64_t text;
    int64_t t, h, w;
    double seconds;
} pe_span;

/* The (time, row, column) positions of every token, as Qwen2-VL's get_rope_index lays them
 * out: a text token at p + 1 on all three axes after the largest position p so far (0 first);
 * a grid's token (i, j, k) at s + (i', j, k), s the largest position so far + 1, with i' = i,
 * or, tokens_per_second > 0 (Qwen2.5-VL), i' = floor(i seconds tokens_per_second).
 *   pos   (N, 3) out, or NULL to count the tokens
 *   n     out: N;  next: out, the position text resumes at (largest + 1; may be NULL), so the
 *         k-th generated token sits at next + k on every axis (HF's rope_deltas = next - N) */
pe_status pe_mrope_positions(const pe_span *spans, int n_spans, int64_t merge, double tokens_per_second, int64_t *pos,
                             int64_t *n, int64_t *next, pe_err *err);

/* Spans from text, as `posenc positions` reads them: comma-separated text:N, image:HxW (t = 1),
 * image:TxHxW and video:TxHxW[@SECONDS], every byte read (a fourth field, a sign, a space or a
 * trailing comma is an error naming the span). spans NULL: only counts them into n_spans;
 * else at most max_spans are written. */
pe_status pe_mrope_spans_parse(const char *text, pe_span *spans, int max_spans, int *n_spans, pe_err *err);

/* ---- checkpoints between RoPE layouts ------------------------------------------------- */
/* Permutes the rows of a q or k projection in place so that rotating with layout `to`
 * (PE_ROPE_HALF or PE_ROPE_INTERLEAVED) after the permutation gives the same attention as
 * rotating with the other layout before it (Meta's checkpoints are interleaved, HF Llama's
 * half). w is [heads*D, cols] (a weight, cols = C) or [heads*D] (a bias, cols = 1); only the
 * first rotary_dim rows of each head move:
 *   interleaved -> half:  new[t] = old[2t], new[r/2 + t] = old[2t + 1]   (t < r/2)
 * Apply it to wq, bq (heads) and wk, bk (kv_heads) alike; wv and wo do not change. */
pe_status pe_rope_permute(float *w, int64_t heads, int64_t D, int64_t rotary_dim, int64_t cols, int to,
                          pe_err *err);

#ifdef __cplusplus
}
#endif
#endif /* POSENC_MODELS_H */
