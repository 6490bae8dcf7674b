/* libFuzzer: bytes as lines "key=value" through pe_config_set (method first, as pe_attend does),
 * then pe_attention_init at a width from the first byte; every rejection must be a status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    const char *keys[FUZZ_MAX_SETTINGS], *vals[FUZZ_MAX_SETTINGS];
    const int n = fuzz_settings(text, keys, vals, 0);
    pe_config cfg;
    pe_err err;
    pe_config_init(&cfg);
    pe_attention *att = NULL;
    if (!pe_config_set_all(&cfg, n, keys, vals, &err) && !pe_attention_init(&att, &cfg, 1 + data[0] % 64, &err))
        pe_attention_free(att);
    free(text);
    return 0;
}
