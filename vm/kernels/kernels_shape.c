/* kernels_shape.c - data movement kernels: transpose, slice, concat, gather. */
#include <stdint.h>

#include "kernels_impl.h"

/* ---- element copies ------------------------------------------------------ */

/* n elements of es bytes from x (every stride-th element) to contiguous o.
 * Fixed-size memcpy compiles to plain loads and stores. */
static void copy_run(unsigned char *o, const unsigned char *x, int64_t n, int64_t stride, size_t es)
{
    if (stride == 1) {
        memcpy(o, x, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            o[i] = x[i * stride];
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            memcpy(o + 4 * i, x + 4 * i * stride, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++)
            memcpy(o + 8 * i, x + 8 * i * stride, 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(o + (size_t)i * es, x + (size_t)(i * stride) * es, es);
        break;
    }
}

/* One element (n == 1 is common in gathers along the last axis) or a block. */
static inline void copy_block(unsigned char *o, const unsigned char *x, int64_t n, size_t es)
{
    if (n == 1 && es == 4)
        memcpy(o, x, 4);
    else if (n == 1 && es == 8)
        memcpy(o, x, 8);
    else
        memcpy(o, x, (size_t)n * es);
}

enum { TILE = 16 };

/* Fills contiguous out (C order over shape) from x, where out's element at
 * index (i_0, ..) is x's element sum_k i_k * xs[k] (element strides, >= 0).
 * Dims are coalesced first; a contiguous innermost run is one memcpy per row,
 * and a strided one is walked in TILE x TILE blocks of the last two dims, so
 * the x cache lines of a block are reused while out is written row by row.
 * Column blocks are outermost: for a plain transpose x is then read as TILE
 * sequential streams, which measured faster than row blocks on power-of-two
 * shapes (whose strides otherwise collide in the cache). */
static void strided_copy(unsigned char *out, const unsigned char *x, int rank, const int64_t *shape, const int64_t *xs,
                         size_t es)
{
    int64_t sh[FVM_MAX_RANK], st[FVM_MAX_RANK];
    int r = 0;
    for (int k = 0; k < rank; k++) {
        if (shape[k] == 1)
            continue;
        if (r > 0 && st[r - 1] == xs[k] * shape[k]) {
            sh[r - 1] *= shape[k];
            st[r - 1] = xs[k];
        } else {
            sh[r] = shape[k];
            st[r] = xs[k];
            r++;
        }
    }
    if (r == 0) {
        memcpy(out, x, es);
        return;
    }
    /* the innermost one (contiguous) or two (tiled) dims form a block */
    int tiled = r >= 2 && st[r - 1] != 1;
    int nb = tiled ? 2 : 1, outer_rank = r - nb;
    int64_t blocks = 1;
    for (int k = 0; k < outer_rank; k++)
        blocks *= sh[k];
    int64_t idx[FVM_MAX_RANK] = {0}, off = 0;
    for (int64_t b = 0; b < blocks; b++) {
        if (!tiled) {
            copy_run(out, x + (size_t)off * es, sh[r - 1], st[r - 1], es);
            out += (size_t)sh[r - 1] * es;
        } else {
            int64_t n0 = sh[r - 2], n1 = sh[r - 1], s0 = st[r - 2], s1 = st[r - 1];
            for (int64_t j0 = 0; j0 < n1; j0 += TILE)
                for (int64_t i0 = 0; i0 < n0; i0 += TILE) {
                    int64_t ie = i0 + TILE < n0 ? i0 + TILE : n0, jn = j0 + TILE < n1 ? TILE : n1 - j0;
                    for (int64_t i = i0; i < ie; i++)
                        copy_run(out + (size_t)(i * n1 + j0) * es, x + (size_t)(off + i * s0 + j0 * s1) * es, jn, s1,
                                 es);
                }
            out += (size_t)(n0 * n1) * es;
        }
        for (int k = outer_rank - 1; k >= 0; k--) {
            off += st[k];
            if (++idx[k] < sh[k])
                break;
            off -= st[k] * sh[k];
            idx[k] = 0;
        }
    }
}

/* ---- transpose and slice ------------------------------------------------- */

fvm_status fvm_k_transpose(const fvm_tensor *x, const int *perm, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "transpose: x");
    KREQUIRE_TENSOR(d, out, "transpose: out");
    int rank = x->shape.rank;
    unsigned seen = 0;
    for (int k = 0; k < rank; k++) {
        KREQUIRE(d, perm[k] >= 0 && perm[k] < rank && !((seen >> perm[k]) & 1),
                 "transpose: perm is not a permutation of the %d axes", rank);
        seen |= 1u << perm[k];
    }
    int64_t xst[FVM_MAX_RANK], st[FVM_MAX_RANK];
    fvm_dims want = {.rank = rank};
    kernel_strides(&x->shape, xst);
    for (int k = 0; k < rank; k++) {
        want.d[k] = x->shape.d[perm[k]];
        st[k] = xst[perm[k]];
    }
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &want),
             "transpose: out must have x's dtype and the permuted shape");
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    strided_copy(kernel_bytes(out), kernel_bytes(x), rank, want.d, st, fvm_dtype_size(x->dtype));
    return FVM_OK;
}

