/* exec_nn.c - runtime of the neural-network ops: the shapes checked at run time, then the kernels of
 * kernels_nn.h through the VM's kernel provider. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "../ir/shapes.h"

/* Runs a kernel into a new tensor of the given dtype and shape. */
#define INTO(dt, dims, call) \
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

static int axis_of(const fvm_instr *in, int rank, int64_t fallback)
{
    int64_t a = (in->a.present & A(AXIS)) ? in->a.axis : fallback;
    return (int)(a < 0 ? a + rank : a);
}

fvm_status exec_softmax(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    INTO(t->dtype, &t->shape,
         x->vm->kernels->softmax(t, axis_of(in, t->shape.rank, -1), in->op == FVM_OP_LOG_SOFTMAX, o, x->d));
}

/* A runtime error for an operand whose shape is not the one the op needs:
 * "OP: the shape of WHAT is [..], expected [..] (WHY)". */
static fvm_status bad_shape(fvm_ctx *x, const fvm_instr *in, const char *what, const fvm_dims *got,
                            const fvm_dims *want, const char *why)
{
    char g[FVM_DIMS_STR], w[FVM_DIMS_STR];
    fvm_dims_format(got, g);
    fvm_dims_format(want, w);
    return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "%s: the shape of %s is %s, expected %s (%s)",
                        fvm_op_table[in->op].name, what, g, w, why);
}

fvm_status exec_softmax_xent(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* '?' dims were compared where known: the labels are the logits' shape without the class axis */
    const fvm_tensor *l = &args[0]->t, *y = &args[1]->t;
    fvm_dims want = l->shape;
    want.rank--;
    if (!fvm_dims_equal(&y->shape, &want)) {
        char ls[FVM_DIMS_STR];
        fvm_dims_format(&l->shape, ls);
        char why[FVM_DIMS_STR + 48];
        snprintf(why, sizeof why, "the logits %s without the class axis", ls);
        return bad_shape(x, in, "the labels", &y->shape, &want, why);
    }
    INTO(l->dtype, &y->shape, x->vm->kernels->softmax_xent(l, y, o, x->d));
}

/* The window of a conv/pool instruction for actual shapes. */
static fvm_window window_of(const fvm_instr *in, int64_t kh, int64_t kw, bool pool)
{
    const fvm_attrs *a = &in->a;
    fvm_window w = {.kh = kh, .kw = kw, .sh = pool ? kh : 1, .sw = pool ? kw : 1, .same = !pool};
    if (a->present & A(STRIDES)) {
        w.sh = a->strides.v[0];
        w.sw = a->strides.v[1];
    }
    if (a->present & A(PADDING))
        w.same = !strcmp(a->padding, "SAME");
    return w;
}

static fvm_status windowed(fvm_ctx *x, const fvm_dims *xs, const fvm_window *w, int64_t channels, fvm_dims *o)
{
    int64_t oh, ow;
    fvm_status s;
    if ((s = fvm_window_out(xs->d[1], w->kh, w->sh, w->same, &oh, NULL, x->d)) ||
        (s = fvm_window_out(xs->d[2], w->kw, w->sw, w->same, &ow, NULL, x->d)))
        return s;
    *o = (fvm_dims){.rank = 4, .d = {xs->d[0], oh, ow, channels}};
    return FVM_OK;
}

fvm_status exec_conv2d(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *xi = &args[0]->t, *w = &args[1]->t;
    if (xi->shape.d[3] != w->shape.d[2])
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "the filter has %lld input channels, the images %lld",
                            (long long)w->shape.d[2], (long long)xi->shape.d[3]);
    fvm_window win = window_of(in, w->shape.d[0], w->shape.d[1], false);
    fvm_dims od;
    fvm_status s = windowed(x, &xi->shape, &win, w->shape.d[3], &od);
    if (s)
        return s;
    INTO(xi->dtype, &od, x->vm->kernels->conv2d(xi, w, &win, o, x->d));
}

