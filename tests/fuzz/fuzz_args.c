/* libFuzzer: bytes as a command line (arguments split on NUL or newline) through the parser of
 * every subcommand's table (cli/args.c, cli/options.c), parsing only: no command runs and no
 * file is touched. Every outcome must be help (-1), a message (2) or a parse whose values keep
 * the table's promises: numbers within their range, choices among the table's words, required
 * options present, every string one of argv's. The parser and the tables are compiled in, so
 * the harness links the libraries only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/args.c"
#include "../../cli/options.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 48 };

/* Whether p is one of argv's strings, or the table's own default (the same struct before). */
static int from_argv(const char *p, char **argv, int argc) {
    for (int i = 0; i < argc; i++)
        if (p == argv[i]) return 1;
    return 0;
}

static void check(const arg_cmd *c, const void *opts, const void *def, const arg_res *r, char **argv, int argc) {
    for (int pass = 0; pass < 2; pass++)
        for (const arg_opt *o = pass ? c->opts : c->pos; o && o->name; o++) {
            const char *at = (const char *)opts + o->off, *was = (const char *)def + o->off;
            int given = 0;
            if (o->kind == ARG_INT) {
                long long v = *(const long long *)at;
                given = v != *(const long long *)was;
                if (given && (v < o->lo || v > o->hi)) __builtin_trap();
            } else if (o->kind == ARG_REAL) {
                double v = *(const double *)at;
                given = v != *(const double *)was;
                if (given && !(v >= o->rlo && v <= o->rhi)) __builtin_trap();
            } else if (o->kind == ARG_FLAG) {
                int v = *(const int *)at;
                if (v != 0 && v != 1) __builtin_trap();
            } else {
                const char *v = *(const char *const *)at;
                given = v != *(const char *const *)was;
                if (given && !from_argv(v, argv, argc)) __builtin_trap();
                if (given && o->kind == ARG_ENUM && !has_word(o->choices, v, strlen(v))) __builtin_trap();
                if (o->required && !v) __builtin_trap();
            }
            (void)given;
        }
    if (r->n_keys > argc) __builtin_trap();
    for (int k = 0; k < r->n_keys; k++) {
        if (!r->keys[k][0] || !r->vals[k]) __builtin_trap();
        if (c->keys == ARG_KEYS_NONE) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int once;
    if (!once) {
        cli_silent = 1; /* messages are made (and escaped), not printed */
        if (!freopen("/dev/null", "w", stdout)) return 0; /* help is printed */
        once = 1;
    }
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (size_t i = 0, start = 0; i <= size && argc < MAX_ARGS; i++)
        if (i == size || text[i] == 0 || text[i] == '\n') {
            text[i] = 0;
            if (i > start || i < size) argv[argc++] = text + start; /* empty arguments too */
            start = i + 1;
        }
    argv[argc] = NULL;
    for (int k = 0; ARG_COMMANDS[k]; k++) {
        const arg_cmd *c = ARG_COMMANDS[k];
        void *opts = calloc(1, c->size), *def = calloc(1, c->size);
        if (!opts || !def) break;
        c->init(opts), c->init(def);
        arg_res r;
        int rc = arg_parse_only(c, argc, argv, opts, &r);
        if (rc == 0) {
            check(c, opts, def, &r, argv, argc);
            arg_free(&r);
        } else if (rc == -1) {
            if (data[0] == k) arg_help(c); /* now and then: help from the table */
        } else if (rc != 2) {
            __builtin_trap();
        }
        if (argc) arg_unknown(c, argv[0], NULL); /* the suggestion for any word */
        free(opts), free(def);
    }
    free(text);
    return 0;
}
