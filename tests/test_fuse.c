/* test_fuse.c - elementwise chains (vm/transform/fuse_plan.c, vm/exec/fuse.c, fvm_k_fused): the fused kernel against its steps run one by one,
 * which instructions the planner fuses, and fused runs against unfused ones, bit for bit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../vm/exec/fuse.h"
#include "../vm/kernels/kernels.h"
#include "test_util.h"

/* ---- the kernel -------------------------------------------------------------------- */

static unsigned seed = 1;

static fvm_tensor rnd(fvm_dtype dt, fvm_dims s)
{
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, dt, &s, NULL), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++) {
        seed = seed * 1664525u + 1013904223u;
        double v = (double)(seed >> 8) / (1 << 22) - 2.0; /* [-2, 2): both signs, some zeros for ints */
        fvm_tensor_set_f64(&t, i, dt == FVM_DTYPE_F32 || dt == FVM_DTYPE_F64 ? v : floor(v * 50));
    }
    return t;
}

static fvm_dims dims2(int64_t a, int64_t b)
{
    return (fvm_dims){.rank = 2, .d = {a, b}};
}

static fvm_dims dims1(int64_t a)
{
    return (fvm_dims){.rank = 1, .d = {a}};
}

/* Step s of the chain run alone by its own kernel into a new tensor. */
static fvm_tensor one_step(const fvm_fstep *st, const fvm_tensor *const *in, const fvm_tensor *done)
{
    const fvm_tensor *op[3];
    for (int j = 0; j < 3; j++)
        op[j] = st->arg[j] >= 0 ? in[st->arg[j]] : &done[-st->arg[j] - 1];
    fvm_dims shape = op[0]->shape;
    int arity = st->kind == FVM_FS_BINARY ? 2 : st->kind == FVM_FS_SELECT ? 3 : 1;
    for (int j = 1; j < arity; j++)
        assert_int_equal(fvm_dims_broadcast(&shape, &op[j]->shape, &shape, NULL), FVM_OK);
    fvm_dtype dt = st->kind == FVM_FS_CAST                                                     ? st->dtype
                   : st->kind == FVM_FS_SELECT                                                 ? op[1]->dtype
                   : st->kind == FVM_FS_BINARY && st->op >= FVM_BIN_EQ && st->op <= FVM_BIN_GE ? FVM_DTYPE_BOOL
                                                                                               : op[0]->dtype;
    fvm_tensor o;
    assert_int_equal(fvm_tensor_alloc(&o, dt, &shape, NULL), FVM_OK);
    switch (st->kind) {
    case FVM_FS_UNARY:
        assert_int_equal(fvm_k_unary((fvm_unary)st->op, op[0], &o, NULL), FVM_OK);
        break;
    case FVM_FS_BINARY:
        assert_int_equal(fvm_k_binary((fvm_binary)st->op, op[0], op[1], &o, NULL), FVM_OK);
        break;
    case FVM_FS_SELECT:
        assert_int_equal(fvm_k_select(op[0], op[1], op[2], &o, NULL), FVM_OK);
        break;
    case FVM_FS_CAST:
        assert_int_equal(fvm_k_cast(op[0], &o, NULL), FVM_OK);
        break;
    case FVM_FS_FILL:
        assert_int_equal(fvm_k_fill(st->value, &o, NULL), FVM_OK);
        break;
    }
    return o;
}

/* The chain fused, into a new tensor and in place in input 'inplace' (if
 * >= 0), against its steps one by one (whose last intermediate has the
 * output's shape: fills take their operand's). */
