/* Internal interface between the attention core and the methods.
 *
 * Legend: B batch, T queries, Tk keys (the queries are the last T of them: qoff = Tk - T is
 * the first query's token index among the keys), H heads, Hkv key/value heads, D head_dim,
 * C = H*D, Ckv = Hkv*D. Positions are int64: a query's `i` is pos[b, t], a key's `j` is
 * kpos[b, u]; token indices (t, u) only order the causal mask.
 *
 * A method is a table of hooks (pe__method). The attention core (attention.c) is the only
 * caller of hooks; it walks them in this order and, in backward, in exact reverse:
 *
 *   forward                                 backward
 *   prepare   tables from params/positions  (reuses the forward's state)
 *   embed     x' = x + P[pos], or x read    embed_backward   dP from dx'; dx (in place) from
 *             (PE__LAYER_INPUT)                                 dx' and the terms x feeds
 *   (projections)
 *   rotate    q, k (and v) transformed      rotate_backward  dq, dk, dv back through it
 *   (or lift  q, k to W wide vectors        lift_backward    the transform stage's other form)
 *   score_mod s of a tile, in place: a      score_mod_backward  ds, dq, dk, d(tables) (tile)
 *             bias, a product, a gather,
 *             or a whole head's score
 *   mask      extra masked entries (causal by token index is the core's)
 *   (softmax)
 *   value_mod o += sum_j p_ij u_ij (tile)   value_mod_backward  dp, d(tables) from do (tile)
 *                                           finish_backward  d(params) from d(tables) of prepare
 *
 * Every hook may be NULL. Backward hooks accumulate (+=) into gradients; the caller zeroes.
 * The tile hooks (score_mod, value_mod) work on a tile [i0, i0+ni) x [j0, j0+nj) of one
 * (b, h), so that the fused path calls them per tile without materialising T x Tk, and the
 * reference path calls the same hooks over the whole head: one implementation of the maths.
 */
#ifndef PE_INTERNAL_H
#define PE_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"

#define PE_PI 3.14159265358979323846
/* Bounds on what input may ask for, checked where it enters: integer keys, positions (exact
 * in double, so angles and differences are), elements of one tensor. */
#define PE_MAX_KEY_INT ((int64_t)1 << 31)
#define PE_MAX_POSITION ((int64_t)1 << 53)

