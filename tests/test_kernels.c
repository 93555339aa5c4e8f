/* test_kernels.c - unit tests for the tensor kernels against hand values and naive references. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/kernels/kernels.h"
#include "../vm/kernels/kernels_impl.h"
#include "test_tensors.h"

/* ---- helpers ------------------------------------------------------------- */

/* A tensor holding n elements copied from data. */
static fvm_tensor mk(fvm_dtype t, fvm_dims s, const void *data, size_t n)
{
    fvm_tensor x;
    assert_int_equal(fvm_tensor_alloc(&x, t, &s, NULL), FVM_OK);
    assert_int_equal(fvm_dims_count(&s), (int64_t)n);
    if (n)
        memcpy(fvm_tensor_data(&x), data, n * fvm_dtype_size(t));
    return x;
}
#define MK(dt, CT, shape, ...) mk(dt, shape, (const CT[]){__VA_ARGS__}, sizeof((const CT[]){__VA_ARGS__}) / sizeof(CT))
#define F32(shape, ...) MK(FVM_DTYPE_F32, float, shape, __VA_ARGS__)
#define F64(shape, ...) MK(FVM_DTYPE_F64, double, shape, __VA_ARGS__)
#define I32(shape, ...) MK(FVM_DTYPE_I32, int32_t, shape, __VA_ARGS__)
#define I64(shape, ...) MK(FVM_DTYPE_I64, int64_t, shape, __VA_ARGS__)
#define U32(shape, ...) MK(FVM_DTYPE_U32, uint32_t, shape, __VA_ARGS__)
#define BOOL(shape, ...) MK(FVM_DTYPE_BOOL, uint8_t, shape, __VA_ARGS__)
#define U8(shape, ...) MK(FVM_DTYPE_U8, uint8_t, shape, __VA_ARGS__)

static void rel(fvm_tensor *a, fvm_tensor *b, fvm_tensor *c)
{
    fvm_tensor_release(a);
    fvm_tensor_release(b);
    fvm_tensor_release(c);
}

static void expect_i64s(const fvm_tensor *t, const int64_t *want, size_t n, int line)
{
    if (fvm_tensor_count(t) != (int64_t)n)
        fail_msg("line %d: %lld elements, expected %zu", line, (long long)fvm_tensor_count(t), n);
    for (size_t i = 0; i < n; i++) {
        int64_t got = fvm_tensor_get_i64(t, (int64_t)i);
        if (got != want[i])
            fail_msg("line %d: element %zu is %lld, expected %lld", line, i, (long long)got, (long long)want[i]);
    }
}
#define EXPECT_I(t, ...) \
    expect_i64s(t, (const int64_t[]){__VA_ARGS__}, sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t), __LINE__)

/* As EXPECT, within a relative tolerance rel of each value, for the C
 * library's functions, whose last bit may differ between C libraries; NaN,
 * infinities and zeros exactly, a zero with its sign. */
static void expect_near(const fvm_tensor *t, double rel, const double *want, size_t n, int line)
{
    if (fvm_tensor_count(t) != (int64_t)n)
        fail_msg("line %d: %lld elements, expected %zu", line, (long long)fvm_tensor_count(t), n);
    for (size_t i = 0; i < n; i++) {
        double got = fvm_tensor_get_f64(t, (int64_t)i), w = want[i];
        bool ok = isnan(w)             ? isnan(got)
                  : isinf(w) || w == 0 ? got == w && !signbit(got) == !signbit(w)
                                       : fabs(got - w) <= rel * fabs(w);
        if (!ok)
            fail_msg("line %d: element %zu is %.17g, expected %.17g", line, i, got, w);
    }
}
#define EXPECT_NEAR(t, rel, ...) \
    expect_near(t, rel, (const double[]){__VA_ARGS__}, sizeof((const double[]){__VA_ARGS__}) / sizeof(double), __LINE__)
/* Two ulps of f64 and of f32. */
#define ULP2_F64 4.5e-16
#define ULP2_F32 2.4e-7

/* Flat index into an input of shape in broadcast to out, for out's flat
 * index i: the NumPy rule written out directly. */
static int64_t bcast_index(const fvm_dims *out, const fvm_dims *in, int64_t i)
{
    int64_t idx[FVM_MAX_RANK];
    for (int k = out->rank - 1; k >= 0; k--) {
        idx[k] = i % out->d[k];
        i /= out->d[k];
    }
    int64_t off = 0;
    for (int j = 0; j < in->rank; j++) {
        int k = j + out->rank - in->rank;
        off = off * in->d[j] + (in->d[j] == 1 ? 0 : idx[k]);
    }
    return off;
}

/* ---- unary --------------------------------------------------------------- */

static double ref_unary(fvm_unary op, double x)
{
    switch (op) {
    case FVM_UN_NEG:
        return -x;
    case FVM_UN_ABS:
        return fabs(x);
    case FVM_UN_SIGN:
        return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case FVM_UN_EXP:
        return exp(x);
    case FVM_UN_LOG:
        return log(x);
    case FVM_UN_LOG1P:
        return log(1.0 + x);
    case FVM_UN_SQRT:
        return sqrt(x);
    case FVM_UN_SIN:
        return sin(x);
    case FVM_UN_COS:
        return cos(x);
    case FVM_UN_TANH:
        return tanh(x);
    case FVM_UN_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case FVM_UN_SOFTPLUS:
        return log(1.0 + exp(x));
    case FVM_UN_ERF:
        return erf(x);
    case FVM_UN_RELU:
        return x > 0 ? x : 0.0;
    default:
        return NAN;
    }
}

static void test_unary_float(void **state)
{
    (void)state;
    const double xs[] = {-2.5, -1.0, 0.25, 0.5, 1.0, 3.0, 7.5, 0.125, 2.0, 4.0};
    enum { N = sizeof xs / sizeof xs[0] };
    for (int op = FVM_UN_NEG; op <= FVM_UN_RELU; op++) {
        for (int f64 = 0; f64 < 2; f64++) {
            fvm_dtype dt = f64 ? FVM_DTYPE_F64 : FVM_DTYPE_F32;
            fvm_tensor x = junk(dt, D1(N)), out = junk(dt, D1(N));
            for (int i = 0; i < N; i++) /* log, log1p and sqrt of positives */
                fvm_tensor_set_f64(&x, i,
                                   (op == FVM_UN_LOG || op == FVM_UN_LOG1P || op == FVM_UN_SQRT) ? fabs(xs[i]) : xs[i]);
            fvm_diag d = {0};
            assert_int_equal(fvm_k_unary((fvm_unary)op, &x, &out, &d), FVM_OK);
            for (int i = 0; i < N; i++) {
                double in = fvm_tensor_get_f64(&x, i), want = ref_unary((fvm_unary)op, in);
                double got = fvm_tensor_get_f64(&out, i);
                double tol = f64 ? 1e-15 : 1e-6;
                if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want))))
                    fail_msg("op %d %s x=%g: got %.17g want %.17g", op, f64 ? "f64" : "f32", in, got, want);
            }
            fvm_tensor_release(&x);
            fvm_tensor_release(&out);
        }
    }
}

static void test_unary_special_values(void **state)
{
    (void)state;
    fvm_diag d = {0};
    /* sigmoid stays finite and exact at the ends, and keeps NaN */
    fvm_tensor x = F32(D1(6), -1000.0f, 1000.0f, -100.0f, 100.0f, NAN, 0.0f), out = junk(FVM_DTYPE_F32, D1(6));
    assert_int_equal(fvm_k_unary(FVM_UN_SIGMOID, &x, &out, &d), FVM_OK);
    EXPECT(&out, 0.0, 1.0, (double)expf(-100.0f) / (1.0 + (double)expf(-100.0f)), 1.0, NAN, 0.5);
    const float *o = fvm_tensor_data(&out);
    assert_true(o[2] > 0.0f && o[2] < 1e-40f); /* a subnormal, not 0 from 1 - 1 */
    fvm_tensor_release(&x);
    fvm_tensor_release(&out);

    /* softplus: no overflow at either end, NaN stays NaN */
    fvm_tensor sp = F32(D1(6), -1000.0f, 1000.0f, 0.0f, -20.0f, NAN, INFINITY), spo = junk(FVM_DTYPE_F32, D1(6));
    assert_int_equal(fvm_k_unary(FVM_UN_SOFTPLUS, &sp, &spo, &d), FVM_OK);
    EXPECT(&spo, 0.0, 1000.0, (double)logf(2.0f), (double)log1pf(expf(-20.0f)), NAN, INFINITY);
    fvm_tensor_release(&sp);
    fvm_tensor_release(&spo);

    fvm_tensor y = F64(D1(5), -800.0, 800.0, -40.0, NAN, -INFINITY), out2 = junk(FVM_DTYPE_F64, D1(5));
    assert_int_equal(fvm_k_unary(FVM_UN_SIGMOID, &y, &out2, &d), FVM_OK);
    EXPECT(&out2, exp(-800.0), 1.0, exp(-40.0) / (1.0 + exp(-40.0)), NAN, 0.0);
    /* relu: negatives to 0, NaN stays NaN */
    assert_int_equal(fvm_k_unary(FVM_UN_SOFTPLUS, &y, &out2, &d), FVM_OK);
    EXPECT(&out2, 0.0, 800.0, log1p(exp(-40.0)), NAN, 0.0);
    assert_int_equal(fvm_k_unary(FVM_UN_RELU, &y, &out2, &d), FVM_OK);
    EXPECT(&out2, 0.0, 800.0, 0.0, NAN, 0.0);
    assert_int_equal(fvm_k_unary(FVM_UN_ABS, &y, &out2, &d), FVM_OK);
    EXPECT(&out2, 800.0, 800.0, 40.0, NAN, INFINITY);
    /* in place */
    assert_int_equal(fvm_k_unary(FVM_UN_NEG, &y, &y, &d), FVM_OK);
    EXPECT(&y, 800.0, -800.0, 40.0, NAN, INFINITY);
    assert_int_equal(d.n, 0);
    fvm_tensor_release(&y);
    fvm_tensor_release(&out2);
}

/* sin, cos, erf, log1p and sign against values of Python's math module
 * (the C library's, correctly rounded at these points), and at their edges. */
