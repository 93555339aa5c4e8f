/* exec_tensor.c - runtime of tensor ops: constants, elementwise ops lifted over structs, linear
 * algebra, reductions, shape ops and random numbers. */
#include <string.h>

#include "exec.h"
#include "packed.h"
#include "../core/prng.h"
#include "../ir/shapes.h"

fvm_status fvm_nomem(fvm_ctx *x)
{
    return fvm_diag_add(x->d, FVM_ERR_NOMEM, NULL, "out of memory");
}

fvm_status fvm_new_tensor(fvm_ctx *x, fvm_dtype dt, const fvm_dims *shape, fvm_value **out)
{
    fvm_tensor t;
    fvm_status s = x->vm->kernels->alloc(&t, dt, shape, x->d);
    if (s)
        return s;
    *out = fvm_value_tensor_take(&t);
    if (!*out) {
        fvm_tensor_release(&t);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

/* ---- lifting over structs ----------------------------------------------------- */

typedef fvm_status (*leaf_fn)(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out);

/* Applies leaf to the tensors of n operands; a tensor operand meets every leaf
 * of a struct operand (the type rule checked that structs match). */
static fvm_status lift(fvm_ctx *x, const fvm_instr *in, const fvm_value *const *vs, int n, leaf_fn leaf,
                       fvm_value **out)
{
    const fvm_value *s = NULL;
    for (int i = 0; i < n; i++)
        if (vs[i]->kind == FVM_V_STRUCT) {
            s = vs[i];
            break;
        }
    if (!s) {
        const fvm_tensor *ts[3];
        for (int i = 0; i < n; i++)
            ts[i] = &vs[i]->t;
        return leaf(x, in, ts, n, out);
    }
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, s->n);
    if (!r)
        return fvm_nomem(x);
    for (int64_t k = 0; k < s->n; k++) {
        const fvm_value *sub[3];
        for (int i = 0; i < n; i++) {
            if (vs[i]->kind == FVM_V_STRUCT && vs[i]->n != s->n) {
                fvm_value_release(r);
                return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "structs of different sizes in an elementwise op");
            }
            sub[i] = vs[i]->kind == FVM_V_STRUCT ? vs[i]->items[k] : vs[i];
        }
        fvm_status st = lift(x, in, sub, n, leaf, &r->items[k]);
        if (st) {
            fvm_value_release(r);
            return st;
        }
    }
    *out = r;
    return FVM_OK;
}

static fvm_status leaf_unary(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out)
{
    fvm_status s = fvm_new_tensor(x, ts[0]->dtype, &ts[0]->shape, out);
    if (s)
        return s;
    if ((s = x->vm->kernels->unary(fvm_elementwise_unary(in->op), ts[0], &(*out)->t, x->d))) {
        fvm_value_release(*out);
        *out = NULL;
    }
    return s;
}

static fvm_status leaf_cast(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out)
{
    fvm_status s = fvm_new_tensor(x, in->a.dtype, &ts[0]->shape, out);
    if (s)
        return s;
    if ((s = x->vm->kernels->cast(ts[0], &(*out)->t, x->d))) {
        fvm_value_release(*out);
        *out = NULL;
    }
    return s;
}

static fvm_status binary_tensor(fvm_ctx *x, fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, fvm_value **out)
{
    fvm_dims dims;
    fvm_status s = fvm_dims_broadcast(&a->shape, &b->shape, &dims, x->d);
    if (s)
        return s;
    if ((s = fvm_new_tensor(x, fvm_elementwise_compares(op) ? FVM_DTYPE_BOOL : a->dtype, &dims, out)))
        return s;
    if ((s = x->vm->kernels->binary(op, a, b, &(*out)->t, x->d))) {
        fvm_value_release(*out);
        *out = NULL;
    }
    return s;
}

static fvm_status leaf_binary(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out)
{
    return binary_tensor(x, fvm_elementwise_binary(in->op), ts[0], ts[1], out);
}

static fvm_status leaf_select(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out)
{
    fvm_dims d1, dims;
    fvm_status s;
    if ((s = fvm_dims_broadcast(&ts[0]->shape, &ts[1]->shape, &d1, x->d)) ||
        (s = fvm_dims_broadcast(&d1, &ts[2]->shape, &dims, x->d)))
        return s;
    if ((s = fvm_new_tensor(x, ts[1]->dtype, &dims, out)))
        return s;
    if ((s = x->vm->kernels->select(ts[0], ts[1], ts[2], &(*out)->t, x->d))) {
        fvm_value_release(*out);
        *out = NULL;
    }
    return s;
}

