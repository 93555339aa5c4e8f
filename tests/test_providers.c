/* test_providers.c - kernel providers (vm/kernels/provider.h): every kernel of each provider (the portable one) against the CPU
 * provider's on random and special inputs, bit for bit (errors too), but for the products the CPU provider hands to BLAS, within a bound. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/kernels/provider.h"
#include "test_tensors.h"

/* The providers compared with the CPU one: each runs every test below. */
static const fvm_kernels *(*const others[])(void) = {fvm_kernels_portable};

static const fvm_kernels *cpu, *port; /* port: the one being compared */

static uint64_t rng = 12345;

static uint32_t next32(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 32);
}

/* Values that tell kernels apart: zeros of both signs, infinities, NaN,
 * tiny, huge and integer extremes, and random ones of both signs. */
static double special(void)
{
    static const double v[] = {0.0,           -0.0,         1.0,   -1.0,    0.5,  -2.5,   INFINITY,
                               -INFINITY,     NAN,          1e-40, -1e-310, 3e38, -1e300, 2147483647.0,
                               -2147483648.0, 4294967296.0, 255.0, 256.0,   1e19, 7.0};
    return v[next32() % (sizeof v / sizeof *v)];
}

static double value(bool ints)
{
    uint32_t r = next32();
    if (r % 4 == 0)
        return special();
    double x = ((double)(r >> 8) / (1 << 24) - 0.5) * 8.0;
    return ints ? floor(x * 20) : x;
}

static fvm_tensor rnd(fvm_dtype dt, fvm_dims s)
{
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, dt, &s, NULL), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++) {
        if (dt == FVM_DTYPE_BOOL) {
            ((uint8_t *)fvm_tensor_data(&t))[i] = next32() % 2;
            continue;
        }
        fvm_tensor_set_f64(&t, i, value(!fvm_dtype_is_float(dt)));
    }
    return t;
}

/* The shape of rank dimensions, d[0] to d[rank - 1]. */
static fvm_dims dims_of(int rank, const int64_t *d)
{
    fvm_dims s = {.rank = rank};
    for (int i = 0; i < rank; i++)
        s.d[i] = d[i];
    return s;
}

/* The two providers' statuses, errors and outputs agree: the same status,
 * the same messages, and when it succeeded the same bytes. */
static void agree(const char *what, fvm_status sc, fvm_diag *dc, const fvm_tensor *oc, fvm_status sp, fvm_diag *dp,
                  const fvm_tensor *op)
{
    if (sc != sp)
        fail_msg("%s: cpu %d, portable %d (%s)", what, sc, sp, sc ? dc->errs[0].msg : dp->errs[0].msg);
    assert_int_equal(dc->n, dp->n);
    for (int i = 0; i < dc->n; i++)
        if (strcmp(dc->errs[i].msg, dp->errs[i].msg))
            fail_msg("%s: cpu says '%s', portable '%s'", what, dc->errs[i].msg, dp->errs[i].msg);
    fvm_diag_clear(dc);
    fvm_diag_clear(dp);
    if (sc == FVM_OK && !fvm_tensor_identical(oc, op)) {
        for (int64_t i = 0; i < fvm_tensor_count(oc); i++)
            if (memcmp((const char *)fvm_tensor_data(oc) + i * fvm_dtype_size(oc->dtype),
                       (const char *)fvm_tensor_data(op) + i * fvm_dtype_size(oc->dtype), fvm_dtype_size(oc->dtype)))
                fail_msg("%s: element %lld differs: cpu %.17g, portable %.17g", what, (long long)i,
                         fvm_tensor_get_f64(oc, i), fvm_tensor_get_f64(op, i));
        fail_msg("%s: outputs differ", what);
    }
}

