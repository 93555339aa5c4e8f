/* inline_body.c - a local function's body with its calls and derivatives inlined and its struct chains split per field (see inline_body.h). */
#include "inline_body.h"

#include <stdint.h>
#include <string.h>

#include "fuse_plan.h"
#include "../core/doc.h"
#include "../core/names.h"
#include "../ir/check.h"
#include "../ir/elementwise.h"

/* Calls and derivatives inlined inside inlined ones, at most this deep. */
#define MAX_DEPTH 8

typedef struct body {
    fvm_program *p;
    fvm_arena *a;
    fvm_instr *ins;
    bool *inlined; /* per instruction: copied from a pullback or made by this pass (may be dropped unused) */
    const fvm_instr **src; /* per instruction: the checked one it has the op of (types for cannot_fail), or NULL */
    int n, cap;
    fvm_names names; /* names bound so far to the index of the instruction binding each, -1 for a parameter */
    fvm_names fields; /* "i s" to the name bound to field i of s, where the body takes it */
    const fvm_func *f; /* whose body it is */
    bool failed;
} body;

/* The instruction binding name (-1: a parameter), or -2 when none does. */
static int lookup(const body *B, const char *name)
{
    return fvm_names_get(&B->names, name, -2);
}

/* A name no instruction or parameter of the body has: base, else base#2, base#3, ... */
static const char *claim(body *B, const char *base)
{
    const char *name = base;
    for (int k = 2; name && lookup(B, name) != -2; k++)
        name = fvm_arena_printf(B->a, "%s#%d", base, k);
    return name;
}

/* A new instruction of the body, a copy of like (its location, origin, attributes and derived
 * function) made op[attrs](args) and bound to a new name from base; its checker fields cleared
 * for the checker to fill. NULL after running out of memory or past FVM_INLINE_MAX. */
static const char *emit(body *B, const fvm_instr *like, const char *base, fvm_op op, const fvm_doc *attrs, int nargs,
                        const char *const *args, bool inlined)
{
    if (B->failed)
        return NULL;
    if (B->n == B->cap) {
        int cap = B->cap ? 2 * B->cap : 64;
        fvm_instr *ins = cap <= FVM_INLINE_MAX ? fvm_arena_array(B->a, (size_t)cap, sizeof *ins) : NULL;
        bool *fl = ins ? fvm_arena_array(B->a, (size_t)cap, sizeof *fl) : NULL;
        const fvm_instr **src = fl ? fvm_arena_array(B->a, (size_t)cap, sizeof *src) : NULL;
        if (!src) {
            B->failed = true;
            return NULL;
        }
        if (B->n) {
            memcpy(ins, B->ins, (size_t)B->n * sizeof *ins);
            memcpy(fl, B->inlined, (size_t)B->n * sizeof *fl);
            memcpy(src, B->src, (size_t)B->n * sizeof *src);
        }
        B->ins = ins, B->inlined = fl, B->src = src, B->cap = cap;
    }
    const char *name = claim(B, base);
    const char **names = fvm_arena_array(B->a, (size_t)nargs + 1, sizeof *names);
    fvm_loc *locs = fvm_arena_array(B->a, (size_t)nargs + 1, sizeof *locs);
    if (!name || !names || !locs || !fvm_names_put(&B->names, name, B->n)) {
        B->failed = true;
        return NULL;
    }
    fvm_instr *in = &B->ins[B->n];
    B->src[B->n] = op == like->op ? like : NULL;
    B->inlined[B->n++] = inlined;
    *in = (fvm_instr){.name = name,
                      .op = op,
                      .attrs = attrs,
                      .nargs = nargs,
                      .arg_names = names,
                      .arg_locs = locs,
                      .loc = like->loc,
                      .name_loc = like->name_loc,
                      .attrs_loc = like->attrs_loc,
                      .origin = like->origin};
    if (op == like->op) { /* a copy: the functions its attributes name, and what the passes derived */
        in->fn_locs = like->fn_locs;
        in->derived = like->derived;
    }
    for (int k = 0; k < nargs; k++) {
        names[k] = args[k];
        locs[k] = like->arg_locs && k < like->nargs ? like->arg_locs[k] : like->loc;
    }
    return name;
}

