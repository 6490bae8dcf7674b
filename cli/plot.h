/* posenc plot: its settings, shared by the kinds (plot.c) and the curves of a comparison
 * (plot_curves.c). */
#ifndef PE_CLI_PLOT_H
#define PE_CLI_PLOT_H

#include <stdint.h>

typedef struct opts {
    const char *kind, *in, *out, *from, *tensor, *part, *show, *metric, *checkpoint, *input;
    int W, H, cosine, batch, checkpoint_from, layer_set;
    int64_t grid_h, grid_w, patch_r, patch_c; /* plot grid: the grid and the patch (-1: the centre) */
    int64_t layer;
    int64_t N, C, heads;
    uint64_t seed;
    int n_keys;
    const char **keys, **vals;
} opts;

/* plot extrapolation: the metric of a `posenc compare` CSV against evaluation length */
int plot_extrapolation(const opts *o);

#endif
