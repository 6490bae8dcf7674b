/* safetensors read and write, with the format's rules enforced:
 *   8-byte little-endian header length N, N bytes of JSON object, then the data buffer;
 *   every entry but __metadata__ is {dtype, shape, data_offsets}; offsets are relative to the
 *   buffer, their span equals the shape's byte size, and the tensors tile the buffer with no
 *   gap or overlap; __metadata__ maps strings to strings.
 * JSON goes through jansson (duplicate keys rejected). Not part of libposenc: the CLI, the
 * tests and the trainer link it. */
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdarg.h>
#include <stdio.h>

#include "posenc.h"
#include "output.h"

static int dtype_from_name(const char *s) {
#define XX(name, size) \
    if (strcmp(s, #name) == 0) return PE_##name;
    PE_DTYPE_MAP(XX)
#undef XX
    return -1;
}

void pe_st_free(pe_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].data);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_keys[i]), free(f->meta_values[i]);
    free(f->t), free(f->meta_keys), free(f->meta_values);
    memset(f, 0, sizeof *f);
}

typedef struct {
    int64_t begin, end;
    int index;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static pe_status parse(const unsigned char *raw, size_t size, const char *path, pe_st_file *f,
                       pe_err *err) {
    if (size < 8) return pe_error(err, PE_EFORMAT, "%s: %zu bytes, shorter than the 8-byte header length", path, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | raw[i];
    if (n > size - 8) return pe_error(err, PE_EFORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)",
                                      path, (unsigned long long)n, size);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)raw + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return pe_error(err, PE_EFORMAT, "%s: header is not valid JSON: %s", path, jerr.text);
    pe_status st = PE_OK;
    span *spans = NULL;
    if (!json_is_object(root)) {
        st = pe_error(err, PE_EFORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    const unsigned char *data = raw + 8 + n;
    int64_t data_size = (int64_t)(size - 8 - n);
    size_t count = json_object_size(root);
    f->t = calloc(count ? count : 1, sizeof(pe_tensor));
    f->meta_keys = calloc(count ? count : 1, sizeof(char *));
    f->meta_values = calloc(count ? count : 1, sizeof(char *));
    spans = calloc(count ? count : 1, sizeof(span));
    if (!f->t || !f->meta_keys || !f->meta_values || !spans) {
        st = pe_error(err, PE_ENOMEM, "out of memory");
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (json_is_null(val)) continue;
            if (!json_is_object(val)) {
                st = pe_error(err, PE_EFORMAT, "%s: __metadata__ is not an object", path);
                goto done;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    st = pe_error(err, PE_EFORMAT, "%s: __metadata__ value of '%s' is not a string", path, mk);
                    goto done;
                }
                char **k2 = realloc(f->meta_keys, sizeof(char *) * (f->n_meta + 1));
                if (k2) f->meta_keys = k2;
                char **v2 = k2 ? realloc(f->meta_values, sizeof(char *) * (f->n_meta + 1)) : NULL;
                if (v2) f->meta_values = v2;
                char *kd = v2 ? strdup(mk) : NULL, *vd = kd ? strdup(json_string_value(mv)) : NULL;
                if (!vd) {
                    free(kd);
                    st = pe_error(err, PE_ENOMEM, "%s: out of memory for __metadata__", path);
                    goto done;
                }
                f->meta_keys[f->n_meta] = kd, f->meta_values[f->n_meta] = vd;
                f->n_meta++;
            }
            continue;
        }
        json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
               *jo = json_object_get(val, "data_offsets");
        if (!json_is_object(val) || !json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
            json_array_size(jo) != 2 || json_object_size(val) != 3) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': entry needs exactly dtype, shape and data_offsets", path, key);
            goto done;
        }
        int dt = dtype_from_name(json_string_value(jd));
        if (dt < 0) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': unknown dtype '%s'", path, key, json_string_value(jd));
            goto done;
        }
        if (strlen(key) >= sizeof f->t[0].name) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor name '%.40s...' is too long", path, key);
            goto done;
        }
        if (json_array_size(js) > PE_MAX_DIMS) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': %zu dimensions (posenc reads at most %d)", path, key,
                          json_array_size(js), PE_MAX_DIMS);
            goto done;
        }
        pe_tensor *t = &f->t[f->n];
        snprintf(t->name, sizeof t->name, "%s", key);
        t->dtype = (pe_dtype)dt;
        t->ndim = (int)json_array_size(js);
        int64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) {
            json_t *e = json_array_get(js, d);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > ((int64_t)1 << 40)) {
                st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': shape entries must be non-negative integers", path, key);
                goto done;
            }
            t->shape[d] = json_integer_value(e);
            if (t->shape[d] && elems > ((int64_t)1 << 40) / t->shape[d]) { /* before the product can overflow */
                st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': more than 2^40 elements", path, key);
                goto done;
            }
            elems *= t->shape[d];
        }
        json_t *jb = json_array_get(jo, 0), *je = json_array_get(jo, 1);
        if (!json_is_integer(jb) || !json_is_integer(je)) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': data_offsets must be integers", path, key);
            goto done;
        }
        int64_t b = json_integer_value(jb), e = json_integer_value(je);
        int64_t bytes = elems * (int64_t)pe_dtype_size(t->dtype);
        if (b < 0 || e < b || e > data_size || e - b != bytes) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] do not fit %s %lld bytes in a %lld-byte buffer",
                          path, key, (long long)b, (long long)e, pe_dtype_name(t->dtype), (long long)bytes,
                          (long long)data_size);
            goto done;
        }
        t->data = malloc(bytes ? (size_t)bytes : 1);
        if (!t->data) {
            st = pe_error(err, PE_ENOMEM, "out of memory for tensor '%s'", key);
            goto done;
        }
        memcpy(t->data, data + b, (size_t)bytes);
        spans[f->n] = (span){b, e, f->n};
        f->n++;
    }
    /* the tensors must tile the buffer exactly */
    qsort(spans, f->n, sizeof(span), span_cmp);
    int64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        if (spans[i].begin != at) {
            st = pe_error(err, PE_EFORMAT, "%s: tensor '%s': data starts at %lld, expected %lld (%s)", path,
                          f->t[spans[i].index].name, (long long)spans[i].begin, (long long)at,
                          spans[i].begin > at ? "a gap" : "an overlap");
            goto done;
        }
        at = spans[i].end;
    }
    if (at != data_size)
        st = pe_error(err, PE_EFORMAT, "%s: the data buffer has %lld bytes after the last tensor", path,
                      (long long)(data_size - at));
