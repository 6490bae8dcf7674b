/* posenc compare on several machines: --shard K/N runs the K-th of N disjoint shares of the
 * runs and writes one run file per run; --merge reads the files of every shard and builds the
 * outputs (compare.h). The shares come from a cost model of each run's sizes, not from timings,
 * so that every machine computes the same partition from the same command line. A run file
 * carries the fingerprint of its task's settings: a file of another budget, seeds, task or
 * posenc version is refused by name, never mixed in. Only its own task's: a task added to
 * --full, or a method to a task, leaves the other runs' files good, so a long experiment can
 * be run shard by shard while it grows.
 *
 * A run file, DIR/TASK.VARIANT.seedS.run, is text, one field a line, in this order:
 *   posenc-compare-run 2
 *   version posenc 0.1.0        (CMP_RUN_VERSION)
 *   settings HEX                 its task's fingerprint
 *   run HEX                      the run's own (its options, variant and seed)
 *   name TASK.VARIANT.seedS
 *   status ok | failed
 *   seconds, tokens_per_s, final_loss, cpu_seconds, started, ended   (%.17g: read back exactly)
 *   shard K/N, jobs J, blas CORE, machine CPU MODEL
 *   eval MULT N LOSS BPC TOKEN_ACC EXACT TOKENS SEQS   (one per evaluation length)
 *   score X                      --score-lengths' score (nan: none asked)
 *   error TEXT                   (failed runs)
 *   end */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../tools/output.h"
#include "../train/env.h"
#include "cli.h"
#include "compare.h"

#define CMP_RUN_HEADER "posenc-compare-run 2"
/* what else must match: the library's and trainer's version (a run file of another release may
 * hold other numbers for the same settings) */
#define CMP_RUN_VERSION "posenc " PE_VERSION
#define CMP_MAX_SHARDS (1 << 20)
#define RUN_FILE_MAX (1 << 20)

/* ---- which shard --------------------------------------------------------------------------- */

/* A whole number 0 .. hi from text, or -1. */
static long long whole(const char *text, long long hi) {
    char *end;
    errno = 0;
    long long v = text && *text ? strtoll(text, &end, 10) : -1;
    return !text || !*text || *end || errno || v < 0 || v > hi ? -1 : v;
}

int cmp_shard_parse(const char *text, cmp_shard *s) {
    char k[32], n[32];
    const char *slash = strchr(text, '/');
    size_t kl = slash ? (size_t)(slash - text) : 0;
    if (!slash || kl >= sizeof k || strlen(slash + 1) >= sizeof n)
        return cli_fail("compare: --shard '%s': not K/N (the K-th of N shares, K from 0 to N-1)", text);
    snprintf(k, sizeof k, "%.*s", (int)kl, text);
    snprintf(n, sizeof n, "%s", slash + 1);
    long long kv = whole(k, CMP_MAX_SHARDS), nv = whole(n, CMP_MAX_SHARDS);
    if (kv < 0 || nv < 0)
        return cli_fail("compare: --shard '%s': not K/N with whole numbers (the K-th of N shares, K from 0 to N-1)", text);
    if (nv < 1) return cli_fail("compare: --shard '%s': N must be at least 1", text);
    if (kv >= nv) return cli_fail("compare: --shard '%s': K must be in 0 .. %lld", text, nv - 1);
    *s = (cmp_shard){.k = (int)kv, .n = (int)nv};
    snprintf(s->from, sizeof s->from, "--shard");
    return 0;
}

/* The environment's value of name as a whole number in lo .. CMP_MAX_SHARDS (*v), 1 when unset
 * or empty, 2 after the message. */
static int env_int(const char *name, long long lo, long long *v) {
    const char *s = getenv(name);
    if (!s || !*s) return 1;
    *v = whole(s, CMP_MAX_SHARDS);
    if (*v < lo)
        return cli_fail("compare: %s='%s' is not a whole number in %lld .. %d (the shard, without --shard)", name, s, lo,
                        CMP_MAX_SHARDS);
    return 0;
}

