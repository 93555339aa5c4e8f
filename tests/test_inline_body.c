/* test_inline_body.c - the bodies with derivatives inlined (vm/transform/inline_body.c): what they are made of,
 * that they run to the written bodies' bits, and that every program fedvm ships gets one where it can. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../vm/transform/fuse_plan.h"
#include "test_util.h"

/* A two-layer network trained by SGD, its model a struct of structs; the
 * step written four ways: grad with has_aux and an hparam learning rate;
 * value_and_grad with a literal one; grad of the plain loss with the update
 * on the nested struct through a field; and a step whose gradient is used
 * twice (the update and the result). */
static const char *const NET =
    "{'fedvm': 1,"
    " 'hparams': {'lr': {'type': 'f32[]', 'default': 0.25}},"
    " 'types': {'Layer': '<w=f32[?,?],b=f32[?]>', 'Net': '<l1=Layer,l2=Layer>', 'Batch': '<x=f32[?,4],y=f32[?,2]>'},"
    " 'functions': {"
    "'layer': {'params': {'p': 'Layer', 'x': 'f32[?,?]'}, 'body': ["
    "  [['w', 'b'], 'fields', 'p'], ['z', 'matmul', 'x', 'w'], ['a', 'add', 'z', 'b']], 'result': 'a'},"
    "'loss_aux': {'params': {'net': 'Net', 'batch': 'Batch'}, 'body': ["
    "  [['l1', 'l2'], 'fields', 'net'], [['x', 'y'], 'fields', 'batch'],"
    "  ['a1', 'call', {'fn': 'layer'}, 'l1', 'x'], ['h', 'tanh', 'a1'], ['o', 'call', {'fn': 'layer'}, 'l2', 'h'],"
    "  ['e', 'sub', 'o', 'y'], ['e2', 'mul', 'e', 'e'], ['loss', 'mean', 'e2'], ['n', 'sum', 'e2'],"
    "  ['out', 'struct', {'names': ['value', 'aux']}, 'loss', 'n']], 'result': 'out'},"
    "'loss': {'params': {'net': 'Net', 'batch': 'Batch'}, 'body': ["
    "  ['va', 'call', {'fn': 'loss_aux'}, 'net', 'batch'], ['v', 'field', {'name': 'value'}, 'va']],"
    "  'result': 'v'},"
    "'step_aux': {'params': {'net': 'Net', 'batch': 'Batch'}, 'body': ["
    "  ['ga', 'grad', {'fn': 'loss_aux', 'wrt': 'net', 'has_aux': true}, 'net', 'batch'],"
    "  [['g', 'n'], 'fields', {'names': ['grad', 'aux']}, 'ga'], ['lr', 'hparam', {'name': 'lr'}],"
    "  ['s', 'mul', 'lr', 'g'], ['next', 'sub', 'net', 's'], ['out', 'struct', 'next', 'n']], 'result': 'out'},"
    "'step_vg': {'params': {'net': 'Net', 'batch': 'Batch'}, 'body': ["
    "  ['vg', 'value_and_grad', {'fn': 'loss'}, 'net', 'batch'], [['v', 'g'], 'fields', {'names': ['value', 'grad']}, 'vg'],"
    "  ['s', 'mul', 'g', 0.125], ['next', 'sub', 'net', 's'], ['out', 'struct', 'next', 'v']], 'result': 'out'},"
    "'step_field': {'params': {'net': 'Net', 'batch': 'Batch', 'lr': 'f32[]'}, 'body': ["
    "  ['g', 'grad', {'fn': 'loss'}, 'net', 'batch'], ['g2', 'field', {'name': 'l2'}, 'g'],"
    "  ['l2', 'field', {'name': 'l2'}, 'net'], ['s', 'mul', 'lr', 'g2'], ['next', 'sub', 'l2', 's']],"
    "  'result': 'next'},"
    "'step_twice': {'params': {'net': 'Net', 'batch': 'Batch', 'lr': 'f32[]'}, 'body': ["
    "  ['g', 'grad', {'fn': 'loss'}, 'net', 'batch'], ['s', 'mul', 'lr', 'g'], ['next', 'sub', 'net', 's'],"
    "  ['out', 'struct', 'next', 'g']], 'result': 'out'},"
    "'plain': {'params': {'net': 'Net', 'batch': 'Batch'}, 'body': ["
    "  ['v', 'call', {'fn': 'loss'}, 'net', 'batch']], 'result': 'v'},"
    "'helper': {'params': {'x': 'f32[3]', 'y': 'f32[?]'}, 'body': ["
    "  ['known', 'exp', 'x'], ['unknown', 'exp', 'y'], ['z', 'add', 'y', 'y'], ['s', 'sum', 'z'],"
    "  ['t', 'sum', 'y'], ['out', 'mul', 's', 2.0]], 'result': 'out'},"
    "'dead': {'params': {'x': 'f32[3]', 'y': 'f32[?]'}, 'body': ["
    "  ['v', 'call', {'fn': 'helper'}, 'x', 'y']], 'result': 'v'}}}";

