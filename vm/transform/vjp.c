/* vjp.c - the reverse-mode rule of every op (the vjp column of ops.def): from the cotangent of an
 * op's result, the plain-IR instructions that give its arguments' cotangents. */
#include <string.h>

#include "autodiff.h"

#define OP(op, attrs, ...) FVM_AD(v->ad, FVM_OP_##op, attrs, __VA_ARGS__)

static fvm_doc *attrs(fvm_vjp *v)
{
    return fvm_ad_attrs(v->ad);
}

/* Fully known, equal types: no broadcasting happened. */
static bool static_same(const fvm_type *a, const fvm_type *b)
{
    if (!fvm_type_equal(a, b))
        return false;
    if (a->kind == FVM_T_TENSOR) {
        for (int i = 0; i < a->u.tensor.dims.rank; i++)
            if (a->u.tensor.dims.d[i] < 0)
                return false;
        return true;
    }
    if (a->kind == FVM_T_STRUCT) {
        for (int i = 0; i < a->u.strct.n; i++)
            if (!static_same(a->u.strct.elems[i], b->u.strct.elems[i]))
                return false;
        return true;
    }
    return false;
}

/* A cotangent shaped like the result, summed down to argument k's shape. */
static const char *to_arg(fvm_vjp *v, int k, const char *g)
{
    if (static_same(v->in->arg_types[k], v->in->type))
        return g;
    return OP(UNBROADCAST, NULL, g, v->x[k]);
}

static void set(fvm_vjp *v, int k, const char *g)
{
    if (v->want[k])
        v->dx[k] = g;
}

static const char *fn_op(fvm_vjp *v, fvm_op op, const char *key, const fvm_func *fn, int n, const char *const *args)
{
    if (!fn)
        return NULL;
    fvm_doc *o = attrs(v);
    fvm_ad_set_str(v->ad, o, key, fn->name);
    return fvm_ad_op(v->ad, op, o, n, args);
}

static const char *field_index(fvm_vjp *v, const char *s, int i)
{
    fvm_doc *o = attrs(v);
    fvm_ad_set_int(v->ad, o, "index", i);
    return OP(FIELD, o, s);
}

static fvm_dtype leaf_dtype(const fvm_type *t)
{
    while (t->kind == FVM_T_STRUCT && t->u.strct.n)
        t = t->u.strct.elems[0];
    if (t->kind == FVM_T_FED)
        return leaf_dtype(t->u.fed.member);
    return t->kind == FVM_T_TENSOR ? t->u.tensor.dtype : FVM_DTYPE_F32;
}

/* ---- no gradient / not differentiable ------------------------------------------------- */

fvm_status vjp_none(fvm_vjp *v)
{
    (void)v;
    return FVM_OK;
}

const char *fvm_vjp_unsupported_why(fvm_op op)
{
    switch (op) {
    case FVM_OP_FEDERATED_VALUE:
        return "its argument is unplaced, and no intrinsic brings a placed cotangent back to an unplaced value; "
               "differentiate with respect to a placed parameter instead (a T@SERVER value, broadcast with "
               "federated_broadcast)";
    case FVM_OP_WHILE:
        return "its number of iterations is known only at run time; write a fori";
    case FVM_OP_FEDERATED_AGGREGATE:
        return "write federated_map and federated_sum or federated_mean";
    case FVM_OP_SEQUENCE_TAKE:
    case FVM_OP_SEQUENCE_SKIP:
    case FVM_OP_SEQUENCE_FILTER:
        return "select data that does not depend on the differentiated parameter, then compute on it";
    default:
        return NULL;
    }
}

fvm_status vjp_unsupported(fvm_vjp *v)
{
    const char *why = fvm_vjp_unsupported_why(v->in->op);
    return fvm_ad_error(v, "it does not pass gradients%s%s", why ? "; " : "", why ? why : "");
}

/* ---- elementwise, unary ------------------------------------------------------------------ */

fvm_status vjp_neg(fvm_vjp *v)
{
    set(v, 0, OP(NEG, NULL, v->ct));
    return FVM_OK;
}

