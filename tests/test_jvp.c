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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jvp_of_every_case),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
