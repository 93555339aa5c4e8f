/* test_check.c - unit tests for the checker: inferred result types, errors in one pass, recursion, liveness. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "test_util.h"

/* Loads and checks text; *out is the program (NULL if it could not be parsed). */
static fvm_status load_check(const char *text, fvm_program **out, fvm_diag *d)
{
    *out = NULL;
    fvm_status ls = fvm_program_load_text("test.json", text, strlen(text), out, d);
    if (!*out)
        return ls;
    fvm_status cs = fvm_compile(*out, d);
    return ls ? ls : cs;
}

typedef struct tcase {
    const char *funcs, *params, *body, *want;
} tcase;

/* Every case must check and give main the result type 'want' (canonical, no aliases). */
static void run_type_cases(const tcase *cases, size_t n)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        char *text = test_program_text(cases[i].funcs ? cases[i].funcs : "", cases[i].params, cases[i].body);
        fvm_diag d = {0};
        fvm_program *p = NULL;
        fvm_status s = load_check(text, &p, &d);
        if (s != FVM_OK) {
            print_error("case %zu: %s\n", i, text);
            test_print_errors(&d, "  ");
            failures++;
        } else {
            char buf[512];
            const fvm_func *m = fvm_program_func(p, "main");
            const char *got = fvm_type_format(m->result_type, false, buf, sizeof buf);
            if (strcmp(got, cases[i].want)) {
                print_error("case %zu: %s\n  result %s, expected %s\n", i, text, got, cases[i].want);
                failures++;
            }
        }
        fvm_diag_clear(&d);
        fvm_program_free(p);
        free(text);
    }
    if (failures)
        fail_msg("%d of %zu cases failed", failures, n);
}

#define CASES(...) \
    do { \
        static const tcase cases_[] = {__VA_ARGS__}; \
        run_type_cases(cases_, sizeof cases_ / sizeof *cases_); \
    } while (0)

/* ---- inferred types ------------------------------------------------------------ */

static void test_elementwise_types(void **state)
{
    (void)state;
    CASES({0, "{'x': 'f32[2,3]', 'y': 'f32[3]'}", "[['r', 'add', 'x', 'y']]", "f32[2,3]"},
          {0, "{'x': 'f32[3]', 'y': 'f32[2,3]'}", "[['r', 'sub', 'x', 'y']]", "f32[2,3]"},
          {0, "{'x': 'f32[4,1]', 'y': 'f32[3]'}", "[['r', 'mul', 'x', 'y']]", "f32[4,3]"},
          {0, "{'x': 'f32[?,3]', 'y': 'f32[1]'}", "[['r', 'div', 'x', 'y']]", "f32[?,3]"},
          {0, "{'x': 'f32[?,3]', 'y': 'f32[5,1]'}", "[['r', 'div', 'x', 'y']]", "f32[5,3]"},
          {0, "{'x': 'i32[2,1,5]', 'y': 'i32[3,1]'}", "[['r', 'maximum', 'x', 'y']]", "i32[2,3,5]"},
          {0, "{'x': 'u32[]', 'y': 'u32[7]'}", "[['r', 'minimum', 'x', 'y']]", "u32[7]"},
          {0, "{'x': 'f64[]', 'y': 'f64[5]'}", "[['r', 'pow', 'x', 'y']]", "f64[5]"},
          {0, "{'x': 'f32[2,3]', 'y': 'f32[3]'}", "[['r', 'lt', 'x', 'y']]", "bool[2,3]"},
          {0, "{'x': 'bool[3]', 'y': 'bool[3]'}", "[['r', 'eq', 'x', 'y']]", "bool[3]"},
          {0, "{'x': 'bool[3]', 'y': 'bool[]'}", "[['r', 'and', 'x', 'y']]", "bool[3]"},
          {0, "{'p': 'bool[2,1]', 'a': 'f32[3]', 'b': 'f32[]'}", "[['r', 'select', 'p', 'a', 'b']]", "f32[2,3]"},
          {0, "{'x': 'i32[3]'}", "[['r', 'cast', {'dtype': 'f64'}, 'x']]", "f64[3]"},
          {0, "{'x': 'f32[2]'}", "[['r', 'exp', 'x']]", "f32[2]"},
          {0, "{'x': 'i64[2]'}", "[['r', 'neg', 'x']]", "i64[2]"},
          {0, "{'x': 'bool[2]'}", "[['r', 'not', 'x']]", "bool[2]"},
          {0, "{}", "[['r', 'iota', {'shape': [3, 4]}]]", "i32[3,4]"},
          {0, "{}", "[['r', 'iota', {'shape': [3, 4], 'dtype': 'f32', 'axis': -1}]]", "f32[3,4]"},
          {0, "{}", "[['r', 'const', {'value': [[1, 2], [3, 4]]}]]", "i32[2,2]"},
          {0, "{}", "[['r', 'const', {'value': 1.5}]]", "f32[]"},
          {0, "{}", "[['r', 'const', {'value': 2, 'dtype': 'f64', 'shape': [3]}]]", "f64[3]"},
          {0, "{}", "[['r', 'const', {'value': [true, false]}]]", "bool[2]"}, );
}

static void test_matmul_types(void **state)
{
    (void)state;
    CASES({0, "{'a': 'f32[2,3]', 'b': 'f32[3,4]'}", "[['r', 'matmul', 'a', 'b']]", "f32[2,4]"},
          {0, "{'a': 'f32[3,2]', 'b': 'f32[3,4]'}", "[['r', 'matmul', {'transpose_a': true}, 'a', 'b']]", "f32[2,4]"},
          {0, "{'a': 'f32[2,3]', 'b': 'f32[4,3]'}", "[['r', 'matmul', {'transpose_b': true}, 'a', 'b']]", "f32[2,4]"},
          {0, "{'a': 'f32[3,2]', 'b': 'f32[4,3]'}",
           "[['r', 'matmul', {'transpose_a': true, 'transpose_b': true}, 'a', 'b']]", "f32[2,4]"},
          {0, "{'a': 'f32[3]', 'b': 'f32[3,4]'}", "[['r', 'matmul', 'a', 'b']]", "f32[4]"},
          {0, "{'a': 'f32[2,3]', 'b': 'f32[3]'}", "[['r', 'matmul', 'a', 'b']]", "f32[2]"},
          {0, "{'a': 'f64[3]', 'b': 'f64[3]'}", "[['r', 'matmul', 'a', 'b']]", "f64[]"},
          {0, "{'a': 'f32[?,3]', 'b': 'f32[3,5]'}", "[['r', 'matmul', 'a', 'b']]", "f32[?,5]"},
          {0, "{'a': 'f32[2,?]', 'b': 'f32[7,5]'}", "[['r', 'matmul', 'a', 'b']]", "f32[2,5]"},
          {0, "{'a': 'i32[2,2]', 'b': 'i32[2,6]'}", "[['r', 'matmul', 'a', 'b']]", "i32[2,6]"}, );
}

static void test_reduce_types(void **state)
{
    (void)state;
    CASES({0, "{'x': 'f32[2,3,4]'}", "[['r', 'sum', 'x']]", "f32[]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'sum', {'axes': []}, 'x']]", "f32[2,3,4]"}, /* none, as NumPy's axis=() */
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'sum', {'axes': [1]}, 'x']]", "f32[2,4]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'sum', {'axes': [1], 'keepdims': true}, 'x']]", "f32[2,1,4]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'mean', {'axes': [-1, 0]}, 'x']]", "f32[3]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'max', {'keepdims': true}, 'x']]", "f32[1,1,1]"},
          {0, "{'x': 'i64[2,3,4]'}", "[['r', 'min', {'axes': [2]}, 'x']]", "i64[2,3]"},
          {0, "{'x': 'f32[?,3]'}", "[['r', 'sum', {'axes': [1]}, 'x']]", "f32[?]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'argmax', 'x']]", "i64[2,3]"},
          {0, "{'x': 'i32[2,3,4]'}", "[['r', 'argmax', {'axis': 0}, 'x']]", "i64[3,4]"},
          {0, "{'x': 'f32[5]'}", "[['r', 'argmax', 'x']]", "i64[]"}, );
}

