/* tensor.c - dtypes, shape helpers and refcounted tensor buffers. */
#include "tensor.h"
#include "bufcache.h"
#include "saturate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes -------------------------------------------------------------- */

static const char *const dtype_names[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_BOOL] = "bool", [FVM_DTYPE_I32] = "i32", [FVM_DTYPE_I64] = "i64", [FVM_DTYPE_U32] = "u32",
    [FVM_DTYPE_U8] = "u8",     [FVM_DTYPE_F32] = "f32", [FVM_DTYPE_F64] = "f64",
};

static const unsigned char dtype_sizes[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_BOOL] = 1, [FVM_DTYPE_I32] = 4, [FVM_DTYPE_I64] = 8, [FVM_DTYPE_U32] = 4,
    [FVM_DTYPE_U8] = 1,   [FVM_DTYPE_F32] = 4, [FVM_DTYPE_F64] = 8,
};

const char *fvm_dtype_name(fvm_dtype t)
{
    return (unsigned)t < FVM_DTYPE_COUNT ? dtype_names[t] : "?";
}

bool fvm_dtype_parse(const char *s, size_t len, fvm_dtype *out)
{
    for (int t = 0; t < FVM_DTYPE_COUNT; t++) {
        if (strlen(dtype_names[t]) == len && memcmp(dtype_names[t], s, len) == 0) {
            *out = (fvm_dtype)t;
            return true;
        }
    }
    return false;
}

size_t fvm_dtype_size(fvm_dtype t)
{
    return (unsigned)t < FVM_DTYPE_COUNT ? dtype_sizes[t] : 0;
}

bool fvm_dtype_is_float(fvm_dtype t)
{
    return t == FVM_DTYPE_F32 || t == FVM_DTYPE_F64;
}

bool fvm_dtype_is_int(fvm_dtype t)
{
    return t == FVM_DTYPE_U8 || t == FVM_DTYPE_I32 || t == FVM_DTYPE_I64 || t == FVM_DTYPE_U32;
}

/* ---- shapes -------------------------------------------------------------- */

int64_t fvm_dims_count(const fvm_dims *s)
{
    int64_t n = 1;
    bool zero = false, big = false; /* big: the product passed INT64_MAX */
    for (int i = 0; i < s->rank; i++) {
        if (s->d[i] < 0)
            return -1;
        zero = zero || s->d[i] == 0;
        if (!big && __builtin_mul_overflow(n, s->d[i], &n))
            big = true;
    }
    return zero ? 0 : big ? INT64_MAX : n;
}

bool fvm_dims_equal(const fvm_dims *a, const fvm_dims *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i])
            return false;
    return true;
}

/* True when rank is in range and every dim is >= -1 (or >= 0 if concrete). */
static bool dims_valid(const fvm_dims *s, bool concrete)
{
    if (s->rank < 0 || s->rank > FVM_MAX_RANK)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] < (concrete ? 0 : -1))
            return false;
    return true;
}

fvm_status fvm_dims_check_size(const fvm_dims *s, fvm_dtype t, fvm_diag *d)
{
    if (!dims_valid(s, false) || (unsigned)t >= FVM_DTYPE_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "invalid shape or dtype (rank %d, dtype %d)", s->rank, (int)t);
    /* Zero dims are left out of the product: a tensor with no elements
     * still has its other dims walked (printing [3, 2^62, 0] visits 3 * 2^62
     * empty rows), so they are bounded as if it had them. Multiply step by
     * step, stopping as soon as the limit is passed, so the product never
     * overflows (each factor is < 2^63, the running product is at most the
     * limit, and __builtin_mul_overflow catches the rest). */
    uint64_t bytes = fvm_dtype_size(t);
    bool over = false;
    for (int i = 0; i < s->rank && !over; i++) {
        uint64_t dim = s->d[i] <= 0 ? 1 : (uint64_t)s->d[i];
        if (__builtin_mul_overflow(bytes, dim, &bytes) || bytes > FVM_MAX_TENSOR_BYTES)
            over = true;
    }
    if (over) {
        char buf[FVM_DIMS_STR];
        fvm_dims_format(s, buf);
        return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "tensor %s%s is larger than the limit of %llu bytes",
                            fvm_dtype_name(t), buf, (unsigned long long)FVM_MAX_TENSOR_BYTES);
    }
    return FVM_OK;
}

