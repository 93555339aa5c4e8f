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

/* next's arguments for one round: the state, the round's members of client
 * data, and the keys. args[i] are new references. */
static fvm_status round_args(const fvm_rounds *r, int64_t round, const int64_t *picked, fvm_value *state,
                             fvm_value **args, fvm_diag *d)
{
    const fvm_func *f = r->next;
    uint32_t key[2];
    fvm_round_key(r->seed, round, key);
    args[0] = fvm_value_retain(state);
    for (int i = 1; i < f->nparams; i++) {
        fvm_value *v = r->next_args[i];
        fvm_status s;
        if (v && is_clients_list(f->param_types[i]) && v->kind == FVM_V_CLIENTS)
            s = fvm_clients_pick(v, picked, r->per_round, &args[i], d);
        else if (v)
            s = (args[i] = fvm_value_retain(v)) ? FVM_OK : FVM_ERR_NOMEM;
        else if (is_clients_list(f->param_types[i])) /* client_keys */
            s = fvm_client_keys_value(key, picked, r->per_round, &args[i], d);
        else /* key */
            s = fvm_key_value(key, &args[i], d);
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
