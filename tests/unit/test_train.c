/* The trainer (train/): the model's gradients against finite differences for every method
 * the trainer supports, the model against its PyTorch reference (tests/fixtures/train,
 * written by tests/ref/train_ref.py), the tasks, the optimizer, a trivial task learnt to a
 * loss threshold, a resumed run continuing bit for bit, a step in micro-batches, and hostile
 * checkpoints refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../train/data.h"
#include "../../train/env.h"
#include "../../train/kernels.h"
#include "../../train/model.h"
#include "../../train/optim.h"
#include "../../train/trainer.h"
#include "../../tools/safetensors.h"
#include "harness.h"

/* ---- finite differences on a tiny model --------------------------------------------------- */

enum { V = 7, B = 2, T = 5 };

/* Settings that reach each method's regimes at this size (others: defaults). */
static const char *tiny_keys(const char *method) {
    static const struct { const char *method, *keys; } K[] = {
        {"shaw", "max_rel=2"}, {"t5", "num_buckets=8 max_distance=12"},
        {"tupe", "num_buckets=8 max_distance=12"}, {"deberta", "position_buckets=4 max_relative_positions=8"},
        {"huang1", "max_rel=3"}, {"huang2", "max_rel=3"}, {"huang3", "max_rel=3"}, {"huang4", "max_rel=3"},
    };
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
        if (!strcmp(K[i].method, method)) return K[i].keys;
    return "";
}

static void config_of(tr_model_config *c, const char *method, const char *keys) {
    memset(c, 0, sizeof *c);
    c->V = V, c->layers = 2, c->C = 8, c->heads = 2, c->F = 16, c->max_pos = 16, c->mem_len = 3;
    snprintf(c->method, sizeof c->method, "%s", method);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = 0;
        snprintf(c->key[c->n_keys], sizeof c->key[0], "%s", tok);
        snprintf(c->val[c->n_keys++], sizeof c->val[0], "%s", eq + 1);
    }
}

typedef struct fd_case {
    tr_model *m;
    int32_t in[B * T], tgt[B * T];
    int64_t pos[B * T];
    int use_mem;
} fd_case;

/* The summed loss (mean times count) in double. */
static double sum_loss(fd_case *f) {
    double loss;
    int64_t count;
    pe_err err;
    if (tr_model_forward(f->m, f->in, f->tgt, f->pos, B, T, f->use_mem, &loss, &count, &err)) fail_msg("forward: %s", err.msg);
    return loss * (double)count;
}
static double sum_loss_v(void *f) { return sum_loss(f); }

/* Checks a sample of every tensor's elements; returns the worst |num - ana| / tolerance. */
static double fd_check(fd_case *f, const char *label) {
    tr_model *m = f->m;
    tr_model_zero_grad(m);
    double loss;
    int64_t count;
    pe_err err;
    if (tr_model_forward(m, f->in, f->tgt, f->pos, B, T, f->use_mem, &loss, &count, &err)) fail_msg("forward: %s", err.msg);
    if (tr_model_backward(m, &err)) fail_msg("backward: %s", err.msg);
    size_t n = tr_model_size(m);
    float *g = malloc(sizeof(float) * n);
    memcpy(g, tr_model_grads(m), sizeof(float) * n);
    float *p = tr_model_params(m);
    const tr_tensor *t;
    int nt = tr_model_tensors(m, &t);
    double worst = 0;
    for (int k = 0; k < nt; k++) {
        int64_t stride = t[k].numel > 12 ? t[k].numel / 12 : 1; /* about 12 entries of each tensor */
        for (int64_t e = (k * 5) % stride; e < t[k].numel; e += stride) {
            float *x = p + t[k].off + e;
            worst = fmax(worst, pe_test_fd_element(x, (double)g[t[k].off + e] * (double)count,
                                                   2e-3f * fmaxf(1.0f, fabsf(*x)), sum_loss_v, f, worst, label,
                                                   t[k].name, e));
        }
    }
    free(g);
    return worst;
}

/* Random weights of a useful size (the default init is too small for finite differences). */
static void randomise(tr_model *m, uint64_t seed) {
    pe_rng rng = {seed};
    float *p = tr_model_params(m);
    const tr_tensor *t;
    int nt = tr_model_tensors(m, &t);
    for (int k = 0; k < nt; k++)
        for (int64_t e = 0; e < t[k].numel; e++) {
            float *x = p + t[k].off + e;
            *x += 0.3f * pe_rng_normal(&rng);
            if (t[k].min > -INFINITY) *x = fabsf(*x) + t[k].min;
        }
}

static void test_gradients(void **state) {
    (void)state;
    int checked = 0;
    for (int mth = 0; mth < PE_METHOD_COUNT; mth++) {
        const char *method = pe_method_name(mth);
        if (tr_method_placement(method, NULL) == TR_PLACE_NONE) continue;
        tr_model_config c;
        config_of(&c, method, tiny_keys(method));
        for (int variant = 0; variant < 3; variant++) {
            fd_case f = {0};
            pe_err err;
            /* variant 2: dropout (a fixed key, so every forward of the check draws the same
             * masks), one method of each placement */
            if (variant == 2 && strcmp(method, "rope") && strcmp(method, "sinusoidal") && strcmp(method, "complex")) continue;
            if (tr_model_init(&f.m, &c, 3 + mth, &err)) fail_msg("%s: %s", method, err.msg);
            if (variant == 2) tr_model_set_dropout(f.m, 0.25, 5, 1);
            /* variant 1: shifted positions (SHAPE) for absolute methods, memory for XL-like ones */
            if (variant == 1 && !tr_model_has_memory(f.m) && tr_method_placement(method, NULL) != TR_PLACE_INPUT) {
                tr_model_free(f.m);
                continue;
            }
            randomise(f.m, 11 + mth);
            pe_rng rng = {(uint64_t)(99 + mth)};
            for (int i = 0; i < B * T; i++) {
                f.in[i] = (int32_t)(pe_rng_next(&rng) % V);
                f.tgt[i] = i % 4 == 1 ? -1 : (int32_t)(pe_rng_next(&rng) % V);
                f.pos[i] = i % T + (variant == 1 ? 2 + 3 * (i / T) : 0);
            }
            if (variant == 1 && tr_model_has_memory(f.m)) {
                float mem[2 * B * 3 * 8];
                for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) mem[i] = pe_rng_normal(&rng);
                if (tr_model_set_memory(f.m, mem, B, 3, &err)) fail_msg("%s", err.msg);
                f.use_mem = 1;
            }
            char label[128];
            snprintf(label, sizeof label, "%s%s", method, variant == 2 ? " (dropout)" : variant ? (f.use_mem ? " (memory)" : " (shifted)") : "");
            double worst = fd_check(&f, label);
            printf("  %-24s worst %.3g x tolerance\n", label, worst);
            assert_true(worst <= 1.0);
            checked++;
            tr_model_free(f.m);
        }
    }
    assert_true(checked >= 7);
}

/* ---- the PyTorch reference ---------------------------------------------------------------- */

