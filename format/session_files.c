/* session_files.c - a training session's files: its data bound, client ids read, checkpoints, metrics file and clients' store, behind the runtime's session_io.h; and fvm_session_new, which wires them to the session. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../vm/runtime/session_io.h"
#include "bind.h"
#include "checkpoint.h"
#include "client_store.h"
#include "data_bind.h"
#include "dataset.h"
#include "doc_io.h"
#include "ir_write.h"
#include "metrics.h"
#include "safetensors.h"

/* The name of the clients' states in a checkpoint directory. */
#define CLIENT_STATES_FILE "client_states.sqlite"

typedef struct session_files {
    const fvm_program *p;
    const fvm_session_opts *o; /* the session's (borrowed) */
    fvm_run_info info; /* what checkpoints record */
    fvm_arena arena; /* hparams and its text in info.hparams */
    fvm_doc *hparams; /* the hyperparameters' values (fvm_hparams_doc) */
    FILE *metrics; /* o->metrics, open on process 0 while rounds are left */
    fvm_client_store *store; /* the clients' states, or NULL */
    int64_t checkpointed; /* the round of the last checkpoint (0: none yet) */
} session_files;

static fvm_status files_open(const fvm_program *p, const fvm_session_opts *o, void **out, fvm_diag *d)
{
    session_files *f = calloc(1, sizeof *f);
    if (!f)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    f->p = p;
    f->o = o;
    *out = f;
    return FVM_OK;
}

static void files_free(void *io)
{
    session_files *f = io;
    if (!f)
        return;
    if (f->metrics)
        fclose(f->metrics);
    fvm_client_store_close(f->store);
    fvm_arena_free(&f->arena);
    free(f);
}

/* ---- the data binder ----------------------------------------------------------- */