static void test_unary_sin_cos_erf_log1p_sign(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor x = F64(D1(8), 0.5, -2.5, 3.0, 100.0, -0.0, 1e-300, INFINITY, NAN), o = junk(FVM_DTYPE_F64, D1(8));
    assert_int_equal(fvm_k_unary(FVM_UN_SIN, &x, &o, &d), FVM_OK);
    EXPECT_NEAR(&o, ULP2_F64, 0.479425538604203, -0.5984721441039565, 0.1411200080598672, -0.5063656411097588, -0.0,
                1e-300, NAN, NAN);
    assert_int_equal(fvm_k_unary(FVM_UN_COS, &x, &o, &d), FVM_OK);
    EXPECT_NEAR(&o, ULP2_F64, 0.8775825618903728, -0.8011436155469337, -0.9899924966004454, 0.8623188722876839, 1.0,
                1.0, NAN, NAN);
    fvm_tensor_release(&x);
    /* erf is odd, saturates to +-1, and is 2/sqrt(pi) x near 0 */
    x = F64(D1(8), 0.5, -1.5, 3.0, 6.0, -0.0, 1e-300, -INFINITY, NAN);
    assert_int_equal(fvm_k_unary(FVM_UN_ERF, &x, &o, &d), FVM_OK);
    EXPECT_NEAR(&o, ULP2_F64, 0.5204998778130465, -0.9661051464753108, 0.9999779095030014, 1.0, -0.0,
                1.1283791670955126e-300, -1.0, NAN);
    fvm_tensor_release(&x);
    /* log1p keeps tiny x (log(1 + 1e-10) is 1.000000082690371e-10) */
    x = F64(D1(8), 1e-10, 0.5, -0.5, -1.0, -2.0, -0.0, INFINITY, 1e-300);
    assert_int_equal(fvm_k_unary(FVM_UN_LOG1P, &x, &o, &d), FVM_OK);
    EXPECT_NEAR(&o, ULP2_F64, 9.999999999500001e-11, 0.4054651081081644, -0.6931471805599453, -INFINITY, NAN, -0.0,
                INFINITY, 1e-300);
    fvm_tensor_release(&x);
    /* sign: +-1, zeros keep their sign, NaN stays NaN; the smallest subnormal is positive */
    x = F64(D1(8), 2.5, -1e-300, 0.0, -0.0, INFINITY, -INFINITY, NAN, 5e-324);
    assert_int_equal(fvm_k_unary(FVM_UN_SIGN, &x, &o, &d), FVM_OK);
    EXPECT_NEAR(&o, 0.0, 1.0, -1.0, 0.0, -0.0, 1.0, -1.0, NAN, 1.0);
    fvm_tensor_release(&x);
    fvm_tensor_release(&o);

    /* f32, in f32 (the f functions of the C library) */
    fvm_tensor y = F32(D1(5), 0.5f, -2.5f, 3.0f, 100.0f, 0x1p-30f), yo = junk(FVM_DTYPE_F32, D1(5));
    assert_int_equal(fvm_k_unary(FVM_UN_SIN, &y, &yo, &d), FVM_OK);
    EXPECT_NEAR(&yo, ULP2_F32, 0.479425538604203, -0.5984721441039565, 0.1411200080598672, -0.5063656411097588,
                9.313225746154785e-10);
    assert_int_equal(fvm_k_unary(FVM_UN_COS, &y, &yo, &d), FVM_OK);
    EXPECT_NEAR(&yo, ULP2_F32, 0.8775825618903728, -0.8011436155469337, -0.9899924966004454, 0.8623188722876839, 1.0);
    assert_int_equal(fvm_k_unary(FVM_UN_ERF, &y, &yo, &d), FVM_OK);
    EXPECT_NEAR(&yo, ULP2_F32, 0.5204998778130465, -0.999593047982555, 0.9999779095030014, 1.0, 1.050884991041862e-09);
    /* log1pf(2^-30) is 2^-30 to f32's precision; logf(1 + 2^-30) would be 0 */
    fvm_tensor_set_f64(&y, 1, -0.5);
    assert_int_equal(fvm_k_unary(FVM_UN_LOG1P, &y, &yo, &d), FVM_OK);
    EXPECT_NEAR(&yo, ULP2_F32, 0.4054651081081644, -0.6931471805599453, 1.3862943611198906, 4.61512051684126,
                9.313225746154785e-10);
    assert_int_equal(fvm_k_unary(FVM_UN_SIGN, &y, &yo, &d), FVM_OK);
    EXPECT(&yo, 1.0, -1.0, 1.0, 1.0, 1.0);
    fvm_tensor_release(&y);
    fvm_tensor_release(&yo);

    /* integers: sign in i32 and i64 (sign(INT_MIN) is -1); sin of an integer and sign of a u32 are type errors */
    fvm_tensor i = I32(D1(5), INT32_MIN, -7, 0, 5, INT32_MAX), io = junk(FVM_DTYPE_I32, D1(5));
    assert_int_equal(fvm_k_unary(FVM_UN_SIGN, &i, &io, &d), FVM_OK);
    EXPECT_I(&io, -1, -1, 0, 1, 1);
    fvm_tensor l = I64(D1(3), INT64_MIN, 0, 9), lo = junk(FVM_DTYPE_I64, D1(3));
    assert_int_equal(fvm_k_unary(FVM_UN_SIGN, &l, &lo, &d), FVM_OK);
    EXPECT_I(&lo, -1, 0, 1);
    assert_int_equal(d.n, 0);
    assert_int_equal(fvm_k_unary(FVM_UN_SIN, &i, &io, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "sin", "i32");
    fvm_tensor u = U32(D1(2), 1, 2);
    assert_int_equal(fvm_k_unary(FVM_UN_SIGN, &u, &u, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "sign", "u32");
    rel(&i, &io, &l);
    rel(&lo, &u, NULL);
}

static void test_unary_int_and_bool(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor x = I32(D1(5), INT32_MIN, -7, 0, 5, INT32_MAX), out = junk(FVM_DTYPE_I32, D1(5));
    assert_int_equal(fvm_k_unary(FVM_UN_NEG, &x, &out, &d), FVM_OK);
    EXPECT_I(&out, INT32_MIN, 7, 0, -5, -INT32_MAX); /* -INT_MIN wraps */
    assert_int_equal(fvm_k_unary(FVM_UN_ABS, &x, &out, &d), FVM_OK);
    EXPECT_I(&out, INT32_MIN, 7, 0, 5, INT32_MAX);
    assert_int_equal(fvm_k_unary(FVM_UN_RELU, &x, &out, &d), FVM_OK);
    EXPECT_I(&out, 0, 0, 0, 5, INT32_MAX);
    fvm_tensor_release(&x);
    fvm_tensor_release(&out);

    fvm_tensor y = I64(D1(3), INT64_MIN, -3, 9), out2 = junk(FVM_DTYPE_I64, D1(3));
    assert_int_equal(fvm_k_unary(FVM_UN_NEG, &y, &out2, &d), FVM_OK);
    EXPECT_I(&out2, INT64_MIN, 3, -9);
    assert_int_equal(fvm_k_unary(FVM_UN_ABS, &y, &out2, &d), FVM_OK);
    EXPECT_I(&out2, INT64_MIN, 3, 9);
    assert_int_equal(fvm_k_unary(FVM_UN_RELU, &y, &out2, &d), FVM_OK);
    EXPECT_I(&out2, 0, 0, 9);
    fvm_tensor_release(&y);
    fvm_tensor_release(&out2);

    fvm_tensor b = BOOL(D1(2), 0, 1), out3 = junk(FVM_DTYPE_BOOL, D1(2));
    assert_int_equal(fvm_k_unary(FVM_UN_NOT, &b, &out3, &d), FVM_OK);
    EXPECT_I(&out3, 1, 0);
    assert_int_equal(d.n, 0);

    /* unsupported pairs are type errors, not crashes */
    assert_int_equal(fvm_k_unary(FVM_UN_NEG, &b, &out3, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "neg", "bool");
    fvm_tensor i = I32(D1(2), 1, 2), f = F32(D1(2), 1, 2), u = U32(D1(2), 1, 2);
    assert_int_equal(fvm_k_unary(FVM_UN_EXP, &i, &i, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "exp", "i32");
    assert_int_equal(fvm_k_unary(FVM_UN_NOT, &f, &f, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "not", "f32");
    assert_int_equal(fvm_k_unary(FVM_UN_NEG, &u, &u, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "neg", "u32");
    assert_int_equal(fvm_k_unary((fvm_unary)99, &f, &f, &d), FVM_ERR_USAGE);
    fvm_diag_clear(&d);
    rel(&b, &out3, &i);
    rel(&f, &u, NULL);
}

/* ---- binary -------------------------------------------------------------- */

static void test_binary_float_ops(void **state)
{
    (void)state;
    fvm_diag d = {0};
    for (int f64 = 0; f64 < 2; f64++) {
        fvm_dtype dt = f64 ? FVM_DTYPE_F64 : FVM_DTYPE_F32;
        fvm_tensor a = junk(dt, D1(6)), b = junk(dt, D1(6));
        const double av[] = {1.5, -2, 0, 4, NAN, 3}, bv[] = {2, -2, -1, 0.5, 1, NAN};
        for (int i = 0; i < 6; i++) {
            fvm_tensor_set_f64(&a, i, av[i]);
            fvm_tensor_set_f64(&b, i, bv[i]);
        }
        fvm_tensor o = junk(dt, D1(6)), c = junk(FVM_DTYPE_BOOL, D1(6));
        assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, 3.5, -4.0, -1.0, 4.5, NAN, NAN);
        assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, -0.5, 0.0, 1.0, 3.5, NAN, NAN);
        assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, 3.0, 4.0, -0.0, 2.0, NAN, NAN);
        assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, 0.75, 1.0, -0.0, 8.0, NAN, NAN);
        assert_int_equal(fvm_k_binary(FVM_BIN_POW, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, 2.25, 0.25, INFINITY, 2.0, NAN, NAN);
        assert_int_equal(fvm_k_binary(FVM_BIN_MAXIMUM, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, 2.0, -2.0, 0.0, 4.0, NAN, NAN); /* NaN from either side */
        assert_int_equal(fvm_k_binary(FVM_BIN_MINIMUM, &a, &b, &o, &d), FVM_OK);
        EXPECT(&o, 1.5, -2.0, -1.0, 0.5, NAN, NAN);
        assert_int_equal(fvm_k_binary(FVM_BIN_EQ, &a, &b, &c, &d), FVM_OK);
        EXPECT_I(&c, 0, 1, 0, 0, 0, 0);
        assert_int_equal(fvm_k_binary(FVM_BIN_NE, &a, &b, &c, &d), FVM_OK);
        EXPECT_I(&c, 1, 0, 1, 1, 1, 1);
        assert_int_equal(fvm_k_binary(FVM_BIN_LT, &a, &b, &c, &d), FVM_OK);
        EXPECT_I(&c, 1, 0, 0, 0, 0, 0);
        assert_int_equal(fvm_k_binary(FVM_BIN_LE, &a, &b, &c, &d), FVM_OK);
        EXPECT_I(&c, 1, 1, 0, 0, 0, 0);
        assert_int_equal(fvm_k_binary(FVM_BIN_GT, &a, &b, &c, &d), FVM_OK);
        EXPECT_I(&c, 0, 0, 1, 1, 0, 0);
        assert_int_equal(fvm_k_binary(FVM_BIN_GE, &a, &b, &c, &d), FVM_OK);
        EXPECT_I(&c, 0, 1, 1, 1, 0, 0);
        /* float division by zero is IEEE, not an error */
        fvm_tensor z = junk(dt, D0());
        fvm_tensor_set_f64(&z, 0, 0.0);
        assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &z, &o, &d), FVM_OK);
        EXPECT(&o, INFINITY, -INFINITY, NAN, INFINITY, NAN, INFINITY);
        assert_int_equal(d.n, 0);
        /* bool-only ops are type errors */
        assert_int_equal(fvm_k_binary(FVM_BIN_AND, &a, &b, &o, &d), FVM_ERR_TYPE);
        expect_one_error(&d, FVM_ERR_TYPE, "and", f64 ? "f64" : "f32");
        rel(&a, &b, &o);
        rel(&c, &z, NULL);
    }
}

static void test_binary_int_ops(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = I32(D1(5), 7, -7, 7, -7, 0), b = I32(D1(5), 2, 2, -2, -2, 5);
    fvm_tensor o = junk(FVM_DTYPE_I32, D1(5)), c = junk(FVM_DTYPE_BOOL, D1(5));
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 9, -5, 5, -9, 5);
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 5, -9, 9, -5, -5);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 14, -14, -14, 14, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 3, -3, -3, 3, 0); /* truncation toward zero */
    assert_int_equal(fvm_k_binary(FVM_BIN_MAXIMUM, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 7, 2, 7, -2, 5);
    assert_int_equal(fvm_k_binary(FVM_BIN_MINIMUM, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 2, -7, -2, -7, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_EQ, &a, &a, &c, &d), FVM_OK);
    EXPECT_I(&c, 1, 1, 1, 1, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_NE, &a, &b, &c, &d), FVM_OK);
    EXPECT_I(&c, 1, 1, 1, 1, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_LT, &a, &b, &c, &d), FVM_OK);
    EXPECT_I(&c, 0, 1, 0, 1, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_LE, &b, &a, &c, &d), FVM_OK);
    EXPECT_I(&c, 1, 0, 1, 0, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_GT, &a, &b, &c, &d), FVM_OK);
    EXPECT_I(&c, 1, 0, 1, 0, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_GE, &a, &b, &c, &d), FVM_OK);
    EXPECT_I(&c, 1, 0, 1, 0, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_POW, &a, &b, &o, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "pow", "i32");
    rel(&a, &b, &o);

    /* i64 and u32 */
    fvm_tensor p = I64(D1(3), 9000000000ll, -9, 10), q = I64(D1(3), 4, 4, -3);
    fvm_tensor po = junk(FVM_DTYPE_I64, D1(3)), pc = junk(FVM_DTYPE_BOOL, D1(3));
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, 2250000000ll, -2, -3);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, 36000000000ll, -36, -30);
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, 8999999996ll, -13, 13);
    assert_int_equal(fvm_k_binary(FVM_BIN_GT, &p, &q, &pc, &d), FVM_OK);
    EXPECT_I(&pc, 1, 0, 1);
    rel(&p, &q, &po);
    fvm_tensor u = U32(D1(3), 4000000000u, 7, 1), v = U32(D1(3), 3, 2, 2);
    fvm_tensor uo = junk(FVM_DTYPE_U32, D1(3));
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 1333333333, 3, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_MAXIMUM, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 4000000000ll, 7, 2);
    assert_int_equal(fvm_k_binary(FVM_BIN_MINIMUM, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 3, 2, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_LT, &u, &v, &pc, &d), FVM_OK);
    EXPECT_I(&pc, 0, 0, 1); /* unsigned order: 4e9 is not below 3 */
    assert_int_equal(d.n, 0);
    rel(&u, &v, &uo);
    rel(&pc, &c, NULL);
}

