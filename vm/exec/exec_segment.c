/* exec_segment.c - a fused segment: client work streamed through the aggregations that consume it
 * (phases.h), one block of clients per task, merged in the fixed order of aggregate.h. */
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "../transform/phases.h"

/* Blocks per worker in one run of the backend. A segment's blocks run a
 * chunk at a time and each chunk's partials are merged before the next, so
 * memory holds one chunk's partials and the merge tree's log2(blocks), not
 * one partial per block: O(workers x partial), whatever the number of
 * clients. Several blocks per worker keep the workers busy to a chunk's end. */
#define CHUNK_BLOCKS 8

static bool is_list(const fvm_type *t)
{
    return t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
}

/* A segment being run: what every block task reads. */
typedef struct seg_run {
    const fvm_func *f;
    const fvm_segment *sg;
    int *pos; /* per instruction of f: its position in sg, or -1 */
    int *aggs; /* positions in sg of the aggregations, in order */
    int nagg;
    bool *read_by_agg; /* per position: a map or zip whose members an aggregation reads */
    fvm_value **slots; /* the function's values (borrowed, read only) */
    int64_t n; /* clients */
    int64_t block_lo; /* block_task: the chunk's first block */
    int64_t chunk_lo; /* by_clients: the chunk's first client */
} seg_run;

/* Argument k of instruction in, for client i: the client's member made in
 * this segment (mv), of a list from outside, or a value for every client.
 * *owned tells whether the caller must release it. */
static fvm_status arg_for(fvm_ctx *x, const seg_run *r, const fvm_instr *in, int k, int64_t i, fvm_value **mv,
                          fvm_value **out, bool *owned)
{
    int slot = in->args[k], def = slot - r->f->nparams;
    *owned = false;
    if (def >= 0 && r->pos[def] >= 0) {
        *out = mv[r->pos[def]];
        return FVM_OK;
    }
    if (is_list(in->arg_types[k])) {
        *owned = true;
        return fvm_clients_get(r->slots[slot], i, out, x->d);
    }
    *out = r->slots[slot];
    return FVM_OK;
}

/* Client i's members of the segment's maps and zips (into mv) and, when
 * part is set, its step of every aggregation (into part); without part,
 * the members no aggregation reads are released. */
static fvm_status one_client(fvm_ctx *x, const seg_run *r, int64_t i, fvm_value **mv, fvm_value **part)
{
    fvm_status s = FVM_OK;
    for (int j = 0; j < r->sg->n && s == FVM_OK; j++) {
        const fvm_instr *in = &r->f->instrs[r->sg->instrs[j]];
        bool agg = r->pos[r->sg->instrs[j]] < 0;
        if (agg && !part)
            continue;
        fvm_argv av;
        fvm_value **argv = fvm_argv_init(&av, in->nargs);
        bool local[8] = {false}, *owned = in->nargs <= 8 ? local : calloc((size_t)in->nargs, sizeof *owned);
        if (!argv || !owned) {
            fvm_argv_free(&av);
            if (owned != local)
                free(owned);
            return fvm_nomem(x);
        }
        for (int k = 0; k < in->nargs && s == FVM_OK; k++)
            s = arg_for(x, r, in, k, i, mv, &argv[k], &owned[k]);
        if (s == FVM_OK) {
            if (in->op == FVM_OP_FEDERATED_MAP) {
                s = fvm_exec_call(x, in->a.fn, argv, &mv[j]);
            } else if (in->op == FVM_OP_FEDERATED_ZIP) {
                fvm_value *z = fvm_value_list(FVM_V_STRUCT, in->nargs);
                if (!z)
                    s = fvm_nomem(x);
                for (int k = 0; z && k < in->nargs; k++)
                    z->items[k] = fvm_value_retain(argv[k]);
                mv[j] = z;
            } else { /* an aggregation */
                fvm_value *next = NULL;
                s = fvm_agg_step(x, in, argv, part[j], &next);
                fvm_value_release(part[j]);
                part[j] = next;
            }
        }
        if (s) {
            fvm_diag_place_last(x->d, &in->loc, fvm_op_table[in->op].name, s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s);
            fvm_diag_add(x->d, s, &in->loc, "%s: the error above is client %lld's (counting from 0)",
                         fvm_op_table[in->op].name, (long long)i);
        }
        for (int k = 0; k < in->nargs; k++)
            if (owned[k])
                fvm_value_release(argv[k]);
        if (owned != local)
            free(owned);
        fvm_argv_free(&av);
    }
    if (s == FVM_OK && !part)
        for (int j = 0; j < r->sg->n; j++)
            if (mv[j] && !r->read_by_agg[j]) {
                fvm_value_release(mv[j]);
                mv[j] = NULL;
            }
    return s;
}

