/* The options of every subcommand, as the parser fills them (args.h); their tables, defaults
 * and help texts are in options.c, in one place, so that --help, the dispatcher and the fuzzer
 * read the same tables as the commands. Whole numbers are long long, flags int, the rest the
 * argv strings (NULL: not given). */
#ifndef PE_CLI_OPTIONS_H
#define PE_CLI_OPTIONS_H

#include "args.h"

typedef struct demo_args {
    long long length, heads, head_dim, seed;
} demo_args;

typedef struct attend_args {
    const char *in, *out;
} attend_args;

typedef struct encode_args {
    const char *in, *out, *positions;
    long long length, width; /* 0: not given */
} encode_args;

typedef struct convert_rope_args {
    const char *in, *out, *to, *q, *k;
    long long heads, kv_heads, rotary_dim; /* 0: the file's metadata */
} convert_rope_args;

typedef struct train_args {
    const char *save, *resume, *loss_log;
    long long save_every; /* -1: not given (the checkpoint's, or only at the end) */
    long long threads;
    long long shares; /* 0: one per rank (1 in one process) */
    int quiet, profile;
} train_args;

typedef struct compare_args {
    const char *methods, *out, *readme, *results;
    const char *shard; /* "K/N"; NULL: the environment's (cli/compare_shard.c), else every run */
    arg_list merge;    /* the folders of run files to build the outputs from (n 0: not merging) */
    long long seeds, jobs, shape_k; /* jobs 0: the cores; shape_k 0: half the training length */
    long long random_n;             /* 0: the longest evaluated sequence, up to a power of two */
    int quick, quiet, full, estimate;
} compare_args;

typedef struct generate_args {
    const char *checkpoint, *prompt;
    long long tokens, seed;
    double temperature;
    int check;
} generate_args;

typedef struct positions_args {
    const char *spans, *out;
    long long merge;
    double tokens_per_second;
} positions_args;

typedef struct bench_args {
    const char *lengths, *methods, *causal, *only, *torch, *torch_train, *readme;
    long long reps, threads, ref_max_length, torch_max_length; /* reps 0: 3, or 1 with --quick */
    long long steps; /* train section: timed steps per round (0: about 1 s of posenc's) */
    int quick, no_torch, no_reference;
} bench_args;

typedef struct plot_args {
    const char *kind, *in, *out, *from, *tensor, *part, *show, *metric, *checkpoint, *input, *grid, *patch, *size;
    long long length, width, heads, seed, batch, layer; /* layer -1: not given (0) */
    int cosine;
} plot_args;

typedef struct analyze_args {
    const char *methods, *from, *tensor, *out;
    long long length, width, heads, seed, layer; /* layer -1: not given (0) */
    int cosine;
} analyze_args;

typedef struct hf_config_args {
    const char *config;
    long long layer; /* -1: every layer */
    int group, families;
    const char *assume;
} hf_config_args;

typedef struct methods_args {
    const char *name;
} methods_args;

/* train and compare: every --KEY VALUE is one of the trainer's options or the layer's keys
 * (else "did you mean"), and --length is 1 .. 4096; 0 or 2 after the message (cli/train.c). */
int cli_train_keys(const arg_cmd *c, const arg_res *r);

extern const arg_cmd ARGS_DEMO, ARGS_ATTEND, ARGS_ENCODE, ARGS_CONVERT_ROPE, ARGS_TRAIN, ARGS_COMPARE, ARGS_GENERATE,
    ARGS_POSITIONS, ARGS_HF_CONFIG, ARGS_BENCH, ARGS_PLOT, ARGS_ANALYZE, ARGS_METHODS, ARGS_VERSION;

#endif