#define PE_ASSERT(x)                                                                      \
    do {                                                                                  \
        if (!(x)) {                                                                       \
            fprintf(stderr, "posenc: %s:%d: assertion failed: %s\n", __FILE__, __LINE__, #x); \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* What a hook sees of the current call. */
/* Scratch that outlives a call: grown when a call needs more, freed with its owner. */
typedef struct pe__scratch {
    float *p; /* 64-byte aligned */
    size_t n; /* floats */
} pe__scratch;
/* n floats of sc (not zeroed), grown if needed; NULL when out of memory (exec/run.c) */
float *pe__scratch_get(pe__scratch *sc, size_t n);
/* What a kept table was built from: whether the bytes of parts, in order, are those *key holds
 * from the last build. When not, key takes them and the caller rebuilds (or, if that fails,
 * releases its state with key); 0 every time memory runs out. (exec/run.c) */
typedef struct pe__bytes {
    const void *p;
    size_t n;
} pe__bytes;
int pe__inputs_same(pe__scratch *key, const pe__bytes *parts, int n);

typedef struct pe__ctx {
    const pe_config *cfg; /* resolved */
    int64_t B, T, Tk, qoff, H, Hkv, D, C, Ckv; /* qoff = Tk - T */
    /* The values' head width: D, but where a lifted method attends (core.c: q and k of W, the
     * values as they are). v and dv rows are Hkv Dv wide, o and dout rows H Dv. */
    int64_t Dv;
    const int64_t *pos;       /* (B, T, A) query positions */
    const int64_t *kpos;      /* (B, Tk, A) key positions (== pos in a layer without memory) */
    int64_t A;                /* axes per position: 1 but for methods with an axes hook */
    int64_t pos_min, pos_max; /* over queries and keys together (every axis) */
    const uint8_t *mask;      /* (B, T, Tk) attn_mask, 0 = masked, or NULL */
    const int64_t *q_len, *k_len; /* (B) valid queries and keys of each row (padding after), or NULL */
    int fused;                /* the call runs the fused path: score and value hooks are not called */
    uint8_t *tiles;           /* the fused path's census of mask tiles, made once per call (forward,
                                 reused by backward); the core frees it */
    const pe_run_options *run; /* the layer's: threads and kernels of the fused path and rotations */
    const pe_weights *w;
    pe_grads *g; /* NULL in forward */
    void *state; /* the method's, from prepare; freed by release */
    const int64_t *ids; /* (B, T) token ids of a complex-valued layer (PE__COMPLEX), else NULL */
    pe__scratch *scratch; /* the layer's, for the fused path's packed keys and tiles */
    /* attention_sinks: head h's learned logit sinks[h] joins every query's softmax with no value
     * (GPT-OSS); every executor folds it into its row sums, the core takes its gradient (core.c).
     * NULL without; dsinks: its gradient in backward, or NULL */
    const float *sinks;
    float *dsinks;
    /* The transform stage's backward reads q and k as they were before it (rotate_backward's
     * q_in, k_in: a gradient of the transform's own tensors): 1 before prepare, which clears it
     * for a transform that needs only the gradients, so the core keeps no copy (two passes
     * over q and k a forward). */
    int reads_inputs;
    /* Which of q, k and v the transform stage rewrites (PE__TQ | PE__TK | PE__TV): all three
     * before prepare, which narrows it (rope: q and k, v too with rope_values), so a caller's
     * arrays that it leaves alone are read in place (pe_run_options.saved) */
    unsigned transforms;
    /* Of those, the ones the rotate hook can write from the caller's arrays into the layer's
     * buffers it is handed (rope, RoPE-Mixed and xPos rotating whole heads, FoPE), set by
     * prepare: the projected form then copies none of them but points q_src, k_src, v_src at
     * the caller's (one pass over them less). NULL sources: the hook works in place. */
    unsigned rotates_from;
    const float *q_src, *k_src, *v_src;
} pe__ctx;
enum { PE__TQ = 1, PE__TK = 2, PE__TV = 4 };

enum {
    PE__GQA = 1,    /* supports kv_heads < heads */
    PE__MEMORY = 2, /* reads mems (keys and values over memory + segment) */
    /* Complex-valued (complex): token ids replace x, and the layer is the method's own walk
     * (walk_forward, walk_backward: an imaginary stream beside the real one). */
    PE__COMPLEX = 4,
    /* ctx->state outlives a forward (a cache): prepare finds the previous call's state in
     * ctx->state (NULL the first time) and release runs only when the layer is freed. */
    PE__PERSIST = 8,
    /* Acts on the input embedding (x or token ids), not on q and k: no projected form. */
    PE__INPUT = 16,
    /* The fused path computes it: no per-(b, h) score or value hook, its score and value
     * terms as tile hooks (score_mod, value_mod, bias) that run from any thread (their backward
     * writes only ctx->g, t->dq and t->dk), no mask hook, no memory, no walk of its own.
     * test_fused holds every method with it to the reference. */
    PE__FUSED = 32,
    /* Reads the layer's input x for terms of its own beyond the embedding (data_alibi's forget
     * gates): the embed hook sees x (x' = x) and keeps what the other hooks need, embed_backward
     * adds those terms' gradient into dx. q, k and v do not carry x: no projected form, no KV
     * cache (both refuse it). */
    PE__LAYER_INPUT = 64,
    /* Its score_mod writes the whole score (huang3's elementwise product): the executors pass it
     * zeros for the plain term, and take no gradient of the plain term from its backward. */
    PE__SCORE_OWN = 128,
    /* Its score_mod reads the tile's q and k (t->q, t->k, t->kt; shaw, huang); without it the
     * hook is a bias of positions and tensors alone, which the decode path calls too. */
    PE__SCORE_QK = 256,
    /* Its score_mod_backward reads the plain term it modified (s_in: huang1, huang2's product) */
    PE__SCORE_PLAIN = 512,
    /* Its score_mod takes only a whole head as its tile (terms over every key of a query:
     * xl's relative shift over [memory; segment], deberta's two-sided gathers, cope's gates,
     * cumulative over keys): the reference path, which calls it so. */
    PE__SCORE_HEAD = 1024,
    /* Its hooks gather per query block (products of the block's queries with a table, formed
     * once for all its key tiles): the executors call score_mod with a BEGIN tile (the block's
     * rows, no keys) before a block's tiles, forward and backward, and score_mod_backward with
     * BEGIN and END tiles around them in backward, which the scratch (per thread) spans. */
    PE__SCORE_BLOCK = 2048,
    /* Refuses causal=false (cope: its positions count the keys up to the query); tools that
     * sweep both settings skip the other (pe_method_info.causal_only). */
    PE__CAUSAL_ONLY = 4096,
};

/* One tile of one (b, h)'s scores, as the score and value hooks see it in every executor:
 * queries i0 .. i0+ni-1 and keys j0 .. j0+nj-1 of row b (positions ctx->pos[b T + i],
 * ctx->kpos[b Tk + j]). q (ni rows, ldq), k (nj rows, ldk) and kt (D rows of nj keys, ldkt):
 * the transformed q and k, unscaled. Backward: dq, dk, where the hook's own terms add their
 * gradients (strides ldq, ldk). scratch: tile_scratch floats of the calling thread. */
/* c (rows, n; ldc) += A B with A(r, l) = a[r ars + l als] (rows, L), B (L, n; ldb): the fused
 * kernels' register-blocked product (rows % 4 == 0, n % 16 == 0) */
typedef void (*pe__mm_fn)(float *c, int64_t ldc, const float *a, int64_t ars, int64_t als, const float *b,
                          int64_t ldb, int64_t rows, int64_t L, int64_t n);
typedef struct pe__tile {
    int64_t b, h, i0, ni, j0, nj;
    const float *q, *k, *kt;
    int64_t ldq, ldk, ldkt;
    float *dq, *dk;
    const float *dout; /* backward: the tile's rows of the output's gradient (stride ldd) */
    int64_t ldd;
    float *scratch;
    int phase; /* PE__TILE_PAIRS, or (PE__SCORE_BLOCK) a query block's BEGIN (j0, nj: the keys its
                * tiles may visit; no scores) or END (no keys) */
    /* The fused path's product, or NULL (the reference path): with it the tile is padded with
     * zeros to pr x pc, ldk (the k rows' stride, padded too) is a multiple of 16 and the
     * transposed keys reach pc columns; s and ds are (pr, pc) with stride pc. */
    pe__mm_fn mm;
    int64_t pr, pc;
} pe__tile;
enum { PE__TILE_PAIRS, PE__TILE_BEGIN, PE__TILE_END };

typedef struct pe__method {
    const char *name;
    const char *reference; /* the paper and the implementation it follows (posenc methods NAME) */
    pe_family family;
    const char *keys; /* the method's own keys, space-separated */
    unsigned flags;

    /* The hook table a layer of these settings runs, when they change which hooks a method
     * has (NoPE with temperature tuning rotates q); NULL: this one. */
    const struct pe__method *(*variant)(const pe_config *cfg);

    /* The reference model's conventions beyond its tensors (pe_method_info): its scores are
     * unscaled, 1/sqrt(d) folded into the query's initialisation (scale_in_init); its
     * positions have at least axes_min axes (0: one). */
    int scale_in_init;
    int axes_min;
    /* Sizes the keys it bounds by the longest training sequence, where not given
     * (pe_config_fit_length), or NULL. */
    void (*fit_length)(pe_config *cfg, int64_t length);

    /* Configuration: fill method defaults for keys not given (cfg->set), then validate. */
    void (*defaults)(pe_config *cfg, int64_t H, int64_t D);
    pe_status (*check)(const pe_config *cfg, int64_t H, int64_t D, pe_err *err);
    /* The method's tensors, in the order of pe_weights.param; returns the count. */
    int (*params)(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *specs);

    /* How many position axes the method reads per token (pe_positions.axes); NULL: one. */
    int64_t (*axes)(const pe_config *cfg, const pe_weights *w);

    /* Per forward: validate positions, build tables into ctx->state. */
    pe_status (*prepare)(pe__ctx *ctx, pe_err *err);
    void (*release)(pe__ctx *ctx);
    /* Last step of backward: gradients of the tables prepare derived (accumulated in
     * ctx->state by the other backward hooks) flow to the method's parameters. */
    void (*finish_backward)(pe__ctx *ctx);

    void (*embed_forward)(pe__ctx *ctx, float *x /* (B, T, C) */);
    /* dx holds dx' on entry and dx on return: x' = x + P[pos] leaves it as it is; a method that
     * reads x (PE__LAYER_INPUT) adds the gradient of the terms x feeds. */
    void (*embed_backward)(pe__ctx *ctx, float *dx /* (B, T, C) */);

    /* q at the query positions, k and v at the key positions; q, or k and v, may be NULL (a
     * cache transforms its keys once, on append, and its queries on attend) */
    void (*rotate_forward)(pe__ctx *ctx, float *q /* (B, T, C) */, float *k /* (B, Tk, Ckv) */,
                           float *v /* (B, Tk, Ckv) */);
    /* q_in, k_in: the hook's inputs in forward, for parameter gradients. */
    void (*rotate_backward)(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in,
                            const float *k_in);
    /* The output stage, where output_used says the config asks for one (rope_values): o (B, T, C)
     * transformed in place after the executor, at the query positions; output_backward takes
     * dout through its transpose, in place. A KV cache runs it after attending, as it runs the
     * transform stage of its queries. */
    int (*output_used)(const pe_config *cfg);
    void (*output_forward)(pe__ctx *ctx, float *o);
    void (*output_backward)(pe__ctx *ctx, float *dout);

    /* The transform stage of a method whose vectors change width: a score that is the plain
     * product of lifted vectors, s = scale q'.k' with q', k' of width W = lift_width (PoPE:
     * magnitude times cos and sin per frequency). lift_forward writes every head's, qw
     * (B, T, H W) and kw (B, Tk, H W), a key per *query* head (the lift of a key may read the
     * query head's tensors); lift_backward adds to dq, dk and the method's gradients from dqw,
     * dkw. Both executors attend over the lifted vectors (the values as they are, D wide:
     * pe__ctx.Dv): the lift is the method's one implementation, it has no score_mod. */
    int64_t (*lift_width)(const pe_config *cfg, int64_t D);
    void (*lift_forward)(pe__ctx *ctx, const float *q, const float *k, float *qw, float *kw);
    void (*lift_backward)(pe__ctx *ctx, const float *q, const float *k, const float *dqw, const float *dkw,
                          float *dq, float *dk);

    /* 1 when the method masks key j for query i (token indices: query i is token qoff + i
     * of the keys), beyond the core's causal mask and attn_mask. */
    int (*mask)(const pe__ctx *ctx, int64_t b, int64_t i, int64_t j);

    /* Why a method whose transform stage is no rotation by one angle per pair, shared by the
     * heads, has no rotation API (pe_attention_rotate refuses it with this), or NULL. */
    const char *not_a_rotation;
    /* A rotary method's exact table after prepare, for rotations on caller buffers: the
     * (rows, rd/2, 2) cos, sin (scale included) of the queries (which 0) or keys (which 1),
     * rows in ctx->pos order; *rd and *layout say what it rotates. */
    const float *(*rotary_table)(const pe__ctx *ctx, int which, int64_t *rd, int *layout);
    /* The same in double for one pair t of a token at positions p (its ctx->A axes; the pair
     * reads its own) after prepare: its angle and its scale (which: 0 q, 1 k), from which a cache
     * re-rotates keys by differences. */
    void (*rotary_angle)(const pe__ctx *ctx, int which, const int64_t *p, int64_t t, double *angle, double *scale);
    /* A rotary method's rotations depend on the attention's range of positions [lo, hi] (its
     * pos_min, pos_max) only through a frame: 1 when an attention over [lo, hi] needs another
     * frame than cur (the range a cache rotated its keys in), which then becomes [lo, hi].
     * NULL: the transformation depends on the positions alone (floater). */
    int (*rotary_frame)(const pe_config *cfg, int64_t D, const int64_t cur[2], int64_t lo, int64_t hi);

    /* The table row a relative method reads for a query at position i and a key at position j
     * (its clipped offset or bucket), for tools that draw it (pe_attention_relative_index). */
    int64_t (*rel_index)(const pe_config *cfg, int64_t i, int64_t j);

    /* The score interface (FlexAttention's score_mod, with its backward): per tile (pe__tile),
     * in every executor, from any thread.
     *   score_mod: s (ni, nj; lds) holds the plain term scale q.k (zeros with PE__SCORE_OWN);
     *     the hook applies its terms in place.
     *   score_mod_backward: s_in the plain term as score_mod saw it (NULL with PE__SCORE_OWN);
     *     ds the gradient of the scores on entry, of the plain term on return; the hook adds
     *     its terms' gradients into t->dq, t->dk and ctx->g.
     *   value_mod: o_i += sum_j p_ij u_ij for the tile's weights p (ni, nj; ldp), o (ni, D; ldo).
     *   value_mod_backward: dp_ij += do_i . u_ij (dout (ni, D; ldd), dp (ni, nj; lddp)), and u's
     *     tensors' gradients into ctx->g.
     *   tile_scratch: floats of t->scratch a tile of rows x cols needs (NULL: none). */
    void (*score_mod)(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds);
    void (*score_mod_backward)(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds);
    void (*value_mod)(pe__ctx *ctx, const pe__tile *t, const float *p, int64_t ldp, float *o, int64_t ldo);
    void (*value_mod_backward)(pe__ctx *ctx, const pe__tile *t, const float *p, int64_t ldp, const float *dout,
                               int64_t ldd, float *dp, int64_t lddp);
    int64_t (*tile_scratch)(const pe_config *cfg, int64_t D, int64_t rows, int64_t cols);

    /* A layer with a walk of its own (PE__COMPLEX: token ids, a second, imaginary stream):
     * the core set the context and ran prepare; walk_forward does the rest of the layer
     * (y and y_im (B, T, C); scores, probs (B, H, T, Tk) or NULL) keeping what its backward
     * needs in ctx->state, walk_backward the reverse (dy or dy_im may be NULL: zero) into
     * ctx->g. embed_pair writes the two-part embedding of ctx->ids, re and im (B, T, C)
     * (pe_encode). */
    pe_status (*walk_forward)(pe__ctx *ctx, float *y, float *y_im, float *scores, float *probs, pe_err *err);
    pe_status (*walk_backward)(pe__ctx *ctx, const float *dy, const float *dy_im, pe_err *err);
    void (*embed_pair)(pe__ctx *ctx, float *re, float *im);
} pe__method;

#define X(id, name, family) extern const pe__method pe__method_##name;
#include "posenc_methods.def"
#undef X

const pe__method *pe__method_get(int m);

/* Fills method- and width-dependent defaults into cfg and validates it (config.c). */
pe_status pe__config_resolve(pe_config *cfg, int64_t C, pe_err *err);

/* y (n, out) = x (n, in) W^T + b (b may be NULL), and its backward: dx (+)= dy W (dx NULL:
 * skipped; accumulate 0 overwrites), dW += dy^T x, db += column sums of dy. */
void pe__linear_forward(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                        int64_t out);
void pe__linear_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                         const float *w, int64_t n, int64_t in, int64_t out);

/* s (T, Tk) of row b = -inf outside each query's band (pe__band_range: causal, window, the row's
 * lengths), where attn_mask or the method's mask hook (m may be NULL) masks; returns the first
 * query left with no key, or -1. */
int64_t pe__mask_scores(const pe__ctx *ctx, const pe__method *m, int64_t b, float *s);
/* The error of query i of row b left with nothing to average, in every executor: every key
 * masked (band, attn_mask, the mask hook of m), or, when it keeps a key, scores that are not
 * finite (exec/reference.c) */
pe_status pe__empty_row(const pe__ctx *ctx, const pe__method *m, int64_t b, int64_t i, pe_err *err);

/* The plain content term s = scale * q.k over one (b, h), and its backward (+=). */
void pe__score_dot_forward(const pe__ctx *ctx, const float *q, const float *k, float *s);
void pe__score_dot_backward(const pe__ctx *ctx, const float *ds, const float *q, const float *k,
                            float *dq, float *dk);

/* C (m x n) = alpha op(A) op(B) + beta C, row-major (cblas semantics). */
void pe__gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc);
/* In double: C (+)= op(A) B (FoPE's tables) */
void pe__dgemm(int trans_a, int accumulate, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
               const double *b, int64_t ldb, double *c, int64_t ldc);

/* Row-wise softmax of s (n rows, m columns) into p; -inf entries give 0. sink: a logit in every
 * row's sum with no column of its own (attention_sinks), -INFINITY for none. */
void pe__softmax_forward(const float *s, float *p, int64_t n, int64_t m, float sink);
/* Each row's weight of the sink in that softmax, from its scores (n rows of m; 0 for a row of
 * padding, every key masked), into ps (n) */
void pe__softmax_sink_weights(const float *s, int64_t n, int64_t m, float sink, float *ps);
/* ds = p * (dp - sum_j p dp), row-wise. */
void pe__softmax_backward(const float *p, const float *dp, float *ds, int64_t n, int64_t m);

/* A tile hook whose loops the compiler vectorises, built also for AVX2 and chosen by the CPU
 * when the library loads (GCC's target_clones, an ifunc): the kernels' width for the methods'
 * own loops. Their sums keep a fixed order (lanes written out), so both builds give the same
 * bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define PE_TILE_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define PE_TILE_SIMD
#endif

/* Helpers shared by methods. */
/* clip(a - b, -K, K) without overflow for any positions */
static inline int64_t pe__clip_diff(int64_t a, int64_t b, int64_t K) {
    const uint64_t d = a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
    const int64_t m = d > (uint64_t)K ? K : (int64_t)d;
    return a >= b ? m : -m;
}
/* The least and greatest clip(sign (kpos_j - pos_i), -K, K) of tile t (sign +1 or -1): a
 * relative method's table rows of the tile lie between them. */
void pe__tile_offsets(const pe__ctx *ctx, const pe__tile *t, int sign, int64_t K, int64_t *lo, int64_t *hi);
/* The same over the pairs the band lets through (the masked half of a causal diagonal tile
 * does not widen it; exact where the key positions do not decrease, else the whole tile's);
 * 0 when no pair is visible. pe__tile_row_visible: row i's visible keys [ja, jb). */
int pe__tile_visible_offsets(const pe__ctx *ctx, const pe__tile *t, int sign, int64_t K, int64_t *lo, int64_t *hi);
void pe__tile_row_visible(const pe__ctx *ctx, const pe__tile *t, int64_t i, int64_t *ja, int64_t *jb);
/* out (n, nr) = x (n, D; ldx) times the table rows lo .. lo + nr - 1, the table given
 * transposed, tt (D, R) (relative/offsets.c) */
void pe__table_products(const float *x, int64_t ldx, int64_t n, const float *tt, int64_t R, int64_t D, int64_t lo,
                        int64_t nr, float *out);
/* y (D) += the sum over x < nc of c[x cs] rows[x ldr ..], in order of x, the zero weights
 * skipped: the axpys of rows into y, with y held in registers across them (relative/offsets.c) */
void pe__weighted_rows(float *y, const float *c, int64_t cs, int64_t nc, const float *rows, int64_t ldr, int64_t D);
/* x[0] + ... + x[n - 1], and x . y, in 8 lanes (relative/offsets.c): in order, a chain of adds */
float pe__lane_sum(const float *x, int64_t n);
float pe__lane_dot(const float *x, const float *y, int64_t n);
static inline void pe__config_mark(pe_config *cfg, pe_key k) { cfg->set[k / 64] |= (uint64_t)1 << (k % 64); }
/* t5's and tupe's fit_length (t5.c) */
void pe__t5_fit_length(pe_config *cfg, int64_t length);
/* The query factors of Llama 4's NoPE temperature and Ministral 3's scaling: 1 + beta ln(1 +
 * floor(p / L)) in double, rounded once (HF forms it in float32 from an exact floor). */
static inline float pe__log_floor_factor(double p, double beta, double L) {
    return (float)(1.0 + beta * log1p(floor(p / L)));
}

static inline int64_t pe__clip(int64_t a, int64_t lo, int64_t hi) {
    return a < lo ? lo : a > hi ? hi : a;
}

/* The one visibility rule: which keys a query sees, by token index. Query i of a row with Tk
 * keys is key token qoff + i (the queries are the last of the row's tokens); it sees the keys
 * j in [lo, hi) with
 *   qoff + i - left <= j <= qoff + i + right      (left, right: the window; -1: no limit)
 *   0 <= j < Tk
 * FlashAttention's window_size (flash_attn_interface.py, flash_attn_func: "keys between
 * [i + seqlen_k - seqlen_q - window_size[0], i + seqlen_k - seqlen_q + window_size[1]]
 * inclusive"); causal is the window's right side at 0. attn_mask and a method's mask hook then
 * mask entries inside the range. The reference path's mask (pe__mask_scores), the fused path's
 * tile loops and masks, the decode path's key range, CoPE's gates and the cost model all take
 * their keys from pe__band_range. */
typedef struct pe__band {
    int64_t left, right; /* -1: no limit on that side */
} pe__band;
static inline pe__band pe__band_make(int causal, int64_t left, int64_t right) {
    return (pe__band){left < 0 ? -1 : left, causal && (right < 0 || right > 0) ? 0 : right < 0 ? -1 : right};
}
/* A layer's: causal and the window key (window_left, window_right) */
static inline pe__band pe__band_of(const pe_config *cfg) {
    const int w = cfg->window.n == 2;
    return pe__band_make(cfg->causal, w ? cfg->window.v[0] : -1, w ? cfg->window.v[1] : -1);
}
static inline void pe__band_range(pe__band w, int64_t qoff, int64_t i, int64_t Tk, int64_t *lo, int64_t *hi) {
    const int64_t t = qoff + i;
    *lo = pe__clip(w.left < 0 ? 0 : t - w.left, 0, Tk);
    *hi = pe__clip(w.right < 0 ? Tk : t + w.right + 1, *lo, Tk);
}
/* Row b's valid queries, keys and causal offset (all of them without per-row lengths). */
static inline void pe__row_lens(const pe__ctx *ctx, int64_t b, int64_t *T, int64_t *Tk, int64_t *qoff) {
    *T = ctx->q_len ? ctx->q_len[b] : ctx->T;
    *Tk = ctx->k_len ? ctx->k_len[b] : ctx->Tk;
    *qoff = *Tk - *T;
}

/* The largest |offset| between two positions of the call when a table per offset pays (t5's
 * buckets, fire's biases), or -1: not past 2^22, nor longer than the (B, T, Tk) entries it
 * replaces (two tokens a million positions apart). `signed_offsets`: the table has 2 span + 1 rows. */
static inline int64_t pe__offset_table_span(const pe__ctx *ctx, int signed_offsets) {
    uint64_t span = (uint64_t)ctx->pos_max - (uint64_t)ctx->pos_min;
    double rows = (double)((signed_offsets ? 2 : 1) * span + 1);
    return span < (1u << 22) && rows <= (double)ctx->B * ctx->T * ctx->Tk ? (int64_t)span : -1;
}

/* A tile's entries by diagonal, for biases (score_mod) whose term is a function of the offset
 * kpos_j - pos_i alone (t5, alibi, kerple). Where the row's query positions and key positions
 * each run consecutively over the tile, entry (i, j) has offset o0 + d on diagonal
 * d = j - i + ni - 1, so the term is evaluated ni + nj - 1 times instead of ni nj, and a
 * backward sums ds along each diagonal first: no scatter into one table entry per element
 * (a store-to-load chain) and no serial accumulation per element. Returns 1 and o0 for such a
 * tile of at most PE_DIAG_MAX diagonals, 0 otherwise (gapped positions, the reference path's
 * whole (T, Tk) calls): the hook then goes entry by entry. */
enum { PE_DIAG_MAX = 255 };
static inline int pe__tile_diagonals(const pe__ctx *ctx, int64_t b, int64_t i0, int64_t ni, int64_t j0, int64_t nj,
                                     int64_t *o0) {
    if (ni + nj - 1 > PE_DIAG_MAX || ni < 1 || nj < 1) return 0;
    const int64_t *pos = ctx->pos + b * ctx->T + i0, *kpos = ctx->kpos + b * ctx->Tk + j0;
    for (int64_t i = 1; i < ni; i++)
        if (pos[i] - pos[0] != i) return 0;
    for (int64_t j = 1; j < nj; j++)
        if (kpos[j] - kpos[0] != j) return 0;
    *o0 = kpos[0] - pos[0] - (ni - 1);
    return 1;
}
/* s[i][j] += bd[j - i + ni - 1]: a term per diagonal added to every entry of it */
static inline void pe__diag_add(float *s, int64_t lds, int64_t ni, int64_t nj, const float *bd) {
    for (int64_t i = 0; i < ni; i++) {
        const float *row = bd + ni - 1 - i;
        for (int64_t j = 0; j < nj; j++) s[i * lds + j] += row[j];
    }
}
/* dd[d] = the sum of ds over diagonal d of the tile (ni + nj - 1 values), rows in order */
static inline void pe__diag_sums(float *dd, const float *ds, int64_t lds, int64_t ni, int64_t nj) {
    memset(dd, 0, sizeof(float) * (size_t)(ni + nj - 1));
    for (int64_t i = 0; i < ni; i++) {
        float *row = dd + ni - 1 - i;
        const float *g = ds + i * lds;
        for (int64_t j = 0; j < nj; j++) row[j] += g[j];
    }
}

static inline void *pe__calloc(size_t n, size_t size) { return calloc(n ? n : 1, size); }
static inline float pe__dot(const float *a, const float *b, int64_t n) {
    float s = 0;
    for (int64_t d = 0; d < n; d++) s += a[d] * b[d];
    return s;
}
/* y += a x */
static inline void pe__axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t d = 0; d < n; d++) y[d] += a * x[d];
}

