/* rules.c - the type rule of every op: what each op accepts and what it returns. */
#include "rules.h"
#include "aggregation.h"

#include <string.h>

#include "shapes.h"

/* ---- helpers -------------------------------------------------------------- */

const fvm_type *fvm_rule_tensor(fvm_rctx *c, fvm_dtype dt, const fvm_dims *dims)
{
    return fvm_type_tensor(c->a, dt, dims);
}

static bool is_numeric(fvm_dtype t)
{
    return t != FVM_DTYPE_BOOL;
}

static bool is_signed_or_float(fvm_dtype t)
{
    return t == FVM_DTYPE_I32 || t == FVM_DTYPE_I64 || fvm_dtype_is_float(t);
}

static bool is_bool(fvm_dtype t)
{
    return t == FVM_DTYPE_BOOL;
}

/* Shape-rule errors come without a location: give them the argument's, the
 * attributes' or the instruction's, and the op name. */
fvm_status fvm_rule_located(fvm_rctx *c, fvm_status s, int argi)
{
    const fvm_loc *l = argi == FVM_RLOC_ATTRS             ? &c->in->attrs_loc
                       : argi >= 0 && argi < c->in->nargs ? &c->in->arg_locs[argi]
                                                          : &c->in->loc;
    if (s != FVM_OK)
        fvm_diag_place_last(c->d, l, fvm_op_table[c->in->op].name, FVM_OK);
    return s;
}

fvm_status fvm_rule_want_tensor(fvm_rctx *c, int i, const char *what)
{
    if (c->args[i]->kind == FVM_T_TENSOR)
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_TYPE, "expected %s (a tensor), found %s", what, fvm_rtype(c, c->args[i]));
}

fvm_status fvm_rule_want_key(fvm_rctx *c, int i)
{
    const fvm_type *t = c->args[i];
    if (t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_U32 && t->u.tensor.dims.rank == 1 &&
        (t->u.tensor.dims.d[0] == 2 || t->u.tensor.dims.d[0] < 0))
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_TYPE, "expected a random key u32[2], found %s", fvm_rtype(c, t));
}

static bool is_int_scalar(const fvm_type *t)
{
    return t->kind == FVM_T_TENSOR && t->u.tensor.dims.rank == 0 && fvm_dtype_is_int(t->u.tensor.dtype);
}

/* A function given as an attribute must accept 'n' arguments of types 'ts'
 * (compatible) and, for local contexts, use no federated values. */
static fvm_status want_fn(fvm_rctx *c, const char *attr, const fvm_func *fn, int n, const fvm_type *const *ts,
                          bool local)
{
    if (!fn->ok)
        return FVM_ERR_TYPE; /* reported where it is defined */
    if (local && fn->federated)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_PLACEMENT,
                        "%s function '%s' uses federated values; functions run per client or per element "
                        "must be local (no placements, no federated intrinsics)",
                        attr, fn->name);
    if (fn->nparams != n)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "%s function '%s' takes %d parameter%s but is given %d", attr,
                        fn->name, fn->nparams, fn->nparams == 1 ? "" : "s", n);
    for (int i = 0; i < n; i++) {
        char why[256];
        if (!fvm_type_compatible(ts[i], fn->param_types[i]))
            return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE,
                            "%s function '%s': parameter '%s' has type %s but is given %s: %s", attr, fn->name,
                            fn->param_names[i], fvm_rtype(c, fn->param_types[i]), fvm_rtype(c, ts[i]),
                            fvm_type_mismatch(ts[i], fn->param_types[i], why, sizeof why));
        if (!fvm_type_equal(ts[i], fn->param_types[i]))
            ((fvm_func *)fn)->entry_check = true; /* compatible only through '?': check at run time */
    }
    return FVM_OK;
}

/* fn's result is fed back to fn itself (a loop state, an accumulator), where
 * 'want' is expected. */
static fvm_status want_result(fvm_rctx *c, const char *attr, const fvm_func *fn, const fvm_type *want, const char *what)
{
    if (fvm_type_compatible(fn->result_type, want)) {
        if (!fvm_type_equal(fn->result_type, want))
            ((fvm_func *)fn)->entry_check = true;
        return FVM_OK;
    }
    char why[256];
    return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "%s function '%s' must return %s (%s), but returns %s: %s", attr,
                    fn->name, fvm_rtype(c, want), what, fvm_rtype(c, fn->result_type),
                    fvm_type_mismatch(fn->result_type, want, why, sizeof why));
}

/* ---- lifting elementwise rules over structs -------------------------------- */

typedef fvm_status (*leaf_rule)(fvm_rctx *c, const fvm_type *const *leaves, int n, const fvm_type **out);

static fvm_status lift(fvm_rctx *c, const fvm_type *const *ts, int n, leaf_rule rule, const fvm_type **out, int depth)
{
    const fvm_type *s = NULL;
    int si = -1;
    for (int i = 0; i < n; i++) {
        if (ts[i]->kind == FVM_T_STRUCT && !s) {
            s = ts[i];
            si = i;
        } else if (ts[i]->kind != FVM_T_TENSOR && ts[i]->kind != FVM_T_STRUCT) {
            return fvm_rerr(c, i, FVM_ERR_TYPE, "expected a tensor or a struct of tensors, found %s",
                            fvm_rtype(c, ts[i]));
        }
    }
    if (!s)
        return rule(c, ts, n, out);
    for (int i = 0; i < n; i++) {
        const fvm_type *t = ts[i];
        if (t->kind != FVM_T_STRUCT)
            continue;
        bool same = t->u.strct.n == s->u.strct.n;
        for (int k = 0; same && k < t->u.strct.n; k++) {
            const char *a = t->u.strct.names[k], *b = s->u.strct.names[k];
            same = (!a && !b) || (a && b && !strcmp(a, b));
        }
        if (!same)
            return fvm_rerr(c, i, FVM_ERR_TYPE, "elementwise operands must be structs of the same fields: %s and %s",
                            fvm_rtype(c, ts[si]), fvm_rtype(c, t));
    }
    int nf = s->u.strct.n;
    const fvm_type **fields = fvm_arena_array(c->a, (size_t)nf + 1, sizeof *fields);
    if (!fields)
        return FVM_ERR_NOMEM;
    for (int k = 0; k < nf; k++) {
        const fvm_type *sub[8];
        for (int i = 0; i < n; i++)
            sub[i] = ts[i]->kind == FVM_T_STRUCT ? ts[i]->u.strct.elems[k] : ts[i];
        fvm_status st = lift(c, sub, n, rule, &fields[k], depth + 1);
        if (st)
            return st;
    }
    *out = fvm_type_struct(c->a, nf, s->u.strct.names, fields);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status leaf_dtype(fvm_rctx *c, const fvm_type *t, bool (*pred)(fvm_dtype), const char *what)
{
    if (pred(t->u.tensor.dtype))
        return FVM_OK;
    return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE, "expects %s, found %s", what, fvm_rtype(c, t));
}

static fvm_status leaf_unary(fvm_rctx *c, const fvm_type *t, bool (*pred)(fvm_dtype), const char *what,
                             const fvm_type **out)
{
    if (leaf_dtype(c, t, pred, what))
        return FVM_ERR_TYPE;
    *out = t;
    return FVM_OK;
}

