/* test_interp.c - unit tests for the interpreter: small programs run through the library with hand-computed results. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/exec/aggregate.h"
#include "../format/doc_io.h"
#include "../vm/fedvm.h"
#include "test_util.h"

/* ---- running programs ------------------------------------------------------------ */

/* One run of main: the program, its VM, the result and the errors. */
typedef struct run {
    fvm_program *p;
    fvm_vm *vm;
    const fvm_func *f;
    fvm_diag d;
    fvm_arena a;
    fvm_value *res;
} run;

/* A value of type t from single-quoted JSON text. */
static fvm_value *value_of(run *r, const fvm_type *t, const char *text, int64_t *nclients)
{
    char *s = test_json(text);
    fvm_doc_src src = {"arg", s, strlen(s)};
    fvm_doc *doc = NULL;
    assert_int_equal(fvm_json_parse(&r->a, &src, &doc, &r->d), FVM_OK);
    fvm_value *v = NULL;
    fvm_status st = fvm_value_from_doc(doc, t, "arg", "", nclients, &v, &r->d);
    if (st)
        test_print_errors(&r->d, "  ");
    assert_int_equal(st, FVM_OK);
    free(s);
    return v;
}

/* Loads, checks and runs main with args (JSON texts, one per parameter,
 * NULL-terminated). clients >= 0 is given to fvm_vm_set_clients first.
 * Returns the status of the call; the program must check. */
static fvm_status run_main(run *r, const char *funcs, const char *params, const char *body, int64_t clients,
                           const char *const *args)
{
    memset(r, 0, sizeof *r);
    char *text = test_program_text(funcs, params, body);
    fvm_status s = fvm_program_load_text("test.json", text, strlen(text), &r->p, &r->d);
    if (s == FVM_OK)
        s = fvm_compile(r->p, &r->d);
    if (s) {
        print_error("%s\n", text);
        test_print_errors(&r->d, "  ");
    }
    free(text);
    assert_int_equal(s, FVM_OK);
    r->f = fvm_program_func(r->p, "main");
    assert_int_equal(fvm_vm_new(r->p, NULL, &r->vm, &r->d), FVM_OK);
    if (clients >= 0)
        assert_int_equal(fvm_vm_set_clients(r->vm, clients, &r->d), FVM_OK);
    fvm_value *vals[16] = {0};
    int64_t nc = -1;
    int n = 0;
    while (args[n])
        n++;
    assert_int_equal(n, r->f->nparams);
    for (int i = 0; i < n; i++)
        vals[i] = value_of(r, r->f->param_types[i], args[i], &nc);
    s = fvm_vm_call(r->vm, r->f, vals, &r->res, &r->d);
    for (int i = 0; i < n; i++)
        fvm_value_release(vals[i]);
    return s;
}

static void run_free(run *r)
{
    fvm_value_release(r->res);
    fvm_vm_free(r->vm);
    fvm_program_free(r->p);
    fvm_diag_clear(&r->d);
    fvm_arena_free(&r->a);
}

/* A number node, or one of the strings "nan", "inf", "-inf" standing for one. */
static bool number_of(const fvm_doc *n, double *v)
{
    if (n->kind == FVM_DOC_INT)
        *v = (double)n->u.i;
    else if (n->kind == FVM_DOC_REAL)
        *v = n->u.r;
    else if (n->kind == FVM_DOC_STRING && !strcmp(n->u.str.s, "nan"))
        *v = NAN;
    else if (n->kind == FVM_DOC_STRING && !strcmp(n->u.str.s, "inf"))
        *v = INFINITY;
    else if (n->kind == FVM_DOC_STRING && !strcmp(n->u.str.s, "-inf"))
        *v = -INFINITY;
    else
        return false;
    return true;
}

/* Same numbers (ints and reals compared by value), same structure. */
static bool same_doc(const fvm_doc *a, const fvm_doc *b)
{
    double x, y;
    if (a->kind == FVM_DOC_INT && b->kind == FVM_DOC_INT)
        return a->u.i == b->u.i;
    if (number_of(a, &x) && number_of(b, &y))
        return x == y || (isnan(x) && isnan(y));
    if (a->kind != b->kind)
        return false;
    if (a->kind == FVM_DOC_ARRAY || a->kind == FVM_DOC_OBJECT) {
        if (a->u.coll.n != b->u.coll.n)
            return false;
        for (size_t i = 0; i < a->u.coll.n; i++) {
            if (a->kind == FVM_DOC_OBJECT && strcmp(a->u.coll.keys[i]->u.str.s, b->u.coll.keys[i]->u.str.s))
                return false;
            if (!same_doc(a->u.coll.items[i], b->u.coll.items[i]))
                return false;
        }
        return true;
    }
    return fvm_doc_equal(a, b);
}