static void test_binary_bool_and_type_errors(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = BOOL(D1(4), 0, 0, 1, 1), b = BOOL(D1(4), 0, 1, 0, 1), o = junk(FVM_DTYPE_BOOL, D1(4));
    assert_int_equal(fvm_k_binary(FVM_BIN_AND, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 0, 0, 0, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_OR, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 0, 1, 1, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_EQ, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 1, 0, 0, 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_NE, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 0, 1, 1, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_LT, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 0, 1, 0, 0);
    assert_int_equal(d.n, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &a, &b, &o, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "add", "bool");
    fvm_tensor f = F32(D1(4), 1, 2, 3, 4), i = I32(D1(4), 1, 2, 3, 4);
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &f, &i, &f, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "f32", "i32");
    assert_int_equal(fvm_k_binary((fvm_binary)-1, &f, &f, &f, &d), FVM_ERR_USAGE);
    fvm_diag_clear(&d);
    rel(&a, &b, &o);
    rel(&f, &i, NULL);
}

static void test_integer_wrap(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = I32(D1(5), INT32_MAX, INT32_MIN, 65536, INT32_MAX, INT32_MIN);
    fvm_tensor b = I32(D1(5), 1, 1, 65536, 2, -1);
    fvm_tensor o = junk(FVM_DTYPE_I32, D1(5));
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, INT32_MIN, INT32_MIN + 1, 131072, INT32_MIN + 1, INT32_MAX);
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, INT32_MAX - 1, INT32_MAX, 0, INT32_MAX - 2, INT32_MIN + 1);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, INT32_MAX, INT32_MIN, 0, -2, INT32_MIN);
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, INT32_MAX, INT32_MIN, 1, INT32_MAX / 2, INT32_MIN); /* INT_MIN / -1 */
    rel(&a, &b, &o);

    fvm_tensor p = I64(D1(3), INT64_MAX, INT64_MIN, 1ll << 32), q = I64(D1(3), 1, -1, 1ll << 32);
    fvm_tensor po = junk(FVM_DTYPE_I64, D1(3));
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, INT64_MIN, INT64_MAX, 1ll << 33);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, INT64_MAX, INT64_MIN, 0); /* INT64_MIN * -1 wraps; 2^64 wraps to 0 */
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, INT64_MAX, INT64_MIN, 1);
    rel(&p, &q, &po);

    fvm_tensor u = U32(D1(2), 0, 4294967295u), v = U32(D1(2), 1, 2);
    fvm_tensor uo = junk(FVM_DTYPE_U32, D1(2));
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 4294967295ll, 4294967293ll);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 0, 4294967294ll);
    assert_int_equal(d.n, 0);
    rel(&u, &v, &uo);
}

static void test_u8(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = U8(D1(3), 200, 3, 16), b = U8(D1(3), 100, 5, 17), o = junk(FVM_DTYPE_U8, D1(3));
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 44, 8, 33);
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 100, 254, 255);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 32, 15, 16); /* 20000 mod 256 = 32, 272 mod 256 = 16 */
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 2, 0, 0);
    rel(&a, &b, &o);
    /* casts: floats truncate and saturate into 0..255; u8 to f32 is exact */
    fvm_tensor f = F32(D1(5), 300.7f, -3.0f, 12.9f, NAN, 255.0f), fo = junk(FVM_DTYPE_U8, D1(5));
    assert_int_equal(fvm_k_cast(&f, &fo, &d), FVM_OK);
    EXPECT_I(&fo, 255, 0, 12, 0, 255);
    fvm_tensor back = junk(FVM_DTYPE_F32, D1(5));
    assert_int_equal(fvm_k_cast(&fo, &back, &d), FVM_OK);
    EXPECT(&back, 255.0, 0.0, 12.0, 0.0, 255.0);
    rel(&f, &fo, &back);
    /* sum wraps in u8; argmax */
    fvm_tensor s = U8(D1(4), 250, 3, 9, 1), so = junk(FVM_DTYPE_U8, D0()), ao = junk(FVM_DTYPE_I64, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &s, 1, &so, &d), FVM_OK);
    EXPECT_I(&so, 7); /* 263 mod 256 */
    assert_int_equal(fvm_k_argmax(&s, 0, &ao, &d), FVM_OK);
    EXPECT_I(&ao, 0);
    rel(&s, &so, &ao);
    assert_int_equal(d.n, 0);
}

static void test_integer_division_by_zero(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = I32(D1(4), 1, 2, 3, 4), b = I32(D1(4), 1, 1, 0, 1), o = junk(FVM_DTYPE_I32, D1(4));
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &b, &o, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "division by zero", "element 2");
    fvm_tensor z = I32(D0(), 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &a, &z, &o, &d), FVM_ERR_RUNTIME); /* broadcast scalar */
    expect_one_error(&d, FVM_ERR_RUNTIME, "division by zero", NULL);
    rel(&a, &b, &o);
    fvm_tensor u = U32(D1(2), 5, 6), uz = U32(D1(2), 3, 0), uo = junk(FVM_DTYPE_U32, D1(2));
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &u, &uz, &uo, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "division by zero", "element 1");
    fvm_tensor p = I64(D1(1), 5), pz = I64(D1(1), 0), po = junk(FVM_DTYPE_I64, D1(1));
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &p, &pz, &po, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "division by zero", NULL);
    rel(&u, &uz, &uo);
    rel(&p, &pz, &po);
    fvm_tensor_release(&z);
}

/* floor_div and mod as Python's // and % (NumPy's floor_divide and mod):
 * the quotient rounded toward -inf, the remainder with the divisor's sign,
 * zeros signed as there; by zero: x / 0 and NaN. Values by hand (and by
 * Python, except the division by zero, where Python raises and NumPy gives
 * these). */
static void test_floor_div_mod_float(void **state)
{
    (void)state;
    fvm_diag d = {0};
    const double av[] = {7.5, -7.5, 7.5, -7.5, 1.0, -1.0, 0.0, -0.0, 5.0, NAN, INFINITY, 1.0, -1.0, 3.0, -0.0, 1.0};
    const double bv[] = {2, 2, -2, -2, INFINITY, INFINITY, 3, 3, 0, 1, 1, -INFINITY, -INFINITY, -3, 0, 0.1};
    enum { N = sizeof av / sizeof *av };
    for (int f64 = 0; f64 < 2; f64++) {
        fvm_dtype dt = f64 ? FVM_DTYPE_F64 : FVM_DTYPE_F32;
        fvm_tensor a = junk(dt, D1(N)), b = junk(dt, D1(N)), o = junk(dt, D1(N));
        for (int i = 0; i < N; i++) {
            fvm_tensor_set_f64(&a, i, av[i]);
            fvm_tensor_set_f64(&b, i, bv[i]);
        }
        /* the last pair: 1 // 0.1 is 9, not floor(1 / 0.1) = 10, as 0.1 is a little above 1/10 in both
         * dtypes; the remainder is 1 - 9 * 0.1, exact (fmod) */
        assert_int_equal(fvm_k_binary(FVM_BIN_FLOOR_DIV, &a, &b, &o, &d), FVM_OK);
        EXPECT_NEAR(&o, 0.0, 3.0, -4.0, -4.0, 3.0, 0.0, -1.0, 0.0, -0.0, INFINITY, NAN, NAN, -1.0, 0.0, -1.0, NAN, 9.0);
        assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &a, &b, &o, &d), FVM_OK);
        EXPECT_NEAR(&o, 0.0, 1.5, 0.5, -0.5, -1.5, 1.0, INFINITY, 0.0, 0.0, NAN, NAN, NAN, -INFINITY, -1.0, -0.0, NAN,
                    f64 ? 0.09999999999999995 : 0.09999998658895493);
        assert_int_equal(d.n, 0);
        rel(&a, &b, &o);
    }
}

/* Integers: rounded toward -inf, the divisor's sign; by zero 0 (NumPy's
 * result; no error and no trap), INT_MIN floor_div -1 wraps to INT_MIN and
 * INT_MIN mod -1 is 0. */
static void test_floor_div_mod_int(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = I32(D1(12), 7, -7, 7, -7, 0, 5, INT32_MIN, INT32_MIN, -1, 6, INT32_MAX, -5);
    fvm_tensor b = I32(D1(12), 2, 2, -2, -2, 3, 0, -1, 1, 3, -3, -1, 0), o = junk(FVM_DTYPE_I32, D1(12));
    assert_int_equal(fvm_k_binary(FVM_BIN_FLOOR_DIV, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 3, -4, -4, 3, 0, 0, INT32_MIN, INT32_MIN, -1, -2, -INT32_MAX, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 1, 1, -1, -1, 0, 0, 0, 0, 2, 0, 0, 0);
    rel(&a, &b, &o);
    /* broadcast: [2,3] by a scalar -3 */
    a = I32(D2(2, 3), -4, -3, -2, 2, 3, 4);
    b = I32(D0(), -3);
    o = junk(FVM_DTYPE_I32, D2(2, 3));
    assert_int_equal(fvm_k_binary(FVM_BIN_FLOOR_DIV, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, 1, 1, 0, -1, -1, -2);
    assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &a, &b, &o, &d), FVM_OK);
    EXPECT_I(&o, -1, 0, -2, -1, 0, -2);
    rel(&a, &b, &o);
    fvm_tensor p = I64(D1(4), INT64_MIN, -9, 9000000000ll, INT64_MIN), q = I64(D1(4), -1, 4, -7, 0);
    fvm_tensor po = junk(FVM_DTYPE_I64, D1(4));
    assert_int_equal(fvm_k_binary(FVM_BIN_FLOOR_DIV, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, INT64_MIN, -3, -1285714286ll, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &p, &q, &po, &d), FVM_OK);
    EXPECT_I(&po, 0, 3, -2, 0);
    rel(&p, &q, &po);
    fvm_tensor u = U32(D1(4), 7, 4000000000u, 5, 0), v = U32(D1(4), 2, 3, 0, 7), uo = junk(FVM_DTYPE_U32, D1(4));
    assert_int_equal(fvm_k_binary(FVM_BIN_FLOOR_DIV, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 3, 1333333333, 0, 0);
    assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &u, &v, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 1, 1, 0, 0);
    rel(&u, &v, &uo);
    fvm_tensor x = U8(D1(3), 200, 7, 255), y = U8(D1(3), 0, 3, 16), xo = junk(FVM_DTYPE_U8, D1(3));
    assert_int_equal(fvm_k_binary(FVM_BIN_FLOOR_DIV, &x, &y, &xo, &d), FVM_OK);
    EXPECT_I(&xo, 0, 2, 15);
    assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &x, &y, &xo, &d), FVM_OK);
    EXPECT_I(&xo, 0, 1, 15);
    assert_int_equal(d.n, 0);
    rel(&x, &y, &xo);
    /* bool is not numeric */
    fvm_tensor t = BOOL(D1(2), 0, 1), to = junk(FVM_DTYPE_BOOL, D1(2));
    assert_int_equal(fvm_k_binary(FVM_BIN_MOD, &t, &t, &to, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "mod", "bool");
    rel(&t, &to, NULL);
}

/* ---- broadcasting -------------------------------------------------------- */

/* a - b (f64) and a * b (i32, wrapping) for shapes that broadcast, checked
 * element by element against bcast_index. */
