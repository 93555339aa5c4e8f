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

/* A case: a function f(params) -> s, a scalar f64 (or f64[]@SERVER), and the
 * parameter to differentiate. Single quotes stand for double quotes. */
typedef enum domain { ANY, POS, AWAY } domain; /* [-1,1]; [0.5,2]; +-[0.5,2] */

typedef struct gcase {
    const char *name;
    const char *params; /* JSON object of parameters */
    const char *body; /* JSON array of instructions; the result is 's' */
    const char *wrt;
    domain dom;
    const char *fixed; /* JSON object: values for some parameters (integers, predicates) */
} gcase;

static char *unquote(const char *s)
{
    char *t = strdup(s);
    for (char *p = t; *p; p++)
        if (*p == '\'')
            *p = '"';
    return t;
}

static uint64_t rng_state;
static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0; /* [0, 1) */
}

static double draw(domain dom)
{
    double u = uniform();
    switch (dom) {
    case POS:
        return 0.5 + 1.5 * u;
    case AWAY:
        return (uniform() < 0.5 ? -1 : 1) * (0.5 + 1.5 * u);
    default:
        return 2 * u - 1;
    }
}

/* Random value of a type (3 clients, sequences of 3). */
static fvm_value *random_value(const fvm_type *t, domain dom)
{
    switch (t->kind) {
    case FVM_T_TENSOR: {
        fvm_tensor x;
        fvm_dims d = t->u.tensor.dims;
        for (int i = 0; i < d.rank; i++)
            if (d.d[i] < 0)
                d.d[i] = 3;
        assert_int_equal(fvm_tensor_alloc(&x, t->u.tensor.dtype, &d, NULL), FVM_OK);
        for (int64_t i = 0; i < fvm_tensor_count(&x); i++) {
            if (t->u.tensor.dtype == FVM_DTYPE_BOOL)
                fvm_tensor_set_i64(&x, i, uniform() < 0.5);
            else if (fvm_dtype_is_float(t->u.tensor.dtype))
                fvm_tensor_set_f64(&x, i, draw(dom));
            else
                fvm_tensor_set_i64(&x, i, (int64_t)(uniform() * 3));
        }
        return fvm_value_tensor_take(&x);
    }
    case FVM_T_STRUCT: {
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, t->u.strct.n);
        for (int i = 0; i < t->u.strct.n; i++)
            s->items[i] = random_value(t->u.strct.elems[i], dom);
        return s;
    }
    case FVM_T_SEQ: {
        fvm_value *s = fvm_value_list(FVM_V_SEQ, 3);
        for (int i = 0; i < 3; i++)
            s->items[i] = random_value(t->u.seq.elem, dom);
        return s;
    }
    case FVM_T_FED:
        if (t->u.fed.all_equal)
            return random_value(t->u.fed.member, dom);
        else {
            fvm_value *l = fvm_value_list(FVM_V_CLIENTS, 3);
            for (int i = 0; i < 3; i++)
                l->items[i] = random_value(t->u.fed.member, dom);
            return l;
        }
    case FVM_T_FN:
        break;
    }
    fail_msg("no random value for this type");
    return NULL;
}

/* The float leaves of a value, in order (pointers into its tensors). */
typedef struct leaves {
    fvm_tensor *t[64];
    int n;
} leaves;

static void collect(fvm_value *v, leaves *l)
{
    if (v->kind == FVM_V_TENSOR) {
        if (fvm_dtype_is_float(v->t.dtype) && l->n < 64)
            l->t[l->n++] = &v->t;
        return;
    }
    for (int64_t i = 0; i < v->n; i++)
        collect(v->items[i], l);
}

/* A private copy of a tree of tensors (the leaves' elements copied). */
static fvm_value *clone(const fvm_value *v)
{
    if (v->kind == FVM_V_TENSOR) {
        fvm_tensor x;
        assert_int_equal(fvm_tensor_alloc(&x, v->t.dtype, &v->t.shape, NULL), FVM_OK);
        for (int64_t i = 0; i < fvm_tensor_count(&x); i++) {
            if (fvm_dtype_is_float(x.dtype))
                fvm_tensor_set_f64(&x, i, fvm_tensor_get_f64(&v->t, i));
            else
                fvm_tensor_set_i64(&x, i, fvm_tensor_get_i64(&v->t, i));
        }
        return fvm_value_tensor_take(&x);
    }
    assert_int_equal(v->kind, FVM_V_STRUCT);
    fvm_value *s = fvm_value_list(FVM_V_STRUCT, v->n);
    for (int64_t i = 0; i < v->n; i++)
        s->items[i] = clone(v->items[i]);
    return s;
}

/* acc += v, leaf by leaf (float leaves). */
static void add_into(fvm_value *acc, const fvm_value *v)
{
    assert_int_equal(acc->kind, v->kind);
    if (acc->kind == FVM_V_TENSOR) {
        assert_int_equal(fvm_tensor_count(&acc->t), fvm_tensor_count(&v->t));
        if (fvm_dtype_is_float(acc->t.dtype))
            for (int64_t i = 0; i < fvm_tensor_count(&acc->t); i++)
                fvm_tensor_set_f64(&acc->t, i, fvm_tensor_get_f64(&acc->t, i) + fvm_tensor_get_f64(&v->t, i));
        return;
    }
    assert_int_equal(acc->n, v->n);
    for (int64_t i = 0; i < acc->n; i++)
        add_into(acc->items[i], v->items[i]);
}

/* The gradient g with respect to a parameter of type t, shaped as the
 * parameter's value: a {T}@CLIENTS part must hold one cotangent per client
 * (3 clients); the per-client cotangents of an all-equal T@CLIENTS part are
 * summed (the derivative with respect to its one value). A new reference. */
static fvm_value *fold_clients(const char *name, fvm_value *g, const fvm_type *t)
{
    if (t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS) {
        if (g->kind != FVM_V_CLIENTS || g->n != 3)
            fail_msg("%s: the gradient with respect to a client value holds %s, not one value per client (3)", name,
                     g->kind == FVM_V_CLIENTS ? "another number of clients" : "one value");
        if (!t->u.fed.all_equal)
            return fvm_value_retain(g);
        fvm_value *sum = clone(g->items[0]);
        for (int64_t i = 1; i < g->n; i++)
            add_into(sum, g->items[i]);
        return sum;
    }
    if (t->kind == FVM_T_STRUCT && fvm_type_is_placed(t)) {
        assert_int_equal(g->kind, FVM_V_STRUCT);
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, g->n);
        for (int64_t i = 0; i < g->n; i++)
            s->items[i] = fold_clients(name, g->items[i], t->u.strct.elems[i]);
        return s;
    }
    return fvm_value_retain(g);
}

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

static double scalar_of(const fvm_value *v)
{
    assert_int_equal(v->kind, FVM_V_TENSOR);
    return fvm_tensor_get_f64(&v->t, 0);
}

static const char *extra_functions; /* "{'g': {...}, ..." without the closing brace, or NULL */

