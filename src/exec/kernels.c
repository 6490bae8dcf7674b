/* SIMD kernels of the fused attention path (fused.c) and the RoPE rotation.
 *
 * The second half of this file is compiled once per instruction set by including itself:
 * AVX-512 and AVX2+FMA (x86-64 with GCC, through `#pragma GCC target`, so the default build
 * still runs on any x86-64), then generic vectors for every target. The arithmetic uses GCC
 * vector extensions of the pass's width; FMA is explicit (the ISA's intrinsic), so nothing
 * depends on -ffp-contract. pe__kernels_pick chooses a set at run time from the CPU.
 *
 * Tiles (fused.h): a block of PE_BR queries against PE_BC keys of one (b, h).
 *   forward   s = q_s k^T (zero for PE__SCORE_OWN), the method's score_mod (a bias, a
 *             product, a gather), mask, online softmax into (m, l), acc += p v and its value_mod
 *   backward  s as forward, p = exp(s - m) / l, dv += p^T do, dp = do v^T (+ value_mod's),
 *             ds = p (dp - delta), score_mod's backward, dq += ds k, dk += ds^T q_s
 * with q_s = scale q packed per block (so dk needs no further scale and dq takes it once).
 * The method's tile hooks (internal.h: pe__tile) are its own code, the same the reference
 * path calls over a whole head; they see the tile's unscaled q rows, packed k rows and
 * transposed keys.
 * exp is a Cephes-style polynomial with 2^n built from two factors: inputs below `lo` give 0,
 * so with lo = -87 no result is denormal (doc/perf.md, item 1: far ALiBi logits), and with lo = -104 it
 * underflows gradually as IEEE expf. The RoPE rotation performs the same two products and
 * one sum per element as the scalar reference (no FMA), so its results are bit-identical. */
#ifndef PE_KPASS
#include <stdint.h>

#ifdef __clang__ /* clang contracts a * b - c * d into FMAs by default; GCC's C mode does not */
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
/* ... but GCC's full vectorizer (the build's -ftree-vectorize) turns the rotation's scalar tail
 * into fmaddsub under the FMA targets below: the arithmetic here is vectorised by hand, so
 * keep -O2's own cheap model (the rotation stays bit-identical to the scalar loop) */
#pragma GCC optimize("vect-cost-model=very-cheap")
#endif

#include "fused.h"

#if defined(__x86_64__) && defined(__GNUC__) /* GCC, and clang (the fuzzing build) */
#define PE_KX86 1
#include <immintrin.h>
#define PE_KPASS 512
#include "kernels.c"
#undef PE_KPASS
#define PE_KPASS 256
#include "kernels.c"
#undef PE_KPASS
#endif
#define PE_KPASS 1
#include "kernels.c"
#undef PE_KPASS

const pe__kernels *pe__kernels_pick(const char *isa) {
    static const pe__kernels generic = {"generic", forward_1, backward_1, rope_1, mm_acc_1, decode_1, softmax_1, sincos_1, softplus_1};
#ifdef PE_KX86
    static const pe__kernels k512 = {"avx512", forward_512, backward_512, rope_512, mm_acc_512, decode_512, softmax_512, sincos_512, softplus_512};
    static const pe__kernels k256 = {"avx2", forward_256, backward_256, rope_256, mm_acc_256, decode_256, softmax_256, sincos_256, softplus_256};
    __builtin_cpu_init();
    int has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int has512 = has256 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (isa && !strcmp(isa, "generic")) return &generic;
    if (isa && !strcmp(isa, "avx2") && has256) return &k256;
    if (has512) return &k512;
    if (has256) return &k256;
#else
    (void)isa;
#endif
    return &generic;
}

#else /* ---- one instruction set: PE_KPASS 512, 256 or 1 (generic) ------------------------ */

#include "simd.h" /* this pass's vector type, loads, exp and the names of its kernels */

/* s (rows, cols; lds) = a (rows, k; lda) bt (k, cols; ldb); rows % MRN == 0, cols % 2VEC == 0 */
static void mm_nt(float *s, int64_t lds, const float *a, int64_t lda, const float *bt, int64_t ldb,
                  int64_t rows, int64_t cols, int64_t k) {
    for (int64_t r0 = 0; r0 < rows; r0 += MRN)
        for (int64_t c0 = 0; c0 < cols; c0 += 2 * VEC) {
            vf acc[MRN][2];
#pragma GCC unroll 8
            for (int m = 0; m < MRN; m++) acc[m][0] = acc[m][1] = vbc(0.0f);
            const float *ar = a + r0 * lda, *b = bt + c0;
            for (int64_t d = 0; d < k; d++, b += ldb) {
                vf b0 = vld(b), b1 = vld(b + VEC);
#pragma GCC unroll 8
                for (int m = 0; m < MRN; m++) {
                    vf x = vbc(ar[m * lda + d]);
                    acc[m][0] = fmadd(x, b0, acc[m][0]);
                    acc[m][1] = fmadd(x, b1, acc[m][1]);
                }
            }
#pragma GCC unroll 8
            for (int m = 0; m < MRN; m++) {
                vst(s + (r0 + m) * lds + c0, acc[m][0]);
                vst(s + (r0 + m) * lds + c0 + VEC, acc[m][1]);
            }
        }
}

