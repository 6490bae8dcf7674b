/* RoPE (Su et al., RoFormer): rotate pairs of rotary_dim dims of every q and k head, from dim
 * rotary_offset (0 but in DeepSeek's MLA, which rotates the head's last qk_rope_head_dim), by
 * angle p * theta_t, theta_t = base^(-2t/rotary_dim) as modified by the scaling
 * (rope_scaling.c), cos and sin both multiplied by the scaling's attention factor.
 *
 * (proportional, Gemma 4's p-RoPE: the slice is the whole head and its last pairs have frequency
 * 0, so they pass through; their pairs are still (t, t + D/2), not a shorter slice's.)
 *
 * Pair layouts within the rotated slice of one head (rotary_dim r, the rest passes through):
 *   half         pairs (t, t + r/2)   [c c c c s s s s . . ]   GPT-NeoX, HF Llama
 *   interleaved  pairs (2t, 2t + 1)   [c s c s c s c s . . ]   RoFormer, GPT-J, Meta
 *
 * Angles are exact: p * theta in double, cos/sin in double, then rounded once to float, so
 * position 10^6 matches a float64 reference (forming p * theta in float32, as many
 * implementations do, is off by ~0.06 rad there). The cos/sin table is built once per call
 * for the tokens' positions and shared by q, k and the backward. */
#include "rotary.h"

enum { SHORT_FACTOR, LONG_FACTOR };

typedef struct {
    float *cs;        /* (B*T, r/2, 2) cos, sin of the queries; attention factor included (in tab_q) */
    float *cs_k;      /* (B*Tk, r/2, 2) of the keys (in tab_k): cs itself when keys sit at the queries' positions */
    double *inv_freq; /* (r/2) */
    double *acc;      /* (r/2) LongRoPE's factor gradient, summed by rotate_backward */
    int factor_table; /* LongRoPE: the table the positions select (SHORT_ or LONG_FACTOR), else -1 */
    double attn;      /* the scaling's attention factor */
    uint8_t *axis;    /* (r/2) the position axis pair t reads (rope_sections), or NULL */
    /* The layer keeps this state between its calls (PE__PERSIST): a call at the same positions
     * with the same frequencies (every step of a training run) reuses the tables, where sin and
     * cos in double cost more than the rotation. */
    double *cand;                /* (r/2) this call's frequencies */
    pe__scratch tab_q, tab_k;    /* the tables' memory, kept and grown as the layer's other scratch */
    pe__scratch built;           /* what they were built from (pe__inputs_same) */
} rope_state;

static void defaults(pe_config *cfg, int64_t H, int64_t D) {
    (void)H;
    if (!pe_config_has(cfg, PE_K_rotary_dim)) cfg->rotary_dim = D - cfg->rotary_offset;
}

static pe_status check(const pe_config *cfg, int64_t H, int64_t D, pe_err *err) {
    (void)H;
    const int64_t off = cfg->rotary_offset;
    if (off < 0 || off > D - 2)
        return pe_error(err, PE_EKEY, "key 'rotary_offset': %lld is not within 0 .. head_dim - 2 (%lld)", (long long)off,
                        (long long)(D - 2));
    pe_status st = pe__rope_check(cfg, D, err);
    if (st) return st;
    if (cfg->rotary_dim > D - off)
        return pe_error(err, PE_EKEY, "key 'rotary_offset': %lld + rotary_dim %lld must lie within head_dim %lld",
                        (long long)off, (long long)cfg->rotary_dim, (long long)D);
    if (cfg->rope_values && cfg->rope_scaling == PE_ROPE_LONGROPE) /* no model has both; the factors' gradient would */
        return pe_error(err, PE_EKEY, "key 'rope_values': not with rope_scaling longrope (its factor tables' gradient "
                        "covers q and k only)");
    const pe_int_list *sec = &cfg->rope_sections;
    if (!sec->n) {
        if (pe_config_has(cfg, PE_K_rope_section_layout) || pe_config_has(cfg, PE_K_rope_section_freqs))
            return pe_error(err, PE_EKEY, "key '%s' needs rope_sections (the pair counts of each position axis)",
                            pe_config_has(cfg, PE_K_rope_section_layout) ? "rope_section_layout" : "rope_section_freqs");
        return PE_OK;
    }
    int64_t sum = 0;
    for (int a = 0; a < sec->n; a++) {
        if (sec->v[a] < 1)
            return pe_error(err, PE_EKEY, "key 'rope_sections': section %d has %lld pairs, expected >= 1", a,
                            (long long)sec->v[a]);
        sum += sec->v[a];
    }
    if (sum != cfg->rotary_dim / 2)
        return pe_error(err, PE_EKEY, "key 'rope_sections': the sections sum to %lld pairs, but rotary_dim %lld has %lld",
                        (long long)sum, (long long)cfg->rotary_dim, (long long)(cfg->rotary_dim / 2));
    if (cfg->rope_section_layout == PE_SECTIONS_ALTERNATING && (sec->n != 3 || sec->v[1] != sec->v[2]))
        return pe_error(err, PE_EKEY, "key 'rope_section_layout': alternating takes three sections (time, rows, "
                        "columns) with as many row pairs as column pairs");
    if (cfg->rope_section_layout == PE_SECTIONS_BALANCED && sec->n != 2 && sec->n != 3)
        return pe_error(err, PE_EKEY, "key 'rope_section_layout': balanced takes two sections or three");
    if (cfg->rope_section_freqs == PE_SECTION_FREQS_PER_AXIS && cfg->rope_scaling != PE_ROPE_NONE)
        return pe_error(err, PE_EKEY, "key 'rope_section_freqs': per_axis takes no rope_scaling (got a scaling)");
    return PE_OK;
}

