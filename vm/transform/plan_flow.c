/* plan_flow.c - federated functions flattened into one graph, staged, and written back as generated functions. */
#include "plan_flow.h"
#include "../../format/doc_io.h"

#include <stdlib.h>
#include <string.h>

#include "../ir/check.h"
#include "passes.h"
#include "../../format/ir_read.h"
#include "../../format/ir_write.h"

#define MAX_INLINE_DEPTH 64

typedef struct flat {
    fvm_arena *a;
    fvm_flow *fl;
    fvm_diag *d;
} flat;

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

const fvm_type *fvm_flow_unplaced(const fvm_type *t)
{
    return t->kind == FVM_T_FED ? t->u.fed.member : t;
}

bool fvm_flow_is_aggregation(const fvm_flow *fl, int i)
{
    const fvm_instr *in = fl->nodes[i].in;
    return in && (fvm_op_table[in->op].flags & OPF_AGG);
}

bool fvm_flow_is_broadcast(const fvm_flow *fl, int i)
{
    const fvm_instr *in = fl->nodes[i].in;
    return in && (in->op == FVM_OP_FEDERATED_BROADCAST ||
                  (in->op == FVM_OP_FEDERATED_VALUE && in->a.placement == FVM_PL_CLIENTS));
}

static int add_node(flat *F, const fvm_fnode *n)
{
    fvm_flow *fl = F->fl;
    if (fl->n == fl->cap) {
        int cap = fl->cap ? 2 * fl->cap : 64;
        fvm_fnode *nodes = fvm_arena_array(F->a, (size_t)cap, sizeof *nodes);
        if (!nodes)
            return -1;
        if (fl->n)
            memcpy(nodes, fl->nodes, (size_t)fl->n * sizeof *nodes);
        fl->nodes = nodes;
        fl->cap = cap;
    }
    fl->nodes[fl->n] = *n;
    return fl->n++;
}

/* "'name' (op)", and with at its location too, for messages. */
static const char *where(fvm_arena *a, const fvm_fnode *n, bool at)
{
    const fvm_loc *l = &n->in->loc;
    if (!at)
        return fvm_arena_printf(a, "'%s' (%s)", n->name, fvm_op_table[n->in->op].name);
    return fvm_arena_printf(a, "'%s' (%s at %s:%d:%d, %s)", n->name, fvm_op_table[n->in->op].name,
                            l->file ? l->file : "?", l->line, l->col, l->ptr ? l->ptr : "");
}

/* The stage of real node i from its arguments; errors for a second exchange. */
static fvm_status stage(flat *F, int i)
{
    fvm_fnode *n = &F->fl->nodes[i];
    const fvm_instr *in = n->in;
    int st = FVM_STAGE_LOCAL, agg = -1;
    for (int k = 0; k < n->nargs; k++) {
        const fvm_fnode *m = &F->fl->nodes[n->args[k]];
        if (m->stage > st || (m->stage == st && agg < 0 && m->agg >= 0)) {
            st = m->stage;
            agg = m->agg;
        }
    }
    if (fvm_flow_is_broadcast(F->fl, i)) {
        if (st == FVM_STAGE_AFTER)
            return fvm_diag_add(F->d, FVM_ERR_PLACEMENT, &in->loc,
                                "%s sends a value to the clients that depends on the aggregation %s: a round "
                                "has one exchange (broadcast, client work, aggregation), and this is a second "
                                "one; write each exchange as its own function (its own round)",
                                where(F->a, n, false), where(F->a, &F->fl->nodes[agg], true));
        st = FVM_STAGE_CLIENTS;
        agg = -1;
    } else if (fvm_flow_is_aggregation(F->fl, i)) {
        st = FVM_STAGE_AFTER;
        agg = i;
    } else if (in->op == FVM_OP_FEDERATED_EVAL) {
        st = in->a.placement == FVM_PL_CLIENTS ? FVM_STAGE_CLIENTS : FVM_STAGE_SERVER;
    } else if (n->type->kind == FVM_T_FED) {
        st = n->type->u.fed.pl == FVM_PL_CLIENTS ? FVM_STAGE_CLIENTS : (st < FVM_STAGE_SERVER ? FVM_STAGE_SERVER : st);
    }
    n->stage = st;
    n->agg = st == FVM_STAGE_AFTER ? agg : -1;
    return FVM_OK;
}

