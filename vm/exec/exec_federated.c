/* exec_federated.c - runtime of the federated intrinsics: placement changes, maps, zips and the
 * aggregations (through the fixed reduction tree). */
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"

fvm_status fvm_need_clients(fvm_ctx *x, int64_t *n)
{
    if (x->vm->nclients < 0)
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                            "the number of clients is not known: bind client data or give --clients N");
    *n = x->vm->nclients;
    return FVM_OK;
}

static bool is_list(const fvm_type *t)
{
    return t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
}

/* The number of clients of an intrinsic's arguments: every {T}@CLIENTS list
 * must have the same length (the entry point guarantees it; this guards
 * values built by library users), else the known count. */
static fvm_status list_count(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, int64_t *n)
{
    *n = -1;
    for (int k = 0; k < in->nargs; k++) {
        if (!is_list(in->arg_types[k]))
            continue;
        if (*n >= 0 && args[k]->n != *n)
            return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "client values with %lld and %lld clients", (long long)*n,
                                (long long)args[k]->n);
        *n = args[k]->n;
    }
    return *n >= 0 ? FVM_OK : fvm_need_clients(x, n);
}

fvm_status fvm_client_get(fvm_ctx *x, const fvm_value *v, const fvm_type *t, int64_t i, fvm_value **out)
{
    if (is_list(t))
        return fvm_clients_get(v, i, out, x->d);
    *out = fvm_value_retain((fvm_value *)v);
    return FVM_OK;
}

static fvm_status replicate(fvm_ctx *x, fvm_value *v, fvm_value **out)
{
    int64_t n = 0;
    fvm_status s = fvm_need_clients(x, &n);
    if (s)
        return s;
    fvm_value *l = fvm_value_list(FVM_V_CLIENTS, n);
    if (!l)
        return fvm_nomem(x);
    for (int64_t i = 0; i < n; i++)
        l->items[i] = fvm_value_retain(v);
    *out = l;
    return FVM_OK;
}

fvm_status fvm_coerce(fvm_ctx *x, fvm_value *v, const fvm_type *from, const fvm_type *to, fvm_value **out)
{
    if (is_list(to) && from->kind == FVM_T_FED && from->u.fed.all_equal)
        return replicate(x, v, out);
    if (to->kind == FVM_T_STRUCT && from->kind == FVM_T_STRUCT && v->kind == FVM_V_STRUCT && fvm_type_is_placed(to)) {
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, v->n);
        if (!r)
            return fvm_nomem(x);
        for (int64_t i = 0; i < v->n; i++) {
            fvm_status s = fvm_coerce(x, v->items[i], from->u.strct.elems[i], to->u.strct.elems[i], &r->items[i]);
            if (s) {
                fvm_value_release(r);
                return s;
            }
        }
        *out = r;
        return FVM_OK;
    }
    *out = fvm_value_retain(v);
    return FVM_OK;
}

fvm_status exec_identity(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    *out = fvm_value_retain(args[0]);
    return FVM_OK;
}

fvm_status exec_federated_eval(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_value *v = NULL;
    fvm_status s = fvm_exec_call(x, in->a.fn, NULL, &v);
    if (s || in->a.placement == FVM_PL_SERVER) {
        *out = v;
        return s;
    }
    /* Functions are pure, so every client's evaluation gives this value. */
    s = replicate(x, v, out);
    fvm_value_release(v);
    return s;
}

/* One client of a federated_map: fn over the client's members. */
typedef struct map_job {
    const fvm_instr *in;
    fvm_value *const *args;
} map_job;

static fvm_status map_task(fvm_ctx *x, void *u, int64_t i, fvm_value **out)
{
    const map_job *m = u;
    const fvm_instr *in = m->in;
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs);
    if (!argv)
        return fvm_nomem(x);
    fvm_status s = FVM_OK;
    for (int k = 0; k < in->nargs && s == FVM_OK; k++)
        s = fvm_client_get(x, m->args[k], in->arg_types[k], i, &argv[k]);
    if (s == FVM_OK)
        s = fvm_exec_call(x, in->a.fn, argv, out);
    if (s)
        fvm_diag_add(x->d, s, &in->loc, "federated_map: the error above is client %lld's (counting from 0)",
                     (long long)i);
    for (int k = 0; k < in->nargs; k++)
        fvm_value_release(argv[k]);
    fvm_argv_free(&av);
    return s;
}

