/* vjp_nn.c - reverse-mode rules of the neural-network ops, emitted as plain IR. */
#include "autodiff.h"

#define OP(op, attrs, ...) FVM_AD(v->ad, FVM_OP_##op, attrs, __VA_ARGS__)

static fvm_doc *attr_int(fvm_vjp *v, const char *key, int64_t x)
{
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ad_set_int(v->ad, o, key, x);
    return o;
}

static fvm_doc *attr_axes(fvm_vjp *v, int axis, bool keepdims)
{
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ints ax = {1, {axis}};
    fvm_ad_set_ints(v->ad, o, "axes", &ax);
    if (keepdims)
        fvm_ad_set_bool(v->ad, o, "keepdims", true);
    return o;
}

static fvm_doc *attr_str(fvm_vjp *v, const char *key, const char *s)
{
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ad_set_str(v->ad, o, key, s);
    return o;
}

static void set(fvm_vjp *v, int k, const char *g)
{
    if (v->want[k])
        v->dx[k] = g;
}

static int softmax_axis(const fvm_vjp *v)
{
    int r = v->in->arg_types[0]->u.tensor.dims.rank;
    int64_t a = (v->in->a.present & A(AXIS)) ? v->in->a.axis : -1;
    return (int)(a < 0 ? a + r : a);
}

fvm_status vjp_softmax(fvm_vjp *v)
{
    /* dx = y (ct - sum(ct y)) along the axis */
    const char *dot = OP(SUM, attr_axes(v, softmax_axis(v), true), OP(MUL, NULL, v->ct, v->y));
    set(v, 0, OP(MUL, NULL, v->y, OP(SUB, NULL, v->ct, dot)));
    return FVM_OK;
}

fvm_status vjp_log_softmax(fvm_vjp *v)
{
    /* dx = ct - softmax(x) sum(ct) along the axis */
    const char *total = OP(SUM, attr_axes(v, softmax_axis(v), true), v->ct);
    set(v, 0, OP(SUB, NULL, v->ct, OP(MUL, NULL, OP(EXP, NULL, v->y), total)));
    return FVM_OK;
}

fvm_status vjp_softmax_xent(fvm_vjp *v)
{
    /* d logits = ct (softmax(logits) - onehot(labels)) */
    const fvm_type *lt = v->in->arg_types[0], *yt = v->in->arg_types[1];
    int64_t k = lt->u.tensor.dims.d[lt->u.tensor.dims.rank - 1];
    if (k < 0)
        return fvm_ad_error(v, "the number of classes (the logits' last dimension) must be known");
    fvm_doc *io = fvm_ad_attrs(v->ad);
    fvm_ints shape = {1, {k}};
    fvm_ad_set_ints(v->ad, io, "shape", &shape);
    fvm_ad_set_str(v->ad, io, "dtype", fvm_dtype_name(yt->u.tensor.dtype));
    const char *classes = OP(IOTA, io);
    const char *hit = OP(EQ, NULL, classes, OP(EXPAND_DIMS, attr_axes(v, -1, false), v->x[1]));
    const char *onehot = OP(CAST, attr_str(v, "dtype", fvm_dtype_name(lt->u.tensor.dtype)), hit);
    const char *p = OP(SOFTMAX, NULL, v->x[0]);
    set(v, 0, OP(MUL, NULL, OP(EXPAND_DIMS, attr_axes(v, -1, false), v->ct), OP(SUB, NULL, p, onehot)));
    return FVM_OK;
}

static const char *const window_keys[] = {"window", "strides", "padding", NULL};

fvm_status vjp_conv2d(fvm_vjp *v)
{
    if (v->want[0])
        v->dx[0] = OP(CONV2D_GRAD_INPUT, fvm_ad_copy_attrs(v->ad, v->in, window_keys + 1), v->ct, v->x[1], v->x[0]);
    if (v->want[1])
        v->dx[1] = OP(CONV2D_GRAD_FILTER, fvm_ad_copy_attrs(v->ad, v->in, window_keys + 1), v->x[0], v->ct, v->x[1]);
    return FVM_OK;
}

