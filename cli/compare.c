/* posenc compare: the extrapolation experiment. Trains every chosen method (default: every
 * method of the library the trainer supports, plus sinusoidal with SHAPE) with the same
 * budget and seeds, evaluates each at multiples of the training length, and writes a table
 * (mean and spread over seeds), a CSV and a PNG plot of the metric versus evaluation length.
 * --full does it for lm and the synthetic tasks, each with its own budget (FULL below), plus
 * the variants the published orderings need, in one pool of runs, and --results writes the
 * results page (cli/results.c). Runs are independent: one single-threaded run per core
 * (OpenMP), which at this model size beats threading inside a run (doc/perf.md, item 4). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../train/env.h"
#include "../train/plot.h"
#include "../tools/output.h"
#include "cli.h"
#include "compare.h"
#include "options.h"

/* ---- the budgets of --full --------------------------------------------------------------- *
 * Found by short runs (one seed, rope and two or three others per task, on 2 shared cores; the
 * results page prints the table). The whole of --full has to fit 60 minutes on 2 cores: about
 * 400 runs (5 tasks, 24 to 29 variants, 3 seeds). The synthetic tasks' short sequences make
 * most methods cost about the same there (floater 1.5x, pope 2.6x), while count's 75
 * tokens put the T x T methods at 2-3x. compare --full --estimate prints each task's share:
 * 30 to 37 minutes of training here; the run of doc/results.md took 34:39 on the quiet machine
 * (two runs sharing the caches, and the evaluations); more with other work on the cores. */
typedef struct full_budget {
    const char *task;
    const char *opts;     /* training options, "NAME VALUE ..." (the command line's override them) */
    const char *variants; /* added when their method is in the list */
    const char *why;
} full_budget;

static const full_budget FULL[] = {
    {"lm", "length 64 steps 1500 batch 4", "",
     "the default comparison's budget (posenc compare, the README's table): every method but none leaves the "
     "bigram plateau at 1x; at length 128 and 720 steps the absolute encodings stayed on it"},
    {"copy", "length 8 layers 4 width 32 heads 4 steps 3000 batch 16",
     "sinusoidal+random,learned+random,complex+random,rope+random,alibi+random",
     "at lm's 2 layers x 64 wide, rope learns copying only after about 3000 steps of 16 (the loss falls all at "
     "once) and none and alibi were at 0% after 1500; 4 layers x 32 wide with 4 heads of 8 learn it sooner, "
     "at about half the wider model's cost per step: in 3000 steps alibi 97%, none 78% (rope 100% with 2 "
     "heads), in 2000 alibi 57%, rope 49%, none 18%. 2 heads (alibi 21% in 3000), length 6, batches of 8 or 12 "
     "(more steps, the same tokens: 0-1%) and of 24 or 32 (fewer steps: 0-38%) learned less. Randomized "
     "positions for the absolute encodings, rope and alibi, as Ruoss et al. ran them; not none, which has no "
     "positions, nor floater, whose ODE is solved anew for every draw of positions (10x floater's cost)"},
    {"reverse", "length 8 layers 4 width 32 heads 4 steps 3000 batch 16",
     "sinusoidal+random,learned+random,complex+random,rope+random,alibi+random",
     "the budget of copy, sequences of the same length (rope: 93% at 1x in 3000 steps; at 3 layers x 32 wide "
     "with 2 heads, 17% in 4000)"},
    {"add", "length 4 layers 4 width 32 heads 4 steps 600 batch 16", "fire+random,rope+random",
     "out of reach at this size and time: with the model of copy, 3000 steps at length 8 left rope and fire at "
     "0% (30% of the digits) and 4000 steps at length 4 left rope and learned at 1% (55% of the digits), with "
     "the operands most significant digit first and the sum least significant first; so a shorter run at "
     "length 4 that shows it; fire+random is Zhou et al. 2024's recipe (FIRE with randomized positions)"},
    {"count", "length 64 layers 2 width 32 heads 4 steps 1200 batch 8 eval-tokens 32768", "rope+random",
     "64 statements, so the values asked about span CoPE's 0..10 (at 16 they are mostly 0..2 and the longer "
     "evaluations would ask for counts never trained): 2x-8x test longer contexts, not larger answers. "
     "Sequences of about 75 tokens; cope answers 69% at 1x after 1000 steps of 8 and 76% after 1500 (rope "
     "48%; with 2 heads 69% and 31%); cope, on the T x T path, costs 2.8x rope. 32768 tokens evaluated per "
     "length: the answer is one or two tokens of a long sequence, and 8192 left 16 sequences at 8x"},
};
enum { N_FULL = sizeof FULL / sizeof FULL[0] };
/* --full --quick: every task in seconds, for the tests; its numbers mean nothing */
static const char FULL_QUICK[] = "steps 20 batch 4 layers 1 width 16 heads 2 eval-tokens 128 corpus-chars 20000";

