/* posenc compare: the extrapolation experiment. Trains every chosen method (default: every
 * method of the library the trainer supports, plus sinusoidal with SHAPE) with the same
 * budget and seeds, evaluates each at multiples of the training length, and writes a table
 * (mean and spread over seeds), a CSV and a PNG plot of the metric versus evaluation length.
 * --full does it for lm and the synthetic tasks, each with its own budget (FULL below), plus
 * the variants the published orderings need, in one pool of runs, and --results writes the
 * results page (cli/results.c). Runs are independent: one single-threaded run per core
 * (OpenMP), which at this model size beats threading inside a run (doc/perf.md, item 4; the
 * pool: cli/compare_run.c). --shard K/N runs a share of them and writes one file per run,
 * --merge builds the outputs from the shards' files (cli/compare_shard.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../train/env.h"
#include "../train/plot.h"
#include "../tools/output.h"
#include "cli.h"
#include "compare.h"
#include "options.h"

static const char *method_name_of(int i) { return i < PE_METHOD_COUNT ? pe_method_name(i) : NULL; }

int cmp_find(const cmp_task *t, const char *name) {
    for (int v = 0; v < t->nv; v++)
        if (!strcmp(t->V[v].name, name)) return v;
    return -1;
}

int cmp_task_find(const cmp_all *a, const char *name) {
    for (int i = 0; i < a->nt; i++)
        if (!strcmp(a->T[i].stem, name)) return i;
    return -1;
}

/* bidirectional: the answer-slot layout (no hybrids there) */
static int add_variant(cmp_variant *v, int *n, const char *name, int bidirectional, char *why, size_t why_len) {
    if (*n == CMP_MAX_VARIANTS) return snprintf(why, why_len, "at most %d methods", CMP_MAX_VARIANTS), -1;
    cmp_variant *x = &v[*n];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->method, sizeof x->method, "%s", name);
    x->hybrid = cmp_hybrid_named(name, strlen(name));
    if (x->hybrid && bidirectional)
        return snprintf(why, why_len, "'%s': the hybrids are for the decoder layout", name), -1;
    if (x->hybrid) snprintf(x->method, sizeof x->method, "%.*s", (int)strcspn(x->hybrid->methods, ","), x->hybrid->methods);
    char *plus = x->hybrid ? NULL : strchr(x->method, '+');
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
        return snprintf(why, why_len, "'%s': %s places keys by token index, not by position: it reads no positions", name,
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
    int64_t longest = 1, score_lo, score_hi;
    for (int k = 0; k < t->base.n_eval; k++) longest = t->base.eval[k] > longest ? t->base.eval[k] : longest;
    longest *= t->base.length;
    if (!tr_options_score_range(&t->base, &score_lo, &score_hi) && score_hi > longest) longest = score_hi;
    int64_t need = tr_task_seq_len(&t->task, longest), n = 1;
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

tr_options cmp_run_options(const cmp_task *t, const cmp_job *jb) {
    tr_options ro = t->base;
    const cmp_variant *vr = &t->V[jb->v];
    snprintf(ro.method, sizeof ro.method, "%s", vr->method);
    ro.seed = (uint64_t)jb->seed;
    ro.shape = vr->shape ? t->shape_k : 0;
    ro.random_positions = vr->random ? t->random_n : t->base.random_positions;
    const cmp_hybrid *h = vr->hybrid;
    if (h) { /* its methods, its rope layers' windows, its temperature */
        snprintf(ro.layers_methods, sizeof ro.layers_methods, "%s", h->methods);
        ro.layers_windows[0] = 0;
        const int64_t w = ro.length / 4 > 1 ? ro.length / 4 : 1;
        for (const char *p = h->methods; h->swa && *p; p += strcspn(p, ","), p += *p == ',') {
            const size_t n = strlen(ro.layers_windows);
            snprintf(ro.layers_windows + n, sizeof ro.layers_windows - n, "%s%lld", n ? "," : "",
                     (long long)(strncmp(p, "rope", 4) ? 0 : w));
        }
        ro.nope_temperature = h->temperature ? (double)(ro.length > 1 ? ro.length : 1) : 0;
    }
    return ro;
}

static void free_all(cmp_all *a) {
    for (int t = 0; t < a->nt; t++) {
        cmp_task *tk = &a->T[t];
        free(tk->mean), free(tk->sd), free(tk->tacc), free(tk->tps), free(tk->learned), free(tk->md);
        free(tk->score), free(tk->score_sd);
        tr_task_free(&tk->task);
    }
    free(a->J);
    free(a);
}

/* Whether variant name (or its method, before '+') is in the comma-separated list ("all": every one). */
static int in_list(const char *list, const char *name) {
    if (!strcmp(list, "all")) return 1;
    const size_t base = strcspn(name, "+");
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        if ((n == strlen(name) && !strncmp(p, name, n)) || (n == base && !strncmp(p, name, n))) return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The tasks: one (the command line's), or every task of FULL with its budget; the command
 * line's training options apply to every task, after the budget. The methods the trainer
 * cannot take go to skipped. 0 or 2. */
static int build_tasks(cmp_all *a, const compare_args *ca, const arg_res *r, char *skipped, size_t skipped_n) {
    pe_err err = {{0}};
    int rc = 0;
    const int ntasks = ca->full ? CMP_N_FULL : 1;
    for (int t = 0; !rc && t < ntasks; t++) {
        cmp_task *tk = &a->T[a->nt];
        tr_options o;
        tr_options_default(&o);
        if (ca->full) {
            if (set_pairs(&o, CMP_FULL[t].opts, &err) || (ca->quick && set_pairs(&o, CMP_FULL_QUICK, &err))) {
                rc = cli_fail("compare: the budget of %s: %s", CMP_FULL[t].name, err.msg);
                break;
            }
            if (ca->quick) { /* short sequences, a score over two lengths, a layer for each of a hybrid's */
                tr_options_set(&o, "length", strcmp(o.task, "lm") ? "4" : "16", &err);
                if (o.score_lengths[0]) tr_options_set(&o, "score-lengths", "5-6", &err);
                char ly[16];
                const int hl = cmp_hybrid_layers(CMP_FULL[t].methods);
                snprintf(ly, sizeof ly, "%d", hl);
                if (hl > o.layers) tr_options_set(&o, "layers", ly, &err);
            }
            tk->why = ca->quick ? "--quick: a smoke test's budget" : CMP_FULL[t].why;
            snprintf(tk->stem, sizeof tk->stem, "%s", CMP_FULL[t].name);
        } else {
            if (ca->quick) { /* before the command line's options, which override it */
                const char *q[][2] = {{"length", "32"}, {"steps", "60"}, {"batch", "8"}, {"eval-tokens", "1024"},
                                      {"corpus-chars", "200000"}};
                for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) tr_options_set(&o, q[i][0], q[i][1], &err);
            }
            tk->why = "";
            snprintf(tk->stem, sizeof tk->stem, "compare");
        }
        tk->seeds = ca->seeds ? (int)ca->seeds : ca->full && CMP_FULL[t].seeds && !ca->quick ? CMP_FULL[t].seeds : a->seeds;
        for (int i = 0; !rc && i < r->n_keys; i++)
            if (tr_options_set(&o, r->keys[i], r->vals[i], &err)) rc = cli_fail("compare: %s", err.msg);
        if (rc) break;
        /* the variants: every method the trainer supports, in the library's order, or the
         * list; then (--full) the task's own variants whose method is in it */
        char why[256];
        const int slots = tr_options_slots(&o);
        if (ca->full && CMP_FULL[t].methods) { /* the task's own, less those --methods leaves out */
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", CMP_FULL[t].methods);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save))
                if (in_list(ca->methods, tok) && add_variant(tk->V, &tk->nv, tok, slots, why, sizeof why))
                    rc = cli_fail("compare: %s: %s", CMP_FULL[t].name, why);
        } else if (!strcmp(ca->methods, "all")) {
            for (int m = 0; m < PE_METHOD_COUNT; m++) {
                const char *name = pe_method_name(m);
                if (add_variant(tk->V, &tk->nv, name, slots, why, sizeof why)) {
                    if (t == 0) snprintf(skipped + strlen(skipped), skipped_n - strlen(skipped), "  skipped %s\n", why);
                    continue;
                }
                if (!strcmp(name, "sinusoidal")) add_variant(tk->V, &tk->nv, "sinusoidal+shape", slots, why, sizeof why);
            }
        } else {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", ca->methods);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save))
                if (add_variant(tk->V, &tk->nv, tok, slots, why, sizeof why)) rc = cli_fail("compare: --methods: %s", why);
        }
        if (!rc && ca->full && CMP_FULL[t].variants) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", CMP_FULL[t].variants);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
                char base[48];
                snprintf(base, sizeof base, "%.*s", (int)strcspn(tok, "+"), tok);
                if (cmp_find(tk, base) >= 0 && cmp_find(tk, tok) < 0 && add_variant(tk->V, &tk->nv, tok, slots, why, sizeof why))
                    rc = cli_fail("compare: %s", why);
            }
        }
        if (!rc && !tk->nv && ca->full && CMP_FULL[t].methods) continue; /* --methods left none of its own */
        if (!rc && !tk->nv) rc = cli_fail("compare: no method to train");
        if (!rc) rc = task_setup(tk, &o, ca->shape_k, ca->random_n ? ca->random_n : ca->full ? CMP_FULL[t].random_n : 0);
        if (!rc) a->nt++; /* free_all frees it from here */
        for (int v = 0; !rc && v < tk->nv; v++) { /* every variant's options whole, before any run */
            const tr_options ro = cmp_run_options(tk, &(cmp_job){.v = v, .seed = 1});
            if (tr_options_check(&ro, &err)) rc = cli_fail("compare: %s: %s", tk->V[v].name, err.msg);
        }
    }
    return rc;
}

