/* One training run (trainer.h): init, steps, evaluation, checkpoints; its options are options.c. */
#include "trainer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "../tools/layer.h"
#include "../tools/safetensors.h"
#include "env.h"

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
    r->shares = r->ranks = 1;
    r->o = *o;
    tr_options_resolve(&r->o);
    pe_status st = tr_options_check(&r->o, err);
    if (st) return st;
    if (task->kind != (tr_task_kind)tr_task_from_name(r->o.task) || task->L != r->o.length ||
        task->alphabet != r->o.alphabet || task->slots != tr_options_slots(&r->o) || task->hints != r->o.hints)
        return pe_error(err, PE_EINVAL, "the task does not match the options");
    r->task = task;
    tr_model_config mc = {0};
    mc.V = task->V, mc.layers = r->o.layers, mc.C = r->o.width, mc.heads = r->o.heads, mc.F = r->o.mlp;
    int64_t longest = 1;
    for (int k = 0; k < r->o.n_eval; k++) longest = r->o.eval[k] > longest ? r->o.eval[k] : longest;
    int64_t tmax = tr_task_seq_len(task, longest * r->o.length), ttrain = tr_task_seq_len(task, r->o.length), lo, hi;
    tr_options_score_range(&r->o, &lo, &hi);
    if (hi && tr_task_seq_len(task, hi) > tmax) tmax = tr_task_seq_len(task, hi);
    const int64_t most = hi > longest * r->o.length ? hi : longest * r->o.length; /* the most digits evaluated */
    if (task->hints && most + 1 > TR_HINTS_MAX)
        return pe_error(err, PE_EKEY, "--hints: an evaluation at %lld digits needs %lld hint letters; there are %d",
                        (long long)most, (long long)(most + 1), TR_HINTS_MAX);
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
    mc.bidirectional = task->slots;
    snprintf(mc.method, sizeof mc.method, "%s", r->o.method);
    snprintf(mc.schedule, sizeof mc.schedule, "%s", r->o.layers_methods);
    snprintf(mc.windows, sizeof mc.windows, "%s", r->o.layers_windows);
    mc.n_keys = r->o.n_keys;
    for (int k = 0; k < r->o.n_keys; k++) {
        snprintf(mc.key[k], sizeof mc.key[k], "%s", r->o.key[k]);
        snprintf(mc.val[k], sizeof mc.val[k], "%s", r->o.val[k]);
    }
    mc.length = ttrain; /* t5's max_distance, CoPE's npos_max (pe_config_fit_length) */
    int none = 0; /* layers that take NoPE's temperature tuning */
    for (int64_t l = 0; l < r->o.layers; l++) {
        char lm[32];
        tr_options_layer_method(&r->o, l, lm, sizeof lm);
        none |= pe_method_accepts(pe_method_from_name(lm), PE_K_attn_temperature_tuning);
    }
    /* --nope-temperature is the library's keys of method none, which the schedule gives to
     * its none layers alone */
    if (r->o.nope_temperature && none && !tr_options_key(&r->o, "attn_temperature_tuning")) {
        if (mc.n_keys + 2 > TR_MAX_KEYS || tr_options_key(&r->o, "floor_scale"))
            return pe_error(err, PE_EKEY, "--nope-temperature: give it or --floor_scale, and at most %d layer keys", TR_MAX_KEYS - 2);
        snprintf(mc.key[mc.n_keys], sizeof mc.key[0], "attn_temperature_tuning");
        snprintf(mc.val[mc.n_keys++], sizeof mc.val[0], "true");
        snprintf(mc.key[mc.n_keys], sizeof mc.key[0], "floor_scale");
        snprintf(mc.val[mc.n_keys++], sizeof mc.val[0], "%.17g", r->o.nope_temperature);
    }
    r->mc = mc;
    if ((st = tr_model_init(&r->model, &mc, r->o.seed, err))) return st;
    if (r->o.micro_batch && tr_model_has_memory(r->model)) {
        tr_run_free(r);
        return pe_error(err, PE_EKEY, "--micro-batch: %s carries memory between segments, one a sequence of the batch: it trains the batch whole",
                        mc.method);
    }
    pe_method_info info;
    if (r->o.random_positions && !pe_method_describe(pe_method_from_name(mc.method), &info, NULL) && info.memory) {
        /* Transformer-XL's distances are token indices over [memory; segment], in either layout
         * (the spec: the layer "does not read positions"), so the option would train the same
         * model under another name */
        tr_run_free(r);
        return pe_error(err, PE_EKEY, "--random-positions: %s places keys by token index, not by position: it reads no positions",
                        mc.method);
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
    for (int t = 0; r->reps && t < r->threads; t++) tr_model_free(r->reps[t]);
    free(r->reps), free(r->share_grads), free(r->share_parts);
    tr_adamw_free(&r->opt);
    free(r->in), free(r->tgt), free(r->pos), free(r->acc);
    memset(r, 0, sizeof *r);
}

