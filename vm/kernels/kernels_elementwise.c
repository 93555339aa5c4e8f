/* kernels_elementwise.c - elementwise kernels: unary, binary and select with broadcasting, cast, fill, iota, fused chains. */
#include <math.h>
#include <stdint.h>

#include "kernels_impl.h"

/* Elementwise kernels may write into a buffer that is exactly one of their
 * same-shaped inputs (each element is read before it is written); partial
 * overlaps are not supported. */

/* ---- broadcasting -------------------------------------------------------- */

enum { BC_MAX_IN = FVM_FUSED_MAX_IN };

/* One contiguous run of n output elements. in[k] points at the first element
 * of input k; when bit k of scalar is set that element is repeated (stride 0),
 * otherwise the input advances with the output. */
typedef void (*run_fn)(const void *const in[BC_MAX_IN], unsigned scalar, void *out, int64_t n, const void *ctx);

/* Inputs broadcast against a contiguous output, with the dims coalesced:
 * size-1 dims are dropped and neighbours merged when every input steps across
 * them contiguously. Equal shapes and scalars become one run over the whole
 * output, [B,N] op [N] becomes B runs of N, and the general case iterates the
 * outer dims with an index counter. The innermost stride of each input is 0 or
 * 1, so the run functions are plain vectorisable loops. */
typedef struct bcast {
    int nin;
    int rank;                                /* >= 1 */
    int64_t shape[FVM_MAX_RANK];
    int64_t stride[BC_MAX_IN][FVM_MAX_RANK]; /* elements, 0 where broadcast */
} bcast;

/* Requires every input shape to broadcast to out (checked by the caller). */
static void bcast_init(bcast *it, const fvm_dims *out, const fvm_tensor *const *in, int nin)
{
    int64_t full[BC_MAX_IN][FVM_MAX_RANK];
    for (int k = 0; k < nin; k++) {
        int64_t st[FVM_MAX_RANK];
        const fvm_dims *s = &in[k]->shape;
        kernel_strides(s, st);
        for (int i = 0; i < out->rank; i++) {
            int j = i - (out->rank - s->rank);
            full[k][i] = (j < 0 || s->d[j] == 1) ? 0 : st[j];
        }
    }
    it->nin = nin;
    it->rank = 0;
    for (int i = 0; i < out->rank; i++) {
        int64_t n = out->d[i];
        if (n == 1)
            continue;
        int r = it->rank;
        bool merge = r > 0;
        for (int k = 0; k < nin && merge; k++)
            merge = it->stride[k][r - 1] == full[k][i] * n;
        if (merge) {
            it->shape[r - 1] *= n;
            for (int k = 0; k < nin; k++)
                it->stride[k][r - 1] = full[k][i];
        } else {
            it->shape[r] = n;
            for (int k = 0; k < nin; k++)
                it->stride[k][r] = full[k][i];
            it->rank++;
        }
    }
    if (it->rank == 0) { /* a single element */
        it->rank = 1;
        it->shape[0] = 1;
        for (int k = 0; k < nin; k++)
            it->stride[k][0] = 0;
    }
}

/* Calls f on every run; esize[k] / osize are element sizes in bytes. */
static void bcast_run(const bcast *it, run_fn f, const void *ctx, const unsigned char *const *in,
                      const size_t *esize, unsigned char *out, size_t osize)
{
    int r = it->rank - 1;
    int64_t n = it->shape[r];
    unsigned scalar = 0;
    for (int k = 0; k < it->nin; k++)
        if (it->stride[k][r] == 0)
            scalar |= 1u << k;
    int64_t rows = 1;
    for (int i = 0; i < r; i++)
        rows *= it->shape[i];
    int64_t idx[FVM_MAX_RANK] = {0};
    int64_t off[BC_MAX_IN] = {0};
    const void *p[BC_MAX_IN] = {NULL};
    for (int64_t row = 0; row < rows; row++) {
        for (int k = 0; k < it->nin; k++)
            p[k] = in[k] + (size_t)off[k] * esize[k];
        f(p, scalar, out + (size_t)(row * n) * osize, n, ctx);
        for (int i = r - 1; i >= 0; i--) {
            for (int k = 0; k < it->nin; k++)
                off[k] += it->stride[k][i];
            if (++idx[i] < it->shape[i])
                break;
            for (int k = 0; k < it->nin; k++)
                off[k] -= it->stride[k][i] * it->shape[i];
            idx[i] = 0;
        }
    }
}

/* True when every input broadcasts to exactly out's shape. */
static bool bcast_matches(const fvm_tensor *const *in, int nin, const fvm_dims *out)
{
    fvm_dims s = in[0]->shape;
    for (int k = 1; k < nin; k++)
        if (fvm_dims_broadcast(&s, &in[k]->shape, &s, NULL) != FVM_OK)
            return false;
    return fvm_dims_equal(&s, out);
}