static void test_shape_op_types(void **state)
{
    (void)state;
    CASES({0, "{'x': 'f32[2,3,4]'}", "[['r', 'reshape', {'shape': [-1, 4]}, 'x']]", "f32[6,4]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'reshape', {'shape': [4, -1]}, 'x']]", "f32[4,6]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'reshape', {'shape': [2, -1, 3]}, 'x']]", "f32[2,4,3]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'reshape', {'shape': [24]}, 'x']]", "f32[24]"},
          {0, "{'x': 'f32[?,4]'}", "[['r', 'reshape', {'shape': [-1, 2]}, 'x']]", "f32[?,2]"},
          {0, "{'x': 'f32[1]'}", "[['r', 'reshape', {'shape': []}, 'x']]", "f32[]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'transpose', 'x']]", "f32[4,3,2]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'transpose', {'perm': [1, 0, 2]}, 'x']]", "f32[3,2,4]"},
          {0, "{'x': 'f32[2,3,4]'}", "[['r', 'transpose', {'perm': [-1, 0, 1]}, 'x']]", "f32[4,2,3]"},
          {0, "{'x': 'f32[3]'}", "[['r', 'broadcast_to', {'shape': [2, 3]}, 'x']]", "f32[2,3]"},
          {0, "{'x': 'f32[2,1]'}", "[['r', 'broadcast_to', {'shape': [4, 2, 5]}, 'x']]", "f32[4,2,5]"},
          /* slices: Python's rules, size = ceil((stop - start) / step) after clamping */
          {0, "{'x': 'f32[10]'}", "[['r', 'slice', {'start': [-8], 'stop': [-1], 'step': [3]}, 'x']]", "f32[3]"},
          {0, "{'x': 'f32[5,6]'}", "[['r', 'slice', {'start': [1, -3], 'step': [2]}, 'x']]", "f32[2,3]"},
          {0, "{'x': 'f32[4]'}", "[['r', 'slice', {'start': [-100]}, 'x']]", "f32[4]"},
          {0, "{'x': 'f32[4]'}", "[['r', 'slice', {'start': [7]}, 'x']]", "f32[0]"},
          {0, "{'x': 'f32[10]'}", "[['r', 'slice', {'stop': [-12]}, 'x']]", "f32[0]"},
          {0, "{'x': 'f32[10]'}", "[['r', 'slice', {'start': [6], 'stop': [2]}, 'x']]", "f32[0]"},
          {0, "{'x': 'f32[9]'}", "[['r', 'slice', {'step': [4]}, 'x']]", "f32[3]"},
          {0, "{'x': 'f32[?,3]'}", "[['r', 'slice', {'start': [1, 1]}, 'x']]", "f32[?,2]"},
          {0, "{'a': 'f32[2,3]', 'b': 'f32[4,3]'}", "[['r', 'concat', 'a', 'b']]", "f32[6,3]"},
          {0, "{'a': 'f32[2,3]', 'b': 'f32[2,5]'}", "[['r', 'concat', {'axis': -1}, 'a', 'b']]", "f32[2,8]"},
          {0, "{'a': 'f32[?,3]', 'b': 'f32[2,3]'}", "[['r', 'concat', 'a', 'b']]", "f32[?,3]"},
          {0, "{'a': 'f32[2,?]', 'b': 'f32[4,3]'}", "[['r', 'concat', 'a', 'b']]", "f32[6,3]"},
          {0, "{'a': 'i32[1]', 'b': 'i32[2]', 'c': 'i32[3]'}", "[['r', 'concat', 'a', 'b', 'c']]", "i32[6]"},
          {0, "{'x': 'f32[5,3]', 'i': 'i32[2,4]'}", "[['r', 'gather', 'x', 'i']]", "f32[2,4,3]"},
          {0, "{'x': 'f32[5,3]', 'i': 'i64[7]'}", "[['r', 'gather', {'axis': 1}, 'x', 'i']]", "f32[5,7]"},
          {0, "{'x': 'f32[5,3]', 'i': 'i32[]'}", "[['r', 'gather', 'x', 'i']]", "f32[3]"},
          /* dim: an i32 scalar for any dtype, '?' dims too; cumsum keeps the type */
          {0, "{'x': 'bool[?,3]'}", "[['r', 'dim', {'axis': 0}, 'x']]", "i32[]"},
          {0, "{'x': 'u8[2,?]'}", "[['r', 'dim', {'axis': -1}, 'x']]", "i32[]"},
          {0, "{'x': 'u8[2,?]'}", "[['r', 'cumsum', {'axis': -1, 'reverse': true}, 'x']]", "u8[2,?]"},
          {0, "{'x': 'f64[4]'}", "[['r', 'cumsum', {'axis': 0}, 'x']]", "f64[4]"},
          /* one_hot: a last axis of n, f32 unless dtype says otherwise */
          {0, "{'i': 'i32[?,5]'}", "[['r', 'one_hot', {'n': 10}, 'i']]", "f32[?,5,10]"},
          {0, "{'i': 'u8[]'}", "[['r', 'one_hot', {'n': 3, 'dtype': 'bool'}, 'i']]", "bool[3]"},
          {0, "{'i': 'i64[2]'}", "[['r', 'one_hot', {'n': 0, 'dtype': 'i64'}, 'i']]", "i64[2,0]"},
          /* clip: the three shapes broadcast */
          {0, "{'x': 'f32[3]', 'lo': 'f32[2,1]', 'hi': 'f32[]'}", "[['r', 'clip', 'x', 'lo', 'hi']]", "f32[2,3]"},
          {0, "{'x': 'i32[?]', 'lo': 'i32[]', 'hi': 'i32[4]'}", "[['r', 'clip', 'x', 'lo', 'hi']]", "i32[4]"}, );
}

