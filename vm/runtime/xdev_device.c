/* xdev_device.c - 'fedvm device': a cross-device plan's client phase run on a device's data (see vm/runtime/xdev.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../exec/aggregate.h"
#include "../../format/doc_io.h"
#include "../core/prng.h"
#include "../ir/keys.h"
#include "sample.h"
#include "../../format/data_bind.h"
#include "../../format/dataset.h"
#include "../core/doc.h"
#include "../../format/file.h"
#include "../../format/value_doc.h"
#include "../../format/xdev_impl.h"
#include "xdev.h"
#include "../ir/aggregation.h"

struct fvm_xdev_device {
    const fvm_xdev_plan *plan;
    const char *checkpoint;
    fvm_vm *vm;
    fvm_value *broadcast;
    int64_t round, population;
    uint32_t key[2]; /* the round's key */
    int64_t *selected, nselected; /* the round's clients, increasing */
    fvm_value **data; /* per input: {T}@CLIENTS (NULL for a key) */
    fvm_dataset *ids; /* the first dataset: client ids */
    char **files; /* the data files, which no output may overwrite (malloc'd) */
    int nfiles;
    uint64_t seed; /* the run's, from the broadcast: a client's first state comes from it */
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
        s = xdev_meta_int(f, path, XDEV_ROUND, 1, UINT32_MAX - 1, &dev->round, d);
    if (s == FVM_OK)
        s = xdev_meta_seed(f, path, &dev->seed, d);
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
        dev->key[0] = (uint32_t)key[0];
        dev->key[1] = (uint32_t)key[1];
        const fvm_func *w = dev->plan->work;
        s = fvm_safetensors_value(f, w->param_types[w->nparams - 1], &dev->broadcast, d);
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
    const fvm_func *w = pl->work;
    int ndin = 0;
    for (int i = 0; i < pl->ninputs; i++)
        ndin += pl->inputs[i] == XDEV_DATA;
    fvm_status s = FVM_OK;
    for (int k = 0; k < ndata && !s; k++) {
        const char *eq = strchr(data[k], '='), *spec = data[k];
        int i = -1;
        if (eq) {
            for (int j = 0; j < pl->ninputs && i < 0; j++)
                if (pl->inputs[j] == XDEV_DATA && strlen(w->param_names[j]) == (size_t)(eq - data[k]) &&
                    !strncmp(w->param_names[j], data[k], (size_t)(eq - data[k])))
                    i = j;
            spec = eq + 1;
        } else if (ndin == 1) {
            for (int j = 0; j < pl->ninputs; j++)
                if (pl->inputs[j] == XDEV_DATA)
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
            const fvm_type *t = fvm_type_fed(&pl->client->arena, w->param_types[i], FVM_PL_CLIENTS, false);
            s = t ? bind_data(dev, w->param_names[i], t, spec, &dev->data[i], d) : nomem(d);
        }
    }
    for (int i = 0; i < pl->ninputs && !s; i++) {
        char buf[256];
        if (pl->inputs[i] == XDEV_DATA && !dev->data[i])
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "missing --data %s=FILE[:SPLIT] (the clients' %s)",
                             w->param_names[i], fvm_type_format(w->param_types[i], true, buf, sizeof buf));
        else if (dev->data[i] && dev->data[i]->n != dev->population)
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                             "--data %s: the data has %lld clients, but round %lld selected its clients from %lld; "
                             "give the data the server sampled from",
                             w->param_names[i], (long long)dev->data[i]->n, (long long)dev->round,
                             (long long)dev->population);
    }
    return s;
}

fvm_status fvm_xdev_device_open(const fvm_xdev_plan *plan, const char *checkpoint, int ndata, const char *const *data,
                                fvm_xdev_device **out, fvm_diag *d)
{
    *out = NULL;
    fvm_xdev_device *dev = calloc(1, sizeof *dev);
    if (!dev || !(dev->data = calloc((size_t)plan->ninputs + 1, sizeof *dev->data))) {
        free(dev);
        return nomem(d);
    }
    dev->plan = plan;
    dev->checkpoint = checkpoint;
    fvm_status s = read_broadcast(dev, d);
    if (s == FVM_OK)
        s = bind_inputs(dev, ndata, data, d);
    if (s == FVM_OK)
        s = fvm_vm_new(plan->client, &(fvm_vm_config){.nclients = -1}, &dev->vm, d);
    if (s) {
        fvm_xdev_device_close(dev);
        return s;
    }
    *out = dev;
    return FVM_OK;
}

