/* hf_config's keys: a layer read by hf_config.c (hf_layer.h) turned into posenc's settings: the
 * rope keys of its type (rope_theta, the slice, the scaling's entries, M-RoPE's sections, p-RoPE's
 * proportion), the softmax scale of its family's rule, NoPE's temperature tuning. */
#include <math.h>

#include "hf_layer.h"

/* HF names of the rope types, as posenc's rope_scaling values. */
static const struct { const char *hf, *posenc; } TYPES[] = {
    {"default", "none"}, {"mrope", "none"}, {"linear", "linear"}, {"dynamic", "dynamic"}, {"yarn", "yarn"},
    {"llama3", "llama3"}, {"longrope", "longrope"}, {"su", "longrope"}, {"ntk", "ntk"}, {"proportional", "proportional"},
};

/* Scaling entries: HF name -> posenc key (NULL: handled by hand). */
static const struct { const char *hf, *key; } ENTRIES[] = {
    {"factor", "rope_factor"},
    {"original_max_position_embeddings", "original_max_position_embeddings"},
    {"beta_fast", "beta_fast"}, {"beta_slow", "beta_slow"},
    {"mscale", "mscale"}, {"mscale_all_dim", "mscale_all_dim"},
    {"attention_factor", "attention_factor"}, {"truncate", "yarn_truncate"},
    {"low_freq_factor", "low_freq_factor"}, {"high_freq_factor", "high_freq_factor"},
    {"llama_4_scaling_beta", "llama_4_scaling_beta"}, /* Ministral 3, Mistral 4 */
    {"max_position_embeddings", NULL},                 /* Ministral 3 copies the top level's in */
    {"rope_type", NULL}, {"type", NULL}, {"short_factor", NULL}, {"long_factor", NULL},
    {"rope_theta", NULL}, {"partial_rotary_factor", NULL}, {"mrope_section", NULL}, {"mrope_interleaved", NULL},
};

/* The config's value of a key the family may name otherwise ("a|b": the first present), or NULL. */
json_t *pe__hf_key(json_t *o, const char *names, const char *usual) {
    const char *n = names ? names : usual;
    char one[64];
    while (n && *n) {
        const char *bar = strchr(n, '|');
        const size_t len = bar ? (size_t)(bar - n) : strlen(n);
        snprintf(one, sizeof one, "%.*s", (int)len, n);
        json_t *v = json_object_get(o, one);
        if (v) return v;
        n = bar ? bar + 1 : NULL;
    }
    return NULL;
}

int64_t pe__hf_int(json_t *o, const char *key, int64_t fallback) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : fallback;
}

/* HF configs write booleans as true/false, or (Llama 4's first releases) as a number */
int pe__hf_truthy(json_t *v, int fallback) {
    if (json_is_boolean(v)) return json_is_true(v);
    if (json_is_number(v)) return json_number_value(v) != 0;
    return fallback;
}

pe_status pe__hf_bad(const hf_layer *L, pe_err *err, const char *what) {
    return pe_error(err, PE_EKEY, "hf_config %s: %s", L->path, what);
}

/* Sets key from a JSON scalar unless the key was given explicitly. */
pe_status pe__hf_fill(pe_config *cfg, const char *key, json_t *v, const char *path, pe_err *err) {
    if (!v || json_is_null(v) || pe_config_is_set(cfg, key)) return PE_OK;
    char text[64];
    if (json_is_integer(v)) snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(text, sizeof text, "%.17g", json_real_value(v));
    else if (json_is_boolean(v)) snprintf(text, sizeof text, "%s", json_is_true(v) ? "true" : "false");
    else return pe_error(err, PE_EKEY, "hf_config %s: '%s' is not a number", path, key);
    pe_status st = pe_config_set(cfg, key, text, err);
    if (st) {
        char inner[sizeof err->msg];
        snprintf(inner, sizeof inner, "%s", err->msg);
        return pe_error(err, st, "hf_config %s: %s", path, inner);
    }
    return PE_OK;
}

