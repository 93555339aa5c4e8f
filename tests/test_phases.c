/* test_phases.c - fused client segments (vm/transform/phases.c, vm/exec/exec_segment.c) and the backends: which
 * instructions fuse, and that fused, unfused and threaded runs give the same bits and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../vm/transform/phases.h"
#include "test_util.h"

/* The program src (single quotes for double), loaded and checked. */
static fvm_program *load(const char *src)
{
    return test_load("test.json", src, true);
}

#define SQUARE "'sq': {'params': {'x': 'f32[]'}, 'body': [['y', 'mul', 'x', 'x']], 'result': 'y'}, "
#define PLUS "'plus': {'params': {'x': 'f32[]', 'b': 'f32[]'}, 'body': [['y', 'add', 'x', 'b']], 'result': 'y'}, "

/* Instruction names of segment k, space-separated. */
static void segment_names(const fvm_func *f, int k, char *buf, size_t n)
{
    buf[0] = 0;
    const fvm_segment *sg = &f->phases->segments[k];
    for (int j = 0; j < sg->n; j++) {
        strncat(buf, f->instrs[sg->instrs[j]].name, n - strlen(buf) - 1);
        if (j + 1 < sg->n)
            strncat(buf, " ", n - strlen(buf) - 1);
    }
}

static void test_what_fuses(void **state)
{
    (void)state;
    /* maps and zips feeding aggregations fuse; a list that leaves (the
     * result, or a later map that also needs an aggregate of it) does not */
    fvm_program *p = load("{'fedvm': 1, 'functions': {" SQUARE PLUS
                          "'main': {'params': {'x': '{f32[]}@CLIENTS', 'b': 'f32[]@SERVER'}, 'body': ["
                          "  ['q', 'federated_map', {'fn': 'sq'}, 'x'],"
                          "  ['s', 'federated_sum', 'q'],"
                          "  ['m', 'federated_max', 'q'],"
                          "  ['w', 'federated_weighted_mean', 'x', 'q'],"
                          "  ['bc', 'federated_broadcast', 'b'],"
                          "  ['p', 'federated_map', {'fn': 'plus'}, 'x', 'bc'],"
                          "  ['t', 'federated_sum', 'p'],"
                          "  ['r', 'federated_zip', 's', 'm', 'w', 't']], 'result': 'r'},"
                          "'keeps': {'params': {'x': '{f32[]}@CLIENTS'}, 'body': ["
                          "  ['q', 'federated_map', {'fn': 'sq'}, 'x'],"
                          "  ['s', 'federated_sum', 'q']], 'result': 'q'},"
                          "'twice': {'params': {'x': '{f32[]}@CLIENTS'}, 'body': ["
                          "  ['q', 'federated_map', {'fn': 'sq'}, 'x'],"
                          "  ['s', 'federated_sum', 'q'],"
                          "  ['bc', 'federated_broadcast', 's'],"
                          "  ['p', 'federated_map', {'fn': 'plus'}, 'q', 'bc'],"
                          "  ['t', 'federated_sum', 'p']], 'result': 't'}}}");
    char names[256];
    const fvm_func *f = fvm_program_func(p, "main");
    assert_non_null(f->phases);
    assert_int_equal(f->phases->nsegments, 2);
    segment_names(f, 0, names, sizeof names);
    assert_string_equal(names, "q s m w");
    segment_names(f, 1, names, sizeof names);
    assert_string_equal(names, "p t");
    assert_int_equal(f->phases->nsteps, 4); /* two segments, the broadcast, the final zip */
    assert_null(fvm_program_func(p, "keeps")->phases);
    assert_null(fvm_program_func(p, "twice")->phases); /* a second pass over q after its sum */
    fvm_program_free(p);
}

/* Runs fn over n clients x_i = first + i (and b) with cfg; the result. */
static fvm_value *run(const fvm_program *p, const char *fn, int n, float first, fvm_vm_config cfg, fvm_status *st,
                      fvm_diag *d)
{
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, &cfg, &vm, d), FVM_OK);
    fvm_value *x = fvm_value_list(FVM_V_CLIENTS, n);
    fvm_dims s = {0};
    for (int i = 0; i < n; i++) {
        fvm_tensor t;
        assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
        *(float *)fvm_tensor_data(&t) = first + 0.37f * (float)i;
        x->items[i] = fvm_value_tensor_take(&t);
    }
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    *(float *)fvm_tensor_data(&t) = 0.5f;
    fvm_value *b = fvm_value_tensor_take(&t), *args[2] = {x, b}, *res = NULL;
    *st = fvm_vm_call(vm, fvm_program_func(p, fn), args, &res, d);
    fvm_value_release(x);
    fvm_value_release(b);
    fvm_vm_free(vm);
    return res;
}

