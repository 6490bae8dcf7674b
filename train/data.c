/* Tasks: the generated corpus, --text files and the synthetic length-generalisation tasks.
 * Every batch is a pure function of (seed, step) or (length, index); see data.h. */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/output.h"
#include "../tools/layer.h"

/* What cannot fail but for memory in the tasks' generators (one example's digits): stop there */
#define TR_ASSERT(x)                                                                         \
    do {                                                                                     \
        if (!(x)) {                                                                          \
            fprintf(stderr, "posenc: %s:%d: assertion failed: %s\n", __FILE__, __LINE__, #x); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

static const char *const TASK_NAMES[TR_TASK_COUNT] = {"lm",    "copy",      "reverse", "sort", "add",
                                                       "count", "duplicate", "parity",  "sum"};

const char *tr_task_name(tr_task_kind k) { return k < TR_TASK_COUNT ? TASK_NAMES[k] : "?"; }

int tr_task_from_name(const char *name) {
    for (int k = 0; k < TR_TASK_COUNT; k++)
        if (!strcmp(TASK_NAMES[k], name)) return k;
    return -1;
}

/* A generator seeded from several numbers (splitmix over a mix of them). */
static pe_rng rng_of(uint64_t a, uint64_t b, uint64_t c) {
    pe_rng r = {a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^
                (c + 0x85ebca6b) * 0x94d049bb133111ebull};
    pe_rng_next(&r);
    return r;
}

static uint64_t below(pe_rng *r, uint64_t n) { return n ? pe_rng_next(r) % n : 0; }

/* ---- the generated corpus --------------------------------------------------------------- */

/* A growing string. */
typedef struct sbuf {
    char *s;
    int64_t n, cap, limit;
} sbuf;

static void put(sbuf *b, const char *text) {
    for (; *text && b->n < b->limit; text++) b->s[b->n++] = *text;
}

enum { LEXICON = 600, TOPIC = 12, VARS = 3 };

/* Pseudo-word from consonant-vowel syllables. */
static void make_word(pe_rng *r, char *w) {
    static const char cons[] = "bdfgklmnprstvz", vow[] = "aeiou";
    int syl = 1 + (int)below(r, 3), n = 0;
    for (int s = 0; s < syl; s++) {
        w[n++] = cons[below(r, sizeof cons - 1)];
        w[n++] = vow[below(r, sizeof vow - 1)];
    }
    if (below(r, 3) == 0) w[n++] = cons[below(r, sizeof cons - 1)];
    w[n] = 0;
}

/* Index drawn with probability ~ 1/(rank + 1) among n (Zipf), by inverting the harmonic sum. */
static int zipf(pe_rng *r, int n) {
    double h = 0;
    for (int i = 0; i < n; i++) h += 1.0 / (i + 1);
    double u = pe_rng_uniform(r) * h, acc = 0;
    for (int i = 0; i < n; i++)
        if ((acc += 1.0 / (i + 1)) >= u) return i;
    return n - 1;
}

/* Documents: a title line, paragraphs of sentences over the document's topic words (so words
 * recur at long range), definitions "let NAME be VALUE." whose values are recalled later as
 * "NAME is VALUE." (predictable only by looking back), and "end of TITLE." closing it. */
char *tr_corpus_generate(uint64_t seed, int64_t n) {
    sbuf b = {malloc((size_t)n + 1), 0, n, n};
    if (!b.s) return NULL;
    pe_rng r = rng_of(seed, 0xc0, 0);
    char lexicon[LEXICON][12];
    for (int i = 0; i < LEXICON; i++) make_word(&r, lexicon[i]);
    static const char *const fn[] = {"the", "of", "and", "a", "to", "in", "is", "was", "that", "with",
                                     "for", "on", "as", "by", "it"};
    const int nfn = (int)(sizeof fn / sizeof fn[0]);
    char num[32];
    while (b.n < b.limit) {
        int topic[TOPIC], title[2];
        for (int i = 0; i < TOPIC; i++) topic[i] = zipf(&r, LEXICON);
        title[0] = (int)below(&r, LEXICON), title[1] = (int)below(&r, LEXICON);
        char var[VARS][12];
        int value[VARS], defined[VARS] = {0};
        for (int v = 0; v < VARS; v++) make_word(&r, var[v]), value[v] = 100 + (int)below(&r, 9900);
        put(&b, "= "), put(&b, lexicon[title[0]]), put(&b, " "), put(&b, lexicon[title[1]]), put(&b, " =\n");
        int paragraphs = 3 + (int)below(&r, 6);
        for (int p = 0; p < paragraphs; p++) {
            int sentences = 2 + (int)below(&r, 4);
            for (int s = 0; s < sentences; s++) {
                int v = (int)below(&r, VARS), kind = (int)below(&r, 6);
                if (kind == 0 && !defined[v]) {
                    snprintf(num, sizeof num, "%d", value[v]);
                    put(&b, "let "), put(&b, var[v]), put(&b, " be "), put(&b, num), put(&b, ".");
                    defined[v] = 1;
                } else if (kind <= 1 && defined[v]) {
                    snprintf(num, sizeof num, "%d", value[v]);
                    put(&b, var[v]), put(&b, " is "), put(&b, num), put(&b, ".");
                } else {
                    int words = 4 + (int)below(&r, 9);
                    for (int w = 0; w < words; w++) {
                        if (w) put(&b, below(&r, 12) == 0 ? ", " : " ");
                        uint64_t u = below(&r, 20);
                        put(&b, u < 7 ? fn[below(&r, nfn)] : u < 17 ? lexicon[topic[zipf(&r, TOPIC)]]
                                                                     : lexicon[zipf(&r, LEXICON)]);
                    }
                    put(&b, ".");
                }
                put(&b, s + 1 < sentences ? " " : "\n");
            }
        }
        put(&b, "end of "), put(&b, lexicon[title[0]]), put(&b, " "), put(&b, lexicon[title[1]]), put(&b, ".\n\n");
    }
    b.s[b.n] = 0;
    return b.s;
}

/* ---- tasks -------------------------------------------------------------------------------- */

static const char TASK_VOCAB[] = "_=.+0123456789abcdefghij"; /* '_' pads */

static void set_vocab(tr_task *t, const unsigned char *chars, int n) {
    for (int c = 0; c < 256; c++) t->ids[c] = -1;
    for (int i = 0; i < n; i++) t->chars[i] = chars[i], t->ids[chars[i]] = i;
    t->V = n;
}

/* Vocabulary of a text: its distinct bytes in byte order; then the text as ids. */
static pe_status text_to_ids(tr_task *t, const unsigned char *text, int64_t n, pe_err *err) {
    int seen[256] = {0};
    for (int64_t i = 0; i < n; i++) seen[text[i]] = 1;
    unsigned char chars[256];
    int V = 0;
    for (int c = 0; c < 256; c++)
        if (seen[c]) chars[V++] = (unsigned char)c;
    set_vocab(t, chars, V);
    int64_t n_eval = n / 10;
    t->n_train = n - n_eval, t->n_eval = n_eval;
    t->train = malloc((size_t)t->n_train), t->eval = malloc((size_t)t->n_eval);
    if (!t->train || !t->eval) return pe_error(err, PE_ENOMEM, "out of memory for the text");
    for (int64_t i = 0; i < n; i++) {
        uint8_t id = (uint8_t)t->ids[text[i]];
        if (i < t->n_train) t->train[i] = id;
        else t->eval[i - t->n_train] = id;
    }
    return PE_OK;
}

pe_status tr_task_init(tr_task *t, tr_task_kind kind, int64_t L, const char *text_path,
                       uint64_t corpus_seed, int64_t n_chars, pe_err *err) {
    memset(t, 0, sizeof *t);
    t->kind = kind, t->L = L, t->alphabet = 10;
    if (kind >= TR_TASK_COUNT) return pe_error(err, PE_EINVAL, "unknown task %d", (int)kind);
    if (L < 1) return pe_error(err, PE_EINVAL, "training length %lld must be >= 1", (long long)L);
    if (kind != TR_TASK_LM) {
        set_vocab(t, (const unsigned char *)TASK_VOCAB, (int)strlen(TASK_VOCAB));
        return PE_OK;
    }
    pe_status st;
    if (!text_path) {
        int64_t n = n_chars + n_chars / 9;
        char *text = tr_corpus_generate(corpus_seed, n);
        if (!text) return pe_error(err, PE_ENOMEM, "out of memory for the corpus");
        st = text_to_ids(t, (const unsigned char *)text, n, err);
        free(text);
    } else {
        long long n = 0;
        FILE *f = pe_in_open(text_path, (long long)1 << 32, &n, err);
        if (!f) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return pe_error(err, PE_EIO, "--text: %s", why);
        }
        unsigned char *text = n > 0 ? malloc((size_t)n) : NULL;
        size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
        fclose(f);
        if (n <= 0 || got != (size_t)n) {
            free(text);
            return pe_error(err, PE_EIO, "--text: cannot read '%s'", text_path);
        }
        st = text_to_ids(t, text, n, err);
        free(text);
    }
    if (st) {
        tr_task_free(t);
        return st;
    }
    if (t->n_eval < 8 * L + 1 || t->n_train < L + 1) {
        int64_t need = 10 * (8 * L + 1);
        tr_task_free(t);
        return pe_error(err, PE_EINVAL, "--text: %lld bytes needed for training length %lld (10%% are held out and must hold 8L + 1)",
                        (long long)need, (long long)L);
    }
    return PE_OK;
}

void tr_task_free(tr_task *t) {
    free(t->train), free(t->eval);
    t->train = t->eval = NULL;
}

static const char HINT_LETTERS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";

pe_status tr_task_set_hints(tr_task *t, int hints, pe_err *err) {
    if (!hints) return PE_OK;
    if (t->kind != TR_TASK_ADD) return pe_error(err, PE_EINVAL, "--hints is for add, not %s", tr_task_name(t->kind));
    if (t->L + 1 > TR_HINTS_MAX)
        return pe_error(err, PE_EINVAL, "--hints: sums of %lld digits need more than the %d hint letters", (long long)(t->L + 1),
                        TR_HINTS_MAX);
    char v[64];
    snprintf(v, sizeof v, "%s%s", TASK_VOCAB, HINT_LETTERS);
    set_vocab(t, (const unsigned char *)v, (int)strlen(v));
    t->hints = 1;
    return PE_OK;
}

int tr_task_has_strings(tr_task_kind k) {
    return k == TR_TASK_COPY || k == TR_TASK_REVERSE || k == TR_TASK_SORT || k == TR_TASK_DUPLICATE;
}

pe_status tr_task_set_layout(tr_task *t, int alphabet, int slots, pe_err *err) {
    if ((alphabet != 10 || slots) && !tr_task_has_strings(t->kind))
        return pe_error(err, PE_EINVAL, "--alphabet and --layout slots are for copy, reverse, sort and duplicate, not %s",
                        tr_task_name(t->kind));
    if (alphabet < 2 || alphabet > 10) return pe_error(err, PE_EINVAL, "--alphabet: %d symbols; need 2..10", alphabet);
    t->alphabet = alphabet, t->slots = slots;
    return PE_OK;
}

/* answer symbols of a string task over content length n */
static int64_t answer_len(const tr_task *t, int64_t n) { return t->kind == TR_TASK_DUPLICATE ? 2 * n : n; }

int64_t tr_task_seq_len(const tr_task *t, int64_t n) {
    if (t->slots) return n + answer_len(t, n); /* content, then one slot per answer symbol */
    switch (t->kind) {
    case TR_TASK_DUPLICATE: return 3 * n + 1;
    case TR_TASK_LM: return n;
    case TR_TASK_ADD: /* a + b = s . : n, 1, n, 1, n + 1, 1 characters, less one; hints: a hint a digit, n + 1 each */
        return t->hints ? 6 * n + 8 : 3 * n + 3;
    case TR_TASK_COUNTING: return 2 * n + 4; /* n statements of at most 2, v = 10 . less one */
    case TR_TASK_PARITY: return n + 2;       /* n bits = p . less one */
    case TR_TASK_SUM: return 2 * n + 1;      /* n terms and n - 1 '+', = s . less one */
    default: return 2 * n + 1;          /* x = y . */
    }
}

/* The counting task of Golovneva et al. 2024 (CoPE), as facebookresearch/RAM's
 * projects/cope/scripts/count_data_gen.py generates it, each of its statements in one or two
 * characters of the tasks' vocabulary (its "=" and ";" words carry nothing and are dropped):
 * n statements, each drawn with weights SET 1 : PASS 50 : INCREMENT 7 over COUNT_VARS
 * variables, then a question about a variable that was set, answered by its value. SET "a0"
 * (their "a = 0 ;") resets any of the variables to 0; PASS "." (their "pass;") does nothing;
 * INCREMENT "a+" (their "a ++;") adds 1 to one of the variables already set, uniformly, and is
 * drawn again when none is set or the value would pass COUNT_MAX; the question "a=" (their
 * "print a") names a set variable and the answer is its value, 0 .. COUNT_MAX, one or two
 * digits, then ".". Their examples with no variable set at the question are drawn again, and
 * so are these. So "b0..b+.a0.b+..b=2." counts b's increments since b was last set, in a
 * context whose length in tokens is not the count (statements of 1 and 2 tokens). Besides
 * the characters, two differences: n is the trainer's content length (1..L in training, as
 * for every task; theirs draw 3..512 statements), and the answer 10 takes two characters. */
enum { COUNT_VARS = 3, COUNT_MAX = 10, COUNT_W_SET = 1, COUNT_W_PASS = 50, COUNT_W_INC = 7 };

static int64_t make_count(const tr_task *t, pe_rng *r, int64_t n, int32_t *seq, int64_t *eq) {
    const int *id = t->ids;
    for (int tries = 0;; tries++) {
        int val[COUNT_VARS], set[COUNT_VARS], nset = 0;
        int64_t len = 0;
        for (int64_t s = 0; s < n; s++) {
            /* their generate_statement draws up to 100 times; past that (never seen: PASS,
             * drawn with probability 50/58, always succeeds) it is a PASS */
            int done = 0;
            for (int k = 0; k < 100 && !done; k++) {
                const uint64_t w = below(r, COUNT_W_SET + COUNT_W_PASS + COUNT_W_INC);
                if (w < COUNT_W_SET) { /* any variable, set or not */
                    int v = (int)below(r, COUNT_VARS), j = 0;
                    while (j < nset && set[j] != v) j++;
                    if (j == nset) set[nset++] = v; /* in order of first setting, as their dict */
                    val[v] = 0;
                    seq[len++] = id['a' + v], seq[len++] = id['0'];
                    done = 1;
                } else if (w < COUNT_W_SET + COUNT_W_PASS) {
                    seq[len++] = id['.'];
                    done = 1;
                } else if (nset) {
                    int v = set[below(r, (uint64_t)nset)];
                    if (val[v] + 1 <= COUNT_MAX) {
                        val[v]++;
                        seq[len++] = id['a' + v], seq[len++] = id['+'];
                        done = 1;
                    }
                }
            }
            if (!done) seq[len++] = id['.'];
        }
        if (!nset && tries < 100000) continue; /* no variable to ask about: drawn again */
        if (!nset) { /* a bound on the loop (n = 1 succeeds once in 58): the first statement a SET */
            seq[0] = id['a'], val[0] = 0, set[nset++] = 0;
            memmove(seq + 2, seq + 1, sizeof(int32_t) * (size_t)(len - 1)), len++, seq[1] = id['0'];
        }
        int v = set[below(r, (uint64_t)nset)];
        seq[len++] = id['a' + v];
        *eq = len;
        seq[len++] = id['='];
        if (val[v] >= 10) seq[len++] = id['0' + val[v] / 10];
        seq[len++] = id['0' + val[v] % 10];
        seq[len++] = id['.'];
        return len;
    }
}

/* n symbols of a string task's content into x */
static void draw_string(const tr_task *t, pe_rng *r, int64_t n, int32_t *x) {
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)below(r, (uint64_t)t->alphabet);
}

/* The answer of a string task to the content x (n symbols) into out; returns its length. */
static int64_t answer_of(const tr_task *t, const int32_t *x, int64_t n, int32_t *out) {
    if (t->kind == TR_TASK_SORT) { /* counting sort of the alphabet */
        int64_t count[10] = {0}, len = 0;
        for (int64_t i = 0; i < n; i++) count[x[i]]++;
        for (int c = 0; c < 10; c++)
            for (int64_t k = 0; k < count[c]; k++) out[len++] = c;
        return len;
    }
    for (int64_t i = 0; i < answer_len(t, n); i++) out[i] = x[t->kind == TR_TASK_REVERSE ? n - 1 - i : i % n];
    return answer_len(t, n);
}

/* The operands of add at content length n: the longer has n digits, the other 1..n, either may
 * come first, no leading zero; digits least significant first in a zeroed buffer (malloc'd) of
 * 2 (n + 1), the second operand from n + 1 on. */
static int32_t *draw_addends(pe_rng *r, int64_t n, int64_t *na, int64_t *nb) {
    *na = n, *nb = 1 + (int64_t)below(r, (uint64_t)n);
    if (below(r, 2)) *na = *nb, *nb = n;
    int32_t *a = calloc((size_t)(2 * n + 2), sizeof(int32_t)), *b = a + n + 1;
    TR_ASSERT(a);
    for (int64_t i = 0; i < *na; i++) a[i] = (int32_t)below(r, 10);
    for (int64_t i = 0; i < *nb; i++) b[i] = (int32_t)below(r, 10);
    if (*na > 1 && a[*na - 1] == 0) a[*na - 1] = 1 + (int32_t)below(r, 9);
    if (*nb > 1 && b[*nb - 1] == 0) b[*nb - 1] = 1 + (int32_t)below(r, 9);
    return a;
}

/* add with index hints (tr_task_set_hints): the operands as add draws them, padded with zeros
 * to n + 1 digits, hint letters from a start drawn so that all n + 1 fit. */
static int64_t make_hinted_sum(const tr_task *t, pe_rng *r, int64_t n, int32_t *seq, int64_t *eq) {
    const int *id = t->ids;
    const int64_t nd = n + 1;
    TR_ASSERT(nd <= TR_HINTS_MAX); /* tr_task_set_hints and tr_run_init refuse longer sums */
    const int64_t h0 = (int64_t)below(r, (uint64_t)(TR_HINTS_MAX - nd + 1));
    int64_t na, nb, len = 0;
    int32_t *a = draw_addends(r, n, &na, &nb), *b = a + nd;
    /* place i (0: units) has the hint h0 + nd - 1 - i: consecutive from the most significant */
    for (int k = 0; k < 2; k++) {
        const int32_t *x = k ? b : a;
        for (int64_t i = nd - 1; i >= 0; i--) seq[len++] = id[(int)HINT_LETTERS[h0 + nd - 1 - i]], seq[len++] = id['0' + x[i]];
        if (!k) seq[len++] = id['+'];
    }
    *eq = len;
    seq[len++] = id['='];
    int carry = 0;
    for (int64_t i = 0; i < nd; i++) {
        int s = a[i] + b[i] + carry;
        seq[len++] = id[(int)HINT_LETTERS[h0 + nd - 1 - i]], seq[len++] = id['0' + s % 10];
        carry = s / 10;
    }
    seq[len++] = id['.'];
    free(a);
    return len;
}

/* One example of a synthetic task with content length n into seq; returns its length and
 * the index of '='. */
static int64_t make_example(const tr_task *t, pe_rng *r, int64_t n, int32_t *seq, int64_t *eq) {
    const int *id = t->ids;
    int64_t len = 0;
    if (t->kind == TR_TASK_COUNTING) return make_count(t, r, n, seq, eq);
    if (t->kind == TR_TASK_ADD && t->hints) return make_hinted_sum(t, r, n, seq, eq);
    if (t->kind == TR_TASK_PARITY || t->kind == TR_TASK_SUM) { /* one digit answers: n bits, or n terms 1..9 */
        const int sum = t->kind == TR_TASK_SUM;
        int acc = 0;
        for (int64_t i = 0; i < n; i++) {
            const int d = sum ? 1 + (int)below(r, 9) : (int)below(r, 2);
            if (sum && i) seq[len++] = id['+'];
            seq[len++] = id['0' + d];
            acc = (acc + d) % (sum ? 10 : 2);
        }
        *eq = len;
        seq[len++] = id['='], seq[len++] = id['0' + acc], seq[len++] = id['.'];
        return len;
    }
    if (t->kind == TR_TASK_ADD) {
        int64_t na, nb;
        int32_t *a = draw_addends(r, n, &na, &nb), *b = a + n + 1;
        for (int64_t i = na - 1; i >= 0; i--) seq[len++] = id['0' + a[i]];
        seq[len++] = id['+'];
        for (int64_t i = nb - 1; i >= 0; i--) seq[len++] = id['0' + b[i]];
        *eq = len;
        seq[len++] = id['='];
        int carry = 0;
        for (int64_t i = 0; i < n + 1; i++) {
            int s = a[i] + b[i] + carry; /* zero past each operand's digits */
            seq[len++] = id['0' + s % 10];
            carry = s / 10;
        }
        seq[len++] = id['.'];
        free(a);
        return len;
    }
    int32_t *x = malloc(sizeof(int32_t) * (size_t)(3 * n));
    TR_ASSERT(x);
    draw_string(t, r, n, x);
    for (int64_t i = 0; i < n; i++) seq[len++] = id['a' + x[i]];
    *eq = len;
    seq[len++] = id['='];
    int64_t na = answer_of(t, x, n, x + n);
    for (int64_t i = 0; i < na; i++) seq[len++] = id['a' + x[n + i]];
    seq[len++] = id['.'];
    free(x);
    return len;
}

/* The answer-slot layout (data.h): B examples of one content length (n_fixed, or drawn from
 * 1..n_max for the batch), the content then a slot ('_') per answer symbol; returns T. */
static int64_t slots_batch(const tr_task *t, pe_rng *r, int64_t B, int64_t n_fixed, int64_t n_max,
                           int32_t *in, int32_t *tgt) {
    const int64_t n = n_fixed ? n_fixed : 1 + (int64_t)below(r, (uint64_t)n_max), na = answer_len(t, n), T = n + na;
    int32_t *x = malloc(sizeof(int32_t) * (size_t)(n + na));
    TR_ASSERT(x);
    for (int64_t b = 0; b < B; b++) {
        draw_string(t, r, n, x);
        answer_of(t, x, n, x + n);
        for (int64_t i = 0; i < T; i++) {
            in[b * T + i] = i < n ? t->ids['a' + x[i]] : t->ids['_'];
            tgt[b * T + i] = i < n ? -1 : t->ids['a' + x[i]];
        }
    }
    free(x);
    return T;
}

/* Fills B examples (content lengths from n_of) padded to the longest; returns T. */
static int64_t task_batch(const tr_task *t, pe_rng *r, int64_t B, int64_t n_fixed, int64_t n_max,
                          int32_t *in, int32_t *tgt) {
    if (t->slots) return slots_batch(t, r, B, n_fixed, n_max, in, tgt);
    int64_t Tmax = tr_task_seq_len(t, n_fixed ? n_fixed : n_max);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(Tmax + 1) * (size_t)B);
    int64_t *len = malloc(sizeof(int64_t) * (size_t)B), *eq = malloc(sizeof(int64_t) * (size_t)B), T = 1;
    TR_ASSERT(seq && len && eq);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = n_fixed ? n_fixed : 1 + (int64_t)below(r, (uint64_t)n_max);
        len[b] = make_example(t, r, n, seq + b * (Tmax + 1), &eq[b]);
        T = len[b] - 1 > T ? len[b] - 1 : T;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++) {
            const int32_t *s = seq + b * (Tmax + 1);
            int live = i + 1 < len[b];
            in[b * T + i] = i < len[b] ? s[i] : 0;
            tgt[b * T + i] = live && i >= eq[b] ? s[i + 1] : -1;
        }
    free(seq), free(len), free(eq);
    return T;
}

