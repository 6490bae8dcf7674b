/* NoPE: no position information; only a causal mask gives order. Every hook is NULL, so
 * the core runs plain attention.
 *
 * With attn_temperature_tuning (Llama 4's NoPE layers, HF Llama4TextAttention after
 * Nakanishi 2025, "Scalable-Softmax"), each query at position p is multiplied by
 *   tau(p) = 1 + attn_scale * ln(1 + floor((p + 1) / floor_scale)),
 * which sharpens the softmax as the context grows past floor_scale tokens (1 below it). That
 * is a transformation of q alone, so the tuned layer is the rotate hook below: the core, the
 * fused path and the KV cache (which scales queries on attend) need nothing of their own. */
#include <math.h>

#include "../internal.h"

/* both tables take the same keys: the settings choose the table, not what may be set */
#define KEYS "attn_temperature_tuning floor_scale attn_scale hf_config hf_layer"

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    if (!cfg->attn_temperature_tuning &&
        (pe_config_has(cfg, PE_K_floor_scale) || pe_config_has(cfg, PE_K_attn_scale)))
        return pe_error(err, PE_EKEY, "key '%s' needs attn_temperature_tuning true",
                        pe_config_has(cfg, PE_K_floor_scale) ? "floor_scale" : "attn_scale");
    if (!(cfg->floor_scale >= 1 && cfg->floor_scale <= 1e15))
        return pe_error(err, PE_EKEY, "key 'floor_scale': %g is not within 1 .. 1e15", cfg->floor_scale);
    if (!(fabs(cfg->attn_scale) <= 1e6))
        return pe_error(err, PE_EKEY, "key 'attn_scale': %g is not a number within -1e6 .. 1e6", cfg->attn_scale);
    return PE_OK;
}

/* tau(p) in double, rounded once, as HF forms it in float32 from an exact floor */
static float temperature(const pe_config *cfg, int64_t p) {
    return (float)(1.0 + cfg->attn_scale * log1p(floor(((double)p + 1.0) / cfg->floor_scale)));
}

static void scale_queries(pe__ctx *ctx, float *q) {
    const int64_t n = ctx->B * ctx->T, C = ctx->C;
    for (int64_t i = 0; i < n; i++) {
        const float tau = temperature(ctx->cfg, ctx->pos[i]);
        for (int64_t c = 0; c < C; c++) q[i * C + c] *= tau;
    }
}

/* k and v are left as they are: the temperature is the query's */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    (void)k, (void)v;
    if (q) scale_queries(ctx, q);
}

/* forward was q' = tau q: dq = tau dq' */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in, const float *k_in) {
    (void)dk, (void)dv, (void)q_in, (void)k_in;
    scale_queries(ctx, dq);
}

static const pe__method none_tuned = {
    .name = "none",
    .reference = "NoPE with Llama 4's attention-temperature tuning (HF Llama4TextAttention)",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = KEYS,
    .flags = PE__GQA | PE__FUSED,
    .check = check,
    .rotate_forward = rotate_forward,
    .not_a_rotation = "attn_temperature_tuning scales the queries by position, no rotation",
    .rotate_backward = rotate_backward,
};

static const pe__method *variant(const pe_config *cfg) {
    return cfg->attn_temperature_tuning ? &none_tuned : &pe__method_none;
}

const pe__method pe__method_none = {
    .name = "none",
    .reference = "NoPE: order only through the causal mask (Kazemnejad et al. 2023); Llama 4's temperature tuning",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = KEYS,
    .flags = PE__GQA | PE__FUSED,
    .variant = variant,
    .check = check,
};
