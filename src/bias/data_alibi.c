/* Data-dependent ALiBi: the forget gates of the Forgetting Transformer (Lin et al. 2025,
 * openreview q2Lnyegkr8) as an attention bias, with the conventions of lucidrains/x-transformers
 * `DataDependentAlibi`. A Linear of the layer input gives every token one gate per head; a query
 * pays the log gates of the tokens after the key up to itself:
 *   z[t, g] = x_t . W[g] + b[g],   f[t, g] = post_log_scale * logsigmoid(z[t, g]),
 *   F[t, g] = sum_{u <= t} f[u, g]
 *   causal (G = H gates):    s_ij += F[i, h] - F[j, h]                    (= sum_{j < u <= i} f[u, h])
 *   not causal (G = 2 H):    s_ij += F[i, h] - F[j, h]           for j <= i,
 *                            s_ij += F[j, H + h] - F[i, H + h]   for j > i (the second H gates)
 * i and j are token indices of the row (the layer's queries are its keys); positions are not
 * read, and neither attn_mask nor a packed row's documents restart the sum (a difference only
 * sums the gates between the two tokens). W = forget_gate_w [G, C], b = forget_gate_b [G]:
 * torch.nn.Linear's weight, the bias bias_init (5: gates sigmoid(5), almost no forgetting).
 *
 * The gates read x (PE__LAYER_INPUT): the embed hook leaves x as it is, keeps a copy and forms
 * z and F (logsigmoid and the sums in double); the score_mod hook adds the differences. No projected
 * form and no KV cache (neither holds x). Fused: the score_mod hook takes any tile, and the bias
 * backward gathers dF in the state by (b, token, gate of head h), which only the fused path's
 * work item of (b, h's kv head) writes, tiles in a fixed order: no race, the same bits for any
 * thread count.
 * Backward, in reverse: score_mod_backward dF[i] += sum_j ds_ij, dF[j] -= sum_i ds_ij per head (the
 * second gates the other way round above the diagonal); embed_backward df[t] = sum_{u >= t} dF[u],
 * dz = df post_log_scale sigmoid(-z), then the Linear's: dW += dz^T x, db += sum dz, dx += dz W. */
#include "../internal.h"

enum { GATE_W, GATE_B };

typedef struct {
    int64_t G;  /* gates per token: H causal, 2 H otherwise */
    float *x;   /* (B, T, C) the layer input, for dW */
    float *z;   /* (B, T, G) x W^T + b */
    float *dz;  /* (B, T, G) its gradient */
    double *F;  /* (B, T, G) cumulative log gates */
    double *dF; /* (B, T, G) their gradient, gathered by score_mod_backward, zero between calls */
} dalibi_state;

static int64_t n_gates(const pe_config *cfg, int64_t H) { return cfg->causal ? H : 2 * H; }

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    const int64_t G = n_gates(cfg, H), C = H * D;
    s[GATE_W] = (pe_param_spec){"forget_gate_w", 2, {G, C}, 0, {PE_INIT_LINEAR, (double)C, 0}};
    s[GATE_B] = (pe_param_spec){"forget_gate_b", 1, {G}, 0, {PE_INIT_CONST, cfg->bias_init, 0}};
    return 2;
}

static void release(pe__ctx *ctx) {
    dalibi_state *st = ctx->state;
    free(st->x), free(st->z), free(st->dz), free(st->F), free(st->dF);
    free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    if (ctx->Tk != ctx->T || ctx->qoff) /* only the layer runs it: its keys are its queries */
        return pe_error(err, PE_EINVAL, "method data_alibi: the keys must be the layer's own tokens (%lld keys, %lld "
                        "queries)", (long long)ctx->Tk, (long long)ctx->T);
    const int64_t G = n_gates(ctx->cfg, ctx->H), n = ctx->B * ctx->T;
    dalibi_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory for the data_alibi gates");
    ctx->state = st;
    st->G = G;
    st->x = malloc(sizeof(float) * (size_t)(n * ctx->C));
    st->z = malloc(sizeof(float) * (size_t)(n * G)), st->dz = malloc(sizeof(float) * (size_t)(n * G));
    st->F = pe__calloc((size_t)(n * G), sizeof(double)), st->dF = pe__calloc((size_t)(n * G), sizeof(double));
    if (!st->x || !st->z || !st->dz || !st->F || !st->dF) {
        release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the data_alibi gates of %lld tokens", (long long)n);
    }
    return PE_OK;
}

/* log(sigmoid(z)) without overflow: min(z, 0) - log(1 + e^-|z|) */
static double log_sigmoid(double z) { return (z < 0 ? z : 0.0) - log1p(exp(-fabs(z))); }