fvm_status vjp_pool(fvm_vjp *v)
{
    fvm_doc *o = fvm_ad_copy_attrs(v->ad, v->in, window_keys);
    set(v, 0,
        v->in->op == FVM_OP_MAX_POOL ? OP(MAX_POOL_GRAD, o, v->x[0], v->ct) : OP(AVG_POOL_GRAD, o, v->x[0], v->ct));
    return FVM_OK;
}

/* The gradients of conv2d are linear in each argument (the third only gives
 * a shape): conv2d_grad_input(dy, w, x) is <dy, conv2d(x, w)> differentiated
 * in x, so <ct, it> = <dy, conv2d(ct, w)>; conv2d_grad_filter(x, dy, w) is
 * the same differentiated in w, so <ct, it> = <dy, conv2d(x, ct)>. */
fvm_status vjp_conv2d_grad_input(fvm_vjp *v)
{
    if (v->want[0])
        v->dx[0] = OP(CONV2D, fvm_ad_copy_attrs(v->ad, v->in, window_keys + 1), v->ct, v->x[1]);
    if (v->want[1])
        v->dx[1] = OP(CONV2D_GRAD_FILTER, fvm_ad_copy_attrs(v->ad, v->in, window_keys + 1), v->ct, v->x[0], v->x[1]);
    return FVM_OK;
}

fvm_status vjp_conv2d_grad_filter(fvm_vjp *v)
{
    if (v->want[0])
        v->dx[0] = OP(CONV2D_GRAD_INPUT, fvm_ad_copy_attrs(v->ad, v->in, window_keys + 1), v->x[1], v->ct, v->x[0]);
    if (v->want[1])
        v->dx[1] = OP(CONV2D, fvm_ad_copy_attrs(v->ad, v->in, window_keys + 1), v->x[0], v->ct);
    return FVM_OK;
}

/* max_pool_grad(x, dy) routes each window's dy to the element max_pool
 * chose, max_pool_gather(x, u) reads u there: linear in dy and u, each the
 * other's adjoint; piecewise constant in x, which gets none. */
fvm_status vjp_max_pool_grad(fvm_vjp *v)
{
    set(v, 1, OP(MAX_POOL_GATHER, fvm_ad_copy_attrs(v->ad, v->in, window_keys), v->x[0], v->ct));
    return FVM_OK;
}

fvm_status vjp_max_pool_gather(fvm_vjp *v)
{
    set(v, 1, OP(MAX_POOL_GRAD, fvm_ad_copy_attrs(v->ad, v->in, window_keys), v->x[0], v->ct));
    return FVM_OK;
}

fvm_status vjp_avg_pool_grad(fvm_vjp *v)
{
    /* linear in dy, the adjoint of avg_pool; x gives only a shape */
    set(v, 1, OP(AVG_POOL, fvm_ad_copy_attrs(v->ad, v->in, window_keys), v->ct));
    return FVM_OK;
}

fvm_status vjp_embedding(fvm_vjp *v)
{
    set(v, 0, OP(SCATTER_ADD, attr_int(v, "axis", 0), v->x[0], v->x[1], v->ct));
    return FVM_OK;
}

fvm_status vjp_gather(fvm_vjp *v)
{
    set(v, 0, OP(SCATTER_ADD, attr_int(v, "axis", v->in->a.axis), v->x[0], v->x[1], v->ct));
    return FVM_OK;
}

fvm_status vjp_scatter_add(fvm_vjp *v)
{
    set(v, 2, OP(GATHER, attr_int(v, "axis", v->in->a.axis), v->ct, v->x[1]));
    return FVM_OK;
}

fvm_status vjp_dropout(fvm_vjp *v)
{
    /* the same mask (the same key) scales the cotangent */
    fvm_doc *o = fvm_ad_attrs(v->ad);
    if (fvm_doc_set(fvm_ad_arena(v->ad), o, "rate", fvm_doc_real(fvm_ad_arena(v->ad), v->in->a.rate)))
        return FVM_ERR_NOMEM;
    set(v, 0, OP(DROPOUT, o, v->ct, v->x[1]));
    return FVM_OK;
}

