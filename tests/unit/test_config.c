/* Settings (src/config.c): every kind of key from text, the method check, set_all's order,
 * and what pe_attention_init validates and resolves. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "posenc.h"

#define assert_msg_has(msg, sub)                                                   \
    do {                                                                           \
        if (!strstr((msg), (sub))) fail_msg("message \"%s\" lacks \"%s\"", (msg), (sub)); \
    } while (0)

#define assert_near(a, b)                                                                  \
    do {                                                                                   \
        double a_ = (a), b_ = (b);                                                         \
        if (!(fabs(a_ - b_) <= 1e-12 * (1 + fabs(b_)))) fail_msg("%s = %.17g, expected %.17g", #a, a_, b_); \
    } while (0)

static void set_ok(pe_config *c, const char *key, const char *value) {
    pe_err err = {{0}};
    pe_status st = pe_config_set(c, key, value, &err);
    if (st) fail_msg("pe_config_set(%s, %s): %s", key, value, err.msg);
    assert_true(pe_config_is_set(c, key));
}

/* pe_config_set must fail with PE_EKEY and a message naming each of subs (NULL-terminated);
 * the key stays unset and the config otherwise unchanged. */
static void set_bad(pe_config *c, const char *key, const char *value, ...) {
    pe_config before;
    memcpy(&before, c, sizeof before);
    pe_err err = {{0}};
    pe_status st = pe_config_set(c, key, value, &err);
    if (st != PE_EKEY) fail_msg("pe_config_set(%s, %s): status %d, expected PE_EKEY (%s)", key, value, st, err.msg);
    assert_null(strchr(err.msg, '\n'));
    va_list ap;
    va_start(ap, value);
    for (const char *s; (s = va_arg(ap, const char *));) assert_msg_has(err.msg, s);
    va_end(ap);
    assert_memory_equal(&before, c, sizeof *c);
}

/* A config of method m (NULL: none set) with these key=value pairs; fails the test on error. */
static pe_config make(const char *method, const char *const *kv) {
    pe_config c;
    pe_config_init(&c);
    if (method) set_ok(&c, "method", method);
    for (int i = 0; kv && kv[i]; i += 2) set_ok(&c, kv[i], kv[i + 1]);
    return c;
}

/* pe_attention_init must fail with one of the statuses and name each of subs. */
static void init_bad(const pe_config *c, int64_t C, int want, int or_want, ...) {
    pe_attention *att = (pe_attention *)&att; /* must be reset to NULL */
    pe_err err = {{0}};
    pe_status st = pe_attention_init(&att, c, C, &err);
    if (st != want && st != or_want)
        fail_msg("pe_attention_init: status %d (%s), expected %d; \"%s\"", st, pe_status_str(st), want, err.msg);
    assert_null(att);
    va_list ap;
    va_start(ap, or_want);
    for (const char *s; (s = va_arg(ap, const char *));) assert_msg_has(err.msg, s);
    va_end(ap);
}

static pe_attention *init_ok(const pe_config *c, int64_t C) {
    pe_attention *att = NULL;
    pe_err err = {{0}};
    pe_status st = pe_attention_init(&att, c, C, &err);
    if (st) fail_msg("pe_attention_init: %s", err.msg);
    assert_non_null(att);
    return att;
}

/* ---- pe_config_set ------------------------------------------------------------------- */

static void test_defaults_unset(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    assert_int_equal(c.method, -1);
    for (int w = 0; w < PE_KEY_WORDS; w++) assert_int_equal(c.set[w], 0);
    for (int k = 0; pe_config_key_name(k); k++) assert_false(pe_config_is_set(&c, pe_config_key_name(k)));
    assert_false(pe_config_is_set(&c, "no_such_key"));
    /* a fixed size, whatever keys a release adds (include/posenc/core.h), and the oldest fields
     * first: `set` then `method` (a new key's field goes at the end) */
    assert_int_equal(sizeof c, PE_CONFIG_BYTES);
    assert_int_equal(pe_config_size(), PE_CONFIG_BYTES);
    assert_int_equal(offsetof(pe_config, set), 0);
    assert_int_equal(offsetof(pe_config, method), sizeof c.set);
    assert_true(offsetof(pe_config, head_scale_min) > offsetof(pe_config, hf_factors));
}