int cmp_shard_from_env(cmp_shard *s) {
    static const char *const pairs[][2] = {{"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"},
                                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                           {"PMI_RANK", "PMI_SIZE"}};
    *s = (cmp_shard){0};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        const char *kn = pairs[p][0], *nn = pairs[p][1];
        const char *ks = getenv(kn), *ns = getenv(nn);
        if (!ks || !*ks || !ns || !*ns) continue; /* a pair counts only when both are set */
        long long k, n, min = 0, step = 1;
        int rc;
        if ((rc = env_int(kn, 0, &k)) == 2 || (rc = env_int(nn, 1, &n)) == 2) return 2;
        if (!p) { /* an array --array=1-3 numbers its tasks from 1; --array=0-10:2 steps by 2 */
            if ((rc = env_int("SLURM_ARRAY_TASK_MIN", 0, &min)) == 2 || (rc = env_int("SLURM_ARRAY_TASK_STEP", 1, &step)) == 2)
                return 2;
            if (k < min || (k - min) % step)
                return cli_fail("compare: SLURM_ARRAY_TASK_ID=%lld is not SLURM_ARRAY_TASK_MIN=%lld plus a multiple of "
                                "SLURM_ARRAY_TASK_STEP=%lld", k, min, step);
            k = (k - min) / step;
        }
        if (k >= n)
            return cli_fail("compare: %s=%s%s is not below %s=%lld (the shard, without --shard)", kn, ks,
                            p || !min ? "" : " (less SLURM_ARRAY_TASK_MIN)", nn, n);
        if (n == 1) return 0; /* one process of one: every run, as without the environment */
        *s = (cmp_shard){.k = (int)k, .n = (int)n};
        snprintf(s->from, sizeof s->from, "%s/%s", kn, nn);
        return 0;
    }
    return 0;
}

/* ---- fingerprints ------------------------------------------------------------------------ */

/* FNV-1a, 64 bits: enough to tell settings apart (nothing here is adversarial) */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}
static uint64_t fnv_str(uint64_t h, const char *s) { return fnv(h, s, strlen(s) + 1); }
static uint64_t fnv_int(uint64_t h, long long v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    return fnv_str(h, b);
}

enum { MAX_LIST = 128 };

/* Every option of o by name and value (tr_options_list's text) but those at posenc train's
 * default: an option the trainer gains later, at its default, trains what the runs before it
 * trained, and leaves their fingerprints as they were. (A changed default is a new version.) */
static uint64_t fnv_options(uint64_t h, const tr_options *o, char (*names)[40], char (*values)[520]) {
    static char dn[MAX_LIST][40], dv[MAX_LIST][520];
    static int nd = -1;
    if (nd < 0) { /* once, before the pool's threads */
        tr_options d;
        tr_options_default(&d);
        nd = tr_options_list(&d, dn, dv, MAX_LIST);
    }
    int n = tr_options_list(o, names, values, MAX_LIST);
    for (int i = 0; i < n; i++)
        if (i >= nd || strcmp(names[i], dn[i]) || strcmp(values[i], dv[i])) h = fnv_str(fnv_str(h, names[i]), values[i]);
    return h;
}

int cmp_fingerprint(cmp_all *a) {
    char (*names)[40] = malloc(MAX_LIST * sizeof *names);
    char (*values)[520] = malloc(MAX_LIST * sizeof *values);
    if (!names || !values) return free(names), free(values), -1;
    /* a task: the version, the mode, its resolved options and data, its seeds; not the other
     * tasks nor its variant list, which a run's result does not depend on */
    const uint64_t h0 = fnv_int(fnv_int(fnv_str(0xcbf29ce484222325ULL, CMP_RUN_VERSION), a->quick), a->full);
    for (int t = 0; t < a->nt; t++) {
        cmp_task *tk = &a->T[t];
        uint64_t h = fnv_options(fnv_str(h0, tk->stem), &tk->base, names, values);
        h = fnv_int(fnv_int(fnv_int(h, tk->shape_k), tk->random_n), tk->seeds);
        h = fnv_int(fnv_int(fnv_int(h, tk->task.kind), tk->task.L), tk->task.V);
        h = fnv(h, tk->task.chars, sizeof tk->task.chars);
        if (tk->task.train) h = fnv(h, tk->task.train, (size_t)tk->task.n_train); /* --text: the file's bytes */
        if (tk->task.eval) h = fnv(h, tk->task.eval, (size_t)tk->task.n_eval);
        tk->fp = h;
    }
    /* a run: its task's, then its own options, variant and seed */
    for (int j = 0; j < a->njobs; j++) {
        cmp_job *jb = &a->J[j];
        const tr_options ro = cmp_run_options(&a->T[jb->t], jb);
        jb->fp = fnv_int(fnv_str(fnv_options(a->T[jb->t].fp, &ro, names, values), a->T[jb->t].V[jb->v].name), jb->seed);
    }
    free(names), free(values);
    return 0;
}