static fvm_status leaf_unary_float(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    return leaf_unary(c, ts[0], fvm_dtype_is_float, "a float tensor (f32 or f64)", out);
}

static fvm_status leaf_unary_signed(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    return leaf_unary(c, ts[0], is_signed_or_float, "a signed or float tensor (i32, i64, f32, f64)", out);
}

static fvm_status leaf_unary_bool(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    return leaf_unary(c, ts[0], is_bool, "a bool tensor", out);
}

static fvm_status leaf_same(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    *out = ts[0];
    return FVM_OK;
}

/* Broadcast two or three tensor types; dtypes must agree except a leading
 * bool predicate (select). */
static fvm_status broadcast_leaves(fvm_rctx *c, const fvm_type *const *ts, int n, int first, fvm_dims *dims)
{
    *dims = ts[0]->u.tensor.dims;
    for (int i = 1; i < n; i++) {
        fvm_dims next;
        if (fvm_dims_broadcast(dims, &ts[i]->u.tensor.dims, &next, c->d))
            return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_INSTR);
        *dims = next;
    }
    for (int i = first + 1; i < n; i++)
        if (ts[i]->u.tensor.dtype != ts[first]->u.tensor.dtype)
            return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE,
                            "operands have different dtypes, %s and %s (no implicit conversion; use cast)",
                            fvm_rtype(c, ts[first]), fvm_rtype(c, ts[i]));
    return FVM_OK;
}

