/* The README's "API in ten lines" as a whole program: one rope layer, forward and backward, with
 * every status checked. It builds against the installed library
 * (cc examples/api.c $(pkg-config --cflags --libs posenc) -lm; tests/cli/test_install.sh does)
 * and against the tree (make: build/examples/api). Only posenc.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "posenc.h"

enum { B = 2, T = 16, C = 512 };

static float frand(unsigned *s) { /* uniform in [-1, 1): a small LCG, so the example needs nothing else */
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

static float *alloc(size_t n, float scale, unsigned *s) { /* scale 0: zeros */
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; x && i < n; i++) x[i] = s ? scale * frand(s) : 0.0f;
    return x;
}

#define CHECK(call)                                                  \
    do {                                                             \
        if ((call) != PE_OK) {                                       \
            fprintf(stderr, "api: %s: %s\n", #call, err.msg);        \
            return 1;                                                \
        }                                                            \
    } while (0)

int main(void) {
    unsigned seed = 7;
    const float a = 1.0f / sqrtf((float)C); /* torch.nn.Linear's bound */
    float *wq = alloc(C * C, a, &seed), *wk = alloc(C * C, a, &seed), *wv = alloc(C * C, a, &seed),
          *wo = alloc(C * C, a, &seed), *x = alloc(B * T * C, 1, &seed), *dy = alloc(B * T * C, 1, &seed);
    float *y = alloc(B * T * C, 0, NULL), *dx = alloc(B * T * C, 0, NULL);
    float *dwq = alloc(C * C, 0, NULL), *dwk = alloc(C * C, 0, NULL), *dwv = alloc(C * C, 0, NULL),
          *dwo = alloc(C * C, 0, NULL);
    int64_t pos[T];
    for (int t = 0; t < T; t++) pos[t] = t;
    if (!wq || !wk || !wv || !wo || !x || !dy || !y || !dx || !dwq || !dwk || !dwv || !dwo) return 1;

    pe_config cfg;
    pe_err err;
    pe_attention *att;
    pe_config_init(&cfg);
    CHECK(pe_config_set(&cfg, "method", "rope", &err)); /* every key of the contract, as text */
    CHECK(pe_config_set(&cfg, "heads", "8", &err));
    CHECK(pe_config_set(&cfg, "causal", "true", &err)); /* causal defaults to false */
    CHECK(pe_attention_init(&att, &cfg, C, &err));    /* resolves defaults, validates */
    pe_weights w = {.wq = wq, .wk = wk, .wv = wv, .wo = wo}; /* PyTorch Linear layout, caller-owned */
    CHECK(pe_attention_forward(att, &w, x, NULL, 0, pos, 0, B, T, y, NULL, NULL, &err));
    pe_grads g = {.dwq = dwq, .dwk = dwk, .dwv = dwv, .dwo = dwo}; /* accumulated (+=) */
    CHECK(pe_attention_backward(att, &w, dy, dx, &g, &err));
    pe_attention_free(att);

    double sy = 0, sg = 0;
    for (int i = 0; i < B * T * C; i++) sy += (double)y[i] * y[i], sg += (double)dx[i] * dx[i];
    if (!(isfinite(sy) && isfinite(sg) && sy > 0 && sg > 0)) return fprintf(stderr, "api: outputs not finite\n"), 1;
    printf("api: rope layer B=%d T=%d C=%d: |y| %.4f, |dx| %.4f\n", B, T, C, sqrt(sy), sqrt(sg));
    free(wq), free(wk), free(wv), free(wo), free(x), free(dy), free(y), free(dx);
    free(dwq), free(dwk), free(dwv), free(dwo);
    return 0;
}
