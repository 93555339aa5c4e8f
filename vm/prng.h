/* prng.h - counter-based, stateless random numbers (Threefry-2x32, 20 rounds).
 *
 * A key is two uint32 words. Every function is pure: the same key gives the
 * same bits, whatever the order in which calls are made, so random results
 * never depend on evaluation order or on the backend. The scheme follows the
 * classic JAX construction (the threefry2x32 hash applied to counters), and the
 * hash itself matches the Random123 known-answer vectors. */
#ifndef FVM_PRNG_H
#define FVM_PRNG_H

#include <stddef.h>
#include <stdint.h>

/* Threefry-2x32 with 20 rounds: encrypts counter ctr under key. */
void fvm_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]);

/* Key from a 64-bit seed: {seed >> 32, seed & 0xffffffff}. */
void fvm_prng_key(uint64_t seed, uint32_t out[2]);

/* m random 32-bit words, as JAX's threefry_2x32 over the counters 0..m-1:
 * with h = ceil(m/2), hash call i (i < h) encrypts the counter pair (i, h+i)
 * (a counter >= m reads as 0); out[i] is its first word and out[h+i] its
 * second, truncated to m words. */
void fvm_prng_bits(const uint32_t key[2], size_t m, uint32_t *out);

/* n new keys: the 2n words of fvm_prng_bits(key, 2n), key j = words 2j, 2j+1
 * (out has 2n words). This is JAX's classic random.split. */
void fvm_prng_split(const uint32_t key[2], size_t n, uint32_t *out);

/* A new key from key and a 32-bit value: the hash of counter pair (0, data),
 * as JAX's random.fold_in. */
void fvm_prng_fold_in(const uint32_t key[2], uint32_t data, uint32_t out[2]);

/* Uniform floats in [0, 1). f32: word w gives bits (w >> 9) | 0x3f800000
 * read as a float, minus 1 (JAX's construction). f64: words 2i, 2i+1 of
 * fvm_prng_bits(key, 2n) form u = (w0 << 32 | w1); (u >> 12) | 0x3ff0... minus 1. */
void fvm_prng_uniform_f32(const uint32_t key[2], size_t n, float *out);
void fvm_prng_uniform_f64(const uint32_t key[2], size_t n, double *out);

/* Standard normal samples (inverse-CDF of a uniform in (-1, 1) through erfinv,
 * with a fixed polynomial, so results are the same on every platform with IEEE
 * arithmetic). */
void fvm_prng_normal_f32(const uint32_t key[2], size_t n, float *out);
void fvm_prng_normal_f64(const uint32_t key[2], size_t n, double *out);

#endif
