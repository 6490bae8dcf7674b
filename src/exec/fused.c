/* The fused attention path: what the core (attention.c) runs in place of its per-(b, h)
 * score, bias, mask, softmax and value passes when no scores or probabilities are asked for
 * and the method's hooks allow it (pe__fused_eligible). Rotations ran before on the whole
 * q, k (and v); bias hooks are called per tile through their (i0, ni, j0, nj) interface, and
 * relative-row terms (pe__rel: shaw, huang) are computed per tile here (pe__frel_*).
 *
 * It takes the methods whose description says so (PE__FUSED).
 *
 * Forward: tiles of PE_BR queries x PE_BC keys with an online softmax (flash attention), so
 * memory stays linear in T: the row max m and 1/l of every query are saved (stats, 2 floats
 * per row and head) with o. Backward recomputes every tile from q, k, v and those statistics.
 *
 * Threads (OpenMP when the compiler has it; one thread otherwise, and inside another
 * parallel region): forward over (b, h, query block), backward over (b, kv head), each
 * thread owning the dk, dv rows of its kv head and the dq rows of its heads. The bias hooks'
 * and relative tables' parameter gradients go to private copies (through the thread's ctx->g) summed in a fixed
 * order at the end, so results do not depend on scheduling.
 *
 * Denormals: exp gives 0 below -87, so no p is denormal, but products of tiny p with the
 * other factors (ds = p (dp - delta), then ds k) still are, and each costs a microcode
 * assist: far ALiBi logits made the backward 1.6x slower. So the threads also set FTZ/DAZ
 * for the duration of the call (restoring the caller's MXCSR after); values below 1.2e-38
 * become 0, far below float32 resolution of any output. `posenc bench` measures both. */
#include "fused.h"

int pe__fused_eligible(const pe__method *m) { return (m->flags & PE__FUSED) != 0; }

/* The cost model of PE_PATH_AUTO, in nanoseconds of one forward and backward per (row, head):
 * the fused path pays for every tile it visits as if full (PE_BR x PE_BC entries, padding
 * included), the reference path for the T x Tk entries it holds. Per entry (a + b D): fused
 * 5.5 + 0.085 dp, reference 6.7 + 0.24 D, fitted to both paths' times at D = 16 and 64 and
 * T = 16 .. 512 (posenc bench, one thread, Xeon AVX-512 and the SkylakeX OpenBLAS): the
 * fused path wins from about T = Tk = 48 at D = 64 (T = 32: 2x slower, T = 16 with 32 heads:
 * 5x slower; T = 64: 1.2x faster, T = 512: 2.5x). The model orders the two paths, it does
 * not predict times; the reference path is never chosen for more than 2^24 scores (its
 * (B, H, T, Tk) buffers). */
int pe__fused_cheaper(int64_t B, int64_t H, int64_t T, int64_t Tk, int64_t qoff, int64_t D, pe__band band) {
    if ((double)B * H * T * Tk > (double)(1 << 24)) return 1;
    const int64_t dp = pe__round_up(D, PE_DALIGN);
    double tiles = 0;
    for (int64_t i0 = 0; i0 < T; i0 += PE_BR) { /* the key tiles the kernels visit (pe__band_tiles) */
        const int64_t ni = T - i0 < PE_BR ? T - i0 : PE_BR;
        int64_t j0, j1;
        pe__band_tiles(band, qoff, i0, ni, Tk, &j0, &j1);
        tiles += (double)((j1 - j0 + PE_BC - 1) / PE_BC);
    }
    const double fused = tiles * PE_BR * PE_BC * (5.5 + 0.085 * (double)dp);
    const double ref = (double)T * (double)Tk * (6.7 + 0.24 * (double)D);
    return fused <= ref;
}

/* tr (D, ldt) = src (n, D; row stride ld) transposed, by 4 x 4 blocks of 128-bit vectors (eight
 * shuffles where the scalar loop was a strided load per element), 16 keys at a time so that
 * their rows stay in L1; the edges not a multiple of 4 element by element. */
