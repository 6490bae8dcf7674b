/* The trainer's per-method choices: where a method sits in the model (model.h: tr_placement, from
 * the method's description), the two methods it treats otherwise (t5's scale, rope_mixed), and
 * which layer keys a method of a schedule takes. How a reference model holds a method's tensors
 * (shared across layers, LayerNorm'ed, rows per token, clamps) is the method's word
 * (pe_param_spec). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "posenc.h"
#include "model_impl.h"

/* ---- per-method conventions ---------------------------------------------------------------
 * The family decides the default (absolute: once at the input; the rest: in every layer);
 * this table names the exceptions and the tensors that are one model tensor shared by all
 * layers, as the methods' reference models do. A method added to the library later needs a
 * row only when its reference shares tensors or places itself differently. */
static const tr_convention CONVENTIONS[] = {
    /* T5's scale 1 leans on its own initialisation and Adafactor; with this trainer's AdamW and
     * common initialisation it stalls at the bigram plateau for hundreds of steps, so the layers
     * use 1/sqrt(D) like the others and the comparison measures the bias. */
    {"t5", TR_PLACE_LAYER, NULL, 1},
    /* naver-ai/rope-vit: learned frequencies per axis of image patches (x, y); the trainer's
     * sequences have one axis, where it would be rope with learned frequencies */
    {"rope_mixed", TR_PLACE_NONE, "rope_mixed is for positions with several axes (image patches); the trainer's tasks have one", 0},
};

const tr_convention *tr_convention_of(const char *method) {
    for (size_t i = 0; i < sizeof CONVENTIONS / sizeof CONVENTIONS[0]; i++)
        if (!strcmp(CONVENTIONS[i].method, method)) return &CONVENTIONS[i];
    return NULL;
}

tr_placement tr_method_placement(const char *method, const char **why) {
    if (why) *why = NULL;
    const tr_convention *c = tr_convention_of(method);
    if (c) {
        if (why) *why = c->why;
        return c->place;
    }
    int m = pe_method_from_name(method);
    pe_method_info info;
    if (m < 0 || pe_method_describe(m, &info, NULL)) {
        if (why) *why = "not a method of this library";
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
