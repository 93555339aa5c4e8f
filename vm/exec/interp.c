/* interp.c - the interpreter loop: frames of slots, op dispatch, liveness-driven release. */
#include "exec.h"
#include "fuse.h"
#include "packed.h"
#include "../transform/phases.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const fvm_exec_fn exec_table[FVM_OP_COUNT] = {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) [FVM_OP_##ID] = EXEC,
#include "../ir/ops.def"
#undef FVM_OP
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The run's bounds (fvm_vm_config), checked as f is entered. */
static fvm_status budget(fvm_ctx *x, const fvm_func *f)
{
    fvm_vm *vm = x->vm;
    if (vm->max_steps) {
        int64_t n = atomic_fetch_add_explicit(&vm->steps, f->ninstrs + 1, memory_order_relaxed) + f->ninstrs + 1;
        if (n > vm->max_steps)
            return fvm_diag_add(x->d, FVM_ERR_LIMIT, &f->loc,
                                "the run passed its bound of %lld steps (--max-steps) "
                                "entering '%s'",
                                (long long)vm->max_steps, f->name);
    }
    if (vm->time_limit && now() > vm->deadline)
        return fvm_diag_add(x->d, FVM_ERR_LIMIT, &f->loc,
                            "the run passed its time limit of %g s (--time-limit) "
                            "entering '%s'",
                            vm->time_limit, f->name);
    return FVM_OK;
}

fvm_status fvm_vm_new(const fvm_program *p, const fvm_vm_config *cfg, fvm_vm **out, fvm_diag *d)
{
    *out = NULL;
    fvm_vm *vm = calloc(1, sizeof *vm);
    if (!vm)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    vm->p = p;
    vm->kernels = cfg && cfg->kernels ? cfg->kernels : fvm_kernels_cpu();
    if (vm->kernels->init)
        vm->kernels->init();
    vm->nclients = cfg ? cfg->nclients : -1;
    vm->backend = cfg ? cfg->backend : NULL;
    if (cfg) {
        vm->unfused = cfg->unfused;
        vm->log = cfg->log;
        vm->log_user = cfg->log_user;
        vm->max_steps = cfg->max_steps > 0 ? cfg->max_steps : 0;
        vm->time_limit = cfg->time_limit > 0 ? cfg->time_limit : 0;
        vm->deadline = now() + vm->time_limit;
    }
    if (vm->nclients > FVM_MAX_CLIENTS) {
        free(vm);
        return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "more than %d clients", FVM_MAX_CLIENTS);
    }
    if (!vm->backend) {
        vm->own_backend = vm->backend = fvm_backend_seq();
        if (!vm->backend) {
            free(vm);
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        }
    }
    *out = vm;
    return FVM_OK;
}

void fvm_vm_free(fvm_vm *vm)
{
    if (!vm)
        return;
    fvm_backend_free(vm->own_backend);
    free(vm);
}

int64_t fvm_vm_clients(const fvm_vm *vm)
{
    return vm->nclients;
}

fvm_status fvm_vm_set_clients(fvm_vm *vm, int64_t n, fvm_diag *d)
{
    if (n < 0 || n > FVM_MAX_CLIENTS)
        return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "the number of clients must be between 0 and %d", FVM_MAX_CLIENTS);
    if (vm->nclients >= 0 && vm->nclients != n)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "the data has %lld clients but the run has %lld", (long long)n,
                            (long long)vm->nclients);
    vm->nclients = n;
    return FVM_OK;
}

void fvm_vm_forget_clients(fvm_vm *vm)
{
    vm->nclients = -1;
}

/* Does a value have the shape of a type? (Guards the library's entry point:
 * values built elsewhere must match what the checker assumed.) */
