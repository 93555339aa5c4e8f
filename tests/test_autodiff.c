/* test_autodiff.c - gradient checks: for every differentiable op and for whole (federated) programs,
 * the gradient fedvm derives equals central finite differences in f64. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../format/doc_io.h"
#include "test_util.h"
#include "ad_cases.h"

/* Runs the grad op itself (g(params) = grad(f, wrt)(params)) and returns its
 * value: what 'fedvm run' computes and prints. */
static fvm_value *grad_op_value(const char *text, const char *params, const fvm_func *f, const char *wrt,
                                fvm_value **args)
{
    size_t n = strlen(text) + strlen(params) + 256 + 80 * (size_t)f->nparams;
    char *gtext = malloc(n);
    size_t len = strlen(text) - 2; /* without the closing braces of "functions" and the document */
    int w = snprintf(gtext, n,
                     "%.*s, \"g\": {\"params\": %s, \"body\": [[\"d\", \"grad\", {\"fn\": \"f\", "
                     "\"wrt\": \"%s\"}",
                     (int)len, text, params, wrt);
    for (int i = 0; i < f->nparams; i++)
        w += snprintf(gtext + w, n - (size_t)w, ", \"%s\"", f->param_names[i]);
    snprintf(gtext + w, n - (size_t)w, "]], \"result\": \"d\"}}}");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("g.json", gtext, strlen(gtext), &p, &d), FVM_OK);
    if (fvm_compile(p, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s\n", d.errs[i].msg);
        fail_msg("the program with the grad op does not check");
    }
    fvm_vm *vm = NULL;
    fvm_vm_config cfg = {.nclients = 3};
    fvm_value *r = NULL;
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    if (fvm_vm_call(vm, fvm_program_func(p, "g"), args, &r, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s\n", d.errs[i].msg);
        fail_msg("the grad op failed");
    }
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(gtext);
    return r;
}

static const char *extra_functions; /* "{'g': {...}, ..." without the closing brace, or NULL */

static void run_case(const gcase *c)
{
    char *params = unquote(c->params), *body = unquote(c->body);
    size_t n = strlen(params) * 2 + strlen(body) + 1024;
    char *text = malloc(n);
    /* g calls grad with f's parameters in order */
    fvm_diag d = {0};
    fvm_program *p = NULL;
    if (extra_functions) {
        n += strlen(extra_functions);
        text = realloc(text, n);
        snprintf(text, n,
                 "{\"fedvm\": 1, \"functions\": %s, \"f\": {\"params\": %s, \"body\": %s, "
                 "\"result\": \"s\"}}}",
                 extra_functions, params, body);
    } else {
        snprintf(text, n,
                 "{\"fedvm\": 1, \"functions\": {\"f\": {\"params\": %s, \"body\": %s, "
                 "\"result\": \"s\"}}}",
                 params, body);
    }
    assert_int_equal(fvm_program_load_text("f.json", text, strlen(text), &p, &d), FVM_OK);
    if (fvm_compile(p, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s: %s\n", c->name, d.errs[i].msg);
        fail_msg("%s: f does not check", c->name);
    }
    fvm_func *f = fvm_program_func(p, "f"), *pb = NULL;
    if (fvm_passes_pullback(p, "f", c->wrt, &pb, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s: %s\n", c->name, d.errs[i].msg);
        fail_msg("%s: no derivative", c->name);
    }
    int wrt = 0;
    while (strcmp(f->param_names[wrt], c->wrt))
        wrt++;

    /* arguments: random, or fixed (ad_util.h) */
    fvm_value *args[16] = {0};
    ad_case ac = {
        .name = c->name, .params = c->params, .body = c->body, .wrt = c->wrt, .dom = c->dom, .fixed = c->fixed};
    ad_args(&ac, f, args);
    fvm_vm *vm = NULL;
    fvm_vm_config cfg = {.nclients = 3};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);

    /* the derived gradient: pb(args, ct = 1) -> <value, grads=<g>> */
    fvm_value *ct = NULL, *res = NULL;
    fvm_tensor one;
    fvm_dims none = {0};
    assert_int_equal(fvm_tensor_alloc(&one, FVM_DTYPE_F64, &none, NULL), FVM_OK);
    fvm_tensor_set_f64(&one, 0, 1.0);
    ct = fvm_value_tensor_take(&one);
    fvm_value *pargs[17];
    for (int i = 0; i < f->nparams; i++)
        pargs[i] = args[i];
    pargs[f->nparams] = ct;
    if (fvm_vm_call(vm, pb, pargs, &res, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s: %s\n", c->name, d.errs[i].msg);
        fail_msg("%s: the derived function failed", c->name);
    }
    /* the grad op gives the pullback's gradient (each client's where the
     * parameter is at the clients) */
    fvm_value *g = fold_clients(c->name, res->items[1]->items[0], f->param_types[wrt]);
    fvm_value *gop = grad_op_value(text, params, f, c->wrt, args);
    if (!fvm_value_identical(gop, res->items[1]->items[0]))
        fail_msg("%s: the grad op's value differs from the pullback's gradient", c->name);
    fvm_value_release(gop);
    fvm_value *f0 = NULL;
    assert_int_equal(fvm_vm_call(vm, f, args, &f0, &d), FVM_OK);
    /* the value the pullback returns is f's value */
    assert_true(fabs(scalar_of(res->items[0]) - scalar_of(f0)) <= 1e-12 * fmax(1, fabs(scalar_of(f0))));

    /* central differences, element by element of every float leaf of wrt;
     * the gradient has wrt's leaves with their dtypes. A program computing in
     * f32 is checked at f32's precision: steps of 2^-8 (the rounding of f32
     * sums stays far below them) and a tolerance of 1e-3 instead of 1e-6. */
    bool coarse = computes_in_f32(p);
    double step = coarse ? 1.0 / 256 : 1e-6, tol = coarse ? 1e-3 : 1e-6;
    leaves lx = {0}, lg = {0};
    collect(args[wrt], &lx);
    collect(g, &lg);
    assert_int_equal(lx.n, lg.n);
    int checked = 0;
    for (int k = 0; k < lx.n; k++) {
        assert_int_equal(fvm_tensor_count(lx.t[k]), fvm_tensor_count(lg.t[k]));
        if (lx.t[k]->dtype != lg.t[k]->dtype)
            fail_msg("%s: d/d%s leaf %d is %s, the parameter's leaf %s", c->name, c->wrt, k,
                     fvm_dtype_name(lg.t[k]->dtype), fvm_dtype_name(lx.t[k]->dtype));
        for (int64_t i = 0; i < fvm_tensor_count(lx.t[k]); i++) {
            double x0 = fvm_tensor_get_f64(lx.t[k], i), h = step * fmax(1, fabs(x0));
            fvm_value *fp = NULL, *fm = NULL;
            /* the steps taken, as the leaf's dtype rounded them */
            fvm_tensor_set_f64(lx.t[k], i, x0 + h);
            double hp = fvm_tensor_get_f64(lx.t[k], i) - x0;
            assert_int_equal(fvm_vm_call(vm, f, args, &fp, &d), FVM_OK);
            fvm_tensor_set_f64(lx.t[k], i, x0 - h);
            double hm = x0 - fvm_tensor_get_f64(lx.t[k], i);
            assert_int_equal(fvm_vm_call(vm, f, args, &fm, &d), FVM_OK);
            fvm_tensor_set_f64(lx.t[k], i, x0);
            double num = (scalar_of(fp) - scalar_of(fm)) / (hp + hm), got = fvm_tensor_get_f64(lg.t[k], i);
            fvm_value_release(fp);
            fvm_value_release(fm);
            if (!(fabs(num - got) <= tol * fmax(1, fabs(num))))
                fail_msg("%s: d/d%s leaf %d element %lld: derived %.12g, finite differences %.12g", c->name, c->wrt, k,
                         (long long)i, got, num);
            checked++;
        }
    }
    assert_true(checked > 0);
    fvm_value_release(f0);
    fvm_value_release(g);
    fvm_value_release(res);
    fvm_value_release(ct);
    for (int i = 0; i < f->nparams; i++)
        fvm_value_release(args[i]);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(params);
    free(body);
    free(text);
}

static void run_program(const pcase *c)
{
    char *fns = unquote(c->functions), *params = unquote(c->params), *body = unquote(c->body);
    /* Reuse run_case with the extra functions spliced into the program text. */
    size_t n = strlen(fns) + strlen(params) + strlen(body) + 256;
    char *inner = malloc(n);
    snprintf(inner, n, "%s", fns);
    inner[strlen(inner) - 1] = 0; /* drop the closing brace: f is appended */
    gcase g = {c->name, c->params, c->body, c->wrt, c->dom, c->fixed};
    extra_functions = inner;
    run_case(&g);
    extra_functions = NULL;
    free(inner);
    free(fns);
    free(params);
    free(body);
}

static void test_program_gradients(void **state)
{
    (void)state;
    rng_state = 777;
    for (size_t i = 0; i < sizeof programs / sizeof *programs; i++) {
        run_program(&programs[i]);
        print_message("gradient check %s: ok\n", programs[i].name);
    }
}

/* federated_select against central differences. Its result, sequences at
 * the clients, reaches a loss through no op that passes a sequence's
 * cotangent on (a client function's pullback is not taken with respect to
 * a sequence), so the check is the inner-product one: at a random cotangent
 * ct of the result, <dt, e> from the pullback for the server value t
 * against (J(t + h e) - J(t - h e)) / 2h, J(t) = <ct, select(t)>, for every
 * entry e of t. Three clients ask for keys with repeats. */
static void test_federated_select_gradient(void **state)
{
    (void)state;
    const char *text =
        "{\"fedvm\": 1, \"functions\": {"
        "\"row\": {\"params\": {\"t\": \"f64[3,2]\", \"k\": \"i32[]\"}, \"body\": [[\"r\", \"gather\", \"t\", \"k\"], "
        "[\"y\", \"tanh\", \"r\"]], \"result\": \"y\"}, "
        "\"sel\": {\"params\": {\"keys\": \"{i32[2]}@CLIENTS\", \"max\": \"i32[]@SERVER\", \"t\": \"f64[3,2]@SERVER\"}, "
        "\"body\": [[\"y\", \"federated_select\", {\"fn\": \"row\"}, \"keys\", \"max\", \"t\"]], \"result\": \"y\"}}}";
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_func *pb = NULL;
    assert_int_equal(fvm_program_load_text("select.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    assert_int_equal(fvm_passes_pullback(p, "sel", "t", &pb, &d), FVM_OK);
    fvm_func *sel = fvm_program_func(p, "sel");
    fvm_vm *vm = NULL;
    fvm_vm_config cfg = {.nclients = 3};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    rng_state = 4242;
    fvm_arena a = {0};
    fvm_doc *kd = NULL;
    fvm_doc_src ks = {"keys", "[[0, 2], [2, 2], [1, 0]]", 24};
    assert_int_equal(fvm_json_parse(&a, &ks, &kd, &d), FVM_OK);
    int64_t nclients = 3;
    fvm_value *keys = NULL, *max = NULL, *t = random_value(sel->param_types[2], ANY), *ct = NULL, *y0 = NULL;
    assert_int_equal(fvm_value_from_doc(kd, sel->param_types[0], "keys", "", &nclients, &keys, &d), FVM_OK);
    fvm_tensor m;
    fvm_dims none = {0};
    assert_int_equal(fvm_tensor_alloc(&m, FVM_DTYPE_I32, &none, NULL), FVM_OK);
    fvm_tensor_set_i64(&m, 0, 3);
    max = fvm_value_tensor_take(&m);
    fvm_value *args0[3] = {keys, max, t};
    assert_int_equal(fvm_vm_call(vm, sel, args0, &y0, &d), FVM_OK);
    ct = random_like(y0); /* each client's two rows */
    fvm_value_release(y0);
    fvm_value *pargs[4] = {keys, max, t, ct}, *r = NULL;
    assert_int_equal(fvm_vm_call(vm, pb, pargs, &r, &d), FVM_OK);
    const fvm_value *dt = r->items[1]->items[0];
    for (int64_t e = 0; e < fvm_tensor_count(&t->t); e++) {
        double x0 = fvm_tensor_get_f64(&t->t, e), h = 1e-6, j[2];
        for (int side = 0; side < 2; side++) {
            fvm_tensor_set_f64(&t->t, e, x0 + (side ? -h : h));
            fvm_value *args[3] = {keys, max, t}, *y = NULL;
            assert_int_equal(fvm_vm_call(vm, sel, args, &y, &d), FVM_OK);
            j[side] = inner(ct, y);
            fvm_value_release(y);
        }
        fvm_tensor_set_f64(&t->t, e, x0);
        double fd = (j[0] - j[1]) / (2 * h), g = fvm_tensor_get_f64(&dt->t, e);
        if (fabs(fd - g) > 1e-6 * (1 + fabs(fd)))
            fail_msg("federated_select: d/dt[%lld] is %.10g, the central difference %.10g", (long long)e, g, fd);
    }
    print_message("gradient check federated_select (3 clients, repeated keys): ok\n");
    fvm_value_release(r);
    fvm_value_release(keys);
    fvm_value_release(max);
    fvm_value_release(t);
    fvm_value_release(ct);
    fvm_vm_free(vm);
    fvm_arena_free(&a);
    fvm_program_free(p);
    fvm_diag_clear(&d);
}

/* Exact federated identities with 3 clients: d/dx sum(broadcast(x)) = N,
 * d/dx mean(broadcast(x)) = 1; and the derivative uses federated
 * intrinsics for every change of placement. */
static double grad_at(const char *body, double x0)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"fedvm\": 1, \"functions\": {\"f\": {\"params\": {\"x\": \"f64[]@SERVER\"}, "
             "\"body\": %s, \"result\": \"s\"}, \"g\": {\"params\": {\"x\": \"f64[]@SERVER\"}, "
             "\"body\": [[\"d\", \"grad\", {\"fn\": \"f\"}, \"x\"]], \"result\": \"d\"}}}",
             body);
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("fed.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    /* every placed argument in the derived code is consumed by an op that may take placed values */
    for (int i = 0; i < p->nfuncs; i++) {
        const fvm_func *f = p->funcs[i];
        for (int k = 0; k < f->ninstrs; k++)
            for (int j = 0; j < f->instrs[k].nargs; j++)
                if (fvm_type_is_placed(f->instrs[k].arg_types[j]))
                    assert_true(fvm_op_table[f->instrs[k].op].flags & OPF_PLACED);
    }
    fvm_vm *vm = NULL;
    fvm_vm_config cfg = {.nclients = 3};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    fvm_tensor t;
    fvm_dims none = {0};
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F64, &none, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, x0);
    fvm_value *x = fvm_value_tensor_take(&t), *r = NULL;
    assert_int_equal(fvm_vm_call(vm, fvm_program_func(p, "g"), &x, &r, &d), FVM_OK);
    double g = scalar_of(r);
    fvm_value_release(x);
    fvm_value_release(r);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    return g;
}

static void test_federated_identities(void **state)
{
    (void)state;
    assert_true(grad_at("[[\"b\", \"federated_broadcast\", \"x\"], [\"s\", \"federated_sum\", \"b\"]]", 1.5) == 3.0);
    assert_true(grad_at("[[\"b\", \"federated_broadcast\", \"x\"], [\"s\", \"federated_mean\", \"b\"]]", -2.0) == 1.0);
}

/* Runs function fn of a program file with JSON arguments; the result as a document. */
static fvm_doc *run_file(fvm_arena *a, const char *path, const char *fn, int nargs, const fvm_named_text *args)
{
    fvm_diag d = {0};
    fvm_program *p = test_load_file(path, &d);
    const fvm_func *f = fvm_program_func(p, fn);
    fvm_vm *vm = NULL;
    fvm_value **vals = NULL, *res = NULL;
    int64_t nclients = -1;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    assert_int_equal(fvm_bind_args(f, nargs, args, 0, &nclients, &vals, &d), FVM_OK);
    if (nclients >= 0)
        assert_int_equal(fvm_vm_set_clients(vm, nclients, &d), FVM_OK);
    assert_int_equal(fvm_vm_call(vm, f, vals, &res, &d), FVM_OK);
    fvm_doc *out = fvm_value_to_doc(a, res, f->result_type);
    fvm_value_release(res);
    fvm_values_free(vals, f->nparams);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    return out;
}

static double num(const fvm_doc *v)
{
    return v->kind == FVM_DOC_INT ? (double)v->u.i : v->u.r;
}

/* DrJAX's tutorial: w = [2, -1], clients x = [1,2], [3,-4], [-7,6]: loss
 * 87.16667, gradient [57.666668, -54.666668], loss after a step of 0.01:
 * 35.551258 (the published f32 figures). */
static void test_drjax_published_numbers(void **state)
{
    (void)state;
    fvm_arena a = {0};
    fvm_named_text args[2] = {{"w", "[2, -1]", FVM_ARG_JSON}, {"x", "[[1, 2], [3, -4], [-7, 6]]", FVM_ARG_JSON}};
    fvm_doc *r = run_file(&a, "programs/drjax_mean_loss.json", "main", 2, args);
    const fvm_doc *g = fvm_doc_get(r, "grad");
    assert_true(fabs(num(fvm_doc_get(r, "loss")) - 87.16667) < 1e-5);
    assert_true(fabs(num(g->u.coll.items[0]) - 57.666668) < 1e-6);
    assert_true(fabs(num(g->u.coll.items[1]) - -54.666668) < 1e-6);
    assert_true(fabs(num(fvm_doc_get(r, "loss_after_step")) - 35.551258) < 1e-6);
    fvm_arena_free(&a);
}

/* FedSGD as the grad of a federated loss equals the gradient of the same
 * loss on the pooled data (up to f32 summation order). */
static void test_fedsgd_is_pooled_gradient(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const char *model = "{\"w\": [0.3, -0.2], \"b\": 0.1}";
    fvm_named_text fed[2] = {{"model", model, FVM_ARG_JSON},
                             {"data", "@programs/data/logistic_clients.json", FVM_ARG_JSON}};
    fvm_doc *gf = run_file(&a, "tests/ad/pooled_logistic.json", "federated_grad", 2, fed);
    /* the same examples in one sequence */
    char *text;
    size_t len;
    fvm_diag d = {0};
    assert_int_equal(fvm_read_file("programs/data/logistic_clients.json", &text, &len, &d), FVM_OK);
    fvm_doc_src src = {"clients", text, len};
    fvm_doc *clients = NULL;
    assert_int_equal(fvm_json_parse(&a, &src, &clients, &d), FVM_OK);
    fvm_doc *pooled = fvm_doc_new(&a, FVM_DOC_ARRAY);
    for (size_t i = 0; i < clients->u.coll.n; i++)
        for (size_t k = 0; k < clients->u.coll.items[i]->u.coll.n; k++)
            fvm_doc_push(&a, pooled, clients->u.coll.items[i]->u.coll.items[k]);
    char *ptext;
    size_t plen;
    assert_int_equal(fvm_json_write(pooled, &ptext, &plen, &d), FVM_OK);
    fvm_named_text pool[2] = {{"model", model, FVM_ARG_JSON}, {"data", ptext, FVM_ARG_JSON}};
    fvm_doc *gp = run_file(&a, "tests/ad/pooled_logistic.json", "pooled_grad", 2, pool);
    const fvm_doc *wf = fvm_doc_get(gf, "w"), *wp = fvm_doc_get(gp, "w");
    for (int i = 0; i < 2; i++)
        assert_true(fabs(num(wf->u.coll.items[i]) - num(wp->u.coll.items[i])) < 1e-6);
    assert_true(fabs(num(fvm_doc_get(gf, "b")) - num(fvm_doc_get(gp, "b"))) < 1e-6);
    assert_true(fabs(num(fvm_doc_get(gf, "b"))) > 1e-3); /* not trivially zero */
    free(text);
    free(ptext);
    fvm_diag_clear(&d);
    fvm_arena_free(&a);
}

/* grad and value_and_grad with has_aux (tests/ad/has_aux.json): the gradient bit for bit the plain
 * form's and the closed form's, the aux as written, on unplaced values, per client and of a
 * federated function. */
static void assert_grad_is(const fvm_doc *g, const double *want)
{
    for (int i = 0; i < 2; i++)
        assert_true(fabs(num(g->u.coll.items[i]) - want[i]) < 1e-12 * (1 + fabs(want[i])));
}

static void assert_same_doc(const fvm_doc *a, const fvm_doc *b)
{
    for (int i = 0; i < 2; i++)
        assert_true(num(a->u.coll.items[i]) == num(b->u.coll.items[i]));
}

static void test_has_aux(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const double w[2] = {0.3, -0.7}, x[3][2] = {{1.5, 0.4}, {-0.2, 0.9}, {0.5, 0.5}};
    /* loss = sum(exp(w x) w): d/dw = exp(w x) (1 + w x) */
    fvm_named_text la[2] = {{"w", "[0.3, -0.7]", FVM_ARG_JSON}, {"x", "[1.5, 0.4]", FVM_ARG_JSON}};
    fvm_doc *r = run_file(&a, "tests/ad/has_aux.json", "local", 2, la);
    double want[2], e[2];
    for (int i = 0; i < 2; i++) {
        e[i] = exp(w[i] * x[0][i]);
        want[i] = e[i] * (1 + w[i] * x[0][i]);
    }
    const fvm_doc *vga = fvm_doc_get(r, "vg_aux"), *vgv = fvm_doc_get(vga, "value");
    assert_grad_is(fvm_doc_get(r, "grad_aux"), want);
    assert_same_doc(fvm_doc_get(r, "grad_aux"), fvm_doc_get(r, "grad"));
    assert_same_doc(fvm_doc_get(vga, "grad"), fvm_doc_get(r, "grad"));
    assert_grad_is(fvm_doc_get(fvm_doc_get(r, "aux"), "e"), e);
    assert_true(num(fvm_doc_get(fvm_doc_get(vgv, "aux"), "n")) == 2);
    assert_true(num(fvm_doc_get(vgv, "value")) == num(fvm_doc_get(fvm_doc_get(r, "vg"), "value")));
    assert_true(fabs(num(fvm_doc_get(vgv, "value")) - (e[0] * w[0] + e[1] * w[1])) < 1e-12);
    /* per client */
    fvm_named_text pa[2] = {{"w", "[0.3, -0.7]", FVM_ARG_JSON}, {"x", "[[1.5, 0.4], [-0.2, 0.9]]", FVM_ARG_JSON}};
    r = run_file(&a, "tests/ad/has_aux.json", "per_client", 2, pa);
    assert_int_equal(r->u.coll.n, 2);
    for (int k = 0; k < 2; k++) {
        const fvm_doc *c = r->u.coll.items[k];
        for (int i = 0; i < 2; i++)
            want[i] = exp(w[i] * x[k][i]) * (1 + w[i] * x[k][i]);
        assert_grad_is(fvm_doc_get(c, "grad_aux"), want);
        assert_same_doc(fvm_doc_get(c, "grad_aux"), fvm_doc_get(c, "grad"));
        assert_true(fabs(num(fvm_doc_get(c, "e_sum")) - exp(w[0] * x[k][0]) - exp(w[1] * x[k][1])) < 1e-12);
    }
    /* federated: mean_k tanh(x_k . w)^2, d/dw = mean_k 2 t (1 - t^2) x_k; aux = sum_k t^2 */
    fvm_named_text fa[2] = {{"w", "[0.3, -0.7]", FVM_ARG_JSON},
                            {"x", "[[1.5, 0.4], [-0.2, 0.9], [0.5, 0.5]]", FVM_ARG_JSON}};
    r = run_file(&a, "tests/ad/has_aux.json", "federated", 2, fa);
    double sum_t2 = 0;
    want[0] = want[1] = 0;
    for (int k = 0; k < 3; k++) {
        double t = tanh(x[k][0] * w[0] + x[k][1] * w[1]);
        sum_t2 += t * t;
        for (int i = 0; i < 2; i++)
            want[i] += 2 * t * (1 - t * t) * x[k][i] / 3;
    }
    assert_grad_is(fvm_doc_get(r, "grad_aux"), want);
    assert_same_doc(fvm_doc_get(r, "grad_aux"), fvm_doc_get(r, "grad"));
    assert_same_doc(fvm_doc_get(r, "vg_grad"), fvm_doc_get(r, "grad"));
    assert_true(fabs(num(fvm_doc_get(r, "aux")) - sum_t2) < 1e-12);
    assert_true(num(fvm_doc_get(r, "aux2")) == num(fvm_doc_get(r, "aux")));
    assert_true(fabs(num(fvm_doc_get(r, "value")) - sum_t2 / 3) < 1e-12);
    fvm_arena_free(&a);
}

static void assert_doc_list(const fvm_doc *v, int n, const double *want, const char *what)
{
    if (!v || v->kind != FVM_DOC_ARRAY || (int)v->u.coll.n != n)
        fail_msg("%s: not a list of %d values (one per client)", what, n);
    for (int i = 0; i < n; i++)
        if (num(v->u.coll.items[i]) != want[i])
            fail_msg("%s: client %d has %.17g, expected %.17g", what, i, num(v->u.coll.items[i]), want[i]);
}

/* DrJAX's primitives tests, through the grad and vjp ops and what a program
 * does with their values (3 clients x = [1, 2, 3], w = 1.5); the expected
 * values by hand. */
static void test_drjax_primitives(void **state)
{
    (void)state;
    const char *path = "tests/ad/federated_primitives.json";
    fvm_arena a = {0};
    fvm_named_text x = {"x", "[1, 2, 3]", FVM_ARG_JSON}, w = {"w", "1.5", FVM_ARG_JSON};
    /* d/dx sum over clients: 1 at every client */
    assert_doc_list(run_file(&a, path, "grad_sum", 1, &x), 3, (double[]){1, 1, 1}, "grad_sum");
    const fvm_doc *t = run_file(&a, path, "grad_sum_total", 1, &x);
    assert_true(num(t) == 3.0);
    assert_doc_list(run_file(&a, path, "grad_sum_mapped", 1, &x), 3, (double[]){2, 2, 2}, "grad_sum_mapped");
    /* d/dx mean over clients: 1/N at every client */
    const fvm_doc *vg = run_file(&a, path, "grad_mean", 1, &x);
    assert_true(num(fvm_doc_get(vg, "value")) == 2.0);
    assert_doc_list(fvm_doc_get(vg, "grad"), 3, (double[]){1.0 / 3, 1.0 / 3, 1.0 / 3}, "grad_mean");
    /* the maximum of a broadcast value is the value: every client ties */
    fvm_named_text wc[2] = {w, {"clients", "[0, 0, 0]", FVM_ARG_JSON}};
    assert_true(num(run_file(&a, path, "grad_max_of_broadcast", 2, wc)) == 1.0);
    /* rows of the Jacobian of federated_broadcast: 1 per client */
    fvm_named_text we[2] = {w, {"e", "[0, 1, 0]", FVM_ARG_JSON}};
    assert_true(num(run_file(&a, path, "jacobian_row_of_broadcast", 2, we)) == 1.0);
    we[1].text = "[1, 1, 1]";
    assert_true(num(run_file(&a, path, "jacobian_row_of_broadcast", 2, we)) == 3.0);
    /* vjp of a sum over clients: the server cotangent at every client */
    fvm_named_text xc[2] = {x, {"c", "2", FVM_ARG_JSON}};
    assert_doc_list(run_file(&a, path, "vjp_sum_all_equal", 2, xc), 3, (double[]){2, 2, 2}, "vjp_sum_all_equal");
    /* d/dw sum_i w^2 x_i = sum_i 2 w x_i = 18; d/dx_i = w^2 = 2.25 */
    fvm_named_text wx[2] = {w, x};
    assert_true(num(run_file(&a, path, "grad_broadcast_map_sum", 2, wx)) == 18.0);
    assert_doc_list(run_file(&a, path, "grad_broadcast_map_sum_wrt_x", 2, wx), 3, (double[]){2.25, 2.25, 2.25},
                    "grad_broadcast_map_sum_wrt_x");
    fvm_arena_free(&a);
}

/* f0(x) = tanh(x) + x/2; fk(x) = (a + f(k-1)(a)) / 2 with a = f(k-1)(x): a
 * call tree in which each function calls the next twice. Its value and
 * derivative by forward-mode (dual numbers), independently of fedvm. */
static void tree_dual(int k, double x, double *v, double *dv)
{
    if (k == 0) {
        double t = tanh(x);
        *v = t + 0.5 * x;
        *dv = 1 - t * t + 0.5;
        return;
    }
    double a, da, b, db;
    tree_dual(k - 1, x, &a, &da);
    tree_dual(k - 1, a, &b, &db);
    *v = 0.5 * (a + b);
    *dv = 0.5 * (da + db * da);
}

/* The tree program of depth 'depth' (f0..f<depth>): local (f64[] values) or
 * federated (each fk maps over client values). */
static char *tree_program(int depth, bool federated)
{
    size_t n = 1024 + 512 * (size_t)depth, w = 0;
    char *s = malloc(n);
    w += (size_t)snprintf(
        s + w, n - w,
        "{\"fedvm\": 1, \"functions\": {"
        "\"leaf\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"t\", \"tanh\", \"x\"], "
        "[\"h\", \"const\", {\"value\": 0.5, \"dtype\": \"f64\"}], [\"u\", \"mul\", \"h\", \"x\"], "
        "[\"y\", \"add\", \"t\", \"u\"]], \"result\": \"y\"}, "
        "\"avg\": {\"params\": {\"a\": \"f64[]\", \"b\": \"f64[]\"}, \"body\": [[\"s\", \"add\", \"a\", \"b\"], "
        "[\"h\", \"const\", {\"value\": 0.5, \"dtype\": \"f64\"}], [\"y\", \"mul\", \"h\", \"s\"]], "
        "\"result\": \"y\"}, ");
    const char *T = federated ? "{f64[]}@CLIENTS" : "f64[]";
    w += (size_t)snprintf(s + w, n - w,
                          "\"f0\": {\"params\": {\"x\": \"%s\"}, \"body\": [[\"y\", \"%s\", {\"fn\": \"leaf\"}, "
                          "\"x\"]], \"result\": \"y\"}",
                          T, federated ? "federated_map" : "call");
    for (int k = 1; k <= depth; k++)
        w += (size_t)snprintf(s + w, n - w,
                              ", \"f%d\": {\"params\": {\"x\": \"%s\"}, \"body\": [[\"a\", \"call\", "
                              "{\"fn\": \"f%d\"}, \"x\"], [\"b\", \"call\", {\"fn\": \"f%d\"}, \"a\"], [\"y\", \"%s\", "
                              "{\"fn\": \"avg\"}, \"a\", \"b\"]], \"result\": \"y\"}",
                              k, T, k - 1, k - 1, federated ? "federated_map" : "call");
    if (federated)
        w += (size_t)snprintf(
            s + w, n - w,
            ", \"top\": {\"params\": {\"x\": \"{f64[]}@CLIENTS\"}, \"body\": [[\"y\", \"call\", "
            "{\"fn\": \"f%d\"}, \"x\"], [\"s\", \"federated_sum\", \"y\"]], \"result\": \"s\"}, "
            "\"top_server\": {\"params\": {\"w\": \"f64[]@SERVER\", \"c\": \"{f64[]}@CLIENTS\"}, "
            "\"body\": [[\"b\", \"federated_broadcast\", \"w\"], [\"y\", \"call\", {\"fn\": \"f%d\"}, \"b\"], "
            "[\"s\", \"federated_sum\", \"y\"]], \"result\": \"s\"}",
            depth, depth);
    snprintf(s + w, n - w, "}}");
    return s;
}

/* Instructions of the functions that derivations added to p (after the first n0). */
static long derived_instrs(const fvm_program *p, int n0)
{
    long n = 0;
    for (int i = n0; i < p->nfuncs; i++)
        n += p->funcs[i]->ninstrs;
    return n;
}

/* Does some derived function call a pullback (a call the derivation did not inline)? */
static bool calls_a_pullback(const fvm_program *p, int n0)
{
    for (int i = n0; i < p->nfuncs; i++)
        for (int k = 0; k < p->funcs[i]->ninstrs; k++) {
            const fvm_instr *in = &p->funcs[i]->instrs[k];
            if (in->op == FVM_OP_CALL && strstr(in->a.fn->name, ".vjp("))
                return true;
        }
    return false;
}

/* A call tree whose full inlining would take 2^depth copies: past
 * FVM_AD_MAX_INLINE inlined instructions the calls stay calls, and each
 * callee's pullback is derived once and shared. The gradient equals
 * forward-mode's, locally and over clients (with respect to client values,
 * and to a server value broadcast into a function taking one per client). */
static void test_call_tree_shares_pullbacks(void **state)
{
    (void)state;
    const int depth = 10; /* f10 inlines to 4095 calls of leaf */
    const double xs[3] = {0.3, -0.7, 1.1};
    for (int federated = 0; federated < 2; federated++) {
        char *text = tree_program(depth, federated);
        fvm_diag d = {0};
        fvm_program *p = NULL;
        assert_int_equal(fvm_program_load_text("tree.json", text, strlen(text), &p, &d), FVM_OK);
        assert_int_equal(fvm_compile(p, &d), FVM_OK);
        int n0 = p->nfuncs;
        fvm_func *pb = NULL;
        const char *fn = federated ? "top" : "f10";
        assert_int_equal(fvm_passes_pullback(p, fn, "x", &pb, &d), FVM_OK);
        assert_true(calls_a_pullback(p, n0));
        assert_true(derived_instrs(p, n0) < 20000);
        fvm_vm *vm = NULL;
        fvm_vm_config cfg = {.nclients = 3};
        assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
        fvm_value *args[2] = {NULL, f64_scalar(1.0)}, *r = NULL;
        if (federated) {
            args[0] = fvm_value_list(FVM_V_CLIENTS, 3);
            for (int i = 0; i < 3; i++)
                args[0]->items[i] = f64_scalar(xs[i]);
        } else {
            args[0] = f64_scalar(xs[0]);
        }
        if (fvm_vm_call(vm, pb, args, &r, &d) != FVM_OK) {
            for (int i = 0; i < d.n; i++)
                print_error("%s\n", d.errs[i].msg);
            fail_msg("the derivative of the call tree failed");
        }
        const fvm_value *g = r->items[1]->items[0];
        double total = 0;
        for (int i = 0; i < (federated ? 3 : 1); i++) {
            double v, dv;
            tree_dual(depth, xs[i], &v, &dv);
            total += v;
            const fvm_value *gi = federated ? g->items[i] : g;
            assert_true(!federated || (g->kind == FVM_V_CLIENTS && g->n == 3));
            if (!(fabs(scalar_of(gi) - dv) <= 1e-12 * fmax(1, fabs(dv))))
                fail_msg("client %d: derived %.17g, forward mode %.17g", i, scalar_of(gi), dv);
        }
        assert_true(fabs(scalar_of(r->items[0]) - total) <= 1e-12 * fmax(1, fabs(total)));
        fvm_value_release(r);
        if (federated) { /* d/dw sum_i f(w) = 3 f'(w): the broadcast becomes one value per client at the call */
            fvm_func *pw = NULL;
            assert_int_equal(fvm_passes_pullback(p, "top_server", "w", &pw, &d), FVM_OK);
            fvm_value *wargs[3] = {f64_scalar(0.4), fvm_value_retain(args[0]), f64_scalar(1.0)};
            assert_int_equal(fvm_vm_call(vm, pw, wargs, &r, &d), FVM_OK);
            double v, dv;
            tree_dual(depth, 0.4, &v, &dv);
            assert_true(fabs(scalar_of(r->items[1]->items[0]) - 3 * dv) <= 1e-12 * fmax(1, fabs(3 * dv)));
            fvm_value_release(r);
            for (int i = 0; i < 3; i++)
                fvm_value_release(wargs[i]);
        }
        fvm_value_release(args[0]);
        fvm_value_release(args[1]);
        fvm_vm_free(vm);
        fvm_program_free(p);
        fvm_diag_clear(&d);
        free(text);
    }
    /* depth 30 (2^30 copies inlined) derives quickly into little code */
    char *text = tree_program(30, false);
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_func *pb = NULL;
    assert_int_equal(fvm_program_load_text("tree30.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    int n0 = p->nfuncs;
    assert_int_equal(fvm_passes_pullback(p, "f30", "x", &pb, &d), FVM_OK);
    assert_true(derived_instrs(p, n0) < 20000);
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(text);
}

/* Derived code past FVM_AD_MAX_DERIVED instructions is an error at the grad
 * instruction that asked (a chain of 20000 tanh derives into about 100000). */
static void test_derived_code_limit(void **state)
{
    (void)state;
    const int n = 20000;
    size_t cap = 256 + 48 * (size_t)n, w = 0;
    char *text = malloc(cap);
    w += (size_t)snprintf(
        text + w, cap - w,
        "{\"fedvm\": 1, \"functions\": {\n"
        "\"main\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"g\", \"grad\", {\"fn\": \"f\"}, \"x\"]], "
        "\"result\": \"g\"},\n\"f\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"y0\", \"tanh\", \"x\"]");
    for (int i = 1; i < n; i++)
        w += (size_t)snprintf(text + w, cap - w, ", [\"y%d\", \"tanh\", \"y%d\"]", i, i - 1);
    snprintf(text + w, cap - w, "], \"result\": \"y%d\"}}}\n", n - 1);
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("long.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_ERR_LIMIT);
    bool found = false;
    for (int i = 0; i < d.n && !found; i++)
        found = d.errs[i].code == FVM_ERR_LIMIT && d.errs[i].loc.line == 2 && d.errs[i].loc.ptr &&
                !strcmp(d.errs[i].loc.ptr, "/functions/main/body/0") && strstr(d.errs[i].msg, "limit on derived code");
    if (!found)
        fail_msg("no limit error at long.json:2 /functions/main/body/0: %s", d.n ? d.errs[0].msg : "(none)");
    fvm_program_free(p);
    fvm_diag_clear(&d);
    free(text);
}

/* Inlined values are named after their call: two calls of sq give a/y and
 * b/y (and nested calls c/a/y), never sq/y#2#2. */
static void test_inlined_names_follow_calls(void **state)
{
    (void)state;
    const char *text =
        "{\"fedvm\": 1, \"functions\": {"
        "\"sq\": {\"params\": {\"v\": \"f64[]\"}, \"body\": [[\"y\", \"mul\", \"v\", \"v\"]], \"result\": \"y\"}, "
        "\"fourth\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"a\", \"call\", {\"fn\": \"sq\"}, \"x\"], "
        "[\"b\", \"call\", {\"fn\": \"sq\"}, \"a\"]], \"result\": \"b\"}, "
        "\"f\": {\"params\": {\"x\": \"f64[]\"}, \"body\": [[\"c\", \"call\", {\"fn\": \"fourth\"}, \"x\"], "
        "[\"d\", \"call\", {\"fn\": \"sq\"}, \"c\"]], \"result\": \"d\"}}}";
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_func *pb = NULL;
    assert_int_equal(fvm_program_load_text("names.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    assert_int_equal(fvm_passes_pullback(p, "f", "x", &pb, &d), FVM_OK);
    const char *want[] = {"c/a/y", "c/b/y", "d/y", "d.d/y", "d.c/b/y", "d.c/a/y"};
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        bool found = false;
        for (int k = 0; k < pb->ninstrs && !found; k++)
            found = !strcmp(pb->instrs[k].name, want[w]);
        if (!found)
            fail_msg("no value named %s in %s", want[w], pb->name);
    }
    for (int k = 0; k < pb->ninstrs; k++) {
        const char *n = pb->instrs[k].name, *h = strchr(n, '#');
        assert_null(strstr(n, "sq/"));
        assert_true(!h || !strchr(h + 1, '#')); /* at most one '#k' suffix */
    }
    /* d/dx x^8 = 8 x^7 */
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    fvm_tensor t[2];
    fvm_dims none = {0};
    fvm_value *args[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fvm_tensor_alloc(&t[i], FVM_DTYPE_F64, &none, NULL), FVM_OK);
        fvm_tensor_set_f64(&t[i], 0, i ? 1.0 : 1.5);
        args[i] = fvm_value_tensor_take(&t[i]);
    }
    fvm_value *r = NULL;
    assert_int_equal(fvm_vm_call(vm, pb, args, &r, &d), FVM_OK);
    assert_true(fabs(scalar_of(r->items[1]->items[0]) - 8 * pow(1.5, 7)) < 1e-9);
    fvm_value_release(r);
    for (int i = 0; i < 2; i++)
        fvm_value_release(args[i]);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
}

/* Every op with a VJP rule of its own appears in some gradient check above. */
static const struct {
    const char *name, *vjp;
} op_rules[] = {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) {NAME, #VJP},
#include "../vm/ir/ops.def"
#undef FVM_OP
};

static bool used_in_cases(const char *op)
{
    char quoted[80];
    snprintf(quoted, sizeof quoted, "'%s'", op);
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strstr(ops[i].body, quoted))
            return true;
    for (size_t i = 0; i < sizeof programs / sizeof *programs; i++)
        if (strstr(programs[i].body, quoted) || strstr(programs[i].functions, quoted))
            return true;
    /* checked by a test of its own */
    return !strcmp(op, "federated_select"); /* test_federated_select_gradient */
}

static void test_every_rule_is_checked(void **state)
{
    (void)state;
    int missing = 0;
    for (size_t i = 0; i < sizeof op_rules / sizeof *op_rules; i++) {
        const char *v = op_rules[i].vjp;
        /* no gradient, not differentiable, or an error by design (call: test_call_tree_shares_pullbacks) */
        if (!strcmp(v, "vjp_none") || !strcmp(v, "vjp_unsupported") || !strcmp(v, "vjp_call"))
            continue;
        if (!used_in_cases(op_rules[i].name)) {
            print_error("op %s (%s) has no gradient check\n", op_rules[i].name, v);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

static void test_op_gradients(void **state)
{
    (void)state;
    rng_state = 12345;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        run_case(&ops[i]);
        print_message("gradient check %s: ok\n", ops[i].name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_gradients),
        cmocka_unit_test(test_program_gradients),
        cmocka_unit_test(test_federated_identities),
        cmocka_unit_test(test_federated_select_gradient),
        cmocka_unit_test(test_drjax_published_numbers),
        cmocka_unit_test(test_fedsgd_is_pooled_gradient),
        cmocka_unit_test(test_has_aux),
        cmocka_unit_test(test_every_rule_is_checked),
        cmocka_unit_test(test_inlined_names_follow_calls),
        cmocka_unit_test(test_drjax_primitives),
        cmocka_unit_test(test_call_tree_shares_pullbacks),
        cmocka_unit_test(test_derived_code_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
