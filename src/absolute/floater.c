/* FLOATER (Liu et al. 2020, xuanqing94/FLOATER): position biases on q, k and v that follow a
 * neural ODE.
 *   B(t) (3, C), rows q, k, v;  B(0) = floater_b0;  dB/dt = h(t, B) row by row,
 *   h(t, b) = W2 [relu(W1 [b; t] + b1); t] + b2        (W1, W2: [C, C+1], time last)
 *   q_i += B_q(p_i dt),  k_j += B_k(p_j dt),  v_j += B_v(p_j dt)   (the rotate hook)
 * solved with classic RK4, (k1 + 2k2 + 2k3 + k4)/6, on the grid t_n = n step; a time between
 * grid points takes one partial RK4 step of length r = t - t_n from the grid point below.
 * Negative positions are an error; there is no length cap. The ODE runs in double.
 *
 * The grid index of t = p dt is n = round(x), x = t / step, when x is within 8 ulps of that
 * integer (|x - n| <= 8 eps max(1, |x|)), else floor(x); r = t - n step. The decimal keys are
 * not exact in binary (0.01, 0.002), and x carries at most ~4 roundings, so a ratio that is an
 * integer in exact arithmetic (dt 0.01, step 0.002: 5p; dt 0.03, step 0.01: 3p, which float64
 * puts just below 3p for p = 11, 15, ...) is taken as that grid point, never as a near-full
 * partial step from the point below: the grid index of the exact rational computation of the
 * reference (tests/ref/m_floater.py). A time off the grid by less than that is 1e-15 steps
 * from it, far below float32 resolution.
 *
 * Backward is the exact gradient of this discrete solution (backpropagation through every
 * RK4 step), with memory O(sqrt(N)) in the N grid steps: forward keeps the state every K ~
 * sqrt(N) steps (checkpoints); backward walks down the grid, recomputes one segment of K
 * states at a time from its checkpoint and runs each step's vector-Jacobian product (stages
 * and ReLU masks recomputed inside the step). Cost: forward N steps; backward N recomputed
 * steps and N step VJPs, 3 to 4 times the forward's time.
 *
 * Cache. The layer keeps (PE__PERSIST) the checkpoints and a table of B(p dt) for every
 * position solved so far, keyed on a bit-exact copy of the five tensors and of floater_dt,
 * floater_step: a call with the same parameters only solves positions it has not seen (from
 * the nearest checkpoint), any change re-solves from t = 0. The table holds at most
 * TABLE_BYTES (beyond it, only the current call's positions are kept). */
#include <float.h>
#include <stdatomic.h>

#include "../internal.h"

#ifdef PE_BLAS
#include <cblas.h>
#endif

enum { B0, W1, B1, W2, B2 };

#define TABLE_BYTES ((size_t)64 << 20)
/* (3, C) blocks of scratch: rk4 0-12 (stage inputs, pre-activations, relu, stage outputs),
 * rk4_vjp 13-16, then 17-18 the adjoint's lambda and its update (backward) or 18-19 the
 * walker's state and a partial step's result (forward). */
enum { WORK_BLOCKS = 20 };

static _Atomic int64_t steps_taken; /* every RK4 step, full or partial, forward or backward */

int64_t pe__floater_steps(void) { return atomic_load_explicit(&steps_taken, memory_order_relaxed); }

void pe__floater_grid(int64_t p, double dt, double step, int64_t *n, double *r) {
    double t = (double)p * dt, x = t / step, k = nearbyint(x);
    if (fabs(x - k) <= 8 * DBL_EPSILON * fmax(1.0, fabs(x))) {
        *n = (int64_t)k, *r = 0.0;
        return;
    }
    k = floor(x);
    *n = (int64_t)k;
    *r = t - k * step;
}

