/* posenc plot KIND [IN] [options] -o FILE.png: pictures of encodings (draw.h, posmat.h).
 *   encoding       P[position, dimension] of an absolute method (--from FILE: a pos_table, or
 *                  a trainer checkpoint's encoding of block --layer)
 *   similarity     P P^T (or cosine) of an absolute method; a rotary method's score of q = k = ones
 *                  against distance; other methods' scores with q = k = ones, per head
 *   relative       the relative index (shaw, t5, tupe, deberta) or the position bias with
 *                  zero q and k, per head
 *   attention      the probabilities of a `posenc attend` case file, or of block --layer of a
 *                  trainer checkpoint on --input TEXT, per head
 *   extrapolation  the metric against evaluation length of a `posenc compare` CSV */
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/safetensors.h"
#include "../train/trainer.h"
#include "posenc.h"
#include "../tools/layer.h"
#include "../tools/output.h"
#include "cli.h"
#include "options.h"
#include "draw.h"
#include "posmat.h"
#include "props.h"
#include "plot.h"

#define PLOT_PI 3.14159265358979323846


/* The command line into o: the parser's checks, then the sizes it leaves as text. */
static int parse(int argc, char **argv, opts *o) {
    plot_args a;
    arg_res r;
    ARGS_PLOT.init(&a);
    *o = (opts){0};
    int rc = arg_parse(&ARGS_PLOT, argc, argv, &a, &r);
    if (rc) return rc;
    *o = (opts){.kind = a.kind, .in = a.in, .out = a.out, .from = a.from, .tensor = a.tensor, .part = a.part,
                .show = a.show, .metric = a.metric, .checkpoint = a.checkpoint, .input = a.input, .cosine = a.cosine,
                .batch = (int)a.batch, .layer = a.layer < 0 ? 0 : a.layer, .layer_set = a.layer >= 0, .N = a.length,
                .C = a.width, .heads = a.heads, .seed = (uint64_t)a.seed, .patch_r = -1, .patch_c = -1,
                .n_keys = r.n_keys, .keys = r.keys, .vals = r.vals}; /* o owns r's arrays now */
    char sep = 0, extra = 0;
    long long h, w;
    if (sscanf(a.size, "%d%c%d%c", &o->W, &sep, &o->H, &extra) != 3 || sep != 'x' || o->W < 160 || o->H < 120 ||
        o->W > 8000 || o->H > 8000)
        return cli_fail("plot: --size: '%s' is not WxH with W in 160..8000 and H in 120..8000", a.size);
    if (sscanf(a.grid, "%lld%c%lld%c", &h, &sep, &w, &extra) != 3 || sep != 'x' || h < 1 || w < 1 || h > 256 || w > 256)
        return cli_fail("plot: --grid: '%s' is not HxW with H, W in 1..256", a.grid);
    o->grid_h = h, o->grid_w = w;
    if (a.patch && (sscanf(a.patch, "%lld%c%lld%c", &h, &sep, &w, &extra) != 3 || sep != ',' || h < 0 || w < 0 ||
                    h > 256 || w > 256))
        return cli_fail("plot: --patch: '%s' is not R,C (row, column)", a.patch);
    if (a.patch) o->patch_r = h, o->patch_c = w;
    return 0;
}

static pm_opts pm_of(const opts *o) {
    return (pm_opts){.n_keys = o->n_keys, .keys = o->keys, .vals = o->vals, .N = o->N, .C = o->C,
                     .heads = o->heads, .seed = o->seed, .from = o->from, .tensor = o->tensor,
                     .checkpoint = o->checkpoint_from, .layer = o->layer};
}

