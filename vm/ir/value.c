/* value.c - runtime values: construction, refcounting, sequence element access, identity. */
#include "value.h"

#include <stdlib.h>
#include <string.h>

static fvm_value *new_value(fvm_vkind kind)
{
    fvm_value *v = calloc(1, sizeof *v);
    if (v) {
        v->refs = 1;
        v->kind = kind;
    }
    return v;
}

fvm_value *fvm_value_tensor_take(fvm_tensor *t)
{
    fvm_value *v = new_value(FVM_V_TENSOR);
    if (!v)
        return NULL;
    v->t = *t;
    memset(t, 0, sizeof *t);
    return v;
}

fvm_value *fvm_value_list(fvm_vkind kind, int64_t n)
{
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(fvm_value *))
        return NULL;
    fvm_value *v = new_value(kind);
    if (!v)
        return NULL;
    v->n = n;
    v->items = calloc((size_t)(n ? n : 1), sizeof *v->items);
    if (!v->items) {
        free(v);
        return NULL;
    }
    return v;
}

fvm_value *fvm_value_seq_cols_take(int64_t n, fvm_value *cols)
{
    fvm_value *v = new_value(FVM_V_SEQ);
    if (!v)
        return NULL;
    v->n = n;
    v->cols = cols;
    return v;
}

fvm_value *fvm_value_clients_source_take(int64_t n, fvm_source *src)
{
    fvm_value *v = new_value(FVM_V_CLIENTS);
    if (!v)
        return NULL;
    v->n = n;
    v->src = src;
    return v;
}

fvm_status fvm_clients_get(const fvm_value *v, int64_t i, fvm_value **out, fvm_diag *d)
{
    if (i < 0 || i >= v->n)
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "client %lld out of range [0, %lld)", (long long)i,
                            (long long)v->n);
    if (v->src)
        return v->src->iface->get(v->src, i, out, d);
    *out = fvm_value_retain(v->items[i]);
    return FVM_OK;
}

/* Members picked from a value read on demand: member j is member idx[j] of v. */
typedef struct pick_source {
    fvm_source base;
    fvm_value *v; /* owned reference */
    int64_t *idx;
} pick_source;

static fvm_status pick_get(fvm_source *src, int64_t j, fvm_value **out, fvm_diag *d)
{
    pick_source *p = (pick_source *)src;
    return fvm_clients_get(p->v, p->idx[j], out, d);
}

static void pick_free(fvm_source *src)
{
    pick_source *p = (pick_source *)src;
    fvm_value_release(p->v);
    free(p->idx);
    free(p);
}

static const struct fvm_source_i pick_iface = {.get = pick_get, .free = pick_free};

fvm_status fvm_clients_pick(fvm_value *v, const int64_t *idx, int64_t k, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    for (int64_t j = 0; j < k; j++)
        if (idx[j] < 0 || idx[j] >= v->n)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "client %lld out of range [0, %lld)", (long long)idx[j],
                                (long long)v->n);
    if (!v->src) {
        fvm_value *l = fvm_value_list(FVM_V_CLIENTS, k);
        if (!l)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        for (int64_t j = 0; j < k; j++)
            l->items[j] = fvm_value_retain(v->items[idx[j]]);
        *out = l;
        return FVM_OK;
    }
    pick_source *p = calloc(1, sizeof *p);
    if (p) {
        p->base.iface = &pick_iface;
        p->idx = malloc((size_t)(k ? k : 1) * sizeof *p->idx);
    }
    if (!p || !p->idx || !(*out = fvm_value_clients_source_take(k, &p->base))) {
        if (p)
            free(p->idx);
        free(p);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    p->v = fvm_value_retain(v);
    memcpy(p->idx, idx, (size_t)k * sizeof *idx);
    return FVM_OK;
}

fvm_value *fvm_value_retain(fvm_value *v)
{
    if (v)
        __atomic_fetch_add(&v->refs, 1, __ATOMIC_RELAXED);
    return v;
}

