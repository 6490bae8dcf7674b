/* Shared helpers of the C tests (cmocka). */
#ifndef PE_TEST_HARNESS_H
#define PE_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include "../../tools/layer.h"
#include "../../tools/safetensors.h"
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

/* The settings of key=value words ("method=t5 heads=2") into cfg (initialised here). */
pe_status pe_test_config(const char *settings, pe_config *cfg, pe_err *err);

/* One element of a finite-difference check: d loss / d *x by 4-point central differences of
 * step h (*x restored), against the backward's ana. Returns |num - ana| / (2e-3 + 1e-2 |ana|),
 * which passes at <= 1; prints the element while worst (the tensor's so far) still passes. */
double pe_test_fd_element(float *x, double ana, float h, double (*loss)(void *), void *ctx,
                          double worst, const char *label, const char *name, int64_t e);

/* n floats uniform in [-1, 1) from rng (caller frees), and the largest finite |a[i]|. */
float *pe_test_uniform(int64_t n, pe_rng *rng);
double pe_test_maxabs(const float *a, int64_t n);

/* A layer from key=value words ("method=t5 heads=2 num_buckets=8"); fails the test on error. */
pe_attention *pe_test_layer(const char *settings, int64_t C);

#endif