/* x is read, not changed: z = x W^T + b, F = the running sums of post_log_scale logsigmoid(z) */
static void embed_forward(pe__ctx *ctx, float *x) {
    dalibi_state *st = ctx->state;
    const int64_t T = ctx->T, C = ctx->C, G = st->G, n = ctx->B * T;
    const double post = ctx->cfg->post_log_scale;
    memcpy(st->x, x, sizeof(float) * (size_t)(n * C));
    pe__linear_forward(st->z, x, ctx->w->param[GATE_W], ctx->w->param[GATE_B], n, C, G);
    for (int64_t b = 0; b < ctx->B; b++)
        for (int64_t g = 0; g < G; g++) {
            double cum = 0;
            for (int64_t t = 0; t < T; t++) {
                const int64_t e = (b * T + t) * G + g;
                cum += post * log_sigmoid((double)st->z[e]);
                st->F[e] = cum;
            }
        }
}

/* The bias of query token ti and key token tj in head h, as differences of F rows (G wide). */
static inline double bias_of(const double *Fi, const double *Fj, int64_t h, int64_t H, int bidir, int64_t ti,
                             int64_t tj) {
    return !bidir || tj <= ti ? Fi[h] - Fj[h] : Fj[H + h] - Fi[H + h];
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const dalibi_state *st = ctx->state;
    const int64_t G = st->G, H = ctx->H;
    const int bidir = G > H;
    const double *F = st->F + b * ctx->T * G;
    for (int64_t i = 0; i < ni; i++) {
        const int64_t ti = ctx->qoff + i0 + i;
        for (int64_t j = 0; j < nj; j++) {
            const int64_t tj = j0 + j;
            s[i * lds + j] += (float)bias_of(F + ti * G, F + tj * G, h, H, bidir, ti, tj);
        }
    }
}

/* forward was s_ij += F[i, h] - F[j, h] (or F[j, H + h] - F[i, H + h] above the diagonal when
 * not causal), so now: dF[i] += ds_ij, dF[j] -= ds_ij on the gate row the entry read */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    dalibi_state *st = ctx->state;
    const int64_t G = st->G, H = ctx->H;
    const int bidir = G > H;
    double *dF = st->dF + b * ctx->T * G;
    for (int64_t i = 0; i < ni; i++) {
        const int64_t ti = ctx->qoff + i0 + i;
        double below = 0, above = 0; /* sum_j ds_ij over j <= i (or every j when causal), over j > i */
        for (int64_t j = 0; j < nj; j++) {
            const int64_t tj = j0 + j;
            const double d = ds[i * lds + j];
            if (d == 0) continue;
            if (!bidir || tj <= ti) {
                below += d;
                dF[tj * G + h] -= d;
            } else {
                above += d;
                dF[tj * G + H + h] += d;
            }
        }
        dF[ti * G + h] += below;
        if (bidir) dF[ti * G + H + h] -= above;
    }
}

/* forward was F[t] = sum_{u <= t} post_log_scale logsigmoid(z[u]), z = x W^T + b, so now:
 * df[t] = sum_{u >= t} dF[u], dz = df post_log_scale sigmoid(-z), and the Linear's backward;
 * dx holds the projections' gradient (x' = x) and gets dz W added. dF is cleared. */
static void embed_backward(pe__ctx *ctx, float *dx) {
    dalibi_state *st = ctx->state;
    const int64_t T = ctx->T, C = ctx->C, G = st->G, n = ctx->B * T;
    const double post = ctx->cfg->post_log_scale;
    for (int64_t b = 0; b < ctx->B; b++)
        for (int64_t g = 0; g < G; g++) {
            double df = 0;
            for (int64_t t = T - 1; t >= 0; t--) {
                const int64_t e = (b * T + t) * G + g;
                df += st->dF[e];
                st->dz[e] = (float)(df * post / (1.0 + exp((double)st->z[e])));
            }
        }
    pe__linear_backward(dx, 1, ctx->g->dparam[GATE_W], ctx->g->dparam[GATE_B], st->dz, st->x, ctx->w->param[GATE_W], n,
                        C, G);
    memset(st->dF, 0, sizeof(double) * (size_t)(n * G));
}

const pe__method pe__method_data_alibi = {
    .name = "data_alibi",
    .reference = "Lin et al. 2025, Forgetting Transformer's forget gates as a bias (lucidrains/x-transformers "
                 "DataDependentAlibi)",
    .family = PE_FAMILY_BIAS,
    .keys = "post_log_scale bias_init",
    .flags = PE__GQA | PE__LAYER_INPUT | PE__FUSED,
    .params = params,
    .prepare = prepare,
    .release = release,
    .embed_forward = embed_forward,
    .embed_backward = embed_backward,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
