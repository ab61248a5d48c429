/* A chunk of Kineto trace events -> columns, in one pass over the bytes, with no Python
 * object per event: the optional compiled fast path of stream.py (see fast.py).
 *
 * decode(buf, cats) takes the bytes of a JSON array of events (the chunk stream.py cut at
 * event boundaries) and returns the columns of its complete ("X") events of an analysed
 * category, or None. None means "decode this chunk the msgspec way": it is returned for
 * anything this parser does not reproduce exactly, or cannot be sure msgspec would accept,
 * such as a string id, a \u escape, a number beyond int64, a duplicate key, an event whose
 * "ph" is not its first key, a [memory] instant, a missing category, or malformed JSON.
 * The fallback then reproduces every error, repair and note of the Python decoder: this
 * file only has to be right about what it accepts.
 *
 * What it accepts, it must read as msgspec reads it with the structs of schema.py
 * (tests/trace/test_fast_decode.py compares both, column for column, on real and built
 * traces and on random ones):
 *   - typed fields: cat and name (str), pid, tid and the ids (int, or null: -1), ts, dur and
 *     the measures (a number, or null: NaN), grid and block (list of int; their product),
 *     "Input Dims", "Input type", "Concrete Inputs" (the value's raw bytes);
 *   - the collective keys (Any): validated; a kernel whose "Collective name" is a string
 *     has its args object's bytes returned, for comm_args.py to read the msgspec way;
 *   - every other value is only checked to be JSON, as msgspec checks what it skips;
 *   - numbers are converted exactly (correctly rounded, as msgspec and strtod do).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 64
#define MAX_ABS_TS 1e19
#define MAX_PRODUCT ((int64_t)1 << 62)
#define NCATS 32

/* string flags */
#define S_ESC 1  /* a backslash escape (not \u: that makes the chunk fall back) */
#define S_HIGH 2 /* a byte >= 0x80 */

typedef struct {
    const char *p;
    Py_ssize_t n;
    int flags;
} Str;

typedef struct {
    int is_int;
    int neg;
    uint64_t mant;  /* significant digits (when ndig <= 19) */
    int ndig;       /* significant digits (leading zeros dropped) */
    int e10;        /* exponent of mant */
    const char *start, *end;
} Num;

/* ---------------------------------------------------------------- growable columns */

typedef struct {
    char *data; /* COL_SIZE bytes per row */
} Col;

enum {
    C_CLS, C_TS, C_DUR, C_NAME, C_PID, C_TID, C_EXT, C_EXT_LEGACY, C_CORR, C_DEVICE, C_STREAM,
    C_BYTES, C_BPS, C_OCC, C_FLOPS, C_GRID, C_BLOCK, C_REC, NCOLS
};
static const Py_ssize_t COL_SIZE[NCOLS] = {1, 8, 8, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4};

/* ---------------------------------------------------------------- interning */

typedef struct {
    Str a, b, c; /* a name (a only), or a record (dims, types, concrete; n < 0: absent) */
    uint64_t hash;
    int32_t idx;
} Entry;

typedef struct {
    Entry *slots; /* open addressing, idx < 0: empty */
    Py_ssize_t cap, used;
    Entry *order; /* by index */
    Py_ssize_t ocap;
} Table;

typedef struct {
    const char *end;
    Col cols[NCOLS];
    Py_ssize_t rows, cap;
    Py_ssize_t bad_ts;
    Table names, records;
    PyObject *comm; /* list of (row, bytes of the args object) */
    struct {
        char name[32];
        Py_ssize_t n;
        int cls;
    } cats[NCATS];
    int ncats;
} State;

static uint64_t hash_bytes(const char *p, Py_ssize_t n, uint64_t h) {
    h ^= (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n) memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    return h;
}

static int str_eq(const Str *x, const Str *y) {
    return x->n == y->n && (x->n <= 0 || memcmp(x->p, y->p, (size_t)x->n) == 0);
}

static int table_grow(Table *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 1024;
    Entry *slots = malloc(sizeof(Entry) * (size_t)cap);
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < cap; i++) slots[i].idx = -1;
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (t->slots[i].idx < 0) continue;
        Py_ssize_t j = (Py_ssize_t)(t->slots[i].hash & (uint64_t)(cap - 1));
        while (slots[j].idx >= 0) j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* The index of the entry equal to e (added when new); -1 on memory error. */
