/* provider_portable.c - the portable kernel provider: plain loops, one element at a time, no SIMD clones and no BLAS (provider.h). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "kernels_impl.h"
#include "kernels_scalar.h"
#include "provider.h"

/* ---- one element of each elementwise op --------------------------------------------- */

/* The scalar kernel of every FVM_EW row of ops.def whose step is UNARY,
 * BINARY or COMPARE, for each dtype of its row, as a function of one
 * element (the same sk_ functions as the CPU provider's loops). */
typedef void (*el1_fn)(const void *x, void *o);
typedef void (*el2_fn)(const void *x, const void *y, void *o);

#define EL1(K, S, T, E) \
    static void el_##K##_##S(const void *x, void *o) \
    { \
        *(T *)o = sk_##K##_##S(*(const T *)x); \
    }
#define EL2_TO(K, S, T, TO) \
    static void el_##K##_##S(const void *x, const void *y, void *o) \
    { \
        *(TO *)o = sk_##K##_##S(*(const T *)x, *(const T *)y); \
    }
#define EL2(K, S, T, E) EL2_TO(K, S, T, T)
#define ELC(K, S, T, E) EL2_TO(K, S, T, uint8_t)

#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) EL_##STEP(KERNEL, DTYPES)
#define EL_UNARY(K, D) SK_DTYPES_##D(EL1, K)
#define EL_BINARY(K, D) SK_DTYPES_##D(EL2, K)
#define EL_COMPARE(K, D) SK_DTYPES_##D(ELC, K)
#define EL_SELECT(K, D)
#define EL_CAST(K, D)
#define EL_FILL(K, D)
#include "../ir/ops.def"
#undef FVM_EW

#define EL_ENTRY(K, S, T, E) [FVM_DTYPE_##E] = el_##K##_##S,

static const el1_fn unary_el[FVM_UN_COUNT][FVM_DTYPE_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_UNARY_##STEP([FVM_UN_##ID] = {SK_DTYPES_##DTYPES(EL_ENTRY, KERNEL)}, )
#include "../ir/ops.def"
#undef FVM_EW
};

static const el2_fn binary_el[FVM_BIN_COUNT][FVM_DTYPE_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_BINARY_##STEP([FVM_BIN_##ID] = {SK_DTYPES_##DTYPES(EL_ENTRY, KERNEL)}, )
#include "../ir/ops.def"
#undef FVM_EW
};

/* One element converted from dtype 'from' to dtype 'to' as fvm_k_cast
 * converts it: integers through int64 (int32 when they fit), floats
 * through double, then the destination's conversion. */
#define STORE_FN(F, VT) \
    static void store_##F(VT v, fvm_dtype to, void *o) \
    { \
        switch (to) { \
        case FVM_DTYPE_BOOL: \
            *(uint8_t *)o = from_##F##_b(v); \
            break; \
        case FVM_DTYPE_U8: \
            *(uint8_t *)o = from_##F##_u8(v); \
            break; \
        case FVM_DTYPE_I32: \
            *(int32_t *)o = from_##F##_i32(v); \
            break; \
        case FVM_DTYPE_I64: \
            *(int64_t *)o = from_##F##_i64(v); \
            break; \
        case FVM_DTYPE_U32: \
            *(uint32_t *)o = from_##F##_u32(v); \
            break; \
        case FVM_DTYPE_F32: \
            *(float *)o = from_##F##_f32(v); \
            break; \
        case FVM_DTYPE_F64: \
            *(double *)o = from_##F##_f64(v); \
            break; \
        default: \
            break; \
        } \
    }
STORE_FN(f, double)
STORE_FN(i, int64_t)
STORE_FN(s, int32_t)

static void convert(fvm_dtype from, const void *x, fvm_dtype to, void *o)
{
    switch (from) {
#define LOAD(S, T, K, E) \
    case FVM_DTYPE_##E: \
        store_##K(*(const T *)x, to, o); \
        break;
        FVM_K_DTYPES(LOAD)
#undef LOAD
    default:
        break;
    }
}

/* ---- broadcasting, one element at a time ----------------------------------------------- */

/* The output's elements in row-major order, and where each input's element
 * is: off[k] elements into input k (NumPy's rule: stride 0 on the axes it
 * is broadcast along). */
typedef struct walk {
    int rank, nin;
    int64_t shape[FVM_MAX_RANK];
    int64_t stride[FVM_FUSED_MAX_IN][FVM_MAX_RANK];
    int64_t idx[FVM_MAX_RANK];
    int64_t off[FVM_FUSED_MAX_IN];
} walk;

