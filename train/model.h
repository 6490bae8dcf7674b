/* The small Transformer of `posenc train`: token embedding, `layers` pre-LayerNorm blocks
 * (attention through the posenc operator, then a GELU MLP), a final LayerNorm and the output
 * projection tied to the embedding. Forward and backward; the parameters live in one flat
 * block described by a size table, as llm.c does, so the optimizer is one loop.
 *
 * Legend: B batch, T tokens per sequence, N = B*T, V vocabulary, C width, F = 4C MLP width,
 * M memory tokens (methods with memory).
 *
 * The token embedding is scaled by sqrt(C) at the input (Vaswani et al.; fairseq), wte and
 * learned position tables start as N(0, 1/C), other matrices as GPT-2's N(0, 0.02).
 *
 * Per-method model conventions (the methods' descriptions, model.c; doc/methods.md "Training"):
 *   absolute encodings (embed hook only: none, sinusoidal, learned, ...) are added once to the
 *     token embedding, as in the Transformer and GPT-2; the layers then see no positions;
 *   tensors named in the sharing table are one model tensor used by every layer (T5's bias,
 *     TUPE's positional term, DeBERTa's relative table, FLOATER's dynamics); the rest are per
 *     layer; DeBERTa's table passes through a model-level LayerNorm first;
 *   methods with memory (pe_attention_has_memory: Transformer-XL) carry each layer's input of
 *     the previous segment (mem_len tokens) into the next training step;
 *   a schedule (tr_model_config.schedule) gives each layer its own method;
 *   complex-valued layers (pe_attention_is_complex: complex-order) are block 0's attention:
 *     they read the token ids (their amp table is a second, complex word embedding) and
 *     x += y + y_imag; the later blocks run `none` (doc/methods.md, "Training").
 * The tensor names of a checkpoint: `wte`, `h.<l>.ln_1.weight`, `h.<l>.ln_1.bias`,
 * `h.<l>.attn.{wq,bq,wk,bk,wv,bv,wo,bo}`, `h.<l>.attn.<method tensor>`, `h.<l>.ln_2.weight`,
 * `h.<l>.ln_2.bias`, `h.<l>.mlp.fc.weight`, `h.<l>.mlp.fc.bias`, `h.<l>.mlp.proj.weight`,
 * `h.<l>.mlp.proj.bias`, `ln_f.weight`, `ln_f.bias`, `pe.<method tensor>` (shared or input),
 * `pe.<tensor>.ln.weight`, `pe.<tensor>.ln.bias` (a shared tensor's LayerNorm); with a schedule,
 * `pe.<method>.<tensor>` for the shared ones. */
#ifndef TR_MODEL_H
#define TR_MODEL_H

#include <stdint.h>

#include "posenc.h"

#define TR_MAX_KEYS 16
#define TR_MAX_TENSORS 512

typedef struct tr_model_config {
    int64_t V, layers, C, heads, F;
    int64_t max_pos; /* rows of position tables with free rows: the largest position + 1 */
    int64_t mem_len; /* methods with memory: tokens carried between segments */
    int bidirectional; /* attention both ways (the answer-slot layout, data.h); 0: causal */
    char method[32];
    /* per-layer schedule (Llama 4's NoPE interleaving): comma-separated methods, layer l runs
     * the (l mod n)-th, each a method of the layers (TR_PLACE_LAYER) or `none`, no memory;
     * "" = every layer as `method`. With a schedule a layer key goes to the layers whose
     * method takes it (common keys such as scale to all), and shared tensors are named
     * `pe.<method>.<tensor>` (two methods may name a tensor alike). */
    char schedule[512];
    /* per-layer sliding windows, comma-separated token counts cycled as the schedule (a query
     * sees the last W tokens, itself included; 0: all); "" = none */
    char windows[256];
    int64_t length; /* the training length: keys a method sizes by it (pe_config_fit_length); 0: none */
    int n_keys; /* extra layer keys (sin_layout, num_buckets, ...) */
    char key[TR_MAX_KEYS][40], val[TR_MAX_KEYS][64];
} tr_model_config;

/* How a method's encoding enters the model. */
typedef enum {
    TR_PLACE_LAYER, /* in every layer's attention (relative, bias, rotary, FLOATER) */
    TR_PLACE_INPUT, /* added once to the token embedding */
    TR_PLACE_IDS,   /* complex-valued: block 0's attention reads the token ids itself */
    TR_PLACE_NONE,  /* the trainer does not support it */
} tr_placement;

/* One tensor of the flat block. */
typedef struct tr_tensor {
    char name[56]; /* room for the "adam.m." prefix in a safetensors name */
    int ndim;
    int64_t shape[4];
    int64_t numel;
    size_t off;  /* floats from the block's start */
    int decay;   /* AdamW weight decay applies (matrices and tables, not gains and biases) */
    float min;   /* clamped to >= min after each update (-INFINITY: free) */
    int method;  /* a tensor of the positional encoding (the library's name is the last part) */
    pe_init init; /* a method tensor's reference initialisation (pe_param_spec) */
} tr_tensor;

typedef struct tr_model tr_model;

/* Placement of a method (by name) for this trainer; *why is set for TR_PLACE_NONE. */
tr_placement tr_method_placement(const char *method, const char **why);

