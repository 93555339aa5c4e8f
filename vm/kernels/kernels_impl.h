/* kernels_impl.h - helpers shared by the kernel files and the providers (private to vm/kernels). */
#ifndef FVM_KERNELS_IMPL_H
#define FVM_KERNELS_IMPL_H

#include <assert.h>
#include <string.h>

#include "kernels.h"
#include "kernels_nn.h"

/* Before an elementwise loop whose output may be exactly one of its inputs
 * (never a partial overlap): there is no dependency between iterations, so
 * GCC may vectorise without the runtime alias checks its -O2 cost model
 * refuses. Clang vectorises with runtime checks at -O2 and needs no hint. */
#if defined(__GNUC__) && !defined(__clang__)
#define KERNEL_IVDEP _Pragma("GCC ivdep")
#else
#define KERNEL_IVDEP
#endif

/* Compiles an elementwise loop function once for AVX-512, once for AVX2 and
 * once for the baseline, the copy for the CPU at hand chosen when the
 * program loads (GCC's target_clones, through ifunc). Each element is the
 * same C expression in its dtype whatever the vector width (no fused
 * multiply-add: ISO C's -ffp-contract=off), so all copies give the same bits.
 * Not under ThreadSanitizer: it instruments the ifunc resolvers, which run
 * while the program is being relocated, before its runtime is set up (the
 * program crashes at load); one copy for the baseline there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define KERNEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KERNEL_CLONES
#endif

/* for (int64_t i = 0; i < n; i++) { body }, run as blocks of 32 iterations
 * plus a scalar tail: GCC's -O2 cost model vectorises only loops whose trip
 * count is a known multiple of the vector length. The body must not depend on
 * other iterations (see KERNEL_IVDEP). Not nestable. */
#define KERNEL_FOR(i, n, ...) \
    do { \
        int64_t kfor_n_ = (n), kfor_b_ = 0; \
        for (; kfor_b_ + 32 <= kfor_n_; kfor_b_ += 32) { \
            KERNEL_IVDEP \
            for (int64_t kfor_j_ = 0; kfor_j_ < 32; kfor_j_++) { \
                int64_t i = kfor_b_ + kfor_j_; \
                __VA_ARGS__ \
            } \
        } \
        for (int64_t i = kfor_b_; i < kfor_n_; i++) { \
            __VA_ARGS__ \
        } \
    } while (0)

/* A caller's bug (wrong out shape, bad axis): asserted in debug builds, and an
 * FVM_ERR_USAGE in d when asserts are compiled out, so it never corrupts memory. */
#define KREQUIRE(d, cond, ...) \
    do { \
        if (!(cond)) { \
            assert(!"kernel precondition failed: " #cond); \
            return fvm_diag_add((d), FVM_ERR_USAGE, NULL, __VA_ARGS__); \
        } \
    } while (0)

/* Rank, dims and dtype in range and a buffer present when there are elements.
 * Checked on every operand so that a bad tensor never indexes a table. */
static inline bool kernel_tensor_ok(const fvm_tensor *t)
{
    if ((unsigned)t->dtype >= FVM_DTYPE_COUNT || t->shape.rank < 0 || t->shape.rank > FVM_MAX_RANK)
        return false;
    for (int i = 0; i < t->shape.rank; i++)
        if (t->shape.d[i] < 0)
            return false;
    return t->buf != NULL || fvm_tensor_count(t) == 0;
}

#define KREQUIRE_TENSOR(d, t, what) \
    KREQUIRE(d, kernel_tensor_ok(t), "%s: invalid tensor (dtype, rank, dims or missing buffer)", what)

/* Unsupported dtype for an op: a type error, never a crash. */
static inline fvm_status kernel_type_error(fvm_diag *d, const char *op, fvm_dtype t)
{
    return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "%s is not defined for dtype %s", op, fvm_dtype_name(t));
}

/* Data pointer as bytes; only called for tensors with elements. */
static inline unsigned char *kernel_bytes(const fvm_tensor *t)
{
    return (unsigned char *)t->buf->data + t->offset;
}

/* Product of dims [from, to). */
static inline int64_t kernel_span(const fvm_dims *s, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++)
        n *= s->d[i];
    return n;
}

