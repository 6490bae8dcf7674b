/* Tile helpers of the relative methods whose tables are read per pair (shaw, huang1 ..
 * huang4): the rows a tile reads lie between the clipped offsets of its extreme positions, and
 * the products of rows with those table rows. */
#include "../internal.h"

PE_TILE_SIMD void pe__table_products(const float *x, int64_t ldx, int64_t n, const float *tt, int64_t R, int64_t D,
                                     int64_t lo, int64_t nr, float *out) {
    memset(out, 0, sizeof(float) * (size_t)(n * nr));
    for (int64_t i = 0; i < n; i++) /* sums of table rows (axpy): no reduction to reorder */
        for (int64_t d = 0; d < D; d++) pe__axpy(out + i * nr, x[i * ldx + d], tt + d * R + lo, nr);
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