/* The method of layer l in a schedule, cycled, into buf; returns how many methods the schedule
 * names (0 when it is empty, or when a name is empty or longer than 31 characters). */
int tr_schedule_method(const char *schedule, int64_t l, char *buf, size_t n);
/* Whether a layer key applies to a method: one of its own keys, or a key common to every
 * method (one that no method lists, such as scale). */
int tr_key_applies(const char *method, const char *key);

/* Creates a model: layers, tensors and their initial values from seed. *out is owned by the
 * caller (tr_model_free). */
pe_status tr_model_init(tr_model **out, const tr_model_config *cfg, uint64_t seed, pe_err *err);
void tr_model_free(tr_model *m);

const tr_model_config *tr_model_cfg(const tr_model *m);
/* The flat blocks (n floats each) and the size table. */
float *tr_model_params(tr_model *m);
float *tr_model_grads(tr_model *m);
size_t tr_model_size(const tr_model *m);
int tr_model_tensors(const tr_model *m, const tr_tensor **t);
void tr_model_zero_grad(tr_model *m);

/* Forward.
 *   in, tgt  (B, T) token ids and next-token targets (-1: not scored)
 *   pos      (B, T) positions or NULL (0..T-1); absolute and layer methods read them
 *   use_mem  methods with memory attend over the memory of the previous segment
 * *loss: mean cross-entropy (nats) over scored targets, *count their number (loss 0 when
 * none). Saves what backward needs. */
pe_status tr_model_forward(tr_model *m, const int32_t *in, const int32_t *tgt, const int64_t *pos,
                           int64_t B, int64_t T, int use_mem, double *loss, int64_t *count,
                           pe_err *err);
/* Attention probabilities of one sequence in (T tokens at positions pos, NULL: 0..T-1; no
 * memory): the forward runs to block `layer` and writes its probs (H, T, T), from the
 * operator's reference path. */
pe_status tr_model_attention(tr_model *m, const int32_t *in, const int64_t *pos, int64_t T, int64_t layer,
                             float *probs, pe_err *err);
/* Backward of the last forward: accumulates (+=) d(mean loss)/d(params) into the grads. */
pe_status tr_model_backward(tr_model *m, pe_err *err);
/* Between a forward and its backward: the mean of the backward divides by n scored targets
 * instead of the forward's own count (data parallel: a rank's share of the batch scores only
 * some of the batch's n, and the batch's mean is what every rank's gradient is of). */
void tr_model_set_count(tr_model *m, int64_t n);
/* Dropout of the next forwards and backwards (until set again; p 0: off, the default): the
 * embedding's output (with the absolute encoding), each attention's and each MLP's output
 * before its residual sum, as GPT-2's embd_pdrop and resid_pdrop and Ruoss et al.'s
 * TransformerEncoder (models/transformer.py: after the positional encodings, the attention and
 * the feed-forward) place it. key: the step's draw; row0: the first sequence of the batch the
 * forward gets (a share's: its masks are the whole batch's there). */
void tr_model_set_dropout(tr_model *m, double p, uint64_t key, int64_t row0);
/* Profiling (posenc train --profile): on, the forwards and backwards add up the seconds spent in
 * the attention layers (pe_attention_*, their projections included) and in the trainer's own
 * GEMMs (the MLP, the tied output projection); read them, and zero them. */
void tr_model_profile(tr_model *m, int on);
void tr_model_profile_read(tr_model *m, double *attn, double *gemm, int zero);
/* The last forward's next-token probabilities (N, V). */
const float *tr_model_probs(const tr_model *m);

/* Methods with memory: keep the last forward's layer inputs (its last mem_len tokens) as the
 * memory of the next segment; reset forgets it. get/set give (layers, B, M, C) for
 * checkpoints. */
int tr_model_has_memory(const tr_model *m);
void tr_model_update_memory(tr_model *m);
void tr_model_reset_memory(tr_model *m);
const float *tr_model_memory(const tr_model *m, int64_t *B, int64_t *M);
pe_status tr_model_set_memory(tr_model *m, const float *mem, int64_t B, int64_t M, pe_err *err);

/* Decoding (posenc generate): one KV cache per block over one sequence; a step takes n new
 * tokens at positions pos and writes their next-token probabilities (n, V), as tr_model_forward
 * over the whole sequence so far would (no memory). Complex-valued models have no cache. The
 * model must not change while a decoder uses it. */
typedef struct tr_decoder tr_decoder;
pe_status tr_decoder_init(tr_decoder **out, tr_model *m, int64_t max_tokens, pe_err *err);
void tr_decoder_free(tr_decoder *d);
int64_t tr_decoder_length(const tr_decoder *d);
pe_status tr_decoder_step(tr_decoder *d, const int32_t *in, const int64_t *pos, int64_t n, float *probs, pe_err *err);

/* Whether positions lo .. hi are within what the model's encodings hold (a learned table's rows):
 * the check every layer's positions get, without a forward. */
pe_status tr_model_check_positions(tr_model *m, int64_t lo, int64_t hi, pe_err *err);

/* After an optimizer update: clamps the tensors that have a lower bound (tr_tensor.min). */
void tr_model_project(tr_model *m);

#endif