void fvm_value_release(fvm_value *v)
{
    if (!v || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (v->kind == FVM_V_TENSOR)
        fvm_tensor_release(&v->t);
    if (v->items) {
        for (int64_t i = 0; i < v->n; i++)
            fvm_value_release(v->items[i]);
        free(v->items);
    }
    fvm_value_release(v->cols);
    if (v->src)
        v->src->iface->free(v->src);
    free(v);
}

void fvm_values_free(fvm_value **values, int n)
{
    if (!values)
        return;
    for (int i = 0; i < n; i++)
        fvm_value_release(values[i]);
    free(values);
}

/* Rows [lo, hi) of every leaf, or row lo without the leading axis when
 * squeeze is set. */
static fvm_status rows(const fvm_value *c, int64_t lo, int64_t hi, bool squeeze, fvm_value **out, fvm_diag *d)
{
    if (c->kind == FVM_V_TENSOR) {
        const fvm_tensor *t = &c->t;
        fvm_tensor r = {.dtype = t->dtype, .buf = t->buf};
        int64_t row = 1;
        for (int i = 1; i < t->shape.rank; i++)
            row *= t->shape.d[i];
        r.offset = t->offset + (size_t)(lo * row) * fvm_dtype_size(t->dtype);
        if (squeeze) {
            r.shape.rank = t->shape.rank - 1;
            memcpy(r.shape.d, t->shape.d + 1, sizeof(int64_t) * (size_t)r.shape.rank);
        } else {
            r.shape = t->shape;
            r.shape.d[0] = hi - lo;
        }
        if (fvm_tensor_count(&r) == 0) {
            r.buf = NULL;
            r.offset = 0;
        }
        fvm_tensor_retain(&r);
        *out = fvm_value_tensor_take(&r);
        if (!*out) {
            fvm_tensor_release(&r);
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        }
        return FVM_OK;
    }
    fvm_value *s = fvm_value_list(FVM_V_STRUCT, c->n);
    if (!s)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (int64_t i = 0; i < c->n; i++) {
        fvm_status st = rows(c->items[i], lo, hi, squeeze, &s->items[i], d);
        if (st) {
            fvm_value_release(s);
            return st;
        }
    }
    *out = s;
    return FVM_OK;
}

fvm_status fvm_seq_get(const fvm_value *seq, int64_t i, fvm_value **out, fvm_diag *d)
{
    if (i < 0 || i >= seq->n)
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "sequence index %lld out of range [0, %lld)", (long long)i,
                            (long long)seq->n);
    if (seq->items) {
        *out = fvm_value_retain(seq->items[i]);
        return FVM_OK;
    }
    return rows(seq->cols, i, i + 1, true, out, d);
}

fvm_status fvm_value_rows(const fvm_value *cols, int64_t lo, int64_t hi, fvm_value **out, fvm_diag *d)
{
    return rows(cols, lo, hi, false, out, d);
}

bool fvm_value_identical(const fvm_value *a, const fvm_value *b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    if (a->kind == FVM_V_SEQ && b->kind == FVM_V_SEQ) {
        if (a->n != b->n)
            return false;
        /* rows of identical columns are identical, in time of the columns'
         * bytes (n rows of nothing, columns [n, 0], take no time) */
        if (a->cols && b->cols)
            return fvm_value_identical(a->cols, b->cols);
        for (int64_t i = 0; i < a->n; i++) {
            fvm_value *x = NULL, *y = NULL;
            bool same = fvm_seq_get(a, i, &x, NULL) == FVM_OK && fvm_seq_get(b, i, &y, NULL) == FVM_OK &&
                        fvm_value_identical(x, y);
            fvm_value_release(x);
            fvm_value_release(y);
            if (!same)
                return false;
        }
        return true;
    }
    if (a->kind != b->kind || a->n != b->n)
        return false;
    if (a->kind == FVM_V_TENSOR)
        return fvm_tensor_identical(&a->t, &b->t);
    for (int64_t i = 0; i < a->n; i++) {
        fvm_value *x = NULL, *y = NULL;
        bool same = a->kind == FVM_V_CLIENTS
                        ? fvm_clients_get(a, i, &x, NULL) == FVM_OK && fvm_clients_get(b, i, &y, NULL) == FVM_OK &&
                              fvm_value_identical(x, y)
                        : fvm_value_identical(a->items[i], b->items[i]);
        fvm_value_release(x);
        fvm_value_release(y);
        if (!same)
            return false;
    }
    return true;
}
