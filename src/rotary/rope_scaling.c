/* RoPE scalings: one pure function per variant that fills the frequencies and returns the
 * attention factor, so the rotation kernel never branches on the variant. Names and
 * formulas follow HF transformers' modeling_rope_utils. */
#include "../internal.h"

typedef double (*rope_init_fn)(const pe_config *cfg, int64_t n_pos, const float *short_factor,
                               const float *long_factor, double *inv_freq, int *long_used);

/* theta_t = base^(-2t/r), t < r/2 */
static double rope_default(const pe_config *cfg, int64_t n_pos, const float *sf, const float *lf,
                           double *inv_freq, int *long_used) {
    (void)n_pos, (void)sf, (void)lf;
    int64_t r = cfg->rotary_dim;
    for (int64_t t = 0; t < r / 2; t++) inv_freq[t] = pow(cfg->rope_base, -2.0 * (double)t / (double)r);
    *long_used = 0;
    return 1.0;
}

static const struct rope_type {
    const char *name;
    rope_init_fn init; /* NULL: not implemented yet */
} ROPE_TYPES[] = {
    [PE_ROPE_NONE] = {"none", rope_default},
    [PE_ROPE_LINEAR] = {"linear", NULL},
    [PE_ROPE_NTK] = {"ntk", NULL},
    [PE_ROPE_DYNAMIC] = {"dynamic", NULL},
    [PE_ROPE_YARN] = {"yarn", NULL},
    [PE_ROPE_LLAMA3] = {"llama3", NULL},
    [PE_ROPE_LONGROPE] = {"longrope", NULL},
};

pe_status pe__rope_check(const pe_config *cfg, int64_t D, pe_err *err) {
    int64_t r = cfg->rotary_dim;
    if (pe_config_is_set(cfg, "hf_config"))
        return pe__fail(err, PE_EKEY, "key 'hf_config' is not supported yet");
    if (r < 2 || r % 2 || r > D)
        return pe__fail(err, PE_EKEY, "key 'rotary_dim': %lld must be even and within 2..head_dim %lld",
                        (long long)r, (long long)D);
    if (!(cfg->rope_base > 0)) return pe__fail(err, PE_EKEY, "key 'rope_base' must be > 0");
    if (!ROPE_TYPES[cfg->rope_scaling].init)
        return pe__fail(err, PE_EKEY, "key 'rope_scaling': %s is not supported yet",
                        ROPE_TYPES[cfg->rope_scaling].name);
    return PE_OK;
}

double pe__rope_freqs(const pe_config *cfg, int64_t n_pos, const float *short_factor,
                      const float *long_factor, double *inv_freq, int *long_used) {
    return ROPE_TYPES[cfg->rope_scaling].init(cfg, n_pos, short_factor, long_factor, inv_freq,
                                              long_used);
}