static void check_chain(const char *what, const fvm_fstep *steps, int n, fvm_tensor *in, int nin, int inplace)
{
    const fvm_tensor *ins[FVM_FUSED_MAX_IN];
    for (int k = 0; k < nin; k++)
        ins[k] = &in[k];
    fvm_tensor done[FVM_FUSED_MAX_STEPS];
    for (int s = 0; s < n; s++)
        done[s] = one_step(&steps[s], ins, done);
    const fvm_tensor *want = &done[n - 1];
    fvm_dtype dt;
    assert_true(fvm_k_fused_dtype(steps, n, ins, nin, &dt));
    assert_int_equal(dt, want->dtype);
    fvm_tensor got;
    assert_int_equal(fvm_tensor_alloc(&got, dt, &want->shape, NULL), FVM_OK);
    assert_int_equal(fvm_k_fused(steps, n, ins, nin, &got, NULL), FVM_OK);
    if (!fvm_tensor_identical(&got, want))
        fail_msg("%s: the fused chain differs from its steps", what);
    if (inplace >= 0) {
        assert_int_equal(fvm_k_fused(steps, n, ins, nin, &in[inplace], NULL), FVM_OK);
        if (!fvm_tensor_identical(&in[inplace], want))
            fail_msg("%s: the chain computed in place differs", what);
    }
    fvm_tensor_release(&got);
    for (int s = 0; s < n; s++)
        fvm_tensor_release(&done[s]);
}

#define UN(op, a) \
    { \
        FVM_FS_UNARY, (int)(op), 0, 0, \
        { \
            a, 0, 0 \
        } \
    }
#define BIN(op, a, b) \
    { \
        FVM_FS_BINARY, (int)(op), 0, 0, \
        { \
            a, b, 0 \
        } \
    }
#define SEL(p, a, b) \
    { \
        FVM_FS_SELECT, 0, 0, 0, \
        { \
            p, a, b \
        } \
    }
#define CAST(dt, a) \
    { \
        FVM_FS_CAST, 0, dt, 0, \
        { \
            a, 0, 0 \
        } \
    }
#define FILL(v, a) \
    { \
        FVM_FS_FILL, 0, 0, v, \
        { \
            a, 0, 0 \
        } \
    }