typedef float pe__v4 __attribute__((vector_size(16)));
typedef int32_t pe__i4 __attribute__((vector_size(16)));
#ifdef __clang__
#define PE_SHUF2(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define PE_SHUF2(a, b, i, j, k, l) __builtin_shuffle(a, b, (pe__i4){i, j, k, l})
#endif
static void transpose(float *tr, int64_t ldt, const float *src, int64_t ld, int64_t n, int64_t D) {
    const int64_t D4 = D / 4 * 4;
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const int64_t j1 = n - j0 < 16 ? n : j0 + 16, j4 = j0 + (j1 - j0) / 4 * 4;
        for (int64_t d = 0; d < D4; d += 4) {
            for (int64_t j = j0; j < j4; j += 4) {
                pe__v4 r[4], t[4];
                for (int k = 0; k < 4; k++) memcpy(&r[k], src + (j + k) * ld + d, sizeof r[k]);
                t[0] = PE_SHUF2(r[0], r[1], 0, 4, 1, 5), t[1] = PE_SHUF2(r[0], r[1], 2, 6, 3, 7);
                t[2] = PE_SHUF2(r[2], r[3], 0, 4, 1, 5), t[3] = PE_SHUF2(r[2], r[3], 2, 6, 3, 7);
                r[0] = PE_SHUF2(t[0], t[2], 0, 1, 4, 5), r[1] = PE_SHUF2(t[0], t[2], 2, 3, 6, 7);
                r[2] = PE_SHUF2(t[1], t[3], 0, 1, 4, 5), r[3] = PE_SHUF2(t[1], t[3], 2, 3, 6, 7);
                for (int k = 0; k < 4; k++) memcpy(tr + (d + k) * ldt + j, &r[k], sizeof r[k]);
            }
            for (int64_t j = j4; j < j1; j++)
                for (int k = 0; k < 4; k++) tr[(d + k) * ldt + j] = src[j * ld + d + k];
        }
        for (int64_t d = D4; d < D; d++)
            for (int64_t j = j0; j < j1; j++) tr[d * ldt + j] = src[j * ld + d];
    }
}
#undef PE_SHUF2

/* The kv head (b, g) of k or v (B, Tk, Ckv): tr (dp, tkp) transposed, rows (tkp, dp); either
 * may be NULL. Padding is zero. */
static void pack_kv(const pe__ctx *c, const float *x, int64_t b, int64_t g, int64_t dp, int64_t tkp,
                    float *tr, float *rows) {
    const int64_t Tk = c->Tk, D = c->D, ld = c->Ckv;
    const float *src = x + b * Tk * ld + g * D;
    if (tr) {
        transpose(tr, tkp, src, ld, Tk, D);
        for (int64_t d = 0; d < D; d++) memset(tr + d * tkp + Tk, 0, sizeof(float) * (size_t)(tkp - Tk));
        memset(tr + D * tkp, 0, sizeof(float) * (size_t)((dp - D) * tkp));
    }
    if (rows) {
        for (int64_t j = 0; j < Tk; j++) {
            memcpy(rows + j * dp, src + j * ld, sizeof(float) * D);
            memset(rows + j * dp + D, 0, sizeof(float) * (size_t)(dp - D));
        }
        memset(rows + Tk * dp, 0, sizeof(float) * (size_t)((tkp - Tk) * dp));
    }
}

/* ---- relative-row terms (pe__rel) ------------------------------------------------------- */

/* clip(pj - pi, -Ke, Ke) + Ke, without overflow for any positions */
static inline int64_t rel_offset(int64_t pj, int64_t pi, int64_t Ke) {
    uint64_t d = pj >= pi ? (uint64_t)pj - (uint64_t)pi : (uint64_t)pi - (uint64_t)pj;
    int64_t a = d > (uint64_t)Ke ? Ke : (int64_t)d;
    return pj >= pi ? Ke + a : Ke - a;
}

/* Resolves the method's terms for this call into f; buf (freed by the caller) holds the map,
 * the transposed and padded tables and, when the method has a krow term, kc (filled by rel_kc). */
