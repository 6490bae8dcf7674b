/* posenc compare: the extrapolation experiment. Trains every chosen method (default: every
 * method of the library the trainer supports, plus sinusoidal with SHAPE) with the same
 * budget and seeds, evaluates each at multiples of the training length, and writes a table
 * (mean and spread over seeds), a CSV and a PNG plot of the metric versus evaluation length.
 * Runs are independent: one single-threaded run per core (OpenMP), which at this model size
 * beats threading inside a run (PERF.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../train/env.h"
#include "../train/plot.h"
#include "../train/trainer.h"
#include "../src/io/output.h"
#include "cli.h"
#include "options.h"

#define MAX_VARIANTS 64
#define MAX_SEEDS 16

typedef struct variant {
    char name[48];   /* "rope", "sinusoidal+shape" */
    char method[32];
    int shape;
} variant;

typedef struct job {
    int v, seed;
    double cost; /* seconds per step measured before the runs (longest runs start first) */
    tr_metrics m[TR_MAX_EVAL];
    double seconds, tok_per_s, final_loss;
    int done, failed;
    char err[640];
} job;

static const char *method_name_of(int i) { return i < PE_METHOD_COUNT ? pe_method_name(i) : NULL; }

static int add_variant(variant *v, int *n, const char *name, char *why, size_t why_len) {
    if (*n == MAX_VARIANTS) return snprintf(why, why_len, "at most %d methods", MAX_VARIANTS), -1;
    variant *x = &v[*n];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->method, sizeof x->method, "%s", name);
    char *plus = strchr(x->method, '+');
    if (plus) {
        if (strcmp(plus, "+shape")) return snprintf(why, why_len, "'%s': the only variant is NAME+shape", name), -1;
        *plus = 0;
        x->shape = 1;
    }
    const char *reason;
    const char *best = pe_method_from_name(x->method) < 0 ? arg_nearest(x->method, method_name_of) : NULL;
    if (best) return snprintf(why, why_len, "unknown method '%s' (did you mean %s?)", x->method, best), -1;
    if (tr_method_placement(x->method, &reason) == TR_PLACE_NONE)
        return snprintf(why, why_len, "%s: %s", x->method, reason), -1;
    if (x->shape && tr_method_placement(x->method, NULL) != TR_PLACE_INPUT)
        return snprintf(why, why_len, "'%s': SHAPE applies to absolute encodings", name), -1;
    for (int i = 0; i < *n; i++)
        if (!strcmp(v[i].name, x->name)) return snprintf(why, why_len, "'%s' given twice", name), -1;
    (*n)++;
    return 0;
}

static double mean_of(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return n ? s / n : NAN;
}

static double sd_of(const double *x, int n) {
    if (n < 2) return NAN;
    double m = mean_of(x, n), s = 0;
    for (int i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (n - 1));
}

/* a variant's family, which is its panel in the plot */
static int family_of(const variant *v) {
    const int m = pe_method_from_name(v->method);
    return m < 0 ? PE_FAMILY_ABSOLUTE : (int)pe_method_family(m);
}

static void cell(char *buf, size_t n, double mean, double sd, int pct) {
    double k = pct ? 100 : 1;
    if (!isfinite(mean)) snprintf(buf, n, "failed");
    else if (isfinite(sd)) snprintf(buf, n, pct ? "%.1f ± %.1f" : "%.3f ± %.3f", k * mean, k * sd);
    else snprintf(buf, n, pct ? "%.1f" : "%.3f", k * mean);
}

