/* What the harnesses share: their "key=value" lines, and the file of the readers that take a
 * path (hf_config's config.json and GGUF). */
#ifndef PE_FUZZ_SETTINGS_H
#define PE_FUZZ_SETTINGS_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The input as a file in /dev/shm named for the process (ext: its suffix) into path; 0 if not */
static inline int fuzz_file(char *path, size_t cap, const char *ext, const unsigned char *data, size_t size) {
    snprintf(path, cap, "/dev/shm/posenc-fuzz-%ld.%s", (long)getpid(), ext);
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    fwrite(data, 1, size, fp);
    fclose(fp);
    return 1;
}

/* The harnesses' "key=value" lines: text (modified in place) split into keys and values after
 * the n already in keys, vals (at most 64 in all); lines without '=' are skipped. */
enum { FUZZ_MAX_SETTINGS = 64 };

static inline int fuzz_settings(char *text, const char **keys, const char **vals, int n) {
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
