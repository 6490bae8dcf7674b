/* The published orderings of the results page (cli/results.h), each with its source, the
 * criterion it is tested by, stated before the runs, and the verdict from the run's numbers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "results.h"

const char *res_verdict_name(res_verdict v) {
    return v == V_YES ? "**reproduced**" : v == V_PARTLY ? "**partly reproduced**" : v == V_NO ? "**not reproduced**"
                                                                                               : "**undecided**";
}

/* "`NAME` X at 1x (learned), Y past 1x" of variant v, then "; `RIVAL` Y" for every rival the
 * task has; returns the rivals' best score past 1x (-1: none). */
static double put_against(res_buf *b, const char *lead, const cmp_task *t, int v, const char *const *rivals, size_t n) {
    char s[32], s2[32];
    res_put(b, "%s`%s` %s at 1x (%s), %s past 1x", lead, t->V[v].name, res_num(s, sizeof s, t, cmp_mean(t, v, 0)),
        t->learned[v] == 1 ? "learned" : "not learned", res_num(s2, sizeof s2, t, res_past(t, v, 0)));
    double best = -1;
    for (size_t r = 0; r < n; r++) {
        int w = cmp_find(t, rivals[r]);
        if (w < 0) continue;
        double x = res_past(t, w, 0);
        res_put(b, "; `%s` %s", rivals[r], res_num(s, sizeof s, t, x));
        if (isfinite(x) && x > best) best = x;
    }
    return best;
}

/* holds in k of m decided cases */
static res_verdict of_counts(int k, int m) { return m == 0 ? V_UNDECIDED : k == m ? V_YES : k == 0 ? V_NO : V_PARTLY; }

/* Each ordering below writes its section into b and a one-line summary of the numbers behind
 * its verdict into sum (the table of verdicts). */

/* The criterion "flat past L" on lm's bits per character, as Press et al.'s and Puvvada et al.'s:
 * on task, `flat` learned it at 1x and its bits at 8x are within 5% of those at 1x, and `rise`
 * learned it and its bits rise by more than 5% (flat alone: partly); `others`' numbers beside. */