fvm_status vjp_abs(fvm_vjp *v)
{
    /* ct * sign(x): +ct where x > 0, -ct where x < 0, 0 at 0 */
    const char *z = OP(ZEROS_LIKE, NULL, v->x[0]), *zc = OP(ZEROS_LIKE, NULL, v->ct);
    const char *neg = OP(SELECT, NULL, OP(LT, NULL, v->x[0], z), OP(NEG, NULL, v->ct), zc);
    set(v, 0, OP(SELECT, NULL, OP(GT, NULL, v->x[0], z), v->ct, neg));
    return FVM_OK;
}

fvm_status vjp_exp(fvm_vjp *v)
{
    set(v, 0, OP(MUL, NULL, v->ct, v->y));
    return FVM_OK;
}

fvm_status vjp_log(fvm_vjp *v)
{
    set(v, 0, OP(DIV, NULL, v->ct, v->x[0]));
    return FVM_OK;
}

fvm_status vjp_log1p(fvm_vjp *v)
{
    set(v, 0, OP(DIV, NULL, v->ct, OP(ADD, NULL, OP(ONES_LIKE, NULL, v->x[0]), v->x[0]))); /* ct / (1 + x) */
    return FVM_OK;
}

fvm_status vjp_sqrt(fvm_vjp *v)
{
    set(v, 0, OP(DIV, NULL, v->ct, OP(ADD, NULL, v->y, v->y))); /* ct / (2 sqrt(x)) */
    return FVM_OK;
}

fvm_status vjp_sin(fvm_vjp *v)
{
    set(v, 0, OP(MUL, NULL, v->ct, OP(COS, NULL, v->x[0])));
    return FVM_OK;
}

fvm_status vjp_cos(fvm_vjp *v)
{
    set(v, 0, OP(NEG, NULL, OP(MUL, NULL, v->ct, OP(SIN, NULL, v->x[0]))));
    return FVM_OK;
}

fvm_status vjp_tanh(fvm_vjp *v)
{
    const char *one = OP(ONES_LIKE, NULL, v->y);
    set(v, 0, OP(MUL, NULL, v->ct, OP(SUB, NULL, one, OP(MUL, NULL, v->y, v->y))));
    return FVM_OK;
}

fvm_status vjp_sigmoid(fvm_vjp *v)
{
    const char *one = OP(ONES_LIKE, NULL, v->y);
    set(v, 0, OP(MUL, NULL, OP(MUL, NULL, v->ct, v->y), OP(SUB, NULL, one, v->y)));
    return FVM_OK;
}

fvm_status vjp_softplus(fvm_vjp *v)
{
    set(v, 0, OP(MUL, NULL, v->ct, OP(SIGMOID, NULL, v->x[0]))); /* softplus' = sigmoid */
    return FVM_OK;
}

/* a · c for a tree a of float type t and a constant c, in each leaf's dtype:
 * one constant when t has one dtype, else c as an f64 scalar through the
 * generated helper that casts it to each leaf's. */
static const char *times_const(fvm_vjp *v, const char *a, const fvm_type *t, double c)
{
    fvm_dtype dt;
    if (fvm_ad_one_float_dtype(t, &dt))
        return OP(MUL, NULL, a, fvm_ad_const(v->ad, c, dt));
    fvm_func *mul = fvm_ad_helper_fn(v->ad, FVM_AD_MUL, t, fvm_type_scalar(fvm_ad_arena(v->ad), FVM_DTYPE_F64), 0);
    const char *args[2] = {a, fvm_ad_const(v->ad, c, FVM_DTYPE_F64)};
    return fn_op(v, FVM_OP_CALL, "fn", mul, 2, args);
}

fvm_status vjp_erf(fvm_vjp *v)
{
    /* erf'(x) = 2/sqrt(pi) e^(-x^2) */
    const char *g = OP(EXP, NULL, OP(NEG, NULL, OP(MUL, NULL, v->x[0], v->x[0])));
    set(v, 0, times_const(v, OP(MUL, NULL, v->ct, g), v->in->type, 1.1283791670955126));
    return FVM_OK;
}

fvm_status vjp_relu(fvm_vjp *v)
{
    const char *pos = OP(GT, NULL, v->x[0], OP(ZEROS_LIKE, NULL, v->x[0]));
    set(v, 0, OP(SELECT, NULL, pos, v->ct, OP(ZEROS_LIKE, NULL, v->ct)));
    return FVM_OK;
}