static bool conforms(const fvm_vm *vm, const fvm_value *v, const fvm_type *t, int depth)
{
    if (!v || depth > 64)
        return false;
    switch (t->kind) {
    case FVM_T_TENSOR:
        if (v->kind != FVM_V_TENSOR || v->t.dtype != t->u.tensor.dtype || v->t.shape.rank != t->u.tensor.dims.rank)
            return false;
        for (int i = 0; i < v->t.shape.rank; i++)
            if (t->u.tensor.dims.d[i] >= 0 && t->u.tensor.dims.d[i] != v->t.shape.d[i])
                return false;
        return true;
    case FVM_T_STRUCT:
        if (v->kind != FVM_V_STRUCT || v->n != t->u.strct.n)
            return false;
        for (int i = 0; i < t->u.strct.n; i++)
            if (!conforms(vm, v->items[i], t->u.strct.elems[i], depth + 1))
                return false;
        return true;
    case FVM_T_SEQ:
        if (v->kind != FVM_V_SEQ)
            return false;
        for (int64_t i = 0; i < v->n; i++) {
            fvm_value *e = NULL;
            bool ok = fvm_seq_get(v, i, &e, NULL) == FVM_OK && conforms(vm, e, t->u.seq.elem, depth + 1);
            fvm_value_release(e);
            if (!ok)
                return false;
        }
        return true;
    case FVM_T_FED:
        if (t->u.fed.all_equal)
            return conforms(vm, v, t->u.fed.member, depth + 1);
        if (v->kind != FVM_V_CLIENTS || (vm->nclients >= 0 && v->n != vm->nclients))
            return false;
        if (v->src) /* read on demand: whoever made the source checked its member type */
            return true;
        for (int64_t i = 0; i < v->n; i++)
            if (!conforms(vm, v->items[i], t->u.fed.member, depth + 1))
                return false;
        return true;
    case FVM_T_FN:
        return false;
    }
    return false;
}

/* A short description of a value for messages: "f32[5]", "a struct of 3", ... */
static const char *describe_value(const fvm_value *v, char buf[FVM_DIMS_STR + 16])
{
    if (!v)
        return "nothing";
    if (v->kind == FVM_V_TENSOR) {
        char dims[FVM_DIMS_STR];
        fvm_dims_format(&v->t.shape, dims);
        snprintf(buf, FVM_DIMS_STR + 16, "%s%s", fvm_dtype_name(v->t.dtype), dims);
    } else {
        snprintf(buf, FVM_DIMS_STR + 16, "a %s of %lld",
                 v->kind == FVM_V_STRUCT ? "struct"
                 : v->kind == FVM_V_SEQ  ? "sequence"
                                         : "client list",
                 (long long)v->n);
    }
    return buf;
}

fvm_status fvm_exec_instr(fvm_ctx *x, const fvm_instr *in, fvm_value **slots)
{
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs);
    if (!argv)
        return fvm_nomem(x);
    for (int k = 0; k < in->nargs; k++)
        argv[k] = slots[in->args[k]];
    fvm_value *res = NULL;
    fvm_status s = exec_table[in->op](x, in, argv, &res);
    fvm_argv_free(&av);
    if (s) {
        /* A kernel's or shape rule's error: place it at the instruction.
         * At run time a shape mismatch is a runtime error, not a type error. */
        s = s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s;
        fvm_diag_place_last(x->d, &in->loc, fvm_op_table[in->op].name, s);
        return s;
    }
    slots[in->slot] = res;
    return FVM_OK;
}

/* Checks f's arguments before its body runs. */
static fvm_status enter(fvm_ctx *x, const fvm_func *f, fvm_value *const *args)
{
    if (x->depth >= FVM_MAX_CALL_DEPTH)
        return fvm_diag_add(x->d, FVM_ERR_LIMIT, &f->loc, "calls nested more than %d deep", FVM_MAX_CALL_DEPTH);
    fvm_status bs = budget(x, f);
    if (bs)
        return bs;
    for (int i = 0; f->entry_check && i < f->nparams; i++) {
        if (!conforms(x->vm, args[i], f->param_types[i], 0)) {
            char t[256], v[FVM_DIMS_STR + 16];
            return fvm_diag_add(x->d, FVM_ERR_RUNTIME, &f->param_locs[i],
                                "function '%s': parameter '%s' has type %s but is given %s", f->name, f->param_names[i],
                                fvm_type_format(f->param_types[i], true, t, sizeof t), describe_value(args[i], v));
        }
    }
    return FVM_OK;
}

fvm_status fvm_exec_call(fvm_ctx *x, const fvm_func *f, fvm_value *const *args, fvm_value **out)
{
    return fvm_exec_call_giving(x, f, args, 0, out);
}

