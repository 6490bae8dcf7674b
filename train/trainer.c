/* One training run (trainer.h). */
#include "trainer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../src/io/layer.h"
#include "../src/io/safetensors.h"

/* ---- options ------------------------------------------------------------------------------ */
enum { OPT_STR, OPT_INT, OPT_REAL, OPT_U64, OPT_LIST };
static const struct option {
    const char *name;
    int type;
    size_t off, size;
    const char *arg, *help;
} OPTIONS[] = {
#define O(name, type, field, arg, help) {name, type, offsetof(tr_options, field), sizeof(((tr_options *)0)->field), arg, help}
    O("task", OPT_STR, task, "NAME", "lm (default), copy, reverse, sort, add or count (CoPE's counting task; L counts its statements)"),
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
    O("nope-temperature", OPT_REAL, nope_temperature, "F",
      "Llama 4's attention-temperature tuning on the none layers of --layers-methods: queries at position p times 1 + attn_scale ln(1 + floor((p + 1) / F)) (Llama 4: F 8192; --attn_scale X, default 0.1; default 0: off)"),
    O("steps", OPT_INT, steps, "N", "optimizer steps (default 1500)"),
    O("batch", OPT_INT, batch, "B", "sequences per step (default 4)"),
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
#undef O
};
enum { N_OPTIONS = sizeof OPTIONS / sizeof OPTIONS[0] };

void tr_options_default(tr_options *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->task, sizeof o->task, "lm");
    snprintf(o->method, sizeof o->method, "rope");
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

