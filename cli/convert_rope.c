/* posenc convert-rope IN.safetensors -o OUT.safetensors --to half|interleaved
 *        [--heads H] [--kv-heads K] [--rotary-dim R] [--q NAME] [--k NAME]
 * Moves a checkpoint between the RoPE layouts: permutes the q and k projection rows (and
 * their biases NAME with w -> b, e.g. wq -> bq, or q_proj.weight -> q_proj.bias); every other
 * tensor is copied. heads / kv_heads / rotary_dim default to the file's metadata (a
 * `posenc attend` case), whose rope_layout is updated so the case runs with the new layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/io/safetensors.h"
#include "cli.h"

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
    const char *in = NULL, *out = NULL, *to_s = NULL, *qn = "wq", *kn = "wk";
    int64_t heads = 0, kv = 0, rd = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: posenc convert-rope IN.safetensors -o OUT.safetensors --to half|interleaved [--heads H]\n"
                   "           [--kv-heads K] [--rotary-dim R] [--q NAME] [--k NAME]\n"
                   "  Permutes the q and k projection rows (and their biases) between the RoPE layouts: Meta's\n"
                   "  checkpoints are interleaved, HF Llama's half. Every other tensor is copied.\n"
                   "  --heads, --kv-heads, --rotary-dim   default to IN's metadata (a posenc attend case)\n"
                   "  --q, --k NAME   the projections to permute (default wq, wk; e.g. q_proj.weight)\n");
            return 0;
        }
        if (!strcmp(a, "-o") && has) out = argv[++i];
        else if (!strcmp(a, "--to") && has) to_s = argv[++i];
        else if ((!strcmp(a, "--heads") || !strcmp(a, "--kv-heads") || !strcmp(a, "--rotary-dim")) && has) {
            long long x;
            if (cli_int(a, argv[++i], 1, 1 << 20, &x)) return 2;
            *(a[2] == 'h' ? &heads : a[2] == 'k' ? &kv : &rd) = x;
        }
        else if (!strcmp(a, "--q") && has) qn = argv[++i];
        else if (!strcmp(a, "--k") && has) kn = argv[++i];
        else if (a[0] != '-' && !in) in = a;
        else return cli_fail("convert-rope: unexpected argument '%s'", a);
    }
    if (!in || !out || !to_s)
        return cli_fail("usage: posenc convert-rope IN.safetensors -o OUT.safetensors --to half|interleaved "
                        "[--heads H] [--kv-heads K] [--rotary-dim R] [--q NAME] [--k NAME]");
    int to = !strcmp(to_s, "half") ? PE_ROPE_HALF : !strcmp(to_s, "interleaved") ? PE_ROPE_INTERLEAVED : -1;
    if (to < 0) return cli_fail("convert-rope: --to must be half or interleaved, not '%s'", to_s);
    pe_st_file f;
    pe_err err;
    if (pe_st_read(in, &f, &err)) return cli_fail("%s", err.msg);
    const char *m;
    if (!heads && (m = meta(&f, "heads"))) heads = atoll(m);
    if (!kv && (m = meta(&f, "kv_heads"))) kv = atoll(m);
    if (!rd && (m = meta(&f, "rotary_dim"))) rd = atoll(m);
    if (!kv) kv = heads;
    int rc = 0;
    if (heads < 1 || kv < 1) rc = cli_fail("convert-rope: --heads is required (no 'heads' in the file's metadata)");
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