static bool has_placed_arg(const fvm_instr *in)
{
    for (int k = 0; k < in->nargs; k++)
        if (fvm_type_is_placed(in->arg_types[k]))
            return true;
    return false;
}

static fvm_status flatten(flat *F, const fvm_func *f, const char *prefix, const int *params, int *result, int depth);

/* A node for an instruction the flattening makes up: op of type t at in's
 * location, with attributes attrs. */
static int made_up(flat *F, const fvm_instr *at, const char *name, fvm_op op, fvm_doc *attrs, fvm_placement pl,
                   const fvm_type *t, int nargs, int *args)
{
    fvm_instr *in = fvm_arena_alloc(F->a, sizeof *in);
    if (!in || !name)
        return -1;
    memset(in, 0, sizeof *in);
    in->name = name;
    in->op = op;
    in->attrs = attrs;
    in->a.placement = pl;
    in->loc = at->loc;
    in->type = t;
    fvm_fnode n = {.name = name, .in = in, .param = -1, .nargs = nargs, .args = args, .type = t, .agg = -1};
    int i = add_node(F, &n);
    return i < 0 || stage(F, i) ? -1 : i;
}

/* grad, value_and_grad or vjp of a federated function: its pullback (the
 * passes derived it: fn'(params..., ct) -> <value, grads=<g>>) inlined
 * like a call, with the cotangent 1 made up for grad and value_and_grad
 * (with has_aux, of the value's field 0: the pullback's parameter);
 * jvp: its forward derivative fn.jvp(params..., t) inlined. */