static void test_key_names(void **state) {
    (void)state;
    int n = 0;
    while (pe_config_key_name(n)) n++;
    assert_int_equal(n, PE_K_COUNT); /* the ids are the keys, in order */
    assert_in_range(n, 6, 64 * PE_KEY_WORDS); /* one bit of pe_config.set per key */
    assert_string_equal(pe_config_key_name(PE_K_window), "window");
    assert_string_equal(pe_config_key_name(PE_K_attn_scale), "attn_scale");
    assert_null(pe_config_key_name(-1));
    const char *common[] = {"method", "heads", "causal", "scale", "kv_heads", "window"};
    for (int k = 0; k < 6; k++) assert_string_equal(pe_config_key_name(k), common[k]);
    /* names are distinct */
    for (int k = 0; k < n; k++)
        for (int j = 0; j < k; j++) assert_string_not_equal(pe_config_key_name(k), pe_config_key_name(j));
}

static void test_integers(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "heads", "16");
    assert_int_equal(c.heads, 16);
    assert_int_equal(c.set[0], (uint64_t)1 << PE_K_heads);
    assert_true(pe_config_has(&c, PE_K_heads) && !pe_config_has(&c, PE_K_kv_heads));
    assert_false(pe_config_has(&c, PE_K_COUNT) || pe_config_has(&c, (pe_key)-1));
    set_ok(&c, "kv_heads", "4");
    assert_int_equal(c.kv_heads, 4);
    set_ok(&c, "heads", "-3"); /* range checks come in pe_attention_init */
    assert_int_equal(c.heads, -3);
    set_ok(&c, "max_rel", "2147483648"); /* 2^31: the largest an integer key takes */
    assert_int_equal(c.max_rel, 2147483648LL);
    set_bad(&c, "max_rel", "9000000000", "max_rel", "2^31", (char *)NULL); /* sizes stay far from overflow */
    set_bad(&c, "shift", "9223372036854775807", "shift", (char *)NULL);
    set_bad(&c, "heads", "", "heads", (char *)NULL);
    set_bad(&c, "heads", "2.5", "heads", "'2.5'", "integer", (char *)NULL);
    set_bad(&c, "heads", "1e3", "heads", (char *)NULL);
    set_bad(&c, "heads", "8x", "heads", (char *)NULL);
    set_bad(&c, "heads", "abc", "heads", (char *)NULL);
    set_bad(&c, "max_rel", "99999999999999999999999", "max_rel", (char *)NULL);
}

static void test_reals(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "scale", "1e-4");
    assert_near(c.scale, 1e-4);
    set_ok(&c, "scale", "0.5");
    assert_near(c.scale, 0.5);
    set_ok(&c, "rope_base", "500000");
    assert_near(c.rope_base, 500000);
    set_ok(&c, "xpos_gamma", "-2.5E+1");
    assert_near(c.xpos_gamma, -25);
    set_ok(&c, "sin_base", "7"); /* an integer is a real */
    assert_near(c.sin_base, 7);
    set_bad(&c, "scale", "", "scale", (char *)NULL);
    set_bad(&c, "scale", "abc", "scale", "'abc'", "number", (char *)NULL);
    set_bad(&c, "scale", "0.5x", "scale", (char *)NULL);
    set_bad(&c, "scale", "inf", "scale", (char *)NULL);
    set_bad(&c, "scale", "nan", "scale", (char *)NULL);
    set_bad(&c, "scale", "1e999", "scale", (char *)NULL);
    set_ok(&c, "attn_scale", "1e-310"); /* subnormal: a number (was "not a number", issue 32) */
    assert_true(c.attn_scale > 0 && c.attn_scale < 1e-300);
}

static void test_booleans(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "causal", "true");
    assert_int_equal(c.causal, 1);
    set_ok(&c, "causal", "false");
    assert_int_equal(c.causal, 0);
    set_ok(&c, "share_att_key", "false");
    assert_int_equal(c.share_att_key, 0);
    const char *bad[] = {"1", "0", "yes", "True", "FALSE", "", "t", "true "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        set_bad(&c, "causal", bad[i], "causal", "true or false", (char *)NULL);
}