static void test_kernel_chains(void **state)
{
    (void)state;
    /* the SGD step x - lr * g, over several blocks (the last one short), in place in g */
    {
        fvm_tensor in[3] = {rnd(FVM_DTYPE_F32, dims1(5000)), rnd(FVM_DTYPE_F32, (fvm_dims){0}),
                            rnd(FVM_DTYPE_F32, dims1(5000))};
        const fvm_fstep st[] = {BIN(FVM_BIN_MUL, 1, 2), BIN(FVM_BIN_SUB, 0, -1)};
        check_chain("sgd", st, 2, in, 3, 2);
        for (int k = 0; k < 3; k++)
            fvm_tensor_release(&in[k]);
    }
    /* a bias add and its ReLU: [10,200] + [200], in place */
    {
        fvm_tensor in[2] = {rnd(FVM_DTYPE_F32, dims2(10, 200)), rnd(FVM_DTYPE_F32, dims1(200))};
        const fvm_fstep st[] = {BIN(FVM_BIN_ADD, 0, 1), UN(FVM_UN_RELU, -1)};
        check_chain("bias relu", st, 2, in, 2, 0);
        fvm_tensor_release(&in[0]);
        fvm_tensor_release(&in[1]);
    }
    /* a ReLU's mask on a cotangent: select(gt(a, zeros_like(a)), c, zeros_like(c)) */
    {
        fvm_tensor in[2] = {rnd(FVM_DTYPE_F32, dims2(7, 300)), rnd(FVM_DTYPE_F32, dims2(7, 300))};
        const fvm_fstep st[] = {FILL(0.0, 0), BIN(FVM_BIN_GT, 0, -1), FILL(0.0, 1), SEL(-2, 1, -3)};
        check_chain("relu mask", st, 4, in, 2, 1);
        fvm_tensor_release(&in[0]);
        fvm_tensor_release(&in[1]);
    }
    /* pixels: cast(u8 -> f32) / 255 */
    {
        fvm_tensor in[2] = {rnd(FVM_DTYPE_U8, dims2(3, 784)), rnd(FVM_DTYPE_F32, (fvm_dims){0})};
        const fvm_fstep st[] = {CAST(FVM_DTYPE_F32, 0), BIN(FVM_BIN_DIV, -1, 1)};
        check_chain("pixels", st, 2, in, 2, -1);
        fvm_tensor_release(&in[0]);
        fvm_tensor_release(&in[1]);
    }
    /* four inputs broadcast three ways: (cast(iota[10] == y[10,1]) - p[10,10]) * s[10,1] */
    {
        fvm_tensor in[4] = {rnd(FVM_DTYPE_I32, dims1(10)), rnd(FVM_DTYPE_I32, dims2(10, 1)),
                            rnd(FVM_DTYPE_F32, dims2(10, 10)), rnd(FVM_DTYPE_F32, dims2(10, 1))};
        const fvm_fstep st[] = {BIN(FVM_BIN_EQ, 0, 1), CAST(FVM_DTYPE_F32, -1), BIN(FVM_BIN_SUB, 2, -2),
                                BIN(FVM_BIN_MUL, 3, -3)};
        check_chain("cross-entropy pullback", st, 4, in, 4, 2);
        for (int k = 0; k < 4; k++)
            fvm_tensor_release(&in[k]);
    }
    /* integers wrap; scalars only; unary chains of every float function */
    {
        fvm_tensor in[2] = {rnd(FVM_DTYPE_I32, dims1(300)), rnd(FVM_DTYPE_I32, dims1(300))};
        const fvm_fstep st[] = {BIN(FVM_BIN_MUL, 0, 1), UN(FVM_UN_NEG, -1), BIN(FVM_BIN_MAXIMUM, -2, 0)};
        check_chain("ints", st, 3, in, 2, 0);
        fvm_tensor_release(&in[0]);
        fvm_tensor_release(&in[1]);
        fvm_tensor s[2] = {rnd(FVM_DTYPE_F64, (fvm_dims){0}), rnd(FVM_DTYPE_F64, dims2(1, 1))};
        const fvm_fstep st2[] = {UN(FVM_UN_EXP, 0), BIN(FVM_BIN_ADD, -1, 1), UN(FVM_UN_TANH, -2)};
        check_chain("scalars", st2, 3, s, 2, -1);
        fvm_tensor_release(&s[0]);
        fvm_tensor_release(&s[1]);
        fvm_tensor x[1] = {rnd(FVM_DTYPE_F32, dims2(5, 77))};
        const fvm_fstep st3[] = {UN(FVM_UN_ABS, 0),          UN(FVM_UN_SQRT, -1), UN(FVM_UN_LOG, -2),
                                 UN(FVM_UN_SIGMOID, -3),     FILL(1.0, -4),       BIN(FVM_BIN_POW, -4, -5),
                                 BIN(FVM_BIN_MINIMUM, -6, 0)};
        check_chain("unary functions", st3, 7, x, 1, 0);
        fvm_tensor_release(&x[0]);
    }
    /* floor_div and mod fuse for integers too (a zero divisor gives 0, no error to report), with
     * INT_MIN by -1; the newer float functions in one chain */
    {
        fvm_tensor in[2] = {rnd(FVM_DTYPE_I32, dims1(300)), rnd(FVM_DTYPE_I32, dims1(300))};
        int32_t *a = fvm_tensor_data(&in[0]), *b = fvm_tensor_data(&in[1]);
        a[0] = INT32_MIN;
        b[0] = -1;
        b[1] = 0;
        const fvm_fstep st[] = {BIN(FVM_BIN_FLOOR_DIV, 0, 1), BIN(FVM_BIN_MOD, 0, 1), BIN(FVM_BIN_ADD, -1, -2),
                                UN(FVM_UN_SIGN, -3)};
        check_chain("floor_div and mod", st, 4, in, 2, 1);
        fvm_tensor_release(&in[0]);
        fvm_tensor_release(&in[1]);
        fvm_tensor x[2] = {rnd(FVM_DTYPE_F64, dims2(3, 200)), rnd(FVM_DTYPE_F64, dims1(200))};
        const fvm_fstep st2[] = {UN(FVM_UN_SIN, 0),        UN(FVM_UN_COS, 1),    BIN(FVM_BIN_MOD, -1, -2),
                                 UN(FVM_UN_ERF, -3),       UN(FVM_UN_LOG1P, -4), BIN(FVM_BIN_FLOOR_DIV, 0, 1),
                                 BIN(FVM_BIN_MUL, -5, -6), UN(FVM_UN_SIGN, -7)};
        check_chain("float functions", st2, 8, x, 2, 0);
        fvm_tensor_release(&x[0]);
        fvm_tensor_release(&x[1]);
    }
    /* not for the fused kernel: an integer division (its divisor is checked), mixed operand dtypes */
    {
        fvm_tensor in[2] = {rnd(FVM_DTYPE_I32, dims1(4)), rnd(FVM_DTYPE_F32, dims1(4))};
        const fvm_tensor *ins[2] = {&in[0], &in[1]};
        fvm_dtype dt;
        const fvm_fstep div[] = {BIN(FVM_BIN_DIV, 0, 0), UN(FVM_UN_NEG, -1)};
        assert_false(fvm_k_fused_dtype(div, 2, ins, 2, &dt));
        const fvm_fstep mixed[] = {BIN(FVM_BIN_ADD, 0, 1), UN(FVM_UN_NEG, -1)};
        assert_false(fvm_k_fused_dtype(mixed, 2, ins, 2, &dt));
        fvm_tensor_release(&in[0]);
        fvm_tensor_release(&in[1]);
    }
}

