/* test_kernels_nn.c - unit tests for the neural-network kernels against hand values, naive loops and finite differences. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/kernels/kernels_nn.h"
#include "../vm/core/prng.h"
#include "../vm/kernels/f32math.h"
#include "test_tensors.h"

/* ---- helpers ------------------------------------------------------------- */

static const fvm_dtype FLOATS[] = {FVM_DTYPE_F32, FVM_DTYPE_F64};

/* A tensor of dtype t holding v (rounded to t). */
static fvm_tensor from(fvm_dtype t, fvm_dims s, const double *v)
{
    fvm_tensor x = junk(t, s);
    for (int64_t i = 0; i < fvm_tensor_count(&x); i++)
        fvm_tensor_set_f64(&x, i, v[i]);
    return x;
}
#define TD(t, shape, ...) from(t, shape, (const double[]){__VA_ARGS__})
#define I32(shape, ...) ints(FVM_DTYPE_I32, shape, (const int64_t[]){__VA_ARGS__})
#define I64(shape, ...) ints(FVM_DTYPE_I64, shape, (const int64_t[]){__VA_ARGS__})

static fvm_tensor ints(fvm_dtype t, fvm_dims s, const int64_t *v)
{
    fvm_tensor x = junk(t, s);
    for (int64_t i = 0; i < fvm_tensor_count(&x); i++)
        fvm_tensor_set_i64(&x, i, v[i]);
    return x;
}

/* The elements of t as doubles, in a malloc'd array. */
static double *values(const fvm_tensor *t)
{
    int64_t n = fvm_tensor_count(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = fvm_tensor_get_f64(t, i);
    return v;
}

static void release(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        fvm_tensor_release(va_arg(ap, fvm_tensor *));
    va_end(ap);
}

/* Every element within rel * scale[i] (or rel * |want[i]| when scale is
 * NULL) plus abs of want[i]. */
static void expect_close(const fvm_tensor *t, const double *want, const double *scale, double rel, double abs,
                         const char *what)
{
    for (int64_t i = 0; i < fvm_tensor_count(t); i++) {
        double got = fvm_tensor_get_f64(t, i), s = scale ? scale[i] : fabs(want[i]);
        if (!(fabs(got - want[i]) <= rel * s + abs))
            fail_msg("%s: element %lld is %.17g, expected %.17g (scale %.3g)", what, (long long)i, got, want[i], s);
    }
}

static bool untouched(const fvm_tensor *t)
{
    const unsigned char *p = fvm_tensor_data(t);
    for (size_t i = 0; i < fvm_tensor_bytes(t); i++)
        if (p[i] != 0xa5)
            return false;
    return true;
}

/* splitmix64: reproducible test data. */
static uint64_t rng_state;
static void rng_seed(uint64_t s)
{
    rng_state = s;
}
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1). */
static double rng_unit(void)
{
    return (double)(rng_next() >> 11) * 0x1p-52 - 1.0;
}
static fvm_tensor rand_tensor(fvm_dtype t, fvm_dims s)
{
    fvm_tensor x = junk(t, s);
    for (int64_t i = 0; i < fvm_tensor_count(&x); i++)
        fvm_tensor_set_f64(&x, i, rng_unit());
    return x;
}

/* <a, r> in long double. */
static double dot_with(const fvm_tensor *a, const double *r)
{
    long double s = 0;
    for (int64_t i = 0; i < fvm_tensor_count(a); i++)
        s += (long double)fvm_tensor_get_f64(a, i) * r[i];
    return (double)s;
}
static double dot_tt(const fvm_tensor *a, const fvm_tensor *b)
{
    long double s = 0;
    for (int64_t i = 0; i < fvm_tensor_count(a); i++)
        s += (long double)fvm_tensor_get_f64(a, i) * fvm_tensor_get_f64(b, i);
    return (double)s;
}

/* The central-difference check: |fd - g| <= 1e-6 * max(|g|, 1e-3). */
static void expect_fd(double fd, double g, const char *what, int64_t i)
{
    double rel = fabs(fd - g) / fmax(fabs(g), 1e-3);
    if (!(rel < 1e-6))
        fail_msg("%s: element %lld: finite difference %.15g, gradient %.15g (relative error %.3g)", what, (long long)i,
                 fd, g, rel);
}

/* ---- windows ------------------------------------------------------------- */

/* TensorFlow's rule written out: SAME out = ceil(in/s), padding
 * max((out-1)*s + k - in, 0) split with the smaller half before. */
static void ref_window(int64_t in, int64_t k, int64_t s, bool same, int64_t *out, int64_t *pad)
{
    if (same) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + k - in;
        *pad = total > 0 ? total / 2 : 0;
    } else {
        *out = (in - k) / s + 1;
        *pad = 0;
    }
}

