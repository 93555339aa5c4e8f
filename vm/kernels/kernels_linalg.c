/* kernels_linalg.c - matrix products: fvm_gemm_f32 or OpenBLAS for floats, wrapping loops for integers. */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>

#include "kernels_impl.h"

/* Integer products wrap: all arithmetic happens in the unsigned type. When b
 * is read along rows (b_sj == 1) the inner loop runs over a row of out and a
 * row of b; otherwise it is a dot product along k. */
#define INT_MATMUL(S, T, UT) \
    static void matmul_##S(const T *a, const T *b, T *o, const mm_shape *s) \
    { \
        for (int64_t i = 0; i < s->m; i++) { \
            T *orow = o + i * s->n; \
            const T *arow = a + i * s->a_si; \
            if (s->b_sj == 1) { \
                memset(orow, 0, (size_t)s->n * sizeof(T)); \
                for (int64_t k = 0; k < s->k; k++) { \
                    UT aik = (UT)arow[k * s->a_sk]; \
                    const T *brow = b + k * s->b_sk; \
                    KERNEL_FOR(j, s->n, orow[j] = (T)((UT)orow[j] + aik * (UT)brow[j]);); \
                } \
            } else { \
                for (int64_t j = 0; j < s->n; j++) { \
                    const T *bcol = b + j * s->b_sj; \
                    UT acc = 0; \
                    for (int64_t k = 0; k < s->k; k++) \
                        acc += (UT)arow[k * s->a_sk] * (UT)bcol[k * s->b_sk]; \
                    orow[j] = (T)acc; \
                } \
            } \
        } \
    }

INT_MATMUL(i32, int32_t, uint32_t)
INT_MATMUL(i64, int64_t, uint64_t)
INT_MATMUL(u32, uint32_t, uint32_t)
INT_MATMUL(u8, uint8_t, uint32_t) /* accumulated in 32 bits, stored modulo 256 */

/* f32/f64 through cblas; the transposes are flags, never copies. */
#define BLAS_MATMUL(S, T, P) \
    static void matmul_##S(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *out, \
                           const mm_shape *s) \
    { \
        const T *ap = (const T *)kernel_bytes(a), *bp = (const T *)kernel_bytes(b); \
        T *op = (T *)kernel_bytes(out); \
        int ra = a->shape.rank, rb = b->shape.rank; \
        if (ra == 2 && rb == 2) { \
            cblas_##P##gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)s->m, \
                            (int)s->n, (int)s->k, 1, ap, (int)a->shape.d[1], bp, (int)b->shape.d[1], 0, op, \
                            (int)s->n); \
        } else if (ra == 2) { \
            /* op(a) @ b: y need not be set when beta is 0, zeroed anyway */ \
            memset(op, 0, (size_t)s->m * sizeof(T)); \
            cblas_##P##gemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, (int)a->shape.d[0], (int)a->shape.d[1], 1, \
                            ap, (int)a->shape.d[1], bp, 1, 0, op, 1); \
        } else if (rb == 2) { \
            /* a @ op(b) = op(b)^T @ a */ \
            memset(op, 0, (size_t)s->n * sizeof(T)); \
            cblas_##P##gemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, (int)b->shape.d[0], (int)b->shape.d[1], 1, \
                            bp, (int)b->shape.d[1], ap, 1, 0, op, 1); \
        } else { \
            op[0] = cblas_##P##dot((int)s->k, ap, 1, bp, 1); \
        } \
    }

BLAS_MATMUL(f32, float, s)
BLAS_MATMUL(f64, double, d)

