/* posenc attend CASE.safetensors -o OUT.safetensors [--KEY VALUE ...]
 * Settings come from CASE's __metadata__; --KEY VALUE overrides one (--KEY alone: true). */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/io/safetensors.h"
#include "cli.h"
#include "../src/internal.h"

int cli_fail(const char *fmt, ...) {
    char raw[2048], line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    pe__one_line(line, sizeof line, raw);
    fprintf(stderr, "posenc: %s\n", line);
    return 2;
}

int cli_int(const char *flag, const char *text, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || *end || errno || v < lo || v > hi)
        return cli_fail("%s: '%s' is not a whole number in %lld .. %lld", flag, text ? text : "", lo, hi);
    *out = v;
    return 0;
}

int cli_merge_settings(const pe_st_file *f, int n_over, const char *const *over_k, const char *const *over_v,
                       const char **keys, const char **vals) {
    int nk = 0;
    for (int i = 0; i < f->n_meta; i++) {
        int overridden = 0;
        for (int j = 0; j < n_over; j++) overridden |= !strcmp(over_k[j], f->meta_keys[i]);
        if (!overridden) keys[nk] = f->meta_keys[i], vals[nk++] = f->meta_values[i];
    }
    for (int j = 0; j < n_over; j++) { /* the last of repeated overrides wins */
        int dup = 0;
        for (int i = j + 1; i < n_over; i++) dup |= !strcmp(over_k[i], over_k[j]);
        if (!dup) keys[nk] = over_k[j], vals[nk++] = over_v[j];
    }
    return nk;
}

int cli_attend(int argc, char **argv) {
    const char *in_path = NULL, *out_path = NULL;
    int n_over = 0;
    const char **over_k = calloc(argc + 1, sizeof(char *)), **over_v = calloc(argc + 1, sizeof(char *));
    if (!over_k || !over_v) return cli_fail("out of memory");
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            free(over_k), free(over_v);
            printf("usage: posenc attend CASE.safetensors -o OUT.safetensors [--KEY VALUE ...]\n"
                   "  One attention layer as the conformance contract defines it (doc/spec/conformance.md).\n"
                   "  CASE       settings in __metadata__, tensors by the contract's names: x, wq, wk, wv, wo\n"
                   "             (biases optional), positions, mems, attn_mask, dy and the method's tensors;\n"
                   "             or q, k, v (the projected form) with positions, key_positions, do\n"
                   "  -o OUT     y (or o), scores, probs, and with dy (do) every gradient\n"
                   "  --KEY V    overrides a setting of the case (posenc methods NAME lists a method's keys)\n");
            return 0;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc) rc = cli_fail("%s needs a file name", a);
            else out_path = argv[++i];
        } else if (!strncmp(a, "--", 2) && a[2]) {
            over_k[n_over] = a + 2;
            over_v[n_over++] = (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && strcmp(argv[i + 1], "-o"))
                                   ? argv[++i] : "true";
        } else if (a[0] == '-' && a[1]) {
            rc = cli_fail("unknown option '%s'", a);
        } else if (!in_path) {
            in_path = a;
        } else {
            rc = cli_fail("unexpected argument '%s'", a);
        }
    }
    if (!rc && (!in_path || !out_path))
        rc = cli_fail("usage: posenc attend CASE.safetensors -o OUT.safetensors [--KEY VALUE ...]");
    if (rc) {
        free(over_k), free(over_v);
        return rc;
    }

    pe_err err = {{0}};
    pe_st_file f;
    if (pe_st_read(in_path, &f, &err)) {
        free(over_k), free(over_v);
        return cli_fail("%s", err.msg);
    }
    /* metadata, then the overrides replacing keys of the same name */
    const char **keys = calloc(f.n_meta + n_over + 1, sizeof(char *));
    const char **vals = calloc(f.n_meta + n_over + 1, sizeof(char *));
    if (!keys || !vals) rc = cli_fail("out of memory");
    int nk = rc ? 0 : cli_merge_settings(&f, n_over, over_k, over_v, keys, vals);
    pe_tensor *outs = NULL;
    int n_outs = 0;
    if (!rc && pe_attend(nk, keys, vals, f.n, f.t, &outs, &n_outs, &err)) rc = cli_fail("%s", err.msg);
    if (!rc && pe_st_write(out_path, outs, n_outs, 0, NULL, NULL, &err)) rc = cli_fail("%s", err.msg);
    pe_tensors_free(outs, n_outs);
    free(keys), free(vals), free(over_k), free(over_v);
    pe_st_free(&f);
    return rc;
}
