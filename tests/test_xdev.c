/* test_xdev.c - cross-device plans read back (format/xdev.c): a plan fedplan wrote opens, each
 * phase alone too (with the aggregation in stages, server.partial), and every way of bending its configuration is an error located in the plan.
 * Running the phases is tests/run_xdev.sh's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../format/xdev.h"
#include "../vm/fedvm.h"

static char *plan_text; /* the plan of tests/xdev/secure_counts.json */

static int setup(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_program *p = NULL;
    size_t len = 0;
    assert_int_equal(fvm_program_load("tests/xdev/secure_counts.json", &p, &d), FVM_OK);
    assert_int_equal(fvm_check(p, &d), FVM_OK);
    assert_int_equal(fvm_plan_cross_device(p, NULL, &plan_text, &len, &d), FVM_OK);
    assert_int_equal(strlen(plan_text), len);
    fvm_program_free(p);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(plan_text);
    return 0;
}

/* The plan with its one occurrence of 'from' replaced by 'to', opened for
 * 'phases'; the status, and the first error in *d. */
static fvm_status open_bent(const char *from, const char *to, unsigned phases, fvm_diag *d)
{
    const char *at = strstr(plan_text, from);
    assert_non_null(at);
    assert_null(strstr(at + 1, from));
    char path[] = "/tmp/fvm_test_xdev_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "%.*s%s%s", (int)(at - plan_text), plan_text, to, at + strlen(from));
    fclose(f);
    fvm_xdev_plan *plan = NULL;
    fvm_status s = fvm_xdev_open(path, phases, &plan, d);
    assert_true((s == FVM_OK) == (plan != NULL));
    if (plan)
        assert_int_equal(strlen(fvm_xdev_id(plan)), 64);
    fvm_xdev_close(plan);
    unlink(path);
    return s;
}

/* The bent plan is refused with message msg at pointer ptr. */
static void refused(const char *from, const char *to, unsigned phases, const char *ptr, const char *msg)
{
    fvm_diag d = {0};
    assert_int_not_equal(open_bent(from, to, phases, &d), FVM_OK);
    assert_true(d.n >= 1);
    if (strcmp(d.errs[0].msg, msg) || strcmp(d.errs[0].loc.ptr ? d.errs[0].loc.ptr : "", ptr))
        print_error("got %s: %s\n", d.errs[0].loc.ptr, d.errs[0].msg);
    assert_string_equal(d.errs[0].loc.ptr ? d.errs[0].loc.ptr : "", ptr);
    assert_string_equal(d.errs[0].msg, msg);
    assert_true(d.errs[0].loc.line > 0);
    fvm_diag_clear(&d);
}

static void test_open(void **state)
{
    (void)state;
    fvm_diag d = {0};
    assert_int_equal(open_bent("\"plan\": 2", "\"plan\": 2", FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &d), FVM_OK);
    /* each side reads only its own phase */
    assert_int_equal(open_bent("\"server\": {", "\"servers\": {", FVM_XDEV_CLIENT, &d), FVM_OK);
    assert_int_equal(open_bent("\"client\": {", "\"clients\": {", FVM_XDEV_SERVER, &d), FVM_OK);
    assert_int_equal(d.n, 0);
}

static void test_bent(void **state)
{
    (void)state;
    const unsigned both = FVM_XDEV_CLIENT | FVM_XDEV_SERVER;
    refused("\"plan\": 2", "\"plan\": \"2\"", both, "/plan", "the plan format version must be the integer 2, found a string");
    refused("\"kind\": \"cross-device\"", "\"kind\": \"beam\"", both, "/kind",
            "expected \"kind\": \"cross-device\", found beam");
    refused("\"server\": {", "\"servers\": {", both, "", "missing \"server\" (the server phase)");
    refused("\"work\": \"next.work\"", "\"work\": \"next.walk\"", FVM_XDEV_CLIENT, "/client/work",
            "no function 'next.walk' in the program of client");
    refused("\"param\": \"data\"", "\"param\": \"readings\"", FVM_XDEV_CLIENT, "/client/inputs/0/param",
            "input 0 is 'readings', but parameter 0 of 'next.work' is 'data'");
    refused("\"kind\": \"data\"", "\"kind\": \"file\"", FVM_XDEV_CLIENT, "/client/inputs/0/kind",
            "unknown kind of input 'file' (expected data or client_key)");
    refused("\"bitwidth\": 8,", "\"bitwidth\": 63,", FVM_XDEV_CLIENT, "/client/outputs/1",
            "secure sum 's0' needs a bit width from 1 to 62 over integer tensors");
    refused("\"name\": \"s0\",", "\"name\": \"s1\",", FVM_XDEV_CLIENT, "/client/outputs/1",
            "secure sum 's1' is not field 0 of the secure inputs that 'next.work' returns");
    refused("\"aggregation\": \"secure_sum\"", "\"aggregation\": \"sum\"", FVM_XDEV_CLIENT, "/client",
            "'next.work' returns 1 secure-sum inputs; the outputs list 0");
    refused("\"kind\": \"state\"", "\"kind\": \"round_key\"", FVM_XDEV_SERVER, "/server/inputs/0/param",
            "'state' receives a key, so it must be u32[2]");
    refused("\"result\": \"next.update\"", "\"result\": \"next.prepare\"", FVM_XDEV_SERVER, "/server",
            "the server's 'next.prepare' must take the inputs, the report and the secure sums and return "
            "<state, metrics>");
    refused("\"block\": 16", "\"block\": 8", FVM_XDEV_SERVER, "/server/partial/block",
            "blocks of 8 clients; fedvm aggregates blocks of 16");
    refused("\"partial\": {", "\"partials\": {", FVM_XDEV_SERVER, "/server",
            "missing \"partial\" (the aggregation in stages)");
    refused("\"merge\": \"next.merge\",\n      \"combine\"", "\"merge\": \"next.report\",\n      \"combine\"",
            FVM_XDEV_SERVER, "/server/partial",
            "the partial aggregate's functions must be: 'next.partial' the updates ({U}@CLIENTS) -> <acc, secure>; "
            "'next.report' (A, A) -> A; 'next.combine' (A@SERVER, {<acc, secure>}@CLIENTS) -> <report, secure>");
    refused("\"combine\": \"next.combine\"", "\"combine\": \"next.combined\"", FVM_XDEV_SERVER,
            "/server/partial/combine", "no function 'next.combined' in the program of server");
    refused("[\"@aggregate\", \"struct\"", "[\"@aggregate\", \"strukt\"", FVM_XDEV_SERVER,
            "/server/program/functions/next.aggregate/body/6/1", "unknown op 'strukt'; did you mean 'struct'?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open),
        cmocka_unit_test(test_bent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
