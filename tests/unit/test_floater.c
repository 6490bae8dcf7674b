/* FLOATER beyond the fixtures: the grid index against exact rational arithmetic, 4096
 * positions forward and backward (time and memory printed), the trajectory cache (hits take
 * no RK4 step, any parameter change invalidates it, new positions start from a checkpoint,
 * results identical to a fresh layer's), errors that leave the cache intact, finite
 * differences of every tensor (on and off the grid), and the portable solver kernel against
 * the CPU's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "exec/fused.h"
#include "harness.h"
#include "internal.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double peak_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0; /* kB on Linux */
}

/* ---- the grid ------------------------------------------------------------------------- */

/* dt = a / 1000, step = b / 1000 as decimal text would give them; the exact grid index is
 * floor(p a / b) and the remainder (p a mod b) / 1000. */
static void grid_matches_exact_rationals(void **state) {
    (void)state;
    static const int64_t AB[][2] = {{10, 2},  {30, 10}, {100, 20}, {3, 2},  {100, 250},
                                    {500, 500}, {70, 10}, {1, 1000}, {7, 3}, {999, 7}};
    int64_t checked = 0;
    for (size_t c = 0; c < sizeof AB / sizeof AB[0]; c++) {
        int64_t a = AB[c][0], b = AB[c][1];
        double dt = (double)a / 1000, step = (double)b / 1000;
        char buf[64];
        snprintf(buf, sizeof buf, "%.3f", dt), dt = strtod(buf, NULL); /* the parsed text */
        snprintf(buf, sizeof buf, "%.3f", step), step = strtod(buf, NULL);
        for (int64_t p = 0; p <= 200000; p += p < 3000 ? 1 : 997) {
            int64_t n;
            double r;
            pe__floater_grid(p, dt, step, &n, &r);
            int64_t want_n = p * a / b;
            double want_r = (double)(p * a - want_n * b) / 1000;
            if (n != want_n || fabs(r - want_r) > 1e-12 * fmax(1.0, (double)p))
                fail_msg("dt %g step %g p %lld: grid %lld r %.17g, exact %lld r %.17g", dt, step,
                         (long long)p, (long long)n, r, (long long)want_n, want_r);
            checked++;
        }
    }
    /* the cases float64 division gets wrong: 0.03 p / 0.01 < 3p for p = 11, 15, ... */
    int64_t n;
    double r;
    for (int64_t p = 0; p < 100000; p++) {
        pe__floater_grid(p, 0.03, 0.01, &n, &r);
        if (n != 3 * p || r != 0) fail_msg("dt 0.03 step 0.01 p %lld: n %lld r %g", (long long)p, (long long)n, r);
        pe__floater_grid(p, 0.01, 0.002, &n, &r);
        if (n != 5 * p || r != 0) fail_msg("dt 0.01 step 0.002 p %lld: n %lld r %g", (long long)p, (long long)n, r);
    }
    assert_true(0.03 * 11 / 0.01 < 33); /* the premise */
    pe__floater_grid(1, 0.003, 0.002, &n, &r);
    assert_int_equal(n, 1);
    assert_true(fabs(r - 0.001) < 1e-15);
    pe__floater_grid(0, 0.003, 0.002, &n, &r);
    assert_true(n == 0 && r == 0);
    printf("  %lld grid indices match exact rational arithmetic\n", (long long)checked);
}

/* ---- a layer -------------------------------------------------------------------------- */

typedef struct run {
    pe_attention *att;
    pe_layer L;
    int64_t B, T, C;
    float *x, *y, *r;
    int64_t *pos;
} run;

