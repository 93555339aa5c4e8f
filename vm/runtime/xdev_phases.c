/* xdev_phases.c - what a cross-device round computes, on values: the client phase's update, the state a client starts from, a block's partial, and the server's initial state, broadcast and aggregation (see xdev_phases.h). */
#include "xdev_phases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"
#include "../exec/aggregate.h"
#include "../ir/keys.h"
#include "privacy.h"
#include "rounds.h"
#include "sample.h"

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

int64_t xdev_position(const int64_t *sel, int64_t n, int64_t c)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sel[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sel[lo] == c ? lo : -1;
}

char *xdev_ints_text(const int64_t *v, int64_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)v[i]);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- the client phase --------------------------------------------------------- */

/* What the client sends of work's result (<updates, secure>, without a new
 * client state) with its secure-sum inputs reduced or checked as each secure
 * sum does at a client (fvm_secure_step: modulo the modulus; in [0,
 * max_input]), a new value. */
static fvm_status secure_reduced(const fvm_xdev_phases *ph, fvm_value *res, fvm_value **out, fvm_diag *d)
{
    const fvm_type *rt = ph->sent;
    int si = fvm_type_field_index(rt, "secure");
    int64_t n = rt->u.strct.n;
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, n), *sec = fvm_value_list(FVM_V_STRUCT, ph->nsecure);
    fvm_status s = r && sec ? FVM_OK : nomem(d);
    for (int64_t k = 0; k < n && !s; k++)
        r->items[k] = k == si ? sec : fvm_value_retain(res->items[k]);
    for (int j = 0; j < ph->nsecure && !s; j++)
        if ((s = fvm_secure_step(&ph->secure[j], res->items[si]->items[j], NULL, &sec->items[j], d)))
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

fvm_status fvm_xdev_client_update(const fvm_xdev_client_round *cr, int64_t index, fvm_value *state, fvm_value **out,
                                  fvm_value **next, fvm_diag *d)
{
    const fvm_xdev_phases *ph = cr->ph;
    const fvm_func *w = ph->work;
    fvm_value **args = calloc((size_t)w->nparams, sizeof *args), *res = NULL;
    if (!args)
        return nomem(d);
    fvm_status s = FVM_OK;
    for (int i = 0; i < ph->ninputs && !s; i++) {
        uint32_t k[2];
        switch (ph->inputs[i]) {
        case XDEV_DATA:
            s = fvm_clients_get(cr->data[i], index, &args[i], d);
            break;
        case XDEV_CLIENT_INDEX:
            s = fvm_i64_value(index, &args[i], d);
            break;
        case XDEV_CLIENT_STATE:
            s = state ? ((args[i] = fvm_value_retain(state)), FVM_OK)
                      : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld's state is missing", (long long)index);
            break;
        default:
            fvm_prng_fold_in(cr->key, (uint32_t)index, k);
            s = fvm_key_value(k, &args[i], d);
        }
    }
    if (!s)
        args[w->nparams - 1] = fvm_value_retain(cr->broadcast);
    if (!s)
        s = fvm_vm_call(cr->vm, w, args, &res, d);
    if (!s)
        s = secure_reduced(ph, res, out, d);
    if (!s && next)
        *next = ph->client_state ? fvm_value_retain(res->items[2]) : NULL;
    fvm_value_release(res);
    fvm_values_free(args, w->nparams);
    return s;
}

fvm_status fvm_xdev_state_fits(int64_t index, int64_t r, const char *path, int64_t fr, fvm_diag *d)
{
    if (fr < r)
        return FVM_OK;
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                        "this is client %lld's state after round %lld, and the broadcast is of round %lld: the "
                        "device has run round %lld for this client already (its update was written before this "
                        "state), and a round runs once",
                        (long long)index, (long long)fr, (long long)r, (long long)(fr > r ? fr : r));
}

