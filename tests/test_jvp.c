/* test_jvp.c - forward derivatives: the jvp of every case of ad_cases.h against central differences in f64 and
 * against vjp (<J t, u> = <t, J^T u>); the closure of federated programs under jvp; jvp's errors. */
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

/* v, a value of type t, as a value of ct(t): each all-equal T@CLIENTS part
 * as one (shared) member per client, 3 clients. A new reference. */
static fvm_value *per_client(const fvm_value *v, const fvm_type *t)
{
    if (t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && t->u.fed.all_equal) {
        fvm_value *l = fvm_value_list(FVM_V_CLIENTS, 3);
        for (int i = 0; i < 3; i++)
            l->items[i] = fvm_value_retain((fvm_value *)v);
        return l;
    }
    if (t->kind == FVM_T_STRUCT && fvm_type_is_placed(t)) {
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, v->n);
        for (int64_t i = 0; i < v->n; i++)
            s->items[i] = per_client(v->items[i], t->u.strct.elems[i]);
        return s;
    }
    return fvm_value_retain((fvm_value *)v);
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

static ad_err err_fd, err_dual;
static int nchecked;

/* jvp of f for case c, where f returns the op's result 'y' when the case
 * has one (the loss 's' otherwise), at random (or fixed) arguments and a
 * random tangent t of the differentiated parameter: its value is f's, its
 * tangent the central difference (f(w + h t) - f(w - h t)) / 2h, and for a
 * random cotangent u of f's result, <tangent, u> = <t, vjp(f)(w, u)>. */
