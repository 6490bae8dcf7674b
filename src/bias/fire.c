/* FIRE (Li et al. 2023, "Functional Interpolation for Relative Positions", the appendix code):
 *   u_ij = psi(i - j) / (psi(max(i, |L * init_L|)) + 1e-6),   psi(x) = ln(|c x| + 1)
 *   s = scale q.k + MLP(u_ij)_h,   MLP = Linear(1, 32) -> relu -> Linear(32, H)
 * i is the query's position: the normaliser grows with the absolute position of the query once
 * it passes the threshold |L * init_L|, so FIRE is not invariant under a global shift of
 * positions. Tensors fire_w1 [32, 1], fire_b1 [32], fire_w2 [H, 32], fire_b2 [H], fire_c [1],
 * fire_L [1]; key fire_init_L (512). Everything is computed in double per entry of the tile,
 * so a tiled kernel never needs the (T, Tk) matrix of u. */
#include "../internal.h"

enum { W1, B1, W2, B2, FC, FL };
enum { WIDTH = 32 }; /* the MLP's hidden width */

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg, (void)D;
    s[W1] = (pe_param_spec){"fire_w1", 2, {WIDTH, 1}, 0};
    s[B1] = (pe_param_spec){"fire_b1", 1, {WIDTH}, 0};
    s[W2] = (pe_param_spec){"fire_w2", 2, {H, WIDTH}, 0};
    s[B2] = (pe_param_spec){"fire_b2", 1, {H}, 0};
    s[FC] = (pe_param_spec){"fire_c", 1, {1}, 0};
    s[FL] = (pe_param_spec){"fire_L", 1, {1}, 0};
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

static void bias_forward(pe__ctx *ctx, int64_t b, int64_t h, int64_t i0, int64_t ni, int64_t j0,
                         int64_t nj, float *s, int64_t lds) {
    const float *const *P = ctx->w->param;
    const int64_t *pos = ctx->pos + b * ctx->T;
    double c = P[FC][0], thr = fabs((double)P[FL][0] * ctx->cfg->fire_init_L);
    double w1[WIDTH], b1[WIDTH], w2[WIDTH], b2 = P[B2][h];
    for (int k = 0; k < WIDTH; k++) w1[k] = P[W1][k], b1[k] = P[B1][k], w2[k] = P[W2][h * WIDTH + k];
    for (int64_t i = 0; i < ni; i++) {
        double pi = (double)pos[i0 + i], den = normaliser(c, thr, pi).den;
        for (int64_t j = 0; j < nj; j++) {
            double u = log(fabs(c * (pi - (double)pos[j0 + j])) + 1.0) / den, out = b2;
            for (int k = 0; k < WIDTH; k++) {
                double a = w1[k] * u + b1[k];
                if (a > 0) out += w2[k] * a;
            }
            s[i * lds + j] = (float)((double)s[i * lds + j] + out);
        }
    }
}

/* forward was s += b2_h + sum_k w2_hk relu(w1_k u + b1_k), u = N / den with N = psi(i - j),
 * so now, with g = ds_ij and da_k = g w2_hk [a_k > 0]:
 *   db2_h += g, dw2_hk += g relu(a_k), dw1_k += da_k u, db1_k += da_k, du = sum_k da_k w1_k,
 *   dc += du (dN/dc / den - N dden/dc / den^2), dthr += du (-N dden/dthr / den^2),
 *   dL += dthr sign(L init_L) init_L. */
static void bias_backward(pe__ctx *ctx, int64_t b, int64_t h, int64_t i0, int64_t ni, int64_t j0,
                          int64_t nj, const float *ds, int64_t lds) {
    const float *const *P = ctx->w->param;
    float *const *G = ctx->g->dparam;
    const int64_t *pos = ctx->pos + b * ctx->T;
    double c = P[FC][0], init_L = ctx->cfg->fire_init_L, thr = fabs((double)P[FL][0] * init_L);
    double w1[WIDTH], b1[WIDTH], w2[WIDTH];
    double dw1[WIDTH] = {0}, db1[WIDTH] = {0}, dw2[WIDTH] = {0}, db2 = 0, dc = 0, dthr = 0;
    for (int k = 0; k < WIDTH; k++) w1[k] = P[W1][k], b1[k] = P[B1][k], w2[k] = P[W2][h * WIDTH + k];
    for (int64_t i = 0; i < ni; i++) {
        double pi = (double)pos[i0 + i];
        row_norm rn = normaliser(c, thr, pi);
        double dc_num = 0, dc_den = 0; /* this row's sums of du dN/dc and du N */
        for (int64_t j = 0; j < nj; j++) {
            double g = ds[i * lds + j];
            if (g == 0) continue; /* masked entries contribute nothing */
            double x = pi - (double)pos[j0 + j], cx = c * x;
            double N = log(fabs(cx) + 1.0), u = N / rn.den, du = 0;
            db2 += g;
            for (int k = 0; k < WIDTH; k++) {
                double a = w1[k] * u + b1[k];
                if (!(a > 0)) continue;
                double da = g * w2[k];
                dw2[k] += g * a;
                dw1[k] += da * u;
                db1[k] += da;
                du += da * w1[k];
            }
            dc_num += du * sign(cx) * x / (fabs(cx) + 1.0);
            dc_den += du * N;
        }
        double inv = 1.0 / rn.den;
        dc += dc_num * inv - dc_den * rn.dden_dc * inv * inv;
        dthr -= dc_den * rn.dden_dthr * inv * inv;
    }
    for (int k = 0; k < WIDTH; k++) {
        if (G[W1]) G[W1][k] += (float)dw1[k];
        if (G[B1]) G[B1][k] += (float)db1[k];
        if (G[W2]) G[W2][h * WIDTH + k] += (float)dw2[k];
    }
    if (G[B2]) G[B2][h] += (float)db2;
    if (G[FC]) G[FC][0] += (float)dc;
    if (G[FL]) G[FL][0] += (float)(dthr * sign((double)P[FL][0] * init_L) * init_L);
}

const pe__method pe__method_fire = {
    .name = "fire",
    .family = PE_FAMILY_BIAS,
    .keys = "fire_init_L",
    .flags = PE__GQA,
    .params = params,
    .bias_forward = bias_forward,
    .bias_backward = bias_backward,
};