int64_t tr_task_train_batch(const tr_task *t, uint64_t seed, int64_t step, int64_t B, int32_t *in,
                            int32_t *tgt) {
    if (t->kind != TR_TASK_LM) {
        pe_rng r = rng_of(seed, 0x7a, (uint64_t)step);
        return task_batch(t, &r, B, 0, t->L, in, tgt);
    }
    const int64_t T = t->L, n = t->n_train;
    for (int64_t b = 0; b < B; b++) {
        pe_rng r = rng_of(seed, 0x57, (uint64_t)b);
        int64_t start = (int64_t)(below(&r, (uint64_t)n) + (uint64_t)step * (uint64_t)T) % n;
        for (int64_t i = 0; i < T; i++) {
            in[b * T + i] = t->train[(start + i) % n];
            tgt[b * T + i] = t->train[(start + i + 1) % n];
        }
    }
    return T;
}

int64_t tr_task_eval_batch(const tr_task *t, int64_t n, int64_t index, int64_t B, int32_t *in,
                           int32_t *tgt) {
    if (t->kind != TR_TASK_LM) {
        pe_rng r = rng_of(0xe7a1, (uint64_t)n, (uint64_t)index);
        return task_batch(t, &r, B, n, n, in, tgt);
    }
    for (int64_t b = 0; b < B; b++) {
        pe_rng r = rng_of(0xe7a1, (uint64_t)n, (uint64_t)(index * B + b));
        int64_t start = (int64_t)below(&r, (uint64_t)(t->n_eval - n));
        for (int64_t i = 0; i < n; i++) {
            in[b * n + i] = t->eval[start + i];
            tgt[b * n + i] = t->eval[start + i + 1];
        }
    }
    return n;
}
