/* test_f32math.c - exp, sigmoid and tanh of vm/kernels/f32math.h: error bounds, special values, the same bits in every vector width, and as the sigmoid and tanh ops of f32.
 *
 * build/tests/test_f32math checks the error bounds on every 257th f32 bit
 * pattern (about 17 million inputs, a few seconds); with --exhaustive
 * (make check-f32math-exhaustive, a few minutes) on all 2^32, printing the
 * largest error of each function and where it occurs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../vm/kernels/f32math.h"
#include "../vm/kernels/provider.h"

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t to_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The references, in double. */
static double ref_exp(double x)
{
    return exp(x);
}
static double ref_sigmoid(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
static double ref_tanh(double x)
{
    return tanh(x);
}

/* |y - r| in units of the last place of f32 at r (2^-149 below FLT_MIN); 0
 * when both are the same infinity or y is inf where r rounds to it; inf
 * for a NaN where r is a number, or the reverse. */
static double ulp_error(float y, double r)
{
    if (isnan(r) || isnan(y))
        return isnan(r) && isnan(y) ? 0 : INFINITY;
    if (isinf((float)r) || isinf(y))
        return (float)r == y ? 0 : INFINITY;
    double a = fabs(r);
    int e;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1): f32's ulp is 2^(e-24) */
    double ulp = ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
    return fabs((double)y - r) / ulp;
}

typedef struct {
    const char *name;
    float (*f)(float);
    double (*ref)(double);
    double bound;
    double max;
    uint32_t worst;
} fn_case;

static float f_exp(float x)
{
    return fvm_expf(x);
}
static float f_sigmoid(float x)
{
    return fvm_sigmoidf(x);
}
static float f_tanh(float x)
{
    return fvm_tanhf(x);
}

static void init_cases(fn_case c[3])
{
    fn_case init[3] = {{"fvm_expf", f_exp, ref_exp, FVM_EXPF_MAX_ULP, 0, 0},
                       {"fvm_sigmoidf", f_sigmoid, ref_sigmoid, FVM_SIGMOIDF_MAX_ULP, 0, 0},
                       {"fvm_tanhf", f_tanh, ref_tanh, FVM_TANHF_MAX_ULP, 0, 0}};
    memcpy(c, init, sizeof init);
}

/* Every stride-th bit pattern from 0 (stride 1: all 2^32), the largest error of each function. */
static void sweep(fn_case c[3], uint64_t stride)
{
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += stride) {
        float x = from_bits((uint32_t)u);
        for (int k = 0; k < 3; k++) {
            double err = ulp_error(c[k].f(x), c[k].ref((double)x));
            if (err > c[k].max) {
                c[k].max = err;
                c[k].worst = (uint32_t)u;
            }
        }
    }
}

static void report(const fn_case c[3])
{
    for (int k = 0; k < 3; k++)
        print_message("%s: max %.3f ULP at %a (bound %.1f)\n", c[k].name, c[k].max, (double)from_bits(c[k].worst),
                      c[k].bound);
}

static void test_error_bounds_strided(void **state)
{
    (void)state;
    fn_case c[3];
    init_cases(c);
    sweep(c, 257);
    /* and densely where the algorithms switch or the results leave the normal range */
    const float around[] = {0.625f, -0.625f, 88.72f, -87.33f, -103.97f, 16.6f, 9.1f, 0.0f};
    for (size_t i = 0; i < sizeof around / sizeof *around; i++) {
        uint32_t b = to_bits(around[i]);
        for (uint32_t d = 0; d < 200000; d++) {
            float x = from_bits(b - 100000 + d);
            for (int k = 0; k < 3; k++) {
                double err = ulp_error(c[k].f(x), c[k].ref((double)x));
                if (err > c[k].max) {
                    c[k].max = err;
                    c[k].worst = to_bits(x);
                }
            }
        }
    }
    report(c);
    for (int k = 0; k < 3; k++)
        assert_true(c[k].max <= c[k].bound);
    /* the sweep sees real errors: an exact function would score 0.5 at most */
    assert_true(c[0].max > 0.5);
}

/* ulp_error itself, on values whose error is known. */
static void test_ulp_error(void **state)
{
    (void)state;
    assert_true(ulp_error(1.0f, 1.0) == 0);
    assert_true(fabs(ulp_error(nextafterf(1.0f, 2.0f), 1.0) - 1.0) < 1e-12);
    assert_true(fabs(ulp_error(1.0f, 1.0 + ldexp(1.0, -24)) - 0.5) < 1e-12);
    assert_true(fabs(ulp_error(from_bits(3), ldexp(1.0, -149)) - 2.0) < 1e-12); /* subnormals: 2^-149 */
    assert_true(ulp_error(INFINITY, 1e39) == 0);
    assert_true(isinf(ulp_error(INFINITY, 1e38)));
    assert_true(isinf(ulp_error(NAN, 1.0)));
}

