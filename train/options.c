/* posenc train's options (--NAME VALUE and the layer keys), their checks and defaults, and the
 * task a set of options trains on (trainer.h). */
#include "trainer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/layer.h"

/* ---- options ------------------------------------------------------------------------------ */
enum { OPT_STR, OPT_INT, OPT_REAL, OPT_U64, OPT_LIST };
static const struct option {
    const char *name;
    int type;
    size_t off, size;
    const char *arg, *help;
} OPTIONS[] = {
#define O(name, type, field, arg, help) {name, type, offsetof(tr_options, field), sizeof(((tr_options *)0)->field), arg, help}
    O("task", OPT_STR, task, "NAME", "lm (default), copy, reverse, sort, duplicate, add, count (CoPE's counting task; L counts its statements), parity or sum (Kazemnejad et al. 2023's: the 1s mod 2, n terms mod 10)"),
    O("alphabet", OPT_INT, alphabet, "K", "symbols of copy, reverse, sort and duplicate, 2..10 (default 10; Ruoss et al. 2023: 2)"),
    O("layout", OPT_STR, layout, "NAME",
      "decoder (default: causal, the answer after '=' as next tokens) or slots (Ruoss et al. 2023: a bidirectional encoder over the content and one empty slot per answer symbol, the answer read at the slots; copy, reverse, sort, duplicate)"),
    O("hints", OPT_INT, hints, "0|1",
      "add with index hints (Zhou et al. 2024): each digit of the operands and the sum after a letter naming its place, consecutive from a letter drawn per example (B0C1D2+B0C4D5=D7C5B0.); L + 1 <= 26 (default 0)"),
    O("length", OPT_INT, length, "L", "training length: lm context (default 64), or longest content of a task (default 16)"),
    O("text", OPT_STR, text, "FILE", "lm on this text (90% train, last 10% held out) instead of the generated corpus"),
    O("corpus-seed", OPT_U64, corpus_seed, "S", "seed of the generated corpus (default 1)"),
    O("corpus-chars", OPT_INT, corpus_chars, "N", "characters of generated training text (default 1000000)"),
    O("method", OPT_STR, method, "NAME", "positional encoding (default rope; see posenc methods)"),
    O("layers", OPT_INT, layers, "N", "blocks (default 2)"),
    O("width", OPT_INT, width, "C", "model width (default 64)"),
    O("heads", OPT_INT, heads, "H", "attention heads (default 4)"),
    O("mlp", OPT_INT, mlp, "F", "MLP width (default 4 * width)"),
    O("shape", OPT_INT, shape, "K", "SHAPE for absolute methods: shift in [0, K) per training sequence, K at evaluation (default 0: off)"),
    O("random-positions", OPT_INT, random_positions, "N",
      "randomized positions (Ruoss et al. 2023), every method but xl: each sequence of T tokens takes T sorted distinct positions drawn uniformly from [0, N) in training and at evaluation, N >= the longest sequence (default 0: 0..T-1)"),
    O("layers-methods", OPT_STR, layers_methods, "M,M,..",
      "one method per layer, cycled over --layers (e.g. rope,none: Llama 4's NoPE interleaving); methods of the layers or none; replaces --method"),
    O("layers-windows", OPT_STR, layers_windows, "W,W,..",
      "a sliding window per layer, cycled over --layers: a query sees the last W tokens, itself included (HF's sliding_window; FlashAttention's window_size (W - 1, 0)); 0: all of them (e.g. 16,16,16,0 with --layers-methods rope,rope,rope,none: Cohere2's RNoPE-SWA); the decoder layout"),
    O("nope-temperature", OPT_REAL, nope_temperature, "F",
      "Llama 4's attention-temperature tuning on the none layers of --layers-methods: queries at position p times 1 + attn_scale ln(1 + floor((p + 1) / F)) (Llama 4: F 8192; --attn_scale X, default 0.1; default 0: off)"),
    O("steps", OPT_INT, steps, "N", "optimizer steps (default 1500)"),
    O("batch", OPT_INT, batch, "B", "sequences per step (default 4)"),
    O("micro-batch", OPT_INT, micro_batch, "N",
      "sequences per forward and backward pass: a step's gradient is its passes' gradients added in order, so that a pass's activations stay in cache (default 0: as many as make 256 tokens, at least one; methods with memory: the whole batch)"),
    O("dropout", OPT_REAL, dropout, "P",
      "dropout in training of the embedding's output and of each attention's and MLP's output before its residual sum (default 0; Ruoss et al. 2023: 0.1)"),
    O("warmup", OPT_INT, warmup, "N", "linear warm-up steps (default steps / 10)"),
    O("lr", OPT_REAL, lr, "X", "peak learning rate (default 1e-2)"),
    O("min-lr", OPT_REAL, min_lr, "X", "final learning rate as a fraction of the peak, cosine decay (default 0.1)"),
    O("weight-decay", OPT_REAL, weight_decay, "X", "AdamW decoupled weight decay of matrices and tables (default 0.1)"),
    O("clip", OPT_REAL, clip, "X", "gradient clipping by global norm (default 1; 0 = off)"),
    O("beta1", OPT_REAL, beta1, "X", "AdamW beta1 (default 0.9)"),
    O("beta2", OPT_REAL, beta2, "X", "AdamW beta2 (default 0.95)"),
    O("eps", OPT_REAL, eps, "X", "AdamW epsilon (default 1e-8)"),
    O("seed", OPT_U64, seed, "S", "seed of the initial weights and of the batches (default 1)"),
    O("eval", OPT_LIST, eval, "M,M,..", "evaluate at these multiples of the training length (default 1,2,4,8)"),
    O("eval-tokens", OPT_INT, eval_tokens, "N", "tokens evaluated per length, at least 16 sequences (default 8192)"),
    O("score-lengths", OPT_STR, score_lengths, "A-B",
      "Ruoss et al. 2023's score: mean token accuracy over every content length A..B, 512 sequences each (theirs: 41-100 at L 40; default: off)"),
    O("score-metric", OPT_STR, score_metric, "NAME",
      "what --score-lengths averages: token_acc (default; Ruoss et al. 2023) or exact (Kazemnejad et al. 2023's accuracy, the whole answer right)"),
#undef O
};
enum { N_OPTIONS = sizeof OPTIONS / sizeof OPTIONS[0] };