fvm_status fvm_xdev_state_from(int64_t index, int64_t r, bool fe, int64_t fr, const char *pending, bool pe, int64_t pr,
                               xdev_state_from *out, fvm_diag *d)
{
    *out = fe ? XDEV_FROM_FILE : XDEV_FROM_FIRST;
    if (pe && (!fe || pr > fr)) {
        fvm_loc loc = {.file = pending};
        if (pr > r)
            return fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                                "this is client %lld's new state of round %lld, later than the broadcast's round %lld",
                                (long long)index, (long long)pr, (long long)r);
        if (pr < r) /* its update was written, and the server went on: it is the client's state */
            *out = XDEV_FROM_PENDING;
        /* pr == r: this round, run again from the state before it */
    }
    return FVM_OK;
}

fvm_status fvm_xdev_first_state(const fvm_xdev_client_round *cr, int64_t index, fvm_value **out, fvm_diag *d)
{
    const fvm_func *f = cr->ph->init_client;
    if (f->nparams == 0)
        return fvm_vm_call(cr->vm, f, NULL, out, d);
    uint32_t k[2];
    fvm_value *key = NULL;
    fvm_client_init_key(cr->seed, index, k);
    fvm_status s = fvm_key_value(k, &key, d);
    if (s == FVM_OK)
        s = fvm_vm_call(cr->vm, f, &key, out, d);
    fvm_value_release(key);
    return s;
}

fvm_status fvm_xdev_whole_block(const int64_t *sel, int64_t nsel, int64_t round, const char *broadcast,
                                const int64_t *clients, int64_t n, int64_t *block, fvm_diag *d)
{
    if (n < 1)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a partial aggregate of no clients");
    fvm_loc loc = {.file = broadcast};
    int64_t *pos = malloc((size_t)n * sizeof *pos);
    if (!pos)
        return nomem(d);
    fvm_status s = FVM_OK;
    for (int64_t k = 0; k < n && !s; k++)
        if ((pos[k] = xdev_position(sel, nsel, clients[k])) < 0)
            s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "client %lld is not one of the %lld clients round %lld selected",
                             (long long)clients[k], (long long)nsel, (long long)round);
    if (s) {
        free(pos);
        return s;
    }
    int64_t b = pos[0] / FVM_AGG_BLOCK, lo = b * FVM_AGG_BLOCK,
            hi = lo + FVM_AGG_BLOCK < nsel ? lo + FVM_AGG_BLOCK : nsel;
    for (int64_t k = 0; k < n && !s; k++) {
        if (pos[k] / FVM_AGG_BLOCK != b)
            s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                             "client %lld is in block %lld of round %lld and client %lld in block %lld; a partial "
                             "aggregate is of one block (%d consecutive clients of the round, in index order)",
                             (long long)clients[0], (long long)b, (long long)round, (long long)clients[k],
                             (long long)(pos[k] / FVM_AGG_BLOCK), FVM_AGG_BLOCK);
        for (int64_t j = 0; j < k && !s; j++)
            if (pos[j] == pos[k])
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld is given twice", (long long)clients[k]);
    }
    if (!s && n != hi - lo) {
        char *all = xdev_ints_text(sel + lo, hi - lo);
        s = all ? fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                               "block %lld of round %lld is the clients %s; %lld of them are given (a partial "
                               "aggregate is of a whole block)",
                               (long long)b, (long long)round, all, (long long)n)
                : nomem(d);
        free(all);
    }
    free(pos);
    *block = b;
    return s;
}

fvm_status fvm_xdev_partial(const fvm_xdev_phases *ph, fvm_value *updates, fvm_value **out, fvm_diag *d)
{
    fvm_vm *vm = NULL;
    fvm_status s = fvm_vm_new(ph->server, &(fvm_vm_config){.nclients = -1}, &vm, d);
    if (!s)
        s = fvm_vm_set_clients(vm, updates->n, d);
    if (!s)
        s = fvm_vm_call(vm, ph->partial, &updates, out, d);
    fvm_vm_free(vm);
    return s;
}

/* ---- the server phase --------------------------------------------------------- */

/* The server inputs' values for a round: the state, the round key and the
 * number of clients in the data (population). */
