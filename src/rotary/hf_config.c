/* hf_config: the settings of one layer of a HuggingFace config.json, read through the row of
 * its model_type in the family table (hf_family.h: what the family's attention code decides
 * beyond the file); a model_type without a row is refused, never guessed (hf_assume names the
 * family whose code a config shares).
 *
 * What a layer reads (a model with a `text_config` is read from it):
 *   type      layer_types[layer]; else what HF derives: Llama 4 chunked_attention for its RoPE
 *             layers and full_attention for the NoPE ones, every sliding_window_pattern-th layer
 *             full and the rest sliding (the family's default pattern: Cohere2, EXAONE 4, OLMo 3);
 *             else full_attention
 *   RoPE?     no_rope_layers[layer] (1: RoPE, despite the name; Llama 4, SmolLM3), else Llama 4's
 *             every no_rope_layer_interval-th layer is NoPE; the family's rule (Cohere2: sliding
 *             layers only); ALiBi families (Bloom, MPT) run method alibi
 *   rope      rope_parameters[type] (HF v5, per layer type), or rope_parameters / rope_scaling;
 *             Gemma 3's v4 sliding layers take rope_local_base_freq and no scaling
 *   slice     partial_rotary_factor (int(head_dim * f) dims; the family's name and default:
 *             GPT-NeoX's rotary_pct), GPT-J's rotary_dim, or MLA's qk_rope_head_dim: the last
 *             dims of a qk head of qk_nope_head_dim + qk_rope_head_dim (DeepSeek-V2/V3)
 *   layout    the family's (interleaved: Llama 4, Cohere, GLM, GPT-J, DeepSeek unless
 *             rope_interleave is false), else half
 *   scale     the family's rule: query_pre_attn_scalar^-1/2 (Gemma), MLA with mscale_all_dim
 *             times mscale^2, mscale = 1 + 0.1 mscale_all_dim ln(factor) (DeepSeek-V3)
 *   NoPE      attn_temperature_tuning, floor_scale, attn_scale (Llama 4's defaults: on, 8192, 0.1)
 * Keys given explicitly keep their values; unknown scaling entries, unknown rope types and a
 * head_dim other than the layer's are errors, never warnings. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "../internal.h"
#include "hf_family.h"

enum { HF_MAX_LAYERS = 65536, HF_MAX_HEAD_DIM = 65536 }; /* far past any published model */
_Static_assert(sizeof(pe_hf_layer_info) == PE_HF_LAYER_INFO_BYTES, "pe_hf_layer_info's fields outgrew its size");

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
    {"llama_4_scaling_beta", "llama_4_scaling_beta"}, /* Ministral 3, Mistral 4 */
    {"max_position_embeddings", NULL},                 /* Ministral 3 copies the top level's in */
    {"rope_type", NULL}, {"type", NULL}, {"short_factor", NULL}, {"long_factor", NULL},
    {"rope_theta", NULL}, {"partial_rotary_factor", NULL}, {"mrope_section", NULL}, {"mrope_interleaved", NULL},
};

/* One layer as the config describes it. */
typedef struct hf_layer {
    const char *path;
    const hf_family *F; /* the family's row */
    json_t *root, *mc;  /* the file; the language model's config (text_config in a VLM) */
    json_t *rope;       /* the layer's rope parameters, or NULL */
    int64_t layer, n_layers, head_dim;
    int method; /* what the layer runs: PE_METHOD_ROPE, _NONE (NoPE) or _ALIBI */
    int chunked, mla; /* Llama 4's chunked RoPE layers; DeepSeek's latent attention */
    const char *type;  /* HF layer type */
    double local_base; /* > 0: a Gemma 3 (v4 config) sliding layer's base, which takes no scaling */
} hf_layer;