/* One value per client, task(i) on the backend for each client of the
 * instruction's client arguments. */
static fvm_status per_client(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_task_fn task, fvm_value **out)
{
    int64_t n;
    fvm_status s = list_count(x, in, args, &n);
    if (s)
        return s;
    fvm_value *res = fvm_value_list(FVM_V_CLIENTS, n);
    if (!res)
        return fvm_nomem(x);
    map_job m = {in, args};
    s = x->vm->backend->iface->run(x->vm->backend, x, n, task, &m, res->items);
    if (s) {
        fvm_value_release(res);
        return s;
    }
    *out = res;
    return FVM_OK;
}

fvm_status exec_federated_map(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return per_client(x, in, args, map_task, out);
}

/* fn of all-equal members: every client's is the same value, since functions are
 * pure, so fn runs once (an all-equal value is its member); no client count is needed. */
fvm_status exec_federated_map_all_equal(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return fvm_exec_call(x, in->a.fn, args, out);
}

/* One client of a federated_select: its select_keys. */
static fvm_status select_task(fvm_ctx *x, void *u, int64_t i, fvm_value **out)
{
    const map_job *m = u;
    fvm_value *keys = NULL;
    fvm_status s = fvm_client_get(x, m->args[0], m->in->arg_types[0], i, &keys);
    if (s == FVM_OK) {
        fvm_value *args[3] = {keys, m->args[1], m->args[2]};
        s = exec_select_keys(x, m->in, args, out);
        if (s)
            fvm_diag_add(x->d, s, &m->in->loc, "federated_select: the error above is client %lld's (counting from 0)",
                         (long long)i);
    }
    fvm_value_release(keys);
    return s;
}

fvm_status exec_federated_select(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return per_client(x, in, args, select_task, out);
}

/* A zip whose arguments include client values read on demand is itself read
 * on demand: member i is built from the arguments' members i when asked. */
typedef struct zip_source {
    fvm_source base;
    int nargs;
    fvm_value **args; /* owned references */
    const fvm_type **types; /* the argument types (owned by the program) */
} zip_source;

static fvm_status zip_get(fvm_source *src, int64_t i, fvm_value **out, fvm_diag *d)
{
    zip_source *z = (zip_source *)src;
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, z->nargs);
    if (!r)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_status s = FVM_OK;
    for (int k = 0; k < z->nargs && s == FVM_OK; k++) {
        if (is_list(z->types[k]))
            s = fvm_clients_get(z->args[k], i, &r->items[k], d);
        else
            r->items[k] = fvm_value_retain(z->args[k]);
    }
    if (s) {
        fvm_value_release(r);
        return s;
    }
    *out = r;
    return FVM_OK;
}

static void zip_free(fvm_source *src)
{
    zip_source *z = (zip_source *)src;
    for (int k = 0; k < z->nargs; k++)
        fvm_value_release(z->args[k]);
    free(z->args);
    free(z->types);
    free(z);
}

static const struct fvm_source_i zip_iface = {.get = zip_get, .free = zip_free};

