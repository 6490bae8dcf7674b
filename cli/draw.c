/* Heatmaps as PNG through cairo (draw.h); text, tick steps and writing are train/plot.c's. */
#include "draw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"

#ifndef PE_CAIRO
pe_status dr_heatmap_png(const char *path, const dr_heat *h, pe_err *err) {
    (void)h;
    return pe_error(err, PE_EIO, "%s: posenc was built without cairo (Debian: libcairo2-dev), no plot", path);
}
#else

#define DR_PI 3.14159265358979323846

/* viridis through 5 anchors; diverging blue-white-red for data of both signs */
static void colour(double t, int diverging, double rgb[3]) {
    static const double V[5][3] = {{0.267, 0.005, 0.329}, {0.230, 0.322, 0.546}, {0.128, 0.567, 0.551},
                                   {0.369, 0.789, 0.383}, {0.993, 0.906, 0.144}};
    static const double D[3][3] = {{0.23, 0.30, 0.75}, {0.97, 0.97, 0.97}, {0.71, 0.02, 0.15}};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    int n = diverging ? 3 : 5;
    const double(*A)[3] = diverging ? D : V;
    double u = t * (n - 1);
    int k = u >= n - 1 ? n - 2 : (int)u;
    u -= k;
    for (int c = 0; c < 3; c++) rgb[c] = A[k][c] * (1 - u) + A[k + 1][c] * u;
}

/* tick labels of cell values v0.. along one side: start/len span the panel, `at` is the fixed
 * coordinate of the labels (x of the right edge of vertical ones, y of the top of horizontal) */
static void ticks_along(cairo_t *cr, double v0, int64_t cells, double start, double len, double at, int vertical) {
    double step = tr_nice_step((double)cells, len < 200 ? 3 : 6);
    if (step < 1) step = 1;
    char buf[32];
    for (double v = ceil(v0 / step) * step; v <= v0 + cells - 1 + 1e-9; v += step) {
        double p = start + (v - v0 + 0.5) / cells * len;
        snprintf(buf, sizeof buf, "%g", v);
        if (vertical) tr_text_at(cr, at, p, buf, 1.0, 0.5);
        else tr_text_at(cr, p, at, buf, 0.5, 0.0);
    }
}

/* One character per cell as the tick labels (the text of an attention plot): the font shrinks
 * to the cell down to a legible 7.5 px; below that the labels alternate between two lanes
 * (even cells next to the axis, odd ones a line further out, joined to it by a faint stroke),
 * and only when two lanes do not fit either every k-th character is shown. Spaces are drawn
 * as the open box, so that word boundaries stay visible. */
static void char_ticks(cairo_t *cr, const char *s, int64_t cells, double start, double len, double at, int vertical,
                       double fbig) {
    const double cell = len / (double)cells, need = vertical ? 0.95 : 0.85; /* room a glyph takes, in font sizes */
    double f = fbig;
    int lanes = 1;
    int64_t every = 1;
    if (cell < need * f) f = fmax(7.5, fmin(fbig, cell / need));
    if (cell < need * f) lanes = 2;
    if (lanes == 2 && 2 * cell < need * f) lanes = 1, every = (int64_t)ceil(need * f / cell);
    cairo_set_font_size(cr, f);
    for (int64_t t = 0; t < cells; t += every) {
        const unsigned char c = (unsigned char)s[t];
        char g[4] = {(char)c, 0};
        if (c == ' ') memcpy(g, "\xe2\x90\xa3", 4); /* U+2423 OPEN BOX */
        else if (c < 32 || c >= 127) memcpy(g, "\xc2\xb7", 3); /* U+00B7: a byte with no glyph */
        const double p = start + ((double)t + 0.5) * cell, off = lanes == 2 && t % 2 ? (vertical ? 0.95 : 1.1) * f : 0;
        if (off > 0) {
            cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
            cairo_set_line_width(cr, 0.5);
            if (vertical) cairo_move_to(cr, at + 2, p), cairo_line_to(cr, at - off + 1, p);
            else cairo_move_to(cr, p, at - 2), cairo_line_to(cr, p, at + off - 1);
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        }
        if (vertical) tr_text_at(cr, at - off, p, g, 1.0, 0.5);
        else tr_text_at(cr, p, at + off, g, 0.5, 0.0);
    }
}