static bool holds_f32(const fvm_type *t)
{
    switch (t ? t->kind : FVM_T_FN) {
    case FVM_T_TENSOR:
        return t->u.tensor.dtype == FVM_DTYPE_F32;
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (holds_f32(t->u.strct.elems[i]))
                return true;
        return false;
    case FVM_T_SEQ:
        return holds_f32(t->u.seq.elem);
    case FVM_T_FED:
        return holds_f32(t->u.fed.member);
    default:
        return false;
    }
}

/* Does any function of p compute in f32 (a parameter or a value of f32)? */
static bool computes_in_f32(const fvm_program *p)
{
    for (int i = 0; i < p->nfuncs; i++) {
        const fvm_func *f = p->funcs[i];
        for (int k = 0; k < f->nparams; k++)
            if (holds_f32(f->param_types[k]))
                return true;
        for (int k = 0; k < f->ninstrs; k++)
            if (holds_f32(f->instrs[k].type))
                return true;
    }
    return false;
}

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

    /* arguments: random, or fixed */
    fvm_value *args[16] = {0};
    int64_t nclients = 3;
    fvm_arena a = {0};
    fvm_doc *fixed = NULL;
    if (c->fixed) {
        char *fx = unquote(c->fixed);
        fvm_doc_src src = {"fixed", fx, strlen(fx)};
        assert_int_equal(fvm_json_parse(&a, &src, &fixed, &d), FVM_OK);
        free(fx);
    }
    for (int i = 0; i < f->nparams; i++) {
        const fvm_doc *v = fixed ? fvm_doc_get(fixed, f->param_names[i]) : NULL;
        if (v)
            assert_int_equal(fvm_value_from_doc(v, f->param_types[i], "fixed", "", &nclients, &args[i], &d), FVM_OK);
        else
            args[i] = random_value(f->param_types[i], c->dom);
    }
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
    fvm_arena_free(&a);
    fvm_diag_clear(&d);
    free(params);
    free(body);
    free(text);
}

/* s = sum(y * r): a random projection of an op's result. */
#define PROJ "['p', 'mul', 'y', 'r'], ['s', 'sum', 'p']"

