/* kernels_conv.c - 2-D convolution (im2col + a gemm: fedvm's own f32 kernel in the CPU provider) and its gradients, max/avg pooling and theirs. */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels_impl.h"
#include "kernels_nn.h"

/* ---- windows ------------------------------------------------------------- */

/* A failed precondition reported by a helper (FVM_ERR_USAGE) is a caller's
 * bug: asserted like KREQUIRE, returned as is when asserts are off. */
#define KUSAGE_CHECK(st) \
    do { \
        fvm_status kst_ = (st); \
        if (kst_ != FVM_OK) { \
            assert(kst_ != FVM_ERR_USAGE && "kernel precondition failed"); \
            return kst_; \
        } \
    } while (0)

/* ---- conv2d plan --------------------------------------------------------- */

/* The im2col matrices of a group of images are built at most this big (one
 * image's is built whatever its size); the group size, and so the scratch
 * size and the order of grad_filter's sums, depends on the shapes only.
 * Measured on the CNN of McMahan et al. (28x28x1 -> 5x5x32 and 14x14x32 ->
 * 5x5x64, SAME, batches 10..64, f32, 2-core Zen 3 with OpenBLAS): the second
 * layer ran 10-25% faster in groups of 4 MiB than image by image (196-row
 * gemms), and 3-4x faster than as one gemm over a batch of 64, whose 40 MB
 * scratch no longer stays in the cache (nor in malloc's heap: every call
 * mapped and faulted it afresh). The first layer is bound by memory traffic
 * and barely depends on the group size. */
#define CONV_GROUP_BYTES ((int64_t)1 << 22)

/* Geometry of one convolution: x [N,H,W,C], w [KH,KW,C,O], y [N,OH,OW,O]. */
typedef struct conv_geom {
    int64_t n, h, w, c; /* x */
    int64_t kh, kw, o; /* w */
    int64_t sh, sw, ph, pw; /* strides, padding before */
    int64_t oh, ow; /* y */
    int64_t m; /* patches per image: OH*OW */
    int64_t k; /* patch length: KH*KW*C */
    int64_t group; /* images per gemm (>= 1) */
    bool direct; /* 1x1 filter, strides 1: x is its own patch matrix */
    size_t es; /* element size */
    size_t scratch; /* bytes of the patch matrix of one group, then (grad_filter over several groups) a [K,O]
                       product */
    size_t col_bytes; /* the patch matrix's part of scratch */
} conv_geom;

/* *r = a * b for a, b >= 0, false on overflow. */
static bool mul64(int64_t a, int64_t b, int64_t *r)
{
    if (a != 0 && b > INT64_MAX / a)
        return false;
    *r = a * b;
    return true;
}

static fvm_status conv_plan(fvm_dtype t, const fvm_dims *xs, const fvm_dims *ws, const fvm_window *win, conv_geom *g,
                            fvm_diag *d)
{
    if (t != FVM_DTYPE_F32 && t != FVM_DTYPE_F64)
        return kernel_type_error(d, "conv2d", t);
    if (xs->rank != 4 || ws->rank != 4)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "conv2d: x and w must have rank 4 (got %d and %d)", xs->rank,
                            ws->rank);
    for (int i = 0; i < 4; i++)
        if (xs->d[i] < 0 || ws->d[i] < 0)
            return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "conv2d: unknown or negative dim");
    if (xs->d[3] != ws->d[2])
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "conv2d: x has %lld channels, w expects %lld", (long long)xs->d[3],
                            (long long)ws->d[2]);
    if (win->kh != ws->d[0] || win->kw != ws->d[1])
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "conv2d: window %lldx%lld differs from the filter's %lldx%lld",
                            (long long)win->kh, (long long)win->kw, (long long)ws->d[0], (long long)ws->d[1]);
    *g = (conv_geom){.n = xs->d[0],
                     .h = xs->d[1],
                     .w = xs->d[2],
                     .c = xs->d[3],
                     .kh = ws->d[0],
                     .kw = ws->d[1],
                     .o = ws->d[3],
                     .sh = win->sh,
                     .sw = win->sw,
                     .es = fvm_dtype_size(t)};
    if (fvm_window_out(g->h, g->kh, g->sh, win->same, &g->oh, &g->ph, NULL) != FVM_OK ||
        fvm_window_out(g->w, g->kw, g->sw, win->same, &g->ow, &g->pw, NULL) != FVM_OK)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "conv2d: window %lldx%lld, strides %lldx%lld (%s) do not fit a %lldx%lld image",
                            (long long)win->kh, (long long)win->kw, (long long)win->sh, (long long)win->sw,
                            win->same ? "SAME" : "VALID", (long long)g->h, (long long)g->w);
    /* a zero dim lets the others be anything: products are checked */
    int64_t khw;
    if (!mul64(g->oh, g->ow, &g->m) || !mul64(g->kh, g->kw, &khw) || !mul64(khw, g->c, &g->k))
        return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "conv2d: dims too large");
    g->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1;
    g->group = 1;
    g->scratch = 0;
    g->col_bytes = 0;
    if (g->n == 0 || g->m == 0 || g->k == 0 || g->o == 0)
        return FVM_OK; /* no gemm */
    if (g->m > INT_MAX || g->k > INT_MAX || g->o > INT_MAX)
        return fvm_diag_add(d, FVM_ERR_LIMIT, NULL,
                            "conv2d: %lld patches of length %lld, %lld outputs: too large for BLAS", (long long)g->m,
                            (long long)g->k, (long long)g->o);
    int64_t per_image = g->m * g->k; /* elements of one image's patch matrix */
    if (!g->direct && per_image > (int64_t)(FVM_MAX_TENSOR_BYTES / g->es))
        return fvm_diag_add(d, FVM_ERR_LIMIT, NULL,
                            "conv2d: the patch matrix of one image (%lld x %lld) exceeds %llu bytes", (long long)g->m,
                            (long long)g->k, (unsigned long long)FVM_MAX_TENSOR_BYTES);
    int64_t group = g->direct ? g->n : CONV_GROUP_BYTES / (per_image * (int64_t)g->es);
    if (group > INT_MAX / g->m)
        group = INT_MAX / g->m;
    if (group > g->n)
        group = g->n;
    g->group = group < 1 ? 1 : group;
    g->col_bytes = g->direct ? 0 : (size_t)(g->group * per_image) * g->es;
    g->scratch = g->col_bytes;
    if (!g->direct && g->group < g->n) { /* grad_filter adds each group's product to the sum so far */
        int64_t ko;
        if (!mul64(g->k, g->o, &ko) || ko > (int64_t)(FVM_MAX_TENSOR_BYTES / g->es))
            return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "conv2d: a filter of %lld x %lld elements is too large",
                                (long long)g->k, (long long)g->o);
        g->scratch += (size_t)ko * g->es;
    }
    return FVM_OK;
}

