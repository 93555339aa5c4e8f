/* xdev_device.c - 'fedvm device': a cross-device plan's client phase run on a device's data, its files read and written (see xdev_run.h; what the round computes: vm/runtime/xdev_phases.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../vm/core/doc.h"
#include "../vm/exec/aggregate.h"
#include "../vm/runtime/sample.h"
#include "../vm/runtime/xdev_phases.h"
#include "data_bind.h"
#include "dataset.h"
#include "doc_io.h"
#include "file.h"
#include "value_doc.h"
#include "xdev_impl.h"
#include "xdev_run.h"

struct fvm_xdev_device {
    const fvm_xdev_plan *plan;
    const char *checkpoint;
    fvm_xdev_client_round cr; /* the round, its broadcast, key and seed, the VM and the data (owned here) */
    int64_t population;
    int64_t *selected, nselected; /* the round's clients, increasing */
    fvm_value **data; /* per input: {T}@CLIENTS (NULL for a key) */
    fvm_dataset *ids; /* the first dataset: client ids */
    char **files; /* the data files, which no output may overwrite (malloc'd) */
    int nfiles;
};

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

/* ---- the broadcast ------------------------------------------------------------- */

static fvm_status read_broadcast(fvm_xdev_device *dev, fvm_diag *d)
{
    const char *path = dev->checkpoint;
    fvm_safetensors *f = NULL;
    int64_t key[2] = {0, 0}, nkey = 0, *k = NULL;
    fvm_status s = xdev_load(path, "broadcast", dev->plan, &f, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_ROUND, 1, UINT32_MAX - 1, &dev->cr.round, d);
    if (s == FVM_OK)
        s = xdev_meta_seed(f, path, &dev->cr.seed, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_POPULATION, 1, FVM_MAX_CLIENTS, &dev->population, d);
    if (s == FVM_OK)
        s = xdev_meta_ints(f, path, XDEV_CLIENTS, 0, dev->population - 1, true, &dev->selected, &dev->nselected, d);
    if (s == FVM_OK && dev->nselected == 0) {
        fvm_loc loc = {.file = path};
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: the round selected no clients", XDEV_CLIENTS);
    }
    if (s == FVM_OK && (s = xdev_meta_ints(f, path, XDEV_KEY, 0, UINT32_MAX, false, &k, &nkey, d)) == FVM_OK &&
        nkey != 2) {
        fvm_loc loc = {.file = path};
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: expected two integers (a key), found %lld", XDEV_KEY,
                         (long long)nkey);
    }
    if (s == FVM_OK) {
        memcpy(key, k, sizeof key);
        dev->cr.key[0] = (uint32_t)key[0];
        dev->cr.key[1] = (uint32_t)key[1];
        const fvm_func *w = dev->plan->ph.work;
        s = fvm_safetensors_value(f, w->param_types[w->nparams - 1], &dev->cr.broadcast, d);
    }
    free(k);
    fvm_safetensors_free(f);
    return s;
}

/* ---- the data ---------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* One data input bound to FILE[:SPLIT]: a dataset, or a JSON/YAML file with
 * one member per client. t is {T}@CLIENTS. */