static pe_status rel_setup(const pe__ctx *ctx, const pe__method *m, int64_t dp, int64_t tkp, pe__frel *f,
                           float **buf, pe_err *err) {
    *f = (pe__frel){0};
    *buf = NULL;
    if (!m->rel) return PE_OK;
    pe__rel d;
    m->rel(ctx->cfg, &d);
    const int64_t D = ctx->D, K = d.K;
    const uint64_t span = (uint64_t)ctx->pos_max - (uint64_t)ctx->pos_min;
    const int64_t Ke = span < (uint64_t)K ? (int64_t)span : K;
    f->Ke = Ke, f->H = ctx->H;
    f->R = d.abs ? Ke + 1 : 2 * Ke + 1, f->Rp = pe__round_up(f->R, PE_DALIGN);
    f->base = d.abs ? 0 : K - Ke;
    f->iw = d.w, f->ia = d.q, f->ic = d.k, f->iv = d.v, f->ie = d.e;
    const float *const *P = ctx->w->param;
    f->w = d.w >= 0 ? P[d.w] + f->base * ctx->H : NULL;
    f->a = d.q >= 0 ? P[d.q] + f->base * D : NULL;
    f->c = d.k >= 0 ? P[d.k] + f->base * D : NULL;
    f->v = d.v >= 0 ? P[d.v] + f->base * D : NULL;
    f->e = d.e >= 0 ? P[d.e] + f->base * D : NULL;
    const int64_t Rp = f->Rp;
    const size_t nmap = (size_t)pe__round_up(2 * Ke + 1, PE_DALIGN), nt = (size_t)(dp * Rp);
    const size_t nkc = f->c ? (size_t)(ctx->B * ctx->Hkv * tkp * Rp) : 0;
    float *b = pe__falloc(nmap + 7 * nt + nkc);
    if (!b) return pe_error(err, PE_ENOMEM, "out of memory for the fused attention's relative tables");
    *buf = b;
    int32_t *map = (int32_t *)b;
    for (int64_t t = 0; t <= 2 * Ke; t++) /* t - Ke = clip(pos_j - pos_i) */
        map[t] = (int32_t)(d.abs ? llabs(t - Ke) : d.sign > 0 ? t : 2 * Ke - t);
    float *T6 = b + nmap;
    memset(T6, 0, sizeof(float) * 7 * nt);
    const float *src[3] = {f->a, f->v, f->c};
    const float sc = (float)ctx->cfg->scale;
    for (int k = 0; k < 3; k++) /* transposed at T6 + k nt, padded at T6 + (3 + k) nt; c scaled */
        for (int64_t x = 0; src[k] && x < f->R; x++)
            for (int64_t e = 0; e < D; e++) {
                float v = (k == 2 ? sc : 1.0f) * src[k][x * D + e];
                T6[k * nt + e * Rp + x] = v, T6[(3 + k) * nt + x * dp + e] = v;
            }
    f->map = map, f->aT = T6, f->vT = T6 + nt, f->cT = T6 + 2 * nt;
    f->aP = T6 + 3 * nt, f->vP = T6 + 4 * nt, f->cP = T6 + 5 * nt;
    f->eP = f->e ? T6 + 6 * nt : NULL; /* (R, D) padded */
    for (int64_t x = 0; f->e && x < f->R; x++) memcpy(T6 + 6 * nt + x * dp, f->e + x * D, sizeof(float) * D);
    f->kc = nkc ? T6 + 7 * nt : NULL;
    return PE_OK;
}

/* kc of kv head bg from its packed kt (dp, tkp): scale k_j . c[x] */
static void rel_kc(const pe__frel *f, const pe__kernels *K, const float *kt, int64_t dp, int64_t tkp, int64_t bg) {
    if (!f->kc) return;
    float *out = (float *)f->kc + bg * tkp * f->Rp;
    memset(out, 0, sizeof(float) * tkp * f->Rp);
    K->mm(out, f->Rp, kt, 1, tkp, f->cT, f->Rp, tkp, dp, f->Rp);
}

void pe__frel_block(const pe__fjob *j, const float *qs, const float *dos, int64_t ni) {
    const pe__frel *f = j->rel;
    const int64_t Rp = f->Rp, dp = j->dp;
    (void)ni; /* padding rows of qs, dos are zero */
    memset(j->qa, 0, sizeof(float) * PE_BR * Rp);
    if (f->a) j->mm(j->qa, Rp, qs, dp, 1, f->aT, Rp, PE_BR, dp, Rp);
    if (!dos) return;
    memset(j->dva, 0, sizeof(float) * PE_BR * Rp);
    memset(j->wm, 0, sizeof(float) * PE_BR * Rp);
    memset(j->gm, 0, sizeof(float) * PE_BR * Rp);
    if (f->v) j->mm(j->dva, Rp, dos, dp, 1, f->vT, Rp, PE_BR, dp, Rp);
}

int32_t pe__frel_rows(const pe__fjob *j, int64_t i0, int64_t ni, int64_t j0, int64_t nj) {
    const pe__frel *f = j->rel;
    const int64_t *pos = j->ctx->pos + j->b * j->ctx->T, *kpos = j->ctx->kpos + j->b * j->ctx->Tk, Ke = f->Ke;
    int32_t same = f->map[rel_offset(kpos[j0], pos[i0], Ke)];
    for (int64_t r = 0; r < ni; r++) {
        const int64_t pi = pos[i0 + r];
        int32_t *ix = j->idx + r * PE_BC;
        for (int64_t c = 0; c < nj; c++) {
            ix[c] = f->map[rel_offset(kpos[j0 + c], pi, Ke)];
            if (ix[c] != same) same = -1;
        }
    }
    return same;
}

void pe__frel_tile(const pe__fjob *j, int64_t i0, int64_t ni, int64_t j0, int64_t nj, float *s) {
    const pe__frel *f = j->rel;
    const int64_t Rp = f->Rp, H = f->H;
    const float *w = f->w ? f->w + j->h : NULL, *kc = f->c ? j->kc + j0 * Rp : NULL;
    if (!f->e) pe__frel_rows(j, i0, ni, j0, nj);
    if (!w && !f->a && !kc) return;
    for (int64_t r = 0; r < ni; r++) {
        const int32_t *ix = j->idx + r * PE_BC;
        float *sr = s + r * PE_BC, *ur = j->u + r * PE_BC;
        const float *qa = f->a ? j->qa + r * Rp : NULL;
        for (int64_t c = 0; c < nj; c++) {
            const int32_t x = ix[c];
            float v = sr[c];
            if (w) ur[c] = v, v *= w[x * H];
            if (qa) v += qa[x];
            if (kc) v += kc[c * Rp + x];
            sr[c] = v;
        }
    }
}