/* The config's value of a key the family may name otherwise ("a|b": the first present), or NULL. */
static json_t *key_of(json_t *o, const char *names, const char *usual) {
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
/* The family that reads the config: hf_assume's, else the model_type's; a model_type without a
 * row (or none at all) is refused with the nearest known family. */
static pe_status find_family(hf_layer *L, json_t *mt, const char *assume, pe_err *err) {
    const char *name = assume && *assume ? assume : json_is_string(mt) ? json_string_value(mt) : NULL;
    if (!name)
        return pe_error(err, PE_EKEY, "hf_config %s: no model_type: name the family whose attention code reads it "
                        "(key hf_assume, e.g. hf_assume=llama; posenc hf-config --families lists them)", L->path);
    if (!(L->F = pe__hf_family(name))) {
        const char *near = pe__hf_family_nearest(name);
        if (assume && *assume)
            return pe_error(err, PE_EKEY, "key 'hf_assume': '%s' is not a family posenc knows (nearest: %s; posenc "
                            "hf-config --families lists them)", name, near);
        return pe_error(err, PE_EKEY, "hf_config %s: model_type '%.60s' is not in posenc's family table (its attention "
                        "code may apply positions the file does not state); nearest known: %s. If it reads its "
                        "positions as that family's code does, say so with hf_assume=%s (posenc hf-config --assume %s)", L->path, name,
                        near, near, near);
    }
    json_t *rk = L->F->refuse_key ? json_object_get(L->mc, L->F->refuse_key) : NULL;
    if (L->F->positions == HF_REFUSE ||
        (L->F->refuse_key && (rk ? truthy(rk, 0) || json_is_array(rk) || json_is_object(rk) : L->F->refuse_default)))
        return pe_error(err, PE_EKEY, "hf_config %s: model_type '%s' is not read: %s (%s)", L->path, name, L->F->refuse,
                        L->F->source);
    return PE_OK;
}

static pe_status read_layer(hf_layer *L, const char *path, int64_t layer, const char *assume, pe_err *err) {
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
    if ((st = find_family(L, mt, assume, err))) goto fail;
    const hf_family *F = L->F;
    L->chunked = F->chunked;
    L->mla = F->mla;
    L->method = F->positions == HF_ALIBI ? PE_METHOD_ALIBI : PE_METHOD_ROPE;

    json_t *nl = key_of(mc, F->layers, "num_hidden_layers");
    L->n_layers = json_is_integer(nl) ? (int64_t)json_integer_value(nl) : 1;
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
    int uses_rope = 1;
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
        uses_rope = json_integer_value(e) != 0;
    } else if (F->rope_on == HF_ON_INTERVAL || json_is_integer(json_object_get(mc, "no_rope_layer_interval"))) {
        const int64_t every = int_of(mc, "no_rope_layer_interval", 4);
        if (every < 1) {
            st = bad(L, err, "no_rope_layer_interval is not >= 1");
            goto fail;
        }
        uses_rope = (layer + 1) % every != 0;
    }

    json_t *lt = json_object_get(mc, "layer_types"), *sw = json_object_get(mc, "sliding_window");
    /* the family's default window is set unless the config says null (EXAONE 4 then has no
     * sliding layers and rotates every one; Cohere2's would rotate none) */
    const int windowed = !json_is_null(sw) && !(json_is_integer(sw) && json_integer_value(sw) <= 0);
    const int64_t pattern = int_of(mc, "sliding_window_pattern", F->pattern && windowed ? F->pattern : 0);
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
    } else if (L->chunked) {
        L->type = uses_rope ? "chunked_attention" : "full_attention";
    } else if (F->qwen_windows) { /* Qwen2Config: sliding from max_window_layers on, when it slides at all */
        const int slides = truthy(json_object_get(mc, "use_sliding_window"), 0) && windowed && sw;
        L->type = slides && layer >= int_of(mc, "max_window_layers", 28) ? "sliding_attention" : "full_attention";
    } else if (pattern > 0) {
        L->type = (layer + 1) % pattern ? "sliding_attention" : "full_attention";
    } else {
        L->type = "full_attention";
    }
    const int sliding = !strcmp(L->type, "sliding_attention");
    if (F->rope_on == HF_ON_SLIDING) uses_rope = sliding && windowed; /* Cohere2Attention.forward */
    if (F->rope_on == HF_ON_NOT_GLOBAL) uses_rope = !windowed || sliding; /* Exaone4Attention.forward */
    if (L->method == PE_METHOD_ROPE && !uses_rope) L->method = PE_METHOD_NONE;

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
    json_t *hd = json_object_get(mc, "head_dim"), *hs = key_of(mc, F->hidden, "hidden_size"),
           *nh = key_of(mc, F->heads, "num_attention_heads");
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

    /* rope_theta and partial_rotary_factor: top level, or inside the rope parameters; by the
     * family's names, and its defaults where the file gives none */
    const hf_family *F = L->F;
    const int fixed_base = F->theta && !strcmp(F->theta, "-"); /* GPT-J: 10000 in the code */
    json_t *theta = sc && !fixed_base ? json_object_get(sc, "rope_theta") : NULL;
    if (!theta && !fixed_base) theta = key_of(mc, F->theta, "rope_theta");
    if (L->local_base > 0) st = fill_real(cfg, "rope_base", L->local_base, path, err);
    else if (theta) st = fill(cfg, "rope_base", theta, path, err);
    else st = F->theta_default > 0 ? fill_real(cfg, "rope_base", F->theta_default, path, err) : PE_OK;
    if (st) return st;
    if (L->mla) { /* the last qk_rope_head_dim dims of the head */
        json_t *r = json_object_get(mc, "qk_rope_head_dim"), *o = json_object_get(mc, "qk_nope_head_dim");
        if ((st = fill(cfg, "rotary_offset", o, path, err)) || (st = fill(cfg, "rotary_dim", r, path, err))) return st;
    }
    const int interleaved = F->layout == HF_INTERLEAVED ||
                            (F->layout == HF_INTERLEAVED_KEY && truthy(json_object_get(mc, "rope_interleave"), 1));
    if (interleaved && !pe_config_has(cfg, PE_K_rope_layout) && (st = pe_config_set(cfg, "rope_layout", "interleaved", err)))
        return st;
    if (F->rotary_dim) { /* GPT-J: rotary_dim dims (null: the whole head) */
        json_t *rd = json_object_get(mc, F->rotary_dim), *def = json_integer(F->rotary_dim_default);
        st = json_is_null(rd) ? PE_OK : fill(cfg, "rotary_dim", rd ? rd : def, path, err);
        json_decref(def);
        if (st) return st;
    }
    json_t *prf = sc ? json_object_get(sc, "partial_rotary_factor") : NULL, *fdef = NULL;
    if (!prf) prf = key_of(mc, F->fraction, "partial_rotary_factor");
    if (!prf && F->fraction_default > 0) prf = fdef = json_real(F->fraction_default);
    if (prf && !json_is_null(prf) && !pe_config_has(cfg, PE_K_rotary_dim)) {
        if (!json_is_number(prf) || !(json_number_value(prf) > 0 && json_number_value(prf) <= 1)) {
            json_decref(fdef);
            return bad(L, err, "partial_rotary_factor must be in (0, 1]");
        }
        if (D < 0) { /* the file gives no head_dim: the layer's, when it is made */
            cfg->hf_rotary_fraction = json_number_value(prf);
        } else {
            json_t *rd = json_integer((json_int_t)((double)D * json_number_value(prf))); /* HF: int(head_dim * f) */
            st = fill(cfg, "rotary_dim", rd, path, err);
            json_decref(rd);
        }
    }
    json_decref(fdef);
    if (st) return st;

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
    if (ms && (L->F->sections_interleaved || (mi && json_is_true(mi))) && !pe_config_has(cfg, PE_K_rope_section_layout) &&
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
    json_t *qs = L->F->scale == HF_SCALE_QUERY_PRE_ATTN ? json_object_get(L->mc, "query_pre_attn_scalar") : NULL;
    if (L->F->scale == HF_SCALE_MULTIPLIER) { /* Granite: the scale is attention_multiplier itself */
        json_t *am = json_object_get(L->mc, "attention_multiplier");
        if (am && (!json_is_number(am) || !(json_number_value(am) > 0))) return bad(L, err, "attention_multiplier is not > 0");
        return am ? fill(cfg, "scale", am, L->path, err) : fill_real(cfg, "scale", 1.0, L->path, err); /* HF's default 1 */
    }
    if (json_is_number(qs)) {
        if (!(json_number_value(qs) > 0)) return bad(L, err, "query_pre_attn_scalar is not > 0");
        return fill_real(cfg, "scale", 1.0 / sqrt(json_number_value(qs)), L->path, err);
    }
    json_t *rs = L->F->scale == HF_SCALE_MSCALE && L->rope ? json_object_get(L->rope, "mscale_all_dim") : NULL;
    if (!json_is_number(rs) || json_number_value(rs) == 0) return PE_OK;
    json_t *f = json_object_get(L->rope, "factor");
    const double s = json_is_number(f) ? json_number_value(f) : 1, all = json_number_value(rs);
    const double m = s <= 1 ? 1.0 : 0.1 * all * log(s) + 1.0;
    return fill_real(cfg, "scale", m * m / sqrt((double)D), L->path, err);
}

