/* rules_nn.c - type rules of the neural-network ops: softmax, cross-entropy, convolution, pooling,
 * embeddings, dropout, layer norm, the LSTM cell, global norms. */
#include <string.h>

#include "rules.h"
#include "shapes.h"

static bool is_float_tensor(const fvm_type *t)
{
    return t->kind == FVM_T_TENSOR && fvm_dtype_is_float(t->u.tensor.dtype);
}

static fvm_status want_float(fvm_rctx *c, int i, int min_rank, const char *what)
{
    const fvm_type *t = c->args[i];
    if (is_float_tensor(t) && t->u.tensor.dims.rank >= min_rank)
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_TYPE, "expected %s (a float tensor of rank >= %d), found %s", what, min_rank,
                    fvm_rtype(c, t));
}

static fvm_status same_dtype(fvm_rctx *c, int i, int j)
{
    if (c->args[i]->u.tensor.dtype == c->args[j]->u.tensor.dtype)
        return FVM_OK;
    return fvm_rerr(c, j, FVM_ERR_TYPE, "dtypes differ: %s and %s", fvm_rtype(c, c->args[i]), fvm_rtype(c, c->args[j]));
}

/* Two dims that must match (either may be unknown). */
static bool agree(int64_t a, int64_t b)
{
    return a == b || a < 0 || b < 0;
}

fvm_status rule_softmax(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 1, "logits"))
        return FVM_ERR_TYPE;
    int r = c->args[0]->u.tensor.dims.rank;
    int64_t axis = (c->in->a.present & A(AXIS)) ? c->in->a.axis : -1;
    if (axis < -r || axis >= r)
        return fvm_rerr(c, FVM_RLOC_ATTRS, FVM_ERR_TYPE, "axis %lld is out of range for rank %d", (long long)axis, r);
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_softmax_xent(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 1, "logits [..., K]") || fvm_rule_want_tensor(c, 1, "the labels"))
        return FVM_ERR_TYPE;
    const fvm_dims *l = &c->args[0]->u.tensor.dims, *y = &c->args[1]->u.tensor.dims;
    fvm_dtype lt = c->args[1]->u.tensor.dtype;
    if (lt != FVM_DTYPE_I32 && lt != FVM_DTYPE_I64)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "labels must be i32 or i64 class indices, found %s",
                        fvm_rtype(c, c->args[1]));
    bool ok = y->rank == l->rank - 1;
    for (int i = 0; ok && i < y->rank; i++)
        ok = agree(y->d[i], l->d[i]);
    if (!ok)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "labels %s must have the logits' shape without the class axis (%s)",
                        fvm_rtype(c, c->args[1]), fvm_rtype(c, c->args[0]));
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, y);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* strides (default: 'fallback'), padding (default: 'pad'), into a window. */
static fvm_status window_of(fvm_rctx *c, int64_t kh, int64_t kw, const int64_t fallback[2], bool same_default,
                            fvm_window *w)
{
    const fvm_attrs *a = &c->in->a;
    w->kh = kh;
    w->kw = kw;
    w->sh = fallback[0];
    w->sw = fallback[1];
    w->same = same_default;
    if (a->present & A(STRIDES)) { /* two entries >= 1 (attrs.def) */
        w->sh = a->strides.v[0];
        w->sw = a->strides.v[1];
    }
    if (a->present & A(PADDING)) /* "SAME" or "VALID" (attrs.def) */
        w->same = !strcmp(a->padding, "SAME");
    return FVM_OK;
}

/* [N, OH, OW, channels] of the NHWC input argument xi under a window; a
 * window of unknown size (kh or kw -1, a filter's '?') gives unknown OH, OW. */
static fvm_status windowed(fvm_rctx *c, int xi, const fvm_window *w, int64_t channels, fvm_dims *out)
{
    const fvm_dims *x = &c->args[xi]->u.tensor.dims;
    int64_t oh = -1, ow = -1;
    if ((w->kh >= 0 && fvm_window_out(x->d[1], w->kh, w->sh, w->same, &oh, NULL, c->d)) ||
        (w->kw >= 0 && fvm_window_out(x->d[2], w->kw, w->sw, w->same, &ow, NULL, c->d)))
        return fvm_rule_located(c, FVM_ERR_TYPE, xi);
    *out = (fvm_dims){.rank = 4, .d = {x->d[0], oh, ow, channels}};
    return FVM_OK;
}