/* {} with flow layout, or NULL (failed set). */
static fvm_doc *object(body *B)
{
    fvm_doc *o = fvm_doc_new(B->a, FVM_DOC_OBJECT);
    if (!o)
        B->failed = true;
    else
        o->flow = true;
    return o;
}

/* The body's struct instruction binding name, or NULL. */
static const fvm_instr *built_struct(const body *B, const char *name)
{
    int i = name ? lookup(B, name) : -2;
    return i >= 0 && B->ins[i].op == FVM_OP_STRUCT ? &B->ins[i] : NULL;
}

/* fields' key of field i of the struct named s. */
static const char *field_key(body *B, const char *s, int64_t i)
{
    const char *key = fvm_arena_printf(B->a, "%lld %s", (long long)i, s);
    if (!key)
        B->failed = true;
    return key;
}

/* The name the body binds field i of the struct named s to, or NULL: each
 * field is taken once, so that the struct's last use comes before its
 * fields' (a field that dies alone may be updated in place). */
static const char *taken_field(body *B, const char *s, int64_t i)
{
    const char *key = field_key(B, s, i);
    int at = key ? fvm_names_get(&B->fields, key, -1) : -1;
    return at >= 0 ? B->ins[at].name : NULL;
}

/* The last instruction made takes field i of the struct named s. */
static void took_field(body *B, const char *s, int64_t i)
{
    const char *key = field_key(B, s, i);
    if (!B->failed && !fvm_names_put(&B->fields, key, B->n - 1))
        B->failed = true;
}

/* Field i of the struct named s: the operand, when the body builds s; the
 * field taken already; else a new field instruction. */
static const char *field_of(body *B, const fvm_instr *like, const char *s, int i)
{
    const fvm_instr *st = built_struct(B, s);
    if (st)
        return st->arg_names[i];
    const char *had = taken_field(B, s, i);
    if (had || B->failed)
        return had;
    fvm_doc *o = object(B);
    if (!o || fvm_doc_set(B->a, o, "index", fvm_doc_int(B->a, i))) {
        B->failed = true;
        return NULL;
    }
    const char *name = emit(B, like, fvm_arena_printf(B->a, "%s.%d", s, i), FVM_OP_FIELD, o, 1, &s, true);
    if (name)
        took_field(B, s, i);
    return name;
}

/* struct[names of t](args), bound to a name from base. */
static const char *make_struct(body *B, const fvm_instr *like, const char *base, const fvm_type *t,
                               const char *const *args)
{
    fvm_doc *o = NULL;
    bool named = t->u.strct.n > 0;
    for (int i = 0; i < t->u.strct.n; i++)
        named = named && t->u.strct.names[i];
    if (named) {
        fvm_doc *arr = fvm_doc_new(B->a, FVM_DOC_ARRAY);
        if (!(o = object(B)) || !arr) {
            B->failed = true;
            return NULL;
        }
        arr->flow = true;
        for (int i = 0; i < t->u.strct.n; i++)
            if (fvm_doc_push(B->a, arr, fvm_doc_string(B->a, t->u.strct.names[i])))
                B->failed = true;
        if (B->failed || fvm_doc_set(B->a, o, "names", arr)) {
            B->failed = true;
            return NULL;
        }
    }
    return emit(B, like, base, FVM_OP_STRUCT, o, t->u.strct.n, args, true);
}

/* The elementwise instruction in, on operands args of types types and
 * result type t (a struct): one instruction per field, each split again
 * where its operands still meet a struct the body builds, and their struct.
 * A tensor operand meets every field. */
