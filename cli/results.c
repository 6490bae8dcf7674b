/* The results page of `posenc compare --full --results FILE`: the budgets, each task's table
 * and plot, the published orderings the comparison should reproduce, each with its source,
 * the criterion it is tested by and the verdict computed from this run's numbers, and a
 * paragraph per task whose every sentence is a template filled from those numbers. Nothing
 * on the page is written by hand about what the numbers show. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/output.h"
#include "../train/env.h"
#include "cli.h"
#include "compare.h"

/* A growing string. */
typedef struct buf {
    char *s;
    size_t n, cap;
    int oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)k;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = cap;
    }
}

/* ---- numbers of a task ------------------------------------------------------------------- */

static int is_pct(const cmp_task *t) { return t->task.kind != TR_TASK_LM; }

/* "82.3%" or "2.134" */
static const char *num(char *s, size_t n, const cmp_task *t, double x) {
    if (!isfinite(x)) snprintf(s, n, "n/a");
    else if (is_pct(t)) snprintf(s, n, "%.1f%%", 100 * x);
    else snprintf(s, n, "%.3f", x);
    return s;
}

/* The mean over the multiples past 1x of a row of values by evaluation (its finite ones) */
static double mean_past(const cmp_task *t, const double *by_eval) {
    double s = 0;
    int n = 0;
    for (int k = 0; k < t->base.n_eval; k++)
        if (t->base.eval[k] > 1 && isfinite(by_eval[k])) s += by_eval[k], n++;
    return n ? s / n : NAN;
}

/* A variant's score past the training length: its metric (which = 0) or token accuracy (1) */
static double past(const cmp_task *t, int v, int which) {
    return mean_past(t, (which ? t->tacc : t->mean) + v * t->base.n_eval);
}

/* "`NAME` X at 1x (learned), Y past 1x" of variant v, then "; `RIVAL` Y" for every rival the
 * task has; returns the rivals' best score past 1x (-1: none). */
static double put_against(buf *b, const char *lead, const cmp_task *t, int v, const char *const *rivals, size_t n) {
    char s[32], s2[32];
    put(b, "%s`%s` %s at 1x (%s), %s past 1x", lead, t->V[v].name, num(s, sizeof s, t, cmp_mean(t, v, 0)),
        t->learned[v] == 1 ? "learned" : "not learned", num(s2, sizeof s2, t, past(t, v, 0)));
    double best = -1;
    for (size_t r = 0; r < n; r++) {
        int w = cmp_find(t, rivals[r]);
        if (w < 0) continue;
        double x = past(t, w, 0);
        put(b, "; `%s` %s", rivals[r], num(s, sizeof s, t, x));
        if (isfinite(x) && x > best) best = x;
    }
    return best;
}

/* The index of the evaluation at multiple m, -1 when not evaluated. */
static int at(const cmp_task *t, int64_t m) {
    for (int k = 0; k < t->base.n_eval; k++)
        if (t->base.eval[k] == m) return k;
    return -1;
}

static int last(const cmp_task *t) { return t->base.n_eval - 1; }

/* The best variant at evaluation k among those that learned the task (all: any variant), -1
 * when none qualifies. */
static int best_at(const cmp_task *t, int k, int all) {
    int b = -1;
    const int lower = !is_pct(t);
    for (int v = 0; v < t->nv; v++) {
        double x = cmp_mean(t, v, k);
        if (!isfinite(x) || (!all && t->learned[v] != 1)) continue;
        if (b < 0 || (lower ? x < cmp_mean(t, b, k) : x > cmp_mean(t, b, k))) b = v;
    }
    return b;
}

/* A list of names "`a`, `b` and `c`" of the variants with sel[v]; "none" when empty. */
static void names(buf *b, const cmp_task *t, const int *sel) {
    int n = 0, total = 0;
    for (int v = 0; v < t->nv; v++) total += sel[v] != 0;
    if (!total) {
        put(b, "none");
        return;
    }
    for (int v = 0; v < t->nv; v++)
        if (sel[v]) {
            n++;
            put(b, "%s`%s`", n == 1 ? "" : n == total ? " and " : ", ", t->V[v].name);
        }
}

/* ---- the orderings ----------------------------------------------------------------------- */