/* The result of r must read as 'want' (single-quoted JSON). */
static void expect_result(run *r, const char *want)
{
    fvm_doc *got = fvm_value_to_doc(&r->a, r->res, r->f->result_type);
    assert_non_null(got);
    char *w = test_json(want);
    fvm_doc_src src = {"want", w, strlen(w)};
    fvm_doc *exp = NULL;
    assert_int_equal(fvm_json_parse(&r->a, &src, &exp, &r->d), FVM_OK);
    if (!same_doc(got, exp)) {
        char *text = NULL;
        fvm_json_write(got, &text, NULL, NULL);
        print_error("got %s", text ? text : "?\n");
        free(text);
        free(w);
        fail_msg("expected %s", want);
    }
    free(w);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOARGS ((const char *const[]){NULL})

/* Runs main and compares its result with want. */
static void run_expect(const char *funcs, const char *params, const char *body, int64_t clients,
                       const char *const *args, const char *want)
{
    run r;
    fvm_status s = run_main(&r, funcs, params, body, clients, args);
    if (s) {
        test_print_errors(&r.d, "  ");
        run_free(&r);
        fail_msg("the run failed (status %d); expected %s", (int)s, want);
    }
    expect_result(&r, want);
    run_free(&r);
}

/* Runs main, which must fail at run time with code (any code for
 * FVM_STATUS_COUNT) at JSON pointer ptr, with text in the message: the one
 * error, or the first of two when the second names the client it came from. */
static void run_expect_error(const char *funcs, const char *params, const char *body, int64_t clients,
                             const char *const *args, fvm_status code, const char *ptr, const char *text)
{
    run r;
    fvm_status s = run_main(&r, funcs, params, body, clients, args);
    bool any = code == FVM_STATUS_COUNT;
    bool client_note = r.d.n == 2 && strstr(r.d.errs[1].msg, "the error above is client");
    bool good = s != FVM_OK && (any || s == code) && (r.d.n == 1 || client_note) && r.d.errs[0].code == s &&
                r.d.errs[0].loc.ptr && !strcmp(r.d.errs[0].loc.ptr, ptr) && strstr(r.d.errs[0].msg, text) &&
                r.res == NULL && r.d.errs[0].loc.file && !strcmp(r.d.errs[0].loc.file, "test.json") &&
                r.d.errs[0].loc.line > 0;
    if (!good) {
        print_error("status %d, %d errors:\n", (int)s, r.d.n);
        test_print_errors(&r.d, "  ");
    }
    run_free(&r);
    if (!good)
        fail_msg("expected a %s error at %s (...%s...)", any ? "runtime" : fvm_status_name(code), ptr, text);
}

/* ---- elementwise ------------------------------------------------------------------------ */

static void test_elementwise(void **state)
{
    (void)state;
    run_expect("", "{'x': 'f32[2,3]', 'y': 'f32[3]'}", "[['r', 'add', 'x', 'y']]", -1,
               ARGS("[[1, 2, 3], [4, 5, 6]]", "[10, 20, 30]"), "[[11, 22, 33], [14, 25, 36]]");
    run_expect("", "{'x': 'f32[2,1]', 'y': 'f32[3]'}", "[['r', 'sub', 'x', 'y']]", -1, ARGS("[[1], [2]]", "[1, 2, 3]"),
               "[[0, -1, -2], [1, 0, -1]]");
    run_expect("", "{'x': 'i32[3]', 'y': 'i32[]'}", "[['r', 'mul', 'x', 'y']]", -1, ARGS("[1, 2, 3]", "4"),
               "[4, 8, 12]");
    run_expect("", "{'x': 'f32[3]', 'y': 'f32[]'}", "[['r', 'div', 'x', 'y']]", -1, ARGS("[1, 2, 3]", "2"),
               "[0.5, 1, 1.5]");
    /* integer division truncates toward zero; INT_MIN / -1 wraps */
    run_expect("", "{'x': 'i32[5]', 'y': 'i32[5]'}", "[['r', 'div', 'x', 'y']]", -1,
               ARGS("[7, -7, 7, -7, -2147483648]", "[2, 2, -2, -2, -1]"), "[3, -3, -3, 3, -2147483648]");
    run_expect("", "{'x': 'f32[2]', 'y': 'f32[2]'}",
               "[['a', 'maximum', 'x', 'y'], ['b', 'minimum', 'x', 'y'], "
               "['r', 'struct', 'a', 'b']]",
               -1, ARGS("[1, 5]", "[3, 2]"), "[[3, 5], [1, 2]]");
    run_expect("", "{'x': 'f32[2]', 'y': 'f32[2]'}", "[['r', 'pow', 'x', 'y']]", -1, ARGS("[2, 3]", "[10, 2]"),
               "[1024, 9]");
    run_expect("", "{'x': 'f32[2]'}", "[['r', 'sqrt', 'x']]", -1, ARGS("[16, 2.25]"), "[4, 1.5]");
    run_expect("", "{'x': 'f64[3]'}",
               "[['e', 'exp', 'x'], ['l', 'log', 'e'], ['t', 'tanh', 'x'], ['s', 'sigmoid', 'x'], "
               " ['r', 'struct', 'l', 't', 's']]",
               -1, ARGS("[0, 0, 0]"), "[[0, 0, 0], [0, 0, 0], [0.5, 0.5, 0.5]]");
    run_expect("", "{'x': 'i32[3]'}",
               "[['a', 'neg', 'x'], ['b', 'abs', 'x'], ['c', 'relu', 'x'], "
               "['r', 'struct', 'a', 'b', 'c']]",
               -1, ARGS("[-5, 5, -2147483648]"), "[[5, -5, -2147483648], [5, 5, -2147483648], [0, 5, 0]]");
}

static void test_integer_wrap(void **state)
{
    (void)state;
    run_expect("", "{'x': 'i32[2]', 'y': 'i32[2]'}", "[['r', 'add', 'x', 'y']]", -1,
               ARGS("[2147483647, -2147483648]", "[1, -1]"), "[-2147483648, 2147483647]");
    /* 65536 * 65536 = 2^32 = 0 mod 2^32; 46341^2 = 2147488281 = 2^31 + 4633 -> -2147479015 */
    run_expect("", "{'x': 'i32[2]'}", "[['r', 'mul', 'x', 'x']]", -1, ARGS("[65536, 46341]"), "[0, -2147479015]");
    run_expect("", "{'x': 'u32[2]', 'y': 'u32[2]'}", "[['r', 'sub', 'x', 'y']]", -1, ARGS("[0, 5]", "[1, 7]"),
               "[4294967295, 4294967294]");
    run_expect("", "{'x': 'i64[]', 'y': 'i64[]'}", "[['r', 'add', 'x', 'y']]", -1, ARGS("9223372036854775807", "1"),
               "-9223372036854775808");
    /* reductions wrap as well */
    run_expect("", "{'x': 'i32[3]'}", "[['r', 'sum', 'x']]", -1, ARGS("[2147483647, 1, 1]"), "-2147483647");
}

static void test_compare_logic(void **state)
{
    (void)state;
    run_expect("", "{'x': 'f32[3]', 'y': 'f32[]'}",
               "[['a', 'lt', 'x', 'y'], ['b', 'ge', 'x', 'y'], ['c', 'eq', 'x', 'y'], ['d', 'ne', 'x', 'y'], "
               " ['r', 'struct', 'a', 'b', 'c', 'd']]",
               -1, ARGS("[1, 2, 3]", "2"),
               "[[true, false, false], [false, true, true], [false, true, false], [true, false, true]]");
    run_expect("", "{'p': 'bool[4]', 'q': 'bool[4]'}",
               "[['a', 'and', 'p', 'q'], ['b', 'or', 'p', 'q'], ['c', 'not', 'p'], ['r', 'struct', 'a', 'b', 'c']]", -1,
               ARGS("[true, true, false, false]", "[true, false, true, false]"),
               "[[true, false, false, false], [true, true, true, false], [false, false, true, true]]");
}

static void test_select(void **state)
{
    (void)state;
    run_expect("", "{'p': 'bool[3]', 'a': 'f32[3]', 'b': 'f32[]'}", "[['r', 'select', 'p', 'a', 'b']]", -1,
               ARGS("[true, false, true]", "[1, 2, 3]", "0"), "[1, 0, 3]");
    run_expect("", "{'p': 'bool[2,1]', 'a': 'i32[3]', 'b': 'i32[]'}", "[['r', 'select', 'p', 'a', 'b']]", -1,
               ARGS("[[true], [false]]", "[1, 2, 3]", "9"), "[[1, 2, 3], [9, 9, 9]]");
}

static void test_cast(void **state)
{
    (void)state;
    /* floats to ints truncate toward zero and saturate; NaN gives 0 */
    run_expect("", "{'x': 'f32[5]'}", "[['r', 'cast', {'dtype': 'i32'}, 'x']]", -1,
               ARGS("[1.7, -1.7, 3e9, -3e9, 'nan']"), "[1, -1, 2147483647, -2147483648, 0]");
    /* ints to ints wrap */
    run_expect("", "{'x': 'i64[2]'}", "[['r', 'cast', {'dtype': 'i32'}, 'x']]", -1, ARGS("[4294967297, -1]"),
               "[1, -1]");
    run_expect("", "{'x': 'i32[1]'}", "[['r', 'cast', {'dtype': 'u32'}, 'x']]", -1, ARGS("[-1]"), "[4294967295]");
    run_expect("", "{'x': 'i32[3]'}", "[['r', 'cast', {'dtype': 'bool'}, 'x']]", -1, ARGS("[0, 2, -1]"),
               "[false, true, true]");
    run_expect("", "{'x': 'bool[2]'}", "[['r', 'cast', {'dtype': 'f32'}, 'x']]", -1, ARGS("[true, false]"), "[1, 0]");
    /* 2^24 + 1 is halfway between two floats: rounds to the even one, 2^24 */
    run_expect("", "{'x': 'i32[]'}", "[['r', 'cast', {'dtype': 'f32'}, 'x']]", -1, ARGS("16777217"), "16777216");
}

/* ---- linear algebra and reductions ---------------------------------------------------------- */

static void test_matmul(void **state)
{
    (void)state;
    /* [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]]: 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64,
     * 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154 */
    const char *A = "[[1, 2, 3], [4, 5, 6]]", *At = "[[1, 4], [2, 5], [3, 6]]";
    const char *B = "[[7, 8], [9, 10], [11, 12]]", *Bt = "[[7, 9, 11], [8, 10, 12]]";
    const char *AB = "[[58, 64], [139, 154]]";
    run_expect("", "{'a': 'f32[2,3]', 'b': 'f32[3,2]'}", "[['r', 'matmul', 'a', 'b']]", -1, ARGS(A, B), AB);
    run_expect("", "{'a': 'f32[3,2]', 'b': 'f32[3,2]'}", "[['r', 'matmul', {'transpose_a': true}, 'a', 'b']]", -1,
               ARGS(At, B), AB);
    run_expect("", "{'a': 'f64[2,3]', 'b': 'f64[2,3]'}", "[['r', 'matmul', {'transpose_b': true}, 'a', 'b']]", -1,
               ARGS(A, Bt), AB);
    run_expect("", "{'a': 'f32[3,2]', 'b': 'f32[2,3]'}",
               "[['r', 'matmul', {'transpose_a': true, 'transpose_b': true}, 'a', 'b']]", -1, ARGS(At, Bt), AB);
    run_expect("", "{'a': 'i32[2,3]', 'b': 'i32[3,2]'}", "[['r', 'matmul', 'a', 'b']]", -1, ARGS(A, B), AB);
    run_expect("", "{'a': 'f32[3]', 'b': 'f32[3,2]'}", "[['r', 'matmul', 'a', 'b']]", -1, ARGS("[1, 2, 3]", B),
               "[58, 64]");
    run_expect("", "{'a': 'f32[2,3]', 'b': 'f32[3]'}", "[['r', 'matmul', 'a', 'b']]", -1, ARGS(A, "[1, 1, 1]"),
               "[6, 15]");
    run_expect("", "{'a': 'f32[3]', 'b': 'f32[3]'}", "[['r', 'matmul', 'a', 'b']]", -1, ARGS("[1, 2, 3]", "[4, 5, 6]"),
               "32");
    /* integer products wrap: 65536 * 65536 + 1 * 1 = 1 mod 2^32 */
    run_expect("", "{'a': 'i32[1,2]', 'b': 'i32[2,1]'}", "[['r', 'matmul', 'a', 'b']]", -1,
               ARGS("[[65536, 1]]", "[[65536], [1]]"), "[[1]]");
}

static void test_matmul_vs_naive(void **state)
{
    (void)state;
    /* a 5x7 by 7x3 product of small integers (exact in f64 in any order),
     * compared with the textbook triple loop */
    enum { M = 5, K = 7, N = 3 };
    double a[M][K], b[K][N], c[M][N];
    char ta[1024] = "[", tb[1024] = "[", tc[1024] = "[";
    for (int i = 0; i < M; i++) {
        strcat(ta, i ? ", [" : "[");
        for (int k = 0; k < K; k++) {
            a[i][k] = (double)((i * 3 + k * 5) % 11) - 5;
            snprintf(ta + strlen(ta), sizeof ta - strlen(ta), "%s%g", k ? ", " : "", a[i][k]);
        }
        strcat(ta, "]");
    }
    strcat(ta, "]");
    for (int k = 0; k < K; k++) {
        strcat(tb, k ? ", [" : "[");
        for (int j = 0; j < N; j++) {
            b[k][j] = (double)((k * 7 + j * 2) % 9) - 4;
            snprintf(tb + strlen(tb), sizeof tb - strlen(tb), "%s%g", j ? ", " : "", b[k][j]);
        }
        strcat(tb, "]");
    }
    strcat(tb, "]");
    for (int i = 0; i < M; i++) {
        strcat(tc, i ? ", [" : "[");
        for (int j = 0; j < N; j++) {
            c[i][j] = 0;
            for (int k = 0; k < K; k++)
                c[i][j] += a[i][k] * b[k][j];
            snprintf(tc + strlen(tc), sizeof tc - strlen(tc), "%s%g", j ? ", " : "", c[i][j]);
        }
        strcat(tc, "]");
    }
    strcat(tc, "]");
    run_expect("", "{'a': 'f64[5,7]', 'b': 'f64[7,3]'}", "[['r', 'matmul', 'a', 'b']]", -1, ARGS(ta, tb), tc);
}

static void test_reductions(void **state)
{
    (void)state;
    const char *X = "[[1, 2, 3], [4, 5, 6]]";
    const char *P = "{'x': 'f32[2,3]'}";
    run_expect("", P, "[['r', 'sum', 'x']]", -1, ARGS(X), "21");
    run_expect("", P, "[['r', 'sum', {'axes': [0]}, 'x']]", -1, ARGS(X), "[5, 7, 9]");
    run_expect("", P, "[['r', 'sum', {'axes': [1]}, 'x']]", -1, ARGS(X), "[6, 15]");
    run_expect("", P, "[['r', 'sum', {'axes': [-1], 'keepdims': true}, 'x']]", -1, ARGS(X), "[[6], [15]]");
    run_expect("", P, "[['r', 'mean', {'axes': [1]}, 'x']]", -1, ARGS(X), "[2, 5]");
    run_expect("", P, "[['r', 'mean', 'x']]", -1, ARGS(X), "3.5");
    run_expect("", P, "[['r', 'max', {'axes': [0]}, 'x']]", -1, ARGS(X), "[4, 5, 6]");
    run_expect("", P, "[['r', 'max', {'axes': [1]}, 'x']]", -1, ARGS(X), "[3, 6]");
    run_expect("", P, "[['r', 'min', 'x']]", -1, ARGS(X), "1");
    run_expect("", P, "[['r', 'min', {'keepdims': true}, 'x']]", -1, ARGS(X), "[[1]]");
    /* over axes 0 and 2 of [[[1,2],[3,4]],[[5,6],[7,8]]]: 1+2+5+6 = 14, 3+4+7+8 = 22 */
    run_expect("", "{'x': 'i32[2,2,2]'}", "[['r', 'sum', {'axes': [0, 2]}, 'x']]", -1,
               ARGS("[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]"), "[14, 22]");
    /* argmax: the first maximum wins */
    run_expect("", "{'x': 'f32[2,3]'}", "[['r', 'argmax', 'x']]", -1, ARGS("[[1, 9, 3], [7, 2, 7]]"), "[1, 0]");
    run_expect("", "{'x': 'f32[2,3]'}", "[['r', 'argmax', {'axis': 0}, 'x']]", -1, ARGS("[[1, 9, 3], [7, 2, 7]]"),
               "[1, 0, 1]");
}

static void test_cumsum(void **state)
{
    (void)state;
    const char *X = "[[1, 2, 3], [4, 5, 6]]";
    const char *P = "{'x': 'f32[2,3]'}";
    /* rows: 1, 1+2, 1+2+3; columns: 1, 1+4 */
    run_expect("", P, "[['r', 'cumsum', {'axis': 1}, 'x']]", -1, ARGS(X), "[[1, 3, 6], [4, 9, 15]]");
    run_expect("", P, "[['r', 'cumsum', {'axis': -1}, 'x']]", -1, ARGS(X), "[[1, 3, 6], [4, 9, 15]]");
    run_expect("", P, "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS(X), "[[1, 2, 3], [5, 7, 9]]");
    /* from the end: 3+2+1, 3+2, 3 */
    run_expect("", P, "[['r', 'cumsum', {'axis': 1, 'reverse': true}, 'x']]", -1, ARGS(X), "[[6, 5, 3], [15, 11, 6]]");
    run_expect("", P, "[['r', 'cumsum', {'axis': 0, 'reverse': true}, 'x']]", -1, ARGS(X), "[[5, 7, 9], [4, 5, 6]]");
    /* the middle axis of [2,3,2] (rows of two elements summed row by row) */
    const char *Y = "[[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]]";
    run_expect("", "{'x': 'i64[2,3,2]'}", "[['r', 'cumsum', {'axis': 1}, 'x']]", -1, ARGS(Y),
               "[[[1, 2], [4, 6], [9, 12]], [[7, 8], [16, 18], [27, 30]]]");
    run_expect("", "{'x': 'i64[2,3,2]'}", "[['r', 'cumsum', {'axis': 1, 'reverse': true}, 'x']]", -1, ARGS(Y),
               "[[[9, 12], [8, 10], [5, 6]], [[27, 30], [20, 22], [11, 12]]]");
    /* integers wrap: 2^31 - 1 + 1 = -2^31; u8 200 + 100 = 300 - 256 = 44; u32 2^32 - 1 + 2 = 1 */
    run_expect("", "{'x': 'i32[3]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[2147483647, 1, 1]"),
               "[2147483647, -2147483648, -2147483647]");
    run_expect("", "{'x': 'u8[3]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[200, 100, 5]"), "[200, 44, 49]");
    run_expect("", "{'x': 'u32[2]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[4294967295, 2]"),
               "[4294967295, 1]");
    /* f64 sums in order: 1e16 + 1 rounds to 1e16 (the spacing there is 2), then - 1e16 gives 0; from the end
     * -1e16 + 1 rounds to -1e16, then + 1e16 gives 0 */
    run_expect("", "{'x': 'f64[3]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[1e16, 1, -1e16]"),
               "[1e16, 1e16, 0]");
    run_expect("", "{'x': 'f64[3]'}", "[['r', 'cumsum', {'axis': 0, 'reverse': true}, 'x']]", -1,
               ARGS("[1e16, 1, -1e16]"), "[0, -1e16, -1e16]");
    /* NaN and infinities propagate from where they appear */
    run_expect("", "{'x': 'f32[4]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[1, 'nan', 2, 3]"),
               "[1, 'nan', 'nan', 'nan']");
    run_expect("", "{'x': 'f32[3]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[1, 'inf', 2]"),
               "[1, 'inf', 'inf']");
    /* a ? axis, and no elements */
    run_expect("", "{'x': 'f32[?]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[0.5, 0.25, 0.125, 2]"),
               "[0.5, 0.75, 0.875, 2.875]");
    run_expect("", "{'x': 'f32[?,2]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", -1, ARGS("[]"), "[]");
}