/* The options together, before any work; the shard (--shard, else the environment's unless
 * merging) into *shard. 0 or 2 after the message. */
static int check_args(const compare_args *ca, const arg_res *r, cmp_shard *shard) {
    pe_err err = {{0}};
    int rc = cli_train_keys(&ARGS_COMPARE, r);
    *shard = (cmp_shard){0};
    if (!rc && ca->full && ca->readme && !ca->results)
        rc = cli_fail("compare: --full --readme writes the verdicts of the results page: it needs --results");
    if (!rc && !ca->full && ca->results) rc = cli_fail("compare: --results needs --full");
    for (int i = 0; !rc && i < r->n_keys; i++) {
        const char *k = r->keys[i];
        if (!strcmp(k, "method") || !strcmp(k, "seed") || !strcmp(k, "shape"))
            rc = cli_fail("compare: --%s is chosen per run; use --methods, --seeds, --shape-k", k);
        else if (ca->full && !strcmp(k, "task")) rc = cli_fail("compare: --full runs every task; --task is for one");
        else if (!tr_options_known(k)) rc = cli_fail("compare: unknown option --%s", k);
    }
    if (!rc && ca->merge.n && ca->shard) rc = cli_fail("compare: --merge builds the outputs of the shards; --shard runs one");
    if (!rc && ca->merge.n && ca->estimate) rc = cli_fail("compare: --merge trains nothing: --estimate has nothing to time");
    if (!rc && ca->shard) rc = cmp_shard_parse(ca->shard, shard);
    else if (!rc && !ca->merge.n) rc = cmp_shard_from_env(shard);
    if (!rc && shard->n && (ca->readme || ca->results))
        rc = cli_fail("compare: %s: a shard writes run files, not tables: --%s goes to --merge", shard->from,
                      ca->readme ? "readme" : "results");
    /* the README's block must be there before the runs, not found missing after them */
    if (!rc && ca->readme && cli_readme_block("compare", ca->readme, ca->full ? "results" : "compare", NULL)) rc = 2;
    if (!rc && ca->results) { /* and the results page writable; in --out, which is then made now */
        const char *slash = strrchr(ca->results, '/');
        size_t nd = slash ? (size_t)(slash - ca->results) : 0, no = strlen(ca->out);
        while (no > 1 && ca->out[no - 1] == '/') no--;
        if (nd && nd == no && !strncmp(ca->results, ca->out, nd) && !ca->estimate && mkdir(ca->out, 0777) && errno != EEXIST)
            rc = cli_fail("compare: --out: cannot create '%s': %s", ca->out, strerror(errno));
    }
    if (!rc && ca->results) {
        pe_out po;
        if (pe_out_open(&po, ca->results, &err)) rc = cli_fail("compare: --results: %s", err.msg);
        else pe_out_abort(&po);
    }
    return rc;
}