static void test_sequence_types(void **state)
{
    (void)state;
#define SEQ_FNS \
    "'total': {'params': {'v': 'f32[3]'}, 'body': [['r', 'sum', 'v']], 'result': 'r'}, " \
    "'acc': {'params': {'a': 'f32[]', 'v': 'f32[3]'}, 'body': [['s', 'sum', 'v'], ['r', 'add', 'a', 's']], " \
    "'result': 'r'}"
    CASES({0, "{'s': 'f32[3]*'}", "[['r', 'batch', {'size': 4}, 's']]", "f32[?,3]*"},
          {0, "{'s': 'f32[3]*'}", "[['r', 'batch', {'size': 4, 'drop_remainder': true}, 's']]", "f32[4,3]*"},
          {0, "{'s': 'f32[3]*'}", "[['r', 'batch', {'size': 4, 'drop_remainder': false}, 's']]", "f32[?,3]*"},
          {0, "{'s': '<x=f32[2],y=i32[]>*'}", "[['r', 'batch', {'size': 5, 'drop_remainder': true}, 's']]",
           "<x=f32[5,2],y=i32[5]>*"},
          {0, "{'s': '<x=f32[2],y=i32[]>*'}", "[['r', 'batch', {'size': 5}, 's']]", "<x=f32[?,2],y=i32[?]>*"},
          {0, "{'s': 'i32[]*'}", "[['b', 'batch', {'size': 2}, 's'], ['r', 'batch', {'size': 3}, 'b']]", "i32[?,?]*"},
          {0, "{'s': 'f32[3]*'}", "[['r', 'sequence_length', 's']]", "i32[]"},
          {0, "{'s': '<a=f32[2],b=i32[]>*'}", "[['r', 'sequence_sum', 's']]", "<a=f32[2],b=i32[]>"},
          {SEQ_FNS, "{'s': 'f32[3]*'}", "[['r', 'sequence_map', {'fn': 'total'}, 's']]", "f32[]*"},
          {SEQ_FNS, "{'s': 'f32[3]*', 'z': 'f32[]'}", "[['r', 'sequence_reduce', {'fn': 'acc'}, 's', 'z']]", "f32[]"},
          {0, "{'s': '<x=f32[2],y=i32[]>*'}", "[['r', 'sequence_take', {'n': 3}, 's']]", "<x=f32[2],y=i32[]>*"},
          {0, "{'s': 'f32[3]**'}", "[['r', 'sequence_skip', {'n': 0}, 's']]", "f32[3]**"},
          {SEQ_FNS
           ", 'big': {'params': {'v': 'f32[3]', 'k': 'f32[]'}, 'body': [['t', 'sum', 'v'], ['r', 'gt', 't', 'k']], "
           "'result': 'r'}",
           "{'s': 'f32[3]*', 'k': 'f32[]'}", "[['r', 'sequence_filter', {'fn': 'big'}, 's', 'k']]", "f32[3]*"}, );
}

static void test_struct_types(void **state)
{
    (void)state;
    CASES({0, "{'x': 'f32[2]', 'y': 'i32[]'}", "[['r', 'struct', {'names': ['a', 'b']}, 'x', 'y']]",
           "<a=f32[2],b=i32[]>"},
          {0, "{'x': 'f32[2]', 'y': 'i32[]'}", "[['r', 'struct', 'x', 'y']]", "<f32[2],i32[]>"},
          {0, "{}", "[['r', 'struct']]", "<>"},
          {0, "{'x': 'f32[2]', 'y': 'i32[]'}",
           "[['s', 'struct', {'names': ['a', 'b']}, 'x', 'y'], ['r', 'field', {'name': 'b'}, 's']]", "i32[]"},
          {0, "{'x': 'f32[2]', 'y': 'i32[]'}", "[['s', 'struct', 'x', 'y'], ['r', 'field', {'index': 0}, 's']]",
           "f32[2]"},
          {0, "{'s': '<p=<q=f64[4]>,r=f32[]>'}",
           "[['t', 'field', {'name': 'p'}, 's'], ['r', 'field', {'name': 'q'}, 't']]", "f64[4]"},
          {0, "{'x': 'f32[]@SERVER', 'y': '{i32[]}@CLIENTS'}", "[['r', 'struct', 'x', 'y']]",
           "<f32[]@SERVER,{i32[]}@CLIENTS>"},
          {0, "{'s': '<a=f32[]@SERVER,b={i32[]}@CLIENTS>'}", "[['r', 'field', {'name': 'b'}, 's']]",
           "{i32[]}@CLIENTS"}, );
}

static void test_lifted_types(void **state)
{
    (void)state;
    CASES({0, "{'s': '<a=f32[2],b=f32[]>', 'k': 'f32[]'}", "[['r', 'add', 's', 'k']]", "<a=f32[2],b=f32[]>"},
          {0, "{'s': '<a=f32[2],b=f32[]>', 'k': 'f32[]'}", "[['r', 'mul', 'k', 's']]", "<a=f32[2],b=f32[]>"},
          {0, "{'s': '<a=f32[2],b=f32[]>'}", "[['r', 'sub', 's', 's']]", "<a=f32[2],b=f32[]>"},
          {0, "{'s': '<a=f32[2],b=f32[]>', 't': '<a=f32[3,2],b=f32[4]>'}", "[['r', 'add', 's', 't']]",
           "<a=f32[3,2],b=f32[4]>"},
          {0, "{'s': '<p=<q=f32[2]>,r=f32[]>', 'k': 'f32[2]'}", "[['r', 'mul', 's', 'k']]", "<p=<q=f32[2]>,r=f32[2]>"},
          {0, "{'s': '<a=f32[2],b=f32[]>'}", "[['r', 'neg', 's']]", "<a=f32[2],b=f32[]>"},
          {0, "{'s': '<a=f32[2],b=i32[]>'}", "[['r', 'cast', {'dtype': 'f64'}, 's']]", "<a=f64[2],b=f64[]>"},
          {0, "{'s': '<a=f32[2],b=f32[]>'}", "[['r', 'lt', 's', 's']]", "<a=bool[2],b=bool[]>"},
          {0, "{'s': '<f32[2],<i32[]>>'}", "[['r', 'zeros_like', 's']]", "<f32[2],<i32[]>>"},
          {0, "{'s': '<a=f32[2],b=i32[]>'}", "[['r', 'ones_like', 's']]", "<a=f32[2],b=i32[]>"},
          {0, "{'p': 'bool[]', 's': '<a=f32[2],b=f32[]>', 't': '<a=f32[2],b=f32[]>'}",
           "[['r', 'select', 'p', 's', 't']]", "<a=f32[2],b=f32[]>"}, );
}

static void test_random_types(void **state)
{
    (void)state;
    CASES({0, "{'seed': 'i32[]'}", "[['r', 'random_key', 'seed']]", "u32[2]"},
          {0, "{'seed': 'i64[]'}", "[['r', 'random_key', 'seed']]", "u32[2]"},
          {0, "{'k': 'u32[2]'}", "[['r', 'random_split', 'k']]", "u32[2,2]"},
          {0, "{'k': 'u32[2]'}", "[['r', 'random_split', {'n': 5}, 'k']]", "u32[5,2]"},
          {0, "{'k': 'u32[2]', 'i': 'i32[]'}", "[['r', 'random_fold_in', 'k', 'i']]", "u32[2]"},
          {0, "{'k': 'u32[2]'}", "[['r', 'random_uniform', {'shape': [2, 3]}, 'k']]", "f32[2,3]"},
          {0, "{'k': 'u32[2]'}", "[['r', 'random_uniform', {'shape': [2, 3], 'dtype': 'f64'}, 'k']]", "f64[2,3]"},
          {0, "{'k': 'u32[2]'}", "[['r', 'random_normal', {'shape': []}, 'k']]", "f32[]"},
          {0, "{'k': 'u32[2]'}",
           "[['ks', 'random_split', {'n': 3}, 'k'], ['i', 'const', {'value': 1}], ['k1', 'gather', 'ks', 'i'], "
           "['r', 'random_normal', {'shape': [4]}, 'k1']]",
           "f32[4]"}, );
}

/* Helper functions for the federated cases. */
#define FED_FNS \
    "'total': {'params': {'v': 'f32[3]'}, 'body': [['r', 'sum', 'v']], 'result': 'r'}, " \
    "'plus': {'params': {'a': 'f32[3]', 'b': 'f32[3]'}, 'body': [['r', 'add', 'a', 'b']], 'result': 'r'}, " \
    "'seven': {'params': {}, 'body': [['r', 'const', {'value': 7.0}]], 'result': 'r'}, " \
    "'count': {'params': {'n': 'i32[]', 'v': 'f32[]'}, 'body': [['one', 'const', {'value': 1}], " \
    "  ['r', 'add', 'n', 'one']], 'result': 'r'}, " \
    "'merge': {'params': {'a': 'i32[]', 'b': 'i32[]'}, 'body': [['r', 'add', 'a', 'b']], 'result': 'r'}, " \
    "'report': {'params': {'n': 'i32[]'}, 'body': [['r', 'cast', {'dtype': 'f64'}, 'n']], 'result': 'r'}"

