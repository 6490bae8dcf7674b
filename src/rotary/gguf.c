/* GGUF, llama.cpp's model file, read as hf_config reads a config.json: its header's metadata
 * becomes the config of one layer in HF's key names, read through the family table as any
 * config.json (hf_config.c), and what the file states directly (the rotated dims, the pair
 * layout of llama.cpp's rope type) is set as it says.
 *
 * The format (ggml docs/gguf.md "File Structure" and src/gguf.cpp gguf_init_from_reader, ggml
 * d99724f2): "GGUF", a uint32 version (2 or 3: gguf.cpp accepts both), uint64 tensor and
 * key-value counts, then key-value pairs: a string key (uint64 length, bytes), a uint32 type
 * (UINT8 0, INT8 1, UINT16 2, INT16 3, UINT32 4, INT32 5, FLOAT32 6, BOOL 7, STRING 8, ARRAY 9,
 * UINT64 10, INT64 11, FLOAT64 12) and the value; an array is a uint32 element type, a uint64
 * count and the elements (no arrays of arrays: gguf.cpp refuses them). Then one entry per
 * tensor: a name, a uint32 dimension count (at most 4), uint64 dimensions, a uint32 type and a
 * uint64 offset. Little-endian. Only the header is read (at most 64 MiB), every length against
 * what is left; a key twice, an unknown type, a nested array or a name of 64 bytes or more is an
 * error, as in gguf.cpp.
 *
 * The keys (llama.cpp src/llama-arch.cpp LLM_KV_NAMES, 00395eb2; %s = general.architecture):
 * %s.block_count, embedding_length, context_length, attention.head_count and head_count_kv
 * (a number or one per layer: llama_model_base::load_hparams get_key_or_arr), attention.key_length
 * (else embedding_length / head_count), rope.dimension_count (else the head), rope.freq_base
 * (10000), rope.scaling.type (none, linear, yarn, longrope; "linear" when absent), .factor (or the
 * old rope.scale_linear; 0: none), .original_context_length (context_length), .attn_factor (1),
 * yarn_beta_fast, yarn_beta_slow, rope.dimension_sections (4: M-RoPE's t, h, w and an unused
 * fourth), attention.sliding_window, attention.sliding_window_pattern (a period: every n-th layer
 * dense, llama_hparams::set_swa_pattern; or one flag per layer), rope.freq_base_swa. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hf_layer.h"

enum { G_U8, G_I8, G_U16, G_I16, G_U32, G_I32, G_F32, G_BOOL, G_STR, G_ARR, G_U64, G_I64, G_F64, G_NTYPES };
enum { GGUF_MAX_HEADER = 1 << 26, GGUF_MAX_KV = 1 << 20, GGUF_MAX_NAME = 64 };

typedef struct gkv {
    const unsigned char *key, *val; /* the value right after its type (an array: after its count) */
    uint64_t klen, n;               /* n: an array's count, else 1 */
    uint32_t type, elem;            /* elem: an array's element type, else type */
} gkv;

typedef struct gguf {
    const unsigned char *p, *end;
    gkv *kv;
    uint64_t n_kv;
    int freq_tensor; /* a rope_freqs / rope_factors tensor: frequencies the header does not state */
    char arch[64];
} gguf;

static int take(gguf *g, size_t n, const unsigned char **at) {
    if ((size_t)(g->end - g->p) < n) return 0;
    *at = g->p, g->p += n;
    return 1;
}
static int u32(gguf *g, uint32_t *v) {
    const unsigned char *b;
    if (!take(g, 4, &b)) return 0;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 1;
}
static int u64(gguf *g, uint64_t *v) {
    uint32_t lo, hi;
    if (!u32(g, &lo) || !u32(g, &hi)) return 0;
    *v = (uint64_t)hi << 32 | lo;
    return 1;
}
static int str(gguf *g, const unsigned char **s, uint64_t *len) {
    return u64(g, len) && *len <= (uint64_t)(g->end - g->p) && take(g, (size_t)*len, s);
}

