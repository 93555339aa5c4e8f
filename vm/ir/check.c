/* check.c - the static checker: resolves names and functions, checks callees first, applies the type
 * rules, enforces placements, rejects recursion, computes liveness and checks program conventions. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "rules.h"
#include "../core/doc.h"
#include "../core/names.h"
#include "../core/suggest.h"

static const fvm_rule_fn rule_table[FVM_OP_COUNT] = {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) [FVM_OP_##ID] = RULE,
#include "ops.def"
#undef FVM_OP
};

enum { F_NEW, F_BUSY, F_DONE };

typedef struct checker {
    fvm_program *p;
    fvm_arena *a;
    fvm_diag *d;
    int errors;
    fvm_func *stack[FVM_MAX_CALL_DEPTH];
    int depth;
} checker;

/* ---- messages ------------------------------------------------------------- */

fvm_status fvm_rerr(fvm_rctx *c, int i, fvm_status code, const char *fmt, ...)
{
    const fvm_loc *l = &c->in->loc;
    if (i == FVM_RLOC_ATTRS)
        l = &c->in->attrs_loc;
    else if (i >= 0 && i < c->in->nargs)
        l = &c->in->arg_locs[i];
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* a destructuring's fields report as the op written, fields */
    return fvm_diag_add(c->d, code, l, "%s: %s", fvm_op_table[c->in->fields ? FVM_OP_FIELDS : c->in->op].name, msg);
}

const char *fvm_rtype(fvm_rctx *c, const fvm_type *t)
{
    const char *s = t ? fvm_type_str(c->a, t, true) : "?";
    return s ? s : "?";
}

