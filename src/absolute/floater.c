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
 * sqrt(N) steps (checkpoints); backward walks down the grid, recomputes the stages (stage
 * inputs and pre-activations) of one segment of K steps at a time from its checkpoint and
 * runs each step's vector-Jacobian product on them. Forward also keeps the stages of the first
 * TRAJ_BYTES of the grid (the trajectory), which backward reads instead of recomputing: a
 * short sequence costs N steps forward and N step VJPs (about 2 N steps) backward, a long
 * one up to N more recomputed steps.
 *
 * Cache. The layer keeps (PE__PERSIST) the checkpoints and a table of B(p dt) for every
 * position solved so far, keyed on a bit-exact copy of the five tensors and of floater_dt,
 * floater_step: a call with the same parameters only solves positions it has not seen (from
 * the nearest checkpoint), any change re-solves from t = 0. The table holds at most
 * TABLE_BYTES (beyond it, only the current call's positions are kept). */
#include <float.h>

#include "floater.h"

int64_t pe__floater_steps(void) { return atomic_load_explicit(&pe__floater_steps_taken, memory_order_relaxed); }

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

static size_t key_floats(int64_t C) { return (size_t)(3 * C + 2 * C * (C + 1) + 2 * C); }

static void release(pe__ctx *ctx) {
    floater_state *st = ctx->state;
    if (!st) return;
    free(st->key), free(st->w1), free(st->ckpt), free(st->traj), free(st->traj_y);
    free(st->tab_pos), free(st->tab_row);
    free(st->upos), free(st->u_tab), free(st->tok_u), free(st->grad), free(st->work), free(st->adj);
    free(st);
    ctx->state = NULL;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (!(cfg->floater_dt >= 0)) return pe_error(err, PE_EKEY, "key 'floater_dt': %g must be >= 0", cfg->floater_dt);
    if (!(cfg->floater_step > 0))
        return pe_error(err, PE_EKEY, "key 'floater_step': %g must be > 0", cfg->floater_step);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg;
    int64_t C = H * D;
    s[B0] = (pe_param_spec){"floater_b0", 2, {3, C}, 0, {PE_INIT_NORMAL, 1, 0}};
    s[W1] = (pe_param_spec){"floater_w1", 2, {C, C + 1}, 0, {PE_INIT_XAVIER, 0, 0}};
    s[B1] = (pe_param_spec){"floater_b1", 1, {C}, 0, {PE_INIT_CONST, 0, 0}};
    s[W2] = (pe_param_spec){"floater_w2", 2, {C, C + 1}, 0, {PE_INIT_XAVIER, 0, 0}};
    s[B2] = (pe_param_spec){"floater_b2", 1, {C}, 0, {PE_INIT_CONST, 0, 0}};
    /* xuanqing94/FLOATER: one dynamics network for the model, each layer its own initial value */
    for (int i = W1; i <= B2; i++) s[i].shared = 1;
    return 5;
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
    for (int64_t i = 0; i < C; i++) {
        for (int64_t j = 0; j < C; j++)
            st->w1t[j * C + i] = st->w1[i * (C + 1) + j], st->w2t[j * C + i] = st->w2[i * (C + 1) + j];
        st->w1c[i] = st->w1[i * (C + 1) + C], st->w2c[i] = st->w2[i * (C + 1) + C];
    }
    st->dt = ctx->cfg->floater_dt, st->step = ctx->cfg->floater_step;
    st->n_ckpt = 1;
    st->n_traj = 0;
    memcpy(st->traj_y, st->ckpt, sizeof(double) * 3 * C);
    st->n_tab = 0;
}

/* Brings the walker (*m, y) to grid point n: from the checkpoint at or below n when that is
 * ahead of the walker, recording each checkpoint it passes for the first time, and the
 * stages of each step that extends the trajectory. */
static void walk_to(floater_state *st, int64_t n, int64_t *m, double *y) {
    const int64_t N3 = 3 * st->C, K = st->K;
    int64_t c = n / K < st->n_ckpt ? n / K : st->n_ckpt - 1;
    if (*m < 0 || *m > n || *m < c * K) {
        memcpy(y, st->ckpt + c * N3, sizeof(double) * N3);
        *m = c * K;
    }
    while (*m < n) {
        int keep = *m == st->n_traj && *m < st->cap_traj;
        double *stg = keep ? st->traj + *m * STAGES * N3 : st->work;
        pe__floater_rk4(st, (double)*m * st->step, st->step, y, y, stg, st->work + STAGES * N3);
        if (keep) memcpy(st->traj_y, y, sizeof(double) * N3), st->n_traj++;
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
            pe__floater_rk4(st, (double)g * st->step, r, y, out, st->work, st->work + STAGES * N3);
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

/* finish_backward's scratch: the dynamics' gradients (2, C, C+2), the pending rows and one
 * segment of K steps' stages */
static size_t adj_floats(int64_t C, int64_t K) {
    return (size_t)(2 * C * (C + 2) + GRAD_ROWS * (4 * C + 4) + STAGES * 3 * C * K);
}

/* Makes every position of the call available in the table: validates, refreshes the cache,
 * solves what is missing. On failure the cache is left as it was. */
static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const int64_t C = ctx->C, N3 = 3 * C, BT = ctx->B * ctx->T, NT = BT + ctx->B * ctx->Tk;
    const double dt = ctx->cfg->floater_dt, step = ctx->cfg->floater_step;
    if (ctx->pos_min < 0)
        return pe_error(err, PE_EPOS, "position %lld is negative: floater solves its ODE forward from t = 0",
                        (long long)ctx->pos_min);
    if ((double)ctx->pos_max * dt / step > 9007199254740992.0 /* 2^53 */)
        return pe_error(err, PE_EPOS, "position %lld needs more than 2^53 RK4 steps of floater_step %g",
                        (long long)ctx->pos_max, step);
    floater_state *st = ctx->state;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return pe_error(err, PE_ENOMEM, "out of memory for the floater state");
        st->C = C;
        st->key = malloc(sizeof(float) * key_floats(C));
        st->w1 = malloc(sizeof(double) * (2 * C * (C + 1) + 2 * C + 2 * C * C + 2 * C));
        st->work = malloc(sizeof(double) * WORK_BLOCKS * N3);
        st->ckpt = malloc(sizeof(double) * N3);
        st->traj_y = malloc(sizeof(double) * N3);
        st->cap_ckpt = 1;
        ctx->state = st;
        if (!st->key || !st->w1 || !st->work || !st->ckpt || !st->traj_y) {
            release(ctx);
            return pe_error(err, PE_ENOMEM, "out of memory for the floater state");
        }
        st->b1 = st->w1 + C * (C + 1), st->w2 = st->b1 + C, st->b2 = st->w2 + C * (C + 1);
        st->w1t = st->b2 + C, st->w2t = st->w1t + C * C, st->w1c = st->w2t + C * C, st->w2c = st->w1c + C;
    }
    PE_ASSERT(st->C == C);
    st->mm3 = pe__floater_mm3_pick(ctx->run);

    /* this call's distinct positions */
    free(st->upos), free(st->u_tab), free(st->tok_u), free(st->grad);
    st->u_tab = NULL, st->grad = NULL, st->n_u = 0;
    st->upos = malloc(sizeof(int64_t) * NT);
    st->tok_u = malloc(sizeof(int64_t) * NT);
    if (!st->upos || !st->tok_u) return pe_error(err, PE_ENOMEM, "out of memory for %lld positions", (long long)NT);
    memcpy(st->upos, ctx->pos, sizeof(int64_t) * BT);
    memcpy(st->upos + BT, ctx->kpos, sizeof(int64_t) * (NT - BT));
    qsort(st->upos, (size_t)NT, sizeof(int64_t), cmp_i64);
    int64_t n_u = 0;
    for (int64_t i = 0; i < NT; i++)
        if (!n_u || st->upos[i] != st->upos[n_u - 1]) st->upos[n_u++] = st->upos[i];
    st->n_u = n_u;
    for (int64_t i = 0; i < NT; i++) st->tok_u[i] = lower(st->upos, n_u, i < BT ? ctx->pos[i] : ctx->kpos[i - BT]);
    st->u_tab = malloc(sizeof(int64_t) * n_u);
    if (!st->u_tab) return pe_error(err, PE_ENOMEM, "out of memory for %lld positions", (long long)n_u);

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
        if (!c2) return pe_error(err, PE_ENOMEM, "out of memory for %lld floater checkpoints", (long long)need);
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
    /* room for the trajectory up to n_top within TRAJ_BYTES; without it, backward recomputes */
    int64_t traj_want = (int64_t)(TRAJ_BYTES / (sizeof(double) * STAGES * N3));
    traj_want = n_top < traj_want ? n_top : traj_want;
    if (traj_want > st->cap_traj) {
        double *t2 = realloc(st->traj, sizeof(double) * STAGES * N3 * traj_want);
        if (t2) st->traj = t2, st->cap_traj = traj_want;
    }

    /* the positions not in the table yet; past TABLE_BYTES, keep only this call's */
    int64_t n_miss = 0, *miss = malloc(sizeof(int64_t) * n_u);
    if (!miss) return pe_error(err, PE_ENOMEM, "out of memory for %lld positions", (long long)n_u);
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
            return pe_error(err, PE_ENOMEM, "out of memory for %lld floater rows", (long long)cap);
        }
        st->cap_tab = cap;
    }
    /* solve the missing rows into the free tail, then merge them in from the back */
    float *fresh = st->tab_row + st->n_tab * N3;
    solve_rows(st, miss, n_miss, fresh);
    float *tmp = malloc(sizeof(float) * N3 * (n_miss ? n_miss : 1));
    if (!tmp) {
        free(miss);
        return pe_error(err, PE_ENOMEM, "out of memory for %lld floater rows", (long long)n_miss);
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
    /* what backward needs, so that it cannot fail: dB per position, the adjoint's scratch */
    st->grad = calloc((size_t)(n_u * N3), sizeof(float));
    st->have_grad = 0;
    const size_t adj = adj_floats(C, st->K);
    if (adj > st->adj_cap) {
        free(st->adj);
        st->adj = malloc(sizeof(double) * adj);
        st->adj_cap = st->adj ? adj : 0;
    }
    if (!st->grad || !st->adj)
        return pe_error(err, PE_ENOMEM, "out of memory for the floater gradients of %lld positions", (long long)n_u);
    return PE_OK;
}