/* ---- the planner ----------------------------------------------------------------- */

/* "root: member member" for every chain of f, in written order, '; '-separated. */
static void chains_of(const fvm_func *f, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; f->fusion && i < f->ninstrs; i++) {
        const fvm_fused *c = f->fusion->chain_at[i];
        if (!c)
            continue;
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s:", buf[0] ? "; " : "", f->instrs[c->root].name);
        for (int m = 0; m < c->nmembers; m++)
            snprintf(buf + strlen(buf), n - strlen(buf), " %s", f->instrs[c->members[m]].name);
    }
}

static const char *const PLAN =
    "{'fedvm': 1, 'functions': {"
    "'sgd': {'params': {'w': '<a=f32[3],b=f32[2]>', 'g': '<a=f32[3],b=f32[2]>', 'lr': 'f32[]'}, 'body': ["
    "  ['step', 'mul', 'lr', 'g'], ['next', 'sub', 'w', 'step']], 'result': 'next'},"
    /* m is used twice: it stays (a chain of its own, as it releases x and y); relu(m) and the select
     * chain fuse */
    "'twice': {'params': {'x': 'f32[4]', 'y': 'f32[4]'}, 'body': ["
    "  ['m', 'mul', 'x', 'y'], ['h', 'relu', 'm'], ['z', 'zeros_like', 'm'], ['p', 'gt', 'm', 'z'],"
    "  ['zy', 'zeros_like', 'y'], ['r', 'select', 'p', 'h', 'zy']], 'result': 'r'},"
    /* x dies at 's' (a sum) between 'm' and its user 'r': m cannot be put off to r */
    "'released': {'params': {'x': 'f32[4]', 'y': 'f32[4]'}, 'body': ["
    "  ['m', 'mul', 'x', 'y'], ['s', 'sum', 'x'], ['r', 'add', 'm', 's']], 'result': 'r'},"
    /* but a non-elementwise op in between that releases nothing of the chain is no obstacle */
    "'between': {'params': {'x': 'f32[4]', 'y': 'f32[4]'}, 'body': ["
    "  ['m', 'mul', 'x', 'y'], ['s', 'sum', 'x'], ['r', 'add', 'm', 's'], ['e', 'exp', 'x'],"
    "  ['out', 'struct', 'r', 'e']], 'result': 'out'},"
    /* the result itself is never a member */
    "'result': {'params': {'x': 'f32[4]'}, 'body': [['a', 'neg', 'x'], ['b', 'exp', 'a']], 'result': 'a'},"
    /* a lone instruction is a chain of one step when it releases an operand that is not a scalar (its
     * result may take that buffer: an accumulation), and not otherwise */
    "'lone': {'params': {'acc': '<a=f32[3],b=f32[2]>', 'g': '<a=f32[3],b=f32[2]>', 'x': 'f32[]', 'y': 'f32[]'},"
    "  'body': [['n', 'add', 'acc', 'g'], ['s', 'add', 'x', 'y'], ['out', 'struct', 'n', 's']], 'result': 'out'},"
    "'main': {'params': {}, 'body': [['r', 'const', {'value': 1.0}]], 'result': 'r'}}}";

