/* session.c - a training session: options checked, inputs read, resume or initialize, rounds with their metrics lines and checkpoints, on which process and in which order (see session.h); the files themselves through session_io.h. */
#include "session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/keys.h"
#include "privacy.h"
#include "rounds.h"
#include "session_io.h"

typedef enum { SESSION_NEW, SESSION_STARTED, SESSION_FAILED } session_phase;

struct fvm_session {
    const fvm_program *p;
    fvm_session_opts o; /* the caller's, with the defaults filled in */
    const fvm_func *init, *next;
    const fvm_func *evaluate; /* NULL: no evaluation (no function, or none of its data) */
    fvm_backend *backend; /* o.backend, or own_backend */
    fvm_backend *own_backend; /* the sequential backend when o.backend is NULL (owned) */
    fvm_vm *vm; /* owned */
    const fvm_session_io_i *io_i; /* the files (session_io.h) */
    void *io; /* io_i's object (owned) */
    session_phase phase;
    /* what fvm_session_start reads (owned) */
    fvm_value **next_args, **eval_args;
    int64_t *fixed, nfixed; /* the fixed clients (malloc'd), or NULL */
    int64_t population, eval_population, per_round;
    bool sampled; /* clients are drawn: the metrics lines list them */
    bool dp; /* the program declares "privacy": the lines give epsilon and delta */
    double dp_q; /* the accountant's sampling probability: per_round / population */
    int64_t first; /* the first round this session runs */
    int64_t round; /* the state's round; -1 before the start */
    fvm_value *state; /* the state after 'round' */
    fvm_value *train, *eval; /* the latest metrics and evaluation, or NULL */
    fvm_rounds rounds;
    /* a program with initialize_client: the clients' states */
    const fvm_func *init_client; /* NULL: none */
    bool has_store; /* the clients' store is open */
    fvm_client_states cs; /* what the rounds use, over the io's store */
};

/* ---- options ------------------------------------------------------------------- */

/* Is every parameter of f after the state given (or a key)? Sets *any when
 * some argument names one of them. */
static bool all_given(const fvm_func *f, const fvm_session_opts *o, bool *any)
{
    bool all = true;
    *any = false;
    for (int i = 1; i < f->nparams; i++) {
        bool given = false;
        for (int k = 0; k < o->nargs; k++)
            given = given || !strcmp(o->args[k].name, f->param_names[i]);
        bool key = fvm_given_param(f->param_names[i], f->param_types[i]) != FVM_GIVEN_NONE;
        *any = *any || given;
        all = all && (given || key);
    }
    return all;
}

/* evaluate, when the session runs it (*eval; NULL without evaluation data),
 * or FVM_ERR_USAGE: part of its data given, or eval_every without it. */
static fvm_status pick_evaluate(const fvm_program *p, const fvm_session_opts *o, const fvm_func **eval, fvm_diag *d)
{
    const fvm_func *f = fvm_program_func(p, "evaluate");
    bool any = false;
    *eval = NULL;
    if (!f && o->eval_every)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--eval-every: %s has no function 'evaluate'", o->program);
    if (!f || all_given(f, o, &any)) {
        *eval = f;
        return FVM_OK;
    }
    if (!any && !o->eval_every)
        return FVM_OK; /* no evaluation data: training only */
    char msg[1024];
    size_t n = (size_t)snprintf(msg, sizeof msg, "evaluate needs every one of its parameters after the state; give");
    for (int i = 1; i < f->nparams && n < sizeof msg; i++)
        n += (size_t)snprintf(msg + n, sizeof msg - n, " --data/--arg %s=...", f->param_names[i]);
    return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "%s", msg);
}

