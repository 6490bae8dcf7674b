/* posenc bench, the attention sections: the layer (attn), the projected form alone (core), the
 * fused core against sgemm (gemm), packed rows (packed) and denormals (denormal). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PE_BLAS
#include <cblas.h>
#endif

#include "../tools/layer.h"
#include "bench.h"
#include "cli.h"

/* ---- (b, c) attention layers ----------------------------------------------------------------- */

/* The benchmark's layers: 8 heads of 64 (C = 512), the method's defaults. */
static pe_status bench_layer(const char *method, int causal, pe_attention **att, pe_err *err) {
    pe_config cfg;
    pe_config_init(&cfg);
    const char *keys[] = {"method", "heads", "causal"}, *vals[] = {method, "8", causal ? "true" : "false"};
    *att = NULL;
    pe_status st = pe_config_set_all(&cfg, 3, keys, vals, err);
    return st ? st : pe_attention_init(att, &cfg, 512, err);
}

/* What pe_method_describe says of the method (zeros for an unknown name). */
static pe_method_info describe(const char *method) {
    pe_method_info mi = {0};
    pe_err err;
    const int m = pe_method_from_name(method);
    if (m < 0 || pe_method_describe(m, &mi, &err)) memset(&mi, 0, sizeof mi);
    return mi;
}

/* Whether the method refuses causal=false (cope): its full rows say so instead of failing. */
static int causal_only(const char *method) { return describe(method).causal_only; }

/* Whether the method reads token ids rather than x (complex): its rows say so instead of failing. */
static int reads_ids(const char *method) { return describe(method).token_ids; }

/* What PE_PATH_AUTO picks for the attn section's shape: "fused" or "T x T". */
static const char *auto_path(const char *method, int64_t T, int causal) {
    pe_attention *att;
    pe_err err;
    if (bench_layer(method, causal, &att, &err)) return "?";
    const int path = pe_attention_path(att, 1, T, T, 0);
    pe_attention_free(att);
    return path == PE_PATH_FUSED ? "fused" : "T x T";
}

/* One layer's forward and backward (median of reps after a warm-up that also gives the peak
 * memory; warm == 0: the first run is timed too): H=8, D=64, batch 1, random weights; alibi
 * with its reference slopes. */
static int attn_measure(const char *method, int64_t T, int causal, int reference, int reps, int warm,
                        double *f, double *b, double *mib) {
    const int64_t C = 512;
    pe_err err;
    pe_attention *att;
    pe_layer L;
    if (bench_layer(method, causal, &att, &err) || pe_layer_init(&L, att, T + 1, 3, &err)) {
        pe_attention_free(att);
        return cli_fail("bench: %s: %s", method, err.msg);
    }
    /* the method's tensors from its reference initialisation (FLOATER's ODE at the test layer's
     * uniform weights leaves the finite range within 512 positions); optional ones as the
     * method's defaults (ALiBi's reference slopes) */
    pe_rng rng = {11};
    for (int i = 0; i < L.np; i++) {
        const pe_param_spec *sp = &L.specs[i];
        int64_t n = 1;
        for (int d = 0; d < sp->ndim; d++) n *= sp->shape[d];
        if (sp->optional) L.w.param[i] = NULL, L.g.dparam[i] = NULL;
        else pe_init_draw(&sp->init, n, sp->ndim >= 2 ? sp->shape[sp->ndim - 1] : n, C, (float *)L.w.param[i], &rng);
    }
    float *x = bench_rand(T * C, 5), *dy = bench_rand(T * C, 6), *y = calloc((size_t)(T * C), 4), *dx = calloc((size_t)(T * C), 4);
    if (!x || !dy || !y || !dx) return cli_fail("bench: out of memory");
    memset(y, 0, sizeof(float) * T * C), memset(dx, 0, sizeof(float) * T * C);
    pe_layer_zero_grad(&L);
    pe_run_options run = bench_run;
    run.path = reference ? PE_PATH_REFERENCE : PE_PATH_FUSED;
    pe_attention_set_run_options(att, &run);
    bench_malloc_measure(1);
    int tracked = bench_peak_reset();
    double base = bench_status_mib("VmRSS"), fv[32], bv[32];
    int rc = 0;
    for (int r = warm ? -1 : 0; r < reps && !rc; r++) {
        double t0 = bench_now();
        rc = pe_attention_forward(att, &L.w, x, NULL, 0, NULL, 0, 1, T, y, NULL, NULL, &err);
        double t1 = bench_now();
        if (!rc) rc = pe_attention_backward(att, &L.w, dy, dx, &L.g, &err);
        double t2 = bench_now();
        if (r == (warm ? -1 : 0)) *mib = tracked ? bench_status_mib("VmHWM") - base : NAN, bench_malloc_measure(0);
        if (r >= 0) fv[r] = t1 - t0, bv[r] = t2 - t1;
    }
    if (rc) fprintf(stderr, "posenc: bench: %s: %s\n", method, err.msg);
    else *f = bench_median(fv, reps) * 1e3, *b = bench_median(bv, reps) * 1e3;
    free(x), free(dy), free(y), free(dx);
    pe_layer_free(&L);
    pe_attention_free(att);
    return rc ? 1 : 0;
}