static void check_broadcast(fvm_dims sa, fvm_dims sb)
{
    fvm_dims so;
    assert_int_equal(fvm_dims_broadcast(&sa, &sb, &so, NULL), FVM_OK);
    int64_t na = fvm_dims_count(&sa), nb = fvm_dims_count(&sb), no = fvm_dims_count(&so);
    fvm_tensor a = junk(FVM_DTYPE_F64, sa), b = junk(FVM_DTYPE_F64, sb), o = junk(FVM_DTYPE_F64, so);
    fvm_tensor ia = junk(FVM_DTYPE_I32, sa), ib = junk(FVM_DTYPE_I32, sb), io = junk(FVM_DTYPE_I32, so);
    for (int64_t i = 0; i < na; i++) {
        fvm_tensor_set_f64(&a, i, 0.5 * (double)i - 3.0);
        fvm_tensor_set_i64(&ia, i, 100003 * i + 7);
    }
    for (int64_t i = 0; i < nb; i++) {
        fvm_tensor_set_f64(&b, i, 1000.0 + 0.25 * (double)i);
        fvm_tensor_set_i64(&ib, i, 65537 * i - 11);
    }
    fvm_diag d = {0};
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &a, &b, &o, &d), FVM_OK);
    assert_int_equal(fvm_k_binary(FVM_BIN_MUL, &ia, &ib, &io, &d), FVM_OK);
    const double *ap = fvm_tensor_data(&a), *bp = fvm_tensor_data(&b), *op = fvm_tensor_data(&o);
    const int32_t *iap = fvm_tensor_data(&ia), *ibp = fvm_tensor_data(&ib), *iop = fvm_tensor_data(&io);
    for (int64_t i = 0; i < no; i++) {
        int64_t ja = bcast_index(&so, &sa, i), jb = bcast_index(&so, &sb, i);
        double want = ap[ja] - bp[jb];
        if (op[i] != want)
            fail_msg("element %lld: %g, expected %g", (long long)i, op[i], want);
        int32_t iwant = (int32_t)((uint32_t)iap[ja] * (uint32_t)ibp[jb]);
        if (iop[i] != iwant)
            fail_msg("i32 element %lld: %d, expected %d", (long long)i, iop[i], iwant);
    }
    rel(&a, &b, &o);
    rel(&ia, &ib, &io);
}

static void test_broadcast(void **state)
{
    (void)state;
    /* hand-checked cases first */
    fvm_diag d = {0};
    fvm_tensor a = F32(D2(2, 3), 1, 2, 3, 4, 5, 6), b = F32(D1(3), 10, 20, 30), o = junk(FVM_DTYPE_F32, D2(2, 3));
    assert_int_equal(fvm_k_binary(FVM_BIN_ADD, &a, &b, &o, &d), FVM_OK);
    EXPECT(&o, 11, 22, 33, 14, 25, 36);
    rel(&a, &b, &o);
    fvm_tensor c = I32(D2(2, 1), 1, 2), e = I32(D2(1, 3), 10, 20, 30), co = junk(FVM_DTYPE_I32, D2(2, 3));
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &c, &e, &co, &d), FVM_OK);
    EXPECT_I(&co, -9, -19, -29, -8, -18, -28);
    rel(&c, &e, &co);
    fvm_tensor s = F64(D0(), 2), v = F64(D1(4), 1, 2, 3, 4), vo = junk(FVM_DTYPE_F64, D1(4));
    assert_int_equal(fvm_k_binary(FVM_BIN_SUB, &s, &v, &vo, &d), FVM_OK); /* scalar on the left */
    EXPECT(&vo, 1, 0, -1, -2);
    assert_int_equal(fvm_k_binary(FVM_BIN_DIV, &v, &s, &vo, &d), FVM_OK); /* and on the right */
    EXPECT(&vo, 0.5, 1, 1.5, 2);
    rel(&s, &v, &vo);
    assert_int_equal(d.n, 0);

    /* incompatible shapes are refused by the shape helper */
    fvm_dims x = D2(2, 3), y = D1(2), out;
    assert_int_equal(fvm_dims_broadcast(&x, &y, &out, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "[2,3]", "[2]");

    /* every path (one run, scalar runs, trailing match, general strided),
     * with lengths that hit both the 32-wide blocks and the tails */
    check_broadcast(D2(2, 3), D1(3));
    check_broadcast(D2(2, 1), D2(1, 3));
    check_broadcast(D0(), D1(4));
    check_broadcast(D1(70), D0());
    check_broadcast(D0(), D0());
    check_broadcast(D2(5, 37), D2(5, 37));
    check_broadcast(D1(37), D2(5, 37));
    check_broadcast(D3(3, 1, 4), D3(1, 5, 1));
    check_broadcast(D3(2, 3, 33), D2(3, 1));
    check_broadcast(D3(4, 1, 33), D3(1, 3, 33));
    check_broadcast(D3(2, 1, 1), D3(1, 1, 65));
    check_broadcast(dims(4, (int64_t)2, (int64_t)1, (int64_t)3, (int64_t)1),
                    dims(3, (int64_t)4, (int64_t)1, (int64_t)5));
    check_broadcast(D2(1, 1), D3(2, 1, 1));
}

/* ---- select, cast, fill, iota -------------------------------------------- */