static int32_t intern(Table *t, Entry *e) {
    if ((t->used + 1) * 2 > t->cap && table_grow(t) < 0) return -1;
    Py_ssize_t j = (Py_ssize_t)(e->hash & (uint64_t)(t->cap - 1));
    while (t->slots[j].idx >= 0) {
        Entry *s = &t->slots[j];
        if (s->hash == e->hash && str_eq(&s->a, &e->a) && str_eq(&s->b, &e->b) && str_eq(&s->c, &e->c))
            return s->idx;
        j = (j + 1) & (t->cap - 1);
    }
    if (t->used == t->ocap) {
        Py_ssize_t ocap = t->ocap ? t->ocap * 2 : 1024;
        Entry *o = realloc(t->order, sizeof(Entry) * (size_t)ocap);
        if (!o) return -1;
        t->order = o;
        t->ocap = ocap;
    }
    e->idx = (int32_t)t->used;
    t->slots[j] = *e;
    t->order[t->used++] = *e;
    return e->idx;
}

/* ---------------------------------------------------------------- lexing */

/* 1: a byte that ends a fast run inside a string */
static unsigned char STR_STOP[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) STR_STOP[c] = (c < 0x20 || c == '"' || c == '\\' || c >= 0x80);
}

static inline const char *ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* The first byte at or after p that STR_STOP marks (e if none): 16 bytes at a time with SSE2. */
static inline const char *to_stop(const char *p, const char *e) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed: bytes >= 0x80 are negative, so "< 0x20" takes them with the control bytes */
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                   _mm_cmplt_epi8(v, space));
        int mask = _mm_movemask_epi8(hit);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < e && !STR_STOP[(unsigned char)*p]) p++;
    return p;
}

/* p just after the opening quote; the closing quote, or NULL (fall back). */
static const char *scan_string(const char *p, const char *e, int *flags) {
    int f = 0;
    for (;;) {
        p = to_stop(p, e);
        if (p >= e) return NULL;
        unsigned char c = (unsigned char)*p;
        if (c == '"') break;
        if (c >= 0x80) {
            f |= S_HIGH;
            p++;
            continue;
        }
        if (c < 0x20) return NULL; /* msgspec refuses raw control characters */
        /* a backslash */
        if (p + 1 >= e) return NULL;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            f |= S_ESC;
            p += 2;
            continue;
        default: /* \u (surrogates are checked by msgspec, not here) or an invalid escape */
            return NULL;
        }
    }
    *flags = f;
    return p;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A JSON number at p; NULL if malformed. */
static const char *scan_number(const char *p, const char *e, Num *n) {
    n->start = p;
    n->neg = 0;
    n->mant = 0;
    n->ndig = 0;
    n->is_int = 1;
    int frac = 0;
    long ex = 0;
    if (p < e && *p == '-') {
        n->neg = 1;
        p++;
    }
    if (p >= e) return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < e && is_digit(*p)) {
            if (n->ndig < 19) n->mant = n->mant * 10 + (uint64_t)(*p - '0');
            n->ndig++;
            p++;
        }
    } else {
        return NULL;
    }
    if (p < e && *p == '.') {
        n->is_int = 0;
        p++;
        if (p >= e || !is_digit(*p)) return NULL;
        while (p < e && is_digit(*p)) {
            if (n->ndig == 0 && *p == '0') {
                frac++; /* a leading zero: not significant */
            } else {
                if (n->ndig < 19) n->mant = n->mant * 10 + (uint64_t)(*p - '0');
                n->ndig++;
                frac++;
            }
            p++;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        n->is_int = 0;
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) eneg = (*p++ == '-');
        if (p >= e || !is_digit(*p)) return NULL;
        while (p < e && is_digit(*p)) {
            if (ex < 100000) ex = ex * 10 + (*p - '0');
            p++;
        }
        if (eneg) ex = -ex;
    }
    n->e10 = (int)(ex - frac);
    n->end = p;
    return p;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
static const uint64_t POW10_U64[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
    10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
    1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
    10000000000000000000ULL};

/* m / 10^k correctly rounded to a double (m > 0, m < 2^64, 0 <= k <= 19): the quotient is
 * taken exactly in 128-bit integers with at least 63 bits, then rounded half to even. */
static double div_pow10(uint64_t m, int k) {
    int b = 64 - __builtin_clzll(m);
    int s = 127 - b;
    unsigned __int128 num = (unsigned __int128)m << s;
    uint64_t den = POW10_U64[k];
    unsigned __int128 q = num / den;
    int rem_nonzero = (num % den) != 0;
    uint64_t hi = (uint64_t)(q >> 64);
    int nb = hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll((uint64_t)q);
    int shift = nb - 53;
    unsigned __int128 one = 1;
    uint64_t mant = (uint64_t)(q >> shift);
    unsigned __int128 dropped = q & ((one << shift) - 1);
    unsigned __int128 half = one << (shift - 1);
    if (dropped > half || (dropped == half && (rem_nonzero || (mant & 1)))) mant++;
    if (mant == (1ULL << 53)) {
        mant >>= 1;
        shift++;
    }
    return ldexp((double)mant, shift - s);
}

