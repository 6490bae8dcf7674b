/* FIRE (Li et al. 2023, "Functional Interpolation for Relative Positions", the appendix code):
 *   u_ij = psi(i - j) / (psi(max(i, |L * init_L|)) + 1e-6),   psi(x) = ln(|c x| + 1)
 *   s = scale q.k + MLP(u_ij)_h,   MLP = Linear(1, 32) -> relu -> Linear(32, H)
 * i is the query's position: the normaliser grows with the absolute position of the query once
 * it passes the threshold |L * init_L|, so FIRE is not invariant under a global shift of
 * positions. Tensors fire_w1 [32, 1], fire_b1 [32], fire_w2 [H, 32], fire_b2 [H], fire_c [1],
 * fire_L [1]; key fire_init_L (512). Everything is computed in double, so a tiled kernel never
 * needs the (T, Tk) matrix of u.
 *
 * Every query below the threshold has the same normaliser, so there u, and the bias of each
 * head, depend only on |i - j|: prepare tabulates psi and those biases once per offset the
 * call can see (as t5 does its buckets), and a tile's gradient is gathered per offset before
 * the MLP's backward runs once per offset. Queries at or past the threshold are computed per
 * entry. */
#include "../internal.h"

enum { W1, B1, W2, B2, FC, FL };
enum { WIDTH = 32 }; /* the MLP's hidden width */

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg, (void)D;
    s[W1] = (pe_param_spec){"fire_w1", 2, {WIDTH, 1}, 0, {PE_INIT_LINEAR, 1, 0}};
    s[B1] = (pe_param_spec){"fire_b1", 1, {WIDTH}, 0, {PE_INIT_LINEAR, 1, 0}};
    s[W2] = (pe_param_spec){"fire_w2", 2, {H, WIDTH}, 0, {PE_INIT_LINEAR, WIDTH, 0}};
    s[B2] = (pe_param_spec){"fire_b2", 1, {H}, 0, {PE_INIT_LINEAR, WIDTH, 0}};
    s[FC] = (pe_param_spec){"fire_c", 1, {1}, 0, {PE_INIT_CONST, 0.1, 0}};
    s[FL] = (pe_param_spec){"fire_L", 1, {1}, 0, {PE_INIT_CONST, 1, 0}};
    return 6;
}

static inline double sign(double x) { return (double)((x > 0) - (x < 0)); }

/* One query row: the normaliser den = psi(m) + 1e-6 with m = max(i, thr), and what the
 * backward needs of it: dden/dc and dden/dthr (max splits a tie evenly between its
 * arguments, as torch.max does). */
typedef struct {
    double den, dden_dc, dden_dthr;
} row_norm;

static row_norm normaliser(double c, double thr, double i) {
    double m = i > thr ? i : thr, cm = c * m;
    double dm_dthr = thr > i ? 1.0 : thr == i ? 0.5 : 0.0;
    return (row_norm){log(fabs(cm) + 1.0) + 1e-6, sign(cm) * m / (fabs(cm) + 1.0),
                      sign(cm) * c / (fabs(cm) + 1.0) * dm_dthr};
}

/* The MLP of one head in double (or its gradient): w1, b1, w2 (WIDTH), b2. */
typedef struct {
    double w1[WIDTH], b1[WIDTH], w2[WIDTH], b2;
} head_mlp;

static head_mlp mlp_of(const pe__ctx *ctx, int64_t h) {
    const float *const *P = ctx->w->param;
    head_mlp m;
    for (int k = 0; k < WIDTH; k++) m.w1[k] = P[W1][k], m.b1[k] = P[B1][k], m.w2[k] = P[W2][h * WIDTH + k];
    m.b2 = P[B2][h];
    return m;
}

static double mlp(const head_mlp *m, double u) {
    double out = m->b2;
    for (int k = 0; k < WIDTH; k++) {
        double a = m->w1[k] * u + m->b1[k];
        if (a > 0) out += m->w2[k] * a;
    }
    return out;
}

