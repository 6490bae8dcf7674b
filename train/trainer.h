/* One training run: options, the loop's step, evaluation at a length, checkpoints. Used by
 * `posenc train` (one run) and `posenc compare` (many, one per thread).
 *
 * Checkpoints are safetensors files: every model tensor by its name (model.h), the AdamW
 * moments as `adam.m.<name>` and `adam.v.<name>`, the memory of methods that carry one as
 * `memory` (layers, B, M, C), and in __metadata__ `format` = "posenc-train-1", `step` (steps
 * done), `shares` (data parallel: the shares of a batch, tr_run_distribute; absent for one) and every option
 * below by name, so `--resume FILE` rebuilds the same run and continues
 * it exactly where it stopped (batches are a function of the step, see data.h). */
#ifndef TR_TRAINER_H
#define TR_TRAINER_H

#include <stdint.h>

#include "data.h"
#include "model.h"
#include "optim.h"
#include "../tools/layer.h" /* pe_rng */

#define TR_MAX_EVAL 8
/* upper bounds of the sizes (tr_options_check) */
#define TR_MAX_WIDTH 8192
#define TR_MAX_MLP 65536
#define TR_MAX_BATCH 65536
#define TR_MAX_SHAPE (1LL << 30)
#define TR_MAX_RANDOM_POSITIONS (1LL << 30)
#define TR_MAX_STEPS (1LL << 40)
#define TR_MAX_EVAL_TOKENS (1LL << 32)
#define TR_MAX_CORPUS (1LL << 32)
#define TR_MAX_EVAL_MULT 1024
/* A step's default pass (--micro-batch 0): sequences of about this many tokens in all, whose
 * activations (2 layers x 64 wide: about 1 MiB) stay in a core's L2 between a layer's forward
 * and its backward. Tokens, not bytes of a cache: the passes fix the gradient's sums, so they
 * must be the same on every machine. */
#define TR_MICRO_TOKENS 256

typedef struct tr_options {
    /* task */
    char task[16];
    int64_t length; /* L: context (lm) or longest content (tasks) in training */
    int64_t alphabet; /* symbols of copy, reverse, sort and duplicate (2..10) */
    char layout[16];  /* "decoder" (causal, "abcd=dcba.") or "slots" (data.h: an encoder with answer slots) */
    int64_t hints;    /* add: index hints (data.h: tr_task_set_hints), 0 or 1 */
    char text[512]; /* lm on this file instead of the generated corpus ("" = generated) */
    uint64_t corpus_seed;
    int64_t corpus_chars;
    /* model */
    char method[32];
    int64_t layers, width, heads, mlp;
    int64_t shape;  /* SHAPE: random shift in [0, shape) per training sequence, shape at evaluation */
    /* randomized positions (Ruoss et al. 2023): each sequence of T tokens takes T sorted
     * distinct positions drawn uniformly from [0, random_positions), in training and, as the
     * paper's code does, at evaluation (0: off, positions 0..T-1) */
    int64_t random_positions;
    /* per-layer schedule: comma-separated methods, layer l runs the (l mod n)-th ("": every
     * layer runs `method`); nope_temperature > 0 turns on Llama 4's attention-temperature
     * tuning on its `none` layers with that floor_scale (0: off) */
    char layers_methods[512];
    double nope_temperature;
    /* per-layer sliding windows: comma-separated token counts, layer l the (l mod n)-th, each
     * query seeing the last W tokens itself included (0: all; "": no windows) */
    char layers_windows[256];
    int n_keys;     /* layer keys (--KEY VALUE of the contract) */
    char key[TR_MAX_KEYS][40], val[TR_MAX_KEYS][64];
    /* training */
    int64_t steps, batch, warmup;
    int64_t micro_batch; /* sequences per forward and backward pass (0: TR_MICRO_TOKENS tokens' worth) */
    double dropout; /* tr_model_set_dropout's p in training (0: off) */
    double lr, min_lr, weight_decay, clip, beta1, beta2, eps;
    uint64_t seed;
    /* evaluation: multiples of the training length, tokens per length */
    int n_eval;
    int64_t eval[TR_MAX_EVAL];
    int64_t eval_tokens;
    /* Ruoss et al.'s score: the mean token accuracy over every content length lo..hi, 512
     * sequences each ("" = off; "41-100" is theirs, L = 40); score_metric "exact" takes the
     * mean exact match instead (Kazemnejad et al. 2023's accuracy over their test lengths) */
    char score_lengths[24];
    char score_metric[16];
} tr_options;