fvm_status fvm_exec_call_giving(fvm_ctx *x, const fvm_func *f, fvm_value *const *args, unsigned given, fvm_value **out)
{
    *out = NULL;
    fvm_status s = enter(x, f, args);
    if (f->inlined && !x->vm->unfused)
        f = f->inlined; /* the same values, derivatives inlined (vm/transform/inline_body.h) */
    fvm_value *local[32];
    fvm_value **slots = s ? NULL : f->nslots <= 32 ? local : calloc((size_t)f->nslots, sizeof *slots);
    if (!slots) {
        for (int i = 0; i < f->nparams && i < 32; i++)
            if (given >> i & 1)
                fvm_value_release(args[i]);
        return s ? s : fvm_nomem(x);
    }
    if (slots == local)
        memset(local, 0, sizeof local);
    x->depth++;
    for (int i = 0; i < f->nparams; i++)
        slots[i] = i < 32 && given >> i & 1 ? args[i] : fvm_value_retain(args[i]);
    for (int i = 0; i < f->nparam_release; i++) {
        fvm_value_release(slots[f->param_release[i]]);
        slots[f->param_release[i]] = NULL;
    }
    const fvm_phases *ph = x->vm->unfused ? NULL : f->phases;
    const fvm_fusion *fu = x->vm->unfused || ph ? NULL : f->fusion;
    int nsteps = ph ? ph->nsteps : f->ninstrs;
    for (int t = 0; t < nsteps && s == FVM_OK; t++) {
        const fvm_step *st = ph ? &ph->steps[t] : NULL;
        const fvm_fused *chain = fu ? fu->chain_at[t] : NULL;
        if (fu && fu->deferred[t])
            continue; /* its chain's root computes it */
        if (st && st->segment >= 0)
            s = fvm_exec_segment(x, f, st->segment, slots);
        else if (chain)
            s = fvm_exec_fused(x, f, chain, slots);
        else
            s = fvm_exec_instr(x, &f->instrs[st ? st->instr : t], slots);
        if (s)
            break;
        int nrel = st ? st->nrelease : chain ? chain->nrelease : f->instrs[t].nrelease;
        const int *rel = st ? st->release : chain ? chain->release : f->instrs[t].release;
        for (int k = 0; k < nrel; k++) {
            fvm_value_release(slots[rel[k]]);
            slots[rel[k]] = NULL;
        }
    }
    if (s == FVM_OK) {
        *out = slots[f->result_slot];
        slots[f->result_slot] = NULL;
    }
    for (int i = 0; i < f->nslots; i++)
        fvm_value_release(slots[i]);
    if (slots != local)
        free(slots);
    x->depth--;
    return s;
}

/* Every {T}@CLIENTS list in a value of type t (at any depth) sets the number
 * of clients or must agree with it. */
static fvm_status count_clients(fvm_vm *vm, const fvm_value *v, const fvm_type *t, fvm_diag *d)
{
    if (!v)
        return FVM_OK;
    if (t->kind == FVM_T_FED && !t->u.fed.all_equal && v->kind == FVM_V_CLIENTS)
        return fvm_vm_set_clients(vm, v->n, d);
    if (t->kind == FVM_T_STRUCT && v->kind == FVM_V_STRUCT && v->n == t->u.strct.n)
        for (int i = 0; i < t->u.strct.n; i++) {
            fvm_status s = count_clients(vm, v->items[i], t->u.strct.elems[i], d);
            if (s)
                return s;
        }
    return FVM_OK;
}

fvm_status fvm_vm_call(fvm_vm *vm, const fvm_func *f, fvm_value *const *args, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    if (!f->ok)
        return fvm_diag_add(d, FVM_ERR_USAGE, &f->loc, "function '%s' has not passed the checker", f->name);
    for (int i = 0; i < f->nparams; i++) {
        if (count_clients(vm, args[i], f->param_types[i], d)) {
            fvm_diag_locate_last(d, &f->param_locs[i]);
            return FVM_ERR_TYPE;
        }
        if (!conforms(vm, args[i], f->param_types[i], 0)) {
            char buf[256];
            return fvm_diag_add(d, FVM_ERR_TYPE, &f->param_locs[i], "argument '%s' does not have type %s",
                                f->param_names[i], fvm_type_format(f->param_types[i], true, buf, sizeof buf));
        }
    }
    fvm_ctx x = {.vm = vm, .d = d};
    fvm_status s = fvm_exec_call(&x, f, args, out);
    fvm_ctx_end(&x);
    return s;
}

void fvm_ctx_end(fvm_ctx *x)
{
    fvm_packed_free(x->packed);
    x->packed = NULL;
}
