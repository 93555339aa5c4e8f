/* xdev_phases.h - what a cross-device round computes, on values: a client's update and the state it starts from, a block's partial aggregate, the server's initial state, broadcast, aggregation and result (internal; the plan's files, and the public device and server that read and write them, are format/'s: format/xdev_run.h, format/xdev_device.c, format/xdev_server.c).
 *
 * The runtime holds the rules of a round; format/ turns its files into the
 * values these functions take and their results back into files, and wires
 * the two under the public fvm_xdev_device_* and fvm_xdev_server_* (as
 * format/session_files.c wires a session). No function here reads or
 * writes a file; the paths some take only locate their errors. */
#ifndef FVM_RUNTIME_XDEV_PHASES_H
#define FVM_RUNTIME_XDEV_PHASES_H

#include <stdint.h>

#include "../exec/interp.h"
#include "../ir/aggregation.h"
#include "../ir/ir.h"

/* One input of a phase: a parameter and how it gets its value. */
typedef enum {
    XDEV_DATA, /* client: its member of a {T}@CLIENTS parameter, from --data */
    XDEV_CLIENT_KEY, /* client: its key of the round (client_keys) */
    XDEV_CLIENT_INDEX, /* client: its index in the data (client_indices) */
    XDEV_CLIENT_STATE, /* client: its state (client_states), from its state file or initialize_client */
    XDEV_STATE, /* server: the server state */
    XDEV_ROUND_KEY, /* server: the round's key (key) */
    XDEV_NUM_CLIENTS /* server: the number of clients in the data, N (num_clients) */
} xdev_input_kind;

/* A plan's two phases as the round runs them: their programs, functions
 * and types (format/xdev.c reads and checks them; they live in the plan). */
typedef struct fvm_xdev_phases {
    /* client phase (phases & FVM_XDEV_CLIENT) */
    fvm_program *client;
    const fvm_func *work; /* (inputs..., broadcast) -> <updates, secure> */
    int ninputs; /* work's parameters but the broadcast */
    xdev_input_kind *inputs; /* XDEV_DATA or XDEV_CLIENT_KEY */
    int nsecure;
    fvm_secure *secure; /* what each secure sum does (its op and bit width, modulus or max_input), in the order of
                           work's 'secure' fields */
    const fvm_type *client_state; /* C, in a plan that keeps a state on each client (client.state), else NULL:
                                     the input XDEV_CLIENT_STATE, and work's result field 'client_state' */
    const fvm_func *init_client; /* a client's first state: ( -> C) or (key: u32[2] -> C) */
    const fvm_type *sent; /* what a device sends of work's result: <updates, secure> (xdev_sent_type) */
    /* server phase (phases & FVM_XDEV_SERVER) */
    fvm_program *server;
    const fvm_func *initialize, *prepare, *aggregate, *result;
    const fvm_func *partial, *merge, *combine; /* the aggregation in stages (server.partial) */
    const fvm_type *partial_type; /* a block's partial <acc, secure>, unplaced */
    int nserver; /* prepare's parameters */
    xdev_input_kind *server_inputs; /* [0] XDEV_STATE, then XDEV_ROUND_KEY */
    const fvm_type *state; /* unplaced */
    const fvm_type *metrics; /* unplaced */
} fvm_xdev_phases;

/* The position of client c among a round's clients sel[0..n) (increasing), or -1. */
int64_t xdev_position(const int64_t *sel, int64_t n, int64_t c);

/* "1,5,9" of n integers (malloc'd), or NULL when out of memory. */
char *xdev_ints_text(const int64_t *v, int64_t n);

/* ---- the client phase --------------------------------------------------------- */

/* A round as a device runs its clients: what the broadcast gives and the
 * clients' data (all borrowed). */
typedef struct fvm_xdev_client_round {
    const fvm_xdev_phases *ph;
    fvm_vm *vm; /* the client phase's */
    fvm_value *broadcast;
    fvm_value *const *data; /* per input: {T}@CLIENTS (NULL but for XDEV_DATA) */
    int64_t round;
    uint32_t key[2]; /* the round's key */
    uint64_t seed; /* the run's: a client's first state comes from it */
} fvm_xdev_client_round;

/* Client 'index''s update: work's result (with its data member, its key
 * folded from the round's, its index, its state and the broadcast), with
 * its secure-sum inputs reduced or checked as each secure sum does at a
 * client (fvm_secure_step: modulo the modulus; in [0, max_input]; a value
 * out of range is an error naming the secure sum), without the new client
 * state: what the device sends (a new value of type ph->sent). state is the
 * client's (borrowed; NULL when the plan keeps none); *next (unless NULL)
 * gets its new state. */
fvm_status fvm_xdev_client_update(const fvm_xdev_client_round *cr, int64_t index, fvm_value *state, fvm_value **out,
                                  fvm_value **next, fvm_diag *d);