typedef struct floater_state {
    int64_t C;
    /* the cache, valid while the tensors and keys equal key, dt, step bit for bit */
    float *key; /* b0 (3C), w1 (C(C+1)), b1 (C), w2 (C(C+1)), b2 (C) */
    double dt, step;
    double *w1, *b1, *w2, *b2; /* the dynamics in double */
    int64_t K;                 /* grid steps between checkpoints */
    double *ckpt;              /* (n_ckpt, 3, C): B(c K step) */
    int64_t n_ckpt, cap_ckpt;
    int64_t *tab_pos; /* (n_tab) sorted positions solved so far */
    float *tab_row;   /* (n_tab, 3, C) their B(p dt) */
    int64_t n_tab, cap_tab;
    /* this call */
    int64_t *upos, n_u; /* distinct positions, sorted */
    int64_t *u_tab;     /* (n_u) row of upos[u] in the table */
    int64_t *tok_u;     /* (B*T) index into upos of each token */
    float *grad;        /* (n_u, 3, C) dB of each distinct position, filled by rotate_backward */
    double *work;       /* scratch of the solver: WORK_BLOCKS (3, C) blocks */
} floater_state;

static size_t key_floats(int64_t C) { return (size_t)(3 * C + 2 * C * (C + 1) + 2 * C); }

static void release(pe__ctx *ctx) {
    floater_state *st = ctx->state;
    if (!st) return;
    free(st->key), free(st->w1), free(st->ckpt), free(st->tab_pos), free(st->tab_row);
    free(st->upos), free(st->u_tab), free(st->tok_u), free(st->grad), free(st->work);
    free(st);
    ctx->state = NULL;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (!(cfg->floater_dt >= 0)) return pe__fail(err, PE_EKEY, "key 'floater_dt': %g must be >= 0", cfg->floater_dt);
    if (!(cfg->floater_step > 0))
        return pe__fail(err, PE_EKEY, "key 'floater_step': %g must be > 0", cfg->floater_step);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg;
    int64_t C = H * D;
    s[B0] = (pe_param_spec){"floater_b0", 2, {3, C}, 0};
    s[W1] = (pe_param_spec){"floater_w1", 2, {C, C + 1}, 0};
    s[B1] = (pe_param_spec){"floater_b1", 1, {C}, 0};
    s[W2] = (pe_param_spec){"floater_w2", 2, {C, C + 1}, 0};
    s[B2] = (pe_param_spec){"floater_b2", 1, {C}, 0};
    return 5;
}

/* ---- the solver ------------------------------------------------------------------------ */

/* c (m, n) += a^T b for a (k, m), b (k, n) in double, c with row stride ldc: the weight
 * gradients, as one product over many pending rows. */
static void dgemm_tn(int64_t m, int64_t n, int64_t k, const double *a, const double *b, double *c,
                     int64_t ldc) {
#ifdef PE_BLAS
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)m, b,
                (int)n, 1.0, c, (int)ldc);
#else
    for (int64_t l = 0; l < k; l++)
        for (int64_t i = 0; i < m; i++) {
            double ai = a[l * m + i];
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] += ai * b[l * n + j];
        }
#endif
}

/* out (3, C) = x W^T (trans 0) or x W (trans 1), + beta out, for the first C columns of a
 * weight W [C, C+1] (the last column multiplies the time). Three matrix-vector products: with
 * 3 rows the weight's memory traffic is the cost, which gemv streams once per row without
 * packing it. */
static void matvec3(int trans, const double *w, int64_t C, const double *x, double beta, double *out) {
    for (int64_t r = 0; r < 3; r++) {
#ifdef PE_BLAS
        cblas_dgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, (int)C, (int)C, 1.0, w, (int)(C + 1),
                    x + r * C, 1, beta, out + r * C, 1);
#else
        const double *xr = x + r * C;
        double *o = out + r * C;
        for (int64_t i = 0; i < C; i++) o[i] = beta == 0 ? 0.0 : beta * o[i];
        for (int64_t i = 0; i < C; i++) {
            const double *wi = w + i * (C + 1);
            if (trans)
                for (int64_t j = 0; j < C; j++) o[j] += xr[i] * wi[j];
            else {
                double acc = 0;
                for (int64_t j = 0; j < C; j++) acc += wi[j] * xr[j];
                o[i] += acc;
            }
        }
#endif
    }
}

