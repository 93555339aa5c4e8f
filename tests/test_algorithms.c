/* test_algorithms.c - the optimizers of programs/lib/optim.json against hand-computed steps, and the
 * federated algorithms of programs/ learning on synthetic data through the library, driven as the
 * round driver drives them (initialize, then next with the round's clients and their keys). */
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
#include "../vm/runtime/synthetic.h"
#include "test_util.h"

/* ---- programs --------------------------------------------------------------------- */

typedef struct algo {
    fvm_program *p;
    fvm_vm *vm;
    fvm_diag d;
} algo;

static void algo_open(algo *a, const char *path)
{
    memset(a, 0, sizeof *a);
    if (fvm_program_load(path, &a->p, &a->d) || fvm_compile(a->p, &a->d)) {
        test_print_errors(&a->d, "  ");
        fail_msg("%s does not check", path);
    }
    assert_int_equal(fvm_vm_new(a->p, NULL, &a->vm, &a->d), FVM_OK);
}

static void algo_close(algo *a)
{
    fvm_vm_free(a->vm);
    fvm_program_free(a->p);
    fvm_diag_clear(&a->d);
}

static const fvm_func *func(const algo *a, const char *name)
{
    const fvm_func *f = fvm_program_func(a->p, name);
    if (!f)
        fail_msg("no function '%s'", name);
    return f;
}

static fvm_value *call(algo *a, const fvm_func *f, fvm_value *const *args)
{
    fvm_value *r = NULL;
    if (fvm_vm_call(a->vm, f, args, &r, &a->d)) {
        test_print_errors(&a->d, "  ");
        fail_msg("%s failed", f->name);
    }
    return r;
}

/* ---- values ----------------------------------------------------------------------- */

static fvm_value *tensor_of(fvm_dtype dt, int rank, const int64_t *dims, const double *v)
{
    fvm_dims d = {.rank = rank};
    for (int i = 0; i < rank; i++)
        d.d[i] = dims[i];
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, dt, &d, NULL), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++)
        fvm_tensor_set_f64(&t, i, v ? v[i] : 0.0);
    return fvm_value_tensor_take(&t);
}

static fvm_value *scalar(double v)
{
    return tensor_of(FVM_DTYPE_F32, 0, NULL, &v);
}

static fvm_value *vector(int64_t n, const double *v)
{
    return tensor_of(FVM_DTYPE_F32, 1, &n, v);
}

/* A struct value's field by name, through the static type. */
static fvm_value *field(const fvm_value *v, const fvm_type *t, const char *name)
{
    assert_int_equal(t->kind, FVM_T_STRUCT);
    for (int i = 0; i < t->u.strct.n; i++)
        if (t->u.strct.names[i] && !strcmp(t->u.strct.names[i], name))
            return v->items[i];
    fail_msg("no field '%s'", name);
    return NULL;
}

/* ---- optimizers against hand-computed steps ------------------------------------------ */