fvm_status fvm_kernel_matmul_shape(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *out,
                                   mm_shape *shape, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, a, "matmul: a");
    KREQUIRE_TENSOR(d, b, "matmul: b");
    KREQUIRE_TENSOR(d, out, "matmul: out");
    if (a->dtype != b->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "matmul: operand dtypes differ (%s and %s)",
                            fvm_dtype_name(a->dtype), fvm_dtype_name(b->dtype));
    if (a->dtype == FVM_DTYPE_BOOL)
        return kernel_type_error(d, "matmul", a->dtype);
    int ra = a->shape.rank, rb = b->shape.rank;
    KREQUIRE(d, ra >= 1 && ra <= 2 && rb >= 1 && rb <= 2, "matmul: operands must have rank 1 or 2 (got %d and %d)", ra,
             rb);
    const int64_t *ad = a->shape.d, *bd = b->shape.d;
    mm_shape s = {.m = 1, .n = 1};
    fvm_dims want = {0};
    if (ra == 2) {
        s.m = ta ? ad[1] : ad[0];
        s.k = ta ? ad[0] : ad[1];
        s.a_si = ta ? 1 : ad[1];
        s.a_sk = ta ? ad[1] : 1;
        want.d[want.rank++] = s.m;
    } else {
        s.k = ad[0];
        s.a_si = 0;
        s.a_sk = 1;
    }
    int64_t kb;
    if (rb == 2) {
        kb = tb ? bd[1] : bd[0];
        s.n = tb ? bd[0] : bd[1];
        s.b_sk = tb ? 1 : bd[1];
        s.b_sj = tb ? bd[1] : 1;
        want.d[want.rank++] = s.n;
    } else {
        kb = bd[0];
        s.b_sk = 1;
        s.b_sj = 0;
    }
    KREQUIRE(d, s.k == kb, "matmul: inner dims differ (%lld and %lld)", (long long)s.k, (long long)kb);
    KREQUIRE(d, out->dtype == a->dtype && fvm_dims_equal(&out->shape, &want),
             "matmul: out must have the operands' dtype and the product's shape");
    *shape = s;
    return FVM_OK;
}

fvm_status fvm_k_matmul(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *out, fvm_diag *d)
{
    mm_shape s;
    fvm_status st = fvm_kernel_matmul_shape(a, b, ta, tb, out, &s, d);
    if (st)
        return st;
    int ra = a->shape.rank, rb = b->shape.rank;
    const int64_t *ad = a->shape.d, *bd = b->shape.d;
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    if (s.k == 0) { /* an empty sum: all-zero bytes are 0 and +0.0 */
        memset(kernel_bytes(out), 0, fvm_tensor_bytes(out));
        return FVM_OK;
    }
    switch (a->dtype) {
    case FVM_DTYPE_F32:
    case FVM_DTYPE_F64:
        for (int i = 0; i < ra; i++)
            if (ad[i] > INT_MAX)
                return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "matmul: dim %lld is too large for BLAS", (long long)ad[i]);
        for (int i = 0; i < rb; i++)
            if (bd[i] > INT_MAX)
                return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "matmul: dim %lld is too large for BLAS", (long long)bd[i]);
        if (a->dtype == FVM_DTYPE_F32 && ra == 2 && rb == 2 && fvm_gemm_f32_fits(&s))
            fvm_gemm_f32(&s, (const float *)kernel_bytes(a), (const float *)kernel_bytes(b),
                         (float *)kernel_bytes(out));
        else if (a->dtype == FVM_DTYPE_F32)
            matmul_f32(a, b, ta, tb, out, &s);
        else
            matmul_f64(a, b, ta, tb, out, &s);
        break;
    case FVM_DTYPE_I32:
        matmul_i32((const int32_t *)kernel_bytes(a), (const int32_t *)kernel_bytes(b), (int32_t *)kernel_bytes(out),
                   &s);
        break;
    case FVM_DTYPE_I64:
        matmul_i64((const int64_t *)kernel_bytes(a), (const int64_t *)kernel_bytes(b), (int64_t *)kernel_bytes(out),
                   &s);
        break;
    case FVM_DTYPE_U32:
        matmul_u32((const uint32_t *)kernel_bytes(a), (const uint32_t *)kernel_bytes(b), (uint32_t *)kernel_bytes(out),
                   &s);
        break;
    case FVM_DTYPE_U8:
        matmul_u8((const uint8_t *)kernel_bytes(a), (const uint8_t *)kernel_bytes(b), (uint8_t *)kernel_bytes(out), &s);
        break;
    default:
        return kernel_type_error(d, "matmul", a->dtype);
    }
    return FVM_OK;
}