static void test_enums(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "sin_layout", "concat");
    assert_int_equal(c.sin_layout, PE_SIN_CONCAT);
    set_ok(&c, "sin_layout", "t2t");
    assert_int_equal(c.sin_layout, PE_SIN_T2T);
    set_ok(&c, "sin_layout", "interleaved");
    assert_int_equal(c.sin_layout, PE_SIN_INTERLEAVED);
    set_bad(&c, "sin_layout", "half", "sin_layout", "'half'", "interleaved|concat|t2t", (char *)NULL);
    set_bad(&c, "sin_layout", "", "sin_layout", (char *)NULL);
    set_bad(&c, "sin_layout", "concat|t2t", "sin_layout", (char *)NULL);
    set_bad(&c, "sin_layout", "Concat", "sin_layout", (char *)NULL);
    set_bad(&c, "sin_layout", "conca", "sin_layout", (char *)NULL);

    set_ok(&c, "rope_layout", "interleaved");
    assert_int_equal(c.rope_layout, PE_ROPE_INTERLEAVED);
    set_ok(&c, "rope_layout", "half");
    assert_int_equal(c.rope_layout, PE_ROPE_HALF);
    set_bad(&c, "rope_layout", "concat", "rope_layout", "half|interleaved", (char *)NULL);

    set_ok(&c, "rope_scaling", "yarn");
    assert_int_equal(c.rope_scaling, PE_ROPE_YARN);
    set_ok(&c, "kerple", "power");
    assert_int_equal(c.kerple, PE_KERPLE_POWER);
}

/* pos_att belongs to a method that may not exist yet: with no method set, any known key is
 * accepted, so the flags parser is testable on its own. */
static void test_flags(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    assert_int_equal(c.method, -1);
    set_ok(&c, "pos_att", "p2c");
    assert_int_equal(c.pos_att, PE_POS_ATT_P2C);
    set_ok(&c, "pos_att", "c2p");
    assert_int_equal(c.pos_att, PE_POS_ATT_C2P);
    set_ok(&c, "pos_att", "c2p|p2c");
    assert_int_equal(c.pos_att, PE_POS_ATT_C2P | PE_POS_ATT_P2C);
    set_ok(&c, "pos_att", "p2c");
    set_ok(&c, "pos_att", "p2c|c2p");
    assert_int_equal(c.pos_att, PE_POS_ATT_C2P | PE_POS_ATT_P2C);
    set_bad(&c, "pos_att", "c2x", "pos_att", "'c2x'", "c2p|p2c", (char *)NULL);
    set_bad(&c, "pos_att", "c2p|c2x", "pos_att", (char *)NULL);
    set_bad(&c, "pos_att", "", "pos_att", (char *)NULL);
    set_bad(&c, "pos_att", "c2p|", "pos_att", (char *)NULL);
    set_bad(&c, "pos_att", "|p2c", "pos_att", (char *)NULL);
    set_bad(&c, "pos_att", "c2p,p2c", "pos_att", (char *)NULL);
}

static void test_paths(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "hf_config", "tests/hf/llama31.json"); /* read as it is set (test_hf_config) */
    assert_string_equal(c.hf_config, "tests/hf/llama31.json");
    set_bad(&c, "hf_config", "/some/config.json", "hf_config /some/config.json: cannot open", (char *)NULL);
    set_bad(&c, "hf_config", "", "hf_config", (char *)NULL);
    char long_path[600];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = 0;
    set_bad(&c, "hf_config", long_path, "hf_config", (char *)NULL);
}

static void test_unknown_key(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_bad(&c, "heds", "2", "'heds'", (char *)NULL);
    set_bad(&c, "", "2", "''", (char *)NULL);
    set_bad(&c, "Heads", "2", "'Heads'", (char *)NULL);
    set_ok(&c, "method", "rope");
    set_bad(&c, "rope_bas", "2", "'rope_bas'", (char *)NULL);
}

