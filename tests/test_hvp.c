/* test_hvp.c - second derivatives: Hessian-vector products of every case of ad_cases.h, as grad of grad (vjp of
 * the gradient) and as jvp of the gradient, against central differences of the gradient in f64; closed-form
 * Hessians; third derivatives; the size of nested derivatives; the second derivatives that are errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../format/bind.h"
#include "test_util.h"
#include "ad_cases.h"

/* Cases whose second derivative is an error by design, and the error (none
 * today: every op a VJP rule emits has a rule of its own). */
static const struct {
    const char *name, *error;
} no_second[] = {
    {"(none)", NULL},
};

static const char *expected_error(const char *name)
{
    for (size_t i = 0; i < sizeof no_second / sizeof *no_second; i++)
        if (!strcmp(no_second[i].name, name))
            return no_second[i].error;
    return NULL;
}

/* (a - b) * k over the float leaves of two values of one shape: a new value. */
static fvm_value *diff_scaled(const fvm_value *a, const fvm_value *b, double k)
{
    fvm_value *r = ad_copy(a);
    ad_axpy(r, -1, b);
    leaves l = {0};
    collect(r, &l);
    for (int j = 0; j < l.n; j++)
        for (int64_t i = 0; i < fvm_tensor_count(l.t[j]); i++)
            fvm_tensor_set_f64(l.t[j], i, fvm_tensor_get_f64(l.t[j], i) * k);
    return r;
}

/* f's parameters as a JSON object with one more, "name": "type". */
static char *params_plus(const ad_case *c, const char *name, const char *type)
{
    char *p = unquote(c->params);
    size_t n = strlen(p) + strlen(name) + strlen(type) + 16;
    char *q = malloc(n);
    p[strlen(p) - 1] = 0;
    snprintf(q, n, "%s, \"%s\": \"%s\"}", p, name, type);
    free(p);
    return q;
}

static ad_err err_fd, err_fwd; /* the largest errors over the cases */
static int nchecked;

/* H v for case c at random (or fixed) arguments and a random direction v of
 * the differentiated parameter's type: vjp of the gradient (reverse over
 * reverse) and jvp of the gradient (forward over reverse) against the
 * central difference (g(w + h v) - g(w - h v)) / 2h of the gradient g. */
