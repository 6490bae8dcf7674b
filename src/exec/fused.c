/* The fused attention path: what the core (attention.c) runs in place of its per-(b, h)
 * score, bias, mask, softmax and value passes when no scores or probabilities are asked for
 * and the method's hooks allow it (pe__fused_eligible). Rotations ran before on the whole
 * q, k (and v); the method's tile hooks (score_mod, value_mod, bias: internal.h) are called
 * per tile, the same the reference path calls over a whole head.
 *
 * It takes the methods whose description says so (PE__FUSED).
 *
 * Forward: tiles of PE_BR queries x PE_BC keys with an online softmax (flash attention), so
 * memory stays linear in T: the row max m and 1/l of every query are saved (stats, 2 floats
 * per row and head) with o. Backward recomputes every tile from q, k, v and those statistics.
 *
 * Threads (OpenMP when the compiler has it; one thread otherwise, and inside another
 * parallel region): forward over (b, h, query block), backward over (b, kv head), each
 * thread owning the dk, dv rows of its kv head and the dq rows of its heads. The tile hooks'
 * parameter gradients go to private copies (through the thread's ctx->g) summed in a fixed
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

/* dst (4 rows, ldt) = the 4 x 4 block of src (4 rows, ld) transposed: SSE's unpacks on x86
 * (the vector-extension shuffles below compiled to stack round trips there: 2.5x slower at a
 * head's 64 x 16), the same shuffles elsewhere */
#ifdef PE_MXCSR
static inline void block4(float *dst, int64_t ldt, const float *src, int64_t ld) {
    __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + ld), r2 = _mm_loadu_ps(src + 2 * ld), r3 = _mm_loadu_ps(src + 3 * ld);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst, r0), _mm_storeu_ps(dst + ldt, r1), _mm_storeu_ps(dst + 2 * ldt, r2), _mm_storeu_ps(dst + 3 * ldt, r3);
}
#else
typedef float pe__v4 __attribute__((vector_size(16)));
typedef int32_t pe__i4 __attribute__((vector_size(16)));
#ifdef __clang__
#define PE_SHUF2(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define PE_SHUF2(a, b, i, j, k, l) __builtin_shuffle(a, b, (pe__i4){i, j, k, l})
#endif
static inline void block4(float *dst, int64_t ldt, const float *src, int64_t ld) {
    pe__v4 r[4], t[4];
    for (int k = 0; k < 4; k++) memcpy(&r[k], src + k * ld, sizeof r[k]);
    t[0] = PE_SHUF2(r[0], r[1], 0, 4, 1, 5), t[1] = PE_SHUF2(r[0], r[1], 2, 6, 3, 7);
    t[2] = PE_SHUF2(r[2], r[3], 0, 4, 1, 5), t[3] = PE_SHUF2(r[2], r[3], 2, 6, 3, 7);
    r[0] = PE_SHUF2(t[0], t[2], 0, 1, 4, 5), r[1] = PE_SHUF2(t[0], t[2], 2, 3, 6, 7);
    r[2] = PE_SHUF2(t[1], t[3], 0, 1, 4, 5), r[3] = PE_SHUF2(t[1], t[3], 2, 3, 6, 7);
    for (int k = 0; k < 4; k++) memcpy(dst + k * ldt, &r[k], sizeof r[k]);
}
#endif

/* tr (D, ldt) = src (n, D; row stride ld) transposed, by 4 x 4 blocks (block4), 16 keys at a
 * time so that their rows stay in L1; the edges not a multiple of 4 element by element. */
static void transpose(float *tr, int64_t ldt, const float *src, int64_t ld, int64_t n, int64_t D) {
    const int64_t D4 = D / 4 * 4;
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const int64_t j1 = n - j0 < 16 ? n : j0 + 16, j4 = j0 + (j1 - j0) / 4 * 4;
        for (int64_t d = 0; d < D4; d += 4) {
            for (int64_t j = j0; j < j4; j += 4) block4(tr + d * ldt + j, ldt, src + j * ld + d, ld);
            for (int64_t j = j4; j < j1; j++)
                for (int k = 0; k < 4; k++) tr[(d + k) * ldt + j] = src[j * ld + d + k];
        }
        for (int64_t d = D4; d < D; d++)
            for (int64_t j = j0; j < j1; j++) tr[d * ldt + j] = src[j * ld + d];
    }
}