int cli_compare(int argc, char **argv) {
    compare_args ca;
    arg_res r;
    ARGS_COMPARE.init(&ca);
    int rc = arg_parse(&ARGS_COMPARE, argc, argv, &ca, &r);
    if (rc < 0) tr_options_help();
    if (rc) return rc < 0 ? 0 : rc;
    tr_options o;
    tr_options_default(&o);
    pe_err err = {{0}};
    const char *methods = ca.methods, *out = ca.out, *readme = ca.readme;
    int seeds = ca.seeds ? (int)ca.seeds : ca.quick ? 1 : 3;
    const int quiet = ca.quiet;
    int jobs = (int)ca.jobs;
    int64_t shape_k = ca.shape_k;
    if (ca.quick) { /* before the command line's options, which override it */
        const char *q[][2] = {{"length", "32"}, {"steps", "60"}, {"batch", "8"}, {"eval-tokens", "1024"},
                              {"corpus-chars", "200000"}};
        for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) tr_options_set(&o, q[i][0], q[i][1], &err);
    }
    rc = cli_train_keys(&ARGS_COMPARE, &r);
    for (int i = 0; !rc && i < r.n_keys; i++) {
        const char *k = r.keys[i];
        if (!strcmp(k, "method") || !strcmp(k, "seed") || !strcmp(k, "shape"))
            rc = cli_fail("compare: --%s is chosen per run; use --methods, --seeds, --shape-k", k);
        else if (tr_options_set(&o, k, r.vals[i], &err))
            rc = cli_fail("compare: %s", err.msg);
    }
    arg_free(&r);
    /* the README's block must be there before the runs, not found missing after them */
    if (!rc && readme && cli_readme_block("compare", readme, "compare", NULL)) rc = 2;
    if (rc) return rc;
    tr_env_blas_select("compare", argc, argv);

    /* the methods: every one the trainer supports, in the library's order */
    variant V[MAX_VARIANTS];
    int nv = 0;
    char why[256], skipped[2048] = "";
    if (!strcmp(methods, "all")) {
        for (int m = 0; m < PE_METHOD_COUNT; m++) {
            const char *name = pe_method_name(m);
            if (add_variant(V, &nv, name, why, sizeof why)) {
                snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "  skipped %s\n", why);
                continue;
            }
            if (!strcmp(name, "sinusoidal")) add_variant(V, &nv, "sinusoidal+shape", why, sizeof why);
        }
    } else {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", methods);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (add_variant(V, &nv, tok, why, sizeof why)) return cli_fail("compare: --methods: %s", why);
    }
    if (!nv) return cli_fail("compare: no method to train");

    /* the task, shared read-only by every run */
    tr_task task;
    if (tr_task_from_options(&task, &o, &err)) return cli_fail("compare: %s", err.msg);
    tr_options base = o; /* resolved by the first run's init; checked here */
    {
        tr_run probe;
        if (tr_run_init(&probe, &o, &task, &err)) {
            tr_task_free(&task);
            return cli_fail("compare: %s", err.msg);
        }
        base = probe.o;
        tr_run_free(&probe);
    }
    /* SHAPE's paper shifts by up to K = 500 over long training; at this budget K = 4L kept
     * sinusoidal at the bigram plateau, K = L/2 learns and still varies every position seen */
    if (!shape_k) shape_k = base.length / 2 > 1 ? base.length / 2 : 1;

    int njobs = nv * seeds;
    job *J = calloc((size_t)njobs, sizeof(job));
    if (!J) return cli_fail("compare: out of memory");
    for (int j = 0; j < njobs; j++) J[j].v = j / seeds, J[j].seed = 1 + j % seeds;
    int *order = malloc(sizeof(int) * (size_t)njobs);
    if (!order) return cli_fail("compare: out of memory");
#ifdef _OPENMP
    if (!jobs) jobs = omp_get_num_procs();
#else
    jobs = 1;