/* Position axes: one per section of rope_sections. */
static int64_t axes(const pe_config *cfg, const pe_weights *w) {
    (void)w;
    return cfg->rope_sections.n > 1 ? cfg->rope_sections.n : 1;
}

/* openPangu's order (vLLM openpangu_rope.py, MRotaryEmbeddingInterleaved.get_mrope_interleaved_id_list):
 * pair by pair, the axis with pairs left, not the last one taken (unless it alone has any), whose
 * share placed / count is least (ties: the lower axis); with three sections the last pair is
 * time's, held back from its count. Shares compared exactly, as cross products. */
static void balanced_axes(const pe_int_list *sec, int64_t half, uint8_t *axis) {
    const int three = sec->n == 3;
    int64_t count[3] = {sec->v[0] - three, sec->v[1], three ? sec->v[2] : 0}, placed[3] = {0}, last = -1;
    for (int64_t t = 0; t < half - three; t++) {
        int64_t best = -1;
        for (int relax = 0; relax < 2 && best < 0; relax++)
            for (int64_t k = 0; k < 3; k++) {
                if (placed[k] >= count[k] || (!relax && k == last)) continue;
                if (best < 0 || placed[k] * count[best] < placed[best] * count[k]) best = k;
            }
        axis[t] = (uint8_t)best, placed[best]++, last = best;
    }
    if (three) axis[half - 1] = 0;
}

/* The axis each pair reads (posenc's sections are (time, row, column) pair counts, s_0, s_1, ...):
 *   contiguous   section after section (Qwen2-VL's apply_multimodal_rotary_pos_emb)
 *   interleaved  pair t reads axis a >= 1 when t % A == a and t < A s_a, else 0 (Qwen3-VL)
 *   alternating  pairs t < s_1 + s_2 alternate rows (even t) and columns (odd), the rest time
 *                (HF ernie4_5_vl_moe Ernie4_5_VLMoeTextRotaryEmbedding.recomposition_to_3d, its
 *                pre-rotated inv_freq_3d leaving pair t at theta_t; vLLM bailing_mrope.py)
 *   balanced     openPangu's (balanced_axes) */
void pe_rope_pair_axes(const pe_config *cfg, uint8_t *axis) {
    const pe_int_list *sec = &cfg->rope_sections;
    const int64_t A = sec->n, half = cfg->rotary_dim / 2;
    if (cfg->rope_section_layout == PE_SECTIONS_BALANCED) {
        balanced_axes(sec, half, axis);
        return;
    }
    for (int64_t t = 0, a = 0, end = sec->v[0]; t < half; t++) {
        if (cfg->rope_section_layout == PE_SECTIONS_INTERLEAVED) {
            const int64_t x = t % A;
            axis[t] = (uint8_t)(x >= 1 && t < A * sec->v[x] ? x : 0);
            continue;
        }
        if (cfg->rope_section_layout == PE_SECTIONS_ALTERNATING) {
            axis[t] = (uint8_t)(t < sec->v[1] + sec->v[2] ? 1 + t % 2 : 0);
            continue;
        }
        while (t >= end) end += sec->v[++a];
        axis[t] = (uint8_t)a;
    }
}

/* per_axis frequencies (axial RoPE, rope-vit compute_axial_cis): the u-th of the n pairs of each
 * contiguous section rotates at base^(-u/n). */