static void test_window_out(void **state)
{
    (void)state;
    fvm_diag d = {0};
    int64_t o = 0, p = 0;
    assert_int_equal(fvm_window_out(28, 5, 1, true, &o, &p, &d), FVM_OK);
    assert_true(o == 28 && p == 2);
    assert_int_equal(fvm_window_out(28, 5, 2, true, &o, &p, &d), FVM_OK); /* total 3: 1 before, 2 after */
    assert_true(o == 14 && p == 1);
    assert_int_equal(fvm_window_out(7, 2, 2, true, &o, &p, &d), FVM_OK); /* total 1: all after */
    assert_true(o == 4 && p == 0);
    assert_int_equal(fvm_window_out(4, 2, 2, true, &o, &p, &d), FVM_OK); /* no padding */
    assert_true(o == 2 && p == 0);
    assert_int_equal(fvm_window_out(3, 7, 1, true, &o, &p, &d), FVM_OK); /* window larger than the image */
    assert_true(o == 3 && p == 3);
    assert_int_equal(fvm_window_out(0, 3, 1, true, &o, &p, &d), FVM_OK);
    assert_true(o == 0 && p == 0);
    assert_int_equal(fvm_window_out(7, 3, 2, false, &o, &p, &d), FVM_OK);
    assert_true(o == 3 && p == 0);
    assert_int_equal(fvm_window_out(5, 5, 3, false, &o, NULL, &d), FVM_OK);
    assert_true(o == 1);
    assert_int_equal(fvm_window_out(-1, 3, 2, true, &o, &p, &d), FVM_OK);
    assert_true(o == -1 && p == -1);
    assert_int_equal(fvm_window_out(-1, 3, 2, false, &o, &p, &d), FVM_OK);
    assert_true(o == -1 && p == 0);
    for (int64_t in = 1; in <= 12; in++)
        for (int64_t k = 1; k <= 6; k++)
            for (int64_t s = 1; s <= 4; s++)
                for (int same = 0; same < 2; same++) {
                    if (!same && in < k)
                        continue;
                    int64_t ro, rp;
                    ref_window(in, k, s, same, &ro, &rp);
                    assert_int_equal(fvm_window_out(in, k, s, same, &o, &p, &d), FVM_OK);
                    assert_true(o == ro && p == rp);
                }
    assert_int_equal(d.n, 0);
    o = 99;
    assert_int_equal(fvm_window_out(4, 5, 1, false, &o, &p, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "larger than the image side 4", NULL);
    assert_int_equal(o, 99);
    assert_int_equal(fvm_window_out(4, 0, 1, true, &o, &p, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "at least 1", NULL);
    assert_int_equal(fvm_window_out(4, 2, 0, false, &o, &p, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "at least 1", NULL);
    assert_int_equal(fvm_window_out(-2, 2, 1, false, &o, &p, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "negative", NULL);
}

/* ---- conv2d -------------------------------------------------------------- */

typedef struct conv_case {
    int64_t n, h, w, c, kh, kw, o, sh, sw;
    bool same;
} conv_case;

static const conv_case CONV_CASES[] = {
    {2, 5, 5, 1, 3, 3, 2, 1, 1, true}, /* odd sizes, SAME */
    {2, 6, 7, 3, 3, 3, 4, 1, 1, false}, /* VALID */
    {1, 7, 6, 2, 2, 3, 3, 2, 2, true}, /* even filter side, stride 2 */
    {3, 8, 8, 4, 4, 4, 5, 2, 2, true}, /* even everything */
    {2, 9, 8, 3, 3, 2, 2, 2, 1, false}, /* mixed strides */
    {3, 11, 10, 3, 3, 3, 4, 2, 2, false}, /* stride 2, VALID, leftover rows */
    {2, 5, 5, 3, 1, 1, 4, 1, 1, true}, /* 1x1, strides 1: no im2col */
    {2, 6, 6, 3, 1, 1, 2, 2, 2, false}, /* 1x1, stride 2 */
    {1, 4, 4, 2, 5, 5, 3, 1, 1, true}, /* filter larger than the image */
    {2, 3, 3, 1, 5, 5, 2, 3, 3, true}, /* one output, padding on all sides */
    {2, 28, 28, 1, 5, 5, 32, 1, 1, true}, /* the CNN's first layer */
    {5, 14, 14, 32, 5, 5, 8, 1, 1, true}, /* the CNN's second layer */
    {9, 14, 14, 32, 5, 5, 4, 1, 1, true}, /* ... in several gemm groups (f32 and f64) */
    {3, 10, 9, 16, 3, 3, 6, 2, 2, true}, /* many channels, stride 2 */
};

typedef struct conv_ref {
    int64_t oh, ow, ph, pw;
} conv_ref;

static conv_ref ref_geom(const conv_case *cc)
{
    conv_ref r;
    ref_window(cc->h, cc->kh, cc->sh, cc->same, &r.oh, &r.ph);
    ref_window(cc->w, cc->kw, cc->sw, cc->same, &r.ow, &r.pw);
    return r;
}

#define X_AT(n, i, j, c) ((((n)*cc->h + (i)) * cc->w + (j)) * cc->c + (c))
#define W_AT(i, j, c, o) ((((i)*cc->kw + (j)) * cc->c + (c)) * cc->o + (o))
#define Y_AT(n, i, j, o) ((((n)*r.oh + (i)) * r.ow + (j)) * cc->o + (o))

/* The direct 7-loop convolution; abs gets the sum of |terms| per output. */
static void naive_conv(const conv_case *cc, const double *x, const double *w, double *y, double *abs)
{
    conv_ref r = ref_geom(cc);
    for (int64_t n = 0; n < cc->n; n++)
        for (int64_t oh = 0; oh < r.oh; oh++)
            for (int64_t ow = 0; ow < r.ow; ow++)
                for (int64_t o = 0; o < cc->o; o++) {
                    long double s = 0, a = 0;
                    for (int64_t i = 0; i < cc->kh; i++)
                        for (int64_t j = 0; j < cc->kw; j++)
                            for (int64_t c = 0; c < cc->c; c++) {
                                int64_t ih = oh * cc->sh + i - r.ph, iw = ow * cc->sw + j - r.pw;
                                if (ih < 0 || ih >= cc->h || iw < 0 || iw >= cc->w)
                                    continue;
                                long double t = (long double)x[X_AT(n, ih, iw, c)] * w[W_AT(i, j, c, o)];
                                s += t;
                                a += fabsl(t);
                            }
                    y[Y_AT(n, oh, ow, o)] = (double)s;
                    abs[Y_AT(n, oh, ow, o)] = (double)a;
                }
}

/* dx[n,ih,iw,c] = sum of dy[n,oh,ow,o] * w[i,j,c,o] over the outputs that read x[n,ih,iw,c]. */
static void naive_grad_input(const conv_case *cc, const double *dy, const double *w, double *dx, double *abs)
{
    conv_ref r = ref_geom(cc);
    int64_t nx = cc->n * cc->h * cc->w * cc->c;
    long double *s = calloc((size_t)nx, sizeof *s), *a = calloc((size_t)nx, sizeof *a);
    assert_true(s && a);
    for (int64_t n = 0; n < cc->n; n++)
        for (int64_t oh = 0; oh < r.oh; oh++)
            for (int64_t ow = 0; ow < r.ow; ow++)
                for (int64_t o = 0; o < cc->o; o++)
                    for (int64_t i = 0; i < cc->kh; i++)
                        for (int64_t j = 0; j < cc->kw; j++)
                            for (int64_t c = 0; c < cc->c; c++) {
                                int64_t ih = oh * cc->sh + i - r.ph, iw = ow * cc->sw + j - r.pw;
                                if (ih < 0 || ih >= cc->h || iw < 0 || iw >= cc->w)
                                    continue;
                                long double t = (long double)dy[Y_AT(n, oh, ow, o)] * w[W_AT(i, j, c, o)];
                                s[X_AT(n, ih, iw, c)] += t;
                                a[X_AT(n, ih, iw, c)] += fabsl(t);
                            }
    for (int64_t e = 0; e < nx; e++) {
        dx[e] = (double)s[e];
        abs[e] = (double)a[e];
    }
    free(s);
    free(a);
}

/* dw[i,j,c,o] = sum of x[n,ih,iw,c] * dy[n,oh,ow,o] over images and outputs. */
static void naive_grad_filter(const conv_case *cc, const double *x, const double *dy, double *dw, double *abs)
{
    conv_ref r = ref_geom(cc);
    for (int64_t i = 0; i < cc->kh; i++)
        for (int64_t j = 0; j < cc->kw; j++)
            for (int64_t c = 0; c < cc->c; c++)
                for (int64_t o = 0; o < cc->o; o++) {
                    long double s = 0, a = 0;
                    for (int64_t n = 0; n < cc->n; n++)
                        for (int64_t oh = 0; oh < r.oh; oh++)
                            for (int64_t ow = 0; ow < r.ow; ow++) {
                                int64_t ih = oh * cc->sh + i - r.ph, iw = ow * cc->sw + j - r.pw;
                                if (ih < 0 || ih >= cc->h || iw < 0 || iw >= cc->w)
                                    continue;
                                long double t = (long double)x[X_AT(n, ih, iw, c)] * dy[Y_AT(n, oh, ow, o)];
                                s += t;
                                a += fabsl(t);
                            }
                    dw[W_AT(i, j, c, o)] = (double)s;
                    abs[W_AT(i, j, c, o)] = (double)a;
                }
}

static fvm_window window_of(const conv_case *cc)
{
    return (fvm_window){.kh = cc->kh, .kw = cc->kw, .sh = cc->sh, .sw = cc->sw, .same = cc->same};
}

/* Relative tolerance against the sum of |terms|: a few hundred roundings. */
static double conv_tol(fvm_dtype t)
{
    return t == FVM_DTYPE_F32 ? 3e-5 : 1e-12;
}

static void check_conv_case(const conv_case *cc, fvm_dtype t)
{
    fvm_diag d = {0};
    conv_ref r = ref_geom(cc);
    fvm_window win = window_of(cc);
    fvm_dims xs = D4(cc->n, cc->h, cc->w, cc->c), ws = D4(cc->kh, cc->kw, cc->c, cc->o);
    fvm_dims ys = D4(cc->n, r.oh, r.ow, cc->o);
    fvm_tensor x = rand_tensor(t, xs), w = rand_tensor(t, ws), dy = rand_tensor(t, ys);
    double *xv = values(&x), *wv = values(&w), *dyv = values(&dy);
    int64_t nx = fvm_tensor_count(&x), nw = fvm_tensor_count(&w), ny = fvm_tensor_count(&dy);
    double *ref = malloc((size_t)(nx + nw + ny) * sizeof *ref), *abs = malloc((size_t)(nx + nw + ny) * sizeof *abs);
    assert_true(ref && abs);
    char what[160];
    snprintf(what, sizeof what, "%s conv [%lld,%lld,%lld,%lld] * [%lld,%lld,%lld,%lld] /%lldx%lld %s",
             fvm_dtype_name(t), (long long)cc->n, (long long)cc->h, (long long)cc->w, (long long)cc->c,
             (long long)cc->kh, (long long)cc->kw, (long long)cc->c, (long long)cc->o, (long long)cc->sh,
             (long long)cc->sw, cc->same ? "SAME" : "VALID");

    /* forward */
    fvm_tensor y = junk(t, ys), y2 = junk(t, ys);
    assert_int_equal(fvm_k_conv2d(&x, &w, &win, &y, &d), FVM_OK);
    naive_conv(cc, xv, wv, ref, abs);
    expect_close(&y, ref, abs, conv_tol(t), 0, what);
    assert_int_equal(fvm_k_conv2d(&x, &w, &win, &y2, &d), FVM_OK);
    assert_true(fvm_tensor_identical(&y, &y2)); /* same inputs, same bits */

    /* with a caller's workspace: the same bits */
    size_t bytes = 1;
    assert_int_equal(fvm_conv2d_workspace(t, &xs, &ws, &win, &bytes, &d), FVM_OK);
    if (cc->kh == 1 && cc->kw == 1 && cc->sh == 1 && cc->sw == 1)
        assert_true(bytes == 0);
    else
        assert_true(bytes >= (size_t)(r.oh * r.ow * cc->kh * cc->kw * cc->c) * fvm_dtype_size(t));
    void *scratch = bytes ? malloc(bytes) : NULL;
    memset(fvm_tensor_data(&y2), 0xa5, fvm_tensor_bytes(&y2));
    assert_int_equal(fvm_k_conv2d_ws(&x, &w, &win, scratch, bytes, &y2, &d), FVM_OK);
    assert_true(fvm_tensor_identical(&y, &y2));

    /* gradient with respect to x */
    fvm_tensor dx = junk(t, xs), dx2 = junk(t, xs);
    assert_int_equal(fvm_k_conv2d_grad_input(&dy, &w, &win, &dx, &d), FVM_OK);
    naive_grad_input(cc, dyv, wv, ref, abs);
    expect_close(&dx, ref, abs, conv_tol(t), 0, what);
    assert_int_equal(fvm_k_conv2d_grad_input_ws(&dy, &w, &win, scratch, bytes, &dx2, &d), FVM_OK);
    assert_true(fvm_tensor_identical(&dx, &dx2));

    /* gradient with respect to w */
    fvm_tensor dw = junk(t, ws), dw2 = junk(t, ws);
    assert_int_equal(fvm_k_conv2d_grad_filter(&x, &dy, &win, &dw, &d), FVM_OK);
    naive_grad_filter(cc, xv, dyv, ref, abs);
    expect_close(&dw, ref, abs, conv_tol(t), 0, what);
    assert_int_equal(fvm_k_conv2d_grad_filter_ws(&x, &dy, &win, scratch, bytes, &dw2, &d), FVM_OK);
    assert_true(fvm_tensor_identical(&dw, &dw2));
    assert_int_equal(d.n, 0);

    free(scratch);
    free(xv);
    free(wv);
    free(dyv);
    free(ref);
    free(abs);
    release(9, &x, &w, &dy, &y, &y2, &dx, &dx2, &dw, &dw2);
}

static void test_conv2d_naive(void **state)
{
    (void)state;
    rng_seed(1);
    for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++)
        for (int k = 0; k < 2; k++)
            check_conv_case(&CONV_CASES[i], FLOATS[k]);
}

/* f(x, w) = sum(conv2d(x, w) * r) in f64. */
static double conv_objective(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, fvm_tensor *y,
                             const double *r)
{
    assert_int_equal(fvm_k_conv2d(x, w, win, y, NULL), FVM_OK);
    return dot_with(y, r);
}

/* Both gradients of f by central differences, element by element. */
static void check_conv_fd(const conv_case *cc)
{
    const double h = 1e-3;
    conv_ref r = ref_geom(cc);
    fvm_window win = window_of(cc);
    fvm_dims xs = D4(cc->n, cc->h, cc->w, cc->c), ws = D4(cc->kh, cc->kw, cc->c, cc->o);
    fvm_dims ys = D4(cc->n, r.oh, r.ow, cc->o);
    fvm_tensor x = rand_tensor(FVM_DTYPE_F64, xs), w = rand_tensor(FVM_DTYPE_F64, ws);
    fvm_tensor rt = rand_tensor(FVM_DTYPE_F64, ys), y = junk(FVM_DTYPE_F64, ys);
    fvm_tensor dx = junk(FVM_DTYPE_F64, xs), dw = junk(FVM_DTYPE_F64, ws);
    double *rv = values(&rt);
    assert_int_equal(fvm_k_conv2d_grad_input(&rt, &w, &win, &dx, NULL), FVM_OK);
    assert_int_equal(fvm_k_conv2d_grad_filter(&x, &rt, &win, &dw, NULL), FVM_OK);
    double *xp = fvm_tensor_data(&x), *wp = fvm_tensor_data(&w);
    for (int64_t i = 0; i < fvm_tensor_count(&x); i++) {
        double v = xp[i];
        xp[i] = v + h;
        double fp = conv_objective(&x, &w, &win, &y, rv);
        xp[i] = v - h;
        double fm = conv_objective(&x, &w, &win, &y, rv);
        xp[i] = v;
        expect_fd((fp - fm) / (2 * h), fvm_tensor_get_f64(&dx, i), "conv2d_grad_input", i);
    }
    for (int64_t i = 0; i < fvm_tensor_count(&w); i++) {
        double v = wp[i];
        wp[i] = v + h;
        double fp = conv_objective(&x, &w, &win, &y, rv);
        wp[i] = v - h;
        double fm = conv_objective(&x, &w, &win, &y, rv);
        wp[i] = v;
        expect_fd((fp - fm) / (2 * h), fvm_tensor_get_f64(&dw, i), "conv2d_grad_filter", i);
    }
    free(rv);
    release(6, &x, &w, &rt, &y, &dx, &dw);
}

static void test_conv2d_finite_differences(void **state)
{
    (void)state;
    rng_seed(2);
    for (size_t i = 0; i < 10; i++) /* the small cases */
        check_conv_fd(&CONV_CASES[i]);
}

/* A hand-sized case: one 3x3 image, a 2x2 filter of ones, SAME (the extra
 * row and column at the bottom/right). */
static void test_conv2d_by_hand(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_window win = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = true};
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        fvm_tensor x = TD(t, D4(1, 3, 3, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9);
        fvm_tensor w = TD(t, D4(2, 2, 1, 1), 1, 1, 1, 1), y = junk(t, D4(1, 3, 3, 1));
        assert_int_equal(fvm_k_conv2d(&x, &w, &win, &y, &d), FVM_OK);
        EXPECT(&y, 12, 16, 9, 24, 28, 15, 15, 17, 9);
        /* two channels in, two out: w[.,.,c,o] = 1 for c == o, 10 for c != o */
        fvm_tensor x2 = TD(t, D4(1, 1, 2, 2), 1, 2, 3, 4);
        fvm_tensor w2 = TD(t, D4(1, 2, 2, 2), 1, 10, 10, 1, 1, 10, 10, 1), y2 = junk(t, D4(1, 1, 1, 2));
        fvm_window v = {.kh = 1, .kw = 2, .sh = 1, .sw = 1, .same = false};
        assert_int_equal(fvm_k_conv2d(&x2, &w2, &v, &y2, &d), FVM_OK);
        EXPECT(&y2, 1 + 20 + 3 + 40, 10 + 2 + 30 + 4);
        /* gradient by hand: dy = ones over the 3x3 SAME output; x[i,j] is read
         * by the outputs (i-1..i, j-1..j) inside the image */
        fvm_tensor dy = TD(t, D4(1, 3, 3, 1), 1, 1, 1, 1, 1, 1, 1, 1, 1), dx = junk(t, D4(1, 3, 3, 1));
        assert_int_equal(fvm_k_conv2d_grad_input(&dy, &w, &win, &dx, &d), FVM_OK);
        EXPECT(&dx, 1, 2, 2, 2, 4, 4, 2, 4, 4);
        fvm_tensor dw = junk(t, D4(2, 2, 1, 1));
        assert_int_equal(fvm_k_conv2d_grad_filter(&x, &dy, &win, &dw, &d), FVM_OK);
        EXPECT(&dw, 45, 45 - 1 - 4 - 7, 45 - 1 - 2 - 3, 5 + 6 + 8 + 9);
        assert_int_equal(d.n, 0);
        release(9, &x, &w, &y, &x2, &w2, &y2, &dy, &dx, &dw);
    }
}

static void test_conv2d_edges(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_window win = {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .same = true};
    /* no images */
    fvm_tensor x0 = junk(FVM_DTYPE_F32, D4(0, 4, 4, 2)), w = junk(FVM_DTYPE_F32, D4(3, 3, 2, 3));
    memset(fvm_tensor_data(&w), 0, fvm_tensor_bytes(&w));
    fvm_tensor y0 = junk(FVM_DTYPE_F32, D4(0, 4, 4, 3)), dw = junk(FVM_DTYPE_F32, D4(3, 3, 2, 3));
    assert_int_equal(fvm_k_conv2d(&x0, &w, &win, &y0, &d), FVM_OK);
    assert_int_equal(fvm_k_conv2d_grad_filter(&x0, &y0, &win, &dw, &d), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&dw); i++)
        assert_true(fvm_tensor_get_f64(&dw, i) == 0);
    /* no channels: zeros */
    fvm_tensor xc = junk(FVM_DTYPE_F64, D4(1, 2, 2, 0)), wc = junk(FVM_DTYPE_F64, D4(3, 3, 0, 2));
    fvm_tensor yc = junk(FVM_DTYPE_F64, D4(1, 2, 2, 2));
    assert_int_equal(fvm_k_conv2d(&xc, &wc, &win, &yc, &d), FVM_OK);
    EXPECT(&yc, 0, 0, 0, 0, 0, 0, 0, 0);
    /* no outputs: dx is zeros */
    fvm_tensor dy = junk(FVM_DTYPE_F64, D4(1, 2, 2, 0)), wo = junk(FVM_DTYPE_F64, D4(3, 3, 1, 0));
    fvm_tensor dx = junk(FVM_DTYPE_F64, D4(1, 2, 2, 1));
    assert_int_equal(fvm_k_conv2d_grad_input(&dy, &wo, &win, &dx, &d), FVM_OK);
    EXPECT(&dx, 0, 0, 0, 0);
    assert_int_equal(d.n, 0);
    /* dtypes */
    fvm_tensor xi = junk(FVM_DTYPE_I32, D4(1, 2, 2, 1)), wi = junk(FVM_DTYPE_I32, D4(3, 3, 1, 1));
    fvm_tensor yi = junk(FVM_DTYPE_I32, D4(1, 2, 2, 1)), wf = junk(FVM_DTYPE_F32, D4(3, 3, 1, 1));
    fvm_tensor xf = junk(FVM_DTYPE_F64, D4(1, 2, 2, 1));
    assert_int_equal(fvm_k_conv2d(&xi, &wi, &win, &yi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "conv2d", "i32");
    assert_int_equal(fvm_k_conv2d(&xf, &wf, &win, &yi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "f64", "f32");
    size_t bytes;
    assert_int_equal(fvm_conv2d_workspace(FVM_DTYPE_I64, &xi.shape, &wi.shape, &win, &bytes, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "i64", NULL);
    /* workspace sizes: the CNN's layers (f32, 64 images: more than one group, so a filter-sized product
     * follows the patch matrices; 10 images of the first layer: one group, none) */
    fvm_dims x1 = D4(64, 28, 28, 1), w1 = D4(5, 5, 1, 32), x2 = D4(64, 14, 14, 32), w2 = D4(5, 5, 32, 64);
    fvm_window five = {.kh = 5, .kw = 5, .sh = 1, .sw = 1, .same = true};
    assert_int_equal(fvm_conv2d_workspace(FVM_DTYPE_F32, &x1, &w1, &five, &bytes, &d), FVM_OK);
    bytes -= 25 * 32 * 4;
    assert_true(bytes > 0 && bytes % (784 * 25 * 4) == 0 && bytes < 64 * 784 * 25 * 4);
    assert_int_equal(fvm_conv2d_workspace(FVM_DTYPE_F32, &x2, &w2, &five, &bytes, &d), FVM_OK);
    bytes -= 800 * 64 * 4;
    assert_true(bytes > 0 && bytes % (196 * 800 * 4) == 0 && bytes < 64 * 196 * 800 * 4);
    fvm_dims x10 = D4(10, 28, 28, 1);
    assert_int_equal(fvm_conv2d_workspace(FVM_DTYPE_F32, &x10, &w1, &five, &bytes, &d), FVM_OK);
    assert_true(bytes == 10 * 784 * 25 * 4);
    fvm_dims w11 = D4(1, 1, 32, 8);
    fvm_window one = {.kh = 1, .kw = 1, .sh = 1, .sw = 1, .same = true};
    assert_int_equal(fvm_conv2d_workspace(FVM_DTYPE_F64, &x2, &w11, &one, &bytes, &d), FVM_OK);
    assert_true(bytes == 0);
    assert_int_equal(d.n, 0);
    release(13, &x0, &w, &y0, &dw, &xc, &wc, &yc, &dy, &wo, &dx, &xi, &wi, &yi);
    release(2, &wf, &xf);
}

/* ---- pooling ------------------------------------------------------------- */

static void test_pool_by_hand(void **state)
{
    (void)state;
    fvm_diag d = {0};
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        /* 2x2 windows, stride 2, VALID on 4x4 (and a 5th column that no window reads) */
        fvm_tensor x = TD(t, D4(1, 4, 5, 1), 1, 2, 3, 4, 99, 5, 6, 7, 8, 99, 9, 10, 11, 12, 99, 13, 14, 15, 16, 99);
        fvm_window v2 = {.kh = 2, .kw = 2, .sh = 2, .sw = 2, .same = false};
        fvm_tensor y = junk(t, D4(1, 2, 2, 1));
        assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &x, &v2, &y, &d), FVM_OK);
        EXPECT(&y, 6, 8, 14, 16);
        assert_int_equal(fvm_k_pool(FVM_POOL_AVG, &x, &v2, &y, &d), FVM_OK);
        EXPECT(&y, 3.5, 5.5, 11.5, 13.5);
        /* 3x3 SAME, stride 1 on 1..9: average over the elements inside the
         * image: corners 4, edges 6, the centre 9 */
        fvm_tensor s = TD(t, D4(1, 3, 3, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9), ys = junk(t, D4(1, 3, 3, 1));
        fvm_window s3 = {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .same = true};
        assert_int_equal(fvm_k_pool(FVM_POOL_AVG, &s, &s3, &ys, &d), FVM_OK);
        EXPECT(&ys, 12.0 / 4, 21.0 / 6, 16.0 / 4, 27.0 / 6, 45.0 / 9, 33.0 / 6, 24.0 / 4, 39.0 / 6, 28.0 / 4);
        assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &s, &s3, &ys, &d), FVM_OK);
        EXPECT(&ys, 5, 6, 6, 8, 9, 9, 8, 9, 9);
        /* 2x2 SAME, stride 1: the padding row and column are at the bottom/right */
        fvm_window s2 = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = true};
        assert_int_equal(fvm_k_pool(FVM_POOL_AVG, &s, &s2, &ys, &d), FVM_OK);
        EXPECT(&ys, 3, 4, 4.5, 6, 7, 7.5, 7.5, 8.5, 9);
        /* the SAME avg gradient: each element gets dy/count of every window
         * holding it (dy = 1: 1/4 + ... by hand) */
        fvm_tensor ones = TD(t, D4(1, 3, 3, 1), 1, 1, 1, 1, 1, 1, 1, 1, 1), g = junk(t, D4(1, 3, 3, 1));
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_AVG, &s, &ones, &s2, &g, &d), FVM_OK);
        EXPECT(&g, 0.25, 0.25 + 0.25, 0.25 + 0.5, 0.25 + 0.25, 1, 0.25 + 0.25 + 0.5 + 0.5, 0.25 + 0.5,
               0.25 + 0.25 + 0.5 + 0.5, 0.25 + 0.5 + 0.5 + 1);
        /* stride 2, 3x3 SAME on 5x5: padding 1 before and 1 after */
        double v25[25];
        for (int i = 0; i < 25; i++)
            v25[i] = i;
        fvm_tensor x5 = from(t, D4(1, 5, 5, 1), v25), y5 = junk(t, D4(1, 3, 3, 1));
        fvm_window s3s2 = {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .same = true};
        assert_int_equal(fvm_k_pool(FVM_POOL_AVG, &x5, &s3s2, &y5, &d), FVM_OK);
        EXPECT(&y5, (0 + 1 + 5 + 6) / 4.0, (1 + 2 + 3 + 6 + 7 + 8) / 6.0, (3 + 4 + 8 + 9) / 4.0,
               (5 + 6 + 10 + 11 + 15 + 16) / 6.0, (6 + 7 + 8 + 11 + 12 + 13 + 16 + 17 + 18) / 9.0,
               (8 + 9 + 13 + 14 + 18 + 19) / 6.0, (15 + 16 + 20 + 21) / 4.0, (16 + 17 + 18 + 21 + 22 + 23) / 6.0,
               (18 + 19 + 23 + 24) / 4.0);
        assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &x5, &s3s2, &y5, &d), FVM_OK);
        EXPECT(&y5, 6, 8, 9, 16, 18, 19, 21, 23, 24);
        /* channels are pooled apart */
        fvm_tensor xc = TD(t, D4(1, 2, 2, 2), 1, -1, 2, -2, 3, -3, 4, -4), yc = junk(t, D4(1, 1, 1, 2));
        fvm_window v22 = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = false};
        assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &xc, &v22, &yc, &d), FVM_OK);
        EXPECT(&yc, 4, -1);
        assert_int_equal(fvm_k_pool(FVM_POOL_AVG, &xc, &v22, &yc, &d), FVM_OK);
        EXPECT(&yc, 2.5, -2.5);
        assert_int_equal(d.n, 0);
        release(10, &x, &y, &s, &ys, &ones, &g, &x5, &y5, &xc, &yc);
    }
}

