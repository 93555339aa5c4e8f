/* wire.c - runtime values and diagnostics to bytes and back (the layout is in wire.h). */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

enum { TAG_NONE, TAG_TENSOR, TAG_STRUCT, TAG_SEQ_LIST, TAG_SEQ_COLS, TAG_CLIENTS, TAG_COUNT };

#define NO_STRING 0xffffffffu

static fvm_status put_u8(fvm_bytes *b, unsigned v, fvm_diag *d)
{
    unsigned char c = (unsigned char)v;
    return fvm_bytes_put(b, &c, 1, d);
}

static fvm_status put_i64(fvm_bytes *b, int64_t v, fvm_diag *d)
{
    return fvm_bytes_put(b, &v, sizeof v, d);
}

static fvm_status put_i32(fvm_bytes *b, int32_t v, fvm_diag *d)
{
    return fvm_bytes_put(b, &v, sizeof v, d);
}

static fvm_status put_str(fvm_bytes *b, const char *s, fvm_diag *d)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= NO_STRING)
        n = NO_STRING - 1; /* a message of 4 GiB is cut */
    uint32_t len = s ? (uint32_t)n : NO_STRING;
    fvm_status st = fvm_bytes_put(b, &len, sizeof len, d);
    return st ? st : fvm_bytes_put(b, s, n, d);
}

static fvm_status put_value(fvm_bytes *b, const fvm_value *v, fvm_diag *d)
{
    if (!v)
        return put_u8(b, TAG_NONE, d);
    fvm_status s;
    if (v->kind == FVM_V_SEQ && v->cols)
        return (s = put_u8(b, TAG_SEQ_COLS, d)) || (s = put_i64(b, v->n, d)) ? s : put_value(b, v->cols, d);
    switch (v->kind) {
    case FVM_V_TENSOR:
        if ((s = put_u8(b, TAG_TENSOR, d)) || (s = put_u8(b, v->t.dtype, d)) ||
            (s = put_u8(b, (unsigned)v->t.shape.rank, d)))
            return s;
        for (int i = 0; i < v->t.shape.rank; i++)
            if ((s = put_i64(b, v->t.shape.d[i], d)))
                return s;
        return fvm_bytes_put(b, fvm_tensor_data(&v->t), fvm_tensor_bytes(&v->t), d);
    case FVM_V_SEQ: /* a list of elements */
    case FVM_V_STRUCT:
    case FVM_V_CLIENTS:
        if ((s = put_u8(b,
                        v->kind == FVM_V_SEQ      ? TAG_SEQ_LIST
                        : v->kind == FVM_V_STRUCT ? TAG_STRUCT
                                                  : TAG_CLIENTS,
                        d)) ||
            (s = put_i64(b, v->n, d)))
            return s;
        for (int64_t i = 0; i < v->n; i++) {
            if (v->src) { /* a member read on demand */
                fvm_value *m = NULL;
                if ((s = fvm_clients_get(v, i, &m, d)) == FVM_OK)
                    s = put_value(b, m, d);
                fvm_value_release(m);
            } else {
                s = put_value(b, v->items[i], d);
            }
            if (s)
                return s;
        }
        return FVM_OK;
    }
    return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a value of unknown kind %d", (int)v->kind);
}