pe_status pe__hf_fill_real(pe_config *cfg, const char *key, double v, const char *path, pe_err *err) {
    json_t *j = json_real(v);
    pe_status st = pe__hf_fill(cfg, key, j, path, err);
    json_decref(j);
    return st;
}

static pe_status read_factors(pe_config *cfg, json_t *arr, int which, const char *name, int64_t r,
                              const char *path, pe_err *err) {
    if (!json_is_array(arr)) return pe_error(err, PE_EKEY, "hf_config %s: '%s' is not a list", path, name);
    size_t n = json_array_size(arr);
    if ((r >= 0 && (int64_t)n != r / 2) || n > PE_MAX_ROPE_PAIRS || (which == 1 && (int)n != cfg->hf_factor_count))
        return pe_error(err, PE_EKEY, "hf_config %s: '%s' has %zu entries, rotary_dim %lld needs %lld", path,
                        name, n, (long long)r, (long long)(r >= 0 ? r / 2 : cfg->hf_factor_count));
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        if (!json_is_number(e) || !(json_number_value(e) > 0))
            return pe_error(err, PE_EKEY, "hf_config %s: '%s'[%zu] is not a positive number", path, name, i);
        cfg->hf_factors[which][i] = (float)json_number_value(e);
    }
    cfg->hf_factor_count = (int)n;
    return PE_OK;
}

