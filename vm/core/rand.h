/* rand.h - random variates for data generation over a Threefry word stream: uniforms, normals, gamma, Dirichlet, permutations.
 *
 * A stream is a key and a 64-bit block counter: block i is
 * fvm_threefry2x32(key, {i mod 2^32, i div 2^32}), and words are handed out
 * first word, then second word of each block. So a stream is a pure function
 * of its key: the same key gives the same variates on every run, and streams
 * keyed by fvm_prng_fold_in(base, k) for k = 0, 1, ... are independent of
 * each other and of the order they are used in. Nothing allocates but
 * fvm_rand_permutation's caller-provided array; nothing fails.
 *
 * Floating point: uniforms are exact; normals use log and sqrt of the C
 * library (see prng.h: bit-identical for one build, possibly an ulp apart on
 * another libm), gamma variates log, exp and pow as well. */
#ifndef FVM_RAND_H
#define FVM_RAND_H

#include <stddef.h>
#include <stdint.h>

typedef struct fvm_rand {
    uint32_t key[2];
    uint64_t block; /* the next block to hash */
    uint32_t w[2]; /* words of the current block */
    int left; /* words of w not yet used (0, 1 or 2) */
} fvm_rand;

/* A stream keyed by key (copied). */
void fvm_rand_init(fvm_rand *r, const uint32_t key[2]);
/* A stream keyed by fvm_prng_fold_in(key, data). */
void fvm_rand_init_fold(fvm_rand *r, const uint32_t key[2], uint32_t data);

uint32_t fvm_rand_u32(fvm_rand *r);
/* Uniform in [0, 1) with 53 random bits (two words, the first the high one). */
double fvm_rand_uniform(fvm_rand *r);

/* An index in [0, n) drawn from a cumulative distribution cdf[0..n) (increasing, cdf[n-1] > 0):
 * the first k with cdf[k] > u * cdf[n-1], u = fvm_rand_uniform. */
int fvm_rand_cdf(fvm_rand *r, const double *cdf, int n);
/* Uniform integer in [0, n), n >= 1, without bias (rejection on 64 bits). */
uint64_t fvm_rand_below(fvm_rand *r, uint64_t n);
/* Standard normal: sqrt(2) * erfinv(2u + lo) with u = fvm_rand_uniform and
 * lo = -(1 - 2^-53), as prng.h's f64 normals; always finite. */
double fvm_rand_normal(fvm_rand *r);
/* log of a Gamma(shape, 1) variate, shape > 0: Marsaglia and Tsang's method
 * ("A simple method for generating gamma variables", 2000) for shape >= 1;
 * for shape < 1, Gamma(shape + 1) * U^(1/shape), kept in logs so that tiny
 * shapes do not underflow to 0. */
double fvm_rand_log_gamma(fvm_rand *r, double shape);
/* A Dirichlet(alpha, ..., alpha) sample of n >= 1 probabilities summing to 1
 * (normalised gamma variates, computed from their logs). */
void fvm_rand_dirichlet(fvm_rand *r, double alpha, size_t n, double *out);
/* A uniform random permutation of 0..n-1 into out (Fisher-Yates). */
void fvm_rand_permutation(fvm_rand *r, int64_t n, int64_t *out);

#endif