static void run_hvp(const ad_case *c)
{
    char *text0 = ad_program_text(c, "s", "");
    fvm_program *p0 = ad_compile(text0, c->name);
    const fvm_func *f0 = fvm_program_func(p0, "f");
    int wrt = ad_param(f0, c->wrt);
    char tw[512], args[1024];
    fvm_type_format(f0->param_types[wrt], false, tw, sizeof tw);
    ad_arg_list(f0, args, sizeof args);
    char *pv = params_plus(c, "v_dir", tw), *params = unquote(c->params);
    size_t n = strlen(pv) * 2 + strlen(params) + 3 * strlen(args) + 1024;
    char *more = malloc(n);
    snprintf(more, n,
             ", \"gfun\": {\"params\": %s, \"body\": [[\"g_\", \"grad\", {\"fn\": \"f\", \"wrt\": \"%s\"}%s]], "
             "\"result\": \"g_\"}, "
             "\"hvp_r\": {\"params\": %s, \"body\": [[\"h_\", \"vjp\", {\"fn\": \"gfun\", \"wrt\": \"%s\"}%s, "
             "\"v_dir\"]], \"result\": \"h_\"}, "
             "\"hvp_f\": {\"params\": %s, \"body\": [[\"j_\", \"jvp\", {\"fn\": \"gfun\", \"wrt\": \"%s\"}%s, "
             "\"v_dir\"], [\"h_\", \"field\", {\"name\": \"tangent\"}, \"j_\"]], \"result\": \"h_\"}",
             params, c->wrt, args, pv, c->wrt, args, pv, c->wrt, args);
    char *text = ad_program_text(c, "s", more);
    free(more);
    free(pv);
    free(params);
    free(text0);
    fvm_program_free(p0);

    const char *error = expected_error(c->name);
    if (error) { /* an error of the check, at the op in f */
        fvm_diag d = {0};
        fvm_program *p = NULL;
        assert_int_equal(fvm_program_load_text("case.json", text, strlen(text), &p, &d), FVM_OK);
        assert_int_not_equal(fvm_compile(p, &d), FVM_OK);
        bool found = false;
        for (int i = 0; i < d.n && !found; i++)
            found =
                strstr(d.errs[i].msg, error) && d.errs[i].loc.ptr && !strcmp(d.errs[i].loc.ptr, "/functions/f/body/0");
        if (!found)
            fail_msg("%s: no error '%s' at /functions/f/body/0 (first: %s)", c->name, error, d.n ? d.errs[0].msg : "-");
        fvm_diag_clear(&d);
        fvm_program_free(p);
        free(text);
        print_message("second derivative %s: the error it must be\n", c->name);
        return;
    }

    fvm_program *p = ad_compile(text, c->name);
    const fvm_func *f = fvm_program_func(p, "f"), *gfun = fvm_program_func(p, "gfun");
    const fvm_type *tt = f->param_types[wrt];
    fvm_value *a[17] = {0};
    int na = ad_args(c, f, a);
    a[na] = random_value(tt, ANY); /* the direction v */
    fvm_vm *vm = NULL;
    fvm_vm_config cfg = {.nclients = 3};
    fvm_diag d = {0};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    char what[200];
    fvm_value *r = ad_call(vm, fvm_program_func(p, "hvp_r"), a, c->name);
    fvm_value *hr = fold_clients(c->name, r, tt);
    fvm_value_release(r);
    r = ad_call(vm, fvm_program_func(p, "hvp_f"), a, c->name);
    fvm_value *hf = fold_clients(c->name, r, tt);
    fvm_value_release(r);

    /* central differences of the gradient along v; a program in f32 with
     * steps of 2^-7 and a tolerance of 2e-3 (f32 gradients divided by 2h) */
    bool coarse = computes_in_f32(p);
    double h = coarse ? 1.0 / 128 : 1e-5, tol = coarse ? 2e-3 : 1e-6;
    fvm_value *g[2], *w0 = a[wrt];
    for (int side = 0; side < 2; side++) {
        a[wrt] = ad_copy(w0);
        ad_axpy(a[wrt], side ? -h : h, a[na]);
        r = ad_call(vm, gfun, a, c->name);
        g[side] = fold_clients(c->name, r, tt);
        fvm_value_release(r);
        fvm_value_release(a[wrt]);
    }
    a[wrt] = w0;
    fvm_value *fd = diff_scaled(g[0], g[1], 1 / (2 * h));
    snprintf(what, sizeof what, "%s: grad of grad against central differences", c->name);
    ad_close(what, hr, fd, tol, coarse ? NULL : &err_fd);
    snprintf(what, sizeof what, "%s: jvp of grad against central differences", c->name);
    ad_close(what, hf, fd, tol, coarse ? NULL : &err_fd);
    snprintf(what, sizeof what, "%s: jvp of grad against grad of grad", c->name);
    ad_close(what, hf, hr, coarse ? 1e-4 : 1e-10, coarse ? NULL : &err_fwd);
    nchecked++;
    for (int i = 0; i <= na; i++)
        fvm_value_release(a[i]);
    fvm_value_release(g[0]);
    fvm_value_release(g[1]);
    fvm_value_release(fd);
    fvm_value_release(hr);
    fvm_value_release(hf);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(text);
    print_message("second derivative %s: ok\n", c->name);
}

static void test_hvp_of_every_case(void **state)
{
    (void)state;
    rng_state = 2468;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        ad_case c = {ops[i].name, NULL, ops[i].params, ops[i].body, ops[i].wrt, ops[i].dom, ops[i].fixed};
        run_hvp(&c);
    }
    for (size_t i = 0; i < sizeof programs / sizeof *programs; i++) {
        const pcase *q = &programs[i];
        ad_case c = {q->name, q->functions, q->params, q->body, q->wrt, q->dom, q->fixed};
        run_hvp(&c);
    }
    print_message("Hessian-vector products of %d cases (f64): largest relative error against central differences "
                  "%.2e (%s); forward over reverse against reverse over reverse %.2e\n",
                  nchecked, err_fd.max, err_fd.where, err_fwd.max);
}

/* Runs function fn of tests/ad/hessians.json with JSON arguments; its value. */
static fvm_value *run_hessians(const char *fn, int nargs, const fvm_named_text *args)
{
    fvm_diag d = {0};
    fvm_program *p = test_load_file("tests/ad/hessians.json", &d);
    const fvm_func *f = fvm_program_func(p, fn);
    fvm_vm *vm = NULL;
    fvm_value **vals = NULL, *res = NULL;
    int64_t nclients = -1;
    assert_non_null(f);
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    assert_int_equal(fvm_bind_args(f, nargs, args, 0, &nclients, &vals, &d), FVM_OK);
    if (nclients >= 0)
        assert_int_equal(fvm_vm_set_clients(vm, nclients, &d), FVM_OK);
    res = ad_call(vm, f, vals, fn);
    fvm_values_free(vals, f->nparams);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    return res;
}

