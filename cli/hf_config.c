/* posenc hf-config CONFIG.json|MODEL.gguf [--layer N] [--group] [--assume FAMILY] | --families
 * What posenc would run for every layer of a HuggingFace model: each layer's settings come
 * from pe_config_from_hf and are resolved by the library itself (pe_attention_init), so the
 * table shows the values a layer uses, not a second reading of the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "posenc.h"

typedef struct row {
    char text[512];  /* the columns from type to scale */
    char notes[320]; /* what the caller applies around the layer */
} row;

/* The text form of key `name` of c (an enum's word, a list) */
static void key_text(const pe_config *c, const char *name, char *buf, size_t len) {
    for (int k = 0; pe_config_key_name(k); k++)
        if (!strcmp(pe_config_key_name(k), name)) pe_config_key_value(c, k, buf, len);
}

/* One layer's columns, from its resolved settings; heads[2] gets heads and kv_heads. */
static int describe(const char *path, const char *assume, int64_t layer, pe_hf_layer_info *info, row *r, int64_t heads[2]) {
    pe_config cfg;
    pe_config_init(&cfg);
    pe_err err;
    if (assume && pe_config_set(&cfg, "hf_assume", assume, &err)) return cli_fail("hf-config: %s", err.msg);
    if (pe_config_from_hf(&cfg, path, layer, info, &err)) return cli_fail("hf-config: %s", err.msg);
    pe_attention *att;
    if (pe_attention_init(&att, &cfg, cfg.heads * info->head_dim, &err))
        return cli_fail("hf-config: layer %lld: %s", (long long)layer, err.msg);
    const pe_config *c = pe_attention_config(att);
    char base[32] = "-", scaling[64] = "-", factor[32] = "-", slice[48] = "-", layout[32] = "-", *notes = r->notes;
    const size_t nn = sizeof r->notes;
    notes[0] = 0;
    if (c->method == PE_METHOD_ROPE) {
        snprintf(base, sizeof base, "%.10g", c->rope_base);
        char kind[32];
        key_text(c, "rope_scaling", kind, sizeof kind);
        if (c->rope_scaling == PE_ROPE_PROPORTIONAL)
            snprintf(scaling, sizeof scaling, c->rope_factor != 1 ? "p-RoPE %g x%g" : "p-RoPE %g", c->rope_proportion, c->rope_factor);
        else if (c->rope_scaling) snprintf(scaling, sizeof scaling, "%s x%g", kind, c->rope_factor);
        else snprintf(scaling, sizeof scaling, "none");
        /* the attention factor on cos and sin, as the layer derives it (LongRoPE: its short table) */
        double *inv = malloc(sizeof(double) * (size_t)c->rotary_dim);
        if (!inv) {
            pe_attention_free(att);
            return cli_fail("out of memory");
        }
        double attn = 0;
        if (pe_rope_frequencies(c, 1, NULL, inv, &attn, &err)) {
            free(inv);
            pe_attention_free(att);
            return cli_fail("hf-config: layer %lld: %s", (long long)layer, err.msg);
        }
        snprintf(factor, sizeof factor, "%.6g", attn);
        int64_t still = 0; /* pairs of frequency 0 (p-RoPE's): they pass through */
        while (still < c->rotary_dim / 2 && inv[c->rotary_dim / 2 - 1 - still] == 0) still++;
        if (still)
            snprintf(notes, nn, "pairs %lld..%lld of %lld rotate; ", (long long)0,
                     (long long)(c->rotary_dim / 2 - still - 1), (long long)(c->rotary_dim / 2));
        free(inv);
        snprintf(slice, sizeof slice, "%lld..%lld of %lld", (long long)c->rotary_offset,
                 (long long)(c->rotary_offset + c->rotary_dim - 1), (long long)info->head_dim);
        snprintf(layout, sizeof layout, "%s", c->rope_layout == PE_ROPE_HALF ? "half" : "interleaved");
        if (c->rope_sections.n) {
            char sec[64], lay[32];
            key_text(c, "rope_sections", sec, sizeof sec);
            key_text(c, "rope_section_layout", lay, sizeof lay);
            snprintf(notes + strlen(notes), nn - strlen(notes), "sections %s %s; ", sec, lay);
        }
        if (c->llama_4_scaling_beta > 0)
            snprintf(notes + strlen(notes), nn - strlen(notes), "q x 1 + %g ln(1 + floor(p / %lld)); ",
                     c->llama_4_scaling_beta, (long long)c->original_max_position_embeddings);
    } else if (c->attn_temperature_tuning) {
        snprintf(notes, nn, "q x 1 + %g ln(1 + floor((p + 1) / %g)); ", c->attn_scale, c->floor_scale);
    }
    size_t o = strlen(notes);
    if (info->window) o += (size_t)snprintf(notes + o, nn - o, "%s %lld%s (attn_mask); ", info->chunked ? "chunks of" : "window",
                                            (long long)info->window, info->compress_rate ? " over its own keys" : "");
    if (info->qk_norm) o += (size_t)snprintf(notes + o, nn - o, "qk L2-norm after rotation; ");
    if (info->mla) o += (size_t)snprintf(notes + o, nn - o, "MLA: one rotated key head; ");
    if (c->attention_sinks) o += (size_t)snprintf(notes + o, nn - o, "learned sinks (tensor sinks [%lld]); ", (long long)c->heads);
    if (c->rope_values) o += (size_t)snprintf(notes + o, nn - o, "v rotated as k, o rotated back (rope_values); ");
    if (info->compress_rate)
        o += (size_t)snprintf(notes + o, nn - o, "compressed entries of %lld tokens as keys at their blocks' first positions, "
                              "each visible once its block is past (key_positions, attn_mask); ", (long long)info->compress_rate);
    if (o >= 2) notes[o - 2] = 0;
    char shape[48];
    snprintf(shape, sizeof shape, "%lld/%lldx%lld", (long long)c->heads, (long long)c->kv_heads, (long long)info->head_dim);
    snprintf(r->text, sizeof r->text, "%-18s %-6s %-9s %-14s %-9s %-16s %-12s %-10.6g %-12s", info->layer_type,
             pe_method_name(c->method), base, scaling, factor, slice, layout, c->scale, shape);
    heads[0] = c->heads, heads[1] = c->kv_heads;
    pe_attention_free(att);
    return 0;
}