static void cerr(checker *C, fvm_status code, const fvm_loc *l, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void cerr(checker *C, fvm_status code, const fvm_loc *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(C->d, code, l, fmt, ap);
    va_end(ap);
    C->errors++;
}

static const char *tstr(checker *C, const fvm_type *t)
{
    const char *s = fvm_type_str(C->a, t, true);
    return s ? s : "?";
}

/* ---- callees -------------------------------------------------------------------- */

static void check_func(checker *C, fvm_func *f);

/* Checks the callee g of a function attribute first (so its signature is
 * known), detecting recursion through the stack of functions being checked;
 * l locates the attribute. */
static bool check_callee(checker *C, const fvm_instr *in, fvm_func *g, const fvm_loc *l)
{
    if (g->state == F_BUSY) {
        char chain[1024] = "";
        int from = 0;
        for (int i = 0; i < C->depth; i++)
            if (C->stack[i] == g)
                from = i;
        for (int i = from; i < C->depth; i++) {
            strncat(chain, C->stack[i]->name, sizeof chain - strlen(chain) - 1);
            strncat(chain, " -> ", sizeof chain - strlen(chain) - 1);
        }
        strncat(chain, g->name, sizeof chain - strlen(chain) - 1);
        cerr(C, FVM_ERR_CYCLE, l, "%s: recursion is not allowed: %s", fvm_op_table[in->op].name, chain);
        return false;
    }
    if (g->state == F_NEW) {
        if (C->depth == FVM_MAX_CALL_DEPTH) {
            cerr(C, FVM_ERR_LIMIT, l, "calls nest more than %d functions deep (through '%s')", FVM_MAX_CALL_DEPTH,
                 g->name);
            return false;
        }
        check_func(C, g);
    }
    return true;
}

/* Every function the instruction's attributes name (decoded at load), checked first. */
static bool check_callees(checker *C, const fvm_instr *in)
{
    bool ok = true;
    for (int id = 0; id < FVM_NFUNC_ATTRS; id++) {
        if (!(in->a.present & (UINT64_C(1) << id)))
            continue;
        fvm_func *g = *(fvm_func *const *)((const char *)&in->a + fvm_attr_table[id].offset);
        if (!check_callee(C, in, g, &in->fn_locs[id]))
            ok = false;
    }
    return ok;
}

/* ---- functions ------------------------------------------------------------------ */

static bool calls_federated(const fvm_instr *in)
{
    const fvm_attrs *a = &in->a;
    const fvm_func *fs[] = {a->fn, a->then_fn, a->else_fn, a->cond_fn, a->body_fn};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if (fs[i] && fs[i]->federated)
            return true;
    return false;
}

/* The deepest call chain below an instruction (0 when it calls nothing). */
static int callee_height(const fvm_instr *in)
{
    const fvm_attrs *a = &in->a;
    const fvm_func *fs[] = {a->fn, a->then_fn, a->else_fn, a->cond_fn, a->body_fn, a->accumulate, a->merge, a->report};
    int h = 0;
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if (fs[i] && fs[i]->height > h)
            h = fs[i]->height;
    return h;
}

static void name_suggest(checker *C, const fvm_func *f, int upto, const char *name, const fvm_loc *l, const char *what)
{
    fvm_suggest s;
    fvm_suggest_init(&s, name);
    for (int i = 0; i < f->nparams; i++)
        fvm_suggest_add(&s, f->param_names[i]);
    for (int i = 0; i < upto; i++)
        if (f->instrs[i].name)
            fvm_suggest_add(&s, f->instrs[i].name);
    bool later = false;
    for (int i = upto; i < f->ninstrs; i++)
        if (f->instrs[i].name && !strcmp(f->instrs[i].name, name))
            later = true;
    if (later)
        cerr(C, FVM_ERR_NAME, l, "%s '%s' is used before the instruction that defines it", what, name);
    else if (s.best)
        cerr(C, FVM_ERR_NAME, l, "undefined name '%s' in %s; did you mean '%s'?", name, what, s.best);
    else
        cerr(C, FVM_ERR_NAME, l,
             "undefined name '%s' in %s (names are the function's parameters and earlier "
             "instructions)",
             name, what);
}

/* ---- literals and destructurings (made by the loader, format/ir_read.c) ----------- */

/* The literal as written, for messages: "0.5", "300", "true". */
static const char *literal_text(const fvm_doc *v, char buf[40])
{
    if (v->kind == FVM_DOC_BOOL)
        return v->u.b ? "true" : "false";
    if (v->kind == FVM_DOC_INT)
        snprintf(buf, 40, "%lld", (long long)v->u.i);
    else
        fvm_format_real(buf, v->u.r, false);
    return buf;
}

/* The one dtype of every leaf of a tensor tree t; false when t is none or its leaves differ. */
static bool one_dtype(const fvm_type *t, fvm_dtype *dt, bool *seen)
{
    if (t->kind == FVM_T_TENSOR) {
        if (*seen && *dt != t->u.tensor.dtype)
            return false;
        *dt = t->u.tensor.dtype;
        *seen = true;
        return true;
    }
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (!one_dtype(t->u.strct.elems[i], dt, seen))
            return false;
    return true;
}

/* The literal v as a scalar of dtype dt into *out, or an error at l: an
 * integer dtype takes integers that fit it (2.0 is one), a float dtype any
 * number its range holds (rounded to it, as const rounds), bool a boolean. */
static bool literal_value(checker *C, const fvm_instr *user, const fvm_doc *v, fvm_dtype dt, const char *from,
                          const fvm_loc *l, fvm_tensor *out)
{
    const char *op = fvm_op_table[user->op].name, *dn = fvm_dtype_name(dt);
    char buf[40];
    const char *text = literal_text(v, buf);
    if ((dt == FVM_DTYPE_BOOL) != (v->kind == FVM_DOC_BOOL)) {
        cerr(C, FVM_ERR_TYPE, l, "%s: the literal %s takes the dtype of '%s', %s, which %s", op, text, from, dn,
             v->kind == FVM_DOC_BOOL ? "is not bool: a boolean literal goes with bool operands"
                                     : "is bool: write true or false");
        return false;
    }
    fvm_dims d0 = {0};
    if (fvm_tensor_alloc(out, dt, &d0, C->d)) {
        C->errors++;
        return false;
    }
    if (dt == FVM_DTYPE_BOOL) {
        fvm_tensor_set_i64(out, 0, v->u.b);
        return true;
    }
    if (fvm_dtype_is_float(dt)) {
        double r = v->kind == FVM_DOC_INT ? (double)v->u.i : v->u.r;
        fvm_tensor_set_f64(out, 0, r);
        if (!isfinite(fvm_tensor_get_f64(out, 0))) {
            cerr(C, FVM_ERR_TYPE, l, "%s: the literal %s is out of the range of %s, the dtype of '%s'", op, text, dn,
                 from);
            fvm_tensor_release(out);
            return false;
        }
        return true;
    }
    int64_t iv = 0;
    bool integral = fvm_doc_integer(v, &iv) || (v->kind == FVM_DOC_REAL && v->u.r == trunc(v->u.r));
    bool fits = fvm_doc_integer(v, &iv) &&
                (dt == FVM_DTYPE_I64 || (dt == FVM_DTYPE_I32 && iv >= INT32_MIN && iv <= INT32_MAX) ||
                 (dt == FVM_DTYPE_U32 && iv >= 0 && iv <= (int64_t)UINT32_MAX) ||
                 (dt == FVM_DTYPE_U8 && iv >= 0 && iv <= UINT8_MAX));
    if (!fits) {
        if (integral)
            cerr(C, FVM_ERR_TYPE, l, "%s: the literal %s is out of the range of %s, the dtype of '%s'", op, text, dn,
                 from);
        else
            cerr(C, FVM_ERR_TYPE, l,
                 "%s: the literal %s is not an integer, and it takes the dtype of '%s', %s (cast the operand to "
                 "a float dtype to mix them)",
                 op, text, from, dn);
        fvm_tensor_release(out);
        return false;
    }
    fvm_tensor_set_i64(out, 0, iv);
    return true;
}

/* A literal argument's const (in): the dtype of its instruction's other
 * operands that are not literals, the first one that is defined (select:
 * its two values, not the predicate); a scalar of it. It gets the
 * attributes value and dtype, as if written as a const. Nothing is reported
 * when an operand is undefined or failed: its instruction says so. */
static void check_literal(checker *C, fvm_func *f, int idx, fvm_names *sc, const fvm_type **slot_types)
{
    fvm_instr *in = &f->instrs[idx];
    const fvm_instr *user = &f->instrs[idx + in->lit_user];
    char buf[40];
    in->slot = f->nparams + idx;
    slot_types[in->slot] = NULL;
    if (in->name && fvm_names_get(sc, in->name, -1) < 0)
        (void)fvm_names_put(sc, in->name, in->slot);
    if (user->op == FVM_OP_COUNT || !user->arg_names)
        return; /* its instruction is malformed, reported by the loader */
    const char *op = fvm_op_table[user->op].name;
    in->args = fvm_arena_array(C->a, 1, sizeof(int));
    in->arg_types = fvm_arena_array(C->a, 1, sizeof(fvm_type *));
    if (!in->args || !in->arg_types) {
        cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
        return;
    }
    const char *from = NULL;
    const fvm_type *ft = NULL;
    for (int k = 0; k < user->nargs && !from; k++) {
        if (k == in->lit_arg || (user->arg_literals && user->arg_literals[k]) ||
            (user->op == FVM_OP_SELECT && (k == 0) != (in->lit_arg == 0)))
            continue;
        int s = user->arg_names[k] ? fvm_names_get(sc, user->arg_names[k], -1) : -1;
        if (s < 0 || !slot_types[s])
            return; /* undefined or failed: reported at the instruction */
        from = user->arg_names[k];
        ft = slot_types[s];
    }
    if (!from) {
        cerr(C, FVM_ERR_TYPE, &in->loc,
             "%s: the literal %s has no operand to take its dtype from (%s): write it as a const with a dtype", op,
             literal_text(in->literal, buf),
             user->op == FVM_OP_SELECT && in->lit_arg == 0 ? "select's predicate is bool, of no other operand"
                                                           : "every other operand is a literal too");
        return;
    }
    fvm_dtype dt = FVM_DTYPE_F32;
    bool seen = false;
    if (!one_dtype(ft, &dt, &seen) || !seen) {
        cerr(C, FVM_ERR_TYPE, &in->loc,
             "%s: the literal %s takes the dtype of '%s', but '%s' is %s, which has no one dtype (tensors of one "
             "dtype, or structs of them)",
             op, literal_text(in->literal, buf), from, from, tstr(C, ft));
        return;
    }
    fvm_tensor_release(&in->konst);
    if (!literal_value(C, user, in->literal, dt, from, &in->loc, &in->konst))
        return;
    fvm_doc *attrs = fvm_doc_new(C->a, FVM_DOC_OBJECT);
    if (!attrs || fvm_doc_set(C->a, attrs, "value", (fvm_doc *)in->literal) ||
        fvm_doc_set(C->a, attrs, "dtype", fvm_doc_string(C->a, fvm_dtype_name(dt)))) {
        cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
        return;
    }
    attrs->flow = true;
    in->attrs = attrs;
    in->a.value = in->literal;
    in->a.dtype = dt;
    in->a.present = A(VALUE) | A(DTYPE);
    in->type = fvm_type_scalar(C->a, dt);
    slot_types[in->slot] = in->type;
}

/* Field field_pos of a destructuring (in, a field instruction whose struct
 * argument has type t): which field it binds, by the attribute names; else
 * a struct whose fields all have names by the bound name itself, any other
 * struct by position (as many names as fields). Sets in's attributes as a
 * field instruction's, {"name": ...} or {"index": k}, so that everything
 * after (lowering placed fields, derivatives, writers of what runs) sees a
 * field. false after an error, reported (its first field reports what
 * concerns them all; the others are then poisoned). */
static bool field_of(checker *C, fvm_func *f, int idx, const fvm_type *t)
{
    fvm_instr *in = &f->instrs[idx];
    const fvm_fields *fs = in->fields;
    int j = in->field_pos;
    const fvm_type *st = t->kind == FVM_T_FED ? t->u.fed.member : t;
    const char *name = fs->fields.n ? fs->fields.v[j] : NULL;
    const fvm_loc *l = fs->fields.n ? &fs->attrs_loc : &fs->name_locs[j];
    fvm_doc *attrs = fvm_doc_new(C->a, FVM_DOC_OBJECT);
    if (!attrs) {
        cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
        return false;
    }
    attrs->flow = true;
    bool named = st->kind == FVM_T_STRUCT && st->u.strct.n > 0;
    for (int k = 0; named && k < st->u.strct.n; k++)
        named = st->u.strct.names[k] != NULL;
    if (!name && st->kind == FVM_T_STRUCT && named)
        name = in->name;
    if (name) {
        if (st->kind == FVM_T_STRUCT && fvm_type_field_index(st, name) < 0) {
            char list[512] = "";
            for (int k = 0; k < st->u.strct.n; k++) {
                if (k)
                    strncat(list, ", ", sizeof list - strlen(list) - 1);
                strncat(list, st->u.strct.names[k] ? st->u.strct.names[k] : "?", sizeof list - strlen(list) - 1);
            }
            if (fs->fields.n)
                cerr(C, FVM_ERR_NAME, l, "fields: '%s' is %s, which has no field '%s' (its fields: %s)",
                     in->arg_names[0], tstr(C, st), name, list);
            else
                cerr(C, FVM_ERR_NAME, l,
                     "fields: '%s' is %s, which has no field '%s' (its fields: %s); a name other than a field's "
                     "is bound by {\"names\": [...]}, the field of each name",
                     in->arg_names[0], tstr(C, st), name, list);
            return false;
        }
        if (fvm_doc_set(C->a, attrs, "name", fvm_doc_string(C->a, name))) {
            cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
            return false;
        }
        in->a.name = name;
        in->a.present = A(NAME);
    } else {
        if (st->kind == FVM_T_STRUCT && st->u.strct.n != fs->n) {
            cerr(C, FVM_ERR_TYPE, &in->loc, "fields: binds %d name%s, but '%s' is %s, a struct of %d field%s", fs->n,
                 fs->n == 1 ? "" : "s", in->arg_names[0], tstr(C, st), st->u.strct.n, st->u.strct.n == 1 ? "" : "s");
            return false;
        }
        if (fvm_doc_set(C->a, attrs, "index", fvm_doc_int(C->a, j))) {
            cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
            return false;
        }
        in->a.index = j;
        in->a.present = A(INDEX);
    }
    in->attrs = attrs;
    return true;
}

static void check_instr(checker *C, fvm_func *f, int idx, fvm_names *sc, const fvm_type **slot_types)
{
    fvm_instr *in = &f->instrs[idx];
    if (in->literal) {
        check_literal(C, f, idx, sc, slot_types);
        return;
    }
    in->slot = f->nparams + idx;
    if (in->fields && in->field_pos > 0 && !f->instrs[idx - in->field_pos].type && in->op != FVM_OP_COUNT) {
        /* the destructuring's first field failed and said why: the others bind their names, poisoned */
        slot_types[in->slot] = NULL;
        if (in->name && fvm_names_get(sc, in->name, -1) < 0)
            (void)fvm_names_put(sc, in->name, in->slot);
        return;
    }
    if (in->op == FVM_OP_COUNT || !in->arg_names) {
        /* Malformed (reported by the loader): bind its name, poisoned, so its
         * uses don't cascade into more errors. */
        slot_types[in->slot] = NULL;
        if (in->name && fvm_names_get(sc, in->name, -1) < 0)
            (void)fvm_names_put(sc, in->name, in->slot);
        return;
    }
    in->args = fvm_arena_array(C->a, (size_t)in->nargs + 1, sizeof(int));
    in->arg_types = fvm_arena_array(C->a, (size_t)in->nargs + 1, sizeof(fvm_type *));
    if (!in->args || !in->arg_types) {
        cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
        return;
    }
    const fvm_op_info *op = &fvm_op_table[in->op];
    bool ok = true;
    if (in->nargs < op->min_args || (op->max_args >= 0 && in->nargs > op->max_args)) {
        if (op->min_args == op->max_args)
            cerr(C, FVM_ERR_TYPE, &in->loc, "%s takes %d argument%s, found %d", op->name, op->min_args,
                 op->min_args == 1 ? "" : "s", in->nargs);
        else if (op->max_args < 0)
            cerr(C, FVM_ERR_TYPE, &in->loc, "%s takes at least %d argument%s, found %d", op->name, op->min_args,
                 op->min_args == 1 ? "" : "s", in->nargs);
        else
            cerr(C, FVM_ERR_TYPE, &in->loc, "%s takes %d to %d arguments, found %d", op->name, op->min_args,
                 op->max_args, in->nargs);
        ok = false;
    }
    for (int i = 0; i < in->nargs; i++) {
        in->args[i] = -1;
        if (!in->arg_names[i]) {
            ok = false;
            continue;
        }
        int s = fvm_names_get(sc, in->arg_names[i], -1);
        if (s < 0) {
            name_suggest(C, f, idx, in->arg_names[i], &in->arg_locs[i], "an argument");
            ok = false;
            continue;
        }
        in->args[i] = s;
        in->arg_types[i] = slot_types[s];
        if (!slot_types[s])
            ok = false; /* its definition failed: already reported */
    }
    if (in->attrs_bad || !check_callees(C, in))
        ok = false;
    if (ok && in->fields && !field_of(C, f, idx, in->arg_types[0]))
        ok = false;
    if (ok && !(op->flags & OPF_PLACED)) {
        for (int i = 0; i < in->nargs; i++) {
            if (fvm_type_is_placed(in->arg_types[i])) {
                cerr(C, FVM_ERR_PLACEMENT, &in->arg_locs[i],
                     "%s: '%s' is placed (%s); %s operates on unplaced values: run it per client with "
                     "federated_map or on the server with federated_apply",
                     op->name, in->arg_names[i], tstr(C, in->arg_types[i]), op->name);
                ok = false;
                break;
            }
        }
    }
    if (ok) {
        fvm_rctx rc = {.a = C->a, .d = C->d, .p = C->p, .f = f, .in = in, .args = in->arg_types, .nargs = in->nargs};
        const fvm_type *t = NULL;
        int before = C->d->n;
        fvm_status st = rule_table[in->op](&rc, &t);
        if (st != FVM_OK) {
            if (C->d->n == before)
                cerr(C, st, &in->loc, "%s: %s", op->name, st == FVM_ERR_NOMEM ? "out of memory" : "invalid operands");
            else
                C->errors += C->d->n - before;
            t = NULL;
        }
        in->type = t;
    }
    if ((op->flags & OPF_FED) || (in->type && fvm_type_is_placed(in->type)) || calls_federated(in))
        f->federated = true;
    slot_types[in->slot] = in->type;
    if (in->name) {
        int prev = fvm_names_get(sc, in->name, -1);
        if (prev >= 0) {
            const fvm_loc *pl = prev < f->nparams ? &f->param_name_locs[prev] : &f->instrs[prev - f->nparams].name_loc;
            cerr(C, FVM_ERR_NAME, &in->name_loc,
                 "'%s' is already defined (at %d:%d); every instruction binds a new "
                 "name",
                 in->name, pl->line, pl->col);
        } else {
            (void)fvm_names_put(sc, in->name, in->slot);
        }
    }
}

/* Last use of every slot: values are released right after it. */
static void liveness(checker *C, fvm_func *f)
{
    int *last = fvm_arena_array(C->a, (size_t)f->nslots + 1, sizeof(int));
    if (!last)
        return;
    for (int s = 0; s < f->nslots; s++)
        last[s] = -1;
    for (int i = 0; i < f->ninstrs; i++)
        for (int k = 0; k < f->instrs[i].nargs; k++)
            if (f->instrs[i].args && f->instrs[i].args[k] >= 0)
                last[f->instrs[i].args[k]] = i;
    if (f->result_slot >= 0)
        last[f->result_slot] = f->ninstrs; /* returned, never released here */
    int *count = fvm_arena_array(C->a, (size_t)f->ninstrs + 1, sizeof(int));
    if (!count)
        return;
    int unused_params = 0;
    for (int s = 0; s < f->nslots; s++) {
        if (last[s] >= 0 && last[s] < f->ninstrs)
            count[last[s]]++;
        else if (last[s] < 0 && s >= f->nparams)
            count[s - f->nparams]++; /* dead result: released right away */
        else if (last[s] < 0)
            unused_params++;
    }
    for (int i = 0; i < f->ninstrs; i++) {
        f->instrs[i].release = fvm_arena_array(C->a, (size_t)count[i] + 1, sizeof(int));
        if (!f->instrs[i].release)
            return;
    }
    f->param_release = fvm_arena_array(C->a, (size_t)unused_params + 1, sizeof(int));
    if (!f->param_release)
        return;
    for (int s = 0; s < f->nslots; s++) {
        if (last[s] >= 0 && last[s] < f->ninstrs) {
            fvm_instr *in = &f->instrs[last[s]];
            in->release[in->nrelease++] = s;
        } else if (last[s] < 0 && s >= f->nparams) {
            fvm_instr *in = &f->instrs[s - f->nparams];
            in->release[in->nrelease++] = s;
        } else if (last[s] < 0) {
            f->param_release[f->nparam_release++] = s;
        }
    }
}

static void check_func(checker *C, fvm_func *f)
{
    int errors_before = C->errors;
    bool params_ok = true;
    f->state = F_BUSY;
    C->stack[C->depth++] = f;
    f->nslots = f->nparams + f->ninstrs;
    f->result_slot = -1;
    const fvm_type **slot_types = fvm_arena_array(C->a, (size_t)f->nslots + 1, sizeof(fvm_type *));
    fvm_names sc; /* every name to its slot, with room for all: binding never fails */
    fvm_names_init(&sc, C->a, (size_t)f->nslots);
    if (!slot_types || !sc.cap) {
        cerr(C, FVM_ERR_NOMEM, &f->loc, "out of memory");
        goto done;
    }
    for (int i = 0; i < f->nparams; i++) {
        slot_types[i] = f->param_types[i];
        if (!f->param_types[i])
            params_ok = false; /* its type string was reported by the loader */
        else if (fvm_type_is_placed(f->param_types[i]))
            f->federated = true;
        (void)fvm_names_put(&sc, f->param_names[i], i);
    }
    f->height = 1;
    for (int i = 0; i < f->ninstrs; i++) {
        check_instr(C, f, i, &sc, slot_types);
        int h = 1 + callee_height(&f->instrs[i]);
        if (h > f->height)
            f->height = h;
    }
    /* The same limit whatever order functions are declared (and checked) in. */
    if (f->height > FVM_MAX_CALL_DEPTH && C->depth == 1)
        cerr(C, FVM_ERR_LIMIT, &f->loc, "calls nest more than %d functions deep below '%s'", FVM_MAX_CALL_DEPTH,
             f->name);
    if (f->result_name) {
        int s = fvm_names_get(&sc, f->result_name, -1);
        if (s < 0) {
            name_suggest(C, f, f->ninstrs, f->result_name, &f->result_loc, "the result");
        } else {
            f->result_slot = s;
            f->result_type = slot_types[s];
        }
    }
done:
    /* The passes after checking see well-formed, fully typed functions only:
     * an instruction the loader could not read leaves the program's
     * load_errors set and its slot untyped. */
    f->ok = C->errors == errors_before && params_ok && f->result_type && !C->p->load_errors;
    if (f->ok)
        liveness(C, f);
    if (f->ok && fvm_type_is_placed(f->result_type))
        f->federated = true;
    C->depth--;
    f->state = F_DONE;
}

/* ---- program conventions --------------------------------------------------------- */

/* A client state is a tensor or a struct of them (what a safetensors file holds). */
static bool storable(const fvm_type *t)
{
    if (t->kind == FVM_T_STRUCT) {
        for (int i = 0; i < t->u.strct.n; i++)
            if (!storable(t->u.strct.elems[i]))
                return false;
        return true;
    }
    return t->kind == FVM_T_TENSOR;
}

/* initialize_client ( -> C) or (key: u32[2] -> C); next takes client_states
 * {C}@CLIENTS and returns the new ones third. */
static void check_client_state(checker *C, const fvm_func *ic, const fvm_func *next)
{
    const fvm_type *c = ic->result_type;
    bool key = ic->nparams == 1 && fvm_given_param(ic->param_names[0], ic->param_types[0]) == FVM_GIVEN_KEY &&
               !fvm_type_is_placed(ic->param_types[0]);
    if ((ic->nparams != 0 && !key) || !storable(c)) {
        cerr(C, FVM_ERR_TYPE, &ic->loc,
             "initialize_client must take no parameters (or only 'key': u32[2]) and return a client's first "
             "state C, unplaced tensors or a struct of them; it is (%d parameters) -> %s",
             ic->nparams, tstr(C, c));
        return;
    }
    int at = -1;
    for (int i = 1; i < next->nparams; i++)
        if (!strcmp(next->param_names[i], "client_states"))
            at = i;
    const fvm_type *p = at > 0 ? next->param_types[at] : NULL;
    if (!p || fvm_given_param("client_states", p) != FVM_GIVEN_CLIENT_STATES ||
        !fvm_type_compatible(c, p->u.fed.member)) {
        cerr(C, FVM_ERR_TYPE, at > 0 ? &next->param_locs[at] : &next->loc,
             "with initialize_client, next takes the round's client states as a parameter 'client_states' of "
             "type {%s}@CLIENTS%s%s",
             tstr(C, c), p ? "; it is " : "", p ? tstr(C, p) : "");
        return;
    }
    const fvm_type *r = next->result_type->u.strct.elems[2];
    if (r->kind != FVM_T_FED || r->u.fed.pl != FVM_PL_CLIENTS || r->u.fed.all_equal ||
        !fvm_type_compatible(r->u.fed.member, c))
        cerr(C, FVM_ERR_TYPE, &next->result_loc,
             "next's third result must be the clients' new states {%s}@CLIENTS; it is %s", tstr(C, c), tstr(C, r));
}

static void check_conventions(checker *C)
{
    fvm_func *init = fvm_program_func(C->p, "initialize"), *next = fvm_program_func(C->p, "next");
    fvm_func *eval = fvm_program_func(C->p, "evaluate"), *ic = fvm_program_func(C->p, "initialize_client");
    if (ic && !next) {
        cerr(C, FVM_ERR_FORMAT, &ic->loc, "'initialize_client' belongs to an iterative program (initialize and next)");
        return;
    }
    if (!next && !init)
        return; /* not iterative ('evaluate' alone is just a function) */
    if (next && !init) {
        cerr(C, FVM_ERR_FORMAT, &next->loc, "an iterative program with 'next' also needs 'initialize' ( -> S@SERVER)");
        return;
    }
    if (init && !next) {
        cerr(C, FVM_ERR_FORMAT, &init->loc, "an iterative program with 'initialize' also needs 'next'");
        return;
    }
    if (!init->ok || !next->ok || (eval && !eval->ok) || (ic && !ic->ok))
        return;
    const fvm_type *s = init->result_type, *k = init->nparams == 1 ? init->param_types[0] : NULL;
    if (k && k->kind == FVM_T_FED && k->u.fed.pl == FVM_PL_SERVER)
        k = k->u.fed.member;
    bool key_only = k && !strcmp(init->param_names[0], "key") && k->kind == FVM_T_TENSOR &&
                    k->u.tensor.dtype == FVM_DTYPE_U32 && k->u.tensor.dims.rank == 1 && k->u.tensor.dims.d[0] == 2;
    if ((init->nparams != 0 && !key_only) || s->kind != FVM_T_FED || s->u.fed.pl != FVM_PL_SERVER) {
        cerr(C, FVM_ERR_TYPE, &init->loc,
             "initialize must take no parameters (or only 'key': u32[2]) and return the "
             "server state S@SERVER; it is (%d parameters) -> %s",
             init->nparams, tstr(C, s));
        return;
    }
    if (next->nparams < 1 || !fvm_type_compatible(s, next->param_types[0])) {
        cerr(C, FVM_ERR_TYPE, &next->loc, "next's first parameter must be the state %s from initialize%s%s", tstr(C, s),
             next->nparams ? "; it is " : "", next->nparams ? tstr(C, next->param_types[0]) : "");
        return;
    }
    const fvm_type *r = next->result_type;
    if (r->kind != FVM_T_STRUCT || r->u.strct.n != 2 + (ic != NULL) || !fvm_type_compatible(r->u.strct.elems[0], s) ||
        r->u.strct.elems[1]->kind != FVM_T_FED || r->u.strct.elems[1]->u.fed.pl != FVM_PL_SERVER) {
        if (ic)
            cerr(C, FVM_ERR_TYPE, &next->result_loc,
                 "next must return <state=%s, metrics=M@SERVER, client_states={C}@CLIENTS>; it returns %s", tstr(C, s),
                 tstr(C, r));
        else
            cerr(C, FVM_ERR_TYPE, &next->result_loc, "next must return <state=%s, metrics=M@SERVER>%s; it returns %s",
                 tstr(C, s),
                 r->kind == FVM_T_STRUCT && r->u.strct.n == 3
                     ? " (a third field, the clients' new states, needs a function 'initialize_client')"
                     : "",
                 tstr(C, r));
        return;
    }
    if (ic)
        check_client_state(C, ic, next);
    else
        for (int i = 1; i < next->nparams; i++)
            if (fvm_given_param(next->param_names[i], next->param_types[i]) == FVM_GIVEN_CLIENT_STATES)
                cerr(C, FVM_ERR_TYPE, &next->param_locs[i],
                     "next's parameter 'client_states' needs a function 'initialize_client' ( -> C) giving a "
                     "client's first state");
    if (eval && (eval->nparams < 1 || !fvm_type_compatible(s, eval->param_types[0])))
        cerr(C, FVM_ERR_TYPE, &eval->loc, "evaluate's first parameter must be the state %s", tstr(C, s));
}

/* The instruction of p whose written position contains the error's (its JSON pointer is a prefix
 * of the error's), among those a generator gave an origin; NULL when none. */
static const fvm_instr *origin_of(const fvm_program *p, const fvm_error *e)
{
    if (!e->loc.ptr || !e->loc.file)
        return NULL;
    for (int i = 0; i < p->nfuncs; i++)
        for (int k = 0; k < p->funcs[i]->ninstrs; k++) {
            const fvm_instr *in = &p->funcs[i]->instrs[k];
            if (!in->origin.file || !in->loc.ptr || !in->loc.file)
                continue;
            size_t n = strlen(in->loc.ptr);
            if (strncmp(e->loc.ptr, in->loc.ptr, n) == 0 && (e->loc.ptr[n] == '/' || !e->loc.ptr[n]) &&
                strcmp(e->loc.file, in->loc.file) == 0)
                return in;
        }
    return NULL;
}

/* Each error at an instruction with an origin (format/SPEC.md, "Source
 * locations") names it after its message: "... (from algo.py:12)". */
static void note_origins(const fvm_program *p, fvm_diag *d)
{
    for (int i = 0; i < d->n; i++) {
        const fvm_instr *in = origin_of(p, &d->errs[i]);
        if (!in)
            continue;
        size_t n = strlen(d->errs[i].msg) + strlen(in->origin.file) + 32;
        char *msg = malloc(n);
        if (!msg)
            return;
        snprintf(msg, n, "%s (from %s:%d)", d->errs[i].msg, in->origin.file, in->origin.line);
        free(d->errs[i].msg);
        d->errs[i].msg = msg;
    }
}

fvm_status fvm_check(fvm_program *p, fvm_diag *d)
{
    checker C = {.p = p, .a = &p->arena, .d = d};
    for (int i = 0; i < p->nfuncs; i++)
        if (p->funcs[i]->state == F_NEW)
            check_func(&C, p->funcs[i]);
    if (C.errors == 0 && !p->load_errors)
        check_conventions(&C);
    if (C.errors == 0 && !p->load_errors)
        return FVM_OK;
    if (d) {
        fvm_diag_sort(d, 0);
        note_origins(p, d);
    }
    return d && d->n ? d->errs[0].code : FVM_ERR_TYPE;
}

fvm_status fvm_check_func(fvm_program *p, fvm_func *f, fvm_diag *d)
{
    checker C = {.p = p, .a = &p->arena, .d = d};
    if (f->state == F_NEW)
        check_func(&C, f);
    return f->ok ? FVM_OK : FVM_ERR_TYPE;
}

fvm_status fvm_check_wrt(const fvm_func *f, int k, fvm_diag *d, const fvm_loc *loc)
{
    const fvm_type *t = f->param_types[k];
    char ts[256];
    if (!fvm_type_has_floats(t))
        return fvm_diag_add(d, FVM_ERR_TYPE, loc,
                            "parameter '%s' (%s) holds no float: no gradient flows through "
                            "integers",
                            f->param_names[k], fvm_type_format(t, true, ts, sizeof ts));
    /* A cotangent of a sequence would need sums and zeros of sequences, and
     * sequence_map and sequence_reduce pass none to their sequence: only
     * sequence_sum would, so it is refused everywhere alike. */
    if (fvm_type_has_seq(t))
        return fvm_diag_add(d, FVM_ERR_TYPE, loc,
                            "differentiating with respect to a sequence ('%s', %s) is not "
                            "supported",
                            f->param_names[k], fvm_type_format(t, true, ts, sizeof ts));
    return FVM_OK;
}
