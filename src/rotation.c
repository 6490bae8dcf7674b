/* Rotations on caller buffers: a rotary layer's exact rotation and its table for q or k rows
 * that the caller holds (an engine's cache, a context shift), and a table applied by the
 * caller's choice (pe_rotary_apply). */
#include "layer.h"
#include "rotary/rotary.h"

/* The rotary table of n rows at positions pos, in a context of its own (the layer's saved
 * forward is left alone): *cs, *rd, *layout from the method's rotary_table hook. The caller
 * releases ctx (pe__attention_release) when done with *cs. */
static pe_status rotary_begin(pe_attention *a, const pe_weights *w, const int64_t *pos, int64_t n, int64_t lo,
                              int64_t hi, int which, pe__ctx *ctx, const float **cs, int64_t *rd, int *layout,
                              pe_err *err) {
    if (!a->m->rotary_table)
        return pe_error(err, PE_EINVAL, "method %s has no rotation of caller buffers (rope with one position axis, xpos have)%s%s",
                        a->m->name, a->m->not_a_rotation ? ": " : "", a->m->not_a_rotation ? a->m->not_a_rotation : "");
    if (n < 1 || !pos || (which != PE_ROTATE_Q && which != PE_ROTATE_K))
        return pe_error(err, PE_EINVAL, "rotate: need n >= 1 rows, their positions and which PE_ROTATE_Q or PE_ROTATE_K");
    for (int64_t r = 0; r < n; r++)
        if (pos[r] < lo || pos[r] > hi)
            return pe_error(err, PE_EPOS, "rotate: position %lld of row %lld is outside the attention's positions %lld .. %lld",
                            (long long)pos[r], (long long)r, (long long)lo, (long long)hi);
    pe_status st = pe__attention_context(a, w, n, pos, lo, hi, ctx, err);
    if (!st) *cs = a->m->rotary_table(ctx, which, rd, layout);
    return st;
}

pe_status pe_attention_rotate(pe_attention *a, const pe_weights *w, float *x, int64_t n, int64_t ld, int64_t nh,
                              const int64_t *pos, int64_t lo, int64_t hi, int which, int backward, pe_err *err) {
    if (!x || nh < 1 || ld < nh * a->D)
        return pe_error(err, PE_EINVAL, "rotate: need x, nh >= 1 heads and a row stride ld >= nh * head_dim (%lld)",
                        (long long)(nh * a->D));
    pe__ctx ctx;
    const float *cs;
    int64_t rd;
    int layout;
    pe_status st = rotary_begin(a, w, pos, n, lo, hi, which, &ctx, &cs, &rd, &layout, err);
    if (st) return st;
    pe__rope_rotate(&a->run, x + a->cfg.rotary_offset, n, ld, nh, a->D, rd, layout, cs, backward ? -1.0f : 1.0f);
    pe__attention_release(a, &ctx);
    return PE_OK;
}

pe_status pe_attention_rotary_table(pe_attention *a, const pe_weights *w, const int64_t *pos, int64_t n, int64_t lo,
                                    int64_t hi, int which, float *cs, int64_t *rotary_dim, int *layout, pe_err *err) {
    if (!cs || !rotary_dim || !layout) return pe_error(err, PE_EINVAL, "rotary_table: need cs, rotary_dim and layout");
    pe__ctx ctx;
    const float *table;
    pe_status st = rotary_begin(a, w, pos, n, lo, hi, which, &ctx, &table, rotary_dim, layout, err);
    if (st) return st;
    memcpy(cs, table, sizeof(float) * (size_t)(n * *rotary_dim));
    pe__attention_release(a, &ctx);
    return PE_OK;
}

pe_status pe_rotary_apply(const pe_run_options *opt, float *x, int64_t n, int64_t ld, int64_t nh, int64_t D,
                          int64_t rotary_dim, int layout, const float *cs, int backward, pe_err *err) {
    if (!x || !cs || n < 1 || nh < 1 || D < 2 || rotary_dim < 2 || rotary_dim % 2 || rotary_dim > D ||
        ld < nh * D || (layout != PE_ROPE_HALF && layout != PE_ROPE_INTERLEAVED))
        return pe_error(err, PE_EINVAL, "rotary_apply: need x and cs, n >= 1 rows of nh >= 1 heads, an even rotary_dim "
                        "in 2 .. head_dim, a row stride ld >= nh * head_dim and layout PE_ROPE_HALF or PE_ROPE_INTERLEAVED");
    pe_run_options run = opt ? *opt : (pe_run_options){0};
    run.isa[sizeof run.isa - 1] = 0;
    pe__rope_rotate(&run, x, n, ld, nh, D, rotary_dim, layout, cs, backward ? -1.0f : 1.0f);
    return PE_OK;
}