/* c (rows, dp; ldc) += sum_l A(r, l) b (l, dp; ldb), A(r, l) = a[r ars + l als]: a row-major
 * tile (ars = lda, als = 1) or its transpose (ars = 1, als = lda). rows % MRR == 0, dp % VEC == 0 */
static void mm_acc(float *c, int64_t ldc, const float *a, int64_t ars, int64_t als, const float *b,
                   int64_t ldb, int64_t rows, int64_t L, int64_t dp) {
    int64_t r0 = 0;
    /* Narrow heads (head_dim 16 on AVX-512): the loops below would give a vector of columns
     * MRR accumulators, too few independent chains to cover the FMA's latency; here it has
     * twice as many rows. Each element's sum keeps its order over l: the same bits. */
    if (dp < NV * VEC)
        for (; r0 + 2 * MRR <= rows; r0 += 2 * MRR)
            for (int64_t d0 = 0; d0 < dp; d0 += VEC) {
                vf acc[2 * MRR];
#pragma GCC unroll 8
                for (int m = 0; m < 2 * MRR; m++) acc[m] = vld(c + (r0 + m) * ldc + d0);
                const float *ar = a + r0 * ars;
                for (int64_t l = 0; l < L; l++) {
                    const vf bv = vld(b + l * ldb + d0);
#pragma GCC unroll 8
                    for (int m = 0; m < 2 * MRR; m++) acc[m] = fmadd(vbc(ar[m * ars + l * als]), bv, acc[m]);
                }
#pragma GCC unroll 8
                for (int m = 0; m < 2 * MRR; m++) vst(c + (r0 + m) * ldc + d0, acc[m]);
            }
    for (; r0 < rows; r0 += MRR) {
        int64_t d0 = 0;
        for (; d0 + NV * VEC <= dp; d0 += NV * VEC) {
            vf acc[MRR][NV];
#pragma GCC unroll 8
            for (int m = 0; m < MRR; m++)
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) acc[m][v] = vld(c + (r0 + m) * ldc + d0 + v * VEC);
            const float *ar = a + r0 * ars;
            for (int64_t l = 0; l < L; l++) {
                const float *bl = b + l * ldb + d0;
                vf bv[NV];
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) bv[v] = vld(bl + v * VEC);
#pragma GCC unroll 8
                for (int m = 0; m < MRR; m++) {
                    vf x = vbc(ar[m * ars + l * als]);
#pragma GCC unroll 4
                    for (int v = 0; v < NV; v++) acc[m][v] = fmadd(x, bv[v], acc[m][v]);
                }
            }
#pragma GCC unroll 8
            for (int m = 0; m < MRR; m++)
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) vst(c + (r0 + m) * ldc + d0 + v * VEC, acc[m][v]);
        }
        for (; d0 < dp; d0 += VEC) {
            vf acc[MRR];
#pragma GCC unroll 8
            for (int m = 0; m < MRR; m++) acc[m] = vld(c + (r0 + m) * ldc + d0);
            const float *ar = a + r0 * ars;
            for (int64_t l = 0; l < L; l++) {
                vf bv = vld(b + l * ldb + d0);
#pragma GCC unroll 8
                for (int m = 0; m < MRR; m++) acc[m] = fmadd(vbc(ar[m * ars + l * als]), bv, acc[m]);
            }
#pragma GCC unroll 8
            for (int m = 0; m < MRR; m++) vst(c + (r0 + m) * ldc + d0, acc[m]);
        }
    }
}

/* -inf where key j0 + c is past the keys (c >= nj), outside query i0 + r's band (causal: after
 * its token, key qoff + i; a window: before or after it), or masked by attn_mask (partial
 * tiles only). Rows >= ni are padding and left alone. */