/* clip: minimum(maximum(x, lo), hi) by the two kernels, the second in place
 * when maximum's result already has the final shape. */
static fvm_status leaf_clip(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out)
{
    fvm_value *m = NULL;
    fvm_status s = binary_tensor(x, FVM_BIN_MAXIMUM, ts[0], ts[1], &m);
    if (s)
        return s;
    fvm_dims dims;
    if ((s = fvm_dims_broadcast(&m->t.shape, &ts[2]->shape, &dims, x->d))) {
        fvm_value_release(m);
        return s;
    }
    if (!fvm_dims_equal(&dims, &m->t.shape)) {
        s = binary_tensor(x, FVM_BIN_MINIMUM, &m->t, ts[2], out);
        fvm_value_release(m);
        return s;
    }
    if ((s = x->vm->kernels->binary(FVM_BIN_MINIMUM, &m->t, ts[2], &m->t, x->d))) {
        fvm_value_release(m);
        return s;
    }
    *out = m;
    return FVM_OK;
}

static fvm_status leaf_fill(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n, fvm_value **out)
{
    fvm_status s = fvm_new_tensor(x, ts[0]->dtype, &ts[0]->shape, out);
    if (s)
        return s;
    fvm_fstep st; /* the value of its row of ops.def */
    fvm_elementwise_step(in, &st);
    if ((s = x->vm->kernels->fill(st.value, &(*out)->t, x->d))) {
        fvm_value_release(*out);
        *out = NULL;
    }
    return s;
}

static fvm_status lift_args(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, leaf_fn leaf, fvm_value **out)
{
    return lift(x, in, (const fvm_value *const *)args, in->nargs, leaf, out);
}

fvm_status exec_unary(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_unary, out);
}

fvm_status exec_cast(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_cast, out);
}

fvm_status exec_binary(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_binary, out);
}

fvm_status exec_select(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_select, out);
}

fvm_status exec_clip(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_clip, out);
}

fvm_status exec_zeros_like(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_fill, out);
}

fvm_status exec_ones_like(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_fill, out);
}

/* Lifted binary arithmetic for the aggregations (no instruction). */
static fvm_status lift_pair(fvm_ctx *x, fvm_binary op, const fvm_value *a, const fvm_value *b, bool same,
                            fvm_value **out)
{
    if (a->kind == FVM_V_TENSOR && b->kind == FVM_V_TENSOR) {
        if (same && !fvm_dims_equal(&a->t.shape, &b->t.shape)) {
            char sa[FVM_DIMS_STR], sb[FVM_DIMS_STR];
            fvm_dims_format(&a->t.shape, sa);
            fvm_dims_format(&b->t.shape, sb);
            return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                                "values of different shapes, %s and %s, cannot be "
                                "aggregated",
                                sa, sb);
        }
        return binary_tensor(x, op, &a->t, &b->t, out);
    }
    const fvm_value *s = a->kind == FVM_V_STRUCT ? a : b;
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, s->n);
    if (!r)
        return fvm_nomem(x);
    for (int64_t k = 0; k < s->n; k++) {
        fvm_status st = lift_pair(x, op, a->kind == FVM_V_STRUCT ? a->items[k] : a,
                                  b->kind == FVM_V_STRUCT ? b->items[k] : b, same, &r->items[k]);
        if (st) {
            fvm_value_release(r);
            return st;
        }
    }
    *out = r;
    return FVM_OK;
}

fvm_status fvm_lift_binary(fvm_ctx *x, fvm_binary op, const fvm_value *a, const fvm_value *b, bool same_shape,
                           fvm_value **out)
{
    return lift_pair(x, op, a, b, same_shape, out);
}

