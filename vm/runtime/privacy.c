/* privacy.c - the privacy accountant of privacy.h: RDP of the Poisson-subsampled Gaussian mechanism and its (epsilon, delta). */
#include "privacy.h"

#include <math.h>

/* log(e^a + e^b), exact for infinite arguments. */
static double log_add(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    double hi = a > b ? a : b, lo = a > b ? b : a;
    return hi + log1p(exp(lo - hi));
}

/* log(erfc(x)): erfc itself while it is far from underflow, else its
 * asymptotic series (Abramowitz & Stegun 7.1.23) to the x^-10 term, whose
 * relative error at x >= 20 is below 1e-13. */
static double log_erfc(double x)
{
    if (x < 20.0)
        return log(erfc(x));
    double r = 1.0 / (x * x);
    double s = 1.0 - r / 2 * (1.0 - 3.0 * r / 2 * (1.0 - 5.0 * r / 2 * (1.0 - 7.0 * r / 2 * (1.0 - 9.0 * r / 2))));
    return -x * x - log(x) - 0.5 * log(M_PI) + log(s);
}

/* log(A_alpha) for an integer alpha >= 2 and 0 < q < 1: the binomial sum,
 * each term in log space, the binomial coefficient by its recurrence. */
static double log_a_int(double q, double z, double alpha)
{
    int64_t n = (int64_t)alpha;
    double lq = log(q), l1q = log1p(-q), two_z2 = 2.0 * z * z;
    double log_coef = 0.0; /* log binom(n, k) */
    double sum = -INFINITY;
    for (int64_t k = 0; k <= n; k++) {
        double kk = (double)k;
        double t = log_coef + kk * lq + (double)(n - k) * l1q + (kk * kk - kk) / two_z2;
        sum = log_add(sum, t);
        log_coef += log((double)(n - k)) - log((double)(k + 1));
    }
    return sum;
}

/* log(A_alpha) for a fractional alpha > 1 and 0 < q < 1: Mironov, Talwar &
 * Zhang's series of the two halves of the integral, split at z0. Positive and
 * negative terms are summed apart (binom(alpha, i) changes sign past alpha)
 * and subtracted once at the end. Stops when both of a step's terms are below
 * e^-40 (A_alpha >= 1, so that is far below a double's precision of it), or
 * after a bound on the steps that no order of the default set reaches. */
static double log_a_frac(double q, double z, double alpha)
{
    double lq = log(q), l1q = log1p(-q), two_z2 = 2.0 * z * z, sq2z = sqrt(2.0) * z;
    double z0 = z * z * log(1.0 / q - 1.0) + 0.5;
    double pos = -INFINITY, neg = -INFINITY;
    double log_coef = 0.0; /* log |binom(alpha, i)| */
    int sign = 1;
    for (int64_t i = 0; i < 1000000; i++) {
        double ii = (double)i, j = alpha - ii;
        double t0 = log_coef + ii * lq + j * l1q;
        double t1 = log_coef + j * lq + ii * l1q;
        double e0 = log(0.5) + log_erfc((ii - z0) / sq2z);
        double e1 = log(0.5) + log_erfc((z0 - j) / sq2z);
        double s0 = t0 + (ii * ii - ii) / two_z2 + e0;
        double s1 = t1 + (j * j - j) / two_z2 + e1;
        double s = log_add(s0, s1);
        if (sign > 0)
            pos = log_add(pos, s);
        else
            neg = log_add(neg, s);
        if (s0 < -40.0 && s1 < -40.0)
            break;
        /* binom(alpha, i + 1) = binom(alpha, i) (alpha - i) / (i + 1) */
        double f = alpha - ii;
        if (f < 0)
            sign = -sign;
        log_coef += log(fabs(f)) - log(ii + 1.0);
    }
    if (neg == -INFINITY)
        return pos;
    return pos + log1p(-exp(neg - pos));
}

