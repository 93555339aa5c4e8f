/* shapes.c - shape rules for matmul, reductions, reshape, transpose, slice, concat and gather. */
#include "shapes.h"

#include <string.h>

static fvm_status fail(fvm_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static fvm_status fail(fvm_diag *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(d, FVM_ERR_TYPE, NULL, fmt, ap);
    va_end(ap);
    return FVM_ERR_TYPE;
}

static bool known(int64_t x)
{
    return x >= 0;
}

/* Two dims that must agree: equal, or one unknown. */
static bool agree(int64_t x, int64_t y)
{
    return x == y || !known(x) || !known(y);
}

static fvm_status norm_axis(int64_t axis, int rank, int *out, fvm_diag *d)
{
    if (axis < -rank || axis >= rank)
        return fail(d, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return FVM_OK;
}

fvm_status fvm_shape_matmul(const fvm_dims *a, const fvm_dims *b, bool ta, bool tb, fvm_dims *out, fvm_diag *d)
{
    char sa[FVM_DIMS_STR], sb[FVM_DIMS_STR];
    if (a->rank < 1 || a->rank > 2 || b->rank < 1 || b->rank > 2)
        return fail(d, "matmul takes rank-1 or rank-2 operands, found ranks %d and %d", a->rank, b->rank);
    if ((ta && a->rank != 2) || (tb && b->rank != 2))
        return fail(d, "transpose_a/transpose_b apply to rank-2 operands only");
    int64_t m = 1, k1, k2, n = 1;
    if (a->rank == 2) {
        m = ta ? a->d[1] : a->d[0];
        k1 = ta ? a->d[0] : a->d[1];
    } else {
        k1 = a->d[0];
    }
    if (b->rank == 2) {
        k2 = tb ? b->d[1] : b->d[0];
        n = tb ? b->d[0] : b->d[1];
    } else {
        k2 = b->d[0];
    }
    if (!agree(k1, k2)) {
        fvm_dims_format(a, sa);
        fvm_dims_format(b, sb);
        return fail(d, "matmul inner dimensions differ: %s%s and %s%s (%lld vs %lld)", sa, ta ? "^T" : "", sb,
                    tb ? "^T" : "", (long long)k1, (long long)k2);
    }
    out->rank = 0;
    if (a->rank == 2)
        out->d[out->rank++] = m;
    if (b->rank == 2)
        out->d[out->rank++] = n;
    return FVM_OK;
}

fvm_status fvm_shape_reduce(const fvm_dims *x, const fvm_ints *axes, bool keepdims, fvm_dims *out, uint32_t *mask,
                            fvm_diag *d)
{
    uint32_t m = 0;
    if (!axes) { /* absent: every axis; an empty list: none (NumPy's axis=()) */
        m = x->rank ? (uint32_t)((1u << x->rank) - 1) : 0;
    } else {
        for (int i = 0; i < axes->n; i++) {
            int ax = 0;
            if (norm_axis(axes->v[i], x->rank, &ax, d))
                return FVM_ERR_TYPE;
            if (m & (1u << ax))
                return fail(d, "axis %d is listed twice", ax);
            m |= 1u << ax;
        }
    }
    out->rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (m & (1u << i)) {
            if (keepdims)
                out->d[out->rank++] = 1;
        } else {
            out->d[out->rank++] = x->d[i];
        }
    }
    *mask = m;
    return FVM_OK;
}

fvm_status fvm_shape_argmax(const fvm_dims *x, int64_t axis, fvm_dims *out, int *axis_out, fvm_diag *d)
{
    if (x->rank == 0)
        return fail(d, "argmax needs a tensor of rank >= 1");
    int ax = 0;
    if (norm_axis(axis, x->rank, &ax, d))
        return FVM_ERR_TYPE;
    if (x->d[ax] == 0)
        return fail(d, "argmax over an empty axis");
    out->rank = 0;
    for (int i = 0; i < x->rank; i++)
        if (i != ax)
            out->d[out->rank++] = x->d[i];
    *axis_out = ax;
    return FVM_OK;
}

fvm_status fvm_shape_reshape(const fvm_dims *x, const fvm_ints *shape, fvm_dims *out, fvm_diag *d)
{
    char sx[FVM_DIMS_STR];
    int infer = -1;
    int64_t prod = 1;
    for (int i = 0; i < shape->n; i++) {
        int64_t v = shape->v[i];
        if (v == -1) {
            if (infer >= 0)
                return fail(d, "reshape: at most one dimension may be -1");
            infer = i;
        } else if (v < 0) {
            return fail(d, "reshape: dimension %lld is negative", (long long)v);
        } else {
            if (v && prod > INT64_MAX / v)
                return fail(d, "reshape: the shape is too large");
            prod *= v;
        }
    }
    out->rank = shape->n;
    for (int i = 0; i < shape->n; i++)
        out->d[i] = shape->v[i];
    int64_t count = fvm_dims_count(x);
    if (count < 0) /* unknown input size: an inferred dim stays unknown */
        return FVM_OK;
    fvm_dims_format(x, sx);
    if (infer >= 0) {
        if (prod == 0 || count % prod)
            return fail(d, "reshape: cannot infer the -1 dimension: %s has %lld elements, not a multiple of %lld", sx,
                        (long long)count, (long long)prod);
        out->d[infer] = count / prod;
    } else if (prod != count) {
        return fail(d, "reshape: %s has %lld elements but the new shape has %lld", sx, (long long)count,
                    (long long)prod);
    }
    return FVM_OK;
}

fvm_status fvm_shape_broadcast_to(const fvm_dims *x, const fvm_ints *shape, fvm_dims *out, fvm_diag *d)
{
    char sx[FVM_DIMS_STR];
    if (shape->n < x->rank)
        return fail(d, "broadcast_to: the target has rank %d, lower than the operand's %d", shape->n, x->rank);
    out->rank = shape->n;
    for (int i = 0; i < shape->n; i++) {
        if (shape->v[i] < 0)
            return fail(d, "broadcast_to: dimension %lld is negative", (long long)shape->v[i]);
        out->d[i] = shape->v[i];
    }
    int off = shape->n - x->rank;
    for (int i = 0; i < x->rank; i++) {
        int64_t v = x->d[i];
        if (known(v) && v != 1 && v != shape->v[off + i]) {
            fvm_dims_format(x, sx);
            return fail(d, "broadcast_to: cannot broadcast %s: dimension %d is %lld, the target's is %lld", sx, i,
                        (long long)v, (long long)shape->v[off + i]);
        }
    }
    return FVM_OK;
}

fvm_status fvm_shape_transpose(const fvm_dims *x, const fvm_ints *perm, fvm_dims *out, int perm_out[FVM_MAX_RANK],
                               fvm_diag *d)
{
    int r = x->rank;
    if (perm && perm->n) {
        if (perm->n != r)
            return fail(d, "transpose: perm has %d entries for a rank-%d tensor", perm->n, r);
        unsigned seen = 0;
        for (int i = 0; i < r; i++) {
            int ax = 0;
            if (norm_axis(perm->v[i], r, &ax, d))
                return FVM_ERR_TYPE;
            if (seen & (1u << ax))
                return fail(d, "transpose: perm is not a permutation (axis %d repeats)", ax);
            seen |= 1u << ax;
            perm_out[i] = ax;
        }
    } else {
        for (int i = 0; i < r; i++)
            perm_out[i] = r - 1 - i;
    }
    out->rank = r;
    for (int i = 0; i < r; i++)
        out->d[i] = x->d[perm_out[i]];
    return FVM_OK;
}

fvm_status fvm_shape_slice(const fvm_dims *x, const fvm_ints *start, const fvm_ints *stop, const fvm_ints *step,
                           fvm_dims *out, int64_t start_out[FVM_MAX_RANK], int64_t step_out[FVM_MAX_RANK], fvm_diag *d)
{
    int r = x->rank;
    if ((start && start->n > r) || (stop && stop->n > r) || (step && step->n > r))
        return fail(d, "slice: more start/stop/step entries than the tensor's rank %d", r);
    out->rank = r;
    for (int i = 0; i < r; i++) {
        int64_t n = x->d[i];
        bool has_start = start && i < start->n, has_stop = stop && i < stop->n;
        int64_t st = step && i < step->n ? step->v[i] : 1;
        if (st < 1)
            return fail(d, "slice: step must be >= 1, found %lld", (long long)st);
        step_out[i] = st;
        if (!known(n)) { /* checking only: the runtime always knows n */
            start_out[i] = has_start ? start->v[i] : 0;
            out->d[i] = -1;
            continue;
        }
        int64_t b = has_start ? start->v[i] : 0, e = has_stop ? stop->v[i] : n;
        if (b < 0)
            b += n;
        if (e < 0)
            e += n;
        b = b < 0 ? 0 : (b > n ? n : b);
        e = e < 0 ? 0 : (e > n ? n : e);
        start_out[i] = b;
        out->d[i] = e > b ? (e - b - 1) / st + 1 : 0;
    }
    return FVM_OK;
}

fvm_status fvm_shape_concat(const fvm_dims *const *xs, int n, int64_t axis, fvm_dims *out, int *axis_out, fvm_diag *d)
{
    char s0[FVM_DIMS_STR], si[FVM_DIMS_STR];
    int r = xs[0]->rank;
    int ax = 0;
    if (r == 0)
        return fail(d, "concat needs tensors of rank >= 1");
    if (norm_axis(axis, r, &ax, d))
        return FVM_ERR_TYPE;
    *out = *xs[0];
    for (int k = 1; k < n; k++) {
        if (xs[k]->rank != r)
            return fail(d, "concat: operand %d has rank %d, operand 0 has rank %d", k, xs[k]->rank, r);
        for (int i = 0; i < r; i++) {
            if (i == ax) {
                out->d[i] = (known(out->d[i]) && known(xs[k]->d[i])) ? out->d[i] + xs[k]->d[i] : -1;
            } else if (!agree(out->d[i], xs[k]->d[i])) {
                fvm_dims_format(xs[0], s0);
                fvm_dims_format(xs[k], si);
                return fail(d, "concat on axis %d: operand %d has shape %s, operand 0 has %s", ax, k, si, s0);
            } else if (!known(out->d[i])) {
                out->d[i] = xs[k]->d[i];
            }
        }
    }
    *axis_out = ax;
    return FVM_OK;
}

fvm_status fvm_shape_gather(const fvm_dims *x, const fvm_dims *idx, int64_t axis, fvm_dims *out, int *axis_out,
                            fvm_diag *d)
{
    int ax = 0;
    if (x->rank == 0)
        return fail(d, "gather needs a tensor of rank >= 1");
    if (norm_axis(axis, x->rank, &ax, d))
        return FVM_ERR_TYPE;
    if (x->rank - 1 + idx->rank > FVM_MAX_RANK)
        return fail(d, "gather: the result would have rank %d, more than %d", x->rank - 1 + idx->rank, FVM_MAX_RANK);
    out->rank = 0;
    for (int i = 0; i < ax; i++)
        out->d[out->rank++] = x->d[i];
    for (int i = 0; i < idx->rank; i++)
        out->d[out->rank++] = idx->d[i];
    for (int i = ax + 1; i < x->rank; i++)
        out->d[out->rank++] = x->d[i];
    *axis_out = ax;
    return FVM_OK;
}

fvm_status fvm_window_out(int64_t in, int64_t k, int64_t stride, bool same, int64_t *out, int64_t *pad_before,
                          fvm_diag *d)
{
    if (k < 1 || stride < 1)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "window size %lld and stride %lld must be at least 1", (long long)k,
                            (long long)stride);
    if (in < -1)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "image side %lld is negative", (long long)in);
    int64_t o, p;
    if (in == -1) {
        o = -1;
        p = same ? -1 : 0;
    } else if (same) {
        o = in / stride + (in % stride != 0);
        /* (o-1)*stride <= in-1, so the total padding is at most k-1: no overflow */
        int64_t total = o == 0 ? 0 : k - (in - (o - 1) * stride);
        p = total > 0 ? total / 2 : 0;
    } else {
        if (in < k)
            return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "VALID window of size %lld is larger than the image side %lld",
                                (long long)k, (long long)in);
        o = (in - k) / stride + 1;
        p = 0;
    }
    if (out)
        *out = o;
    if (pad_before)
        *pad_before = p;
    return FVM_OK;
}