static void walk_init(walk *w, const fvm_dims *out, const fvm_tensor *const *in, int nin)
{
    w->rank = out->rank;
    w->nin = nin;
    for (int i = 0; i < out->rank; i++) {
        w->shape[i] = out->d[i];
        w->idx[i] = 0;
    }
    for (int k = 0; k < nin; k++) {
        const fvm_dims *s = &in[k]->shape;
        int64_t n = 1;
        for (int i = out->rank - 1; i >= 0; i--) {
            int j = i - (out->rank - s->rank);
            w->stride[k][i] = j < 0 || s->d[j] == 1 ? 0 : n;
            n *= j < 0 ? 1 : s->d[j];
        }
        w->off[k] = 0;
    }
}

static void walk_next(walk *w)
{
    for (int i = w->rank - 1; i >= 0; i--) {
        for (int k = 0; k < w->nin; k++)
            w->off[k] += w->stride[k][i];
        if (++w->idx[i] < w->shape[i])
            return;
        for (int k = 0; k < w->nin; k++)
            w->off[k] -= w->stride[k][i] * w->shape[i];
        w->idx[i] = 0;
    }
}

/* Input k's current element. */
static const unsigned char *walk_at(const walk *w, const fvm_tensor *const *in, int k)
{
    return kernel_bytes(in[k]) + (size_t)w->off[k] * fvm_dtype_size(in[k]->dtype);
}

/* ---- elementwise kernels ------------------------------------------------------------------ */

static fvm_status p_unary(fvm_unary op, const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_unary_check(op, x, out, d);
    int64_t n = fvm_tensor_count(x);
    if (s || n == 0)
        return s;
    el1_fn f = unary_el[op][x->dtype];
    size_t es = fvm_dtype_size(x->dtype);
    const unsigned char *xp = kernel_bytes(x);
    unsigned char *op_ = kernel_bytes(out);
    for (int64_t i = 0; i < n; i++)
        f(xp + (size_t)i * es, op_ + (size_t)i * es);
    return FVM_OK;
}

static fvm_status p_binary(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_binary_check(op, a, b, out, d);
    int64_t n = fvm_tensor_count(out);
    if (s || n == 0)
        return s;
    el2_fn f = binary_el[op][a->dtype];
    const fvm_tensor *in[2] = {a, b};
    size_t os = fvm_dtype_size(out->dtype);
    unsigned char *o = kernel_bytes(out);
    walk w;
    walk_init(&w, &out->shape, in, 2);
    for (int64_t i = 0; i < n; i++, walk_next(&w))
        f(walk_at(&w, in, 0), walk_at(&w, in, 1), o + (size_t)i * os);
    return FVM_OK;
}

static fvm_status p_select(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_select_check(p, a, b, out, d);
    int64_t n = fvm_tensor_count(out);
    if (s || n == 0)
        return s;
    const fvm_tensor *in[3] = {p, a, b};
    size_t es = fvm_dtype_size(out->dtype);
    unsigned char *o = kernel_bytes(out);
    walk w;
    walk_init(&w, &out->shape, in, 3);
    for (int64_t i = 0; i < n; i++, walk_next(&w))
        memmove(o + (size_t)i * es, *walk_at(&w, in, 0) ? walk_at(&w, in, 1) : walk_at(&w, in, 2), es);
    return FVM_OK;
}

static fvm_status p_cast(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_cast_check(x, out, d);
    int64_t n = fvm_tensor_count(x);
    if (s || n == 0)
        return s;
    size_t xs = fvm_dtype_size(x->dtype), os = fvm_dtype_size(out->dtype);
    const unsigned char *xp = kernel_bytes(x);
    unsigned char *o = kernel_bytes(out);
    for (int64_t i = 0; i < n; i++) {
        _Alignas(8) unsigned char v[8];
        convert(x->dtype, xp + (size_t)i * xs, out->dtype, v); /* in place, x's element is read first */
        memcpy(o + (size_t)i * os, v, os);
    }
    return FVM_OK;
}

static fvm_status p_fill(double v, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, out, "fill: out");
    int64_t n = fvm_tensor_count(out);
    if (n == 0)
        return FVM_OK;
    _Alignas(8) unsigned char e[8];
    size_t es = fvm_dtype_size(out->dtype);
    fvm_kernel_fill_value(out->dtype, v, e);
    unsigned char *o = kernel_bytes(out);
    for (int64_t i = 0; i < n; i++)
        memcpy(o + (size_t)i * es, e, es);
    return FVM_OK;
}