void tr_options_default(tr_options *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->task, sizeof o->task, "lm");
    snprintf(o->method, sizeof o->method, "rope");
    snprintf(o->layout, sizeof o->layout, "decoder");
    snprintf(o->score_metric, sizeof o->score_metric, "token_acc");
    o->alphabet = 10;
    o->length = 0; /* by task: 64 for lm, 16 otherwise (tr_options_check fills it) */
    o->corpus_seed = 1, o->corpus_chars = 1000000;
    o->layers = 2, o->width = 64, o->heads = 4, o->mlp = 0;
    o->steps = 1500, o->batch = 4, o->warmup = -1;
    o->lr = 1e-2, o->min_lr = 0.1, o->weight_decay = 0.1, o->clip = 1.0;
    o->beta1 = 0.9, o->beta2 = 0.95, o->eps = 1e-8;
    o->seed = 1;
    o->n_eval = 4, o->eval[0] = 1, o->eval[1] = 2, o->eval[2] = 4, o->eval[3] = 8;
    o->eval_tokens = 8192;
}

static const struct option *find_option(const char *name) {
    for (int i = 0; i < N_OPTIONS; i++)
        if (!strcmp(OPTIONS[i].name, name)) return &OPTIONS[i];
    return NULL;
}

static int is_layer_key(const char *name) {
    for (int k = 0; pe_config_key_name(k); k++)
        if (!strcmp(pe_config_key_name(k), name)) return 1;
    return 0;
}

int tr_options_known(const char *name) { return find_option(name) || is_layer_key(name); }

int tr_parse_int(const char *s, int64_t *v) {
    char *end;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end) return -1;
    *v = x;
    return 0;
}