static void test_select(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor p = BOOL(D2(2, 1), 1, 0), a = F32(D2(1, 3), 1, 2, 3), b = F32(D0(), -1);
    fvm_tensor o = junk(FVM_DTYPE_F32, D2(2, 3));
    assert_int_equal(fvm_k_select(&p, &a, &b, &o, &d), FVM_OK);
    EXPECT(&o, 1, 2, 3, -1, -1, -1);
    rel(&p, &a, &b);
    fvm_tensor_release(&o);

    /* 8-byte and 1-byte elements, full shapes against a direct formula */
    fvm_tensor q = BOOL(D1(5), 1, 0, 0, 1, 1), x = I64(D1(5), 1, 2, 3, 4, 5), y = I64(D1(5), -1, -2, -3, -4, -5);
    fvm_tensor qo = junk(FVM_DTYPE_I64, D1(5));
    assert_int_equal(fvm_k_select(&q, &x, &y, &qo, &d), FVM_OK);
    EXPECT_I(&qo, 1, -2, -3, 4, 5);
    fvm_tensor bx = BOOL(D1(5), 1, 1, 1, 1, 1), by = BOOL(D0(), 0), bo = junk(FVM_DTYPE_BOOL, D1(5));
    assert_int_equal(fvm_k_select(&q, &bx, &by, &bo, &d), FVM_OK);
    EXPECT_I(&bo, 1, 0, 0, 1, 1);
    assert_int_equal(d.n, 0);
    /* the predicate must be bool; branches must agree */
    assert_int_equal(fvm_k_select(&x, &x, &y, &qo, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "bool", "i64");
    assert_int_equal(fvm_k_select(&q, &x, &bx, &qo, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "i64", "bool");
    rel(&q, &x, &y);
    rel(&qo, &bx, &by);
    fvm_tensor_release(&bo);
}

static void test_cast(void **state)
{
    (void)state;
    fvm_diag d = {0};
    /* float -> int: truncation toward zero, saturation, NaN -> 0 */
    fvm_tensor f = F32(D1(8), -2.7f, 2.7f, 3e9f, -3e9f, NAN, INFINITY, -INFINITY, -0.5f);
    fvm_tensor i = junk(FVM_DTYPE_I32, D1(8));
    assert_int_equal(fvm_k_cast(&f, &i, &d), FVM_OK);
    EXPECT_I(&i, -2, 2, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 0);
    fvm_tensor g = F64(D1(6), -1.5, 4294967295.9, 5e9, NAN, 7.5, -2147483648.9);
    fvm_tensor u = junk(FVM_DTYPE_U32, D1(6)), gi = junk(FVM_DTYPE_I32, D1(6));
    assert_int_equal(fvm_k_cast(&g, &u, &d), FVM_OK);
    EXPECT_I(&u, 0, 4294967295ll, 4294967295ll, 0, 7, 0);
    assert_int_equal(fvm_k_cast(&g, &gi, &d), FVM_OK);
    EXPECT_I(&gi, -1, INT32_MAX, INT32_MAX, 0, 7, INT32_MIN);
    fvm_tensor h = F64(D1(5), 1e19, -1e19, -9.9, NAN, 0x1p62), l = junk(FVM_DTYPE_I64, D1(5));
    assert_int_equal(fvm_k_cast(&h, &l, &d), FVM_OK);
    EXPECT_I(&l, INT64_MAX, INT64_MIN, -9, 0, 1ll << 62);
    /* to bool: x != 0 (NaN is not 0) */
    fvm_tensor fb = F32(D1(4), 0.0f, -0.0f, 0.1f, NAN), b = junk(FVM_DTYPE_BOOL, D1(4));
    assert_int_equal(fvm_k_cast(&fb, &b, &d), FVM_OK);
    EXPECT_I(&b, 0, 0, 1, 1);
    fvm_tensor ib = I32(D1(4), 0, -3, 256, 1), ibo = junk(FVM_DTYPE_BOOL, D1(4));
    assert_int_equal(fvm_k_cast(&ib, &ibo, &d), FVM_OK);
    EXPECT_I(&ibo, 0, 1, 1, 1); /* 256 is true, not its low byte */
    /* from bool */
    fvm_tensor bf = junk(FVM_DTYPE_F64, D1(4));
    assert_int_equal(fvm_k_cast(&ibo, &bf, &d), FVM_OK);
    EXPECT(&bf, 0, 1, 1, 1);
    /* integer narrowing wraps */
    fvm_tensor w = I64(D1(3), 0x100000005ll, -1, 0x80000000ll), wi = junk(FVM_DTYPE_I32, D1(3));
    assert_int_equal(fvm_k_cast(&w, &wi, &d), FVM_OK);
    EXPECT_I(&wi, 5, -1, INT32_MIN);
    fvm_tensor wu = junk(FVM_DTYPE_U32, D1(3));
    assert_int_equal(fvm_k_cast(&wi, &wu, &d), FVM_OK);
    EXPECT_I(&wu, 5, 4294967295ll, 2147483648ll);
    assert_int_equal(fvm_k_cast(&wu, &wi, &d), FVM_OK);
    EXPECT_I(&wi, 5, -1, INT32_MIN);
    /* to floats: one rounding */
    fvm_tensor big = I32(D1(2), 16777217, -3), bigf = junk(FVM_DTYPE_F32, D1(2));
    assert_int_equal(fvm_k_cast(&big, &bigf, &d), FVM_OK);
    EXPECT(&bigf, 16777216.0, -3.0);
    fvm_tensor l53 = I64(D1(1), (1ll << 53) + 1), l53f = junk(FVM_DTYPE_F64, D1(1)), l53s = junk(FVM_DTYPE_F32, D1(1));
    assert_int_equal(fvm_k_cast(&l53, &l53f, &d), FVM_OK);
    EXPECT(&l53f, 0x1p53);
    fvm_tensor odd = I64(D1(1), (1ll << 24) + 1 + (1ll << 40)), odds = junk(FVM_DTYPE_F32, D1(1));
    assert_int_equal(fvm_k_cast(&odd, &odds, &d), FVM_OK);
    EXPECT(&odds, (double)(float)((1ll << 24) + 1 + (1ll << 40)));
    fvm_tensor tenth = F64(D1(1), 0.1), tenthf = junk(FVM_DTYPE_F32, D1(1));
    assert_int_equal(fvm_k_cast(&tenth, &tenthf, &d), FVM_OK);
    EXPECT(&tenthf, (double)0.1f);
    /* same dtype: a copy */
    fvm_tensor same = junk(FVM_DTYPE_F32, D1(8));
    assert_int_equal(fvm_k_cast(&f, &same, &d), FVM_OK);
    assert_true(fvm_tensor_identical(&f, &same));
    assert_int_equal(d.n, 0);
    rel(&f, &i, &g);
    rel(&u, &gi, &h);
    rel(&l, &fb, &b);
    rel(&ib, &ibo, &bf);
    rel(&w, &wi, &wu);
    rel(&big, &bigf, &l53);
    rel(&l53f, &l53s, &odd);
    rel(&odds, &tenth, &tenthf);
    fvm_tensor_release(&same);
}

static void test_fill_and_iota(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor f = junk(FVM_DTYPE_F32, D2(3, 25));
    assert_int_equal(fvm_k_fill(2.5, &f, &d), FVM_OK);
    for (int i = 0; i < 75; i++)
        assert_true(fvm_tensor_get_f64(&f, i) == 2.5);
    fvm_tensor i = junk(FVM_DTYPE_I32, D1(3)), b = junk(FVM_DTYPE_BOOL, D1(2)), u = junk(FVM_DTYPE_U32, D1(2));
    assert_int_equal(fvm_k_fill(-3.7, &i, &d), FVM_OK);
    EXPECT_I(&i, -3, -3, -3);
    assert_int_equal(fvm_k_fill(2.0, &b, &d), FVM_OK);
    EXPECT_I(&b, 1, 1);
    assert_int_equal(fvm_k_fill(-1.0, &u, &d), FVM_OK);
    EXPECT_I(&u, 0, 0);
    fvm_tensor e = junk(FVM_DTYPE_F64, D2(0, 4));
    assert_int_equal(fvm_k_fill(1.0, &e, &d), FVM_OK); /* empty: nothing to do */

    fvm_tensor a0 = junk(FVM_DTYPE_I32, D2(2, 3)), a1 = junk(FVM_DTYPE_I64, D2(2, 3));
    assert_int_equal(fvm_k_iota(0, &a0, &d), FVM_OK);
    EXPECT_I(&a0, 0, 0, 0, 1, 1, 1);
    assert_int_equal(fvm_k_iota(1, &a1, &d), FVM_OK);
    EXPECT_I(&a1, 0, 1, 2, 0, 1, 2);
    fvm_tensor a3 = junk(FVM_DTYPE_F64, D3(2, 3, 2));
    assert_int_equal(fvm_k_iota(1, &a3, &d), FVM_OK);
    EXPECT(&a3, 0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2);
    fvm_tensor uf = junk(FVM_DTYPE_U32, D1(4));
    assert_int_equal(fvm_k_iota(0, &uf, &d), FVM_OK);
    EXPECT_I(&uf, 0, 1, 2, 3);
    assert_int_equal(d.n, 0);
    assert_int_equal(fvm_k_iota(0, &b, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "iota", "bool");
    rel(&f, &i, &b);
    rel(&u, &e, &a0);
    rel(&a1, &a3, &uf);
}

/* ---- matmul -------------------------------------------------------------- */

/* op(a) is [m,k] with A(i,j) given by val(i, j, 0); op(b) is [k,n] with
 * B(i,j) = val(i, j, 1). Small integers, so float products and sums are exact
 * and the BLAS result must equal the naive triple loop exactly. */
static double val(int64_t i, int64_t j, int which)
{
    return which ? (double)((i * 5 + j * 3) % 7 - 3) : (double)((i * 3 + j * 2) % 5 - 2);
}

/* Stores the logical matrix op(x) [r,c] as x itself: transposed when t. */
static fvm_tensor store_matrix(fvm_dtype dt, int64_t r, int64_t c, bool t, int which)
{
    fvm_tensor x = junk(dt, t ? D2(c, r) : D2(r, c));
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            fvm_tensor_set_f64(&x, t ? j * r + i : i * c + j, val(i, j, which));
    return x;
}

static void check_matmul(fvm_dtype dt, int64_t m, int64_t k, int64_t n, bool ta, bool tb, bool avec, bool bvec)
{
    fvm_tensor a, b;
    if (avec) { /* a vector [k]: row 0 of A */
        a = junk(dt, D1(k));
        for (int64_t j = 0; j < k; j++)
            fvm_tensor_set_f64(&a, j, val(0, j, 0));
        m = 1;
    } else {
        a = store_matrix(dt, m, k, ta, 0);
    }
    if (bvec) { /* b vector [k]: column 0 of B */
        b = junk(dt, D1(k));
        for (int64_t j = 0; j < k; j++)
            fvm_tensor_set_f64(&b, j, val(j, 0, 1));
        n = 1;
    } else {
        b = store_matrix(dt, k, n, tb, 1);
    }
    fvm_dims os = {0};
    if (!avec)
        os.d[os.rank++] = m;
    if (!bvec)
        os.d[os.rank++] = n;
    fvm_tensor o = junk(dt, os);
    if (fvm_dtype_is_float(dt))
        assert_int_equal(fvm_k_fill(NAN, &o, NULL), FVM_OK); /* BLAS must not read out */
    fvm_diag d = {0};
    assert_int_equal(fvm_k_matmul(&a, &b, ta, tb, &o, &d), FVM_OK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0;
            for (int64_t l = 0; l < k; l++)
                want += val(i, l, 0) * val(l, j, 1);
            double got = fvm_tensor_get_f64(&o, i * n + j);
            if (got != want)
                fail_msg("%s m=%lld k=%lld n=%lld ta=%d tb=%d: out[%lld,%lld] = %g, expected %g", fvm_dtype_name(dt),
                         (long long)m, (long long)k, (long long)n, ta, tb, (long long)i, (long long)j, got, want);
        }
    rel(&a, &b, &o);
}

/* The SGD step sub(w, mul(lr, c)) run by the fused kernel after a product
 * c, as the interpreter runs it, into a new tensor. */
static fvm_tensor sgd_after(const fvm_tensor *w, float lr, const fvm_tensor *c)
{
    fvm_tensor s = F32(D0(), lr), out;
    assert_int_equal(fvm_tensor_alloc(&out, FVM_DTYPE_F32, &c->shape, NULL), FVM_OK);
    const fvm_fstep st[] = {{.kind = FVM_FS_BINARY, .op = FVM_BIN_MUL, .arg = {1, 2}},
                            {.kind = FVM_FS_BINARY, .op = FVM_BIN_SUB, .arg = {0, -1}}};
    const fvm_tensor *in[] = {w, &s, c};
    assert_int_equal(fvm_k_fused(st, 2, in, 3, &out, NULL), FVM_OK);
    fvm_tensor_release(&s);
    return out;
}

/* f32 products of matrices that fvm_gemm_f32 takes: every element is the
 * chain acc = fmaf(A(i,l), B(l,j), acc) over l in order from 0, bit for bit,
 * with every implementation this CPU runs (random operands, so the rounding
 * of each step shows), across the tile, panel and k-block edges; and with
 * the SGD step as the epilogue, the bits of that chain then the step run
 * on the stored product. */
static void test_gemm_f32(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1},     {3, 5, 2},     {10, 784, 200}, {12, 17, 33},  {13, 600, 31},
                                        {25, 10, 16},  {200, 10, 10}, {31, 257, 47},  {10, 200, 10}, {7, 256, 65},
                                        {4, 300, 200}, {2, 17, 97},   {4, 8, 1024}};
    unsigned seed = 1;
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        for (int t = 0; t < 4; t++) {
            int64_t m = shapes[c][0], k = shapes[c][1], n = shapes[c][2];
            bool ta = t & 1, tb = t & 2;
            fvm_tensor a = junk(FVM_DTYPE_F32, ta ? D2(k, m) : D2(m, k)),
                       b = junk(FVM_DTYPE_F32, tb ? D2(n, k) : D2(k, n));
            fvm_tensor o = junk(FVM_DTYPE_F32, D2(m, n));
            float *pa = fvm_tensor_data(&a), *pb = fvm_tensor_data(&b), *po = fvm_tensor_data(&o);
            for (int64_t i = 0; i < m * k; i++)
                pa[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / (1 << 23) - 1.0f;
            for (int64_t i = 0; i < k * n; i++)
                pb[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / (1 << 23) - 1.0f;
            mm_shape s = {
                .m = m, .n = n, .k = k, .a_si = ta ? 1 : k, .a_sk = ta ? m : 1, .b_sk = tb ? 1 : n, .b_sj = tb ? k : 1};
            assert_true(fvm_gemm_f32_fits(&s));
            for (int isa = FVM_GEMM_GENERIC; isa <= FVM_GEMM_AVX512 + 1; isa++) {
                if (isa <= FVM_GEMM_AVX512 && !fvm_gemm_f32_isa((fvm_gemm_isa)isa))
                    continue;
                assert_int_equal(fvm_k_fill(NAN, &o, NULL), FVM_OK);
                if (isa <= FVM_GEMM_AVX512)
                    fvm_gemm_f32_with((fvm_gemm_isa)isa, &s, pa, pb, po, NULL);
                else /* the dispatch of fvm_k_matmul */
                    assert_int_equal(fvm_k_matmul(&a, &b, ta, tb, &o, NULL), FVM_OK);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        float want = 0.0f;
                        for (int64_t l = 0; l < k; l++)
                            want = fmaf(pa[ta ? l * m + i : i * k + l], pb[tb ? j * k + l : l * n + j], want);
                        if (memcmp(&po[i * n + j], &want, sizeof want) != 0)
                            fail_msg("implementation %d, m=%lld k=%lld n=%lld ta=%d tb=%d: out[%lld,%lld] = %a, "
                                     "expected %a",
                                     isa, (long long)m, (long long)k, (long long)n, ta, tb, (long long)i, (long long)j,
                                     po[i * n + j], want);
                    }
                if (isa > FVM_GEMM_AVX512)
                    continue;
                fvm_tensor w = junk(FVM_DTYPE_F32, D2(m, n)), e = junk(FVM_DTYPE_F32, D2(m, n));
                float *pw = fvm_tensor_data(&w), *pe = fvm_tensor_data(&e), lr = 0.05f;
                for (int64_t i = 0; i < m * n; i++)
                    pw[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / (1 << 23) - 1.0f;
                fvm_tensor want = sgd_after(&w, lr, &o);
                const float *pv = fvm_tensor_data(&want);
                assert_int_equal(fvm_k_fill(NAN, &e, NULL), FVM_OK);
                fvm_gemm_f32_with((fvm_gemm_isa)isa, &s, pa, pb, pe, &(fvm_gemm_epilogue){.scale = lr, .base = pw});
                for (int64_t i = 0; i < m * n; i++)
                    if (memcmp(&pe[i], &pv[i], sizeof *pe) != 0)
                        fail_msg("implementation %d, m=%lld k=%lld n=%lld ta=%d tb=%d: with the SGD epilogue, "
                                 "out[%lld] = %a, expected %a",
                                 isa, (long long)m, (long long)k, (long long)n, ta, tb, (long long)i, pe[i], pv[i]);
                /* the accumulation epilogue: out = base + the product, the bits of add(base, product) */
                assert_int_equal(fvm_k_fill(NAN, &e, NULL), FVM_OK);
                fvm_gemm_f32_with((fvm_gemm_isa)isa, &s, pa, pb, pe, &(fvm_gemm_epilogue){.base = pw, .add = true});
                for (int64_t i = 0; i < m * n; i++) {
                    float sum = pw[i] + po[i];
                    if (memcmp(&pe[i], &sum, sizeof *pe) != 0)
                        fail_msg("implementation %d, m=%lld k=%lld n=%lld ta=%d tb=%d: with the accumulation "
                                 "epilogue, out[%lld] = %a, expected %a",
                                 isa, (long long)m, (long long)k, (long long)n, ta, tb, (long long)i, pe[i], sum);
                }
                rel(&w, &e, &want);
            }
            rel(&a, &b, &o);
        }
    mm_shape big = {.m = 1024, .n = 1024, .k = 1024}; /* 2^30 multiply-adds: BLAS's */
    assert_false(fvm_gemm_f32_fits(&big));
}

static void test_matmul(void **state)
{
    (void)state;
    const fvm_dtype types[] = {FVM_DTYPE_F32, FVM_DTYPE_F64, FVM_DTYPE_I32, FVM_DTYPE_I64, FVM_DTYPE_U32};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        fvm_dtype dt = types[t];
        if (dt == FVM_DTYPE_U32)
            continue; /* negative test values; u32 is checked by hand below */
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_matmul(dt, 5, 7, 3, ta, tb, false, false);
                check_matmul(dt, 1, 1, 1, ta, tb, false, false);
                check_matmul(dt, 33, 40, 35, ta, tb, false, false);
                check_matmul(dt, 1, 6, 5, ta, tb, true, false); /* vector @ op(b) */
                check_matmul(dt, 4, 6, 1, ta, tb, false, true); /* op(a) @ vector */
                check_matmul(dt, 1, 45, 37, ta, tb, true, false);
                check_matmul(dt, 37, 45, 1, ta, tb, false, true);
            }
        check_matmul(dt, 1, 9, 1, false, false, true, true); /* dot */
        check_matmul(dt, 1, 70, 1, false, false, true, true);
        check_matmul(dt, 3, 0, 4, false, false, false, false); /* empty sum: zeros */
        check_matmul(dt, 3, 0, 4, true, true, false, false);
    }

    fvm_diag d = {0};
    /* hand-computed: [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]] */
    fvm_tensor a = F32(D2(2, 2), 1, 2, 3, 4), b = F32(D2(2, 2), 5, 6, 7, 8), o = junk(FVM_DTYPE_F32, D2(2, 2));
    assert_int_equal(fvm_k_matmul(&a, &b, false, false, &o, &d), FVM_OK);
    EXPECT(&o, 19, 22, 43, 50);
    assert_int_equal(fvm_k_matmul(&a, &b, true, false, &o, &d), FVM_OK); /* [[1,3],[2,4]] @ b */
    EXPECT(&o, 26, 30, 38, 44);
    assert_int_equal(fvm_k_matmul(&a, &b, false, true, &o, &d), FVM_OK); /* a @ [[5,7],[6,8]] */
    EXPECT(&o, 17, 23, 39, 53);
    rel(&a, &b, &o);
    /* integers wrap */
    fvm_tensor ia = I32(D2(1, 2), 65536, 3), ib = I32(D2(2, 1), 65536, 5), io = junk(FVM_DTYPE_I32, D2(1, 1));
    assert_int_equal(fvm_k_matmul(&ia, &ib, false, false, &io, &d), FVM_OK);
    EXPECT_I(&io, 15); /* 2^32 wraps to 0 */
    rel(&ia, &ib, &io);
    fvm_tensor ua = U32(D2(2, 2), 1, 2, 3, 4), ub = U32(D1(2), 4000000000u, 1), uo = junk(FVM_DTYPE_U32, D1(2));
    assert_int_equal(fvm_k_matmul(&ua, &ub, true, false, &uo, &d), FVM_OK); /* [[1,3],[2,4]] @ [4e9,1] */
    EXPECT_I(&uo, 4000000003ll, (8000000004ll) % 4294967296ll);
    assert_int_equal(d.n, 0);
    fvm_tensor ba = BOOL(D2(1, 1), 1), bo = junk(FVM_DTYPE_BOOL, D2(1, 1));
    assert_int_equal(fvm_k_matmul(&ba, &ba, false, false, &bo, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "matmul", "bool");
    assert_int_equal(fvm_k_matmul(&ua, &ba, false, false, &bo, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "u32", "bool");
    rel(&ua, &ub, &uo);
    rel(&ba, &bo, NULL);
}

/* ---- reductions ---------------------------------------------------------- */

/* Reference pairwise sum (NumPy's pairwise_sum), as a recursion over the
 * index range [lo, hi) of v. */
static double ref_pairwise(const double *v, int64_t lo, int64_t hi)
{
    int64_t n = hi - lo;
    if (n < 8) {
        double s = v[lo];
        for (int64_t i = lo + 1; i < hi; i++)
            s += v[i];
        return s;
    }
    if (n > 128) {
        int64_t n2 = n / 2 - (n / 2) % 8;
        return ref_pairwise(v, lo, lo + n2) + ref_pairwise(v, lo + n2, hi);
    }
    double r[8];
    int64_t blocks = n / 8;
    for (int k = 0; k < 8; k++) {
        r[k] = v[lo + k];
        for (int64_t b = 1; b < blocks; b++)
            r[k] += v[lo + 8 * b + k];
    }
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (int64_t i = lo + 8 * blocks; i < hi; i++)
        s += v[i];
    return s;
}

/* Reference: the reduced elements of each kept index in index order, cut
 * into rows of the last axes (those that are reduced or of length 1; one
 * element when the last axis longer than 1 is kept), each row summed
 * pairwise and the rows added in order. */
static void check_reduce_sum(const fvm_dims *s, uint32_t mask)
{
    fvm_tensor x = junk(FVM_DTYPE_F64, *s);
    int64_t n = fvm_dims_count(s), kept = 1, row = 1;
    for (int64_t i = 0; i < n; i++)
        fvm_tensor_set_f64(&x, i, (double)((i * 7) % 11) * 0.5 - 2.0 + (i % 3 ? 1e-3 : 1e9));
    for (int k = 0; k < s->rank; k++)
        if (!((mask >> k) & 1))
            kept *= s->d[k];
    for (int k = s->rank - 1; k >= 0 && (((mask >> k) & 1) || s->d[k] == 1); k--)
        row *= s->d[k];
    fvm_tensor o = junk(FVM_DTYPE_F64, D1(kept));
    fvm_diag d = {0};
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &x, mask, &o, &d), FVM_OK);
    double want[1024];
    bool started[1024] = {false};
    assert_true(kept <= 1024);
    const double *xv = fvm_tensor_data(&x);
    for (int64_t i = 0; i < n; i += row) { /* C order visits reduced indices in order */
        int64_t rem = i, oi = 0, mul = 1;
        for (int k = s->rank - 1; k >= 0; k--) {
            int64_t ik = rem % s->d[k];
            rem /= s->d[k];
            if (!((mask >> k) & 1)) {
                oi += ik * mul;
                mul *= s->d[k];
            }
        }
        double v = ref_pairwise(xv, i, i + row);
        want[oi] = started[oi] ? want[oi] + v : v;
        started[oi] = true;
    }
    for (int64_t i = 0; i < kept; i++)
        if (fvm_tensor_get_f64(&o, i) != want[i])
            fail_msg("mask 0x%x out[%lld] = %.17g, expected %.17g", mask, (long long)i, fvm_tensor_get_f64(&o, i),
                     want[i]);
    fvm_tensor_release(&x);
    fvm_tensor_release(&o);
}

static void test_reduce(void **state)
{
    (void)state;
    fvm_diag d = {0};
    /* hand values: x = [[1,2,3],[4,5,6]] */
    fvm_tensor x = F32(D2(2, 3), 1, 2, 3, 4, 5, 6);
    fvm_tensor o3 = junk(FVM_DTYPE_F32, D1(3)), o2 = junk(FVM_DTYPE_F32, D1(2)), o0 = junk(FVM_DTYPE_F32, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &x, 1u << 0, &o3, &d), FVM_OK);
    EXPECT(&o3, 5, 7, 9);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &x, 1u << 1, &o2, &d), FVM_OK);
    EXPECT(&o2, 6, 15);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &x, 3, &o0, &d), FVM_OK);
    EXPECT(&o0, 21);
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &x, 1u << 1, &o2, &d), FVM_OK);
    EXPECT(&o2, 2, 5);
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &x, 1u << 0, &o3, &d), FVM_OK);
    EXPECT(&o3, 2.5, 3.5, 4.5);
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &x, 1u << 0, &o3, &d), FVM_OK);
    EXPECT(&o3, 4, 5, 6);
    assert_int_equal(fvm_k_reduce(FVM_RED_MIN, &x, 1u << 1, &o2, &d), FVM_OK);
    EXPECT(&o2, 1, 4);
    /* the mean divides by the count: three equal values give that value */
    fvm_tensor tenths = F32(D1(3), 0.1f, 0.1f, 0.1f), tm = junk(FVM_DTYPE_F32, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &tenths, 1, &tm, &d), FVM_OK);
    EXPECT(&tm, (double)0.1f);
    rel(&tenths, &tm, NULL);
    fvm_tensor ox = junk(FVM_DTYPE_F32, D2(2, 3));
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &x, 0, &ox, &d), FVM_OK); /* no axes: a copy */
    assert_true(fvm_tensor_identical(&x, &ox));
    rel(&x, &o3, &o2);
    rel(&o0, &ox, NULL);

    /* MAX/MIN propagate NaN, along either axis */
    fvm_tensor n = F64(D2(2, 3), 1, NAN, 3, 4, 5, -1), n3 = junk(FVM_DTYPE_F64, D1(3)), n2 = junk(FVM_DTYPE_F64, D1(2));
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &n, 1u << 1, &n2, &d), FVM_OK);
    EXPECT(&n2, NAN, 5);
    assert_int_equal(fvm_k_reduce(FVM_RED_MIN, &n, 1u << 1, &n2, &d), FVM_OK);
    EXPECT(&n2, NAN, -1);
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &n, 1u << 0, &n3, &d), FVM_OK);
    EXPECT(&n3, 4, NAN, 3);
    assert_int_equal(fvm_k_reduce(FVM_RED_MIN, &n, 1u << 0, &n3, &d), FVM_OK);
    EXPECT(&n3, 1, NAN, -1);
    fvm_tensor nf = F64(D1(3), NAN, 7, 8), n0 = junk(FVM_DTYPE_F64, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &nf, 1, &n0, &d), FVM_OK); /* NaN first */
    EXPECT(&n0, NAN);
    rel(&n, &n3, &n2);
    rel(&nf, &n0, NULL);

    /* a kept last axis: each column adds its rows in index order; a reduced
     * run of fewer than 8 elements adds them one by one from the first:
     * 2^54 + 1 - 2^54 + 1 is 1 only in that order */
    fvm_tensor ord = F64(D2(4, 2), 0x1p54, 1, 1, 0x1p54, -0x1p54, 1, 1, -0x1p54);
    fvm_tensor oc = junk(FVM_DTYPE_F64, D1(2)), oa = junk(FVM_DTYPE_F64, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &ord, 1, &oc, &d), FVM_OK);
    EXPECT(&oc, 1, 0); /* ((2^54 + 1) - 2^54) + 1 = 1; ((1 + 2^54) + 1) - 2^54 = 0 */
    rel(&ord, &oc, &oa);
    fvm_tensor row = F64(D1(4), 0x1p54, 1, -0x1p54, 1), r0 = junk(FVM_DTYPE_F64, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &row, 1, &r0, &d), FVM_OK);
    EXPECT(&r0, 1);
    rel(&row, &r0, NULL);

    /* several axis combinations against the reference loop */
    fvm_dims s = D3(2, 3, 4), s4 = dims(4, (int64_t)3, (int64_t)1, (int64_t)5, (int64_t)2);
    for (uint32_t mask = 0; mask < 8; mask++)
        check_reduce_sum(&s, mask);
    for (uint32_t mask = 0; mask < 16; mask++)
        check_reduce_sum(&s4, mask);
    fvm_dims wide = D2(3, 70), long_rows = D3(2, 1, 300), long_cols = D3(300, 1, 2);
    check_reduce_sum(&wide, 1);
    check_reduce_sum(&wide, 2);
    for (uint32_t mask = 0; mask < 8; mask++) {
        check_reduce_sum(&long_rows, mask);
        check_reduce_sum(&long_cols, mask);
    }

    /* integers: sums wrap, max/min on i32/u32 */
    fvm_tensor iw = I32(D1(3), INT32_MAX, 1, 1), io = junk(FVM_DTYPE_I32, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &iw, 1, &io, &d), FVM_OK);
    EXPECT_I(&io, INT32_MIN + 1);
    assert_int_equal(fvm_k_reduce(FVM_RED_MIN, &iw, 1, &io, &d), FVM_OK);
    EXPECT_I(&io, 1);
    fvm_tensor uw = U32(D2(2, 2), 4000000000u, 5, 300000000u, 6), uo = junk(FVM_DTYPE_U32, D1(2));
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &uw, 1, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 4300000000ll - 4294967296ll, 11);
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &uw, 2, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 4000000000ll, 300000000);
    fvm_tensor lw = I64(D2(2, 2), INT64_MAX, -5, 1, 7), lo = junk(FVM_DTYPE_I64, D1(2));
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &lw, 1, &lo, &d), FVM_OK);
    EXPECT_I(&lo, INT64_MIN, 2);
    assert_int_equal(d.n, 0);
    /* MEAN is for floats; bool is not reducible */
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &iw, 1, &io, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "mean", "i32");
    fvm_tensor bw = BOOL(D1(2), 1, 1), bo = junk(FVM_DTYPE_BOOL, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &bw, 1, &bo, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "sum", "bool");
    rel(&iw, &io, &uw);
    rel(&uo, &lw, &lo);
    rel(&bw, &bo, NULL);

    /* empty reductions: sum 0, mean NaN, max an error */
    fvm_tensor e = junk(FVM_DTYPE_F32, D2(2, 0)), e2 = junk(FVM_DTYPE_F32, D1(2));
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &e, 2, &e2, &d), FVM_OK);
    EXPECT(&e2, 0, 0);
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &e, 2, &e2, &d), FVM_OK);
    EXPECT(&e2, NAN, NAN);
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &e, 2, &e2, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "empty", NULL);
    fvm_tensor e0 = junk(FVM_DTYPE_F32, D1(0));
    assert_int_equal(fvm_k_reduce(FVM_RED_MAX, &e, 1, &e0, &d), FVM_OK); /* no outputs */
    rel(&e, &e2, &e0);
}

