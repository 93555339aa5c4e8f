/* xdev_run.h - the two sides of a cross-device plan at run time: the device runs the client phase on its data, the server the initial state, a round's broadcast and its aggregation, each reading and writing the round's files (the plan and its files: xdev.h, format/PLANS.md; what a round computes: vm/runtime/xdev_phases.h). */
#ifndef FVM_XDEV_RUN_H
#define FVM_XDEV_RUN_H

#include <stdint.h>

#include "../vm/ir/types.h"
#include "../vm/ir/value.h"
#include "atomic.h"
#include "metrics.h"
#include "xdev.h"

/* ---- the device: the client phase ------------------------------------------- */

typedef struct fvm_xdev_device fvm_xdev_device;

/* Prepares the client phase of a round: reads the broadcast checkpoint
 * (which must be one of this plan's) and binds each client input to its
 * data: data[k] is "NAME=FILE[:SPLIT]", or "FILE[:SPLIT]" when the round
 * has one data input. FILE is a dataset (FedJAX or TFF SQLite, read one
 * client at a time) or a .json/.yaml file with one member per client (as
 * 'fedvm run --arg NAME=@FILE'). The plan must have its client phase
 * loaded and must outlive *out. */
FVM_API fvm_status fvm_xdev_device_open(const fvm_xdev_plan *plan, const char *checkpoint, int ndata,
                                        const char *const *data, fvm_xdev_device **out, fvm_diag *d);

/* The round the broadcast is for. */
FVM_API int64_t fvm_xdev_device_round(const fvm_xdev_device *dev);

/* The index of a client of the data: id (a client id of the first dataset)
 * or, with id NULL, index itself. It must exist in every data input and be
 * one of the clients the round selected. */
FVM_API fvm_status fvm_xdev_device_client(const fvm_xdev_device *dev, const char *id, int64_t index, int64_t *out,
                                          fvm_diag *d);

/* ---- the client's state (a plan that keeps one: fvm_xdev_keeps_client_state) -----
 *
 * A device keeps its client's state in a safetensors file of its own, the
 * state file (metadata fedvm.kind "client_state", fedvm.round: the round
 * that made it, fedvm.client, fedvm.seed, fedvm.state: its type C), which
 * is never sent. A client's first round starts from initialize_client's
 * state (with the client's key, keys.h's fvm_client_init_key, as 'fedvm
 * run' makes it), every later one from the file. A round writes, in this
 * order: the new state to STATE.pending (complete and synced), the update
 * (or partial), then renames STATE.pending to STATE. A device stopped at
 * any point leaves STATE as it was, or the round's new state with the
 * update written. A pending state of an earlier round than the broadcast's
 * is one whose update was written (the server went on, which needs the
 * update of every client it selected) by a device that stopped before the
 * rename: the next run takes it as the state, renaming it into place
 * first. One of the broadcast's round is ignored: the round runs again
 * from STATE, to the same bits. A state file of the broadcast's round or
 * later is refused (the round ran for this client already), and so is one
 * of another client, another seed or another type than C. */

/* Checks client index's state file state (and its pending state) as a
 * round would read it, writing nothing: to check every client of a call
 * before any runs. state NULL (a plan without client state) is a no-op. */
FVM_API fvm_status fvm_xdev_device_check_state(fvm_xdev_device *dev, int64_t index, const char *state, fvm_diag *d);

/* Runs the client phase for client 'index' (from fvm_xdev_device_client)
 * and writes its update to out (atomically). Secure-sum inputs are reduced
 * modulo their modulus (2^bitwidth or the modulus) or checked against their
 * max_input first (a value out of range is an error naming the secure sum),
 * so the file holds what the device would send. state is the client's
 * state file in a plan that keeps one (required then; NULL otherwise): read
 * and replaced as described above. */
FVM_API fvm_status fvm_xdev_device_update(fvm_xdev_device *dev, int64_t index, const char *out, const char *state,
                                          fvm_diag *d);

/* Runs the client phase for the clients[0..n) (from fvm_xdev_device_client),
 * which must be one whole block of the round: FVM_AGG_BLOCK consecutive
 * clients of the round's, in index order (the last block may be shorter),
 * given in any order. Folds their updates in index order into the block's
 * partial aggregate with the server phase's 'partial' function (so the plan
 * must have its server phase loaded too), exactly as the server's
 * aggregation folds that block, and writes it to out (atomically). states
 * (a plan with client state; NULL otherwise) gives clients[k]'s state file
 * states[k]: every new state is written pending, then the partial, then
 * the states are renamed into place. */
FVM_API fvm_status fvm_xdev_device_partial(fvm_xdev_device *dev, const int64_t *clients, int64_t n, const char *out,
                                           const char *const *states, fvm_diag *d);

/* Frees the device; NULL is a no-op. */
FVM_API void fvm_xdev_device_close(fvm_xdev_device *dev);

/* ---- the server: state, broadcast, aggregation -------------------------------- */