static fvm_status leaf_binary(fvm_rctx *c, const fvm_type *const *ts, bool (*pred)(fvm_dtype), const char *what,
                              bool to_bool, const fvm_type **out)
{
    fvm_dims dims;
    if (broadcast_leaves(c, ts, 2, 0, &dims))
        return FVM_ERR_TYPE;
    if (leaf_dtype(c, ts[0], pred, what))
        return FVM_ERR_TYPE;
    *out = fvm_rule_tensor(c, to_bool ? FVM_DTYPE_BOOL : ts[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status leaf_binary_num(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    return leaf_binary(c, ts, is_numeric, "numeric tensors (not bool)", false, out);
}

static fvm_status leaf_binary_float(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    return leaf_binary(c, ts, fvm_dtype_is_float, "float tensors (f32 or f64)", false, out);
}

static bool any_dtype(fvm_dtype t)
{
    (void)t;
    return true;
}

static fvm_status leaf_compare(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    bool ordered = c->in->op != FVM_OP_EQ && c->in->op != FVM_OP_NE;
    return leaf_binary(c, ts, ordered ? is_numeric : any_dtype, ordered ? "numeric tensors" : "tensors", true, out);
}

static fvm_status leaf_binary_bool(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    return leaf_binary(c, ts, is_bool, "bool tensors", false, out);
}

static fvm_status leaf_select(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    if (ts[0]->u.tensor.dtype != FVM_DTYPE_BOOL)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "the predicate must be a bool tensor, found %s", fvm_rtype(c, ts[0]));
    fvm_dims dims;
    if (broadcast_leaves(c, ts, 3, 1, &dims))
        return FVM_ERR_TYPE;
    *out = fvm_rule_tensor(c, ts[1]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* clip(x, lo, hi): three operands of one numeric dtype, broadcast together;
 * a mismatch is reported at the operand that does not fit x. */
static fvm_status leaf_clip(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    if (!is_numeric(ts[0]->u.tensor.dtype))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects numeric tensors (not bool), found %s", fvm_rtype(c, ts[0]));
    fvm_dims dims = ts[0]->u.tensor.dims;
    for (int i = 1; i < 3; i++) {
        if (ts[i]->u.tensor.dtype != ts[0]->u.tensor.dtype)
            return fvm_rerr(c, i, FVM_ERR_TYPE,
                            "the bound %s is %s, but x is %s: the bounds take x's dtype (no implicit conversion; "
                            "use cast)",
                            i == 1 ? "lo" : "hi", fvm_rtype(c, ts[i]), fvm_rtype(c, ts[0]));
        fvm_dims next;
        if (fvm_dims_broadcast(&dims, &ts[i]->u.tensor.dims, &next, c->d))
            return fvm_rule_located(c, FVM_ERR_TYPE, i);
        dims = next;
    }
    *out = fvm_rule_tensor(c, ts[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status leaf_cast(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    *out = fvm_rule_tensor(c, c->in->a.dtype, &ts[0]->u.tensor.dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* Elementwise ops: the rule of each leaf, lifted over structs. */
#define LIFTED_RULE_DEF(name, leaf) \
    fvm_status name(fvm_rctx *c, const fvm_type **out) \
    { \
        return lift(c, c->args, c->nargs, leaf, out, 0); \
    }
#define LIFTED_RULE(name, leaf) LIFTED_RULE_DEF(name, leaf)
LIFTED_RULE(rule_same, leaf_same)
LIFTED_RULE(rule_unary_float, leaf_unary_float)
LIFTED_RULE(rule_unary_signed, leaf_unary_signed)
LIFTED_RULE(rule_unary_bool, leaf_unary_bool)
LIFTED_RULE(rule_cast, leaf_cast)
LIFTED_RULE(rule_binary_num, leaf_binary_num)
LIFTED_RULE(rule_binary_float, leaf_binary_float)
LIFTED_RULE(rule_compare, leaf_compare)
LIFTED_RULE(rule_binary_bool, leaf_binary_bool)
LIFTED_RULE(rule_select, leaf_select)
LIFTED_RULE(rule_clip, leaf_clip)

/* ---- constants ------------------------------------------------------------ */

fvm_status rule_const(fvm_rctx *c, const fvm_type **out)
{
    /* the value was read into konst with the attributes (format/ir_attrs.c) */
    *out = fvm_rule_tensor(c, c->in->konst.dtype, &c->in->konst.shape);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status static_shape(fvm_rctx *c, const fvm_ints *shape, fvm_dtype dt, fvm_dims *dims)
{
    dims->rank = shape->n;
    for (int i = 0; i < shape->n; i++)
        dims->d[i] = shape->v[i];
    if (fvm_dims_check_size(dims, dt, c->d))
        return fvm_rule_located(c, FVM_ERR_LIMIT, FVM_RLOC_ATTRS);
    return FVM_OK;
}

fvm_status rule_iota(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    fvm_dtype dt = (a->present & A(DTYPE)) ? a->dtype : FVM_DTYPE_I32;
    fvm_dims dims;
    if (static_shape(c, &a->shape, dt, &dims))
        return FVM_ERR_TYPE;
    if (a->axis < -dims.rank || a->axis >= dims.rank)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "axis %lld is out of range for rank %d", (long long)a->axis,
                        dims.rank);
    *out = fvm_rule_tensor(c, dt, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* ---- linear algebra and shapes -------------------------------------------- */

fvm_status rule_matmul(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the left operand") || fvm_rule_want_tensor(c, 1, "the right operand"))
        return FVM_ERR_TYPE;
    const fvm_type *x = c->args[0], *y = c->args[1];
    if (x->u.tensor.dtype != y->u.tensor.dtype || x->u.tensor.dtype == FVM_DTYPE_BOOL)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE, "operands must have one numeric dtype, found %s and %s",
                        fvm_rtype(c, x), fvm_rtype(c, y));
    fvm_dims dims;
    fvm_status s =
        fvm_shape_matmul(&x->u.tensor.dims, &y->u.tensor.dims, c->in->a.transpose_a, c->in->a.transpose_b, &dims, c->d);
    if (s)
        return fvm_rule_located(c, s, FVM_RLOC_INSTR);
    *out = fvm_rule_tensor(c, x->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_reduce(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    const fvm_type *x = c->args[0];
    fvm_dtype dt = x->u.tensor.dtype;
    if (c->in->op == FVM_OP_MEAN ? !fvm_dtype_is_float(dt) : dt == FVM_DTYPE_BOOL)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects a %s tensor, found %s",
                        c->in->op == FVM_OP_MEAN ? "float" : "numeric", fvm_rtype(c, x));
    fvm_dims dims;
    uint32_t mask;
    const fvm_attrs *a = &c->in->a;
    fvm_status s =
        fvm_shape_reduce(&x->u.tensor.dims, (a->present & A(AXES)) ? &a->axes : NULL, a->keepdims, &dims, &mask, c->d);
    if (s)
        return fvm_rule_located(c, s, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, dt, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_argmax(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    const fvm_type *x = c->args[0];
    if (x->u.tensor.dtype == FVM_DTYPE_BOOL)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects a numeric tensor, found %s", fvm_rtype(c, x));
    fvm_dims dims;
    int ax;
    int64_t axis = (c->in->a.present & A(AXIS)) ? c->in->a.axis : -1;
    if (fvm_shape_argmax(&x->u.tensor.dims, axis, &dims, &ax, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, FVM_DTYPE_I64, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* The axis attribute of a rank >= 1 tensor argument: in [-rank, rank). */
static fvm_status want_axis(fvm_rctx *c, const fvm_type *x)
{
    int r = x->u.tensor.dims.rank;
    if (r == 0)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects a tensor of rank >= 1 (a scalar has no axis), found %s",
                        fvm_rtype(c, x));
    if (c->in->a.axis < -r || c->in->a.axis >= r)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "axis %lld is out of range for %s (rank %d)",
                        (long long)c->in->a.axis, fvm_rtype(c, x), r);
    return FVM_OK;
}

fvm_status rule_cumsum(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    const fvm_type *x = c->args[0];
    if (x->u.tensor.dtype == FVM_DTYPE_BOOL)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects a numeric tensor (not bool; cast it first), found %s",
                        fvm_rtype(c, x));
    if (want_axis(c, x))
        return FVM_ERR_TYPE;
    *out = x;
    return FVM_OK;
}

fvm_status rule_dim(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand") || want_axis(c, c->args[0]))
        return FVM_ERR_TYPE;
    *out = fvm_type_scalar(c->a, FVM_DTYPE_I32);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_reshape(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    fvm_dims dims;
    if (fvm_shape_reshape(&c->args[0]->u.tensor.dims, &c->in->a.shape, &dims, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    if (fvm_dims_check_size(&dims, c->args[0]->u.tensor.dtype, c->d))
        return fvm_rule_located(c, FVM_ERR_LIMIT, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_broadcast_to(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    fvm_dims dims;
    if (fvm_shape_broadcast_to(&c->args[0]->u.tensor.dims, &c->in->a.shape, &dims, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    if (fvm_dims_check_size(&dims, c->args[0]->u.tensor.dtype, c->d))
        return fvm_rule_located(c, FVM_ERR_LIMIT, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_transpose(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    fvm_dims dims;
    int perm[FVM_MAX_RANK];
    const fvm_attrs *a = &c->in->a;
    if (fvm_shape_transpose(&c->args[0]->u.tensor.dims, (a->present & A(PERM)) ? &a->perm : NULL, &dims, perm, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_slice(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    const fvm_attrs *a = &c->in->a;
    fvm_dims dims;
    int64_t start[FVM_MAX_RANK], step[FVM_MAX_RANK];
    if (fvm_shape_slice(&c->args[0]->u.tensor.dims, (a->present & A(START)) ? &a->start : NULL,
                        (a->present & A(STOP)) ? &a->stop : NULL, (a->present & A(STEP)) ? &a->step : NULL, &dims,
                        start, step, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_concat(fvm_rctx *c, const fvm_type **out)
{
    const fvm_dims *dims[256];
    if (c->nargs > 256)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_LIMIT, "at most 256 operands");
    for (int i = 0; i < c->nargs; i++) {
        if (fvm_rule_want_tensor(c, i, "an operand"))
            return FVM_ERR_TYPE;
        if (c->args[i]->u.tensor.dtype != c->args[0]->u.tensor.dtype)
            return fvm_rerr(c, i, FVM_ERR_TYPE, "operands must have one dtype, found %s and %s",
                            fvm_rtype(c, c->args[0]), fvm_rtype(c, c->args[i]));
        dims[i] = &c->args[i]->u.tensor.dims;
    }
    fvm_dims res;
    int ax;
    if (fvm_shape_concat(dims, c->nargs, c->in->a.axis, &res, &ax, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_INSTR);
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &res);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_gather(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand") || fvm_rule_want_tensor(c, 1, "the indices"))
        return FVM_ERR_TYPE;
    fvm_dtype it = c->args[1]->u.tensor.dtype;
    if (it != FVM_DTYPE_I32 && it != FVM_DTYPE_I64)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "indices must be i32 or i64, found %s", fvm_rtype(c, c->args[1]));
    fvm_dims dims;
    int ax;
    if (fvm_shape_gather(&c->args[0]->u.tensor.dims, &c->args[1]->u.tensor.dims, c->in->a.axis, &dims, &ax, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_INSTR);
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* ---- random numbers --------------------------------------------------------- */

static const fvm_type *key_type(fvm_rctx *c)
{
    fvm_dims d = {.rank = 1, .d = {2}};
    return fvm_rule_tensor(c, FVM_DTYPE_U32, &d);
}

fvm_status rule_random_key(fvm_rctx *c, const fvm_type **out)
{
    if (!is_int_scalar(c->args[0]))
        return fvm_rerr(c, 0, FVM_ERR_TYPE,
                        "the seed must be an integer scalar (u8[], i32[], i64[] or u32[]), found %s",
                        fvm_rtype(c, c->args[0]));
    *out = key_type(c);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_random_split(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_key(c, 0))
        return FVM_ERR_TYPE;
    int64_t n = (c->in->a.present & A(N)) ? c->in->a.n : 2;
    fvm_dims d = {.rank = 2, .d = {n, 2}};
    *out = fvm_rule_tensor(c, FVM_DTYPE_U32, &d);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_random_fold_in(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_key(c, 0))
        return FVM_ERR_TYPE;
    if (!is_int_scalar(c->args[1]))
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the data must be an integer scalar, found %s", fvm_rtype(c, c->args[1]));
    *out = key_type(c);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_random_draw(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_key(c, 0))
        return FVM_ERR_TYPE;
    const fvm_attrs *a = &c->in->a;
    fvm_dtype dt = (a->present & A(DTYPE)) ? a->dtype : FVM_DTYPE_F32;
    fvm_dims dims;
    if (static_shape(c, &a->shape, dt, &dims))
        return FVM_ERR_TYPE;
    *out = fvm_rule_tensor(c, dt, &dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* ---- structs and control flow ----------------------------------------------- */

fvm_status rule_struct(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    if ((a->present & A(NAMES)) && a->names.n != c->nargs)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "names has %d entries for %d arguments", a->names.n, c->nargs);
    *out = fvm_type_struct(c->a, c->nargs, (a->present & A(NAMES)) ? a->names.v : NULL, c->args);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status fed_out(fvm_rctx *c, const fvm_type *m, fvm_placement pl, bool all_equal, const fvm_type **out);

fvm_status rule_field(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    const fvm_type *t = c->args[0], *placed = NULL;
    if (t->kind == FVM_T_FED) { /* a field of each member: lowered to federated_apply or _map (passes.c) */
        if (t->u.fed.pl == FVM_PL_CLIENTS && t->u.fed.all_equal)
            return fvm_rerr(c, 0, FVM_ERR_PLACEMENT,
                            "a field of an all-equal %s: take the field before federated_broadcast, or of "
                            "{T}@CLIENTS values",
                            fvm_rtype(c, t));
        placed = t;
        t = t->u.fed.member;
    }
    if (t->kind != FVM_T_STRUCT)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expected a struct, found %s", fvm_rtype(c, placed ? placed : t));
    bool by_name = (a->present & A(NAME)) != 0, by_index = (a->present & A(INDEX)) != 0;
    if (by_name == by_index)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "give exactly one of \"name\" or \"index\"");
    int64_t i = a->index;
    if (by_name) {
        i = fvm_type_field_index(t, a->name);
        if (i < 0) {
            char names[256] = "";
            for (int k = 0; k < t->u.strct.n; k++) {
                if (!t->u.strct.names[k])
                    continue;
                if (names[0])
                    strncat(names, ", ", sizeof names - strlen(names) - 1);
                strncat(names, t->u.strct.names[k], sizeof names - strlen(names) - 1);
            }
            return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_NAME, "%s has no field named '%s' (its fields: %s)",
                            fvm_rtype(c, t), a->name, names[0] ? names : "none named; select by index");
        }
    } else if (i >= t->u.strct.n) {
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "index %lld is out of range for %s (%d fields)", (long long)i,
                        fvm_rtype(c, t), t->u.strct.n);
    }
    c->in->a.index = i; /* the runtime selects by index */
    if (placed)
        return fed_out(c, t->u.strct.elems[i], placed->u.fed.pl, placed->u.fed.all_equal, out);
    *out = t->u.strct.elems[i];
    return FVM_OK;
}

fvm_status rule_call(fvm_rctx *c, const fvm_type **out)
{
    const fvm_func *fn = c->in->a.fn;
    fvm_status s = want_fn(c, "fn", fn, c->nargs, c->args, false);
    if (s)
        return fn->ok ? s : (*out = NULL, FVM_OK);
    *out = fn->result_type;
    return FVM_OK;
}

static bool is_bool_scalar(const fvm_type *t)
{
    return t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_BOOL && t->u.tensor.dims.rank == 0;
}

fvm_status rule_cond(fvm_rctx *c, const fvm_type **out)
{
    const fvm_func *t = c->in->a.then_fn, *e = c->in->a.else_fn;
    if (!is_bool_scalar(c->args[0]))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "the predicate must be bool[], found %s", fvm_rtype(c, c->args[0]));
    if (!t->ok || !e->ok)
        return *out = NULL, FVM_OK;
    if (want_fn(c, "then", t, c->nargs - 1, c->args + 1, false) ||
        want_fn(c, "else", e, c->nargs - 1, c->args + 1, false))
        return FVM_ERR_TYPE;
    if (!fvm_type_equal(t->result_type, e->result_type))
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "then returns %s but else returns %s",
                        fvm_rtype(c, t->result_type), fvm_rtype(c, e->result_type));
    *out = t->result_type;
    return FVM_OK;
}

fvm_status rule_fori(fvm_rctx *c, const fvm_type **out)
{
    const fvm_func *fn = c->in->a.fn;
    if (!fn->ok)
        return *out = NULL, FVM_OK;
    const fvm_type *ts[64];
    if (c->nargs + 1 > 64)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_LIMIT, "too many arguments");
    ts[0] = fvm_type_scalar(c->a, FVM_DTYPE_I32);
    for (int i = 0; i < c->nargs; i++)
        ts[i + 1] = c->args[i];
    if (want_fn(c, "fn", fn, c->nargs + 1, ts, false))
        return FVM_ERR_TYPE;
    if (want_result(c, "fn", fn, fn->param_types[1], "the loop state, its second parameter"))
        return FVM_ERR_TYPE;
    *out = fn->param_types[1];
    return FVM_OK;
}

fvm_status rule_while(fvm_rctx *c, const fvm_type **out)
{
    const fvm_func *cond = c->in->a.cond_fn, *body = c->in->a.body_fn;
    if (!cond->ok || !body->ok)
        return *out = NULL, FVM_OK;
    if (want_fn(c, "cond", cond, c->nargs, c->args, false) || want_fn(c, "body", body, c->nargs, c->args, false))
        return FVM_ERR_TYPE;
    if (!is_bool_scalar(cond->result_type))
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "cond function '%s' must return bool[], returns %s",
                        cond->name, fvm_rtype(c, cond->result_type));
    if (want_result(c, "body", body, body->param_types[0], "the loop state, its first parameter"))
        return FVM_ERR_TYPE;
    *out = body->param_types[0];
    return FVM_OK;
}

/* ---- sequences ---------------------------------------------------------------- */

static fvm_status want_seq(fvm_rctx *c, int i)
{
    if (c->args[i]->kind == FVM_T_SEQ)
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_TYPE, "expected a sequence T*, found %s", fvm_rtype(c, c->args[i]));
}

/* fn, local, takes an element of the sequence (argument 0) and the other
 * arguments: sequence_map's and sequence_filter's function. *ok false when fn
 * failed its own check (reported there). */
static fvm_status want_elem_fn(fvm_rctx *c, bool *ok)
{
    *ok = false;
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    const fvm_func *fn = c->in->a.fn;
    if (!fn->ok)
        return FVM_OK;
    const fvm_type *ts[64];
    if (c->nargs > 64)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_LIMIT, "too many arguments");
    ts[0] = c->args[0]->u.seq.elem;
    for (int i = 1; i < c->nargs; i++)
        ts[i] = c->args[i];
    if (want_fn(c, "fn", fn, c->nargs, ts, true))
        return FVM_ERR_TYPE;
    *ok = true;
    return FVM_OK;
}

fvm_status rule_sequence_map(fvm_rctx *c, const fvm_type **out)
{
    bool ok;
    fvm_status s = want_elem_fn(c, &ok);
    if (s || !ok)
        return *out = NULL, s;
    *out = fvm_type_seq(c->a, c->in->a.fn->result_type);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_sequence_reduce(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    const fvm_func *fn = c->in->a.fn;
    if (!fn->ok)
        return *out = NULL, FVM_OK;
    const fvm_type *ts[64];
    if (c->nargs > 64)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_LIMIT, "too many arguments");
    ts[0] = c->args[1];
    ts[1] = c->args[0]->u.seq.elem;
    for (int i = 2; i < c->nargs; i++)
        ts[i] = c->args[i];
    if (want_fn(c, "fn", fn, c->nargs, ts, true))
        return FVM_ERR_TYPE;
    if (want_result(c, "fn", fn, fn->param_types[0], "the accumulator, its first parameter"))
        return FVM_ERR_TYPE;
    *out = fn->param_types[0];
    return FVM_OK;
}

fvm_status rule_sequence_sum(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    const fvm_type *e = c->args[0]->u.seq.elem;
    if (!fvm_type_is_tensor_tree(e) || !fvm_type_all_leaves(e, is_numeric))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects a sequence of numeric tensors or structs of them, found %s",
                        fvm_rtype(c, c->args[0]));
    *out = e;
    return FVM_OK;
}

fvm_status rule_sequence_length(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    *out = fvm_type_scalar(c->a, FVM_DTYPE_I32);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static const fvm_type *batched(fvm_rctx *c, const fvm_type *t, int64_t lead)
{
    if (t->kind == FVM_T_TENSOR) {
        if (t->u.tensor.dims.rank == FVM_MAX_RANK)
            return NULL;
        fvm_dims d = {.rank = t->u.tensor.dims.rank + 1};
        d.d[0] = lead;
        memcpy(d.d + 1, t->u.tensor.dims.d, sizeof(int64_t) * (size_t)t->u.tensor.dims.rank);
        return fvm_rule_tensor(c, t->u.tensor.dtype, &d);
    }
    const fvm_type **fs = fvm_arena_array(c->a, (size_t)t->u.strct.n + 1, sizeof *fs);
    if (!fs)
        return NULL;
    for (int i = 0; i < t->u.strct.n; i++)
        if (!(fs[i] = batched(c, t->u.strct.elems[i], lead)))
            return NULL;
    return fvm_type_struct(c->a, t->u.strct.n, t->u.strct.names, fs);
}

fvm_status rule_batch(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    const fvm_type *e = c->args[0]->u.seq.elem;
    if (!fvm_type_is_tensor_tree(e))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects a sequence of tensors or structs of tensors, found %s",
                        fvm_rtype(c, c->args[0]));
    int64_t size = c->in->a.size;
    const fvm_type *b = batched(c, e, c->in->a.drop_remainder ? size : -1);
    if (!b)
        return fvm_rerr(c, 0, FVM_ERR_LIMIT, "batching would exceed rank %d", FVM_MAX_RANK);
    *out = fvm_type_seq(c->a, b);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* ---- federated intrinsics ----------------------------------------------------- */

static bool at_clients(const fvm_type *t)
{
    return t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS;
}

static bool at_server(const fvm_type *t)
{
    return t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_SERVER;
}

static fvm_status want_clients(fvm_rctx *c, int i)
{
    if (at_clients(c->args[i]))
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_PLACEMENT, "expected a value placed at CLIENTS ({T}@CLIENTS), found %s",
                    fvm_rtype(c, c->args[i]));
}

static fvm_status want_server(fvm_rctx *c, int i)
{
    if (at_server(c->args[i]))
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_PLACEMENT, "expected a value placed at SERVER (T@SERVER), found %s%s",
                    fvm_rtype(c, c->args[i]),
                    at_clients(c->args[i]) ? "; a client value reaches the server only through an aggregation "
                                             "(federated_sum, federated_mean, ...)"
                                           : "");
}

static fvm_status want_unplaced(fvm_rctx *c, int i, const char *what)
{
    if (!fvm_type_is_placed(c->args[i]))
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_PLACEMENT, "%s must be unplaced, found %s", what, fvm_rtype(c, c->args[i]));
}

static fvm_status fed_out(fvm_rctx *c, const fvm_type *m, fvm_placement pl, bool all_equal, const fvm_type **out)
{
    *out = fvm_type_fed(c->a, m, pl, all_equal);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_federated_value(fvm_rctx *c, const fvm_type **out)
{
    if (want_unplaced(c, 0, "the value"))
        return FVM_ERR_PLACEMENT;
    return fed_out(c, c->args[0], c->in->a.placement, true, out);
}

fvm_status rule_federated_eval(fvm_rctx *c, const fvm_type **out)
{
    const fvm_func *fn = c->in->a.fn;
    if (!fn->ok)
        return *out = NULL, FVM_OK;
    if (want_fn(c, "fn", fn, 0, NULL, true))
        return FVM_ERR_TYPE;
    fvm_placement pl = c->in->a.placement;
    return fed_out(c, fn->result_type, pl, pl == FVM_PL_SERVER, out);
}

fvm_status rule_federated_broadcast(fvm_rctx *c, const fvm_type **out)
{
    if (want_server(c, 0))
        return FVM_ERR_PLACEMENT;
    return fed_out(c, c->args[0]->u.fed.member, FVM_PL_CLIENTS, true, out);
}

/* select_keys(keys i32[n], max_key i32[], v T), fn (T, i32[]) -> U: the sequence of fn(v, key), U*.
 * The types of federated_select's members are the same (ts: keys, max_key, v). */
static fvm_status select_keys(fvm_rctx *c, const fvm_type *const *ts, const fvm_type **out)
{
    const fvm_type *keys = ts[0], *max = ts[1];
    if (keys->kind != FVM_T_TENSOR || keys->u.tensor.dtype != FVM_DTYPE_I32 || keys->u.tensor.dims.rank != 1)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "the keys must be a list of keys, i32[n], found %s", fvm_rtype(c, keys));
    if (max->kind != FVM_T_TENSOR || max->u.tensor.dtype != FVM_DTYPE_I32 || max->u.tensor.dims.rank != 0)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the key bound must be i32[], found %s", fvm_rtype(c, max));
    const fvm_func *fn = c->in->a.fn;
    if (!fn->ok)
        return *out = NULL, FVM_OK;
    const fvm_type *fts[2] = {ts[2], fvm_type_scalar(c->a, FVM_DTYPE_I32)};
    if (!fts[1])
        return FVM_ERR_NOMEM;
    if (want_fn(c, "fn", fn, 2, fts, true))
        return FVM_ERR_TYPE;
    *out = fvm_type_seq(c->a, fn->result_type);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_select_keys(fvm_rctx *c, const fvm_type **out)
{
    return select_keys(c, c->args, out);
}

/* federated_select(keys {i32[n]}@CLIENTS, max_key i32[]@SERVER, v T@SERVER): each client's
 * select_keys, {U*}@CLIENTS. */
fvm_status rule_federated_select(fvm_rctx *c, const fvm_type **out)
{
    if (want_clients(c, 0) || want_server(c, 1) || want_server(c, 2))
        return FVM_ERR_PLACEMENT;
    const fvm_type *ts[3] = {c->args[0]->u.fed.member, c->args[1]->u.fed.member, c->args[2]->u.fed.member};
    const fvm_type *seq = NULL;
    fvm_status s = select_keys(c, ts, &seq);
    if (s || !seq)
        return *out = NULL, s;
    return fed_out(c, seq, FVM_PL_CLIENTS, false, out);
}

/* fn over members at one placement: federated_map (clients, any), federated_map_all_equal (clients,
 * every argument all-equal: so is the result) and federated_apply (server). */
static fvm_status placed_call(fvm_rctx *c, bool clients, bool all_equal, const fvm_type **out)
{
    const fvm_func *fn = c->in->a.fn;
    const fvm_type *ts[64];
    if (c->nargs > 64)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_LIMIT, "too many arguments");
    for (int i = 0; i < c->nargs; i++) {
        if (clients ? want_clients(c, i) : want_server(c, i))
            return FVM_ERR_PLACEMENT;
        if (all_equal && !c->args[i]->u.fed.all_equal)
            return fvm_rerr(c, i, FVM_ERR_PLACEMENT,
                            "takes values that are the same at every client (T@CLIENTS); '%s' is %s, one value "
                            "per client: map it with federated_map",
                            c->in->arg_names[i], fvm_rtype(c, c->args[i]));
        ts[i] = c->args[i]->u.fed.member;
    }
    if (!fn->ok)
        return *out = NULL, FVM_OK;
    if (want_fn(c, "fn", fn, c->nargs, ts, true))
        return FVM_ERR_TYPE;
    return fed_out(c, fn->result_type, clients ? FVM_PL_CLIENTS : FVM_PL_SERVER, all_equal || !clients, out);
}

fvm_status rule_federated_map(fvm_rctx *c, const fvm_type **out)
{
    return placed_call(c, true, false, out);
}

fvm_status rule_federated_map_all_equal(fvm_rctx *c, const fvm_type **out)
{
    return placed_call(c, true, true, out);
}

fvm_status rule_federated_apply(fvm_rctx *c, const fvm_type **out)
{
    return placed_call(c, false, false, out);
}

fvm_status rule_federated_zip(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    if ((a->present & A(NAMES)) && a->names.n != c->nargs)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "names has %d entries for %d arguments", a->names.n, c->nargs);
    bool clients = at_clients(c->args[0]), all_equal = true;
    const fvm_type **ms = fvm_arena_array(c->a, (size_t)c->nargs + 1, sizeof *ms);
    if (!ms)
        return FVM_ERR_NOMEM;
    for (int i = 0; i < c->nargs; i++) {
        if (clients ? want_clients(c, i) : want_server(c, i))
            return FVM_ERR_PLACEMENT;
        ms[i] = c->args[i]->u.fed.member;
        all_equal = all_equal && c->args[i]->u.fed.all_equal;
    }
    const fvm_type *m = fvm_type_struct(c->a, c->nargs, (a->present & A(NAMES)) ? a->names.v : NULL, ms);
    if (!m)
        return FVM_ERR_NOMEM;
    return fed_out(c, m, clients ? FVM_PL_CLIENTS : FVM_PL_SERVER, clients ? all_equal : true, out);
}

static fvm_status aggregand(fvm_rctx *c, int i, bool (*pred)(fvm_dtype), const char *what)
{
    if (want_clients(c, i))
        return FVM_ERR_PLACEMENT;
    const fvm_type *m = c->args[i]->u.fed.member;
    if (!fvm_type_is_tensor_tree(m) || !fvm_type_all_leaves(m, pred))
        return fvm_rerr(c, i, FVM_ERR_TYPE,
                        "expects client values that are %s (tensors or structs of them), "
                        "found %s",
                        what, fvm_rtype(c, c->args[i]));
    return FVM_OK;
}

fvm_status rule_federated_sum(fvm_rctx *c, const fvm_type **out)
{
    if (aggregand(c, 0, is_numeric, "numeric"))
        return FVM_ERR_TYPE;
    return fed_out(c, c->args[0]->u.fed.member, FVM_PL_SERVER, true, out);
}

fvm_status rule_federated_mean(fvm_rctx *c, const fvm_type **out)
{
    if (aggregand(c, 0, fvm_dtype_is_float, "floats"))
        return FVM_ERR_TYPE;
    return fed_out(c, c->args[0]->u.fed.member, FVM_PL_SERVER, true, out);
}

fvm_status rule_federated_weighted_mean(fvm_rctx *c, const fvm_type **out)
{
    if (aggregand(c, 0, fvm_dtype_is_float, "floats") || want_clients(c, 1))
        return FVM_ERR_TYPE;
    const fvm_type *w = c->args[1]->u.fed.member;
    if (w->kind != FVM_T_TENSOR || w->u.tensor.dims.rank != 0 || !fvm_dtype_is_float(w->u.tensor.dtype))
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the weight must be a float scalar per client ({f32[]}@CLIENTS), found %s",
                        fvm_rtype(c, c->args[1]));
    return fed_out(c, c->args[0]->u.fed.member, FVM_PL_SERVER, true, out);
}

fvm_status rule_federated_minmax(fvm_rctx *c, const fvm_type **out)
{
    if (aggregand(c, 0, is_numeric, "numeric"))
        return FVM_ERR_TYPE;
    return fed_out(c, c->args[0]->u.fed.member, FVM_PL_SERVER, true, out);
}

fvm_status rule_federated_aggregate(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    if (want_clients(c, 0) || want_unplaced(c, 1, "the zero (the accumulator's initial value)"))
        return FVM_ERR_PLACEMENT;
    if (!a->accumulate->ok || !a->merge->ok || (a->report && !a->report->ok))
        return *out = NULL, FVM_OK;
    const fvm_type *u = c->args[1], *t = c->args[0]->u.fed.member;
    const fvm_type *acc_args[2] = {u, t}, *merge_args[2] = {u, u};
    if (want_fn(c, "accumulate", a->accumulate, 2, acc_args, true) ||
        want_result(c, "accumulate", a->accumulate, u, "the accumulator type, that of the zero") ||
        want_fn(c, "merge", a->merge, 2, merge_args, true) ||
        want_result(c, "merge", a->merge, u, "the accumulator type, that of the zero"))
        return FVM_ERR_TYPE;
    const fvm_type *r = u;
    if (a->report) {
        if (want_fn(c, "report", a->report, 1, &u, true))
            return FVM_ERR_TYPE;
        r = a->report->result_type;
    }
    /* Partials from accumulate and merge flow into merge and report too. */
    if (!fvm_type_equal(a->accumulate->result_type, u) || !fvm_type_equal(a->merge->result_type, u)) {
        a->merge->entry_check = true;
        if (a->report)
            a->report->entry_check = true;
    }
    return fed_out(c, r, FVM_PL_SERVER, true, out);
}

fvm_status rule_federated_secure_sum_bitwidth(fvm_rctx *c, const fvm_type **out)
{
    if (aggregand(c, 0, fvm_dtype_is_int, "integers (u8, i32, i64, u32)"))
        return FVM_ERR_TYPE;
    int64_t bw = c->in->a.bitwidth;
    const fvm_type *m = c->args[0]->u.fed.member;
    /* The narrowest leaf bounds the bitwidth: the modular sum must fit its dtype. */
    int maxbw = fvm_modsum_bits(m);
    if (bw > maxbw)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "bitwidth must be between 1 and %d for %s, found %lld", maxbw,
                        fvm_rtype(c, m), (long long)bw);
    return fed_out(c, m, FVM_PL_SERVER, true, out);
}

/* The secure sums with a bound of their own (a modulus, a max_input): at most
 * the largest value of the narrowest integer leaf (plus one for a modulus,
 * whose residues go up to modulus - 1), so every result fits every leaf. */
static fvm_status secure_bound(fvm_rctx *c, const char *attr, int64_t v, uint64_t plus, const fvm_type **out)
{
    if (aggregand(c, 0, fvm_dtype_is_int, "integers (u8, i32, i64, u32)"))
        return FVM_ERR_TYPE;
    const fvm_type *m = c->args[0]->u.fed.member;
    uint64_t hi = fvm_int_leaf_max(m);
    if (hi <= (uint64_t)INT64_MAX - plus)
        hi += plus;
    if ((uint64_t)v > hi)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE,
                        "%s must be at most %llu for %s (the largest value its narrowest integer dtype holds%s), "
                        "found %lld",
                        attr, (unsigned long long)hi, fvm_rtype(c, m), plus ? ", plus one" : "", (long long)v);
    return fed_out(c, m, FVM_PL_SERVER, true, out);
}

fvm_status rule_federated_secure_modular_sum(fvm_rctx *c, const fvm_type **out)
{
    return secure_bound(c, "modulus", c->in->a.modulus, 1, out);
}

fvm_status rule_federated_secure_sum(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    return secure_bound(c, "max_input", (a->present & A(MAX_INPUT)) ? a->max_input : 0, 0, out);
}

/* fields never reaches a type rule: the loader makes a destructuring one
 * field instruction per bound name (format/ir_read.c). */
fvm_status rule_fields(fvm_rctx *c, const fvm_type **out)
{
    return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_USAGE, "internal: fields is taken apart by the loader");
}

/* ---- shapes from other values (the ops gradients need) ------------------------------ */

fvm_status rule_expand_dims(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the operand"))
        return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[0]->u.tensor.dims;
    const fvm_ints *axes = &c->in->a.axes;
    int r = x->rank + axes->n;
    if (r > FVM_MAX_RANK)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "the result would have rank %d, more than %d", r,
                        FVM_MAX_RANK);
    unsigned ins = 0;
    for (int i = 0; i < axes->n; i++) {
        int64_t ax = axes->v[i] < 0 ? axes->v[i] + r : axes->v[i];
        if (ax < 0 || ax >= r || (ins & (1u << ax)))
            return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "axes must be distinct axes of the rank-%d result", r);
        ins |= 1u << ax;
    }
    fvm_dims d = {.rank = r};
    for (int i = 0, k = 0; i < r; i++)
        d.d[i] = (ins & (1u << i)) ? 1 : x->d[k++];
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &d);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* A tensor of shape 'like' summed from 'ct' (the reverse of broadcasting). */
static fvm_status unbroadcast_type(fvm_rctx *c, const fvm_type *ct, const fvm_type *like, const fvm_type **out)
{
    if (like->kind == FVM_T_STRUCT) {
        if (ct->kind != FVM_T_STRUCT || ct->u.strct.n != like->u.strct.n)
            return fvm_rerr(c, 0, FVM_ERR_TYPE, "%s cannot be summed to the shape of %s", fvm_rtype(c, ct),
                            fvm_rtype(c, like));
        for (int i = 0; i < like->u.strct.n; i++) {
            const fvm_type *f;
            if (unbroadcast_type(c, ct->u.strct.elems[i], like->u.strct.elems[i], &f))
                return FVM_ERR_TYPE;
        }
        *out = like;
        return FVM_OK;
    }
    if (like->kind != FVM_T_TENSOR || !fvm_type_is_tensor_tree(ct))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expects tensors or structs of tensors, found %s and %s", fvm_rtype(c, ct),
                        fvm_rtype(c, like));
    if (ct->kind == FVM_T_STRUCT) { /* a tensor broadcast to every leaf: the leaves' sums add up */
        for (int i = 0; i < ct->u.strct.n; i++) {
            const fvm_type *f;
            if (unbroadcast_type(c, ct->u.strct.elems[i], like, &f))
                return FVM_ERR_TYPE;
        }
        *out = like;
        return FVM_OK;
    }
    fvm_dims b;
    if (ct->u.tensor.dtype != like->u.tensor.dtype)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "dtypes differ: %s and %s", fvm_rtype(c, ct), fvm_rtype(c, like));
    if (fvm_dims_broadcast(&ct->u.tensor.dims, &like->u.tensor.dims, &b, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, 0);
    *out = like;
    return FVM_OK;
}

fvm_status rule_unbroadcast(fvm_rctx *c, const fvm_type **out)
{
    return unbroadcast_type(c, c->args[0], c->args[1], out);
}

static fvm_status leaf_broadcast_like(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    fvm_dims b;
    if (fvm_dims_broadcast(&ts[0]->u.tensor.dims, &ts[1]->u.tensor.dims, &b, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, 0);
    *out = fvm_rule_tensor(c, ts[0]->u.tensor.dtype, &b);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status leaf_reshape_like(fvm_rctx *c, const fvm_type *const *ts, int n, const fvm_type **out)
{
    int64_t a = fvm_dims_count(&ts[0]->u.tensor.dims), b = fvm_dims_count(&ts[1]->u.tensor.dims);
    if (a >= 0 && b >= 0 && a != b)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE, "%s and %s have different element counts", fvm_rtype(c, ts[0]),
                        fvm_rtype(c, ts[1]));
    *out = fvm_rule_tensor(c, ts[0]->u.tensor.dtype, &ts[1]->u.tensor.dims);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

LIFTED_RULE_DEF(rule_broadcast_like, leaf_broadcast_like)
LIFTED_RULE_DEF(rule_reshape_like, leaf_reshape_like)

fvm_status rule_unslice(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the cotangent") || fvm_rule_want_tensor(c, 1, "the shape model"))
        return FVM_ERR_TYPE;
    const fvm_type *ct = c->args[0], *like = c->args[1];
    const fvm_attrs *a = &c->in->a;
    fvm_dims dims;
    int64_t start[FVM_MAX_RANK], step[FVM_MAX_RANK];
    if (fvm_shape_slice(&like->u.tensor.dims, (a->present & A(START)) ? &a->start : NULL,
                        (a->present & A(STOP)) ? &a->stop : NULL, (a->present & A(STEP)) ? &a->step : NULL, &dims,
                        start, step, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    fvm_type sliced = {.kind = FVM_T_TENSOR, .u.tensor = {ct->u.tensor.dtype, dims}};
    if (ct->u.tensor.dtype != like->u.tensor.dtype || !fvm_type_compatible(ct, &sliced))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expected the slice's shape %s, found %s", fvm_rtype(c, &sliced),
                        fvm_rtype(c, ct));
    *out = like;
    return FVM_OK;
}

/* ---- scans and sequence helpers -------------------------------------------------------- */

/* <name1=a, name2=b*> */
static const fvm_type *with_history(fvm_rctx *c, const char *n1, const char *n2, const fvm_type *t)
{
    const fvm_type *seq = fvm_type_seq(c->a, t);
    if (!seq)
        return NULL;
    if (fvm_type_is_placed(t)) {
        fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_PLACEMENT,
                 "the loop state %s is placed; a scan keeps its states in "
                 "a sequence, which cannot hold placed values",
                 fvm_rtype(c, t));
        return NULL;
    }
    const char *names[2] = {n1, n2};
    const fvm_type *elems[2] = {t, seq};
    return fvm_type_struct(c->a, 2, names, elems);
}

fvm_status rule_scan(fvm_rctx *c, const fvm_type **out)
{
    const fvm_type *s;
    fvm_status st = rule_fori(c, &s);
    if (st || !s)
        return *out = NULL, st;
    *out = with_history(c, "state", "states", s);
    return *out ? FVM_OK : FVM_ERR_TYPE;
}

fvm_status rule_sequence_scan(fvm_rctx *c, const fvm_type **out)
{
    const fvm_type *u;
    fvm_status st = rule_sequence_reduce(c, &u);
    if (st || !u)
        return *out = NULL, st;
    *out = with_history(c, "acc", "accs", u);
    return *out ? FVM_OK : FVM_ERR_TYPE;
}

fvm_status rule_sequence_get(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    if (!is_int_scalar(c->args[1]))
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the index must be an integer scalar, found %s", fvm_rtype(c, c->args[1]));
    *out = c->args[0]->u.seq.elem;
    return FVM_OK;
}

fvm_status rule_sequence_zip(fvm_rctx *c, const fvm_type **out)
{
    const fvm_attrs *a = &c->in->a;
    if ((a->present & A(NAMES)) && a->names.n != c->nargs)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "names has %d entries for %d arguments", a->names.n, c->nargs);
    const fvm_type **es = fvm_arena_array(c->a, (size_t)c->nargs + 1, sizeof *es);
    if (!es)
        return FVM_ERR_NOMEM;
    for (int i = 0; i < c->nargs; i++) {
        if (want_seq(c, i))
            return FVM_ERR_TYPE;
        es[i] = c->args[i]->u.seq.elem;
    }
    const fvm_type *s = fvm_type_struct(c->a, c->nargs, (a->present & A(NAMES)) ? a->names.v : NULL, es);
    *out = s ? fvm_type_seq(c->a, s) : NULL;
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_sequence_reverse(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    *out = c->args[0];
    return FVM_OK;
}

/* sequence_take and sequence_skip: the sequence's own type. */
fvm_status rule_sequence_take(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_sequence_filter(fvm_rctx *c, const fvm_type **out)
{
    bool ok;
    fvm_status s = want_elem_fn(c, &ok);
    if (s || !ok)
        return *out = NULL, s;
    const fvm_func *fn = c->in->a.fn;
    if (!is_bool_scalar(fn->result_type))
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE,
                        "fn function '%s' must return bool[] (true keeps the element), but returns %s", fn->name,
                        fvm_rtype(c, fn->result_type));
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_sequence_shuffle(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    if (fvm_rule_want_key(c, 1))
        return FVM_ERR_TYPE;
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_sequence_repeat(fvm_rctx *c, const fvm_type **out)
{
    if (want_seq(c, 0))
        return FVM_ERR_TYPE;
    *out = c->args[0];
    return FVM_OK;
}

/* ---- automatic differentiation --------------------------------------------------------- */

static bool is_float_scalar(const fvm_type *t)
{
    if (t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_SERVER)
        t = t->u.fed.member;
    return t->kind == FVM_T_TENSOR && t->u.tensor.dims.rank == 0 && fvm_dtype_is_float(t->u.tensor.dtype);
}

/* grad / value_and_grad / vjp / jvp: the type of fn's derivative for the parameter wrt (the pass
 * after checking derives it: vm/transform/passes.h). */
fvm_status rule_grad(fvm_rctx *c, const fvm_type **out)
{
    fvm_func *fn = c->in->a.fn;
    fvm_op op = c->in->op;
    if (!fn->ok)
        return *out = NULL, FVM_OK;
    if (fn->nparams == 0)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "function '%s' has no parameter to differentiate", fn->name);
    if (fn->nparams > 64)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_LIMIT, "function '%s' has more than 64 parameters", fn->name);
    int wrt = 0;
    if (c->in->a.present & A(WRT)) {
        for (wrt = 0; wrt < fn->nparams && strcmp(fn->param_names[wrt], c->in->a.wrt); wrt++)
            ;
        if (wrt == fn->nparams)
            return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_NAME, "function '%s' has no parameter '%s'", fn->name,
                            c->in->a.wrt);
    }
    bool jvp = op == FVM_OP_JVP;
    int n = fn->nparams + (op == FVM_OP_VJP || jvp);
    if (c->nargs != n)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE, "takes %s's %d arguments%s, found %d", fn->name, fn->nparams,
                        op == FVM_OP_VJP ? " and the cotangent of its result"
                        : jvp            ? " and the tangent of the differentiated parameter"
                                         : "",
                        c->nargs);
    if (want_fn(c, "fn", fn, fn->nparams, c->args, false))
        return FVM_ERR_TYPE;
    const fvm_type *wt = fn->param_types[wrt];
    if (fvm_check_wrt(fn, wrt, c->d, NULL))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_ATTRS);
    if (op == FVM_OP_VJP) {
        const fvm_type *ct = fvm_type_cotangent(c->a, fn->result_type);
        if (!ct || !fvm_type_compatible(c->args[n - 1], ct))
            return fvm_rerr(c, n - 1, FVM_ERR_TYPE, "the cotangent of '%s''s result must be %s, found %s", fn->name,
                            fvm_rtype(c, ct), fvm_rtype(c, c->args[n - 1]));
    } else if (jvp) {
        const fvm_type *tt = fvm_type_cotangent(c->a, wt), *rt = fvm_type_cotangent(c->a, fn->result_type);
        if (!tt || !rt)
            return FVM_ERR_NOMEM;
        if (!fvm_type_compatible(c->args[n - 1], tt))
            return fvm_rerr(c, n - 1, FVM_ERR_TYPE, "the tangent of '%s''s parameter '%s' must be %s, found %s",
                            fn->name, fn->param_names[wrt], fvm_rtype(c, tt), fvm_rtype(c, c->args[n - 1]));
        const char *names[2] = {"value", "tangent"};
        const fvm_type *elems[2] = {fn->result_type, rt};
        *out = fvm_type_struct(c->a, 2, names, elems);
        return *out ? FVM_OK : FVM_ERR_NOMEM;
    } else if (c->in->a.has_aux) {
        const fvm_type *r = fn->result_type;
        if (r->kind != FVM_T_STRUCT || r->u.strct.n != 2 || !is_float_scalar(r->u.strct.elems[0]))
            return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE,
                            "with has_aux needs a function returning <value=f32[], aux=A> (a float scalar, or "
                            "one at the server, and anything beside it); '%s' returns %s",
                            fn->name, fvm_rtype(c, r));
    } else if (!is_float_scalar(fn->result_type)) {
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE,
                        "needs a function returning a float scalar (f32[] or "
                        "f32[]@SERVER); '%s' returns %s (use vjp for other results, or has_aux for <value, aux>)",
                        fn->name, fvm_rtype(c, fn->result_type));
    }
    const fvm_type *g = fvm_type_cotangent(c->a, wt);
    if (!g)
        return FVM_ERR_NOMEM;
    if (op != FVM_OP_VALUE_AND_GRAD && !c->in->a.has_aux) {
        *out = g;
        return FVM_OK;
    }
    /* value_and_grad: <value=R, grad=G> (R = <value, aux> with has_aux); grad with has_aux: <grad=G, aux=A> */
    bool vg = op == FVM_OP_VALUE_AND_GRAD;
    const char *names[2] = {vg ? "value" : "grad", vg ? "grad" : "aux"};
    const fvm_type *elems[2] = {vg ? fn->result_type : g, vg ? g : fn->result_type->u.strct.elems[1]};
    *out = fvm_type_struct(c->a, 2, names, elems);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}
