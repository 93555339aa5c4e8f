/* test_tensor.c - unit tests for dtypes, shape helpers and refcounted tensors. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/ir/bufcache.h"
#include "../vm/ir/tensor.h"
#include "test_tensors.h"

static void test_dtype_names(void **state)
{
    (void)state;
    const char *names[FVM_DTYPE_COUNT] = {
        [FVM_DTYPE_BOOL] = "bool", [FVM_DTYPE_U8] = "u8",   [FVM_DTYPE_I32] = "i32", [FVM_DTYPE_I64] = "i64",
        [FVM_DTYPE_U32] = "u32",   [FVM_DTYPE_F32] = "f32", [FVM_DTYPE_F64] = "f64"};
    size_t sizes[FVM_DTYPE_COUNT] = {
        [FVM_DTYPE_BOOL] = 1, [FVM_DTYPE_U8] = 1,  [FVM_DTYPE_I32] = 4, [FVM_DTYPE_I64] = 8,
        [FVM_DTYPE_U32] = 4,  [FVM_DTYPE_F32] = 4, [FVM_DTYPE_F64] = 8};
    for (int t = 0; t < FVM_DTYPE_COUNT; t++) {
        assert_string_equal(fvm_dtype_name((fvm_dtype)t), names[t]);
        assert_int_equal(fvm_dtype_size((fvm_dtype)t), sizes[t]);
        fvm_dtype got = FVM_DTYPE_COUNT;
        assert_true(fvm_dtype_parse(names[t], strlen(names[t]), &got));
        assert_int_equal(got, t);
    }
    fvm_dtype got;
    assert_false(fvm_dtype_parse("f16", 3, &got));
    assert_false(fvm_dtype_parse("f3", 2, &got)); /* prefix of f32 */
    assert_false(fvm_dtype_parse("f32x", 4, &got));
    assert_true(fvm_dtype_parse("i64,", 3, &got)); /* only len bytes are read */
    assert_int_equal(got, FVM_DTYPE_I64);
    assert_true(fvm_dtype_is_float(FVM_DTYPE_F32) && fvm_dtype_is_float(FVM_DTYPE_F64));
    assert_false(fvm_dtype_is_float(FVM_DTYPE_I32));
    assert_true(fvm_dtype_is_int(FVM_DTYPE_I32) && fvm_dtype_is_int(FVM_DTYPE_I64) && fvm_dtype_is_int(FVM_DTYPE_U32));
    assert_true(fvm_dtype_is_int(FVM_DTYPE_U8) && !fvm_dtype_is_float(FVM_DTYPE_U8));
    assert_false(fvm_dtype_is_int(FVM_DTYPE_BOOL));
    assert_false(fvm_dtype_is_int(FVM_DTYPE_F64));
}

static void test_dims_count_equal_format(void **state)
{
    (void)state;
    fvm_dims a = D2(784, 10), u = D2(-1, 3), s = D0(), z = D3(4, 0, 5);
    assert_int_equal(fvm_dims_count(&a), 7840);
    assert_int_equal(fvm_dims_count(&u), -1);
    assert_int_equal(fvm_dims_count(&s), 1);
    assert_int_equal(fvm_dims_count(&z), 0);
    /* huge dims: a zero dim after them still gives 0; no zero saturates */
    fvm_dims hz = D3(INT64_C(1) << 40, INT64_C(1) << 40, 0), h = D2(INT64_C(1) << 40, INT64_C(1) << 40);
    assert_int_equal(fvm_dims_count(&hz), 0);
    assert_true(fvm_dims_count(&h) == INT64_MAX);
    fvm_dims b = D2(784, 10), c = D1(7840);
    assert_true(fvm_dims_equal(&a, &b));
    assert_false(fvm_dims_equal(&a, &c));
    char buf[FVM_DIMS_STR];
    fvm_dims_format(&a, buf);
    assert_string_equal(buf, "[784,10]");
    fvm_dims_format(&u, buf);
    assert_string_equal(buf, "[?,3]");
    fvm_dims_format(&s, buf);
    assert_string_equal(buf, "[]");
    fvm_dims big = dims(8, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX);
    fvm_dims_format(&big, buf);
    assert_int_equal(strlen(buf), 2 + 8 * 19 + 7);
}