static void mask_tile(const pe__fjob *j, float *s, int64_t ni, int64_t i0, int64_t j0, int64_t nj) {
    const int partial = j->mask && j->tiles[(i0 / PE_BR) * j->nkb + j0 / PE_BC] == 1;
    vi lane;
    for (int k = 0; k < VEC; k++) lane[k] = k;
    const vi ninf = (vi)vbc(-INFINITY);
    for (int64_t r = 0; r < ni; r++) {
        int64_t lo, hi;
        pe__band_range(j->band, j->qoff, i0 + r, j->Tk, &lo, &hi);
        const int64_t to = pe__clip(lo - j0, 0, nj), from = pe__clip(hi - j0, to, nj);
        if (to > 0 || from < PE_BC) /* columns [0, to) and [from, PE_BC), a vector at a time */
            for (int c = 0; c < PE_BC; c += VEC) {
                const vi col = lane + c, out = (col < (int32_t)to) | (col >= (int32_t)from);
                vst(s + r * PE_BC + c, (vf)(((vi)vld(s + r * PE_BC + c) & ~out) | (ninf & out)));
            }
        if (!partial) continue;
        const uint8_t *mk = j->mask + (i0 + r) * j->ldm + j0;
        for (int64_t c = to; c < from; c++)
            if (!mk[c]) s[r * PE_BC + c] = -INFINITY;
    }
}

/* Whether the tile at (i0, j0) has no key left to any of its queries (attn_mask) */
static inline int tile_skipped(const pe__fjob *j, int64_t i0, int64_t j0) {
    return j->mask && !j->tiles[(i0 / PE_BR) * j->nkb + j0 / PE_BC];
}

/* s (PE_BR, PE_BC) = a bt over k: whole, or (half) without the top right quarter, which is set
 * to 0 (the hooks and the masks read every entry) */
static void mm_nt_tile(float *s, const float *a, int64_t lda, const float *bt, int64_t ldb, int64_t k, int half) {
    if (!half) {
        mm_nt(s, PE_BC, a, lda, bt, ldb, PE_BR, PE_BC, k);
        return;
    }
    mm_nt(s, PE_BC, a, lda, bt, ldb, PE_HR, PE_HC, k);
    for (int64_t r = 0; r < PE_HR; r++) memset(s + r * PE_BC + PE_HC, 0, sizeof(float) * PE_HC);
    mm_nt(s + PE_HR * PE_BC, PE_BC, a + PE_HR * lda, lda, bt, ldb, PE_BR - PE_HR, PE_BC, k);
}

/* c (PE_BR queries, dp) += p (PE_BR, PE_BC) b (PE_BC keys, dp): the top rows over the left keys
 * only when half */
static void mm_acc_queries(float *c, const float *p, const float *b, int64_t dp, int half) {
    if (!half) {
        mm_acc(c, dp, p, PE_BC, 1, b, dp, PE_BR, PE_BC, dp);
        return;
    }
    mm_acc(c, dp, p, PE_BC, 1, b, dp, PE_HR, PE_HC, dp);
    mm_acc(c + PE_HR * dp, dp, p + PE_HR * PE_BC, PE_BC, 1, b, dp, PE_BR - PE_HR, PE_BC, dp);
}

/* c (PE_BC keys, dp) += p^T (PE_BC, PE_BR) b (PE_BR queries, dp): the right keys over the bottom
 * queries only when half */
static void mm_acc_keys(float *c, const float *p, const float *b, int64_t dp, int half) {
    if (!half) {
        mm_acc(c, dp, p, 1, PE_BC, b, dp, PE_BC, PE_BR, dp);
        return;
    }
    mm_acc(c, dp, p, 1, PE_BC, b, dp, PE_HC, PE_BR, dp);
    mm_acc(c + PE_HC * dp, dp, p + PE_HR * PE_BC + PE_HC, 1, PE_BC, b + PE_HR * dp, dp, PE_BC - PE_HC, PE_BR - PE_HR, dp);
}

/* One tile of the online softmax: rows [0, ni) of s become p = exp(s - m_new), the running
 * max m and sum l are updated and the accumulator rows rescaled; padding rows become 0. */
