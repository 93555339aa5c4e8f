/* doc.c - document tree helpers: constructors, lookup, equality, pointers, number text. */
#include "doc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fvm_doc *fvm_doc_new(fvm_arena *a, fvm_doc_kind kind)
{
    fvm_doc *d = fvm_arena_alloc(a, sizeof *d);
    if (d)
        d->kind = kind;
    return d;
}

fvm_doc *fvm_doc_string(fvm_arena *a, const char *s)
{
    fvm_doc *d = fvm_doc_new(a, FVM_DOC_STRING);
    if (!d)
        return NULL;
    d->u.str.len = strlen(s);
    d->u.str.s = fvm_arena_strndup(a, s, d->u.str.len);
    return d->u.str.s ? d : NULL;
}

fvm_doc *fvm_doc_int(fvm_arena *a, int64_t v)
{
    fvm_doc *d = fvm_doc_new(a, FVM_DOC_INT);
    if (d)
        d->u.i = v;
    return d;
}

fvm_doc *fvm_doc_real(fvm_arena *a, double v)
{
    fvm_doc *d = fvm_doc_new(a, FVM_DOC_REAL);
    if (d)
        d->u.r = v;
    return d;
}

fvm_doc *fvm_doc_bool(fvm_arena *a, bool v)
{
    fvm_doc *d = fvm_doc_new(a, FVM_DOC_BOOL);
    if (d)
        d->u.b = v;
    return d;
}

bool fvm_doc_integer(const fvm_doc *n, int64_t *out)
{
    if (n && n->kind == FVM_DOC_INT) {
        *out = n->u.i;
        return true;
    }
    /* -2^63 <= r < 2^63: both bounds are exact doubles. */
    if (!n || n->kind != FVM_DOC_REAL || !(n->u.r >= -0x1p63 && n->u.r < 0x1p63) || n->u.r != trunc(n->u.r))
        return false;
    *out = (int64_t)n->u.r;
    return true;
}

size_t fvm_doc_capacity(size_t n)
{
    size_t cap = 4;
    while (cap < n && cap <= SIZE_MAX / 2)
        cap *= 2;
    return cap < n ? n : cap;
}

/* Collections keep their capacity implicit, fvm_doc_capacity(n) (the readers
 * allocate that much too), so a new array is needed exactly when n is 0 (no
 * array yet, or a reader's empty one) or equals its capacity. */
static fvm_status grow(fvm_arena *a, fvm_doc *c)
{
    size_t n = c->u.coll.n;
    if (n != 0 && n != fvm_doc_capacity(n))
        return FVM_OK;
    size_t cap = fvm_doc_capacity(n + 1);
    if (cap <= n)
        return FVM_ERR_NOMEM;
    fvm_doc **items = fvm_arena_array(a, cap, sizeof *items);
    if (!items)
        return FVM_ERR_NOMEM;
    if (n)
        memcpy(items, c->u.coll.items, n * sizeof *items);
    c->u.coll.items = items;
    if (c->kind == FVM_DOC_OBJECT) {
        fvm_doc **keys = fvm_arena_array(a, cap, sizeof *keys);
        if (!keys)
            return FVM_ERR_NOMEM;
        if (n)
            memcpy(keys, c->u.coll.keys, n * sizeof *keys);
        c->u.coll.keys = keys;
    }
    return FVM_OK;
}

fvm_status fvm_doc_push(fvm_arena *a, fvm_doc *arr, fvm_doc *item)
{
    if (!arr || arr->kind != FVM_DOC_ARRAY)
        return FVM_ERR_USAGE;
    if (!item || grow(a, arr) != FVM_OK)
        return FVM_ERR_NOMEM;
    arr->u.coll.items[arr->u.coll.n++] = item;
    return FVM_OK;
}

fvm_status fvm_doc_set(fvm_arena *a, fvm_doc *obj, const char *key, fvm_doc *val)
{
    if (!obj || obj->kind != FVM_DOC_OBJECT)
        return FVM_ERR_USAGE;
    fvm_doc *k = fvm_doc_string(a, key);
    if (!k || !val || grow(a, obj) != FVM_OK)
        return FVM_ERR_NOMEM;
    obj->u.coll.keys[obj->u.coll.n] = k;
    obj->u.coll.items[obj->u.coll.n++] = val;
    return FVM_OK;
}

static size_t utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

static unsigned hex4(const char *p)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v = v * 16 + (unsigned)(c >= '0' && c <= '9'   ? c - '0'
                                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                       : 0);
    }
    return v;
}

