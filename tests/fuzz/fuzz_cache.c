/* libFuzzer: bytes as a KV cache's life: a layer (method settings, rows, heads, head_dim,
 * max_tokens, causal, path from the first 5 bytes) then 8-byte records, each one call of
 * append / attend / shift / clear / layer_forward with sizes, positions, lengths, masks and
 * hostile integers (INT64_MAX, 2^53, negative counts) decoded from the record.
 * A shadow of what the cache must hold (the raw keys and values, their positions) follows
 * every call: a call that fails leaves lengths and positions as they were; one that succeeds
 * changes them as the header promises; and every attend that succeeds equals the projected
 * form (reference path) over the shadow's keys at the shadow's positions, to float32 rounding.
 * Positions past 2^20 or keys the shadow cannot know (layer_forward) stop the comparison of
 * outputs for the rest of the input, never the state checks. FUZZ_TRACE=1 prints each call. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/layer.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a broken promise: which one, then the crash libFuzzer keeps */
#define BROKEN() (fprintf(stderr, "%s:%d: a check failed\n", __FILE__, __LINE__), abort())

/* settings whose switches small positions cross (test_cache's list and more) */
static const char *const SETTINGS[] = {
    "method=none", "method=sinusoidal", "method=learned", "method=floater", "method=shaw max_rel=3", "method=xl",
    "method=t5 num_buckets=8 max_distance=12", "method=tupe num_buckets=8 max_distance=12",
    "method=deberta position_buckets=4 max_relative_positions=8 share_att_key=false", "method=rope",
    "method=rope rope_layout=interleaved rotary_dim=4", "method=rope rotary_dim=2 rotary_offset=2",
    "method=rope llama_4_scaling_beta=0.2 original_max_position_embeddings=4",
    "method=none attn_temperature_tuning=true floor_scale=3 attn_scale=0.5", "method=none head_scale=true",
    "method=rope rope_scaling=longrope original_max_position_embeddings=16 max_position_embeddings=64",
    "method=rope rope_scaling=dynamic rope_factor=2 max_position_embeddings=8",
    "method=rope rope_scaling=yarn rope_factor=4 original_max_position_embeddings=8",
    "method=rope rope_scaling=llama3 rope_factor=8 original_max_position_embeddings=16", "method=huang1 max_rel=3",
    "method=huang2 max_rel=3", "method=huang3 max_rel=3", "method=huang4 max_rel=3", "method=alibi",
    "method=xpos xpos_scale_base=8", "method=xpos xpos_scale_base=512", "method=pope", "method=pope rotary_dim=3 rope_base=100",
    "method=kerple kerple=log", "method=kerple kerple=power", "method=fire fire_init_L=8", "method=fope",
    "method=fope fope_num_freq=1", "method=cope npos_max=4", "method=data_alibi", "method=complex",
    "method=rope rope_scaling=proportional rope_proportion=0.5 rope_base=1000000",
    "method=rope attention_sinks=true", "method=alibi attention_sinks=true",
};
enum { NSET = sizeof SETTINGS / sizeof SETTINGS[0], MAXB = 3, MAXN = 40, REC = 8 };

static const int64_t HOSTILE[] = {INT64_MAX, INT64_MIN, INT64_MAX - 1, (int64_t)1 << 53, ((int64_t)1 << 53) + 1,
                                  -((int64_t)1 << 53) - 1, (int64_t)1 << 62, -1, (int64_t)1 << 20};

typedef struct shadow {
    int64_t len[MAXB], pos[MAXB][MAXN];
    float *k[MAXB], *v[MAXB]; /* raw, MAXN x Ckv */
} shadow;

/* the cache's lengths and positions are the shadow's */
static void same_state(const pe_kv_cache *c, const shadow *s, int64_t B) {
    for (int64_t b = 0; b < B; b++) {
        const int64_t *pos = NULL;
        int64_t n = 0;
        pe_err err;
        if (pe_kv_cache_length(c, b) != s->len[b] || pe_kv_cache_view(c, b, NULL, NULL, &pos, &n, &err) ||
            n != s->len[b] || (n && memcmp(pos, s->pos[b], sizeof(int64_t) * (size_t)n))) {
            for (int64_t u = 0; u < n && u < s->len[b]; u++)
                fprintf(stderr, "row %lld token %lld: cache %lld, shadow %lld\n", (long long)b, (long long)u,
                        (long long)pos[u], (long long)s->pos[b][u]);
            BROKEN();
        }
    }
}