static void test_dim(void **state)
{
    (void)state;
    const char *body = "[['a', 'dim', {'axis': 0}, 'x'], ['b', 'dim', {'axis': 1}, 'x'], "
                       "['c', 'dim', {'axis': -1}, 'x'], ['r', 'struct', 'a', 'b', 'c']]";
    /* '?' dims are read from the value */
    run_expect("", "{'x': 'f32[?,?,2]'}", body, -1, ARGS("[[[1, 2]], [[3, 4]], [[5, 6]]]"), "[3, 1, 2]");
    run_expect("", "{'x': 'bool[?,?]'}", body, -1, ARGS("[[true, false, true, true]]"), "[1, 4, 4]");
    run_expect("", "{'x': 'i32[?,3]'}", body, -1, ARGS("[]"), "[0, 3, 3]");
    /* a batch's size as a float, for a mean over it */
    run_expect("", "{'x': 'f32[?]'}",
               "[['n', 'dim', {'axis': 0}, 'x'], ['f', 'cast', {'dtype': 'f32'}, 'n'], ['s', 'sum', 'x'], "
               " ['r', 'div', 's', 'f']]",
               -1, ARGS("[1, 2, 6]"), "3");
}

static void test_one_hot(void **state)
{
    (void)state;
    /* out-of-range indices (4 >= n, -1 < 0) give rows of zeros */
    run_expect("", "{'i': 'i32[4]'}", "[['r', 'one_hot', {'n': 4}, 'i']]", -1, ARGS("[2, 0, 4, -1]"),
               "[[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]");
    run_expect("", "{'i': 'i64[2,2]'}", "[['r', 'one_hot', {'n': 3, 'dtype': 'f64'}, 'i']]", -1,
               ARGS("[[0, 2], [1, -9223372036854775808]]"), "[[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 0, 0]]]");
    run_expect("", "{'i': 'i32[]'}", "[['r', 'one_hot', {'n': 3, 'dtype': 'bool'}, 'i']]", -1, ARGS("1"),
               "[false, true, false]");
    run_expect("", "{'i': 'i32[3]'}", "[['r', 'one_hot', {'n': 2, 'dtype': 'i32'}, 'i']]", -1, ARGS("[1, 1, 0]"),
               "[[0, 1], [0, 1], [1, 0]]");
    /* unsigned indices keep their value: 2^32 - 1 is beyond n, u8 255 is index 255 of 256 */
    run_expect("", "{'i': 'u32[2]'}", "[['r', 'one_hot', {'n': 3}, 'i']]", -1, ARGS("[4294967295, 1]"),
               "[[0, 0, 0], [0, 1, 0]]");
    run_expect("", "{'i': 'u8[2]'}",
               "[['h', 'one_hot', {'n': 256}, 'i'], ['a', 'argmax', 'h'], ['s', 'sum', {'axes': [1]}, 'h'], "
               " ['r', 'struct', 'a', 's']]",
               -1, ARGS("[255, 3]"), "[[255, 3], [1, 1]]");
    /* n = 0 and no indices */
    run_expect("", "{'i': 'i32[2]'}", "[['r', 'one_hot', {'n': 0}, 'i']]", -1, ARGS("[0, 1]"), "[[], []]");
    run_expect("", "{'i': 'i32[?]'}", "[['r', 'one_hot', {'n': 3}, 'i']]", -1, ARGS("[]"), "[]");
}

static void test_clip(void **state)
{
    (void)state;
    const char *P = "{'x': 'f32[4]', 'lo': 'f32[]', 'hi': 'f32[]'}";
    run_expect("", P, "[['r', 'clip', 'x', 'lo', 'hi']]", -1, ARGS("[-3, 0.5, 2, 7]", "0", "2"), "[0, 0.5, 2, 2]");
    /* lo > hi gives hi everywhere, as NumPy's and JAX's clip */
    run_expect("", P, "[['r', 'clip', 'x', 'lo', 'hi']]", -1, ARGS("[-3, 0.5, 2, 7]", "4", "2"), "[2, 2, 2, 2]");
    /* NaN in any operand gives NaN */
    run_expect("", P, "[['r', 'clip', 'x', 'lo', 'hi']]", -1, ARGS("[1, 'nan', 2, 3]", "0", "2.5"),
               "[1, 'nan', 2, 2.5]");
    run_expect("", P, "[['r', 'clip', 'x', 'lo', 'hi']]", -1, ARGS("[1, 2, 3, 4]", "'nan'", "2.5"),
               "['nan', 'nan', 'nan', 'nan']");
    /* broadcasting: row 0 within [2, hi], row 1 within [0, hi] for hi = [3, 4, 7] */
    run_expect("", "{'x': 'f32[2,3]', 'lo': 'f32[2,1]', 'hi': 'f32[3]'}", "[['r', 'clip', 'x', 'lo', 'hi']]", -1,
               ARGS("[[1, 5, 9], [-1, 4, 8]]", "[[2], [0]]", "[3, 4, 7]"), "[[2, 4, 7], [0, 4, 7]]");
    /* the upper bound widens the result: maximum gives [1.5, 2, 3], minimum with [[2], [2.5]] two rows */
    run_expect("", "{'x': 'f32[3]', 'lo': 'f32[]', 'hi': 'f32[2,1]'}", "[['r', 'clip', 'x', 'lo', 'hi']]", -1,
               ARGS("[1, 2, 3]", "1.5", "[[2], [2.5]]"), "[[1.5, 2, 2], [1.5, 2, 2.5]]");
    run_expect("", "{'x': 'i32[5]', 'lo': 'i32[]', 'hi': 'i32[]'}", "[['r', 'clip', 'x', 'lo', 'hi']]", -1,
               ARGS("[-2147483648, -1, 0, 5, 2147483647]", "-1", "3"), "[-1, -1, 0, 3, 3]");
    run_expect("", "{'x': 'u8[3]', 'lo': 'u8[]', 'hi': 'u8[]'}", "[['r', 'clip', 'x', 'lo', 'hi']]", -1,
               ARGS("[0, 100, 255]", "10", "200"), "[10, 100, 200]");
    /* lifted over a model, the bounds meeting every leaf */
    run_expect("", "{'m': '<w=f32[2],b=f32[]>', 'lo': 'f32[]', 'hi': 'f32[]'}", "[['r', 'clip', 'm', 'lo', 'hi']]", -1,
               ARGS("{'w': [-2, 0.5], 'b': 3}", "-1", "1"), "{'w': [-1, 0.5], 'b': 1}");
    run_expect("", "{'m': '<w=f32[2],b=f32[]>', 'lo': '<w=f32[2],b=f32[]>', 'hi': 'f32[]'}",
               "[['r', 'clip', 'm', 'lo', 'hi']]", -1, ARGS("{'w': [-2, 0.5], 'b': 3}", "{'w': [0, 0], 'b': 4}", "5"),
               "{'w': [0, 0.5], 'b': 4}");
}

/* ---- shapes ---------------------------------------------------------------------------------- */

static void test_shape_ops(void **state)
{
    (void)state;
    const char *X = "[[1, 2, 3], [4, 5, 6]]";
    run_expect("", "{'x': 'i32[2,3]'}", "[['r', 'reshape', {'shape': [3, -1]}, 'x']]", -1, ARGS(X),
               "[[1, 2], [3, 4], [5, 6]]");
    run_expect("", "{'x': 'i32[2,3]'}", "[['r', 'reshape', {'shape': [-1]}, 'x']]", -1, ARGS(X), "[1, 2, 3, 4, 5, 6]");
    run_expect("", "{'x': 'i32[2,3]'}", "[['r', 'transpose', 'x']]", -1, ARGS(X), "[[1, 4], [2, 5], [3, 6]]");
    /* out[j][i][k] = x[i][j][k] */
    run_expect("", "{'x': 'i32[2,2,2]'}", "[['r', 'transpose', {'perm': [1, 0, 2]}, 'x']]", -1,
               ARGS("[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]"), "[[[1, 2], [5, 6]], [[3, 4], [7, 8]]]");
    /* 10 elements, start -8 = 2, stop -1 = 9, step 3: 2, 5, 8 */
    run_expect("", "{'x': 'i32[10]'}", "[['r', 'slice', {'start': [-8], 'stop': [-1], 'step': [3]}, 'x']]", -1,
               ARGS("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"), "[2, 5, 8]");
    const char *Y = "[[1, 2, 3], [4, 5, 6], [7, 8, 9]]";
    run_expect("", "{'x': 'i32[3,3]'}", "[['r', 'slice', {'start': [1, -2]}, 'x']]", -1, ARGS(Y), "[[5, 6], [8, 9]]");
    run_expect("", "{'x': 'i32[3,3]'}", "[['r', 'slice', {'step': [2, 2]}, 'x']]", -1, ARGS(Y), "[[1, 3], [7, 9]]");
    run_expect("", "{'x': 'i32[3,3]'}", "[['r', 'slice', {'start': [5]}, 'x']]", -1, ARGS(Y), "[]");
    run_expect("", "{'a': 'i32[1,2]', 'b': 'i32[2,2]'}", "[['r', 'concat', 'a', 'b']]", -1,
               ARGS("[[1, 2]]", "[[3, 4], [5, 6]]"), "[[1, 2], [3, 4], [5, 6]]");
    run_expect("", "{'a': 'i32[2,1]', 'b': 'i32[2,2]'}", "[['r', 'concat', {'axis': 1}, 'a', 'b']]", -1,
               ARGS("[[1], [2]]", "[[3, 4], [5, 6]]"), "[[1, 3, 4], [2, 5, 6]]");
    run_expect("", "{'x': 'f32[4]', 'i': 'i32[3]'}", "[['r', 'gather', 'x', 'i']]", -1,
               ARGS("[10, 20, 30, 40]", "[3, 0, 3]"), "[40, 10, 40]");
    run_expect("", "{'x': 'i32[2,3]', 'i': 'i64[2]'}", "[['r', 'gather', {'axis': 1}, 'x', 'i']]", -1,
               ARGS(X, "[2, 0]"), "[[3, 1], [6, 4]]");
    run_expect("", "{'x': 'i32[2]', 'i': 'i32[2,2]'}", "[['r', 'gather', 'x', 'i']]", -1,
               ARGS("[10, 20]", "[[0, 1], [1, 0]]"), "[[10, 20], [20, 10]]");
    run_expect("", "{'x': 'i32[2]'}", "[['r', 'broadcast_to', {'shape': [2, 2]}, 'x']]", -1, ARGS("[1, 2]"),
               "[[1, 2], [1, 2]]");
}

static void test_iota_const_fill(void **state)
{
    (void)state;
    run_expect("", "{}", "[['r', 'iota', {'shape': [2, 3], 'axis': 1}]]", -1, NOARGS, "[[0, 1, 2], [0, 1, 2]]");
    run_expect("", "{}", "[['r', 'iota', {'shape': [2, 3]}]]", -1, NOARGS, "[[0, 0, 0], [1, 1, 1]]");
    run_expect("", "{}", "[['r', 'iota', {'shape': [4], 'dtype': 'f32', 'axis': -1}]]", -1, NOARGS, "[0, 1, 2, 3]");
    run_expect("", "{}", "[['r', 'const', {'value': 7, 'shape': [2, 2]}]]", -1, NOARGS, "[[7, 7], [7, 7]]");
    run_expect("", "{}", "[['r', 'const', {'value': 1.5, 'dtype': 'f64', 'shape': [3]}]]", -1, NOARGS,
               "[1.5, 1.5, 1.5]");
    run_expect("", "{}", "[['r', 'const', {'value': [[1, 2], [3, 4]], 'dtype': 'i64'}]]", -1, NOARGS,
               "[[1, 2], [3, 4]]");
    run_expect("", "{'s': '<a=f32[2],b=i32[]>'}",
               "[['z', 'zeros_like', 's'], ['o', 'ones_like', 's'], "
               "['r', 'struct', 'z', 'o']]",
               -1, ARGS("{'a': [3, 4], 'b': 5}"), "[{'a': [0, 0], 'b': 0}, {'a': [1, 1], 'b': 1}]");
}

/* ---- structs and control flow ------------------------------------------------------------------- */

