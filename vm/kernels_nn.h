/* kernels_nn.h - neural-network kernels: convolution, pooling, softmax, cross-entropy, scatter-add,
 * dropout, layer norm, and the backward kernels their gradients need.
 *
 * Conventions are those of kernels.h: inputs borrowed, 'out' allocated by
 * the caller with the shape the matching shape helper computes, float dtypes
 * f32 and f64 (both operands of one dtype), runtime errors (a label or index
 * out of range) as FVM_ERR_RUNTIME in d. Images are NHWC and filters HWIO, as
 * in TensorFlow and JAX (x [N,H,W,C], w [KH,KW,C,O]). Results must not depend
 * on the number of threads: every kernel is sequential and sums in a fixed
 * order (BLAS calls excepted, as in kernels.h). */
#ifndef FVM_KERNELS_NN_H
#define FVM_KERNELS_NN_H

#include "kernels.h"

/* A 2-D window: size (pooling window or filter), strides, and padding.
 * SAME pads so that out = ceil(in / stride), with the extra row/column at the
 * bottom/right (TensorFlow's rule); VALID uses no padding: out =
 * floor((in - size) / stride) + 1. */
typedef struct fvm_window {
    int64_t kh, kw; /* window size (for conv2d: the filter's KH, KW) */
    int64_t sh, sw; /* strides >= 1 */
    bool same;
} fvm_window;

/* Output height/width and the padding before (top/left) for one image side. */
fvm_status fvm_window_out(int64_t in, int64_t k, int64_t stride, bool same, int64_t *out, int64_t *pad_before,
                          fvm_diag *d);

/* y[n,oh,ow,o] = sum over kh,kw,c of xpad[n, oh*sh+kh, ow*sw+kw, c] * w[kh,kw,c,o].
 * Through im2col and one cblas gemm per image (or better); y [N,OH,OW,O]. */
fvm_status fvm_k_conv2d(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, fvm_tensor *y,
                        fvm_diag *d);
/* The gradient of conv2d's result with respect to x: dx has x's shape
 * [N,H,W,C] (given by the caller), dy is [N,OH,OW,O]. */
fvm_status fvm_k_conv2d_grad_input(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win,
                                   fvm_tensor *dx, fvm_diag *d);
/* ... with respect to w: dw [KH,KW,C,O]. */
fvm_status fvm_k_conv2d_grad_filter(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win,
                                    fvm_tensor *dw, fvm_diag *d);

typedef enum fvm_pool { FVM_POOL_MAX, FVM_POOL_AVG } fvm_pool;
/* Pooling over kh x kw windows of each channel: x [N,H,W,C] -> y [N,OH,OW,C].
 * MAX ignores padding; AVG divides by the number of elements of the window
 * inside the image (TensorFlow's SAME average pooling). */
fvm_status fvm_k_pool(fvm_pool kind, const fvm_tensor *x, const fvm_window *win, fvm_tensor *y, fvm_diag *d);
/* The gradient with respect to x (dx has x's shape): MAX gives each window's
 * dy to the first maximal element of the window (row-major), summing where
 * windows overlap; AVG spreads dy evenly over the window's elements. */
fvm_status fvm_k_pool_grad(fvm_pool kind, const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win,
                           fvm_tensor *dx, fvm_diag *d);

/* softmax / log_softmax along axis (out has x's shape), numerically stable
 * (the maximum is subtracted first). */
fvm_status fvm_k_softmax(const fvm_tensor *x, int axis, bool log, fvm_tensor *out, fvm_diag *d);

/* Cross-entropy of logits [..., K] with integer labels [...] (i32 or i64 in
 * [0, K)): loss[...] = logsumexp(logits[..., :]) - logits[..., label],
 * computed stably. A label outside [0, K) is a runtime error naming it. */
fvm_status fvm_k_softmax_xent(const fvm_tensor *logits, const fvm_tensor *labels, fvm_tensor *loss, fvm_diag *d);

/* out = zeros of out's shape, then out.take-positions += updates: the
 * adjoint of gather (kernels.h's fvm_k_gather): for every index position p of
 * idx, out[..., idx[p], ...] += updates[..., p, ...] along axis. An index
 * outside [0, out.shape[axis]) is a runtime error. Adds in index order. */
fvm_status fvm_k_scatter_add(const fvm_tensor *idx, const fvm_tensor *updates, int axis, fvm_tensor *out,
                             fvm_diag *d);

/* Dropout with a random key: out = x * keep_mask / (1 - rate), where element
 * i is kept when the i-th uniform draw of fvm_prng_uniform (f32 draws for f32
 * and f64 alike) under key is >= rate. 0 <= rate < 1. The same key gives the
 * same mask, so applying it to a cotangent gives the gradient. */
fvm_status fvm_k_dropout(const fvm_tensor *x, const uint32_t key[2], double rate, fvm_tensor *out, fvm_diag *d);

#endif