static void online_softmax(float *s, int64_t ni, float *m, float *l, float *acc, int64_t dp, float lo) {
    for (int64_t r = 0; r < ni; r++) {
        float *sr = s + r * PE_BC;
        vf mx = vld(sr);
        for (int c = VEC; c < PE_BC; c += VEC) mx = vmax(vld(sr + c), mx);
        float mt = hmax(mx), mnew = mt > m[r] ? mt : m[r];
        if (mnew == -INFINITY) { /* every key so far masked */
            memset(sr, 0, sizeof(float) * PE_BC);
            continue;
        }
        float diff = m[r] - mnew, alpha = diff < lo ? 0.0f : expf(diff);
        vf sum = vbc(0.0f), mn = vbc(mnew);
        for (int c = 0; c < PE_BC; c += VEC) {
            vf p = vexp(vld(sr + c) - mn, lo);
            vst(sr + c, p);
            sum += p;
        }
        l[r] = l[r] * alpha + hsum_tree(sum);
        m[r] = mnew;
        if (alpha != 1.0f) {
            float *ar = acc + r * dp;
            for (int64_t d = 0; d < dp; d += VEC) vst(ar + d, vld(ar + d) * alpha);
        }
    }
    if (ni < PE_BR) memset(s + ni * PE_BC, 0, sizeof(float) * PE_BC * (PE_BR - ni));
}

/* dst (PE_BR, dp) = f src rows [0, n) (row stride ld, D wide), zero elsewhere */
static void pack_rows(float *dst, const float *src, int64_t ld, int64_t n, int64_t D, int64_t dp, float f) {
    const vf fv = vbc(f);
    for (int64_t r = 0; r < PE_BR; r++) {
        float *d = dst + r * dp;
        int64_t e = 0;
        if (r < n) {
            for (; e + VEC <= D; e += VEC) vst(d + e, fv * vld(src + r * ld + e));
            for (; e < D; e++) d[e] = f * src[r * ld + e];
        }
        for (; e < dp; e++) d[e] = 0.0f;
    }
}

static int64_t KN(forward)(const pe__fjob *j) {
    const int64_t dp = j->dp, ni = j->ni, i0 = j->i0, D = j->D, Dv = j->Dv, dvp = j->dvp;
    float *qs = j->a, *acc = j->c, *s = j->s, *m = j->r, *l = j->r + PE_BR;
    const pe__method *mod = j->mod;
    pe__tile tl = {.b = j->b, .h = j->h, .i0 = i0, .ni = ni, .q = j->q + i0 * j->ld, .ldq = j->ld, .ldk = dp,
                   .ldkt = j->tkp, .scratch = j->ms, .mm = j->mm, .pr = PE_BR, .pc = PE_BC};
    pack_rows(qs, j->q + i0 * j->ld, j->ld, ni, D, dp, j->scale);
    memset(acc, 0, sizeof(float) * PE_BR * dvp);
    for (int64_t r = 0; r < PE_BR; r++) m[r] = -INFINITY, l[r] = 0.0f;
    int64_t jbeg, jend;
    pe__band_tiles(j->band, j->qoff, i0, ni, j->Tk, &jbeg, &jend);
    const int block = mod && (mod->flags & PE__SCORE_BLOCK);
    if (block) {
        tl.phase = PE__TILE_BEGIN, tl.j0 = jbeg, tl.nj = jend - jbeg;
        mod->score_mod(j->ctx, &tl, NULL, 0);
        tl.phase = PE__TILE_PAIRS;
    }
    for (int64_t j0 = jbeg; j0 < jend; j0 += PE_BC) {
        int64_t nj = j->Tk - j0 < PE_BC ? j->Tk - j0 : PE_BC;
        if (tile_skipped(j, i0, j0)) continue;
        const int half = pe__diag_half(j->band, j->qoff, j->Tk, i0, j0);
        if (j->own) memset(s, 0, sizeof(float) * PE_BR * PE_BC);
        else mm_nt_tile(s, qs, dp, j->kt + j0, j->tkp, dp, half);
        tl.j0 = j0, tl.nj = nj, tl.k = j->kr ? j->kr + j0 * dp : NULL, tl.kt = j->kt + j0;
        if (mod && mod->score_mod) mod->score_mod(j->ctx, &tl, s, PE_BC);
        mask_tile(j, s, ni, i0, j0, nj);
        online_softmax(s, ni, m, l, acc, dvp, j->lo);
        mm_acc_queries(acc, s, j->v + j0 * dvp, dvp, half);
        if (mod && mod->value_mod) mod->value_mod(j->ctx, &tl, s, PE_BC, acc, dvp);
    }
    int64_t bad = -1;
    for (int64_t r = 0; r < ni; r++) {
        float il = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        if (!(l[r] > 0) && bad < 0) bad = r;
        float *o = j->out + (i0 + r) * j->ldo;
        for (int64_t d = 0; d < Dv; d++) o[d] = acc[r * dvp + d] * il;
        j->m[i0 + r] = m[r];
        j->il[i0 + r] = il;
    }
    return bad;
}

