/* posenc compare's tables and files: mean and spread over seeds per variant and length, the
 * Markdown table (with the chance and bigram floors), the CSV, table and plot of a task
 * written whole, and every output of a comparison from its runs' results (compare.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../train/env.h"
#include "../train/plot.h"
#include "../tools/output.h"
#include "cli.h"
#include "compare.h"

/* Bits per character of the bigram model of the training text (add-one counts) on the
 * held-out text: what a model that reads only the current character reaches. */
double cmp_bigram_bpc(const tr_task *t) {
    const int64_t V = t->V;
    double *c = calloc((size_t)(V * V), sizeof(double)), *row = calloc((size_t)V, sizeof(double));
    if (!c || !row) {
        free(c), free(row);
        return NAN;
    }
    for (int64_t i = 0; i + 1 < t->n_train; i++) c[t->train[i] * V + t->train[i + 1]]++, row[t->train[i]]++;
    double bits = 0;
    for (int64_t i = 0; i + 1 < t->n_eval; i++)
        bits -= log2((c[t->eval[i] * V + t->eval[i + 1]] + 1) / (row[t->eval[i]] + (double)V));
    free(c), free(row);
    return t->n_eval > 1 ? bits / (double)(t->n_eval - 1) : NAN;
}

/* The exact match of always answering the most common answer among the sequences evaluated
 * at content length n (those tr_run_eval reads): the chance level of a task whose answers
 * repeat (count's values 0..10); about 0 for copy, reverse and add. */
