/* Position-position matrices of a method, for `posenc plot` and `posenc analyze`: the
 * absolute encoding P (pe_encode), the layer's scores with position-free content, and the
 * relative index of bucketed methods. Method tensors are random (seeded) unless read from a
 * file (a plain one with a pos_table, or a `posenc train --save` checkpoint); optional tensors
 * stay absent so methods keep their defaults. */
#ifndef PE_POSMAT_H
#define PE_POSMAT_H

#include "posenc.h"

typedef struct pm_opts {
    int n_keys;                 /* settings, `method` among them; heads and causal=false by default */
    const char *const *keys, *const *vals;
    int64_t N, C, heads;        /* positions 0..N-1, width, heads */
    uint64_t seed;
    const char *from, *tensor;  /* learned: pos_table from this safetensors file (tensor name) */
    int checkpoint;             /* from is a trainer checkpoint (pm_checkpoint): the method's */
    int64_t layer;              /* tensors of block `layer` (h.<layer>.attn.*, else pe.*) */
} pm_opts;

/* A trainer checkpoint's settings, merged into a pm_opts by pm_checkpoint. */
typedef struct pm_ckpt {
    int is;                     /* 1: from is a trainer checkpoint; 0: another file */
    char method[32];
    int64_t layers;
    const char **keys, **vals;  /* the merged settings (o->keys points here) */
    char key[20][40], val[20][64];
} pm_ckpt;

/* When o->from is a trainer checkpoint: its method (settings naming another method: an
 * error), width, heads and layer keys (those of the settings win) replace o's, o->checkpoint
 * is set and o->layer is checked against the checkpoint's blocks. A plain file leaves o as it
 * is (ck->is = 0). Release with pm_checkpoint_free. */
pe_status pm_checkpoint(pm_opts *o, pm_ckpt *ck, pe_err *err);
void pm_checkpoint_free(pm_ckpt *ck);

/* The method named by the settings, or -1 with a message. */
int pm_method(const pm_opts *o, pe_err *err);

/* An absolute method's encoding through pe_encode: tensors as pe_encode returns them. */
pe_status pm_encoding(const pm_opts *o, pe_tensor **outs, int *n_outs, pe_err *err);

/* Scores [H, N, N] of one sequence whose tokens all equal e_0, with every head's query and key
 * the all-ones vector (zero_qk: all zeros, so that the scores are the pure position bias).
 * Non-absolute methods only, and not from a file. *S is malloc'ed. */
pe_status pm_scores(const pm_opts *o, int zero_qk, double **S, int64_t *H, pe_err *err);

/* The relative index [N, N] of shaw (clipped j - i), t5 and tupe (buckets of j - i) and deberta
 * (buckets of i - j, clipped as the layer does); PE_EINVAL for other methods. */
pe_status pm_index(const pm_opts *o, double **S, pe_err *err);

#endif
