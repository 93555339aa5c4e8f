/* keys.h - the keys of rounds and clients, and keys as values.
 *
 * Everything here is a pure function of the seed, the round number and a
 * client's index in its dataset, so a round's clients and keys do not depend
 * on the backend, the thread count or the order of execution, and a run
 * resumed from a checkpoint draws exactly what an uninterrupted run draws.
 *
 * With base = fvm_prng_key(seed) (random_key of the seed):
 * - the key of round r (r >= 1) is fold_in(base, r), and initialize's key is
 *   that of round 0, fold_in(base, 0): keys that initialize derives from its
 *   own (fold_in(its key, i) for a model's layers) are no round's key;
 * - the key of client c in round r is fold_in(key of round r, c);
 * - the round's sample of clients draws from a stream no round's key is
 *   (vm/runtime/sample.h). */
#ifndef FVM_KEYS_H
#define FVM_KEYS_H

#include <stdint.h>

#include "../core/status.h"
#include "value.h"

FVM_API void fvm_round_key(uint64_t seed, int64_t round, uint32_t out[2]);
FVM_API void fvm_client_key(uint64_t seed, int64_t round, int64_t client, uint32_t out[2]);

/* A key as a u32[2] value (a new reference). */
FVM_API fvm_status fvm_key_value(const uint32_t key[2], fvm_value **out, fvm_diag *d);
/* The {u32[2]}@CLIENTS value of n client keys: member j is
 * fvm_prng_fold_in(key, idx[j]) (idx NULL: j), made when read (idx is
 * copied; the value holds no member in memory). */
FVM_API fvm_status fvm_client_keys_value(const uint32_t key[2], const int64_t *idx, int64_t n, fvm_value **out,
                                         fvm_diag *d);

#endif
