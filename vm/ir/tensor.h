/* tensor.h - dense tensors: dtype, shape, and a refcounted contiguous buffer. */
#ifndef FVM_TENSOR_H
#define FVM_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

typedef enum fvm_dtype {
    FVM_DTYPE_BOOL, /* stored as uint8_t 0/1 */
    FVM_DTYPE_U8, /* bytes: image pixels, text */
    FVM_DTYPE_I32,
    FVM_DTYPE_I64,
    FVM_DTYPE_U32,
    FVM_DTYPE_F32,
    FVM_DTYPE_F64,
    FVM_DTYPE_COUNT
} fvm_dtype;

FVM_API const char *fvm_dtype_name(fvm_dtype t); /* "f32" */
FVM_API bool fvm_dtype_parse(const char *s, size_t len, fvm_dtype *out);
FVM_API size_t fvm_dtype_size(fvm_dtype t); /* bytes per element */
FVM_API bool fvm_dtype_is_float(fvm_dtype t);
FVM_API bool fvm_dtype_is_int(fvm_dtype t); /* u8, i32, i64, u32 */

/* A shape: rank dims; in static types a dim may be -1 (unknown, written '?'). */
typedef struct fvm_dims {
    int rank;
    int64_t d[FVM_MAX_RANK];
} fvm_dims;

/* Number of elements, or -1 if a dim is unknown; 0 if a dim is 0 whatever
 * the others; INT64_MAX when the product does not fit (fvm_dims_check_size
 * rejects such shapes before anything is allocated). */
FVM_API int64_t fvm_dims_count(const fvm_dims *s);
FVM_API bool fvm_dims_equal(const fvm_dims *a, const fvm_dims *b);
/* Checks that the elements of dtype t fit FVM_MAX_TENSOR_BYTES (unknown dims
 * count as 1). Records a FVM_ERR_LIMIT in d (no location) when they don't.
 * The product is computed without overflow; zero dims are left out of it,
 * so a tensor without elements has its other dims bounded all the same.
 * A rank outside [0, FVM_MAX_RANK] or a dim below -1 is FVM_ERR_USAGE. */
FVM_API fvm_status fvm_dims_check_size(const fvm_dims *s, fvm_dtype t, fvm_diag *d);
/* NumPy broadcasting of two shapes (unknown dims allowed: ? with 1 gives ?,
 * ? with n gives n). FVM_ERR_TYPE with a message when incompatible (*out is
 * then unchanged). out may be a or b. */
FVM_API fvm_status fvm_dims_broadcast(const fvm_dims *a, const fvm_dims *b, fvm_dims *out, fvm_diag *d);
/* "[784,10]" / "[?,3]" / "[]" into buf (at most FVM_DIMS_STR bytes). */
#define FVM_DIMS_STR 200
FVM_API void fvm_dims_format(const fvm_dims *s, char buf[FVM_DIMS_STR]);

/* A reference-counted byte buffer. The count is atomic: tensors may be shared
 * across worker threads. */
typedef struct fvm_buf {
    int refs;
    size_t bytes;
    const void *home; /* the thread that allocated it (bufcache.c) */
    _Alignas(64) unsigned char data[];
} fvm_buf;

/* A tensor is a small value type: copying the struct borrows; use
 * fvm_tensor_retain() to keep a copy alive. Data is contiguous, C order,
 * starting at buf->data + offset. */
typedef struct fvm_tensor {
    fvm_dtype dtype;
    fvm_dims shape;
    fvm_buf *buf; /* NULL only for an empty (zero-element) tensor */
    size_t offset; /* bytes */
} fvm_tensor;

/* Allocates an uninitialised (alloc) or zeroed (zeros) tensor of the given
 * concrete shape; the caller owns one reference. FVM_ERR_LIMIT if it is bigger
 * than FVM_MAX_TENSOR_BYTES (checked before allocating), FVM_ERR_NOMEM if
 * malloc fails, FVM_ERR_USAGE for an unknown dim, all recorded in d; *t is
 * zeroed on failure. Data is 64-byte aligned; a zero-element tensor gets no
 * buffer (buf == NULL). Buffers come from and go back to a per-thread cache
 * of freed ones (bufcache.h). */
FVM_API fvm_status fvm_tensor_alloc(fvm_tensor *t, fvm_dtype dtype, const fvm_dims *shape, fvm_diag *d);
FVM_API fvm_status fvm_tensor_zeros(fvm_tensor *t, fvm_dtype dtype, const fvm_dims *shape, fvm_diag *d);
FVM_API void fvm_tensor_retain(const fvm_tensor *t);
/* Drops one reference and clears *t. Safe on a zeroed tensor. */
FVM_API void fvm_tensor_release(fvm_tensor *t);

static inline void *fvm_tensor_data(const fvm_tensor *t)
{
    return t->buf ? t->buf->data + t->offset : NULL;
}
/* fvm_tensor_data as an exported function, for a language binding, which
 * cannot call an inline one: the first element, or NULL without elements. */
FVM_API void *fvm_tensor_ptr(const fvm_tensor *t);
static inline int64_t fvm_tensor_count(const fvm_tensor *t)
{
    return fvm_dims_count(&t->shape);
}
static inline size_t fvm_tensor_bytes(const fvm_tensor *t)
{
    return (size_t)fvm_tensor_count(t) * fvm_dtype_size(t->dtype);
}

/* A view of row i of the leading axis (shares the buffer, retained; an empty
 * row has no buffer). FVM_ERR_USAGE, nothing recorded, when t is a scalar or
 * i is outside [0, t->shape.d[0]). */
FVM_API fvm_status fvm_tensor_row(const fvm_tensor *t, int64_t i, fvm_tensor *out);
/* The same buffer under a new shape with the same element count (retained;
 * out may be t). FVM_ERR_TYPE in d when the counts differ. */
FVM_API fvm_status fvm_tensor_reshape(const fvm_tensor *t, const fvm_dims *shape, fvm_tensor *out, fvm_diag *d);
/* Element i (C order) converted to double / to int64 (floats to int64
 * truncate toward zero and saturate; NaN gives 0). */
FVM_API double fvm_tensor_get_f64(const fvm_tensor *t, int64_t i);
FVM_API int64_t fvm_tensor_get_i64(const fvm_tensor *t, int64_t i);
/* Sets element i from a double (rounded to the dtype as a C cast would; for
 * integer dtypes the value must be representable). Out-of-range values are
 * still defined: they saturate as fvm_k_cast does, NaN gives 0, bool is v != 0.
 * set_i64 wraps modulo 2^32 for i32/u32. */
FVM_API void fvm_tensor_set_f64(fvm_tensor *t, int64_t i, double v);
FVM_API void fvm_tensor_set_i64(fvm_tensor *t, int64_t i, int64_t v);
/* Bitwise equality of dtype, shape and bytes. */
FVM_API bool fvm_tensor_identical(const fvm_tensor *a, const fvm_tensor *b);

#endif