static void run_init(run *R, const char *keys, int64_t B, int64_t T, int64_t H, int64_t D, uint64_t seed) {
    char s[256];
    snprintf(s, sizeof s, "method=floater heads=%lld %s", (long long)H, keys);
    memset(R, 0, sizeof *R);
    R->B = B, R->T = T, R->C = H * D;
    R->att = pe_test_layer(s, R->C);
    pe_err err;
    if (pe_layer_init(&R->L, R->att, 1, seed, &err)) fail_msg("%s", err.msg);
    /* tame dynamics: weights ~ 0.5 / sqrt(C + 1), so B(t) stays O(1) up to t ~ 40 */
    const char *names[8 + PE_MAX_PARAMS];
    float *data[8 + PE_MAX_PARAMS], *grads[8 + PE_MAX_PARAMS];
    int64_t sizes[8 + PE_MAX_PARAMS];
    int nt = pe_layer_tensors(&R->L, names, data, grads, sizes);
    for (int t = 0; t < nt; t++)
        if (!strcmp(names[t], "floater_w1") || !strcmp(names[t], "floater_w2"))
            for (int64_t e = 0; e < sizes[t]; e++) data[t][e] *= 1.0f / sqrtf((float)R->C + 1);
    int64_t n = B * T * R->C;
    R->x = malloc(sizeof(float) * n), R->y = malloc(sizeof(float) * n), R->r = malloc(sizeof(float) * n);
    R->pos = malloc(sizeof(int64_t) * B * T);
    pe_rng rng = {seed + 1};
    for (int64_t i = 0; i < n; i++) R->x[i] = 2 * pe_rng_uniform(&rng) - 1, R->r[i] = 2 * pe_rng_uniform(&rng) - 1;
    for (int64_t i = 0; i < B * T; i++) R->pos[i] = i % T;
}

static void run_free(run *R) {
    free(R->x), free(R->y), free(R->r), free(R->pos);
    pe_layer_free(&R->L);
    pe_attention_free(R->att);
}

static double loss(run *R) {
    pe_err err;
    if (pe_attention_forward(R->att, &R->L.w, R->x, NULL, 0, R->pos, 1, R->B, R->T, R->y, NULL, NULL, &err))
        fail_msg("forward: %s", err.msg);
    double s = 0;
    for (int64_t i = 0; i < R->B * R->T * R->C; i++) s += (double)R->y[i] * R->r[i];
    return s;
}
static double loss_v(void *R) { return loss(R); }

static void backward(run *R) {
    pe_err err;
    pe_layer_zero_grad(&R->L);
    if (pe_attention_backward(R->att, &R->L.w, R->r, NULL, &R->L.g, &err)) fail_msg("backward: %s", err.msg);
}

/* The floater tensors of the layer (5 of them, in spec order). */
static int floater_tensors(run *R, const char **names, float **data, float **grads, int64_t *sizes) {
    const char *n_[8 + PE_MAX_PARAMS];
    float *d_[8 + PE_MAX_PARAMS], *g_[8 + PE_MAX_PARAMS];
    int64_t s_[8 + PE_MAX_PARAMS];
    int nt = pe_layer_tensors(&R->L, n_, d_, g_, s_), k = 0;
    for (int t = 0; t < nt; t++)
        if (!strncmp(n_[t], "floater_", 8)) names[k] = n_[t], data[k] = d_[t], grads[k] = g_[t], sizes[k++] = s_[t];
    assert_int_equal(k, 5);
    return k;
}

/* ---- 4096 positions ------------------------------------------------------------------- */

/* One sequence of T = 4096 (positions 0..4095, default keys: 20475 RK4 steps to t = 40.95),
 * forward and backward; prints the time and the peak memory, checks that the rows of a
 * short call on the same layer are those of the long one. */
