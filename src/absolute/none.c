/* NoPE: no position information; only a causal mask gives order. Every hook is NULL, so
 * the core runs plain attention.
 *
 * Two query temperatures turn it into a transform of q alone (the rotate hook below; the
 * core, the fused path and the KV cache, which scales queries on attend, need nothing of
 * their own), applied together as q' = tau(p) lambda_h q:
 * - attn_temperature_tuning (Llama 4's NoPE layers, HF Llama4TextAttention after Nakanishi
 *   2025, "Scalable-Softmax"): each query at position p times
 *     tau(p) = 1 + attn_scale * ln(1 + floor((p + 1) / floor_scale)),
 *   which sharpens the softmax as the context grows past floor_scale tokens (1 below it);
 * - head_scale (Wang et al. 2024, "Length Generalization of Causal Transformers without
 *   Position Encoding", HeadScale; AntNLP/nope_head_scale models/llama_nope.py,
 *   ScaleMixin.query_scale): each query head h times a learned lambda_h, the tensor
 *   head_scales [H] (one per query head, num_heads in their code), initialised to
 *   head_scale_init; with the layer's scale 1/sqrt(D) the score is lambda_h q.k / sqrt(D),
 *   their scale_param * origin_scale. Their trainer clamps lambda to >= scale_lb after each
 *   step (utils/callbacks.py); head_scale_min states that bound for posenc's trainer. */
#include <math.h>

#include "../internal.h"

/* all tables take the same keys: the settings choose the table, not what may be set */
#define KEYS "attn_temperature_tuning floor_scale attn_scale head_scale head_scale_init head_scale_min hf_config hf_layer hf_assume"

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (!cfg->attn_temperature_tuning &&
        (pe_config_has(cfg, PE_K_floor_scale) || pe_config_has(cfg, PE_K_attn_scale)))
        return pe_error(err, PE_EKEY, "key '%s' needs attn_temperature_tuning true",
                        pe_config_has(cfg, PE_K_floor_scale) ? "floor_scale" : "attn_scale");
    if (!cfg->head_scale && (pe_config_has(cfg, PE_K_head_scale_init) || pe_config_has(cfg, PE_K_head_scale_min)))
        return pe_error(err, PE_EKEY, "key '%s' needs head_scale true",
                        pe_config_has(cfg, PE_K_head_scale_init) ? "head_scale_init" : "head_scale_min");
    if (!(cfg->floor_scale >= 1 && cfg->floor_scale <= 1e15))
        return pe_error(err, PE_EKEY, "key 'floor_scale': %g is not within 1 .. 1e15", cfg->floor_scale);
    if (!(fabs(cfg->attn_scale) <= 1e6))
        return pe_error(err, PE_EKEY, "key 'attn_scale': %g is not a number within -1e6 .. 1e6", cfg->attn_scale);
    if (!(fabs(cfg->head_scale_init) <= 1e6))
        return pe_error(err, PE_EKEY, "key 'head_scale_init': %g is not a number within -1e6 .. 1e6",
                        cfg->head_scale_init);
    if (pe_config_has(cfg, PE_K_head_scale_min) && !(fabs(cfg->head_scale_min) <= 1e6))
        return pe_error(err, PE_EKEY, "key 'head_scale_min': %g is not a number within -1e6 .. 1e6",
                        cfg->head_scale_min);
    return PE_OK;
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)D;
    if (!cfg->head_scale) return 0;
    s[0] = (pe_param_spec){"head_scales", 1, {H}, 0, {PE_INIT_CONST, cfg->head_scale_init, 0}};
    s[0].clamped = pe_config_has(cfg, PE_K_head_scale_min), s[0].clamp_min = s[0].clamped ? cfg->head_scale_min : 0;
    return 1;
}

/* tau(p) in double, rounded once, as HF forms it in float32 from an exact floor */
static float temperature(const pe_config *cfg, int64_t p) {
    return pe__log_floor_factor((double)p + 1.0, cfg->attn_scale, cfg->floor_scale);
}

/* x (B, T, C) of the queries times tau(p) lambda_h; forward and, on dq, backward alike */
static void scale_queries(pe__ctx *ctx, float *x) {
    const int64_t n = ctx->B * ctx->T, H = ctx->H, D = ctx->D;
    const float *lambda = ctx->cfg->head_scale ? ctx->w->param[0] : NULL;
    for (int64_t i = 0; i < n; i++) {
        const float tau = ctx->cfg->attn_temperature_tuning ? temperature(ctx->cfg, ctx->pos[i]) : 1.0f;
        for (int64_t h = 0; h < H; h++) {
            const float f = lambda ? tau * lambda[h] : tau;
            for (int64_t d = 0; d < D; d++) x[(i * H + h) * D + d] *= f;
        }
    }
}

/* k and v are left as they are: the temperature is the query's */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    (void)k, (void)v;
    if (q) scale_queries(ctx, q);
}

/* forward was q' = tau lambda_h q: dlambda_h += tau sum_d dq'_d q_d, then dq = tau lambda_h dq'
 * (sums in double, one per head) */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in, const float *k_in) {
    (void)dk, (void)dv, (void)k_in;
    float *dl = ctx->cfg->head_scale ? ctx->g->dparam[0] : NULL;
    if (dl && q_in) {
        const int64_t n = ctx->B * ctx->T, H = ctx->H, D = ctx->D;
        for (int64_t h = 0; h < H; h++) {
            double acc = 0;
            for (int64_t i = 0; i < n; i++) {
                const float tau = ctx->cfg->attn_temperature_tuning ? temperature(ctx->cfg, ctx->pos[i]) : 1.0f;
                double t = 0;
                for (int64_t d = 0; d < D; d++) t += (double)dq[(i * H + h) * D + d] * q_in[(i * H + h) * D + d];
                acc += tau * t;
            }
            dl[h] += (float)acc;
        }
    }
    scale_queries(ctx, dq);
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    (void)err;
    ctx->transforms = PE__TQ;
    return PE_OK;
}

static const pe__method none_tuned = {
    .name = "none",
    .reference = "NoPE with a query temperature: Llama 4's tuning (HF Llama4TextAttention), HeadScale (Wang et al. 2024)",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = KEYS,
    .flags = PE__GQA | PE__FUSED,
    .check = check,
    .params = params,
    .prepare = prepare,
    .rotate_forward = rotate_forward,
    .not_a_rotation = "NoPE's temperature (attn_temperature_tuning, head_scale) scales the queries, no rotation",
    .rotate_backward = rotate_backward,
};

static const pe__method *variant(const pe_config *cfg) {
    return cfg->attn_temperature_tuning || cfg->head_scale ? &none_tuned : &pe__method_none;
}

const pe__method pe__method_none = {
    .name = "none",
    .reference = "NoPE: order only through the causal mask (Kazemnejad et al. 2023); Llama 4's temperature tuning; "
                 "HeadScale (Wang et al. 2024)",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = KEYS,
    .flags = PE__GQA | PE__FUSED,
    .variant = variant,
    .check = check,
    .params = params,
};