/* The aggregations' steps for client i, whose members are in mv. */
static fvm_status step_client(fvm_ctx *x, const seg_run *r, int64_t i, fvm_value **mv, fvm_value **part)
{
    fvm_status s = FVM_OK;
    for (int a = 0; a < r->nagg && s == FVM_OK; a++) {
        int j = r->aggs[a];
        const fvm_instr *in = &r->f->instrs[r->sg->instrs[j]];
        fvm_value *vals[2] = {NULL, NULL}, *next = NULL;
        bool owned[2] = {false, false};
        for (int k = 0; k < in->nargs && s == FVM_OK; k++)
            s = arg_for(x, r, in, k, i, mv, &vals[k], &owned[k]);
        if (s == FVM_OK)
            s = fvm_agg_step(x, in, vals, part[j], &next);
        if (s) {
            fvm_diag_place_last(x->d, &in->loc, fvm_op_table[in->op].name, s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s);
            fvm_diag_add(x->d, s, &in->loc, "%s: the error above is client %lld's (counting from 0)",
                         fvm_op_table[in->op].name, (long long)i);
        } else {
            fvm_value_release(part[j]);
            part[j] = next;
        }
        for (int k = 0; k < 2; k++)
            if (owned[k])
                fvm_value_release(vals[k]);
    }
    return s;
}

/* Task t, block b = block_lo + t: clients [16b, 16b + 16) of the segment;
 * *out is the struct of the block's partial of every aggregation, in order. */
static fvm_status block_task(fvm_ctx *x, void *u, int64_t t, fvm_value **out)
{
    const seg_run *r = u;
    int n = r->sg->n;
    int64_t b = r->block_lo + t;
    fvm_value **mv = calloc((size_t)n, sizeof *mv), **part = calloc((size_t)n, sizeof *part);
    fvm_value *res = fvm_value_list(FVM_V_STRUCT, r->nagg);
    fvm_status s = mv && part && res ? FVM_OK : fvm_nomem(x);
    int64_t lo = b * FVM_AGG_BLOCK, hi = lo + FVM_AGG_BLOCK < r->n ? lo + FVM_AGG_BLOCK : r->n;
    for (int64_t i = lo; i < hi && s == FVM_OK; i++) {
        s = one_client(x, r, i, mv, part);
        for (int j = 0; j < n; j++) { /* the client's members are done with */
            fvm_value_release(mv[j]);
            mv[j] = NULL;
        }
    }
    for (int a = 0; s == FVM_OK && a < r->nagg; a++) {
        res->items[a] = part[r->aggs[a]];
        part[r->aggs[a]] = NULL;
    }
    for (int j = 0; part && j < n; j++)
        fvm_value_release(part[j]);
    free(mv);
    free(part);
    if (s) {
        fvm_value_release(res);
        return s;
    }
    *out = res;
    return FVM_OK;
}

/* Task i (fewer blocks than workers): client chunk_lo + i's members that
 * the aggregations read, as a struct of the segment's positions. */
static fvm_status client_task(fvm_ctx *x, void *u, int64_t i, fvm_value **out)
{
    const seg_run *r = u;
    fvm_value *mv = fvm_value_list(FVM_V_STRUCT, r->sg->n);
    if (!mv)
        return fvm_nomem(x);
    fvm_status s = one_client(x, r, r->chunk_lo + i, mv->items, NULL);
    if (s) {
        fvm_value_release(mv);
        return s;
    }
    *out = mv;
    return FVM_OK;
}

/* Block partials when there are fewer blocks than workers: clients run in
 * parallel a chunk at a time, then their steps follow in client order, so
 * every block's partial is what block_task computes. */
