/* fuse_plan.c - planning chains of elementwise instructions that run as one pass over memory, once per function after checking. */
#include "fuse_plan.h"

#include <stdlib.h>
#include <string.h>

typedef struct planner {
    const fvm_func *f;
    int *uses; /* per slot: argument occurrences (the result counts once) */
    int *released_at; /* per slot: the instruction whose release list holds it, or -1 */
    int *chain_of; /* per instruction: the root of its chain, or -1 */
    int *mark; /* per instruction: in the chain being grown */
    int epoch;
} planner;

static bool in_chain(const planner *P, int i)
{
    return P->mark[i] == P->epoch;
}

/* The instruction making slot s, or -1 for a parameter. */
static int producer(const planner *P, int s)
{
    return s >= P->f->nparams ? s - P->f->nparams : -1;
}

/* The chain's inputs: slots its instructions read that none of them makes. */
static int count_inputs(const planner *P, const int *chain, int n, int *out)
{
    int nin = 0;
    for (int c = 0; c < n; c++) {
        const fvm_instr *in = &P->f->instrs[chain[c]];
        for (int k = 0; k < in->nargs; k++) {
            int s = in->args[k], p = producer(P, s);
            if (p >= 0 && in_chain(P, p))
                continue;
            bool seen = false;
            for (int j = 0; j < nin && !seen; j++)
                seen = out[j] == s;
            if (!seen) {
                if (nin == FVM_FUSED_MAX_IN)
                    return FVM_FUSED_MAX_IN + 1;
                out[nin++] = s;
            }
        }
    }
    return nin;
}

/* Can instruction p join the chain rooted at r as a member? Its value must
 * be used once, inside the chain; and the slots it reads must still be
 * alive at r: a slot another instruction between p and r releases would be
 * gone when r computes p. */
static bool can_join(const planner *P, int p, int r)
{
    const fvm_func *f = P->f;
    fvm_fstep st;
    int s = f->nparams + p;
    if (P->chain_of[p] >= 0 || in_chain(P, p) || !fvm_elementwise_step(&f->instrs[p], &st) || P->uses[s] != 1 ||
        s == f->result_slot)
        return false;
    const fvm_instr *in = &f->instrs[p];
    for (int k = 0; k < in->nargs; k++) {
        int rel = P->released_at[in->args[k]];
        if (rel > p && rel < r && !in_chain(P, rel))
            return false;
    }
    return true;
}

/* Grows the chain (chain[0..*n)) from instruction i's operands, depth first. */
static void grow(planner *P, int i, int r, int *chain, int *n)
{
    const fvm_instr *in = &P->f->instrs[i];
    for (int k = 0; k < in->nargs; k++) {
        int p = producer(P, in->args[k]), scratch[FVM_FUSED_MAX_IN + 1];
        if (p < 0 || *n == FVM_FUSED_MAX_STEPS || !can_join(P, p, r))
            continue;
        P->mark[p] = P->epoch;
        chain[(*n)++] = p;
        if (count_inputs(P, chain, *n, scratch) > FVM_FUSED_MAX_IN) {
            P->mark[p] = -1;
            (*n)--;
            continue;
        }
        grow(P, p, r, chain, n);
    }
}

/* Does instruction r release an operand that is not a scalar (a tensor of rank 1 or more, or a struct),
 * whose buffers its result could then take (fuse.h)? A lone instruction becomes a chain of one step for
 * that: an accumulation acc + g then writes into acc. */
static bool gives_buffer(const planner *P, int r)
{
    const fvm_instr *in = &P->f->instrs[r];
    for (int k = 0; k < in->nrelease; k++)
        for (int j = 0; j < in->nargs; j++)
            if (in->release[k] == in->args[j] &&
                (in->arg_types[j]->kind == FVM_T_STRUCT ||
                 (in->arg_types[j]->kind == FVM_T_TENSOR && in->arg_types[j]->u.tensor.dims.rank > 0)))
                return true;
    return false;
}