double cmp_chance_at(const tr_task *t, int64_t n, int64_t eval_tokens) {
    const int64_t Tmax = tr_task_seq_len(t, n), Bc = 2048 / Tmax < 1 ? 1 : 2048 / Tmax;
    int64_t seqs = eval_tokens / Tmax;
    seqs = seqs < 16 ? 16 : seqs;
    int32_t *in = malloc(sizeof(int32_t) * (size_t)(Bc * Tmax)), *tgt = malloc(sizeof(int32_t) * (size_t)(Bc * Tmax));
    char (*ans)[16] = calloc((size_t)seqs, 16);
    double best = NAN;
    if (in && tgt && ans) {
        for (int64_t idx = 0, done = 0; done < seqs; idx++) {
            int64_t B = seqs - done < Bc ? seqs - done : Bc, T = tr_task_eval_batch(t, n, idx, B, in, tgt);
            for (int64_t b = 0; b < B; b++) { /* the scored targets: the answer and its '.' */
                int w = 0;
                for (int64_t i = 0; i < T && w < 15; i++)
                    if (tgt[b * T + i] >= 0) ans[done + b][w++] = (char)t->chars[tgt[b * T + i]];
            }
            done += B;
        }
        int most = 0;
        for (int64_t i = 0; i < seqs; i++) {
            int c = 0;
            for (int64_t j = 0; j < seqs; j++) c += !strcmp(ans[i], ans[j]);
            most = c > most ? c : most;
        }
        best = most > 1 ? (double)most / (double)seqs : 0; /* no answer twice: no floor */
    }
    free(in), free(tgt), free(ans);
    return best;
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
static int family_of(const cmp_variant *v) {
    const int m = pe_method_from_name(v->method);
    return m < 0 ? PE_FAMILY_ABSOLUTE : (int)pe_method_family(m);
}

void cmp_cell(char *buf, size_t n, double mean, double sd, int pct) {
    double k = pct ? 100 : 1;
    if (!isfinite(mean)) snprintf(buf, n, "failed");
    else if (isfinite(sd)) snprintf(buf, n, pct ? "%.1f ± %.1f" : "%.3f ± %.3f", k * mean, k * sd);
    else snprintf(buf, n, pct ? "%.1f" : "%.3f", k * mean);
}

/* Ruoss et al.'s tasks: scored by the mean token accuracy past L, so learned by it too. */
static int cmp_scored_by_token(const cmp_task *t) {
    return t->base.score_lengths[0] && strcmp(t->base.score_metric, "exact") != 0;
}

/* Means and spreads over seeds, and whether each variant learned the task in distribution. */
int cmp_task_stats(cmp_task *t, const cmp_all *a) {
    const int ne = t->base.n_eval, nv = t->nv;
    t->mean = calloc((size_t)(nv * ne), sizeof(double)), t->sd = calloc((size_t)(nv * ne), sizeof(double));
    t->tacc = calloc((size_t)(nv * ne), sizeof(double)), t->tps = calloc((size_t)nv, sizeof(double));
    t->learned = calloc((size_t)nv, sizeof(int));
    t->score = calloc((size_t)nv, sizeof(double)), t->score_sd = calloc((size_t)nv, sizeof(double));
    if (!t->mean || !t->sd || !t->tacc || !t->tps || !t->learned || !t->score || !t->score_sd) return -1;
    for (int v = 0; v < nv; v++) {
        double tp[CMP_MAX_SEEDS], sc[CMP_MAX_SEEDS];
        int nt = 0, ns = 0;
        for (int k = 0; k < ne; k++) {
            double x[CMP_MAX_SEEDS], y[CMP_MAX_SEEDS];
            int n = 0;
            for (int s = 0; s < t->seeds; s++) {
                const cmp_job *jb = &a->J[t->first_job + v * t->seeds + s];
                if (jb->failed) continue;
                y[n] = jb->m[k].token_acc;
                x[n++] = tr_metric_value(&t->task, &jb->m[k]);
                if (k == 0) tp[nt++] = jb->tok_per_s;
                if (k == 0 && isfinite(jb->score)) sc[ns++] = jb->score;
            }
            t->mean[v * ne + k] = n ? mean_of(x, n) : NAN;
            t->sd[v * ne + k] = sd_of(x, n);
            t->tacc[v * ne + k] = n ? mean_of(y, n) : NAN;
        }
        t->tps[v] = nt ? mean_of(tp, nt) : NAN;
        t->score[v] = ns ? mean_of(sc, ns) : NAN, t->score_sd[v] = sd_of(sc, ns);
        const double m1 = t->mean[v * ne];
        t->learned[v] = !isfinite(m1)                ? -1
                        : t->task.kind == TR_TASK_LM ? m1 <= (1 - CMP_LM_MARGIN) * t->bigram_bpc
                        : cmp_scored_by_token(t)     ? t->tacc[v * ne] >= CMP_LEARNED_TOKEN
                                                     : m1 >= CMP_LEARNED_EXACT;
    }
    return 0;
}

/* What "learned" means for this task, one sentence. */
static void learned_rule(const cmp_task *t, char *buf, size_t n) {
    if (t->task.kind == TR_TASK_LM)
        snprintf(buf, n, "learned = bits per character at 1x at least %.0f%% below the bigram model of the training text "
                 "on the same held-out text (%.3f)", 100 * CMP_LM_MARGIN, t->bigram_bpc);
    else if (cmp_scored_by_token(t))
        snprintf(buf, n, "learned = mean token accuracy at 1x at least %.0f%% (the task is scored by token accuracy)",
                 100 * CMP_LEARNED_TOKEN);
    else snprintf(buf, n, "learned = mean exact match at 1x at least %.0f%%", 100 * CMP_LEARNED_EXACT);
}

/* The task's table: printed, and as Markdown into t's md (malloc'ed, returned). */
char *cmp_task_table(const cmp_task *t, const cmp_all *a) {
    const int ne = t->base.n_eval, pct = t->task.kind != TR_TASK_LM;
    const tr_options *b = &t->base;
    size_t cap = 65536, len = 0;
    char *md = malloc(cap), c[64], rule[256];
    if (!md) return NULL;
#define MD(...) (len += (size_t)snprintf(md + len, len < cap ? cap - len : 0, __VA_ARGS__))
    /* --quick checks that every method runs; its few steps rank nothing, and its table must
     * not be read (or pasted) as a result */
    static const char smoke[] = "SMOKE TEST (--quick): too few steps to train, these numbers mean nothing";
    if (a->quick) printf("\n%s\n", smoke), MD("**%s**\n\n", smoke);
    MD("%s on %s, training length %lld%s: %lld steps x %lld sequences, %lld layers x %lld wide, %lld heads, "
       "%d seed%s; mean ± sd over seeds (%s)\n\n",
       pct ? "exact-match accuracy (%)" : "bits per character", b->text[0] ? "--text" : cmp_task_name(a, t), (long long)b->length,
       t->task.kind == TR_TASK_COUNTING ? " statements" : "", (long long)b->steps, (long long)b->batch,
       (long long)b->layers, (long long)b->width, (long long)b->heads, t->seeds, t->seeds > 1 ? "s" : "",
       pct ? "higher is better" : "lower is better");
    MD("| method |");
    for (int k = 0; k < ne; k++) MD(" %lldx (%lld) |", (long long)b->eval[k], (long long)(b->eval[k] * b->length));
    int64_t slo = 0, shi = 0;
    const int scored = !tr_options_score_range(b, &slo, &shi) && shi > 0;
    if (scored) MD(" score %lld-%lld |", (long long)slo, (long long)shi);
    MD("%s learned at 1x | train tok/s |\n| --- |", pct ? " token acc. 1x / last |" : "");
    for (int k = 0; k < ne + 2 + pct + scored; k++) MD(" ---: |");
    MD("\n");
    printf("\n%s, training length %lld\n%-18s", b->text[0] ? "--text" : cmp_task_name(a, t), (long long)b->length, "method");
    for (int k = 0; k < ne; k++) {
        snprintf(c, sizeof c, "%lldx (%lld)", (long long)b->eval[k], (long long)(b->eval[k] * b->length));
        printf(" %16s", c);
    }
    if (scored) printf(" %12s", "score");
    printf(" %8s %12s\n", "learned", "train tok/s");
    int not_learned = 0;
    for (int v = 0; v < t->nv; v++) {
        printf("%-18s", t->V[v].name);
        MD("| `%s` |", t->V[v].name);
        for (int k = 0; k < ne; k++) {
            cmp_cell(c, sizeof c, cmp_mean(t, v, k), cmp_sd(t, v, k), pct);
            printf(" %16s", c);
            MD(" %s |", c);
        }
        if (scored) {
            cmp_cell(c, sizeof c, t->score[v], t->score_sd[v], 1);
            printf(" %12s", c);
            MD(" %s |", c);
        }
        if (pct) MD(" %.1f / %.1f |", 100 * t->tacc[v * ne], 100 * t->tacc[v * ne + ne - 1]);
        const char *l = t->learned[v] < 0 ? "failed" : t->learned[v] ? "yes" : "no";
        not_learned += t->learned[v] == 0;
        printf(" %8s %11.1fk\n", l, t->tps[v] / 1e3);
        MD(" %s | %.1fk |\n", t->learned[v] == 0 ? "**no**" : l, t->tps[v] / 1e3);
    }
    learned_rule(t, rule, sizeof rule);
    MD("\n%s; %d of %d did not: their numbers past 1x say nothing about extrapolation.%s", rule, not_learned, t->nv,
       pct ? " Token accuracy: the answer's characters predicted right, at 1x and at the longest length." : "");
    if (scored)
        MD(" Score: Ruoss et al.'s, the mean token accuracy over every content length %lld..%lld (512 sequences each).",
           (long long)slo, (long long)shi);
    int repeats = 0;
    for (int k = 0; k < ne && pct; k++) repeats |= t->chance[k] > 0.01;
    if (repeats) { /* count: answers repeat, so exact match has a floor */
        MD(" Always giving the most common answer:");
        for (int k = 0; k < ne; k++) MD("%s %.1f%% at %lldx", k ? "," : "", 100 * t->chance[k], (long long)b->eval[k]);
        MD(".");
    }
    MD("\n");
    if (!a->full) {
        char tot[32], cpu[32];
        tr_format_time(tot, sizeof tot, a->elapsed);
        tr_format_time(cpu, sizeof cpu, a->cpu);
        MD("\n%d runs in %s (%s of CPU time), %d at a time; train tok/s is per run, with the runs sharing the cores.\n",
           a->njobs, tot, cpu, a->jobs);
    } else {
        char tot[32];
        tr_format_time(tot, sizeof tot, t->elapsed);
        MD("\n%d runs, %s of run time; train tok/s is per run, with the runs sharing the cores.\n", t->nv * t->seeds, tot);
    }
#undef MD
    return md;
}

/* The task's files: DIR/STEM.csv (every run and length), DIR/STEM.md (the table), DIR/STEM.png,
 * which appear together or not at all (pe_out_commit_all: a full disk leaves none of them). */
int cmp_task_files(const cmp_task *t, const cmp_all *a, const char *out, const char *md) {
    const int ne = t->base.n_eval, pct = t->task.kind != TR_TASK_LM;
    const tr_options *b = &t->base;
    const char *metric = tr_metric_name(&t->task);
    pe_err err = {{0}};
    char csv[1100], png[1100], mdp[1100];
    snprintf(csv, sizeof csv, "%s/%s.csv", out, t->stem);
    snprintf(png, sizeof png, "%s/%s.png", out, t->stem);
    snprintf(mdp, sizeof mdp, "%s/%s.md", out, t->stem);
    pe_out po[3]; /* csv, png, md */
    if (pe_out_open(&po[0], csv, &err)) return cli_fail("compare: %s", err.msg);
    FILE *f = po[0].fp;
    fprintf(f, "task,method,variant,seed,train_length,eval_multiple,eval_length,metric,value,loss_nats,bpc,token_acc,exact,score,steps,train_seconds,train_tokens_per_s,status\n");
    for (int j = t->first_job; j < t->first_job + t->nv * t->seeds; j++) {
        const cmp_job *jb = &a->J[j];
        for (int k = 0; k < ne; k++) {
            const tr_metrics *m = &jb->m[k];
            char score[32] = ""; /* empty: no score asked */
            if (isfinite(jb->score)) snprintf(score, sizeof score, "%.6g", jb->score);
            fprintf(f, "%s,%s,%s,%d,%lld,%lld,%lld,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%s,%lld,%.3f,%.1f,%s\n", cmp_task_name(a, t),
                    t->V[jb->v].method, t->V[jb->v].name, jb->seed, (long long)b->length, (long long)b->eval[k],
                    (long long)(b->eval[k] * b->length), metric, jb->failed ? NAN : tr_metric_value(&t->task, m), m->loss,
                    m->bpc, m->token_acc, m->exact, score, (long long)b->steps, jb->seconds, jb->tok_per_s,
                    jb->failed ? "failed" : "ok");
        }
    }

    /* plot: x = log2 of the multiple, one panel per family (absolute, relative, bias, rotary:
     * 20 lines in one panel cannot be told apart), one y range for all panels. The range fits
     * the bulk of the values: bits per character stop at the 90th percentile of the means plus
     * their spread (tr_plot_fit_y), so one method that blows up does not flatten the others;
     * its points sit on the top edge as triangles, and the axis says so. A variant that did
     * not learn the task at 1x says so in the legend. */
    int rc = 0;
    {
        const int nv = t->nv;
        double *xs = malloc(sizeof(double) * (size_t)ne), ticks[TR_MAX_EVAL];
        char tl[TR_MAX_EVAL][32];
        const char *tlp[TR_MAX_EVAL];
        for (int k = 0; k < ne && xs; k++) {
            xs[k] = ticks[k] = log2((double)b->eval[k]);
            snprintf(tl[k], sizeof tl[k], "%lld (%lldx)", (long long)(b->eval[k] * b->length), (long long)b->eval[k]);
            tlp[k] = tl[k];
        }
        char title[320], ylabel[160];
        snprintf(ylabel, sizeof ylabel, "%s", pct ? "exact match (%)" : "bits per character (lower is better)");
        tr_plot pl = {.xlabel = "evaluation length (multiple of the training length)", .ylabel = ylabel,
                      .n_ticks = ne, .ticks = ticks, .tick_labels = tlp, .W = 1200, .H = 860};
        snprintf(title, sizeof title, "%s%s, trained at length %lld: mean over %d seed%s, bars: \xc2\xb1 sd",
                 a->quick ? "SMOKE TEST (--quick), numbers mean nothing: " : "", b->text[0] ? "--text" : cmp_task_name(a, t),
                 (long long)b->length, t->seeds, t->seeds > 1 ? "s" : "");
        pl.title = title;
        /* panels: the families present, in the library's order */
        static const int fam[] = {PE_FAMILY_ABSOLUTE, PE_FAMILY_RELATIVE, PE_FAMILY_BIAS, PE_FAMILY_ROTARY};
        const char *ptitle[4];
        int pof[CMP_MAX_VARIANTS], npan = 0, fpanel[4];
        for (int q = 0; q < 4; q++) {
            fpanel[q] = -1;
            for (int v = 0; v < nv && fpanel[q] < 0; v++)
                if (family_of(&t->V[v]) == fam[q]) fpanel[q] = npan, ptitle[npan++] = pe_family_name(fam[q]);
        }
        for (int v = 0; v < nv; v++)
            for (int q = 0; q < 4; q++)
                if (family_of(&t->V[v]) == fam[q]) pof[v] = fpanel[q];
        if (npan > 1) pl.n_panels = npan, pl.panel_titles = ptitle, pl.panel_of = pof;
        const size_t nser = nv > 0 ? (size_t)nv : 1; /* nv >= 1 here; the bound is for the compiler */
        tr_series *S = calloc(nser, sizeof(tr_series));
        double *ys = malloc(sizeof(double) * 2 * nser * (size_t)ne);
        char (*labels)[80] = calloc(nser, 80);
        for (int v = 0; S && ys && labels && v < nv; v++) {
            double *y = ys + 2 * v * ne, *e = y + ne;
            for (int k = 0; k < ne; k++) {
                double sc = pct ? 100 : 1;
                y[k] = sc * cmp_mean(t, v, k);
                e[k] = sc * cmp_sd(t, v, k);
            }
            snprintf(labels[v], 80, "%s%s", t->V[v].name, t->learned[v] == 0 ? " (not learned)" : "");
            S[v] = (tr_series){.label = labels[v], .n = ne, .x = xs, .y = y, .err = e};
        }
        if (!pct && S && ys && labels && tr_plot_fit_y(&pl, nv, S) > 0)
            snprintf(ylabel, sizeof ylabel, "bits per character (lower is better), clipped: \xe2\x96\xb2 = above %g",
                     pl.ymax);
        if (!xs || !S || !ys || !labels) rc = cli_fail("compare: out of memory");
        else if (tr_plot_png_out(&po[1], png, &pl, nv, S, &err)) rc = cli_fail("compare: %s", err.msg);
        free(S), free(ys), free(xs), free(labels);
    }
    if (!rc && pe_out_open(&po[2], mdp, &err)) {
        pe_out_abort(&po[1]);
        rc = cli_fail("compare: %s", err.msg);
    }
    if (rc) {
        pe_out_abort(&po[0]);
        return rc;
    }
    fputs(md, po[2].fp); /* a failed write shows as the stream's error in the commit */
    if (pe_out_commit_all(po, 3, &err)) return cli_fail("compare: %s", err.msg);
    printf("wrote %s, %s, %s\n", csv, png, mdp);
    return 0;
}

int cmp_report_failures(const cmp_all *a, const unsigned char *which) {
    int failures = 0;
    for (int j = 0; j < a->njobs; j++)
        if (a->J[j].failed && (!which || which[j])) {
            const cmp_job *jb = &a->J[j];
            fprintf(stderr, "posenc: compare: %s%s%s seed %d failed: %s\n", a->full ? cmp_task_name(a, &a->T[jb->t]) : "",
                    a->full ? ": " : "", a->T[jb->t].V[jb->v].name, jb->seed, jb->err);
            failures++;
        }
    return failures;
}

/* The README's block: the table and the plot, the image path relative to the README */
static int readme_block(const cmp_all *a, const char *out, const char *readme) {
    char *block = malloc(70000), rel[1100];
    const char *slash = strrchr(readme, '/');
    size_t dl = slash ? (size_t)(slash - readme + 1) : 0;
    snprintf(rel, sizeof rel, "%s/compare.png", out);
    const char *img = dl && !strncmp(rel, readme, dl) ? rel + dl : rel;
    int rc = 0;
    if (!block) rc = cli_fail("compare: out of memory");
    else {
        snprintf(block, 70000, "%s\n![metric versus evaluation length](%s)\n", a->T[0].md, img);
        if (cli_readme_block("compare", readme, "compare", block)) rc = 2;
        else printf("updated %s\n", readme);
    }
    free(block);
    return rc;
}

int cmp_outputs(cmp_all *a, const char *out, const char *readme, const char *results) {
    const int failures = cmp_report_failures(a, NULL);
    int rc = failures ? 1 : 0;
    if (mkdir(out, 0777) && errno != EEXIST) return cli_fail("compare: --out: cannot create '%s': %s", out, strerror(errno));
    for (int t = 0; t < a->nt; t++) {
        /* a task's runs interleave with the others': its time is the sum of its runs'; alone,
         * from the first of them starting to the last ending */
        cmp_task *tk = &a->T[t];
        double sum = 0, first = 0, last = 0;
        for (int j = tk->first_job; j < tk->first_job + tk->nv * tk->seeds; j++) {
            const cmp_job *jb = &a->J[j];
            sum += jb->seconds;
            if (j == tk->first_job || jb->wall_start < first) first = jb->wall_start;
            if (j == tk->first_job || jb->wall_end > last) last = jb->wall_end;
        }
        tk->elapsed = a->nt > 1 ? sum : last > first ? last - first : a->elapsed;
        if (cmp_task_stats(tk, a) || !(tk->md = cmp_task_table(tk, a))) {
            rc = cli_fail("compare: out of memory");
            break;
        }
    }
    char tot[32], cpu[32];
    tr_format_time(tot, sizeof tot, a->elapsed);
    tr_format_time(cpu, sizeof cpu, a->cpu);
    printf("\n%d runs in %s, %s of CPU time, %d at a time%s\n", a->njobs, tot, cpu, a->jobs,
           failures ? "; some failed, see above" : "");
    for (int t = 0; t < a->nt && rc < 2; t++) {
        int r2 = cmp_task_files(&a->T[t], a, out, a->T[t].md);
        if (r2) rc = r2;
    }
    if (rc < 2 && readme && !a->full && readme_block(a, out, readme)) rc = 2;
    if (rc < 2 && results) {
        if (cmp_results_write(a, results, out, readme)) rc = 2;
        else printf("wrote %s%s%s\n", results, readme ? " and updated " : "", readme ? readme : "");
    }
    return rc;
}

/* The wall time the runs marked 2 in mark took: the length of the union of their [start, end]
 * spans, so that a shard stopped and run again another day counts its hours, not the days
 * between. */
typedef struct span { double t0, t1; } span;
static int by_start(const void *x, const void *y) {
    const span *a = x, *b = y;
    return (a->t0 > b->t0) - (a->t0 < b->t0);
}
static double busy_time(const cmp_all *a, const unsigned char *mark) {
    span *s = malloc(sizeof *s * (size_t)(a->njobs ? a->njobs : 1));
    if (!s) return NAN;
    int n = 0;
    for (int i = 0; i < a->njobs; i++)
        if (mark[i] == 2) s[n++] = (span){a->J[i].wall_start, a->J[i].wall_end};
    qsort(s, (size_t)n, sizeof *s, by_start);
    double busy = 0, t0 = n ? s[0].t0 : 0, t1 = t0;
    for (int i = 0; i < n; i++) {
        if (s[i].t0 > t1) busy += t1 - t0, t0 = s[i].t0; /* a gap: the span so far is done */
        t1 = s[i].t1 > t1 ? s[i].t1 : t1;
    }
    free(s);
    return busy + (t1 - t0);
}

char *cmp_shards_table(const cmp_all *a) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    unsigned char *seen = calloc((size_t)a->njobs + 1, 1);
    if (!f || !seen) {
        if (f) fclose(f);
        return free(seen), free(s), NULL;
    }
    fprintf(f, "\nWhere the runs ran (one row a shard, or one for the whole run):\n\n"
               "| shard | machine | runs | wall time | CPU time of its runs |\n| --- | --- | ---: | ---: | ---: |\n");
    for (int j = 0; j < a->njobs; j++) {
        if (seen[j]) continue;
        const cmp_job *x = &a->J[j];
        double cpu = 0;
        int runs = 0;
        for (int i = j; i < a->njobs; i++) {
            const cmp_job *y = &a->J[i];
            if (seen[i] || y->shard_k != x->shard_k || y->shard_n != x->shard_n || strcmp(y->machine, x->machine)) continue;
            seen[i] = 2, runs++, cpu += y->cpu;
        }
        char wall[32], c[32], sh[32] = "-";
        tr_format_time(wall, sizeof wall, busy_time(a, seen)), tr_format_time(c, sizeof c, cpu);
        for (int i = j; i < a->njobs; i++) seen[i] = seen[i] ? 1 : 0;
        if (x->shard_n > 1) snprintf(sh, sizeof sh, "%d/%d", x->shard_k, x->shard_n);
        fprintf(f, "| %s | %s | %d | %s | %s |\n", sh, x->machine[0] ? x->machine : "unknown CPU", runs, wall, c);
    }
    free(seen);
    if (fclose(f)) return free(s), NULL;
    return s;
}