static const pe_tensor *find(const pe_tensor *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

/* The encoding rows to plot or compare: P, P_<part> (floater q k v, complex re im); complex
 * similarity uses [re, im] side by side (the real part of z_i conj(z_j)). *A is malloc'ed. */
static int encoding_rows(const opts *o, int for_similarity, float **A, float **B, int64_t *C, char *what, size_t wn) {
    pe_err err = {{0}};
    pm_opts p = pm_of(o);
    pe_tensor *t = NULL;
    int n = 0;
    if (pm_encoding(&p, &t, &n, &err)) return cli_fail("%s", err.msg);
    int rc = 0;
    const pe_tensor *a = find(t, n, "P"), *b = NULL;
    const char *part = o->part;
    if (!a && find(t, n, "P_q")) { /* floater: q against k for similarity */
        char nm[8];
        snprintf(nm, sizeof nm, "P_%s", part ? part : "q");
        a = find(t, n, nm);
        if (!a || (part && strlen(part) != 1)) rc = cli_fail("--part: '%s' is not q, k or v (floater)", part);
        b = for_similarity && !part ? find(t, n, "P_k") : a;
        snprintf(what, wn, for_similarity && !part ? "P_q P_k^T" : "%s", nm);
    } else if (!a && find(t, n, "P_re")) {
        if (part && strcmp(part, "re") && strcmp(part, "im")) rc = cli_fail("--part: '%s' is not re or im (complex)", part);
        a = find(t, n, part && !strcmp(part, "im") ? "P_im" : "P_re");
        snprintf(what, wn, "%s", a->name);
    } else {
        if (part) rc = cli_fail("--part applies to floater and complex only");
        snprintf(what, wn, "P");
    }
    if (!b) b = a;
    int64_t N = o->N, c = a ? a->shape[1] : 0;
    int both = !strcmp(t[0].name, "P_re") && for_similarity && !part;
    *C = both ? 2 * c : c;
    *A = malloc(sizeof(float) * (size_t)(N * *C)), *B = malloc(sizeof(float) * (size_t)(N * *C));
    if (!rc && (!*A || !*B)) rc = cli_fail("out of memory");
    for (int64_t r = 0; !rc && r < N; r++) {
        if (both) {
            const float *re = find(t, n, "P_re")->data, *im = find(t, n, "P_im")->data;
            memcpy(*A + r * 2 * c, re + r * c, sizeof(float) * c), memcpy(*A + r * 2 * c + c, im + r * c, sizeof(float) * c);
            snprintf(what, wn, "[P_re P_im]");
        } else {
            memcpy(*A + r * c, (const float *)a->data + r * c, sizeof(float) * c);
        }
        memcpy(*B + r * *C, both ? *A + r * *C : (const float *)b->data + r * c, sizeof(float) * *C);
    }
    pe_tensors_free(t, n);
    return rc;
}

static const char *method_of(const opts *o) {
    for (int i = o->n_keys - 1; i >= 0; i--)
        if (!strcmp(o->keys[i], "method")) return o->vals[i];
    return "?";
}

/* The method, and where its tensors come from when a file gives them (the block only for
 * methods the trainer places in the blocks: an input encoding is one model tensor). */
static const char *source_of(const opts *o, char *buf, size_t n) {
    const char *f = o->from ? strrchr(o->from, '/') : NULL;
    f = f ? f + 1 : o->from;
    if (o->checkpoint_from && tr_method_placement(method_of(o), NULL) != TR_PLACE_INPUT)
        snprintf(buf, n, "%s (%s, block %lld)", method_of(o), f, (long long)o->layer);
    else if (o->from) snprintf(buf, n, "%s (%s)", method_of(o), f);
    else snprintf(buf, n, "%s", method_of(o));
    return buf;
}

/* h at the command line's size and to its output; panels without titles are "head h" */
static int heat_png(const opts *o, dr_heat h) {
    char(*pt)[32] = malloc(32 * (size_t)h.n_panels);
    const char **ptp = malloc(sizeof(char *) * (size_t)h.n_panels);
    if (!pt || !ptp) {
        free(pt), free(ptp);
        return cli_fail("out of memory");
    }
    for (int p = 0; p < h.n_panels; p++) snprintf(pt[p], 32, "head %d", p), ptp[p] = pt[p];
    if (!h.panel_titles && h.n_panels > 1) h.panel_titles = ptp;
    h.W = o->W, h.H = o->H;
    pe_err err = {{0}};
    int rc = dr_heatmap_png(o->out, &h, &err) ? cli_fail("%s", err.msg) : 0;
    free(pt), free(ptp);
    return rc;
}

static int heat(const opts *o, const char *title, const char *xl, const char *yl, const char *cb, int panels, int64_t rows,
                int64_t cols, const double *d, double x0, double y0) {
    return heat_png(o, (dr_heat){.title = title, .xlabel = xl, .ylabel = yl, .cblabel = cb, .n_panels = panels,
                                 .rows = rows, .cols = cols, .data = d, .x0 = x0, .y0 = y0});
}

/* sinusoidal's layout as the title says it (the three look alike at a glance: the title is
 * where a reader learns which dimensions hold sin and which cos) */
static const char *sin_layout_text(const opts *o) {
    pe_config cfg;
    pe_err err;
    pe_config_init(&cfg);
    if (pe_config_set_all(&cfg, o->n_keys, o->keys, o->vals, &err) || cfg.method != PE_METHOD_SINUSOIDAL) return NULL;
    switch (cfg.sin_layout) {
    case PE_SIN_CONCAT: return "layout concat (sin | cos halves)";
    case PE_SIN_T2T: return "layout t2t (sin | cos halves, tensor2tensor's frequencies)";
    default: return "layout interleaved (sin in even dimensions, cos in odd)";
    }
}

static int plot_encoding(const opts *o) {
    float *A = NULL, *B = NULL;
    int64_t C = 0;
    char what[32], title[256];
    int rc = encoding_rows(o, 0, &A, &B, &C, what, sizeof what);
    double *d = rc ? NULL : malloc(sizeof(double) * (size_t)(o->N * C));
    if (!rc && !d) rc = cli_fail("out of memory");
    for (int64_t k = 0; !rc && k < o->N * C; k++) d[k] = A[k];
    char src[128];
    const char *layout = sin_layout_text(o);
    snprintf(title, sizeof title, "%s%s%s: %s[position, dimension]", source_of(o, src, sizeof src), layout ? ", " : "",
             layout ? layout : "", what);
    if (!rc) rc = heat(o, title, "dimension", "position", "value", 1, o->N, C, d, 0, 0);
    free(A), free(B), free(d);
    return rc;
}

static int plot_similarity(const opts *o) {
    pe_err err = {{0}};
    pm_opts p = pm_of(o);
    int m = pm_method(&p, &err);
    if (m < 0) return cli_fail("%s", err.msg);
    char title[256];
    int rc = 0;
    if (pe_method_family(m) == PE_FAMILY_ABSOLUTE) {
        float *A = NULL, *B = NULL;
        int64_t C = 0, N = o->N;
        char what[32];
        rc = encoding_rows(o, 1, &A, &B, &C, what, sizeof what);
        double *S = rc ? NULL : malloc(sizeof(double) * (size_t)(N * N));
        if (!rc && !S) rc = cli_fail("out of memory");
        if (!rc) pr_gram(A, B, N, C, o->cosine, S);
        char src[128];
        snprintf(title, sizeof title, "%s: %s of %s rows", source_of(o, src, sizeof src), o->cosine ? "cosine" : "dot product", what);
        if (!rc) rc = heat(o, title, "position j", "position i", o->cosine ? "cosine" : "dot product", 1, N, N, S, 0, 0);
        free(A), free(B), free(S);
        return rc;
    }
    if (o->cosine) return cli_fail("--cosine applies to absolute methods (an encoding's rows)");
    double *S = NULL;
    int64_t H = 0, N = o->N;
    if (pm_scores(&p, 0, &S, &H, &err)) return cli_fail("%s", err.msg);
    if (pe_method_family(m) == PE_FAMILY_ROTARY) {
        /* row 0: the query at position 0 against keys at distance j, one line per distinct head */
        tr_series s[64];
        double *x = malloc(sizeof(double) * (size_t)N);
        char lab[64][32];
        int ns = 0;
        for (int64_t j = 0; x && j < N; j++) x[j] = (double)j;
        for (int64_t h = 0; x && h < H && ns < 64; h++) {
            int same = h > 0 && !memcmp(S + h * N * N, S, sizeof(double) * (size_t)N);
            if (same) continue;
            snprintf(lab[ns], sizeof lab[ns], "head %lld", (long long)h);
            s[ns] = (tr_series){lab[ns], (int)N, x, S + h * N * N, NULL};
            ns++;
        }
        if (ns == 1) s[0].label = "all heads";
        snprintf(title, sizeof title, "%s: score of q = k = ones against distance", method_of(o));
        tr_plot pl = {.title = title, .xlabel = "distance j - i", .ylabel = "score", .W = o->W, .H = o->H};
        char tl[16][16];
        double tk[16];
        const char *tlp[16];
        double step = N > 8 ? ceil((N - 1) / 8.0) : 1;
        for (double v = 0; v <= N - 1 && pl.n_ticks < 16; v += step)
            tk[pl.n_ticks] = v, snprintf(tl[pl.n_ticks], 16, "%g", v), tlp[pl.n_ticks] = tl[pl.n_ticks], pl.n_ticks++;
        pl.ticks = tk, pl.tick_labels = tlp;
        if (!x) rc = cli_fail("out of memory");
        else if (tr_plot_png(o->out, &pl, ns, s, &err)) rc = cli_fail("%s", err.msg);
        free(x);
    } else {
        snprintf(title, sizeof title, "%s: scores with q = k = ones", method_of(o));
        rc = heat(o, title, "key position j", "query position i", "score", (int)H, N, N, S, 0, 0);
    }
    free(S);
    return rc;
}

/* A layer of the plot's settings (method and keys), heads and width as given. */
static pe_status plot_layer(const opts *o, pe_attention **att, pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    char heads[32];
    snprintf(heads, sizeof heads, "%lld", (long long)o->heads);
    pe_status st = pe_config_set_all(&cfg, o->n_keys, o->keys, o->vals, err);
    if (!st && !pe_config_has(&cfg, PE_K_heads)) st = pe_config_set(&cfg, "heads", heads, err);
    return st ? st : pe_attention_init(att, &cfg, o->C, err);
}

/* axes: rope with rope_sections, the axis each pair reads (1 in row a for pair t) */
static int plot_axes(const opts *o) {
    pe_attention *att;
    pe_err err;
    if (plot_layer(o, &att, &err)) return cli_fail("plot axes: %s", err.msg);
    const pe_config *cfg = pe_attention_config(att);
    if (cfg->method != PE_METHOD_ROPE || cfg->rope_sections.n < 2) {
        pe_attention_free(att);
        return cli_fail("plot axes: needs --method rope with --rope_sections of two axes or more (e.g. 16,24,24)");
    }
    const int64_t A = cfg->rope_sections.n, half = cfg->rotary_dim / 2;
    uint8_t axis[PE_MAX_ROPE_PAIRS];
    pe_rope_pair_axes(cfg, axis);
    double *d = calloc((size_t)(A * half), sizeof(double));
    int rc = d ? 0 : cli_fail("out of memory");
    for (int64_t t = 0; d && t < half; t++) d[axis[t] * half + t] = 1;
    char title[200], sec[96];
    size_t n = 0;
    for (int a = 0; a < A; a++) n += (size_t)snprintf(sec + n, sizeof sec - n, "%s%lld", a ? "," : "", (long long)cfg->rope_sections.v[a]);
    char lay[32] = "";
    for (int k = 0; pe_config_key_name(k); k++)
        if (!strcmp(pe_config_key_name(k), "rope_section_layout")) pe_config_key_value(cfg, k, lay, sizeof lay);
    snprintf(title, sizeof title, "rope_sections %s (%s): the position axis each frequency pair reads", sec, lay);
    if (!rc) rc = heat(o, title, "frequency pair t", "position axis", "reads it", 1, A, half, d, 0, 0);
    free(d);
    pe_attention_free(att);
    return rc;
}

/* grid: the score of q = k = ones between one patch and every patch of a 2-D grid, per head */
static int plot_grid(const opts *o) {
    pe_attention *att;
    pe_err err;
    if (plot_layer(o, &att, &err)) return cli_fail("plot grid: %s", err.msg);
    const pe_config *cfg = pe_attention_config(att);
    const int mixed = cfg->method == PE_METHOD_ROPE_MIXED;
    if (!mixed && !(cfg->method == PE_METHOD_ROPE && cfg->rope_sections.n == 2)) {
        pe_attention_free(att);
        return cli_fail("plot grid: needs --method rope with two --rope_sections (e.g. 8,8) or --method rope_mixed");
    }
    const int64_t GH = o->grid_h, GW = o->grid_w, T = GH * GW, H = cfg->heads, C = o->C, D = C / H,
                  half = cfg->rotary_dim / 2;
    const int64_t pr = o->patch_r < 0 ? GH / 2 : o->patch_r, pc = o->patch_c < 0 ? GW / 2 : o->patch_c;
    if (pr >= GH || pc >= GW) {
        pe_attention_free(att);
        return cli_fail("plot grid: --patch %lld,%lld is outside the %lldx%lld grid", (long long)pr, (long long)pc,
                        (long long)GH, (long long)GW);
    }
    int64_t *kpos = malloc(sizeof(int64_t) * (size_t)(2 * T)), qpos[2] = {pc, pr};
    float *q = malloc(sizeof(float) * (size_t)C), *k = malloc(sizeof(float) * (size_t)(T * C));
    float *v = calloc((size_t)(T * C), sizeof(float)), *out = malloc(sizeof(float) * (size_t)C);
    float *sc = malloc(sizeof(float) * (size_t)(H * T)), *freqs = mixed ? malloc(sizeof(float) * (size_t)(2 * H * half)) : NULL;
    double *d = malloc(sizeof(double) * (size_t)(H * T));
    int rc = kpos && q && k && v && out && sc && d && (!mixed || freqs) ? 0 : cli_fail("out of memory");
    for (int64_t t = 0; !rc && t < T; t++) kpos[2 * t] = t % GW, kpos[2 * t + 1] = t / GW;
    for (int64_t e = 0; !rc && e < C; e++) q[e] = 1.0f;
    for (int64_t e = 0; !rc && e < T * C; e++) k[e] = 1.0f;
    pe_weights w = {0};
    if (!rc && mixed) { /* rope-vit init_random_2d_freqs: per head, magnitudes theta^(-4u/D) at a random angle */
        const int64_t quarter = half / 2;
        pe_rng rng = {o->seed};
        for (int64_t h = 0; h < H; h++) {
            const double ang = 2 * PLOT_PI * pe_rng_uniform(&rng);
            for (int64_t t = 0; t < half; t++) {
                const int64_t u = t % (quarter ? quarter : 1), second = quarter && t >= quarter;
                const double mag = pow(10.0, -4.0 * (double)u / (double)D), a = ang + (second ? PLOT_PI / 2 : 0);
                freqs[(0 * H + h) * half + t] = (float)(mag * cos(a));
                freqs[(1 * H + h) * half + t] = (float)(mag * sin(a));
            }
        }
        w.param[0] = freqs, w.param_rows[0] = 2;
    }
    pe_positions at = {.pos = qpos, .key_pos = kpos, .axes = 2};
    if (!rc && pe_attention_forward_qkv(att, &w, q, k, v, 1, 1, T, &at, out, sc, NULL, &err))
        rc = cli_fail("plot grid: %s", err.msg);
    for (int64_t e = 0; !rc && e < H * T; e++) d[e] = sc[e];
    char title[200];
    snprintf(title, sizeof title, "%s: score of patch (%lld, %lld) against every patch of a %lldx%lld grid",
             mixed ? "rope_mixed" : cfg->rope_section_freqs == PE_SECTION_FREQS_PER_AXIS ? "axial rope" : "rope, 2 sections",
             (long long)pr, (long long)pc, (long long)GH, (long long)GW);
    if (!rc) rc = heat(o, title, "column", "row", "score", (int)H, GH, GW, d, 0, 0);
    free(kpos), free(q), free(k), free(v), free(out), free(sc), free(freqs), free(d);
    pe_attention_free(att);
    return rc;
}

static int plot_relative(const opts *o) {
    pe_err err = {{0}};
    pm_opts p = pm_of(o);
    int m = pm_method(&p, &err);
    if (m < 0) return cli_fail("%s", err.msg);
    int indexed = m == PE_METHOD_SHAW || m == PE_METHOD_T5 || m == PE_METHOD_TUPE || m == PE_METHOD_DEBERTA;
    const char *show = o->show ? o->show : indexed ? "index" : "bias";
    char title[200];
    int64_t N = o->N, H = 1;
    double *S = NULL;
    int rc = 0;
    if (!strcmp(show, "index")) {
        if (pm_index(&p, &S, &err)) return cli_fail("%s", err.msg);
        snprintf(title, sizeof title, "%s: relative index%s", method_of(o), m == PE_METHOD_SHAW ? " (clipped j - i)" : m == PE_METHOD_DEBERTA ? " (bucket of i - j)" : " (bucket of j - i)");
        rc = heat(o, title, "key position j", "query position i", "index", 1, N, N, S, 0, 0);
    } else if (!strcmp(show, "bias")) {
        if (pe_method_family(m) == PE_FAMILY_ABSOLUTE || pe_method_family(m) == PE_FAMILY_ROTARY)
            return cli_fail("method '%s' is %s: it has no relative bias (try: plot similarity)", pe_method_name(m), pe_family_name(pe_method_family(m)));
        if (pm_scores(&p, 1, &S, &H, &err)) return cli_fail("%s", err.msg);
        int any = 0;
        for (int64_t k = 0; k < H * N * N; k++) any |= S[k] != 0;
        if (!any) rc = cli_fail("method '%s' has no position bias apart from q and k (try --show index or plot similarity)", pe_method_name(m));
        snprintf(title, sizeof title, "%s: position bias (scores with zero q, k)", method_of(o));
        /* a colour scale per head: heads' ranges differ by orders of magnitude (ALiBi's slopes
         * halve from head to head), and one shared scale leaves the later heads one flat colour */
        char(*pt)[64] = malloc(64 * (size_t)H);
        const char **ptp = malloc(sizeof(char *) * (size_t)H);
        if (!rc && (!pt || !ptp)) rc = cli_fail("out of memory");
        for (int64_t h = 0; !rc && h < H; h++) {
            snprintf(pt[h], 64, "head %lld", (long long)h);
            /* ALiBi's bias is -m |i - j|: its slope m is the step from key 1 to key 0 of query 1
             * (row 1, so that a causal mask leaves both cells), whatever gave the slopes */
            double m_h = N > 1 ? S[(h * N + 1) * N + 1] - S[(h * N + 1) * N] : NAN;
            if (m == PE_METHOD_ALIBI && isfinite(m_h)) {
                int e;
                double fr = frexp(m_h, &e);
                if (fr == 0.5) snprintf(pt[h], 64, "head %lld: slope 2^%d", (long long)h, e - 1);
                else snprintf(pt[h], 64, "head %lld: slope %.4g", (long long)h, m_h);
            }
            ptp[h] = pt[h];
        }
        if (!rc)
            rc = heat_png(o, (dr_heat){.title = title, .xlabel = "key position j", .ylabel = "query position i",
                                       .cblabel = "bias", .n_panels = (int)H, .panel_titles = ptp, .rows = N,
                                       .cols = N, .data = S, .per_panel = 1});
        free(pt), free(ptp);
    } else {
        return cli_fail("--show: '%s' is not index or bias", show);
    }
    free(S);
    return rc;
}

/* A trained model (posenc train --save) on --input: the checkpoint's run rebuilt as --resume
 * does (its task gives the vocabulary), the text as token ids at positions 0..T-1 (+ SHAPE's
 * shift, as at evaluation), block --layer's probabilities per head. */
static int plot_attention_checkpoint(const opts *o) {
    if (o->in) return cli_fail("plot attention: a case file or --checkpoint FILE, not both");
    if (o->n_keys) return cli_fail("plot attention --checkpoint: the settings are the checkpoint's ('--%s' does not apply)", o->keys[0]);
    if (!o->input) return cli_fail("plot attention --checkpoint FILE needs --input TEXT");
    int64_t T = (int64_t)strlen(o->input);
    if (!T) return cli_fail("--input is empty");
    if (T > 2048) return cli_fail("--input: %lld characters, more than the 2048 a plot takes", (long long)T);
    pe_err err = {{0}};
    tr_options opt;
    if (tr_checkpoint_options(o->checkpoint, &opt, &err)) return cli_fail("%s", err.msg);
    if (o->layer >= opt.layers)
        return cli_fail("--layer %lld: %s has %lld block%s (0..%lld)", (long long)o->layer, o->checkpoint, (long long)opt.layers,
                        opt.layers == 1 ? "" : "s", (long long)opt.layers - 1);
    tr_task task;
    tr_run run;
    if (tr_task_from_options(&task, &opt, &err)) return cli_fail("%s: %s", o->checkpoint, err.msg);
    if (tr_run_init(&run, &opt, &task, &err)) {
        tr_task_free(&task);
        return cli_fail("%s: %s", o->checkpoint, err.msg);
    }
    int rc = tr_run_load(&run, o->checkpoint, &err) ? cli_fail("%s", err.msg) : 0;
    const int64_t H = run.o.heads;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)T);
    float *probs = malloc(sizeof(float) * (size_t)(H * T * T));
    double *d = malloc(sizeof(double) * (size_t)(H * T * T));
    if (!rc && (!ids || !pos || !probs || !d)) rc = cli_fail("out of memory");
    for (int64_t t = 0; !rc && t < T; t++) {
        unsigned char c = (unsigned char)o->input[t];
        if (task.ids[c] < 0) {
            char vocab[260] = "";
            for (int v = 0, n = 0; v < task.V; v++)
                if (task.chars[v] >= 32 && task.chars[v] < 127) vocab[n++] = (char)task.chars[v];
            char ch[16];
            if (c >= 32 && c < 127) snprintf(ch, sizeof ch, "'%c'", c);
            else snprintf(ch, sizeof ch, "byte 0x%02x", c);
            rc = cli_fail("--input: %s at %lld is not in the vocabulary of the checkpoint's task %s: \"%s\"", ch, (long long)t,
                          opt.task, vocab);
        }
        ids[t] = task.ids[c], pos[t] = t + run.o.shape;
    }
    if (!rc && tr_model_attention(run.model, ids, pos, T, o->layer, probs, &err))
        rc = cli_fail("--input of %lld characters: %s", (long long)T, err.msg);
    if (!rc) {
        char title[200], shown[44];
        int n = 0;
        for (int64_t t = 0; t < T && n < 40; t++) shown[n++] = o->input[t] >= 32 && o->input[t] < 127 ? o->input[t] : ' ';
        if (T > 40) shown[37] = shown[38] = shown[39] = '.';
        shown[n] = 0;
        snprintf(title, sizeof title, "%s model, block %lld: attention probabilities on \"%s\"", run.o.method,
                 (long long)o->layer, shown);
        for (int64_t e = 0; e < H * T * T; e++) d[e] = probs[e];
        /* the ticks are the input's characters: which token looks at which is what a reader
         * of a trained model's attention wants to see, and positions are 0..T-1 anyway */
        rc = heat_png(o, (dr_heat){.title = title, .xlabel = "key (input character)", .ylabel = "query (input character)",
                                   .cblabel = "probability", .n_panels = (int)H, .rows = T, .cols = T, .data = d,
                                   .x0 = (double)run.o.shape, .y0 = (double)run.o.shape, .xchars = o->input,
                                   .ychars = o->input});
    }
    free(ids), free(pos), free(probs), free(d);
    tr_run_free(&run);
    tr_task_free(&task);
    return rc;
}