static void test_methods(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        set_ok(&c, "method", pe_method_name(m));
        assert_int_equal(c.method, m);
        assert_int_equal(pe_method_from_name(pe_method_name(m)), m);
    }
    assert_int_equal(pe_method_from_name("nope"), -1);
    set_bad(&c, "method", "nope", "'nope'", "rope", (char *)NULL); /* lists the known ones */
    set_bad(&c, "method", "", "method", (char *)NULL);
    set_bad(&c, "method", "RoPE", "'RoPE'", (char *)NULL);
}

/* With the method set first, a key of another method is refused at once, naming both. */
static void test_key_of_other_method(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "method", "t5");
    set_bad(&c, "rope_base", "500000", "'rope_base'", "t5", (char *)NULL);
    set_bad(&c, "max_rel", "4", "'max_rel'", "t5", (char *)NULL);
    set_ok(&c, "num_buckets", "16"); /* its own */
    set_ok(&c, "heads", "2");        /* common keys apply to every method */
    set_ok(&c, "causal", "true");
    set_ok(&c, "scale", "0.5");
    set_ok(&c, "kv_heads", "1");

    pe_config n;
    pe_config_init(&n);
    set_ok(&n, "method", "none");
    set_bad(&n, "shift", "1", "'shift'", "none", (char *)NULL);
    set_bad(&n, "pos_att", "c2p", "'pos_att'", "none", (char *)NULL);
}

/* Without a method the key is kept; pe_attention_init then refuses it. */
static void test_key_of_other_method_late(void **state) {
    (void)state;
    pe_config c;
    pe_config_init(&c);
    set_ok(&c, "rope_base", "500000");
    set_ok(&c, "heads", "2");
    set_ok(&c, "method", "t5");
    init_bad(&c, 8, PE_EKEY, PE_EKEY, "'rope_base'", "t5", (char *)NULL);
}

static void test_set_all_method_first(void **state) {
    (void)state;
    pe_err err = {{0}};
    {
        const char *k[] = {"rope_base", "rotary_dim", "heads", "method"};
        const char *v[] = {"500000", "2", "2", "rope"};
        pe_config c;
        pe_config_init(&c);
        assert_int_equal(pe_config_set_all(&c, 4, k, v, &err), PE_OK);
        assert_int_equal(c.method, PE_METHOD_ROPE);
        assert_near(c.rope_base, 500000);
        assert_int_equal(c.rotary_dim, 2);
        assert_int_equal(c.heads, 2);
        assert_true(pe_config_is_set(&c, "method"));
    }
    {
        /* method last, yet the wrong key is refused as not t5's */
        const char *k[] = {"heads", "rope_base", "method"};
        const char *v[] = {"2", "500000", "t5"};
        pe_config c;
        pe_config_init(&c);
        pe_status st = pe_config_set_all(&c, 3, k, v, &err);
        assert_int_equal(st, PE_EKEY);
        assert_msg_has(err.msg, "'rope_base'");
        assert_msg_has(err.msg, "t5");
    }
    {
        /* the first bad value stops it, named */
        const char *k[] = {"method", "heads", "causal"};
        const char *v[] = {"none", "2", "yes"};
        pe_config c;
        pe_config_init(&c);
        assert_int_equal(pe_config_set_all(&c, 3, k, v, &err), PE_EKEY);
        assert_msg_has(err.msg, "causal");
    }
    {
        const char *k[] = {"heads", "method"};
        const char *v[] = {"2", "bogus"};
        pe_config c;
        pe_config_init(&c);
        assert_int_equal(pe_config_set_all(&c, 2, k, v, &err), PE_EKEY);
        assert_msg_has(err.msg, "'bogus'");
    }
    {
        pe_config c;
        pe_config_init(&c);
        assert_int_equal(pe_config_set_all(&c, 0, NULL, NULL, &err), PE_OK);
        for (int w = 0; w < PE_KEY_WORDS; w++) assert_int_equal(c.set[w], 0);
    }
}

/* What a method says of itself for tools (pe_method_describe) and of its tensors in a model
 * of several layers (pe_param_spec: shared, LayerNorm'ed, rows per token, clamps). */