/* Literals take their operands' dtype and broadcast as scalars; a destructuring binds fields (the result names
 * the last one here), placed ones too. */
static void test_literal_and_fields_types(void **state)
{
    (void)state;
    CASES({"", "{'x': 'i64[2,3]'}", "[['r', 'mul', 'x', 2]]", "i64[2,3]"},
          {"", "{'x': 'f64[3]'}", "[['r', 'sub', 1, 'x']]", "f64[3]"},
          {"", "{'x': 'u8[2]'}", "[['r', 'lt', 'x', 255]]", "bool[2]"},
          {"", "{'x': 'f32[2]', 'p': 'bool[2]'}", "[['r', 'select', 'p', 0.5, 'x']]", "f32[2]"},
          {"", "{'m': '<w=f32[2],b=f32[]>'}", "[['r', 'mul', 'm', 0.5]]", "<w=f32[2],b=f32[]>"},
          {"", "{'m': '<w=f32[2],b=f32[]>'}", "[['r', 'clip_by_global_norm', 'm', 1]]", "<w=f32[2],b=f32[]>"},
          {"", "{'s': '<a=f32[],b=i32[2]>'}", "[[['b', 'r'], 'fields', {'names': ['a', 'b']}, 's']]", "i32[2]"},
          {"", "{'s': '<f32[],u8[2]>'}", "[[['q', 'r'], 'fields', 's']]", "u8[2]"},
          {"", "{'s': '{<a=f32[],b=i32[2]>}@CLIENTS'}", "[[['b', 'a'], 'fields', 's'], ['r', 'federated_sum', 'b']]",
           "i32[2]@SERVER"},
          {"", "{'s': '<a=f32[],b=i32[2]>@SERVER'}", "[[['r'], 'fields', {'names': ['b']}, 's']]", "i32[2]@SERVER"}, );
}

static void test_federated_types(void **state)
{
    (void)state;
    CASES({FED_FNS, "{'x': 'f32[2]'}", "[['r', 'federated_value', {'placement': 'SERVER'}, 'x']]", "f32[2]@SERVER"},
          {FED_FNS, "{'x': 'f32[2]'}", "[['r', 'federated_value', {'placement': 'CLIENTS'}, 'x']]", "f32[2]@CLIENTS"},
          {FED_FNS, "{}", "[['r', 'federated_eval', {'fn': 'seven', 'placement': 'CLIENTS'}]]", "{f32[]}@CLIENTS"},
          {FED_FNS, "{}", "[['r', 'federated_eval', {'fn': 'seven', 'placement': 'SERVER'}]]", "f32[]@SERVER"},
          {FED_FNS, "{'x': 'f32[2]@SERVER'}", "[['r', 'federated_broadcast', 'x']]", "f32[2]@CLIENTS"},
          {FED_FNS, "{'x': 'f32[3]@CLIENTS', 'y': 'f32[3]@CLIENTS'}",
           "[['r', 'federated_map_all_equal', {'fn': 'plus'}, 'x', 'y']]", "f32[3]@CLIENTS"},
          {FED_FNS, "{'x': 'f32[3]@CLIENTS', 'y': '{f32[3]}@CLIENTS'}",
           "[['r', 'federated_map', {'fn': 'plus'}, 'x', 'x']]", "{f32[3]}@CLIENTS"},
          /* federated_map runs fn once per client: one result per client, also
         * when the argument is all-equal */
          {FED_FNS, "{'x': '{f32[3]}@CLIENTS'}", "[['r', 'federated_map', {'fn': 'total'}, 'x']]", "{f32[]}@CLIENTS"},
          {FED_FNS, "{'x': 'f32[3]@CLIENTS'}", "[['r', 'federated_map', {'fn': 'total'}, 'x']]", "{f32[]}@CLIENTS"},
          {FED_FNS, "{'x': 'f32[3]@SERVER'}",
           "[['b', 'federated_broadcast', 'x'], ['r', 'federated_map', {'fn': 'total'}, 'b']]", "{f32[]}@CLIENTS"},
          {FED_FNS, "{'x': '{f32[3]}@CLIENTS', 'y': 'f32[3]@CLIENTS'}",
           "[['r', 'federated_map', {'fn': 'plus'}, 'x', 'y']]", "{f32[3]}@CLIENTS"},
          {FED_FNS, "{'x': '{f32[?]}@CLIENTS'}", "[['r', 'federated_map', {'fn': 'total'}, 'x']]", "{f32[]}@CLIENTS"},
          {FED_FNS, "{'x': 'f32[3]@SERVER'}", "[['r', 'federated_apply', {'fn': 'total'}, 'x']]", "f32[]@SERVER"},
          {FED_FNS, "{'x': 'f32[3]@SERVER', 'y': 'f32[3]@SERVER'}",
           "[['r', 'federated_apply', {'fn': 'plus'}, 'x', 'y']]", "f32[3]@SERVER"},
          /* zips */
          {FED_FNS, "{'x': '{f32[]}@CLIENTS', 'y': '{i32[]}@CLIENTS'}", "[['r', 'federated_zip', 'x', 'y']]",
           "{<f32[],i32[]>}@CLIENTS"},
          {FED_FNS, "{'x': '{f32[]}@CLIENTS', 'y': '{i32[]}@CLIENTS'}",
           "[['r', 'federated_zip', {'names': ['a', 'b']}, 'x', 'y']]", "{<a=f32[],b=i32[]>}@CLIENTS"},
          {FED_FNS, "{'x': 'f32[]@CLIENTS', 'y': 'i32[]@CLIENTS'}", "[['r', 'federated_zip', 'x', 'y']]",
           "<f32[],i32[]>@CLIENTS"},
          {FED_FNS, "{'x': 'f32[]@CLIENTS', 'y': '{i32[]}@CLIENTS'}", "[['r', 'federated_zip', 'x', 'y']]",
           "{<f32[],i32[]>}@CLIENTS"},
          {FED_FNS, "{'x': 'f32[]@SERVER', 'y': 'i32[]@SERVER'}", "[['r', 'federated_zip', 'x', 'y']]",
           "<f32[],i32[]>@SERVER"},
          {FED_FNS, "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_zip', 'x']]", "{<f32[]>}@CLIENTS"},
          /* aggregations */
          {FED_FNS, "{'x': '{f32[2]}@CLIENTS'}", "[['r', 'federated_sum', 'x']]", "f32[2]@SERVER"},
          {FED_FNS, "{'x': 'f32[2]@CLIENTS'}", "[['r', 'federated_sum', 'x']]", "f32[2]@SERVER"},
          {FED_FNS, "{'x': '{<a=f32[2],n=i32[]>}@CLIENTS'}", "[['r', 'federated_sum', 'x']]",
           "<a=f32[2],n=i32[]>@SERVER"},
          {FED_FNS, "{'x': '{f64[2]}@CLIENTS'}", "[['r', 'federated_mean', 'x']]", "f64[2]@SERVER"},
          {FED_FNS, "{'x': '{f32[2]}@CLIENTS', 'w': '{f32[]}@CLIENTS'}", "[['r', 'federated_weighted_mean', 'x', 'w']]",
           "f32[2]@SERVER"},
          {FED_FNS, "{'x': '{i32[3]}@CLIENTS'}", "[['r', 'federated_min', 'x']]", "i32[3]@SERVER"},
          {FED_FNS, "{'x': '{u32[3]}@CLIENTS'}", "[['r', 'federated_max', 'x']]", "u32[3]@SERVER"},
          {FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
           "[['zero', 'const', {'value': 0}], "
           " ['r', 'federated_aggregate', {'accumulate': 'count', 'merge': 'merge', 'report': 'report'}, 'x', 'zero']]",
           "f64[]@SERVER"},
          {FED_FNS, "{'x': '{f32[]}@CLIENTS'}",
           "[['zero', 'const', {'value': 0}], "
           " ['r', 'federated_aggregate', {'accumulate': 'count', 'merge': 'merge'}, 'x', 'zero']]",
           "i32[]@SERVER"},
          {FED_FNS, "{'x': '{i32[2]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 8}, 'x']]",
           "i32[2]@SERVER"},
          {FED_FNS, "{'x': '{u32[2]}@CLIENTS'}", "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 32}, 'x']]",
           "u32[2]@SERVER"},
          {FED_FNS, "{'x': '{<a=i64[],b=i32[2]>}@CLIENTS'}",
           "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 31}, 'x']]", "<a=i64[],b=i32[2]>@SERVER"},
          {FED_FNS, "{'x': '{<a=i64[],b=u32[2]>}@CLIENTS'}",
           "[['r', 'federated_secure_modular_sum', {'modulus': 4294967296}, 'x']]", "<a=i64[],b=u32[2]>@SERVER"},
          {FED_FNS, "{'x': '{u8[3]}@CLIENTS'}", "[['r', 'federated_secure_sum', {'max_input': 255}, 'x']]",
           "u8[3]@SERVER"},
          {FED_FNS, "{'x': 'i64[]@CLIENTS'}", "[['r', 'federated_secure_sum', 'x']]", "i64[]@SERVER"}, );
}

