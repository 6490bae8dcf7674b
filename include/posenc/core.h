/* posenc's core: status and messages, methods, keys and settings, a layer's tensors, the
 * attention operator (the layer, the projected form), rotations of caller buffers and the
 * complex-valued layer's entry points. posenc.h includes every part; its opening comment is
 * the legend of shapes and the layer's formulas. */
#ifndef POSENC_CORE_H
#define POSENC_CORE_H

#include <stddef.h>
#include <stdint.h>

#define PE_VERSION "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status --------------------------------------------------------------------------- */
#define PE_STATUS_MAP(XX)                                              \
    XX(OK, 0, "ok")                                                    \
    XX(EINVAL, -1, "invalid argument")                                 \
    XX(EKEY, -2, "unknown or invalid key")                             \
    XX(ETENSOR, -3, "missing or malformed tensor")                     \
    XX(EPOS, -4, "position out of range")                              \
    XX(ENOMEM, -5, "out of memory")                                    \
    XX(EIO, -6, "input/output error")                                  \
    XX(EFORMAT, -7, "malformed file")

typedef enum {
#define XX(name, code, text) PE_##name = code,
    PE_STATUS_MAP(XX)
#undef XX
} pe_status;

const char *pe_status_str(pe_status s);


/* A one-line error message, filled by the call that failed. */
typedef struct pe_err {
    char msg[512];
} pe_err;

/* The messages' conventions, for tools built on posenc as for the library itself: every
 * message is one line (control characters written \n, \t or \xNN). pe_error writes one into
 * err (may be NULL) and returns status; pe_one_line makes src one line into dst (n bytes). */