static void expect_broadcast(fvm_dims a, fvm_dims b, fvm_dims want)
{
    fvm_diag d = {0};
    fvm_dims out;
    assert_int_equal(fvm_dims_broadcast(&a, &b, &out, &d), FVM_OK);
    assert_int_equal(d.n, 0);
    assert_true(fvm_dims_equal(&out, &want));
    /* symmetric */
    assert_int_equal(fvm_dims_broadcast(&b, &a, &out, &d), FVM_OK);
    assert_true(fvm_dims_equal(&out, &want));
}

static void test_dims_broadcast(void **state)
{
    (void)state;
    expect_broadcast(D2(2, 3), D1(3), D2(2, 3));
    expect_broadcast(D2(2, 1), D2(1, 3), D2(2, 3));
    expect_broadcast(D0(), D1(4), D1(4));
    expect_broadcast(D3(5, 1, 4), D2(3, 1), D3(5, 3, 4));
    expect_broadcast(D1(0), D1(1), D1(0));
    /* unknown dims: ? with 1 gives ?, ? with n gives n */
    expect_broadcast(D2(-1, 3), D1(1), D2(-1, 3));
    expect_broadcast(D1(-1), D1(5), D1(5));
    expect_broadcast(D1(-1), D1(-1), D1(-1));
    expect_broadcast(D2(-1, 1), D1(-1), D2(-1, -1));

    fvm_diag d = {0};
    fvm_dims a = D2(2, 3), b = D1(4), out = D1(99);
    assert_int_equal(fvm_dims_broadcast(&a, &b, &out, &d), FVM_ERR_TYPE);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.errs[0].code, FVM_ERR_TYPE);
    assert_non_null(strstr(d.errs[0].msg, "[2,3]"));
    assert_non_null(strstr(d.errs[0].msg, "[4]"));
    assert_int_equal(out.rank, 1); /* untouched on error */
    assert_int_equal(out.d[0], 99);
    fvm_diag_clear(&d);

    /* out may alias an input */
    fvm_dims x = D2(2, 1), y = D1(3);
    assert_int_equal(fvm_dims_broadcast(&x, &y, &x, NULL), FVM_OK);
    fvm_dims want = D2(2, 3);
    assert_true(fvm_dims_equal(&x, &want));
}

static void test_size_limit(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_dims ok = D1(1ll << 30); /* exactly 4 GiB of f32 */
    assert_int_equal(fvm_dims_check_size(&ok, FVM_DTYPE_F32, &d), FVM_OK);
    fvm_dims over = D1((1ll << 30) + 1);
    assert_int_equal(fvm_dims_check_size(&over, FVM_DTYPE_F32, &d), FVM_ERR_LIMIT);
    assert_int_equal(fvm_dims_check_size(&over, FVM_DTYPE_BOOL, &d), FVM_OK);
    /* products that overflow 64 bits are refused, not wrapped */
    fvm_dims wrap = D3(1ll << 62, 1ll << 62, 4);
    assert_int_equal(fvm_dims_check_size(&wrap, FVM_DTYPE_F64, &d), FVM_ERR_LIMIT);
    fvm_dims wrap2 = dims(2, INT64_MAX, INT64_MAX);
    assert_int_equal(fvm_dims_check_size(&wrap2, FVM_DTYPE_BOOL, &d), FVM_ERR_LIMIT);
    assert_int_equal(d.n, 3);
    for (int i = 0; i < d.n; i++)
        assert_int_equal(d.errs[i].code, FVM_ERR_LIMIT);
    assert_non_null(strstr(d.errs[0].msg, "f32[1073741825]"));
    fvm_diag_clear(&d);
    /* a zero dim means no bytes, but the other dims are bounded all the same
     * (printing f64[2^62, 0, 2^62] would walk 2^62 empty rows) */
    fvm_dims empty = D3(1ll << 62, 0, 1ll << 62);
    assert_int_equal(fvm_dims_check_size(&empty, FVM_DTYPE_F64, &d), FVM_ERR_LIMIT);
    fvm_dims empty_ok = D3(1ll << 20, 0, 1ll << 9); /* 2^29 f64 without the zero: 4 GiB */
    assert_int_equal(fvm_dims_check_size(&empty_ok, FVM_DTYPE_F64, &d), FVM_OK);
    fvm_dims empty_over = D3(1ll << 20, 0, (1ll << 9) + 1);
    assert_int_equal(fvm_dims_check_size(&empty_over, FVM_DTYPE_F64, &d), FVM_ERR_LIMIT);
    assert_int_equal(d.n, 2);
    fvm_diag_clear(&d);
    /* unknown dims count as 1 */
    fvm_dims unk = D2(-1, 1ll << 29);
    assert_int_equal(fvm_dims_check_size(&unk, FVM_DTYPE_F64, &d), FVM_OK);
    assert_int_equal(d.n, 0);
}