fvm_status vjp_layer_norm(fvm_vjp *v)
{
    /* xhat = (x - mean) / sqrt(var + eps); y = xhat gamma + beta (over the last axis):
     * dx = (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) / sqrt(var + eps), dxhat = ct gamma */
    const char *x = v->x[0], *gamma = v->x[1], *beta = v->x[2];
    fvm_dtype dt = v->in->arg_types[0]->u.tensor.dtype;
    double eps = (v->in->a.present & A(EPSILON)) ? v->in->a.epsilon : FVM_LAYER_NORM_EPSILON;
    const char *mu = OP(MEAN, attr_axes(v, -1, true), x);
    const char *xc = OP(SUB, NULL, x, mu);
    const char *var = OP(MEAN, attr_axes(v, -1, true), OP(MUL, NULL, xc, xc));
    const char *sd = OP(SQRT, NULL, OP(ADD, NULL, var, fvm_ad_const(v->ad, eps, dt)));
    const char *xhat = OP(DIV, NULL, xc, sd);
    if (v->want[0]) {
        const char *dxhat = OP(MUL, NULL, v->ct, gamma);
        const char *m1 = OP(MEAN, attr_axes(v, -1, true), dxhat);
        const char *m2 = OP(MEAN, attr_axes(v, -1, true), OP(MUL, NULL, dxhat, xhat));
        v->dx[0] = OP(DIV, NULL, OP(SUB, NULL, OP(SUB, NULL, dxhat, m1), OP(MUL, NULL, xhat, m2)), sd);
    }
    if (v->want[1])
        v->dx[1] = OP(UNBROADCAST, NULL, OP(MUL, NULL, v->ct, xhat), gamma);
    if (v->want[2])
        v->dx[2] = OP(UNBROADCAST, NULL, v->ct, beta);
    return FVM_OK;
}

static const char *columns(fvm_vjp *v, const char *z, int64_t from, int64_t to)
{
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ints start = {2, {0, from}}, stop = {2, {INT64_C(1) << 62, to}};
    fvm_ad_set_ints(v->ad, o, "start", &start);
    fvm_ad_set_ints(v->ad, o, "stop", &stop);
    return OP(SLICE, o, z);
}

static const char *mm(fvm_vjp *v, const char *a, const char *b, const char *flag)
{
    fvm_doc *o = NULL;
    if (flag) {
        o = fvm_ad_attrs(v->ad);
        fvm_ad_set_bool(v->ad, o, flag, true);
    }
    return OP(MATMUL, o, a, b);
}

static const char *gate_grad(fvm_vjp *v, const char *d, const char *s, const char *one)
{
    return OP(MUL, NULL, d, OP(MUL, NULL, s, OP(SUB, NULL, one, s))); /* sigmoid' = s (1 - s) */
}