static fvm_status bind_data(fvm_xdev_device *dev, const char *param, const fvm_type *t, const char *spec,
                            fvm_value **out, fvm_diag *d)
{
    char **fl = realloc(dev->files, ((size_t)dev->nfiles + 1) * sizeof *fl);
    if (!fl)
        return nomem(d);
    dev->files = fl;
    if (ends_with(spec, ".json") || ends_with(spec, ".yaml") || ends_with(spec, ".yml")) {
        if (!(dev->files[dev->nfiles] = strdup(spec)))
            return nomem(d);
        dev->nfiles++;
        fvm_arena a = {0};
        char *text = NULL;
        size_t len = 0;
        fvm_doc *doc = NULL;
        int64_t n = -1;
        /* a regular file (a FIFO would block), within the 2 GiB 'fedvm run --arg NAME=@FILE' reads */
        fvm_status s = fvm_file_read(spec, "a data file", UINT64_C(2) << 30, &text, &len, d);
        if (s == FVM_OK) {
            fvm_doc_src src = {.file = spec, .text = text, .len = len};
            s = fvm_doc_parse(&a, &src, &doc, d);
        }
        if (s == FVM_OK)
            s = fvm_value_from_doc(doc, t, spec, "", &n, out, d);
        free(text);
        fvm_arena_free(&a);
        return s;
    }
    char *file = NULL, *split = NULL;
    fvm_status s = fvm_data_spec(spec, &file, &split, d);
    if (s == FVM_OK && !(dev->files[dev->nfiles] = strdup(file)))
        s = nomem(d);
    else if (s == FVM_OK)
        dev->nfiles++;
    if (s == FVM_OK)
        s = fvm_data_bind(file, split, param, t, out, d);
    if (s == FVM_OK && !dev->ids)
        s = fvm_dataset_open(file, split, &dev->ids, d);
    free(file);
    free(split);
    return s;
}

/* Binds every data input from data[0..ndata) (NAME=SPEC, or SPEC alone for
 * a round with one data input). */
static fvm_status bind_inputs(fvm_xdev_device *dev, int ndata, const char *const *data, fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    const fvm_func *w = pl->ph.work;
    int ndin = 0;
    for (int i = 0; i < pl->ph.ninputs; i++)
        ndin += pl->ph.inputs[i] == XDEV_DATA;
    fvm_status s = FVM_OK;
    for (int k = 0; k < ndata && !s; k++) {
        const char *eq = strchr(data[k], '='), *spec = data[k];
        int i = -1;
        if (eq) {
            for (int j = 0; j < pl->ph.ninputs && i < 0; j++)
                if (pl->ph.inputs[j] == XDEV_DATA && strlen(w->param_names[j]) == (size_t)(eq - data[k]) &&
                    !strncmp(w->param_names[j], data[k], (size_t)(eq - data[k])))
                    i = j;
            spec = eq + 1;
        } else if (ndin == 1) {
            for (int j = 0; j < pl->ph.ninputs; j++)
                if (pl->ph.inputs[j] == XDEV_DATA)
                    i = j;
        }
        if (i < 0) {
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                             eq ? "--data %s: the client phase has no data input of that name"
                                : "--data %s: the client phase has several data inputs; give NAME=FILE",
                             data[k]);
        } else if (dev->data[i]) {
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--data: '%s' is given twice", w->param_names[i]);
        } else {
            const fvm_type *t = fvm_type_fed(&pl->ph.client->arena, w->param_types[i], FVM_PL_CLIENTS, false);
            s = t ? bind_data(dev, w->param_names[i], t, spec, &dev->data[i], d) : nomem(d);
        }
    }
    for (int i = 0; i < pl->ph.ninputs && !s; i++) {
        char buf[256];
        if (pl->ph.inputs[i] == XDEV_DATA && !dev->data[i])
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "missing --data %s=FILE[:SPLIT] (the clients' %s)",
                             w->param_names[i], fvm_type_format(w->param_types[i], true, buf, sizeof buf));
        else if (dev->data[i] && dev->data[i]->n != dev->population)
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                             "--data %s: the data has %lld clients, but round %lld selected its clients from %lld; "
                             "give the data the server sampled from",
                             w->param_names[i], (long long)dev->data[i]->n, (long long)dev->cr.round,
                             (long long)dev->population);
    }
    return s;
}