static fvm_status server_args(const fvm_xdev_phases *ph, fvm_value *state, const uint32_t key[2], int64_t population,
                              fvm_value **args, fvm_diag *d)
{
    for (int i = 0; i < ph->nserver; i++) {
        if (ph->server_inputs[i] == XDEV_STATE)
            args[i] = fvm_value_retain(state);
        else if (ph->server_inputs[i] == XDEV_NUM_CLIENTS ? fvm_i64_value(population, &args[i], d)
                                                          : fvm_key_value(key, &args[i], d))
            return FVM_ERR_NOMEM;
    }
    return FVM_OK;
}

fvm_status fvm_xdev_initialize(const fvm_xdev_phases *ph, uint64_t seed, fvm_value **out, fvm_diag *d)
{
    fvm_vm *vm = NULL;
    fvm_status s = fvm_vm_new(ph->server, &(fvm_vm_config){.nclients = -1}, &vm, d);
    if (s == FVM_OK)
        s = fvm_rounds_initialize(vm, ph->initialize, seed, out, d);
    fvm_vm_free(vm);
    return s;
}

fvm_status fvm_xdev_prepare(const fvm_xdev_phases *ph, fvm_value *state, uint64_t seed, int64_t r, int64_t population,
                            int64_t per_round, int64_t *picked, uint32_t key[2], fvm_value **out, fvm_diag *d)
{
    fvm_vm *vm = NULL;
    fvm_value **args = calloc((size_t)ph->nserver + 1, sizeof *args);
    fvm_status s = args ? FVM_OK : nomem(d);
    fvm_round_key(seed, r, key);
    if (s == FVM_OK && per_round == population)
        for (int64_t j = 0; j < per_round; j++)
            picked[j] = j;
    else if (s == FVM_OK)
        s = fvm_sample_clients(seed, r, population, per_round, picked, d);
    if (s == FVM_OK)
        s = server_args(ph, state, key, population, args, d);
    if (s == FVM_OK)
        s = fvm_vm_new(ph->server, &(fvm_vm_config){.nclients = -1}, &vm, d);
    if (s == FVM_OK)
        s = fvm_vm_call(vm, ph->prepare, args, out, d);
    if (args)
        fvm_values_free(args, ph->nserver);
    fvm_vm_free(vm);
    return s;
}

/* The end of the round: result(state, key?, report, secure) with agg =
 * <report, secure>, into out. */
static fvm_status finish_round(const fvm_xdev_phases *ph, fvm_vm *vm, const fvm_xdev_server_round *sr, fvm_value *agg,
                               fvm_xdev_outcome *out, fvm_diag *d)
{
    fvm_value *next = NULL, **args = calloc((size_t)ph->nserver + 2, sizeof *args);
    uint32_t key[2];
    fvm_status s = args ? FVM_OK : nomem(d);
    if (s == FVM_OK) {
        fvm_round_key(sr->seed, sr->round, key);
        s = server_args(ph, sr->state, key, sr->population, args, d);
    }
    if (s == FVM_OK) {
        args[ph->nserver] = fvm_value_retain(agg->items[0]);
        args[ph->nserver + 1] = fvm_value_retain(agg->items[1]);
        fvm_vm_forget_clients(vm);
        s = fvm_vm_call(vm, ph->result, args, &next, d);
    }
    if (s == FVM_OK) {
        out->state = fvm_value_retain(next->items[0]);
        out->metrics = fvm_value_retain(next->items[1]);
    }
    /* (epsilon, delta) as a session reports them: r rounds of the Poisson-subsampled Gaussian
       mechanism with q = clients / population (1 when the round takes them all) */
    const fvm_module *m = ph->server->root;
    if (s == FVM_OK && m->privacy) {
        double q = sr->nclients < sr->population ? (double)sr->nclients / (double)sr->population : 1.0;
        out->dp = true;
        out->delta = m->privacy_delta;
        s = fvm_privacy_epsilon(q, m->privacy_z, sr->round, out->delta, &out->epsilon, NULL, d);
    }
    fvm_value_release(next);
    if (args)
        fvm_values_free(args, ph->nserver + 2);
    return s;
}