/* Runs initialize (its 'key', if any, is random_key(seed)), replaces the
 * tensors that the safetensors file init_weights holds (NULL: none; matched
 * as 'fedvm run --init' does, *replaced counts them) and writes the state of
 * round 0 to out. */
FVM_API fvm_status fvm_xdev_server_init(const fvm_xdev_plan *plan, uint64_t seed, const char *init_weights,
                                        const char *out, int *replaced, fvm_diag *d);

/* The next round's broadcast: from the state file (round r - 1) for round
 * r, selecting per_round of population clients as 'fedvm run
 * --clients-per-round' does (per_round == population: all). Writes the
 * broadcast to out; *clients (malloc'd, increasing) and *nclients are the
 * round's clients, *round the round. */
FVM_API fvm_status fvm_xdev_server_prepare(const fvm_xdev_plan *plan, const char *state, int64_t population,
                                           int64_t per_round, const char *out, int64_t *round, int64_t **clients,
                                           int64_t *nclients, fvm_diag *d);

/* What a round's aggregation gives (owned by the caller: commit or clear
 * it with fvm_xdev_result_clear). */
typedef struct fvm_xdev_result {
    int64_t round;
    fvm_value *metrics;
    const fvm_type *metrics_type; /* owned by the plan */
    int64_t *clients; /* the clients aggregated, increasing */
    int64_t nclients;
    int64_t population; /* the clients the round selected from (the broadcast's) */
    bool dp; /* the server program declares "privacy": epsilon after rounds 1..round, for delta */
    double epsilon, delta;
    fvm_atomic state; /* the new state, written and synced beside out, not yet in place */
} fvm_xdev_result;

/* Aggregates the round: the state file (round r - 1), the broadcast file
 * prepare wrote for round r, and the updates in the directory updates (every
 * *.safetensors file in it; other names are left alone). Every update must
 * be one of this plan's, of round r, from a client the round selected, one
 * per client, every selected client present; every problem is reported,
 * naming the file. The updates are combined in client index order, read
 * one at a time, each the very bytes that were checked (a file changed
 * after the check stops the round). The state of round r is written beside
 * out and synced; fvm_xdev_result_commit puts it in place (with the
 * round's metrics line), fvm_xdev_result_clear drops it. out must not be
 * an input (the plan, state, broadcast or an update) nor a *.safetensors
 * name in the updates' directory. */
FVM_API fvm_status fvm_xdev_server_aggregate(const fvm_xdev_plan *plan, const char *state, const char *broadcast,
                                             const char *updates, const char *out, fvm_xdev_result *res, fvm_diag *d);

/* The round's figures for its metrics line (fvm_metrics_line): the round,
 * its metrics, with FVM_METRICS_CLIENTS the number of clients aggregated
 * and, for a plan whose program declares "privacy", with
 * FVM_METRICS_PRIVACY its (epsilon, delta) as 'fedvm run' reports them
 * (q = the round's clients / population, or 1 when it takes them all).
 * Borrowed from res. */
FVM_API fvm_metrics_round fvm_xdev_result_figures(const fvm_xdev_result *res);

/* Ends a round all or nothing: appends the round's metrics line (the
 * figures above, as fvm_metrics_line writes them) to the file metrics
 * (unless NULL; created if missing, a regular file) and syncs it, then
 * renames the new state into place. Any failure (a full disk, say) undoes
 * what was done: the metrics file is cut back to its length before (removed
 * if it was created) and the state is not written. res is cleared either
 * way. */
FVM_API fvm_status fvm_xdev_result_commit(fvm_xdev_result *res, const char *metrics, fvm_diag *d);

/* Checks len bytes (a file named name) as 'fedvm server aggregate' checks
 * each update: a safetensors file, an update of this plan (whose server
 * phase must be loaded) for round 'round', of one of the round's clients
 * clients[0..n) (increasing; *client gets it), with the tensors the server
 * aggregates. Errors name name. */
FVM_API fvm_status fvm_xdev_update_parse(const fvm_xdev_plan *plan, const char *name, const void *bytes, size_t len,
                                         int64_t round, const int64_t *clients, int64_t n, int64_t *client,
                                         fvm_diag *d);

/* The same aggregation in stages: instead of the updates, the directory
 * partials holds one partial aggregate per block of the round's clients
 * (fvm_xdev_device_partial; every *.safetensors file in it, each of this
 * plan, of round r, of a block of this round's clients, one per block,
 * every block present). Their accumulators are merged pairwise in block
 * order, as the aggregation's reduction tree merges its blocks, so the
 * state and metrics are those fvm_xdev_server_aggregate gives. */
FVM_API fvm_status fvm_xdev_server_merge(const fvm_xdev_plan *plan, const char *state, const char *broadcast,
                                         const char *partials, const char *out, fvm_xdev_result *res, fvm_diag *d);

/* Releases what res holds (a new state not committed is removed). */
FVM_API void fvm_xdev_result_clear(fvm_xdev_result *res);

#endif