static void KN(backward)(const pe__fjob *j) {
    const int64_t dp = j->dp, D = j->D, T = j->T, Dv = j->Dv, dvp = j->dvp, ldo = j->ldo;
    float *qs = j->a, *dos = j->c, *dqa = j->e, *s = j->s, *t = j->t;
    float *delta = j->r, *mr = j->r + PE_BR, *ilr = j->r + 2 * PE_BR;
    const pe__method *mod = j->mod;
    for (int64_t i0 = 0; i0 < T; i0 += PE_BR) {
        const int64_t ni = T - i0 < PE_BR ? T - i0 : PE_BR;
        pack_rows(qs, j->q + i0 * j->ld, j->ld, ni, D, dp, j->scale);
        pack_rows(dos, j->dout + i0 * ldo, ldo, ni, Dv, dvp, 1.0f);
        for (int64_t r = 0; r < PE_BR; r++) {
            /* delta_i = sum_j p_ij dp_ij = do_i . o_i, in double over 8 fixed lanes (the same
             * sums for every instruction set; the lanes' loop vectorises) */
            double dl[8] = {0};
            if (r < ni) {
                const float *a = j->dout + (i0 + r) * ldo, *b = j->o + (i0 + r) * ldo;
                int64_t d = 0;
                for (; d + 8 <= Dv; d += 8)
                    for (int k = 0; k < 8; k++) dl[k] += (double)a[d + k] * b[d + k];
                for (; d < Dv; d++) dl[0] += (double)a[d] * b[d];
            }
            delta[r] = (float)(((dl[0] + dl[1]) + (dl[2] + dl[3])) + ((dl[4] + dl[5]) + (dl[6] + dl[7])));
            mr[r] = r < ni ? j->m[i0 + r] : 0.0f;
            ilr[r] = r < ni ? j->il[i0 + r] : 0.0f; /* padding rows: p = 0 */
        }
        memset(dqa, 0, sizeof(float) * PE_BR * dp);
        pe__tile tl = {.b = j->b, .h = j->h, .i0 = i0, .ni = ni, .q = j->q + i0 * j->ld, .ldq = j->ld, .ldk = dp,
                       .ldkt = j->tkp, .dq = j->dq + i0 * j->ld, .dout = j->dout + i0 * ldo, .ldd = ldo,
                       .scratch = j->ms, .mm = j->mm, .pr = PE_BR, .pc = PE_BC};
        int64_t jbeg, jend;
        pe__band_tiles(j->band, j->qoff, i0, ni, j->Tk, &jbeg, &jend);
        const int block = mod && (mod->flags & PE__SCORE_BLOCK);
        if (block) {
            tl.phase = PE__TILE_BEGIN, tl.j0 = jbeg, tl.nj = jend - jbeg;
            mod->score_mod(j->ctx, &tl, NULL, 0);
            mod->score_mod_backward(j->ctx, &tl, NULL, NULL, 0);
            tl.phase = PE__TILE_PAIRS;
        }
        for (int64_t j0 = jbeg; j0 < jend; j0 += PE_BC) {
            int64_t nj = j->Tk - j0 < PE_BC ? j->Tk - j0 : PE_BC;
            if (tile_skipped(j, i0, j0)) continue;
            const int half = pe__diag_half(j->band, j->qoff, j->Tk, i0, j0);
            if (j->own) memset(s, 0, sizeof(float) * PE_BR * PE_BC);
            else mm_nt_tile(s, qs, dp, j->kt + j0, j->tkp, dp, half);
            tl.j0 = j0, tl.nj = nj, tl.k = j->kr + j0 * dp, tl.kt = j->kt + j0, tl.dk = j->dk + j0 * dp;
            if (mod && mod->score_mod) {
                if (mod->flags & PE__SCORE_PLAIN) memcpy(j->u, s, sizeof(float) * PE_BR * PE_BC);
                mod->score_mod(j->ctx, &tl, s, PE_BC);
            }
            mask_tile(j, s, ni, i0, j0, nj);
            for (int64_t r = 0; r < PE_BR; r++) { /* p = exp(s - m) / l */
                vf mv = vbc(mr[r]);
                float il = ilr[r];
                for (int c = 0; c < PE_BC; c += VEC) vst(s + r * PE_BC + c, vexp(vld(s + r * PE_BC + c) - mv, j->lo) * il);
            }
            /* dv += p^T do; dp = do v^T; ds = p (dp - delta) */
            mm_acc_keys(j->dv + j0 * dvp, s, dos, dvp, half);
            mm_nt_tile(t, dos, dvp, j->vt + j0, j->tkp, dvp, half);
            if (mod && mod->value_mod_backward)
                mod->value_mod_backward(j->ctx, &tl, s, PE_BC, j->dout + i0 * ldo, ldo, t, PE_BC);
            for (int64_t r = 0; r < PE_BR; r++) {
                vf dl = vbc(delta[r]);
                for (int c = 0; c < PE_BC; c += VEC)
                    vst(t + r * PE_BC + c, vld(s + r * PE_BC + c) * (vld(t + r * PE_BC + c) - dl));
            }
            if (mod && mod->score_mod_backward)
                mod->score_mod_backward(j->ctx, &tl, mod->flags & PE__SCORE_PLAIN ? j->u : NULL, t, PE_BC);
            if (j->own) continue; /* no plain term */
            /* s = scale q.k, so: dq += scale ds k (scale below), dk += ds^T q_s */
            mm_acc_queries(dqa, t, j->kr + j0 * dp, dp, half);
            mm_acc_keys(j->dk + j0 * dp, t, qs, dp, half);
        }
        if (block) tl.phase = PE__TILE_END, tl.nj = 0, mod->score_mod_backward(j->ctx, &tl, NULL, NULL, 0);
        const vf sv = vbc(j->scale);
        for (int64_t r = 0; r < ni; r++) {
            float *dq = j->dq + (i0 + r) * j->ld;
            int64_t d = 0;
            for (; d + VEC <= D; d += VEC) vst(dq + d, vld(dq + d) + sv * vld(dqa + r * dp + d));
            for (; d < D; d++) dq[d] += j->scale * dqa[r * dp + d];
        }
    }
}