fvm_status fvm_xdev_device_open(const fvm_xdev_plan *plan, const char *checkpoint, int ndata, const char *const *data,
                                fvm_xdev_device **out, fvm_diag *d)
{
    *out = NULL;
    fvm_xdev_device *dev = calloc(1, sizeof *dev);
    if (!dev || !(dev->data = calloc((size_t)plan->ph.ninputs + 1, sizeof *dev->data))) {
        free(dev);
        return nomem(d);
    }
    dev->plan = plan;
    dev->checkpoint = checkpoint;
    dev->cr.ph = &plan->ph;
    dev->cr.data = dev->data;
    fvm_status s = read_broadcast(dev, d);
    if (s == FVM_OK)
        s = bind_inputs(dev, ndata, data, d);
    if (s == FVM_OK)
        s = fvm_vm_new(plan->ph.client, &(fvm_vm_config){.nclients = -1}, &dev->cr.vm, d);
    if (s) {
        fvm_xdev_device_close(dev);
        return s;
    }
    *out = dev;
    return FVM_OK;
}

int64_t fvm_xdev_device_round(const fvm_xdev_device *dev)
{
    return dev->cr.round;
}

fvm_status fvm_xdev_device_client(const fvm_xdev_device *dev, const char *id, int64_t index, int64_t *out, fvm_diag *d)
{
    if (id) {
        index = dev->ids ? fvm_dataset_find(dev->ids, id, strlen(id)) : -1;
        if (index < 0)
            return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                                dev->ids ? "--client %s: no client of that id in the data"
                                         : "--client %s: the data has no client ids (give --index K)",
                                id);
    } else if (index < 0 || index >= dev->population) {
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--index %lld: the data has clients 0 to %lld", (long long)index,
                            (long long)dev->population - 1);
    }
    if (xdev_position(dev->selected, dev->nselected, index) < 0) {
        fvm_loc loc = {.file = dev->checkpoint};
        return fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                            "client %lld%s%s%s is not one of the %lld clients round %lld selected", (long long)index,
                            id ? " ('" : "", id ? id : "", id ? "')" : "", (long long)dev->nselected,
                            (long long)dev->cr.round);
    }
    *out = index;
    return FVM_OK;
}

/* ---- one client's update ---------------------------------------------------------- */

/* An output (what: the option that named it) must not overwrite the plan,
 * the broadcast or a data file. */
static fvm_status not_input(const fvm_xdev_device *dev, const char *out, const char *what, fvm_diag *d)
{
    const char *in[] = {dev->plan->path, dev->checkpoint};
    const char *role[] = {"the plan", "the broadcast (--checkpoint)"};
    fvm_status s = fvm_file_not_input(out, what, 2, in, role, d);
    for (int k = 0; k < dev->nfiles && !s; k++) {
        const char *data_role = "a data file (--data)";
        s = fvm_file_not_input(out, what, 1, (const char *const *)&dev->files[k], &data_role, d);
    }
    return s;
}

/* The client's id in the (first) dataset, malloc'd, or NULL when the data has no ids. */
static fvm_status client_id(const fvm_xdev_device *dev, int64_t index, char **out, fvm_diag *d)
{
    const void *id = NULL;
    size_t id_len = 0;
    int64_t examples;
    *out = NULL;
    if (!dev->ids)
        return FVM_OK;
    fvm_status s = fvm_dataset_client(dev->ids, index, &id, &id_len, &examples, d);
    if (!s && !(*out = strndup(id, id_len)))
        s = nomem(d);
    return s;
}

/* ---- a client's state ------------------------------------------------------------ */

/* A client's state file (a plan with client state) as a round uses it: the
 * file PATH holds the state after the client's last round; its new state is
 * written first to PATH.pending (complete and synced), then the round's
 * update (or partial), then PATH.pending is renamed to PATH. A pending state
 * of an earlier round than the broadcast's is one whose update was written
 * (the server has gone past that round, which needs every selected client's
 * update) but whose device stopped before the rename: it is the client's
 * state, and is renamed into place first. One of the broadcast's round is a
 * run of this round that stopped: the round is run again from PATH. */
typedef struct client_file {
    const char *path; /* borrowed; NULL when the plan keeps no client state */
    char *pending; /* path.pending (malloc'd) */
    fvm_value *state; /* the state the round starts from */
    bool adopt; /* pending holds it: rename it into place before anything is written */
    bool staged; /* this run wrote pending */
} client_file;