void pe__frel_mass(const pe__fjob *j, int64_t ni, int64_t nj, const float *p, float *wm, int64_t ldw) {
    for (int64_t r = 0; r < ni; r++)
        for (int64_t c = 0; c < nj; c++) wm[r * ldw + j->idx[r * PE_BC + c]] += p[r * PE_BC + c];
}

void pe__frel_out(const pe__fjob *j, int64_t ni, float *acc) {
    (void)ni;
    j->mm(acc, j->dpa, acc + j->dp, j->dpa, 1, j->rel->vP, j->dp, PE_BR, j->rel->R, j->dp);
}

void pe__frel_dp(const pe__fjob *j, int64_t ni, int64_t nj, const float *p, float *dp) {
    const pe__frel *f = j->rel;
    if (!f->v) return;
    const int64_t Rp = f->Rp;
    for (int64_t r = 0; r < ni; r++)
        for (int64_t c = 0; c < nj; c++) {
            const int32_t x = j->idx[r * PE_BC + c];
            dp[r * PE_BC + c] += j->dva[r * Rp + x];
            j->wm[r * Rp + x] += p[r * PE_BC + c];
        }
}

void pe__frel_ds(const pe__fjob *j, int64_t ni, int64_t j0, int64_t nj, float *ds) {
    const pe__frel *f = j->rel;
    const int64_t Rp = f->Rp, H = f->H;
    const float *w = f->w ? f->w + j->h : NULL;
    float *dw = w && j->ctx->g->dparam[f->iw] ? j->ctx->g->dparam[f->iw] + f->base * H + j->h : NULL;
    float *hc = f->c ? j->hc + j0 * Rp : NULL;
    if (!w && !f->a && !hc) return; /* erow alone: the kernel's product takes ds */
    for (int64_t r = 0; r < ni; r++)
        for (int64_t c = 0; c < nj; c++) {
            const int32_t x = j->idx[r * PE_BC + c];
            float g = ds[r * PE_BC + c];
            if (f->a) j->gm[r * Rp + x] += g;
            if (hc) hc[c * Rp + x] += g;
            if (dw) dw[x * H] += g * j->u[r * PE_BC + c];
            if (w) ds[r * PE_BC + c] = g * w[x * H];
        }
}

void pe__frel_block_end(const pe__fjob *j, int64_t ni, const float *qs, const float *dos, float *dqa) {
    const pe__frel *f = j->rel;
    const int64_t Rp = f->Rp, dp = j->dp;
    (void)ni;
    if (f->a) {
        j->mm(dqa, dp, j->gm, Rp, 1, f->aP, dp, PE_BR, f->R, dp);
        j->mm(j->dA, dp, j->gm, 1, Rp, qs, dp, Rp, PE_BR, dp);
    }
    if (f->v) j->mm(j->dV, dp, j->wm, 1, Rp, dos, dp, Rp, PE_BR, dp);
}

/* Adds the item's padded table gradient acc (R, dp) times f into the tensor i's rows from base */
static void rel_flush(const pe__ctx *ctx, const pe__frel *f, int i, const float *acc, int64_t dp, float s) {
    float *g = i >= 0 ? ctx->g->dparam[i] : NULL;
    if (!g) return;
    g += f->base * ctx->D;
    for (int64_t x = 0; x < f->R; x++)
        for (int64_t e = 0; e < ctx->D; e++) g[x * ctx->D + e] += s * acc[x * dp + e];
}

/* ---- jobs ----------------------------------------------------------------------------------- */

/* Scratch floats of a thread's job (rel: Rp > 0, see pe__fjob) */
static size_t scratch_floats(int64_t dp, int64_t Rp) {
    return (size_t)(3 * PE_BR * dp + 2 * PE_BR * PE_BC + 4 * PE_BR) +
           (Rp ? (size_t)(PE_BR * Rp + 2 * PE_BR * PE_BC + 4 * PE_BR * Rp + 4 * Rp * dp + 2 * PE_BR * dp) : 0);
}

/* The attn_mask's tiles (B, ceil(T / PE_BR), ceil(Tk / PE_BC)): 0 every entry masked, 1 some,
 * 2 none; NULL without a mask (or out of memory: then *st is set). One pass over the mask per
 * call: forward leaves the census in ctx->tiles for backward. */