static const char *split(body *B, const fvm_instr *in, const char *base, const fvm_type *t, const char *const *args,
                         const fvm_type *const *types)
{
    int n = t->u.strct.n;
    const char **leaves = fvm_arena_array(B->a, (size_t)n + 1, sizeof *leaves);
    if (!leaves) {
        B->failed = true;
        return NULL;
    }
    for (int i = 0; i < n && !B->failed; i++) {
        const char *largs[3];
        const fvm_type *ltypes[3];
        bool meets = false;
        for (int k = 0; k < in->nargs; k++) {
            bool st = types[k]->kind == FVM_T_STRUCT;
            largs[k] = st ? field_of(B, in, args[k], i) : args[k];
            ltypes[k] = st ? types[k]->u.strct.elems[i] : types[k];
            meets = meets || (ltypes[k]->kind == FVM_T_STRUCT && built_struct(B, largs[k]));
        }
        const fvm_type *lt = t->u.strct.elems[i];
        const char *lbase = fvm_arena_printf(B->a, "%s.%d", base, i);
        if (B->failed || !lbase)
            break;
        leaves[i] = lt->kind == FVM_T_STRUCT && meets ? split(B, in, lbase, lt, largs, ltypes)
                                                      : emit(B, in, lbase, in->op, in->attrs, in->nargs, largs, true);
    }
    return B->failed ? NULL : make_struct(B, in, base, t, leaves);
}

static const char *take(body *B, const fvm_func *f, const char **map, const char *prefix, int depth);

/* Is every value of type a (compatible with t: checked) one of type t, so
 * that an entry check of t would always pass? Every dim t knows, a knows. */
static bool refines(const fvm_type *a, const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_TENSOR:
        for (int i = 0; i < t->u.tensor.dims.rank; i++)
            if (t->u.tensor.dims.d[i] >= 0 && a->u.tensor.dims.d[i] < 0)
                return false;
        return true;
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (!refines(a->u.strct.elems[i], t->u.strct.elems[i]))
                return false;
        return true;
    case FVM_T_SEQ:
        return refines(a->u.seq.elem, t->u.seq.elem);
    default:
        return false;
    }
}

/* Does g, called by instruction in with its first n operands, run without
 * an entry check, or with one its operands' types always pass? Inlined, it
 * runs none. */
static bool fits_entry(const fvm_instr *in, const fvm_func *g, int n)
{
    for (int k = 0; g->entry_check && k < n; k++)
        if (!refines(in->arg_types[k], g->param_types[k]))
            return false;
    return true;
}

/* Can grad or value_and_grad instruction in be replaced by its pullback's instructions? */
static bool inlinable(const fvm_instr *in, int depth)
{
    const fvm_func *pb = in->derived;
    if ((in->op != FVM_OP_GRAD && in->op != FVM_OP_VALUE_AND_GRAD) || !pb || !pb->ok || pb->federated ||
        depth >= MAX_DEPTH || !fits_entry(in, pb, pb->nparams - 1))
        return false;
    const fvm_type *ct = pb->param_types[pb->nparams - 1];
    return ct->kind == FVM_T_TENSOR && ct->u.tensor.dims.rank == 0 &&
           (ct->u.tensor.dtype == FVM_DTYPE_F32 || ct->u.tensor.dtype == FVM_DTYPE_F64);
}

/* Can call instruction in be replaced by its callee's instructions? */
static bool inlinable_call(const fvm_instr *in, int depth)
{
    const fvm_func *g = in->a.fn;
    return in->op == FVM_OP_CALL && g && g->ok && !g->federated && depth < MAX_DEPTH && fits_entry(in, g, g->nparams);
}

/* The function step 1 of inline_body.h would inline for instruction in,
 * whatever the depth, or NULL. */
static const fvm_func *inlined_fn(const fvm_instr *in)
{
    return inlinable(in, 0) ? in->derived : inlinable_call(in, 0) ? in->a.fn : NULL;
}

/* g's size with every call and derivative inlined (at any depth: a bound
 * on what inlining it takes in), up to FVM_INLINE_MAX + 1; memoised. */
static int full_size(const fvm_func *g)
{
    if (g->inline_size)
        return g->inline_size;
    long n = 0;
    for (int i = 0; i < g->ninstrs && n <= FVM_INLINE_MAX; i++) {
        const fvm_func *c = inlined_fn(&g->instrs[i]);
        n += c ? full_size(c) + 8 : 1; /* a derivative's constant, fields and struct besides */
    }
    ((fvm_func *)g)->inline_size = n > FVM_INLINE_MAX ? FVM_INLINE_MAX + 1 : (int)n;
    return g->inline_size;
}

/* Does callee g, inlined whole, keep the body within FVM_INLINE_MAX? */
static bool room_for(const body *B, const fvm_func *g)
{
    return B->n + full_size(g) + 8 <= FVM_INLINE_MAX;
}

