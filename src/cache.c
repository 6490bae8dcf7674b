/* A KV cache over one attention layer: keys and values of past tokens at their positions,
 * attended by new queries through the projected-form core (pe__attention_attend_kv: the
 * decode path reads the cache in place).
 *
 * What a method does to q and k outside the core happens once per token: methods with a rotate
 * hook (rope, xpos: rotations; floater: added terms) transform keys and values on append and
 * queries on attend, and the core, told that its q, k, v are transformed already, runs the
 * rest of the layer (plain attention for them); methods on the input embedding (sinusoidal,
 * learned) have no projected form either: pe_kv_cache_layer_forward adds their encoding to x,
 * and the core attends the same way. Every other method attends with its own terms at the
 * cached positions.
 *
 * Frames. A rotation depends on the attention's range of positions [lo, hi] (dynamic NTK and
 * LongRoPE choose frequencies from hi + 1, xPos centres its scale on the range), which grows
 * with the cache. The cache keeps its keys rotated in one frame, rotates queries in the same,
 * and when the method says a new range needs another frame (rotary_frame hook) re-rotates every
 * cached key from the old to the new frame by the difference of the two rotations, formed in
 * double (rotary_angle hook) and applied once: the keys then equal keys rotated from scratch
 * to float32 rounding, at any position. Context shifts re-rotate the same way.
 *
 * Multi-axis positions (rope with rope_sections: M-RoPE's (time, row, column)): a token holds A
 * positions, pair t of a key rotates at its axis's one (pe_rope_pair_axes), and re-rotation takes
 * each pair's difference on its own axis; the positions' range [lo, hi] is over every axis. A
 * shift moves each axis by its own delta (pe_kv_cache_shift_axes; pe_kv_cache_shift: every axis).
 *
 * Storage: (B, cap, Ckv) for k and v and (B, cap, A) positions, cap doubling up to max_tokens, so
 * growth copies each token O(1) times. */
#include "rotary/rotary.h"

struct pe_kv_cache {
    pe_attention *att;   /* the caller's layer */
    const pe__method *m;
    int transform; /* the method transforms q, k, v (rotate hook): on append and attend */
    int rotary;    /* ... by rotations that have frames (rotary_angle, rotary_frame) */
    int64_t B, cap, max, H, Hkv, D, C, Ckv;
    int64_t A;     /* position axes per token (rope_sections), 1 for the others */
    float *k, *v;  /* (B, cap, Ckv) */
    int64_t *pos;  /* (B, cap, A) */
    int64_t *len;  /* (B) */
    int64_t *top;  /* (B) each row's largest position on any axis (where it holds tokens): where an
                      unplaced token of a multi-axis row goes */
    int64_t frame[2];
    int have_frame;
    int64_t lo, hi; /* the cached positions' range (lo > hi: empty), kept on append, remade on shift */
    /* scratch of the calls */
    float *q;      /* (B, T, C) transformed queries */
    size_t q_cap;
    int64_t *kpos; /* (B, Tk, A) key positions, then (B, T, A) query positions */
    size_t kpos_cap;
    float *layer;  /* pe_kv_cache_layer_forward: x', q, o (B, T, C), k, v (B, T, Ckv) */
    size_t layer_cap;
    int64_t *lpos; /* its tokens' positions (B, T) */
    size_t lpos_cap;
};

/* Whether n tokens per row of the cache's B rows (each of `width` floats and a position) stay
 * far from any size overflow: every size below is B n (width + 1) elements at most. */
static int tokens_fit(const pe_kv_cache *c, int64_t n, int64_t width) {
    return n >= 0 && (double)c->B * (double)n * (double)(width + 1) * 8.0 < (double)INT64_MAX / 4;
}

static pe_status grow_scratch(void **p, size_t *cap, size_t need, size_t elem, pe_err *err) {
    if (need <= *cap) return PE_OK;
    void *n = realloc(*p, need * elem);
    if (!n) return pe_error(err, PE_ENOMEM, "out of memory for the cache's scratch");
    *p = n, *cap = need;
    return PE_OK;
}

