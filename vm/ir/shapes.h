/* shapes.h - shape rules shared by the checker (static dims, -1 = unknown) and the runtime (concrete dims).
 *
 * Each function validates its inputs and computes the output dims; errors are
 * FVM_ERR_TYPE with a message and no location (callers add it). Axes may be
 * negative (counted from the end, as in NumPy); the normalised values are
 * returned for the kernels. */
#ifndef FVM_SHAPES_H
#define FVM_SHAPES_H

#include "ops.h"
#include "tensor.h"

fvm_status fvm_shape_matmul(const fvm_dims *a, const fvm_dims *b, bool ta, bool tb, fvm_dims *out, fvm_diag *d);
/* axes NULL: every axis; an empty list: none. mask gets bit i for each reduced axis. */
fvm_status fvm_shape_reduce(const fvm_dims *x, const fvm_ints *axes, bool keepdims, fvm_dims *out, uint32_t *mask,
                            fvm_diag *d);
fvm_status fvm_shape_argmax(const fvm_dims *x, int64_t axis, fvm_dims *out, int *axis_out, fvm_diag *d);
/* One target dim may be -1 (inferred from the element count). */
fvm_status fvm_shape_reshape(const fvm_dims *x, const fvm_ints *shape, fvm_dims *out, fvm_diag *d);
fvm_status fvm_shape_broadcast_to(const fvm_dims *x, const fvm_ints *shape, fvm_dims *out, fvm_diag *d);
/* perm NULL: reverse the axes. */
fvm_status fvm_shape_transpose(const fvm_dims *x, const fvm_ints *perm, fvm_dims *out, int perm_out[FVM_MAX_RANK],
                               fvm_diag *d);
/* Python slicing per axis (start/stop/step lists may be shorter than the rank,
 * NULL for defaults; negative start/stop count from the end; clamped; step >= 1). */
fvm_status fvm_shape_slice(const fvm_dims *x, const fvm_ints *start, const fvm_ints *stop, const fvm_ints *step,
                           fvm_dims *out, int64_t start_out[FVM_MAX_RANK], int64_t step_out[FVM_MAX_RANK], fvm_diag *d);
fvm_status fvm_shape_concat(const fvm_dims *const *xs, int n, int64_t axis, fvm_dims *out, int *axis_out, fvm_diag *d);
fvm_status fvm_shape_gather(const fvm_dims *x, const fvm_dims *idx, int64_t axis, fvm_dims *out, int *axis_out,
                            fvm_diag *d);

/* A 2-D window: size (pooling window or filter), strides, and padding.
 * SAME pads so that out = ceil(in / stride), with the extra row/column at the
 * bottom/right (TensorFlow's rule); VALID uses no padding: out =
 * floor((in - size) / stride) + 1. */
typedef struct fvm_window {
    int64_t kh, kw; /* window size >= 1 (for conv2d: the filter's KH, KW) */
    int64_t sh, sw; /* strides >= 1 */
    bool same;
} fvm_window;

/* Output height/width and the padding before (top/left) for one image side.
 * SAME: out = ceil(in / stride), total padding max((out-1)*stride + k - in, 0),
 * of which floor(total / 2) comes before. VALID: pad_before 0, and in >= k
 * is required. in may be -1 (an unknown dim in a static type): *out is then
 * -1 and *pad_before -1 for SAME (0 for VALID). FVM_ERR_TYPE in d, outputs
 * untouched, for k < 1, stride < 1, in < -1 or a VALID window larger than
 * the input. out and pad_before may be NULL when not wanted. */
fvm_status fvm_window_out(int64_t in, int64_t k, int64_t stride, bool same, int64_t *out, int64_t *pad_before,
                          fvm_diag *d);

#endif
