/* libFuzzer: bytes as a GGUF file (llama.cpp's) read by hf_config's GGUF reader (src/rotary/gguf.c)
 * through a file in /dev/shm: every length checked against the header, every rejection a status,
 * and a layer it reads makes a layer. Seeds: the files of tests/gguf's specs
 * (tests/fuzz/make_seeds.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "posenc.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    if (!fuzz_file(path, sizeof path, "gguf", data, size)) return 0;
    for (int64_t layer = 0; layer < 2; layer++) {
        pe_config cfg;
        pe_err err;
        pe_hf_layer_info info;
        pe_config_init(&cfg);
        if (pe_config_from_hf(&cfg, path, layer, &info, &err)) continue;
        if (info.head_dim < 1 || cfg.heads < 1 || cfg.heads > 4096 || info.head_dim > 4096) continue; /* too big to make */
        pe_attention *att = NULL;
        if (!pe_attention_init(&att, &cfg, cfg.heads * info.head_dim, &err)) pe_attention_free(att);
    }
    unlink(path);
    return 0;
}
