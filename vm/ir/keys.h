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
 *   (vm/runtime/sample.h);
 * - client c's initial state (initialize_client's key) comes from
 *   fold_in(fold_in(base, 0xfffffffe), c), a stream no round's key is. */
#ifndef FVM_KEYS_H
#define FVM_KEYS_H

#include <stdint.h>

#include "../core/status.h"
#include "types.h"
#include "value.h"

FVM_API void fvm_round_key(uint64_t seed, int64_t round, uint32_t out[2]);
FVM_API void fvm_client_key(uint64_t seed, int64_t round, int64_t client, uint32_t out[2]);
/* The key initialize_client gets for client c (above). */
FVM_API void fvm_client_init_key(uint64_t seed, int64_t client, uint32_t out[2]);

/* The parameters a run fills by name when no argument gives them (SPEC,
 * "Iterative processes"), told by their name and type. */
typedef enum fvm_given {
    FVM_GIVEN_NONE, /* an ordinary parameter */
    FVM_GIVEN_KEY, /* "key": u32[2] or u32[2]@SERVER, the run's (or round's) key */
    FVM_GIVEN_CLIENT_KEYS, /* "client_keys": {u32[2]}@CLIENTS, one key per client */
    FVM_GIVEN_CLIENT_INDICES, /* "client_indices": {i64[]}@CLIENTS, each client's index in its data */
    FVM_GIVEN_NUM_CLIENTS, /* "num_clients": i64[] or i64[]@SERVER, the clients in the data */
    FVM_GIVEN_CLIENT_STATES, /* "client_states": {C}@CLIENTS, the clients' states (next of a
                                program with initialize_client; only a round gives them) */
} fvm_given;

/* What a parameter of this name and type is (FVM_GIVEN_NONE: not one of them). */
FVM_API fvm_given fvm_given_param(const char *name, const fvm_type *t);

/* The {i64[]}@CLIENTS value whose member j is idx[j] (idx NULL: j), made when
 * read (idx is copied). */
FVM_API fvm_status fvm_client_indices_value(const int64_t *idx, int64_t n, fvm_value **out, fvm_diag *d);
/* An i64 scalar value (a new reference). */
FVM_API fvm_status fvm_i64_value(int64_t v, fvm_value **out, fvm_diag *d);

/* A key as a u32[2] value (a new reference). */
FVM_API fvm_status fvm_key_value(const uint32_t key[2], fvm_value **out, fvm_diag *d);
/* The {u32[2]}@CLIENTS value of n client keys: member j is
 * fvm_prng_fold_in(key, idx[j]) (idx NULL: j), made when read (idx is
 * copied; the value holds no member in memory). */
FVM_API fvm_status fvm_client_keys_value(const uint32_t key[2], const int64_t *idx, int64_t n, fvm_value **out,
                                         fvm_diag *d);

#endif