fvm_status fvm_dims_broadcast(const fvm_dims *a, const fvm_dims *b, fvm_dims *out, fvm_diag *d)
{
    if (!dims_valid(a, false) || !dims_valid(b, false))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "invalid shape in broadcast");
    fvm_dims r = {.rank = a->rank > b->rank ? a->rank : b->rank};
    for (int i = 0; i < r.rank; i++) {
        /* dims aligned from the right; a missing dim behaves as 1 */
        int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
        int64_t x = ia >= 0 ? a->d[ia] : 1;
        int64_t y = ib >= 0 ? b->d[ib] : 1;
        if (x == y || y == 1)
            r.d[i] = x;
        else if (x == 1)
            r.d[i] = y;
        else if (x == -1)
            r.d[i] = y; /* ? with n gives n */
        else if (y == -1)
            r.d[i] = x;
        else {
            char sa[FVM_DIMS_STR], sb[FVM_DIMS_STR];
            fvm_dims_format(a, sa);
            fvm_dims_format(b, sb);
            return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "shapes %s and %s do not broadcast (dim %lld against %lld)", sa,
                                sb, (long long)x, (long long)y);
        }
    }
    *out = r;
    return FVM_OK;
}

void fvm_dims_format(const fvm_dims *s, char buf[FVM_DIMS_STR])
{
    size_t n = 0;
    buf[n++] = '[';
    int rank = s->rank < 0 ? 0 : s->rank > FVM_MAX_RANK ? FVM_MAX_RANK : s->rank;
    for (int i = 0; i < rank; i++) {
        /* at most 8 dims of at most 20 digits: always fits in 200 bytes */
        if (s->d[i] < 0)
            n += (size_t)snprintf(buf + n, FVM_DIMS_STR - n, "%s?", i ? "," : "");
        else
            n += (size_t)snprintf(buf + n, FVM_DIMS_STR - n, "%s%lld", i ? "," : "", (long long)s->d[i]);
    }
    buf[n++] = ']';
    buf[n] = '\0';
}

/* ---- buffers and tensors ------------------------------------------------- */

static fvm_status tensor_new(fvm_tensor *t, fvm_dtype dtype, const fvm_dims *shape, bool zero, fvm_diag *d)
{
    memset(t, 0, sizeof *t);
    if (!dims_valid(shape, true) || (unsigned)dtype >= FVM_DTYPE_COUNT) {
        char buf[FVM_DIMS_STR];
        fvm_dims_format(shape, buf);
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "cannot allocate a tensor of shape %s (dims must be known)", buf);
    }
    fvm_status st = fvm_dims_check_size(shape, dtype, d);
    if (st != FVM_OK)
        return st;
    size_t bytes = (size_t)fvm_dims_count(shape) * fvm_dtype_size(dtype);
    t->dtype = dtype;
    t->shape = *shape;
    if (bytes == 0)
        return FVM_OK; /* empty tensors own no buffer */
    fvm_buf *b = fvm_buf_alloc(bytes);
    if (!b) {
        memset(t, 0, sizeof *t);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory allocating %zu bytes for a tensor", bytes);
    }
    if (zero)
        memset(b->data, 0, bytes);
    t->buf = b;
    return FVM_OK;
}

fvm_status fvm_tensor_alloc(fvm_tensor *t, fvm_dtype dtype, const fvm_dims *shape, fvm_diag *d)
{
    return tensor_new(t, dtype, shape, false, d);
}

fvm_status fvm_tensor_zeros(fvm_tensor *t, fvm_dtype dtype, const fvm_dims *shape, fvm_diag *d)
{
    return tensor_new(t, dtype, shape, true, d);
}

void fvm_tensor_retain(const fvm_tensor *t)
{
    if (t->buf)
        __atomic_fetch_add(&t->buf->refs, 1, __ATOMIC_RELAXED);
}

void fvm_tensor_release(fvm_tensor *t)
{
    if (!t)
        return;
    /* acq_rel: every write through other references happens before the free */
    if (t->buf && __atomic_sub_fetch(&t->buf->refs, 1, __ATOMIC_ACQ_REL) == 0)
        fvm_buf_free(t->buf);
    memset(t, 0, sizeof *t);
}

fvm_status fvm_tensor_row(const fvm_tensor *t, int64_t i, fvm_tensor *out)
{
    if (t->shape.rank < 1 || i < 0 || i >= t->shape.d[0])
        return FVM_ERR_USAGE;
    fvm_tensor r = {.dtype = t->dtype, .shape = {.rank = t->shape.rank - 1}};
    for (int k = 1; k < t->shape.rank; k++)
        r.shape.d[k - 1] = t->shape.d[k];
    size_t row_bytes = (size_t)fvm_dims_count(&r.shape) * fvm_dtype_size(t->dtype);
    if (row_bytes > 0) {
        r.buf = t->buf;
        r.offset = t->offset + (size_t)i * row_bytes;
        fvm_tensor_retain(&r);
    }
    *out = r;
    return FVM_OK;
}

