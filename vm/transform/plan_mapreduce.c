/* plan_mapreduce.c - a round compiled into TFF's MapReduce form (format/PLANS.md, "mapreduce").
 *
 * From the staged graph (plan_flow.h) of the planned function F:
 *   F.prepare(server inputs)          -> C         what the server broadcasts
 *   F.work(client inputs, C)          -> <updates=U, secure=<s0,...>>  one client
 *   F.zero()                          -> A
 *   F.accumulate(A, U)                -> A
 *   F.merge(A, A)                     -> A
 *   F.report(A)                       -> R
 *   F.update(server inputs, R, <s0,...> sums) -> F's result, unplaced
 * all local functions, and F itself rewritten to run them with intrinsics
 * only (federated_apply, _broadcast, _map, _aggregate and the secure sums),
 * so `fedvm run` executes the form. Each aggregation of F becomes one member
 * of A, U and R, built from its rule (vm/ir/aggregations.def), as the
 * interpreter's is: the same arithmetic in the same order (sums and means
 * add from the identity -0.0, weighted means scale by the weight first, the
 * mean divides at the end), and federated_aggregate folds blocks from the
 * zero in the same tree, so the form gives F's bits, -0.0 included.
 *
 * The parts are built by fvm_mr_build (plan_mr.h), which the cross-device
 * plan (plan_xdev.c) shares. */
#include <string.h>

#include "../ir/aggregation.h"
#include "../ir/keys.h"
#include "plan_form.h"
#include "plan_mr.h"

typedef fvm_mr mr;
typedef fvm_mr_types mr_types;

const char *const fvm_mr_roles[FVM_MR_NPARTS] = {"prepare", "work", "zero", "accumulate", "merge", "report", "update"};

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

static const char *str(mr *m, const char *fmt, int i)
{
    return fvm_arena_printf(m->a, fmt, i);
}

const fvm_type *fvm_mr_node_type(const fvm_mr *m, int i)
{
    return fvm_flow_unplaced(m->fl->nodes[i].type);
}

/* The aggregated value's member type and its one float dtype (means). */
static fvm_status float_dtype(mr *m, int g, fvm_dtype *dt)
{
    const fvm_type *t = fvm_mr_node_type(m, m->fl->nodes[g].args[0]);
    const fvm_type *leaf = t;
    while (leaf->kind == FVM_T_STRUCT && leaf->u.strct.n)
        leaf = leaf->u.strct.elems[0];
    *dt = leaf->kind == FVM_T_TENSOR ? leaf->u.tensor.dtype : FVM_DTYPE_F32;
    fvm_dtype want = *dt;
    /* every leaf of one dtype: the mean divides them all by one scalar */
    const fvm_type *stack[64];
    int top = 0;
    stack[top++] = t;
    while (top) {
        const fvm_type *u = stack[--top];
        if (u->kind == FVM_T_STRUCT) {
            for (int k = 0; k < u->u.strct.n && top < 64; k++)
                stack[top++] = u->u.strct.elems[k];
        } else if (u->kind != FVM_T_TENSOR || u->u.tensor.dtype != want) {
            char buf[256];
            return fvm_diag_add(m->d, FVM_ERR_TYPE, &m->fl->nodes[g].in->loc,
                                "'%s' averages %s, whose leaves have different dtypes; the MapReduce form "
                                "divides the accumulated sum by one scalar, so it needs one float dtype",
                                m->fl->nodes[g].name, fvm_type_format(t, true, buf, sizeof buf));
        }
    }
    return FVM_OK;
}

/* name = cast(arg) to dt, or arg itself when it has that dtype already. */
static fvm_status cast_to(fvm_fwriter *w, const char *name, const char *arg, fvm_dtype from, fvm_dtype to,
                          const char **out)
{
    if (from == to) {
        *out = arg;
        return FVM_OK;
    }
    fvm_doc *attrs = fvm_attr1(w->a, "dtype", fvm_dtype_name(to));
    *out = name;
    return attrs ? fvm_fwriter_instr(w, name, "cast", attrs, 1, &arg) : nomem(w->d);
}

static fvm_status binop(fvm_fwriter *w, const char *name, const char *op, const char *x, const char *y)
{
    const char *args[2] = {x, y};
    return fvm_fwriter_instr(w, name, op, NULL, 2, args);
}

static fvm_status select3(fvm_fwriter *w, const char *name, const char *p, const char *x, const char *y)
{
    const char *args[3] = {p, x, y};
    return fvm_fwriter_instr(w, name, "select", NULL, 3, args);
}

static fvm_status const_scalar(fvm_fwriter *w, const char *name, fvm_doc *value, const char *dtype)
{
    fvm_doc *attrs = fvm_doc_new(w->a, FVM_DOC_OBJECT);
    if (!attrs || !value || fvm_doc_set(w->a, attrs, "value", value) ||
        fvm_doc_set(w->a, attrs, "dtype", fvm_doc_string(w->a, dtype)))
        return nomem(w->d);
    attrs->flow = true;
    return fvm_fwriter_instr(w, name, "const", attrs, 0, NULL);
}

static fvm_status struct2(fvm_fwriter *w, const char *name, const char *n0, const char *a0, const char *n1,
                          const char *a1)
{
    const char *names[2] = {n0, n1}, *args[2] = {a0, a1};
    return fvm_fwriter_struct(w, name, 2, names, args);
}

/* ---- the accumulator of one aggregation ---------------------------------- */

/* Aggregation g's accumulator is built from its rule (vm/ir/aggregations.def):
 * the combined updates, and beside them, when the rule needs them, how many
 * clients were folded (a mean divides by it) and whether any was (a combine
 * without an identity, minimum and maximum, starts from the first client; a
 * sum of floats over no clients is +0.0, where folding from the identity
 * -0.0 would give -0.0). The zero of an addition is -0.0, which adding
 * changes no bit of: the form's sums and means are the built-in ones bit for
 * bit, -0.0 included. */
typedef struct acc_shape {
    const fvm_agg_rule *r;
    const fvm_type *lifted; /* one client's update as combined: T, or <sum=T, weight=W> */
    bool count, seen; /* extra members; with neither the accumulator is the combined updates */
} acc_shape;

static acc_shape shape_of(mr *m, int g)
{
    const fvm_fnode *n = &m->fl->nodes[g];
    acc_shape a = {.r = fvm_agg_rule_of(n->in->op)};
    const fvm_type *t = fvm_mr_node_type(m, n->args[0]);
    a.lifted = t;
    if (a.r->lift == FVM_AGG_LIFT_WEIGHTED) {
        const char *names[2] = {"sum", "weight"};
        const fvm_type *elems[2] = {t, fvm_mr_node_type(m, n->args[1])};
        a.lifted = fvm_type_struct(m->a, 2, names, elems);
    }
    a.count = a.r->report == FVM_AGG_REPORT_PER_CLIENT;
    a.seen = a.r->combine != FVM_AGG_COMBINE_ADD || (a.r->empty == FVM_AGG_EMPTY_ZEROS && fvm_type_has_floats(t));
    return a;
}