static void run_jvp(const ad_case *c)
{
    const char *result = strstr(c->body, "['y',") ? "y" : "s";
    char *text0 = ad_program_text(c, result, "");
    fvm_program *p0 = ad_compile(text0, c->name);
    const fvm_func *f0 = fvm_program_func(p0, "f");
    if (!fvm_type_has_floats(f0->result_type)) {
        result = "s";
        free(text0);
        fvm_program_free(p0);
        text0 = ad_program_text(c, result, "");
        p0 = ad_compile(text0, c->name);
        f0 = fvm_program_func(p0, "f");
    }
    int wrt = ad_param(f0, c->wrt);
    char tw[512], tu[512], args[1024];
    fvm_type_format(f0->param_types[wrt], false, tw, sizeof tw);
    fvm_type_format(fvm_type_cotangent(&p0->arena, f0->result_type), false, tu, sizeof tu);
    ad_arg_list(f0, args, sizeof args);
    char *pt = params_plus(c, "t_dir", tw), *pu = params_plus(c, "u_dir", tu);
    size_t n = strlen(pt) + strlen(pu) + 2 * strlen(args) + 512;
    char *more = malloc(n);
    snprintf(more, n,
             ", \"jv\": {\"params\": %s, \"body\": [[\"j_\", \"jvp\", {\"fn\": \"f\", \"wrt\": \"%s\"}%s, \"t_dir\"]], "
             "\"result\": \"j_\"}, "
             "\"vj\": {\"params\": %s, \"body\": [[\"h_\", \"vjp\", {\"fn\": \"f\", \"wrt\": \"%s\"}%s, \"u_dir\"]], "
             "\"result\": \"h_\"}",
             pt, c->wrt, args, pu, c->wrt, args);
    char *text = ad_program_text(c, result, more);
    free(more);
    free(pt);
    free(pu);
    free(text0);
    fvm_program_free(p0);

    fvm_program *p = ad_compile(text, c->name);
    const fvm_func *f = fvm_program_func(p, "f");
    const fvm_type *tt = f->param_types[wrt], *rt = f->result_type, *ut = fvm_type_cotangent(&p->arena, rt);
    fvm_value *a[17] = {0};
    int na = ad_args(c, f, a);
    fvm_vm *vm = NULL;
    fvm_vm_config cfg = {.nclients = 3};
    fvm_diag d = {0};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    char what[200];
    fvm_value *t = random_value(tt, ANY), *u = random_value(ut, ANY); /* a tangent, a cotangent of the result */
    a[na] = t;
    fvm_value *j = ad_call(vm, fvm_program_func(p, "jv"), a, c->name);
    a[na] = u;
    fvm_value *g = ad_call(vm, fvm_program_func(p, "vj"), a, c->name);
    a[na] = NULL;
    fvm_value *y0 = ad_call(vm, f, a, c->name);
    snprintf(what, sizeof what, "%s: jvp's value against f's", c->name);
    ad_close(what, j->items[0], y0, 1e-12, NULL);

    /* the tangent against central differences along t */
    bool coarse = computes_in_f32(p);
    double h = coarse ? 1.0 / 256 : 1e-6, tol = coarse ? 1e-3 : 1e-6;
    fvm_value *ys[2], *w0 = a[wrt];
    for (int side = 0; side < 2; side++) {
        a[wrt] = ad_copy(w0);
        ad_axpy(a[wrt], side ? -h : h, t);
        ys[side] = ad_call(vm, f, a, c->name);
        fvm_value_release(a[wrt]);
    }
    a[wrt] = w0;
    fvm_value *fd = ad_copy(ys[0]);
    ad_axpy(fd, -1, ys[1]);
    leaves l = {0};
    collect(fd, &l);
    for (int k = 0; k < l.n; k++)
        for (int64_t i = 0; i < fvm_tensor_count(l.t[k]); i++)
            fvm_tensor_set_f64(l.t[k], i, fvm_tensor_get_f64(l.t[k], i) / (2 * h));
    fvm_value *fdc = per_client(fd, rt);
    snprintf(what, sizeof what, "%s: jvp against central differences", c->name);
    ad_close(what, j->items[1], fdc, tol, coarse ? NULL : &err_fd);

    /* <J t, u> = <t, J^T u> */
    fvm_value *gt = fold_clients(c->name, g, tt);
    double lhs = inner(j->items[1], u), rhs = inner(t, gt), err = fabs(lhs - rhs) / fmax(1, fabs(rhs));
    if (!(err <= (coarse ? 1e-4 : 1e-12)))
        fail_msg("%s: <J t, u> = %.15g but <t, J^T u> = %.15g", c->name, lhs, rhs);
    if (!coarse && err > err_dual.max) {
        err_dual.max = err;
        snprintf(err_dual.where, sizeof err_dual.where, "%s", c->name);
    }
    nchecked++;
    for (int i = 0; i < na; i++)
        fvm_value_release(a[i]);
    fvm_value_release(t);
    fvm_value_release(u);
    fvm_value_release(g);
    fvm_value_release(gt);
    fvm_value_release(j);
    fvm_value_release(y0);
    fvm_value_release(ys[0]);
    fvm_value_release(ys[1]);
    fvm_value_release(fd);
    fvm_value_release(fdc);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(text);
    print_message("forward derivative %s: ok\n", c->name);
}

static void test_jvp_of_every_case(void **state)
{
    (void)state;
    rng_state = 1357;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        ad_case c = {ops[i].name, NULL, ops[i].params, ops[i].body, ops[i].wrt, ops[i].dom, ops[i].fixed};
        run_jvp(&c);
    }
    for (size_t i = 0; i < sizeof programs / sizeof *programs; i++) {
        const pcase *q = &programs[i];
        ad_case c = {q->name, q->functions, q->params, q->body, q->wrt, q->dom, q->fixed};
        run_jvp(&c);
    }
    print_message("jvp of %d cases (f64): largest relative error against central differences %.2e (%s); "
                  "<J t, u> against <t, J^T u> %.2e (%s)\n",
                  nchecked, err_fd.max, err_fd.where, err_dual.max, err_dual.where);
}

/* The federated intrinsics (by op) in function f. */
static int count_op(const fvm_func *f, fvm_op op)
{
    int n = 0;
    for (int i = 0; i < f->ninstrs; i++)
        n += f->instrs[i].op == op;
    return n;
}

/* The derived function of main's first instruction (a jvp), in program text,
 * with the functions that precede it; its value for args in *out. */
