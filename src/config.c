/* Settings: parsing keys from text, method defaults, validation of the common keys.
 * The key list is include/posenc_keys.def (its ids: pe_key); each method lists the keys it
 * accepts in its hook table. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <stddef.h>

#include "internal.h"

typedef enum { PE_KEY_METHOD, PE_KEY_INT, PE_KEY_REAL, PE_KEY_BOOL, PE_KEY_ENUM, PE_KEY_FLAGS,
               PE_KEY_PATH, PE_KEY_LIST } pe_key_type;

typedef struct {
    const char *name;
    pe_key_type type;
    const char *choices, *meaning;
    size_t offset, size;
} key_desc;

static const key_desc KEYS[] = {
#define K(name, type, choices, meaning) \
    {#name, type, choices, meaning, offsetof(pe_config, name), sizeof(((pe_config *)0)->name)},
#include "posenc_keys.def"
#undef K
};
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0], N_COMMON_KEYS = 6 };
_Static_assert((int)N_KEYS == (int)PE_K_COUNT && (int)N_KEYS <= 64 * (int)PE_KEY_WORDS, "pe_config.set has one bit per key");

static size_t type_size(pe_key_type t) {
    switch (t) {
    case PE_KEY_INT: return sizeof(int64_t);
    case PE_KEY_REAL: return sizeof(double);
    case PE_KEY_PATH: return sizeof(((pe_config *)0)->hf_config);
    case PE_KEY_LIST: return sizeof(pe_int_list);
    default: return sizeof(int);
    }
}

_Static_assert(sizeof(pe_config) == PE_CONFIG_BYTES, "pe_config's fields outgrew PE_CONFIG_BYTES");

size_t pe_config_size(void) { return sizeof(pe_config); }

void pe_config_init(pe_config *c) {
    memset(c, 0, sizeof *c);
    c->method = -1;
    c->scale = NAN; /* the method's own */
    c->sin_layout = PE_SIN_INTERLEAVED;
    c->sin_base = 10000;
    c->floater_dt = 0.01;
    c->floater_step = 0.002;
    c->max_rel = 16;
    c->num_buckets = 32;
    c->max_distance = 128;
    c->bidirectional = -1; /* not causal */
    c->tupe_cls = 1;
    c->mem_len = -1; /* M */
    c->position_buckets = 256;
    c->max_relative_positions = 512;
    c->pos_att = PE_POS_ATT_C2P | PE_POS_ATT_P2C;
    c->share_att_key = 1;
    c->kerple = PE_KERPLE_LOG;
    c->fire_init_L = 512;
    c->xpos_scale_base = 512;
    c->xpos_gamma = 0.4;
    c->npos_max = 65; /* CoPE: the reference's block_size + 1, for a block of 64 tokens */
    c->post_log_scale = 1; /* data_alibi: as x-transformers DataDependentAlibi */
    c->bias_init = 5;
    c->rope_layout = PE_ROPE_HALF;
    c->rope_base = 10000;
    c->rotary_dim = -1; /* D */
    c->rope_scaling = PE_ROPE_NONE;
    c->rope_factor = 1;
    c->original_max_position_embeddings = -1;
    c->max_position_embeddings = -1;
    c->beta_fast = 32;
    c->beta_slow = 1;
    c->mscale = NAN;
    c->mscale_all_dim = NAN;
    c->attention_factor = NAN;
    c->yarn_truncate = 1;
    c->low_freq_factor = 1;
    c->high_freq_factor = 4;
    c->fope_sep_head = 1;
    c->floor_scale = 8192; /* Llama 4 */
    c->attn_scale = 0.1;
    c->head_scale_init = 1; /* AntNLP/nope_head_scale args/model_args.py: softmax_scale = 1 */
    c->head_scale_min = NAN; /* no clamp: their scale_lb defaults to None */
    c->rope_proportion = 1;
}

const char *pe_config_key_name(int k) { return k >= 0 && k < N_KEYS ? KEYS[k].name : NULL; }
const char *pe_config_key_meaning(int k) { return k >= 0 && k < N_KEYS ? KEYS[k].meaning : NULL; }
const char *pe_config_key_type(int k) {
    static const char *const NAMES[] = {"method", "int", "real", "bool", "enum", "flags", "path", "list"};
    return k >= 0 && k < N_KEYS ? NAMES[KEYS[k].type] : NULL;
}

