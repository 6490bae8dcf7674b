/* posenc compare's pool of runs (compare.h): every run to do, one single-threaded run per
 * core (OpenMP), the costliest first by a few timed steps of each variant, with the estimate,
 * the progress line and ETA; a shard writes each run's file as the run ends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../train/env.h"
#include "compare.h"

static double thread_seconds(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? tr_now() : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double wall_now(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_REALTIME, &ts) ? 0 : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Timed steps of a probe: CMP_PROBE_STEPS, and CMP_PROBE_LONG for runs of CMP_PROBE_LONG_RUN
 * steps or more, whose probe is then still about 1% of the run. Their batches vary with the
 * drawn lengths and their first steps grow the buffers: 4 steps of Ruoss et al.'s runs read
 * them about 1.5x too long (session 14). */
enum { CMP_PROBE_STEPS = 4, CMP_PROBE_LONG = 24, CMP_PROBE_LONG_RUN = 2000 };
static int cmp_probe_steps(const tr_options *o) { return o->steps >= CMP_PROBE_LONG_RUN ? CMP_PROBE_LONG : CMP_PROBE_STEPS; }

/* The methods' costs differ by 10x: a few timed steps of each variant that has a run to do
 * (of every variant for the shards' totals of --estimate) give each job its step_cost. */
static void probe_costs(cmp_all *a, const cmp_pool *p) {
    int nvt = 0, vt_first[CMP_MAX_TASKS];
    for (int t = 0; t < a->nt; t++) vt_first[t] = nvt, nvt += a->T[t].nv;
    double *vcost = calloc((size_t)nvt, sizeof(double));
    unsigned char *need = calloc((size_t)nvt, 1);
    for (int j = 0; need && j < a->njobs; j++)
        if (!p->todo || p->todo[j] || (p->estimate_only && p->shard_of)) need[vt_first[a->J[j].t] + a->J[j].v] = 1;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(a->jobs)
#endif
    for (int i = 0; i < nvt; i++) {
        tr_env_thread();
        int t = 0;
        while (t + 1 < a->nt && vt_first[t + 1] <= i) t++;
        const cmp_task *tk = &a->T[t];
        cmp_job probe = {.t = t, .v = i - vt_first[t], .seed = 1};
        tr_options ro = cmp_run_options(tk, &probe);
        pe_err e;
        tr_run run;
        if (!vcost || !need || !need[i] || tr_run_init(&run, &ro, &tk->task, &e)) continue; /* the run itself reports it */
        /* 2 steps to warm up, then CMP_PROBE_STEPS timed in the thread's CPU time, which other
         * processes on the machine do not inflate (the runs will have the cores to themselves);
         * a long run's batches of one drawn length each (the slots layout) vary 2-4x in cost,
         * and its first steps grow the buffers, so it times more of them */
        double loss, t1 = -1;
        int k = 0;
        const int timed = cmp_probe_steps(&ro);
        for (; k < 2 + timed && ro.steps > 0; k++) {
            if (k == 2) t1 = thread_seconds();
            if (tr_run_step(&run, &loss, NULL, &e)) break;
        }
        vcost[i] = t1 >= 0 && k > 2 ? (thread_seconds() - t1) / (k - 2) : 0;
        tr_run_free(&run);
    }
    for (int j = 0; j < a->njobs; j++) a->J[j].step_cost = vcost ? vcost[vt_first[a->J[j].t] + a->J[j].v] : 0;
    free(vcost), free(need);
}

/* The estimate: the runs' training steps at the probes' speed, shared by the cores (the
 * evaluations, a few percent of a run, are not in it; nor is the slowdown of two runs sharing
 * a machine's caches); with shards, of this shard's runs to do, and (--estimate) every shard's. */
static void print_estimate(const cmp_all *a, const cmp_pool *p, const double *cost) {
    char est[32], each[32];
    tr_format_time(est, sizeof est, p->total_cost / a->jobs);
    tr_format_time(each, sizeof each, p->total_cost);
    printf("estimated %s (%s of runs, %d at a time, from %d timed steps of each variant, %d of runs of %d steps or more)",
           est, each, a->jobs, CMP_PROBE_STEPS, CMP_PROBE_LONG, CMP_PROBE_LONG_RUN);
    for (int t = 0; t < a->nt && a->nt > 1; t++) {
        double c = 0;
        for (int j = a->T[t].first_job; j < a->T[t].first_job + a->T[t].nv * a->T[t].seeds; j++) c += p->todo[j] ? cost[j] : 0;
        tr_format_time(each, sizeof each, c);
        printf("%s %s %s", t ? "," : ";", cmp_task_name(a, &a->T[t]), each);
    }
    printf("\n");
    if (p->estimate_only && a->shard.n) {
        printf("every shard of %d, at %d runs at a time:", a->shard.n, a->jobs);
        for (int s = 0; s < a->shard.n && s < 64; s++) {
            double c = 0;
            for (int j = 0; j < a->njobs; j++) c += p->shard_of[j] == s ? cost[j] : 0;
            tr_format_time(each, sizeof each, c / a->jobs);
            printf("%s %d %s", s ? "," : "", s, each);
        }
        printf("%s\n", a->shard.n > 64 ? ", ..." : "");
    }
    fflush(stdout);
}