static void positions_4096(void **state) {
    (void)state;
    run R;
    const int64_t T = 4096, H = 1, D = 32;
    run_init(&R, "causal=true", 1, T, H, D, 5);
    double m0 = peak_mib(), t0 = now();
    int64_t s0 = pe__floater_steps();
    double l = loss(&R);
    double t1 = now();
    int64_t s1 = pe__floater_steps();
    backward(&R);
    double t2 = now();
    int64_t s2 = pe__floater_steps();
    assert_true(isfinite(l));
    const char *names[5];
    float *data[5], *grads[5];
    int64_t sizes[5];
    floater_tensors(&R, names, data, grads, sizes);
    for (int t = 0; t < 5; t++)
        for (int64_t e = 0; e < sizes[t]; e++)
            if (!isfinite(grads[t][e])) fail_msg("d%s[%lld] is not finite", names[t], (long long)e);
    printf("  T=4096, C=%lld, one layer: forward %.2f s (%lld RK4 steps), backward %.2f s (%lld steps), "
           "peak memory %.0f MiB (+%.0f over the start; the (T, T) scores and probabilities alone "
           "are %.0f MiB)\n",
           (long long)(H * D), t1 - t0, (long long)(s1 - s0), t2 - t1, (long long)(s2 - s1), peak_mib(),
           peak_mib() - m0, 2.0 * T * T * 4 / (1 << 20));
    assert_int_equal(s1 - s0, 20475); /* cold cache: each grid step once */
    /* cache hit: the same call again takes no step and gives the same bits */
    float *y1 = malloc(sizeof(float) * T * H * D);
    memcpy(y1, R.y, sizeof(float) * T * H * D);
    int64_t s3 = pe__floater_steps();
    loss(&R);
    assert_int_equal(pe__floater_steps() - s3, 0);
    assert_memory_equal(y1, R.y, sizeof(float) * T * H * D);
    free(y1);
    run_free(&R);
}

/* ---- the cache ------------------------------------------------------------------------ */

/* y of a fresh layer with R's tensors at R's positions. */
static void fresh_y(run *R, float *y) {
    pe_err err;
    pe_attention *a = pe_test_layer("method=floater heads=2 floater_dt=0.05", R->C);
    if (pe_attention_forward(a, &R->L.w, R->x, NULL, 0, R->pos, 1, R->B, R->T, y, NULL, NULL, &err))
        fail_msg("%s", err.msg);
    pe_attention_free(a);
}

static void cache_hits_and_invalidation(void **state) {
    (void)state;
    run R;
    const int64_t B = 2, T = 6, n = B * T * 8;
    run_init(&R, "floater_dt=0.05", B, T, 2, 4, 9);
    float *y0 = malloc(sizeof(float) * n), *yf = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < B * T; i++) R.pos[i] = 7 * i; /* up to 77: 1925 steps */

    int64_t s = pe__floater_steps();
    loss(&R);
    assert_int_equal(pe__floater_steps() - s, 1925);
    memcpy(y0, R.y, sizeof(float) * n);
    fresh_y(&R, yf);
    assert_memory_equal(y0, yf, sizeof(float) * n);

    /* a hit: no step, same bits */
    s = pe__floater_steps();
    loss(&R);
    assert_int_equal(pe__floater_steps() - s, 0);
    assert_memory_equal(y0, R.y, sizeof(float) * n);

    /* positions not seen yet: solved from the checkpoint below (K = 44 here), not from 0 */
    int64_t keep = R.pos[3];
    R.pos[3] = 50; /* t = 2.5, grid 1250 */
    s = pe__floater_steps();
    loss(&R);
    int64_t taken = pe__floater_steps() - s;
    printf("  a new position under the cached range took %lld RK4 steps (from 0: 1250)\n", (long long)taken);
    assert_true(taken > 0 && taken <= 44);
    fresh_y(&R, yf);
    assert_memory_equal(R.y, yf, sizeof(float) * n);
    R.pos[3] = keep;

    /* every tensor: one element changed invalidates the cache; changed back, the old bits */
    const char *names[5];
    float *data[5], *grads[5];
    int64_t sizes[5];
    floater_tensors(&R, names, data, grads, sizes);
    for (int t = 0; t < 5; t++) {
        int64_t e = sizes[t] / 2;
        float old = data[t][e];
        data[t][e] = old + 1e-3f;
        s = pe__floater_steps();
        loss(&R);
        if (pe__floater_steps() - s < 1925) fail_msg("changing %s[%lld] did not re-solve", names[t], (long long)e);
        fresh_y(&R, yf);
        assert_memory_equal(R.y, yf, sizeof(float) * n);
        /* b0 and b2 always move B (a w1 or w2 entry of a unit whose ReLU stays off need not) */
        if ((t == 0 || t == 4) && !memcmp(R.y, y0, sizeof(float) * n))
            fail_msg("changing %s[%lld] did not change y", names[t], (long long)e);
        data[t][e] = old;
        loss(&R);
        assert_memory_equal(R.y, y0, sizeof(float) * n);
    }

    /* the gradient after a hit (and after a spacing change: a far position, then back) is
     * the one of a fresh layer */
    loss(&R);
    backward(&R);
    float *g0[5];
    for (int t = 0; t < 5; t++) g0[t] = malloc(sizeof(float) * sizes[t]), memcpy(g0[t], grads[t], sizeof(float) * sizes[t]);
    keep = R.pos[0];
    R.pos[0] = 2000; /* grid 50000: a new checkpoint spacing (44 -> 264) */
    loss(&R);
    R.pos[0] = keep;
    s = pe__floater_steps();
    loss(&R);
    assert_int_equal(pe__floater_steps() - s, 0);
    assert_memory_equal(R.y, y0, sizeof(float) * n);
    backward(&R);
    for (int t = 0; t < 5; t++) assert_memory_equal(g0[t], grads[t], sizeof(float) * sizes[t]);
    for (int t = 0; t < 5; t++) free(g0[t]);

    /* an error keeps the cache: a negative position fails, the next call still hits */
    keep = R.pos[1];
    R.pos[1] = -1;
    pe_err err;
    pe_status st = pe_attention_forward(R.att, &R.L.w, R.x, NULL, 0, R.pos, 1, B, T, y1, NULL, NULL, &err);
    assert_int_equal(st, PE_EPOS);
    assert_non_null(strstr(err.msg, "negative"));
    R.pos[1] = keep;
    s = pe__floater_steps();
    loss(&R);
    assert_int_equal(pe__floater_steps() - s, 0);
    assert_memory_equal(R.y, y0, sizeof(float) * n);
    free(y0), free(yf), free(y1);
    run_free(&R);
}