static int by_index(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The chain of root r and members chain[1..n) as an fvm_fused in arena a. */
static fvm_fused *make_chain(planner *P, fvm_arena *a, int *chain, int n)
{
    const fvm_func *f = P->f;
    qsort(chain, (size_t)n, sizeof *chain, by_index); /* members, then the root (the largest index) */
    int ins[FVM_FUSED_MAX_IN + 1];
    int nin = count_inputs(P, chain, n, ins), nrel = 0;
    for (int c = 0; c < n; c++)
        nrel += f->instrs[chain[c]].nrelease;
    fvm_fused *z = fvm_arena_alloc(a, sizeof *z);
    if (!z)
        return NULL;
    z->root = chain[n - 1];
    z->nmembers = n - 1;
    z->members = fvm_arena_array(a, (size_t)n, sizeof(int));
    z->nin = nin;
    z->in = fvm_arena_array(a, (size_t)nin, sizeof(int));
    z->nsteps = n;
    z->steps = fvm_arena_array(a, (size_t)n, sizeof(fvm_fstep));
    z->release = fvm_arena_array(a, (size_t)nrel + 1, sizeof(int));
    if (!z->members || !z->in || !z->steps || !z->release)
        return NULL;
    memcpy(z->members, chain, (size_t)(n - 1) * sizeof(int));
    memcpy(z->in, ins, (size_t)nin * sizeof(int));
    for (int c = 0; c < n; c++) {
        const fvm_instr *in = &f->instrs[chain[c]];
        fvm_elementwise_step(in, &z->steps[c]);
        for (int k = 0; k < in->nargs; k++) {
            int s = in->args[k], p = producer(P, s), arg = -1;
            for (int t = 0; t < c && arg == -1; t++)
                if (chain[t] == p)
                    arg = -t - 1;
            for (int j = 0; j < nin && arg == -1; j++)
                if (ins[j] == s)
                    arg = j;
            z->steps[c].arg[k] = arg;
        }
        for (int k = 0; k < in->nrelease; k++)
            z->release[z->nrelease++] = in->release[k];
    }
    return z;
}

static bool is_matrix(const fvm_type *t, int rank)
{
    return t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_F32 && t->u.tensor.dims.rank == rank;
}

static bool is_bin(const fvm_fstep *st, fvm_binary op)
{
    return st->kind == FVM_FS_BINARY && st->op == (int)op;
}

/* Chain z (planned, its instructions in chain_of) as an update base -
 * scale * product of a matmul only it reads (fuse_plan.h): sets z->product
 * and defers the matmul to the root, when the matmul's operands are still
 * alive there. In arena a; false when out of memory. */
static bool take_product(planner *P, fvm_arena *a, fvm_fusion *fu, fvm_fused *z)
{
    const fvm_func *f = P->f;
    z->product = -1;
    const fvm_fstep *m = &z->steps[0], *u = &z->steps[z->nsteps - 1];
    bool acc = z->nsteps == 1 && is_bin(u, FVM_BIN_ADD) && u->arg[0] >= 0 && u->arg[1] >= 0; /* add(base, product) */
    if (!acc &&
        (z->nsteps != 2 || !is_bin(m, FVM_BIN_MUL) || !is_bin(u, FVM_BIN_SUB) || u->arg[0] < 0 || u->arg[1] != -1))
        return true;
    for (int side = 0; side < (acc ? 1 : 2); side++) {
        int pi = acc ? u->arg[1] : m->arg[side], si = acc ? -1 : m->arg[1 - side];
        int p = pi >= 0 ? producer(P, z->in[pi]) : -1;
        if (p < 0 || (!acc && si < 0) || f->instrs[p].op != FVM_OP_MATMUL || P->uses[z->in[pi]] != 1)
            continue;
        const fvm_instr *mm = &f->instrs[p];
        const fvm_type *base = f->instrs[z->root].arg_types[0];
        if (!is_matrix(mm->arg_types[0], 2) || !is_matrix(mm->arg_types[1], 2) || !is_matrix(mm->type, 2) ||
            !is_matrix(base, 2) || (!acc && !is_matrix(f->instrs[z->members[0]].arg_types[1 - side], 0)))
            continue;
        bool alive = true;
        for (int k = 0; k < mm->nargs; k++) {
            int rel = P->released_at[mm->args[k]];
            alive = alive && !(rel > p && rel < z->root && P->chain_of[rel] != z->root);
        }
        if (!alive)
            continue;
        int *rel = fvm_arena_array(a, (size_t)(z->nrelease + mm->nrelease) + 1, sizeof *rel);
        if (!rel)
            return false;
        memcpy(rel, z->release, (size_t)z->nrelease * sizeof *rel);
        memcpy(rel + z->nrelease, mm->release, (size_t)mm->nrelease * sizeof *rel);
        z->release = rel;
        z->nrelease += mm->nrelease;
        z->product = p;
        z->product_in = pi;
        z->scale_in = si;
        z->base_in = u->arg[0];
        fu->deferred[p] = true;
        return true;
    }
    return true;
}

fvm_fusion *fvm_fusion_plan(fvm_arena *a, const fvm_func *f)
{
    if (f->phases || f->ninstrs < 2)
        return NULL;
    planner P = {.f = f, .epoch = 0};
    P.uses = fvm_arena_array(a, (size_t)f->nslots + 1, sizeof(int));
    P.released_at = fvm_arena_array(a, (size_t)f->nslots + 1, sizeof(int));
    P.chain_of = fvm_arena_array(a, (size_t)f->ninstrs, sizeof(int));
    P.mark = fvm_arena_array(a, (size_t)f->ninstrs, sizeof(int));
    fvm_fusion *fu = fvm_arena_alloc(a, sizeof *fu);
    if (!P.uses || !P.released_at || !P.chain_of || !P.mark || !fu)
        return NULL;
    fu->chain_at = fvm_arena_array(a, (size_t)f->ninstrs, sizeof(fvm_fused *));
    fu->deferred = fvm_arena_array(a, (size_t)f->ninstrs, sizeof(bool));
    if (!fu->chain_at || !fu->deferred)
        return NULL;
    for (int s = 0; s < f->nslots; s++)
        P.released_at[s] = -1;
    for (int i = 0; i < f->ninstrs; i++) {
        const fvm_instr *in = &f->instrs[i];
        P.chain_of[i] = P.mark[i] = -1;
        for (int k = 0; k < in->nargs; k++)
            P.uses[in->args[k]]++;
        for (int k = 0; k < in->nrelease; k++)
            P.released_at[in->release[k]] = i;
    }
    if (f->result_slot >= 0)
        P.uses[f->result_slot]++;
    bool any = false;
    fvm_fstep st;
    for (int r = f->ninstrs - 1; r >= 0; r--) {
        if (P.chain_of[r] >= 0 || !fvm_elementwise_step(&f->instrs[r], &st))
            continue;
        int chain[FVM_FUSED_MAX_STEPS], n = 1;
        P.epoch = r;
        P.mark[r] = r;
        chain[0] = r;
        grow(&P, r, r, chain, &n);
        if (n < 2 && !gives_buffer(&P, r))
            continue;
        fvm_fused *z = make_chain(&P, a, chain, n);
        if (!z)
            return NULL;
        for (int c = 0; c < n; c++)
            P.chain_of[chain[c]] = r;
        for (int m = 0; m < z->nmembers; m++)
            fu->deferred[z->members[m]] = true;
        if (!take_product(&P, a, fu, z))
            return NULL;
        fu->chain_at[r] = z;
        any = true;
    }
    return any ? fu : NULL;
}