static void expect_vector(const char *what, const fvm_value *v, int n, const double *want, double tol, ad_err *e)
{
    assert_int_equal(v->kind, FVM_V_TENSOR);
    assert_int_equal(fvm_tensor_count(&v->t), n);
    for (int i = 0; i < n; i++) {
        double g = fvm_tensor_get_f64(&v->t, i), err = fabs(g - want[i]) / fmax(1, fabs(want[i]));
        if (!(err <= tol))
            fail_msg("%s: element %d is %.17g, the closed form %.17g", what, i, g, want[i]);
        if (e && err > e->max) {
            e->max = err;
            snprintf(e->where, sizeof e->where, "%s", what);
        }
    }
}

/* Logistic regression over three clients with 2, 3 and 1 examples: the
 * Hessian of the mean over clients of each client's mean log-loss is
 * (1/3) sum_i (1/n_i) sum_k s_k (1 - s_k) x_k x_k^T, s_k = sigmoid(x_k . w);
 * pooled (client means weighted by their counts) it is (1/6) sum_k ... .
 * H v by grad of <grad(loss)(u), v> (JAX's hvp), by jvp and by vjp of the
 * gradient, against H v computed here. */
static void test_logistic_regression_hessian(void **state)
{
    (void)state;
    static const double x[6][3] = {{1, 0.5, 1},   {-0.3, 2, 1}, {0.7, -1.2, 1},
                                   {1.5, 0.2, 1}, {-2, 0.4, 1}, {0.1, 0.9, 1}};
    static const int client[6] = {0, 0, 1, 1, 1, 2}, count[3] = {2, 3, 1};
    const double w[3] = {0.2, -0.4, 0.1}, v[3] = {1, -2, 0.5};
    double mean[3] = {0}, pooled[3] = {0};
    for (int k = 0; k < 6; k++) {
        double z = x[k][0] * w[0] + x[k][1] * w[1] + x[k][2] * w[2], s = 1 / (1 + exp(-z)), xv = 0;
        for (int j = 0; j < 3; j++)
            xv += x[k][j] * v[j];
        for (int i = 0; i < 3; i++) {
            mean[i] += s * (1 - s) * x[k][i] * xv / (3.0 * count[client[k]]);
            pooled[i] += s * (1 - s) * x[k][i] * xv / 6.0;
        }
    }
    const char *data = "[[{\"x\": [1, 0.5, 1], \"y\": 1}, {\"x\": [-0.3, 2, 1], \"y\": 0}], "
                       "[{\"x\": [0.7, -1.2, 1], \"y\": 0}, {\"x\": [1.5, 0.2, 1], \"y\": 1}, "
                       "{\"x\": [-2, 0.4, 1], \"y\": 1}], [{\"x\": [0.1, 0.9, 1], \"y\": 0}]]";
    fvm_named_text args[3] = {
        {"w", "[0.2, -0.4, 0.1]", FVM_ARG_JSON}, {"data", data, FVM_ARG_JSON}, {"v", "[1, -2, 0.5]", FVM_ARG_JSON}};
    ad_err e = {0};
    static const char *const forms[] = {"hvp", "hvp_jvp", "hvp_vjp"};
    for (int i = 0; i < 3; i++) {
        fvm_value *h = run_hessians(forms[i], 3, args);
        expect_vector(forms[i], h, 3, mean, 1e-13, &e);
        fvm_value_release(h);
    }
    fvm_value *h = run_hessians("hvp_pooled", 3, args);
    expect_vector("hvp_pooled", h, 3, pooled, 1e-13, &e);
    fvm_value_release(h);
    print_message("logistic regression over 3 clients, H v four ways: largest relative error %.2e against the "
                  "closed form\n",
                  e.max);
}

/* sum_i 1/2 w^T A_i w through fori, plus 1/2 w^T B w + b . w (then) or
 * b . w (else) through cond: H = sum_i (A_i + A_i^T)/2 (+ (B + B^T)/2). */
