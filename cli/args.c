/* The command-line parser of every subcommand (args.h), and the two helpers every command
 * shares: cli_fail (one line, status 2) and cli_int (a bounded whole number). */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posenc.h"
#include "../tools/output.h"
#include "cli.h"

int cli_silent; /* the fuzzer sets it: messages are made, not printed */

int cli_fail(const char *fmt, ...) {
    char raw[2048], line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    pe_one_line(line, sizeof line, raw);
    if (!cli_silent) fprintf(stderr, "posenc: %s\n", line);
    return 2;
}

int cli_int(const char *flag, const char *text, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || *end || errno || v < lo || v > hi)
        return cli_fail("%s: '%s' is not a whole number in %lld .. %lld", flag, text ? text : "", lo, hi);
    *out = v;
    return 0;
}

/* ---- names ----------------------------------------------------------------------------------- */

/* Whether word is one of the space-separated words of list. */
static int has_word(const char *list, const char *word, size_t n) {
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        if (len && len == n && !strncmp(p, word, n)) return 1;
        p += len;
    }
    return 0;
}

/* A one-letter name with a long alias is a short option: -o, --output. Every other name,
 * --q included, and every alias take two dashes. */
static int is_short(const arg_opt *o) { return !o->name[1] && o->alias; }
static const char *dash(const arg_opt *o) { return is_short(o) ? "-" : "--"; }

/* The option that arg ("--length", "-o") names, by its name or an alias. */
static const arg_opt *find_opt(const arg_cmd *c, const char *arg) {
    if (arg[0] != '-' || !arg[1]) return NULL;
    const int dashes = arg[1] == '-' ? 2 : 1;
    const char *w = arg + dashes;
    const size_t n = strlen(w);
    for (const arg_opt *o = c->opts; o && o->name; o++) {
        if (!strcmp(o->name, w) && dashes == (is_short(o) ? 1 : 2)) return o;
        if (dashes == 2 && has_word(o->alias, w, n)) return o;
    }
    return NULL;
}


/* A word counts as near a name within 2 edits (3 for words of 6 letters or more), and never
 * when the edits would rewrite most of the name. */
static int near(const char *word, const char *name, int *best) {
    const int d = pe_edit_distance(word, name), len = (int)strlen(name);
    const int limit = strlen(word) >= 6 ? 3 : 2;
    if (d > limit || d >= len || d >= *best) return 0;
    *best = d;
    return 1;
}

const char *arg_nearest(const char *word, const char *(*names)(int)) {
    const char *found = NULL;
    int best = 99;
    for (int i = 0; names && names(i); i++)
        if (near(word, names(i), &best)) found = names(i);
    return found;
}

int arg_unknown(const arg_cmd *c, const char *word, const char *(*extra)(int)) {
    const char *w = word + strspn(word, "-"), *found = NULL, *pre = "--";
    int best = 99;
    for (const arg_opt *o = c->opts; o && o->name; o++) {
        if (near(w, o->name, &best)) found = o->name, pre = dash(o);
        if (is_short(o) && near(w, o->alias, &best)) found = o->alias, pre = "--"; /* -o, --output */
    }
    if (near(w, "help", &best)) found = "help", pre = "--"; /* the option every command has */
    for (int i = 0; extra && extra(i); i++)
        if (near(w, extra(i), &best)) found = extra(i), pre = "--";
    if (found) return cli_fail("%s: unknown option '%s' (did you mean %s%s?)", c->name, word, pre, found);
    return cli_fail("%s: unknown option '%s' (posenc %s --help lists the options)", c->name, word, c->name);
}

static const char *method_name_of(int i) { return i < PE_METHOD_COUNT ? pe_method_name(i) : NULL; }

int arg_method(const char *cmd, const char *flag, const char *name, int *method) {
    *method = pe_method_from_name(name);
    if (*method >= 0) return 0;
    const char *best = arg_nearest(name, method_name_of);
    if (best) return cli_fail("%s: %s: unknown method '%s' (did you mean %s?)", cmd, flag, name, best);
    return cli_fail("%s: %s: unknown method '%s' (posenc methods lists them)", cmd, flag, name);
}

int arg_int_list(const char *cmd, const char *flag, const char *text, long long lo, long long hi, long long *out, int max) {
    char what[128];
    snprintf(what, sizeof what, "%s: %s", cmd, flag);
    int n = 0;
    for (const char *p = text;; n++) {
        const size_t len = strcspn(p, ",");
        if (n == max) {
            cli_fail("%s: at most %d values in '%s'", what, max, text);
            return -1;
        }
        char one[64];
        snprintf(one, sizeof one, "%.*s", len < sizeof one ? (int)len : (int)sizeof one - 1, p);
        if (len >= sizeof one || cli_int(what, one, lo, hi, &out[n])) {
            if (len >= sizeof one) cli_fail("%s: '%.20s...' is not a whole number in %lld .. %lld", what, p, lo, hi);
            return -1;
        }
        if (!p[len]) return n + 1;
        p += len + 1;
    }
}