static bool extras(const acc_shape *a)
{
    return a->count || a->seen;
}

/* The accumulator type of aggregation g. */
static const fvm_type *acc_type(mr *m, int g)
{
    const fvm_fnode *n = &m->fl->nodes[g];
    acc_shape a = shape_of(m, g);
    if (a.r->lift == FVM_AGG_LIFT_USER) /* federated_aggregate: the zero's type */
        return fvm_mr_node_type(m, n->args[1]);
    if (!a.lifted || !extras(&a))
        return a.lifted;
    const char *names[3] = {"value"};
    const fvm_type *elems[3] = {a.lifted};
    int k = 1;
    if (a.count)
        names[k] = "count", elems[k++] = fvm_type_scalar(m->a, FVM_DTYPE_I64);
    if (a.seen)
        names[k] = "seen", elems[k++] = fvm_type_scalar(m->a, FVM_DTYPE_BOOL);
    return fvm_type_struct(m->a, k, names, elems);
}

/* The update type of aggregation g (what one client contributes): its
 * client arguments, <value, weight> for two. */
static const fvm_type *update_type(mr *m, int g)
{
    const fvm_fnode *n = &m->fl->nodes[g];
    const fvm_type *t = fvm_mr_node_type(m, n->args[0]);
    if (fvm_agg_rule_of(n->in->op)->client_args == 1)
        return t;
    const char *names[2] = {"value", "weight"};
    const fvm_type *elems[2] = {t, fvm_mr_node_type(m, n->args[1])};
    return fvm_type_struct(m->a, 2, names, elems);
}

/* name = <value=v, count=c, seen=s> with the members an accumulator with extras has. */
static fvm_status pack(fvm_fwriter *w, const acc_shape *a, const char *name, const char *v, const char *c,
                       const char *s)
{
    const char *names[3] = {"value"}, *args[3] = {v};
    int k = 1;
    if (a->count)
        names[k] = "count", args[k++] = c;
    if (a->seen)
        names[k] = "seen", args[k++] = s;
    return fvm_fwriter_struct(w, name, k, names, args);
}

/* The zero of aggregation g's accumulator; *name: its name. */
static fvm_status zero_of(mr *m, fvm_fwriter *w, int g, const char **name)
{
    const fvm_fnode *n = &m->fl->nodes[g];
    acc_shape a = shape_of(m, g);
    const char *z = str(m, "@a%d/zeros", m->aggidx[g]), *v = str(m, "@a%d/value", m->aggidx[g]),
               *c = str(m, "@a%d/count", m->aggidx[g]), *s = str(m, "@a%d/seen", m->aggidx[g]);
    *name = str(m, "@a%d", m->aggidx[g]);
    if (a.r->lift == FVM_AGG_LIFT_USER) { /* federated_aggregate: its own zero, built from constants alone */
        const fvm_fnode *zn = &m->fl->nodes[n->args[1]];
        if (zn->stage != FVM_STAGE_LOCAL)
            return fvm_diag_add(m->d, FVM_ERR_PLACEMENT, &n->in->loc,
                                "the zero of '%s' depends on the function's inputs ('%s'); in the MapReduce "
                                "form zero() takes no arguments, so the zero must be built from constants",
                                n->name, zn->name);
        return fvm_fwriter_node(w, n->args[1], name);
    }
    /* an addition's identity, -0.0 (-0 for integers); a combine without one starts unseen */
    const char *value = extras(&a) ? v : *name;
    if (a.r->combine == FVM_AGG_COMBINE_ADD) {
        FVM_TRY(fvm_fwriter_zeros(w, z, a.lifted));
        FVM_TRY(fvm_fwriter_instr(w, value, "neg", NULL, 1, &z));
    } else {
        FVM_TRY(fvm_fwriter_zeros(w, value, a.lifted));
    }
    if (!extras(&a))
        return FVM_OK;
    if (a.count)
        FVM_TRY(const_scalar(w, c, fvm_doc_int(w->a, 0), "i64"));
    if (a.seen)
        FVM_TRY(const_scalar(w, s, fvm_doc_bool(w->a, false), "bool"));
    return pack(w, &a, *name, v, c, s);
}

/* x combined with y by the rule (not USER). */
static fvm_status combine(fvm_fwriter *w, const acc_shape *a, const char *name, const char *x, const char *y)
{
    return binop(w, name, fvm_op_table[a->r->combine_op].name, x, y);
}

/* acc' = accumulate(acc, u) for aggregation g; acc, u: names of its members. */
static fvm_status accumulate_one(mr *m, fvm_fwriter *w, int g, const char *acc, const char *u, const char *name)
{
    const fvm_instr *in = m->fl->nodes[g].in;
    acc_shape a = shape_of(m, g);
    const char *t[12];
    for (int k = 0; k < 12; k++)
        t[k] = fvm_arena_printf(m->a, "@a%d/t%d", m->aggidx[g], k + 1);
    if (a.r->lift == FVM_AGG_LIFT_USER) {
        const char *args[2] = {acc, u};
        fvm_doc *attrs = fvm_attr1(w->a, "fn", in->a.accumulate->name);
        return attrs ? fvm_fwriter_instr(w, name, "call", attrs, 2, args) : nomem(m->d);
    }
    const char *lifted = u;
    if (a.r->lift == FVM_AGG_LIFT_WEIGHTED) { /* <sum=value * weight, weight> */
        fvm_dtype dt;
        FVM_TRY(float_dtype(m, g, &dt));
        const fvm_type *wt = fvm_mr_node_type(m, m->fl->nodes[g].args[1]);
        const char *wcast;
        FVM_TRY(fvm_fwriter_field(w, t[0], "value", u));
        FVM_TRY(fvm_fwriter_field(w, t[1], "weight", u));
        FVM_TRY(cast_to(w, t[2], t[1], wt->u.tensor.dtype, dt, &wcast));
        FVM_TRY(binop(w, t[3], "mul", t[0], wcast));
        FVM_TRY(struct2(w, t[4], "sum", t[3], "weight", t[1]));
        lifted = t[4];
    }
    if (!extras(&a))
        return combine(w, &a, name, acc, lifted);
    const char *value = t[5], *count = NULL, *seen = t[9];
    FVM_TRY(fvm_fwriter_field(w, t[6], "value", acc));
    if (a.r->combine == FVM_AGG_COMBINE_ADD) {
        FVM_TRY(combine(w, &a, value, t[6], lifted));
    } else { /* no identity: the first client's update as it is */
        FVM_TRY(fvm_fwriter_field(w, t[7], "seen", acc));
        FVM_TRY(combine(w, &a, t[8], t[6], lifted));
        FVM_TRY(select3(w, value, t[7], t[8], lifted));
    }
    if (a.count) {
        count = t[10];
        FVM_TRY(fvm_fwriter_field(w, t[11], "count", acc));
        FVM_TRY(const_scalar(w, str(m, "@a%d/one", m->aggidx[g]), fvm_doc_int(w->a, 1), "i64"));
        FVM_TRY(binop(w, count, "add", t[11], str(m, "@a%d/one", m->aggidx[g])));
    }
    if (a.seen)
        FVM_TRY(const_scalar(w, seen, fvm_doc_bool(w->a, true), "bool"));
    return pack(w, &a, name, value, count, seen);
}