fvm_status exec_conv2d_grad(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* (dy, w, like_x) or (x, dy, like_w): the type rule compared the shapes
     * it knew; the '?' ones are compared here, before the kernel runs */
    bool input = in->op == FVM_OP_CONV2D_GRAD_INPUT;
    const fvm_tensor *xi = &args[input ? 2 : 0]->t, *w = &args[input ? 1 : 2]->t, *dy = &args[input ? 0 : 1]->t;
    const fvm_tensor *like = &args[2]->t;
    if (xi->shape.d[3] != w->shape.d[2]) {
        char xs[FVM_DIMS_STR], ws[FVM_DIMS_STR];
        fvm_dims_format(&xi->shape, xs);
        fvm_dims_format(&w->shape, ws);
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                            "%s: the filter %s expects %lld input channels, the images %s have %lld",
                            fvm_op_table[in->op].name, ws, (long long)w->shape.d[2], xs, (long long)xi->shape.d[3]);
    }
    fvm_window win = window_of(in, w->shape.d[0], w->shape.d[1], false);
    fvm_dims od;
    fvm_status s = windowed(x, &xi->shape, &win, w->shape.d[3], &od);
    if (s)
        return s;
    if (!fvm_dims_equal(&dy->shape, &od)) {
        char xs[FVM_DIMS_STR], ws[FVM_DIMS_STR], why[2 * FVM_DIMS_STR + 64];
        fvm_dims_format(&xi->shape, xs);
        fvm_dims_format(&w->shape, ws);
        snprintf(why, sizeof why, "conv2d's result for the images %s and the filter %s", xs, ws);
        return bad_shape(x, in, "dy", &dy->shape, &od, why);
    }
    if (input)
        INTO(like->dtype, &like->shape, x->vm->kernels->conv2d_grad_input(dy, w, &win, o, x->d));
    INTO(like->dtype, &like->shape, x->vm->kernels->conv2d_grad_filter(xi, dy, &win, o, x->d));
}

static fvm_pool pool_kind(fvm_op op)
{
    return op == FVM_OP_MAX_POOL || op == FVM_OP_MAX_POOL_GRAD ? FVM_POOL_MAX : FVM_POOL_AVG;
}

fvm_status exec_pool(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *xi = &args[0]->t;
    fvm_window win = window_of(in, in->a.window.v[0], in->a.window.v[1], true);
    fvm_dims od;
    fvm_status s = windowed(x, &xi->shape, &win, xi->shape.d[3], &od);
    if (s)
        return s;
    INTO(xi->dtype, &od, x->vm->kernels->pool(pool_kind(in->op), xi, &win, o, x->d));
}

fvm_status exec_pool_grad(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* dy must have the pooling's result shape for x (checked where the types knew it) */
    const fvm_tensor *xi = &args[0]->t, *dy = &args[1]->t;
    fvm_window win = window_of(in, in->a.window.v[0], in->a.window.v[1], true);
    fvm_dims od;
    fvm_status s = windowed(x, &xi->shape, &win, xi->shape.d[3], &od);
    if (s)
        return s;
    if (!fvm_dims_equal(&dy->shape, &od)) {
        char xs[FVM_DIMS_STR], why[FVM_DIMS_STR + 48];
        fvm_dims_format(&xi->shape, xs);
        snprintf(why, sizeof why, "%s's result for x %s", in->op == FVM_OP_MAX_POOL_GRAD ? "max_pool" : "avg_pool", xs);
        return bad_shape(x, in, "dy", &dy->shape, &od, why);
    }
    INTO(xi->dtype, &xi->shape, x->vm->kernels->pool_grad(pool_kind(in->op), xi, dy, &win, o, x->d));
}

fvm_status exec_pool_gather(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* u must have x's shape (checked where the types knew it) */
    const fvm_tensor *xi = &args[0]->t, *u = &args[1]->t;
    if (!fvm_dims_equal(&u->shape, &xi->shape))
        return bad_shape(x, in, "u", &u->shape, &xi->shape, "x's shape");
    fvm_window win = window_of(in, in->a.window.v[0], in->a.window.v[1], true);
    fvm_dims od;
    fvm_status s = windowed(x, &xi->shape, &win, xi->shape.d[3], &od);
    if (s)
        return s;
    INTO(xi->dtype, &od, x->vm->kernels->pool_gather(xi, u, &win, o, x->d));
}

fvm_status exec_embedding(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_dims od;
    int ax;
    fvm_status s = fvm_shape_gather(&args[0]->t.shape, &args[1]->t.shape, 0, &od, &ax, x->d);
    if (s)
        return s;
    INTO(args[0]->t.dtype, &od, x->vm->kernels->gather(&args[0]->t, &args[1]->t, 0, o, x->d));
}

/* one_hot through the provider's kernels: the indices as i64 (every integer
 * dtype converts exactly) shaped [S..., 1], compared with iota [n] into
 * bool [S..., n], then cast to the dtype. An index outside [0, n) equals no
 * entry of the iota: its row is all zeros. */
