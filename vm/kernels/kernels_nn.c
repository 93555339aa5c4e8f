/* kernels_nn.c - softmax and log-softmax, softmax cross-entropy, scatter-add and dropout. */
#include <math.h>
#include <stdint.h>

#include "kernels_impl.h"
#include "kernels_nn.h"
#include "../core/prng.h"

static bool is_float(fvm_dtype t)
{
    return t == FVM_DTYPE_F32 || t == FVM_DTYPE_F64;
}

/* ---- softmax ------------------------------------------------------------- */

/* Lines along the softmax axis are processed SM_BLOCK at a time: the lines
 * of one block are neighbours in memory (inner > 1) or one line each row
 * (inner == 1), and their maxima and sums live on the stack. */
enum { SM_BLOCK = 256 };

/* x viewed as [outer, len, inner]; the axis is the middle one. For each line
 * (o, :, j): m = its maximum (NaN propagates through the exp anyway), s = sum
 * of exp(x - m) in index order, then out = exp(x - m) / s, or
 * (x - m) - log(s). out may not overlap x except exactly. */
#define SOFTMAX_FN(S, T, EXP, LOG) \
    static void softmax_##S(const T *x, T *out, int64_t outer, int64_t len, int64_t inner, bool lg) \
    { \
        T m[SM_BLOCK], s[SM_BLOCK]; \
        for (int64_t o = 0; o < outer; o++) { \
            const T *xo = x + o * len * inner; \
            T *oo = out + o * len * inner; \
            for (int64_t j0 = 0; j0 < inner; j0 += SM_BLOCK) { \
                int64_t nb = inner - j0 < SM_BLOCK ? inner - j0 : SM_BLOCK; \
                const T *xb = xo + j0; \
                T *ob = oo + j0; \
                for (int64_t j = 0; j < nb; j++) \
                    m[j] = xb[j]; \
                for (int64_t a = 1; a < len; a++) \
                    for (int64_t j = 0; j < nb; j++) { \
                        T v = xb[a * inner + j]; \
                        m[j] = v > m[j] ? v : m[j]; \
                    } \
                for (int64_t j = 0; j < nb; j++) \
                    s[j] = 0; \
                for (int64_t a = 0; a < len; a++) \
                    for (int64_t j = 0; j < nb; j++) { \
                        T e = EXP(xb[a * inner + j] - m[j]); \
                        s[j] += e; \
                        if (!lg) \
                            ob[a * inner + j] = e; \
                    } \
                if (lg) { \
                    for (int64_t j = 0; j < nb; j++) \
                        s[j] = LOG(s[j]); \
                    for (int64_t a = 0; a < len; a++) \
                        for (int64_t j = 0; j < nb; j++) \
                            ob[a * inner + j] = (xb[a * inner + j] - m[j]) - s[j]; \
                } else { \
                    for (int64_t a = 0; a < len; a++) \
                        for (int64_t j = 0; j < nb; j++) \
                            ob[a * inner + j] /= s[j]; \
                } \
            } \
        } \
    }

/* For a last-axis softmax (inner == 1) the block above would hold one line;
 * this form keeps each line's loops contiguous. */
#define SOFTMAX_ROWS_FN(S, T, EXP, LOG) \
    static void softmax_rows_##S(const T *x, T *out, int64_t rows, int64_t len, bool lg) \
    { \
        for (int64_t r = 0; r < rows; r++, x += len, out += len) { \
            T m = x[0], s = 0; \
            for (int64_t a = 1; a < len; a++) \
                m = x[a] > m ? x[a] : m; \
            for (int64_t a = 0; a < len; a++) { \
                T e = EXP(x[a] - m); \
                s += e; \
                if (!lg) \
                    out[a] = e; \
            } \
            if (lg) { \
                T ls = LOG(s); \
                for (int64_t a = 0; a < len; a++) \
                    out[a] = (x[a] - m) - ls; \
            } else { \
                for (int64_t a = 0; a < len; a++) \
                    out[a] /= s; \
            } \
        } \
    }

SOFTMAX_FN(f32, float, expf, logf)
SOFTMAX_FN(f64, double, exp, log)
SOFTMAX_ROWS_FN(f32, float, expf, logf)
SOFTMAX_ROWS_FN(f64, double, exp, log)

fvm_status fvm_k_softmax(const fvm_tensor *x, int axis, bool log, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "softmax: x");
    KREQUIRE_TENSOR(d, out, "softmax: out");
    const char *what = log ? "log_softmax" : "softmax";
    if (!is_float(x->dtype))
        return kernel_type_error(d, what, x->dtype);
    int rank = x->shape.rank;
    KREQUIRE(d, axis >= 0 && axis < rank, "%s: axis %d out of range for rank %d", what, axis, rank);
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &x->shape),
             "%s: out must have x's dtype and shape", what);
    if (fvm_tensor_count(x) == 0)
        return FVM_OK;
    int64_t outer = kernel_span(&x->shape, 0, axis), len = x->shape.d[axis];
    int64_t inner = kernel_span(&x->shape, axis + 1, rank);
    const void *xp = kernel_bytes(x);
    void *op = kernel_bytes(out);
    if (x->dtype == FVM_DTYPE_F32) {
        if (inner == 1)
            softmax_rows_f32(xp, op, outer, len, log);
        else
            softmax_f32(xp, op, outer, len, inner, log);
    } else {
        if (inner == 1)
            softmax_rows_f64(xp, op, outer, len, log);
        else
            softmax_f64(xp, op, outer, len, inner, log);
    }
    return FVM_OK;
}