static void test_method_descriptions(void **state) {
    (void)state;
    pe_method_info info;
    pe_err err;
    assert_int_equal(pe_method_describe(PE_METHOD_SINUSOIDAL, &info, &err), PE_OK);
    assert_true(info.embedding && !info.projected && info.fused && info.family == PE_FAMILY_ABSOLUTE);
    assert_int_equal(pe_method_describe(PE_METHOD_FLOATER, &info, &err), PE_OK);
    assert_true(!info.embedding && info.projected && info.family == PE_FAMILY_ABSOLUTE);
    assert_int_equal(pe_method_describe(PE_METHOD_COMPLEX, &info, &err), PE_OK);
    assert_true(info.token_ids && !info.embedding && !info.projected);
    assert_int_equal(pe_method_describe(PE_METHOD_T5, &info, &err), PE_OK);
    assert_true(info.relative_index && info.gqa && !info.memory);
    assert_int_equal(pe_method_describe(PE_METHOD_XL, &info, &err), PE_OK);
    assert_true(info.memory && !info.fused);
    assert_int_equal(pe_method_describe(PE_METHOD_COUNT, &info, &err), PE_EINVAL);
    static const struct { const char *method, *tensor; int shared, layernormed, token_rows, clamped; } want[] = {
        {"t5", "rel_bias", 1, 0, 0, 0},          {"deberta", "rel_embeddings", 1, 1, 0, 0},
        {"floater", "floater_b1", 1, 0, 0, 0},   {"floater", "floater_w1", 1, 0, 0, 0},
        {"floater", "floater_b0", 0, 0, 0, 0},   {"tupe", "pos_table", 1, 0, 0, 0},
        {"complex", "amp", 0, 0, 1, 0},          {"kerple", "kerple_r2", 0, 0, 0, 1},
        {"alibi", "alibi_slopes", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        pe_config cfg;
        pe_attention *att = NULL;
        pe_config_init(&cfg);
        if (pe_config_set(&cfg, "method", want[i].method, &err) || pe_config_set(&cfg, "heads", "2", &err) ||
            pe_attention_init(&att, &cfg, 16, &err))
            fail_msg("%s: %s", want[i].method, err.msg);
        pe_param_spec sp[PE_MAX_PARAMS];
        int n = pe_attention_params(att, sp), found = 0;
        for (int k = 0; k < n; k++)
            if (!strcmp(sp[k].name, want[i].tensor)) {
                found = 1;
                assert_int_equal(sp[k].shared, want[i].shared);
                assert_int_equal(sp[k].layernormed, want[i].layernormed);
                assert_int_equal(sp[k].token_rows, want[i].token_rows);
                assert_int_equal(sp[k].clamped, want[i].clamped);
                if (sp[k].clamped) assert_true(sp[k].clamp_min == 0.01);
            }
        if (!found) fail_msg("%s has no tensor %s", want[i].method, want[i].tensor);
        pe_attention_free(att);
    }
}

static void test_method_keys(void **state) {
    (void)state;
    char buf[512];
    pe_method_keys(PE_METHOD_SHAW, buf, sizeof buf);
    assert_msg_has(buf, "max_rel");
    pe_method_keys(PE_METHOD_T5, buf, sizeof buf);
    assert_msg_has(buf, "num_buckets");
    assert_null(strstr(buf, "rope_base"));
    pe_method_keys(PE_METHOD_ROPE, buf, sizeof buf);
    assert_msg_has(buf, "rotary_dim");
    assert_msg_has(buf, "rotary_offset");
    pe_method_keys(PE_METHOD_NONE, buf, sizeof buf);
    assert_string_equal(buf, "attn_temperature_tuning floor_scale attn_scale head_scale head_scale_init head_scale_min "
                             "hf_config hf_layer hf_assume");
}

/* ---- pe_attention_init: validation --------------------------------------------------- */

static void test_init_errors(void **state) {
    (void)state;
    {
        pe_config c = make(NULL, (const char *[]){"heads", "2", NULL});
        init_bad(&c, 8, PE_EKEY, PE_EKEY, "method", (char *)NULL);
    }
    {
        pe_config c = make("none", NULL);
        init_bad(&c, 8, PE_EKEY, PE_EKEY, "'heads'", (char *)NULL);
    }
    {
        pe_config c = make("none", (const char *[]){"heads", "0", NULL});
        init_bad(&c, 8, PE_EKEY, PE_EKEY, "heads", (char *)NULL);
    }
    {
        pe_config c = make("none", (const char *[]){"heads", "-2", NULL});
        init_bad(&c, 8, PE_EKEY, PE_EKEY, "heads", (char *)NULL);
    }
    {
        /* the width comes from tensor x: either status names the problem */
        pe_config c = make("none", (const char *[]){"heads", "3", NULL});
        init_bad(&c, 8, PE_ETENSOR, PE_EKEY, "heads", "8", (char *)NULL);
    }
    {
        pe_config c = make("rope", (const char *[]){"heads", "4", "kv_heads", "3", NULL});
        init_bad(&c, 16, PE_EKEY, PE_EKEY, "'kv_heads'", (char *)NULL);
    }
    {
        pe_config c = make("rope", (const char *[]){"heads", "4", "kv_heads", "0", NULL});
        init_bad(&c, 16, PE_EKEY, PE_EKEY, "'kv_heads'", (char *)NULL);
    }
    {
        pe_config c = make("rope", (const char *[]){"heads", "2", "kv_heads", "4", NULL});
        init_bad(&c, 16, PE_EKEY, PE_EKEY, "'kv_heads'", (char *)NULL);
    }
    {
        /* shaw has no grouped-query attention */
        pe_config c = make("shaw", (const char *[]){"heads", "2", "kv_heads", "1", NULL});
        init_bad(&c, 8, PE_EKEY, PE_EKEY, "'kv_heads'", "shaw", (char *)NULL);
        /* kv_heads == heads is plain attention, fine */
        c = make("shaw", (const char *[]){"heads", "2", "kv_heads", "2", NULL});
        pe_attention_free(init_ok(&c, 8));
    }
    {
        /* rotary_dim: even, 2..head_dim (C=16, heads=2: D=8) */
        const char *bad[] = {"3", "7", "10", "16", "0", "-2"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            pe_config c = make("rope", (const char *[]){"heads", "2", "rotary_dim", bad[i], NULL});
            init_bad(&c, 16, PE_EKEY, PE_EKEY, "'rotary_dim'", (char *)NULL);
        }
        const char *good[] = {"2", "4", "8"};
        for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
            pe_config c = make("rope", (const char *[]){"heads", "2", "rotary_dim", good[i], NULL});
            pe_attention_free(init_ok(&c, 16));
        }
    }
    {
        /* rope with an odd head_dim has no default rotary_dim that works */
        pe_config c = make("rope", (const char *[]){"heads", "3", NULL});
        init_bad(&c, 9, PE_EKEY, PE_EKEY, "rotary_dim", (char *)NULL);
    }
    {
        /* sinusoidal needs an even width (here C = 9) */
        pe_config c = make("sinusoidal", (const char *[]){"heads", "3", NULL});
        init_bad(&c, 9, PE_EKEY, PE_EKEY, "even", (char *)NULL);
        c = make("sinusoidal", (const char *[]){"heads", "1", "sin_layout", "concat", NULL});
        init_bad(&c, 7, PE_EKEY, PE_EKEY, "even", (char *)NULL);
        c = make("sinusoidal", (const char *[]){"heads", "1", "sin_layout", "t2t", NULL});
        init_bad(&c, 2, PE_EKEY, PE_EKEY, "t2t", (char *)NULL);
        c = make("sinusoidal", (const char *[]){"heads", "3", NULL});
        pe_attention_free(init_ok(&c, 6));
    }
    {
        /* learned: the spec asks only pos_table [N, C], so any width is fine, odd too */
        pe_config c = make("learned", (const char *[]){"heads", "3", NULL});
        pe_attention *att = init_ok(&c, 9);
        pe_param_spec s[PE_MAX_PARAMS];
        assert_int_equal(pe_attention_params(att, s), 1);
        assert_string_equal(s[0].name, "pos_table");
        assert_int_equal(s[0].ndim, 2);
        assert_int_equal(s[0].shape[0], -1);
        assert_int_equal(s[0].shape[1], 9);
        pe_attention_free(att);
    }
    {
        /* width 0 or negative */
        pe_config c = make("none", (const char *[]){"heads", "1", NULL});
        init_bad(&c, 0, PE_ETENSOR, PE_EKEY, "heads", (char *)NULL);
    }
}