static const char *method_name_of(int i) { return i < PE_METHOD_COUNT ? pe_method_name(i) : NULL; }

int cmp_find(const cmp_task *t, const char *name) {
    for (int v = 0; v < t->nv; v++)
        if (!strcmp(t->V[v].name, name)) return v;
    return -1;
}

int cmp_task_find(const cmp_all *a, const char *name) {
    for (int i = 0; i < a->nt; i++)
        if (!strcmp(a->T[i].base.task, name)) return i;
    return -1;
}

static int add_variant(cmp_variant *v, int *n, const char *name, char *why, size_t why_len) {
    if (*n == CMP_MAX_VARIANTS) return snprintf(why, why_len, "at most %d methods", CMP_MAX_VARIANTS), -1;
    cmp_variant *x = &v[*n];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->method, sizeof x->method, "%s", name);
    char *plus = strchr(x->method, '+');
    if (plus) {
        if (!strcmp(plus, "+shape")) x->shape = 1;
        else if (!strcmp(plus, "+random")) x->random = 1;
        else return snprintf(why, why_len, "'%s': the variants are NAME+shape and NAME+random", name), -1;
        *plus = 0;
    }
    const char *reason;
    const char *best = pe_method_from_name(x->method) < 0 ? arg_nearest(x->method, method_name_of) : NULL;
    if (best) return snprintf(why, why_len, "unknown method '%s' (did you mean %s?)", x->method, best), -1;
    if (tr_method_placement(x->method, &reason) == TR_PLACE_NONE)
        return snprintf(why, why_len, "%s: %s", x->method, reason), -1;
    if (x->shape && tr_method_placement(x->method, NULL) != TR_PLACE_INPUT)
        return snprintf(why, why_len, "'%s': SHAPE applies to absolute encodings", name), -1;
    pe_method_info info;
    if (x->random && !pe_method_describe(pe_method_from_name(x->method), &info, NULL) && info.memory)
        return snprintf(why, why_len, "'%s': %s places keys by token index over its memory, not by position", name,
                        x->method), -1;
    for (int i = 0; i < *n; i++)
        if (!strcmp(v[i].name, x->name)) return snprintf(why, why_len, "'%s' given twice", name), -1;
    (*n)++;
    return 0;
}

/* Sets "NAME VALUE NAME VALUE ..." into o. */
static int set_pairs(tr_options *o, const char *pairs, pe_err *err) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", pairs);
    char *save = NULL, *k = strtok_r(buf, " ", &save);
    while (k) {
        char *v = strtok_r(NULL, " ", &save);
        if (!v || tr_options_set(o, k, v, err)) return -1;
        k = strtok_r(NULL, " ", &save);
    }
    return 0;
}

/* Builds one task of the comparison from its options: the task, a probe run for the resolved
 * options, SHAPE's K and randomized positions' N. */
