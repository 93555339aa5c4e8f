/* client_store.h - the clients' states of a training run between rounds: an SQLite file of one row per client and round, the state as safetensors bytes (internal: not installed).
 *
 * A program with initialize_client keeps a state per client (SPEC,
 * "Client state"). The store holds, for each client that has taken part,
 * the state its last round gave, as a version numbered by that round:
 *
 *   CREATE TABLE client_state (client INTEGER, round INTEGER, state BLOB,
 *                              PRIMARY KEY (client, round)) WITHOUT ROWID;
 *   CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);  -- 'type': C
 *
 * state is the safetensors file of the client's state (safetensors.h), so
 * any safetensors reader can read a row. A client's state is its row of the
 * highest round. Rows of older rounds are kept only while a checkpoint may
 * need them: a run resumed from the checkpoint of round K rewinds the store
 * to K (every row after K dropped), so a client's state is again the one it
 * had after round K. The training session (vm/runtime/session.h) writes a
 * round's rows in one transaction before the round's metrics line and
 * checkpoint, and drops the rows that checkpoint no longer needs after it,
 * so a run killed at any point resumes with the states of its last
 * checkpoint.
 *
 * Memory stays small whatever the number of clients: rows are read one
 * client at a time and SQLite's page cache is bounded (a few MiB). */
#ifndef FVM_CLIENT_STORE_H
#define FVM_CLIENT_STORE_H

#include <stdint.h>

#include "../vm/ir/types.h"
#include "../vm/ir/value.h"

typedef struct fvm_client_store fvm_client_store;

/* Opens the store at path, creating it when missing, or a private
 * temporary store deleted when closed (path NULL). type is the clients'
 * state C (borrowed: it must outlive the store); a file holding states of
 * another type, or that is not a store, is refused (FVM_ERR_FORMAT naming
 * path), and so is a path that is not a regular file. durable: every
 * commit reaches the disk before put returns (for a store beside
 * checkpoints). */
fvm_status fvm_client_store_open(const char *path, const fvm_type *type, bool durable, fvm_client_store **out,
                                 fvm_diag *d);

/* Replaces everything the store holds by the rows of the store at from
 * (which must hold states of the same type), as one transaction. */
fvm_status fvm_client_store_copy_from(fvm_client_store *st, const char *from, fvm_diag *d);

/* Client c's state (a new reference), or *out NULL when c has none. Errors
 * (a row that is not a state of the store's type) name the store and the
 * client. Thread-safe. */
fvm_status fvm_client_store_get(fvm_client_store *st, int64_t client, fvm_value **out, fvm_diag *d);

/* Whether client c has a state (*has). Thread-safe. */
fvm_status fvm_client_store_has(fvm_client_store *st, int64_t client, bool *has, fvm_diag *d);

/* Writes round r's states of the clients[0..n) (distinct): states[j] is
 * client clients[j]'s, of the store's type. One transaction; the rows of
 * these clients after round keep and before r are dropped in it (no
 * checkpoint can need them: keep is the round of the last checkpoint). */
fvm_status fvm_client_store_put(fvm_client_store *st, int64_t round, int64_t keep, int64_t n, const int64_t *clients,
                                fvm_value *const *states, fvm_diag *d);

/* After the checkpoint of round r: drops the rows before r of the
 * clients[0..n) that round r wrote, and records r as the checkpoint the
 * store is kept for (meta 'checkpoint'): from then on it can rewind to r
 * or later only. */
fvm_status fvm_client_store_prune(fvm_client_store *st, int64_t round, int64_t n, const int64_t *clients, fvm_diag *d);

/* Drops every row after round r (a run resumed from round r's checkpoint).
 * A store pruned for a later checkpoint than r no longer holds the states
 * of round r: FVM_ERR_USAGE, saying so. */
fvm_status fvm_client_store_rewind(fvm_client_store *st, int64_t round, fvm_diag *d);

/* Drops every row (a new run in a directory an older run used). */
fvm_status fvm_client_store_clear(fvm_client_store *st, fvm_diag *d);

/* How many clients have a state (*clients) and how many rows the store
 * holds (*rows). */
fvm_status fvm_client_store_count(fvm_client_store *st, int64_t *clients, int64_t *rows, fvm_diag *d);

/* Closes the store (a temporary one is deleted); NULL is a no-op. */
void fvm_client_store_close(fvm_client_store *st);

#endif
