/* libFuzzer: bytes as one call of pe_attention_forward_paged, an engine's step over vLLM-style
 * blocks: the layer (settings, heads, head_dim, causal), rows, queries, block size, blocks per
 * row, the pool's blocks, rotated, then each row's length and every table entry, hostile
 * values among them (negative, past the pool, INT32_MAX, lengths past the table).
 * A call that succeeds must equal pe_attention_forward_kvcache over the same keys gathered
 * into contiguous rows (to float32 rounding; the same bits where both decode); one that fails
 * must say why in one line. FUZZ_TRACE=1 prints each call. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/layer.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BROKEN() (fprintf(stderr, "%s:%d: a check failed\n", __FILE__, __LINE__), abort())

static const char *const SETTINGS[] = {
    "method=none", "method=rope", "method=rope rope_layout=interleaved rotary_dim=2 rotary_offset=2", "method=alibi",
    "method=t5 num_buckets=8 max_distance=12", "method=xpos xpos_scale_base=8", "method=floater",
    "method=rope rope_values=true rotary_dim=2 attention_sinks=true", "method=kerple kerple=log",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=8", "method=shaw max_rel=3",
};
enum { NSET = sizeof SETTINGS / sizeof SETTINGS[0], MAXB = 3, MAXT = 4, MAXBS = 8, MAXMB = 6, MAXPOOL = 12 };

typedef struct bytes {
    const uint8_t *p;
    size_t n;
} bytes;
static unsigned take(bytes *b) {
    if (!b->n) return 0;
    b->n--;
    return *b->p++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bytes in = {data, size};
    const char *settings = SETTINGS[take(&in) % NSET];
    const unsigned shape = take(&in);
    const int64_t kv = 1 + shape % 2, H = kv * (1 + (shape >> 1) % 2), D = 2 + 2 * ((shape >> 2) % 3);
    const int causal = (shape >> 4) & 1, rotated = (shape >> 5) & 1;
    const int64_t B = 1 + take(&in) % MAXB, T = 1 + take(&in) % MAXT, bs = 1 + take(&in) % MAXBS;
    const int64_t mb = 1 + take(&in) % MAXMB, pool = 1 + take(&in) % MAXPOOL, Tk = mb * bs;
    pe_attention *att = fuzz_layer(settings, H, kv, causal, D);
    if (!att) att = fuzz_layer(settings, H, H, causal, D); /* a method without grouped-query attention */
    if (!att) return 0;
    const int64_t C = H * D, Ckv = pe_attention_config(att)->kv_heads * D;
    int64_t klen[MAXB], qlen[MAXB];
    int32_t table[MAXB * MAXMB];
    for (int64_t b = 0; b < B; b++) {
        const unsigned l = take(&in);
        klen[b] = l == 255 ? -1 : l == 254 ? Tk + 1 : 1 + l % Tk; /* hostile: none, past the table */
        qlen[b] = causal && klen[b] >= 1 && klen[b] < T ? klen[b] : T;
    }
    for (int64_t i = 0; i < B * mb; i++) {
        const unsigned t = take(&in);
        table[i] = t == 255 ? INT32_MAX : t == 254 ? -1 : t == 253 ? (int32_t)pool : (int32_t)(t % pool);
    }
    pe_layer L;
    pe_err err;
    if (pe_layer_init(&L, att, 0, take(&in), &err)) {
        pe_attention_free(att);
        return 0;
    }
    float *kb = malloc(sizeof(float) * (size_t)(pool * bs * Ckv)), *vb = malloc(sizeof(float) * (size_t)(pool * bs * Ckv));
    float *q = malloc(sizeof(float) * (size_t)(B * T * C)), *o1 = malloc(sizeof(float) * (size_t)(B * T * C));
    float *o2 = malloc(sizeof(float) * (size_t)(B * T * C));
    float *kc = calloc((size_t)(B * Tk * Ckv), sizeof(float)), *vc = calloc((size_t)(B * Tk * Ckv), sizeof(float));
    uint64_t s = 0x9e3779b97f4a7c15ull ^ size;
    for (int64_t i = 0; i < pool * bs * Ckv; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        kb[i] = (float)((s >> 40) & 0xffff) / 65536.0f - 0.5f;
        vb[i] = (float)((s >> 20) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int64_t i = 0; i < B * T * C; i++) q[i] = kb[i % (pool * bs * Ckv)] * 2.0f;
    pe_positions at = {.k_lens = klen, .q_lens = qlen};
    if (getenv("FUZZ_TRACE"))
        fprintf(stderr, "%s H %lld kv %lld D %lld B %lld T %lld block %lld blocks %lld pool %lld rotated %d\n", settings,
                (long long)H, (long long)kv, (long long)D, (long long)B, (long long)T, (long long)bs, (long long)mb,
                (long long)pool, rotated);
    pe_status st = pe_attention_forward_paged(att, &L.w, q, kb, vb, pool, bs, table, mb, B, T, &at, rotated, o1, &err);
    if (st) {
        if (!err.msg[0] || strchr(err.msg, '\n')) BROKEN(); /* one line saying why */
    } else {
        for (int64_t b = 0; b < B; b++) /* the keys the table names, contiguous */
            for (int64_t u = 0; u < klen[b]; u++) {
                const int64_t blk = table[b * mb + u / bs];
                if (blk < 0 || blk >= pool) BROKEN(); /* a call that succeeded read only valid blocks */
                memcpy(kc + (b * Tk + u) * Ckv, kb + (blk * bs + u % bs) * Ckv, sizeof(float) * (size_t)Ckv);
                memcpy(vc + (b * Tk + u) * Ckv, vb + (blk * bs + u % bs) * Ckv, sizeof(float) * (size_t)Ckv);
            }
        if (pe_attention_forward_kvcache(att, &L.w, q, kc, vc, Tk * Ckv, B, T, Tk, &at, rotated, o2, &err)) BROKEN();
        for (int64_t i = 0; i < B * T * C; i++)
            if (!(fabsf(o1[i] - o2[i]) <= 1e-5f * (1.0f + fabsf(o2[i])))) BROKEN();
    }
    free(kb), free(vb), free(q), free(o1), free(o2), free(kc), free(vc);
    pe_layer_free(&L);
    pe_attention_free(att);
    return 0;
}
