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
 * entry.
 *
 * The MLP takes one scalar through a ReLU, so it is piecewise linear in u: between the kinks
 * u = -b1_k / w1_k, sorted, the same units are active and MLP(u)_h = A_hs + B_hs u. prepare
 * tabulates the kinks and each segment's A, B per head, so an entry costs one multiply-add
 * instead of 32 hidden units: along a tile's row of consecutive keys u is monotone on each side
 * of the diagonal, so a segment covers a run of entries, found by bisection; a backward sums g
 * and g u per segment and spreads them over the segment's units once per tile. A u within rounding of a
 * kink may take the unit on the kink's other side: there the unit's output is 0 either way. */
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

/* The MLP in pieces: kinks t (sorted; the units with w1_k != 0), the units active in each
 * segment s (u above s of the kinks), and out = a + b u there, per head: a, b (H, nk + 1). */
typedef struct {
    int nk;
    double t[WIDTH];
    uint32_t act[WIDTH + 1];
    double *a, *b;
} fire_pieces;

/* The segment of u: how many kinks lie below it, walked from *at (the segment of the entry
 * before: along a row of a tile u rises or falls with the offset, so the walk is mostly no
 * step, where a binary search mispredicts at every level). */
static inline int segment(const fire_pieces *pw, double u, int *at) {
    int s = *at;
    while (s < pw->nk && pw->t[s] < u) s++;
    while (s > 0 && !(pw->t[s - 1] < u)) s--;
    return *at = s;
}

static inline double mlp(const fire_pieces *pw, int64_t h, double u, int *seg) {
    const int64_t at = h * (pw->nk + 1) + segment(pw, u, seg);
    return pw->a[at] + pw->b[at] * u;
}

/* pw for the call's w1, b1, w2, b2 (a, b malloc'ed with H (nk + 1) doubles each, or 0) */
static int pieces_of(const pe__ctx *ctx, fire_pieces *pw) {
    const float *const *P = ctx->w->param;
    int order[WIDTH];
    pw->nk = 0;
    for (int k = 0; k < WIDTH; k++) {
        if (P[W1][k] == 0) continue;
        double t = -(double)P[B1][k] / P[W1][k];
        int at = pw->nk++;
        for (; at > 0 && pw->t[at - 1] > t; at--) pw->t[at] = pw->t[at - 1], order[at] = order[at - 1];
        pw->t[at] = t, order[at] = k;
    }
    uint32_t always = 0; /* w1 = 0: active everywhere if b1 > 0 */
    for (int k = 0; k < WIDTH; k++)
        if (P[W1][k] == 0 && P[B1][k] > 0) always |= 1u << k;
    for (int s = 0; s <= pw->nk; s++) { /* active: w1 > 0 above its kink, w1 < 0 below */
        uint32_t act = always;
        for (int r = 0; r < pw->nk; r++)
            if ((P[W1][order[r]] > 0) == (r < s)) act |= 1u << order[r];
        pw->act[s] = act;
    }
    const int64_t H = ctx->H, ns = pw->nk + 1;
    pw->a = malloc(sizeof(double) * (size_t)(2 * H * ns));
    if (!pw->a) return -1;
    pw->b = pw->a + H * ns;
    for (int64_t h = 0; h < H; h++)
        for (int s = 0; s < ns; s++) {
            double a = P[B2][h], b = 0;
            for (int k = 0; k < WIDTH; k++)
                if (pw->act[s] >> k & 1)
                    a += (double)P[W2][h * WIDTH + k] * P[B1][k], b += (double)P[W2][h * WIDTH + k] * P[W1][k];
            pw->a[h * ns + s] = a, pw->b[h * ns + s] = b;
        }
    return 0;
}

/* A tile's backward sums per segment: g and g u */
typedef struct {
    double g[WIDTH + 1], gu[WIDTH + 1];
} seg_sums;

/* forward was out = A_hs + B_hs u, so with g = dout: du = g B_hs, and the segment's sums grow */
static inline double mlp_backward(const fire_pieces *pw, int64_t h, seg_sums *acc, double u, double g, int *seg) {
    const int s = segment(pw, u, seg);
    acc->g[s] += g, acc->gu[s] += g * u;
    return g * pw->b[h * (pw->nk + 1) + s];
}

/* The sums into head h's gradients: in segment s, out = b2 + sum over its units of
 * w2_k (w1_k u + b1_k), so db2 += G, dw2_k += w1_k GU + b1_k G, dw1_k += w2_k GU, db1_k += w2_k G. */