fvm_status fvm_tensor_reshape(const fvm_tensor *t, const fvm_dims *shape, fvm_tensor *out, fvm_diag *d)
{
    if (!dims_valid(shape, true) || fvm_dims_count(shape) != fvm_tensor_count(t)) {
        char from[FVM_DIMS_STR], to[FVM_DIMS_STR];
        fvm_dims_format(&t->shape, from);
        fvm_dims_format(shape, to);
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "cannot reshape %s to %s: element counts differ", from, to);
    }
    fvm_tensor r = *t; /* out may be t itself */
    r.shape = *shape;
    fvm_tensor_retain(&r);
    *out = r;
    return FVM_OK;
}

double fvm_tensor_get_f64(const fvm_tensor *t, int64_t i)
{
    const unsigned char *p = (const unsigned char *)fvm_tensor_data(t) + (size_t)i * fvm_dtype_size(t->dtype);
    switch (t->dtype) {
    case FVM_DTYPE_BOOL:
        return *p ? 1.0 : 0.0;
    case FVM_DTYPE_U8:
        return *p;
    case FVM_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case FVM_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return (double)v;
    }
    case FVM_DTYPE_U32: {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case FVM_DTYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case FVM_DTYPE_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    default:
        return 0.0;
    }
}

int64_t fvm_tensor_get_i64(const fvm_tensor *t, int64_t i)
{
    const unsigned char *p = (const unsigned char *)fvm_tensor_data(t) + (size_t)i * fvm_dtype_size(t->dtype);
    switch (t->dtype) {
    case FVM_DTYPE_BOOL:
        return *p ? 1 : 0;
    case FVM_DTYPE_U8:
        return *p;
    case FVM_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case FVM_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case FVM_DTYPE_U32: {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case FVM_DTYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return fvm_sat_i64(v);
    }
    case FVM_DTYPE_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        return fvm_sat_i64(v);
    }
    default:
        return 0;
    }
}

void fvm_tensor_set_f64(fvm_tensor *t, int64_t i, double v)
{
    unsigned char *p = (unsigned char *)fvm_tensor_data(t) + (size_t)i * fvm_dtype_size(t->dtype);
    switch (t->dtype) {
    case FVM_DTYPE_BOOL:
        *p = v != 0;
        break;
    case FVM_DTYPE_U8:
        *p = fvm_sat_u8(v);
        break;
    case FVM_DTYPE_I32: {
        int32_t x = fvm_sat_i32(v);
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_I64: {
        int64_t x = fvm_sat_i64(v);
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_U32: {
        uint32_t x = fvm_sat_u32(v);
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_F32: {
        float x = (float)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_F64:
        memcpy(p, &v, sizeof v);
        break;
    default:
        break;
    }
}

void fvm_tensor_set_i64(fvm_tensor *t, int64_t i, int64_t v)
{
    unsigned char *p = (unsigned char *)fvm_tensor_data(t) + (size_t)i * fvm_dtype_size(t->dtype);
    switch (t->dtype) {
    case FVM_DTYPE_BOOL:
        *p = v != 0;
        break;
    case FVM_DTYPE_U8:
        *p = (uint8_t)(uint64_t)v;
        break;
    case FVM_DTYPE_I32: {
        int32_t x = (int32_t)(uint32_t)(uint64_t)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_I64:
        memcpy(p, &v, sizeof v);
        break;
    case FVM_DTYPE_U32: {
        uint32_t x = (uint32_t)(uint64_t)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_F32: {
        float x = (float)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    case FVM_DTYPE_F64: {
        double x = (double)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    default:
        break;
    }
}

void *fvm_tensor_ptr(const fvm_tensor *t)
{
    return fvm_tensor_data(t);
}

bool fvm_tensor_identical(const fvm_tensor *a, const fvm_tensor *b)
{
    if (a->dtype != b->dtype || !fvm_dims_equal(&a->shape, &b->shape))
        return false;
    size_t n = fvm_tensor_bytes(a);
    return n == 0 || memcmp(fvm_tensor_data(a), fvm_tensor_data(b), n) == 0;
}