/* forward was out = b2 + sum_k w2_k relu(a_k), a_k = w1_k u + b1_k, so now, with g = dout:
 * db2 += g, dw2_k += g relu(a_k), da_k = g w2_k [a_k > 0], dw1_k += da_k u, db1_k += da_k;
 * returns du = sum_k da_k w1_k. */
static double mlp_backward(const head_mlp *m, head_mlp *d, double u, double g) {
    double du = 0;
    d->b2 += g;
    for (int k = 0; k < WIDTH; k++) {
        double a = m->w1[k] * u + m->b1[k];
        if (!(a > 0)) continue;
        double da = g * m->w2[k];
        d->w2[k] += g * a;
        d->w1[k] += da * u;
        d->b1[k] += da;
        du += da * m->w1[k];
    }
    return du;
}

/* The call's tables, for offsets 0..span (span = pos_max - pos_min): psi, and the bias of each
 * head for a query below the threshold. Without them (a span wider than the entries
 * themselves, e.g. two tokens a million positions apart) everything is per entry. */
typedef struct {
    double c, thr;
    row_norm below; /* the normaliser of every query below thr */
    int64_t span;
    double *psi;  /* (span + 1) */
    double *bias; /* (H, span + 1) */
} fire_state;

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const float *const *P = ctx->w->param;
    fire_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory");
    st->c = P[FC][0], st->thr = fabs((double)P[FL][0] * ctx->cfg->fire_init_L);
    st->below = normaliser(st->c, st->thr, -INFINITY);
    int64_t span = pe__offset_table_span(ctx, 0);
    if (span >= 0) {
        st->span = span;
        st->psi = malloc(sizeof(double) * (span + 1) * (ctx->H + 1));
        if (st->psi) {
            st->bias = st->psi + span + 1;
            for (int64_t x = 0; x <= st->span; x++) st->psi[x] = log(fabs(st->c * (double)x) + 1.0);
            for (int64_t h = 0; h < ctx->H; h++) {
                head_mlp m = mlp_of(ctx, h);
                for (int64_t x = 0; x <= st->span; x++)
                    st->bias[h * (span + 1) + x] = mlp(&m, st->psi[x] / st->below.den);
            }
        }
    }
    ctx->state = st;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    fire_state *st = ctx->state;
    free(st->psi), free(st);
    ctx->state = NULL;
}

/* Whether query position p takes the tables (below the threshold, tables built). */
static inline int tabled(const fire_state *st, int64_t p) { return st->psi && (double)p < st->thr; }

/* psi(i - j), from the table when there is one (then |i - j| <= span < 2^22) */
static inline double psi_at(const fire_state *st, int64_t i, int64_t j) {
    if (st->psi) return st->psi[i > j ? i - j : j - i];
    return log(fabs(st->c * ((double)i - (double)j)) + 1.0);
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const fire_state *st = ctx->state;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    const double *bias = st->psi ? st->bias + h * (st->span + 1) : NULL;
    head_mlp m = mlp_of(ctx, h);
    for (int64_t i = 0; i < ni; i++) {
        int64_t pi = pos[i0 + i];
        float *si = s + i * lds;
        if (tabled(st, pi)) {
            for (int64_t j = 0; j < nj; j++) {
                int64_t x = pi - kpos[j0 + j];
                si[j] = (float)((double)si[j] + bias[x < 0 ? -x : x]);
            }
            continue;
        }
        double den = normaliser(st->c, st->thr, (double)pi).den;
        for (int64_t j = 0; j < nj; j++)
            si[j] = (float)((double)si[j] + mlp(&m, psi_at(st, pi, kpos[j0 + j]) / den));
    }
}