static uint8_t *mask_tiles(pe__ctx *ctx, int64_t *nkb, pe_status *st, pe_err *err) {
    const int64_t T = ctx->T, Tk = ctx->Tk, nqb = (T + PE_BR - 1) / PE_BR;
    *nkb = (Tk + PE_BC - 1) / PE_BC;
    *st = PE_OK;
    if (!ctx->mask || ctx->tiles) return ctx->tiles;
    uint8_t *t = malloc((size_t)(ctx->B * nqb * *nkb));
    int64_t *open = malloc(sizeof(int64_t) * *nkb);
    if (!t || !open) {
        free(t), free(open);
        *st = pe_error(err, PE_ENOMEM, "out of memory for the attn_mask's tiles");
        return NULL;
    }
    for (int64_t b = 0; b < ctx->B; b++)
        for (int64_t qb = 0; qb < nqb; qb++) {
            const int64_t i0 = qb * PE_BR, ni = T - i0 < PE_BR ? T - i0 : PE_BR;
            memset(open, 0, sizeof(int64_t) * *nkb);
            for (int64_t i = i0; i < i0 + ni; i++) {
                const uint8_t *row = ctx->mask + (b * T + i) * Tk;
                for (int64_t kb = 0, u = 0; kb < *nkb; kb++) {
                    int64_t c = 0;
                    for (const int64_t end = u + PE_BC < Tk ? u + PE_BC : Tk; u < end; u++) c += row[u] != 0;
                    open[kb] += c;
                }
            }
            for (int64_t kb = 0; kb < *nkb; kb++) {
                const int64_t nj = Tk - kb * PE_BC < PE_BC ? Tk - kb * PE_BC : PE_BC;
                t[(b * nqb + qb) * *nkb + kb] = open[kb] == 0 ? 0 : open[kb] == ni * nj ? 2 : 1;
            }
        }
    free(open);
    return ctx->tiles = t;
}

/* Whether query i of row b keeps a key under its band, attn_mask and the row's lengths: when it
 * does, a row the kernel found empty had scores that are not finite. */
static int row_has_key(const pe__ctx *ctx, int64_t b, int64_t i) {
    int64_t T, Tk, qoff, lo, hi;
    pe__row_lens(ctx, b, &T, &Tk, &qoff);
    pe__band_range(pe__band_of(ctx->cfg), qoff, i, Tk, &lo, &hi);
    for (int64_t j = lo; j < hi; j++)
        if (!ctx->mask || ctx->mask[(b * ctx->T + i) * ctx->Tk + j]) return 1;
    return 0;
}

/* The error of query i of row b left with nothing to average: every key masked, or (when it keeps
 * a key) scores that are not finite. */
pe_status pe__empty_row(const pe__ctx *ctx, int64_t b, int64_t i, pe_err *err) {
    if (row_has_key(ctx, b, i))
        return pe_error(err, PE_EINVAL, "query %lld of row %lld: its scores are not finite (NaN or Inf in q, k or the "
                                        "method's terms)", (long long)i, (long long)b);
    return pe_error(err, PE_EINVAL, "query %lld has every key masked", (long long)i);
}

/* What a call's forward and backward both set up: the relative-row terms (rel_setup) and the
 * attn_mask's tile census (mask_tiles); on failure nothing is left to free. */
static pe_status call_setup(pe__ctx *ctx, const pe__method *m, int64_t dp, int64_t tkp, pe__frel *rel, float **relbuf,
                            uint8_t **tiles, int64_t *nkb, pe_err *err) {
    pe_status st = rel_setup(ctx, m, dp, tkp, rel, relbuf, err);
    if (st) return st;
    *tiles = mask_tiles(ctx, nkb, &st, err);
    if (st) free(*relbuf);
    return st;
}

static pe__fjob job_init(pe__ctx *ctx, const pe__method *m, const pe__kernels *K, const pe__frel *rel, int64_t dp,
                         int64_t tkp, float *scratch) {
    pe__fjob j = {.ctx = ctx, .mm = K->mm, .bias = m->bias_forward, .bias_bwd = m->bias_backward, .T = ctx->T,
                  .Tk = ctx->Tk, .qoff = ctx->qoff, .D = ctx->D, .dp = dp, .tkp = tkp, .ldm = ctx->Tk,
                  .band = pe__band_of(ctx->cfg), .scale = (float)ctx->cfg->scale,
                  .lo = ctx->run && ctx->run->denormals ? -104.0f : -87.0f, .ld = ctx->C,
                  .rel = rel->R ? rel : NULL, .dpa = dp + (rel->v ? rel->Rp : 0)};
    const int64_t Rp = rel->R ? rel->Rp : 0;
    j.a = scratch, j.c = j.a + PE_BR * dp, j.e = j.c + PE_BR * (dp + Rp);
    j.s = j.e + PE_BR * dp, j.t = j.s + PE_BR * PE_BC, j.r = j.t + PE_BR * PE_BC;
    if (Rp) {
        j.u = j.r + 4 * PE_BR, j.idx = (int32_t *)(j.u + PE_BR * PE_BC);
        j.qa = j.u + 2 * PE_BR * PE_BC, j.dva = j.qa + PE_BR * Rp, j.wm = j.dva + PE_BR * Rp;
        j.gm = j.wm + PE_BR * Rp, j.dA = j.gm + PE_BR * Rp, j.dV = j.dA + Rp * dp, j.dC = j.dV + Rp * dp;
        j.dE = j.dC + Rp * dp, j.qe = j.dE + Rp * dp, j.z = j.qe + PE_BR * dp;
    }
    return j;
}

