/* posenc's KV cache: keys and values of past tokens at their positions, for decoding. */
#ifndef POSENC_CACHE_H
#define POSENC_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a KV cache ----------------------------------------------------------------------- */
/* Keys and values of past tokens at their positions, for decoding: append the new tokens' k
 * and v, then attend their queries to everything cached. Rotary methods (rope with every
 * scaling, xpos) and floater transform keys once, on append; a change of the attention's range
 * that changes the rotation (dynamic NTK as the length grows, LongRoPE's switch past
 * original_max_position_embeddings, xPos's centre) re-rotates the cached keys exactly (by the
 * angle difference in double), so decoding equals the layer over the whole prefix to float32
 * rounding. Every method with a projected form works; sinusoidal and learned through
 * pe_kv_cache_layer_forward (their encoding is added to x); complex has no cache.
 * Cost per attend is linear in the cache: few queries (decode) read K and V once, in place.
 * One cache serves one layer and one thread at a time. */
typedef struct pe_kv_cache pe_kv_cache;

/* A cache of B rows of up to max_tokens tokens each for layer att (which must outlive it);
 * storage grows by doubling. */
pe_status pe_kv_cache_init(pe_kv_cache **out, pe_attention *att, int64_t B, int64_t max_tokens, pe_err *err);
void pe_kv_cache_free(pe_kv_cache *c);
/* Forgets every token (keeps the storage). */
void pe_kv_cache_clear(pe_kv_cache *c);
/* Tokens cached in row b (-1 for a row that does not exist). */
int64_t pe_kv_cache_length(const pe_kv_cache *c, int64_t b);
/* Position axes per token the cache holds: rope with rope_sections' count (M-RoPE), else 1. */
int64_t pe_kv_cache_axes(const pe_kv_cache *c);
/* Row b's storage: k, v (n, Hkv*D) as cached (rotated), positions (n, A); any pointer may be NULL. */
pe_status pe_kv_cache_view(const pe_kv_cache *c, int64_t b, const float **k, const float **v, const int64_t **pos,
                           int64_t *n, pe_err *err);

/* Appends n tokens to every row: k, v (B, n, Hkv*D) as projected (not rotated); pos (B, n, A) when
 * pos_batched, else (n, A) (A = pe_kv_cache_axes), or NULL: each row continues from its last
 * position + 1 (0 when empty; with A axes from its largest position + 1, on every axis: M-RoPE's
 * text after an image);
 * lens (B) or NULL: row b takes its first lens[b] tokens (0 .. n). A row that would pass
 * max_tokens is an error and nothing is appended. w: the method's tensors (NULL: none). */
pe_status pe_kv_cache_append(pe_kv_cache *c, const pe_weights *w, const float *k, const float *v, int64_t n,
                             const int64_t *pos, int pos_batched, const int64_t *lens, pe_err *err);
/* Attends T queries per row to the row's cached tokens: q (B, T, H*D) as projected; at: query
 * positions (default: those of the row's last T tokens, i.e. the tokens just appended), q_lens,
 * and an attn_mask (B, T, Tk) over the cached keys (Tk: the longest row); key_pos and k_lens
 * must be NULL. causal masks a key after the query's own token (the queries are the row's last
 * tokens); at->axes must match the cache's. o (B, T, H*D). */
pe_status pe_kv_cache_attend(pe_kv_cache *c, const pe_weights *w, const float *q, int64_t T, const pe_positions *at,
                             float *o, pe_err *err);
/* The whole layer for T new tokens: x (B, T, C) -> y (B, T, C), as pe_attention_layer_forward
 * over the cached prefix and these tokens (absolute encodings added to x, projections, append,
 * attend, wo); pos and lens as pe_kv_cache_append. */
pe_status pe_kv_cache_layer_forward(pe_kv_cache *c, const pe_weights *w, const float *x, int64_t T, const int64_t *pos,
                                    int pos_batched, const int64_t *lens, float *y, pe_err *err);
/* Context shift (llama.cpp's): in every row, drops tokens keep .. keep + n_drop - 1 and moves the
 * tokens after them to positions p - delta (usually delta = n_drop), re-rotating their keys
 * exactly; the first `keep` stay. Rotary methods and methods that read positions at attention
 * time (bias, relative, none) shift; floater (position terms added to k and v) refuses delta != 0. */
pe_status pe_kv_cache_shift(pe_kv_cache *c, const pe_weights *w, int64_t keep, int64_t n_drop, int64_t delta,
                            pe_err *err);
/* The same with a delta per position axis (A of them): M-RoPE's keys moved on their time axis
 * alone (delta 0 on the others), or on every axis; pe_kv_cache_shift moves every axis by delta.
 * The keys are re-rotated exactly, each pair on its own axis. */
pe_status pe_kv_cache_shift_axes(pe_kv_cache *c, const pe_weights *w, int64_t keep, int64_t n_drop, const int64_t *delta,
                                 pe_err *err);

#ifdef __cplusplus
}
#endif
#endif /* POSENC_CACHE_H */