/* out (3, C) = h(t, y) row by row; z (3, C) keeps the pre-activation W1 [y; t] + b1. */
static void dynamics(const floater_state *st, double t, const double *y, double *z, double *a,
                     double *out) {
    const int64_t C = st->C;
    matvec3(0, st->w1, C, y, 0.0, z);
    for (int64_t r = 0; r < 3; r++)
        for (int64_t i = 0; i < C; i++) {
            z[r * C + i] += st->w1[i * (C + 1) + C] * t + st->b1[i];
            a[r * C + i] = z[r * C + i] > 0 ? z[r * C + i] : 0.0;
        }
    matvec3(0, st->w2, C, a, 0.0, out);
    for (int64_t r = 0; r < 3; r++)
        for (int64_t i = 0; i < C; i++) out[r * C + i] += st->w2[i * (C + 1) + C] * t + st->b2[i];
}

/* One RK4 step of length h from (t0, y) into out (may alias y). Keeps, in work, the stage
 * inputs y1..y4 (blocks 0-3) and pre-activations z1..z4 (blocks 4-7) for rk4_vjp. */
static void rk4(const floater_state *st, double t0, double h, const double *y, double *out,
                double *work) {
    const int64_t n = 3 * st->C;
    double *ys = work, *zs = work + 4 * n, *a = work + 8 * n, *k = work + 9 * n; /* 4 blocks each */
    memcpy(ys, y, sizeof(double) * n);
    const double c[4] = {0, h / 2, h / 2, h}; /* stage i reads y + c[i] k_{i-1} at t0 + c[i] */
    for (int s = 0; s < 4; s++) {
        if (s)
            for (int64_t e = 0; e < n; e++) ys[s * n + e] = y[e] + c[s] * k[(s - 1) * n + e];
        dynamics(st, t0 + c[s], ys + s * n, zs + s * n, a, k + s * n);
    }
    for (int64_t e = 0; e < n; e++)
        out[e] = y[e] + h / 6 * (k[e] + 2 * k[n + e] + 2 * k[2 * n + e] + k[3 * n + e]);
    atomic_fetch_add_explicit(&steps_taken, 1, memory_order_relaxed);
}

/* Parameter gradients of the dynamics, in double until the end of backward. The two C x C
 * outer products of every stage (rank 3 each) wait as rows in g/a and dz/b and are added as
 * one product per GRAD_ROWS rows: a rank-3 update per stage would write all of dW1 and dW2
 * 4 times per step. */
enum { GRAD_ROWS = 384 };
typedef struct grads {
    double *w1, *b1, *w2, *b2; /* C(C+1), C, C(C+1), C */
    double *g, *a, *dz, *b;    /* (GRAD_ROWS, C) pending: dW2 += g^T a, dW1 += dz^T b */
    int64_t rows;
} grads;

static void grads_flush(const floater_state *st, grads *gr) {
    const int64_t C = st->C;
    if (!gr->rows) return;
    dgemm_tn(C, C, gr->rows, gr->g, gr->a, gr->w2, C + 1);
    dgemm_tn(C, C, gr->rows, gr->dz, gr->b, gr->w1, C + 1);
    gr->rows = 0;
}

/* forward was out = W2 [relu(z); t] + b2, z = W1 [b; t] + b1 (rows of b independent), so now,
 * with g = dout: dW2 += g^T [a; t], db2 += sum g, dz = (g W2) * (z > 0), dW1 += dz^T [b; t],
 * db1 += sum dz, db += dz W1. db is accumulated (+=). */
