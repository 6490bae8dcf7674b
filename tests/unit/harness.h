/* Shared helpers of the C tests (cmocka). */
#ifndef PE_TEST_HARNESS_H
#define PE_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include "io/layer.h"
#include "io/safetensors.h"
#include "posenc.h"

/* The fixture folder: $POSENC_FIXTURES, else tests/fixtures. */
const char *pe_test_fixture_dir(void);

/* Compares got with want elementwise, |a - b| <= atol + rtol |b|, -inf only matching -inf.
 * Prints the tensor name, the worst element and the first mismatches; returns the number of
 * mismatching elements. */
int64_t pe_test_compare(const char *what, const float *got, const float *want, int64_t n,
                        double atol, double rtol);

/* Names of the files in dir ending in suffix (sorted; caller frees each and the array). */
int pe_test_list(const char *dir, const char *suffix, char ***names);

/* A layer from key=value words ("method=t5 heads=2 num_buckets=8"); fails the test on error. */
pe_attention *pe_test_layer(const char *settings, int64_t C);

#endif