static const size_t SIZE[G_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Skips n values of type t (not an array), each length checked */
static int skip(gguf *g, uint32_t t, uint64_t n) {
    if (t == G_STR) {
        for (uint64_t i = 0; i < n; i++) {
            const unsigned char *s;
            uint64_t len;
            if (!str(g, &s, &len)) return 0;
        }
        return 1;
    }
    const unsigned char *b;
    return n <= (uint64_t)(g->end - g->p) / SIZE[t] && take(g, (size_t)(n * SIZE[t]), &b);
}

static int key_order(const void *a, const void *b) {
    const gkv *x = a, *y = b;
    const uint64_t n = x->klen < y->klen ? x->klen : y->klen;
    const int c = memcmp(x->key, y->key, (size_t)n);
    return c ? c : x->klen < y->klen ? -1 : x->klen > y->klen;
}

static pe_status bad_file(const char *path, pe_err *err, const char *what) {
    return pe_error(err, PE_EKEY, "hf_config %s: not a GGUF file posenc reads: %s", path, what);
}

static pe_status parse(gguf *g, const char *path, pe_err *err) {
    const unsigned char *magic;
    uint32_t version;
    uint64_t n_tensors;
    if (!take(g, 4, &magic) || memcmp(magic, "GGUF", 4)) return bad_file(path, err, "no GGUF magic");
    if (!u32(g, &version) || !u64(g, &n_tensors) || !u64(g, &g->n_kv)) return bad_file(path, err, "a truncated header");
    if (version < 2 || version > 3) return bad_file(path, err, "version not 2 or 3 (gguf.cpp's)");
    if (g->n_kv > GGUF_MAX_KV || n_tensors > (uint64_t)(g->end - g->p) / 24) /* a tensor entry is 24 bytes or more */
        return bad_file(path, err, "more keys or tensors than the header can hold");
    if (!(g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv))) return pe_error(err, PE_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gkv *e = &g->kv[i];
        if (!str(g, &e->key, &e->klen) || !u32(g, &e->type)) return bad_file(path, err, "a truncated key");
        if (!e->klen) return bad_file(path, err, "an empty key");
        if (e->type >= G_NTYPES) return bad_file(path, err, "a value of an unknown type");
        e->elem = e->type, e->n = 1;
        if (e->type == G_ARR && (!u32(g, &e->elem) || !u64(g, &e->n)))
            return bad_file(path, err, "a truncated array");
        if (e->elem >= G_NTYPES || e->elem == G_ARR) return bad_file(path, err, "an array of arrays or of an unknown type");
        e->val = g->p;
        if (!skip(g, e->elem, e->n)) return bad_file(path, err, "a value past the end of the header");
    }
    qsort(g->kv, (size_t)g->n_kv, sizeof *g->kv, key_order);
    for (uint64_t i = 1; i < g->n_kv; i++)
        if (!key_order(&g->kv[i - 1], &g->kv[i])) return bad_file(path, err, "a key given twice");
    for (uint64_t i = 0; i < n_tensors; i++) { /* names only: a frequency table among them */
        const unsigned char *name;
        uint64_t len, dim;
        uint32_t nd, type;
        if (!str(g, &name, &len) || len >= GGUF_MAX_NAME || !u32(g, &nd) || nd > 4)
            return bad_file(path, err, "a tensor entry with a bad name or more than 4 dimensions");
        for (uint32_t d = 0; d < nd; d++)
            if (!u64(g, &dim)) return bad_file(path, err, "a truncated tensor entry");
        if (!u32(g, &type) || !u64(g, &dim)) return bad_file(path, err, "a truncated tensor entry");
        static const char *const FREQS[] = {"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"};
        for (int f = 0; f < 3; f++)
            g->freq_tensor |= len == strlen(FREQS[f]) && !memcmp(name, FREQS[f], (size_t)len);
    }
    return PE_OK;
}