static int task_setup(cmp_task *t, const tr_options *o, int64_t shape_k, int64_t random_n) {
    pe_err err = {{0}};
    if (tr_task_from_options(&t->task, o, &err)) return cli_fail("compare: %s: %s", o->task, err.msg);
    tr_run probe;
    if (tr_run_init(&probe, o, &t->task, &err)) {
        tr_task_free(&t->task);
        return cli_fail("compare: %s: %s", o->task, err.msg);
    }
    t->base = probe.o;
    tr_run_free(&probe);
    /* SHAPE's paper shifts by up to K = 500 over long training; at this budget K = 4L kept
     * sinusoidal at the bigram plateau, K = L/2 learns and still varies every position seen */
    t->shape_k = shape_k ? shape_k : t->base.length / 2 > 1 ? t->base.length / 2 : 1;
    /* randomized positions: N covers the longest evaluated sequence (the trainer requires it,
     * the paper's N = 2048 covers its test lengths), the power of two at or above it */
    int64_t longest = 1;
    for (int k = 0; k < t->base.n_eval; k++) longest = t->base.eval[k] > longest ? t->base.eval[k] : longest;
    int64_t need = tr_task_seq_len(&t->task, longest * t->base.length), n = 1;
    while (n < need) n *= 2;
    t->random_n = random_n ? random_n : n;
    int any_random = 0;
    for (int v = 0; v < t->nv; v++) any_random |= t->V[v].random;
    if (any_random && t->random_n < need) {
        tr_task_free(&t->task);
        return cli_fail("compare: --random-n %lld: %s needs at least %lld (its longest evaluated sequence)",
                        (long long)random_n, o->task, (long long)need);
    }
    t->bigram_bpc = t->task.kind == TR_TASK_LM ? cmp_bigram_bpc(&t->task) : NAN;
    for (int k = 0; k < t->base.n_eval; k++)
        t->chance[k] = t->task.kind == TR_TASK_LM ? NAN : cmp_chance_at(&t->task, t->base.eval[k] * t->base.length, t->base.eval_tokens);
    return 0;
}

/* The options of job j's run. */
static tr_options run_options(const cmp_task *t, const cmp_job *jb) {
    tr_options ro = t->base;
    const cmp_variant *vr = &t->V[jb->v];
    snprintf(ro.method, sizeof ro.method, "%s", vr->method);
    ro.seed = (uint64_t)jb->seed;
    ro.shape = vr->shape ? t->shape_k : 0;
    ro.random_positions = vr->random ? t->random_n : t->base.random_positions;
    return ro;
}