static void test_lookup(void **state)
{
    (void)state;
    assert_ptr_equal(fvm_kernels_lookup("cpu"), cpu);
    assert_ptr_equal(fvm_kernels_lookup(port->name), port);
    assert_null(fvm_kernels_lookup("gpu"));
    assert_string_equal(cpu->name, "cpu");
    if (port == fvm_kernels_portable()) {
        /* its own kernels, and the CPU's where it has none */
        assert_string_equal(port->name, "portable");
        assert_true(port->unary != cpu->unary && port->fused != cpu->fused && port->matmul != cpu->matmul &&
                    port->conv2d != cpu->conv2d && port->reduce != cpu->reduce);
        assert_ptr_equal(port->argmax, cpu->argmax);
        assert_ptr_equal(port->alloc, cpu->alloc);
        assert_null(port->init);
    }
    /* every kernel member set, but the optional in-place query (the portable provider has none: its
     * update makes the product in out first) */
    const void *const *m = (const void *const *)&port->alloc;
    for (size_t i = 0; i < (sizeof(fvm_kernels) - offsetof(fvm_kernels, alloc)) / sizeof(void *); i++)
        if (i * sizeof(void *) != offsetof(fvm_kernels, matmul_update_in_place) - offsetof(fvm_kernels, alloc))
            assert_non_null(m[i]);
    assert_ptr_equal(cpu->matmul_update_in_place, fvm_k_matmul_update_in_place);
    /* the in-place query goes with the update it answers for */
    fvm_kernels own = {.name = "own", .matmul_update = port->matmul_update}, none = {.name = "none"};
    fvm_kernels_complete(&own);
    fvm_kernels_complete(&none);
    assert_null(own.matmul_update_in_place);
    assert_ptr_equal(none.matmul_update, cpu->matmul_update);
    assert_ptr_equal(none.matmul_update_in_place, cpu->matmul_update_in_place);
    if (port == fvm_kernels_portable())
        assert_null(port->matmul_update_in_place);
}

/* ---- elementwise -------------------------------------------------------------------------- */

static void test_unary(void **state)
{
    (void)state;
    const int64_t sh[] = {3, 37};
    for (int op = 0; op < FVM_UN_COUNT; op++)
        for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", fvm_elementwise_unary_name((fvm_unary)op),
                     fvm_dtype_name((fvm_dtype)dt));
            fvm_tensor x = rnd((fvm_dtype)dt, dims_of(2, sh)), oc = junk((fvm_dtype)dt, x.shape),
                       op_ = junk((fvm_dtype)dt, x.shape);
            fvm_diag dc = {0}, dp = {0};
            fvm_status sc = cpu->unary((fvm_unary)op, &x, &oc, &dc), sp = port->unary((fvm_unary)op, &x, &op_, &dp);
            agree(what, sc, &dc, &oc, sp, &dp, &op_);
            if (sc == FVM_OK) { /* in place */
                fvm_tensor y;
                assert_int_equal(fvm_tensor_alloc(&y, x.dtype, &x.shape, NULL), FVM_OK);
                memcpy(fvm_tensor_data(&y), fvm_tensor_data(&x), fvm_tensor_bytes(&x));
                assert_int_equal(port->unary((fvm_unary)op, &y, &y, &dp), FVM_OK);
                assert_true(fvm_tensor_identical(&y, &oc));
                fvm_tensor_release(&y);
            }
            fvm_tensor_release(&x);
            fvm_tensor_release(&oc);
            fvm_tensor_release(&op_);
        }
}

/* Shapes of a and b and their broadcast: equal, scalars, rows, columns, outer products, rank 3. */
static const struct {
    int ra, rb, ro;
    int64_t a[3], b[3], o[3];
} pairs[] = {
    {2, 2, 2, {4, 33}, {4, 33}, {4, 33}},
    {0, 2, 2, {0}, {4, 33}, {4, 33}},
    {2, 0, 2, {4, 33}, {0}, {4, 33}},
    {2, 1, 2, {5, 7}, {7}, {5, 7}},
    {2, 2, 2, {5, 1}, {1, 9}, {5, 9}},
    {3, 2, 3, {2, 1, 6}, {3, 1}, {2, 3, 6}},
    {0, 0, 0, {0}, {0}, {0}},
    {1, 1, 1, {0}, {1}, {0}},
};