done:
    free(spans);
    json_decref(root);
    return st;
}

pe_status pe_st_read(const char *path, pe_st_file *f, pe_err *err) {
    memset(f, 0, sizeof *f);
    long long size = 0;
    FILE *fp = pe_in_open(path, (long long)1 << 40, &size, err);
    if (!fp) return PE_EIO;
    unsigned char *raw = malloc(size ? (size_t)size : 1);
    if (!raw) {
        fclose(fp);
        return pe_error(err, PE_ENOMEM, "%s: out of memory for %lld bytes", path, size);
    }
    size_t got = fread(raw, 1, (size_t)size, fp);
    int bad = ferror(fp) || got != (size_t)size;
    fclose(fp);
    pe_status st = bad ? pe_error(err, PE_EIO, "%s: read error", path) : parse(raw, (size_t)size, path, f, err);
    free(raw);
    if (st) pe_st_free(f);
    return st;
}

pe_status pe_st_parse(const unsigned char *raw, size_t size, const char *name, pe_st_file *f, pe_err *err) {
    memset(f, 0, sizeof *f);
    pe_status st = parse(raw, size, name, f, err);
    if (st) pe_st_free(f);
    return st;
}

static size_t numel(const pe_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

pe_status pe_st_write(const char *path, const pe_tensor *t, int n, int n_meta,
                      const char *const *meta_keys, const char *const *meta_values, pe_err *err) {
    json_t *root = json_object();
    if (n_meta) {
        json_t *meta = json_object();
        for (int i = 0; i < n_meta; i++) json_object_set_new(meta, meta_keys[i], json_string(meta_values[i]));
        json_object_set_new(root, "__metadata__", meta);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object(), *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        size_t bytes = numel(&t[i]) * pe_dtype_size(t[i].dtype);
        json_object_set_new(e, "dtype", json_string(pe_dtype_name(t[i].dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + bytes)));
        json_object_set_new(root, t[i].name, e);
        off += bytes;
    }
    char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!hdr) return pe_error(err, PE_ENOMEM, "out of memory");
    size_t hlen = strlen(hdr), padded = (hlen + 7) / 8 * 8;

    /* written whole or not at all (output.h) */
    pe_out o;
    pe_status st = pe_out_open(&o, path, err);
    if (st) {
        free(hdr);
        return st;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, o.fp) == 8 && fwrite(hdr, 1, hlen, o.fp) == hlen;
    for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', o.fp) != EOF;
    for (int i = 0; ok && i < n; i++) {
        size_t bytes = numel(&t[i]) * pe_dtype_size(t[i].dtype);
        ok = bytes == 0 || fwrite(t[i].data, 1, bytes, o.fp) == bytes;
    }
    free(hdr);
    if (!ok) {
        const int e = errno;
        pe_out_abort(&o);
        return pe_error(err, PE_EIO, "%s: cannot write: %s", path, strerror(e ? e : EIO));
    }
    return pe_out_commit(&o, err);
}
