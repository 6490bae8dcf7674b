/* Multi-axis positions of a vision-language sequence (pe_mrope_positions): text runs and image
 * or video grids laid out on (time, row, column) as Qwen2-VL's get_rope_index does, with
 * Qwen2.5-VL's time in seconds as an option. */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

#define PE_MAX_SPAN_TOKENS ((int64_t)1 << 40) /* far past any context; keeps sums exact */

pe_status pe_mrope_positions(const pe_span *spans, int n_spans, int64_t merge, double tokens_per_second, int64_t *pos,
                             int64_t *n, int64_t *next, pe_err *err) {
    if (!spans || n_spans < 1 || !n)
        return pe_error(err, PE_EINVAL, "mrope_positions: need at least one span and n");
    if (merge < 1) return pe_error(err, PE_EINVAL, "mrope_positions: spatial merge %lld, expected >= 1", (long long)merge);
    if (!(tokens_per_second >= 0) || !isfinite(tokens_per_second))
        return pe_error(err, PE_EINVAL, "mrope_positions: tokens_per_second must be >= 0");
    int64_t N = 0, top = -1; /* tokens so far; the largest position so far */
    for (int s = 0; s < n_spans; s++) {
        const pe_span *sp = &spans[s];
        if (sp->text) {
            if (sp->text < 0 || sp->text > PE_MAX_SPAN_TOKENS)
                return pe_error(err, PE_EINVAL, "span %d: %lld text tokens", s, (long long)sp->text);
            for (int64_t i = 0; pos && i < sp->text; i++)
                for (int a = 0; a < 3; a++) pos[(N + i) * 3 + a] = top + 1 + i;
            N += sp->text, top += sp->text;
            continue;
        }
        if (sp->t < 1 || sp->h < 1 || sp->w < 1 || sp->t > PE_MAX_SPAN_TOKENS || sp->h > PE_MAX_SPAN_TOKENS ||
            sp->w > PE_MAX_SPAN_TOKENS)
            return pe_error(err, PE_EINVAL, "span %d: a grid of %lld x %lld x %lld patches, expected each >= 1", s,
                            (long long)sp->t, (long long)sp->h, (long long)sp->w);
        if (sp->h % merge || sp->w % merge)
            return pe_error(err, PE_EINVAL, "span %d: %lld x %lld patches do not divide by the spatial merge %lld", s,
                            (long long)sp->h, (long long)sp->w, (long long)merge);
        if (!(sp->seconds >= 0) || !isfinite(sp->seconds))
            return pe_error(err, PE_EINVAL, "span %d: seconds per temporal patch must be >= 0", s);
        const int64_t gh = sp->h / merge, gw = sp->w / merge;
        if ((double)sp->t * gh * gw > (double)PE_MAX_SPAN_TOKENS)
            return pe_error(err, PE_EINVAL, "span %d: %lld x %lld x %lld tokens is too many", s, (long long)sp->t,
                            (long long)gh, (long long)gw);
        const int64_t start = top + 1;
        /* the last frame's time position (a count alone walks no frames: 2^40 of them took minutes) */
        const double last = tokens_per_second > 0 ? floor((double)(sp->t - 1) * sp->seconds * tokens_per_second)
                                                  : (double)(sp->t - 1);
        if (last > (double)PE_MAX_SPAN_TOKENS)
            return pe_error(err, PE_EINVAL, "span %d: %lld temporal patches of %g s at %g tokens per second reach time "
                            "positions past 2^40", s, (long long)sp->t, sp->seconds, tokens_per_second);
        const int64_t last_t = (int64_t)last;
        for (int64_t i = 0; pos && i < sp->t; i++) {
            const int64_t ti = tokens_per_second > 0 ? (int64_t)floor((double)i * sp->seconds * tokens_per_second) : i;
            for (int64_t j = 0; j < gh; j++)
                for (int64_t k = 0; k < gw; k++) {
                    int64_t *p = pos + (N + (i * gh + j) * gw + k) * 3;
                    p[0] = start + ti, p[1] = start + j, p[2] = start + k;
                }
        }
        N += sp->t * gh * gw;
        const int64_t m = last_t > gh - 1 ? last_t : gh - 1;
        top = start + (m > gw - 1 ? m : gw - 1);
        if (N > PE_MAX_SPAN_TOKENS) return pe_error(err, PE_EINVAL, "mrope_positions: more than 2^40 tokens");
    }
    *n = N;
    if (next) *next = top + 1;
    return PE_OK;
}

/* "4x6" or "2x4x6" (an image's t = 1 when two numbers), then "@SECONDS" for a video; every
 * byte read or the grid refused */
static int parse_grid(const char *s, const char *end, int image, pe_span *sp) {
    long long v[3];
    int k = 0;
    const char *p = s;
    for (;;) {
        char *e;
        if (*p < '0' || *p > '9') return -1; /* strtoll would take signs and spaces */
        errno = 0;
        v[k++] = strtoll(p, &e, 10);
        if (errno) return -1;
        p = e;
        if (p < end && *p == 'x' && k < 3) { p++; continue; }
        break;
    }
    if (k == 2 && image) sp->t = 1, sp->h = v[0], sp->w = v[1];
    else if (k == 3) sp->t = v[0], sp->h = v[1], sp->w = v[2];
    else return -1;
    if (p < end && *p == '@' && !image) {
        char *e;
        if (p + 1 >= end || p[1] < '0' || p[1] > '9') return -1;
        sp->seconds = strtod(p + 1, &e);
        p = e;
    }
    return p == end ? 0 : -1;
}

pe_status pe_mrope_spans_parse(const char *text, pe_span *spans, int max_spans, int *n_spans, pe_err *err) {
    if (!text || !n_spans) return pe_error(err, PE_EINVAL, "mrope_spans_parse: need text and n_spans");
    int n = 0;
    for (const char *tok = text;; n++) {
        const char *end = strchr(tok, ',');
        if (!end) end = tok + strlen(tok);
        const char *colon = memchr(tok, ':', (size_t)(end - tok));
        pe_span sp = {0};
        int bad = !colon;
        if (!bad && colon - tok == 4 && !strncmp(tok, "text", 4)) {
            char *e;
            errno = 0;
            sp.text = colon[1] >= '0' && colon[1] <= '9' ? strtoll(colon + 1, &e, 10) : 0;
            bad = sp.text < 1 || errno || e != end;
        } else if (!bad && colon - tok == 5 && (!strncmp(tok, "image", 5) || !strncmp(tok, "video", 5))) {
            bad = parse_grid(colon + 1, end, tok[0] == 'i', &sp) != 0;
        } else {
            bad = 1;
        }
        if (bad)
            return pe_error(err, PE_EINVAL, "span %d ('%.*s') is not text:N, image:HxW, image:TxHxW or "
                            "video:TxHxW[@SECONDS]", n, (int)(end - tok > 40 ? 40 : end - tok), tok);
        if (n == INT32_MAX) return pe_error(err, PE_EINVAL, "mrope_spans_parse: too many spans");
        if (spans && n >= max_spans)
            return pe_error(err, PE_EINVAL, "mrope_spans_parse: more than %d spans", max_spans);
        if (spans) spans[n] = sp;
        if (!*end) break;
        tok = end + 1;
    }
    *n_spans = n + 1;
    return PE_OK;
}