/* ---- softmax cross-entropy ----------------------------------------------- */

static inline int64_t index_at(const unsigned char *p, bool wide, int64_t i)
{
    if (wide) {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

/* loss[r] = log(s) - (x[label] - m) over rows of K logits, as in softmax. */
#define XENT_FN(S, T, EXP, LOG) \
    static void xent_##S(const T *x, const unsigned char *lab, bool wide, T *loss, int64_t rows, int64_t k) \
    { \
        for (int64_t r = 0; r < rows; r++, x += k) { \
            T m = x[0], s = 0; \
            for (int64_t a = 1; a < k; a++) \
                m = x[a] > m ? x[a] : m; \
            for (int64_t a = 0; a < k; a++) \
                s += EXP(x[a] - m); \
            loss[r] = LOG(s) - (x[index_at(lab, wide, r)] - m); \
        } \
    }

XENT_FN(f32, float, expf, logf)
XENT_FN(f64, double, exp, log)

fvm_status fvm_k_softmax_xent(const fvm_tensor *logits, const fvm_tensor *labels, fvm_tensor *loss, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, logits, "softmax_xent: logits");
    KREQUIRE_TENSOR(d, labels, "softmax_xent: labels");
    KREQUIRE_TENSOR(d, loss, "softmax_xent: loss");
    if (!is_float(logits->dtype))
        return kernel_type_error(d, "softmax_xent", logits->dtype);
    if (labels->dtype != FVM_DTYPE_I32 && labels->dtype != FVM_DTYPE_I64)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "softmax_xent: labels must be i32 or i64, not %s",
                            fvm_dtype_name(labels->dtype));
    int rank = logits->shape.rank;
    KREQUIRE(d, rank >= 1, "softmax_xent: logits must have rank >= 1");
    fvm_dims want = logits->shape;
    want.rank = rank - 1;
    KREQUIRE(d, fvm_dims_equal(&labels->shape, &want),
             "softmax_xent: labels must have logits' shape without the last axis");
    KREQUIRE(d, loss->dtype == logits->dtype && fvm_dims_equal(&loss->shape, &want),
             "softmax_xent: loss must have logits' dtype and labels' shape");
    int64_t rows = fvm_tensor_count(labels), k = logits->shape.d[rank - 1];
    if (rows == 0)
        return FVM_OK;
    const unsigned char *lab = kernel_bytes(labels);
    bool wide = labels->dtype == FVM_DTYPE_I64;
    for (int64_t r = 0; r < rows; r++) {
        int64_t l = index_at(lab, wide, r);
        if (l < 0 || l >= k)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                                "softmax_xent: label %lld (element %lld of the labels) is outside the range [0, %lld)",
                                (long long)l, (long long)r, (long long)k);
    }
    /* k >= 1 here: every label is inside [0, k) */
    if (logits->dtype == FVM_DTYPE_F32)
        xent_f32((const float *)(const void *)kernel_bytes(logits), lab, wide, (float *)(void *)kernel_bytes(loss),
                 rows, k);
    else
        xent_f64((const double *)(const void *)kernel_bytes(logits), lab, wide, (double *)(void *)kernel_bytes(loss),
                 rows, k);
    return FVM_OK;
}

/* ---- scatter-add --------------------------------------------------------- */

#define SCATTER_FN(S, T) \
    static void scatter_##S(const unsigned char *ip, bool wide, int64_t nidx, const T *u, T *out, int64_t outer, \
                            int64_t len, int64_t inner) \
    { \
        for (int64_t r = 0; r < outer; r++) { \
            T *dst = out + r * len * inner; \
            for (int64_t t = 0; t < nidx; t++, u += inner) { \
                T *o = dst + index_at(ip, wide, t) * inner; \
                KERNEL_FOR(e, inner, o[e] += u[e];); \
            } \
        } \
    }

SCATTER_FN(f32, float)
SCATTER_FN(f64, double)