/* grad or value_and_grad instruction in (operands args), its pullback
 * pb(params..., ct) -> <value, grads=<g>> inlined, with ct the constant 1:
 * grad's result is g, with has_aux <g, value's field 1>, value_and_grad's
 * <value, g> (exec_grad). */
static const char *inline_grad(body *B, const fvm_instr *in, const char *const *args, int depth)
{
    const fvm_func *pb = in->derived;
    const fvm_type *ctt = pb->param_types[pb->nparams - 1];
    const char **map = fvm_arena_array(B->a, (size_t)pb->nslots + 1, sizeof *map);
    fvm_doc *o = object(B);
    if (!map || !o || fvm_doc_set(B->a, o, "value", fvm_doc_real(B->a, 1.0)) ||
        fvm_doc_set(B->a, o, "dtype", fvm_doc_string(B->a, fvm_dtype_name(ctt->u.tensor.dtype)))) {
        B->failed = true;
        return NULL;
    }
    for (int k = 0; k + 1 < pb->nparams; k++)
        map[k] = args[k];
    const char *prefix = fvm_arena_printf(B->a, "%s/", in->name);
    map[pb->nparams - 1] = emit(B, in, fvm_arena_printf(B->a, "%sct", prefix), FVM_OP_CONST, o, 0, NULL, true);
    const char *r = take(B, pb, map, prefix, depth + 1);
    const char *g = field_of(B, in, field_of(B, in, r, 1), 0);
    if (B->failed || (in->op == FVM_OP_GRAD && !in->a.has_aux))
        return g;
    const char *pair[2] = {g, NULL};
    if (in->op == FVM_OP_VALUE_AND_GRAD)
        pair[0] = field_of(B, in, r, 0), pair[1] = g;
    else
        pair[1] = field_of(B, in, field_of(B, in, r, 0), 1);
    return B->failed ? NULL : make_struct(B, in, in->name, in->type, pair);
}

/* call instruction in (operands args), its callee's instructions inlined. */
static const char *inline_call(body *B, const fvm_instr *in, const char *const *args, int depth)
{
    const fvm_func *g = in->a.fn;
    const char **map = fvm_arena_array(B->a, (size_t)g->nslots + 1, sizeof *map);
    const char *prefix = fvm_arena_printf(B->a, "%s/", in->name);
    if (!map || !prefix) {
        B->failed = true;
        return NULL;
    }
    for (int k = 0; k < g->nparams; k++)
        map[k] = args[k];
    return take(B, g, map, prefix, depth + 1);
}

/* The instruction in of a checked function, copied with operands args: a
 * literal becomes the const it stands for (its dtype as the checker gave
 * it), a field of a destructuring a plain field (the checker set its
 * attributes), so that nothing refers to instructions by position. */
static const char *copy(body *B, const fvm_instr *in, const char *name, const char *const *args, bool inlined)
{
    const fvm_doc *attrs = in->attrs;
    if (in->literal) {
        fvm_doc *o = object(B);
        if (!o || fvm_doc_set(B->a, o, "value", (fvm_doc *)in->literal) ||
            fvm_doc_set(B->a, o, "dtype", fvm_doc_string(B->a, fvm_dtype_name(in->type->u.tensor.dtype)))) {
            B->failed = true;
            return NULL;
        }
        attrs = o;
    }
    return emit(B, in, name, in->op, attrs, in->nargs, args, inlined);
}

/* f's instructions taken into the body, its slots named by map (its
 * parameters' filled in); the name of its result. */