static void test_max_pool_ties_and_nan(void **state)
{
    (void)state;
    fvm_diag d = {0};
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        /* a tie inside one window: the first (row-major) maximum gets dy */
        fvm_tensor x = TD(t, D4(1, 2, 2, 1), 5, 5, 1, 5), dy = TD(t, D4(1, 1, 1, 1), 7), dx = junk(t, D4(1, 2, 2, 1));
        fvm_window v22 = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = false};
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &x, &dy, &v22, &dx, &d), FVM_OK);
        EXPECT(&dx, 7, 0, 0, 0);
        /* overlapping windows [1,3] and [3,3]: both choose element 1, and sum */
        fvm_tensor x3 = TD(t, D4(1, 1, 3, 1), 1, 3, 3), dy2 = TD(t, D4(1, 1, 2, 1), 2, 5);
        fvm_tensor dx3 = junk(t, D4(1, 1, 3, 1));
        fvm_window v12 = {.kh = 1, .kw = 2, .sh = 1, .sw = 1, .same = false};
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &x3, &dy2, &v12, &dx3, &d), FVM_OK);
        EXPECT(&dx3, 0, 7, 0);
        /* a tie in a later row: still the first in row-major order */
        fvm_tensor xt = TD(t, D4(1, 2, 2, 1), 0, 1, 1, 0), dxt = junk(t, D4(1, 2, 2, 1));
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &xt, &dy, &v22, &dxt, &d), FVM_OK);
        EXPECT(&dxt, 0, 7, 0, 0);
        /* -0 and +0 tie: the first is kept, by value and by gradient */
        fvm_tensor xz = TD(t, D4(1, 1, 2, 1), -0.0, 0.0), yz = junk(t, D4(1, 1, 1, 1)), dxz = junk(t, D4(1, 1, 2, 1));
        assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &xz, &v12, &yz, &d), FVM_OK);
        assert_true(signbit(fvm_tensor_get_f64(&yz, 0)));
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &xz, &dy, &v12, &dxz, &d), FVM_OK);
        EXPECT(&dxz, 7, 0);
        /* NaN is the maximum; the first NaN wins */
        fvm_tensor xn = TD(t, D4(1, 1, 4, 1), 1, NAN, 3, NAN), yn = junk(t, D4(1, 1, 1, 1)),
                   dxn = junk(t, D4(1, 1, 4, 1));
        fvm_window v14 = {.kh = 1, .kw = 4, .sh = 1, .sw = 1, .same = false};
        assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &xn, &v14, &yn, &d), FVM_OK);
        assert_true(isnan(fvm_tensor_get_f64(&yn, 0)));
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &xn, &dy, &v14, &dxn, &d), FVM_OK);
        EXPECT(&dxn, 0, 7, 0, 0);
        /* many channels (more than one block of the gradient): each its own argmax */
        enum { C = 150 };
        double xv[2 * C], dyv[C];
        for (int c = 0; c < C; c++) {
            xv[c] = c % 3 == 0 ? 1 : 0; /* position 0 wins for c % 3 == 0, else 1 (and a tie for none) */
            xv[C + c] = c % 3 == 0 ? 0 : 2;
            dyv[c] = c + 1;
        }
        fvm_tensor xm = from(t, D4(1, 1, 2, C), xv), dym = from(t, D4(1, 1, 1, C), dyv), dxm = junk(t, D4(1, 1, 2, C));
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &xm, &dym, &v12, &dxm, &d), FVM_OK);
        for (int c = 0; c < C; c++) {
            assert_true(fvm_tensor_get_f64(&dxm, c) == (c % 3 == 0 ? c + 1 : 0));
            assert_true(fvm_tensor_get_f64(&dxm, C + c) == (c % 3 == 0 ? 0 : c + 1));
        }
        assert_int_equal(d.n, 0);
        release(16, &x, &dy, &dx, &x3, &dy2, &dx3, &xt, &dxt, &xz, &yz, &dxz, &xn, &yn, &dxn, &xm, &dym);
        fvm_tensor_release(&dxm);
    }
}

