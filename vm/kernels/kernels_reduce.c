/* kernels_reduce.c - reductions over axes (sum, mean, max, min), argmax and running sums (cumsum). */
#include <math.h>
#include <stdint.h>

#include "kernels_impl.h"

/* ---- pairwise sums ----------------------------------------------------- */

/* NumPy's pairwise summation (pairwise_sum in numpy/_core/src/umath/
 * loops_utils.h.src), the same additions in the same order, so a float sum
 * has NumPy's bits: fewer than 8 elements are added one by one from the
 * first; up to FVM_PAIRWISE_BLOCK, eight running sums r[k] take the
 * elements k, k + 8, k + 16, ... of the whole multiples of 8, are combined
 * as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), and the last n % 8
 * elements are added one by one; a longer run is cut after its first
 * n2 = n / 2 - (n / 2) % 8 elements, each part summed so, and the two
 * sums added. The eight running sums are the lanes of one vector add (two
 * for f64 on AVX2): each lane adds in its own order, so every copy gives
 * the same bits. NumPy starts the short loop from -0.0, which changes no
 * value (-0.0 + v is v), and its reductions add the result to an output
 * filled with +0.0, so NumPy's sum of negative zeros is +0.0 where this
 * is -0.0 (the sign NumPy's own test of it expects, marked there as a
 * known failure). */
#define PAIRWISE_BLOCK_FN(name, T) \
    KERNEL_CLONES static T name(const T *x, int64_t n) \
    { \
        T r[8]; \
        for (int k = 0; k < 8; k++) \
            r[k] = x[k]; \
        int64_t i = 8; \
        for (; i + 8 <= n; i += 8) \
            for (int k = 0; k < 8; k++) \
                r[k] += x[i + k]; \
        T s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
        for (; i < n; i++) \
            s += x[i]; \
        return s; \
    }

/* Two sibling blocks, x[0, n) (n a multiple of 8) and y[0, m) with m >= n,
 * summed as PAIRWISE_BLOCK_FN sums each, side by side (two independent
 * chains of vector adds), and their sums added. */
#define PAIRWISE_PAIR_FN(name, T) \
    KERNEL_CLONES static T name(const T *x, int64_t n, const T *y, int64_t m) \
    { \
        T r[8], q[8]; \
        for (int k = 0; k < 8; k++) { \
            r[k] = x[k]; \
            q[k] = y[k]; \
        } \
        int64_t i = 8; \
        for (; i < n; i += 8) \
            for (int k = 0; k < 8; k++) { \
                r[k] += x[i + k]; \
                q[k] += y[i + k]; \
            } \
        for (; i + 8 <= m; i += 8) \
            for (int k = 0; k < 8; k++) \
                q[k] += y[i + k]; \
        T s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
        T t = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7])); \
        for (; i < m; i++) \
            t += y[i]; \
        return s + t; \
    }

/* The sum of x[0, n), n >= 1. Runs of fewer than 16 elements (no whole
 * block of 8 after the first) are summed inline, as a block of 8 with no
 * loop; a run longer than a block is cut by name##_cut. */
#define PAIRWISE_FN(name, block, pair, T) \
    static T name##_cut(const T *x, int64_t n); \
    static inline T name(const T *x, int64_t n) \
    { \
        T s; \
        int64_t i; \
        if (n < 8) { \
            s = x[0]; \
            i = 1; \
        } else if (n < 16) { \
            s = ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7])); \
            i = 8; \
        } else if (n <= FVM_PAIRWISE_BLOCK) { \
            return block(x, n); \
        } else { \
            return name##_cut(x, n); \
        } \
        for (; i < n; i++) \
            s += x[i]; \
        return s; \
    } \
    static T name##_cut(const T *x, int64_t n) \
    { \
        int64_t n2 = n / 2; \
        n2 -= n2 % 8; \
        if (n - n2 <= FVM_PAIRWISE_BLOCK) \
            return pair(x, n2, x + n2, n - n2); \
        return name(x, n2) + name##_cut(x + n2, n - n2); \
    }