static void test_binary(void **state)
{
    (void)state;
    for (int op = 0; op < FVM_BIN_COUNT; op++)
        for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++)
            for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++) {
                char what[80];
                snprintf(what, sizeof what, "%s %s, shapes %zu", fvm_elementwise_binary_name((fvm_binary)op),
                         fvm_dtype_name((fvm_dtype)dt), p);
                fvm_tensor a = rnd((fvm_dtype)dt, dims_of(pairs[p].ra, pairs[p].a));
                fvm_tensor b = rnd((fvm_dtype)dt, dims_of(pairs[p].rb, pairs[p].b));
                fvm_dtype od = fvm_elementwise_compares((fvm_binary)op) ? FVM_DTYPE_BOOL : (fvm_dtype)dt;
                fvm_tensor oc = junk(od, dims_of(pairs[p].ro, pairs[p].o)), op_ = junk(od, oc.shape);
                fvm_diag dc = {0}, dp = {0};
                fvm_status sc = cpu->binary((fvm_binary)op, &a, &b, &oc, &dc);
                fvm_status sp = port->binary((fvm_binary)op, &a, &b, &op_, &dp);
                agree(what, sc, &dc, &oc, sp, &dp, &op_);
                fvm_tensor_release(&a);
                fvm_tensor_release(&b);
                fvm_tensor_release(&oc);
                fvm_tensor_release(&op_);
            }
    /* operands of two dtypes: the same type error */
    const int64_t n[] = {3};
    fvm_tensor a = rnd(FVM_DTYPE_F32, dims_of(1, n)), b = rnd(FVM_DTYPE_F64, dims_of(1, n));
    fvm_tensor oc = junk(FVM_DTYPE_F32, a.shape), op_ = junk(FVM_DTYPE_F32, a.shape);
    fvm_diag dc = {0}, dp = {0};
    fvm_status sc = cpu->binary(FVM_BIN_ADD, &a, &b, &oc, &dc), sp = port->binary(FVM_BIN_ADD, &a, &b, &op_, &dp);
    assert_int_equal(sc, FVM_ERR_TYPE);
    agree("mixed dtypes", sc, &dc, &oc, sp, &dp, &op_);
    fvm_tensor_release(&a);
    fvm_tensor_release(&b);
    fvm_tensor_release(&oc);
    fvm_tensor_release(&op_);
}

static void test_select_cast_fill(void **state)
{
    (void)state;
    for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++)
        for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++) {
            fvm_tensor c = rnd(FVM_DTYPE_BOOL, dims_of(pairs[p].ra, pairs[p].a));
            fvm_tensor a = rnd((fvm_dtype)dt, dims_of(pairs[p].rb, pairs[p].b));
            fvm_tensor b = rnd((fvm_dtype)dt, dims_of(pairs[p].ro, pairs[p].o));
            fvm_tensor oc = junk((fvm_dtype)dt, dims_of(pairs[p].ro, pairs[p].o)), op_ = junk((fvm_dtype)dt, oc.shape);
            fvm_diag dc = {0}, dp = {0};
            fvm_status sc = cpu->select(&c, &a, &b, &oc, &dc), sp = port->select(&c, &a, &b, &op_, &dp);
            agree("select", sc, &dc, &oc, sp, &dp, &op_);
            fvm_tensor_release(&c);
            fvm_tensor_release(&a);
            fvm_tensor_release(&b);
            fvm_tensor_release(&oc);
            fvm_tensor_release(&op_);
        }
    const int64_t sh[] = {2, 41};
    for (int from = 0; from < FVM_DTYPE_COUNT; from++)
        for (int to = 0; to < FVM_DTYPE_COUNT; to++) {
            char what[64];
            snprintf(what, sizeof what, "cast %s to %s", fvm_dtype_name((fvm_dtype)from),
                     fvm_dtype_name((fvm_dtype)to));
            fvm_tensor x = rnd((fvm_dtype)from, dims_of(2, sh));
            fvm_tensor oc = junk((fvm_dtype)to, x.shape), op_ = junk((fvm_dtype)to, x.shape);
            fvm_diag dc = {0}, dp = {0};
            fvm_status sc = cpu->cast(&x, &oc, &dc), sp = port->cast(&x, &op_, &dp);
            agree(what, sc, &dc, &oc, sp, &dp, &op_);
            fvm_tensor_release(&x);
            fvm_tensor_release(&oc);
            fvm_tensor_release(&op_);
        }
    for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++)
        for (int i = 0; i < 20; i++) {
            double v = special();
            fvm_tensor oc = junk((fvm_dtype)dt, dims_of(2, sh)), op_ = junk((fvm_dtype)dt, dims_of(2, sh));
            fvm_diag dc = {0}, dp = {0};
            fvm_status sc = cpu->fill(v, &oc, &dc), sp = port->fill(v, &op_, &dp);
            agree("fill", sc, &dc, &oc, sp, &dp, &op_);
            fvm_tensor_release(&oc);
            fvm_tensor_release(&op_);
        }
}