static void test_struct_field(void **state)
{
    (void)state;
    run_expect("", "{'x': 'f32[2]', 'y': 'i32[]'}", "[['r', 'struct', {'names': ['a', 'b']}, 'x', 'y']]", -1,
               ARGS("[1, 2]", "3"), "{'a': [1, 2], 'b': 3}");
    run_expect("", "{'x': 'f32[2]', 'y': 'i32[]'}", "[['r', 'struct', 'x', 'y']]", -1, ARGS("[1, 2]", "3"),
               "[[1, 2], 3]");
    run_expect("", "{'s': '<a=f32[2],b=i32[]>'}", "[['r', 'field', {'name': 'b'}, 's']]", -1,
               ARGS("{'a': [1, 2], 'b': 3}"), "3");
    run_expect("", "{'s': '<f32[2],i32[]>'}", "[['r', 'field', {'index': 0}, 's']]", -1, ARGS("[[1, 2], 3]"), "[1, 2]");
    /* arithmetic lifted over a struct, a tensor meeting every leaf */
    run_expect("", "{'s': '<a=f32[2],b=f32[]>', 'k': 'f32[]'}", "[['r', 'add', 's', 'k']]", -1,
               ARGS("{'a': [1, 2], 'b': 3}", "10"), "{'a': [11, 12], 'b': 13}");
    run_expect("", "{'s': '<a=f32[2],b=f32[]>'}", "[['r', 'mul', 's', 's']]", -1, ARGS("{'a': [1, 2], 'b': 3}"),
               "{'a': [1, 4], 'b': 9}");
}

#define CTL_FNS \
    "'sq': {'params': {'x': 'f32[2]'}, 'body': [['y', 'mul', 'x', 'x']], 'result': 'y'}, " \
    "'twice': {'params': {'x': 'f32[]'}, 'body': [['y', 'add', 'x', 'x']], 'result': 'y'}, " \
    "'negate': {'params': {'x': 'f32[]'}, 'body': [['y', 'neg', 'x']], 'result': 'y'}, " \
    "'step': {'params': {'i': 'i32[]', 'acc': 'i32[]'}, 'body': [['y', 'add', 'acc', 'i']], 'result': 'y'}, " \
    "'kstep': {'params': {'i': 'i32[]', 'acc': 'i32[]', 'k': 'i32[]'}, " \
    "  'body': [['t', 'mul', 'i', 'k'], ['y', 'add', 'acc', 't']], 'result': 'y'}, " \
    "'small': {'params': {'x': 'f32[]'}, 'body': [['c', 'const', {'value': 100.0}], ['y', 'lt', 'x', 'c']], " \
    "  'result': 'y'}, " \
    "'dbl': {'params': {'x': 'f32[]'}, 'body': [['y', 'add', 'x', 'x']], 'result': 'y'}"

static void test_call_cond(void **state)
{
    (void)state;
    run_expect(CTL_FNS, "{'x': 'f32[2]'}", "[['r', 'call', {'fn': 'sq'}, 'x']]", -1, ARGS("[3, -2]"), "[9, 4]");
    const char *body = "[['z', 'const', {'value': 0.0}], ['p', 'gt', 'x', 'z'], "
                       " ['r', 'cond', {'then': 'twice', 'else': 'negate'}, 'p', 'x']]";
    run_expect(CTL_FNS, "{'x': 'f32[]'}", body, -1, ARGS("3"), "6");
    run_expect(CTL_FNS, "{'x': 'f32[]'}", body, -1, ARGS("-3"), "3");
}

static void test_fori(void **state)
{
    (void)state;
    /* 0 + 1 + ... + 9 = 45 */
    run_expect(CTL_FNS, "{'x': 'i32[]'}", "[['r', 'fori', {'fn': 'step', 'n': 10}, 'x']]", -1, ARGS("0"), "45");
    /* extra loop-invariant argument: sum of 2i over 0..9 = 90, plus the start 5 */
    run_expect(CTL_FNS, "{'x': 'i32[]', 'k': 'i32[]'}", "[['r', 'fori', {'fn': 'kstep', 'n': 10}, 'x', 'k']]", -1,
               ARGS("5", "2"), "95");
    run_expect(CTL_FNS, "{'x': 'i32[]'}", "[['r', 'fori', {'fn': 'step', 'n': 0}, 'x']]", -1, ARGS("7"), "7");
}

static void test_while(void **state)
{
    (void)state;
    /* 1 doubles while < 100: 2, 4, ..., 128 after 7 iterations */
    run_expect(CTL_FNS, "{'x': 'f32[]'}", "[['r', 'while', {'cond': 'small', 'body': 'dbl', 'max_iter': 10}, 'x']]", -1,
               ARGS("1"), "128");
    run_expect(CTL_FNS, "{'x': 'f32[]'}", "[['r', 'while', {'cond': 'small', 'body': 'dbl', 'max_iter': 7}, 'x']]", -1,
               ARGS("1"), "128");
    run_expect(CTL_FNS, "{'x': 'f32[]'}", "[['r', 'while', {'cond': 'small', 'body': 'dbl', 'max_iter': 0}, 'x']]", -1,
               ARGS("500"), "500");
    /* an eighth iteration would be needed from 0.5: past max_iter 7 */
    run_expect_error(CTL_FNS, "{'x': 'f32[]'}",
                     "[['y', 'neg', 'x'], ['z', 'neg', 'y'], "
                     " ['r', 'while', {'cond': 'small', 'body': 'dbl', 'max_iter': 7}, 'z']]",
                     -1, ARGS("0.5"), FVM_ERR_RUNTIME, "/functions/main/body/2", "max_iter");
}

/* ---- sequences ---------------------------------------------------------------------------------- */

#define SEQ_FNS \
    "'dbl': {'params': {'x': 'f32[]'}, 'body': [['y', 'add', 'x', 'x']], 'result': 'y'}, " \
    "'add': {'params': {'a': 'f32[]', 'x': 'f32[]'}, 'body': [['y', 'add', 'a', 'x']], 'result': 'y'}, " \
    "'addk': {'params': {'a': 'f32[]', 'x': 'f32[]', 'k': 'f32[]'}, " \
    "  'body': [['t', 'mul', 'x', 'k'], ['y', 'add', 'a', 't']], 'result': 'y'}"

static void test_sequences(void **state)
{
    (void)state;
    const char *P = "{'s': 'f32[]*'}";
    run_expect(SEQ_FNS, P, "[['r', 'sequence_map', {'fn': 'dbl'}, 's']]", -1, ARGS("[1, 2, 3]"), "[2, 4, 6]");
    run_expect(SEQ_FNS, "{'s': 'f32[]*', 'z': 'f32[]'}", "[['r', 'sequence_reduce', {'fn': 'add'}, 's', 'z']]", -1,
               ARGS("[1, 2, 3]", "10"), "16");
    run_expect(SEQ_FNS, "{'s': 'f32[]*', 'z': 'f32[]', 'k': 'f32[]'}",
               "[['r', 'sequence_reduce', {'fn': 'addk'}, 's', 'z', 'k']]", -1, ARGS("[1, 2, 3]", "0", "3"), "18");
    run_expect(SEQ_FNS, P, "[['r', 'sequence_sum', 's']]", -1, ARGS("[1, 2, 3]"), "6");
    run_expect(SEQ_FNS, P, "[['r', 'sequence_length', 's']]", -1, ARGS("[1, 2, 3]"), "3");
    run_expect(SEQ_FNS, "{'s': '<x=f32[],y=i32[2]>*'}", "[['r', 'sequence_sum', 's']]", -1,
               ARGS("[{'x': 1, 'y': [1, 2]}, {'x': 3, 'y': [10, 20]}]"), "{'x': 4, 'y': [11, 22]}");
    /* empty sequences */
    run_expect(SEQ_FNS, "{'s': 'f32[2]*'}", "[['r', 'sequence_sum', 's']]", -1, ARGS("[]"), "[0, 0]");
    run_expect(SEQ_FNS, P, "[['r', 'sequence_length', 's']]", -1, ARGS("[]"), "0");
    run_expect(SEQ_FNS, P, "[['r', 'sequence_map', {'fn': 'dbl'}, 's']]", -1, ARGS("[]"), "[]");
    run_expect(SEQ_FNS, "{'s': 'f32[]*', 'z': 'f32[]'}", "[['r', 'sequence_reduce', {'fn': 'add'}, 's', 'z']]", -1,
               ARGS("[]", "10"), "10");
}

static void test_batch(void **state)
{
    (void)state;
    const char *S = "[0, 1, 2, 3, 4, 5, 6]";
    /* 7 elements in batches of 3: floor(7/3) = 2 full batches and one of 7 - 2*3 = 1 */
    run_expect("", "{'s': 'i32[]*'}", "[['r', 'batch', {'size': 3}, 's']]", -1, ARGS(S), "[[0, 1, 2], [3, 4, 5], [6]]");
    run_expect("", "{'s': 'i32[]*'}",
               "[['b', 'batch', {'size': 3}, 's'], ['m', 'sequence_length', 'b'], ['r', 'struct', 'm']]", -1, ARGS(S),
               "[3]");
    /* with drop_remainder the short batch goes */
    run_expect("", "{'s': 'i32[]*'}", "[['r', 'batch', {'size': 3, 'drop_remainder': true}, 's']]", -1, ARGS(S),
               "[[0, 1, 2], [3, 4, 5]]");
    run_expect("", "{'s': 'i32[]*'}", "[['r', 'batch', {'size': 7, 'drop_remainder': true}, 's']]", -1, ARGS(S),
               "[[0, 1, 2, 3, 4, 5, 6]]");
    run_expect("", "{'s': 'i32[]*'}", "[['r', 'batch', {'size': 8, 'drop_remainder': true}, 's']]", -1, ARGS(S), "[]");
    run_expect("", "{'s': 'i32[]*'}", "[['r', 'batch', {'size': 8}, 's']]", -1, ARGS(S), "[[0, 1, 2, 3, 4, 5, 6]]");
    run_expect("", "{'s': '<x=f32[2],y=i32[]>*'}", "[['r', 'batch', {'size': 2}, 's']]", -1,
               ARGS("[{'x': [1, 2], 'y': 1}, {'x': [3, 4], 'y': 2}, {'x': [5, 6], 'y': 3}]"),
               "[{'x': [[1, 2], [3, 4]], 'y': [1, 2]}, {'x': [[5, 6]], 'y': [3]}]");
}

/* ---- random numbers --------------------------------------------------------------------------------- */

/* Runs body over a seed and returns the result (one tensor) copied into out. */
static void run_tensor(const char *params, const char *body, const char *const *args, void *out, size_t bytes)
{
    run r;
    fvm_status s = run_main(&r, "", params, body, -1, args);
    if (s)
        test_print_errors(&r.d, "  ");
    assert_int_equal(s, FVM_OK);
    assert_int_equal(r.res->kind, FVM_V_TENSOR);
    assert_int_equal(fvm_tensor_bytes(&r.res->t), bytes);
    memcpy(out, fvm_tensor_data(&r.res->t), bytes);
    run_free(&r);
}

static void test_random_keys(void **state)
{
    (void)state;
    /* a key is {seed >> 32, seed & 0xffffffff} */
    run_expect("", "{'s': 'i32[]'}", "[['r', 'random_key', 's']]", -1, ARGS("42"), "[0, 42]");
    run_expect("", "{'s': 'i64[]'}", "[['r', 'random_key', 's']]", -1, ARGS("4294967301"), "[1, 5]");
    run_expect("", "{'s': 'u32[]'}", "[['r', 'random_key', 's']]", -1, ARGS("4294967295"), "[0, 4294967295]");
    run_expect("", "{'s': 'i32[]'}", "[['r', 'random_key', 's']]", -1, ARGS("-1"),
               "[0, 4294967295]"); /* 32-bit seeds: their 32 bits */

    /* split: the same key splits the same way; the children differ from each
     * other and from the parent */
    const char *split = "[['k', 'random_key', 's'], ['r', 'random_split', {'n': 3}, 'k']]";
    uint32_t a[6], b[6];
    run_tensor("{'s': 'i32[]'}", split, ARGS("7"), a, sizeof a);
    run_tensor("{'s': 'i32[]'}", split, ARGS("7"), b, sizeof b);
    assert_memory_equal(a, b, sizeof a);
    uint32_t parent[2] = {0, 7};
    for (int i = 0; i < 3; i++) {
        assert_false(a[2 * i] == parent[0] && a[2 * i + 1] == parent[1]);
        for (int j = 0; j < i; j++)
            assert_false(a[2 * i] == a[2 * j] && a[2 * i + 1] == a[2 * j + 1]);
    }
    run_tensor("{'s': 'i32[]'}", split, ARGS("8"), b, sizeof b);
    assert_memory_not_equal(a, b, sizeof a);

    /* fold_in: same data, same key; other data, another key */
    const char *fold = "[['k', 'random_key', 's'], ['r', 'random_fold_in', 'k', 'i']]";
    uint32_t f1[2], f1b[2], f2[2];
    run_tensor("{'s': 'i32[]', 'i': 'i32[]'}", fold, ARGS("7", "1"), f1, sizeof f1);
    run_tensor("{'s': 'i32[]', 'i': 'i32[]'}", fold, ARGS("7", "1"), f1b, sizeof f1b);
    run_tensor("{'s': 'i32[]', 'i': 'i32[]'}", fold, ARGS("7", "2"), f2, sizeof f2);
    assert_memory_equal(f1, f1b, sizeof f1);
    assert_memory_not_equal(f1, f2, sizeof f1);
    assert_false(f1[0] == parent[0] && f1[1] == parent[1]);
}