static const char *take(body *B, const fvm_func *f, const char **map, const char *prefix, int depth)
{
    bool inlined = depth > 0;
    for (int j = 0; j < f->ninstrs && !B->failed; j++) {
        const fvm_instr *in = &f->instrs[j];
        const char *args[64], **av = in->nargs <= 64 ? args : fvm_arena_array(B->a, (size_t)in->nargs, sizeof *av);
        const fvm_type *types[3];
        if (!av) {
            B->failed = true;
            break;
        }
        bool meets = false;
        for (int k = 0; k < in->nargs; k++) {
            av[k] = map[in->args[k]];
            meets = meets || (in->arg_types[k]->kind == FVM_T_STRUCT && built_struct(B, av[k]));
            if (k < 3)
                types[k] = in->arg_types[k];
        }
        const char *name = prefix ? fvm_arena_printf(B->a, "%s%s", prefix, in->name) : in->name;
        const char *had = in->op == FVM_OP_FIELD ? taken_field(B, av[0], in->a.index) : NULL;
        fvm_fstep st;
        if (!name)
            B->failed = true;
        else if (in->op == FVM_OP_FIELD && built_struct(B, av[0]))
            map[in->slot] = built_struct(B, av[0])->arg_names[in->a.index];
        else if (had)
            map[in->slot] = had;
        else if (inlinable(in, depth) && room_for(B, in->derived))
            map[in->slot] = inline_grad(B, in, av, depth);
        else if (inlinable_call(in, depth) && room_for(B, in->a.fn))
            map[in->slot] = inline_call(B, in, av, depth);
        else if (meets && in->type->kind == FVM_T_STRUCT && fvm_elementwise_step(in, &st))
            map[in->slot] = split(B, in, name, in->type, av, types);
        else if ((map[in->slot] = copy(B, in, name, av, inlined)) && in->op == FVM_OP_FIELD)
            took_field(B, av[0], in->a.index);
    }
    return B->failed ? NULL : map[f->result_slot];
}

/* The names bound to the parameters and the body's instructions, again after they moved. */
static void reindex(body *B)
{
    fvm_names_clear(&B->names);
    for (int k = 0; k < B->f->nparams && !B->failed; k++)
        if (!fvm_names_put(&B->names, B->f->param_names[k], -1))
            B->failed = true;
    for (int i = 0; i < B->n && !B->failed; i++)
        if (!fvm_names_put(&B->names, B->ins[i].name, i))
            B->failed = true;
}

/* The body is now out[0..m) (fl: their inlined flags), in an order sink or
 * hoist_fields made. */
static void reordered(body *B, fvm_instr *out, bool *fl, int m)
{
    B->ins = out, B->inlined = fl, B->src = NULL, B->n = m; /* (src is not needed after dropping) */
    reindex(B);
}

/* Can instruction in not fail at run time, whatever its operands? Those
 * that build and take apart structs, constants, and elementwise ops of
 * fully known shapes (the checker matched them) but an integer division
 * (by zero). Dropping an instruction that could fail would turn the
 * written function's error into a result. */
static bool cannot_fail(const fvm_instr *in, const fvm_instr *src)
{
    if (in->op == FVM_OP_STRUCT || in->op == FVM_OP_FIELD || in->op == FVM_OP_CONST || in->op == FVM_OP_HPARAM)
        return true;
    fvm_fstep st;
    if (!src || !fvm_elementwise_step(in, &st))
        return false;
    in = src; /* its operands' types (a split's per-field copies have struct ones: kept) */
    for (int k = 0; k < in->nargs; k++) {
        const fvm_type *t = in->arg_types[k];
        if (t->kind != FVM_T_TENSOR)
            return false;
        for (int i = 0; i < t->u.tensor.dims.rank; i++)
            if (t->u.tensor.dims.d[i] < 0)
                return false;
        if (in->op == FVM_OP_DIV && fvm_dtype_is_int(t->u.tensor.dtype))
            return false;
    }
    return true;
}

/* Drops the instructions step 4 of inline_body.h may drop whose values nothing uses. */
static void drop_unused(body *B, const char *result)
{
    bool *live = fvm_arena_array(B->a, (size_t)B->n + 1, sizeof *live);
    if (!live) {
        B->failed = true;
        return;
    }
    int r = lookup(B, result);
    if (r >= 0)
        live[r] = true;
    for (int i = B->n - 1; i >= 0; i--) {
        const fvm_instr *in = &B->ins[i];
        if (!B->inlined[i] && in->op != FVM_OP_STRUCT && in->op != FVM_OP_FIELD)
            live[i] = true;
        else if (!live[i] && !cannot_fail(in, B->src[i])) /* dropped, its error would be lost */
            live[i] = true;
        for (int k = 0; live[i] && k < in->nargs; k++) {
            int s = lookup(B, in->arg_names[k]);
            if (s >= 0)
                live[s] = true;
        }
    }
    int n = 0;
    for (int i = 0; i < B->n; i++)
        if (live[i]) {
            B->inlined[n] = B->inlined[i];
            B->src[n] = B->src[i];
            B->ins[n++] = B->ins[i];
        }
    B->n = n;
    reindex(B);
}