/* The runs: every variant of every task with seeds 1..N, variant-major; -1: out of memory. */
static int build_jobs(cmp_all *a) {
    for (int t = 0; t < a->nt; t++) a->T[t].first_job = a->njobs, a->njobs += a->T[t].nv * a->T[t].seeds;
    a->J = calloc((size_t)(a->njobs ? a->njobs : 1), sizeof(cmp_job));
    if (!a->J) return -1;
    for (int t = 0; t < a->nt; t++)
        for (int j = 0; j < a->T[t].nv * a->T[t].seeds; j++) {
            cmp_job *jb = &a->J[a->T[t].first_job + j];
            jb->t = t, jb->v = j / a->T[t].seeds, jb->seed = 1 + j % a->T[t].seeds, jb->score = NAN;
        }
    return cmp_fingerprint(a);
}

/* A shard's runs to do (todo[j]): its share (shard_of), less those whose files are in out;
 * *mine and *done count them. 0 or 2. */
static int shard_todo(cmp_all *a, const char *out, int *shard_of, unsigned char *todo, int *mine, int *done) {
    unsigned char *have = calloc((size_t)a->njobs + 1, 1);
    if (!have || cmp_partition(a, a->shard.n, shard_of)) return free(have), cli_fail("compare: out of memory");
    int rc = cmp_runs_read(a, out, 0, have);
    *mine = *done = 0;
    for (int j = 0; j < a->njobs; j++) {
        const int in = shard_of[j] == a->shard.k;
        *mine += in, *done += in && have[j];
        todo[j] = in && !have[j];
    }
    free(have);
    return rc;
}