/* A NoPE layer's keys: Llama 4's temperature tuning. */
static pe_status apply_nope(pe_config *cfg, const hf_layer *L, pe_err *err) {
    json_t *t = json_object_get(L->mc, "attn_temperature_tuning");
    if (!L->F->temperature || !truthy(t, 1)) return PE_OK;
    pe_status st = PE_OK;
    if (!pe_config_has(cfg, PE_K_attn_temperature_tuning))
        st = pe_config_set(cfg, "attn_temperature_tuning", "true", err);
    if (!st) st = fill(cfg, "floor_scale", json_object_get(L->mc, "floor_scale"), L->path, err);
    if (!st) st = fill(cfg, "attn_scale", json_object_get(L->mc, "attn_scale"), L->path, err);
    return st;
}

static const char *kind_name(int method) {
    return method == PE_METHOD_ROPE ? "RoPE" : method == PE_METHOD_ALIBI ? "ALiBi" : "NoPE";
}

static pe_status wrong_kind(const pe_config *cfg, const char *path, int64_t layer, int method, pe_err *err) {
    return pe_error(err, PE_EKEY, "hf_config %s: layer %lld is a %s layer (method %s), not method %s", path,
                    (long long)layer, kind_name(method), pe_method_name(method), pe_method_name(cfg->method));
}