static void test_quadratic_hessian(void **state)
{
    (void)state;
    static const double a[3][2][2] = {{{1, 2}, {0, 3}}, {{2, 1}, {1, 1}}, {{0.5, 0}, {0.3, 2}}};
    static const double bm[2][2] = {{1, 0.5}, {0.5, 2}}, v[2] = {1, -1};
    for (int p = 0; p < 2; p++) {
        double want[2] = {0};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double hij = 0;
                for (int k = 0; k < 3; k++)
                    hij += (a[k][i][j] + a[k][j][i]) / 2;
                if (p)
                    hij += (bm[i][j] + bm[j][i]) / 2;
                want[i] += hij * v[j];
            }
        fvm_named_text args[6] = {{"w", "[0.2, -0.4]", FVM_ARG_JSON},
                                  {"a", "[[[1, 2], [0, 3]], [[2, 1], [1, 1]], [[0.5, 0], [0.3, 2]]]", FVM_ARG_JSON},
                                  {"p", p ? "true" : "false", FVM_ARG_JSON},
                                  {"b", "[1, 2]", FVM_ARG_JSON},
                                  {"bm", "[[1, 0.5], [0.5, 2]]", FVM_ARG_JSON},
                                  {"v", "[1, -1]", FVM_ARG_JSON}};
        fvm_value *h = run_hessians("hvp_quadratic", 6, args);
        expect_vector(p ? "quadratic, then" : "quadratic, else", h, 2, want, 1e-14, NULL);
        fvm_value_release(h);
    }
}

/* d^2/dx^2 of sum_i sum tanh(x_i)^2 with respect to client values: each
 * client's own 2 (1 - t^2)(1 - 3 t^2) v_i, one value per client. */
static void test_client_values_hessian(void **state)
{
    (void)state;
    const double x[3][2] = {{0.1, 0.5}, {-0.3, 1}, {2, 0.2}}, v[3][2] = {{1, 0}, {0, 1}, {1, 1}};
    fvm_named_text args[2] = {{"x", "[[0.1, 0.5], [-0.3, 1], [2, 0.2]]", FVM_ARG_JSON},
                              {"v", "[[1, 0], [0, 1], [1, 1]]", FVM_ARG_JSON}};
    fvm_value *h = run_hessians("hvp_clients", 2, args);
    assert_int_equal(h->kind, FVM_V_CLIENTS);
    assert_int_equal(h->n, 3);
    for (int i = 0; i < 3; i++) {
        double want[2];
        for (int j = 0; j < 2; j++) {
            double t = tanh(x[i][j]);
            want[j] = 2 * (1 - t * t) * (1 - 3 * t * t) * v[i][j];
        }
        expect_vector("client values", h->items[i], 2, want, 1e-14, NULL);
    }
    fvm_value_release(h);
}

/* The third derivative of a federated function: d^3/dw^3 of the mean over
 * clients of (w x_i)^3 is the mean of 6 x_i^3, by grad of grad of grad and
 * by the tangent of the second derivative. */
static void test_third_derivative_over_clients(void **state)
{
    (void)state;
    fvm_named_text args[2] = {{"w", "0.7", FVM_ARG_JSON}, {"x", "[1, -2, 0.5]", FVM_ARG_JSON}};
    const double want = 6 * (1 - 8 + 0.125) / 3;
    static const char *const forms[] = {"d3", "d3_jvp"};
    for (int i = 0; i < 2; i++) {
        fvm_value *g = run_hessians(forms[i], 2, args);
        expect_vector(forms[i], g, 1, &want, 1e-14, NULL);
        fvm_value_release(g);
    }
}

/* Nested derivatives of f(x) = x sin x: g1 = grad f, g2 = grad g1, ...: the
 * n-th equals n sin(x + (n-1) pi/2) + x sin(x + n pi/2), and its derived
 * code grows with the order by less than a constant factor per order (no
 * 2^n copies: a derivative op is taken in as one call of what it derived). */
