/* rounds.c - the round driver (see rounds.h). */
#include "rounds.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample.h"

/* Seconds on a clock: CLOCK_MONOTONIC (wall) or CLOCK_PROCESS_CPUTIME_ID. */
static double seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool is_clients_list(const fvm_type *t)
{
    return t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
}

/* The round's clients' states, read from the store when asked. */
typedef struct states_source {
    fvm_source base;
    const fvm_client_states *cs;
    int64_t *picked; /* owned */
} states_source;

static fvm_status states_get(fvm_source *src, int64_t j, fvm_value **out, fvm_diag *d)
{
    const states_source *ss = (const states_source *)src;
    fvm_status s = ss->cs->get(ss->cs->store, ss->picked[j], out, d);
    if (!s && !*out)
        s = fvm_diag_add(d, FVM_ERR_IO, NULL, "client %lld's state has gone from the store", (long long)ss->picked[j]);
    return s;
}

static void states_free(fvm_source *src)
{
    states_source *ss = (states_source *)src;
    free(ss->picked);
    free(ss);
}

static const struct fvm_source_i states_iface = {.get = states_get, .free = states_free};

/* How many first states are made before they are stored together. */
#define FIRST_BATCH 256

/* Gives the picked clients that have no state yet initialize_client's (run
 * on the calling thread: once when it takes no key, else with each
 * client's key), stored as their states of round 0, a batch at a time, so
 * memory does not grow with the clients. */
static fvm_status first_states(const fvm_rounds *r, const int64_t *picked, fvm_diag *d)
{
    const fvm_client_states *cs = r->states;
    int64_t batch[FIRST_BATCH];
    fvm_value *vals[FIRST_BATCH];
    fvm_value *shared = NULL; /* initialize_client's state when it takes no key */
    int k = 0;
    fvm_status s = FVM_OK;
    for (int64_t j = 0; j <= r->per_round && !s; j++) {
        bool has = true;
        if (j < r->per_round && (s = cs->has(cs->store, picked[j], &has, d)))
            break;
        if (!has) {
            vals[k] = NULL;
            if (cs->init->nparams == 0) {
                if (!shared)
                    s = fvm_vm_call(r->vm, cs->init, NULL, &shared, d);
                vals[k] = s ? NULL : fvm_value_retain(shared);
            } else {
                uint32_t key[2];
                fvm_value *kv = NULL;
                fvm_client_init_key(r->seed, picked[j], key);
                if (!(s = fvm_key_value(key, &kv, d)))
                    s = fvm_vm_call(r->vm, cs->init, &kv, &vals[k], d);
                fvm_value_release(kv);
            }
            batch[k++] = picked[j];
        }
        if (!s && k && (k == FIRST_BATCH || j == r->per_round))
            s = cs->put(cs->store, 0, k, batch, vals, d);
        if (k == FIRST_BATCH || j == r->per_round || s) {
            for (int i = 0; i < k; i++)
                fvm_value_release(vals[i]);
            k = 0;
        }
    }
    for (int i = 0; i < k; i++)
        fvm_value_release(vals[i]);
    fvm_value_release(shared);
    return s;
}

/* The {C}@CLIENTS value of the picked clients' states. */
static fvm_status client_states(const fvm_rounds *r, const int64_t *picked, fvm_value **out, fvm_diag *d)
{
    int64_t n = r->per_round;
    fvm_status s = first_states(r, picked, d);
    if (s)
        return s;
    states_source *ss = calloc(1, sizeof *ss);
    if (!ss || !(ss->picked = malloc((size_t)(n > 0 ? n : 1) * sizeof *picked))) {
        free(ss);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    ss->base.iface = &states_iface;
    ss->cs = r->states;
    memcpy(ss->picked, picked, (size_t)n * sizeof *picked);
    if (!(*out = fvm_value_clients_source_take(n, &ss->base))) {
        states_free(&ss->base);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

/* Keeps the clients' new states next returned (a {C}@CLIENTS value). */
static fvm_status keep_states(const fvm_rounds *r, int64_t round, const int64_t *picked, fvm_value *v, fvm_diag *d)
{
    int64_t n = r->per_round;
    fvm_value **items = calloc((size_t)(n > 0 ? n : 1), sizeof *items);
    fvm_status s = items ? FVM_OK : fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (int64_t j = 0; j < n && !s; j++)
        s = fvm_clients_get(v, j, &items[j], d);
    if (!s)
        s = r->states->put(r->states->store, round, n, picked, items, d);
    for (int64_t j = 0; items && j < n; j++)
        fvm_value_release(items[j]);
    free(items);
    return s;
}

/* next's arguments for one round: the state, the round's members of client
 * data, and what the round gives (keys.h's fvm_given). args[i] are new
 * references. */
static fvm_status round_args(const fvm_rounds *r, int64_t round, const int64_t *picked, fvm_value *state,
                             fvm_value **args, fvm_diag *d)
{
    const fvm_func *f = r->next;
    uint32_t key[2];
    fvm_round_key(r->seed, round, key);
    args[0] = fvm_value_retain(state);
    for (int i = 1; i < f->nparams; i++) {
        fvm_value *v = r->next_args[i];
        fvm_status s = FVM_OK;
        if (v && is_clients_list(f->param_types[i]) && v->kind == FVM_V_CLIENTS)
            s = fvm_clients_pick(v, picked, r->per_round, &args[i], d);
        else if (v)
            s = (args[i] = fvm_value_retain(v)) ? FVM_OK : FVM_ERR_NOMEM;
        else if (r->population < 0 && fvm_given_param(f->param_names[i], f->param_types[i]) != FVM_GIVEN_KEY)
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                             "next's parameter '%s' needs the number of clients: bind client data or give --clients N",
                             f->param_names[i]);
        else
            switch (fvm_given_param(f->param_names[i], f->param_types[i])) {
            case FVM_GIVEN_KEY:
                s = fvm_key_value(key, &args[i], d);
                break;
            case FVM_GIVEN_CLIENT_KEYS:
                s = fvm_client_keys_value(key, picked, r->per_round, &args[i], d);
                break;
            case FVM_GIVEN_CLIENT_INDICES:
                s = fvm_client_indices_value(picked, r->per_round, &args[i], d);
                break;
            case FVM_GIVEN_NUM_CLIENTS:
                s = fvm_i64_value(r->population, &args[i], d);
                break;
            case FVM_GIVEN_CLIENT_STATES:
                s = r->states ? client_states(r, picked, &args[i], d)
                              : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "no client states for next's 'client_states'");
                break;
            case FVM_GIVEN_NONE:
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "next's parameter '%s' has no value", f->param_names[i]);
                break;
            }
        if (s)
            return s;
    }
    return FVM_OK;
}

