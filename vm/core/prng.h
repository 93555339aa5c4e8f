/* prng.h - counter-based, stateless random numbers (Threefry-2x32, 20 rounds).
 *
 * A key is two uint32 words. Every function is pure: the same key gives the
 * same bits, whatever the order in which calls are made, so random results
 * never depend on evaluation order or on the backend. The scheme follows the
 * classic JAX construction (the threefry2x32 hash applied to counters, as
 * jax.random does with jax_threefry_partitionable off), and the hash itself
 * matches the Random123 known-answer vectors.
 *
 * Common rules for the functions below:
 * - Nothing allocates, nothing fails; all functions are thread-safe.
 * - A count of 0 writes nothing (out may then be NULL); any count >= 1 works,
 *   odd ones included.
 * - out may overlap key (e.g. fvm_prng_split(key, 1, key) replaces a key).
 * - Counters are 32-bit words, so a request covers at most 2^32 - 2 words
 *   (f64: 2^31 - 1 values); JAX switches to a blockwise scheme beyond that,
 *   which fedvm does not implement.
 * - Bits, keys and uniforms are integer operations or exact IEEE operations:
 *   bit-identical on every platform. Normals also use the C library's logf/log
 *   and sqrtf/sqrt: bit-identical wherever that library is the same (threads,
 *   processes and machines of one build), possibly an ulp apart elsewhere,
 *   since log is not correctly rounded by every libm. */
#ifndef FVM_PRNG_H
#define FVM_PRNG_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

/* Threefry-2x32 with 20 rounds: encrypts counter ctr under key. out may alias
 * key or ctr. */
FVM_API void fvm_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]);

/* Key from a 64-bit seed: {seed >> 32, seed & 0xffffffff}. This is
 * jax.random.PRNGKey with 64-bit seeds (jax_enable_x64): a negative seed s
 * is passed as (uint64_t)(int64_t)s. JAX's default 32-bit mode gives
 * {0, (uint32_t)s}, i.e. pass (uint32_t)s. */
FVM_API void fvm_prng_key(uint64_t seed, uint32_t out[2]);

/* m random 32-bit words, as JAX's threefry_2x32 over the counters 0..m-1:
 * with h = ceil(m/2), hash call i (i < h) encrypts the counter pair (i, h+i)
 * (a counter >= m reads as 0); out[i] is its first word and out[h+i] its
 * second, truncated to m words. So for odd m the last call's second word is
 * dropped, and bits(key, m) is in general not a prefix of bits(key, m + 1). */
FVM_API void fvm_prng_bits(const uint32_t key[2], size_t m, uint32_t *out);

/* n new keys: the 2n words of fvm_prng_bits(key, 2n), key j = words 2j, 2j+1
 * (out has 2n words). This is JAX's classic random.split. */
FVM_API void fvm_prng_split(const uint32_t key[2], size_t n, uint32_t *out);

/* A new key from key and a 32-bit value: the hash of counter pair (0, data),
 * as JAX's random.fold_in. */
FVM_API void fvm_prng_fold_in(const uint32_t key[2], uint32_t data, uint32_t out[2]);

/* Uniform floats in [0, 1), as JAX's random.uniform.
 * f32: word w of fvm_prng_bits(key, n) gives bits (w >> 9) | 0x3f800000 read
 * as a float, minus 1.
 * f64: with w = fvm_prng_bits(key, 2n), value i takes u = w[i] << 32 | w[n+i]
 * (the two words of hash call i, i.e. of counter pair (i, n+i); JAX splits the
 * 2n words into halves, not into neighbouring pairs), then
 * (u >> 12) | 0x3ff0000000000000 read as a double, minus 1. */
FVM_API void fvm_prng_uniform_f32(const uint32_t key[2], size_t n, float *out);
FVM_API void fvm_prng_uniform_f64(const uint32_t key[2], size_t n, double *out);

/* Standard normal samples, as JAX's random.normal: sqrt(2) * erfinv(v) with
 * v = 2u + lo (one rounding: 2u is exact), where u is the matching
 * fvm_prng_uniform_* value and lo = nextafter(-1, 0), i.e. -(1 - 2^-24) for
 * f32 and -(1 - 2^-53) for f64. (JAX computes u * (1 - lo) + lo, and 1 - lo
 * rounds to 2 in both precisions.) So v lies in [lo, 1) and the result is
 * always finite. sqrt(2) is rounded to the output precision. */
FVM_API void fvm_prng_normal_f32(const uint32_t key[2], size_t n, float *out);
FVM_API void fvm_prng_normal_f64(const uint32_t key[2], size_t n, double *out);

/* Inverse error function by M. Giles' polynomials ("Approximating the erfinv
 * function", GPU Computing Gems, 2010): single precision evaluated in float,
 * double precision in double, with w = -log((1 - x) * (1 + x)). Odd in x;
 * erfinv(+-1) = +-infinity; NaN for |x| > 1 or NaN x. The normals above use
 * these. */
FVM_API float fvm_prng_erfinv_f32(float x);
FVM_API double fvm_prng_erfinv_f64(double x);

#endif