int pe_config_key_value(const pe_config *cfg, int k, char *buf, size_t len) {
    if (k < 0 || k >= N_KEYS) return -1;
    const key_desc *key = &KEYS[k];
    const void *f = (const char *)cfg + key->offset;
    switch (key->type) {
    case PE_KEY_METHOD: snprintf(buf, len, "%s", *(const int *)f >= 0 ? pe_method_name(*(const int *)f) : "-"); break;
    case PE_KEY_INT: {
        const int64_t v = *(const int64_t *)f;
        if (v == -1) snprintf(buf, len, "-");
        else snprintf(buf, len, "%lld", (long long)v);
        break;
    }
    case PE_KEY_REAL: {
        const double v = *(const double *)f;
        if (isnan(v)) snprintf(buf, len, "-");
        else snprintf(buf, len, "%.17g", v);
        break;
    }
    case PE_KEY_BOOL: {
        const int v = *(const int *)f;
        snprintf(buf, len, "%s", v < 0 ? "-" : v ? "true" : "false");
        break;
    }
    case PE_KEY_ENUM: case PE_KEY_FLAGS: {
        const int v = *(const int *)f;
        size_t o = 0;
        buf[0] = 0;
        int i = 0;
        for (const char *p = key->choices;; i++) {
            const char *e = strchr(p, '|');
            const size_t n = e ? (size_t)(e - p) : strlen(p);
            if (key->type == PE_KEY_ENUM ? i == v : (v >> i & 1))
                o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%.*s", o ? "|" : "", (int)n, p);
            if (!e) break;
            p = e + 1;
        }
        break;
    }
    case PE_KEY_PATH: snprintf(buf, len, "%s", *(const char *)f ? (const char *)f : "-"); break;
    case PE_KEY_LIST: {
        const pe_int_list *l = f;
        size_t o = 0;
        buf[0] = 0;
        for (int i = 0; i < l->n; i++) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%lld", i ? "," : "", (long long)l->v[i]);
        if (!l->n) snprintf(buf, len, "-");
        break;
    }
    }
    return 0;
}

int pe_edit_distance(const char *a, const char *b) {
    const int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int x = d[i - 1][j] + 1, y = d[i][j - 1] + 1, z = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            d[i][j] = x < y ? (x < z ? x : z) : (y < z ? y : z);
        }
    return d[la][lb];
}

/* ", did you mean NAME?" for the nearest of names (within 3 edits), or "" */
static void suggest(char *buf, size_t n, const char *word, const char *(*name)(int), int count) {
    int best = -1, bd = 4;
    for (int i = 0; i < count; i++) {
        const int dd = pe_edit_distance(word, name(i));
        if (dd < bd) bd = dd, best = i;
    }
    snprintf(buf, n, best >= 0 ? "; did you mean '%s'?" : "%s", best >= 0 ? name(best) : "");
}

static const char *method_name_of(int i) { return pe_method_name(i); }

static int find_key(const char *name) {
    for (int k = 0; k < N_KEYS; k++)
        if (strcmp(KEYS[k].name, name) == 0) return k;
    return -1;
}

int pe_config_has(const pe_config *cfg, pe_key k) {
    return k >= 0 && k < PE_K_COUNT && (cfg->set[k / 64] >> (k % 64) & 1);
}

int pe_config_is_set(const pe_config *cfg, const char *key) {
    int k = find_key(key);
    return k >= 0 && pe_config_has(cfg, (pe_key)k);
}

/* Whether `word` is one of the space-separated words of `list`. */
static int has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        if ((size_t)(e - p) == n && strncmp(p, word, n) == 0) return 1;
        p = e;
    }
    return 0;
}

/* the first keys, and the later ones every method takes (appended after the methods' own) */
static int is_common(int k) { return (k >= 0 && k < N_COMMON_KEYS) || k == PE_K_attention_sinks; }

static int method_accepts(int method, int k) {
    if (k < 0 || k >= N_KEYS) return 0;
    if (is_common(k)) return 1;
    const pe__method *m = pe__method_get(method);
    return m && has_word(m->keys, KEYS[k].name);
}

int pe_method_accepts(pe_method m, int k) { return m >= 0 && m < PE_METHOD_COUNT && method_accepts(m, k); }
int pe_config_key_common(int k) { return is_common(k); }

void pe_method_keys(pe_method m, char *buf, size_t len) {
    const pe__method *mt = pe__method_get(m);
    snprintf(buf, len, "%s", mt && mt->keys ? mt->keys : "");
}

/* Index of `word` among the '|'-separated choices, or -1. */
static int choice_index(const char *choices, const char *word, size_t n) {
    int i = 0;
    for (const char *p = choices;; i++) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return i;
        if (!e) return -1;
        p = e + 1;
    }
}

static pe_status bad_value(pe_err *err, const key_desc *key, const char *value, const char *want) {
    return pe_error(err, PE_EKEY, "key '%s': value '%s' is not %s", key->name, value, want);
}

static pe_status set_value(pe_config *cfg, int k, const char *value, pe_err *err);