static fvm_status inline_derivative(flat *F, const fvm_instr *in, const char *name, int *args, int *out, int depth)
{
    const fvm_func *fn = in->a.fn, *pb = in->derived;
    int n = fn->nparams, *pargs = fvm_arena_array(F->a, (size_t)n + 2, sizeof *pargs);
    if (!pargs)
        return nomem(F->d);
    if (in->op == FVM_OP_JVP) { /* fn.jvp(params..., t) -> <value, tangent>: the op's value */
        const char *sub = fvm_arena_printf(F->a, "%s/", name);
        return sub ? flatten(F, pb, sub, args, out, depth + 1) : nomem(F->d);
    }
    memcpy(pargs, args, (size_t)n * sizeof *pargs);
    if (in->op == FVM_OP_VJP) {
        pargs[n] = args[n];
    } else {
        const fvm_type *t = pb->param_types[n], *m = fvm_flow_unplaced(t);
        fvm_doc *attrs = fvm_doc_new(F->a, FVM_DOC_OBJECT), *shape = fvm_doc_new(F->a, FVM_DOC_ARRAY);
        if (!attrs || !shape || m->kind != FVM_T_TENSOR)
            return nomem(F->d);
        for (int k = 0; k < m->u.tensor.dims.rank; k++)
            if (fvm_doc_push(F->a, shape, fvm_doc_int(F->a, m->u.tensor.dims.d[k])))
                return nomem(F->d);
        attrs->flow = shape->flow = true;
        if (fvm_doc_set(F->a, attrs, "value", fvm_doc_real(F->a, 1.0)) ||
            fvm_doc_set(F->a, attrs, "dtype", fvm_doc_string(F->a, fvm_dtype_name(m->u.tensor.dtype))) ||
            fvm_doc_set(F->a, attrs, "shape", shape))
            return nomem(F->d);
        int one =
            made_up(F, in, fvm_arena_printf(F->a, "%s/one", name), FVM_OP_CONST, attrs, FVM_PL_SERVER, m, 0, NULL);
        if (one >= 0 && t->kind == FVM_T_FED) {
            int *a1 = fvm_arena_array(F->a, 1, sizeof *a1);
            fvm_doc *pa = fvm_attr1(F->a, "placement", t->u.fed.pl == FVM_PL_SERVER ? "SERVER" : "CLIENTS");
            if (!a1 || !pa)
                return nomem(F->d);
            a1[0] = one;
            one = made_up(F, in, fvm_arena_printf(F->a, "%s/ct", name), FVM_OP_FEDERATED_VALUE, pa, t->u.fed.pl, t, 1,
                          a1);
        }
        if (one < 0)
            return nomem(F->d);
        pargs[n] = one;
    }
    const char *sub = fvm_arena_printf(F->a, "%s/", name);
    int r;
    fvm_status s = sub ? flatten(F, pb, sub, pargs, &r, depth + 1) : nomem(F->d);
    if (s)
        return s;
    /* <value, grads=<g>>, built by struct instructions, so views */
    const fvm_fnode *res = &F->fl->nodes[r];
    const fvm_fnode *grads = res->view && res->nargs == 2 ? &F->fl->nodes[res->args[1]] : NULL;
    if (!grads || !grads->view || grads->nargs != 1)
        return fvm_diag_add(F->d, FVM_ERR_USAGE, &in->loc, "internal: the derivative of '%s' has an unexpected shape",
                            fn->name);
    bool vg_op = in->op == FVM_OP_VALUE_AND_GRAD;
    if (!vg_op && !in->a.has_aux) {
        *out = grads->args[0];
        return FVM_OK;
    }
    /* value_and_grad: <value, g>; grad with has_aux: <g, aux>, aux the value's field 1 (a struct of
     * placed values, so a view) */
    const fvm_fnode *value = &F->fl->nodes[res->args[0]];
    if (!vg_op && (!value->view || value->nargs != 2))
        return fvm_diag_add(F->d, FVM_ERR_USAGE, &in->loc, "internal: the value of '%s' has an unexpected shape",
                            fn->name);
    int *vg = fvm_arena_array(F->a, 2, sizeof *vg);
    if (!vg)
        return nomem(F->d);
    vg[0] = vg_op ? res->args[0] : grads->args[0];
    vg[1] = vg_op ? grads->args[0] : value->args[1];
    fvm_fnode v = {.name = name, .view = true, .param = -1, .nargs = 2, .args = vg, .type = in->type, .agg = -1};
    v.stage =
        F->fl->nodes[vg[0]].stage > F->fl->nodes[vg[1]].stage ? F->fl->nodes[vg[0]].stage : F->fl->nodes[vg[1]].stage;
    return (*out = add_node(F, &v)) < 0 ? nomem(F->d) : FVM_OK;
}

/* federated_select as a round runs it: its server values broadcast, then its
 * client half (the function the passes made, vm/transform/passes.h) mapped
 * over the clients with their keys. */
static fvm_status flatten_select(flat *F, const fvm_instr *in, const char *name, const int *args, int *out)
{
    int *m = fvm_arena_array(F->a, 3, sizeof *m);
    if (!m || !in->derived)
        return nomem(F->d);
    m[0] = args[0];
    for (int k = 1; k < 3; k++) {
        int *b = fvm_arena_array(F->a, 1, sizeof *b);
        const fvm_type *t = fvm_type_fed(F->a, in->arg_types[k]->u.fed.member, FVM_PL_CLIENTS, true);
        const char *bn = fvm_arena_printf(F->a, "%s/%s", name, k == 1 ? "max_key" : "value");
        if (!b || !t || !bn)
            return nomem(F->d);
        b[0] = args[k];
        if ((m[k] = made_up(F, in, bn, FVM_OP_FEDERATED_BROADCAST, NULL, FVM_PL_CLIENTS, t, 1, b)) < 0)
            return nomem(F->d);
    }
    fvm_doc *attrs = fvm_attr1(F->a, "fn", in->derived->name);
    int r = attrs ? made_up(F, in, name, FVM_OP_FEDERATED_MAP, attrs, FVM_PL_CLIENTS, in->type, 3, m) : -1;
    if (r < 0)
        return nomem(F->d);
    ((fvm_instr *)F->fl->nodes[r].in)->a.fn = in->derived;
    *out = r;
    return FVM_OK;
}