pe_status tr_options_set(tr_options *o, const char *name, const char *value, pe_err *err) {
    const struct option *op = find_option(name);
    if (!op) {
        static const char *const COMMON[] = {"method", "heads", "causal", "kv_heads", NULL};
        for (int i = 0; COMMON[i]; i++)
            if (!strcmp(COMMON[i], name)) return pe_error(err, PE_EKEY, "--%s is set by the model", name);
        if (!is_layer_key(name)) return pe_error(err, PE_EKEY, "unknown option --%s", name);
        int k = 0;
        while (k < o->n_keys && strcmp(o->key[k], name)) k++;
        if (k == TR_MAX_KEYS) return pe_error(err, PE_EKEY, "--%s: at most %d layer keys", name, TR_MAX_KEYS);
        if (strlen(value) >= sizeof o->val[0]) return pe_error(err, PE_EKEY, "--%s: value too long", name);
        snprintf(o->key[k], sizeof o->key[k], "%s", name);
        snprintf(o->val[k], sizeof o->val[k], "%s", value);
        if (k == o->n_keys) o->n_keys++;
        return PE_OK;
    }
    char *field = (char *)o + op->off;
    char *end;
    switch (op->type) {
    case OPT_STR:
        if (strlen(value) >= op->size) return pe_error(err, PE_EKEY, "--%s: value too long", name);
        snprintf(field, op->size, "%s", value);
        return PE_OK;
    case OPT_INT: {
        int64_t v;
        if (tr_parse_int(value, &v)) return pe_error(err, PE_EKEY, "--%s: '%s' is not an integer", name, value);
        *(int64_t *)field = v;
        return PE_OK;
    }
    case OPT_U64: {
        unsigned long long v = strtoull(value, &end, 10);
        if (!*value || *end || *value == '-') return pe_error(err, PE_EKEY, "--%s: '%s' is not a non-negative integer", name, value);
        *(uint64_t *)field = v;
        return PE_OK;
    }
    case OPT_REAL: {
        double v = strtod(value, &end);
        if (!*value || *end || !isfinite(v)) return pe_error(err, PE_EKEY, "--%s: '%s' is not a number", name, value);
        *(double *)field = v;
        return PE_OK;
    }
    default: { /* the evaluation multiples */
        char buf[128];
        snprintf(buf, sizeof buf, "%s", value);
        int n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int64_t v;
            if (n == TR_MAX_EVAL || tr_parse_int(tok, &v) || v < 1)
                return pe_error(err, PE_EKEY, "--eval: need 1 to %d positive integers separated by commas", TR_MAX_EVAL);
            o->eval[n++] = v;
        }
        if (!n) return pe_error(err, PE_EKEY, "--eval: need at least one multiple");
        o->n_eval = n;
        return PE_OK;
    }
    }
}

int tr_options_list(const tr_options *o, char names[][40], char values[][520], int max) {
    int n = 0;
    for (int i = 0; i < N_OPTIONS && n < max; i++, n++) {
        const char *field = (const char *)o + OPTIONS[i].off;
        snprintf(names[n], 40, "%s", OPTIONS[i].name);
        switch (OPTIONS[i].type) {
        case OPT_STR: snprintf(values[n], 520, "%s", field); break;
        case OPT_INT: snprintf(values[n], 520, "%lld", (long long)*(const int64_t *)field); break;
        case OPT_U64: snprintf(values[n], 520, "%llu", (unsigned long long)*(const uint64_t *)field); break;
        case OPT_REAL: snprintf(values[n], 520, "%.17g", *(const double *)field); break;
        default: {
            values[n][0] = 0;
            for (int k = 0; k < o->n_eval; k++)
                snprintf(values[n] + strlen(values[n]), 520 - strlen(values[n]), "%s%lld", k ? "," : "", (long long)o->eval[k]);
        }
        }
    }
    for (int k = 0; k < o->n_keys && n < max; k++, n++) {
        snprintf(names[n], 40, "%s", o->key[k]);
        snprintf(values[n], 520, "%s", o->val[k]);
    }
    return n;
}

void tr_options_help(void) {
    for (int i = 0; i < N_OPTIONS; i++)
        printf("  --%-16s %-7s %s\n", OPTIONS[i].name, OPTIONS[i].arg, OPTIONS[i].help);
    printf("  --KEY VALUE                any key of the layer contract for the method (e.g. --num_buckets 32)\n");
}