static void per_axis_freqs(const pe_config *cfg, double *inv_freq) {
    const pe_int_list *sec = &cfg->rope_sections;
    for (int64_t a = 0, t = 0; a < sec->n; a++)
        for (int64_t u = 0; u < sec->v[a]; u++, t++) inv_freq[t] = pow(cfg->rope_base, -(double)u / (double)sec->v[a]);
}

static int params(const pe_config *cfg, int64_t H, int64_t D, pe_param_spec *s) {
    (void)H, (void)D;
    if (cfg->rope_scaling != PE_ROPE_LONGROPE) return 0;
    int from_config = cfg->hf_factor_count > 0; /* tables read from hf_config */
    s[SHORT_FACTOR] = (pe_param_spec){"short_factor", 1, {cfg->rotary_dim / 2}, from_config, {PE_INIT_CONST, 1, 0}};
    s[LONG_FACTOR] = (pe_param_spec){"long_factor", 1, {cfg->rotary_dim / 2}, from_config, {PE_INIT_CONST, 1, 0}};
    return 2;
}

/* pe__rope_table, the exact-angle table, is in fused.c (rows split across threads). */

static void release(pe__ctx *ctx) {
    rope_state *st = ctx->state;
    free(st->tab_q.p), free(st->tab_k.p), free(st->built.p), free(st->inv_freq), free(st->axis);
    free(st);
    ctx->state = NULL;
}

static pe_status prepare(pe__ctx *ctx, pe_err *err) {
    int64_t half = ctx->cfg->rotary_dim / 2, n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, A = ctx->A;
    const int shared = ctx->kpos == ctx->pos, sections = ctx->cfg->rope_sections.n > 0;
    if (sections && ctx->A != axes(ctx->cfg, NULL))
        return pe_error(err, PE_ETENSOR, "tensor 'positions': rope_sections of %d axes needs positions [T, %d] or [B, T, %d]",
                        ctx->cfg->rope_sections.n, ctx->cfg->rope_sections.n, ctx->cfg->rope_sections.n);
    rope_state *st = ctx->state ? ctx->state : calloc(1, sizeof *st); /* the layer's last tables, or new */
    ctx->state = st;
    if (st && !st->inv_freq && (st->inv_freq = malloc(sizeof(double) * 3 * half)))
        st->acc = st->inv_freq + half, st->cand = st->acc + half;
    if (st && sections && !st->axis && (st->axis = malloc((size_t)half))) pe_rope_pair_axes(ctx->cfg, st->axis);
    if (st) st->cs = pe__scratch_get(&st->tab_q, (size_t)(n * half * 2));
    if (st) st->cs_k = shared ? st->cs : pe__scratch_get(&st->tab_k, (size_t)(nk * half * 2));
    if (!st || !st->inv_freq || (sections && !st->axis) || !st->cs || !st->cs_k) {
        if (st) release(ctx);
        return pe_error(err, PE_ENOMEM, "out of memory for the rope table");
    }
    int64_t n_pos = ctx->pos_max + 1;
    st->factor_table = ctx->cfg->rope_scaling != PE_ROPE_LONGROPE ? -1
                       : pe__rope_longrope_uses_long(ctx->cfg, n_pos) ? LONG_FACTOR : SHORT_FACTOR;
    ctx->reads_inputs = st->factor_table >= 0 && ctx->w->param[st->factor_table]; /* factor_grad's q, k */
    ctx->transforms = PE__TQ | PE__TK | (ctx->cfg->rope_values ? PE__TV : 0);
    ctx->rotates_from = ctx->cfg->rotary_dim == ctx->D ? ctx->transforms : 0; /* the kernel writes the rotated dims only */
    const float *factors = NULL;
    if (st->factor_table >= 0)
        factors = ctx->w->param[st->factor_table] ? ctx->w->param[st->factor_table]
                                                  : ctx->cfg->hf_factors[st->factor_table];
    const double attn = pe__rope_freqs(ctx->cfg, n_pos, factors, st->cand);
    if (sections && ctx->cfg->rope_section_freqs == PE_SECTION_FREQS_PER_AXIS) per_axis_freqs(ctx->cfg, st->cand);
    for (int64_t t = -1; t < half; t++) { /* settings that derive a non-finite table: an error, not NaN outputs */
        const double v = t < 0 ? attn : st->cand[t];
        if (isfinite(v) && (v > 0 || (t >= 0 && v == 0))) continue; /* a zero frequency does not rotate (p-RoPE) */
        const pe_config *c = ctx->cfg;
        release(ctx);
        return pe_error(err, PE_EKEY, "key 'rope_scaling': these settings give %s %g (rope_base %g, rope_factor %g%s)",
                        t < 0 ? "an attention factor" : "a frequency", v, c->rope_base, c->rope_factor,
                        factors ? ", the LongRoPE factors" : "");
    }
    const pe__bytes from[] = {{&n, sizeof n},
                              {&nk, sizeof nk},
                              {&A, sizeof A},
                              {&shared, sizeof shared},
                              {&attn, sizeof attn},
                              {st->cand, sizeof(double) * (size_t)half},
                              {ctx->pos, sizeof(int64_t) * (size_t)(n * A)},
                              {ctx->kpos, shared ? 0 : sizeof(int64_t) * (size_t)(nk * A)}};
    if (pe__inputs_same(&st->built, from, 8)) return PE_OK;
    memcpy(st->inv_freq, st->cand, sizeof(double) * half);
    st->attn = attn;
    pe__rope_table(ctx->run, st->cs, ctx->pos, A, st->axis, n, st->inv_freq, half, attn);
    if (!shared) pe__rope_table(ctx->run, st->cs_k, ctx->kpos, A, st->axis, nk, st->inv_freq, half, attn);
    return PE_OK;
}

