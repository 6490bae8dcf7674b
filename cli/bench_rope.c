/* posenc bench, the rotation sections: RoPE on q and k against a copy (rope), and decoding
 * through the KV cache with a context shift's re-rotation (decode). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

/* ---- (a) RoPE against a copy ---------------------------------------------------------------- */
int bench_rope(const bopts *o, torchp *tp, rope_res *R) {
    const int64_t T = o->rope_T, H = 32, D = 128, C = H * D, n = T * C, half = D / 2;
    float *q = bench_rand(n, 1), *k = bench_rand(n, 2), *q2 = malloc(sizeof(float) * n), *k2 = malloc(sizeof(float) * n);
    float *cs = malloc(sizeof(float) * T * half * 2);
    int64_t *pos = malloc(sizeof(int64_t) * T);
    if (!q || !k || !q2 || !k2 || !cs || !pos) return cli_fail("bench: out of memory");
    for (int64_t t = 0; t < T; t++) pos[t] = t;
    memcpy(q2, q, sizeof(float) * n), memcpy(k2, k, sizeof(float) * n); /* fault the pages in */
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    pe_config_init(&cfg);
    const char *keys[] = {"method", "heads"}, *vals[] = {"rope", "32"};
    if (pe_config_set_all(&cfg, 2, keys, vals, &err) || pe_attention_init(&att, &cfg, C, &err))
        return cli_fail("bench: rope: %s", err.msg);
    int64_t rd;
    int table_layout;
    const int reps = o->reps < 3 ? 5 : 2 * o->reps + 1;
    double v[16];
    R->threads[0] = 1, R->threads[1] = bench_threads();
    for (int ti = 0; ti < 2; ti++) {
        const int nth = R->threads[ti];
        pe_run_options run = bench_run;
        run.threads = nth;
        pe_attention_set_run_options(att, &run);
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            bench_copy(q2, q, n, nth);
            bench_copy(k2, k, n, nth);
            v[r] = bench_now() - t0;
        }
        R->copy[ti] = bench_median(v, reps) * 1e3;
        bench_gap();
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            if (pe_attention_rotary_table(att, NULL, pos, T, 0, T - 1, PE_ROTATE_Q, cs, &rd, &table_layout, &err))
                return cli_fail("bench: rope: %s", err.msg);
            v[r] = bench_now() - t0;
        }
        R->table[ti] = bench_median(v, reps) * 1e3;
        for (int layout = 0; layout < 2; layout++) {
            for (int r = 0; r < reps; r++) {
                double t0 = bench_now();
                pe_rotary_apply(&run, q, T, C, H, D, D, layout, cs, 0, NULL);
                pe_rotary_apply(&run, k, T, C, H, D, D, layout, cs, 0, NULL);
                v[r] = bench_now() - t0;
            }
            (layout == PE_ROPE_HALF ? R->half : R->inter)[ti] = bench_median(v, reps) * 1e3;
            bench_gap();
        }
    }
    free(q), free(k), free(q2), free(k2), free(cs), free(pos);
    pe_attention_free(att);
    R->torch = NAN;
    char req[64];
    snprintf(req, sizeof req, "rope %lld %lld %lld %d", (long long)T, (long long)H, (long long)D, reps);
    double tv;
    if (o->torch && torch_ask(tp, req, &tv, 1) == 1) R->torch = tv;
    printf("## (a) RoPE on q and k [T=%lld, H=32, D=128] f32, in place (%.0f MiB each), time relative to a copy of the same bytes\n\n",
           (long long)T, n * 4.0 / (1 << 20));
    printf("| threads | copy ms (GB/s) | rope half ms | x copy | %% of copy bandwidth | rope interleaved ms | x copy |"
           " %% of copy bandwidth | cos/sin table ms | half + table x copy |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < 2; ti++)
        printf("| %d | %.2f (%.1f) | %.2f | %.2f | %.0f%% | %.2f | %.2f | %.0f%% | %.2f | %.2f |\n", R->threads[ti],
               R->copy[ti], 2.0 * n * 4 / (R->copy[ti] * 1e-3) / 1e9, R->half[ti], R->half[ti] / R->copy[ti],
               100 * R->copy[ti] / R->half[ti], R->inter[ti], R->inter[ti] / R->copy[ti],
               100 * R->copy[ti] / R->inter[ti], R->table[ti], (R->half[ti] + R->table[ti]) / R->copy[ti]);
    printf("\nCopy bandwidth counts the bytes read and written. The table: angles and cos/sin in double, rounded once"
           " (exact to float32), built once per call for T positions x 64 pairs and shared by q, k and backward. ");
    if (!isnan(R->torch))
        printf("PyTorch eager `q cos + rotate_half(q) sin` (out of place, %d threads): %.2f ms = %.1f x copy.\n\n",
               R->threads[1], R->torch, R->torch / R->copy[1]);
    else
        printf("\n\n");
    return 0;
}