/* ---- errors ----------------------------------------------------------------------------- */

typedef struct want_err {
    fvm_status code;
    const char *ptr;
    const char *text; /* a piece of the message */
} want_err;

/* Loads and checks text (taken over and freed); the errors must be exactly 'want', in order. */
static void expect_errors(char *text, const want_err *want, int n)
{
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_status s = load_check(text, &p, &d);
    bool good = s != FVM_OK && d.n == n;
    for (int i = 0; good && i < n; i++)
        good = d.errs[i].code == want[i].code && d.errs[i].loc.ptr && !strcmp(d.errs[i].loc.ptr, want[i].ptr) &&
               strstr(d.errs[i].msg, want[i].text) && d.errs[i].loc.line > 0 &&
               !strcmp(d.errs[i].loc.file, "test.json");
    if (!good) {
        print_error("program: %s\ngot %d errors (status %d):\n", text, d.n, (int)s);
        test_print_errors(&d, "  ");
        print_error("expected %d:\n", n);
        for (int i = 0; i < n; i++)
            print_error("  [%d] %s: ...%s...\n", (int)want[i].code, want[i].ptr, want[i].text);
    }
    fvm_diag_clear(&d);
    fvm_program_free(p);
    free(text);
    if (!good)
        fail_msg("errors differ");
}

#define EXPECT_ERRORS(text, ...) \
    do { \
        static const want_err w_[] = {__VA_ARGS__}; \
        expect_errors(text, w_, (int)(sizeof w_ / sizeof *w_)); \
    } while (0)

static void test_errors_in_one_pass(void **state)
{
    (void)state;
    /* Three independent mistakes: an undefined argument, a matmul whose inner
     * dims differ, an unknown attribute. All three are reported, in order. */
    char *text = test_program_text("", "{'x': 'f32[2,3]'}",
                                   "[['a', 'add', 'x', 'nope'], "
                                   " ['b', 'matmul', 'x', 'x'], "
                                   " ['c', 'sum', {'axs': [1]}, 'x'], "
                                   " ['r', 'neg', 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_NAME, "/functions/main/body/0/3", "nope"},
                  {FVM_ERR_TYPE, "/functions/main/body/1", "inner"},
                  {FVM_ERR_FORMAT, "/functions/main/body/2/2/axs", "axes"});

    /* Mistakes in two functions and in a type string (found by the loader)
     * are reported together; a use of a failed instruction is not reported
     * again. */
    text = test_program_text(
        "'f': {'params': {'v': 'f32[?'}, 'body': [['w', 'neg', 'v']], 'result': 'w'}, "
        "'g': {'params': {'v': 'i32[2]'}, 'body': [['w', 'exp', 'v'], ['u', 'neg', 'w']], 'result': 'u'}",
        "{'x': 'f32[2]@SERVER'}", "[['y', 'add', 'x', 'x'], ['r', 'neg', 'y']]");
    EXPECT_ERRORS(text, {FVM_ERR_SYNTAX, "/functions/f/params/v", "f32[?"},
                  {FVM_ERR_TYPE, "/functions/g/body/0", "float"},
                  {FVM_ERR_PLACEMENT, "/functions/main/body/0/2", "federated_map"});
}