/* ---- values ---------------------------------------------------------------------------------- */

/* Whether v, the word after an option, is an option itself (so that option has no value): a
 * long option, or one of the command's one-letter ones. "-1" is a value. */
static int is_option(const arg_cmd *c, const char *v) {
    if (v[0] == '-' && v[1] == '-' && v[2]) return 1;
    if (!strcmp(v, "-h")) return 1;
    const arg_opt *o = find_opt(c, v);
    return o && is_short(o);
}

/* Stores value v of option o (spelled as it was on the command line) into opts. */
static int store(const arg_cmd *c, const arg_opt *o, const char *spelled, const char *v, void *opts) {
    char *at = (char *)opts + o->off;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", c->name, spelled);
    switch (o->kind) {
    case ARG_FLAG:
        *(int *)at = 1;
        return 0;
    case ARG_INT:
        return cli_int(what, v, o->lo, o->hi, (long long *)at);
    case ARG_REAL: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x) || x < o->rlo || x > o->rhi) {
            if (o->rhi == HUGE_VAL) return cli_fail("%s: '%s' is not a number >= %g", what, v, o->rlo);
            return cli_fail("%s: '%s' is not a number in [%g, %g]", what, v, o->rlo, o->rhi);
        }
        *(double *)at = x;
        return 0;
    }
    case ARG_ENUM:
        if (!has_word(o->choices, v, strlen(v))) {
            char list[256] = "", *best = NULL;
            int bd = 99;
            char words[256];
            snprintf(words, sizeof words, "%s", o->choices);
            for (char *s = NULL, *w = strtok_r(words, " ", &s); w; w = strtok_r(NULL, " ", &s)) {
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", w);
                if (near(v, w, &bd)) best = w;
            }
            if (best) return cli_fail("%s: '%s' is not one of %s (did you mean %s?)", what, v, list, best);
            return cli_fail("%s: '%s' is not one of %s", what, v, list);
        }
        *(const char **)at = v;
        return 0;
    default:
        *(const char **)at = v;
        return 0;
    }
}

static int is_layer_key(const char *k) {
    for (int i = 0; pe_config_key_name(i); i++)
        if (!strcmp(pe_config_key_name(i), k)) return 1;
    return 0;
}

static void usage_line(const arg_cmd *c, char *buf, size_t n) {
    const char *u = c->usage ? c->usage : "[options]";
    snprintf(buf, n, "usage: posenc %s%s%s", c->name, u[0] ? " " : "", u);
}

/* A required argument or option that is missing. */
static int missing(const arg_cmd *c, const arg_opt *o, int positional) {
    char u[512];
    usage_line(c, u, sizeof u);
    if (positional) return cli_fail("%s: %s is required (%s)", c->name, o->name, u);
    return cli_fail("%s: %s%s %s is required (%s)", c->name, dash(o), o->name, o->meta ? o->meta : "", u);
}

