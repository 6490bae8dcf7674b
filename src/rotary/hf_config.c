/* hf_config: the settings of one layer of a HuggingFace config.json, read through the row of
 * its model_type in the family table (hf_family.h: what the family's attention code decides
 * beyond the file); a model_type without a row is refused, never guessed (hf_assume names the
 * family whose code a config shares).
 *
 * What a layer reads (a model with a `text_config` is read from it):
 *   type      layer_types[layer]; else what HF derives: Llama 4 chunked_attention for its RoPE
 *             layers and full_attention for the NoPE ones, every sliding_window_pattern-th layer
 *             full and the rest sliding (the family's default pattern: Cohere2, EXAONE 4, OLMo 3);
 *             every layer sliding where the family's code windows them all (Mistral, Phi-3);
 *             else full_attention
 *   RoPE?     no_rope_layers[layer] (1: RoPE, despite the name; Llama 4, SmolLM3), else Llama 4's
 *             every no_rope_layer_interval-th layer is NoPE; the family's rule (Cohere2: sliding
 *             layers only); ALiBi families (Bloom, MPT; Baichuan but at its rope_when size) run
 *             method alibi
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
#include <sys/stat.h>

#include "hf_layer.h"

enum { HF_MAX_LAYERS = 65536, HF_MAX_HEAD_DIM = 65536 }; /* far past any published model */
_Static_assert(sizeof(pe_hf_layer_info) == PE_HF_LAYER_INFO_BYTES, "pe_hf_layer_info's fields outgrew its size");

/* Whether one term of a row's refuse_key ("key" or "key!=V", len characters) holds for config mc. */
static int refused_term(const hf_family *F, json_t *mc, const char *term, size_t len) {
    char key[64], want[32] = "";
    const char *ne = memchr(term, '!', len);
    const size_t klen = ne && ne + 1 < term + len && ne[1] == '=' ? (size_t)(ne - term) : len;
    snprintf(key, sizeof key, "%.*s", (int)klen, term);
    if (klen < len) snprintf(want, sizeof want, "%.*s", (int)(len - klen - 2), term + klen + 2);
    json_t *v = json_object_get(mc, key);
    if (F->refuse_value) return json_is_string(v) && !strcmp(json_string_value(v), F->refuse_value);
    if (klen == len) return v ? pe__hf_truthy(v, 0) || json_is_array(v) || json_is_object(v) : F->refuse_default;
    if (!v || json_is_null(v)) return 0;
    if (!strcmp(want, "true") || !strcmp(want, "false")) return !json_is_boolean(v) || json_is_true(v) != (want[0] == 't');
    return !json_is_number(v) || json_number_value(v) != strtod(want, NULL);
}

/* Whether the config does what the row's refuse_key says posenc does not compute (any of its terms). */
static int refused(const hf_family *F, json_t *mc) {
    for (const char *t = F->refuse_key; t && *t;) {
        const char *bar = strchr(t, '|');
        const size_t len = bar ? (size_t)(bar - t) : strlen(t);
        if (refused_term(F, mc, t, len)) return 1;
        t = bar ? bar + 1 : NULL;
    }
    return 0;
}

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
    if (L->F->positions == HF_REFUSE || refused(L->F, L->mc))
        return pe_error(err, PE_EKEY, "hf_config %s: model_type '%s' is not read: %s (%s)", L->path, name, L->F->refuse,
                        L->F->source);
    return PE_OK;
}

/* DeepSeek-V4's layers as DeepseekV4Config.__post_init__ derives them (configuration_deepseek_v4.py
 * [b5b741e5]), written into the config as HF v5 would hold it: layer_types from the legacy
 * compress_ratios (0 sliding, 4 CSA, 128 HCA), else two HCA layers then CSA and HCA alternating;
 * partial_rotary_factor from qk_rope_head_dim / head_dim, else 64 / 512; rope_parameters per
 * layer type: the sliding layers' "main" set (rope_theta, no scaling), the compressed layers'
 * "compress" set (the config's YaRN at compress_rope_theta, attention factor forced to 1), or
 * the main / compress sets the config already holds. L->compress_rate: the layer's rate. */
