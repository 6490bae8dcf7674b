/* hf_config: the settings of one layer of a HuggingFace config.json.
 *
 * What a layer reads (a model with a `text_config` is read from it):
 *   type      layer_types[layer]; else what HF derives: Llama 4 chunked_attention for its RoPE
 *             layers and full_attention for the NoPE ones, Gemma 3 (v4 configs) sliding_attention
 *             but for every sliding_window_pattern-th layer; else full_attention
 *   RoPE?     no_rope_layers[layer] (1: RoPE, despite the name; Llama 4, SmolLM3), else Llama 4's
 *             every no_rope_layer_interval-th layer is NoPE
 *   rope      rope_parameters[type] (HF v5, per layer type), or rope_parameters / rope_scaling;
 *             Gemma 3's v4 sliding layers take rope_local_base_freq and no scaling
 *   slice     partial_rotary_factor (int(head_dim * f) dims), or MLA's qk_rope_head_dim: the
 *             last dims of a qk head of qk_nope_head_dim + qk_rope_head_dim (DeepSeek-V2/V3)
 *   layout    interleaved where the model rotates complex pairs (Llama 4; MLA unless
 *             rope_interleave is false), else half
 *   scale     query_pre_attn_scalar^-1/2 (Gemma); MLA with mscale_all_dim times mscale^2,
 *             mscale = 1 + 0.1 mscale_all_dim ln(factor) (YaRN's, on the softmax as DeepSeek)
 *   NoPE      attn_temperature_tuning, floor_scale, attn_scale (Llama 4's defaults: on, 8192, 0.1)
 * Keys given explicitly keep their values; unknown scaling entries, unknown rope types and a
 * head_dim other than the layer's are errors, never warnings. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "../internal.h"

enum { HF_MAX_LAYERS = 65536, HF_MAX_HEAD_DIM = 65536 }; /* far past any published model */

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

/* One layer as the config describes it. */
typedef struct hf_layer {
    const char *path;
    json_t *root, *mc; /* the file; the language model's config (text_config in a VLM) */
    json_t *rope;      /* the layer's rope parameters, or NULL */
    int64_t layer, n_layers, head_dim;
    int uses_rope, llama4, mla;
    const char *type;  /* HF layer type */
    double local_base; /* > 0: a Gemma 3 (v4 config) sliding layer's base, which takes no scaling */
} hf_layer;

static int64_t int_of(json_t *o, const char *key, int64_t fallback) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : fallback;
}

/* HF configs write booleans as true/false, or (Llama 4's first releases) as a number */
static int truthy(json_t *v, int fallback) {
    if (json_is_boolean(v)) return json_is_true(v);
    if (json_is_number(v)) return json_number_value(v) != 0;
    return fallback;
}

static pe_status bad(const hf_layer *L, pe_err *err, const char *what) {
    return pe_error(err, PE_EKEY, "hf_config %s: %s", L->path, what);
}