static fvm_status flatten(flat *F, const fvm_func *f, const char *prefix, const int *params, int *result, int depth)
{
    if (depth > MAX_INLINE_DEPTH)
        return fvm_diag_add(F->d, FVM_ERR_LIMIT, &f->loc, "calls of federated functions nest deeper than %d",
                            MAX_INLINE_DEPTH);
    int *slot = fvm_arena_array(F->a, (size_t)f->nslots + 1, sizeof *slot);
    if (!slot)
        return nomem(F->d);
    for (int i = 0; i < f->nparams; i++)
        slot[i] = params[i];
    for (int i = 0; i < f->ninstrs; i++) {
        const fvm_instr *in = &f->instrs[i];
        int *args = fvm_arena_array(F->a, (size_t)in->nargs + 1, sizeof *args);
        const char *name = prefix ? fvm_arena_printf(F->a, "%s%s", prefix, in->name) : in->name;
        if (!args || !name)
            return nomem(F->d);
        for (int k = 0; k < in->nargs; k++)
            args[k] = slot[in->args[k]];
        fvm_fnode n = {
            .name = name, .in = in, .param = -1, .nargs = in->nargs, .args = args, .type = in->type, .agg = -1};
        const fvm_fnode *a0 = in->nargs ? &F->fl->nodes[args[0]] : NULL;
        if (in->op == FVM_OP_FIELD && a0->view) {
            int64_t k = (in->a.present & A(NAME)) ? fvm_type_field_index(a0->type, in->a.name) : in->a.index;
            slot[in->slot] = a0->args[k];
            continue;
        }
        if (in->op == FVM_OP_CALL && in->a.fn->federated) {
            const char *sub = fvm_arena_printf(F->a, "%s/", name);
            if (!sub)
                return nomem(F->d);
            fvm_status s = flatten(F, in->a.fn, sub, args, &slot[in->slot], depth + 1);
            if (s)
                return s;
            continue;
        }
        if (in->op == FVM_OP_FEDERATED_SELECT) {
            fvm_status s = flatten_select(F, in, name, args, &slot[in->slot]);
            if (s)
                return s;
            continue;
        }
        if (in->op == FVM_OP_STRUCT) {
            n.in = NULL;
            n.view = true;
            for (int k = 0; k < n.nargs; k++) {
                const fvm_fnode *m = &F->fl->nodes[args[k]];
                if (m->stage > n.stage)
                    n.stage = m->stage;
            }
        } else if ((in->op == FVM_OP_GRAD || in->op == FVM_OP_VALUE_AND_GRAD || in->op == FVM_OP_VJP ||
                    in->op == FVM_OP_JVP) &&
                   in->a.fn->federated) {
            fvm_status s = inline_derivative(F, in, name, args, &slot[in->slot], depth);
            if (s)
                return s;
            continue;
        } else if (!(fvm_op_table[in->op].flags & OPF_FED) && in->op != FVM_OP_CALL && in->op != FVM_OP_FIELD &&
                   (has_placed_arg(in) || fvm_type_is_placed(in->type) || (in->a.fn && in->a.fn->federated))) {
            n.in = in;
            return fvm_diag_add(F->d, FVM_ERR_PLACEMENT, &in->loc,
                                "%s works on federated values; a round form takes only federated intrinsics, "
                                "struct, field and calls at the top level of a federated function",
                                where(F->a, &n, false));
        }
        int at = add_node(F, &n);
        if (at < 0)
            return nomem(F->d);
        if (!n.view) {
            fvm_status s = stage(F, at);
            if (s)
                return s;
        }
        slot[in->slot] = at;
    }
    *result = slot[f->result_slot];
    return FVM_OK;
}