static void test_random_draws(void **state)
{
    (void)state;
    enum { N = 1000 };
    static float u[N], u2[N], v[N];
    const char *body = "[['k', 'random_key', 's'], ['r', 'random_uniform', {'shape': [1000]}, 'k']]";
    run_tensor("{'s': 'i32[]'}", body, ARGS("3"), u, sizeof u);
    run_tensor("{'s': 'i32[]'}", body, ARGS("3"), u2, sizeof u2);
    run_tensor("{'s': 'i32[]'}", body, ARGS("4"), v, sizeof v);
    assert_memory_equal(u, u2, sizeof u); /* same seed, same bits */
    assert_memory_not_equal(u, v, sizeof u);
    double sum = 0, lo = 1, hi = 0;
    for (int i = 0; i < N; i++) {
        if (!(u[i] >= 0.0f && u[i] < 1.0f))
            fail_msg("uniform value %d is %g, outside [0, 1)", i, (double)u[i]);
        sum += u[i];
        lo = u[i] < lo ? u[i] : lo;
        hi = u[i] > hi ? u[i] : hi;
    }
    /* the mean of 1000 uniforms has standard deviation 0.29/sqrt(1000) = 0.009 */
    assert_true(fabs(sum / N - 0.5) < 0.05);
    assert_true(lo < 0.05 && hi > 0.95);

    static double d[N];
    run_tensor("{'s': 'i32[]'}",
               "[['k', 'random_key', 's'], ['r', 'random_uniform', {'shape': [10, 100], 'dtype': 'f64'}, 'k']]",
               ARGS("3"), d, sizeof d);
    for (int i = 0; i < N; i++)
        assert_true(d[i] >= 0.0 && d[i] < 1.0);

    run_tensor("{'s': 'i32[]'}", "[['k', 'random_key', 's'], ['r', 'random_normal', {'shape': [1000]}, 'k']]",
               ARGS("3"), u, sizeof u);
    sum = 0;
    for (int i = 0; i < N; i++) {
        assert_true(isfinite(u[i]));
        sum += u[i];
    }
    assert_true(fabs(sum / N) < 0.2);
}

/* ---- federated intrinsics ------------------------------------------------------------------------- */

#define FED_FNS \
    "'sq': {'params': {'x': 'f32[]'}, 'body': [['y', 'mul', 'x', 'x']], 'result': 'y'}, " \
    "'inc': {'params': {'x': 'f32[]'}, 'body': [['one', 'const', {'value': 1.0}], ['y', 'add', 'x', 'one']], " \
    "  'result': 'y'}, " \
    "'plus': {'params': {'a': 'f32[]', 'b': 'f32[]'}, 'body': [['y', 'add', 'a', 'b']], 'result': 'y'}, " \
    "'seven': {'params': {}, 'body': [['y', 'const', {'value': 7.0}]], 'result': 'y'}, " \
    "'acc_sq': {'params': {'a': 'f32[]', 'x': 'f32[]'}, " \
    "  'body': [['t', 'mul', 'x', 'x'], ['y', 'add', 'a', 't']], 'result': 'y'}, " \
    "'merge': {'params': {'a': 'f32[]', 'b': 'f32[]'}, 'body': [['y', 'add', 'a', 'b']], 'result': 'y'}, " \
    "'root': {'params': {'a': 'f32[]'}, 'body': [['y', 'sqrt', 'a']], 'result': 'y'}, " \
    "'ten': {'params': {'a': 'f32[]'}, 'body': [['k', 'const', {'value': 10.0}], ['y', 'mul', 'a', 'k']], " \
    "  'result': 'y'}, " \
    "'safe_div': {'params': {'x': 'i32[]'}, 'body': [['k', 'const', {'value': 12}], ['y', 'div', 'k', 'x']], " \
    "  'result': 'y'}"

static void test_federated_placement(void **state)
{
    (void)state;
    run_expect(FED_FNS, "{'x': 'f32[2]'}", "[['r', 'federated_value', {'placement': 'SERVER'}, 'x']]", -1,
               ARGS("[1, 2]"), "[1, 2]");
    run_expect(FED_FNS, "{'x': 'f32[2]'}", "[['r', 'federated_value', {'placement': 'CLIENTS'}, 'x']]", -1,
               ARGS("[1, 2]"), "[1, 2]");
    run_expect(FED_FNS, "{}", "[['r', 'federated_eval', {'fn': 'seven', 'placement': 'SERVER'}]]", -1, NOARGS, "7");
    run_expect(FED_FNS, "{}", "[['r', 'federated_eval', {'fn': 'seven', 'placement': 'CLIENTS'}]]", 3, NOARGS,
               "[7, 7, 7]");
    run_expect_error(FED_FNS, "{}", "[['r', 'federated_eval', {'fn': 'seven', 'placement': 'CLIENTS'}]]", -1, NOARGS,
                     FVM_ERR_RUNTIME, "/functions/main/body/0", "number of clients");
    run_expect(FED_FNS, "{'x': 'f32[2]@SERVER'}", "[['r', 'federated_broadcast', 'x']]", -1, ARGS("[1, 2]"), "[1, 2]");
}

static void test_federated_map_apply_zip(void **state)
{
    (void)state;
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_map', {'fn': 'sq'}, 'x']]", -1,
               ARGS("[1, 2, 3]"), "[1, 4, 9]");
    /* an all-equal argument: fn runs for each of the N clients set on the VM */
    const char *bm = "[['b', 'federated_broadcast', 'x'], ['r', 'federated_map', {'fn': 'inc'}, 'b']]";
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}", bm, 4, ARGS("5"), "[6, 6, 6, 6]");
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}", bm, 0, ARGS("5"), "[]");
    run_expect_error(FED_FNS, "{'x': 'f32[]@SERVER'}", bm, -1, ARGS("5"), FVM_ERR_RUNTIME, "/functions/main/body/1",
                     "number of clients");
    /* per-client and all-equal arguments together */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS', 'y': 'f32[]@SERVER'}",
               "[['b', 'federated_broadcast', 'y'], ['r', 'federated_map', {'fn': 'plus'}, 'x', 'b']]", -1,
               ARGS("[1, 2, 3]", "10"), "[11, 12, 13]");
    /* federated_map_all_equal: one value for every client, fn run once, no client count needed */
    const char *bme = "[['b', 'federated_broadcast', 'x'], ['r', 'federated_map_all_equal', {'fn': 'inc'}, 'b']]";
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}", bme, -1, ARGS("5"), "6");
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}",
               "[['b', 'federated_broadcast', 'x'], ['t', 'federated_map_all_equal', {'fn': 'inc'}, 'b'], "
               " ['r', 'federated_sum', 't']]",
               3, ARGS("5"), "18");
    run_expect(
        FED_FNS, "{'x': 'f32[]@SERVER', 'y': 'f32[]@SERVER'}",
        "[['b', 'federated_broadcast', 'x'], ['c', 'federated_broadcast', 'y'], "
        " ['t', 'federated_map_all_equal', {'fn': 'plus'}, 'b', 'c'], ['r', 'federated_map', {'fn': 'inc'}, 't']]",
        2, ARGS("3", "4"), "[8, 8]");
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}", "[['r', 'federated_apply', {'fn': 'sq'}, 'x']]", -1, ARGS("3"), "9");
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER', 'y': 'f32[]@SERVER'}",
               "[['r', 'federated_apply', {'fn': 'plus'}, 'x', 'y']]", -1, ARGS("3", "4"), "7");
    run_expect(FED_FNS, "{'a': '{f32[]}@CLIENTS', 'b': '{i32[]}@CLIENTS'}",
               "[['r', 'federated_zip', {'names': ['a', 'b']}, 'a', 'b']]", -1, ARGS("[1, 2]", "[10, 20]"),
               "[{'a': 1, 'b': 10}, {'a': 2, 'b': 20}]");
    run_expect(FED_FNS, "{'a': '{f32[]}@CLIENTS', 'c': 'f32[]@SERVER'}",
               "[['b', 'federated_broadcast', 'c'], ['r', 'federated_zip', 'a', 'b']]", -1, ARGS("[1, 2]", "5"),
               "[[1, 5], [2, 5]]");
    run_expect(FED_FNS, "{'a': 'f32[]@SERVER', 'b': 'i32[]@SERVER'}",
               "[['r', 'federated_zip', {'names': ['p', 'q']}, 'a', 'b']]", -1, ARGS("1.5", "2"), "{'p': 1.5, 'q': 2}");
}

static void test_federated_aggregations(void **state)
{
    (void)state;
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1, ARGS("[1, 2, 3]"), "6");
    run_expect(FED_FNS, "{'x': '{<a=f32[2],n=i32[]>}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1,
               ARGS("[{'a': [1, 2], 'n': 1}, {'a': [3, 4], 'n': 2}]"), "{'a': [4, 6], 'n': 3}");
    /* an all-equal value summed over 3 clients: 3 * 5 */
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}", "[['b', 'federated_broadcast', 'x'], ['r', 'federated_sum', 'b']]", 3,
               ARGS("5"), "15");
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_mean', 'x']]", -1, ARGS("[1, 2, 3, 4]"), "2.5");
    run_expect(FED_FNS, "{'x': 'f32[]@SERVER'}", "[['b', 'federated_broadcast', 'x'], ['r', 'federated_mean', 'b']]", 3,
               ARGS("5"), "5");
    /* (1*1 + 2*1 + 3*2) / (1 + 1 + 2) = 9 / 4 */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS', 'w': '{f32[]}@CLIENTS'}",
               "[['r', 'federated_weighted_mean', 'x', 'w']]", -1, ARGS("[1, 2, 3]", "[1, 1, 2]"), "2.25");
    run_expect(FED_FNS, "{'x': '{f64[2]}@CLIENTS', 'w': '{f64[]}@CLIENTS'}",
               "[['r', 'federated_weighted_mean', 'x', 'w']]", -1, ARGS("[[1, 10], [2, 20], [3, 30]]", "[1, 1, 2]"),
               "[2.25, 22.5]");
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", "[['r', 'federated_min', 'x']]", -1,
               ARGS("[[3, 1], [2, 5], [4, 0]]"), "[2, 0]");
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", "[['r', 'federated_max', 'x']]", -1,
               ARGS("[[3, 1], [2, 5], [4, 0]]"), "[4, 5]");
    /* sqrt(3^2 + 4^2) = 5 */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
               "[['z', 'const', {'value': 0.0}], "
               " ['r', 'federated_aggregate', {'accumulate': 'acc_sq', 'merge': 'merge', 'report': 'root'}, 'x', 'z']]",
               -1, ARGS("[3, 4]"), "5");
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
               "[['z', 'const', {'value': 0.0}], "
               " ['r', 'federated_aggregate', {'accumulate': 'acc_sq', 'merge': 'merge'}, 'x', 'z']]",
               -1, ARGS("[1, 2, 3]"), "14");
}

/* "[f(0), f(1), ..., f(n-1)]" for f(i) = a*i + b, into buf. */
static const char *linear_list(char *buf, size_t cap, int n, int a, int b)
{
    size_t len = 0;
    buf[len++] = '[';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? ", " : "", a * i + b);
    snprintf(buf + len, cap - len, "]");
    return buf;
}

static void test_federated_many_clients(void **state)
{
    (void)state;
    /* More clients than one block of the reduction tree, so partials are
     * merged; every value below is exact in any order. */
    char x[1024], w[1024];
    /* 0 + 1 + ... + 39 = 780 */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1,
               ARGS(linear_list(x, sizeof x, 40, 1, 0)), "780");
    /* mean of 0..32 = 16 */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_mean', 'x']]", -1,
               ARGS(linear_list(x, sizeof x, 33, 1, 0)), "16");
    /* values 0, 3, ..., 96 with equal weights 2: their mean, 3 * 16 = 48 */
    run_expect(FED_FNS, "{'x': '{f64[]}@CLIENTS', 'w': '{f64[]}@CLIENTS'}",
               "[['r', 'federated_weighted_mean', 'x', 'w']]", -1,
               ARGS(linear_list(x, sizeof x, 33, 3, 0), linear_list(w, sizeof w, 33, 0, 2)), "48");
    /* max of 100 - 3i over 20 clients: 100; min: 100 - 57 = 43 */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_max', 'x']]", -1,
               ARGS(linear_list(x, sizeof x, 20, -3, 100)), "100");
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_min', 'x']]", -1,
               ARGS(linear_list(x, sizeof x, 20, -3, 100)), "43");
    /* 20 * 255 = 5100 = 19 * 256 + 236 */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 8}, 'x']]",
               -1, ARGS(linear_list(x, sizeof x, 20, 0, 255)), "236");
    /* sum of squares of 0..39 = 39*40*79/6 = 20540 */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
               "[['z', 'const', {'value': 0.0}], "
               " ['r', 'federated_aggregate', {'accumulate': 'acc_sq', 'merge': 'merge'}, 'x', 'z']]",
               -1, ARGS(linear_list(x, sizeof x, 40, 1, 0)), "20540");
}