/* max pooling's choice read from u: the same elements the gradient routes
 * dy to (first maximum in row-major order, the first NaN), so <gather(x, u),
 * r> = <u, pool_grad(x, r)> for every u and r. */
static void test_max_pool_gather(void **state)
{
    (void)state;
    fvm_diag d = {0};
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        fvm_window v22 = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = false};
        fvm_window v12 = {.kh = 1, .kw = 2, .sh = 1, .sw = 1, .same = false};
        fvm_window v14 = {.kh = 1, .kw = 4, .sh = 1, .sw = 1, .same = false};
        /* a tie inside one window, and in a later row: the first in row-major order */
        fvm_tensor x = TD(t, D4(1, 2, 2, 1), 5, 5, 1, 5), u = TD(t, D4(1, 2, 2, 1), 10, 20, 30, 40);
        fvm_tensor y = junk(t, D4(1, 1, 1, 1));
        assert_int_equal(fvm_k_pool_gather(&x, &u, &v22, &y, &d), FVM_OK);
        EXPECT(&y, 10);
        fvm_tensor xt = TD(t, D4(1, 2, 2, 1), 0, 1, 1, 0);
        assert_int_equal(fvm_k_pool_gather(&xt, &u, &v22, &y, &d), FVM_OK);
        EXPECT(&y, 20);
        /* overlapping windows [1,3] and [3,3]: both read element 1 */
        fvm_tensor x3 = TD(t, D4(1, 1, 3, 1), 1, 3, 3), u3 = TD(t, D4(1, 1, 3, 1), 4, 5, 6);
        fvm_tensor y2 = junk(t, D4(1, 1, 2, 1));
        assert_int_equal(fvm_k_pool_gather(&x3, &u3, &v12, &y2, &d), FVM_OK);
        EXPECT(&y2, 5, 5);
        /* NaN is the maximum; the first NaN wins */
        fvm_tensor xn = TD(t, D4(1, 1, 4, 1), 1, NAN, 3, NAN), un = TD(t, D4(1, 1, 4, 1), 1, 2, 3, 4);
        assert_int_equal(fvm_k_pool_gather(&xn, &un, &v14, &y, &d), FVM_OK);
        EXPECT(&y, 2);
        /* the adjoint of the gradient, with SAME windows that overlap, many channels */
        fvm_window s32 = {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .same = true};
        fvm_tensor xr = rand_tensor(t, D4(2, 5, 4, 70)), ur = rand_tensor(t, D4(2, 5, 4, 70));
        fvm_tensor rr = rand_tensor(t, D4(2, 3, 2, 70)), yr = junk(t, D4(2, 3, 2, 70)), gr = junk(t, D4(2, 5, 4, 70));
        assert_int_equal(fvm_k_pool_gather(&xr, &ur, &s32, &yr, &d), FVM_OK);
        assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &xr, &rr, &s32, &gr, &d), FVM_OK);
        double *rv = values(&rr), *uv = values(&ur), lhs = dot_with(&yr, rv), rhs = dot_with(&gr, uv);
        assert_true(fabs(lhs - rhs) <= (k ? 1e-12 : 1e-4) * fmax(1, fabs(rhs)));
        free(rv);
        free(uv);
        assert_int_equal(d.n, 0);
        release(14, &x, &u, &y, &xt, &x3, &u3, &y2, &xn, &un, &xr, &ur, &rr, &yr, &gr);
    }
}