static pe_status compressed_layers(hf_layer *L, pe_err *err) {
    static const char *const TYPES[3] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};
    json_t *mc = L->mc, *lt = json_object_get(mc, "layer_types"), *cr = json_object_get(mc, "compress_ratios");
    const int64_t n = L->n_layers;
    if ((!lt || json_is_null(lt)) && cr && !json_is_null(cr)) {
        if (!json_is_array(cr) || (int64_t)json_array_size(cr) < n)
            return pe__hf_bad(L, err, "compress_ratios is not a list of 0, 4 or 128 for every layer");
        lt = json_array();
        for (int64_t i = 0; i < n; i++) {
            json_t *r = json_array_get(cr, (size_t)i);
            const json_int_t v = json_is_integer(r) ? json_integer_value(r) : -1;
            if (v != 0 && v != 4 && v != 128) {
                json_decref(lt);
                return pe__hf_bad(L, err, "compress_ratios is not a list of 0, 4 or 128 for every layer");
            }
            json_array_append_new(lt, json_string(TYPES[v == 0 ? 0 : v == 4 ? 1 : 2]));
        }
        json_object_set_new(mc, "layer_types", lt);
    } else if (!lt || json_is_null(lt)) {
        lt = json_array();
        for (int64_t i = 0; i < n; i++) json_array_append_new(lt, json_string(TYPES[i < 2 || i % 2 == 0 ? 2 : 1]));
        json_object_set_new(mc, "layer_types", lt);
    } else if (json_is_array(lt) && (int64_t)json_array_size(lt) > n) { /* self.layer_types[:n] */
        while ((int64_t)json_array_size(lt) > n) json_array_remove(lt, json_array_size(lt) - 1);
    }
    json_t *e = json_is_array(lt) ? json_array_get(lt, (size_t)L->layer) : NULL;
    const char *type = json_is_string(e) ? json_string_value(e) : "";
    json_t *rates = json_object_get(mc, "compress_rates");
    const char *legacy = !strcmp(type, TYPES[1]) ? "compress_rate_csa" : "compress_rate_hca";
    json_t *rate = json_is_object(rates) ? json_object_get(rates, type) : json_object_get(mc, legacy);
    L->compress_rate = !strcmp(type, TYPES[0]) ? 0 : json_is_integer(rate) ? json_integer_value(rate)
                                                   : !strcmp(type, TYPES[1]) ? 4 : 128;
    if (L->compress_rate < 0) return pe__hf_bad(L, err, "a compress rate is below 0");

    json_t *rp = json_object_get(mc, "rope_parameters"), *rs = json_object_get(mc, "rope_scaling");
    json_t *main = json_is_object(rp) ? json_object_get(rp, "main") : NULL, *comp = json_is_object(rp) ? json_object_get(rp, "compress") : NULL;
    json_t *sets = json_object();
    if (json_is_object(main) && json_is_object(comp)) {
        json_object_set(sets, TYPES[0], main);
        json_object_set(sets, TYPES[1], comp), json_object_set(sets, TYPES[2], comp);
    } else {
        json_t *flat = json_is_object(rp) ? rp : json_is_object(rs) ? rs : NULL;
        json_t *hd = json_object_get(mc, "head_dim"), *qr = json_object_get(mc, "qk_rope_head_dim");
        json_t *prf = json_object_get(mc, "partial_rotary_factor");
        const double d = json_is_integer(hd) ? (double)json_integer_value(hd) : (double)L->F->head_dim_default;
        json_t *f = json_is_number(prf) ? json_incref(prf) : json_is_integer(qr) && d > 0 ? json_real((double)json_integer_value(qr) / d)
                                                            : json_real(L->F->fraction_default);
        json_t *theta = json_object_get(mc, "rope_theta"), *ctheta = json_object_get(mc, "compress_rope_theta");
        main = json_pack("{s:s, s:o, s:O}", "rope_type", "default", "rope_theta",
                         json_is_number(theta) ? json_incref(theta) : json_real(L->F->theta_default), "partial_rotary_factor", f);
        comp = flat ? json_deep_copy(flat) : json_object();
        json_object_del(comp, "main"), json_object_del(comp, "compress");
        json_object_set_new(comp, "rope_theta", json_is_number(ctheta) ? json_incref(ctheta) : json_real(160000.0));
        json_object_set(comp, "partial_rotary_factor", f);
        if (!json_object_get(comp, "rope_type") && !json_object_get(comp, "type")) json_object_set_new(comp, "rope_type", json_string("default"));
        json_t *ty = json_object_get(comp, "rope_type") ? json_object_get(comp, "rope_type") : json_object_get(comp, "type");
        const char *kind = json_is_string(ty) ? json_string_value(ty) : "";
        if (!strcmp(kind, "yarn") || !strcmp(kind, "longrope")) /* the types that read it: "the reference does NOT multiply cos/sin by the yarn mscale" */
            json_object_set_new(comp, "attention_factor", json_real(1.0));
        json_object_set_new(sets, TYPES[0], main);
        json_object_set(sets, TYPES[1], comp), json_object_set_new(sets, TYPES[2], comp);
        json_decref(f);
    }
    json_object_del(mc, "rope_scaling");
    json_object_set_new(mc, "rope_parameters", sets);
    return PE_OK;
}

