/* posenc compare's runs and results, shared by cli/compare.c (the runs, a task's table, CSV
 * and plot) and cli/results.c (the results page of --full: the published orderings tested on
 * the numbers of the run, and a paragraph per task written from them). */
#ifndef PE_CLI_COMPARE_H
#define PE_CLI_COMPARE_H

#include "../train/trainer.h"

#define CMP_MAX_VARIANTS 64
#define CMP_MAX_SEEDS 16
#define CMP_MAX_TASKS 16

/* In distribution: a task is learned when the mean exact match over seeds at 1x reaches this
 * (at least half of the answers right: chance is near 0 for copy, reverse and add, about 20%
 * for count); a task scored by token accuracy (Ruoss et al.'s: --score-lengths with the
 * token_acc metric) when its mean token accuracy at 1x reaches CMP_LEARNED_TOKEN, since their
 * 40-token answers are rarely exact even at 93% of tokens right, and the token is what they score;
 * lm when the bits per character at 1x are at least CMP_LM_MARGIN below those of the bigram
 * model of the training text on the same held-out text (a model that only reads the current
 * character gets the bigram's bits; below it, it uses the context). */
#define CMP_LEARNED_EXACT 0.5
#define CMP_LEARNED_TOKEN 0.9
#define CMP_LM_MARGIN 0.05

/* A hybrid of the 2025 models (cli/compare.c: HYBRIDS): a method per layer, cycled; a sliding
 * window of L/4 tokens on its rope layers (swa); Llama 4's temperature on its none layers. */
typedef struct cmp_hybrid {
    const char *name, *methods;
    int swa, temperature;
} cmp_hybrid;

typedef struct cmp_variant {
    char name[48];   /* "rope", "sinusoidal+shape", "rope+random", "rnope-swa" */
    char method[32];
    int shape;       /* SHAPE shifts (NAME+shape) */
    int random;      /* randomized positions (NAME+random) */
    const cmp_hybrid *hybrid; /* a hybrid's layers (NULL: method in every layer) */
} cmp_variant;

typedef struct cmp_job {
    int t, v, seed;
    double step_cost; /* seconds per step, measured before the runs (longest runs start first) */
    uint64_t fp;      /* the fingerprint of the run's settings (compare_shard.c) */
    /* the result, all of which a run file holds (compare_shard.c) */
    tr_metrics m[TR_MAX_EVAL];
    double score;                /* --score-lengths' score (NaN: none asked) */
    double seconds, tok_per_s, final_loss;
    double cpu;                  /* CPU seconds of its thread */
    double wall_start, wall_end; /* seconds since 1970 (the span of merged shards) */
    char machine[96];            /* the CPU it ran on (the results page's shards table) */
    int shard_k, shard_n, jobs;  /* the shard it ran in (0/1: none) and that process's runs at a time */
    int failed;
    char err[640];
} cmp_job;

/* A share of the runs: the k-th of n (n 0: every run, no run files); from: what chose it
 * ("--shard", or the environment's variables) for messages. */
typedef struct cmp_shard {
    int k, n;
    char from[80];
} cmp_shard;

/* One task of the comparison: its budget, variants, and, after the runs, the statistics. */
typedef struct cmp_task {
    tr_options base;    /* the options of every run (resolved by a probe run) */
    tr_task task;
    int64_t shape_k, random_n;
    uint64_t fp; /* the fingerprint of the task's settings, which its runs' files carry */
    const char *why;    /* --full: why this budget ("" otherwise) */
    char stem[32];      /* its name: output files DIR/STEM.csv, .md, .png, run files STEM.VARIANT.seedS */
    int seeds;          /* seeds 1..seeds of every variant */
    cmp_variant V[CMP_MAX_VARIANTS];
    int nv;
    int first_job;      /* jobs first_job .. first_job + nv * seeds - 1, variant-major */
    double elapsed;     /* wall seconds from the first of its runs starting to the last ending */
    /* statistics over seeds, [v * n_eval + k]: the metric and token accuracy; per variant the
     * training tokens/s and whether it learned the task at 1x (1, 0, -1: every run failed) */
    double *mean, *sd, *tacc;
    double *score, *score_sd; /* per variant: --score-lengths' score over seeds (NaN: none) */
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
    cmp_shard shard;
} cmp_all;

/* The task's name in messages, files and run names: its stem under --full, else its task. */
static inline const char *cmp_task_name(const cmp_all *a, const cmp_task *t) { return a->full ? t->stem : t->base.task; }
/* The metric of variant v at the k-th evaluation length, and whether it learned the task. */
static inline double cmp_mean(const cmp_task *t, int v, int k) { return t->mean[v * t->base.n_eval + k]; }
static inline double cmp_sd(const cmp_task *t, int v, int k) { return t->sd[v * t->base.n_eval + k]; }
/* The options of job jb's run. */
tr_options cmp_run_options(const cmp_task *t, const cmp_job *jb);
/* The index of a variant by name, -1 when it was not run. */
int cmp_find(const cmp_task *t, const char *name);
/* The index of the task by name (its stem) among a's, -1 when not run. */
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
/* Every output from the runs' results in a->J (and a->elapsed, cpu, jobs): the failures on
 * stderr, each task's statistics, table and files into out, the README's block (readme
 * without --full) and the results page (results). The one way to them, whether the runs ran
 * here or were merged from shards. Returns 0, 1 (some run failed) or 2. */
