/* test_util.h - what the cmocka tests share: per-test fixtures; programs written with single quotes, loaded and checked; their errors printed.
 * Include it after <cmocka.h>. (A scratch directory and the errors of file readers: test_files.h; tensors: test_tensors.h.) */
#ifndef FVM_TEST_UTIL_H
#define FVM_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/fedvm.h"

/* For a setup: *state is a new zeroed fixture of size bytes (the teardown
 * frees it); 0, or -1 when there is no memory. */
static inline int test_fixture_new(void **state, size_t size)
{
    *state = calloc(1, size);
    return *state ? 0 : -1;
}

/* src with every single quote turned into a double quote: programs and
 * values are written with single quotes for readability, so no string in
 * them may hold a quote. The caller frees the copy. */
static inline char *test_json(const char *src)
{
    char *s = strdup(src);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

/* The JSON text (see test_json) of a program of 'funcs' (a fragment of more
 * functions, or "") and main(params) { body } returning r. The caller frees it. */
static inline char *test_program_text(const char *funcs, const char *params, const char *body)
{
    const char *fmt = "{'fedvm': 1, 'functions': {%s%s'main': {'params': %s, 'body': %s, 'result': 'r'}}}";
    size_t n = strlen(fmt) + strlen(funcs) + strlen(params) + strlen(body) + 8;
    char *raw = malloc(n);
    assert_non_null(raw);
    snprintf(raw, n, fmt, funcs, *funcs ? ", " : "", params, body);
    char *s = test_json(raw);
    free(raw);
    return s;
}

/* Prints d's errors, formatted (fvm_error_format), one a line after indent,
 * so that a failing test shows why. */
static inline void test_print_errors(const fvm_diag *d, const char *indent)
{
    for (int i = 0; i < d->n; i++) {
        char *m = fvm_error_format(&d->errs[i]);
        print_error("%s%s\n", indent, m ? m : d->errs[i].msg);
        free(m);
    }
}

/* Loads src as the program file 'name' (nothing is read from disk), with
 * every single quote in it read as a double quote (test_json), and compiles
 * it (fvm_compile: checked, then the passes) when 'checked'. Any error is
 * printed and fails the test. The caller frees the program. */
static inline fvm_program *test_load(const char *name, const char *src, bool checked)
{
    char *s = test_json(src);
    fvm_program *p = NULL;
    fvm_diag d = {0};
    fvm_status st = fvm_program_load_text(name, s, strlen(s), &p, &d);
    if (st == FVM_OK && checked)
        st = fvm_compile(p, &d);
    for (int i = 0; i < d.n; i++)
        print_error("%s\n", d.errs[i].msg);
    assert_int_equal(st, FVM_OK);
    fvm_diag_clear(&d);
    free(s);
    return p;
}

/* Loads the program file at path, which must load, and compiles it; when it
 * does not check, its errors are printed and the test fails. Errors go to d,
 * which the caller keeps using and clears. The caller frees the program. */
static inline fvm_program *test_load_file(const char *path, fvm_diag *d)
{
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load(path, &p, d), FVM_OK);
    if (fvm_compile(p, d)) {
        for (int i = 0; i < d->n; i++)
            print_error("%s\n", d->errs[i].msg);
        fail_msg("%s does not check", path);
    }
    return p;
}

/* fn(args) on a VM of p (fusion and inlined bodies off when unfused),
 * which must succeed (its errors printed); the result, owned by the caller
 * (the args stay the caller's). */
static inline fvm_value *test_call(const fvm_program *p, const char *fn, fvm_value *const *args, bool unfused)
{
    fvm_vm *vm = NULL;
    fvm_diag d = {0};
    fvm_vm_config cfg = {.nclients = -1, .unfused = unfused};
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, &d), FVM_OK);
    fvm_value *res = NULL;
    fvm_status s = fvm_vm_call(vm, fvm_program_func(p, fn), args, &res, &d);
    for (int i = 0; i < d.n; i++)
        print_error("%s\n", d.errs[i].msg);
    assert_int_equal(s, FVM_OK);
    fvm_vm_free(vm);
    fvm_diag_clear(&d);
    return res;
}

/* The struct <a, b>, taking both references. */
static inline fvm_value *test_pair(fvm_value *a, fvm_value *b)
{
    fvm_value *s = fvm_value_list(FVM_V_STRUCT, 2);
    assert_non_null(s);
    s->items[0] = a;
    s->items[1] = b;
    return s;
}

#endif