int arg_parse_only(const arg_cmd *c, int argc, char **argv, void *opts, arg_res *r) {
    *r = (arg_res){0};
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
    r->keys = calloc((size_t)argc + 1, sizeof(char *));
    r->vals = calloc((size_t)argc + 1, sizeof(char *));
    if (!r->keys || !r->vals) return arg_free(r), cli_fail("out of memory");
    /* which options were given, for the required ones */
    int n_opts = 0, n_pos = 0, given_pos = 0;
    for (const arg_opt *o = c->opts; o && o->name; o++) n_opts++;
    for (const arg_opt *o = c->pos; o && o->name; o++) n_pos++;
    char *given = calloc((size_t)n_opts + 1, 1);
    if (!given) return arg_free(r), cli_fail("out of memory");
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const arg_opt *o = find_opt(c, a);
        if (o) {
            given[o - c->opts] = 1;
            if (o->kind == ARG_FLAG) {
                rc = store(c, o, a, NULL, opts);
            } else if (o->kind == ARG_LIST && v && !is_option(c, v)) {
                /* the words up to the next option; given again, the later list wins */
                arg_list *l = (arg_list *)((char *)opts + o->off);
                *l = (arg_list){.first = argv[i + 1], .v = argv + i + 1, .n = 0};
                while (i + 1 < argc && !is_option(c, argv[i + 1])) l->n++, i++;
            } else if (!v || (!o->any && is_option(c, v))) {
                rc = cli_fail("%s: option %s needs a value", c->name, a);
            } else {
                rc = store(c, o, a, v, opts);
                i++;
            }
        } else if (a[0] == '-' && a[1] == '-' && a[2] && c->keys != ARG_KEYS_NONE) {
            /* a setting passed on; one that is no layer key but close to an option is a typo
             * (ARG_KEYS_VALUE: the command knows its keys and checks them itself) */
            const char *k = a + 2;
            int best = 99;
            int typo = 0;
            for (const arg_opt *p = c->opts; c->keys == ARG_KEYS_BARE && p && p->name; p++)
                typo |= near(k, p->name, &best) | (is_short(p) && near(k, p->alias, &best));
            if (typo && !is_layer_key(k)) {
                rc = arg_unknown(c, a, NULL);
                break;
            }
            const int has = v && !is_option(c, v);
            if (!has && c->keys == ARG_KEYS_VALUE) {
                rc = cli_fail("%s: option %s needs a value", c->name, a);
                break;
            }
            r->keys[r->n_keys] = k;
            r->vals[r->n_keys++] = has ? argv[++i] : "true";
        } else if (a[0] == '-' && a[1]) {
            rc = arg_unknown(c, a, NULL);
        } else if (given_pos < n_pos) {
            rc = store(c, &c->pos[given_pos], c->pos[given_pos].name, a, opts);
            given_pos++;
        } else {
            rc = cli_fail("%s: unexpected argument '%s' (posenc %s --help)", c->name, a, c->name);
        }
    }
    for (int p = given_pos; !rc && p < n_pos; p++)
        if (c->pos[p].required) rc = missing(c, &c->pos[p], 1);
    for (int k = 0; !rc && k < n_opts; k++)
        if (c->opts[k].required && !given[k]) rc = missing(c, &c->opts[k], 0);
    free(given);
    if (rc) arg_free(r);
    return rc;
}

/* The files of one option, before any work: an input must be a regular file we can open, an
 * output's folder must exist and be writable (pe_out_open's probe, then nothing is left). */
static int check_file(const arg_cmd *c, const arg_opt *o, const char *spelled, const char *path) {
    pe_err err = {{0}};
    if (o->kind == ARG_IN || o->kind == ARG_EDIT) {
        FILE *f = pe_in_open(path, 0, NULL, &err);
        if (!f) return cli_fail("%s: %s: %s", c->name, spelled, err.msg);
        fclose(f);
    }
    if (o->kind == ARG_OUT || o->kind == ARG_EDIT) {
        pe_out probe;
        if (pe_out_open(&probe, path, &err)) return cli_fail("%s: %s: %s", c->name, spelled, err.msg);
        pe_out_abort(&probe);
    }
    if (o->kind == ARG_OUTDIR) {
        struct stat st;
        char parent[4096];
        const char *dir = path;
        if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
            return cli_fail("%s: %s: '%s' exists and is not a folder", c->name, spelled, path);
        if (stat(path, &st) != 0) { /* made later: its parent must take it */
            snprintf(parent, sizeof parent, "%s", path);
            char *slash = strrchr(parent, '/');
            while (slash && slash > parent && slash[1] == 0) *slash = 0, slash = strrchr(parent, '/');
            if (slash == parent) parent[1] = 0;
            else if (slash) *slash = 0;
            else snprintf(parent, sizeof parent, ".");
            dir = parent;
        }
        if (access(dir, W_OK | X_OK))
            return cli_fail("%s: %s: cannot write into '%s': %s", c->name, spelled, dir, strerror(errno));
    }
    return 0;
}

int arg_parse(const arg_cmd *c, int argc, char **argv, void *opts, arg_res *r) {
    int rc = arg_parse_only(c, argc, argv, opts, r);
    if (rc < 0) {
        arg_help(c);
        return -1;
    }
    /* files in the order of the table, positional arguments first */
    for (int pass = 0; !rc && pass < 2; pass++)
        for (const arg_opt *o = pass ? c->opts : c->pos; !rc && o && o->name; o++) {
            if (o->kind < ARG_IN) continue;
            const char *path = *(const char **)((char *)opts + o->off);
            char spelled[80];
            snprintf(spelled, sizeof spelled, "%s%s", pass ? dash(o) : "", o->name);
            if (path) rc = check_file(c, o, spelled, path);
        }
    if (rc) arg_free(r);
    return rc;
}

int arg_start(const arg_cmd *c, int argc, char **argv, void *opts, int *status) {
    arg_res r;
    c->init(opts);
    const int rc = arg_parse(c, argc, argv, opts, &r);
    if (rc) return *status = rc < 0 ? 0 : rc, 1;
    arg_free(&r);
    return *status = 0, 0;
}

