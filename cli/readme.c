/* Replacing a generated block of a Markdown file (README tables of bench and compare). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_readme_block(const char *cmd, const char *path, const char *tag, const char *block) {
    char begin[64], end[64];
    snprintf(begin, sizeof begin, "<!-- %s:begin -->", tag);
    snprintf(end, sizeof end, "<!-- %s:end -->", tag);
    FILE *f = fopen(path, "rb");
    if (!f) return cli_fail("%s: --readme: cannot open '%s'", cmd, path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        fclose(f), free(text);
        return cli_fail("%s: --readme: cannot read '%s'", cmd, path);
    }
    fclose(f);
    text[n] = 0;
    char *b = strstr(text, begin), *e = b ? strstr(b, end) : NULL;
    if (!b || !e) {
        free(text);
        return cli_fail("%s: --readme: '%s' has no %s ... %s block", cmd, path, begin, end);
    }
    /* written beside the file and renamed: the file is replaced whole or not at all */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *o = fopen(tmp, "wb");
    if (!o) {
        free(text);
        return cli_fail("%s: --readme: cannot write '%s'", cmd, tmp);
    }
    fwrite(text, 1, (size_t)(b - text) + strlen(begin), o);
    fprintf(o, "\n%s", block);
    fputs(e, o);
    int bad = fclose(o) != 0;
    free(text);
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return cli_fail("%s: --readme: cannot write '%s'", cmd, path);
    }
    return 0;
}
