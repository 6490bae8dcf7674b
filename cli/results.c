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
#include "results.h"

/* ---- the growing string ---- */

void res_put(res_buf *b, const char *fmt, ...) {
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

int res_is_pct(const cmp_task *t) { return t->task.kind != TR_TASK_LM; }

/* "82.3%" or "2.134" */
const char *res_num(char *s, size_t n, const cmp_task *t, double x) {
    if (!isfinite(x)) snprintf(s, n, "n/a");
    else if (res_is_pct(t)) snprintf(s, n, "%.1f%%", 100 * x);
    else snprintf(s, n, "%.3f", x);
    return s;
}

/* The mean over the multiples past 1x of a row of values by evaluation (its finite ones) */
double res_mean_past(const cmp_task *t, const double *by_eval) {
    double s = 0;
    int n = 0;
    for (int k = 0; k < t->base.n_eval; k++)
        if (t->base.eval[k] > 1 && isfinite(by_eval[k])) s += by_eval[k], n++;
    return n ? s / n : NAN;
}

/* A variant's score past the training length: its metric (which = 0) or token accuracy (1) */
double res_past(const cmp_task *t, int v, int which) {
    return res_mean_past(t, (which ? t->tacc : t->mean) + v * t->base.n_eval);
}

/* The index of the evaluation at multiple m, -1 when not evaluated. */
int res_at(const cmp_task *t, int64_t m) {
    for (int k = 0; k < t->base.n_eval; k++)
        if (t->base.eval[k] == m) return k;
    return -1;
}

int res_last(const cmp_task *t) { return t->base.n_eval - 1; }

/* The best variant at evaluation k among those that learned the task (all: any variant), -1
 * when none qualifies. */
int res_best_at(const cmp_task *t, int k, int all) {
    int b = -1;
    const int lower = !res_is_pct(t);
    for (int v = 0; v < t->nv; v++) {
        double x = cmp_mean(t, v, k);
        if (!isfinite(x) || (!all && t->learned[v] != 1)) continue;
        if (b < 0 || (lower ? x < cmp_mean(t, b, k) : x > cmp_mean(t, b, k))) b = v;
    }
    return b;
}

/* A list of names "`a`, `b` and `c`" of the variants with sel[v]; "none" when empty. */
void res_names(res_buf *b, const cmp_task *t, const int *sel) {
    int n = 0, total = 0;
    for (int v = 0; v < t->nv; v++) total += sel[v] != 0;
    if (!total) {
        res_put(b, "none");
        return;
    }
    for (int v = 0; v < t->nv; v++)
        if (sel[v]) {
            n++;
            res_put(b, "%s`%s`", n == 1 ? "" : n == total ? " and " : ", ", t->V[v].name);
        }
}

/* ---- a paragraph per task ---------------------------------------------------------------- */

static void paragraph(res_buf *b, const cmp_task *t) {
    const int nv = t->nv, ne = t->base.n_eval, pct = res_is_pct(t);
    char s1[32], s2[32], s3[32], s4[32];
    int *sel = calloc((size_t)nv, sizeof(int)), nl = 0;
    if (!sel) {
        b->oom = 1;
        return;
    }
    for (int v = 0; v < nv; v++) nl += t->learned[v] == 1;
    res_put(b, "On `%s`, %d of %d variants learned the task in distribution", t->stem, nl, nv);
    if (nl < nv) {
        for (int v = 0; v < nv; v++) sel[v] = t->learned[v] != 1;
        res_put(b, "; not: ");
        res_names(b, t, sel);
    }
    res_put(b, ". ");
    int b1 = res_best_at(t, 0, 1);
    if (b1 >= 0 && pct && !(cmp_mean(t, b1, 0) > 0)) res_put(b, "No variant answered a sequence exactly at 1x. ");
    else if (b1 >= 0) res_put(b, "At 1x the best is `%s` (%s). ", t->V[b1].name, res_num(s1, sizeof s1, t, cmp_mean(t, b1, 0)));
    if (!nl || ne < 2) {
        res_put(b, "%s\n\n", nl ? "" : "With no variant past the in-distribution bar, the longer lengths rank nothing.");
        free(sel);
        return;
    }
    /* the best past 1x, length by length; the lengths where none of them gets an answer right
     * in one sentence */
    res_put(b, "Past the training length,");
    for (int k = 1, first = 1; k < ne; k++) {
        int bk = res_best_at(t, k, 0);
        if (bk < 0) continue;
        if (pct && !(cmp_mean(t, bk, k) > 0)) {
            int k1 = k;
            while (k1 + 1 < ne && res_best_at(t, k1 + 1, 0) >= 0 && !(cmp_mean(t, res_best_at(t, k1 + 1, 0), k1 + 1) > 0)) k1++;
            res_put(b, "%s at ", first ? "" : ";");
            for (int q = k; q <= k1; q++)
                res_put(b, "%s%lldx", q == k ? "" : q == k1 ? " and " : ", ", (long long)t->base.eval[q]);
            res_put(b, " none of them answers a sequence exactly");
            k = k1;
        } else
            res_put(b, "%s at %lldx the best of them is `%s` (%s)", first ? "" : ";", (long long)t->base.eval[k], t->V[bk].name,
                res_num(s1, sizeof s1, t, cmp_mean(t, bk, k)));
        first = 0;
    }
    res_put(b, ".");
    if (pct) { /* where answers repeat (count), what always giving the most common one gets */
        int any = 0;
        for (int k = 0; k < ne; k++) any |= t->chance[k] > 0.01;
        if (any) {
            res_put(b, " Always giving the most common answer gets");
            for (int k = 0; k < ne; k++)
                res_put(b, "%s %s at %lldx", k == 0 ? "" : k + 1 == ne ? " and" : ",", res_num(s1, sizeof s1, t, t->chance[k]),
                    (long long)t->base.eval[k]);
            res_put(b, ".");
        }
    }
    /* who holds up: bits within 5% of 1x at the last length; tasks: half the 1x score kept at 2x */
    const int kl = res_last(t), k2 = res_at(t, 2) >= 0 ? res_at(t, 2) : 1;
    int held = 0;
    for (int v = 0; v < nv; v++) {
        sel[v] = 0;
        if (t->learned[v] != 1) continue;
        if (!pct) sel[v] = cmp_mean(t, v, kl) <= 1.05 * cmp_mean(t, v, 0);
        else sel[v] = cmp_mean(t, v, k2) >= 0.5 * cmp_mean(t, v, 0);
        held += sel[v];
    }
    if (!held && !pct) res_put(b, " None of the %d that learned it stays within 5%% of its 1x bits at %lldx.", nl, (long long)t->base.eval[kl]);
    else if (!held) res_put(b, " None of the %d that learned it keeps half of its 1x exact match at %lldx.", nl, (long long)t->base.eval[k2]);
    else {
        if (!pct) res_put(b, " Of the %d that learned it, %d stay%s within 5%% of %s 1x bits at %lldx: ", nl, held,
                      held == 1 ? "s" : "", held == 1 ? "its" : "their", (long long)t->base.eval[kl]);
        else res_put(b, " Of the %d that learned it, %d keep%s at least half of %s 1x exact match at %lldx: ", nl, held,
                 held == 1 ? "s" : "", held == 1 ? "its" : "their", (long long)t->base.eval[k2]);
        res_names(b, t, sel);
        res_put(b, ".");
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
        res_put(b, " The largest fall: `%s`, %s at 1x to %s at %lldx.", t->V[worst].name, res_num(s1, sizeof s1, t, cmp_mean(t, worst, 0)),
            res_num(s2, sizeof s2, t, cmp_mean(t, worst, pct ? k2 : kl)), (long long)t->base.eval[pct ? k2 : kl]);
    if (pct) { /* token accuracy, which falls more slowly than exact match */
        int bt = -1;
        for (int v = 0; v < nv; v++)
            if (t->learned[v] == 1 && (bt < 0 || t->tacc[v * ne + kl] > t->tacc[bt * ne + kl])) bt = v;
        if (bt >= 0)
            res_put(b, " Token accuracy at %lldx: best `%s`, %s of the answer's characters.", (long long)t->base.eval[kl],
                t->V[bt].name, res_num(s3, sizeof s3, t, t->tacc[bt * ne + kl]));
    }
    /* each randomized-positions variant against its encoding */
    for (int v = 0; v < nv; v++) {
        if (!t->V[v].random) continue;
        int x = cmp_find(t, t->V[v].method);
        if (x < 0) continue;
        res_put(b, " `%s`: %s at 1x and %s past 1x (mean), against `%s`'s %s and %s.", t->V[v].name,
            res_num(s1, sizeof s1, t, cmp_mean(t, v, 0)), res_num(s2, sizeof s2, t, res_past(t, v, 0)), t->V[x].name,
            res_num(s3, sizeof s3, t, cmp_mean(t, x, 0)), res_num(s4, sizeof s4, t, res_past(t, x, 0)));
    }
    res_put(b, "\n\n");
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
    res_buf b = {malloc(1 << 16), 0, 1 << 16, 0};
    if (!b.s) return cli_fail("compare: out of memory");
    char tot[32], cpu[32];
    tr_format_time(tot, sizeof tot, a->elapsed);
    tr_format_time(cpu, sizeof cpu, a->cpu);
    res_put(&b, "# Results: which positional encodings work past the training length\n\n");
    if (a->quick)
        res_put(&b, "**SMOKE TEST (--quick): too few steps to train, these numbers mean nothing.**\n\n");
    res_put(&b, "Generated by `posenc compare %s`: %d runs in %s (%s of CPU time), %d at a time. Every "
            "sentence below about the numbers is a template filled from this run; nothing is written by hand.\n\n",
        a->command, a->njobs, tot, cpu, a->jobs);
    res_put(&b, "Each task trains its methods on one budget with %d seed%s (or those its budget names), at lengths 1..L (lm: context L), "
            "and evaluates at multiples of L on held-out sequences (the same for every method and seed). A method "
            "that did not learn a task in distribution (the *learned at 1x* column; lm: bits at 1x at least %.0f%% "
            "below the bigram model of the training text, tasks: exact match at 1x at least %.0f%%, tasks scored "
            "by token accuracy: token accuracy at 1x at least %.0f%%) says nothing about extrapolation, and no ordering below counts it. `NAME+shape`: SHAPE's random shifts; "
            "`NAME+random`: randomized positions (sorted, drawn from [0, N) in training and evaluation).\n\n",
        a->seeds, a->seeds > 1 ? "s" : "", 100 * CMP_LM_MARGIN, 100 * CMP_LEARNED_EXACT, 100 * CMP_LEARNED_TOKEN);
    res_put(&b, "## Budgets\n\n| task | length L | steps x batch | model | seeds | time of its runs | why |\n| --- | ---: | --- | --- | ---: | ---: | --- |\n");
    for (int i = 0; i < a->nt; i++) {
        const cmp_task *t = &a->T[i];
        const tr_options *o = &t->base;
        char el[32];
        tr_format_time(el, sizeof el, t->elapsed);
        res_put(&b, "| `%s` | %lld%s | %lld x %lld | %lld layers x %lld wide, %lld heads | %d | %s | %s |\n", t->stem,
            (long long)o->length, t->task.kind == TR_TASK_COUNTING ? " statements" : "", (long long)o->steps,
            (long long)o->batch, (long long)o->layers, (long long)o->width, (long long)o->heads, t->seeds, el,
            t->why && t->why[0] ? t->why : "-");
    }
    char *where = cmp_shards_table(a); /* NULL: out of memory */
    res_put(&b, "%s", where ? where : ""), b.oom |= !where, free(where);
    res_put(&b, "\nThe tasks: `lm` a character language model of a generated corpus with long-range structure; `copy` "
            "`abcd=abcd.`; `reverse` `abcd=dcba.`; `add` `123+4567=0964.` (the sum least significant digit first); "
            "`count` the counting task of CoPE, `b0..b+.a0.b+..b=2.` (`b0` sets b to 0, `b+` adds one, `.` "
            "passes; the question is the value of a variable that was set); `add_hints` the sum with index hints, "
            "`B0C1D2+B0C4D5=D7C5B0.`; `reverse_string` and `duplicate_string` Ruoss et al.'s, binary strings "
            "read by an encoder with one answer slot a symbol; `lm_hybrids` lm with 4 layers for the 2025 hybrids; "
            "`count_scaled` count with a larger model; `s2s_copy`, `s2s_reverse`, `s2s_sort` and `s2s_parity` "
            "Kazemnejad et al.'s (parity `01101=1.`), scored by the exact match over L+1..2L.\n\n");

    res_put(&b, "## Published orderings\n\n");
    res_buf o = {malloc(1 << 14), 0, 1 << 14, 0};
    if (!o.s) {
        free(b.s);
        return cli_fail("compare: out of memory");
    }
    res_verdict v[RES_N_ORDERINGS];
    char sum[RES_N_ORDERINGS][200] = {{0}};
    for (int i = 0; i < RES_N_ORDERINGS; i++) v[i] = RES_ORDERINGS[i].decide(&o, a, sum[i], sizeof sum[i]);
    res_buf tab = {malloc(1 << 12), 0, 1 << 12, 0}; /* the table of verdicts, for the page and the README */
    if (!tab.s) {
        free(b.s), free(o.s);
        return cli_fail("compare: out of memory");
    }
    res_put(&tab, "| ordering | this run | in short |\n| --- | --- | --- |\n");
    for (int i = 0; i < RES_N_ORDERINGS; i++)
        res_put(&tab, "| %s | %s | %s |\n", RES_ORDERINGS[i].title, res_verdict_name(v[i]), sum[i]);
    res_put(&b, "%s", tab.oom ? "" : tab.s);
    b.oom |= tab.oom;
    res_put(&b, "\n*Reproduced*: the criterion holds (in every case it was decided on); *partly*: in some; *undecided*: "
            "the method the ordering is about did not learn the task in distribution, so the run cannot say.\n\n");
    if (!o.oom) res_put(&b, "%s", o.s);
    b.oom |= o.oom;
    free(o.s);
    res_put(&b, "Verdicts: ");
    for (int i = 0; i < RES_N_ORDERINGS; i++)
        res_put(&b, "%s%s %s", i ? "; " : "", RES_ORDERINGS[i].label, res_verdict_name(v[i]));
    res_put(&b, ".\n\n");

    res_put(&b, "## Tasks\n\n");
    for (int i = 0; i < a->nt; i++) {
        const cmp_task *t = &a->T[i];
        char png[1100], rel[1100];
        snprintf(png, sizeof png, "%s/%s.png", out_dir, t->stem);
        relative_to(rel, sizeof rel, path, png);
        res_put(&b, "### %s\n\n", t->stem);
        paragraph(&b, t);
        res_put(&b, "%s\n![%s: metric versus evaluation length](%s)\n\n", t->md ? t->md : "", t->stem, rel);
    }
    if (!b.oom && readme) { /* the verdicts in the README's results block, with a link to the page */
        char rel[1100];
        relative_to(rel, sizeof rel, readme, path);
        res_put(&tab, "\n%s%d runs in %s, %d at a time; the criteria, numbers and tables: [%s](%s).\n",
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