static fvm_program *jvp_program(const char *functions, const char *params, const char *args, fvm_value **vals,
                                fvm_value **out, const fvm_func **derived)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{'fedvm': 1, 'functions': {%s, 'main': {'params': %s, 'body': [['j', 'jvp', {'fn': 'f'}, %s]], "
             "'result': 'j'}}}",
             functions, params, args);
    fvm_program *p = test_load("closure.json", text, true);
    const fvm_func *main = fvm_program_func(p, "main");
    *derived = main->instrs[0].derived;
    assert_non_null(*derived);
    fvm_vm *vm = NULL;
    fvm_diag d = {0};
    fvm_vm_config cfg = {.nclients = 3};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    *out = ad_call(vm, main, vals, "closure");
    fvm_vm_free(vm);
    /* derived code keeps the placement rules: only ops that take placed values get them */
    for (int i = 0; i < p->nfuncs; i++)
        for (int k = 0; k < p->funcs[i]->ninstrs; k++)
            for (int j = 0; j < p->funcs[i]->instrs[k].nargs; j++)
                if (fvm_type_is_placed(p->funcs[i]->instrs[k].arg_types[j]))
                    assert_true(fvm_op_table[p->funcs[i]->instrs[k].op].flags & OPF_PLACED);
    return p;
}

static fvm_value *vec2(double a, double b)
{
    fvm_tensor t;
    fvm_dims d = {1, {2}};
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F64, &d, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, a);
    fvm_tensor_set_f64(&t, 1, b);
    return fvm_value_tensor_take(&t);
}

static fvm_value *clients3(fvm_value *a, fvm_value *b, fvm_value *c)
{
    fvm_value *l = fvm_value_list(FVM_V_CLIENTS, 3);
    l->items[0] = a;
    l->items[1] = b;
    l->items[2] = c;
    return l;
}

static void expect_vec2(const fvm_value *v, double a, double b, const char *what)
{
    assert_int_equal(v->kind, FVM_V_TENSOR);
    double x = fvm_tensor_get_f64(&v->t, 0), y = fvm_tensor_get_f64(&v->t, 1);
    if (fabs(x - a) > 1e-14 * fmax(1, fabs(a)) || fabs(y - b) > 1e-14 * fmax(1, fabs(b)))
        fail_msg("%s: [%.17g, %.17g], expected [%.17g, %.17g]", what, x, y, a, b);
}

/* The closure of federated programs under jvp: the tangent of a
 * federated_broadcast is a federated_broadcast (of the tangent), of a
 * federated_sum a federated_sum, of a federated_map a federated_map, of a
 * federated_mean a sum divided by the count; the derived functions use no
 * other intrinsic, and their values are the closed forms. */
