/* What tools ask of the library beside attention itself: a method's description and paths,
 * whether a layer takes a range of positions, a relative method's table row, RoPE's frequencies.
 * The trainer, the CLI and posenc's Python read these instead of the library's internals. */
#include "layer.h"
#include "rotary/rotary.h"

_Static_assert(sizeof(pe_method_info) == PE_METHOD_INFO_BYTES, "pe_method_info's fields outgrew PE_METHOD_INFO_BYTES");

pe_status pe_method_describe(int m, pe_method_info *info, pe_err *err) {
    if (m < 0 || m >= PE_METHOD_COUNT || !info)
        return pe_error(err, PE_EINVAL, "method_describe: need a method id 0 .. %d and info", PE_METHOD_COUNT - 1);
    const pe__method *mt = pe__method_get(m);
    memset(info, 0, sizeof *info);
    *info = (pe_method_info){.name = mt->name, .reference = mt->reference ? mt->reference : "", .family = mt->family,
                             .fused = (mt->flags & PE__FUSED) != 0, .gqa = (mt->flags & PE__GQA) != 0,
                             .projected = !(mt->flags & (PE__INPUT | PE__LAYER_INPUT)),
                             .memory = (mt->flags & PE__MEMORY) != 0, .multi_axis = mt->axes != NULL,
                             .token_ids = (mt->flags & PE__COMPLEX) != 0, .relative_index = mt->rel_index != NULL,
                             .embedding = (mt->flags & PE__INPUT) && !(mt->flags & PE__COMPLEX),
                             .scale_in_init = mt->scale_in_init, .axes_min = mt->axes_min,
                             .causal_only = (mt->flags & PE__CAUSAL_ONLY) != 0};
    return PE_OK;
}

pe_status pe_attention_check_positions(pe_attention *a, const pe_weights *w, int64_t lo, int64_t hi, pe_err *err) {
    if (lo > hi) return pe_error(err, PE_EINVAL, "check_positions: lo %lld > hi %lld", (long long)lo, (long long)hi);
    if (pe_attention_is_complex(a)) return PE_OK; /* any position; its ids are checked per call */
    const int64_t pos[2] = {lo, hi};
    pe__ctx ctx;
    pe_status st = pe__attention_context(a, w, 2, pos, lo, hi, &ctx, err);
    pe__attention_release(a, &ctx);
    return st;
}

pe_status pe_attention_relative_index(const pe_attention *a, int64_t i, int64_t j, int64_t *index, pe_err *err) {
    const pe__method *m = pe__attention_method(a);
    if (!m->rel_index)
        return pe_error(err, PE_EINVAL, "method %s has no relative index (a table row per offset: shaw, t5, tupe, "
                        "deberta have one)", m->name);
    if (!index) return pe_error(err, PE_EINVAL, "relative_index: index is required");
    *index = m->rel_index(pe_attention_config(a), i, j);
    return PE_OK;
}

pe_status pe_rope_frequencies(const pe_config *cfg, int64_t n_pos, const float *factors, double *inv_freq,
                              double *attention_factor, pe_err *err) {
    if (!cfg || !inv_freq || !attention_factor || n_pos < 1)
        return pe_error(err, PE_EINVAL, "rope_frequencies: need settings, n_pos >= 1, inv_freq and attention_factor");
    if (cfg->rotary_dim < 2 || cfg->rope_base <= 1 || cfg->rope_scaling < PE_ROPE_NONE || cfg->rope_scaling > PE_ROPE_PROPORTIONAL)
        return pe_error(err, PE_EINVAL, "rope_frequencies: the settings are not a resolved rotary layer's "
                        "(pe_attention_config of a rope layer)");
    if (!factors && cfg->rope_scaling == PE_ROPE_LONGROPE && cfg->hf_factor_count)
        factors = cfg->hf_factors[pe__rope_longrope_uses_long(cfg, n_pos)];
    if (!factors && cfg->rope_scaling == PE_ROPE_LONGROPE)
        return pe_error(err, PE_EINVAL, "rope_frequencies: longrope needs its factor table");
    *attention_factor = pe__rope_freqs(cfg, n_pos, factors, inv_freq);
    return PE_OK;
}