static void test_same_bits_every_way(void **state)
{
    (void)state;
    fvm_program *p = load("{'fedvm': 1, 'functions': {" SQUARE PLUS
                          "'main': {'params': {'x': '{f32[]}@CLIENTS', 'b': 'f32[]@SERVER'}, 'body': ["
                          "  ['q', 'federated_map', {'fn': 'sq'}, 'x'],"
                          "  ['z', 'federated_zip', 'x', 'q'],"
                          "  ['s', 'federated_sum', 'q'],"
                          "  ['mn', 'federated_mean', 'q'],"
                          "  ['w', 'federated_weighted_mean', 'x', 'q'],"
                          "  ['bc', 'federated_broadcast', 'b'],"
                          "  ['p', 'federated_map', {'fn': 'plus'}, 'x', 'bc'],"
                          "  ['lo', 'federated_min', 'p'],"
                          "  ['t', 'federated_sum', 'p'],"
                          "  ['r', 'federated_zip', 's', 'mn', 'w', 'lo', 't']], 'result': 'r'}}}");
    /* 1, 16 (one block), 17, 100, 1000 and 2500 clients (157 blocks: the
     * backends run them a chunk at a time, merged as each chunk ends) */
    const int counts[] = {1, 16, 17, 100, 1000, 2500};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        fvm_diag d = {0};
        fvm_status st;
        fvm_value *ref = run(p, "main", counts[c], 1.25f, (fvm_vm_config){.nclients = -1, .unfused = true}, &st, &d);
        assert_int_equal(st, FVM_OK);
        for (int k = 0; k < 4; k++) {
            fvm_backend *b = k ? fvm_backend_threads(k == 3 ? 4 : k) : NULL;
            fvm_value *got = run(p, "main", counts[c], 1.25f, (fvm_vm_config){.nclients = -1, .backend = b}, &st, &d);
            assert_int_equal(st, FVM_OK);
            if (!fvm_value_identical(ref, got))
                fail_msg("%d clients: configuration %d differs from the unfused run", counts[c], k);
            fvm_value_release(got);
            fvm_backend_free(b);
        }
        fvm_value_release(ref);
        fvm_diag_clear(&d);
    }
    fvm_program_free(p);
}

static void test_errors_every_way(void **state)
{
    (void)state;
    /* Clients whose value is out of range fail; every configuration reports
     * the lowest failing client's error, whatever the timing. */
    fvm_program *p = load("{'fedvm': 1, 'functions': {"
                          "'pick': {'params': {'x': 'f32[]'}, 'body': ["
                          "  ['i', 'cast', {'dtype': 'i32'}, 'x'],"
                          "  ['v', 'const', {'value': [1.0, 2.0, 3.0]}],"
                          "  ['y', 'gather', {'axis': 0}, 'v', 'i']], 'result': 'y'},"
                          "'main': {'params': {'x': '{f32[]}@CLIENTS', 'b': 'f32[]@SERVER'}, 'body': ["
                          "  ['q', 'federated_map', {'fn': 'pick'}, 'x'],"
                          "  ['s', 'federated_sum', 'q']], 'result': 's'}}}");
    for (int k = 0; k < 4; k++) {
        fvm_backend *b = k ? fvm_backend_threads(k == 3 ? 4 : k) : NULL;
        fvm_diag d = {0};
        fvm_status st;
        /* x_i = 0.37 i: indices 0..2 are fine, client 9 (3.33) is the first out of range */
        fvm_value *got = run(p, "main", 300, 0.0f, (fvm_vm_config){.nclients = -1, .backend = b}, &st, &d);
        assert_null(got);
        assert_int_equal(st, FVM_ERR_RUNTIME);
        assert_true(d.n >= 1);
        assert_non_null(strstr(d.errs[0].msg, "3"));
        char *first = strdup(d.errs[0].msg);
        fvm_diag_clear(&d);
        fvm_value *again = run(p, "main", 300, 0.0f, (fvm_vm_config){.nclients = -1, .unfused = true}, &st, &d);
        assert_null(again);
        assert_string_equal(first, d.errs[0].msg);
        free(first);
        fvm_diag_clear(&d);
        fvm_backend_free(b);
    }
    fvm_program_free(p);
}

static void test_late_error_every_way(void **state)
{
    (void)state;
    /* Integer division by zero where trunc(x_i) = 500: clients 1352 to 1354
     * of 3000 (x_i = 0.37 i), in a later chunk of blocks than the first on
     * every backend; each reports client 1352, the lowest. */
    fvm_program *p = load("{'fedvm': 1, 'functions': {"
                          "'late': {'params': {'x': 'f32[]'}, 'body': ["
                          "  ['i', 'cast', {'dtype': 'i32'}, 'x'],"
                          "  ['k', 'const', {'value': 500, 'dtype': 'i32'}],"
                          "  ['one', 'const', {'value': 1, 'dtype': 'i32'}],"
                          "  ['z', 'sub', 'i', 'k'],"
                          "  ['y', 'div', 'one', 'z']], 'result': 'y'},"
                          "'main': {'params': {'x': '{f32[]}@CLIENTS', 'b': 'f32[]@SERVER'}, 'body': ["
                          "  ['q', 'federated_map', {'fn': 'late'}, 'x'],"
                          "  ['s', 'federated_sum', 'q']], 'result': 's'}}}");
    for (int k = 0; k < 5; k++) {
        fvm_backend *b = k && k < 4 ? fvm_backend_threads(k == 3 ? 4 : k) : NULL;
        fvm_diag d = {0};
        fvm_status st;
        fvm_value *got =
            run(p, "main", 3000, 0.0f, (fvm_vm_config){.nclients = -1, .backend = b, .unfused = k == 4}, &st, &d);
        assert_null(got);
        assert_int_equal(st, FVM_ERR_RUNTIME);
        bool named = false;
        for (int e = 0; e < d.n; e++)
            named = named || strstr(d.errs[e].msg, "client 1352's");
        if (!named)
            fail_msg("configuration %d: no error names client 1352 (first: %s)", k, d.n ? d.errs[0].msg : "none");
        fvm_diag_clear(&d);
        fvm_backend_free(b);
    }
    fvm_program_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_what_fuses),
        cmocka_unit_test(test_same_bits_every_way),
        cmocka_unit_test(test_errors_every_way),
        cmocka_unit_test(test_late_error_every_way),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
