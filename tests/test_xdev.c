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

#include "../format/safetensors.h"
#include "../format/xdev.h"
#include "../vm/transform/plan_form.h"
#include "../format/xdev_run.h"
#include "../vm/fedvm.h"

static char *plan_text; /* the plan of tests/xdev/secure_counts.json */
static char *state_text; /* the plan of tests/client_state/counter.json: a state on each client */

static char *plan_of(const char *program)
{
    fvm_diag d = {0};
    fvm_program *p = NULL;
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(fvm_program_load(program, &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    assert_int_equal(fvm_plan_cross_device(p, NULL, &text, &len, &d), FVM_OK);
    assert_int_equal(strlen(text), len);
    fvm_program_free(p);
    return text;
}

static int setup(void **state)
{
    (void)state;
    plan_text = plan_of("tests/xdev/secure_counts.json");
    state_text = plan_of("tests/client_state/counter.json");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(plan_text);
    free(state_text);
    return 0;
}

/* The plan text with its one occurrence of 'from' replaced by 'to', opened
 * for 'phases'; the status, and the first error in *d. */
static fvm_status open_bent_text(const char *text, const char *from, const char *to, unsigned phases, fvm_diag *d)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    assert_null(strstr(at + 1, from));
    char path[] = "/tmp/fvm_test_xdev_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
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

static fvm_status open_bent(const char *from, const char *to, unsigned phases, fvm_diag *d)
{
    return open_bent_text(plan_text, from, to, phases, d);
}

/* The bent plan text is refused with message msg at pointer ptr. */
static void refused_text(const char *text, const char *from, const char *to, unsigned phases, const char *ptr,
                         const char *msg)
{
    fvm_diag d = {0};
    assert_int_not_equal(open_bent_text(text, from, to, phases, &d), FVM_OK);
    assert_true(d.n >= 1);
    if (strcmp(d.errs[0].msg, msg) || strcmp(d.errs[0].loc.ptr ? d.errs[0].loc.ptr : "", ptr))
        print_error("got %s: %s\n", d.errs[0].loc.ptr, d.errs[0].msg);
    assert_string_equal(d.errs[0].loc.ptr ? d.errs[0].loc.ptr : "", ptr);
    assert_string_equal(d.errs[0].msg, msg);
    assert_true(d.errs[0].loc.line > 0);
    fvm_diag_clear(&d);
}

static void refused(const char *from, const char *to, unsigned phases, const char *ptr, const char *msg)
{
    refused_text(plan_text, from, to, phases, ptr, msg);
}

static void test_open(void **state)
{
    (void)state;
    fvm_diag d = {0};
    assert_int_equal(open_bent("\"plan\": 2", "\"plan\": 2", FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &d), FVM_OK);
    /* each side reads only its own phase */
    assert_int_equal(open_bent("\"server\": {", "\"servers\": {", FVM_XDEV_CLIENT, &d), FVM_OK);
    assert_int_equal(open_bent("\"client\": {", "\"clients\": {", FVM_XDEV_SERVER, &d), FVM_OK);
    /* a secure sum without its op (plans written before there were three) has a bit width */
    assert_int_equal(open_bent("\"op\": \"federated_secure_sum_bitwidth\",", "", FVM_XDEV_CLIENT, &d), FVM_OK);
    assert_int_equal(d.n, 0);
}

static void test_bent(void **state)
{
    (void)state;
    const unsigned both = FVM_XDEV_CLIENT | FVM_XDEV_SERVER;
    refused("\"plan\": 2", "\"plan\": \"2\"", both, "/plan",
            "the plan format version must be the integer 2, found a string");
    refused("\"kind\": \"cross-device\"", "\"kind\": \"beam\"", both, "/kind",
            "expected \"kind\": \"cross-device\", found beam");
    refused("\"server\": {", "\"servers\": {", both, "", "missing \"server\" (the server phase)");
    refused("\"work\": \"next.work\"", "\"work\": \"next.walk\"", FVM_XDEV_CLIENT, "/client/work",
            "no function 'next.walk' in the program of client");
    refused("\"param\": \"data\"", "\"param\": \"readings\"", FVM_XDEV_CLIENT, "/client/inputs/0/param",
            "input 0 is 'readings', but parameter 0 of 'next.work' is 'data'");
    refused("\"kind\": \"data\"", "\"kind\": \"file\"", FVM_XDEV_CLIENT, "/client/inputs/0/kind",
            "unknown kind of input 'file' (expected data, client_key, client_index or client_state)");
    refused("\"bitwidth\": 8,", "\"bitwidth\": 63,", FVM_XDEV_CLIENT, "/client/outputs/1",
            "secure sum 's0' needs a bit width from 1 to the width of its narrowest integer dtype (32) over integer "
            "tensors");
    refused("\"op\": \"federated_secure_sum_bitwidth\"", "\"op\": \"federated_sum\"", FVM_XDEV_CLIENT,
            "/client/outputs/1/op",
            "secure sum 's0' must name its intrinsic: federated_secure_sum_bitwidth, federated_secure_modular_sum or "
            "federated_secure_sum");
    refused("\"op\": \"federated_secure_sum_bitwidth\",\n        \"bitwidth\": 8,\n        \"modulus\": 256",
            "\"op\": \"federated_secure_modular_sum\", \"modulus\": 2147483649", FVM_XDEV_CLIENT, "/client/outputs/1",
            "secure sum 's0' needs a modulus from 1 to 2147483648 (the largest value of its narrowest integer dtype, "
            "plus one) over integer tensors");
    refused("\"op\": \"federated_secure_sum_bitwidth\"", "\"op\": \"federated_secure_sum\", \"max_input\": -1",
            FVM_XDEV_CLIENT, "/client/outputs/1",
            "secure sum 's0' needs a max_input from 0 to 2147483647 (the largest value of its narrowest integer dtype) "
            "over integer tensors");
    refused("\"name\": \"s0\",", "\"name\": \"s1\",", FVM_XDEV_CLIENT, "/client/outputs/1",
            "secure sum 's1' is not field 0 of the secure inputs that 'next.work' returns");
    refused("\"aggregation\": \"secure_sum\"", "\"aggregation\": \"sum\"", FVM_XDEV_CLIENT,
            "/client/outputs/1/aggregation",
            "'s0' is a secure sum's input in 'next.work' (its field 'secure'), so its aggregation is secure_sum");
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

/* A configuration that does not fit its programs: every member that
 * describes a program's types is checked against them. */
static void test_unfit(void **state)
{
    (void)state;
    const unsigned both = FVM_XDEV_CLIENT | FVM_XDEV_SERVER;
    const char *unfit = " (a configuration that does not fit the plan's programs)";
    char msg[512];
#define MSG(text) (snprintf(msg, sizeof msg, "%s%s", text, unfit), msg)
    /* an output's shape, an output's dtype, no outputs at all */
    refused(
        "\"modulus\": 256,\n        \"tensors\": [\n          {\"name\": \"secure.s0\", \"dtype\": \"I32\", \"shape\": [2]}",
        "\"modulus\": 256,\n        \"tensors\": [\n          {\"name\": \"secure.s0\", \"dtype\": \"I32\", \"shape\": [3]}",
        FVM_XDEV_CLIENT, "/client/outputs/1/tensors/0",
        MSG("the plan lists 'secure.s0' I32 [3] here, but the secure sum 's0' has 'secure.s0' I32 [2] in the "
            "program"));
    refused("{\"name\": \"updates.u0\", \"dtype\": \"I32\", \"shape\": []}",
            "{\"name\": \"updates.u0\", \"dtype\": \"F32\", \"shape\": []}", FVM_XDEV_CLIENT,
            "/client/outputs/0/tensors/0",
            MSG("the plan lists 'updates.u0' F32 [] here, but the update 'u0' has 'updates.u0' I32 [] in the program"));
    refused("{\"name\": \"updates.u0\", \"dtype\": \"I32\", \"shape\": []}", "", FVM_XDEV_CLIENT,
            "/client/outputs/0/tensors",
            "the plan lists 0 tensors, but the update 'u0' has 1 in the program (the first missing: 'updates.u0' I32 "
            "[]; a configuration that does not fit the plan's programs)");
    refused("\"outputs\": [", "\"outputs\": [], \"outputs_before\": [", FVM_XDEV_CLIENT, "/client/outputs",
            MSG("the plan lists 0 outputs, but 'next.work' returns 1 updates and 1 secure-sum inputs"));
    /* the inputs' types */
    refused("\"type\": \"{i32[2]*}@CLIENTS\"", "\"type\": \"{i32[3]*}@CLIENTS\"", FVM_XDEV_CLIENT,
            "/client/inputs/0/type",
            MSG("the type of input 'data' is {i32[3]*}@CLIENTS in the plan, but {i32[2]*}@CLIENTS in its program"));
    refused("\"type\": \"i32[2]@SERVER\"", "\"type\": \"i32[3]@SERVER\"", FVM_XDEV_SERVER, "/server/inputs/0/type",
            MSG("the type of input 'state' is i32[3]@SERVER in the plan, but i32[2]@SERVER in its program"));
    /* the state: its type, its tensors; the metrics; a partial's tensors */
    refused("\"type\": \"i32[2]\",", "\"type\": \"i64[2]\",", FVM_XDEV_SERVER, "/server/state/type",
            MSG("the state's type is i64[2] in the plan, but i32[2] in its program"));
    refused(
        "{\"name\": \"value\", \"dtype\": \"I32\", \"shape\": [2]}",
        "{\"name\": \"value\", \"dtype\": \"I32\", \"shape\": [2]}, {\"name\": \"extra\", \"dtype\": \"I32\", \"shape\": [2]}",
        FVM_XDEV_SERVER, "/server/state/tensors/1",
        MSG("the plan lists 'extra' I32 [2] here, but the state has only 1 tensor in the program"));
    refused("{\"type\": \"<readings=i32[]>\"}", "{\"type\": \"<readings=i64[]>\"}", FVM_XDEV_SERVER,
            "/server/metrics/type",
            MSG("the metrics' type is <readings=i64[]> in the plan, but <readings=i32[]> in its program"));
    refused(
        "{\"name\": \"acc.a0\", \"dtype\": \"I32\", \"shape\": []}",
        "{\"name\": \"acc.a0\", \"dtype\": \"F64\", \"shape\": []}", FVM_XDEV_SERVER, "/server/partial/tensors/0",
        MSG("the plan lists 'acc.a0' F64 [] here, but a block's partial aggregate has 'acc.a0' I32 [] in the program"));
    /* the server's functions disagree on the state */
    refused("[\"zero\", \"const\", {\"value\": 0, \"dtype\": \"i32\", \"shape\": [2]}]",
            "[\"zero\", \"const\", {\"value\": 0, \"dtype\": \"i32\", \"shape\": [3]}]", both, "/server",
            "the server's state must have one type: 'next.initialize' makes i32[3], 'next.prepare' takes i32[2] and "
            "'next.update' makes i32[2] (and takes the inputs 'next.prepare' takes)");
#undef MSG
}

/* A plan's programs read no other file: an include, even of a file that
 * exists, is refused, and nothing of that file is echoed. */
static void test_no_include(void **state)
{
    (void)state;
    const char *msg = "\"include\" is refused here: this program must be self-contained (no other file is read)";
    refused("\"metrics\": {\"type\": \"<readings=i32[]>\"},\n    \"program\": {",
            "\"metrics\": {\"type\": \"<readings=i32[]>\"},\n    \"program\": {\"include\": [\"/etc/passwd\"], ",
            FVM_XDEV_SERVER, "/server/program/include", msg);
    refused("    ],\n    \"program\": {",
            "    ],\n    \"program\": {\"include\": [\"tests/xdev/secure_counts.json\"], ", FVM_XDEV_CLIENT,
            "/client/program/include", msg);
    fvm_diag d = {0};
    assert_int_not_equal(open_bent("    ],\n    \"program\": {",
                                   "    ],\n    \"program\": {\"include\": [\"/etc/passwd\"], ", FVM_XDEV_CLIENT, &d),
                         FVM_OK);
    for (int i = 0; i < d.n; i++)
        assert_null(strstr(d.errs[i].msg, "root"));
    fvm_diag_clear(&d);
}

/* The plan parsed from memory (what a fuzzer calls) is the plan read from
 * a file: the same id, the SHA-256 of the bytes. */
static void test_parse_memory(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_xdev_plan *a = NULL, *b = NULL;
    assert_int_equal(
        fvm_xdev_parse("mem.json", plan_text, strlen(plan_text), FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &a, &d), FVM_OK);
    char path[] = "/tmp/fvm_test_xdev_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, plan_text, strlen(plan_text)), (ssize_t)strlen(plan_text));
    close(fd);
    assert_int_equal(fvm_xdev_open(path, FVM_XDEV_CLIENT, &b, &d), FVM_OK);
    assert_string_equal(fvm_xdev_id(a), fvm_xdev_id(b));
    fvm_xdev_close(b);
    unlink(path);
    /* bytes that are no plan: an error, no crash, no plan */
    static const char *const junk[] = {
        "", "{", "[]", "{\"plan\": 2}", "\xff\xfe", "{\"plan\": 2, \"kind\": \"cross-device\"}"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        assert_int_not_equal(
            fvm_xdev_parse("junk.json", junk[i], strlen(junk[i]), FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &b, &d), FVM_OK);
        assert_null(b);
        assert_true(d.n >= 1);
        fvm_diag_clear(&d);
    }
    fvm_xdev_close(a);
}

/* An update checked from memory as 'fedvm server aggregate' checks each:
 * its plan, round, client and tensors. */
static void test_update_parse(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_xdev_plan *pl = NULL;
    assert_int_equal(
        fvm_xdev_parse("plan.json", plan_text, strlen(plan_text), FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &pl, &d), FVM_OK);
    fvm_arena a = {0};
    const fvm_type *t = NULL;
    assert_int_equal(fvm_type_parse(&a, "<updates=<u0=i32[]>,secure=<s0=i32[2]>>", NULL, NULL, &t, &d), FVM_OK);
    fvm_value *v = fvm_value_list(FVM_V_STRUCT, 2);
    fvm_tensor x;
    fvm_dims scalar = {0}, two = {.rank = 1, .d = {2}};
    v->items[0] = fvm_value_list(FVM_V_STRUCT, 1);
    v->items[1] = fvm_value_list(FVM_V_STRUCT, 1);
    assert_int_equal(fvm_tensor_alloc(&x, FVM_DTYPE_I32, &scalar, &d), FVM_OK);
    v->items[0]->items[0] = fvm_value_tensor_take(&x);
    assert_int_equal(fvm_tensor_alloc(&x, FVM_DTYPE_I32, &two, &d), FVM_OK);
    v->items[1]->items[0] = fvm_value_tensor_take(&x);
    char path[] = "/tmp/fvm_test_xdev_update_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    const char *meta[] = {"fedvm.kind",  "update", "fedvm.plan",   fvm_xdev_id(pl),
                          "fedvm.round", "2",      "fedvm.client", "3"};
    assert_int_equal(fvm_safetensors_save(path, v, t, 4, meta, &d), FVM_OK);
    FILE *f = fopen(path, "rb");
    unsigned char bytes[4096];
    size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    unlink(path);
    const int64_t clients[] = {1, 3, 4};
    int64_t c = -1;
    assert_int_equal(fvm_xdev_update_parse(pl, "u.safetensors", bytes, len, 2, clients, 3, &c, &d), FVM_OK);
    assert_int_equal(c, 3);
    /* another round, a client the round did not select, a byte of the header changed */
    assert_int_equal(fvm_xdev_update_parse(pl, "u.safetensors", bytes, len, 3, clients, 3, &c, &d), FVM_ERR_USAGE);
    assert_non_null(strstr(d.errs[0].msg, "this is an update of round 2, and the round being aggregated is 3"));
    fvm_diag_clear(&d);
    assert_int_equal(fvm_xdev_update_parse(pl, "u.safetensors", bytes, len, 2, clients, 1, &c, &d), FVM_ERR_USAGE);
    assert_non_null(strstr(d.errs[0].msg, "client 3, which round 2 did not select"));
    fvm_diag_clear(&d);
    for (size_t i = 0; i < len; i++) {
        unsigned char keep = bytes[i];
        bytes[i] ^= 0x5a;
        fvm_status s = fvm_xdev_update_parse(pl, "u.safetensors", bytes, len, 2, clients, 3, &c, &d);
        if (s != FVM_OK)
            assert_true(d.n >= 1 && d.errs[0].loc.file && !strcmp(d.errs[0].loc.file, "u.safetensors"));
        fvm_diag_clear(&d);
        bytes[i] = keep;
    }
    fvm_value_release(v);
    fvm_arena_free(&a);
    fvm_xdev_close(pl);
}

/* A plan that keeps a state on each client: client.state, the input of
 * kind client_state and work's field client_state go together, and each
 * is checked against the client program; the server's num_clients. */
static void test_client_state(void **state)
{
    (void)state;
    const unsigned both = FVM_XDEV_CLIENT | FVM_XDEV_SERVER;
    fvm_diag d = {0};
    fvm_xdev_plan *pl = NULL;
    assert_int_equal(fvm_xdev_parse("plan.json", state_text, strlen(state_text), both, &pl, &d), FVM_OK);
    assert_true(fvm_xdev_keeps_client_state(pl));
    fvm_xdev_close(pl);
    assert_int_equal(fvm_xdev_parse("plan.json", plan_text, strlen(plan_text), both, &pl, &d), FVM_OK);
    assert_false(fvm_xdev_keeps_client_state(pl));
    fvm_xdev_close(pl);
    /* the server reads its phase alone, whatever the clients keep */
    const char *st = "\"state\": {\n      \"input\"", *sts = "\"states\": {\n      \"input\"";
    assert_int_equal(open_bent_text(state_text, st, sts, FVM_XDEV_SERVER, &d), FVM_OK);
    refused_text(state_text, st, sts, FVM_XDEV_CLIENT, "/client", "missing \"state\" (the client's state)");
    refused_text(state_text, "\"kind\": \"client_state\"", "\"kind\": \"data\"", FVM_XDEV_CLIENT, "/client/state",
                 "the plan describes a client state, but no input of the client phase is of kind client_state");
    refused_text(state_text, "\"input\": \"client_states\"", "\"input\": \"client_indices\"", FVM_XDEV_CLIENT,
                 "/client/state/input", "the client's state is the input 'client_states', not 'client_indices'");
    refused_text(state_text, "\"output\": \"client_state\"", "\"output\": \"updates\"", FVM_XDEV_CLIENT,
                 "/client/state/output",
                 "the client's new state is the field 'client_state' of what 'next.work' returns, not 'updates'");
    refused_text(state_text, "\"initialize\": \"next.initialize_client\"", "\"initialize\": \"next.work\"",
                 FVM_XDEV_CLIENT, "/client/state",
                 "the client's 'next.work' must take nothing or a key (u32[2]) and return a client's state, "
                 "<count=i32[],noise=f32[1000]>");
    refused_text(state_text, "\"type\": \"<count=i32[],noise=f32[1000]>\",\n      \"tensors\"",
                 "\"type\": \"<count=i32[],noise=f32[100]>\",\n      \"tensors\"", FVM_XDEV_CLIENT,
                 "/client/state/type",
                 "the client's state's type is <count=i32[],noise=f32[100]> in the plan, but "
                 "<count=i32[],noise=f32[1000]> in its program (a configuration that does not fit the plan's "
                 "programs)");
    refused_text(state_text, "{\"name\": \"noise\", \"dtype\": \"F32\", \"shape\": [1000]}",
                 "{\"name\": \"noise\", \"dtype\": \"F64\", \"shape\": [1000]}", FVM_XDEV_CLIENT,
                 "/client/state/tensors/1",
                 "the plan lists 'noise' F64 [1000] here, but the client's state has 'noise' F32 [1000] in the "
                 "program (a configuration that does not fit the plan's programs)");
    refused_text(state_text, "\"kind\": \"client_index\"", "\"kind\": \"client_key\"", FVM_XDEV_CLIENT,
                 "/client/inputs/1/param", "'client_indices' receives a key, so it must be u32[2]");
    refused_text(state_text, "\"kind\": \"num_clients\"", "\"kind\": \"state\"", FVM_XDEV_SERVER, "/server",
                 "the server's inputs are the state, then the round key and the number of clients (each at most "
                 "once), and they are all of 'next.prepare''s parameters");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open),         cmocka_unit_test(test_bent),         cmocka_unit_test(test_unfit),
        cmocka_unit_test(test_no_include),   cmocka_unit_test(test_parse_memory), cmocka_unit_test(test_update_parse),
        cmocka_unit_test(test_client_state),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