/* A random chain of 1..8 steps over inputs of dtypes in_dt: steps whose
 * operands have fitting dtypes most of the time, so that most chains run
 * (the others must be refused alike). */
static int random_chain(fvm_fstep *st, int nin)
{
    int n = 1 + (int)(next32() % 8);
    for (int s = 0; s < n; s++) {
        memset(&st[s], 0, sizeof st[s]);
        for (int j = 0; j < 3; j++)
            st[s].arg[j] = s > 0 && next32() % 2 ? -(int)(next32() % (uint32_t)s) - 1 : (int)(next32() % (uint32_t)nin);
        switch (next32() % 6) {
        case 0:
            st[s].kind = FVM_FS_UNARY;
            st[s].op = (int)(next32() % FVM_UN_COUNT);
            break;
        case 1:
        case 2:
            st[s].kind = FVM_FS_BINARY;
            st[s].op = (int)(next32() % FVM_BIN_COUNT);
            break;
        case 3:
            st[s].kind = FVM_FS_SELECT;
            break;
        case 4:
            st[s].kind = FVM_FS_CAST;
            st[s].dtype = (fvm_dtype)(next32() % FVM_DTYPE_COUNT);
            break;
        default:
            st[s].kind = FVM_FS_FILL;
            st[s].value = special();
            break;
        }
    }
    return n;
}

static void test_fused(void **state)
{
    (void)state;
    int ran = 0;
    for (int t = 0; t < 3000; t++) {
        fvm_fstep st[8];
        int nin = 1 + (int)(next32() % 3);
        int n = random_chain(st, nin);
        size_t p = next32() % (sizeof pairs / sizeof *pairs);
        fvm_tensor in[3];
        const fvm_tensor *ins[3];
        static const fvm_dtype pick[] = {FVM_DTYPE_F32, FVM_DTYPE_F32,  FVM_DTYPE_F64,
                                         FVM_DTYPE_I32, FVM_DTYPE_BOOL, FVM_DTYPE_U8};
        fvm_dtype common = pick[next32() % 6];
        for (int k = 0; k < nin; k++) {
            int r = k == 0 ? pairs[p].ra : k == 1 ? pairs[p].rb : pairs[p].ro;
            const int64_t *d = k == 0 ? pairs[p].a : k == 1 ? pairs[p].b : pairs[p].o;
            in[k] = rnd(next32() % 4 ? common : FVM_DTYPE_BOOL, dims_of(r, d));
            ins[k] = &in[k];
        }
        fvm_dtype dt;
        if (fvm_k_fused_dtype(st, n, ins, nin, &dt)) {
            fvm_dims shape = in[0].shape;
            for (int k = 1; k < nin; k++)
                assert_int_equal(fvm_dims_broadcast(&shape, &in[k].shape, &shape, NULL), FVM_OK);
            fvm_tensor oc = junk(dt, shape), op_ = junk(dt, shape);
            fvm_diag dc = {0}, dp = {0};
            fvm_status sc = cpu->fused(st, n, ins, nin, &oc, &dc), sp = port->fused(st, n, ins, nin, &op_, &dp);
            agree("fused", sc, &dc, &oc, sp, &dp, &op_);
            /* in place, into an input of the result's dtype and shape */
            for (int k = 0; k < nin; k++)
                if (in[k].dtype == dt && fvm_dims_equal(&in[k].shape, &shape)) {
                    assert_int_equal(port->fused(st, n, ins, nin, &in[k], &dp), FVM_OK);
                    assert_true(fvm_tensor_identical(&in[k], &oc));
                    break;
                }
            fvm_tensor_release(&oc);
            fvm_tensor_release(&op_);
            ran++;
        }
        for (int k = 0; k < nin; k++)
            fvm_tensor_release(&in[k]);
    }
    assert_true(ran > 300);
}

/* ---- products -------------------------------------------------------------------------------- */

/* Largest difference between the two outputs relative to the largest
 * magnitude of the CPU's output. */