/* The cotangent of cast's argument x of type t from ct (the same tree, of
 * the result's dtype): each float leaf cast back to its own dtype, and zeros
 * for the integer leaves (no gradient flows into integers). */
static const char *cast_back(fvm_vjp *v, const char *ct, const char *x, const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR) {
        if (!fvm_dtype_is_float(t->u.tensor.dtype))
            return OP(ZEROS_LIKE, NULL, x);
        fvm_doc *o = attrs(v);
        fvm_ad_set_str(v->ad, o, "dtype", fvm_dtype_name(t->u.tensor.dtype));
        return OP(CAST, o, ct);
    }
    int n = t->u.strct.n;
    const char **fs = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)n + 1, sizeof *fs);
    if (!fs)
        return NULL;
    for (int i = 0; i < n; i++)
        fs[i] = cast_back(v, field_index(v, ct, i), field_index(v, x, i), t->u.strct.elems[i]);
    return fvm_ad_op(v->ad, FVM_OP_STRUCT, fvm_ad_names(v->ad, t), n, fs);
}

fvm_status vjp_cast(fvm_vjp *v)
{
    /* Between float dtypes the cotangent is cast back to the argument's
     * dtype, leaf by leaf where the leaves differ; from integers nothing
     * flows. */
    const fvm_type *t = v->in->arg_types[0];
    fvm_dtype dt;
    if (!fvm_type_has_floats(t))
        return FVM_OK;
    if (!fvm_ad_one_float_dtype(t, &dt)) {
        set(v, 0, cast_back(v, v->ct, v->x[0], t));
        return FVM_OK;
    }
    fvm_doc *o = attrs(v);
    fvm_ad_set_str(v->ad, o, "dtype", fvm_dtype_name(dt));
    set(v, 0, OP(CAST, o, v->ct));
    return FVM_OK;
}

/* ---- elementwise, binary (cotangents summed back over broadcast axes) ------------------ */

fvm_status vjp_add(fvm_vjp *v)
{
    if (v->want[0])
        v->dx[0] = to_arg(v, 0, v->ct);
    if (v->want[1])
        v->dx[1] = to_arg(v, 1, v->ct);
    return FVM_OK;
}

fvm_status vjp_sub(fvm_vjp *v)
{
    if (v->want[0])
        v->dx[0] = to_arg(v, 0, v->ct);
    if (v->want[1])
        v->dx[1] = to_arg(v, 1, OP(NEG, NULL, v->ct));
    return FVM_OK;
}

fvm_status vjp_mul(fvm_vjp *v)
{
    if (v->want[0])
        v->dx[0] = to_arg(v, 0, OP(MUL, NULL, v->ct, v->x[1]));
    if (v->want[1])
        v->dx[1] = to_arg(v, 1, OP(MUL, NULL, v->ct, v->x[0]));
    return FVM_OK;
}

fvm_status vjp_div(fvm_vjp *v)
{
    const char *q = OP(DIV, NULL, v->ct, v->x[1]); /* ct / b */
    if (v->want[0])
        v->dx[0] = to_arg(v, 0, q);
    if (v->want[1]) /* d(a/b)/db = -a/b^2 = -y/b */
        v->dx[1] = to_arg(v, 1, OP(NEG, NULL, OP(MUL, NULL, q, v->y)));
    return FVM_OK;
}

fvm_status vjp_mod(fvm_vjp *v)
{
    /* x - floor_div(x, y) · y: dx = ct, dy = -ct · floor_div(x, y) (JAX's rule) */
    if (v->want[0])
        v->dx[0] = to_arg(v, 0, v->ct);
    if (v->want[1])
        v->dx[1] = to_arg(v, 1, OP(NEG, NULL, OP(MUL, NULL, v->ct, OP(FLOOR_DIV, NULL, v->x[0], v->x[1]))));
    return FVM_OK;
}

