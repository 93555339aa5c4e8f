/* xdev.h - cross-device plans: written by fedplan, read back and run by 'fedvm device' and 'fedvm server' (format/PLANS.md).
 *
 * A plan is one JSON document (format version FVM_XDEV_VERSION) holding an
 * iterative process's round as a client phase and a server phase, each a
 * complete fedvm program plus its configuration. Devices and the server
 * exchange safetensors files, each written atomically and naming in its
 * metadata the plan (the SHA-256 of the plan file's bytes, as sha256sum
 * prints it), what it is and the round it belongs to:
 *
 *   state      the server state after a round (round 0: initialize's)
 *   broadcast  what prepare sends the round's clients, with the round's key
 *              and the indices of the clients the round selected
 *   update     one client's result of the client phase
 *
 * A round: the server prepares the broadcast from its state; every selected
 * client runs the client phase on its own data and the broadcast, giving
 * one update; the server aggregates the updates, in client index order
 * through the fixed reduction tree, and computes the new state and the
 * round's metrics. Keys and client sampling are those of 'fedvm run'
 * (vm/runtime/sample.h), so the same seed gives the same bits. */
#ifndef FVM_XDEV_H
#define FVM_XDEV_H

#include <stdint.h>

#include "../vm/exec/interp.h"
#include "atomic.h"
#include "bind.h"
#include "plan.h"

/* The plan format version this fedvm writes and reads. */
#define FVM_XDEV_VERSION 2

/* fedplan's writer (an fvm_plan_writer): the cross-device plan of the
 * iterative process's next (o->fn may name it; it must be 'next' of a
 * program with 'initialize'). A round that has no MapReduce form, a server
 * input other than the state and the round key, or a value exchanged
 * between server and devices that safetensors cannot hold (a sequence, an
 * unknown dimension) is refused with its location and the reason. */
fvm_status fvm_plan_cross_device(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len,
                                 fvm_diag *d);

/* ---- reading a plan ---------------------------------------------------------- */

typedef enum fvm_xdev_phase { FVM_XDEV_CLIENT = 1, FVM_XDEV_SERVER = 2 } fvm_xdev_phase;

typedef struct fvm_xdev_plan fvm_xdev_plan;

/* The largest plan read: 16 MiB. A plan is programs and their
 * configuration (tens of KiB for the programs of programs/; the 2NN's is
 * 32 KiB), never tensors, which travel in safetensors files; the cap keeps
 * the parsed document's memory bounded. */
#define FVM_XDEV_MAX_PLAN (UINT64_C(16) << 20)

/* Reads the plan file at path, once (a regular file of at most
 * FVM_XDEV_MAX_PLAN bytes; format/file.h), and parses it as
 * fvm_xdev_parse does. */
fvm_status fvm_xdev_open(const char *path, unsigned phases, fvm_xdev_plan **out, fvm_diag *d);

/* The plan in len bytes of text (borrowed; name is the file name errors
 * give): loads and checks the programs of the phases asked for (a bitwise
 * or of fvm_xdev_phase). The programs must be self-contained: an
 * "include" in them is an error, and no file is read. Every problem is an
 * error located in the plan (line:col and JSON pointer): not JSON, another
 * format version or kind, a missing or malformed member, a program that
 * does not check, a configuration that does not fit its program (the
 * inputs' types and columns, the broadcast's and outputs' names and
 * tensors, the state's type and tensors, the metrics' type, a partial's
 * tensors; one state type through initialize, prepare and result; and,
 * with both phases, the server sends what the client takes and aggregates
 * what it sends). *out (free with fvm_xdev_close) is NULL on error. */
fvm_status fvm_xdev_parse(const char *name, const char *text, size_t len, unsigned phases, fvm_xdev_plan **out,
                          fvm_diag *d);

/* Frees the plan; NULL is a no-op. */
void fvm_xdev_close(fvm_xdev_plan *plan);

/* The plan's id: the SHA-256 of its file's bytes, 64 hex digits (owned by plan). */
const char *fvm_xdev_id(const fvm_xdev_plan *plan);

/* ---- the device: the client phase ------------------------------------------- */

typedef struct fvm_xdev_device fvm_xdev_device;

/* Prepares the client phase of a round: reads the broadcast checkpoint
 * (which must be one of this plan's) and binds each client input to its
 * data: data[k] is "NAME=FILE[:SPLIT]", or "FILE[:SPLIT]" when the round
 * has one data input. FILE is a dataset (FedJAX or TFF SQLite, read one
 * client at a time) or a .json/.yaml file with one member per client (as
 * 'fedvm run --arg NAME=@FILE'). The plan must have its client phase
 * loaded and must outlive *out. */
fvm_status fvm_xdev_device_open(const fvm_xdev_plan *plan, const char *checkpoint, int ndata,
                                const char *const *data, fvm_xdev_device **out, fvm_diag *d);

/* The round the broadcast is for. */
int64_t fvm_xdev_device_round(const fvm_xdev_device *dev);

