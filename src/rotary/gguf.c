/* GGUF, llama.cpp's model file, read as hf_config reads a config.json: its header's metadata
 * becomes the config of one layer in HF's key names, read through the family table as any
 * config.json (hf_config.c), and what the file states directly (the rotated dims, the pair
 * layout of llama.cpp's rope type) is set as it says. Where llama.cpp's graph for the
 * architecture decides more than the generic keys (a softmax scale by model size, hard-coded
 * windows, MLA, Llama 4's chunks), gguf_archs.c applies its rules; what the header cannot say
 * is refused by name.
 *
 * The format (ggml docs/gguf.md "File Structure" and src/gguf.cpp gguf_init_from_reader, ggml
 * d99724f2 and 1312dffb): "GGUF", a uint32 version (2 or 3: gguf.cpp accepts both), uint64
 * tensor and key-value counts, then key-value pairs: a string key (uint64 length, bytes), a
 * uint32 type (UINT8 0, INT8 1, UINT16 2, INT16 3, UINT32 4, INT32 5, FLOAT32 6, BOOL 7,
 * STRING 8, ARRAY 9, UINT64 10, INT64 11, FLOAT64 12) and the value; an array is a uint32
 * element type, a uint64 count and the elements (no arrays of arrays: gguf.cpp refuses them).
 * Then one entry per tensor: a name, a uint32 dimension count (at most 4), uint64 dimensions, a
 * uint32 ggml type (F32 0) and a uint64 offset into the data section, which begins at the next
 * multiple of general.alignment (a uint32 power of 2 of at most 1 MiB, GGUF_DEFAULT_ALIGNMENT 32
 * when absent) after the entries. Little-endian. The header is read from the file's first 64
 * MiB, every length against what is left; a key twice, an unknown type, a nested array or a name
 * of 64 bytes or more is an error, as in gguf.cpp. Of the tensor data only rope_freqs.weight's
 * is read (gguf_freqs): llama.cpp's per-pair frequency factors (Llama 3.1 / 4's llama3 scaling
 * as the converter stores it, conversion/llama.py LlamaModel.generate_extra_tensors [0274f0fc]:
 * one float32 per rotated pair), which ggml_rope_ext divides each frequency by.
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
#include <sys/types.h>

#include "gguf.h"

enum { GGUF_MAX_HEADER = 1 << 26, GGUF_MAX_KV = 1 << 20, GGUF_MAX_NAME = 64, GGUF_MAX_ALIGN = 1 << 20 };

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

pe_status pe__gguf_bad(const char *path, pe_err *err, const char *what) {
    return pe_error(err, PE_EKEY, "hf_config %s: not a GGUF file posenc reads: %s", path, what);
}

static int named(const unsigned char *name, uint64_t len, const char *want) {
    return len == strlen(want) && !memcmp(name, want, (size_t)len);
}

static pe_status parse(gguf *g, const char *path, pe_err *err) {
    const unsigned char *magic;
    uint32_t version;
    uint64_t n_tensors;
    if (!take(g, 4, &magic) || memcmp(magic, "GGUF", 4)) return pe__gguf_bad(path, err, "no GGUF magic");
    if (!u32(g, &version) || !u64(g, &n_tensors) || !u64(g, &g->n_kv)) return pe__gguf_bad(path, err, "a truncated header");
    if (version < 2 || version > 3) return pe__gguf_bad(path, err, "version not 2 or 3 (gguf.cpp's)");
    if (g->n_kv > GGUF_MAX_KV || n_tensors > (uint64_t)(g->end - g->p) / 24) /* a tensor entry is 24 bytes or more */
        return pe__gguf_bad(path, err, "more keys or tensors than the header can hold");
    if (!(g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv))) return pe_error(err, PE_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gkv *e = &g->kv[i];
        if (!str(g, &e->key, &e->klen) || !u32(g, &e->type)) return pe__gguf_bad(path, err, "a truncated key");
        if (!e->klen) return pe__gguf_bad(path, err, "an empty key");
        if (e->type >= G_NTYPES) return pe__gguf_bad(path, err, "a value of an unknown type");
        e->elem = e->type, e->n = 1;
        if (e->type == G_ARR && (!u32(g, &e->elem) || !u64(g, &e->n)))
            return pe__gguf_bad(path, err, "a truncated array");
        if (e->elem >= G_NTYPES || e->elem == G_ARR) return pe__gguf_bad(path, err, "an array of arrays or of an unknown type");
        e->val = g->p;
        if (!skip(g, e->elem, e->n)) return pe__gguf_bad(path, err, "a value past the end of the header");
    }
    qsort(g->kv, (size_t)g->n_kv, sizeof *g->kv, key_order);
    for (uint64_t i = 1; i < g->n_kv; i++)
        if (!key_order(&g->kv[i - 1], &g->kv[i])) return pe__gguf_bad(path, err, "a key given twice");
    /* gguf.cpp: general.alignment is read as a uint32, a power of 2 within GGUF_MAX_ALIGNMENT */
    const gkv *al = pe__gguf_find(g, "general.alignment");
    double a = 32;
    if (al && (al->type != G_U32 || !pe__gguf_number(al, 0, &a) || a < 1 || a > GGUF_MAX_ALIGN ||
               ((uint64_t)a & ((uint64_t)a - 1))))
        return pe__gguf_bad(path, err, "general.alignment is not a uint32 power of 2 of at most 1 MiB");
    g->alignment = (uint64_t)a;
    for (uint64_t i = 0; i < n_tensors; i++) { /* names, and the frequency tables' entries */
        const unsigned char *name;
        uint64_t len, dim, ne0 = 1, offset;
        uint32_t nd, type;
        if (!str(g, &name, &len) || len >= GGUF_MAX_NAME || !u32(g, &nd) || nd > 4)
            return pe__gguf_bad(path, err, "a tensor entry with a bad name or more than 4 dimensions");
        for (uint32_t d = 0; d < nd; d++) {
            if (!u64(g, &dim)) return pe__gguf_bad(path, err, "a truncated tensor entry");
            if (!d) ne0 = dim;
        }
        if (!u32(g, &type) || !u64(g, &offset)) return pe__gguf_bad(path, err, "a truncated tensor entry");
        g->factor_tables += named(name, len, "rope_factors_long.weight") || named(name, len, "rope_factors_short.weight");
        if (named(name, len, "rope_freqs.weight"))
            g->freqs++, g->freqs_nd = nd, g->freqs_type = type, g->freqs_ne = ne0, g->freqs_offset = offset;
    }
    const uint64_t at = (uint64_t)(g->p - g->start); /* gguf.cpp: the data section at GGML_PAD(tell, alignment) */
    g->data_start = (at + g->alignment - 1) / g->alignment * g->alignment;
    return PE_OK;
}

