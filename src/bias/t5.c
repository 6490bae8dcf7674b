/* T5 relative bias (Raffel et al.; HF T5Attention): s = scale q.k + rel_bias[bucket(j - i), h],
 * scale 1 by default (T5 folds it into the initialisation). Buckets: exact for small
 * distances, logarithmic up to max_distance, then the last bucket; with bidirectional the
 * upper half of the buckets holds keys after the query. */
#include "../internal.h"

enum { REL_BIAS };

int64_t pe__t5_bucket(int64_t rel, int bidirectional, int64_t num_buckets, int64_t max_distance) {
    int64_t bucket = 0;
    if (bidirectional) {
        num_buckets /= 2;
        if (rel > 0) bucket += num_buckets;
        rel = rel < 0 ? -rel : rel;
    } else {
        rel = rel < 0 ? -rel : 0;
    }
    int64_t max_exact = num_buckets / 2;
    if (rel < max_exact) return bucket + rel;
    /* HF forms this in float32: log(rel / max_exact) / log(max_distance / max_exact) * (n - max_exact),
     * the second log a double rounded to float; the result is truncated toward zero. The
     * float32 rounding decides the bucket at exact boundaries, so it is kept. */
    float ratio = (float)rel / (float)max_exact;
    float denom = (float)log((double)max_distance / (double)max_exact);
    float v = logf(ratio) / denom * (float)(num_buckets - max_exact);
    int64_t large = max_exact + (int64_t)v;
    return bucket + (large < num_buckets - 1 ? large : num_buckets - 1);
}

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H, (void)D;
    if (!pe_config_has(cfg, PE_K_scale)) cfg->scale = 1.0;
    if (!pe_config_has(cfg, PE_K_bidirectional)) cfg->bidirectional = !cfg->causal;
}

pe_status pe__t5_check(const pe_config *cfg, int bidirectional, pe_err *err) {
    int64_t nb = bidirectional ? cfg->num_buckets / 2 : cfg->num_buckets;
    if (nb / 2 < 1)
        return pe_error(err, PE_EKEY, "key 'num_buckets': %lld is too few (needs at least %d)",
                        (long long)cfg->num_buckets, bidirectional ? 4 : 2);
    if (cfg->max_distance <= nb / 2)
        return pe_error(err, PE_EKEY, "key 'max_distance': %lld must exceed the %lld exact buckets",
                        (long long)cfg->max_distance, (long long)(nb / 2));
    return PE_OK;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H, (void)D;
    return pe__t5_check(cfg, cfg->bidirectional, err);
}

/* T5 trained at 512 tokens with max_distance 128, so its last, open-ended bucket is trained;
 * at a shorter training length the default 128 leaves every bucket past it at its initial
 * value. So max_distance = half the length, but above num_buckets / 2 (the exact buckets of
 * a causal layer, more than a bidirectional one has), as the check requires. */
void pe__t5_fit_length(pe_config *cfg, int64_t length) {
    if (pe_config_has(cfg, PE_K_max_distance)) return;
    const int64_t exact = cfg->num_buckets / 2;
    cfg->max_distance = length / 2 > exact ? length / 2 : exact + 1;
    pe__config_mark(cfg, PE_K_max_distance);
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)D;
    /* HF T5: only the first layer owns relative_attention_bias, the others reuse its bias */
    s[REL_BIAS] = (pe_param_spec){"rel_bias", 2, {cfg->num_buckets, H}, 0, {PE_INIT_NORMAL, 1.0 / sqrt((double)(H * D)), 0},
                                  .shared = 1};
    return 1;
}

/* The bucket of every relative offset the call can see, (pos_max - pos_min) either side:
 * one logf per offset instead of one per entry and head. NULL (per-entry buckets) when the
 * span is wider than the entries themselves, e.g. two tokens a million positions apart. */