pe_status pe_config_set(pe_config *cfg, const char *name, const char *value, pe_err *err) {
    int k = find_key(name);
    if (k < 0) {
        char hint[96];
        suggest(hint, sizeof hint, name, pe_config_key_name, N_KEYS);
        return pe_error(err, PE_EKEY, "unknown key '%s'%s", name, hint);
    }
    const key_desc *key = &KEYS[k];
    PE_ASSERT(key->size == type_size(key->type));
    if (cfg->method >= 0 && !method_accepts(cfg->method, k)) {
        char keys[512];
        pe_method_keys(cfg->method, keys, sizeof keys);
        return pe_error(err, PE_EKEY, "key '%s' does not apply to method %s (its keys: %s)", name,
                        pe_method_name(cfg->method), keys[0] ? keys : "none");
    }
    if (k == PE_K_hf_config || k == PE_K_hf_layer || k == PE_K_hf_assume) { /* reads a file: all or nothing */
        pe_config *before = malloc(sizeof *before);
        if (!before) return pe_error(err, PE_ENOMEM, "out of memory for key '%s'", name);
        *before = *cfg;
        pe_status st = set_value(cfg, k, value, err);
        if (!st && pe_config_has(cfg, PE_K_hf_config)) st = pe__hf_config_read(cfg, err);
        if (st) *cfg = *before;
        free(before);
        return st;
    }
    pe_status st = set_value(cfg, k, value, err);
    if (!st) cfg->hf_filled[k / 64] &= ~((uint64_t)1 << (k % 64)); /* given now: a new hf_layer keeps it */
    return st;
}

/* Parses value into key k's field and marks it given. */
static pe_status set_value(pe_config *cfg, int k, const char *value, pe_err *err) {
    const key_desc *key = &KEYS[k];
    void *field = (char *)cfg + key->offset;
    char *end;
    switch (key->type) {
    case PE_KEY_METHOD: {
        int m = pe_method_from_name(value);
        if (m < 0) {
            char list[512] = "";
            for (int i = 0; i < PE_METHOD_COUNT; i++) {
                strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
                strncat(list, pe_method_name(i), sizeof list - strlen(list) - 1);
            }
            char hint[96];
            suggest(hint, sizeof hint, value, method_name_of, PE_METHOD_COUNT);
            return pe_error(err, PE_EKEY, "key 'method': unknown method '%s'%s (known: %s)", value, hint, list);
        }
        *(int *)field = m;
        break;
    }
    case PE_KEY_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (!*value || *end || errno) return bad_value(err, key, value, "an integer");
        if (v > PE_MAX_KEY_INT || v < -PE_MAX_KEY_INT) /* sizes and offsets stay far from overflow */
            return pe_error(err, PE_EKEY, "key '%s': %lld is outside -2^31 .. 2^31", key->name, v);
        *(int64_t *)field = v;
        break;
    }
    case PE_KEY_REAL: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno == ERANGE && fabs(v) <= DBL_MIN) errno = 0; /* a subnormal (or one that rounds to 0) is a number */
        if (!*value || *end || errno || !isfinite(v)) return bad_value(err, key, value, "a number");
        *(double *)field = v;
        break;
    }
    case PE_KEY_BOOL:
        if (strcmp(value, "true") == 0) *(int *)field = 1;
        else if (strcmp(value, "false") == 0) *(int *)field = 0;
        else return bad_value(err, key, value, "true or false");
        break;
    case PE_KEY_ENUM: {
        int i = choice_index(key->choices, value, strlen(value));
        if (i < 0) {
            char want[256];
            snprintf(want, sizeof want, "one of %s", key->choices);
            return bad_value(err, key, value, want);
        }
        *(int *)field = i;
        break;
    }
    case PE_KEY_FLAGS: {
        int flags = 0;
        for (const char *p = value;;) {
            const char *e = strchr(p, '|');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            int i = choice_index(key->choices, p, n);
            if (i < 0) {
                char want[256];
                snprintf(want, sizeof want, "a '|'-separated subset of %s", key->choices);
                return bad_value(err, key, value, want);
            }
            flags |= 1 << i;
            if (!e) break;
            p = e + 1;
        }
        *(int *)field = flags;
        break;
    }
    case PE_KEY_LIST: { /* "16,24,24": 1 .. PE_MAX_AXES integers */
        pe_int_list l = {0};
        for (const char *p = value;;) {
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || errno || (*end && *end != ',') || l.n == PE_MAX_AXES || v > PE_MAX_KEY_INT || v < -PE_MAX_KEY_INT)
                return bad_value(err, key, value, "a comma-separated list of 1 to 8 integers within +-2^31");
            l.v[l.n++] = v;
            if (!*end) break;
            p = end + 1;
        }
        *(pe_int_list *)field = l;
        break;
    }
    case PE_KEY_PATH:
        if (!*value || strlen(value) >= key->size)
            return bad_value(err, key, value, "a path of 1 to 511 characters");
        snprintf((char *)field, key->size, "%s", value);
        break;
    }
    cfg->set[k / 64] |= (uint64_t)1 << (k % 64);
    return PE_OK;
}