/* The kv head (b, g) of k (B, Tk, Hkv D) or v (B, Tk, Hkv Dv; then D is Dv): tr (dp, tkp)
 * transposed, rows (tkp, dp); either may be NULL. Padding is zero. */
static void pack_kv(const pe__ctx *c, const float *x, int64_t D, int64_t b, int64_t g, int64_t dp, int64_t tkp,
                    float *tr, float *rows) {
    const int64_t Tk = c->Tk, ld = c->Hkv * D;
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

/* ---- jobs ----------------------------------------------------------------------------------- */

/* Scratch floats of a thread's job (dp, dvp: the packed widths of q, k and of v; ms: the
 * method's tile scratch; mod: it has tile hooks) */
static size_t scratch_floats(int64_t dp, int64_t dvp, int64_t ms, int mod) {
    return (size_t)(PE_BR * (2 * dp + dvp) + 2 * PE_BR * PE_BC + 4 * PE_BR) + (mod ? (size_t)(PE_BR * PE_BC + ms) : 0);
}

/* The method's tile scratch, floats per thread */
static int64_t tile_scratch(const pe__ctx *ctx, const pe__method *m) {
    return m->tile_scratch ? pe__round_up(m->tile_scratch(ctx->cfg, ctx->D, PE_BR, PE_BC), 16) : 0;
}

static int has_mod(const pe__method *m) { return m->score_mod || m->value_mod; }

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

static pe__fjob job_init(pe__ctx *ctx, const pe__method *m, const pe__kernels *K, int64_t dp, int64_t dvp,
                         int64_t tkp, float *scratch) {
    pe__fjob j = {.ctx = ctx, .mm = K->mm, .T = ctx->T, .Tk = ctx->Tk, .qoff = ctx->qoff, .D = ctx->D, .dp = dp,
                  .Dv = ctx->Dv, .dvp = dvp, .tkp = tkp, .ldm = ctx->Tk, .band = pe__band_of(ctx->cfg),
                  .scale = (float)ctx->cfg->scale, .lo = ctx->run && ctx->run->denormals ? -104.0f : -87.0f,
                  .ld = ctx->C, .ldo = ctx->H * ctx->Dv, .mod = has_mod(m) ? m : NULL,
                  .own = (m->flags & PE__SCORE_OWN) != 0};
    j.a = scratch, j.c = j.a + PE_BR * dp, j.e = j.c + PE_BR * dvp;
    j.s = j.e + PE_BR * dp, j.t = j.s + PE_BR * PE_BC, j.r = j.t + PE_BR * PE_BC;
    if (j.mod) j.u = j.r + 4 * PE_BR, j.ms = j.u + PE_BR * PE_BC;
    return j;
}

/* attention_sinks: the block's rows have o = acc / l over their keys, with row max m; the sink
 * sigma is one more term of the sum, m' = max(m, sigma), l' = l e^(m - m') + e^(sigma - m'), so
 * o' = o l e^(m - m') / l' and the statistics become m', 1 / l' (what backward's p = e^(s - m') / l'
 * reads). A row with no key (1 / l = 0) stays as it is: the call reports it. */
static void fold_sink(const pe__fjob *j, float sigma) {
    for (int64_t r = 0; r < j->ni; r++) {
        const int64_t i = j->i0 + r;
        if (!(j->il[i] > 0)) continue;
        const float m = j->m[i], mn = sigma > m ? sigma : m;
        const double l = 1.0 / (double)j->il[i], f = exp((double)m - mn), ln = l * f + exp((double)sigma - mn);
        const float keep = (float)(l * f / ln);
        float *o = j->out + i * j->ldo;
        for (int64_t d = 0; d < j->Dv; d++) o[d] *= keep;
        j->m[i] = mn, j->il[i] = (float)(1.0 / ln);
    }
}

pe_status pe__fused_forward(pe__ctx *ctx, const pe__method *m, const float *q, const float *k,
                            const float *v, float *o, float *stats, pe_err *err) {
    const pe_run_options *run = ctx->run ? ctx->run : &pe__run_defaults;
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(run));
    const int64_t B = ctx->B, T = ctx->T, H = ctx->H, Hkv = ctx->Hkv, C = ctx->C, D = ctx->D, Dv = ctx->Dv;
    const int64_t group = H / Hkv, dp = pe__round_up(D, PE_DALIGN), tkp = pe__key_stride(ctx->Tk);
    const int64_t dvp = pe__round_up(Dv, PE_DALIGN), nq = (T + PE_BR - 1) / PE_BR, per = dp * tkp, pv = dvp * tkp;
    const int nth = pe__run_threads(run, (double)B * H * T * ctx->Tk * D);
    int64_t nkb;
    pe_status st;
    uint8_t *tiles = mask_tiles(ctx, &nkb, &st, err);
    if (st) return st;
    const int rows = (m->flags & PE__SCORE_QK) != 0; /* the tile hooks read k rows */
    const size_t sc = scratch_floats(dp, dvp, tile_scratch(ctx, m), has_mod(m));
    const size_t np = (size_t)(B * Hkv * per), npv = (size_t)(B * Hkv * pv);
    float *kt = pe__scratch_get(ctx->scratch, (rows ? 2 : 1) * np + npv + sc * nth);
    if (!kt) return pe_error(err, PE_ENOMEM, "out of memory for the fused attention's packed keys");
    float *vr = kt + np, *kr = rows ? vr + npv : NULL;
    float *scratch = vr + npv + (rows ? np : 0);
    int64_t bad = INT64_MAX; /* the first query (b, h, i) with every key masked */
    PE_OMP(omp parallel num_threads(nth))
    {
        unsigned csr = pe__ftz_enter(run);
        PE_OMP(omp for schedule(static))
        for (int64_t bg = 0; bg < B * Hkv; bg++)
            pack_kv(ctx, k, D, bg / Hkv, bg % Hkv, dp, tkp, kt + bg * per, kr ? kr + bg * per : NULL),
            pack_kv(ctx, v, Dv, bg / Hkv, bg % Hkv, dvp, tkp, NULL, vr + bg * pv);
        pe__fjob j = job_init(ctx, m, K, dp, dvp, tkp, scratch + sc * omp_get_thread_num());
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
            j.q = q + b * T * C + h * D, j.out = o + b * T * j.ldo + h * Dv;
            j.kt = kt + kv * per, j.v = vr + kv * pv, j.kr = kr ? kr + kv * per : NULL;
            j.m = stats + bh * T, j.il = stats + (B * H + bh) * T;
            for (int64_t i = j.i0 + (j.ni > 0 ? j.ni : 0); i < j.i0 + nfull; i++) { /* padding queries: o = 0 */
                memset(j.out + i * j.ldo, 0, sizeof(float) * Dv);
                j.m[i] = -INFINITY, j.il[i] = 0.0f;
            }
            if (j.ni <= 0) continue;
            int64_t r = K->forward(&j);
            if (ctx->sinks) fold_sink(&j, ctx->sinks[h]);
            if (r >= 0) {
                int64_t at = bh * T + j.i0 + r;
                PE_OMP(omp critical(pe_fused_bad))
                bad = at < bad ? at : bad;
            }
        }
        pe__ftz_leave(run, csr);
    }
    return bad == INT64_MAX ? PE_OK : pe__empty_row(ctx, m, bad / T / H, bad % T, err);
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
    float *dka, *dva; /* (tkp, dp) dk, (tkp, dvp) dv of the current kv head */
} bwd_thread;