static double thread_seconds(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? tr_now() : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every job of every task, in one pool: the costliest first, one per core, progress and ETA
 * on stderr. */
static void run_jobs(cmp_all *a, int quiet, int estimate_only) {
    const int njobs = a->njobs;
    int *order = malloc(sizeof(int) * (size_t)njobs);
    double *cost = malloc(sizeof(double) * (size_t)njobs);
    if (!order || !cost) {
        for (int j = 0; j < njobs; j++) a->J[j].failed = 1, snprintf(a->J[j].err, sizeof a->J[j].err, "out of memory");
        free(order), free(cost);
        return;
    }
    /* the methods' costs differ by 10x: time a few steps of each variant of each task, then
     * start the longest runs first so that no slow run is left alone at the end */
    int nvt = 0, vt_first[CMP_MAX_TASKS];
    for (int t = 0; t < a->nt; t++) vt_first[t] = nvt, nvt += a->T[t].nv;
    double *vcost = calloc((size_t)nvt, sizeof(double));
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(a->jobs)
#endif
    for (int i = 0; i < nvt; i++) {
        tr_env_thread();
        int t = 0;
        while (t + 1 < a->nt && vt_first[t + 1] <= i) t++;
        const cmp_task *tk = &a->T[t];
        cmp_job probe = {.t = t, .v = i - vt_first[t], .seed = 1};
        tr_options ro = run_options(tk, &probe);
        pe_err e;
        tr_run run;
        if (!vcost || tr_run_init(&run, &ro, &tk->task, &e)) continue; /* the run itself reports it */
        /* 2 steps to warm up, 4 timed in the thread's CPU time, which other processes on the
         * machine do not inflate (the runs will have the cores to themselves) */
        double loss, t1 = -1;
        int k = 0;
        for (; k < 6 && ro.steps > 0; k++) {
            if (k == 2) t1 = thread_seconds();
            if (tr_run_step(&run, &loss, NULL, &e)) break;
        }
        vcost[i] = t1 >= 0 && k > 2 ? (thread_seconds() - t1) / (k - 2) : 0;
        tr_run_free(&run);
    }
    double total_cost = 0;
    for (int j = 0; j < njobs; j++) {
        cmp_job *jb = &a->J[j];
        jb->step_cost = vcost ? vcost[vt_first[jb->t] + jb->v] : 0;
        cost[j] = jb->step_cost * (double)a->T[jb->t].base.steps;
        total_cost += cost[j];
        order[j] = j;
    }
    free(vcost);
    for (int x = 1; x < njobs; x++) /* stable insertion sort, costliest first */
        for (int y = x; y > 0 && cost[order[y]] > cost[order[y - 1]]; y--) {
            int s = order[y];
            order[y] = order[y - 1], order[y - 1] = s;
        }
    {
        /* the estimate: the runs' training steps at the probes' speed, shared by the cores
         * (the evaluations, a few percent of a run, are not in it; nor is the slowdown of two
         * runs sharing a machine's caches) */
        char est[32], each[32];
        tr_format_time(est, sizeof est, total_cost / a->jobs);
        tr_format_time(each, sizeof each, total_cost);
        printf("estimated %s (%s of runs, %d at a time, from 4 timed steps of each variant)", est, each, a->jobs);
        for (int t = 0; t < a->nt && a->nt > 1; t++) {
            double c = 0;
            for (int j = a->T[t].first_job; j < a->T[t].first_job + a->T[t].nv * a->seeds; j++) c += cost[j];
            tr_format_time(each, sizeof each, c);
            printf("%s %s %s", t ? "," : ";", a->T[t].base.task, each);
        }
        printf("\n");
        fflush(stdout);
    }
    if (estimate_only) {
        free(order), free(cost);
        return;
    }
    /* progress: the ETA weighs every step by its run's measured cost, since the tasks' steps differ */
    double done_cost = 0, t0 = tr_now(), last_print = -1;
    int runs_done = 0;
    const int tty = isatty(2);
    double *t_start = malloc(sizeof(double) * (size_t)a->nt), *t_end = malloc(sizeof(double) * (size_t)a->nt);
    for (int t = 0; t < a->nt && t_start && t_end; t++) t_start[t] = INFINITY, t_end[t] = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(a->jobs)
#endif
    for (int oj = 0; oj < njobs; oj++) {
        tr_env_thread();
        cmp_job *jb = &a->J[order[oj]];
        const cmp_task *tk = &a->T[jb->t];
        const cmp_variant *vr = &tk->V[jb->v];
        tr_options ro = run_options(tk, jb);
        pe_err e = {{0}};
        tr_run run;
        double start = tr_now();
        int64_t tokens = 0;
        if (tr_run_init(&run, &ro, &tk->task, &e)) {
            jb->failed = 1;
            snprintf(jb->err, sizeof jb->err, "%s", e.msg);
        } else {
            double loss = 0;
            while (run.step < ro.steps && !jb->failed) {
                int64_t tkn = 0;
                if (tr_run_step(&run, &loss, &tkn, &e) || !isfinite(loss)) {
                    jb->failed = 1;
                    snprintf(jb->err, sizeof jb->err, "step %lld: %s", (long long)run.step, isfinite(loss) ? e.msg : "loss not finite");
                }
                tokens += tkn;
                double dc;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
                dc = done_cost += jb->step_cost;
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
                            char eta[32], ela[32], what[96] = "";
                            tr_format_time(eta, sizeof eta, dc > 0 ? el / dc * (total_cost - dc) : 0);
                            tr_format_time(ela, sizeof ela, el);
                            if (a->nt > 1) snprintf(what, sizeof what, "%s: ", tk->base.task);
                            fprintf(stderr, "%scompare: %d/%d runs done, %s%s seed %d at step %lld, %s elapsed, ETA %s   %s",
                                    tty ? "\r" : "", runs_done, njobs, what, vr->name, jb->seed, (long long)run.step, ela,
                                    eta, tty ? "" : "\n");
#ifdef _OPENMP
#pragma omp atomic write
#endif
                            last_print = el;
                        }
                    }
                }
            }
            jb->seconds = tr_now() - start;
            jb->tok_per_s = jb->seconds > 0 ? (double)tokens / jb->seconds : 0;
            jb->final_loss = loss;
            for (int k = 0; k < ro.n_eval && !jb->failed; k++)
                if (tr_run_eval(&run, ro.eval[k], &jb->m[k], &e)) {
                    jb->failed = 1;
                    snprintf(jb->err, sizeof jb->err, "evaluation at %lldx: %s", (long long)ro.eval[k], e.msg);
                }
            tr_run_free(&run);
        }
        double end = tr_now();