static fvm_status merge_one(mr *m, fvm_fwriter *w, int g, const char *x, const char *y, const char *name)
{
    const fvm_instr *in = m->fl->nodes[g].in;
    acc_shape a = shape_of(m, g);
    const char *t[12];
    for (int k = 0; k < 12; k++)
        t[k] = fvm_arena_printf(m->a, "@a%d/m%d", m->aggidx[g], k);
    if (a.r->combine == FVM_AGG_COMBINE_USER) {
        const char *args[2] = {x, y};
        fvm_doc *attrs = fvm_attr1(w->a, "fn", in->a.merge->name);
        return attrs ? fvm_fwriter_instr(w, name, "call", attrs, 2, args) : nomem(m->d);
    }
    if (!extras(&a))
        return combine(w, &a, name, x, y);
    FVM_TRY(fvm_fwriter_field(w, t[0], "value", x));
    FVM_TRY(fvm_fwriter_field(w, t[2], "value", y));
    const char *value = t[4], *count = NULL, *seen = NULL;
    if (a.seen) {
        FVM_TRY(fvm_fwriter_field(w, t[1], "seen", x));
        FVM_TRY(fvm_fwriter_field(w, t[3], "seen", y));
        seen = t[7];
        FVM_TRY(binop(w, seen, "or", t[1], t[3]));
    }
    if (a.r->combine == FVM_AGG_COMBINE_ADD) {
        FVM_TRY(combine(w, &a, value, t[0], t[2]));
    } else {
        /* an empty side (a block of no clients cannot occur, but merge must
         * be total) gives the other */
        FVM_TRY(combine(w, &a, t[8], t[0], t[2]));
        FVM_TRY(select3(w, t[5], t[3], t[8], t[0]));
        FVM_TRY(select3(w, value, t[1], t[5], t[2]));
    }
    if (a.count) {
        FVM_TRY(fvm_fwriter_field(w, t[9], "count", x));
        FVM_TRY(fvm_fwriter_field(w, t[10], "count", y));
        count = t[11];
        FVM_TRY(binop(w, count, "add", t[9], t[10]));
    }
    return pack(w, &a, name, value, count, seen);
}

static fvm_status report_one(mr *m, fvm_fwriter *w, int g, const char *acc, const char **name)
{
    const fvm_fnode *n = &m->fl->nodes[g];
    acc_shape a = shape_of(m, g);
    const char *t[6];
    for (int k = 0; k < 6; k++)
        t[k] = fvm_arena_printf(m->a, "@r%d/t%d", m->aggidx[g], k + 1);
    const char *out = str(m, "@r%d", m->aggidx[g]);
    if (a.r->report == FVM_AGG_REPORT_USER) {
        if (!n->in->a.report) {
            *name = acc;
            return FVM_OK;
        }
        *name = out;
        fvm_doc *attrs = fvm_attr1(w->a, "fn", n->in->a.report->name);
        return attrs ? fvm_fwriter_instr(w, out, "call", attrs, 1, &acc) : nomem(m->d);
    }
    const char *value = acc;
    if (extras(&a)) {
        value = t[0];
        FVM_TRY(fvm_fwriter_field(w, value, "value", acc));
    }
    *name = out;
    fvm_dtype dt;
    const char *num = value, *den = NULL, *by = t[2];
    switch (a.r->report) {
    case FVM_AGG_REPORT_PER_CLIENT:
        FVM_TRY(float_dtype(m, g, &dt));
        FVM_TRY(fvm_fwriter_field(w, t[1], "count", acc));
        FVM_TRY(cast_to(w, t[2], t[1], FVM_DTYPE_I64, dt, &den));
        return binop(w, out, "div", num, den);
    case FVM_AGG_REPORT_PER_WEIGHT:
        FVM_TRY(float_dtype(m, g, &dt));
        num = t[3];
        FVM_TRY(fvm_fwriter_field(w, num, "sum", value));
        FVM_TRY(fvm_fwriter_field(w, t[1], "weight", value));
        FVM_TRY(cast_to(w, by, t[1], fvm_mr_node_type(m, n->args[1])->u.tensor.dtype, dt, &den));
        return binop(w, out, "div", num, den);
    default: /* VALUE */
        if (a.seen && a.r->empty == FVM_AGG_EMPTY_ZEROS) { /* no clients: +0, not the identity -0.0 */
            FVM_TRY(fvm_fwriter_field(w, t[4], "seen", acc));
            FVM_TRY(fvm_fwriter_zeros(w, t[5], a.lifted));
            return select3(w, out, t[4], value, t[5]);
        }
        *name = value;
        return FVM_OK;
    }
}

/* ---- the parts ------------------------------------------------------------- */

static fvm_status classify(mr *m)
{
    const fvm_flow *fl = m->fl;
    size_t n = (size_t)fl->n + 1;
    m->server = fvm_arena_array(m->a, n, sizeof(int));
    m->client = fvm_arena_array(m->a, n, sizeof(int));
    m->bcast = fvm_arena_array(m->a, n, sizeof(int));
    m->agg = fvm_arena_array(m->a, n, sizeof(int));
    m->sec = fvm_arena_array(m->a, n, sizeof(int));
    m->aggidx = fvm_arena_array(m->a, n, sizeof(int));
    if (!m->server || !m->client || !m->bcast || !m->agg || !m->sec || !m->aggidx)
        return nomem(m->d);
    for (int i = 0; i < fl->n; i++) {
        const fvm_fnode *x = &fl->nodes[i];
        if (x->param >= 0 && x->stage == FVM_STAGE_CLIENTS)
            m->client[m->nclient++] = i;
        else if (x->param >= 0)
            m->server[m->nserver++] = i;
        else if (fvm_flow_is_broadcast(fl, i))
            m->bcast[m->nbcast++] = i;
        else if (x->in && fvm_agg_is_secure(fvm_agg_rule_of(x->in->op)))
            m->sec[m->nsec++] = i;
        else if (fvm_flow_is_aggregation(fl, i)) {
            m->aggidx[i] = m->nagg;
            m->agg[m->nagg++] = i;
        }
    }
    const fvm_func *f = fl->f;
    if (m->nagg + m->nsec == 0)
        return fvm_diag_add(m->d, FVM_ERR_PLACEMENT, &f->loc,
                            "'%s' aggregates nothing from the clients, so it has no round to put in a form", f->name);
    if (m->nclient == 0)
        return fvm_diag_add(m->d, FVM_ERR_PLACEMENT, &f->loc,
                            "'%s' has no parameter at the clients ({T}@CLIENTS): the form's work runs on each "
                            "client's data, and this function names none",
                            f->name);
    return FVM_OK;
}

