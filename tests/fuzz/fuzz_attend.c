/* libFuzzer: bytes as a safetensors case, through the strict reader and pe_attend (the layer and
 * the projected form: whatever names the case has). Cases whose sizes would make one call slow
 * (a dimension past 64, more than 2^14 elements in all) are read but not run. */
#include <stdint.h>
#include <stdlib.h>

#include "../../tools/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pe_st_file f;
    pe_err err;
    if (pe_st_parse(data, size, "fuzz", &f, &err)) return 0;
    int64_t total = 0, big = 0;
    for (int i = 0; i < f.n; i++) {
        int64_t n = 1;
        for (int d = 0; d < f.t[i].ndim; d++) n *= f.t[i].shape[d], big |= f.t[i].shape[d] > 64;
        total += n;
    }
    if (!big && total <= (1 << 14)) {
        pe_tensor *outs = NULL;
        int n_outs = 0;
        if (!pe_attend(f.n_meta, (const char *const *)f.meta_keys, (const char *const *)f.meta_values, f.n, f.t, &outs,
                       &n_outs, &err))
            pe_tensors_free(outs, n_outs);
    }
    pe_st_free(&f);
    return 0;
}