static void test_all_equal_where_per_client_expected(void **state)
{
    (void)state;
    /* A function whose parameter is {f32[]}@CLIENTS called with an all-equal
     * value: every one of the 3 clients holds 5, so the sum is 15. */
    run_expect("'total': {'params': {'v': '{f32[]}@CLIENTS'}, 'body': [['s', 'federated_sum', 'v']], 'result': 's'}",
               "{'x': 'f32[]@SERVER'}", "[['b', 'federated_broadcast', 'x'], ['r', 'call', {'fn': 'total'}, 'b']]", 3,
               ARGS("5"), "15");
    /* and as a member of a struct */
    run_expect("'total': {'params': {'s': '<v={f32[]}@CLIENTS,k=f32[]@SERVER>'}, "
               "  'body': [['v', 'field', {'name': 'v'}, 's'], ['t', 'federated_sum', 'v']], 'result': 't'}",
               "{'x': 'f32[]@SERVER'}",
               "[['b', 'federated_broadcast', 'x'], ['s', 'struct', {'names': ['v', 'k']}, 'b', 'x'], "
               " ['r', 'call', {'fn': 'total'}, 's']]",
               2, ARGS("4"), "8");
}

static void test_secure_sum(void **state)
{
    (void)state;
    const char *body = "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 8}, 'x']]";
    /* 200 + 100 + 50 = 350 = 256 + 94 */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", body, -1, ARGS("[200, 100, 50]"), "94");
    /* 1 + 2 + 255 = 258 = 256 + 2 */
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", body, -1, ARGS("[[200, 1], [100, 2], [50, 255]]"), "[94, 2]");
    /* every summand is taken modulo 2^bitwidth: -1 = 15 (mod 16), 15 + 2 = 17 = 1 (mod 16) */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 4}, 'x']]",
               -1, ARGS("[-1, 2]"), "1");
    run_expect(FED_FNS, "{'x': '{u32[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 32}, 'x']]",
               -1, ARGS("[4294967295, 1]"), "0");
    /* 2^62 - 1 + 1 + 5 = 2^62 + 5 = 5 (mod 2^62) */
    run_expect(FED_FNS, "{'x': '{i64[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 62}, 'x']]",
               -1, ARGS("[4611686018427387903, 1, 5]"), "5");
    /* the dtype's full width: the sum modulo 2^32 as two's complement, the wrapping
     * sum: 2147483647 + 1 = 2^31 = -2147483648 as i32; -5 + 3 = -2 */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 32}, 'x']]",
               -1, ARGS("[2147483647, 1]"), "-2147483648");
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 32}, 'x']]",
               -1, ARGS("[-5, 3]"), "-2");
    /* 64 bits for i64: 2^63 - 1 + 2 wraps to -2^63 + 1 */
    run_expect(FED_FNS, "{'x': '{i64[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 64}, 'x']]",
               -1, ARGS("[9223372036854775807, 2]"), "-9223372036854775807");
}

/* federated_secure_modular_sum: every value taken into [0, modulus) (floored: -1 is modulus - 1), the sums kept
 * modulo the modulus, any modulus up to the narrowest dtype's largest value plus one; federated_secure_sum:
 * values in [0, max_input] (without it, the dtype's), summed exactly, or a run-time error naming the client. */
static void test_secure_modular_sum(void **state)
{
    (void)state;
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", "[['r', 'federated_secure_modular_sum', {'modulus': 10}, 'x']]",
               -1, ARGS("[[-1, 9], [25, 9], [3, 9]]"), "[7, 7]");
    /* a modulus of 1 sums to zeros; zero clients give zeros */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_secure_modular_sum', {'modulus': 1}, 'x']]", -1,
               ARGS("[5, -7]"), "0");
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", "[['r', 'federated_secure_modular_sum', {'modulus': 3}, 'x']]", -1,
               ARGS("[]"), "[0, 0]");
    /* 2^31 for i32, a power of two: (2^31 - 1) + 2 = 1, and -2^31 is 0 */
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}",
               "[['r', 'federated_secure_modular_sum', {'modulus': 2147483648}, 'x']]", -1,
               ARGS("[2147483647, 2, -2147483648]"), "1");
    /* u32 values are unsigned: 4294967295 mod 1000 = 295 */
    run_expect(FED_FNS, "{'x': '{u32[]}@CLIENTS'}", "[['r', 'federated_secure_modular_sum', {'modulus': 1000}, 'x']]",
               -1, ARGS("[4294967295, 5]"), "300");
    /* a struct: one modulus for every leaf, bounded by the narrowest (u8: 256) */
    run_expect(FED_FNS, "{'x': '{<a=u8[],b=i64[]>}@CLIENTS'}",
               "[['r', 'federated_secure_modular_sum', {'modulus': 256}, 'x']]", -1,
               ARGS("[{'a': 255, 'b': -1}, {'a': 2, 'b': 3}]"), "{'a': 1, 'b': 2}");
}

static void test_secure_sum_max_input(void **state)
{
    (void)state;
    const char *body = "[['r', 'federated_secure_sum', {'max_input': 100}, 'x']]";
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", body, -1, ARGS("[[100, 0], [100, 7], [0, 1]]"), "[200, 8]");
    run_expect(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", body, -1, ARGS("[]"), "[0, 0]");
    run_expect_error(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", body, -1, ARGS("[[1, 2], [101, 0]]"), FVM_ERR_RUNTIME,
                     "/functions/main/body/0", "a client's value 101 (element 0) is outside [0, 100]");
    run_expect_error(FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", body, -1, ARGS("[[1, -2]]"), FVM_ERR_RUNTIME,
                     "/functions/main/body/0", "a client's value -2 (element 1) is outside [0, 100]");
    /* without max_input: the dtype's values that are not negative; the sum exact or an error */
    run_expect(FED_FNS, "{'x': '{i64[]}@CLIENTS'}", "[['r', 'federated_secure_sum', 'x']]", -1,
               ARGS("[9223372036854775806, 1]"), "9223372036854775807");
    run_expect_error(FED_FNS, "{'x': '{i64[]}@CLIENTS'}", "[['r', 'federated_secure_sum', 'x']]", -1,
                     ARGS("[9223372036854775806, 2]"), FVM_ERR_RUNTIME, "/functions/main/body/0",
                     "the sum 9223372036854775808 of the clients' values (element 0) does not fit i64");
    /* an all-equal value: every client gives it */
    run_expect(FED_FNS, "{'y': 'i32[]@SERVER'}",
               "[['x', 'federated_broadcast', 'y'], ['r', 'federated_secure_sum', {'max_input': 5}, 'x']]", 3,
               ARGS("5"), "15");
}

/* A field of placed structs: of the server's struct, and of each client's (lowered to
 * federated_apply and federated_map); by name and by index; then through a gradient. */
static void test_placed_field(void **state)
{
    (void)state;
    run_expect("", "{'s': '<a=f32[],b=i32[2]>@SERVER'}",
               "[['a', 'field', {'name': 'a'}, 's'], ['b', 'field', {'index': 1}, 's'], "
               " ['r', 'struct', {'names': ['a', 'b']}, 'a', 'b']]",
               -1, ARGS("{'a': 1.5, 'b': [3, 4]}"), "{'a': 1.5, 'b': [3, 4]}");
    /* the x of each client: [1, 2] + [10, 20] */
    run_expect("", "{'c': '{<x=f32[2],y=f32[]>}@CLIENTS'}",
               "[['xs', 'field', {'name': 'x'}, 'c'], ['r', 'federated_sum', 'xs']]", -1,
               ARGS("[{'x': [1, 2], 'y': 0}, {'x': [10, 20], 'y': 1}]"), "[11, 22]");
    /* d/ds of a^2 at the server plus the clients' sum of x^2: 2a for s.a, 0 for s.b, 2x per client */
    run_expect(
        FED_FNS
        ", 'add2': {'params': {'u': 'f32[]', 'v': 'f32[]'}, 'body': [['w', 'add', 'u', 'v']], 'result': 'w'}, "
        "'g': {'params': {'s': '<a=f32[],b=f32[]>@SERVER', 'c': '{<x=f32[],y=f32[]>}@CLIENTS'}, "
        "  'body': [['a', 'field', {'name': 'a'}, 's'], ['l', 'federated_apply', {'fn': 'sq'}, 'a'], "
        "   ['xs', 'field', {'name': 'x'}, 'c'], ['sx', 'federated_map', {'fn': 'sq'}, 'xs'], "
        "   ['t', 'federated_sum', 'sx'], ['tot', 'federated_apply', {'fn': 'add2'}, 'l', 't']], 'result': 'tot'}",
        "{'s': '<a=f32[],b=f32[]>@SERVER', 'c': '{<x=f32[],y=f32[]>}@CLIENTS'}",
        "[['gs', 'grad', {'fn': 'g', 'wrt': 's'}, 's', 'c'], ['gc', 'grad', {'fn': 'g', 'wrt': 'c'}, 's', 'c'], "
        " ['r', 'struct', {'names': ['gs', 'gc']}, 'gs', 'gc']]",
        -1, ARGS("{'a': 3, 'b': 5}", "[{'x': 1, 'y': 7}, {'x': 2, 'y': 8}]"),
        "{'gs': {'a': 6, 'b': 0}, 'gc': [{'x': 2, 'y': 0}, {'x': 4, 'y': 0}]}");
}

static void test_zero_clients(void **state)
{
    (void)state;
    run_expect(FED_FNS, "{'x': '{f32[2]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1, ARGS("[]"), "[0, 0]");
    run_expect(FED_FNS, "{'x': '{<a=f32[2],b=i32[]>}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1, ARGS("[]"),
               "{'a': [0, 0], 'b': 0}");
    run_expect(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 8}, 'x']]",
               -1, ARGS("[]"), "0");
    /* aggregate: report(zero) = 10 * 5 */
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
               "[['z', 'const', {'value': 5.0}], "
               " ['r', 'federated_aggregate', {'accumulate': 'acc_sq', 'merge': 'merge', 'report': 'ten'}, 'x', 'z']]",
               -1, ARGS("[]"), "50");
    run_expect(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_map', {'fn': 'sq'}, 'x']]", -1, ARGS("[]"),
               "[]");
    run_expect_error(FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
                     "[['y', 'federated_map', {'fn': 'sq'}, 'x'], ['r', 'federated_mean', 'y']]", -1, ARGS("[]"),
                     FVM_ERR_RUNTIME, "/functions/main/body/1", "zero clients");
    run_expect_error(FED_FNS, "{'x': '{f32[]}@CLIENTS', 'w': '{f32[]}@CLIENTS'}",
                     "[['r', 'federated_weighted_mean', 'x', 'w']]", -1, ARGS("[]", "[]"), FVM_ERR_RUNTIME,
                     "/functions/main/body/0", "zero clients");
    run_expect_error(FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_max', 'x']]", -1, ARGS("[]"),
                     FVM_ERR_RUNTIME, "/functions/main/body/0", "zero clients");
}

/* ---- the reduction tree -------------------------------------------------------------------------------- */

enum { NCLIENTS = 1000 };

/* The sum aggregate.h documents: blocks of FVM_AGG_BLOCK clients summed left
 * to right (starting from the block's first client), then the partials
 * merged pairwise, level by level, an odd last one carried up. With
 * pairwise false the partials are merged left to right instead (an order the
 * test must be able to tell apart). */
static float tree_sum(const float *v, int n, bool pairwise)
{
    float parts[NCLIENTS];
    int k = 0;
    for (int lo = 0; lo < n; lo += FVM_AGG_BLOCK) {
        int hi = lo + FVM_AGG_BLOCK < n ? lo + FVM_AGG_BLOCK : n;
        float p = v[lo];
        for (int i = lo + 1; i < hi; i++)
            p = p + v[i];
        parts[k++] = p;
    }
    if (!pairwise) {
        for (int i = 1; i < k; i++)
            parts[0] = parts[0] + parts[i];
        return parts[0];
    }
    while (k > 1) {
        int j = 0;
        for (int i = 0; i + 1 < k; i += 2)
            parts[j++] = parts[i] + parts[i + 1];
        if (k % 2)
            parts[j++] = parts[k - 1];
        k = j;
    }
    return parts[0];
}