/* P[p] of the sinusoidal encoding (C values, double), layout PE_SIN_*; and of its pairs
 * t0 .. t0+n-1 alone, sc (n, 2) = (sin, cos)(p w_t). */
void pe__sinusoidal_row(double *row, double p, int64_t C, int layout, double base);
void pe__sinusoidal_pairs(double *sc, double p, int64_t C, int layout, double base, int64_t t0, int64_t n);

/* The kernels' vector maths (exec/vmath.h) of the run's isa: s, c = sin, cos of n angles in
 * double (within 3e-16 of libm's); sp, sig = PyTorch's softplus and its sigmoid in float (a
 * few ulp). Outputs may be NULL; c may be x. */
typedef void (*pe__sincos_fn)(const double *x, double *s, double *c, int64_t n);
typedef void (*pe__softplus_fn)(const float *x, float *sp, float *sig, int64_t n);
pe__sincos_fn pe__sincos_kernel(const pe_run_options *run);
pe__softplus_fn pe__softplus_kernel(const pe_run_options *run);

/* fn(arg, i) for every i in 0 .. n-1 across the run's threads (one below about 2^22 multiply-adds
 * of work, or inside another parallel region); static schedule, each i on one thread (exec/run.c) */
void pe__parallel_for(const pe_run_options *run, double work, int64_t n, void (*fn)(void *arg, int64_t i), void *arg);
/* The fused attention path (exec/fused.c): tiled, online softmax, no (T, Tk) buffer; backward
 * recomputes tiles. It takes the methods flagged PE__FUSED. stats: (2, B, H, T) floats saved
 * by forward for backward. Threads and kernels from ctx->run. Backward adds into dq; dk and dv,
 * zeroed by the caller as the core's contract says, it writes whole (each kv head's rows from
 * its work item: 0 + x is x, and storing them spares loading rows the caller zeroed long before). */
