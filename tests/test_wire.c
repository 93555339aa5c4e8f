/* test_wire.c - values and diagnostics to bytes and back (format/wire.c): round trips of every kind of
 * value, and bytes cut short or corrupted give errors, never crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/exec/wire.h"

/* A tensor of the given dtype and shape whose bytes are 0, 7, 14, ... (mod 251). */
static fvm_value *tensor(fvm_dtype dt, int rank, const int64_t *dims)
{
    fvm_dims s = {.rank = rank};
    for (int i = 0; i < rank; i++)
        s.d[i] = dims[i];
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, dt, &s, NULL), FVM_OK);
    unsigned char *p = fvm_tensor_data(&t);
    for (size_t i = 0; i < fvm_tensor_bytes(&t); i++)
        p[i] = (unsigned char)(i * 7 % 251);
    if (dt == FVM_DTYPE_BOOL)
        for (size_t i = 0; i < fvm_tensor_bytes(&t); i++)
            p[i] &= 1;
    fvm_value *v = fvm_value_tensor_take(&t);
    assert_non_null(v);
    return v;
}

static fvm_value *list(fvm_vkind kind, int n, ...)
{
    fvm_value *v = fvm_value_list(kind, n);
    assert_non_null(v);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        v->items[i] = va_arg(ap, fvm_value *); /* taken */
    va_end(ap);
    return v;
}

/* Client i read on demand: the scalar i + 0.5 (f64); client 'fail' cannot be read. */
typedef struct test_source {
    fvm_source base;
    int64_t fail;
} test_source;

static fvm_status source_get(fvm_source *src, int64_t i, fvm_value **out, fvm_diag *d)
{
    if (i == ((test_source *)src)->fail)
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "client %lld cannot be read", (long long)i);
    fvm_tensor t;
    assert_int_equal(fvm_tensor_alloc(&t, FVM_DTYPE_F64, &(fvm_dims){0}, d), FVM_OK);
    *(double *)fvm_tensor_data(&t) = (double)i + 0.5;
    *out = fvm_value_tensor_take(&t);
    return FVM_OK;
}

static void source_free(fvm_source *src)
{
    free(src);
}

static const struct fvm_source_i source_iface = {.get = source_get, .free = source_free};

static fvm_value *on_demand(int64_t n, int64_t fail)
{
    test_source *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->base.iface = &source_iface;
    s->fail = fail;
    fvm_value *v = fvm_value_clients_source_take(n, &s->base);
    assert_non_null(v);
    return v;
}

/* Encodes v, decodes it back; the bytes must be used exactly. */
static fvm_value *round_trip(const fvm_value *v, fvm_bytes *b)
{
    fvm_diag d = {0};
    b->len = 0;
    assert_int_equal(fvm_wire_put_value(b, v, &d), FVM_OK);
    size_t at = 0;
    fvm_value *got = (fvm_value *)1;
    assert_int_equal(fvm_wire_get_value(b->data, b->len, &at, &got, &d), FVM_OK);
    assert_int_equal(at, b->len);
    assert_int_equal(d.n, 0);
    return got;
}