static void test_nested_derivatives(void **state)
{
    (void)state;
    enum { N = 6 };
    char text[4096];
    size_t w = (size_t)snprintf(text, sizeof text,
                                "{\"fedvm\": 1, \"functions\": {\"g0\": {\"params\": {\"x\": \"f64[]\"}, \"body\": "
                                "[[\"s\", \"sin\", \"x\"], [\"y\", \"mul\", \"x\", \"s\"]], \"result\": \"y\"}");
    for (int k = 1; k <= N; k++)
        w += (size_t)snprintf(text + w, sizeof text - w,
                              ", \"g%d\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"d\", \"grad\", {\"fn\": "
                              "\"g%d\"}, \"x\"]], \"result\": \"d\"}",
                              k, k - 1);
    snprintf(text + w, sizeof text - w, "}}");
    fvm_program *p = ad_compile(text, "nested");
    fvm_vm *vm = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    const double x = 0.7, half_pi = 1.5707963267948966;
    long prev = 0;
    for (int k = 1; k <= N; k++) {
        char name[32];
        snprintf(name, sizeof name, "g%d.vjp(x)", k - 1);
        const fvm_func *pb = fvm_program_func(p, name);
        assert_non_null(pb);
        long size = pb->ninstrs;
        if (prev && size > 4 * prev)
            fail_msg("the pullback of g%d takes %ld instructions, more than 4 times g%d's (%ld)", k - 1, size, k - 2,
                     prev);
        prev = size;
        snprintf(name, sizeof name, "g%d", k);
        fvm_value *arg = f64_scalar(x), *r = ad_call(vm, fvm_program_func(p, name), &arg, name);
        double want = k * sin(x + (k - 1) * half_pi) + x * sin(x + k * half_pi);
        expect_vector(name, r, 1, &want, 1e-13, NULL);
        fvm_value_release(r);
        fvm_value_release(arg);
    }
    assert_true(prev < 400); /* the sixth derivative's pullback: 225 instructions today */
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
}

/* Past the bound on inlining (autodiff.h): f is a chain of 600 sin, so
 * grad(f)'s pullback is too large to take in, and the derivative of a
 * function using grad(f) goes through that function's own pullback (a call
 * the derivation shares), with the grad op copied forward: its second
 * derivative, and the tangent of its first, against the chain rule. */
static void test_second_derivative_past_inlining(void **state)
{
    (void)state;
    enum { N = 600 };
    size_t cap = 256 + 40 * (size_t)N, w = 0;
    char *text = malloc(cap);
    w += (size_t)snprintf(text + w, cap - w,
                          "{\"fedvm\": 1, \"functions\": {\"f\": {\"params\": {\"x\": \"f64[]\"}, \"body\": "
                          "[[\"y0\", \"sin\", \"x\"]");
    for (int i = 1; i < N; i++)
        w += (size_t)snprintf(text + w, cap - w, ", [\"y%d\", \"sin\", \"y%d\"]", i, i - 1);
    snprintf(
        text + w, cap - w,
        "], \"result\": \"y%d\"}, \"g\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"d\", \"grad\", {\"fn\": "
        "\"f\"}, \"x\"]], \"result\": \"d\"}, \"h\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"d\", \"grad\", "
        "{\"fn\": \"g\"}, \"x\"]], \"result\": \"d\"}, \"hj\": {\"params\": {\"x\": \"f64[]\", \"t\": \"f64[]\"}, "
        "\"body\": [[\"d\", \"jvp\", {\"fn\": \"g\"}, \"x\", \"t\"]], \"result\": \"d\"}}}",
        N - 1);
    fvm_program *p = ad_compile(text, "past inlining");
    bool shared = false; /* some derived function calls a pullback rather than inlining it */
    for (int i = 0; i < p->nfuncs && !shared; i++)
        for (int k = 0; k < p->funcs[i]->ninstrs && !shared; k++)
            shared = p->funcs[i]->instrs[k].op == FVM_OP_CALL && strstr(p->funcs[i]->instrs[k].a.fn->name, ".vjp(");
    assert_true(shared);
    double y = 0.3, dy = 1, ddy = 0;
    for (int i = 0; i < N; i++) {
        double s = sin(y), c = cos(y);
        ddy = -s * dy * dy + c * ddy;
        dy = c * dy;
        y = s;
    }
    fvm_vm *vm = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    fvm_value *a[2] = {f64_scalar(0.3), f64_scalar(1)};
    fvm_value *r = ad_call(vm, fvm_program_func(p, "h"), a, "h");
    expect_vector("the second derivative", r, 1, &ddy, 1e-12, NULL);
    fvm_value_release(r);
    r = ad_call(vm, fvm_program_func(p, "hj"), a, "hj");
    expect_vector("the value of the first", r->items[0], 1, &dy, 1e-12, NULL);
    expect_vector("the tangent of the first", r->items[1], 1, &ddy, 1e-12, NULL);
    fvm_value_release(r);
    fvm_value_release(a[0]);
    fvm_value_release(a[1]);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hvp_of_every_case),
        cmocka_unit_test(test_logistic_regression_hessian),
        cmocka_unit_test(test_quadratic_hessian),
        cmocka_unit_test(test_client_values_hessian),
        cmocka_unit_test(test_third_derivative_over_clients),
        cmocka_unit_test(test_nested_derivatives),
        cmocka_unit_test(test_second_derivative_past_inlining),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