/* The number as a double, as msgspec reads it into a float field; 0 on success, -1 to fall
 * back (out of range, or too long to convert here). */
static int num_double(const Num *n, double *out) {
    if (n->is_int) {
        if (n->ndig > 18) return -1;
        int64_t v = (int64_t)n->mant;
        *out = (double)(n->neg ? -v : v); /* msgspec: an int first, so "-0" is +0.0 */
        return 0;
    }
    double d;
    if (n->ndig == 0) { /* all zeros */
        d = 0.0;
    } else if (n->ndig <= 19 && n->mant <= (1ULL << 53) && n->e10 >= -22 && n->e10 <= 22) {
        d = (double)n->mant;
        d = n->e10 < 0 ? d / POW10[-n->e10] : d * POW10[n->e10];
    } else if (n->ndig <= 19 && n->e10 <= 0 && n->e10 >= -19) {
        d = div_pow10(n->mant, -n->e10);
    } else {
        char tmp[128];
        Py_ssize_t len = n->end - n->start;
        if (len >= (Py_ssize_t)sizeof(tmp)) return -1;
        memcpy(tmp, n->start, (size_t)len);
        tmp[len] = 0;
        d = PyOS_string_to_double(tmp, NULL, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        if (isinf(d)) return -1; /* msgspec: "Number out of range" */
        *out = d;
        return 0;
    }
    *out = n->neg ? -d : d;
    return 0;
}

enum { SKIP, ANY };

/* Skip one value at p (checked as msgspec checks what it skips, or, for ANY, what it decodes
 * into an Any field); the byte after it, or NULL to fall back. */
static const char *skip_value(const char *p, const char *e, int mode, int depth) {
    if (p >= e || depth > MAX_DEPTH) return NULL;
    switch (*p) {
    case '"': {
        int f;
        const char *q = scan_string(p + 1, e, &f);
        if (!q || (mode == ANY && (f & S_HIGH))) return NULL; /* Any decodes it: UTF-8 not checked here */
        return q + 1;
    }
    case '{': {
        p = ws(p + 1, e);
        if (p < e && *p == '}') return p + 1;
        for (;;) {
            if (p >= e || *p != '"') return NULL;
            int f;
            const char *q = scan_string(p + 1, e, &f);
            if (!q) return NULL;
            if (mode == ANY && (f & S_HIGH)) return NULL;
            p = ws(q + 1, e);
            if (p >= e || *p != ':') return NULL;
            p = skip_value(ws(p + 1, e), e, mode, depth + 1);
            if (!p) return NULL;
            p = ws(p, e);
            if (p >= e) return NULL;
            if (*p == '}') return p + 1;
            if (*p != ',') return NULL;
            p = ws(p + 1, e);
        }
    }
    case '[': {
        p = ws(p + 1, e);
        if (p < e && *p == ']') return p + 1;
        for (;;) {
            p = skip_value(p, e, mode, depth + 1);
            if (!p) return NULL;
            p = ws(p, e);
            if (p >= e) return NULL;
            if (*p == ']') return p + 1;
            if (*p != ',') return NULL;
            p = ws(p + 1, e);
        }
    }
    case 't':
        return (e - p >= 4 && memcmp(p, "true", 4) == 0) ? p + 4 : NULL;
    case 'f':
        return (e - p >= 5 && memcmp(p, "false", 5) == 0) ? p + 5 : NULL;
    case 'n':
        return (e - p >= 4 && memcmp(p, "null", 4) == 0) ? p + 4 : NULL;
    default: {
        Num n;
        const char *q = scan_number(p, e, &n);
        if (!q) return NULL;
        if (mode == ANY) {
            double d;
            if (n.is_int ? n.ndig > 18 : num_double(&n, &d) < 0) return NULL;
        }
        return q;
    }
    }
}

static int is_null(const char *p, const char *e) { return e - p >= 4 && memcmp(p, "null", 4) == 0; }

/* A plain string (no escape, ASCII) at p, for a field that only numbers are read from. */
static const char *skip_plain_string(const char *p, const char *e) {
    int f;
    const char *q = scan_string(p + 1, e, &f);
    return q && !f ? q + 1 : NULL;
}

/* An id or count: an int (within 18 digits), or null or a string (-1: columns.ints keeps
 * only ints). */
static const char *read_int(const char *p, const char *e, int64_t *out) {
    if (is_null(p, e)) {
        *out = -1;
        return p + 4;
    }
    if (p < e && *p == '"') {
        *out = -1;
        return skip_plain_string(p, e);
    }
    if (p >= e || !(*p == '-' || is_digit(*p))) return NULL;
    Num n;
    const char *q = scan_number(p, e, &n);
    if (!q || !n.is_int || n.ndig > 18) return NULL;
    int64_t v = (int64_t)n.mant;
    *out = n.neg ? -v : v;
    return q;
}

/* A float field: a number, or null or a string (NaN: values.floats keeps only numbers). */
static const char *read_float(const char *p, const char *e, double *out) {
    if (is_null(p, e)) {
        *out = NAN;
        return p + 4;
    }
    if (p < e && *p == '"') {
        *out = NAN;
        return skip_plain_string(p, e);
    }
    if (p >= e || !(*p == '-' || is_digit(*p))) return NULL;
    Num n;
    const char *q = scan_number(p, e, &n);
    if (!q || num_double(&n, out) < 0) return NULL;
    return q;
}

/* A grid or block: the product of a list of ints (values.product: -1 missing, -2 absurd). */
static const char *read_dims(const char *p, const char *e, int64_t *out) {
    if (is_null(p, e)) {
        *out = -1;
        return p + 4;
    }
    if (p < e && *p == '"') { /* a string: msgspec keeps it, product() says missing */
        int f;
        const char *q = scan_string(p + 1, e, &f);
        if (!q || f) return NULL;
        *out = -1;
        return q + 1;
    }
    if (p >= e || *p != '[') return NULL;
    p = ws(p + 1, e);
    if (p < e && *p == ']') {
        *out = -1;
        return p + 1;
    }
    int64_t prod = 1;
    int absurd = 0;
    for (;;) {
        int64_t x;
        if (is_null(p, e) || (p < e && *p == '"')) return NULL; /* list[int] */
        p = read_int(p, e, &x);
        if (!p) return NULL;
        if (!absurd) {
            if (x < 0 || x > MAX_PRODUCT) {
                absurd = 1;
            } else {
                __int128 q = (__int128)prod * x;
                if (q > MAX_PRODUCT) absurd = 1;
                else prod = (int64_t)q;
            }
        }
        p = ws(p, e);
        if (p >= e) return NULL;
        if (*p == ']') break;
        if (*p != ',') return NULL;
        p = ws(p + 1, e);
    }
    *out = absurd ? -2 : prod;
    return p + 1;
}

/* A string where a number is read: numpy's fromiter parses "12" as 12 when every value of the
 * chunk's column converts, and columns.py falls back per value when one does not, so a kept
 * row with one falls back here. */
#define STRING_AT(p, e) ((p) < (e) && *(p) == '"')

#define KEY(s) (k.n == (Py_ssize_t)(sizeof(s) - 1) && memcmp(k.p, s, sizeof(s) - 1) == 0)

/* ---------------------------------------------------------------- one event */

typedef struct {
    Str cat, name;
    int has_cat;
    int64_t pid, tid;
    double ts, dur;
    int64_t ext, ext_legacy, corr, device, stream, bytes, grid, block;
    double bps, occ, flops;
    Str dims, types, concrete;
    const char *args_start, *args_end;
    int collective_str;
    int label; /* a string where a number is read: kept rows with one fall back (STRING_AT) */
} X;

/* The next key of an object: 1 with k set and *pp at its value, 0 at the object's end (*pp
 * after its '}'), -1 to fall back. ``after`` says whether a value came before (a ',' then). */
static int next_key(const char **pp, const char *e, int *after, Str *k) {
    const char *p = ws(*pp, e);
    if (p >= e) return -1;
    if (*p == '}') {
        *pp = p + 1;
        return 0;
    }
    if (*after) {
        if (*p != ',') return -1;
        p = ws(p + 1, e);
    }
    if (p >= e || *p != '"') return -1; /* also a trailing comma */
    k->p = p + 1;
    const char *q = scan_string(p + 1, e, &k->flags);
    if (!q || k->flags) return -1; /* a key with escapes: let msgspec read it */
    k->n = q - k->p;
    p = ws(q + 1, e);
    if (p >= e || *p != ':') return -1;
    *pp = ws(p + 1, e);
    *after = 1;
    return 1;
}

#define ONCE(bit)                   \
    do {                            \
        if (seen & (1ULL << (bit))) \
            return NULL;            \
        seen |= 1ULL << (bit);      \
    } while (0)

static const char *read_string(const char *p, const char *e, Str *s) {
    if (p >= e || *p != '"') return NULL;
    s->p = p + 1;
    const char *q = scan_string(p + 1, e, &s->flags);
    if (!q) return NULL;
    s->n = q - s->p;
    return q + 1;
}

static const char *parse_args(const char *p, const char *e, X *x) {
    uint64_t seen = 0;
    if (p >= e || *p != '{') return NULL;
    x->args_start = p;
    p++;
    int after = 0, more;
    Str k;
    while ((more = next_key(&p, e, &after, &k)) > 0) {
    if (KEY("External id")) { ONCE(0); x->label |= STRING_AT(p, e); p = read_int(p, e, &x->ext); }
    else if (KEY("external id")) { ONCE(1); x->label |= STRING_AT(p, e); p = read_int(p, e, &x->ext_legacy); }
    else if (KEY("correlation")) { ONCE(2); x->label |= STRING_AT(p, e); p = read_int(p, e, &x->corr); }
    else if (KEY("device")) { ONCE(3); x->label |= STRING_AT(p, e); p = read_int(p, e, &x->device); }
    else if (KEY("stream")) { ONCE(4); x->label |= STRING_AT(p, e); p = read_int(p, e, &x->stream); }
    else if (KEY("bytes")) { ONCE(5); x->label |= STRING_AT(p, e); p = read_int(p, e, &x->bytes); }
    else if (KEY("blocks per SM")) { ONCE(6); x->label |= STRING_AT(p, e); p = read_float(p, e, &x->bps); }
    else if (KEY("est. achieved occupancy %")) { ONCE(7); x->label |= STRING_AT(p, e); p = read_float(p, e, &x->occ); }
    else if (KEY("flops")) { ONCE(8); x->label |= STRING_AT(p, e); p = read_float(p, e, &x->flops); }
    else if (KEY("grid")) { ONCE(9); p = read_dims(p, e, &x->grid); }
    else if (KEY("block")) { ONCE(10); p = read_dims(p, e, &x->block); }
    else if (KEY("Input Dims") || KEY("Input type") || KEY("Concrete Inputs")) {
        Str *raw = k.n == 15 ? &x->concrete : (k.p[6] == 'D' ? &x->dims : &x->types);
        ONCE(k.n == 15 ? 11 : (k.p[6] == 'D' ? 12 : 13));
        raw->p = p;
        p = skip_value(p, e, SKIP, 1);
        if (!p) return NULL;
        raw->n = p - raw->p;
    }
    else if (KEY("Collective name")) {
        ONCE(14);
        x->collective_str = p < e && *p == '"';
        p = skip_value(p, e, ANY, 1);
    }
    else if (KEY("In msg nelems")) { ONCE(15); p = skip_value(p, e, ANY, 1); }
    else if (KEY("Out msg nelems")) { ONCE(16); p = skip_value(p, e, ANY, 1); }
    else if (KEY("Group size")) { ONCE(17); p = skip_value(p, e, ANY, 1); }
    else if (KEY("dtype")) { ONCE(18); p = skip_value(p, e, ANY, 1); }
    else if (KEY("Process Group Name")) { ONCE(19); p = skip_value(p, e, ANY, 1); }
    else if (KEY("Process Group Description")) { ONCE(20); p = skip_value(p, e, ANY, 1); }
    else if (KEY("Process Group Ranks")) { ONCE(21); p = skip_value(p, e, ANY, 1); }
    else p = skip_value(p, e, SKIP, 1);
    if (!p) return NULL;
    }
    if (more < 0) return NULL;
    x->args_end = p;
    return p;
}

static int cat_class(State *st, const Str *cat) {
    char low[32];
    if (cat->n >= (Py_ssize_t)sizeof(low)) return 0;
    for (Py_ssize_t i = 0; i < cat->n; i++) {
        char c = cat->p[i];
        low[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    for (int i = 0; i < st->ncats; i++)
        if (st->cats[i].n == cat->n && memcmp(st->cats[i].name, low, (size_t)cat->n) == 0) return st->cats[i].cls;
    return 0;
}

static int add_row(State *st) {
    if (st->rows == st->cap) {
        Py_ssize_t cap = st->cap ? st->cap * 2 : 4096;
        for (int c = 0; c < NCOLS; c++) {
            char *d = realloc(st->cols[c].data, (size_t)(cap * COL_SIZE[c]));
            if (!d) return -1;
            st->cols[c].data = d;
        }
        st->cap = cap;
    }
    return 0;
}

#define PUT(col, type, v) (((type *)st->cols[col].data)[r] = (v))

/* After "ph": "X": the other keys of a complete event; NULL to fall back (*err set: an error). */
static const char *parse_x(State *st, const char *p, const char *e, int after, int ph_left, int *err) {
    X x;
    memset(&x, 0, sizeof(x));
    x.name.p = x.cat.p = "";
    x.pid = x.tid = -1;
    x.ts = x.dur = NAN;
    x.ext = x.ext_legacy = x.corr = x.device = x.stream = x.bytes = x.grid = x.block = -1;
    x.bps = x.occ = x.flops = NAN;
    x.dims.n = x.types.n = x.concrete.n = -1;
    uint64_t seen = 0;
    int more;
    Str k;
    while ((more = next_key(&p, e, &after, &k)) > 0) {
    if (KEY("cat")) { ONCE(0); p = read_string(p, e, &x.cat); x.has_cat = 1; }
    else if (KEY("name")) { ONCE(1); p = read_string(p, e, &x.name); }
    else if (KEY("pid")) { ONCE(2); x.label |= STRING_AT(p, e); p = read_int(p, e, &x.pid); }
    else if (KEY("tid")) { ONCE(3); x.label |= STRING_AT(p, e); p = read_int(p, e, &x.tid); }
    else if (KEY("ts")) { ONCE(4); if (STRING_AT(p, e)) return NULL; p = read_float(p, e, &x.ts); }
    else if (KEY("dur")) { ONCE(5); if (STRING_AT(p, e)) return NULL; p = read_float(p, e, &x.dur); }
    else if (KEY("args")) { ONCE(6); p = parse_args(p, e, &x); }
    else if (KEY("ph")) { if (!ph_left--) return NULL; p = skip_value(p, e, SKIP, 1); }
    else p = skip_value(p, e, SKIP, 1);
    if (!p) return NULL;
    }
    if (more < 0) return NULL;
    /* a missing or empty category is classified from name and args: msgspec's way */
    if (!x.has_cat || x.cat.n == 0 || x.cat.flags) return NULL;
    int cls = cat_class(st, &x.cat);
    if (!cls || isnan(x.ts)) {
        if (x.name.flags) return NULL; /* its name must still be valid: let msgspec check */
        return p;
    }
    if (!(fabs(x.ts) <= MAX_ABS_TS)) {
        if (x.name.flags) return NULL;
        st->bad_ts++;
        return p;
    }
    if (x.label) return NULL;
    if (add_row(st) < 0) {
        *err = 1;
        return NULL;
    }
    Py_ssize_t r = st->rows;
    Entry en;
    memset(&en, 0, sizeof(en));
    en.a = x.name;
    en.b.n = en.c.n = -2;
    en.hash = hash_bytes(x.name.p, x.name.n, 0);
    int32_t name_idx = intern(&st->names, &en);
    int32_t rec = -1;
    if (x.dims.n >= 0) {
        Entry rc;
        memset(&rc, 0, sizeof(rc));
        rc.a = x.dims;
        rc.b = x.types;
        rc.c = x.concrete;
        uint64_t h = hash_bytes(x.dims.p, x.dims.n, 1);
        if (x.types.n >= 0) h = hash_bytes(x.types.p, x.types.n, h);
        if (x.concrete.n >= 0) h = hash_bytes(x.concrete.p, x.concrete.n, h + 7);
        rc.hash = h;
        rec = intern(&st->records, &rc);
        if (rec < 0) {
            *err = 1;
            return NULL;
        }
    }
    if (name_idx < 0) {
        *err = 1;
        return NULL;
    }
    PUT(C_CLS, int8_t, (int8_t)cls);
    PUT(C_TS, double, x.ts);
    PUT(C_DUR, double, x.dur);
    PUT(C_NAME, int32_t, name_idx);
    PUT(C_PID, int64_t, x.pid);
    PUT(C_TID, int64_t, x.tid);
    PUT(C_EXT, int64_t, x.ext);
    PUT(C_EXT_LEGACY, int64_t, x.ext_legacy);
    PUT(C_CORR, int64_t, x.corr);
    PUT(C_DEVICE, int64_t, x.device);
    PUT(C_STREAM, int64_t, x.stream);
    PUT(C_BYTES, int64_t, x.bytes);
    PUT(C_BPS, double, x.bps);
    PUT(C_OCC, double, x.occ);
    PUT(C_FLOPS, double, x.flops);
    PUT(C_GRID, int64_t, x.grid);
    PUT(C_BLOCK, int64_t, x.block);
    PUT(C_REC, int32_t, rec);
    st->rows++;
    if (x.collective_str) {
        PyObject *t = Py_BuildValue("(ny#)", r, x.args_start, (Py_ssize_t)(x.args_end - x.args_start));
        if (!t || PyList_Append(st->comm, t) < 0) {
            Py_XDECREF(t);
            *err = 1;
            return NULL;
        }
        Py_DECREF(t);
    }
    return p;
}

/* After "ph": "i": an instant. Its fields are Any in schema.Instant; the allocator's
 * [memory] events fall back (memory_events.py reads them). */
static const char *parse_instant(const char *p, const char *e, int after, int ph_left) {
    uint64_t seen = 0;
    int more;
    Str k;
    while ((more = next_key(&p, e, &after, &k)) > 0) {
    if (KEY("name")) {
        ONCE(0);
        if (p < e && *p == '"') {
            Str s;
            const char *q = read_string(p, e, &s);
            if (!q || s.flags) return NULL;
            if ((s.n == 8 && memcmp(s.p, "[memory]", 8) == 0) || (s.n == 13 && memcmp(s.p, "[OutOfMemory]", 13) == 0))
                return NULL;
            p = q;
        } else {
            p = skip_value(p, e, ANY, 1);
        }
    }
    else if (KEY("pid")) { ONCE(1); p = skip_value(p, e, ANY, 1); }
    else if (KEY("tid")) { ONCE(2); p = skip_value(p, e, ANY, 1); }
    else if (KEY("ts")) { ONCE(3); p = skip_value(p, e, ANY, 1); }
    else if (KEY("args")) {
        ONCE(4);
        if (p >= e || *p != '{') return NULL;
        p++;
        uint64_t seen_args = 0;
        int after_arg = 0, more_args;
        while ((more_args = next_key(&p, e, &after_arg, &k)) > 0) {
        int bit = KEY("Total Allocated") ? 0 : KEY("Total Reserved") ? 1 : KEY("Bytes") ? 2
                : KEY("Device Id") ? 3 : KEY("Device Type") ? 4 : KEY("Addr") ? 5 : -1;
        if (bit >= 0) {
            if (seen_args & (1ULL << bit)) return NULL;
            seen_args |= 1ULL << bit;
        }
        p = skip_value(p, e, bit >= 0 ? ANY : SKIP, 2);
        if (!p) return NULL;
        }
        if (more_args < 0) return NULL;
    }
    else if (KEY("ph")) { if (!ph_left--) return NULL; p = skip_value(p, e, SKIP, 1); }
    else p = skip_value(p, e, SKIP, 1);
    if (!p) return NULL;
    }
    if (more < 0) return NULL;
    return p;
}

/* Any other phase: an empty struct in schema.py, every key skipped. */
static const char *parse_other(const char *p, const char *e, int after, int ph_left) {
    int more;
    Str k;
    while ((more = next_key(&p, e, &after, &k)) > 0) {
        if (KEY("ph") && !ph_left--) return NULL;
        p = skip_value(p, e, SKIP, 1);
        if (!p) return NULL;
    }
    if (more < 0) return NULL;
    return p;
}

/* The phase of the event whose '{' p is after, when "ph" is not its first key: its keys are
 * skipped (checked) to find it. 0 if it has none, or two. */
static char find_phase(const char *p, const char *e) {
    int after = 0, more;
    Str k, ph;
    char c = 0;
    while ((more = next_key(&p, e, &after, &k)) > 0) {
        if (KEY("ph")) {
            if (c) return 0;
            p = read_string(p, e, &ph);
            if (!p || ph.flags || ph.n != 1) return 0;
            c = ph.p[0];
        } else {
            p = skip_value(p, e, SKIP, 1);
            if (!p) return 0;
        }
    }
    return more < 0 ? 0 : c;
}

static const char *parse_event(State *st, const char *p, const char *e, int *err) {
    if (p >= e || *p != '{') return NULL;
    const char *body = p + 1;
    p = ws(body, e);
    Str k, ph;
    char c;
    int after = 1, ph_left = 0;
    if (p >= e || *p != '"') return NULL;
    p = read_string(p, e, &k);
    if (!p || k.flags) return NULL;
    if (KEY("ph")) { /* first, as Kineto writes it */
        p = ws(p, e);
        if (p >= e || *p != ':') return NULL;
        p = read_string(ws(p + 1, e), e, &ph);
        if (!p || ph.flags || ph.n != 1) return NULL;
        c = ph.p[0];
    } else { /* metadata rows, other writers: find it, then read the event from its start */
        c = find_phase(body, e);
        p = body;
        after = 0;
        ph_left = 1;
    }
    switch (c) {
    case 'X':
        return parse_x(st, p, e, after, ph_left, err);
    case 'i':
        return parse_instant(p, e, after, ph_left);
    case 'B': case 'E': case 'I': case 'C': case 'b': case 'n': case 'e': case 's': case 't': case 'f':
    case 'P': case 'O': case 'N': case 'D': case 'M': case 'R': case 'c': case '(': case ')':
        return parse_other(p, e, after, ph_left);
    default:
        return NULL; /* none, or an unknown phase: the untagged schema decides */
    }
}

/* ---------------------------------------------------------------- results */

/* A name as msgspec decodes it: escapes resolved, UTF-8 checked; NULL (no error set) to fall back. */
static PyObject *name_object(const Str *s) {
    if (!(s->flags & S_ESC)) {
        PyObject *o = PyUnicode_DecodeUTF8(s->p, s->n, "strict");
        if (!o) PyErr_Clear();
        return o;
    }
    char *buf = malloc((size_t)s->n + 1);
    if (!buf) return NULL;
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < s->n; i++) {
        char c = s->p[i];
        if (c == '\\') {
            char d = s->p[++i];
            c = d == 'b' ? '\b' : d == 'f' ? '\f' : d == 'n' ? '\n' : d == 'r' ? '\r' : d == 't' ? '\t' : d;
        }
        buf[j++] = c;
    }
    PyObject *o = PyUnicode_DecodeUTF8(buf, j, "strict");
    free(buf);
    if (!o) PyErr_Clear();
    return o;
}

static PyObject *opt_bytes(const Str *s) {
    if (s->n < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(s->p, s->n);
}

static void state_free(State *st) {
    for (int c = 0; c < NCOLS; c++) free(st->cols[c].data);
    free(st->names.slots);
    free(st->names.order);
    free(st->records.slots);
    free(st->records.order);
    Py_XDECREF(st->comm);
}

static PyObject *results(State *st) {
    PyObject *names = PyList_New(st->names.used);
    if (!names) return NULL;
    for (Py_ssize_t i = 0; i < st->names.used; i++) {
        PyObject *o = name_object(&st->names.order[i].a);
        if (!o) {
            Py_DECREF(names);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE; /* not UTF-8, or an escape we do not resolve: fall back */
        }
        PyList_SET_ITEM(names, i, o);
    }
    PyObject *records = PyList_New(st->records.used);
    if (!records) {
        Py_DECREF(names);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < st->records.used; i++) {
        Entry *r = &st->records.order[i];
        PyObject *t = Py_BuildValue("(NNN)", opt_bytes(&r->a), opt_bytes(&r->b), opt_bytes(&r->c));
        if (!t) {
            Py_DECREF(names);
            Py_DECREF(records);
            return NULL;
        }
        PyList_SET_ITEM(records, i, t);
    }
    PyObject *cols = PyTuple_New(NCOLS);
    if (!cols) {
        Py_DECREF(names);
        Py_DECREF(records);
        return NULL;
    }
    for (int c = 0; c < NCOLS; c++) {
        PyObject *b = PyByteArray_FromStringAndSize(st->cols[c].data ? st->cols[c].data : "", st->rows * COL_SIZE[c]);
        if (!b) {
            Py_DECREF(names);
            Py_DECREF(records);
            Py_DECREF(cols);
            return NULL;
        }
        PyTuple_SET_ITEM(cols, c, b);
    }
    return Py_BuildValue("(nnNNNO)", st->rows, st->bad_ts, cols, names, records, st->comm);
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *cats;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyTuple_Type, &cats)) return NULL;
    State st;
    memset(&st, 0, sizeof(st));
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cats) && st.ncats < NCATS; i++) {
        const char *name;
        Py_ssize_t n;
        int cls;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cats, i), "y#i", &name, &n, &cls)) goto done;
        if (n >= (Py_ssize_t)sizeof(st.cats[0].name)) continue;
        memcpy(st.cats[st.ncats].name, name, (size_t)n);
        st.cats[st.ncats].n = n;
        st.cats[st.ncats].cls = cls;
        st.ncats++;
    }
    st.comm = PyList_New(0);
    if (!st.comm) goto done;
    const char *p = view.buf, *e = p + view.len;
    int err = 0;
    p = ws(p, e);
    if (p >= e || *p != '[') goto fallback;
    p = ws(p + 1, e);
    if (p < e && *p != ']') {
        for (;;) {
            p = parse_event(&st, p, e, &err);
            if (!p) {
                if (err) {
                    if (!PyErr_Occurred()) PyErr_NoMemory();
                    goto done;
                }
                goto fallback;
            }
            p = ws(p, e);
            if (p >= e) goto fallback;
            if (*p == ']') break;
            if (*p != ',') goto fallback;
            p = ws(p + 1, e);
        }
    }
    if (p >= e || *p != ']' || ws(p + 1, e) != e) goto fallback;
    out = results(&st);
    goto done;
fallback:
    out = Py_None;
    Py_INCREF(out);
done:
    state_free(&st);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(buf, cats) -> (rows, bad_ts, columns, names, records, comm) or None (decode it the msgspec way)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kineto(void) {
    init_tables();
    return PyModule_Create(&module);
}