fvm_status vjp_pow(fvm_vjp *v)
{
    if (v->want[0]) { /* ct * b * a^(b-1) */
        const char *bm1 = OP(SUB, NULL, v->x[1], OP(ONES_LIKE, NULL, v->x[1]));
        const char *d = OP(MUL, NULL, OP(MUL, NULL, v->ct, v->x[1]), OP(POW, NULL, v->x[0], bm1));
        v->dx[0] = to_arg(v, 0, d);
    }
    if (v->want[1]) /* ct * log(a) * a^b */
        v->dx[1] = to_arg(v, 1, OP(MUL, NULL, OP(MUL, NULL, v->ct, OP(LOG, NULL, v->x[0])), v->y));
    return FVM_OK;
}

/* maximum/minimum: the cotangent goes to the chosen side (the first on ties). */
static fvm_status vjp_pick(fvm_vjp *v, fvm_op keep_first)
{
    const char *first = fvm_ad_op(v->ad, keep_first, NULL, 2, v->x);
    const char *z = OP(ZEROS_LIKE, NULL, v->ct);
    if (v->want[0])
        v->dx[0] = to_arg(v, 0, OP(SELECT, NULL, first, v->ct, z));
    if (v->want[1])
        v->dx[1] = to_arg(v, 1, OP(SELECT, NULL, first, z, v->ct));
    return FVM_OK;
}

fvm_status vjp_maximum(fvm_vjp *v)
{
    return vjp_pick(v, FVM_OP_GE);
}

fvm_status vjp_minimum(fvm_vjp *v)
{
    return vjp_pick(v, FVM_OP_LE);
}

fvm_status vjp_clip(fvm_vjp *v)
{
    /* minimum(maximum(x, lo), hi) through maximum's and minimum's rules: hi
     * gets ct where maximum(x, lo) > hi (or NaN), the rest goes on to x where
     * x >= lo and to lo elsewhere (ties to x) */
    const char *x = v->x[0], *lo = v->x[1], *hi = v->x[2];
    const char *z = OP(ZEROS_LIKE, NULL, v->ct);
    const char *in_hi = OP(LE, NULL, OP(MAXIMUM, NULL, x, lo), hi);
    if (v->want[0] || v->want[1]) {
        const char *ge_lo = OP(GE, NULL, x, lo), *cm = OP(SELECT, NULL, in_hi, v->ct, z);
        if (v->want[0])
            v->dx[0] = to_arg(v, 0, OP(SELECT, NULL, ge_lo, cm, z));
        if (v->want[1])
            v->dx[1] = to_arg(v, 1, OP(SELECT, NULL, ge_lo, z, cm));
    }
    if (v->want[2])
        v->dx[2] = to_arg(v, 2, OP(SELECT, NULL, in_hi, z, v->ct));
    return FVM_OK;
}

fvm_status vjp_select(fvm_vjp *v)
{
    const char *z = OP(ZEROS_LIKE, NULL, v->ct);
    if (v->want[1])
        v->dx[1] = to_arg(v, 1, OP(SELECT, NULL, v->x[0], v->ct, z));
    if (v->want[2])
        v->dx[2] = to_arg(v, 2, OP(SELECT, NULL, v->x[0], z, v->ct));
    return FVM_OK;
}

/* ---- linear algebra ---------------------------------------------------------------------- */

static const char *mm(fvm_vjp *v, const char *a, const char *b, bool ta, bool tb)
{
    fvm_doc *o = NULL;
    if (ta || tb) {
        o = attrs(v);
        if (ta)
            fvm_ad_set_bool(v->ad, o, "transpose_a", true);
        if (tb)
            fvm_ad_set_bool(v->ad, o, "transpose_b", true);
    }
    return OP(MATMUL, o, a, b);
}

static const char *expand(fvm_vjp *v, const char *x, int axis)
{
    fvm_doc *o = attrs(v);
    fvm_ints ax = {1, {axis}};
    fvm_ad_set_ints(v->ad, o, "axes", &ax);
    return OP(EXPAND_DIMS, o, x);
}

/* The outer product u v^T of two vectors. */
static const char *outer(fvm_vjp *v, const char *u, const char *w)
{
    return mm(v, expand(v, u, 1), expand(v, w, 0), false, false);
}