/* May instruction in wait until just before its one user (sink)? */
static bool sinks(const fvm_instr *in)
{
    fvm_fstep st;
    return in->op == FVM_OP_MATMUL || fvm_elementwise_step(in, &st);
}

/* Orders the body so that an elementwise instruction or product used once,
 * by an elementwise instruction, comes just before that user (its own such
 * operands before it, depth first): what the fusion planner joins then
 * lies together, with the operands it reads alive (an SGD step split per
 * field would otherwise make every scaling before the first subtraction,
 * and the learning rate die between them). Every op is pure, so any order
 * with operands first gives the same values. */
static void sink(body *B, const char *result)
{
    int n = B->n;
    int *uses = fvm_arena_array(B->a, (size_t)n + 1, sizeof *uses);
    int *user = fvm_arena_array(B->a, (size_t)n + 1, sizeof *user);
    int *stack = fvm_arena_array(B->a, (size_t)n + 1, sizeof *stack);
    int *next_arg = fvm_arena_array(B->a, (size_t)n + 1, sizeof *next_arg);
    bool *waiting = fvm_arena_array(B->a, (size_t)n + 1, sizeof *waiting);
    fvm_instr *out = fvm_arena_array(B->a, (size_t)n + 1, sizeof *out);
    bool *fl = fvm_arena_array(B->a, (size_t)n + 1, sizeof *fl);
    if (!uses || !user || !stack || !next_arg || !waiting || !out || !fl) {
        B->failed = true;
        return;
    }
    for (int i = 0; i < n; i++)
        user[i] = -1;
    int r = lookup(B, result);
    if (r >= 0)
        uses[r]++; /* the result waits for nothing */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < B->ins[i].nargs; k++) {
            int j = lookup(B, B->ins[i].arg_names[k]);
            if (j >= 0) {
                uses[j]++;
                user[j] = i;
            }
        }
    fvm_fstep st;
    for (int i = 0; i < n; i++)
        waiting[i] = uses[i] == 1 && user[i] >= 0 && sinks(&B->ins[i]) && fvm_elementwise_step(&B->ins[user[i]], &st);
    /* depth first from each instruction that does not wait, on an explicit stack */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (waiting[i])
            continue;
        int depth = 0;
        stack[0] = i;
        next_arg[0] = 0;
        while (depth >= 0) {
            const fvm_instr *in = &B->ins[stack[depth]];
            if (next_arg[depth] < in->nargs) {
                int j = lookup(B, in->arg_names[next_arg[depth]++]);
                if (j >= 0 && waiting[j]) {
                    waiting[j] = false; /* placed now, once */
                    stack[++depth] = j;
                    next_arg[depth] = 0;
                }
                continue;
            }
            fl[m] = B->inlined[stack[depth]];
            out[m++] = *in;
            depth--;
        }
    }
    reordered(B, out, fl, m);
}

/* Moves each field instruction to just after the instruction binding its
 * struct (a parameter's: to the top), fields of fields after theirs: a
 * struct whose every use is a field then dies before the rest of the body
 * runs, and each field is held once, by its slot (a weight or an
 * accumulator that dies in its update may then be written in place,
 * vm/exec/fuse.c). Every op is pure: any order with operands first gives
 * the same values. */