fvm_status fvm_session_new_io(const fvm_program *p, const fvm_session_opts *o, const fvm_session_io_i *io,
                              fvm_session **out, fvm_diag *d)
{
    *out = NULL;
    fvm_session_opts so = *o;
    if (!so.program)
        so.program = "program";
    const fvm_func *init = fvm_program_func(p, "initialize"), *next = fvm_program_func(p, "next");
    if (!init || !next || !init->ok || !next->ok)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "%s is not a checked iterative process (with 'initialize' and 'next')", so.program);
    if (so.nargs < 0 || (so.nargs && !so.args) || so.rounds < 0 || so.clients_per_round < 0 || so.eval_every < 0 ||
        so.checkpoint_every < 0 || so.max_steps < 0 || (so.has_clients && so.clients < 0))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a training session's counts must be >= 0");
    if (so.resume && so.init)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--resume continues a run; --init starts one: give one of them");
    const fvm_func *eval = NULL;
    fvm_status s = pick_evaluate(p, &so, &eval, d);
    if (s)
        return s;
    if (so.resume && !so.checkpoint_dir)
        so.checkpoint_dir = so.resume;
    if (!so.checkpoint_every)
        so.checkpoint_every = 1;
    fvm_session *ss = calloc(1, sizeof *ss);
    if (!ss)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    *ss = (fvm_session){.p = p,
                        .o = so,
                        .init = init,
                        .next = next,
                        .evaluate = eval,
                        .init_client = fvm_program_func(p, "initialize_client"),
                        .backend = so.backend,
                        .io_i = io,
                        .round = -1,
                        .first = 1,
                        .population = -1,
                        .eval_population = -1};
    if (!ss->backend && !(ss->backend = ss->own_backend = fvm_backend_seq())) {
        free(ss);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    if ((s = io->open(p, &ss->o, &ss->io, d))) {
        fvm_session_free(ss);
        return s;
    }
    fvm_vm_config cfg = {.nclients = -1,
                         .backend = ss->backend,
                         .kernels = so.kernels,
                         .max_steps = so.max_steps,
                         .time_limit = so.time_limit};
    if ((s = fvm_vm_new(p, &cfg, &ss->vm, d))) {
        fvm_session_free(ss);
        return s;
    }
    *out = ss;
    return FVM_OK;
}

/* ---- the start ----------------------------------------------------------------- */

/* Everything the session reads before its first round: next's and
 * evaluate's data, the fixed clients, the state to resume from. */
static fvm_status read_inputs(fvm_session *ss, fvm_diag *d)
{
    const fvm_session_opts *o = &ss->o;
    ss->population = o->has_clients ? o->clients : -1;
    fvm_status s = ss->io_i->bind(ss->io, ss->next, ss->evaluate, &ss->next_args, &ss->population, &ss->eval_args,
                                  &ss->eval_population, d);
    if (s)
        return s;
    if (ss->population < 0 && (o->clients_per_round || o->client_ids))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "the number of clients is not known: bind client data "
                            "(--data/--arg) or give --clients N");
    if (o->client_ids && (s = ss->io_i->client_ids(ss->io, ss->next, ss->population, &ss->fixed, &ss->nfixed, d)))
        return s;
    ss->per_round = ss->fixed ? ss->nfixed : o->clients_per_round ? o->clients_per_round : ss->population;
    if (ss->per_round > ss->population)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--clients-per-round %lld: the data has %lld clients",
                            (long long)ss->per_round, (long long)ss->population);
    ss->sampled = !ss->fixed && ss->per_round < ss->population;
    if (ss->p->root->privacy) {
        if (ss->population <= 0)
            return fvm_diag_add(d, FVM_ERR_USAGE, &ss->p->root->privacy_z_loc,
                                "privacy accounting needs the number of clients: bind client data "
                                "(--data/--arg) or give --clients N");
        ss->dp = true;
        ss->dp_q = ss->sampled ? (double)ss->per_round / (double)ss->population : 1.0;
    }
    if ((s = ss->io_i->describe(ss->io, ss->population < 0 ? -1 : ss->per_round,
                                ss->init_client ? ss->init_client->result_type : NULL, d)))
        return s;
    if (o->resume) {
        int64_t done = 0;
        if ((s = ss->io_i->resume(ss->io, ss->init->result_type, &done, &ss->state, d)))
            return s;
        ss->first = done + 1;
    }
    return FVM_OK;
}