/* A piece of a decode call (pe__djob): per chunk of keys, s = q_s k^T for every row (each key
 * row, all its kv heads, loaded once), the method's bias (score_mod) per head, the band (causal, window), the online
 * softmax, then acc += p v with each value row loaded once. Keys are walked in memory order:
 * memory-bound by design. */
#ifndef PF_ROWS
#define PF_ROWS 8 /* paged keys: prefetched this many rows ahead (a row may open another block) */
#endif
static void KN(decode)(const pe__djob *j) {
    const int64_t D = j->D, dp = j->dp, T = j->T, Rg = j->Rg, G = j->Hkv, R = G * Rg, Dv = D / VEC * VEC;
    const int64_t nq = j->group * T; /* real rows of a kv head */
    float *qs = j->qs, *acc = j->acc, *s = j->s, *m = j->m, *l = j->l;
    memset(qs, 0, sizeof(float) * (size_t)(R * dp));
    memset(acc, 0, sizeof(float) * (size_t)(R * dp));
    for (int64_t r = 0; r < R; r++) {
        const int64_t g = r / Rg, x = r % Rg;
        m[r] = -INFINITY, l[r] = 0.0f;
        if (x >= nq) continue;
        const float *src = j->q + (x % T) * j->ld + (g * j->group + x / T) * D;
        for (int64_t d = 0; d < D; d++) qs[r * dp + d] = j->scale * src[d];
    }
    int64_t first, last, lo, hi; /* the keys any query sees: its band's */
    pe__band_range(j->band, j->qoff, 0, j->Tk, &first, &hi);
    pe__band_range(j->band, j->qoff, T - 1, j->Tk, &lo, &last);
    const int64_t jend = j->u1 < last ? j->u1 : last;
    for (int64_t j0 = j->u0 > first ? j->u0 : first; j0 < jend; j0 += PE_BC) {
        const int64_t nj = jend - j0 < PE_BC ? jend - j0 : PE_BC;
        for (int64_t c = 0; c < nj; c++) {
            const float *kr = j->krows ? j->krows[j0 + c] : j->k + (j0 + c) * j->ldk;
            if (j->krows && j0 + c + PF_ROWS < jend) /* paged: the row a few keys on, maybe in another block */
                for (int64_t e = 0; e < G * D; e += 64 / (int64_t)sizeof(float)) __builtin_prefetch(j->krows[j0 + c + PF_ROWS] + e);
            for (int64_t g = 0; g < G; g++)
                for (int64_t x0 = 0; x0 < Rg; x0 += 4) { /* four rows per pass over the head's key */
                    const float *kg = kr + g * D, *q0 = qs + (g * Rg + x0) * dp;
                    vf a0 = vbc(0.0f), a1 = a0, a2 = a0, a3 = a0;
                    for (int64_t d = 0; d < Dv; d += VEC) {
                        vf kv = vld(kg + d);
                        a0 = fmadd(vld(q0 + d), kv, a0);
                        a1 = fmadd(vld(q0 + dp + d), kv, a1);
                        a2 = fmadd(vld(q0 + 2 * dp + d), kv, a2);
                        a3 = fmadd(vld(q0 + 3 * dp + d), kv, a3);
                    }
                    float t[4] = {hsum_tree(a0), hsum_tree(a1), hsum_tree(a2), hsum_tree(a3)};
                    for (int64_t d = Dv; d < D; d++)
                        for (int x = 0; x < 4; x++) t[x] += q0[x * dp + d] * kg[d];
                    for (int x = 0; x < 4; x++) s[(g * Rg + x0 + x) * PE_BC + c] = t[x];
                }
        }
        for (int64_t h = 0; h < G * j->group && j->mod; h++) { /* a bias: no q or k in the tile */
            const pe__tile tl = {.b = j->b, .h = h, .ni = T, .j0 = j0, .nj = nj};
            j->mod->score_mod(j->ctx, &tl, s + ((h / j->group) * Rg + (h % j->group) * T) * PE_BC, PE_BC);
        }
        for (int64_t r = 0; r < R; r++) { /* past the chunk, padding rows, or outside the query's band */
            const int64_t x = r % Rg;
            int64_t to = 0, from = 0;
            if (x < nq) {
                pe__band_range(j->band, j->qoff, x % T, j->Tk, &lo, &hi);
                to = pe__clip(lo - j0, 0, nj), from = pe__clip(hi - j0, to, nj);
            }
            for (int64_t c = 0; c < to; c++) s[r * PE_BC + c] = -INFINITY;
            for (int64_t c = from; c < PE_BC; c++) s[r * PE_BC + c] = -INFINITY;
        }
        online_softmax(s, R, m, l, acc, dp, j->lo);
        for (int64_t c = 0; c < nj; c++) { /* acc += p v, the value row in memory order */
            const float *vr = j->vrows ? j->vrows[j0 + c] : j->v + (j0 + c) * j->ldk;
            if (j->vrows && j0 + c + PF_ROWS < jend)
                for (int64_t e = 0; e < G * D; e += 64 / (int64_t)sizeof(float)) __builtin_prefetch(j->vrows[j0 + c + PF_ROWS] + e);
            for (int64_t g = 0; g < G; g++) {
                const float *vg = vr + g * D;
                for (int64_t x = 0; x < nq; x++) {
                    const int64_t r = g * Rg + x;
                    const vf p = vbc(s[r * PE_BC + c]);
                    float *ar = acc + r * dp;
                    for (int64_t d = 0; d < Dv; d += VEC) vst(ar + d, fmadd(p, vld(vg + d), vld(ar + d)));
                    for (int64_t d = Dv; d < D; d++) ar[d] += s[r * PE_BC + c] * vg[d];
                }
            }
        }
    }
}

