/* fuse.c - chains of elementwise instructions run as one pass over memory: planned once per function, run by the interpreter. */
#include "fuse.h"

#include <string.h>

#include "exec.h"

/* The kernel step of an elementwise instruction; false for other ops. */
static bool step_of(const fvm_instr *in, fvm_fstep *st)
{
    memset(st, 0, sizeof *st);
    switch (in->op) {
    case FVM_OP_NEG: case FVM_OP_ABS: case FVM_OP_EXP: case FVM_OP_LOG: case FVM_OP_SQRT:
    case FVM_OP_TANH: case FVM_OP_SIGMOID: case FVM_OP_RELU: case FVM_OP_NOT:
        st->kind = FVM_FS_UNARY;
        st->op = (int)fvm_unary_of(in->op);
        return true;
    case FVM_OP_ADD: case FVM_OP_SUB: case FVM_OP_MUL: case FVM_OP_DIV: case FVM_OP_POW:
    case FVM_OP_MAXIMUM: case FVM_OP_MINIMUM: case FVM_OP_EQ: case FVM_OP_NE: case FVM_OP_LT:
    case FVM_OP_LE: case FVM_OP_GT: case FVM_OP_GE: case FVM_OP_AND: case FVM_OP_OR:
        st->kind = FVM_FS_BINARY;
        st->op = (int)fvm_binary_of(in->op);
        return true;
    case FVM_OP_SELECT:
        st->kind = FVM_FS_SELECT;
        return true;
    case FVM_OP_CAST:
        st->kind = FVM_FS_CAST;
        st->dtype = in->a.dtype;
        return true;
    case FVM_OP_ZEROS_LIKE:
    case FVM_OP_ONES_LIKE:
        st->kind = FVM_FS_FILL;
        st->value = in->op == FVM_OP_ONES_LIKE ? 1.0 : 0.0;
        return true;
    default:
        return false;
    }
}

/* ---- planning ------------------------------------------------------------------------ */

typedef struct planner {
    const fvm_func *f;
    int *uses;        /* per slot: argument occurrences (the result counts once) */
    int *released_at; /* per slot: the instruction whose release list holds it, or -1 */
    int *chain_of;    /* per instruction: the root of its chain, or -1 */
    int *mark;        /* per instruction: in the chain being grown */
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
    if (P->chain_of[p] >= 0 || in_chain(P, p) || !step_of(&f->instrs[p], &st) || P->uses[s] != 1 ||
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
        step_of(in, &z->steps[c]);
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
        if (P.chain_of[r] >= 0 || !step_of(&f->instrs[r], &st))
            continue;
        int chain[FVM_FUSED_MAX_STEPS], n = 1;
        P.epoch = r;
        P.mark[r] = r;
        chain[0] = r;
        grow(&P, r, r, chain, &n);
        if (n < 2)
            continue;
        fvm_fused *z = make_chain(&P, a, chain, n);
        if (!z)
            return NULL;
        for (int c = 0; c < n; c++)
            P.chain_of[chain[c]] = r;
        for (int m = 0; m < z->nmembers; m++)
            fu->deferred[z->members[m]] = true;
        fu->chain_at[r] = z;
        any = true;
    }
    return any ? fu : NULL;
}

/* ---- running ------------------------------------------------------------------------- */

/* Do the inputs (tensors, or structs of tensors of one size) fit the fused
 * kernel, leaf by leaf? */
static bool fits(const fvm_fused *c, fvm_value *const *vs)
{
    const fvm_value *s = NULL;
    for (int k = 0; k < c->nin; k++) {
        if (vs[k]->kind == FVM_V_STRUCT && !s)
            s = vs[k];
        else if (vs[k]->kind == FVM_V_STRUCT && vs[k]->n != s->n)
            return false;
        else if (vs[k]->kind != FVM_V_TENSOR && vs[k]->kind != FVM_V_STRUCT)
            return false;
    }
    if (!s) {
        const fvm_tensor *ts[FVM_FUSED_MAX_IN];
        fvm_dims b = vs[0]->t.shape;
        fvm_dtype dt;
        for (int k = 0; k < c->nin; k++) {
            ts[k] = &vs[k]->t;
            if (fvm_dims_broadcast(&b, &ts[k]->shape, &b, NULL))
                return false;
        }
        return fvm_k_fused_dtype(c->steps, c->nsteps, ts, c->nin, &dt);
    }
    for (int64_t i = 0; i < s->n; i++) {
        fvm_value *sub[FVM_FUSED_MAX_IN];
        for (int k = 0; k < c->nin; k++)
            sub[k] = vs[k]->kind == FVM_V_STRUCT ? vs[k]->items[i] : vs[k];
        if (!fits(c, sub))
            return false;
    }
    return true;
}