/* The body, one instruction a line, for a failure's message. */
static void print_body(const fvm_func *f)
{
    for (int i = 0; i < f->ninstrs; i++) {
        const fvm_instr *in = &f->instrs[i];
        const fvm_fused *c = f->fusion ? f->fusion->chain_at[i] : NULL;
        print_message("  %s%s = %s", f->fusion && f->fusion->deferred[i] ? "(deferred) " : "", in->name,
                      fvm_op_table[in->op].name);
        if (c)
            print_message(" [chain of %d%s]", c->nsteps, c->product >= 0 ? ", with its product" : "");
        for (int k = 0; k < in->nargs; k++)
            print_message(" %s", in->arg_names[k]);
        print_message("\n");
    }
}

/* The chains of f that make a product with its update (fuse_plan.h). */
static int count_updates(const fvm_func *f)
{
    int n = 0;
    for (int i = 0; f->fusion && i < f->ninstrs; i++)
        n += f->fusion->chain_at[i] && f->fusion->chain_at[i]->product >= 0;
    return n;
}

static int count_op(const fvm_func *f, fvm_op op)
{
    int n = 0;
    for (int i = 0; i < f->ninstrs; i++)
        n += f->instrs[i].op == op;
    return n;
}

/* What the bodies are made of: no derivative op left, the update one sub
 * per weight, the loss's own value dropped where nothing uses it. */
static void test_bodies(void **state)
{
    (void)state;
    fvm_program *p = test_load("net.json", NET, true);
    static const char *const steps[] = {"step_aux", "step_vg", "step_field", "step_twice"};
    /* a sub per weight updated (step_field: l2's two), e = o - y, and tanh's 1 - h h, which
     * step_field keeps too, though l1's gradient is unused there: its shapes are not all known,
     * so that it might fail */
    static const int subs[] = {4, 4, 2, 4};
    for (int k = 0; k < 4; k++) {
        const fvm_func *f = fvm_program_func(p, steps[k]), *g = f->inlined;
        if (!g)
            fail_msg("%s has no inlined body", steps[k]);
        assert_int_equal(count_op(g, FVM_OP_GRAD) + count_op(g, FVM_OP_VALUE_AND_GRAD), 0);
        assert_int_equal(count_op(g, FVM_OP_CALL), 0); /* the pullback has the layers inlined already */
        if (count_op(g, FVM_OP_SUB) != subs[k] + 2) {
            print_body(g);
            fail_msg("%s: %d subs, not %d", steps[k], count_op(g, FVM_OP_SUB), subs[k] + 2);
        }
        /* each weight matrix's update made with its gradient's product, but where the gradient is
         * used again (step_twice's result) */
        static const int updates[] = {2, 2, 1, 0};
        if (count_updates(g) != updates[k]) {
            print_body(g);
            fail_msg("%s: %d updates with their products, not %d", steps[k], count_updates(g), updates[k]);
        }
        /* the loss's mean: only step_vg uses it, but a reduction is never dropped */
        assert_int_equal(count_op(g, FVM_OP_MEAN), 1);
        /* each field taken once, just after its struct (fields only between them): the struct dies
         * before the body's work, each weight held by its slot alone */
        for (int i = 0; i < g->ninstrs; i++) {
            const fvm_instr *in = &g->instrs[i];
            if (in->op != FVM_OP_FIELD)
                continue;
            for (int j = in->args[0] < g->nparams ? 0 : in->args[0] - g->nparams + 1; j < i; j++)
                if (g->instrs[j].op != FVM_OP_FIELD ||
                    (g->instrs[j].args[0] == in->args[0] && g->instrs[j].a.index == in->a.index)) {
                    print_body(g);
                    fail_msg("%s: field %s is not taken once, just after its struct", steps[k], in->name);
                }
        }
    }
    /* what an inlined call leaves unused is dropped when it cannot fail: exp of f32[3], not exp
     * of f32[?] (a shape the checker could not match), nor the sum */
    const fvm_func *dead = fvm_program_func(p, "dead")->inlined;
    assert_non_null(dead);
    assert_int_equal(count_op(dead, FVM_OP_EXP), 1);
    assert_int_equal(count_op(dead, FVM_OP_SUM), 2);
    /* calls are inlined too: plain's body is loss's and loss_aux's instructions */
    const fvm_func *plain = fvm_program_func(p, "plain")->inlined;
    assert_non_null(plain);
    assert_int_equal(count_op(plain, FVM_OP_CALL), 0);
    assert_int_equal(count_op(plain, FVM_OP_MATMUL), 2);
    assert_null(fvm_program_func(p, "layer")->inlined); /* nothing to inline: runs as written */
    fvm_program_free(p);
}