static void spread(const pe__ctx *ctx, const fire_pieces *pw, int64_t h, const seg_sums *acc) {
    const float *const *P = ctx->w->param;
    float *const *G = ctx->g->dparam;
    double dw1[WIDTH] = {0}, db1[WIDTH] = {0}, dw2[WIDTH] = {0}, db2 = 0;
    for (int s = 0; s <= pw->nk; s++) {
        const double g = acc->g[s], gu = acc->gu[s];
        if (g == 0 && gu == 0) continue;
        db2 += g;
        for (int k = 0; k < WIDTH; k++) {
            if (!(pw->act[s] >> k & 1)) continue;
            const double w2 = P[W2][h * WIDTH + k];
            dw2[k] += P[W1][k] * gu + P[B1][k] * g, dw1[k] += w2 * gu, db1[k] += w2 * g;
        }
    }
    for (int k = 0; k < WIDTH; k++) {
        if (G[W1]) G[W1][k] += (float)dw1[k];
        if (G[B1]) G[B1][k] += (float)db1[k];
        if (G[W2]) G[W2][h * WIDTH + k] += (float)dw2[k];
    }
    if (G[B2]) G[B2][h] += (float)db2;
}

/* The call's tables, for offsets 0..span (span = pos_max - pos_min): psi, and the bias of each
 * head for a query below the threshold. Without them (a span wider than the entries
 * themselves, e.g. two tokens a million positions apart) everything is per entry. */
typedef struct {
    double c, thr;
    row_norm below; /* the normaliser of every query below thr */
    fire_pieces pw;
    int64_t span;
    double *psi;  /* (span + 1) */
    double *dpsi; /* (span + 1): d psi(x) / dc = sign(c x) x / (|c x| + 1) */
    /* (span + 1) each: psi and dpsi mirrored, psim[span - x] = psi[x], so that the entries
     * before a row's diagonal (offset d - k) read them upwards (span - d + k): a loop that
     * read psi downwards stayed scalar, and ran at 0.7x the speed per entry */
    double *psim, *dpsim;
    double *bias; /* (H, span + 1) */
    row_norm *rows; /* (B, T): every query's normaliser (one log a query, not one a tile row) */
} fire_state;

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const float *const *P = ctx->w->param;
    fire_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory");
    st->c = P[FC][0], st->thr = fabs((double)P[FL][0] * ctx->cfg->fire_init_L);
    st->below = normaliser(st->c, st->thr, -INFINITY);
    if (pieces_of(ctx, &st->pw)) return free(st), pe_error(err, PE_ENOMEM, "out of memory");
    st->rows = malloc(sizeof(row_norm) * (size_t)(ctx->B * ctx->T));
    if (!st->rows) return free(st->pw.a), free(st), pe_error(err, PE_ENOMEM, "out of memory");
    for (int64_t e = 0; e < ctx->B * ctx->T; e++) st->rows[e] = normaliser(st->c, st->thr, (double)ctx->pos[e]);
    int64_t span = pe__offset_table_span(ctx, 0);
    if (span >= 0) {
        st->span = span;
        st->psi = malloc(sizeof(double) * (span + 1) * (ctx->H + 4));
        if (st->psi) {
            st->dpsi = st->psi + span + 1, st->psim = st->dpsi + span + 1, st->dpsim = st->psim + span + 1;
            st->bias = st->dpsim + span + 1;
            for (int64_t x = 0; x <= st->span; x++) {
                const double cx = st->c * (double)x;
                st->psi[x] = log(fabs(cx) + 1.0), st->dpsi[x] = sign(cx) * (double)x / (fabs(cx) + 1.0);
            }
            for (int64_t x = 0; x <= st->span; x++) st->psim[span - x] = st->psi[x], st->dpsim[span - x] = st->dpsi[x];
            for (int64_t h = 0; h < ctx->H; h++) {
                int seg = 0;
                for (int64_t x = 0; x <= st->span; x++)
                    st->bias[h * (span + 1) + x] = mlp(&st->pw, h, st->psi[x] * (1.0 / st->below.den), &seg);
            }
        }
    }
    ctx->state = st;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    fire_state *st = ctx->state;
    free(st->psi), free(st->pw.a), free(st->rows), free(st);
    ctx->state = NULL;
}