/* <p0=..., p1=...> of n types, field names from fmt ("b%d"). */
static const fvm_type *struct_of(mr *m, int n, const char *fmt, const fvm_type **elems)
{
    const char **names = fvm_arena_array(m->a, (size_t)n + 1, sizeof *names);
    if (!names)
        return NULL;
    for (int k = 0; k < n; k++)
        if (!(names[k] = str(m, fmt, k)))
            return NULL;
    return fvm_type_struct(m->a, n, names, elems);
}

static fvm_status add_func(mr *m, const char *name, fvm_fwriter *w, const char *doc, const char *result)
{
    fvm_doc *fn = fvm_fwriter_finish(w, doc, result);
    return fn && !fvm_doc_set(m->a, m->funcs, name, fn) ? FVM_OK : nomem(m->d);
}

static fvm_status types_of(mr *m, mr_types *t)
{
    int n = m->fl->n + 1;
    const fvm_type **b = fvm_arena_array(m->a, (size_t)n, sizeof *b), **u = fvm_arena_array(m->a, (size_t)n, sizeof *u),
                   **acc = fvm_arena_array(m->a, (size_t)n, sizeof *acc),
                   **r = fvm_arena_array(m->a, (size_t)n, sizeof *r), **s = fvm_arena_array(m->a, (size_t)n, sizeof *s),
                   **sr = fvm_arena_array(m->a, (size_t)n, sizeof *sr);
    if (!b || !u || !acc || !r || !s || !sr)
        return nomem(m->d);
    for (int j = 0; j < m->nbcast; j++)
        b[j] = fvm_mr_node_type(m, m->fl->nodes[m->bcast[j]].args[0]);
    for (int i = 0; i < m->nagg; i++) {
        u[i] = update_type(m, m->agg[i]);
        acc[i] = acc_type(m, m->agg[i]);
        r[i] = fvm_mr_node_type(m, m->agg[i]);
        if (!u[i] || !acc[i])
            return nomem(m->d);
    }
    for (int j = 0; j < m->nsec; j++) {
        s[j] = fvm_mr_node_type(m, m->fl->nodes[m->sec[j]].args[0]);
        sr[j] = fvm_mr_node_type(m, m->sec[j]);
    }
    t->C = struct_of(m, m->nbcast, "b%d", b);
    t->U = struct_of(m, m->nagg, "u%d", u);
    t->A = struct_of(m, m->nagg, "a%d", acc);
    t->R = struct_of(m, m->nagg, "r%d", r);
    t->SEC = struct_of(m, m->nsec, "s%d", s);
    t->SECR = struct_of(m, m->nsec, "s%d", sr);
    const char *wn[3] = {"updates", "secure", "client_state"};
    t->CS = m->fl->client_state >= 0 ? fvm_mr_node_type(m, m->fl->client_state) : NULL;
    const fvm_type *we[3] = {t->U, t->SEC, t->CS};
    t->WORK = t->U && t->SEC ? fvm_type_struct(m->a, 2, wn, we) : NULL;
    t->OUT = t->CS && t->WORK ? fvm_type_struct(m->a, 3, wn, we) : t->WORK;
    return t->C && t->A && t->R && t->SECR && t->WORK && t->OUT ? FVM_OK : nomem(m->d);
}

static fvm_status server_params(mr *m, fvm_fwriter *w)
{
    const fvm_func *f = m->fl->f;
    for (int k = 0; k < m->nserver; k++) {
        int i = m->server[k];
        FVM_TRY(fvm_fwriter_param(w, f->param_names[m->fl->nodes[i].param], fvm_mr_node_type(m, i), i));
    }
    return FVM_OK;
}

static fvm_status write_prepare(mr *m, const mr_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    FVM_TRY(server_params(m, &w));
    const char **args = fvm_arena_array(m->a, (size_t)m->nbcast + 1, sizeof *args);
    if (!args)
        return nomem(m->d);
    for (int j = 0; j < m->nbcast; j++)
        FVM_TRY(fvm_fwriter_node(&w, m->fl->nodes[m->bcast[j]].args[0], &args[j]));
    FVM_TRY(fvm_fwriter_struct(&w, "@broadcast", m->nbcast, fvm_flow_names(m->a, m->nbcast, "b%d"), args));
    (void)t;
    return add_func(m, m->part[FVM_MR_PREPARE], &w,
                    "MapReduce form: prepare. From the server's inputs, what the server broadcasts to every "
                    "client (one field per broadcast of the round).",
                    "@broadcast");
}

static fvm_status write_work(mr *m, const mr_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    const fvm_func *f = m->fl->f;
    for (int k = 0; k < m->nclient; k++) {
        int i = m->client[k];
        FVM_TRY(fvm_fwriter_param(&w, f->param_names[m->fl->nodes[i].param], fvm_mr_node_type(m, i), i));
    }
    FVM_TRY(fvm_fwriter_param(&w, "@broadcast", t->C, -1));
    for (int j = 0; j < m->nbcast; j++) {
        const char *name = str(m, "@broadcast/b%d", j);
        FVM_TRY(fvm_fwriter_field(&w, name, str(m, "b%d", j), "@broadcast"));
        w.bound[m->bcast[j]] = name;
    }
    const char **u = fvm_arena_array(m->a, (size_t)m->nagg + 1, sizeof *u),
               **s = fvm_arena_array(m->a, (size_t)m->nsec + 1, sizeof *s);
    if (!u || !s)
        return nomem(m->d);
    for (int i = 0; i < m->nagg; i++) {
        const fvm_fnode *g = &m->fl->nodes[m->agg[i]];
        FVM_TRY(fvm_fwriter_node(&w, g->args[0], &u[i]));
        if (fvm_agg_rule_of(g->in->op)->client_args == 2) { /* <value, weight> (update_type) */
            const char *wt, *name = str(m, "@u%d", i);
            FVM_TRY(fvm_fwriter_node(&w, g->args[1], &wt));
            FVM_TRY(struct2(&w, name, "value", u[i], "weight", wt));
            u[i] = name;
        }
    }
    for (int j = 0; j < m->nsec; j++)
        FVM_TRY(fvm_fwriter_node(&w, m->fl->nodes[m->sec[j]].args[0], &s[j]));
    FVM_TRY(fvm_fwriter_struct(&w, "@updates", m->nagg, fvm_flow_names(m->a, m->nagg, "u%d"), u));
    FVM_TRY(fvm_fwriter_struct(&w, "@secure", m->nsec, fvm_flow_names(m->a, m->nsec, "s%d"), s));
    if (m->fl->client_state < 0) {
        FVM_TRY(struct2(&w, "@work", "updates", "@updates", "secure", "@secure"));
        return add_func(m, m->part[FVM_MR_WORK], &w,
                        "MapReduce form: work. One client's part of the round, from its data and the broadcast: "
                        "its update (one field per aggregation) and its inputs to the secure sums.",
                        "@work");
    }
    const char *names[3] = {"updates", "secure", "client_state"}, *args[3] = {"@updates", "@secure"};
    FVM_TRY(fvm_fwriter_node(&w, m->fl->client_state, &args[2]));
    FVM_TRY(fvm_fwriter_struct(&w, "@work", 3, names, args));
    return add_func(m, m->part[FVM_MR_WORK], &w,
                    "MapReduce form: work. One client's part of the round, from its data, its state and the "
                    "broadcast: its update (one field per aggregation), its inputs to the secure sums and its new "
                    "state (client_state, which stays at the client).",
                    "@work");
}