pe_status pe_kv_cache_init(pe_kv_cache **out, pe_attention *att, int64_t B, int64_t max_tokens, pe_err *err) {
    *out = NULL;
    if (!att || B < 1 || max_tokens < 1)
        return pe_error(err, PE_EINVAL, "kv_cache: need a layer, batch >= 1 and max_tokens >= 1 (got %lld, %lld)",
                        (long long)B, (long long)max_tokens);
    const pe__method *m = pe__attention_method(att);
    if (m->flags & PE__COMPLEX)
        return pe_error(err, PE_EINVAL, "kv_cache: method %s is complex-valued (token ids, two streams): it has no KV cache",
                        m->name);
    if (m->flags & PE__LAYER_INPUT)
        return pe_error(err, PE_EINVAL, "kv_cache: method %s computes its terms from the layer input x of every token, "
                        "which a cache of keys and values does not hold: it has no KV cache", m->name);
    const int64_t A = pe_attention_axes(att, NULL);
    if (A < m->axes_min)
        return pe_error(err, PE_EINVAL, "kv_cache: method %s reads as many position axes as rows of its tensor, which the "
                        "cache does not know before it is given (rope with rope_sections has a cache)", m->name);
    const pe_config *cfg = pe_attention_config(att);
    const int64_t H = cfg->heads, Hkv = cfg->kv_heads, D = pe_attention_head_dim(att);
    if ((double)B * (double)max_tokens * (double)(Hkv * D) * 2 > (double)(INT64_MAX / 8))
        return pe_error(err, PE_EINVAL, "kv_cache: %lld rows of %lld tokens overflow the sizes", (long long)B,
                        (long long)max_tokens);
    pe_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return pe_error(err, PE_ENOMEM, "out of memory");
    *c = (pe_kv_cache){.att = att, .m = m, .B = B, .max = max_tokens, .H = H, .Hkv = Hkv, .D = D, .C = H * D,
                       .Ckv = Hkv * D, .A = A, .lo = INT64_MAX, .hi = INT64_MIN};
    c->transform = m->rotate_forward != NULL;
    c->rotary = c->transform && m->rotary_angle && m->rotary_frame;
    c->len = calloc((size_t)(2 * B), sizeof(int64_t));
    c->top = c->len + B;
    if (!c->len) {
        free(c);
        return pe_error(err, PE_ENOMEM, "out of memory");
    }
    *out = c;
    return PE_OK;
}

void pe_kv_cache_free(pe_kv_cache *c) {
    if (!c) return;
    free(c->k), free(c->v), free(c->pos), free(c->len), free(c->q), free(c->kpos), free(c->layer), free(c->lpos);
    free(c);
}

void pe_kv_cache_clear(pe_kv_cache *c) {
    memset(c->len, 0, sizeof(int64_t) * (size_t)c->B);
    c->have_frame = 0;
    c->lo = INT64_MAX, c->hi = INT64_MIN;
}

int64_t pe_kv_cache_length(const pe_kv_cache *c, int64_t b) { return b >= 0 && b < c->B ? c->len[b] : -1; }
int64_t pe_kv_cache_axes(const pe_kv_cache *c) { return c->A; }

pe_status pe_kv_cache_view(const pe_kv_cache *c, int64_t b, const float **k, const float **v, const int64_t **pos,
                           int64_t *n, pe_err *err) {
    if (b < 0 || b >= c->B) return pe_error(err, PE_EINVAL, "kv_cache: row %lld of %lld", (long long)b, (long long)c->B);
    if (k) *k = c->k ? c->k + b * c->cap * c->Ckv : NULL;
    if (v) *v = c->v ? c->v + b * c->cap * c->Ckv : NULL;
    if (pos) *pos = c->pos ? c->pos + b * c->cap * c->A : NULL;
    if (n) *n = c->len[b];
    return PE_OK;
}

