/* value_doc.c - document trees <-> runtime values: tensors from nested arrays, structs, sequences,
 * client lists; results back to documents. */
#include "value_doc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/ir/types.h"

typedef struct conv {
    const char *file;
    fvm_diag *d;
    fvm_arena scratch; /* pointers built while descending */
} conv;

static fvm_status verr(conv *c, const fvm_doc *n, const char *ptr, fvm_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static fvm_status verr(conv *c, const fvm_doc *n, const char *ptr, fvm_status code, const char *fmt, ...)
{
    fvm_loc l = {.file = c->file, .line = n ? n->line : 0, .col = n ? n->col : 0, .ptr = ptr};
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(c->d, code, &l, fmt, ap);
    va_end(ap);
    return code;
}

static bool special_float(const fvm_doc *n, double *v)
{
    if (n->kind != FVM_DOC_STRING)
        return false;
    if (!strcmp(n->u.str.s, "nan"))
        *v = NAN;
    else if (!strcmp(n->u.str.s, "inf"))
        *v = INFINITY;
    else if (!strcmp(n->u.str.s, "-inf"))
        *v = -INFINITY;
    else
        return false;
    return true;
}

/* ---- tensors ------------------------------------------------------------------ */

/* Shape from the first element at each depth; the fill pass checks the rest. */
static fvm_status infer_shape(conv *c, const fvm_doc *v, const char *ptr, fvm_dims *dims)
{
    dims->rank = 0;
    const fvm_doc *n = v;
    while (n->kind == FVM_DOC_ARRAY) {
        if (dims->rank == FVM_MAX_RANK)
            return verr(c, n, ptr, FVM_ERR_LIMIT, "arrays nested deeper than the maximum rank %d", FVM_MAX_RANK);
        dims->d[dims->rank++] = (int64_t)n->u.coll.n;
        if (n->u.coll.n == 0)
            break;
        n = n->u.coll.items[0];
    }
    return FVM_OK;
}

enum { SAW_INT = 1, SAW_REAL = 2, SAW_BOOL = 4 };

static fvm_status scan_kinds(conv *c, const fvm_doc *v, const char *ptr, int depth, int *saw)
{
    double tmp;
    if (depth > FVM_MAX_RANK)
        return verr(c, v, ptr, FVM_ERR_LIMIT, "arrays nested deeper than the maximum rank %d", FVM_MAX_RANK);
    switch (v->kind) {
    case FVM_DOC_ARRAY:
        for (size_t i = 0; i < v->u.coll.n; i++) {
            fvm_status s = scan_kinds(c, v->u.coll.items[i], ptr, depth + 1, saw);
            if (s)
                return s;
        }
        return FVM_OK;
    case FVM_DOC_INT:
        *saw |= SAW_INT;
        return FVM_OK;
    case FVM_DOC_REAL:
        *saw |= SAW_REAL;
        return FVM_OK;
    case FVM_DOC_BOOL:
        *saw |= SAW_BOOL;
        return FVM_OK;
    default:
        if (special_float(v, &tmp)) {
            *saw |= SAW_REAL;
            return FVM_OK;
        }
        return verr(c, v, ptr, FVM_ERR_TYPE, "expected a number, a boolean or an array of them");
    }
}

static fvm_status put_scalar(conv *c, const fvm_doc *n, const char *ptr, fvm_tensor *t, int64_t i)
{
    fvm_dtype dt = t->dtype;
    double r;
    if (dt == FVM_DTYPE_BOOL) {
        if (n->kind != FVM_DOC_BOOL)
            return verr(c, n, ptr, FVM_ERR_TYPE, "expected true or false for dtype bool");
        ((uint8_t *)fvm_tensor_data(t))[i] = n->u.b;
        return FVM_OK;
    }
    if (fvm_dtype_is_float(dt)) {
        if (n->kind == FVM_DOC_INT)
            r = (double)n->u.i;
        else if (n->kind == FVM_DOC_REAL)
            r = n->u.r;
        else if (!special_float(n, &r))
            return verr(c, n, ptr, FVM_ERR_TYPE, "expected a number for dtype %s", fvm_dtype_name(dt));
        fvm_tensor_set_f64(t, i, r);
        return FVM_OK;
    }
    int64_t v = 0; /* 3 or 3.0, as JSON Schema counts integers */
    if (!fvm_doc_integer(n, &v))
        return verr(c, n, ptr, FVM_ERR_TYPE, "expected an integer for dtype %s", fvm_dtype_name(dt));
    bool fits = dt == FVM_DTYPE_I64 || (dt == FVM_DTYPE_I32 && v >= INT32_MIN && v <= INT32_MAX) ||
                (dt == FVM_DTYPE_U32 && v >= 0 && v <= (int64_t)UINT32_MAX) ||
                (dt == FVM_DTYPE_U8 && v >= 0 && v <= UINT8_MAX);
    if (!fits)
        return verr(c, n, ptr, FVM_ERR_TYPE, "%lld does not fit in %s", (long long)v, fvm_dtype_name(dt));
    fvm_tensor_set_i64(t, i, v);
    return FVM_OK;
}

static fvm_status fill(conv *c, const fvm_doc *v, const char *ptr, const fvm_dims *dims, int depth, fvm_tensor *t,
                       int64_t *pos)
{
    if (depth == dims->rank) {
        if (v->kind == FVM_DOC_ARRAY)
            return verr(c, v, ptr, FVM_ERR_TYPE, "ragged array: expected a scalar at depth %d", depth);
        return put_scalar(c, v, ptr, t, (*pos)++);
    }
    if (v->kind != FVM_DOC_ARRAY || (int64_t)v->u.coll.n != dims->d[depth])
        return verr(c, v, ptr, FVM_ERR_TYPE, "ragged array: expected an array of %lld elements at depth %d",
                    (long long)dims->d[depth], depth);
    for (size_t i = 0; i < v->u.coll.n; i++) {
        fvm_status s = fill(c, v->u.coll.items[i], fvm_pointer_index(&c->scratch, ptr, i), dims, depth + 1, t, pos);
        if (s)
            return s;
    }
    return FVM_OK;
}

static fvm_status tensor_from(conv *c, const fvm_doc *v, const char *ptr, bool has_dtype, fvm_dtype dtype,
                              const fvm_ints *shape, fvm_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!v)
        return verr(c, NULL, ptr, FVM_ERR_TYPE, "missing value");
    int saw = 0;
    fvm_status s = scan_kinds(c, v, ptr, 0, &saw);
    if (s)
        return s;
    if (!has_dtype) {
        if ((saw & SAW_BOOL) && (saw & (SAW_INT | SAW_REAL)))
            return verr(c, v, ptr, FVM_ERR_TYPE, "mixes booleans and numbers");
        dtype = (saw & SAW_REAL) ? FVM_DTYPE_F32 : (saw & SAW_BOOL) ? FVM_DTYPE_BOOL : FVM_DTYPE_I32;
    }
    fvm_dims dims;
    if ((s = infer_shape(c, v, ptr, &dims)))
        return s;
    bool broadcast = false;
    if (shape) {
        fvm_dims want = {.rank = shape->n};
        for (int i = 0; i < shape->n; i++) {
            if (shape->v[i] < 0)
                return verr(c, v, ptr, FVM_ERR_TYPE, "shape dimensions must be >= 0");
            want.d[i] = shape->v[i];
        }
        if (dims.rank == 0) {
            broadcast = true;
        } else if (!fvm_dims_equal(&dims, &want)) {
            char a[FVM_DIMS_STR], b[FVM_DIMS_STR];
            fvm_dims_format(&dims, a);
            fvm_dims_format(&want, b);
            return verr(c, v, ptr, FVM_ERR_TYPE, "the value has shape %s but shape says %s", a, b);
        }
        dims = want;
    }
    fvm_diag tmp = {0};
    if (fvm_dims_check_size(&dims, dtype, &tmp)) {
        s = verr(c, v, ptr, FVM_ERR_LIMIT, "%s", tmp.n ? tmp.errs[0].msg : "tensor too large");
        fvm_diag_clear(&tmp);
        return s;
    }
    int64_t pos = 0;
    if (broadcast) {
        /* Convert the scalar once (checked even when the shape is empty), then fill. */
        fvm_dims none = {0};
        fvm_tensor one;
        if ((s = fvm_tensor_alloc(&one, dtype, &none, c->d)))
            return s;
        if ((s = put_scalar(c, v, ptr, &one, 0)) || (s = fvm_tensor_alloc(out, dtype, &dims, c->d))) {
            fvm_tensor_release(&one);
            return s;
        }
        int64_t n = fvm_tensor_count(out);
        size_t es = fvm_dtype_size(dtype);
        unsigned char *p = fvm_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            memcpy(p + (size_t)i * es, fvm_tensor_data(&one), es);
        fvm_tensor_release(&one);
        return FVM_OK;
    }
    if ((s = fvm_tensor_alloc(out, dtype, &dims, c->d)))
        return s;
    if ((s = fill(c, v, ptr, &dims, 0, out, &pos)))
        fvm_tensor_release(out);
    return s;
}