fvm_status fvm_k_scatter_add(const fvm_tensor *idx, const fvm_tensor *updates, int axis, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, idx, "scatter_add: indices");
    KREQUIRE_TENSOR(d, updates, "scatter_add: updates");
    KREQUIRE_TENSOR(d, out, "scatter_add: out");
    if (idx->dtype != FVM_DTYPE_I32 && idx->dtype != FVM_DTYPE_I64)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "scatter_add: indices must be i32 or i64, not %s",
                            fvm_dtype_name(idx->dtype));
    if (!is_float(out->dtype))
        return kernel_type_error(d, "scatter_add", out->dtype);
    if (updates->dtype != out->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "scatter_add: updates are %s, out is %s",
                            fvm_dtype_name(updates->dtype), fvm_dtype_name(out->dtype));
    int rank = out->shape.rank;
    KREQUIRE(d, axis >= 0 && axis < rank, "scatter_add: axis %d out of range for rank %d", axis, rank);
    KREQUIRE(d, rank - 1 + idx->shape.rank <= FVM_MAX_RANK, "scatter_add: updates rank exceeds %d", FVM_MAX_RANK);
    fvm_dims want = {.rank = rank - 1 + idx->shape.rank};
    int w = 0;
    for (int k = 0; k < axis; k++)
        want.d[w++] = out->shape.d[k];
    for (int k = 0; k < idx->shape.rank; k++)
        want.d[w++] = idx->shape.d[k];
    for (int k = axis + 1; k < rank; k++)
        want.d[w++] = out->shape.d[k];
    KREQUIRE(d, fvm_dims_equal(&updates->shape, &want),
             "scatter_add: updates must have shape out[:axis] + indices + out[axis+1:]");
    int64_t nidx = fvm_tensor_count(idx), len = out->shape.d[axis];
    bool wide = idx->dtype == FVM_DTYPE_I64;
    const unsigned char *ip = nidx > 0 ? kernel_bytes(idx) : NULL;
    /* every index is checked before anything is written */
    for (int64_t t = 0; t < nidx; t++) {
        int64_t k = index_at(ip, wide, t);
        if (k < 0 || k >= len)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                                "scatter_add: index %lld (element %lld of the indices) is outside the range "
                                "[0, %lld) of axis %d",
                                (long long)k, (long long)t, (long long)len, axis);
    }
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    memset(kernel_bytes(out), 0, fvm_tensor_bytes(out));
    if (fvm_tensor_count(updates) == 0)
        return FVM_OK;
    int64_t outer = kernel_span(&out->shape, 0, axis), inner = kernel_span(&out->shape, axis + 1, rank);
    if (out->dtype == FVM_DTYPE_F32)
        scatter_f32(ip, wide, nidx, (const float *)(const void *)kernel_bytes(updates),
                    (float *)(void *)kernel_bytes(out), outer, len, inner);
    else
        scatter_f64(ip, wide, nidx, (const double *)(const void *)kernel_bytes(updates),
                    (double *)(void *)kernel_bytes(out), outer, len, inner);
    return FVM_OK;
}

/* ---- dropout ------------------------------------------------------------- */

/* fvm_prng_uniform_f32's value for one 32-bit word: 23 random mantissa bits
 * under the exponent of 1.0, minus 1. */
static inline float unit_f32(uint32_t w)
{
    uint32_t b = (w >> 9) | 0x3f800000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f - 1.0f;
}

/* The draws of fvm_prng_uniform_f32(key, n) computed where they are used, so
 * no buffer is needed: hash call i (i < h = ceil(n/2)) encrypts the counter
 * pair (i, h+i) and gives draws i and h+i. Each element is read before it is
 * written, so out may be x. */
#define DROPOUT_FN(S, T) \
    static void dropout_##S(const T *x, const uint32_t key[2], double rate, T *out, int64_t n) \
    { \
        const uint32_t k[2] = {key[0], key[1]}; \
        const T keep = (T)(1.0 - rate); \
        int64_t h = n / 2 + n % 2; \
        for (int64_t i = 0; i < h; i++) { \
            const uint32_t ctr[2] = {(uint32_t)i, h + i < n ? (uint32_t)(h + i) : 0u}; \
            uint32_t w[2]; \
            fvm_threefry2x32(k, ctr, w); \
            out[i] = (double)unit_f32(w[0]) >= rate ? x[i] / keep : (T)0; \
            if (h + i < n) \
                out[h + i] = (double)unit_f32(w[1]) >= rate ? x[h + i] / keep : (T)0; \
        } \
    }

DROPOUT_FN(f32, float)
DROPOUT_FN(f64, double)

fvm_status fvm_k_dropout(const fvm_tensor *x, const uint32_t key[2], double rate, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "dropout: x");
    KREQUIRE_TENSOR(d, out, "dropout: out");
    if (!is_float(x->dtype))
        return kernel_type_error(d, "dropout", x->dtype);
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &x->shape),
             "dropout: out must have x's dtype and shape");
    if (!(rate >= 0 && rate < 1))
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "dropout: rate %g is outside [0, 1)", rate);
    int64_t n = fvm_tensor_count(x);
    if (n == 0)
        return FVM_OK;
    /* counters are 32-bit words (prng.h); tensors within FVM_MAX_TENSOR_BYTES stay below */
    KREQUIRE(d, n <= (int64_t)UINT32_MAX - 1, "dropout: %lld elements exceed the counter range", (long long)n);
    if (x->dtype == FVM_DTYPE_F32)
        dropout_f32((const float *)(const void *)kernel_bytes(x), key, rate, (float *)(void *)kernel_bytes(out), n);
    else
        dropout_f64((const double *)(const void *)kernel_bytes(x), key, rate, (double *)(void *)kernel_bytes(out), n);
    return FVM_OK;
}