/* Room for `need` tokens per row: cap doubles (at most max), rows copied once per doubling. */
static pe_status reserve(pe_kv_cache *c, int64_t need, pe_err *err) {
    if (need <= c->cap) return PE_OK;
    int64_t cap = c->cap ? c->cap : 64;
    while (cap < need) cap *= 2;
    if (cap > c->max) cap = c->max;
    const int64_t B = c->B, Ckv = c->Ckv;
    /* zeroed: the reference path multiplies a padding key's value by p = 0, which must be finite */
    float *k = calloc((size_t)(B * cap * Ckv), sizeof(float)), *v = calloc((size_t)(B * cap * Ckv), sizeof(float));
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(B * cap * c->A));
    if (!k || !v || !pos) {
        free(k), free(v), free(pos);
        return pe_error(err, PE_ENOMEM, "out of memory for a cache of %lld x %lld tokens", (long long)B, (long long)cap);
    }
    for (int64_t b = 0; b < B && c->cap; b++) {
        memcpy(k + b * cap * Ckv, c->k + b * c->cap * Ckv, sizeof(float) * (size_t)(c->len[b] * Ckv));
        memcpy(v + b * cap * Ckv, c->v + b * c->cap * Ckv, sizeof(float) * (size_t)(c->len[b] * Ckv));
        memcpy(pos + b * cap * c->A, c->pos + b * c->cap * c->A, sizeof(int64_t) * (size_t)(c->len[b] * c->A));
    }
    free(c->k), free(c->v), free(c->pos);
    c->k = k, c->v = v, c->pos = pos, c->cap = cap;
    return PE_OK;
}

/* Remakes the cached positions' range (lo > hi when the cache is empty): after a shift. */
static void remake_range(pe_kv_cache *c) {
    c->lo = INT64_MAX, c->hi = INT64_MIN;
    for (int64_t b = 0; b < c->B; b++) {
        c->top[b] = INT64_MIN;
        for (int64_t u = 0; u < c->len[b] * c->A; u++) {
            int64_t p = c->pos[b * c->cap * c->A + u];
            c->lo = p < c->lo ? p : c->lo, c->hi = p > c->hi ? p : c->hi;
            c->top[b] = p > c->top[b] ? p : c->top[b];
        }
    }
}

/* Re-rotates the cached keys of every row from frame `from` to frame `to`: key u of row b moves
 * from positions old[(b cap + u) A ..] to c->pos[(b cap + u) A ..] (old NULL: the same). Uniform
 * (same frame, one shift per axis for every moved key): one table of R(-d theta), keys from
 * `first` on. Otherwise per key: R(p_new theta_new - p_old theta_old) times scale_new / scale_old,
 * in double, each pair at its own axis's positions (the rotary_angle hook picks it). */