static void attn_causal_table(const arow *rows, int nrows) {
    int header = 0;
    for (int r = 0; r < nrows; r++) {
        const arow *F = &rows[r], *Cz = NULL;
        if (F->causal) continue;
        for (int c = 0; c < nrows && !Cz; c++)
            if (rows[c].causal && rows[c].T == F->T && !strcmp(rows[c].method, F->method)) Cz = &rows[c];
        if (!Cz) continue;
        if (!header) {
            printf("## (b) causal over full attention: time of the causal layer / time of the full one, same method and T"
                   " (below 1: the masked work is skipped; about 0.5 is the ideal at large T)\n\n");
            printf("| method | T | fused fwd causal / full | fused bwd causal / full | PyTorch fwd causal / full |"
                   " PyTorch bwd causal / full |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
            header = 1;
        }
        printf("| %s | %lld |", F->method, (long long)F->T);
        bench_print_ratio2(Cz->f[FUSED], F->f[FUSED]), bench_print_ratio2(Cz->b[FUSED], F->b[FUSED]);
        bench_print_ratio2(Cz->f[TORCH], F->f[TORCH]), bench_print_ratio2(Cz->b[TORCH], F->b[TORCH]);
        printf("\n");
    }
    if (header) printf("\n");
}

int bench_attn(const bopts *o, torchp *tp, arow *rows, int *nrows) {
    printf("## (b) attention layer, H=8, D=64, batch 1, forward and backward (projections included), median of %d"
           " after a warm-up (T >= 8192: one cold run)\n\n",
           o->reps);
    printf("Speed-ups are the other path's time over the fused path's (higher is better for posenc); `auto`:"
           " the path PE_PATH_AUTO's cost model picks for the shape.\n\n");
    printf("| method | T | causal | auto | fwd fused ms | fwd ref ms | fwd PyTorch ms | fused vs ref | fused vs PyTorch |"
           " bwd fused ms | bwd ref ms | bwd PyTorch ms | fused vs ref | fused vs PyTorch |"
           " peak MiB fused / ref / PyTorch |\n");
    printf("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    fflush(stdout);
    *nrows = 0;
    for (int ti = 0; ti < o->nT; ti++)
        for (int mi = 0; mi < o->nm; mi++)
            for (int ci = 0; ci < o->ncausal; ci++) {
                if (!o->causal[ci] && causal_only(o->methods[mi])) {
                    printf("| %s | %lld | no | causal only | | | | | | | | | | | |\n", o->methods[mi], (long long)o->T[ti]);
                    continue;
                }
                if (reads_ids(o->methods[mi])) {
                    printf("| %s | %lld | %s | reads token ids, not x (pe_attention_forward_ids): not timed | | | | | | | | | | | |\n",
                           o->methods[mi], (long long)o->T[ti], o->causal[ci] ? "yes" : "no");
                    continue;
                }
                arow *R = &rows[(*nrows)++];
                *R = (arow){o->methods[mi], o->T[ti], o->causal[ci], {NAN, NAN, NAN}, {NAN, NAN, NAN}, {NAN, NAN, NAN}};
                const int big = R->T >= 8192, reps = big ? 1 : o->reps;
                if (attn_measure(R->method, R->T, R->causal, 0, reps, !big, &R->f[FUSED], &R->b[FUSED], &R->mib[FUSED]))
                    return 1;
                bench_gap();
                if (o->reference && R->T <= o->ref_max_T) {
                    if (attn_measure(R->method, R->T, R->causal, 1, reps, !big, &R->f[REF], &R->b[REF], &R->mib[REF])) return 1;
                    bench_gap();
                }
                if (o->torch && R->T <= o->torch_max_T) {
                    char req[128];
                    double v[3];
                    snprintf(req, sizeof req, "attn %s %lld %d %d", R->method, (long long)R->T, R->causal, reps);
                    if (torch_ask(tp, req, v, 3) == 3) R->f[TORCH] = v[0], R->b[TORCH] = v[1], R->mib[TORCH] = v[2];
                    bench_gap();
                }
                printf("| %s | %lld | %s | %s |", R->method, (long long)R->T, R->causal ? "yes" : "no",
                       auto_path(R->method, R->T, R->causal));
                bench_print_ms(R->f[FUSED]), bench_print_ms(R->f[REF]), bench_print_ms(R->f[TORCH]);
                bench_print_ratio(R->f[REF], R->f[FUSED]), bench_print_ratio(R->f[TORCH], R->f[FUSED]);
                bench_print_ms(R->b[FUSED]), bench_print_ms(R->b[REF]), bench_print_ms(R->b[TORCH]);
                bench_print_ratio(R->b[REF], R->b[FUSED]), bench_print_ratio(R->b[TORCH], R->b[FUSED]);
                printf(" %.0f / ", R->mib[FUSED]);
                printf(isnan(R->mib[REF]) ? "— / " : "%.0f / ", R->mib[REF]);
                printf(isnan(R->mib[TORCH]) ? "— |\n" : "%.0f |\n", R->mib[TORCH]);
                fflush(stdout);
            }
    printf("\n(c) peak MiB: growth of the resident set over one forward and backward (saved activations,"
           " scores, gradients, workspace; the layer's inputs and weights excluded). Reference path only to T=%lld,"
           " PyTorch only to T=%lld (their T x T buffers).\n\n",
           (long long)o->ref_max_T, (long long)o->torch_max_T);
    attn_causal_table(rows, *nrows);
    return 0;
}

/* ---- (i) the core alone: the projected form over q, k, v, no projections ------------------- */

/* Forward and backward of the projected form on the fused path (the core an engine calls):
 * B=1, H=8, D=64, T queries against T keys, for each of the n causal settings; the settings'
 * calls alternate, so a ratio between them sees the same state of the machine (its load moves
 * whole runs by 10-25%). Median ms of reps after a warm-up; x: with both settings, the median
 * of each round's ratio (the first setting's time over the second's), forward and backward;
 * why: a setting the method has no core for. */
static int core_measure(const char *method, int64_t T, int n, const int *causal, int reps, double *f, double *b,
                        double *x, const char **why) {
    const int64_t C = 512;
    pe_err err;
    pe_attention *att[2] = {NULL, NULL};
    pe_layer L[2];
    int rc = 0, made = 0;
    for (; made < n && !rc; made++) {
        why[made] = NULL, f[made] = b[made] = NAN;
        if (bench_layer(method, causal[made], &att[made], &err) || pe_layer_init(&L[made], att[made], T + 1, 3, &err)) {
            pe_attention_free(att[made]);
            rc = cli_fail("bench: core: %s: %s", method, err.msg);
            break;
        }
        pe_run_options run = bench_run;
        run.path = PE_PATH_FUSED, run.saved = PE_SAVED_INPUTS; /* as posenc.torch calls it: no copies of q, k, v */
        pe_attention_set_run_options(att[made], &run);
    }
    float *q = bench_rand(T * C, 31), *k = bench_rand(T * C, 32), *v = bench_rand(T * C, 33), *dout = bench_rand(T * C, 34);
    float *out = malloc(sizeof(float) * (size_t)(4 * T * C));
    if (!rc && (!q || !k || !v || !dout || !out)) rc = cli_fail("bench: out of memory");
    double fv[2][32], bv[2][32];
    int failed[2] = {0, 0};
    for (int r = -1; r < reps && !rc; r++)
        for (int c = 0; c < n && !rc; c++) {
            if (failed[c]) continue;
            double t0 = bench_now();
            pe_status st = pe_attention_forward_qkv(att[c], &L[c].w, q, k, v, 1, T, T, NULL, out, NULL, NULL, &err);
            double t1 = bench_now();
            if (!st) st = pe_attention_backward_qkv(att[c], &L[c].w, dout, out + T * C, out + 2 * T * C, out + 3 * T * C, &L[c].g, &err);
            if (st == PE_EINVAL && strstr(err.msg, "projected form")) /* an input-embedding method: no core of its own */
                why[c] = "no projected form", failed[c] = 1;
            else if (st)
                fprintf(stderr, "posenc: bench: core: %s: %s\n", method, err.msg), rc = 1;
            else if (r >= 0)
                fv[c][r] = t1 - t0, bv[c][r] = bench_now() - t1;
        }
    for (int c = 0; c < n && !rc; c++)
        if (!failed[c]) f[c] = bench_median(fv[c], reps) * 1e3, b[c] = bench_median(bv[c], reps) * 1e3;
    x[0] = x[1] = NAN;
    if (!rc && n == 2 && !failed[0] && !failed[1]) {
        for (int r = 0; r < reps; r++) fv[0][r] /= fv[1][r], bv[0][r] /= bv[1][r];
        x[0] = bench_median(fv[0], reps), x[1] = bench_median(bv[0], reps);
    }
    free(q), free(k), free(v), free(dout), free(out);
    for (int c = 0; c < made && c < n; c++) pe_layer_free(&L[c]), pe_attention_free(att[c]);
    return rc;
}

int bench_core(const bopts *o) {
    printf("## (i) the core alone: projected form (pe_attention_forward_qkv / backward_qkv, no projections), fused"
           " path, q, k, v read in place (saved = PE_SAVED_INPUTS), H=8, D=64, batch 1, T queries against T keys, median"
           " of %d after a warm-up, the causal settings' calls alternating\n\n", o->reps);
    printf("| method | T | causal | fwd ms | bwd ms | fwd GFLOP/s | bwd GFLOP/s | full over causal (fwd / bwd) |\n"
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < o->nT; ti++)
        for (int mi = 0; mi < o->nm; mi++) {
            const int64_t T = o->T[ti];
            const int reps = T >= 8192 ? 1 : o->reps;
            int causal[2], n = 0;
            const char *why[2] = {NULL, NULL};
            double f[2] = {NAN, NAN}, b[2] = {NAN, NAN}, x[2] = {NAN, NAN};
            for (int ci = 0; ci < o->ncausal; ci++)
                if (o->causal[ci] || !causal_only(o->methods[mi])) causal[n++] = o->causal[ci];
            if (n && core_measure(o->methods[mi], T, n, causal, reps, f, b, x, why)) return 1;
            if (n == 2 && causal[0]) x[0] = 1 / x[0], x[1] = 1 / x[1]; /* full over causal */
            for (int ci = 0, c = 0; ci < o->ncausal; ci++) {
                printf("| %s | %lld | %s |", o->methods[mi], (long long)T, o->causal[ci] ? "yes" : "no");
                if (!o->causal[ci] && causal_only(o->methods[mi])) {
                    printf(" causal only | | | | |\n");
                    continue;
                }
                if (why[c]) {
                    printf(" %s | | | | |\n", why[c++]);
                    continue;
                }
                /* the visible (query, key) pairs: all of them, or the lower triangle */
                const double pairs = o->causal[ci] ? 0.5 * (double)T * (double)(T + 1) : (double)T * (double)T;
                const double fl = 4.0 * pairs * 64 * 8;
                printf(" %.2f | %.2f | %.1f | %.1f |", f[c], b[c], fl / (f[c] * 1e-3) / 1e9, 2.5 * fl / (b[c] * 1e-3) / 1e9);
                if (o->causal[ci] && n == 2) printf(" %.2f / %.2f |\n", x[0], x[1]);
                else printf(" |\n");
                c++;
            }
            fflush(stdout);
            bench_gap();
        }
    printf("\nFlops count the visible (query, key) pairs: 4 D H per pair forward (q k^T and p v), 10 D H backward (s"
           " recomputed, dv, dp, dq, dk); exp, softmax, the method's terms and packing are not counted. Full over causal:"
           " the median of the rounds' ratios, the two settings' calls alternating within a round (causal attention"
           " visits about half the tiles: at most about 2x).\n\n");
    return 0;
}

/* ---- (f) packed rows: documents in one row with a block-diagonal attn_mask ------------------- */

/* Forward and backward of the projected form (rope, causal, H=8, D=64) over n documents of
 * T / n tokens: packed in one row of T (positions restarting, block-diagonal mask) when
 * packed, else one call per document; n = 1: one document of T. Median ms of reps. */
static int packed_measure(int64_t T, int n, int packed, int reps, double *f, double *b) {
    const int64_t C = 512, L = T / n, R = packed ? T : L;
    pe_err err;
    pe_attention *att;
    if (bench_layer("rope", 1, &att, &err)) return cli_fail("bench: packed: %s", err.msg);
    float *q = bench_rand(T * C, 11), *k = bench_rand(T * C, 12), *v = bench_rand(T * C, 13), *dout = bench_rand(T * C, 14);
    float *o = malloc(sizeof(float) * T * C), *g = malloc(sizeof(float) * 3 * T * C);
    int64_t *pos = malloc(sizeof(int64_t) * T);
    uint8_t *mask = packed && n > 1 ? malloc((size_t)(T * T)) : NULL;
    if (!q || !k || !v || !dout || !o || !g || !pos || (packed && n > 1 && !mask)) return cli_fail("bench: out of memory");
    for (int64_t t = 0; t < T; t++) pos[t] = t % L;
    for (int64_t i = 0; mask && i < T; i++)
        for (int64_t j = 0; j < T; j++) mask[i * T + j] = i / L == j / L;
    pe_positions at = {.pos = pos, .key_pos = pos, .mask = mask};
    double fv[32], bv[32];
    int rc = 0;
    for (int r = -1; r < reps && !rc; r++) {
        double tf = 0, tb = 0;
        for (int64_t d = 0; d < T / R && !rc; d++) { /* one call, or one per document */
            const int64_t o0 = d * R * C;
            double t0 = bench_now();
            rc = pe_attention_forward_qkv(att, NULL, q + o0, k + o0, v + o0, 1, R, R, &at, o + o0, NULL, NULL, &err);
            double t1 = bench_now();
            if (!rc) rc = pe_attention_backward_qkv(att, NULL, dout + o0, g, g + T * C, g + 2 * T * C, NULL, &err);
            tf += t1 - t0, tb += bench_now() - t1;
        }
        if (r >= 0) fv[r] = tf, bv[r] = tb;
    }
    if (rc) fprintf(stderr, "posenc: bench: packed: %s\n", err.msg);
    else *f = bench_median(fv, reps) * 1e3, *b = bench_median(bv, reps) * 1e3;
    free(q), free(k), free(v), free(dout), free(o), free(g), free(pos), free(mask);
    pe_attention_free(att);
    return rc ? 1 : 0;
}

int bench_packed(const bopts *o) {
    printf("## (f) packed rows: 8 documents in one row (positions restart, block-diagonal attn_mask), rope,"
           " causal, H=8, D=64, projected form forward and backward, fused path, median of %d\n\n", o->reps);
    printf("| T | one document of T: fwd / bwd ms | 8 documents of T/8 packed | 8 documents, one call each |"
           " packed vs one document (fwd / bwd) | packed vs separate calls |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < o->nT; ti++) {
        const int64_t T = o->T[ti];
        if (T % 8 || T > 8192) continue;
        double f[3], b[3];
        if (packed_measure(T, 1, 1, o->reps, &f[0], &b[0]) || packed_measure(T, 8, 1, o->reps, &f[1], &b[1]) ||
            packed_measure(T, 8, 0, o->reps, &f[2], &b[2]))
            return 1;
        printf("| %lld | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.2fx / %.2fx | %.2fx / %.2fx |\n", (long long)T, f[0],
               b[0], f[1], b[1], f[2], b[2], f[1] / f[0], b[1] / b[0], f[1] / f[2], b[1] / b[2]);
        fflush(stdout);
        bench_gap();
    }
    printf("\nTiles the mask leaves no key in are skipped, so a packed row costs about what its documents cost"
           " (8 documents of T/8: 1/8 of the causal work of one document of T), plus one pass over the"
           " mask.\n\n");
    return 0;
}


/* ---- (d) denormals ----------------------------------------------------------------------------- */
int bench_denormal(const bopts *o, double res[4][2]) {
    static const char *const name[4] = {"exp clamped to 0 below -87, FTZ/DAZ (default)", "exp clamped, no FTZ/DAZ",
                                        "exp underflows gradually, FTZ/DAZ", "exp underflows gradually, no FTZ/DAZ (IEEE)"};
    const int64_t T = o->denormal_T;
    double mib;
    printf("## (d) denormals: alibi, T=%lld, not causal (far logits reach exp(-1000)), fused path\n\n", (long long)T);
    printf("| exp and MXCSR | fwd ms | bwd ms | fwd x default | bwd x default |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int v = 0; v < 4; v++) {
        bench_run.keep_mxcsr = v & 1, bench_run.denormals = v >> 1;
        int rc = attn_measure("alibi", T, 0, 0, o->reps, 1, &res[v][0], &res[v][1], &mib);
        bench_run.keep_mxcsr = bench_run.denormals = 0;
        if (rc) return 1;
        printf("| %s | %.1f | %.1f | %.2f | %.2f |\n", name[v], res[v][0], res[v][1], res[v][0] / res[0][0],
               res[v][1] / res[0][1]);
        bench_gap();
    }
    printf("\n");
    return 0;
}


/* ---- (e) GEMM ceiling against the fused core ---------------------------------------------------- */
/* One head's q k^T in BLAS sgemm against the fused core (`none`, the projected form on the fused
 * path, not causal), both at 1 thread and every thread, GFLOP/s. */
int bench_gemm(const bopts *o, gemm_res *G) {
    const int64_t T = o->gemm_T, H = 8, D = 64, C = H * D;
    pe_err err;
    pe_attention *att;
    if (bench_layer("none", 0, &att, &err)) return cli_fail("bench: %s", err.msg);
    float *q = bench_rand(T * C, 7), *k = bench_rand(T * C, 8), *v = bench_rand(T * C, 9), *dout = bench_rand(T * C, 10);
    float *out = calloc((size_t)(T * C), 4), *g = calloc((size_t)(3 * T * C), 4), *sc = calloc((size_t)(T * T), 4);
    if (!q || !k || !v || !dout || !out || !g || !sc) return cli_fail("bench: out of memory");
    const double fl = 4.0 * T * T * D * H; /* forward: two products of 2 T T D per head */
    const int reps = o->reps < 3 ? 3 : o->reps;
    double tv[32];
    int rc = 0;
    G->threads[0] = 1, G->threads[1] = bench_threads();
    for (int ti = 0; ti < 2 && !rc; ti++) {
        G->sgemm[ti] = NAN;
#ifdef PE_BLAS
        openblas_set_num_threads(G->threads[ti]);
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, 1.0f, q, (int)C, k, (int)C,
                        0.0f, sc, (int)T); /* one head's q k^T */
            tv[r] = bench_now() - t0;
        }
        G->sgemm[ti] = 2.0 * T * T * D / bench_median(tv, reps) / 1e9;
        bench_gap();
#endif
        pe_run_options run = bench_run;
        run.threads = G->threads[ti], run.path = PE_PATH_FUSED, run.saved = PE_SAVED_INPUTS;
        pe_attention_set_run_options(att, &run);
        for (int r = -1; r < reps && !rc; r++) {
            double t0 = bench_now();
            rc = pe_attention_forward_qkv(att, NULL, q, k, v, 1, T, T, NULL, out, NULL, NULL, &err);
            if (r >= 0) tv[r] = bench_now() - t0;
        }
        if (!rc) G->fwd[ti] = fl / bench_median(tv, reps) / 1e9;
        for (int r = 0; r < reps && !rc; r++) {
            double t0 = bench_now();
            rc = pe_attention_backward_qkv(att, NULL, dout, g, g + T * C, g + 2 * T * C, NULL, &err);
            tv[r] = bench_now() - t0;
        }
        if (!rc) G->bwd[ti] = 2.5 * fl / bench_median(tv, reps) / 1e9;
        bench_gap();
    }
#ifdef PE_BLAS
    openblas_set_num_threads(G->threads[1]);
#endif
    free(q), free(k), free(v), free(dout), free(out), free(g), free(sc);
    pe_attention_free(att);
    if (rc) return cli_fail("bench: gemm: %s", err.msg);
    printf("## (e) GEMM ceiling and the fused attention core: T=%lld, H=8, D=64, not causal, GFLOP/s\n\n", (long long)T);
    printf("| threads | BLAS sgemm %lldx%lldx64 | fused forward (%s kernels) | x sgemm | fused backward | x sgemm |\n",
           (long long)T, (long long)T, pe_run_kernels(&bench_run));
    printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < 2; ti++) {
        printf("| %d |", G->threads[ti]);
        bench_print_ms(G->sgemm[ti]);
        printf(" %.1f |", G->fwd[ti]);
        bench_print_ratio2(G->fwd[ti], G->sgemm[ti]);
        printf(" %.1f |", G->bwd[ti]);
        bench_print_ratio2(G->bwd[ti], G->sgemm[ti]);
        printf("\n");
    }
    printf("\nThe core is the projected form on the fused path (q, k, v read in place, as posenc.torch calls it;"
           " its finiteness checks included). Forward counts 4 T^2 D H flops (q k^T and p v), backward 10 T^2 D H (s recomputed, dv, dp,"
           " dq, dk); exp, softmax and packing are not counted.%s\n\n",
#ifdef PE_BLAS
           ""
#else
           " Built without BLAS: no sgemm column."
#endif
    );
    return 0;
}