/* ---- the clients' states ------------------------------------------------------- */

static fvm_status cs_get(void *store, int64_t client, fvm_value **out, fvm_diag *d)
{
    const fvm_session *ss = store;
    return ss->io_i->states_get(ss->io, client, out, d);
}

static fvm_status cs_has(void *store, int64_t client, bool *has, fvm_diag *d)
{
    const fvm_session *ss = store;
    return ss->io_i->states_has(ss->io, client, has, d);
}

static fvm_status cs_put(void *store, int64_t round, int64_t n, const int64_t *clients, fvm_value *const *states,
                         fvm_diag *d)
{
    const fvm_session *ss = store;
    return ss->io_i->states_put(ss->io, round, n, clients, states, d);
}

/* Opens the clients' states (session_io.h's states_open): process 0 keeps
 * them beside the checkpoints, every other process in a store of its own. */
static fvm_status open_client_states(fvm_session *ss, fvm_diag *d)
{
    bool own = ss->o.checkpoint_dir && ss->backend->rank == 0;
    fvm_status s = ss->io_i->states_open(ss->io, ss->init_client->result_type, own, ss->first - 1, d);
    if (s)
        return s;
    ss->has_store = true;
    ss->cs = (fvm_client_states){.init = ss->init_client, .store = ss, .get = cs_get, .has = cs_has, .put = cs_put};
    return FVM_OK;
}

/* Tells the progress callback, on process 0. */
static fvm_status tell(fvm_session *ss, fvm_session_event e, fvm_diag *d)
{
    if (!ss->o.progress || ss->backend->rank)
        return FVM_OK;
    e.first = ss->first;
    e.last = ss->o.rounds;
    return ss->o.progress(ss->o.user, &e, d);
}

/* The start after the inputs: the initial state (initialize, or the resumed
 * one, and the init weights), the metrics file (process 0). */
static fvm_status begin(fvm_session *ss, fvm_diag *d)
{
    const fvm_session_opts *o = &ss->o;
    bool writer = ss->backend->rank == 0;
    fvm_status s = FVM_OK;
    if (o->resume) {
        if (writer && (s = ss->io_i->metrics_cut(ss->io, ss->first - 1, d)))
            return s;
        if ((s = tell(ss, (fvm_session_event){.kind = FVM_SESSION_RESUMED, .round = ss->first - 1}, d)))
            return s;
    } else if ((s = fvm_rounds_initialize(ss->vm, ss->init, o->seed, &ss->state, d))) {
        return s;
    }
    if (o->init) {
        int replaced = 0;
        if ((s = ss->io_i->init_weights(ss->io, ss->first, o->rounds, ss->init->result_type, &ss->state, &replaced, d)))
            return s;
        if ((s = tell(ss, (fvm_session_event){.kind = FVM_SESSION_INIT, .replaced = replaced}, d)))
            return s;
    }
    return writer ? ss->io_i->metrics_open(ss->io, !o->resume, d) : FVM_OK;
}

/* ---- rounds -------------------------------------------------------------------- */

/* After the checkpoint of a round (every process, once all have it): the
 * round's clients' older states are no longer needed. */
static fvm_status forget_states(fvm_session *ss, bool checkpoint, const fvm_metrics_round *fig, fvm_status s,
                                fvm_diag *d)
{
    if (s || !checkpoint || !ss->has_store)
        return s;
    return fvm_backend_agree(ss->backend, ss->io_i->states_prune(ss->io, fig->round, fig->nclients, fig->clients, d),
                             d);
}

/* After each round (rounds.h): the round's state and figures kept, then on
 * process 0 the progress callback, the metrics line (synced before a
 * checkpoint) and the checkpoint; every process learns whether they failed. */