int64_t fvm_xdev_device_round(const fvm_xdev_device *dev)
{
    return dev->round;
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
                            (long long)dev->round);
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
    if (s == FVM_OK && (s = fvm_safetensors_value(f, pl->client_state, v, d)) != FVM_OK) {
        char buf[256];
        fvm_diag_add(d, s, &loc, "this is not a state of this plan's clients, %s (client.state)",
                     fvm_type_format(pl->client_state, false, buf, sizeof buf));
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
    if (s == FVM_OK && seed != dev->seed)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this client state is of a run with seed %llu, and the broadcast %s is of seed %llu",
                         (unsigned long long)seed, dev->checkpoint, (unsigned long long)dev->seed);
    fvm_safetensors_free(f);
    if (s) {
        fvm_value_release(*v);
        *v = NULL;
    }
    return s;
}

/* initialize_client's state for client index, with the client's own key
 * (keys.h, fvm_client_init_key), as 'fedvm run' makes it. */
static fvm_status first_state(const fvm_xdev_device *dev, int64_t index, fvm_value **out, fvm_diag *d)
{
    const fvm_func *f = dev->plan->init_client;
    if (f->nparams == 0)
        return fvm_vm_call(dev->vm, f, NULL, out, d);
    uint32_t k[2];
    fvm_value *key = NULL;
    fvm_client_init_key(dev->seed, index, k);
    fvm_status s = fvm_key_value(k, &key, d);
    if (s == FVM_OK)
        s = fvm_vm_call(dev->vm, f, &key, out, d);
    fvm_value_release(key);
    return s;
}

/* The state client index starts the broadcast's round from (path NULL:
 * none), into cf (state_close releases it). With run, a pending state to
 * adopt is renamed into place; without, it is only read (a check). */
static fvm_status state_open(const fvm_xdev_device *dev, int64_t index, const char *path, bool run, client_file *cf,
                             fvm_diag *d)
{
    *cf = (client_file){.path = path};
    if (!path != !dev->plan->client_state) {
        fvm_loc loc = {.file = dev->plan->path};
        return fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                            path ? "this plan keeps no state on the clients, so client %lld has no state file"
                                 : "this plan keeps a state on each client: client %lld needs its state file",
                            (long long)index);
    }
    if (!path)
        return FVM_OK;
    int64_t r = dev->round, fr = 0, pr = 0;
    bool fe = false, pe = false;
    fvm_value *fv = NULL, *pv = NULL;
    fvm_status s = asprintf(&cf->pending, "%s.pending", path) < 0 ? (cf->pending = NULL, nomem(d)) : FVM_OK;
    if (s == FVM_OK)
        s = read_state(dev, index, path, &fe, &fr, &fv, d);
    if (s == FVM_OK && fe && fr >= r) {
        fvm_loc loc = {.file = path};
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this is client %lld's state after round %lld, and the broadcast is of round %lld: the "
                         "device has run round %lld for this client already (its update was written before this "
                         "state), and a round runs once",
                         (long long)index, (long long)fr, (long long)r, (long long)(fr > r ? fr : r));
    }
    if (s == FVM_OK)
        s = read_state(dev, index, cf->pending, &pe, &pr, &pv, d);
    if (s == FVM_OK && pe && (!fe || pr > fr)) {
        fvm_loc loc = {.file = cf->pending};
        if (pr > r)
            s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                             "this is client %lld's new state of round %lld, later than the broadcast's round %lld",
                             (long long)index, (long long)pr, (long long)r);
        else if (pr < r) /* its update was written, and the server went on: it is the client's state */
            cf->adopt = true, cf->state = pv, pv = NULL;
        /* pr == r: this round, run again from the state before it */
    }
    if (s == FVM_OK && !cf->state && fe)
        cf->state = fv, fv = NULL;
    if (s == FVM_OK && !cf->state)
        s = first_state(dev, index, &cf->state, d);
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
    const char *type = fvm_type_str(&pl->client->arena, pl->client_state, false);
    snprintf(round, sizeof round, "%lld", (long long)dev->round);
    snprintf(client, sizeof client, "%lld", (long long)index);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)dev->seed);
    fvm_status s = type ? client_id(dev, index, &id_text, d) : nomem(d);
    const char *meta[] = {XDEV_KIND, "client_state",  XDEV_PLAN, pl->id,      XDEV_ROUND, round,          XDEV_SEED,
                          seed,      XDEV_STATE_TYPE, type,      XDEV_CLIENT, client,     XDEV_CLIENT_ID, id_text};
    if (s == FVM_OK)
        s = fvm_safetensors_save(cf->pending, next, pl->client_state, id_text ? 7 : 6, meta, d);
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