fvm_status fvm_conv2d_workspace(fvm_dtype t, const fvm_dims *xs, const fvm_dims *ws, const fvm_window *win,
                                size_t *bytes, fvm_diag *d)
{
    conv_geom g;
    fvm_status st = conv_plan(t, xs, ws, win, &g, d);
    if (st == FVM_OK)
        *bytes = g.scratch;
    return st;
}

/* ---- im2col / col2im ----------------------------------------------------- */

/* Valid filter columns [lo, hi) for a patch whose left edge is at iw0
 * (hi <= lo: none). */
static inline void conv_cols(const conv_geom *g, int64_t iw0, int64_t *lo, int64_t *hi)
{
    *lo = iw0 < 0 ? -iw0 : 0;
    *hi = g->w - iw0 < g->kw ? g->w - iw0 : g->kw;
}

/* The patch matrix of 'images' images starting at x: row (b, oh, ow) holds
 * xpad[b, oh*sh + i, ow*sw + j, c] at column (i*KW + j)*C + c. Each filter
 * row is one contiguous run of x (KW*C elements, clipped at the borders),
 * so this is memcpy and memset only; zero bytes are +0.0. */
static void im2col(const unsigned char *x, const conv_geom *g, int64_t images, unsigned char *col)
{
    size_t es = g->es, cs = (size_t)g->c * es, run = (size_t)g->kw * cs;
    for (int64_t b = 0; b < images; b++) {
        const unsigned char *img = x + (size_t)(b * g->h * g->w * g->c) * es;
        for (int64_t oh = 0; oh < g->oh; oh++) {
            int64_t ih0 = oh * g->sh - g->ph;
            for (int64_t ow = 0; ow < g->ow; ow++) {
                int64_t iw0 = ow * g->sw - g->pw, lo, hi;
                conv_cols(g, iw0, &lo, &hi);
                for (int64_t i = 0; i < g->kh; i++, col += run) {
                    int64_t ih = ih0 + i;
                    if (ih < 0 || ih >= g->h || hi <= lo) {
                        memset(col, 0, run);
                        continue;
                    }
                    if (lo > 0)
                        memset(col, 0, (size_t)lo * cs);
                    memcpy(col + (size_t)lo * cs, img + (size_t)((ih * g->w + iw0 + lo) * g->c) * es,
                           (size_t)(hi - lo) * cs);
                    if (hi < g->kw)
                        memset(col + (size_t)hi * cs, 0, (size_t)(g->kw - hi) * cs);
                }
            }
        }
    }
}

/* The adjoint of im2col: adds every patch of col back into dx (zeroed by the
 * caller), patches in row-major (b, oh, ow) order, so each element of dx sums
 * its contributions in a fixed order. Padding positions are dropped. */
