/* ad_util.h - shared by the derivative tests (test_autodiff.c, test_hvp.c, test_jvp.c): random values
 * of a type, their float leaves, sums over clients, inner products. Internal to the tests; include it
 * after <cmocka.h> (its helpers assert). */
#ifndef FVM_TESTS_AD_UTIL_H
#define FVM_TESTS_AD_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/fedvm.h"
#include "../format/doc_io.h"

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

static inline char *unquote(const char *s)
{
    char *t = strdup(s);
    for (char *p = t; *p; p++)
        if (*p == '\'')
            *p = '"';
    return t;
}

static uint64_t rng_state;
static inline double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0; /* [0, 1) */
}

static inline double draw(domain dom)
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
static inline fvm_value *random_value(const fvm_type *t, domain dom)
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

static inline void collect(fvm_value *v, leaves *l)
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
static inline fvm_value *clone(const fvm_value *v)
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
static inline void add_into(fvm_value *acc, const fvm_value *v)
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
static inline fvm_value *fold_clients(const char *name, fvm_value *g, const fvm_type *t)
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

static inline double scalar_of(const fvm_value *v)
{
    assert_int_equal(v->kind, FVM_V_TENSOR);
    return fvm_tensor_get_f64(&v->t, 0);
}

static inline bool holds_f32(const fvm_type *t)
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
static inline bool computes_in_f32(const fvm_program *p)
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

/* <a, b> over every float of two values of one type (client lists of
 * sequences of tensors, ...). */
static inline double inner(const fvm_value *a, const fvm_value *b)
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
static inline fvm_value *random_like(const fvm_value *v)
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

static inline fvm_value *f64_scalar(double v)
{
    fvm_tensor t;
    fvm_dims none = {0};
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F64, &none, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, v);
    return fvm_value_tensor_take(&t);
}

/* One case of either table of ad_cases.h: an op (functions NULL) or a
 * program with extra functions. */
typedef struct ad_case {
    const char *name;
    const char *functions; /* JSON object of extra functions (single quotes), or NULL */
    const char *params, *body, *wrt;
    domain dom;
    const char *fixed;
} ad_case;

/* The program of case c: its extra functions, f(params) { body } returning
 * 'result', then 'more' (JSON members ', "g": {...}' with double quotes, or
 * ""). The caller frees the text. */
static inline char *ad_program_text(const ad_case *c, const char *result, const char *more)
{
    char *fns = c->functions ? unquote(c->functions) : NULL, *params = unquote(c->params), *body = unquote(c->body);
    if (fns)
        fns[strlen(fns) - 1] = 0; /* without its closing brace: f follows */
    size_t n = (fns ? strlen(fns) : 0) + strlen(params) + strlen(body) + strlen(more) + 256;
    char *text = malloc(n);
    snprintf(text, n,
             "{\"fedvm\": 1, \"functions\": {%s%s\"f\": {\"params\": %s, \"body\": %s, \"result\": \"%s\"}%s}}",
             fns ? fns + 1 : "", fns ? ", " : "", params, body, result, more); /* fns + 1: without its '{' */
    free(fns);
    free(params);
    free(body);
    return text;
}

/* Arguments for f: the case's fixed values where it gives them, random
 * values in its domain for the others. Returns how many; the caller
 * releases them. */
static inline int ad_args(const ad_case *c, const fvm_func *f, fvm_value **args)
{
    fvm_arena a = {0};
    fvm_diag d = {0};
    fvm_doc *fixed = NULL;
    int64_t nclients = 3;
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
    fvm_arena_free(&a);
    fvm_diag_clear(&d);
    return f->nparams;
}

/* The index of f's parameter named name. */
static inline int ad_param(const fvm_func *f, const char *name)
{
    for (int i = 0; i < f->nparams; i++)
        if (!strcmp(f->param_names[i], name))
            return i;
    fail_msg("no parameter %s", name);
    return -1;
}

/* ", p1, p2, ..." : f's parameter names as JSON arguments, into buf. */
static inline void ad_arg_list(const fvm_func *f, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < f->nparams && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, ", \"%s\"", f->param_names[i]);
}

/* x += h * v over the float leaves of two values of one shape. */
static inline void ad_axpy(fvm_value *x, double h, const fvm_value *v)
{
    if (x->kind == FVM_V_TENSOR) {
        if (fvm_dtype_is_float(x->t.dtype))
            for (int64_t i = 0; i < fvm_tensor_count(&x->t); i++)
                fvm_tensor_set_f64(&x->t, i, fvm_tensor_get_f64(&x->t, i) + h * fvm_tensor_get_f64(&v->t, i));
        return;
    }
    assert_int_equal(x->n, v->n);
    for (int64_t i = 0; i < x->n; i++)
        ad_axpy(x->items[i], h, v->items[i]);
}

/* A private copy of a value of any kind (client lists and sequences too). */
static inline fvm_value *ad_copy(const fvm_value *v)
{
    if (v->kind == FVM_V_TENSOR)
        return clone(v);
    fvm_value *r = fvm_value_list(v->kind, v->n);
    for (int64_t i = 0; i < v->n; i++)
        r->items[i] = ad_copy(v->items[i]);
    return r;
}

/* Calls fn of vm and returns its value; a failure prints its errors and fails the test. */
static inline fvm_value *ad_call(fvm_vm *vm, const fvm_func *fn, fvm_value **args, const char *what)
{
    fvm_diag d = {0};
    fvm_value *r = NULL;
    if (fvm_vm_call(vm, fn, args, &r, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s: %s\n", what, d.errs[i].msg);
        fail_msg("%s: %s failed", what, fn->name);
    }
    fvm_diag_clear(&d);
    return r;
}

/* Loads and compiles a program; its errors printed and the test failed when it does not check. */
static inline fvm_program *ad_compile(const char *text, const char *what)
{
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("case.json", text, strlen(text), &p, &d), FVM_OK);
    if (fvm_compile(p, &d) != FVM_OK) {
        for (int i = 0; i < d.n; i++)
            print_error("%s: %s\n", what, d.errs[i].msg);
        fail_msg("%s: the program does not check", what);
    }
    fvm_diag_clear(&d);
    return p;
}

/* The largest relative error seen, |got - want| / max(1, |want|), and where. */
typedef struct ad_err {
    double max;
    char where[160];
} ad_err;

/* Checks got against want element by element (float leaves, in order) with
 * a relative tolerance; records the largest error in e. */
static inline void ad_close(const char *what, const fvm_value *got, const fvm_value *want, double tol, ad_err *e)
{
    leaves lg = {0}, lw = {0};
    collect((fvm_value *)got, &lg);
    collect((fvm_value *)want, &lw);
    if (lg.n != lw.n)
        fail_msg("%s: %d float leaves, expected %d", what, lg.n, lw.n);
    for (int k = 0; k < lg.n; k++) {
        assert_int_equal(fvm_tensor_count(lg.t[k]), fvm_tensor_count(lw.t[k]));
        for (int64_t i = 0; i < fvm_tensor_count(lg.t[k]); i++) {
            double g = fvm_tensor_get_f64(lg.t[k], i), w = fvm_tensor_get_f64(lw.t[k], i);
            double err = fabs(g - w) / fmax(1, fabs(w));
            if (!(err <= tol))
                fail_msg("%s: leaf %d element %lld is %.12g, expected %.12g", what, k, (long long)i, g, w);
            if (e && err > e->max) {
                e->max = err;
                snprintf(e->where, sizeof e->where, "%s", what);
            }
        }
    }
}

#endif
