/* posenc demo: every method on one built-in random layer, side by side.
 *   shift    max |y(pos + 100) - y(pos)|: 0 for relative methods, which see only i - j
 *   grad     worst relative error of backward against central differences (sampled)
 *   ms       forward + backward time at the demo's T
 */
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tools/layer.h"
#include "cli.h"
#include "options.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* loss = sum(y * r); a complex-valued layer reads token ids (ids) instead of x */
static double loss_of(pe_attention *att, pe_layer *L, const float *x, const int64_t *ids,
                      const int64_t *pos, int64_t T, float *y, const float *r) {
    pe_err err;
    pe_status st = pe_attention_is_complex(att)
                       ? pe_attention_forward_ids(att, &L->w, ids, pos, 0, 1, T, y, y + T * L->C, NULL, NULL, &err)
                       : pe_attention_forward(att, &L->w, x, NULL, 0, pos, 0, 1, T, y, NULL, NULL, &err);
    if (st) return NAN;
    double s = 0;
    for (int64_t i = 0; i < T * L->C; i++) s += (double)y[i] * r[i];
    return s;
}

int cli_demo(int argc, char **argv) {
    demo_args a;
    int rc;
    if (arg_start(&ARGS_DEMO, argc, argv, &a, &rc)) return rc;
    if (a.head_dim % 2) return cli_fail("demo: --head-dim: %lld is odd (the rotary methods rotate pairs)", a.head_dim);
    const int64_t T = a.length, H = a.heads, D = a.head_dim;
    const uint64_t seed = (uint64_t)a.seed;
    int64_t C = H * D, shift = 100;
    printf("posenc demo: one attention layer, T=%lld, heads=%lld, head_dim=%lld, causal, random weights (seed %llu)\n\n",
           (long long)T, (long long)H, (long long)D, (unsigned long long)seed);
    printf("%-12s %-9s %12s %12s %10s\n", "method", "family", "shift", "grad err", "fwd+bwd ms");

    /* y, y2 hold the imaginary output of a complex layer after the real one */
    float *x = malloc(sizeof(float) * T * C), *y = malloc(sizeof(float) * 2 * T * C),
          *r = malloc(sizeof(float) * T * C), *y2 = malloc(sizeof(float) * 2 * T * C),
          *dx = malloc(sizeof(float) * T * C);
    int64_t *pos = malloc(sizeof(int64_t) * T), *pos2 = malloc(sizeof(int64_t) * T),
            *ids = malloc(sizeof(int64_t) * T);
    if (!x || !y || !r || !y2 || !dx || !pos || !pos2 || !ids) return cli_fail("out of memory");
    pe_rng rng = {seed};
    for (int64_t i = 0; i < T * C; i++) x[i] = pe_rng_normal(&rng), r[i] = pe_rng_normal(&rng);
    for (int64_t t = 0; t < T; t++) pos[t] = t, pos2[t] = t + shift, ids[t] = (7 * t + 3) % T;

    for (int m = 0; m < PE_METHOD_COUNT && !rc; m++) {
        pe_config cfg;
        pe_err err;
        pe_config_init(&cfg);
        char heads[32];
        snprintf(heads, sizeof heads, "%lld", (long long)H);
        const char *keys[] = {"method", "heads", "causal"}, *vals[] = {pe_method_name(m), heads, "true"};
        pe_attention *att;
        pe_layer L;
        if (pe_config_set_all(&cfg, 3, keys, vals, &err) || pe_attention_init(&att, &cfg, C, &err)) {
            rc = cli_fail("demo: %s: %s", pe_method_name(m), err.msg);
            break;
        }
        if (pe_layer_init(&L, att, T + shift + 1, seed + m, &err)) { /* tupe reads row p + 1 */
            pe_attention_free(att);
            rc = cli_fail("demo: %s", err.msg);
            break;
        }
        /* shift invariance */
        loss_of(att, &L, x, ids, pos, T, y, r);
        loss_of(att, &L, x, ids, pos2, T, y2, r);
        double dshift = 0;
        for (int64_t i = 0; i < T * C; i++) dshift = fmax(dshift, fabs((double)y[i] - y2[i]));

        /* timing and gradients at pos */
        double t0 = now();
        loss_of(att, &L, x, ids, pos, T, y, r);
        pe_layer_zero_grad(&L);
        if (pe_attention_is_complex(att)) pe_attention_backward_ids(att, &L.w, r, NULL, &L.g, &err);
        else pe_attention_backward(att, &L.w, r, dx, &L.g, &err);
        double ms = (now() - t0) * 1e3;

        const char *names[8 + PE_MAX_PARAMS];
        float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
        int64_t sizes[8 + PE_MAX_PARAMS];
        int nt = pe_layer_tensors(&L, names, data, grads, sizes);
        /* four-point central differences: (-f(2h) + 8f(h) - 8f(-h) + f(-2h)) / 12h */
        double worst = 0;
        const float h = 5e-3f, steps[4] = {-2, -1, 1, 2};
        for (int t = 0; t < nt; t++)
            for (int s = 0; s < 3; s++) {
                int64_t e = (int64_t)(pe_rng_next(&rng) % (uint64_t)sizes[t]);
                float keep = data[t][e];
                double f[4];
                for (int k = 0; k < 4; k++) {
                    data[t][e] = keep + steps[k] * h;
                    f[k] = loss_of(att, &L, x, ids, pos, T, y2, r);
                }
                data[t][e] = keep;
                double num = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12.0 * h), ana = grads[t][e];
                double e_rel = fabs(num - ana) / fmax(1.0, fabs(ana));
                worst = isnan(e_rel) || isnan(worst) ? NAN : fmax(worst, e_rel);
            }
        printf("%-12s %-9s %12.3g %12.2e %10.2f\n", pe_method_name(m), pe_family_name(pe_method_family(m)),
               dshift, worst, ms);
        pe_layer_free(&L);
        pe_attention_free(att);
    }
    printf("\nshift: how much the output moves when every position moves by %lld (0: the method sees only i - j).\n"
           "grad err: backward against central differences, worst over sampled entries of every tensor.\n",
           (long long)shift);
    free(x), free(y), free(r), free(y2), free(dx), free(pos), free(pos2), free(ids);
    return rc;
}
