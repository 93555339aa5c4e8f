/* session.c - a training session: options checked, data bound, resume or initialize, rounds with their metrics lines and checkpoints (see session.h). */
#include "session.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../format/checkpoint.h"
#include "../../format/client_store.h"
#include "../../format/data_bind.h"
#include "../../format/dataset.h"
#include "../../format/doc_io.h"
#include "../../format/ir_write.h"
#include "../../format/metrics.h"
#include "../../format/safetensors.h"
#include "../ir/keys.h"
#include "privacy.h"
#include "rounds.h"

typedef enum { SESSION_NEW, SESSION_STARTED, SESSION_FAILED } session_phase;

struct fvm_session {
    const fvm_program *p;
    fvm_session_opts o; /* the caller's, with the defaults filled in */
    const fvm_func *init, *next;
    const fvm_func *evaluate; /* NULL: no evaluation (no function, or none of its data) */
    fvm_backend *backend; /* o.backend, or own_backend */
    fvm_backend *own_backend; /* the sequential backend when o.backend is NULL (owned) */
    fvm_vm *vm; /* owned */
    session_phase phase;
    /* what fvm_session_start reads (owned) */
    fvm_value **next_args, **eval_args;
    int64_t *fixed, nfixed; /* the fixed clients (malloc'd), or NULL */
    int64_t population, eval_population, per_round;
    bool sampled; /* clients are drawn: the metrics lines list them */
    bool dp; /* the program declares "privacy": the lines give epsilon and delta */
    double dp_q; /* the accountant's sampling probability: per_round / population */
    fvm_run_info info; /* what checkpoints record */
    fvm_arena arena; /* hparams and its text in info.hparams */
    fvm_doc *hparams; /* the hyperparameters' values (fvm_hparams_doc) */
    int64_t first; /* the first round this session runs */
    int64_t round; /* the state's round; -1 before the start */
    fvm_value *state; /* the state after 'round' */
    fvm_value *train, *eval; /* the latest metrics and evaluation, or NULL */
    FILE *metrics; /* o.metrics, open on process 0 while rounds are left */
    fvm_rounds rounds;
    /* a program with initialize_client: the clients' states */
    const fvm_func *init_client; /* NULL: none */
    fvm_client_store *store; /* owned */
    fvm_client_states cs; /* what the rounds use, over store */
    int64_t checkpointed; /* the round of the last checkpoint (0: none yet) */
};

/* The name of the clients' states in a checkpoint directory. */
#define CLIENT_STATES_FILE "client_states.sqlite"

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