fvm_status fvm_k_slice(const fvm_tensor *x, const int64_t *start, const int64_t *step, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "slice: x");
    KREQUIRE_TENSOR(d, out, "slice: out");
    int rank = x->shape.rank;
    KREQUIRE(d, out->dtype == x->dtype && out->shape.rank == rank, "slice: out must have x's dtype and rank");
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    int64_t xst[FVM_MAX_RANK], st[FVM_MAX_RANK], base = 0;
    kernel_strides(&x->shape, xst);
    for (int k = 0; k < rank; k++) {
        int64_t n = out->shape.d[k], dim = x->shape.d[k];
        /* last index start + (n-1)*step < dim, tested without overflow */
        KREQUIRE(d, step[k] >= 1 && start[k] >= 0 && start[k] < dim && (dim - 1 - start[k]) / step[k] >= n - 1,
                 "slice: axis %d: start %lld, step %lld and %lld elements do not fit in %lld", k, (long long)start[k],
                 (long long)step[k], (long long)n, (long long)dim);
        base += start[k] * xst[k];
        st[k] = n == 1 ? 0 : step[k] * xst[k];
    }
    size_t es = fvm_dtype_size(x->dtype);
    strided_copy(kernel_bytes(out), kernel_bytes(x) + (size_t)base * es, rank, out->shape.d, st, es);
    return FVM_OK;
}

/* ---- concat and gather --------------------------------------------------- */

fvm_status fvm_k_concat(const fvm_tensor *const *xs, int n, int axis, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, out, "concat: out");
    KREQUIRE(d, n >= 1, "concat: no inputs");
    int rank = out->shape.rank;
    KREQUIRE(d, axis >= 0 && axis < rank, "concat: axis %d out of range for rank %d", axis, rank);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const fvm_tensor *x = xs[i];
        KREQUIRE_TENSOR(d, x, "concat: input");
        if (x->dtype != xs[0]->dtype)
            return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "concat: input %d is %s, input 0 is %s", i,
                                fvm_dtype_name(x->dtype), fvm_dtype_name(xs[0]->dtype));
        bool same = x->shape.rank == rank;
        for (int k = 0; k < rank && same; k++)
            same = k == axis || x->shape.d[k] == out->shape.d[k];
        KREQUIRE(d, same, "concat: input %d's shape does not match out except along axis %d", i, axis);
        total += x->shape.d[axis];
    }
    KREQUIRE(d, out->dtype == xs[0]->dtype && total == out->shape.d[axis],
             "concat: out must have the inputs' dtype and the summed axis length");
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    size_t es = fvm_dtype_size(out->dtype);
    int64_t outer = kernel_span(&out->shape, 0, axis), inner = kernel_span(&out->shape, axis + 1, rank);
    unsigned char *o = kernel_bytes(out);
    for (int64_t r = 0; r < outer; r++)
        for (int i = 0; i < n; i++) {
            int64_t m = xs[i]->shape.d[axis] * inner; /* elements per outer row */
            if (m == 0)
                continue;
            copy_block(o, kernel_bytes(xs[i]) + (size_t)(r * m) * es, m, es);
            o += (size_t)m * es;
        }
    return FVM_OK;
}

