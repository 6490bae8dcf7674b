/* Tile helpers of the relative methods whose tables are read per pair (shaw, huang1 ..
 * huang4): the rows a tile reads lie between the clipped offsets of its extreme positions, and
 * the products of rows with those table rows. */
#include "../internal.h"

/* Each output element is the sum over d, in order, of x[i][d] tt[d][r], from 0 (as axpys of
 * table rows into zeros: no reduction to reorder). A block of 4 rows by 8 columns keeps its
 * sums in vector registers across all of d, so each table segment is loaded once for 4 rows
 * and no output is stored before its last term (an axpy per d loaded and stored the row D
 * times); the last columns and rows go an element at a time, in the same order. */
typedef float tp_v8 __attribute__((vector_size(8 * sizeof(float))));
enum { TP_ROWS = 4, TP_COLS = 8 };

static inline float tp_dot(const float *xi, const float *col, int64_t R, int64_t D) {
    float s = 0;
    for (int64_t d = 0; d < D; d++) s += xi[d] * col[d * R];
    return s;
}

PE_TILE_SIMD void pe__table_products(const float *x, int64_t ldx, int64_t n, const float *tt, int64_t R, int64_t D,
                                     int64_t lo, int64_t nr, float *out) {
    const int64_t full = nr - nr % TP_COLS;
    int64_t i = 0;
    for (; i + TP_ROWS <= n; i += TP_ROWS) {
        const float *x0 = x + i * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        for (int64_t r0 = 0; r0 < full; r0 += TP_COLS) {
            tp_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, row;
            for (int64_t d = 0; d < D; d++) {
                memcpy(&row, tt + d * R + lo + r0, sizeof row);
                a0 += x0[d] * row, a1 += x1[d] * row, a2 += x2[d] * row, a3 += x3[d] * row;
            }
            float *o = out + i * nr + r0;
            memcpy(o, &a0, sizeof a0), memcpy(o + nr, &a1, sizeof a1);
            memcpy(o + 2 * nr, &a2, sizeof a2), memcpy(o + 3 * nr, &a3, sizeof a3);
        }
    }
    for (int64_t k = 0; k < n; k++) /* the last columns of every row, then the last rows whole */
        for (int64_t r = k < i ? full : 0; r < nr; r++) out[k * nr + r] = tp_dot(x + k * ldx, tt + lo + r, R, D);
}

PE_TILE_SIMD void pe__weighted_rows(float *y, const float *c, int64_t cs, int64_t nc, const float *rows, int64_t ldr,
                                    int64_t D) {
    int64_t d0 = 0;
    for (; d0 + 4 * TP_COLS <= D; d0 += 4 * TP_COLS) { /* 32 of y in registers over every row */
        tp_v8 a0, a1, a2, a3, r0, r1, r2, r3;
        memcpy(&a0, y + d0, sizeof a0), memcpy(&a1, y + d0 + 8, sizeof a1);
        memcpy(&a2, y + d0 + 16, sizeof a2), memcpy(&a3, y + d0 + 24, sizeof a3);
        for (int64_t x = 0; x < nc; x++) {
            const float w = c[x * cs];
            if (w == 0.0f) continue;
            const float *row = rows + x * ldr + d0;
            memcpy(&r0, row, sizeof r0), memcpy(&r1, row + 8, sizeof r1);
            memcpy(&r2, row + 16, sizeof r2), memcpy(&r3, row + 24, sizeof r3);
            a0 += w * r0, a1 += w * r1, a2 += w * r2, a3 += w * r3;
        }
        memcpy(y + d0, &a0, sizeof a0), memcpy(y + d0 + 8, &a1, sizeof a1);
        memcpy(y + d0 + 16, &a2, sizeof a2), memcpy(y + d0 + 24, &a3, sizeof a3);
    }
    for (; d0 + TP_COLS <= D; d0 += TP_COLS) {
        tp_v8 a, r;
        memcpy(&a, y + d0, sizeof a);
        for (int64_t x = 0; x < nc; x++) {
            const float w = c[x * cs];
            if (w == 0.0f) continue;
            memcpy(&r, rows + x * ldr + d0, sizeof r);
            a += w * r;
        }
        memcpy(y + d0, &a, sizeof a);
    }
    for (; d0 < D; d0++)
        for (int64_t x = 0; x < nc; x++)
            if (c[x * cs] != 0.0f) y[d0] += c[x * cs] * rows[x * ldr + d0];
}