/* ---- (g) decoding through the KV cache ---------------------------------------------------- */

/* One decode step (append a token's k and v, attend its query to the whole cache) of a layer
 * with H=32, Hkv=8, D=128 over a cache of Tk keys, against a copy of the cache's K and V bytes
 * (the cost of reading them once); then a context shift's re-rotation of every cached key
 * (rope) against a copy of the K bytes; and the same query against the same K and V as an
 * engine hands them: the projected form (pe_attention_forward_qkv, T = 1, its default path),
 * with its copies for backward and with none (PE_SAVED_NONE: inference, K and V read in place),
 * and pe_attention_forward_kvcache (keys rotated by the engine), and the same keys as vLLM's
 * blocks of 16 in a shuffled table (pe_attention_forward_paged). Median ms of reps. */
static int decode_measure(const char *method, int64_t Tk, int reps, decode_res *d) {
    const int64_t H = 32, Hkv = 8, D = 128, C = H * D, Ckv = Hkv * D;
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    pe_kv_cache *kv = NULL;
    pe_config_init(&cfg);
    const char *keys[] = {"method", "heads", "kv_heads", "causal"}, *vals[] = {method, "32", "8", "true"};
    if (pe_config_set_all(&cfg, 4, keys, vals, &err) || pe_attention_init(&att, &cfg, C, &err))
        return cli_fail("bench: decode: %s", err.msg);
    pe_attention_set_run_options(att, &bench_run);
    float *k = bench_rand(Tk * Ckv, 21), *v = bench_rand(Tk * Ckv, 22), *q = bench_rand(C, 23), *o = malloc(sizeof(float) * C);
    float *dst = malloc(sizeof(float) * (size_t)(2 * Tk * Ckv));
    int rc = !k || !v || !q || !o || !dst;
    if (!rc) rc = pe_kv_cache_init(&kv, att, 1, Tk + reps + 8, &err) || pe_kv_cache_append(kv, NULL, k, v, Tk, NULL, 0, NULL, &err);
    const int64_t bs = 16, nb = Tk / bs; /* the same K and V as blocks, their table shuffled */
    int32_t *table = malloc(sizeof(int32_t) * (size_t)(nb > 0 ? nb : 1));
    rc |= !table;
    for (int64_t i = 0; !rc && i < nb; i++) table[i] = (int32_t)i;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int64_t i = nb - 1; !rc && i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t r = (int64_t)((seed >> 33) % (uint64_t)(i + 1));
        const int32_t t = table[i];
        table[i] = table[r], table[r] = t;
    }
    const int rotary = !strcmp(method, "rope");
    int64_t *kpos = malloc(sizeof(int64_t) * (size_t)Tk);
    rc |= !kpos;
    for (int64_t u = 0; !rc && u < Tk; u++) kpos[u] = u;
    pe_run_options inference = bench_run;
    inference.saved = PE_SAVED_NONE;
    double x[8][32]; /* step, copy, shift, its copy of K, projected form, no grad, rotation, forward_kvcache */
    double gv[32], gx[32], pair[2];
    for (int r = -1; r < reps && !rc; r++) {
        double t[8];
        t[0] = bench_now();
        rc = pe_kv_cache_append(kv, NULL, k, v, 1, NULL, 0, NULL, &err) || pe_kv_cache_attend(kv, NULL, q, 1, NULL, o, &err);
        t[1] = bench_now();
        bench_copy(dst, k, Tk * Ckv, 1), bench_copy(dst + Tk * Ckv, v, Tk * Ckv, 1);
        t[2] = bench_now();
        if (!rc) rc = pe_kv_cache_shift(kv, NULL, 0, 0, 1, &err); /* every key moves one position back */
        t[3] = bench_now();
        bench_copy(dst, k, Tk * Ckv, 1);
        t[4] = bench_now();
        if (!rc) rc = pe_attention_forward_qkv(att, NULL, q, k, v, 1, 1, Tk, NULL, o, NULL, NULL, &err);
        t[5] = bench_now();
        pe_attention_set_run_options(att, &inference);
        if (!rc) rc = pe_attention_forward_qkv(att, NULL, q, k, v, 1, 1, Tk, NULL, o, NULL, NULL, &err);
        pe_attention_set_run_options(att, &bench_run);
        t[6] = bench_now(); /* rope: rotating the keys it is handed once, as an engine's cache does (dst holds K) */
        if (!rc && rotary) rc = pe_attention_rotate(att, NULL, dst, Tk, Ckv, Hkv, kpos, 0, Tk, PE_ROTATE_K, 0, &err);
        t[7] = bench_now();
        /* contiguous and paged in turns, each first every other round: their ratio is taken
         * round by round, so that neither gains from the order or from the machine's load */
        for (int turn = 0; turn < 2 && !rc; turn++) {
            const int paged = (turn + r + 2) % 2;
            const double t0 = bench_now();
            if (paged) rc = pe_attention_forward_paged(att, NULL, q, k, v, nb, bs, table, nb, 1, 1, NULL, 1, o, &err);
            else rc = pe_attention_forward_kvcache(att, NULL, q, k, v, Tk * Ckv, 1, 1, Tk, NULL, 1, o, &err);
            pair[paged] = bench_now() - t0;
        }
        for (int i = 0; r >= 0 && i < 7; i++) x[i][r] = t[i + 1] - t[i];
        if (r >= 0) x[7][r] = pair[0], gv[r] = pair[1], gx[r] = pair[1] / pair[0];
    }
    if (rc) fprintf(stderr, "posenc: bench: decode: %s\n", err.msg);
    else {
        double *out[8] = {&d->step, &d->copy, &d->shift, &d->shift_copy, &d->qkv, &d->qkv_none, &d->rotate, &d->kvcache};
        for (int i = 0; i < 8; i++) *out[i] = bench_median(x[i], reps) * 1e3;
        d->paged = bench_median(gv, reps) * 1e3, d->paged_x = bench_median(gx, reps);
    }
    free(kpos);
    pe_kv_cache_free(kv);
    pe_attention_free(att);
    free(k), free(v), free(q), free(o), free(dst), free(table);
    return rc ? 1 : 0;
}

