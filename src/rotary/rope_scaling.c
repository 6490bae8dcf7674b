/* RoPE scalings: a table of pure functions, one per variant, that fill the frequencies (double)
 * and return the attention factor that multiplies cos and sin, so the rotation kernel never
 * branches on the variant. Formulas and key names follow HF transformers' modeling_rope_utils
 * (r = rotary_dim, s = rope_factor, L0 = original_max_position_embeddings), computed in double
 * where HF uses float32, as the contract asks for exact angles:
 *   none      theta_t = base^(-2t/r)
 *   linear    theta_t / s
 *   ntk       base' = base s^(r/(r-2))
 *   dynamic   base' = base (s L/Lmax - (s - 1))^(r/(r-2)), L = max(max(pos)+1, Lmax)
 *   yarn      theta_t/s and theta_t blended by a ramp over the pairs between the correction
 *             dims of beta_fast and beta_slow rotations in L0; factor 0.1 ln s + 1 (or the
 *             mscale / mscale_all_dim ratio)
 *   llama3    theta_t / s for wavelengths above L0/low_freq_factor, theta_t below
 *             L0/high_freq_factor, smooth in between
 *   longrope  theta_t / f_t, f = short_factor or, when max(pos)+1 > L0, long_factor;
 *             factor sqrt(1 + ln s / ln L0)
 *   proportional  theta_t / s for the first floor(rope_proportion r / 2) pairs, 0 (no
 *             rotation) for the rest: Gemma 4's p-RoPE, whose r is the whole head, so the
 *             rotating pairs keep the full head's frequencies (_compute_proportional_rope_parameters)
 */
#include "rotary.h"

typedef double (*rope_init_fn)(const pe_config *cfg, int64_t n_pos, const float *factors,
                               double *inv_freq);

static void default_freqs(const pe_config *cfg, double base, double *inv_freq) {
    int64_t r = cfg->rotary_dim;
    for (int64_t t = 0; t < r / 2; t++) inv_freq[t] = pow(base, -2.0 * (double)t / (double)r);
}

static double rope_default(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos, (void)f;
    default_freqs(cfg, cfg->rope_base, inv_freq);
    return 1.0;
}

static double rope_linear(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos, (void)f;
    default_freqs(cfg, cfg->rope_base, inv_freq);
    for (int64_t t = 0; t < cfg->rotary_dim / 2; t++) inv_freq[t] /= cfg->rope_factor;
    return 1.0;
}

static double rope_ntk(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos, (void)f;
    double r = (double)cfg->rotary_dim;
    default_freqs(cfg, cfg->rope_base * pow(cfg->rope_factor, r / (r - 2)), inv_freq);
    return 1.0;
}

static double rope_dynamic(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)f;
    double r = (double)cfg->rotary_dim, s = cfg->rope_factor;
    double lmax = (double)cfg->max_position_embeddings;
    double L = (double)n_pos > lmax ? (double)n_pos : lmax;
    default_freqs(cfg, cfg->rope_base * pow(s * L / lmax - (s - 1), r / (r - 2)), inv_freq);
    return 1.0;
}

static double yarn_mscale(double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * log(s) + 1.0; }

/* The pair index at which `rotations` full turns fit in L0 positions. */
static double yarn_correction_dim(double rotations, double r, double base, double L0) {
    return r * log(L0 / (rotations * 2 * PE_PI)) / (2 * log(base));
}

