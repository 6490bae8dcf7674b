/* libFuzzer: bytes as `posenc positions` SPANS through pe_mrope_spans_parse and
 * pe_mrope_positions (a merge and a tokens-per-second rate from the first two bytes). A parse
 * either fails with a status or reads every span; the count of the first call equals the spans
 * the second writes; the positions of a sequence of up to 2^16 tokens keep Qwen2-VL's promises:
 * text on one diagonal after everything before it, a grid's three axes from one start, and
 * `next` one past the largest position. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a broken promise: which one, then the crash libFuzzer keeps */
#define BROKEN() (fprintf(stderr, "%s:%d: a check failed\n", __FILE__, __LINE__), abort())

/* Walks the spans over pos: text one diagonal past the largest position so far, a grid's
 * tokens (t, h / merge, w / merge) of them with rows and columns from one start. */
static void check(const pe_span *sp, int ns, int64_t merge, const int64_t *pos, int64_t N, int64_t next) {
    int64_t at = 0, top = -1;
    for (int s = 0; s < ns; s++) {
        const int64_t start = top + 1, gh = sp[s].h / merge, gw = sp[s].w / merge;
        const int64_t n = sp[s].text ? sp[s].text : sp[s].t * gh * gw;
        if (at + n > N) BROKEN();
        for (int64_t i = 0; i < n; i++) {
            const int64_t *p = pos + 3 * (at + i);
            if (sp[s].text && (p[0] != start + i || p[1] != p[0] || p[2] != p[0])) BROKEN();
            if (!sp[s].text && (p[0] < start || p[1] != start + (i / gw) % gh || p[2] != start + i % gw)) BROKEN();
            for (int a = 0; a < 3; a++) top = p[a] > top ? p[a] : top;
        }
        at += n;
    }
    if (at != N || next != top + 1) BROKEN();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 512) return 0;
    char *text = malloc(size - 1);
    memcpy(text, data + 2, size - 2);
    text[size - 2] = 0;
    const int64_t merge = 1 + data[0] % 4;
    const double tps = data[1] < 128 ? 0 : (data[1] - 128) / 16.0;
    pe_err err;
    int ns = 0, again = 0;
    if (!pe_mrope_spans_parse(text, NULL, 0, &ns, &err)) {
        if (ns < 1) BROKEN();
        pe_span *sp = malloc(sizeof *sp * (size_t)ns);
        if (pe_mrope_spans_parse(text, sp, ns, &again, &err) || again != ns) BROKEN();
        if (ns > 1 && !pe_mrope_spans_parse(text, sp, ns - 1, &again, &err)) BROKEN(); /* too few slots */
        int64_t N = -1, next = -1, N2 = -1, next2 = -1;
        if (!pe_mrope_positions(sp, ns, merge, tps, NULL, &N, &next, &err) && N <= (1 << 16)) {
            int64_t *pos = malloc(sizeof(int64_t) * (size_t)(3 * N + 3));
            if (pe_mrope_positions(sp, ns, merge, tps, pos, &N2, &next2, &err) || N2 != N || next2 != next)
                BROKEN();
            check(sp, ns, merge, pos, N, next);
            free(pos);
        }
        free(sp);
    }
    free(text);
    return 0;
}