#define COL2IM(S, T) \
    static void col2im_##S(const T *col, const conv_geom *g, int64_t images, T *dx) \
    { \
        for (int64_t b = 0; b < images; b++) { \
            T *img = dx + b * g->h * g->w * g->c; \
            for (int64_t oh = 0; oh < g->oh; oh++) { \
                int64_t ih0 = oh * g->sh - g->ph; \
                for (int64_t ow = 0; ow < g->ow; ow++) { \
                    int64_t iw0 = ow * g->sw - g->pw, lo, hi; \
                    conv_cols(g, iw0, &lo, &hi); \
                    for (int64_t i = 0; i < g->kh; i++, col += g->kw * g->c) { \
                        int64_t ih = ih0 + i; \
                        if (ih < 0 || ih >= g->h || hi <= lo) \
                            continue; \
                        T *dst = img + (ih * g->w + iw0 + lo) * g->c; \
                        const T *src = col + lo * g->c; \
                        KERNEL_FOR(e, (hi - lo) * g->c, dst[e] += src[e];); \
                    } \
                } \
            } \
        } \
    }

COL2IM(f32, float)
COL2IM(f64, double)

/* The CPU provider's products. f32: fedvm's own kernel (kernels_gemm.c),
 * whatever their size, so every element of c is the fused multiply-add
 * chain over k in order from 0 (plus c's value before, added once, when
 * accumulate): the portable provider's chain, the same bits on every
 * machine. f64: OpenBLAS's dgemm, whose kernel and order of sums depend on
 * the machine. A build with -DFVM_GEMM_MAX_MACS=0 (every product in BLAS,
 * for make bench's comparison) sends the f32 ones to cblas_sgemm too.
 * Accumulating f32 products go through tmp, [m,n] floats (the workspace's
 * tail); c is contiguous (ldc == n), as in every call below. */
static void cpu_gemm(size_t es, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     const void *b, int64_t ldb, bool accumulate, void *c, int64_t ldc, void *tmp)
{
    if (es == sizeof(float) && FVM_GEMM_MAX_MACS > 0) {
        assert(ldc == n && (!accumulate || tmp != NULL));
        mm_shape s = {.m = m,
                      .n = n,
                      .k = k,
                      .a_si = ta ? 1 : lda,
                      .a_sk = ta ? lda : 1,
                      .b_sk = tb ? 1 : ldb,
                      .b_sj = tb ? ldb : 1};
        float *cf = c, *tf = tmp;
        fvm_gemm_f32(&s, a, b, accumulate ? tf : cf);
        if (accumulate)
            KERNEL_FOR(i, m * n, cf[i] += tf[i];);
        return;
    }
    enum CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
    if (es == sizeof(float))
        cblas_sgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb,
                    accumulate ? 1.0f : 0.0f, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb,
                    accumulate ? 1.0 : 0.0, c, (int)ldc);
}

/* ---- conv2d kernels ------------------------------------------------------ */

static fvm_status conv_same_dtype(const char *what, const fvm_tensor *a, const fvm_tensor *b, fvm_diag *d)
{
    if (a->dtype != b->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "%s: operand dtypes differ (%s and %s)", what,
                            fvm_dtype_name(a->dtype), fvm_dtype_name(b->dtype));
    return FVM_OK;
}

static fvm_dims dims4(int64_t a, int64_t b, int64_t c, int64_t e)
{
    return (fvm_dims){.rank = 4, .d = {a, b, c, e}};
}

#define KREQUIRE_WS(d, g, ws, ws_bytes) \
    KREQUIRE(d, (g).scratch == 0 || ((ws) != NULL && (ws_bytes) >= (g).scratch && (uintptr_t)(ws) % (g).es == 0), \
             "conv2d: workspace of %zu bytes, %zu needed (aligned to %zu)", (size_t)(ws_bytes), (g).scratch, (g).es)

static fvm_status conv2d_ws(fvm_kernel_gemm_fn gemm, const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win,
                            void *ws, size_t ws_bytes, fvm_tensor *y, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "conv2d: x");
    KREQUIRE_TENSOR(d, w, "conv2d: w");
    KREQUIRE_TENSOR(d, y, "conv2d: y");
    conv_geom g;
    KUSAGE_CHECK(conv_same_dtype("conv2d", x, w, d));
    KUSAGE_CHECK(conv_plan(x->dtype, &x->shape, &w->shape, win, &g, d));
    fvm_dims want = dims4(g.n, g.oh, g.ow, g.o);
    KREQUIRE(d, y->dtype == x->dtype && fvm_dims_equal(&y->shape, &want),
             "conv2d: y must have x's dtype and shape [N,OH,OW,O]");
    KREQUIRE_WS(d, g, ws, ws_bytes);
    if (fvm_tensor_count(y) == 0)
        return FVM_OK;
    unsigned char *yp = kernel_bytes(y);
    if (g.k == 0) { /* no channels: empty sums */
        memset(yp, 0, fvm_tensor_bytes(y));
        return FVM_OK;
    }
    const unsigned char *xp = kernel_bytes(x), *wp = kernel_bytes(w);
    size_t es = g.es;
    for (int64_t i0 = 0; i0 < g.n; i0 += g.group) {
        int64_t nb = g.n - i0 < g.group ? g.n - i0 : g.group;
        const unsigned char *xi = xp + (size_t)(i0 * g.h * g.w * g.c) * es;
        const void *a = xi;
        if (!g.direct) {
            im2col(xi, &g, nb, ws);
            a = ws;
        }
        gemm(g.es, false, false, nb * g.m, g.o, g.k, a, g.k, wp, g.o, false, yp + (size_t)(i0 * g.m * g.o) * es, g.o,
             NULL);
    }
    return FVM_OK;
}