static void dynamics_vjp(const floater_state *st, grads *gr, double t, const double *b,
                         const double *z, const double *g, double *db, double *dz) {
    const int64_t C = st->C, n = 3 * C;
    if (gr->rows + 3 > GRAD_ROWS) grads_flush(st, gr);
    double *pa = gr->a + gr->rows * C;
    memcpy(gr->g + gr->rows * C, g, sizeof(double) * n);
    memcpy(gr->b + gr->rows * C, b, sizeof(double) * n);
    for (int64_t e = 0; e < n; e++) pa[e] = z[e] > 0 ? z[e] : 0.0;
    matvec3(1, st->w2, C, g, 0.0, dz);
    for (int64_t r = 0; r < 3; r++)
        for (int64_t i = 0; i < C; i++) {
            double gi = g[r * C + i];
            gr->w2[i * (C + 1) + C] += gi * t;
            gr->b2[i] += gi;
            if (!(z[r * C + i] > 0)) dz[r * C + i] = 0;
            gr->w1[i * (C + 1) + C] += dz[r * C + i] * t;
            gr->b1[i] += dz[r * C + i];
        }
    memcpy(gr->dz + gr->rows * C, dz, sizeof(double) * n);
    gr->rows += 3;
    matvec3(1, st->w1, C, dz, 1.0, db);
}

/* forward was out = y + h/6 (k1 + 2 k2 + 2 k3 + k4), k_s = h(t0 + c_s, y + c_s k_{s-1}), so
 * now, with lam = dout: dy += lam, dk_s = w_s lam (w = h/6, h/3, h/3, h/6); from the last stage
 * down, the stage input's gradient d = VJP of h at dk_s goes to dy and, times c_s, to
 * dk_{s-1}. The stages are recomputed first. dy is accumulated (+=); lam may alias nothing. */
static void rk4_vjp(const floater_state *st, grads *gr, double t0, double h, const double *y,
                    const double *lam, double *dy, double *work) {
    const int64_t n = 3 * st->C;
    double *ys = work, *zs = work + 4 * n;
    double *dk = work + 13 * n, *dstage = work + 14 * n, *dz = work + 15 * n, *out = work + 16 * n;
    rk4(st, t0, h, y, out, work);
    const double c[4] = {0, h / 2, h / 2, h}, wgt[4] = {h / 6, h / 3, h / 3, h / 6};
    for (int64_t e = 0; e < n; e++) dy[e] += lam[e], dk[e] = wgt[3] * lam[e];
    for (int s = 3; s >= 0; s--) {
        memset(dstage, 0, sizeof(double) * n);
        dynamics_vjp(st, gr, t0 + c[s], ys + s * n, zs + s * n, dk, dstage, dz);
        for (int64_t e = 0; e < n; e++) dy[e] += dstage[e];
        if (s)
            for (int64_t e = 0; e < n; e++) dk[e] = wgt[s - 1] * lam[e] + c[s] * dstage[e];
    }
}

/* ---- the cache ------------------------------------------------------------------------- */

/* Whether the cache was solved for these tensors and keys. */
static int cache_valid(const floater_state *st, const pe__ctx *ctx) {
    const int64_t C = st->C;
    const float *const *prm = ctx->w->param;
    const int64_t sizes[5] = {3 * C, C * (C + 1), C, C * (C + 1), C};
    if (st->n_ckpt == 0 || st->dt != ctx->cfg->floater_dt || st->step != ctx->cfg->floater_step) return 0;
    const float *k = st->key;
    for (int i = 0; i < 5; k += sizes[i], i++)
        if (memcmp(k, prm[i], sizeof(float) * sizes[i])) return 0;
    return 1;
}