static fvm_status bind(void *io, const fvm_func *next, const fvm_func *evaluate, fvm_value ***next_args,
                       int64_t *population, fvm_value ***eval_args, int64_t *eval_population, fvm_diag *d)
{
    const fvm_session_opts *o = ((session_files *)io)->o;
    bool *used = calloc((size_t)(o->nargs ? o->nargs : 1), sizeof *used);
    if (!used)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_bind_opts bo = {.first = 1, .seed = o->seed, .leave_keys = true, .used = used, .cache = o->data_cache};
    fvm_status s = fvm_bind_params(next, o->nargs, o->args, &bo, population, next_args, d);
    if (s == FVM_OK && evaluate) {
        fvm_bind_opts be = {.first = 1, .seed = o->seed, .used = used, .cache = o->data_cache};
        s = fvm_bind_params(evaluate, o->nargs, o->args, &be, eval_population, eval_args, d);
    }
    for (int k = 0; k < o->nargs && s == FVM_OK; k++)
        if (!used[k])
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "neither next nor evaluate has a parameter '%s'", o->args[k].name);
    free(used);
    return s;
}

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
static fvm_status fixed_clients(const session_files *f, const char *data_spec, int64_t population, int64_t **out,
                                int64_t *k, fvm_diag *d)
{
    const char *list = f->o->client_ids;
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
        else if (!parse_index(tok, 0, population - 1, &idx))
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

static fvm_status client_ids(void *io, const fvm_func *next, int64_t population, int64_t **out, int64_t *n, fvm_diag *d)
{
    const session_files *f = io;
    const fvm_session_opts *o = f->o;
    /* ids of the dataset bound to next's first client-data parameter */
    const char *spec = NULL;
    for (int k = 0; k < o->nargs && !spec; k++)
        for (int i = 1; i < next->nparams && !spec; i++)
            if (o->args[k].kind == FVM_ARG_DATA && !strcmp(o->args[k].name, next->param_names[i]))
                spec = o->args[k].text;
    return fixed_clients(f, spec, population, out, n, d);
}

/* ---- the checkpoint store ------------------------------------------------------ */

static fvm_status describe(void *io, int64_t clients_per_round, const fvm_type *client_state, fvm_diag *d)
{
    session_files *f = io;
    const fvm_session_opts *o = f->o;
    const char *base = strrchr(o->program, '/');
    f->info = (fvm_run_info){o->seed, clients_per_round, base ? base + 1 : o->program, NULL, NULL};
    if (!(f->hparams = fvm_hparams_doc(&f->arena, f->p)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (f->p->nhparams) {
        char *text = NULL;
        size_t len = 0;
        fvm_status s = fvm_json_write(f->hparams, &text, &len, d);
        if (s)
            return s;
        f->info.hparams = fvm_arena_strndup(&f->arena, text, len - 1); /* without the newline */
        free(text);
        if (!f->info.hparams)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    if (client_state && !(f->info.client_state = fvm_type_str(&f->arena, client_state, false)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    return FVM_OK;
}

static fvm_status resume(void *io, const fvm_type *t, int64_t *round, fvm_value **state, fvm_diag *d)
{
    session_files *f = io;
    return fvm_checkpoint_last(f->o->resume, t, &f->info, round, state, d);
}

static fvm_status init_weights(void *io, int64_t first, int64_t last, const fvm_type *t, fvm_value **state,
                               int *replaced, fvm_diag *d)
{
    const fvm_session_opts *o = ((session_files *)io)->o;
    fvm_status s;
    if (o->checkpoint_dir && (s = fvm_checkpoint_not_input(o->checkpoint_dir, first, last, o->init, "--init FILE", d)))
        return s;
    return fvm_safetensors_overlay_file(o->init, t, state, replaced, d);
}

static fvm_status save(void *io, int64_t round, const fvm_value *state, const fvm_type *t, fvm_diag *d)
{
    session_files *f = io;
    return fvm_checkpoint_save(f->o->checkpoint_dir, round, state, t, &f->info, d);
}

/* ---- the metrics file ---------------------------------------------------------- */

static fvm_status metrics_cut(void *io, int64_t last, fvm_diag *d)
{
    const fvm_session_opts *o = ((session_files *)io)->o;
    return o->metrics ? fvm_metrics_cut(o->metrics, last, d) : FVM_OK;
}

static fvm_status metrics_open(void *io, bool header, fvm_diag *d)
{
    session_files *f = io;
    const fvm_session_opts *o = f->o;
    if (!o->metrics)
        return FVM_OK;
    if (!(f->metrics = fopen(o->metrics, "a")))
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot open the metrics file %s: %s", o->metrics, strerror(errno));
    fvm_status s = FVM_OK;
    if (header) {
        char *line = NULL;
        size_t len = 0;
        if (!(s = fvm_metrics_header(f->info.program, o->seed, f->hparams, &line, &len, d)) &&
            (fwrite(line, 1, len, f->metrics) != len || fflush(f->metrics) != 0))
            s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", o->metrics, strerror(errno));
        free(line);
    }
    return s;
}

static fvm_status metrics_line(void *io, const fvm_metrics_round *fig, bool sync, fvm_diag *d)
{
    session_files *f = io;
    if (!f->metrics)
        return FVM_OK;
    char *line = NULL;
    size_t len = 0;
    fvm_status s = fvm_metrics_line(fig, &line, &len, d);
    if (!s && (fwrite(line, 1, len, f->metrics) != len || fflush(f->metrics) != 0 ||
               (sync && fsync(fileno(f->metrics)) != 0)))
        s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", f->o->metrics, strerror(errno));
    free(line);
    return s;
}

static fvm_status metrics_close(void *io, fvm_diag *d)
{
    session_files *f = io;
    if (!f->metrics)
        return FVM_OK;
    int rc = fclose(f->metrics);
    f->metrics = NULL;
    if (rc != 0)
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", f->o->metrics,
                            strerror(errno));
    return FVM_OK;
}

/* ---- the clients' store -------------------------------------------------------- */

/* "DIR/client_states.sqlite" (malloc'd), or NULL when out of memory. */
static char *states_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof CLIENT_STATES_FILE + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, CLIENT_STATES_FILE);
    return p;
}

/* The clients' states: process 0 keeps them beside the checkpoints (own;
 * or in a temporary store without checkpoints), every other process a
 * temporary store of its own, which it updates as process 0 does (every
 * process has every client's new state after a round). A resumed run
 * starts from the resume directory's states as of its checkpoint. */
static fvm_status states_open(void *io, const fvm_type *c, bool own, int64_t checkpointed, fvm_diag *d)
{
    session_files *f = io;
    const fvm_session_opts *o = f->o;
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
    if ((s = fvm_client_store_open(path, c, own, &f->store, d)))
        goto done;
    struct stat a, b;
    bool same =
        path && from && stat(path, &a) == 0 && stat(from, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    if (from && !same && (s = fvm_client_store_copy_from(f->store, from, d)))
        goto done;
    /* a resumed run forgets the rounds after its checkpoint; a new one, an
     * old run's states in the same directory */
    f->checkpointed = checkpointed;
    s = o->resume ? fvm_client_store_rewind(f->store, checkpointed, d) : fvm_client_store_clear(f->store, d);
done:
    free(path);
    free(from);
    return s;
}

static fvm_status states_get(void *io, int64_t client, fvm_value **out, fvm_diag *d)
{
    return fvm_client_store_get(((session_files *)io)->store, client, out, d);
}

static fvm_status states_has(void *io, int64_t client, bool *has, fvm_diag *d)
{
    return fvm_client_store_has(((session_files *)io)->store, client, has, d);
}

/* A round's states; the rows since the last checkpoint of these clients
 * are no longer needed by any checkpoint. */
static fvm_status states_put(void *io, int64_t round, int64_t n, const int64_t *clients, fvm_value *const *states,
                             fvm_diag *d)
{
    session_files *f = io;
    return fvm_client_store_put(f->store, round, f->checkpointed, n, clients, states, d);
}

static fvm_status states_prune(void *io, int64_t round, int64_t n, const int64_t *clients, fvm_diag *d)
{
    session_files *f = io;
    f->checkpointed = round;
    return fvm_client_store_prune(f->store, round, n, clients, d);
}

/* ---- the wiring ---------------------------------------------------------------- */

static const fvm_session_io_i files_iface = {
    .open = files_open,
    .free = files_free,
    .bind = bind,
    .client_ids = client_ids,
    .describe = describe,
    .resume = resume,
    .init_weights = init_weights,
    .save = save,
    .metrics_cut = metrics_cut,
    .metrics_open = metrics_open,
    .metrics_line = metrics_line,
    .metrics_close = metrics_close,
    .states_open = states_open,
    .states_get = states_get,
    .states_has = states_has,
    .states_put = states_put,
    .states_prune = states_prune,
};

fvm_status fvm_session_new(const fvm_program *p, const fvm_session_opts *o, fvm_session **out, fvm_diag *d)
{
    return fvm_session_new_io(p, o, &files_iface, out, d);
}