static double rope_yarn(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos, (void)f;
    double r = (double)cfg->rotary_dim, s = cfg->rope_factor, base = cfg->rope_base;
    double L0 = (double)cfg->original_max_position_embeddings;
    /* HF reads beta_* with `or`: 0 means the default */
    double fast = cfg->beta_fast ? cfg->beta_fast : 32, slow = cfg->beta_slow ? cfg->beta_slow : 1;
    double lo = yarn_correction_dim(fast, r, base, L0), hi = yarn_correction_dim(slow, r, base, L0);
    if (cfg->yarn_truncate) lo = floor(lo), hi = ceil(hi);
    lo = lo > 0 ? lo : 0;
    hi = hi < r - 1 ? hi : r - 1;
    if (lo == hi) hi += 0.001; /* HF's guard against a zero-width ramp */
    default_freqs(cfg, base, inv_freq);
    for (int64_t t = 0; t < cfg->rotary_dim / 2; t++) {
        double ramp = ((double)t - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        /* extrapolation (theta_t) weighs 1 - ramp, interpolation (theta_t / s) weighs ramp */
        inv_freq[t] = inv_freq[t] / s * ramp + inv_freq[t] * (1 - ramp);
    }
    if (!isnan(cfg->attention_factor)) return cfg->attention_factor;
    /* HF: mscale and mscale_all_dim count only when both are set and non-zero */
    if (!isnan(cfg->mscale) && !isnan(cfg->mscale_all_dim) && cfg->mscale && cfg->mscale_all_dim)
        return yarn_mscale(s, cfg->mscale) / yarn_mscale(s, cfg->mscale_all_dim);
    return yarn_mscale(s, 1.0);
}

static double rope_llama3(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos, (void)f;
    double s = cfg->rope_factor, L0 = (double)cfg->original_max_position_embeddings;
    double lff = cfg->low_freq_factor, hff = cfg->high_freq_factor;
    double low_wl = L0 / lff, high_wl = L0 / hff;
    default_freqs(cfg, cfg->rope_base, inv_freq);
    for (int64_t t = 0; t < cfg->rotary_dim / 2; t++) {
        double wl = 2 * PE_PI / inv_freq[t];
        if (wl > low_wl) {
            inv_freq[t] /= s;
        } else if (!(wl < high_wl) && hff > lff) { /* low == high (Llama 4): no band between */
            double smooth = (L0 / wl - lff) / (hff - lff);
            inv_freq[t] = (1 - smooth) * inv_freq[t] / s + smooth * inv_freq[t];
        }
    }
    return 1.0;
}

/* f: the factor table the positions select (see pe__rope_longrope_uses_long). */
static double rope_longrope(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos;
    default_freqs(cfg, cfg->rope_base, inv_freq);
    for (int64_t t = 0; t < cfg->rotary_dim / 2; t++) inv_freq[t] /= (double)f[t];
    if (!isnan(cfg->attention_factor)) return cfg->attention_factor;
    double L0 = (double)cfg->original_max_position_embeddings;
    double s = cfg->max_position_embeddings > 0 ? (double)cfg->max_position_embeddings / L0 : cfg->rope_factor;
    return s <= 1 ? 1.0 : sqrt(1 + log(s) / log(L0));
}

static double rope_proportional(const pe_config *cfg, int64_t n_pos, const float *f, double *inv_freq) {
    (void)n_pos, (void)f;
    const int64_t rotating = (int64_t)floor(cfg->rope_proportion * (double)cfg->rotary_dim / 2); /* HF: int(p * D // 2) */
    default_freqs(cfg, cfg->rope_base, inv_freq);
    for (int64_t t = 0; t < cfg->rotary_dim / 2; t++) inv_freq[t] = t < rotating ? inv_freq[t] / cfg->rope_factor : 0;
    return 1.0;
}

/* Keys each variant needs beyond the common rope keys, and those it may use. */
static const struct rope_type {
    const char *name;
    rope_init_fn init;
    const char *required, *optional;
} ROPE_TYPES[] = {
    [PE_ROPE_NONE] = {"none", rope_default, "", ""},
    [PE_ROPE_LINEAR] = {"linear", rope_linear, "", "rope_factor"},
    [PE_ROPE_NTK] = {"ntk", rope_ntk, "", "rope_factor"},
    [PE_ROPE_DYNAMIC] = {"dynamic", rope_dynamic, "max_position_embeddings", "rope_factor"},
    [PE_ROPE_YARN] = {"yarn", rope_yarn, "original_max_position_embeddings",
                      "rope_factor beta_fast beta_slow mscale mscale_all_dim attention_factor "
                      "yarn_truncate max_position_embeddings"},
    [PE_ROPE_LLAMA3] = {"llama3", rope_llama3, "original_max_position_embeddings",
                        "rope_factor low_freq_factor high_freq_factor max_position_embeddings"},
    [PE_ROPE_LONGROPE] = {"longrope", rope_longrope, "original_max_position_embeddings",
                          "rope_factor attention_factor max_position_embeddings"},
    [PE_ROPE_PROPORTIONAL] = {"proportional", rope_proportional, "", "rope_factor rope_proportion"},
};

static int listed(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = strstr(list, word); p; p = strstr(p + 1, word))
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return 1;
    return 0;
}

