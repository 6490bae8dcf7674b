/* safetensors reader and writer (tools/safetensors.c): a round trip of every kind of tensor
 * posenc writes, and one test per rule of the format, each on a file written byte by byte so
 * the test controls exactly what the reader sees. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/safetensors.h"

/* ---- helpers ------------------------------------------------------------------------- */

/* Fails the test, showing the message, unless msg contains sub. */
#define assert_msg_has(msg, sub)                                                   \
    do {                                                                           \
        if (!strstr((msg), (sub))) fail_msg("message \"%s\" lacks \"%s\"", (msg), (sub)); \
    } while (0)

/* A fresh temporary file name (the file exists, empty, until the test rewrites it). */
static void tmp_path(char *buf, size_t len) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, len, "%s/pe_st_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(buf);
    assert_true(fd >= 0);
    close(fd);
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(bytes, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* A file of: 8-byte little-endian hlen, the header text, then data. hlen is the header's
 * length unless hlen_override >= 0. */
static void write_st(const char *path, long long hlen_override, const char *header,
                     const void *data, size_t dlen) {
    size_t hl = strlen(header), n = 8 + hl + dlen;
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    uint64_t h = hlen_override >= 0 ? (uint64_t)hlen_override : (uint64_t)hl;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(h >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (dlen) memcpy(buf + 8 + hl, data, dlen);
    write_bytes(path, buf, n);
    free(buf);
}

static const unsigned char ZEROS[64];

/* Reads a file that must be rejected with `want`, its message naming each of subs
 * (NULL-terminated); checks the result is left empty. */
static void expect_reject_file(const char *path, int want, ...) {
    pe_st_file f;
    pe_err err = {{0}};
    memset(&f, 0x5a, sizeof f); /* the reader must clear it */
    pe_status st = pe_st_read(path, &f, &err);
    if (st != want)
        fail_msg("status %d (%s), expected %d; message \"%s\"", st, pe_status_str(st), want, err.msg);
    assert_true(err.msg[0] != '\0');
    assert_null(strchr(err.msg, '\n'));
    va_list ap;
    va_start(ap, want);
    for (const char *s; (s = va_arg(ap, const char *));) assert_msg_has(err.msg, s);
    va_end(ap);
    assert_int_equal(f.n, 0);
    assert_null(f.t);
    assert_int_equal(f.n_meta, 0);
    assert_null(f.meta_keys);
    assert_null(f.meta_values);
    pe_st_free(&f);
}

/* write_st then expect_reject_file with PE_EFORMAT; the message must also name the file. */
#define REJECT(hlen, header, data, dlen, ...)                                  \
    do {                                                                      \
        char path_[512];                                                      \
        tmp_path(path_, sizeof path_);                                        \
        write_st(path_, (hlen), (header), (data), (dlen));                    \
        expect_reject_file(path_, PE_EFORMAT, path_, __VA_ARGS__, (char *)NULL); \
        unlink(path_);                                                        \
    } while (0)

/* Reads a file that must be accepted. */
static void read_ok(const char *path, pe_st_file *f) {
    pe_err err = {{0}};
    pe_status st = pe_st_read(path, f, &err);
    if (st) fail_msg("pe_st_read: %s (%s)", err.msg, pe_status_str(st));
}

static const pe_tensor *find(const pe_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

static const char *meta(const pe_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

static void check_tensor(const pe_st_file *f, const pe_tensor *want) {
    const pe_tensor *t = find(f, want->name);
    if (!t) fail_msg("tensor '%s' not read back", want->name);
    assert_int_equal(t->dtype, want->dtype);
    assert_int_equal(t->ndim, want->ndim);
    size_t n = 1;
    for (int d = 0; d < want->ndim; d++) {
        assert_int_equal(t->shape[d], want->shape[d]);
        n *= (size_t)want->shape[d];
    }
    assert_non_null(t->data); /* even when empty: the reader owns a buffer */
    if (n) assert_memory_equal(t->data, want->data, n * pe_dtype_size(want->dtype));
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void make_tmp_dir(char *buf, size_t len) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, len, "%s/pe_st_dir_XXXXXX", dir && *dir ? dir : "/tmp");
    assert_non_null(mkdtemp(buf));
}

/* ---- round trip ---------------------------------------------------------------------- */

static void test_round_trip(void **state) {
    (void)state;
    float a[6] = {0.0f, -1.5f, 2.25f, 3.0e-8f, -4.0e7f, 5.0f};
    int32_t idx[4] = {-1, 0, 7, INT32_MAX};
    int64_t big[2] = {-((int64_t)1 << 40), INT64_MAX};
    float scalar = 3.5f;
    float quad[4] = {1, 2, 3, 4};
    pe_tensor t[] = {
        {"a", PE_F32, 2, {2, 3}, a},
        {"idx", PE_I32, 1, {4}, idx},
        {"big", PE_I64, 2, {2, 1}, big},
        {"s", PE_F32, 0, {0}, &scalar},  /* 0-d scalar: one element */
        {"empty", PE_F32, 2, {0, 3}, NULL}, /* no elements, no data */
        {"quad", PE_F32, 4, {1, 2, 1, 2}, quad},
        {"e64", PE_I64, 1, {0}, NULL},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    const char *mk[] = {"method", "heads", "blank", "text"};
    const char *mv[] = {"rope", "2", "", "a \"quoted\" value\\with\ttabs"};

    char path[512];
    tmp_path(path, sizeof path);
    pe_err err = {{0}};
    pe_status st = pe_st_write(path, t, n, 4, mk, mv, &err);
    if (st) fail_msg("pe_st_write: %s", err.msg);

    /* the header length is a multiple of 8 and the file is exactly header + data */
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, fp), 8);
    fclose(fp);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    assert_int_equal(hlen % 8, 0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((uint64_t)sb.st_size, 8 + hlen + sizeof a + sizeof idx + sizeof big + sizeof scalar + sizeof quad);

    pe_st_file f;
    read_ok(path, &f);
    assert_int_equal(f.n, n);
    for (int i = 0; i < n; i++) check_tensor(&f, &t[i]);
    assert_int_equal(f.n_meta, 4);
    for (int i = 0; i < 4; i++) {
        const char *v = meta(&f, mk[i]);
        if (!v) fail_msg("metadata '%s' not read back", mk[i]);
        assert_string_equal(v, mv[i]);
    }
    pe_st_free(&f);
    assert_int_equal(f.n, 0);
    assert_null(f.t);
    pe_st_free(&f); /* twice is harmless */
    unlink(path);
}

/* No tensors, no metadata: the smallest file the writer makes, and it reads back empty. */
static void test_round_trip_empty(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path);
    pe_err err = {{0}};
    assert_int_equal(pe_st_write(path, NULL, 0, 0, NULL, NULL, &err), PE_OK);
    pe_st_file f;
    read_ok(path, &f);
    assert_int_equal(f.n, 0);
    assert_int_equal(f.n_meta, 0);
    pe_st_free(&f);
    unlink(path);
}

/* Overwriting an existing file replaces it whole and leaves no temporary beside it. */
static void test_write_replaces(void **state) {
    (void)state;
    char dir[512], path[600];
    make_tmp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    write_bytes(path, "garbage that is not a safetensors file", 38);
    float v[3] = {1, 2, 3};
    pe_tensor t = {"v", PE_F32, 1, {3}, v};
    pe_err err = {{0}};
    assert_int_equal(pe_st_write(path, &t, 1, 0, NULL, NULL, &err), PE_OK);
    assert_int_equal(count_entries(dir), 1);
    pe_st_file f;
    read_ok(path, &f);
    assert_int_equal(f.n, 1);
    check_tensor(&f, &t);
    pe_st_free(&f);
    unlink(path);
    rmdir(dir);
}

/* A target in a directory that does not exist: PE_EIO, and nothing is created anywhere. */
static void test_write_missing_dir(void **state) {
    (void)state;
    char dir[512], path[700];
    make_tmp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/no/such/dir/out.safetensors", dir);
    float v[2] = {1, 2};
    pe_tensor t = {"v", PE_F32, 1, {2}, v};
    const char *mk[] = {"method"}, *mv[] = {"none"};
    pe_err err = {{0}};
    pe_status st = pe_st_write(path, &t, 1, 1, mk, mv, &err);
    assert_int_equal(st, PE_EIO);
    assert_msg_has(err.msg, path);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(count_entries(dir), 0); /* no partial or temporary file either */
    rmdir(dir);
}

/* A hand-written file the rules allow: whitespace padding after the JSON, tensors listed out
 * of offset order, an empty tensor between two others, a null __metadata__. Guards the
 * byte-level helpers of the rejection tests below as much as the reader. */
static void test_handmade_valid(void **state) {
    (void)state;
    unsigned char data[12];
    for (int i = 0; i < 12; i++) data[i] = (unsigned char)i;
    char path[512];
    tmp_path(path, sizeof path);
    write_st(path, -1,
             "{\"__metadata__\":null,"
             "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]},"
             "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
             "\"a\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}      ",
             data, sizeof data);
    pe_st_file f;
    read_ok(path, &f);
    assert_int_equal(f.n, 3);
    assert_int_equal(f.n_meta, 0);
    const pe_tensor *a = find(&f, "a"), *b = find(&f, "b"), *z = find(&f, "z");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(z);
    assert_int_equal(a->ndim, 0);
    assert_memory_equal(a->data, data, 4);
    assert_memory_equal(b->data, data + 4, 8);
    assert_int_equal(z->ndim, 1);
    assert_int_equal(z->shape[0], 0);
    pe_st_free(&f);
    unlink(path);
}

/* ---- every malformed-file rule ------------------------------------------------------- */

static void test_missing_file(void **state) {
    (void)state;
    char dir[512], path[600];
    make_tmp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/absent.safetensors", dir);
    expect_reject_file(path, PE_EIO, path, (char *)NULL);
    rmdir(dir);
}

static void test_shorter_than_8(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path);
    write_bytes(path, "\x02\x00\x00\x00\x00", 5);
    expect_reject_file(path, PE_EFORMAT, path, "5 bytes", "8-byte", (char *)NULL);
    write_bytes(path, "", 0);
    expect_reject_file(path, PE_EFORMAT, path, "0 bytes", (char *)NULL);
    unlink(path);
}

static void test_header_past_end(void **state) {
    (void)state;
    /* claims 64 header bytes, has 2 */
    REJECT(64, "{}", NULL, 0, "header length 64", "past the end");
    /* a length whose top bit is set must not wrap around */
    REJECT((long long)0x7fffffffffffffffLL, "{}", NULL, 0, "past the end");
    /* one byte too many */
    REJECT(3, "{}", NULL, 0, "past the end");
}

static void test_header_not_json(void **state) {
    (void)state;
    REJECT(-1, "{\"a\":", NULL, 0, "not valid JSON");
    REJECT(-1, "hello", NULL, 0, "not valid JSON");
    /* a header length that cuts the JSON short */
    REJECT(4, "{\"a\":{}}", NULL, 0, "not valid JSON");
}

static void test_header_not_object(void **state) {
    (void)state;
    REJECT(-1, "[]", NULL, 0, "not a JSON object");
    REJECT(-1, "[{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}]", ZEROS, 4, "not a JSON object");
    /* jansson refuses a bare string before the object check: either message will do */
    REJECT(-1, "\"text\"", NULL, 0, "JSON");
}

static void test_duplicate_keys(void **state) {
    (void)state;
    REJECT(-1,
           "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           ZEROS, 8, "duplicate", "\"w\"");
    REJECT(-1, "{\"__metadata__\":{\"heads\":\"2\",\"heads\":\"4\"}}", NULL, 0, "duplicate", "\"heads\"");
}

static void test_metadata_not_string(void **state) {
    (void)state;
    REJECT(-1, "{\"__metadata__\":{\"method\":\"none\",\"heads\":2}}", NULL, 0, "__metadata__", "'heads'",
           "not a string");
    REJECT(-1, "{\"__metadata__\":{\"causal\":true}}", NULL, 0, "__metadata__", "'causal'", "not a string");
    REJECT(-1, "{\"__metadata__\":{\"x\":null}}", NULL, 0, "__metadata__", "'x'");
    REJECT(-1, "{\"__metadata__\":[\"a\",\"b\"]}", NULL, 0, "__metadata__", "not an object");
    REJECT(-1, "{\"__metadata__\":\"heads=2\"}", NULL, 0, "__metadata__", "not an object");
}

static void test_unknown_dtype(void **state) {
    (void)state;
    REJECT(-1, "{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'",
           "unknown dtype 'F33'");
    REJECT(-1, "{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'",
           "unknown dtype 'f32'");
    /* a dtype that is not a string */
    REJECT(-1, "{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "dtype");
}

static void test_bad_shape(void **state) {
    (void)state;
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", ZEROS, 16, "'w'", "shape");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    /* shape not an array */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    /* more dimensions than posenc reads */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'",
           "dimensions");
}

static void test_span_not_shape_size(void **state) {
    (void)state;
    /* [2] F32 is 8 bytes, the offsets give 4 */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'",
           "data_offsets [0, 4]", "8 bytes");
    /* [1] I64 is 8 bytes, the offsets give 4 (sizes follow the dtype) */
    REJECT(-1, "{\"w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'",
           "data_offsets");
    /* an empty tensor given bytes */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'",
           "data_offsets");
    /* end before begin */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", ZEROS, 4, "'w'",
           "data_offsets");
    /* negative begin */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", ZEROS, 4, "'w'",
           "data_offsets");
}

