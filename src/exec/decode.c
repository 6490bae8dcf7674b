/* The decode path: few queries (a decode step, a short chunk) against keys and values read in
 * place from the caller's or a cache's rows, each key and value row loaded once for every query
 * head of its kv head; the keys split into pieces across threads (flash decoding), each with
 * its own softmax state, combined here. Keys come from the band of the call (pe__band_range). */
#include "fused.h"

static int64_t decode_rows(int64_t H, int64_t Hkv, int64_t T) { return Hkv * ((H / Hkv * T + 3) / 4 * 4); }

/* Few queries: at most PE_DECODE_GROUP_ROWS a kv head (its query heads times T). Past that
 * the tile kernel, whose one 64-row block a head is then mostly full, is faster even against
 * many keys (one thread, causal: at 64 rows a kv head, B=32, H=4, D=16, T=Tk=64: 3.29 ms
 * against 1.55; at 32 rows, T=32: 0.81 against 0.59; at 16, T=16: 0.30 against 0.46; B=1,
 * H=8, D=64, T=16 against 1024 keys: 1.59 against 3.07). */
enum { PE_DECODE_GROUP_ROWS = 16 };

int pe__decode_eligible(const pe__method *m, int transformed, int64_t H, int64_t Hkv, int64_t T, int masked) {
    return pe__fused_eligible(m) && !(m->flags & PE__SCORE_QK) && !m->value_mod && (transformed || !m->rotate_forward) && !m->lift_width && !masked &&
           H / Hkv * T <= PE_DECODE_GROUP_ROWS && decode_rows(H, Hkv, T) <= PE_DECODE_ROWS;
}

/* Rows of each batch row split into pieces of keys (flash decoding): enough pieces for the
 * threads, none shorter than 512 keys; each piece keeps its own softmax state, combined here. */
pe_status pe__decode_forward(pe__ctx *ctx, const pe__method *m, const float *q, const float *k, const float *v,
                             int64_t kv_stride, const float *const *rows, float *o, float *stats, pe_err *err) {
    const pe_run_options *run = ctx->run ? ctx->run : &pe__run_defaults;
    const pe__kernels *K = pe__kernels_pick(pe__isa_of(run));
    const int64_t B = ctx->B, T = ctx->T, H = ctx->H, Hkv = ctx->Hkv, C = ctx->C, D = ctx->D, group = H / Hkv;
    const int64_t dp = pe__round_up(D, PE_DALIGN), R = decode_rows(H, Hkv, T), Rg = R / Hkv;
    const int nth = pe__run_threads(run, (double)B * H * T * ctx->Tk * D * 4); /* memory-bound: weigh it up */
    int64_t S = (2 * nth + B - 1) / B;
    if (S > (ctx->Tk + 511) / 512) S = (ctx->Tk + 511) / 512;
    if (S < 1) S = 1;
    const int64_t per = R * dp + 2 * R, sc = R * dp + (R > PE_BR ? R : PE_BR) * PE_BC;
    float *part = pe__falloc((size_t)(B * S * per)), *scratch = pe__falloc((size_t)(sc * nth));
    if (!part || !scratch) {
        free(part), free(scratch);
        return pe_error(err, PE_ENOMEM, "out of memory for the decode scratch");
    }
    PE_OMP(omp parallel num_threads(nth))
    {
        unsigned csr = pe__ftz_enter(run);
        float *w = scratch + sc * omp_get_thread_num();
        pe__djob j = {.ctx = ctx, .mod = m->score_mod ? m : NULL, .Hkv = Hkv, .group = group, .D = D, .dp = dp, .Rg = Rg,
                      .band = pe__band_of(ctx->cfg), .scale = (float)ctx->cfg->scale,
                      .lo = run->denormals ? -104.0f : -87.0f, .ld = C, .ldk = ctx->Ckv, .qs = w, .s = w + R * dp};
        PE_OMP(omp for schedule(dynamic, 1))
        for (int64_t bs = 0; bs < B * S; bs++) {
            const int64_t b = bs / S, sp = bs % S;
            pe__row_lens(ctx, b, &j.T, &j.Tk, &j.qoff);
            j.b = b, j.u0 = j.Tk * sp / S, j.u1 = j.Tk * (sp + 1) / S;
            j.q = q + b * T * C;
            if (rows) j.krows = rows + b * ctx->Tk, j.vrows = rows + (B + b) * ctx->Tk; /* paged */
            else j.k = k + b * kv_stride, j.v = v + b * kv_stride;
            j.acc = part + bs * per, j.m = j.acc + R * dp, j.l = j.m + R;
            if (j.T > 0) K->decode(&j);
        }
        pe__ftz_leave(run, csr);
    }
    int64_t bad = INT64_MAX; /* the first (b, h, i) with every key masked */
    for (int64_t b = 0; b < B; b++) {
        int64_t Tb, Tkb, qoff;
        pe__row_lens(ctx, b, &Tb, &Tkb, &qoff);
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                float *out = o + (b * T + t) * C + h * D;
                float *sm = stats ? stats + (b * H + h) * T + t : NULL, *sl = stats ? sm + B * H * T : NULL;
                memset(out, 0, sizeof(float) * D);
                if (sm) *sm = 0, *sl = 0; /* padding queries and rows without keys: no weights */
                if (t >= Tb) continue; /* padding queries: o = 0 */
                const int64_t r = (h / group) * Rg + (h % group) * Tb + t;
                float mx = -INFINITY, sum = 0;
                for (int64_t sp = 0; sp < S; sp++) {
                    const float mi = part[(b * S + sp) * per + R * dp + r];
                    mx = mi > mx ? mi : mx;
                }
                for (int64_t sp = 0; sp < S && mx > -INFINITY; sp++) {
                    const float *pp = part + (b * S + sp) * per;
                    if (pp[R * dp + r] == -INFINITY) continue;
                    const float f = expf(pp[R * dp + r] - mx);
                    sum += f * pp[R * dp + R + r];
                    for (int64_t d = 0; d < D; d++) out[d] += f * pp[r * dp + d];
                }
                if (!(sum > 0)) {
                    const int64_t at = (b * H + h) * T + t;
                    bad = at < bad ? at : bad;
                    continue;
                }
                if (ctx->sinks) { /* attention_sinks: one more term of the sum, without a value */
                    const float sigma = ctx->sinks[h], mn = sigma > mx ? sigma : mx, f = expf(mx - mn);
                    for (int64_t d = 0; d < D; d++) out[d] *= f;
                    sum = sum * f + expf(sigma - mn);
                    mx = mn;
                }
                for (int64_t d = 0; d < D; d++) out[d] /= sum;
                if (sm) *sm = mx, *sl = 1.0f / sum; /* p_ij = e^(s_ij - m) / l, as the fused path saves them */
            }
    }
    free(part), free(scratch);
    return bad == INT64_MAX ? PE_OK : pe__empty_row(ctx, m, bad / T / H, bad % T, err);
}