typedef struct pool_case {
    int64_t n, h, w, c, kh, kw, sh, sw;
    bool same;
} pool_case;

static const pool_case POOL_CASES[] = {
    {2, 6, 6, 3, 2, 2, 2, 2, false}, {1, 5, 7, 2, 3, 3, 1, 1, true}, {2, 7, 5, 2, 3, 2, 2, 2, true},
    {1, 6, 6, 4, 3, 3, 2, 1, false}, {1, 4, 4, 1, 5, 5, 3, 3, true},
};

/* f(x) = sum(pool(x) * r), differentiated by central differences. The
 * inputs are a shuffled grid with gaps 100 times the step, so no window has
 * a tie and no perturbation changes a window's maximum. */
static void check_pool_fd(fvm_pool kind, const pool_case *pc)
{
    const double h = 1e-3;
    fvm_window win = {.kh = pc->kh, .kw = pc->kw, .sh = pc->sh, .sw = pc->sw, .same = pc->same};
    int64_t oh, ow, ph, pw;
    ref_window(pc->h, pc->kh, pc->sh, pc->same, &oh, &ph);
    ref_window(pc->w, pc->kw, pc->sw, pc->same, &ow, &pw);
    fvm_dims xs = D4(pc->n, pc->h, pc->w, pc->c), ys = D4(pc->n, oh, ow, pc->c);
    int64_t nx = pc->n * pc->h * pc->w * pc->c;
    double *xv = malloc((size_t)nx * sizeof *xv);
    assert_non_null(xv);
    for (int64_t i = 0; i < nx; i++)
        xv[i] = 0.1 * (double)i;
    for (int64_t i = nx - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1));
        double tmp = xv[i];
        xv[i] = xv[j];
        xv[j] = tmp;
    }
    fvm_tensor x = from(FVM_DTYPE_F64, xs, xv), r = rand_tensor(FVM_DTYPE_F64, ys), y = junk(FVM_DTYPE_F64, ys);
    fvm_tensor dx = junk(FVM_DTYPE_F64, xs);
    double *rv = values(&r), *xp = fvm_tensor_data(&x);
    assert_int_equal(fvm_k_pool_grad(kind, &x, &r, &win, &dx, NULL), FVM_OK);
    for (int64_t i = 0; i < nx; i++) {
        double v = xp[i];
        xp[i] = v + h;
        assert_int_equal(fvm_k_pool(kind, &x, &win, &y, NULL), FVM_OK);
        double fp = dot_with(&y, rv);
        xp[i] = v - h;
        assert_int_equal(fvm_k_pool(kind, &x, &win, &y, NULL), FVM_OK);
        double fm = dot_with(&y, rv);
        xp[i] = v;
        expect_fd((fp - fm) / (2 * h), fvm_tensor_get_f64(&dx, i), kind == FVM_POOL_MAX ? "max pool" : "avg pool", i);
    }
    free(xv);
    free(rv);
    release(4, &x, &r, &y, &dx);
}