PE_TILE_SIMD float pe__lane_sum(const float *x, int64_t n) {
    float a[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) a[l] += x[j + l];
    for (int l = 0; j < n; j++, l++) a[l] += x[j];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

PE_TILE_SIMD float pe__lane_dot(const float *x, const float *y, int64_t n) {
    float a[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) a[l] += x[j + l] * y[j + l];
    for (int l = 0; j < n; j++, l++) a[l] += x[j] * y[j];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

void pe__tile_offsets(const pe__ctx *ctx, const pe__tile *t, int sign, int64_t K, int64_t *lo, int64_t *hi) {
    const int64_t *pos = ctx->pos + t->b * ctx->T + t->i0, *kpos = ctx->kpos + t->b * ctx->Tk + t->j0;
    int64_t pmin = pos[0], pmax = pos[0], kmin = kpos[0], kmax = kpos[0];
    for (int64_t i = 1; i < t->ni; i++) pmin = pos[i] < pmin ? pos[i] : pmin, pmax = pos[i] > pmax ? pos[i] : pmax;
    for (int64_t j = 1; j < t->nj; j++) kmin = kpos[j] < kmin ? kpos[j] : kmin, kmax = kpos[j] > kmax ? kpos[j] : kmax;
    /* a call's positions lie within +-PE_MAX_POSITION (2^53): their differences do not overflow */
    if (sign > 0) *lo = pe__clip(kmin - pmax, -K, K), *hi = pe__clip(kmax - pmin, -K, K);
    else *lo = pe__clip(pmin - kmax, -K, K), *hi = pe__clip(pmax - kmin, -K, K);
}

/* Row i of the tile: the keys [*ja, *jb) of the tile the band (causal, the window) lets its
 * query see. */
void pe__tile_row_visible(const pe__ctx *ctx, const pe__tile *t, int64_t i, int64_t *ja, int64_t *jb) {
    int64_t T, Tk, qoff, lo, hi;
    pe__row_lens(ctx, t->b, &T, &Tk, &qoff);
    pe__band_range(pe__band_of(ctx->cfg), qoff, t->i0 + i, Tk, &lo, &hi);
    *ja = pe__clip(lo - t->j0, 0, t->nj), *jb = pe__clip(hi - t->j0, *ja, t->nj);
}

int pe__tile_visible_offsets(const pe__ctx *ctx, const pe__tile *t, int sign, int64_t K, int64_t *lo, int64_t *hi) {
    const int64_t *pos = ctx->pos + t->b * ctx->T + t->i0, *kpos = ctx->kpos + t->b * ctx->Tk + t->j0;
    int sorted = 1;
    for (int64_t j = 1; j < t->nj && sorted; j++) sorted = kpos[j] >= kpos[j - 1];
    if (!sorted) { /* a row's visible keys need not hold its extremes at their ends: the whole tile's */
        pe__tile_offsets(ctx, t, sign, K, lo, hi);
        return t->ni > 0 && t->nj > 0;
    }
    int64_t omin = INT64_MAX, omax = INT64_MIN; /* pos_i - kpos_j over the visible pairs */
    for (int64_t i = 0; i < t->ni; i++) {
        int64_t ja, jb;
        pe__tile_row_visible(ctx, t, i, &ja, &jb);
        if (ja >= jb) continue;
        omax = pos[i] - kpos[ja] > omax ? pos[i] - kpos[ja] : omax;
        omin = pos[i] - kpos[jb - 1] < omin ? pos[i] - kpos[jb - 1] : omin;
    }
    if (omin > omax) return 0;
    if (sign > 0) *lo = pe__clip(-omax, -K, K), *hi = pe__clip(-omin, -K, K);
    else *lo = pe__clip(omin, -K, K), *hi = pe__clip(omax, -K, K);
    return 1;
}
