/* Monotonicity, translation invariance and symmetry of a position-position matrix (props.h). */
#include "props.h"

#include <math.h>
#include <stdlib.h>

/* ranks of v[0..n) into r, ties sharing their mean rank (O(n^2): rows are short) */
static void ranks(const double *v, int64_t n, double *r) {
    for (int64_t a = 0; a < n; a++) {
        int64_t below = 0, same = 0;
        for (int64_t b = 0; b < n; b++) below += v[b] < v[a], same += v[b] == v[a];
        r[a] = below + (same - 1) / 2.0;
    }
}

double pr_spearman(const double *x, const double *y, int64_t n) {
    if (n < 2) return NAN;
    double *rx = malloc(sizeof(double) * 2 * (size_t)n);
    if (!rx) return NAN;
    double *ry = rx + n, mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    ranks(x, n, rx), ranks(y, n, ry);
    for (int64_t k = 0; k < n; k++) mx += rx[k], my += ry[k];
    mx /= n, my /= n; /* ranks are halves: exact, so a constant side gives exactly 0 below */
    for (int64_t k = 0; k < n; k++)
        sxy += (rx[k] - mx) * (ry[k] - my), sxx += (rx[k] - mx) * (rx[k] - mx), syy += (ry[k] - my) * (ry[k] - my);
    free(rx);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* Mean over rows i of -Spearman(|j - i|, S[i][j]) for the keys on one side of i (the query
 * itself included, so a row needs 2 keys); rows where it is undefined are skipped. */
static double mono_side(const double *S, int64_t N, int forward) {
    double *off = malloc(sizeof(double) * 2 * (size_t)N), sum = 0;
    if (!off) return NAN;
    double *val = off + N;
    int64_t rows = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t n = 0;
        for (int64_t j = forward ? i : 0; forward ? j < N : j <= i; j++) off[n] = fabs((double)(j - i)), val[n++] = S[i * N + j];
        double rho = pr_spearman(off, val, n);
        if (!isnan(rho)) sum -= rho, rows++;
    }
    free(off);
    return rows ? sum / rows : NAN;
}

void pr_measure(const double *S, int64_t N, pr_props *o) {
    o->mono_fwd = mono_side(S, N, 1), o->mono_bwd = mono_side(S, N, 0);
    o->monotonicity = isnan(o->mono_fwd) ? o->mono_bwd : isnan(o->mono_bwd) ? o->mono_fwd : (o->mono_fwd + o->mono_bwd) / 2;
    double mean = 0, total = 0, within = 0, anti = 0;
    for (int64_t k = 0; k < N * N; k++) mean += S[k] / ((double)N * N);
    for (int64_t k = 0; k < N * N; k++) total += (S[k] - mean) * (S[k] - mean);
    /* within-diagonal sum of squares: each offset d = j - i is one group */
    for (int64_t d = -(N - 1); d <= N - 1; d++) {
        int64_t i0 = d < 0 ? -d : 0, n = N - (d < 0 ? -d : d);
        double m = 0;
        for (int64_t i = i0; i < i0 + n; i++) m += S[i * N + i + d] / n;
        for (int64_t i = i0; i < i0 + n; i++) within += (S[i * N + i + d] - m) * (S[i * N + i + d] - m);
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) {
            double a = (S[i * N + j] - S[j * N + i]) / 2;
            anti += a * a;
        }
    /* relative to the spread of S: a constant matrix has no property to speak of */
    int flat = !(total > 1e-12 * (1 + mean * mean) * N * N);
    o->translation = flat ? NAN : fmax(0, 1 - within / total);
    o->symmetry = flat ? NAN : fmax(0, 1 - anti / total);
}

void pr_gram(const float *A, const float *B, int64_t N, int64_t C, int cosine, double *S) {
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) {
            double dot = 0, na = 0, nb = 0;
            for (int64_t c = 0; c < C; c++) {
                double a = A[i * C + c], b = B[j * C + c];
                dot += a * b, na += a * a, nb += b * b;
            }
            S[i * N + j] = !cosine ? dot : na > 0 && nb > 0 ? dot / sqrt(na * nb) : 0;
        }
}