static const gcase ops[] = {
    /* elementwise, unary */
    {"neg", "{'x': 'f64[2,3]', 'r': 'f64[2,3]'}", "[['y', 'neg', 'x'], " PROJ "]", "x", ANY, NULL},
    {"abs", "{'x': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'abs', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"sign (no gradient: zeros)", "{'x': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'sign', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"exp", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'exp', 'x'], " PROJ "]", "x", ANY, NULL},
    {"log", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'log', 'x'], " PROJ "]", "x", POS, NULL},
    {"log1p", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'log1p', 'x'], " PROJ "]", "x", POS, NULL},
    {"log1p near 0 and below", "{'x': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'log1p', 'x'], " PROJ "]", "x", ANY,
     "{'x': [-0.5, -0.001, 1e-9, 0.0, 0.75]}"},
    {"sqrt", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sqrt', 'x'], " PROJ "]", "x", POS, NULL},
    {"sin", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sin', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"cos", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'cos', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"tanh", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'tanh', 'x'], " PROJ "]", "x", ANY, NULL},
    {"sigmoid", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sigmoid', 'x'], " PROJ "]", "x", ANY, NULL},
    {"softplus", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'softplus', 'x'], " PROJ "]", "x", ANY, NULL},
    {"erf", "{'x': 'f64[6]', 'r': 'f64[6]'}", "[['y', 'erf', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"relu", "{'x': 'f64[6]', 'r': 'f64[6]'}", "[['y', 'relu', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"cast", "{'x': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'cast', {'dtype': 'f64'}, 'x'], " PROJ "]", "x", ANY, NULL},
    /* elementwise, binary, with broadcasting */
    {"add [2,3]+[3] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'add', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"add [2,1]+[1,3] wrt a", "{'a': 'f64[2,1]', 'b': 'f64[1,3]', 'r': 'f64[2,3]'}",
     "[['y', 'add', 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"sub scalar-[4] wrt a", "{'a': 'f64[]', 'b': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sub', 'a', 'b'], " PROJ "]", "a",
     ANY, NULL},
    {"sub wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'sub', 'a', 'b'], " PROJ "]", "b", ANY,
     NULL},
    {"mul [2,3]*[2,1] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[2,1]', 'r': 'f64[2,3]'}",
     "[['y', 'mul', 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"mul ? dims wrt a", "{'a': 'f64[?]', 'b': 'f64[]', 'r': 'f64[?]'}", "[['y', 'mul', 'a', 'b'], " PROJ "]", "a", ANY,
     NULL},
    {"div wrt a", "{'a': 'f64[3]', 'b': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'div', 'a', 'b'], " PROJ "]", "a", AWAY,
     NULL},
    {"div [2,3]/[3] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'div', 'a', 'b'], " PROJ "]",
     "b", AWAY, NULL},
    {"floor_div (no gradient: zeros)", "{'a': 'f64[5]', 'b': 'f64[5]', 'r': 'f64[5]'}",
     "[['y', 'floor_div', 'a', 'b'], " PROJ "]", "a", AWAY, NULL},
    {"mod wrt a", "{'a': 'f64[5]', 'b': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'mod', 'a', 'b'], " PROJ "]", "a", AWAY,
     NULL},
    {"mod [2,3]%[3] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'mod', 'a', 'b'], " PROJ "]",
     "b", AWAY, NULL},
    {"mod [2,3]%[3] wrt b, fixed", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'mod', 'a', 'b'], " PROJ "]", "b", ANY,
     "{'a': [[7.5, -7.5, 0.3], [-0.3, 5.25, -5.25]], 'b': [2.0, 2.0, -0.7]}"},
    {"pow wrt a", "{'a': 'f64[3]', 'b': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'pow', 'a', 'b'], " PROJ "]", "a", POS,
     NULL},
    {"pow wrt b", "{'a': 'f64[3]', 'b': 'f64[]', 'r': 'f64[3]'}", "[['y', 'pow', 'a', 'b'], " PROJ "]", "b", POS, NULL},
    {"maximum wrt a", "{'a': 'f64[5]', 'b': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'maximum', 'a', 'b'], " PROJ "]", "a",
     AWAY, NULL},
    {"minimum wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'minimum', 'a', 'b'], " PROJ "]",
     "b", AWAY, NULL},
/* clip at points away from the bounds (the rule's kinks): x below, inside and above [lo, hi] */
#define CLIP_X "[-0.9, -0.5, 0.1, 0.3, 0.7, 0.95]"
    {"clip wrt x", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "x", ANY, "{'x': " CLIP_X ", 'lo': -0.3, 'hi': 0.4}"},
    {"clip wrt lo (broadcast)", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "lo", ANY, "{'x': " CLIP_X ", 'lo': -0.3, 'hi': 0.4}"},
    {"clip wrt hi (broadcast)", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "hi", ANY, "{'x': " CLIP_X ", 'lo': -0.3, 'hi': 0.4}"},
    {"clip with lo > hi wrt hi", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "hi", ANY, "{'x': " CLIP_X ", 'lo': 0.5, 'hi': -0.5}"},
    {"clip [2,3] within [2,1] and [3] bounds wrt lo",
     "{'x': 'f64[2,3]', 'lo': 'f64[2,1]', 'hi': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "lo", ANY,
     "{'x': [[-0.9, 0.1, 0.8], [-0.2, 0.5, 0.9]], 'lo': [[-0.5], [0.2]], 'hi': [0.6, 0.7, 0.3]}"},
    {"clip [2,3] within [2,1] and [3] bounds wrt hi",
     "{'x': 'f64[2,3]', 'lo': 'f64[2,1]', 'hi': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "hi", ANY,
     "{'x': [[-0.9, 0.1, 0.8], [-0.2, 0.5, 0.9]], 'lo': [[-0.5], [0.2]], 'hi': [0.6, 0.7, 0.3]}"},
    {"clip [2,3] within [2,1] and [3] bounds wrt x",
     "{'x': 'f64[2,3]', 'lo': 'f64[2,1]', 'hi': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "x", ANY,
     "{'x': [[-0.9, 0.1, 0.8], [-0.2, 0.5, 0.9]], 'lo': [[-0.5], [0.2]], 'hi': [0.6, 0.7, 0.3]}"},
    {"select wrt a", "{'q': 'bool[4]', 'a': 'f64[4]', 'b': 'f64[]', 'r': 'f64[4]'}",
     "[['y', 'select', 'q', 'a', 'b'], " PROJ "]", "a", ANY, "{'q': [true, false, true, false]}"},
    {"select wrt b (broadcast)", "{'q': 'bool[4]', 'a': 'f64[4]', 'b': 'f64[]', 'r': 'f64[4]'}",
     "[['y', 'select', 'q', 'a', 'b'], " PROJ "]", "b", ANY, "{'q': [true, false, true, false]}"},
    /* linear algebra */
    {"matmul", "{'a': 'f64[2,3]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]", "a", ANY,
     NULL},
    {"matmul wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"matmul ta", "{'a': 'f64[3,2]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul ta wrt b", "{'a': 'f64[3,2]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul tb", "{'a': 'f64[2,3]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_b': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul tb wrt b", "{'a': 'f64[2,3]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_b': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul ta tb", "{'a': 'f64[3,2]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true, 'transpose_b': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul ta tb wrt b", "{'a': 'f64[3,2]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true, 'transpose_b': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul vec-mat", "{'a': 'f64[3]', 'b': 'f64[3,4]', 'r': 'f64[4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]", "a",
     ANY, NULL},
    {"matmul vec-mat wrt b", "{'a': 'f64[3]', 'b': 'f64[3,4]', 'r': 'f64[4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"matmul vec-mat tb wrt b", "{'a': 'f64[3]', 'b': 'f64[4,3]', 'r': 'f64[4]'}",
     "[['y', 'matmul', {'transpose_b': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul mat-vec wrt a", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "a", ANY, NULL},
    {"matmul mat-vec ta wrt a", "{'a': 'f64[3,2]', 'b': 'f64[3]', 'r': 'f64[2]'}",
     "[['y', 'matmul', {'transpose_a': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul mat-vec wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"matmul dot", "{'a': 'f64[3]', 'b': 'f64[3]'}", "[['s', 'matmul', 'a', 'b']]", "a", ANY, NULL},
    /* reductions */
    {"sum all", "{'x': 'f64[2,3]'}", "[['y', 'sum', 'x'], ['s', 'mul', 'y', 'y']]", "x", ANY, NULL},
    {"sum axis 1", "{'x': 'f64[2,3]', 'r': 'f64[2]'}", "[['y', 'sum', {'axes': [1]}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"sum axes 0,2 keepdims", "{'x': 'f64[2,3,2]', 'r': 'f64[1,3,1]'}",
     "[['y', 'sum', {'axes': [0, -1], 'keepdims': true}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"mean axis 0", "{'x': 'f64[3,2]', 'r': 'f64[2]'}", "[['y', 'mean', {'axes': [0]}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"mean ? rows", "{'x': 'f64[?,2]', 'r': 'f64[2]'}", "[['y', 'mean', {'axes': [0]}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"max axis 1", "{'x': 'f64[2,4]', 'r': 'f64[2]'}", "[['y', 'max', {'axes': [1]}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"min all", "{'x': 'f64[5]'}", "[['y', 'min', 'x'], ['s', 'mul', 'y', 'y']]", "x", ANY, NULL},
    {"cumsum", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'cumsum', {'axis': 0}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"cumsum reversed, last axis", "{'x': 'f64[2,3]', 'r': 'f64[2,3]'}",
     "[['y', 'cumsum', {'axis': -1, 'reverse': true}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"cumsum of the middle axis", "{'x': 'f64[2,3,2]', 'r': 'f64[2,3,2]'}",
     "[['y', 'cumsum', {'axis': 1}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"cumsum reversed, of the middle axis, ? dims", "{'x': 'f64[?,3,?]', 'r': 'f64[?,3,?]'}",
     "[['y', 'cumsum', {'axis': 1, 'reverse': true}, 'x'], " PROJ "]", "x", ANY, NULL},
    /* shapes */
    {"reshape", "{'x': 'f64[2,3]', 'r': 'f64[3,2]'}", "[['y', 'reshape', {'shape': [3, -1]}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"expand_dims", "{'x': 'f64[3]', 'r': 'f64[1,3]'}", "[['y', 'expand_dims', {'axes': [0]}, 'x'], " PROJ "]", "x",
     ANY, NULL},
    {"broadcast_to", "{'x': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'broadcast_to', {'shape': [2, 3]}, 'x'], " PROJ "]",
     "x", ANY, NULL},
    {"transpose", "{'x': 'f64[2,3,4]', 'r': 'f64[4,2,3]'}", "[['y', 'transpose', {'perm': [2, 0, 1]}, 'x'], " PROJ "]",
     "x", ANY, NULL},
    {"transpose reversed", "{'x': 'f64[2,3]', 'r': 'f64[3,2]'}", "[['y', 'transpose', 'x'], " PROJ "]", "x", ANY, NULL},
    {"slice", "{'x': 'f64[5,4]', 'r': 'f64[2,2]'}",
     "[['y', 'slice', {'start': [1, 0], 'stop': [5, 4], 'step': [2, 3]}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"concat axis 1", "{'a': 'f64[2,2]', 'b': 'f64[2,3]', 'r': 'f64[2,5]'}",
     "[['y', 'concat', {'axis': 1}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"unbroadcast", "{'x': 'f64[2,3]', 'l': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'unbroadcast', 'x', 'l'], " PROJ "]",
     "x", ANY, NULL},
    {"broadcast_like", "{'x': 'f64[3]', 'l': 'f64[2,3]', 'r': 'f64[2,3]'}",
     "[['y', 'broadcast_like', 'x', 'l'], " PROJ "]", "x", ANY, NULL},
    {"reshape_like", "{'x': 'f64[6]', 'l': 'f64[2,3]', 'r': 'f64[2,3]'}", "[['y', 'reshape_like', 'x', 'l'], " PROJ "]",
     "x", ANY, NULL},
    {"unslice", "{'x': 'f64[2]', 'l': 'f64[5]', 'r': 'f64[5]'}",
     "[['y', 'unslice', {'start': [1], 'step': [3]}, 'x', 'l'], " PROJ "]", "x", ANY, NULL},
    /* structs: lifted arithmetic on a model, fields */
    {"struct lifted", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]'}",
     "[['y', 'mul', 'm', 'k'], ['z', 'mul', 'y', 'm'], ['w', 'field', {'name': 'w'}, 'z'], "
     "['b', 'field', {'name': 'b'}, 'z'], ['sw', 'sum', 'w'], ['sb', 'sum', 'b'], ['s', 'add', 'sw', 'sb']]",
     "m", ANY, NULL},
    {"struct scalar broadcast wrt k", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]'}",
     "[['y', 'mul', 'm', 'k'], ['z', 'mul', 'y', 'm'], ['w', 'field', {'name': 'w'}, 'z'], "
     "['b', 'field', {'name': 'b'}, 'z'], ['sw', 'sum', 'w'], ['sb', 'sum', 'b'], ['s', 'add', 'sw', 'sb']]",
     "k", ANY, NULL},
    /* a destructuring (fields by name, then by position) and scalar literals */
    {"fields and literals", "{'m': '<w=f64[2,2],b=f64[2]>', 'q': '<f64[2],f64[]>'}",
     "[['y', 'mul', 'm', 0.5], ['z', 'mul', 'y', 'm'], [['w', 'b'], 'fields', 'z'], [['u', 'v'], 'fields', 'q'], "
     "['uw', 'mul', 'w', 'v'], ['sw', 'sum', 'uw'], ['bu', 'mul', 'b', 'u'], ['sb', 'sum', 'bu'], "
     "['t', 'add', 'sw', 'sb'], ['s', 'sub', 2, 't']]",
     "m", ANY, NULL},
    {"fields by position wrt the struct", "{'m': '<w=f64[2,2],b=f64[2]>', 'q': '<f64[2],f64[]>'}",
     "[[['u', 'v'], 'fields', 'q'], ['y', 'mul', 'u', 'v'], ['z', 'maximum', 'y', -0.25], ['s', 'sum', 'z']]", "q",
     AWAY, NULL},
    /* neural networks */
    {"softmax", "{'x': 'f64[2,4]', 'r': 'f64[2,4]'}", "[['y', 'softmax', 'x'], " PROJ "]", "x", ANY, NULL},
    {"softmax axis 0", "{'x': 'f64[3,2]', 'r': 'f64[3,2]'}", "[['y', 'softmax', {'axis': 0}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"log_softmax", "{'x': 'f64[2,4]', 'r': 'f64[2,4]'}", "[['y', 'log_softmax', 'x'], " PROJ "]", "x", ANY, NULL},
    {"softmax_cross_entropy", "{'x': 'f64[3,4]', 'l': 'i32[3]', 'r': 'f64[3]'}",
     "[['y', 'softmax_cross_entropy', 'x', 'l'], " PROJ "]", "x", ANY, "{'l': [2, 0, 3]}"},
    {"conv2d SAME wrt x", "{'x': 'f64[2,5,4,2]', 'w': 'f64[3,3,2,3]', 'r': 'f64[2,5,4,3]'}",
     "[['y', 'conv2d', 'x', 'w'], " PROJ "]", "x", ANY, NULL},
    {"conv2d SAME wrt w", "{'x': 'f64[2,5,4,2]', 'w': 'f64[3,3,2,3]', 'r': 'f64[2,5,4,3]'}",
     "[['y', 'conv2d', 'x', 'w'], " PROJ "]", "w", ANY, NULL},
    {"conv2d VALID stride 2 wrt x", "{'x': 'f64[1,6,7,1]', 'w': 'f64[2,3,1,2]', 'r': 'f64[1,3,3,2]'}",
     "[['y', 'conv2d', {'strides': [2, 2], 'padding': 'VALID'}, 'x', 'w'], " PROJ "]", "x", ANY, NULL},
    {"conv2d VALID stride 2 wrt w", "{'x': 'f64[1,6,7,1]', 'w': 'f64[2,3,1,2]', 'r': 'f64[1,3,3,2]'}",
     "[['y', 'conv2d', {'strides': [2, 2], 'padding': 'VALID'}, 'x', 'w'], " PROJ "]", "w", ANY, NULL},
    {"max_pool", "{'x': 'f64[1,4,4,2]', 'r': 'f64[1,2,2,2]'}", "[['y', 'max_pool', {'window': [2, 2]}, 'x'], " PROJ "]",
     "x", ANY, NULL},
    {"avg_pool SAME stride 2", "{'x': 'f64[1,5,5,1]', 'r': 'f64[1,3,3,1]'}",
     "[['y', 'avg_pool', {'window': [3, 3], 'strides': [2, 2], 'padding': 'SAME'}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"one_hot labels in a loss (no gradient to the labels)", "{'x': 'f64[3,4]', 'l': 'i32[3]'}",
     "[['h', 'one_hot', {'n': 4, 'dtype': 'f64'}, 'l'], ['p', 'log_softmax', 'x'], ['q', 'mul', 'h', 'p'], "
     "['s', 'sum', 'q']]",
     "x", ANY, "{'l': [2, 0, 5]}"},
    {"dim of a ? axis in a mean (no gradient through the size)", "{'x': 'f64[?]'}",
     "[['n', 'dim', {'axis': 0}, 'x'], ['f', 'cast', {'dtype': 'f64'}, 'n'], ['q', 'mul', 'x', 'x'], "
     "['t', 'sum', 'q'], ['s', 'div', 't', 'f']]",
     "x", ANY, NULL},
    {"embedding", "{'t': 'f64[5,3]', 'i': 'i32[4]', 'r': 'f64[4,3]'}", "[['y', 'embedding', 't', 'i'], " PROJ "]", "t",
     ANY, "{'i': [1, 4, 1, 0]}"},
    {"gather axis 1", "{'x': 'f64[2,4]', 'i': 'i64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'gather', {'axis': 1}, 'x', 'i'], " PROJ "]", "x", ANY, "{'i': [3, 3, 0]}"},
    {"scatter_add wrt updates", "{'l': 'f64[4]', 'i': 'i32[3]', 'u': 'f64[3]', 'r': 'f64[4]'}",
     "[['y', 'scatter_add', 'l', 'i', 'u'], " PROJ "]", "u", ANY, "{'i': [2, 0, 2]}"},
    {"dropout", "{'x': 'f64[20]', 'k': 'u32[2]', 'r': 'f64[20]'}",
     "[['y', 'dropout', {'rate': 0.4}, 'x', 'k'], " PROJ "]", "x", ANY, "{'k': [0, 42]}"},
    {"layer_norm wrt x", "{'x': 'f64[2,4]', 'g': 'f64[4]', 'b': 'f64[4]', 'r': 'f64[2,4]'}",
     "[['y', 'layer_norm', 'x', 'g', 'b'], " PROJ "]", "x", ANY, NULL},
    {"layer_norm wrt gamma", "{'x': 'f64[2,4]', 'g': 'f64[4]', 'b': 'f64[4]', 'r': 'f64[2,4]'}",
     "[['y', 'layer_norm', 'x', 'g', 'b'], " PROJ "]", "g", ANY, NULL},
    {"layer_norm wrt beta", "{'x': 'f64[2,4]', 'g': 'f64[4]', 'b': 'f64[4]', 'r': 'f64[2,4]'}",
     "[['y', 'layer_norm', 'x', 'g', 'b'], " PROJ "]", "b", ANY, NULL},
#define LSTM_P \
    "{'x': 'f64[2,3]', 'h': 'f64[2,2]', 'c': 'f64[2,2]', 'p': '<wx=f64[3,8],wh=f64[2,8],b=f64[8]>', " \
    "'r1': 'f64[2,2]', 'r2': 'f64[2,2]'}"
#define LSTM_B \
    "[['y', 'lstm_cell', 'x', 'h', 'c', 'p'], ['hn', 'field', {'name': 'h'}, 'y'], " \
    "['cn', 'field', {'name': 'c'}, 'y'], ['a', 'mul', 'hn', 'r1'], ['b', 'mul', 'cn', 'r2'], " \
    "['sa', 'sum', 'a'], ['sb', 'sum', 'b'], ['s', 'add', 'sa', 'sb']]"
    {"lstm_cell wrt x", LSTM_P, LSTM_B, "x", ANY, NULL},
    {"lstm_cell wrt h", LSTM_P, LSTM_B, "h", ANY, NULL},
    {"lstm_cell wrt c", LSTM_P, LSTM_B, "c", ANY, NULL},
    {"lstm_cell wrt parameters", LSTM_P, LSTM_B, "p", ANY, NULL},
    {"global_norm", "{'m': '<w=f64[2,2],b=f64[2]>'}", "[['s', 'global_norm', 'm']]", "m", ANY, NULL},
    {"clip_by_global_norm, clipped", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]', 'r': '<w=f64[2,2],b=f64[2]>'}",
     "[['y', 'clip_by_global_norm', 'm', 'k'], ['p', 'mul', 'y', 'r'], ['pw', 'field', {'index': 0}, 'p'], "
     "['pb', 'field', {'index': 1}, 'p'], ['sw', 'sum', 'pw'], ['sb', 'sum', 'pb'], ['s', 'add', 'sw', 'sb']]",
     "m", ANY, "{'k': 0.5}"},
    {"clip_by_global_norm, wrt the bound", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]', 'r': '<w=f64[2,2],b=f64[2]>'}",
     "[['y', 'clip_by_global_norm', 'm', 'k'], ['p', 'mul', 'y', 'r'], ['pw', 'field', {'index': 0}, 'p'], "
     "['pb', 'field', {'index': 1}, 'p'], ['sw', 'sum', 'pw'], ['sb', 'sum', 'pb'], ['s', 'add', 'sw', 'sb']]",
     "k", ANY, "{'k': 0.5}"},
    {"clip_by_global_norm, within the bound",
     "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]', 'r': '<w=f64[2,2],b=f64[2]>'}",
     "[['y', 'clip_by_global_norm', 'm', 'k'], ['p', 'mul', 'y', 'r'], ['pw', 'field', {'index': 0}, 'p'], "
     "['pb', 'field', {'index': 1}, 'p'], ['sw', 'sum', 'pw'], ['sb', 'sum', 'pb'], ['s', 'add', 'sw', 'sb']]",
     "m", ANY, "{'k': 100.0}"},
/* mixed f32/f64 structs: each leaf's cotangent keeps its leaf's dtype */
#define MIXED_SUM \
    "['pa', 'field', {'name': 'a'}, 'p'], ['pb', 'field', {'name': 'b'}, 'p'], " \
    "['sa', 'sum', 'pa'], ['sb', 'sum', 'pb'], ['ca', 'cast', {'dtype': 'f64'}, 'sa'], " \
    "['cb', 'cast', {'dtype': 'f64'}, 'sb'], ['s', 'add', 'ca', 'cb']"
    {"cast of a mixed struct to f64", "{'x': '<a=f32[2],b=f64[3]>', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'cast', {'dtype': 'f64'}, 'x'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, NULL},
    {"cast of a mixed struct to f32", "{'x': '<a=f32[2],b=f64[3]>', 'r': '<a=f32[2],b=f32[3]>'}",
     "[['y', 'cast', {'dtype': 'f32'}, 'x'], ['q', 'mul', 'y', 'y'], ['p', 'mul', 'q', 'r'], " MIXED_SUM "]", "x", ANY,
     NULL},
    {"erf of a struct", "{'x': '<a=f64[2],b=f64[3]>', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'erf', 'x'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, NULL},
    {"erf of a mixed struct", "{'x': '<a=f32[2],b=f64[3]>', 'r': '<a=f32[2],b=f64[3]>'}",
     "[['y', 'erf', 'x'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, NULL},
#define CLIP_M "{'x': {'a': [-0.9, 0.1], 'b': [0.3, 0.7, -0.5]}, 'lo': -0.3, 'hi': 0.4}"
    {"clip of a struct wrt the struct",
     "{'x': '<a=f64[2],b=f64[3]>', 'lo': 'f64[]', 'hi': 'f64[]', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, CLIP_M},
    {"clip of a struct wrt lo (every leaf)",
     "{'x': '<a=f64[2],b=f64[3]>', 'lo': 'f64[]', 'hi': 'f64[]', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "lo", ANY, CLIP_M},
    {"clip of a struct wrt hi (every leaf)",
     "{'x': '<a=f64[2],b=f64[3]>', 'lo': 'f64[]', 'hi': 'f64[]', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "hi", ANY, CLIP_M},
    {"cast of a struct with an integer leaf", "{'x': '<a=f32[2],n=i32[],b=f64[]>', 'r': 'f64[2]'}",
     "[['y', 'cast', {'dtype': 'f64'}, 'x'], ['a', 'field', {'name': 'a'}, 'y'], ['n', 'field', {'name': 'n'}, 'y'], "
     "['b', 'field', {'name': 'b'}, 'y'], ['u', 'mul', 'a', 'r'], ['v', 'mul', 'u', 'n'], ['w', 'mul', 'v', 'b'], "
     "['s', 'sum', 'w']]",
     "x", ANY, "{'x': {'a': [0.5, -0.25], 'n': 3, 'b': 1.5}}"},
    {"struct build and read", "{'a': 'f64[2]', 'b': 'f64[2]'}",
     "[['t', 'struct', {'names': ['u', 'v']}, 'a', 'b'], ['u', 'field', {'index': 0}, 't'], "
     "['v', 'field', {'name': 'v'}, 't'], ['p', 'mul', 'u', 'v'], ['s', 'sum', 'p']]",
     "a", ANY, NULL},
};

/* Whole functions: calls, conditionals, loops, sequences, federated programs.
 * Helper functions are given in the case's 'params' slot as extra functions
 * through run_program (below). */
typedef struct pcase {
    const char *name;
    const char *functions; /* JSON object of extra functions */
    const char *params, *body, *wrt;
    domain dom;
    const char *fixed;
} pcase;

static const pcase programs[] = {
    {"call (inlined)", "{'sq': {'params': {'v': 'f64[3]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}}",
     "{'x': 'f64[3]'}", "[['y', 'call', {'fn': 'sq'}, 'x'], ['z', 'call', {'fn': 'sq'}, 'y'], ['s', 'sum', 'z']]", "x",
     ANY, NULL},
    {"cond then",
     "{'a': {'params': {'v': 'f64[2]'}, 'body': [['y', 'exp', 'v']], 'result': 'y'}, "
     "'b': {'params': {'v': 'f64[2]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}}",
     "{'q': 'bool[]', 'x': 'f64[2]'}", "[['y', 'cond', {'then': 'a', 'else': 'b'}, 'q', 'x'], ['s', 'sum', 'y']]", "x",
     ANY, "{'q': true}"},
    {"cond else",
     "{'a': {'params': {'v': 'f64[2]'}, 'body': [['y', 'exp', 'v']], 'result': 'y'}, "
     "'b': {'params': {'v': 'f64[2]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}}",
     "{'q': 'bool[]', 'x': 'f64[2]'}", "[['y', 'cond', {'then': 'a', 'else': 'b'}, 'q', 'x'], ['s', 'sum', 'y']]", "x",
     ANY, "{'q': false}"},
    {"fori wrt init",
     "{'step': {'params': {'i': 'i32[]', 'st': 'f64[2]', 'a': 'f64[2]'}, 'body': "
     "[['fi', 'cast', {'dtype': 'f64'}, 'i'], ['m', 'mul', 'st', 'a'], ['t', 'tanh', 'm'], ['y', 'add', 't', 'fi']], "
     "'result': 'y'}}",
     "{'x': 'f64[2]', 'a': 'f64[2]'}", "[['y', 'fori', {'fn': 'step', 'n': 4}, 'x', 'a'], ['s', 'sum', 'y']]", "x", ANY,
     NULL},
    {"fori wrt extra",
     "{'step': {'params': {'i': 'i32[]', 'st': 'f64[2]', 'a': 'f64[2]'}, 'body': "
     "[['fi', 'cast', {'dtype': 'f64'}, 'i'], ['m', 'mul', 'st', 'a'], ['t', 'tanh', 'm'], ['y', 'add', 't', 'fi']], "
     "'result': 'y'}}",
     "{'x': 'f64[2]', 'a': 'f64[2]'}", "[['y', 'fori', {'fn': 'step', 'n': 4}, 'x', 'a'], ['s', 'sum', 'y']]", "a", ANY,
     NULL},
    {"sequence_reduce wrt extra",
     "{'acc': {'params': {'c': 'f64[]', 'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['q', 'mul', 'd', 'd'], ['y', 'add', 'c', 'q']], 'result': 'y'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}", "[['s', 'sequence_reduce', {'fn': 'acc'}, 'xs', 'z', 'w']]", "w",
     ANY, NULL},
    {"sequence_reduce wrt zero",
     "{'acc': {'params': {'c': 'f64[]', 'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['q', 'mul', 'd', 'c'], ['y', 'add', 'c', 'q']], 'result': 'y'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}", "[['s', 'sequence_reduce', {'fn': 'acc'}, 'xs', 'z', 'w']]", "z",
     ANY, NULL},
    {"sequence_map then sum",
     "{'lin': {'params': {'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['y', 'sigmoid', 'd']], 'result': 'y'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]'}",
     "[['ys', 'sequence_map', {'fn': 'lin'}, 'xs', 'w'], ['s', 'sequence_sum', 'ys']]", "w", ANY, NULL},
    {"sequence_take, _skip and _filter on the data, then map and sum wrt the weights",
     "{'lin': {'params': {'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['y', 'tanh', 'd']], 'result': 'y'}, "
     "'first_pos': {'params': {'e': 'f64[2]'}, 'body': "
     "[['a', 'slice', {'stop': [1]}, 'e'], ['z', 'zeros_like', 'a'], ['g', 'gt', 'a', 'z'], "
     "['p', 'reshape', {'shape': []}, 'g']], 'result': 'p'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]'}",
     "[['a', 'sequence_take', {'n': 2}, 'xs'], ['b', 'sequence_skip', {'n': 1}, 'a'], "
     "['f', 'sequence_filter', {'fn': 'first_pos'}, 'xs'], "
     "['yb', 'sequence_map', {'fn': 'lin'}, 'b', 'w'], ['yf', 'sequence_map', {'fn': 'lin'}, 'f', 'w'], "
     "['sb', 'sequence_sum', 'yb'], ['sf', 'sequence_sum', 'yf'], ['s', 'add', 'sb', 'sf']]",
     "w", ANY, "{'xs': [[0.5, -0.25], [-0.75, 0.5], [0.25, 1.0]]}"},
    {"select_keys then sums (keys repeat)",
     "{'row': {'params': {'t': 'f64[3,2]', 'k': 'i32[]'}, 'body': "
     "[['r', 'gather', 't', 'k'], ['y', 'tanh', 'r']], 'result': 'y'}}",
     "{'keys': 'i32[4]', 'max': 'i32[]', 't': 'f64[3,2]'}",
     "[['sel', 'select_keys', {'fn': 'row'}, 'keys', 'max', 't'], ['ss', 'sequence_sum', 'sel'], ['s', 'sum', 'ss']]",
     "t", ANY, "{'keys': [2, 0, 2, 1], 'max': 3}"},
    /* federated */
    {"broadcast, map, mean",
     "{'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'x', 'w'], ['y', 'mul', 'd', 'd']], 'result': 'y'}}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['s', 'federated_mean', 'l']]",
     "w", ANY, NULL},
    {"map, sum wrt client data",
     "{'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'x', 'w'], ['y', 'mul', 'd', 'd']], 'result': 'y'}}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['s', 'federated_sum', 'l']]",
     "x", ANY, NULL},
    {"weighted mean of a model",
     "{'cl': {'params': {'w': '<a=f64[2],b=f64[]>', 'x': 'f64[2]'}, 'body': "
     "[['a', 'field', {'name': 'a'}, 'w'], ['b', 'field', {'name': 'b'}, 'w'], ['d', 'matmul', 'x', 'a'], "
     "['e', 'add', 'd', 'b'], ['y', 'mul', 'e', 'e']], 'result': 'y'}}",
     "{'w': '<a=f64[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS', 'n': '{f64[]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['s', 'federated_weighted_mean', 'l', 'n']]",
     "w", POS, NULL},
    {"min and max",
     "{'cl': {'params': {'w': 'f64[]', 'x': 'f64[]'}, 'body': [['y', 'mul', 'w', 'x']], "
     "'result': 'y'}, 'plus': {'params': {'a': 'f64[]', 'b': 'f64[]'}, 'body': [['y', 'add', 'a', 'b']], "
     "'result': 'y'}}",
     "{'w': 'f64[]@SERVER', 'x': '{f64[]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['lo', 'federated_min', 'l'], ['hi', 'federated_max', 'l'], ['s', 'federated_apply', {'fn': 'plus'}, 'lo', 'hi']]",
     "w", AWAY, "{'x': [0.5, -1.25, 2.0]}"},
    {"a small character LSTM unrolled with fori",
     "{'step': {'params': {'t': 'i32[]', 's': '<h=f64[2,3],c=f64[2,3],l=f64[]>', "
     "'m': '<e=f64[5,2],p=<wx=f64[2,12],wh=f64[3,12],b=f64[12]>,d=f64[3,5]>', 'x': 'i32[2,4]'}, 'body': ["
     "['xt', 'gather', {'axis': 1}, 'x', 't'], ['e', 'field', {'name': 'e'}, 'm'], ['v', 'embedding', 'e', 'xt'], "
     "['p', 'field', {'name': 'p'}, 'm'], ['h', 'field', {'name': 'h'}, 's'], ['c', 'field', {'name': 'c'}, 's'], "
     "['n', 'lstm_cell', 'v', 'h', 'c', 'p'], ['hn', 'field', {'name': 'h'}, 'n'], ['cn', 'field', {'name': 'c'}, 'n'], "
     "['d', 'field', {'name': 'd'}, 'm'], ['z', 'matmul', 'hn', 'd'], ['ls', 'softmax_cross_entropy', 'z', 'xt'], "
     "['sl', 'sum', 'ls'], ['l0', 'field', {'name': 'l'}, 's'], ['l', 'add', 'l0', 'sl'], "
     "['r', 'struct', {'names': ['h', 'c', 'l']}, 'hn', 'cn', 'l']], 'result': 'r'}}",
     "{'m': '<e=f64[5,2],p=<wx=f64[2,12],wh=f64[3,12],b=f64[12]>,d=f64[3,5]>', 'x': 'i32[2,4]', 'h0': 'f64[2,3]'}",
     "[['z', 'const', {'value': 0.0, 'dtype': 'f64'}], ['s0', 'struct', {'names': ['h', 'c', 'l']}, 'h0', 'h0', 'z'], "
     "['sf', 'fori', {'fn': 'step', 'n': 4}, 's0', 'm', 'x'], ['s', 'field', {'name': 'l'}, 'sf']]",
     "m", ANY, "{'x': [[1, 4, 0, 2], [3, 3, 1, 0]], 'h0': [[0, 0, 0], [0, 0, 0]]}"},
/* a model of mixed f32/f64 leaves through the federated aggregations */
#define MIXED_FNS \
    "'cl': {'params': {'m': '<a=f32[2],b=f64[]>', 'x': 'f64[2]'}, 'body': " \
    "[['a', 'field', {'name': 'a'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], " \
    "['x32', 'cast', {'dtype': 'f32'}, 'x'], ['ua', 'mul', 'a', 'x32'], ['sx', 'sum', 'x'], " \
    "['ub', 'mul', 'b', 'sx'], ['y', 'struct', {'names': ['a', 'b']}, 'ua', 'ub']], 'result': 'y'}, " \
    "'sq': {'params': {'u': '<a=f32[2],b=f64[]>'}, 'body': " \
    "[['a', 'field', {'name': 'a'}, 'u'], ['b', 'field', {'name': 'b'}, 'u'], " \
    "['a64', 'cast', {'dtype': 'f64'}, 'a'], ['qa', 'mul', 'a64', 'a64'], ['sa', 'sum', 'qa'], " \
    "['qb', 'mul', 'b', 'b'], ['y', 'add', 'sa', 'qb']], 'result': 'y'}"
    {"federated_mean of a mixed struct", "{" MIXED_FNS "}",
     "{'m': '<a=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['u', 'federated_map', {'fn': 'cl'}, 'mc', 'x'], "
     "['v', 'federated_mean', 'u'], ['s', 'federated_apply', {'fn': 'sq'}, 'v']]",
     "m", ANY, NULL},
    {"federated_sum of a mixed struct", "{" MIXED_FNS "}",
     "{'m': '<a=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['u', 'federated_map', {'fn': 'cl'}, 'mc', 'x'], "
     "['v', 'federated_sum', 'u'], ['s', 'federated_apply', {'fn': 'sq'}, 'v']]",
     "m", ANY, NULL},
    {"federated_weighted_mean of a mixed struct", "{" MIXED_FNS "}",
     "{'m': '<a=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS', 'n': '{f32[]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['u', 'federated_map', {'fn': 'cl'}, 'mc', 'x'], "
     "['v', 'federated_weighted_mean', 'u', 'n'], ['s', 'federated_apply', {'fn': 'sq'}, 'v']]",
     "m", POS, NULL},
    {"a mixed-precision linear model (f32 weights, f64 bias)",
     "{'loss': {'params': {'m': '<w=f32[2],b=f64[]>', 'x': 'f64[2]', 'y': 'f64[]'}, 'body': "
     "[['w', 'field', {'name': 'w'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], ['x32', 'cast', {'dtype': 'f32'}, 'x'], "
     "['z', 'matmul', 'x32', 'w'], ['z64', 'cast', {'dtype': 'f64'}, 'z'], ['p', 'add', 'z64', 'b'], "
     "['e', 'sub', 'p', 'y'], ['l', 'mul', 'e', 'e']], 'result': 'l'}}",
     "{'m': '<w=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS', 'y': '{f64[]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['l', 'federated_map', {'fn': 'loss'}, 'mc', 'x', 'y'], "
     "['s', 'federated_mean', 'l']]",
     "m", ANY, NULL},
    {"zip and apply",
     "{'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['y', 'mul', 'w', 'x']], "
     "'result': 'y'}, 'dot': {'params': {'p': '<f64[2],f64[2]>'}, 'body': [['a', 'field', {'index': 0}, 'p'], "
     "['b', 'field', {'index': 1}, 'p'], ['y', 'matmul', 'a', 'b']], 'result': 'y'}}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['t', 'federated_sum', 'l'], ['z', 'federated_zip', 'w', 't'], ['s', 'federated_apply', {'fn': 'dot'}, 'z']]",
     "w", ANY, NULL},
/* Gradients with respect to client values (3 clients, distinct data): one
     * cotangent per client, also where the adjoint is a federated_broadcast
     * (of federated_sum, federated_mean), whose value is all-equal. */
#define FED_FNS \
    "'sq': {'params': {'v': 'f64[2]'}, 'body': [['q', 'mul', 'v', 'v'], ['y', 'sum', 'q']], " \
    "'result': 'y'}, 'sqs': {'params': {'v': 'f64[]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}, " \
    "'plus': {'params': {'a': 'f64[]', 'b': 'f64[]'}, 'body': [['y', 'add', 'a', 'b']], 'result': 'y'}, " \
    "'dot': {'params': {'p': '<f64[2],f64[2]>'}, 'body': [['a', 'field', {'index': 0}, 'p'], " \
    "['b', 'field', {'index': 1}, 'p'], ['y', 'matmul', 'a', 'b']], 'result': 'y'}, " \
    "'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['p', 'mul', 'w', 'x'], " \
    "['t', 'tanh', 'p'], ['q', 'mul', 't', 'x'], ['y', 'sum', 'q']], 'result': 'y'}, " \
    "'tnh': {'params': {'v': 'f64[2]'}, 'body': [['y', 'tanh', 'v']], 'result': 'y'}, " \
    "'agg': {'params': {'x': '{f64[2]}@CLIENTS'}, 'body': [['t', 'federated_mean', 'x']], 'result': 't'}, " \
    "'each': {'params': {'a': '{f64[2]}@CLIENTS'}, 'body': [['m', 'federated_map', {'fn': 'tnh'}, 'a']], " \
    "'result': 'm'}"
    {"federated_sum wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_sum', 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", ANY, NULL},
    {"federated_mean wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_mean', 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", ANY, NULL},
    {"federated_weighted_mean wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS', 'n': '{f64[]}@CLIENTS'}",
     "[['t', 'federated_weighted_mean', 'x', 'n'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", POS, NULL},
    {"federated_min and federated_max wrt client values", "{" FED_FNS "}", "{'x': '{f64[]}@CLIENTS'}",
     "[['lo', 'federated_min', 'x'], ['hi', 'federated_max', 'x'], ['s', 'federated_apply', {'fn': 'plus'}, 'lo', 'hi']]",
     "x", AWAY, NULL},
    {"federated_zip wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS', 'y': '{f64[2]}@CLIENTS'}",
     "[['z', 'federated_zip', 'x', 'y'], ['d', 'federated_map', {'fn': 'dot'}, 'z'], ['t', 'federated_sum', 'd'], "
     "['s', 'federated_apply', {'fn': 'sqs'}, 't']]",
     "x", ANY, NULL},
    {"federated_map and federated_broadcast of an aggregate wrt client values", "{" FED_FNS "}",
     "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_mean', 'x'], ['b', 'federated_broadcast', 't'], ['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], "
     "['s', 'federated_sum', 'l']]",
     "x", ANY, NULL},
    {"call of a federated function wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'call', {'fn': 'agg'}, 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", ANY, NULL},
    {"an all-equal T@CLIENTS parameter through federated_sum", "{" FED_FNS "}", "{'v': 'f64[2]@CLIENTS'}",
     "[['t', 'federated_sum', 'v'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "v", ANY, NULL},
    {"federated_map_all_equal of a broadcast wrt the server value", "{" FED_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['t', 'federated_map_all_equal', {'fn': 'tnh'}, 'b'], "
     "['l', 'federated_map', {'fn': 'cl'}, 't', 'x'], ['s', 'federated_sum', 'l']]",
     "w", ANY, NULL},
    {"an all-equal T@CLIENTS parameter through federated_map_all_equal", "{" FED_FNS "}",
     "{'v': 'f64[2]@CLIENTS', 'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_map_all_equal', {'fn': 'tnh'}, 'v'], ['l', 'federated_map', {'fn': 'cl'}, 't', 'x'], "
     "['s', 'federated_mean', 'l']]",
     "v", ANY, NULL},
    {"an all-equal T@CLIENTS parameter through federated_map", "{" FED_FNS "}",
     "{'v': 'f64[2]@CLIENTS', 'x': '{f64[2]}@CLIENTS'}",
     "[['l', 'federated_map', {'fn': 'cl'}, 'v', 'x'], ['s', 'federated_mean', 'l']]", "v", ANY, NULL},
    {"a struct of client, server and unplaced values", "{" FED_FNS "}",
     "{'m': '<a={f64[2]}@CLIENTS,b=f64[2]@SERVER,c=f64[]>'}",
     "[['a', 'field', {'name': 'a'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], ['t', 'federated_sum', 'a'], "
     "['z', 'federated_zip', 't', 'b'], ['s', 'federated_apply', {'fn': 'dot'}, 'z']]",
     "m", ANY, NULL},
    /* with respect to server values */
    {"federated_broadcast, map, sum wrt the server value", "{" FED_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], ['s', 'federated_sum', 'l']]",
     "w", ANY, NULL},
    {"federated_max of a broadcast (every client ties)", "{" FED_FNS "}", "{'w': 'f64[2]@SERVER'}",
     "[['b', 'federated_broadcast', 'w'], ['m', 'federated_max', 'b'], ['s', 'federated_apply', {'fn': 'sq'}, 'm']]",
     "w", ANY, NULL},
    {"federated_min of clients that tie in part", "{" FED_FNS "}", "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['l', 'federated_zip', 'b', 'x'], ['d', 'federated_map', {'fn': 'dot'}, 'l'], "
     "['m', 'federated_min', 'd'], ['e', 'federated_mean', 'd'], ['s', 'federated_apply', {'fn': 'plus'}, 'm', 'e']]",
     "w", ANY, "{'w': [0.5, -0.25], 'x': [[1.0, 2.0], [1.0, 2.0], [2.0, 3.0]]}"},
    {"a call taking one value per client, given a broadcast", "{" FED_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['m', 'call', {'fn': 'each'}, 'b'], ['l', 'federated_map', {'fn': 'cl'}, 'm', 'x'], "
     "['s', 'federated_sum', 'l']]",
     "w", ANY, NULL},
    {"a struct of client, server and unplaced values wrt the server part", "{" FED_FNS "}",
     "{'m': '<a={f64[2]}@CLIENTS,b=f64[2]@SERVER,c=f64[]>'}",
     "[['a', 'field', {'name': 'a'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], ['t', 'federated_mean', 'a'], "
     "['z', 'federated_zip', 't', 'b'], ['y', 'federated_apply', {'fn': 'dot'}, 'z'], "
     "['s', 'federated_apply', {'fn': 'sqs'}, 'y']]",
     "m", ANY, NULL},
};

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

/* <a, b> over every float of two values of one type (client lists of
 * sequences of tensors, ...). */
static double inner(const fvm_value *a, const fvm_value *b)
{
    if (a->kind == FVM_V_TENSOR) {
        double s = 0;
        for (int64_t i = 0; i < fvm_tensor_count(&a->t); i++)
            s += fvm_tensor_get_f64(&a->t, i) * fvm_tensor_get_f64(&b->t, i);
        return s;
    }
    assert_int_equal(a->n, b->n);
    double s = 0;
    for (int64_t i = 0; i < a->n; i++)
        s += inner(a->items[i], b->items[i]);
    return s;
}

/* A value shaped as v with random floats. */
static fvm_value *random_like(const fvm_value *v)
{
    if (v->kind == FVM_V_TENSOR) {
        fvm_tensor x;
        assert_int_equal(fvm_tensor_alloc(&x, v->t.dtype, &v->t.shape, NULL), FVM_OK);
        for (int64_t i = 0; i < fvm_tensor_count(&x); i++)
            fvm_tensor_set_f64(&x, i, draw(ANY));
        return fvm_value_tensor_take(&x);
    }
    fvm_value *r = fvm_value_list(v->kind, v->n);
    for (int64_t i = 0; i < v->n; i++)
        r->items[i] = random_like(v->items[i]);
    return r;
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

static fvm_value *f64_scalar(double v)
{
    fvm_tensor t;
    fvm_dims none = {0};
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F64, &none, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, v);
    return fvm_value_tensor_take(&t);
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
        cmocka_unit_test(test_every_rule_is_checked),
        cmocka_unit_test(test_inlined_names_follow_calls),
        cmocka_unit_test(test_drjax_primitives),
        cmocka_unit_test(test_call_tree_shares_pullbacks),
        cmocka_unit_test(test_derived_code_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