pe_status tr_run_distribute(tr_run *r, int shares, int rank, int ranks, pe_status (*sum_f32)(float *, size_t, pe_err *),
                            pe_status (*sum_f64)(double *, size_t, pe_err *), pe_err *err) {
    if (shares < 1 || ranks < 1 || rank < 0 || rank >= ranks || (ranks > 1 && ranks != shares))
        return pe_error(err, PE_EINVAL, "rank %d of %d, %d shares: one process takes every share, or each rank one", rank, ranks, shares);
    if (r->o.batch % shares)
        return pe_error(err, PE_EINVAL, "--batch %lld does not split into %d shares%s: give a multiple of %d",
                        (long long)r->o.batch, shares, ranks > 1 ? " (one a rank)" : "", shares);
    /* the memory is per sequence of the batch and checkpointed whole: a rank holds only its rows */
    if (shares > 1 && tr_model_has_memory(r->model))
        return pe_error(err, PE_EINVAL, "%s carries memory between segments: it trains the batch whole, in one process", r->o.method);
    free(r->acc);
    r->acc = NULL;
    if (shares > 1 && ranks == 1 && !(r->acc = malloc(sizeof(float) * tr_model_size(r->model))))
        return pe_error(err, PE_ENOMEM, "out of memory for the sum of the shares");
    r->shares = shares, r->rank = rank, r->ranks = ranks, r->sum_f32 = sum_f32, r->sum_f64 = sum_f64;
    return PE_OK;
}

enum { SHARE_THREADS = 64 }; /* at most: one model copy each */

pe_status tr_run_share_threads(tr_run *r, int threads, pe_err *err) {
    if (threads <= 1 || r->shares <= 1 || r->ranks > 1) return PE_OK;
    threads = threads < r->shares ? threads : r->shares;
    threads = threads < SHARE_THREADS ? threads : SHARE_THREADS;
    const size_t np = tr_model_size(r->model);
    r->reps = calloc((size_t)threads, sizeof *r->reps);
    r->share_grads = malloc(sizeof(float) * np * (size_t)r->shares);
    r->share_parts = malloc(sizeof(double) * (size_t)r->shares);
    if (!r->reps || !r->share_grads || !r->share_parts) return pe_error(err, PE_ENOMEM, "out of memory for %d shares' gradients", r->shares);
    r->threads = threads;
    for (int t = 0; t < threads; t++) {
        pe_status st = tr_model_init(&r->reps[t], &r->mc, r->o.seed, err);
        if (st) return st;
    }
    return PE_OK;
}

/* the masks of the step's dropout: a function of (seed, step), so a resumed run draws them again */
static uint64_t dropout_key(const tr_run *r) { return r->o.seed * 0x2545f4914f6cdd1dull + (uint64_t)r->step * 0x9e3779b97f4a7c15ull + 0xd1; }

/* Sequences per forward and backward pass (--micro-batch; 0: TR_MICRO_TOKENS tokens' worth, at
 * least one) among `rows` of T tokens. A method with memory passes its rows at once: its memory
 * holds every sequence of the batch for the next step. */
static int64_t micro_rows(const tr_run *r, const tr_model *m, int64_t rows, int64_t T) {
    int64_t mb = r->o.micro_batch ? r->o.micro_batch : TR_MICRO_TOKENS / T;
    if (mb < 1) mb = 1; /* sequences longer than TR_MICRO_TOKENS: one a pass */
    if (tr_model_has_memory(m)) mb = rows;
    return mb < rows ? mb : rows;
}

/* Rows [r0, r0 + rows) of the step's batch (sequences of T) through model m, micro_rows at a
 * time: each pass's forward, then its backward, which adds the pass's gradient of the batch's
 * mean loss (the backward divides by the batch's n scored targets) to m's grads. So a gradient
 * element is the passes' sums added in pass order, not one sum over the rows: other rounding
 * than a single pass, the same on every run. Their part of that mean in *part. */