/* Whether query position p takes the tables (below the threshold, tables built). */
static inline int tabled(const fire_state *st, int64_t p) { return st->psi && (double)p < st->thr; }

/* Whether the n positions p run consecutively, p[k] = p[0] + k */
static inline int consecutive(const int64_t *p, int64_t n) {
    for (int64_t k = 1; k < n; k++)
        if (p[k] - p[0] != k) return 0;
    return 1;
}

/* psi(i - j), from the table when there is one (then |i - j| <= span < 2^22) */
static inline double psi_at(const fire_state *st, int64_t i, int64_t j) {
    if (st->psi) return st->psi[i > j ? i - j : j - i];
    return log(fabs(st->c * ((double)i - (double)j)) + 1.0);
}

/* d psi(i - j) / dc = sign(c x) x / (|c x| + 1), x = i - j: even in x, so tabled as psi */
static inline double dpsi_at(const fire_state *st, int64_t i, int64_t j) {
    if (st->psi) return st->dpsi[i > j ? i - j : j - i];
    const double x = (double)i - (double)j, cx = st->c * x;
    return sign(cx) * x / (fabs(cx) + 1.0);
}

/* The rows past the threshold, where the tile's key positions run consecutively: along a row
 * |i - j| falls to the diagonal and rises after it, so u is monotone on each side and each
 * segment of the MLP covers a run of consecutive entries. A run's end is found by bisection
 * (on the same comparisons as segment's), and its entries take one a + b u each in a loop
 * without branches; the same bits as entry by entry. */
static inline double psi_of(const fire_state *st, int64_t x) { /* psi_at by the offset x >= 0 */
    return st->psi ? st->psi[x] : log(fabs(st->c * (double)x) + 1.0);
}
static inline double dpsi_of(const fire_state *st, int64_t x) { /* dpsi_at by the offset x >= 0 */
    return st->psi ? st->dpsi[x] : sign(st->c * (double)x) * (double)x / (fabs(st->c * (double)x) + 1.0);
}
static inline double u_of(const fire_state *st, int64_t x, double inv) { return psi_of(st, x) * inv; }
/* The first entry of a row past the diagonal (offset d - j < 0), within [0, nj] */
static inline int64_t diag_split(int64_t d, int64_t nj) { return d + 1 < 0 ? 0 : d + 1 > nj ? nj : d + 1; }

/* The end of the run of segment s that starts at entry j of [j, jb) (offset x = |d - j|,
 * dir = +1 where x rises with j, -1 where it falls) */
static int64_t run_end(const fire_state *st, int s, int64_t d, int64_t j, int64_t jb, int dir, double inv) {
    const fire_pieces *pw = &st->pw;
    if (dir > 0 ? s == pw->nk : s == 0) return jb; /* no kink left on that side */
    const double t = dir > 0 ? pw->t[s] : pw->t[s - 1];
    const int64_t xl = d - (jb - 1) < 0 ? jb - 1 - d : d - (jb - 1); /* the last entry, first: */
    if (dir > 0 ? !(t < u_of(st, xl, inv)) : t < u_of(st, xl, inv)) return jb; /* most runs end there */
    int64_t lo = j, hi = jb - 1; /* entries lo..hi-1 undecided; lo is in the run, hi is not */
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2, x = d - mid < 0 ? mid - d : d - mid;
        const int in = dir > 0 ? !(t < u_of(st, x, inv)) : t < u_of(st, x, inv);
        if (in) lo = mid;
        else hi = mid;
    }
    return lo + 1;
}

/* s[k] += a + b u_k over a run [j, je) of tabled psi, u_k = tab[off + k] inv: psi upwards after
 * the diagonal (off = -d), its mirror before it (psim, off = span - d) */
PE_TILE_SIMD static void add_run(float *si, const double *tab, int64_t off, int64_t j, int64_t je, double a, double b,
                                 double inv) {
    for (int64_t k = j; k < je; k++) si[k] = (float)((double)si[k] + (a + b * (tab[off + k] * inv)));
}