int pe__fused_eligible(const pe__method *m);
/* Whether the fused path costs less than the reference path for a call of B rows, H heads
 * of D, T queries against Tk keys, each query seeing its band's keys (exec/fused.c) */
int pe__fused_cheaper(int64_t B, int64_t H, int64_t T, int64_t Tk, int64_t qoff, int64_t D, pe__band band);
pe_status pe__fused_forward(pe__ctx *ctx, const pe__method *m, const float *q, const float *k,
                            const float *v, float *o, float *stats, pe_err *err);
pe_status pe__fused_backward(pe__ctx *ctx, const pe__method *m, const pe_param_spec *specs, int nparams,
                             const float *q, const float *k, const float *v, const float *o,
                             const float *stats, const float *dout, float *dq, float *dk, float *dv,
                             pe_err *err);

/* The decode path (exec/decode.c): few queries (H / Hkv * T <= 64) against keys and values read in
 * place, k and v of row b at k + b kv_stride (row stride Ckv), each loaded once per call: a
 * KV cache's attention. It takes fused methods whose score_mod is a bias or a product with the
 * plain term (no PE__SCORE_QK), without value_mod, lift or attn_mask, and without a rotate
 * hook unless q and k are already transformed (pe__decode_eligible);
 * o (B, T, C); stats (2, B, H, T) the fused path's row max and 1 / sum (its backward reads
 * them), or NULL. rows (paged keys; NULL: k, v and kv_stride): key u of row b at
 * rows[b Tk + u], its value at rows[(B + b) Tk + u]. */