static pe_status pass_rows(tr_run *r, tr_model *m, int64_t r0, int64_t rows, int64_t T, int64_t n, double *part,
                           pe_err *err) {
    const int64_t mb = micro_rows(r, m, rows, T);
    *part = 0;
    for (int64_t b0 = r0; b0 < r0 + rows; b0 += mb) {
        const int64_t nb = r0 + rows - b0 < mb ? r0 + rows - b0 : mb, lo = b0 * T;
        double l = 0;
        int64_t count = 0;
        tr_model_set_dropout(m, r->o.dropout, dropout_key(r), b0);
        pe_status st = tr_model_forward(m, r->in + lo, r->tgt + lo, r->pos + lo, nb, T, 1, &l, &count, err);
        tr_model_set_count(m, n);
        if (!st) st = tr_model_backward(m, err);
        tr_model_set_dropout(m, 0, 0, 0);
        if (st) return st;
        *part += n ? l * (double)count / (double)n : 0;
    }
    return PE_OK;
}

/* Share s of the batch (rows sequences of T) through model m: its gradient of the batch's mean
 * loss in m's grads, its part of that mean in *part. */
static pe_status one_share(tr_run *r, tr_model *m, int64_t s, int64_t rows, int64_t T, int64_t n, double *part,
                           pe_err *err) {
    tr_model_zero_grad(m);
    return pass_rows(r, m, s * rows, rows, T, n, part, err);
}

/* Shares on threads: thread t's copy of the model (the step's parameters) computes shares t,
 * t + threads, ...; each share's gradient and loss part are kept, then added up in share
 * order exactly as shares_step adds them one after another. */
static pe_status threaded_shares(tr_run *r, int64_t B, int64_t T, int64_t n, double *part, float *g, pe_err *err) {
    const size_t np = tr_model_size(r->model);
    const int64_t rows = B / r->shares;
    double *parts = r->share_parts;
    pe_status sts[SHARE_THREADS] = {PE_OK};
    pe_err errs[SHARE_THREADS];
    for (int t = 0; t < r->threads; t++) memcpy(tr_model_params(r->reps[t]), tr_model_params(r->model), sizeof(float) * np);
#ifdef _OPENMP
#pragma omp parallel for num_threads(r->threads) schedule(static, 1)
#endif
    for (int t = 0; t < r->threads; t++) {
        tr_model *m = r->reps[t];
        for (int s = t; s < r->shares && !sts[t]; s += r->threads) {
            sts[t] = one_share(r, m, s, rows, T, n, &parts[s], &errs[t]);
            memcpy(r->share_grads + (size_t)s * np, tr_model_grads(m), sizeof(float) * np);
        }
    }
    for (int t = 0; t < r->threads; t++)
        if (sts[t]) {
            *err = errs[t];
            return sts[t];
        }
    *part = parts[0];
    memcpy(g, r->share_grads, sizeof(float) * np);
    for (int s = 1; s < r->shares; s++) {
        *part += parts[s];
        const float *gs = r->share_grads + (size_t)s * np;
        for (size_t i = 0; i < np; i++) g[i] += gs[i];
    }
    return PE_OK;
}

/* A step's gradient and loss (tr_run_distribute's shares; one share: the whole batch): every
 * share's gradient and loss part (one_share), added up in share order: here this process's
 * shares (all of them, or rank k's k-th), then over the ranks in rank order. acc[i] = g0[i],
 * then += g1[i], ... is what the rank-order sum over ranks does, so one process with N shares
 * and N ranks make the same bits. */