/* Row-major element strides of a shape. */
static inline void kernel_strides(const fvm_dims *s, int64_t *stride)
{
    int64_t n = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        stride[i] = n;
        n *= s->d[i];
    }
}

/* ---- shared by the providers (provider.h) ------------------------------------------ */

/* True when every input broadcasts to exactly out's shape (kernels_elementwise.c). */
bool fvm_kernel_bcast_matches(const fvm_tensor *const *in, int nin, const fvm_dims *out);
/* The checks of fvm_k_unary, fvm_k_binary (with its integer divisor), fvm_k_select and
 * fvm_k_cast, in their order and with their errors: FVM_OK when the kernel
 * may run (kernels_elementwise.c). */
fvm_status fvm_kernel_unary_check(fvm_unary op, const fvm_tensor *x, const fvm_tensor *out, fvm_diag *d);
fvm_status fvm_kernel_binary_check(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, const fvm_tensor *out,
                                   fvm_diag *d);
fvm_status fvm_kernel_select_check(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, const fvm_tensor *out,
                                   fvm_diag *d);
fvm_status fvm_kernel_cast_check(const fvm_tensor *x, const fvm_tensor *out, fvm_diag *d);
/* The number of operands of a step (1, 2 or 3). */
static inline int kernel_step_arity(const fvm_fstep *st)
{
    return st->kind == FVM_FS_BINARY ? 2 : st->kind == FVM_FS_SELECT ? 3 : 1;
}
/* The dtype of every step of a chain over inputs of dtypes in_dt into
 * dt[0..nsteps); false when fvm_k_fused_dtype is. */
bool fvm_kernel_fused_types(const fvm_fstep *steps, int nsteps, const fvm_dtype *in_dt, int nin, fvm_dtype *dt);
/* v as one element of dtype t (fvm_dtype_size(t) bytes at out), converted as fvm_k_fill converts it. */
void fvm_kernel_fill_value(fvm_dtype t, double v, void *out);

/* The checks of fvm_k_reduce, in its order and with its errors, and the
 * results that need no kernel: *nred = the number of elements reduced into
 * each output, or 0 when out is complete already (it has no elements, or
 * nothing is reduced: out then holds zeros, NaN for MEAN) or on an error
 * (kernels_reduce.c). */
fvm_status fvm_kernel_reduce_check(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out,
                                   int64_t *nred, fvm_diag *d);
/* Float sums add runs of up to this many elements with eight running sums,
 * and cut longer runs in two (NumPy's PW_BLOCKSIZE; kernels_reduce.c). */
#define FVM_PAIRWISE_BLOCK 128

/* A matrix product's operands as op(a) [M,K] and op(b) [K,N] read through
 * element strides: A(i,k) = a[i*a_si + k*a_sk], B(k,j) = b[k*b_sk + j*b_sj].
 * A vector on the left is a 1-row matrix, a vector on the right a 1-column
 * one. The output is [M,N], row-major. */
typedef struct mm_shape {
    int64_t m, n, k;
    int64_t a_si, a_sk, b_sk, b_sj;
} mm_shape;

/* The checks of fvm_k_matmul, in its order and with its errors, and the
 * product's shape (kernels_linalg.c). */
fvm_status fvm_kernel_matmul_shape(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *out,
                                   mm_shape *shape, fvm_diag *d);

/* c(i, j) = the float product's chain acc = fma(A(i,l), B(l,j), acc) over
 * l in order from 0, stored at c[i*ldc + j] (added to its value when
 * accumulate), for f32 (es 4) or f64 (es 8): the portable provider's
 * products (provider_portable.c), and the BLAS calls of a build without
 * BLAS (make NO_BLAS=1, noblas/cblas.c). */
void fvm_gemm_chain(size_t es, const mm_shape *s, const void *a, const void *b, void *c, int64_t ldc, bool accumulate);

/* C [m,n] = op(A) op(B), plus C when accumulate, row-major, of f32 (es 4)
 * or f64 (es 8) elements with leading dimensions lda, ldb, ldc; op
 * transposes when its flag is set: the products of the conv2d kernels.
 * When accumulate, tmp is scratch of m*n elements (the product before it is
 * added to C), for those that need it. */