/* A float tensor of rank 4 (an image batch or a filter) as argument i. */
static fvm_status want_rank4(fvm_rctx *c, int i, const char *what)
{
    const fvm_type *t = c->args[i];
    if (is_float_tensor(t) && t->u.tensor.dims.rank == 4)
        return FVM_OK;
    return fvm_rerr(c, i, FVM_ERR_TYPE, "expected %s (a float tensor of rank 4), found %s", what, fvm_rtype(c, t));
}

/* Argument i (a tensor) must have the shape want, as far as both are known. */
static fvm_status want_shape(fvm_rctx *c, int i, const fvm_dims *want, const char *what)
{
    const fvm_type *t = c->args[i];
    const fvm_dims *got = &t->u.tensor.dims;
    bool ok = got->rank == want->rank;
    for (int k = 0; ok && k < got->rank; k++)
        ok = agree(got->d[k], want->d[k]);
    if (ok)
        return FVM_OK;
    const fvm_type *w = fvm_rule_tensor(c, t->u.tensor.dtype, want);
    if (!w)
        return FVM_ERR_NOMEM;
    return fvm_rerr(c, i, FVM_ERR_TYPE, "%s: expected %s, found %s", what, fvm_rtype(c, w), fvm_rtype(c, t));
}

fvm_status rule_conv2d(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 4, "an image batch x [N,H,W,C]") || want_float(c, 1, 4, "a filter w [KH,KW,C,O]") ||
        same_dtype(c, 0, 1))
        return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[0]->u.tensor.dims, *w = &c->args[1]->u.tensor.dims;
    if (x->rank != 4 || w->rank != 4)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE,
                        "takes x [N,H,W,C] and w [KH,KW,C,O], found %s "
                        "and %s",
                        fvm_rtype(c, c->args[0]), fvm_rtype(c, c->args[1]));
    if (!agree(x->d[3], w->d[2]))
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the filter has %lld input channels, the images %lld", (long long)w->d[2],
                        (long long)x->d[3]);
    if (w->d[0] < 0 || w->d[1] < 0)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the filter's height and width must be known");
    fvm_window win;
    static const int64_t one[2] = {1, 1};
    fvm_dims o;
    if (window_of(c, w->d[0], w->d[1], one, true, &win) || windowed(c, 0, &win, w->d[3], &o))
        return FVM_ERR_TYPE;
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &o);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* conv2d_grad_input(dy, w, like_x) and conv2d_grad_filter(x, dy, like_w):
 * the type of the third argument. dy must have the shape conv2d gives for
 * the images and the filter, as far as the types tell. */
fvm_status rule_conv2d_grad(fvm_rctx *c, const fvm_type **out)
{
    bool input = c->in->op == FVM_OP_CONV2D_GRAD_INPUT;
    int xi = input ? 2 : 0, wi = input ? 1 : 2, dyi = input ? 0 : 1;
    if (want_rank4(c, xi, input ? "like, the images [N,H,W,C]" : "the images x [N,H,W,C]") ||
        want_rank4(c, wi, input ? "the filter w [KH,KW,C,O]" : "like, the filter [KH,KW,C,O]") ||
        want_rank4(c, dyi, "the cotangent dy [N,OH,OW,O]"))
        return FVM_ERR_TYPE;
    for (int i = 1; i < 3; i++)
        if (same_dtype(c, 0, i))
            return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[xi]->u.tensor.dims, *w = &c->args[wi]->u.tensor.dims;
    if (!agree(x->d[3], w->d[2]))
        return fvm_rerr(c, wi, FVM_ERR_TYPE, "the filter %s expects %lld input channels, the images %s have %lld",
                        fvm_rtype(c, c->args[wi]), (long long)w->d[2], fvm_rtype(c, c->args[xi]), (long long)x->d[3]);
    fvm_window win;
    static const int64_t one[2] = {1, 1};
    fvm_dims o;
    if (window_of(c, w->d[0], w->d[1], one, true, &win) || windowed(c, xi, &win, w->d[3], &o) ||
        want_shape(c, dyi, &o, "dy must have the shape conv2d gives for the images and the filter"))
        return FVM_ERR_TYPE;
    *out = c->args[2];
    return FVM_OK;
}