static int plot_attention(const opts *o) {
    if (o->checkpoint) return plot_attention_checkpoint(o);
    if (!o->in) return cli_fail("plot attention needs a case file (posenc plot attention CASE.safetensors -o FILE.png) or --checkpoint FILE --input TEXT");
    pe_err err = {{0}};
    pe_st_file f;
    if (pe_st_read(o->in, &f, &err)) return cli_fail("%s", err.msg);
    /* the case's settings, then the command line's */
    const char **k = calloc((size_t)(f.n_meta + o->n_keys + 1), sizeof(char *)), **v = calloc((size_t)(f.n_meta + o->n_keys + 1), sizeof(char *));
    int nk = 0, rc = 0;
    if (!k || !v) rc = cli_fail("out of memory");
    for (int i = 0; !rc && i < f.n_meta; i++) {
        int over = 0;
        for (int j = 0; j < o->n_keys; j++) over |= !strcmp(o->keys[j], f.meta_keys[i]);
        if (!over) k[nk] = f.meta_keys[i], v[nk++] = f.meta_values[i];
    }
    for (int j = 0; !rc && j < o->n_keys; j++) k[nk] = o->keys[j], v[nk++] = o->vals[j];
    pe_tensor *outs = NULL;
    int n = 0;
    if (!rc && pe_attend(nk, k, v, f.n, f.t, &outs, &n, &err)) rc = cli_fail("%s", err.msg);
    const pe_tensor *pr = rc ? NULL : find(outs, n, "probs");
    if (!rc && (!pr || pr->ndim < 3)) rc = cli_fail("%s: the layer gave no probs", o->in);
    /* probs [B, H, T, Tk], or [H, T, Tk] for an unbatched case */
    int b4 = rc ? 0 : pr->ndim == 4;
    int64_t Bn = b4 ? pr->shape[0] : 1;
    if (!rc && o->batch >= Bn) rc = cli_fail("--batch %d: the case has %lld sequence(s)", o->batch, (long long)Bn);
    if (!rc) {
        int64_t H = pr->shape[b4], T = pr->shape[b4 + 1], Tk = pr->shape[b4 + 2];
        double *d = malloc(sizeof(double) * (size_t)(H * T * Tk));
        const float *src = (const float *)pr->data + (int64_t)o->batch * H * T * Tk;
        const char *meth = "?";
        for (int i = 0; i < nk; i++)
            if (!strcmp(k[i], "method")) meth = v[i];
        char title[200];
        snprintf(title, sizeof title, "%s: attention probabilities (%s, sequence %d)", meth, o->in, o->batch);
        if (!d) rc = cli_fail("out of memory");
        for (int64_t e = 0; !rc && e < H * T * Tk; e++) d[e] = src[e];
        if (!rc) rc = heat(o, title, Tk > T ? "key (memory, then segment)" : "key", "query", "probability", (int)H, T, Tk, d, 0, 0);
        free(d);
    }
    pe_tensors_free(outs, n);
    free(k), free(v);
    pe_st_free(&f);
    return rc;
}