void arg_free(arg_res *r) {
    free(r->keys), free(r->vals);
    *r = (arg_res){0};
}

/* ---- help ------------------------------------------------------------------------------------ */

/* One entry: the left column, then the meaning with its range, default and old names. */
static void help_line(const char *left, const char *meaning, const char *extra) {
    printf("  %-21s ", left);
    if (strlen(left) > 21) printf("\n  %-21s ", "");
    for (const char *p = meaning; *p; p++) {
        putchar(*p);
        if (*p == '\n') printf("  %-21s ", "");
    }
    if (extra[0]) printf("%s(%s)", meaning[0] ? " " : "", extra);
    putchar('\n');
}

/* A bound as help shows it: 2^k for the large powers of two (sizes), else the number. */
static const char *bound(long long v, char *buf, size_t n) {
    int k = 0;
    while (k < 62 && (1LL << k) < v) k++;
    if (v >= 65536 && (1LL << k) == v) snprintf(buf, n, "2^%d", k);
    else snprintf(buf, n, "%lld", v);
    return buf;
}

static void describe(const arg_opt *o, const void *defaults, char *buf, size_t n) {
    const char *at = (const char *)defaults + o->off;
    size_t len = 0;
#define ADD(...) (len += (size_t)snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__))
    buf[0] = 0;
    if (o->kind == ARG_INT) {
        if (o->hi == 9223372036854775807LL) ADD(">= %lld", o->lo);
        else {
            char lo[32], hi[32];
            ADD("%s .. %s", bound(o->lo, lo, sizeof lo), bound(o->hi, hi, sizeof hi));
        }
    }
    if (o->kind == ARG_REAL) {
        if (o->rhi == HUGE_VAL) ADD(">= %g", o->rlo);
        else ADD("%g .. %g", o->rlo, o->rhi);
    }
    if (o->kind == ARG_ENUM) {
        ADD("%s", "");
        for (const char *p = o->choices; *p; p++) ADD(*p == ' ' ? ", " : "%c", *p);
    }
    const char *sep = len ? "; " : "";
    if (o->required) ADD("%srequired", sep);
    else if (o->def && o->def[0]) ADD("%sdefault %s", sep, o->def);
    else if (!o->def && o->kind == ARG_INT) ADD("%sdefault %lld", sep, *(const long long *)at);
    else if (!o->def && o->kind == ARG_REAL) ADD("%sdefault %g", sep, *(const double *)at);
    else if (!o->def && o->kind != ARG_FLAG && *(const char *const *)at) ADD("%sdefault %s", sep, *(const char *const *)at);
    if (o->alias && !is_short(o)) { /* a short option's alias is its long form (-o, --output) */
        ADD("%s%s", len ? "; " : "", "old name");
        for (const char *p = o->alias; *p;) {
            size_t w = strcspn(p, " ");
            ADD(" --%.*s", (int)w, p);
            p += w + strspn(p + w, " ");
        }
    }
#undef ADD
}

void arg_help(const arg_cmd *c) {
    void *def = calloc(1, c->size ? c->size : 1);
    if (def && c->init) c->init(def);
    char u[512], left[96], extra[512];
    usage_line(c, u, sizeof u);
    printf("%s\n", u);
    if (c->about) printf("%s\n", c->about);
    if (c->pos && c->pos->name) {
        printf("\narguments:\n");
        for (const arg_opt *o = c->pos; o->name; o++) {
            describe(o, def, extra, sizeof extra);
            help_line(o->name, o->help, extra);
        }
    }
    printf("\noptions:\n");
    for (const arg_opt *o = c->opts; o && o->name; o++) {
        const int both = is_short(o);
        snprintf(left, sizeof left, "%s%s%s%s%s%s", dash(o), o->name, both ? ", --" : "", both ? o->alias : "",
                 o->kind == ARG_FLAG ? "" : " ", o->kind == ARG_FLAG ? "" : o->meta ? o->meta : "X");
        describe(o, def, extra, sizeof extra);
        help_line(left, o->help, extra);
    }
    if (c->keys != ARG_KEYS_NONE && c->keys_help) help_line("--KEY VALUE", c->keys_help, "");
    help_line("-h, --help", "this help", "");
    if (c->notes) printf("\n%s\n", c->notes);
    free(def);
}

const arg_cmd *arg_command(const char *name) {
    for (int i = 0; ARG_COMMANDS[i]; i++)
        if (!strcmp(ARG_COMMANDS[i]->name, name)) return ARG_COMMANDS[i];
    return NULL;
}