/* forward was s += MLP(u)_h, u = N / den with N = psi(i - j), so now, with g = ds_ij and
 * du from mlp_backward:
 *   dc += du (dN/dc / den - N dden/dc / den^2), dthr += du (-N dden/dthr / den^2),
 *   dL += dthr sign(L init_L) init_L.
 * The entries of the tabled rows share den and depend on |i - j| only, and all of this is
 * linear in g: their g are summed per offset first (when the tile's offsets are fewer than
 * its entries), then each offset runs once. */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const fire_state *st = ctx->state;
    float *const *G = ctx->g->dparam;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    const double c = st->c, init_L = ctx->cfg->fire_init_L;
    head_mlp m = mlp_of(ctx, h), d = {0};
    double dc = 0, dthr = 0;

    /* gx (nx): the tabled rows' g summed per offset, when the tile has fewer offsets (at most
     * its span of positions) than entries */
    int64_t nx = 0;
    double *gx = NULL;
    if (st->psi) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int64_t e = 0; e < ni + nj; e++) { /* the rows', then the columns' positions */
            int64_t p = e < ni ? pos[i0 + e] : kpos[j0 + e - ni];
            lo = p < lo ? p : lo, hi = p > hi ? p : hi;
        }
        nx = hi - lo + 1;
        if (nx <= ni * nj) gx = calloc((size_t)nx, sizeof(double));
    }

    for (int64_t i = 0; i < ni; i++) {
        int64_t pi = pos[i0 + i];
        const float *gi = ds + i * lds;
        if (gx && tabled(st, pi)) {
            for (int64_t j = 0; j < nj; j++) {
                int64_t x = pi - kpos[j0 + j];
                gx[x < 0 ? -x : x] += gi[j];
            }
            continue;
        }
        row_norm rn = normaliser(c, st->thr, (double)pi);
        double dc_num = 0, dc_den = 0; /* this row's sums of du dN/dc and du N */
        for (int64_t j = 0; j < nj; j++) {
            if (gi[j] == 0) continue; /* masked entries contribute nothing */
            double x = (double)pi - (double)kpos[j0 + j], cx = c * x, N = psi_at(st, pi, kpos[j0 + j]);
            double du = mlp_backward(&m, &d, N / rn.den, gi[j]);
            dc_num += du * sign(cx) * x / (fabs(cx) + 1.0);
            dc_den += du * N;
        }
        double inv = 1.0 / rn.den;
        dc += dc_num * inv - dc_den * rn.dden_dc * inv * inv;
        dthr -= dc_den * rn.dden_dthr * inv * inv;
    }
    if (gx) { /* the tabled rows, one offset at a time */
        const row_norm rn = st->below;
        double dc_num = 0, dc_den = 0;
        for (int64_t x = 0; x < nx; x++) {
            if (gx[x] == 0) continue;
            double cx = c * (double)x, N = st->psi[x];
            double du = mlp_backward(&m, &d, N / rn.den, gx[x]);
            dc_num += du * sign(cx) * (double)x / (fabs(cx) + 1.0);
            dc_den += du * N;
        }
        double inv = 1.0 / rn.den;
        dc += dc_num * inv - dc_den * rn.dden_dc * inv * inv;
        dthr -= dc_den * rn.dden_dthr * inv * inv;
        free(gx);
    }
    for (int k = 0; k < WIDTH; k++) {
        if (G[W1]) G[W1][k] += (float)d.w1[k];
        if (G[B1]) G[B1][k] += (float)d.b1[k];
        if (G[W2]) G[W2][h * WIDTH + k] += (float)d.w2[k];
    }
    if (G[B2]) G[B2][h] += (float)d.b2;
    if (G[FC]) G[FC][0] += (float)dc;
    if (G[FL]) G[FL][0] += (float)(dthr * sign((double)ctx->w->param[FL][0] * init_L) * init_L);
}

const pe__method pe__method_fire = {
    .name = "fire",
    .reference = "Li et al. 2023, FIRE (paper appendix)",
    .family = PE_FAMILY_BIAS,
    .keys = "fire_init_L",
    .flags = PE__GQA | PE__FUSED,
    .params = params,
    .prepare = prepare,
    .release = release,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