/* Sets key from a JSON scalar unless the key was given explicitly. */
static pe_status fill(pe_config *cfg, const char *key, json_t *v, const char *path, pe_err *err) {
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

static pe_status fill_real(pe_config *cfg, const char *key, double v, const char *path, pe_err *err) {
    json_t *j = json_real(v);
    pe_status st = fill(cfg, key, j, path, err);
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

/* Loads path and finds layer `layer`: its type, whether it rotates, its rope parameters. On
 * success L->root holds the file (json_decref it). */
static pe_status read_layer(hf_layer *L, const char *path, int64_t layer, pe_err *err) {
    *L = (hf_layer){.path = path, .layer = layer};
    json_error_t jerr;
    struct stat sb; /* a FIFO would block, a device never end */
    if (stat(path, &sb) != 0) return pe_error(err, PE_EKEY, "hf_config %s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode) || sb.st_size > (1 << 26))
        return pe_error(err, PE_EKEY, "hf_config %s: not a regular file of at most 64 MiB", path);
    if (!(L->root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr)))
        return pe_error(err, PE_EKEY, "hf_config %s: cannot read: %s", path, jerr.text);
    pe_status st = PE_OK;
    if (!json_is_object(L->root)) {
        st = bad(L, err, "not a JSON object");
        goto fail;
    }
    json_t *tc = json_object_get(L->root, "text_config");
    json_t *mc = L->mc = json_is_object(tc) ? tc : L->root;
    json_t *mt = json_object_get(mc, "model_type");
    if (!json_is_string(mt)) mt = json_object_get(L->root, "model_type");
    L->llama4 = json_is_string(mt) && !strncmp(json_string_value(mt), "llama4", 6);
    L->mla = json_is_integer(json_object_get(mc, "qk_rope_head_dim"));

    json_t *nl = json_object_get(mc, "num_hidden_layers");
    L->n_layers = int_of(mc, "num_hidden_layers", 1);
    if ((nl && !json_is_integer(nl)) || L->n_layers < 1 || L->n_layers > HF_MAX_LAYERS) {
        st = bad(L, err, "num_hidden_layers is not an integer within 1 .. 65536");
        goto fail;
    }
    if (layer < 0 || layer >= L->n_layers) {
        st = pe_error(err, PE_EKEY, "hf_config %s: layer %lld is not within 0 .. %lld (num_hidden_layers %lld)", path,
                      (long long)layer, (long long)(L->n_layers - 1), (long long)L->n_layers);
        goto fail;
    }

    /* RoPE or NoPE: no_rope_layers holds 1 for a RoPE layer */
    json_t *nr = json_object_get(mc, "no_rope_layers");
    L->uses_rope = 1;
    if (nr && !json_is_null(nr) && !json_is_array(nr)) {
        st = bad(L, err, "no_rope_layers is not a list");
        goto fail;
    }
    if (json_is_array(nr) && json_array_size(nr) > 0) {
        json_t *e = json_array_get(nr, (size_t)layer);
        if ((int64_t)json_array_size(nr) != L->n_layers || !json_is_integer(e)) {
            st = bad(L, err, "no_rope_layers is not a list of 0 and 1 for every layer");
            goto fail;
        }
        L->uses_rope = json_integer_value(e) != 0;
    } else if (L->llama4 || json_is_integer(json_object_get(mc, "no_rope_layer_interval"))) {
        const int64_t every = int_of(mc, "no_rope_layer_interval", 4);
        if (every < 1) {
            st = bad(L, err, "no_rope_layer_interval is not >= 1");
            goto fail;
        }
        L->uses_rope = (layer + 1) % every != 0;
    }

    json_t *lt = json_object_get(mc, "layer_types");
    const int64_t pattern = int_of(mc, "sliding_window_pattern", 0);
    if (lt && !json_is_null(lt) && !json_is_array(lt)) {
        st = bad(L, err, "layer_types is not a list");
        goto fail;
    }
    if (json_is_array(lt)) {
        json_t *e = json_array_get(lt, (size_t)layer);
        if ((int64_t)json_array_size(lt) != L->n_layers || !json_is_string(e)) {
            st = bad(L, err, "layer_types is not a list of strings for every layer");
            goto fail;
        }
        L->type = json_string_value(e);
    } else if (L->llama4) {
        L->type = L->uses_rope ? "chunked_attention" : "full_attention";
    } else if (pattern > 0) {
        L->type = (layer + 1) % pattern ? "sliding_attention" : "full_attention";
    } else {
        L->type = "full_attention";
    }

    /* the layer's rope parameters: per layer type in HF v5 */
    json_t *rs = json_object_get(mc, "rope_scaling"), *rp = json_object_get(mc, "rope_parameters");
    if (rs && !json_is_null(rs) && rp && !json_is_null(rp)) {
        st = bad(L, err, "both rope_scaling and rope_parameters are given");
        goto fail;
    }
    json_t *sc = rp && !json_is_null(rp) ? rp : rs && !json_is_null(rs) ? rs : NULL;
    if (sc && !json_is_object(sc)) {
        st = pe_error(err, PE_EKEY, "hf_config %s: %s is not an object", path, sc == rp ? "rope_parameters" : "rope_scaling");
        goto fail;
    }
    if (sc == rp && sc && (json_is_object(json_object_get(sc, "full_attention")) ||
                           json_is_object(json_object_get(sc, "sliding_attention")) ||
                           json_is_object(json_object_get(sc, L->type)))) {
        sc = json_object_get(sc, L->type);
        if (!json_is_object(sc)) {
            st = pe_error(err, PE_EKEY, "hf_config %s: rope_parameters has no entry for layer type '%s' (layer %lld)",
                          path, L->type, (long long)layer);
            goto fail;
        }
    } else if (!strcmp(L->type, "sliding_attention") && json_is_number(json_object_get(mc, "rope_local_base_freq"))) {
        L->local_base = json_number_value(json_object_get(mc, "rope_local_base_freq")); /* Gemma 3, v4 config */
        if (!(L->local_base > 1)) {
            st = bad(L, err, "rope_local_base_freq is not > 1");
            goto fail;
        }
    }
    L->rope = sc;

    /* the qk head: MLA's is qk_nope_head_dim + qk_rope_head_dim */
    json_t *hd = json_object_get(mc, "head_dim"), *hs = json_object_get(mc, "hidden_size"),
           *nh = json_object_get(mc, "num_attention_heads");
    L->head_dim = -1;
    if (hd && !json_is_null(hd) && !json_is_integer(hd)) {
        st = bad(L, err, "head_dim is not an integer");
        goto fail;
    }
    if (L->mla) L->head_dim = int_of(mc, "qk_nope_head_dim", 0) + int_of(mc, "qk_rope_head_dim", 0);
    else if (json_is_integer(hd)) L->head_dim = json_integer_value(hd);
    else if (json_is_integer(hs) && json_is_integer(nh) && json_integer_value(nh) > 0)
        L->head_dim = json_integer_value(hs) / json_integer_value(nh);
    if (L->mla && (int_of(mc, "qk_rope_head_dim", 0) < 2 || int_of(mc, "qk_nope_head_dim", 0) < 0 ||
                   int_of(mc, "qk_rope_head_dim", 0) > HF_MAX_HEAD_DIM || int_of(mc, "qk_nope_head_dim", 0) > HF_MAX_HEAD_DIM)) {
        st = bad(L, err, "qk_rope_head_dim must be within 2 .. 65536 and qk_nope_head_dim within 0 .. 65536");
        goto fail;
    }
    if (L->head_dim > HF_MAX_HEAD_DIM || (L->head_dim != -1 && L->head_dim < 1)) {
        st = bad(L, err, "head_dim is not within 1 .. 65536");
        goto fail;
    }
    return PE_OK;
fail:
    json_decref(L->root);
    L->root = NULL;
    return st;
}

/* The rope keys of a RoPE layer of head_dim D. */
static pe_status apply_rope(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    const char *path = L->path;
    json_t *mc = L->mc, *sc = L->local_base > 0 ? NULL : L->rope;
    pe_status st;

    /* rope_theta and partial_rotary_factor: top level, or inside the rope parameters */
    json_t *theta = sc ? json_object_get(sc, "rope_theta") : NULL;
    if (!theta) theta = json_object_get(mc, "rope_theta");
    if (L->local_base > 0 ? (st = fill_real(cfg, "rope_base", L->local_base, path, err))
                          : (st = fill(cfg, "rope_base", theta, path, err)))
        return st;
    if (L->mla) { /* the last qk_rope_head_dim dims of the head, as complex pairs */
        json_t *r = json_object_get(mc, "qk_rope_head_dim"), *o = json_object_get(mc, "qk_nope_head_dim");
        if ((st = fill(cfg, "rotary_offset", o, path, err)) || (st = fill(cfg, "rotary_dim", r, path, err))) return st;
    }
    if ((L->llama4 || (L->mla && truthy(json_object_get(mc, "rope_interleave"), 1))) &&
        !pe_config_has(cfg, PE_K_rope_layout) && (st = pe_config_set(cfg, "rope_layout", "interleaved", err)))
        return st;
    json_t *prf = sc ? json_object_get(sc, "partial_rotary_factor") : NULL;
    if (!prf) prf = json_object_get(mc, "partial_rotary_factor");
    if (prf && !json_is_null(prf) && !pe_config_has(cfg, PE_K_rotary_dim)) {
        if (!json_is_number(prf) || !(json_number_value(prf) > 0 && json_number_value(prf) <= 1))
            return bad(L, err, "partial_rotary_factor must be in (0, 1]");
        if (D < 0) { /* the file gives no head_dim: the layer's, when it is made */
            cfg->hf_rotary_fraction = json_number_value(prf);
        } else {
            json_t *rd = json_integer((json_int_t)((double)D * json_number_value(prf))); /* HF: int(head_dim * f) */
            st = fill(cfg, "rotary_dim", rd, path, err);
            json_decref(rd);
            if (st) return st;
        }
    }

    if (!sc) return PE_OK;
    const char *key;
    json_t *val;
    json_object_foreach(sc, key, val) {
        int known = 0;
        for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++) known |= !strcmp(key, ENTRIES[i].hf);
        if (!known) return pe_error(err, PE_EKEY, "hf_config %s: unknown rope entry '%s'", path, key);
    }
    json_t *type = json_object_get(sc, "rope_type");
    if (!type) type = json_object_get(sc, "type");
    const char *kind = "none";
    if (type && !json_is_null(type)) {
        if (!json_is_string(type)) return bad(L, err, "rope_type is not a string");
        kind = NULL;
        for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
            if (!strcmp(json_string_value(type), TYPES[i].hf)) kind = TYPES[i].posenc;
        if (!kind) return pe_error(err, PE_EKEY, "hf_config %s: unknown rope_type '%s'", path, json_string_value(type));
    }
    if (!pe_config_has(cfg, PE_K_rope_scaling) && (st = pe_config_set(cfg, "rope_scaling", kind, err))) return st;
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++)
        if (ENTRIES[i].key && (st = fill(cfg, ENTRIES[i].key, json_object_get(sc, ENTRIES[i].hf), path, err)))
            return st;
    /* M-RoPE (Qwen2-VL, Qwen3-VL): pairs per position axis, and their interleaving */
    json_t *ms = json_object_get(sc, "mrope_section"), *mi = json_object_get(sc, "mrope_interleaved");
    if (ms && !pe_config_has(cfg, PE_K_rope_sections)) {
        char text[200] = "";
        size_t n = json_is_array(ms) ? json_array_size(ms) : 0;
        for (size_t i = 0; i < n && json_is_integer(json_array_get(ms, i)); i++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%lld", i ? "," : "",
                     (long long)json_integer_value(json_array_get(ms, i)));
        if (!n) return bad(L, err, "mrope_section is not a list of integers");
        if ((st = pe_config_set(cfg, "rope_sections", text, err))) return st;
    }
    if (mi && json_is_true(mi) && !pe_config_has(cfg, PE_K_rope_section_layout) &&
        (st = pe_config_set(cfg, "rope_section_layout", "interleaved", err)))
        return st;
    /* Phi-3 keeps original_max_position_embeddings at the top level */
    int scaling = cfg->rope_scaling;
    if (scaling == PE_ROPE_YARN || scaling == PE_ROPE_LLAMA3 || scaling == PE_ROPE_LONGROPE)
        if ((st = fill(cfg, "original_max_position_embeddings", json_object_get(mc, "original_max_position_embeddings"),
                       path, err)))
            return st;

    /* max_position_embeddings counts where the type reads it; yarn without a factor takes
     * max_position_embeddings / original_max_position_embeddings (HF) */
    json_t *mpe = json_object_get(mc, "max_position_embeddings");
    if (scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE)
        if ((st = fill(cfg, "max_position_embeddings", mpe, path, err))) return st;
    if (scaling == PE_ROPE_YARN && !pe_config_has(cfg, PE_K_rope_factor) && json_is_integer(mpe) &&
        cfg->original_max_position_embeddings > 0 &&
        (st = fill_real(cfg, "rope_factor", (double)json_integer_value(mpe) / (double)cfg->original_max_position_embeddings,
                        path, err)))
        return st;
    if (scaling == PE_ROPE_LONGROPE) {
        /* the count against rotary_dim where it is known; rope's check compares it again */
        int64_t r = pe_config_has(cfg, PE_K_rotary_dim) ? cfg->rotary_dim : cfg->hf_rotary_fraction > 0 ? -1 : D;
        json_t *sf = json_object_get(sc, "short_factor"), *lf = json_object_get(sc, "long_factor");
        if (!sf || !lf) return bad(L, err, "longrope needs short_factor and long_factor");
        if ((st = read_factors(cfg, sf, 0, "short_factor", r, path, err)) ||
            (st = read_factors(cfg, lf, 1, "long_factor", r, path, err)))
            return st;
    }
    return PE_OK;
}

