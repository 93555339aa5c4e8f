/* test_tensors.h - what the tensor and kernel tests share: shapes written inline, junk-filled outputs, exact element checks, a kernel's one error.
 * Include it after <cmocka.h>. */
#ifndef FVM_TEST_TENSORS_H
#define FVM_TEST_TENSORS_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "../vm/ir/tensor.h"

/* The shape of rank dimensions, each an int64_t argument; D0() to D4()
 * take any integers. */
static inline fvm_dims dims(int rank, ...)
{
    fvm_dims s = {.rank = rank};
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.d[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}
#define D0() dims(0)
#define D1(a) dims(1, (int64_t)(a))
#define D2(a, b) dims(2, (int64_t)(a), (int64_t)(b))
#define D3(a, b, c) dims(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))
#define D4(a, b, c, e) dims(4, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(e))

/* An output tensor filled with a junk pattern (bytes 0xa5), so unwritten
 * elements show. */
static inline fvm_tensor junk(fvm_dtype t, fvm_dims s)
{
    fvm_tensor x;
    assert_int_equal(fvm_tensor_alloc(&x, t, &s, NULL), FVM_OK);
    if (x.buf)
        memset(fvm_tensor_data(&x), 0xa5, fvm_tensor_bytes(&x));
    return x;
}

/* t has n elements, each equal to want's exactly (as doubles; NaN matches
 * NaN); a failure names the test's line. EXPECT(t, values...) passes them
 * and the line. */
static inline void expect_vals(const fvm_tensor *t, const double *want, size_t n, int line)
{
    if (fvm_tensor_count(t) != (int64_t)n)
        fail_msg("line %d: %lld elements, expected %zu", line, (long long)fvm_tensor_count(t), n);
    for (size_t i = 0; i < n; i++) {
        double got = fvm_tensor_get_f64(t, (int64_t)i);
        if (!((isnan(got) && isnan(want[i])) || got == want[i]))
            fail_msg("line %d: element %zu is %.17g, expected %.17g", line, i, got, want[i]);
    }
}
#define EXPECT(t, ...) \
    expect_vals(t, (const double[]){__VA_ARGS__}, sizeof((const double[]){__VA_ARGS__}) / sizeof(double), __LINE__)

/* The diag holds exactly one error of this code whose message contains
 * each fragment that is not NULL; the diag is cleared afterwards. */
static inline void expect_one_error(fvm_diag *d, fvm_status code, const char *frag1, const char *frag2)
{
    assert_int_equal(d->n, 1);
    assert_int_equal(d->errs[0].code, code);
    if (frag1 && !strstr(d->errs[0].msg, frag1))
        fail_msg("message '%s' lacks '%s'", d->errs[0].msg, frag1);
    if (frag2 && !strstr(d->errs[0].msg, frag2))
        fail_msg("message '%s' lacks '%s'", d->errs[0].msg, frag2);
    fvm_diag_clear(d);
}

#endif