static void test_error_locations(void **state)
{
    (void)state;
    char *text;
    /* an aggregation of a server value: at the argument */
    text = test_program_text("", "{'x': 'f32[]@SERVER'}", "[['r', 'federated_sum', 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_PLACEMENT, "/functions/main/body/0/2", "CLIENTS"});
    /* shapes that do not broadcast: at the instruction */
    text = test_program_text("", "{'x': 'f32[2,3]', 'y': 'f32[4]'}", "[['r', 'add', 'x', 'y']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0", "broadcast"});
    /* a bitwidth too wide for i32: at the attributes */
    text = test_program_text("", "{'x': '{i32[]}@CLIENTS'}",
                             "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 33}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "between 1 and 32"});
    /* a federated function run per client */
    text = test_program_text(
        "'h': {'params': {'v': 'f32[]'}, 'body': [['w', 'federated_value', {'placement': 'SERVER'}, 'v']], "
        "'result': 'w'}",
        "{'x': '{f32[]}@CLIENTS'}", "[['r', 'federated_map', {'fn': 'h'}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_PLACEMENT, "/functions/main/body/0/2", "local"});
    /* a field of an all-equal client value, and of a placed tensor */
    text = test_program_text("", "{'x': '<a=f32[]>@CLIENTS'}", "[['r', 'field', {'name': 'a'}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_PLACEMENT, "/functions/main/body/0/3", "before federated_broadcast"});
    text = test_program_text("", "{'x': 'f32[2]@SERVER'}", "[['r', 'field', {'name': 'a'}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/3", "expected a struct, found f32[2]@SERVER"});
    /* mean of integers */
    text = test_program_text("", "{'x': '{i32[]}@CLIENTS'}", "[['r', 'federated_mean', 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "float"});
}

static void test_secure_sum_bitwidth_bound(void **state)
{
    (void)state;
    /* The narrowest leaf bounds the bitwidth: its width (8 for u8, 32 for i32
     * and u32, 64 for i64), wherever the leaf sits in the struct. */
    char *text = test_program_text("", "{'x': '{<a=i64[],b=<u32[2]>>}@CLIENTS'}",
                                   "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 33}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "32"});
    /* a struct of 64 i64 leaves and one i32 leaf: the i32 leaf bounds the
     * bitwidth to 32 whether it comes first or last */
    char members[2048] = "";
    for (int i = 0; i < 64; i++)
        strcat(members, "i64[],");
    char params[2200];
    snprintf(params, sizeof params, "{'x': '{<i32[],%.*s>}@CLIENTS'}", (int)strlen(members) - 1, members);
    text = test_program_text("", params, "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 40}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "between 1 and 32"});
    snprintf(params, sizeof params, "{'x': '{<%si32[]>}@CLIENTS'}", members);
    text = test_program_text("", params, "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 40}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "between 1 and 32"});
}

static void test_map_all_equal_errors(void **state)
{
    (void)state;
    /* one value per client, or a server value, where an all-equal one is wanted: at that argument */
    char *text = test_program_text(FED_FNS, "{'x': 'f32[3]@CLIENTS', 'y': '{f32[3]}@CLIENTS'}",
                                   "[['r', 'federated_map_all_equal', {'fn': 'plus'}, 'x', 'y']]");
    EXPECT_ERRORS(text, {FVM_ERR_PLACEMENT, "/functions/main/body/0/4",
                         "'y' is {f32[3]}@CLIENTS, one value per client: map it with federated_map"});
    text = test_program_text(FED_FNS, "{'x': 'f32[3]@SERVER'}",
                             "[['r', 'federated_map_all_equal', {'fn': 'total'}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_PLACEMENT, "/functions/main/body/0/3", "CLIENTS"});
}

static void test_secure_sum_bounds(void **state)
{
    (void)state;
    /* a modulus up to the narrowest leaf's largest value plus one (i32: 2^31), a max_input up to that value */
    char *text = test_program_text("", "{'x': '{<a=i64[],b=i32[]>}@CLIENTS'}",
                                   "[['r', 'federated_secure_modular_sum', {'modulus': 2147483649}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "modulus must be at most 2147483648"});
    text = test_program_text("", "{'x': '{u32[]}@CLIENTS'}",
                             "[['r', 'federated_secure_sum', {'max_input': 4294967296}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "max_input must be at most 4294967295"});
    text = test_program_text("", "{'x': '{i32[]}@CLIENTS'}",
                             "[['r', 'federated_secure_modular_sum', {'modulus': 0}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/modulus", "an integer >= 1, found 0"});
    text = test_program_text("", "{'x': '{f64[]}@CLIENTS'}", "[['r', 'federated_secure_sum', 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "integers"});
}

static void test_shape_errors_at_attributes(void **state)
{
    (void)state;
    /* Errors in what an attribute says point at the attributes object (as
     * every rule that reports through FVM_RLOC_ATTRS does). */
    char *text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'sum', {'axes': [5]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "axis 5"});
    text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'reshape', {'shape': [4, -1]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "reshape"});
    text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'transpose', {'perm': [0, 0]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "perm"});
}

/* Attribute values outside their domain (vm/ir/attrs.def, vm/ir/op_attrs.def) are
 * refused by the decoder, located at the value (or at the entry of a list at
 * fault) with what was expected; the type rules never see them. */
static void test_attribute_domains(void **state)
{
    (void)state;
    char *text;
    text = test_program_text("", "{'x': 'f32[1,4,4,1]'}",
                             "[['r', 'max_pool', {'window': [2, 2], 'padding': 'same'}, 'x']]");
    EXPECT_ERRORS(
        text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/padding", "must be \"SAME\" or \"VALID\", found \"same\""});
    text = test_program_text("", "{'x': 'f32[1,4,4,1]'}", "[['r', 'avg_pool', {'window': [2, 2, 1]}, 'x']]");
    EXPECT_ERRORS(text,
                  {FVM_ERR_FORMAT, "/functions/main/body/0/2/window", "a list of 2 integers >= 1, found a list of 3"});
    text = test_program_text("", "{'x': 'f32[1,4,4,1]'}", "[['r', 'avg_pool', {'window': [2, 0]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/window/1", "entry 1 is 0"});
    text = test_program_text("", "{'x': '{i32[]}@CLIENTS'}",
                             "[['r', 'federated_secure_sum_bitwidth', {'bitwidth': 0}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/bitwidth", "from 1 to 64, found 0"});
    /* an op's own domain: n of random_split is 1 to 2^24, of fori 0 to 2^31-1 */
    text = test_program_text("", "{'k': 'u32[2]'}", "[['r', 'random_split', {'n': 0}, 'k']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/n", "from 1 to 16777216, found 0"});
    text = test_program_text("'step': {'params': {'i': 'i32[]', 'v': 'f32[]'}, 'result': 'v'}", "{'x': 'f32[]'}",
                             "[['r', 'fori', {'fn': 'step', 'n': 2147483648}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/n", "from 0 to 2147483647"});
    text = test_program_text("", "{'k': 'u32[2]'}", "[['r', 'random_normal', {'shape': [2], 'dtype': 'i32'}, 'k']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/dtype", "f32 or f64, found \"i32\""});
    text = test_program_text("", "{'x': 'f32[4]', 'k': 'u32[2]'}", "[['r', 'dropout', {'rate': -0.5}, 'x', 'k']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/rate", ">= 0 and < 1, found -0.5"});
    text = test_program_text("", "{'x': 'f32[4]', 'g': 'f32[4]', 'b': 'f32[4]'}",
                             "[['r', 'layer_norm', {'epsilon': 0}, 'x', 'g', 'b']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/epsilon", "a number > 0, found 0"});
    /* not an integer; and one error per attribute, each at its value */
    text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'slice', {'step': [1, 2.5], 'start': [0.5]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/step/1", "integers >= 1; entry 1 is 2.5"},
                  {FVM_ERR_FORMAT, "/functions/main/body/0/2/start/0", "entry 0 is 0.5"});
}

/* An integer written as a real with a zero fraction is that integer, in JSON
 * and in YAML: attributes, the format version, integer constants. */
static void test_integers_as_reals(void **state)
{
    (void)state;
    CASES({0, "{'x': 'f32[2,3]'}", "[['r', 'sum', {'axes': [1.0]}, 'x']]", "f32[2]"},
          {0, "{'x': 'f32[2,3]'}", "[['r', 'sum', {'axes': [-1.0], 'keepdims': true}, 'x']]", "f32[2,1]"},
          {0, "{'k': 'u32[2]'}", "[['r', 'random_split', {'n': 3.0}, 'k']]", "u32[3,2]"},
          {0, "{}", "[['r', 'iota', {'shape': [2e0, 3.0], 'axis': 1.0}]]", "i32[2,3]"},
          {0, "{}", "[['r', 'const', {'value': [1.0, -0.0, 1e2], 'dtype': 'i64'}]]", "i64[3]"}, );
    const char *yaml = "fedvm: 1.0\n"
                       "functions:\n"
                       "  main:\n"
                       "    params: {x: 'f32[2,3]'}\n"
                       "    body:\n"
                       "      - [r, sum, {axes: [0.0]}, x]\n"
                       "    result: r\n";
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_status s = fvm_program_load_text("test.yaml", yaml, strlen(yaml), &p, &d);
    if (s == FVM_OK)
        s = fvm_compile(p, &d);
    if (s != FVM_OK)
        test_print_errors(&d, "  ");
    assert_int_equal(s, FVM_OK);
    char buf[64];
    assert_string_equal(fvm_type_format(fvm_program_func(p, "main")->result_type, false, buf, sizeof buf), "f32[3]");
    fvm_program_free(p);
    fvm_diag_clear(&d);
    /* Reals outside int64 are not integers; -2^63 is (and is then no axis of a rank-2 tensor). */
    char *text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'sum', {'axes': [9223372036854775808.0]}, 'x']]");
    EXPECT_ERRORS(text,
                  {FVM_ERR_FORMAT, "/functions/main/body/0/2/axes/0", "integers; entry 0 is 9.223372036854776e+18"});
    text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'sum', {'axes': [-9223372036854775808.0]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_TYPE, "/functions/main/body/0/2", "axis -9223372036854775808"});
    text = test_program_text("", "{'x': 'f32[2,3]'}", "[['r', 'sum', {'axes': [1e300]}, 'x']]");
    EXPECT_ERRORS(text, {FVM_ERR_FORMAT, "/functions/main/body/0/2/axes/0", "entry 0 is 1e+300"});
}