static fvm_status conv2d_grad_input_ws(fvm_kernel_gemm_fn gemm, const fvm_tensor *dy, const fvm_tensor *w,
                                       const fvm_window *win, void *ws, size_t ws_bytes, fvm_tensor *dx, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, dy, "conv2d_grad_input: dy");
    KREQUIRE_TENSOR(d, w, "conv2d_grad_input: w");
    KREQUIRE_TENSOR(d, dx, "conv2d_grad_input: dx");
    conv_geom g;
    KUSAGE_CHECK(conv_same_dtype("conv2d_grad_input", dy, w, d));
    KREQUIRE(d, dx->dtype == dy->dtype, "conv2d_grad_input: dx must have dy's dtype");
    KUSAGE_CHECK(conv_plan(dy->dtype, &dx->shape, &w->shape, win, &g, d));
    fvm_dims want = dims4(g.n, g.oh, g.ow, g.o);
    KREQUIRE(d, fvm_dims_equal(&dy->shape, &want), "conv2d_grad_input: dy must have shape [N,OH,OW,O]");
    KREQUIRE_WS(d, g, ws, ws_bytes);
    if (fvm_tensor_count(dx) == 0)
        return FVM_OK;
    unsigned char *dxp = kernel_bytes(dx);
    if (g.o == 0) { /* no outputs: nothing flows back */
        memset(dxp, 0, fvm_tensor_bytes(dx));
        return FVM_OK;
    }
    const unsigned char *dyp = kernel_bytes(dy), *wp = kernel_bytes(w);
    size_t es = g.es;
    /* The products read w [K,O] transposed: an f32 w is transposed once
     * into [O,K] first, so that fedvm's kernel reads its rows as they lie
     * (each element's chain over O is the same either way: the same bits).
     * Without the memory, the products read w as it is. */
    float *wt = es == sizeof(float) ? malloc((size_t)(g.k * g.o) * sizeof(float)) : NULL;
    bool tb = !wt;
    if (wt) {
        const float *wf = (const float *)(const void *)wp;
        for (int64_t j0 = 0; j0 < g.k; j0 += 64) /* in blocks of 64 rows, so both sides stay in the cache */
            for (int64_t o = 0; o < g.o; o++)
                for (int64_t j = j0; j < g.k && j < j0 + 64; j++)
                    wt[o * g.k + j] = wf[j * g.o + o];
        wp = (const unsigned char *)wt;
    }
    int64_t ldw = tb ? g.o : g.k;
    for (int64_t i0 = 0; i0 < g.n; i0 += g.group) {
        int64_t nb = g.n - i0 < g.group ? g.n - i0 : g.group;
        unsigned char *dxi = dxp + (size_t)(i0 * g.h * g.w * g.c) * es;
        const unsigned char *dyi = dyp + (size_t)(i0 * g.m * g.o) * es;
        if (g.direct) { /* the patch matrix is dx itself */
            gemm(g.es, false, tb, nb * g.m, g.k, g.o, dyi, g.o, wp, ldw, false, dxi, g.k, NULL);
            continue;
        }
        gemm(g.es, false, tb, nb * g.m, g.k, g.o, dyi, g.o, wp, ldw, false, ws, g.k, NULL);
        memset(dxi, 0, (size_t)(nb * g.h * g.w * g.c) * es);
        if (es == sizeof(float))
            col2im_f32(ws, &g, nb, (float *)(void *)dxi);
        else
            col2im_f64(ws, &g, nb, (double *)(void *)dxi);
    }
    free(wt);
    return FVM_OK;
}

