/* posenc positions SPANS [--merge M] [--tokens-per-second R] [-o OUT.safetensors]
 * The 3-axis (time, row, column) positions of a vision-language sequence, as Qwen2-VL's
 * get_rope_index lays them out (pe_mrope_positions): SPANS is a comma-separated list of
 * text:N, image:HxW (or TxHxW) and video:TxHxW[@SECONDS] in patches before the spatial merge.
 * Prints one line per token and the position text resumes at; -o writes `positions` [N, 3] I64
 * (a case's positions for rope with rope_sections). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/safetensors.h"
#include "cli.h"
#include "options.h"

/* "4x6" or "2x4x6" into t, h, w (image: t = 1 when two numbers) */
static int parse_grid(const char *s, int image, pe_span *sp) {
    long long v[3];
    int k = 0, done = 0;
    for (const char *p = s; k < 3 && !done;) {
        char *end;
        errno = 0;
        v[k++] = strtoll(p, &end, 10);
        if (end == p || errno) return -1;
        if (*end == 'x') { p = end + 1; continue; }
        if (*end == '@' || !*end) { s = end, done = 1; continue; }
        return -1;
    }
    if (!done) return -1; /* a fourth field, or junk after the third: nothing half read */
    if (k == 2 && image) sp->t = 1, sp->h = v[0], sp->w = v[1];
    else if (k == 3) sp->t = v[0], sp->h = v[1], sp->w = v[2];
    else return -1;
    if (*s == '@') {
        char *end;
        if (image) return -1;
        sp->seconds = strtod(s + 1, &end);
        if (end == s + 1 || *end) return -1;
    }
    return 0;
}

static int parse_spans(const char *text, pe_span **out) {
    int n = 1;
    for (const char *c = text; *c; c++) n += *c == ',';
    pe_span *sp = calloc((size_t)n, sizeof *sp);
    if (!sp) return -1;
    char *buf = strdup(text), *save = NULL;
    int k = 0, bad = !buf;
    for (char *tok = buf ? strtok_r(buf, ",", &save) : NULL; tok && !bad; tok = strtok_r(NULL, ",", &save), k++) {
        char *colon = strchr(tok, ':');
        if (!colon) { bad = 1; break; }
        *colon = 0;
        const char *v = colon + 1;
        if (!strcmp(tok, "text")) {
            char *end;
            errno = 0;
            sp[k].text = strtoll(v, &end, 10);
            bad = end == v || *end || errno || sp[k].text < 1;
        } else if (!strcmp(tok, "image") || !strcmp(tok, "video")) {
            bad = parse_grid(v, tok[0] == 'i', &sp[k]) != 0;
        } else {
            bad = 1;
        }
    }
    free(buf);
    if (bad || k != n) {
        free(sp);
        return -1;
    }
    *out = sp;
    return n;
}

int cli_positions(int argc, char **argv) {
    positions_args a;
    int rc;
    if (arg_start(&ARGS_POSITIONS, argc, argv, &a, &rc)) return rc;
    const char *spec = a.spans, *out = a.out;
    const long long merge = a.merge;
    const double tps = a.tokens_per_second;
    pe_span *spans;
    int ns = parse_spans(spec, &spans);
    if (ns < 0)
        return cli_fail("positions: '%s' is not a list of text:N, image:HxW, image:TxHxW or video:TxHxW[@SECONDS]", spec);
    pe_err err;
    int64_t N, next, *pos = NULL;
    if (pe_mrope_positions(spans, ns, merge, tps, NULL, &N, &next, &err)) rc = cli_fail("positions: %s", err.msg);
    if (!rc && !(pos = malloc(sizeof(int64_t) * (size_t)(3 * N)))) rc = cli_fail("out of memory");
    if (!rc && pe_mrope_positions(spans, ns, merge, tps, pos, &N, &next, &err)) rc = cli_fail("positions: %s", err.msg);
    if (!rc && out) {
        pe_tensor t = {.dtype = PE_I64, .ndim = 2, .shape = {N, 3}, .data = pos};
        snprintf(t.name, sizeof t.name, "positions");
        char nx[32], nt[32];
        snprintf(nx, sizeof nx, "%lld", (long long)next), snprintf(nt, sizeof nt, "%lld", (long long)N);
        const char *keys[] = {"spans", "next_position", "tokens"}, *vals[] = {spec, nx, nt};
        if (pe_st_write(out, &t, 1, 3, keys, vals, &err)) rc = cli_fail("%s", err.msg);
        else printf("wrote %s: positions [%lld, 3]; text resumes at %lld\n", out, (long long)N, (long long)next);
    } else if (!rc) {
        printf("# token  time  row  column\n");
        for (int64_t i = 0; i < N; i++)
            printf("%7lld %5lld %4lld %7lld\n", (long long)i, (long long)pos[3 * i], (long long)pos[3 * i + 1],
                   (long long)pos[3 * i + 2]);
        printf("# %lld tokens; text resumes at position %lld (rope_deltas %lld)\n", (long long)N, (long long)next,
               (long long)(next - N));
    }
    free(pos), free(spans);
    return rc;
}
