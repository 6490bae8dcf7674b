/* What the rotary methods share (rope, xpos, fope, rope_mixed, PoPE's phases, the cache's
 * re-rotation): the frequencies of every RoPE scaling, the pairs of a layout, the exact-angle
 * table and the rotation kernel. */
#ifndef PE_ROTARY_H
#define PE_ROTARY_H

#include "../internal.h"

/* RoPE frequencies for a configuration (rotary/rope_scaling.c): fills inv_freq[rotary_dim/2]
 * in double and returns the attention factor that multiplies cos and sin. n_pos is
 * max(positions) + 1 (dynamic NTK, the LongRoPE switch); factors is the LongRoPE factor table
 * the positions select (pe__rope_longrope_uses_long), NULL otherwise. */
double pe__rope_freqs(const pe_config *cfg, int64_t n_pos, const float *factors, double *inv_freq);
int pe__rope_longrope_uses_long(const pe_config *cfg, int64_t n_pos);
/* Pair t of a head in a RoPE layout: its first element at offset *first, the second *step
 * after it ((t, t + rd/2) half, (2t, 2t+1) interleaved). */
static inline void pe__rope_pair(int layout, int64_t rd, int64_t t, int64_t *first, int64_t *step) {
    *first = layout == PE_ROPE_HALF ? t : 2 * t, *step = layout == PE_ROPE_HALF ? rd / 2 : 1;
}
/* dL/dangle of one rotated pair y = R(angle) x_in (cs: its cos, sin, any common scale) with
 * upstream gradient dy at elements e1, e2: dy1/dangle = -y2, dy2/dangle = y1. Used by the
 * rotary methods whose angles carry parameters (LongRoPE's factors, rope_mixed's frequencies). */
static inline double pe__rope_dangle(const float *x_in, const float *dy, int64_t e1, int64_t e2, const float *cs) {
    const double y1 = (double)x_in[e1] * cs[0] - (double)x_in[e2] * cs[1];
    const double y2 = (double)x_in[e2] * cs[0] + (double)x_in[e1] * cs[1];
    return -(double)dy[e1] * y2 + (double)dy[e2] * y1;
}

/* The exact-angle table of n positions: cs (n, half, 2) = (cos, sin)(p * inv_freq) * attn,
 * angles and cos/sin in double, rounded once to float. Position r has A axes at pos + r A; pair
 * t reads axis axis[t] (axis NULL: axis 0). */
void pe__rope_table(const pe_run_options *run, float *cs, const int64_t *pos, int64_t A, const uint8_t *axis,
                    int64_t n, const double *inv_freq, int64_t half, double attn);

/* Rotates the first rd dims of each of nh heads (D wide) of n rows (row stride ld) by the
 * per-row table cs (n, rd/2, 2) = (cos, sin), already scaled; sin_sign -1 rotates back
 * (the backward of a rotation is the rotation by -theta). SIMD and threads (exec/run.c). */
void pe__rope_rotate(const pe_run_options *run, float *x, int64_t n, int64_t ld, int64_t nh, int64_t D, int64_t rd,
                     int layout, const float *cs, float sin_sign);
/* The same from x into y (the same strides; y == x: in place): only the first rd dims of each
 * head of y are written. */
void pe__rope_rotate_from(const pe_run_options *run, float *y, const float *x, int64_t n, int64_t ld, int64_t nh,
                          int64_t D, int64_t rd, int layout, const float *cs, float sin_sign);

#endif