static fvm_status zip_lazy(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, int64_t n, fvm_value **out)
{
    zip_source *z = calloc(1, sizeof *z);
    if (z) {
        z->base.iface = &zip_iface;
        z->args = calloc((size_t)in->nargs, sizeof *z->args);
        z->types = calloc((size_t)in->nargs, sizeof *z->types);
    }
    if (!z || !z->args || !z->types) {
        if (z)
            zip_free(&z->base);
        return fvm_nomem(x);
    }
    z->nargs = in->nargs;
    for (int k = 0; k < in->nargs; k++) {
        z->args[k] = fvm_value_retain(args[k]);
        z->types[k] = in->arg_types[k];
    }
    *out = fvm_value_clients_source_take(n, &z->base);
    if (!*out) {
        zip_free(&z->base);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

fvm_status exec_federated_zip(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    if (!is_list(in->type)) /* at SERVER, or all members all-equal */
        return exec_struct(x, in, args, out);
    int64_t n;
    fvm_status s = list_count(x, in, args, &n);
    if (s)
        return s;
    for (int k = 0; k < in->nargs; k++)
        if (is_list(in->arg_types[k]) && args[k]->src)
            return zip_lazy(x, in, args, n, out);
    fvm_value *res = fvm_value_list(FVM_V_CLIENTS, n);
    if (!res)
        return fvm_nomem(x);
    for (int64_t i = 0; i < n; i++) {
        fvm_value *zipped = fvm_value_list(FVM_V_STRUCT, in->nargs);
        if (!zipped) {
            fvm_value_release(res);
            return fvm_nomem(x);
        }
        res->items[i] = zipped;
        for (int k = 0; k < in->nargs && s == FVM_OK; k++)
            s = fvm_client_get(x, args[k], in->arg_types[k], i, &zipped->items[k]);
        if (s) {
            fvm_value_release(res);
            return s;
        }
    }
    *out = res;
    return FVM_OK;
}

/* ---- aggregations ---------------------------------------------------------------- */

/* Applies fn(leaf tensor, scalar converted to the leaf's dtype) over a tree. */
static fvm_status scale_tree(fvm_ctx *x, fvm_binary op, const fvm_value *v, double scalar, fvm_value **out)
{
    if (v->kind == FVM_V_TENSOR) {
        fvm_dims d0 = {0};
        fvm_value *sv = NULL;
        fvm_status s = fvm_new_tensor(x, v->t.dtype, &d0, &sv);
        if (s)
            return s;
        fvm_tensor_set_f64(&sv->t, 0, scalar);
        s = fvm_lift_binary(x, op, v, sv, false, out);
        fvm_value_release(sv);
        return s;
    }
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, v->n);
    if (!r)
        return fvm_nomem(x);
    for (int64_t k = 0; k < v->n; k++) {
        fvm_status s = scale_tree(x, op, v->items[k], scalar, &r->items[k]);
        if (s) {
            fvm_value_release(r);
            return s;
        }
    }
    *out = r;
    return FVM_OK;
}

/* The largest value of an integer dtype. */
static uint64_t dtype_max(fvm_dtype dt)
{
    return dt == FVM_DTYPE_U8    ? UINT8_MAX
           : dt == FVM_DTYPE_I32 ? INT32_MAX
           : dt == FVM_DTYPE_U32 ? UINT32_MAX
                                 : INT64_MAX;
}

/* One element of a secure sum: a client's value v reduced or checked (!b),
 * or two sums added (*b). */
static fvm_status secure_elem(const fvm_secure *s, fvm_dtype dt, int64_t v, const int64_t *b, int64_t at, int64_t *out,
                              fvm_diag *d)
{
    bool is_signed = dt == FVM_DTYPE_I32 || dt == FVM_DTYPE_I64;
    if (s->lift == FVM_AGG_LIFT_MODULO) {
        uint64_t m = s->modulus;
        if ((m & (m - 1)) == 0) { /* 2^k (0 is 2^64): the low k bits, of sums that wrap */
            *out = (int64_t)(((uint64_t)v + (b ? (uint64_t)*b : 0)) & (m - 1));
        } else if (!b) { /* into [0, m), floored as tf.math.mod: -1 is m - 1 */
            int64_t r = is_signed ? v % (int64_t)m : (int64_t)((uint64_t)v % m);
            *out = r < 0 ? r + (int64_t)m : r;
        } else { /* both in [0, m), m <= 2^63: the sum does not wrap */
            uint64_t t = (uint64_t)v + (uint64_t)*b;
            *out = (int64_t)(t >= m ? t - m : t);
        }
        return FVM_OK;
    }
    uint64_t hi = dtype_max(dt);
    if (!b) {
        uint64_t max = s->max_input >= 0 ? (uint64_t)s->max_input : hi;
        if ((is_signed && v < 0) || (uint64_t)v > max)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                                "a client's value %lld (element %lld) is outside [0, %llu], the range of the secure "
                                "sum (%s)",
                                (long long)v, (long long)at, (unsigned long long)max,
                                s->max_input >= 0 ? "its max_input" : "the values of its dtype that are not negative");
        *out = v;
        return FVM_OK;
    }
    uint64_t t = (uint64_t)v + (uint64_t)*b; /* both in [0, hi], hi < 2^63: no wrap */
    if (t > hi)
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                            "the sum %llu of the clients' values (element %lld) does not fit %s (at most %llu): a "
                            "secure sum with a max_input is exact",
                            (unsigned long long)t, (long long)at, fvm_dtype_name(dt), (unsigned long long)hi);
    *out = (int64_t)t;
    return FVM_OK;
}