/* Forgets every solution and keys the cache on the current tensors. */
static void cache_reset(floater_state *st, const pe__ctx *ctx) {
    const int64_t C = st->C;
    const float *const *prm = ctx->w->param;
    const int64_t sizes[5] = {3 * C, C * (C + 1), C, C * (C + 1), C};
    double *dst[5] = {st->ckpt, st->w1, st->b1, st->w2, st->b2}; /* b0 is checkpoint 0 */
    float *k = st->key;
    for (int i = 0; i < 5; k += sizes[i], i++) {
        memcpy(k, prm[i], sizeof(float) * sizes[i]);
        for (int64_t e = 0; e < sizes[i]; e++) dst[i][e] = prm[i][e];
    }
    st->dt = ctx->cfg->floater_dt, st->step = ctx->cfg->floater_step;
    st->n_ckpt = 1;
    st->n_tab = 0;
}

/* Brings the walker (*m, y) to grid point n: from the checkpoint at or below n when that is
 * ahead of the walker, recording each checkpoint it passes for the first time. */
static void walk_to(floater_state *st, int64_t n, int64_t *m, double *y) {
    const int64_t N3 = 3 * st->C, K = st->K;
    int64_t c = n / K < st->n_ckpt ? n / K : st->n_ckpt - 1;
    if (*m < 0 || *m > n || *m < c * K) {
        memcpy(y, st->ckpt + c * N3, sizeof(double) * N3);
        *m = c * K;
    }
    while (*m < n) {
        rk4(st, (double)*m * st->step, st->step, y, y, st->work);
        ++*m;
        if (*m % K == 0 && *m / K == st->n_ckpt) {
            PE_ASSERT(st->n_ckpt < st->cap_ckpt); /* reserved by prepare */
            memcpy(st->ckpt + st->n_ckpt++ * N3, y, sizeof(double) * N3);
        }
    }
}

/* B(p dt) of sorted positions pos[0..n) into rows (n, 3, C), float. */
static void solve_rows(floater_state *st, const int64_t *pos, int64_t n, float *rows) {
    const int64_t N3 = 3 * st->C;
    double *y = st->work + 19 * N3, *out = st->work + 18 * N3;
    int64_t m = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t g;
        double r;
        pe__floater_grid(pos[i], st->dt, st->step, &g, &r);
        walk_to(st, g, &m, y);
        const double *src = y;
        if (r > 0) {
            rk4(st, (double)g * st->step, r, y, out, st->work);
            src = out;
        }
        for (int64_t e = 0; e < N3; e++) rows[i * N3 + e] = (float)src[e];
    }
}

/* Lower bound of p in the sorted a[0..n). */
static int64_t lower(const int64_t *a, int64_t n, int64_t p) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ---- the hooks ------------------------------------------------------------------------- */