/* Two steps of each optimizer of programs/lib/optim.json from x = [1, -2, 0.5] with the
 * gradients [0.1, -0.3, 0.4] and then [0.4, 0.1, 0.01]. The expected values are the
 * papers' formulas in double precision on the inputs and hyperparameters rounded to f32
 * (f(a) = struct.unpack("f", struct.pack("f", a))[0], applied to every gradient entry and
 * every hyperparameter first; sign(a) = (a > 0) - (a < 0)), by this Python:
 *
 *   x0 = [1.0, -2.0, 0.5]; gs = [[0.1, -0.3, 0.4], [0.4, 0.1, 0.01]]
 *   def adam(lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
 *       x = x0[:]; m = [0.0]*3; v = [0.0]*3; t = 0
 *       for g in gs:
 *           t += 1
 *           m = [b1*mi + (1-b1)*gi for mi, gi in zip(m, g)]
 *           v = [b2*vi + (1-b2)*gi*gi for vi, gi in zip(v, g)]
 *           x = [xi - lr*(mi/(1-b1**t))/(sqrt(vi/(1-b2**t)) + eps) for xi, mi, vi in zip(x, m, v)]
 *       return x, m + v + [t]
 *   def yogi(lr=0.1, b1=0.9, b2=0.999, eps=1e-3, v0=1e-6):       # Zaheer et al., Algorithm 2
 *       ... m as adam; v = [vi - (1-b2)*gi*gi*sign(vi - gi*gi) ...]; x = [xi - lr*mi/(sqrt(vi) + eps) ...]
 *   def adagrad(lr=0.1, eps=1e-7, init=0.1):
 *       ... G = [Gi + gi*gi ...]; x = [xi - lr*gi/(sqrt(Gi) + eps) ...]
 *   def fedopt(kind, lr=0.1, b1=0.9, b2=0.99, tau=1e-3):         # Reddi et al., Algorithm 2
 *       x = x0[:]; m = [0.0]*3; v = [tau*tau]*3
 *       for g in gs:
 *           m = [b1*mi + (1-b1)*gi ...]
 *           v = adagrad: v + g*g | yogi: v - (1-b2)*g*g*sign(v - g*g) | adam: b2*v + (1-b2)*g*g
 *           x = [xi - lr*mi/(sqrt(vi) + tau) ...]
 *   sgd (lr 0.1): x - lr*g; momentum (lr 0.1, beta 0.9): v = beta*v + g, x -= lr*v;
 *   nesterov: v = beta*v + g, x -= lr*(g + beta*v).
 *
 * The third coordinate's second gradient is small (g*g < v): Yogi's sign is then +1 and
 * its v falls by (1 - beta2) g*g, where Adam's falls by (1 - beta2) (v - g*g). */
typedef struct opt_case {
    const char *init, *update;
    int ninit, nhyper;
    double init_args[2], hyper[4];
    double x[3];
    int nstate;
    double state[7]; /* the state's leaves in order */
} opt_case;

static const opt_case opt_cases[] = {
    {"sgd_init", "sgd_update", 0, 1, {0}, {0.1}, {0.949999999, -1.98, 0.458999999}, 0, {0}},
    {"momentum_init",
     "momentum_update",
     0,
     2,
     {0},
     {0.1, 0.9},
     {0.940999998, -1.953, 0.422999999},
     3,
     {0.490000005, -0.170000002, 0.369999996}},
    {"nesterov_init",
     "nesterov_update",
     0,
     2,
     {0},
     {0.1, 0.9},
     {0.896899999, -1.9377, 0.389699999},
     3,
     {0.490000005, -0.170000002, 0.369999996}},
    {"adam_init",
     "adam_update",
     0,
     4,
     {0},
     {0.1, 0.9, 0.999, 1e-8},
     {0.81156236, -1.85997815, 0.331154438},
     7,
     {0.0490000122, -0.0170000043, 0.0370000084, 0.000169987817, 9.99087223e-05, 0.000159937948, 2}},
    {"yogi_init",
     "yogi_update",
     1,
     4,
     {1e-6},
     {0.1, 0.9, 0.999, 1e-3},
     {0.420241241, -1.56150307, -0.06259411},
     6,
     {0.0490000122, -0.0170000043, 0.0370000084, 0.000170997816, 0.00010099872, 0.000160897946}},
    {"adagrad_init",
     "adagrad_update",
     1,
     2,
     {0.1},
     {0.1, 1e-7},
     {0.892868852, -1.95353597, 0.419592776},
     3,
     {0.270000007, 0.200000009, 0.260100006}},
    {"fedopt_init",
     "fedadagrad_update",
     1,
     3,
     {1e-3},
     {0.1, 0.9, 1e-3},
     {0.978244038, -1.98467438, 0.480800935},
     6,
     {0.0490000122, -0.0170000043, 0.0370000084, 0.170001005, 0.100001007, 0.160101005}},
    {"fedopt_init",
     "fedyogi_update",
     1,
     4,
     {1e-3},
     {0.1, 0.9, 0.99, 1e-3},
     {0.793506048, -1.8511921, 0.31222472},
     6,
     {0.0490000122, -0.0170000043, 0.0370000084, 0.00170099843, 0.00100099912, 0.00159999852}},
    {"fedopt_init",
     "fedadam_update",
     1,
     4,
     {1e-3},
     {0.1, 0.9, 0.99, 1e-3},
     {0.793468006, -1.85096258, 0.311836176},
     6,
     {0.0490000122, -0.0170000043, 0.0370000084, 0.00169997853, 0.000991979237, 0.00158597865}},
};