/* y (n, D; row stride ldy) = x (n, D; ldx) */
static void copy_rows(float *restrict y, int64_t ldy, const float *restrict x, int64_t ldx, int64_t n, int64_t D) {
    for (int64_t r = 0; r < n; r++) memcpy(y + r * ldy, x + r * ldx, sizeof(float) * (size_t)D);
}

/* One work item: kv head g of batch b, with every query head of its group. */
static void bwd_item(bwd_thread *t, const pe__kernels *K, const pe__ctx *ctx, int64_t bg, const float *q,
                     const float *o, const float *stats, const float *dout, float *dq, float *dk, float *dv,
                     const float *kt, const float *kr, const float *vt) {
    const int64_t T = ctx->T, H = ctx->H, Hkv = ctx->Hkv, C = ctx->C, D = ctx->D, Tk = ctx->Tk, Ckv = ctx->Ckv;
    const int64_t b = bg / Hkv, g = bg % Hkv, group = H / Hkv, dp = t->j.dp, per = dp * t->j.tkp;
    const int64_t Dv = ctx->Dv, Co = H * Dv, dvp = t->j.dvp, pv = dvp * t->j.tkp;
    pe__fjob *j = &t->j;
    memset(t->dka, 0, sizeof(float) * (size_t)(per + pv)); /* dka, then dva */
    j->kt = kt + bg * per, j->kr = kr + bg * per, j->vt = vt + bg * pv;
    if (t->tiles) j->mask = ctx->mask + b * T * Tk, j->tiles = t->tiles + b * ((T + PE_BR - 1) / PE_BR) * j->nkb;
    pe__row_lens(ctx, b, &j->T, &j->Tk, &j->qoff); /* the kernel walks row b's own queries and keys */
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const int64_t at = b * T * C + h * D, ato = b * T * Co + h * Dv;
        j->b = b, j->h = h;
        j->q = q + at, j->o = o + ato, j->dout = dout + ato, j->dq = dq + at;
        j->m = (float *)stats + (b * H + h) * T, j->il = (float *)stats + (ctx->B * H + b * H + h) * T;
        K->backward(j);
    }
    copy_rows(dk + b * Tk * Ckv + g * D, Ckv, t->dka, dp, Tk, D);
    copy_rows(dv + b * Tk * Hkv * Dv + g * Dv, Hkv * Dv, t->dva, dvp, Tk, Dv);
}

