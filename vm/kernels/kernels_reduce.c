/* kernels_reduce.c - reductions over axes (sum, mean, max, min), argmax and running sums (cumsum). */
#include <math.h>
#include <stdint.h>

#include "kernels_impl.h"

/* ---- reduce -------------------------------------------------------------- */

/* x's dims coalesced into alternating runs of kept and reduced axes (size-1
 * dims dropped). x is read once in memory order; each element is combined
 * into its output slot, so every output sees its inputs in index order along
 * the reduced axes, and a kept innermost run is an elementwise loop over
 * contiguous rows. */
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

/* COMBINE(a, v) folds element v into the running value a. An output's first
 * element is copied (not combined with an identity), so a sum of one -0.0 is
 * -0.0 and a max needs no -inf. */
#define RED_FN(name, T, COMBINE) \
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
                int64_t j = 0; \
                T a; \
                if (started) { \
                    a = o[0]; \
                } else { \
                    a = x[0]; \
                    j = 1; \
                } \
                for (; j < n; j++) { \
                    T v = x[j]; \
                    a = (COMBINE); \
                } \
                o[0] = a; \
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

typedef void (*red_fn)(const void *x, void *out, const red_plan *p);

/* Floats: max/min propagate NaN. Signed sums wrap in the unsigned type. */
#define FLOAT_RED(S, T) \
    RED_FN(sum_##S, T, a + v) \
    RED_FN(max_##S, T, (v > a || v != v) ? v : a) \
    RED_FN(min_##S, T, (v < a || v != v) ? v : a)
#define INT_RED(S, T, UT) \
    RED_FN(sum_##S, T, (T)((UT)a + (UT)v)) \
    RED_FN(max_##S, T, v > a ? v : a) \
    RED_FN(min_##S, T, v < a ? v : a)

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

fvm_status fvm_k_reduce(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "reduce: x");
    KREQUIRE_TENSOR(d, out, "reduce: out");
    if ((unsigned)op >= FVM_RED_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "unknown reduction %d", (int)op);
    const char *name = reduce_names[op];
    red_fn f = reduce_table[op][x->dtype];
    if (!f)
        return kernel_type_error(d, name, x->dtype);
    int rank = x->shape.rank;
    KREQUIRE(d, (axes_mask >> rank) == 0, "%s: axes mask 0x%x names an axis beyond rank %d", name, (unsigned)axes_mask,
             rank);
    int64_t kept = 1, nred = 1;
    for (int i = 0; i < rank; i++) {
        if ((axes_mask >> i) & 1)
            nred *= x->shape.d[i];
        else
            kept *= x->shape.d[i];
    }
    KREQUIRE(d, out->dtype == x->dtype && fvm_tensor_count(out) == kept,
             "%s: out must have x's dtype and the kept axes' element count", name);
    if (kept == 0)
        return FVM_OK;
    if (nred == 0) { /* an empty reduction for every output */
        if (op == FVM_RED_MAX || op == FVM_RED_MIN)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "%s over an empty axis has no value", name);
        fvm_k_fill(op == FVM_RED_MEAN ? NAN : 0.0, out, d);
        return FVM_OK;
    }
    red_plan p;
    red_plan_init(&p, &x->shape, axes_mask);
    f(kernel_bytes(x), kernel_bytes(out), &p);
    if (op == FVM_RED_MEAN) {
        /* divide (not multiply by a reciprocal) so a mean of equal values is exact */
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