int pe__decode_eligible(const pe__method *m, int transformed, int64_t H, int64_t Hkv, int64_t T, int masked);
pe_status pe__decode_forward(pe__ctx *ctx, const pe__method *m, const float *q, const float *k, const float *v,
                             int64_t kv_stride, const float *const *rows, float *o, float *stats, pe_err *err);

/* Attention over keys and values held elsewhere (a KV cache, cache.c): q (B, T, C); k, v of row
 * b at k + b kv_stride, row stride Ckv, Tk of them; at as the projected form; o (B, T, C).
 * transformed: q, k and v have passed the method's transform stage (embed, rotate) already, so
 * the core does not run it (the cache transforms keys once, on append, and queries on attend);
 * a method with nothing beyond that stage then attends as plain attention. The decode path
 * where it applies, else the projected form over a contiguous copy. Saves nothing for backward. */
pe_status pe__attention_attend_kv(pe_attention *a, const pe_weights *w, const float *q, const float *k,
                                  const float *v, int64_t kv_stride, const float *const *rows, int64_t B, int64_t T,
                                  int64_t Tk, const pe_positions *at, int transformed, float *o, pe_err *err);
/* K and V of B rows into dst ((B, Tk, Ckv) keys, then values): from k, v at row stride kv_stride,
 * or (rows not NULL) from each key's and value's row as pe__decode_forward reads them. */
