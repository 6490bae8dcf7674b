/* libFuzzer: the fused path against its oracle, the reference path. Bytes: a header (method,
 * form, shape, causal, mask, padded rows, gapped positions, kernels, threads: the first 8
 * bytes) then "key=value" lines that set more (or override the method). One random layer runs
 * forward and backward twice, once with PE_PATH_FUSED (the fused kernels wherever the method
 * allows them) and once on the reference path; both must succeed or both fail, and y (o), dx
 * (dq, dk, dv) and every tensor's gradient agree to float32 rounding, scaled by the logits'
 * size as tests/unit/test_fused.c does. A result that is not finite must have been an error.
 * Methods without a fused path (cope, xl, deberta, tupe) run the same comparison, which then
 * checks their forward and backward for errors, finiteness and determinism. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/layer.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a broken promise: which one, then the crash libFuzzer keeps */
#define BROKEN() (fprintf(stderr, "%s:%d: a check failed\n", __FILE__, __LINE__), abort())

/* the methods the fused path computes, then (the fused path falls back to the reference one for
 * them: the two runs must agree as a deterministic path agrees with itself) those it does not,
 * for their forward and backward under every shape */
static const char *const METHODS[] = {"none", "rope", "xpos", "alibi", "t5", "kerple", "fire", "sinusoidal", "learned",
                                      "floater", "shaw", "huang1", "huang2", "huang3", "huang4", "fope", "pope",
                                      "data_alibi", "cope", "xl", "deberta", "tupe"};
enum { NMETHOD = sizeof METHODS / sizeof METHODS[0], HEADER = 8, MAXB = 2 };

static double maxabs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(a[i])) m = fmax(m, fabs(a[i]));
    return m;
}

static void close_or_trap(const char *what, const float *got, const float *want, int64_t n, double atol, double rtol) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]) || !(fabs((double)got[i] - want[i]) <= atol + rtol * fabs(want[i]))) {
            fprintf(stderr, "%s[%lld]: fused %.9g, reference %.9g (atol %g, rtol %g)\n", what, (long long)i, got[i],
                    want[i], atol, rtol);
            BROKEN();
        }
}

typedef struct shape {
    int64_t B, T, Tk, H, kv, D;
    int projected, use_mask, use_lens, gapped;
} shape;

enum { Y, DX, DK, DV, GRADS, NOUT }; /* y (o), dx (dq), dk, dv, the layer's gradient block */
typedef struct run_out {
    pe_status st;
    float *t[NOUT];
} run_out;

static void run(pe_attention *att, pe_layer *L, const shape *s, const float *in, const float *dy, const int64_t *pos,
                const int64_t *kpos, const uint8_t *mask, const int64_t *ql, const int64_t *kl, float *scores,
                run_out *r) {
    const int64_t C = s->H * s->D, Ckv = s->kv * s->D, nq = s->B * s->T * C, nk = s->B * s->Tk * Ckv;
    pe_err err;
    r->t[Y] = calloc((size_t)nq, sizeof(float)), r->t[DX] = calloc((size_t)nq, sizeof(float));
    r->t[DK] = calloc((size_t)nk + 1, sizeof(float)), r->t[DV] = calloc((size_t)nk + 1, sizeof(float));
    r->t[GRADS] = malloc(sizeof(float) * L->n);
    pe_layer_zero_grad(L);
    if (s->projected) {
        const float *q = in, *k = in + nq, *v = k + nk;
        pe_positions at = {.pos = pos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .mask = mask,
                           .mask_batched = 1, .q_lens = ql, .k_lens = kl};
        r->st = pe_attention_forward_qkv(att, &L->w, q, k, v, s->B, s->T, s->Tk, &at, r->t[Y], scores, NULL, &err);
        if (!r->st) r->st = pe_attention_backward_qkv(att, &L->w, dy, r->t[DX], r->t[DK], r->t[DV], &L->g, &err);
    } else {
        pe_positions at = {.pos = pos, .pos_batched = 1, .mask = mask, .mask_batched = 1};
        r->st = pe_attention_layer_forward(att, &L->w, in, NULL, 0, s->B, s->T, &at, r->t[Y], scores, NULL, &err);
        if (!r->st) r->st = pe_attention_backward(att, &L->w, dy, r->t[DX], &L->g, &err);
    }
    memcpy(r->t[GRADS], L->block + L->n, sizeof(float) * L->n);
}