static void test_tensors(void **state)
{
    (void)state;
    fvm_bytes b = {0};
    const int64_t dims[3] = {2, 3, 5}, zero[2] = {4, 0};
    for (int dt = 0; dt < FVM_DTYPE_COUNT; dt++)
        for (int rank = 0; rank <= 3; rank++) {
            fvm_value *v = tensor((fvm_dtype)dt, rank, dims);
            fvm_value *got = round_trip(v, &b);
            assert_int_equal(got->kind, FVM_V_TENSOR);
            assert_true(fvm_tensor_identical(&v->t, &got->t));
            /* 1 tag + dtype + rank + 8 per dim + the elements */
            assert_int_equal(b.len, 3 + 8 * (size_t)rank + fvm_tensor_bytes(&v->t));
            fvm_value_release(got);
            fvm_value_release(v);
        }
    /* no elements: no buffer on either side */
    fvm_value *e = tensor(FVM_DTYPE_F32, 2, zero), *got = round_trip(e, &b);
    assert_int_equal(got->t.shape.rank, 2);
    assert_int_equal(got->t.shape.d[1], 0);
    assert_null(got->t.buf);
    fvm_value_release(got);
    fvm_value_release(e);
    /* a view into a larger buffer: only the row's bytes are written */
    fvm_value *m = tensor(FVM_DTYPE_I32, 2, dims);
    fvm_tensor row;
    assert_int_equal(fvm_tensor_row(&m->t, 1, &row), FVM_OK);
    fvm_value *rv = fvm_value_tensor_take(&row);
    got = round_trip(rv, &b);
    assert_true(fvm_tensor_identical(&rv->t, &got->t));
    assert_int_equal(got->t.offset, 0);
    assert_memory_equal(fvm_tensor_data(&got->t), (int32_t *)fvm_tensor_data(&m->t) + 3, 12);
    fvm_value_release(got);
    fvm_value_release(rv);
    fvm_value_release(m);
    fvm_bytes_free(&b);
}

static void test_structures(void **state)
{
    (void)state;
    fvm_bytes b = {0};
    const int64_t d2[2] = {4, 3}, d1[1] = {4};
    /* a struct of a tensor, a list-stored sequence and a nested struct with a hole */
    fvm_value *v = list(FVM_V_STRUCT, 3, tensor(FVM_DTYPE_F32, 1, d1),
                        list(FVM_V_SEQ, 2, tensor(FVM_DTYPE_I64, 0, NULL), tensor(FVM_DTYPE_I64, 0, NULL)),
                        list(FVM_V_STRUCT, 2, NULL, tensor(FVM_DTYPE_U8, 2, d2)));
    fvm_value *got = round_trip(v, &b);
    assert_true(fvm_value_identical(v, got));
    assert_int_equal(got->items[1]->kind, FVM_V_SEQ);
    assert_null(got->items[2]->items[0]);
    fvm_value_release(got);
    fvm_value_release(v);
    /* a column-stored sequence stays column-stored */
    fvm_value *cols = list(FVM_V_STRUCT, 2, tensor(FVM_DTYPE_F32, 2, d2), tensor(FVM_DTYPE_I32, 1, d1));
    fvm_value *seq = fvm_value_seq_cols_take(4, cols);
    got = round_trip(seq, &b);
    assert_non_null(got->cols);
    assert_null(got->items);
    assert_int_equal(got->n, 4);
    assert_true(fvm_value_identical(seq, got));
    fvm_value_release(got);
    /* held client members, and members read on demand (written as held ones) */
    fvm_value *held = list(FVM_V_CLIENTS, 2, fvm_value_retain(seq), tensor(FVM_DTYPE_BOOL, 1, d1));
    got = round_trip(held, &b);
    assert_int_equal(got->kind, FVM_V_CLIENTS);
    assert_true(fvm_value_identical(held, got));
    fvm_value_release(got);
    fvm_value_release(held);
    fvm_value_release(seq);
    fvm_value *lazy = on_demand(5, -1);
    got = round_trip(lazy, &b);
    assert_null(got->src);
    assert_true(fvm_value_identical(lazy, got));
    assert_true(*(double *)fvm_tensor_data(&got->items[3]->t) == 3.5);
    fvm_value_release(got);
    fvm_value_release(lazy);
    /* nothing */
    got = round_trip(NULL, &b);
    assert_null(got);
    assert_int_equal(b.len, 1);
    /* two values one after the other */
    fvm_value *x = tensor(FVM_DTYPE_F64, 1, d1), *y = list(FVM_V_STRUCT, 0);
    fvm_diag d = {0};
    b.len = 0;
    assert_int_equal(fvm_wire_put_value(&b, x, &d), FVM_OK);
    assert_int_equal(fvm_wire_put_value(&b, y, &d), FVM_OK);
    size_t at = 0;
    fvm_value *gx = NULL, *gy = NULL;
    assert_int_equal(fvm_wire_get_value(b.data, b.len, &at, &gx, &d), FVM_OK);
    assert_int_equal(fvm_wire_get_value(b.data, b.len, &at, &gy, &d), FVM_OK);
    assert_int_equal(at, b.len);
    assert_true(fvm_value_identical(x, gx) && fvm_value_identical(y, gy));
    fvm_value_release(gx);
    fvm_value_release(gy);
    fvm_value_release(x);
    fvm_value_release(y);
    fvm_bytes_free(&b);
}