/* The reference executor's row softmax (pe__softmax_forward's contract: masked entries -inf
 * give exactly 0, a row with every entry masked all zeros, a NaN or +inf row all NaN; a sink
 * is one more logit of the sum) with this pass's exp: libm's scalar expf was a fifth of a
 * small model's training step. The row's tail past a whole vector goes through one padded
 * vector, so every entry takes the same exp. */
static void KN(softmax)(const float *s, float *p, int64_t n, int64_t m, float sink, float lo) {
    const int64_t mv = m / VEC * VEC;
    for (int64_t i = 0; i < n; i++) {
        const float *si = s + i * m;
        float *pi = p + i * m, tail[VEC];
        for (int c = 0; c < VEC; c++) tail[c] = mv + c < m ? si[mv + c] : -INFINITY;
        vf mx = vld(tail);
        for (int64_t j = 0; j < mv; j += VEC) mx = vmax(vld(si + j), mx);
        float mt = hmax(mx);
        if (mt == -INFINITY) { /* all masked, unless a NaN hid from the max */
            int nan = 0;
            for (int64_t j = 0; j < m; j++) nan |= si[j] != si[j];
            for (int64_t j = 0; j < m; j++) pi[j] = nan ? NAN : 0.0f;
            continue;
        }
        mt = sink > mt ? sink : mt;
        const vf mn = vbc(mt);
        vf sum = vbc(0.0f);
        for (int64_t j = 0; j < mv; j += VEC) {
            vf e = vexp(vld(si + j) - mn, lo);
            vst(pi + j, e);
            sum += e;
        }
        vf e = vexp(vld(tail) - mn, lo);
        sum += e;
        float total = hsum_tree(sum) + (sink == -INFINITY ? 0.0f : expf(sink - mt));
        if (total != total) { /* NaN in, or +inf (inf - inf) */
            for (int64_t j = 0; j < m; j++) pi[j] = NAN;
            continue;
        }
        vst(tail, e);
        for (int64_t c = 0; mv + c < m; c++) pi[mv + c] = tail[c];
        const vf inv = vbc(1.0f / total);
        for (int64_t j = 0; j < mv; j += VEC) vst(pi + j, vld(pi + j) * inv);
        for (int64_t j = mv; j < m; j++) pi[j] *= inv[0];
    }
}