pe_status tr_options_check(const tr_options *o, pe_err *err) {
    int task = tr_task_from_name(o->task);
    if (task < 0) return pe_error(err, PE_EKEY, "--task: unknown task '%s' (lm, copy, reverse, sort, duplicate, add, count, parity, sum)", o->task);
    const int slots = tr_options_slots(o);
    if (!slots && strcmp(o->layout, "decoder"))
        return pe_error(err, PE_EKEY, "--layout: unknown layout '%s' (decoder, slots)", o->layout);
    if ((slots || o->alphabet != 10) && !tr_task_has_strings((tr_task_kind)task))
        return pe_error(err, PE_EKEY, "--%s is for copy, reverse, sort and duplicate, not %s", slots ? "layout slots" : "alphabet", o->task);
    if (o->alphabet < 2 || o->alphabet > 10) return pe_error(err, PE_EKEY, "--alphabet: %lld symbols; need 2..10", (long long)o->alphabet);
    if (o->hints != 0 && o->hints != 1) return pe_error(err, PE_EKEY, "--hints: %lld; 0 or 1", (long long)o->hints);
    if (o->hints && task != TR_TASK_ADD) return pe_error(err, PE_EKEY, "--hints is for add, not %s", o->task);
    const char *why;
    tr_placement place = tr_method_placement(o->method, &why);
    const int nsched = tr_schedule_method(o->layers_methods, 0, NULL, 0);
    if (o->layers_methods[0] && !nsched)
        return pe_error(err, PE_EKEY, "--layers-methods '%s': need method names separated by commas", o->layers_methods);
    int has_none = 0;
    for (int i = 0; i < nsched; i++) {
        char lm[32];
        tr_schedule_method(o->layers_methods, i, lm, sizeof lm);
        tr_placement p = tr_method_placement(lm, &why);
        if (p == TR_PLACE_NONE) return pe_error(err, PE_EKEY, "--layers-methods: method '%s': %s", lm, why);
        if (p != TR_PLACE_LAYER && pe_method_from_name(lm) != PE_METHOD_NONE)
            return pe_error(err, PE_EKEY,
                            "--layers-methods: %s is not a method of the layers (absolute encodings enter once at the input, complex-valued ones replace block 0; none is allowed)",
                            lm);
        has_none |= pe_method_from_name(lm) == PE_METHOD_NONE;
    }
    if (nsched > o->layers)
        return pe_error(err, PE_EKEY, "--layers-methods names %d methods for %lld layers", nsched, (long long)o->layers);
    const int nwin = tr_schedule_method(o->layers_windows, 0, NULL, 0);
    if (o->layers_windows[0] && !nwin)
        return pe_error(err, PE_EKEY, "--layers-windows '%s': need token counts separated by commas", o->layers_windows);
    for (int i = 0; i < nwin; i++) {
        char w[32], *end;
        tr_schedule_method(o->layers_windows, i, w, sizeof w);
        const long long v = strtoll(w, &end, 10);
        if (*end || end == w || v < 0 || v > TR_MAX_WINDOW)
            return pe_error(err, PE_EKEY, "--layers-windows: '%s' is not a token count 0 .. %d (0: the whole context)", w, TR_MAX_WINDOW);
    }
    if (nwin > o->layers)
        return pe_error(err, PE_EKEY, "--layers-windows names %d windows for %lld layers", nwin, (long long)o->layers);
    if (nwin && tr_options_slots(o))
        return pe_error(err, PE_EKEY, "--layers-windows is for the decoder layout: the slots' encoder attends both ways");
    if (nwin && tr_options_key(o, "window"))
        return pe_error(err, PE_EKEY, "--layers-windows and --window both set the windows: give one");
    if (!(o->nope_temperature == 0 || (o->nope_temperature >= 1 && o->nope_temperature <= 1e15)))
        return pe_error(err, PE_EKEY, "--nope-temperature: %g must be 0 (off) or a floor_scale within 1 .. 1e15", o->nope_temperature);
    if (o->nope_temperature && !has_none)
        return pe_error(err, PE_EKEY, "--nope-temperature applies to the none layers of --layers-methods%s",
                        nsched ? ", which has none" : ", which is not given");
    if (nsched) place = TR_PLACE_LAYER;
    else if (place == TR_PLACE_NONE) return pe_error(err, PE_EKEY, "--method %s: %s", o->method, why);
    if (o->shape < 0) return pe_error(err, PE_EKEY, "--shape: %lld must be >= 0", (long long)o->shape);
    if (o->shape && place != TR_PLACE_INPUT)
        return pe_error(err, PE_EKEY, "--shape applies to absolute encodings (added at the input); %s is not one",
                        nsched ? o->layers_methods : o->method);
    if (o->random_positions < 0)
        return pe_error(err, PE_EKEY, "--random-positions: %lld must be >= 0", (long long)o->random_positions);
    if (o->random_positions && o->shape)
        return pe_error(err, PE_EKEY, "--random-positions and --shape both choose the positions: give one");
    if (o->length < 0 || o->length > 4096) return pe_error(err, PE_EKEY, "--length: need 1..4096");
    if (o->layers < 1 || o->layers > 64 || o->width < 2 || o->heads < 1 || o->width % o->heads || o->mlp < 0)
        return pe_error(err, PE_EKEY, "need 1 <= layers <= 64, heads >= 1 and a width that divides by heads");
    if (o->steps < 0 || o->batch < 1) return pe_error(err, PE_EKEY, "need steps >= 0 and batch >= 1");
    if (o->micro_batch < 0) return pe_error(err, PE_EKEY, "--micro-batch: %lld must be >= 0 (0: the default)", (long long)o->micro_batch);
    if (!(o->lr > 0) || o->min_lr < 0 || o->min_lr > 1 || o->weight_decay < 0 || o->clip < 0 ||
        o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1 || !(o->eps > 0))
        return pe_error(err, PE_EKEY, "need lr > 0, 0 <= min-lr <= 1, weight-decay >= 0, clip >= 0, betas in [0, 1), eps > 0");
    if (o->eval_tokens < 1) return pe_error(err, PE_EKEY, "--eval-tokens: need >= 1");
    if (!(o->dropout >= 0 && o->dropout < 1)) return pe_error(err, PE_EKEY, "--dropout: %g; need 0 <= P < 1", o->dropout);
    int64_t lo, hi;
    if (tr_options_score_range(o, &lo, &hi))
        return pe_error(err, PE_EKEY, "--score-lengths: '%s' is not A-B with 1 <= A <= B <= 8192", o->score_lengths);
    if (hi && task == TR_TASK_LM) return pe_error(err, PE_EKEY, "--score-lengths is for the tasks with answers, not lm");
    if (strcmp(o->score_metric, "token_acc") && strcmp(o->score_metric, "exact"))
        return pe_error(err, PE_EKEY, "--score-metric: unknown metric '%s' (token_acc, exact)", o->score_metric);
    if (o->corpus_chars < 10000) return pe_error(err, PE_EKEY, "--corpus-chars: need >= 10000");
    /* upper bounds: sizes from the command line or a checkpoint's metadata must not overflow
     * the products the run forms from them (parameters, batch and evaluation tokens) */
    static const struct { const char *name; size_t off; int64_t max; } MAX[] = {
        {"width", offsetof(tr_options, width), TR_MAX_WIDTH}, {"mlp", offsetof(tr_options, mlp), TR_MAX_MLP},
        {"batch", offsetof(tr_options, batch), TR_MAX_BATCH}, {"micro-batch", offsetof(tr_options, micro_batch), TR_MAX_BATCH},
        {"shape", offsetof(tr_options, shape), TR_MAX_SHAPE},
        {"random-positions", offsetof(tr_options, random_positions), TR_MAX_RANDOM_POSITIONS},
        {"steps", offsetof(tr_options, steps), TR_MAX_STEPS}, {"warmup", offsetof(tr_options, warmup), TR_MAX_STEPS},
        {"eval-tokens", offsetof(tr_options, eval_tokens), TR_MAX_EVAL_TOKENS},
        {"corpus-chars", offsetof(tr_options, corpus_chars), TR_MAX_CORPUS}};
    for (size_t i = 0; i < sizeof MAX / sizeof MAX[0]; i++) {
        int64_t v = *(const int64_t *)((const char *)o + MAX[i].off);
        if (v > MAX[i].max)
            return pe_error(err, PE_EKEY, "--%s: %lld is past the limit %lld", MAX[i].name, (long long)v, (long long)MAX[i].max);
    }
    for (int k = 0; k < o->n_eval; k++)
        if (o->eval[k] > TR_MAX_EVAL_MULT)
            return pe_error(err, PE_EKEY, "--eval: multiple %lld is past the limit %d", (long long)o->eval[k], TR_MAX_EVAL_MULT);
    if (o->random_positions && o->random_positions < o->length)
        return pe_error(err, PE_EKEY, "--random-positions %lld: N must be at least the training length %lld (a sequence takes distinct positions from [0, N))",
                        (long long)o->random_positions, (long long)o->length);
    return PE_OK;
}

