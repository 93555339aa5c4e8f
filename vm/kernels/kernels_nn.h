/* kernels_nn.h - neural-network kernels: convolution, pooling, softmax, cross-entropy, scatter-add,
 * dropout, layer norm, the LSTM cell, and the backward kernels their gradients need.
 *
 * Conventions are those of kernels.h: inputs borrowed, 'out' allocated by
 * the caller with the shape the matching shape helper computes, float dtypes
 * f32 and f64 (all float operands of one call share one dtype; any other
 * dtype is FVM_ERR_TYPE), runtime errors (a label or index out of range) as
 * FVM_ERR_RUNTIME in d, checked before anything is written. Images are NHWC
 * and filters HWIO, as in TensorFlow and JAX (x [N,H,W,C], w [KH,KW,C,O]).
 * Results must not depend on the number of threads: every kernel is
 * sequential and sums in a fixed order, so the same inputs give the same
 * bits. The f32 conv2d kernels' products are fedvm's own kernel
 * (kernels_gemm.c: each element one fused multiply-add chain in order), the
 * same bits on every machine and in both providers. The f64 ones are the
 * exception, as in kernels.h: the BLAS library orders their sums, and
 * OpenBLAS's order depends on the CPU and its own thread count, so f64
 * conv2d results are reproducible for a fixed machine and BLAS thread count.
 *
 * One exception to kernels.h's "never malloc": the three conv2d kernels
 * without the _ws suffix malloc one scratch buffer per call (the im2col
 * matrix of a few images; its size is fvm_conv2d_workspace's) and free it
 * before returning, FVM_ERR_NOMEM when that fails. The _ws variants take the
 * scratch from the caller and never allocate. No other kernel here
 * allocates. */
#ifndef FVM_KERNELS_NN_H
#define FVM_KERNELS_NN_H

#include "../ir/shapes.h"
#include "kernels.h"

/* y[n,oh,ow,o] = sum over kh,kw,c of xpad[n, oh*sh+kh, ow*sw+kw, c] * w[kh,kw,c,o],
 * where xpad is x padded with zeros by the window's rule (fvm_window_out);
 * win->kh, win->kw must equal w's KH, KW. y [N,OH,OW,O].
 * Computed as im2col (the patches of a group of images as the rows of a
 * matrix [images*OH*OW, KH*KW*C]) times w seen as [KH*KW*C, O], one gemm
 * per group of images (f32: fedvm's own kernel, every element the fused
 * multiply-add chain over KH*KW*C in order from 0; f64: BLAS's dgemm); the
 * group size depends on the shapes only. A
 * 1x1 filter with strides 1 needs no im2col (x is its own patch matrix). */
fvm_status fvm_k_conv2d(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, fvm_tensor *y, fvm_diag *d);
/* The gradient of conv2d's result with respect to x: dx has x's shape
 * [N,H,W,C] (given by the caller), dy is [N,OH,OW,O]. One gemm per group of
 * images (dy @ w^T, the gradient of the patch matrix), then col2im adds each
 * patch back into dx, patches in row-major (oh, ow) order. */
fvm_status fvm_k_conv2d_grad_input(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win, fvm_tensor *dx,
                                   fvm_diag *d);
/* ... with respect to w: dw [KH,KW,C,O] = patches^T @ dy, one gemm per group
 * of images; the groups' products are added in image order (f32: each
 * group's chains from 0, then added to the sum of the groups before). */
fvm_status fvm_k_conv2d_grad_filter(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win, fvm_tensor *dw,
                                    fvm_diag *d);

/* The scratch bytes the three conv2d kernels need for x's shape xs [N,H,W,C]
 * and w's shape ws [KH,KW,C,O] of dtype t (the same for all three; 0 when
 * none is needed): the patch matrix of one group of images and, when the
 * images take more than one group, a [KH*KW*C, O] product (grad_filter's
 * sum of one group). Shapes and window are checked as the kernels check them:
 * FVM_ERR_USAGE for a bad rank or window, or mismatched channels,
 * FVM_ERR_TYPE for a non-float dtype, FVM_ERR_LIMIT when one image's patch
 * matrix would exceed FVM_MAX_TENSOR_BYTES or a dim BLAS's int. */
fvm_status fvm_conv2d_workspace(fvm_dtype t, const fvm_dims *xs, const fvm_dims *ws, const fvm_window *win,
                                size_t *bytes, fvm_diag *d);
/* The conv2d kernels with caller-provided scratch: ws points to at least
 * fvm_conv2d_workspace's bytes (it may be NULL when that is 0), aligned for
 * the dtype; a smaller or misaligned workspace is the caller's bug. They never
 * allocate, and give the same bits as the allocating versions. */
fvm_status fvm_k_conv2d_ws(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, void *ws, size_t ws_bytes,
                           fvm_tensor *y, fvm_diag *d);
fvm_status fvm_k_conv2d_grad_input_ws(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win, void *ws,
                                      size_t ws_bytes, fvm_tensor *dx, fvm_diag *d);
fvm_status fvm_k_conv2d_grad_filter_ws(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win, void *ws,
                                       size_t ws_bytes, fvm_tensor *dw, fvm_diag *d);