static fvm_status conv2d_grad_filter_ws(fvm_kernel_gemm_fn gemm, const fvm_tensor *x, const fvm_tensor *dy,
                                        const fvm_window *win, void *ws, size_t ws_bytes, fvm_tensor *dw, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "conv2d_grad_filter: x");
    KREQUIRE_TENSOR(d, dy, "conv2d_grad_filter: dy");
    KREQUIRE_TENSOR(d, dw, "conv2d_grad_filter: dw");
    conv_geom g;
    KUSAGE_CHECK(conv_same_dtype("conv2d_grad_filter", x, dy, d));
    KREQUIRE(d, dw->dtype == x->dtype, "conv2d_grad_filter: dw must have x's dtype");
    KUSAGE_CHECK(conv_plan(x->dtype, &x->shape, &dw->shape, win, &g, d));
    fvm_dims want = dims4(g.n, g.oh, g.ow, g.o);
    KREQUIRE(d, fvm_dims_equal(&dy->shape, &want), "conv2d_grad_filter: dy must have shape [N,OH,OW,O]");
    KREQUIRE_WS(d, g, ws, ws_bytes);
    if (fvm_tensor_count(dw) == 0)
        return FVM_OK;
    unsigned char *dwp = kernel_bytes(dw);
    if (g.n == 0 || g.m == 0) { /* no patches: empty sums */
        memset(dwp, 0, fvm_tensor_bytes(dw));
        return FVM_OK;
    }
    const unsigned char *xp = kernel_bytes(x), *dyp = kernel_bytes(dy);
    size_t es = g.es;
    void *tmp = g.scratch > g.col_bytes ? (unsigned char *)ws + g.col_bytes : NULL; /* a group's product */
    for (int64_t i0 = 0; i0 < g.n; i0 += g.group) {
        int64_t nb = g.n - i0 < g.group ? g.n - i0 : g.group;
        const unsigned char *xi = xp + (size_t)(i0 * g.h * g.w * g.c) * es;
        const void *a = xi;
        if (!g.direct) {
            im2col(xi, &g, nb, ws);
            a = ws;
        }
        gemm(g.es, true, false, g.k, g.o, nb * g.m, a, g.k, dyp + (size_t)(i0 * g.m * g.o) * es, g.o, i0 > 0, dwp, g.o,
             tmp);
    }
    return FVM_OK;
}

/* The allocating versions: the scratch of fvm_conv2d_workspace, malloc'd once. */
static fvm_status conv_scratch(const fvm_tensor *x_like, const fvm_tensor *w_like, const fvm_window *win,
                               const fvm_tensor *a, const fvm_tensor *b, void **ws, size_t *bytes, fvm_diag *d)
{
    *ws = NULL;
    *bytes = 0;
    KREQUIRE_TENSOR(d, a, "conv2d: operand");
    KREQUIRE_TENSOR(d, b, "conv2d: operand");
    KUSAGE_CHECK(conv_same_dtype("conv2d", a, b, d));
    KUSAGE_CHECK(fvm_conv2d_workspace(a->dtype, &x_like->shape, &w_like->shape, win, bytes, d));
    if (*bytes > 0 && !(*ws = malloc(*bytes)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "conv2d: out of memory for a %zu-byte scratch buffer", *bytes);
    return FVM_OK;
}

fvm_status fvm_kernel_conv2d(fvm_kernel_gemm_fn gemm, const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win,
                             fvm_tensor *y, fvm_diag *d)
{
    void *ws = NULL;
    size_t bytes = 0;
    fvm_status st = conv_scratch(x, w, win, x, w, &ws, &bytes, d);
    if (st == FVM_OK)
        st = conv2d_ws(gemm, x, w, win, ws, bytes, y, d);
    free(ws);
    return st;
}

fvm_status fvm_kernel_conv2d_grad_input(fvm_kernel_gemm_fn gemm, const fvm_tensor *dy, const fvm_tensor *w,
                                        const fvm_window *win, fvm_tensor *dx, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, dx, "conv2d_grad_input: dx");
    void *ws = NULL;
    size_t bytes = 0;
    fvm_status st = conv_scratch(dx, w, win, dy, w, &ws, &bytes, d);
    if (st == FVM_OK)
        st = conv2d_grad_input_ws(gemm, dy, w, win, ws, bytes, dx, d);
    free(ws);
    return st;
}

fvm_status fvm_kernel_conv2d_grad_filter(fvm_kernel_gemm_fn gemm, const fvm_tensor *x, const fvm_tensor *dy,
                                         const fvm_window *win, fvm_tensor *dw, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, dw, "conv2d_grad_filter: dw");
    void *ws = NULL;
    size_t bytes = 0;
    fvm_status st = conv_scratch(x, dw, win, x, dy, &ws, &bytes, d);
    if (st == FVM_OK)
        st = conv2d_grad_filter_ws(gemm, x, dy, win, ws, bytes, dw, d);
    free(ws);
    return st;
}

fvm_status fvm_k_conv2d_ws(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, void *ws, size_t ws_bytes,
                           fvm_tensor *y, fvm_diag *d)
{
    return conv2d_ws(cpu_gemm, x, w, win, ws, ws_bytes, y, d);
}