/* ---- finite differences --------------------------------------------------------------- */

/* Every element of the five tensors against the four-point stencil, as
 * test_gradcheck.c, at times up to t ~ 1 so that the flow matters; on the grid and off it
 * (partial steps). */
static void finite_differences(void **state) {
    (void)state;
    static const char *const KEYS[] = {"floater_dt=0.1 floater_step=0.05 causal=true",
                                       "floater_dt=0.03 floater_step=0.02"};
    for (int c = 0; c < 2; c++) {
        run R;
        run_init(&R, KEYS[c], 2, 5, 2, 3, 20 + c);
        for (int64_t i = 0; i < R.B * R.T; i++) R.pos[i] = 2 * i + (i % 3);
        loss(&R);
        backward(&R);
        const char *names[5];
        float *data[5], *grads[5];
        int64_t sizes[5];
        floater_tensors(&R, names, data, grads, sizes);
        double worst = 0;
        for (int t = 0; t < 5; t++) {
            float *g = malloc(sizeof(float) * sizes[t]);
            memcpy(g, grads[t], sizeof(float) * sizes[t]);
            for (int64_t e = 0; e < sizes[t]; e++)
                /* h: small enough not to straddle a ReLU kink, large enough for float32 */
                worst = fmax(worst, pe_test_fd_element(&data[t][e], g[e], 1e-3f * fmaxf(1.0f, fabsf(data[t][e])),
                                                       loss_v, &R, worst, KEYS[c], names[t], e));
            free(g);
        }
        printf("  %-45s worst %.3g x tolerance\n", KEYS[c], worst);
        assert_true(worst <= 1);
        run_free(&R);
    }
}

/* ---- the kernels ---------------------------------------------------------------------- */

/* The portable product kernel of the solver (run option isa "generic") and the one this CPU
 * picks agree to double rounding (FMA, or none), forward and backward; widths with a vector
 * tail (C = 24) and with columns only in the tail (C = 6). The attention runs on the reference
 * path, so that only the solver differs. */