/* pe__rope_rotate over rows [r0, r1): the same products and sums as the scalar loop
 * (x1 c - x2 s, x2 c + x1 s with s = sin_sign sin), vectorised over the pairs of a head with
 * the row's cos and sin laid out once for its nh heads. */
static void KN(rope)(float *y, const float *x, int64_t r0, int64_t r1, int64_t ldx, int64_t nh, int64_t D, int64_t rd,
                     int layout, const float *cs, float sin_sign) {
    enum { CH = 256 }; /* pairs per chunk */
    float cb[2 * CH] __attribute__((aligned(64))), sb[2 * CH] __attribute__((aligned(64)));
    const int64_t half = rd / 2;
    const vi swap = SWAP;
    vi halves; /* lane t <-> lane t + VEC/2 */
    for (int e = 0; e < VEC; e++) halves[e] = (e + VEC / 2) % VEC;
    for (int64_t i = r0; i < r1; i++) {
        const float *c = cs + i * half * 2;
        if (layout == PE_ROPE_HALF && 2 * half == VEC) {
            /* a head's rotated slice is one vector (head_dim 16 on AVX-512, which the loop below
             * would leave scalar): x' = x co + (its halves swapped) si, co = (c, c), si = (-s, s) */
            vf co = {0}, si = {0};
            for (int64_t t = 0; t < half; t++) {
                const float s_ = sin_sign * c[2 * t + 1];
                co[t] = co[t + half] = c[2 * t];
                si[t] = -s_, si[t + half] = s_;
            }
            for (int64_t h = 0; h < nh; h++) {
                const vf a = vld(x + i * ldx + h * D);
                vst(y + i * ldx + h * D, a * co + SHUF(a, halves) * si);
            }
            continue;
        }
        for (int64_t t0 = 0; t0 < half; t0 += CH) {
            const int64_t n = half - t0 < CH ? half - t0 : CH;
            if (layout == PE_ROPE_HALF) {
                for (int64_t t = 0; t < n; t++) cb[t] = c[2 * (t0 + t)], sb[t] = sin_sign * c[2 * (t0 + t) + 1];
                for (int64_t h = 0; h < nh; h++) {
                    const float *xa = x + i * ldx + h * D + t0, *xb = xa + half;
                    float *ya = y + i * ldx + h * D + t0, *yb = ya + half;
                    int64_t t = 0;
                    for (; t + VEC <= n; t += VEC) {
                        vf a = vld(xa + t), b = vld(xb + t), co = vld(cb + t), si = vld(sb + t);
                        vst(ya + t, a * co - b * si);
                        vst(yb + t, b * co + a * si);
                    }
                    for (; t < n; t++) {
                        float a = xa[t], b = xb[t];
                        ya[t] = a * cb[t] - b * sb[t];
                        yb[t] = b * cb[t] + a * sb[t];
                    }
                }
            } else { /* pairs (2t, 2t+1): x' = x co + swap(x) si, si = (-s, s) per pair */
                for (int64_t t = 0; t < n; t++) {
                    float s_ = sin_sign * c[2 * (t0 + t) + 1];
                    cb[2 * t] = cb[2 * t + 1] = c[2 * (t0 + t)];
                    sb[2 * t] = -s_, sb[2 * t + 1] = s_;
                }
                for (int64_t h = 0; h < nh; h++) {
                    const float *xp = x + i * ldx + h * D + 2 * t0;
                    float *yp = y + i * ldx + h * D + 2 * t0;
                    int64_t e = 0;
                    for (; e + VEC <= 2 * n; e += VEC) {
                        vf a = vld(xp + e);
                        vst(yp + e, a * vld(cb + e) + SHUF(a, swap) * vld(sb + e));
                    }
                    for (; e < 2 * n; e += 2) {
                        float a = xp[e], b = xp[e + 1];
                        yp[e] = a * cb[e] - b * sb[e + 1];
                        yp[e + 1] = b * cb[e] + a * sb[e + 1];
                    }
                }
            }
        }
    }
}

#include "vmath.h" /* sin and cos in double, softplus: the methods' per-token stages */
#include "simd_end.h"
#endif