static void test_unreadable_member(void **state)
{
    (void)state;
    fvm_bytes b = {0};
    fvm_diag d = {0};
    fvm_value *lazy = on_demand(5, 3);
    assert_int_equal(fvm_wire_put_value(&b, lazy, &d), FVM_ERR_IO);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.errs[0].msg, "client 3 cannot be read");
    fvm_value_release(lazy);
    fvm_diag_clear(&d);
    fvm_bytes_free(&b);
}

/* Every prefix of a value's bytes is an error (FVM_ERR_FORMAT), and so is
 * every flip of a tag, dtype, rank or count byte that makes them invalid;
 * other corruptions decode to some value or fail, without a crash or leak
 * (ASan checks). */
static void test_bad_bytes(void **state)
{
    (void)state;
    const int64_t d2[2] = {3, 2};
    fvm_value *v = list(FVM_V_STRUCT, 2, tensor(FVM_DTYPE_F32, 2, d2),
                        list(FVM_V_CLIENTS, 2, tensor(FVM_DTYPE_I32, 0, NULL), NULL));
    fvm_bytes b = {0};
    fvm_diag d = {0};
    assert_int_equal(fvm_wire_put_value(&b, v, &d), FVM_OK);
    for (size_t cut = 0; cut < b.len; cut++) {
        size_t at = 0;
        fvm_value *got = NULL;
        assert_int_equal(fvm_wire_get_value(b.data, cut, &at, &got, &d), FVM_ERR_FORMAT);
        assert_null(got);
        assert_int_equal(at, 0);
        assert_non_null(strstr(d.errs[d.n - 1].msg, "value bytes: "));
        fvm_diag_clear(&d);
    }
    unsigned char *copy = malloc(b.len);
    assert_non_null(copy);
    for (size_t i = 0; i < b.len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, b.data, b.len);
            copy[i] ^= (unsigned char)(1u << bit);
            size_t at = 0;
            fvm_value *got = NULL;
            fvm_status s = fvm_wire_get_value(copy, b.len, &at, &got, &d);
            assert_true(s == FVM_OK || s == FVM_ERR_FORMAT || s == FVM_ERR_LIMIT);
            fvm_value_release(got);
            fvm_diag_clear(&d);
        }
    free(copy);
    /* a count of 2^40 members in a few bytes: refused before allocating */
    unsigned char huge[1 + 8] = {5};
    int64_t n = (int64_t)1 << 40;
    memcpy(huge + 1, &n, sizeof n);
    size_t at = 0;
    fvm_value *got = NULL;
    assert_int_equal(fvm_wire_get_value(huge, sizeof huge, &at, &got, &d), FVM_ERR_FORMAT);
    assert_non_null(strstr(d.errs[0].msg, "a count larger than the bytes left"));
    fvm_diag_clear(&d);
    /* an unknown tag */
    unsigned char tag[1] = {200};
    assert_int_equal(fvm_wire_get_value(tag, 1, &at, &got, &d), FVM_ERR_FORMAT);
    assert_string_equal(d.errs[0].msg, "value bytes: an unknown value tag at byte 1 of 1");
    fvm_diag_clear(&d);
    fvm_value_release(v);
    fvm_bytes_free(&b);
}

/* Bytes of a column-stored sequence of n elements whose columns are the
 * value at cols (wire.h's layout, written here by hand). */