/* Test data that NumPy can make too: k = (i * 14569 + 12345) % 99991,
 * values (k - 49495) / 10000 (about zero: partial sums large against the
 * total) or k / 1000 (positive), as doubles, rounded to f32. */
static double numpy_data(int64_t i, bool zero_mean)
{
    int64_t k = (i * 14569 + 12345) % 99991;
    return zero_mean ? (double)(k - 49495) / 10000.0 : (double)k / 1000.0;
}

static fvm_tensor numpy_tensor(fvm_dtype dt, fvm_dims s, bool zero_mean)
{
    fvm_tensor t = junk(dt, s);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++) {
        double v = numpy_data(i, zero_mean);
        if (dt == FVM_DTYPE_F32)
            ((float *)fvm_tensor_data(&t))[i] = (float)v;
        else
            ((double *)fvm_tensor_data(&t))[i] = v;
    }
    return t;
}

/* Float sums and means have NumPy's bits. The expected values are NumPy
 * 1.24's, printed with float.hex(), for arrays made as numpy_data makes them:
 *   k = [(i * 14569 + 12345) % 99991 for i in range(n)]
 *   x = np.array([(k_i - 49495) / 10000.0 for k_i in k]).astype(np.float32)
 *   np.setbufsize(1 << 17); np.sum(x), np.mean(x), np.sum(x.reshape(4, 250), axis=1), ...
 * np.setbufsize(1 << 17) hands NumPy's pairwise_sum a whole run of up to
 * 2^17 elements, as NumPy 2.3 and later do for contiguous data by default;
 * NumPy 1.9 to 2.2 sum runs longer than 8192 elements (their default buffer)
 * in blocks of 8192 added in turn, which changes the last case below. The
 * sequential order fedvm used before (((x0 + x1) + x2) + ...) is 61 ulps
 * away from NumPy on the mean of 100 values here, 9 on that of 1000, 641 on
 * that of 10^5 and 25 on that of the positive 10^5. */