/* ---- element conversions ------------------------------------------------- */

/* From double: truncate toward zero, saturate, NaN gives 0 (defined for every input). */
static inline uint8_t from_f_b(double v) { return v != 0; }
static inline float from_f_f32(double v) { return (float)v; }
static inline double from_f_f64(double v) { return v; }
static inline int32_t from_f_i32(double v)
{
    if (v != v)
        return 0;
    if (v >= 0x1p31)
        return INT32_MAX;
    if (v <= -0x1p31 - 1.0)
        return INT32_MIN;
    return (int32_t)v;
}
static inline int64_t from_f_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 0x1p63)
        return INT64_MAX;
    if (v < -0x1p63)
        return INT64_MIN;
    return (int64_t)v;
}
static inline uint8_t from_f_u8(double v)
{
    if (!(v >= 1.0))
        return 0; /* NaN, negatives and [0, 1) */
    if (v >= 255.0)
        return UINT8_MAX;
    return (uint8_t)v;
}
static inline uint32_t from_f_u32(double v)
{
    if (!(v >= 1.0))
        return 0; /* NaN, negatives and [0, 1) */
    if (v >= 0x1p32)
        return UINT32_MAX;
    return (uint32_t)v;
}

/* From an integer (every integer dtype fits int64): wraps modulo 2^bits. */
static inline uint8_t from_i_b(int64_t v) { return v != 0; }
static inline int32_t from_i_i32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }
static inline int64_t from_i_i64(int64_t v) { return v; }
static inline uint32_t from_i_u32(int64_t v) { return (uint32_t)(uint64_t)v; }
static inline uint8_t from_i_u8(int64_t v) { return (uint8_t)(uint64_t)v; }
static inline float from_i_f32(int64_t v) { return (float)v; }
static inline double from_i_f64(int64_t v) { return (double)v; }
/* From a dtype whose values fit int32 (bool, u8, i32): the same results as
 * from int64, in conversions the compiler vectorises. */
static inline uint8_t from_s_b(int32_t v) { return v != 0; }
static inline int32_t from_s_i32(int32_t v) { return v; }
static inline int64_t from_s_i64(int32_t v) { return v; }
static inline uint32_t from_s_u32(int32_t v) { return (uint32_t)v; }
static inline uint8_t from_s_u8(int32_t v) { return (uint8_t)(uint32_t)v; }
static inline float from_s_f32(int32_t v) { return (float)v; }
static inline double from_s_f64(int32_t v) { return (double)v; }

/* name, C type, conversion family (f: via double, i: via int64, s: via int32), enum */
#define FVM_K_DTYPES(X)              \
    X(b, uint8_t, s, BOOL)           \
    X(i32, int32_t, s, I32)          \
    X(i64, int64_t, i, I64)          \
    X(u32, uint32_t, i, U32)         \
    X(u8, uint8_t, s, U8)            \
    X(f32, float, f, F32)            \
    X(f64, double, f, F64)

/* ---- unary --------------------------------------------------------------- */

typedef void (*map_fn)(const void *x, void *out, int64_t n);

#define UN_FN(name, T, EXPR)                                  \
    KERNEL_CLONES static void name(const void *px, void *po, int64_t n) \
    {                                                         \
        const T *xs = px;                                     \
        T *o = po;                                            \
        KERNEL_FOR(i, n, T x = xs[i]; o[i] = (EXPR););        \
    }