static fvm_status write_zero(mr *m)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    const char **a = fvm_arena_array(m->a, (size_t)m->nagg + 1, sizeof *a);
    if (!a)
        return nomem(m->d);
    for (int i = 0; i < m->nagg; i++)
        FVM_TRY(zero_of(m, &w, m->agg[i], &a[i]));
    FVM_TRY(fvm_fwriter_struct(&w, "@zero", m->nagg, fvm_flow_names(m->a, m->nagg, "a%d"), a));
    return add_func(m, m->part[FVM_MR_ZERO], &w,
                    "MapReduce form: zero. The accumulator every block of clients starts from.", "@zero");
}

/* accumulate (two = false: acc, update) or merge (two = true: x, y). */
static fvm_status write_fold(mr *m, const mr_types *t, bool two)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    const char *p0 = two ? "@x" : "@acc", *p1 = two ? "@y" : "@update";
    FVM_TRY(fvm_fwriter_param(&w, p0, t->A, -1));
    FVM_TRY(fvm_fwriter_param(&w, p1, two ? t->A : t->U, -1));
    const char **out = fvm_arena_array(m->a, (size_t)m->nagg + 1, sizeof *out);
    if (!out)
        return nomem(m->d);
    for (int i = 0; i < m->nagg; i++) {
        int g = m->agg[i];
        const char *x = str(m, two ? "@x/a%d" : "@acc/a%d", i), *y = str(m, two ? "@y/a%d" : "@update/u%d", i);
        out[i] = str(m, "@result/a%d", i);
        FVM_TRY(fvm_fwriter_field(&w, x, str(m, "a%d", i), p0));
        FVM_TRY(fvm_fwriter_field(&w, y, str(m, two ? "a%d" : "u%d", i), p1));
        FVM_TRY(two ? merge_one(m, &w, g, x, y, out[i]) : accumulate_one(m, &w, g, x, y, out[i]));
    }
    FVM_TRY(fvm_fwriter_struct(&w, "@result", m->nagg, fvm_flow_names(m->a, m->nagg, "a%d"), out));
    return add_func(m, m->part[two ? FVM_MR_MERGE : FVM_MR_ACCUMULATE], &w,
                    two ? "MapReduce form: merge. Two partial accumulators (of consecutive blocks of clients) "
                          "combined."
                        : "MapReduce form: accumulate. One client's update folded into an accumulator.",
                    "@result");
}

static fvm_status write_report(mr *m, const mr_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    FVM_TRY(fvm_fwriter_param(&w, "@acc", t->A, -1));
    const char **r = fvm_arena_array(m->a, (size_t)m->nagg + 1, sizeof *r);
    if (!r)
        return nomem(m->d);
    for (int i = 0; i < m->nagg; i++) {
        const char *x = str(m, "@acc/a%d", i);
        FVM_TRY(fvm_fwriter_field(&w, x, str(m, "a%d", i), "@acc"));
        FVM_TRY(report_one(m, &w, m->agg[i], x, &r[i]));
    }
    FVM_TRY(fvm_fwriter_struct(&w, "@report", m->nagg, fvm_flow_names(m->a, m->nagg, "r%d"), r));
    return add_func(m, m->part[FVM_MR_REPORT], &w,
                    "MapReduce form: report. The aggregations' results from the final accumulator.", "@report");
}

static fvm_status write_update(mr *m, const mr_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    FVM_TRY(server_params(m, &w));
    FVM_TRY(fvm_fwriter_param(&w, "@report", t->R, -1));
    FVM_TRY(fvm_fwriter_param(&w, "@secure", t->SECR, -1));
    for (int i = 0; i < m->nagg; i++) {
        const char *name = str(m, "@report/r%d", i);
        FVM_TRY(fvm_fwriter_field(&w, name, str(m, "r%d", i), "@report"));
        w.bound[m->agg[i]] = name;
    }
    for (int j = 0; j < m->nsec; j++) {
        const char *name = str(m, "@secure/s%d", j);
        FVM_TRY(fvm_fwriter_field(&w, name, str(m, "s%d", j), "@secure"));
        w.bound[m->sec[j]] = name;
    }
    const char *result;
    FVM_TRY(fvm_fwriter_result(&w, &result));
    return add_func(m, m->part[FVM_MR_UPDATE], &w,
                    "MapReduce form: update. The round's result (unplaced) from the server's inputs, the "
                    "aggregations' results and the secure sums.",
                    result);
}

/* ---- F, rewritten to run the parts ----------------------------------------- */

/* A local function (x: T) -> x.path[0].path[1]..., named name (written once). */
static fvm_status write_getter(mr *m, const char *name, const fvm_type *t, int depth, const char *const *path)
{
    if (fvm_doc_get(m->funcs, name))
        return FVM_OK;
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, true, m->d));
    FVM_TRY(fvm_fwriter_param(&w, "@x", t, -1));
    const char *at = "@x";
    for (int k = 0; k < depth; k++) {
        const char *next = str(m, "@x/%d", k);
        FVM_TRY(fvm_fwriter_field(&w, next, path[k], at));
        at = next;
    }
    return add_func(m, name, &w, "MapReduce form: a part of a value, for the rewritten round.", at);
}

typedef struct rewrite {
    mr *m;
    fvm_fwriter w;
    const fvm_type *out; /* update's result type */
    const char *path[64];
    int depth, ngetters;
} rewrite;

/* The result's value node i, rebuilt from "@out" (update's result at the
 * server) with one federated_apply per placed leaf. */