/* The result's leaves must be at the server (or unplaced). */
static fvm_status check_result(flat *F, int i)
{
    const fvm_fnode *n = &F->fl->nodes[i];
    if (n->view) {
        for (int k = 0; k < n->nargs; k++) {
            fvm_status s = check_result(F, n->args[k]);
            if (s)
                return s;
        }
        return FVM_OK;
    }
    if (n->stage == FVM_STAGE_CLIENTS)
        return fvm_diag_add(F->d, FVM_ERR_PLACEMENT, &F->fl->f->result_loc,
                            "the result of '%s' holds '%s', a value at the clients; a round's results are at the "
                            "server (aggregate it first)",
                            F->fl->f->name, n->name);
    return FVM_OK;
}

fvm_status fvm_form_entry(const fvm_program *p, const fvm_plan_opts *o, const fvm_func **f, fvm_diag *d)
{
    fvm_status s = fvm_plan_entry(p, o ? o->fn : NULL, f, d);
    if (s == FVM_OK && !(*f)->federated)
        s = fvm_diag_add(d, FVM_ERR_PLACEMENT, &(*f)->loc,
                         "'%s' is not a federated function (it places no value and calls no intrinsic), so it has "
                         "no round to put in a form; name a federated one with --fn",
                         (*f)->name);
    return s;
}

fvm_status fvm_flow_build(fvm_arena *a, const fvm_program *p, const fvm_func *f, fvm_flow *out, fvm_diag *d)
{
    memset(out, 0, sizeof *out);
    out->p = p;
    out->f = f;
    out->client_state = -1;
    flat F = {a, out, d};
    int *params = fvm_arena_array(a, (size_t)f->nparams + 1, sizeof *params);
    if (!params)
        return nomem(d);
    for (int i = 0; i < f->nparams; i++) {
        const fvm_type *t = f->param_types[i];
        int st = t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS ? FVM_STAGE_CLIENTS : FVM_STAGE_SERVER;
        fvm_fnode n = {.name = f->param_names[i], .param = i, .type = t, .stage = st, .agg = -1};
        if ((params[i] = add_node(&F, &n)) < 0)
            return nomem(d);
    }
    fvm_status s = flatten(&F, f, NULL, params, &out->result, 0);
    if (s)
        return s;
    if (strcmp(f->name, "next") || !fvm_program_func(p, "initialize_client"))
        return check_result(&F, out->result);
    /* a round that keeps client state: <state, metrics> at the server, the clients' new states at the
       clients (the checker made sure of the types) */
    const fvm_fnode *r = &out->nodes[out->result];
    if (!r->view || r->nargs != 3)
        return fvm_diag_add(d, FVM_ERR_PLACEMENT, &f->result_loc,
                            "the result of '%s' is not a struct built here of its three fields (the state, the "
                            "metrics and the clients' new states); a round form takes the clients' states apart "
                            "from the rest: build the result with 'struct'",
                            f->name);
    out->client_state = r->args[2];
    if ((s = check_result(&F, r->args[0])) == FVM_OK)
        s = check_result(&F, r->args[1]);
    return s;
}

/* ---- writing generated functions ------------------------------------------ */

const char **fvm_flow_names(fvm_arena *a, int n, const char *fmt)
{
    const char **names = fvm_arena_array(a, (size_t)n + 1, sizeof *names);
    for (int k = 0; names && k < n; k++)
        if (!(names[k] = fvm_arena_printf(a, fmt, k)))
            return NULL;
    return names;
}

fvm_doc *fvm_attr1(fvm_arena *a, const char *key, const char *value)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o || fvm_doc_set(a, o, key, fvm_doc_string(a, value)))
        return NULL;
    o->flow = true;
    return o;
}

fvm_status fvm_fwriter_init(fvm_fwriter *w, fvm_arena *a, const fvm_flow *fl, bool local, fvm_diag *d)
{
    memset(w, 0, sizeof *w);
    w->a = a;
    w->fl = fl;
    w->local = local;
    w->d = d;
    w->where = &fl->f->loc;
    w->bound = fvm_arena_array(a, (size_t)fl->n + 1, sizeof *w->bound);
    w->params = fvm_doc_new(a, FVM_DOC_OBJECT);
    w->body = fvm_doc_new(a, FVM_DOC_ARRAY);
    return w->bound && w->params && w->body ? FVM_OK : nomem(d);
}