static void test_jvp_closure(void **state)
{
    (void)state;
    const fvm_func *jf = NULL;
    fvm_value *out = NULL;
    /* broadcast: one tangent per client, each t */
    fvm_value *v[3] = {vec2(1, 2), vec2(0.5, -3)};
    fvm_program *p = jvp_program("'f': {'params': {'w': 'f64[2]@SERVER'}, 'body': [['b', 'federated_broadcast', 'w']], "
                                 "'result': 'b'}",
                                 "{'w': 'f64[2]@SERVER', 't': 'f64[2]@SERVER'}", "'w', 't'", v, &out, &jf);
    assert_int_equal(count_op(jf, FVM_OP_FEDERATED_BROADCAST), 2); /* the value's and the tangent's */
    assert_int_equal(count_op(jf, FVM_OP_FEDERATED_SUM) + count_op(jf, FVM_OP_FEDERATED_MEAN) +
                         count_op(jf, FVM_OP_FEDERATED_MAP),
                     0);
    assert_int_equal(out->items[1]->kind, FVM_V_CLIENTS);
    for (int i = 0; i < 3; i++)
        expect_vec2(out->items[1]->items[i], 0.5, -3, "the tangent of a broadcast");
    fvm_value_release(out);
    fvm_program_free(p);
    for (int i = 0; i < 2; i++)
        fvm_value_release(v[i]);

    /* sum over client values: the sum of the tangents, by federated_sum alone */
    v[0] = clients3(vec2(1, 2), vec2(3, 4), vec2(5, 6));
    v[1] = clients3(vec2(1, 0), vec2(0, 1), vec2(2, 2));
    p = jvp_program("'f': {'params': {'x': '{f64[2]}@CLIENTS'}, 'body': [['s', 'federated_sum', 'x']], 'result': 's'}",
                    "{'x': '{f64[2]}@CLIENTS', 't': '{f64[2]}@CLIENTS'}", "'x', 't'", v, &out, &jf);
    assert_int_equal(count_op(jf, FVM_OP_FEDERATED_SUM), 2); /* the value's and the tangent's */
    assert_int_equal(count_op(jf, FVM_OP_FEDERATED_BROADCAST) + count_op(jf, FVM_OP_FEDERATED_MAP), 0);
    expect_vec2(out->items[0], 9, 12, "the value of the sum");
    expect_vec2(out->items[1], 3, 3, "the tangent of the sum");
    fvm_value_release(out);
    fvm_program_free(p);

    /* map over client values: each client's derivative, by federated_map alone */
    p = jvp_program("'sq': {'params': {'v': 'f64[2]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}, "
                    "'f': {'params': {'x': '{f64[2]}@CLIENTS'}, 'body': [['m', 'federated_map', {'fn': 'sq'}, 'x']], "
                    "'result': 'm'}",
                    "{'x': '{f64[2]}@CLIENTS', 't': '{f64[2]}@CLIENTS'}", "'x', 't'", v, &out, &jf);
    assert_true(count_op(jf, FVM_OP_FEDERATED_MAP) >= 1);
    assert_int_equal(count_op(jf, FVM_OP_FEDERATED_BROADCAST) + count_op(jf, FVM_OP_FEDERATED_SUM), 0);
    expect_vec2(out->items[1]->items[0], 2, 0, "client 0's tangent");
    expect_vec2(out->items[1]->items[1], 0, 8, "client 1's tangent");
    expect_vec2(out->items[1]->items[2], 20, 24, "client 2's tangent");
    fvm_value_release(out);
    fvm_program_free(p);
    fvm_value_release(v[1]);

    /* broadcast, map, mean: the tangent broadcast, the clients' derivatives
     * mapped and summed, divided by the count: sum_i (x_i . t) 2 (x_i . w) / 3 */
    v[1] = v[0];
    v[0] = vec2(0.5, -1);
    v[2] = vec2(1, 0.5);
    p = jvp_program("'sq': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['d', 'matmul', 'x', 'w'], "
                    "['y', 'mul', 'd', 'd']], 'result': 'y'}, "
                    "'f': {'params': {'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}, 'body': "
                    "[['b', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'sq'}, 'b', 'x'], "
                    "['m', 'federated_mean', 'l']], 'result': 'm'}",
                    "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS', 't': 'f64[2]@SERVER'}", "'w', 'x', 't'", v, &out,
                    &jf);
    assert_true(count_op(jf, FVM_OP_FEDERATED_BROADCAST) >= 2); /* the model's and the tangent's */
    assert_true(count_op(jf, FVM_OP_FEDERATED_MAP) >= 2);
    assert_true(count_op(jf, FVM_OP_FEDERATED_SUM) >= 1);
    for (int i = 0; i < jf->ninstrs; i++) {
        fvm_op op = jf->instrs[i].op;
        if (fvm_op_table[op].flags & OPF_FED)
            assert_true(op == FVM_OP_FEDERATED_BROADCAST || op == FVM_OP_FEDERATED_MAP || op == FVM_OP_FEDERATED_SUM ||
                        op == FVM_OP_FEDERATED_MEAN || op == FVM_OP_FEDERATED_APPLY || op == FVM_OP_FEDERATED_VALUE);
    }
    double want = 0;
    const double x[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    for (int i = 0; i < 3; i++)
        want += (x[i][0] * 1 + x[i][1] * 0.5) * 2 * (x[i][0] * 0.5 - x[i][1]) / 3;
    assert_true(fabs(fvm_tensor_get_f64(&out->items[1]->t, 0) - want) <= 1e-14 * fabs(want));
    fvm_value_release(out);
    fvm_program_free(p);
    for (int i = 0; i < 3; i++)
        fvm_value_release(v[i]);
}

/* DrJAX's published figures along the axes: the tangent along e_k is the
 * k-th entry of the gradient [57.666668, -54.666668], the value 87.16667. */
static void test_jvp_drjax_published_numbers(void **state)
{
    (void)state;
    const char *dirs[2] = {"[1, 0]", "[0, 1]"};
    const double want[2] = {57.666668, -54.666668};
    for (int k = 0; k < 2; k++) {
        fvm_diag d = {0};
        fvm_program *p = test_load_file("tests/ad/drjax_jvp.json", &d);
        const fvm_func *f = fvm_program_func(p, "jvp_drjax_loss");
        assert_non_null(f);
        fvm_named_text args[3] = {{"w", "[2, -1]", FVM_ARG_JSON},
                                  {"x", "[[1, 2], [3, -4], [-7, 6]]", FVM_ARG_JSON},
                                  {"t", dirs[k], FVM_ARG_JSON}};
        fvm_value **vals = NULL;
        int64_t nclients = -1;
        fvm_vm *vm = NULL;
        assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
        assert_int_equal(fvm_bind_args(f, 3, args, 0, &nclients, &vals, &d), FVM_OK);
        assert_int_equal(fvm_vm_set_clients(vm, nclients, &d), FVM_OK);
        fvm_value *r = ad_call(vm, f, vals, "jvp_drjax_loss");
        assert_true(fabs(fvm_tensor_get_f64(&r->items[0]->t, 0) - 87.16667) < 1e-5);
        assert_true(fabs(fvm_tensor_get_f64(&r->items[1]->t, 0) - want[k]) < 1e-5);
        fvm_value_release(r);
        fvm_values_free(vals, f->nparams);
        fvm_vm_free(vm);
        fvm_program_free(p);
        fvm_diag_clear(&d);
    }
}

/* jvp's errors are values with locations: each at the instruction, the
 * argument or the attribute at fault (file:line:col and JSON pointer). */
static void test_jvp_errors(void **state)
{
    (void)state;
    static const struct {
        const char *body, *ptr, *msg;
    } cases[] = {
        {"[['j', 'jvp', {'fn': 'f'}, 'w', 'n', 'u']]", "/functions/main/body/0/5",
         "the tangent of 'f''s parameter 'w' must be f64[2], found f64[3]"},
        {"[['j', 'jvp', {'fn': 'f'}, 'w', 'n']]", "/functions/main/body/0",
         "takes f's 2 arguments and the tangent of the differentiated parameter, found 2"},
        {"[['j', 'jvp', {'fn': 'f', 'wrt': 'n'}, 'w', 'n', 'n']]", "/functions/main/body/0/2",
         "no gradient flows through integers"},
        {"[['j', 'jvp', {'fn': 'f', 'wrt': 'v'}, 'w', 'n', 't']]", "/functions/main/body/0/2",
         "function 'f' has no parameter 'v'"},
        {"[['j', 'jvp', {'fn': 'grow'}, 'w', 't']]", "/functions/grow/body/0",
         "cannot differentiate while: it does not pass gradients"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{'fedvm': 1, 'functions': {"
                 "'f': {'params': {'w': 'f64[2]', 'n': 'i32[]'}, 'body': [['c', 'cast', {'dtype': 'f64'}, 'n'], "
                 "['y', 'mul', 'w', 'c']], 'result': 'y'}, "
                 "'small': {'params': {'x': 'f64[2]'}, 'body': [['s', 'sum', 'x'], ['z', 'const', {'value': 9.0, "
                 "'dtype': 'f64'}], ['go', 'lt', 's', 'z']], 'result': 'go'}, "
                 "'twice': {'params': {'x': 'f64[2]'}, 'body': [['y', 'add', 'x', 'x']], 'result': 'y'}, "
                 "'grow': {'params': {'x': 'f64[2]'}, 'body': [['y', 'while', {'cond': 'small', 'body': 'twice', "
                 "'max_iter': 50}, 'x']], 'result': 'y'}, "
                 "'main': {'params': {'w': 'f64[2]', 'n': 'i32[]', 't': 'f64[2]', 'u': 'f64[3]'}, 'body': %s, "
                 "'result': 'j'}}}",
                 cases[i].body);
        char *src = test_json(text);
        fvm_program *p = NULL;
        fvm_diag d = {0};
        assert_int_equal(fvm_program_load_text("errors.json", src, strlen(src), &p, &d), FVM_OK);
        assert_int_not_equal(fvm_compile(p, &d), FVM_OK);
        bool found = false;
        for (int k = 0; k < d.n && !found; k++)
            found = d.errs[k].loc.ptr && !strcmp(d.errs[k].loc.ptr, cases[i].ptr) && d.errs[k].loc.line == 1 &&
                    d.errs[k].loc.col > 0 && strstr(d.errs[k].msg, cases[i].msg);
        if (!found) {
            test_print_errors(&d, "  ");
            fail_msg("case %zu: no error '%s' at %s", i, cases[i].msg, cases[i].ptr);
        }
        fvm_diag_clear(&d);
        fvm_program_free(p);
        free(src);
    }
}

/* A result with integer, boolean and sequence parts: their tangents are
 * zeros (false), the floats' the derivative, the sequence's element by
 * element. */
static void test_jvp_of_mixed_results(void **state)
{
    (void)state;
    fvm_program *p = test_load(
        "mixed.json",
        "{'fedvm': 1, 'functions': {"
        "'lin': {'params': {'e': 'f64[2]', 'w': 'f64[2]'}, 'body': [['d', 'matmul', 'e', 'w'], ['y', 'tanh', 'd']], "
        "'result': 'y'}, "
        "'f': {'params': {'w': 'f64[2]', 'xs': 'f64[2]*'}, 'body': [['y', 'mul', 'w', 'w'], "
        "['z', 'const', {'value': 0.5, 'dtype': 'f64'}], ['b', 'gt', 'w', 'z'], ['n', 'const', {'value': 3}], "
        "['ys', 'sequence_map', {'fn': 'lin'}, 'xs', 'w'], ['r', 'struct', 'y', 'b', 'n', 'ys']], 'result': 'r'}, "
        "'main': {'params': {'w': 'f64[2]', 'xs': 'f64[2]*', 't': 'f64[2]'}, 'body': [['j', 'jvp', {'fn': 'f'}, 'w', "
        "'xs', 't']], 'result': 'j'}}}",
        true);
    fvm_vm *vm = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    fvm_value *xs = fvm_value_list(FVM_V_SEQ, 2);
    xs->items[0] = vec2(1, 2);
    xs->items[1] = vec2(0.5, -1);
    fvm_value *a[3] = {vec2(0.3, 0.7), xs, vec2(1, 2)};
    fvm_value *r = ad_call(vm, fvm_program_func(p, "main"), a, "mixed");
    const fvm_value *tan = r->items[1];
    expect_vec2(tan->items[0], 0.6, 2.8, "the float part");
    assert_int_equal(fvm_tensor_get_i64(&tan->items[1]->t, 0) + fvm_tensor_get_i64(&tan->items[1]->t, 1), 0);
    assert_int_equal(fvm_tensor_get_i64(&tan->items[2]->t, 0), 0);
    assert_int_equal(tan->items[3]->n, 2);
    for (int i = 0; i < 2; i++) {
        const double *e = i ? (const double[]){0.5, -1} : (const double[]){1, 2};
        double z = e[0] * 0.3 + e[1] * 0.7, th = tanh(z), want = (1 - th * th) * (e[0] * 1 + e[1] * 2);
        assert_true(fabs(fvm_tensor_get_f64(&tan->items[3]->items[i]->t, 0) - want) < 1e-15);
    }
    fvm_value_release(r);
    for (int i = 0; i < 3; i++)
        fvm_value_release(a[i]);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jvp_of_every_case),           cmocka_unit_test(test_jvp_closure),
        cmocka_unit_test(test_jvp_drjax_published_numbers), cmocka_unit_test(test_jvp_errors),
        cmocka_unit_test(test_jvp_of_mixed_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