static void test_recursion(void **state)
{
    (void)state;
    char *text;
    /* direct */
    text = test_json("{'fedvm': 1, 'functions': {"
                     "'f': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'f'}, 'x']], 'result': 'y'}}}");
    EXPECT_ERRORS(text, {FVM_ERR_CYCLE, "/functions/f/body/0/2/fn", "recursion is not allowed: f -> f"});
    /* direct, through a conditional's branch */
    text = test_json("{'fedvm': 1, 'functions': {"
                     "'id': {'params': {'x': 'f32[]'}, 'body': [], 'result': 'x'}, "
                     "'f': {'params': {'p': 'bool[]', 'x': 'f32[]'}, "
                     "      'body': [['y', 'cond', {'then': 'id', 'else': 'f'}, 'p', 'x']], 'result': 'y'}}}");
    EXPECT_ERRORS(text, {FVM_ERR_CYCLE, "/functions/f/body/0/2/else", "f -> f"});
    /* mutual: a -> b -> a, found while checking b's call; main calling a adds
     * no error of its own */
    text = test_json("{'fedvm': 1, 'functions': {"
                     "'a': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'b'}, 'x']], 'result': 'y'}, "
                     "'b': {'params': {'x': 'f32[]'}, 'body': [['y', 'neg', 'x'], ['z', 'call', {'fn': 'a'}, 'y']], "
                     "      'result': 'z'}, "
                     "'main': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'a'}, 'x']], 'result': 'y'}}}");
    EXPECT_ERRORS(text, {FVM_ERR_CYCLE, "/functions/b/body/1/2/fn", "recursion is not allowed: a -> b -> a"});
    /* a longer cycle entered from main: the chain starts at the repeated function */
    text = test_json("{'fedvm': 1, 'functions': {"
                     "'main': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'a'}, 'x']], 'result': 'y'}, "
                     "'a': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'b'}, 'x']], 'result': 'y'}, "
                     "'b': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'c'}, 'x']], 'result': 'y'}, "
                     "'c': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'a'}, 'x']], 'result': 'y'}}}");
    EXPECT_ERRORS(text, {FVM_ERR_CYCLE, "/functions/c/body/0/2/fn", "a -> b -> c -> a"});

    /* Calling one function twice, or from two places, is no recursion. */
    text = test_json("{'fedvm': 1, 'functions': {"
                     "'sq': {'params': {'x': 'f32[]'}, 'body': [['y', 'mul', 'x', 'x']], 'result': 'y'}, "
                     "'quad': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'sq'}, 'x'], "
                     "         ['z', 'call', {'fn': 'sq'}, 'y']], 'result': 'z'}, "
                     "'main': {'params': {'x': 'f32[]'}, 'body': [['y', 'call', {'fn': 'quad'}, 'x'], "
                     "         ['r', 'call', {'fn': 'sq'}, 'y']], 'result': 'r'}}}");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(load_check(text, &p, &d), FVM_OK);
    assert_int_equal(d.n, 0);
    fvm_program_free(p);
    free(text);
}

/* ---- liveness ------------------------------------------------------------------------------ */

/* Every slot but the result's is released exactly once, never before its
 * last use; the result's never. */
static void check_release_lists(const fvm_func *f)
{
    int *count = calloc((size_t)f->nslots + 1, sizeof *count);
    int *at = calloc((size_t)f->nslots + 1, sizeof *at);
    assert_true(count && at);
    for (int k = 0; k < f->nparam_release; k++) {
        int s = f->param_release[k];
        assert_true(s >= 0 && s < f->nparams);
        count[s]++;
        at[s] = -1;
    }
    for (int i = 0; i < f->ninstrs; i++)
        for (int k = 0; k < f->instrs[i].nrelease; k++) {
            int s = f->instrs[i].release[k];
            assert_true(s >= 0 && s < f->nslots);
            count[s]++;
            at[s] = i;
        }
    for (int s = 0; s < f->nslots; s++) {
        if (s == f->result_slot) {
            if (count[s])
                fail_msg("%s: the result slot %d is released", f->name, s);
            continue;
        }
        if (count[s] != 1)
            fail_msg("%s: slot %d is released %d times", f->name, s, count[s]);
        if (s >= f->nparams && at[s] < s - f->nparams)
            fail_msg("%s: slot %d is released before it is written", f->name, s);
        for (int i = 0; i < f->ninstrs; i++)
            for (int k = 0; k < f->instrs[i].nargs; k++)
                if (f->instrs[i].args[k] == s && i > at[s])
                    fail_msg("%s: slot %d is used by instruction %d after its release at %d", f->name, s, i, at[s]);
    }
    free(count);
    free(at);
}

static bool has_slot(const int *list, int n, int s)
{
    for (int i = 0; i < n; i++)
        if (list[i] == s)
            return true;
    return false;
}

/* Runs main(x, y) of text with x = [1, 2] and y = 7; returns the result as an array of two numbers. */
static void run_main(const char *text, double out[2])
{
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(load_check(text, &p, &d), FVM_OK);
    const fvm_func *f = fvm_program_func(p, "main");
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    fvm_named_text args[] = {{"x", "[1, 2]", FVM_ARG_JSON}, {"y", "7", FVM_ARG_JSON}};
    fvm_value **vals = NULL, *res = NULL;
    int64_t nc = -1;
    assert_int_equal(fvm_bind_args(f, 2, args, 0, &nc, &vals, &d), FVM_OK);
    fvm_status s = fvm_vm_call(vm, f, vals, &res, &d);
    if (s)
        test_print_errors(&d, "  ");
    assert_int_equal(s, FVM_OK);
    assert_int_equal(res->kind, FVM_V_TENSOR);
    assert_int_equal(fvm_tensor_count(&res->t), 2);
    out[0] = fvm_tensor_get_f64(&res->t, 0);
    out[1] = fvm_tensor_get_f64(&res->t, 1);
    fvm_value_release(res);
    fvm_values_free(vals, f->nparams);
    fvm_vm_free(vm);
    fvm_diag_clear(&d);
    fvm_program_free(p);
}

static void test_liveness(void **state)
{
    (void)state;
    /* slots: x 0, y 1 (unused), a 2, dead 3, b 4, r 5 */
    char *text = test_program_text("", "{'x': 'f32[2]', 'y': 'f32[]'}",
                                   "[['a', 'mul', 'x', 'x'], "
                                   " ['dead', 'add', 'a', 'a'], "
                                   " ['b', 'neg', 'a'], "
                                   " ['r', 'add', 'b', 'x']]");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(load_check(text, &p, &d), FVM_OK);
    const fvm_func *f = fvm_program_func(p, "main");
    assert_int_equal(f->nslots, 6);
    assert_int_equal(f->result_slot, 5);
    check_release_lists(f);
    /* y is never used: released at entry */
    assert_int_equal(f->nparam_release, 1);
    assert_int_equal(f->param_release[0], 1);
    /* nothing dies at 'a'; 'dead' dies where it is made; 'a' at its last use
     * 'b'; x and b at 'r' */
    assert_int_equal(f->instrs[0].nrelease, 0);
    assert_int_equal(f->instrs[1].nrelease, 1);
    assert_int_equal(f->instrs[1].release[0], 3);
    assert_int_equal(f->instrs[2].nrelease, 1);
    assert_int_equal(f->instrs[2].release[0], 2);
    assert_int_equal(f->instrs[3].nrelease, 2);
    assert_true(has_slot(f->instrs[3].release, 2, 0) && has_slot(f->instrs[3].release, 2, 4));
    fvm_program_free(p);
    fvm_diag_clear(&d);

    /* The dead instruction changes nothing: x*x = [1, 4], negated [-1, -4], plus x = [0, -2]. */
    double with[2], without[2];
    run_main(text, with);
    free(text);
    text = test_program_text("", "{'x': 'f32[2]', 'y': 'f32[]'}",
                             "[['a', 'mul', 'x', 'x'], ['b', 'neg', 'a'], ['r', 'add', 'b', 'x']]");
    run_main(text, without);
    free(text);
    assert_true(with[0] == 0.0 && with[1] == -2.0);
    assert_true(without[0] == with[0] && without[1] == with[1]);
}