/* The chain over inputs vs (checked by fits); owned[k]: nothing but this
 * chain holds vs[k], so its buffer may take the result. */
static fvm_status run_lifted(fvm_ctx *x, const fvm_fused *c, fvm_value *const *vs, const bool *owned, fvm_value **out)
{
    const fvm_value *s = NULL;
    for (int k = 0; k < c->nin && !s; k++)
        if (vs[k]->kind == FVM_V_STRUCT)
            s = vs[k];
    if (s) {
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, s->n);
        if (!r)
            return fvm_nomem(x);
        for (int64_t i = 0; i < s->n; i++) {
            fvm_value *sub[FVM_FUSED_MAX_IN];
            bool sub_owned[FVM_FUSED_MAX_IN];
            for (int k = 0; k < c->nin; k++) {
                bool st = vs[k]->kind == FVM_V_STRUCT;
                sub[k] = st ? vs[k]->items[i] : vs[k];
                /* a tensor input meets every leaf: shared */
                sub_owned[k] = st && owned[k] && __atomic_load_n(&sub[k]->refs, __ATOMIC_ACQUIRE) == 1;
            }
            fvm_status e = run_lifted(x, c, sub, sub_owned, &r->items[i]);
            if (e) {
                fvm_value_release(r);
                return e;
            }
        }
        *out = r;
        return FVM_OK;
    }
    const fvm_tensor *ts[FVM_FUSED_MAX_IN];
    fvm_dims shape = vs[0]->t.shape;
    fvm_dtype dt;
    for (int k = 0; k < c->nin; k++) {
        ts[k] = &vs[k]->t;
        fvm_dims_broadcast(&shape, &ts[k]->shape, &shape, NULL); /* checked by fits */
    }
    fvm_k_fused_dtype(c->steps, c->nsteps, ts, c->nin, &dt);
    fvm_value *o = NULL;
    for (int k = 0; k < c->nin && !o; k++)
        if (owned[k] && ts[k]->buf && __atomic_load_n(&ts[k]->buf->refs, __ATOMIC_ACQUIRE) == 1 &&
            ts[k]->dtype == dt && fvm_dims_equal(&ts[k]->shape, &shape)) {
            fvm_tensor t = *ts[k];
            fvm_tensor_retain(&t);
            if (!(o = fvm_value_tensor_take(&t))) {
                fvm_tensor_release(&t);
                return fvm_nomem(x);
            }
        }
    fvm_status e = o ? FVM_OK : fvm_new_tensor(x, dt, &shape, &o);
    if (e == FVM_OK && (e = fvm_k_fused(c->steps, c->nsteps, ts, c->nin, &o->t, x->d))) {
        fvm_value_release(o);
        return e;
    }
    *out = o;
    return e;
}

fvm_status fvm_exec_fused(fvm_ctx *x, const fvm_func *f, const fvm_fused *c, fvm_value **slots)
{
    fvm_value *vs[FVM_FUSED_MAX_IN];
    bool owned[FVM_FUSED_MAX_IN];
    for (int k = 0; k < c->nin; k++) {
        vs[k] = slots[c->in[k]];
        bool dies = false;
        for (int j = 0; j < c->nrelease && !dies; j++)
            dies = c->release[j] == c->in[k];
        owned[k] = dies && __atomic_load_n(&vs[k]->refs, __ATOMIC_ACQUIRE) == 1;
    }
    if (!fits(c, vs)) { /* one by one, where the root stands */
        fvm_status s = FVM_OK;
        for (int m = 0; m < c->nmembers && s == FVM_OK; m++)
            s = fvm_exec_instr(x, &f->instrs[c->members[m]], slots);
        return s ? s : fvm_exec_instr(x, &f->instrs[c->root], slots);
    }
    const fvm_instr *root = &f->instrs[c->root];
    fvm_value *res = NULL;
    fvm_status s = run_lifted(x, c, vs, owned, &res);
    if (s) {
        fvm_diag_place_last(x->d, &root->loc, fvm_op_table[root->op].name, s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s);
        return s;
    }
    slots[root->slot] = res;
    return FVM_OK;
}