/* --merge: every run's result from the folders' run files; 0 or 2. */
static int merge_runs(cmp_all *a, const arg_list *dirs) {
    unsigned char *have = calloc((size_t)a->njobs + 1, 1);
    if (!have) return cli_fail("compare: out of memory");
    int rc = 0;
    for (int i = 0; i < dirs->n && !rc; i++) rc = cmp_runs_read(a, dirs->v[i], 1, have);
    if (!rc) rc = cmp_merge_finish(a, have);
    free(have);
    return rc;
}

static void print_plan(const cmp_all *a, const char *skipped) {
    if (a->full) {
        printf("posenc compare --full: %d tasks, %d runs, %d at a time, BLAS core %s\n", a->nt, a->njobs, a->jobs,
               tr_env_blas_core());
        for (int t = 0; t < a->nt; t++) {
            const tr_options *b = &a->T[t].base;
            printf("  %-16s %2d variants x %d seed%s, length %lld, %lld steps x %lld, %lld layers x %lld wide, %lld heads\n",
                   a->T[t].stem, a->T[t].nv, a->T[t].seeds, a->T[t].seeds > 1 ? "s" : "", (long long)b->length,
                   (long long)b->steps, (long long)b->batch, (long long)b->layers, (long long)b->width, (long long)b->heads);
        }
        printf("%s", skipped);
    } else {
        const tr_options *b = &a->T[0].base;
        printf("posenc compare: %d methods x %d seeds on %s (training length %lld), %lld steps of %lld sequences each,\n"
               "  %lld layers x %lld wide, %lld heads; evaluation at", a->T[0].nv, a->seeds, b->text[0] ? b->text : b->task,
               (long long)b->length, (long long)b->steps, (long long)b->batch, (long long)b->layers, (long long)b->width,
               (long long)b->heads);
        for (int k = 0; k < b->n_eval; k++) printf(" %lldx", (long long)b->eval[k]);
        printf("; %d runs at a time, BLAS core %s\n%s", a->jobs, tr_env_blas_core(), skipped);
    }
}

/* Runs this process's runs (every one, or a shard's) and writes what it writes: the outputs,
 * or a shard's run files. Returns the exit status. */