pe_status pe__fused_backward(pe__ctx *ctx, const pe__method *m, const pe_param_spec *specs, int nparams,
                             const float *q, const float *k, const float *v, const float *o,
                             const float *stats, const float *dout, float *dq, float *dk, float *dv,
                             pe_err *err) {
    const pe_run_options *run = ctx->run ? ctx->run : &pe__run_defaults;
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(run));
    const int64_t B = ctx->B, Hkv = ctx->Hkv, D = ctx->D, Dv = ctx->Dv, items = B * Hkv;
    const int64_t dp = pe__round_up(D, PE_DALIGN), tkp = pe__key_stride(ctx->Tk), per = dp * tkp;
    const int64_t dvp = pe__round_up(Dv, PE_DALIGN), pv = dvp * tkp;
    int nth = pe__run_threads(run, 2.0 * B * ctx->H * ctx->T * ctx->Tk * D);
    int64_t nkb;
    pe_status st;
    uint8_t *tiles = mask_tiles(ctx, &nkb, &st, err);
    if (st) return st;
    const int priv_grads = m->score_mod_backward || m->value_mod_backward; /* hooks that write d(tables) */

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
    const size_t sc0 = scratch_floats(dp, dvp, tile_scratch(ctx, m), has_mod(m)), sc = sc0 + (size_t)(per + pv);
    const size_t npk = (size_t)(items * (2 * per + pv)), npriv = priv_n && copies ? (size_t)(priv_n * copies) : 0;
    float *packed = pe__scratch_get(ctx->scratch, npk + sc * nth + (npriv + 15) / 16 * 16);
    if (!packed) return pe_error(err, PE_ENOMEM, "out of memory for the fused attention's backward");
    float *scratch = packed + npk, *priv = npriv ? scratch + sc * nth : NULL;
    if (priv) memset(priv, 0, sizeof(float) * npriv);
    float *kt = packed, *kr = packed + items * per, *vt = packed + 2 * items * per;
    PE_OMP(omp parallel num_threads(nth))
    {
        unsigned csr = pe__ftz_enter(run);
        PE_OMP(omp for schedule(static))
        for (int64_t bg = 0; bg < items; bg++)
            pack_kv(ctx, k, D, bg / Hkv, bg % Hkv, dp, tkp, kt + bg * per, kr + bg * per),
            pack_kv(ctx, v, Dv, bg / Hkv, bg % Hkv, dvp, tkp, vt + bg * pv, NULL);
        const int tid = omp_get_thread_num();
        pe__ctx tctx = *ctx;
        bwd_thread t = {.g = *ctx->g};
        tctx.g = &t.g;
        t.j = job_init(&tctx, m, K, dp, dvp, tkp, scratch + sc * tid);
        t.dka = scratch + sc * tid + sc0, t.dva = t.dka + per;
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
    return PE_OK;
}

