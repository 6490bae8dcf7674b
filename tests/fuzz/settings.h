/* The harnesses' "key=value" lines: text (modified in place) split into keys and values after
 * the n already in keys, vals (at most 64 in all); lines without '=' are skipped. */
#ifndef PE_FUZZ_SETTINGS_H
#define PE_FUZZ_SETTINGS_H

#include <string.h>

enum { FUZZ_MAX_SETTINGS = 64 };

static int fuzz_settings(char *text, const char **keys, const char **vals, int n) {
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && n < FUZZ_MAX_SETTINGS;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        keys[n] = line, vals[n++] = eq + 1;
    }
    return n;
}

#endif