/* Whether the row's rope_when ("key=N") holds: the config's integer key is N (Baichuan's hidden_size). */
static int rope_when(const hf_family *F, json_t *mc) {
    const char *eq = F->rope_when ? strchr(F->rope_when, '=') : NULL;
    if (!eq) return 0;
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(eq - F->rope_when), F->rope_when);
    json_t *v = json_object_get(mc, key);
    return json_is_integer(v) && json_integer_value(v) == strtoll(eq + 1, NULL, 10);
}

/* Loads path and finds layer `layer`: its type, whether it rotates, its rope parameters. On
 * success L->root holds the file (json_decref it). */
static pe_status read_layer(hf_layer *L, const char *path, int64_t layer, const char *assume, pe_err *err) {
    *L = (hf_layer){.path = path, .layer = layer};
    json_error_t jerr;
    struct stat sb; /* a FIFO would block, a device never end */
    if (stat(path, &sb) != 0) return pe_error(err, PE_EKEY, "hf_config %s: cannot open: %s", path, strerror(errno));
    const int gguf = S_ISREG(sb.st_mode) && pe__gguf_is(path); /* llama.cpp's file: its header alone */
    if (!S_ISREG(sb.st_mode) || (!gguf && sb.st_size > (1 << 26)))
        return pe_error(err, PE_EKEY, "hf_config %s: not a regular file of at most 64 MiB", path);
    pe_status st = PE_OK;
    if (gguf && (st = pe__gguf_load(path, layer, L, err))) goto fail;
    if (!gguf && !(L->root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr)))
        return pe_error(err, PE_EKEY, "hf_config %s: cannot read: %s", path, jerr.text);
    if (!json_is_object(L->root)) {
        st = pe__hf_bad(L, err, "not a JSON object");
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
    L->method = F->positions == HF_ALIBI && !rope_when(F, mc) ? PE_METHOD_ALIBI : PE_METHOD_ROPE;

    json_t *nl = pe__hf_key(mc, F->layers, "num_hidden_layers");
    L->n_layers = json_is_integer(nl) ? (int64_t)json_integer_value(nl) : 1;
    if ((nl && !json_is_integer(nl)) || L->n_layers < 1 || L->n_layers > HF_MAX_LAYERS) {
        st = pe__hf_bad(L, err, "num_hidden_layers is not an integer within 1 .. 65536");
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
        st = pe__hf_bad(L, err, "no_rope_layers is not a list");
        goto fail;
    }
    if (json_is_array(nr) && json_array_size(nr) > 0) {
        json_t *e = json_array_get(nr, (size_t)layer);
        if ((int64_t)json_array_size(nr) != L->n_layers || !json_is_integer(e)) {
            st = pe__hf_bad(L, err, "no_rope_layers is not a list of 0 and 1 for every layer");
            goto fail;
        }
        uses_rope = json_integer_value(e) != 0;
    } else if (F->rope_on == HF_ON_INTERVAL || json_is_integer(json_object_get(mc, "no_rope_layer_interval"))) {
        const int64_t every = pe__hf_int(mc, "no_rope_layer_interval", 4);
        if (every < 1) {
            st = pe__hf_bad(L, err, "no_rope_layer_interval is not >= 1");
            goto fail;
        }
        uses_rope = (layer + 1) % every != 0;
    }

    if (F->compressed_layers && (st = compressed_layers(L, err))) goto fail;
    json_t *lt = json_object_get(mc, "layer_types"), *sw = json_object_get(mc, "sliding_window");
    /* the family's default window is set unless the config says null (EXAONE 4 then has no
     * sliding layers and rotates every one; Cohere2's would rotate none) */
    const int windowed = !json_is_null(sw) && !(json_is_integer(sw) && json_integer_value(sw) <= 0);
    const int64_t pattern = pe__hf_int(mc, "sliding_window_pattern", F->pattern && windowed ? F->pattern : 0);
    if (lt && !json_is_null(lt) && !json_is_array(lt)) {
        st = pe__hf_bad(L, err, "layer_types is not a list");
        goto fail;
    }
    if (json_is_array(lt)) {
        json_t *e = json_array_get(lt, (size_t)layer);
        if ((int64_t)json_array_size(lt) != L->n_layers || !json_is_string(e)) {
            st = pe__hf_bad(L, err, "layer_types is not a list of strings for every layer");
            goto fail;
        }
        L->type = json_string_value(e);
    } else if (L->chunked) {
        L->type = uses_rope ? "chunked_attention" : "full_attention";
    } else if (F->qwen_windows) { /* Qwen2Config: sliding from max_window_layers on, when it slides at all */
        const int slides = pe__hf_truthy(json_object_get(mc, "use_sliding_window"), 0) && windowed && sw;
        L->type = slides && layer >= pe__hf_int(mc, "max_window_layers", 28) ? "sliding_attention" : "full_attention";
    } else if (F->slides && windowed && (json_is_integer(sw) || (!sw && F->window_default > 0))) {
        /* MistralModel.forward: the config's window (or the class's) on every layer */
        L->type = "sliding_attention";
    } else if (pattern > 0) {
        L->type = (layer + 1) % pattern ? "sliding_attention" : "full_attention";
    } else {
        L->type = "full_attention";
    }
    if (F->last_full && layer == L->n_layers - 1) L->type = "full_attention"; /* Gemma4TextConfig.__post_init__ */
    const int sliding = !strcmp(L->type, "sliding_attention");
    if (F->rope_on == HF_ON_SLIDING) uses_rope = sliding && windowed; /* Cohere2Attention.forward */
    if (F->rope_on == HF_ON_NOT_GLOBAL) uses_rope = !windowed || sliding; /* Exaone4Attention.forward */
    if (L->method == PE_METHOD_ROPE && !uses_rope) L->method = PE_METHOD_NONE;

    /* the layer's rope parameters: per layer type in HF v5 */
    json_t *rs = json_object_get(mc, "rope_scaling"), *rp = json_object_get(mc, "rope_parameters");
    /* the class's own where the config has none (Gemma 4: rope_parameters None too; GPT-OSS's
     * rope_scaling null stays none) */
    if (F->rope_default && !rs && (!rp || json_is_null(rp)))
        json_object_set_new(mc, "rope_parameters", rp = json_loads(F->rope_default, 0, NULL));
    if (rs && !json_is_null(rs) && rp && !json_is_null(rp)) {
        st = pe__hf_bad(L, err, "both rope_scaling and rope_parameters are given");
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
            st = pe__hf_bad(L, err, "rope_local_base_freq is not > 1");
            goto fail;
        }
    }
    L->rope = sc;

    /* the qk head: MLA's is qk_nope_head_dim + qk_rope_head_dim */
    const int no_head_dim = F->head_dim_key && !strcmp(F->head_dim_key, "-"); /* EXAONE 3: hidden / heads */
    json_t *hd = no_head_dim ? NULL : pe__hf_key(mc, F->head_dim_key, "head_dim"), *hs = pe__hf_key(mc, F->hidden, "hidden_size"),
           *nh = pe__hf_key(mc, F->heads, "num_attention_heads");
    L->head_dim = -1;
    if (hd && !json_is_null(hd) && !json_is_integer(hd)) {
        st = pe__hf_bad(L, err, "head_dim is not an integer");
        goto fail;
    }
    if (L->mla) L->head_dim = pe__hf_int(mc, "qk_nope_head_dim", 0) + pe__hf_int(mc, "qk_rope_head_dim", 0);
    else if (json_is_integer(hd)) L->head_dim = json_integer_value(hd);
    else if (F->head_dim_default > 0) L->head_dim = F->head_dim_default;
    else if (json_is_integer(hs) && json_is_integer(nh) && json_integer_value(nh) > 0)
        L->head_dim = json_integer_value(hs) / json_integer_value(nh);
    L->base_head_dim = L->head_dim;
    json_t *gd = F->global_shapes && !sliding ? json_object_get(mc, "global_head_dim") : NULL;
    if (gd && !json_is_null(gd) && !json_is_integer(gd)) {
        st = pe__hf_bad(L, err, "global_head_dim is not an integer");
        goto fail;
    }
    /* Gemma4TextAttention: global_head_dim where it is set and not 0, on the layers that do not slide */
    const int64_t global = !F->global_shapes || sliding ? 0 : gd ? (json_is_integer(gd) ? json_integer_value(gd) : 0)
                                                                 : F->global_head_dim_default;
    if (global) L->head_dim = global, L->global = 1;
    if (L->mla && (pe__hf_int(mc, "qk_rope_head_dim", 0) < 2 || pe__hf_int(mc, "qk_nope_head_dim", 0) < 0 ||
                   pe__hf_int(mc, "qk_rope_head_dim", 0) > HF_MAX_HEAD_DIM || pe__hf_int(mc, "qk_nope_head_dim", 0) > HF_MAX_HEAD_DIM)) {
        st = pe__hf_bad(L, err, "qk_rope_head_dim must be within 2 .. 65536 and qk_nope_head_dim within 0 .. 65536");
        goto fail;
    }
    if (L->head_dim > HF_MAX_HEAD_DIM || (L->head_dim != -1 && L->head_dim < 1)) {
        st = pe__hf_bad(L, err, "head_dim is not within 1 .. 65536");
        goto fail;
    }
    return PE_OK;