fvm_status fvm_k_conv2d_grad_input_ws(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win, void *ws,
                                      size_t ws_bytes, fvm_tensor *dx, fvm_diag *d)
{
    return conv2d_grad_input_ws(cpu_gemm, dy, w, win, ws, ws_bytes, dx, d);
}

fvm_status fvm_k_conv2d_grad_filter_ws(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win, void *ws,
                                       size_t ws_bytes, fvm_tensor *dw, fvm_diag *d)
{
    return conv2d_grad_filter_ws(cpu_gemm, x, dy, win, ws, ws_bytes, dw, d);
}

fvm_status fvm_k_conv2d(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, fvm_tensor *y, fvm_diag *d)
{
    return fvm_kernel_conv2d(cpu_gemm, x, w, win, y, d);
}

fvm_status fvm_k_conv2d_grad_input(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win, fvm_tensor *dx,
                                   fvm_diag *d)
{
    return fvm_kernel_conv2d_grad_input(cpu_gemm, dy, w, win, dx, d);
}

fvm_status fvm_k_conv2d_grad_filter(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win, fvm_tensor *dw,
                                    fvm_diag *d)
{
    return fvm_kernel_conv2d_grad_filter(cpu_gemm, x, dy, win, dw, d);
}

/* ---- pooling ------------------------------------------------------------- */

typedef struct pool_geom {
    int64_t n, h, w, c, kh, kw, sh, sw, ph, pw, oh, ow;
} pool_geom;

static fvm_status pool_plan(const char *what, const fvm_tensor *x, const fvm_window *win, pool_geom *g, fvm_diag *d)
{
    if (x->dtype != FVM_DTYPE_F32 && x->dtype != FVM_DTYPE_F64)
        return kernel_type_error(d, what, x->dtype);
    KREQUIRE(d, x->shape.rank == 4, "%s: x must have rank 4 (got %d)", what, x->shape.rank);
    *g = (pool_geom){.n = x->shape.d[0],
                     .h = x->shape.d[1],
                     .w = x->shape.d[2],
                     .c = x->shape.d[3],
                     .kh = win->kh,
                     .kw = win->kw,
                     .sh = win->sh,
                     .sw = win->sw};
    KREQUIRE(d,
             fvm_window_out(g->h, g->kh, g->sh, win->same, &g->oh, &g->ph, NULL) == FVM_OK &&
                 fvm_window_out(g->w, g->kw, g->sw, win->same, &g->ow, &g->pw, NULL) == FVM_OK,
             "%s: window %lldx%lld, strides %lldx%lld do not fit a %lldx%lld image", what, (long long)win->kh,
             (long long)win->kw, (long long)win->sh, (long long)win->sw, (long long)g->h, (long long)g->w);
    return FVM_OK;
}

/* The window of output (oh, ow): its top-left corner (ih0, iw0) in x and the
 * window rows [ilo, ihi) and columns [jlo, jhi) inside the image (never empty
 * for a non-empty image, see kernels_nn.h). */
typedef struct pool_win {
    int64_t ih0, iw0, ilo, ihi, jlo, jhi;
} pool_win;

static inline pool_win pool_window(const pool_geom *g, int64_t oh, int64_t ow)
{
    pool_win p;
    p.ih0 = oh * g->sh - g->ph;
    p.iw0 = ow * g->sw - g->pw;
    p.ilo = p.ih0 < 0 ? -p.ih0 : 0;
    p.ihi = g->h - p.ih0 < g->kh ? g->h - p.ih0 : g->kh;
    p.jlo = p.iw0 < 0 ? -p.iw0 : 0;
    p.jhi = g->w - p.iw0 < g->kw ? g->w - p.iw0 : g->kw;
    return p;
}

/* v replaces the running maximum m when larger, or when it is the first NaN. */
#define POOL_BETTER(v, m) ((v) > (m) || ((v) != (v) && (m) == (m)))

/* An output channel block handled at once by the max-pool gradient. */
enum { POOL_CB = 64 };