typedef struct { int64_t span; int32_t *bucket; } t5_state;

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    const pe_config *c = ctx->cfg;
    t5_state *st = calloc(1, sizeof *st);
    if (!st) return pe_error(err, PE_ENOMEM, "out of memory");
    int64_t span = pe__offset_table_span(ctx, 1);
    if (span >= 0) {
        st->span = span;
        st->bucket = malloc(sizeof(int32_t) * (2 * span + 1));
        if (st->bucket)
            for (int64_t r = -st->span; r <= st->span; r++)
                st->bucket[r + st->span] = (int32_t)pe__t5_bucket(r, c->bidirectional, c->num_buckets, c->max_distance);
    }
    ctx->state = st;
    return PE_OK;
}

static void release(pe__ctx *ctx) {
    t5_state *st = ctx->state;
    free(st->bucket), free(st);
    ctx->state = NULL;
}

static inline int64_t bucket_of(const pe__ctx *ctx, const t5_state *st, int64_t rel) {
    const pe_config *c = ctx->cfg;
    return st->bucket ? st->bucket[rel + st->span] : pe__t5_bucket(rel, c->bidirectional, c->num_buckets, c->max_distance);
}

static void score_mod(pe__ctx *ctx, const pe__tile *t, float *s, int64_t lds) {
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const t5_state *st = ctx->state;
    const float *rel_bias = ctx->w->param[REL_BIAS];
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk, H = ctx->H;
    int64_t o0;
    if (pe__tile_diagonals(ctx, b, i0, ni, j0, nj, &o0)) { /* one bucket per diagonal */
        float bd[PE_DIAG_MAX];
        for (int64_t d = 0; d < ni + nj - 1; d++) bd[d] = rel_bias[bucket_of(ctx, st, o0 + d) * H + h];
        pe__diag_add(s, lds, ni, nj, bd);
        return;
    }
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            s[i * lds + j] += rel_bias[bucket_of(ctx, st, kpos[j0 + j] - pos[i0 + i]) * H + h];
}

/* forward was s += rel_bias[bucket, h], so now: drel_bias[bucket, h] += ds */
static void score_mod_backward(pe__ctx *ctx, const pe__tile *t, const float *s_in, float *ds, int64_t lds) {
    (void)s_in;
    const int64_t b = t->b, h = t->h, i0 = t->i0, ni = t->ni, j0 = t->j0, nj = t->nj;
    const t5_state *st = ctx->state;
    float *drel = ctx->g->dparam[REL_BIAS];
    if (!drel) return;
    const int64_t *pos = ctx->pos + b * ctx->T, *kpos = ctx->kpos + b * ctx->Tk, H = ctx->H;
    int64_t o0;
    if (pe__tile_diagonals(ctx, b, i0, ni, j0, nj, &o0)) {
        float dd[PE_DIAG_MAX];
        pe__diag_sums(dd, ds, lds, ni, nj);
        for (int64_t d = 0; d < ni + nj - 1; d++) drel[bucket_of(ctx, st, o0 + d) * H + h] += dd[d];
        return;
    }
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            drel[bucket_of(ctx, st, kpos[j0 + j] - pos[i0 + i]) * H + h] += ds[i * lds + j];
}

static int64_t rel_index(const pe_config *c, int64_t i, int64_t j) {
    return pe__t5_bucket(j - i, c->bidirectional, c->num_buckets, c->max_distance);
}

const pe__method pe__method_t5 = {
    .name = "t5",
    .reference = "Raffel et al. 2020, T5 (HF T5Attention)",
    .family = PE_FAMILY_BIAS,
    .keys = "num_buckets max_distance bidirectional",
    .rel_index = rel_index,
    .flags = PE__GQA | PE__FUSED,
    /* HF T5PreTrainedModel._init_weights draws q from N(0, (d_model d_kv)^-1/2), Mesh
     * TensorFlow's initialisation, so that the scores need no 1/sqrt(d) */
    .scale_in_init = 1,
    .fit_length = pe__t5_fit_length,
    .defaults = defaults,
    .check = check,
    .params = params,
    .prepare = prepare,
    .release = release,
    .score_mod = score_mod,
    .score_mod_backward = score_mod_backward,
};
