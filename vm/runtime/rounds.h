/* rounds.h - the round driver: one round of an iterative process's next (and evaluate) over sampled clients (session.h runs them in turn).
 *
 * A round r (numbered from 1) picks its clients (every client, a fixed list,
 * or per_round of them drawn by fvm_sample_clients from the seed and r),
 * gives next the members of its client data for those clients only, the
 * round key to a parameter 'key' and the picked clients' keys to a parameter
 * 'client_keys' (sample.h), their indices to 'client_indices', the number of
 * clients to 'num_clients' and, in a program with initialize_client, their
 * states to 'client_states' (each client's latest, or initialize_client's
 * on its first round), stores the clients' new states that next returns
 * third, and passes the new state on. Everything a round
 * draws is a pure function of the seed and r, so rounds r.. from a state saved
 * after round r-1 give the bits an uninterrupted run gives. */
#ifndef FVM_ROUNDS_H
#define FVM_ROUNDS_H

#include "../exec/interp.h"
#include "figures.h"

/* What the driver tells its caller after each round (all borrowed). */
typedef struct fvm_round_report {
    int64_t last; /* the run's last round */
    fvm_value *state; /* the state after the round */
    fvm_metrics_round figures; /* the round, next's metrics, evaluate's result (or NULL), its
                                 times and clients (the round's: indices into the data,
                                 increasing); fields FVM_METRICS_TIMES | FVM_METRICS_CLIENTS */
} fvm_round_report;

/* Where the clients' states are kept between rounds (a program with
 * initialize_client); a session's is its clients' store (session_io.h). */
typedef struct fvm_client_states {
    const fvm_func *init; /* initialize_client */
    void *store; /* the first argument of the functions below */
    /* Client c's latest state (a new reference), *out NULL when it has
     * none. Called from the backend's workers, several at once. */
    fvm_status (*get)(void *store, int64_t client, fvm_value **out, fvm_diag *d);
    /* Whether client c has a state. */
    fvm_status (*has)(void *store, int64_t client, bool *has, fvm_diag *d);
    /* Keeps round r's new states of clients[0..n) (increasing); round 0
     * for the first states initialize_client gives, before a round. */
    fvm_status (*put)(void *store, int64_t round, int64_t n, const int64_t *clients, fvm_value *const *states,
                      fvm_diag *d);
} fvm_client_states;

typedef struct fvm_rounds {
    fvm_vm *vm;
    const fvm_func *next;
    const fvm_func *evaluate; /* NULL: no evaluation */
    fvm_value *const *next_args; /* one per parameter of next (borrowed): [0], the state,
                                    is ignored; NULL for the parameters set each round
                                    (keys.h's fvm_given); {T}@CLIENTS values hold every
                                    client of the population */
    const fvm_client_states *states; /* NULL: the program keeps no client state */
    fvm_value *const *eval_args; /* one per parameter of evaluate, [0] ignored */
    int64_t eval_population; /* clients in evaluate's client data, or -1 (none) */
    int64_t population; /* clients in the data; -1: not known (next then runs
                                   with no client count, as for a program without
                                   client data) */
    int64_t per_round; /* clients per round, 0..population (== population: all) */
    const int64_t *fixed; /* NULL, or the per_round clients of every round (increasing) */
    uint64_t seed;
    int64_t last; /* the run's last round */
    int64_t eval_every; /* evaluate after rounds that are multiples of it and after
                                   the last; 0: only after the last */
    /* Called after every round; an error stops the run with it. Optional. */
    fvm_status (*report)(void *user, const fvm_round_report *r, fvm_diag *d);
    void *user;
} fvm_rounds;

/* Runs initialize (no parameters, or one 'key' of type u32[2], unplaced or
 * @SERVER, which receives the key of round 0, fvm_round_key(seed, 0)); *out
 * is the initial state (a new reference). */
fvm_status fvm_rounds_initialize(fvm_vm *vm, const fvm_func *init, uint64_t seed, fvm_value **out, fvm_diag *d);

/* Runs round 'round' (>= 1) from state (borrowed), evaluates when it is
 * time and reports; *out is the state after it (a new reference). The VM's
 * number of clients is per_round for next, eval_population for evaluate. */
fvm_status fvm_rounds_step(const fvm_rounds *r, int64_t round, fvm_value *state, fvm_value **out, fvm_diag *d);

#endif