#define POOL_FNS(S, T) \
    static void pool_fwd_##S(fvm_pool kind, const pool_geom *g, const T *x, T *y) \
    { \
        int64_t c = g->c; \
        for (int64_t n = 0; n < g->n; n++) { \
            const T *img = x + n * g->h * g->w * c; \
            for (int64_t oh = 0; oh < g->oh; oh++) \
                for (int64_t ow = 0; ow < g->ow; ow++, y += c) { \
                    pool_win p = pool_window(g, oh, ow); \
                    bool first = true; \
                    for (int64_t i = p.ilo; i < p.ihi; i++) \
                        for (int64_t j = p.jlo; j < p.jhi; j++) { \
                            const T *xi = img + ((p.ih0 + i) * g->w + p.iw0 + j) * c; \
                            if (first) \
                                memcpy(y, xi, (size_t)c * sizeof(T)); \
                            else if (kind == FVM_POOL_MAX) \
                                KERNEL_FOR(e, c, y[e] = POOL_BETTER(xi[e], y[e]) ? xi[e] : y[e];); \
                            else \
                                KERNEL_FOR(e, c, y[e] += xi[e];); \
                            first = false; \
                        } \
                    if (kind == FVM_POOL_AVG) { \
                        T cnt = (T)((p.ihi - p.ilo) * (p.jhi - p.jlo)); \
                        KERNEL_FOR(e, c, y[e] /= cnt;); \
                    } \
                } \
        } \
    } \
    /* dx is zeroed by the caller */ \
    KERNEL_CLONES static void pool_bwd_##S(fvm_pool kind, const pool_geom *g, const T *x, const T *dy, T *dx) \
    { \
        int64_t c = g->c; \
        for (int64_t n = 0; n < g->n; n++) { \
            int64_t base = n * g->h * g->w * c; \
            for (int64_t oh = 0; oh < g->oh; oh++) \
                for (int64_t ow = 0; ow < g->ow; ow++, dy += c) { \
                    pool_win p = pool_window(g, oh, ow); \
                    if (kind == FVM_POOL_AVG) { \
                        T cnt = (T)((p.ihi - p.ilo) * (p.jhi - p.jlo)); \
                        for (int64_t i = p.ilo; i < p.ihi; i++) \
                            for (int64_t j = p.jlo; j < p.jhi; j++) { \
                                T *dxi = dx + base + ((p.ih0 + i) * g->w + p.iw0 + j) * c; \
                                KERNEL_FOR(e, c, dxi[e] += dy[e] / cnt;); \
                            } \
                        continue; \
                    } \
                    for (int64_t c0 = 0; c0 < c; c0 += POOL_CB) { \
                        int64_t cn = c - c0 < POOL_CB ? c - c0 : POOL_CB; \
                        const T *dyb = dy + c0; \
                        T best[POOL_CB], pending[POOL_CB]; \
                        bool first = true; \
                        for (int64_t i = p.ilo; i < p.ihi; i++) \
                            for (int64_t j = p.jlo; j < p.jhi; j++) { \
                                const T *xi = x + base + ((p.ih0 + i) * g->w + p.iw0 + j) * c + c0; \
                                if (first) \
                                    memcpy(best, xi, (size_t)cn * sizeof(T)); \
                                else \
                                    KERNEL_FOR(e, cn, best[e] = POOL_BETTER(xi[e], best[e]) ? xi[e] : best[e];); \
                                first = false; \
                            } \
                        /* the first element equal to the maximum (the first NaN) takes dy: where the */ \
                        /* forward pass's scan settled; element-wise selects, so the loop vectorises */ \
                        KERNEL_FOR(e, cn, pending[e] = 1;); \
                        for (int64_t i = p.ilo; i < p.ihi; i++) \
                            for (int64_t j = p.jlo; j < p.jhi; j++) { \
                                int64_t off = base + ((p.ih0 + i) * g->w + p.iw0 + j) * c + c0; \
                                const T *xi = x + off; \
                                T *dxi = dx + off; \
                                KERNEL_FOR(e, cn, \
                                           bool hit = pending[e] != 0 && \
                                                      (xi[e] == best[e] || (xi[e] != xi[e] && best[e] != best[e])); \
                                           dxi[e] = hit ? dxi[e] + dyb[e] : dxi[e]; \
                                           pending[e] = hit ? 0 : pending[e];); \
                            } \
                    } \
                } \
        } \
    } \
    /* y[window, e] = u at the element max pooling of x chooses in the window */ \
    static void pool_gather_##S(const pool_geom *g, const T *x, const T *u, T *y) \
    { \
        int64_t c = g->c; \
        for (int64_t n = 0; n < g->n; n++) { \
            int64_t base = n * g->h * g->w * c; \
            for (int64_t oh = 0; oh < g->oh; oh++) \
                for (int64_t ow = 0; ow < g->ow; ow++, y += c) { \
                    pool_win p = pool_window(g, oh, ow); \
                    for (int64_t c0 = 0; c0 < c; c0 += POOL_CB) { \
                        int64_t cn = c - c0 < POOL_CB ? c - c0 : POOL_CB; \
                        T best[POOL_CB]; \
                        bool first = true; \
                        for (int64_t i = p.ilo; i < p.ihi; i++) \
                            for (int64_t j = p.jlo; j < p.jhi; j++) { \
                                int64_t off = base + ((p.ih0 + i) * g->w + p.iw0 + j) * c + c0; \
                                for (int64_t e = 0; e < cn; e++) { \
                                    T v = x[off + e]; \
                                    if (first || POOL_BETTER(v, best[e])) { \
                                        best[e] = v; \
                                        y[c0 + e] = u[off + e]; \
                                    } \
                                } \
                                first = false; \
                            } \
                    } \
                } \
        } \
    }