/* Reads a state file of client index at path (*exists false when there is
 * none): of kind client_state, of this client and this run's seed, of type
 * C; *round is the round that made it. */
static fvm_status read_state(const fvm_xdev_device *dev, int64_t index, const char *path, bool *exists, int64_t *round,
                             fvm_value **v, fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    struct stat st;
    *exists = false;
    *v = NULL;
    if (stat(path, &st) != 0 && errno == ENOENT)
        return FVM_OK;
    *exists = true;
    fvm_safetensors *f = NULL;
    fvm_loc loc = {.file = path};
    int64_t c = -1;
    uint64_t seed = 0;
    fvm_status s = xdev_load(path, "client_state", NULL, &f, d);
    if (s == FVM_OK && (s = fvm_safetensors_value(f, pl->ph.client_state, v, d)) != FVM_OK) {
        char buf[256];
        fvm_diag_add(d, s, &loc, "this is not a state of this plan's clients, %s (client.state)",
                     fvm_type_format(pl->ph.client_state, false, buf, sizeof buf));
    }
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_ROUND, 1, UINT32_MAX - 1, round, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_CLIENT, 0, FVM_MAX_CLIENTS - 1, &c, d);
    if (s == FVM_OK && c != index)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "this is the state of client %lld, not of client %lld", (long long)c,
                         (long long)index);
    if (s == FVM_OK)
        s = xdev_meta_seed(f, path, &seed, d);
    if (s == FVM_OK && seed != dev->cr.seed)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this client state is of a run with seed %llu, and the broadcast %s is of seed %llu",
                         (unsigned long long)seed, dev->checkpoint, (unsigned long long)dev->cr.seed);
    fvm_safetensors_free(f);
    if (s) {
        fvm_value_release(*v);
        *v = NULL;
    }
    return s;
}

/* The state client index starts the broadcast's round from (path NULL:
 * none), into cf (state_close releases it). With run, a pending state to
 * adopt is renamed into place; without, it is only read (a check). */
static fvm_status state_open(const fvm_xdev_device *dev, int64_t index, const char *path, bool run, client_file *cf,
                             fvm_diag *d)
{
    *cf = (client_file){.path = path};
    if (!path != !dev->plan->ph.client_state) {
        fvm_loc loc = {.file = dev->plan->path};
        return fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                            path ? "this plan keeps no state on the clients, so client %lld has no state file"
                                 : "this plan keeps a state on each client: client %lld needs its state file",
                            (long long)index);
    }
    if (!path)
        return FVM_OK;
    int64_t r = dev->cr.round, fr = 0, pr = 0;
    bool fe = false, pe = false;
    fvm_value *fv = NULL, *pv = NULL;
    fvm_status s = asprintf(&cf->pending, "%s.pending", path) < 0 ? (cf->pending = NULL, nomem(d)) : FVM_OK;
    if (s == FVM_OK)
        s = read_state(dev, index, path, &fe, &fr, &fv, d);
    xdev_state_from from = XDEV_FROM_FIRST;
    if (s == FVM_OK && fe)
        s = fvm_xdev_state_fits(index, r, path, fr, d);
    if (s == FVM_OK)
        s = read_state(dev, index, cf->pending, &pe, &pr, &pv, d);
    if (s == FVM_OK)
        s = fvm_xdev_state_from(index, r, fe, fr, cf->pending, pe, pr, &from, d);
    if (s == FVM_OK && from == XDEV_FROM_PENDING)
        cf->adopt = true, cf->state = pv, pv = NULL;
    else if (s == FVM_OK && from == XDEV_FROM_FILE)
        cf->state = fv, fv = NULL;
    else if (s == FVM_OK)
        s = fvm_xdev_first_state(&dev->cr, index, &cf->state, d);
    if (s == FVM_OK && run && cf->adopt) {
        s = fvm_atomic_rename(cf->pending, path, d);
        cf->adopt = false;
    }
    fvm_value_release(fv);
    fvm_value_release(pv);
    return s;
}