PAIRWISE_BLOCK_FN(pairwise_block_f32, float)
PAIRWISE_BLOCK_FN(pairwise_block_f64, double)
PAIRWISE_PAIR_FN(pairwise_pair_f32, float)
PAIRWISE_PAIR_FN(pairwise_pair_f64, double)
PAIRWISE_FN(pairwise_f32, pairwise_block_f32, pairwise_pair_f32, float)
PAIRWISE_FN(pairwise_f64, pairwise_block_f64, pairwise_pair_f64, double)

/* ---- reduce -------------------------------------------------------------- */

/* x's dims coalesced into alternating runs of kept and reduced axes (size-1
 * dims dropped). x is read once in memory order, a row of the innermost run
 * at a time. When that run is reduced, each row is one value (for float
 * sums its pairwise sum) combined into its output slot; when it is kept,
 * each element of the row is combined into its own slot, an elementwise
 * loop. Either way every output combines its rows (or elements) in index
 * order along the outer reduced axes: NumPy's order for a C-contiguous
 * array, whose reduction loop runs along the last axis, pairwise when that
 * axis is reduced and a running sum per output otherwise. */
typedef struct red_plan {
    int rank; /* >= 1 */
    int64_t shape[FVM_MAX_RANK];
    bool red[FVM_MAX_RANK];
    int64_t ostride[FVM_MAX_RANK]; /* out element stride, 0 for reduced runs */
} red_plan;

static void red_plan_init(red_plan *p, const fvm_dims *x, uint32_t mask)
{
    p->rank = 0;
    for (int i = 0; i < x->rank; i++) {
        int64_t n = x->d[i];
        if (n == 1)
            continue;
        bool r = (mask >> i) & 1;
        if (p->rank > 0 && p->red[p->rank - 1] == r) {
            p->shape[p->rank - 1] *= n;
        } else {
            p->shape[p->rank] = n;
            p->red[p->rank] = r;
            p->rank++;
        }
    }
    if (p->rank == 0) { /* one element: a copy */
        p->rank = 1;
        p->shape[0] = 1;
        p->red[0] = false;
    }
    int64_t s = 1;
    for (int i = p->rank - 1; i >= 0; i--) {
        p->ostride[i] = p->red[i] ? 0 : s;
        if (!p->red[i])
            s *= p->shape[i];
    }
}

/* ROW(x, n) is the value of a run of n >= 1 contiguous reduced elements;
 * COMBINE(a, v) adds a row's value v (or, where the innermost axis is kept,
 * an element) to the running value a of its output, in index order. An
 * output's first value is copied (not combined with an identity), so a sum
 * of one -0.0 is -0.0 and a max needs no -inf. */
#define RED_FN(name, T, ROW, COMBINE) \
    static void name(const void *px, void *pout, const red_plan *p) \
    { \
        const T *x = px; \
        T *out = pout; \
        int r = p->rank - 1; \
        int64_t n = p->shape[r], rows = 1; \
        for (int i = 0; i < r; i++) \
            rows *= p->shape[i]; \
        int64_t idx[FVM_MAX_RANK] = {0}, oo = 0; \
        int started = 0; /* reduced outer axes at a nonzero index */ \
        for (int64_t row = 0; row < rows; row++, x += n) { \
            T *o = out + oo; \
            if (p->red[r]) { \
                T v = ROW(x, n); \
                if (started) { \
                    T a = o[0]; \
                    o[0] = (COMBINE); \
                } else { \
                    o[0] = v; \
                } \
            } else if (!started) { \
                memcpy(o, x, (size_t)n * sizeof(T)); \
            } else { \
                KERNEL_FOR(j, n, T a = o[j]; T v = x[j]; o[j] = (COMBINE);); \
            } \
            for (int i = r - 1; i >= 0; i--) { \
                oo += p->ostride[i]; \
                if (idx[i]++ == 0 && p->red[i]) \
                    started++; \
                if (idx[i] < p->shape[i]) \
                    break; \
                oo -= p->ostride[i] * p->shape[i]; \
                idx[i] = 0; \
                if (p->red[i]) \
                    started--; \
            } \
        } \
    }

/* A row folded element by element from its first, COMBINE(a, v) as above:
 * max, min and integer sums, whose results do not depend on the grouping
 * (integer sums wrap, which is exact modulo 2^bits). */
