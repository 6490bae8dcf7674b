/* hf_config: configure rope from a HuggingFace config.json.
 * Reads rope_theta, partial_rotary_factor, head_dim (or hidden_size / num_attention_heads),
 * max_position_embeddings, and the scaling from `rope_scaling` (rope_type or the older `type`)
 * or the newer `rope_parameters` (which may also carry rope_theta and partial_rotary_factor),
 * M-RoPE's mrope_section and mrope_interleaved; a model with a `text_config` is read from it.
 * Keys given explicitly keep their values; unknown scaling entries, unknown rope types and a
 * head_dim other than the layer's are errors, never warnings. */
#include <errno.h>
#include <jansson.h>
#include <sys/stat.h>

#include "../internal.h"

/* HF names of the rope types, as posenc's rope_scaling values. */
static const struct { const char *hf, *posenc; } TYPES[] = {
    {"default", "none"}, {"mrope", "none"}, {"linear", "linear"}, {"dynamic", "dynamic"}, {"yarn", "yarn"},
    {"llama3", "llama3"}, {"longrope", "longrope"}, {"su", "longrope"}, {"ntk", "ntk"},
};

/* Scaling entries: HF name -> posenc key (NULL: handled by hand). */
static const struct { const char *hf, *key; } ENTRIES[] = {
    {"factor", "rope_factor"},
    {"original_max_position_embeddings", "original_max_position_embeddings"},
    {"beta_fast", "beta_fast"}, {"beta_slow", "beta_slow"},
    {"mscale", "mscale"}, {"mscale_all_dim", "mscale_all_dim"},
    {"attention_factor", "attention_factor"}, {"truncate", "yarn_truncate"},
    {"low_freq_factor", "low_freq_factor"}, {"high_freq_factor", "high_freq_factor"},
    {"rope_type", NULL}, {"type", NULL}, {"short_factor", NULL}, {"long_factor", NULL},
    {"rope_theta", NULL}, {"partial_rotary_factor", NULL}, {"mrope_section", NULL}, {"mrope_interleaved", NULL},
};

/* Sets key from a JSON scalar unless the key was given explicitly. */
static pe_status fill(pe_config *cfg, const char *key, json_t *v, const char *path, pe_err *err) {
    if (!v || json_is_null(v) || pe_config_is_set(cfg, key)) return PE_OK;
    char text[64];
    if (json_is_integer(v)) snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(text, sizeof text, "%.17g", json_real_value(v));
    else if (json_is_boolean(v)) snprintf(text, sizeof text, "%s", json_is_true(v) ? "true" : "false");
    else return pe__fail(err, PE_EKEY, "hf_config %s: '%s' is not a number", path, key);
    pe_status st = pe_config_set(cfg, key, text, err);
    if (st) {
        char inner[sizeof err->msg];
        snprintf(inner, sizeof inner, "%s", err->msg);
        return pe__fail(err, st, "hf_config %s: %s", path, inner);
    }
    return PE_OK;
}

static pe_status read_factors(pe_config *cfg, json_t *arr, int which, const char *name, int64_t r,
                              const char *path, pe_err *err) {
    if (!json_is_array(arr)) return pe__fail(err, PE_EKEY, "hf_config %s: '%s' is not a list", path, name);
    size_t n = json_array_size(arr);
    if ((int64_t)n != r / 2 || n > PE_MAX_ROPE_PAIRS)
        return pe__fail(err, PE_EKEY, "hf_config %s: '%s' has %zu entries, rotary_dim %lld needs %lld", path,
                        name, n, (long long)r, (long long)(r / 2));
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        if (!json_is_number(e) || !(json_number_value(e) > 0))
            return pe__fail(err, PE_EKEY, "hf_config %s: '%s'[%zu] is not a positive number", path, name, i);
        cfg->hf_factors[which][i] = (float)json_number_value(e);
    }
    cfg->hf_factor_count = (int)n;
    return PE_OK;
}

