/* Line plots as PNG through cairo, and the helpers cli/draw.c shares (plot.h). */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/output.h"

double tr_nice_step(double range, int n) {
    if (!(range > 0) || n < 1) return 1;
    double raw = range / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int tr_plot_fit_y(tr_plot *p, int n_series, const tr_series *s) {
    size_t n = 0, m = 0;
    for (int i = 0; i < n_series; i++) n += (size_t)s[i].n;
    double *v = malloc(sizeof(double) * (n ? n : 1));
    if (!v) return -1;
    for (int i = 0; i < n_series; i++)
        for (int k = 0; k < s[i].n; k++)
            if (isfinite(s[i].y[k])) v[m++] = s[i].y[k];
    int above = 0;
    if (m) {
        qsort(v, m, sizeof(double), cmp_double);
        const double lo = v[0], hi = v[m - 1], p90 = v[(size_t)(0.9 * (double)(m - 1))];
        const double pad = 0.03 * (hi - lo) + 1e-9;
        p->ymin = fmax(0, lo - pad), p->ymax = fmin(hi + pad, p90 + (p90 - lo) + pad);
        /* the top as tr_plot_png rounds it (to its step for 6 ticks), so that the values
         * counted above it are the ones drawn as triangles */
        for (int it = 0; it < 8; it++) { /* until the rounded range rounds to itself */
            const double step = tr_nice_step(p->ymax - p->ymin, 6), a = floor(p->ymin / step) * step,
                         b = ceil(p->ymax / step) * step;
            if (a == p->ymin && b == p->ymax) break;
            p->ymin = a, p->ymax = b;
        }
        for (size_t k = 0; k < m; k++) above += v[k] > p->ymax;
    }
    free(v);
    return above;
}

pe_status tr_plot_png(const char *path, const tr_plot *p, int n_series, const tr_series *s, pe_err *err) {
    pe_out o;
    pe_status st = tr_plot_png_out(&o, path, p, n_series, s, err);
    return st ? st : pe_out_commit(&o, err);
}

#ifndef PE_CAIRO
pe_status tr_plot_png_out(pe_out *o, const char *path, const tr_plot *p, int n_series, const tr_series *s, pe_err *err) {
    (void)o, (void)p, (void)n_series, (void)s;
    return pe_error(err, PE_EIO, "%s: posenc was built without cairo (Debian: libcairo2-dev), no plot", path);
}
#else
#include <fontconfig/fontconfig.h>

#define PLOT_PI 3.14159265358979323846

void tr_text_at(cairo_t *cr, double x, double y, const char *s, double align, double valign) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - align * e.width - e.x_bearing, y - valign * e.height - e.y_bearing);
    cairo_show_text(cr, s);
}

void tr_text_fit(cairo_t *cr, double x, double y, double size, double W, const char *s, double valign) {
    cairo_text_extents_t e;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, s, &e);
    for (int k = 0; k < 4 && e.width > W - 16; k++) { /* hinted widths are not quite proportional */
        size *= 0.98 * (W - 16) / e.width;
        cairo_set_font_size(cr, size);
        cairo_text_extents(cr, s, &e);
    }
    x = fmin(fmax(x, 8 + e.width / 2), W - 8 - e.width / 2);
    tr_text_at(cr, x, y, s, 0.5, valign);
}

