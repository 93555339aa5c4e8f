/* test_privacy.c - the privacy accountant (vm/runtime/privacy.h) against published values: TensorFlow Privacy's
 * and dp_accounting's tests of their RDP accountants. (tests/dp/accountant.py checks it over a grid against
 * an independent quadrature.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../vm/runtime/privacy.h"

static void assert_rel(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("got %.12g, want %.12g (relative %.3g allowed)", got, want, rel);
}

/* tensorflow/privacy, rdp_accountant_test.py: test_compute_rdp_no_data, _no_sampling, _scalar, _sequence
 * (q = 0.01, sigma = 2.5, 50 steps; values to 1e-5 absolute); the integer orders' values also from
 * google/differential-privacy, dp_accounting/rdp/rdp_privacy_accountant_test.py,
 * test_compute_rdp_poisson_sampled_gaussian, given there to nine digits. (dp_accounting's values at the
 * fractional orders 1.5 and 2.5, 6.70579741e-04 and 1.08548710e-03, are larger: it sums the absolute values
 * of the series' terms, an upper bound, where fedvm sums them with their signs, which the quadrature of
 * tests/dp/accountant.py confirms.) */
static void test_rdp_published(void **state)
{
    (void)state;
    assert_true(fvm_privacy_rdp(0, 10, 20) == 0);
    assert_rel(fvm_privacy_rdp(1, 10, 20), 0.1, 1e-15);
    assert_true(fabs(10 * fvm_privacy_rdp(0.1, 2, 5) - 0.07737) < 0.5e-5);
    const double orders[] = {1.5, 2.5, 5, 50, 100};
    const double tfp[] = {0.00065, 0.001085, 0.00218075, 0.023846, 167.416307};
    for (int i = 0; i < 5; i++)
        assert_true(fabs(50 * fvm_privacy_rdp(0.01, 2.5, orders[i]) - tfp[i]) < 1e-5);
    assert_rel(50 * fvm_privacy_rdp(0.01, 2.5, 5), 2.18075656e-03, 5e-9);
    assert_rel(50 * fvm_privacy_rdp(0.01, 2.5, 50), 2.38460375e-02, 5e-9);
    assert_rel(50 * fvm_privacy_rdp(0.01, 2.5, 100), 1.67416308e02, 5e-9);
    assert_true(isinf(fvm_privacy_rdp(0.01, 2.5, INFINITY)));
    assert_true(isinf(fvm_privacy_rdp(0.5, 0, 2)));
    assert_true(isnan(fvm_privacy_rdp(1.5, 1, 2)));
    assert_true(isnan(fvm_privacy_rdp(0.5, 1, 1)));
}

/* dp_accounting's test_compute_epsilon_delta_pure_dp (RDP 1.1 at orders 2..32, delta 1e-5: epsilon
 * 1.32783806176 at order 32) and test_compute_epsilon_delta_gaussian (q = 1, sigma 4.530877117 is
 * (1, 1e-6)-DP over the orders 1.000, 1.001, ..., 99.999; to 7 places). */
static void test_epsilon_published(void **state)
{
    (void)state;
    double orders[31], rdp[31], order;
    for (int i = 0; i < 31; i++)
        orders[i] = 2 + i, rdp[i] = 1.1;
    assert_true(fabs(fvm_privacy_epsilon_from_rdp(orders, rdp, 31, 1e-5, &order) - 1.32783806176) < 1e-11);
    assert_true(order == 32);
    enum { N = 99000 };
    double *o = malloc(N * sizeof *o), *r = malloc(N * sizeof *r);
    assert_non_null(o);
    assert_non_null(r);
    for (int i = 0; i < N; i++) {
        o[i] = 0.001 * (1000 + i);
        r[i] = o[i] > 1 ? fvm_privacy_rdp(1, 4.530877117, o[i]) : INFINITY;
    }
    assert_true(fabs(fvm_privacy_epsilon_from_rdp(o, r, N, 1e-6, NULL) - 1) < 0.5e-7);
    free(o);
    free(r);
}

/* The default orders, composition over rounds, and what is not a mechanism. */
static void test_epsilon_rounds(void **state)
{
    (void)state;
    const double *o = fvm_privacy_orders();
    assert_true(o[0] == 1.1 && o[98] == 1 + 99 / 10.0 && o[99] == 12 && o[150] == 63 && o[153] == 512);
    double e1, e100, e0, order;
    assert_int_equal(fvm_privacy_epsilon(0.01, 1.1, 1, 1e-5, &e1, NULL, NULL), FVM_OK);
    assert_int_equal(fvm_privacy_epsilon(0.01, 1.1, 100, 1e-5, &e100, &order, NULL), FVM_OK);
    assert_true(e1 > 0 && e100 > e1 && order > 1);
    /* by hand at the order found: 100 rounds' RDP is 100 times one round's */
    double r = 100 * fvm_privacy_rdp(0.01, 1.1, order);
    assert_rel(e100, r + log1p(-1 / order) - log(1e-5 * order) / (order - 1), 1e-14);
    assert_int_equal(fvm_privacy_epsilon(0.01, 1.1, 0, 1e-5, &e0, NULL, NULL), FVM_OK);
    assert_true(e0 == 0);
    assert_int_equal(fvm_privacy_epsilon(0.01, 0, 10, 1e-5, &e0, NULL, NULL), FVM_OK);
    assert_true(isinf(e0));
    fvm_diag d = {0};
    assert_int_equal(fvm_privacy_epsilon(1.5, 1, 1, 1e-5, &e0, NULL, &d), FVM_ERR_USAGE);
    assert_int_equal(fvm_privacy_epsilon(0.5, -1, 1, 1e-5, &e0, NULL, &d), FVM_ERR_USAGE);
    assert_int_equal(fvm_privacy_epsilon(0.5, 1, -1, 1e-5, &e0, NULL, &d), FVM_ERR_USAGE);
    assert_int_equal(fvm_privacy_epsilon(0.5, 1, 1, 0, &e0, NULL, &d), FVM_ERR_USAGE);
    assert_int_equal(fvm_privacy_epsilon(0.5, NAN, 1, 1e-5, &e0, NULL, &d), FVM_ERR_USAGE);
    assert_int_equal(d.n, 5);
    fvm_diag_clear(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rdp_published),
        cmocka_unit_test(test_epsilon_published),
        cmocka_unit_test(test_epsilon_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