fvm_status vjp_lstm_cell(fvm_vjp *v)
{
    /* Recomputes the gates, then the standard LSTM backward step. */
    const fvm_type *pt = v->in->arg_types[3];
    int64_t H = v->in->arg_types[1]->u.tensor.dims.d[1];
    const char *x = v->x[0], *h = v->x[1], *c = v->x[2], *p = v->x[3];
    const char *wx = OP(FIELD, attr_str(v, "name", "wx"), p), *wh = OP(FIELD, attr_str(v, "name", "wh"), p);
    const char *b = OP(FIELD, attr_str(v, "name", "b"), p);
    const char *z = OP(ADD, NULL, OP(ADD, NULL, mm(v, x, wx, NULL), mm(v, h, wh, NULL)), b);
    const char *i = OP(SIGMOID, NULL, columns(v, z, 0, H)), *f = OP(SIGMOID, NULL, columns(v, z, H, 2 * H));
    const char *g = OP(TANH, NULL, columns(v, z, 2 * H, 3 * H)), *o = OP(SIGMOID, NULL, columns(v, z, 3 * H, 4 * H));
    const char *cn = OP(ADD, NULL, OP(MUL, NULL, f, c), OP(MUL, NULL, i, g));
    const char *tc = OP(TANH, NULL, cn), *one = OP(ONES_LIKE, NULL, tc);
    const char *dh = OP(FIELD, attr_str(v, "name", "h"), v->ct), *dcn = OP(FIELD, attr_str(v, "name", "c"), v->ct);
    const char *dtc = OP(MUL, NULL, OP(MUL, NULL, dh, o), OP(SUB, NULL, one, OP(MUL, NULL, tc, tc)));
    const char *dc_all = OP(ADD, NULL, dcn, dtc);
    const char *dzi = gate_grad(v, OP(MUL, NULL, dc_all, g), i, one);
    const char *dzf = gate_grad(v, OP(MUL, NULL, dc_all, c), f, one);
    const char *dzg = OP(MUL, NULL, OP(MUL, NULL, dc_all, i), OP(SUB, NULL, one, OP(MUL, NULL, g, g)));
    const char *dzo = gate_grad(v, OP(MUL, NULL, dh, tc), o, one);
    const char *dz = OP(CONCAT, attr_int(v, "axis", 1), dzi, dzf, dzg, dzo);
    set(v, 0, mm(v, dz, wx, "transpose_b"));
    set(v, 1, mm(v, dz, wh, "transpose_b"));
    set(v, 2, OP(MUL, NULL, dc_all, f));
    if (v->want[3]) {
        /* the parameters' cotangent, in the order of their struct */
        const char *parts[3];
        for (int k = 0; k < 3; k++) {
            const char *name = pt->u.strct.names[k];
            parts[k] = name[0] == 'b'   ? OP(SUM, attr_axes(v, 0, false), dz)
                       : name[1] == 'x' ? mm(v, x, dz, "transpose_a")
                                        : mm(v, h, dz, "transpose_a");
        }
        fvm_doc *no = fvm_ad_attrs(v->ad);
        fvm_doc *arr = fvm_doc_new(fvm_ad_arena(v->ad), FVM_DOC_ARRAY);
        if (!arr)
            return FVM_ERR_NOMEM;
        arr->flow = true;
        for (int k = 0; k < 3; k++)
            if (fvm_doc_push(fvm_ad_arena(v->ad), arr, fvm_doc_string(fvm_ad_arena(v->ad), pt->u.strct.names[k])))
                return FVM_ERR_NOMEM;
        if (fvm_doc_set(fvm_ad_arena(v->ad), no, "names", arr))
            return FVM_ERR_NOMEM;
        v->dx[3] = OP(STRUCT, no, parts[0], parts[1], parts[2]);
    }
    return FVM_OK;
}

fvm_status vjp_global_norm(fvm_vjp *v)
{
    set(v, 0, OP(MUL, NULL, v->x[0], OP(DIV, NULL, v->ct, v->y))); /* dn/dx = x / n */
    return FVM_OK;
}

/* <a, b> summed over every leaf of a tensor tree of type t. */
static const char *tree_dot(fvm_vjp *v, const char *a, const char *b, const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR)
        return OP(SUM, NULL, OP(MUL, NULL, a, b));
    const char *acc = NULL;
    for (int k = 0; k < t->u.strct.n; k++) {
        const char *d = tree_dot(v, OP(FIELD, attr_int(v, "index", k), a), OP(FIELD, attr_int(v, "index", k), b),
                                 t->u.strct.elems[k]);
        acc = acc ? OP(ADD, NULL, acc, d) : d;
    }
    return acc;
}

fvm_status vjp_clip_by_global_norm(fvm_vjp *v)
{
    /* y = x min(1, m/n). Where n > m: dx = (m/n) ct - (m/n^3) <ct, x> x and
     * dm = <ct, x> / n; else dx = ct and dm = 0. */
    const fvm_type *t = v->in->arg_types[0];
    const char *x = v->x[0], *m = v->x[1];
    const char *n = OP(GLOBAL_NORM, NULL, x), *one = OP(ONES_LIKE, NULL, n), *zero = OP(ZEROS_LIKE, NULL, n);
    const char *over = OP(GT, NULL, n, m), *dot = tree_dot(v, v->ct, x, t);
    if (v->want[0]) {
        const char *s = OP(SELECT, NULL, over, OP(DIV, NULL, m, n), one);
        const char *n3 = OP(MUL, NULL, n, OP(MUL, NULL, n, n));
        const char *coef = OP(SELECT, NULL, over, OP(DIV, NULL, OP(MUL, NULL, m, dot), n3), zero);
        v->dx[0] = OP(SUB, NULL, OP(MUL, NULL, v->ct, s), OP(MUL, NULL, x, coef));
    }
    if (v->want[1])
        v->dx[1] = OP(SELECT, NULL, over, OP(DIV, NULL, dot, n), zero);
    return FVM_OK;
}