static int run_and_write(cmp_all *a, const compare_args *ca, int jobs, const char *skipped) {
    const char *out = ca->out;
    int *shard_of = calloc((size_t)a->njobs + 1, sizeof(int)), mine = a->njobs, done = 0, rc = 0;
    unsigned char *todo = malloc((size_t)a->njobs + 1);
    if (!shard_of || !todo) rc = cli_fail("compare: out of memory");
    else if (a->shard.n) rc = shard_todo(a, out, shard_of, todo, &mine, &done);
    else memset(todo, 1, (size_t)a->njobs);
    if (!rc && a->shard.n && !ca->estimate && mkdir(out, 0777) && errno != EEXIST)
        rc = cli_fail("compare: --out: cannot create '%s': %s", out, strerror(errno));
    if (rc) return free(shard_of), free(todo), rc;
    a->jobs = jobs > mine - done ? mine - done : jobs;
    a->jobs = a->jobs < 1 ? 1 : a->jobs;
    print_plan(a, skipped);
    if (a->shard.n)
        printf("shard %d/%d (%s): %d of the %d runs, %d of them done already%s%s\n", a->shard.k, a->shard.n, a->shard.from,
               mine, a->njobs, done, ca->estimate ? "" : "; run files into ", ca->estimate ? "" : out);
    fflush(stdout);
    tr_env_setup(1);
    cmp_pool p = {.todo = todo, .shard_of = shard_of, .save = a->shard.n ? out : NULL, .quiet = ca->quiet,
                  .estimate_only = ca->estimate};
    cmp_run_jobs(a, &p);
    if (ca->estimate) return free(shard_of), free(todo), 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    a->cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    if (a->shard.n) {
        const int failures = cmp_report_failures(a, todo);
        char tot[32];
        tr_format_time(tot, sizeof tot, a->elapsed);
        printf("\nshard %d/%d: %d runs in %s%s; with every shard's files, posenc compare --merge DIR ... builds the "
               "outputs\n", a->shard.k, a->shard.n, p.runs, tot, failures ? "; some failed, see above" : "");
        rc = p.save_failed ? 2 : failures ? 1 : 0;
    } else if (cmp_runs_roundtrip(a)) rc = cli_fail("compare: out of memory");
    else rc = cmp_outputs(a, out, ca->readme, ca->results);
    free(shard_of), free(todo);
    return rc;
}

int cli_compare(int argc, char **argv) {
    compare_args ca;
    arg_res r;
    ARGS_COMPARE.init(&ca);
    int rc = arg_parse(&ARGS_COMPARE, argc, argv, &ca, &r);
    if (rc < 0) tr_options_help();
    if (rc) return rc < 0 ? 0 : rc;
    cmp_shard shard;
    if ((rc = check_args(&ca, &r, &shard))) {
        arg_free(&r);
        return rc;
    }
    tr_env_select("compare", argc, argv);

    cmp_all *a = calloc(1, sizeof *a);
    if (!a) {
        arg_free(&r);
        return cli_fail("compare: out of memory");
    }
    a->seeds = ca.seeds ? (int)ca.seeds : ca.quick ? 1 : 3, a->quick = ca.quick, a->full = ca.full, a->shard = shard;
    for (int i = 0, n = 0; i < argc && n < (int)sizeof a->command - 1; i++)
        n += snprintf(a->command + n, sizeof a->command - (size_t)n, "%s%s", i ? " " : "", argv[i]);
    char skipped[2048] = "";
    rc = build_tasks(a, &ca, &r, skipped, sizeof skipped);
    arg_free(&r);
    if (!rc && build_jobs(a)) rc = cli_fail("compare: out of memory");
    if (!rc && ca.merge.n) {
        if (!(rc = merge_runs(a, &ca.merge))) rc = cmp_outputs(a, ca.out, ca.readme, ca.results);
    } else if (!rc) {
        int jobs = (int)ca.jobs;
#ifdef _OPENMP
        if (!jobs) jobs = omp_get_num_procs();
#else
        jobs = 1;
#endif
        rc = run_and_write(a, &ca, jobs, skipped);
    }
    free_all(a);
    return rc;
}
