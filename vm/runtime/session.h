/* session.h - a training session: an iterative process (initialize, next, evaluate) run round after round, with its data, client sampling, metrics file, checkpoints and resume.
 *
 * Everything 'fedvm run' does with a program that has initialize and next
 * (and no main) goes through a session:
 *
 *   fvm_session_new    checks the options against the program and makes the VM;
 *   fvm_session_start  binds the data (next's and evaluate's parameters by
 *                      name), reads the fixed client ids, resumes from the
 *                      last checkpoint or runs initialize (and lays the init
 *                      weights over the state), opens the metrics file;
 *   fvm_session_step   runs the next round (rounds.h), evaluates when it is
 *                      time, tells the progress callback, appends the round's
 *                      line to the metrics file (format/metrics.h) and saves a
 *                      checkpoint when it is time (format/checkpoint.h);
 *   fvm_session_run    starts when not started and steps to the last round.
 *
 * The state, the latest metrics and evaluation can be read between rounds.
 * A round's results are a pure function of the program, the data, the seed
 * and the round, so a session resumed from a checkpoint ends with the bits
 * of one never stopped. With a distributed backend every process runs the
 * session; process 0 alone calls the progress callback and writes the
 * metrics file and checkpoints, and the steps that read or write files end
 * with every process agreeing whether they failed. The library never
 * prints: progress goes to the callback, errors to the diag. */
#ifndef FVM_SESSION_H
#define FVM_SESSION_H

#include "../exec/backend.h"
#include "../exec/interp.h"
#include "figures.h"
#include "named_text.h"

typedef struct fvm_session fvm_session;

/* What the progress callback is told. */
typedef enum fvm_session_event_kind {
    FVM_SESSION_RESUMED, /* the state was read from the checkpoint of round e->round */
    FVM_SESSION_INIT, /* the init weights replaced e->replaced tensors of the initial state */
    FVM_SESSION_ROUND, /* round e->round ran: e->figures */
} fvm_session_event_kind;

typedef struct fvm_session_event {
    fvm_session_event_kind kind;
    int64_t round;
    int64_t first, last; /* the first round this session runs, and the run's last */
    int replaced; /* FVM_SESSION_INIT */
    /* FVM_SESSION_ROUND: the round's figures as the metrics file gets them
     * (fvm_metrics_line; borrowed for the call); the state is
     * fvm_session_state's. */
    const fvm_metrics_round *figures;
} fvm_session_event;

/* Called with each event on process 0; an error it returns (with its
 * diagnostic in d) stops the session with that error, before a round's
 * metrics line and checkpoint are written. */
typedef fvm_status (*fvm_session_progress_fn)(void *user, const fvm_session_event *e, fvm_diag *d);

/* A session's options (strings and arrays borrowed: they must outlive the
 * session). Zero for a field means its default. */
typedef struct fvm_session_opts {
    const char *program; /* the program's file name, for messages; its base name is
                                  recorded in checkpoints (default "program") */
    const fvm_named_text *args; /* nargs values or datasets (named_text.h, format/bind.h) for next's and
                                  evaluate's parameters after the state, by name */
    int nargs;
    bool has_clients; /* clients is given: */
    int64_t clients; /* the number of clients when no client data is bound
                                  (checked against the data's when some is) */
    uint64_t seed; /* keys and client sampling (sample.h) */
    int64_t rounds; /* the run's last round (0: none) */
    int64_t clients_per_round; /* clients drawn each round; 0: every client */
    const char *client_ids; /* NULL, or the clients of every round: ids of the dataset
                                  bound to next's first client data parameter (else
                                  indices), separated by commas or newlines, or "@FILE"
                                  to read them from FILE */
    int64_t eval_every; /* evaluate after every eval_every-th round too (0: after
                                  the last round only); evaluate runs when every one of
                                  its parameters is given */
    const char *metrics; /* NULL, or a file each round's line is appended to */
    const char *checkpoint_dir; /* NULL, or where the state is saved (the resume
                                  directory by default when resuming) */
    int64_t checkpoint_every; /* save after every N-th round (0: 1) and after the last */
    const char *resume; /* NULL, or a checkpoint directory to continue from */
    const char *init; /* NULL, or a safetensors file laid over the initial state */
    fvm_backend *backend; /* NULL: the sequential backend; borrowed */
    const fvm_kernels *kernels; /* what computes the ops (vm/kernels/provider.h); NULL: the cpu kernels */
    int64_t max_steps; /* bounds on the VM (interp.h's fvm_vm_config); 0: none */
    double time_limit;
    struct fvm_data_cache *data_cache; /* NULL, or where datasets are bound through, shared with other
                                          sessions (format/data_bind.h; it must outlive the session) */
    fvm_session_progress_fn progress; /* optional */
    void *user; /* progress's first argument */
} fvm_session_opts;

/* A session of the checked program p (borrowed: it must outlive the
 * session) with options o (copied; its strings borrowed). Nothing is read
 * yet. FVM_ERR_USAGE when p is not an iterative process (initialize and
 * next), when some of evaluate's parameters are given but not all, for
 * eval_every without evaluate's data, for both resume and init; *out
 * (free with fvm_session_free) is NULL on error. */
FVM_API fvm_status fvm_session_new(const fvm_program *p, const fvm_session_opts *o, fvm_session **out, fvm_diag *d);

/* Reads what the session starts from (see above); FVM_SESSION_RESUMED or
 * FVM_SESSION_INIT are reported. Errors name the option, file or
 * parameter: a value that does not bind (located in its text or file), an
 * argument no parameter takes, an unknown client id, more clients per round
 * than clients, a checkpoint of another seed, clients per round or state
 * type. Called by fvm_session_step and fvm_session_run when not called
 * before; once. */
FVM_API fvm_status fvm_session_start(fvm_session *s, fvm_diag *d);

/* Runs the next round, if any is left (see above). After the last round
 * the metrics file is closed. */
FVM_API fvm_status fvm_session_step(fvm_session *s, fvm_diag *d);

/* Runs every round left (starting the session when it was not started),
 * then closes the metrics file. */
FVM_API fvm_status fvm_session_run(fvm_session *s, fvm_diag *d);

/* After an error, the session only answers questions: step and run return
 * FVM_ERR_USAGE. */

/* Whether every round has run. */
FVM_API bool fvm_session_done(const fvm_session *s);

/* The last round whose state the session holds: 0 after initialize, the
 * checkpoint's round after a resume; -1 before fvm_session_start. */
FVM_API int64_t fvm_session_round(const fvm_session *s);

/* The first round this session runs (1, or the one after the resumed checkpoint's). */
FVM_API int64_t fvm_session_first(const fvm_session *s);

/* The state after fvm_session_round (NULL before the start), of type *type
 * (the state's, S@SERVER); borrowed until the next step. */
FVM_API const fvm_value *fvm_session_state(const fvm_session *s, const fvm_type **type);

/* The latest round's metrics (train) or the latest evaluation's (eval) of
 * this session, NULL when there is none yet; borrowed until the next step. */
FVM_API const fvm_value *fvm_session_train(const fvm_session *s, const fvm_type **type);
FVM_API const fvm_value *fvm_session_eval(const fvm_session *s, const fvm_type **type);

/* A scalar of the latest metrics by its name in a metrics file:
 * "train.loss", "eval.accuracy" (a field of the metrics struct holding one
 * number); NAN when there is no such number yet. */
FVM_API double fvm_session_metric(const fvm_session *s, const char *name);

/* Frees the session (closing the metrics file); NULL is a no-op. */
FVM_API void fvm_session_free(fvm_session *s);

#endif
