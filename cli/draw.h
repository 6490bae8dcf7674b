/* Figures for `posenc plot` (cairo): heatmaps with title, axes, tick labels and a colour bar,
 * one panel per head. Curves are the trainer's line plot (train/plot.h, tr_plot_png). */
#ifndef PE_DRAW_H
#define PE_DRAW_H

#include "posenc.h"
#include "../train/plot.h"

typedef struct dr_heat {
    const char *title, *xlabel, *ylabel, *cblabel;
    int W, H;                         /* image size in pixels */
    int n_panels;                     /* panels share one colour scale unless per_panel */
    const char *const *panel_titles;  /* n_panels, or NULL */
    int64_t rows, cols;
    const double *data;               /* [n_panels, rows, cols]; row 0 drawn at the top */
    double x0, y0;                    /* axis value of column 0 / row 0 (one unit per cell) */
    int per_panel;                    /* each panel its own colour scale and bar (heads whose
                                         ranges differ by orders of magnitude, as ALiBi's) */
    const char *xchars, *ychars;      /* cols / rows bytes: the tick labels are these characters
                                         (the text an attention plot ran on), or NULL: numbers */
} dr_heat;

pe_status dr_heatmap_png(const char *path, const dr_heat *h, pe_err *err);

#endif