fvm_status fvm_fwriter_param(fvm_fwriter *w, const char *name, const fvm_type *t, int node)
{
    const char *ts = fvm_type_str(w->a, t, true);
    if (!ts || fvm_doc_set(w->a, w->params, name, fvm_doc_string(w->a, ts)))
        return nomem(w->d);
    if (node >= 0)
        w->bound[node] = name;
    return FVM_OK;
}

fvm_status fvm_fwriter_instr(fvm_fwriter *w, const char *name, const char *op, fvm_doc *attrs, int nargs,
                             const char *const *args)
{
    fvm_doc *arr = fvm_doc_new(w->a, FVM_DOC_ARRAY);
    if (!arr)
        return nomem(w->d);
    arr->flow = true;
    fvm_status s = fvm_doc_push(w->a, arr, fvm_doc_string(w->a, name));
    if (!s)
        s = fvm_doc_push(w->a, arr, fvm_doc_string(w->a, op));
    if (!s && attrs && attrs->u.coll.n)
        s = fvm_doc_push(w->a, arr, attrs);
    for (int k = 0; k < nargs && !s; k++)
        s = fvm_doc_push(w->a, arr, fvm_doc_string(w->a, args[k]));
    if (!s)
        s = fvm_doc_push(w->a, w->body, arr);
    return s ? nomem(w->d) : FVM_OK;
}

fvm_status fvm_fwriter_struct(fvm_fwriter *w, const char *name, int n, const char *const *names,
                              const char *const *args)
{
    fvm_doc *attrs = NULL;
    if (names && n) {
        fvm_doc *list = fvm_doc_new(w->a, FVM_DOC_ARRAY);
        attrs = fvm_doc_new(w->a, FVM_DOC_OBJECT);
        if (!list || !attrs)
            return nomem(w->d);
        list->flow = attrs->flow = true;
        for (int k = 0; k < n; k++)
            if (fvm_doc_push(w->a, list, fvm_doc_string(w->a, names[k])))
                return nomem(w->d);
        if (fvm_doc_set(w->a, attrs, "names", list))
            return nomem(w->d);
    }
    return fvm_fwriter_instr(w, name, "struct", attrs, n, args);
}

fvm_status fvm_fwriter_field(fvm_fwriter *w, const char *name, const char *field, const char *arg)
{
    fvm_doc *attrs = fvm_attr1(w->a, "name", field);
    return attrs ? fvm_fwriter_instr(w, name, "field", attrs, 1, &arg) : nomem(w->d);
}

fvm_status fvm_fwriter_zeros(fvm_fwriter *w, const char *name, const fvm_type *t)
{
    fvm_arena *a = w->a;
    if (t->kind == FVM_T_STRUCT) {
        int n = t->u.strct.n;
        const char **args = fvm_arena_array(a, (size_t)n + 1, sizeof *args);
        if (!args)
            return nomem(w->d);
        bool named = n > 0 && t->u.strct.names[0];
        for (int k = 0; k < n; k++) {
            args[k] =
                named ? fvm_arena_printf(a, "%s/%s", name, t->u.strct.names[k]) : fvm_arena_printf(a, "%s/%d", name, k);
            if (!args[k])
                return nomem(w->d);
            fvm_status s = fvm_fwriter_zeros(w, args[k], t->u.strct.elems[k]);
            if (s)
                return s;
        }
        return fvm_fwriter_struct(w, name, n, named ? t->u.strct.names : NULL, args);
    }
    char buf[256];
    if (t->kind != FVM_T_TENSOR || fvm_dims_count(&t->u.tensor.dims) < 0)
        return fvm_diag_add(w->d, FVM_ERR_TYPE, w->where,
                            "an aggregation over %s needs an accumulator that starts from zeros, and this type "
                            "has %s; give the aggregated values fixed shapes",
                            fvm_type_format(t, true, buf, sizeof buf),
                            t->kind == FVM_T_TENSOR ? "an unknown dimension ('?')" : "no zero");
    fvm_dtype dt = t->u.tensor.dtype;
    fvm_doc *attrs = fvm_doc_new(a, FVM_DOC_OBJECT), *shape = fvm_doc_new(a, FVM_DOC_ARRAY);
    if (!attrs || !shape)
        return nomem(w->d);
    attrs->flow = shape->flow = true;
    fvm_doc *zero = dt == FVM_DTYPE_BOOL     ? fvm_doc_bool(a, false)
                    : fvm_dtype_is_float(dt) ? fvm_doc_real(a, 0.0)
                                             : fvm_doc_int(a, 0);
    for (int k = 0; k < t->u.tensor.dims.rank; k++)
        if (fvm_doc_push(a, shape, fvm_doc_int(a, t->u.tensor.dims.d[k])))
            return nomem(w->d);
    if (fvm_doc_set(a, attrs, "value", zero) || fvm_doc_set(a, attrs, "dtype", fvm_doc_string(a, fvm_dtype_name(dt))) ||
        fvm_doc_set(a, attrs, "shape", shape))
        return nomem(w->d);
    return fvm_fwriter_instr(w, name, "const", attrs, 0, NULL);
}