static void test_offsets_past_buffer(void **state) {
    (void)state;
    /* right span, past the 4-byte buffer */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", ZEROS, 4, "'w'",
           "data_offsets [0, 8]", "4-byte buffer");
    REJECT(-1,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           ZEROS, 6, "'w'", "data_offsets [4, 8]");
    /* no buffer at all */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", NULL, 0, "'w'",
           "0-byte buffer");
}

static void test_gap(void **state) {
    (void)state;
    REJECT(-1,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           ZEROS, 12, "'b'", "gap");
    /* a gap before the first tensor */
    REJECT(-1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", ZEROS, 8, "'a'", "gap");
}

static void test_overlap(void **state) {
    (void)state;
    REJECT(-1,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           ZEROS, 12, "'b'", "overlap");
    /* two tensors on the same bytes */
    REJECT(-1,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           ZEROS, 4, "overlap");
}

static void test_trailing_bytes(void **state) {
    (void)state;
    REJECT(-1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 8,
           "4 bytes after the last tensor");
    /* no tensors, yet a buffer */
    REJECT(-1, "{}", ZEROS, 1, "1 bytes after the last tensor");
    REJECT(-1, "{\"__metadata__\":{\"method\":\"none\"}}", ZEROS, 8, "after the last tensor");
}

static void test_entry_fields(void **state) {
    (void)state;
    /* no data_offsets */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", ZEROS, 4, "'w'", "data_offsets");
    /* data_offsets with one entry, or not integers */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", ZEROS, 4, "'w'",
           "data_offsets");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", ZEROS, 4, "'w'",
           "data_offsets");
    /* no dtype, no shape */
    REJECT(-1, "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "dtype");
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", ZEROS, 4, "'w'", "shape");
    /* an extra field */
    REJECT(-1, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", ZEROS, 4, "'w'",
           "exactly");
    /* an entry that is not an object */
    REJECT(-1, "{\"w\":[0,4]}", ZEROS, 4, "'w'");
    REJECT(-1, "{\"w\":null}", NULL, 0, "'w'");
}

/* The first tensors are read (and their data allocated) before a later one fails; the
 * failure must release them (ASan checks) and leave the result empty (expect_reject_file). */
static void test_fail_after_reading(void **state) {
    (void)state;
    REJECT(-1,
           "{\"__metadata__\":{\"method\":\"none\"},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
           "\"c\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           ZEROS, 12, "'c'", "F99");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_empty),
        cmocka_unit_test(test_write_replaces),
        cmocka_unit_test(test_write_missing_dir),
        cmocka_unit_test(test_handmade_valid),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_shorter_than_8),
        cmocka_unit_test(test_header_past_end),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_header_not_object),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_metadata_not_string),
        cmocka_unit_test(test_unknown_dtype),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_span_not_shape_size),
        cmocka_unit_test(test_offsets_past_buffer),
        cmocka_unit_test(test_gap),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_entry_fields),
        cmocka_unit_test(test_fail_after_reading),
    };
    return cmocka_run_group_tests_name("safetensors", tests, NULL, NULL);
}