void cmp_run_name(const cmp_all *a, int j, char *buf, size_t n) {
    const cmp_job *jb = &a->J[j];
    snprintf(buf, n, "%s.%s.seed%d", cmp_task_name(a, &a->T[jb->t]), a->T[jb->t].V[jb->v].name, jb->seed);
}

/* ---- the partition ----------------------------------------------------------------------- */

static uint64_t sat_mul(uint64_t x, uint64_t y) {
    uint64_t r;
    return __builtin_mul_overflow(x, y, &r) ? UINT64_MAX : r;
}
static uint64_t sat_add(uint64_t x, uint64_t y) { return x + y < x ? UINT64_MAX : x + y; }
static uint64_t pos(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

/* Multiply-adds per token and layer at sequence length T: the projections and the MLP, the
 * output layer, and attention over about T/2 keys (x4 for a method without the fused path,
 * whose T x T scores the reference path keeps in memory) */
static uint64_t per_token(const tr_options *o, const tr_task *task, uint64_t T, int fused) {
    const uint64_t W = pos(o->width);
    uint64_t c = sat_add(sat_mul(4 * W, W), sat_mul(2 * W, pos(o->mlp)));
    c = sat_add(c, sat_mul(W, pos(task->V)));
    return sat_add(c, sat_mul(sat_mul(T, W), fused ? 1 : 4));
}

/* The cost of run j in multiply-adds from its sizes alone, integers only, so that every
 * machine gets the same number: training (backward about twice the forward) and evaluation.
 * It only ranks and balances the runs; the timed steps of --estimate say how long they take.
 * FLOATER solves its ODE per layer (1.5x), and anew for every draw of randomized positions
 * (10x, the budgets' note in compare.c). */
static uint64_t model_cost(const cmp_all *a, int j) {
    const cmp_job *jb = &a->J[j];
    const cmp_task *t = &a->T[jb->t];
    const tr_options o = cmp_run_options(t, jb);
    pe_method_info info;
    const int m = pe_method_from_name(o.method);
    const int fused = m >= 0 && !pe_method_describe(m, &info, NULL) && info.fused;
    const uint64_t T = pos(tr_task_seq_len(&t->task, o.length));
    uint64_t c = sat_mul(sat_mul(sat_mul(3 * pos(o.steps), pos(o.batch)), T), per_token(&o, &t->task, T, fused));
    for (int k = 0; k < o.n_eval; k++) {
        const uint64_t Tk = pos(tr_task_seq_len(&t->task, o.eval[k] * o.length));
        c = sat_add(c, sat_mul(pos(o.eval_tokens), per_token(&o, &t->task, Tk, fused)));
    }
    c = sat_mul(c, pos(o.layers));
    if (!strcmp(o.method, "floater")) c = o.random_positions ? sat_mul(c, 10) : sat_add(c, c / 2);
    return c;
}

typedef struct ranked {
    uint64_t cost;
    char name[128];
    int j;
} ranked;

/* costliest first; equal costs by name, which every machine orders alike */
static int by_cost(const void *x, const void *y) {
    const ranked *p = x, *q = y;
    if (p->cost != q->cost) return p->cost > q->cost ? -1 : 1;
    return strcmp(p->name, q->name);
}

int cmp_partition(const cmp_all *a, int n, int *shard_of) {
    ranked *r = malloc(sizeof(ranked) * (size_t)(a->njobs ? a->njobs : 1));
    uint64_t *load = calloc((size_t)n, sizeof(uint64_t));
    if (!r || !load) return free(r), free(load), -1;
    for (int j = 0; j < a->njobs; j++) {
        r[j].cost = model_cost(a, j), r[j].j = j;
        cmp_run_name(a, j, r[j].name, sizeof r[j].name);
    }
    qsort(r, (size_t)a->njobs, sizeof *r, by_cost);
    /* greedy: each run to the least loaded shard, the lowest index among equals */
    for (int i = 0; i < a->njobs; i++) {
        int best = 0;
        for (int s = 1; s < n; s++)
            if (load[s] < load[best]) best = s;
        shard_of[r[i].j] = best;
        load[best] = sat_add(load[best], r[i].cost);
    }
    free(r), free(load);
    return 0;
}

/* ---- run files --------------------------------------------------------------------------- */

/* The text of run j's file (malloc'd), NULL when out of memory. */
static char *run_format(const cmp_all *a, int j) {
    const cmp_job *jb = &a->J[j];
    const tr_options *b = &a->T[jb->t].base;
    char *s = NULL, name[128], err[sizeof jb->err];
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) return NULL;
    cmp_run_name(a, j, name, sizeof name);
    fprintf(f, "%s\nversion %s\nsettings %016" PRIx64 "\nrun %016" PRIx64 "\nname %s\nstatus %s\n", CMP_RUN_HEADER,
            CMP_RUN_VERSION, a->T[jb->t].fp, jb->fp, name, jb->failed ? "failed" : "ok");
    fprintf(f, "seconds %.17g\ntokens_per_s %.17g\nfinal_loss %.17g\ncpu_seconds %.17g\nstarted %.17g\nended %.17g\n",
            jb->seconds, jb->tok_per_s, jb->final_loss, jb->cpu, jb->wall_start, jb->wall_end);
    fprintf(f, "shard %d/%d\njobs %d\nblas %s\nmachine %s\n", jb->shard_k, jb->shard_n, jb->jobs, tr_env_blas_core(),
            jb->machine[0] ? jb->machine : "unknown CPU");
    for (int k = 0; k < b->n_eval; k++) {
        const tr_metrics *m = &jb->m[k];
        fprintf(f, "eval %lld %lld %.17g %.17g %.17g %.17g %lld %lld\n", (long long)b->eval[k], (long long)m->n, m->loss,
                m->bpc, m->token_acc, m->exact, (long long)m->tokens, (long long)m->seqs);
    }
    fprintf(f, "score %.17g\n", jb->score);
    pe_one_line(err, sizeof err, jb->err);
    if (jb->failed) fprintf(f, "error %s\n", err);
    fprintf(f, "end\n");
    if (fclose(f)) return free(s), NULL;
    return s;
}