static void test_reduction_tree_order(void **state)
{
    (void)state;
    /* Client 0 holds 2^24, where the spacing of floats is 2: adding any one
     * of the small values below to it rounds back to 2^24, so a plain left
     * to right sum never moves, while the tree first adds the small values
     * among themselves. */
    static float v[NCLIENTS];
    v[0] = 16777216.0f;
    uint32_t x = 12345;
    for (int i = 1; i < NCLIENTS; i++) {
        x = x * 1103515245u + 12345u;
        v[i] = (float)((x >> 16) % 1000) / 1000.0f + 0.001f; /* in (0, 1) */
    }
    float naive = v[0];
    for (int i = 1; i < NCLIENTS; i++)
        naive = naive + v[i];
    float tree = tree_sum(v, NCLIENTS, true);
    assert_true(naive == 16777216.0f);
    assert_true(tree != naive);
    assert_true(tree != tree_sum(v, NCLIENTS, false));

    size_t cap = (size_t)NCLIENTS * 24 + 8;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0;
    text[len++] = '[';
    for (int i = 0; i < NCLIENTS; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s%.9g", i ? ", " : "", (double)v[i]);
    text[len++] = ']';
    text[len] = 0;

    float got[2];
    for (int rep = 0; rep < 2; rep++) {
        run r;
        fvm_status s = run_main(&r, "", "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1, ARGS(text));
        if (s)
            test_print_errors(&r.d, "  ");
        assert_int_equal(s, FVM_OK);
        assert_int_equal(r.res->t.dtype, FVM_DTYPE_F32);
        memcpy(&got[rep], fvm_tensor_data(&r.res->t), sizeof(float));
        run_free(&r);
    }
    if (memcmp(&got[0], &tree, sizeof tree))
        fail_msg("federated_sum gave %.9g, the documented tree %.9g (left to right: %.9g)", (double)got[0],
                 (double)tree, (double)naive);
    assert_memory_equal(&got[0], &got[1], sizeof(float));

    /* The mean divides that same sum by the count. */
    run r;
    assert_int_equal(run_main(&r, "", "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_mean', 'x']]", -1, ARGS(text)),
                     FVM_OK);
    float mean = tree / (float)NCLIENTS;
    assert_memory_equal(fvm_tensor_data(&r.res->t), &mean, sizeof mean);
    run_free(&r);
    free(text);
}

static void test_client_shapes_must_agree(void **state)
{
    (void)state;
    /* {f32[?]}@CLIENTS lets each client hold a vector of its own length, but
     * an aggregation adds members elementwise: members of different shapes
     * are an error (as federated_secure_sum_bitwidth reports), never
     * broadcast into each other. (The code is not the point here.) */
    run_expect_error("", "{'x': '{i32[?]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 8}, 'x']]",
                     -1, ARGS("[[1, 2, 3], [1]]"), FVM_ERR_RUNTIME, "/functions/main/body/0", "shape");
    run_expect_error("", "{'x': '{f32[?]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1,
                     ARGS("[[1, 2], [10, 20, 30]]"), FVM_STATUS_COUNT, "/functions/main/body/0", "shape");
    run_expect_error("", "{'x': '{f32[?]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", -1, ARGS("[[1], [10, 20, 30]]"),
                     FVM_STATUS_COUNT, "/functions/main/body/0", "shape");
    run_expect_error("", "{'x': '{f32[?]}@CLIENTS'}", "[['r', 'federated_mean', 'x']]", -1, ARGS("[[10, 20, 30], [1]]"),
                     FVM_STATUS_COUNT, "/functions/main/body/0", "shape");
    run_expect_error("", "{'x': '{f32[?]}@CLIENTS'}", "[['r', 'federated_max', 'x']]", -1, ARGS("[[10, 20, 30], [1]]"),
                     FVM_STATUS_COUNT, "/functions/main/body/0", "shape");
    /* the same for the elements of a sequence */
    run_expect_error("", "{'s': 'f32[?]*'}", "[['r', 'sequence_sum', 's']]", -1, ARGS("[[1], [10, 20, 30]]"),
                     FVM_STATUS_COUNT, "/functions/main/body/0", "shape");
}

/* ---- runtime errors --------------------------------------------------------------------------------- */

static void test_runtime_errors(void **state)
{
    (void)state;
    run_expect_error("", "{'x': 'i32[3]', 'y': 'i32[3]'}", "[['a', 'neg', 'x'], ['r', 'div', 'a', 'y']]", -1,
                     ARGS("[1, 2, 3]", "[1, 0, 1]"), FVM_ERR_RUNTIME, "/functions/main/body/1", "division by zero");
    run_expect_error("", "{'x': 'f32[3]', 'i': 'i32[2]'}", "[['r', 'gather', 'x', 'i']]", -1,
                     ARGS("[10, 20, 30]", "[0, 3]"), FVM_ERR_RUNTIME, "/functions/main/body/0", "outside the range");
    run_expect_error("", "{'x': 'f32[3]', 'i': 'i32[1]'}", "[['r', 'gather', 'x', 'i']]", -1,
                     ARGS("[10, 20, 30]", "[-1]"), FVM_ERR_RUNTIME, "/functions/main/body/0", "outside the range");
    /* in a called function: the callee's instruction */
    run_expect_error(FED_FNS, "{'x': 'i32[]'}", "[['y', 'neg', 'x'], ['r', 'call', {'fn': 'safe_div'}, 'y']]", -1,
                     ARGS("0"), FVM_ERR_RUNTIME, "/functions/safe_div/body/1", "division by zero");
    /* in one client of a map */
    run_expect_error(FED_FNS, "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_map', {'fn': 'safe_div'}, 'x']]", -1,
                     ARGS("[1, 2, 0, 4]"), FVM_ERR_RUNTIME, "/functions/safe_div/body/1", "division by zero");
    /* float division by zero is no error: IEEE infinity */
    run_expect("", "{'x': 'f32[1]', 'y': 'f32[1]'}", "[['r', 'div', 'x', 'y']]", -1, ARGS("[1]", "[0]"), "['inf']");
}

/* ---- binding text arguments ------------------------------------------------------------------------ */

static void test_bind_args(void **state)
{
    (void)state;
    char *text = test_program_text("", "{'x': '{f32[]}@CLIENTS', 'key': 'u32[2]'}",
                                   "[['s', 'federated_sum', 'x'], ['r', 'struct', 's', 'key']]");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("test.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    const fvm_func *f = fvm_program_func(p, "main");
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    /* the key parameter, not given, is the key of the seed: {0, 42} */
    fvm_named_text args[] = {{"x", "[1.5, 2, 3]", FVM_ARG_JSON}};
    fvm_value **vals = NULL, *res = NULL;
    int64_t nc = -1;
    assert_int_equal(fvm_bind_args(f, 1, args, 42, &nc, &vals, &d), FVM_OK);
    assert_int_equal(nc, 3);
    assert_int_equal(fvm_vm_call(vm, f, vals, &res, &d), FVM_OK);
    assert_int_equal(fvm_vm_clients(vm), 3);
    assert_true(fvm_tensor_get_f64(&res->items[0]->t, 0) == 6.5);
    const uint32_t *key = fvm_tensor_data(&res->items[1]->t);
    assert_int_equal(key[0], 0);
    assert_int_equal(key[1], 42);
    fvm_value_release(res);
    fvm_values_free(vals, f->nparams);
    /* a client count other than the run's is refused */
    fvm_named_text four[] = {{"x", "[1, 2, 3, 4]", FVM_ARG_JSON}};
    nc = 3;
    assert_int_not_equal(fvm_bind_args(f, 1, four, 42, &nc, &vals, &d), FVM_OK);
    assert_null(vals);
    /* a missing argument and an unknown one are both reported */
    fvm_diag_clear(&d);
    fvm_named_text wrong[] = {{"y", "[1]", FVM_ARG_JSON}};
    nc = -1;
    assert_int_equal(fvm_bind_args(f, 1, wrong, 42, &nc, &vals, &d), FVM_ERR_USAGE);
    assert_true(d.n >= 1);
    assert_non_null(strstr(d.errs[0].msg, "'y'"));
    fvm_vm_free(vm);
    fvm_diag_clear(&d);
    fvm_program_free(p);
    free(text);
}

/* ---- the call boundary ---------------------------------------------------------------------------------- */

static void test_call_checks_arguments(void **state)
{
    (void)state;
    char *text = test_program_text("", "{'x': 'f32[3]'}", "[['r', 'neg', 'x']]");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("test.json", text, strlen(text), &p, &d), FVM_OK);
    const fvm_func *f = fvm_program_func(p, "main");
    fvm_vm *vm = NULL;
    fvm_value *res = NULL;
    /* not checked yet */
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    assert_int_equal(fvm_vm_call(vm, f, NULL, &res, &d), FVM_ERR_USAGE);
    assert_null(res);
    fvm_vm_free(vm);
    fvm_diag_clear(&d);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    /* a tensor of the wrong shape */
    fvm_tensor t;
    fvm_dims two = {.rank = 1, .d = {2}};
    assert_int_equal(fvm_tensor_zeros(&t, FVM_DTYPE_F32, &two, &d), FVM_OK);
    fvm_value *v = fvm_value_tensor_take(&t);
    fvm_value *argv[1] = {v};
    assert_int_equal(fvm_vm_call(vm, f, argv, &res, &d), FVM_ERR_TYPE);
    assert_null(res);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.errs[0].loc.ptr, "/functions/main/params/x");
    fvm_value_release(v);
    fvm_vm_free(vm);
    fvm_diag_clear(&d);
    fvm_program_free(p);
    free(text);
}

/* Client lists of one value, of its own length: for values built by hand. */
static fvm_value *client_list(int n, float first)
{
    fvm_value *l = fvm_value_list(FVM_V_CLIENTS, n);
    assert_non_null(l);
    for (int i = 0; i < n; i++) {
        fvm_tensor t;
        fvm_dims s = {0};
        assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
        *(float *)fvm_tensor_data(&t) = first + (float)i;
        l->items[i] = fvm_value_tensor_take(&t);
        assert_non_null(l->items[i]);
    }
    return l;
}

static void test_call_checks_client_counts(void **state)
{
    (void)state;
    /* Every {T}@CLIENTS value of one run has the same number of clients, also
     * when the lists sit inside a struct argument: a struct holding lists of 2
     * and 3 clients is refused at the call, before anything runs. */
    char *text =
        test_program_text("", "{'s': '<a={f32[]}@CLIENTS,b={f32[]}@CLIENTS>'}", "[['r', 'field', {'name': 'a'}, 's']]");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("test.json", text, strlen(text), &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    const fvm_func *f = fvm_program_func(p, "main");
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    fvm_value *s = fvm_value_list(FVM_V_STRUCT, 2);
    assert_non_null(s);
    s->items[0] = client_list(2, 1.0f);
    s->items[1] = client_list(3, 10.0f);
    fvm_value *argv[1] = {s}, *res = NULL;
    fvm_status st = fvm_vm_call(vm, f, argv, &res, &d);
    fvm_value_release(res);
    fvm_value_release(s);
    fvm_vm_free(vm);
    fvm_diag_clear(&d);
    fvm_program_free(p);
    free(text);
    assert_int_equal(st, FVM_ERR_TYPE);
}

/* A {f32[]}@CLIENTS source read on demand: member i is first + i; it counts
 * its reads and fails at client 'fail_at' (-1: never). */
typedef struct count_source {
    fvm_source base;
    float first;
    int64_t fail_at;
    int *gets;
} count_source;

static fvm_status count_get(fvm_source *src, int64_t i, fvm_value **out, fvm_diag *d)
{
    count_source *c = (count_source *)src;
    (*c->gets)++;
    if (i == c->fail_at)
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "client %lld: unreadable", (long long)i);
    fvm_tensor t;
    fvm_dims s = {0};
    if (fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL))
        return FVM_ERR_NOMEM;
    *(float *)fvm_tensor_data(&t) = c->first + (float)i;
    *out = fvm_value_tensor_take(&t);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static void count_free(fvm_source *src)
{
    free(src);
}

static const struct fvm_source_i count_iface = {.get = count_get, .free = count_free};

static fvm_value *counted_clients(int64_t n, float first, int64_t fail_at, int *gets)
{
    count_source *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *c = (count_source){{&count_iface}, first, fail_at, gets};
    fvm_value *v = fvm_value_clients_source_take(n, &c->base);
    assert_non_null(v);
    return v;
}

/* Runs main of text over argument a with 'clients' clients; returns the status. */
static fvm_status call_main(const char *text, fvm_value *a, int64_t clients, fvm_value **res, fvm_diag *d)
{
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_text("test.json", text, strlen(text), &p, d), FVM_OK);
    assert_int_equal(fvm_compile(p, d), FVM_OK);
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, d), FVM_OK);
    assert_int_equal(fvm_vm_set_clients(vm, clients, d), FVM_OK);
    fvm_value *argv[1] = {a};
    fvm_status s = fvm_vm_call(vm, fvm_program_func(p, "main"), argv, res, d);
    fvm_vm_free(vm);
    fvm_program_free(p);
    return s;
}