/* "0-2,4-6,8" */
static void ranges(const int64_t *l, int n, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < len; i++) {
        int j = i;
        while (j + 1 < n && l[j + 1] == l[j] + 1) j++;
        o += (size_t)snprintf(buf + o, len - o, j > i ? "%s%lld-%lld" : "%s%lld", i ? "," : "", (long long)l[i],
                              (long long)l[j]);
        i = j;
    }
}

int cli_hf_config(int argc, char **argv) {
    hf_config_args a;
    int rc;
    if (arg_start(&ARGS_HF_CONFIG, argc, argv, &a, &rc)) return rc;
    const char *path = a.config;
    const long long only = a.layer;
    const int group = a.group;
    if (a.families) { /* the table itself */
        const char *name, *src, *refused, *when;
        printf("%-16s %-7s %s\n", "model_type", "read",
               "from (HF transformers, src/transformers/models/, unless a repository is named; [commit])");
        for (int i = 0; (name = pe_hf_family_name(i, &src, &refused, &when)); i++) {
            printf("%-16s %-7s %s\n", name, !refused ? "yes" : when ? "mostly" : "refused", src);
            if (!refused) continue;
            printf("%-24s refused", "");
            for (const char *t = when, *sep = " where "; t && *t; sep = " or ") { /* "a|b!=1": a is set or b != 1 */
                const char *bar = strchr(t, '|'), *ne = strstr(t, "!=");
                const int len = bar ? (int)(bar - t) : (int)strlen(t), key = ne && ne < t + len ? (int)(ne - t) : len;
                printf("%s%.*s%s%.*s", sep, key, t, key < len ? " != " : " is set", key < len ? len - key - 2 : 0,
                       key < len ? t + key + 2 : "");
                t = bar ? bar + 1 : NULL;
            }
            printf(": %s\n", refused);
        }
        return 0;
    }
    if (!path) return cli_fail("hf-config: CONFIG.json or MODEL.gguf is required (or --families)");

    pe_hf_layer_info info, info0;
    row first;
    int64_t heads[2], heads0[2];
    if (describe(path, a.assume, only >= 0 ? only : 0, &info, &first, heads)) return 2;
    info0 = info, heads0[0] = heads[0], heads0[1] = heads[1];
    int same = 1; /* every layer of one shape (Gemma 4's global layers have their own) */
    const int64_t n = info.n_layers, lo = only >= 0 ? only : 0, hi = only >= 0 ? only + 1 : n;
    row *rows = malloc(sizeof(row) * (size_t)(hi - lo));
    int64_t *of = malloc(sizeof(int64_t) * (size_t)(hi - lo)); /* the distinct row of each layer */
    if (!rows || !of) return free(rows), free(of), cli_fail("out of memory");
    rows[0] = first;
    for (int64_t l = lo + 1; l < hi; l++) {
        if (describe(path, a.assume, l, &info, &rows[l - lo], heads)) return free(rows), free(of), 2;
        same &= heads[0] == heads0[0] && heads[1] == heads0[1] && info.head_dim == info0.head_dim;
    }
    char from[64] = ""; /* a GGUF file: llama.cpp's architecture */
    if (*info0.gguf_arch) snprintf(from, sizeof from, " (GGUF architecture %s)", info0.gguf_arch);
    if (same)
        printf("%s: %lld layers, %lld heads (%lld kv), head_dim %lld; read as family %s%s\n", path, (long long)n,
               (long long)heads0[0], (long long)heads0[1], (long long)info0.head_dim, info0.family, from);
    else
        printf("%s: %lld layers, heads (kv) and head_dim per layer (column heads); read as family %s%s\n", path,
               (long long)n, info0.family, from);
    printf("%-6s %-18s %-6s %-9s %-14s %-9s %-16s %-12s %-10s %-12s %s\n", group ? "count" : "layer", "type", "method",
           "base", "scaling", "attn", "rotated dims", "pairs", "scale", "heads", group ? "notes; layers" : "notes");
    if (!group) {
        for (int64_t l = lo; l < hi; l++) printf("%-6lld %s %s\n", (long long)l, rows[l - lo].text, rows[l - lo].notes);
    } else {
        int64_t *members = malloc(sizeof(int64_t) * (size_t)(hi - lo));
        if (!members) return free(rows), free(of), cli_fail("out of memory");
        for (int64_t l = lo; l < hi; l++) of[l - lo] = -1;
        for (int64_t l = lo; l < hi; l++) {
            if (of[l - lo] >= 0) continue;
            int m = 0;
            for (int64_t u = l; u < hi; u++)
                if (of[u - lo] < 0 && !strcmp(rows[u - lo].text, rows[l - lo].text) &&
                    !strcmp(rows[u - lo].notes, rows[l - lo].notes))
                    of[u - lo] = l, members[m++] = u;
            char list[512];
            ranges(members, m, list, sizeof list);
            const char *notes = rows[l - lo].notes;
            printf("%-6d %s %s%slayers %s\n", m, rows[l - lo].text, notes, *notes ? "; " : "", list);
        }
        free(members);
    }
    free(rows), free(of);
    return 0;
}
