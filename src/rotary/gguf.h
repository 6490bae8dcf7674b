/* GGUF (llama.cpp's model file) as gguf.c reads it, shared with gguf_archs.c: the parsed header
 * (its key-value pairs, the rope_freqs tensor's entry) and the rules of the architectures whose
 * llama.cpp graph decides more than the generic keys say. Private to the library. */
#ifndef PE_GGUF_H
#define PE_GGUF_H

#include <stdio.h>

#include "hf_layer.h"

enum { G_U8, G_I8, G_U16, G_I16, G_U32, G_I32, G_F32, G_BOOL, G_STR, G_ARR, G_U64, G_I64, G_F64, G_NTYPES };

typedef struct gkv {
    const unsigned char *key, *val; /* the value right after its type (an array: after its count) */
    uint64_t klen, n;               /* n: an array's count, else 1 */
    uint32_t type, elem;            /* elem: an array's element type, else type */
} gkv;

typedef struct gguf {
    const unsigned char *start, *p, *end; /* the bytes read (the file's first), the cursor */
    FILE *file;                           /* the file itself, for tensor data past the bytes read (or NULL) */
    gkv *kv;
    uint64_t n_kv;
    uint64_t alignment;  /* general.alignment, 32 when absent */
    uint64_t data_start; /* the data section's offset in the file */
    int factor_tables;   /* rope_factors_long / rope_factors_short entries (LongRoPE's) */
    int freqs;           /* rope_freqs.weight entries */
    uint32_t freqs_nd, freqs_type;
    uint64_t freqs_ne, freqs_offset; /* its first dimension, its offset in the data section */
    char arch[64];
} gguf;

/* What the generic reading found, for the architecture rules */
typedef struct gguf_shape {
    double layers, embd, heads, heads0, kv, hd, rot, base, ctx, factor; /* heads0: layer 0's */
    const char *kind;                                                    /* rope.scaling.type */
} gguf_shape;

/* "%s.suffix" of the architecture, or suffix itself after "general.", or NULL */
const gkv *pe__gguf_find(const gguf *g, const char *suffix);
/* Element i of an entry as a number (integers exactly); 0 when it is absent or not numeric */
int pe__gguf_number(const gkv *e, uint64_t i, double *v);
/* A header's number as the config's integer where it is a whole number within +-2^53; else as
 * a real, which the config's reader refuses by its key's name (a count of -4e37, 1e308, NaN) */
json_t *pe__gguf_int(double v);
/* The architecture's key suffix as a number: 1 when present and numeric, 0 absent, -1 otherwise */
int pe__gguf_key(const gguf *g, const char *suffix, double *v);
pe_status pe__gguf_bad(const char *path, pe_err *err, const char *what);

/* The rules of llama.cpp's gemma, gemma3, deepseek2 and llama4 graphs (gguf_archs.c), on the
 * config c the generic keys made (its rope_scaling, if any, among them) */
pe_status pe__gguf_gemma(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err);
pe_status pe__gguf_gemma3(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err);
pe_status pe__gguf_deepseek2(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err);
pe_status pe__gguf_llama4(const gguf *g, const char *path, const gguf_shape *s, json_t *c, pe_err *err);

#endif