fvm_status fvm_session_new(const fvm_program *p, const fvm_session_opts *o, fvm_session **out, fvm_diag *d)
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
                        .round = -1,
                        .first = 1,
                        .population = -1,
                        .eval_population = -1};
    if (!ss->backend && !(ss->backend = ss->own_backend = fvm_backend_seq())) {
        free(ss);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
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

/* A client index in [lo, hi], in decimal. */
static bool parse_index(const char *t, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (!*t || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* The clients of o.client_ids: ids of the dataset data_spec (NULL: indices
 * of the population), increasing and distinct. *out malloc'd. */
static fvm_status fixed_clients(const fvm_session *ss, const char *data_spec, int64_t **out, int64_t *k, fvm_diag *d)
{
    const char *list = ss->o.client_ids;
    char *text = NULL;
    size_t len;
    if (list[0] == '@') {
        fvm_status s = fvm_read_file(list + 1, &text, &len, d);
        if (s)
            return s;
    } else if (!(text = strdup(list))) {
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    fvm_dataset *ds = NULL;
    char *file = NULL, *split = NULL, *save = NULL;
    fvm_status s = FVM_OK;
    if (data_spec && !(s = fvm_data_spec(data_spec, &file, &split, d)))
        s = fvm_dataset_open(file, split, &ds, d);
    int64_t n = 0, cap = 16;
    int64_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids && !s)
        s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (char *tok = s ? NULL : strtok_r(text, ",\n\r", &save); tok && !s; tok = strtok_r(NULL, ",\n\r", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t tl = strlen(tok);
        while (tl && (tok[tl - 1] == ' ' || tok[tl - 1] == '\t'))
            tok[--tl] = 0;
        if (!tl)
            continue;
        int64_t idx = -1;
        if (ds)
            idx = fvm_dataset_find(ds, tok, tl);
        else if (!parse_index(tok, 0, ss->population - 1, &idx))
            idx = -1;
        if (idx < 0) {
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--client-ids: no client '%s' in %s", tok,
                             ds ? file : "the data (give indices 0..N-1)");
            break;
        }
        if (n == cap) {
            int64_t *p = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!p) {
                s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
                break;
            }
            ids = p;
        }
        ids[n++] = idx;
    }
    /* increasing, distinct */
    for (int64_t i = 1; i < n && !s; i++)
        for (int64_t j = i; j > 0 && ids[j - 1] >= ids[j]; j--) {
            if (ids[j - 1] == ids[j]) {
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--client-ids: client index %lld is given twice",
                                 (long long)ids[j]);
                break;
            }
            int64_t tmp = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = tmp;
        }
    if (!s && n == 0)
        s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--client-ids lists no client");
    fvm_dataset_close(ds);
    free(file);
    free(split);
    free(text);
    if (s) {
        free(ids);
        return s;
    }
    *out = ids;
    *k = n;
    return FVM_OK;
}

/* Everything the session reads before its first round: next's and
 * evaluate's data, the fixed clients, the state to resume from. */
static fvm_status read_inputs(fvm_session *ss, fvm_diag *d)
{
    const fvm_session_opts *o = &ss->o;
    bool *used = calloc((size_t)(o->nargs ? o->nargs : 1), sizeof *used);
    if (!used)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    ss->population = o->has_clients ? o->clients : -1;
    fvm_bind_opts bo = {.first = 1, .seed = o->seed, .leave_keys = true, .used = used, .cache = o->data_cache};
    fvm_status s = fvm_bind_params(ss->next, o->nargs, o->args, &bo, &ss->population, &ss->next_args, d);
    if (s == FVM_OK && ss->evaluate) {
        fvm_bind_opts be = {.first = 1, .seed = o->seed, .used = used, .cache = o->data_cache};
        s = fvm_bind_params(ss->evaluate, o->nargs, o->args, &be, &ss->eval_population, &ss->eval_args, d);
    }
    for (int k = 0; k < o->nargs && s == FVM_OK; k++)
        if (!used[k])
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "neither next nor evaluate has a parameter '%s'", o->args[k].name);
    free(used);
    if (s)
        return s;
    if (ss->population < 0 && (o->clients_per_round || o->client_ids))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "the number of clients is not known: bind client data "
                            "(--data/--arg) or give --clients N");
    if (o->client_ids) {
        /* ids of the dataset bound to next's first client-data parameter */
        const char *spec = NULL;
        for (int k = 0; k < o->nargs && !spec; k++)
            for (int i = 1; i < ss->next->nparams && !spec; i++)
                if (o->args[k].kind == FVM_ARG_DATA && !strcmp(o->args[k].name, ss->next->param_names[i]))
                    spec = o->args[k].text;
        if ((s = fixed_clients(ss, spec, &ss->fixed, &ss->nfixed, d)))
            return s;
    }
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
    const char *base = strrchr(o->program, '/');
    ss->info =
        (fvm_run_info){o->seed, ss->population < 0 ? -1 : ss->per_round, base ? base + 1 : o->program, NULL, NULL};
    if (!(ss->hparams = fvm_hparams_doc(&ss->arena, ss->p)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (ss->p->nhparams) {
        char *text = NULL;
        size_t len = 0;
        if ((s = fvm_json_write(ss->hparams, &text, &len, d)))
            return s;
        ss->info.hparams = fvm_arena_strndup(&ss->arena, text, len - 1); /* without the newline */
        free(text);
        if (!ss->info.hparams)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    if (ss->init_client && !(ss->info.client_state = fvm_type_str(&ss->arena, ss->init_client->result_type, false)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (o->resume) {
        int64_t done = 0;
        if ((s = fvm_checkpoint_last(o->resume, ss->init->result_type, &ss->info, &done, &ss->state, d)))
            return s;
        ss->first = done + 1;
    }
    return FVM_OK;
}

/* ---- the clients' states ------------------------------------------------------- */

static fvm_status cs_get(void *store, int64_t client, fvm_value **out, fvm_diag *d)
{
    return fvm_client_store_get(((fvm_session *)store)->store, client, out, d);
}

static fvm_status cs_has(void *store, int64_t client, bool *has, fvm_diag *d)
{
    return fvm_client_store_has(((fvm_session *)store)->store, client, has, d);
}

/* A round's states; the rows since the last checkpoint of these clients
 * are no longer needed by any checkpoint. */
static fvm_status cs_put(void *store, int64_t round, int64_t n, const int64_t *clients, fvm_value *const *states,
                         fvm_diag *d)
{
    fvm_session *ss = store;
    return fvm_client_store_put(ss->store, round, ss->checkpointed, n, clients, states, d);
}

/* "DIR/client_states.sqlite" (malloc'd), or NULL when out of memory. */
static char *states_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof CLIENT_STATES_FILE + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, CLIENT_STATES_FILE);
    return p;
}

/* Opens the clients' states: process 0 keeps them beside the checkpoints
 * (or in a temporary store without checkpoints), every other process a
 * temporary store of its own, which it updates as process 0 does (every
 * process has every client's new state after a round). A resumed run
 * starts from the resume directory's states as of its checkpoint. */
static fvm_status open_client_states(fvm_session *ss, fvm_diag *d)
{
    const fvm_session_opts *o = &ss->o;
    const fvm_type *c = ss->init_client->result_type;
    bool own = o->checkpoint_dir && ss->backend->rank == 0;
    char *path = own ? states_path(o->checkpoint_dir) : NULL, *from = o->resume ? states_path(o->resume) : NULL;
    fvm_status s = FVM_OK;
    if ((own && !path) || (o->resume && !from)) {
        s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        goto done;
    }
    if (own && mkdir(o->checkpoint_dir, 0777) != 0 && errno != EEXIST) {
        fvm_loc loc = {.file = o->checkpoint_dir};
        s = fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot create the checkpoint directory: %s", strerror(errno));
        goto done;
    }
    if (from && access(from, F_OK) != 0) {
        fvm_loc loc = {.file = o->resume};
        s = fvm_diag_add(d, FVM_ERR_IO, &loc,
                         "the program keeps client states, but this checkpoint directory has none (%s)",
                         CLIENT_STATES_FILE);
        goto done;
    }
    if ((s = fvm_client_store_open(path, c, own, &ss->store, d)))
        goto done;
    struct stat a, b;
    bool same =
        path && from && stat(path, &a) == 0 && stat(from, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    if (from && !same && (s = fvm_client_store_copy_from(ss->store, from, d)))
        goto done;
    /* a resumed run forgets the rounds after its checkpoint; a new one, an
     * old run's states in the same directory */
    ss->checkpointed = ss->first - 1;
    if ((s = o->resume ? fvm_client_store_rewind(ss->store, ss->checkpointed, d)
                       : fvm_client_store_clear(ss->store, d)))
        goto done;
    ss->cs = (fvm_client_states){.init = ss->init_client, .store = ss, .get = cs_get, .has = cs_has, .put = cs_put};
done:
    free(path);
    free(from);
    return s;
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
        if (writer && o->metrics && (s = fvm_metrics_cut(o->metrics, ss->first - 1, d)))
            return s;
        if ((s = tell(ss, (fvm_session_event){.kind = FVM_SESSION_RESUMED, .round = ss->first - 1}, d)))
            return s;
    } else if ((s = fvm_rounds_initialize(ss->vm, ss->init, o->seed, &ss->state, d))) {
        return s;
    }
    if (o->init) {
        int replaced = 0;
        if (o->checkpoint_dir &&
            (s = fvm_checkpoint_not_input(o->checkpoint_dir, ss->first, o->rounds, o->init, "--init FILE", d)))
            return s;
        if ((s = fvm_safetensors_overlay_file(o->init, ss->init->result_type, &ss->state, &replaced, d)))
            return s;
        if ((s = tell(ss, (fvm_session_event){.kind = FVM_SESSION_INIT, .replaced = replaced}, d)))
            return s;
    }
    if (writer && o->metrics && !(ss->metrics = fopen(o->metrics, "a")))
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot open the metrics file %s: %s", o->metrics, strerror(errno));
    if (ss->metrics && !o->resume) {
        char *line = NULL;
        size_t len = 0;
        if (!(s = fvm_metrics_header(ss->info.program, o->seed, ss->hparams, &line, &len, d)) &&
            (fwrite(line, 1, len, ss->metrics) != len || fflush(ss->metrics) != 0))
            s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", o->metrics, strerror(errno));
        free(line);
    }
    return s;
}

/* ---- rounds -------------------------------------------------------------------- */

/* After the checkpoint of a round (every process, once all have it): the
 * round's clients' older states are no longer needed. */
static fvm_status forget_states(fvm_session *ss, bool checkpoint, const fvm_metrics_round *fig, fvm_status s,
                                fvm_diag *d)
{
    if (s || !checkpoint || !ss->store)
        return s;
    ss->checkpointed = fig->round;
    return fvm_backend_agree(ss->backend, fvm_client_store_prune(ss->store, fig->round, fig->nclients, fig->clients, d),
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
    if (s == FVM_OK && ss->metrics) {
        char *line = NULL;
        size_t len = 0;
        if (!(s = fvm_metrics_line(&fig, &line, &len, d)) &&
            (fwrite(line, 1, len, ss->metrics) != len || fflush(ss->metrics) != 0 ||
             (checkpoint && fsync(fileno(ss->metrics)) != 0)))
            s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", o->metrics, strerror(errno));
        free(line);
    }
    /* The checkpoint after the round's metrics line (synced first): a run
     * stopped between the two resumes from the previous checkpoint and drops
     * the later line (fvm_metrics_cut), so every round keeps exactly one line. */
    if (s == FVM_OK && checkpoint)
        s = fvm_checkpoint_save(o->checkpoint_dir, fig.round, r->state, ss->init->result_type, &ss->info, d);
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

/* Closes the metrics file, reporting a failed write. */
static fvm_status close_metrics(fvm_session *ss, fvm_diag *d)
{
    if (!ss->metrics)
        return FVM_OK;
    int rc = fclose(ss->metrics);
    ss->metrics = NULL;
    if (rc != 0)
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", ss->o.metrics,
                            strerror(errno));
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
    if (fvm_session_done(ss) && (s = close_metrics(ss, d)))
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
    if ((s = close_metrics(ss, d)))
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
    if (ss->metrics)
        fclose(ss->metrics);
    fvm_value_release(ss->state);
    fvm_value_release(ss->train);
    fvm_value_release(ss->eval);
    fvm_values_free(ss->next_args, ss->next->nparams);
    if (ss->evaluate)
        fvm_values_free(ss->eval_args, ss->evaluate->nparams);
    free(ss->fixed);
    fvm_client_store_close(ss->store);
    fvm_arena_free(&ss->arena);
    fvm_vm_free(ss->vm);
    fvm_backend_free(ss->own_backend);
    free(ss);
}