/* Appends the leaves of a tensor tree to out[*n...]. */
static void leaves(const fvm_value *v, double *out, int *n, int cap)
{
    if (v->kind == FVM_V_STRUCT) {
        for (int64_t i = 0; i < v->n; i++)
            leaves(v->items[i], out, n, cap);
        return;
    }
    for (int64_t i = 0; i < fvm_tensor_count(&v->t); i++) {
        assert_true(*n < cap);
        out[(*n)++] = fvm_tensor_get_f64(&v->t, i);
    }
}

static void expect_close(const char *what, int i, double got, double want)
{
    /* f32 arithmetic against the double-precision formulas */
    if (!(fabs(got - want) <= 2e-6 * fabs(want) + 1e-10))
        fail_msg("%s[%d]: got %.9g, expected %.9g", what, i, got, want);
}

static void test_optimizers(void **unused)
{
    (void)unused;
    algo a;
    algo_open(&a, "programs/lib/optim.json");
    static const double x0[3] = {1.0, -2.0, 0.5}, gs[2][3] = {{0.1, -0.3, 0.4}, {0.4, 0.1, 0.01}};
    for (size_t c = 0; c < sizeof opt_cases / sizeof *opt_cases; c++) {
        const opt_case *oc = &opt_cases[c];
        fvm_value *args[8] = {vector(3, x0)};
        for (int i = 0; i < oc->ninit; i++)
            args[1 + i] = scalar(oc->init_args[i]);
        fvm_value *state = call(&a, func(&a, oc->init), args);
        for (int i = 0; i < oc->ninit; i++)
            fvm_value_release(args[1 + i]);
        fvm_value *x = args[0];
        const fvm_func *up = func(&a, oc->update);
        assert_int_equal(up->nparams, 3 + oc->nhyper);
        for (int step = 0; step < 2; step++) {
            fvm_value *uargs[8] = {x, vector(3, gs[step]), state};
            for (int i = 0; i < oc->nhyper; i++)
                uargs[3 + i] = scalar(oc->hyper[i]);
            fvm_value *r = call(&a, up, uargs);
            for (int i = 1; i < 3 + oc->nhyper; i++)
                if (i != 2)
                    fvm_value_release(uargs[i]);
            fvm_value_release(x);
            fvm_value_release(state);
            x = fvm_value_retain(field(r, up->result_type, "params"));
            state = fvm_value_retain(field(r, up->result_type, "state"));
            fvm_value_release(r);
        }
        double got[8];
        int n = 0;
        leaves(x, got, &n, 8);
        assert_int_equal(n, 3);
        for (int i = 0; i < 3; i++)
            expect_close(oc->update, i, got[i], oc->x[i]);
        n = 0;
        leaves(state, got, &n, 8);
        assert_int_equal(n, oc->nstate);
        for (int i = 0; i < n; i++)
            expect_close(oc->init, i, got[i], oc->state[i]);
        print_message("%s: ok\n", oc->update);
        fvm_value_release(x);
        fvm_value_release(state);
    }
    algo_close(&a);
}

/* ---- federated data ----------------------------------------------------------------- */

/* A client's examples <x, y> stored by columns, as a dataset file gives them. */
static fvm_value *client_seq(fvm_tensor *x, fvm_tensor *y)
{
    int64_t n = x->shape.d[0];
    fvm_value *cols = fvm_value_list(FVM_V_STRUCT, 2);
    assert_non_null(cols);
    cols->items[0] = fvm_value_tensor_take(x);
    cols->items[1] = fvm_value_tensor_take(y);
    fvm_value *s = fvm_value_seq_cols_take(n, cols);
    assert_non_null(s);
    return s;
}

/* n clients of FedProx's Synthetic(alpha, beta) with 20 to 60
 * examples each: all but the last 'held' examples of every client as
 * {<x=f32[60],y=i32[]>*}@CLIENTS, and the held-out examples of all clients
 * together as the centralized test sequence. */
typedef struct fed_data {
    fvm_value *train, *test;
    int64_t clients, examples;
} fed_data;