static fvm_status report_round(void *user, const fvm_round_report *r, fvm_diag *d)
{
    fvm_session *ss = user;
    const fvm_session_opts *o = &ss->o;
    fvm_metrics_round fig = r->figures;
    fvm_value_release(ss->state);
    ss->state = fvm_value_retain(r->state);
    ss->round = fig.round;
    fvm_value_release(ss->train);
    ss->train = fvm_value_retain((fvm_value *)fig.train);
    if (fig.eval) {
        fvm_value_release(ss->eval);
        ss->eval = fvm_value_retain((fvm_value *)fig.eval);
    }
    bool checkpoint = o->checkpoint_dir && (fig.round % o->checkpoint_every == 0 || fig.round == r->last);
    if (ss->backend->rank) /* process 0 writes; every process learns whether it could */
        return forget_states(ss, checkpoint, &fig, fvm_backend_agree(ss->backend, FVM_OK, d), d);
    if (ss->sampled)
        fig.fields |= FVM_METRICS_SAMPLED;
    if (ss->dp) {
        const fvm_module *m = ss->p->root;
        fig.fields |= FVM_METRICS_PRIVACY;
        fig.delta = m->privacy_delta;
        fvm_status ps = fvm_privacy_epsilon(ss->dp_q, m->privacy_z, fig.round, fig.delta, &fig.epsilon, NULL, d);
        if (ps)
            return forget_states(ss, false, &fig, fvm_backend_agree(ss->backend, ps, d), d);
    }
    fvm_status s = tell(ss, (fvm_session_event){.kind = FVM_SESSION_ROUND, .round = fig.round, .figures = &fig}, d);
    if (s == FVM_OK)
        s = ss->io_i->metrics_line(ss->io, &fig, checkpoint, d);
    /* The checkpoint after the round's metrics line (synced first): a run
     * stopped between the two resumes from the previous checkpoint and drops
     * the later line (fvm_metrics_cut), so every round keeps exactly one line. */
    if (s == FVM_OK && checkpoint)
        s = ss->io_i->save(ss->io, fig.round, r->state, ss->init->result_type, d);
    return forget_states(ss, checkpoint, &fig, fvm_backend_agree(ss->backend, s, d), d);
}

fvm_status fvm_session_start(fvm_session *ss, fvm_diag *d)
{
    if (ss->phase != SESSION_NEW)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "the training session has started already");
    fvm_status s = fvm_backend_agree(ss->backend, read_inputs(ss, d), d);
    /* process 0 rewinds the resumed states in place before the others copy them */
    if (s == FVM_OK && ss->init_client)
        s = fvm_backend_agree(ss->backend, ss->backend->rank ? FVM_OK : open_client_states(ss, d), d);
    if (s == FVM_OK && ss->init_client)
        s = fvm_backend_agree(ss->backend, ss->backend->rank ? open_client_states(ss, d) : FVM_OK, d);
    if (s == FVM_OK)
        s = fvm_backend_agree(ss->backend, begin(ss, d), d);
    if (s) {
        ss->phase = SESSION_FAILED;
        return s;
    }
    ss->round = ss->first - 1;
    ss->rounds = (fvm_rounds){
        .vm = ss->vm,
        .next = ss->next,
        .evaluate = ss->evaluate,
        .next_args = ss->next_args,
        .eval_args = ss->eval_args,
        .eval_population = ss->eval_population,
        .population = ss->population,
        .per_round = ss->per_round,
        .fixed = ss->fixed,
        .seed = ss->o.seed,
        .last = ss->o.rounds,
        .eval_every = ss->o.eval_every,
        .states = ss->init_client ? &ss->cs : NULL,
        .report = report_round,
        .user = ss,
    };
    ss->phase = SESSION_STARTED;
    return FVM_OK;
}

/* The session stops at an error. */
static fvm_status failed(fvm_session *ss, fvm_status s)
{
    ss->phase = SESSION_FAILED;
    return s;
}