const char *tr_options_layer_method(const tr_options *o, int64_t l, char *buf, size_t n) {
    if (!tr_schedule_method(o->layers_methods, l, buf, n)) snprintf(buf, n, "%s", o->method);
    return buf;
}

const char *tr_options_method_label(const tr_options *o, char *buf, size_t n) {
    if (o->layers_methods[0]) snprintf(buf, n, "%s per layer", o->layers_methods);
    else snprintf(buf, n, "%s", o->method);
    return buf;
}

/* Floyd's algorithm: for j = N-T .. N-1 add a uniform t in [0, j], or j itself when t is
 * already taken; every T-subset comes out equally likely. The set is kept sorted (binary
 * search, then insertion), O(T^2) moves at worst: below the O(T^2 C) of the attention that
 * reads the positions. */
void tr_random_positions(pe_rng *rng, int64_t N, int64_t T, int64_t *pos) {
    int64_t n = 0;
    for (int64_t j = N - T; j < N; j++) {
        int64_t t = (int64_t)(pe_rng_next(rng) % (uint64_t)(j + 1));
        int64_t lo = 0, hi = n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (pos[mid] < t) lo = mid + 1;
            else hi = mid;
        }
        if (lo < n && pos[lo] == t) t = j, lo = n; /* j is larger than everything drawn so far */
        memmove(pos + lo + 1, pos + lo, sizeof(int64_t) * (size_t)(n - lo));
        pos[lo] = t, n++;
    }
}