static void test_pool_finite_differences(void **state)
{
    (void)state;
    rng_seed(3);
    for (size_t i = 0; i < sizeof POOL_CASES / sizeof POOL_CASES[0]; i++) {
        check_pool_fd(FVM_POOL_MAX, &POOL_CASES[i]);
        check_pool_fd(FVM_POOL_AVG, &POOL_CASES[i]);
    }
}

static void test_pool_errors(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_window w = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = true};
    fvm_tensor xi = junk(FVM_DTYPE_I32, D4(1, 2, 2, 1)), yi = junk(FVM_DTYPE_I32, D4(1, 2, 2, 1));
    assert_int_equal(fvm_k_pool(FVM_POOL_MAX, &xi, &w, &yi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "pool", "i32");
    assert_int_equal(fvm_k_pool((fvm_pool)7, &xi, &w, &yi, &d), FVM_ERR_USAGE);
    expect_one_error(&d, FVM_ERR_USAGE, "kind", NULL);
    /* empty batches */
    fvm_tensor x0 = junk(FVM_DTYPE_F32, D4(0, 3, 3, 2)), y0 = junk(FVM_DTYPE_F32, D4(0, 3, 3, 2));
    assert_int_equal(fvm_k_pool(FVM_POOL_AVG, &x0, &w, &y0, &d), FVM_OK);
    assert_int_equal(fvm_k_pool_grad(FVM_POOL_MAX, &x0, &y0, &w, &x0, &d), FVM_OK);
    assert_int_equal(d.n, 0);
    release(4, &xi, &yi, &x0, &y0);
}

/* ---- softmax ------------------------------------------------------------- */

/* exp(x_i) / sum_j exp(x_j) and its log along axis, directly in long double
 * (the test inputs are moderate, so no shift is needed). */
static void ref_softmax(const double *x, const fvm_dims *s, int axis, bool lg, double *out)
{
    int64_t outer = 1, inner = 1, len = s->d[axis];
    for (int k = 0; k < axis; k++)
        outer *= s->d[k];
    for (int k = axis + 1; k < s->rank; k++)
        inner *= s->d[k];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            long double sum = 0;
            for (int64_t a = 0; a < len; a++)
                sum += expl((long double)x[(o * len + a) * inner + j]);
            for (int64_t a = 0; a < len; a++) {
                int64_t i = (o * len + a) * inner + j;
                out[i] = lg ? (double)((long double)x[i] - logl(sum)) : (double)(expl((long double)x[i]) / sum);
            }
        }
}

static void check_softmax(fvm_dtype t, fvm_dims s)
{
    fvm_diag d = {0};
    fvm_tensor x = junk(t, s);
    int64_t n = fvm_tensor_count(&x);
    for (int64_t i = 0; i < n; i++)
        fvm_tensor_set_f64(&x, i, 5 * rng_unit());
    double *xv = values(&x), *ref = malloc((size_t)n * sizeof *ref);
    assert_non_null(ref);
    double rel = t == FVM_DTYPE_F32 ? 4e-6 : 1e-13;
    for (int axis = 0; axis < s.rank; axis++)
        for (int lg = 0; lg < 2; lg++) {
            fvm_tensor out = junk(t, s);
            assert_int_equal(fvm_k_softmax(&x, axis, lg, &out, &d), FVM_OK);
            ref_softmax(xv, &s, axis, lg, ref);
            /* log_softmax: errors relative to the size of the shifted terms */
            expect_close(&out, ref, NULL, rel, lg ? rel * 10 : 0, lg ? "log_softmax" : "softmax");
            /* in place gives the same bits */
            fvm_tensor inplace = from(t, s, xv);
            assert_int_equal(fvm_k_softmax(&inplace, axis, lg, &inplace, &d), FVM_OK);
            assert_true(fvm_tensor_identical(&out, &inplace));
            release(2, &out, &inplace);
        }
    assert_int_equal(d.n, 0);
    free(xv);
    free(ref);
    fvm_tensor_release(&x);
}

/* The LSTM gates of f32: in f32 through f32math.h, bit for bit (z = (zx + zh) + b, the
 * blocks i, f, g, o), and within 1e-6 of the same formula in double from the f32 sums; f64
 * through the C library within 1e-15. H = 37 runs the vector loop and its scalar tail. */
static void test_lstm_gates(void **state)
{
    (void)state;
    fvm_diag d = {0};
    rng_seed(11);
    enum { B = 3, H = 37 };
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        fvm_tensor zx = junk(t, D2(B, 4 * H)), zh = junk(t, D2(B, 4 * H)), b = junk(t, D1(4 * H)),
                   c = junk(t, D2(B, H));
        fvm_tensor h = junk(t, D2(B, H)), co = junk(t, D2(B, H));
        for (int64_t i = 0; i < B * 4 * H; i++) {
            fvm_tensor_set_f64(&zx, i, 8 * rng_unit() - 4);
            fvm_tensor_set_f64(&zh, i, 8 * rng_unit() - 4);
        }
        for (int64_t i = 0; i < 4 * H; i++)
            fvm_tensor_set_f64(&b, i, 2 * rng_unit() - 1);
        for (int64_t i = 0; i < B * H; i++)
            fvm_tensor_set_f64(&c, i, 6 * rng_unit() - 3);
        assert_int_equal(fvm_k_lstm_gates(&zx, &zh, &b, &c, &h, &co, &d), FVM_OK);
        for (int64_t r = 0; r < B; r++)
            for (int64_t j = 0; j < H; j++) {
                double z[4];
                float zf[4];
                for (int q = 0; q < 4; q++) {
                    int64_t at = r * 4 * H + q * H + j;
                    zf[q] = ((float)fvm_tensor_get_f64(&zx, at) + (float)fvm_tensor_get_f64(&zh, at)) +
                            (float)fvm_tensor_get_f64(&b, q * H + j);
                    z[q] = t == FVM_DTYPE_F32 ? (double)zf[q]
                                              : (fvm_tensor_get_f64(&zx, at) + fvm_tensor_get_f64(&zh, at)) +
                                                    fvm_tensor_get_f64(&b, q * H + j);
                }
                double cv = fvm_tensor_get_f64(&c, r * H + j);
                double want_c = cv / (1 + exp(-z[1])) + tanh(z[2]) / (1 + exp(-z[0]));
                double got_c = fvm_tensor_get_f64(&co, r * H + j), got_h = fvm_tensor_get_f64(&h, r * H + j);
                double want_h = tanh(got_c) / (1 + exp(-z[3])), tol = t == FVM_DTYPE_F32 ? 1e-6 : 1e-15;
                assert_true(fabs(got_c - want_c) <= tol * (1 + fabs(want_c)));
                assert_true(fabs(got_h - want_h) <= tol);
                if (t == FVM_DTYPE_F32) {
                    float fc = fvm_sigmoidf(zf[1]) * (float)cv + fvm_sigmoidf(zf[0]) * fvm_tanhf(zf[2]);
                    float fh = fvm_sigmoidf(zf[3]) * fvm_tanhf(fc);
                    assert_true(memcmp(&fc, (const float *)fvm_tensor_data(&co) + r * H + j, sizeof fc) == 0);
                    assert_true(memcmp(&fh, (const float *)fvm_tensor_data(&h) + r * H + j, sizeof fh) == 0);
                }
            }
        assert_int_equal(d.n, 0);
        release(6, &zx, &zh, &b, &c, &h, &co);
    }
}

