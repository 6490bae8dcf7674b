/* The conformance contract by tensor name (doc/spec/conformance.md): a layer or an encoding
 * from named tensors and text settings, as `posenc attend` and `posenc encode` run them. */
#ifndef POSENC_CONTRACT_H
#define POSENC_CONTRACT_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the conformance contract by name ------------------------------------------------- */
/* The safetensors dtypes: name and bytes per element. posenc computes in F32 and reads
 * positions and ids as I32 or I64; the others are recognised so errors can name them. */
#define PE_DTYPE_MAP(XX)                                                                    \
    XX(F32, 4) XX(I32, 4) XX(I64, 8) XX(F64, 8) XX(F16, 2) XX(BF16, 2) XX(I8, 1) XX(U8, 1)  \
    XX(I16, 2) XX(U16, 2) XX(U32, 4) XX(U64, 8) XX(BOOL, 1) XX(F8_E4M3, 1) XX(F8_E5M2, 1)

typedef enum {
#define XX(name, size) PE_##name,
    PE_DTYPE_MAP(XX)
#undef XX
    PE_DTYPE_COUNT
} pe_dtype;

const char *pe_dtype_name(pe_dtype t);
size_t pe_dtype_size(pe_dtype t);

typedef struct pe_tensor {
    char name[64];
    pe_dtype dtype;
    int ndim;
    int64_t shape[PE_MAX_DIMS];
    void *data;
} pe_tensor;

/* One layer as `posenc attend` runs it: settings as key/value text, tensors by the
 * contract's names (x, wq.., positions, mems, dy, the method's tensors). Validates every
 * name, shape and dtype; runs forward, and backward when dy is given. On success *outs is
 * an array of *n_outs tensors (y, scores, probs, dx, d<name>...) that the caller releases
 * with pe_tensors_free. On failure nothing is allocated. */
pe_status pe_attend(int n_keys, const char *const *keys, const char *const *values, int n_in,
                    const pe_tensor *in, pe_tensor **outs, int *n_outs, pe_err *err);
/* Complex-valued layers (method complex) in pe_attend: `ids` [T] or [B, T] (I32/I64) replaces
 * x (x is refused); `dy_imag` (like y, optional) joins dy; the outputs are y, y_imag,
 * scores, probs and, when dy or dy_imag is given (the other then counts as zero), d<name>
 * of every F32 input but no dx. */
void pe_tensors_free(pe_tensor *t, int n);

/* The absolute encoding of an absolute method, for inspection and plots (`posenc encode`).
 * Settings as pe_attend (`heads` defaults to 1 here); tensors by the contract's names:
 * `positions` [T] (I32/I64; required except for complex, whose default is 0..T-1), the
 * method's own tensors (pos_table, floater_*, amp freq phase), `ids` [T] for complex; the
 * layer's other tensors (x, wq.., dy..) are ignored. C: the width, or 0 to take it from the
 * tensors. On success *outs holds, each F32 [T, C] (release with pe_tensors_free):
 *   none, sinusoidal, learned  "P"                  x' = x + P[t]
 *   floater                    "P_q" "P_k" "P_v"    the biases B(p dt) added to q, k and v
 *   complex                    "P_re" "P_im"        the embedding of ids[t] at positions[t]
 * Other methods are not absolute: an error. */
pe_status pe_encode(int n_keys, const char *const *keys, const char *const *values, int64_t C,
                    int n_in, const pe_tensor *in, pe_tensor **outs, int *n_outs, pe_err *err);

#ifdef __cplusplus
}
#endif
#endif /* POSENC_CONTRACT_H */