/* Makes every position of the call available in the table: validates, refreshes the cache,
 * solves what is missing. On failure the cache is left as it was. */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t C = ctx->C, N3 = 3 * C, BT = ctx->B * ctx->T;
    const double dt = ctx->cfg->floater_dt, step = ctx->cfg->floater_step;
    if (ctx->pos_min < 0)
        return pe__fail(err, PE_EPOS, "position %lld is negative: floater solves its ODE forward from t = 0",
                        (long long)ctx->pos_min);
    if ((double)ctx->pos_max * dt / step > 9007199254740992.0 /* 2^53 */)
        return pe__fail(err, PE_EPOS, "position %lld needs more than 2^53 RK4 steps of floater_step %g",
                        (long long)ctx->pos_max, step);
    floater_state *st = ctx->state;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return pe__fail(err, PE_ENOMEM, "out of memory for the floater state");
        st->C = C;
        st->key = malloc(sizeof(float) * key_floats(C));
        st->w1 = malloc(sizeof(double) * (2 * C * (C + 1) + 2 * C));
        st->work = malloc(sizeof(double) * WORK_BLOCKS * N3);
        st->ckpt = malloc(sizeof(double) * N3);
        st->cap_ckpt = 1;
        ctx->state = st;
        if (!st->key || !st->w1 || !st->work || !st->ckpt) {
            release(ctx);
            return pe__fail(err, PE_ENOMEM, "out of memory for the floater state");
        }
        st->b1 = st->w1 + C * (C + 1), st->w2 = st->b1 + C, st->b2 = st->w2 + C * (C + 1);
    }
    PE_ASSERT(st->C == C);

    /* this call's distinct positions */
    free(st->upos), free(st->u_tab), free(st->tok_u), free(st->grad);
    st->u_tab = NULL, st->grad = NULL, st->n_u = 0;
    st->upos = malloc(sizeof(int64_t) * BT);
    st->tok_u = malloc(sizeof(int64_t) * BT);
    if (!st->upos || !st->tok_u) return pe__fail(err, PE_ENOMEM, "out of memory for %lld positions", (long long)BT);
    memcpy(st->upos, ctx->pos, sizeof(int64_t) * BT);
    qsort(st->upos, (size_t)BT, sizeof(int64_t), cmp_i64);
    int64_t n_u = 0;
    for (int64_t i = 0; i < BT; i++)
        if (!n_u || st->upos[i] != st->upos[n_u - 1]) st->upos[n_u++] = st->upos[i];
    st->n_u = n_u;
    for (int64_t i = 0; i < BT; i++) st->tok_u[i] = lower(st->upos, n_u, ctx->pos[i]);
    st->u_tab = malloc(sizeof(int64_t) * n_u);
    if (!st->u_tab) return pe__fail(err, PE_ENOMEM, "out of memory for %lld positions", (long long)n_u);

    /* the checkpoint spacing for the largest grid index; room for every checkpoint */
    int64_t n_top, K = st->K;
    double r_top;
    pe__floater_grid(st->upos[n_u - 1], dt, step, &n_top, &r_top);
    int64_t want = (int64_t)ceil(sqrt((double)n_top + 1));
    want = want < 16 ? 16 : want;
    int valid = cache_valid(st, ctx);
    /* a new spacing when the grid grew past ~(2K)^2: a multiple of the old one keeps every
     * mult-th checkpoint */
    int64_t mult = valid && want > 2 * K ? (want + K - 1) / K : 1, K_new = valid ? K * mult : want;
    int64_t need = n_top / K_new + 2;
    if (need > st->cap_ckpt) {
        double *c2 = realloc(st->ckpt, sizeof(double) * N3 * need);
        if (!c2) return pe__fail(err, PE_ENOMEM, "out of memory for %lld floater checkpoints", (long long)need);
        st->ckpt = c2, st->cap_ckpt = need;
    }
    if (mult > 1) {
        int64_t kept = 0;
        for (int64_t c = 0; c < st->n_ckpt; c += mult, kept++)
            memmove(st->ckpt + kept * N3, st->ckpt + c * N3, sizeof(double) * N3);
        st->n_ckpt = kept;
    }
    st->K = K_new;
    if (!valid) cache_reset(st, ctx);

    /* the positions not in the table yet; past TABLE_BYTES, keep only this call's */
    int64_t n_miss = 0, *miss = malloc(sizeof(int64_t) * n_u);
    if (!miss) return pe__fail(err, PE_ENOMEM, "out of memory for %lld positions", (long long)n_u);
    for (int64_t u = 0; u < n_u; u++) {
        int64_t i = lower(st->tab_pos, st->n_tab, st->upos[u]);
        if (i == st->n_tab || st->tab_pos[i] != st->upos[u]) miss[n_miss++] = st->upos[u];
    }
    if ((size_t)(st->n_tab + n_miss) * N3 * sizeof(float) > TABLE_BYTES) {
        int64_t kept = 0; /* both sorted: keep the table's rows of this call */
        for (int64_t i = 0, u = 0; i < st->n_tab; i++) {
            while (u < n_u && st->upos[u] < st->tab_pos[i]) u++;
            if (u < n_u && st->upos[u] == st->tab_pos[i]) {
                st->tab_pos[kept] = st->tab_pos[i];
                memmove(st->tab_row + kept * N3, st->tab_row + i * N3, sizeof(float) * N3);
                kept++;
            }
        }
        st->n_tab = kept;
    }
    if (st->n_tab + n_miss > st->cap_tab) {
        int64_t cap = st->n_tab + n_miss;
        int64_t *p2 = realloc(st->tab_pos, sizeof(int64_t) * cap);
        if (p2) st->tab_pos = p2;
        float *r2 = p2 ? realloc(st->tab_row, sizeof(float) * N3 * cap) : NULL;
        if (r2) st->tab_row = r2;
        if (!p2 || !r2) {
            free(miss);
            return pe__fail(err, PE_ENOMEM, "out of memory for %lld floater rows", (long long)cap);
        }
        st->cap_tab = cap;
    }
    /* solve the missing rows into the free tail, then merge them in from the back */
    float *fresh = st->tab_row + st->n_tab * N3;
    solve_rows(st, miss, n_miss, fresh);
    float *tmp = malloc(sizeof(float) * N3 * (n_miss ? n_miss : 1));
    if (!tmp) {
        free(miss);
        return pe__fail(err, PE_ENOMEM, "out of memory for %lld floater rows", (long long)n_miss);
    }
    memcpy(tmp, fresh, sizeof(float) * N3 * n_miss);
    for (int64_t i = st->n_tab - 1, j = n_miss - 1, k = st->n_tab + n_miss - 1; j >= 0; k--) {
        if (i >= 0 && st->tab_pos[i] > miss[j]) {
            st->tab_pos[k] = st->tab_pos[i];
            memmove(st->tab_row + k * N3, st->tab_row + i * N3, sizeof(float) * N3);
            i--;
        } else {
            st->tab_pos[k] = miss[j];
            memcpy(st->tab_row + k * N3, tmp + j * N3, sizeof(float) * N3);
            j--;
        }
    }
    st->n_tab += n_miss;
    free(tmp), free(miss);
    for (int64_t u = 0; u < n_u; u++) st->u_tab[u] = lower(st->tab_pos, st->n_tab, st->upos[u]);
    return PE_OK;
}