fvm_status fvm_secure_step(const fvm_secure *s, const fvm_value *a, const fvm_value *b, fvm_value **out, fvm_diag *d)
{
    if (a->kind == FVM_V_STRUCT || (b && b->kind == FVM_V_STRUCT)) {
        if (b && (a->kind != b->kind || a->n != b->n))
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "client values of different structures in a secure sum");
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, a->n);
        if (!r)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        for (int64_t k = 0; k < a->n; k++) {
            fvm_status st = fvm_secure_step(s, a->items[k], b ? b->items[k] : NULL, &r->items[k], d);
            if (st) {
                fvm_value_release(r);
                return st;
            }
        }
        *out = r;
        return FVM_OK;
    }
    if (b && !fvm_dims_equal(&a->t.shape, &b->t.shape))
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "client values of different shapes in a secure sum");
    fvm_tensor t;
    fvm_status st = fvm_tensor_alloc(&t, a->t.dtype, &a->t.shape, d);
    if (st)
        return st;
    int64_t n = fvm_tensor_count(&a->t);
    for (int64_t i = 0; i < n && !st; i++) {
        int64_t v = fvm_tensor_get_i64(&a->t, i), w = b ? fvm_tensor_get_i64(&b->t, i) : 0, r = 0;
        if (!(st = secure_elem(s, a->t.dtype, v, b ? &w : NULL, i, &r, d)))
            fvm_tensor_set_i64(&t, i, r);
    }
    if (!st && !(*out = fvm_value_tensor_take(&t)))
        st = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (st)
        fvm_tensor_release(&t);
    return st;
}

/* The elementwise kernel of a COMBINE column that names one. */
static fvm_binary combine_kernel(fvm_op op)
{
    return op == FVM_OP_MINIMUM ? FVM_BIN_MINIMUM : op == FVM_OP_MAXIMUM ? FVM_BIN_MAXIMUM : FVM_BIN_ADD;
}

/* A client's update from its arguments vals (the rule's LIFT). */
static fvm_status lift(fvm_ctx *x, const fvm_agg_rule *r, const fvm_instr *in, fvm_value *const *vals, fvm_value **out)
{
    fvm_value *p = NULL;
    fvm_status s;
    switch (r->lift) {
    case FVM_AGG_LIFT_WEIGHTED: /* <sum=value * weight, weight> */
        if (!(p = fvm_value_list(FVM_V_STRUCT, 2)))
            return fvm_nomem(x);
        s = scale_tree(x, FVM_BIN_MUL, vals[0], fvm_tensor_get_f64(&vals[1]->t, 0), &p->items[0]);
        if (s) {
            fvm_value_release(p);
            return s;
        }
        p->items[1] = fvm_value_retain(vals[1]);
        *out = p;
        return FVM_OK;
    case FVM_AGG_LIFT_MODULO:
    case FVM_AGG_LIFT_BOUNDED: {
        fvm_secure sec = fvm_secure_of(in->op, &in->a);
        return fvm_secure_step(&sec, vals[0], NULL, out, x->d);
    }
    default: /* VALUE */
        *out = fvm_value_retain(vals[0]);
        return FVM_OK;
    }
}

/* a combined with b (the rule's COMBINE, not USER). */
static fvm_status combine(fvm_ctx *x, const fvm_agg_rule *r, const fvm_instr *in, fvm_value *a, fvm_value *b,
                          fvm_value **out)
{
    if (r->combine == FVM_AGG_COMBINE_ADD_MODULO || r->combine == FVM_AGG_COMBINE_ADD_EXACT) {
        fvm_secure sec = fvm_secure_of(in->op, &in->a);
        return fvm_secure_step(&sec, a, b, out, x->d);
    }
    return fvm_lift_binary(x, combine_kernel(r->combine_op), a, b, true, out);
}