static void test_alloc_refused_for_huge_shape(void **state)
{
    (void)state;
    /* 24 GiB: refused before any allocation (under ASan an attempted malloc
     * of this size would abort the test) */
    fvm_diag d = {0};
    fvm_tensor t;
    memset(&t, 0xab, sizeof t);
    fvm_dims s = D2(1ll << 31, 3);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, &d), FVM_ERR_LIMIT);
    assert_null(t.buf);
    fvm_dims s2 = D3(1ll << 40, 1ll << 40, 1ll << 40);
    assert_int_equal(fvm_tensor_zeros(&t, FVM_DTYPE_F64, &s2, &d), FVM_ERR_LIMIT);
    assert_null(t.buf);
    assert_int_equal(d.n, 2);
    fvm_diag_clear(&d);
    /* unknown dims cannot be allocated */
    fvm_dims u = D1(-1);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &u, &d), FVM_ERR_USAGE);
    assert_null(t.buf);
    fvm_diag_clear(&d);
}

static void test_alloc_zeros_alignment(void **state)
{
    (void)state;
    fvm_tensor t;
    fvm_dims s = D2(3, 5);
    assert_int_equal(fvm_tensor_zeros(&t, FVM_DTYPE_F64, &s, NULL), FVM_OK);
    assert_non_null(t.buf);
    assert_int_equal(t.buf->refs, 1);
    assert_int_equal(t.buf->bytes, 15 * 8);
    assert_int_equal(t.offset, 0);
    assert_int_equal((uintptr_t)fvm_tensor_data(&t) % 64, 0);
    assert_int_equal(fvm_tensor_count(&t), 15);
    assert_int_equal(fvm_tensor_bytes(&t), 120);
    const double *p = fvm_tensor_data(&t);
    for (int i = 0; i < 15; i++)
        assert_true(p[i] == 0.0);
    fvm_tensor_release(&t);
    assert_null(t.buf);
    assert_int_equal(t.shape.rank, 0);

    /* scalar */
    fvm_dims sc = D0();
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_I32, &sc, NULL), FVM_OK);
    assert_non_null(t.buf);
    assert_int_equal(fvm_tensor_count(&t), 1);
    fvm_tensor_release(&t);

    /* empty: no buffer */
    fvm_dims e = D2(0, 7);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &e, NULL), FVM_OK);
    assert_null(t.buf);
    assert_null(fvm_tensor_data(&t));
    assert_int_equal(fvm_tensor_bytes(&t), 0);
    fvm_tensor_retain(&t);
    fvm_tensor_release(&t);
    fvm_tensor_release(&t); /* a cleared tensor releases again safely */
    fvm_tensor_release(NULL);
}

