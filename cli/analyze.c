/* posenc analyze [--methods LIST] [--from FILE [--layer L]] [-o FILE.csv] ...: the three
 * properties of "On Position Embeddings in BERT" (props.h, measured as doc/plots.md states)
 * for every method: absolute methods on the Gram matrix of their encoding P P^T (floater:
 * P_q P_k^T; complex: the real part of z_i conj(z_j)), the others on their scores with
 * q = k = ones (posmat.h), averaged over heads. --from FILE adds a row for the file: a
 * learned pos_table, or a trainer checkpoint's trained encoding (its absolute method, block
 * L). Prints a table; -o writes the same as CSV. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/output.h"
#include "cli.h"
#include "options.h"
#include "posmat.h"
#include "props.h"

typedef struct row {
    char method[64], matrix[32];
    pr_props p;
} row;

/* mean over heads, skipping undefined values */
static void mean_props(const pr_props *h, int64_t H, pr_props *o) {
    double *dst[5] = {&o->mono_fwd, &o->mono_bwd, &o->monotonicity, &o->translation, &o->symmetry};
    for (int f = 0; f < 5; f++) {
        double s = 0;
        int n = 0;
        for (int64_t k = 0; k < H; k++) {
            const double *src[5] = {&h[k].mono_fwd, &h[k].mono_bwd, &h[k].monotonicity, &h[k].translation, &h[k].symmetry};
            if (!isnan(*src[f])) s += *src[f], n++;
        }
        *dst[f] = n ? s / n : NAN;
    }
}