/* ---- pe_attention_init: method defaults ---------------------------------------------- */

static void test_default_scale(void **state) {
    (void)state;
    pe_config c = make("none", (const char *[]){"heads", "2", NULL});
    pe_attention *att = init_ok(&c, 32); /* D = 16 */
    const pe_config *r = pe_attention_config(att);
    assert_near(r->scale, 0.25);
    assert_int_equal(r->kv_heads, 2);
    assert_int_equal(pe_attention_head_dim(att), 16);
    assert_false(pe_attention_has_memory(att));
    pe_attention_free(att);

    c = make("alibi", (const char *[]){"heads", "4", NULL});
    att = init_ok(&c, 36); /* D = 9 */
    assert_near(pe_attention_config(att)->scale, 1.0 / 3.0);
    pe_attention_free(att);

    c = make("none", (const char *[]){"heads", "2", "scale", "0.125", NULL});
    att = init_ok(&c, 32);
    assert_near(pe_attention_config(att)->scale, 0.125);
    pe_attention_free(att);

    /* init copies the config: the caller's stays as it was */
    pe_config u = make("none", (const char *[]){"heads", "2", NULL}), u0;
    memcpy(&u0, &u, sizeof u);
    att = init_ok(&u, 32);
    assert_memory_equal(&u, &u0, sizeof u);
    pe_attention_free(att);
}

