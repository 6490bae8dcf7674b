/* The method registry: names, families and hook tables, all expanded from
 * posenc_methods.def; status strings from PE_STATUS_MAP. */
#include "internal.h"

static const pe__method *const METHODS[] = {
#define X(id, name, family) &pe__method_##name,
#include "posenc_methods.def"
#undef X
};

static const char *const METHOD_NAMES[] = {
#define X(id, name, family) #name,
#include "posenc_methods.def"
#undef X
};

static const pe_family METHOD_FAMILIES[] = {
#define X(id, name, family) PE_FAMILY_##family,
#include "posenc_methods.def"
#undef X
};

const pe__method *pe__method_get(int m) {
    return m >= 0 && m < PE_METHOD_COUNT ? METHODS[m] : NULL;
}

const char *pe_method_name(pe_method m) {
    return (int)m >= 0 && m < PE_METHOD_COUNT ? METHOD_NAMES[m] : "?";
}

pe_family pe_method_family(pe_method m) {
    PE_ASSERT((int)m >= 0 && m < PE_METHOD_COUNT);
    return METHOD_FAMILIES[m];
}

int pe_method_from_name(const char *name) {
    for (int m = 0; m < PE_METHOD_COUNT; m++)
        if (strcmp(name, METHOD_NAMES[m]) == 0) return m;
    return -1;
}

const char *pe_family_name(pe_family f) {
    switch (f) {
    case PE_FAMILY_ABSOLUTE: return "absolute";
    case PE_FAMILY_ROTARY: return "rotary";
    case PE_FAMILY_BIAS: return "bias";
    case PE_FAMILY_RELATIVE: return "relative";
    }
    return "?";
}

const char *pe_status_str(pe_status s) {
    switch (s) {
#define XX(name, code, text) \
    case PE_##name: return text;
        PE_STATUS_MAP(XX)
#undef XX
    }
    return "unknown status";
}

void pe_one_line(char *dst, size_t n, const char *src) {
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)src; *c && o + 5 < n; c++) {
        if (*c >= 0x20 && *c != 0x7f) dst[o++] = (char)*c;
        else if (*c == '\n') dst[o++] = '\\', dst[o++] = 'n';
        else if (*c == '\t') dst[o++] = '\\', dst[o++] = 't';
        else o += (size_t)snprintf(dst + o, 5, "\\x%02x", *c);
    }
    if (n) dst[o] = 0;
}

pe_status pe_error(pe_err *err, pe_status status, const char *fmt, ...) {
    if (err) {
        char raw[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        pe_one_line(err->msg, sizeof err->msg, raw);
    }
    return status;
}

const char *pe_dtype_name(pe_dtype t) {
    switch (t) {
#define XX(name, size) \
    case PE_##name: return #name;
        PE_DTYPE_MAP(XX)
#undef XX
    default: return "?";
    }
}

size_t pe_dtype_size(pe_dtype t) {
    switch (t) {
#define XX(name, size) \
    case PE_##name: return size;
        PE_DTYPE_MAP(XX)
#undef XX
    default: return 0;
    }
}
