/* privacy.h - a privacy accountant: Renyi DP of the Poisson-subsampled Gaussian mechanism, composed over rounds, as (epsilon, delta).
 *
 * The mechanism of DP-FedAvg and DP-SGD: each round every client (example)
 * takes part independently with probability q, the sum of the participants'
 * clipped contributions (L2 norm at most C) gets Gaussian noise of standard
 * deviation z * C, where z is the noise multiplier. Its Renyi DP at order
 * alpha > 1 is log(A_alpha) / (alpha - 1) (Mironov, Talwar & Zhang 2019,
 * "Renyi Differential Privacy of the Sampled Gaussian Mechanism", section 3.3):
 *
 *   integer alpha:    A_alpha = sum_{k=0}^{alpha} binom(alpha, k) (1-q)^(alpha-k) q^k
 *                               exp((k^2 - k) / (2 z^2))
 *   fractional alpha: the two-sided series of their section 3.3 (split at
 *                     z0 = z^2 log(1/q - 1) + 1/2, erfc weights), summed
 *                     until both of a step's terms are below e^-30 (as
 *                     TensorFlow Privacy stops);
 *
 * every sum is taken in log space. q = 0 gives 0, q = 1 the plain Gaussian
 * alpha / (2 z^2), z = 0 infinity. RDP composes by addition: T rounds give
 * T times one round's.
 *
 * The conversion to (epsilon, delta) is the one TensorFlow Privacy and
 * dp_accounting use (Canonne, Kamath & Steinke 2020, Proposition 12 of
 * arXiv:2004.00010 v4; Balle et al. 2020, "Hypothesis testing interpretations
 * and Renyi differential privacy", Theorem 21):
 *
 *   epsilon(alpha) = rdp + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1)
 *
 * minimised over the orders, except that an order whose rdp r has
 * delta^2 + expm1(-r) >= 0 gives epsilon 0 (the KL bound delta <= sqrt(1 - e^-KL))
 * and orders at or below 1.01 give infinity (the bound is not numerically
 * stable there); a negative result is reported as 0.
 *
 * The orders are TensorFlow Privacy's classic set: 1.1, 1.2, ..., 10.9, then
 * 12, 13, ..., 63, then 128, 256, 512 (154 orders).
 *
 * fedvm samples a fixed number of clients per round without replacement; the
 * figures a session reports for it are this Poisson-subsampling bound with
 * q = clients per round / clients, as TFF's DP-FedAvg tutorials report
 * (format/SPEC.md "Differential privacy"). Pure functions of their
 * arguments; nothing allocates; thread-safe. */
#ifndef FVM_PRIVACY_H
#define FVM_PRIVACY_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* The number of orders of the default set, and the set itself (static). */
#define FVM_PRIVACY_NORDERS 154
FVM_API const double *fvm_privacy_orders(void);

/* One round's RDP at order alpha (> 1) of the Poisson-subsampled Gaussian
 * mechanism with sampling probability q (in [0, 1]) and noise multiplier z
 * (>= 0): 0 for q = 0, +infinity for z = 0 (q > 0); NaN for arguments out
 * of range. */
FVM_API double fvm_privacy_rdp(double q, double z, double alpha);

/* epsilon for delta (in (0, 1)) of a mechanism whose RDP at orders[i] is
 * rdp[i] (i < n), by the conversion above; *order (may be NULL) gets the
 * order that gave it (0 when none is finite). +infinity when no order gives
 * a finite bound; NaN for a delta out of range or a negative or NaN rdp. */
FVM_API double fvm_privacy_epsilon_from_rdp(const double *orders, const double *rdp, size_t n, double delta,
                                            double *order);

/* epsilon after 'rounds' rounds (>= 0) of the mechanism (q, z), for delta,
 * over the default orders; *order (may be NULL) as above. FVM_ERR_USAGE,
 * with a message in d naming the argument, for q outside [0, 1], z < 0 or
 * not finite, negative rounds, delta outside (0, 1), or a NaN among them. */
FVM_API fvm_status fvm_privacy_epsilon(double q, double z, int64_t rounds, double delta, double *out_epsilon,
                                       double *order, fvm_diag *d);

#endif