POOL_FNS(f32, float)
POOL_FNS(f64, double)

static fvm_status pool_kind_ok(fvm_pool kind, const char *what, fvm_diag *d)
{
    if (kind != FVM_POOL_MAX && kind != FVM_POOL_AVG)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "%s: unknown pooling kind %d", what, (int)kind);
    return FVM_OK;
}

fvm_status fvm_k_pool(fvm_pool kind, const fvm_tensor *x, const fvm_window *win, fvm_tensor *y, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "pool: x");
    KREQUIRE_TENSOR(d, y, "pool: y");
    fvm_status st = pool_kind_ok(kind, "pool", d);
    if (st != FVM_OK)
        return st;
    pool_geom g;
    if ((st = pool_plan("pool", x, win, &g, d)) != FVM_OK)
        return st;
    fvm_dims want = dims4(g.n, g.oh, g.ow, g.c);
    KREQUIRE(d, y->dtype == x->dtype && fvm_dims_equal(&y->shape, &want),
             "pool: y must have x's dtype and shape [N,OH,OW,C]");
    if (fvm_tensor_count(y) == 0)
        return FVM_OK;
    if (x->dtype == FVM_DTYPE_F32)
        pool_fwd_f32(kind, &g, (const float *)(const void *)kernel_bytes(x), (float *)(void *)kernel_bytes(y));
    else
        pool_fwd_f64(kind, &g, (const double *)(const void *)kernel_bytes(x), (double *)(void *)kernel_bytes(y));
    return FVM_OK;
}

fvm_status fvm_k_pool_grad(fvm_pool kind, const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win,
                           fvm_tensor *dx, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "pool_grad: x");
    KREQUIRE_TENSOR(d, dy, "pool_grad: dy");
    KREQUIRE_TENSOR(d, dx, "pool_grad: dx");
    fvm_status st = pool_kind_ok(kind, "pool_grad", d);
    if (st != FVM_OK)
        return st;
    if ((st = conv_same_dtype("pool_grad", x, dy, d)) != FVM_OK)
        return st;
    pool_geom g;
    if ((st = pool_plan("pool_grad", x, win, &g, d)) != FVM_OK)
        return st;
    fvm_dims want = dims4(g.n, g.oh, g.ow, g.c);
    KREQUIRE(d, fvm_dims_equal(&dy->shape, &want), "pool_grad: dy must have shape [N,OH,OW,C]");
    KREQUIRE(d, dx->dtype == x->dtype && fvm_dims_equal(&dx->shape, &x->shape),
             "pool_grad: dx must have x's dtype and shape");
    if (fvm_tensor_count(dx) == 0)
        return FVM_OK;
    memset(kernel_bytes(dx), 0, fvm_tensor_bytes(dx));
    if (x->dtype == FVM_DTYPE_F32)
        pool_bwd_f32(kind, &g, (const float *)(const void *)kernel_bytes(x),
                     (const float *)(const void *)kernel_bytes(dy), (float *)(void *)kernel_bytes(dx));
    else
        pool_bwd_f64(kind, &g, (const double *)(const void *)kernel_bytes(x),
                     (const double *)(const void *)kernel_bytes(dy), (double *)(void *)kernel_bytes(dx));
    return FVM_OK;
}

fvm_status fvm_k_pool_gather(const fvm_tensor *x, const fvm_tensor *u, const fvm_window *win, fvm_tensor *y,
                             fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "pool_gather: x");
    KREQUIRE_TENSOR(d, u, "pool_gather: u");
    KREQUIRE_TENSOR(d, y, "pool_gather: y");
    fvm_status st = conv_same_dtype("pool_gather", x, u, d);
    if (st != FVM_OK)
        return st;
    pool_geom g;
    if ((st = pool_plan("pool_gather", x, win, &g, d)) != FVM_OK)
        return st;
    KREQUIRE(d, fvm_dims_equal(&u->shape, &x->shape), "pool_gather: u must have x's shape");
    fvm_dims want = dims4(g.n, g.oh, g.ow, g.c);
    KREQUIRE(d, y->dtype == x->dtype && fvm_dims_equal(&y->shape, &want),
             "pool_gather: y must have x's dtype and shape [N,OH,OW,C]");
    if (fvm_tensor_count(y) == 0)
        return FVM_OK;
    if (x->dtype == FVM_DTYPE_F32)
        pool_gather_f32(&g, (const float *)(const void *)kernel_bytes(x), (const float *)(const void *)kernel_bytes(u),
                        (float *)(void *)kernel_bytes(y));
    else
        pool_gather_f64(&g, (const double *)(const void *)kernel_bytes(x),
                        (const double *)(const void *)kernel_bytes(u), (double *)(void *)kernel_bytes(y));
    return FVM_OK;
}
