/* passes.c - the transforms after checking, in order: derivatives, phases, fusion (see passes.h). */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#include "fuse_plan.h"
#include "inline_body.h"
#include "../ir/check.h"
#include "autodiff.h"
#include "phases.h"

/* A function a derivation adds: decoded and checked as the loader and the
 * checker would a loaded one. */
static fvm_status check_added(void *ctx, fvm_func *f)
{
    fvm_diag *d = ((const fvm_ad_env *)ctx)->d;
    fvm_program *p = ((const fvm_ad_env *)ctx)->p;
    if (fvm_ir_decode_func(p, &p->arena, f, d))
        return FVM_ERR_TYPE;
    return fvm_check_func(p, f, d);
}

/* The derivative of instruction in: the pullback of a grad, value_and_grad or
 * vjp; the forward derivative of a jvp. */
static fvm_status derive(fvm_program *p, fvm_instr *in, fvm_diag *d)
{
    fvm_func *fn = in->a.fn;
    int wrt = 0;
    if (in->a.present & A(WRT))
        while (wrt < fn->nparams && strcmp(fn->param_names[wrt], in->a.wrt))
            wrt++;
    fvm_ad_env env = {.p = p, .d = d, .check = check_added, .where = &in->loc, .has_aux = in->a.has_aux};
    env.ctx = &env;
    if (in->op == FVM_OP_JVP)
        return fvm_ad_jvp(&env, fn, UINT64_C(1) << wrt, &in->derived);
    return fvm_ad_pullback(&env, fn, UINT64_C(1) << wrt, &in->derived);
}

/* {"fn": name}, on one line. */
static fvm_doc *fn_attrs(fvm_arena *a, const char *name)
{
    fvm_doc *attrs = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!attrs || fvm_doc_set(a, attrs, "fn", fvm_doc_string(a, name)))
        return NULL;
    attrs->flow = true;
    return attrs;
}

/* What a pass makes a function of one instruction from: the instruction
 * result = op[attrs](params...) over n parameters of the given names and types. */
typedef struct one_instr {
    const char *base; /* its name, or base.2, base.3, ... when that is taken */
    const char *doc;
    int n;
    const char *const *names;
    const fvm_type *types[3];
    const char *result;
    fvm_op op;
    const fvm_doc *attrs;
    fvm_loc attrs_loc;
    const char *what; /* for the internal error: "the client half of this federated_select" */
} one_instr;

/* The function of o, made for instruction in (located there), added to p,
 * decoded and checked; NULL after an error, reported. */
static fvm_func *one_instr_func(fvm_program *p, const fvm_instr *in, const one_instr *o, fvm_diag *d)
{
    fvm_arena *a = &p->arena;
    fvm_func *g = fvm_arena_alloc(a, sizeof *g);
    fvm_instr *body = fvm_arena_alloc(a, sizeof *body);
    const char *name = o->base;
    for (int k = 2; name && fvm_program_func(p, name); k++)
        name = fvm_arena_printf(a, "%s.%d", o->base, k);
    if (!g || !body || !name || !(g->param_types = fvm_arena_array(a, (size_t)o->n, sizeof *g->param_types)) ||
        !(g->param_locs = fvm_arena_array(a, (size_t)o->n, sizeof *g->param_locs)) ||
        !(g->param_name_locs = fvm_arena_array(a, (size_t)o->n, sizeof *g->param_name_locs)) ||
        !(body->arg_locs = fvm_arena_array(a, (size_t)o->n, sizeof *body->arg_locs))) {
        fvm_diag_add(d, FVM_ERR_NOMEM, &in->loc, "out of memory");
        return NULL;
    }
    g->name = name;
    g->doc = o->doc;
    g->loc = in->loc;
    g->nparams = o->n;
    g->param_names = (const char **)o->names;
    body->arg_names = (const char **)o->names;
    for (int k = 0; k < o->n; k++) {
        g->param_types[k] = o->types[k];
        g->param_locs[k] = g->param_name_locs[k] = body->arg_locs[k] = in->loc;
    }
    body->name = o->result;
    body->op = o->op;
    body->attrs = o->attrs;
    body->nargs = o->n;
    body->loc = body->name_loc = in->loc;
    body->attrs_loc = o->attrs_loc;
    g->instrs = body;
    g->ninstrs = 1;
    g->result_name = body->name;
    g->result_loc = in->loc;
    fvm_status s = fvm_program_add_func(p, g);
    if (s) {
        fvm_diag_add(d, s, &in->loc, "out of memory");
        return NULL;
    }
    if (fvm_ir_decode_func(p, a, g, d) || fvm_check_func(p, g, d)) {
        fvm_diag_add(d, FVM_ERR_TYPE, &in->loc, "internal: %s does not check", o->what);
        return NULL;
    }
    return g;
}