#define FOLD_FN(name, T, COMBINE) \
    static T name(const T *x, int64_t n) \
    { \
        T a = x[0]; \
        for (int64_t j = 1; j < n; j++) { \
            T v = x[j]; \
            a = (COMBINE); \
        } \
        return a; \
    }

typedef void (*red_fn)(const void *x, void *out, const red_plan *p);

/* Floats: sums pairwise along the innermost reduced run, max/min propagate
 * NaN. Signed sums wrap in the unsigned type. */
#define FLOAT_RED(S, T) \
    RED_FN(sum_##S, T, pairwise_##S, a + v) \
    FOLD_FN(fold_max_##S, T, (v > a || v != v) ? v : a) \
    RED_FN(max_##S, T, fold_max_##S, (v > a || v != v) ? v : a) \
    FOLD_FN(fold_min_##S, T, (v < a || v != v) ? v : a) \
    RED_FN(min_##S, T, fold_min_##S, (v < a || v != v) ? v : a)
#define INT_RED(S, T, UT) \
    FOLD_FN(fold_sum_##S, T, (T)((UT)a + (UT)v)) \
    RED_FN(sum_##S, T, fold_sum_##S, (T)((UT)a + (UT)v)) \
    FOLD_FN(fold_max_##S, T, v > a ? v : a) \
    RED_FN(max_##S, T, fold_max_##S, v > a ? v : a) \
    FOLD_FN(fold_min_##S, T, v < a ? v : a) \
    RED_FN(min_##S, T, fold_min_##S, v < a ? v : a)

FLOAT_RED(f32, float)
FLOAT_RED(f64, double)
INT_RED(i32, int32_t, uint32_t)
INT_RED(i64, int64_t, uint64_t)
INT_RED(u32, uint32_t, uint32_t)
INT_RED(u8, uint8_t, uint8_t)

#define RED_NUM_ROW(op) \
    { \
        [FVM_DTYPE_U8] = op##_u8, [FVM_DTYPE_I32] = op##_i32, [FVM_DTYPE_I64] = op##_i64, [FVM_DTYPE_U32] = op##_u32, \
        [FVM_DTYPE_F32] = op##_f32, [FVM_DTYPE_F64] = op##_f64 \
    }

/* MEAN is a sum followed by a division, floats only. */
static const red_fn reduce_table[FVM_RED_COUNT][FVM_DTYPE_COUNT] = {
    [FVM_RED_SUM] = RED_NUM_ROW(sum),
    [FVM_RED_MEAN] = {[FVM_DTYPE_F32] = sum_f32, [FVM_DTYPE_F64] = sum_f64},
    [FVM_RED_MAX] = RED_NUM_ROW(max),
    [FVM_RED_MIN] = RED_NUM_ROW(min),
};

static const char *const reduce_names[FVM_RED_COUNT] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"};

fvm_status fvm_kernel_reduce_check(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out,
                                   int64_t *nred, fvm_diag *d)
{
    *nred = 0;
    KREQUIRE_TENSOR(d, x, "reduce: x");
    KREQUIRE_TENSOR(d, out, "reduce: out");
    if ((unsigned)op >= FVM_RED_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "unknown reduction %d", (int)op);
    const char *name = reduce_names[op];
    if (!reduce_table[op][x->dtype])
        return kernel_type_error(d, name, x->dtype);
    int rank = x->shape.rank;
    KREQUIRE(d, (axes_mask >> rank) == 0, "%s: axes mask 0x%x names an axis beyond rank %d", name, (unsigned)axes_mask,
             rank);
    int64_t kept = 1, n = 1;
    for (int i = 0; i < rank; i++) {
        if ((axes_mask >> i) & 1)
            n *= x->shape.d[i];
        else
            kept *= x->shape.d[i];
    }
    KREQUIRE(d, out->dtype == x->dtype && fvm_tensor_count(out) == kept,
             "%s: out must have x's dtype and the kept axes' element count", name);
    if (kept == 0)
        return FVM_OK;
    if (n == 0) { /* an empty reduction for every output */
        if (op == FVM_RED_MAX || op == FVM_RED_MIN)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "%s over an empty axis has no value", name);
        fvm_k_fill(op == FVM_RED_MEAN ? NAN : 0.0, out, d);
        return FVM_OK;
    }
    *nred = n;
    return FVM_OK;
}

fvm_status fvm_k_reduce(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out, fvm_diag *d)
{
    int64_t nred;
    fvm_status s = fvm_kernel_reduce_check(op, x, axes_mask, out, &nred, d);
    if (s || nred == 0)
        return s;
    red_plan p;
    red_plan_init(&p, &x->shape, axes_mask);
    reduce_table[op][x->dtype](kernel_bytes(x), kernel_bytes(out), &p);
    if (op == FVM_RED_MEAN) {
        /* divide (not multiply by a reciprocal) so a mean of equal values is exact */
        int64_t kept = fvm_tensor_count(out);
        if (x->dtype == FVM_DTYPE_F32) {
            float *o = (float *)kernel_bytes(out), c = (float)nred;
            KERNEL_FOR(i, kept, o[i] /= c;);
        } else {
            double *o = (double *)kernel_bytes(out), c = (double)nred;
            KERNEL_FOR(i, kept, o[i] /= c;);
        }
    }
    return FVM_OK;
}

/* ---- argmax -------------------------------------------------------------- */

/* BETTER(v, c): v replaces the best so far c. For floats a NaN is the maximum
 * and the first NaN stays. With several columns (inner > 1) the best indices
 * live in out and the best values are re-read from x, so no scratch memory. */
#define ARGMAX_FN(name, T, BETTER) \
    static void name(const void *px, int64_t *out, int64_t outer, int64_t len, int64_t inner) \
    { \
        const T *xs = px; \
        for (int64_t r = 0; r < outer; r++, xs += len * inner, out += inner) { \
            if (inner == 1) { \
                int64_t best = 0; \
                T c = xs[0]; \
                for (int64_t i = 1; i < len; i++) { \
                    T v = xs[i]; \
                    if (BETTER) { \
                        best = i; \
                        c = v; \
                    } \
                } \
                out[0] = best; \
                continue; \
            } \
            for (int64_t j = 0; j < inner; j++) \
                out[j] = 0; \
            for (int64_t i = 1; i < len; i++) { \
                const T *row = xs + i * inner; \
                for (int64_t j = 0; j < inner; j++) { \
                    T v = row[j], c = xs[out[j] * inner + j]; \
                    if (BETTER) \
                        out[j] = i; \
                } \
            } \
        } \
    }

typedef void (*argmax_fn)(const void *x, int64_t *out, int64_t outer, int64_t len, int64_t inner);

ARGMAX_FN(argmax_f32, float, c == c && (v > c || v != v))
ARGMAX_FN(argmax_f64, double, c == c && (v > c || v != v))
ARGMAX_FN(argmax_i32, int32_t, v > c)
ARGMAX_FN(argmax_i64, int64_t, v > c)
ARGMAX_FN(argmax_u32, uint32_t, v > c)
ARGMAX_FN(argmax_b, uint8_t, v > c)
ARGMAX_FN(argmax_u8, uint8_t, v > c)

static const argmax_fn argmax_table[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_BOOL] = argmax_b,  [FVM_DTYPE_I32] = argmax_i32, [FVM_DTYPE_I64] = argmax_i64,
    [FVM_DTYPE_U32] = argmax_u32, [FVM_DTYPE_F32] = argmax_f32, [FVM_DTYPE_F64] = argmax_f64,
    [FVM_DTYPE_U8] = argmax_u8,
};

fvm_status fvm_k_argmax(const fvm_tensor *x, int axis, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "argmax: x");
    KREQUIRE_TENSOR(d, out, "argmax: out");
    int rank = x->shape.rank;
    KREQUIRE(d, axis >= 0 && axis < rank, "argmax: axis %d out of range for rank %d", axis, rank);
    fvm_dims want = {.rank = rank - 1};
    for (int i = 0, k = 0; i < rank; i++)
        if (i != axis)
            want.d[k++] = x->shape.d[i];
    KREQUIRE(d, out->dtype == FVM_DTYPE_I64 && fvm_dims_equal(&out->shape, &want),
             "argmax: out must be i64 with x's shape without the axis");
    int64_t len = x->shape.d[axis];
    if (len == 0)
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "argmax over axis %d of length 0", axis);
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    argmax_table[x->dtype](kernel_bytes(x), (int64_t *)kernel_bytes(out), kernel_span(&x->shape, 0, axis), len,
                           kernel_span(&x->shape, axis + 1, rank));
    return FVM_OK;
}

/* ---- cumsum -------------------------------------------------------------- */

/* Running sums along an axis of length len, between outer rows before it and
 * inner elements after it. Position i of the sum (counted from the end with
 * reverse) is the previous position's value plus x's element there; the
 * first is x's element copied (so a lone -0.0 stays -0.0). With inner > 1
 * each step adds two rows of inner elements, an elementwise loop. */
#define CUMSUM_FN(name, T, ADD) \
    static void name(const void *px, void *pout, int64_t outer, int64_t len, int64_t inner, bool reverse) \
    { \
        const T *x = px; \
        T *out = pout; \
        for (int64_t r = 0; r < outer; r++, x += len * inner, out += len * inner) { \
            if (inner == 1) { \
                int64_t i = reverse ? len - 1 : 0, step = reverse ? -1 : 1; \
                T a = x[i]; \
                out[i] = a; \
                for (int64_t k = 1; k < len; k++) { \
                    i += step; \
                    T v = x[i]; \
                    a = (ADD); \
                    out[i] = a; \
                } \
                continue; \
            } \
            int64_t first = reverse ? len - 1 : 0; \
            memmove(out + first * inner, x + first * inner, (size_t)inner * sizeof(T)); \
            for (int64_t k = 1; k < len; k++) { \
                int64_t at = reverse ? len - 1 - k : k, prev = reverse ? at + 1 : at - 1; \
                const T *xr = x + at * inner, *pr = out + prev * inner; \
                T *orow = out + at * inner; \
                KERNEL_FOR(j, inner, T a = pr[j]; T v = xr[j]; orow[j] = (ADD);); \
            } \
        } \
    }

typedef void (*cumsum_fn)(const void *x, void *out, int64_t outer, int64_t len, int64_t inner, bool reverse);

/* Floats add in their dtype; integers wrap (signed ones in the unsigned type). */
CUMSUM_FN(cumsum_f32, float, a + v)
CUMSUM_FN(cumsum_f64, double, a + v)
CUMSUM_FN(cumsum_i32, int32_t, (int32_t)((uint32_t)a + (uint32_t)v))
CUMSUM_FN(cumsum_i64, int64_t, (int64_t)((uint64_t)a + (uint64_t)v))
CUMSUM_FN(cumsum_u32, uint32_t, (uint32_t)(a + v))
CUMSUM_FN(cumsum_u8, uint8_t, (uint8_t)(a + v))

static const cumsum_fn cumsum_table[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_U8] = cumsum_u8,   [FVM_DTYPE_I32] = cumsum_i32, [FVM_DTYPE_I64] = cumsum_i64,
    [FVM_DTYPE_U32] = cumsum_u32, [FVM_DTYPE_F32] = cumsum_f32, [FVM_DTYPE_F64] = cumsum_f64,
};

fvm_status fvm_k_cumsum(const fvm_tensor *x, int axis, bool reverse, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "cumsum: x");
    KREQUIRE_TENSOR(d, out, "cumsum: out");
    int rank = x->shape.rank;
    KREQUIRE(d, axis >= 0 && axis < rank, "cumsum: axis %d out of range for rank %d", axis, rank);
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &x->shape),
             "cumsum: out must have x's dtype and shape");
    cumsum_fn f = cumsum_table[x->dtype];
    if (!f)
        return kernel_type_error(d, "cumsum", x->dtype);
    if (fvm_tensor_count(x) == 0)
        return FVM_OK;
    f(kernel_bytes(x), kernel_bytes(out), kernel_span(&x->shape, 0, axis), x->shape.d[axis],
      kernel_span(&x->shape, axis + 1, rank), reverse);
    return FVM_OK;
}