static fvm_status pool_window(fvm_rctx *c, fvm_window *win)
{
    const fvm_ints *wd = &c->in->a.window; /* two entries >= 1 (attrs.def) */
    int64_t fallback[2] = {wd->v[0], wd->v[1]};
    return window_of(c, wd->v[0], wd->v[1], fallback, false, win);
}

fvm_status rule_pool(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 4, "an image batch x [N,H,W,C]"))
        return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[0]->u.tensor.dims;
    if (x->rank != 4)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expected x [N,H,W,C], found %s", fvm_rtype(c, c->args[0]));
    fvm_window win;
    fvm_dims o;
    if (pool_window(c, &win) || windowed(c, 0, &win, x->d[3], &o))
        return FVM_ERR_TYPE;
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &o);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* max_pool_grad / avg_pool_grad (x, dy): dy must have the pooling's result
 * shape for x, as far as the types tell. */
fvm_status rule_pool_grad(fvm_rctx *c, const fvm_type **out)
{
    fvm_window win;
    fvm_dims o;
    if (want_rank4(c, 0, "an image batch x [N,H,W,C]") || want_rank4(c, 1, "the cotangent dy [N,OH,OW,C]") ||
        same_dtype(c, 0, 1) || pool_window(c, &win))
        return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[0]->u.tensor.dims;
    if (windowed(c, 0, &win, x->d[3], &o) ||
        want_shape(c, 1, &o,
                   c->in->op == FVM_OP_MAX_POOL_GRAD ? "dy must have the shape max_pool gives for x"
                                                     : "dy must have the shape avg_pool gives for x"))
        return FVM_ERR_TYPE;
    *out = c->args[0];
    return FVM_OK;
}