void pe__gather_rows(float *dst, const float *k, const float *v, int64_t kv_stride, const float *const *rows, int64_t B,
                     int64_t Tk, int64_t Ckv);
/* A context of n rows at positions pos (n, A: the layer's axes; as both queries and keys) in an
 * attention over positions [lo, hi], prepared; pe__attention_release frees what prepare made. */
pe_status pe__attention_context(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                                int64_t hi, pe__ctx *ctx, pe_err *err);
void pe__attention_release(pe_attention *a, pe__ctx *ctx);
/* The method's embed hook on x (n, C) and rotate hook on q (n, C), k and v (n, Ckv), each NULL
 * to skip, for n rows at positions pos in an attention over [lo, hi]. */
pe_status pe__attention_apply(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                              int64_t hi, float *x, float *q, float *k, float *v, pe_err *err);
/* The method's output stage (output_forward) on o (n, C) of n queries at positions pos, where
 * the config asks for one; else nothing. */
pe_status pe__attention_output(pe_attention *a, const pe_weights *w, int64_t n, const int64_t *pos, int64_t lo,
                               int64_t hi, float *o, pe_err *err);
const pe__method *pe__attention_method(const pe_attention *a);
const pe_run_options *pe__attention_run(const pe_attention *a);

/* hf_config as a front-end (rotary/hf_config.c): pe_config_set of hf_config or hf_layer reads
 * layer cfg->hf_layer of the config.json cfg->hf_config into the keys not given (undoing what
 * an earlier reading filled); pe__config_resolve then checks what the file said against the
 * layer (its kind, head_dim) without reading it again. */
