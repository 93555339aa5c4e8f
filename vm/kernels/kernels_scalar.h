/* kernels_scalar.h - the scalar kernels of the elementwise ops (the kernel column of ops.def), one inline function per dtype (private to vm/kernels).
 *
 * sk_<kernel>_<dtype>(x) or (x, y) computes one element of an FVM_EW row's
 * op, for every dtype of the row's dtypes column (FLOAT: f32, f64; SIGNED:
 * and i32, i64; NUM: and u8, u32; ALL: and b; BOOL: b). The providers'
 * loops, vectorised or not, call these and nothing else per element, so
 * every provider computes the same bits. Each is plain C in its dtype (no
 * fused multiply-add: ISO C's -ffp-contract=off), defined for every input:
 * integer arithmetic wraps (through the unsigned type); integer div by zero
 * never reaches here (fvm_k_binary checks the divisor first), while
 * floor_div and mod define it (0, as NumPy) and so check nothing. */
#ifndef FVM_KERNELS_SCALAR_H
#define FVM_KERNELS_SCALAR_H

#include <math.h>
#include <stdint.h>

#include "../ir/saturate.h"
#include "f32math.h"

/* sigmoid and tanh: in f32 fvm's own (f32math.h: the same bits on every
 * machine, and the LSTM cell's gates compute the same); in f64 the C
 * library's exp and tanh, sigmoid as 1/(1+e^-x) for x >= 0 and e^x/(1+e^x)
 * below, so exp never overflows. */
static inline float ew_sigmoidf(float x)
{
    return fvm_sigmoidf(x);
}
static inline double ew_sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
static inline float ew_tanhf(float x)
{
    return fvm_tanhf(x);
}
static inline double ew_tanh(double x)
{
    return tanh(x);
}