/* The index of a client of the data: id (a client id of the first dataset)
 * or, with id NULL, index itself. It must exist in every data input and be
 * one of the clients the round selected. */
fvm_status fvm_xdev_device_client(const fvm_xdev_device *dev, const char *id, int64_t index, int64_t *out,
                                  fvm_diag *d);

/* Runs the client phase for client 'index' (from fvm_xdev_device_client)
 * and writes its update to out (atomically). Secure-sum inputs are reduced
 * modulo 2^bitwidth first, so the file holds what the device would send. */
fvm_status fvm_xdev_device_update(fvm_xdev_device *dev, int64_t index, const char *out, fvm_diag *d);

/* Runs the client phase for the clients[0..n) (from fvm_xdev_device_client),
 * which must be one whole block of the round: FVM_AGG_BLOCK consecutive
 * clients of the round's, in index order (the last block may be shorter),
 * given in any order. Folds their updates in index order into the block's
 * partial aggregate with the server phase's 'partial' function (so the plan
 * must have its server phase loaded too), exactly as the server's
 * aggregation folds that block, and writes it to out (atomically). */
fvm_status fvm_xdev_device_partial(fvm_xdev_device *dev, const int64_t *clients, int64_t n, const char *out,
                                   fvm_diag *d);

/* Frees the device; NULL is a no-op. */
void fvm_xdev_device_close(fvm_xdev_device *dev);

/* ---- the server: state, broadcast, aggregation -------------------------------- */

/* Runs initialize (its 'key', if any, is random_key(seed)), replaces the
 * tensors that the safetensors file init_weights holds (NULL: none; matched
 * as 'fedvm run --init' does, *replaced counts them) and writes the state of
 * round 0 to out. */
fvm_status fvm_xdev_server_init(const fvm_xdev_plan *plan, uint64_t seed, const char *init_weights, const char *out,
                                int *replaced, fvm_diag *d);

/* The next round's broadcast: from the state file (round r - 1) for round
 * r, selecting per_round of population clients as 'fedvm run
 * --clients-per-round' does (per_round == population: all). Writes the
 * broadcast to out; *clients (malloc'd, increasing) and *nclients are the
 * round's clients, *round the round. */
fvm_status fvm_xdev_server_prepare(const fvm_xdev_plan *plan, const char *state, int64_t population,
                                   int64_t per_round, const char *out, int64_t *round, int64_t **clients,
                                   int64_t *nclients, fvm_diag *d);

/* What a round's aggregation gives (owned by the caller: commit or clear
 * it with fvm_xdev_result_clear). */
typedef struct fvm_xdev_result {
    int64_t round;
    fvm_value *metrics;
    const fvm_type *metrics_type; /* owned by the plan */
    int64_t *clients;             /* the clients aggregated, increasing */
    int64_t nclients;
    fvm_atomic state;             /* the new state, written and synced beside out, not yet in place */
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
fvm_status fvm_xdev_server_aggregate(const fvm_xdev_plan *plan, const char *state, const char *broadcast,
                                     const char *updates, const char *out, fvm_xdev_result *res, fvm_diag *d);

/* Ends a round all or nothing: appends len bytes (the round's metrics line)
 * to the file metrics (unless NULL; created if missing, a regular file)
 * and syncs it, then renames the new state into place. Any failure (a full
 * disk, say) undoes what was done: the metrics file is cut back to its
 * length before (removed if it was created) and the state is not written.
 * res is cleared either way. */
fvm_status fvm_xdev_result_commit(fvm_xdev_result *res, const char *metrics, const char *line, size_t len,
                                  fvm_diag *d);

/* Checks len bytes (a file named name) as 'fedvm server aggregate' checks
 * each update: a safetensors file, an update of this plan (whose server
 * phase must be loaded) for round 'round', of one of the round's clients
 * clients[0..n) (increasing; *client gets it), with the tensors the server
 * aggregates. Errors name name. */
fvm_status fvm_xdev_update_parse(const fvm_xdev_plan *plan, const char *name, const void *bytes, size_t len,
                                 int64_t round, const int64_t *clients, int64_t n, int64_t *client, fvm_diag *d);

/* The same aggregation in stages: instead of the updates, the directory
 * partials holds one partial aggregate per block of the round's clients
 * (fvm_xdev_device_partial; every *.safetensors file in it, each of this
 * plan, of round r, of a block of this round's clients, one per block,
 * every block present). Their accumulators are merged pairwise in block
 * order, as the aggregation's reduction tree merges its blocks, so the
 * state and metrics are those fvm_xdev_server_aggregate gives. */
fvm_status fvm_xdev_server_merge(const fvm_xdev_plan *plan, const char *state, const char *broadcast,
                                 const char *partials, const char *out, fvm_xdev_result *res, fvm_diag *d);

/* Releases what res holds (a new state not committed is removed). */
void fvm_xdev_result_clear(fvm_xdev_result *res);

#endif