static void synthetic_data(fed_data *fd, int64_t n, double alpha, double beta, uint64_t seed)
{
    enum { held = 6 };
    fvm_synth_config c;
    fvm_synth_defaults(FVM_SYNTH_FEDPROX, &c);
    c.clients = n;
    c.alpha = alpha;
    c.beta = beta;
    c.min_examples = 20;
    c.max_examples = 60;
    c.seed = seed;
    fvm_synth *s = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_synth_new(&c, &s, &d), FVM_OK);
    fd->clients = n;
    fd->examples = 0;
    fd->train = fvm_value_list(FVM_V_CLIENTS, n);
    assert_non_null(fd->train);
    fvm_tensor tx, ty;
    fvm_dims xd = {.rank = 2, .d = {n * held, 60}}, yd = {.rank = 1, .d = {n * held}};
    assert_int_equal(fvm_tensor_alloc(&tx, FVM_DTYPE_F32, &xd, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&ty, FVM_DTYPE_I32, &yd, NULL), FVM_OK);
    for (int64_t k = 0; k < n; k++) {
        fvm_tensor x, y, cx, cy;
        assert_int_equal(fvm_synth_client(s, k, &x, &y, &d), FVM_OK);
        int64_t m = x.shape.d[0] - held;
        fvm_dims cxd = {.rank = 2, .d = {m, 60}}, cyd = {.rank = 1, .d = {m}};
        assert_int_equal(fvm_tensor_alloc(&cx, FVM_DTYPE_F32, &cxd, NULL), FVM_OK);
        assert_int_equal(fvm_tensor_alloc(&cy, FVM_DTYPE_I32, &cyd, NULL), FVM_OK);
        const float *xs = fvm_tensor_data(&x);
        const int32_t *ys = fvm_tensor_data(&y);
        memcpy(fvm_tensor_data(&cx), xs, sizeof(float) * (size_t)(m * 60));
        memcpy(fvm_tensor_data(&cy), ys, sizeof(int32_t) * (size_t)m);
        memcpy((float *)fvm_tensor_data(&tx) + k * held * 60, xs + m * 60, sizeof(float) * held * 60);
        memcpy((int32_t *)fvm_tensor_data(&ty) + k * held, ys + m, sizeof(int32_t) * held);
        fvm_tensor_release(&x);
        fvm_tensor_release(&y);
        fd->examples += m;
        fd->train->items[k] = client_seq(&cx, &cy);
    }
    fd->test = client_seq(&tx, &ty);
    fvm_synth_free(s);
    fvm_diag_clear(&d);
}

static void fed_data_free(fed_data *fd)
{
    fvm_value_release(fd->train);
    fvm_value_release(fd->test);
}

static fvm_value *key_value(const uint32_t k[2])
{
    fvm_tensor t;
    fvm_dims d = {.rank = 1, .d = {2}};
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_U32, &d, NULL), FVM_OK);
    memcpy(fvm_tensor_data(&t), k, 2 * sizeof *k);
    return fvm_value_tensor_take(&t);
}

/* The keys of the round driver's convention: the round key is
 * random_fold_in(random_key(seed), round), rounds numbered from 1 (round 0's
 * key is initialize's), and client
 * i's key random_fold_in(round key, i), i its index in the dataset. */
static void round_key(uint64_t seed, int64_t round, uint32_t out[2])
{
    uint32_t base[2];
    fvm_prng_key(seed, base);
    fvm_prng_fold_in(base, (uint32_t)round, out);
}

static fvm_value *client_keys(uint64_t seed, int64_t round, int64_t n)
{
    uint32_t rk[2], k[2];
    round_key(seed, round, rk);
    fvm_value *keys = fvm_value_list(FVM_V_CLIENTS, n);
    assert_non_null(keys);
    for (int64_t i = 0; i < n; i++) {
        fvm_prng_fold_in(rk, (uint32_t)i, k);
        keys->items[i] = key_value(k);
    }
    return keys;
}

/* ---- rounds ------------------------------------------------------------------------- */

static double num(const fvm_value *v)
{
    assert_int_equal(v->kind, FVM_V_TENSOR);
    return fvm_tensor_get_f64(&v->t, 0);
}

typedef struct metrics {
    double loss, accuracy, examples;
} metrics;

