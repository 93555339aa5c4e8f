/* test_util.h - what the cmocka tests share: programs written with single quotes, loaded and checked.
 * Include it after <cmocka.h> and vm/fedvm.h. */
#ifndef FVM_TEST_UTIL_H
#define FVM_TEST_UTIL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Loads src as the program file 'name' (nothing is read from disk), with
 * every single quote in it read as a double quote (so no string in src may
 * hold a quote), and compiles it (fvm_compile: checked, then the passes) when 'checked'. Any error is printed and
 * fails the test. The caller frees the program. */
static inline fvm_program *test_load(const char *name, const char *src, bool checked)
{
    char *s = strdup(src);
    assert_non_null(s);
    for (char *c = s; *c; c++)
        if (*c == '\'')
            *c = '"';
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

#endif