static const pe_tensor *find(const pe_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

static const char *meta_of(const pe_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return "";
}

/* Every file of tests/fixtures/train; the methods with a model-level convention of their own
 * (doc/methods.md, "Training") must each have one, so a lost fixture fails. */
static void test_reference(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/train", pe_test_fixture_dir());
    char **names;
    int n = pe_test_list(dir, ".safetensors", &names), done = 0;
    char checked[1024] = ""; /* methods compared, space-separated */
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        pe_st_file f;
        pe_err err;
        if (pe_st_read(path, &f, &err)) fail_msg("%s", err.msg);
        const char *method = meta_of(&f, "method");
        if (pe_method_from_name(method) < 0) { /* not in this build */
            pe_st_free(&f);
            continue;
        }
        tr_model_config c;
        config_of(&c, method, meta_of(&f, "keys"));
        c.V = atoll(meta_of(&f, "vocab")), c.layers = atoll(meta_of(&f, "layers")), c.C = atoll(meta_of(&f, "width"));
        c.heads = atoll(meta_of(&f, "heads")), c.F = atoll(meta_of(&f, "mlp")), c.max_pos = atoll(meta_of(&f, "max_pos"));
        tr_model *m;
        if (tr_model_init(&m, &c, 1, &err)) fail_msg("%s: %s", names[i], err.msg);
        const tr_tensor *t;
        int nt = tr_model_tensors(m, &t);
        float *p = tr_model_params(m);
        int params_in_file = 0;
        for (int k = 0; k < f.n; k++)
            if (f.t[k].dtype == PE_F32 && strncmp(f.t[k].name, "grad.", 5) && strcmp(f.t[k].name, "mems")) params_in_file++;
        if (params_in_file != nt) fail_msg("%s: the file has %d tensors, the model %d", path, params_in_file, nt);
        for (int k = 0; k < nt; k++) {
            const pe_tensor *x = find(&f, t[k].name);
            if (!x) fail_msg("%s: no tensor %s", path, t[k].name);
            int64_t numel = 1;
            for (int d = 0; d < x->ndim; d++) numel *= x->shape[d];
            if (numel != t[k].numel) fail_msg("%s: %s has %lld elements, the model %lld", path, t[k].name, (long long)numel, (long long)t[k].numel);
            memcpy(p + t[k].off, x->data, sizeof(float) * (size_t)numel);
        }
        const pe_tensor *tok = find(&f, "tokens"), *tgt = find(&f, "targets"), *pos = find(&f, "positions");
        const pe_tensor *want = find(&f, "loss");
        assert_non_null(tok), assert_non_null(tgt), assert_non_null(pos), assert_non_null(want);
        int64_t Bf = tok->shape[0], Tf = tok->shape[1];
        int32_t *in = malloc(sizeof(int32_t) * Bf * Tf), *tg = malloc(sizeof(int32_t) * Bf * Tf);
        for (int64_t e = 0; e < Bf * Tf; e++) in[e] = (int32_t)((int64_t *)tok->data)[e], tg[e] = (int32_t)((int64_t *)tgt->data)[e];
        const pe_tensor *mems = find(&f, "mems"); /* (layers, B, M, C): a previous segment */
        if (mems && (mems->dtype != PE_F32 || mems->ndim != 4 || mems->shape[0] != c.layers || mems->shape[1] != Bf ||
                     mems->shape[3] != c.C))
            fail_msg("%s: mems is not (layers, B, M, C) F32", path);
        if (mems && tr_model_set_memory(m, mems->data, Bf, mems->shape[2], &err)) fail_msg("%s: %s", path, err.msg);
        double loss;
        tr_model_zero_grad(m);
        if (tr_model_forward(m, in, tg, pos->data, Bf, Tf, mems != NULL, &loss, NULL, &err) || tr_model_backward(m, &err))
            fail_msg("%s: %s", path, err.msg);
        double lw = ((double *)want->data)[0];
        printf("  %-31s loss %.7f, reference %.7f\n", path + strlen(dir) + 1, loss, lw);
        assert_true(fabs(loss - lw) <= 1e-5 * fabs(lw));
        int64_t bad = 0;
        for (int k = 0; k < nt; k++) {
            char gname[80];
            snprintf(gname, sizeof gname, "grad.%s", t[k].name);
            const pe_tensor *g = find(&f, gname);
            assert_non_null(g);
            bad += pe_test_compare(gname, tr_model_grads(m) + t[k].off, g->data, t[k].numel, 1e-5, 1e-3);
        }
        assert_int_equal(bad, 0);
        size_t used = strlen(checked);
        snprintf(checked + used, sizeof checked - used, " %s", method);
        free(in), free(tg);
        tr_model_free(m);
        pe_st_free(&f);
        done++;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    assert_true(done >= 1);
    static const char *const need[] = {"learned", "sinusoidal", "rope", "alibi", "t5", "deberta", "tupe", "floater", "complex", "xl"};
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++) {
        char word[40];
        snprintf(word, sizeof word, " %s", need[k]);
        size_t len = strlen(word);
        int found = 0;
        for (const char *s = strstr(checked, word); s && !found; s = strstr(s + 1, word))
            found = s[len] == ' ' || s[len] == 0;
        if (pe_method_from_name(need[k]) >= 0 && !found) fail_msg("%s: no fixture for %s", dir, need[k]);
    }
}

/* ---- tasks ----------------------------------------------------------------------------------- */

/* The answer-slot layout (data.h): content of binary symbols, then one '_' slot per answer
 * symbol; only the slots are scored, by the answer itself (not shifted); a batch has one length. */
static void test_slots(void **state) {
    (void)state;
    pe_err err;
    const tr_task_kind kinds[] = {TR_TASK_COPY, TR_TASK_REVERSE, TR_TASK_SORT, TR_TASK_DUPLICATE};
    for (int q = 0; q < 4; q++) {
        tr_task t;
        if (tr_task_init(&t, kinds[q], 6, NULL, 0, 0, &err) || tr_task_set_layout(&t, 2, 1, &err)) fail_msg("%s", err.msg);
        int32_t in[32 * 40], tgt[32 * 40];
        for (int pass = 0; pass < 2; pass++) {
            const int64_t nb = pass ? 4 : 32;
            const int64_t Ts = pass ? tr_task_eval_batch(&t, 9, 1, nb, in, tgt) : tr_task_train_batch(&t, 3, 5, nb, in, tgt);
            const int64_t n = kinds[q] == TR_TASK_DUPLICATE ? Ts / 3 : Ts / 2;
            assert_int_equal(Ts, tr_task_seq_len(&t, n));
            if (pass) assert_int_equal(n, 9);
            for (int64_t b = 0; b < nb; b++) {
                const int32_t *x = in + b * Ts, *y = tgt + b * Ts;
                int ones = 0;
                for (int64_t i = 0; i < n; i++) {
                    char c = (char)t.chars[x[i]];
                    assert_true(c == 'a' || c == 'b');
                    assert_int_equal(y[i], -1);
                    ones += c == 'b';
                }
                for (int64_t i = n; i < Ts; i++) {
                    assert_int_equal(t.chars[x[i]], '_');
                    const int64_t j = i - n;
                    int32_t want = kinds[q] == TR_TASK_REVERSE ? x[n - 1 - j] : kinds[q] == TR_TASK_SORT ? t.ids[j < n - ones ? 'a' : 'b'] : x[j % n];
                    assert_int_equal(y[i], want);
                }
            }
        }
        tr_task_free(&t);
    }
    tr_task t;
    if (tr_task_init(&t, TR_TASK_ADD, 4, NULL, 0, 0, &err)) fail_msg("%s", err.msg);
    assert_int_equal(tr_task_set_layout(&t, 10, 1, &err), PE_EINVAL); /* the string tasks only */
    assert_int_equal(tr_task_set_layout(&t, 2, 0, &err), PE_EINVAL);
    tr_task_free(&t);
}