static metrics metrics_of(const fvm_value *m, const fvm_type *t)
{
    if (t->kind == FVM_T_FED)
        t = t->u.fed.member;
    metrics r = {num(field(m, t, "loss")), num(field(m, t, "accuracy")), num(field(m, t, "examples"))};
    return r;
}

/* Binds next's parameters by name as the round driver does: the state first,
 * then 'train', 'client_keys' and 'key'. */
static fvm_value *next_round(algo *a, fvm_value *state, const fed_data *fd, uint64_t seed, int64_t round, metrics *m)
{
    const fvm_func *next = func(a, "next");
    fvm_value *args[8] = {state};
    assert_true(next->nparams <= 8);
    for (int i = 1; i < next->nparams; i++) {
        const char *name = next->param_names[i];
        if (!strcmp(name, "train"))
            args[i] = fvm_value_retain(fd->train);
        else if (!strcmp(name, "client_keys"))
            args[i] = client_keys(seed, round, fd->clients);
        else if (!strcmp(name, "key")) {
            uint32_t k[2];
            round_key(seed, round, k);
            args[i] = key_value(k);
        } else
            fail_msg("next has an unknown parameter '%s'", name);
    }
    fvm_value *res = call(a, next, args);
    for (int i = 1; i < next->nparams; i++)
        fvm_value_release(args[i]);
    *m = metrics_of(res->items[1], next->result_type->u.strct.elems[1]);
    fvm_value *s = fvm_value_retain(res->items[0]);
    fvm_value_release(res);
    return s;
}

static metrics evaluate(algo *a, fvm_value *state, const fed_data *fd)
{
    const fvm_func *ev = func(a, "evaluate");
    fvm_value *args[2] = {state, fd->test};
    fvm_value *res = call(a, ev, args);
    metrics m = metrics_of(res, ev->result_type);
    fvm_value_release(res);
    return m;
}

/* initialize, given the key of round 0 when it takes 'key' (the round
 * driver's convention: initialize's key is no round's). */
static fvm_value *initial_state(algo *a, uint64_t seed)
{
    const fvm_func *init = func(a, "initialize");
    if (init->nparams == 0)
        return call(a, init, NULL);
    assert_int_equal(init->nparams, 1);
    assert_string_equal(init->param_names[0], "key");
    uint32_t k[2];
    round_key(seed, 0, k);
    fvm_value *key = key_value(k), *state = call(a, init, &key);
    fvm_value_release(key);
    return state;
}

/* Runs initialize and 'rounds' rounds; m[r] are round r+1's metrics (of the
 * model before that round's update), and *test the test metrics at the end.
 * Returns the final state. */
static fvm_value *train(algo *a, const fed_data *fd, int rounds, uint64_t seed, metrics *m, metrics *test)
{
    fvm_value *state = initial_state(a, seed);
    for (int r = 0; r < rounds; r++) {
        fvm_value *s = next_round(a, state, fd, seed, r + 1, &m[r]);
        fvm_value_release(state);
        state = s;
        assert_true(m[r].examples == (double)fd->examples);
    }
    if (test)
        *test = evaluate(a, state, fd);
    return state;
}

/* ---- the algorithms learn ------------------------------------------------------------- */

/* Ten clients of Synthetic(1, 1) (FedProx's heterogeneous setting: every client its own
 * softmax model and feature distribution), all in every round. */
static void synthetic_clients(fed_data *fd)
{
    synthetic_data(fd, 10, 1.0, 1.0, 3);
}

/* Runs 'rounds' rounds from initialize and asks that the loss (of the model each
 * round starts from, on the clients' training examples) falls every round and
 * ends below 'ratio' times the first, that the accuracy rises by 'gain', and
 * that the final model does well on the held-out examples. */
