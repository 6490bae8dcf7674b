/* A line plot as PNG (cairo): one line per series with error bars, a legend, tick labels, at
 * any size, in one panel or in several sharing the axes' ranges. For `posenc compare`'s metric-versus-length figure and `posenc plot`'s curves.
 * Also the few cairo helpers the heatmaps of `posenc plot` (cli/draw.c) share with it. */
#ifndef TR_PLOT_H
#define TR_PLOT_H

#include "posenc.h"
#include "../tools/output.h"

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
    int W, H;                  /* image size in pixels, 160..8000 x 120..8000; 0: 1100 x 680 */
    /* small multiples: series i in panel panel_of[i] (0..n_panels-1, each with its own legend
     * and colours, one y range for all; a size too small for them: one panel); n_panels 0:
     * every series in one panel */
    int n_panels;
    const char *const *panel_titles;
    const int *panel_of;
} tr_plot;

/* Writes the figure; returns PE_EINVAL for a size out of range, PE_EIO with a message when the
 * file cannot be written, or when posenc was built without cairo. */
pe_status tr_plot_png(const char *path, const tr_plot *p, int n_series, const tr_series *s, pe_err *err);
/* The same into o, opened here on path and written but not committed: one of a group of files
 * that appear together (pe_out_commit_all). On an error o is closed and nothing stays. */
pe_status tr_plot_png_out(pe_out *o, const char *path, const tr_plot *p, int n_series, const tr_series *s, pe_err *err);

/* A y range that fits the bulk of the series' values, for a metric where one run that blows
 * up would flatten the rest: from the lowest value to the 90th percentile plus the spread
 * between the two (never past the highest), rounded to the ticks. Sets p->ymin (not below 0) and p->ymax; returns
 * the number of values above p->ymax (drawn as triangles on the top edge), -1 out of memory. */
int tr_plot_fit_y(tr_plot *p, int n_series, const tr_series *s);

/* A "nice" step (1, 2 or 5 times a power of ten) for about n ticks over range; 1 when the
 * range is empty. */
double tr_nice_step(double range, int n);

#ifdef PE_CAIRO
#include <cairo.h>
/* Text with its ink box aligned at (x, y): align/valign 0 left/top, 0.5 centre, 1 right/bottom. */
void tr_text_at(cairo_t *cr, double x, double y, const char *s, double align, double valign);
/* A title centred at x, in a figure W pixels wide: moved, then shrunk from `size` until it fits. */
void tr_text_fit(cairo_t *cr, double x, double y, double size, double W, const char *s, double valign);
/* Writes surf into o (opened here on path, not committed) and destroys it, then frees cairo's
 * and fontconfig's caches (they live until exit otherwise, which LeakSanitizer reports as
 * leaks of the tool). */
pe_status tr_png_write(cairo_surface_t *surf, pe_out *o, const char *path, pe_err *err);
#endif

#endif