static fvm_status rebuild(rewrite *r, int i, const char **name)
{
    mr *m = r->m;
    const fvm_fnode *n = &m->fl->nodes[i];
    if (i == m->fl->client_state) { /* taken from work's results at the clients */
        *name = "@client_states";
        return FVM_OK;
    }
    if (n->view && n->type->kind == FVM_T_STRUCT && r->depth < 64) {
        const char **args = fvm_arena_array(m->a, (size_t)n->nargs + 1, sizeof *args);
        if (!args)
            return nomem(m->d);
        const fvm_type *t = n->type;
        for (int k = 0; k < n->nargs; k++) {
            r->path[r->depth++] = t->u.strct.names[k] ? t->u.strct.names[k] : str(m, "%d", k);
            fvm_status s = rebuild(r, n->args[k], &args[k]);
            r->depth--;
            if (s)
                return s;
        }
        bool named = t->u.strct.n > 0 && t->u.strct.names[0];
        *name = str(m, "@result/%d", r->ngetters++);
        return fvm_fwriter_struct(&r->w, *name, n->nargs, named ? t->u.strct.names : NULL, args);
    }
    if (n->type->kind != FVM_T_FED)
        return fvm_diag_add(m->d, FVM_ERR_PLACEMENT, &m->fl->f->result_loc,
                            "the result of '%s' holds '%s', an unplaced value; the MapReduce form returns values at "
                            "the server",
                            m->fl->f->name, n->name);
    if (r->depth == 0) {
        *name = "@out";
        return FVM_OK;
    }
    const char *fn = fvm_arena_printf(m->a, "%s.result.%d", m->fl->f->name, r->ngetters++);
    *name = fvm_arena_printf(m->a, "@result/%s", fn);
    if (!fn || !*name)
        return nomem(m->d);
    FVM_TRY(write_getter(m, fn, r->out, r->depth, r->path));
    const char *arg = "@out";
    fvm_doc *attrs = fvm_attr1(m->a, "fn", fn);
    return attrs ? fvm_fwriter_instr(&r->w, *name, "federated_apply", attrs, 1, &arg) : nomem(m->d);
}

/* t with every placement removed: update's result for F's result type. */
static const fvm_type *unplaced_deep(fvm_arena *a, const fvm_type *t)
{
    if (t->kind == FVM_T_FED)
        return t->u.fed.member;
    if (t->kind != FVM_T_STRUCT)
        return t;
    const fvm_type **elems = fvm_arena_array(a, (size_t)t->u.strct.n + 1, sizeof *elems);
    for (int k = 0; elems && k < t->u.strct.n; k++)
        if (!(elems[k] = unplaced_deep(a, t->u.strct.elems[k])))
            return NULL;
    return elems ? fvm_type_struct(a, t->u.strct.n, t->u.strct.names, elems) : NULL;
}

/* Server inputs as values at the server (an unplaced parameter is placed). */
static fvm_status placed_server_args(mr *m, fvm_fwriter *w, const char **args)
{
    const fvm_func *f = m->fl->f;
    for (int k = 0; k < m->nserver; k++) {
        const fvm_fnode *n = &m->fl->nodes[m->server[k]];
        args[k] = f->param_names[n->param];
        if (n->type->kind != FVM_T_FED) {
            const char *name = fvm_arena_printf(m->a, "@server/%s", args[k]);
            fvm_doc *attrs = fvm_attr1(m->a, "placement", "SERVER");
            if (!name || !attrs)
                return nomem(m->d);
            FVM_TRY(fvm_fwriter_instr(w, name, "federated_value", attrs, 1, &args[k]));
            args[k] = name;
        }
    }
    return FVM_OK;
}

fvm_status fvm_mr_exchange(fvm_mr *m, fvm_fwriter *w, const char *work, bool report)
{
    const fvm_func *f = m->fl->f;
    const mr_types *t = &m->t;
    /* the aggregations, as one federated_aggregate of the updates */
    const char *path[2] = {"updates", NULL};
    const char *get_updates = fvm_arena_printf(m->a, "%s.updates", f->name);
    FVM_TRY(write_getter(m, get_updates, t->WORK, 1, path));
    FVM_TRY(fvm_fwriter_instr(w, "@updates", "federated_map", fvm_attr1(m->a, "fn", get_updates), 1, &work));
    FVM_TRY(fvm_fwriter_instr(w, "@zero", "call", fvm_attr1(m->a, "fn", m->part[FVM_MR_ZERO]), 0, NULL));
    fvm_doc *agg = fvm_doc_new(m->a, FVM_DOC_OBJECT);
    if (!agg || fvm_doc_set(m->a, agg, "accumulate", fvm_doc_string(m->a, m->part[FVM_MR_ACCUMULATE])) ||
        fvm_doc_set(m->a, agg, "merge", fvm_doc_string(m->a, m->part[FVM_MR_MERGE])) ||
        (report && fvm_doc_set(m->a, agg, "report", fvm_doc_string(m->a, m->part[FVM_MR_REPORT]))))
        return nomem(m->d);
    agg->flow = true;
    const char *aggargs[2] = {"@updates", "@zero"};
    FVM_TRY(fvm_fwriter_instr(w, report ? "@report" : "@acc", "federated_aggregate", agg, 2, aggargs));
    return fvm_mr_secure_sums(m, w, work, t->WORK, fvm_arena_printf(m->a, "%s.secure", f->name), false);
}

/* The attributes of secure sum j: its bit width, modulus or max_input, as
 * the source's instruction has them decoded; sums of partials (!clients)
 * take no max_input, the largest value of each leaf's dtype, since a block's
 * exact sum may pass the clients' bound. */
static fvm_doc *secure_attrs(fvm_mr *m, int j, bool partials)
{
    const fvm_instr *in = m->fl->nodes[m->sec[j]].in;
    fvm_doc *o = fvm_doc_new(m->a, FVM_DOC_OBJECT);
    if (!o)
        return NULL;
    o->flow = true;
    const char *key = in->op == FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH  ? "bitwidth"
                      : in->op == FVM_OP_FEDERATED_SECURE_MODULAR_SUM ? "modulus"
                      : (in->a.present & A(MAX_INPUT)) && !partials   ? "max_input"
                                                                      : NULL;
    int64_t v = in->op == FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH  ? in->a.bitwidth
                : in->op == FVM_OP_FEDERATED_SECURE_MODULAR_SUM ? in->a.modulus
                                                                : in->a.max_input;
    return !key || !fvm_doc_set(m->a, o, key, fvm_doc_int(m->a, v)) ? o : NULL;
}