fvm_status fvm_xdev_aggregate(const fvm_xdev_phases *ph, const fvm_xdev_server_round *sr, fvm_value *updates,
                              fvm_xdev_outcome *out, fvm_diag *d)
{
    *out = (fvm_xdev_outcome){0};
    fvm_value *agg = NULL;
    fvm_vm *vm = NULL;
    fvm_status s = fvm_vm_new(ph->server, &(fvm_vm_config){.nclients = -1}, &vm, d);
    if (s == FVM_OK)
        s = fvm_vm_set_clients(vm, sr->nclients, d);
    if (s == FVM_OK)
        s = fvm_vm_call(vm, ph->aggregate, &updates, &agg, d);
    if (s == FVM_OK)
        s = finish_round(ph, vm, sr, agg, out, d);
    fvm_value_release(agg);
    fvm_vm_free(vm);
    if (s)
        fvm_xdev_outcome_clear(out);
    return s;
}

/* Merges two accumulators with the plan's merge function: the reduction
 * tree's merge stage (vm/exec/aggregate.h) over block partials, run through the
 * VM like every other call, so it needs no execution context of its own. */
typedef struct merger {
    fvm_vm *vm;
    const fvm_func *merge;
    fvm_diag *d;
} merger;

static fvm_status merge_two(fvm_ctx *x, void *u, fvm_value *a, fvm_value *b, fvm_value **out)
{
    const merger *m = u;
    fvm_value *args[2] = {a, b};
    return fvm_vm_call(m->vm, m->merge, args, out, m->d);
}

fvm_status fvm_xdev_merge(const fvm_xdev_phases *ph, const fvm_xdev_server_round *sr, fvm_value *const *parts,
                          int64_t nblocks, fvm_xdev_outcome *out, fvm_diag *d)
{
    *out = (fvm_xdev_outcome){0};
    fvm_value *acc = NULL, *partials = NULL, *agg = NULL;
    fvm_vm *vm = NULL;
    fvm_status s = fvm_vm_new(ph->server, &(fvm_vm_config){.nclients = -1}, &vm, d);
    /* the accumulators merged pairwise in block order, as the aggregation's tree merges its blocks */
    if (s == FVM_OK && !(partials = fvm_value_list(FVM_V_CLIENTS, nblocks)))
        s = nomem(d);
    if (s == FVM_OK) {
        merger m = {vm, ph->merge, d};
        fvm_reducer red = {.merge = merge_two, .u = &m};
        fvm_tree_merger tree;
        fvm_tree_merger_init(&tree, &red);
        for (int64_t b = 0; b < nblocks; b++) {
            partials->items[b] = fvm_value_retain(parts[b]);
            if (s == FVM_OK)
                s = fvm_tree_push(NULL, &tree, fvm_value_retain(parts[b]->items[0]));
        }
        if (s == FVM_OK)
            s = fvm_tree_finish(NULL, &tree, &acc);
        else
            fvm_tree_merger_clear(&tree);
    }
    /* report, and the secure sums of the blocks' secure sums */
    if (s == FVM_OK)
        s = fvm_vm_set_clients(vm, nblocks, d);
    if (s == FVM_OK) {
        fvm_value *args[2] = {acc, partials};
        s = fvm_vm_call(vm, ph->combine, args, &agg, d);
    }
    if (s == FVM_OK)
        s = finish_round(ph, vm, sr, agg, out, d);
    fvm_value_release(agg);
    fvm_value_release(acc);
    fvm_value_release(partials);
    fvm_vm_free(vm);
    if (s)
        fvm_xdev_outcome_clear(out);
    return s;
}

void fvm_xdev_outcome_clear(fvm_xdev_outcome *out)
{
    fvm_value_release(out->state);
    fvm_value_release(out->metrics);
    *out = (fvm_xdev_outcome){0};
}