static const gkv *find(const gguf *g, const char *suffix) { /* "%s.suffix", or suffix itself after "general." */
    char key[160];
    snprintf(key, sizeof key, strncmp(suffix, "general.", 8) ? "%s.%s" : "%.0s%s", g->arch, suffix);
    gkv probe = {.key = (const unsigned char *)key, .klen = strlen(key)};
    return bsearch(&probe, g->kv, (size_t)g->n_kv, sizeof *g->kv, key_order);
}

/* Element i of an entry as a number (integers exactly), 0 when it is not numeric */
static int number(const gkv *e, uint64_t i, double *v) {
    if (!e || i >= e->n || e->elem == G_STR) return 0;
    const unsigned char *b = e->val + i * SIZE[e->elem];
    uint64_t x = 0;
    for (size_t k = SIZE[e->elem]; k-- > 0;) x = x << 8 | b[k];
    switch (e->elem) {
    case G_U8: case G_U16: case G_U32: case G_U64: case G_BOOL: *v = (double)x; break;
    case G_I8: *v = (int8_t)x; break;
    case G_I16: *v = (int16_t)x; break;
    case G_I32: *v = (int32_t)(uint32_t)x; break;
    case G_I64: *v = (double)(int64_t)x; break;
    case G_F32: { uint32_t w = (uint32_t)x; float f; memcpy(&f, &w, 4); *v = f; break; }
    default: { double d; memcpy(&d, &x, 8); *v = d; }
    }
    return isfinite(*v);
}

/* The string value of an entry (general.architecture, rope.scaling.type), or 0; parse checked
 * its length against the header, so the value reads again as it did */
static int text(const gguf *g, const gkv *e, char *out, size_t cap) {
    gguf r = {.p = e ? e->val : NULL, .end = g->end};
    const unsigned char *s;
    uint64_t len;
    if (!e || e->type != G_STR || !str(&r, &s, &len) || len >= cap) return 0;
    memcpy(out, s, (size_t)len), out[len] = 0;
    return 1;
}

/* llama.cpp's architectures posenc reads, as the HF family whose code they come from and their
 * rope type (src/llama-model.cpp llama_model_rope_type, 00395eb2): NORM pairs (2p, 2p + 1) (the
 * converter permutes Llama's q and k so: conversion/llama.py LlamaModel.permute), NEOX, MROPE and
 * IMROPE (p, p + n_rot / 2). Architectures whose converter or graph posenc has not read (their
 * softmax scale set by model size, MLA, Llama 4's chunks) are refused by name. */
enum { R_NORM, R_NEOX, R_MROPE, R_IMROPE, R_NONE };
static const struct { const char *arch, *family; int rope; } ARCHS[] = {
    {"llama", "llama", R_NORM},        {"command-r", "cohere", R_NORM},   {"cohere2", "cohere2", R_NORM},
    {"qwen2", "qwen2", R_NEOX},        {"qwen2moe", "qwen2_moe", R_NEOX}, {"qwen3", "qwen3", R_NEOX},
    {"qwen3moe", "qwen3_moe", R_NEOX}, {"phi2", "phi", R_NEOX},           {"phi3", "phi3", R_NEOX},
    {"stablelm", "stablelm", R_NEOX},  {"gptneox", "gpt_neox", R_NEOX},   {"olmo2", "olmo2", R_NEOX},
    {"starcoder2", "starcoder2", R_NEOX}, {"falcon", "falcon", R_NEOX},   {"gpt-oss", "gpt_oss", R_NEOX},
    {"nemotron", "nemotron", R_NEOX},  {"qwen2vl", "qwen2_vl", R_MROPE},  {"qwen3vl", "qwen3_vl_text", R_IMROPE},
    {"bloom", "bloom", R_NONE},        {"mpt", "mpt", R_NONE},
};