static pe_status rerotate(pe_kv_cache *c, const pe_weights *w, const int64_t from[2], const int64_t to[2],
                          const int64_t *old, int64_t first, pe_err *err) {
    enum { CHUNK = 256 };
    pe__ctx co, cn;
    int64_t probe_o[PE_MAX_AXES], probe_n[PE_MAX_AXES], rd;
    const int64_t A = c->A;
    for (int64_t a = 0; a < A; a++) probe_o[a] = from[0], probe_n[a] = to[0];
    int layout;
    pe_status st = pe__attention_context(c->att, w, 1, probe_o, from[0], from[1], &co, err);
    if (st) return st;
    if ((st = pe__attention_context(c->att, w, 1, probe_n, to[0], to[1], &cn, err))) {
        pe__attention_release(c->att, &co);
        return st;
    }
    c->m->rotary_table(&cn, PE_ROTATE_K, &rd, &layout);
    const int64_t half = rd / 2, uniform = from[0] == to[0] && from[1] == to[1];
    const int rope_values = pe_attention_config(c->att)->rope_values;
    const pe_run_options *run = pe__attention_run(c->att);
    float *cs = malloc(sizeof(float) * (size_t)(CHUNK * half * 2));
    if (!cs) st = pe_error(err, PE_ENOMEM, "out of memory for the re-rotation table");
    for (int64_t b = 0; b < c->B && !st; b++) {
        const int64_t n = c->len[b], *pn = c->pos + b * c->cap * A, *po = old ? old + b * c->cap * A : pn;
        const int64_t off = b * c->cap * c->Ckv + pe_attention_config(c->att)->rotary_offset; /* the rotated slice */
        float *const kv[2] = {c->k + off, rope_values ? c->v + off : NULL}; /* rope_values: v rotated as k */
        if (uniform) { /* the same rotation for every key from `first`: rows of CHUNK keys' heads */
            if (first >= n || !memcmp(po + first * A, pn + first * A, sizeof(int64_t) * (size_t)A)) continue;
            for (int64_t t = 0; t < half; t++) {
                double ao, so, an, sn;
                c->m->rotary_angle(&co, PE_ROTATE_K, po + first * A, t, &ao, &so);
                c->m->rotary_angle(&cn, PE_ROTATE_K, pn + first * A, t, &an, &sn);
                cs[2 * t] = (float)(cos(an - ao) * (sn / so)), cs[2 * t + 1] = (float)(sin(an - ao) * (sn / so));
            }
            for (int64_t r = 1; r < CHUNK; r++) memcpy(cs + r * half * 2, cs, sizeof(float) * (size_t)(half * 2));
            for (int64_t u0 = first; u0 < n; u0 += CHUNK * CHUNK) /* CHUNK rows of CHUNK keys per call */
                for (int x = 0; x < 2 && kv[x]; x++) {
                    float *k = kv[x];
                    const int64_t nu = n - u0 < CHUNK * CHUNK ? n - u0 : CHUNK * CHUNK, full = nu / CHUNK, rest = nu % CHUNK;
                    if (full) pe__rope_rotate(run, k + u0 * c->Ckv, full, CHUNK * c->Ckv, CHUNK * c->Hkv, c->D, rd, layout, cs, 1.0f);
                    if (rest)
                        pe__rope_rotate(run, k + (u0 + full * CHUNK) * c->Ckv, 1, rest * c->Ckv, rest * c->Hkv, c->D, rd,
                                        layout, cs, 1.0f);
                }
            continue;
        }
        for (int64_t u0 = 0; u0 < n; u0 += CHUNK) {
            const int64_t nu = n - u0 < CHUNK ? n - u0 : CHUNK;
            for (int64_t u = 0; u < nu; u++)
                for (int64_t t = 0; t < half; t++) {
                    double ao, so, an, sn;
                    c->m->rotary_angle(&co, PE_ROTATE_K, po + (u0 + u) * A, t, &ao, &so);
                    c->m->rotary_angle(&cn, PE_ROTATE_K, pn + (u0 + u) * A, t, &an, &sn);
                    float *e = cs + (u * half + t) * 2;
                    e[0] = (float)(cos(an - ao) * (sn / so)), e[1] = (float)(sin(an - ao) * (sn / so));
                }
            for (int x = 0; x < 2 && kv[x]; x++) pe__rope_rotate(run, kv[x] + u0 * c->Ckv, nu, c->Ckv, c->Hkv, c->D, rd, layout, cs, 1.0f);
        }
    }
    free(cs);
    pe__attention_release(c->att, &co);
    pe__attention_release(c->att, &cn);
    return st;
}

/* The frame for an attention over [lo, hi]: the current one unless the method needs another,
 * then every cached key is re-rotated into the new one. Methods without frames (floater) take
 * [lo, hi] as it is. */
static pe_status frame_for(pe_kv_cache *c, const pe_weights *w, int64_t lo, int64_t hi, pe_err *err) {
    if (!c->rotary || !c->have_frame) {
        c->frame[0] = lo, c->frame[1] = hi, c->have_frame = 1;
        return PE_OK;
    }
    if (!c->m->rotary_frame(pe_attention_config(c->att), c->D, c->frame, lo, hi)) return PE_OK;
    const int64_t to[2] = {lo, hi};
    pe_status st = rerotate(c, w, c->frame, to, NULL, 0, err);
    if (!st) c->frame[0] = lo, c->frame[1] = hi;
    return st;
}

/* Where row b's next token goes by default: after its last (one axis), or, with A axes, at the
 * row's largest position + 1 on every axis (Qwen2-VL's get_rope_index: text after an image
 * continues from its largest position); 0 for an empty row. */
static int64_t next_position(const pe_kv_cache *c, int64_t b) {
    const int64_t len = c->len[b];
    if (!len) return 0; /* and no storage yet, maybe */
    return c->A == 1 ? c->pos[b * c->cap + len - 1] + 1 : c->top[b] + 1;
}

/* Positions of n new tokens of each row (given, or following the row's last), into c->kpos
 * (B, n, A). */