/* 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below: exp never overflows. */
static inline float stable_sigmoidf(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static inline double stable_sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* relu keeps NaN (NaN < 0 is false). */
#define FLOAT_UNARY(S, T, F)                        \
    UN_FN(neg_##S, T, -x)                           \
    UN_FN(abs_##S, T, fabs##F(x))                   \
    UN_FN(exp_##S, T, exp##F(x))                    \
    UN_FN(log_##S, T, log##F(x))                    \
    UN_FN(sqrt_##S, T, sqrt##F(x))                  \
    UN_FN(tanh_##S, T, tanh##F(x))                  \
    UN_FN(sigmoid_##S, T, stable_sigmoid##F(x))     \
    UN_FN(relu_##S, T, x < 0 ? 0 : x)

/* Negation through the unsigned type: -INT_MIN wraps to INT_MIN. */
#define SINT_UNARY(S, T, UT)                                        \
    UN_FN(neg_##S, T, (T)((UT)0 - (UT)x))                           \
    UN_FN(abs_##S, T, x < 0 ? (T)((UT)0 - (UT)x) : x)               \
    UN_FN(relu_##S, T, x < 0 ? 0 : x)

FLOAT_UNARY(f32, float, f)
FLOAT_UNARY(f64, double, )
SINT_UNARY(i32, int32_t, uint32_t)
SINT_UNARY(i64, int64_t, uint64_t)
UN_FN(not_b, uint8_t, x == 0)

#define UN_FLOAT_ROW(op) {[FVM_DTYPE_F32] = op##_f32, [FVM_DTYPE_F64] = op##_f64}
#define UN_SIGNED_ROW(op) \
    {[FVM_DTYPE_I32] = op##_i32, [FVM_DTYPE_I64] = op##_i64, [FVM_DTYPE_F32] = op##_f32, [FVM_DTYPE_F64] = op##_f64}

static const map_fn unary_table[FVM_UN_COUNT][FVM_DTYPE_COUNT] = {
    [FVM_UN_NEG] = UN_SIGNED_ROW(neg),
    [FVM_UN_ABS] = UN_SIGNED_ROW(abs),
    [FVM_UN_EXP] = UN_FLOAT_ROW(exp),
    [FVM_UN_LOG] = UN_FLOAT_ROW(log),
    [FVM_UN_SQRT] = UN_FLOAT_ROW(sqrt),
    [FVM_UN_TANH] = UN_FLOAT_ROW(tanh),
    [FVM_UN_SIGMOID] = UN_FLOAT_ROW(sigmoid),
    [FVM_UN_RELU] = UN_SIGNED_ROW(relu),
    [FVM_UN_NOT] = {[FVM_DTYPE_BOOL] = not_b},
};

static const char *const unary_names[FVM_UN_COUNT] = {
    "neg", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "not",
};

fvm_status fvm_k_unary(fvm_unary op, const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "unary: x");
    KREQUIRE_TENSOR(d, out, "unary: out");
    if ((unsigned)op >= FVM_UN_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "unknown unary op %d", (int)op);
    map_fn f = unary_table[op][x->dtype];
    if (!f)
        return kernel_type_error(d, unary_names[op], x->dtype);
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &x->shape),
             "%s: out must have x's dtype and shape", unary_names[op]);
    int64_t n = fvm_tensor_count(x);
    if (n > 0)
        f(kernel_bytes(x), kernel_bytes(out), n);
    return FVM_OK;
}

/* ---- binary -------------------------------------------------------------- */

/* One run of a binary op in the four stride patterns (bit 0: a repeats,
 * bit 1: b repeats). */
#define BIN_FN(name, T, TO, EXPR)                                                       \
    KERNEL_CLONES static void name(const void *const in[BC_MAX_IN], unsigned sc, void *po, int64_t n, \
                     const void *ctx)                                                   \
    {                                                                                   \
        const T *as = in[0], *bs = in[1];                                               \
        TO *o = po;                                                                     \
        (void)ctx;                                                                      \
        if (sc == 0) {                                                                  \
            KERNEL_FOR(i, n, T x = as[i]; T y = bs[i]; o[i] = (EXPR););                 \
        } else if (sc == 2) {                                                           \
            T y = bs[0];                                                                \
            KERNEL_FOR(i, n, T x = as[i]; o[i] = (EXPR););                              \
        } else if (sc == 1) {                                                           \
            T x = as[0];                                                                \
            KERNEL_FOR(i, n, T y = bs[i]; o[i] = (EXPR););                              \
        } else {                                                                        \
            T x = as[0], y = bs[0];                                                     \
            TO r = (EXPR);                                                              \
            KERNEL_FOR(i, n, o[i] = r;);                                                \
        }                                                                               \
    }

#define CMP_BIN(S, T)                        \
    BIN_FN(eq_##S, T, uint8_t, x == y)       \
    BIN_FN(ne_##S, T, uint8_t, x != y)       \
    BIN_FN(lt_##S, T, uint8_t, x < y)        \
    BIN_FN(le_##S, T, uint8_t, x <= y)       \
    BIN_FN(gt_##S, T, uint8_t, x > y)        \
    BIN_FN(ge_##S, T, uint8_t, x >= y)

/* maximum/minimum propagate NaN (from either side). */
#define FLOAT_BIN(S, T, F)                                   \
    BIN_FN(add_##S, T, T, x + y)                             \
    BIN_FN(sub_##S, T, T, x - y)                             \
    BIN_FN(mul_##S, T, T, x * y)                             \
    BIN_FN(div_##S, T, T, x / y)                             \
    BIN_FN(pow_##S, T, T, pow##F(x, y))                      \
    BIN_FN(maximum_##S, T, T, (x > y || x != x) ? x : y)     \
    BIN_FN(minimum_##S, T, T, (x < y || x != x) ? x : y)     \
    CMP_BIN(S, T)

/* Signed arithmetic in the unsigned type wraps; the divisor is never 0 here
 * (checked first), and x / -1 is negation so INT_MIN / -1 gives INT_MIN. */
#define SINT_BIN(S, T, UT)                                          \
    BIN_FN(add_##S, T, T, (T)((UT)x + (UT)y))                       \
    BIN_FN(sub_##S, T, T, (T)((UT)x - (UT)y))                       \
    BIN_FN(mul_##S, T, T, (T)((UT)x * (UT)y))                       \
    BIN_FN(div_##S, T, T, y == -1 ? (T)((UT)0 - (UT)x) : x / y)     \
    BIN_FN(maximum_##S, T, T, x > y ? x : y)                        \
    BIN_FN(minimum_##S, T, T, x < y ? x : y)                        \
    CMP_BIN(S, T)

/* uint32_t is unsigned int: no promotion, arithmetic wraps natively. */
#define UINT_BIN(S, T)                               \
    BIN_FN(add_##S, T, T, (T)(x + y))                \
    BIN_FN(sub_##S, T, T, (T)(x - y))                \
    BIN_FN(mul_##S, T, T, (T)(x * y))                \
    BIN_FN(div_##S, T, T, x / y)                     \
    BIN_FN(maximum_##S, T, T, x > y ? x : y)         \
    BIN_FN(minimum_##S, T, T, x < y ? x : y)         \
    CMP_BIN(S, T)

FLOAT_BIN(f32, float, f)
FLOAT_BIN(f64, double, )
SINT_BIN(i32, int32_t, uint32_t)
SINT_BIN(i64, int64_t, uint64_t)
UINT_BIN(u32, uint32_t)
UINT_BIN(u8, uint8_t) /* promoted to int, then truncated: wraps modulo 256 */
CMP_BIN(b, uint8_t)
BIN_FN(and_b, uint8_t, uint8_t, (x != 0) & (y != 0))
BIN_FN(or_b, uint8_t, uint8_t, (x != 0) | (y != 0))

#define BIN_NUM_ROW(op)                                                                     \
    {[FVM_DTYPE_U8] = op##_u8, [FVM_DTYPE_I32] = op##_i32, [FVM_DTYPE_I64] = op##_i64,       \
     [FVM_DTYPE_U32] = op##_u32, [FVM_DTYPE_F32] = op##_f32, [FVM_DTYPE_F64] = op##_f64}
#define BIN_ALL_ROW(op)                                                                     \
    {[FVM_DTYPE_BOOL] = op##_b, [FVM_DTYPE_U8] = op##_u8, [FVM_DTYPE_I32] = op##_i32,       \
     [FVM_DTYPE_I64] = op##_i64, [FVM_DTYPE_U32] = op##_u32, [FVM_DTYPE_F32] = op##_f32,     \
     [FVM_DTYPE_F64] = op##_f64}

static const run_fn binary_table[FVM_BIN_COUNT][FVM_DTYPE_COUNT] = {
    [FVM_BIN_ADD] = BIN_NUM_ROW(add),
    [FVM_BIN_SUB] = BIN_NUM_ROW(sub),
    [FVM_BIN_MUL] = BIN_NUM_ROW(mul),
    [FVM_BIN_DIV] = BIN_NUM_ROW(div),
    [FVM_BIN_POW] = {[FVM_DTYPE_F32] = pow_f32, [FVM_DTYPE_F64] = pow_f64},
    [FVM_BIN_MAXIMUM] = BIN_NUM_ROW(maximum),
    [FVM_BIN_MINIMUM] = BIN_NUM_ROW(minimum),
    [FVM_BIN_EQ] = BIN_ALL_ROW(eq),
    [FVM_BIN_NE] = BIN_ALL_ROW(ne),
    [FVM_BIN_LT] = BIN_ALL_ROW(lt),
    [FVM_BIN_LE] = BIN_ALL_ROW(le),
    [FVM_BIN_GT] = BIN_ALL_ROW(gt),
    [FVM_BIN_GE] = BIN_ALL_ROW(ge),
    [FVM_BIN_AND] = {[FVM_DTYPE_BOOL] = and_b},
    [FVM_BIN_OR] = {[FVM_DTYPE_BOOL] = or_b},
};

static const char *const binary_names[FVM_BIN_COUNT] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq",
    "ne",  "lt",  "le",  "gt",  "ge",  "and",     "or",
};

/* Index of the first zero among n integers of dtype t, or -1. */
static int64_t find_zero(const void *p, fvm_dtype t, int64_t n)
{
    switch (t) {
#define FIND_ZERO(E, T)                            \
    case FVM_DTYPE_##E: {                          \
        const T *v = p;                            \
        for (int64_t i = 0; i < n; i++)            \
            if (v[i] == 0)                         \
                return i;                          \
        return -1;                                 \
    }
        FIND_ZERO(I32, int32_t)
        FIND_ZERO(I64, int64_t)
        FIND_ZERO(U32, uint32_t)
        FIND_ZERO(U8, uint8_t)
#undef FIND_ZERO
    default:
        return -1;
    }
}

fvm_status fvm_k_binary(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, a, "binary: a");
    KREQUIRE_TENSOR(d, b, "binary: b");
    KREQUIRE_TENSOR(d, out, "binary: out");
    if ((unsigned)op >= FVM_BIN_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "unknown binary op %d", (int)op);
    const char *name = binary_names[op];
    if (a->dtype != b->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "%s: operand dtypes differ (%s and %s)", name,
                            fvm_dtype_name(a->dtype), fvm_dtype_name(b->dtype));
    run_fn f = binary_table[op][a->dtype];
    if (!f)
        return kernel_type_error(d, name, a->dtype);
    bool cmp = op >= FVM_BIN_EQ && op <= FVM_BIN_GE;
    const fvm_tensor *in[2] = {a, b};
    KREQUIRE(d, out->dtype == (cmp ? FVM_DTYPE_BOOL : a->dtype) && bcast_matches(in, 2, &out->shape),
             "%s: out must have the broadcast shape and the result dtype", name);
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    if (op == FVM_BIN_DIV && fvm_dtype_is_int(a->dtype)) {
        int64_t z = find_zero(kernel_bytes(b), b->dtype, fvm_tensor_count(b));
        if (z >= 0)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "integer division by zero (divisor element %lld)",
                                (long long)z);
    }
    bcast it;
    bcast_init(&it, &out->shape, in, 2);
    const unsigned char *ptr[2] = {kernel_bytes(a), kernel_bytes(b)};
    size_t es[2] = {fvm_dtype_size(a->dtype), fvm_dtype_size(b->dtype)};
    bcast_run(&it, f, NULL, ptr, es, kernel_bytes(out), fvm_dtype_size(out->dtype));
    return FVM_OK;
}

/* ---- select -------------------------------------------------------------- */

/* Element copies go through fixed-size memcpy, which compiles to plain loads
 * and stores without type punning. The usual patterns (nothing repeats, or
 * one branch does: a ReLU's mask against zeros) are loops the compiler
 * vectorises; the others go element by element. */
#define SEL_FN(name, T)                                                                          \
    KERNEL_CLONES static void name(const void *const in[BC_MAX_IN], unsigned sc, void *po, int64_t n, \
                                   const void *ctx)                                              \
    {                                                                                            \
        const uint8_t *p = in[0];                                                                \
        const unsigned char *a = in[1], *b = in[2];                                              \
        unsigned char *o = po;                                                                   \
        const size_t es = sizeof(T);                                                             \
        T x, y, r;                                                                               \
        (void)ctx;                                                                               \
        if (sc == 0) {                                                                           \
            KERNEL_FOR(i, n, memcpy(&x, a + (size_t)i * es, es); memcpy(&y, b + (size_t)i * es, es); \
                       r = p[i] ? x : y; memcpy(o + (size_t)i * es, &r, es););                    \
        } else if (sc == 4) {                                                                    \
            memcpy(&y, b, es);                                                                   \
            KERNEL_FOR(i, n, memcpy(&x, a + (size_t)i * es, es); r = p[i] ? x : y;               \
                       memcpy(o + (size_t)i * es, &r, es););                                     \
        } else {                                                                                 \
            int64_t sp = !(sc & 1), sa = !(sc & 2), sb = !(sc & 4);                              \
            for (int64_t i = 0; i < n; i++)                                                      \
                memcpy(o + (size_t)i * es, p[i * sp] ? a + (size_t)(i * sa) * es : b + (size_t)(i * sb) * es, es); \
        }                                                                                        \
    }

SEL_FN(select_1, uint8_t)
SEL_FN(select_4, uint32_t)
SEL_FN(select_8, uint64_t)

fvm_status fvm_k_select(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, p, "select: p");
    KREQUIRE_TENSOR(d, a, "select: a");
    KREQUIRE_TENSOR(d, b, "select: b");
    KREQUIRE_TENSOR(d, out, "select: out");
    if (p->dtype != FVM_DTYPE_BOOL)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "select: the predicate must be bool, not %s",
                            fvm_dtype_name(p->dtype));
    if (a->dtype != b->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "select: branch dtypes differ (%s and %s)",
                            fvm_dtype_name(a->dtype), fvm_dtype_name(b->dtype));
    const fvm_tensor *in[3] = {p, a, b};
    KREQUIRE(d, out->dtype == a->dtype && bcast_matches(in, 3, &out->shape),
             "select: out must have the broadcast shape and the branches' dtype");
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    size_t es = fvm_dtype_size(a->dtype);
    run_fn f = es == 1 ? select_1 : es == 4 ? select_4 : select_8;
    bcast it;
    bcast_init(&it, &out->shape, in, 3);
    const unsigned char *ptr[3] = {kernel_bytes(p), kernel_bytes(a), kernel_bytes(b)};
    size_t ess[3] = {1, es, es};
    bcast_run(&it, f, NULL, ptr, ess, kernel_bytes(out), es);
    return FVM_OK;
}

/* ---- cast ---------------------------------------------------------------- */

#define CAST_FN(name, ST, DT, CONV)                           \
    KERNEL_CLONES static void name(const void *px, void *po, int64_t n) \
    {                                                         \
        const ST *x = px;                                     \
        DT *o = po;                                           \
        KERNEL_FOR(i, n, o[i] = CONV(x[i]););                 \
    }

/* Every source/destination pair; integers convert through int64 (int32 when they fit), floats
 * through double (both exact), then the destination's conversion rounds once. */
#define CAST_FROM(S, ST, K, E)                                   \
    CAST_FN(cast_##S##_b, ST, uint8_t, from_##K##_b)             \
    CAST_FN(cast_##S##_i32, ST, int32_t, from_##K##_i32)         \
    CAST_FN(cast_##S##_i64, ST, int64_t, from_##K##_i64)         \
    CAST_FN(cast_##S##_u32, ST, uint32_t, from_##K##_u32)        \
    CAST_FN(cast_##S##_u8, ST, uint8_t, from_##K##_u8)           \
    CAST_FN(cast_##S##_f32, ST, float, from_##K##_f32)           \
    CAST_FN(cast_##S##_f64, ST, double, from_##K##_f64)
FVM_K_DTYPES(CAST_FROM)

#define CAST_ROW(S, ST, K, E)                                                               \
    [FVM_DTYPE_##E] = {[FVM_DTYPE_BOOL] = cast_##S##_b, [FVM_DTYPE_I32] = cast_##S##_i32,    \
                       [FVM_DTYPE_I64] = cast_##S##_i64, [FVM_DTYPE_U32] = cast_##S##_u32,   \
                       [FVM_DTYPE_U8] = cast_##S##_u8,                                       \
                       [FVM_DTYPE_F32] = cast_##S##_f32, [FVM_DTYPE_F64] = cast_##S##_f64},

static const map_fn cast_table[FVM_DTYPE_COUNT][FVM_DTYPE_COUNT] = {FVM_K_DTYPES(CAST_ROW)};

fvm_status fvm_k_cast(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "cast: x");
    KREQUIRE_TENSOR(d, out, "cast: out");
    KREQUIRE(d, fvm_dims_equal(&x->shape, &out->shape), "cast: out must have x's shape");
    int64_t n = fvm_tensor_count(x);
    if (n == 0)
        return FVM_OK;
    if (x->dtype == out->dtype) {
        if (kernel_bytes(out) != kernel_bytes(x))
            memmove(kernel_bytes(out), kernel_bytes(x), fvm_tensor_bytes(x));
        return FVM_OK;
    }
    cast_table[x->dtype][out->dtype](kernel_bytes(x), kernel_bytes(out), n);
    return FVM_OK;
}

/* ---- fill and iota ------------------------------------------------------- */

fvm_status fvm_k_fill(double v, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, out, "fill: out");
    int64_t n = fvm_tensor_count(out);
    if (n == 0)
        return FVM_OK;
    void *p = kernel_bytes(out);
    switch (out->dtype) {
#define FILL(S, T, K, E)                              \
    case FVM_DTYPE_##E: {                             \
        T x = from_f_##S(v), *o = p;                  \
        KERNEL_FOR(i, n, o[i] = x;);                  \
        break;                                        \
    }
        FVM_K_DTYPES(FILL)
#undef FILL
    default:
        break;
    }
    return FVM_OK;
}

fvm_status fvm_k_iota(int axis, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, out, "iota: out");
    KREQUIRE(d, axis >= 0 && axis < out->shape.rank, "iota: axis %d out of range for rank %d", axis,
             out->shape.rank);
    if (out->dtype == FVM_DTYPE_BOOL)
        return kernel_type_error(d, "iota", out->dtype);
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    int64_t outer = kernel_span(&out->shape, 0, axis), len = out->shape.d[axis];
    int64_t inner = kernel_span(&out->shape, axis + 1, out->shape.rank);
    void *p = kernel_bytes(out);
    /* The size limit keeps every index below 2^31, so (T)i is exact for the
     * integer dtypes and rounds as C does for f32. */
    switch (out->dtype) {
#define IOTA(S, T, K, E)                                    \
    case FVM_DTYPE_##E: {                                   \
        T *o = p;                                           \
        for (int64_t r = 0; r < outer; r++)                 \
            for (int64_t i = 0; i < len; i++) {             \
                T v = (T)i;                                 \
                for (int64_t j = 0; j < inner; j++)         \
                    *o++ = v;                               \
            }                                               \
        break;                                              \
    }
        FVM_K_DTYPES(IOTA)
#undef IOTA
    default:
        break;
    }
    return FVM_OK;
}

/* ---- fused chains -------------------------------------------------------- */

/* Steps run on blocks of one broadcast run: every step's block (at most
 * FUSED_BLOCK elements) is in a scratch area of FUSED_SCRATCH bytes that
 * stays in the L1 cache; a chain of many or wide steps takes shorter
 * blocks. */
enum { FUSED_BLOCK = 1024, FUSED_SCRATCH = 32768 };

typedef struct fused_ctx {
    const fvm_fstep *steps;
    int nsteps;
    fvm_dtype dt[FVM_FUSED_MAX_STEPS];  /* each step's dtype */
    bool scalar[FVM_FUSED_MAX_STEPS];   /* a step whose operands are all scalars in a run (fills) */
    fvm_dtype in_dt[FVM_FUSED_MAX_IN];
    /* per step and operand: its dtype and element size */
    fvm_dtype op_dt[FVM_FUSED_MAX_STEPS][3];
    size_t op_size[FVM_FUSED_MAX_STEPS][3];
    /* each fill's value, in its dtype */
    _Alignas(8) unsigned char fill[FVM_FUSED_MAX_STEPS][8];
    int64_t block;                         /* elements a block */
    size_t tmp_off[FVM_FUSED_MAX_STEPS];   /* each step's block in the scratch area */
} fused_ctx;

/* The dtype of step k's operand j. */
static fvm_dtype operand_dtype(const fused_ctx *c, const fvm_fstep *st, int j)
{
    int a = st->arg[j];
    return a >= 0 ? c->in_dt[a] : c->dt[-a - 1];
}

static int step_arity(const fvm_fstep *st)
{
    switch (st->kind) {
    case FVM_FS_BINARY: return 2;
    case FVM_FS_SELECT: return 3;
    default: return 1;
    }
}

/* Fills in c's dtypes and fill values; false when a step is not defined
 * for its operands' dtypes (the caller runs the steps one by one, whose
 * kernels report it) or is an integer division (which checks its divisor). */
static bool fused_plan(fused_ctx *c, const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin)
{
    if (nsteps < 1 || nsteps > FVM_FUSED_MAX_STEPS || nin < 1 || nin > FVM_FUSED_MAX_IN)
        return false;
    c->steps = steps;
    c->nsteps = nsteps;
    for (int k = 0; k < nin; k++)
        c->in_dt[k] = in[k]->dtype;
    for (int s = 0; s < nsteps; s++) {
        const fvm_fstep *st = &steps[s];
        int n = step_arity(st);
        for (int j = 0; j < n; j++) {
            if (st->arg[j] >= nin || st->arg[j] < -s)
                return false;
            c->op_dt[s][j] = operand_dtype(c, st, j);
            c->op_size[s][j] = fvm_dtype_size(c->op_dt[s][j]);
        }
        fvm_dtype a = operand_dtype(c, st, 0);
        switch (st->kind) {
        case FVM_FS_UNARY:
            if ((unsigned)st->op >= FVM_UN_COUNT || !unary_table[st->op][a])
                return false;
            c->dt[s] = a;
            break;
        case FVM_FS_BINARY:
            if ((unsigned)st->op >= FVM_BIN_COUNT || !binary_table[st->op][a] || operand_dtype(c, st, 1) != a ||
                (st->op == FVM_BIN_DIV && fvm_dtype_is_int(a)))
                return false;
            c->dt[s] = st->op >= FVM_BIN_EQ && st->op <= FVM_BIN_GE ? FVM_DTYPE_BOOL : a;
            break;
        case FVM_FS_SELECT:
            if (a != FVM_DTYPE_BOOL || operand_dtype(c, st, 1) != operand_dtype(c, st, 2))
                return false;
            c->dt[s] = operand_dtype(c, st, 1);
            break;
        case FVM_FS_CAST:
            if ((unsigned)st->dtype >= FVM_DTYPE_COUNT)
                return false;
            c->dt[s] = st->dtype;
            break;
        case FVM_FS_FILL:
            c->dt[s] = a;
            switch (a) {
#define FILL_VALUE(S, T, K, E)                        \
    case FVM_DTYPE_##E: {                             \
        T x = from_f_##S(st->value);                  \
        memcpy(c->fill[s], &x, sizeof x);             \
        break;                                        \
    }
                FVM_K_DTYPES(FILL_VALUE)
#undef FILL_VALUE
            default:
                return false;
            }
            break;
        default:
            return false;
        }
    }
    size_t per = 0; /* scratch bytes per element, each step's block 64-byte aligned */
    for (int s = 0; s < nsteps; s++)
        per += fvm_dtype_size(c->dt[s]);
    c->block = (FUSED_SCRATCH - 64 * nsteps) / (int64_t)per & ~(int64_t)63; /* >= 192 for 16 steps of 8 bytes */
    if (c->block > FUSED_BLOCK)
        c->block = FUSED_BLOCK;
    size_t off = 0;
    for (int s = 0; s < nsteps; s++) {
        c->tmp_off[s] = off;
        off += ((size_t)c->block * fvm_dtype_size(c->dt[s]) + 63) & ~(size_t)63;
    }
    return true;
}

/* One broadcast run of n output elements: in[k] and bit k of sc as in
 * run_fn. Block by block, every step writes its block (or its single
 * element, when all its operands are scalars) to a scratch buffer, the last
 * one to out. */
static void fused_run(const void *const in[BC_MAX_IN], unsigned sc, void *po, int64_t n, const void *pc)
{
    const fused_ctx *c = pc;
    _Alignas(64) unsigned char scratch[FUSED_SCRATCH];
    unsigned char *tmp[FVM_FUSED_MAX_STEPS];
    bool scalar[FVM_FUSED_MAX_STEPS];
    int last = c->nsteps - 1;
    size_t osize = fvm_dtype_size(c->dt[last]);
    for (int s = 0; s <= last; s++)
        tmp[s] = scratch + c->tmp_off[s];
    for (int64_t b = 0; b < n; b += c->block) {
        int64_t m = n - b < c->block ? n - b : c->block;
        for (int s = 0; s <= last; s++) {
            const fvm_fstep *st = &c->steps[s];
            const void *ops[BC_MAX_IN] = {NULL};
            unsigned osc = 0;
            bool all = true;
            for (int j = 0; j < step_arity(st); j++) {
                int a = st->arg[j];
                bool one = a >= 0 ? (sc >> a) & 1 : scalar[-a - 1];
                ops[j] = a >= 0 ? (const unsigned char *)in[a] + (one ? 0 : (size_t)b * c->op_size[s][j]) : tmp[-a - 1];
                osc |= (unsigned)one << j;
                all = all && one;
            }
            all = all || st->kind == FVM_FS_FILL;
            scalar[s] = all;
            void *dst = s == last && !all ? (unsigned char *)po + (size_t)b * osize : tmp[s];
            int64_t len = all ? 1 : m;
            switch (st->kind) {
            case FVM_FS_UNARY:
                unary_table[st->op][c->op_dt[s][0]](ops[0], dst, len);
                break;
            case FVM_FS_BINARY:
                binary_table[st->op][c->op_dt[s][0]](ops, osc, dst, len, NULL);
                break;
            case FVM_FS_SELECT: {
                size_t es = c->op_size[s][1];
                (es == 1 ? select_1 : es == 4 ? select_4 : select_8)(ops, osc, dst, len, NULL);
                break;
            }
            case FVM_FS_CAST:
                if (c->op_dt[s][0] == c->dt[s])
                    memmove(dst, ops[0], (size_t)len * c->op_size[s][0]);
                else
                    cast_table[c->op_dt[s][0]][c->dt[s]](ops[0], dst, len);
                break;
            case FVM_FS_FILL:
                memcpy(dst, c->fill[s], fvm_dtype_size(c->dt[s]));
                break;
            }
        }
        if (scalar[last]) /* every operand a scalar: the output repeats one value */
            for (int64_t i = 0; i < m; i++)
                memcpy((unsigned char *)po + (size_t)(b + i) * osize, tmp[last], osize);
    }
}

bool fvm_k_fused_dtype(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_dtype *out)
{
    fused_ctx c;
    if (!fused_plan(&c, steps, nsteps, in, nin))
        return false;
    *out = c.dt[nsteps - 1];
    return true;
}

fvm_status fvm_k_fused(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_tensor *out,
                       fvm_diag *d)
{
    for (int k = 0; k < nin && k < FVM_FUSED_MAX_IN; k++)
        KREQUIRE_TENSOR(d, in[k], "fused: input");
    KREQUIRE_TENSOR(d, out, "fused: out");
    fused_ctx c;
    KREQUIRE(d, fused_plan(&c, steps, nsteps, in, nin), "fused: a step is not defined for its operands");
    KREQUIRE(d, out->dtype == c.dt[nsteps - 1] && bcast_matches(in, nin, &out->shape),
             "fused: out must have the broadcast shape and the chain's dtype");
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    bcast it;
    bcast_init(&it, &out->shape, in, nin);
    const unsigned char *ptr[BC_MAX_IN];
    size_t es[BC_MAX_IN];
    for (int k = 0; k < nin; k++) {
        /* an input without elements never reaches a non-empty output */
        ptr[k] = kernel_bytes(in[k]);
        es[k] = fvm_dtype_size(in[k]->dtype);
    }
    bcast_run(&it, fused_run, &c, ptr, es, kernel_bytes(out), fvm_dtype_size(out->dtype));
    return FVM_OK;
}