/* The rope keys of a RoPE layer of head_dim D. */
static pe_status apply_rope(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    const char *path = L->path;
    json_t *mc = L->mc, *sc = L->local_base > 0 ? NULL : L->rope;
    pe_status st;

    /* rope_theta and partial_rotary_factor: top level, or inside the rope parameters; by the
     * family's names, and its defaults where the file gives none */
    const hf_family *F = L->F;
    const int fixed_base = F->theta && !strcmp(F->theta, "-"); /* GPT-J: 10000 in the code */
    json_t *theta = sc && !fixed_base ? json_object_get(sc, "rope_theta") : NULL;
    if (!theta && !fixed_base) theta = pe__hf_key(mc, F->theta, "rope_theta");
    if (L->local_base > 0) st = pe__hf_fill_real(cfg, "rope_base", L->local_base, path, err);
    else if (theta) st = pe__hf_fill(cfg, "rope_base", theta, path, err);
    else st = F->theta_default > 0 ? pe__hf_fill_real(cfg, "rope_base", F->theta_default, path, err) : PE_OK;
    if (st) return st;
    if (L->gguf_rotary_dim > 0) { /* a GGUF header's own: the rotated dims, llama.cpp's pairs */
        json_t *rd = json_integer((json_int_t)L->gguf_rotary_dim);
        st = pe__hf_fill(cfg, "rotary_dim", rd, path, err);
        json_decref(rd);
        if (!st && !pe_config_has(cfg, PE_K_rope_layout))
            st = pe_config_set(cfg, "rope_layout", L->gguf_layout == PE_ROPE_INTERLEAVED ? "interleaved" : "half", err);
        if (st) return st;
    }
    if (L->mla) { /* the last qk_rope_head_dim dims of the head */
        json_t *r = json_object_get(mc, "qk_rope_head_dim"), *o = json_object_get(mc, "qk_nope_head_dim");
        if ((st = pe__hf_fill(cfg, "rotary_offset", o, path, err)) || (st = pe__hf_fill(cfg, "rotary_dim", r, path, err))) return st;
    }
    const int interleaved = F->layout == HF_INTERLEAVED ||
                            (F->layout == HF_INTERLEAVED_KEY && pe__hf_truthy(json_object_get(mc, "rope_interleave"), 1));
    if (interleaved && !pe_config_has(cfg, PE_K_rope_layout) && (st = pe_config_set(cfg, "rope_layout", "interleaved", err)))
        return st;
    if (F->rotary_dim) { /* GPT-J: rotary_dim dims (null: the whole head) */
        json_t *rd = json_object_get(mc, F->rotary_dim), *def = json_integer(F->rotary_dim_default);
        st = json_is_null(rd) ? PE_OK : pe__hf_fill(cfg, "rotary_dim", rd ? rd : def, path, err);
        json_decref(def);
        if (st) return st;
    }
    const char *kind = "none";
    json_t *type = sc ? json_object_get(sc, "rope_type") : NULL;
    if (sc && !type) type = json_object_get(sc, "type");
    if (type && !json_is_null(type)) {
        if (!json_is_string(type)) return pe__hf_bad(L, err, "rope_type is not a string");
        kind = NULL;
        for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
            if (!strcmp(json_string_value(type), TYPES[i].hf)) kind = TYPES[i].posenc;
        if (!kind) return pe_error(err, PE_EKEY, "hf_config %s: unknown rope_type '%s'", path, json_string_value(type));
    }
    const int proportional = !strcmp(kind, "proportional");
    if (L->global && !proportional && L->head_dim != L->base_head_dim) /* Gemma4TextRotaryEmbedding.__init__ */
        return pe_error(err, PE_EKEY, "hf_config %s: layer %lld has global_head_dim %lld, but its rope_type %s makes "
                        "frequencies for head_dim %lld (only proportional reads global_head_dim): HF's rotation fails there",
                        path, (long long)L->layer, (long long)L->head_dim, kind, (long long)L->base_head_dim);
    /* proportional: partial_rotary_factor is the share of the whole head's frequencies that
     * rotate (HF reads it from the rope parameters only); a family's default type may rotate the
     * whole head whatever it says (Gemma 4) */
    if (proportional && (st = pe__hf_fill(cfg, "rope_proportion", json_object_get(sc, "partial_rotary_factor"), path, err)))
        return st;
    const int sliced = !proportional && !(F->default_whole_head && !strcmp(kind, "none"));
    json_t *prf = !sliced ? NULL : sc ? json_object_get(sc, "partial_rotary_factor") : NULL, *fdef = NULL;
    if (sliced && !prf) prf = pe__hf_key(mc, F->fraction, "partial_rotary_factor");
    if (sliced && !prf && F->fraction_default > 0) prf = fdef = json_real(F->fraction_default);
    if (prf && !json_is_null(prf) && !pe_config_has(cfg, PE_K_rotary_dim)) {
        if (!json_is_number(prf) || !(json_number_value(prf) > 0 && json_number_value(prf) <= 1)) {
            json_decref(fdef);
            return pe__hf_bad(L, err, "partial_rotary_factor must be in (0, 1]");
        }
        if (D < 0) { /* the file gives no head_dim: the layer's, when it is made */
            cfg->hf_rotary_fraction = json_number_value(prf);
        } else {
            json_t *rd = json_integer((json_int_t)((double)D * json_number_value(prf))); /* HF: int(head_dim * f) */
            st = pe__hf_fill(cfg, "rotary_dim", rd, path, err);
            json_decref(rd);
        }
    }
    json_decref(fdef);
    if (st) return st;
    /* DeepSeek-V4's apply_rotary_pos_emb rotates x[..., -rope_dim:]: the slice ends the head */
    if (F->slice_last && D > 0 && pe_config_has(cfg, PE_K_rotary_dim) && cfg->rotary_dim < D) {
        json_t *off = json_integer((json_int_t)(D - cfg->rotary_dim));
        st = pe__hf_fill(cfg, "rotary_offset", off, path, err);
        json_decref(off);
        if (st) return st;
    }
    if (F->values_rotated && !pe_config_has(cfg, PE_K_rope_values) && (st = pe_config_set(cfg, "rope_values", "true", err)))
        return st;

    if (!sc) return PE_OK;
    const char *key;
    json_t *val;
    json_object_foreach(sc, key, val) {
        int known = 0;
        for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++) known |= !strcmp(key, ENTRIES[i].hf);
        if (!known) return pe_error(err, PE_EKEY, "hf_config %s: unknown rope entry '%s'", path, key);
    }
    if (!pe_config_has(cfg, PE_K_rope_scaling) && (st = pe_config_set(cfg, "rope_scaling", kind, err))) return st;
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++)
        if (ENTRIES[i].key && (st = pe__hf_fill(cfg, ENTRIES[i].key, json_object_get(sc, ENTRIES[i].hf), path, err)))
            return st;
    /* M-RoPE (Qwen2-VL, Qwen3-VL, ERNIE-4.5-VL): pairs per position axis in posenc's (t, h, w)
     * order, and the layout the family's code gives them */
    json_t *ms = json_object_get(sc, "mrope_section"), *mi = json_object_get(sc, "mrope_interleaved"), *mdef = NULL;
    if (!ms && F->sections_default) ms = mdef = json_loads(F->sections_default, 0, NULL);
    if (ms && !pe_config_has(cfg, PE_K_rope_sections)) {
        const char *order = F->sections_order ? F->sections_order : "thw";
        char text[200] = "";
        size_t n = json_is_array(ms) ? json_array_size(ms) : 0;
        for (size_t i = 0; i < n; i++) /* posenc's axis i is the config's entry at its letter */
            if (!json_is_integer(json_array_get(ms, i))) n = 0;
        if (F->sections_order && n != strlen(order)) n = 0;
        for (size_t i = 0; i < n; i++) {
            const size_t at = F->sections_order ? (size_t)(strchr(order, "thw"[i]) - order) : i;
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%lld", i ? "," : "",
                     (long long)json_integer_value(json_array_get(ms, at)));
        }
        json_decref(mdef);
        if (!n) return pe__hf_bad(L, err, F->sections_order ? "mrope_section is not a list of three integers"
                                                              : "mrope_section is not a list of integers");
        if ((st = pe_config_set(cfg, "rope_sections", text, err))) return st;
    } else {
        json_decref(mdef);
    }
    const char *layout = F->sections_layout ? F->sections_layout : mi && json_is_true(mi) ? "interleaved" : NULL;
    if (ms && layout && !pe_config_has(cfg, PE_K_rope_section_layout) &&
        (st = pe_config_set(cfg, "rope_section_layout", layout, err)))
        return st;
    /* Phi-3 keeps original_max_position_embeddings at the top level */
    int scaling = cfg->rope_scaling;
    if (scaling == PE_ROPE_YARN || scaling == PE_ROPE_LLAMA3 || scaling == PE_ROPE_LONGROPE)
        if ((st = pe__hf_fill(cfg, "original_max_position_embeddings", json_object_get(mc, "original_max_position_embeddings"),
                       path, err)))
            return st;

    /* max_position_embeddings counts where the type reads it; yarn without a factor takes
     * max_position_embeddings / original_max_position_embeddings (HF) */
    json_t *mpe = json_object_get(mc, "max_position_embeddings");
    if (scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE)
        if ((st = pe__hf_fill(cfg, "max_position_embeddings", mpe, path, err))) return st;
    if (scaling == PE_ROPE_YARN && !pe_config_has(cfg, PE_K_rope_factor) && json_is_integer(mpe) &&
        cfg->original_max_position_embeddings > 0 &&
        (st = pe__hf_fill_real(cfg, "rope_factor", (double)json_integer_value(mpe) / (double)cfg->original_max_position_embeddings,
                        path, err)))
        return st;
    if (scaling == PE_ROPE_LONGROPE) {
        /* the count against rotary_dim where it is known; rope's check compares it again */
        int64_t r = pe_config_has(cfg, PE_K_rotary_dim) ? cfg->rotary_dim : cfg->hf_rotary_fraction > 0 ? -1 : D;
        json_t *sf = json_object_get(sc, "short_factor"), *lf = json_object_get(sc, "long_factor");
        if (!sf || !lf) return pe__hf_bad(L, err, "longrope needs short_factor and long_factor");
        if ((st = read_factors(cfg, sf, 0, "short_factor", r, path, err)) ||
            (st = read_factors(cfg, lf, 1, "long_factor", r, path, err)))
            return st;
    }
    return PE_OK;
}