static double rel_diff(const fvm_tensor *a, const fvm_tensor *b)
{
    double m = 0, d = 0;
    for (int64_t i = 0; i < fvm_tensor_count(a); i++) {
        double x = fvm_tensor_get_f64(a, i), y = fvm_tensor_get_f64(b, i);
        m = fmax(m, fabs(x));
        d = fmax(d, fabs(x - y));
    }
    return m > 0 ? d / m : d;
}

/* Finite random floats (products of infinities and NaN are not what this compares). */
static fvm_tensor finite_rnd(fvm_dtype dt, fvm_dims s)
{
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, dt, &s, NULL), FVM_OK);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++)
        fvm_tensor_set_f64(&t, i,
                           fvm_dtype_is_float(dt) ? ((double)(next32() >> 8) / (1 << 24) - 0.5) * 4.0
                                                  : (double)(next32() % 200) - 100.0);
    return t;
}

static void test_matmul(void **state)
{
    (void)state;
    static const int64_t mnk[][3] = {{1, 1, 1},      {7, 5, 3}, {33, 17, 65}, {64, 200, 10},
                                     {10, 784, 200}, {3, 0, 4}, {0, 4, 2}};
    for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++)
        for (size_t c = 0; c < sizeof mnk / sizeof *mnk; c++)
            for (int shape = 0; shape < 6; shape++) {
                bool vec = shape >= 4, ta = !vec && (shape & 1),
                     tb = !vec && (shape & 2); /* 4: vector @ matrix, 5: matrix @ vector */
                int64_t m = mnk[c][0], k = mnk[c][1], n = mnk[c][2];
                int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n};
                fvm_tensor a = finite_rnd((fvm_dtype)dt, vec && shape == 4 ? dims_of(1, &k) : dims_of(2, ad));
                fvm_tensor b = finite_rnd((fvm_dtype)dt, vec && shape == 5 ? dims_of(1, &k) : dims_of(2, bd));
                int64_t od[2] = {m, n};
                fvm_dims os = shape == 4 ? dims_of(1, &n) : shape == 5 ? dims_of(1, &m) : dims_of(2, od);
                fvm_tensor oc = junk((fvm_dtype)dt, os), op_ = junk((fvm_dtype)dt, os);
                fvm_diag dc = {0}, dp = {0};
                fvm_status sc = cpu->matmul(&a, &b, ta, tb, &oc, &dc);
                fvm_status sp = port->matmul(&a, &b, ta, tb, &op_, &dp);
                char what[80];
                snprintf(what, sizeof what, "matmul %s %lldx%lldx%lld shape %d", fvm_dtype_name((fvm_dtype)dt),
                         (long long)m, (long long)k, (long long)n, shape);
                /* BLAS computes f64 products and f32 ones with a vector operand: its bits, within a bound */
                if (sc == FVM_OK && sp == FVM_OK && (dt == FVM_DTYPE_F64 || (dt == FVM_DTYPE_F32 && vec))) {
                    double tol = dt == FVM_DTYPE_F64 ? 1e-13 : 1e-5;
                    if (!(rel_diff(&oc, &op_) <= tol))
                        fail_msg("%s: differs by %g of the largest element", what, rel_diff(&oc, &op_));
                    fvm_diag_clear(&dc);
                    fvm_diag_clear(&dp);
                } else {
                    agree(what, sc, &dc, &oc, sp, &dp, &op_);
                }
                fvm_tensor_release(&a);
                fvm_tensor_release(&b);
                fvm_tensor_release(&oc);
                fvm_tensor_release(&op_);
            }
}

/* The product with its update, out = base - scale * (op(a) op(b)) or base
 * + (op(a) op(b)): both providers against the product then the update
 * computed here in f32, bit for bit (products of fedvm's own kernel, which
 * makes the update in its tiles, and larger ones too). */