/* A client's state: which one a round starts from.
 *
 * A device keeps its client's state in a file of its own, PATH; a round
 * writes the new state to PATH.pending (complete and synced), then its
 * update (or partial), then renames PATH.pending to PATH. A client's first
 * round starts from initialize_client's state (fvm_xdev_first_state), every
 * later one from PATH, or from PATH.pending when it is of an earlier round
 * than the broadcast's and later than PATH's: its update was written (the
 * server went on, which needs the update of every client it selected) by a
 * device that stopped before the rename, so it is the client's state, put
 * in place first. A pending state of the broadcast's round is ignored: the
 * round runs again from PATH, to the same bits. A state file of the
 * broadcast's round or later is refused (the round ran for this client
 * already), and so is a pending state of a later round. */
typedef enum { XDEV_FROM_FIRST, XDEV_FROM_FILE, XDEV_FROM_PENDING } xdev_state_from;

/* The state file path (its round fr) of client index for a round r: an error
 * when the round ran for the client already. */
fvm_status fvm_xdev_state_fits(int64_t index, int64_t r, const char *path, int64_t fr, fvm_diag *d);

/* Where client index's round r starts from, given the state file (fe: it
 * exists, of round fr, checked by fvm_xdev_state_fits) and the pending
 * state pending (pe: it exists, of round pr); an error located at pending
 * when it is of a later round. */
fvm_status fvm_xdev_state_from(int64_t index, int64_t r, bool fe, int64_t fr, const char *pending, bool pe, int64_t pr,
                               xdev_state_from *out, fvm_diag *d);

/* initialize_client's state for client index, with the client's own key
 * (keys.h, fvm_client_init_key), as 'fedvm run' makes it. */
fvm_status fvm_xdev_first_state(const fvm_xdev_client_round *cr, int64_t index, fvm_value **out, fvm_diag *d);

/* The block of the round that clients[0..n) (indices the round selected,
 * sel[0..nsel), increasing) make up, all of it and nothing else: FVM_AGG_BLOCK
 * consecutive clients of the round's (the last block may be shorter), in any
 * order; an error located at the broadcast saying which clients are missing
 * or out of place (or that there are none). */
fvm_status fvm_xdev_whole_block(const int64_t *sel, int64_t nsel, int64_t round, const char *broadcast,
                                const int64_t *clients, int64_t n, int64_t *block, fvm_diag *d);

/* A block's partial aggregate of its clients' updates (a {W}@CLIENTS value,
 * in index order), with the server phase's 'partial' function, exactly as
 * the server's aggregation folds that block (a new value of type
 * ph->partial_type). */
fvm_status fvm_xdev_partial(const fvm_xdev_phases *ph, fvm_value *updates, fvm_value **out, fvm_diag *d);

/* ---- the server phase --------------------------------------------------------- */

/* initialize's state (its 'key', if any, is random_key(seed)). */
fvm_status fvm_xdev_initialize(const fvm_xdev_phases *ph, uint64_t seed, fvm_value **out, fvm_diag *d);

/* Round r's broadcast from the state of round r - 1: per_round of population
 * clients selected as 'fedvm run --clients-per-round' does (per_round ==
 * population: all) into picked[0..per_round), increasing; key gets the
 * round's key. */
fvm_status fvm_xdev_prepare(const fvm_xdev_phases *ph, fvm_value *state, uint64_t seed, int64_t r, int64_t population,
                            int64_t per_round, int64_t *picked, uint32_t key[2], fvm_value **out, fvm_diag *d);

/* What a round's aggregation computes: the new state and the round's
 * metrics (new values), and for a plan whose program declares "privacy"
 * its (epsilon, delta) after rounds 1..r as 'fedvm run' reports them. */
typedef struct fvm_xdev_outcome {
    fvm_value *state, *metrics;
    bool dp;
    double epsilon, delta;
} fvm_xdev_outcome;

/* A round being aggregated: the state of round r - 1, the run's seed, the
 * round's population and the number of clients it selected (which the
 * privacy figures need). */
typedef struct fvm_xdev_server_round {
    fvm_value *state;
    uint64_t seed;
    int64_t round, population, nclients;
} fvm_xdev_server_round;

/* Round r from the updates of its clients ({W}@CLIENTS in client index
 * order, as the reduction tree combines them). */
fvm_status fvm_xdev_aggregate(const fvm_xdev_phases *ph, const fvm_xdev_server_round *sr, fvm_value *updates,
                              fvm_xdev_outcome *out, fvm_diag *d);

/* Round r from its blocks' partials[0..nblocks) (in block order): their
 * accumulators merged pairwise in block order, as the aggregation's
 * reduction tree merges its blocks, so the outcome is fvm_xdev_aggregate's. */
fvm_status fvm_xdev_merge(const fvm_xdev_phases *ph, const fvm_xdev_server_round *sr, fvm_value *const *partials,
                          int64_t nblocks, fvm_xdev_outcome *out, fvm_diag *d);

/* Releases what out holds. */
void fvm_xdev_outcome_clear(fvm_xdev_outcome *out);

#endif