int tr_options_slots(const tr_options *o) { return !strcmp(o->layout, "slots"); }

int tr_options_score_range(const tr_options *o, int64_t *lo, int64_t *hi) {
    *lo = *hi = 0;
    if (!o->score_lengths[0]) return 0;
    long long a, b;
    char tail;
    if (sscanf(o->score_lengths, "%lld-%lld%c", &a, &b, &tail) != 2 || a < 1 || b < a || b > 8192) return -1;
    *lo = a, *hi = b;
    return 0;
}

const char *tr_options_key(const tr_options *o, const char *key) {
    for (int k = 0; k < o->n_keys; k++)
        if (!strcmp(o->key[k], key)) return o->val[k];
    return NULL;
}

/* Fills the task-dependent defaults. */
void tr_options_resolve(tr_options *o) {
    if (o->length == 0) o->length = tr_task_from_name(o->task) == TR_TASK_LM ? 64 : 16;
    /* a width past its limit is refused by tr_options_check; 4 * width must not overflow first */
    if (o->mlp == 0) o->mlp = o->width > 0 && o->width <= TR_MAX_WIDTH ? 4 * o->width : o->width;
    if (o->warmup < 0) o->warmup = o->steps / 10 > 1 ? o->steps / 10 : 1;
}

pe_status tr_task_from_options(tr_task *t, const tr_options *o, pe_err *err) {
    tr_options r = *o;
    tr_options_resolve(&r);
    pe_status st = tr_options_check(&r, err);
    if (st) return st;
    st = tr_task_init(t, (tr_task_kind)tr_task_from_name(r.task), r.length, r.text[0] ? r.text : NULL,
                      r.corpus_seed, r.corpus_chars, err);
    if (!st && ((st = tr_task_set_layout(t, (int)r.alphabet, tr_options_slots(&r), err)) ||
                (st = tr_task_set_hints(t, (int)r.hints, err))))
        tr_task_free(t);
    return st;
}

const char *tr_metric_name(const tr_task *t) { return t->kind == TR_TASK_LM ? "bpc" : "exact"; }
double tr_metric_value(const tr_task *t, const tr_metrics *m) { return t->kind == TR_TASK_LM ? m->bpc : m->exact; }