static pe_status new_positions(pe_kv_cache *c, int64_t n, const int64_t *pos, int pos_batched, const int64_t *lens,
                               int64_t *lo, int64_t *hi, pe_err *err) {
    const int64_t A = c->A;
    pe_status st = grow_scratch((void **)&c->kpos, &c->kpos_cap, (size_t)(c->B * n * A), sizeof(int64_t), err);
    if (st) return st;
    *lo = c->lo, *hi = c->hi;
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t nb = lens ? lens[b] : n, len = c->len[b];
        if (nb < 0 || nb > n)
            return pe_error(err, PE_EINVAL, "kv_cache: row %lld appends %lld of %lld tokens", (long long)b, (long long)nb,
                            (long long)n);
        if (len + nb > c->max)
            return pe_error(err, PE_EINVAL, "kv_cache full: row %lld holds %lld of max_tokens %lld; %lld more do not fit "
                            "(pe_kv_cache_shift drops tokens)", (long long)b, (long long)len, (long long)c->max, (long long)nb);
        const int64_t next = next_position(c, b);
        for (int64_t t = 0; t < n; t++)
            for (int64_t a = 0; a < A; a++) {
                int64_t p = pos ? pos[((pos_batched ? b * n : 0) + t) * A + a] : next + t;
                if (t >= nb) p = nb ? c->kpos[b * n * A + a] : (len ? c->pos[b * c->cap * A + a] : 0); /* padding: a real one */
                if (t < nb && (p < -PE_MAX_POSITION || p > PE_MAX_POSITION))
                    return pe_error(err, PE_EPOS, "kv_cache: row %lld: position %lld of token %lld is outside +-2^53",
                                    (long long)b, (long long)p, (long long)t);
                c->kpos[(b * n + t) * A + a] = p;
                if (t < nb) *lo = p < *lo ? p : *lo, *hi = p > *hi ? p : *hi;
            }
    }
    return PE_OK;
}

pe_status pe_kv_cache_append(pe_kv_cache *c, const pe_weights *w, const float *k, const float *v, int64_t n,
                             const int64_t *pos, int pos_batched, const int64_t *lens, pe_err *err) {
    if (!k || !v || n < 1) return pe_error(err, PE_EINVAL, "kv_cache_append: need k, v and n >= 1 tokens");
    if (!tokens_fit(c, n, c->Ckv))
        return pe_error(err, PE_EINVAL, "kv_cache_append: %lld tokens per row of %lld rows overflow the sizes", (long long)n,
                        (long long)c->B);
    int64_t lo, hi, most = 0;
    pe_status st = new_positions(c, n, pos, pos_batched, lens, &lo, &hi, err);
    if (st) return st;
    for (int64_t b = 0; b < c->B; b++) most = c->len[b] + (lens ? lens[b] : n) > most ? c->len[b] + (lens ? lens[b] : n) : most;
    if (lo > hi) return PE_OK; /* nothing to append */
    if ((st = reserve(c, most, err))) return st;
    if (c->transform && (st = frame_for(c, w, lo, hi, err))) return st;
    const int64_t Ckv = c->Ckv;
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t nb = lens ? lens[b] : n, at = b * c->cap + c->len[b];
        if (!nb) continue;
        float *kd = c->k + at * Ckv, *vd = c->v + at * Ckv;
        memcpy(kd, k + b * n * Ckv, sizeof(float) * (size_t)(nb * Ckv));
        memcpy(vd, v + b * n * Ckv, sizeof(float) * (size_t)(nb * Ckv));
        if (c->transform &&
            (st = pe__attention_apply(c->att, w, nb, c->kpos + b * n * c->A, c->frame[0], c->frame[1], NULL, NULL, kd, vd,
                                      err)))
            return st; /* nothing counted: the row's length is unchanged */
        memcpy(c->pos + at * c->A, c->kpos + b * n * c->A, sizeof(int64_t) * (size_t)(nb * c->A));
    }
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t nb = lens ? lens[b] : n, *p = c->kpos + b * n * c->A;
        if (nb && !c->len[b]) c->top[b] = INT64_MIN;
        for (int64_t e = 0; e < nb * c->A; e++) c->top[b] = p[e] > c->top[b] ? p[e] : c->top[b];
        c->len[b] += nb;
    }
    c->lo = lo < c->lo ? lo : c->lo, c->hi = hi > c->hi ? hi : c->hi;
    return PE_OK;
}