static size_t seq_cols_bytes(unsigned char *buf, int64_t n, const unsigned char *cols, size_t len)
{
    buf[0] = 4; /* column-stored sequence */
    memcpy(buf + 1, &n, sizeof n);
    memcpy(buf + 9, cols, len);
    return 9 + len;
}

/* A tensor's bytes: dtype, rank, dims, then the elements (each one byte). */
static size_t tensor_bytes(unsigned char *buf, fvm_dtype dt, int rank, const int64_t *dims, const unsigned char *elems,
                           size_t n)
{
    buf[0] = 1;
    buf[1] = (unsigned char)dt;
    buf[2] = (unsigned char)rank;
    if (rank)
        memcpy(buf + 3, dims, (size_t)rank * sizeof *dims);
    memcpy(buf + 3 + (size_t)rank * sizeof *dims, elems, n);
    return 3 + (size_t)rank * sizeof *dims + n;
}

static void expect_bad(const unsigned char *p, size_t len, const char *msg)
{
    fvm_diag d = {0};
    size_t at = 0;
    fvm_value *got = NULL;
    assert_int_equal(fvm_wire_get_value(p, len, &at, &got, &d), FVM_ERR_FORMAT);
    assert_null(got);
    assert_int_equal(d.n, 1);
    if (!strstr(d.errs[0].msg, msg))
        fail_msg("'%s' not in '%s'", msg, d.errs[0].msg);
    fvm_diag_clear(&d);
}

/* Columns that rows cannot be read from, and bools that are not 0 or 1, are
 * refused: element access would read past a buffer or through NULL. */
static void test_bad_columns(void **state)
{
    (void)state;
    unsigned char cols[256], buf[300];
    const unsigned char u8s[3] = {1, 2, 3};
    const int64_t three[1] = {3}, two_three[2] = {2, 3};
    const char *msg = "sequence columns that are not tensors with a leading axis of the sequence's length";
    /* a u8[3] column for 2 elements, and for 4 */
    size_t n = tensor_bytes(cols, FVM_DTYPE_U8, 1, three, u8s, 3);
    expect_bad(buf, seq_cols_bytes(buf, 2, cols, n), msg);
    expect_bad(buf, seq_cols_bytes(buf, 4, cols, n), msg);
    /* ... and for 3: read, its elements the bytes */
    fvm_diag d = {0};
    size_t at = 0, len = seq_cols_bytes(buf, 3, cols, n);
    fvm_value *got = NULL, *e = NULL;
    assert_int_equal(fvm_wire_get_value(buf, len, &at, &got, &d), FVM_OK);
    assert_int_equal(at, len);
    assert_int_equal(fvm_seq_get(got, 2, &e, &d), FVM_OK);
    assert_int_equal(*(unsigned char *)fvm_tensor_data(&e->t), 3);
    fvm_value_release(e);
    fvm_value_release(got);
    /* a scalar column */
    n = tensor_bytes(cols, FVM_DTYPE_U8, 0, NULL, u8s, 1);
    expect_bad(buf, seq_cols_bytes(buf, 1, cols, n), msg);
    /* a struct of a none and a tensor */
    cols[0] = 2;
    int64_t two = 2;
    memcpy(cols + 1, &two, sizeof two);
    cols[9] = 0;
    n = 10 + tensor_bytes(cols + 10, FVM_DTYPE_U8, 2, two_three, (const unsigned char *)"abcdef", 6);
    expect_bad(buf, seq_cols_bytes(buf, 2, cols, n), msg);
    /* a list-stored sequence of one u8[2,3] as columns */
    cols[0] = 3;
    int64_t one = 1;
    memcpy(cols + 1, &one, sizeof one);
    n = 9 + tensor_bytes(cols + 9, FVM_DTYPE_U8, 2, two_three, (const unsigned char *)"abcdef", 6);
    expect_bad(buf, seq_cols_bytes(buf, 2, cols, n), msg);
    /* bools */
    const unsigned char bools[3] = {0, 1, 2};
    n = tensor_bytes(buf, FVM_DTYPE_BOOL, 1, three, bools, 3);
    expect_bad(buf, n, "a bool that is neither 0 nor 1");
    buf[n - 1] = 1;
    at = 0;
    assert_int_equal(fvm_wire_get_value(buf, n, &at, &got, &d), FVM_OK);
    fvm_value_release(got);
}