fvm_status exec_one_hot(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_kernels *k = x->vm->kernels;
    const fvm_tensor *idx = &args[0]->t;
    fvm_dtype dt = in->type->u.tensor.dtype;
    fvm_dims col = idx->shape, row = {.rank = 1, .d = {in->a.n}}, res = idx->shape;
    col.d[col.rank++] = 1;
    res.d[res.rank++] = in->a.n;
    fvm_value *wide = NULL, *iota = NULL, *hit = NULL;
    fvm_tensor view = {0};
    fvm_status s = FVM_OK;
    if (idx->dtype == FVM_DTYPE_I64)
        wide = fvm_value_retain(args[0]);
    else if ((s = fvm_new_tensor(x, FVM_DTYPE_I64, &idx->shape, &wide)) == FVM_OK)
        s = k->cast(idx, &wide->t, x->d);
    if (s == FVM_OK)
        s = fvm_tensor_reshape(&wide->t, &col, &view, x->d);
    if (s == FVM_OK && (s = fvm_new_tensor(x, FVM_DTYPE_I64, &row, &iota)) == FVM_OK)
        s = k->iota(0, &iota->t, x->d);
    if (s == FVM_OK && (s = fvm_new_tensor(x, FVM_DTYPE_BOOL, &res, &hit)) == FVM_OK)
        s = k->binary(FVM_BIN_EQ, &view, &iota->t, &hit->t, x->d);
    if (s == FVM_OK && dt == FVM_DTYPE_BOOL) {
        *out = hit;
        hit = NULL;
    } else if (s == FVM_OK && (s = fvm_new_tensor(x, dt, &res, out)) == FVM_OK &&
               (s = k->cast(&hit->t, &(*out)->t, x->d))) {
        fvm_value_release(*out);
        *out = NULL;
    }
    fvm_tensor_release(&view);
    fvm_value_release(wide);
    fvm_value_release(iota);
    fvm_value_release(hit);
    return s;
}

fvm_status exec_scatter_add(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* the updates must have the gather's shape (checked where the types knew it) */
    const fvm_tensor *like = &args[0]->t, *idx = &args[1]->t, *u = &args[2]->t;
    fvm_dims want;
    int ax;
    fvm_status s = fvm_shape_gather(&like->shape, &idx->shape, in->a.axis, &want, &ax, x->d);
    if (s)
        return s;
    if (!fvm_dims_equal(&u->shape, &want)) {
        char ls[FVM_DIMS_STR], is[FVM_DIMS_STR], why[2 * FVM_DIMS_STR + 64];
        fvm_dims_format(&like->shape, ls);
        fvm_dims_format(&idx->shape, is);
        snprintf(why, sizeof why, "the gather of %s at indices %s along axis %d", ls, is, ax);
        return bad_shape(x, in, "the updates", &u->shape, &want, why);
    }
    INTO(like->dtype, &like->shape, x->vm->kernels->scatter_add(idx, u, ax, o, x->d));
}

fvm_status exec_dropout(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *t = &args[0]->t;
    const uint32_t *k = fvm_tensor_data(&args[1]->t);
    if (args[1]->t.shape.rank != 1 || args[1]->t.shape.d[0] != 2)
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "a random key must have shape [2]");
    uint32_t key[2] = {k[0], k[1]};
    INTO(t->dtype, &t->shape, x->vm->kernels->dropout(t, key, in->a.rate, o, x->d));
}

/* ---- layer norm, LSTM cell, global norms ---------------------------------------------- */

static double epsilon_of(const fvm_instr *in)
{
    return (in->a.present & A(EPSILON)) ? in->a.epsilon : FVM_LAYER_NORM_EPSILON;
}

fvm_status exec_layer_norm(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *xt = &args[0]->t, *g = &args[1]->t, *b = &args[2]->t;
    int64_t d = xt->shape.d[xt->shape.rank - 1];
    if (g->shape.d[0] != d || b->shape.d[0] != d) {
        char xs[FVM_DIMS_STR], gs[FVM_DIMS_STR], bs[FVM_DIMS_STR];
        fvm_dims_format(&xt->shape, xs);
        fvm_dims_format(&g->shape, gs);
        fvm_dims_format(&b->shape, bs);
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                            "layer_norm: gamma %s and beta %s must be [%lld], the last dimension of x %s", gs, bs,
                            (long long)d, xs);
    }
    INTO(xt->dtype, &xt->shape, x->vm->kernels->layer_norm(xt, g, b, epsilon_of(in), o, x->d));
}

