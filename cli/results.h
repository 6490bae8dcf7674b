/* The parts of the results page (compare --full --results): the page and its helpers
 * (cli/results.c) and the published orderings, each decided from the run's numbers
 * (cli/results_orderings.c). */
#ifndef POSENC_CLI_RESULTS_H
#define POSENC_CLI_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "compare.h"

/* A growing string; oom once any append failed. */
typedef struct res_buf {
    char *s;
    size_t n, cap;
    int oom;
} res_buf;
void res_put(res_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- numbers of a task ---- */
/* Whether the task's metric is a share (percent) rather than lm's bits per character. */
int res_is_pct(const cmp_task *t);
/* "82.3%" or "2.134"; "n/a" when not finite. */
const char *res_num(char *s, size_t n, const cmp_task *t, double x);
/* The mean over the multiples past 1x of a row of values by evaluation (its finite ones). */
double res_mean_past(const cmp_task *t, const double *by_eval);
/* A variant's mean past the training length: its metric (which = 0) or token accuracy (1). */
double res_past(const cmp_task *t, int v, int which);
/* The index of the evaluation at multiple m, -1 when not evaluated; the last evaluation's. */
int res_at(const cmp_task *t, int64_t m);
int res_last(const cmp_task *t);
/* The best variant at evaluation k among those that learned the task (all: any), -1: none. */
int res_best_at(const cmp_task *t, int k, int all);
/* "`a`, `b` and `c`": the variants with sel[v]; "none" when empty. */
void res_names(res_buf *b, const cmp_task *t, const int *sel);

/* ---- the orderings ---- */
typedef enum { V_UNDECIDED, V_NO, V_PARTLY, V_YES } res_verdict;
const char *res_verdict_name(res_verdict v);
/* A published ordering: its title in the table of verdicts, its short label, and the function
 * that writes its section into b and a one-line summary of the numbers behind its verdict
 * into sum. */
typedef struct res_ordering {
    const char *title, *label;
    res_verdict (*decide)(res_buf *b, const cmp_all *a, char *sum, size_t ns);
} res_ordering;
enum { RES_N_ORDERINGS = 6 };
extern const res_ordering RES_ORDERINGS[RES_N_ORDERINGS];

#endif