/* log(1 + e^x) as max(x, 0) + log1p(e^-|x|): exp never overflows; NaN stays NaN. */
static inline float stable_softplusf(float x)
{
    return (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
}
static inline double stable_softplus(double x)
{
    return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
}

/* Floor division and remainder of floats as Python's // and % and NumPy's
 * floor_divide and mod compute them (CPython's float_divmod, NumPy's
 * npy_divmod): m = fmod(x, y), which is exact, moved to y's sign (m + y when
 * the signs differ; a zero remainder is copysign(0, y)); the quotient
 * (x - m) / y is within rounding of an integer and is snapped to it, a zero
 * quotient taking the sign of x / y. y = 0 gives x / y for the quotient and
 * fmod's NaN for the remainder; NaN in, NaN out. */
static inline float py_floor_divf(float x, float y)
{
    if (y == 0)
        return x / y;
    float m = fmodf(x, y), q = (x - m) / y;
    if (m != 0 && (y < 0) != (m < 0))
        q -= 1.0f;
    if (q == 0)
        return copysignf(0.0f, x / y);
    float f = floorf(q);
    return q - f > 0.5f ? f + 1.0f : f;
}
static inline double py_floor_div(double x, double y)
{
    if (y == 0)
        return x / y;
    double m = fmod(x, y), q = (x - m) / y;
    if (m != 0 && (y < 0) != (m < 0))
        q -= 1.0;
    if (q == 0)
        return copysign(0.0, x / y);
    double f = floor(q);
    return q - f > 0.5 ? f + 1.0 : f;
}
static inline float py_modf(float x, float y)
{
    float m = fmodf(x, y);
    if (m == 0)
        return copysignf(0.0f, y);
    return (y < 0) != (m < 0) ? m + y : m;
}
static inline double py_mod(double x, double y)
{
    double m = fmod(x, y);
    if (m == 0)
        return copysign(0.0, y);
    return (y < 0) != (m < 0) ? m + y : m;
}

/* Comparisons, in every dtype (bool as 0 < 1). */
#define SK_COMPARE(S, T) \
    static inline uint8_t sk_eq_##S(T x, T y) \
    { \
        return x == y; \
    } \
    static inline uint8_t sk_ne_##S(T x, T y) \
    { \
        return x != y; \
    } \
    static inline uint8_t sk_lt_##S(T x, T y) \
    { \
        return x < y; \
    } \
    static inline uint8_t sk_le_##S(T x, T y) \
    { \
        return x <= y; \
    } \
    static inline uint8_t sk_gt_##S(T x, T y) \
    { \
        return x > y; \
    } \
    static inline uint8_t sk_ge_##S(T x, T y) \
    { \
        return x >= y; \
    }

/* Floats (F: the suffix of the C library's functions). relu keeps NaN (NaN
 * < 0 is false); sign keeps NaN and the sign of a zero; maximum/minimum
 * propagate NaN from either side. */
#define SK_FLOAT(S, T, F) \
    static inline T sk_neg_##S(T x) \
    { \
        return -x; \
    } \
    static inline T sk_abs_##S(T x) \
    { \
        return fabs##F(x); \
    } \
    static inline T sk_exp_##S(T x) \
    { \
        return exp##F(x); \
    } \
    static inline T sk_log_##S(T x) \
    { \
        return log##F(x); \
    } \
    static inline T sk_sqrt_##S(T x) \
    { \
        return sqrt##F(x); \
    } \
    static inline T sk_tanh_##S(T x) \
    { \
        return ew_tanh##F(x); \
    } \
    static inline T sk_sigmoid_##S(T x) \
    { \
        return ew_sigmoid##F(x); \
    } \
    static inline T sk_softplus_##S(T x) \
    { \
        return stable_softplus##F(x); \
    } \
    static inline T sk_relu_##S(T x) \
    { \
        return x < 0 ? 0 : x; \
    } \
    static inline T sk_sign_##S(T x) \
    { \
        return x > 0 ? 1 : x < 0 ? -1 : x; \
    } \
    static inline T sk_log1p_##S(T x) \
    { \
        return log1p##F(x); \
    } \
    static inline T sk_sin_##S(T x) \
    { \
        return sin##F(x); \
    } \
    static inline T sk_cos_##S(T x) \
    { \
        return cos##F(x); \
    } \
    static inline T sk_erf_##S(T x) \
    { \
        return erf##F(x); \
    } \
    static inline T sk_add_##S(T x, T y) \
    { \
        return x + y; \
    } \
    static inline T sk_sub_##S(T x, T y) \
    { \
        return x - y; \
    } \
    static inline T sk_mul_##S(T x, T y) \
    { \
        return x * y; \
    } \
    static inline T sk_div_##S(T x, T y) \
    { \
        return x / y; \
    } \
    static inline T sk_floor_div_##S(T x, T y) \
    { \
        return py_floor_div##F(x, y); \
    } \
    static inline T sk_mod_##S(T x, T y) \
    { \
        return py_mod##F(x, y); \
    } \
    static inline T sk_pow_##S(T x, T y) \
    { \
        return pow##F(x, y); \
    } \
    static inline T sk_maximum_##S(T x, T y) \
    { \
        return (x > y || x != x) ? x : y; \
    } \
    static inline T sk_minimum_##S(T x, T y) \
    { \
        return (x < y || x != x) ? x : y; \
    } \
    SK_COMPARE(S, T)

/* Signed integers: arithmetic in the unsigned type UT wraps; negation too
 * (-INT_MIN is INT_MIN), and x / -1 is negation, so INT_MIN / -1 gives
 * INT_MIN (and so does INT_MIN floor_div -1, while x mod -1 is 0: C's
 * INT_MIN % -1 is undefined). floor_div rounds the quotient toward -inf,
 * mod takes the divisor's sign; by zero both give 0, as NumPy's. */
#define SK_SIGNED(S, T, UT) \
    static inline T sk_neg_##S(T x) \
    { \
        return (T)((UT)0 - (UT)x); \
    } \
    static inline T sk_abs_##S(T x) \
    { \
        return x < 0 ? (T)((UT)0 - (UT)x) : x; \
    } \
    static inline T sk_relu_##S(T x) \
    { \
        return x < 0 ? 0 : x; \
    } \
    static inline T sk_sign_##S(T x) \
    { \
        return x > 0 ? 1 : x < 0 ? -1 : 0; \
    } \
    static inline T sk_add_##S(T x, T y) \
    { \
        return (T)((UT)x + (UT)y); \
    } \
    static inline T sk_sub_##S(T x, T y) \
    { \
        return (T)((UT)x - (UT)y); \
    } \
    static inline T sk_mul_##S(T x, T y) \
    { \
        return (T)((UT)x * (UT)y); \
    } \
    static inline T sk_div_##S(T x, T y) \
    { \
        return y == -1 ? (T)((UT)0 - (UT)x) : x / y; \
    } \
    static inline T sk_floor_div_##S(T x, T y) \
    { \
        if (y == 0) \
            return 0; \
        if (y == -1) \
            return (T)((UT)0 - (UT)x); \
        T q = x / y; \
        return x % y != 0 && (x < 0) != (y < 0) ? q - 1 : q; \
    } \
    static inline T sk_mod_##S(T x, T y) \
    { \
        if (y == 0 || y == -1) \
            return 0; \
        T r = x % y; \
        return r != 0 && (r < 0) != (y < 0) ? r + y : r; \
    } \
    static inline T sk_maximum_##S(T x, T y) \
    { \
        return x > y ? x : y; \
    } \
    static inline T sk_minimum_##S(T x, T y) \
    { \
        return x < y ? x : y; \
    } \
    SK_COMPARE(S, T)

/* Unsigned integers: u32 is unsigned int (arithmetic wraps natively); u8 is
 * promoted to int, then truncated (wraps modulo 256). floor_div is C's
 * division and mod C's %, both 0 for a zero divisor. */
#define SK_UNSIGNED(S, T) \
    static inline T sk_add_##S(T x, T y) \
    { \
        return (T)(x + y); \
    } \
    static inline T sk_sub_##S(T x, T y) \
    { \
        return (T)(x - y); \
    } \
    static inline T sk_mul_##S(T x, T y) \
    { \
        return (T)(x * y); \
    } \
    static inline T sk_div_##S(T x, T y) \
    { \
        return x / y; \
    } \
    static inline T sk_floor_div_##S(T x, T y) \
    { \
        return y == 0 ? 0 : (T)(x / y); \
    } \
    static inline T sk_mod_##S(T x, T y) \
    { \
        return y == 0 ? 0 : (T)(x % y); \
    } \
    static inline T sk_maximum_##S(T x, T y) \
    { \
        return x > y ? x : y; \
    } \
    static inline T sk_minimum_##S(T x, T y) \
    { \
        return x < y ? x : y; \
    } \
    SK_COMPARE(S, T)

SK_FLOAT(f32, float, f)
SK_FLOAT(f64, double, )
SK_SIGNED(i32, int32_t, uint32_t)
SK_SIGNED(i64, int64_t, uint64_t)
SK_UNSIGNED(u32, uint32_t)
SK_UNSIGNED(u8, uint8_t)
SK_COMPARE(b, uint8_t)
static inline uint8_t sk_not_b(uint8_t x)
{
    return x == 0;
}
static inline uint8_t sk_and_b(uint8_t x, uint8_t y)
{
    return (x != 0) & (y != 0);
}
static inline uint8_t sk_or_b(uint8_t x, uint8_t y)
{
    return (x != 0) | (y != 0);
}

/* The dtypes of each class of the dtypes column, as X(K, suffix, C type,
 * enum) for kernel K: SK_DTYPES_<class>(X, K). */
#define SK_DTYPES_FLOAT(X, K) X(K, f32, float, F32) X(K, f64, double, F64)
#define SK_DTYPES_SIGNED(X, K) X(K, i32, int32_t, I32) X(K, i64, int64_t, I64) SK_DTYPES_FLOAT(X, K)
#define SK_DTYPES_NUM(X, K) X(K, u8, uint8_t, U8) X(K, u32, uint32_t, U32) SK_DTYPES_SIGNED(X, K)
#define SK_DTYPES_ALL(X, K) X(K, b, uint8_t, BOOL) SK_DTYPES_NUM(X, K)
#define SK_DTYPES_BOOL(X, K) X(K, b, uint8_t, BOOL)

/* ---- conversions (cast, fill) ---- */

/* From double: truncate toward zero, saturate, NaN gives 0 (defined for every input). */
static inline uint8_t from_f_b(double v)
{
    return v != 0;
}
static inline float from_f_f32(double v)
{
    return (float)v;
}
static inline double from_f_f64(double v)
{
    return v;
}
static inline int32_t from_f_i32(double v)
{
    return fvm_sat_i32(v);
}
static inline int64_t from_f_i64(double v)
{
    return fvm_sat_i64(v);
}
static inline uint8_t from_f_u8(double v)
{
    return fvm_sat_u8(v);
}
static inline uint32_t from_f_u32(double v)
{
    return fvm_sat_u32(v);
}

/* From an integer (every integer dtype fits int64): wraps modulo 2^bits. */
static inline uint8_t from_i_b(int64_t v)
{
    return v != 0;
}
static inline int32_t from_i_i32(int64_t v)
{
    return (int32_t)(uint32_t)(uint64_t)v;
}
static inline int64_t from_i_i64(int64_t v)
{
    return v;
}
static inline uint32_t from_i_u32(int64_t v)
{
    return (uint32_t)(uint64_t)v;
}
static inline uint8_t from_i_u8(int64_t v)
{
    return (uint8_t)(uint64_t)v;
}
static inline float from_i_f32(int64_t v)
{
    return (float)v;
}
static inline double from_i_f64(int64_t v)
{
    return (double)v;
}
/* From a dtype whose values fit int32 (bool, u8, i32): the same results as
 * from int64, in conversions the compiler vectorises. */
static inline uint8_t from_s_b(int32_t v)
{
    return v != 0;
}
static inline int32_t from_s_i32(int32_t v)
{
    return v;
}
static inline int64_t from_s_i64(int32_t v)
{
    return v;
}
static inline uint32_t from_s_u32(int32_t v)
{
    return (uint32_t)v;
}
static inline uint8_t from_s_u8(int32_t v)
{
    return (uint8_t)(uint32_t)v;
}
static inline float from_s_f32(int32_t v)
{
    return (float)v;
}
static inline double from_s_f64(int32_t v)
{
    return (double)v;
}

/* name, C type, conversion family (f: via double, i: via int64, s: via int32), enum */
#define FVM_K_DTYPES(X) \
    X(b, uint8_t, s, BOOL) \
    X(i32, int32_t, s, I32) \
    X(i64, int64_t, i, I64) \
    X(u32, uint32_t, i, U32) \
    X(u8, uint8_t, s, U8) \
    X(f32, float, f, F32) \
    X(f64, double, f, F64)

#endif
