/* Learned absolute table (ConvS2S, BERT): x' = x + pos_table[pos + shift].
 * A position + shift outside [0, N) is an error, never a silent clamp. */
#include "../internal.h"

enum { POS_TABLE };

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)cfg;
    s[POS_TABLE] = (pe_param_spec){"pos_table", 2, {-1, H * D}, 0, {0}};
    return 1;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    int64_t N = ctx->w->param_rows[POS_TABLE], shift = ctx->cfg->shift;
    if (ctx->pos_min + shift < 0 || ctx->pos_max + shift >= N) {
        int64_t bad = ctx->pos_min + shift < 0 ? ctx->pos_min : ctx->pos_max;
        return pe_error(err, PE_EPOS, "position %lld + shift %lld is outside pos_table's %lld rows",
                        (long long)bad, (long long)shift, (long long)N);
    }
    return PE_OK;
}

static void embed_forward(pe__ctx *ctx, float *x) {
    const float *table = ctx->w->param[POS_TABLE];
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++) {
        const float *row = table + (ctx->pos[bt] + ctx->cfg->shift) * ctx->C;
        for (int64_t c = 0; c < ctx->C; c++) x[bt * ctx->C + c] += row[c];
    }
}

/* forward was x' = x + table[pos + shift], so now: dtable[pos + shift] += dx' */
static void embed_backward(pe__ctx *ctx, float *dx) {
    float *dtable = ctx->g->dparam[POS_TABLE];
    if (!dtable) return;
    for (int64_t bt = 0; bt < ctx->B * ctx->T; bt++) {
        float *row = dtable + (ctx->pos[bt] + ctx->cfg->shift) * ctx->C;
        for (int64_t c = 0; c < ctx->C; c++) row[c] += dx[bt * ctx->C + c];
    }
}

const pe__method pe__method_learned = {
    .name = "learned",
    .reference = "a learned table: BERT, ConvS2S",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "shift",
    .flags = PE__GQA | PE__INPUT | PE__FUSED,
    .params = params,
    .prepare = prepare,
    .embed_forward = embed_forward,
    .embed_backward = embed_backward,
};