#ifdef _OPENMP
#pragma omp critical(task_times)
#endif
        if (t_start && t_end) {
            t_start[jb->t] = start < t_start[jb->t] ? start : t_start[jb->t];
            t_end[jb->t] = end > t_end[jb->t] ? end : t_end[jb->t];
        }
#ifdef _OPENMP
#pragma omp atomic
#endif
        runs_done++;
    }
    a->elapsed = tr_now() - t0;
    for (int t = 0; t < a->nt; t++) {
        /* a task's runs interleave with the others': its time is the sum of its runs' */
        double s = 0;
        for (int j = a->T[t].first_job; j < a->T[t].first_job + a->T[t].nv * a->seeds; j++) s += a->J[j].seconds;
        a->T[t].elapsed = a->nt > 1 ? s : t_start && t_end && t_end[t] > t_start[t] ? t_end[t] - t_start[t] : a->elapsed;
    }
    if (!quiet) fprintf(stderr, "%s", tty ? "\r\033[K" : "");
    free(order), free(cost), free(t_start), free(t_end);
}

static void free_all(cmp_all *a) {
    for (int t = 0; t < a->nt; t++) {
        cmp_task *tk = &a->T[t];
        free(tk->mean), free(tk->sd), free(tk->tacc), free(tk->tps), free(tk->learned), free(tk->md);
        tr_task_free(&tk->task);
    }
    free(a->J);
    free(a);
}