fvm_status fvm_fwriter_node(fvm_fwriter *w, int i, const char **name)
{
    if (w->bound[i]) {
        *name = w->bound[i];
        return FVM_OK;
    }
    const fvm_fnode *n = &w->fl->nodes[i];
    const char **args = fvm_arena_array(w->a, (size_t)n->nargs + 1, sizeof *args);
    if (!args)
        return nomem(w->d);
    for (int k = 0; k < n->nargs; k++) {
        fvm_status s = fvm_fwriter_node(w, n->args[k], &args[k]);
        if (s)
            return s;
    }
    fvm_status s = FVM_OK;
    if (n->view) {
        const fvm_type *t = n->type;
        bool named = t->kind == FVM_T_STRUCT && t->u.strct.n > 0 && t->u.strct.names[0];
        s = fvm_fwriter_struct(w, n->name, n->nargs, named ? t->u.strct.names : NULL, args);
    } else if (!n->in) {
        return fvm_diag_add(w->d, FVM_ERR_USAGE, w->where, "internal: parameter '%s' is not available here", n->name);
    } else if (w->local && (fvm_op_table[n->in->op].flags & OPF_FED)) {
        const fvm_instr *in = n->in;
        switch (in->op) {
        case FVM_OP_FEDERATED_APPLY:
        case FVM_OP_FEDERATED_MAP:
        case FVM_OP_FEDERATED_MAP_ALL_EQUAL:
        case FVM_OP_FEDERATED_EVAL: {
            fvm_doc *attrs = fvm_attr1(w->a, "fn", in->a.fn->name);
            s = attrs ? fvm_fwriter_instr(w, n->name, "call", attrs, n->nargs, args) : nomem(w->d);
            break;
        }
        case FVM_OP_FEDERATED_ZIP:
            s = fvm_fwriter_struct(w, n->name, n->nargs, (in->a.present & A(NAMES)) ? in->a.names.v : NULL, args);
            break;
        case FVM_OP_FEDERATED_VALUE:
            w->bound[i] = args[0];
            *name = args[0];
            return FVM_OK;
        default:
            return fvm_diag_add(w->d, FVM_ERR_USAGE, w->where, "internal: '%s' (%s) is not available here", n->name,
                                fvm_op_table[in->op].name);
        }
    } else {
        s = fvm_fwriter_instr(w, n->name, fvm_op_table[n->in->op].name, (fvm_doc *)n->in->attrs, n->nargs, args);
    }
    if (s)
        return s;
    w->bound[i] = n->name;
    *name = n->name;
    return FVM_OK;
}