static void test_retain_release_row(void **state)
{
    (void)state;
    fvm_tensor t, row;
    fvm_dims s = D3(3, 2, 2);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_I32, &s, NULL), FVM_OK);
    int32_t *p = fvm_tensor_data(&t);
    for (int i = 0; i < 12; i++)
        p[i] = 100 + i;
    fvm_tensor copy = t;
    fvm_tensor_retain(&copy);
    assert_int_equal(t.buf->refs, 2);
    fvm_tensor_release(&copy);
    assert_int_equal(t.buf->refs, 1);

    assert_int_equal(fvm_tensor_row(&t, 2, &row), FVM_OK);
    assert_int_equal(t.buf->refs, 2);
    assert_int_equal(row.shape.rank, 2);
    assert_int_equal(row.shape.d[0], 2);
    assert_int_equal(row.shape.d[1], 2);
    assert_int_equal(row.offset, 2 * 4 * 4);
    fvm_tensor_release(&t); /* the row view keeps the buffer alive */
    const int32_t *r = fvm_tensor_data(&row);
    for (int i = 0; i < 4; i++)
        assert_int_equal(r[i], 108 + i);
    assert_int_equal(fvm_tensor_get_i64(&row, 3), 111);

    /* a row of a row */
    fvm_tensor rr;
    assert_int_equal(fvm_tensor_row(&row, 1, &rr), FVM_OK);
    assert_int_equal(rr.offset, 2 * 16 + 8);
    assert_int_equal(fvm_tensor_get_i64(&rr, 0), 110);
    assert_int_equal(fvm_tensor_get_i64(&rr, 1), 111);
    fvm_tensor_release(&row);
    assert_int_equal(rr.buf->refs, 1);
    /* bad rows */
    fvm_tensor scalar_row;
    assert_int_equal(fvm_tensor_row(&rr, 2, &scalar_row), FVM_ERR_USAGE);
    assert_int_equal(fvm_tensor_row(&rr, -1, &scalar_row), FVM_ERR_USAGE);
    assert_int_equal(fvm_tensor_row(&rr, 1, &scalar_row), FVM_OK);
    assert_int_equal(scalar_row.shape.rank, 0);
    assert_int_equal(fvm_tensor_get_i64(&scalar_row, 0), 111);
    fvm_tensor none;
    assert_int_equal(fvm_tensor_row(&scalar_row, 0, &none), FVM_ERR_USAGE);
    fvm_tensor_release(&scalar_row);
    fvm_tensor_release(&rr);
}

static void test_reshape(void **state)
{
    (void)state;
    fvm_tensor t, r;
    fvm_dims s = D2(2, 3), s2 = D3(3, 1, 2), bad = D1(5);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    for (int i = 0; i < 6; i++)
        fvm_tensor_set_f64(&t, i, i * 0.5);
    assert_int_equal(fvm_tensor_reshape(&t, &s2, &r, NULL), FVM_OK);
    assert_ptr_equal(r.buf, t.buf);
    assert_int_equal(t.buf->refs, 2);
    assert_true(fvm_dims_equal(&r.shape, &s2));
    assert_true(fvm_tensor_get_f64(&r, 5) == 2.5);
    fvm_diag d = {0};
    fvm_tensor r2 = {0};
    assert_int_equal(fvm_tensor_reshape(&t, &bad, &r2, &d), FVM_ERR_TYPE);
    assert_int_equal(d.n, 1);
    assert_null(r2.buf);
    fvm_diag_clear(&d);
    /* in place: out may be the input (each is one reference) */
    fvm_tensor before = r;
    assert_int_equal(fvm_tensor_reshape(&r, &s, &r, NULL), FVM_OK);
    assert_int_equal(t.buf->refs, 3);
    assert_true(fvm_dims_equal(&r.shape, &s));
    fvm_tensor_release(&r);
    fvm_tensor_release(&before);
    fvm_tensor_release(&t);
}