fvm_status fvm_session_step(fvm_session *ss, fvm_diag *d)
{
    fvm_status s;
    if (ss->phase == SESSION_FAILED)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "the training session stopped at an error");
    if (ss->phase == SESSION_NEW && (s = fvm_session_start(ss, d)))
        return s;
    if (fvm_session_done(ss))
        return FVM_OK;
    fvm_value *state = NULL;
    /* the report keeps the new state */
    if ((s = fvm_rounds_step(&ss->rounds, ss->round + 1, ss->state, &state, d)))
        return failed(ss, s);
    fvm_value_release(state);
    if (fvm_session_done(ss) && (s = ss->io_i->metrics_close(ss->io, d)))
        return failed(ss, s);
    return FVM_OK;
}

fvm_status fvm_session_run(fvm_session *ss, fvm_diag *d)
{
    fvm_status s;
    if (ss->phase == SESSION_NEW && (s = fvm_session_start(ss, d)))
        return s;
    do {
        if ((s = fvm_session_step(ss, d)))
            return s;
    } while (!fvm_session_done(ss));
    if ((s = ss->io_i->metrics_close(ss->io, d)))
        return failed(ss, s);
    return FVM_OK;
}

/* ---- questions ------------------------------------------------------------------- */

bool fvm_session_done(const fvm_session *ss)
{
    return ss->phase != SESSION_NEW && ss->round >= ss->o.rounds;
}

int64_t fvm_session_round(const fvm_session *ss)
{
    return ss->round;
}

int64_t fvm_session_first(const fvm_session *ss)
{
    return ss->first;
}

const fvm_value *fvm_session_state(const fvm_session *ss, const fvm_type **type)
{
    if (type)
        *type = ss->init->result_type;
    return ss->state;
}

const fvm_value *fvm_session_train(const fvm_session *ss, const fvm_type **type)
{
    if (type)
        *type = ss->next->result_type->u.strct.elems[1];
    return ss->train;
}

const fvm_value *fvm_session_eval(const fvm_session *ss, const fvm_type **type)
{
    if (type)
        *type = ss->evaluate ? ss->evaluate->result_type : NULL;
    return ss->eval;
}

double fvm_session_metric(const fvm_session *ss, const char *name)
{
    const fvm_type *t = NULL;
    const fvm_value *v = NULL;
    size_t head = strcspn(name, ".");
    if (head == 5 && !strncmp(name, "train", 5))
        v = fvm_session_train(ss, &t);
    else if (head == 4 && !strncmp(name, "eval", 4))
        v = fvm_session_eval(ss, &t);
    /* down the dotted path through structs (placed or not) */
    for (const char *at = name + head; v && t;) {
        if (t->kind == FVM_T_FED)
            t = t->u.fed.member;
        if (!*at)
            break;
        const char *field = at + 1;
        size_t n = strcspn(field, ".");
        char key[256];
        if (t->kind != FVM_T_STRUCT || v->kind != FVM_V_STRUCT || n >= sizeof key)
            return NAN;
        memcpy(key, field, n);
        key[n] = 0;
        int i = fvm_type_field_index(t, key);
        if (i < 0)
            return NAN;
        v = v->items[i];
        t = t->u.strct.elems[i];
        at = field + n;
    }
    if (!v || !t || v->kind != FVM_V_TENSOR || fvm_tensor_count(&v->t) != 1)
        return NAN;
    return fvm_tensor_get_f64(&v->t, 0);
}

void fvm_session_free(fvm_session *ss)
{
    if (!ss)
        return;
    fvm_value_release(ss->state);
    fvm_value_release(ss->train);
    fvm_value_release(ss->eval);
    fvm_values_free(ss->next_args, ss->next->nparams);
    if (ss->evaluate)
        fvm_values_free(ss->eval_args, ss->evaluate->nparams);
    free(ss->fixed);
    if (ss->io_i)
        ss->io_i->free(ss->io);
    fvm_vm_free(ss->vm);
    fvm_backend_free(ss->own_backend);
    free(ss);
}