/* What the client sends of work's result (<updates, secure>, without a new
 * client state) with its secure-sum inputs reduced or checked as each secure
 * sum does at a client (fvm_secure_step: modulo the modulus; in [0,
 * max_input]), a new value. */
static fvm_status secure_reduced(const fvm_xdev_plan *pl, fvm_value *res, fvm_value **out, fvm_diag *d)
{
    const fvm_type *rt = pl->sent;
    int si = fvm_type_field_index(rt, "secure");
    int64_t n = rt->u.strct.n;
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, n), *sec = fvm_value_list(FVM_V_STRUCT, pl->nsecure);
    fvm_status s = r && sec ? FVM_OK : nomem(d);
    for (int64_t k = 0; k < n && !s; k++)
        r->items[k] = k == si ? sec : fvm_value_retain(res->items[k]);
    for (int j = 0; j < pl->nsecure && !s; j++)
        if ((s = fvm_secure_step(&pl->secure[j], res->items[si]->items[j], NULL, &sec->items[j], d)))
            fvm_diag_add(d, s, NULL, "the error above is in the secure sum 's%d' of the client's update", j);
    if (!r)
        fvm_value_release(sec);
    if (s) {
        fvm_value_release(r);
        return s;
    }
    *out = r;
    return FVM_OK;
}

/* Client 'index''s update: work's result with its secure-sum inputs reduced
 * (a new value), from its state (borrowed; NULL when the plan keeps none);
 * *next (unless NULL) gets the client's new state. */
static fvm_status client_update(fvm_xdev_device *dev, int64_t index, fvm_value *state, fvm_value **out,
                                fvm_value **next, fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    const fvm_func *w = pl->work;
    fvm_value **args = calloc((size_t)w->nparams, sizeof *args), *res = NULL;
    if (!args)
        return nomem(d);
    fvm_status s = FVM_OK;
    for (int i = 0; i < pl->ninputs && !s; i++) {
        uint32_t k[2];
        switch (pl->inputs[i]) {
        case XDEV_DATA:
            s = fvm_clients_get(dev->data[i], index, &args[i], d);
            break;
        case XDEV_CLIENT_INDEX:
            s = fvm_i64_value(index, &args[i], d);
            break;
        case XDEV_CLIENT_STATE:
            s = state ? ((args[i] = fvm_value_retain(state)), FVM_OK)
                      : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld's state is missing", (long long)index);
            break;
        default:
            fvm_prng_fold_in(dev->key, (uint32_t)index, k);
            s = fvm_key_value(k, &args[i], d);
        }
    }
    if (!s)
        args[w->nparams - 1] = fvm_value_retain(dev->broadcast);
    if (!s)
        s = fvm_vm_call(dev->vm, w, args, &res, d);
    if (!s)
        s = secure_reduced(pl, res, out, d);
    if (!s && next)
        *next = pl->client_state ? fvm_value_retain(res->items[2]) : NULL;
    fvm_value_release(res);
    fvm_values_free(args, w->nparams);
    return s;
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
        s = client_update(dev, index, cf.state, &upd, &next, d);
    char round[32], client[32];
    snprintf(round, sizeof round, "%lld", (long long)dev->round);
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
    if (!s && (s = fvm_safetensors_save(out, upd, pl->sent, id_text ? 5 : 4, meta, d)) != FVM_OK)
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

/* The block of the round that clients[0..n) (indices the round selected)
 * make up, all of it and nothing else; an error located at the broadcast
 * saying which clients are missing or out of place. */
static fvm_status whole_block(const fvm_xdev_device *dev, const int64_t *clients, int64_t n, int64_t *block,
                              fvm_diag *d)
{
    fvm_loc loc = {.file = dev->checkpoint};
    int64_t *pos = malloc((size_t)n * sizeof *pos);
    if (!pos)
        return nomem(d);
    fvm_status s = FVM_OK;
    for (int64_t k = 0; k < n && !s; k++)
        if ((pos[k] = xdev_position(dev->selected, dev->nselected, clients[k])) < 0)
            s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "client %lld is not one of the %lld clients round %lld selected",
                             (long long)clients[k], (long long)dev->nselected, (long long)dev->round);
    if (s) {
        free(pos);
        return s;
    }
    int64_t b = pos[0] / FVM_AGG_BLOCK, lo = b * FVM_AGG_BLOCK,
            hi = lo + FVM_AGG_BLOCK < dev->nselected ? lo + FVM_AGG_BLOCK : dev->nselected;
    for (int64_t k = 0; k < n && !s; k++) {
        if (pos[k] / FVM_AGG_BLOCK != b)
            s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                             "client %lld is in block %lld of round %lld and client %lld in block %lld; a partial "
                             "aggregate is of one block (%d consecutive clients of the round, in index order)",
                             (long long)clients[0], (long long)b, (long long)dev->round, (long long)clients[k],
                             (long long)(pos[k] / FVM_AGG_BLOCK), FVM_AGG_BLOCK);
        for (int64_t j = 0; j < k && !s; j++)
            if (pos[j] == pos[k])
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld is given twice", (long long)clients[k]);
    }
    if (!s && n != hi - lo) {
        char *all = xdev_ints_text(dev->selected + lo, hi - lo);
        s = all ? fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                               "block %lld of round %lld is the clients %s; %lld of them are given (a partial "
                               "aggregate is of a whole block)",
                               (long long)b, (long long)dev->round, all, (long long)n)
                : nomem(d);
        free(all);
    }
    free(pos);
    *block = b;
    return s;
}