static fvm_status evaluate(const fvm_rounds *r, fvm_value *state, fvm_value **out, fvm_diag *d)
{
    const fvm_func *f = r->evaluate;
    fvm_value **args = calloc((size_t)f->nparams, sizeof *args);
    if (!args)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    args[0] = state;
    for (int i = 1; i < f->nparams; i++)
        args[i] = r->eval_args[i];
    fvm_vm_forget_clients(r->vm);
    fvm_status s = r->eval_population >= 0 ? fvm_vm_set_clients(r->vm, r->eval_population, d) : FVM_OK;
    if (s == FVM_OK)
        s = fvm_vm_call(r->vm, f, args, out, d);
    free(args);
    return s;
}

fvm_status fvm_rounds_initialize(fvm_vm *vm, const fvm_func *init, uint64_t seed, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    if (init->nparams == 0)
        return fvm_vm_call(vm, init, NULL, out, d);
    uint32_t k[2];
    fvm_round_key(seed, 0, k);
    fvm_value *key = NULL;
    fvm_status s = fvm_key_value(k, &key, d);
    if (s == FVM_OK)
        s = fvm_vm_call(vm, init, &key, out, d);
    fvm_value_release(key);
    return s;
}

fvm_status fvm_rounds_step(const fvm_rounds *r, int64_t round, fvm_value *state, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    if (r->population >= 0 && (r->per_round < 0 || r->per_round > r->population))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "cannot run %lld clients per round: the data has %lld clients",
                            (long long)r->per_round, (long long)r->population);
    fvm_status s = FVM_OK;
    int np = r->next->nparams;
    int64_t *picked = malloc((size_t)(r->per_round > 0 ? r->per_round : 1) * sizeof *picked);
    fvm_value **args = calloc((size_t)np, sizeof *args);
    if (!picked || !args)
        s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), e0 = 0;
    if (s || r->population < 0)
        ; /* no client data and no client count: nothing to pick */
    else if (r->fixed)
        memcpy(picked, r->fixed, (size_t)r->per_round * sizeof *picked);
    else if (r->per_round == r->population)
        for (int64_t j = 0; j < r->per_round; j++)
            picked[j] = j;
    else
        s = fvm_sample_clients(r->seed, round, r->population, r->per_round, picked, d);
    fvm_value *res = NULL, *ev = NULL;
    fvm_vm_forget_clients(r->vm);
    if (s == FVM_OK && r->population >= 0)
        s = fvm_vm_set_clients(r->vm, r->per_round, d);
    if (s == FVM_OK)
        s = round_args(r, round, picked, state, args, d);
    if (s == FVM_OK)
        s = fvm_vm_call(r->vm, r->next, args, &res, d);
    for (int i = 0; args && i < np; i++)
        fvm_value_release(args[i]);
    if (s == FVM_OK && r->states)
        s = keep_states(r, round, picked, res->items[2], d);
    bool eval_now = r->evaluate && (round == r->last || (r->eval_every > 0 && round % r->eval_every == 0));
    if (s == FVM_OK && eval_now) {
        e0 = seconds(CLOCK_MONOTONIC);
        s = evaluate(r, res->items[0], &ev, d);
    }
    if (s == FVM_OK && r->report) {
        double t1 = seconds(CLOCK_MONOTONIC);
        fvm_round_report rep = {
            .last = r->last,
            .state = res->items[0],
            .figures =
                {
                    .round = round,
                    .train = res->items[1],
                    .train_type = r->next->result_type->u.strct.elems[1],
                    .eval = ev,
                    .eval_type = r->evaluate ? r->evaluate->result_type : NULL,
                    .fields = FVM_METRICS_TIMES | FVM_METRICS_CLIENTS,
                    .seconds = t1 - t0,
                    .eval_seconds = eval_now ? t1 - e0 : 0,
                    .cpu_seconds = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0,
                    .nclients = r->per_round,
                    .clients = picked,
                },
        };
        s = r->report(r->user, &rep, d);
    }
    if (s == FVM_OK)
        *out = fvm_value_retain(res->items[0]);
    fvm_value_release(ev);
    fvm_value_release(res);
    free(picked);
    free(args);
    return s;
}