static void test_liveness_shapes(void **state)
{
    (void)state;
    /* Programs with a returned parameter, an argument used twice, a value
     * passed into calls and loops, and several dead values. */
    const char *texts[] = {
        "{'fedvm': 1, 'functions': {'main': {'params': {'x': 'f32[2]', 'y': 'f32[]'}, "
        " 'body': [['d', 'neg', 'x'], ['e', 'add', 'd', 'd']], 'result': 'x'}}}",
        "{'fedvm': 1, 'functions': {"
        " 'step': {'params': {'i': 'i32[]', 's': 'f32[2]', 'k': 'f32[]'}, 'body': [['t', 'mul', 's', 'k'], "
        "   ['u', 'cast', {'dtype': 'f32'}, 'i'], ['v', 'add', 't', 'u']], 'result': 'v'}, "
        " 'main': {'params': {'x': 'f32[2]', 'y': 'f32[]'}, "
        " 'body': [['z', 'fori', {'fn': 'step', 'n': 3}, 'x', 'y'], ['w', 'add', 'z', 'z'], "
        "          ['q', 'sum', 'w'], ['r', 'struct', 'w', 'x']], 'result': 'r'}}}",
        "{'fedvm': 1, 'functions': {'main': {'params': {'x': 'f32[2]', 'y': 'f32[]'}, "
        " 'body': [['r', 'mul', 'y', 'y']], 'result': 'r'}}}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        char *text = test_json(texts[i]);
        fvm_diag d = {0};
        fvm_program *p = NULL;
        fvm_status s = load_check(text, &p, &d);
        if (s)
            test_print_errors(&d, "  ");
        assert_int_equal(s, FVM_OK);
        for (int k = 0; k < p->nfuncs; k++)
            check_release_lists(p->funcs[k]);
        /* and run it: under the sanitizer build this proves each value is
         * freed once and nothing leaks */
        const fvm_func *f = fvm_program_func(p, "main");
        fvm_vm *vm = NULL;
        assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
        fvm_named_text args[] = {{"x", "[1, 2]", FVM_ARG_JSON}, {"y", "3", FVM_ARG_JSON}};
        fvm_value **vals = NULL, *res = NULL;
        int64_t nc = -1;
        assert_int_equal(fvm_bind_args(f, 2, args, 0, &nc, &vals, &d), FVM_OK);
        assert_int_equal(fvm_vm_call(vm, f, vals, &res, &d), FVM_OK);
        assert_non_null(res);
        fvm_value_release(res);
        fvm_values_free(vals, f->nparams);
        fvm_vm_free(vm);
        fvm_diag_clear(&d);
        fvm_program_free(p);
        free(text);
    }
}

/* A program that is one member of a larger document (a cross-device plan's
 * phase): loaded from its file, errors located in the file with pointers
 * below the member. */
static void test_load_member(void **state)
{
    (void)state;
    char path[] = "/tmp/fvm_test_member_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *text =
        test_json("{'plan': 1,\n 'client': {'program': {'fedvm': 1, 'functions': {\n"
                  "  'main': {'params': {'x': 'f32[]'}, 'body': [['r', 'ad', 'x', 'x']], 'result': 'r'}}}},\n"
                  " 'server': {'program': {'fedvm': 1, 'functions': {\n"
                  "  'main': {'params': {'x': 'f32[]'}, 'body': [['r', 'add', 'x', 'x']], 'result': 'r'}}}}}\n");
    assert_true(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    free(text);
    fvm_diag d = {0};
    fvm_program *p = NULL;
    assert_int_equal(fvm_program_load_member(path, "/server/program", &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    assert_non_null(fvm_program_func(p, "main"));
    assert_string_equal(p->root->base, "/server/program");
    fvm_program_free(p);
    /* an error in the client's program points into it */
    fvm_status s = fvm_program_load_member(path, "/client/program", &p, &d);
    if (s == FVM_OK)
        s = fvm_compile(p, &d);
    assert_int_equal(s, FVM_ERR_FORMAT);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.errs[0].loc.file, path);
    assert_int_equal(d.errs[0].loc.line, 3);
    assert_string_equal(d.errs[0].loc.ptr, "/client/program/functions/main/body/0/1");
    assert_string_equal(d.errs[0].msg, "unknown op 'ad'; did you mean 'add'?");
    fvm_program_free(p);
    fvm_diag_clear(&d);
    /* no program at that member */
    assert_int_equal(fvm_program_load_member(path, "/beam/program", &p, &d), FVM_ERR_FORMAT);
    assert_null(p);
    assert_string_equal(d.errs[0].msg, "no fedvm program at /beam/program (an object with \"fedvm\": 1)");
    fvm_diag_clear(&d);
    unlink(path);
}

/* Names from NumPy, TensorFlow and tf.data suggest the op of the same meaning. */
static void test_op_synonyms(void **state)
{
    (void)state;
    static const struct {
        const char *name, *msg;
    } cases[] = {
        {"filter", "unknown op 'filter'; did you mean 'sequence_filter' (tf.data.Dataset.filter)?"},
        {"skip", "unknown op 'skip'; did you mean 'sequence_skip' (tf.data.Dataset.skip)?"},
        {"take", "unknown op 'take'; did you mean 'gather' (NumPy's take; the first n elements of a sequence are "
                 "sequence_take)?"},
        {"shape", "unknown op 'shape'; did you mean 'dim' (one axis's size, as tf.shape(x)[axis])?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"fedvm\": 1, \"functions\": {\"main\": {\"params\": {\"x\": \"f32[]*\"}, "
                 "\"body\": [[\"r\", \"%s\", \"x\"]], \"result\": \"r\"}}}",
                 cases[i].name);
        fvm_diag d = {0};
        fvm_program *p = NULL;
        assert_int_equal(fvm_program_load_text("s.json", text, strlen(text), &p, &d), FVM_ERR_FORMAT);
        assert_int_equal(d.n, 1);
        assert_string_equal(d.errs[0].msg, cases[i].msg);
        fvm_program_free(p);
        fvm_diag_clear(&d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_types),
        cmocka_unit_test(test_matmul_types),
        cmocka_unit_test(test_reduce_types),
        cmocka_unit_test(test_shape_op_types),
        cmocka_unit_test(test_sequence_types),
        cmocka_unit_test(test_op_synonyms),
        cmocka_unit_test(test_struct_types),
        cmocka_unit_test(test_lifted_types),
        cmocka_unit_test(test_random_types),
        cmocka_unit_test(test_federated_types),
        cmocka_unit_test(test_errors_in_one_pass),
        cmocka_unit_test(test_error_locations),
        cmocka_unit_test(test_secure_sum_bitwidth_bound),
        cmocka_unit_test(test_secure_sum_bounds),
        cmocka_unit_test(test_literal_and_fields_types),
        cmocka_unit_test(test_map_all_equal_errors),
        cmocka_unit_test(test_shape_errors_at_attributes),
        cmocka_unit_test(test_attribute_domains),
        cmocka_unit_test(test_integers_as_reals),
        cmocka_unit_test(test_recursion),
        cmocka_unit_test(test_liveness),
        cmocka_unit_test(test_liveness_shapes),
        cmocka_unit_test(test_load_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