static void test_tasks(void **state) {
    (void)state;
    pe_err err;
    for (int k = TR_TASK_COPY; k < TR_TASK_COUNT; k++) {
        tr_task t;
        if (tr_task_init(&t, (tr_task_kind)k, 5, NULL, 0, 0, &err)) fail_msg("%s", err.msg);
        int32_t in[64 * 32], tgt[64 * 32], in2[64 * 32], tgt2[64 * 32];
        int64_t Tb = tr_task_train_batch(&t, 7, 3, 32, in, tgt);
        assert_true(Tb <= tr_task_seq_len(&t, 5));
        assert_int_equal(tr_task_train_batch(&t, 7, 3, 32, in2, tgt2), Tb); /* a function of (seed, step) */
        assert_memory_equal(in, in2, sizeof(int32_t) * 32 * Tb);
        int64_t Te = tr_task_eval_batch(&t, 10, 0, 8, in, tgt);
        if (k == TR_TASK_COUNTING) assert_true(Te <= tr_task_seq_len(&t, 10)); /* statements of 1 or 2 tokens */
        else assert_int_equal(Te, tr_task_seq_len(&t, 10));
        for (int b = 0; b < 8; b++) { /* decode and check the answer (sequences end in padding) */
            char s[128];
            int len = 0;
            while (len < Te && in[b * Te + len] != 0) s[len] = (char)t.chars[in[b * Te + len]], len++;
            if (len == Te && tgt[b * Te + Te - 1] >= 0) s[len] = (char)t.chars[tgt[b * Te + Te - 1]], len++;
            int full = len;
            s[len] = 0;
            char *eq = strchr(s, '='), *dot = strrchr(s, '.');
            assert_non_null(eq), assert_non_null(dot);
            *eq = 0, *dot = 0;
            const char *x = s, *y = eq + 1;
            char want[128] = {0};
            int n = (int)strlen(x);
            if (k == TR_TASK_COPY) snprintf(want, sizeof want, "%s", x);
            if (k == TR_TASK_DUPLICATE) snprintf(want, sizeof want, "%.60s%.60s", x, x);
            if (k == TR_TASK_REVERSE)
                for (int i = 0; i < n; i++) want[i] = x[n - 1 - i];
            if (k == TR_TASK_SORT) {
                int w = 0;
                for (char c = 'a'; c <= 'j'; c++)
                    for (int i = 0; i < n; i++)
                        if (x[i] == c) want[w++] = c;
            }
            if (k == TR_TASK_ADD) { /* digits of the sum least significant first, n + 1 of them */
                char *plus = strchr(s, '+');
                assert_non_null(plus);
                *plus = 0;
                int la = (int)strlen(s), lb = (int)strlen(plus + 1), carry = 0;
                assert_true(la == 10 || lb == 10);
                for (int i = 0; i < 11; i++) {
                    int d = (i < la ? s[la - 1 - i] - '0' : 0) + (i < lb ? plus[lb - i] - '0' : 0) + carry;
                    want[i] = (char)('0' + d % 10), carry = d / 10;
                }
            }
            if (k == TR_TASK_COUNTING) { /* 10 statements, then the variable asked about */
                int val[3], set[3] = {0}, st = 0, i = 0;
                for (; i < n - 1; st++) {
                    if (x[i] == '.') { i++; continue; }
                    int v = x[i] - 'a';
                    assert_true(v >= 0 && v < 3 && (x[i + 1] == '0' || x[i + 1] == '+'));
                    if (x[i + 1] == '0') set[v] = 1, val[v] = 0;
                    else assert_true(set[v] && ++val[v] <= 10); /* only a set variable, at most 10 */
                    i += 2;
                }
                assert_int_equal(st, 10);
                int q = x[n - 1] - 'a';
                assert_true(q >= 0 && q < 3 && set[q]);
                snprintf(want, sizeof want, "%d", val[q]);
            }
            if (k == TR_TASK_PARITY || k == TR_TASK_SUM) { /* 10 bits: their 1s mod 2; 10 terms 1..9: mod 10 */
                int acc = 0, terms = 0;
                for (int i = 0; i < n; i++) {
                    if (k == TR_TASK_SUM && i % 2) { assert_int_equal(x[i], '+'); continue; }
                    const int d = x[i] - '0';
                    assert_true(k == TR_TASK_SUM ? d >= 1 && d <= 9 : d == 0 || d == 1);
                    acc += d, terms++;
                }
                assert_int_equal(terms, 10);
                snprintf(want, sizeof want, "%d", acc % (k == TR_TASK_SUM ? 10 : 2));
            }
            assert_string_equal(y, want);
            for (int i = 0; i < Te; i++) /* only the answer (from '=' on) is scored, never padding */
                if ((tgt[b * Te + i] >= 0) != (i >= (int)(eq - s) && i < full - 1))
                    fail_msg("%s: sequence %d, target %d scored %d", tr_task_name((tr_task_kind)k), b, i, tgt[b * Te + i] >= 0);
        }
        tr_task_free(&t);
    }
    /* add with index hints: operands padded to n + 1 digits, each digit after its place's letter
     * (consecutive from the most significant place, the same in both operands), the sum least
     * significant first with its places' letters; a letter start of every offset is drawn */
    tr_task h;
    if (tr_task_init(&h, TR_TASK_ADD, 5, NULL, 0, 0, &err) || tr_task_set_hints(&h, 1, &err)) fail_msg("%s", err.msg);
    assert_int_equal(h.V, 24 + TR_HINTS_MAX);
    enum { HB = 64, HN = 10, HT = 6 * HN + 8 };
    int32_t hin[HB * HT], htgt[HB * HT];
    assert_int_equal(tr_task_eval_batch(&h, HN, 0, HB, hin, htgt), HT);
    int starts[TR_HINTS_MAX] = {0};
    for (int b = 0; b < HB; b++) {
        char s[HT + 2];
        for (int i = 0; i < HT; i++) s[i] = (char)h.chars[hin[b * HT + i]];
        s[HT] = (char)h.chars[htgt[b * HT + HT - 1]], s[HT + 1] = 0;
        const int nd = HN + 1, h0 = s[0] - 'A';
        assert_true(h0 >= 0 && h0 + nd <= TR_HINTS_MAX);
        starts[h0] = 1;
        assert_true(s[2 * nd] == '+' && s[4 * nd + 1] == '=' && s[6 * nd + 2] == '.');
        int carry = 0;
        for (int i = 0; i < nd; i++) { /* place i: units first */
            const char *pa = s + 2 * (nd - 1 - i), *pb = s + 2 * nd + 1 + 2 * (nd - 1 - i), *ps = s + 4 * nd + 2 + 2 * i;
            const char hint = (char)('A' + h0 + nd - 1 - i);
            assert_true(pa[0] == hint && pb[0] == hint && ps[0] == hint);
            const int d = (pa[1] - '0') + (pb[1] - '0') + carry;
            assert_int_equal(ps[1], '0' + d % 10);
            carry = d / 10;
        }
        assert_int_equal(carry, 0);
        for (int i = 0; i < HT; i++) assert_int_equal(htgt[b * HT + i] >= 0, i >= 4 * nd + 1); /* the sum and '.' */
    }
    int offsets = 0;
    for (int k = 0; k < TR_HINTS_MAX; k++) offsets += starts[k];
    assert_true(offsets >= 8); /* of the 15 starts 11 places allow */
    assert_true(tr_task_train_batch(&h, 3, 1, 16, hin, htgt) <= tr_task_seq_len(&h, 5));
    tr_task_free(&h);
    if (tr_task_init(&h, TR_TASK_COPY, 5, NULL, 0, 0, &err)) fail_msg("%s", err.msg);
    assert_int_not_equal(tr_task_set_hints(&h, 1, &err), PE_OK);
    tr_task_free(&h);
    tr_task lm;
    if (tr_task_init(&lm, TR_TASK_LM, 32, NULL, 5, 20000, &err)) fail_msg("%s", err.msg);
    assert_true(lm.V > 20 && lm.V < 64);
    int32_t in[4 * 32], tgt[4 * 32], in2[4 * 32], tgt2[4 * 32];
    tr_task_train_batch(&lm, 1, 0, 4, in, tgt);
    tr_task_train_batch(&lm, 1, 1, 4, in2, tgt2);
    for (int b = 0; b < 4; b++) /* streams: step 1 continues step 0 */
        assert_int_equal(in2[b * 32], tgt[b * 32 + 31]);
    tr_task_free(&lm);
    char *text = tr_corpus_generate(5, 3000);
    assert_non_null(strstr(text, "end of "));
    free(text);
}