static void test_plan(void **state)
{
    (void)state;
    fvm_program *p = test_load("test.json", PLAN, true);
    char buf[256];
    chains_of(fvm_program_func(p, "sgd"), buf, sizeof buf);
    assert_string_equal(buf, "next: step");
    const fvm_fused *c = fvm_program_func(p, "sgd")->fusion->chain_at[1];
    assert_int_equal(c->nin, 3); /* lr, g, w */
    chains_of(fvm_program_func(p, "twice"), buf, sizeof buf);
    assert_string_equal(buf, "m:; r: h z p zy"); /* m alone: it releases x and y */
    chains_of(fvm_program_func(p, "released"), buf, sizeof buf);
    assert_string_equal(buf, "m:; r:"); /* m is not a member of r; each alone may write into an operand it releases */
    chains_of(fvm_program_func(p, "between"), buf, sizeof buf);
    assert_string_equal(buf, "r: m; e:"); /* e = exp(x) alone: x dies there */
    chains_of(fvm_program_func(p, "result"), buf, sizeof buf);
    assert_string_equal(buf, "a:"); /* a is no member of b's chain (b is dead code), only a chain of its own */
    chains_of(fvm_program_func(p, "lone"), buf, sizeof buf);
    assert_string_equal(buf, "n:");
    fvm_program_free(p);
}

/* ---- running -------------------------------------------------------------------- */

static fvm_value *tensor_value(fvm_dtype dt, fvm_dims s)
{
    fvm_tensor t = rnd(dt, s);
    fvm_value *v = fvm_value_tensor_take(&t);
    assert_non_null(v);
    return v;
}

static fvm_value *copy_of(const fvm_value *v)
{
    if (v->kind == FVM_V_STRUCT) {
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, v->n);
        for (int64_t i = 0; i < v->n; i++)
            s->items[i] = copy_of(v->items[i]);
        return s;
    }
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, v->t.dtype, &v->t.shape, NULL), FVM_OK);
    memcpy(fvm_tensor_data(&t), fvm_tensor_data(&v->t), fvm_tensor_bytes(&t));
    return fvm_value_tensor_take(&t);
}

/* Fused runs give the unfused bits, and never write into a value the
 * caller holds (an argument is never the chain's own to overwrite). */