fvm_status vjp_matmul(fvm_vjp *v)
{
    const char *a = v->x[0], *b = v->x[1], *g = v->ct;
    bool ta = v->in->a.transpose_a, tb = v->in->a.transpose_b;
    int ra = v->in->arg_types[0]->u.tensor.dims.rank, rb = v->in->arg_types[1]->u.tensor.dims.rank;
    const char *da = NULL, *db = NULL;
    if (ra == 2 && rb == 2) {
        /* C = op(A) op(B); the four transpose cases, each one product with flags */
        if (!ta && !tb) {
            da = v->want[0] ? mm(v, g, b, false, true) : NULL;
            db = v->want[1] ? mm(v, a, g, true, false) : NULL;
        } else if (ta && !tb) {
            da = v->want[0] ? mm(v, b, g, false, true) : NULL;
            db = v->want[1] ? mm(v, a, g, false, false) : NULL;
        } else if (!ta && tb) {
            da = v->want[0] ? mm(v, g, b, false, false) : NULL;
            db = v->want[1] ? mm(v, g, a, true, false) : NULL;
        } else {
            da = v->want[0] ? mm(v, b, g, true, true) : NULL;
            db = v->want[1] ? mm(v, g, a, true, true) : NULL;
        }
    } else if (ra == 1 && rb == 2) { /* c[n] = sum_k a[k] op(B)[k,n] */
        da = v->want[0] ? mm(v, b, g, tb, false) : NULL;
        db = v->want[1] ? (tb ? outer(v, g, a) : outer(v, a, g)) : NULL;
    } else if (ra == 2 && rb == 1) { /* c[m] = sum_k op(A)[m,k] b[k] */
        da = v->want[0] ? (ta ? outer(v, b, g) : outer(v, g, b)) : NULL;
        db = v->want[1] ? mm(v, a, g, !ta, false) : NULL;
    } else { /* a dot product */
        da = v->want[0] ? OP(MUL, NULL, g, b) : NULL;
        db = v->want[1] ? OP(MUL, NULL, g, a) : NULL;
    }
    set(v, 0, da);
    set(v, 1, db);
    return FVM_OK;
}

/* ---- reductions ---------------------------------------------------------------------------- */

/* The reduced axes of x (sorted), as the reduction rule decided them. */
static fvm_ints reduced_axes(const fvm_vjp *v)
{
    int r = v->in->arg_types[0]->u.tensor.dims.rank;
    const fvm_attrs *a = &v->in->a;
    uint32_t mask = 0;
    if (!(a->present & A(AXES)))
        mask = r ? (uint32_t)((1u << r) - 1) : 0;
    else
        for (int i = 0; i < a->axes.n; i++)
            mask |= 1u << (a->axes.v[i] < 0 ? a->axes.v[i] + r : a->axes.v[i]);
    fvm_ints out = {0};
    for (int i = 0; i < r; i++)
        if (mask & (1u << i))
            out.v[out.n++] = i;
    return out;
}

/* A reduction's result given back its reduced axes (as size 1). */
static const char *keep_dims(fvm_vjp *v, const char *r)
{
    fvm_ints ax = reduced_axes(v);
    if (v->in->a.keepdims || ax.n == 0)
        return r;
    fvm_doc *o = attrs(v);
    fvm_ad_set_ints(v->ad, o, "axes", &ax);
    return OP(EXPAND_DIMS, o, r);
}

fvm_status vjp_sum(fvm_vjp *v)
{
    set(v, 0, OP(BROADCAST_LIKE, NULL, keep_dims(v, v->ct), v->x[0]));
    return FVM_OK;
}

/* How many elements each result element reduced, with the reduced axes kept. */
static const char *counts(fvm_vjp *v, const char *mask)
{
    fvm_ints ax = reduced_axes(v);
    fvm_doc *o = attrs(v);
    fvm_ad_set_ints(v->ad, o, "axes", &ax);
    fvm_ad_set_bool(v->ad, o, "keepdims", true);
    return OP(SUM, o, mask);
}

fvm_status vjp_mean(fvm_vjp *v)
{
    const char *n = counts(v, OP(ONES_LIKE, NULL, v->x[0]));
    set(v, 0, OP(DIV, NULL, OP(BROADCAST_LIKE, NULL, keep_dims(v, v->ct), v->x[0]), n));
    return FVM_OK;
}