/* Element by element: every step's value of one output element in a slot
 * of its own, the last step's into out. */
static fvm_status p_fused(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_tensor *out,
                          fvm_diag *d)
{
    for (int k = 0; k < nin && k < FVM_FUSED_MAX_IN; k++)
        KREQUIRE_TENSOR(d, in[k], "fused: input");
    KREQUIRE_TENSOR(d, out, "fused: out");
    fvm_dtype in_dt[FVM_FUSED_MAX_IN], dt[FVM_FUSED_MAX_STEPS];
    for (int k = 0; k < nin && k < FVM_FUSED_MAX_IN; k++)
        in_dt[k] = in[k]->dtype;
    KREQUIRE(d, fvm_kernel_fused_types(steps, nsteps, in_dt, nin, dt), "fused: a step is not defined for its operands");
    int last = nsteps - 1;
    KREQUIRE(d, out->dtype == dt[last] && fvm_kernel_bcast_matches(in, nin, &out->shape),
             "fused: out must have the broadcast shape and the chain's dtype");
    int64_t n = fvm_tensor_count(out);
    if (n == 0)
        return FVM_OK;
    _Alignas(8) unsigned char slot[FVM_FUSED_MAX_STEPS][8];
    size_t os = fvm_dtype_size(out->dtype);
    unsigned char *o = kernel_bytes(out);
    walk w;
    walk_init(&w, &out->shape, in, nin);
    for (int64_t i = 0; i < n; i++, walk_next(&w)) {
        for (int s = 0; s <= last; s++) {
            const fvm_fstep *st = &steps[s];
            const void *a[3] = {NULL};
            fvm_dtype a0 = FVM_DTYPE_BOOL;
            for (int j = 0; j < kernel_step_arity(st); j++) {
                int k = st->arg[j];
                a[j] = k >= 0 ? (const void *)walk_at(&w, in, k) : slot[-k - 1];
                if (j == 0)
                    a0 = k >= 0 ? in_dt[k] : dt[-k - 1];
            }
            void *dst = slot[s];
            switch (st->kind) {
            case FVM_FS_UNARY:
                unary_el[st->op][a0](a[0], dst);
                break;
            case FVM_FS_BINARY:
                binary_el[st->op][a0](a[0], a[1], dst);
                break;
            case FVM_FS_SELECT:
                memcpy(dst, *(const uint8_t *)a[0] ? a[1] : a[2], fvm_dtype_size(dt[s]));
                break;
            case FVM_FS_CAST:
                convert(a0, a[0], dt[s], dst);
                break;
            case FVM_FS_FILL:
                fvm_kernel_fill_value(dt[s], st->value, dst);
                break;
            }
        }
        memcpy(o + (size_t)i * os, slot[last], os);
    }
    return FVM_OK;
}

/* ---- products -------------------------------------------------------------------------------- */

/* c(i, j) = sum over l of A(i, l) B(l, j) with A(i,l) = a[i*a_si + l*a_sk],
 * B(l,j) = b[l*b_sk + j*b_sj], c(i, j) = c[i*ldc + j], plus c(i, j)'s
 * value before when accumulate. Floats: the fused multiply-add chain
 * acc = fma(A(i,l), B(l,j), acc) over l in order from 0 (the CPU provider's
 * f32 kernel, kernels_gemm.c, computes the same chain); integers wrap (in
 * the unsigned type AT). When B's rows are contiguous the chains of GEMM_NB
 * neighbours in a row of c advance together, l by l (the same chains, read
 * along B's rows); otherwise each chain runs alone. */
enum { GEMM_NB = 64 };
#define NAIVE_GEMM(S, T, AT, STEP) \
    static void gemm_##S(const mm_shape *s, const T *a, const T *b, T *c, int64_t ldc, bool accumulate) \
    { \
        AT acc[GEMM_NB]; \
        int64_t nb_max = s->b_sj == 1 ? GEMM_NB : 1; \
        for (int64_t i = 0; i < s->m; i++) \
            for (int64_t j0 = 0; j0 < s->n; j0 += nb_max) { \
                int64_t nb = s->n - j0 < nb_max ? s->n - j0 : nb_max; \
                for (int64_t j = 0; j < nb; j++) \
                    acc[j] = 0; \
                for (int64_t l = 0; l < s->k; l++) { \
                    AT x = (AT)a[i * s->a_si + l * s->a_sk]; \
                    const T *brow = b + l * s->b_sk + j0 * s->b_sj; \
                    for (int64_t j = 0; j < nb; j++) { \
                        AT y = (AT)brow[j]; \
                        acc[j] = STEP; \
                    } \
                } \
                for (int64_t j = 0; j < nb; j++) { \
                    T *p = &c[i * ldc + j0 + j]; \
                    *p = accumulate ? (T)(*p + (T)acc[j]) : (T)acc[j]; \
                } \
            } \
    }