fail:
    json_decref(L->root);
    L->root = NULL;
    return st;
}

static const char *kind_name(int method) {
    return method == PE_METHOD_ROPE ? "RoPE" : method == PE_METHOD_ALIBI ? "ALiBi" : "NoPE";
}

static pe_status wrong_kind(const pe_config *cfg, const char *path, int64_t layer, int method, pe_err *err) {
    return pe_error(err, PE_EKEY, "hf_config %s: layer %lld is a %s layer (method %s), not method %s", path,
                    (long long)layer, kind_name(method), pe_method_name(method), pe_method_name(cfg->method));
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
        if (cfg->method < 0 || cfg->method == L.method) st = pe__hf_apply_layer(cfg, &L, L.head_dim, err);
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
    json_t *nh = pe__hf_key(L.mc, F->heads, "num_attention_heads"), *nkv = pe__hf_key(L.mc, F->kv_heads, "num_key_value_heads");
    json_t *kv = NULL; /* Falcon: 1 for multi_query, num_kv_heads with the new decoder architecture */
    json_t *flag = F->kv == HF_KV_KEY ? NULL : json_object_get(L.mc, F->kv_flag ? F->kv_flag : "new_decoder_architecture");
    const int flagged = flag && !json_is_null(flag) && pe__hf_truthy(flag, 1); /* RefinedWeb: n_head_kv present */
    if (F->kv == HF_KV_FALCON && !flagged && pe__hf_truthy(json_object_get(L.mc, "multi_query"), 1))
        nkv = kv = json_integer(1);
    if (!nkv && F->kv_heads_default > 0) nkv = kv = json_integer(F->kv_heads_default); /* the class default */
    if (F->kv == HF_KV_FLAG && !flagged) nkv = NULL; /* ChatGLM without multi_query_attention: one per head */
    json_t *gkv = json_object_get(L.mc, "num_global_key_value_heads");
    if (L.global && pe__hf_truthy(json_object_get(L.mc, "attention_k_eq_v"), 0)) { /* Gemma4TextAttention.__init__ */
        if (!json_is_integer(gkv) || json_integer_value(gkv) < 1) {
            st = pe__hf_bad(&L, err, "attention_k_eq_v needs num_global_key_value_heads (an integer >= 1)");
            goto done;
        }
        nkv = gkv;
    }
    if (L.head_dim < 2 || !json_is_integer(nh)) {
        st = pe__hf_bad(&L, err, "needs num_attention_heads and head_dim (or hidden_size)");
        goto done;
    }
    if (!pe_config_has(cfg, PE_K_method) && (st = pe_config_set(cfg, "method", pe_method_name(L.method), err))) goto done;
    if ((st = pe__hf_fill(cfg, "heads", nh, path, err))) goto done;
    if ((st = pe__hf_fill(cfg, "kv_heads", nkv, path, err))) goto done;
    if ((st = pe__hf_fill(cfg, "causal", json_true(), path, err))) goto done;
    if (cfg->method != L.method) {
        st = wrong_kind(cfg, path, layer, L.method, err);
        goto done;
    }
    if ((st = pe__hf_apply_layer(cfg, &L, L.head_dim, err))) goto done;
    if (info) {
        memset(info, 0, sizeof *info);
        info->n_layers = L.n_layers, info->head_dim = L.head_dim;
        snprintf(info->layer_type, sizeof info->layer_type, "%s", L.type);
        snprintf(info->family, sizeof info->family, "%s", F->model_type);
        snprintf(info->gguf_arch, sizeof info->gguf_arch, "%s", L.gguf_arch);
        if (!strcmp(L.type, "sliding_attention") || F->compressed_layers) /* DeepSeek-V4: every layer's own keys */
            info->window = pe__hf_int(L.mc, "sliding_window", L.F->window_default);
        info->compress_rate = L.compress_rate;
        if (!strcmp(L.type, "chunked_attention")) info->window = pe__hf_int(L.mc, "attention_chunk_size", 0), info->chunked = 1;
        info->mla = L.mla;
        info->qk_norm = L.chunked && pe__hf_truthy(json_object_get(L.mc, "use_qk_norm"), 0) && L.method == PE_METHOD_ROPE;
    }
done:
    json_decref(kv);
    json_decref(L.root);
    return st;
}