fvm_status fvm_xdev_device_partial(fvm_xdev_device *dev, const int64_t *clients, int64_t n, const char *out,
                                   const char *const *states, fvm_diag *d)
{
    const fvm_xdev_plan *pl = dev->plan;
    if (!pl->server)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a partial aggregate needs the plan's server phase loaded");
    int64_t block = 0;
    fvm_status s = n > 0 ? whole_block(dev, clients, n, &block, d)
                         : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a partial aggregate of no clients");
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
    fvm_vm *vm = NULL;
    s = updates && next && cf ? FVM_OK : nomem(d);
    /* the block's clients in index order (the round's order), each from its state */
    for (int64_t k = 0, lo = block * FVM_AGG_BLOCK; k < n && !s; k++) {
        int64_t c = dev->selected[lo + k], j = 0;
        while (states && clients[j] != c)
            j++;
        if (!(s = state_open(dev, c, states ? states[j] : NULL, true, &cf[k], d)))
            s = client_update(dev, c, cf[k].state, &updates->items[k], &next[k], d);
    }
    if (!s)
        s = fvm_vm_new(pl->server, &(fvm_vm_config){.nclients = -1}, &vm, d);
    if (!s)
        s = fvm_vm_set_clients(vm, n, d);
    if (!s)
        s = fvm_vm_call(vm, pl->partial, &updates, &part, d);
    char round[32], b[32], *list = s ? NULL : xdev_ints_text(dev->selected + block * FVM_AGG_BLOCK, n);
    if (!s && !list)
        s = nomem(d);
    snprintf(round, sizeof round, "%lld", (long long)dev->round);
    snprintf(b, sizeof b, "%lld", (long long)block);
    const char *meta[] = {XDEV_KIND, "partial",  XDEV_PLAN, pl->id,       XDEV_ROUND,
                          round,     XDEV_BLOCK, b,         XDEV_CLIENTS, list};
    /* the new states beside their files, then the partial, then the states in place (as for one update) */
    for (int64_t k = 0; states && k < n && !s; k++)
        s = state_stage(dev, dev->selected[block * FVM_AGG_BLOCK + k], &cf[k], next[k], d);
    if (!s)
        s = fvm_safetensors_save(out, part, pl->partial_type, 5, meta, d);
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
    fvm_vm_free(vm);
    return s;
}

void fvm_xdev_device_close(fvm_xdev_device *dev)
{
    if (!dev)
        return;
    for (int i = 0; dev->data && i < dev->plan->ninputs; i++)
        fvm_value_release(dev->data[i]);
    free(dev->data);
    fvm_dataset_close(dev->ids);
    for (int k = 0; k < dev->nfiles; k++)
        free(dev->files[k]);
    free(dev->files);
    fvm_value_release(dev->broadcast);
    fvm_vm_free(dev->vm);
    free(dev->selected);
    free(dev);
}
