/* kernels.h - tensor compute kernels: pure functions of tensors (the CPU provider's, provider.h).
 *
 * They know nothing of the IR but the elementwise ops' enums, generated
 * from the op table (vm/ir/elementwise.h).
 *
 * Conventions for every kernel:
 * - Inputs are borrowed. 'out' is an already allocated tensor of the dtype and
 *   shape the kernel's comment names (the caller computes it with the shape
 *   helpers below, the same ones the checker uses). Kernels never allocate
 *   tensors, so the interpreter can size and reuse buffers before a loop.
 * - Kernels validate what the caller cannot know statically (index ranges,
 *   integer division by zero) and report it as FVM_ERR_RUNTIME in d (no location;
 *   the interpreter adds it). Shape mismatches are the caller's bug: asserted.
 * - Integer arithmetic wraps (two's complement), never undefined behaviour;
 *   integer division truncates toward zero; INT_MIN / -1 gives INT_MIN.
 * - Float arithmetic is plain IEEE in the element type (no fused or reordered
 *   accumulation except where stated), so results are bit-reproducible.
 * - An op/dtype pair a kernel does not define is FVM_ERR_TYPE in d (never a
 *   crash); an op value outside its enum is FVM_ERR_USAGE. A wrong out dtype or
 *   shape, bad axis or permutation is the caller's bug: asserted, and reported
 *   as FVM_ERR_USAGE when asserts are compiled out (NDEBUG).
 * - The elementwise kernels (unary, binary, select, cast) accept an out that
 *   is exactly one of their same-shaped inputs (in-place update); no kernel
 *   accepts a partial overlap, and matmul's out must not overlap a or b.
 * - Kernels never call malloc (BLAS may use its own buffers) and never print.
 * - Zero-element tensors (buf == NULL) are accepted everywhere. */
#ifndef FVM_KERNELS_H
#define FVM_KERNELS_H

#include <stdbool.h>

#include "../ir/elementwise.h"
#include "../ir/tensor.h"

typedef enum fvm_reduce {
    FVM_RED_SUM,
    FVM_RED_MEAN, /* floats only */
    FVM_RED_MAX,
    FVM_RED_MIN,
    FVM_RED_COUNT
} fvm_reduce;

/* out: same dtype and shape as x; op is defined for the dtypes of its row
 * of ops.def (the FVM_EW rows whose step is UNARY): float unaries on f32,
 * f64; NEG/ABS/RELU also on signed ints (i32, i64; not u32); NOT on bool.
 * sigmoid is 1/(1+exp(-x)) computed stably. NEG and ABS of INT_MIN wrap to
 * INT_MIN; relu keeps NaN. */
fvm_status fvm_k_unary(fvm_unary op, const fvm_tensor *x, fvm_tensor *out, fvm_diag *d);

/* out: broadcast shape of a and b (same dtype); dtype of a, or bool for
 * comparisons (the rows of ops.def whose step is COMPARE). Integer DIV by
 * zero is a runtime error (nothing is written). Dtypes, those of op's row:
 * ADD..DIV, MAXIMUM, MINIMUM on u8/i32/i64/u32/f32/f64; POW on floats;
 * comparisons on every dtype (bool as 0 < 1); AND/OR on bool. Float
 * MAXIMUM/MINIMUM propagate NaN. */
fvm_status fvm_k_binary(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d);

/* out[i] = p[i] ? a[i] : b[i], with p (bool), a, b broadcast together. */
fvm_status fvm_k_select(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d);

/* Conversion to out->dtype (same shape). Float to int truncates toward zero
 * and saturates at the integer range; NaN gives 0. To bool: x != 0 (NaN is
 * true). Integer to integer wraps modulo 2^bits (i64 -> i32, i32 <-> u32);
 * integer to float rounds once to nearest. */
fvm_status fvm_k_cast(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d);

/* Matrix product of rank-1 or rank-2 tensors of one dtype, op(a) @ op(b) where
 * op transposes a rank-2 operand when its flag is set (never copied: the
 * kernels read through strides, BLAS gets the flags). Shapes as NumPy's
 * matmul for rank <= 2 (a vector is a row on the left, a column on the right).
 * Integers use a plain loop with wrapping arithmetic. The flag of a rank-1
 * operand is ignored; an inner dim of 0 gives zeros. bool is a type error.
 * Two f32 matrices of at most 2^27 multiply-adds go to fedvm's own kernel
 * (kernels_gemm.c): every element is the chain acc = fmaf(A(i,l), B(l,j),
 * acc) over l in order, the same bits on every CPU. Other float products go
 * to cblas_sgemm/dgemm/gemv/dot; their results are those of the BLAS library
 * (its blocking and threading may order the sums differently from a naive
 * loop). */
fvm_status fvm_k_matmul(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *out, fvm_diag *d);

/* An update made with its product: out = base - scale * (op(a) op(b)),
 * or with scale NULL out = base + (op(a) op(b)) (an accumulation), for f32
 * matrices (a, b, base and out of rank 2, base and out of the product's
 * shape, not overlapping, but out may be base itself where
 * fvm_k_matmul_update_in_place says so) and an f32 scalar scale. The bits are those of
 * fvm_k_matmul into a tensor p, then sub(base, mul(scale, p)) (add(base,
 * p)) element by element in f32; fedvm's own kernel makes the update as it
 * stores each tile of the product (fvm_gemm_f32_then), the product is
 * never stored. Anything else is a type error (the interpreter then runs
 * the instructions one by one). */