/* The rotation itself, pe__rope_rotate, is the SIMD kernel of exec/kernels.c (threads: exec/run.c). */

static const float *rotary_table(const pe__ctx *ctx, int which, int64_t *rd, int *layout) {
    const rope_state *st = ctx->state;
    *rd = ctx->cfg->rotary_dim, *layout = ctx->cfg->rope_layout;
    return which ? st->cs_k : st->cs;
}

/* Pair t at positions p: the angle p[axis of t] theta_t and the attention factor (either side). */
static void rotary_angle(const pe__ctx *ctx, int which, const int64_t *p, int64_t t, double *angle, double *scale) {
    (void)which;
    const rope_state *st = ctx->state;
    *angle = (double)p[st->axis ? st->axis[t] : 0] * st->inv_freq[t], *scale = st->attn;
}

/* The frequencies depend on the positions only through n = max(positions) + 1: dynamic NTK's
 * L = max(n, max_position_embeddings) and LongRoPE's choice of table. */
static int rotary_frame(const pe_config *cfg, int64_t D, const int64_t cur[2], int64_t lo, int64_t hi) {
    (void)D, (void)lo;
    if (cfg->rope_scaling == PE_ROPE_DYNAMIC) {
        int64_t L = cfg->max_position_embeddings;
        return (hi + 1 > L ? hi + 1 : L) != (cur[1] + 1 > L ? cur[1] + 1 : L);
    }
    if (cfg->rope_scaling == PE_ROPE_LONGROPE)
        return pe__rope_longrope_uses_long(cfg, hi + 1) != pe__rope_longrope_uses_long(cfg, cur[1] + 1);
    return 0;
}

/* Ministral 3 / Mistral 4's query scaling (HF ministral3 _get_llama_4_attn_scale): every query
 * row, the whole head, times 1 + beta ln(1 + floor(p / L0)) at its position p, after the
 * rotation (pe__log_floor_factor, as NoPE's temperature). A position below 0 (HF has none) scales by 1, as 0 does:
 * the keys' contexts (the KV cache's) carry any positions. A scalar per row: forward and, on dq, backward alike. */
static void scale_queries(const pe__ctx *ctx, float *x) {
    const double beta = ctx->cfg->llama_4_scaling_beta, L0 = (double)ctx->cfg->original_max_position_embeddings;
    if (!(beta > 0)) return;
    for (int64_t i = 0; i < ctx->B * ctx->T; i++) {
        const double p = ctx->pos[i] > 0 ? (double)ctx->pos[i] : 0.0; /* HF's positions are >= 0; below, 1 */
        const float f = pe__log_floor_factor(p, beta, L0);
        for (int64_t c = 0; c < ctx->C; c++) x[i * ctx->C + c] *= f;
    }
}

/* q at the query positions, k at the key positions (either may be NULL); each from its
 * ctx->*_src where that is set (whole heads: prepare's rotates_from), else in place. */