/* q, k, v (B, T, C) += their rows of B(p dt) (floater has no memory and no GQA: Tk = T,
 * Ckv = C). */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    const floater_state *st = ctx->state;
    const int64_t C = ctx->C;
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++) {
        const float *row = st->tab_row + st->u_tab[st->tok_u[bt]] * 3 * C;
        for (int64_t c = 0; c < C; c++) {
            q[bt * C + c] += row[c];
            k[bt * C + c] += row[C + c];
            v[bt * C + c] += row[2 * C + c];
        }
    }
}

/* forward was q += B_q(p dt) (likewise k, v), so now: dB(p) += the rows of dq, dk, dv of the
 * tokens at position p; dq, dk, dv pass through unchanged. */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in,
                            const float *k_in) {
    (void)q_in, (void)k_in;
    floater_state *st = ctx->state;
    const int64_t C = ctx->C;
    if (!st->grad) {
        st->grad = calloc((size_t)(st->n_u * 3 * C), sizeof(float));
        PE_ASSERT(st->grad);
    }
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++) {
        float *g = st->grad + st->tok_u[bt] * 3 * C;
        for (int64_t c = 0; c < C; c++) {
            g[c] += dq[bt * C + c];
            g[C + c] += dk[bt * C + c];
            g[2 * C + c] += dv[bt * C + c];
        }
    }
}

/* seg (upto + 1, 3, C) = the states at grid points c K .. c K + upto, from checkpoint c. */
static void recompute(floater_state *st, int64_t c, int64_t upto, double *seg) {
    const int64_t N3 = 3 * st->C;
    PE_ASSERT(c < st->n_ckpt);
    memcpy(seg, st->ckpt + c * N3, sizeof(double) * N3);
    for (int64_t i = 1; i <= upto; i++)
        rk4(st, (double)(c * st->K + i - 1) * st->step, st->step, seg + (i - 1) * N3, seg + i * N3, st->work);
}