fvm_status fvm_tensor_from_doc(const fvm_doc *v, bool has_dtype, fvm_dtype dtype, const fvm_ints *shape,
                               const char *file, const char *ptr, fvm_tensor *out, fvm_diag *d)
{
    conv c = {.file = file, .d = d};
    fvm_status s = tensor_from(&c, v, ptr ? ptr : "", has_dtype, dtype, shape, out);
    fvm_arena_free(&c.scratch);
    return s;
}

/* ---- values --------------------------------------------------------------------- */

static fvm_status value_from(conv *c, const fvm_doc *v, const fvm_type *t, const char *ptr, int64_t *nclients,
                             int depth, fvm_value **out);

static const char *type_text(conv *c, const fvm_type *t)
{
    const char *s = fvm_type_str(&c->scratch, t, true);
    return s ? s : "?";
}

static fvm_status tensor_value(conv *c, const fvm_doc *v, const fvm_type *t, const char *ptr, fvm_value **out)
{
    fvm_tensor x;
    fvm_status s;
    const fvm_dims *td = &t->u.tensor.dims;
    if (v->kind == FVM_DOC_ARRAY && v->u.coll.n == 0 && td->rank > 1) {
        /* [] for a tensor with more axes: an empty first axis, the rest from the type. */
        fvm_dims dims = *td;
        dims.d[0] = 0;
        for (int i = 1; i < dims.rank; i++)
            if (dims.d[i] < 0)
                dims.d[i] = 0;
        s = fvm_tensor_alloc(&x, t->u.tensor.dtype, &dims, c->d);
    } else {
        s = tensor_from(c, v, ptr, true, t->u.tensor.dtype, NULL, &x);
    }
    if (s)
        return s;
    bool ok = x.shape.rank == t->u.tensor.dims.rank;
    for (int i = 0; ok && i < x.shape.rank; i++)
        ok = t->u.tensor.dims.d[i] < 0 || t->u.tensor.dims.d[i] == x.shape.d[i];
    if (!ok) {
        char a[FVM_DIMS_STR];
        fvm_dims_format(&x.shape, a);
        fvm_tensor_release(&x);
        return verr(c, v, ptr, FVM_ERR_TYPE, "expected %s, found a tensor of shape %s", type_text(c, t), a);
    }
    if (!(*out = fvm_value_tensor_take(&x))) {
        fvm_tensor_release(&x);
        return fvm_diag_add(c->d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

static fvm_status list_value(conv *c, const fvm_doc *v, const fvm_type *elem, fvm_vkind kind, const char *ptr,
                             int64_t *nclients, int depth, fvm_value **out)
{
    fvm_value *l = fvm_value_list(kind, (int64_t)v->u.coll.n);
    if (!l)
        return fvm_diag_add(c->d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; i < v->u.coll.n; i++) {
        fvm_status s = value_from(c, v->u.coll.items[i], elem, fvm_pointer_index(&c->scratch, ptr, i), nclients,
                                  depth + 1, &l->items[i]);
        if (s) {
            fvm_value_release(l);
            return s;
        }
    }
    *out = l;
    return FVM_OK;
}

static fvm_status value_from(conv *c, const fvm_doc *v, const fvm_type *t, const char *ptr, int64_t *nclients,
                             int depth, fvm_value **out)
{
    if (depth > FVM_MAX_DEPTH)
        return verr(c, v, ptr, FVM_ERR_LIMIT, "value nested too deeply");
    switch (t->kind) {
    case FVM_T_TENSOR:
        return tensor_value(c, v, t, ptr, out);
    case FVM_T_STRUCT: {
        int n = t->u.strct.n;
        bool named = n > 0;
        for (int i = 0; i < n; i++)
            named = named && t->u.strct.names[i];
        if (v->kind == FVM_DOC_ARRAY) {
            if ((int)v->u.coll.n != n)
                return verr(c, v, ptr, FVM_ERR_TYPE, "expected %s: %d elements, found %zu", type_text(c, t), n,
                            v->u.coll.n);
        } else if (v->kind != FVM_DOC_OBJECT || !named) {
            return verr(c, v, ptr, FVM_ERR_TYPE, "expected %s as %s", type_text(c, t),
                        named ? "an object (by field name) or an array" : "an array");
        } else {
            for (size_t k = 0; k < v->u.coll.n; k++)
                if (fvm_type_field_index(t, v->u.coll.keys[k]->u.str.s) < 0)
                    return verr(c, v->u.coll.keys[k], fvm_pointer_join(&c->scratch, ptr, v->u.coll.keys[k]->u.str.s),
                                FVM_ERR_TYPE, "%s has no field '%s'", type_text(c, t), v->u.coll.keys[k]->u.str.s);
        }
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, n);
        if (!s)
            return fvm_diag_add(c->d, FVM_ERR_NOMEM, NULL, "out of memory");
        for (int i = 0; i < n; i++) {
            const fvm_doc *item = v->kind == FVM_DOC_ARRAY ? v->u.coll.items[i] : fvm_doc_get(v, t->u.strct.names[i]);
            const char *pi = v->kind == FVM_DOC_ARRAY ? fvm_pointer_index(&c->scratch, ptr, (size_t)i)
                                                      : fvm_pointer_join(&c->scratch, ptr, t->u.strct.names[i]);
            fvm_status st =
                item ? value_from(c, item, t->u.strct.elems[i], pi, nclients, depth + 1, &s->items[i])
                     : verr(c, v, ptr, FVM_ERR_TYPE, "missing field '%s' of %s", t->u.strct.names[i], type_text(c, t));
            if (st) {
                fvm_value_release(s);
                return st;
            }
        }
        *out = s;
        return FVM_OK;
    }
    case FVM_T_SEQ:
        if (v->kind != FVM_DOC_ARRAY)
            return verr(c, v, ptr, FVM_ERR_TYPE, "expected %s as an array of elements", type_text(c, t));
        return list_value(c, v, t->u.seq.elem, FVM_V_SEQ, ptr, nclients, depth, out);
    case FVM_T_FED:
        if (t->u.fed.all_equal)
            return value_from(c, v, t->u.fed.member, ptr, nclients, depth + 1, out);
        if (v->kind != FVM_DOC_ARRAY)
            return verr(c, v, ptr, FVM_ERR_TYPE, "expected %s as an array with one member per client", type_text(c, t));
        if (v->u.coll.n > FVM_MAX_CLIENTS)
            return verr(c, v, ptr, FVM_ERR_LIMIT, "more than %d clients", FVM_MAX_CLIENTS);
        if (*nclients >= 0 && (int64_t)v->u.coll.n != *nclients)
            return verr(c, v, ptr, FVM_ERR_TYPE,
                        "has %zu clients, but the run has %lld (set by --clients or "
                        "by other client data)",
                        v->u.coll.n, (long long)*nclients);
        *nclients = (int64_t)v->u.coll.n;
        return list_value(c, v, t->u.fed.member, FVM_V_CLIENTS, ptr, nclients, depth, out);
    case FVM_T_FN:
        break;
    }
    return verr(c, v, ptr, FVM_ERR_TYPE, "values of function type cannot be given");
}

fvm_status fvm_value_from_doc(const fvm_doc *v, const fvm_type *t, const char *file, const char *ptr, int64_t *nclients,
                              fvm_value **out, fvm_diag *d)
{
    conv c = {.file = file, .d = d};
    int64_t n = *nclients;
    *out = NULL;
    fvm_status s = value_from(&c, v, t, ptr ? ptr : "", &n, 0, out);
    fvm_arena_free(&c.scratch);
    if (s == FVM_OK)
        *nclients = n;
    return s;
}

/* ---- results ------------------------------------------------------------------------ */

static fvm_doc *scalar_doc(fvm_arena *a, const fvm_tensor *t, int64_t i)
{
    char buf[32];
    switch (t->dtype) {
    case FVM_DTYPE_BOOL:
        return fvm_doc_bool(a, fvm_tensor_get_i64(t, i) != 0);
    case FVM_DTYPE_F32:
        /* The double nearest the shortest decimal that reads back as this float. */
        fvm_format_real(buf, fvm_tensor_get_f64(t, i), true);
        return fvm_doc_real(a, isfinite(fvm_tensor_get_f64(t, i)) ? strtod(buf, NULL) : fvm_tensor_get_f64(t, i));
    case FVM_DTYPE_F64:
        return fvm_doc_real(a, fvm_tensor_get_f64(t, i));
    default:
        return fvm_doc_int(a, fvm_tensor_get_i64(t, i));
    }
}

static fvm_doc *tensor_doc(fvm_arena *a, const fvm_tensor *t, int depth, int64_t *pos)
{
    if (depth == t->shape.rank)
        return scalar_doc(a, t, (*pos)++);
    fvm_doc *arr = fvm_doc_new(a, FVM_DOC_ARRAY);
    if (!arr)
        return NULL;
    arr->flow = depth == t->shape.rank - 1;
    for (int64_t i = 0; i < t->shape.d[depth]; i++)
        if (fvm_doc_push(a, arr, tensor_doc(a, t, depth + 1, pos)))
            return NULL;
    return arr;
}

fvm_doc *fvm_value_to_doc(fvm_arena *a, const fvm_value *v, const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_TENSOR: {
        int64_t pos = 0;
        return tensor_doc(a, &v->t, 0, &pos);
    }
    case FVM_T_STRUCT: {
        bool named = t->u.strct.n > 0;
        for (int i = 0; i < t->u.strct.n; i++)
            named = named && t->u.strct.names[i];
        fvm_doc *o = fvm_doc_new(a, named ? FVM_DOC_OBJECT : FVM_DOC_ARRAY);
        if (!o)
            return NULL;
        for (int i = 0; i < t->u.strct.n; i++) {
            fvm_doc *item = fvm_value_to_doc(a, v->items[i], t->u.strct.elems[i]);
            if (named ? fvm_doc_set(a, o, t->u.strct.names[i], item) : fvm_doc_push(a, o, item))
                return NULL;
        }
        return o;
    }
    case FVM_T_SEQ: {
        fvm_doc *arr = fvm_doc_new(a, FVM_DOC_ARRAY);
        if (!arr)
            return NULL;
        for (int64_t i = 0; i < v->n; i++) {
            fvm_value *e = NULL;
            if (fvm_seq_get(v, i, &e, NULL))
                return NULL;
            fvm_doc *item = fvm_value_to_doc(a, e, t->u.seq.elem);
            fvm_value_release(e);
            if (fvm_doc_push(a, arr, item))
                return NULL;
        }
        return arr;
    }
    case FVM_T_FED: {
        if (t->u.fed.all_equal)
            return fvm_value_to_doc(a, v, t->u.fed.member);
        fvm_doc *arr = fvm_doc_new(a, FVM_DOC_ARRAY);
        if (!arr)
            return NULL;
        for (int64_t i = 0; i < v->n; i++) {
            fvm_value *m = NULL;
            if (fvm_clients_get(v, i, &m, NULL))
                return NULL;
            fvm_doc *item = fvm_value_to_doc(a, m, t->u.fed.member);
            fvm_value_release(m);
            if (fvm_doc_push(a, arr, item))
                return NULL;
        }
        return arr;
    }
    case FVM_T_FN:
        break;
    }
    return NULL;
}