static int parse_int(const char *s, int64_t *v) {
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
        if (parse_int(value, &v)) return pe_error(err, PE_EKEY, "--%s: '%s' is not an integer", name, value);
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
            if (n == TR_MAX_EVAL || parse_int(tok, &v) || v < 1)
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
    if (task < 0) return pe_error(err, PE_EKEY, "--task: unknown task '%s' (lm, copy, reverse, sort, add)", o->task);
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
        if (p != TR_PLACE_LAYER && strcmp(lm, "none"))
            return pe_error(err, PE_EKEY,
                            "--layers-methods: %s is not a method of the layers (absolute encodings enter once at the input, complex-valued ones replace block 0; none is allowed)",
                            lm);
        has_none |= !strcmp(lm, "none");
    }
    if (nsched > o->layers)
        return pe_error(err, PE_EKEY, "--layers-methods names %d methods for %lld layers", nsched, (long long)o->layers);
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
    if (!(o->lr > 0) || o->min_lr < 0 || o->min_lr > 1 || o->weight_decay < 0 || o->clip < 0 ||
        o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1 || !(o->eps > 0))
        return pe_error(err, PE_EKEY, "need lr > 0, 0 <= min-lr <= 1, weight-decay >= 0, clip >= 0, betas in [0, 1), eps > 0");
    if (o->eval_tokens < 1) return pe_error(err, PE_EKEY, "--eval-tokens: need >= 1");
    if (o->corpus_chars < 10000) return pe_error(err, PE_EKEY, "--corpus-chars: need >= 10000");
    /* upper bounds: sizes from the command line or a checkpoint's metadata must not overflow
     * the products the run forms from them (parameters, batch and evaluation tokens) */
    static const struct { const char *name; size_t off; int64_t max; } MAX[] = {
        {"width", offsetof(tr_options, width), TR_MAX_WIDTH}, {"mlp", offsetof(tr_options, mlp), TR_MAX_MLP},
        {"batch", offsetof(tr_options, batch), TR_MAX_BATCH}, {"shape", offsetof(tr_options, shape), TR_MAX_SHAPE},
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

/* Fills the task-dependent defaults. */
static const char *key_value(const tr_options *o, const char *key) {
    for (int k = 0; k < o->n_keys; k++)
        if (!strcmp(o->key[k], key)) return o->val[k];
    return NULL;
}

static void resolve(tr_options *o) {
    if (o->length == 0) o->length = tr_task_from_name(o->task) == TR_TASK_LM ? 64 : 16;
    /* a width past its limit is refused by tr_options_check; 4 * width must not overflow first */
    if (o->mlp == 0) o->mlp = o->width > 0 && o->width <= TR_MAX_WIDTH ? 4 * o->width : o->width;
    if (o->warmup < 0) o->warmup = o->steps / 10 > 1 ? o->steps / 10 : 1;
}

pe_status tr_task_from_options(tr_task *t, const tr_options *o, pe_err *err) {
    tr_options r = *o;
    resolve(&r);
    pe_status st = tr_options_check(&r, err);
    if (st) return st;
    return tr_task_init(t, (tr_task_kind)tr_task_from_name(r.task), r.length, r.text[0] ? r.text : NULL,
                        r.corpus_seed, r.corpus_chars, err);
}

const char *tr_metric_name(const tr_task *t) { return t->kind == TR_TASK_LM ? "bpc" : "exact"; }
double tr_metric_value(const tr_task *t, const tr_metrics *m) { return t->kind == TR_TASK_LM ? m->bpc : m->exact; }

/* ---- the run ---------------------------------------------------------------------------------- */

static pe_status reserve(tr_run *r, int64_t N, pe_err *err) {
    if (N <= r->cap) return PE_OK;
    free(r->in), free(r->tgt), free(r->pos);
    r->in = malloc(sizeof(int32_t) * (size_t)N), r->tgt = malloc(sizeof(int32_t) * (size_t)N);
    r->pos = malloc(sizeof(int64_t) * (size_t)N);
    r->cap = r->in && r->tgt && r->pos ? N : 0;
    return r->cap ? PE_OK : pe_error(err, PE_ENOMEM, "out of memory for a batch of %lld tokens", (long long)N);
}

pe_status tr_run_init(tr_run *r, const tr_options *o, const tr_task *task, pe_err *err) {
    memset(r, 0, sizeof *r);
    r->o = *o;
    resolve(&r->o);
    pe_status st = tr_options_check(&r->o, err);
    if (st) return st;
    if (task->kind != (tr_task_kind)tr_task_from_name(r->o.task) || task->L != r->o.length)
        return pe_error(err, PE_EINVAL, "the task does not match the options");
    r->task = task;
    tr_model_config mc = {0};
    mc.V = task->V, mc.layers = r->o.layers, mc.C = r->o.width, mc.heads = r->o.heads, mc.F = r->o.mlp;
    int64_t longest = 1;
    for (int k = 0; k < r->o.n_eval; k++) longest = r->o.eval[k] > longest ? r->o.eval[k] : longest;
    int64_t tmax = tr_task_seq_len(task, longest * r->o.length), ttrain = tr_task_seq_len(task, r->o.length);
    mc.max_pos = (tmax > ttrain ? tmax : ttrain) + r->o.shape;
    if (r->o.random_positions) {
        /* the paper samples from [0, L) at test time too, so L covers the longest evaluation */
        if (r->o.random_positions < mc.max_pos)
            return pe_error(err, PE_EKEY,
                            "--random-positions %lld: N must be at least the longest sequence, %lld tokens (training length %lld, evaluation at %lldx)",
                            (long long)r->o.random_positions, (long long)mc.max_pos, (long long)r->o.length, (long long)longest);
        mc.max_pos = r->o.random_positions;
    }
    mc.mem_len = ttrain;
    snprintf(mc.method, sizeof mc.method, "%s", r->o.method);
    snprintf(mc.schedule, sizeof mc.schedule, "%s", r->o.layers_methods);
    mc.n_keys = r->o.n_keys;
    for (int k = 0; k < r->o.n_keys; k++) {
        snprintf(mc.key[k], sizeof mc.key[k], "%s", r->o.key[k]);
        snprintf(mc.val[k], sizeof mc.val[k], "%s", r->o.val[k]);
    }
    /* T5 trained at 512 tokens with max_distance 128, so its last, open-ended bucket is
     * trained; the spec's default 128 would leave every bucket past a short training length at
     * its initial value. Unless set, t5 and tupe take max_distance = half the training length. */
    int t5 = 0, none = 0, cope = 0;
    for (int64_t l = 0; l < r->o.layers; l++) {
        char lm[32];
        tr_options_layer_method(&r->o, l, lm, sizeof lm);
        t5 |= !strcmp(lm, "t5") || !strcmp(lm, "tupe");
        none |= !strcmp(lm, "none");
        cope |= !strcmp(lm, "cope");
    }
    /* facebookresearch/RAM's CoPE takes npos = block_size + 1, the training length's positions
     * 0 .. T (a count may reach T); past it positions clamp to the last column. Unless set, the
     * trainer does the same, so pos_emb has no column that training never reaches. */
    if (cope && !key_value(&r->o, "npos_max") && mc.n_keys < TR_MAX_KEYS) {
        snprintf(mc.key[mc.n_keys], sizeof mc.key[0], "npos_max");
        snprintf(mc.val[mc.n_keys++], sizeof mc.val[0], "%lld", (long long)ttrain + 1);
    }
    if (t5 && !key_value(&r->o, "max_distance") && mc.n_keys < TR_MAX_KEYS) {
        /* but above the exact buckets (num_buckets / 2 for causal attention), as the key requires */
        const char *nb = key_value(&r->o, "num_buckets");
        int64_t exact = (nb ? atoll(nb) : 32) / 2, md = ttrain / 2 > exact ? ttrain / 2 : exact + 1;
        snprintf(mc.key[mc.n_keys], sizeof mc.key[0], "max_distance");
        snprintf(mc.val[mc.n_keys++], sizeof mc.val[0], "%lld", (long long)md);
    }
    /* --nope-temperature is the library's keys of method none, which the schedule gives to
     * its none layers alone */
    if (r->o.nope_temperature && none && !key_value(&r->o, "attn_temperature_tuning")) {
        if (mc.n_keys + 2 > TR_MAX_KEYS || key_value(&r->o, "floor_scale"))
            return pe_error(err, PE_EKEY, "--nope-temperature: give it or --floor_scale, and at most %d layer keys", TR_MAX_KEYS - 2);
        snprintf(mc.key[mc.n_keys], sizeof mc.key[0], "attn_temperature_tuning");
        snprintf(mc.val[mc.n_keys++], sizeof mc.val[0], "true");
        snprintf(mc.key[mc.n_keys], sizeof mc.key[0], "floor_scale");
        snprintf(mc.val[mc.n_keys++], sizeof mc.val[0], "%.17g", r->o.nope_temperature);
    }
    if ((st = tr_model_init(&r->model, &mc, r->o.seed, err))) return st;
    if (r->o.random_positions && tr_model_has_memory(r->model)) {
        /* Transformer-XL's distances are token indices over [memory; segment]: it reads no
         * positions, so the option would train the same model under another name */
        tr_run_free(r);
        return pe_error(err, PE_EKEY, "--random-positions: %s places keys by token index over its memory, not by position", mc.method);
    }
    if (tr_adamw_init(&r->opt, tr_model_size(r->model), r->o.beta1, r->o.beta2, r->o.eps, r->o.weight_decay)) {
        tr_run_free(r);
        return pe_error(err, PE_ENOMEM, "out of memory for the optimizer");
    }
    if ((st = reserve(r, r->o.batch * ttrain, err))) tr_run_free(r);
    return st;
}

void tr_run_free(tr_run *r) {
    tr_model_free(r->model);
    tr_adamw_free(&r->opt);
    free(r->in), free(r->tgt), free(r->pos);
    memset(r, 0, sizeof *r);
}

pe_status tr_run_step(tr_run *r, double *loss, int64_t *tokens, pe_err *err) {
    const tr_options *o = &r->o;
    int64_t B = o->batch;
    int64_t T = tr_task_train_batch(r->task, o->seed, r->step, B, r->in, r->tgt);
    /* SHAPE: every sequence shifted by its own k in [0, K), drawn from (seed, step);
     * randomized positions: every sequence its own sorted draw from [0, N), from a stream of
     * its own (the salt), so a resumed run draws what the uninterrupted one did */
    pe_rng rng = {o->seed * 0x2545f4914f6cdd1dull + (uint64_t)r->step * 0x9e3779b97f4a7c15ull + 0x5a};
    pe_rng rnd = {o->seed * 0x2545f4914f6cdd1dull + (uint64_t)r->step * 0x9e3779b97f4a7c15ull + 0x7f4a7c159e3779b9ull};
    for (int64_t b = 0; b < B; b++) {
        if (o->random_positions) {
            tr_random_positions(&rnd, o->random_positions, T, r->pos + b * T);
            continue;
        }
        int64_t k = o->shape ? (int64_t)(pe_rng_next(&rng) % (uint64_t)o->shape) : 0;
        for (int64_t t = 0; t < T; t++) r->pos[b * T + t] = t + k;
    }
    tr_model *m = r->model;
    tr_model_zero_grad(m);
    pe_status st = tr_model_forward(m, r->in, r->tgt, r->pos, B, T, 1, loss, NULL, err);
    if (!st) st = tr_model_backward(m, err);
    if (st) return st;
    tr_clip_grads(tr_model_grads(m), tr_model_size(m), o->clip);
    const tr_tensor *t;
    int nt = tr_model_tensors(m, &t);
    double lr = tr_lr_at(r->step, o->steps, o->warmup, o->lr, o->min_lr);
    tr_adamw_update(&r->opt, tr_model_params(m), tr_model_grads(m), t, nt, lr, r->step + 1);
    tr_model_project(m);
    tr_model_update_memory(m);
    r->step++;
    if (tokens) *tokens = B * T;
    return PE_OK;
}

pe_status tr_run_eval(tr_run *r, int64_t mult, tr_metrics *out, pe_err *err) {
    const tr_task *task = r->task;
    int64_t n = mult * r->o.length, Tmax = tr_task_seq_len(task, n);
    int64_t seqs = r->o.eval_tokens / Tmax;
    seqs = seqs < 16 ? 16 : seqs;
    /* chunks of about 2048 tokens: the attention keeps (B, H, T, T) scores per layer */
    int64_t Bc = 2048 / Tmax < 1 ? 1 : 2048 / Tmax;
    pe_status st = reserve(r, Bc * Tmax, err);
    if (st) return st;
    memset(out, 0, sizeof *out);
    out->n = n;
    double sum = 0;
    int64_t scored = 0, right = 0, exact = 0, done = 0;
    const int64_t V = task->V;
    for (int64_t idx = 0; done < seqs; idx++) {
        int64_t B = seqs - done < Bc ? seqs - done : Bc;
        int64_t T = tr_task_eval_batch(task, n, idx, B, r->in, r->tgt);
        for (int64_t b = 0; b < B && !st; b++) st = tr_run_positions(r, T, (uint64_t)(done + b), r->pos + b * T, err);
        if (st) return st;
        double loss;
        int64_t count;
        if ((st = tr_model_forward(r->model, r->in, r->tgt, r->pos, B, T, 0, &loss, &count, err))) return st;
        sum += loss * (double)count, scored += count;
        const float *p = tr_model_probs(r->model);
        for (int64_t b = 0; b < B; b++) {
            int all = 1;
            for (int64_t t = 0; t < T; t++) {
                int32_t y = r->tgt[b * T + t];
                if (y < 0) continue;
                const float *row = p + (b * T + t) * V;
                int64_t best = 0;
                for (int64_t v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
                if (best == y) right++;
                else all = 0;
            }
            exact += all;
        }
        done += B;
        out->tokens += B * T;
    }
    out->seqs = seqs;
    out->loss = scored ? sum / (double)scored : 0;
    out->bpc = out->loss / log(2.0);
    out->token_acc = scored ? (double)right / (double)scored : 0;
    out->exact = (double)exact / (double)seqs;
    return PE_OK;
}

pe_status tr_run_positions(const tr_run *r, int64_t T, uint64_t idx, int64_t *pos, pe_err *err) {
    const int64_t N = r->o.random_positions;
    if (!N) {
        for (int64_t t = 0; t < T; t++) pos[t] = t + r->o.shape;
        return PE_OK;
    }
    if (T > N)
        return pe_error(err, PE_EINVAL, "%lld tokens need more distinct positions than --random-positions %lld holds",
                        (long long)T, (long long)N);
    /* google-deepmind/randomized_positional_encodings evaluates with the encodings of training:
     * a fresh sorted draw per sequence (its range evaluation seeds one fixed stream); here the
     * stream is a function of (T, idx), independent of the run's seed */
    pe_rng rng = {0x6a09e667f3bcc909ull ^ ((uint64_t)T * 0x9e3779b97f4a7c15ull) ^ (idx * 0xbf58476d1ce4e5b9ull)};
    tr_random_positions(&rng, N, T, pos);
    return PE_OK;
}

/* ---- checkpoints ------------------------------------------------------------------------------ */
#define FORMAT "posenc-train-1"

pe_status tr_run_save(const tr_run *r, const char *path, pe_err *err) {
    const tr_tensor *t;
    int nt = tr_model_tensors(r->model, &t);
    pe_tensor *ts = calloc((size_t)(3 * nt + 1), sizeof(pe_tensor));
    char (*names)[40] = calloc(64, 40), (*values)[520] = calloc(64, 520);
    if (!ts || !names || !values) {
        free(ts), free(names), free(values);
        return pe_error(err, PE_ENOMEM, "out of memory");
    }
    float *params = tr_model_params(r->model);
    int n = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < nt; i++, n++) {
            snprintf(ts[n].name, sizeof ts[n].name, "%s%s", k == 0 ? "" : k == 1 ? "adam.m." : "adam.v.", t[i].name);
            ts[n].dtype = PE_F32;
            ts[n].ndim = t[i].ndim;
            for (int d = 0; d < t[i].ndim; d++) ts[n].shape[d] = t[i].shape[d];
            ts[n].data = (k == 0 ? params : k == 1 ? r->opt.m : r->opt.v) + t[i].off;
        }
    int64_t mB, mM;
    const float *mem = tr_model_memory(r->model, &mB, &mM);
    if (mB && mM) {
        snprintf(ts[n].name, sizeof ts[n].name, "memory");
        ts[n].dtype = PE_F32, ts[n].ndim = 4;
        ts[n].shape[0] = r->o.layers, ts[n].shape[1] = mB, ts[n].shape[2] = mM, ts[n].shape[3] = r->o.width;
        ts[n++].data = (void *)mem;
    }
    int nm = tr_options_list(&r->o, names + 4, values + 4, 60);
    snprintf(names[0], 40, "format"), snprintf(values[0], 520, FORMAT);
    snprintf(names[1], 40, "step"), snprintf(values[1], 520, "%lld", (long long)r->step);
    snprintf(names[2], 40, "save"), snprintf(values[2], 520, "%s", r->save);
    snprintf(names[3], 40, "save_every"), snprintf(values[3], 520, "%lld", (long long)r->save_every);
    const char *mk[64], *mv[64];
    for (int i = 0; i < nm + 4; i++) mk[i] = names[i], mv[i] = values[i];
    pe_status st = pe_st_write(path, ts, n, nm + 4, mk, mv, err);
    free(ts), free(names), free(values);
    return st;
}

static const char *meta(const pe_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return NULL;
}

pe_status tr_checkpoint_options(const char *path, tr_options *o, pe_err *err) {
    pe_st_file f;
    pe_status st = pe_st_read(path, &f, err);
    if (st) return st;
    const char *fmt = meta(&f, "format");
    if (!fmt || strcmp(fmt, FORMAT)) st = pe_error(err, PE_EFORMAT, "%s: not a posenc training checkpoint (format %s)", path, FORMAT);
    tr_options_default(o);
    for (int i = 0; i < f.n_meta && !st; i++)
        if (strcmp(f.meta_keys[i], "format") && strcmp(f.meta_keys[i], "step") && strcmp(f.meta_keys[i], "save") &&
            strcmp(f.meta_keys[i], "save_every"))
            st = tr_options_set(o, f.meta_keys[i], f.meta_values[i], err);
    pe_st_free(&f);
    return st;
}

pe_status tr_checkpoint_saving(const char *path, char *save, size_t n, int64_t *save_every, pe_err *err) {
    pe_st_file f;
    pe_status st = pe_st_read(path, &f, err);
    if (st) return st;
    const char *s = meta(&f, "save"), *e = meta(&f, "save_every");
    if (save) snprintf(save, n, "%s", s ? s : "");
    int64_t v = 0;
    if (save_every) *save_every = e && !parse_int(e, &v) && v >= 0 ? v : 0;
    pe_st_free(&f);
    return PE_OK;
}

pe_status tr_run_load(tr_run *r, const char *path, pe_err *err) {
    pe_st_file f;
    pe_status st = pe_st_read(path, &f, err);
    if (st) return st;
    const tr_tensor *t;
    int nt = tr_model_tensors(r->model, &t);
    float *params = tr_model_params(r->model);
    const char *step = meta(&f, "step");
    int64_t s = 0;
    if (!step || parse_int(step, &s) || s < 0) st = pe_error(err, PE_EFORMAT, "%s: no step in the metadata", path);
    else if (s > r->o.steps)
        st = pe_error(err, PE_EFORMAT, "%s: step %lld is past the run's %lld steps (a checkpoint of another run?)", path,
                      (long long)s, (long long)r->o.steps);
    /* every tensor is one the run knows, and every value is finite */
    for (int j = 0; j < f.n && !st; j++) {
        const char *nm = f.t[j].name;
        int known = !strcmp(nm, "memory");
        for (int i = 0; i < nt && !known; i++) {
            const char *base = !strncmp(nm, "adam.m.", 7) || !strncmp(nm, "adam.v.", 7) ? nm + 7 : nm;
            known = !strcmp(base, t[i].name);
        }
        if (!known) {
            st = pe_error(err, PE_ETENSOR, "%s: tensor '%s' is not one of the model's (method %s)", path, nm, r->o.method);
            break;
        }
        if (f.t[j].dtype != PE_F32) continue; /* the shape check below names it */
        int64_t numel = 1;
        for (int d = 0; d < f.t[j].ndim; d++) numel *= f.t[j].shape[d];
        const float *v = f.t[j].data;
        for (int64_t e = 0; e < numel; e++)
            if (!isfinite(v[e])) {
                st = pe_error(err, PE_ETENSOR, "%s: tensor '%s': element %lld is not finite", path, nm, (long long)e);
                break;
            }
    }
    for (int k = 0; k < 3 && !st; k++)
        for (int i = 0; i < nt && !st; i++) {
            char name[80];
            snprintf(name, sizeof name, "%s%s", k == 0 ? "" : k == 1 ? "adam.m." : "adam.v.", t[i].name);
            const pe_tensor *x = NULL;
            for (int j = 0; j < f.n; j++)
                if (!strcmp(f.t[j].name, name)) x = &f.t[j];
            int same = x && x->dtype == PE_F32 && x->ndim == t[i].ndim;
            for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == t[i].shape[d];
            if (!same) {
                st = pe_error(err, PE_ETENSOR, "%s: tensor '%s' missing or of another shape than the model's", path, name);
                break;
            }
            memcpy((k == 0 ? params : k == 1 ? r->opt.m : r->opt.v) + t[i].off, x->data, sizeof(float) * (size_t)t[i].numel);
        }
    tr_model_reset_memory(r->model);
    for (int j = 0; j < f.n && !st; j++)
        if (!strcmp(f.t[j].name, "memory")) {
            const pe_tensor *x = &f.t[j];
            if (x->dtype != PE_F32 || x->ndim != 4 || x->shape[0] != r->o.layers || x->shape[3] != r->o.width)
                st = pe_error(err, PE_ETENSOR, "%s: tensor 'memory' must be F32 [layers, B, M, width]", path);
            else st = tr_model_set_memory(r->model, x->data, x->shape[1], x->shape[2], err);
        }
    if (!st) r->step = s;
    pe_st_free(&f);
    return st;
}
