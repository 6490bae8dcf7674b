/* posenc bench: how fast posenc runs attention with positional encodings, as ratios measured
 * side by side in one run (absolute times move with the machine's load; ratios much less):
 *   rope      RoPE on q and k [T=4096, H=32, D=128], both layouts, against a copy of the same
 *             bytes (the bandwidth ceiling), 1 thread and all; PyTorch eager beside it
 *   attn      one attention layer (projections included), forward and backward, H=8, D=64,
 *             none/rope/alibi/t5, causal and not: the fused path against the reference path
 *             and PyTorch eager (bench/torch_bench.py, run as a coprocess so both interleave),
 *             with the peak memory of each
 *   core      the projected form alone (no projections) on the fused path, GFLOP/s
 *   decode    one decode step through the KV cache, and a context shift's re-rotation
 *   denormal  the fused path with exp clamped (default), FTZ/DAZ, and gradual underflow
 *   gemm      BLAS sgemm on the attention shape against the fused attention core
 *   packed    8 documents packed in one row (block-diagonal attn_mask) against one document
 *   train     posenc train's model (train/) trained in-process for a few seconds per method and
 *             batch, tokens/s against the same model in PyTorch eager (bench/torch_train.py, a
 *             coprocess), one thread each, in alternating rounds
 *   scale     posenc train at batch 32 as one process (1 and 2 threads) and as mpirun -n 2
 *             (1 thread each, train/dist.c), child processes in alternating rounds, and rank
 *             0's time in the sums over ranks
 * Each section is in a file of its own (bench_attn.c, bench_rope.c, bench_train.c) and measures
 * posenc through posenc.h alone. --quick is a smoke run of every section on small shapes
 * (seconds; make test runs it), its numbers labelled as such. Like `train`, it selects
 * OpenBLAS's AVX-512/AVX2 kernels (train/env.c) when the library would run its SSE3 ones;
 * PyTorch inherits the same OPENBLAS_CORETYPE. --readme FILE rewrites the block between
 * <!-- bench:begin --> and <!-- bench:end --> with a summary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef PE_BLAS
#include <cblas.h>
#endif

#include "../train/env.h"
#include "bench.h"
#include "cli.h"
#include "options.h"

static void loadavg(char *buf, size_t n) {
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, n, "%.1f %.1f %.1f", a, b, c);
    if (f) fclose(f);
}

/* The comma-separated items of s into out; -1 past max items (or a list too long to hold) */
static int parse_list(const char *s, const char **out, int max) {
    static char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return -1;
    int n = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (n == max) return -1;
        out[n++] = t;
    }
    return n;
}

static int want(const bopts *o, const char *section) {
    if (!o->only) return 1;
    const char *p = strstr(o->only, section);
    return p && (p == o->only || p[-1] == ',');
}

static const char *const SECTIONS[] = {"rope", "attn", "core", "decode", "denormal", "gemm", "packed", "train", "scale", NULL};
static const char *section_name(int i) { return SECTIONS[i]; }

