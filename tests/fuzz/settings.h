/* What the harnesses share: their "key=value" lines, and the file of the readers that take a
 * path (hf_config's config.json and GGUF). */
#ifndef PE_FUZZ_SETTINGS_H
#define PE_FUZZ_SETTINGS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "posenc.h"

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

/* A layer of "key=value ..." settings with H heads of D, kv kv-heads and causal, or NULL where
 * the library refuses it (the KV cache and paged-keys harnesses) */
static inline pe_attention *fuzz_layer(const char *settings, int64_t H, int64_t kv, int causal, int64_t D) {
    char text[400];
    snprintf(text, sizeof text, "%s heads=%lld kv_heads=%lld causal=%s", settings, (long long)H, (long long)kv,
             causal ? "true" : "false");
    const char *keys[16], *vals[16];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(text, " ", &save); w && n < 16; w = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(w, '=');
        *eq = 0, keys[n] = w, vals[n++] = eq + 1;
    }
    pe_config cfg;
    pe_err err;
    pe_attention *att = NULL;
    pe_config_init(&cfg);
    if (pe_config_set_all(&cfg, n, keys, vals, &err) || pe_attention_init(&att, &cfg, H * D, &err)) return NULL;
    return att;
}

#endif
