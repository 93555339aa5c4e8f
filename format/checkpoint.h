/* checkpoint.h - a training run's server state saved after a round, and found again to resume.
 *
 * A checkpoint is DIR/round-NNNNNN.safetensors (the round zero-padded to at
 * least 6 digits: round-000003, round-999999, round-1000000), the state as
 * safetensors tensors named by their paths (safetensors.h), with string
 * metadata fedvm.round, fedvm.seed, fedvm.clients_per_round, fedvm.program,
 * fedvm.state (the state's type) and, for a program with hyperparameters,
 * fedvm.hparams (their values, one line of JSON) and, for a program that
 * keeps client state, fedvm.client_state (its type; the states themselves
 * are in DIR/client_states.sqlite, client_store.h), written atomically. Every checkpoint
 * is kept. Other names in DIR (round-3.safetensors, round-0000003...) are
 * not checkpoints and are left alone. */
#ifndef FVM_CHECKPOINT_H
#define FVM_CHECKPOINT_H

#include "../vm/ir/types.h"
#include "../vm/ir/value.h"

/* What a run's checkpoints must agree on to be resumed. */
typedef struct fvm_run_info {
    uint64_t seed;
    int64_t clients_per_round; /* -1: no client data */
    const char *program; /* the program file's base name */
    const char *hparams; /* the hyperparameters' values as one line of JSON ({"lr": 0.1}), or NULL: none */
    const char *client_state; /* the clients' state type C (initialize_client's), or NULL: none */
} fvm_run_info;

/* The round of a checkpoint's file name (no directory), or -1 for any name
 * that is not exactly one fvm_checkpoint_save writes. */
FVM_API int64_t fvm_checkpoint_round(const char *name);

/* Saves the state after 'round' (creating dir when missing). */
FVM_API fvm_status fvm_checkpoint_save(const char *dir, int64_t round, const fvm_value *state, const fvm_type *t,
                                       const fvm_run_info *run, fvm_diag *d);

/* The last checkpoint of dir (the highest round): its state, of type t (a
 * new value), and its round. The checkpoint's seed, clients per round and
 * state type must be run's (an error explaining the difference otherwise:
 * resuming with other settings would not continue the same run), and its
 * fedvm.round its name's; so must its hyperparameters. A directory without checkpoints is FVM_ERR_IO.
 * The stale temporaries of saves cut short (atomic.h) are removed first. */
FVM_API fvm_status fvm_checkpoint_last(const char *dir, const fvm_type *t, const fvm_run_info *run, int64_t *round,
                                       fvm_value **state, fvm_diag *d);

/* Refuses an input file (what: "--init FILE") that is one of dir's
 * checkpoints of rounds first..last, which a run saving those rounds into
 * dir would overwrite (the same file: device and inode). FVM_ERR_USAGE. */
FVM_API fvm_status fvm_checkpoint_not_input(const char *dir, int64_t first, int64_t last, const char *path,
                                            const char *what, fvm_diag *d);

#endif