/* The softmax scale where the model sets its own: Gemma's query_pre_attn_scalar, MLA's
 * YaRN mscale^2 (DeepSeek-V2/V3 multiply the scale, not cos and sin, by it). */
static pe_status apply_scale(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    json_t *qs = L->F->scale == HF_SCALE_QUERY_PRE_ATTN ? json_object_get(L->mc, "query_pre_attn_scalar") : NULL;
    if (L->F->scale == HF_SCALE_ONE) return pe__hf_fill_real(cfg, "scale", 1.0, L->path, err); /* Gemma 4: q_norm, k_norm */
    if (L->F->scale == HF_SCALE_MULTIPLIER) { /* Granite: the scale is attention_multiplier itself */
        json_t *am = json_object_get(L->mc, "attention_multiplier");
        if (am && (!json_is_number(am) || !(json_number_value(am) > 0))) return pe__hf_bad(L, err, "attention_multiplier is not > 0");
        return am ? pe__hf_fill(cfg, "scale", am, L->path, err) : pe__hf_fill_real(cfg, "scale", 1.0, L->path, err); /* HF's default 1 */
    }
    if (json_is_number(qs)) {
        if (!(json_number_value(qs) > 0)) return pe__hf_bad(L, err, "query_pre_attn_scalar is not > 0");
        return pe__hf_fill_real(cfg, "scale", 1.0 / sqrt(json_number_value(qs)), L->path, err);
    }
    json_t *rs = L->F->scale == HF_SCALE_MSCALE && L->rope ? json_object_get(L->rope, "mscale_all_dim") : NULL;
    if (!json_is_number(rs) || json_number_value(rs) == 0) return PE_OK;
    json_t *f = json_object_get(L->rope, "factor");
    const double s = json_is_number(f) ? json_number_value(f) : 1, all = json_number_value(rs);
    const double m = s <= 1 ? 1.0 : 0.1 * all * log(s) + 1.0;
    return pe__hf_fill_real(cfg, "scale", m * m / sqrt((double)D), L->path, err);
}