pe_status pe_error(pe_err *err, pe_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void pe_one_line(char *dst, size_t n, const char *src);
/* Levenshtein distance of two names up to 63 characters (99 past that): "did you mean". */
int pe_edit_distance(const char *a, const char *b);

/* ---- methods -------------------------------------------------------------------------- */
typedef enum {
    PE_FAMILY_ABSOLUTE, /* embed hook: x' = x + P[pos] */
    PE_FAMILY_ROTARY,   /* rotate hook: q, k <- R(pos) q, R(pos) k */
    PE_FAMILY_BIAS,     /* score_mod, a bias: s[h,i,j] += b(h, i, j) */
    PE_FAMILY_RELATIVE, /* score (+ value) hooks: content-position terms */
} pe_family;

typedef enum {
#define X(id, name, family) PE_METHOD_##id,
#include "../posenc_methods.def"
#undef X
    PE_METHOD_COUNT
} pe_method;

const char *pe_method_name(pe_method m);
pe_family pe_method_family(pe_method m);
/* Returns the method with this name, or -1. */
int pe_method_from_name(const char *name);
const char *pe_family_name(pe_family f);

/* What a method is and which paths it has, for tools (posenc methods prints it). Its size is
 * fixed, PE_METHOD_INFO_BYTES whatever fields a release adds (each appends at the end of the
 * struct, as pe_config's keys do), so no offset changes between releases. */
#define PE_METHOD_INFO_BYTES 256
typedef union pe_method_info {
    struct {
        const char *name, *reference; /* the paper and the implementation it follows */
        pe_family family;
        int fused;      /* the fused path computes it (no T x Tk buffer) */
        int gqa;        /* grouped-query attention (kv_heads < heads) */
        int projected;  /* has the projected form (q, k, v): not a method on the input embedding */
        int memory;     /* reads mems (Transformer-XL) */
        int multi_axis; /* positions with several axes (rope_sections, rope_mixed) */
        int token_ids;  /* reads token ids instead of x (complex) */
        int embedding;  /* acts on the input embedding x + P[pos] (sinusoidal, learned): a model adds it
                           once, at its input; every other method acts in each attention layer */
        int relative_index; /* pe_attention_relative_index answers (a table row per offset) */
        /* The reference model's conventions beyond its tensors, for a model built on the method: */
        int scale_in_init; /* scores unscaled (scale 1), 1/sqrt(d) folded into q's initialisation (t5) */
        int axes_min;      /* positions of at least this many axes (rope_mixed: 2, image patches); 0: one */
        int causal_only;   /* refuses causal=false (cope: its positions count the keys up to the query) */
    };
    unsigned char bytes_[PE_METHOD_INFO_BYTES];
} pe_method_info;
pe_status pe_method_describe(int m, pe_method_info *info, pe_err *err);
/* ALiBi's reference slopes m[H] (get_slopes of ofirpress/attention_with_linear_biases). */
void pe_alibi_slopes(double *m, int64_t H);

/* ---- configuration -------------------------------------------------------------------- */
enum { PE_SIN_INTERLEAVED, PE_SIN_CONCAT, PE_SIN_T2T };
enum { PE_ROPE_HALF, PE_ROPE_INTERLEAVED };
enum { PE_ROPE_NONE, PE_ROPE_LINEAR, PE_ROPE_NTK, PE_ROPE_DYNAMIC, PE_ROPE_YARN, PE_ROPE_LLAMA3,
       PE_ROPE_LONGROPE, PE_ROPE_PROPORTIONAL };
enum { PE_KERPLE_LOG, PE_KERPLE_POWER };
#define PE_MAX_ROPE_PAIRS 512 /* rotary_dim / 2 of a LongRoPE table read from a config.json */
#define PE_MAX_AXES 8          /* position axes of a token (rope_sections, rope_mixed) */
enum { PE_SECTIONS_CONTIGUOUS, PE_SECTIONS_INTERLEAVED, PE_SECTIONS_ALTERNATING, PE_SECTIONS_BALANCED };
enum { PE_SECTION_FREQS_SHARED, PE_SECTION_FREQS_PER_AXIS };
/* A list of integers ("16,24,24"): n of them in v. */
typedef struct pe_int_list {
    int n;
    int64_t v[PE_MAX_AXES];
} pe_int_list;
enum { PE_POS_ATT_C2P = 1, PE_POS_ATT_P2C = 2 };

/* The keys of the contract, by id: PE_K_method, PE_K_heads, ... in the order of
 * posenc_keys.def (the one list; pe_config_key_name(k) is key k's name). */
typedef enum {
#define K(name, type, choices, meaning) PE_K_##name,
#include "../posenc_keys.def"
#undef K
    PE_K_COUNT
} pe_key;
enum { PE_KEY_WORDS = 4 }; /* pe_config.set: room for 256 keys */

/* The settings of one layer. Field names are the contract's key names
 * (doc/spec/methods.md). Initialise with pe_config_init, set from text with
 * pe_config_set; `set` records which keys were given, so method defaults apply to the rest
 * when the layer is created.
 *
 * Its size is fixed, PE_CONFIG_BYTES whatever keys a release adds (pe_config_size() says it at
 * run time): the fields are a struct inside a union with bytes_, and a new key appends its field
 * at the end of the struct, so no size and no offset of an existing field changes: a caller
 * built against an older header passes a config the newer library reads and fills alike. */
#define PE_CONFIG_BYTES 16384
typedef union pe_config {
    struct {
        uint64_t set[PE_KEY_WORDS]; /* bit k: key k (pe_key) was given */
        int method; /* pe_method */
        int64_t heads, kv_heads;
        int causal;
        double scale;
        pe_int_list window; /* sliding window (left, right) or n = 0: none */
        /* absolute */
        int sin_layout;
        double sin_base;
        int64_t shift;
        double floater_dt, floater_step;
        /* relative and bias */
        int64_t max_rel, num_buckets, max_distance;
        int bidirectional, tupe_cls;
        int64_t clamp_len;
        int same_length;
        int64_t mem_len, position_buckets, max_relative_positions;
        int pos_att, share_att_key, kerple;
        double fire_init_L, xpos_scale_base, xpos_gamma;
        int64_t npos_max; /* CoPE */
        double post_log_scale, bias_init; /* data_alibi */
        /* rotary */
        int rope_layout;
        double rope_base;
        int64_t rotary_dim, rotary_offset;
        int rope_scaling;
        double rope_factor;
        int64_t original_max_position_embeddings, max_position_embeddings;
        double beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;
        int yarn_truncate;
        double low_freq_factor, high_freq_factor;
        /* multi-axis positions (rope): pair counts per axis, which axis a pair reads, its frequencies */
        pe_int_list rope_sections;
        int rope_section_layout, rope_section_freqs;
        char hf_config[512];
        int64_t hf_layer;
        /* FoPE */
        int64_t fope_num_freq;
        int fope_sep_head;
        /* PoPE */
        int pope_bias_uniform_init;
        /* NoPE: Llama 4's attention-temperature tuning of the queries */
        int attn_temperature_tuning;
        double floor_scale, attn_scale;
        /* LongRoPE factor tables read from hf_config (short, long); used when the tensors
         * short_factor / long_factor are not given. */
        int hf_factor_count;
        float hf_factors[2][PE_MAX_ROPE_PAIRS];
        /* fields of later keys: appended here, in the order they came */
        /* NoPE: a learned temperature per query head (HeadScale) */
        int head_scale;
        double head_scale_init, head_scale_min;
        /* What reading hf_config (on pe_config_set of hf_config or hf_layer) left for
         * pe_attention_init, which reads no file: the layer's kind and head_dim to check, a
         * partial_rotary_factor to apply where the file gives no head_dim, the keys the file
         * filled (a new hf_layer reads afresh). */
        int hf_read;
        int hf_method; /* the layer's method: rope, none (NoPE) or alibi */
        int64_t hf_head_dim;
        double hf_rotary_fraction;
        uint64_t hf_filled[PE_KEY_WORDS];
        char hf_assume[512];
        double llama_4_scaling_beta;
        double rope_proportion; /* proportional: the share of the rotary_dim / 2 frequencies that rotate */
        int attention_sinks;    /* a learned logit per head in every query's softmax (tensor sinks [H]) */
        int rope_values;        /* rope: v rotated as k, the output rotated back at the query positions */
    };
    unsigned char bytes_[PE_CONFIG_BYTES];
} pe_config;

void pe_config_init(pe_config *cfg);
/* sizeof(pe_config) of the library, PE_CONFIG_BYTES (for bindings that allocate it) */
size_t pe_config_size(void);
/* Sets one key from its text form ("16", "0.5", "true", "half", "c2p|p2c"). Setting
 * `method` first lets the key be checked against the method's own keys; otherwise that
 * check happens in pe_attention_init. Setting hf_config (or hf_layer after it) reads that
 * layer of the config.json into the keys not given, undoing an earlier reading's; keys set
 * later override it. A call that fails leaves cfg as it was. */
pe_status pe_config_set(pe_config *cfg, const char *key, const char *value, pe_err *err);
/* Sizes the keys the method bounds by the longest training sequence, length tokens, where not
 * given, as a model trained on such sequences needs them: t5's and tupe's max_distance (half the
 * length, above the exact buckets), CoPE's npos_max (length + 1). Needs `method`. */
pe_status pe_config_fit_length(pe_config *cfg, int64_t length, pe_err *err);
/* Sets many keys, `method` first and hf_layer, hf_config last whatever the order. */
pe_status pe_config_set_all(pe_config *cfg, int n, const char *const *keys,
                            const char *const *values, pe_err *err);
int pe_config_is_set(const pe_config *cfg, const char *key);
/* Whether key k was given (pe_config_is_set by id: no string compared). */
int pe_config_has(const pe_config *cfg, pe_key k);
/* Key k's name, or NULL past the last key; its meaning in one line; its value in cfg as text
 * ("-" for a value left to the method or the width), into buf. */
const char *pe_config_key_name(int k);
const char *pe_config_key_meaning(int k);
/* Key k's kind of value: "method", "int", "real", "bool", "enum", "flags", "path" or "list"
 * (comma-separated integers: window, rope_sections); NULL past the last key. */
const char *pe_config_key_type(int k);
int pe_config_key_value(const pe_config *cfg, int k, char *buf, size_t len);
/* Writes the keys the method accepts, space-separated, into buf. */
void pe_method_keys(pe_method m, char *buf, size_t len);
/* Whether method m takes key k (the common keys and its own); whether key k is common to every
 * method (method, heads, causal, scale, kv_heads, window). */
int pe_method_accepts(pe_method m, int k);
int pe_config_key_common(int k);

/* ---- tensors of a layer --------------------------------------------------------------- */
#define PE_MAX_PARAMS 12
#define PE_MAX_DIMS 4

/* How the method's reference initialises a tensor: the one description that posenc.torch and
 * the trainer draw from (each with its own random numbers).
 *   NORMAL a       N(0, a^2)                     UNIFORM a b   U(a, b)
 *   CONST a        every element a               XAVIER        xavier_normal (fan_in shape[1], fan_out shape[0])
 *   LINEAR a       U(+-1/sqrt(a)): torch.nn.Linear's weight and bias with fan_in a
 *   ALIBI_SLOPES   the reference's get_slopes(rows)
 *   COMPLEX_FREQ   freq[v, d] = 10000^(-2 floor(d/2) / C) for every row v (complex-order)
 *   EYE_NORMAL     the identity on the last two dims (each [.., n, n] block) plus N(0, a) (FoPE:
 *                  starts as RoPE) */
enum { PE_INIT_NORMAL = 1, PE_INIT_UNIFORM, PE_INIT_CONST, PE_INIT_XAVIER, PE_INIT_LINEAR, PE_INIT_ALIBI_SLOPES,
       PE_INIT_COMPLEX_FREQ, PE_INIT_EYE_NORMAL };
typedef struct pe_init {
    int kind;
    double a, b;
} pe_init;

/* What a method needs: name, shape (shape[0] == -1: any number of rows), whether it may be
 * absent, and its reference initialisation (N(0, 0.02) where the reference says nothing);
 * then how the method's reference model holds it, for a model of several layers (posenc's
 * trainer): one tensor shared by every layer, read through a model-level LayerNorm, free rows
 * per token id instead of per position, kept >= clamp_min after each optimiser step. */
typedef struct pe_param_spec {
    const char *name;
    int ndim;
    int64_t shape[PE_MAX_DIMS];
    int optional;
    pe_init init;
    int shared;      /* one tensor for every layer of the reference model */
    int layernormed; /* shared, and read through a model-level LayerNorm over its last dimension */
    int token_rows;  /* shape[0] == -1 counts token ids (a vocabulary), not positions */
    int clamped;     /* the reference clamps it to >= clamp_min in place after each step */
    double clamp_min;
} pe_param_spec;

/* The layer's weights and the method's tensors, all caller-owned; the layer only reads
 * them. param[i] follows the order of pe_attention_params (NULL: absent, allowed only for
 * optional ones). Shapes: wq [C, C], wk wv [Ckv, C], wo [C, C], bq bo [C], bk bv [Ckv]. */
typedef struct pe_weights {
    const float *wq, *wk, *wv, *wo;
    const float *bq, *bk, *bv, *bo; /* NULL = zero */
    const float *param[PE_MAX_PARAMS];
    /* The first dimension of tensors whose spec leaves it free (shape[0] == -1), e.g. the
     * rows N of a learned pos_table. */
    int64_t param_rows[PE_MAX_PARAMS];
} pe_weights;

/* Gradients, same shapes. Backward accumulates (+=) into every non-NULL pointer. */
typedef struct pe_grads {
    float *dwq, *dwk, *dwv, *dwo;
    float *dbq, *dbk, *dbv, *dbo;
    float *dparam[PE_MAX_PARAMS];
} pe_grads;

/* ---- the attention operator ----------------------------------------------------------- */
typedef struct pe_attention pe_attention; /* opaque: config, hook table, saved activations */

/* Creates a layer of width C with this configuration: resolves the method's defaults,
 * validates every key (hf_config was read when it was set: pe_attention_init reads no file).
 * *out is owned by the caller (pe_attention_free). */
pe_status pe_attention_init(pe_attention **out, const pe_config *cfg, int64_t C, pe_err *err);
void pe_attention_free(pe_attention *att);

/* The resolved configuration (defaults filled, scale set). */
const pe_config *pe_attention_config(const pe_attention *att);
int64_t pe_attention_head_dim(const pe_attention *att);
/* The method's tensors for this configuration, in param[] order; returns how many. */
int pe_attention_params(const pe_attention *att, pe_param_spec *specs);
/* Whether the method reads an optional mems tensor (Transformer-XL). */
int pe_attention_has_memory(const pe_attention *att);
/* Position axes the layer reads per token (pe_positions.axes): 1, rope_sections' count, or the
 * rows of rope_mixed's rope_freqs (w: its tensors; may be NULL for the others). */
int64_t pe_attention_axes(const pe_attention *att, const pe_weights *w);

/* Where the tokens of one call sit, and which keys each query may use. Every field is
 * optional (NULL / 0); a NULL pe_positions * means all defaults.
 *   pos      (B, T) when pos_batched, else (T) shared by the batch: query positions i
 *   key_pos  (B, Tk) when key_pos_batched, else (Tk): key positions j (projected form only;
 *            the layer's keys sit at its queries' positions, Transformer-XL's at 0 .. Tk-1)
 *   mask     (B, T, Tk) when mask_batched, else (T, Tk), row-major bytes: 0 masks key j for
 *            query i (PyTorch's boolean attn_mask: true = take part); combines with causal.
 *            Packed documents (positions restarting, a block-diagonal mask) and sliding
 *            windows are said with it. It is copied: it need not outlive the call.
 *   q_lens, k_lens  (B) or NULL (projected form only): rows of different lengths, padded. Row
 *            b's queries are its first q_lens[b] (0 .. T) rows, its keys its first k_lens[b]
 *            (1 .. Tk); the rest is padding: padding keys are masked, padding queries give
 *            o = 0, get no gradient and are never an error, and padding positions are not
 *            read (nor counted in max(positions)). causal then aligns each row bottom-right
 *            on its own lengths (key j masked after query i + k_lens[b] - q_lens[b], as
 *            FlashAttention's variable-length kernels), and the default query positions are
 *            k_lens[b] - q_lens[b] + t.
 *   axes     0 or 1: one position per token. A >= 2 (or 1 for rope_mixed): pos and key_pos carry
 *            a trailing axis, (B, T, A) / (T, A) and (B, Tk, A) / (Tk, A): Qwen2-VL's (time,
 *            row, column) or a ViT's (x, y). Only rope with rope_sections (A = their count) and
 *            rope_mixed (A = rows of rope_freqs) read them; both refuse positions without the
 *            axis, and their default positions give every axis the token's index.
 * Methods take their terms from positions (i - j for relative and bias methods, rotations
 * at i and j), never from token indices; token indices only order the causal mask. */
typedef struct pe_positions {
    const int64_t *pos;
    int pos_batched;
    const int64_t *key_pos;
    int key_pos_batched;
    const uint8_t *mask;
    int mask_batched;
    const int64_t *q_lens, *k_lens;
    int64_t axes;
} pe_positions;

/* How a layer runs, not what it computes: its path, threads and kernels. Each layer keeps
 * its own (set before a forward), so layers in one process do not disturb each other; a
 * zeroed struct is the default. */
enum { PE_PATH_AUTO, PE_PATH_REFERENCE, PE_PATH_FUSED };
/* What a forward_qkv keeps of its inputs for backward_qkv (pe_run_options.saved) */
enum { PE_SAVED_COPIES, PE_SAVED_INPUTS, PE_SAVED_NONE };
typedef struct pe_run_options {
    int path;        /* PE_PATH_AUTO: of the two paths the cheaper by a cost model of the call's
                        shape (the fused one but for short sequences, below about 48 queries
                        or keys at head_dim 64, where its 64 x 64 tiles are mostly padding);
                        PE_PATH_FUSED: the fused path whatever the shape; PE_PATH_REFERENCE:
                        always the T x Tk path. The fused path runs only where the method
                        allows it, no scores or probabilities are asked for and no dropout. */
    int threads;     /* threads of the fused path and the rotations; 0: OpenMP's default */
    char isa[16];    /* kernels: "" the best this CPU runs, or "avx512", "avx2", "generic" */
    int keep_mxcsr;  /* 1: no FTZ/DAZ in the fused threads (by default they flush denormals) */
    int denormals;   /* 1: exp underflows gradually (IEEE) instead of giving 0 below -87 */
    int saved;       /* what forward_qkv keeps for backward_qkv. PE_SAVED_COPIES (0): copies of
                        q, k and v, so the caller may reuse its buffers at once. PE_SAVED_INPUTS:
                        the caller's q, k and v themselves, read in place by the forward and again
                        by the backward (as autograd's saved tensors and FlashAttention's forward),
                        so the caller keeps them unchanged until backward_qkv (o, dq, dk and dv
                        must not share their memory); only what the method's transform rewrites
                        (rope: q and k) is copied. PE_SAVED_NONE:
                        inference (torch.no_grad; an engine's step): q, k and v read in place as
                        with PE_SAVED_INPUTS, and backward_qkv after it is an error. The layer's
                        forward (x) holds its own q, k and v; under PE_SAVED_INPUTS it reads x in
                        place too, where no absolute encoding or memory rewrites it (the caller
                        keeps x unchanged until backward), and after PE_SAVED_NONE its backward is
                        an error. */
} pe_run_options;
void pe_attention_set_run_options(pe_attention *att, const pe_run_options *opt);
/* The kernels the fused path runs under these options (opt NULL: the defaults): "avx512",
 * "avx2" or "generic", the best this CPU runs of what opt->isa asks for. */
const char *pe_run_kernels(const pe_run_options *opt);
/* The path a call of att with B rows, T queries against Tk keys takes under att's run options,
 * PE_PATH_FUSED or PE_PATH_REFERENCE (want_scores: the call asks for scores or probs, which
 * only the reference path has). What PE_PATH_AUTO's cost model picks, for benchmarks and tools.
 * A forward_qkv of few queries (a decode step: H / Hkv * T of 16 rows or fewer) runs the fused
 * family's decode kernel whatever this says, unless the path is PE_PATH_REFERENCE. */
int pe_attention_path(const pe_attention *att, int64_t B, int64_t T, int64_t Tk, int want_scores);

/* Forward of the layer.
 *   x     (B, T, C)
 *   mems  (B, M, C) or NULL (M = 0); only methods with memory
 *   at    positions (default 0..T-1) and attn_mask, or NULL; key_pos must be NULL here
 *   y     (B, T, C)                           out
 *   scores, probs (B, H, T, Tk) or NULL      out: pre-softmax logits (-inf where masked)
 * Asking for scores or probs runs the reference path, which holds (B, H, T, Tk) floats;
 * without them the fused path runs wherever the method allows it (memory O(T + Tk)) and it
 * is the cheaper for the shape (pe_run_options.path).
 * causal (default false) masks key index j > i + M. Saves what backward needs inside att
 * (valid until the next forward), so one layer must not be shared between threads that
 * call it at the same time; distinct layers may run concurrently. */
pe_status pe_attention_layer_forward(pe_attention *att, const pe_weights *w, const float *x,
                                     const float *mems, int64_t M, int64_t B, int64_t T,
                                     const pe_positions *at, float *y, float *scores, float *probs,
                                     pe_err *err);
/* The same with positions only (pos as pe_positions.pos). */
pe_status pe_attention_forward(pe_attention *att, const pe_weights *w, const float *x,
                               const float *mems, int64_t M, const int64_t *pos, int pos_batched,
                               int64_t B, int64_t T, float *y, float *scores, float *probs,
                               pe_err *err);

/* Attention dropout for the forwards that follow (training): each probability p_ij is kept
 * with probability 1 - p and then divided by 1 - p, or zeroed; the mask is a hash of (seed, b,
 * h, i, j), so a backward regenerates its forward's and the same seed draws the same mask
 * (give each training step its own seed). p = 0 turns it off. With dropout > 0 the layer runs
 * the T x Tk path (the fused kernels have none), probs returns the probabilities after dropout
 * (as torch.nn.MultiheadAttention), and a KV cache attends without it. complex refuses it. */
pe_status pe_attention_set_dropout(pe_attention *att, double p, uint64_t seed, pe_err *err);

/* Backward of the last forward.
 *   dy (B, T, C); dx (B, T, C) or NULL, overwritten; g: accumulated (+=), NULL entries skipped.
 * After an error (a gradient that is not finite) dx and g hold no meaningful values. */
pe_status pe_attention_backward(pe_attention *att, const pe_weights *w, const float *dy, float *dx,
                                pe_grads *g, pe_err *err);

/* ---- the projected form: attention over q, k, v ------------------------------------- */
/* For callers that hold q, k and v (an inference engine with a KV cache, packed rows): the
 * layer without its projections. The layer is exactly projections + this + wo.
 *   w     the method's tensors only (param[], param_rows[]); the projections are not read
 *   q     (B, T, H*D) row-major, row stride H*D: heads concatenated
 *   k, v  (B, Tk, Hkv*D), row stride Hkv*D; Tk >= 1 may differ from T (cached keys).
 *         Grouped-query attention: query head h uses kv head h / (H / Hkv) (kv_heads).
 *   at    query positions (default Tk-T .. Tk-1: the queries are the last T tokens), key
 *         positions (default 0 .. Tk-1), attn_mask; or NULL
 *   o     (B, T, H*D) out: heads concatenated, no output projection
 *   scores, probs (B, H, T, Tk) or NULL: as the layer (asking for them runs the T x Tk path)
 * causal masks key index j > i + (Tk - T) (FlashAttention's bottom-right alignment) and
 * needs Tk >= T (per row: k_lens >= q_lens). A query left with no key is an error. Rows of
 * different lengths are padded (q_lens, k_lens of pe_positions), or packed into one row with
 * restarting positions and a block-diagonal mask. Methods that act on the input embedding
 * (sinusoidal, learned, complex) refuse this form. What it keeps for backward_qkv, copies of
 * q, k, v or the caller's arrays themselves or nothing, is pe_run_options.saved. */
pe_status pe_attention_forward_qkv(pe_attention *att, const pe_weights *w, const float *q,
                                   const float *k, const float *v, int64_t B, int64_t T, int64_t Tk,
                                   const pe_positions *at, float *o, float *scores, float *probs,
                                   pe_err *err);
/* An engine's step over the keys and values it keeps (FlashAttention's flash_attn_with_kvcache):
 * T queries q (B, T, H*D) against row b's Tk keys and values read in place at
 * k_cache + b * kv_stride and v_cache + b * kv_stride ((Tk, Hkv*D) each; kv_stride >= Tk*Hkv*D,
 * the engine's capacity per row), o (B, T, H*D) out. at as in forward_qkv: its lengths per row
 * (k_lens: the cache's filled lengths, q_lens), query positions (default k_len - q_len + t),
 * key positions (default 0 .. Tk-1), attn_mask. rotated: the keys and values have passed the
 * method's transform already, as an engine's cache keeps them (rope, xpos: the keys rotated by
 * pe_attention_rotate over the call's range of positions, and with rope_values the values; a
 * method without a transform ignores it); 0: they are transformed here, into a copy. Few
 * queries go through the decode path; saves nothing for backward. */
pe_status pe_attention_forward_kvcache(pe_attention *att, const pe_weights *w, const float *q, const float *k_cache,
                                       const float *v_cache, int64_t kv_stride, int64_t B, int64_t T, int64_t Tk,
                                       const pe_positions *at, int rotated, float *o, pe_err *err);
/* The same step over paged keys (vLLM's layout): k_blocks and v_blocks [n_blocks, block_size,
 * Hkv*D], block_table [B, max_blocks] (int32), row b's key u in block block_table[b][u /
 * block_size] at u % block_size; Tk = max_blocks * block_size, at->k_lens the rows' filled
 * lengths (the table's entries past them are not read). A table entry outside 0 .. n_blocks-1
 * is an error. Decoding reads every key's row in place; otherwise the keys are gathered. */
pe_status pe_attention_forward_paged(pe_attention *att, const pe_weights *w, const float *q, const float *k_blocks,
                                     const float *v_blocks, int64_t n_blocks, int64_t block_size,
                                     const int32_t *block_table, int64_t max_blocks, int64_t B, int64_t T,
                                     const pe_positions *at, int rotated, float *o, pe_err *err);
/* Backward of the last forward_qkv: dout (B, T, H*D); dq (B, T, H*D), dk, dv (B, Tk, Hkv*D)
 * overwritten (each may be NULL); g->dparam accumulated (+=), the projections' entries unused.
 * After an error (a gradient that is not finite) they hold no meaningful values. */
pe_status pe_attention_backward_qkv(pe_attention *att, const pe_weights *w, const float *dout,
                                    float *dq, float *dk, float *dv, pe_grads *g, pe_err *err);

/* ---- rotation on caller buffers (rope, xpos) ------------------------------------------ */
/* What the layer does to q or k, on the caller's rows: an engine that keeps rotated keys in its
 * cache, or rotates q and k in its own kernels. which: PE_ROTATE_Q or PE_ROTATE_K (xPos scales
 * them apart; rope alike).
 *   x        n rows at row stride ld floats, each nh heads of head_dim (H for q, Hkv for k);
 *            only rotary_dim dims of each head move, from dim rotary_offset (0 but in MLA)
 *   pos      (n) the rows' positions
 *   lo, hi   the positions of the whole attention the rows belong to, queries and keys
 *            together: dynamic NTK and LongRoPE choose their frequencies from hi + 1 and xPos
 *            centres its scale on them, as the layer does with its positions; give the same to
 *            the q and the k of one attention. lo <= pos[r] <= hi.
 *   backward 0: x <- R x; 1: x <- R^T x, the backward (the rotation by -theta, same scale)
 * Angles and cos/sin in double, rounded once (exact at 10^6), SIMD and threads as the layer. */
enum { PE_ROTATE_Q, PE_ROTATE_K };
pe_status pe_attention_rotate(pe_attention *att, const pe_weights *w, float *x, int64_t n, int64_t ld, int64_t nh,
                              const int64_t *pos, int64_t lo, int64_t hi, int which, int backward, pe_err *err);
/* The table those rotations use, for callers who apply it themselves: cs (n, rotary_dim/2, 2)
 * = (cos, sin)(pos[r] theta_t) times the scaling's attention factor (xPos: times its scale of
 * q or k); *rotary_dim and *layout (PE_ROPE_HALF or PE_ROPE_INTERLEAVED) say how it pairs, the
 * config's rotary_offset where the rotated slice of a head starts. */
pe_status pe_attention_rotary_table(pe_attention *att, const pe_weights *w, const int64_t *pos, int64_t n,
                                    int64_t lo, int64_t hi, int which, float *cs, int64_t *rotary_dim, int *layout,
                                    pe_err *err);
/* Applies such a table: the first rotary_dim dims of each of nh heads (head_dim D apart) of n
 * rows (row stride ld) rotated by row r's cs (rotary_dim/2, 2), pairs as layout; backward 1
 * rotates by -theta. SIMD and threads (opt->threads; opt NULL: the defaults), the layer's own
 * rotation, bit for bit. */
pe_status pe_rotary_apply(const pe_run_options *opt, float *x, int64_t n, int64_t ld, int64_t nh, int64_t D,
                          int64_t rotary_dim, int layout, const float *cs, int backward, pe_err *err);

/* RoPE's inverse frequencies inv_freq (rotary_dim / 2, double) and the scaling's attention
 * factor on cos and sin (*attention_factor), for a rotary layer's resolved settings
 * (pe_attention_config) at n_pos positions (dynamic NTK and LongRoPE choose by it); factors:
 * LongRoPE's table of that length (NULL: the one read from hf_config, if any). pe_rope_pair_axes:
 * with rope_sections, the position axis each of the rotary_dim / 2 pairs reads. */
pe_status pe_rope_frequencies(const pe_config *cfg, int64_t n_pos, const float *factors, double *inv_freq,
                              double *attention_factor, pe_err *err);
void pe_rope_pair_axes(const pe_config *cfg, uint8_t *axis);

/* Whether the layer takes positions lo .. hi: the checks and tables a forward over them would
 * make (a trainer asks before it evaluates past its training length). PE_OK, or that error. */
pe_status pe_attention_check_positions(pe_attention *att, const pe_weights *w, int64_t lo, int64_t hi, pe_err *err);
/* The table row (clipped offset or bucket) a relative method reads for a query at position i
 * and a key at position j (pe_method_info.relative_index: shaw, t5, tupe, deberta); PE_EINVAL
 * for a method without one. */
pe_status pe_attention_relative_index(const pe_attention *att, int64_t i, int64_t j, int64_t *index, pe_err *err);

/* ---- complex-valued layers (method complex) ------------------------------------------- */
/* A complex-valued layer reads token ids instead of x and has two outputs: the real part y
 * and the imaginary part y_imag. pe_attention_forward refuses it (and the *_ids calls refuse
 * every other layer); pe_attention_backward takes it with dy_imag = 0 and dx = NULL. */
int pe_attention_is_complex(const pe_attention *att);

/* Forward.
 *   ids       (B, T) token ids: rows of the method's tables
 *   pos       as pe_attention_forward
 *   y, y_imag (B, T, C)                      out
 *   scores, probs (B, H, T, T) or NULL       out */
pe_status pe_attention_forward_ids(pe_attention *att, const pe_weights *w, const int64_t *ids,
                                   const int64_t *pos, int pos_batched, int64_t B, int64_t T,
                                   float *y, float *y_imag, float *scores, float *probs,
                                   pe_err *err);

/* The same with positions and attn_mask as pe_attention_layer_forward (key_pos and the
 * lengths must be NULL). */
pe_status pe_attention_layer_forward_ids(pe_attention *att, const pe_weights *w, const int64_t *ids,
                                         int64_t B, int64_t T, const pe_positions *at, float *y,
                                         float *y_imag, float *scores, float *probs, pe_err *err);

/* Backward of the last forward_ids: dy, dy_imag (B, T, C), either may be NULL (zero), not
 * both. There is no dx: ids have no gradient. g: accumulated (+=). */
pe_status pe_attention_backward_ids(pe_attention *att, const pe_weights *w, const float *dy,
                                    const float *dy_imag, pe_grads *g, pe_err *err);

#ifdef __cplusplus
}
#endif
#endif /* POSENC_CORE_H */
