/* Tasks of `posenc train` and `posenc compare`, all generated from a seed (nothing is
 * downloaded). A task turns (seed, step) into a batch, so a batch is a pure function of its
 * step: a resumed run sees exactly the batches the uninterrupted run would have seen.
 *
 *   lm       causal character-level language modelling on a built-in procedurally generated
 *            corpus with long-range structure (topic words that recur through a document,
 *            values defined early and recalled much later, the title repeated at the end), or
 *            on the text of --text FILE (90% train, the last 10% held out)
 *   copy     "abcd=abcd."   reverse "abcd=dcba."   sort "dbca=abcd."   duplicate "abc=abcabc."
 *            (Ruoss et al. 2023's duplicate_string); their symbols are the first --alphabet
 *            of a..j (Ruoss et al.: 2)
 *   add      "123+4567=0964."  (the sum's digits least significant first, as most
 *            length-generalisation studies write it)
 *   count    "b0..b+.a0.b+..b=2."  the counting task of CoPE (Golovneva et al. 2024): n
 *            statements over variables a, b, c (b0 sets b to 0, b+ increments it, . passes),
 *            then "b=" asks for b's value (data.c has the generator)
 *   parity   "01101=1."  the count of 1s mod 2;  sum  "3+3+1+8+6=1."  n terms of 1..9, their
 *            sum mod 10: two of Kazemnejad et al. 2023's tasks (McGill-NLP/length-generalization,
 *            scripts/dataset_builders/make_parity_dataset.py, make_sum_dataset.py), in the
 *            tasks' characters (theirs: "Is the number of 1's even in the sequence [ 0, 1, 1, 0,
 *            1 ] ?" answered "The answer is No.", and "Compute: 3 + 3 + 1 + 8 + 6 ." answered
 *            "The answer is 1 ."); n counts bits and terms, as their lengths do
 *
 * The training length L is the context of lm and the longest content of the other tasks
 * (trained on content lengths 1..L); evaluation at a multiple m uses context m*L (lm) or
 * content of exactly m*L symbols (count: statements). Targets are the next token; only the
 * answer after '=' is scored in the synthetic tasks (-1 marks unscored targets and padding).
 *
 * The answer-slot layout (--layout slots; copy, reverse, sort, duplicate) is Ruoss et al. 2023's
 * encoder over the input followed by one empty slot per answer symbol
 * (google-deepmind/randomized_positional_encodings, experiments/utils.py,
 * make_model_with_empty_targets): "abcd____" with the answer's symbols as the targets of the
 * slots (not shifted) and the content unscored; the model attends both ways. Every sequence of
 * a batch has the same content length, drawn once per batch from 1..L as their
 * UniformCurriculum does (experiments/curriculum.py; training.py samples one length a step), so
 * nothing is padded.
 *
 * Legend: B batch, T tokens per sequence. */
#ifndef TR_DATA_H
#define TR_DATA_H

#include <stdint.h>

#include "posenc.h"

/* TR_TASK_COUNT is how many kinds there are; the task named "count" is TR_TASK_COUNTING */
/* (new kinds go last: a kind's number is part of compare's run fingerprints) */
typedef enum {
    TR_TASK_LM, TR_TASK_COPY, TR_TASK_REVERSE, TR_TASK_SORT, TR_TASK_ADD, TR_TASK_COUNTING, TR_TASK_DUPLICATE,
    TR_TASK_PARITY, TR_TASK_SUM, TR_TASK_COUNT
} tr_task_kind;

typedef struct tr_task {
    tr_task_kind kind;
    int64_t L;            /* training length */
    int64_t V;            /* vocabulary size */
    unsigned char chars[256]; /* id -> character */
    int ids[256];             /* character -> id, -1 when absent */
    int alphabet;             /* copy, reverse, sort, duplicate: symbols a.. (tr_task_init: 10) */
    int slots;                /* the answer-slot layout (tr_task_set_layout) */
    int hints;                /* add: index hints (tr_task_set_hints) */
    uint8_t *train, *eval;    /* lm: token ids of the training and held-out text */
    int64_t n_train, n_eval;
} tr_task;

/* Name of a task kind ("lm", "copy", ...), and back (-1 when unknown). */
const char *tr_task_name(tr_task_kind k);
int tr_task_from_name(const char *name);

/* Builds a task. lm: text_path NULL builds the corpus from corpus_seed (n_chars characters,
 * plus a tenth for evaluation); otherwise the file's bytes are the text (at least
 * 2 * (8L + 1) bytes). Other tasks ignore text_path and corpus arguments. */
pe_status tr_task_init(tr_task *t, tr_task_kind kind, int64_t L, const char *text_path,
                       uint64_t corpus_seed, int64_t n_chars, pe_err *err);
void tr_task_free(tr_task *t);
/* Whether a task is one of the string tasks (copy, reverse, sort, duplicate): the ones with an
 * alphabet and the answer-slot layout. */
int tr_task_has_strings(tr_task_kind k);
/* The symbols of copy, reverse, sort and duplicate (2..10) and the answer-slot layout (slots 1).
 * Refuses what a task does not have (lm, add and count keep ten symbols and the '=' layout). */
pe_status tr_task_set_layout(tr_task *t, int alphabet, int slots, pe_err *err);
/* add with index hints (hints 1; Zhou et al. 2024, in the format of HanseulJo/position-coupling's
 * AdditionDatasetWithIndexHints, src/data/addition.py): both operands padded with zeros to n + 1
 * digits, each digit of the operands and of the sum preceded by a hint, a letter A..Z naming its
 * place: consecutive letters from the most significant place, starting at a letter drawn per
 * example, so that every place's hint is seen in training; the sum least significant first,
 * its hints descending:  B0C1D2+B0C4D5=D7C5B0.  The vocabulary gains the 26 letters.
 * Refuses other tasks. */
pe_status tr_task_set_hints(tr_task *t, int hints, pe_err *err);
/* The most digits a sum with index hints can have: one hint letter per place. */
#define TR_HINTS_MAX 26

/* The longest sequence (tokens) of a batch at content/context length n. */
int64_t tr_task_seq_len(const tr_task *t, int64_t n);

/* Training batch of step `step` (B sequences; the task picks T <= tr_task_seq_len(t, L)).
 * lm reads B streams that start at seed-chosen offsets and advance by L every step, so a
 * method with memory sees consecutive segments. in, tgt: (B, T) with room for
 * B * tr_task_seq_len(t, L) entries. Returns T. */
int64_t tr_task_train_batch(const tr_task *t, uint64_t seed, int64_t step, int64_t B, int32_t *in,
                            int32_t *tgt);

/* Evaluation batch `index` at length n (context n for lm, content n otherwise): the same
 * sequences for every method and seed. Returns T. */
int64_t tr_task_eval_batch(const tr_task *t, int64_t n, int64_t index, int64_t B, int32_t *in,
                           int32_t *tgt);

/* The generated corpus itself (what `lm` trains on without --text): n characters from seed,
 * NUL-terminated, malloc'ed; NULL when out of memory. */
char *tr_corpus_generate(uint64_t seed, int64_t n);

#endif
