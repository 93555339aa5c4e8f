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
                           fvm_dims *out, int64_t start_out[FVM_MAX_RANK], int64_t step_out[FVM_MAX_RANK],
                           fvm_diag *d);
fvm_status fvm_shape_concat(const fvm_dims *const *xs, int n, int64_t axis, fvm_dims *out, int *axis_out,
                            fvm_diag *d);
fvm_status fvm_shape_gather(const fvm_dims *x, const fvm_dims *idx, int64_t axis, fvm_dims *out, int *axis_out,
                            fvm_diag *d);

#endif