int fvm_doc_string_col(const fvm_doc *n, size_t off)
{
    if (!n || n->kind != FVM_DOC_STRING || n->line <= 0)
        return n ? n->col : 0;
    int col = n->col + (n->u.str.quote ? 1 : 0);
    const char *s = n->u.str.s, *raw = n->u.str.raw;
    size_t dec = 0;
    if (raw && !*raw)
        return n->col;
    while (dec < off && dec < n->u.str.len) {
        size_t step = utf8_len((unsigned char)s[dec]);
        if (!raw) {
            col++;
        } else if (*raw == '\\' && n->u.str.quote == '"') {
            /* one escape decodes to one character */
            char e = raw[1];
            size_t len = e == 'u' ? 6 : e == 'U' ? 10 : e == 'x' ? 4 : 2;
            if (e == 'u' && hex4(raw + 2) >= 0xD800 && hex4(raw + 2) < 0xDC00 && raw[6] == '\\' && raw[7] == 'u')
                len = 12; /* a surrogate pair */
            for (size_t i = 0; i < len; i++)
                if (!raw[i])
                    return n->col;
            raw += len;
            col += (int)len;
        } else if (*raw == '\'' && raw[1] == '\'' && n->u.str.quote == '\'') {
            raw += 2;
            col += 2;
        } else if (*raw == '\n' || !*raw) {
            return n->col;
        } else {
            raw += utf8_len((unsigned char)*raw);
            col++;
        }
        dec += step;
    }
    return col;
}

fvm_doc *fvm_doc_get(const fvm_doc *obj, const char *key)
{
    if (!obj || obj->kind != FVM_DOC_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->u.coll.n; i++)
        if (strcmp(obj->u.coll.keys[i]->u.str.s, key) == 0)
            return obj->u.coll.items[i];
    return NULL;
}

bool fvm_doc_equal(const fvm_doc *a, const fvm_doc *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind)
        return false;
    switch (a->kind) {
    case FVM_DOC_NULL:
        return true;
    case FVM_DOC_BOOL:
        return a->u.b == b->u.b;
    case FVM_DOC_INT:
        return a->u.i == b->u.i;
    case FVM_DOC_REAL:
        return a->u.r == b->u.r || (isnan(a->u.r) && isnan(b->u.r));
    case FVM_DOC_STRING:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case FVM_DOC_ARRAY:
    case FVM_DOC_OBJECT:
        if (a->u.coll.n != b->u.coll.n)
            return false;
        for (size_t i = 0; i < a->u.coll.n; i++) {
            if (a->kind == FVM_DOC_OBJECT && !fvm_doc_equal(a->u.coll.keys[i], b->u.coll.keys[i]))
                return false;
            if (!fvm_doc_equal(a->u.coll.items[i], b->u.coll.items[i]))
                return false;
        }
        return true;
    }
    return false;
}

const char *fvm_pointer_join(fvm_arena *a, const char *base, const char *key)
{
    size_t extra = 0;
    for (const char *p = key; *p; p++)
        extra += (*p == '~' || *p == '/') ? 2 : 1;
    size_t blen = strlen(base);
    char *s = fvm_arena_alloc(a, blen + 1 + extra + 1);
    if (!s)
        return base;
    memcpy(s, base, blen);
    char *o = s + blen;
    *o++ = '/';
    for (const char *p = key; *p; p++) {
        if (*p == '~') {
            *o++ = '~';
            *o++ = '0';
        } else if (*p == '/') {
            *o++ = '~';
            *o++ = '1';
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return s;
}

const char *fvm_pointer_index(fvm_arena *a, const char *base, size_t i)
{
    const char *s = fvm_arena_printf(a, "%s/%zu", base, i);
    return s ? s : base;
}

void fvm_format_real(char buf[32], double v, bool as_f32)
{
    if (isnan(v)) {
        strcpy(buf, "nan");
        return;
    }
    if (isinf(v)) {
        strcpy(buf, v < 0 ? "-inf" : "inf");
        return;
    }
    int maxp = as_f32 ? 9 : 17, p = 1;
    for (; p <= maxp; p++) {
        snprintf(buf, 32, "%.*e", p - 1, v);
        if (as_f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    if (p > maxp)
        p = maxp;
    /* p significant digits suffice. Write them positionally (20.0, 0.75) when
     * the exponent is moderate, in exponent form (1e-07, 1e+20) otherwise. */
    int e = atoi(strchr(buf, 'e') + 1);
    if (e >= -5 && e <= 16) {
        char pos[40];
        int decimals = p - 1 - e > 0 ? p - 1 - e : 0;
        snprintf(pos, sizeof pos, "%.*f", decimals, v);
        if (strlen(pos) < 32 && (as_f32 ? strtof(pos, NULL) == (float)v : strtod(pos, NULL) == v))
            strcpy(buf, pos);
    } else {
        snprintf(buf, 32, "%.*g", p, v);
    }
    /* Keep it recognisably real: "1" would read back as an integer. */
    if (!strpbrk(buf, ".en")) {
        size_t n = strlen(buf);
        if (n + 2 < 32)
            memcpy(buf + n, ".0", 3);
    }
}