pe_status pe__hf_config_apply(pe_config *cfg, int64_t D, pe_err *err) {
    const char *path = cfg->hf_config;
    json_error_t jerr;
    struct stat sb; /* a FIFO would block, a device never end */
    if (stat(path, &sb) != 0) return pe__fail(err, PE_EKEY, "hf_config %s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode) || sb.st_size > (1 << 26))
        return pe__fail(err, PE_EKEY, "hf_config %s: not a regular file of at most 64 MiB", path);
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return pe__fail(err, PE_EKEY, "hf_config %s: cannot read: %s", path, jerr.text);
    pe_status st = PE_OK;
    json_t *sc = NULL;
    if (!json_is_object(root)) {
        st = pe__fail(err, PE_EKEY, "hf_config %s: not a JSON object", path);
        goto done;
    }
    /* a vision-language model (Qwen2-VL, Qwen3-VL in HF v5) keeps the language model's settings in
     * text_config */
    json_t *mc = json_is_object(json_object_get(root, "text_config")) ? json_object_get(root, "text_config") : root;
    json_t *rs = json_object_get(mc, "rope_scaling"), *rp = json_object_get(mc, "rope_parameters");
    if (rs && !json_is_null(rs) && rp && !json_is_null(rp)) {
        st = pe__fail(err, PE_EKEY, "hf_config %s: both rope_scaling and rope_parameters are given", path);
        goto done;
    }
    sc = rp && !json_is_null(rp) ? rp : rs && !json_is_null(rs) ? rs : NULL;
    if (sc && !json_is_object(sc)) {
        st = pe__fail(err, PE_EKEY, "hf_config %s: %s is not an object", path, sc == rp ? "rope_parameters" : "rope_scaling");
        goto done;
    }

    /* head_dim must be the layer's */
    json_t *hd = json_object_get(mc, "head_dim"), *hs = json_object_get(mc, "hidden_size"),
           *nh = json_object_get(mc, "num_attention_heads");
    int64_t head_dim = -1;
    if (json_is_integer(hd)) head_dim = json_integer_value(hd);
    else if (json_is_integer(hs) && json_is_integer(nh) && json_integer_value(nh) > 0)
        head_dim = json_integer_value(hs) / json_integer_value(nh);
    if (head_dim > 0 && head_dim != D) {
        st = pe__fail(err, PE_EKEY, "hf_config %s: head_dim %lld does not match the layer's head_dim %lld", path,
                      (long long)head_dim, (long long)D);
        goto done;
    }

    /* rope_theta and partial_rotary_factor: top level, or inside rope_parameters */
    json_t *theta = sc ? json_object_get(sc, "rope_theta") : NULL;
    if (!theta) theta = json_object_get(mc, "rope_theta");
    if ((st = fill(cfg, "rope_base", theta, path, err))) goto done;
    json_t *prf = sc ? json_object_get(sc, "partial_rotary_factor") : NULL;
    if (!prf) prf = json_object_get(mc, "partial_rotary_factor");
    if (prf && !json_is_null(prf) && !pe_config_is_set(cfg, "rotary_dim")) {
        if (!json_is_number(prf) || !(json_number_value(prf) > 0 && json_number_value(prf) <= 1)) {
            st = pe__fail(err, PE_EKEY, "hf_config %s: partial_rotary_factor must be in (0, 1]", path);
            goto done;
        }
        json_t *rd = json_integer((json_int_t)((double)D * json_number_value(prf))); /* HF: int(head_dim * f) */
        st = fill(cfg, "rotary_dim", rd, path, err);
        json_decref(rd);
        if (st) goto done;
    }

    if (!sc) goto done;
    const char *key;
    json_t *val;
    json_object_foreach(sc, key, val) {
        int known = 0;
        for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++) known |= !strcmp(key, ENTRIES[i].hf);
        if (!known) {
            st = pe__fail(err, PE_EKEY, "hf_config %s: unknown rope entry '%s'", path, key);
            goto done;
        }
    }
    json_t *type = json_object_get(sc, "rope_type");
    if (!type) type = json_object_get(sc, "type");
    const char *kind = "none";
    if (type && !json_is_null(type)) {
        if (!json_is_string(type)) {
            st = pe__fail(err, PE_EKEY, "hf_config %s: rope_type is not a string", path);
            goto done;
        }
        kind = NULL;
        for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
            if (!strcmp(json_string_value(type), TYPES[i].hf)) kind = TYPES[i].posenc;
        if (!kind) {
            st = pe__fail(err, PE_EKEY, "hf_config %s: unknown rope_type '%s'", path, json_string_value(type));
            goto done;
        }
    }
    if (!pe_config_is_set(cfg, "rope_scaling") && (st = pe_config_set(cfg, "rope_scaling", kind, err))) goto done;
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++)
        if (ENTRIES[i].key && (st = fill(cfg, ENTRIES[i].key, json_object_get(sc, ENTRIES[i].hf), path, err)))
            goto done;
    /* M-RoPE (Qwen2-VL, Qwen3-VL): pairs per position axis, and their interleaving */
    json_t *ms = json_object_get(sc, "mrope_section"), *mi = json_object_get(sc, "mrope_interleaved");
    if (ms && !pe_config_is_set(cfg, "rope_sections")) {
        char text[200] = "";
        size_t n = json_is_array(ms) ? json_array_size(ms) : 0;
        for (size_t i = 0; i < n && json_is_integer(json_array_get(ms, i)); i++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%lld", i ? "," : "",
                     (long long)json_integer_value(json_array_get(ms, i)));
        if (!n || (st = pe_config_set(cfg, "rope_sections", text, err))) {
            if (!n) st = pe__fail(err, PE_EKEY, "hf_config %s: mrope_section is not a list of integers", path);
            goto done;
        }
    }
    if (mi && json_is_true(mi) && !pe_config_is_set(cfg, "rope_section_layout") &&
        (st = pe_config_set(cfg, "rope_section_layout", "interleaved", err)))
        goto done;
    /* Phi-3 keeps original_max_position_embeddings at the top level */
    int scaling = cfg->rope_scaling;
    if (scaling == PE_ROPE_YARN || scaling == PE_ROPE_LLAMA3 || scaling == PE_ROPE_LONGROPE)
        if ((st = fill(cfg, "original_max_position_embeddings",
                       json_object_get(mc, "original_max_position_embeddings"), path, err)))
            goto done;

    /* max_position_embeddings counts where the type reads it; yarn without a factor takes
     * max_position_embeddings / original_max_position_embeddings (HF) */
    json_t *mpe = json_object_get(mc, "max_position_embeddings");
    if (scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE)
        if ((st = fill(cfg, "max_position_embeddings", mpe, path, err))) goto done;
    if (scaling == PE_ROPE_YARN && !pe_config_is_set(cfg, "rope_factor") && json_is_integer(mpe) &&
        cfg->original_max_position_embeddings > 0) {
        json_t *f = json_real((double)json_integer_value(mpe) / (double)cfg->original_max_position_embeddings);
        st = fill(cfg, "rope_factor", f, path, err);
        json_decref(f);
        if (st) goto done;
    }
    if (scaling == PE_ROPE_LONGROPE) {
        int64_t r = pe_config_is_set(cfg, "rotary_dim") ? cfg->rotary_dim : D;
        json_t *sf = json_object_get(sc, "short_factor"), *lf = json_object_get(sc, "long_factor");
        if (!sf || !lf) {
            st = pe__fail(err, PE_EKEY, "hf_config %s: longrope needs short_factor and long_factor", path);
            goto done;
        }
        if ((st = read_factors(cfg, sf, 0, "short_factor", r, path, err)) ||
            (st = read_factors(cfg, lf, 1, "long_factor", r, path, err)))
            goto done;
    }
done:
    json_decref(root);
    return st;
}