static void kernels_agree(void **state) {
    (void)state;
    static const int64_t HD[][2] = {{2, 12}, {2, 3}, {4, 16}};
    for (size_t c = 0; c < sizeof HD / sizeof HD[0]; c++) {
        run R[2];
        for (int k = 0; k < 2; k++) {
            run_init(&R[k], "floater_dt=0.05 causal=true", 2, 7, HD[c][0], HD[c][1], 40 + c);
            pe_run_options opt = {.path = PE_PATH_REFERENCE};
            snprintf(opt.isa, sizeof opt.isa, "%s", k ? "" : "generic");
            pe_attention_set_run_options(R[k].att, &opt);
            for (int64_t i = 0; i < R[k].B * R[k].T; i++) R[k].pos[i] = 3 * i + 1; /* up to 40: 1000 steps */
            loss(&R[k]);
            backward(&R[k]);
        }
        double worst = 0;
        int64_t n = R[0].B * R[0].T * R[0].C;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(R[0].y[i] - R[1].y[i]) / (1e-7 + 1e-6 * fabs(R[1].y[i])));
        const char *names[2][5];
        float *data[2][5], *grads[2][5];
        int64_t sizes[2][5];
        for (int k = 0; k < 2; k++) floater_tensors(&R[k], names[k], data[k], grads[k], sizes[k]);
        for (int t = 0; t < 5; t++)
            for (int64_t e = 0; e < sizes[0][t]; e++) {
                double a = grads[0][t][e], b = grads[1][t][e], r = fabs(a - b) / (1e-7 + 1e-6 * fabs(b));
                if (r > 1) fprintf(stderr, "  C=%lld d%s[%lld]: generic %.8g, this CPU %.8g\n",
                                   (long long)R[0].C, names[0][t], (long long)e, a, b);
                worst = fmax(worst, r);
            }
        printf("  C=%-3lld generic against %s: worst %.3g x tolerance\n", (long long)R[0].C,
               pe__kernels_pick(NULL)->name, worst);
        assert_true(worst <= 1);
        run_free(&R[0]), run_free(&R[1]);
    }
}

/* pe_encode gives the rows the layer adds: P_q[0] is b0's first row, and a position's rows
 * do not depend on which other positions are asked for. */
static void encode_rows(void **state) {
    (void)state;
    run R;
    run_init(&R, "", 1, 1, 2, 4, 3);
    const char *names[5];
    float *data[5], *grads[5];
    int64_t sizes[5];
    floater_tensors(&R, names, data, grads, sizes);
    pe_tensor in[6];
    memset(in, 0, sizeof in);
    for (int t = 0; t < 5; t++) {
        snprintf(in[t].name, sizeof in[t].name, "%s", names[t]);
        in[t].dtype = PE_F32;
        in[t].ndim = t == 2 || t == 4 ? 1 : 2;
        in[t].shape[0] = t == 0 ? 3 : 8, in[t].shape[1] = t == 0 ? 8 : 9;
        in[t].data = data[t];
    }
    int64_t all[3] = {0, 300, 4095}, one[1] = {4095};
    const char *k[] = {"method"}, *v[] = {"floater"};
    pe_tensor *o1, *o2;
    int n1, n2;
    pe_err err;
    snprintf(in[5].name, sizeof in[5].name, "positions");
    in[5].dtype = PE_I64, in[5].ndim = 1, in[5].shape[0] = 3, in[5].data = all;
    if (pe_encode(1, k, v, 0, 6, in, &o1, &n1, &err)) fail_msg("%s", err.msg);
    in[5].shape[0] = 1, in[5].data = one;
    if (pe_encode(1, k, v, 0, 6, in, &o2, &n2, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n1, 4);
    assert_string_equal(o1[0].name, "P_q");
    assert_memory_equal(o1[0].data, data[0], sizeof(float) * 8);                 /* B_q(0) = b0[0] */
    assert_memory_equal((float *)o1[2].data, data[0] + 16, sizeof(float) * 8);   /* B_v(0) = b0[2] */
    for (int i = 0; i < 3; i++)
        assert_memory_equal((float *)o1[i].data + 16, o2[i].data, sizeof(float) * 8);
    pe_tensors_free(o1, n1), pe_tensors_free(o2, n2);
    run_free(&R);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grid_matches_exact_rationals),
        cmocka_unit_test(cache_hits_and_invalidation),
        cmocka_unit_test(finite_differences),
        cmocka_unit_test(encode_rows),
        cmocka_unit_test(kernels_agree),
        cmocka_unit_test(positions_4096),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