int cli_compare(int argc, char **argv) {
    compare_args ca;
    arg_res r;
    ARGS_COMPARE.init(&ca);
    int rc = arg_parse(&ARGS_COMPARE, argc, argv, &ca, &r);
    if (rc < 0) tr_options_help();
    if (rc) return rc < 0 ? 0 : rc;
    pe_err err = {{0}};
    const char *methods = ca.methods, *out = ca.out, *readme = ca.readme, *results = ca.results;
    const int seeds = ca.seeds ? (int)ca.seeds : ca.quick ? 1 : 3;
    int jobs = (int)ca.jobs;
    rc = cli_train_keys(&ARGS_COMPARE, &r);
    if (!rc && ca.full && readme && !results)
        rc = cli_fail("compare: --full --readme writes the verdicts of the results page: it needs --results");
    if (!rc && !ca.full && results) rc = cli_fail("compare: --results needs --full");
    for (int i = 0; !rc && i < r.n_keys; i++) {
        const char *k = r.keys[i];
        if (!strcmp(k, "method") || !strcmp(k, "seed") || !strcmp(k, "shape"))
            rc = cli_fail("compare: --%s is chosen per run; use --methods, --seeds, --shape-k", k);
        else if (ca.full && !strcmp(k, "task")) rc = cli_fail("compare: --full runs every task; --task is for one");
        else if (!tr_options_known(k)) rc = cli_fail("compare: unknown option --%s", k);
    }
    /* the README's block must be there before the runs, not found missing after them */
    if (!rc && readme && cli_readme_block("compare", readme, ca.full ? "results" : "compare", NULL)) rc = 2;
    if (!rc && results) { /* and the results page writable */
        pe_out po;
        if (pe_out_open(&po, results, &err)) rc = cli_fail("compare: --results: %s", err.msg);
        else pe_out_abort(&po);
    }
    if (rc) {
        arg_free(&r);
        return rc;
    }
    tr_env_blas_select("compare", argc, argv);

    cmp_all *a = calloc(1, sizeof *a);
    if (!a) {
        arg_free(&r);
        return cli_fail("compare: out of memory");
    }
    a->seeds = seeds, a->quick = ca.quick, a->full = ca.full;
    for (int i = 0, n = 0; i < argc && n < (int)sizeof a->command - 1; i++)
        n += snprintf(a->command + n, sizeof a->command - (size_t)n, "%s%s", i ? " " : "", argv[i]);

    /* the tasks: one (the command line's), or every task of FULL with its budget; the command
     * line's training options apply to every task, after the budget */
    const int ntasks = ca.full ? N_FULL : 1;
    char skipped[2048] = "";
    for (int t = 0; !rc && t < ntasks; t++) {
        cmp_task *tk = &a->T[a->nt];
        tr_options o;
        tr_options_default(&o);
        if (ca.full) {
            tr_options_set(&o, "task", FULL[t].task, &err);
            if (set_pairs(&o, FULL[t].opts, &err) || (ca.quick && set_pairs(&o, FULL_QUICK, &err))) {
                rc = cli_fail("compare: the budget of %s: %s", FULL[t].task, err.msg);
                break;
            }
            if (ca.quick) tr_options_set(&o, "length", strcmp(FULL[t].task, "lm") ? "4" : "16", &err);
            tk->why = ca.quick ? "--quick: a smoke test's budget" : FULL[t].why;
            snprintf(tk->stem, sizeof tk->stem, "%s", FULL[t].task);
        } else {
            if (ca.quick) { /* before the command line's options, which override it */
                const char *q[][2] = {{"length", "32"}, {"steps", "60"}, {"batch", "8"}, {"eval-tokens", "1024"},
                                      {"corpus-chars", "200000"}};
                for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) tr_options_set(&o, q[i][0], q[i][1], &err);
            }
            tk->why = "";
            snprintf(tk->stem, sizeof tk->stem, "compare");
        }
        for (int i = 0; !rc && i < r.n_keys; i++)
            if (tr_options_set(&o, r.keys[i], r.vals[i], &err)) rc = cli_fail("compare: %s", err.msg);
        if (rc) break;
        /* the variants: every method the trainer supports, in the library's order, or the
         * list; then (--full) the task's own variants whose method is in it */
        char why[256];
        if (!strcmp(methods, "all")) {
            for (int m = 0; m < PE_METHOD_COUNT; m++) {
                const char *name = pe_method_name(m);
                if (add_variant(tk->V, &tk->nv, name, why, sizeof why)) {
                    if (t == 0) snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "  skipped %s\n", why);
                    continue;
                }
                if (!strcmp(name, "sinusoidal")) add_variant(tk->V, &tk->nv, "sinusoidal+shape", why, sizeof why);
            }
        } else {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", methods);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save))
                if (add_variant(tk->V, &tk->nv, tok, why, sizeof why)) rc = cli_fail("compare: --methods: %s", why);
        }
        if (!rc && ca.full) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", FULL[t].variants);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
                char base[48];
                snprintf(base, sizeof base, "%.*s", (int)strcspn(tok, "+"), tok);
                if (cmp_find(tk, base) >= 0 && cmp_find(tk, tok) < 0 && add_variant(tk->V, &tk->nv, tok, why, sizeof why))
                    rc = cli_fail("compare: %s", why);
            }
        }
        if (!rc && !tk->nv) rc = cli_fail("compare: no method to train");
        if (!rc) rc = task_setup(tk, &o, ca.shape_k, ca.random_n);
        if (!rc) a->nt++;
    }
    arg_free(&r);
    if (rc) {
        free_all(a);
        return rc;
    }
    for (int t = 0; t < a->nt; t++) a->T[t].first_job = a->njobs, a->njobs += a->T[t].nv * seeds;
    a->J = calloc((size_t)a->njobs, sizeof(cmp_job));
    if (!a->J) {
        free_all(a);
        return cli_fail("compare: out of memory");
    }
    for (int t = 0; t < a->nt; t++)
        for (int j = 0; j < a->T[t].nv * seeds; j++) {
            cmp_job *jb = &a->J[a->T[t].first_job + j];
            jb->t = t, jb->v = j / seeds, jb->seed = 1 + j % seeds;
        }
#ifdef _OPENMP
    if (!jobs) jobs = omp_get_num_procs();
#else
    jobs = 1;