static void test_special_values(void **state)
{
    (void)state;
    float inf = INFINITY, nan = NAN;
    assert_true(fvm_expf(inf) == inf);
    assert_true(fvm_expf(-inf) == 0 && !signbit(fvm_expf(-inf)));
    assert_true(isnan(fvm_expf(nan)) && isnan(fvm_expf(-nan)));
    assert_true(fvm_expf(0.0f) == 1.0f && fvm_expf(-0.0f) == 1.0f);
    assert_true(fvm_expf(88.7f) < inf && fvm_expf(88.73f) == inf && fvm_expf(1e30f) == inf);
    assert_true(fvm_expf(-104.0f) == 0 && fvm_expf(-1e30f) == 0);
    assert_true(fvm_expf(-103.0f) > 0 && fvm_expf(-103.0f) < 0x1p-126f); /* subnormal, not flushed */
    assert_true(fvm_expf(from_bits(1)) == 1.0f && fvm_expf(-from_bits(1)) == 1.0f);

    assert_true(fvm_sigmoidf(inf) == 1.0f && fvm_sigmoidf(-inf) == 0.0f);
    assert_true(isnan(fvm_sigmoidf(nan)));
    assert_true(fvm_sigmoidf(0.0f) == 0.5f && fvm_sigmoidf(-0.0f) == 0.5f);
    assert_true(fvm_sigmoidf(17.0f) == 1.0f && fvm_sigmoidf(16.0f) < 1.0f);
    assert_true(fvm_sigmoidf(-100.0f) > 0 && fvm_sigmoidf(-100.0f) < 0x1p-126f);
    assert_true(fvm_sigmoidf(-1e30f) == 0 && fvm_sigmoidf(1e30f) == 1);

    assert_true(fvm_tanhf(inf) == 1.0f && fvm_tanhf(-inf) == -1.0f);
    assert_true(isnan(fvm_tanhf(nan)));
    assert_true(fvm_tanhf(0.0f) == 0 && !signbit(fvm_tanhf(0.0f)));
    assert_true(fvm_tanhf(-0.0f) == 0 && signbit(fvm_tanhf(-0.0f)));
    assert_true(fvm_tanhf(from_bits(1)) == from_bits(1) && fvm_tanhf(-from_bits(5)) == -from_bits(5));
    assert_true(fvm_tanhf(0x1p-13f) == 0x1p-13f);
    assert_true(fvm_tanhf(10.0f) == 1.0f && fvm_tanhf(-10.0f) == -1.0f && fvm_tanhf(-3e38f) == -1.0f);
    for (float x = -20; x <= 20; x += 0.25f) /* odd */
        assert_true(to_bits(fvm_tanhf(-x)) == (to_bits(fvm_tanhf(x)) ^ 0x80000000u));
}

/* The algorithms of f32math.h written again plainly: branches instead of
 * selects, rintf for the rounding and ldexpf for the scaling (one rounding,
 * as the two exact products are). The branch-free code must give exactly these bits. */