static void test_matmul_update(void **state)
{
    (void)state;
    static const int64_t mnk[][3] = {{1, 1, 1}, {7, 5, 3},    {33, 17, 65},  {784, 10, 200},
                                     {3, 0, 4}, {9, 256, 40}, {20, 300, 30}, {512, 600, 500}};
    const int64_t one = 1;
    fvm_tensor scale = finite_rnd(FVM_DTYPE_F32, dims_of(0, &one));
    for (size_t c = 0; c < sizeof mnk / sizeof *mnk; c++)
        for (int shape = 0; shape < 8; shape++) {
            bool ta = shape & 1, tb = shape & 2, add = shape & 4;
            int64_t m = mnk[c][0], k = mnk[c][1], n = mnk[c][2];
            int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n}, od[2] = {m, n};
            fvm_tensor a = finite_rnd(FVM_DTYPE_F32, dims_of(2, ad)), b = finite_rnd(FVM_DTYPE_F32, dims_of(2, bd));
            fvm_tensor base = finite_rnd(FVM_DTYPE_F32, dims_of(2, od)), want = junk(FVM_DTYPE_F32, dims_of(2, od));
            fvm_tensor oc = junk(FVM_DTYPE_F32, dims_of(2, od)), op_ = junk(FVM_DTYPE_F32, dims_of(2, od));
            fvm_diag dc = {0}, dp = {0};
            assert_int_equal(cpu->matmul(&a, &b, ta, tb, &want, &dc), FVM_OK);
            float s = ((const float *)fvm_tensor_data(&scale))[0], *w = fvm_tensor_data(&want);
            const float *bs = fvm_tensor_data(&base);
            for (int64_t i = 0; i < m * n; i++) {
                float t = s * w[i];
                w[i] = add ? bs[i] + w[i] : bs[i] - t;
            }
            fvm_status sc = cpu->matmul_update(&a, &b, ta, tb, add ? NULL : &scale, &base, &oc, &dc);
            fvm_status sp = port->matmul_update(&a, &b, ta, tb, add ? NULL : &scale, &base, &op_, &dp);
            char what[80];
            snprintf(what, sizeof what, "matmul_update %lldx%lldx%lld shape %d", (long long)m, (long long)k,
                     (long long)n, shape);
            if (m * k * n > ((int64_t)1 << 27)) { /* the CPU's product is BLAS's: its bits, within a bound */
                assert_int_equal(sc, FVM_OK);
                assert_int_equal(sp, FVM_OK);
                if (!(rel_diff(&oc, &op_) <= 1e-5))
                    fail_msg("%s: differs by %g of the largest element", what, rel_diff(&oc, &op_));
            } else {
                agree(what, sc, &dc, &oc, sp, &dp, &op_);
            }
            if (memcmp(fvm_tensor_data(&oc), w, (size_t)(m * n) * sizeof(float)))
                fail_msg("%s: not the product then the update", what);
            /* in place (out is base) where a provider says it can: fedvm's own kernel, k in one block */
            bool own = m * n > 0 && k > 0 && k <= 256 && m * k * n <= ((int64_t)1 << 27);
            assert_int_equal(cpu->matmul_update_in_place(&a, &b, ta, tb, &base), own);
            const fvm_kernels *ps[] = {cpu, port};
            for (int q = 0; q < 2; q++)
                if (ps[q]->matmul_update_in_place && ps[q]->matmul_update_in_place(&a, &b, ta, tb, &base)) {
                    fvm_tensor ip = junk(FVM_DTYPE_F32, dims_of(2, od));
                    memcpy(fvm_tensor_data(&ip), bs, (size_t)(m * n) * sizeof(float));
                    assert_int_equal(ps[q]->matmul_update(&a, &b, ta, tb, add ? NULL : &scale, &ip, &ip, &dc), FVM_OK);
                    if (memcmp(fvm_tensor_data(&ip), w, (size_t)(m * n) * sizeof(float)))
                        fail_msg("%s: in place (%s), not the product then the update", what, ps[q]->name);
                    fvm_tensor_release(&ip);
                }
            fvm_diag_clear(&dc);
            fvm_diag_clear(&dp);
            fvm_tensor_release(&a);
            fvm_tensor_release(&b);
            fvm_tensor_release(&base);
            fvm_tensor_release(&want);
            fvm_tensor_release(&oc);
            fvm_tensor_release(&op_);
        }
    fvm_tensor_release(&scale);
}

/* Where both of a pair of float outputs are NaN, b gets a's NaN: which of
 * two NaNs an addition returns is the compiler's choice of operand order
 * (x86 returns the first operand's), so a NaN's sign and payload are not
 * part of a result's bits (format/SPEC.md, Numerics). */
