/* test_sample.c - client sampling and round/client keys: values from the plain-Python reference
 * (tests/golden/ref_random.py), and the properties every sample must have. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../vm/runtime/sample.h"

static void expect_sample(uint64_t seed, int64_t round, int64_t n, int64_t k, const int64_t *want)
{
    int64_t got[16];
    assert_int_equal(fvm_sample_clients(seed, round, n, k, got, NULL), FVM_OK);
    for (int64_t i = 0; i < k; i++)
        assert_int_equal(got[i], want[i]);
}

static void test_reference_values(void **state)
{
    (void)state;
    /* python3 tests/golden/ref_random.py */
    expect_sample(0, 1, 100, 10, (const int64_t[]){37, 43, 49, 60, 66, 70, 75, 77, 88, 89});
    expect_sample(7, 3, 1000000, 5, (const int64_t[]){21491, 233207, 471268, 592142, 593526});
    expect_sample((uint64_t)-1, 2, 5, 5, (const int64_t[]){0, 1, 2, 3, 4});
    uint32_t k[2];
    fvm_client_key(0, 1, 42, k);
    assert_int_equal(k[0], 0xd0b0bfa4u);
    assert_int_equal(k[1], 0xb4e12cbau);
}

static void test_properties(void **state)
{
    (void)state;
    /* Distinct, increasing, in range; the same round gives the same sample;
     * another round or seed another one. */
    int64_t a[64], b[64];
    for (int64_t r = 1; r <= 50; r++) {
        assert_int_equal(fvm_sample_clients(11, r, 1000, 64, a, NULL), FVM_OK);
        assert_int_equal(fvm_sample_clients(11, r, 1000, 64, b, NULL), FVM_OK);
        for (int i = 0; i < 64; i++) {
            assert_true(a[i] >= 0 && a[i] < 1000);
            assert_int_equal(a[i], b[i]);
            if (i)
                assert_true(a[i] > a[i - 1]);
        }
        assert_int_equal(fvm_sample_clients(11, r + 1000, 1000, 64, b, NULL), FVM_OK);
        int same = 0;
        for (int i = 0; i < 64; i++)
            same += a[i] == b[i];
        assert_true(same < 64);
    }
    assert_int_equal(fvm_sample_clients(0, 1, 0, 0, a, NULL), FVM_OK);
    assert_int_equal(fvm_sample_clients(0, 1, 3, 4, a, NULL), FVM_ERR_USAGE);
}

static void test_uniform(void **state)
{
    (void)state;
    /* Each of 20 clients is picked with probability 5/20 per round: over
     * 4000 rounds the counts (expected 1000 each) pass a chi-square test
     * with 19 degrees of freedom at the 0.001 level (43.82). */
    enum { N = 20, K = 5, ROUNDS = 4000 };
    double count[N] = {0};
    int64_t s[K];
    for (int64_t r = 1; r <= ROUNDS; r++) {
        assert_int_equal(fvm_sample_clients(5, r, N, K, s, NULL), FVM_OK);
        for (int i = 0; i < K; i++)
            count[s[i]]++;
    }
    double e = (double)ROUNDS * K / N, chi2 = 0;
    for (int i = 0; i < N; i++)
        chi2 += (count[i] - e) * (count[i] - e) / e;
    assert_true(chi2 < 43.82);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_values),
        cmocka_unit_test(test_properties),
        cmocka_unit_test(test_uniform),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