static float *rand_floats(pe_rng *r, int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = 2 * pe_rng_uniform(r) - 1;
    return x;
}

static double maxabs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(a[i])) m = fmax(m, fabs(a[i]));
    return m;
}

/* o of the cache against the projected form over the shadow (query positions qpos, q_lens) */
static void compare_attend(pe_attention *ref, const pe_weights *w, const shadow *s, int64_t B, int64_t H, int64_t Ckv,
                           const float *q, int64_t T, const int64_t *qpos, const int64_t *q_lens, const uint8_t *mask,
                           const float *o) {
    int64_t Tk = 1, klen[MAXB], kpos[MAXB * MAXN];
    for (int64_t b = 0; b < B; b++) Tk = s->len[b] > Tk ? s->len[b] : Tk;
    float *k = calloc((size_t)(B * Tk * Ckv), sizeof(float)), *v = calloc((size_t)(B * Tk * Ckv), sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        klen[b] = s->len[b] ? s->len[b] : 1;
        for (int64_t u = 0; u < Tk; u++) kpos[b * Tk + u] = u < s->len[b] ? s->pos[b][u] : s->len[b] ? s->pos[b][0] : 0;
        memcpy(k + b * Tk * Ckv, s->k[b], sizeof(float) * (size_t)(s->len[b] * Ckv));
        memcpy(v + b * Tk * Ckv, s->v[b], sizeof(float) * (size_t)(s->len[b] * Ckv));
    }
    const int64_t C = pe_attention_config(ref)->heads * pe_attention_head_dim(ref);
    float *want = malloc(sizeof(float) * (size_t)(B * T * C)), *scores = malloc(sizeof(float) * (size_t)(B * H * T * Tk));
    pe_positions at = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1, .mask = mask,
                       .mask_batched = 1, .q_lens = q_lens, .k_lens = klen};
    pe_err err;
    if (pe_attention_forward_qkv(ref, w, q, k, v, B, T, Tk, &at, want, scores, NULL, &err)) BROKEN();
    const double cond = fmax(1.0, maxabs(scores, B * H * T * Tk) / 32), sc = fmax(1.0, maxabs(want, B * T * C));
    for (int64_t i = 0; i < B * T * C; i++)
        if (!(fabs((double)o[i] - want[i]) <= cond * (1e-4 * sc + 1e-3 * fabs(want[i])))) BROKEN();
    free(k), free(v), free(want), free(scores);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5 || size > 5 + 64 * REC) return 0;
    const char *settings = SETTINGS[data[0] % NSET];
    const int64_t B = 1 + data[1] % MAXB, H = 1 + (data[1] >> 2) % 3, D = 2 * (1 + (data[1] >> 4) % 4);
    const int gqa = (data[2] & 1) && H > 1, causal = (data[2] >> 1) & 1, path = (data[2] >> 2) % 3;
    const int64_t kvh = gqa ? 1 : H, maxt = 1 + data[3] % MAXN, Ckv = kvh * D, C = H * D;
    pe_attention *att = fuzz_layer(settings, H, kvh, causal, D), *ref = fuzz_layer(settings, H, kvh, causal, D);
    pe_layer L;
    pe_err err;
    pe_kv_cache *c = NULL;
    if (!att || !ref || pe_layer_init(&L, att, 64, data[4], &err)) {
        pe_attention_free(att), pe_attention_free(ref);
        return 0;
    }
    pe_attention_set_run_options(att, &(pe_run_options){.path = path, .threads = 1});
    pe_method_info mi;
    pe_method_describe(pe_attention_config(att)->method, &mi, &err);
    if (pe_kv_cache_init(&c, att, B, maxt, &err)) goto done;
    shadow s;
    memset(&s, 0, sizeof s);
    for (int64_t b = 0; b < B; b++) s.k[b] = calloc((size_t)(MAXN * Ckv), sizeof(float)), s.v[b] = calloc((size_t)(MAXN * Ckv), sizeof(float));
    int opaque = !mi.projected; /* outputs the shadow cannot check */
    /* floater integrates its ODE up to each position (RK4 steps of floater_step), xl tabulates
     * every distance: far positions only time out there */
    const int near = !strcmp(mi.name, "floater") || !strcmp(mi.name, "xl");
    pe_rng rng = {data[4] + 1};
    const int trace = getenv("FUZZ_TRACE") != NULL; /* each call and its outcome, for a finding */
    for (size_t at = 5; at + REC <= size; at += REC) {
        const uint8_t *r = data + at;
        err.msg[0] = 0;
        if (r[0] % 5 == 0) { /* append n tokens */
            const int64_t n = 1 + r[1] % 6;
            int64_t pos[MAXB * 6], lens[MAXB], *pp = NULL;
            const int mode = r[2] % 4 == 3 && near ? 1 : r[2] % 4, batched = mode == 2, use_lens = r[5] & 1;
            for (int64_t b = 0; b < B; b++) lens[b] = (r[6] >> (2 * b)) % (n + 1);
            for (int64_t b = 0; b < (batched ? B : 1); b++)
                for (int64_t t = 0; t < n; t++)
                    pos[b * n + t] = mode == 3 ? (int64_t)((uint64_t)HOSTILE[r[3] % 9] + (uint64_t)(r[4] & 1 ? -t : t)) : (near ? r[3] % 16 : r[3]) + 7 * b + t * (1 + r[4] % 3);
            if (mode) pp = pos;
            float *k = rand_floats(&rng, B * n * Ckv), *v = rand_floats(&rng, B * n * Ckv);
            if (!pe_kv_cache_append(c, &L.w, k, v, n, pp, batched, use_lens ? lens : NULL, &err)) {
                for (int64_t b = 0; b < B; b++) {
                    const int64_t nb = use_lens ? lens[b] : n;
                    if (s.len[b] + nb > maxt) BROKEN();
                    for (int64_t t = 0; t < nb; t++) {
                        const int64_t p = pp ? pp[(batched ? b * n : 0) + t] : (s.len[b] ? s.pos[b][s.len[b] - 1] + 1 : 0) + t;
                        if (p > (1 << 20) || p < -(1 << 20)) opaque = 1;
                        s.pos[b][s.len[b] + t] = p;
                    }
                    memcpy(s.k[b] + s.len[b] * Ckv, k + b * n * Ckv, sizeof(float) * (size_t)(nb * Ckv));
                    memcpy(s.v[b] + s.len[b] * Ckv, v + b * n * Ckv, sizeof(float) * (size_t)(nb * Ckv));
                    s.len[b] += nb;
                }
            }
            free(k), free(v);
        } else if (r[0] % 5 == 1) { /* attend T queries */
            const int64_t T = 1 + r[1] % 3;
            int64_t Tk = 0, qlens[MAXB], qpos[MAXB * 3], given[MAXB * 3];
            for (int64_t b = 0; b < B; b++) Tk = s.len[b] > Tk ? s.len[b] : Tk, qlens[b] = (r[3] >> (2 * b)) % (T + 1);
            const int use_qlens = r[2] & 1, use_pos = r[2] & 2, use_mask = (r[2] & 4) && Tk;
            for (int64_t i = 0; i < B * T; i++) given[i] = r[4] + i % T;
            uint8_t *mask = use_mask ? malloc((size_t)(B * T * Tk)) : NULL;
            for (int64_t i = 0; mask && i < B * T * Tk; i++) mask[i] = (r[5] >> (i % 8)) & 1 || i % 3 == 0;
            float *q = rand_floats(&rng, B * T * C), *o = malloc(sizeof(float) * (size_t)(B * T * C));
            pe_positions ap = {.pos = use_pos ? given : NULL, .pos_batched = 1, .mask = mask, .mask_batched = 1,
                               .q_lens = use_qlens ? qlens : NULL};
            if (!pe_kv_cache_attend(c, &L.w, q, T, &ap, o, &err)) {
                for (int64_t i = 0; i < B * T * C; i++)
                    if (!isfinite(o[i])) BROKEN(); /* a non-finite result is an error, never an output */
                for (int64_t b = 0; b < B; b++) {
                    const int64_t nq = use_qlens ? qlens[b] : T, len = s.len[b];
                    for (int64_t t = 0; t < T; t++)
                        qpos[b * T + t] = t >= nq ? (len ? s.pos[b][0] : 0) : use_pos ? given[b * T + t] : s.pos[b][len - nq + t];
                }
                if (!opaque) compare_attend(ref, &L.w, &s, B, H, Ckv, q, T, qpos, use_qlens ? qlens : NULL, mask, o);
            }
            free(q), free(o), free(mask);
        } else if (r[0] % 5 == 2) { /* context shift */
            int64_t keep = r[1] % 8, n_drop = r[2] % 8, delta = r[3] % 4 == 0 ? n_drop : r[3] % 4 == 1 ? 0 : (int8_t)r[4];
            if (r[3] % 4 == 3 && !near) delta = HOSTILE[r[4] % 9];
            if (r[5] == 255) keep = INT64_MAX;
            if (r[6] == 255) n_drop = INT64_MAX;
            if (!pe_kv_cache_shift(c, &L.w, keep, n_drop, delta, &err))
                for (int64_t b = 0; b < B; b++) {
                    if (!s.len[b]) continue;
                    if (keep > s.len[b] || n_drop > s.len[b] - keep) BROKEN();
                    const int64_t rest = s.len[b] - keep - n_drop;
                    memmove(s.pos[b] + keep, s.pos[b] + keep + n_drop, sizeof(int64_t) * (size_t)rest);
                    memmove(s.k[b] + keep * Ckv, s.k[b] + (keep + n_drop) * Ckv, sizeof(float) * (size_t)(rest * Ckv));
                    memmove(s.v[b] + keep * Ckv, s.v[b] + (keep + n_drop) * Ckv, sizeof(float) * (size_t)(rest * Ckv));
                    for (int64_t u = keep; u < keep + rest; u++) {
                        s.pos[b][u] -= delta;
                        if (s.pos[b][u] > (1 << 20) || s.pos[b][u] < -(1 << 20)) opaque = 1;
                    }
                    s.len[b] = keep + rest;
                }
        } else if (r[0] % 5 == 3) {
            pe_kv_cache_clear(c);
            for (int64_t b = 0; b < B; b++) s.len[b] = 0;
        } else { /* the whole layer: the cache's keys are the layer's, unknown to the shadow */
            const int64_t T = 1 + r[1] % 3;
            float *x = rand_floats(&rng, B * T * C), *y = malloc(sizeof(float) * (size_t)(B * T * C));
            if (!pe_kv_cache_layer_forward(c, &L.w, x, T, NULL, 0, NULL, y, &err)) {
                opaque = 1;
                for (int64_t b = 0; b < B; b++) {
                    if (s.len[b] + T > maxt) BROKEN();
                    for (int64_t t = 0; t < T; t++, s.len[b]++) s.pos[b][s.len[b]] = s.len[b] ? s.pos[b][s.len[b] - 1] + 1 : 0;
                }
                for (int64_t i = 0; i < B * T * C; i++)
                    if (!isfinite(y[i])) BROKEN();
            }
            free(x), free(y);
        }
        if (trace) {
            fprintf(stderr, "op %d [%d %d %d %d %d %d %d]: %s; lengths", r[0] % 5, r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                    err.msg[0] ? err.msg : "ok");
            for (int64_t b = 0; b < B; b++) fprintf(stderr, " %lld/%lld", (long long)pe_kv_cache_length(c, b), (long long)s.len[b]);
            fprintf(stderr, "\n");
            for (int64_t b = 0; b < B; b++) {
                const int64_t *vp;
                int64_t vn;
                if (pe_kv_cache_view(c, b, NULL, NULL, &vp, &vn, &err)) continue;
                fprintf(stderr, "  row %lld:", (long long)b);
                for (int64_t u = 0; u < vn; u++) fprintf(stderr, " %lld", (long long)vp[u]);
                fprintf(stderr, "\n");
            }
        }
        same_state(c, &s, B);
    }
    for (int64_t b = 0; b < B; b++) free(s.k[b]), free(s.v[b]);
done:
    pe_kv_cache_free(c);
    pe_layer_free(&L);
    pe_attention_free(att), pe_attention_free(ref);
    return 0;
}
