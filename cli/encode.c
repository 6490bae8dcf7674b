/* posenc encode [IN.safetensors] -o OUT.safetensors [--length N | --positions P0,P1,...] [--width C]
 *               [--KEY VALUE ...]
 * Writes the absolute encoding of an absolute method (pe_encode): P [T, C] for sinusoidal and
 * learned, P_q P_k P_v for floater, P_re P_im for complex, plus the positions, with the
 * settings as metadata. Settings and tensors (pos_table, floater_*, amp freq phase, ids,
 * positions) come from IN when given (a conformance case works: its other tensors are
 * ignored), settings overridden by --KEY VALUE; --length / --positions replace IN's positions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/safetensors.h"
#include "cli.h"
#include "options.h"

/* Parses "0,2,5" into a new array; returns the count, or -1 on a bad list. */
static int64_t parse_list(const char *s, int64_t **out) {
    int64_t n = 1, k = 0;
    for (const char *c = s; *c; c++) n += *c == ',';
    int64_t *v = malloc(sizeof(int64_t) * n);
    if (!v) return -1;
    for (const char *c = s;; c++) {
        char *end;
        errno = 0;
        long long x = strtoll(c, &end, 10);
        if (end == c || errno || (*end && *end != ',')) {
            free(v);
            return -1;
        }
        v[k++] = x;
        if (!*end) break;
        c = end;
    }
    *out = v;
    return k;
}

int cli_encode(int argc, char **argv) {
    encode_args a;
    arg_res r;
    ARGS_ENCODE.init(&a);
    int rc = arg_parse(&ARGS_ENCODE, argc, argv, &a, &r);
    if (rc) return rc < 0 ? 0 : rc;
    const char *in_path = a.in, *out_path = a.out, *list = a.positions;
    const int n_over = r.n_keys;
    const char **over_k = r.keys, **over_v = r.vals;
    if (a.length && list) rc = cli_fail("encode: give --length or --positions, not both");

    /* the positions asked for on the command line */
    int64_t *pos = NULL, T = 0, C = a.width;
    if (!rc && a.length) {
        T = a.length;
        if (!(pos = malloc(sizeof(int64_t) * T))) rc = cli_fail("out of memory");
        else
            for (int64_t t = 0; t < T; t++) pos[t] = t;
    }
    if (!rc && list && (T = parse_list(list, &pos)) < 0)
        rc = cli_fail("encode: --positions: '%s' is not a comma-separated list of integers", list);
    if (!rc && T * C > ((int64_t)1 << 28))
        rc = cli_fail("encode: --length %lld x --width %lld: more than 2^28 values to encode", (long long)T, (long long)C);

    pe_err err = {{0}};
    pe_st_file f = {0};
    if (!rc && in_path && pe_st_read(in_path, &f, &err)) rc = cli_fail("%s", err.msg);
    /* settings: IN's metadata, then the overrides; tensors: IN's, positions replaced */
    const char **keys = calloc(f.n_meta + n_over + 1, sizeof(char *));
    const char **vals = calloc(f.n_meta + n_over + 1, sizeof(char *));
    pe_tensor *in = calloc(f.n + 1, sizeof(pe_tensor));
    int nk = 0, n_in = 0;
    if (!rc && (!keys || !vals || !in)) rc = cli_fail("out of memory");
    if (!rc) nk = cli_merge_settings(&f, n_over, over_k, over_v, keys, vals);
    int has_ids = 0, has_pos = 0;
    for (int i = 0; !rc && i < f.n; i++) {
        if (pos && !strcmp(f.t[i].name, "positions")) continue;
        has_ids |= !strcmp(f.t[i].name, "ids");
        has_pos |= !strcmp(f.t[i].name, "positions");
        in[n_in++] = f.t[i];
    }
    if (!rc && pos) {
        pe_tensor *p = &in[n_in++];
        snprintf(p->name, sizeof p->name, "positions");
        p->dtype = PE_I64, p->ndim = 1, p->shape[0] = T, p->data = pos;
    }
    if (!rc && !pos && !has_pos && !has_ids)
        rc = cli_fail("encode: no positions to encode: give --length N or --positions P0,P1,... (or IN with a 'positions' tensor)");

    pe_tensor *outs = NULL;
    int n_outs = 0;
    if (!rc && pe_encode(nk, keys, vals, C, n_in, in, &outs, &n_outs, &err)) rc = cli_fail("%s", err.msg);
    if (!rc && pe_st_write(out_path, outs, n_outs, nk, keys, vals, &err)) rc = cli_fail("%s", err.msg);
    pe_tensors_free(outs, n_outs);
    free(keys), free(vals), free(in), free(pos);
    arg_free(&r);
    if (in_path) pe_st_free(&f);
    return rc;
}