static void same_nan(const fvm_tensor *a, fvm_tensor *b)
{
    for (int64_t i = 0; i < fvm_tensor_count(a); i++) {
        double x = fvm_tensor_get_f64(a, i);
        if (isnan(x) && isnan(fvm_tensor_get_f64(b, i)))
            memcpy((char *)fvm_tensor_data(b) + i * fvm_dtype_size(b->dtype),
                   (const char *)fvm_tensor_data(a) + i * fvm_dtype_size(a->dtype), fvm_dtype_size(a->dtype));
    }
}

/* Every reduction on shapes whose rows are shorter than, as long as and
 * longer than the pairwise blocks (8 and 128 elements), over every set of
 * axes, with special values (NaN, infinities, signed zeros) mixed in. */
static void test_reduce(void **state)
{
    (void)state;
    static const struct {
        int rank;
        int64_t d[3];
    } shapes[] = {
        {1, {7}},         {1, {8}},         {1, {9}},       {1, {127}},     {1, {128}},
        {1, {129}},       {1, {255}},       {1, {256}},     {1, {1000}},    {1, {10007}},
        {2, {3, 300}},    {2, {300, 3}},    {2, {17, 129}}, {2, {129, 17}}, {3, {4, 5, 6}},
        {3, {6, 1, 200}}, {3, {5, 40, 33}}, {3, {2, 0, 3}}, {0, {0}},
    };
    for (int op = 0; op < FVM_RED_COUNT; op++)
        for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++)
            for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
                fvm_dims xs = dims_of(shapes[c].rank, shapes[c].d);
                for (uint32_t mask = 0; mask < (1u << xs.rank); mask++) {
                    /* finite values for MAX/MIN over NaN-free data too: both halves of their rule */
                    fvm_tensor x = (c % 2) ? rnd((fvm_dtype)dt, xs) : finite_rnd((fvm_dtype)dt, xs);
                    fvm_dims os = {.rank = 0};
                    for (int i = 0; i < xs.rank; i++)
                        if (!((mask >> i) & 1))
                            os.d[os.rank++] = xs.d[i];
                    fvm_tensor oc = junk((fvm_dtype)dt, os), op_ = junk((fvm_dtype)dt, os);
                    fvm_diag dc = {0}, dp = {0};
                    fvm_status sc = cpu->reduce((fvm_reduce)op, &x, mask, &oc, &dc);
                    fvm_status sp = port->reduce((fvm_reduce)op, &x, mask, &op_, &dp);
                    char what[96];
                    snprintf(what, sizeof what, "reduce %d %s shape %zu mask 0x%x", op, fvm_dtype_name((fvm_dtype)dt),
                             c, (unsigned)mask);
                    if (sc == FVM_OK && sp == FVM_OK && fvm_dtype_is_float((fvm_dtype)dt))
                        same_nan(&oc, &op_);
                    agree(what, sc, &dc, &oc, sp, &dp, &op_);
                    fvm_tensor_release(&x);
                    fvm_tensor_release(&oc);
                    fvm_tensor_release(&op_);
                }
            }
}