/* federated_select's client half as a function of its own,
 *   <fn>.select(keys, max_key, value) = select_keys[fn](keys, max_key, value)
 * (in->derived), so that a round form runs it as a federated_map of the
 * broadcast server values (plan_flow.c). */
static fvm_status select_client(fvm_program *p, fvm_instr *in, fvm_diag *d)
{
    static const char *const names[3] = {"keys", "max_key", "value"};
    one_instr o = {.base = fvm_arena_printf(&p->arena, "%s.select", in->a.fn->name),
                   .doc = "The client half of a federated_select: the selected values of this client's keys.",
                   .n = 3,
                   .names = names,
                   .result = "selected",
                   .op = FVM_OP_SELECT_KEYS,
                   .attrs = fn_attrs(&p->arena, in->a.fn->name),
                   .attrs_loc = in->loc,
                   .what = "the client half of this federated_select"};
    if (!o.base || !o.attrs)
        return fvm_diag_add(d, FVM_ERR_NOMEM, &in->loc, "out of memory");
    for (int k = 0; k < 3; k++)
        o.types[k] = in->arg_types[k]->u.fed.member;
    return (in->derived = one_instr_func(p, in, &o, d)) ? FVM_OK : FVM_ERR_TYPE;
}

/* A field of placed structs, lowered: field[name](s@SERVER) into
 * federated_apply[<name>.field](s), and field[name]({s}@CLIENTS) into
 * federated_map[<name>.field](s), where the new function
 *   <name>.field(s) = field[name](s)
 * takes the field of one struct. Every later pass, the interpreter and the
 * round forms then see only intrinsics they know; the source's writer
 * writes the field as written (in->written_op). */
static fvm_status lower_field(fvm_program *p, fvm_instr *in, fvm_diag *d)
{
    fvm_arena *a = &p->arena;
    static const char *const names[1] = {"s"};
    const char *what = (in->a.present & A(NAME)) ? in->a.name : fvm_arena_printf(a, "%lld", (long long)in->a.index);
    one_instr o = {.base = what ? fvm_arena_printf(a, "%s.field", what) : NULL,
                   .doc = "A field of a placed struct, taken from each member (a field instruction on placed "
                          "values, lowered).",
                   .n = 1,
                   .names = names,
                   .types = {in->arg_types[0]->u.fed.member},
                   .result = "f",
                   .op = FVM_OP_FIELD,
                   .attrs = in->attrs, /* name or index, as written */
                   .attrs_loc = in->attrs_loc,
                   .what = "the field of this placed struct"};
    if (!o.base)
        return fvm_diag_add(d, FVM_ERR_NOMEM, &in->loc, "out of memory");
    fvm_func *g = one_instr_func(p, in, &o, d);
    fvm_doc *attrs = g ? fn_attrs(a, g->name) : NULL;
    if (!g)
        return FVM_ERR_TYPE;
    if (!attrs)
        return fvm_diag_add(d, FVM_ERR_NOMEM, &in->loc, "out of memory");
    in->lowered = true;
    in->written_op = in->op;
    in->written_attrs = in->attrs;
    in->op = in->arg_types[0]->u.fed.pl == FVM_PL_SERVER ? FVM_OP_FEDERATED_APPLY : FVM_OP_FEDERATED_MAP;
    in->attrs = attrs;
    /* the decoded attributes now name g; the type the checker gave the field
     * is that of federated_apply or _map of g */
    return p->decode_attrs(p, a, in, d) ? FVM_ERR_TYPE : FVM_OK;
}

/* Every field of placed structs in functions 0..n-1, lowered (lower_field). */
static fvm_status lower_fields(fvm_program *p, int n, fvm_diag *d)
{
    for (int k = 0; k < n; k++) {
        fvm_func *f = p->funcs[k];
        for (int i = 0; f->ok && i < f->ninstrs; i++) {
            fvm_instr *in = &f->instrs[i];
            if (in->op == FVM_OP_FIELD && in->type && in->arg_types[0]->kind == FVM_T_FED) {
                fvm_status s = lower_field(p, in, d);
                if (s)
                    return s;
            }
        }
    }
    return FVM_OK;
}

