/* posenc plot extrapolation: a `posenc compare` CSV as one curve per variant, the metric
 * against the evaluation length (a multiple of the training length). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/output.h"
#include "cli.h"
#include "draw.h"
#include "plot.h"

/* the compare CSV: mean of --metric over seeds per (variant, eval_multiple), x = log2(multiple) */
int plot_extrapolation(const opts *o) {
    if (!o->in) return cli_fail("plot extrapolation needs a CSV: posenc plot extrapolation compare.csv -o FILE.png");
    pe_err ierr;
    FILE *f = pe_in_open(o->in, (long long)1 << 30, NULL, &ierr);
    if (!f) return cli_fail("%s", ierr.msg);
    enum { MAXV = 40, MAXL = 16 };
    char line[2048], name[MAXV][64], meth[MAXV][32], metric_name[64] = "";
    double sum[MAXV][MAXL], cnt[MAXV][MAXL], mult[MAXL];
    int nv = 0, nl = 0, col = -1, cv = -1, cm = -1, cmetric = -1, cmeth = -1, rc = 0, rows = 0;
    memset(sum, 0, sizeof sum), memset(cnt, 0, sizeof cnt);
    if (!fgets(line, sizeof line, f)) rc = cli_fail("%s: empty file", o->in);
    for (int c = 0, at = 0; !rc; c++) { /* header */
        char *e = line + at;
        size_t len = strcspn(e, ",\r\n");
        if (len == strlen(o->metric) && !strncmp(e, o->metric, len)) col = c;
        if (len == 7 && !strncmp(e, "variant", 7)) cv = c;
        if (len == 13 && !strncmp(e, "eval_multiple", 13)) cm = c;
        if (len == 6 && !strncmp(e, "metric", 6)) cmetric = c;
        if (len == 6 && !strncmp(e, "method", 6)) cmeth = c;
        if (e[len] != ',') break;
        at += (int)len + 1;
    }
    if (!rc && (cv < 0 || cm < 0)) rc = cli_fail("%s: not a posenc compare CSV (no variant / eval_multiple column)", o->in);
    if (!rc && col < 0) rc = cli_fail("%s: no column '%s'", o->in, o->metric);
    while (!rc && fgets(line, sizeof line, f)) {
        char *fld[64];
        int nf = 0;
        for (char *s = line; nf < 64;) {
            fld[nf++] = s;
            s += strcspn(s, ",\r\n");
            if (*s != ',') {
                *s = 0;
                break;
            }
            *s++ = 0;
        }
        if (nf <= col || nf <= cv || nf <= cm) continue;
        double val = strtod(fld[col], NULL), mu = strtod(fld[cm], NULL);
        if (cmetric >= 0 && cmetric < nf && !metric_name[0]) snprintf(metric_name, sizeof metric_name, "%s", fld[cmetric]);
        int vi = 0, li = 0;
        while (vi < nv && strcmp(name[vi], fld[cv])) vi++;
        if (vi == nv && nv < MAXV)
            snprintf(meth[nv], 32, "%s", cmeth >= 0 && cmeth < nf ? fld[cmeth] : ""), snprintf(name[nv++], 64, "%s", fld[cv]);
        while (li < nl && mult[li] != mu) li++;
        if (li == nl && nl < MAXL) mult[nl++] = mu;
        if (vi < nv && li < nl && isfinite(val)) sum[vi][li] += val, cnt[vi][li] += 1;
        rows++;
    }
    fclose(f);
    if (!rc && !rows) rc = cli_fail("%s: no rows", o->in);
    if (rc) return rc;
    /* lengths in increasing order */
    int ord[MAXL];
    for (int i = 0; i < nl; i++) ord[i] = i;
    for (int i = 0; i < nl; i++)
        for (int j = i + 1; j < nl; j++)
            if (mult[ord[j]] < mult[ord[i]]) ord[i] ^= ord[j], ord[j] ^= ord[i], ord[i] ^= ord[j];
    static double xs[MAXL], ys[MAXV][MAXL], tk[MAXL];
    char tl[MAXL][16];
    const char *tlp[MAXL];
    tr_series s[MAXV];
    for (int l = 0; l < nl; l++) {
        xs[l] = tk[l] = log2(mult[ord[l]] > 0 ? mult[ord[l]] : 1);
        snprintf(tl[l], 16, "%gx", mult[ord[l]]), tlp[l] = tl[l];
    }
    for (int vi = 0; vi < nv; vi++) {
        for (int l = 0; l < nl; l++) ys[vi][l] = cnt[vi][ord[l]] ? sum[vi][ord[l]] / cnt[vi][ord[l]] : NAN;
        s[vi] = (tr_series){name[vi], nl, xs, ys[vi], NULL};
    }
    char title[200], ylabel[160];
    const char *shown = strcmp(o->metric, "value") || !metric_name[0] ? o->metric : metric_name;
    snprintf(title, sizeof title, "extrapolation: %s against evaluation length (mean over seeds)", o->metric);
    snprintf(ylabel, sizeof ylabel, "%s", shown);
    tr_plot pl = {.title = title, .xlabel = "evaluation length / training length", .ylabel = ylabel, .n_ticks = nl,
                  .ticks = tk, .tick_labels = tlp, .W = o->W, .H = o->H};
    /* as compare's own plot: a panel per family (when the CSV names the methods), and for a
     * loss a y range that one blown-up method does not stretch */
    static const int fam[] = {PE_FAMILY_ABSOLUTE, PE_FAMILY_RELATIVE, PE_FAMILY_BIAS, PE_FAMILY_ROTARY};
    const char *ptitle[4];
    int pof[MAXV], fpanel[4] = {-1, -1, -1, -1}, npan = 0, known = cmeth >= 0;
    for (int vi = 0; vi < nv; vi++) {
        const int m = pe_method_from_name(meth[vi]);
        known &= m >= 0;
        pof[vi] = m >= 0 ? (int)pe_method_family(m) : 0; /* the family for now, its panel below */
    }
    for (int q = 0; known && q < 4; q++)
        for (int vi = 0; vi < nv && fpanel[q] < 0; vi++)
            if (pof[vi] == fam[q]) fpanel[q] = npan, ptitle[npan++] = pe_family_name(fam[q]);
    for (int vi = 0; known && vi < nv; vi++)
        for (int q = 0; q < 4; q++)
            if (pof[vi] == fam[q]) {
                pof[vi] = fpanel[q];
                break;
            }
    if (known && npan > 1) pl.n_panels = npan, pl.panel_titles = ptitle, pl.panel_of = pof;
    if ((!strcmp(shown, "bpc") || !strcmp(shown, "loss_nats")) && tr_plot_fit_y(&pl, nv, s) > 0)
        snprintf(ylabel, sizeof ylabel, "%s, clipped: \xe2\x96\xb2 = above %g", shown, pl.ymax);
    pe_err err = {{0}};
    return tr_plot_png(o->out, &pl, nv, s, &err) ? cli_fail("%s", err.msg) : 0;
}