fvm_status fvm_zeros_of_type(fvm_ctx *x, const fvm_type *t, fvm_value **out)
{
    if (t->kind == FVM_T_TENSOR) {
        if (fvm_dims_count(&t->u.tensor.dims) < 0)
            return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "cannot make zeros of a type with unknown dimensions");
        fvm_status s = fvm_new_tensor(x, t->u.tensor.dtype, &t->u.tensor.dims, out);
        if (s == FVM_OK && (s = x->vm->kernels->fill(0.0, &(*out)->t, x->d))) {
            fvm_value_release(*out);
            *out = NULL;
        }
        return s;
    }
    fvm_value *r = fvm_value_list(FVM_V_STRUCT, t->u.strct.n);
    if (!r)
        return fvm_nomem(x);
    for (int i = 0; i < t->u.strct.n; i++) {
        fvm_status s = fvm_zeros_of_type(x, t->u.strct.elems[i], &r->items[i]);
        if (s) {
            fvm_value_release(r);
            return s;
        }
    }
    *out = r;
    return FVM_OK;
}

/* ---- constants ------------------------------------------------------------------ */

fvm_status exec_const(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_tensor t = in->konst;
    fvm_tensor_retain(&t);
    if (!(*out = fvm_value_tensor_take(&t))) {
        fvm_tensor_release(&t);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

/* Runs a kernel into a new tensor of the given dtype and shape. */
#define KERNEL_INTO(dt, dims, call) \
    do { \
        fvm_status s_ = fvm_new_tensor(x, dt, dims, out); \
        if (s_) \
            return s_; \
        fvm_tensor *o = &(*out)->t; \
        if ((s_ = (call))) { \
            fvm_value_release(*out); \
            *out = NULL; \
        } \
        return s_; \
    } while (0)

fvm_status exec_iota(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_dims *dims = &in->type->u.tensor.dims;
    int axis = (int)(in->a.axis < 0 ? in->a.axis + dims->rank : in->a.axis);
    KERNEL_INTO(in->type->u.tensor.dtype, dims, x->vm->kernels->iota(axis, o, x->d));
}

/* ---- linear algebra, reductions, shapes ------------------------------------------ */

fvm_status exec_matmul(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *a = &args[0]->t, *b = &args[1]->t;
    fvm_dims dims;
    fvm_status s = fvm_shape_matmul(&a->shape, &b->shape, in->a.transpose_a, in->a.transpose_b, &dims, x->d);
    if (s)
        return s;
    const fvm_tensor *bt =
        fvm_packed_wanted(a, b, in->a.transpose_a, in->a.transpose_b) ? fvm_packed_transpose(x, b) : NULL;
    if (bt) /* the same bits: packed.h */
        KERNEL_INTO(a->dtype, &dims, x->vm->kernels->matmul(a, bt, in->a.transpose_a, false, o, x->d));
    KERNEL_INTO(a->dtype, &dims, x->vm->kernels->matmul(a, b, in->a.transpose_a, in->a.transpose_b, o, x->d));
}

fvm_status exec_reduce(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    fvm_dims dims;
    uint32_t mask;
    fvm_status s =
        fvm_shape_reduce(&t->shape, (in->a.present & A(AXES)) ? &in->a.axes : NULL, in->a.keepdims, &dims, &mask, x->d);
    if (s)
        return s;
    fvm_reduce r = in->op == FVM_OP_SUM    ? FVM_RED_SUM
                   : in->op == FVM_OP_MEAN ? FVM_RED_MEAN
                   : in->op == FVM_OP_MAX  ? FVM_RED_MAX
                                           : FVM_RED_MIN;
    KERNEL_INTO(t->dtype, &dims, x->vm->kernels->reduce(r, t, mask, o, x->d));
}

fvm_status exec_argmax(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    fvm_dims dims;
    int ax;
    fvm_status s = fvm_shape_argmax(&t->shape, (in->a.present & A(AXIS)) ? in->a.axis : -1, &dims, &ax, x->d);
    if (s)
        return s;
    KERNEL_INTO(FVM_DTYPE_I64, &dims, x->vm->kernels->argmax(t, ax, o, x->d));
}

/* An axis attribute in [-rank, rank) (the type rule's check) as an index. */
static int axis_of(const fvm_instr *in, const fvm_tensor *t)
{
    return (int)(in->a.axis < 0 ? in->a.axis + t->shape.rank : in->a.axis);
}

fvm_status exec_cumsum(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    KERNEL_INTO(t->dtype, &t->shape, x->vm->kernels->cumsum(t, axis_of(in, t), in->a.reverse, o, x->d));
}

fvm_status exec_reshape(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_dims dims;
    fvm_tensor r;
    fvm_status s = fvm_shape_reshape(&args[0]->t.shape, &in->a.shape, &dims, x->d);
    if (s || (s = fvm_tensor_reshape(&args[0]->t, &dims, &r, x->d)))
        return s;
    if (!(*out = fvm_value_tensor_take(&r))) {
        fvm_tensor_release(&r);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

fvm_status exec_broadcast_to(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_dims dims;
    fvm_status s = fvm_shape_broadcast_to(&args[0]->t.shape, &in->a.shape, &dims, x->d);
    if (s)
        return s;
    KERNEL_INTO(args[0]->t.dtype, &dims, x->vm->kernels->broadcast(&args[0]->t, o, x->d));
}

fvm_status exec_transpose(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_dims dims;
    int perm[FVM_MAX_RANK];
    fvm_status s =
        fvm_shape_transpose(&args[0]->t.shape, (in->a.present & A(PERM)) ? &in->a.perm : NULL, &dims, perm, x->d);
    if (s)
        return s;
    KERNEL_INTO(args[0]->t.dtype, &dims, x->vm->kernels->transpose(&args[0]->t, perm, o, x->d));
}

fvm_status exec_slice(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_attrs *a = &in->a;
    fvm_dims dims;
    int64_t start[FVM_MAX_RANK], step[FVM_MAX_RANK];
    fvm_status s = fvm_shape_slice(&args[0]->t.shape, (a->present & A(START)) ? &a->start : NULL,
                                   (a->present & A(STOP)) ? &a->stop : NULL, (a->present & A(STEP)) ? &a->step : NULL,
                                   &dims, start, step, x->d);
    if (s)
        return s;
    KERNEL_INTO(args[0]->t.dtype, &dims, x->vm->kernels->slice(&args[0]->t, start, step, o, x->d));
}

fvm_status exec_concat(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_dims *dims[256];
    const fvm_tensor *ts[256];
    for (int i = 0; i < in->nargs; i++) {
        dims[i] = &args[i]->t.shape;
        ts[i] = &args[i]->t;
    }
    fvm_dims res;
    int ax;
    fvm_status s = fvm_shape_concat(dims, in->nargs, in->a.axis, &res, &ax, x->d);
    if (s)
        return s;
    KERNEL_INTO(args[0]->t.dtype, &res, x->vm->kernels->concat(ts, in->nargs, ax, o, x->d));
}

fvm_status exec_gather(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_dims dims;
    int ax;
    fvm_status s = fvm_shape_gather(&args[0]->t.shape, &args[1]->t.shape, in->a.axis, &dims, &ax, x->d);
    if (s)
        return s;
    KERNEL_INTO(args[0]->t.dtype, &dims, x->vm->kernels->gather(&args[0]->t, &args[1]->t, ax, o, x->d));
}

fvm_status exec_dim(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    int axis = axis_of(in, t);
    int64_t n = t->shape.d[axis];
    if (n > INT32_MAX)
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "axis %d has %lld elements, more than an i32 holds", axis,
                            (long long)n);
    static const fvm_dims scalar = {0};
    fvm_status s = fvm_new_tensor(x, FVM_DTYPE_I32, &scalar, out);
    if (s == FVM_OK)
        *(int32_t *)fvm_tensor_data(&(*out)->t) = (int32_t)n;
    return s;
}

/* ---- random numbers ----------------------------------------------------------------- */

static void read_key(const fvm_value *v, uint32_t key[2])
{
    const uint32_t *k = fvm_tensor_data(&v->t);
    key[0] = k[0];
    key[1] = k[1];
}

static fvm_status new_key(fvm_ctx *x, const uint32_t key[2], fvm_value **out)
{
    fvm_dims d = {.rank = 1, .d = {2}};
    fvm_status s = fvm_new_tensor(x, FVM_DTYPE_U32, &d, out);
    if (s)
        return s;
    uint32_t *k = fvm_tensor_data(&(*out)->t);
    k[0] = key[0];
    k[1] = key[1];
    return FVM_OK;
}

static fvm_status want_key_value(fvm_ctx *x, const fvm_value *v)
{
    if (v->t.shape.rank == 1 && v->t.shape.d[0] == 2)
        return FVM_OK;
    return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "a random key must have shape [2]");
}

fvm_status exec_random_key(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    uint32_t key[2];
    /* A 32-bit seed is its 32 bits (as JAX's 32-bit seeds); an i64 seed all 64. */
    int64_t seed = fvm_tensor_get_i64(&args[0]->t, 0);
    fvm_prng_key(args[0]->t.dtype == FVM_DTYPE_I64 ? (uint64_t)seed : (uint64_t)(uint32_t)seed, key);
    return new_key(x, key, out);
}

fvm_status exec_random_split(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    if (want_key_value(x, args[0]))
        return FVM_ERR_RUNTIME;
    uint32_t key[2];
    read_key(args[0], key);
    KERNEL_INTO(FVM_DTYPE_U32, &in->type->u.tensor.dims,
                (fvm_prng_split(key, (size_t)in->type->u.tensor.dims.d[0], fvm_tensor_data(o)), FVM_OK));
}

fvm_status exec_random_fold_in(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    if (want_key_value(x, args[0]))
        return FVM_ERR_RUNTIME;
    uint32_t key[2], r[2];
    read_key(args[0], key);
    fvm_prng_fold_in(key, (uint32_t)fvm_tensor_get_i64(&args[1]->t, 0), r);
    return new_key(x, r, out);
}

static fvm_status draw(const fvm_instr *in, const uint32_t key[2], fvm_tensor *o)
{
    size_t n = (size_t)fvm_tensor_count(o);
    bool f32 = o->dtype == FVM_DTYPE_F32;
    if (in->op == FVM_OP_RANDOM_UNIFORM) {
        if (f32)
            fvm_prng_uniform_f32(key, n, fvm_tensor_data(o));
        else
            fvm_prng_uniform_f64(key, n, fvm_tensor_data(o));
    } else {
        if (f32)
            fvm_prng_normal_f32(key, n, fvm_tensor_data(o));
        else
            fvm_prng_normal_f64(key, n, fvm_tensor_data(o));
    }
    return FVM_OK;
}

fvm_status exec_random_draw(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    if (want_key_value(x, args[0]))
        return FVM_ERR_RUNTIME;
    uint32_t key[2];
    read_key(args[0], key);
    KERNEL_INTO(in->type->u.tensor.dtype, &in->type->u.tensor.dims, draw(in, key, o));
}

/* ---- shapes from other values ------------------------------------------------------- */

fvm_status exec_expand_dims(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    const fvm_ints *axes = &in->a.axes;
    int r = t->shape.rank + axes->n;
    unsigned ins = 0;
    for (int i = 0; i < axes->n; i++)
        ins |= 1u << (axes->v[i] < 0 ? axes->v[i] + r : axes->v[i]);
    fvm_dims d = {.rank = r};
    for (int i = 0, k = 0; i < r; i++)
        d.d[i] = (ins & (1u << i)) ? 1 : t->shape.d[k++];
    fvm_tensor v;
    fvm_status s = fvm_tensor_reshape(t, &d, &v, x->d);
    if (s)
        return s;
    if (!(*out = fvm_value_tensor_take(&v))) {
        fvm_tensor_release(&v);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

/* Sums ct down to like's shape: the axes broadcasting added or stretched. */
static fvm_status unbroadcast_tensor(fvm_ctx *x, const fvm_tensor *ct, const fvm_tensor *like, fvm_value **out)
{
    fvm_dims b;
    fvm_status s = fvm_dims_broadcast(&ct->shape, &like->shape, &b, x->d);
    if (s)
        return s;
    if (!fvm_dims_equal(&b, &ct->shape)) {
        char sc[FVM_DIMS_STR], sl[FVM_DIMS_STR];
        fvm_dims_format(&ct->shape, sc);
        fvm_dims_format(&like->shape, sl);
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "%s is not a broadcast of %s", sc, sl);
    }
    int off = ct->shape.rank - like->shape.rank;
    uint32_t mask = 0;
    for (int i = 0; i < ct->shape.rank; i++)
        if (i < off || (like->shape.d[i - off] == 1 && ct->shape.d[i] != 1))
            mask |= 1u << i;
    if (!mask) {
        fvm_tensor v;
        if ((s = fvm_tensor_reshape(ct, &like->shape, &v, x->d)))
            return s;
        if (!(*out = fvm_value_tensor_take(&v))) {
            fvm_tensor_release(&v);
            return fvm_nomem(x);
        }
        return FVM_OK;
    }
    KERNEL_INTO(ct->dtype, &like->shape, x->vm->kernels->reduce(FVM_RED_SUM, ct, mask, o, x->d));
}

static fvm_status unbroadcast_value(fvm_ctx *x, const fvm_value *ct, const fvm_value *like, fvm_value **out)
{
    if (like->kind == FVM_V_STRUCT) {
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, like->n);
        if (!r)
            return fvm_nomem(x);
        for (int64_t i = 0; i < like->n; i++) {
            fvm_status s = unbroadcast_value(x, ct->items[i], like->items[i], &r->items[i]);
            if (s) {
                fvm_value_release(r);
                return s;
            }
        }
        *out = r;
        return FVM_OK;
    }
    if (ct->kind == FVM_V_TENSOR)
        return unbroadcast_tensor(x, &ct->t, &like->t, out);
    /* A tensor that met every leaf of a struct: the leaves' sums add up. */
    fvm_value *acc = NULL;
    for (int64_t i = 0; i < ct->n; i++) {
        fvm_value *part = NULL, *sum = NULL;
        fvm_status s = unbroadcast_value(x, ct->items[i], like, &part);
        if (s == FVM_OK && acc)
            s = fvm_lift_binary(x, FVM_BIN_ADD, acc, part, true, &sum);
        else if (s == FVM_OK)
            sum = fvm_value_retain(part);
        fvm_value_release(part);
        fvm_value_release(acc);
        acc = sum;
        if (s) {
            fvm_value_release(acc);
            return s;
        }
    }
    if (!acc) { /* an empty struct: nothing reached the tensor */
        fvm_status s = fvm_new_tensor(x, like->t.dtype, &like->t.shape, out);
        if (s == FVM_OK && (s = x->vm->kernels->fill(0.0, &(*out)->t, x->d))) {
            fvm_value_release(*out);
            *out = NULL;
        }
        return s;
    }
    *out = acc;
    return FVM_OK;
}

fvm_status exec_unbroadcast(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return unbroadcast_value(x, args[0], args[1], out);
}

static fvm_status leaf_broadcast_like(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n,
                                      fvm_value **out)
{
    fvm_dims b;
    fvm_status s = fvm_dims_broadcast(&ts[0]->shape, &ts[1]->shape, &b, x->d);
    if (s)
        return s;
    KERNEL_INTO(ts[0]->dtype, &b, x->vm->kernels->broadcast(ts[0], o, x->d));
}

static fvm_status leaf_reshape_like(fvm_ctx *x, const fvm_instr *in, const fvm_tensor *const *ts, int n,
                                    fvm_value **out)
{
    fvm_tensor v;
    fvm_status s = fvm_tensor_reshape(ts[0], &ts[1]->shape, &v, x->d);
    if (s)
        return s;
    if (!(*out = fvm_value_tensor_take(&v))) {
        fvm_tensor_release(&v);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

fvm_status exec_broadcast_like(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_broadcast_like, out);
}

fvm_status exec_reshape_like(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    return lift_args(x, in, args, leaf_reshape_like, out);
}

fvm_status exec_unslice(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_attrs *a = &in->a;
    const fvm_tensor *ct = &args[0]->t, *like = &args[1]->t;
    fvm_dims dims;
    int64_t start[FVM_MAX_RANK], step[FVM_MAX_RANK];
    fvm_status s = fvm_shape_slice(&like->shape, (a->present & A(START)) ? &a->start : NULL,
                                   (a->present & A(STOP)) ? &a->stop : NULL, (a->present & A(STEP)) ? &a->step : NULL,
                                   &dims, start, step, x->d);
    if (s)
        return s;
    if (!fvm_dims_equal(&dims, &ct->shape)) {
        char sc[FVM_DIMS_STR], sd[FVM_DIMS_STR];
        fvm_dims_format(&ct->shape, sc);
        fvm_dims_format(&dims, sd);
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "the cotangent has shape %s, the slice %s", sc, sd);
    }
    KERNEL_INTO(like->dtype, &like->shape, x->vm->kernels->unslice(ct, start, step, o, x->d));
}