/* The next line of *p, cut at its newline, if it starts with "KEY " (or is "KEY"): its value
 * (after the space), else NULL. */
static char *field(char **p, const char *key) {
    char *line = *p, *nl = strchr(line, '\n');
    if (!nl) return NULL;
    *nl = 0;
    *p = nl + 1;
    const size_t kl = strlen(key);
    if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl])) return NULL;
    return line[kl] ? line + kl + 1 : line + kl;
}

static int num(char **p, const char *key, double *x) {
    const char *v = field(p, key);
    char *end;
    if (!v || !*v) return -1;
    *x = strtod(v, &end);
    return *end ? -1 : 0;
}

/* What a run file says: its fingerprints and name; the rest into jb. The message of what is
 * wrong into why. 0 read whole, 1 not a run file of this version or settings (fps read), -1
 * malformed. text is cut into lines. */
typedef struct run_head {
    uint64_t settings, run;
    char version[64], name[128];
} run_head;

static int run_parse(char *text, int n_eval, run_head *h, cmp_job *jb, char *why, size_t wn) {
    char *p = text, *v;
    memset(h, 0, sizeof *h);
    if (!(v = field(&p, CMP_RUN_HEADER)) || *v) return snprintf(why, wn, "not a run file of posenc compare"), -1;
    if (!(v = field(&p, "version"))) return snprintf(why, wn, "no version line"), -1;
    snprintf(h->version, sizeof h->version, "%s", v);
    if (!(v = field(&p, "settings")) || sscanf(v, "%" SCNx64, &h->settings) != 1)
        return h->version[0] = 0, snprintf(why, wn, "no settings line"), -1; /* no settings: not a run file */
    if (!(v = field(&p, "run")) || sscanf(v, "%" SCNx64, &h->run) != 1) return snprintf(why, wn, "no run line"), -1;
    if (!(v = field(&p, "name"))) return snprintf(why, wn, "no name line"), -1;
    snprintf(h->name, sizeof h->name, "%s", v);
    if (strcmp(h->version, CMP_RUN_VERSION)) return 1;
    if (!(v = field(&p, "status")) || (strcmp(v, "ok") && strcmp(v, "failed")))
        return snprintf(why, wn, "no status line"), -1;
    jb->failed = !strcmp(v, "failed");
    if (num(&p, "seconds", &jb->seconds) || num(&p, "tokens_per_s", &jb->tok_per_s) ||
        num(&p, "final_loss", &jb->final_loss) || num(&p, "cpu_seconds", &jb->cpu) ||
        num(&p, "started", &jb->wall_start) || num(&p, "ended", &jb->wall_end))
        return snprintf(why, wn, "a time or the loss is missing or not a number"), -1;
    if (!(v = field(&p, "shard")) || sscanf(v, "%d/%d", &jb->shard_k, &jb->shard_n) != 2 || !(v = field(&p, "jobs")) ||
        sscanf(v, "%d", &jb->jobs) != 1 || !field(&p, "blas") || !(v = field(&p, "machine")))
        return snprintf(why, wn, "no shard, jobs, blas or machine line"), -1;
    snprintf(jb->machine, sizeof jb->machine, "%s", v);
    for (int k = 0; k < n_eval; k++) {
        tr_metrics *m = &jb->m[k];
        long long mult, n, tok, seqs;
        int used = 0;
        if (!(v = field(&p, "eval")) || sscanf(v, "%lld %lld %lf %lf %lf %lf %lld %lld%n", &mult, &n, &m->loss, &m->bpc,
                                               &m->token_acc, &m->exact, &tok, &seqs, &used) != 8 || v[used])
            return snprintf(why, wn, "evaluation %d of %d is missing or malformed", k + 1, n_eval), -1;
        m->n = n, m->tokens = tok, m->seqs = seqs;
    }
    if (num(&p, "score", &jb->score)) return snprintf(why, wn, "no score line"), -1;
    jb->err[0] = 0;
    if (jb->failed) {
        if (!(v = field(&p, "error"))) return snprintf(why, wn, "a failed run without its error"), -1;
        snprintf(jb->err, sizeof jb->err, "%s", v);
    }
    if (!(v = field(&p, "end")) || *v || *p) return snprintf(why, wn, "cut short or with more after its end line"), -1;
    return 0;
}