/* The layer's keys onto cfg (D: the head_dim, or -1 where the file does not say); ALiBi's are
 * its reference slopes (Bloom's build_alibi_tensor, MPT's with alibi_bias_max 8: the same). */
static pe_status apply_layer(pe_config *cfg, const hf_layer *L, int64_t D, pe_err *err) {
    pe_status st = L->method == PE_METHOD_ROPE ? apply_rope(cfg, L, D, err)
                   : L->method == PE_METHOD_NONE ? apply_nope(cfg, L, err) : PE_OK;
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
    pe_status st = read_layer(&L, cfg->hf_config, cfg->hf_layer, cfg->hf_assume, err);
    if (!st) {
        cfg->hf_method = L.method, cfg->hf_head_dim = L.head_dim;
        /* a layer of another kind than the method fills nothing: making it names the mismatch */
        if (cfg->method < 0 || cfg->method == L.method) st = apply_layer(cfg, &L, L.head_dim, err);
        json_decref(L.root);
    }
    for (int w = 0; w < PE_KEY_WORDS; w++) cfg->hf_filled[w] = cfg->set[w] & ~before[w];
    cfg->hf_read = !st; /* on an error pe_config_set restores cfg */
    return st;
}

pe_status pe__hf_config_check(pe_config *cfg, int64_t D, pe_err *err) {
    if (!cfg->hf_read)
        return pe_error(err, PE_EKEY, "hf_config %s: not read (set the key with pe_config_set)", cfg->hf_config);
    if (cfg->method != cfg->hf_method) return wrong_kind(cfg, cfg->hf_config, cfg->hf_layer, cfg->hf_method, err);
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
    pe_status st = read_layer(&L, path, layer, cfg->hf_assume, err);
    if (st) return st;
    const hf_family *F = L.F;
    json_t *nh = key_of(L.mc, F->heads, "num_attention_heads"), *nkv = key_of(L.mc, F->kv_heads, "num_key_value_heads");
    json_t *kv = NULL; /* Falcon: 1 for multi_query, num_kv_heads with the new decoder architecture */
    if (F->kv == HF_KV_FALCON && !truthy(json_object_get(L.mc, "new_decoder_architecture"), 0) &&
        truthy(json_object_get(L.mc, "multi_query"), 1))
        nkv = kv = json_integer(1);
    if (L.head_dim < 2 || !json_is_integer(nh)) {
        st = bad(&L, err, "needs num_attention_heads and head_dim (or hidden_size)");
        goto done;
    }
    if (!pe_config_has(cfg, PE_K_method) && (st = pe_config_set(cfg, "method", pe_method_name(L.method), err))) goto done;
    if ((st = fill(cfg, "heads", nh, path, err))) goto done;
    if ((st = fill(cfg, "kv_heads", nkv, path, err))) goto done;
    if ((st = fill(cfg, "causal", json_true(), path, err))) goto done;
    if (cfg->method != L.method) {
        st = wrong_kind(cfg, path, layer, L.method, err);
        goto done;
    }
    if ((st = apply_layer(cfg, &L, L.head_dim, err))) goto done;
    if (info) {
        memset(info, 0, sizeof *info);
        info->n_layers = L.n_layers, info->head_dim = L.head_dim;
        snprintf(info->layer_type, sizeof info->layer_type, "%s", L.type);
        snprintf(info->family, sizeof info->family, "%s", F->model_type);
        if (!strcmp(L.type, "sliding_attention")) info->window = int_of(L.mc, "sliding_window", 0);
        if (!strcmp(L.type, "chunked_attention")) info->window = int_of(L.mc, "attention_chunk_size", 0), info->chunked = 1;
        info->mla = L.mla;
        info->qk_norm = L.chunked && truthy(json_object_get(L.mc, "use_qk_norm"), 0) && L.method == PE_METHOD_ROPE;
    }
done:
    json_decref(kv);
    json_decref(L.root);
    return st;
}