/* The longest window of --layers-windows, in tokens. */
#define TR_MAX_WINDOW (1 << 30)

/* Defaults of `posenc train` (documented by tr_options_help). */
void tr_options_default(tr_options *o);
/* Sets one option by name ("steps", "lr", "method", "eval" = "1,2,4,8", or a layer key such as
 * "num_buckets"); the names are those of the command line without "--". */
pe_status tr_options_set(tr_options *o, const char *name, const char *value, pe_err *err);
/* 1 when name is an option (or a layer key); *takes_value tells whether it needs one. */
int tr_options_known(const char *name);
/* Writes every option as name/value text (for checkpoints); returns the count. */
int tr_options_list(const tr_options *o, char names[][40], char values[][520], int max);
/* The option lines of `posenc train --help`. */
void tr_options_help(void);
/* Checks the options together (task, method, SHAPE with an absolute method, the per-layer
 * schedule, sizes and their upper bounds TR_MAX_*). */
pe_status tr_options_check(const tr_options *o, pe_err *err);
/* The defaults that depend on other options (length by task, mlp by width, warm-up by steps). */
void tr_options_resolve(tr_options *o);
/* The value of layer key `key` among the options' (--KEY VALUE), or NULL */
const char *tr_options_key(const tr_options *o, const char *key);
/* A whole decimal integer (0), or -1 */
int tr_parse_int(const char *s, int64_t *v);
/* The method of layer l: the schedule's (cycled) or o->method; into buf (32 bytes). */
const char *tr_options_layer_method(const tr_options *o, int64_t l, char *buf, size_t n);
/* What the run trains, for messages: the schedule ("rope,none per layer") or the method. */
const char *tr_options_method_label(const tr_options *o, char *buf, size_t n);

/* Randomized positions: T sorted distinct positions drawn uniformly from [0, N) (T <= N) with
 * rng, into pos (Floyd's sampling, then sorted). */
void tr_random_positions(pe_rng *rng, int64_t N, int64_t T, int64_t *pos);

/* What an evaluation measures at one length. */
typedef struct tr_metrics {
    int64_t n;           /* length evaluated: context (lm) or content (tasks) */
    double loss;         /* mean cross-entropy of scored tokens, nats */
    double bpc;          /* the same in bits */
    double token_acc;    /* fraction of scored tokens predicted (argmax) */
    double exact;        /* fraction of sequences with every scored token right (tasks) */
    int64_t tokens, seqs;
} tr_metrics;

typedef struct tr_run {
    tr_options o;
    const tr_task *task; /* borrowed */
    tr_model *model;
    tr_adamw opt;
    int64_t step; /* steps done */
    int32_t *in, *tgt;
    int64_t *pos;
    int64_t cap; /* tokens the buffers hold */
    /* where the run saves (posenc train --save, --save-every), kept in its checkpoints so that
     * --resume goes on saving there; "" and 0: not saving */
    char save[512];
    int64_t save_every;
    /* data parallel (tr_run_distribute): every batch in `shares` contiguous shares, this process
     * rank `rank` of `ranks` (1, or one a share); sum_f32/sum_f64 add every rank's values up in
     * rank order (train/dist.h); acc sums a process's own shares. 1 share: the whole batch. */
    int shares, rank, ranks;
    float *acc;
    pe_status (*sum_f32)(float *x, size_t n, pe_err *err);
    pe_status (*sum_f64)(double *x, size_t n, pe_err *err);
    double sum_seconds; /* wall time in sum_f32/sum_f64 (waiting for the slowest rank included) */
    /* one process's shares on threads (tr_run_share_threads): a copy of the model per thread,
     * each share's gradient (shares x size) summed in share order after them */
    tr_model_config mc;
    int threads;
    tr_model **reps;
    float *share_grads;
    double *share_parts;
} tr_run;

