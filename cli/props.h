/* The three properties of "On Position Embeddings in BERT" (Wang et al., ICLR 2021) measured on
 * a position-position matrix S [N, N] (S[i][j]: similarity or score of position i to position j).
 * Pure arithmetic, no I/O; doc/plots.md states each definition. Every score lies in [-1, 1]
 * (monotonicity) or [0, 1] (the others), 1 meaning the property holds exactly; NAN when S is
 * constant or too small for the property to mean anything. */
#ifndef PE_PROPS_H
#define PE_PROPS_H

#include <stdint.h>

typedef struct pr_props {
    double mono_fwd, mono_bwd, monotonicity; /* -Spearman(offset, S) per row side; their mean */
    double translation;                       /* R^2 of S explained by the offset j - i */
    double symmetry;                          /* 1 - |antisymmetric part|^2 / |S - mean|^2 */
} pr_props;

/* Spearman's rank correlation of (x[k], y[k]), ties at their mean rank; NAN when either side
 * is constant or n < 2. */
double pr_spearman(const double *x, const double *y, int64_t n);

void pr_measure(const double *S, int64_t N, pr_props *out);

/* S = A B^T of two [N, C] matrices (B = A for a Gram matrix); cosine: rows normalised first
 * (a zero row gives zeros). */
void pr_gram(const float *A, const float *B, int64_t N, int64_t C, int cosine, double *S);

#endif