static void test_t5_defaults(void **state) {
    (void)state;
    pe_config c = make("t5", (const char *[]){"heads", "2", NULL});
    pe_attention *att = init_ok(&c, 8);
    const pe_config *r = pe_attention_config(att);
    assert_near(r->scale, 1.0);
    assert_int_equal(r->bidirectional, 1); /* not causal */
    assert_int_equal(r->num_buckets, 32);
    assert_int_equal(r->max_distance, 128);
    pe_param_spec s[PE_MAX_PARAMS];
    assert_int_equal(pe_attention_params(att, s), 1);
    assert_string_equal(s[0].name, "rel_bias");
    assert_int_equal(s[0].shape[0], 32);
    assert_int_equal(s[0].shape[1], 2);
    pe_attention_free(att);

    c = make("t5", (const char *[]){"heads", "2", "causal", "true", NULL});
    att = init_ok(&c, 8);
    assert_int_equal(pe_attention_config(att)->bidirectional, 0);
    assert_near(pe_attention_config(att)->scale, 1.0);
    pe_attention_free(att);

    /* given keys win over the defaults */
    c = make("t5", (const char *[]){"heads", "2", "causal", "true", "bidirectional", "true", "scale", "0.5", NULL});
    att = init_ok(&c, 8);
    assert_int_equal(pe_attention_config(att)->bidirectional, 1);
    assert_near(pe_attention_config(att)->scale, 0.5);
    pe_attention_free(att);

    c = make("t5", (const char *[]){"heads", "2", "bidirectional", "false", NULL});
    att = init_ok(&c, 8);
    assert_int_equal(pe_attention_config(att)->bidirectional, 0);
    pe_attention_free(att);
}

static void test_rope_defaults(void **state) {
    (void)state;
    pe_config c = make("rope", (const char *[]){"heads", "2", NULL});
    pe_attention *att = init_ok(&c, 24); /* D = 12 */
    const pe_config *r = pe_attention_config(att);
    assert_int_equal(r->rotary_dim, 12);
    assert_near(r->scale, 1.0 / sqrt(12.0));
    assert_near(r->rope_base, 10000);
    assert_int_equal(r->rope_layout, PE_ROPE_HALF);
    pe_param_spec s[PE_MAX_PARAMS];
    assert_int_equal(pe_attention_params(att, s), 0);
    pe_attention_free(att);

    c = make("rope", (const char *[]){"heads", "4", "kv_heads", "2", "rotary_dim", "4", NULL});
    att = init_ok(&c, 32);
    assert_int_equal(pe_attention_config(att)->rotary_dim, 4);
    assert_int_equal(pe_attention_config(att)->kv_heads, 2);
    pe_attention_free(att);
}