static cairo_status_t png_chunk(void *closure, const unsigned char *data, unsigned int n) {
    return fwrite(data, 1, n, closure) == n ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* The PNG through the one output writer: whole or not at all, never a 0-byte file. */
pe_status tr_png_write(cairo_surface_t *surf, pe_out *o, const char *path, pe_err *err) {
    pe_status st = pe_out_open(o, path, err);
    cairo_status_t cs = st ? CAIRO_STATUS_SUCCESS : cairo_surface_write_to_png_stream(surf, png_chunk, o->fp);
    cairo_surface_destroy(surf);
    cairo_debug_reset_static_data();
    FcFini();
    if (st) return st;
    if (cs != CAIRO_STATUS_SUCCESS) {
        const int e = errno;
        pe_out_abort(o);
        return pe_error(err, PE_EIO, "%s: cannot write the plot: %s", path,
                        cs == CAIRO_STATUS_WRITE_ERROR && e ? strerror(e) : cairo_status_to_string(cs));
    }
    return PE_OK;
}

/* 20 colours (Tableau 10, then its light variants, drawn dashed). */
static const double PALETTE[20][3] = {
    {0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74},
    {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13}, {0.09, 0.75, 0.81},
    {0.68, 0.78, 0.91}, {1.00, 0.73, 0.47}, {0.60, 0.87, 0.54}, {1.00, 0.60, 0.59}, {0.77, 0.69, 0.84},
    {0.77, 0.61, 0.58}, {0.97, 0.71, 0.82}, {0.20, 0.20, 0.20}, {0.86, 0.86, 0.55}, {0.62, 0.85, 0.90}};

/* One panel: grid, tick labels, frame, the series i with panel_of[i] == panel (colours by
 * their order in the panel), and its legend starting at x = lx. Ranges are the figure's. */
typedef struct frame {
    double left, top, pw, ph, xmin, xmax, ymin, ymax, ystep, u;
} frame;

static void draw_panel(cairo_t *cr, const frame *f, const tr_plot *p, int panel, int n_series, const tr_series *s,
                       double lx) {
    const double u = f->u, left = f->left, top = f->top, pw = f->pw, ph = f->ph, ymin = f->ymin, ymax = f->ymax;
#define PX(x) (left + ((x) - f->xmin) / (f->xmax - f->xmin) * pw)
#define PY(y) (top + (1 - ((y) - ymin) / (ymax - ymin)) * ph)
    /* grid, axes, ticks */
    cairo_set_line_width(cr, 1);
    char buf[64];
    cairo_set_font_size(cr, 13 * u);
    for (double y = ymin; y <= ymax + 1e-9 * f->ystep; y += f->ystep) {
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, left, PY(y)), cairo_line_to(cr, left + pw, PY(y)), cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        snprintf(buf, sizeof buf, "%g", fabs(y) < 1e-12 ? 0.0 : y);
        tr_text_at(cr, left - 8 * u, PY(y), buf, 1.0, 0.5);
    }
    for (int k = 0; k < p->n_ticks; k++) {
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, PX(p->ticks[k]), top), cairo_line_to(cr, PX(p->ticks[k]), top + ph), cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        tr_text_at(cr, PX(p->ticks[k]), top + ph + 8 * u, p->tick_labels[k], 0.5, 0.0);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, left, top, pw, ph);
    cairo_stroke(cr);

    /* series: error bars, lines, markers; values above the top sit on the edge as triangles */
    cairo_save(cr);
    cairo_rectangle(cr, left, top - 8 * u, pw, ph + 16 * u);
    cairo_clip(cr);
    double dash[2] = {6 * u, 4 * u};
    int n_in = 0;
    for (int i = 0; i < n_series; i++) {
        if (p->n_panels > 0 && p->panel_of[i] != panel) continue;
        const int ci = n_in++;
        const double *c = PALETTE[ci % 20];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_set_line_width(cr, 2 * u);
        if (ci % 20 >= 10) cairo_set_dash(cr, dash, 2, 0); /* the light half of the palette: dashed */
        int pen = 0;
        for (int k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k])) {
                pen = 0;
                continue;
            }
            double y = fmin(s[i].y[k], ymax);
            if (pen) cairo_line_to(cr, PX(s[i].x[k]), PY(y));
            else cairo_move_to(cr, PX(s[i].x[k]), PY(y));
            pen = 1;
        }
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        cairo_set_line_width(cr, 1.2 * u);
        for (int k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k])) continue;
            double x = PX(s[i].x[k]), y = s[i].y[k];
            if (s[i].err && isfinite(s[i].err[k]) && s[i].err[k] > 0 && y <= ymax) {
                double y0 = PY(fmax(y - s[i].err[k], ymin)), y1 = PY(fmin(y + s[i].err[k], ymax));
                cairo_move_to(cr, x, y0), cairo_line_to(cr, x, y1);
                cairo_move_to(cr, x - 4 * u, y0), cairo_line_to(cr, x + 4 * u, y0);
                cairo_move_to(cr, x - 4 * u, y1), cairo_line_to(cr, x + 4 * u, y1);
                cairo_stroke(cr);
            }
            if (y > ymax) {
                cairo_move_to(cr, x, PY(ymax) - 6 * u), cairo_line_to(cr, x - 5 * u, PY(ymax) + 3 * u);
                cairo_line_to(cr, x + 5 * u, PY(ymax) + 3 * u), cairo_close_path(cr), cairo_fill(cr);
            } else if (s[i].n <= 64) { /* markers where points are few enough to tell apart */
                cairo_arc(cr, x, PY(y), 3.5 * u, 0, 2 * PLOT_PI), cairo_fill(cr);
            }
        }
    }
    cairo_restore(cr);

    /* legend */
    cairo_set_font_size(cr, 13 * u);
    double ly = top + 6 * u, step = fmin(22 * u, (ph - 10 * u) / (n_in ? n_in : 1));
    for (int i = 0, ci = 0; i < n_series; i++) {
        if (p->n_panels > 0 && p->panel_of[i] != panel) continue;
        const double *c = PALETTE[ci % 20];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_set_line_width(cr, 2.5 * u);
        if (ci % 20 >= 10) cairo_set_dash(cr, dash, 2, 0);
        cairo_move_to(cr, lx, ly + step / 2), cairo_line_to(cr, lx + 28 * u, ly + step / 2), cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        tr_text_at(cr, lx + 36 * u, ly + step / 2, s[i].label, 0.0, 0.5);
        ly += step, ci++;
    }