static void test_reduce_numpy(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor o0 = junk(FVM_DTYPE_F32, D0());
    static const struct {
        int64_t n;
        double sum, mean;
    } whole[] = {
        {100, 0x1.8a8c8p-1, 0x1.f905c2p-8}, /* eight running sums, 4 left over */
        {1000, 0x1.4db3ap+5, 0x1.55b5e4p-5}, /* cut in two, three levels deep */
        {100000, 0x1.38690cp+12, 0x1.997b84p-5}, /* cut in two, ten levels deep */
    };
    for (size_t c = 0; c < sizeof whole / sizeof *whole; c++) {
        fvm_tensor x = numpy_tensor(FVM_DTYPE_F32, D1(whole[c].n), true);
        assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &x, 1, &o0, &d), FVM_OK);
        EXPECT(&o0, whole[c].sum);
        assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &x, 1, &o0, &d), FVM_OK);
        EXPECT(&o0, whole[c].mean);
        fvm_tensor_release(&x);
    }

    /* every axis of a contiguous array: the flattened elements, as NumPy */
    fvm_tensor m = numpy_tensor(FVM_DTYPE_F32, D2(100, 1000), true),
               mt = numpy_tensor(FVM_DTYPE_F32, D3(1000, 1, 100), true);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &m, 3, &o0, &d), FVM_OK);
    EXPECT(&o0, 0x1.38690cp+12);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &mt, 7, &o0, &d), FVM_OK);
    EXPECT(&o0, 0x1.38690cp+12);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &mt, 5, &o0, &d), FVM_OK); /* axes 0 and 2 around a 1 */
    EXPECT(&o0, 0x1.38690cp+12);
    rel(&m, &mt, NULL);

    /* the last axis: each row pairwise (np.sum(x[:1000].reshape(4, 250), axis=1)) */
    fvm_tensor r = numpy_tensor(FVM_DTYPE_F32, D2(4, 250), true), r4 = junk(FVM_DTYPE_F32, D1(4));
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &r, 2, &r4, &d), FVM_OK);
    EXPECT(&r4, 0x1.684d04p+3, 0x1.6d2a2cp+2, 0x1.44d5d8p+3, 0x1.d3168p+3);
    /* axis 0: a running sum per column (np.sum(x[:1000].reshape(250, 4), axis=0), and np.mean) */
    fvm_tensor cl = numpy_tensor(FVM_DTYPE_F32, D2(250, 4), true);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &cl, 1, &r4, &d), FVM_OK);
    EXPECT(&r4, -0x1.0e9e3cp+3, 0x1.f98fd2p+3, 0x1.e0e28ep+4, 0x1.142f84p+2);
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &cl, 1, &r4, &d), FVM_OK);
    EXPECT(&r4, -0x1.151ceap-5, 0x1.02d8fep-4, 0x1.ec6d1cp-4, 0x1.1ad066p-6);
    rel(&r, &r4, &cl);

    /* f64 adds in f64: np.sum and np.mean of the float64 array (before the rounding to f32) */
    fvm_tensor xd = numpy_tensor(FVM_DTYPE_F64, D1(100000), true), od = junk(FVM_DTYPE_F64, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &xd, 1, &od, &d), FVM_OK);
    EXPECT(&od, 0x1.38690b0f27bb4p+12);
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &xd, 1, &od, &d), FVM_OK);
    EXPECT(&od, 0x1.997b82937edebp-5);
    rel(&xd, &od, NULL);

    /* positive values, x = np.array([k_i / 1000.0 ...]).astype(np.float32): pairwise over the whole run;
     * NumPy 1.9 to 2.2 with their default buffer give 0x1.3124f4p+22 and 0x1.8ff574p+5 (blocks of 8192) */
    fvm_tensor p = numpy_tensor(FVM_DTYPE_F32, D1(100000), false);
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &p, 1, &o0, &d), FVM_OK);
    EXPECT(&o0, 0x1.3124f8p+22);
    assert_int_equal(fvm_k_reduce(FVM_RED_MEAN, &p, 1, &o0, &d), FVM_OK);
    EXPECT(&o0, 0x1.8ff57ap+5);
    rel(&p, &o0, NULL);

    /* negative zeros stay negative through the eight running sums (NumPy 1.24 gives +0.0) */
    fvm_tensor z = junk(FVM_DTYPE_F32, D1(20));
    for (int i = 0; i < 20; i++)
        ((float *)fvm_tensor_data(&z))[i] = -0.0f;
    fvm_tensor zo = junk(FVM_DTYPE_F32, D0());
    assert_int_equal(fvm_k_reduce(FVM_RED_SUM, &z, 1, &zo, &d), FVM_OK);
    assert_true(signbit(((float *)fvm_tensor_data(&zo))[0]) && ((float *)fvm_tensor_data(&zo))[0] == 0);
    rel(&z, &zo, NULL);
    assert_int_equal(d.n, 0);
}

static void test_argmax(void **state)
{
    (void)state;
    fvm_diag d = {0};
    /* ties: the first maximum wins; NaN counts as the maximum */
    fvm_tensor x = F32(D2(3, 4), 1, 3, 3, 2, 1, NAN, 5, NAN, -1, -1, -1, -1);
    fvm_tensor o = junk(FVM_DTYPE_I64, D1(3)), o4 = junk(FVM_DTYPE_I64, D1(4));
    assert_int_equal(fvm_k_argmax(&x, 1, &o, &d), FVM_OK);
    EXPECT_I(&o, 1, 1, 0);
    assert_int_equal(fvm_k_argmax(&x, 0, &o4, &d), FVM_OK); /* columns */
    EXPECT_I(&o4, 0, 1, 1, 1);
    rel(&x, &o, &o4);
    fvm_tensor y = F64(D2(3, 2), 1, 5, 4, 5, 4, NAN), y2 = junk(FVM_DTYPE_I64, D1(2));
    assert_int_equal(fvm_k_argmax(&y, 0, &y2, &d), FVM_OK);
    EXPECT_I(&y2, 1, 2);
    fvm_tensor i = I32(D3(2, 2, 2), 7, 7, 7, 9, -1, -2, -3, -2), i2 = junk(FVM_DTYPE_I64, D2(2, 2));
    assert_int_equal(fvm_k_argmax(&i, 1, &i2, &d), FVM_OK);
    EXPECT_I(&i2, 0, 1, 0, 0);
    assert_int_equal(fvm_k_argmax(&i, 2, &i2, &d), FVM_OK);
    EXPECT_I(&i2, 0, 1, 0, 1);
    fvm_tensor u = U32(D1(3), 1, 4000000000u, 3), u0 = junk(FVM_DTYPE_I64, D0());
    assert_int_equal(fvm_k_argmax(&u, 0, &u0, &d), FVM_OK);
    EXPECT_I(&u0, 1);
    assert_int_equal(d.n, 0);
    fvm_tensor e = junk(FVM_DTYPE_F32, D2(2, 0)), e2 = junk(FVM_DTYPE_I64, D1(2));
    assert_int_equal(fvm_k_argmax(&e, 1, &e2, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "length 0", NULL);
    rel(&y, &y2, &i);
    rel(&i2, &u, &u0);
    rel(&e, &e2, NULL);
}

static void test_cumsum(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor x = F32(D2(2, 3), 1, 2, 3, 4, 5, 6), o = junk(FVM_DTYPE_F32, D2(2, 3));
    assert_int_equal(fvm_k_cumsum(&x, 1, false, &o, &d), FVM_OK);
    EXPECT(&o, 1, 3, 6, 4, 9, 15);
    assert_int_equal(fvm_k_cumsum(&x, 1, true, &o, &d), FVM_OK);
    EXPECT(&o, 6, 5, 3, 15, 11, 6);
    assert_int_equal(fvm_k_cumsum(&x, 0, false, &o, &d), FVM_OK);
    EXPECT(&o, 1, 2, 3, 5, 7, 9);
    assert_int_equal(fvm_k_cumsum(&x, 0, true, &o, &d), FVM_OK);
    EXPECT(&o, 5, 7, 9, 4, 5, 6);
    /* in place */
    assert_int_equal(fvm_k_cumsum(&x, 1, false, &x, &d), FVM_OK);
    EXPECT(&x, 1, 3, 6, 4, 9, 15);
    rel(&x, &o, NULL);
    /* f32 sums round in f32: 2^24 + 1 is 2^24 (ties to even), twice; -0.0 first is copied, and -0 + -0 is -0 */
    fvm_tensor f = F32(D1(3), 16777216.0f, 1, 1), fo = junk(FVM_DTYPE_F32, D1(3));
    assert_int_equal(fvm_k_cumsum(&f, 0, false, &fo, &d), FVM_OK);
    EXPECT(&fo, 16777216, 16777216, 16777216);
    fvm_tensor z = F64(D1(2), -0.0, -0.0), zo = junk(FVM_DTYPE_F64, D1(2));
    assert_int_equal(fvm_k_cumsum(&z, 0, true, &zo, &d), FVM_OK);
    assert_true(signbit(fvm_tensor_get_f64(&zo, 0)) && signbit(fvm_tensor_get_f64(&zo, 1)));
    rel(&f, &fo, &z);
    fvm_tensor_release(&zo);
    /* integers wrap */
    fvm_tensor i = I64(D1(2), INT64_MAX, 1), io = junk(FVM_DTYPE_I64, D1(2));
    assert_int_equal(fvm_k_cumsum(&i, 0, false, &io, &d), FVM_OK);
    EXPECT_I(&io, INT64_MAX, INT64_MIN);
    fvm_tensor u = U8(D1(3), 250, 10, 1), uo = junk(FVM_DTYPE_U8, D1(3));
    assert_int_equal(fvm_k_cumsum(&u, 0, false, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 250, 4, 5);
    assert_int_equal(fvm_k_cumsum(&u, 0, true, &uo, &d), FVM_OK);
    EXPECT_I(&uo, 5, 11, 1);
    rel(&i, &io, &u);
    fvm_tensor_release(&uo);
    fvm_tensor w = U32(D1(2), 4294967295u, 3), wo = junk(FVM_DTYPE_U32, D1(2));
    assert_int_equal(fvm_k_cumsum(&w, 0, false, &wo, &d), FVM_OK);
    EXPECT_I(&wo, 4294967295u, 2);
    rel(&w, &wo, NULL);
    /* the middle axis of [2,3,40] (rows of 40, past the 32-element blocks) against a plain loop */
    fvm_tensor m = junk(FVM_DTYPE_I32, D3(2, 3, 40)), mo = junk(FVM_DTYPE_I32, D3(2, 3, 40));
    for (int k = 0; k < 240; k++)
        fvm_tensor_set_i64(&m, k, (k * 37) % 101 - 50);
    for (int rev = 0; rev < 2; rev++) {
        assert_int_equal(fvm_k_cumsum(&m, 1, rev, &mo, &d), FVM_OK);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 40; c++) {
                    int64_t want = 0;
                    for (int j = rev ? b : 0; j <= (rev ? 2 : b); j++)
                        want += fvm_tensor_get_i64(&m, (a * 3 + j) * 40 + c);
                    assert_int_equal(fvm_tensor_get_i64(&mo, (a * 3 + b) * 40 + c), want);
                }
    }
    rel(&m, &mo, NULL);
    /* no elements; bool is not summed */
    fvm_tensor e = junk(FVM_DTYPE_F32, D2(0, 3)), eo = junk(FVM_DTYPE_F32, D2(0, 3));
    assert_int_equal(fvm_k_cumsum(&e, 1, false, &eo, &d), FVM_OK);
    assert_int_equal(d.n, 0);
    rel(&e, &eo, NULL);
    fvm_tensor b = BOOL(D1(2), 1, 1), bo = junk(FVM_DTYPE_BOOL, D1(2));
    assert_int_equal(fvm_k_cumsum(&b, 0, false, &bo, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "cumsum", "bool");
    rel(&b, &bo, NULL);
}

/* ---- data movement ------------------------------------------------------- */

/* out[i_0, .., i_r] = x[j] where j's axis perm[k] index is i_k. */
static void check_transpose(fvm_dtype dt, fvm_dims xs, const int *perm)
{
    fvm_tensor x = junk(dt, xs);
    int64_t n = fvm_dims_count(&xs);
    for (int64_t i = 0; i < n; i++)
        fvm_tensor_set_i64(&x, i, dt == FVM_DTYPE_BOOL ? (i * 7) % 3 == 0 : i);
    fvm_dims os = {.rank = xs.rank};
    for (int k = 0; k < xs.rank; k++)
        os.d[k] = xs.d[perm[k]];
    fvm_tensor o = junk(dt, os);
    fvm_diag d = {0};
    assert_int_equal(fvm_k_transpose(&x, perm, &o, &d), FVM_OK);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[FVM_MAX_RANK], rem = i, xi[FVM_MAX_RANK];
        for (int k = os.rank - 1; k >= 0; k--) {
            idx[k] = rem % os.d[k];
            rem /= os.d[k];
        }
        for (int k = 0; k < os.rank; k++)
            xi[perm[k]] = idx[k];
        int64_t j = 0;
        for (int k = 0; k < xs.rank; k++)
            j = j * xs.d[k] + xi[k];
        if (fvm_tensor_get_i64(&o, i) != fvm_tensor_get_i64(&x, j))
            fail_msg("out element %lld is %lld, expected x[%lld] = %lld", (long long)i,
                     (long long)fvm_tensor_get_i64(&o, i), (long long)j, (long long)fvm_tensor_get_i64(&x, j));
    }
    fvm_tensor_release(&x);
    fvm_tensor_release(&o);
}

static void test_transpose(void **state)
{
    (void)state;
    fvm_diag d = {0};
    /* hand: [[1,2,3],[4,5,6]]^T */
    fvm_tensor x = I32(D2(2, 3), 1, 2, 3, 4, 5, 6), o = junk(FVM_DTYPE_I32, D2(3, 2));
    assert_int_equal(fvm_k_transpose(&x, (const int[]){1, 0}, &o, &d), FVM_OK);
    EXPECT_I(&o, 1, 4, 2, 5, 3, 6);
    rel(&x, &o, NULL);
    /* 3-D, hand: x[2,2,2] = 0..7, perm (2,0,1): out[a,b,c] = x[b,c,a] */
    fvm_tensor y = F32(D3(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7), yo = junk(FVM_DTYPE_F32, D3(2, 2, 2));
    assert_int_equal(fvm_k_transpose(&y, (const int[]){2, 0, 1}, &yo, &d), FVM_OK);
    EXPECT(&yo, 0, 2, 4, 6, 1, 3, 5, 7);
    rel(&y, &yo, NULL);
    assert_int_equal(d.n, 0);

    /* every permutation of a 3-D tensor, three element sizes */
    const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int p = 0; p < 6; p++) {
        check_transpose(FVM_DTYPE_I32, D3(2, 3, 4), perms[p]);
        check_transpose(FVM_DTYPE_F64, D3(5, 1, 3), perms[p]);
        check_transpose(FVM_DTYPE_BOOL, D3(3, 4, 5), perms[p]);
        check_transpose(FVM_DTYPE_I64, D3(3, 40, 37), perms[p]); /* tiled blocks with edges */
    }
    check_transpose(FVM_DTYPE_F32, D2(70, 45), (const int[]){1, 0});
    check_transpose(FVM_DTYPE_I32, dims(4, (int64_t)2, (int64_t)3, (int64_t)4, (int64_t)5), (const int[]){3, 1, 0, 2});
    check_transpose(FVM_DTYPE_I32, D0(), NULL);
}

static void test_slice(void **state)
{
    (void)state;
    fvm_diag d = {0};
    /* x[5,6] = 0..29; x[1::2, 0::3] with 2x2 elements -> rows 1,3 cols 0,3 */
    fvm_tensor x = junk(FVM_DTYPE_F32, D2(5, 6));
    for (int i = 0; i < 30; i++)
        fvm_tensor_set_f64(&x, i, i);
    fvm_tensor o = junk(FVM_DTYPE_F32, D2(2, 2));
    assert_int_equal(fvm_k_slice(&x, (const int64_t[]){1, 0}, (const int64_t[]){2, 3}, &o, &d), FVM_OK);
    EXPECT(&o, 6, 9, 18, 21);
    /* contiguous rows: x[2:4, :] */
    fvm_tensor r = junk(FVM_DTYPE_F32, D2(2, 6));
    assert_int_equal(fvm_k_slice(&x, (const int64_t[]){2, 0}, (const int64_t[]){1, 1}, &r, &d), FVM_OK);
    EXPECT(&r, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);
    /* the last element exactly: x[4:5:7, 5:6:100] */
    fvm_tensor one = junk(FVM_DTYPE_F32, D2(1, 1));
    assert_int_equal(fvm_k_slice(&x, (const int64_t[]){4, 5}, (const int64_t[]){7, INT64_MAX}, &one, &d), FVM_OK);
    EXPECT(&one, 29);
    rel(&x, &o, &r);
    fvm_tensor_release(&one);
    /* 3-D with steps on every axis, i64 */
    fvm_tensor y = junk(FVM_DTYPE_I64, D3(4, 5, 7));
    for (int i = 0; i < 140; i++)
        fvm_tensor_set_i64(&y, i, 1000 + i);
    fvm_tensor yo = junk(FVM_DTYPE_I64, D3(2, 2, 3));
    const int64_t st[3] = {1, 0, 1}, sp[3] = {2, 3, 2};
    assert_int_equal(fvm_k_slice(&y, st, sp, &yo, &d), FVM_OK);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++) {
                int64_t want = 1000 + (st[0] + a * sp[0]) * 35 + (st[1] + b * sp[1]) * 7 + (st[2] + c * sp[2]);
                assert_int_equal(fvm_tensor_get_i64(&yo, (a * 2 + b) * 3 + c), want);
            }
    assert_int_equal(d.n, 0);
    rel(&y, &yo, NULL);
}

