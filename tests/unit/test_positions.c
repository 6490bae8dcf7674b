/* pe_mrope_positions against hand-checked layouts of Qwen2-VL's get_rope_index: text runs,
 * an image after text and text after it, two images in a row, a video with Qwen2.5-VL's time in
 * seconds, a single grid; and the inputs it refuses. */
#include <string.h>

#include "harness.h"

static void expect_positions(const pe_span *sp, int n, int64_t merge, double tps, const int64_t (*want)[3], int64_t N,
                             int64_t next) {
    pe_err err;
    int64_t got_n, got_next, pos[64 * 3];
    if (pe_mrope_positions(sp, n, merge, tps, NULL, &got_n, NULL, &err)) fail_msg("%s", err.msg); /* count only */
    assert_int_equal(got_n, N);
    if (pe_mrope_positions(sp, n, merge, tps, pos, &got_n, &got_next, &err)) fail_msg("%s", err.msg);
    assert_int_equal(got_next, next);
    for (int64_t i = 0; i < N; i++)
        for (int a = 0; a < 3; a++)
            if (pos[i * 3 + a] != want[i][a])
                fail_msg("token %lld axis %d: %lld, expected %lld", (long long)i, a, (long long)pos[i * 3 + a],
                         (long long)want[i][a]);
}

static void layouts(void **state) {
    (void)state;
    /* text 2, a 4x4 image (2x2 after the merge), text 3: the image starts after the text, text
     * resumes after the image's largest position */
    const pe_span a[] = {{.text = 2}, {.t = 1, .h = 4, .w = 4}, {.text = 3}};
    const int64_t wa[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {2, 2, 3}, {2, 3, 2}, {2, 3, 3}, {4, 4, 4}, {5, 5, 5}, {6, 6, 6}};
    expect_positions(a, 3, 2, 0, wa, 9, 7);
    /* two images in a row: the second starts after the first's largest position (a 2x6 grid: 1x3) */
    const pe_span b[] = {{.t = 1, .h = 2, .w = 6}, {.t = 1, .h = 2, .w = 2}};
    const int64_t wb[][3] = {{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {3, 3, 3}};
    expect_positions(b, 2, 2, 0, wb, 4, 4);
    /* a video of 3 temporal patches (merge 1, 1x2): frame index as time (Qwen2-VL) ... */
    const pe_span c[] = {{.text = 1}, {.t = 3, .h = 1, .w = 2, .seconds = 1.0}};
    const int64_t wc[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 1, 2}, {2, 1, 1}, {2, 1, 2}, {3, 1, 1}, {3, 1, 2}};
    expect_positions(c, 2, 1, 0, wc, 7, 4);
    /* ... and Qwen2.5-VL's floor(i seconds tokens_per_second): 0, 1.5 -> 1, 3 */
    const pe_span d[] = {{.text = 1}, {.t = 3, .h = 1, .w = 2, .seconds = 0.75}};
    const int64_t wd[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 1, 2}, {2, 1, 1}, {2, 1, 2}, {4, 1, 1}, {4, 1, 2}};
    expect_positions(d, 2, 1, 2.0, wd, 7, 5);
    /* text alone is 1-D RoPE on every axis */
    const pe_span e[] = {{.text = 3}};
    const int64_t we[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}};
    expect_positions(e, 1, 2, 0, we, 3, 3);
}

static void refusals(void **state) {
    (void)state;
    pe_err err;
    int64_t n;
    const pe_span odd[] = {{.t = 1, .h = 3, .w = 4}};
    assert_int_equal(pe_mrope_positions(odd, 1, 2, 0, NULL, &n, NULL, &err), PE_EINVAL);
    assert_non_null(strstr(err.msg, "do not divide by the spatial merge 2"));
    const pe_span empty[] = {{.t = 0, .h = 2, .w = 2}};
    assert_int_equal(pe_mrope_positions(empty, 1, 2, 0, NULL, &n, NULL, &err), PE_EINVAL);
    const pe_span neg[] = {{.text = -1}};
    assert_int_equal(pe_mrope_positions(neg, 1, 2, 0, NULL, &n, NULL, &err), PE_EINVAL);
    const pe_span huge[] = {{.t = (int64_t)1 << 30, .h = (int64_t)1 << 30, .w = 2}};
    assert_int_equal(pe_mrope_positions(huge, 1, 1, 0, NULL, &n, NULL, &err), PE_EINVAL);
    assert_int_equal(pe_mrope_positions(odd, 1, 0, 0, NULL, &n, NULL, &err), PE_EINVAL);
    assert_int_equal(pe_mrope_positions(odd, 0, 1, 0, NULL, &n, NULL, &err), PE_EINVAL);
}

/* SPANS text: every byte read or the span named (pe_mrope_spans_parse) */
static void spans_text(void **state) {
    (void)state;
    pe_err err;
    pe_span sp[4];
    int n = 0;
    assert_int_equal(pe_mrope_spans_parse("text:5,image:4x6,video:2x4x4@0.5,image:3x2x2", NULL, 0, &n, &err), PE_OK);
    assert_int_equal(n, 4);
    assert_int_equal(pe_mrope_spans_parse("text:5,image:4x6,video:2x4x4@0.5,image:3x2x2", sp, 4, &n, &err), PE_OK);
    assert_int_equal(sp[0].text, 5);
    assert_true(sp[1].t == 1 && sp[1].h == 4 && sp[1].w == 6);
    assert_true(sp[2].t == 2 && sp[2].h == 4 && sp[2].w == 4 && sp[2].seconds == 0.5);
    assert_true(sp[3].t == 3 && sp[3].h == 2 && sp[3].w == 2 && sp[3].seconds == 0);
    assert_int_equal(pe_mrope_spans_parse("text:1,text:2", sp, 1, &n, &err), PE_EINVAL); /* one slot */
    static const char *const bad[] = {"", "text:", "text:0", "text:+3", "text: 3", "text:3,", ",text:3", "image:4",
                                      "image:4x6x8x10", "image:1x4x6xjunk", "image:4x6@1", "video:4x6", "video:2x4x4@",
                                      "video:2x4x4@x", "picture:4x4", "text:99999999999999999999", "texts:3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (pe_mrope_spans_parse(bad[i], NULL, 0, &n, &err) == PE_OK) fail_msg("'%s' was read", bad[i]);
        assert_non_null(strstr(err.msg, "is not text:N"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(layouts), cmocka_unit_test(refusals), cmocka_unit_test(spans_text)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
