/* Where a method sits in the model (model.h: tr_placement) and which layer keys a method of a
 * schedule takes, both from the method's description (pe_method_describe, pe_method_accepts):
 * how its reference model holds its tensors (pe_param_spec), scales its scores and sizes its
 * keys by the training length (pe_config_fit_length) is the method's word, not the trainer's;
 * and the attention of a layer made from them (tr_make_attention). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "model_impl.h"

tr_placement tr_method_placement(const char *method, const char **why) {
    if (why) *why = NULL;
    int m = pe_method_from_name(method);
    pe_method_info info;
    if (m < 0 || pe_method_describe(m, &info, NULL)) {
        if (why) *why = "not a method of this library";
        return TR_PLACE_NONE;
    }
    if (info.axes_min > 1) { /* on one axis it would be another method under its name */
        if (why) *why = "its reference's positions have several axes (image patches); the trainer's tasks have one";
        return TR_PLACE_NONE;
    }
    /* a method on token ids (complex-order's complex word embedding feeding a complex
     * Transformer) is block 0's attention; one on the input embedding sits once at the input
     * (FLOATER, absolute too, acts on q, k and v: in every layer, each its own initial value) */
    if (info.token_ids) return TR_PLACE_IDS;
    return info.embedding ? TR_PLACE_INPUT : TR_PLACE_LAYER;
}

int tr_schedule_method(const char *schedule, int64_t l, char *buf, size_t n) {
    int count = 0;
    const char *names[64];
    size_t lens[64];
    for (const char *p = schedule; p && *p && count < 64;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!len || len > 31) return 0;
        names[count] = p, lens[count++] = len;
        if (!e) break;
        p = e + 1;
        if (!*p) return 0; /* a trailing comma names an empty method */
    }
    if (count && buf && n) snprintf(buf, n, "%.*s", (int)lens[l % count], names[l % count]);
    return count;
}

int tr_key_applies(const char *method, const char *key) {
    int m = pe_method_from_name(method), k = 0;
    if (m < 0) return 0;
    while (pe_config_key_name(k) && strcmp(pe_config_key_name(k), key)) k++;
    if (!pe_config_key_name(k) || pe_method_accepts(m, k)) return 1; /* not a key: pe_config_set says so */
    for (int o = 0; o < PE_METHOD_COUNT; o++) /* a key that no method lists is common to all */
        if (pe_method_accepts(o, k)) return 0;
    return 1;
}

/* Without a schedule the keys go to every layer that runs the model's method (none of them to
 * the plain layers beside an absolute method's embedding); with one, each key to the layers
 * whose method takes it. */
pe_status tr_make_attention(pe_attention **att, const tr_model_config *c, const char *method, int64_t heads,
                            int causal, int64_t layer, pe_err *err) {
    /* layer's window of W tokens: the spec's `window` W - 1,0 (FlashAttention's window_size) */
    char ws[32], window[48] = "";
    if (layer >= 0 && tr_schedule_method(c->windows, layer, ws, sizeof ws) && strtoll(ws, NULL, 10) > 0)
        snprintf(window, sizeof window, "%lld,0", strtoll(ws, NULL, 10) - 1);
    pe_config cfg;
    pe_config_init(&cfg);
    char hs[32];
    snprintf(hs, sizeof hs, "%lld", (long long)heads);
    const char *keys[TR_MAX_KEYS + 4] = {"method", "heads", "causal", "window"};
    const char *vals[TR_MAX_KEYS + 4] = {method, hs, causal ? "true" : "false", window};
    int n = window[0] ? 4 : 3;
    for (int i = 0; i < c->n_keys; i++)
        if (c->schedule[0] ? tr_key_applies(method, c->key[i]) : strcmp(method, c->method) == 0)
            keys[n] = c->key[i], vals[n++] = c->val[i];
    pe_status st = pe_config_set_all(&cfg, n, keys, vals, err);
    if (!st && c->length > 0) st = pe_config_fit_length(&cfg, c->length, err);
    /* A reference that leaves its scores unscaled leans on its own initialisation of q (T5's,
     * with Adafactor); with this trainer's AdamW and common initialisation it stalls at the
     * bigram plateau for hundreds of steps, so such layers use 1/sqrt(D) like the others and
     * the comparison measures the encoding. */
    pe_method_info info;
    if (!st && !pe_method_describe(cfg.method, &info, NULL) && info.scale_in_init && !pe_config_has(&cfg, PE_K_scale)) {
        char sc[32];
        snprintf(sc, sizeof sc, "%.9g", 1.0 / sqrt((double)(c->C / heads)));
        st = pe_config_set(&cfg, "scale", sc, err);
    }
    if (!st) st = pe_attention_init(att, &cfg, c->C, err);
    return st;
}