static void test_get_set(void **state)
{
    (void)state;
    fvm_tensor t;
    fvm_dims s = D1(4);
    /* f64 -> ints: truncation toward zero, saturation, NaN gives 0 */
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_I32, &s, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, -2.9);
    fvm_tensor_set_f64(&t, 1, 3e10);
    fvm_tensor_set_f64(&t, 2, NAN);
    fvm_tensor_set_f64(&t, 3, -INFINITY);
    const int32_t *pi = fvm_tensor_data(&t);
    assert_int_equal(pi[0], -2);
    assert_int_equal(pi[1], INT32_MAX);
    assert_int_equal(pi[2], 0);
    assert_int_equal(pi[3], INT32_MIN);
    fvm_tensor_set_i64(&t, 0, 0x100000005ll); /* wraps modulo 2^32 */
    assert_int_equal(pi[0], 5);
    fvm_tensor_set_i64(&t, 1, -7);
    assert_true(fvm_tensor_get_f64(&t, 1) == -7.0);
    fvm_tensor_release(&t);

    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_U32, &s, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, -5.0);
    fvm_tensor_set_f64(&t, 1, 1e12);
    fvm_tensor_set_f64(&t, 2, 7.99);
    fvm_tensor_set_i64(&t, 3, -1);
    assert_int_equal(fvm_tensor_get_i64(&t, 0), 0);
    assert_int_equal(fvm_tensor_get_i64(&t, 1), UINT32_MAX);
    assert_int_equal(fvm_tensor_get_i64(&t, 2), 7);
    assert_int_equal(fvm_tensor_get_i64(&t, 3), 4294967295ll);
    fvm_tensor_release(&t);

    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_I64, &s, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, 1e300);
    fvm_tensor_set_f64(&t, 1, -1e300);
    fvm_tensor_set_f64(&t, 2, 0x1p62);
    fvm_tensor_set_i64(&t, 3, INT64_MIN);
    assert_true(fvm_tensor_get_i64(&t, 0) == INT64_MAX);
    assert_true(fvm_tensor_get_i64(&t, 1) == INT64_MIN);
    assert_true(fvm_tensor_get_i64(&t, 2) == (1ll << 62));
    assert_true(fvm_tensor_get_i64(&t, 3) == INT64_MIN);
    fvm_tensor_release(&t);

    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_BOOL, &s, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, 0.25);
    fvm_tensor_set_f64(&t, 1, 0.0);
    fvm_tensor_set_i64(&t, 2, -3);
    fvm_tensor_set_f64(&t, 3, NAN);
    const uint8_t *pb = fvm_tensor_data(&t);
    assert_int_equal(pb[0], 1);
    assert_int_equal(pb[1], 0);
    assert_int_equal(pb[2], 1);
    assert_int_equal(pb[3], 1);
    assert_true(fvm_tensor_get_f64(&t, 0) == 1.0);
    fvm_tensor_release(&t);

    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    fvm_tensor_set_f64(&t, 0, 0.1);
    fvm_tensor_set_i64(&t, 1, 16777217); /* rounds to nearest f32 */
    fvm_tensor_set_f64(&t, 2, 2.75);
    fvm_tensor_set_f64(&t, 3, -1e10);
    assert_true(fvm_tensor_get_f64(&t, 0) == (double)0.1f);
    assert_true(fvm_tensor_get_f64(&t, 1) == 16777216.0);
    assert_int_equal(fvm_tensor_get_i64(&t, 2), 2);
    assert_true(fvm_tensor_get_i64(&t, 3) == -10000000000ll);
    fvm_tensor_release(&t);
}