pe_status pe__fused_forward(pe__ctx *ctx, const pe__method *m, const float *q, const float *k,
                            const float *v, float *o, float *stats, pe_err *err) {
    const pe_run_options *run = ctx->run ? ctx->run : &pe__run_defaults;
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(run));
    const int64_t B = ctx->B, T = ctx->T, H = ctx->H, Hkv = ctx->Hkv, C = ctx->C, D = ctx->D;
    const int64_t group = H / Hkv, dp = pe__round_up(D, PE_DALIGN), tkp = pe__round_up(ctx->Tk, PE_BC);
    const int64_t nq = (T + PE_BR - 1) / PE_BR, per = dp * tkp;
    const int nth = pe__run_threads(run, (double)B * H * T * ctx->Tk * D);
    pe__frel rel;
    float *relbuf;
    int64_t nkb;
    uint8_t *tiles;
    pe_status st = call_setup(ctx, m, dp, tkp, &rel, &relbuf, &tiles, &nkb, err);
    if (st) return st;
    const size_t sc = scratch_floats(dp, rel.R ? rel.Rp : 0), np = (size_t)(B * Hkv * per);
    float *kt = pe__scratch_get(ctx->scratch, (rel.e ? 3 : 2) * np + sc * nth);
    if (!kt) {
        free(relbuf);
        return pe_error(err, PE_ENOMEM, "out of memory for the fused attention's packed keys");
    }
    float *vr = kt + np, *kr = rel.e ? vr + np : NULL; /* the erow product's pairs read k rows */
    float *scratch = vr + (rel.e ? 2 : 1) * np;
    int64_t bad = INT64_MAX; /* the first query (b, h, i) with every key masked */
    PE_OMP(omp parallel num_threads(nth))
    {
        unsigned csr = pe__ftz_enter(run);
        PE_OMP(omp for schedule(static))
        for (int64_t bg = 0; bg < B * Hkv; bg++)
            pack_kv(ctx, k, bg / Hkv, bg % Hkv, dp, tkp, kt + bg * per, kr ? kr + bg * per : NULL),
            pack_kv(ctx, v, bg / Hkv, bg % Hkv, dp, tkp, NULL, vr + bg * per),
            rel_kc(&rel, K, kt + bg * per, dp, tkp, bg);
        pe__fjob j = job_init(ctx, m, K, &rel, dp, tkp, scratch + sc * omp_get_thread_num());
        /* the longest blocks of a head first: causal query blocks late in T see the most keys */
        PE_OMP(omp for schedule(dynamic, 1))
        for (int64_t it = 0; it < B * H * nq; it++) {
            const int64_t bh = it / nq, blk = nq - 1 - it % nq, b = bh / H, h = bh % H;
            const int64_t kv = b * Hkv + h / group;
            pe__row_lens(ctx, b, &j.T, &j.Tk, &j.qoff);
            j.b = b, j.h = h, j.i0 = blk * PE_BR;
            const int64_t nfull = T - j.i0 < PE_BR ? T - j.i0 : PE_BR; /* the block's rows, padding included */
            j.ni = j.T - j.i0 < nfull ? j.T - j.i0 : nfull;
            j.nkb = nkb, j.mask = tiles ? ctx->mask + b * T * ctx->Tk : NULL, j.tiles = tiles ? tiles + b * nq * nkb : NULL;
            j.q = q + b * T * C + h * D, j.out = o + b * T * C + h * D;
            j.kt = kt + kv * per, j.v = vr + kv * per, j.kr = kr ? kr + kv * per : NULL;
            j.kc = rel.kc ? rel.kc + kv * tkp * rel.Rp : NULL;
            j.m = stats + bh * T, j.il = stats + (B * H + bh) * T;
            for (int64_t i = j.i0 + (j.ni > 0 ? j.ni : 0); i < j.i0 + nfull; i++) { /* padding queries: o = 0 */
                memset(j.out + i * C, 0, sizeof(float) * D);
                j.m[i] = -INFINITY, j.il[i] = 0.0f;
            }
            if (j.ni <= 0) continue;
            int64_t r = K->forward(&j);
            if (r >= 0) {
                int64_t at = bh * T + j.i0 + r;
                PE_OMP(omp critical(pe_fused_bad))
                bad = at < bad ? at : bad;
            }
        }
        pe__ftz_leave(run, csr);
    }
    free(relbuf);
    return bad == INT64_MAX ? PE_OK : pe__empty_row(ctx, bad / T / H, bad % T, err);
}