static void rotate_forward(pe__ctx *ctx, float *q, float *k, float *v) {
    const rope_state *st = ctx->state;
    const int64_t rd = ctx->cfg->rotary_dim, off = ctx->cfg->rotary_offset;
    const int layout = ctx->cfg->rope_layout;
    if (q) pe__rope_rotate_from(ctx->run, q + off, (ctx->q_src ? ctx->q_src : q) + off, ctx->B * ctx->T, ctx->C, ctx->H,
                                ctx->D, rd, layout, st->cs, 1.0f);
    if (q) scale_queries(ctx, q);
    if (k) pe__rope_rotate_from(ctx->run, k + off, (ctx->k_src ? ctx->k_src : k) + off, ctx->B * ctx->Tk, ctx->Ckv,
                                ctx->Hkv, ctx->D, rd, layout, st->cs_k, 1.0f);
    /* rope_values: HF DeepseekV4Attention.forward rotates its one kv tensor, which is the values
     * too, with the keys' cos and sin (the attention factor included) */
    if (v && ctx->cfg->rope_values)
        pe__rope_rotate_from(ctx->run, v + off, (ctx->v_src ? ctx->v_src : v) + off, ctx->B * ctx->Tk, ctx->Ckv, ctx->Hkv,
                             ctx->D, rd, layout, st->cs_k, 1.0f);
}

/* rope_values' output stage: o' = f R(-theta_q) o on the rotated slice (HF DeepseekV4Attention:
 * apply_rotary_pos_emb(attn_output, cos, -sin), cos and sin times the attention factor f), so
 * a value's rotation enters o' as R(theta_k - theta_q), a function of the distance; backward
 * is its transpose, f R(theta_q). */
static int output_used(const pe_config *cfg) { return cfg->rope_values; }
static void output_rotate(pe__ctx *ctx, float *o, float sign) {
    const rope_state *st = ctx->state;
    pe__rope_rotate(ctx->run, o + ctx->cfg->rotary_offset, ctx->B * ctx->T, ctx->C, ctx->H, ctx->D, ctx->cfg->rotary_dim,
                    ctx->cfg->rope_layout, st->cs, sign);
}
static void output_forward(pe__ctx *ctx, float *o) { output_rotate(ctx, o, -1.0f); }
static void output_backward(pe__ctx *ctx, float *dout) { output_rotate(ctx, dout, 1.0f); }

/* LongRoPE: theta = p / (f_t base^(2t/r)), so dtheta/df_t = -theta / f_t; and for a pair
 * y = R(theta) x, dy1/dtheta = -y2, dy2/dtheta = y1. Accumulates dL/df_t over the n rows of
 * nh heads of x_in (pre-rotation) with upstream gradient dy. */
static void factor_grad(const pe__ctx *ctx, const rope_state *st, const float *cs, const int64_t *pos,
                        int64_t n, const float *x_in, const float *dy, int64_t ld, int64_t nh, double *acc) {
    const int64_t rd = ctx->cfg->rotary_dim, half = rd / 2, D = ctx->D;
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t t = 0; t < half; t++) {
                int64_t first, step;
                pe__rope_pair(ctx->cfg->rope_layout, rd, t, &first, &step);
                const int64_t a = i * ld + h * D + ctx->cfg->rotary_offset + first;
                const double dtheta = pe__rope_dangle(x_in, dy, a, a + step, cs + (i * half + t) * 2);
                acc[t] += dtheta * (double)(pos[i * ctx->A + (st->axis ? st->axis[t] : 0)] - ctx->pos_min) * st->inv_freq[t];
            }
}

/* forward was q' = R(theta) q (times the attention factor), so now: dq = R(-theta) dq' with
 * the same factor; likewise k. The frequencies depend on a tensor only for LongRoPE, whose
 * selected factor table gets dL/df_t = -sum_i dL/dtheta_i * theta_i / f_t.
 * Conditioning: at position 2^20 each term is ~10^6 times dL/dtheta_i and they cancel, so
 * float32 noise in dq would dominate. Scores see only theta_i - theta_j of the same pair, so
 * adding one phase to every q and k of pair t changes nothing: sum_i dL/dtheta_i = 0, and
 * theta_i may be replaced by (p_i - min p) / (f_t base^(2t/r)). That keeps the gradient
 * exact to float32 at any offset. */