const gkv *pe__gguf_find(const gguf *g, const char *suffix) {
    char key[160];
    snprintf(key, sizeof key, strncmp(suffix, "general.", 8) ? "%s.%s" : "%.0s%s", g->arch, suffix);
    gkv probe = {.key = (const unsigned char *)key, .klen = strlen(key)};
    return bsearch(&probe, g->kv, (size_t)g->n_kv, sizeof *g->kv, key_order);
}

json_t *pe__gguf_int(double v) {
    return v == floor(v) && fabs(v) <= 9007199254740992.0 ? json_integer((json_int_t)v) : json_real(isfinite(v) ? v : 0.5);
}

int pe__gguf_number(const gkv *e, uint64_t i, double *v) {
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

int pe__gguf_key(const gguf *g, const char *suffix, double *v) {
    const gkv *e = pe__gguf_find(g, suffix);
    return !e ? 0 : e->n == 1 && pe__gguf_number(e, 0, v) ? 1 : -1;
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

/* rope_freqs.weight's factors, one per rotated pair (llama.cpp creates it with shape {n_rot / 2}:
 * src/models/llama4.cpp llama_model_llama4::load_arch_tensors [8a5c4e03]), as a JSON list: F32
 * at data_start + its offset, from the bytes read or else from the file */
static pe_status gguf_freqs(const gguf *g, const char *path, uint64_t pairs, json_t **list, pe_err *err) {
    unsigned char raw[4 * PE_MAX_ROPE_PAIRS];
    if (g->freqs != 1) return pe__gguf_bad(path, err, "two tensors named rope_freqs.weight");
    if (g->freqs_nd != 1 || g->freqs_ne != pairs || pairs > PE_MAX_ROPE_PAIRS)
        return pe_error(err, PE_EKEY, "hf_config %s: rope_freqs.weight is not one factor per rotated pair (%llu of them "
                        "for rope.dimension_count %llu)", path, (unsigned long long)pairs, (unsigned long long)(2 * pairs));
    if (g->freqs_type != 0) return pe__gguf_bad(path, err, "rope_freqs.weight is not F32 (the converter writes float32)");
    if (g->freqs_offset % g->alignment || g->freqs_offset > UINT64_MAX - g->data_start - sizeof raw)
        return pe__gguf_bad(path, err, "rope_freqs.weight's offset is not a multiple of general.alignment");
    const uint64_t at = g->data_start + g->freqs_offset, have = (uint64_t)(g->end - g->start);
    const size_t bytes = (size_t)(4 * pairs);
    if (at <= have && bytes <= have - at) memcpy(raw, g->start + at, bytes);
    else if (!g->file || (uint64_t)(off_t)at != at || (off_t)at < 0 || fseeko(g->file, (off_t)at, SEEK_SET) ||
             fread(raw, 1, bytes, g->file) != bytes)
        return pe__gguf_bad(path, err, "rope_freqs.weight's data lies past the end of the file");
    json_t *l = *list = json_array();
    for (uint64_t i = 0; i < pairs; i++) {
        const unsigned char *b = raw + 4 * i;
        const uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        float f;
        memcpy(&f, &w, 4);
        if (!(isfinite(f) && f > 0)) return pe__gguf_bad(path, err, "a rope_freqs factor is not a positive number");
        json_array_append_new(l, json_real(f));
    }
    return PE_OK;
}

/* llama.cpp's architectures posenc reads, as the HF family whose code they come from, their
 * rope type (src/llama-model.cpp llama_model_rope_type, 00395eb2 and 00342301): NORM pairs
 * (2p, 2p + 1) (the converter permutes Llama's q and k so: conversion/llama.py LlamaModel.permute;
 * Llama 4's and DeepSeek-V2/V3's checkpoints are interleaved already: Llama4Model.undo_permute
 * False, conversion/llama4.py [2bbcf7fc], DeepseekV2Model permutes nothing, conversion/deepseek.py
 * [01a723dc]), NEOX (the Gemmas: Gemma*Model permute nothing, conversion/gemma.py [061b8c5f]),
 * MROPE and IMROPE (p, p + n_rot / 2); and the rules of their graph (gguf_archs.c); LLAMA and
 * LLAMA4 divide their frequencies by rope_freqs (llm_build_llama, llm_build_llama_iswa:
 * model.get_rope_factors into ggml_rope_ext, src/llama-model.cpp 00342301); the others' files
 * with a rope_freqs tensor are refused. */
enum { R_NORM, R_NEOX, R_MROPE, R_IMROPE, R_NONE };
enum { A_NONE, A_LLAMA, A_GEMMA, A_GEMMA3, A_DEEPSEEK2, A_LLAMA4 };
static const struct { const char *arch, *family; unsigned char rope, rule; } ARCHS[] = {
    {"llama", "llama", R_NORM, A_LLAMA},  {"command-r", "cohere", R_NORM, 0}, {"cohere2", "cohere2", R_NORM, 0},
    {"qwen2", "qwen2", R_NEOX, 0},          {"qwen2moe", "qwen2_moe", R_NEOX, 0}, {"qwen3", "qwen3", R_NEOX, 0},
    {"qwen3moe", "qwen3_moe", R_NEOX, 0},   {"phi2", "phi", R_NEOX, 0},         {"phi3", "phi3", R_NEOX, 0},
    {"stablelm", "stablelm", R_NEOX, 0},    {"gptneox", "gpt_neox", R_NEOX, 0}, {"olmo2", "olmo2", R_NEOX, 0},
    {"starcoder2", "starcoder2", R_NEOX, 0}, {"falcon", "falcon", R_NEOX, 0},   {"gpt-oss", "gpt_oss", R_NEOX, 0},
    {"nemotron", "nemotron", R_NEOX, 0},    {"qwen2vl", "qwen2_vl", R_MROPE, 0}, {"qwen3vl", "qwen3_vl_text", R_IMROPE, 0},
    {"bloom", "bloom", R_NONE, 0},          {"mpt", "mpt", R_NONE, 0},
    {"gemma", "gemma", R_NEOX, A_GEMMA},    {"gemma3", "gemma3_text", R_NEOX, A_GEMMA3},
    {"deepseek2", "deepseek_v3", R_NORM, A_DEEPSEEK2}, {"llama4", "llama4_text", R_NORM, A_LLAMA4},
};

/* Architectures whose llama.cpp graph does what the header cannot make posenc compute */
static const struct { const char *arch, *why; } REFUSED[] = {
    {"gemma2", "llama.cpp soft-caps every gemma2 layer's attention logits, cap tanh(s / cap) with cap attn_logit_softcapping "
               "or 50 when absent (src/models/gemma2.cpp llama_model_gemma2::load_arch_hparams attn_soft_cap [82234e08], "
               "src/llama-hparams.h f_attn_logit_softcapping [027d5756], src/llama-graph.cpp build_attn_mha [00395eb2]), which "
               "posenc does not compute"},
    {"gemma3n", "llama.cpp's gemma3n keeps KV caches for its first 20 layers only (the others reuse them), scales the "
                "softmax by 1 (src/llama-model.cpp load_hparams LLM_ARCH_GEMMA3N: n_layer_kv_from_start, f_attention_scale "
                "[00342301]) and adds AltUp and LAuReL blocks (src/llama-hparams.h n_altup, laurel_rank [027d5756]); posenc's "
                "family table has no Gemma 3n row"},
    {"gemma4", "llama.cpp's gemma4 rotates its full layers by the factors of a rope_freqs tensor (proportional RoPE) at "
               "heads of attention.key_length and its sliding ones at attention.key_length_swa, a flag per layer for which "
               "slides, with shared_kv_layers reusing caches (src/models/gemma4.cpp llama_model_gemma4::load_arch_hparams, "
               "load_arch_tensors [9af0434d]); posenc has not mapped that graph onto its gemma4 rows: read the config.json"},
    {"gemma-embedding", "llama.cpp's gemma-embedding attends both ways in symmetric windows (LLAMA_SWA_TYPE_SYMMETRIC, "
                        "causal_attn false: src/llama-model.cpp load_hparams LLM_ARCH_GEMMA_EMBEDDING [00342301]), which "
                        "posenc's causal family rows do not describe"},
};

static pe_status to_json(gguf *g, const char *path, int64_t layer, hf_layer *L, pe_err *err) {
    if (!text(g, pe__gguf_find(g, "general.architecture"), g->arch, sizeof g->arch))
        return pe__gguf_bad(path, err, "no general.architecture");
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (!strcmp(REFUSED[i].arch, g->arch))
            return pe_error(err, PE_EKEY, "hf_config %s: GGUF architecture '%s' is not read: %s", path, g->arch, REFUSED[i].why);
    int a = -1;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (!strcmp(ARCHS[i].arch, g->arch)) a = (int)i;
    if (a < 0)
        return pe_error(err, PE_EKEY, "hf_config %s: GGUF architecture '%.60s' is not one posenc reads (its llama.cpp graph "
                        "may apply positions the header does not state); read the model's config.json instead", path, g->arch);
    const int rule = ARCHS[a].rule, factors = rule == A_LLAMA || rule == A_LLAMA4;
    if (g->factor_tables)
        return pe_error(err, PE_EKEY, "hf_config %s: the GGUF file holds LongRoPE's rope_factors_long / rope_factors_short "
                        "tensors, of which llama.cpp picks one by the context size it runs with (llama_model::get_rope_factors: "
                        "n_ctx per sequence against rope.scaling.original_context_length, src/llama-model.cpp 00342301), not "
                        "by the positions: the file does not say which; read the model's config.json", path);
    if (g->freqs && !factors)
        return pe_error(err, PE_EKEY, "hf_config %s: the GGUF file holds a rope_freqs tensor, and posenc has read only the "
                        "llama and llama4 graphs that divide the frequencies by it, not %s's", path, g->arch);
    double layers, embd, heads = 0, heads0 = 0, kv, hd, rot, base = 10000, factor = 0, ctx = 0, v;
    const gkv *nh = pe__gguf_find(g, "attention.head_count"), *nkv = pe__gguf_find(g, "attention.head_count_kv");
    if (!pe__gguf_number(pe__gguf_find(g, "block_count"), 0, &layers) || layers < 1 || layers > 65536 ||
        !pe__gguf_number(pe__gguf_find(g, "embedding_length"), 0, &embd))
        return pe__gguf_bad(path, err, "no block_count or embedding_length");
    const int within = layer >= 0 && layer < (int64_t)layers; /* else hf_config.c names the range */
    const uint64_t at = nh && nh->n > 1 && within ? (uint64_t)layer : 0; /* one per layer, or one for all */
    if ((nh && nh->n != 1 && nh->n != (uint64_t)layers) || (nkv && nkv->n != 1 && nkv->n != (uint64_t)layers) ||
        !pe__gguf_number(nh, at, &heads) || heads < 1 || !pe__gguf_number(nh, 0, &heads0) || heads0 < 1)
        return pe__gguf_bad(path, err, "attention.head_count is not a count, or one per layer");
    if (!pe__gguf_number(nkv, nkv && nkv->n > 1 && within ? (uint64_t)layer : 0, &kv)) kv = heads;
    if (!pe__gguf_number(pe__gguf_find(g, "attention.key_length"), 0, &hd)) hd = floor(embd / heads);
    if (!pe__gguf_number(pe__gguf_find(g, "rope.dimension_count"), 0, &rot)) rot = hd;
    pe__gguf_number(pe__gguf_find(g, "rope.freq_base"), 0, &base);
    pe__gguf_number(pe__gguf_find(g, "context_length"), 0, &ctx);
    char kind[16] = "linear";
    if (pe__gguf_find(g, "rope.scaling.type") && !text(g, pe__gguf_find(g, "rope.scaling.type"), kind, sizeof kind))
        return pe__gguf_bad(path, err, "rope.scaling.type is not a string");
    if (!pe__gguf_number(pe__gguf_find(g, "rope.scaling.factor"), 0, &factor))
        pe__gguf_number(pe__gguf_find(g, "rope.scale_linear"), 0, &factor);
    json_t *freqs = NULL;
    if (g->freqs) { /* llama.cpp divides by the factors and scales by freq_scale too: read alone */
        if (strcmp(kind, "none") && strcmp(kind, "linear")) return pe__gguf_bad(path, err, "rope_freqs with a rope.scaling.type");
        if (factor != 0 && factor != 1) return pe__gguf_bad(path, err, "rope_freqs with a rope.scaling.factor");
        if (!(rot >= 2 && rot <= 2 * PE_MAX_ROPE_PAIRS) || !(ctx >= 2))
            return pe__gguf_bad(path, err, "rope_freqs without a rope.dimension_count or context_length");
        pe_status st = gguf_freqs(g, path, (uint64_t)rot / 2, &freqs, err);
        if (st) {
            json_decref(freqs);
            return st;
        }
    }
    json_t *c = L->root = json_object();
    json_object_set_new(c, "model_type", json_string(ARCHS[a].family));
    json_object_set_new(c, "num_hidden_layers", pe__gguf_int(layers));
    json_object_set_new(c, "hidden_size", pe__gguf_int(embd));
    json_object_set_new(c, "num_attention_heads", pe__gguf_int(heads));
    json_object_set_new(c, "num_key_value_heads", pe__gguf_int(kv));
    json_object_set_new(c, "head_dim", pe__gguf_int(hd));
    if (ctx > 0) json_object_set_new(c, "max_position_embeddings", pe__gguf_int(ctx));
    json_object_set_new(c, "rope_theta", json_real(base));
    if (pe__gguf_number(pe__gguf_find(g, "attention.sliding_window"), 0, &v))
        json_object_set_new(c, "sliding_window", pe__gguf_int(v));
    const gkv *pat = pe__gguf_find(g, "attention.sliding_window_pattern");
    if (pat && pat->n == 1 && pe__gguf_number(pat, 0, &v)) { /* every v-th layer dense: HF's (i + 1) % v */
        json_object_set_new(c, "sliding_window_pattern", pe__gguf_int(v));
    } else if (pat) { /* a flag per layer, 1: sliding */
        json_t *types = json_array();
        for (uint64_t i = 0; i < pat->n && pe__gguf_number(pat, i, &v); i++)
            json_array_append_new(types, json_string(v ? "sliding_attention" : "full_attention"));
        json_object_set_new(c, "layer_types", types);
    }
    json_t *rs = json_object();
    if (freqs) { /* the factors as LongRoPE's table, the same for short and long: theta_t / f_t, factor 1 */
        json_object_set_new(rs, "rope_type", json_string("longrope"));
        json_object_set(rs, "short_factor", freqs);
        json_object_set_new(rs, "long_factor", freqs);
        json_object_set_new(rs, "attention_factor", json_real(1.0));
        json_object_set_new(rs, "original_max_position_embeddings", pe__gguf_int(ctx));
    } else if (!strcmp(kind, "yarn") && factor > 0) {
        double L0 = ctx, fast = 32, slow = 1, attn = 1;
        pe__gguf_number(pe__gguf_find(g, "rope.scaling.original_context_length"), 0, &L0);
        pe__gguf_number(pe__gguf_find(g, "rope.scaling.yarn_beta_fast"), 0, &fast);
        pe__gguf_number(pe__gguf_find(g, "rope.scaling.yarn_beta_slow"), 0, &slow);
        pe__gguf_number(pe__gguf_find(g, "rope.scaling.attn_factor"), 0, &attn);
        json_object_set_new(rs, "rope_type", json_string("yarn"));
        json_object_set_new(rs, "original_max_position_embeddings", pe__gguf_int(L0));
        json_object_set_new(rs, "beta_fast", json_real(fast));
        json_object_set_new(rs, "beta_slow", json_real(slow));
        /* llama_context: yarn_attn_factor = (0.1 ln s + 1) rope_attn_factor; ggml's corr dims floor and ceil */
        json_object_set_new(rs, "attention_factor", json_real((factor > 1 ? 0.1 * log(factor) + 1 : 1) * attn));
        json_object_set_new(rs, "truncate", json_true());
    } else if (!strcmp(kind, "linear") && factor > 0 && factor != 1) {
        json_object_set_new(rs, "rope_type", json_string("linear"));
    } else if (strcmp(kind, "none") && strcmp(kind, "linear") && strcmp(kind, "yarn")) {
        json_decref(rs);
        return pe_error(err, PE_EKEY, "hf_config %s: GGUF rope.scaling.type '%s' is not read (LongRoPE's factor tables are "
                        "tensors llama.cpp picks between by its context size)", path, kind);
    }
    if (json_object_size(rs) && !freqs) json_object_set_new(rs, "factor", json_real(factor));
    const gkv *sec = pe__gguf_find(g, "rope.dimension_sections");
    if (ARCHS[a].rope == R_MROPE || ARCHS[a].rope == R_IMROPE) {
        double s[4];
        for (int i = 0; i < 4; i++)
            if (!pe__gguf_number(sec, (uint64_t)i, &s[i]) || s[i] < 0) s[i] = -1;
        if (!sec || sec->n != 4 || s[0] < 1 || s[3] != 0) {
            json_decref(rs);
            return pe__gguf_bad(path, err, "rope.dimension_sections is not four pair counts ending in 0");
        }
        json_t *ms = json_array();
        for (int i = 0; i < 3; i++) json_array_append_new(ms, pe__gguf_int(s[i]));
        json_object_set_new(rs, "mrope_section", ms);
    }
    if (json_object_size(rs)) json_object_set_new(c, "rope_scaling", rs);
    else json_decref(rs);
    double swa;
    if (pe__gguf_number(pe__gguf_find(g, "rope.freq_base_swa"), 0, &swa)) json_object_set_new(c, "rope_local_base_freq", json_real(swa));
    const gguf_shape s = {layers, embd, heads, heads0, kv, hd, rot, base, ctx, factor, kind};
    pe_status st = rule == A_GEMMA ? pe__gguf_gemma(g, path, &s, c, err) : rule == A_GEMMA3 ? pe__gguf_gemma3(g, path, &s, c, err)
                 : rule == A_DEEPSEEK2 ? pe__gguf_deepseek2(g, path, &s, c, err)
                 : rule == A_LLAMA4 ? pe__gguf_llama4(g, path, &s, c, err) : PE_OK;
    if (st) return st;
    if (!(rot >= 0 && rot <= 2 * PE_MAX_ROPE_PAIRS)) return pe__gguf_bad(path, err, "rope.dimension_count is not a count of dims");
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

pe_status pe__gguf_read(const unsigned char *data, size_t n, FILE *file, const char *path, int64_t layer, hf_layer *L,
                        pe_err *err) {
    gguf g = {.start = data, .p = data, .end = data + n, .file = file};
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
    pe_status st = buf ? pe__gguf_read(buf, n, f, path, layer, L, err) : pe_error(err, PE_ENOMEM, "out of memory for a GGUF header");
    fclose(f);
    free(buf);
    return st;
}