/* Writes the client's new state (of the broadcast's round) to its pending file. */
static fvm_status state_stage(const fvm_xdev_device *dev, int64_t index, client_file *cf, const fvm_value *next,
                              fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    char round[32], client[32], seed[32], *id_text = NULL;
    const char *type = fvm_type_str(&pl->ph.client->arena, pl->ph.client_state, false);
    snprintf(round, sizeof round, "%lld", (long long)dev->cr.round);
    snprintf(client, sizeof client, "%lld", (long long)index);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)dev->cr.seed);
    fvm_status s = type ? client_id(dev, index, &id_text, d) : nomem(d);
    const char *meta[] = {XDEV_KIND, "client_state",  XDEV_PLAN, pl->id,      XDEV_ROUND, round,          XDEV_SEED,
                          seed,      XDEV_STATE_TYPE, type,      XDEV_CLIENT, client,     XDEV_CLIENT_ID, id_text};
    if (s == FVM_OK)
        s = fvm_safetensors_save(cf->pending, next, pl->ph.client_state, id_text ? 7 : 6, meta, d);
    cf->staged = s == FVM_OK;
    free(id_text);
    return s;
}

/* The new state in place, once the round's file out is written. */
static fvm_status state_commit(client_file *cf, const char *out, fvm_diag *d)
{
    fvm_status s = fvm_atomic_rename(cf->pending, cf->path, d);
    if (s)
        fvm_diag_add(d, s, NULL,
                     "%s is written, and the client's new state is left in %s: the client's next round takes it", out,
                     cf->pending);
    cf->staged = false;
    return s;
}

/* Removes a pending state this run wrote (its round's file could not be written). */
static void state_drop(client_file *cf)
{
    if (cf->staged)
        unlink(cf->pending);
    cf->staged = false;
}

static void state_close(client_file *cf)
{
    fvm_value_release(cf->state);
    free(cf->pending);
    *cf = (client_file){0};
}

fvm_status fvm_xdev_device_check_state(fvm_xdev_device *dev, int64_t index, const char *state, fvm_diag *d)
{
    client_file cf;
    fvm_status s = state_open(dev, index, state, false, &cf, d);
    state_close(&cf);
    return s;
}

fvm_status fvm_xdev_device_update(fvm_xdev_device *dev, int64_t index, const char *out, const char *state, fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    fvm_value *upd = NULL, *next = NULL;
    client_file cf;
    fvm_status s = not_input(dev, out, "the update's file", d);
    if (!s && state) {
        const char *role = "the client's state file (--state)";
        if (!(s = fvm_file_not_input(out, "the update's file", 1, &state, &role, d)))
            s = not_input(dev, state, role, d);
    }
    if (!s)
        s = state_open(dev, index, state, true, &cf, d);
    else
        cf = (client_file){0};
    if (!s)
        s = fvm_xdev_client_update(&dev->cr, index, cf.state, &upd, &next, d);
    char round[32], client[32];
    snprintf(round, sizeof round, "%lld", (long long)dev->cr.round);
    snprintf(client, sizeof client, "%lld", (long long)index);
    char *id_text = NULL;
    if (!s)
        s = client_id(dev, index, &id_text, d);
    const char *meta[] = {XDEV_KIND, "update",    XDEV_PLAN, pl->id,         XDEV_ROUND,
                          round,     XDEV_CLIENT, client,    XDEV_CLIENT_ID, id_text};
    /* the new state beside the state file, then the update, then the state in place: a device stopped
       anywhere leaves its state as it was or the round's new one, never one without its update */
    if (!s && state)
        s = state_stage(dev, index, &cf, next, d);
    if (!s && (s = fvm_safetensors_save(out, upd, pl->ph.sent, id_text ? 5 : 4, meta, d)) != FVM_OK)
        state_drop(&cf);
    if (!s && state)
        s = state_commit(&cf, out, d);
    free(id_text);
    fvm_value_release(upd);
    fvm_value_release(next);
    state_close(&cf);
    return s;
}

