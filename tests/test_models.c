/* test_models.c - the model files of programs/models: each initialises from a key, gives a sensible
 * initial loss (about log(classes)), and learns: SGD through grad lowers the loss on a batch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "test_util.h"

static uint64_t rng = 99;
static double uniform(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A batch of the model's batch type: float pixels in [0, 1), integer labels in [0, classes). */
static fvm_value *batch_of(const fvm_type *t, int64_t b, int64_t classes)
{
    if (t->kind == FVM_T_STRUCT) {
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, t->u.strct.n);
        for (int i = 0; i < t->u.strct.n; i++)
            s->items[i] = batch_of(t->u.strct.elems[i], b, classes);
        return s;
    }
    fvm_dims d = t->u.tensor.dims;
    d.d[0] = b;
    fvm_tensor x;
    assert_int_equal(fvm_tensor_alloc(&x, t->u.tensor.dtype, &d, NULL), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&x); i++) {
        if (fvm_dtype_is_float(x.dtype))
            fvm_tensor_set_f64(&x, i, uniform());
        else
            fvm_tensor_set_i64(&x, i, (int64_t)(uniform() * (double)classes));
    }
    return fvm_value_tensor_take(&x);
}

static fvm_value *scalar(fvm_dtype dt, double v)
{
    fvm_tensor t;
    fvm_dims none = {0};
    assert_int_equal(fvm_tensor_alloc(&t, dt, &none, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, v);
    return fvm_value_tensor_take(&t);
}

static double call_scalar(fvm_vm *vm, const fvm_func *f, fvm_value **args, fvm_diag *d)
{
    fvm_value *r = NULL;
    if (fvm_vm_call(vm, f, args, &r, d)) {
        for (int i = 0; i < d->n; i++)
            print_error("%s\n", d->errs[i].msg);
        fail_msg("%s failed", f->name);
    }
    double v = fvm_tensor_get_f64(&r->t, 0);
    fvm_value_release(r);
    return v;
}

/* copy: the targets are the inputs (a task the character model can learn in a few steps) */
static void learns(const char *file, const char *prefix, int64_t classes, int64_t batch, double lr, int steps,
                   bool copy, double ratio)
{
    char path[256], name[128];
    snprintf(path, sizeof path, "tests/models/train_%s.json", file);
    fvm_diag d = {0};
    fvm_program *p = test_load_file(path, &d);
    fvm_vm *vm = NULL;
    assert_int_equal(fvm_vm_new(p, NULL, &vm, &d), FVM_OK);
    snprintf(name, sizeof name, "%s_init", prefix);
    const fvm_func *init = fvm_program_func(p, name);
    snprintf(name, sizeof name, "%s_loss", prefix);
    const fvm_func *loss = fvm_program_func(p, name), *step = fvm_program_func(p, "sgd_step");
    fvm_tensor k;
    fvm_dims kd = {.rank = 1, .d = {2}};
    assert_int_equal(fvm_tensor_alloc(&k, FVM_DTYPE_U32, &kd, NULL), FVM_OK);
    fvm_prng_key(7, fvm_tensor_data(&k));
    fvm_value *key = fvm_value_tensor_take(&k), *model = NULL;
    assert_int_equal(fvm_vm_call(vm, init, &key, &model, &d), FVM_OK);
    fvm_value *b = batch_of(loss->param_types[1], batch, classes), *rate = scalar(FVM_DTYPE_F32, lr);
    if (copy) {
        fvm_value_release(b->items[1]);
        b->items[1] = fvm_value_retain(b->items[0]);
    }
    fvm_value *args[3] = {model, b, rate};
    double first = call_scalar(vm, loss, args, &d), last = first;
    /* Small initial weights: close to a uniform guess, log(classes). */
    assert_true(fabs(first - log((double)classes)) < 0.5 * log((double)classes));
    for (int s = 0; s < steps; s++) {
        fvm_value *next = NULL;
        assert_int_equal(fvm_vm_call(vm, step, args, &next, &d), FVM_OK);
        fvm_value_release(args[0]);
        args[0] = next;
    }
    last = call_scalar(vm, loss, args, &d);
    print_message("%s: loss %.4f -> %.4f after %d steps\n", file, first, last, steps);
    assert_true(isfinite(last) && last < ratio * first);
    fvm_value_release(args[0]);
    fvm_value_release(b);
    fvm_value_release(rate);
    fvm_value_release(key);
    fvm_vm_free(vm);
    fvm_program_free(p);
    fvm_diag_clear(&d);
}

static void test_mlp_2nn(void **state)
{
    (void)state;
    learns("mlp_2nn", "mlp_2nn", 10, 16, 0.1, 20, false, 0.8);
}

static void test_cnn(void **state)
{
    (void)state;
    learns("cnn_mnist", "cnn", 10, 8, 0.05, 15, false, 0.8);
}

/* FedJAX's EMNIST CNN, 62 classes, trained with dropout. */
static void test_cnn_emnist(void **state)
{
    (void)state;
    learns("cnn_emnist", "cnn_emnist", 62, 8, 0.05, 15, false, 0.8);
}

static void test_char_lstm(void **state)
{
    (void)state;
    /* An LSTM under plain SGD first learns the symbols' frequencies: a smaller, steady drop. */
    learns("char_lstm", "char_lstm", 90, 2, 0.5, 12, true, 0.96);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_2nn),
        cmocka_unit_test(test_cnn),
        cmocka_unit_test(test_cnn_emnist),
        cmocka_unit_test(test_char_lstm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