int cli_plot(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc < 0) return 0; /* --help */
    const char **keys = o.keys, **vals = o.vals; /* o's may become the checkpoint's merged ones */
    pm_ckpt ck = {0};
    if (!rc && o.in && strcmp(o.kind, "attention") && strcmp(o.kind, "extrapolation"))
        rc = cli_fail("unexpected argument '%s' (only attention and extrapolation read a file; learned: --from FILE)", o.in);
    if (!rc && (o.checkpoint || o.input) && strcmp(o.kind, "attention"))
        rc = cli_fail("--checkpoint and --input apply to plot attention (other kinds read a checkpoint with --from FILE)");
    if (!rc && o.from && !strcmp(o.kind, "attention"))
        rc = cli_fail("plot attention reads a trained model with --checkpoint FILE --input TEXT (not --from)");
    if (!rc && o.from) { /* a trainer checkpoint: its method, width, heads and settings */
        pe_err err = {{0}};
        pm_opts p = pm_of(&o);
        if (pm_checkpoint(&p, &ck, &err)) rc = cli_fail("%s", err.msg);
        else if (ck.is) o.keys = ck.keys, o.vals = ck.vals, o.n_keys = p.n_keys, o.C = p.C, o.heads = p.heads, o.checkpoint_from = 1;
    }
    if (!rc && o.layer_set && !o.checkpoint && !ck.is)
        rc = cli_fail("--layer applies to a trainer checkpoint (--from FILE or plot attention --checkpoint FILE)");
    if (!rc) {
        if (!strcmp(o.kind, "encoding")) rc = plot_encoding(&o);
        else if (!strcmp(o.kind, "similarity")) rc = plot_similarity(&o);
        else if (!strcmp(o.kind, "axes")) rc = plot_axes(&o);
        else if (!strcmp(o.kind, "grid")) rc = plot_grid(&o);
        else if (!strcmp(o.kind, "relative")) rc = plot_relative(&o);
        else if (!strcmp(o.kind, "attention")) rc = plot_attention(&o);
        else if (!strcmp(o.kind, "extrapolation")) rc = plot_extrapolation(&o);
        else rc = cli_fail("unknown plot kind '%s' (encoding, similarity, relative, attention, extrapolation, axes, grid)", o.kind);
    }
    pm_checkpoint_free(&ck);
    free(keys), free(vals);
    return rc;
}