#endif
    if (jobs > njobs) jobs = njobs;
    printf("posenc compare: %d methods x %d seeds on %s (training length %lld), %lld steps of %lld sequences each,\n"
           "  %lld layers x %lld wide, %lld heads; evaluation at", nv, seeds, base.text[0] ? base.text : base.task,
           (long long)base.length, (long long)base.steps, (long long)base.batch, (long long)base.layers,
           (long long)base.width, (long long)base.heads);
    for (int k = 0; k < base.n_eval; k++) printf(" %lldx", (long long)base.eval[k]);
    printf("; %d runs at a time, BLAS core %s\n%s", jobs, tr_env_blas_core(), skipped);
    fflush(stdout);

    const int64_t total_steps = (int64_t)njobs * base.steps;
    int64_t steps_done = 0;
    int runs_done = 0;
    double t0 = tr_now(), last_print = -1;
    int tty = isatty(2);
    tr_env_setup(1);
    /* the methods' costs differ by 10x: time a few steps of each, then start the longest
     * runs first so that no slow run is left alone at the end */
    double vcost[MAX_VARIANTS];
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(jobs)
#endif
    for (int v = 0; v < nv; v++) {
        tr_env_thread();
        tr_options ro = base;
        pe_err e;
        tr_run run;
        snprintf(ro.method, sizeof ro.method, "%s", V[v].method);
        ro.shape = V[v].shape ? shape_k : 0;
        vcost[v] = 0;
        if (tr_run_init(&run, &ro, &task, &e)) continue; /* the run itself reports it */
        double loss, t1 = 0;
        for (int k = 0; k < 3 && ro.steps > 0; k++) {
            if (k == 1) t1 = tr_now();
            if (tr_run_step(&run, &loss, NULL, &e)) break;
        }
        vcost[v] = t1 > 0 ? (tr_now() - t1) / 2 : 0;
        tr_run_free(&run);
    }
    for (int j = 0; j < njobs; j++) J[j].cost = vcost[J[j].v], order[j] = j;
    for (int a = 1; a < njobs; a++) /* stable insertion sort, costliest first */
        for (int b = a; b > 0 && J[order[b]].cost > J[order[b - 1]].cost; b--) {
            int t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(jobs)
#endif
    for (int oj = 0; oj < njobs; oj++) {
        tr_env_thread();
        job *jb = &J[order[oj]];
        const variant *vr = &V[jb->v];
        tr_options ro = base;
        pe_err e = {{0}};
        snprintf(ro.method, sizeof ro.method, "%s", vr->method);
        ro.seed = (uint64_t)jb->seed;
        ro.shape = vr->shape ? shape_k : 0;
        tr_run run;
        double start = tr_now();
        int64_t tokens = 0;
        if (tr_run_init(&run, &ro, &task, &e)) {
            jb->failed = 1;
            snprintf(jb->err, sizeof jb->err, "%s", e.msg);
        } else {
            double loss = 0;
            while (run.step < ro.steps && !jb->failed) {
                int64_t tk;
                if (tr_run_step(&run, &loss, &tk, &e) || !isfinite(loss)) {
                    jb->failed = 1;
                    snprintf(jb->err, sizeof jb->err, "step %lld: %s", (long long)run.step, isfinite(loss) ? e.msg : "loss not finite");
                }
                tokens += tk;
                int64_t sd;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
                sd = ++steps_done;
                double lp;
#ifdef _OPENMP
#pragma omp atomic read
#endif
                lp = last_print;
                if (!quiet && (tr_now() - t0 - lp > (tty ? 0.25 : 15.0))) {
#ifdef _OPENMP
#pragma omp critical(progress)
#endif
                    {
                        double el = tr_now() - t0;
                        if (el - last_print > (tty ? 0.25 : 15.0)) {
                            char eta[32], ela[32];
                            tr_format_time(eta, sizeof eta, el / (double)sd * (double)(total_steps - sd));
                            tr_format_time(ela, sizeof ela, el);
                            fprintf(stderr, "%scompare: %d/%d runs done, %s seed %d at step %lld, %s elapsed, ETA %s   %s",
                                    tty ? "\r" : "", runs_done, njobs, vr->name, jb->seed, (long long)run.step, ela, eta,
                                    tty ? "" : "\n");
#ifdef _OPENMP
#pragma omp atomic write
#endif
                            last_print = el;
                        }
                    }
                }
            }
            jb->seconds = tr_now() - start;
            jb->tok_per_s = tokens / jb->seconds;
            jb->final_loss = loss;
            for (int k = 0; k < ro.n_eval && !jb->failed; k++)
                if (tr_run_eval(&run, ro.eval[k], &jb->m[k], &e)) {
                    jb->failed = 1;
                    snprintf(jb->err, sizeof jb->err, "evaluation at %lldx: %s", (long long)ro.eval[k], e.msg);
                }
            tr_run_free(&run);
        }
#ifdef _OPENMP
#pragma omp atomic
#endif
        runs_done++;
    }
    double elapsed = tr_now() - t0;
    if (!quiet) fprintf(stderr, "%s", tty ? "\r\033[K" : "");
    int failures = 0;
    for (int j = 0; j < njobs; j++)
        if (J[j].failed) {
            fprintf(stderr, "posenc: compare: %s seed %d failed: %s\n", V[J[j].v].name, J[j].seed, J[j].err);
            failures++;
        }

    /* the table: mean and standard deviation over seeds of the metric at each length */
    const char *metric = tr_metric_name(&task);
    int pct = task.kind != TR_TASK_LM;
    double *mean = calloc((size_t)(nv * base.n_eval), sizeof(double)), *sdv = calloc((size_t)(nv * base.n_eval), sizeof(double));
    double *tps = calloc((size_t)nv, sizeof(double));
    for (int v = 0; v < nv; v++) {
        double tp[MAX_SEEDS];
        int nt = 0;
        for (int k = 0; k < base.n_eval; k++) {
            double x[MAX_SEEDS];
            int n = 0;
            for (int s = 0; s < seeds; s++) {
                const job *jb = &J[v * seeds + s];
                if (jb->failed) continue;
                x[n++] = tr_metric_value(&task, &jb->m[k]);
                if (k == 0) tp[nt++] = jb->tok_per_s;
            }
            mean[v * base.n_eval + k] = n ? mean_of(x, n) : NAN;
            sdv[v * base.n_eval + k] = sd_of(x, n);
        }
        tps[v] = nt ? mean_of(tp, nt) : NAN;
    }
    size_t cap = 65536;
    char *md = malloc(cap), c[64];
    size_t len = 0;
#define MD(...) (len += (size_t)snprintf(md + len, len < cap ? cap - len : 0, __VA_ARGS__))
    /* --quick checks that every method runs; its few steps rank nothing, and its table must
     * not be read (or pasted) as a result */
    static const char smoke[] = "SMOKE TEST (--quick): too few steps to train, these numbers mean nothing";
    if (ca.quick) printf("\n%s\n", smoke), MD("**%s**\n\n", smoke);
    MD("%s on %s, training length %lld: %lld steps x %lld sequences, %lld layers x %lld wide, %lld heads, "
       "%d seed%s; mean ± sd over seeds (%s)\n\n",
       pct ? "exact-match accuracy (%)" : "bits per character", base.text[0] ? "--text" : base.task,
       (long long)base.length, (long long)base.steps, (long long)base.batch, (long long)base.layers,
       (long long)base.width, (long long)base.heads, seeds, seeds > 1 ? "s" : "",
       pct ? "higher is better" : "lower is better");
    MD("| method |");
    for (int k = 0; k < base.n_eval; k++)
        MD(" %lldx (%lld) |", (long long)base.eval[k], (long long)(base.eval[k] * base.length));
    MD(" train tok/s |\n| --- |");
    for (int k = 0; k <= base.n_eval; k++) MD(" ---: |");
    MD("\n");
    printf("\n%-18s", "method");
    for (int k = 0; k < base.n_eval; k++) {
        snprintf(c, sizeof c, "%lldx (%lld)", (long long)base.eval[k], (long long)(base.eval[k] * base.length));
        printf(" %16s", c);
    }
    printf(" %12s\n", "train tok/s");
    for (int v = 0; v < nv; v++) {
        printf("%-18s", V[v].name);
        MD("| `%s` |", V[v].name);
        for (int k = 0; k < base.n_eval; k++) {
            cell(c, sizeof c, mean[v * base.n_eval + k], sdv[v * base.n_eval + k], pct);
            printf(" %16s", c);
            MD(" %s |", c);
        }
        printf(" %11.1fk\n", tps[v] / 1e3);
        MD(" %.1fk |\n", tps[v] / 1e3);
    }
    char tot[32], cpu[32];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    tr_format_time(tot, sizeof tot, elapsed);
    tr_format_time(cpu, sizeof cpu, ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec));
    printf("\n%d runs in %s, %s of CPU time, %d at a time%s\n", njobs, tot, cpu, jobs, failures ? "; some failed, see above" : "");
    MD("\n%d runs in %s (%s of CPU time), %d at a time; train tok/s is per run, with the runs sharing the cores.\n", njobs, tot, cpu, jobs);

    /* files: CSV (every run and length), the markdown table, the plot */
    rc = failures ? 1 : 0;
    if (mkdir(out, 0777) && errno != EEXIST) {
        rc = cli_fail("compare: --out: cannot create '%s': %s", out, strerror(errno));
        goto done;
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/compare.csv", out);
    pe_out po;
    if (pe_out_open(&po, path, &err)) {
        rc = cli_fail("compare: %s", err.msg);
        goto done;
    }
    FILE *f = po.fp;
    fprintf(f, "task,method,variant,seed,train_length,eval_multiple,eval_length,metric,value,loss_nats,bpc,token_acc,exact,steps,train_seconds,train_tokens_per_s,status\n");
    for (int j = 0; j < njobs; j++) {
        const job *jb = &J[j];
        for (int k = 0; k < base.n_eval; k++) {
            const tr_metrics *m = &jb->m[k];
            fprintf(f, "%s,%s,%s,%d,%lld,%lld,%lld,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%lld,%.3f,%.1f,%s\n", base.task,
                    V[jb->v].method, V[jb->v].name, jb->seed, (long long)base.length, (long long)base.eval[k],
                    (long long)(base.eval[k] * base.length), metric, jb->failed ? NAN : tr_metric_value(&task, m),
                    m->loss, m->bpc, m->token_acc, m->exact, (long long)base.steps, jb->seconds, jb->tok_per_s,
                    jb->failed ? "failed" : "ok");
        }
    }
    if (pe_out_commit(&po, &err)) {
        rc = cli_fail("compare: %s", err.msg);
        goto done;
    }
    printf("wrote %s", path);

    /* plot: x = log2 of the multiple, one panel per family (absolute, relative, bias, rotary:
     * 20 lines in one panel cannot be told apart), one y range for all panels. The range fits
     * the bulk of the values: bits per character stop at the 90th percentile of the means plus
     * their spread (tr_plot_fit_y), so one method that blows up does not flatten the others;
     * its points sit on the top edge as triangles, and the axis says so. */
    {
        double *xs = malloc(sizeof(double) * (size_t)base.n_eval), ticks[TR_MAX_EVAL];
        char tl[TR_MAX_EVAL][32];
        const char *tlp[TR_MAX_EVAL];
        for (int k = 0; k < base.n_eval; k++) {
            xs[k] = ticks[k] = log2((double)base.eval[k]);
            snprintf(tl[k], sizeof tl[k], "%lld (%lldx)", (long long)(base.eval[k] * base.length), (long long)base.eval[k]);
            tlp[k] = tl[k];
        }
        char title[320], ylabel[160];
        snprintf(ylabel, sizeof ylabel, "%s", pct ? "exact match (%)" : "bits per character (lower is better)");
        tr_plot pl = {.xlabel = "evaluation length (multiple of the training length)", .ylabel = ylabel,
                      .n_ticks = base.n_eval, .ticks = ticks, .tick_labels = tlp, .W = 1200, .H = 860};
        snprintf(title, sizeof title, "%s%s, trained at length %lld: mean over %d seed%s, bars: \xc2\xb1 sd",
                 ca.quick ? "SMOKE TEST (--quick), numbers mean nothing: " : "", base.text[0] ? "--text" : base.task,
                 (long long)base.length, seeds, seeds > 1 ? "s" : "");
        pl.title = title;
        /* panels: the families present, in the library's order */
        static const int fam[] = {PE_FAMILY_ABSOLUTE, PE_FAMILY_RELATIVE, PE_FAMILY_BIAS, PE_FAMILY_ROTARY};
        const char *ptitle[4];
        int pof[MAX_VARIANTS], npan = 0, fpanel[4];
        for (int q = 0; q < 4; q++) {
            fpanel[q] = -1;
            for (int v = 0; v < nv && fpanel[q] < 0; v++)
                if (family_of(&V[v]) == fam[q]) fpanel[q] = npan, ptitle[npan++] = pe_family_name(fam[q]);
        }
        for (int v = 0; v < nv; v++)
            for (int q = 0; q < 4; q++)
                if (family_of(&V[v]) == fam[q]) pof[v] = fpanel[q];
        if (npan > 1) pl.n_panels = npan, pl.panel_titles = ptitle, pl.panel_of = pof;
        const size_t nser = nv > 0 ? (size_t)nv : 1; /* nv >= 1 here; the bound is for the compiler */
        tr_series *S = calloc(nser, sizeof(tr_series));
        double *ys = malloc(sizeof(double) * 2 * nser * (size_t)base.n_eval);
        for (int v = 0; S && ys && v < nv; v++) {
            double *y = ys + 2 * v * base.n_eval, *e = y + base.n_eval;
            for (int k = 0; k < base.n_eval; k++) {
                double sc = pct ? 100 : 1;
                y[k] = sc * mean[v * base.n_eval + k];
                e[k] = sc * sdv[v * base.n_eval + k];
            }
            S[v] = (tr_series){.label = V[v].name, .n = base.n_eval, .x = xs, .y = y, .err = e};
        }
        if (!pct && S && ys && tr_plot_fit_y(&pl, nv, S) > 0)
            snprintf(ylabel, sizeof ylabel, "bits per character (lower is better), clipped: \xe2\x96\xb2 = above %g",
                     pl.ymax);
        snprintf(path, sizeof path, "%s/compare.png", out);
        if (!xs || !S || !ys) rc = cli_fail("compare: out of memory");
        else if (tr_plot_png(path, &pl, nv, S, &err)) rc = cli_fail("compare: %s", err.msg);
        else printf(", %s", path);
        free(S), free(ys), free(xs);
    }
    snprintf(path, sizeof path, "%s/compare.md", out);
    if (pe_out_open(&po, path, &err)) {
        rc = cli_fail("compare: %s", err.msg);
        goto done;
    }
    fputs(md, po.fp); /* a failed write shows as the stream's error in commit */
    if (pe_out_commit(&po, &err)) {
        rc = cli_fail("compare: %s", err.msg);
        goto done;
    }
    printf(", %s\n", path);
    if (readme) {
        /* the block: the table and the plot, the image path relative to the README */
        char block[70000], rel[1100];
        const char *slash = strrchr(readme, '/');
        size_t dl = slash ? (size_t)(slash - readme + 1) : 0;
        snprintf(rel, sizeof rel, "%s/compare.png", out);
        const char *img = dl && !strncmp(rel, readme, dl) ? rel + dl : rel;
        snprintf(block, sizeof block, "%s\n![metric versus evaluation length](%s)\n", md, img);
        if (cli_readme_block("compare", readme, "compare", block)) rc = 2;
        else printf("updated %s\n", readme);
    }
done:
    free(md), free(mean), free(sdv), free(tps), free(J), free(order);
    tr_task_free(&task);
    return rc;
#undef MD
}
