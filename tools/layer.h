/* A layer with random weights for a configuration: used by the demo, the tests and the
 * benchmarks. Not part of libposenc. */
#ifndef PE_LAYER_H
#define PE_LAYER_H

#include "posenc.h"

typedef struct pe_rng {
    uint64_t s;
} pe_rng;
uint64_t pe_rng_next(pe_rng *r);
float pe_rng_uniform(pe_rng *r); /* [0, 1) */
float pe_rng_normal(pe_rng *r);

typedef struct pe_layer {
    pe_weights w;
    pe_grads g;                          /* same shapes, zeroed by pe_layer_zero_grad */
    pe_param_spec specs[PE_MAX_PARAMS];  /* the method's tensors, free rows resolved */
    int np;
    int64_t C, Ckv;
    float *block; /* every weight and gradient, one allocation */
    size_t n;     /* floats in block / 2 */
} pe_layer;

/* Allocates weights for att with values from seed: projections uniform(+-1/sqrt(C)), biases
 * and method tensors uniform(+-0.5) (positive where the method needs it); tensors with free
 * rows get `rows` rows. */
pe_status pe_layer_init(pe_layer *L, const pe_attention *att, int64_t rows, uint64_t seed, pe_err *err);
void pe_layer_zero_grad(pe_layer *L);
/* Draws n values of a method tensor (cols a row) from its reference initialisation
 * (pe_param_spec.init), as posenc train and posenc.torch do; C: the layer's width. */
void pe_init_draw(const pe_init *in, int64_t n, int64_t cols, int64_t C, float *p, pe_rng *rng);
void pe_layer_free(pe_layer *L);

/* Every float tensor of the layer: name, data, gradient, element count. Returns the count. */
int pe_layer_tensors(pe_layer *L, const char **names, float **data, float **grads, int64_t *sizes);

#endif