#endif
    if (jobs > a->njobs) jobs = a->njobs;
    a->jobs = jobs;
    if (ca.full) {
        printf("posenc compare --full: %d tasks, %d runs (variants x %d seeds), %d at a time, BLAS core %s\n", a->nt,
               a->njobs, seeds, jobs, tr_env_blas_core());
        for (int t = 0; t < a->nt; t++) {
            const tr_options *b = &a->T[t].base;
            printf("  %-8s %2d variants, length %lld, %lld steps x %lld, %lld layers x %lld wide, %lld heads\n", b->task,
                   a->T[t].nv, (long long)b->length, (long long)b->steps, (long long)b->batch, (long long)b->layers,
                   (long long)b->width, (long long)b->heads);
        }
        printf("%s", skipped);
    } else {
        const tr_options *b = &a->T[0].base;
        printf("posenc compare: %d methods x %d seeds on %s (training length %lld), %lld steps of %lld sequences each,\n"
               "  %lld layers x %lld wide, %lld heads; evaluation at", a->T[0].nv, seeds, b->text[0] ? b->text : b->task,
               (long long)b->length, (long long)b->steps, (long long)b->batch, (long long)b->layers, (long long)b->width,
               (long long)b->heads);
        for (int k = 0; k < b->n_eval; k++) printf(" %lldx", (long long)b->eval[k]);
        printf("; %d runs at a time, BLAS core %s\n%s", jobs, tr_env_blas_core(), skipped);
    }
    fflush(stdout);

    tr_env_setup(1);
    run_jobs(a, ca.quiet, ca.estimate);
    if (ca.estimate) {
        free_all(a);
        return 0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    a->cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    int failures = 0;
    for (int j = 0; j < a->njobs; j++)
        if (a->J[j].failed) {
            const cmp_job *jb = &a->J[j];
            fprintf(stderr, "posenc: compare: %s%s%s seed %d failed: %s\n", ca.full ? a->T[jb->t].base.task : "",
                    ca.full ? ": " : "", a->T[jb->t].V[jb->v].name, jb->seed, jb->err);
            failures++;
        }

    /* tables and files, task by task */
    rc = failures ? 1 : 0;
    if (mkdir(out, 0777) && errno != EEXIST) {
        rc = cli_fail("compare: --out: cannot create '%s': %s", out, strerror(errno));
        free_all(a);
        return rc;
    }
    for (int t = 0; t < a->nt; t++) {
        cmp_task *tk = &a->T[t];
        if (cmp_task_stats(tk, a) || !(tk->md = cmp_task_table(tk, a))) {
            rc = cli_fail("compare: out of memory");
            break;
        }
    }
    char tot[32], cpu[32];
    tr_format_time(tot, sizeof tot, a->elapsed);
    tr_format_time(cpu, sizeof cpu, a->cpu);
    printf("\n%d runs in %s, %s of CPU time, %d at a time%s\n", a->njobs, tot, cpu, jobs,
           failures ? "; some failed, see above" : "");
    for (int t = 0; t < a->nt && rc < 2; t++) {
        int r2 = cmp_task_files(&a->T[t], a, out, a->T[t].md);
        if (r2) rc = r2;
    }
    if (rc < 2 && readme && !ca.full) {
        /* the block: the table and the plot, the image path relative to the README */
        char *block = malloc(70000), rel[1100];
        const char *slash = strrchr(readme, '/');
        size_t dl = slash ? (size_t)(slash - readme + 1) : 0;
        snprintf(rel, sizeof rel, "%s/compare.png", out);
        const char *img = dl && !strncmp(rel, readme, dl) ? rel + dl : rel;
        if (!block) rc = cli_fail("compare: out of memory");
        else {
            snprintf(block, 70000, "%s\n![metric versus evaluation length](%s)\n", a->T[0].md, img);
            if (cli_readme_block("compare", readme, "compare", block)) rc = 2;
            else printf("updated %s\n", readme);
        }
        free(block);
    }
    if (rc < 2 && results) {
        if (cmp_results_write(a, results, out, readme)) rc = 2;
        else printf("wrote %s%s%s\n", results, readme ? " and updated " : "", readme ? readme : "");
    }
    free_all(a);
    return rc;
}
