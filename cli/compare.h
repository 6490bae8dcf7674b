/* posenc compare's runs and results, shared by cli/compare.c (the runs, a task's table, CSV
 * and plot) and cli/results.c (the results page of --full: the published orderings tested on
 * the numbers of the run, and a paragraph per task written from them). */
#ifndef PE_CLI_COMPARE_H
#define PE_CLI_COMPARE_H

#include "../train/trainer.h"

#define CMP_MAX_VARIANTS 64
#define CMP_MAX_SEEDS 16
#define CMP_MAX_TASKS 8

/* In distribution: a task is learned when the mean exact match over seeds at 1x reaches this
 * (at least half of the answers right: chance is near 0 for copy, reverse and add, about 20%
 * for count);
 * lm when the bits per character at 1x are at least CMP_LM_MARGIN below those of the bigram
 * model of the training text on the same held-out text (a model that only reads the current
 * character gets the bigram's bits; below it, it uses the context). */
#define CMP_LEARNED_EXACT 0.5
#define CMP_LM_MARGIN 0.05

typedef struct cmp_variant {
    char name[48];   /* "rope", "sinusoidal+shape", "rope+random" */
    char method[32];
    int shape;       /* SHAPE shifts (NAME+shape) */
    int random;      /* randomized positions (NAME+random) */
} cmp_variant;

typedef struct cmp_job {
    int t, v, seed;
    double step_cost; /* seconds per step, measured before the runs (longest runs start first) */
    tr_metrics m[TR_MAX_EVAL];
    double seconds, tok_per_s, final_loss;
    int failed;
    char err[640];
} cmp_job;

/* One task of the comparison: its budget, variants, and, after the runs, the statistics. */
typedef struct cmp_task {
    tr_options base;    /* the options of every run (resolved by a probe run) */
    tr_task task;
    int64_t shape_k, random_n;
    const char *why;    /* --full: why this budget ("" otherwise) */
    char stem[32];      /* output files DIR/STEM.csv, .md, .png */
    cmp_variant V[CMP_MAX_VARIANTS];
    int nv;
    int first_job;      /* jobs first_job .. first_job + nv * seeds - 1, variant-major */
    double elapsed;     /* wall seconds from the first of its runs starting to the last ending */
    /* statistics over seeds, [v * n_eval + k]: the metric and token accuracy; per variant the
     * training tokens/s and whether it learned the task at 1x (1, 0, -1: every run failed) */
    double *mean, *sd, *tacc;
    double *tps;
    int *learned;
    double bigram_bpc;  /* lm: bits per character of the bigram model on the held-out text */
    double chance[TR_MAX_EVAL]; /* tasks: the exact match of always giving the most common answer
                                 * of the evaluated sequences, at each length */
    char *md;           /* its Markdown table */
} cmp_task;

typedef struct cmp_all {
    cmp_task T[CMP_MAX_TASKS];
    int nt, seeds, jobs, quick, full;
    cmp_job *J;
    int njobs;
    double elapsed, cpu;  /* seconds of the whole comparison */
    char command[1024];   /* the command line, for the results page */
} cmp_all;

/* The metric of variant v at the k-th evaluation length, and whether it learned the task. */
static inline double cmp_mean(const cmp_task *t, int v, int k) { return t->mean[v * t->base.n_eval + k]; }
static inline double cmp_sd(const cmp_task *t, int v, int k) { return t->sd[v * t->base.n_eval + k]; }
/* The index of a variant by name, -1 when it was not run. */
int cmp_find(const cmp_task *t, const char *name);
/* The index of the task by name among a's, -1 when not run. */
int cmp_task_find(const cmp_all *a, const char *name);
/* "82.3 ± 1.2" (tasks: percent) or "2.134 ± 0.012" (lm); "failed" when no run finished. */
void cmp_cell(char *buf, size_t n, double mean, double sd, int pct);

/* The results page of --full (cli/results.c): the budgets, every task's table and plot
 * (images relative to the page), the published orderings with the criterion each is tested
 * by and its verdict, and a paragraph per task from its numbers. Returns 0 or cli_fail's 2. */
int cmp_results_write(const cmp_all *a, const char *path, const char *out_dir, const char *readme);

/* A task's statistics over its runs' results (mean, sd per variant and length; 1: a run
 * failed), its Markdown table (malloc'd), and its CSV, table and plot into out (md: the
 * table's text) (compare_tables.c) */
int cmp_task_stats(cmp_task *t, const cmp_all *a);
/* the floors a task's table shows: the bigram model's bits per character (lm), and the exact
 * match of guessing at length n (the synthetic tasks) */
double cmp_bigram_bpc(const tr_task *t);
double cmp_chance_at(const tr_task *t, int64_t n, int64_t eval_tokens);
char *cmp_task_table(const cmp_task *t, const cmp_all *a);
int cmp_task_files(const cmp_task *t, const cmp_all *a, const char *out, const char *md);

#endif