/* The colour range of n values: lo..hi over the finite ones, symmetric about 0 (diverging
 * colours) when they have both signs, widened when constant. */
static void scale_of(const double *d, int64_t n, double *lo, double *hi, int *diverging) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t k = 0; k < n; k++)
        if (isfinite(d[k])) *lo = fmin(*lo, d[k]), *hi = fmax(*hi, d[k]);
    if (!isfinite(*lo)) *lo = 0, *hi = 1;
    *diverging = *lo < 0 && *hi > 0;
    if (*diverging) *hi = fmax(*hi, -*lo), *lo = -*hi;
    if (*hi - *lo < 1e-12 * (1 + fabs(*hi))) *lo -= 0.5, *hi += 0.5;
}

/* A vertical colour bar at (bx, by) of bw x bh with about n tick labels to its right */
static void colour_bar(cairo_t *cr, double bx, double by, double bw, double bh, double lo, double hi, int diverging,
                       int n) {
    for (int k = 0; k < (int)bh; k++) {
        double rgb[3];
        colour(1 - k / bh, diverging, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, bx, by + k, bw, 1.5);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, bx, by, bw, bh);
    cairo_stroke(cr);
    double cstep = tr_nice_step(hi - lo, n);
    char buf[32];
    for (double v = ceil(lo / cstep) * cstep; v <= hi + 1e-9 * cstep; v += cstep) {
        double y = by + (1 - (v - lo) / (hi - lo)) * bh;
        cairo_move_to(cr, bx + bw, y), cairo_line_to(cr, bx + bw + 4, y), cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%g", fabs(v) < 1e-9 * cstep ? 0.0 : v);
        tr_text_at(cr, bx + bw + 6, y, buf, 0.0, 0.5);
    }
}

