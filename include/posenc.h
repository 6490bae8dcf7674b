/* posenc: positional encodings of Transformers, forward and backward, exact.
 *
 * One attention operator, one positional encoding per layer. The encoding acts through
 * hooks at the places encodings act (see src/internal.h); this header is all a user needs.
 *
 * Shapes use this legend throughout:
 *   B batch, T queries (tokens of the segment), M memory tokens (Transformer-XL),
 *   Tk keys (M + T in the layer; any number >= 1 in the projected form), H heads,
 *   Hkv key/value heads (grouped-query attention), D head_dim, C = H*D model width,
 *   Ckv = Hkv*D.
 * All float tensors are float32, row-major; weights use PyTorch's Linear layout
 * (weight [out, in], y = x W^T + b).
 *
 * The layer (doc/spec/conformance.md is the contract this implements):
 *   x'  = x + P[pos]                       absolute methods (embed hook)
 *   q   = x' wq^T + bq,  k = [mems; x'] wk^T + bk,  v = [mems; x'] wv^T + bv
 *   q,k = R(pos) q, R(pos) k               rotary methods (rotate hook)
 *   s   = scale * q.k                      or the method's content-position terms (score hook)
 *   s  += b[h, i, j]                       bias methods (score_mod)
 *   s   = -inf where masked;  p = softmax_j(s)
 *   o_i = sum_j p_ij (v_j + a_ij)          a: the method's value term (value hook)
 *   y   = o wo^T + bo
 * Everything after the projections is the projected form (pe_attention_forward_qkv): the
 * same core over the caller's q, k, v, with queries at positions i and keys at their own
 * positions j (a KV cache, packed documents, cross-attention).
 *
 * Errors: every fallible function returns a pe_status (0 or negative) and writes a one-line
 * message naming the key or tensor into a caller-provided pe_err. The library never exits.
 */
#ifndef POSENC_H
#define POSENC_H

#include "posenc/core.h"     /* status, methods, settings, tensors, the operator, rotations */
#include "posenc/cache.h"    /* the KV cache */
#include "posenc/models.h"   /* HuggingFace config.json, M-RoPE positions, RoPE layouts */
#include "posenc/contract.h" /* the conformance contract by tensor name */

#endif /* POSENC_H */