fvm_status fvm_mr_secure_sums(fvm_mr *m, fvm_fwriter *w, const char *values, const fvm_type *t, const char *getter,
                              bool partials)
{
    const char **sums = fvm_arena_array(m->a, (size_t)m->nsec + 1, sizeof *sums);
    if (!sums)
        return nomem(m->d);
    for (int j = 0; j < m->nsec; j++) {
        const char *get = fvm_arena_printf(m->a, "%s.%d", getter, j), *in = str(m, "@secure/s%d", j);
        const char *p2[2] = {"secure", str(m, "s%d", j)};
        FVM_TRY(write_getter(m, get, t, 2, p2));
        FVM_TRY(fvm_fwriter_instr(w, in, "federated_map", fvm_attr1(m->a, "fn", get), 1, &values));
        fvm_doc *attrs = secure_attrs(m, j, partials);
        if (!attrs)
            return nomem(m->d);
        sums[j] = str(m, "@secure_sum/s%d", j);
        FVM_TRY(fvm_fwriter_instr(w, sums[j], fvm_op_table[m->fl->nodes[m->sec[j]].in->op].name, attrs, 1, &in));
    }
    if (m->nsec) {
        fvm_doc *zn = fvm_doc_new(m->a, FVM_DOC_OBJECT), *list = fvm_doc_new(m->a, FVM_DOC_ARRAY);
        if (!zn || !list || fvm_doc_set(m->a, zn, "names", list))
            return nomem(m->d);
        zn->flow = list->flow = true;
        for (int j = 0; j < m->nsec; j++)
            if (fvm_doc_push(m->a, list, fvm_doc_string(m->a, str(m, "s%d", j))))
                return nomem(m->d);
        FVM_TRY(fvm_fwriter_instr(w, "@secure", "federated_zip", zn, m->nsec, sums));
    } else {
        const char *none = "@secure/none";
        FVM_TRY(fvm_fwriter_instr(w, none, "struct", NULL, 0, NULL));
        FVM_TRY(fvm_fwriter_instr(w, "@secure", "federated_value", fvm_attr1(m->a, "placement", "SERVER"), 1, &none));
    }
    return FVM_OK;
}

/* In a round with client state: "@sent" = what work's results send to the
 * server (<updates, secure>) and "@client_states" = the clients' new
 * states, each a federated_map of a part of "@work" at the clients. */
static fvm_status split_work(mr *m, fvm_fwriter *w, const char **sent)
{
    const char *f = m->fl->f->name, *to_server = fvm_arena_printf(m->a, "%s.to_server", f),
               *get_state = fvm_arena_printf(m->a, "%s.client_state", f), *work = "@work";
    const char *path[1] = {"client_state"};
    if (!to_server || !get_state)
        return nomem(m->d);
    fvm_fwriter g;
    FVM_TRY(fvm_fwriter_init(&g, m->a, m->fl, true, m->d));
    FVM_TRY(fvm_fwriter_param(&g, "@x", m->t.OUT, -1));
    FVM_TRY(fvm_fwriter_field(&g, "@x/updates", "updates", "@x"));
    FVM_TRY(fvm_fwriter_field(&g, "@x/secure", "secure", "@x"));
    FVM_TRY(struct2(&g, "@sent", "updates", "@x/updates", "secure", "@x/secure"));
    FVM_TRY(add_func(m, to_server, &g,
                     "MapReduce form: what a client's work sends to the server (its update and secure-sum inputs), "
                     "without its new state.",
                     "@sent"));
    FVM_TRY(write_getter(m, get_state, m->t.OUT, 1, path));
    FVM_TRY(fvm_fwriter_instr(w, "@sent", "federated_map", fvm_attr1(m->a, "fn", to_server), 1, &work));
    FVM_TRY(fvm_fwriter_instr(w, "@client_states", "federated_map", fvm_attr1(m->a, "fn", get_state), 1, &work));
    *sent = "@sent";
    return FVM_OK;
}

fvm_status fvm_mr_round(fvm_mr *m)
{
    const fvm_func *f = m->fl->f;
    rewrite r = {.m = m};
    fvm_fwriter *w = &r.w;
    FVM_TRY(fvm_fwriter_init(w, m->a, m->fl, false, m->d));
    for (int i = 0; i < f->nparams; i++)
        FVM_TRY(fvm_fwriter_param(w, f->param_names[i], f->param_types[i], -1));
    const char **server = fvm_arena_array(m->a, (size_t)m->nserver + 3, sizeof *server),
               **client = fvm_arena_array(m->a, (size_t)m->nclient + 2, sizeof *client);
    if (!server || !client)
        return nomem(m->d);
    FVM_TRY(placed_server_args(m, w, server));
    fvm_doc *attrs = fvm_attr1(m->a, "fn", m->part[FVM_MR_PREPARE]);
    if (!attrs)
        return nomem(m->d);
    if (m->nserver == 0) {
        if (fvm_doc_set(m->a, attrs, "placement", fvm_doc_string(m->a, "SERVER")))
            return nomem(m->d);
        FVM_TRY(fvm_fwriter_instr(w, "@broadcast", "federated_eval", attrs, 0, NULL));
    } else {
        FVM_TRY(fvm_fwriter_instr(w, "@broadcast", "federated_apply", attrs, m->nserver, server));
    }
    const char *bc = "@broadcast";
    FVM_TRY(fvm_fwriter_instr(w, "@broadcast/clients", "federated_broadcast", NULL, 1, &bc));
    for (int k = 0; k < m->nclient; k++)
        client[k] = f->param_names[m->fl->nodes[m->client[k]].param];
    client[m->nclient] = "@broadcast/clients";
    FVM_TRY(fvm_fwriter_instr(w, "@work", "federated_map", fvm_attr1(m->a, "fn", m->part[FVM_MR_WORK]), m->nclient + 1,
                              client));
    const char *sent = "@work";
    if (m->fl->client_state >= 0) /* the new states stay at the clients; the rest goes to the exchange */
        FVM_TRY(split_work(m, w, &sent));
    FVM_TRY(fvm_mr_exchange(m, w, sent, true));
    server[m->nserver] = "@report";
    server[m->nserver + 1] = "@secure";
    FVM_TRY(fvm_fwriter_instr(w, "@out", "federated_apply", fvm_attr1(m->a, "fn", m->part[FVM_MR_UPDATE]),
                              m->nserver + 2, server));
    const fvm_type *rt = fvm_flow_server_result(m->a, m->fl);
    if (!rt || !(r.out = unplaced_deep(m->a, rt)))
        return nomem(m->d);
    const char *result;
    FVM_TRY(rebuild(&r, m->fl->result, &result));
    fvm_doc *fn = fvm_fwriter_finish(w, f->doc, result);
    return fn && !fvm_doc_set(m->a, m->funcs, f->name, fn) ? FVM_OK : nomem(m->d);
}

/* ---- the document ----------------------------------------------------------- */

static fvm_doc *strings(fvm_arena *a, int n, const char *const *v)
{
    fvm_doc *list = fvm_doc_new(a, FVM_DOC_ARRAY);
    for (int k = 0; list && k < n; k++)
        if (fvm_doc_push(a, list, fvm_doc_string(a, v[k])))
            return NULL;
    if (list)
        list->flow = true;
    return list;
}

/* The form's "client_state" member (a fedvm extension; TFF's MapReduceForm
 * has no place for it): work's input that is the client's state, the field
 * of work's result that is its new state, and the function of the first. */