/* Dropout's masks: the rate drawn (p of the elements zeroed, the rest scaled by 1 / (1 - p)),
 * the same mask for the same (key, site, token), another for another site or token, and every
 * build of the kernel alike (one mask whatever the vector width: the test runs the CPU's). */
static void test_dropout_masks(void **state) {
    (void)state;
    enum { N = 256, C = 96 };
    float *x = malloc(sizeof(float) * N * C), *y = malloc(sizeof(float) * N * C), *z = malloc(sizeof(float) * N * C);
    for (int64_t e = 0; e < N * C; e++) x[e] = 1.0f;
    const float p = 0.1f, keep = 1.0f / (1.0f - p);
    tr_dropout(y, x, N, C, p, 42, 3, 0);
    int64_t zeros = 0;
    for (int64_t e = 0; e < N * C; e++) {
        assert_true(y[e] == 0.0f || y[e] == keep);
        zeros += y[e] == 0.0f;
    }
    const double rate = (double)zeros / (N * C), se = sqrt(p * (1 - p) / (N * C));
    if (fabs(rate - p) > 5 * se) fail_msg("dropped %.4f of the elements, asked %.2f", rate, (double)p);
    tr_dropout(z, x, N / 2, C, p, 42, 3, N / 2); /* the second half of the rows alone: the same mask */
    assert_memory_equal(z, y + (N / 2) * C, sizeof(float) * (N / 2) * C);
    tr_dropout(z, x, N, C, p, 42, 4, 0); /* another site */
    int64_t same = 0;
    for (int64_t e = 0; e < N * C; e++) same += (z[e] == 0.0f) && (y[e] == 0.0f);
    assert_true(same < 3 * (int64_t)(p * p * N * C) + 20); /* independent: about p^2 of them */
    free(x), free(y), free(z);
}

static void test_optimizer(void **state) {
    (void)state;
    assert_true(fabs(tr_lr_at(0, 100, 10, 1.0, 0.1) - 0.1) < 1e-12);
    assert_true(fabs(tr_lr_at(9, 100, 10, 1.0, 0.1) - 1.0) < 1e-12);
    assert_true(fabs(tr_lr_at(10, 100, 10, 1.0, 0.1) - 1.0) < 1e-12);
    assert_true(fabs(tr_lr_at(55, 100, 10, 1.0, 0.1) - 0.55) < 1e-12);
    assert_true(fabs(tr_lr_at(100, 100, 10, 1.0, 0.1) - 0.1) < 1e-12);
    float g[2] = {3, 4};
    assert_true(fabs(tr_clip_grads(g, 2, 1.0) - 5.0) < 1e-9);
    assert_true(fabs(g[0] - 0.6f) < 1e-5 && fabs(g[1] - 0.8f) < 1e-5);
    /* one AdamW step: p -= lr (m^ / (sqrt(v^) + eps) + wd p); the first step moves by lr */
    tr_adamw o;
    assert_int_equal(tr_adamw_init(&o, 2, 0.9, 0.95, 1e-8, 0.1), 0);
    tr_tensor t = {.name = "w", .ndim = 1, .shape = {2}, .numel = 2, .off = 0, .decay = 1};
    float p[2] = {1, -1}, gr[2] = {0.5f, -2};
    tr_adamw_update(&o, p, gr, &t, 1, 0.01, 1);
    assert_true(fabs(p[0] - (1 - 0.01 - 0.001)) < 1e-6 && fabs(p[1] - (-1 + 0.01 + 0.001)) < 1e-6);
    tr_adamw_free(&o);
}

/* ---- training ------------------------------------------------------------------------------- */