/* s[j] += MLP(u_j)_h over entries [ja, jb) of one side of the diagonal */
static void pieces_side(const fire_state *st, int64_t h, float *si, int64_t d, int64_t ja, int64_t jb, int dir,
                        double inv, int *seg) {
    const fire_pieces *pw = &st->pw;
    for (int64_t j = ja; j < jb;) {
        const int64_t x0 = d - j < 0 ? j - d : d - j;
        const int s = segment(pw, u_of(st, x0, inv), seg);
        const int64_t je = run_end(st, s, d, j, jb, dir, inv);
        const double a = pw->a[h * (pw->nk + 1) + s], b = pw->b[h * (pw->nk + 1) + s];
        if (st->psi) add_run(si, dir > 0 ? st->psi : st->psim, dir > 0 ? -d : st->span - d, j, je, a, b, inv);
        else
            for (int64_t k = j; k < je; k++)
                si[k] = (float)((double)si[k] + (a + b * u_of(st, d - k < 0 ? k - d : d - k, inv)));
        j = je;
    }
}

/* A tabled row's entries [ja, jb) whose keys run consecutively (entry j at offset |d - j|),
 * split where the offset turns so that both halves vectorise: s[j] += bias[|d - j|] in double,
 * and the backward's gx[|d - j|] += g[j], in the same order as entry by entry. */
PE_TILE_SIMD static void add_table_row(float *si, const double *bias, int64_t d, int64_t mid, int64_t ja, int64_t jb) {
    for (int64_t j = ja; j < (mid < jb ? mid : jb); j++) si[j] = (float)((double)si[j] + bias[d - j]);
    for (int64_t j = mid > ja ? mid : ja; j < jb; j++) si[j] = (float)((double)si[j] + bias[j - d]);
}

PE_TILE_SIMD static void gather_table_row(double *gx, const float *gi, int64_t d, int64_t mid, int64_t ja, int64_t jb) {
    for (int64_t j = ja; j < (mid < jb ? mid : jb); j++) gx[d - j] += gi[j];
    for (int64_t j = mid > ja ? mid : ja; j < jb; j++) gx[j - d] += gi[j];
}

/* Over a run [j, je) of one segment (entry k at offset x = |d - k|): the sums of g, g psi(x)
 * and g dpsi(x)/dc, in 8 fixed lanes so that every instruction set adds alike; the tables read
 * upwards as add_run's. A masked entry's g is 0 and adds nothing. */
