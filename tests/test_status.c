/* test_status.c - unit tests for the diagnostics list: adding, placing at an instruction, formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/core/status.h"

static const fvm_loc AT = {"p.json", 3, 9, "/functions/main/body/0"};

/* The message of one error reported without a location and then placed at
 * AT for the op 'what'. */
static void placed(const char *msg, const char *what, const char *want)
{
    fvm_diag d = {0};
    fvm_diag_add(&d, FVM_ERR_TYPE, NULL, "%s", msg);
    fvm_diag_place_last(&d, &AT, what, FVM_ERR_RUNTIME);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.errs[0].msg, want);
    assert_int_equal(d.errs[0].code, FVM_ERR_RUNTIME);
    assert_string_equal(d.errs[0].loc.ptr, AT.ptr);
    assert_int_equal(d.errs[0].loc.line, 3);
    fvm_diag_clear(&d);
}

static void test_place_names_the_op_once(void **state)
{
    (void)state;
    /* no label: the op's name in front */
    placed("label 3 is outside the range [0, 3)", "softmax_cross_entropy",
           "softmax_cross_entropy: label 3 is outside the range [0, 3)");
    /* the op's own name, as a label or as the first word: kept */
    placed("scatter_add: index 7 is outside", "scatter_add", "scatter_add: index 7 is outside");
    placed("matmul inner dimensions differ: [2,3] and [2,3]", "matmul",
           "matmul inner dimensions differ: [2,3] and [2,3]");
    /* the label of the kernel or helper the op used: replaced by the op's name */
    placed("softmax_xent: label 3 is outside the range [0, 3)", "softmax_cross_entropy",
           "softmax_cross_entropy: label 3 is outside the range [0, 3)");
    placed("gather: index 5 (element 0 of the indices) is outside the range [0, 3) of axis 0", "embedding",
           "embedding: index 5 (element 0 of the indices) is outside the range [0, 3) of axis 0");
    placed("pool_grad: dy must have shape [N,OH,OW,C]", "max_pool_grad",
           "max_pool_grad: dy must have shape [N,OH,OW,C]");
    /* a longer name that starts with the op's is another label */
    placed("max_pool_grad: x", "max_pool", "max_pool: x");
    placed("max_poolish words", "max_pool", "max_pool: max_poolish words");
    /* not a label: a word followed by something else than ": " */
    placed("gather needs a tensor of rank >= 1", "scatter_add", "scatter_add: gather needs a tensor of rank >= 1");
    placed("Gather: capitalised", "gather", "gather: Gather: capitalised");
}

static void test_place_keeps_located_errors(void **state)
{
    (void)state;
    fvm_diag d = {0};
    const fvm_loc inner = {"p.json", 9, 1, "/functions/g/body/2"};
    fvm_diag_add(&d, FVM_ERR_TYPE, &inner, "gather: index 5 is outside");
    fvm_diag_place_last(&d, &AT, "call", FVM_ERR_RUNTIME);
    assert_string_equal(d.errs[0].msg, "gather: index 5 is outside");
    assert_int_equal(d.errs[0].code, FVM_ERR_TYPE);
    assert_string_equal(d.errs[0].loc.ptr, inner.ptr);
    /* FVM_OK keeps the code; no diag or no error is no change */
    fvm_diag_add(&d, FVM_ERR_TYPE, NULL, "reshape: too large");
    fvm_diag_place_last(&d, &AT, "reshape_like", FVM_OK);
    assert_string_equal(d.errs[1].msg, "reshape_like: too large");
    assert_int_equal(d.errs[1].code, FVM_ERR_TYPE);
    fvm_diag_place_last(NULL, &AT, "x", FVM_OK);
    fvm_diag_clear(&d);
    fvm_diag_place_last(&d, &AT, "x", FVM_OK);
    assert_int_equal(d.n, 0);
}

static void test_format(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_diag_add(&d, FVM_ERR_RUNTIME, &AT, "embedding: index %d is outside", 5);
    char *s = fvm_error_format(&d.errs[0]);
    assert_non_null(s);
    assert_string_equal(s, "p.json:3:9: /functions/main/body/0: embedding: index 5 is outside");
    free(s);
    fvm_diag_clear(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place_names_the_op_once),
        cmocka_unit_test(test_place_keeps_located_errors),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