static void test_conv2d(void **state)
{
    (void)state;
    /* x [N,H,W,C], w [KH,KW,C,O], strides, SAME */
    static const struct {
        int64_t x[4], w[4], sh, sw;
        bool same;
    } cases[] = {
        {{2, 28, 28, 1}, {5, 5, 1, 32}, 1, 1, true},
        {{2, 14, 14, 32}, {5, 5, 32, 64}, 1, 1, true},
        {{3, 9, 7, 3}, {3, 2, 3, 4}, 2, 1, false},
        {{2, 6, 6, 5}, {1, 1, 5, 3}, 1, 1, true},
        /* patch matrices of 1.6 MB an image: im2col in groups of 2, grad_filter adding the groups' sums */
        {{3, 32, 32, 16}, {5, 5, 16, 2}, 1, 1, true},
    };
    for (int dt = FVM_DTYPE_F32; dt <= FVM_DTYPE_F64; dt++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            fvm_window win = {
                .kh = cases[c].w[0], .kw = cases[c].w[1], .sh = cases[c].sh, .sw = cases[c].sw, .same = cases[c].same};
            fvm_tensor x = finite_rnd((fvm_dtype)dt, dims_of(4, cases[c].x)),
                       w = finite_rnd((fvm_dtype)dt, dims_of(4, cases[c].w));
            int64_t oh, ow;
            assert_int_equal(fvm_window_out(x.shape.d[1], win.kh, win.sh, win.same, &oh, NULL, NULL), FVM_OK);
            assert_int_equal(fvm_window_out(x.shape.d[2], win.kw, win.sw, win.same, &ow, NULL, NULL), FVM_OK);
            int64_t yd[4] = {x.shape.d[0], oh, ow, w.shape.d[3]};
            fvm_tensor dy = finite_rnd((fvm_dtype)dt, dims_of(4, yd));
            fvm_tensor yc = junk((fvm_dtype)dt, dy.shape), yp = junk((fvm_dtype)dt, dy.shape);
            fvm_tensor xc = junk((fvm_dtype)dt, x.shape), xp = junk((fvm_dtype)dt, x.shape);
            fvm_tensor wc = junk((fvm_dtype)dt, w.shape), wp = junk((fvm_dtype)dt, w.shape);
            assert_int_equal(cpu->conv2d(&x, &w, &win, &yc, NULL), FVM_OK);
            assert_int_equal(port->conv2d(&x, &w, &win, &yp, NULL), FVM_OK);
            assert_int_equal(cpu->conv2d_grad_input(&dy, &w, &win, &xc, NULL), FVM_OK);
            assert_int_equal(port->conv2d_grad_input(&dy, &w, &win, &xp, NULL), FVM_OK);
            assert_int_equal(cpu->conv2d_grad_filter(&x, &dy, &win, &wc, NULL), FVM_OK);
            assert_int_equal(port->conv2d_grad_filter(&x, &dy, &win, &wp, NULL), FVM_OK);
            /* f32: fedvm's own product kernel in both, the same bits; f64: BLAS orders the sums of the
             * CPU provider's products its own way */
            const fvm_tensor *pairs3[3][2] = {{&yc, &yp}, {&xc, &xp}, {&wc, &wp}};
            for (int k = 0; k < 3; k++)
                if (dt == FVM_DTYPE_F32) {
                    char what[64];
                    snprintf(what, sizeof what, "conv2d case %zu f32, kernel %d", c, k);
                    fvm_diag dc = {0}, dp = {0};
                    agree(what, FVM_OK, &dc, pairs3[k][0], FVM_OK, &dp, pairs3[k][1]);
                } else if (!(rel_diff(pairs3[k][0], pairs3[k][1]) <= 1e-13))
                    fail_msg("conv2d case %zu %s, kernel %d: differs by %g of the largest element", c,
                             fvm_dtype_name((fvm_dtype)dt), k, rel_diff(pairs3[k][0], pairs3[k][1]));
            fvm_tensor *all[] = {&x, &w, &dy, &yc, &yp, &xc, &xp, &wc, &wp};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++)
                fvm_tensor_release(all[i]);
        }
    /* the same errors: a non-float dtype */
    const int64_t xd[] = {1, 4, 4, 1}, wd[] = {2, 2, 1, 1};
    fvm_tensor xi = rnd(FVM_DTYPE_I32, dims_of(4, xd)), wi = rnd(FVM_DTYPE_I32, dims_of(4, wd));
    fvm_tensor yc = junk(FVM_DTYPE_I32, dims_of(4, xd)), yp = junk(FVM_DTYPE_I32, dims_of(4, xd));
    fvm_window win = {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .same = true};
    fvm_diag dc = {0}, dp = {0};
    fvm_status sc = cpu->conv2d(&xi, &wi, &win, &yc, &dc), sp = port->conv2d(&xi, &wi, &win, &yp, &dp);
    assert_int_equal(sc, FVM_ERR_TYPE);
    agree("conv2d of i32", sc, &dc, &yc, sp, &dp, &yp);
    fvm_tensor_release(&xi);
    fvm_tensor_release(&wi);
    fvm_tensor_release(&yc);
    fvm_tensor_release(&yp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),           cmocka_unit_test(test_unary),  cmocka_unit_test(test_binary),
        cmocka_unit_test(test_select_cast_fill), cmocka_unit_test(test_fused),  cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_update),    cmocka_unit_test(test_reduce), cmocka_unit_test(test_conv2d),
    };
    int failed = 0;
    cpu = fvm_kernels_cpu();
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        port = others[i]();
        print_message("provider %s against cpu\n", port->name);
        failed += cmocka_run_group_tests(tests, NULL, NULL);
    }
    return failed;
}
