/* Where a method sits in the model (model.h: tr_placement) and which layer keys a method of a
 * schedule takes, both from the method's description (pe_method_describe, pe_method_accepts):
 * how its reference model holds its tensors (pe_param_spec), scales its scores and sizes its
 * keys by the training length (pe_config_fit_length) is the method's word, not the trainer's. */
#include <math.h>
#include <stdio.h>
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