fvm_status vjp_maxmin(fvm_vjp *v)
{
    /* The cotangent is shared evenly by the elements equal to the result. */
    fvm_doc *o = attrs(v);
    fvm_ad_set_str(v->ad, o, "dtype", fvm_dtype_name(leaf_dtype(v->in->arg_types[0])));
    const char *hit = OP(CAST, o, OP(EQ, NULL, v->x[0], keep_dims(v, v->y)));
    set(v, 0, OP(MUL, NULL, hit, OP(DIV, NULL, keep_dims(v, v->ct), counts(v, hit))));
    return FVM_OK;
}

fvm_status vjp_cumsum(fvm_vjp *v)
{
    /* the adjoint of a running sum is the running sum from the other end */
    fvm_doc *o = attrs(v);
    fvm_ad_set_int(v->ad, o, "axis", v->in->a.axis);
    if (!v->in->a.reverse)
        fvm_ad_set_bool(v->ad, o, "reverse", true);
    set(v, 0, OP(CUMSUM, o, v->ct));
    return FVM_OK;
}

/* ---- shapes ----------------------------------------------------------------------------------- */

fvm_status vjp_reshape(fvm_vjp *v)
{
    set(v, 0, OP(RESHAPE_LIKE, NULL, v->ct, v->x[0]));
    return FVM_OK;
}

fvm_status vjp_expand_dims(fvm_vjp *v)
{
    return vjp_reshape(v);
}

fvm_status vjp_reshape_like(fvm_vjp *v)
{
    return vjp_reshape(v);
}

fvm_status vjp_broadcast_to(fvm_vjp *v)
{
    set(v, 0, OP(UNBROADCAST, NULL, v->ct, v->x[0]));
    return FVM_OK;
}

fvm_status vjp_broadcast_like(fvm_vjp *v)
{
    return vjp_broadcast_to(v);
}

fvm_status vjp_unbroadcast(fvm_vjp *v)
{
    set(v, 0, OP(BROADCAST_LIKE, NULL, v->ct, v->x[0]));
    return FVM_OK;
}

fvm_status vjp_transpose(fvm_vjp *v)
{
    fvm_doc *o = NULL;
    const fvm_attrs *a = &v->in->a;
    if ((a->present & A(PERM)) && a->perm.n) {
        int r = a->perm.n;
        fvm_ints inv = {.n = r};
        for (int i = 0; i < r; i++)
            inv.v[a->perm.v[i] < 0 ? a->perm.v[i] + r : a->perm.v[i]] = i;
        o = attrs(v);
        fvm_ad_set_ints(v->ad, o, "perm", &inv);
    } /* else: reversing the axes is its own inverse */
    set(v, 0, OP(TRANSPOSE, o, v->ct));
    return FVM_OK;
}

static const char *const slice_keys[] = {"start", "stop", "step", NULL};

fvm_status vjp_slice(fvm_vjp *v)
{
    set(v, 0, OP(UNSLICE, fvm_ad_copy_attrs(v->ad, v->in, slice_keys), v->ct, v->x[0]));
    return FVM_OK;
}

fvm_status vjp_unslice(fvm_vjp *v)
{
    set(v, 0, OP(SLICE, fvm_ad_copy_attrs(v->ad, v->in, slice_keys), v->ct));
    return FVM_OK;
}

fvm_status vjp_concat(fvm_vjp *v)
{
    int r = v->in->type->u.tensor.dims.rank;
    int axis = (int)(v->in->a.axis < 0 ? v->in->a.axis + r : v->in->a.axis);
    int64_t off = 0;
    for (int k = 0; k < v->in->nargs; k++) {
        int64_t len = v->in->arg_types[k]->u.tensor.dims.d[axis];
        if (len < 0)
            return fvm_ad_error(v, "operand %d has an unknown size along the concatenation axis", k);
        if (v->want[k]) {
            fvm_ints start = {.n = axis + 1}, stop = {.n = axis + 1};
            for (int i = 0; i < axis; i++)
                stop.v[i] = INT64_C(1) << 62; /* to the end */
            start.v[axis] = off;
            stop.v[axis] = off + len;
            fvm_doc *o = attrs(v);
            fvm_ad_set_ints(v->ad, o, "start", &start);
            fvm_ad_set_ints(v->ad, o, "stop", &stop);
            v->dx[k] = OP(SLICE, o, v->ct);
        }
        off += len;
    }
    return FVM_OK;
}