static float plain_expf(float x)
{
    if (isnan(x))
        return x;
    if (x > 89.0f)
        x = 89.0f;
    if (x < -104.0f)
        x = -104.0f;
    float n = rintf(x * 0x1.715476p+0f);
    float r = x - n * 0x1.62e4p-1f;
    r = r - n * 0x1.7f7d1cp-20f;
    float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
               1.6666665459e-1f) *
                  r +
              5.0000001201e-1f;
    return ldexpf((p * (r * r) + r) + 1.0f, (int)n);
}
static float plain_sigmoidf(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + plain_expf(-x));
    float e = plain_expf(x);
    return e / (1.0f + e);
}
static float plain_tanhf(float x)
{
    float a = fabsf(x), t;
    if (a < 0.625f) {
        float z = a * a;
        float q = (((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
                  3.33332819422e-1f;
        t = q * z * a + a;
    } else {
        float e = plain_expf(-2.0f * a);
        t = (1.0f - e) / (1.0f + e);
    }
    return copysignf(t, x);
}

static void test_matches_plain_algorithm(void **state)
{
    (void)state;
    size_t bad = 0;
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 4093) {
        float x = from_bits((uint32_t)u);
        float y[3] = {fvm_expf(x), fvm_sigmoidf(x), fvm_tanhf(x)},
              z[3] = {plain_expf(x), plain_sigmoidf(x), plain_tanhf(x)};
        for (int k = 0; k < 3; k++)
            if (!(isnan(y[k]) && isnan(z[k])) && to_bits(y[k]) != to_bits(z[k]) && bad++ < 5)
                print_error("function %d at %a: %a, the plain algorithm %a\n", k, (double)x, (double)y[k],
                            (double)z[k]);
    }
    assert_int_equal(bad, 0);
}

/* The three functions over an array, vectorised for each instruction set
 * that the kernels' clones use (KERNEL_CLONES: avx512f, avx2, the baseline),
 * and once with vectorisation off: every copy must give the same bits. */
#define APPLY(NAME, ATTR) \
    ATTR static void NAME(const float *x, float *y, int n) \
    { \
        for (int i = 0; i < n; i++) { \
            y[3 * i] = fvm_expf(x[i]); \
            y[3 * i + 1] = fvm_sigmoidf(x[i]); \
            y[3 * i + 2] = fvm_tanhf(x[i]); \
        } \
    }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_X86_CLONES 1
APPLY(apply_avx512, __attribute__((target("avx512f"))))
APPLY(apply_avx2, __attribute__((target("avx2"))))
APPLY(apply_scalar, __attribute__((optimize("no-tree-vectorize"))))
#endif
APPLY(apply_default, )

static void test_same_bits_every_width(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *ref = malloc(3 * N * sizeof *ref), *y = malloc(3 * N * sizeof *y);
    assert_non_null(x);
    assert_non_null(ref);
    assert_non_null(y);
    int widths = 0;
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += (uint64_t)N * 1021) {
        for (int i = 0; i < N; i++) /* a stride through every range, NaN and inf included */
            x[i] = from_bits((uint32_t)(base + (uint64_t)i * 1021));
        for (int i = 0; i < N; i++) { /* one element at a time: the scalar code */
            ref[3 * i] = plain_expf(x[i]);
            ref[3 * i + 1] = plain_sigmoidf(x[i]);
            ref[3 * i + 2] = plain_tanhf(x[i]);
        }
        void (*fns[4])(const float *, float *, int) = {apply_default, NULL, NULL, NULL};
#ifdef HAVE_X86_CLONES
        fns[1] = apply_scalar;
        if (__builtin_cpu_supports("avx2"))
            fns[2] = apply_avx2;
        if (__builtin_cpu_supports("avx512f"))
            fns[3] = apply_avx512;
#endif
        widths = 0;
        for (int f = 0; f < 4; f++) {
            if (!fns[f])
                continue;
            widths++;
            fns[f](x, y, N);
            for (int i = 0; i < 3 * N; i++)
                if (!(isnan(y[i]) && isnan(ref[i])))
                    assert_int_equal(to_bits(y[i]), to_bits(ref[i]));
        }
    }
    print_message("the same bits in %d compiled copies\n", widths);
    free(x);
    free(ref);
    free(y);
}

/* The sigmoid and tanh ops of f32 are these functions: each provider's
 * kernel (the cpu one's vectorised clones, the portable one's plain loop)
 * gives the plain algorithm's bits on a stride through every f32 input. */
static void test_ops_are_these(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    const char *names[] = {"cpu", "portable"};
    const fvm_unary ops[] = {FVM_UN_SIGMOID, FVM_UN_TANH};
    fvm_dims shape = {.rank = 1, .d = {N}};
    fvm_tensor x = {0}, y = {0};
    assert_int_equal(fvm_tensor_alloc(&x, FVM_DTYPE_F32, &shape, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&y, FVM_DTYPE_F32, &shape, NULL), FVM_OK);
    float *xs = fvm_tensor_data(&x), *ys = fvm_tensor_data(&y);
    int64_t checked = 0;
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += (uint64_t)N * 4099) {
        for (int i = 0; i < N; i++)
            xs[i] = from_bits((uint32_t)(base + (uint64_t)i * 4099));
        for (int p = 0; p < 2; p++) {
            const fvm_kernels *k = fvm_kernels_lookup(names[p]);
            assert_non_null(k);
            for (int o = 0; o < 2; o++) {
                assert_int_equal(k->unary(ops[o], &x, &y, NULL), FVM_OK);
                for (int i = 0; i < N; i++) {
                    float want = o == 0 ? plain_sigmoidf(xs[i]) : plain_tanhf(xs[i]);
                    if (!(isnan(ys[i]) && isnan(want)))
                        assert_int_equal(to_bits(ys[i]), to_bits(want));
                }
                checked += N;
            }
        }
    }
    print_message("the sigmoid and tanh ops of f32: %lld values, the same bits as f32math.h's\n", (long long)checked);
    fvm_tensor_release(&x);
    fvm_tensor_release(&y);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--exhaustive") == 0) {
        fn_case c[3];
        init_cases(c);
        sweep(c, 1);
        report(c);
        int fail = 0;
        for (int k = 0; k < 3; k++)
            if (!(c[k].max <= c[k].bound)) {
                fprintf(stderr, "%s: error %.3f ULP above its bound %.1f\n", c[k].name, c[k].max, c[k].bound);
                fail = 1;
            }
        return fail;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ulp_error),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_matches_plain_algorithm),
        cmocka_unit_test(test_same_bits_every_width),
        cmocka_unit_test(test_ops_are_these),
        cmocka_unit_test(test_error_bounds_strided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