static void test_shaw_defaults(void **state) {
    (void)state;
    pe_config c = make("shaw", (const char *[]){"heads", "2", NULL});
    pe_attention *att = init_ok(&c, 8); /* D = 4 */
    assert_int_equal(pe_attention_config(att)->max_rel, 16);
    assert_near(pe_attention_config(att)->scale, 0.5);
    pe_param_spec s[PE_MAX_PARAMS];
    assert_int_equal(pe_attention_params(att, s), 2);
    assert_string_equal(s[0].name, "rel_k");
    assert_string_equal(s[1].name, "rel_v");
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s[i].ndim, 2);
        assert_int_equal(s[i].shape[0], 33);
        assert_int_equal(s[i].shape[1], 4);
    }
    pe_attention_free(att);

    c = make("shaw", (const char *[]){"heads", "2", "max_rel", "3", NULL});
    att = init_ok(&c, 8);
    assert_int_equal(pe_attention_params(att, s), 2);
    assert_int_equal(s[0].shape[0], 7);
    pe_attention_free(att);

    c = make("shaw", (const char *[]){"heads", "2", "max_rel", "-1", NULL});
    init_bad(&c, 8, PE_EKEY, PE_EKEY, "'max_rel'", (char *)NULL);
}

/* pe_config_fit_length: the keys a method sizes by the training length, where not given; and
 * the conventions of the reference models beside it (pe_method_describe) */
static void test_fit_length(void **state) {
    (void)state;
    pe_err err;
    pe_config c;
    pe_config_init(&c);
    assert_int_equal(pe_config_fit_length(&c, 64, &err), PE_EKEY); /* no method */
    set_ok(&c, "method", "t5");
    assert_int_equal(pe_config_fit_length(&c, 64, &err), PE_OK);
    assert_int_equal(c.max_distance, 32);
    assert_true(pe_config_has(&c, PE_K_max_distance));
    pe_config_init(&c);
    set_ok(&c, "method", "tupe");
    assert_int_equal(pe_config_fit_length(&c, 20, &err), PE_OK);
    assert_int_equal(c.max_distance, 17); /* above the 16 exact buckets of 32 */
    pe_config_init(&c);
    set_ok(&c, "method", "t5");
    set_ok(&c, "max_distance", "100");
    assert_int_equal(pe_config_fit_length(&c, 64, &err), PE_OK);
    assert_int_equal(c.max_distance, 100); /* given */
    pe_config_init(&c);
    set_ok(&c, "method", "cope");
    assert_int_equal(pe_config_fit_length(&c, 48, &err), PE_OK);
    assert_int_equal(c.npos_max, 49);
    assert_int_equal(pe_config_fit_length(&c, 0, &err), PE_EINVAL);
    pe_config_init(&c);
    set_ok(&c, "method", "rope");
    pe_config was = c;
    assert_int_equal(pe_config_fit_length(&c, 64, &err), PE_OK);
    assert_memory_equal(&was, &c, sizeof c); /* nothing it sizes */
    pe_method_info info;
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        assert_int_equal(pe_method_describe(m, &info, &err), PE_OK);
        assert_int_equal(info.scale_in_init, m == PE_METHOD_T5);
        assert_int_equal(info.axes_min, m == PE_METHOD_ROPE_MIXED ? 2 : 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_unset),
        cmocka_unit_test(test_key_names),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_reals),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_enums),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_fit_length),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_key_of_other_method),
        cmocka_unit_test(test_key_of_other_method_late),
        cmocka_unit_test(test_set_all_method_first),
        cmocka_unit_test(test_method_keys),
        cmocka_unit_test(test_method_descriptions),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_default_scale),
        cmocka_unit_test(test_t5_defaults),
        cmocka_unit_test(test_rope_defaults),
        cmocka_unit_test(test_shaw_defaults),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
