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

pe_status pe__fail(pe_err *err, pe_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
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