/* The softmax scale where the model sets its own: Gemma's query_pre_attn_scalar, MLA's
 * YaRN mscale^2 (DeepSeek-V2/V3 multiply the scale, not cos and sin, by it). */
static pe_status apply_scale(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    json_t *qs = json_object_get(L->mc, "query_pre_attn_scalar");
    if (json_is_number(qs)) {
        if (!(json_number_value(qs) > 0)) return bad(L, err, "query_pre_attn_scalar is not > 0");
        return fill_real(cfg, "scale", 1.0 / sqrt(json_number_value(qs)), L->path, err);
    }
    json_t *rs = L->mla && L->rope ? json_object_get(L->rope, "mscale_all_dim") : NULL;
    if (!json_is_number(rs) || json_number_value(rs) == 0) return PE_OK;
    json_t *f = json_object_get(L->rope, "factor");
    const double s = json_is_number(f) ? json_number_value(f) : 1, all = json_number_value(rs);
    const double m = s <= 1 ? 1.0 : 0.1 * all * log(s) + 1.0;
    return fill_real(cfg, "scale", m * m / sqrt((double)D), L->path, err);
}

/* A NoPE layer's keys: Llama 4's temperature tuning. */
static pe_status apply_nope(pe_config *cfg, const hf_layer *L, pe_err *err) {
    json_t *t = json_object_get(L->mc, "attn_temperature_tuning");
    if (!truthy(t, L->llama4)) return PE_OK;
    pe_status st = PE_OK;
    if (!pe_config_has(cfg, PE_K_attn_temperature_tuning))
        st = pe_config_set(cfg, "attn_temperature_tuning", "true", err);
    if (!st) st = fill(cfg, "floor_scale", json_object_get(L->mc, "floor_scale"), L->path, err);
    if (!st) st = fill(cfg, "attn_scale", json_object_get(L->mc, "attn_scale"), L->path, err);
    return st;
}