pe_status pe__rope_check(const pe_config *cfg, int64_t D, pe_err *err) {
    static const char *const SCALING_KEYS[] = {
        "rope_factor", "original_max_position_embeddings", "max_position_embeddings", "beta_fast",
        "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "yarn_truncate",
        "low_freq_factor", "high_freq_factor", "rope_proportion", NULL};
    const struct rope_type *rt = &ROPE_TYPES[cfg->rope_scaling];
    int64_t r = cfg->rotary_dim;
    if (r < 2 || r % 2 || r > D)
        return pe_error(err, PE_EKEY, "key 'rotary_dim': %lld must be even and within 2..head_dim %lld",
                        (long long)r, (long long)D);
    if (cfg->rope_scaling == PE_ROPE_NTK || cfg->rope_scaling == PE_ROPE_DYNAMIC)
        if (r < 4) return pe_error(err, PE_EKEY, "key 'rotary_dim': rope_scaling %s needs at least 4", rt->name);
    if (!(cfg->rope_base > 1)) return pe_error(err, PE_EKEY, "key 'rope_base' must be > 1");
    for (int i = 0; SCALING_KEYS[i]; i++) {
        const char *k = SCALING_KEYS[i];
        int given = pe_config_is_set(cfg, k);
        if (listed(rt->required, k) && !given)
            return pe_error(err, PE_EKEY, "key '%s' is required by rope_scaling %s", k, rt->name);
        const int l0 = !strcmp(k, "original_max_position_embeddings") && cfg->llama_4_scaling_beta > 0; /* its L0 too */
        if (given && !listed(rt->required, k) && !listed(rt->optional, k) && !l0)
            return pe_error(err, PE_EKEY, "key '%s' does not apply to rope_scaling %s", k, rt->name);
    }
    if (!(cfg->rope_factor > 0)) return pe_error(err, PE_EKEY, "key 'rope_factor' must be > 0");
    if (!(cfg->rope_proportion >= 0 && cfg->rope_proportion <= 1))
        return pe_error(err, PE_EKEY, "key 'rope_proportion' must be within 0 .. 1");
    if (!(cfg->llama_4_scaling_beta >= 0) || !isfinite(cfg->llama_4_scaling_beta))
        return pe_error(err, PE_EKEY, "key 'llama_4_scaling_beta' must be a number >= 0");
    if (cfg->llama_4_scaling_beta > 0 && !pe_config_has(cfg, PE_K_original_max_position_embeddings))
        return pe_error(err, PE_EKEY, "key 'llama_4_scaling_beta' needs original_max_position_embeddings (its L0)");
    if (cfg->llama_4_scaling_beta > 0 && cfg->rope_sections.n)
        return pe_error(err, PE_EKEY, "key 'llama_4_scaling_beta' takes one position per token, not rope_sections");
    if (pe_config_has(cfg, PE_K_original_max_position_embeddings) && cfg->original_max_position_embeddings < 2)
        return pe_error(err, PE_EKEY, "key 'original_max_position_embeddings' must be >= 2");
    if (pe_config_has(cfg, PE_K_max_position_embeddings) && cfg->max_position_embeddings < 1)
        return pe_error(err, PE_EKEY, "key 'max_position_embeddings' must be >= 1");
    if (cfg->rope_scaling == PE_ROPE_LLAMA3 && !(cfg->high_freq_factor >= cfg->low_freq_factor && cfg->low_freq_factor > 0))
        return pe_error(err, PE_EKEY, "keys 'low_freq_factor' and 'high_freq_factor' need 0 < low <= high");
    if (cfg->rope_scaling == PE_ROPE_YARN && (cfg->beta_fast < 0 || cfg->beta_slow < 0))
        return pe_error(err, PE_EKEY, "keys 'beta_fast' and 'beta_slow' must be >= 0");
    if (cfg->rope_scaling == PE_ROPE_DYNAMIC && cfg->rope_factor < 1)
        return pe_error(err, PE_EKEY, "key 'rope_factor' must be >= 1 for dynamic scaling");
    if (cfg->rope_scaling == PE_ROPE_LONGROPE && cfg->hf_factor_count && cfg->hf_factor_count != r / 2)
        return pe_error(err, PE_EKEY, "hf_config %s: 'short_factor' and 'long_factor' have %d entries, rotary_dim %lld needs %lld",
                        cfg->hf_config, cfg->hf_factor_count, (long long)r, (long long)(r / 2));
    return PE_OK;
}

int pe__rope_longrope_uses_long(const pe_config *cfg, int64_t n_pos) {
    return cfg->rope_scaling == PE_ROPE_LONGROPE && n_pos > cfg->original_max_position_embeddings;
}

double pe__rope_freqs(const pe_config *cfg, int64_t n_pos, const float *factors, double *inv_freq) {
    return ROPE_TYPES[cfg->rope_scaling].init(cfg, n_pos, factors, inv_freq);
}