static void test_runs_match_unfused(void **state)
{
    (void)state;
    fvm_program *p = test_load("test.json", PLAN, true);
    fvm_value *w = test_pair(tensor_value(FVM_DTYPE_F32, dims1(3)), tensor_value(FVM_DTYPE_F32, dims1(2)));
    fvm_value *g = test_pair(tensor_value(FVM_DTYPE_F32, dims1(3)), tensor_value(FVM_DTYPE_F32, dims1(2)));
    fvm_value *lr = tensor_value(FVM_DTYPE_F32, (fvm_dims){0});
    fvm_value *x = tensor_value(FVM_DTYPE_F32, dims1(4)), *y = tensor_value(FVM_DTYPE_F32, dims1(4));
    struct {
        const char *fn;
        fvm_value *args[3];
    } cases[] = {{"sgd", {w, g, lr}}, {"twice", {x, y}}, {"released", {x, y}}, {"between", {x, y}}, {"result", {x}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fvm_value *before[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3 && cases[c].args[k]; k++)
            before[k] = copy_of(cases[c].args[k]);
        fvm_value *fused = test_call(p, cases[c].fn, cases[c].args, false);
        fvm_value *unfused = test_call(p, cases[c].fn, cases[c].args, true);
        if (!fvm_value_identical(fused, unfused))
            fail_msg("%s: the fused run differs from the unfused one", cases[c].fn);
        for (int k = 0; k < 3 && before[k]; k++) {
            if (!fvm_value_identical(before[k], cases[c].args[k]))
                fail_msg("%s: argument %d was overwritten", cases[c].fn, k);
            fvm_value_release(before[k]);
        }
        fvm_value_release(fused);
        fvm_value_release(unfused);
    }
    fvm_value_release(w);
    fvm_value_release(g);
    fvm_value_release(lr);
    fvm_value_release(x);
    fvm_value_release(y);
    fvm_program_free(p);
}

/* A chain writes its result into an input's buffer only when the input
 * dies with it and nothing else holds it: a product used again after the
 * chain, or reachable through a struct, keeps its values. */
static void test_shared_inputs_kept(void **state)
{
    (void)state;
    fvm_program *p = test_load("test.json",
                               "{'fedvm': 1, 'functions': {"
                               "'later': {'params': {'x': 'f32[3,4]', 'w': 'f32[4,5]', 'b': 'f32[5]'}, 'body': ["
                               "  ['m', 'matmul', 'x', 'w'], ['a', 'add', 'm', 'b'], ['r', 'relu', 'a'],"
                               "  ['out', 'struct', 'r', 'm']], 'result': 'out'},"
                               "'aliased': {'params': {'x': 'f32[3,4]', 'w': 'f32[4,5]', 'b': 'f32[5]'}, 'body': ["
                               "  ['m', 'matmul', 'x', 'w'], ['s', 'struct', 'm'], ['f', 'field', {'index': 0}, 's'],"
                               "  ['a', 'add', 'f', 'b'], ['r', 'relu', 'a'], ['out', 'struct', 'r', 's']],"
                               "  'result': 'out'},"
                               "'dies': {'params': {'x': 'f32[3,4]', 'w': 'f32[4,5]', 'b': 'f32[5]'}, 'body': ["
                               "  ['m', 'matmul', 'x', 'w'], ['a', 'add', 'm', 'b'], ['r', 'relu', 'a']],"
                               "  'result': 'r'}}}",
                               true);
    fvm_value *args[3] = {tensor_value(FVM_DTYPE_F32, dims2(3, 4)), tensor_value(FVM_DTYPE_F32, dims2(4, 5)),
                          tensor_value(FVM_DTYPE_F32, dims1(5))};
    const char *fns[] = {"later", "aliased", "dies"};
    for (int i = 0; i < 3; i++) {
        char buf[64];
        chains_of(fvm_program_func(p, fns[i]), buf, sizeof buf);
        assert_string_equal(buf, "r: a");
        fvm_value *fused = test_call(p, fns[i], args, false), *unfused = test_call(p, fns[i], args, true);
        if (!fvm_value_identical(fused, unfused))
            fail_msg("%s: the fused run differs from the unfused one", fns[i]);
        fvm_value_release(fused);
        fvm_value_release(unfused);
    }
    for (int k = 0; k < 3; k++)
        fvm_value_release(args[k]);
    fvm_program_free(p);
}

/* A product with a transposed operand and few rows reads a transposed copy
 * its context keeps (vm/exec/packed.h): the bits of the product as
 * written, for operands that change between calls (more of them than the
 * copies kept), and for an operand a later chain would write into in place
 * were the copy not holding it. */
static void test_packed_operands(void **state)
{
    (void)state;
    fvm_program *p = test_load("test.json",
                               "{'fedvm': 1, 'functions': {"
                               "'twice': {'params': {'a': 'f32[?,300]', 'w': 'f32[200,300]'}, 'body': ["
                               "  ['p', 'matmul', {'transpose_b': true}, 'a', 'w'], ['one', 'const', {'value': 1.0}],"
                               "  ['w2', 'add', 'w', 'one'], ['q', 'matmul', {'transpose_b': true}, 'a', 'w2'],"
                               "  ['out', 'struct', 'p', 'q', 'w2']], 'result': 'out'}}}",
                               true);
    for (int round = 0; round < 6; round++) {
        int64_t m = round % 3 == 0 ? 1 : round % 3 == 1 ? 4 : 8;
        fvm_value *args[2] = {tensor_value(FVM_DTYPE_F32, dims2(m, 300)), tensor_value(FVM_DTYPE_F32, dims2(200, 300))};
        fvm_value *w = copy_of(args[1]), *got = test_call(p, "twice", args, false);
        fvm_tensor want;
        fvm_dims pd = dims2(m, 200);
        assert_int_equal(fvm_tensor_alloc(&want, FVM_DTYPE_F32, &pd, NULL), FVM_OK);
        assert_int_equal(fvm_k_matmul(&args[0]->t, &w->t, false, true, &want, NULL), FVM_OK);
        if (memcmp(fvm_tensor_data(&want), fvm_tensor_data(&got->items[0]->t), fvm_tensor_bytes(&want)))
            fail_msg("round %d, %lld rows: the product differs from the kernel's", round, (long long)m);
        assert_int_equal(fvm_k_matmul(&args[0]->t, &got->items[2]->t, false, true, &want, NULL), FVM_OK);
        if (memcmp(fvm_tensor_data(&want), fvm_tensor_data(&got->items[1]->t), fvm_tensor_bytes(&want)))
            fail_msg("round %d, %lld rows: the product of the updated operand is stale", round, (long long)m);
        if (!fvm_value_identical(w, args[1]))
            fail_msg("round %d: the operand was written into", round);
        fvm_tensor_release(&want);
        fvm_value_release(got);
        fvm_value_release(w);
        fvm_value_release(args[0]);
        fvm_value_release(args[1]);
    }
    fvm_program_free(p);
}

/* An SGD step made with its product writes the new weights into the old
 * ones' buffer when they die in it and nothing else holds them: a loop
 * gives its state to its body, so from the second step on. Neither the
 * weights the loop started from, nor the states a scan keeps, nor a value
 * the body returns beside its update are written into: each run gives the
 * bits of the product then the update, computed here step by step. */
static void test_updates_in_place(void **state)
{
    (void)state;
    fvm_program *p =
        test_load("test.json",
                  "{'fedvm': 1, 'functions': {"
                  "'step': {'params': {'i': 'i32[]', 'w': 'f32[16,8]', 'x': 'f32[4,16]', 'd': 'f32[4,8]'},"
                  "  'body': [['g', 'matmul', {'transpose_a': true}, 'x', 'd'], ['lr', 'const', {'value': 0.5}],"
                  "  ['s', 'mul', 'lr', 'g'], ['next', 'sub', 'w', 's']], 'result': 'next'},"
                  "'loop': {'params': {'w': 'f32[16,8]', 'x': 'f32[4,16]', 'd': 'f32[4,8]'}, 'body': ["
                  "  ['t', 'fori', {'fn': 'step', 'n': 5}, 'w', 'x', 'd'], ['out', 'struct', 't', 'w']],"
                  "  'result': 'out'},"
                  "'history': {'params': {'w': 'f32[16,8]', 'x': 'f32[4,16]', 'd': 'f32[4,8]'}, 'body': ["
                  "  ['h', 'scan', {'fn': 'step', 'n': 5}, 'w', 'x', 'd']], 'result': 'h'},"
                  "'square': {'params': {'i': 'i32[]', 'w': 'f32[64,64]'}, 'body': ["
                  "  ['g', 'matmul', {'transpose_a': true}, 'w', 'w'], ['lr', 'const', {'value': 0.5}],"
                  "  ['s', 'mul', 'lr', 'g'], ['next', 'sub', 'w', 's']], 'result': 'next'},"
                  "'squares': {'params': {'w': 'f32[64,64]'}, 'body': ["
                  "  ['t', 'fori', {'fn': 'square', 'n': 3}, 'w']], 'result': 't'}}}",
                  true);
    char buf[64];
    chains_of(fvm_program_func(p, "step"), buf, sizeof buf);
    assert_string_equal(buf, "next: s");
    assert_true(fvm_program_func(p, "step")->fusion->chain_at[3]->product >= 0);
    fvm_value *args[3] = {tensor_value(FVM_DTYPE_F32, dims2(16, 8)), tensor_value(FVM_DTYPE_F32, dims2(4, 16)),
                          tensor_value(FVM_DTYPE_F32, dims2(4, 8))};
    fvm_value *w0 = copy_of(args[0]);
    /* the states, step by step: w <- w - 0.5 (x^T d) */
    fvm_tensor want[6], g;
    fvm_dims wd = dims2(16, 8);
    assert_int_equal(fvm_tensor_alloc(&g, FVM_DTYPE_F32, &wd, NULL), FVM_OK);
    assert_int_equal(fvm_k_matmul(&args[1]->t, &args[2]->t, true, false, &g, NULL), FVM_OK);
    for (int k = 0; k < 6; k++) {
        assert_int_equal(fvm_tensor_alloc(&want[k], FVM_DTYPE_F32, &wd, NULL), FVM_OK);
        const float *prev = fvm_tensor_data(k ? &want[k - 1] : &args[0]->t), *gs = fvm_tensor_data(&g);
        float *w = fvm_tensor_data(&want[k]);
        for (int e = 0; e < 16 * 8; e++) {
            float t = 0.5f * gs[e];
            w[e] = k ? prev[e] - t : prev[e];
        }
    }
    for (int unfused = 0; unfused < 2; unfused++) {
        fvm_value *loop = test_call(p, "loop", args, unfused), *hist = test_call(p, "history", args, unfused);
        if (memcmp(fvm_tensor_data(&loop->items[0]->t), fvm_tensor_data(&want[5]), fvm_tensor_bytes(&want[5])))
            fail_msg("loop%s: not the steps' bits", unfused ? " (unfused)" : "");
        if (!fvm_value_identical(loop->items[1], w0) || !fvm_value_identical(args[0], w0))
            fail_msg("loop%s: the starting weights were written into", unfused ? " (unfused)" : "");
        for (int k = 0; k < 5; k++)
            if (memcmp(fvm_tensor_data(&hist->items[1]->items[k]->t), fvm_tensor_data(&want[k]),
                       fvm_tensor_bytes(&want[k])))
                fail_msg("scan%s: state %d was written into", unfused ? " (unfused)" : "", k);
        fvm_value_release(loop);
        fvm_value_release(hist);
    }
    /* the weights are the product's operands too: never updated in place */
    fvm_value *sq = tensor_value(FVM_DTYPE_F32, dims2(64, 64)), *sv = copy_of(sq);
    fvm_tensor sw = sv->t, sg;
    fvm_dims sd = dims2(64, 64);
    assert_int_equal(fvm_tensor_alloc(&sg, FVM_DTYPE_F32, &sd, NULL), FVM_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(fvm_k_matmul(&sw, &sw, true, false, &sg, NULL), FVM_OK);
        float *w = fvm_tensor_data(&sw), *gs = fvm_tensor_data(&sg);
        for (int e = 0; e < 64 * 64; e++) {
            float t = 0.5f * gs[e];
            w[e] -= t;
        }
    }
    fvm_value *got = test_call(p, "squares", &sq, false);
    if (memcmp(fvm_tensor_data(&got->t), fvm_tensor_data(&sw), fvm_tensor_bytes(&sw)))
        fail_msg("squares: the weights were updated while the product read them");
    fvm_value_release(got);
    fvm_value_release(sq);
    fvm_value_release(sv);
    fvm_tensor_release(&sg);
    for (int k = 0; k < 6; k++)
        fvm_tensor_release(&want[k]);
    fvm_tensor_release(&g);
    fvm_value_release(w0);
    for (int k = 0; k < 3; k++)
        fvm_value_release(args[k]);
    fvm_program_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_chains),      cmocka_unit_test(test_plan),
        cmocka_unit_test(test_runs_match_unfused), cmocka_unit_test(test_shared_inputs_kept),
        cmocka_unit_test(test_packed_operands),    cmocka_unit_test(test_updates_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