pe_status pe_kv_cache_attend(pe_kv_cache *c, const pe_weights *w, const float *q, int64_t T, const pe_positions *at,
                             float *o, pe_err *err) {
    if (!q || !o || T < 1) return pe_error(err, PE_EINVAL, "kv_cache_attend: need q, o and T >= 1 queries");
    if (!tokens_fit(c, T, c->C + c->max))
        return pe_error(err, PE_EINVAL, "kv_cache_attend: %lld queries per row of %lld rows overflow the sizes", (long long)T,
                        (long long)c->B);
    if (at && (at->key_pos || at->k_lens))
        return pe_error(err, PE_EINVAL, "kv_cache_attend: the keys are the cache's (key_pos and k_lens must be NULL)");
    const int64_t B = c->B, C = c->C, A = c->A;
    if (at && at->pos && (at->axes > 1 ? at->axes : 1) != A)
        return pe_error(err, PE_EINVAL, "kv_cache_attend: positions of %lld axes, but the cache holds %lld per token",
                        (long long)(at->axes > 1 ? at->axes : 1), (long long)A);
    int64_t Tk = 0, lo, hi;
    for (int64_t b = 0; b < B; b++) Tk = c->len[b] > Tk ? c->len[b] : Tk;
    if (!Tk) return pe_error(err, PE_EINVAL, "kv_cache_attend: the cache is empty (append the keys first)");
    pe_status st = grow_scratch((void **)&c->kpos, &c->kpos_cap, (size_t)(B * (Tk + T) * A + B), sizeof(int64_t), err);
    if (!st && c->transform) st = grow_scratch((void **)&c->q, &c->q_cap, (size_t)(B * T * C), sizeof(float), err);
    if (st) return st;
    int64_t *kpos = c->kpos, *qpos = kpos + B * Tk * A, *klen = qpos + B * T * A;
    int lens = at && at->q_lens;
    lo = c->lo, hi = c->hi;
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = c->len[b], nq = at && at->q_lens ? at->q_lens[b] : T;
        klen[b] = len ? len : 1; /* an empty row without queries: one padding key */
        lens |= len != Tk;
        if (nq < 0 || nq > T) return pe_error(err, PE_EINVAL, "kv_cache_attend: row %lld has %lld of %lld queries", (long long)b, (long long)nq, (long long)T);
        if (!len && nq) return pe_error(err, PE_EINVAL, "kv_cache_attend: row %lld of the cache is empty", (long long)b);
        if (!(at && at->pos) && nq > len)
            return pe_error(err, PE_EINVAL, "kv_cache_attend: row %lld: %lld queries at the positions of its last tokens, but "
                            "it holds %lld (give positions)", (long long)b, (long long)nq, (long long)len);
        const int64_t *cp = c->pos + b * c->cap * A;
        for (int64_t u = 0; u < Tk; u++)
            for (int64_t a = 0; a < A; a++) kpos[(b * Tk + u) * A + a] = u < len ? cp[u * A + a] : len ? cp[a] : 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t a = 0; a < A; a++) {
                int64_t p = t >= nq ? (len ? cp[a] : 0)
                            : at && at->pos ? at->pos[((at->pos_batched ? b * T : 0) + t) * A + a] : cp[(len - nq + t) * A + a];
                qpos[(b * T + t) * A + a] = p;
                if (t < nq) lo = p < lo ? p : lo, hi = p > hi ? p : hi;
            }
    }
    const float *qa = q;
    if (c->transform) {
        if ((st = frame_for(c, w, lo, hi, err))) return st;
        memcpy(c->q, q, sizeof(float) * (size_t)(B * T * C));
        if ((st = pe__attention_apply(c->att, w, B * T, qpos, c->frame[0], c->frame[1], NULL, c->q, NULL, NULL, err)))
            return st;
        qa = c->q;
    }
    pe_positions cat = {.pos = qpos, .pos_batched = 1, .key_pos = kpos, .key_pos_batched = 1,
                        .mask = at ? at->mask : NULL, .mask_batched = at ? at->mask_batched : 0,
                        .q_lens = lens && at ? at->q_lens : NULL, .k_lens = lens ? klen : NULL, .axes = A};
    const int transformed = c->transform || (c->m->flags & PE__INPUT);
    st = pe__attention_attend_kv(c->att, w, qa, c->k, c->v, c->cap * c->Ckv, NULL, B, T, Tk, &cat, transformed, o, err);
    /* the output stage at the queries' positions, in the frame they were rotated in */
    if (!st && c->transform) st = pe__attention_output(c->att, w, B * T, qpos, c->frame[0], c->frame[1], o, err);
    return st;
}