static res_verdict flat_past_l(res_buf *b, const cmp_all *a, const char *task, const char *flat, const char *rise,
                               const char *const *others, size_t n, char *sum, size_t ns) {
    int ti = cmp_task_find(a, task);
    const cmp_task *t = ti >= 0 ? &a->T[ti] : NULL;
    int vf = t ? cmp_find(t, flat) : -1, vr = t ? cmp_find(t, rise) : -1, k1 = t ? res_at(t, 1) : -1, k8 = t ? res_at(t, 8) : -1;
    if (vf < 0 || vr < 0 || k1 < 0 || k8 < 0) {
        res_put(b, "Not run (needs %s with %s and %s evaluated at 1x and 8x).\n\n", task, flat, rise);
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    const double f1 = cmp_mean(t, vf, k1), f8 = cmp_mean(t, vf, k8), r1 = cmp_mean(t, vr, k1), r8 = cmp_mean(t, vr, k8);
    res_put(b, "Numbers: `%s` %.3f at 1x, %.3f at 8x (%+.1f%%), learned at 1x: %s; `%s` %.3f, %.3f (%+.1f%%)", flat, f1, f8,
            100 * (f8 / f1 - 1), t->learned[vf] == 1 ? "yes" : "no", rise, r1, r8, 100 * (r8 / r1 - 1));
    for (size_t i = 0; i < n; i++) {
        const int v = cmp_find(t, others[i]);
        if (v >= 0)
            res_put(b, "; `%s` %.3f, %.3f (%+.1f%%)", others[i], cmp_mean(t, v, k1), cmp_mean(t, v, k8),
                    100 * (cmp_mean(t, v, k8) / cmp_mean(t, v, k1) - 1));
    }
    res_put(b, ".");
    if (t->learned[vr] != 1) res_put(b, " `%s` did not learn the task at 1x: its half of the criterion is undecided.", rise);
    res_put(b, "\n\n");
    snprintf(sum, ns, "bits at 8x against 1x: %s %+.1f%%, %s %+.1f%%", flat, 100 * (f8 / f1 - 1), rise, 100 * (r8 / r1 - 1));
    if (t->learned[vf] != 1) return V_UNDECIDED;
    if (f8 > 1.05 * f1) return V_NO;
    return t->learned[vr] == 1 && r8 > 1.05 * r1 ? V_YES : V_PARTLY;
}

/* Press et al.: ALiBi's bits per character stay flat past L, sinusoidal's do not. */
static res_verdict press(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const others[] = {"rope"};
    res_put(b, "### ALiBi is flat past the training length on language modelling\n\n"
               "Source: Press, Smith and Lewis 2022, *Train Short, Test Long: Attention with Linear Biases Enables Input "
               "Length Extrapolation* (ICLR 2022): trained at L, ALiBi's perplexity stays flat (or improves) at evaluation "
               "lengths past L, while the sinusoidal model's grows fast and rotary's grows.\n\n"
               "Theirs (the paper's Table 3, WikiText-103 validation perplexity, trained at L = 1024): at L ALiBi "
               "18.66, sinusoidal 19.34, rotary 19.33; at 8024 tokens (about 8x) ALiBi 17.96 (-3.8%%), sinusoidal "
               "284.88 (14.7 times), rotary 64.91 (3.4 times).\n\n"
               "Criterion: on `lm`, `alibi` learned the task at 1x and its bits per character at 8x are within 5%% of "
               "those at 1x, and `sinusoidal` learned it and its bits rise by more than 5%% (alibi flat alone: "
               "partly).\n\n");
    return flat_past_l(b, a, "lm", "alibi", "sinusoidal", others, 1, sum, ns);
}

static const char *const SYNTH[] = {"copy", "reverse", "add", "count"};
enum { N_SYNTH = 4 };

/* Kazemnejad et al.'s criterion on their tasks (cli/compare_budgets.c: NOPE_OPTS): the mean reciprocal
 * rank of their five encodings over (task, seed) columns of the out-of-distribution accuracy,
 * as notebooks/plot_aggregate_final.ipynb computes it (compute_mean_reciprocal_rank, get_mrr_df:
 * each column's encodings ranked, 1/rank averaged over the columns, a column with a value
 * missing dropped), over the tasks where none learned the task at 1x. Their ranks break ties
 * by the order of the rows (rank(method="first")); here tied encodings share the mean of
 * their ranks' reciprocals, which is that order's mean over every order. Their figures: the
 * same notebook's stored outputs at McGill-NLP/length-generalization d06170ec (cell 24, the
 * MRR without scratchpad over 17 dataset splits x 3 seeds; per task, the mean over their 3
 * seeds of results/sanity_check.jsonl's sum__pred/test_acc_overall for copy (cmc_tr20_ts40)
 * and reverse (mc_tr20_ts40), cell 24's table for addition (len_tr8_ts16); sort, sum and
 * parity are in results/scratchpad_f.jsonl, which the stored copy does not hold). */
static const char *const NOPE_TASKS[] = {"s2s_copy", "s2s_reverse", "s2s_addition", "s2s_sort", "s2s_sum", "s2s_parity"};
enum { N_NOPE_TASKS = 6, N_NOPE_PE = 5 };
static const char *const NOPE_PE[N_NOPE_PE] = {"none", "t5", "alibi", "rope", "sinusoidal"};
static const double NOPE_THEIR_MRR[N_NOPE_PE] = {0.686928, 0.549020, 0.502288, 0.329739, 0.215359};
/* their accuracy per task and encoding (NaN: not in the stored copy) */
static const double NOPE_THEIRS[N_NOPE_TASKS][N_NOPE_PE] = {
    {0.3054, 0.4195, 0.3310, 0.0114, 0.0277}, {0.2301, 0.2423, 0.1709, 0.0774, 0.0230},
    {0.0845, 0.0721, 0.0775, 0.0004, 0.0044}, {NAN, NAN, NAN, NAN, NAN},
    {NAN, NAN, NAN, NAN, NAN},                {NAN, NAN, NAN, NAN, NAN}};

/* The reciprocal ranks of x[0..n-1] (higher is better) into rr, ties sharing their ranks'
 * mean reciprocal. */
static void reciprocal_ranks(const double *x, int n, double *rr) {
    for (int i = 0; i < n; i++) {
        int above = 0, tied = 0;
        for (int j = 0; j < n; j++) above += x[j] > x[i], tied += x[j] == x[i];
        double s = 0;
        for (int r = above + 1; r <= above + tied; r++) s += 1.0 / r;
        rr[i] = s / tied;
    }
}

/* The section on their own tasks; the verdict. */
static res_verdict kazemnejad_theirs(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    res_put(b, "Setup: their tasks as far as the trainer goes (McGill-NLP/length-generalization, "
               "configs/data/s2s_*.jsonnet, scripts/dataset_builders/): a decoder-only model with a causal mask, "
               "the answer after the prompt and only the answer scored, trained on lengths up to L and tested on "
               "L+1 .. 2L (copy and reverse: L 20; sort and parity: 8), scored by the exact match over the test "
               "lengths (512 sequences a length), three seeds, their five encodings. Their addition and sum are not "
               "run: at this budget neither `rope` nor `none` learned them in distribution (one seed each: addition "
               "at L 8 0%% exact at 1x; sum 10-11%%, chance 10%%). Where it "
               "differs: their model is T5-base's decoder (12 layers x 768, 12 heads, about 107M parameters), "
               "40,000 steps of 64 at lr 3e-5; this one is 4 layers x 64, 4 heads, 6000 steps of 32 at lr 3e-3, "
               "about 0.2M parameters. They train on lengths from 2 (copy, reverse, sort) or 4 (parity), here "
               "from 1; their copy and reverse draw from 100 symbols and sort from 50, here 10; their rotary "
               "rotates a quarter of each head (rotary_dim), here all of it; their prompts are words (\"Is the "
               "number of 1's even in the sequence [ 0, 1, 1 ] ?\"), here characters (`011=0.`); they take the "
               "best checkpoint by validation accuracy, here the last.\n\n"
               "Criterion: over the (task, seed) columns of the tasks on which `none` learned the task at 1x, "
               "each column's five encodings ranked by the score (tied encodings share their ranks' mean "
               "reciprocal; theirs break ties by row order), `none`'s mean reciprocal rank is the highest of "
               "the five. Theirs: `none` 0.687, `t5` 0.549, `alibi` 0.502, `rope` 0.330, `sinusoidal` 0.215 "
               "(notebooks/plot_aggregate_final.ipynb, cell 24: 17 dataset splits x 3 seeds, no scratchpad).\n\n");
    double rsum[N_NOPE_PE] = {0};
    int cols = 0, ran = 0, learned = 0;
    char s[32], s2[32], s3[32];
    res_put(b, "| task | encoding | exact at 1x | score (L+1..2L) | theirs |\n| --- | --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < N_NOPE_TASKS; i++) {
        int ti = cmp_task_find(a, NOPE_TASKS[i]), vv[N_NOPE_PE];
        if (ti < 0) continue;
        const cmp_task *t = &a->T[ti];
        int all = 1;
        for (int q = 0; q < N_NOPE_PE; q++) all &= (vv[q] = cmp_find(t, NOPE_PE[q])) >= 0;
        if (!all) continue;
        ran++;
        for (int q = 0; q < N_NOPE_PE; q++) {
            res_put(b, "| `%s` | `%s` | %s%s | %s | %s |\n", NOPE_TASKS[i], NOPE_PE[q],
                    res_num(s, sizeof s, t, cmp_mean(t, vv[q], 0)), t->learned[vv[q]] == 1 ? "" : " (not learned)",
                    res_num(s2, sizeof s2, t, t->score[vv[q]]), res_num(s3, sizeof s3, t, NOPE_THEIRS[i][q]));
        }
        if (t->learned[vv[0]] != 1) continue;
        learned++;
        for (int seed = 1; seed <= t->seeds; seed++) { /* one column a seed */
            double x[N_NOPE_PE], rr[N_NOPE_PE];
            int have = 0;
            for (int j = 0; j < a->njobs; j++) {
                const cmp_job *jb = &a->J[j];
                for (int q = 0; q < N_NOPE_PE; q++)
                    if (jb->t == ti && jb->v == vv[q] && jb->seed == seed && !jb->failed && isfinite(jb->score))
                        x[q] = jb->score, have |= 1 << q;
            }
            if (have != (1 << N_NOPE_PE) - 1) continue; /* a value missing: the column dropped, as theirs */
            reciprocal_ranks(x, N_NOPE_PE, rr);
            for (int q = 0; q < N_NOPE_PE; q++) rsum[q] += rr[q];
            cols++;
        }
    }
    if (!ran) return V_UNDECIDED; /* not reached: the caller checks */
    res_put(b, "\nMean reciprocal rank over the %d columns of the %d tasks `none` learned at 1x (of the %d run):\n\n"
               "| encoding | here | theirs |\n| --- | ---: | ---: |\n", cols, learned, ran);
    int top = 1;
    for (int q = 0; q < N_NOPE_PE; q++) {
        if (cols) res_put(b, "| `%s` | %.3f | %.3f |\n", NOPE_PE[q], rsum[q] / cols, NOPE_THEIR_MRR[q]);
        else res_put(b, "| `%s` | n/a | %.3f |\n", NOPE_PE[q], NOPE_THEIR_MRR[q]);
        top &= q == 0 || rsum[0] >= rsum[q];
    }
    res_put(b, "\n");
    if (!cols) {
        res_put(b, "`none` learned none of their tasks at 1x within this budget: undecided.\n\n");
        snprintf(sum, ns, "`none` learned none of their %d tasks at 1x", ran);
        return V_UNDECIDED;
    }
    int best = 1;
    for (int q = 2; q < N_NOPE_PE; q++) best = rsum[q] > rsum[best] ? q : best;
    snprintf(sum, ns, "mean reciprocal rank over %d columns (%d tasks): none %.3f, best other `%s` %.3f (theirs: 0.687, t5 0.549)",
             cols, learned, rsum[0] / cols, NOPE_PE[best], rsum[best] / cols);
    return top ? V_YES : V_NO;
}

static res_verdict kazemnejad(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const rivals[] = {"sinusoidal", "rope", "alibi", "t5"};
    res_put(b, "### NoPE generalises on synthetic tasks with a causal mask\n\n"
           "Source: Kazemnejad, Padhi, Natesan Ramamurthy, Das and Reddy 2023, *The Impact of Positional Encoding on "
           "Length Generalization in Transformers* (NeurIPS 2023): decoder-only models without positional encoding "
           "(the causal mask alone) generalise to longer inputs of synthetic tasks (copy, reverse, addition and "
           "others) better than absolute, rotary, ALiBi and T5's relative bias.\n\n"
           "");
    for (int i = 0; i < N_NOPE_TASKS; i++)
        if (cmp_task_find(a, NOPE_TASKS[i]) >= 0) return kazemnejad_theirs(b, a, sum, ns);
    res_put(b, "Criterion, on each synthetic task where `none` learned the task at 1x: its mean exact match over the "
               "lengths past 1x is above 0 and at least that of each of `sinusoidal`, `rope`, `alibi` and `t5`.\n\n");
    int k = 0, m = 0;
    for (int i = 0; i < N_SYNTH; i++) {
        int ti = cmp_task_find(a, SYNTH[i]);
        if (ti < 0) continue;
        const cmp_task *t = &a->T[ti];
        int vn = cmp_find(t, "none");
        if (vn < 0) continue;
        res_put(b, "- `%s`: ", SYNTH[i]);
        double best = put_against(b, "", t, vn, rivals, sizeof rivals / sizeof rivals[0]);
        if (t->learned[vn] != 1) {
            res_put(b, ": undecided\n");
            continue;
        }
        m++;
        int holds = res_past(t, vn, 0) > 0 && res_past(t, vn, 0) >= best;
        k += holds;
        res_put(b, ": %s\n", holds ? "holds" : "does not hold");
    }
    res_put(b, "\n");
    if (!m) res_put(b, "`none` learned none of the synthetic tasks at 1x within these budgets.\n\n");
    if (m) snprintf(sum, ns, "holds on %d of the %d tasks `none` learned at 1x", k, m);
    else snprintf(sum, ns, "`none` learned no synthetic task at 1x");
    return of_counts(k, m);
}

/* Ruoss et al.: randomized positions raise the accuracy on longer strings. Decided on their
 * own setup (reverse_string, duplicate_string: cli/compare_budgets.c's RUOSS_OPTS) by their score
 * where a pair of those is decided; otherwise (their tasks not run, or no X+random learned them)
 * on copy and reverse by token accuracy past 1x. */
static double ruoss_measure(const cmp_task *t, int v) { return isfinite(t->score[v]) ? t->score[v] : res_past(t, v, 1); }

/* The pairs X, X+random of tasks[0..1] that ran; counts the decided (*m), those holding (*k) and
 * the undecided (*u); of every pair, learned or not, those whose X+random measures above X (*above,
 * of *pairs), those whose X learned the task (*x_learned), and X+random's best token accuracy at
 * 1x on their tasks (*best_tacc). */
typedef struct ruoss_count {
    int k, m, u, above, pairs, x_learned;
    double best_tacc;
} ruoss_count;

static void ruoss_pairs(res_buf *b, const cmp_all *a, const char *const *tasks, int theirs, ruoss_count *c) {
    static const char *const bases[] = {"sinusoidal", "learned", "xl", "complex", "floater", "rope", "alibi", "fire"};
    for (int i = 0; i < 2; i++) {
        int ti = cmp_task_find(a, tasks[i]);
        if (ti < 0) continue;
        const cmp_task *t = &a->T[ti];
        for (size_t q = 0; q < sizeof bases / sizeof bases[0]; q++) {
            char rn[48], s1[32], s2[32], s3[32], s4[32];
            snprintf(rn, sizeof rn, "%s+random", bases[q]);
            int vx = cmp_find(t, bases[q]), vr = cmp_find(t, rn);
            if (vx < 0 || vr < 0) continue;
            const int ne = t->base.n_eval; /* their tasks are learned by token accuracy, the toys by exact match */
            res_put(b, "- `%s`, `%s`: %s at 1x %s against %s; %s %s against %s", tasks[i], bases[q],
                theirs ? "token accuracy" : "exact", res_num(s1, sizeof s1, t, theirs ? t->tacc[vr * ne] : cmp_mean(t, vr, 0)),
                res_num(s2, sizeof s2, t, theirs ? t->tacc[vx * ne] : cmp_mean(t, vx, 0)),
                isfinite(t->score[vr]) ? "score" : "token accuracy past 1x", res_num(s3, sizeof s3, t, ruoss_measure(t, vr)),
                res_num(s4, sizeof s4, t, ruoss_measure(t, vx)));
            c->pairs++, c->above += ruoss_measure(t, vr) > ruoss_measure(t, vx), c->x_learned += t->learned[vx] == 1;
            if (theirs && t->tacc[vr * ne] > c->best_tacc) c->best_tacc = t->tacc[vr * ne];
            if (t->learned[vr] != 1) {
                res_put(b, ": undecided (`%s` did not learn the task)\n", rn);
                c->u++;
                continue;
            }
            c->m++;
            int holds = ruoss_measure(t, vr) > ruoss_measure(t, vx);
            c->k += holds;
            res_put(b, ": %s\n", holds ? "holds" : "does not hold");
        }
    }
    res_put(b, "\n");
}

static const char RUOSS_TOY_CRITERION[] =
    "Criterion, for each encoding X run with randomized positions (`X+random`) on `copy` and `reverse`: where "
    "`X+random` learned the task at 1x, its mean token accuracy over the lengths past 1x (the share of the "
    "answer's characters predicted right; exact match past 1x is a far stricter test at this size) is above "
    "that of `X`.\n\n";

static res_verdict ruoss(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const paper[] = {"reverse_string", "duplicate_string"}, *const toy[] = {"copy", "reverse"};
    const int theirs = cmp_task_find(a, paper[0]) >= 0 || cmp_task_find(a, paper[1]) >= 0;
    res_put(b, "### Randomized positions help on longer strings\n\n"
           "Source: Ruoss, Delétang, Genewein, Grau-Moya, Csordás, Bennani, Legg and Veness 2023, *Randomized "
           "Positional Encodings Boost Length Generalization of Transformers* (ACL 2023): training with positions "
           "sampled, sorted, from a range much longer than the training sequences raises the test accuracy on "
           "longer sequences for every encoding they tried, on tasks including duplicating and reversing a "
           "string.\n\n");
    if (theirs)
        res_put(b, "Setup: theirs as far as the trainer goes (google-deepmind/randomized_positional_encodings, "
               "experiments/example.py: 5 layers x 64, 8 heads, dropout 0.1, 10,000 steps of 128 strings of U(1, 40) "
               "binary symbols, Adam at 1e-3, an encoder over the string and one answer slot per output symbol); the "
               "differences: a pre-LN block with GELU, biases in the attention projections and a tied output (theirs "
               "post-LN, ReLU, no such biases, untied), and their relative encoding with randomized positions "
               "(noisy offsets) is not run: `xl` here reads no positions, so `xl+random` would be `xl` itself; their "
               "encoder's ALiBi adds half a slope to the keys on the left (models/positional_encodings.py, "
               "compute_alibi_encodings_biases: left and right told apart), this one is symmetric, -m |i - j|; their "
               "randomized ALiBi draws sorted distances, one per offset (compute_noisy_alibi_encodings_biases), "
               "this one is ALiBi at the drawn positions; their randomized RoPE draws new positions in every layer, "
               "one draw a batch (apply_rotary_encoding with noisy=True, a fresh key per layer), this one draws once "
               "a sequence for all its layers. "
               "Their per-task accuracies (the paper's Table 1) could not be read here (its abstract gives the "
               "average: randomized positions raise the test accuracy by 12.0%% over their 15 tasks): the stored copies of the "
               "paper hold its opening only, so the numbers below stand without theirs beside them.\n\n"
               "Criterion, for each encoding X run with randomized positions (`X+random`) on `reverse_string` and "
               "`duplicate_string`: where `X+random` learned the task at 1x, its score (their measure: the mean "
               "token accuracy over every length 41..100, 512 strings each) is above that of `X`. Where no pair "
               "of their setup is decided so, the ordering is decided on `copy` and `reverse` as below.\n\n");
    else
        res_put(b, "%s", RUOSS_TOY_CRITERION);
    ruoss_count c = {0};
    ruoss_pairs(b, a, theirs ? paper : toy, theirs, &c);
    const int fallback = theirs && !c.m && (cmp_task_find(a, toy[0]) >= 0 || cmp_task_find(a, toy[1]) >= 0);
    if (theirs && !c.m && c.pairs) /* where this run and the paper part: said plainly, with the numbers */
        res_put(b, "On their setup, randomized positions kept every encoding here from learning their "
               "tasks in distribution (at best %.1f%% of the answer's symbols at 1x, against the 90%% the criterion "
               "asks), while without them `X` learned it in %d of the %d pairs. By their score alone, `X+random` is "
               "above `X` in %d of the %d pairs, the paper's direction, but from models that did not learn the task, "
               "which the criterion stated before the runs does not count.\n\n",
               100 * c.best_tacc, c.x_learned, c.pairs, c.above, c.pairs);
    if (fallback) {
        res_put(b, "No `X+random` learned their tasks at 1x, so no pair of their setup is decided; the ordering "
               "is decided on the toy tasks instead. %s", RUOSS_TOY_CRITERION);
        c.u = 0;
        ruoss_pairs(b, a, toy, 0, &c);
    }
    snprintf(sum, ns, "holds in %d of %d pairs (%d undecided: `X+random` did not learn the task), by %s", c.k, c.m, c.u,
             fallback ? "token accuracy on copy and reverse (no pair of their setup decided)"
             : theirs ? "their score on their setup" : "token accuracy");
    return of_counts(c.k, c.m);
}

/* FIRE on addition: Li et al. introduced it; Zhou et al. found it the encoding that
 * generalises on addition. */
static res_verdict fire_add(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const rivals[] = {"none", "rope", "alibi", "kerple", "t5", "learned", "rope+random"};
    res_put(b, "### FIRE generalises on addition\n\n"
           "Source: Li, You, Guruganesh, Ainslie, Ontañón, Zaheer, Sanghai, Yang, Kumar and Bhojanapalli 2023, "
           "*Functional Interpolation for Relative Positions Improves Long Context Transformers* (FIRE, compared "
           "with NoPE, RoPE, ALiBi, Kerple and T5's bias); on addition, Zhou, Alon, Chen, Wang, Agarwal and Zhou "
           "2024, *Transformers Can Achieve Length Generalization But Not Robustly*, found FIRE the encoding that "
           "generalises to longer operands (with randomized positions, index hints and the sum reversed, in "
           "models of about 25M parameters trained on millions of examples).\n\n"
           "Theirs (Zhou et al.'s Figure 1 and 3, best of 10 trials): FIRE with randomized positions and index hints, "
           "trained on up to 40 digits, answers more than 98%% of 100-digit sums exactly (2.5x); with NoPE, "
           "KerpleLog or RoPE the accuracy degrades visibly past 60 digits (plotted, not tabulated).\n\n"
           "Criterion: on `add_hints` (the sum with index hints, in Zhou et al.'s recipe) where it ran, else on "
           "`add`: the better past 1x of `fire` and `fire+random` learned the task at 1x, and its mean exact match "
           "over the lengths past 1x is above 0 and at least that of each of `none`, `rope`, `alibi`, `kerple`, "
           "`t5`, `learned` and `rope+random` that ran.\n\n");
    int ti = cmp_task_find(a, "add_hints");
    if (ti < 0) ti = cmp_task_find(a, "add");
    if (ti < 0) {
        res_put(b, "Not run (no add task).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    const cmp_task *t = &a->T[ti];
    int vf = cmp_find(t, "fire"), vfr = cmp_find(t, "fire+random");
    if (vf < 0 && vfr < 0) {
        res_put(b, "Not run (no fire on add).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    int v = vf < 0 ? vfr : vfr < 0 ? vf : res_past(t, vfr, 0) > res_past(t, vf, 0) ? vfr : vf;
    char s[32];
    double best = put_against(b, "Numbers: ", t, v, rivals, sizeof rivals / sizeof rivals[0]);
    int top = res_best_at(t, res_last(t), 1);
    res_put(b, ". The best of every variant at %lldx: `%s` (%s).\n\n", (long long)t->base.eval[res_last(t)],
        top >= 0 ? t->V[top].name : "-", top >= 0 ? res_num(s, sizeof s, t, cmp_mean(t, top, res_last(t))) : "n/a");
    int learned = 0;
    for (int w = 0; w < t->nv; w++) learned += t->learned[w] == 1;
    snprintf(sum, ns, "`%s` %s at 1x; %d of %d variants learned the task", t->V[v].name,
             res_num(s, sizeof s, t, cmp_mean(t, v, 0)), learned, t->nv);
    if (t->learned[v] != 1) return V_UNDECIDED;
    return res_past(t, v, 0) > 0 && res_past(t, v, 0) >= best ? V_YES : V_NO;
}

/* Golovneva et al.: CoPE counts where token positions fail. */
static res_verdict cope_count(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const rivals[] = {"learned", "shaw", "rope"};
    res_put(b, "### CoPE counts\n\n"
           "Source: Golovneva, Wang, Weston and Sukhbaatar 2024, *Contextual Position Encoding: Learning to Count "
           "What's Important* (arXiv 2405.18719; the task is facebookresearch/RAM's projects/cope): on the counting "
           "task, CoPE makes far fewer errors than absolute and relative position embeddings, in distribution and "
           "out of it.\n\n"
           "Theirs (facebookresearch/RAM at e6f051fb, projects/cope/figures/counting_task.png, the paper's Table 3: "
           "test error with 3 variables, in distribution, 4 layers x 256 on 3..512 statements): CoPE 1.2%%, "
           "relative 17.8%%, absolute 67.6%%, so an exact match of 98.8%%, 82.2%% and 32.4%% (their test set is "
           "drawn as the training set: no longer contexts).\n\n"
           "Criterion: on `count_scaled` where it ran (else `count`), `cope` learned the task at 1x, and its exact match at 1x and its mean over the "
           "lengths past 1x are each at least those of `learned` (absolute), `shaw` (relative: learned vectors of "
           "the distance read by the query, as RAM's relative baseline) and `rope`; past 1x it must also beat "
           "always giving the most common answer (the mean of that over the same lengths), or the lead says "
           "nothing. Both halves: reproduced; one: partly.\n\n");
    int ti = cmp_task_find(a, "count_scaled");
    if (ti < 0) ti = cmp_task_find(a, "count");
    const cmp_task *t = ti >= 0 ? &a->T[ti] : NULL;
    int vc = t ? cmp_find(t, "cope") : -1;
    if (vc < 0) {
        res_put(b, "Not run (needs cope on count).\n\n");
        snprintf(sum, ns, "not run");
        return V_UNDECIDED;
    }
    char s1[32], s2[32], s3[32], s4[32], s5[32];
    res_put(b, "Numbers on `%s` (1x, past 1x): `cope` %s, %s", t->stem, res_num(s1, sizeof s1, t, cmp_mean(t, vc, 0)),
        res_num(s2, sizeof s2, t, res_past(t, vc, 0)));
    int in = 1, out = 1, any = 0;
    double in_best = -1, out_best = -1;
    for (size_t r = 0; r < sizeof rivals / sizeof rivals[0]; r++) {
        int w = cmp_find(t, rivals[r]);
        if (w < 0) continue;
        any = 1;
        res_put(b, "; `%s` %s, %s", rivals[r], res_num(s1, sizeof s1, t, cmp_mean(t, w, 0)), res_num(s2, sizeof s2, t, res_past(t, w, 0)));
        in &= cmp_mean(t, vc, 0) >= cmp_mean(t, w, 0);
        out &= res_past(t, vc, 0) >= res_past(t, w, 0);
        in_best = fmax(in_best, cmp_mean(t, w, 0)), out_best = fmax(out_best, res_past(t, w, 0));
    }
    const double floor = res_mean_past(t, t->chance); /* always the most common answer, past 1x */
    const int above = !isfinite(floor) || res_past(t, vc, 0) > floor;
    res_put(b, "; always the most common answer %s past 1x; `cope` learned it at 1x: %s.", res_num(s1, sizeof s1, t, floor),
        t->learned[vc] == 1 ? "yes" : "no");
    if (out && !above) res_put(b, " `cope` leads past 1x, but not above the most common answer: that half does not count.");
    res_put(b, "\n\n");
    snprintf(sum, ns, "1x: cope %s, best rival %s; past 1x: cope %s, best rival %s, most common answer %s",
             res_num(s1, sizeof s1, t, cmp_mean(t, vc, 0)), res_num(s2, sizeof s2, t, in_best), res_num(s3, sizeof s3, t, res_past(t, vc, 0)),
             res_num(s4, sizeof s4, t, out_best), res_num(s5, sizeof s5, t, floor));
    out &= above;
    if (!any || t->learned[vc] != 1) return V_UNDECIDED;
    return in && out ? V_YES : in || out ? V_PARTLY : V_NO;
}

/* Puvvada et al.: SWAN's interleaving of full NoPE layers and windowed rope layers holds its
 * loss past the training length, where rope's grows. */
static res_verdict swan(res_buf *b, const cmp_all *a, char *sum, size_t ns) {
    static const char *const others[] = {"rnope-swa", "rnope", "rnope+temp", "rope-swa", "none+temp", "none", "alibi"};
    res_put(b, "### The 2025 hybrids hold past the training length on language modelling\n\n"
               "Source: Puvvada, Ladhak, Akle Serrano, Hsieh, Acharya, Majumdar, Jia, Kriman, Sun, Rekesh and "
               "Ginsburg 2025, *SWAN: An Efficient and Scalable Approach for Long-Context Language Modeling* "
               "(EMNLP 2025; arXiv 2504.08719): interleaving full-attention NoPE layers with sliding-window "
               "rope layers (one NoPE layer, then three windowed ones) keeps the model working on sequences "
               "much longer than its training length, where the rope model fails; Cohere2's RNoPE-SWA "
               "(three windowed rope layers, then one full NoPE layer) is the same idea. Their scaling of the "
               "logits at inference is left out here (its constant is not given).\n\n"
               "Theirs: their perplexities past the training length are plotted only (Figure 1: trained at 1024, "
               "evaluated to 4096, RoPE's and NoPE's loss rising past 1024); in numbers, needle-in-a-haystack "
               "retrieval of models trained at 1K (Table 5): SWAN's layout 1.000 at 1K, 0.998 at 4K, 0.957 at 8K, "
               "the RoPE model 0.985 at 1K and 0.000 from 2K on.\n\n"
               "Criterion: on `lm_hybrids`, `swan` learned the task at 1x and its bits per character at 8x are "
               "within 5%% of those at 1x, and `rope` learned it and its bits rise by more than 5%% (swan flat "
               "alone: partly).\n\n");
    return flat_past_l(b, a, "lm_hybrids", "swan", "rope", others, sizeof others / sizeof others[0], sum, ns);
}

const res_ordering RES_ORDERINGS[RES_N_ORDERINGS] = {
    {"ALiBi flat past L on lm (Press et al. 2022)", "ALiBi flat past L", press},
    {"NoPE generalises on synthetic tasks (Kazemnejad et al. 2023)", "NoPE", kazemnejad},
    {"randomized positions help on longer strings (Ruoss et al. 2023)", "randomized positions", ruoss},
    {"FIRE on addition (Li et al. 2023; Zhou et al. 2024)", "FIRE on addition", fire_add},
    {"CoPE on counting (Golovneva et al. 2024)", "CoPE on counting", cope_count},
    {"the hybrids hold past L on lm (Puvvada et al. 2025)", "the hybrids", swan},
};