double fvm_privacy_rdp(double q, double z, double alpha)
{
    if (!(q >= 0 && q <= 1) || !(z >= 0) || !(alpha > 1))
        return NAN;
    if (q == 0)
        return 0.0;
    if (z == 0 || isinf(alpha))
        return INFINITY;
    if (isinf(z))
        return 0.0;
    if (q == 1)
        return alpha / (2.0 * z * z);
    double log_a = alpha == floor(alpha) ? log_a_int(q, z, alpha) : log_a_frac(q, z, alpha);
    return log_a / (alpha - 1.0);
}

double fvm_privacy_epsilon_from_rdp(const double *orders, const double *rdp, size_t n, double delta, double *order)
{
    if (order)
        *order = 0;
    if (!(delta > 0 && delta < 1))
        return NAN;
    double best = INFINITY;
    for (size_t i = 0; i < n; i++) {
        double a = orders[i], r = rdp[i];
        if (!(r >= 0))
            return NAN;
        double eps;
        if (delta * delta + expm1(-r) >= 0)
            eps = 0.0; /* the KL bound: delta <= sqrt(1 - e^-KL) */
        else if (a > 1.01 && isfinite(r))
            eps = r + log1p(-1.0 / a) - log(delta * a) / (a - 1.0);
        else
            eps = INFINITY;
        if (eps < best) {
            best = eps;
            if (order)
                *order = a;
        }
    }
    return best < 0 ? 0.0 : best;
}

/* The default orders, each 1 + x / 10 computed as TensorFlow Privacy does
 * (so 10.1 is 1 + 9.1, not the literal). */
#define O1(x) 1.0 + (x) / 10.0
#define O10(x) O1(x), O1(x + 1), O1(x + 2), O1(x + 3), O1(x + 4), O1(x + 5), O1(x + 6), O1(x + 7), O1(x + 8), O1(x + 9)
static const double orders_default[FVM_PRIVACY_NORDERS] = {
    O10(1), O10(11), O10(21), O10(31), O10(41), O10(51), O10(61), O10(71), O10(81), /* 1.1 .. 10.0 */
    O1(91), O1(92),  O1(93),  O1(94),  O1(95),  O1(96),  O1(97),  O1(98),  O1(99), /* 10.1 .. 10.9 */
    12,     13,      14,      15,      16,      17,      18,      19,      20,      21, 22,  23,  24, 25,
    26,     27,      28,      29,      30,      31,      32,      33,      34,      35, 36,  37,  38, 39,
    40,     41,      42,      43,      44,      45,      46,      47,      48,      49, 50,  51,  52, 53,
    54,     55,      56,      57,      58,      59,      60,      61,      62,      63, 128, 256, 512};

const double *fvm_privacy_orders(void)
{
    return orders_default;
}

fvm_status fvm_privacy_epsilon(double q, double z, int64_t rounds, double delta, double *out_epsilon, double *order,
                               fvm_diag *d)
{
    if (!(q >= 0 && q <= 1))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "privacy: the sampling probability q is %g, not in [0, 1]", q);
    if (!(z >= 0) || isinf(z))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "privacy: the noise multiplier is %g, not a number >= 0", z);
    if (rounds < 0)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "privacy: the number of rounds is %lld, not >= 0",
                            (long long)rounds);
    if (!(delta > 0 && delta < 1))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "privacy: delta is %g, not in (0, 1)", delta);
    double rdp[FVM_PRIVACY_NORDERS];
    for (int i = 0; i < FVM_PRIVACY_NORDERS; i++) {
        double r = fvm_privacy_rdp(q, z, orders_default[i]);
        rdp[i] = rounds == 0 || r == 0 ? 0.0 : r * (double)rounds;
    }
    *out_epsilon = fvm_privacy_epsilon_from_rdp(orders_default, rdp, FVM_PRIVACY_NORDERS, delta, order);
    return FVM_OK;
}