NAIVE_GEMM(f32, float, float, fmaf(x, y, acc[j]))
NAIVE_GEMM(f64, double, double, fma(x, y, acc[j]))
NAIVE_GEMM(i32, int32_t, uint32_t, acc[j] + x * y)
NAIVE_GEMM(i64, int64_t, uint64_t, acc[j] + x * y)
NAIVE_GEMM(u32, uint32_t, uint32_t, acc[j] + x * y)
NAIVE_GEMM(u8, uint8_t, uint32_t, acc[j] + x * y)

static fvm_status p_matmul(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *out, fvm_diag *d)
{
    mm_shape s;
    fvm_status st = fvm_kernel_matmul_shape(a, b, ta, tb, out, &s, d);
    if (st || fvm_tensor_count(out) == 0)
        return st;
    if (s.k == 0) { /* empty sums (and empty operands, without buffers): all-zero bytes are 0 and +0.0 */
        memset(kernel_bytes(out), 0, fvm_tensor_bytes(out));
        return FVM_OK;
    }
    const void *ap = kernel_bytes(a), *bp = kernel_bytes(b);
    void *op = kernel_bytes(out);
    switch (a->dtype) {
    case FVM_DTYPE_F32:
        gemm_f32(&s, ap, bp, op, s.n, false);
        break;
    case FVM_DTYPE_F64:
        gemm_f64(&s, ap, bp, op, s.n, false);
        break;
    case FVM_DTYPE_I32:
        gemm_i32(&s, ap, bp, op, s.n, false);
        break;
    case FVM_DTYPE_I64:
        gemm_i64(&s, ap, bp, op, s.n, false);
        break;
    case FVM_DTYPE_U32:
        gemm_u32(&s, ap, bp, op, s.n, false);
        break;
    case FVM_DTYPE_U8:
        gemm_u8(&s, ap, bp, op, s.n, false);
        break;
    default:
        return kernel_type_error(d, "matmul", a->dtype);
    }
    return FVM_OK;
}

static fvm_status p_matmul_update(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *scale,
                                  const fvm_tensor *base, fvm_tensor *out, fvm_diag *d)
{
    return fvm_kernel_matmul_update(p_matmul, a, b, ta, tb, scale, base, out, d);
}

void fvm_gemm_chain(size_t es, const mm_shape *s, const void *a, const void *b, void *c, int64_t ldc, bool accumulate)
{
    if (es == sizeof(float))
        gemm_f32(s, a, b, c, ldc, accumulate);
    else
        gemm_f64(s, a, b, c, ldc, accumulate);
}

/* The conv2d kernels' products (fvm_kernel_gemm_fn), as the chains above. */
static void conv_gemm(size_t es, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                      const void *b, int64_t ldb, bool accumulate, void *c, int64_t ldc, void *tmp)
{
    (void)tmp; /* the chains are added to c as they finish */
    mm_shape s = {
        .m = m, .n = n, .k = k, .a_si = ta ? 1 : lda, .a_sk = ta ? lda : 1, .b_sk = tb ? 1 : ldb, .b_sj = tb ? ldb : 1};
    fvm_gemm_chain(es, &s, a, b, c, ldc, accumulate);
}

static fvm_status p_conv2d(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, fvm_tensor *y, fvm_diag *d)
{
    return fvm_kernel_conv2d(conv_gemm, x, w, win, y, d);
}

static fvm_status p_conv2d_grad_input(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win, fvm_tensor *dx,
                                      fvm_diag *d)
{
    return fvm_kernel_conv2d_grad_input(conv_gemm, dy, w, win, dx, d);
}

static fvm_status p_conv2d_grad_filter(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win, fvm_tensor *dw,
                                       fvm_diag *d)
{
    return fvm_kernel_conv2d_grad_filter(conv_gemm, x, dy, win, dw, d);
}

/* ---- float sums ------------------------------------------------------------------------------- */

/* NumPy's pairwise sum of x[0, n), n >= 1, as its recursion (kernels_reduce.c
 * says the order; the CPU provider's kernel adds the eight running sums as
 * vector lanes and two sibling blocks side by side). */