static void test_clients_read_on_demand(void **state)
{
    (void)state;
    /* Client data read on demand (as a dataset gives it) goes through zip,
     * map and every aggregation with the results of the same data held in
     * memory: x_i = 1 + i over 37 clients (three blocks of the tree). */
    char *text =
        test_program_text("'sq': {'params': {'p': '<f32[],f32[]>'}, 'body': [['a', 'field', {'index': 0}, 'p'], "
                          "['b', 'field', {'index': 1}, 'p'], ['r', 'mul', 'a', 'b']], 'result': 'r'}",
                          "{'x': '{f32[]}@CLIENTS'}",
                          "[['z', 'federated_zip', 'x', 'x'], ['q', 'federated_map', {'fn': 'sq'}, 'z'], "
                          "['s', 'federated_sum', 'q'], ['m', 'federated_max', 'x'], "
                          "['w', 'federated_weighted_mean', 'x', 'x'], ['r', 'federated_zip', 's', 'm', 'w']]");
    const int n = 37;
    fvm_diag d = {0};
    int gets = 0;
    fvm_value *lazy = counted_clients(n, 1.0f, -1, &gets), *held = client_list(n, 1.0f);
    fvm_value *r1 = NULL, *r2 = NULL;
    assert_int_equal(call_main(text, lazy, n, &r1, &d), FVM_OK);
    assert_int_equal(call_main(text, held, n, &r2, &d), FVM_OK);
    assert_true(fvm_value_identical(r1, r2));
    /* sum of squares 1..37 = 37*38*75/6 = 17575; max 37; weighted mean = 17575/703 = 25 */
    assert_float_equal(*(float *)fvm_tensor_data(&r1->items[0]->t), 17575.0f, 0);
    assert_float_equal(*(float *)fvm_tensor_data(&r1->items[1]->t), 37.0f, 0);
    assert_float_equal(*(float *)fvm_tensor_data(&r1->items[2]->t), 25.0f, 1e-5);
    /* one read per client for the map (both sides of its zip), the max and the mean (value and weight) */
    assert_int_equal(gets, 5 * n);
    fvm_value_release(r1);
    fvm_value_release(r2);
    fvm_value_release(lazy);
    fvm_value_release(held);

    /* A client that cannot be read stops the run with the source's error. */
    gets = 0;
    lazy = counted_clients(n, 1.0f, 20, &gets);
    r1 = NULL;
    assert_int_equal(call_main(text, lazy, n, &r1, &d), FVM_ERR_IO);
    assert_null(r1);
    assert_non_null(strstr(d.errs[0].msg, "client 20: unreadable"));
    fvm_value_release(lazy);
    fvm_diag_clear(&d);
    free(text);
}

#define FILTER_FNS \
    "'above': {'params': {'e': 'f32[]', 'k': 'f32[]'}, 'body': [['p', 'gt', 'e', 'k']], 'result': 'p'}, " \
    "'has_label': {'params': {'e': '<x=f32[2],y=i32[]>', 'l': 'i32[]'}, " \
    "  'body': [['y', 'field', {'name': 'y'}, 'e'], ['p', 'eq', 'y', 'l']], 'result': 'p'}"

static void test_sequence_take_skip_filter(void **state)
{
    (void)state;
    const char *P = "{'s': 'f32[]*'}", *S = "[1, 5, 2, 7]";
    run_expect("", P, "[['r', 'sequence_take', {'n': 2}, 's']]", -1, ARGS(S), "[1, 5]");
    run_expect("", P, "[['r', 'sequence_take', {'n': 4}, 's']]", -1, ARGS(S), "[1, 5, 2, 7]");
    run_expect("", P, "[['r', 'sequence_take', {'n': 9}, 's']]", -1, ARGS(S), "[1, 5, 2, 7]");
    run_expect("", P, "[['r', 'sequence_take', {'n': 0}, 's']]", -1, ARGS(S), "[]");
    run_expect("", P, "[['r', 'sequence_skip', {'n': 1}, 's']]", -1, ARGS(S), "[5, 2, 7]");
    run_expect("", P, "[['r', 'sequence_skip', {'n': 0}, 's']]", -1, ARGS(S), "[1, 5, 2, 7]");
    run_expect("", P, "[['r', 'sequence_skip', {'n': 4}, 's']]", -1, ARGS(S), "[]");
    run_expect("", P, "[['r', 'sequence_skip', {'n': 2147483647}, 's']]", -1, ARGS(S), "[]");
    run_expect("", P, "[['r', 'sequence_take', {'n': 3}, 's']]", -1, ARGS("[]"), "[]");
    run_expect("", P, "[['r', 'sequence_skip', {'n': 3}, 's']]", -1, ARGS("[]"), "[]");
    /* take then skip: elements 1 and 2 */
    run_expect("", P, "[['t', 'sequence_take', {'n': 3}, 's'], ['r', 'sequence_skip', {'n': 1}, 't']]", -1, ARGS(S),
               "[5, 2]");
    /* filter with an extra argument: the elements above k, in order */
    const char *Pk = "{'s': 'f32[]*', 'k': 'f32[]'}", *F = "[['r', 'sequence_filter', {'fn': 'above'}, 's', 'k']]";
    run_expect(FILTER_FNS, Pk, F, -1, ARGS(S, "3"), "[5, 7]");
    run_expect(FILTER_FNS, Pk, F, -1, ARGS(S, "1.5"), "[5, 2, 7]");
    run_expect(FILTER_FNS, Pk, F, -1, ARGS(S, "0"), "[1, 5, 2, 7]");
    run_expect(FILTER_FNS, Pk, F, -1, ARGS(S, "10"), "[]");
    run_expect(FILTER_FNS, Pk, F, -1, ARGS("[]", "0"), "[]");
    /* a client's examples of one label, counted and summed */
    const char *E = "[{'x': [1, 2], 'y': 3}, {'x': [3, 4], 'y': 1}, {'x': [5, 6], 'y': 3}, {'x': [7, 8], 'y': 0}]";
    run_expect(FILTER_FNS, "{'s': '<x=f32[2],y=i32[]>*', 'l': 'i32[]'}",
               "[['k', 'sequence_filter', {'fn': 'has_label'}, 's', 'l'], ['n', 'sequence_length', 'k'], "
               " ['t', 'sequence_sum', 'k'], ['r', 'struct', 'k', 'n', 't']]",
               -1, ARGS(E, "3"), "[[{'x': [1, 2], 'y': 3}, {'x': [5, 6], 'y': 3}], 2, {'x': [6, 8], 'y': 6}]");
}

/* x[i] = [2i, 2i+1], y[i] = labels[i]: 5 examples stored by columns, as a dataset gives them. */
static fvm_value *examples_by_columns(const int32_t *labels)
{
    fvm_tensor x, y;
    fvm_dims dx = {.rank = 2, .d = {5, 2}}, dy = {.rank = 1, .d = {5}};
    assert_int_equal(fvm_tensor_alloc(&x, FVM_DTYPE_F32, &dx, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&y, FVM_DTYPE_I32, &dy, NULL), FVM_OK);
    for (int i = 0; i < 10; i++)
        ((float *)fvm_tensor_data(&x))[i] = (float)i;
    memcpy(fvm_tensor_data(&y), labels, 5 * sizeof *labels);
    fvm_value *cols = fvm_value_list(FVM_V_STRUCT, 2);
    assert_non_null(cols);
    cols->items[0] = fvm_value_tensor_take(&x);
    cols->items[1] = fvm_value_tensor_take(&y);
    fvm_value *seq = fvm_value_seq_cols_take(5, cols);
    assert_non_null(seq);
    return seq;
}

static void test_sequences_by_columns(void **state)
{
    (void)state;
    /* take, skip and filter on a sequence stored by columns give what they give on the same elements held as
     * a list, by columns too; take and skip and a filter that keeps consecutive elements share the rows */
    static const struct {
        const char *body, *want;
        bool shares;
    } cases[] = {
        {"[['r', 'sequence_take', {'n': 2}, 's']]", "[{'x': [0, 1], 'y': 3}, {'x': [2, 3], 'y': 1}]", true},
        {"[['r', 'sequence_skip', {'n': 3}, 's']]", "[{'x': [6, 7], 'y': 0}, {'x': [8, 9], 'y': 1}]", true},
        {"[['r', 'sequence_skip', {'n': 5}, 's']]", "[]", false},
        {"[['l', 'const', {'value': 3}], ['r', 'sequence_filter', {'fn': 'has_label'}, 's', 'l']]",
         "[{'x': [0, 1], 'y': 3}, {'x': [4, 5], 'y': 3}]", false},
        {"[['l', 'const', {'value': 1}], ['r', 'sequence_filter', {'fn': 'has_label'}, 's', 'l']]",
         "[{'x': [2, 3], 'y': 1}, {'x': [8, 9], 'y': 1}]", false},
        {"[['l', 'const', {'value': 0}], ['r', 'sequence_filter', {'fn': 'has_label'}, 's', 'l']]",
         "[{'x': [6, 7], 'y': 0}]", true},
    };
    static const int32_t labels[5] = {3, 1, 3, 0, 1};
    const char *E = "[{'x': [0, 1], 'y': 3}, {'x': [2, 3], 'y': 1}, {'x': [4, 5], 'y': 3}, {'x': [6, 7], 'y': 0}, "
                    "{'x': [8, 9], 'y': 1}]";
    const char *P = "{'s': '<x=f32[2],y=i32[]>*'}";
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        run r;
        assert_int_equal(run_main(&r, FILTER_FNS, P, cases[c].body, -1, ARGS(E)), FVM_OK);
        expect_result(&r, cases[c].want);
        char *text = test_program_text(FILTER_FNS, P, cases[c].body);
        fvm_value *seq = examples_by_columns(labels), *res = NULL;
        fvm_diag d = {0};
        assert_int_equal(call_main(text, seq, 1, &res, &d), FVM_OK);
        assert_true(fvm_value_identical(res, r.res));
        assert_non_null(res->cols);
        if (cases[c].shares)
            assert_ptr_equal(res->cols->items[0]->t.buf, seq->cols->items[0]->t.buf);
        else if (res->n > 0)
            assert_ptr_not_equal(res->cols->items[0]->t.buf, seq->cols->items[0]->t.buf);
        fvm_value_release(res);
        fvm_value_release(seq);
        fvm_diag_clear(&d);
        free(text);
        run_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_integer_wrap),
        cmocka_unit_test(test_compare_logic),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_vs_naive),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_shape_ops),
        cmocka_unit_test(test_dim),
        cmocka_unit_test(test_one_hot),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_iota_const_fill),
        cmocka_unit_test(test_struct_field),
        cmocka_unit_test(test_call_cond),
        cmocka_unit_test(test_fori),
        cmocka_unit_test(test_while),
        cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_sequence_take_skip_filter),
        cmocka_unit_test(test_sequences_by_columns),
        cmocka_unit_test(test_random_keys),
        cmocka_unit_test(test_random_draws),
        cmocka_unit_test(test_federated_placement),
        cmocka_unit_test(test_federated_map_apply_zip),
        cmocka_unit_test(test_federated_aggregations),
        cmocka_unit_test(test_federated_many_clients),
        cmocka_unit_test(test_all_equal_where_per_client_expected),
        cmocka_unit_test(test_secure_sum),
        cmocka_unit_test(test_secure_modular_sum),
        cmocka_unit_test(test_secure_sum_max_input),
        cmocka_unit_test(test_placed_field),
        cmocka_unit_test(test_zero_clients),
        cmocka_unit_test(test_reduction_tree_order),
        cmocka_unit_test(test_client_shapes_must_agree),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_bind_args),
        cmocka_unit_test(test_call_checks_arguments),
        cmocka_unit_test(test_call_checks_client_counts),
        cmocka_unit_test(test_clients_read_on_demand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