/* ---- a block's partial aggregate ------------------------------------------------ */

fvm_status fvm_xdev_device_partial(fvm_xdev_device *dev, const int64_t *clients, int64_t n, const char *out,
                                   const char *const *states, fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    if (!pl->ph.server)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a partial aggregate needs the plan's server phase loaded");
    int64_t block = 0;
    fvm_status s =
        fvm_xdev_whole_block(dev->selected, dev->nselected, dev->cr.round, dev->checkpoint, clients, n, &block, d);
    if (!s)
        s = not_input(dev, out, "the partial's file (--partial)", d);
    for (int64_t k = 0; states && k < n && !s; k++) {
        const char *role = "a client's state file (--state-dir)";
        if (!(s = fvm_file_not_input(out, "the partial's file (--partial)", 1, &states[k], &role, d)))
            s = not_input(dev, states[k], role, d);
    }
    if (s)
        return s;
    fvm_value *updates = fvm_value_list(FVM_V_CLIENTS, n), *part = NULL, **next = calloc((size_t)n, sizeof *next);
    client_file *cf = calloc((size_t)n, sizeof *cf);
    s = updates && next && cf ? FVM_OK : nomem(d);
    /* the block's clients in index order (the round's order), each from its state */
    for (int64_t k = 0, lo = block * FVM_AGG_BLOCK; k < n && !s; k++) {
        int64_t c = dev->selected[lo + k], j = 0;
        while (states && clients[j] != c)
            j++;
        if (!(s = state_open(dev, c, states ? states[j] : NULL, true, &cf[k], d)))
            s = fvm_xdev_client_update(&dev->cr, c, cf[k].state, &updates->items[k], &next[k], d);
    }
    if (!s)
        s = fvm_xdev_partial(&pl->ph, updates, &part, d);
    char round[32], b[32], *list = s ? NULL : xdev_ints_text(dev->selected + block * FVM_AGG_BLOCK, n);
    if (!s && !list)
        s = nomem(d);
    snprintf(round, sizeof round, "%lld", (long long)dev->cr.round);
    snprintf(b, sizeof b, "%lld", (long long)block);
    const char *meta[] = {XDEV_KIND, "partial",  XDEV_PLAN, pl->id,       XDEV_ROUND,
                          round,     XDEV_BLOCK, b,         XDEV_CLIENTS, list};
    /* the new states beside their files, then the partial, then the states in place (as for one update) */
    for (int64_t k = 0; states && k < n && !s; k++)
        s = state_stage(dev, dev->selected[block * FVM_AGG_BLOCK + k], &cf[k], next[k], d);
    if (!s)
        s = fvm_safetensors_save(out, part, pl->ph.partial_type, 5, meta, d);
    for (int64_t k = 0; s && cf && k < n; k++)
        state_drop(&cf[k]);
    for (int64_t k = 0; states && k < n && !s; k++)
        s = state_commit(&cf[k], out, d);
    for (int64_t k = 0; cf && k < n; k++)
        state_close(&cf[k]);
    free(cf);
    fvm_values_free(next, (int)n);
    free(list);
    fvm_value_release(part);
    fvm_value_release(updates);
    return s;
}

void fvm_xdev_device_close(fvm_xdev_device *dev)
{
    if (!dev)
        return;
    for (int i = 0; dev->data && i < dev->plan->ph.ninputs; i++)
        fvm_value_release(dev->data[i]);
    free(dev->data);
    fvm_dataset_close(dev->ids);
    for (int k = 0; k < dev->nfiles; k++)
        free(dev->files[k]);
    free(dev->files);
    fvm_value_release(dev->cr.broadcast);
    fvm_vm_free(dev->cr.vm);
    free(dev->selected);
    free(dev);
}
