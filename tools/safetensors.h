/* safetensors files (https://github.com/huggingface/safetensors format), strictly validated.
 * Used by the CLI, the tests and the trainer; not part of libposenc. */
#ifndef PE_SAFETENSORS_H
#define PE_SAFETENSORS_H

#include "posenc.h"

typedef struct pe_st_file {
    pe_tensor *t; /* n tensors, each owning its data */
    int n;
    char **meta_keys, **meta_values; /* __metadata__, n_meta entries */
    int n_meta;
} pe_st_file;

/* Reads and validates a whole file; on failure *f is empty and err names the problem. */
pe_status pe_st_read(const char *path, pe_st_file *f, pe_err *err);
void pe_st_free(pe_st_file *f);
/* The same over bytes in memory (size of them; name for messages). */
pe_status pe_st_parse(const unsigned char *raw, size_t size, const char *name, pe_st_file *f, pe_err *err);

/* Writes tensors (F32/I32/I64...) and string metadata; the file appears whole or not at all. */
pe_status pe_st_write(const char *path, const pe_tensor *t, int n, int n_meta,
                      const char *const *meta_keys, const char *const *meta_values, pe_err *err);

#endif
