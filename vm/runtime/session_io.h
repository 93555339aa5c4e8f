/* session_io.h - what a training session reads and writes, as an interface the runtime defines: its data binder, checkpoint store, metrics sink and clients' store (internal; format/session_files.c implements it and wires it under fvm_session_new).
 *
 * The session (session.c) decides what happens when and on which process;
 * the implementation turns files into values and values into files. Every
 * function takes the object open returned as its first argument and reports
 * errors in d, located in the file or option they concern. */
#ifndef FVM_SESSION_IO_H
#define FVM_SESSION_IO_H

#include "session.h"

typedef struct fvm_session_io_i {
    /* Makes the object for a session of p with options o (both borrowed for
     * the session's life; o has its defaults filled in). */
    fvm_status (*open)(const fvm_program *p, const fvm_session_opts *o, void **out, fvm_diag *d);
    /* Frees it (closing what it holds open); NULL is a no-op. */
    void (*free)(void *io);

    /* ---- the data binder ---- */
    /* Binds the parameters after the state of next, and of evaluate (NULL:
     * none), from o->args by name: *next_args and *eval_args, one value per
     * parameter (fvm_values_free), the keys and client states left NULL for
     * the round to set; *population, -1 or o->clients, is set from (or
     * checked against) next's client data, *eval_population from
     * evaluate's. An argument neither takes is an error. */
    fvm_status (*bind)(void *io, const fvm_func *next, const fvm_func *evaluate, fvm_value ***next_args,
                       int64_t *population, fvm_value ***eval_args, int64_t *eval_population, fvm_diag *d);
    /* The clients of o->client_ids (given): ids of the dataset bound to
     * next's first client-data parameter, else indices of the population;
     * increasing and distinct, *out malloc'd. */
    fvm_status (*client_ids)(void *io, const fvm_func *next, int64_t population, int64_t **out, int64_t *n,
                             fvm_diag *d);

    /* ---- the checkpoint store ---- */
    /* What checkpoints record of the run besides o's seed and program:
     * clients per round (-1: no client data) and the clients' state type
     * (NULL: none); before the calls below. */
    fvm_status (*describe)(void *io, int64_t clients_per_round, const fvm_type *client_state, fvm_diag *d);
    /* The last checkpoint of o->resume: its round and state, of type t (a new value). */
    fvm_status (*resume)(void *io, const fvm_type *t, int64_t *round, fvm_value **state, fvm_diag *d);
    /* Lays o->init's tensors over *state (of type t), counting them in
     * *replaced; an init file that is a checkpoint rounds first..last would
     * overwrite is an error. */
    fvm_status (*init_weights)(void *io, int64_t first, int64_t last, const fvm_type *t, fvm_value **state,
                               int *replaced, fvm_diag *d);
    /* Saves the state after round (of type t) into o->checkpoint_dir. */
    fvm_status (*save)(void *io, int64_t round, const fvm_value *state, const fvm_type *t, fvm_diag *d);

    /* ---- the metrics sink (process 0; nothing without o->metrics) ---- */
    /* Cuts o->metrics back for a run resumed after round last. */
    fvm_status (*metrics_cut)(void *io, int64_t last, fvm_diag *d);
    /* Opens o->metrics to append, writing the run's header line when header. */
    fvm_status (*metrics_open)(void *io, bool header, fvm_diag *d);
    /* Appends a round's line, synced to the disk when sync. */
    fvm_status (*metrics_line)(void *io, const fvm_metrics_round *fig, bool sync, fvm_diag *d);
    /* Closes it, reporting a failed write; closed or never opened: FVM_OK. */
    fvm_status (*metrics_close)(void *io, fvm_diag *d);

    /* ---- the clients' store (a program with initialize_client) ---- */
    /* Opens the store of states of type c beside the checkpoints (own:
     * process 0 with o->checkpoint_dir) or a temporary one; a resumed run
     * starts from o->resume's states as of round checkpointed, a new one
     * from none. */
    fvm_status (*states_open)(void *io, const fvm_type *c, bool own, int64_t checkpointed, fvm_diag *d);
    /* rounds.h's fvm_client_states get, has and put over the store. */
    fvm_status (*states_get)(void *io, int64_t client, fvm_value **out, fvm_diag *d);
    fvm_status (*states_has)(void *io, int64_t client, bool *has, fvm_diag *d);
    fvm_status (*states_put)(void *io, int64_t round, int64_t n, const int64_t *clients, fvm_value *const *states,
                             fvm_diag *d);
    /* After the checkpoint of round: the older states of its clients[0..n)
     * are no longer needed. */
    fvm_status (*states_prune)(void *io, int64_t round, int64_t n, const int64_t *clients, fvm_diag *d);
} fvm_session_io_i;

/* fvm_session_new with its files read and written through io (borrowed;
 * static). */
fvm_status fvm_session_new_io(const fvm_program *p, const fvm_session_opts *o, const fvm_session_io_i *io,
                              fvm_session **out, fvm_diag *d);

#endif