PE_TILE_SIMD static void run_sums(const fire_state *st, const float *gi, int64_t d, int64_t j, int64_t je, int dir,
                                  double *out) {
    double s0[8] = {0}, s1[8] = {0}, s2[8] = {0};
    int64_t k = j;
    if (st->psi) {
        const double *p = dir > 0 ? st->psi : st->psim, *dp = dir > 0 ? st->dpsi : st->dpsim;
        const int64_t off = dir > 0 ? -d : st->span - d;
        for (; k + 8 <= je; k += 8)
            for (int l = 0; l < 8; l++) {
                const double g = gi[k + l];
                s0[l] += g, s1[l] += g * p[off + k + l], s2[l] += g * dp[off + k + l];
            }
    }
    for (; k < je; k++) {
        const double g = gi[k];
        if (g == 0) continue; /* off the table psi is a log: not for masked entries */
        const int64_t x = d - k < 0 ? k - d : d - k;
        s0[0] += g, s1[0] += g * psi_of(st, x), s2[0] += g * dpsi_of(st, x);
    }
    for (int l = 0; l < 3; l++) {
        const double *a = l == 0 ? s0 : l == 1 ? s1 : s2;
        out[l] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
}

/* The backward of pieces_side over entries [ja, jb): each run's segment s gains G += sum g,
 * GU += sum g u, and the row's sums[0], sums[1] (of du dN/dc and du N, du = g B_hs) grow,
 * from run_sums: u = psi inv and B_hs are the same over a run. */
static void grad_side(const fire_state *st, int64_t h, seg_sums *acc, const float *gi, int64_t d, int64_t ja,
                      int64_t jb, int dir, double inv, int *seg, double *sums) {
    const fire_pieces *pw = &st->pw;
    for (int64_t j = ja; j < jb;) {
        const int64_t x0 = d - j < 0 ? j - d : d - j;
        const int s = segment(pw, u_of(st, x0, inv), seg);
        const int64_t je = run_end(st, s, d, j, jb, dir, inv);
        const double b = pw->b[h * (pw->nk + 1) + s];
        double r[3];
        run_sums(st, gi, d, j, je, dir, r);
        acc->g[s] += r[0], acc->gu[s] += r[1] * inv;
        sums[0] += b * r[2], sums[1] += b * r[1];
        j = je;
    }
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const fire_state *st = ctx->state;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk;
    const double *bias = st->psi ? st->bias + h * (st->span + 1) : NULL;
    const int runs = consecutive(kpos + j0, nj);
    for (int64_t i = 0; i < ni; i++) {
        int64_t pi = pos[i0 + i];
        float *si = s + i * lds;
        const int64_t d = pi - kpos[j0], mid = diag_split(d, nj); /* with runs */
        int64_t ja, jb;
        pe__tile_row_visible(ctx, t, i, &ja, &jb); /* the others are masked: left alone */
        if (tabled(st, pi) && runs) {
            add_table_row(si, bias, d, mid, ja, jb);
            continue;
        }
        if (tabled(st, pi)) {
            for (int64_t j = ja; j < jb; j++) {
                int64_t x = pi - kpos[j0 + j];
                si[j] = (float)((double)si[j] + bias[x < 0 ? -x : x]);
            }
            continue;
        }
        const double inv = 1.0 / st->rows[b * ctx->T + i0 + i].den; /* u = N inv, as the backward's */
        int seg = 0;
        if (runs) { /* entry j has offset |d - j| */
            pieces_side(st, h, si, d, ja, mid < jb ? mid : jb, -1, inv, &seg);
            pieces_side(st, h, si, d, mid > ja ? mid : ja, jb, +1, inv, &seg);
            continue;
        }
        for (int64_t j = ja; j < jb; j++)
            si[j] = (float)((double)si[j] + mlp(&st->pw, h, psi_at(st, pi, kpos[j0 + j]) * inv, &seg));
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
    const double init_L = ctx->cfg->fire_init_L;
    seg_sums acc = {{0}, {0}};
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

    const int runs = consecutive(kpos + j0, nj);
    for (int64_t i = 0; i < ni; i++) {
        int64_t pi = pos[i0 + i];
        const float *gi = ds + i * lds;
        int64_t ja, jb;
        pe__tile_row_visible(ctx, t, i, &ja, &jb); /* the others are masked: left alone */
        if (gx && tabled(st, pi) && runs) {
            const int64_t d = pi - kpos[j0];
            gather_table_row(gx, gi, d, diag_split(d, nj), ja, jb);
            continue;
        }
        if (gx && tabled(st, pi)) {
            for (int64_t j = ja; j < jb; j++) {
                int64_t x = pi - kpos[j0 + j];
                gx[x < 0 ? -x : x] += gi[j];
            }
            continue;
        }
        const row_norm rn = st->rows[b * ctx->T + i0 + i];
        const double inv = 1.0 / rn.den;
        double dc_num = 0, dc_den = 0; /* this row's sums of du dN/dc and du N */
        int seg = 0;
        if (runs) {
            const int64_t d = pi - kpos[j0], mid = diag_split(d, nj);
            double sums[2] = {0, 0};
            grad_side(st, h, &acc, gi, d, ja, mid < jb ? mid : jb, -1, inv, &seg, sums);
            grad_side(st, h, &acc, gi, d, mid > ja ? mid : ja, jb, +1, inv, &seg, sums);
            dc_num = sums[0], dc_den = sums[1];
        }
        for (int64_t j = ja; !runs && j < jb; j++) {
            if (gi[j] == 0) continue; /* masked entries contribute nothing */
            const double N = psi_at(st, pi, kpos[j0 + j]);
            double du = mlp_backward(&st->pw, h, &acc, N * inv, gi[j], &seg);
            dc_num += du * dpsi_at(st, pi, kpos[j0 + j]);
            dc_den += du * N;
        }
        dc += dc_num * inv - dc_den * rn.dden_dc * inv * inv;
        dthr -= dc_den * rn.dden_dthr * inv * inv;
    }
    if (gx) { /* the tabled rows, one offset at a time */
        const row_norm rn = st->below;
        const double inv = 1.0 / rn.den;
        double dc_num = 0, dc_den = 0;
        int seg = 0;
        for (int64_t x = 0; x < nx; x++) {
            if (gx[x] == 0) continue;
            double du = mlp_backward(&st->pw, h, &acc, st->psi[x] * inv, gx[x], &seg);
            dc_num += du * st->dpsi[x];
            dc_den += du * st->psi[x];
        }
        dc += dc_num * inv - dc_den * rn.dden_dc * inv * inv;
        dthr -= dc_den * rn.dden_dthr * inv * inv;
        free(gx);
    }
    spread(ctx, &st->pw, h, &acc);
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
