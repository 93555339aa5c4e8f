/* f32math.h - exp, sigmoid and tanh of f32 in plain IEEE operations, the same bits on every machine (private to vm/kernels).
 *
 * The LSTM cell's gates (fvm_k_lstm_gates) and the sigmoid and tanh ops of f32
 * (kernels_scalar.h) evaluate these instead of the C
 * library's functions: they are branch-free (every branch below is a select
 * that GCC turns into a vector blend), use no table and call no function, so
 * a loop over them vectorises, and they are made of + - * /, comparisons
 * and integer operations on the bits only, each rounded as IEEE 754 says
 * (the build has no fused multiply-add contraction: ISO C's
 * -ffp-contract=off). So every vector width (each KERNEL_CLONES copy),
 * every compiler and every CPU computes the same bits, which the C
 * library's expf/tanhf do not promise.
 *
 * fvm_expf(x), Cephes' expf (S. L. Moshier): n = round(x log2 e) (by the
 * 1.5 * 2^23 shifter: round to nearest, ties to even), r = x - n ln2 in two
 * steps (Cody and Waite: ln2_hi has 16 significant bits, so n ln2_hi is
 * exact), e^r = 1 + r + r^2 P(r) with Cephes' degree-5 minimax P on
 * |r| <= ln2/2, then e^r 2^n as two exact products by 2^(n>>1) and
 * 2^(n-(n>>1)), both normal numbers: a result in the subnormal range is
 * rounded once (not flushed to zero), and one above FLT_MAX is inf.
 * x is first clamped to [-104, 89] (beyond, e^x rounds to 0 or inf anyway).
 *
 * fvm_sigmoidf(x) = 1/(1 + e) for x >= 0 and e/(1 + e) below, with
 * e = fvm_expf(-|x|) in (0, 1]: nothing overflows and small results keep
 * their relative precision (down to the subnormals).
 *
 * fvm_tanhf(x), Cephes' tanhf: for |x| < 0.625 the odd minimax polynomial
 * a + a^3 Q(a^2) of a = |x| (Q of degree 4), else (1 - e)/(1 + e) with
 * e = fvm_expf(-2a); then x's sign.
 *
 * Error, measured against the C library's double exp and tanh (double
 * sigmoid as above) over every finite f32 input (all 2^32 bit patterns:
 * build/tests/test_f32math --exhaustive, make check-f32math-exhaustive), in
 * units in the last place of the f32 result (ULP of the subnormals
 * 2^-149): fvm_expf at most FVM_EXPF_MAX_ULP, fvm_sigmoidf at most
 * FVM_SIGMOIDF_MAX_ULP, fvm_tanhf at most FVM_TANHF_MAX_ULP. Measured
 * (x86-64, glibc's double exp and tanh): fvm_expf 0.987 ULP (at
 * 0x1.da3dfp+5), fvm_sigmoidf 2.402 ULP (at -0x1.0a111ap+2), fvm_tanhf
 * 1.509 ULP (at 0x1.3f65aap+0). test_f32math asserts the bounds on a
 * stride of the inputs in every make test.
 *
 * Special values: NaN gives NaN (a quiet one); fvm_expf(+inf) = +inf,
 * fvm_expf(-inf) = 0, fvm_expf(x) = inf for x > 88.7228 and 0 for
 * x < -103.98 (the exact exp rounds to those there); fvm_sigmoidf(+inf) = 1,
 * fvm_sigmoidf(-inf) = 0, fvm_sigmoidf(±0) = 0.5, fvm_sigmoidf(x) rounds to 1
 * for x > 16.6 and is subnormal below about -87.3; fvm_tanhf(±inf) = ±1,
 * fvm_tanhf(±0) = ±0, fvm_tanhf(x) = x for |x| < 2^-12 (subnormals
 * included) and ±1 for |x| > 9.1. Subnormal inputs are computed as IEEE
 * says (no flush to zero is assumed or needed: the process's default MXCSR). */
#ifndef FVM_F32MATH_H
#define FVM_F32MATH_H

#include <stdint.h>
#include <string.h>

/* The bounds, in ULP, that the exhaustive sweep measured (see above). */
#define FVM_EXPF_MAX_ULP 1.0
#define FVM_SIGMOIDF_MAX_ULP 2.5
#define FVM_TANHF_MAX_ULP 2.0

static inline uint32_t f32math_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float f32math_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* c ? a : b by the bits, so that no compiler turns it into a branch (which
 * would keep the loop from vectorising). */
static inline float f32math_select(int c, float a, float b)
{
    uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
    return f32math_float((f32math_bits(a) & m) | (f32math_bits(b) & ~m));
}

/* 2^k for k in [-126, 127], from its exponent field. */
static inline float f32math_pow2(int32_t k)
{
    return f32math_float((uint32_t)(k + 127) << 23);
}

/* e^x; see the top of the file. */
static inline float fvm_expf(float x)
{
    const float shifter = 0x1.8p23f; /* adding it rounds a number below 2^22 to an integer */
    float xc = f32math_select(x < 89.0f, x, 89.0f); /* NaN becomes 89 here, and NaN again at the end */
    xc = f32math_select(xc > -104.0f, xc, -104.0f);
    float t = xc * 0x1.715476p+0f + shifter; /* log2(e) */
    float nf = t - shifter;
    int32_t n = (int32_t)(f32math_bits(t) - f32math_bits(shifter)); /* nf as an integer, in [-150, 128] */
    float r = xc - nf * 0x1.62e4p-1f; /* ln2_hi = 0.693145751953125, exact product */
    r = r - nf * 0x1.7f7d1cp-20f; /* ln2_lo = ln2 - ln2_hi */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float er = (p * (r * r) + r) + 1.0f;
    int32_t k1 = n >> 1; /* arithmetic shift: floor(n/2), in [-75, 64] */
    float y = er * f32math_pow2(k1) * f32math_pow2(n - k1);
    return f32math_select(x != x, x, y);
}

/* 1 / (1 + e^-x); see the top of the file. */
static inline float fvm_sigmoidf(float x)
{
    float a = f32math_float(f32math_bits(x) & 0x7fffffffu); /* |x| */
    float e = fvm_expf(-a);
    return f32math_select(x < 0, e, 1.0f) / (1.0f + e);
}

/* tanh(x); see the top of the file. */
static inline float fvm_tanhf(float x)
{
    float a = f32math_float(f32math_bits(x) & 0x7fffffffu); /* |x| */
    float z = x * x;
    float q = -5.70498872745e-3f;
    q = q * z + 2.06390887954e-2f;
    q = q * z - 5.37397155531e-2f;
    q = q * z + 1.33314422036e-1f;
    q = q * z - 3.33332819422e-1f;
    float small = q * z * a + a;
    float e = fvm_expf(-2.0f * a);
    float big = (1.0f - e) / (1.0f + e);
    float t = f32math_select(a < 0.625f, small, big); /* tanh|x| */
    return f32math_float(f32math_bits(t) | (f32math_bits(x) & 0x80000000u)); /* with x's sign */
}

#endif
