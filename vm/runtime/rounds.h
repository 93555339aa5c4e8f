/* rounds.h - the round driver: runs an iterative process's next (and evaluate) round after round over sampled clients.
 *
 * A round r (numbered from 1) picks its clients (every client, a fixed list,
 * or per_round of them drawn by fvm_sample_clients from the seed and r),
 * gives next the members of its client data for those clients only, the
 * round key to a parameter 'key' and the picked clients' keys to a parameter
 * 'client_keys' (sample.h), and passes the new state on. Everything a round
 * draws is a pure function of the seed and r, so rounds first..last from a
 * state saved after round first-1 give the bits an uninterrupted run gives. */
#ifndef FVM_ROUNDS_H
#define FVM_ROUNDS_H

#include "../exec/interp.h"

/* What the driver tells its caller after each round (all borrowed). */
typedef struct fvm_round_report {
    int64_t round, last;
    const int64_t *clients; /* the round's clients: indices into the data, increasing */
    int64_t nclients;
    double seconds;         /* wall time of the round (next and evaluate) */
    double eval_seconds;    /* the part of it in evaluate (0 when it did not run) */
    double cpu_seconds;     /* CPU time of the process in the round, all its threads */
    fvm_value *state;       /* the state after the round */
    fvm_value *metrics;     /* next's metrics, of type metrics_type */
    const fvm_type *metrics_type;
    fvm_value *eval;        /* evaluate's result after this round, or NULL */
    const fvm_type *eval_type;
} fvm_round_report;

typedef struct fvm_rounds {
    fvm_vm *vm;
    const fvm_func *next;
    const fvm_func *evaluate;   /* NULL: no evaluation */
    fvm_value *const *next_args; /* one per parameter of next (borrowed): [0], the state,
                                    is ignored; NULL for 'key' and 'client_keys' (set
                                    each round); {T}@CLIENTS values hold every client
                                    of the population */
    fvm_value *const *eval_args; /* one per parameter of evaluate, [0] ignored */
    int64_t eval_population;    /* clients in evaluate's client data, or -1 (none) */
    int64_t population;         /* clients in the data; -1: not known (next then runs
                                   with no client count, as for a program without
                                   client data) */
    int64_t per_round;          /* clients per round, 0..population (== population: all) */
    const int64_t *fixed;       /* NULL, or the per_round clients of every round (increasing) */
    uint64_t seed;
    int64_t first, last;        /* run rounds first..last (1 <= first; last < first: none) */
    int64_t eval_every;         /* evaluate after rounds that are multiples of it and after
                                   the last; 0: only after the last */
    /* Called after every round; an error stops the run with it. Optional. */
    fvm_status (*report)(void *user, const fvm_round_report *r, fvm_diag *d);
    void *user;
} fvm_rounds;

/* Runs initialize (no parameters, or one 'key' of type u32[2], unplaced or
 * @SERVER, which receives the key of round 0, fvm_round_key(seed, 0)); *out
 * is the initial state (a new reference). */
fvm_status fvm_rounds_initialize(fvm_vm *vm, const fvm_func *init, uint64_t seed, fvm_value **out, fvm_diag *d);

/* Runs the rounds from state (borrowed); *out is the final state (a new
 * reference; state itself when no round runs). The VM's number of clients
 * is per_round for next, eval_population for evaluate. */
fvm_status fvm_rounds_run(const fvm_rounds *r, fvm_value *state, fvm_value **out, fvm_diag *d);

#endif