static void test_concat(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor a = F32(D2(1, 3), 1, 2, 3), b = F32(D2(2, 3), 4, 5, 6, 7, 8, 9), o = junk(FVM_DTYPE_F32, D2(3, 3));
    const fvm_tensor *ab[2] = {&a, &b};
    assert_int_equal(fvm_k_concat(ab, 2, 0, &o, &d), FVM_OK);
    EXPECT(&o, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    rel(&a, &b, &o);
    fvm_tensor c = I32(D2(2, 1), 1, 2), e = junk(FVM_DTYPE_I32, D2(2, 0)), f = I32(D2(2, 3), 3, 4, 5, 6, 7, 8);
    fvm_tensor co = junk(FVM_DTYPE_I32, D2(2, 4));
    const fvm_tensor *cef[3] = {&c, &e, &f};
    assert_int_equal(fvm_k_concat(cef, 3, 1, &co, &d), FVM_OK);
    EXPECT_I(&co, 1, 3, 4, 5, 2, 6, 7, 8);
    /* a single input is a copy */
    fvm_tensor fo = junk(FVM_DTYPE_I32, D2(2, 3));
    assert_int_equal(fvm_k_concat((const fvm_tensor *const[]){&f}, 1, 0, &fo, &d), FVM_OK);
    assert_true(fvm_tensor_identical(&f, &fo));
    /* 3-D on the middle axis */
    fvm_tensor p = I64(D3(2, 1, 2), 1, 2, 3, 4), q = I64(D3(2, 2, 2), 5, 6, 7, 8, 9, 10, 11, 12);
    fvm_tensor pq = junk(FVM_DTYPE_I64, D3(2, 3, 2));
    assert_int_equal(fvm_k_concat((const fvm_tensor *const[]){&p, &q}, 2, 1, &pq, &d), FVM_OK);
    EXPECT_I(&pq, 1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12);
    assert_int_equal(d.n, 0);
    fvm_tensor g = F32(D2(2, 1), 1, 2);
    assert_int_equal(fvm_k_concat((const fvm_tensor *const[]){&c, &g}, 2, 1, &co, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "f32", "i32");
    rel(&c, &e, &f);
    rel(&co, &fo, &g);
    rel(&p, &q, &pq);
}

static void test_gather(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_tensor x = junk(FVM_DTYPE_F32, D2(3, 4));
    for (int i = 0; i < 12; i++)
        fvm_tensor_set_f64(&x, i, 10 * (i / 4) + i % 4); /* x[r,c] = 10r + c */
    /* axis 0, i32 indices: rows 2, 0, 2 */
    fvm_tensor i0 = I32(D1(3), 2, 0, 2), o0 = junk(FVM_DTYPE_F32, D2(3, 4));
    assert_int_equal(fvm_k_gather(&x, &i0, 0, &o0, &d), FVM_OK);
    EXPECT(&o0, 20, 21, 22, 23, 0, 1, 2, 3, 20, 21, 22, 23);
    /* axis 1, i64 indices of shape [2,2]: out[r, a, b] = x[r, idx[a,b]] */
    fvm_tensor i1 = I64(D2(2, 2), 3, 0, 1, 1), o1 = junk(FVM_DTYPE_F32, D3(3, 2, 2));
    assert_int_equal(fvm_k_gather(&x, &i1, 1, &o1, &d), FVM_OK);
    EXPECT(&o1, 3, 0, 1, 1, 13, 10, 11, 11, 23, 20, 21, 21);
    /* scalar index: drops the axis */
    fvm_tensor is = I64(D0(), 1), os = junk(FVM_DTYPE_F32, D1(4));
    assert_int_equal(fvm_k_gather(&x, &is, 0, &os, &d), FVM_OK);
    EXPECT(&os, 10, 11, 12, 13);
    /* i64 data along the last axis of a 3-D tensor */
    fvm_tensor y = I64(D3(2, 2, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), iy = I32(D1(2), 2, 0);
    fvm_tensor oy = junk(FVM_DTYPE_I64, D3(2, 2, 2));
    assert_int_equal(fvm_k_gather(&y, &iy, 2, &oy, &d), FVM_OK);
    EXPECT_I(&oy, 2, 0, 5, 3, 8, 6, 11, 9);
    assert_int_equal(d.n, 0);
    /* out of range: named index and range, nothing written */
    fvm_tensor bad = I32(D1(2), 1, 3), ob = junk(FVM_DTYPE_F32, D2(2, 4));
    assert_int_equal(fvm_k_gather(&x, &bad, 0, &ob, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "index 3", "[0, 3)");
    assert_int_equal(((const uint32_t *)fvm_tensor_data(&ob))[0], 0xa5a5a5a5u);
    fvm_tensor neg = I64(D1(1), -1), on = junk(FVM_DTYPE_F32, D2(3, 1));
    assert_int_equal(fvm_k_gather(&x, &neg, 1, &on, &d), FVM_ERR_RUNTIME);
    expect_one_error(&d, FVM_ERR_RUNTIME, "index -1", "[0, 4)");
    fvm_tensor fi = F32(D1(1), 0), of = junk(FVM_DTYPE_F32, D2(1, 4));
    assert_int_equal(fvm_k_gather(&x, &fi, 0, &of, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "i32 or i64", "f32");
    rel(&x, &i0, &o0);
    rel(&i1, &o1, &is);
    rel(&os, &y, &iy);
    rel(&oy, &bad, &ob);
    rel(&neg, &on, &fi);
    fvm_tensor_release(&of);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_float),
        cmocka_unit_test(test_unary_special_values),
        cmocka_unit_test(test_unary_sin_cos_erf_log1p_sign),
        cmocka_unit_test(test_unary_int_and_bool),
        cmocka_unit_test(test_binary_float_ops),
        cmocka_unit_test(test_binary_int_ops),
        cmocka_unit_test(test_binary_bool_and_type_errors),
        cmocka_unit_test(test_integer_wrap),
        cmocka_unit_test(test_u8),
        cmocka_unit_test(test_integer_division_by_zero),
        cmocka_unit_test(test_floor_div_mod_float),
        cmocka_unit_test(test_floor_div_mod_int),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_fill_and_iota),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm_f32),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_reduce_numpy),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_gather),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