static void rotate_backward(pe__ctx *ctx, float *dq, float *dk, float *dv, const float *q_in,
                            const float *k_in) {
    const rope_state *st = ctx->state;
    int64_t n = ctx->B * ctx->T, nk = ctx->B * ctx->Tk, rd = ctx->cfg->rotary_dim, off = ctx->cfg->rotary_offset;
    float *dfactor = st->factor_table >= 0 && ctx->w->param[st->factor_table] ? ctx->g->dparam[st->factor_table] : NULL;
    scale_queries(ctx, dq); /* q' = s R q: the rotation's upstream gradient is s dq' */
    if (dfactor) {
        double *acc = st->acc; /* sum dL/dtheta (theta - theta_min) f_t */
        memset(acc, 0, sizeof(double) * (size_t)(rd / 2));
        factor_grad(ctx, st, st->cs, ctx->pos, n, q_in, dq, ctx->C, ctx->H, acc);
        factor_grad(ctx, st, st->cs_k, ctx->kpos, nk, k_in, dk, ctx->Ckv, ctx->Hkv, acc);
        const float *f = ctx->w->param[st->factor_table];
        for (int64_t t = 0; t < rd / 2; t++) dfactor[t] -= (float)(acc[t] / (double)f[t]);
    }
    pe__rope_rotate(ctx->run, dq + off, n, ctx->C, ctx->H, ctx->D, rd, ctx->cfg->rope_layout, st->cs, -1.0f);
    pe__rope_rotate(ctx->run, dk + off, nk, ctx->Ckv, ctx->Hkv, ctx->D, rd, ctx->cfg->rope_layout, st->cs_k, -1.0f);
    if (dv && ctx->cfg->rope_values)
        pe__rope_rotate(ctx->run, dv + off, nk, ctx->Ckv, ctx->Hkv, ctx->D, rd, ctx->cfg->rope_layout, st->cs_k, -1.0f);
}

pe_status pe_rope_permute(float *w, int64_t heads, int64_t D, int64_t rotary_dim, int64_t cols, int to,
                          pe_err *err) {
    int64_t r = rotary_dim, half = r / 2;
    if (heads < 1 || D < 2 || cols < 1 || r < 2 || r % 2 || r > D)
        return pe_error(err, PE_EINVAL, "rope_permute: need heads >= 1, cols >= 1 and an even rotary_dim "
                                        "within 2..head_dim (got heads %lld, head_dim %lld, rotary_dim %lld)",
                        (long long)heads, (long long)D, (long long)r);
    if (to != PE_ROPE_HALF && to != PE_ROPE_INTERLEAVED) return pe_error(err, PE_EINVAL, "rope_permute: unknown layout");
    float *tmp = malloc(sizeof(float) * r * cols);
    if (!tmp) return pe_error(err, PE_ENOMEM, "out of memory");
    for (int64_t h = 0; h < heads; h++) {
        float *rows = w + h * D * cols;
        memcpy(tmp, rows, sizeof(float) * r * cols);
        for (int64_t t = 0; t < half; t++) {
            /* interleaved pair (2t, 2t+1) <-> half pair (t, t + r/2) */
            int64_t src1 = to == PE_ROPE_HALF ? 2 * t : t, src2 = to == PE_ROPE_HALF ? 2 * t + 1 : half + t;
            int64_t dst1 = to == PE_ROPE_HALF ? t : 2 * t, dst2 = to == PE_ROPE_HALF ? half + t : 2 * t + 1;
            memcpy(rows + dst1 * cols, tmp + src1 * cols, sizeof(float) * cols);
            memcpy(rows + dst2 * cols, tmp + src2 * cols, sizeof(float) * cols);
        }
    }
    free(tmp);
    return PE_OK;
}

const pe__method pe__method_rope = {
    .name = "rope",
    .reference = "Su et al. 2021, RoFormer; scalings of HF modeling_rope_utils; M-RoPE of Qwen2-VL, Qwen3-VL",
    .family = PE_FAMILY_ROTARY,
    .keys = "rope_layout rope_base rotary_dim rotary_offset rope_scaling rope_factor "
            "original_max_position_embeddings max_position_embeddings beta_fast beta_slow mscale "
            "mscale_all_dim attention_factor yarn_truncate low_freq_factor high_freq_factor rope_sections "
            "rope_section_layout rope_section_freqs llama_4_scaling_beta rope_proportion rope_values hf_config hf_layer hf_assume",
    .flags = PE__GQA | PE__FUSED | PE__PERSIST,
    .defaults = defaults,
    .check = check,
    .params = params,
    .axes = axes,
    .prepare = prepare,
    .release = release,
    .rotate_forward = rotate_forward,
    .rotate_backward = rotate_backward,
    .output_used = output_used,
    .output_forward = output_forward,
    .output_backward = output_backward,
    .rotary_table = rotary_table,
    .rotary_angle = rotary_angle,
    .rotary_frame = rotary_frame,
};