fvm_status fvm_kernel_matmul_update(fvm_kernel_matmul_fn matmul, const fvm_tensor *a, const fvm_tensor *b, bool ta,
                                    bool tb, const fvm_tensor *scale, const fvm_tensor *base, fvm_tensor *out,
                                    fvm_diag *d)
{
    if (a->dtype != FVM_DTYPE_F32 || b->dtype != FVM_DTYPE_F32 || (scale && scale->dtype != FVM_DTYPE_F32) ||
        base->dtype != FVM_DTYPE_F32 || out->dtype != FVM_DTYPE_F32 || a->shape.rank != 2 || b->shape.rank != 2 ||
        (scale && fvm_tensor_count(scale) != 1) || !fvm_dims_equal(&base->shape, &out->shape))
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL,
                            "matmul_update: f32 matrices, a scalar scale and a base of the product's shape are needed");
    fvm_status st = matmul(a, b, ta, tb, out, d);
    if (st)
        return st;
    float sc = scale ? ((const float *)kernel_bytes(scale))[0] : 0.0f;
    const float *w = (const float *)kernel_bytes(base);
    float *o = (float *)kernel_bytes(out);
    for (int64_t i = 0, n = fvm_tensor_count(out); i < n; i++) {
        if (!scale) {
            o[i] = w[i] + o[i];
            continue;
        }
        float t = sc * o[i];
        o[i] = w[i] - t;
    }
    return FVM_OK;
}

/* Does fedvm's own kernel make this update with its product (*s its shape)? */
static bool own_update(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *scale,
                       const fvm_tensor *base, const fvm_tensor *out, mm_shape *s)
{
    return a->dtype == FVM_DTYPE_F32 && b->dtype == FVM_DTYPE_F32 && a->shape.rank == 2 && b->shape.rank == 2 &&
           out->dtype == FVM_DTYPE_F32 && base->dtype == FVM_DTYPE_F32 &&
           (!scale || (scale->dtype == FVM_DTYPE_F32 && fvm_tensor_count(scale) == 1)) &&
           fvm_dims_equal(&base->shape, &out->shape) && fvm_kernel_matmul_shape(a, b, ta, tb, out, s, NULL) == FVM_OK &&
           s->k > 0 && fvm_tensor_count(out) > 0 && fvm_gemm_f32_fits(s);
}

bool fvm_k_matmul_update_in_place(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *base)
{
    mm_shape s;
    return own_update(a, b, ta, tb, NULL, base, base, &s) && fvm_gemm_f32_in_place(&s);
}

fvm_status fvm_k_matmul_update(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *scale,
                               const fvm_tensor *base, fvm_tensor *out, fvm_diag *d)
{
    mm_shape s;
    bool epilogue = own_update(a, b, ta, tb, scale, base, out, &s);
    if (fvm_tensor_count(out) > 0 && kernel_bytes(out) == kernel_bytes(base))
        KREQUIRE(d, epilogue && fvm_gemm_f32_in_place(&s),
                 "matmul_update: out is base where fvm_k_matmul_update_in_place says no");
    if (!epilogue)
        return fvm_kernel_matmul_update(fvm_k_matmul, a, b, ta, tb, scale, base, out, d);
    fvm_gemm_epilogue ep = {.scale = scale ? ((const float *)kernel_bytes(scale))[0] : 0.0f,
                            .base = (const float *)kernel_bytes(base),
                            .add = !scale};
    fvm_gemm_f32_then(&s, (const float *)kernel_bytes(a), (const float *)kernel_bytes(b), (float *)kernel_bytes(out),
                      &ep);
    return FVM_OK;
}