#undef PX
#undef PY
}

pe_status tr_plot_png_out(pe_out *o, const char *path, const tr_plot *p, int n_series, const tr_series *s, pe_err *err) {
    const int W = p->W ? p->W : 1100, Hh = p->H ? p->H : 680;
    if (W < 160 || Hh < 120 || W > 8000 || Hh > 8000)
        return pe_error(err, PE_EINVAL, "size %dx%d: width 160..8000 and height 120..8000 pixels", W, Hh);
    const int np = p->n_panels > 0 ? p->n_panels : 1;
    if (p->n_panels > 64) return pe_error(err, PE_EINVAL, "%d panels: at most 64", p->n_panels);
    for (int i = 0; p->n_panels > 0 && i < n_series; i++)
        if (!p->panel_of || p->panel_of[i] < 0 || p->panel_of[i] >= np)
            return pe_error(err, PE_EINVAL, "series %d: no panel 0..%d", i, np - 1);
    /* every length is in units u of the 1100 x 680 layout (u = 1 there), fonts shrinking
     * more slowly than the picture so that small figures stay legible */
    double u = sqrt(fmin(W / 1100.0, Hh / 680.0));
    u = u < 0.62 ? 0.62 : u > 3 ? 3 : u;
    /* panels in a grid of pc columns, each with its legend to its right */
    const int pc = np <= 3 ? np : (int)ceil(sqrt((double)np)), pr = (np + pc - 1) / pc;
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, Hh);
    cairo_t *cr = cairo_create(surf);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    /* the legend's width: its longest label, at most 45% of a panel's share of the figure */
    cairo_set_font_size(cr, 13 * u);
    double label_w = 0;
    for (int i = 0; i < n_series; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, s[i].label, &e);
        label_w = fmax(label_w, e.x_advance);
    }
    const double left = 80 * u, top = 50 * u, bottom = 70 * u;
    const double legend = n_series ? fmin(0.45 * W / pc, label_w + 74 * u) : 20 * u;
    /* columns after the first need room for their y tick labels; rows above the last for
     * their x tick labels; titled panels for the title */
    const double ygap = 56 * u, xgap = 44 * u, ptitle = p->n_panels > 0 && p->panel_titles ? 26 * u : 0;
    const double cw = (W - left) / pc, ch = (Hh - top - bottom + (pr > 1 ? xgap : 0)) / pr;
    const double pw = cw - legend - (pc > 1 ? ygap * (pc - 1) / pc : 0), ph = ch - xgap * (pr > 1) - ptitle;
    if (pw < (np > 1 ? 160 * u : 20) || ph < (np > 1 ? 100 * u : 20)) {
        cairo_destroy(cr), cairo_surface_destroy(surf);
        if (p->n_panels > 0) { /* panels do not fit at this size: every series in one */
            tr_plot one = *p;
            one.n_panels = 0;
            return tr_plot_png_out(o, path, &one, n_series, s, err);
        }
        return pe_error(err, PE_EINVAL, "size %dx%d is too small for this plot", W, Hh);
    }
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < n_series; i++)
        for (int k = 0; k < s[i].n; k++) {
            xmin = fmin(xmin, s[i].x[k]), xmax = fmax(xmax, s[i].x[k]);
            if (!isfinite(s[i].y[k])) continue;
            double e = s[i].err && isfinite(s[i].err[k]) ? s[i].err[k] : 0;
            ymin = fmin(ymin, s[i].y[k] - e), ymax = fmax(ymax, s[i].y[k] + e);
        }
    if (p->ymax > p->ymin) ymin = p->ymin, ymax = p->ymax;
    if (!isfinite(xmin)) xmin = 0, xmax = 1;
    if (!isfinite(ymin)) ymin = 0, ymax = 1;
    if (xmax - xmin < 1e-9) xmin -= 0.5, xmax += 0.5;
    if (ymax - ymin < 1e-9) ymin -= 0.5, ymax += 0.5;
    double ystep = tr_nice_step(ymax - ymin, ph < 200 ? 3 : 6);
    ymin = floor(ymin / ystep) * ystep, ymax = ceil(ymax / ystep) * ystep;
    double xpad = 0.04 * (xmax - xmin);
    xmin -= xpad, xmax += xpad;

    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    for (int q = 0; q < np; q++) {
        const int col = q % pc, row = q / pc;
        const double x0 = left + col * (pw + legend + ygap), y0 = top + row * ch + ptitle;
        frame f = {x0, y0, pw, ph, xmin, xmax, ymin, ymax, ystep, u};
        draw_panel(cr, &f, p, q, n_series, s, x0 + pw + 20 * u);
        if (ptitle > 0) {
            cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
            cairo_set_font_size(cr, 15 * u);
            tr_text_at(cr, x0 + pw / 2, y0 - 8 * u, p->panel_titles[q], 0.5, 1.0);
        }
    }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_font_size(cr, 15 * u);
    const double span = pc * pw + (pc - 1) * (legend + ygap);
    if (p->xlabel) tr_text_at(cr, left + span / 2, Hh - 22 * u, p->xlabel, 0.5, 0.5);
    if (p->ylabel) {
        cairo_save(cr);
        cairo_translate(cr, 22 * u, top + (Hh - top - bottom) / 2);
        cairo_rotate(cr, -PLOT_PI / 2);
        cairo_text_extents_t e; /* shrunk to the figure's height (it may say how it is clipped) */
        cairo_text_extents(cr, p->ylabel, &e);
        if (e.width > Hh - 16) cairo_set_font_size(cr, 15 * u * (Hh - 16) / e.width);
        tr_text_at(cr, 0, 0, p->ylabel, 0.5, 0.5);
        cairo_restore(cr);
    }
    if (p->title) tr_text_fit(cr, np > 1 ? W / 2.0 : left + pw / 2, 24 * u, 17 * u, W, p->title, 0.5);
    cairo_destroy(cr);
    return tr_png_write(surf, o, path, err);
}
#endif