pe_status pe_config_fit_length(pe_config *cfg, int64_t length, pe_err *err) {
    if (cfg->method < 0) return pe_error(err, PE_EKEY, "config_fit_length: key 'method' is required");
    if (length < 1 || length > PE_MAX_KEY_INT)
        return pe_error(err, PE_EINVAL, "config_fit_length: length %lld is not within 1 .. 2^31", (long long)length);
    const pe__method *m = pe__method_get(cfg->method);
    if (m->fit_length) m->fit_length(cfg, length);
    return PE_OK;
}

void pe__config_key_copy(pe_config *dst, const pe_config *src, int k) {
    if (k >= 0 && k < N_KEYS) memcpy((char *)dst + KEYS[k].offset, (const char *)src + KEYS[k].offset, KEYS[k].size);
}

/* method first, hf_assume, hf_layer and then hf_config last: the file is read once, around every
 * key given */
pe_status pe_config_set_all(pe_config *cfg, int n, const char *const *keys,
                            const char *const *values, pe_err *err) {
    static const char *const FIRST[] = {"method", NULL, "hf_assume", "hf_layer", "hf_config"};
    enum { NF = sizeof FIRST / sizeof FIRST[0] };
    for (int pass = 0; pass < NF; pass++)
        for (int i = 0; i < n; i++) {
            int rank = 1;
            for (int r = 0; r < NF; r++)
                if (FIRST[r] && !strcmp(keys[i], FIRST[r])) rank = r;
            if (rank != pass) continue;
            pe_status st = pe_config_set(cfg, keys[i], values[i], err);
            if (st) return st;
        }
    return PE_OK;
}

/* Fills the defaults that depend on the method or on the width, and validates the common
 * keys; then the method's own defaults and checks. Used by pe_attention_init. */
pe_status pe__config_resolve(pe_config *cfg, int64_t C, pe_err *err) {
    if (cfg->method < 0 || !pe_config_has(cfg, PE_K_method)) return pe_error(err, PE_EKEY, "key 'method' is required");
    if (pe_config_has(cfg, PE_K_hf_config)) { /* the reading and the layer's kind before its keys */
        pe_status st = pe__hf_config_check(cfg, -1, err);
        if (st) return st;
    }
    for (int k = 0; k < N_KEYS; k++)
        if (pe_config_has(cfg, (pe_key)k) && !method_accepts(cfg->method, k))
            return pe_error(err, PE_EKEY, "key '%s' does not apply to method %s", KEYS[k].name,
                            pe_method_name(cfg->method));
    if (!pe_config_has(cfg, PE_K_heads)) return pe_error(err, PE_EKEY, "key 'heads' is required");
    if (cfg->heads < 1) return pe_error(err, PE_EKEY, "key 'heads': %lld is not >= 1", (long long)cfg->heads);
    if (C < 1 || C % cfg->heads)
        return pe_error(err, PE_ETENSOR, "width C=%lld does not divide by heads %lld",
                        (long long)C, (long long)cfg->heads);
    int64_t H = cfg->heads, D = C / H;
    if (!pe_config_has(cfg, PE_K_kv_heads)) cfg->kv_heads = H;
    if (cfg->kv_heads < 1 || H % cfg->kv_heads)
        return pe_error(err, PE_EKEY, "key 'kv_heads': %lld does not divide heads %lld",
                        (long long)cfg->kv_heads, (long long)H);
    const pe__method *m = pe__method_get(cfg->method);
    if (cfg->kv_heads != H && !(m->flags & PE__GQA))
        return pe_error(err, PE_EKEY, "key 'kv_heads': method %s does not support grouped-query attention",
                        m->name);
    if (pe_config_has(cfg, PE_K_window)) { /* two sizes, each -1 (no limit) or >= 0 */
        const pe_int_list *w = &cfg->window;
        if (w->n != 2 || w->v[0] < -1 || w->v[1] < -1)
            return pe_error(err, PE_EKEY, "key 'window': expected LEFT,RIGHT, two integers >= -1 (-1: no limit on that "
                            "side; FlashAttention's window_size), e.g. 4095,0");
    }
    if (cfg->attention_sinks && m->walk_forward) /* complex: its own softmax over two streams */
        return pe_error(err, PE_EKEY, "key 'attention_sinks': method %s attends with its own walk, not the core's softmax",
                        m->name);
    if (!pe_config_has(cfg, PE_K_scale)) cfg->scale = 1.0 / sqrt((double)D);
    if (pe_config_has(cfg, PE_K_hf_config)) {
        pe_status st = pe__hf_config_check(cfg, D, err);
        if (st) return st;
    }
    if (m->defaults) m->defaults(cfg, H, D);
    if (m->check) return m->check(cfg, H, D, err);
    return PE_OK;
}