pe_status pe_kv_cache_layer_forward(pe_kv_cache *c, const pe_weights *w, const float *x, int64_t T, const int64_t *pos,
                                    int pos_batched, const int64_t *lens, float *y, pe_err *err) {
    if (!x || !y || T < 1 || !w || !w->wq || !w->wk || !w->wv || !w->wo)
        return pe_error(err, PE_EINVAL, "kv_cache_layer_forward: need x, y, T >= 1 and the weights wq, wk, wv, wo");
    if (!tokens_fit(c, T, 3 * c->C + 2 * c->Ckv + c->max))
        return pe_error(err, PE_EINVAL, "kv_cache_layer_forward: %lld tokens per row of %lld rows overflow the sizes",
                        (long long)T, (long long)c->B);
    const int64_t B = c->B, C = c->C, Ckv = c->Ckv, N = B * T;
    int64_t lo, hi;
    pe_status st = new_positions(c, T, pos, pos_batched, lens, &lo, &hi, err);
    if (st) return st;
    if ((st = grow_scratch((void **)&c->layer, &c->layer_cap, (size_t)(N * (3 * C + 2 * Ckv)), sizeof(float), err)) ||
        (st = grow_scratch((void **)&c->lpos, &c->lpos_cap, (size_t)(N * c->A), sizeof(int64_t), err)))
        return st;
    int64_t *p = c->lpos;
    memcpy(p, c->kpos, sizeof(int64_t) * (size_t)(N * c->A)); /* append reuses the scratch */
    float *xe = c->layer, *q = xe + N * C, *o = q + N * C, *k = o + N * C, *v = k + N * Ckv;
    memcpy(xe, x, sizeof(float) * (size_t)(N * C));
    if (lo > hi) lo = hi = p[0];
    st = pe__attention_apply(c->att, w, N, p, lo, hi, xe, NULL, NULL, NULL, err); /* x' = x + P[pos] */
    if (!st) {
        pe__linear_forward(q, xe, w->wq, w->bq, N, C, C);
        pe__linear_forward(k, xe, w->wk, w->bk, N, C, Ckv);
        pe__linear_forward(v, xe, w->wv, w->bv, N, C, Ckv);
        st = pe_kv_cache_append(c, w, k, v, T, p, 1, lens, err);
    }
    pe_positions at = {.pos = p, .pos_batched = 1, .q_lens = lens, .axes = c->A};
    if (!st && (st = pe_kv_cache_attend(c, w, q, T, &at, o, err))) { /* the tokens leave again: nothing changed */
        for (int64_t b = 0; b < B; b++) c->len[b] -= lens ? lens[b] : T;
        remake_range(c);
    }
    if (!st) pe__linear_forward(y, o, w->wo, w->bo, N, C, C);
    return st;
}

pe_status pe_kv_cache_shift(pe_kv_cache *c, const pe_weights *w, int64_t keep, int64_t n_drop, int64_t delta,
                            pe_err *err) {
    int64_t d[PE_MAX_AXES];
    for (int64_t a = 0; a < c->A; a++) d[a] = delta;
    return pe_kv_cache_shift_axes(c, w, keep, n_drop, d, err);
}