static inline int64_t index_at(const unsigned char *p, bool wide, int64_t i)
{
    if (wide) {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

fvm_status fvm_k_gather(const fvm_tensor *x, const fvm_tensor *idx, int axis, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "gather: x");
    KREQUIRE_TENSOR(d, idx, "gather: indices");
    KREQUIRE_TENSOR(d, out, "gather: out");
    if (idx->dtype != FVM_DTYPE_I32 && idx->dtype != FVM_DTYPE_I64)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "gather: indices must be i32 or i64, not %s",
                            fvm_dtype_name(idx->dtype));
    int rank = x->shape.rank;
    KREQUIRE(d, axis >= 0 && axis < rank, "gather: axis %d out of range for rank %d", axis, rank);
    KREQUIRE(d, rank - 1 + idx->shape.rank <= FVM_MAX_RANK, "gather: result rank exceeds %d", FVM_MAX_RANK);
    fvm_dims want = {.rank = rank - 1 + idx->shape.rank};
    int w = 0;
    for (int k = 0; k < axis; k++)
        want.d[w++] = x->shape.d[k];
    for (int k = 0; k < idx->shape.rank; k++)
        want.d[w++] = idx->shape.d[k];
    for (int k = axis + 1; k < rank; k++)
        want.d[w++] = x->shape.d[k];
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &want),
             "gather: out must have x's dtype and shape x[:axis] + indices + x[axis+1:]");
    int64_t nidx = fvm_tensor_count(idx), len = x->shape.d[axis];
    bool wide = idx->dtype == FVM_DTYPE_I64;
    const unsigned char *ip = nidx > 0 ? kernel_bytes(idx) : NULL;
    /* every index is checked before anything is written */
    for (int64_t t = 0; t < nidx; t++) {
        int64_t k = index_at(ip, wide, t);
        if (k < 0 || k >= len)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                                "gather: index %lld (element %lld of the indices) is outside the range [0, %lld) "
                                "of axis %d",
                                (long long)k, (long long)t, (long long)len, axis);
    }
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    size_t es = fvm_dtype_size(x->dtype);
    int64_t outer = kernel_span(&x->shape, 0, axis), inner = kernel_span(&x->shape, axis + 1, rank);
    const unsigned char *xp = kernel_bytes(x);
    unsigned char *o = kernel_bytes(out);
    for (int64_t r = 0; r < outer; r++) {
        const unsigned char *src = xp + (size_t)(r * len * inner) * es;
        for (int64_t t = 0; t < nidx; t++, o += (size_t)inner * es)
            copy_block(o, src + (size_t)(index_at(ip, wide, t) * inner) * es, inner, es);
    }
    return FVM_OK;
}

/* ---- broadcast and unslice ------------------------------------------------ */

fvm_status fvm_k_broadcast(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "broadcast: x");
    KREQUIRE_TENSOR(d, out, "broadcast: out");
    fvm_dims b;
    KREQUIRE(d,
             out->dtype == x->dtype && fvm_dims_broadcast(&x->shape, &out->shape, &b, NULL) == FVM_OK &&
                 fvm_dims_equal(&b, &out->shape),
             "broadcast: out must have x's dtype and a shape x broadcasts to");
    int r = out->shape.rank, off = r - x->shape.rank;
    int64_t stride[FVM_MAX_RANK], idx[FVM_MAX_RANK] = {0};
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        int64_t sd = i >= off ? x->shape.d[i - off] : 1;
        stride[i] = sd == 1 ? 0 : acc;
        acc *= sd;
    }
    size_t es = fvm_dtype_size(x->dtype);
    int64_t n = fvm_tensor_count(out);
    if (n == 0)
        return FVM_OK;
    const unsigned char *sp = kernel_bytes(x);
    unsigned char *dp = kernel_bytes(out);
    for (int64_t k = 0; k < n; k++) {
        int64_t si = 0;
        for (int i = 0; i < r; i++)
            si += idx[i] * stride[i];
        memcpy(dp + (size_t)k * es, sp + (size_t)si * es, es);
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < out->shape.d[i])
                break;
            idx[i] = 0;
        }
    }
    return FVM_OK;
}

fvm_status fvm_k_unslice(const fvm_tensor *x, const int64_t *start, const int64_t *step, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "unslice: x");
    KREQUIRE_TENSOR(d, out, "unslice: out");
    int r = x->shape.rank;
    KREQUIRE(d, out->dtype == x->dtype && out->shape.rank == r, "unslice: out must have x's dtype and rank");
    for (int i = 0; i < r; i++)
        KREQUIRE(d,
                 step[i] >= 1 && start[i] >= 0 &&
                     (x->shape.d[i] == 0 || start[i] + (x->shape.d[i] - 1) * step[i] < out->shape.d[i]),
                 "unslice: the slice leaves out's axis %d", i);
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    size_t es = fvm_dtype_size(out->dtype);
    memset(kernel_bytes(out), 0, fvm_tensor_bytes(out));
    int64_t n = fvm_tensor_count(x);
    int64_t idx[FVM_MAX_RANK] = {0}, ostride[FVM_MAX_RANK];
    kernel_strides(&out->shape, ostride);
    const unsigned char *src = n ? kernel_bytes(x) : NULL;
    unsigned char *dst = kernel_bytes(out);
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++)
            off += (start[i] + idx[i] * step[i]) * ostride[i];
        memcpy(dst + (size_t)off * es, src + (size_t)k * es, es);
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < x->shape.d[i])
                break;
            idx[i] = 0;
        }
    }
    return FVM_OK;
}
