/* One argument parser for every subcommand: each command describes its options in a table
 * (cli/options.c), and the parser gives the same behaviour everywhere:
 *   posenc CMD --help        usage, what the command does, every option with its default and
 *                            meaning (printed from the table), exit 0
 *   missing value            "posenc: CMD: option --x needs a value"
 *   numbers                  checked against the table's range ("'abc' is not a whole number in
 *                            lo .. hi"): no value is ever replaced by a default in silence
 *   unknown option           "... unknown option '--x' (did you mean --y?)" by edit distance
 *   files                    inputs exist and are regular files, outputs can be written (their
 *                            folder exists, is writable, the target is no device or directory),
 *                            checked before any work, with the system's reason
 * Every message is one line "posenc: CMD: ..." and the status is 2 (cli_fail). */
#ifndef PE_CLI_ARGS_H
#define PE_CLI_ARGS_H

#include <stddef.h>

typedef enum arg_kind {
    ARG_FLAG,   /* no value: int = 1 */
    ARG_INT,    /* long long within lo .. hi */
    ARG_REAL,   /* double within [rlo, rhi] */
    ARG_STR,    /* const char * */
    ARG_ENUM,   /* const char *, one of the space-separated words of choices */
    ARG_LIST,   /* arg_list: one or more words, every word after the option up to the next option */
    ARG_IN,     /* const char *: a file read (must exist, regular) */
    ARG_OUT,    /* const char *: a file written (probed: folder writable, not a device/FIFO/dir) */
    ARG_OUTDIR, /* const char *: a folder written into (made if missing; its parent must exist) */
    ARG_EDIT,   /* const char *: a file rewritten in place (a README): both of IN and OUT */
} arg_kind;

/* The values of an ARG_LIST option: v[0] .. v[n-1] are argv's words. first is v[0], where every
 * other string option keeps its value, so a reader of the table (the fuzzer) sees a string. */
typedef struct arg_list {
    const char *first;
    char *const *v;
    int n;
} arg_list;

/* One option, or one positional argument (then name is what help shows, e.g. "CASE"). */
typedef struct arg_opt {
    const char *name;  /* "length" for --length, "o" for -o */
    const char *alias; /* other names, space-separated ("T N"): old names kept for one release */
    arg_kind kind;
    size_t off;        /* where the value goes in the command's options struct */
    const char *meta;  /* the value's placeholder in help: N, FILE, LIST */
    const char *help;  /* meaning; "\n" starts an indented line */
    long long lo, hi;  /* ARG_INT */
    double rlo, rhi;   /* ARG_REAL */
    const char *choices; /* ARG_ENUM */
    const char *def;   /* the default as help says it, where the initial value does not say it */
    int required;
    int any;           /* the value may start with "--" (free text such as a prompt) */
} arg_opt;

/* --KEY VALUE settings passed on (to pe_config_set, the trainer's options) */
enum {
    ARG_KEYS_NONE,  /* an unknown --x is an error */
    ARG_KEYS_BARE,  /* --KEY VALUE, or --KEY alone (followed by an option or nothing) = "true" */
    ARG_KEYS_VALUE, /* --KEY VALUE, the value required */
};

typedef struct arg_cmd {
    const char *name;     /* "demo" */
    const char *usage;    /* what follows "posenc demo" on the usage line */
    const char *about;    /* what the command does (help, after the usage line) */
    const arg_opt *pos;   /* positional arguments, in order, ending with {0} (or NULL) */
    const arg_opt *opts;  /* options, ending with {0} */
    int keys;             /* ARG_KEYS_* */
    const char *keys_help; /* the help line of --KEY VALUE */
    const char *notes;    /* printed after the options */
    size_t size;          /* sizeof the options struct */
    void (*init)(void *); /* the defaults */
} arg_cmd;

/* What a parse leaves besides the options struct: the --KEY VALUE settings in order (the
 * strings are argv's). arg_free releases the arrays. */
typedef struct arg_res {
    int n_keys;
    const char **keys, **vals;
} arg_res;

/* Parses argv (after the command name) into opts (already holding the defaults: init) and r.
 * Returns 0 to run the command, -1 when help was printed (exit 0), 2 after the message of a
 * mistake. arg_parse also checks the files of IN/OUT/OUTDIR/EDIT options; arg_parse_only does
 * not touch the file system or print help (the fuzzer's entry point). */
int arg_parse(const arg_cmd *c, int argc, char **argv, void *opts, arg_res *r);
int arg_parse_only(const arg_cmd *c, int argc, char **argv, void *opts, arg_res *r);
void arg_free(arg_res *r);
/* The whole prologue of a command that takes no --KEY VALUE settings: opts filled with c's
 * defaults, argv parsed into it. Returns 0 to run the command, else 1 with *status the exit
 * status to return (0 after --help, 2 after a mistake's message). */
int arg_start(const arg_cmd *c, int argc, char **argv, void *opts, int *status);

/* The help of c, from its table and the defaults in a fresh options struct. */
void arg_help(const arg_cmd *c);

/* "CMD: unknown option '--x' (did you mean --y?)" with the nearest of c's options and of
 * extra(0), extra(1), ... (NULL ends it; extra may be NULL); returns 2. */
int arg_unknown(const arg_cmd *c, const char *word, const char *(*extra)(int));

/* The nearest of names(0), names(1), ... (NULL ends it) within a few edits of word, or NULL. */
const char *arg_nearest(const char *word, const char *(*names)(int));

/* A method by name, or 2 with "CMD: FLAG: unknown method 'x' (did you mean y?)". */
int arg_method(const char *cmd, const char *flag, const char *name, int *method);

/* A comma-separated list of whole numbers in lo .. hi into out (at most max); the count, or
 * -1 after the message. */
int arg_int_list(const char *cmd, const char *flag, const char *text, long long lo, long long hi, long long *out, int max);

/* Set: cli_fail makes its message but does not print it (the fuzzer). */
extern int cli_silent;

/* Every command's table (cli/options.c), NULL-terminated: help, the dispatcher, the fuzzer. */
extern const arg_cmd *const ARG_COMMANDS[];
const arg_cmd *arg_command(const char *name);

#endif