static fvm_status by_clients(fvm_ctx *x, seg_run *r, int64_t nb, fvm_value **blocks)
{
    int64_t chunk = (int64_t)FVM_AGG_BLOCK * x->vm->backend->workers;
    fvm_value **mvs = calloc((size_t)chunk, sizeof *mvs), **part = calloc((size_t)r->sg->n, sizeof *part);
    fvm_status s = mvs && part ? FVM_OK : fvm_nomem(x);
    for (r->chunk_lo = 0; s == FVM_OK && r->chunk_lo < r->n; r->chunk_lo += chunk) {
        int64_t m = r->n - r->chunk_lo < chunk ? r->n - r->chunk_lo : chunk;
        s = x->vm->backend->iface->run(x->vm->backend, x, m, client_task, r, mvs);
        for (int64_t k = 0; k < m && s == FVM_OK; k++) {
            int64_t i = r->chunk_lo + k;
            s = step_client(x, r, i, mvs[k]->items, part);
            if (s == FVM_OK && ((i + 1) % FVM_AGG_BLOCK == 0 || i + 1 == r->n)) {
                int64_t b = i / FVM_AGG_BLOCK;
                if (!(blocks[b] = fvm_value_list(FVM_V_STRUCT, r->nagg)))
                    s = fvm_nomem(x);
                for (int a = 0; s == FVM_OK && a < r->nagg; a++) {
                    blocks[b]->items[a] = part[r->aggs[a]];
                    part[r->aggs[a]] = NULL;
                }
            }
        }
        for (int64_t k = 0; k < m; k++) {
            fvm_value_release(mvs[k]);
            mvs[k] = NULL;
        }
    }
    for (int j = 0; part && j < r->sg->n; j++)
        fvm_value_release(part[j]);
    free(part);
    free(mvs);
    if (s)
        for (int64_t b = 0; b < nb; b++) {
            fvm_value_release(blocks[b]);
            blocks[b] = NULL;
        }
    return s;
}

static fvm_status merge_partials(fvm_ctx *x, void *u, fvm_value *a, fvm_value *b, fvm_value **out)
{
    return fvm_agg_merge(x, u, a, b, out);
}

/* Hands the partials of m consecutive blocks (consumed) to the mergers of
 * the aggregations, in block order. */
static fvm_status merge_blocks(fvm_ctx *x, const seg_run *r, fvm_tree_merger *mergers, fvm_value **blocks, int64_t m)
{
    fvm_status s = FVM_OK;
    for (int64_t b = 0; b < m; b++) {
        for (int a = 0; s == FVM_OK && a < r->nagg; a++) {
            s = fvm_tree_push(x, &mergers[a], fvm_value_retain(blocks[b]->items[a]));
            if (s) {
                const fvm_instr *in = &r->f->instrs[r->sg->instrs[r->aggs[a]]];
                fvm_diag_place_last(x->d, &in->loc, fvm_op_table[in->op].name, s);
            }
        }
        fvm_value_release(blocks[b]);
        blocks[b] = NULL;
    }
    return s;
}

/* The number of clients: that of the lists from outside, else the VM's. */
static fvm_status count(fvm_ctx *x, const seg_run *r, int64_t *n)
{
    *n = -1;
    for (int j = 0; j < r->sg->n; j++) {
        const fvm_instr *in = &r->f->instrs[r->sg->instrs[j]];
        for (int k = 0; k < in->nargs; k++) {
            int slot = in->args[k], def = slot - r->f->nparams;
            if (!is_list(in->arg_types[k]) || (def >= 0 && r->pos[def] >= 0))
                continue;
            int64_t m = r->slots[slot]->n;
            if (*n >= 0 && m != *n)
                return fvm_diag_add(x->d, FVM_ERR_RUNTIME, &in->loc, "client values with %lld and %lld clients",
                                    (long long)*n, (long long)m);
            *n = m;
        }
    }
    return *n >= 0 ? FVM_OK : fvm_need_clients(x, n);
}

/* The aggregations' results over no clients. */
static fvm_status empty(fvm_ctx *x, const seg_run *r)
{
    for (int a = 0; a < r->nagg; a++) {
        const fvm_instr *in = &r->f->instrs[r->sg->instrs[r->aggs[a]]];
        fvm_value *args[2] = {NULL, NULL};
        for (int k = 0; k < in->nargs && k < 2; k++)
            args[k] = is_list(in->arg_types[k]) ? NULL : r->slots[in->args[k]];
        fvm_status s = fvm_agg_empty(x, in, args, &r->slots[in->slot]);
        if (s) {
            fvm_diag_place_last(x->d, &in->loc, fvm_op_table[in->op].name, s);
            return s;
        }
    }
    return FVM_OK;
}

