#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pe_test_fixture_dir(void) {
    const char *d = getenv("POSENC_FIXTURES");
    return d && *d ? d : "tests/fixtures";
}

int64_t pe_test_compare(const char *what, const float *got, const float *want, int64_t n,
                        double atol, double rtol) {
    int64_t bad = 0, worst_i = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = got[i], b = want[i], r;
        if (!isfinite(b) || !isfinite(a)) r = (a == b) ? 0 : INFINITY;
        else r = fabs(a - b) / (atol + rtol * fabs(b));
        if (r > 1) {
            if (bad < 3) fprintf(stderr, "    %s[%lld]: got %.8g, expected %.8g\n", what, (long long)i, a, b);
            bad++;
        }
        if (r > worst || worst_i < 0) worst = r, worst_i = i;
    }
    if (bad)
        fprintf(stderr, "  %s: %lld of %lld elements out of tolerance, worst %.3g x tolerance at %lld\n", what,
                (long long)bad, (long long)n, worst, (long long)worst_i);
    return bad;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int pe_test_list(const char *dir, const char *suffix, char ***names) {
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    *names = NULL;
    if (!d) return 0;
    size_t ls = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < ls || strcmp(e->d_name + l - ls, suffix)) continue;
        if (n == cap) *names = realloc(*names, sizeof(char *) * (cap = cap ? 2 * cap : 64));
        (*names)[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(*names, n, sizeof(char *), cmp_str);
    return n;
}

pe_status pe_test_config(const char *settings, pe_config *cfg, pe_err *err) {
    pe_config_init(cfg);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", settings);
    const char *keys[64], *vals[64];
    int n = 0;
    for (char *tok = strtok(buf, " "); tok && n < 64; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = 0;
        keys[n] = tok, vals[n++] = eq + 1;
    }
    return pe_config_set_all(cfg, n, keys, vals, err);
}

double pe_test_fd_element(float *x, double ana, float h, double (*loss)(void *), void *ctx,
                          double worst, const char *label, const char *name, int64_t e) {
    const float keep = *x, steps[4] = {-2, -1, 1, 2};
    double num = 0, ratio = INFINITY;
    /* A kink within 2h of x (a ReLU of FIRE's MLP whose input crosses 0, a clamp) throws the
     * difference off by a share of the step, and the rounding of another CPU's kernels moves the
     * kinks: where the step h disagrees, h / 4 is tried too (a wrong backward stays wrong at any
     * step; a kink's error shrinks with it), and the closer of the two counts. */
    for (int k = 0; k < 2 && ratio > 1; k++) {
        const float hk = k ? h / 4 : h;
        double f[4];
        for (int s = 0; s < 4; s++) *x = keep + steps[s] * hk, f[s] = loss(ctx);
        *x = keep;
        const double nk = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12.0 * hk);
        const double rk = fabs(nk - ana) / (2e-3 + 1e-2 * fabs(ana));
        if (rk < ratio) ratio = rk, num = nk;
    }
    if (ratio > 1 && worst <= 1)
        fprintf(stderr, "  %s: d%s[%lld]: backward %.6g, finite difference %.6g\n", label, name, (long long)e,
                ana, num);
    return ratio;
}

pe_attention *pe_test_layer(const char *settings, int64_t C) {
    pe_config cfg;
    pe_err err = {{0}};
    pe_attention *att = NULL;
    pe_status st = pe_test_config(settings, &cfg, &err);
    if (!st) st = pe_attention_init(&att, &cfg, C, &err);
    if (st) fprintf(stderr, "  layer '%s': %s\n", settings, err.msg);
    assert_int_equal(st, PE_OK);
    return att;
}

float *pe_test_uniform(int64_t n, pe_rng *rng) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    if (!x) fail_msg("out of memory");
    for (int64_t i = 0; i < n; i++) x[i] = 2 * pe_rng_uniform(rng) - 1;
    return x;
}

double pe_test_maxabs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(a[i])) m = fmax(m, fabs(a[i]));
    return m;
}
