/* phases.c - segments of per-client work and the aggregations consuming it, and a schedule that runs
 * each segment as one step (see phases.h). */
#include "phases.h"

#include <stdlib.h>
#include <string.h>

static bool is_list(const fvm_type *t)
{
    return t && t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
}

bool fvm_phases_is_aggregation(const fvm_instr *in)
{
    if (!(fvm_op_table[in->op].flags & OPF_AGG))
        return false;
    for (int k = 0; k < in->nargs; k++)
        if (is_list(in->arg_types[k]))
            return true;
    return false;
}

/* Makes a {T}@CLIENTS list one member per client. */
static bool is_producer(const fvm_instr *in)
{
    return (in->op == FVM_OP_FEDERATED_MAP || in->op == FVM_OP_FEDERATED_ZIP) && is_list(in->type);
}

static int find(int *parent, int i)
{
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

/* Working state of one plan. */
typedef struct plan {
    const fvm_func *f;
    int n;
    int *def; /* per slot: the defining instruction, or -1 for a parameter */
    int *comp; /* per instruction: its component root, or -1 (not fused) */
    int *node; /* per instruction: its node in the contracted graph */
    int nnodes;
    int *order; /* the schedule, as nodes */
} plan;

/* Node ids: an unfused instruction is its own node; a component's members
 * share the node of the component's root. Returns the node count. */
static int number_nodes(plan *P)
{
    int nn = 0;
    for (int i = 0; i < P->n; i++)
        P->node[i] = -1;
    for (int i = 0; i < P->n; i++) {
        int c = P->comp[i];
        if (c < 0)
            P->node[i] = nn++;
        else if (P->node[c] < 0)
            P->node[i] = P->node[c] = nn++;
        else
            P->node[i] = P->node[c];
    }
    return nn;
}

/* A topological order of the contracted graph, preferring the written order
 * (the node whose first instruction comes first). Returns false on a cycle,
 * after marking the components left on it as not fused. */
static bool schedule(plan *P, int *indeg, int *first, bool *done)
{
    const fvm_func *f = P->f;
    int nn = P->nnodes = number_nodes(P);
    for (int v = 0; v < nn; v++) {
        indeg[v] = 0;
        first[v] = P->n;
        done[v] = false;
    }
    for (int i = 0; i < P->n; i++) {
        if (i < first[P->node[i]])
            first[P->node[i]] = i;
        const fvm_instr *in = &f->instrs[i];
        for (int k = 0; k < in->nargs; k++) {
            int j = P->def[in->args[k]];
            if (j >= 0 && P->node[j] != P->node[i])
                indeg[P->node[i]]++;
        }
    }
    for (int placed = 0; placed < nn; placed++) {
        int best = -1;
        for (int v = 0; v < nn; v++)
            if (!done[v] && indeg[v] == 0 && (best < 0 || first[v] < first[best]))
                best = v;
        if (best < 0) {
            /* a cycle through a component: leave those components unfused */
            for (int i = 0; i < P->n; i++)
                if (!done[P->node[i]] && P->comp[i] >= 0)
                    P->comp[i] = -1;
            return false;
        }
        done[best] = true;
        P->order[placed] = best;
        for (int i = 0; i < P->n; i++) {
            if (P->node[i] == best)
                continue;
            const fvm_instr *in = &f->instrs[i];
            for (int k = 0; k < in->nargs; k++) {
                int j = P->def[in->args[k]];
                if (j >= 0 && P->node[j] == best)
                    indeg[P->node[i]]--;
            }
        }
    }
    return true;
}

/* Groups maps, zips and aggregations into components (comp[i]: the root's
 * index) and drops those that cannot fuse. Returns whether any is left. */
static bool components(plan *P, int *parent, bool *bad, bool *has_agg)
{
    const fvm_func *f = P->f;
    for (int i = 0; i < P->n; i++) {
        parent[i] = i;
        bad[i] = has_agg[i] = false;
    }
    for (int i = 0; i < P->n; i++) {
        const fvm_instr *in = &f->instrs[i];
        bool member = is_producer(in) || fvm_phases_is_aggregation(in);
        for (int k = 0; k < in->nargs; k++) {
            int j = P->def[in->args[k]];
            if (j < 0 || !is_producer(&f->instrs[j]) || !is_list(in->arg_types[k]))
                continue;
            if (member)
                parent[find(parent, i)] = find(parent, j);
            else
                bad[j] = true; /* a list used by another op: it must exist whole */
        }
    }
    if (f->result_slot >= 0 && P->def[f->result_slot] >= 0)
        bad[P->def[f->result_slot]] = true;
    for (int i = 0; i < P->n; i++) {
        const fvm_instr *in = &f->instrs[i];
        int r = find(parent, i);
        if (bad[i])
            bad[r] = true;
        if (fvm_phases_is_aggregation(in))
            has_agg[r] = true;
    }
    bool any = false;
    for (int i = 0; i < P->n; i++) {
        const fvm_instr *in = &f->instrs[i];
        int r = find(parent, i);
        bool member = is_producer(in) || fvm_phases_is_aggregation(in);
        P->comp[i] = member && !bad[r] && has_agg[r] ? r : -1;
        any = any || P->comp[i] >= 0;
    }
    return any;
}

/* Builds the arena copy: segments, steps and their releases. */
static fvm_phases *emit(fvm_arena *a, plan *P)
{
    const fvm_func *f = P->f;
    fvm_phases *ph = fvm_arena_alloc(a, sizeof *ph);
    if (!ph)
        return NULL;
    memset(ph, 0, sizeof *ph);
    ph->segment_of = fvm_arena_array(a, (size_t)P->n + 1, sizeof(int));
    ph->steps = fvm_arena_array(a, (size_t)P->nnodes + 1, sizeof *ph->steps);
    int *seg_of_node = fvm_arena_array(a, (size_t)P->nnodes + 1, sizeof(int));
    int *last = fvm_arena_array(a, (size_t)f->nslots + 1, sizeof(int));
    int *count = fvm_arena_array(a, (size_t)P->nnodes + 1, sizeof(int));
    if (!ph->segment_of || !ph->steps || !seg_of_node || !last || !count)
        return NULL;
    for (int v = 0; v < P->nnodes; v++)
        seg_of_node[v] = -1;
    /* segments, numbered in schedule order */
    for (int t = 0; t < P->nnodes; t++) {
        int v = P->order[t];
        int members = 0;
        for (int i = 0; i < P->n; i++)
            members += P->node[i] == v && P->comp[i] >= 0;
        if (members)
            seg_of_node[v] = ph->nsegments++;
    }
    ph->segments = fvm_arena_array(a, (size_t)ph->nsegments + 1, sizeof *ph->segments);
    if (!ph->segments)
        return NULL;
    for (int i = 0; i < P->n; i++) {
        int sg = P->comp[i] >= 0 ? seg_of_node[P->node[i]] : -1;
        ph->segment_of[i] = sg;
        if (sg >= 0)
            ph->segments[sg].n++;
    }
    for (int sg = 0; sg < ph->nsegments; sg++) {
        ph->segments[sg].instrs = fvm_arena_array(a, (size_t)ph->segments[sg].n, sizeof(int));
        if (!ph->segments[sg].instrs)
            return NULL;
        ph->segments[sg].n = 0;
    }
    for (int i = 0; i < P->n; i++)
        if (ph->segment_of[i] >= 0) {
            fvm_segment *s = &ph->segments[ph->segment_of[i]];
            s->instrs[s->n++] = i;
        }
    /* steps, and the last use of every slot in schedule order */
    for (int s = 0; s < f->nslots; s++)
        last[s] = -1;
    for (int t = 0; t < P->nnodes; t++) {
        int v = P->order[t];
        fvm_step *st = &ph->steps[t];
        st->segment = seg_of_node[v];
        st->instr = -1;
        count[t] = 0;
        for (int i = 0; i < P->n; i++) {
            if (P->node[i] != v)
                continue;
            if (st->segment < 0)
                st->instr = i;
            const fvm_instr *in = &f->instrs[i];
            for (int k = 0; k < in->nargs; k++)
                last[in->args[k]] = t;
        }
    }
    ph->nsteps = P->nnodes;
    if (f->result_slot >= 0)
        last[f->result_slot] = P->nnodes; /* returned, never released */
    /* lists made inside a segment never reach a slot; other values are
     * released after their last use, or right after their step if unused */
    int *step_of_instr = fvm_arena_array(a, (size_t)P->n + 1, sizeof(int));
    if (!step_of_instr)
        return NULL;
    for (int t = 0; t < P->nnodes; t++)
        for (int i = 0; i < P->n; i++)
            if (P->node[i] == P->order[t])
                step_of_instr[i] = t;
    for (int pass = 0; pass < 2; pass++) {
        for (int s = f->nparams; s < f->nslots; s++) {
            int i = P->def[s];
            if (ph->segment_of[i] >= 0 && is_producer(&f->instrs[i]))
                continue;
            int t = last[s] >= 0 ? last[s] : step_of_instr[i];
            if (t >= P->nnodes)
                continue;
            if (pass == 0)
                count[t]++;
            else
                ph->steps[t].release[ph->steps[t].nrelease++] = s;
        }
        for (int s = 0; s < f->nparams; s++) {
            int t = last[s];
            if (t < 0 || t >= P->nnodes)
                continue; /* unused parameters are released at entry */
            if (pass == 0)
                count[t]++;
            else
                ph->steps[t].release[ph->steps[t].nrelease++] = s;
        }
        if (pass == 0)
            for (int t = 0; t < P->nnodes; t++)
                if (!(ph->steps[t].release = fvm_arena_array(a, (size_t)count[t] + 1, sizeof(int))))
                    return NULL;
    }
    return ph;
}

fvm_phases *fvm_phases_plan(fvm_arena *a, const fvm_func *f)
{
    if (!f->federated || f->ninstrs == 0)
        return NULL;
    plan P = {.f = f, .n = f->ninstrs};
    size_t n = (size_t)f->ninstrs;
    P.def = malloc((size_t)f->nslots * sizeof *P.def);
    P.comp = malloc(n * sizeof *P.comp);
    P.node = malloc(n * sizeof *P.node);
    P.order = malloc(n * sizeof *P.order);
    int *parent = malloc(n * sizeof *parent), *indeg = malloc(n * sizeof *indeg), *first = malloc(n * sizeof *first);
    bool *bad = malloc(n * sizeof *bad), *has_agg = malloc(n * sizeof *has_agg), *done = malloc(n * sizeof *done);
    fvm_phases *ph = NULL;
    if (!P.def || !P.comp || !P.node || !P.order || !parent || !indeg || !first || !bad || !has_agg || !done)
        goto out;
    for (int s = 0; s < f->nslots; s++)
        P.def[s] = -1;
    for (int i = 0; i < f->ninstrs; i++)
        P.def[f->instrs[i].slot] = i;
    if (!components(&P, parent, bad, has_agg))
        goto out;
    /* each failed attempt unfuses at least one component */
    bool ok = false;
    for (int tries = 0; tries <= f->ninstrs && !ok; tries++) {
        ok = schedule(&P, indeg, first, done);
        bool any = false;
        for (int i = 0; i < f->ninstrs; i++)
            any = any || P.comp[i] >= 0;
        if (!any)
            goto out;
    }
    if (ok)
        ph = emit(a, &P);
out:
    free(P.def);
    free(P.comp);
    free(P.node);
    free(P.order);
    free(parent);
    free(indeg);
    free(first);
    free(bad);
    free(has_agg);
    free(done);
    return ph;
}