/* Elements of tensor i as given to this call (a free first dimension from param_rows); 0 when unknown. */
static int64_t param_size(const pe__ctx *ctx, const pe_param_spec *s, int i) {
    int64_t n = 1;
    for (int d = 0; d < s[i].ndim; d++) n *= s[i].shape[d] >= 0 ? s[i].shape[d] : ctx->w->param_rows[i];
    return n;
}

/* What one thread of the backward holds. */
typedef struct bwd_thread {
    pe__fjob j;
    const uint8_t *tiles; /* the call's, all rows (mask_tiles), or NULL */
    pe_grads g;     /* the thread's gradients: ctx->g but the bias tensors' private copies */
    float *dka, *dva; /* (tkp, dp) dk, dv of the current kv head */
} bwd_thread;

/* One work item: kv head g of batch b, with every query head of its group. */
static void bwd_item(bwd_thread *t, const pe__kernels *K, const pe__ctx *ctx, int64_t bg, const float *q,
                     const float *o, const float *stats, const float *dout, float *dq, float *dk, float *dv,
                     const float *kt, const float *kr, const float *vt) {
    const int64_t T = ctx->T, H = ctx->H, Hkv = ctx->Hkv, C = ctx->C, D = ctx->D, Tk = ctx->Tk, Ckv = ctx->Ckv;
    const int64_t b = bg / Hkv, g = bg % Hkv, group = H / Hkv, dp = t->j.dp, per = dp * t->j.tkp;
    pe__fjob *j = &t->j;
    const pe__frel *f = j->rel;
    memset(t->dka, 0, sizeof(float) * 2 * per);
    j->kt = kt + bg * per, j->kr = kr + bg * per, j->vt = vt + bg * per;
    if (f) {
        memset(j->dA, 0, sizeof(float) * 4 * f->Rp * dp);
        if (f->c) j->kc = f->kc + bg * j->tkp * f->Rp, memset(j->hc, 0, sizeof(float) * j->tkp * f->Rp);
    }
    if (t->tiles) j->mask = ctx->mask + b * T * Tk, j->tiles = t->tiles + b * ((T + PE_BR - 1) / PE_BR) * j->nkb;
    pe__row_lens(ctx, b, &j->T, &j->Tk, &j->qoff); /* the kernel walks row b's own queries and keys */
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const int64_t at = b * T * C + h * D;
        j->b = b, j->h = h;
        j->q = q + at, j->o = o + at, j->dout = dout + at, j->dq = dq + at;
        j->m = (float *)stats + (b * H + h) * T, j->il = (float *)stats + (ctx->B * H + b * H + h) * T;
        K->backward(j);
    }
    if (f && f->c) { /* s_ij had k_j . cs[x] (cs = scale c): dk += hc cs, dc += scale hc^T k */
        j->mm(t->dka, dp, j->hc, f->Rp, 1, f->cP, dp, j->tkp, f->R, dp);
        j->mm(j->dC, dp, j->hc, 1, f->Rp, j->kr, dp, f->Rp, Tk, dp);
    }
    if (f) {
        rel_flush(j->ctx, f, f->ia, j->dA, dp, 1.0f);
        rel_flush(j->ctx, f, f->iv, j->dV, dp, 1.0f);
        rel_flush(j->ctx, f, f->ic, j->dC, dp, j->scale);
        rel_flush(j->ctx, f, f->ie, j->dE, dp, 1.0f);
    }
    float *dkb = dk + b * Tk * Ckv + g * D, *dvb = dv + b * Tk * Ckv + g * D;
    for (int64_t r = 0; r < Tk; r++)
        for (int64_t d = 0; d < D; d++) {
            dkb[r * Ckv + d] += t->dka[r * dp + d];
            dvb[r * Ckv + d] += t->dva[r * dp + d];
        }
}