static void test_identical(void **state)
{
    (void)state;
    fvm_tensor a, b, c;
    fvm_dims s = D1(3), s2 = D2(1, 3);
    assert_int_equal(fvm_tensor_alloc(&a, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&b, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    for (int i = 0; i < 3; i++) {
        fvm_tensor_set_f64(&a, i, i + 0.5);
        fvm_tensor_set_f64(&b, i, i + 0.5);
    }
    assert_true(fvm_tensor_identical(&a, &b));
    fvm_tensor_set_f64(&a, 2, NAN);
    fvm_tensor_set_f64(&b, 2, NAN);
    assert_true(fvm_tensor_identical(&a, &b)); /* bitwise: the same NaN */
    fvm_tensor_set_f64(&a, 0, 0.0);
    fvm_tensor_set_f64(&b, 0, -0.0);
    assert_false(fvm_tensor_identical(&a, &b)); /* bitwise: +0 != -0 */
    fvm_tensor_set_f64(&b, 0, 0.0);
    assert_true(fvm_tensor_identical(&a, &b));
    assert_int_equal(fvm_tensor_reshape(&a, &s2, &c, NULL), FVM_OK);
    assert_false(fvm_tensor_identical(&a, &c)); /* shape differs */
    fvm_tensor_release(&c);
    assert_int_equal(fvm_tensor_alloc(&c, FVM_DTYPE_I32, &s, NULL), FVM_OK);
    memcpy(fvm_tensor_data(&c), fvm_tensor_data(&a), 12);
    assert_false(fvm_tensor_identical(&a, &c)); /* dtype differs */
    fvm_tensor_release(&c);
    fvm_tensor e1, e2;
    fvm_dims z = D2(0, 3);
    assert_int_equal(fvm_tensor_alloc(&e1, FVM_DTYPE_F32, &z, NULL), FVM_OK);
    assert_int_equal(fvm_tensor_alloc(&e2, FVM_DTYPE_F32, &z, NULL), FVM_OK);
    assert_true(fvm_tensor_identical(&e1, &e2));
    fvm_tensor_release(&a);
    fvm_tensor_release(&b);
}

enum { THREADS = 4, ROUNDS = 100000 };

static void *hammer(void *arg)
{
    const fvm_tensor *t = arg;
    for (int i = 0; i < ROUNDS; i++) {
        fvm_tensor c = *t;
        fvm_tensor_retain(&c);
        fvm_tensor_release(&c);
    }
    return NULL;
}

static void test_atomic_refcount(void **state)
{
    (void)state;
    fvm_tensor t;
    fvm_dims s = D1(8);
    assert_int_equal(fvm_tensor_zeros(&t, FVM_DTYPE_I64, &s, NULL), FVM_OK);
    /* two extra references held across the threads' retain/release pairs */
    fvm_tensor_retain(&t);
    fvm_tensor_retain(&t);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &t), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(t.buf->refs, 3);
    fvm_tensor keep = t;
    fvm_tensor_release(&keep);
    keep = t;
    fvm_tensor_release(&keep);
    assert_int_equal(t.buf->refs, 1);
    fvm_tensor_release(&t);
}

/* A released buffer is the next one of its size on the same thread; zeros
 * are zeroed even then; other sizes do not take it. */
static void test_buffers_recycled(void **state)
{
    (void)state;
    fvm_bufcache_trim();
    fvm_tensor t, u, z;
    fvm_dims s = D2(100, 10), other = D1(2000);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL), FVM_OK);
    fvm_buf *b = t.buf;
    for (int i = 0; i < 1000; i++)
        fvm_tensor_set_f64(&t, i, 7.0);
    fvm_tensor_release(&t);
    assert_int_equal(fvm_tensor_alloc(&u, FVM_DTYPE_F32, &other, NULL), FVM_OK);
    assert_ptr_not_equal(u.buf, b);
    assert_int_equal(fvm_tensor_zeros(&z, FVM_DTYPE_I32, &s, NULL), FVM_OK); /* same bytes, other dtype */
    assert_ptr_equal(z.buf, b);
    assert_int_equal(z.buf->refs, 1);
    assert_int_equal(z.buf->bytes, 4000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(fvm_tensor_get_i64(&z, i), 0);
    fvm_tensor_release(&z);
    fvm_tensor_release(&u);
    /* more buffers than the cache keeps: the oldest are freed, the newest kept */
    enum { N = FVM_BUFCACHE_SLOTS + 8 };
    static fvm_tensor many[N];
    static fvm_buf *bufs[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(fvm_tensor_alloc(&many[i], FVM_DTYPE_U8, &s, NULL), FVM_OK);
        bufs[i] = many[i].buf;
    }
    for (int i = 0; i < N; i++)
        fvm_tensor_release(&many[i]);
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_U8, &s, NULL), FVM_OK);
    assert_ptr_equal(t.buf, bufs[N - 1]);
    fvm_tensor_release(&t);
    fvm_bufcache_trim();
}

/* A thread's cache is freed when it exits (AddressSanitizer reports a leak
 * otherwise); a buffer released on another thread than the one that
 * allocated it goes to the shared reserve, where the next allocation of its
 * size finds it. */
static void *alloc_and_exit(void *arg)
{
    fvm_tensor *keep = arg, t;
    fvm_dims s = D1(4096);
    for (int i = 0; i < 8; i++) {
        if (fvm_tensor_alloc(&t, FVM_DTYPE_F64, &s, NULL) != FVM_OK)
            return NULL;
        fvm_tensor_release(&t);
    }
    fvm_tensor_alloc(keep, FVM_DTYPE_F64, &s, NULL);
    return NULL;
}

static void test_buffer_cache_threads(void **state)
{
    (void)state;
    fvm_bufcache_trim();
    fvm_tensor kept = {0}, again;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, alloc_and_exit, &kept), 0);
    pthread_join(th, NULL);
    assert_non_null(kept.buf);
    fvm_buf *b = kept.buf;
    fvm_dims s = D1(4096);
    fvm_tensor_release(&kept);
    assert_int_equal(fvm_tensor_alloc(&again, FVM_DTYPE_F64, &s, NULL), FVM_OK);
    assert_ptr_equal(again.buf, b);
    fvm_tensor_release(&again);
    fvm_bufcache_trim();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_dims_count_equal_format),
        cmocka_unit_test(test_dims_broadcast),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_alloc_refused_for_huge_shape),
        cmocka_unit_test(test_alloc_zeros_alignment),
        cmocka_unit_test(test_retain_release_row),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_get_set),
        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_atomic_refcount),
        cmocka_unit_test(test_buffers_recycled),
        cmocka_unit_test(test_buffer_cache_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