static pe_status shares_step(tr_run *r, int64_t B, int64_t T, double *loss, pe_err *err) {
    tr_model *m = r->model;
    float *g = tr_model_grads(m);
    const size_t np = tr_model_size(m);
    const int64_t rows = B / r->shares, mine = r->shares / r->ranks, first = r->rank * mine;
    int64_t n = 0;
    for (int64_t i = 0; i < B * T; i++) n += r->tgt[i] >= 0;
    double part = 0;
    if (r->reps) { /* one process, the shares on threads */
        pe_status st = threaded_shares(r, B, T, n, &part, g, err);
        *loss = part;
        return st;
    }
    for (int64_t s = first; s < first + mine; s++) {
        double p;
        pe_status st = one_share(r, m, s, rows, T, n, &p, err);
        if (st) return st;
        part = s == first ? p : part + p;
        if (mine > 1 && s == first) memcpy(r->acc, g, sizeof(float) * np);
        else if (mine > 1)
            for (size_t i = 0; i < np; i++) r->acc[i] += g[i];
    }
    if (mine > 1) memcpy(g, r->acc, sizeof(float) * np);
    const double t0 = r->ranks > 1 ? tr_now() : 0;
    pe_status st = r->ranks > 1 ? r->sum_f64(&part, 1, err) : PE_OK;
    if (!st && r->ranks > 1) st = r->sum_f32(g, np, err);
    if (r->ranks > 1) r->sum_seconds += tr_now() - t0;
    *loss = part;
    return st;
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
    pe_status st = shares_step(r, B, T, loss, err); /* one share: the whole batch */
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

/* seqs held-out sequences at content length n */
static pe_status eval_length(tr_run *r, int64_t n, int64_t seqs, tr_metrics *out, pe_err *err) {
    const tr_task *task = r->task;
    const int64_t Tmax = tr_task_seq_len(task, n);
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

pe_status tr_run_eval(tr_run *r, int64_t mult, tr_metrics *out, pe_err *err) {
    const int64_t n = mult * r->o.length, seqs = r->o.eval_tokens / tr_task_seq_len(r->task, n);
    return eval_length(r, n, seqs < 16 ? 16 : seqs, out, err);
}

pe_status tr_run_score(tr_run *r, double *score, pe_err *err) {
    int64_t lo, hi;
    *score = 0;
    tr_options_score_range(&r->o, &lo, &hi);
    for (int64_t n = lo; hi && n <= hi; n++) {
        tr_metrics m;
        pe_status st = eval_length(r, n, TR_SCORE_SEQS, &m, err);
        if (st) return st;
        *score += (strcmp(r->o.score_metric, "exact") ? m.token_acc : m.exact) / (double)(hi - lo + 1);
    }
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
    int nm = tr_options_list(&r->o, names + 5, values + 5, 59);
    snprintf(names[0], 40, "format"), snprintf(values[0], 520, FORMAT);
    snprintf(names[1], 40, "step"), snprintf(values[1], 520, "%lld", (long long)r->step);
    snprintf(names[2], 40, "save"), snprintf(values[2], 520, "%s", r->save);
    snprintf(names[3], 40, "save_every"), snprintf(values[3], 520, "%lld", (long long)r->save_every);
    /* a whole-batch run's checkpoints stay as they were: `shares` only when there are more */
    int fixed = r->shares > 1 ? 5 : 4;
    snprintf(names[4], 40, "shares"), snprintf(values[4], 520, "%d", r->shares);
    const char *mk[64], *mv[64];
    for (int i = 0; i < fixed; i++) mk[i] = names[i], mv[i] = values[i];
    for (int i = 0; i < nm; i++) mk[fixed + i] = names[5 + i], mv[fixed + i] = values[5 + i];
    pe_status st = pe_st_write(path, ts, n, nm + fixed, mk, mv, err);
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
            strcmp(f.meta_keys[i], "save_every") && strcmp(f.meta_keys[i], "shares"))
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
    if (save_every) *save_every = e && !tr_parse_int(e, &v) && v >= 0 ? v : 0;
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
    const char *step = meta(&f, "step"), *shares = meta(&f, "shares");
    int64_t s = 0, ns = 1;
    if (!step || tr_parse_int(step, &s) || s < 0) st = pe_error(err, PE_EFORMAT, "%s: no step in the metadata", path);
    else if (shares && (tr_parse_int(shares, &ns) || ns < 1))
        st = pe_error(err, PE_EFORMAT, "%s: shares '%s' is not a count", path, shares);
    /* the same shares summed in the same order: the bits of the uninterrupted run */
    else if (ns != r->shares && ns == 1)
        st = pe_error(err, PE_EINVAL, "%s was trained on whole batches: resume it in one process without --shares, not in %d shares",
                      path, r->shares);
    else if (ns != r->shares)
        st = pe_error(err, PE_EINVAL, "%s was trained in %lld shares of a batch: resume it with mpirun -n %lld or --shares %lld, "
                      "not %d", path, (long long)ns, (long long)ns, (long long)ns, r->shares);
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