/* Progress on stderr, at most every 0.25 s on a terminal (15 s otherwise) */
static void progress(cmp_all *a, cmp_pool *p, const cmp_job *jb, int64_t step) {
    double dc, lp;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
    dc = p->done_cost += jb->step_cost;
#ifdef _OPENMP
#pragma omp atomic read
#endif
    lp = p->last_print;
    if (p->quiet || tr_now() - p->t0 - lp <= (p->tty ? 0.25 : 15.0)) return;
#ifdef _OPENMP
#pragma omp critical(progress)
#endif
    {
        double el = tr_now() - p->t0;
        if (el - p->last_print > (p->tty ? 0.25 : 15.0)) {
            char eta[32], ela[32], what[96] = "";
            tr_format_time(eta, sizeof eta, dc > 0 ? el / dc * (p->total_cost - dc) : 0);
            tr_format_time(ela, sizeof ela, el);
            if (a->nt > 1) snprintf(what, sizeof what, "%s: ", cmp_task_name(a, &a->T[jb->t]));
            fprintf(stderr, "%scompare: %d/%d runs done, %s%s seed %d at step %lld, %s elapsed, ETA %s   %s",
                    p->tty ? "\r" : "", p->runs_done, p->runs, what, a->T[jb->t].V[jb->v].name, jb->seed, (long long)step,
                    ela, eta, p->tty ? "" : "\n");
#ifdef _OPENMP
#pragma omp atomic write
#endif
            p->last_print = el;
        }
    }
}

/* One run: training, then the evaluations, into jb. */
static void run_one(cmp_all *a, cmp_pool *p, cmp_job *jb) {
    const cmp_task *tk = &a->T[jb->t];
    tr_options ro = cmp_run_options(tk, jb);
    pe_err e = {{0}};
    tr_run run;
    double start = tr_now(), cpu0 = thread_seconds();
    int64_t tokens = 0;
    jb->wall_start = wall_now();
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
            progress(a, p, jb, run.step);
        }
        jb->seconds = tr_now() - start;
        jb->tok_per_s = jb->seconds > 0 ? (double)tokens / jb->seconds : 0;
        jb->final_loss = loss;
        for (int k = 0; k < ro.n_eval && !jb->failed; k++)
            if (tr_run_eval(&run, ro.eval[k], &jb->m[k], &e)) {
                jb->failed = 1;
                snprintf(jb->err, sizeof jb->err, "evaluation at %lldx: %s", (long long)ro.eval[k], e.msg);
            }
        if (!jb->failed && ro.score_lengths[0] && tr_run_score(&run, &jb->score, &e)) {
            jb->failed = 1;
            snprintf(jb->err, sizeof jb->err, "score over %s: %s", ro.score_lengths, e.msg);
        }
        tr_run_free(&run);
    }
    jb->wall_end = wall_now();
    jb->cpu = thread_seconds() - cpu0;
    snprintf(jb->machine, sizeof jb->machine, "%s", p->machine);
    jb->shard_k = a->shard.n ? a->shard.k : 0, jb->shard_n = a->shard.n ? a->shard.n : 1, jb->jobs = a->jobs;
}

/* The jobs to do, in one pool: the costliest first, one per core, progress and ETA on stderr;
 * a shard writes each run's file as it ends. */
void cmp_run_jobs(cmp_all *a, cmp_pool *p) {
    const int njobs = a->njobs;
    int *order = malloc(sizeof(int) * (size_t)(njobs ? njobs : 1));
    double *cost = malloc(sizeof(double) * (size_t)(njobs ? njobs : 1));
    if (!order || !cost) {
        for (int j = 0; j < njobs; j++) a->J[j].failed = 1, snprintf(a->J[j].err, sizeof a->J[j].err, "out of memory");
        free(order), free(cost);
        return;
    }
    tr_env_cpu_model(p->machine, sizeof p->machine); /* one machine for the process's runs */
    probe_costs(a, p);
    p->runs = 0, p->total_cost = 0;
    for (int j = 0; j < njobs; j++) {
        cost[j] = a->J[j].step_cost * (double)a->T[a->J[j].t].base.steps;
        if (p->todo[j]) order[p->runs++] = j, p->total_cost += cost[j];
    }
    for (int x = 1; x < p->runs; x++) /* stable insertion sort, costliest first */
        for (int y = x; y > 0 && cost[order[y]] > cost[order[y - 1]]; y--) {
            int s = order[y];
            order[y] = order[y - 1], order[y - 1] = s;
        }
    print_estimate(a, p, cost);
    if (p->estimate_only) {
        free(order), free(cost);
        return;
    }
    p->done_cost = 0, p->t0 = tr_now(), p->last_print = -1, p->runs_done = 0, p->tty = isatty(2);
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(a->jobs)
#endif
    for (int oj = 0; oj < p->runs; oj++) {
        tr_env_thread();
        run_one(a, p, &a->J[order[oj]]);
        if (p->save) {
#ifdef _OPENMP
#pragma omp critical(save)
#endif
            if (cmp_run_save(a, order[oj], p->save)) p->save_failed = 1;
        }
#ifdef _OPENMP
#pragma omp atomic
#endif
        p->runs_done++;
    }
    a->elapsed = tr_now() - p->t0;
    if (!p->quiet) fprintf(stderr, "%s", p->tty ? "\r\033[K" : "");
    free(order), free(cost);
}

