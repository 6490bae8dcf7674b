/* The trainer's dense kernels: linear layers through BLAS, LayerNorm, GELU, softmax.
 * Forward next to backward; backward accumulates (+=) into parameter gradients and into
 * the input gradient where it says so.
 *
 * Legend: N rows (tokens), In inputs, Out outputs, C features. */
#ifndef TR_KERNELS_H
#define TR_KERNELS_H

#include <stdint.h>

/* c (m, n) = alpha op(a) op(b) + beta c, row-major (cblas semantics). */
void tr_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
             int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* y (N, Out) = x (N, In) w^T + b;  w (Out, In) PyTorch layout, b (Out) or NULL. */
void tr_linear_forward(float *y, const float *x, const float *w, const float *b, int64_t N,
                       int64_t In, int64_t Out);
/* forward was y = x w^T + b, so now: dx = dy w (accumulate: dx += dy w), dw += dy^T x,
 * db += sum_rows dy. Any of dx, dw, db may be NULL. */
void tr_linear_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int64_t N, int64_t In, int64_t Out);
/* The GEMMs of one training step alone (posenc train --profile's bound): per layer the four
 * attention projections (C to C) and the MLP (C to F, F to C), and the tied output (C to V),
 * forward (y = x W^T) and backward (dx = dy W, dW = dy^T x), over N rows, the step's shapes on
 * buffers of their own; the least seconds of reps rounds. */
double tr_step_gemm_seconds(int64_t N, int64_t layers, int64_t C, int64_t F, int64_t V, int reps);
/* The attention's own products as an eager implementation runs them (PyTorch's bmm): per layer
 * and (row, head) the T x T scores q k^T and p v forward, dv = p^T do, dp = do v^T, dq = ds k,
 * dk = ds^T q backward, every key (no causal skip); the least seconds of reps rounds. */
double tr_step_attention_gemm_seconds(int64_t B, int64_t T, int64_t H, int64_t D, int64_t layers, int reps);

/* y (N, C) = (x - mean) * rstd * w + b over each row, eps 1e-5; mean, rstd (N) saved. */
void tr_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int64_t N, int64_t C);
/* dx += ..., dw += ..., db += ... from dy (N, C). */
void tr_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *mean, const float *rstd, const float *w, int64_t N, int64_t C);

/* y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) over n values (GPT-2's GELU); the tanh
 * into t (n) for the backward, unless t is NULL. */
void tr_gelu_forward(float *y, float *t, const float *x, int64_t n);
/* d (the gradient of y on entry) becomes the gradient of x; t: the forward's tanh. */
void tr_gelu_backward(float *d, const float *x, const float *t, int64_t n);

/* Dropout (Srivastava et al. 2014) of n rows of C: y = x / (1 - p) where the element is kept,
 * 0 where it is dropped, with probability p. Whether element (t0 + row, c) of `site` is kept is
 * a hash of (key, site, t0 + row, c), so the backward recomputes the forward's mask instead of
 * storing it, and a share of a batch that starts at token t0 draws what the whole batch does
 * there. y may be x. */
void tr_dropout(float *y, const float *x, int64_t n, int64_t C, float p, uint64_t key, int64_t site, int64_t t0);

/* In-place softmax of one row of n logits. */
void tr_softmax_row(float *z, int64_t n);

#endif