static bool is_grad(fvm_op op)
{
    return op == FVM_OP_GRAD || op == FVM_OP_VALUE_AND_GRAD || op == FVM_OP_VJP || op == FVM_OP_JVP;
}

/* Derives in the order the checker met the grad instructions: depth first,
 * every function an instruction names before the instruction, so that the
 * derived functions are added (and written) in the same order whatever
 * calls what. */
static fvm_status derive_from(fvm_program *p, fvm_func *f, fvm_diag *d)
{
    fvm_status first = FVM_OK;
    f->mark = 1;
    for (int i = 0; i < f->ninstrs; i++) {
        fvm_instr *in = &f->instrs[i];
        for (int id = 0; id < FVM_NFUNC_ATTRS; id++) {
            if (!(in->a.present & (UINT64_C(1) << id)))
                continue;
            fvm_func *g = *(fvm_func *const *)((const char *)&in->a + fvm_attr_table[id].offset);
            if (!g->mark) {
                fvm_status s = derive_from(p, g, d);
                if (s && !first)
                    first = s;
            }
        }
        if (in->type && !in->derived && (is_grad(in->op) || in->op == FVM_OP_FEDERATED_SELECT)) {
            fvm_status s = is_grad(in->op) ? derive(p, in, d) : select_client(p, in, d);
            if (s && !first)
                first = s;
        }
    }
    return first;
}

/* Phase and fusion plans of functions from..p->nfuncs - 1, and the bodies with derivatives inlined. */
static void plan(fvm_program *p, int from)
{
    for (int k = from; k < p->nfuncs; k++) {
        fvm_func *f = p->funcs[k];
        if (!f->ok)
            continue;
        f->phases = fvm_phases_plan(&p->arena, f);
        f->fusion = fvm_fusion_plan(&p->arena, f);
        fvm_inline_body(p, f);
    }
}

fvm_status fvm_passes_run(fvm_program *p, fvm_diag *d)
{
    if (p->compiled)
        return FVM_OK;
    int n = p->nfuncs; /* the derived ones, added from here on, need no derivation: a derivative op they
                          * copy forward (past the bound on inlining) keeps the derivative its original has */
    fvm_status first = lower_fields(p, n, d);
    if (first)
        return first;
    for (int k = 0; k < n; k++)
        p->funcs[k]->mark = 0;
    for (int k = 0; k < n; k++) {
        if (p->funcs[k]->mark)
            continue;
        fvm_status s = derive_from(p, p->funcs[k], d);
        if (s && !first)
            first = s;
    }
    if (first)
        return first;
    plan(p, 0);
    p->compiled = true;
    return FVM_OK;
}

fvm_status fvm_compile(fvm_program *p, fvm_diag *d)
{
    fvm_status s = fvm_check(p, d);
    return s ? s : fvm_passes_run(p, d);
}

fvm_status fvm_passes_pullback(fvm_program *p, const char *fn, const char *wrt, fvm_func **out, fvm_diag *d)
{
    *out = NULL;
    fvm_func *f = fvm_program_func(p, fn);
    if (!f)
        return fvm_diag_add(d, FVM_ERR_NAME, NULL, "no function '%s'", fn);
    if (!f->ok)
        return fvm_diag_add(d, FVM_ERR_USAGE, &f->loc, "function '%s' has not passed the checker", fn);
    int k = 0;
    if (wrt)
        while (k < f->nparams && strcmp(f->param_names[k], wrt))
            k++;
    if (k >= f->nparams || k >= 64)
        return fvm_diag_add(d, FVM_ERR_NAME, &f->loc,
                            wrt ? "function '%s' has no parameter '%s'" : "function '%s' has no parameter", fn, wrt);
    if (fvm_check_wrt(f, k, d, &f->param_locs[k]))
        return FVM_ERR_TYPE;
    fvm_ad_env env = {.p = p, .d = d, .check = check_added, .where = &f->loc};
    env.ctx = &env;
    int before = p->nfuncs;
    fvm_status s = fvm_ad_pullback(&env, f, UINT64_C(1) << k, out);
    if (s == FVM_OK)
        plan(p, before); /* the new functions can run too */
    return s;
}