pe_status pe_kv_cache_shift_axes(pe_kv_cache *c, const pe_weights *w, int64_t keep, int64_t n_drop, const int64_t *delta,
                                 pe_err *err) {
    const int64_t A = c->A;
    if (keep < 0 || n_drop < 0 || !delta)
        return pe_error(err, PE_EINVAL, "kv_cache_shift: keep and n_drop must be >= 0, and delta given");
    int moved = 0;
    for (int64_t a = 0; a < A; a++) {
        if (delta[a] < -2 * PE_MAX_POSITION || delta[a] > 2 * PE_MAX_POSITION)
            return pe_error(err, PE_EPOS, "kv_cache_shift: delta %lld moves positions past +-2^53", (long long)delta[a]);
        moved |= delta[a] != 0;
    }
    for (int64_t b = 0; b < c->B; b++) { /* everything checked before anything moves */
        const int64_t len = c->len[b];
        if (len && (keep > len || n_drop > len - keep)) /* keep + n_drop > len, without overflow */
            return pe_error(err, PE_EINVAL, "kv_cache_shift: row %lld holds %lld tokens, fewer than keep %lld + n_drop %lld",
                            (long long)b, (long long)len, (long long)keep, (long long)n_drop);
        for (int64_t u = len ? keep + n_drop : 0; u < len; u++) /* an empty row checks nothing */
            for (int64_t a = 0; a < A; a++) {
                const int64_t p = c->pos[(b * c->cap + u) * A + a] - delta[a];
                if (p < -PE_MAX_POSITION || p > PE_MAX_POSITION)
                    return pe_error(err, PE_EPOS, "kv_cache_shift: row %lld: token %lld at %lld would move to %lld, outside "
                                    "+-2^53", (long long)b, (long long)u, (long long)(p + delta[a]), (long long)p);
            }
    }
    if (moved && c->transform && !c->rotary)
        return pe_error(err, PE_EINVAL, "kv_cache_shift: method %s adds position terms to the cached keys and values; "
                        "moving them needs the tokens appended again", c->m->name);
    int64_t lo = INT64_MAX, hi = INT64_MIN; /* the range after the shift */
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t u = 0, len = c->len[b]; u < len; u++) {
            if (u >= keep && u - keep < n_drop) continue; /* dropped */
            for (int64_t a = 0; a < A; a++) {
                const int64_t p = c->pos[(b * c->cap + u) * A + a] - (u >= keep ? delta[a] : 0);
                lo = p < lo ? p : lo, hi = p > hi ? p : hi;
            }
        }
    /* the frame the re-rotation will use, made once here: one the method cannot make (xPos's
     * scale past float range) refuses before anything moves */
    if (c->rotary && c->have_frame && lo <= hi) {
        const int moves = c->m->rotary_frame(pe_attention_config(c->att), c->D, c->frame, lo, hi);
        int64_t to[2] = {moves ? lo : c->frame[0], moves ? hi : c->frame[1]}, at[PE_MAX_AXES];
        for (int64_t a = 0; a < A; a++) at[a] = to[0];
        pe__ctx probe;
        pe_status st = pe__attention_context(c->att, w, 1, at, to[0], to[1], &probe, err);
        if (st) return st;
        pe__attention_release(c->att, &probe);
    }
    const int64_t Ckv = c->Ckv;
    int64_t *old = NULL;
    if (c->rotary && moved && !(old = malloc(sizeof(int64_t) * (size_t)(c->B * c->cap * A))))
        return pe_error(err, PE_ENOMEM, "out of memory for the shift");
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t len = c->len[b];
        if (!len) continue;
        float *k = c->k + b * c->cap * Ckv, *v = c->v + b * c->cap * Ckv;
        int64_t *p = c->pos + b * c->cap * A, rest = len - keep - n_drop;
        if (n_drop) {
            memmove(k + keep * Ckv, k + (keep + n_drop) * Ckv, sizeof(float) * (size_t)(rest * Ckv));
            memmove(v + keep * Ckv, v + (keep + n_drop) * Ckv, sizeof(float) * (size_t)(rest * Ckv));
            memmove(p + keep * A, p + (keep + n_drop) * A, sizeof(int64_t) * (size_t)(rest * A));
        }
        if (old) memcpy(old + b * c->cap * A, p, sizeof(int64_t) * (size_t)((len - n_drop) * A));
        for (int64_t u = keep; u < keep + rest; u++)
            for (int64_t a = 0; a < A; a++) p[u * A + a] -= delta[a];
        c->len[b] = keep + rest;
    }
    pe_status st = PE_OK;
    remake_range(c);
    if (c->rotary && c->have_frame && lo <= hi) {
        const int64_t to[2] = {lo, hi};
        if (c->m->rotary_frame(pe_attention_config(c->att), c->D, c->frame, lo, hi)) {
            st = rerotate(c, w, c->frame, to, old, 0, err);
            if (!st) c->frame[0] = lo, c->frame[1] = hi;
        } else if (old) {
            st = rerotate(c, w, c->frame, c->frame, old, keep, err);
        }
    }
    if (lo > hi) c->have_frame = 0;
    free(old);
    return st;
}
