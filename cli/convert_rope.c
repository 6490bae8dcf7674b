/* posenc convert-rope IN.safetensors -o OUT.safetensors --to half|interleaved
 *        [--heads H] [--kv-heads K] [--rotary-dim R] [--q NAME] [--k NAME]
 * Moves a checkpoint between the RoPE layouts: permutes the q and k projection rows (and
 * their biases NAME with w -> b, e.g. wq -> bq, or q_proj.weight -> q_proj.bias); every other
 * tensor is copied. heads / kv_heads / rotary_dim default to the file's metadata (a
 * `posenc attend` case), whose rope_layout is updated so the case runs with the new layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/safetensors.h"
#include "cli.h"
#include "options.h"

static pe_tensor *find(pe_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

static const char *meta(const pe_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return NULL;
}

/* The bias beside a weight: wq -> bq, x.weight -> x.bias. */
static void bias_name(char *out, size_t len, const char *w) {
    size_t n = strlen(w);
    if (n > 7 && !strcmp(w + n - 7, ".weight")) snprintf(out, len, "%.*s.bias", (int)(n - 7), w);
    else if (w[0] == 'w') snprintf(out, len, "b%s", w + 1);
    else snprintf(out, len, "%s_bias", w);
}

static int permute(pe_st_file *f, const char *name, int64_t heads, int64_t rd, int to, int required) {
    pe_tensor *w = find(f, name);
    if (!w) return required ? cli_fail("convert-rope: tensor '%s' is missing", name) : 0;
    if (w->dtype != PE_F32 || w->ndim < 1 || w->ndim > 2)
        return cli_fail("convert-rope: tensor '%s' must be F32 [rows, cols] or [rows]", name);
    int64_t rows = w->shape[0], cols = w->ndim == 2 ? w->shape[1] : 1;
    if (rows % heads) return cli_fail("convert-rope: tensor '%s' has %lld rows, not a multiple of %lld heads", name,
                                      (long long)rows, (long long)heads);
    int64_t D = rows / heads;
    pe_err err;
    if (pe_rope_permute(w->data, heads, D, rd ? rd : D, cols, to, &err)) return cli_fail("convert-rope: %s: %s", name, err.msg);
    return 0;
}

int cli_convert_rope(int argc, char **argv) {
    convert_rope_args a;
    int rc;
    if (arg_start(&ARGS_CONVERT_ROPE, argc, argv, &a, &rc)) return rc;
    const char *in = a.in, *out = a.out, *to_s = a.to, *qn = a.q, *kn = a.k;
    int64_t heads = a.heads, kv = a.kv_heads, rd = a.rotary_dim;
    const int to = !strcmp(to_s, "half") ? PE_ROPE_HALF : PE_ROPE_INTERLEAVED;
    pe_st_file f;
    pe_err err;
    if (pe_st_read(in, &f, &err)) return cli_fail("%s", err.msg);
    /* what the command line leaves open, from IN's metadata (checked as the flags are) */
    static const char *const KEYS[3] = {"heads", "kv_heads", "rotary_dim"};
    int64_t *dst[3] = {&heads, &kv, &rd};
    for (int i = 0; i < 3 && !rc; i++) {
        const char *m = meta(&f, KEYS[i]);
        long long x;
        char what[64];
        snprintf(what, sizeof what, "convert-rope: IN's %s", KEYS[i]);
        if (!*dst[i] && m && !(rc = cli_int(what, m, 1, 1 << 20, &x))) *dst[i] = x;
    }
    if (!kv) kv = heads;
    if (!rc && (heads < 1 || kv < 1)) rc = cli_fail("convert-rope: --heads is required (no 'heads' in the file's metadata)");
    const char *method = meta(&f, "method"), *now = meta(&f, "rope_layout");
    if (!now && method && !strcmp(method, "rope")) now = "half"; /* the contract's default */
    if (!rc && now && !strcmp(now, to_s)) rc = cli_fail("convert-rope: the file's rope_layout is already %s", to_s);
    char qb[160], kb[160];
    bias_name(qb, sizeof qb, qn), bias_name(kb, sizeof kb, kn);
    if (!rc) rc = permute(&f, qn, heads, rd, to, 1);
    if (!rc) rc = permute(&f, kn, kv, rd, to, 1);
    if (!rc) rc = permute(&f, qb, heads, rd, to, 0);
    if (!rc) rc = permute(&f, kb, kv, rd, to, 0);
    /* an attend case: record the new layout so it runs as before */
    const char **mk = calloc(f.n_meta + 1, sizeof(char *)), **mv = calloc(f.n_meta + 1, sizeof(char *));
    int nm = 0, set = 0;
    for (int i = 0; !rc && i < f.n_meta; i++) {
        mk[nm] = f.meta_keys[i];
        mv[nm++] = strcmp(f.meta_keys[i], "rope_layout") ? f.meta_values[i] : (set = 1, to_s);
    }
    if (!rc && !set && method && !strcmp(method, "rope")) mk[nm] = "rope_layout", mv[nm++] = to_s;
    if (!rc && pe_st_write(out, f.t, f.n, nm, mk, mv, &err)) rc = cli_fail("%s", err.msg);
    free(mk), free(mv);
    pe_st_free(&f);
    return rc;
}