fvm_status fvm_wire_put_value(fvm_bytes *b, const fvm_value *v, fvm_diag *d)
{
    return put_value(b, v, d);
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct reader {
    const unsigned char *p;
    size_t len, at;
    fvm_diag *d;
} reader;

static fvm_status bad(reader *r, const char *what)
{
    return fvm_diag_add(r->d, FVM_ERR_FORMAT, NULL, "value bytes: %s at byte %zu of %zu", what, r->at, r->len);
}

static fvm_status get(reader *r, void *dst, size_t n)
{
    if (n > r->len - r->at)
        return bad(r, "truncated");
    if (n)
        memcpy(dst, r->p + r->at, n);
    r->at += n;
    return FVM_OK;
}

/* A count of items that each take at least one more byte. */
static fvm_status get_count(reader *r, int64_t *n)
{
    fvm_status s = get(r, n, sizeof *n);
    if (s == FVM_OK && (*n < 0 || (uint64_t)*n > r->len - r->at))
        return bad(r, "a count larger than the bytes left");
    return s;
}

/* Can c hold the columns of a sequence of n elements? A tensor, or a struct
 * (of structs) of tensors, every one with a leading axis of n: what row i of
 * them all, the element, reads (fvm_seq_get). */
static bool columns_of(const fvm_value *c, int64_t n)
{
    if (!c)
        return false;
    if (c->kind == FVM_V_TENSOR)
        return c->t.shape.rank >= 1 && c->t.shape.d[0] == n;
    if (c->kind != FVM_V_STRUCT)
        return false;
    for (int64_t i = 0; i < c->n; i++)
        if (!columns_of(c->items[i], n))
            return false;
    return true;
}

static fvm_status get_value(reader *r, int depth, fvm_value **out)
{
    *out = NULL;
    unsigned char tag;
    fvm_status s = get(r, &tag, 1);
    if (s)
        return s;
    if (depth > FVM_MAX_DEPTH)
        return bad(r, "values nested too deeply");
    if (tag == TAG_NONE)
        return FVM_OK;
    if (tag == TAG_TENSOR) {
        unsigned char dt, rank;
        if ((s = get(r, &dt, 1)) || (s = get(r, &rank, 1)))
            return s;
        if (dt >= FVM_DTYPE_COUNT || rank > FVM_MAX_RANK)
            return bad(r, "a tensor of unknown dtype or rank");
        fvm_dims shape = {.rank = rank};
        for (int i = 0; i < rank; i++) {
            if ((s = get(r, &shape.d[i], sizeof shape.d[i])))
                return s;
            if (shape.d[i] < 0)
                return bad(r, "a negative dimension");
        }
        if (fvm_dims_check_size(&shape, (fvm_dtype)dt, r->d))
            return bad(r, "a tensor too large");
        size_t bytes = (size_t)fvm_dims_count(&shape) * fvm_dtype_size((fvm_dtype)dt);
        if (bytes > r->len - r->at)
            return bad(r, "truncated tensor data");
        if (dt == FVM_DTYPE_BOOL)
            for (size_t i = 0; i < bytes; i++)
                if (r->p[r->at + i] > 1)
                    return bad(r, "a bool that is neither 0 nor 1");
        fvm_tensor t;
        if ((s = fvm_tensor_alloc(&t, (fvm_dtype)dt, &shape, r->d)))
            return s;
        get(r, fvm_tensor_data(&t), bytes);
        if (!(*out = fvm_value_tensor_take(&t))) {
            fvm_tensor_release(&t);
            return fvm_diag_add(r->d, FVM_ERR_NOMEM, NULL, "out of memory");
        }
        return FVM_OK;
    }
    if (tag >= TAG_COUNT)
        return bad(r, "an unknown value tag");
    int64_t n = 0;
    if (tag == TAG_SEQ_COLS) {
        /* n rows of columns that may hold no bytes (a leading axis of n
         * beside a zero dim): n is bounded by the columns, not the bytes */
        if ((s = get(r, &n, sizeof n)))
            return s;
        if (n < 0)
            return bad(r, "a negative sequence length");
        fvm_value *cols = NULL;
        if ((s = get_value(r, depth + 1, &cols)))
            return s;
        if (!columns_of(cols, n)) {
            fvm_value_release(cols);
            return bad(r, "sequence columns that are not tensors with a leading axis of the sequence's length");
        }
        if (!(*out = fvm_value_seq_cols_take(n, cols))) {
            fvm_value_release(cols);
            return fvm_diag_add(r->d, FVM_ERR_NOMEM, NULL, "out of memory");
        }
        return FVM_OK;
    }
    if ((s = get_count(r, &n)))
        return s;
    fvm_value *v = fvm_value_list(tag == TAG_STRUCT     ? FVM_V_STRUCT
                                  : tag == TAG_SEQ_LIST ? FVM_V_SEQ
                                                        : FVM_V_CLIENTS,
                                  n);
    if (!v)
        return fvm_diag_add(r->d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (int64_t i = 0; i < n && s == FVM_OK; i++)
        s = get_value(r, depth + 1, &v->items[i]);
    if (s) {
        fvm_value_release(v);
        return s;
    }
    *out = v;
    return FVM_OK;
}

fvm_status fvm_wire_get_value(const unsigned char *p, size_t len, size_t *at, fvm_value **out, fvm_diag *d)
{
    reader r = {p, len, *at, d};
    if (r.at > len)
        return bad(&r, "a start past the end");
    fvm_status s = get_value(&r, 0, out);
    if (s == FVM_OK)
        *at = r.at;
    return s;
}

/* ---- diagnostics ------------------------------------------------------------ */

fvm_status fvm_wire_put_diag(fvm_bytes *b, const fvm_diag *src, fvm_diag *d)
{
    fvm_status s;
    if ((s = put_i32(b, src->n, d)) || (s = put_i32(b, src->dropped, d)))
        return s;
    for (int i = 0; i < src->n; i++) {
        const fvm_error *e = &src->errs[i];
        if ((s = put_u8(b, e->code, d)) || (s = put_i32(b, e->loc.line, d)) || (s = put_i32(b, e->loc.col, d)) ||
            (s = put_str(b, e->loc.file, d)) || (s = put_str(b, e->loc.ptr, d)) || (s = put_str(b, e->msg, d)))
            return s;
    }
    return FVM_OK;
}

/* A string of the bytes (malloc'd into *out; NULL for none). */
static fvm_status get_str(reader *r, char **out)
{
    *out = NULL;
    uint32_t n = 0;
    fvm_status s = get(r, &n, sizeof n);
    if (s || n == NO_STRING)
        return s;
    if (n > r->len - r->at)
        return bad(r, "truncated text");
    if (!(*out = malloc((size_t)n + 1)))
        return fvm_diag_add(r->d, FVM_ERR_NOMEM, NULL, "out of memory");
    get(r, *out, n);
    (*out)[n] = 0;
    return FVM_OK;
}

fvm_status fvm_wire_get_diag(const unsigned char *p, size_t len, size_t *at, fvm_diag *into, fvm_diag *d)
{
    /* Read whole before anything is appended: into may be d. */
    fvm_diag got = {0};
    reader r = {p, len, *at, d};
    int32_t n = 0, dropped = 0;
    fvm_status s = r.at > len ? bad(&r, "a start past the end") : FVM_OK;
    if (s == FVM_OK && !(s = get(&r, &n, sizeof n)) && !(s = get(&r, &dropped, sizeof dropped)) &&
        (n < 0 || dropped < 0 || (uint64_t)n > r.len - r.at))
        s = bad(&r, "a bad error count");
    for (int32_t i = 0; s == FVM_OK && i < n; i++) {
        unsigned char code = 0;
        int32_t line = 0, col = 0;
        char *file = NULL, *ptr = NULL, *msg = NULL;
        if (!(s = get(&r, &code, 1)) && !(s = get(&r, &line, sizeof line)) && !(s = get(&r, &col, sizeof col)) &&
            !(s = get_str(&r, &file)) && !(s = get_str(&r, &ptr)) && !(s = get_str(&r, &msg))) {
            if (code == FVM_OK || code >= FVM_STATUS_COUNT)
                s = bad(&r, "an unknown error code");
            else {
                fvm_loc loc = {file, line, col, ptr};
                fvm_diag_add(&got, (fvm_status)code, &loc, "%s", msg ? msg : "");
            }
        }
        free(file);
        free(ptr);
        free(msg);
    }
    if (s == FVM_OK) {
        got.dropped = dropped;
        fvm_diag_append(into, &got);
        *at = r.at;
    }
    fvm_diag_clear(&got);
    return s;
}