int cmp_run_save(const cmp_all *a, int j, const char *dir) {
    char path[1200], name[128];
    pe_err err = {{0}};
    cmp_run_name(a, j, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s.run", dir, name);
    char *text = run_format(a, j);
    if (!text) return cli_fail("compare: %s: out of memory", path);
    pe_out po;
    if (pe_out_open(&po, path, &err)) return free(text), cli_fail("compare: %s", err.msg);
    fputs(text, po.fp); /* a failed write shows as the stream's error in the commit */
    free(text);
    if (pe_out_commit(&po, &err)) return cli_fail("compare: %s", err.msg);
    return 0;
}

int cmp_runs_roundtrip(cmp_all *a) {
    for (int j = 0; j < a->njobs; j++) {
        char *text = run_format(a, j), why[160];
        cmp_job back = a->J[j];
        run_head h;
        int rc = text ? run_parse(text, a->T[a->J[j].t].base.n_eval, &h, &back, why, sizeof why) : -1;
        free(text);
        if (rc) return -1;
        a->J[j] = back;
    }
    return 0;
}

/* The run of this comparison named name, -1 when none is. */
static int job_named(const cmp_all *a, const char *name) {
    char n[128];
    for (int j = 0; j < a->njobs; j++) {
        cmp_run_name(a, j, n, sizeof n);
        if (!strcmp(n, name)) return j;
    }
    return -1;
}

static int by_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The names of dir's *.run files, sorted (malloc'd, *n of them), NULL on error (errno). */
static char **run_files(const char *dir, int *n) {
    DIR *d = opendir(dir);
    char **names = NULL;
    int cap = 0;
    *n = 0;
    if (!d) return NULL;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || e->d_name[0] == '.' || strcmp(e->d_name + l - 4, ".run")) continue; /* not pe_out's temporaries */
        char **g = *n < cap ? names : realloc(names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 64));
        if (!g || !(g[*n] = strdup(e->d_name))) {
            for (int i = 0; i < *n; i++) free((g ? g : names)[i]);
            free(g ? g : names), closedir(d);
            errno = ENOMEM;
            return NULL;
        }
        names = g, ++*n;
    }
    closedir(d);
    if (!names) names = malloc(sizeof(char *));
    if (names) qsort(names, (size_t)*n, sizeof(char *), by_name);
    return names;
}

/* One file of dir: refused (2), a run of this comparison (its result into a->J with merge,
 * done[j] set), or passed over (a file of another name that is no run file; a malformed file
 * of one of ours: merge refuses it, a shard runs it again). */