static const pe_tensor *find(const pe_tensor *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

static int analyze_one(const pm_opts *p, int cosine, row *r) {
    pe_err err = {{0}};
    int m = pm_method(p, &err);
    if (m < 0) return cli_fail("%s", err.msg);
    int64_t N = p->N;
    double *S = NULL;
    if (pe_method_family(m) == PE_FAMILY_ABSOLUTE) {
        pe_tensor *t = NULL;
        int n = 0;
        if (pm_encoding(p, &t, &n, &err)) return cli_fail("%s: %s", pe_method_name(m), err.msg);
        const pe_tensor *a = find(t, n, "P"), *b = a;
        float *ab = NULL;
        int64_t C = t[0].shape[1];
        if (find(t, n, "P_q")) a = find(t, n, "P_q"), b = find(t, n, "P_k"), snprintf(r->matrix, sizeof r->matrix, "P_q P_k^T");
        else snprintf(r->matrix, sizeof r->matrix, "P P^T");
        if (find(t, n, "P_re")) { /* [re, im] side by side: Re(z_i conj z_j) */
            const float *re = find(t, n, "P_re")->data, *im = find(t, n, "P_im")->data;
            ab = malloc(sizeof(float) * (size_t)(2 * N * C));
            for (int64_t i = 0; ab && i < N; i++)
                memcpy(ab + i * 2 * C, re + i * C, sizeof(float) * C), memcpy(ab + i * 2 * C + C, im + i * C, sizeof(float) * C);
            C *= 2;
            snprintf(r->matrix, sizeof r->matrix, "Re z z^H");
        }
        S = malloc(sizeof(double) * (size_t)(N * N));
        if (S && (ab || a)) pr_gram(ab ? ab : a->data, ab ? ab : b->data, N, C, cosine, S);
        if (cosine) strncat(r->matrix, " (cos)", sizeof r->matrix - strlen(r->matrix) - 1);
        free(ab);
        pe_tensors_free(t, n);
        if (!S) return cli_fail("out of memory");
        pr_measure(S, N, &r->p);
    } else {
        int64_t H = 0;
        if (pm_scores(p, 0, &S, &H, &err)) return cli_fail("%s: %s", pe_method_name(m), err.msg);
        pr_props *ph = malloc(sizeof(pr_props) * (size_t)H);
        if (!ph) return free(S), cli_fail("out of memory");
        for (int64_t h = 0; h < H; h++) pr_measure(S + h * N * N, N, &ph[h]);
        mean_props(ph, H, &r->p);
        free(ph);
        snprintf(r->matrix, sizeof r->matrix, "scores q=k=1");
    }
    free(S);
    return 0;
}

int cli_analyze(int argc, char **argv) {
    analyze_args a;
    arg_res r;
    ARGS_ANALYZE.init(&a);
    int rc = arg_parse(&ARGS_ANALYZE, argc, argv, &a, &r);
    if (rc) return rc < 0 ? 0 : rc;
    const char *methods = a.methods, *out = a.out, *from = a.from, *tensor = a.tensor;
    const int64_t N = a.length, C = a.width, heads = a.heads, seed = a.seed, layer = a.layer < 0 ? 0 : a.layer;
    const int layer_set = a.layer >= 0, cosine = a.cosine;
    /* the settings, with room for the method of each row */
    int nk = r.n_keys;
    const char **keys = calloc((size_t)nk + 2, sizeof(char *)), **vals = calloc((size_t)nk + 2, sizeof(char *));
    if (!keys || !vals) rc = cli_fail("out of memory");
    for (int i = 0; !rc && i < nk; i++) {
        if (!strcmp(r.keys[i], "method")) rc = cli_fail("analyze: --method: analyze takes --methods LIST");
        keys[i] = r.keys[i], vals[i] = r.vals[i];
    }
    arg_free(&r);
    /* the file: a trainer checkpoint's trained encoding (its method and settings), or learned's
     * table of a plain file */
    pm_ckpt ck = {0};
    pm_opts fp = {nk, keys, vals, N, C, heads, (uint64_t)seed, from, tensor, 0, layer};
    const char *file_method = "learned";
    pe_err err = {{0}};
    if (!rc && from && pm_checkpoint(&fp, &ck, &err)) rc = cli_fail("%s", err.msg);
    if (!rc && ck.is) file_method = ck.method;
    if (!rc && layer_set && !ck.is) rc = cli_fail("--layer applies to a trainer checkpoint (--from FILE)");
    /* the methods: every one, or the list; --from adds the file's */
    const char *list[PE_METHOD_COUNT + 1];
    char buf[1024] = "";
    int nm = 0, mi;
    if (!rc && methods) {
        snprintf(buf, sizeof buf, "%s", methods);
        for (char *s = strtok(buf, ","); s && !rc && nm < PE_METHOD_COUNT; s = strtok(NULL, ","))
            if (!(rc = arg_method("analyze", "--methods", s, &mi))) list[nm++] = s;
    } else if (!rc && !from) {
        for (int m = 0; m < PE_METHOD_COUNT; m++) list[nm++] = pe_method_name(m);
    }
    if (!rc && from && !methods) list[nm++] = file_method;
    row *rows = calloc((size_t)nm + 1, sizeof(row));
    if (!rc && !rows) rc = cli_fail("out of memory");
    for (int k = 0; !rc && k < nm; k++) {
        keys[nk] = "method", vals[nk] = list[k];
        int file = from && !strcmp(list[k], file_method);
        pm_opts p = {nk + 1, keys, vals, N, C, heads, (uint64_t)seed, file ? from : NULL, tensor, 0, 0};
        if (file && ck.is) p = fp;
        if (!file) snprintf(rows[k].method, sizeof rows[k].method, "%s", list[k]);
        else if (!layer) snprintf(rows[k].method, sizeof rows[k].method, "%s (file)", list[k]);
        else snprintf(rows[k].method, sizeof rows[k].method, "%s (file, block %lld)", list[k], (long long)layer);
        rc = analyze_one(&p, cosine, &rows[k]);
    }
    FILE *csv = NULL;
    pe_out o = {0};
    pe_err werr;
    if (!rc && out && pe_out_open(&o, out, &werr)) rc = cli_fail("%s", werr.msg);
    else if (!rc && out) csv = o.fp;
    if (!rc) {
        printf("%-16s %-9s %-16s %8s %8s %8s %8s %8s\n", "method", "family", "matrix", "monotone", "mono_fwd", "mono_bwd",
               "transl", "symmetry");
        if (csv) fprintf(csv, "method,family,matrix,positions,monotonicity,mono_fwd,mono_bwd,translation_invariance,symmetry\n");
        for (int k = 0; k < nm; k++) {
            const pr_props *q = &rows[k].p;
            const char *fam = pe_family_name(pe_method_family(pe_method_from_name(list[k])));
            printf("%-16s %-9s %-16s %8.3f %8.3f %8.3f %8.3f %8.3f\n", rows[k].method, fam, rows[k].matrix, q->monotonicity,
                   q->mono_fwd, q->mono_bwd, q->translation, q->symmetry);
            if (csv)
                fprintf(csv, "%s,%s,%s,%lld,%.6g,%.6g,%.6g,%.6g,%.6g\n", rows[k].method, fam, rows[k].matrix, (long long)N,
                        q->monotonicity, q->mono_fwd, q->mono_bwd, q->translation, q->symmetry);
        }
        if (csv && pe_out_commit(&o, &werr)) rc = cli_fail("%s", werr.msg);
        else if (csv) printf("wrote %s\n", out);
    } else if (csv) {
        pe_out_abort(&o);
    }
    pm_checkpoint_free(&ck);
    free(rows), free(keys), free(vals);
    return rc;
}