pe_status pe__fused_backward(pe__ctx *ctx, const pe__method *m, const pe_param_spec *specs, int nparams,
                             const float *q, const float *k, const float *v, const float *o,
                             const float *stats, const float *dout, float *dq, float *dk, float *dv,
                             pe_err *err) {
    const pe_run_options *run = ctx->run ? ctx->run : &pe__run_defaults;
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(run));
    const int64_t B = ctx->B, Hkv = ctx->Hkv, D = ctx->D, items = B * Hkv;
    const int64_t dp = pe__round_up(D, PE_DALIGN), tkp = pe__round_up(ctx->Tk, PE_BC), per = dp * tkp;
    int nth = pe__run_threads(run, 2.0 * B * ctx->H * ctx->T * ctx->Tk * D);
    pe__frel rel;
    float *relbuf;
    int64_t nkb;
    uint8_t *tiles;
    pe_status st = call_setup(ctx, m, dp, tkp, &rel, &relbuf, &tiles, &nkb, err);
    if (st) return st;
    const int64_t Rp = rel.R ? rel.Rp : 0;
    const int priv_grads = m->bias_backward || m->rel; /* hooks that write d(tables) */

    /* The bias tensors' gradients: a private copy per work item, summed in item order at the
     * end, so results depend neither on scheduling nor on the thread count; one copy per
     * thread (static schedule) if that would be large; none when a size is unknown. */
    int64_t off[PE_MAX_PARAMS + 1] = {0};
    int known = 1;
    for (int i = 0; i < nparams; i++) {
        int64_t n = priv_grads && ctx->g->dparam[i] ? param_size(ctx, specs, i) : 0;
        if (priv_grads && ctx->g->dparam[i] && n <= 0) known = 0;
        off[i + 1] = off[i] + (n > 0 ? n : 0);
    }
    const int64_t priv_n = known ? off[nparams] : 0;
    const int per_item = priv_n > 0 && priv_n * items <= (1 << 24);
    if (!known) nth = 1;
    const int64_t copies = per_item ? items : nth > 1 ? nth : 0;
    const size_t sc0 = scratch_floats(dp, Rp), sc = sc0 + (size_t)(2 * per + (rel.c ? tkp * Rp : 0));
    const size_t npk = (size_t)(3 * items * per), npriv = priv_n && copies ? (size_t)(priv_n * copies) : 0;
    float *packed = pe__scratch_get(ctx->scratch, npk + sc * nth + (npriv + 15) / 16 * 16);
    if (!packed) {
        free(relbuf);
        return pe_error(err, PE_ENOMEM, "out of memory for the fused attention's backward");
    }
    float *scratch = packed + npk, *priv = npriv ? scratch + sc * nth : NULL;
    if (priv) memset(priv, 0, sizeof(float) * npriv);
    float *kt = packed, *kr = packed + items * per, *vt = packed + 2 * items * per;
    PE_OMP(omp parallel num_threads(nth))
    {
        unsigned csr = pe__ftz_enter(run);
        PE_OMP(omp for schedule(static))
        for (int64_t bg = 0; bg < items; bg++)
            pack_kv(ctx, k, bg / Hkv, bg % Hkv, dp, tkp, kt + bg * per, kr + bg * per),
            pack_kv(ctx, v, bg / Hkv, bg % Hkv, dp, tkp, vt + bg * per, NULL),
            rel_kc(&rel, K, kt + bg * per, dp, tkp, bg);
        const int tid = omp_get_thread_num();
        pe__ctx tctx = *ctx;
        bwd_thread t = {.g = *ctx->g};
        tctx.g = &t.g;
        t.j = job_init(&tctx, m, K, &rel, dp, tkp, scratch + sc * tid);
        t.dka = scratch + sc * tid + sc0, t.dva = t.dka + per, t.j.hc = t.dva + per;
        t.j.dk = t.dka, t.j.dv = t.dva;
        t.tiles = tiles, t.j.tiles = tiles, t.j.nkb = nkb;
#define PE_PRIVATE(c)                                                                   \
    if (priv)                                                                           \
        for (int i = 0; i < nparams; i++)                                               \
            if (off[i + 1] > off[i]) t.g.dparam[i] = priv + (c) * priv_n + off[i];
        if (!per_item) {
            PE_PRIVATE(tid)
            PE_OMP(omp for schedule(static))
            for (int64_t bg = 0; bg < items; bg++) bwd_item(&t, K, ctx, bg, q, o, stats, dout, dq, dk, dv, kt, kr, vt);
        } else {
            PE_OMP(omp for schedule(dynamic, 1))
            for (int64_t bg = 0; bg < items; bg++) {
                PE_PRIVATE(bg)
                bwd_item(&t, K, ctx, bg, q, o, stats, dout, dq, dk, dv, kt, kr, vt);
            }
        }
#undef PE_PRIVATE
        pe__ftz_leave(run, csr);
    }
    if (priv)
        for (int64_t c = 0; c < copies; c++)
            for (int i = 0; i < nparams; i++)
                for (int64_t e = 0; e < off[i + 1] - off[i]; e++) ctx->g->dparam[i][e] += priv[c * priv_n + off[i] + e];
    free(relbuf);
    return PE_OK;
}