typedef void (*fvm_kernel_gemm_fn)(size_t es, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                                   int64_t lda, const void *b, int64_t ldb, bool accumulate, void *c, int64_t ldc,
                                   void *tmp);
/* fvm_k_matmul_update's contract with the product made by a provider's
 * matmul, then the update element by element (the portable provider's,
 * and the CPU one's where its own kernel does not take the product). */
typedef fvm_status (*fvm_kernel_matmul_fn)(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *out,
                                           fvm_diag *d);
fvm_status fvm_kernel_matmul_update(fvm_kernel_matmul_fn matmul, const fvm_tensor *a, const fvm_tensor *b, bool ta,
                                    bool tb, const fvm_tensor *scale, const fvm_tensor *base, fvm_tensor *out,
                                    fvm_diag *d);
/* The conv2d kernels of kernels_nn.h with their products computed by gemm
 * (fvm_k_conv2d and its gradients are these with BLAS's; kernels_conv.c). */
fvm_status fvm_kernel_conv2d(fvm_kernel_gemm_fn gemm, const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win,
                             fvm_tensor *y, fvm_diag *d);
fvm_status fvm_kernel_conv2d_grad_input(fvm_kernel_gemm_fn gemm, const fvm_tensor *dy, const fvm_tensor *w,
                                        const fvm_window *win, fvm_tensor *dx, fvm_diag *d);
fvm_status fvm_kernel_conv2d_grad_filter(fvm_kernel_gemm_fn gemm, const fvm_tensor *x, const fvm_tensor *dy,
                                         const fvm_window *win, fvm_tensor *dw, fvm_diag *d);

/* f32 products of two matrices (kernels_gemm.c), for those that fit
 * fvm_gemm_f32_fits (larger ones go to BLAS): c = op(a) op(b), every element
 * the chain acc = fmaf(A(i,k), B(k,j), acc) over k = 0, 1, ... from 0, so
 * the bits do not depend on the CPU or on which implementation runs. */
#define FVM_GEMM_MAX_DIM ((int64_t)1 << 20)
/* Products of more multiply-adds go to BLAS. A build with
 * -DFVM_GEMM_MAX_MACS=0 sends every product to BLAS (make bench builds one
 * to count the flops and to compare the two). */
#ifndef FVM_GEMM_MAX_MACS
#define FVM_GEMM_MAX_MACS ((int64_t)1 << 27)
#endif
typedef enum fvm_gemm_isa { FVM_GEMM_GENERIC, FVM_GEMM_AVX2, FVM_GEMM_AVX512 } fvm_gemm_isa;
bool fvm_gemm_f32_fits(const mm_shape *s);
/* The SGD step as a product's epilogue: c = base - scale * (op(a) op(b)),
 * base [m,n] row-major like c, not overlapping it, or c itself where
 * fvm_gemm_f32_in_place says so (the update in place). Each element's product
 * is summed over all of k first, then multiplied by scale and subtracted
 * from base, each rounded to f32 once: the bits of the product stored and
 * the chain sub(base, mul(scale, c)) run after it (fvm_k_fused), without
 * the finished product ever being stored: the update is made as each tile
 * is stored, in its registers (or as a transposed tile is copied out). */
typedef struct fvm_gemm_epilogue {
    float scale;
    const float *base;
    bool add; /* instead: c = base + (op(a) op(b)), the bits of add(base, c) (scale unused) */
} fvm_gemm_epilogue;
/* May an epilogue's base be c itself? Where k is one block: then each
 * element of base is read once, just before its own element of c is
 * written (with more, c holds partial sums while base is still to be read). */
bool fvm_gemm_f32_in_place(const mm_shape *s);
/* With the fastest implementation the CPU has; ep may be NULL (c = the product). */
void fvm_gemm_f32(const mm_shape *s, const float *a, const float *b, float *c);
void fvm_gemm_f32_then(const mm_shape *s, const float *a, const float *b, float *c, const fvm_gemm_epilogue *ep);
/* With a given one (tests compare them): only if fvm_gemm_f32_isa(isa). */
bool fvm_gemm_f32_isa(fvm_gemm_isa isa);
void fvm_gemm_f32_with(fvm_gemm_isa isa, const mm_shape *s, const float *a, const float *b, float *c,
                       const fvm_gemm_epilogue *ep);

#endif