typedef enum fvm_pool { FVM_POOL_MAX, FVM_POOL_AVG } fvm_pool;
/* Pooling over kh x kw windows of each channel: x [N,H,W,C] -> y [N,OH,OW,C].
 * MAX ignores padding; AVG divides by the number of elements of the window
 * inside the image (TensorFlow's SAME average pooling). A SAME window always
 * holds at least one element of a non-empty image. Elements of a window are
 * visited in row-major order: AVG sums in that order and then divides by the
 * count; MAX takes the first maximal element, where NaN counts as the
 * maximum (the first NaN wins, as in fvm_k_argmax). */
fvm_status fvm_k_pool(fvm_pool kind, const fvm_tensor *x, const fvm_window *win, fvm_tensor *y, fvm_diag *d);
/* The gradient with respect to x (dx has x's shape, dy y's): MAX gives each
 * window's dy to the first maximal element of the window (row-major, the
 * element MAX chose), summing where windows overlap; AVG spreads dy evenly
 * over the window's elements inside the image (dy / count added to each).
 * Windows are visited in row-major (n, oh, ow) order. */
fvm_status fvm_k_pool_grad(fvm_pool kind, const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win,
                           fvm_tensor *dx, fvm_diag *d);
/* MAX pooling's choice read from another tensor: y[n,oh,ow,c] = u at the
 * element of the window that MAX pooling of x chooses (the first maximal
 * element in row-major order, NaN the maximum), u of x's shape, y of the
 * pooling's. The derivative of max pooling at x along u, and the adjoint in
 * dy of its gradient (fvm_k_pool_grad, MAX). */
fvm_status fvm_k_pool_gather(const fvm_tensor *x, const fvm_tensor *u, const fvm_window *win, fvm_tensor *y,
                             fvm_diag *d);

/* softmax / log_softmax along axis (out has x's shape), numerically stable
 * (the maximum m is subtracted first): softmax = exp(x - m) / s and
 * log_softmax = (x - m) - log(s), with s = sum of exp(x - m) in index order
 * along the axis. A line holding NaN or +inf, or only -inf, gives NaN.
 * out may be x itself. */
fvm_status fvm_k_softmax(const fvm_tensor *x, int axis, bool log, fvm_tensor *out, fvm_diag *d);

/* Cross-entropy of logits [..., K] with integer labels [...] (i32 or i64 in
 * [0, K)): loss[...] = logsumexp(logits[..., :]) - logits[..., label],
 * computed stably as log(s) - (logits[label] - m) with m and s as in
 * fvm_k_softmax. loss has labels' shape and logits' dtype. A label outside
 * [0, K) is a runtime error naming it, its position and the range (all
 * labels are checked before anything is written). */
fvm_status fvm_k_softmax_xent(const fvm_tensor *logits, const fvm_tensor *labels, fvm_tensor *loss, fvm_diag *d);

/* out = zeros of out's shape, then out.take-positions += updates: the
 * adjoint of gather (kernels.h's fvm_k_gather): for every index position p of
 * idx, out[..., idx[p], ...] += updates[..., p, ...] along axis. So updates
 * has gather's result shape, out.shape[:axis] + idx.shape +
 * out.shape[axis+1:], and out's dtype. idx is i32 or i64. An index outside
 * [0, out.shape[axis]) is a runtime error naming the index and the range;
 * all are checked before anything (the zeros included) is written. Adds in
 * index order (p ascending), so repeated indices sum deterministically. */
fvm_status fvm_k_scatter_add(const fvm_tensor *idx, const fvm_tensor *updates, int axis, fvm_tensor *out, fvm_diag *d);

/* Dropout with a random key: out = x * keep_mask / (1 - rate), where element
 * i (C order) is kept when the i-th value of fvm_prng_uniform_f32(key, n),
 * n = x's element count (f32 draws for f32 and f64 alike), is >= rate.
 * 0 <= rate < 1, else a runtime error. A kept element is x / keep with keep
 * = 1 - rate computed in f64 and rounded to the dtype (so rate 0 is the
 * identity); a dropped one is +0 whatever x holds. out has x's shape and may
 * be x itself. The same key gives the same mask, so applying it to a
 * cotangent gives the gradient. */
fvm_status fvm_k_dropout(const fvm_tensor *x, const uint32_t key[2], double rate, fvm_tensor *out, fvm_diag *d);

/* The layer norm over x's last axis: y = (x - mean) / sqrt(var + eps) *
 * gamma + beta, gamma and beta [D] for x [..., D], mean and var (the biased
 * variance) summed in index order in f64, y rounded once to the dtype. y has
 * x's shape; a zero-length last axis gives an empty y. */
fvm_status fvm_k_layer_norm(const fvm_tensor *x, const fvm_tensor *gamma, const fvm_tensor *beta, double eps,
                            fvm_tensor *y, fvm_diag *d);

/* An LSTM cell from its pre-activations zx = x wx and zh = h wh ([B,4H]),
 * the bias b [4H] and the cell state c [B,H]: per element, in f64, z = zx +
 * zh + b; gates i, f, g, o are z's four column blocks of H; c_out =
 * sigmoid(f) c + sigmoid(i) tanh(g) (rounded to the dtype), h_out =
 * sigmoid(o) tanh(c_out), sigmoid computed stably (as the sigmoid op). */
fvm_status fvm_k_lstm_gates(const fvm_tensor *zx, const fvm_tensor *zh, const fvm_tensor *b, const fvm_tensor *c,
                            fvm_tensor *h_out, fvm_tensor *c_out, fvm_diag *d);

/* *out = the sum of the squares of x's elements (any dtype), in index order, in f64. */
fvm_status fvm_k_sum_squares(const fvm_tensor *x, double *out, fvm_diag *d);

#endif