fvm_status fvm_k_matmul_update(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *scale,
                               const fvm_tensor *base, fvm_tensor *out, fvm_diag *d);
/* May fvm_k_matmul_update's out be its base (the update in place, no new
 * buffer)? Where fedvm's own kernel makes the product in one block of k:
 * then each element of base is read just before its own element is written. */
bool fvm_k_matmul_update_in_place(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *base);

/* Reduction over the axes whose bit is set in axes_mask (bit i = axis i).
 * out has x's shape with those axes removed (or kept as 1 - the caller
 * decides; the kernel only looks at the element count and order). Float sums
 * (and MEAN's) add in NumPy's order, in the dtype (format/SPEC.md, sum): when
 * the last axis longer than 1 is reduced, NumPy's pairwise summation over
 * each row of the trailing reduced axes, the rows of an output added in index
 * order; when it is kept, element by element in index order along the
 * reduced axes. Integer sums, MAX and MIN fold in index order. MAX/MIN
 * propagate NaN. Dtypes: i32/i64/u32/f32/f64 (MEAN: floats; integer sums
 * wrap); bool is a type error. MEAN divides the sum by the count. Over zero
 * elements: SUM gives 0, MEAN NaN, MAX/MIN a runtime error. */
fvm_status fvm_k_reduce(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out, fvm_diag *d);

/* Index (i64) of the first maximum along axis; out is x's shape without axis.
 * NaN counts as the maximum (the first NaN wins). Any dtype. A zero-length
 * axis is a runtime error. */
fvm_status fvm_k_argmax(const fvm_tensor *x, int axis, fvm_tensor *out, fvm_diag *d);

/* Running sums along axis (NumPy's cumsum with that axis): out (x's dtype
 * and shape) holds at position i along the axis x[0] + x[1] + ... + x[i],
 * added in that order from the first element (copied, not added to 0); with
 * reverse, x[i] + x[i+1] + ... + x[n-1], added from the last element down.
 * Dtypes: u8/i32/i64/u32/f32/f64 (integer sums wrap); bool is a type error.
 * out may be x itself (in place). */
fvm_status fvm_k_cumsum(const fvm_tensor *x, int axis, bool reverse, fvm_tensor *out, fvm_diag *d);

/* out[i_perm[0], ..] = x[i_0, ..]: out.shape[k] = x.shape[perm[k]]. */
fvm_status fvm_k_transpose(const fvm_tensor *x, const int *perm, fvm_tensor *out, fvm_diag *d);

/* out = x[start[0]:start[0]+out.shape[0]*step[0]:step[0], ...] per axis
 * (steps >= 1): out.shape[k] elements starting at start[k], step[k] apart,
 * all inside x (the caller's bounds; asserted). */
fvm_status fvm_k_slice(const fvm_tensor *x, const int64_t *start, const int64_t *step, fvm_tensor *out, fvm_diag *d);

/* out = x broadcast to out's shape (NumPy's rule; out has x's dtype):
 * each element of out a copy of the one of x it broadcasts from. */
fvm_status fvm_k_broadcast(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d);

/* The adjoint of fvm_k_slice: out (x's dtype and rank) is zeros but for the
 * positions fvm_k_slice with start and step would read from it, which hold
 * x's elements (x has the slice's shape; every position inside out, the
 * caller's bounds, asserted). */
fvm_status fvm_k_unslice(const fvm_tensor *x, const int64_t *start, const int64_t *step, fvm_tensor *out, fvm_diag *d);

/* Concatenation of n >= 1 tensors (same dtype, same shape except along
 * axis); inputs of differing dtypes are a type error. */
fvm_status fvm_k_concat(const fvm_tensor *const *xs, int n, int axis, fvm_tensor *out, fvm_diag *d);

/* NumPy take: out = x.take(idx, axis): out.shape = x.shape[:axis] + idx.shape +
 * x.shape[axis+1:]. idx is i32 or i64; an index outside [0, x.shape[axis]) is
 * a runtime error naming the index and the range (no negative indices; all are
 * checked before anything is written). */
fvm_status fvm_k_gather(const fvm_tensor *x, const fvm_tensor *idx, int axis, fvm_tensor *out, fvm_diag *d);

/* out[..., i_axis, ...] = i_axis, in out's dtype (numeric; bool is a type error). */
fvm_status fvm_k_iota(int axis, fvm_tensor *out, fvm_diag *d);

/* Fills out (any dtype) with one value, converted as fvm_k_cast converts an
 * f64 (truncating and saturating for integers, NaN gives 0). */
fvm_status fvm_k_fill(double v, fvm_tensor *out, fvm_diag *d);

/* A chain of elementwise steps (vm/ir/elementwise.h's fvm_fstep) computed
 * in one pass over the output, block by block, so that no intermediate
 * tensor is made: each step is a unary, binary, select or cast kernel above,
 * or a fill, with the same arithmetic per element, so the result is exactly
 * that of the steps run one by one. Inputs broadcast together to out's
 * shape (every intermediate has it too); the last step is the result. */

/* The chain's result dtype for inputs of these dtypes (their data is not
 * read); false when a step is not defined for its operands' dtypes, for an
 * integer division (whose divisor must be checked), or past the limits
 * above: run the steps one by one instead. */
bool fvm_k_fused_dtype(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_dtype *out);

/* out: the broadcast shape of the inputs and the chain's dtype. out may be
 * exactly one of the inputs of its shape and dtype (in-place), as the
 * elementwise kernels allow. */
fvm_status fvm_k_fused(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_tensor *out,
                       fvm_diag *d);

#endif
