/* libFuzzer: bytes as a config.json read by hf_config (rope, 2 heads of head_dim 8), through a
 * file in /dev/shm; every rejection must be a status. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "posenc.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    if (!fuzz_file(path, sizeof path, "json", data, size)) return 0;
    pe_config cfg;
    pe_err err;
    pe_config_init(&cfg);
    pe_attention *att = NULL;
    if (!pe_config_set(&cfg, "method", "rope", &err) && !pe_config_set(&cfg, "heads", "2", &err) &&
        !pe_config_set(&cfg, "hf_config", path, &err) && !pe_attention_init(&att, &cfg, 16, &err))
        pe_attention_free(att);
    return 0;
}