#define PSUM_FN(name, T) \
    static T name(const T *x, int64_t n) \
    { \
        if (n < 8) { \
            T s = x[0]; \
            for (int64_t i = 1; i < n; i++) \
                s += x[i]; \
            return s; \
        } \
        if (n > FVM_PAIRWISE_BLOCK) { \
            int64_t n2 = n / 2 - (n / 2) % 8; \
            return name(x, n2) + name(x + n2, n - n2); \
        } \
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

/* x's elements cut into rows of `row` (contiguous, every axis of a row
 * reduced or of length 1), each row summed pairwise and added to its output
 * in index order, the first row of each output copied; then MEAN's division. */
#define PREDUCE_FN(name, psum, T) \
    static void name(const T *x, const fvm_dims *s, uint32_t mask, int64_t row, int64_t nred, bool mean, T *o) \
    { \
        int64_t ostride[FVM_MAX_RANK], kept = 1; \
        for (int i = s->rank - 1; i >= 0; i--) { \
            ostride[i] = (mask >> i) & 1 ? 0 : kept; \
            if (!((mask >> i) & 1)) \
                kept *= s->d[i]; \
        } \
        int64_t total = fvm_dims_count(s); \
        for (int64_t at = 0; at < total; at += row) { \
            int64_t rem = at, oi = 0; \
            bool first = true; \
            for (int i = s->rank - 1; i >= 0; i--) { \
                int64_t k = rem % s->d[i]; \
                rem /= s->d[i]; \
                oi += k * ostride[i]; \
                if (((mask >> i) & 1) && k != 0) \
                    first = false; \
            } \
            T v = psum(x + at, row); \
            o[oi] = first ? v : o[oi] + v; \
        } \
        if (mean) \
            for (int64_t i = 0; i < kept; i++) \
                o[i] /= (T)nred; \
    }

PSUM_FN(psum_f32, float)
PSUM_FN(psum_f64, double)
PREDUCE_FN(preduce_f32, psum_f32, float)
PREDUCE_FN(preduce_f64, psum_f64, double)

/* Float sums and means here; max, min and integer sums, whose results do not
 * depend on the order, are the CPU provider's. A row is the run of the last
 * axes that are reduced or of length 1: the reduced elements of an output
 * when its reduction ends with the last axis longer than 1, one element when
 * that axis is kept. */
static fvm_status p_reduce(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out, fvm_diag *d)
{
    if ((op != FVM_RED_SUM && op != FVM_RED_MEAN) || (x->dtype != FVM_DTYPE_F32 && x->dtype != FVM_DTYPE_F64))
        return fvm_k_reduce(op, x, axes_mask, out, d);
    int64_t nred;
    fvm_status s = fvm_kernel_reduce_check(op, x, axes_mask, out, &nred, d);
    if (s || nred == 0)
        return s;
    int64_t row = 1;
    for (int i = x->shape.rank - 1; i >= 0 && (((axes_mask >> i) & 1) || x->shape.d[i] == 1); i--)
        row *= x->shape.d[i];
    bool mean = op == FVM_RED_MEAN;
    if (x->dtype == FVM_DTYPE_F32)
        preduce_f32((const float *)kernel_bytes(x), &x->shape, axes_mask, row, nred, mean, (float *)kernel_bytes(out));
    else
        preduce_f64((const double *)kernel_bytes(x), &x->shape, axes_mask, row, nred, mean,
                    (double *)kernel_bytes(out));
    return FVM_OK;
}

/* ---- the provider ------------------------------------------------------------------------------ */

/* The kernels above; fvm_kernels_complete adds the CPU provider's for the rest. */
static fvm_kernels portable = {
    .name = "portable",
    .unary = p_unary,
    .binary = p_binary,
    .select = p_select,
    .cast = p_cast,
    .fill = p_fill,
    .fused = p_fused,
    .matmul = p_matmul,
    .matmul_update = p_matmul_update,
    .reduce = p_reduce,
    .conv2d = p_conv2d,
    .conv2d_grad_input = p_conv2d_grad_input,
    .conv2d_grad_filter = p_conv2d_grad_filter,
};

static pthread_once_t portable_once = PTHREAD_ONCE_INIT;

static void portable_complete(void)
{
    fvm_kernels_complete(&portable);
}

const fvm_kernels *fvm_kernels_portable(void)
{
    pthread_once(&portable_once, portable_complete);
    return &portable;
}