/* The adjoint of the solve: lam = dL/dB(t_n) walks the grid from the largest index down.
 * At grid point n it takes the gradients of the positions sampled there (through their
 * partial step, or directly on the grid), then goes back through the step n-1 -> n. The
 * states come from one segment of K steps at a time, recomputed from its checkpoint. */
static void finish_backward(pe__ctx *ctx) {
    floater_state *st = ctx->state;
    pe_grads *g = ctx->g;
    if (!st->grad) return; /* rotate_backward did not run */
    if (!g->dparam[B0] && !g->dparam[W1] && !g->dparam[B1] && !g->dparam[W2] && !g->dparam[B2]) goto done;
    const int64_t C = st->C, N3 = 3 * C, K = st->K;
    double *lam = st->work + 17 * N3, *lam2 = st->work + 18 * N3;
    double *acc = calloc((size_t)(2 * C * (C + 1) + 2 * C), sizeof(double));
    double *pend = malloc(sizeof(double) * 4 * GRAD_ROWS * C);
    double *seg = malloc(sizeof(double) * N3 * K); /* states c K .. c K + K - 1 */
    PE_ASSERT(acc && pend && seg);
    grads gr = {acc, acc + C * (C + 1), acc + C * (C + 1) + C, acc + 2 * C * (C + 1) + C,
                pend, pend + GRAD_ROWS * C, pend + 2 * GRAD_ROWS * C, pend + 3 * GRAD_ROWS * C, 0};

    int64_t u = st->n_u - 1, n, seg_c = -1;
    double r;
    pe__floater_grid(st->upos[u], st->dt, st->step, &n, &r);
    memset(lam, 0, sizeof(double) * N3);
    /* the state at grid point i, from the current segment (recomputed when i leaves it) */
#define STATE(i)                                                                              \
    (((i) / K != seg_c ? (seg_c = (i) / K, recompute(st, seg_c, (i) % K, seg)) : (void)0),    \
     seg + ((i) % K) * N3)
    for (; n >= 0; n--) {
        for (; u >= 0; u--) {
            int64_t gn;
            double gr_r;
            pe__floater_grid(st->upos[u], st->dt, st->step, &gn, &gr_r);
            if (gn != n) break;
            const float *gu = st->grad + u * N3; /* this position's dB */
            if (gr_r > 0) {
                for (int64_t e = 0; e < N3; e++) lam2[e] = gu[e];
                rk4_vjp(st, &gr, (double)n * st->step, gr_r, STATE(n), lam2, lam, st->work);
            } else {
                for (int64_t e = 0; e < N3; e++) lam[e] += gu[e];
            }
        }
        if (n == 0) break;
        memset(lam2, 0, sizeof(double) * N3);
        rk4_vjp(st, &gr, (double)(n - 1) * st->step, st->step, STATE(n - 1), lam, lam2, st->work);
        memcpy(lam, lam2, sizeof(double) * N3);
    }
#undef STATE
    grads_flush(st, &gr);
    /* B(0) = b0; the dynamics' gradients were summed in double */
    const int64_t sizes[4] = {C * (C + 1), C, C * (C + 1), C};
    const double *src[4] = {gr.w1, gr.b1, gr.w2, gr.b2};
    if (g->dparam[B0])
        for (int64_t e = 0; e < N3; e++) g->dparam[B0][e] += (float)lam[e];
    for (int i = 0; i < 4; i++)
        if (g->dparam[W1 + i])
            for (int64_t e = 0; e < sizes[i]; e++) g->dparam[W1 + i][e] += (float)src[i][e];
    free(acc), free(pend), free(seg);
done:
    free(st->grad);
    st->grad = NULL;
}

const pe__method pe__method_floater = {
    .name = "floater",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "floater_dt floater_step",
    .flags = PE__PERSIST,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .finish_backward = finish_backward,
    .rotate_forward = rotate_forward,
    .rotate_backward = rotate_backward,
};