static int read_one(cmp_all *a, const char *dir, const char *file, int merge, unsigned char *done) {
    char path[1200], why[160] = "";
    pe_err err = {{0}};
    long long size = 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = pe_in_open(path, RUN_FILE_MAX, &size, &err);
    if (!f) return cli_fail("compare: %s", err.msg);
    char *text = malloc((size_t)size + 1);
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!text) return cli_fail("compare: %s: out of memory", path);
    text[got] = 0;
    char own[128];
    snprintf(own, sizeof own, "%.*s", (int)(strlen(file) - 4), file);
    int j = job_named(a, own);
    cmp_job jb = j >= 0 ? a->J[j] : (cmp_job){0};
    run_head h;
    int rc = run_parse(text, j >= 0 ? a->T[jb.t].base.n_eval : 0, &h, &jb, why, sizeof why);
    free(text);
    if (rc < 0 && h.version[0] == 0 && j < 0) return 0; /* not a run file, and no name of ours */
    /* a name of ours is checked against its task's settings, another name against every task's */
    int ours = 0;
    for (int t = 0; t < a->nt; t++) ours |= j >= 0 ? t == jb.t && h.settings == a->T[t].fp : h.settings == a->T[t].fp;
    if (rc == 1 || (h.version[0] && !ours))
        return cli_fail("compare: %s: a run of other settings (%s, settings %016" PRIx64 "; this command: %s%s%016" PRIx64
                        ": another budget, seeds, task or version): refused, never mixed in",
                        path, h.version, h.settings, CMP_RUN_VERSION, j >= 0 ? ", its task's settings " : ", settings ",
                        a->T[j >= 0 ? jb.t : 0].fp);
    if (rc == 0 && (j < 0 || strcmp(h.name, own) || h.run != a->J[j].fp))
        return cli_fail("compare: %s: its name or run fingerprint is not that of a run of this comparison: refused", path);
    if (rc < 0) {
        if (merge) return cli_fail("compare: %s: not a whole run file (%s)", path, why);
        fprintf(stderr, "posenc: compare: %s: not a whole run file (%s)%s\n", path, why, j >= 0 ? ": running it again" : "");
        return 0;
    }
    if (done[j] || (!merge && jb.failed)) return 0; /* another folder's copy, or a failed run to try again */
    if (merge) a->J[j] = jb;
    done[j] = 1;
    return 0;
}

int cmp_runs_read(cmp_all *a, const char *dir, int merge, unsigned char *done) {
    struct stat st;
    if (stat(dir, &st) && errno == ENOENT && !merge) return 0; /* a shard's first start */
    int n = 0, rc = 0;
    char **names = run_files(dir, &n);
    if (!names) return cli_fail("compare: %s: cannot read the folder: %s", dir, strerror(errno));
    for (int i = 0; i < n && !rc; i++) rc = read_one(a, dir, names[i], merge, done);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int cmp_merge_finish(cmp_all *a, const unsigned char *done) {
    int missing = 0;
    char list[1024] = "", name[128];
    for (int j = 0; j < a->njobs; j++) {
        if (done[j]) continue;
        if (++missing <= 8) {
            cmp_run_name(a, j, name, sizeof name);
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", missing > 1 ? ", " : "", name);
        }
    }
    if (missing)
        return cli_fail("compare: --merge: %d of %d runs missing: %s%s (their shards have not finished: run them again)",
                        missing, a->njobs, list, missing > 8 ? ", ..." : "");
    /* the merged shards' time: from the first run's start to the last run's end; CPU time: every
     * run's; runs at a time: each shard's (the most any of its processes ran) added up */
    double first = 0, last = 0;
    a->cpu = 0, a->jobs = 0;
    for (int j = 0; j < a->njobs; j++) {
        const cmp_job *jb = &a->J[j];
        if (!j || jb->wall_start < first) first = jb->wall_start;
        if (!j || jb->wall_end > last) last = jb->wall_end;
        a->cpu += jb->cpu;
        int seen = 0, most = jb->jobs;
        for (int i = 0; i < a->njobs; i++) {
            const cmp_job *x = &a->J[i];
            if (x->shard_k != jb->shard_k || x->shard_n != jb->shard_n) continue;
            if (i < j) seen = 1;
            if (x->jobs > most) most = x->jobs;
        }
        if (!seen) a->jobs += most;
    }
    a->elapsed = last > first ? last - first : 0;
    return 0;
}