/* The method a layer of this kind runs (method rope or none) */
static int layer_method(int uses_rope) { return uses_rope ? PE_METHOD_ROPE : PE_METHOD_NONE; }

static pe_status wrong_kind(const pe_config *cfg, const char *path, int64_t layer, int uses_rope, pe_err *err) {
    return pe_error(err, PE_EKEY, "hf_config %s: layer %lld is a %s layer (method %s), not method %s", path,
                    (long long)layer, uses_rope ? "RoPE" : "NoPE", pe_method_name(layer_method(uses_rope)),
                    pe_method_name(cfg->method));
}

/* The layer's keys onto cfg (D: the head_dim, or -1 where the file does not say). */
static pe_status apply_layer(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    pe_status st = L->uses_rope ? apply_rope(cfg, L, D, err) : apply_nope(cfg, L, err);
    return st ? st : apply_scale(cfg, L, D, err);
}

/* The keys hf_config filled back to their defaults, unset, as before the reading. */
static void unfill(pe_config *cfg) {
    pe_config def;
    pe_config_init(&def);
    for (int k = 0; pe_config_key_name(k); k++) {
        const uint64_t bit = (uint64_t)1 << (k % 64);
        if (!(cfg->hf_filled[k / 64] & bit)) continue;
        pe__config_key_copy(cfg, &def, k);
        cfg->set[k / 64] &= ~bit;
    }
    memset(cfg->hf_filled, 0, sizeof cfg->hf_filled);
    cfg->hf_factor_count = 0;
    cfg->hf_rotary_fraction = 0;
    cfg->hf_read = 0;
}