static void learns(const char *path, int rounds, double ratio, double gain, double test_accuracy)
{
    algo a;
    algo_open(&a, path);
    fed_data fd;
    synthetic_clients(&fd);
    metrics m[16], t;
    assert_true(rounds <= 16);
    fvm_value *state = train(&a, &fd, rounds, 0, m, &t);
    char line[512];
    int len = snprintf(line, sizeof line, "%s: loss/accuracy by round", path);
    for (int r = 0; r < rounds && len < (int)sizeof line; r++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %.3f/%.3f", m[r].loss, m[r].accuracy);
    print_message("%s; test %.3f/%.3f\n", line, t.loss, t.accuracy);
    /* the zero model: a uniform guess */
    assert_true(fabs(m[0].loss - log(10.0)) < 1e-5);
    for (int r = 1; r < rounds; r++)
        if (!(m[r].loss < m[r - 1].loss))
            fail_msg("%s: the loss rose in round %d: %g -> %g", path, r + 1, m[r - 1].loss, m[r].loss);
    assert_true(m[rounds - 1].loss < ratio * m[0].loss);
    assert_true(m[rounds - 1].accuracy > m[0].accuracy + gain);
    assert_true(t.loss < 0.65 * log(10.0));
    assert_true(t.accuracy > test_accuracy);
    fvm_value_release(state);
    fed_data_free(&fd);
    algo_close(&a);
}

static void test_fedsgd(void **unused)
{
    (void)unused;
    learns("programs/fedsgd.json", 6, 0.6, 0.3, 0.5);
}

static void test_fedavg(void **unused)
{
    (void)unused;
    learns("programs/fedavg.json", 6, 0.6, 0.3, 0.5);
}

static void test_fedavgm(void **unused)
{
    (void)unused;
    learns("programs/fedavgm.json", 6, 0.6, 0.3, 0.5);
}

static void test_fedprox(void **unused)
{
    (void)unused;
    learns("programs/fedprox.json", 6, 0.6, 0.3, 0.5);
}

static void test_fedadam(void **unused)
{
    (void)unused;
    learns("programs/fedadam.json", 6, 0.6, 0.3, 0.5);
}

static void test_fedyogi(void **unused)
{
    (void)unused;
    learns("programs/fedyogi.json", 6, 0.6, 0.3, 0.5);
}

static void test_fedadagrad(void **unused)
{
    (void)unused;
    learns("programs/fedadagrad.json", 6, 0.6, 0.3, 0.5);
}

/* FedProx with mu = 0 is FedAvg: fedprox_round(state, train, keys, 0) gives bit for bit
 * the states and metrics of fedavg.json's next, round after round; with fedprox.json's
 * own mu = 1 the model differs. */
static void test_fedprox_mu0_is_fedavg(void **unused)
{
    (void)unused;
    algo avg, prox;
    algo_open(&avg, "programs/fedavg.json");
    algo_open(&prox, "programs/fedprox.json");
    fed_data fd;
    synthetic_clients(&fd);
    fvm_value *sa = call(&avg, func(&avg, "initialize"), NULL);
    fvm_value *sp = call(&prox, func(&prox, "initialize"), NULL);
    assert_true(fvm_value_identical(sa, sp));
    const fvm_func *round = func(&prox, "fedprox_round");
    fvm_value *zero = scalar(0.0);
    for (int r = 1; r <= 3; r++) {
        metrics ma;
        fvm_value *na = next_round(&avg, sa, &fd, 0, r, &ma);
        fvm_value *args[4] = {sp, fd.train, client_keys(0, r, fd.clients), zero};
        fvm_value *res = call(&prox, round, args);
        fvm_value_release(args[2]);
        metrics mp = metrics_of(res->items[1], round->result_type->u.strct.elems[1]);
        assert_true(fvm_value_identical(na, res->items[0]));
        assert_memory_equal(&ma, &mp, sizeof ma);
        fvm_value_release(sa);
        fvm_value_release(sp);
        sa = na;
        sp = fvm_value_retain(res->items[0]);
        fvm_value_release(res);
    }
    metrics m1;
    fvm_value *with_mu = next_round(&prox, sp, &fd, 0, 4, &m1), *plain = next_round(&avg, sa, &fd, 0, 4, &m1);
    assert_false(fvm_value_identical(with_mu, plain));
    fvm_value_release(with_mu);
    fvm_value_release(plain);
    fvm_value_release(zero);
    fvm_value_release(sa);
    fvm_value_release(sp);
    fed_data_free(&fd);
    algo_close(&avg);
    algo_close(&prox);
}

/* The example-weighted loss and accuracy of a softmax-regression model <w=f32[60,10],b=f32[10]>
 * over the clients' examples, computed here in double precision. */
static void reference_metrics(const fvm_value *model, const fvm_value *clients, metrics *out)
{
    const fvm_tensor *w = &model->items[0]->t, *b = &model->items[1]->t;
    double loss = 0, right = 0, n = 0;
    for (int64_t k = 0; k < clients->n; k++) {
        const fvm_value *cols = clients->items[k]->cols;
        const fvm_tensor *x = &cols->items[0]->t, *y = &cols->items[1]->t;
        for (int64_t i = 0; i < x->shape.d[0]; i++) {
            double logits[10], top = -INFINITY, sum = 0;
            int best = 0;
            for (int c = 0; c < 10; c++) {
                logits[c] = fvm_tensor_get_f64(b, c);
                for (int j = 0; j < 60; j++)
                    logits[c] += fvm_tensor_get_f64(x, i * 60 + j) * fvm_tensor_get_f64(w, j * 10 + c);
                if (logits[c] > top) {
                    top = logits[c];
                    best = c;
                }
            }
            for (int c = 0; c < 10; c++)
                sum += exp(logits[c] - top);
            int64_t label = fvm_tensor_get_i64(y, i);
            loss += log(sum) - (logits[label] - top);
            right += best == label;
            n += 1;
        }
    }
    out->loss = loss / n;
    out->accuracy = right / n;
    out->examples = n;
}

/* federated_evaluation.json: the metrics of a model over every client's examples, as
 * computed directly; a client without examples changes nothing; the state comes back
 * unchanged; a model trained by fedavg.json does better than the zero model; and on one
 * client holding the test examples it agrees bit for bit with fedavg.json's evaluate. */
static void test_federated_evaluation(void **unused)
{
    (void)unused;
    algo avg, ev;
    algo_open(&avg, "programs/fedavg.json");
    algo_open(&ev, "programs/federated_evaluation.json");
    fed_data fd;
    synthetic_clients(&fd);
    metrics m[3], test;
    fvm_value *state = train(&avg, &fd, 3, 0, m, &test);
    fvm_value *model = state->items[0];

    /* the clients and one more without examples */
    fvm_value *clients = fvm_value_list(FVM_V_CLIENTS, fd.clients + 1);
    for (int64_t k = 0; k < fd.clients; k++)
        clients->items[k] = fvm_value_retain(fd.train->items[k]);
    fvm_tensor x0, y0;
    fvm_dims xd = {.rank = 2, .d = {0, 60}}, yd = {.rank = 1, .d = {0}};
    assert_int_equal(fvm_tensor_alloc(&x0, FVM_DTYPE_F32, &xd, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&y0, FVM_DTYPE_I32, &yd, NULL), FVM_OK);
    clients->items[fd.clients] = client_seq(&x0, &y0);

    const fvm_func *next = func(&ev, "next");
    const fvm_type *mt = next->result_type->u.strct.elems[1];
    fvm_value *args[2] = {model, clients};
    fvm_value *res = call(&ev, next, args);
    assert_true(fvm_value_identical(res->items[0], model));
    metrics got = metrics_of(res->items[1], mt), want;
    fvm_value_release(res);
    reference_metrics(model, fd.train, &want);
    print_message("federated evaluation of the model after 3 rounds of FedAvg: loss %.6f (reference %.6f), "
                  "accuracy %.4f (%.4f), %g examples\n",
                  got.loss, want.loss, got.accuracy, want.accuracy, got.examples);
    assert_true(got.examples == want.examples && got.examples == (double)fd.examples);
    assert_true(fabs(got.loss - want.loss) < 1e-5 * want.loss);
    assert_true(fabs(got.accuracy - want.accuracy) <= 1.0 / want.examples + 1e-9);

    /* the zero model from initialize */
    fvm_value *zero = call(&ev, func(&ev, "initialize"), NULL);
    args[0] = zero;
    res = call(&ev, next, args);
    metrics z = metrics_of(res->items[1], mt);
    fvm_value_release(res);
    assert_true(fabs(z.loss - log(10.0)) < 1e-5);
    assert_true(got.loss < 0.7 * z.loss && got.accuracy > z.accuracy + 0.3);

    /* one client holding the test examples = fedavg.json's evaluate */
    fvm_vm_forget_clients(ev.vm);
    fvm_value *one = fvm_value_list(FVM_V_CLIENTS, 1);
    one->items[0] = fvm_value_retain(fd.test);
    args[0] = model;
    args[1] = one;
    res = call(&ev, next, args);
    metrics t = metrics_of(res->items[1], mt);
    fvm_value_release(res);
    assert_memory_equal(&t, &test, sizeof t);

    fvm_value_release(one);
    fvm_value_release(zero);
    fvm_value_release(clients);
    fvm_value_release(state);
    fed_data_free(&fd);
    algo_close(&avg);
    algo_close(&ev);
}

/* ---- FedAvg with the 2NN on images ---------------------------------------------------- */

static uint64_t lcg = 12345;
static double uniform01(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

/* n Fashion-MNIST-shaped examples <pixels=u8[28,28],label=i32[]> of an easy task: an image
 * of class c has bright rows 2c+3 and 2c+4 over noise. */
static fvm_value *image_seq(int64_t n)
{
    fvm_tensor px, lb;
    fvm_dims pd = {.rank = 3, .d = {n, 28, 28}}, ld = {.rank = 1, .d = {n}};
    assert_int_equal(fvm_tensor_alloc(&px, FVM_DTYPE_U8, &pd, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&lb, FVM_DTYPE_I32, &ld, NULL), FVM_OK);
    uint8_t *p = fvm_tensor_data(&px);
    int32_t *l = fvm_tensor_data(&lb);
    for (int64_t i = 0; i < n; i++) {
        int c = (int)(uniform01() * 10);
        l[i] = c;
        for (int r = 0; r < 28; r++)
            for (int col = 0; col < 28; col++) {
                bool lit = r == 2 * c + 3 || r == 2 * c + 4;
                p[(i * 28 + r) * 28 + col] = (uint8_t)((lit ? 160 : 0) + uniform01() * 60);
            }
    }
    return client_seq(&px, &lb);
}

/* programs/fedavg_2nn.json (E = 1, B = 10, client learning rate 0.05) on 5 clients of 60
 * such images: the loss falls and the accuracy rises in 3 rounds, and evaluate on 200
 * other images agrees. */
static void test_fedavg_2nn(void **unused)
{
    (void)unused;
    algo a;
    algo_open(&a, "programs/fedavg_2nn.json");
    fed_data fd = {.clients = 5, .examples = 300};
    fd.train = fvm_value_list(FVM_V_CLIENTS, 5);
    for (int k = 0; k < 5; k++)
        fd.train->items[k] = image_seq(60);
    fd.test = image_seq(200);
    fvm_value *state = initial_state(&a, 0);
    metrics before = evaluate(&a, state, &fd), m[4], after;
    fvm_value_release(state);
    state = train(&a, &fd, 4, 0, m, &after);
    print_message("fedavg_2nn: loss/accuracy by round %.3f/%.3f %.3f/%.3f %.3f/%.3f %.3f/%.3f; test %.3f/%.3f -> "
                  "%.3f/%.3f\n",
                  m[0].loss, m[0].accuracy, m[1].loss, m[1].accuracy, m[2].loss, m[2].accuracy, m[3].loss,
                  m[3].accuracy, before.loss, before.accuracy, after.loss, after.accuracy);
    for (int r = 1; r < 4; r++)
        assert_true(m[r].loss < m[r - 1].loss);
    assert_true(m[3].loss < 0.5 * m[0].loss && m[3].accuracy > m[0].accuracy + 0.4);
    assert_true(after.loss < 0.5 * before.loss && after.accuracy > 0.8);
    fvm_value_release(state);
    fed_data_free(&fd);
    algo_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimizers),
        cmocka_unit_test(test_fedsgd),
        cmocka_unit_test(test_fedavg),
        cmocka_unit_test(test_fedavgm),
        cmocka_unit_test(test_fedprox),
        cmocka_unit_test(test_fedadam),
        cmocka_unit_test(test_fedyogi),
        cmocka_unit_test(test_fedadagrad),
        cmocka_unit_test(test_fedprox_mu0_is_fedavg),
        cmocka_unit_test(test_federated_evaluation),
        cmocka_unit_test(test_fedavg_2nn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