fvm_status fvm_agg_step(fvm_ctx *x, const fvm_instr *in, fvm_value *const *vals, fvm_value *acc, fvm_value **out)
{
    const fvm_agg_rule *r = fvm_agg_rule_of(in->op);
    if (r->lift == FVM_AGG_LIFT_USER) { /* a block starts from the zero */
        fvm_value *argv[2] = {acc ? acc : vals[1], vals[0]};
        return fvm_exec_call(x, in->a.accumulate, argv, out);
    }
    fvm_value *u = NULL;
    fvm_status s = lift(x, r, in, vals, acc ? &u : out);
    if (s || !acc)
        return s; /* a block's first client starts its partial */
    s = combine(x, r, in, acc, u, out);
    fvm_value_release(u);
    return s;
}

fvm_status fvm_agg_merge(fvm_ctx *x, const fvm_instr *in, fvm_value *a, fvm_value *b, fvm_value **out)
{
    const fvm_agg_rule *r = fvm_agg_rule_of(in->op);
    if (r->combine == FVM_AGG_COMBINE_USER) {
        fvm_value *argv[2] = {a, b};
        return fvm_exec_call(x, in->a.merge, argv, out);
    }
    return combine(x, r, in, a, b, out);
}

fvm_status fvm_agg_finish(fvm_ctx *x, const fvm_instr *in, int64_t n, fvm_value *acc, fvm_value **out)
{
    fvm_status s;
    switch (fvm_agg_rule_of(in->op)->report) {
    case FVM_AGG_REPORT_PER_CLIENT:
        s = scale_tree(x, FVM_BIN_DIV, acc, (double)n, out);
        break;
    case FVM_AGG_REPORT_PER_WEIGHT:
        s = scale_tree(x, FVM_BIN_DIV, acc->items[0], fvm_tensor_get_f64(&acc->items[1]->t, 0), out);
        break;
    case FVM_AGG_REPORT_USER:
        if (in->a.report) {
            s = fvm_exec_call(x, in->a.report, &acc, out);
            break;
        }
        /* fall through */
    default: /* VALUE */
        *out = acc;
        return FVM_OK;
    }
    fvm_value_release(acc);
    return s;
}

fvm_status fvm_agg_empty(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    switch (fvm_agg_rule_of(in->op)->empty) {
    case FVM_AGG_EMPTY_REPORT_ZERO:
        return fvm_agg_finish(x, in, 0, fvm_value_retain(args[1]), out);
    case FVM_AGG_EMPTY_ZEROS:
        return fvm_zeros_of_type(x, in->type->u.fed.member, out);
    default:
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "%s over zero clients is undefined",
                            fvm_op_table[in->op].name);
    }
}

/* Instruction-at-a-time aggregation: client i's values fetched from the arguments. */
typedef struct agg {
    const fvm_instr *in;
    fvm_value *const *args;
} agg;

static fvm_status agg_step_at(fvm_ctx *x, void *u, fvm_value *acc, int64_t i, fvm_value **out)
{
    const agg *g = u;
    fvm_value *vals[2] = {NULL, NULL};
    fvm_status s = FVM_OK;
    for (int k = 0; k < g->in->nargs && s == FVM_OK; k++)
        s = fvm_client_get(x, g->args[k], g->in->arg_types[k], i, &vals[k]);
    if (s == FVM_OK && (s = fvm_agg_step(x, g->in, vals, acc, out))) {
        const char *op = fvm_op_table[g->in->op].name;
        fvm_diag_place_last(x->d, &g->in->loc, op, s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s);
        fvm_diag_add(x->d, s, &g->in->loc, "%s: the error above is client %lld's (counting from 0)", op, (long long)i);
    }
    fvm_value_release(vals[0]);
    fvm_value_release(vals[1]);
    return s;
}

static fvm_status agg_merge(fvm_ctx *x, void *u, fvm_value *a, fvm_value *b, fvm_value **out)
{
    return fvm_agg_merge(x, ((const agg *)u)->in, a, b, out);
}

fvm_status exec_federated_reduce(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    agg g = {in, args};
    fvm_reducer r = {.step = agg_step_at, .merge = agg_merge, .u = &g};
    int64_t n;
    fvm_status s = list_count(x, in, args, &n);
    if (s)
        return s;
    if (n == 0)
        return fvm_agg_empty(x, in, args, out);
    fvm_value *acc = NULL;
    if ((s = fvm_tree_reduce(x, &r, n, &acc)))
        return s;
    return fvm_agg_finish(x, in, n, acc, out);
}