pe_status pe__hf_config_read(pe_config *cfg, pe_err *err) {
    unfill(cfg);
    uint64_t before[PE_KEY_WORDS];
    memcpy(before, cfg->set, sizeof before);
    hf_layer L;
    pe_status st = read_layer(&L, cfg->hf_config, cfg->hf_layer, err);
    if (!st) {
        cfg->hf_uses_rope = L.uses_rope, cfg->hf_head_dim = L.head_dim;
        /* a layer of another kind than the method fills nothing: making it names the mismatch */
        if (cfg->method < 0 || cfg->method == layer_method(L.uses_rope)) st = apply_layer(cfg, &L, L.head_dim, err);
        json_decref(L.root);
    }
    for (int w = 0; w < PE_KEY_WORDS; w++) cfg->hf_filled[w] = cfg->set[w] & ~before[w];
    cfg->hf_read = !st; /* on an error pe_config_set restores cfg */
    return st;
}

pe_status pe__hf_config_check(pe_config *cfg, int64_t D, pe_err *err) {
    if (!cfg->hf_read)
        return pe_error(err, PE_EKEY, "hf_config %s: not read (set the key with pe_config_set)", cfg->hf_config);
    if (cfg->method != layer_method(cfg->hf_uses_rope))
        return wrong_kind(cfg, cfg->hf_config, cfg->hf_layer, cfg->hf_uses_rope, err);
    if (D < 0) return PE_OK; /* the width is not known yet */
    if (cfg->hf_head_dim > 0 && cfg->hf_head_dim != D)
        return pe_error(err, PE_EKEY, "hf_config %s: head_dim %lld does not match the layer's head_dim %lld",
                        cfg->hf_config, (long long)cfg->hf_head_dim, (long long)D);
    if (cfg->hf_rotary_fraction > 0 && !pe_config_has(cfg, PE_K_rotary_dim)) {
        char text[32]; /* HF: int(head_dim * partial_rotary_factor) */
        snprintf(text, sizeof text, "%lld", (long long)((double)D * cfg->hf_rotary_fraction));
        return pe_config_set(cfg, "rotary_dim", text, err);
    }
    return PE_OK;
}