static void hoist_fields(body *B)
{
    int n = B->n;
    int *first = fvm_arena_array(B->a, (size_t)n + 1, sizeof *first); /* a struct's fields (n: the parameters') */
    int *next = fvm_arena_array(B->a, (size_t)n + 1, sizeof *next); /* ... by descending index */
    int *stack = fvm_arena_array(B->a, (size_t)n + 1, sizeof *stack);
    bool *hoisted = fvm_arena_array(B->a, (size_t)n + 1, sizeof *hoisted);
    fvm_instr *out = fvm_arena_array(B->a, (size_t)n + 1, sizeof *out);
    bool *fl = fvm_arena_array(B->a, (size_t)n + 1, sizeof *fl);
    if (!first || !next || !stack || !hoisted || !out || !fl) {
        B->failed = true;
        return;
    }
    for (int i = 0; i <= n; i++)
        first[i] = -1;
    for (int i = 0; i < n; i++) {
        int s = B->ins[i].op == FVM_OP_FIELD ? lookup(B, B->ins[i].arg_names[0]) : -2;
        if (s == -2)
            continue;
        int src = s >= 0 ? s : n;
        next[i] = first[src];
        first[src] = i;
        hoisted[i] = true;
    }
    /* each instruction that stays, then its fields depth first (n: the parameters' fields first) */
    int m = 0;
    for (int i = -1; i < n; i++) {
        if (i >= 0 && hoisted[i])
            continue;
        int top = 0;
        for (int c = first[i >= 0 ? i : n]; c >= 0; c = next[c])
            stack[top++] = c; /* popped in ascending order */
        if (i >= 0)
            stack[top++] = i; /* popped first, its fields pushed already */
        while (top > 0) {
            int j = stack[--top];
            fl[m] = B->inlined[j];
            out[m++] = B->ins[j];
            if (j != i)
                for (int c = first[j]; c >= 0; c = next[c])
                    stack[top++] = c;
        }
    }
    reordered(B, out, fl, m);
}

/* f's body, checked and its fusion planned, or NULL. */
static fvm_func *build(body *B, fvm_func *f)
{
    fvm_program *p = B->p;
    const char **map = fvm_arena_array(B->a, (size_t)f->nslots + 1, sizeof *map);
    if (!map)
        return NULL;
    for (int k = 0; k < f->nparams; k++) {
        map[k] = f->param_names[k];
        if (!fvm_names_put(&B->names, f->param_names[k], -1))
            return NULL;
    }
    const char *result = take(B, f, map, NULL, 0);
    if (!result || B->failed)
        return NULL;
    drop_unused(B, result);
    if (!B->failed)
        sink(B, result);
    if (!B->failed)
        hoist_fields(B);
    fvm_func *g = fvm_arena_alloc(B->a, sizeof *g);
    if (B->failed || !g)
        return NULL;
    *g = (fvm_func){.name = f->name,
                    .doc = f->doc,
                    .nparams = f->nparams,
                    .param_names = f->param_names,
                    .param_types = f->param_types,
                    .param_type_text = f->param_type_text,
                    .param_type_nodes = f->param_type_nodes,
                    .param_locs = f->param_locs,
                    .param_name_locs = f->param_name_locs,
                    .ninstrs = B->n,
                    .instrs = B->ins,
                    .result_name = result,
                    .result_loc = f->result_loc,
                    .loc = f->loc,
                    .module = f->module};
    fvm_diag scratch = {0};
    bool ok = fvm_ir_decode_func(p, B->a, g, &scratch) == FVM_OK && fvm_check_func(p, g, &scratch) == FVM_OK;
    fvm_diag_clear(&scratch);
    if (!ok) {
        for (int i = 0; i < g->ninstrs; i++)
            fvm_tensor_release(&g->instrs[i].konst);
        return NULL;
    }
    g->fusion = fvm_fusion_plan(B->a, g);
    return g;
}

void fvm_inline_body(fvm_program *p, fvm_func *f)
{
    if (!f->ok || f->federated || f->phases || f->inlined || p->inlined >= FVM_INLINE_TOTAL)
        return;
    bool any = false;
    for (int i = 0; i < f->ninstrs && !any; i++) {
        const fvm_func *g = inlined_fn(&f->instrs[i]);
        any = g && f->ninstrs + full_size(g) + 8 <= FVM_INLINE_MAX;
    }
    if (!any)
        return;
    body B = {.p = p, .a = &p->arena, .f = f};
    fvm_names_init(&B.names, B.a, (size_t)f->nslots);
    fvm_names_init(&B.fields, B.a, 16);
    f->inlined = build(&B, f);
    p->inlined += B.n; /* made, whether it checked or not */
}