/* max_pool_gather (x, u): u has x's shape; the result max_pool's for x. */
fvm_status rule_pool_gather(fvm_rctx *c, const fvm_type **out)
{
    fvm_window win;
    fvm_dims o;
    if (want_rank4(c, 0, "an image batch x [N,H,W,C]") || want_rank4(c, 1, "the values u [N,H,W,C]") ||
        same_dtype(c, 0, 1) || pool_window(c, &win))
        return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[0]->u.tensor.dims;
    if (want_shape(c, 1, x, "u must have x's shape") || windowed(c, 0, &win, x->d[3], &o))
        return FVM_ERR_TYPE;
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &o);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_embedding(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 2, "a table [V, D]") || fvm_rule_want_tensor(c, 1, "the ids"))
        return FVM_ERR_TYPE;
    const fvm_dims *t = &c->args[0]->u.tensor.dims, *ids = &c->args[1]->u.tensor.dims;
    fvm_dtype it = c->args[1]->u.tensor.dtype;
    if (t->rank != 2)
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "expected a table [V, D], found %s", fvm_rtype(c, c->args[0]));
    if (it != FVM_DTYPE_I32 && it != FVM_DTYPE_I64)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "ids must be i32 or i64, found %s", fvm_rtype(c, c->args[1]));
    if (ids->rank + 1 > FVM_MAX_RANK)
        return fvm_rerr(c, 1, FVM_ERR_LIMIT, "the result would have more than %d dimensions", FVM_MAX_RANK);
    fvm_dims o = *ids;
    o.d[o.rank++] = t->d[1];
    *out = fvm_rule_tensor(c, c->args[0]->u.tensor.dtype, &o);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_one_hot(fvm_rctx *c, const fvm_type **out)
{
    if (fvm_rule_want_tensor(c, 0, "the indices"))
        return FVM_ERR_TYPE;
    const fvm_type *x = c->args[0];
    if (!fvm_dtype_is_int(x->u.tensor.dtype))
        return fvm_rerr(c, 0, FVM_ERR_TYPE, "the indices must be integers (u8, i32, i64 or u32), found %s",
                        fvm_rtype(c, x));
    if (x->u.tensor.dims.rank + 1 > FVM_MAX_RANK)
        return fvm_rerr(c, 0, FVM_ERR_LIMIT, "the result would have more than %d dimensions", FVM_MAX_RANK);
    fvm_dtype dt = (c->in->a.present & A(DTYPE)) ? c->in->a.dtype : FVM_DTYPE_F32;
    fvm_dims o = x->u.tensor.dims;
    o.d[o.rank++] = c->in->a.n;
    if (fvm_dims_check_size(&o, dt, c->d))
        return fvm_rule_located(c, FVM_ERR_LIMIT, FVM_RLOC_ATTRS);
    *out = fvm_rule_tensor(c, dt, &o);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_scatter_add(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 1, "the shape model") || fvm_rule_want_tensor(c, 1, "the indices") ||
        want_float(c, 2, 0, "the updates") || same_dtype(c, 0, 2))
        return FVM_ERR_TYPE;
    fvm_dtype it = c->args[1]->u.tensor.dtype;
    if (it != FVM_DTYPE_I32 && it != FVM_DTYPE_I64)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "indices must be i32 or i64, found %s", fvm_rtype(c, c->args[1]));
    fvm_dims g;
    int ax;
    if (fvm_shape_gather(&c->args[0]->u.tensor.dims, &c->args[1]->u.tensor.dims, c->in->a.axis, &g, &ax, c->d))
        return fvm_rule_located(c, FVM_ERR_TYPE, FVM_RLOC_INSTR);
    fvm_type gathered = {.kind = FVM_T_TENSOR, .u.tensor = {c->args[0]->u.tensor.dtype, g}};
    if (!fvm_type_compatible(c->args[2], &gathered))
        return fvm_rerr(c, 2, FVM_ERR_TYPE, "the updates must have the gather's shape %s, found %s",
                        fvm_rtype(c, &gathered), fvm_rtype(c, c->args[2]));
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_dropout(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 0, "the input") || fvm_rule_want_key(c, 1))
        return FVM_ERR_TYPE;
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_layer_norm(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 1, "x [..., D]") || want_float(c, 1, 1, "gamma [D]") || want_float(c, 2, 1, "beta [D]") ||
        same_dtype(c, 0, 1) || same_dtype(c, 0, 2))
        return FVM_ERR_TYPE;
    const fvm_dims *x = &c->args[0]->u.tensor.dims;
    for (int i = 1; i < 3; i++) {
        const fvm_dims *p = &c->args[i]->u.tensor.dims;
        if (p->rank != 1 || !agree(p->d[0], x->d[x->rank - 1]))
            return fvm_rerr(c, i, FVM_ERR_TYPE, "expected [D] with D = %lld, the last dimension of x, found %s",
                            (long long)x->d[x->rank - 1], fvm_rtype(c, c->args[i]));
    }
    *out = c->args[0];
    return FVM_OK;
}