/* ---- structs ------------------------------------------------------------------------------------ */

fvm_status vjp_struct(fvm_vjp *v)
{
    for (int k = 0; k < v->in->nargs; k++)
        if (v->want[k])
            v->dx[k] = field_index(v, v->ct, k);
    return FVM_OK;
}

fvm_status vjp_field(fvm_vjp *v)
{
    /* The struct's cotangent: ct in the selected field, zeros in the others. */
    const fvm_type *st = v->in->arg_types[0];
    int n = st->u.strct.n, idx = (int)v->in->a.index;
    const char **fs = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)n + 1, sizeof *fs);
    if (!fs)
        return FVM_ERR_NOMEM;
    bool named = n > 0;
    for (int j = 0; j < n; j++) {
        named = named && st->u.strct.names[j];
        fs[j] = j == idx ? v->ct : fvm_ad_zeros(v->ad, field_index(v, v->x[0], j), st->u.strct.elems[j]);
    }
    fvm_doc *o = NULL;
    if (named) {
        o = attrs(v);
        fvm_doc *arr = fvm_doc_new(fvm_ad_arena(v->ad), FVM_DOC_ARRAY);
        if (!arr)
            return FVM_ERR_NOMEM;
        arr->flow = true;
        for (int j = 0; j < n; j++)
            if (fvm_doc_push(fvm_ad_arena(v->ad), arr, fvm_doc_string(fvm_ad_arena(v->ad), st->u.strct.names[j])))
                return FVM_ERR_NOMEM;
        if (fvm_doc_set(fvm_ad_arena(v->ad), o, "names", arr))
            return FVM_ERR_NOMEM;
    } else {
        for (int j = 0; j < n; j++)
            if (st->u.strct.names[j])
                return fvm_ad_error(v, "a struct with both named and positional fields");
    }
    set(v, 0, fvm_ad_op(v->ad, FVM_OP_STRUCT, o, n, fs));
    return FVM_OK;
}

/* ---- federated intrinsics (the cotangents of a federated program are federated values) ------- */

static const char *placed_op(fvm_vjp *v, bool clients, const fvm_func *fn, int n, const char *const *args)
{
    return fn_op(v, clients ? FVM_OP_FEDERATED_MAP : FVM_OP_FEDERATED_APPLY, "fn", fn, n, args);
}

fvm_status vjp_federated_broadcast(fvm_vjp *v)
{
    set(v, 0, OP(FEDERATED_SUM, NULL, v->ct)); /* the clients' contributions add up */
    return FVM_OK;
}

fvm_status vjp_federated_sum(fvm_vjp *v)
{
    set(v, 0, OP(FEDERATED_BROADCAST, NULL, v->ct));
    return FVM_OK;
}

/* A float scalar of the member's dtype, placed at the server: the number of clients. */
static const char *client_count(fvm_vjp *v, fvm_dtype dt)
{
    fvm_doc *o = attrs(v);
    fvm_ad_set_str(v->ad, o, "placement", "CLIENTS");
    return OP(FEDERATED_SUM, NULL, OP(FEDERATED_VALUE, o, fvm_ad_const(v->ad, 1.0, dt)));
}

fvm_status vjp_federated_mean(fvm_vjp *v)
{
    /* y = sum(x) / N: each client gets ct / N */
    const fvm_type *m = v->in->type->u.fed.member;
    fvm_dtype dt = leaf_dtype(m);
    fvm_arena *a = fvm_ad_arena(v->ad);
    fvm_func *div = fvm_ad_helper_fn(v->ad, FVM_AD_DIV, m, fvm_type_scalar(a, dt), 0);
    const char *args[2] = {v->ct, client_count(v, dt)};
    set(v, 0, OP(FEDERATED_BROADCAST, NULL, placed_op(v, false, div, 2, args)));
    return FVM_OK;
}

