/* sample.h - which clients take part in a round.
 *
 * A pure function of the seed and the round number, so a round's clients do
 * not depend on the backend, the thread count or the order of execution, and
 * a run resumed from a checkpoint draws exactly what an uninterrupted run
 * draws: the sample of round r is drawn from the word stream (rand.h) of
 * fold_in(fold_in(fvm_prng_key(seed), 0xffffffff), r), a key no round uses
 * (rounds stop below 2^32 - 1; the rounds' and clients' keys are keys.h's). */
#ifndef FVM_SAMPLE_H
#define FVM_SAMPLE_H

#include <stdint.h>

#include "../core/status.h"
#include "../ir/keys.h"
#include "../ir/value.h"

/* k distinct clients of 0..n-1 for round 'round', uniform without
 * replacement, in increasing order, into out[0..k). A partial Fisher-Yates
 * shuffle of the virtual array [0, n): for i = 0..k-1, j = i + draw below
 * n - i (as fvm_rand_below), swap positions i and j; the first k positions,
 * sorted, are the sample. O(k) time and memory whatever n. k > n is a usage
 * error; k = n gives every client. */
fvm_status fvm_sample_clients(uint64_t seed, int64_t round, int64_t n, int64_t k, int64_t *out, fvm_diag *d);

#endif