const fvm_type *fvm_flow_server_result(fvm_arena *a, const fvm_flow *fl)
{
    const fvm_type *t = fl->f->result_type;
    if (fl->client_state < 0)
        return t;
    const char *names[2] = {t->u.strct.names[0], t->u.strct.names[1]};
    return fvm_type_struct(a, 2, names[0] ? names : NULL, t->u.strct.elems);
}

fvm_status fvm_fwriter_result(fvm_fwriter *w, const char **name)
{
    const fvm_flow *fl = w->fl;
    if (fl->client_state < 0)
        return fvm_fwriter_node(w, fl->result, name);
    const fvm_fnode *r = &fl->nodes[fl->result];
    const fvm_type *t = fl->f->result_type;
    const char *args[2], *names[2] = {t->u.strct.names[0], t->u.strct.names[1]};
    FVM_TRY(fvm_fwriter_node(w, r->args[0], &args[0]));
    FVM_TRY(fvm_fwriter_node(w, r->args[1], &args[1]));
    *name = r->name;
    return fvm_fwriter_struct(w, r->name, 2, names[0] ? names : NULL, args);
}

fvm_doc *fvm_fwriter_finish(fvm_fwriter *w, const char *doc, const char *result)
{
    fvm_arena *a = w->a;
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o || (doc && fvm_doc_set(a, o, "doc", fvm_doc_string(a, doc))) || fvm_doc_set(a, o, "params", w->params) ||
        fvm_doc_set(a, o, "body", w->body) || fvm_doc_set(a, o, "result", fvm_doc_string(a, result)))
        return NULL;
    return o;
}

/* ---- the form document ---------------------------------------------------- */

fvm_status fvm_form_write(fvm_arena *a, const fvm_flow *fl, const char *doc, fvm_doc *form, fvm_doc *generated,
                          char **out, size_t *len, fvm_diag *d)
{
    *out = NULL;
    const fvm_program *p = fl->p;
    fvm_doc *all = fvm_program_to_doc(a, p, doc), *root = fvm_doc_new(a, FVM_DOC_OBJECT),
            *funcs = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!all || !root || !funcs)
        return nomem(d);
    fvm_status s = FVM_OK;
    for (size_t i = 0; i < all->u.coll.n && !s; i++) {
        const char *key = all->u.coll.keys[i]->u.str.s;
        if (!strcmp(key, "functions"))
            continue;
        s = fvm_doc_set(a, root, key, all->u.coll.items[i]);
        if (!s && !strcmp(key, doc ? "doc" : "fedvm"))
            s = fvm_doc_set(a, root, "form", form);
    }
    /* every function, the derived ones too (inlined derivatives call
     * them), the planned one left out */
    const fvm_doc *written = fvm_doc_get(all, "functions");
    for (size_t i = 0; i < written->u.coll.n && !s; i++)
        if (strcmp(written->u.coll.keys[i]->u.str.s, fl->f->name))
            s = fvm_doc_set(a, funcs, written->u.coll.keys[i]->u.str.s, written->u.coll.items[i]);
    for (size_t i = 0; i < generated->u.coll.n && !s; i++)
        s = fvm_doc_set(a, funcs, generated->u.coll.keys[i]->u.str.s, generated->u.coll.items[i]);
    if (!s)
        s = fvm_doc_set(a, root, "functions", funcs);
    if (s)
        return nomem(d);
    char *text = NULL;
    if ((s = fvm_json_write(root, &text, len, d)))
        return s;
    /* a form is a program: load and check it before anyone sees it */
    fvm_diag sub = {0};
    fvm_program *q = NULL;
    s = fvm_program_load_text("form.json", text, *len, &q, &sub);
    if (s == FVM_OK)
        s = fvm_compile(q, &sub);
    fvm_program_free(q);
    if (s) {
        free(text);
        fvm_diag_add(d, s, &fl->f->loc,
                     "internal: the form written for '%s' does not check (a fedvm bug; "
                     "please report it with the program):",
                     fl->f->name);
        fvm_diag_append(d, &sub);
        fvm_diag_clear(&sub);
        return s;
    }
    fvm_diag_clear(&sub);
    *out = text;
    return FVM_OK;
}