static unsigned seed = 7;

static fvm_value *rnd(fvm_dims s)
{
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++) {
        seed = seed * 1664525u + 1013904223u;
        fvm_tensor_set_f64(&t, i, (double)(seed >> 8) / (1 << 22) - 2.0);
    }
    return fvm_value_tensor_take(&t);
}

/* The inlined bodies give the written bodies' bits (a run with fusion off
 * runs the written ones), and leave the caller's arguments as they were. */
static void test_same_bits(void **state)
{
    (void)state;
    fvm_program *p = test_load("net.json", NET, true);
    for (int rows = 1; rows <= 33; rows += 16) {
        fvm_value *net = test_pair(test_pair(rnd((fvm_dims){2, {4, 8}}), rnd((fvm_dims){1, {8}})),
                                   test_pair(rnd((fvm_dims){2, {8, 2}}), rnd((fvm_dims){1, {2}})));
        fvm_value *batch = test_pair(rnd((fvm_dims){2, {rows, 4}}), rnd((fvm_dims){2, {rows, 2}}));
        fvm_value *lr = rnd((fvm_dims){0});
        static const char *const steps[] = {"step_aux", "step_vg", "step_field", "step_twice"};
        for (int k = 0; k < 4; k++) {
            fvm_value *args[3] = {net, batch, lr};
            fvm_value *a = test_call(p, steps[k], args, false), *b = test_call(p, steps[k], args, true);
            if (!fvm_value_identical(a, b))
                fail_msg("%s (%d rows): the inlined body differs from the written one", steps[k], rows);
            fvm_value *again = test_call(p, steps[k], args, false); /* the arguments were not written into */
            if (!fvm_value_identical(a, again))
                fail_msg("%s (%d rows): a second run differs", steps[k], rows);
            fvm_value_release(a);
            fvm_value_release(b);
            fvm_value_release(again);
        }
        fvm_value_release(net);
        fvm_value_release(batch);
        fvm_value_release(lr);
    }
    fvm_program_free(p);
}

/* Does f take a derivative or make a call the pass inlines (an unplaced
 * function; a grad or value_and_grad whose pullback is unplaced, a call of
 * an unplaced function; neither checking its arguments at entry)? */
static bool wants_body(const fvm_func *f)
{
    if (!f->ok || f->federated)
        return false;
    for (int i = 0; i < f->ninstrs; i++) {
        const fvm_instr *in = &f->instrs[i];
        const fvm_func *g = in->op == FVM_OP_CALL                                      ? in->a.fn
                            : in->op == FVM_OP_GRAD || in->op == FVM_OP_VALUE_AND_GRAD ? in->derived
                                                                                       : NULL;
        if (g && !g->federated && !g->entry_check && (in->op == FVM_OP_CALL || !in->a.fn->entry_check))
            return true;
    }
    return false;
}

/* Every program of programs/ and bench/ that takes such derivatives gets
 * its bodies: the pass never falls back to the written body on them (a
 * body that would not check, say). */
static void test_programs_get_bodies(void **state)
{
    (void)state;
    static const char *const dirs[] = {"programs", "bench"};
    int seen = 0;
    for (int k = 0; k < 2; k++) {
        DIR *dir = opendir(dirs[k]);
        assert_non_null(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t n = strlen(e->d_name);
            if (n < 6 || strcmp(e->d_name + n - 5, ".json"))
                continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
            fvm_diag d = {0};
            fvm_program *p = NULL;
            if (fvm_program_load(path, &p, &d) == FVM_OK && fvm_compile(p, &d) == FVM_OK) {
                for (int i = 0; i < p->nfuncs; i++) {
                    const fvm_func *f = p->funcs[i];
                    if (!wants_body(f))
                        continue;
                    seen++;
                    if (!f->inlined)
                        fail_msg("%s: '%s' has no inlined body", path, f->name);
                }
            }
            fvm_program_free(p);
            fvm_diag_clear(&d);
        }
        closedir(dir);
    }
    print_message("%d functions with inlined bodies\n", seen);
    assert_true(seen >= 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_same_bits),
        cmocka_unit_test(test_programs_get_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