/* q (B, T, C) += B_q at the query positions; k, v (B, Tk, C) += B_k, B_v at the key
 * positions (floater has no GQA: Ckv = C). q, or k and v, may be NULL. */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    const floater_state *st = ctx->state;
    const int64_t C = ctx->C, BT = ctx->B * ctx->T;
    for (int64_t bt = 0; bt < BT && q; bt++) {
        const float *row = st->tab_row + st->u_tab[st->tok_u[bt]] * 3 * C;
        for (int64_t c = 0; c < C; c++) q[bt * C + c] += row[c];
    }
    for (int64_t bu = 0; bu < ctx->B * ctx->Tk && k; bu++) {
        const float *row = st->tab_row + st->u_tab[st->tok_u[BT + bu]] * 3 * C;
        for (int64_t c = 0; c < C; c++) {
            k[bu * C + c] += row[C + c];
            v[bu * C + c] += row[2 * C + c];
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
    st->have_grad = 1;
    const int64_t BT = ctx->B * ctx->T;
    for (int64_t bt = 0; bt < BT; bt++) {
        float *g = st->grad + st->tok_u[bt] * 3 * C;
        for (int64_t c = 0; c < C; c++) g[c] += dq[bt * C + c];
    }
    for (int64_t bu = 0; bu < ctx->B * ctx->Tk; bu++) {
        float *g = st->grad + st->tok_u[BT + bu] * 3 * C;
        for (int64_t c = 0; c < C; c++) {
            g[C + c] += dk[bu * C + c];
            g[2 * C + c] += dv[bu * C + c];
        }
    }
}

/* The stages of the full step from grid point i (its state is the first block): from the
 * trajectory, else from seg (K, STAGES, 3, C), the steps c K, c K + 1, ... of segment
 * c = *seg_c, recomputed from checkpoint i / K up to i when i leaves the segment. Backward asks
 * for decreasing i, so each segment is recomputed once. */
static const double *stages_at(floater_state *st, int64_t i, int64_t *seg_c, double *seg) {
    const int64_t N3 = 3 * st->C, S = STAGES * N3, K = st->K, c = i / K;
    if (i < st->n_traj) return st->traj + i * S;
    if (c != *seg_c) {
        PE_ASSERT(c < st->n_ckpt);
        double *y = st->work + 19 * N3;
        memcpy(y, st->ckpt + c * N3, sizeof(double) * N3);
        for (int64_t j = 0; j <= i % K; j++)
            pe__floater_rk4(st, (double)(c * K + j) * st->step, st->step, y, y, seg + j * S, st->work + STAGES * N3);
        *seg_c = c;
    }
    return seg + (i % K) * S;
}

/* The state at grid point i, for a partial step from it: the trajectory's end when that is i. */
static const double *state_at(floater_state *st, int64_t i, int64_t *seg_c, double *seg) {
    return i == st->n_traj ? st->traj_y : stages_at(st, i, seg_c, seg);
}

/* The adjoint of the solve: lam = dL/dB(t_n) walks the grid from the largest index down.
 * At grid point n it takes the gradients of the positions sampled there (through their
 * partial step, or directly on the grid), then goes back through the step n-1 -> n, on the
 * stages from stages_at. */
static void finish_backward(pe__ctx *ctx) {
    floater_state *st = ctx->state;
    pe_grads *g = ctx->g;
    if (!st->have_grad) return; /* rotate_backward did not run */
    if (!g->dparam[B0] && !g->dparam[W1] && !g->dparam[B1] && !g->dparam[W2] && !g->dparam[B2]) goto done;
    const int64_t C = st->C, N3 = 3 * C;
    double *lam = st->work + 17 * N3, *lam2 = st->work + 18 * N3, *vjp_work = st->work + 14 * N3;
    double *acc = st->adj, *pend = acc + 2 * C * (C + 2); /* from prepare (adj_floats) */
    double *seg = pend + GRAD_ROWS * (4 * C + 4);          /* one segment's stages */
    memset(acc, 0, sizeof(double) * (size_t)(2 * C * (C + 2)));
    grads gr = {acc, acc + C * (C + 2), pend, pend + GRAD_ROWS * C, pend + 2 * GRAD_ROWS * C,
                pend + GRAD_ROWS * (3 * C + 2), 0};

    int64_t u = st->n_u - 1, n, seg_c = -1;
    double r;
    pe__floater_grid(st->upos[u], st->dt, st->step, &n, &r);
    memset(lam, 0, sizeof(double) * N3);
    for (; n >= 0; n--) {
        for (; u >= 0; u--) {
            int64_t gn;
            double gr_r;
            pe__floater_grid(st->upos[u], st->dt, st->step, &gn, &gr_r);
            if (gn != n) break;
            const float *gu = st->grad + u * N3; /* this position's dB */
            if (gr_r > 0) { /* the partial step's stages, into work 0-7 */
                double *stg = st->work, *out = st->work + 16 * N3;
                for (int64_t e = 0; e < N3; e++) lam2[e] = gu[e];
                const double *y = state_at(st, n, &seg_c, seg);
                pe__floater_rk4(st, (double)n * st->step, gr_r, y, out, stg, st->work + STAGES * N3);
                pe__floater_rk4_vjp(st, &gr, (double)n * st->step, gr_r, stg, lam2, lam, vjp_work);
            } else {
                for (int64_t e = 0; e < N3; e++) lam[e] += gu[e];
            }
        }
        if (n == 0) break;
        memset(lam2, 0, sizeof(double) * N3);
        pe__floater_rk4_vjp(st, &gr, (double)(n - 1) * st->step, st->step, stages_at(st, n - 1, &seg_c, seg), lam, lam2,
                vjp_work);
        memcpy(lam, lam2, sizeof(double) * N3);
    }
    pe__floater_grads_flush(st, &gr);
    /* B(0) = b0; the dynamics' gradients were summed in double, [dW | db] rows */
    if (g->dparam[B0])
        for (int64_t e = 0; e < N3; e++) g->dparam[B0][e] += (float)lam[e];
    for (int l = 0; l < 2; l++) {
        const double *src = l ? gr.w2 : gr.w1;
        float *dw = g->dparam[l ? W2 : W1], *db = g->dparam[l ? B2 : B1];
        for (int64_t i = 0; i < C; i++) {
            if (dw)
                for (int64_t j = 0; j <= C; j++) dw[i * (C + 1) + j] += (float)src[i * (C + 2) + j];
            if (db) db[i] += (float)src[i * (C + 2) + C + 1];
        }
    }
done:
    memset(st->grad, 0, sizeof(float) * (size_t)(st->n_u * 3 * st->C));
    st->have_grad = 0;
}

const pe__method pe__method_floater = {
    .name = "floater",
    .reference = "Liu et al. 2020, FLOATER (xuanqing94/FLOATER)",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "floater_dt floater_step",
    .flags = PE__PERSIST | PE__FUSED,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .finish_backward = finish_backward,
    .rotate_forward = rotate_forward,
    .not_a_rotation = "FLOATER adds its ODE's biases to q, k and v, no rotation",
    .rotate_backward = rotate_backward,
};