fvm_status exec_lstm_cell(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* z = x wx + h wh + b; gates i, f, g, o are the four quarters of z;
     * c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c'). */
    const fvm_type *pt = in->arg_types[3];
    const fvm_value *p = args[3];
    const fvm_tensor *wx = &p->items[fvm_type_field_index(pt, "wx")]->t;
    const fvm_tensor *wh = &p->items[fvm_type_field_index(pt, "wh")]->t;
    const fvm_tensor *bias = &p->items[fvm_type_field_index(pt, "b")]->t;
    const fvm_tensor *xt = &args[0]->t, *h = &args[1]->t, *c = &args[2]->t;
    int64_t B = h->shape.d[0], H = h->shape.d[1];
    if (xt->shape.d[0] != B || c->shape.d[0] != B || c->shape.d[1] != H || wx->shape.d[0] != xt->shape.d[1] ||
        wx->shape.d[1] != 4 * H || wh->shape.d[0] != H || wh->shape.d[1] != 4 * H || bias->shape.d[0] != 4 * H) {
        const fvm_tensor *ts[6] = {xt, h, c, wx, wh, bias};
        char sh[6][FVM_DIMS_STR];
        for (int i = 0; i < 6; i++)
            fvm_dims_format(&ts[i]->shape, sh[i]);
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                            "lstm_cell: x %s, h %s, c %s, wx %s, wh %s, b %s do not fit x [B,I], h [B,H], c [B,H], "
                            "wx [I,4H], wh [H,4H], b [4H]",
                            sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]);
    }
    fvm_dims zd = {.rank = 2, .d = {B, 4 * H}};
    const fvm_kernels *k = x->vm->kernels;
    fvm_tensor zx = {0}, zh = {0};
    fvm_value *hn = NULL, *cn = NULL;
    fvm_status s;
    if ((s = k->alloc(&zx, xt->dtype, &zd, x->d)) || (s = k->alloc(&zh, xt->dtype, &zd, x->d)) ||
        (s = k->matmul(xt, wx, false, false, &zx, x->d)) || (s = k->matmul(h, wh, false, false, &zh, x->d)) ||
        (s = fvm_new_tensor(x, xt->dtype, &h->shape, &hn)) || (s = fvm_new_tensor(x, xt->dtype, &h->shape, &cn)) ||
        (s = k->lstm_gates(&zx, &zh, bias, c, &hn->t, &cn->t, x->d))) {
        fvm_value_release(hn);
        fvm_value_release(cn);
        fvm_tensor_release(&zx);
        fvm_tensor_release(&zh);
        return s;
    }
    fvm_tensor_release(&zx);
    fvm_tensor_release(&zh);
    fvm_value *res = fvm_value_list(FVM_V_STRUCT, 2);
    if (!res) {
        fvm_value_release(hn);
        fvm_value_release(cn);
        return fvm_nomem(x);
    }
    res->items[0] = hn;
    res->items[1] = cn;
    *out = res;
    return FVM_OK;
}

/* *sum = the sum of squares of every leaf, each leaf's in index order in
 * double (the provider's sum_squares), added in leaf order. */
static fvm_status squares(fvm_ctx *x, const fvm_value *v, double *sum)
{
    if (v->kind == FVM_V_TENSOR)
        return x->vm->kernels->sum_squares(&v->t, sum, x->d);
    double s = 0;
    for (int64_t i = 0; i < v->n; i++) {
        double e;
        fvm_status st = squares(x, v->items[i], &e);
        if (st)
            return st;
        s += e;
    }
    *sum = s;
    return FVM_OK;
}

fvm_status exec_global_norm(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_dims none = {0};
    double sum;
    fvm_status s = squares(x, args[0], &sum);
    if (s == FVM_OK && (s = fvm_new_tensor(x, in->type->u.tensor.dtype, &none, out)) == FVM_OK)
        fvm_tensor_set_f64(&(*out)->t, 0, sqrt(sum));
    return s;
}

fvm_status exec_clip_by_global_norm(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    /* x * min(1, max_norm / norm): unchanged when the norm is within the bound. */
    double sum, m = fvm_tensor_get_f64(&args[1]->t, 0);
    fvm_status s = squares(x, args[0], &sum);
    if (s)
        return s;
    double norm = sqrt(sum);
    if (!(m >= 0))
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "the maximum norm must be >= 0, found %g", m);
    if (norm <= m) {
        *out = fvm_value_retain(args[0]);
        return FVM_OK;
    }
    fvm_value *scale = NULL;
    fvm_dims none = {0};
    s = fvm_new_tensor(x, args[1]->t.dtype, &none, &scale);
    if (s)
        return s;
    fvm_tensor_set_f64(&scale->t, 0, m / norm);
    s = fvm_lift_binary(x, FVM_BIN_MUL, args[0], scale, false, out);
    fvm_value_release(scale);
    return s;
}