static fvm_doc *client_state_doc(mr *m)
{
    fvm_arena *a = m->a;
    const fvm_func *f = m->fl->f;
    const char *input = NULL;
    for (int k = 0; k < m->nclient; k++) {
        const char *name = f->param_names[m->fl->nodes[m->client[k]].param];
        if (fvm_given_param(name, f->param_types[m->fl->nodes[m->client[k]].param]) == FVM_GIVEN_CLIENT_STATES)
            input = name;
    }
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o || (input && fvm_doc_set(a, o, "input", fvm_doc_string(a, input))) ||
        fvm_doc_set(a, o, "output", fvm_doc_string(a, "client_state")) ||
        fvm_doc_set(a, o, "initialize", fvm_doc_string(a, "initialize_client")))
        return NULL;
    o->flow = true;
    return o;
}

static fvm_doc *form_doc(mr *m, const char *source)
{
    fvm_arena *a = m->a;
    const fvm_func *f = m->fl->f;
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT), *parts = fvm_doc_new(a, FVM_DOC_OBJECT),
            *aggs = fvm_doc_new(a, FVM_DOC_ARRAY), *secs = fvm_doc_new(a, FVM_DOC_ARRAY);
    const char **sv = fvm_arena_array(a, (size_t)m->nserver + 1, sizeof *sv),
               **cv = fvm_arena_array(a, (size_t)m->nclient + 1, sizeof *cv);
    if (!o || !parts || !aggs || !secs || !sv || !cv)
        return NULL;
    for (int k = 0; k < FVM_MR_NPARTS; k++)
        if (fvm_doc_set(a, parts, fvm_mr_roles[k], fvm_doc_string(a, m->part[k])))
            return NULL;
    for (int k = 0; k < m->nserver; k++)
        sv[k] = f->param_names[m->fl->nodes[m->server[k]].param];
    for (int k = 0; k < m->nclient; k++)
        cv[k] = f->param_names[m->fl->nodes[m->client[k]].param];
    for (int i = 0; i < m->nagg; i++) {
        const fvm_fnode *g = &m->fl->nodes[m->agg[i]];
        fvm_doc *e = fvm_doc_new(a, FVM_DOC_OBJECT);
        if (!e || fvm_doc_set(a, e, "field", fvm_doc_string(a, str(m, "%d", i))) ||
            fvm_doc_set(a, e, "op", fvm_doc_string(a, fvm_op_table[g->in->op].name)) ||
            fvm_doc_set(a, e, "instruction", fvm_doc_string(a, g->name)) || fvm_doc_push(a, aggs, e))
            return NULL;
        e->flow = true;
    }
    for (int j = 0; j < m->nsec; j++) {
        const fvm_fnode *g = &m->fl->nodes[m->sec[j]];
        fvm_doc *e = fvm_doc_new(a, FVM_DOC_OBJECT);
        fvm_doc *at = secure_attrs(m, j, false);
        if (!e || !at || fvm_doc_set(a, e, "field", fvm_doc_string(a, str(m, "s%d", j))) ||
            fvm_doc_set(a, e, "op", fvm_doc_string(a, fvm_op_table[g->in->op].name)))
            return NULL;
        for (size_t k = 0; k < at->u.coll.n; k++) /* bitwidth, modulus or max_input (none: the dtype's largest) */
            if (fvm_doc_set(a, e, at->u.coll.keys[k]->u.str.s, at->u.coll.items[k]))
                return NULL;
        if (fvm_doc_set(a, e, "instruction", fvm_doc_string(a, g->name)) || fvm_doc_push(a, secs, e))
            return NULL;
        e->flow = true;
    }
    fvm_doc *cs = m->fl->client_state >= 0 ? client_state_doc(m) : NULL;
    if ((m->fl->client_state >= 0 && !cs) || fvm_doc_set(a, o, "kind", fvm_doc_string(a, "mapreduce")) ||
        fvm_doc_set(a, o, "function", fvm_doc_string(a, f->name)) ||
        fvm_doc_set(a, o, "source", fvm_doc_string(a, source)) || fvm_doc_set(a, o, "parts", parts) ||
        fvm_doc_set(a, o, "server_inputs", strings(a, m->nserver, sv)) ||
        fvm_doc_set(a, o, "client_inputs", strings(a, m->nclient, cv)) || fvm_doc_set(a, o, "aggregations", aggs) ||
        fvm_doc_set(a, o, "secure_sums", secs) || (cs && fvm_doc_set(a, o, "client_state", cs)))
        return NULL;
    return o;
}

fvm_status fvm_mr_build(fvm_arena *a, const fvm_program *p, const fvm_func *f, fvm_flow *fl, fvm_mr *m, fvm_diag *d)
{
    *m = (fvm_mr){.a = a, .fl = fl, .d = d};
    fvm_status s = fvm_flow_build(a, p, f, fl, d);
    if (s == FVM_OK)
        s = classify(m);
    if (s == FVM_OK && !(m->funcs = fvm_doc_new(a, FVM_DOC_OBJECT)))
        s = nomem(d);
    for (int k = 0; k < FVM_MR_NPARTS && s == FVM_OK; k++)
        if (!(m->part[k] = fvm_arena_printf(a, "%s.%s", f->name, fvm_mr_roles[k])))
            s = nomem(d);
    if (s == FVM_OK)
        s = types_of(m, &m->t);
    if (s == FVM_OK)
        s = write_prepare(m, &m->t);
    if (s == FVM_OK)
        s = write_work(m, &m->t);
    if (s == FVM_OK)
        s = write_zero(m);
    if (s == FVM_OK)
        s = write_fold(m, &m->t, false);
    if (s == FVM_OK)
        s = write_fold(m, &m->t, true);
    if (s == FVM_OK)
        s = write_report(m, &m->t);
    if (s == FVM_OK)
        s = write_update(m, &m->t);
    return s;
}

fvm_status fvm_plan_mapreduce(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d)
{
    *out = NULL;
    const fvm_func *f;
    fvm_status s = fvm_form_entry(p, o, &f, d);
    if (s)
        return s;
    fvm_arena a = {0};
    fvm_flow fl;
    mr m;
    s = fvm_mr_build(&a, p, f, &fl, &m, d);
    if (s == FVM_OK)
        s = fvm_mr_round(&m);
    fvm_doc *form = NULL;
    if (s == FVM_OK && !(form = form_doc(&m, f->module->path)))
        s = nomem(d);
    if (s == FVM_OK) {
        const char *doc = fvm_arena_printf(&a,
                                           "'%s' of %s in TFF's MapReduce form (written by fedplan; format/PLANS.md). "
                                           "%s",
                                           f->name, f->module->path, p->root->doc ? p->root->doc : "");
        s = doc ? fvm_form_write(&a, &fl, doc, form, m.funcs, out, len, d) : nomem(d);
    }
    fvm_arena_free(&a);
    return s;
}