pe_status pe__hf_config_read(pe_config *cfg, pe_err *err);
pe_status pe__hf_config_check(pe_config *cfg, int64_t D, pe_err *err); /* D < 0: the reading and kind alone */
/* Key k's field of src into dst (config.c) */
void pe__config_key_copy(pe_config *dst, const pe_config *src, int k);

/* Validation shared by rope and its relatives (rope_scaling.c), and by t5 and tupe (t5.c). */
pe_status pe__rope_check(const pe_config *cfg, int64_t D, pe_err *err);
pe_status pe__t5_check(const pe_config *cfg, int bidirectional, pe_err *err);

/* T5's bucket of a relative position (j - i), as HF _relative_position_bucket computes it
 * (float32 log, truncation toward zero). Shared with TUPE. */
int64_t pe__t5_bucket(int64_t rel, int bidirectional, int64_t num_buckets, int64_t max_distance);

/* DeBERTa's log bucket of a relative position (i - j), as HF make_log_bucket_position computes
 * it in float32 (no clamp; a non-finite value gives INT64_MIN, as PyTorch's cast on x86). */
int64_t pe__deberta_bucket(int64_t rel, int64_t bucket_size, int64_t max_position);

/* FLOATER's grid (absolute/floater.c): the grid index n and remainder r of t = p dt on the
 * grid k step (n = round(t/step) within 8 ulps, else floor), and the number of RK4 steps
 * taken so far by every floater layer of the process (for tests of the cache). */
void pe__floater_grid(int64_t p, double dt, double step, int64_t *n, double *r);
int64_t pe__floater_steps(void);

#endif