fvm_status fvm_exec_segment(fvm_ctx *x, const fvm_func *f, int sgi, fvm_value **slots)
{
    const fvm_segment *sg = &f->phases->segments[sgi];
    seg_run r = {.f = f, .sg = sg, .slots = slots};
    r.pos = malloc((size_t)f->ninstrs * sizeof *r.pos);
    r.aggs = malloc((size_t)sg->n * sizeof *r.aggs);
    r.read_by_agg = calloc((size_t)sg->n, sizeof *r.read_by_agg);
    if (!r.pos || !r.aggs || !r.read_by_agg) {
        free(r.pos);
        free(r.aggs);
        free(r.read_by_agg);
        return fvm_nomem(x);
    }
    for (int i = 0; i < f->ninstrs; i++)
        r.pos[i] = -1;
    for (int j = 0; j < sg->n; j++) {
        const fvm_instr *in = &f->instrs[sg->instrs[j]];
        if (fvm_phases_is_aggregation(in))
            r.aggs[r.nagg++] = j;
        else
            r.pos[sg->instrs[j]] = j; /* a map or zip: its members live in mv */
    }
    for (int a = 0; a < r.nagg; a++) {
        const fvm_instr *in = &f->instrs[sg->instrs[r.aggs[a]]];
        for (int k = 0; k < in->nargs; k++) {
            int def = in->args[k] - f->nparams;
            if (def >= 0 && r.pos[def] >= 0)
                r.read_by_agg[r.pos[def]] = true;
        }
    }
    fvm_status s = count(x, &r, &r.n);
    fvm_backend *be = x->vm->backend;
    int64_t nb = r.n > 0 ? (r.n + FVM_AGG_BLOCK - 1) / FVM_AGG_BLOCK : 0;
    int64_t chunk = nb < (int64_t)CHUNK_BLOCKS * be->workers ? nb : (int64_t)CHUNK_BLOCKS * be->workers;
    fvm_value **blocks = s ? NULL : calloc((size_t)(chunk ? chunk : 1), sizeof *blocks);
    fvm_tree_merger *mergers = s ? NULL : calloc((size_t)(r.nagg ? r.nagg : 1), sizeof *mergers);
    if (s == FVM_OK && (!blocks || !mergers))
        s = fvm_nomem(x);
    for (int a = 0; s == FVM_OK && a < r.nagg; a++) {
        fvm_reducer red = {.merge = merge_partials, .u = (void *)&f->instrs[sg->instrs[r.aggs[a]]]};
        fvm_tree_merger_init(&mergers[a], &red);
    }
    if (s == FVM_OK && r.n == 0) {
        s = empty(x, &r);
    } else if (s == FVM_OK && nb >= be->workers) {
        for (r.block_lo = 0; s == FVM_OK && r.block_lo < nb; r.block_lo += chunk) {
            int64_t m = nb - r.block_lo < chunk ? nb - r.block_lo : chunk;
            s = be->iface->run(be, x, m, block_task, &r, blocks);
            if (s == FVM_OK)
                s = merge_blocks(x, &r, mergers, blocks, m);
        }
    } else if (s == FVM_OK) {
        s = by_clients(x, &r, nb, blocks);
        if (s == FVM_OK)
            s = merge_blocks(x, &r, mergers, blocks, nb);
    }
    for (int a = 0; s == FVM_OK && r.n > 0 && a < r.nagg; a++) {
        const fvm_instr *in = &f->instrs[sg->instrs[r.aggs[a]]];
        fvm_value *acc = NULL;
        s = fvm_tree_finish(x, &mergers[a], &acc);
        if (s == FVM_OK)
            s = fvm_agg_finish(x, in, r.n, acc, &slots[in->slot]);
        if (s)
            fvm_diag_place_last(x->d, &in->loc, fvm_op_table[in->op].name, s);
    }
    for (int a = 0; mergers && a < r.nagg; a++)
        fvm_tree_merger_clear(&mergers[a]);
    free(mergers);
    free(blocks);
    free(r.pos);
    free(r.aggs);
    free(r.read_by_agg);
    return s;
}
