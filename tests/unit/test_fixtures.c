/* Every fixture of tests/fixtures (written by tests/ref/make_fixtures.py from the float64
 * PyTorch reference) through pe_attend, compared with the contract's tolerance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void run_case(void **state) {
    const char *name = *state;
    char path[1024], exp_path[1024];
    snprintf(path, sizeof path, "%s/%s.safetensors", pe_test_fixture_dir(), name);
    snprintf(exp_path, sizeof exp_path, "%s/%s.expected.safetensors", pe_test_fixture_dir(), name);
    pe_st_file in, exp;
    pe_err err = {{0}};
    if (pe_st_read(path, &in, &err) || pe_st_read(exp_path, &exp, &err)) fail_msg("%s", err.msg);
    pe_tensor *outs = NULL;
    int n_outs = 0;
    pe_status st = pe_attend(in.n_meta, (const char *const *)in.meta_keys, (const char *const *)in.meta_values,
                             in.n, in.t, &outs, &n_outs, &err);
    if (st) fail_msg("%s: %s", name, err.msg);
    int64_t bad = 0;
    for (int i = 0; i < exp.n; i++) {
        const pe_tensor *want = &exp.t[i], *got = NULL;
        for (int j = 0; j < n_outs; j++)
            if (!strcmp(outs[j].name, want->name)) got = &outs[j];
        if (!got) {
            fprintf(stderr, "  %s: output '%s' missing\n", name, want->name);
            bad++;
            continue;
        }
        int64_t n = 1;
        for (int d = 0; d < want->ndim; d++) n *= want->shape[d];
        assert_int_equal(got->ndim, want->ndim);
        assert_memory_equal(got->shape, want->shape, sizeof(int64_t) * want->ndim);
        bad += pe_test_compare(want->name, got->data, want->data, n, 1e-4, 1e-4);
    }
    pe_tensors_free(outs, n_outs);
    pe_st_free(&in);
    pe_st_free(&exp);
    assert_int_equal(bad, 0);
}

int main(void) {
    char **files;
    int n = pe_test_list(pe_test_fixture_dir(), ".expected.safetensors", &files);
    if (n == 0) {
        fprintf(stderr, "no fixtures in %s (set POSENC_FIXTURES)\n", pe_test_fixture_dir());
        return 1;
    }
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    for (int i = 0; i < n; i++) {
        files[i][strlen(files[i]) - strlen(".expected.safetensors")] = 0;
        tests[i] = (struct CMUnitTest){files[i], run_case, NULL, NULL, files[i]};
    }
    int rc = _cmocka_run_group_tests("fixtures", tests, n, NULL, NULL);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files), free(tests);
    return rc;
}