/* A sequence of empty rows (columns [n, 0]) has more elements than bytes: it
 * reads back exactly as written, with nothing after it (a count bounded by the
 * bytes left refused it, and read it only when other bytes followed). */
static void test_columns_without_bytes(void **state)
{
    (void)state;
    const int64_t dims[2] = {1000, 0};
    fvm_value *v = fvm_value_seq_cols_take(1000, tensor(FVM_DTYPE_F32, 2, dims));
    assert_non_null(v);
    fvm_bytes b = {0};
    fvm_diag d = {0};
    assert_int_equal(fvm_wire_put_value(&b, v, &d), FVM_OK);
    assert_true(b.len < 1000);
    size_t at = 0;
    fvm_value *w = NULL;
    assert_int_equal(fvm_wire_get_value(b.data, b.len, &at, &w, &d), FVM_OK);
    assert_int_equal(at, b.len);
    assert_true(fvm_value_identical(v, w));
    fvm_value_release(w);
    fvm_value_release(v);
    fvm_bytes_free(&b);
    fvm_diag_clear(&d);
}

static void test_diag(void **state)
{
    (void)state;
    fvm_diag src = {0}, d = {0}, into = {0};
    fvm_loc loc = {"prog.json", 12, 7, "/functions/main/body/3"};
    fvm_diag_add(&src, FVM_ERR_RUNTIME, &loc, "gather: index %d out of range [0, %d)", 9, 4);
    fvm_diag_add(&src, FVM_ERR_RUNTIME, NULL, "federated_map: the error above is client 10's (counting from 0)");
    src.dropped = 2;
    fvm_bytes b = {0};
    assert_int_equal(fvm_wire_put_diag(&b, &src, &d), FVM_OK);
    fvm_diag_add(&into, FVM_ERR_IO, NULL, "an earlier error");
    size_t at = 0;
    assert_int_equal(fvm_wire_get_diag(b.data, b.len, &at, &into, &d), FVM_OK);
    assert_int_equal(at, b.len);
    assert_int_equal(into.n, 3);
    assert_int_equal(into.dropped, 2);
    for (int i = 0; i < 2; i++) {
        char *want = fvm_error_format(&src.errs[i]), *got = fvm_error_format(&into.errs[i + 1]);
        assert_string_equal(got, want);
        assert_int_equal(into.errs[i + 1].code, src.errs[i].code);
        free(want);
        free(got);
    }
    assert_null(into.errs[2].loc.file);
    /* cut short: an error, nothing appended */
    for (size_t cut = 0; cut < b.len; cut++) {
        fvm_diag part = {0};
        at = 0;
        assert_int_equal(fvm_wire_get_diag(b.data, cut, &at, &part, &d), FVM_ERR_FORMAT);
        assert_int_equal(part.n, 0);
        fvm_diag_clear(&d);
    }
    /* decoding into the list that also receives the decoder's own errors */
    at = 0;
    assert_int_equal(fvm_wire_get_diag(b.data, b.len, &at, &d, &d), FVM_OK);
    assert_int_equal(d.n, 2);
    fvm_diag_clear(&d);
    fvm_diag_clear(&src);
    fvm_diag_clear(&into);
    fvm_bytes_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensors),
        cmocka_unit_test(test_structures),
        cmocka_unit_test(test_unreadable_member),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_bad_columns),
        cmocka_unit_test(test_columns_without_bytes),
        cmocka_unit_test(test_diag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
