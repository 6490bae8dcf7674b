/* A line plot as PNG (cairo): one line per series with error bars, a legend, tick labels.
 * For `posenc compare`'s metric-versus-length figure. */
#ifndef TR_PLOT_H
#define TR_PLOT_H

#include "posenc.h"

typedef struct tr_series {
    const char *label;
    int n;
    const double *x, *y, *err; /* err: half-height of the error bar, or NULL */
} tr_series;

typedef struct tr_plot {
    const char *title, *xlabel, *ylabel;
    int n_ticks;
    const double *ticks;       /* x positions of the tick labels */
    const char *const *tick_labels;
    double ymin, ymax;         /* ymax <= ymin: from the data; points above ymax are drawn at the edge */
} tr_plot;

/* Writes the figure; returns PE_EIO with a message when the file cannot be written, or when
 * posenc was built without cairo. */
pe_status tr_plot_png(const char *path, const tr_plot *p, int n_series, const tr_series *s, pe_err *err);

#endif
