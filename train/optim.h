/* AdamW over the model's flat block, the learning-rate schedule and gradient clipping. */
#ifndef TR_OPTIM_H
#define TR_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct tr_adamw {
    double beta1, beta2, eps, weight_decay;
    float *m, *v; /* first and second moments, one float per parameter */
    size_t n;
} tr_adamw;

/* Allocates zero moments for n parameters; returns 0, or -1 when out of memory. */
int tr_adamw_init(tr_adamw *o, size_t n, double beta1, double beta2, double eps, double weight_decay);
void tr_adamw_free(tr_adamw *o);

/* One update of step t (1-based, for the bias corrections) at learning rate lr. Weight decay
 * (decoupled, Loshchilov & Hutter) applies to the tensors with decay set. */
void tr_adamw_update(tr_adamw *o, float *params, const float *grads, const tr_tensor *t, int nt,
                     double lr, int64_t step);

/* Linear warm-up over `warmup` steps to lr, then cosine decay to lr * min_frac at `total`. */
double tr_lr_at(int64_t step, int64_t total, int64_t warmup, double lr, double min_frac);

/* Scales grads so that their global L2 norm is at most max_norm (<= 0: no clipping);
 * returns the norm before clipping. */
double tr_clip_grads(float *grads, size_t n, double max_norm);

#endif