int cmp_outputs(cmp_all *a, const char *out, const char *readme, const char *results);
/* Where the runs ran, a Markdown table (malloc'd; NULL: out of memory): per shard (merged from
 * --shard K/N run files; "-": one process ran them all) the machine, its runs, the wall time
 * from its first run's start to its last run's end, and the CPU time of its runs. */
char *cmp_shards_table(const cmp_all *a);
/* The failed runs (those with which[j]; NULL: all) on stderr, one line each; their count. */
int cmp_report_failures(const cmp_all *a, const unsigned char *which);

/* What the pool runs: the jobs with todo[j] set; a shard (a->shard.n) saves
 * each into save as it ends, and --estimate adds every shard's total (shard_of). */
typedef struct cmp_pool {
    const unsigned char *todo;
    const int *shard_of;
    const char *save;
    int quiet, estimate_only, save_failed;
    /* progress: the ETA weighs every step by its run's measured cost, since the tasks' steps differ */
    double total_cost, done_cost, t0, last_print;
    int runs, runs_done, tty;
    char machine[96]; /* the CPU's model, each run's (cmp_job.machine) */
} cmp_pool;
/* Runs p's jobs (compare_run.c): the costliest first, a->jobs at a time; prints the estimate
 * (and with --estimate stops there). */
void cmp_run_jobs(cmp_all *a, cmp_pool *p);

/* ---- shards and run files (compare_shard.c) ---------------------------------------------- */

/* "K/N" into s (0 <= K < N); 2 after the message. */
int cmp_shard_parse(const char *text, cmp_shard *s);
/* The shard the environment gives: SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT (less
 * SLURM_ARRAY_TASK_MIN, over SLURM_ARRAY_TASK_STEP), OMPI_COMM_WORLD_RANK / _SIZE, PMI_RANK /
 * PMI_SIZE, the first pair of which both are set; s->n 0 when none is (or its count is 1).
 * 2 after a message naming the variable of a bad value. */
int cmp_shard_from_env(cmp_shard *s);
/* The fingerprints of each task and of each run (a->T[t].fp, a->J[j].fp); -1: out of memory. */
int cmp_fingerprint(cmp_all *a);
/* "TASK.VARIANT.seedS", the run file's name less ".run". */
void cmp_run_name(const cmp_all *a, int j, char *buf, size_t n);
/* The shard of every run (shard_of[j] in 0 .. n-1), by a cost model of the run's sizes: the
 * same on every machine. -1: out of memory. */
int cmp_partition(const cmp_all *a, int n, int *shard_of);
/* Writes run j's file into dir (whole or not at all); 2 after the message. */
int cmp_run_save(const cmp_all *a, int j, const char *dir);
/* The run files of dir: any of other settings is refused (2 after the message naming it);
 * done[j] = 1 for each run of this comparison whose file holds a finished run (merge: any
 * result, failed ones too, read into a->J; the first folder's where two have it). A folder that
 * does not exist has none (merge: 2). */
int cmp_runs_read(cmp_all *a, const char *dir, int merge, unsigned char *done);
/* Every run's result through its run file's text and back: what the outputs are built from
 * is what a run file holds. -1: out of memory. */
int cmp_runs_roundtrip(cmp_all *a);
/* After cmp_runs_read of every folder: 2 with the missing runs named, else a->elapsed, cpu
 * and jobs of the merged shards. */
int cmp_merge_finish(cmp_all *a, const unsigned char *done);


/* ---- the budgets of --full and the hybrids (cli/compare_budgets.c) ---- */
/* A task of --full: its own budget, variants and seeds. */
typedef struct cmp_budget {
    const char *name;     /* the task's name in the outputs (its files, runs and section) */
    const char *opts;     /* training options, "NAME VALUE ..." with the task (the command line's override them) */
    const char *variants; /* added when their method is in the list */
    const char *methods;  /* the task's own variants in place of the list (NULL: the list) */
    int seeds;            /* seeds of each variant (0: the comparison's) */
    int64_t random_n;     /* randomized positions' N (0: the comparison's) */
    const char *why;
} cmp_budget;
extern const cmp_budget CMP_FULL[];
extern const int CMP_N_FULL;
/* --full --quick: every task in seconds, for the tests; its numbers mean nothing */
extern const char CMP_FULL_QUICK[];
/* The hybrid of name's first n characters, NULL when it names none. */
const cmp_hybrid *cmp_hybrid_named(const char *name, size_t n);
/* The most layers a hybrid of the comma-separated list names (0: none is a hybrid). */
int cmp_hybrid_layers(const char *list);

#endif