static void run_free(run_out *r) {
    for (int t = 0; t < NOUT; t++) free(r->t[t]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < HEADER || size > HEADER + 2048) return 0;
    shape s = {.B = 1 + data[1] % MAXB, .projected = (data[1] >> 1) & 1, .use_mask = (data[1] >> 2) & 1,
               .use_lens = (data[1] >> 3) & 1, .gapped = (data[1] >> 4) & 1};
    const int causal = (data[1] >> 5) & 1;
    s.T = 1 + data[2] % 80;
    s.Tk = s.projected ? s.T + data[3] % 48 : s.T;
    s.H = 1 + data[4] % 4;
    s.kv = (data[4] >> 2) & 1 && s.H % 2 == 0 ? s.H / 2 : s.H;
    s.D = 1 + data[5] % 32;
    /* the settings: the header's method, causal, heads, then the text's lines */
    char *text = malloc(size - HEADER + 1);
    memcpy(text, data + HEADER, size - HEADER);
    text[size - HEADER] = 0;
    char hv[24], kvv[24];
    snprintf(hv, sizeof hv, "%lld", (long long)s.H), snprintf(kvv, sizeof kvv, "%lld", (long long)s.kv);
    const char *keys[FUZZ_MAX_SETTINGS] = {"method", "causal", "heads", "kv_heads"}, *vals[FUZZ_MAX_SETTINGS] = {METHODS[data[0] % NMETHOD],
                                                                                   causal ? "true" : "false", hv, kvv};
    const int n = fuzz_settings(text, keys, vals, 4);
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    pe_layer L = {0};
    pe_config_init(&cfg);
    if (pe_config_set_all(&cfg, n, keys, vals, &err) || pe_attention_init(&att, &cfg, s.H * s.D, &err) ||
        pe_attention_config(att)->heads != s.H || pe_attention_config(att)->kv_heads != s.kv ||
        pe_layer_init(&L, att, 256, data[6], &err)) {
        pe_attention_free(att);
        free(text);
        return 0;
    }
    if (pe_attention_config(att)->method == PE_METHOD_FLOATER) { /* its ODE runs to every position: short ones */
        const int64_t extra = (s.Tk - s.T) % 4; /* keys past the queries, >= 0 */
        s.T = 1 + (s.T - 1) % 8, s.Tk = s.T + extra, s.gapped = 0;
    }
    const int64_t C = s.H * s.D, Ckv = s.kv * s.D, nq = s.B * s.T * C, nk = s.B * s.Tk * Ckv;
    pe_rng rng = {data[6] + 1u};
    const int64_t nin = s.projected ? nq + 2 * nk : nq;
    float *in = malloc(sizeof(float) * (size_t)nin), *dy = malloc(sizeof(float) * (size_t)nq);
    for (int64_t i = 0; i < nin; i++) in[i] = 2 * pe_rng_uniform(&rng) - 1;
    for (int64_t i = 0; i < nq; i++) dy[i] = 2 * pe_rng_uniform(&rng) - 1;
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(s.B * s.T)), *kpos = malloc(sizeof(int64_t) * (size_t)(s.B * s.Tk));
    int64_t ql[MAXB], kl[MAXB];
    for (int64_t b = 0; b < s.B; b++) {
        /* queries the last T of the keys' positions, gapped or not */
        for (int64_t u = 0, p = 3 * b; u < s.Tk; u++, p += s.gapped ? 1 + (u * 7 + b) % 4 : 1) kpos[b * s.Tk + u] = p;
        for (int64_t t = 0; t < s.T; t++) pos[b * s.T + t] = s.projected ? kpos[b * s.Tk + s.Tk - s.T + t] : kpos[b * s.Tk + t];
        kl[b] = s.Tk - (b ? data[7] % s.Tk : 0);
        ql[b] = kl[b] < s.T ? kl[b] : s.T - (b ? (data[7] >> 4) % s.T : 0);
        if (ql[b] > kl[b]) ql[b] = kl[b];
    }
    uint8_t *mask = NULL;
    if (s.use_mask) { /* a band and a stripe: rows keep the diagonal's key */
        mask = malloc((size_t)(s.B * s.T * s.Tk));
        for (int64_t b = 0; b < s.B; b++)
            for (int64_t i = 0; i < s.T; i++)
                for (int64_t j = 0; j < s.Tk; j++)
                    mask[(b * s.T + i) * s.Tk + j] = j == i + s.Tk - s.T || (j + i + data[7]) % 5 != 0;
    }
    const int lens = s.projected && s.use_lens;
    float *scores = malloc(sizeof(float) * (size_t)(s.B * s.H * s.T * s.Tk));
    /* the reference again twice, its inputs some 50 ulps apart: how far rounding alone moves each
     * result (a sum that cancels, as ALiBi's slope gradient over many distances, moves far) */
    float *nudged = malloc(sizeof(float) * (size_t)nin);
    run_out ref, fu, near[2];
    run(att, &L, &s, in, dy, pos, s.projected ? kpos : NULL, mask, lens ? ql : NULL, lens ? kl : NULL, scores, &ref);
    pe_attention_set_run_options(att, &(pe_run_options){.path = PE_PATH_REFERENCE});
    for (int r = 0; r < 2; r++) {
        for (int64_t i = 0; i < nin; i++) nudged[i] = in[i] * (1.0f + 0x1p-18f * (2 * pe_rng_uniform(&rng) - 1));
        run(att, &L, &s, nudged, dy, pos, s.projected ? kpos : NULL, mask, lens ? ql : NULL, lens ? kl : NULL, NULL, &near[r]);
    }
    pe_run_options opt = {.path = PE_PATH_FUSED, .threads = 1 + (data[7] & 1)};
    if (data[7] & 2) snprintf(opt.isa, sizeof opt.isa, "generic");
    pe_attention_set_run_options(att, &opt);
    run(att, &L, &s, in, dy, pos, s.projected ? kpos : NULL, mask, lens ? ql : NULL, lens ? kl : NULL, NULL, &fu);
    if (!ref.st != !fu.st) BROKEN(); /* one path refused what the other took */
    if (!ref.st && !near[0].st && !near[1].st) {
        const double cond = fmax(1.0, maxabs(scores, s.B * s.H * s.T * s.Tk) / 32);
        const double floor = 2e-6 * fmax(1.0, fmax(maxabs(ref.t[GRADS], L.n), fmax(maxabs(ref.t[DX], nq), maxabs(ref.t[DK], nk))));
        const int64_t count[NOUT] = {nq, nq, s.projected ? nk : 0, s.projected ? nk : 0, (int64_t)L.n};
        const char *names[NOUT] = {"y", "dx (dq)", "dk", "dv", "grads"};
        for (int t = 0; t < NOUT; t++) {
            const float *got = fu.t[t], *want = ref.t[t];
            double moved = 0;
            for (int r = 0; r < 2; r++)
                for (int64_t i = 0; i < count[t]; i++) moved = fmax(moved, fabs((double)near[r].t[t][i] - want[i]));
            close_or_trap(names[t], got, want, count[t],
                          cond * (2e-5 * maxabs(want, count[t]) + (t ? floor : 2e-6)) + 2 * moved, cond * 1e-4);
        }
    }
    run_free(&ref), run_free(&fu), run_free(&near[0]), run_free(&near[1]);
    free(nudged);
    free(in), free(dy), free(pos), free(kpos), free(mask), free(scores), free(text);
    pe_layer_free(&L);
    pe_attention_free(att);
    return 0;
}