typedef enum { V_UNDECIDED, V_NO, V_PARTLY, V_YES } verdict;
static const char *verdict_name(verdict v) {
    return v == V_YES ? "**reproduced**" : v == V_PARTLY ? "**partly reproduced**" : v == V_NO ? "**not reproduced**"
                                                                                               : "**undecided**";
}
/* holds in k of m decided cases */
static verdict of_counts(int k, int m) { return m == 0 ? V_UNDECIDED : k == m ? V_YES : k == 0 ? V_NO : V_PARTLY; }

/* Each ordering below writes its section into b and a one-line summary of the numbers behind
 * its verdict into sum (the table of verdicts). */

/* Press et al.: ALiBi's bits per character stay flat past L, sinusoidal's do not. */
static verdict press(buf *b, const cmp_all *a, char *sum, size_t ns) {
    int ti = cmp_task_find(a, "lm");
    put(b, "### ALiBi is flat past the training length on language modelling\n\n"
           "Source: Press, Smith and Lewis 2022, *Train Short, Test Long: Attention with Linear Biases Enables Input "
           "Length Extrapolation* (ICLR 2022): trained at L, ALiBi's perplexity stays flat (or improves) at evaluation "
           "lengths past L, while the sinusoidal model's grows fast and rotary's grows.\n\n"
           "Criterion: on `lm`, `alibi` learned the task at 1x and its bits per character at 8x are within 5%% of "
           "those at 1x, and `sinusoidal` learned it and its bits rise by more than 5%% (alibi flat alone: "
           "partly).\n\n");
    const cmp_task *t = ti >= 0 ? &a->T[ti] : NULL;
    int va = t ? cmp_find(t, "alibi") : -1, vs = t ? cmp_find(t, "sinusoidal") : -1, k8 = t ? at(t, 8) : -1;
    if (!t || va < 0 || vs < 0 || k8 < 0 || at(t, 1) < 0) {
        put(b, "Not run (needs lm, alibi and sinusoidal evaluated at 1x and 8x).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    const int k1 = at(t, 1);
    double a1 = cmp_mean(t, va, k1), a8 = cmp_mean(t, va, k8), s1 = cmp_mean(t, vs, k1), s8 = cmp_mean(t, vs, k8);
    put(b, "Numbers: `alibi` %.3f at 1x, %.3f at 8x (%+.1f%%), learned at 1x: %s; `sinusoidal` %.3f, %.3f (%+.1f%%)", a1,
        a8, 100 * (a8 / a1 - 1), t->learned[va] == 1 ? "yes" : "no", s1, s8, 100 * (s8 / s1 - 1));
    int vr = cmp_find(t, "rope");
    if (vr >= 0)
        put(b, "; `rope` %.3f, %.3f (%+.1f%%)", cmp_mean(t, vr, k1), cmp_mean(t, vr, k8),
            100 * (cmp_mean(t, vr, k8) / cmp_mean(t, vr, k1) - 1));
    put(b, ".");
    if (t->learned[vs] != 1) put(b, " `sinusoidal` did not learn the task at 1x: its half of the criterion is undecided.");
    put(b, "\n\n");
    snprintf(sum, ns, "bits at 8x against 1x: alibi %+.1f%%, sinusoidal %+.1f%%", 100 * (a8 / a1 - 1), 100 * (s8 / s1 - 1));
    if (t->learned[va] != 1) return V_UNDECIDED;
    const int flat = a8 <= 1.05 * a1, rise = s8 > 1.05 * s1;
    if (!flat) return V_NO;
    return t->learned[vs] == 1 && rise ? V_YES : V_PARTLY;
}

static const char *const SYNTH[] = {"copy", "reverse", "add", "count"};
enum { N_SYNTH = 4 };

/* Kazemnejad et al.: NoPE generalises better than the explicit encodings. */
static verdict kazemnejad(buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const rivals[] = {"sinusoidal", "rope", "alibi", "t5"};
    put(b, "### NoPE generalises on synthetic tasks with a causal mask\n\n"
           "Source: Kazemnejad, Padhi, Natesan Ramamurthy, Das and Reddy 2023, *The Impact of Positional Encoding on "
           "Length Generalization in Transformers* (NeurIPS 2023): decoder-only models without positional encoding "
           "(the causal mask alone) generalise to longer inputs of synthetic tasks (copy, reverse, addition and "
           "others) better than absolute, rotary, ALiBi and T5's relative bias.\n\n"
           "Criterion, on each synthetic task where `none` learned the task at 1x: its mean exact match over the "
           "lengths past 1x is above 0 and at least that of each of `sinusoidal`, `rope`, `alibi` and `t5`.\n\n");
    int k = 0, m = 0;
    for (int i = 0; i < N_SYNTH; i++) {
        int ti = cmp_task_find(a, SYNTH[i]);
        if (ti < 0) continue;
        const cmp_task *t = &a->T[ti];
        int vn = cmp_find(t, "none");
        if (vn < 0) continue;
        put(b, "- `%s`: ", SYNTH[i]);
        double best = put_against(b, "", t, vn, rivals, sizeof rivals / sizeof rivals[0]);
        if (t->learned[vn] != 1) {
            put(b, ": undecided\n");
            continue;
        }
        m++;
        int holds = past(t, vn, 0) > 0 && past(t, vn, 0) >= best;
        k += holds;
        put(b, ": %s\n", holds ? "holds" : "does not hold");
    }
    put(b, "\n");
    if (!m) put(b, "`none` learned none of the synthetic tasks at 1x within these budgets.\n\n");
    if (m) snprintf(sum, ns, "holds on %d of the %d tasks `none` learned at 1x", k, m);
    else snprintf(sum, ns, "`none` learned no synthetic task at 1x");
    return of_counts(k, m);
}

/* Ruoss et al.: randomized positions raise the accuracy on longer strings. Decided on their
 * own setup (reverse_string, duplicate_string: cli/compare.c's RUOSS_OPTS) by their score
 * where those tasks ran; otherwise on copy and reverse by token accuracy past 1x. */
static double ruoss_measure(const cmp_task *t, int v) { return isfinite(t->score[v]) ? t->score[v] : past(t, v, 1); }

static verdict ruoss(buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const paper[] = {"reverse_string", "duplicate_string"}, *const toy[] = {"copy", "reverse"};
    static const char *const bases[] = {"sinusoidal", "learned", "xl", "complex", "floater", "rope", "alibi", "fire"};
    const int theirs = cmp_task_find(a, paper[0]) >= 0 || cmp_task_find(a, paper[1]) >= 0;
    const char *const *tasks = theirs ? paper : toy;
    put(b, "### Randomized positions help on longer strings\n\n"
           "Source: Ruoss, Delétang, Genewein, Grau-Moya, Csordás, Bennani, Legg and Veness 2023, *Randomized "
           "Positional Encodings Boost Length Generalization of Transformers* (ACL 2023): training with positions "
           "sampled, sorted, from a range much longer than the training sequences raises the test accuracy on "
           "longer sequences for every encoding they tried, on tasks including duplicating and reversing a "
           "string.\n\n");
    if (theirs)
        put(b, "Setup: theirs as far as the trainer goes (google-deepmind/randomized_positional_encodings, "
               "experiments/example.py: 5 layers x 64, 8 heads, dropout 0.1, 10,000 steps of 128 strings of U(1, 40) "
               "binary symbols, Adam at 1e-3, an encoder over the string and one answer slot per output symbol); the "
               "differences: a pre-LN block with GELU, biases in the attention projections and a tied output (theirs "
               "post-LN, ReLU, no such biases, untied), and `xl+random` draws sorted absolute positions (their noisy "
               "relative encoding draws the offsets). "
               "Their per-task accuracies (the paper's Table 1) could not be read here: the stored copies of the "
               "paper hold its opening only, so the numbers below stand without theirs beside them.\n\n"
               "Criterion, for each encoding X run with randomized positions (`X+random`) on `reverse_string` and "
               "`duplicate_string`: where `X+random` learned the task at 1x, its score (their measure: the mean "
               "token accuracy over every length 41..100, 512 strings each) is above that of `X`.\n\n");
    else
        put(b, "Criterion, for each encoding X run with randomized positions (`X+random`) on `copy` and `reverse`: "
               "where `X+random` learned the task at 1x, its mean token accuracy over the lengths past 1x (the share "
               "of the answer's characters predicted right; exact match past 1x is a far stricter test at this "
               "size) is above that of `X`.\n\n");
    int k = 0, m = 0, u = 0;
    for (int i = 0; i < 2; i++) {
        int ti = cmp_task_find(a, tasks[i]);
        if (ti < 0) continue;
        const cmp_task *t = &a->T[ti];
        for (size_t q = 0; q < sizeof bases / sizeof bases[0]; q++) {
            char rn[48], s1[32], s2[32], s3[32], s4[32];
            snprintf(rn, sizeof rn, "%s+random", bases[q]);
            int vx = cmp_find(t, bases[q]), vr = cmp_find(t, rn);
            if (vx < 0 || vr < 0) continue;
            put(b, "- `%s`, `%s`: exact at 1x %s against %s; %s %s against %s", tasks[i], bases[q],
                num(s1, sizeof s1, t, cmp_mean(t, vr, 0)), num(s2, sizeof s2, t, cmp_mean(t, vx, 0)),
                isfinite(t->score[vr]) ? "score" : "token accuracy past 1x", num(s3, sizeof s3, t, ruoss_measure(t, vr)),
                num(s4, sizeof s4, t, ruoss_measure(t, vx)));
            if (t->learned[vr] != 1) {
                put(b, ": undecided (`%s` did not learn the task)\n", rn);
                u++;
                continue;
            }
            m++;
            int holds = ruoss_measure(t, vr) > ruoss_measure(t, vx);
            k += holds;
            put(b, ": %s\n", holds ? "holds" : "does not hold");
        }
    }
    put(b, "\n");
    snprintf(sum, ns, "holds in %d of %d pairs (%d undecided: `X+random` did not learn the task), by %s", k, m, u,
             theirs ? "their score on their setup" : "token accuracy");
    return of_counts(k, m);
}

/* FIRE on addition: Li et al. introduced it; Zhou et al. found it the encoding that
 * generalises on addition. */
static verdict fire_add(buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const rivals[] = {"none", "rope", "alibi", "kerple", "t5", "learned", "rope+random"};
    put(b, "### FIRE generalises on addition\n\n"
           "Source: Li, You, Guruganesh, Ainslie, Ontañón, Zaheer, Sanghai, Yang, Kumar and Bhojanapalli 2023, "
           "*Functional Interpolation for Relative Positions Improves Long Context Transformers* (FIRE, compared "
           "with NoPE, RoPE, ALiBi, Kerple and T5's bias); on addition, Zhou, Alon, Chen, Wang, Agarwal and Zhou "
           "2024, *Transformers Can Achieve Length Generalization But Not Robustly*, found FIRE the encoding that "
           "generalises to longer operands (with randomized positions, index hints and the sum reversed, in "
           "models of about 25M parameters trained on millions of examples).\n\n"
           "Criterion: on `add_hints` (the sum with index hints, in Zhou et al.'s recipe) where it ran, else on "
           "`add`: the better past 1x of `fire` and `fire+random` learned the task at 1x, and its mean exact match "
           "over the lengths past 1x is above 0 and at least that of each of `none`, `rope`, `alibi`, `kerple`, "
           "`t5`, `learned` and `rope+random` that ran.\n\n");
    int ti = cmp_task_find(a, "add_hints");
    if (ti < 0) ti = cmp_task_find(a, "add");
    if (ti < 0) {
        put(b, "Not run (no add task).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    const cmp_task *t = &a->T[ti];
    int vf = cmp_find(t, "fire"), vfr = cmp_find(t, "fire+random");
    if (vf < 0 && vfr < 0) {
        put(b, "Not run (no fire on add).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    int v = vf < 0 ? vfr : vfr < 0 ? vf : past(t, vfr, 0) > past(t, vf, 0) ? vfr : vf;
    char s[32];
    double best = put_against(b, "Numbers: ", t, v, rivals, sizeof rivals / sizeof rivals[0]);
    int top = best_at(t, last(t), 1);
    put(b, ". The best of every variant at %lldx: `%s` (%s).\n\n", (long long)t->base.eval[last(t)],
        top >= 0 ? t->V[top].name : "-", top >= 0 ? num(s, sizeof s, t, cmp_mean(t, top, last(t))) : "n/a");
    int learned = 0;
    for (int w = 0; w < t->nv; w++) learned += t->learned[w] == 1;
    snprintf(sum, ns, "`%s` %s at 1x; %d of %d variants learned the task", t->V[v].name,
             num(s, sizeof s, t, cmp_mean(t, v, 0)), learned, t->nv);
    if (t->learned[v] != 1) return V_UNDECIDED;
    return past(t, v, 0) > 0 && past(t, v, 0) >= best ? V_YES : V_NO;
}

/* Golovneva et al.: CoPE counts where token positions fail. */
static verdict cope_count(buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const rivals[] = {"learned", "shaw", "rope"};
    put(b, "### CoPE counts\n\n"
           "Source: Golovneva, Wang, Weston and Sukhbaatar 2024, *Contextual Position Encoding: Learning to Count "
           "What's Important* (arXiv 2405.18719; the task is facebookresearch/RAM's projects/cope): on the counting "
           "task, CoPE makes far fewer errors than absolute and relative position embeddings, in distribution and "
           "out of it.\n\n"
           "Criterion: on `count`, `cope` learned the task at 1x, and its exact match at 1x and its mean over the "
           "lengths past 1x are each at least those of `learned` (absolute), `shaw` (relative: learned vectors of "
           "the distance read by the query, as RAM's relative baseline) and `rope`; past 1x it must also beat "
           "always giving the most common answer (the mean of that over the same lengths), or the lead says "
           "nothing. Both halves: reproduced; one: partly.\n\n");
    int ti = cmp_task_find(a, "count");
    const cmp_task *t = ti >= 0 ? &a->T[ti] : NULL;
    int vc = t ? cmp_find(t, "cope") : -1;
    if (vc < 0) {
        put(b, "Not run (needs cope on count).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    char s1[32], s2[32], s3[32], s4[32], s5[32];
    put(b, "Numbers (1x, past 1x): `cope` %s, %s", num(s1, sizeof s1, t, cmp_mean(t, vc, 0)),
        num(s2, sizeof s2, t, past(t, vc, 0)));
    int in = 1, out = 1, any = 0;
    double in_best = -1, out_best = -1;
    for (size_t r = 0; r < sizeof rivals / sizeof rivals[0]; r++) {
        int w = cmp_find(t, rivals[r]);
        if (w < 0) continue;
        any = 1;
        put(b, "; `%s` %s, %s", rivals[r], num(s1, sizeof s1, t, cmp_mean(t, w, 0)), num(s2, sizeof s2, t, past(t, w, 0)));
        in &= cmp_mean(t, vc, 0) >= cmp_mean(t, w, 0);
        out &= past(t, vc, 0) >= past(t, w, 0);
        in_best = fmax(in_best, cmp_mean(t, w, 0)), out_best = fmax(out_best, past(t, w, 0));
    }
    const double floor = mean_past(t, t->chance); /* always the most common answer, past 1x */
    const int above = !isfinite(floor) || past(t, vc, 0) > floor;
    put(b, "; always the most common answer %s past 1x; `cope` learned it at 1x: %s.", num(s1, sizeof s1, t, floor),
        t->learned[vc] == 1 ? "yes" : "no");
    if (out && !above) put(b, " `cope` leads past 1x, but not above the most common answer: that half does not count.");
    put(b, "\n\n");
    snprintf(sum, ns, "1x: cope %s, best rival %s; past 1x: cope %s, best rival %s, most common answer %s",
             num(s1, sizeof s1, t, cmp_mean(t, vc, 0)), num(s2, sizeof s2, t, in_best), num(s3, sizeof s3, t, past(t, vc, 0)),
             num(s4, sizeof s4, t, out_best), num(s5, sizeof s5, t, floor));
    out &= above;
    if (!any || t->learned[vc] != 1) return V_UNDECIDED;
    return in && out ? V_YES : in || out ? V_PARTLY : V_NO;
}

/* ---- a paragraph per task ---------------------------------------------------------------- */

static void paragraph(buf *b, const cmp_task *t) {
    const int nv = t->nv, ne = t->base.n_eval, pct = is_pct(t);
    char s1[32], s2[32], s3[32], s4[32];
    int *sel = calloc((size_t)nv, sizeof(int)), nl = 0;
    if (!sel) {
        b->oom = 1;
        return;
    }
    for (int v = 0; v < nv; v++) nl += t->learned[v] == 1;
    put(b, "On `%s`, %d of %d variants learned the task in distribution", t->stem, nl, nv);
    if (nl < nv) {
        for (int v = 0; v < nv; v++) sel[v] = t->learned[v] != 1;
        put(b, "; not: ");
        names(b, t, sel);
    }
    put(b, ". ");
    int b1 = best_at(t, 0, 1);
    if (b1 >= 0 && pct && !(cmp_mean(t, b1, 0) > 0)) put(b, "No variant answered a sequence exactly at 1x. ");
    else if (b1 >= 0) put(b, "At 1x the best is `%s` (%s). ", t->V[b1].name, num(s1, sizeof s1, t, cmp_mean(t, b1, 0)));
    if (!nl || ne < 2) {
        put(b, "%s\n\n", nl ? "" : "With no variant past the in-distribution bar, the longer lengths rank nothing.");
        free(sel);
        return;
    }
    /* the best past 1x, length by length; the lengths where none of them gets an answer right
     * in one sentence */
    put(b, "Past the training length,");
    for (int k = 1, first = 1; k < ne; k++) {
        int bk = best_at(t, k, 0);
        if (bk < 0) continue;
        if (pct && !(cmp_mean(t, bk, k) > 0)) {
            int k1 = k;
            while (k1 + 1 < ne && best_at(t, k1 + 1, 0) >= 0 && !(cmp_mean(t, best_at(t, k1 + 1, 0), k1 + 1) > 0)) k1++;
            put(b, "%s at ", first ? "" : ";");
            for (int q = k; q <= k1; q++)
                put(b, "%s%lldx", q == k ? "" : q == k1 ? " and " : ", ", (long long)t->base.eval[q]);
            put(b, " none of them answers a sequence exactly");
            k = k1;
        } else
            put(b, "%s at %lldx the best of them is `%s` (%s)", first ? "" : ";", (long long)t->base.eval[k], t->V[bk].name,
                num(s1, sizeof s1, t, cmp_mean(t, bk, k)));
        first = 0;
    }
    put(b, ".");
    if (pct) { /* where answers repeat (count), what always giving the most common one gets */
        int any = 0;
        for (int k = 0; k < ne; k++) any |= t->chance[k] > 0.01;
        if (any) {
            put(b, " Always giving the most common answer gets");
            for (int k = 0; k < ne; k++)
                put(b, "%s %s at %lldx", k == 0 ? "" : k + 1 == ne ? " and" : ",", num(s1, sizeof s1, t, t->chance[k]),
                    (long long)t->base.eval[k]);
            put(b, ".");
        }
    }
    /* who holds up: bits within 5% of 1x at the last length; tasks: half the 1x score kept at 2x */
    const int kl = last(t), k2 = at(t, 2) >= 0 ? at(t, 2) : 1;
    int held = 0;
    for (int v = 0; v < nv; v++) {
        sel[v] = 0;
        if (t->learned[v] != 1) continue;
        if (!pct) sel[v] = cmp_mean(t, v, kl) <= 1.05 * cmp_mean(t, v, 0);
        else sel[v] = cmp_mean(t, v, k2) >= 0.5 * cmp_mean(t, v, 0);
        held += sel[v];
    }
    if (!held && !pct) put(b, " None of the %d that learned it stays within 5%% of its 1x bits at %lldx.", nl, (long long)t->base.eval[kl]);
    else if (!held) put(b, " None of the %d that learned it keeps half of its 1x exact match at %lldx.", nl, (long long)t->base.eval[k2]);
    else {
        if (!pct) put(b, " Of the %d that learned it, %d stay%s within 5%% of %s 1x bits at %lldx: ", nl, held,
                      held == 1 ? "s" : "", held == 1 ? "its" : "their", (long long)t->base.eval[kl]);
        else put(b, " Of the %d that learned it, %d keep%s at least half of %s 1x exact match at %lldx: ", nl, held,
                 held == 1 ? "s" : "", held == 1 ? "its" : "their", (long long)t->base.eval[k2]);
        names(b, t, sel);
        put(b, ".");
    }
    /* the largest degradation among those that learned it */
    int worst = -1;
    double wr = 0;
    for (int v = 0; v < nv; v++) {
        if (t->learned[v] != 1) continue;
        double x0 = cmp_mean(t, v, 0), x1 = cmp_mean(t, v, pct ? k2 : kl);
        double d = pct ? x0 - x1 : x1 / x0 - 1;
        if (isfinite(d) && (worst < 0 || d > wr)) worst = v, wr = d;
    }
    if (worst >= 0)
        put(b, " The largest fall: `%s`, %s at 1x to %s at %lldx.", t->V[worst].name, num(s1, sizeof s1, t, cmp_mean(t, worst, 0)),
            num(s2, sizeof s2, t, cmp_mean(t, worst, pct ? k2 : kl)), (long long)t->base.eval[pct ? k2 : kl]);
    if (pct) { /* token accuracy, which falls more slowly than exact match */
        int bt = -1;
        for (int v = 0; v < nv; v++)
            if (t->learned[v] == 1 && (bt < 0 || t->tacc[v * ne + kl] > t->tacc[bt * ne + kl])) bt = v;
        if (bt >= 0)
            put(b, " Token accuracy at %lldx: best `%s`, %s of the answer's characters.", (long long)t->base.eval[kl],
                t->V[bt].name, num(s3, sizeof s3, t, t->tacc[bt * ne + kl]));
    }
    /* each randomized-positions variant against its encoding */
    for (int v = 0; v < nv; v++) {
        if (!t->V[v].random) continue;
        int x = cmp_find(t, t->V[v].method);
        if (x < 0) continue;
        put(b, " `%s`: %s at 1x and %s past 1x (mean), against `%s`'s %s and %s.", t->V[v].name,
            num(s1, sizeof s1, t, cmp_mean(t, v, 0)), num(s2, sizeof s2, t, past(t, v, 0)), t->V[x].name,
            num(s3, sizeof s3, t, cmp_mean(t, x, 0)), num(s4, sizeof s4, t, past(t, x, 0)));
    }
    put(b, "\n\n");
    free(sel);
}

/* ---- the page ---------------------------------------------------------------------------- */

/* path of file relative to the folder of page (both as given: relative to the same place) */
static void relative_to(char *out, size_t n, const char *page, const char *file) {
    const char *slash = strrchr(page, '/');
    size_t dl = slash ? (size_t)(slash - page + 1) : 0;
    snprintf(out, n, "%s", dl && !strncmp(file, page, dl) ? file + dl : file);
}

int cmp_results_write(const cmp_all *a, const char *path, const char *out_dir, const char *readme) {
    buf b = {malloc(1 << 16), 0, 1 << 16, 0};
    if (!b.s) return cli_fail("compare: out of memory");
    char tot[32], cpu[32];
    tr_format_time(tot, sizeof tot, a->elapsed);
    tr_format_time(cpu, sizeof cpu, a->cpu);
    put(&b, "# Results: which positional encodings work past the training length\n\n");
    if (a->quick)
        put(&b, "**SMOKE TEST (--quick): too few steps to train, these numbers mean nothing.**\n\n");
    put(&b, "Generated by `posenc compare %s`: %d runs in %s (%s of CPU time), %d at a time. Every "
            "sentence below about the numbers is a template filled from this run; nothing is written by hand.\n\n",
        a->command, a->njobs, tot, cpu, a->jobs);
    put(&b, "Each task trains its methods on one budget with %d seed%s (or those its budget names), at lengths 1..L (lm: context L), "
            "and evaluates at multiples of L on held-out sequences (the same for every method and seed). A method "
            "that did not learn a task in distribution (the *learned at 1x* column; lm: bits at 1x at least %.0f%% "
            "below the bigram model of the training text, tasks: exact match at 1x at least %.0f%%) says nothing "
            "about extrapolation, and no ordering below counts it. `NAME+shape`: SHAPE's random shifts; "
            "`NAME+random`: randomized positions (sorted, drawn from [0, N) in training and evaluation).\n\n",
        a->seeds, a->seeds > 1 ? "s" : "", 100 * CMP_LM_MARGIN, 100 * CMP_LEARNED_EXACT);
    put(&b, "## Budgets\n\n| task | length L | steps x batch | model | seeds | time of its runs | why |\n| --- | ---: | --- | --- | ---: | ---: | --- |\n");
    for (int i = 0; i < a->nt; i++) {
        const cmp_task *t = &a->T[i];
        const tr_options *o = &t->base;
        char el[32];
        tr_format_time(el, sizeof el, t->elapsed);
        put(&b, "| `%s` | %lld%s | %lld x %lld | %lld layers x %lld wide, %lld heads | %d | %s | %s |\n", t->stem,
            (long long)o->length, t->task.kind == TR_TASK_COUNTING ? " statements" : "", (long long)o->steps,
            (long long)o->batch, (long long)o->layers, (long long)o->width, (long long)o->heads, t->seeds, el,
            t->why && t->why[0] ? t->why : "-");
    }
    char *where = cmp_shards_table(a); /* NULL: out of memory */
    put(&b, "%s", where ? where : ""), b.oom |= !where, free(where);
    put(&b, "\nThe tasks: `lm` a character language model of a generated corpus with long-range structure; `copy` "
            "`abcd=abcd.`; `reverse` `abcd=dcba.`; `add` `123+4567=0964.` (the sum least significant digit first); "
            "`count` the counting task of CoPE, `b0..b+.a0.b+..b=2.` (`b0` sets b to 0, `b+` adds one, `.` "
            "passes; the question is the value of a variable that was set).\n\n");

    put(&b, "## Published orderings\n\n");
    buf o = {malloc(1 << 14), 0, 1 << 14, 0};
    if (!o.s) {
        free(b.s);
        return cli_fail("compare: out of memory");
    }
    static const char *const title[] = {"ALiBi flat past L on lm (Press et al. 2022)",
                                        "NoPE generalises on synthetic tasks (Kazemnejad et al. 2023)",
                                        "randomized positions help on longer strings (Ruoss et al. 2023)",
                                        "FIRE on addition (Li et al. 2023; Zhou et al. 2024)",
                                        "CoPE on counting (Golovneva et al. 2024)"};
    verdict v[5];
    char sum[5][200] = {{0}};
    v[0] = press(&o, a, sum[0], sizeof sum[0]), v[1] = kazemnejad(&o, a, sum[1], sizeof sum[1]);
    v[2] = ruoss(&o, a, sum[2], sizeof sum[2]), v[3] = fire_add(&o, a, sum[3], sizeof sum[3]);
    v[4] = cope_count(&o, a, sum[4], sizeof sum[4]);
    buf tab = {malloc(1 << 12), 0, 1 << 12, 0}; /* the table of verdicts, for the page and the README */
    if (!tab.s) {
        free(b.s), free(o.s);
        return cli_fail("compare: out of memory");
    }
    put(&tab, "| ordering | this run | in short |\n| --- | --- | --- |\n");
    for (int i = 0; i < 5; i++) put(&tab, "| %s | %s | %s |\n", title[i], verdict_name(v[i]), sum[i]);
    put(&b, "%s", tab.oom ? "" : tab.s);
    b.oom |= tab.oom;
    put(&b, "\n*Reproduced*: the criterion holds (in every case it was decided on); *partly*: in some; *undecided*: "
            "the method the ordering is about did not learn the task in distribution, so the run cannot say.\n\n");
    if (!o.oom) put(&b, "%s", o.s);
    b.oom |= o.oom;
    free(o.s);
    static const char *const vlabel[] = {"ALiBi flat past L", "NoPE", "randomized positions", "FIRE on addition",
                                         "CoPE on counting"};
    put(&b, "Verdicts: ");
    for (int i = 0; i < 5; i++) put(&b, "%s%s %s", i ? "; " : "", vlabel[i], verdict_name(v[i]));
    put(&b, ".\n\n");

    put(&b, "## Tasks\n\n");
    for (int i = 0; i < a->nt; i++) {
        const cmp_task *t = &a->T[i];
        char png[1100], rel[1100];
        snprintf(png, sizeof png, "%s/%s.png", out_dir, t->stem);
        relative_to(rel, sizeof rel, path, png);
        put(&b, "### %s\n\n", t->stem);
        paragraph(&b, t);
        put(&b, "%s\n![%s: metric versus evaluation length](%s)\n\n", t->md ? t->md : "", t->stem, rel);
    }
    if (!b.oom && readme) { /* the verdicts in the README's results block, with a link to the page */
        char rel[1100];
        relative_to(rel, sizeof rel, readme, path);
        put(&tab, "\n%s%d runs in %s, %d at a time; the criteria, numbers and tables: [%s](%s).\n",
            a->quick ? "SMOKE TEST (--quick), numbers mean nothing: " : "", a->njobs, tot, a->jobs, path, rel);
    }
    if (b.oom || tab.oom) {
        free(b.s), free(tab.s);
        return cli_fail("compare: out of memory for the results page");
    }
    pe_err err = {{0}};
    pe_out po;
    if (pe_out_open(&po, path, &err)) {
        free(b.s), free(tab.s);
        return cli_fail("compare: --results: %s", err.msg);
    }
    fwrite(b.s, 1, b.n, po.fp);
    free(b.s);
    if (pe_out_commit(&po, &err)) {
        free(tab.s);
        return cli_fail("compare: --results: %s", err.msg);
    }
    int rc = readme ? cli_readme_block("compare", readme, "results", tab.s) : 0;
    free(tab.s);
    return rc ? 2 : 0;
}