fvm_status rule_lstm_cell(fvm_rctx *c, const fvm_type **out)
{
    if (want_float(c, 0, 2, "x [B, I]") || want_float(c, 1, 2, "h [B, H]") || want_float(c, 2, 2, "c [B, H]") ||
        same_dtype(c, 0, 1) || same_dtype(c, 0, 2))
        return FVM_ERR_TYPE;
    const fvm_type *p = c->args[3];
    int iwx = fvm_type_field_index(p, "wx"), iwh = fvm_type_field_index(p, "wh"), ib = fvm_type_field_index(p, "b");
    if (p->kind != FVM_T_STRUCT || p->u.strct.n != 3 || iwx < 0 || iwh < 0 || ib < 0)
        return fvm_rerr(c, 3, FVM_ERR_TYPE, "the parameters must be <wx=[I,4H], wh=[H,4H], b=[4H]>, found %s",
                        fvm_rtype(c, p));
    const fvm_type *wx = p->u.strct.elems[iwx], *wh = p->u.strct.elems[iwh], *b = p->u.strct.elems[ib];
    const fvm_dims *x = &c->args[0]->u.tensor.dims, *h = &c->args[1]->u.tensor.dims, *cs = &c->args[2]->u.tensor.dims;
    int64_t H = h->d[1];
    bool ok = x->rank == 2 && h->rank == 2 && cs->rank == 2 && is_float_tensor(wx) && is_float_tensor(wh) &&
              is_float_tensor(b) && wx->u.tensor.dims.rank == 2 && wh->u.tensor.dims.rank == 2 &&
              b->u.tensor.dims.rank == 1 && wx->u.tensor.dtype == c->args[0]->u.tensor.dtype &&
              wh->u.tensor.dtype == wx->u.tensor.dtype && b->u.tensor.dtype == wx->u.tensor.dtype;
    ok = ok && H >= 0 && agree(x->d[0], h->d[0]) && agree(h->d[0], cs->d[0]) && agree(cs->d[1], H) &&
         agree(wx->u.tensor.dims.d[0], x->d[1]) && agree(wx->u.tensor.dims.d[1], 4 * H) &&
         agree(wh->u.tensor.dims.d[0], H) && agree(wh->u.tensor.dims.d[1], 4 * H) &&
         agree(b->u.tensor.dims.d[0], 4 * H);
    if (!ok)
        return fvm_rerr(c, FVM_RLOC_INSTR, FVM_ERR_TYPE,
                        "takes x [B,I], h [B,H], c [B,H] (H known) and "
                        "<wx=[I,4H], wh=[H,4H], b=[4H]> of one float dtype; found %s, %s, %s, %s",
                        fvm_rtype(c, c->args[0]), fvm_rtype(c, c->args[1]), fvm_rtype(c, c->args[2]), fvm_rtype(c, p));
    const char *names[2] = {"h", "c"};
    const fvm_type *elems[2] = {c->args[1], c->args[2]};
    *out = fvm_type_struct(c->a, 2, names, elems);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

/* A tensor tree of one float dtype: that dtype. */
static fvm_status tree_dtype(fvm_rctx *c, int i, const fvm_type *t, fvm_dtype *dt, bool *seen)
{
    if (t->kind == FVM_T_TENSOR) {
        if (!fvm_dtype_is_float(t->u.tensor.dtype) || (*seen && t->u.tensor.dtype != *dt))
            return fvm_rerr(c, i, FVM_ERR_TYPE, "expects floats of one dtype, found %s", fvm_rtype(c, c->args[i]));
        *dt = t->u.tensor.dtype;
        *seen = true;
        return FVM_OK;
    }
    if (t->kind != FVM_T_STRUCT)
        return fvm_rerr(c, i, FVM_ERR_TYPE, "expects a tensor or a struct of tensors, found %s",
                        fvm_rtype(c, c->args[i]));
    for (int k = 0; k < t->u.strct.n; k++)
        if (tree_dtype(c, i, t->u.strct.elems[k], dt, seen))
            return FVM_ERR_TYPE;
    return FVM_OK;
}

fvm_status rule_global_norm(fvm_rctx *c, const fvm_type **out)
{
    fvm_dtype dt = FVM_DTYPE_F32;
    bool seen = false;
    if (tree_dtype(c, 0, c->args[0], &dt, &seen))
        return FVM_ERR_TYPE;
    *out = fvm_type_scalar(c->a, dt);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

fvm_status rule_clip_by_global_norm(fvm_rctx *c, const fvm_type **out)
{
    fvm_dtype dt = FVM_DTYPE_F32;
    bool seen = false;
    if (tree_dtype(c, 0, c->args[0], &dt, &seen))
        return FVM_ERR_TYPE;
    const fvm_type *m = c->args[1];
    if (m->kind != FVM_T_TENSOR || m->u.tensor.dims.rank != 0 || m->u.tensor.dtype != dt)
        return fvm_rerr(c, 1, FVM_ERR_TYPE, "the maximum norm must be a %s scalar, found %s", fvm_dtype_name(dt),
                        fvm_rtype(c, m));
    *out = c->args[0];
    return FVM_OK;
}
