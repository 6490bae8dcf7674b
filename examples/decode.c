/* Decoding with the engine API: a causal rope layer (grouped-query attention, dynamic NTK
 * scaling) runs a prompt, then one token per step through a KV cache; every step is checked
 * against the layer over the whole prefix, then the cache makes room with a context shift.
 *   build: make (build/examples/decode); run: build/examples/decode
 * Only posenc.h: link with -lposenc (and -lm). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "posenc.h"

enum { C = 128, H = 8, KV = 2, D = C / H, CKV = KV * D, PROMPT = 20, STEPS = 30, N = PROMPT + STEPS };

static float frand(unsigned *s) { /* uniform in [-1, 1): a small LCG, so the example needs nothing else */
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

static float *randn(size_t n, float scale, unsigned *s) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; x && i < n; i++) x[i] = scale * frand(s);
    return x;
}

int main(void) {
    pe_err err;
    pe_config cfg;
    pe_config_init(&cfg);
    const char *keys[] = {"method", "heads", "kv_heads", "causal", "rope_scaling", "rope_factor",
                          "max_position_embeddings"};
    const char *vals[] = {"rope", "8", "2", "true", "dynamic", "2", "32"};
    pe_attention *att;
    if (pe_config_set_all(&cfg, 7, keys, vals, &err) || pe_attention_init(&att, &cfg, C, &err)) {
        fprintf(stderr, "decode: %s\n", err.msg);
        return 1;
    }
    unsigned seed = 7;
    const float a = 1.0f / sqrtf((float)C);
    pe_weights w = {.wq = randn(C * C, a, &seed), .wk = randn(CKV * C, a, &seed), .wv = randn(CKV * C, a, &seed),
                    .wo = randn(C * C, a, &seed)};
    float *x = randn(N * C, 1.0f, &seed), *y = malloc(sizeof(float) * N * C), *full = malloc(sizeof(float) * N * C);

    /* the cache: the prompt in one call, then a token per call (positions continue by default) */
    pe_kv_cache *kv;
    if (pe_kv_cache_init(&kv, att, 1, 64, &err) || pe_kv_cache_layer_forward(kv, &w, x, PROMPT, NULL, 0, NULL, y, &err)) {
        fprintf(stderr, "decode: %s\n", err.msg);
        return 1;
    }
    double worst = 0;
    for (int64_t t = PROMPT; t <= N; t++) {
        /* the layer over the whole prefix 0 .. t-1: what the cache must reproduce. Past position
         * 31 dynamic NTK changes the frequencies at every token: the cache re-rotates its keys. */
        if (pe_attention_forward(att, &w, x, NULL, 0, NULL, 0, 1, t, full, NULL, NULL, &err)) {
            fprintf(stderr, "decode: %s\n", err.msg);
            return 1;
        }
        for (int64_t c = 0; c < C; c++) worst = fmax(worst, fabs(y[(t - 1) * C + c] - full[(t - 1) * C + c]));
        if (t < N && pe_kv_cache_layer_forward(kv, &w, x + t * C, 1, NULL, 0, NULL, y + t * C, &err)) {
            fprintf(stderr, "decode: step %lld: %s\n", (long long)t, err.msg);
            return 1;
        }
    }
    printf("decode: %d prompt tokens + %d steps, max |y_cache - y_layer| = %.2g\n", PROMPT, STEPS, worst);

    /* context shift: keep 4 tokens, drop the next 16, move the rest 16 positions back */
    if (pe_kv_cache_shift(kv, &w, 4, 16, 16, &err)) {
        fprintf(stderr, "decode: %s\n", err.msg);
        return 1;
    }
    printf("decode: after the shift the cache holds %lld tokens\n", (long long)pe_kv_cache_length(kv, 0));
    pe_kv_cache_free(kv);
    pe_attention_free(att);
    free((void *)w.wq), free((void *)w.wk), free((void *)w.wv), free((void *)w.wo), free(x), free(y), free(full);
    return worst < 1e-4 ? 0 : 1;
}