pe_status pe_config_from_hf(pe_config *cfg, const char *path, int64_t layer, pe_hf_layer_info *info, pe_err *err) {
    if (!cfg || !path) return pe_error(err, PE_EINVAL, "config_from_hf: need cfg and path");
    hf_layer L;
    pe_status st = read_layer(&L, path, layer, err);
    if (st) return st;
    json_t *nh = json_object_get(L.mc, "num_attention_heads"), *nkv = json_object_get(L.mc, "num_key_value_heads");
    if (L.head_dim < 2 || !json_is_integer(nh)) {
        st = bad(&L, err, "needs num_attention_heads and head_dim (or hidden_size)");
        goto done;
    }
    if (!pe_config_has(cfg, PE_K_method) &&
        (st = pe_config_set(cfg, "method", L.uses_rope ? "rope" : "none", err)))
        goto done;
    if ((st = fill(cfg, "heads", nh, path, err))) goto done;
    if ((st = fill(cfg, "kv_heads", nkv, path, err))) goto done;
    if ((st = fill(cfg, "causal", json_true(), path, err))) goto done;
    if (cfg->method != layer_method(L.uses_rope)) {
        st = wrong_kind(cfg, path, layer, L.uses_rope, err);
        goto done;
    }
    if ((st = apply_layer(cfg, &L, L.head_dim, err))) goto done;
    if (info) {
        memset(info, 0, sizeof *info);
        info->n_layers = L.n_layers, info->head_dim = L.head_dim;
        snprintf(info->layer_type, sizeof info->layer_type, "%s", L.type);
        if (!strcmp(L.type, "sliding_attention")) info->window = int_of(L.mc, "sliding_window", 0);
        if (!strcmp(L.type, "chunked_attention")) info->window = int_of(L.mc, "attention_chunk_size", 0), info->chunked = 1;
        info->mla = L.mla;
        info->qk_norm = truthy(json_object_get(L.mc, "use_qk_norm"), 0) && L.uses_rope;
    }
done:
    json_decref(L.root);
    return st;
}
