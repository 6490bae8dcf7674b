/* posenc attend CASE.safetensors -o OUT.safetensors [--KEY VALUE ...]
 * Settings come from CASE's __metadata__; --KEY VALUE overrides one (--KEY alone: true). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/safetensors.h"
#include "cli.h"
#include "options.h"

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
    attend_args a;
    arg_res r;
    ARGS_ATTEND.init(&a);
    int rc = arg_parse(&ARGS_ATTEND, argc, argv, &a, &r);
    if (rc) return rc < 0 ? 0 : rc;
    const char *in_path = a.in, *out_path = a.out;
    const int n_over = r.n_keys;
    const char **over_k = r.keys, **over_v = r.vals;

    pe_err err = {{0}};
    pe_st_file f;
    if (pe_st_read(in_path, &f, &err)) {
        arg_free(&r);
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
    free(keys), free(vals);
    arg_free(&r);
    pe_st_free(&f);
    return rc;
}