static void small_options(tr_options *o, const char *method) {
    tr_options_default(o);
    pe_err err;
    const char *kv[][2] = {{"width", "16"}, {"heads", "2"}, {"layers", "1"}, {"batch", "8"},
                           {"eval", "1,2"}, {"eval-tokens", "256"}, {"corpus-chars", "20000"}, {"method", method}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (tr_options_set(o, kv[i][0], kv[i][1], &err)) fail_msg("%s", err.msg);
}

/* A periodic text: next-character loss must fall below 0.1 nats in 80 steps. */
static void test_trivial_task(void **state) {
    (void)state;
    char path[] = "/tmp/posenc_train_text_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    for (int i = 0; i < 4000; i++) fputs("abcde", fp);
    fclose(fp);
    tr_options o;
    small_options(&o, "rope");
    pe_err err;
    tr_options_set(&o, "text", path, &err);
    tr_options_set(&o, "length", "16", &err);
    tr_options_set(&o, "steps", "80", &err);
    tr_options_set(&o, "lr", "1e-2", &err);
    tr_task task;
    tr_run run;
    if (tr_task_from_options(&task, &o, &err) || tr_run_init(&run, &o, &task, &err)) fail_msg("%s", err.msg);
    double loss = 0;
    while (run.step < o.steps)
        if (tr_run_step(&run, &loss, NULL, &err)) fail_msg("%s", err.msg);
    tr_metrics mt;
    if (tr_run_eval(&run, 1, &mt, &err)) fail_msg("%s", err.msg);
    printf("  periodic text: last batch loss %.4f, held-out loss %.4f, token accuracy %.3f\n", loss, mt.loss, mt.token_acc);
    assert_true(loss < 0.1 && mt.loss < 0.1);
    tr_run_free(&run);
    tr_task_free(&task);
    unlink(path);
}

/* Steps 0..N in one go, or 0..k, a checkpoint, a new process state and k..N: same bits. */
static void resume_case(const char *method, const char *task_name, const char *const *extra) {
    if (pe_method_from_name(method) < 0) return;
    tr_options o;
    small_options(&o, method);
    pe_err err;
    tr_options_set(&o, "task", task_name, &err);
    tr_options_set(&o, "length", "8", &err);
    tr_options_set(&o, "steps", "12", &err);
    for (int i = 0; extra && extra[i]; i += 2)
        if (tr_options_set(&o, extra[i], extra[i + 1], &err)) fail_msg("%s", err.msg);
    tr_task task;
    if (tr_task_from_options(&task, &o, &err)) fail_msg("%s", err.msg);
    tr_run a, b;
    if (tr_run_init(&a, &o, &task, &err)) fail_msg("%s: %s", method, err.msg);
    char path[] = "/tmp/posenc_ckpt_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    double la = 0, lb = 0;
    while (a.step < 5)
        if (tr_run_step(&a, &la, NULL, &err)) fail_msg("%s", err.msg);
    if (tr_run_save(&a, path, &err)) fail_msg("%s", err.msg);
    while (a.step < o.steps)
        if (tr_run_step(&a, &la, NULL, &err)) fail_msg("%s", err.msg);
    tr_options o2;
    if (tr_checkpoint_options(path, &o2, &err)) fail_msg("%s", err.msg);
    if (tr_run_init(&b, &o2, &task, &err) || tr_run_load(&b, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(b.step, 5);
    while (b.step < o.steps)
        if (tr_run_step(&b, &lb, NULL, &err)) fail_msg("%s", err.msg);
    char label[600];
    printf("  resume %-26s %-5s last loss %.7f and %.7f\n", tr_options_method_label(&o, label, sizeof label), task_name, la, lb);
    assert_true(la == lb);
    assert_int_equal(tr_model_size(a.model), tr_model_size(b.model));
    assert_memory_equal(tr_model_params(a.model), tr_model_params(b.model), sizeof(float) * tr_model_size(a.model));
    tr_run_free(&a), tr_run_free(&b);
    tr_task_free(&task);
    unlink(path);
}

static void test_resume(void **state) {
    (void)state;
    resume_case("learned", "lm", (const char *const[]){"shape", "4", NULL}); /* input table, SHAPE shifts */
    resume_case("t5", "copy", NULL);                                      /* shared tensor, padded batches */
    resume_case("xl", "lm", NULL);                                        /* memory carried across the checkpoint */
    /* randomized positions drawn from (seed, step): the resumed run draws the same */
    resume_case("learned", "lm", (const char *const[]){"random-positions", "40", NULL});
    resume_case("alibi", "copy", (const char *const[]){"random-positions", "48", NULL});
    /* a per-layer schedule with NoPE temperature tuning, and one with shared tensors */
    resume_case("rope", "lm", (const char *const[]){"layers", "4", "layers-methods", "rope,none", "nope-temperature", "4",
                                                     "attn_scale", "0.3", "random-positions", "64", NULL});
    resume_case("rope", "copy", (const char *const[]){"layers", "3", "layers-methods", "t5,none,kerple", NULL});
}

/* A step in micro-batches (--micro-batch): the gradient of the batch's mean loss, up to the
 * order of its sums, and the same loss, as the whole batch in one pass: passes of 3, 3 and 2
 * sequences against 8 at once, for an input table (SHAPE), a shared tensor over padded
 * batches, token ids (complex), a layernormed table (tupe), a schedule and dropout; its
 * checkpoint resumes bit for bit; a method with memory refuses it. */
static void micro_case(const char *method, const char *task_name, const char *const *extra) {
    if (pe_method_from_name(method) < 0) return;
    tr_run run[2];
    tr_task task[2];
    double loss[2] = {0};
    pe_err err;
    for (int k = 0; k < 2; k++) {
        tr_options o;
        small_options(&o, method);
        tr_options_set(&o, "task", task_name, &err);
        tr_options_set(&o, "length", "8", &err);
        tr_options_set(&o, "micro-batch", k ? "3" : "8", &err);
        for (int i = 0; extra && extra[i]; i += 2)
            if (tr_options_set(&o, extra[i], extra[i + 1], &err)) fail_msg("%s", err.msg);
        if (tr_task_from_options(&task[k], &o, &err) || tr_run_init(&run[k], &o, &task[k], &err)) fail_msg("%s: %s", method, err.msg);
        if (tr_run_step(&run[k], &loss[k], NULL, &err)) fail_msg("%s: %s", method, err.msg);
    }
    const float *g0 = tr_model_grads(run[0].model), *g1 = tr_model_grads(run[1].model);
    const size_t n = tr_model_size(run[0].model);
    double big = 0, diff = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(g0[i])), diff = fmax(diff, fabs((double)g0[i] - g1[i]));
    printf("  micro-batches %-12s %-5s loss %.7f and %.7f, gradients within %.2g of %.2g\n", method, task_name, loss[0],
           loss[1], diff, big);
    assert_true(big > 0 && diff <= 1e-5 * big);
    assert_true(fabs(loss[0] - loss[1]) <= 1e-6 * loss[0]);
    for (int k = 0; k < 2; k++) tr_run_free(&run[k]), tr_task_free(&task[k]);
}

static void test_micro_batches(void **state) {
    (void)state;
    micro_case("rope", "lm", NULL);
    micro_case("learned", "lm", (const char *const[]){"shape", "4", NULL});
    micro_case("t5", "copy", NULL);
    micro_case("complex", "lm", NULL);
    micro_case("tupe", "lm", NULL);
    micro_case("rope", "copy", (const char *const[]){"layers", "3", "layers-methods", "t5,none,kerple", NULL});
    micro_case("alibi", "lm", (const char *const[]){"dropout", "0.1", NULL});
    resume_case("alibi", "copy", (const char *const[]){"micro-batch", "3", NULL});
    tr_options o;
    small_options(&o, "xl");
    pe_err err;
    tr_options_set(&o, "micro-batch", "2", &err);
    tr_task task;
    tr_run run;
    if (tr_task_from_options(&task, &o, &err)) fail_msg("%s", err.msg);
    assert_int_equal(tr_run_init(&run, &o, &task, &err), PE_EKEY);
    assert_non_null(strstr(err.msg, "memory"));
    tr_task_free(&task);
}

/* Hostile checkpoints (found with tests/fuzz/fuzz_checkpoint.c): sizes past the limits in the
 * options or a checkpoint's metadata are refused before anything is built (width, mlp or batch
 * of 2^62 crashed the run, --eval 2^62 divided by zero), and a tensor of the model's size but
 * another shape is refused on load. */
static void test_hostile_checkpoint(void **state) {
    (void)state;
    static const char *const SIZES[] = {"width", "mlp", "batch", "micro-batch", "shape", "random-positions", "steps", "warmup", "eval-tokens", "corpus-chars", "eval"};
    const char *big = "4611686018427387904";
    pe_err err;
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        tr_options o;
        tr_options_default(&o);
        if (tr_options_set(&o, SIZES[i], big, &err)) fail_msg("%s", err.msg);
        if (!strcmp(SIZES[i], "width")) tr_options_set(&o, "heads", "1", &err);
        if (!strcmp(SIZES[i], "shape")) tr_options_set(&o, "method", "learned", &err);
        assert_int_equal(tr_options_check(&o, &err), PE_EKEY);
        char flag[40];
        snprintf(flag, sizeof flag, "--%s", SIZES[i]);
        if (!strstr(err.msg, flag)) fail_msg("%s: %s", SIZES[i], err.msg);
        tr_task task;
        assert_int_equal(tr_task_from_options(&task, &o, &err), PE_EKEY);
    }
    /* a run's checkpoint, then the same with mlp.fc.weight [F, C] stored as [C, F] */
    tr_options o;
    small_options(&o, "alibi");
    tr_options_set(&o, "task", "copy", &err);
    tr_options_set(&o, "length", "4", &err);
    tr_options_set(&o, "steps", "2", &err);
    tr_task task;
    tr_run a, b;
    if (tr_task_from_options(&task, &o, &err) || tr_run_init(&a, &o, &task, &err)) fail_msg("%s", err.msg);
    char path[] = "/tmp/posenc_ckpt_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    if (tr_run_save(&a, path, &err)) fail_msg("%s", err.msg);
    pe_st_file f;
    if (pe_st_read(path, &f, &err)) fail_msg("%s", err.msg);
    int found = 0;
    for (int j = 0; j < f.n; j++)
        if (!strcmp(f.t[j].name, "h.0.mlp.fc.weight")) {
            assert_true(f.t[j].shape[0] != f.t[j].shape[1]);
            int64_t r = f.t[j].shape[0];
            f.t[j].shape[0] = f.t[j].shape[1], f.t[j].shape[1] = r, found = 1;
        }
    assert_true(found);
    const char *const *mk = (const char *const *)f.meta_keys, *const *mv = (const char *const *)f.meta_values;
    if (pe_st_write(path, f.t, f.n, f.n_meta, mk, mv, &err)) fail_msg("%s", err.msg);
    pe_st_free(&f);
    if (tr_run_init(&b, &o, &task, &err)) fail_msg("%s", err.msg);
    assert_int_equal(tr_run_load(&b, path, &err), PE_ETENSOR);
    if (!strstr(err.msg, "'h.0.mlp.fc.weight' missing or of another shape")) fail_msg("%s", err.msg);
    /* width 2^62 in the metadata: the options read, the run refused */
    const char *keys[] = {"format", "step", "width", "heads"}, *vals[] = {"posenc-train-1", "0", big, "1"};
    if (pe_st_write(path, NULL, 0, 4, keys, vals, &err)) fail_msg("%s", err.msg);
    tr_options o2;
    if (tr_checkpoint_options(path, &o2, &err)) fail_msg("%s", err.msg);
    tr_task task2;
    assert_int_equal(tr_task_from_options(&task2, &o2, &err), PE_EKEY);
    if (!strstr(err.msg, "--width")) fail_msg("%s", err.msg);
    tr_run_free(&a), tr_run_free(&b);
    tr_task_free(&task);
    unlink(path);
}

/* ---- randomized positions (Ruoss et al. 2023) ---------------------------------------------- */

static int sorted_within(const int64_t *pos, int64_t len, int64_t range) {
    for (int64_t t = 0; t < len; t++)
        if (pos[t] < 0 || pos[t] >= range || (t && pos[t] <= pos[t - 1])) return 0;
    return 1;
}

/* A run of `method` (lm, length 8, eval 1,2) with the extra options, initialised. */
static void small_run(tr_run *r, tr_task *task, const char *method, const char *const *extra) {
    tr_options o;
    small_options(&o, method);
    pe_err err;
    tr_options_set(&o, "length", "8", &err);
    tr_options_set(&o, "steps", "4", &err);
    for (int i = 0; extra && extra[i]; i += 2)
        if (tr_options_set(&o, extra[i], extra[i + 1], &err)) fail_msg("%s", err.msg);
    if (tr_task_from_options(task, &o, &err)) fail_msg("%s", err.msg);
    if (tr_run_init(r, &o, task, &err)) fail_msg("%s", err.msg);
}

/* The draws are sorted, distinct and within [0, N), every T-subset equally likely (each
 * position in a draw with probability T/N), a function of the stream; a run's batches take
 * them from (seed, step), its evaluation from a stream of its own that the seed does not
 * change; N below the training length or the longest evaluated sequence is refused. */
static void test_random_positions(void **state) {
    (void)state;
    static const int64_t CASES[][2] = {{1, 1}, {5, 5}, {6, 3}, {64, 8}, {1000, 999}, {1LL << 30, 16}};
    int64_t pos[1000], again[1000];
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const int64_t range = CASES[c][0], len = CASES[c][1];
        for (uint64_t s = 1; s < 20; s++) {
            pe_rng a = {s}, b = {s};
            tr_random_positions(&a, range, len, pos);
            tr_random_positions(&b, range, len, again);
            assert_true(sorted_within(pos, len, range));
            assert_memory_equal(pos, again, sizeof(int64_t) * (size_t)len);
            if (len == range)
                for (int64_t t = 0; t < len; t++) assert_int_equal(pos[t], t);
        }
    }
    /* 3 of 6, 30000 draws: each position in 15000 of them, sd 87 */
    int64_t seen[6] = {0};
    pe_rng rng = {7};
    for (int i = 0; i < 30000; i++) {
        tr_random_positions(&rng, 6, 3, pos);
        for (int t = 0; t < 3; t++) seen[pos[t]]++;
    }
    for (int p = 0; p < 6; p++) assert_true(llabs(seen[p] - 15000) < 500);

    /* a run's batches: every row its own sorted draw; the same seed the same, another not */
    tr_task task;
    tr_run a, b, c;
    const char *rp[] = {"random-positions", "40", NULL}, *rp2[] = {"random-positions", "40", "seed", "2", NULL};
    small_run(&a, &task, "rope", rp);
    tr_task task_b, task_c;
    small_run(&b, &task_b, "rope", rp);
    small_run(&c, &task_c, "rope", rp2);
    pe_err err;
    for (int step = 0; step < 3; step++) {
        double la, lb, lc;
        int64_t n;
        if (tr_run_step(&a, &la, &n, &err) || tr_run_step(&b, &lb, NULL, &err) || tr_run_step(&c, &lc, NULL, &err))
            fail_msg("%s", err.msg);
        const int64_t len = n / a.o.batch;
        int spread = 0;
        for (int64_t r = 0; r < a.o.batch; r++) {
            assert_true(sorted_within(a.pos + r * len, len, 40));
            spread |= a.pos[r * len + len - 1] != len - 1;
        }
        assert_true(spread); /* not 0..T-1 */
        assert_memory_equal(a.pos, b.pos, sizeof(int64_t) * (size_t)n);
        assert_memory_not_equal(a.pos, c.pos, sizeof(int64_t) * (size_t)n);
        assert_true(la == lb);
    }
    /* evaluation: the same positions for every seed, sorted draws of [0, N), none past N */
    int64_t pe_a[16], pe_c[16];
    if (tr_run_positions(&a, 16, 3, pe_a, &err) || tr_run_positions(&c, 16, 3, pe_c, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(pe_a, pe_c, sizeof pe_a);
    assert_true(sorted_within(pe_a, 16, 40) && pe_a[15] != 15);
    assert_int_equal(tr_run_positions(&a, 41, 0, pos, &err), PE_EINVAL);
    tr_metrics m1, m2;
    if (tr_run_eval(&a, 2, &m1, &err) || tr_run_eval(&a, 2, &m2, &err)) fail_msg("%s", err.msg);
    assert_true(m1.loss == m2.loss);
    tr_run_free(&a), tr_run_free(&b), tr_run_free(&c);
    tr_task_free(&task), tr_task_free(&task_b), tr_task_free(&task_c);

    /* learned: a table row for every position in [0, N) */
    const char *rl[] = {"random-positions", "50", NULL};
    small_run(&a, &task, "learned", rl);
    const tr_tensor *t;
    int nt = tr_model_tensors(a.model, &t), found = 0;
    for (int k = 0; k < nt; k++)
        if (!strcmp(t[k].name, "pe.pos_table")) found = 1, assert_int_equal(t[k].shape[0], tr_model_cfg(a.model)->max_pos + 1);
    assert_true(found && tr_model_cfg(a.model)->max_pos == 50);
    if (tr_model_check_positions(a.model, 0, 49, &err)) fail_msg("%s", err.msg);
    tr_run_free(&a);
    tr_task_free(&task);

    /* N < L, N below the longest evaluation (8 x 2 = 16 tokens), negative, with SHAPE */
    static const char *const BAD[][4] = {{"random-positions", "7", "", "at least the training length 8"},
                                         {"random-positions", "12", "", "at least the longest sequence, 16 tokens"},
                                         {"random-positions", "-1", "", "must be >= 0"},
                                         {"random-positions", "64", "shape", "give one"},
                                         {"random-positions", "64", "method", "not by position"}};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        tr_options o;
        small_options(&o, "learned");
        tr_options_set(&o, "length", "8", &err);
        tr_options_set(&o, BAD[i][0], BAD[i][1], &err);
        if (BAD[i][2][0]) tr_options_set(&o, BAD[i][2], strcmp(BAD[i][2], "method") ? "4" : "xl", &err);
        pe_status st = tr_task_from_options(&task, &o, &err);
        if (!st) {
            st = tr_run_init(&a, &o, &task, &err);
            tr_task_free(&task);
        }
        assert_int_equal(st, PE_EKEY);
        if (!strstr(err.msg, BAD[i][3]) || !strstr(err.msg, "--random-positions")) fail_msg("%s", err.msg);
    }
}

/* ---- per-layer schedules ------------------------------------------------------------------ */

static int has_tensor(tr_model *m, const char *name) {
    const tr_tensor *t;
    int nt = tr_model_tensors(m, &t);
    for (int k = 0; k < nt; k++)
        if (!strcmp(t[k].name, name)) return 1;
    return 0;
}

/* Decoding through the KV caches against the full forward at every step (posenc generate
 * --check); returns the largest difference of probabilities. */
static double decode_deviation(tr_run *r, const tr_task *task, int64_t total) {
    int32_t ids[64], tgt[64];
    int64_t pos[64];
    assert_true(total <= 64);
    pe_err err;
    if (tr_run_positions(r, total, 0, pos, &err)) fail_msg("%s", err.msg);
    for (int64_t t = 0; t < total; t++) ids[t] = (int32_t)((t * 7 + 3) % task->V), tgt[t] = -1;
    tr_decoder *d;
    if (tr_decoder_init(&d, r->model, total, &err)) fail_msg("%s", err.msg);
    float *p = malloc(sizeof(float) * (size_t)(total * task->V));
    double dev = 0;
    const int64_t P = 5; /* a prompt in one step, then one token a step */
    for (int64_t n = P; n <= total; n++) {
        const int64_t from = n == P ? 0 : n - 1;
        if (tr_decoder_step(d, ids + from, pos + from, n - from, p, &err)) fail_msg("%s", err.msg);
        double loss;
        if (tr_model_forward(r->model, ids, tgt, pos, 1, n, 0, &loss, NULL, &err)) fail_msg("%s", err.msg);
        const float *full = tr_model_probs(r->model) + (n - 1) * task->V, *cached = p + (n - from - 1) * task->V;
        for (int64_t v = 0; v < task->V; v++) dev = fmax(dev, fabs((double)cached[v] - full[v]));
    }
    free(p);
    tr_decoder_free(d);
    return dev;
}

/* Layer l runs method l mod n of the list, with its own tensors (shared ones as
 * pe.<method>.<tensor>) and only the keys its method takes; --nope-temperature changes the
 * none layers (and at a floor_scale past every position, nothing); the finite differences
 * of a mixed model; a trained mixed model decodes through its caches as the full model does;
 * bad schedules are refused by name. */
static void test_schedule(void **state) {
    (void)state;
    tr_task task;
    tr_run r;
    pe_err err;
    small_run(&r, &task, "rope", (const char *const[]){"layers", "5", "layers-methods", "kerple,none,t5", "num_buckets", "8", NULL});
    for (int l = 0; l < 5; l++) {
        char name[64];
        snprintf(name, sizeof name, "h.%d.attn.kerple_r1", l);
        assert_int_equal(has_tensor(r.model, name), l % 3 == 0);
    }
    assert_true(has_tensor(r.model, "pe.t5.rel_bias") && !has_tensor(r.model, "pe.rel_bias"));
    char buf[32];
    assert_string_equal(tr_options_layer_method(&r.o, 4, buf, sizeof buf), "none");
    tr_run_free(&r);
    tr_task_free(&task);

    /* the temperature: a floor_scale past every position leaves tau = 1, a small one does not */
    double loss[3];
    const char *temps[] = {"0", "1e15", "2"};
    for (int k = 0; k < 3; k++) {
        small_run(&r, &task, "rope",
                  (const char *const[]){"layers", "2", "layers-methods", "rope,none", "nope-temperature", temps[k], NULL});
        if (tr_run_step(&r, &loss[k], NULL, &err) || tr_run_step(&r, &loss[k], NULL, &err)) fail_msg("%s", err.msg);
        tr_run_free(&r);
        tr_task_free(&task);
    }
    printf("  rope,none: loss of step 2 %.7f, tau = 1: %.7f, floor_scale 2: %.7f\n", loss[0], loss[1], loss[2]);
    assert_true(loss[0] == loss[1] && loss[0] != loss[2]);

    /* finite differences through a kerple layer and a tuned none layer, at shifted positions */
    tr_model_config c;
    config_of(&c, "rope", "max_rel=3 attn_temperature_tuning=true floor_scale=2 attn_scale=0.5");
    snprintf(c.schedule, sizeof c.schedule, "huang3,none");
    fd_case f = {0};
    if (tr_model_init(&f.m, &c, 3, &err)) fail_msg("%s", err.msg);
    randomise(f.m, 12);
    pe_rng rng = {5};
    for (int i = 0; i < B * T; i++) {
        f.in[i] = (int32_t)(pe_rng_next(&rng) % V);
        f.tgt[i] = i % 4 == 1 ? -1 : (int32_t)(pe_rng_next(&rng) % V);
        f.pos[i] = 2 * (i % T) + 3 * (i / T);
    }
    double worst = fd_check(&f, "huang3,none (tuned)");
    printf("  %-24s worst %.3g x tolerance\n", "huang3,none (tuned)", worst);
    assert_true(worst <= 1.0);
    tr_model_free(f.m);

    /* a trained mixed model, with randomized positions, decodes as its full forward */
    small_run(&r, &task, "rope",
              (const char *const[]){"layers", "4", "layers-methods", "alibi,none,rope", "nope-temperature", "3",
                                    "random-positions", "64", NULL});
    for (int k = 0; k < 4; k++)
        if (tr_run_step(&r, &loss[0], NULL, &err)) fail_msg("%s", err.msg);
    double dev = decode_deviation(&r, &task, 24);
    printf("  alibi,none,rope decoding: max |p_cache - p_full| %.3g\n", dev);
    assert_true(dev < 1e-5);
    tr_run_free(&r);
    tr_task_free(&task);

    static const char *const BAD[][3] = {
        {"rope,nosuch", "", "nosuch"},
        {"rope,learned", "", "learned is not a method of the layers"},
        {"rope,complex", "", "complex is not a method of the layers"},
        {"rope,xl", "", "carries memory"},
        {"rope,none,alibi", "", "3 methods for 2 layers"},
        {"rope,,none", "", "method names separated by commas"},
        {"rope,alibi", "nope-temperature", "none layers"},
        {"rope,none", "num_buckets", "applies to none of the methods"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        tr_options o;
        small_options(&o, "rope");
        tr_options_set(&o, "layers", "2", &err);
        tr_options_set(&o, "layers-methods", BAD[i][0], &err);
        if (BAD[i][1][0]) tr_options_set(&o, BAD[i][1], "8", &err);
        pe_status st = tr_task_from_options(&task, &o, &err);
        if (!st) {
            st = tr_run_init(&r, &o, &task, &err);
            tr_task_free(&task);
        }
        assert_true(st != PE_OK);
        if (!strstr(err.msg, BAD[i][2])) fail_msg("%s: %s", BAD[i][0], err.msg);
    }
}

/* ---- attention probabilities of a block (tr_model_attention, for posenc plot) --------------- */

static const float *tensor_named(tr_model *m, const char *name) {
    const tr_tensor *t;
    int nt = tr_model_tensors(m, &t);
    for (int k = 0; k < nt; k++)
        if (!strcmp(t[k].name, name)) return tr_model_params(m) + t[k].off;
    fail_msg("no tensor %s", name);
    return NULL;
}

/* Rows are distributions over the causal past; block 0 of a method without tensors equals the
 * operator run by hand on LayerNorm(sqrt(C) wte[in]); a bad block is refused. */
static void test_attention(void **state) {
    (void)state;
    const char *methods[] = {"alibi", "rope", "learned", "complex", "xl", "t5"};
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        tr_model_config c;
        config_of(&c, methods[k], tiny_keys(methods[k]));
        tr_model *m;
        pe_err err;
        if (tr_model_init(&m, &c, 5, &err)) fail_msg("%s: %s", methods[k], err.msg);
        randomise(m, 11);
        const int64_t H = c.heads, C = c.C;
        int32_t in[T] = {1, 4, 0, 6, 2};
        float p[2][H * T * T];
        for (int l = 0; l < 2; l++) {
            if (tr_model_attention(m, in, NULL, T, l, p[l], &err)) fail_msg("%s: block %d: %s", methods[k], l, err.msg);
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < T; i++) {
                    double sum = 0;
                    for (int64_t j = 0; j < T; j++) {
                        float v = p[l][(h * T + i) * T + j];
                        assert_true(isfinite(v) && v >= 0);
                        if (j > i) assert_true(v == 0);
                        sum += v;
                    }
                    assert_true(fabs(sum - 1) < 1e-5);
                }
        }
        assert_memory_not_equal(p[0], p[1], sizeof p[0]);
        if (!strcmp(methods[k], "alibi") || !strcmp(methods[k], "rope")) {
            float x[T * C], ln[T * C], y[T * C], q[H * T * T];
            const float es = sqrtf((float)C), *wte = tensor_named(m, "wte"), *lw = tensor_named(m, "h.0.ln_1.weight"),
                        *lb = tensor_named(m, "h.0.ln_1.bias");
            for (int64_t t = 0; t < T; t++) {
                float mu = 0, var = 0;
                for (int64_t e = 0; e < C; e++) x[t * C + e] = es * wte[in[t] * C + e], mu += x[t * C + e] / C;
                for (int64_t e = 0; e < C; e++) var += (x[t * C + e] - mu) * (x[t * C + e] - mu) / C;
                for (int64_t e = 0; e < C; e++) ln[t * C + e] = (x[t * C + e] - mu) / sqrtf(var + 1e-5f) * lw[e] + lb[e];
            }
            pe_config cfg;
            pe_config_init(&cfg);
            const char *keys[] = {"method", "heads", "causal"}, *vals[] = {methods[k], "2", "true"};
            pe_attention *att;
            if (pe_config_set_all(&cfg, 3, keys, vals, &err) || pe_attention_init(&att, &cfg, C, &err)) fail_msg("%s", err.msg);
            pe_weights w = {.wq = tensor_named(m, "h.0.attn.wq"), .wk = tensor_named(m, "h.0.attn.wk"),
                            .wv = tensor_named(m, "h.0.attn.wv"), .wo = tensor_named(m, "h.0.attn.wo"),
                            .bq = tensor_named(m, "h.0.attn.bq"), .bk = tensor_named(m, "h.0.attn.bk"),
                            .bv = tensor_named(m, "h.0.attn.bv"), .bo = tensor_named(m, "h.0.attn.bo")};
            if (pe_attention_forward(att, &w, ln, NULL, 0, NULL, 0, 1, T, y, NULL, q, &err)) fail_msg("%s", err.msg);
            for (int64_t e = 0; e < H * T * T; e++) assert_true(fabsf(q[e] - p[0][e]) < 1e-5f);
            pe_attention_free(att);
        }
        assert_int_equal(tr_model_attention(m, in, NULL, T, 2, p[0], &err), PE_EINVAL);
        assert_int_equal(tr_model_attention(m, in, NULL, T, -1, p[0], &err), PE_EINVAL);
        tr_model_free(m);
    }
}

int main(void) {
    tr_env_setup(1); /* one thread, as the trainer runs: no spinning pools (valgrind) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tasks),
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_optimizer),
        cmocka_unit_test(test_dropout_masks),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_trivial_task),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_micro_batches),
        cmocka_unit_test(test_random_positions),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_hostile_checkpoint),
        cmocka_unit_test(test_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