/* A NoPE layer's keys: Llama 4's temperature tuning. */
static pe_status apply_nope(pe_config *cfg, const hf_layer *L, pe_err *err) {
    json_t *t = json_object_get(L->mc, "attn_temperature_tuning");
    if (!L->F->temperature || !pe__hf_truthy(t, 1)) return PE_OK;
    pe_status st = PE_OK;
    if (!pe_config_has(cfg, PE_K_attn_temperature_tuning))
        st = pe_config_set(cfg, "attn_temperature_tuning", "true", err);
    if (!st) st = pe__hf_fill(cfg, "floor_scale", json_object_get(L->mc, "floor_scale"), L->path, err);
    if (!st) st = pe__hf_fill(cfg, "attn_scale", json_object_get(L->mc, "attn_scale"), L->path, err);
    return st;
}

/* The layer's keys onto cfg (D: the head_dim, or -1 where the file does not say); ALiBi's are
 * its reference slopes (Bloom's build_alibi_tensor, MPT's with alibi_bias_max 8: the same). */
pe_status pe__hf_apply_layer(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    pe_status st = L->method == PE_METHOD_ROPE ? apply_rope(cfg, L, D, err)
                   : L->method == PE_METHOD_NONE ? apply_nope(cfg, L, err) : PE_OK;
    if (!st && L->F->sinks && !pe_config_has(cfg, PE_K_attention_sinks)) /* GPT-OSS: the tensor sinks [H] */
        st = pe_config_set(cfg, "attention_sinks", "true", err);
    return st ? st : apply_scale(cfg, L, D, err);
}