/* The metric `compare` tabulates: "bpc" (lower is better) for lm, "exact" (higher) otherwise. */
const char *tr_metric_name(const tr_task *t);
double tr_metric_value(const tr_task *t, const tr_metrics *m);

/* Builds the task of o (caller frees it with tr_task_free). */
pe_status tr_task_from_options(tr_task *t, const tr_options *o, pe_err *err);

/* A run at step 0: model initialised from o->seed, zero moments. */
pe_status tr_run_init(tr_run *r, const tr_options *o, const tr_task *task, pe_err *err);
void tr_run_free(tr_run *r);
/* Splits every batch into `shares` contiguous shares of B / shares sequences (before
 * tr_run_load): the gradient of the batch's mean loss is the sum of the shares' gradients, added
 * up in share order. One process (ranks 1) computes every share; over ranks = shares, rank k
 * draws the batch one process would, computes share k, and the ranks' gradients and losses are
 * summed in rank order (sum_f32, sum_f64), so every rank takes the same step, and the same bits
 * as one process in that many shares. The batch must be a multiple of shares; methods with
 * memory, whose memory is per sequence, train whole batches. */
pe_status tr_run_distribute(tr_run *r, int shares, int rank, int ranks, pe_status (*sum_f32)(float *, size_t, pe_err *),
                            pe_status (*sum_f64)(double *, size_t, pe_err *), pe_err *err);
/* One process's shares (after tr_run_distribute with ranks 1) computed on `threads` threads
 * at once, each share by a copy of the model on one thread (BLAS on one thread too), their
 * gradients and losses then summed in share order: the bits of the shares one after another,
 * whatever the threads. threads 1: one after another. */
pe_status tr_run_share_threads(tr_run *r, int threads, pe_err *err);
/* One optimizer step: batch of step r->step, forward, backward, clip, AdamW; *loss is the
 * batch's mean loss before the update, *tokens its tokens. */
pe_status tr_run_step(tr_run *r, double *loss, int64_t *tokens, pe_err *err);
/* Evaluation at multiple `mult` of the training length. */
pe_status tr_run_eval(tr_run *r, int64_t mult, tr_metrics *out, pe_err *err);
/* The score of --score-lengths (0 when off): the mean over lo..hi of the token accuracy of
 * TR_SCORE_SEQS held-out sequences at each content length, as their range evaluation
 * (google-deepmind/randomized_positional_encodings, experiments/range_evaluation.py, 512
 * sequences a length) and example.py's score (the mean of the accuracies past the training
 * length) compute it; with --score-metric exact, of the exact match (teacher-forced, which
 * for these one-answer tasks is greedy decoding's: every token right given the right prefix). */
#define TR_SCORE_SEQS 512
pe_status tr_run_score(tr_run *r, double *score, pe_err *err);
/* Whether the options train in the answer-slot layout (--layout slots, data.h). */
int tr_options_slots(const tr_options *o);
/* The range of --score-lengths into lo, hi (0, 0 when off); -1 when it is not "A-B" with
 * 1 <= A <= B <= 8192. */
int tr_options_score_range(const tr_options *o, int64_t *lo, int64_t *hi);
/* The positions of one evaluated (or generated) sequence of T tokens, stream `idx`: 0..T-1
 * plus SHAPE's K, or with randomized positions T sorted ones from [0, N) drawn from a stream
 * fixed by (T, idx) alone, so every method and seed is evaluated at the same positions. An
 * error when T exceeds N. */
pe_status tr_run_positions(const tr_run *r, int64_t T, uint64_t idx, int64_t *pos, pe_err *err);

pe_status tr_run_save(const tr_run *r, const char *path, pe_err *err);
/* Reads a checkpoint's options (o gets defaults first, then the file's), and where it saved
 * (save: "" when it did not say; may be NULL). */
pe_status tr_checkpoint_options(const char *path, tr_options *o, pe_err *err);
pe_status tr_checkpoint_saving(const char *path, char *save, size_t n, int64_t *save_every, pe_err *err);
/* Loads parameters, moments, step and memory into a run built from the same options (and the
 * same shares: a checkpoint's `shares`, 1 when absent). */
pe_status tr_run_load(tr_run *r, const char *path, pe_err *err);

#endif