pe_status dr_heatmap_png(const char *path, const dr_heat *h, pe_err *err) {
    if (h->W < 160 || h->H < 120 || h->W > 8000 || h->H > 8000)
        return pe_error(err, PE_EINVAL, "size %dx%d: width 160..8000 and height 120..8000 pixels", h->W, h->H);
    const int64_t per = h->rows * h->cols;
    const int own = h->per_panel && h->n_panels > 1; /* one panel: its scale is the figure's */
    double lo, hi;
    int diverging;
    scale_of(h->data, h->n_panels * per, &lo, &hi, &diverging);

    const double W = h->W, H = h->H, fs = fmin(W, H) / 50 < 9 ? 9 : fmin(W, H) / 50;
    /* with a bar per panel the right margin keeps only the bars' common label */
    const double top = 2.6 * fs + 8, bottom = 3.2 * fs + 8, left = 4.8 * fs + 8, right = own ? 2.2 * fs + 8 : 6.5 * fs + 28;
    int pc = (int)ceil(sqrt((double)h->n_panels)), pr = (h->n_panels + pc - 1) / pc;
    double padx = pc > 1 ? 3.5 * fs : 0, pady = pr > 1 ? 2.8 * fs : 0, bar_room = own ? 5.2 * fs : 0;
    /* padx separates columns: the last one's is not kept at the right edge */
    double gw = (W - left - right + padx) / pc, gh = (H - top - bottom) / pr;
    double pw = gw - padx - bar_room, ph = gh - pady - (h->panel_titles ? 1.6 * fs : 0);
    if (pw < 8 || ph < 8) return pe_error(err, PE_EINVAL, "size %dx%d is too small for %d panels", h->W, h->H, h->n_panels);

    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, h->W, h->H);
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)h->cols, (int)h->rows);
    for (int p = 0; p < h->n_panels; p++) {
        double ox = left + (p % pc) * gw, oy = top + (p / pc) * gh + (h->panel_titles ? 1.6 * fs : 0);
        const double *pd = h->data + p * per;
        if (own) scale_of(pd, per, &lo, &hi, &diverging);
        /* the cells as an image, scaled without smoothing */
        cairo_surface_flush(img);
        unsigned char *px = cairo_image_surface_get_data(img);
        int stride = cairo_image_surface_get_stride(img);
        for (int64_t r = 0; r < h->rows; r++)
            for (int64_t c = 0; c < h->cols; c++) {
                double v = pd[r * h->cols + c], rgb[3] = {0.5, 0.5, 0.5};
                if (isfinite(v)) colour((v - lo) / (hi - lo), diverging, rgb);
                uint32_t pix = (uint32_t)(rgb[0] * 255 + 0.5) << 16 | (uint32_t)(rgb[1] * 255 + 0.5) << 8 | (uint32_t)(rgb[2] * 255 + 0.5);
                memcpy(px + r * stride + 4 * c, &pix, 4);
            }
        cairo_surface_mark_dirty(img);
        cairo_save(cr);
        cairo_translate(cr, ox, oy);
        cairo_scale(cr, pw / h->cols, ph / h->rows);
        cairo_set_source_surface(cr, img, 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
        cairo_rectangle(cr, 0, 0, (double)h->cols, (double)h->rows);
        cairo_fill(cr);
        cairo_restore(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_set_line_width(cr, 1);
        cairo_rectangle(cr, ox, oy, pw, ph);
        cairo_stroke(cr);
        cairo_set_font_size(cr, 0.85 * fs);
        if (h->xchars) char_ticks(cr, h->xchars, h->cols, ox, pw, oy + ph + 3, 0, 0.85 * fs);
        else ticks_along(cr, h->x0, h->cols, ox, pw, oy + ph + 3, 0);
        if (h->ychars) char_ticks(cr, h->ychars, h->rows, oy, ph, ox - 4, 1, 0.85 * fs);
        else ticks_along(cr, h->y0, h->rows, oy, ph, ox - 4, 1);
        if (own) {
            cairo_set_font_size(cr, 0.8 * fs);
            colour_bar(cr, ox + pw + 0.6 * fs, oy, 0.7 * fs, ph, lo, hi, diverging, ph < 150 ? 3 : 5);
        }
        if (h->panel_titles) {
            cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
            /* shrunk to the panel and its bar, so that neighbours' titles do not run together */
            cairo_text_extents_t e;
            double tf = fs;
            cairo_set_font_size(cr, tf);
            cairo_text_extents(cr, h->panel_titles[p], &e);
            if (e.width > pw + bar_room) tf = fmax(7, tf * (pw + bar_room) / e.width);
            cairo_set_font_size(cr, tf);
            tr_text_at(cr, ox + (pw + bar_room) / 2, oy - 0.3 * fs, h->panel_titles[p], 0.5, 1.0);
        }
    }
    cairo_surface_destroy(img);
    /* axis labels and title */
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_font_size(cr, 1.1 * fs);
    if (h->xlabel) tr_text_at(cr, left + (W - left - right) / 2, H - 0.5 * fs - 4, h->xlabel, 0.5, 1.0);
    if (h->ylabel) {
        cairo_save(cr);
        cairo_translate(cr, 0.9 * fs + 2, top + (H - top - bottom) / 2);
        cairo_rotate(cr, -DR_PI / 2);
        tr_text_at(cr, 0, 0, h->ylabel, 0.5, 0.5);
        cairo_restore(cr);
    }
    if (h->title) tr_text_fit(cr, W / 2, 0.4 * fs + 4, 1.3 * fs, W, h->title, 0.0);
    /* the colour bar, shared by the panels, unless each has its own */
    double bx = W - right + 1.5 * fs + 10, bw = 1.2 * fs, by = top, bh = H - top - bottom;
    cairo_set_font_size(cr, 0.85 * fs);
    if (!own) colour_bar(cr, bx, by, bw, bh, lo, hi, diverging, 5);
    if (h->cblabel) {
        char lab[160];
        snprintf(lab, sizeof lab, "%s%s", h->cblabel, own ? " (colour scale per panel)" : "");
        cairo_save(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cairo_translate(cr, W - 0.8 * fs - 2, by + bh / 2);
        cairo_rotate(cr, -DR_PI / 2);
        tr_text_at(cr, 0, 0, lab, 0.5, 0.5);
        cairo_restore(cr);
    }
    cairo_destroy(cr);
    pe_out o;
    pe_status st = tr_png_write(surf, &o, path, err);
    return st ? st : pe_out_commit(&o, err);
}

#endif