static void test_softmax(void **state)
{
    (void)state;
    fvm_diag d = {0};
    rng_seed(4);
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        check_softmax(t, D3(3, 4, 5));
        check_softmax(t, D1(7));
        check_softmax(t, D3(2, 3, 300)); /* lines in more than one block */
        check_softmax(t, D2(1, 1));
        /* large inputs stay finite */
        fvm_tensor x = TD(t, D2(2, 3), 1000, -1000, 0, 1000, 1000, -1000), y = junk(t, D2(2, 3));
        assert_int_equal(fvm_k_softmax(&x, 1, false, &y, &d), FVM_OK);
        EXPECT(&y, 1, 0, 0, 0.5, 0.5, 0);
        assert_int_equal(fvm_k_softmax(&x, 1, true, &y, &d), FVM_OK);
        double l2 = t == FVM_DTYPE_F32 ? (double)-logf(2.0f) : -log(2.0);
        double m2000 = t == FVM_DTYPE_F32 ? (double)(-2000.0f - logf(2.0f)) : -2000 - log(2.0);
        EXPECT(&y, 0, -2000, -1000, l2, l2, m2000);
        assert_int_equal(fvm_k_softmax(&x, 0, true, &y, &d), FVM_OK);
        EXPECT(&y, l2, -2000, 0, l2, 0, -1000);
        assert_int_equal(d.n, 0);
        release(2, &x, &y);
    }
    fvm_tensor xi = junk(FVM_DTYPE_I64, D1(2)), yi = junk(FVM_DTYPE_I64, D1(2));
    assert_int_equal(fvm_k_softmax(&xi, 0, false, &yi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "softmax", "i64");
    assert_int_equal(fvm_k_softmax(&xi, 0, true, &yi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "log_softmax", "i64");
    release(2, &xi, &yi);
}

/* ---- cross-entropy ------------------------------------------------------- */

static void test_softmax_xent(void **state)
{
    (void)state;
    fvm_diag d = {0};
    rng_seed(5);
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        for (int wide = 0; wide < 2; wide++) {
            /* random logits [2,3,6]: loss = log(sum exp) - logit[label], in long double */
            fvm_tensor x = junk(t, D3(2, 3, 6));
            for (int i = 0; i < 36; i++)
                fvm_tensor_set_f64(&x, i, 4 * rng_unit());
            fvm_tensor lab = wide ? I64(D2(2, 3), 0, 5, 2, 3, 3, 1) : I32(D2(2, 3), 0, 5, 2, 3, 3, 1);
            fvm_tensor loss = junk(t, D2(2, 3));
            assert_int_equal(fvm_k_softmax_xent(&x, &lab, &loss, &d), FVM_OK);
            double want[6];
            for (int r = 0; r < 6; r++) {
                long double s = 0;
                for (int a = 0; a < 6; a++)
                    s += expl((long double)fvm_tensor_get_f64(&x, r * 6 + a));
                want[r] = (double)(logl(s) - fvm_tensor_get_f64(&x, r * 6 + fvm_tensor_get_i64(&lab, r)));
            }
            expect_close(&loss, want, NULL, t == FVM_DTYPE_F32 ? 4e-6 : 1e-14, t == FVM_DTYPE_F32 ? 4e-6 : 1e-14,
                         "softmax_xent");
            /* the label range: named, and nothing written */
            fvm_tensor bad = wide ? I64(D2(2, 3), 0, 1, 2, 6, 0, 0) : I32(D2(2, 3), 0, 1, 2, -1, 0, 0);
            fvm_tensor l2 = junk(t, D2(2, 3));
            assert_int_equal(fvm_k_softmax_xent(&x, &bad, &l2, &d), FVM_ERR_RUNTIME);
            expect_one_error(&d, FVM_ERR_RUNTIME, wide ? "label 6" : "label -1", "[0, 6)");
            assert_true(untouched(&l2));
            release(5, &x, &lab, &loss, &bad, &l2);
        }
        /* large logits */
        fvm_tensor x = TD(t, D2(2, 2), 1000, -1000, 1000, 1000), lab = I32(D1(2), 1, 0), loss = junk(t, D1(2));
        assert_int_equal(fvm_k_softmax_xent(&x, &lab, &loss, &d), FVM_OK);
        EXPECT(&loss, 2000, t == FVM_DTYPE_F32 ? (double)logf(2.0f) : log(2.0));
        /* a scalar row set: logits [K], labels [] */
        fvm_tensor x1 = TD(t, D1(3), 0, 0, 0), l0 = I64(D0(), 2), loss0 = junk(t, D0());
        assert_int_equal(fvm_k_softmax_xent(&x1, &l0, &loss0, &d), FVM_OK);
        EXPECT(&loss0, t == FVM_DTYPE_F32 ? (double)logf(3.0f) : log(3.0));
        assert_int_equal(d.n, 0);
        /* no classes: every label is out of range */
        fvm_tensor xe = junk(t, D2(1, 0)), le = I32(D1(1), 0), losse = junk(t, D1(1));
        assert_int_equal(fvm_k_softmax_xent(&xe, &le, &losse, &d), FVM_ERR_RUNTIME);
        expect_one_error(&d, FVM_ERR_RUNTIME, "label 0", "[0, 0)");
        release(9, &x, &lab, &loss, &x1, &l0, &loss0, &xe, &le, &losse);
    }
    fvm_tensor x = TD(FVM_DTYPE_F32, D2(1, 2), 0, 0), lf = TD(FVM_DTYPE_F32, D1(1), 0),
               loss = junk(FVM_DTYPE_F32, D1(1));
    assert_int_equal(fvm_k_softmax_xent(&x, &lf, &loss, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "i32 or i64", "f32");
    release(3, &x, &lf, &loss);
}

/* ---- scatter-add --------------------------------------------------------- */

static void test_scatter_add_by_hand(void **state)
{
    (void)state;
    fvm_diag d = {0};
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        /* repeated indices add up */
        fvm_tensor i0 = I32(D1(4), 0, 2, 0, 3), u0 = TD(t, D1(4), 1, 2, 3, 4), o0 = junk(t, D1(5));
        assert_int_equal(fvm_k_scatter_add(&i0, &u0, 0, &o0, &d), FVM_OK);
        EXPECT(&o0, 4, 0, 2, 4, 0);
        /* axis 1 of [2,3] with i64 indices of shape [2,2]: updates [2,2,2] */
        fvm_tensor i1 = I64(D2(2, 2), 2, 2, 0, 2), u1 = TD(t, D3(2, 2, 2), 1, 2, 3, 4, 10, 20, 30, 40);
        fvm_tensor o1 = junk(t, D2(2, 3));
        assert_int_equal(fvm_k_scatter_add(&i1, &u1, 1, &o1, &d), FVM_OK);
        EXPECT(&o1, 3, 0, 1 + 2 + 4, 30, 0, 10 + 20 + 40);
        /* axis 0 with rows: a scalar index drops the axis in updates */
        fvm_tensor is = I32(D0(), 1), us = TD(t, D1(2), 5, 6), os = junk(t, D2(3, 2));
        assert_int_equal(fvm_k_scatter_add(&is, &us, 0, &os, &d), FVM_OK);
        EXPECT(&os, 0, 0, 5, 6, 0, 0);
        /* no indices: zeros */
        fvm_tensor ie = I32(D1(0), 0), ue = junk(t, D2(0, 2)), oe = junk(t, D2(3, 2));
        assert_int_equal(fvm_k_scatter_add(&ie, &ue, 0, &oe, &d), FVM_OK);
        EXPECT(&oe, 0, 0, 0, 0, 0, 0);
        assert_int_equal(d.n, 0);
        /* out of range: named, and nothing written (not even the zeros) */
        fvm_tensor bad = I64(D1(3), 0, 5, 1), ub = TD(t, D1(3), 1, 1, 1), ob = junk(t, D1(5));
        assert_int_equal(fvm_k_scatter_add(&bad, &ub, 0, &ob, &d), FVM_ERR_RUNTIME);
        expect_one_error(&d, FVM_ERR_RUNTIME, "index 5", "[0, 5)");
        assert_true(untouched(&ob));
        fvm_tensor neg = I32(D1(1), -2), un = TD(t, D2(2, 1), 1, 1), on = junk(t, D2(2, 3));
        assert_int_equal(fvm_k_scatter_add(&neg, &un, 1, &on, &d), FVM_ERR_RUNTIME);
        expect_one_error(&d, FVM_ERR_RUNTIME, "index -2", "[0, 3)");
        assert_true(untouched(&on));
        release(18, &i0, &u0, &o0, &i1, &u1, &o1, &is, &us, &os, &ie, &ue, &oe, &bad, &ub, &ob, &neg, &un, &on);
    }
    fvm_tensor fi = TD(FVM_DTYPE_F32, D1(1), 0), u = TD(FVM_DTYPE_F32, D1(1), 0), o = junk(FVM_DTYPE_F32, D1(2));
    assert_int_equal(fvm_k_scatter_add(&fi, &u, 0, &o, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "i32 or i64", "f32");
    fvm_tensor ii = I32(D1(1), 0), ui = I32(D1(1), 0), oi = junk(FVM_DTYPE_I32, D1(2));
    assert_int_equal(fvm_k_scatter_add(&ii, &ui, 0, &oi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "scatter_add", "i32");
    release(6, &fi, &u, &o, &ii, &ui, &oi);
}

/* <gather(x, idx), u> == <x, scatter_add(idx, u)> for random x, u and
 * random (repeating) indices, along every axis. */
static void test_scatter_add_adjoint(void **state)
{
    (void)state;
    fvm_diag d = {0};
    rng_seed(6);
    fvm_dims xs = D3(3, 4, 5);
    for (int k = 0; k < 2; k++)
        for (int axis = 0; axis < 3; axis++)
            for (int wide = 0; wide < 2; wide++) {
                fvm_dtype t = FLOATS[k];
                fvm_tensor idx = junk(wide ? FVM_DTYPE_I64 : FVM_DTYPE_I32, D2(2, 3));
                for (int i = 0; i < 6; i++)
                    fvm_tensor_set_i64(&idx, i, (int64_t)(rng_next() % (uint64_t)xs.d[axis]));
                fvm_dims gs = {.rank = 4};
                for (int a = 0, g = 0; a < 3; a++) {
                    if (a == axis) {
                        gs.d[g++] = 2;
                        gs.d[g++] = 3;
                    } else {
                        gs.d[g++] = xs.d[a];
                    }
                }
                fvm_tensor x = rand_tensor(t, xs), u = rand_tensor(t, gs), gx = junk(t, gs), su = junk(t, xs);
                assert_int_equal(fvm_k_gather(&x, &idx, axis, &gx, &d), FVM_OK);
                assert_int_equal(fvm_k_scatter_add(&idx, &u, axis, &su, &d), FVM_OK);
                double lhs = dot_tt(&gx, &u), rhs = dot_tt(&x, &su);
                double tol = t == FVM_DTYPE_F32 ? 1e-5 : 1e-13;
                if (!(fabs(lhs - rhs) <= tol * 120))
                    fail_msg("axis %d: <gather(x), u> = %.17g, <x, scatter_add(u)> = %.17g", axis, lhs, rhs);
                release(5, &idx, &x, &u, &gx, &su);
            }
    assert_int_equal(d.n, 0);
}

/* ---- dropout ------------------------------------------------------------- */

static void test_dropout(void **state)
{
    (void)state;
    fvm_diag d = {0};
    rng_seed(7);
    const uint32_t key[2] = {0, 42}, other[2] = {0, 43};
    enum { N = 100001 }; /* odd: the last hash call gives one draw */
    for (int k = 0; k < 2; k++) {
        fvm_dtype t = FLOATS[k];
        fvm_tensor ones = junk(t, D1(N));
        for (int64_t i = 0; i < N; i++)
            fvm_tensor_set_f64(&ones, i, 1);
        fvm_tensor a = junk(t, D1(N)), b = junk(t, D1(N)), c = junk(t, D1(N));
        assert_int_equal(fvm_k_dropout(&ones, key, 0.3, &a, &d), FVM_OK);
        assert_int_equal(fvm_k_dropout(&ones, key, 0.3, &b, &d), FVM_OK);
        assert_true(fvm_tensor_identical(&a, &b)); /* same key, same mask */
        assert_int_equal(fvm_k_dropout(&ones, other, 0.3, &c, &d), FVM_OK);
        assert_false(fvm_tensor_identical(&a, &c));
        /* the mask is jax.random.uniform(key, (n,)) >= rate; kept values are 1/0.7 */
        float *u = malloc(N * sizeof *u);
        assert_non_null(u);
        fvm_prng_uniform_f32(key, N, u);
        double scale = t == FVM_DTYPE_F32 ? (double)(1.0f / (float)(1.0 - 0.3)) : 1.0 / (1.0 - 0.3);
        int64_t kept = 0;
        for (int64_t i = 0; i < N; i++) {
            double v = fvm_tensor_get_f64(&a, i);
            if ((double)u[i] >= 0.3) {
                kept++;
                assert_true(v == scale);
            } else {
                assert_true(v == 0 && !signbit(v));
            }
        }
        double frac = (double)kept / N;
        if (!(fabs(frac - 0.7) < 0.01))
            fail_msg("kept fraction %.4f", frac);
        /* rate 0 is the identity, bit for bit */
        fvm_tensor x = rand_tensor(t, D2(7, 13)), y = junk(t, D2(7, 13));
        assert_int_equal(fvm_k_dropout(&x, key, 0, &y, &d), FVM_OK);
        assert_true(fvm_tensor_identical(&x, &y));
        /* in place gives what out of place gives (odd count: the last draw pair is cut) */
        assert_int_equal(fvm_k_dropout(&x, key, 0.5, &y, &d), FVM_OK);
        assert_int_equal(fvm_k_dropout(&x, key, 0.5, &x, &d), FVM_OK);
        assert_true(fvm_tensor_identical(&x, &y));
        free(u);
        assert_int_equal(d.n, 0);
        /* the rate's range */
        assert_int_equal(fvm_k_dropout(&ones, key, 1.0, &a, &d), FVM_ERR_RUNTIME);
        expect_one_error(&d, FVM_ERR_RUNTIME, "rate 1", "[0, 1)");
        assert_int_equal(fvm_k_dropout(&ones, key, -0.1, &a, &d), FVM_ERR_RUNTIME);
        expect_one_error(&d, FVM_ERR_RUNTIME, "rate -0.1", NULL);
        assert_int_equal(fvm_k_dropout(&ones, key, NAN, &a, &d), FVM_ERR_RUNTIME);
        expect_one_error(&d, FVM_ERR_RUNTIME, "rate", NULL);
        release(6, &ones, &a, &b, &c, &x, &y);
    }
    /* dropout(ct) with the same key is the gradient of sum(dropout(x) * ct):
     * central differences in f64 */
    const double h = 1e-3;
    fvm_tensor x = rand_tensor(FVM_DTYPE_F64, D1(301)), ct = rand_tensor(FVM_DTYPE_F64, D1(301));
    fvm_tensor y = junk(FVM_DTYPE_F64, D1(301)), g = junk(FVM_DTYPE_F64, D1(301));
    double *ctv = values(&ct), *xp = fvm_tensor_data(&x);
    assert_int_equal(fvm_k_dropout(&ct, key, 0.4, &g, &d), FVM_OK);
    int zeros = 0;
    for (int64_t i = 0; i < 301; i++) {
        double v = xp[i];
        xp[i] = v + h;
        assert_int_equal(fvm_k_dropout(&x, key, 0.4, &y, &d), FVM_OK);
        double fp = dot_with(&y, ctv);
        xp[i] = v - h;
        assert_int_equal(fvm_k_dropout(&x, key, 0.4, &y, &d), FVM_OK);
        double fm = dot_with(&y, ctv);
        xp[i] = v;
        double gi = fvm_tensor_get_f64(&g, i);
        zeros += gi == 0;
        expect_fd((fp - fm) / (2 * h), gi, "dropout", i);
    }
    assert_true(zeros > 60 && zeros < 180); /* some dropped, some kept */
    free(ctv);
    release(4, &x, &ct, &y, &g);
    fvm_tensor xi = junk(FVM_DTYPE_I32, D1(2)), yi = junk(FVM_DTYPE_I32, D1(2));
    assert_int_equal(fvm_k_dropout(&xi, key, 0.5, &yi, &d), FVM_ERR_TYPE);
    expect_one_error(&d, FVM_ERR_TYPE, "dropout", "i32");
    release(2, &xi, &yi);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_out),
        cmocka_unit_test(test_conv2d_by_hand),
        cmocka_unit_test(test_conv2d_naive),
        cmocka_unit_test(test_conv2d_finite_differences),
        cmocka_unit_test(test_conv2d_edges),
        cmocka_unit_test(test_pool_by_hand),
        cmocka_unit_test(test_max_pool_ties_and_nan),
        cmocka_unit_test(test_max_pool_gather),
        cmocka_unit_test(test_pool_finite_differences),
        cmocka_unit_test(test_pool_errors),
        cmocka_unit_test(test_lstm_gates),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_scatter_add_by_hand),
        cmocka_unit_test(test_scatter_add_adjoint),
        cmocka_unit_test(test_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
