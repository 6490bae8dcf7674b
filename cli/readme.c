/* Replacing a generated block of a Markdown file (README tables of bench and compare). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/output.h"
#include "cli.h"

int cli_readme_block(const char *cmd, const char *path, const char *tag, const char *block) {
    char begin[64], end[64];
    snprintf(begin, sizeof begin, "<!-- %s:begin -->", tag);
    snprintf(end, sizeof end, "<!-- %s:end -->", tag);
    pe_err err;
    long long n = 0;
    FILE *f = pe_in_open(path, (long long)1 << 30, &n, &err);
    if (!f) return cli_fail("%s: --readme: %s", cmd, err.msg);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        const char *why = !text ? "out of memory" : ferror(f) ? strerror(errno) : "it changed while read";
        fclose(f), free(text);
        return cli_fail("%s: --readme: cannot read '%s': %s", cmd, path, why);
    }
    fclose(f);
    text[n] = 0;
    char *b = strstr(text, begin), *e = b ? strstr(b, end) : NULL;
    if (!b || !e) {
        free(text);
        return cli_fail("%s: --readme: '%s' has no %s ... %s block", cmd, path, begin, end);
    }
    /* the file is replaced whole or not at all (output.h) */
    pe_out o;
    if (pe_out_open(&o, path, &err)) {
        free(text);
        return cli_fail("%s: --readme: %s", cmd, err.msg);
    }
    if (!block) { /* only the check, before the work */
        pe_out_abort(&o);
        free(text);
        return 0;
    }
    fwrite(text, 1, (size_t)(b - text) + strlen(begin), o.fp);
    fprintf(o.fp, "\n%s", block);
    fputs(e, o.fp);
    free(text);
    if (pe_out_commit(&o, &err)) return cli_fail("%s: --readme: %s", cmd, err.msg);
    return 0;
}