int cli_bench(int argc, char **argv) {
    bench_args a;
    int rc;
    if (arg_start(&ARGS_BENCH, argc, argv, &a, &rc)) return rc;
    bopts o = {.T = {512, 2048, 8192}, .nT = 3, .causal = {0, 1}, .ncausal = 2, .reps = 3, .torch = !a.no_torch,
               .reference = !a.no_reference, .ref_max_T = a.ref_max_length, .torch_max_T = a.torch_max_length,
               .torch_path = a.torch, .torch_train_path = a.torch_train, .readme = a.readme, .only = a.only,
               .threads = (int)a.threads, .quick = a.quick, .train_steps = a.steps, .rope_T = 4096,
               .decode_Tk = {4096, 32768}, .gemm_T = 2048, .denormal_T = 2048};
    if (a.quick) { /* every section once, on shapes of seconds in all: a smoke run, not a measurement */
        o.T[0] = 64, o.T[1] = 256, o.nT = 2, o.reps = 1, o.rope_T = 256, o.decode_Tk[0] = 256, o.decode_Tk[1] = 1024;
        o.gemm_T = 256, o.denormal_T = 256;
        if (!o.train_steps) o.train_steps = 2;
    }
    if (a.reps) o.reps = (int)a.reps;
    if (a.lengths) {
        long long l[MAXL];
        if ((o.nT = arg_int_list("bench", "--length", a.lengths, 1, 1 << 17, l, MAXL)) < 0) return 2;
        for (int t = 0; t < o.nT; t++) o.T[t] = l[t];
    }
    if ((o.nm = parse_list(a.methods, o.methods, MAXM)) < 0) return cli_fail("bench: --methods: at most %d methods", MAXM);
    for (int m = 0, k; m < o.nm; m++)
        if (arg_method("bench", "--methods", o.methods[m], &k)) return 2;
    if (!strcmp(a.causal, "yes")) o.causal[0] = 1, o.ncausal = 1;
    else if (!strcmp(a.causal, "no")) o.causal[0] = 0, o.ncausal = 1;
    if (o.only) { /* every section named is one */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o.only);
        for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            int known = 0;
            for (int i = 0; SECTIONS[i]; i++) known |= !strcmp(w, SECTIONS[i]);
            const char *best = known ? NULL : arg_nearest(w, section_name);
            if (!known && best) return cli_fail("bench: --only: unknown section '%s' (did you mean %s?)", w, best);
            if (!known) return cli_fail("bench: --only: unknown section '%s' (rope, attn, core, decode, denormal, gemm, packed, train, scale)", w);
        }
    }
    if (o.readme && o.quick) return cli_fail("bench: --readme with --quick: a smoke run's numbers do not go into a README");
    /* the README's block must be there before the minutes of measuring, not after */
    if (o.readme && cli_readme_block("bench", o.readme, "bench", NULL)) return 2;
    tr_env_select("bench", argc, argv); /* re-executes with OPENBLAS_CORETYPE, OMP_WAIT_POLICY when that helps */
    bench_malloc_measure(0);
    if (o.threads) {
        bench_run.threads = o.threads;
#ifdef _OPENMP
        omp_set_num_threads(o.threads);
#endif
#ifdef PE_BLAS
        openblas_set_num_threads(o.threads);
#endif
    }
    const int nth = bench_threads();
    char cpu[256], load0[64], load1[64];
    tr_env_cpu_model(cpu, sizeof cpu);
    loadavg(load0, sizeof load0);
    torchp tp = {0};
    const int torch_wanted = o.torch; /* the train section starts its own */
    if (o.torch && (want(&o, "rope") || want(&o, "attn") || want(&o, "decode"))) {
        o.torch = torch_start(&tp, o.torch_path, nth);
        if (!o.torch) fprintf(stderr, "posenc: bench: no PyTorch (%s with %s and torch: scripts/deps.sh makes .venv): its columns stay empty\n",
                                 o.torch_path, torch_python());
    } else
        o.torch = 0;
    const char *wait = getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "unset";
    printf("# posenc bench\n\n%s%s, %d threads, OpenBLAS core %s, OMP_WAIT_POLICY %s, fused kernels %s; PyTorch: %s; load average at start %s\n\n",
           o.quick ? "SMOKE TEST (--quick: small shapes, one repetition; the numbers mean nothing). " : "",
           cpu, nth, tr_env_blas_core()[0] ? tr_env_blas_core() : "none", wait, pe_run_kernels(&bench_run),
           o.torch ? tp.info : torch_wanted && want(&o, "train") ? "its own process in the train section" : "not run", load0);
    fflush(stdout);
    rope_res RR;
    memset(&RR, 0, sizeof RR);
    arow rows[MAXL * MAXM * 2];
    int nrows = 0;
    double den[4][2];
    gemm_res G;
    int did_rope = 0, did_den = 0, did_gemm = 0, did_dec = 0, ntrain = 0, train_threads = 1;
    decode_res dec[4];
    trow train[2 * MAXM];
    char train_info[256] = "";
    if (!rc && want(&o, "rope")) rc = bench_rope(&o, &tp, &RR), did_rope = !rc;
    if (!rc && want(&o, "attn")) rc = bench_attn(&o, &tp, rows, &nrows);
    if (!rc && want(&o, "core")) rc = bench_core(&o);
    if (!rc && want(&o, "decode")) rc = bench_decode(&o, &tp, dec), did_dec = !rc;
    torch_stop(&tp);
    if (!rc && want(&o, "denormal")) rc = bench_denormal(&o, den), did_den = !rc;
    if (!rc && want(&o, "gemm")) rc = bench_gemm(&o, &G), did_gemm = !rc;
    if (!rc && want(&o, "packed")) rc = bench_packed(&o);
    o.torch = torch_wanted;
    if (!rc && want(&o, "train")) rc = bench_train(&o, train, &ntrain, train_info, sizeof train_info, &train_threads);
    scale_res SC;
    int did_scale = 0;
    if (!rc && want(&o, "scale")) rc = bench_scale(&o, &SC), did_scale = !rc;
    loadavg(load1, sizeof load1);
    printf("Load average at the end: %s (%s).\n", load1, "other processes share these cores: compare ratios, not times");
    if (rc || !o.readme) return rc;

    /* the README's summary, from the same measurements */
    char *block = NULL;
    size_t len = 0;
    FILE *md = open_memstream(&block, &len);
    if (!md) return cli_fail("bench: out of memory");
    fprintf(md, "Measured by `make bench-readme` (`posenc bench --readme README.md`) on %s, %d threads, OpenBLAS core %s,"
                " OMP_WAIT_POLICY %s, fused kernels %s, PyTorch %s; load average %s at the start and %s at the end: the"
                " machine was shared, so the ratios (measured side by side in one run) are what counts, not the times.\n\n",
            cpu, nth, tr_env_blas_core()[0] ? tr_env_blas_core() : "none", wait, pe_run_kernels(&bench_run),
            tp.info[0] ? tp.info : "not run", load0, load1);
    if (did_rope)
        fprintf(md, "RoPE on q and k [T=4096, H=32, D=128], in place, %d threads: %.2fx the time of a copy of the same bytes"
                    " (`half`, %.0f%% of copy bandwidth), %.2fx (`interleaved`); 1 thread: %.2fx, %.2fx. With the exact-angle"
                    " cos/sin table built for the call: %.2fx (%d threads), %.2fx (1 thread). PyTorch eager: %.1fx copy.\n\n",
                RR.threads[1], RR.half[1] / RR.copy[1], 100 * RR.copy[1] / RR.half[1], RR.inter[1] / RR.copy[1],
                RR.half[0] / RR.copy[0], RR.inter[0] / RR.copy[0], (RR.half[1] + RR.table[1]) / RR.copy[1], RR.threads[1],
                (RR.half[0] + RR.table[0]) / RR.copy[0], RR.torch / RR.copy[1]);
    if (nrows) {
        fprintf(md, "Attention layer (projections included), H=8, D=64: speed-up of the fused path over the reference path"
                    " and over PyTorch eager (times of theirs / ours), and peak memory growth:\n\n");
        fprintf(md, "| method | T | causal | fwd ms | vs ref | vs PyTorch | bwd ms | vs ref | vs PyTorch | MiB fused / ref / PyTorch |\n");
        fprintf(md, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
        for (int r = 0; r < nrows; r++) {
            const arow *R = &rows[r];
            fprintf(md, "| `%s` | %lld | %s | %.1f | ", R->method, (long long)R->T, R->causal ? "yes" : "no", R->f[FUSED]);
            fprintf(md, isnan(R->f[REF]) ? "— | " : "%.1fx | ", R->f[REF] / R->f[FUSED]);
            fprintf(md, isnan(R->f[TORCH]) ? "— | " : "%.1fx | ", R->f[TORCH] / R->f[FUSED]);
            fprintf(md, "%.1f | ", R->b[FUSED]);
            fprintf(md, isnan(R->b[REF]) ? "— | " : "%.1fx | ", R->b[REF] / R->b[FUSED]);
            fprintf(md, isnan(R->b[TORCH]) ? "— | " : "%.1fx | ", R->b[TORCH] / R->b[FUSED]);
            fprintf(md, "%.0f / ", R->mib[FUSED]);
            fprintf(md, isnan(R->mib[REF]) ? "— / " : "%.0f / ", R->mib[REF]);
            fprintf(md, isnan(R->mib[TORCH]) ? "— |\n" : "%.0f |\n", R->mib[TORCH]);
        }
        fprintf(md, "\n");
    }
    if (did_dec) {
        fprintf(md, "Decoding one token through the KV cache (H=32, Hkv=8, D=128, %d threads): the step against a copy"
                    " of the cache's K and V bytes (one thread) and PyTorch eager's time over ours:", nth);
        static const char *const dm[2] = {"rope", "alibi"};
        for (int i = 0; i < 4; i++)
            fprintf(md, "%s `%s` %lld keys %.2fx", i ? "," : "", dm[i / 2], (long long)o.decode_Tk[i % 2], dec[i].step / dec[i].copy);
        fprintf(md, ".");
        if (!isnan(dec[0].torch))
            for (int i = 0; i < 4; i++)
                fprintf(md, "%s `%s` %lld: PyTorch %.1fx", i ? "," : " PyTorch eager:", dm[i / 2], (long long)o.decode_Tk[i % 2],
                        dec[i].torch / dec[i].step);
        fprintf(md, "%s A context shift re-rotates %lld cached keys in %.2fx the time of a copy of K. The same step over"
                    " an engine's own K and V (`pe_attention_forward_kvcache`, keys rotated by the engine): `rope` %lld keys"
                    " %.2fx the cache's step, the projected form (`pe_attention_forward_qkv`) %.1fx with its copies for"
                    " backward, and with none (`saved = PE_SAVED_NONE`, inference) %.2fx the step and one rotation of every key by `pe_attention_rotate`"
                    " (`alibi` %.2fx the step), paged keys (blocks of 16, `pe_attention_forward_paged`) %.2fx `forward_kvcache`.\n\n",
                isnan(dec[0].torch) ? "" : ".", (long long)o.decode_Tk[1], dec[1].shift / dec[1].shift_copy,
                (long long)o.decode_Tk[1], dec[1].kvcache / dec[1].step, dec[1].qkv / dec[1].step,
                dec[1].qkv_none / (dec[1].step + dec[1].rotate), dec[3].qkv_none / dec[3].step, dec[1].paged_x);
    }
    if (did_den)
        fprintf(md, "Denormals (alibi, T=2048, not causal; the fused path clamps exp and sets FTZ/DAZ in its threads):"
                    " without FTZ/DAZ forward/backward take %.2fx/%.2fx the time, with IEEE gradual underflow throughout"
                    " %.2fx/%.2fx.\n\n",
                den[1][0] / den[0][0], den[1][1] / den[0][1], den[3][0] / den[0][0], den[3][1] / den[0][1]);
    if (did_gemm)
        fprintf(md, "GEMM ceiling: the fused core (`none`, T=2048, not causal) runs at %.0f GFLOP/s forward and %.0f backward"
                    " with %d threads, %.2fx and %.2fx of OpenBLAS sgemm on the 2048x2048x64 product (%.0f GFLOP/s).\n",
                G.fwd[1], G.bwd[1], G.threads[1], G.fwd[1] / G.sgemm[1], G.bwd[1] / G.sgemm[1], G.sgemm[1]);
    if (ntrain) {
        fprintf(md, "%sTraining: `posenc train`'s model (2 layers x 64 wide, 4 heads, length 64, AdamW) in C against the same"
                    " model in PyTorch eager (`bench/torch_train.py`, %s), %d thread%s each, tokens/s:\n\n",
                did_gemm ? "\n" : "", train_info, train_threads, train_threads == 1 ? "" : "s");
        fprintf(md, "| method | batch x length | posenc tok/s | PyTorch tok/s | posenc / PyTorch | posenc's step x its GEMMs |"
                    " x all its GEMMs |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
        for (int r = 0; r < ntrain; r++) {
            const trow *R = &train[r];
            if (R->why[0]) continue;
            fprintf(md, "| `%s` | %lld x %lld | %.1fk |", R->method, (long long)R->B, (long long)R->T, R->ours / 1e3);
            if (isnan(R->torch)) fprintf(md, " — | — |");
            else fprintf(md, " %.1fk | %.2fx |", R->torch / 1e3, R->ours / R->torch);
            fprintf(md, " %.2fx | %.2fx |\n", R->gemm_x, R->all_x);
        }
    }
    if (did_scale && SC.have_mpi)
        fprintf(md, "\nData parallel (`posenc train`, batch %lld): `mpirun -n 2` with 1 thread each trains %.2fx the tokens/s of"
                    " one process with 1 thread, one process with 2 threads %.2fx, its 2 shares on 2 threads %.2fx; rank 0"
                    " spends %.1f%% of its time in the sums over ranks (%.2f ms a step, waiting included).\n",
                (long long)SC.B, SC.tps[3] / SC.tps[0], SC.tps[1] / SC.tps[0], SC.tps[2] / SC.tps[0], SC.share, SC.ms);
    fclose(md);
    rc = cli_readme_block("bench", o.readme, "bench", block);
    free(block);
    if (!rc) printf("Wrote the summary into %s.\n", o.readme);
    return rc;
}