fvm_status vjp_federated_weighted_mean(fvm_vjp *v)
{
    /* y = sum(w x) / W: client i gets w_i ct / W */
    if (v->want[1])
        return fvm_ad_error(v, "differentiating with respect to the weights is not supported");
    const fvm_type *m = v->in->type->u.fed.member, *w = v->in->arg_types[1]->u.fed.member;
    fvm_func *div = fvm_ad_helper_fn(v->ad, FVM_AD_DIV, m, w, 0), *mul = fvm_ad_helper_fn(v->ad, FVM_AD_MUL, m, w, 0);
    const char *a1[2] = {v->ct, OP(FEDERATED_SUM, NULL, v->x[1])};
    const char *scaled = OP(FEDERATED_BROADCAST, NULL, placed_op(v, false, div, 2, a1));
    const char *a2[2] = {scaled, v->x[1]};
    set(v, 0, placed_op(v, true, mul, 2, a2));
    return FVM_OK;
}

fvm_status vjp_federated_minmax(fvm_vjp *v)
{
    /* The clients whose value is the minimum (maximum) share the cotangent
     * evenly, element by element, as min and max over axes do: k clients
     * tied get ct / k each, so the derivative along a direction that moves
     * them together (an all-equal value: every client ties) is right. */
    const fvm_type *m = v->in->type->u.fed.member;
    fvm_func *hit = fvm_ad_helper_fn(v->ad, FVM_AD_HIT, m, NULL, 0);
    fvm_func *quot = fvm_ad_helper_fn(v->ad, FVM_AD_QUOT, m, NULL, 0);
    fvm_func *tie = fvm_ad_helper_fn(v->ad, FVM_AD_TIE, m, NULL, 0);
    const char *y = OP(FEDERATED_BROADCAST, NULL, v->y);
    const char *h[2] = {v->x[0], y};
    const char *q[2] = {v->ct, OP(FEDERATED_SUM, NULL, placed_op(v, true, hit, 2, h))};
    const char *args[3] = {v->x[0], y, OP(FEDERATED_BROADCAST, NULL, placed_op(v, false, quot, 2, q))};
    set(v, 0, placed_op(v, true, tie, 3, args));
    return FVM_OK;
}

fvm_status vjp_federated_zip(fvm_vjp *v)
{
    bool clients = v->in->type->u.fed.pl == FVM_PL_CLIENTS;
    const fvm_type *m = v->in->type->u.fed.member;
    for (int k = 0; k < v->in->nargs; k++)
        if (v->want[k])
            v->dx[k] = placed_op(v, clients, fvm_ad_helper_fn(v->ad, FVM_AD_FIELD, m, NULL, k), 1, &v->ct);
    return FVM_OK;
}

/* federated_map / federated_apply: the function's pullback, placed the same
 * way; its grads unpacked per wanted argument. */
static fvm_status vjp_placed_call(fvm_vjp *v, bool clients)
{
    fvm_func *pb = fvm_vjp_pullback_for(v, v->in->a.fn, 0, 0, 0);
    if (!pb)
        return FVM_ERR_TYPE;
    int n = v->in->nargs;
    const char **args = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)n + 2, sizeof *args);
    if (!args)
        return FVM_ERR_NOMEM;
    for (int k = 0; k < n; k++)
        args[k] = v->x[k];
    args[n] = v->ct;
    const char *r = placed_op(v, clients, pb, n + 1, args);
    const fvm_type *res = pb->result_type, *grads = res->u.strct.elems[1];
    const char *g = placed_op(v, clients, fvm_ad_helper_fn(v->ad, FVM_AD_FIELD, res, NULL, 1), 1, &r);
    int pos = 0;
    for (int k = 0; k < n; k++)
        if (v->want[k])
            v->dx[k] = placed_op(v, clients, fvm_ad_helper_fn(v->ad, FVM_AD_FIELD, grads, NULL, pos++), 1, &g);
    return FVM_OK;
}

fvm_status vjp_federated_map(fvm_vjp *v)
{
    return vjp_placed_call(v, true);
}

fvm_status vjp_federated_apply(fvm_vjp *v)
{
    return vjp_placed_call(v, false);
}
