/* posenc positions SPANS [--merge M] [--tokens-per-second R] [-o OUT.safetensors]
 * The 3-axis (time, row, column) positions of a vision-language sequence, as Qwen2-VL's
 * get_rope_index lays them out (pe_mrope_positions): SPANS is a comma-separated list of
 * text:N, image:HxW (or TxHxW) and video:TxHxW[@SECONDS] in patches before the spatial merge.
 * Prints one line per token and the position text resumes at; -o writes `positions` [N, 3] I64
 * (a case's positions for rope with rope_sections). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/safetensors.h"
#include "cli.h"
#include "options.h"

#define POSITIONS_MAX_TOKENS ((int64_t)1 << 28)

int cli_positions(int argc, char **argv) {
    positions_args a;
    int rc;
    if (arg_start(&ARGS_POSITIONS, argc, argv, &a, &rc)) return rc;
    const char *spec = a.spans, *out = a.out;
    const long long merge = a.merge;
    const double tps = a.tokens_per_second;
    pe_err err;
    int ns;
    pe_span *spans = NULL;
    if (pe_mrope_spans_parse(spec, NULL, 0, &ns, &err)) return cli_fail("positions: %s", err.msg);
    if (!(spans = calloc((size_t)ns, sizeof *spans))) return cli_fail("positions: out of memory for %d spans", ns);
    if (pe_mrope_spans_parse(spec, spans, ns, &ns, &err)) {
        free(spans);
        return cli_fail("positions: %s", err.msg);
    }
    int64_t N, next, *pos = NULL;
    if (pe_mrope_positions(spans, ns, merge, tps, NULL, &N, &next, &err)) rc = cli_fail("positions: %s", err.msg);
    if (!rc && N > POSITIONS_MAX_TOKENS) /* 24 bytes a token, and a line each when printed */
        rc = cli_fail("positions: %lld tokens is past the limit of %lld (2^28) tokens", (long long)N,
                      (long long)POSITIONS_MAX_TOKENS);
    if (!rc && !(pos = malloc(sizeof(int64_t) * (size_t)(3 * N))))
        rc = cli_fail("positions: out of memory for %lld tokens", (long long)N);
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