int bench_decode(const bopts *o, torchp *tp, decode_res D[4]) {
    const int reps = o->reps < 5 ? 5 : o->reps;
    printf("## (g) decoding through the KV cache: one token, H=32, Hkv=8, D=128, f32, causal, median of %d, %d threads\n\n",
           reps, bench_threads());
    printf("| method | cached keys | K+V MiB | step ms | copy of K+V ms (1 thread) | step x copy | PyTorch eager ms |"
           " PyTorch x posenc | shift re-rotation ms | x copy of K (1 thread) | projected form ms (x step) |"
           " projected form, no grad ms (x step + rotation) | forward_kvcache ms (x step) | paged ms (x forward_kvcache) |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const char *const methods[] = {"rope", "alibi"};
    const int64_t *sizes = o->decode_Tk;
    for (int mi = 0; mi < 2; mi++)
        for (int si = 0; si < 2; si++) {
            decode_res *d = &D[mi * 2 + si];
            *d = (decode_res){.torch = NAN};
            if (decode_measure(methods[mi], sizes[si], reps, d)) return 1;
            char req[96];
            snprintf(req, sizeof req, "decode %s %lld %d", methods[mi], (long long)sizes[si], reps);
            if (o->torch && torch_ask(tp, req, &d->torch, 1) != 1) d->torch = NAN;
            printf("| %s | %lld | %.0f | %.2f | %.2f | %.2f |", methods[mi], (long long)sizes[si],
                   sizes[si] * 8 * 128 * 8.0 / (1 << 20), d->step, d->copy, d->step / d->copy);
            if (isnan(d->torch)) printf(" | |");
            else printf(" %.2f | %.1f |", d->torch, d->torch / d->step);
            if (mi == 0) printf(" %.2f | %.2f |", d->shift, d->shift / d->shift_copy);
            else printf(" | |");
            /* handed unrotated keys, the projected form rotates them: its bound is the step and one rotation */
            printf(" %.2f (%.2fx) | %.2f (%.2fx) | %.2f (%.2fx) | %.2f (%.2fx) |\n", d->qkv, d->qkv / d->step, d->qkv_none,
                   d->qkv_none / (d->step + d->rotate), d->kvcache, d->kvcache / d->step, d->paged, d->paged_x);
            fflush(stdout);
            bench_gap();
        }
    printf("\nA step appends the token's k and v (rope: the key rotated once) and attends its query to every cached"
           " key on the decode path, which reads K and V in place once for the 4 query heads of each kv head. The copy"
           " reads and writes the same bytes with one thread (memcpy). PyTorch eager: `q @ K^T`, softmax, `@ V` over"
           " the cached (Hkv, Tk, D) tensors without repeating them for the query heads, rope on the new q and k or"
           " ALiBi's bias. The shift moves every key one position back (llama.cpp's context shift), rotating K in place"
           " by one table of angle differences. The last two columns attend the same query to the same K and V held"
           " as an engine holds them: through the projected form (which copies them for its backward and picks its path"
           " by shape; with saved = PE_SAVED_NONE, inference, it reads them in place, rope rotating a copy of the keys:"
           " against the step plus one pe_attention_rotate of every key, what an engine's cache does once),"
           " and through pe_attention_forward_kvcache, which reads them in place on the decode path; paged: the same"
           " bytes as vLLM's blocks of 16 keys in a shuffled table (pe_attention_forward_paged), its ratio the median of"
           " the rounds' ratios, the two run in turns.\n\n");
    return 0;
}