static pe_status to_json(gguf *g, const char *path, int64_t layer, hf_layer *L, pe_err *err) {
    if (!text(g, find(g, "general.architecture"), g->arch, sizeof g->arch)) return bad_file(path, err, "no general.architecture");
    int a = -1;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (!strcmp(ARCHS[i].arch, g->arch)) a = (int)i;
    if (a < 0)
        return pe_error(err, PE_EKEY, "hf_config %s: GGUF architecture '%.60s' is not one posenc reads (its llama.cpp graph "
                        "may apply positions the header does not state); read the model's config.json instead", path, g->arch);
    if (g->freq_tensor)
        return pe_error(err, PE_EKEY, "hf_config %s: the GGUF file holds a rope_freqs or rope_factors tensor (Llama 3.1's or "
                        "LongRoPE's frequencies), which its header does not state: read the model's config.json", path);
    double layers, embd, heads = 0, kv, hd, rot, base = 10000, factor = 0, ctx = 0, v;
    const gkv *nh = find(g, "attention.head_count"), *nkv = find(g, "attention.head_count_kv");
    if (!number(find(g, "block_count"), 0, &layers) || layers < 1 || layers > 65536 || !number(find(g, "embedding_length"), 0, &embd))
        return bad_file(path, err, "no block_count or embedding_length");
    const int within = layer >= 0 && layer < (int64_t)layers; /* else hf_config.c names the range */
    const uint64_t at = nh && nh->n > 1 && within ? (uint64_t)layer : 0; /* one per layer, or one for all */
    if ((nh && nh->n != 1 && nh->n != (uint64_t)layers) || (nkv && nkv->n != 1 && nkv->n != (uint64_t)layers) ||
        !number(nh, at, &heads) || heads < 1)
        return bad_file(path, err, "attention.head_count is not a count, or one per layer");
    if (!number(nkv, nkv && nkv->n > 1 && within ? (uint64_t)layer : 0, &kv)) kv = heads;
    if (!number(find(g, "attention.key_length"), 0, &hd)) hd = floor(embd / heads);
    if (!number(find(g, "rope.dimension_count"), 0, &rot)) rot = hd;
    number(find(g, "rope.freq_base"), 0, &base);
    number(find(g, "context_length"), 0, &ctx);
    char kind[16] = "linear";
    if (find(g, "rope.scaling.type") && !text(g, find(g, "rope.scaling.type"), kind, sizeof kind))
        return bad_file(path, err, "rope.scaling.type is not a string");
    if (!number(find(g, "rope.scaling.factor"), 0, &factor)) number(find(g, "rope.scale_linear"), 0, &factor);
    json_t *c = L->root = json_object();
    json_object_set_new(c, "model_type", json_string(ARCHS[a].family));
    json_object_set_new(c, "num_hidden_layers", json_integer((json_int_t)layers));
    json_object_set_new(c, "hidden_size", json_integer((json_int_t)embd));
    json_object_set_new(c, "num_attention_heads", json_integer((json_int_t)heads));
    json_object_set_new(c, "num_key_value_heads", json_integer((json_int_t)kv));
    json_object_set_new(c, "head_dim", json_integer((json_int_t)hd));
    if (ctx > 0) json_object_set_new(c, "max_position_embeddings", json_integer((json_int_t)ctx));
    json_object_set_new(c, "rope_theta", json_real(base));
    if (number(find(g, "attention.sliding_window"), 0, &v)) json_object_set_new(c, "sliding_window", json_integer((json_int_t)v));
    const gkv *pat = find(g, "attention.sliding_window_pattern");
    if (pat && pat->n == 1 && number(pat, 0, &v)) { /* every v-th layer dense: HF's (i + 1) % v */
        json_object_set_new(c, "sliding_window_pattern", json_integer((json_int_t)v));
    } else if (pat) { /* a flag per layer, 1: sliding */
        json_t *types = json_array();
        for (uint64_t i = 0; i < pat->n && number(pat, i, &v); i++)
            json_array_append_new(types, json_string(v ? "sliding_attention" : "full_attention"));
        json_object_set_new(c, "layer_types", types);
    }
    json_t *rs = json_object();
    if (!strcmp(kind, "yarn") && factor > 0) {
        double L0 = ctx, fast = 32, slow = 1, attn = 1;
        number(find(g, "rope.scaling.original_context_length"), 0, &L0);
        number(find(g, "rope.scaling.yarn_beta_fast"), 0, &fast);
        number(find(g, "rope.scaling.yarn_beta_slow"), 0, &slow);
        number(find(g, "rope.scaling.attn_factor"), 0, &attn);
        json_object_set_new(rs, "rope_type", json_string("yarn"));
        json_object_set_new(rs, "original_max_position_embeddings", json_integer((json_int_t)L0));
        json_object_set_new(rs, "beta_fast", json_real(fast));
        json_object_set_new(rs, "beta_slow", json_real(slow));
        /* llama_context: yarn_attn_factor = (0.1 ln s + 1) rope_attn_factor; ggml's corr dims floor and ceil */
        json_object_set_new(rs, "attention_factor", json_real((factor > 1 ? 0.1 * log(factor) + 1 : 1) * attn));
        json_object_set_new(rs, "truncate", json_true());
    } else if (!strcmp(kind, "linear") && factor > 0 && factor != 1) {
        json_object_set_new(rs, "rope_type", json_string("linear"));
    } else if (strcmp(kind, "none") && strcmp(kind, "linear") && strcmp(kind, "yarn")) {
        json_decref(rs);
        return pe_error(err, PE_EKEY, "hf_config %s: GGUF rope.scaling.type '%s' is not read (longrope's factors are "
                        "tensors of the file)", path, kind);
    }
    if (json_object_size(rs)) json_object_set_new(rs, "factor", json_real(factor));
    const gkv *sec = find(g, "rope.dimension_sections");
    if (ARCHS[a].rope == R_MROPE || ARCHS[a].rope == R_IMROPE) {
        double s[4];
        for (int i = 0; i < 4; i++)
            if (!number(sec, (uint64_t)i, &s[i]) || s[i] < 0) s[i] = -1;
        if (!sec || sec->n != 4 || s[0] < 1 || s[3] != 0) {
            json_decref(rs);
            return bad_file(path, err, "rope.dimension_sections is not four pair counts ending in 0");
        }
        json_t *ms = json_array();
        for (int i = 0; i < 3; i++) json_array_append_new(ms, json_integer((json_int_t)s[i]));
        json_object_set_new(rs, "mrope_section", ms);
    }
    if (json_object_size(rs)) json_object_set_new(c, "rope_scaling", rs);
    else json_decref(rs);
    double swa;
    if (number(find(g, "rope.freq_base_swa"), 0, &swa)) json_object_set_new(c, "rope_local_base_freq", json_real(swa));
    L->gguf_rotary_dim = (int64_t)rot;
    snprintf(L->gguf_arch, sizeof L->gguf_arch, "%.31s", g->arch);
    L->gguf_layout = ARCHS[a].rope == R_NORM ? PE_ROPE_INTERLEAVED : PE_ROPE_HALF;
    return PE_OK;
}

int pe__gguf_is(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char m[4] = {0};
    const int is = f && fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    if (f) fclose(f);
    return is;
}

pe_status pe__gguf_read(const unsigned char *data, size_t n, const char *path, int64_t layer, hf_layer *L, pe_err *err) {
    gguf g = {.p = data, .end = data + n};
    pe_status st = parse(&g, path, err);
    if (!st) st = to_json(&g, path, layer, L, err);
    free(g.kv);
    return st;
}

pe_status pe__gguf_load(const char *path, int64_t layer, hf_layer *L, pe_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return pe_error(err, PE_EKEY, "hf_config %s: cannot open: %s", path, strerror(errno));
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f); /* the header lies in the file's first 64 MiB */
    const size_t cap = size < 0 || size > GGUF_MAX_HEADER ? GGUF_MAX_HEADER : (size_t)size;
    unsigned char *buf = malloc(cap ? cap : 1);
    size_t n = buf && !fseek(f, 0, SEEK_SET) ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (!buf) return pe_error(err, PE_ENOMEM, "out of memory for a GGUF header");
    pe_status st = pe__gguf_read(buf, n, path, layer, L, err);
    free(buf);
    return st;
}
