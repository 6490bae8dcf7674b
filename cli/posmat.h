/* Position-position matrices of a method, for `posenc plot` and `posenc analyze`: the
 * absolute encoding P (pe_encode), the layer's scores with position-free content, and the
 * relative index of bucketed methods. Method tensors are random (seeded) unless read from a
 * file; optional tensors stay absent so methods keep their defaults. */
#ifndef PE_POSMAT_H
#define PE_POSMAT_H

#include "posenc.h"

typedef struct pm_opts {
    int n_keys;                 /* settings, `method` among them; heads and causal=false by default */
    const char *const *keys, *const *vals;
    int64_t N, C, heads;        /* positions 0..N-1, width, heads */
    uint64_t seed;
    const char *from, *tensor;  /* learned: pos_table from this safetensors file (tensor name) */
} pm_opts;

/* The method named by the settings, or -1 with a message. */
int pm_method(const pm_opts *o, pe_err *err);

/* An absolute method's encoding through pe_encode: tensors as pe_encode returns them. */
pe_status pm_encoding(const pm_opts *o, pe_tensor **outs, int *n_outs, pe_err *err);

/* Scores [H, N, N] of one sequence whose tokens all equal e_0, with every head's query and key
 * the all-ones vector (zero_qk: all zeros, so that the scores are the pure position bias).
 * Non-absolute methods only. *S is malloc'ed. */
pe_status pm_scores(const pm_opts *o, int zero_qk, double **S, int64_t *H, pe_err *err);

/* The relative index [N, N] of shaw (clipped j - i), t5 and tupe (buckets of j - i) and deberta
 * (buckets of i - j, clipped as the layer does); PE_EINVAL for other methods. */
pe_status pm_index(const pm_opts *o, double **S, pe_err *err);

#endif
