/* test_dataset.c - FedJAX/TFF dataset files: the shared fixtures, write/read round trips, corrupt and hostile inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <sqlite3.h>
#include <zlib.h>

#include "../format/dataset.h"
#include "../format/doc_io.h"
#include "../format/dataset_impl.h"
#include "../vm/core/doc.h"
#include "example.pb-c.h"
#include "test_files.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_make("test_dataset");
}

/* ---- the shared fixtures -------------------------------------------------------------- */

static const char *fixtures(void)
{
    const char *dir = getenv("FVM_FIXTURES");
    return dir && *dir ? dir : "../shared/fixtures";
}

/* The fixture and its .expected.json, or NULL (and the test skipped) when
 * the fixtures directory does not exist. */
static fvm_doc *load_expected(fvm_arena *a, const char *name, char path[512])
{
    struct stat sb;
    if (stat(fixtures(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        print_message("skipped: fixtures directory %s does not exist (set FVM_FIXTURES)\n", fixtures());
        return NULL;
    }
    snprintf(path, 512, "%s/%s", fixtures(), name);
    char json[600];
    snprintf(json, sizeof json, "%s.expected.json", path);
    fvm_diag d = {0};
    char *text = NULL;
    size_t len = 0;
    ok(fvm_read_file(json, &text, &len, &d), &d);
    fvm_doc_src src = {json, text, len};
    fvm_doc *doc = NULL;
    ok(fvm_json_parse(a, &src, &doc, &d), &d);
    free(text);
    return doc;
}

/* The fixture 'name' (its path in path), of format 'format' by its
 * .expected.json, and the splits the reader lists (free them). Skips the
 * test when the fixtures directory does not exist. */
static fvm_doc *open_fixture(fvm_arena *a, const char *name, const char *format, char path[512], char ***splits,
                             int *nsplits)
{
    fvm_doc *exp = load_expected(a, name, path);
    if (!exp) {
        fvm_arena_free(a);
        skip();
    }
    fvm_diag d = {0};
    assert_string_equal(fvm_doc_get(exp, "format")->u.str.s, format);
    ok(fvm_dataset_splits(path, splits, nsplits, &d), &d);
    return exp;
}

static double num(const fvm_doc *v)
{
    assert_non_null(v);
    assert_true(v->kind == FVM_DOC_INT || v->kind == FVM_DOC_REAL);
    return v->kind == FVM_DOC_INT ? (double)v->u.i : v->u.r;
}

static void check_rel(double got, double want, double rel, const char *what)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("%s: got %.17g, want %.17g", what, got, want);
}

static double sum_tensor(const fvm_tensor *t)
{
    double s = 0;
    for (int64_t i = 0; i < fvm_tensor_count(t); i++)
        s += fvm_tensor_get_f64(t, i);
    return s;
}

/* The column of a struct value by schema name. */
static const fvm_value *field(const fvm_dataset *ds, const fvm_value *st, const char *name)
{
    const fvm_column *cols;
    int n = fvm_dataset_columns(ds, &cols);
    for (int k = 0; k < n; k++)
        if (!strcmp(cols[k].name, name))
            return st->items[k];
    fail_msg("no column '%s'", name);
    return NULL;
}

static void test_fedjax_fixture(void **state)
{
    (void)state;
    fvm_arena a = {0};
    char path[512], **splits;
    int nsplits;
    fvm_doc *exp = open_fixture(&a, "fedjax_emnist_like.sqlite", "fedjax-sqlite", path, &splits, &nsplits);
    fvm_diag d = {0};
    assert_int_equal(nsplits, 1);
    assert_string_equal(splits[0], "default");
    fvm_dataset_free_splits(splits, nsplits);

    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_string_equal(fvm_dataset_format(ds), "fedjax");
    const fvm_column *cols;
    assert_int_equal(fvm_dataset_columns(ds, &cols), 2);
    const fvm_doc *clients = fvm_doc_get(exp, "clients");
    assert_int_equal(fvm_dataset_clients(ds), (int64_t)clients->u.coll.n);
    for (size_t i = 0; i < clients->u.coll.n; i++) {
        const fvm_doc *c = clients->u.coll.items[i];
        const char *want_id = fvm_doc_get(c, "client_id")->u.str.s;
        /* clients in rowid order, with their ids and counts */
        const void *id;
        size_t id_len;
        int64_t count;
        ok(fvm_dataset_client(ds, (int64_t)i, &id, &id_len, &count, &d), &d);
        assert_int_equal(id_len, strlen(want_id));
        assert_memory_equal(id, want_id, id_len);
        assert_int_equal(count, (int64_t)num(fvm_doc_get(c, "num_examples")));
        assert_int_equal(fvm_dataset_find(ds, want_id, strlen(want_id)), (int64_t)i);

        fvm_value *seq;
        ok(fvm_dataset_read(ds, (int64_t)i, &seq, &d), &d);
        assert_int_equal(seq->kind, FVM_V_SEQ);
        assert_int_equal(seq->n, count);
        assert_non_null(seq->cols); /* every column has one shape: column storage */
        const fvm_tensor *px = &field(ds, seq->cols, "pixels")->t;
        const fvm_tensor *lb = &field(ds, seq->cols, "label")->t;
        const fvm_doc *shape = fvm_doc_get(c, "pixels_shape");
        assert_int_equal(px->shape.rank, (int)shape->u.coll.n);
        for (int k = 0; k < px->shape.rank; k++)
            assert_int_equal(px->shape.d[k], (int64_t)num(shape->u.coll.items[k]));
        check_rel(sum_tensor(px), num(fvm_doc_get(c, "pixels_sum")), 1e-6, "pixels_sum");
        check_rel(fvm_tensor_get_f64(px, 0), num(fvm_doc_get(c, "pixels_first")), 1e-6, "pixels_first");
        const fvm_doc *labels = fvm_doc_get(c, "label");
        assert_int_equal(fvm_tensor_count(lb), (int64_t)labels->u.coll.n);
        for (size_t k = 0; k < labels->u.coll.n; k++)
            assert_int_equal(fvm_tensor_get_i64(lb, (int64_t)k), (int64_t)num(labels->u.coll.items[k]));
        fvm_value_release(seq);
    }
    assert_int_equal(fvm_dataset_find(ds, "nobody", 6), -1);
    fvm_dataset_close(ds);
    fvm_arena_free(&a);
}

static void test_tff_fixture(void **state)
{
    (void)state;
    fvm_arena a = {0};
    char path[512], **splits;
    int nsplits;
    fvm_doc *exp = open_fixture(&a, "tff_emnist_like.sqlite", "tff-sqlite", path, &splits, &nsplits);
    fvm_diag d = {0};
    const fvm_doc *want_splits = fvm_doc_get(exp, "splits");
    assert_int_equal(nsplits, (int)want_splits->u.coll.n);
    assert_string_equal(splits[0], "test"); /* sorted */
    assert_string_equal(splits[1], "train");
    fvm_dataset_free_splits(splits, nsplits);

    /* Two splits: one must be chosen. */
    fvm_dataset *ds;
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, path, "test, train", NULL);
    assert_int_equal(fvm_dataset_open(path, "validation", &ds, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, path, "'validation'", "test, train", NULL);

    for (size_t sp = 0; sp < want_splits->u.coll.n; sp++) {
        const char *split = want_splits->u.coll.keys[sp]->u.str.s;
        const fvm_doc *clients = want_splits->u.coll.items[sp];
        ok(fvm_dataset_open(path, split, &ds, &d), &d);
        assert_string_equal(fvm_dataset_format(ds), "tff");
        assert_int_equal(fvm_dataset_clients(ds), (int64_t)clients->u.coll.n);
        /* Columns sorted by name, each a list whose length TFF's format does not fix: '?'. */
        const fvm_column *cols;
        assert_int_equal(fvm_dataset_columns(ds, &cols), 3);
        assert_string_equal(cols[0].name, "label");
        assert_int_equal(cols[0].dtype, FVM_DTYPE_I64);
        assert_int_equal(cols[0].shape.rank, 1);
        assert_int_equal(cols[0].shape.d[0], -1);
        assert_string_equal(cols[1].name, "pixels");
        assert_int_equal(cols[1].dtype, FVM_DTYPE_F32);
        assert_int_equal(cols[1].shape.d[0], -1);
        assert_string_equal(cols[2].name, "tag");
        assert_int_equal(cols[2].dtype, FVM_DTYPE_U8);
        assert_int_equal(cols[2].shape.d[0], -1);
        /* TFF's order: client ids sorted. */
        char prev[256] = "";
        for (int64_t i = 0; i < fvm_dataset_clients(ds); i++) {
            const void *id;
            size_t len;
            int64_t count;
            ok(fvm_dataset_client(ds, i, &id, &len, &count, &d), &d);
            char cur[256];
            snprintf(cur, sizeof cur, "%.*s", (int)len, (const char *)id);
            assert_true(strcmp(prev, cur) < 0);
            snprintf(prev, sizeof prev, "%s", cur);
        }
        for (size_t i = 0; i < clients->u.coll.n; i++) {
            const fvm_doc *c = clients->u.coll.items[i];
            const char *want_id = fvm_doc_get(c, "client_id")->u.str.s;
            int64_t idx = fvm_dataset_find(ds, want_id, strlen(want_id));
            assert_true(idx >= 0);
            const void *id;
            size_t len;
            int64_t count;
            ok(fvm_dataset_client(ds, idx, &id, &len, &count, &d), &d);
            assert_int_equal(len, strlen(want_id));
            assert_memory_equal(id, want_id, len);
            const fvm_doc *examples = fvm_doc_get(c, "examples");
            assert_int_equal(count, (int64_t)num(fvm_doc_get(c, "num_examples")));
            assert_int_equal(count, (int64_t)examples->u.coll.n);
            fvm_value *seq;
            ok(fvm_dataset_read(ds, idx, &seq, &d), &d);
            assert_int_equal(seq->n, count);
            for (int64_t e = 0; e < count; e++) {
                const fvm_doc *want = examples->u.coll.items[e];
                fvm_value *ex;
                ok(fvm_seq_get(seq, e, &ex, &d), &d);
                const fvm_tensor *px = &field(ds, ex, "pixels")->t, *lb = &field(ds, ex, "label")->t;
                const fvm_tensor *tag = &field(ds, ex, "tag")->t;
                assert_int_equal(fvm_tensor_count(px), 784);
                check_rel(sum_tensor(px), num(fvm_doc_get(want, "pixels_sum")), 1e-6, "pixels_sum");
                assert_int_equal(fvm_tensor_count(lb), 1);
                assert_int_equal(fvm_tensor_get_i64(lb, 0), (int64_t)num(fvm_doc_get(want, "label")));
                const char *want_tag = fvm_doc_get(want, "tag")->u.str.s;
                assert_int_equal(fvm_tensor_count(tag), (int64_t)strlen(want_tag));
                assert_memory_equal(fvm_tensor_data(tag), want_tag, strlen(want_tag));
                fvm_value_release(ex);
            }
            fvm_value_release(seq);
        }
        fvm_dataset_close(ds);
    }
    fvm_arena_free(&a);
}

/* ---- writing and reading back ------------------------------------------------------------ */

static fvm_tensor make(fvm_dtype dt, int rank, const int64_t *dims, uint32_t salt)
{
    fvm_dims shape = {.rank = rank};
    for (int k = 0; k < rank; k++)
        shape.d[k] = dims[k];
    fvm_tensor t;
    fvm_diag d = {0};
    ok(fvm_tensor_alloc(&t, dt, &shape, &d), &d);
    unsigned char *p = fvm_tensor_data(&t);
    size_t n = fvm_tensor_bytes(&t);
    uint32_t x = 2463534242u ^ salt;
    for (size_t i = 0; i < n; i++) { /* xorshift bytes: every bit pattern, NaNs included */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
    if (dt == FVM_DTYPE_BOOL)
        for (size_t i = 0; i < n; i++)
            p[i] &= 1;
    if (dt == FVM_DTYPE_F64 && n >= 24) { /* and the awkward ones on purpose */
        double special[3] = {-0.0, INFINITY, NAN};
        memcpy(p, special, sizeof special);
    }
    return t;
}

typedef struct spec_col {
    const char *name;
    fvm_dtype dt;
    int rank; /* per example */
    int64_t dims[3];
} spec_col;

static const spec_col spec[] = {
    {"flag", FVM_DTYPE_BOOL, 1, {3}}, {"pixels", FVM_DTYPE_U8, 2, {2, 2}}, {"label", FVM_DTYPE_I32, 0, {0}},
    {"ids", FVM_DTYPE_I64, 1, {4}},   {"mask", FVM_DTYPE_U32, 0, {0}},     {"x", FVM_DTYPE_F32, 1, {5}},
    {"w", FVM_DTYPE_F64, 2, {2, 3}},
};
enum { NSPEC = sizeof spec / sizeof spec[0] };

/* Client data: n examples of every spec column. */
static void make_client(int64_t n, uint32_t salt, fvm_tensor cols[NSPEC])
{
    for (int k = 0; k < NSPEC; k++) {
        int64_t dims[4] = {n};
        for (int j = 0; j < spec[k].rank; j++)
            dims[j + 1] = spec[k].dims[j];
        cols[k] = make(spec[k].dt, spec[k].rank + 1, dims, salt * 31 + (uint32_t)k);
    }
}

static void test_roundtrip(void **state)
{
    (void)state;
    char path[256];
    tmp("round.sqlite", path);
    fvm_diag d = {0};
    const char *names[NSPEC];
    for (int k = 0; k < NSPEC; k++)
        names[k] = spec[k].name;
    /* default split: 4 clients (one with no examples); split 'extra': 2 clients */
    const int64_t sizes[] = {7, 1, 0, 12}, extra_sizes[] = {3, 5};
    const char *ids[] = {"alice", "bob", "carol", "\x01\xff binary"};
    fvm_tensor data[4][NSPEC], extra[2][NSPEC];
    fvm_dataset_writer *w;
    ok(fvm_dataset_create(path, &w, &d), &d);
    for (int c = 0; c < 4; c++) {
        make_client(sizes[c], (uint32_t)c, data[c]);
        ok(fvm_dataset_add(w, NULL, ids[c], strlen(ids[c]), NSPEC, names, data[c], &d), &d);
    }
    for (int c = 0; c < 2; c++) {
        make_client(extra_sizes[c], 100u + (uint32_t)c, extra[c]);
        ok(fvm_dataset_add(w, "extra", ids[c], strlen(ids[c]), NSPEC, names, extra[c], &d), &d);
    }
    /* Nothing at path until finish. */
    struct stat sb;
    assert_int_equal(stat(path, &sb), -1);
    ok(fvm_dataset_finish(w, &d), &d);
    assert_int_equal(stat(path, &sb), 0);

    char **splits;
    int nsplits;
    ok(fvm_dataset_splits(path, &splits, &nsplits, &d), &d);
    assert_int_equal(nsplits, 2);
    assert_string_equal(splits[0], "default");
    assert_string_equal(splits[1], "extra");
    fvm_dataset_free_splits(splits, nsplits);

    for (int sp = 0; sp < 2; sp++) {
        fvm_dataset *ds;
        ok(fvm_dataset_open(path, sp ? "extra" : NULL, &ds, &d), &d);
        int nc = sp ? 2 : 4;
        assert_int_equal(fvm_dataset_clients(ds), nc);
        const fvm_column *cols;
        assert_int_equal(fvm_dataset_columns(ds, &cols), NSPEC);
        for (int k = 0; k < NSPEC; k++) {
            assert_string_equal(cols[k].name, spec[k].name);
            assert_int_equal(cols[k].dtype, spec[k].dt);
            assert_int_equal(cols[k].shape.rank, spec[k].rank);
            for (int j = 0; j < spec[k].rank; j++)
                assert_int_equal(cols[k].shape.d[j], spec[k].dims[j]);
        }
        for (int c = 0; c < nc; c++) {
            const void *id;
            size_t len;
            int64_t count;
            ok(fvm_dataset_client(ds, c, &id, &len, &count, &d), &d);
            assert_int_equal(len, strlen(ids[c]));
            assert_memory_equal(id, ids[c], len);
            assert_int_equal(count, sp ? extra_sizes[c] : sizes[c]);
            assert_int_equal(fvm_dataset_find(ds, ids[c], strlen(ids[c])), c);
            fvm_value *seq;
            ok(fvm_dataset_read(ds, c, &seq, &d), &d);
            assert_int_equal(seq->n, count);
            assert_non_null(seq->cols);
            for (int k = 0; k < NSPEC; k++)
                assert_true(fvm_tensor_identical(&seq->cols->items[k]->t, sp ? &extra[c][k] : &data[c][k]));
            fvm_value_release(seq);
        }
        /* any client, in any order */
        fvm_value *seq;
        ok(fvm_dataset_read(ds, nc - 1, &seq, &d), &d);
        fvm_value_release(seq);
        assert_int_equal(fvm_dataset_read(ds, nc, &seq, &d), FVM_ERR_USAGE);
        expect_error(&d, FVM_ERR_USAGE, "out of range", NULL);
        assert_int_equal(fvm_dataset_read(ds, -1, &seq, &d), FVM_ERR_USAGE);
        fvm_diag_clear(&d);
        fvm_dataset_close(ds);
    }
    fvm_dataset *ds;
    assert_int_equal(fvm_dataset_open(path, "nope", &ds, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, path, "'nope'", "default, extra", NULL);
    assert_int_equal(fvm_dataset_open(path, "bad name!", &ds, &d), FVM_ERR_NAME);
    fvm_diag_clear(&d);
    ok(fvm_dataset_open(path, "default", &ds, &d), &d); /* the default split by name */
    fvm_dataset_close(ds);
    for (int c = 0; c < 4; c++)
        for (int k = 0; k < NSPEC; k++)
            fvm_tensor_release(&data[c][k]);
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < NSPEC; k++)
            fvm_tensor_release(&extra[c][k]);
}

/* A client that inflates to far more than its compressed size (zeros
 * compress 1000 to 1) does not fit the first buffer: it is inflated again
 * into more room until it fits, then read exactly; the buffer is kept for
 * the next clients, smaller or not. */
static void test_compressible_client(void **state)
{
    (void)state;
    char path[256];
    tmp("zeros.sqlite", path);
    fvm_diag d = {0};
    const char *names[1] = {"x"};
    const int64_t rows[3] = {300, 2, 300};
    fvm_tensor cols[3];
    fvm_dataset_writer *w;
    ok(fvm_dataset_create(path, &w, &d), &d);
    for (int c = 0; c < 3; c++) {
        fvm_dims s = {.rank = 2, .d = {rows[c], 1000}};
        assert_int_equal(fvm_tensor_zeros(&cols[c], FVM_DTYPE_F32, &s, NULL), FVM_OK);
        fvm_tensor_set_f64(&cols[c], fvm_tensor_count(&cols[c]) - 1, (double)c + 1.5); /* not all zeros */
        char id[8];
        snprintf(id, sizeof id, "c%d", c);
        ok(fvm_dataset_add(w, NULL, id, strlen(id), 1, names, &cols[c], &d), &d);
    }
    ok(fvm_dataset_finish(w, &d), &d);
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    for (int c = 0; c < 3; c++) {
        fvm_value *seq;
        ok(fvm_dataset_read(ds, c, &seq, &d), &d);
        assert_true(fvm_tensor_identical(&seq->cols->items[0]->t, &cols[c]));
        fvm_value_release(seq);
        fvm_tensor_release(&cols[c]);
    }
    fvm_dataset_close(ds);
}

static void test_writer_refusals(void **state)
{
    (void)state;
    char path[256];
    tmp("refused.sqlite", path);
    fvm_diag d = {0};
    /* an older file at path stays until finish, and after an abort */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    fvm_dataset_writer *w;
    ok(fvm_dataset_create(path, &w, &d), &d);
    int64_t dims[2] = {2, 3};
    fvm_tensor a = make(FVM_DTYPE_F32, 2, dims, 1), b = make(FVM_DTYPE_I32, 1, dims, 2);
    int64_t other[1] = {3};
    fvm_tensor c3 = make(FVM_DTYPE_I32, 1, other, 3);
    const char *names[2] = {"a", "b"}, *swapped[2] = {"b", "a"}, *dup[2] = {"a", "a"};
    fvm_tensor cols[2] = {a, b}, rev[2] = {b, a}, uneven[2] = {a, c3}, wrongtype[2] = {a, a};
    ok(fvm_dataset_add(w, NULL, "one", 3, 2, names, cols, &d), &d);
    ok(fvm_dataset_add(w, NULL, "two", 3, 2, swapped, rev, &d), &d); /* any column order */
    assert_int_equal(fvm_dataset_add(w, NULL, "one", 3, 2, names, cols, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, path, "'one'", "twice", NULL);
    assert_int_equal(fvm_dataset_add(w, NULL, "x", 1, 2, dup, cols, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "'a' given twice", NULL);
    assert_int_equal(fvm_dataset_add(w, NULL, "x", 1, 2, names, uneven, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "examples", NULL);
    assert_int_equal(fvm_dataset_add(w, NULL, "x", 1, 2, names, wrongtype, &d), FVM_ERR_TYPE);
    expect_error(&d, FVM_ERR_TYPE, "column 'b'", "i32[]", NULL);
    assert_int_equal(fvm_dataset_add(w, NULL, "x", 1, 1, names, cols, &d), FVM_ERR_TYPE);
    fvm_diag_clear(&d);
    const char *bad_utf8[2] = {"a", "b\xff"};
    assert_int_equal(fvm_dataset_add(w, NULL, "x", 1, 2, bad_utf8, cols, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "column 1", "UTF-8", NULL);
    assert_int_equal(fvm_dataset_add(w, "no-dash", "x", 1, 2, names, cols, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "no-dash", NULL);
    /* until finish, the older file is untouched */
    char buf[8] = "";
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "old");
    /* the refusals left the writer usable */
    ok(fvm_dataset_finish(w, &d), &d);
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_clients(ds), 2);
    fvm_dataset_close(ds);
    /* an aborted writer leaves the file as it was */
    ok(fvm_dataset_create(path, &w, &d), &d);
    ok(fvm_dataset_add(w, NULL, "three", 5, 2, names, cols, &d), &d);
    fvm_dataset_abort(w);
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_clients(ds), 2);
    fvm_dataset_close(ds);
    /* no temporary file left behind */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    assert_int_not_equal(system(cmd), 0);
    fvm_dataset_abort(NULL);
    fvm_tensor_release(&a);
    fvm_tensor_release(&b);
    fvm_tensor_release(&c3);
}

/* ---- corrupt inputs ---------------------------------------------------------------------- */

static void sql(sqlite3 *db, const char *text)
{
    char *err = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &err) != SQLITE_OK)
        fail_msg("sql '%s': %s", text, err);
}

/* A new database at path (a file there removed first) with 'text' run. */
static sqlite3 *db_new(const char *path, const char *text)
{
    unlink(path);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sql(db, text);
    return db;
}

/* Runs 'text' on the database at path. */
static void sql_file(const char *path, const char *text)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sql(db, text);
    sqlite3_close(db);
}

/* FedJAX's table, without its closing parenthesis (for more columns). */
#define FEDJAX_COLUMNS \
    "CREATE TABLE federated_data (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, num_examples INTEGER NOT " \
    "NULL"
#define FEDJAX_TABLE FEDJAX_COLUMNS ")"
/* TFF's tables. */
#define TFF_TABLES \
    "CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, serialized_example_proto BLOB NOT " \
    "NULL); CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, num_examples INTEGER " \
    "NOT NULL);"

/* A FedJAX file whose clients' data blobs are given raw. */
static void fedjax_file(const char *path, int n, const char *const *ids, const void *const *blobs, const size_t *lens,
                        const int64_t *counts)
{
    sqlite3 *db = db_new(path, FEDJAX_TABLE);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO federated_data VALUES (?, ?, ?)", -1, &st, NULL), SQLITE_OK);
    for (int i = 0; i < n; i++) {
        sqlite3_bind_blob(st, 1, ids[i], (int)strlen(ids[i]), SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, blobs[i], (int)lens[i], SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, counts[i]);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void zlib_blob(const void *data, size_t len, unsigned char **out, size_t *out_len)
{
    uLongf n = compressBound((uLong)len);
    *out = malloc(n);
    assert_non_null(*out);
    assert_int_equal(compress2(*out, &n, data, (uLong)len, Z_DEFAULT_COMPRESSION), Z_OK);
    *out_len = n;
}

/* One column of a client map: ext 'type' holding (shape, dtype, bytes). */
typedef struct mcol {
    const char *name;
    int ext;
    const char *dtype;
    int rank;
    int64_t dims[3];
    size_t bytes; /* of zeros */
} mcol;

static void pack_client(const mcol *cols, int n, unsigned char **out, size_t *len)
{
    msgpack_sbuffer outer, inner;
    msgpack_sbuffer_init(&outer);
    msgpack_packer po, pi;
    msgpack_packer_init(&po, &outer, msgpack_sbuffer_write);
    msgpack_pack_map(&po, (size_t)n);
    void *zeros = calloc(1, 4096);
    for (int k = 0; k < n; k++) {
        msgpack_sbuffer_init(&inner);
        msgpack_packer_init(&pi, &inner, msgpack_sbuffer_write);
        msgpack_pack_array(&pi, 3);
        msgpack_pack_array(&pi, (size_t)cols[k].rank);
        for (int j = 0; j < cols[k].rank; j++)
            msgpack_pack_uint64(&pi, (uint64_t)cols[k].dims[j]);
        msgpack_pack_str_with_body(&pi, cols[k].dtype, strlen(cols[k].dtype));
        msgpack_pack_bin_with_body(&pi, zeros, cols[k].bytes);
        msgpack_pack_str_with_body(&po, cols[k].name, strlen(cols[k].name));
        msgpack_pack_ext_with_body(&po, inner.data, inner.size, (int8_t)cols[k].ext);
        msgpack_sbuffer_destroy(&inner);
    }
    free(zeros);
    zlib_blob(outer.data, outer.size, out, len);
    msgpack_sbuffer_destroy(&outer);
}

/* A file of two clients: 'good' (x: float32 [2,3]) and 'bad' with the given
 * compressed blob (or raw when rawlen is set); reading 'bad' must fail with
 * code and mention the file, the client and want (when not NULL). */
static void check_bad_client(const char *name, const void *blob, size_t len, int64_t count, fvm_status code,
                             const char *want)
{
    char path[256];
    tmp(name, path);
    const mcol good[1] = {{"x", 1, "float32", 2, {2, 3}, 24}};
    unsigned char *g;
    size_t glen;
    pack_client(good, 1, &g, &glen);
    const char *ids[2] = {"good", "bad"};
    const void *blobs[2] = {g, blob};
    size_t lens[2] = {glen, len};
    int64_t counts[2] = {2, count};
    fedjax_file(path, 2, ids, blobs, lens, counts);
    free(g);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    fvm_value *v = NULL;
    assert_int_equal(fvm_dataset_read(ds, 0, &v, &d), FVM_OK);
    fvm_value_release(v);
    v = NULL;
    assert_int_equal(fvm_dataset_read(ds, 1, &v, &d), code);
    assert_null(v);
    expect_error(&d, code, path, "'bad' (index 1)", want, NULL);
    fvm_dataset_close(ds);
}

static void check_bad_map(const char *name, const mcol *cols, int n, int64_t count, fvm_status code, const char *want)
{
    unsigned char *blob;
    size_t len;
    pack_client(cols, n, &blob, &len);
    check_bad_client(name, blob, len, count, code, want);
    free(blob);
}

static void test_corrupt_fedjax(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_dataset *ds;
    char path[256];

    /* not a SQLite file */
    tmp("text.sqlite", path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 100; i++)
        fputs("this is plain text, not a database\n", f);
    fclose(f);
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "not a SQLite database", NULL);
    char **splits;
    int nsplits;
    assert_int_equal(fvm_dataset_splits(path, &splits, &nsplits, &d), FVM_ERR_FORMAT);
    fvm_diag_clear(&d);

    /* missing file, directory */
    tmp("missing.sqlite", path);
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, path, "cannot open", NULL);
    assert_int_equal(fvm_dataset_open(tmpdir, NULL, &ds, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "directory", NULL);

    /* a SQLite file without the tables */
    tmp("other.sqlite", path);
    sqlite3_close(db_new(path, "CREATE TABLE people (name TEXT)"));
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "federated_data", "client_metadata", NULL);
    /* a table with the wrong columns */
    tmp("columns.sqlite", path);
    sqlite3_close(db_new(path, "CREATE TABLE federated_data (client_id BLOB, payload BLOB)"));
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "data", "num_examples", NULL);

    /* truncated zlib */
    const mcol ok1[1] = {{"x", 1, "float32", 2, {2, 3}, 24}};
    unsigned char *blob;
    size_t len;
    pack_client(ok1, 1, &blob, &len);
    check_bad_client("trunc.sqlite", blob, len / 2, 2, FVM_ERR_FORMAT, "truncated");
    /* not zlib at all */
    check_bad_client("nozlib.sqlite", "garbage!", 8, 2, FVM_ERR_FORMAT, "zlib");
    free(blob);
    /* garbage msgpack, and a header claiming 2^32 - 1 entries */
    const unsigned char junk[] = {0xc1, 0x00, 0x17}, huge[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 0x78};
    zlib_blob(junk, sizeof junk, &blob, &len);
    check_bad_client("junk.sqlite", blob, len, 2, FVM_ERR_FORMAT, "msgpack");
    free(blob);
    zlib_blob(huge, sizeof huge, &blob, &len);
    check_bad_client("huge.sqlite", blob, len, 2, FVM_ERR_FORMAT, "msgpack");
    free(blob);
    /* wrong ext type */
    const mcol ext2[1] = {{"x", 2, "float32", 2, {2, 3}, 24}};
    check_bad_map("ext2.sqlite", ext2, 1, 2, FVM_ERR_FORMAT, "ext type 2");
    /* shape and bytes disagree */
    const mcol short1[1] = {{"x", 1, "float32", 2, {2, 3}, 20}};
    check_bad_map("short.sqlite", short1, 1, 2, FVM_ERR_FORMAT, "needs 24 bytes");
    /* unknown dtype */
    const mcol f16[1] = {{"x", 1, "float16", 2, {2, 3}, 12}};
    check_bad_map("f16.sqlite", f16, 1, 2, FVM_ERR_TYPE, "'float16'");
    /* the schema: another dtype, another shape, a missing and an extra column */
    const mcol i32[1] = {{"x", 1, "int32", 2, {2, 3}, 24}};
    check_bad_map("dtype.sqlite", i32, 1, 2, FVM_ERR_TYPE, "column 'x'");
    const mcol wide[1] = {{"x", 1, "float32", 2, {2, 4}, 32}};
    check_bad_map("shape.sqlite", wide, 1, 2, FVM_ERR_TYPE, "f32[3]");
    const mcol other[1] = {{"y", 1, "float32", 2, {2, 3}, 24}};
    check_bad_map("renamed.sqlite", other, 1, 2, FVM_ERR_TYPE, "'y'");
    const mcol extra[2] = {{"x", 1, "float32", 2, {2, 3}, 24}, {"z", 1, "int32", 1, {2}, 8}};
    check_bad_map("extra.sqlite", extra, 2, 2, FVM_ERR_TYPE, "'z'");
    /* rows that disagree with num_examples */
    check_bad_map("count.sqlite", ok1, 1, 5, FVM_ERR_FORMAT, "num_examples is 5");
    /* the same column twice */
    const mcol twice[2] = {{"x", 1, "float32", 2, {2, 3}, 24}, {"x", 1, "float32", 2, {2, 3}, 24}};
    check_bad_map("twice.sqlite", twice, 2, 2, FVM_ERR_FORMAT, "twice");

    /* a corrupt first client: the schema cannot be read, open fails */
    tmp("first.sqlite", path);
    const char *ids[1] = {"first"};
    const void *blobs[1] = {"zz"};
    size_t lens[1] = {2};
    int64_t counts[1] = {1};
    fedjax_file(path, 1, ids, blobs, lens, counts);
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "'first' (index 0)", NULL);
}

static void test_fedjax_byte_strings(void **state)
{
    (void)state;
    /* 'S<n>' arrays (numpy names them bytes<8n>) and ext-4 arrays of bytes objects */
    char path[256];
    tmp("strings.sqlite", path);
    msgpack_sbuffer outer, inner;
    unsigned char *blobs[2];
    size_t lens[2];
    for (int c = 0; c < 2; c++) {
        msgpack_sbuffer_init(&outer);
        msgpack_packer po, pi;
        msgpack_packer_init(&po, &outer, msgpack_sbuffer_write);
        msgpack_pack_map(&po, 2);
        /* date: S10 [2] ; text: object [2] */
        msgpack_sbuffer_init(&inner);
        msgpack_packer_init(&pi, &inner, msgpack_sbuffer_write);
        msgpack_pack_array(&pi, 3);
        msgpack_pack_array(&pi, 1);
        msgpack_pack_uint64(&pi, 2);
        const char *dt = c ? "bytes32" : "bytes80";
        msgpack_pack_str_with_body(&pi, dt, strlen(dt));
        msgpack_pack_bin_with_body(&pi, c ? "abcdefgh" : "2021-04-201970-01-01", c ? 8 : 20);
        msgpack_pack_str_with_body(&po, "date", 4);
        msgpack_pack_ext_with_body(&po, inner.data, inner.size, 1);
        msgpack_sbuffer_destroy(&inner);
        msgpack_sbuffer_init(&inner);
        msgpack_packer_init(&pi, &inner, msgpack_sbuffer_write);
        msgpack_pack_array(&pi, 2);
        msgpack_pack_array(&pi, 1);
        msgpack_pack_uint64(&pi, 2);
        msgpack_pack_array(&pi, 2);
        msgpack_pack_bin_with_body(&pi, "hello", 5);
        msgpack_pack_bin_with_body(&pi, c ? "world" : "hi there", c ? 5 : 8);
        msgpack_pack_str_with_body(&po, "text", 4);
        msgpack_pack_ext_with_body(&po, inner.data, inner.size, 4);
        msgpack_sbuffer_destroy(&inner);
        zlib_blob(outer.data, outer.size, &blobs[c], &lens[c]);
        msgpack_sbuffer_destroy(&outer);
    }
    const char *ids[2] = {"a", "b"};
    const void *bl[2] = {blobs[0], blobs[1]};
    int64_t counts[2] = {2, 2};
    fedjax_file(path, 2, ids, bl, lens, counts);
    free(blobs[0]);
    free(blobs[1]);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    const fvm_column *cols;
    assert_int_equal(fvm_dataset_columns(ds, &cols), 2);
    assert_string_equal(cols[0].name, "date");
    assert_int_equal(cols[0].dtype, FVM_DTYPE_U8);
    assert_int_equal(cols[0].shape.rank, 1);
    assert_int_equal(cols[0].shape.d[0], -1); /* the width differs between clients */
    assert_int_equal(cols[1].shape.d[0], -1);
    fvm_value *seq;
    /* client a: texts of different lengths, so a list of examples */
    ok(fvm_dataset_read(ds, 0, &seq, &d), &d);
    assert_null(seq->cols);
    assert_int_equal(seq->n, 2);
    const fvm_tensor *date = &seq->items[1]->items[0]->t, *text = &seq->items[1]->items[1]->t;
    assert_int_equal(date->shape.d[0], 10);
    assert_memory_equal(fvm_tensor_data(date), "1970-01-01", 10);
    assert_int_equal(text->shape.d[0], 8);
    assert_memory_equal(fvm_tensor_data(text), "hi there", 8);
    fvm_value_release(seq);
    /* client b: equal lengths, so columns */
    ok(fvm_dataset_read(ds, 1, &seq, &d), &d);
    assert_non_null(seq->cols);
    assert_int_equal(seq->cols->items[0]->t.shape.d[1], 4);
    assert_memory_equal(fvm_tensor_data(&seq->cols->items[1]->t), "helloworld", 10);
    fvm_value_release(seq);
    fvm_dataset_close(ds);
}

/* fvm_dataset_add_bytes: a column of byte strings is FedJAX's ext 4, packb((shape, [bytes...])),
 * after the tensor columns; it reads back as u8[?]; bad offsets and schema changes are refused. */
static void test_write_byte_strings(void **state)
{
    (void)state;
    char path[256];
    tmp("write_strings.sqlite", path);
    fvm_diag d = {0};
    fvm_dataset_writer *w;
    ok(fvm_dataset_create(path, &w, &d), &d);
    int64_t dims[1] = {3};
    fvm_tensor label = make(FVM_DTYPE_I32, 1, dims, 7);
    const char *names[1] = {"label"};
    const uint8_t text[] = "abxyz";
    const int64_t off[4] = {0, 2, 2, 5}, bad[4] = {0, 3, 2, 5};
    fvm_dataset_bytes col = {.name = "text", .n = 3, .offsets = off, .bytes = text};
    ok(fvm_dataset_add_bytes(w, NULL, "c", 1, 1, names, &label, 1, &col, &d), &d);
    fvm_dataset_bytes decreasing = col, short_col = col, dup = col;
    decreasing.offsets = bad;
    short_col.n = 2;
    dup.name = "label";
    assert_int_equal(fvm_dataset_add_bytes(w, NULL, "x", 1, 1, names, &label, 1, &decreasing, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, path, "'text'", "byte string 1", NULL);
    assert_int_equal(fvm_dataset_add_bytes(w, NULL, "x", 1, 1, names, &label, 1, &short_col, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "'text' has 2 examples", NULL);
    assert_int_equal(fvm_dataset_add_bytes(w, NULL, "x", 1, 1, names, &label, 1, &dup, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "'label' given twice", NULL);
    /* the split's first client made text a column of byte strings: a tensor there is refused */
    fvm_tensor two[2] = {label, label};
    const char *both[2] = {"label", "text"};
    assert_int_equal(fvm_dataset_add(w, NULL, "x", 1, 2, both, two, &d), FVM_ERR_TYPE);
    expect_error(&d, FVM_ERR_TYPE, "'text'", "u8[?]", NULL);
    /* only byte strings: num_examples from them */
    ok(fvm_dataset_add_bytes(w, "test", "c", 1, 0, NULL, NULL, 1, &col, &d), &d);
    ok(fvm_dataset_finish(w, &d), &d);
    fvm_tensor_release(&label);

    /* the blob is zlib of FedJAX's msgpack, packed here by hand */
    msgpack_sbuffer outer, inner;
    msgpack_sbuffer_init(&outer);
    msgpack_sbuffer_init(&inner);
    msgpack_packer po, pi;
    msgpack_packer_init(&po, &outer, msgpack_sbuffer_write);
    msgpack_packer_init(&pi, &inner, msgpack_sbuffer_write);
    msgpack_pack_map(&po, 1);
    msgpack_pack_array(&pi, 2);
    msgpack_pack_array(&pi, 1);
    msgpack_pack_uint64(&pi, 3);
    msgpack_pack_array(&pi, 3);
    msgpack_pack_bin_with_body(&pi, "ab", 2);
    msgpack_pack_bin_with_body(&pi, "", 0);
    msgpack_pack_bin_with_body(&pi, "xyz", 3);
    msgpack_pack_str_with_body(&po, "text", 4);
    msgpack_pack_ext_with_body(&po, inner.data, inner.size, 4);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT data, num_examples FROM federated_data_test", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 1), 3);
    uLongf len = 4096;
    unsigned char raw[4096];
    assert_int_equal(uncompress(raw, &len, sqlite3_column_blob(st, 0), (uLong)sqlite3_column_bytes(st, 0)), Z_OK);
    assert_int_equal(len, outer.size);
    assert_memory_equal(raw, outer.data, outer.size);
    sqlite3_finalize(st);
    sqlite3_close(db);
    msgpack_sbuffer_destroy(&outer);
    msgpack_sbuffer_destroy(&inner);

    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    const fvm_column *cols;
    assert_int_equal(fvm_dataset_columns(ds, &cols), 2);
    int t = fvm_dataset_column_find(ds, "text");
    assert_true(t >= 0);
    assert_int_equal(cols[t].dtype, FVM_DTYPE_U8);
    assert_int_equal(cols[t].shape.rank, 1);
    assert_int_equal(cols[t].shape.d[0], -1);
    fvm_value *seq;
    ok(fvm_dataset_read(ds, 0, &seq, &d), &d);
    assert_null(seq->cols); /* lengths 2, 0, 3: a list */
    assert_int_equal(seq->n, 3);
    for (int i = 0; i < 3; i++) {
        const fvm_tensor *x = &seq->items[i]->items[t]->t;
        assert_int_equal(x->shape.d[0], off[i + 1] - off[i]);
        if (x->shape.d[0])
            assert_memory_equal(fvm_tensor_data(x), text + off[i], (size_t)x->shape.d[0]);
    }
    fvm_value_release(seq);
    fvm_dataset_close(ds);
}

static void test_fedjax_sparse_rowids(void **state)
{
    (void)state;
    /* rows deleted: the index keeps rowids, clients stay in rowid order */
    char path[256];
    tmp("sparse.sqlite", path);
    const mcol one[1] = {{"x", 1, "int32", 1, {1}, 4}};
    unsigned char *b;
    size_t len;
    pack_client(one, 1, &b, &len);
    const char *ids[4] = {"k0", "k1", "k2", "k3"};
    const void *blobs[4] = {b, b, b, b};
    size_t lens[4] = {len, len, len, len};
    int64_t counts[4] = {1, 1, 1, 1};
    fedjax_file(path, 4, ids, blobs, lens, counts);
    free(b);
    sql_file(path, "DELETE FROM federated_data WHERE client_id = CAST('k1' AS BLOB)");
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_clients(ds), 3);
    assert_int_equal(fvm_dataset_find(ds, "k2", 2), 1);
    assert_int_equal(fvm_dataset_find(ds, "k3", 2), 2);
    assert_int_equal(fvm_dataset_find(ds, "k1", 2), -1);
    const void *id;
    size_t idlen;
    int64_t count;
    ok(fvm_dataset_client(ds, 2, &id, &idlen, &count, &d), &d);
    assert_memory_equal(id, "k3", 2);
    fvm_dataset_close(ds);
}

/* UTF-8 without control characters (a simple check: lead bytes and their
 * continuation bytes). */
static bool valid_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = *p < 0x20             ? -1
                : *p < 0x80           ? 0
                : (*p & 0xe0) == 0xc0 ? 1
                : (*p & 0xf0) == 0xe0 ? 2
                : (*p & 0xf8) == 0xf0 ? 3
                                      : -1;
        if (n < 0)
            return false;
        p++;
        for (int k = 0; k < n; k++, p++)
            if ((*p & 0xc0) != 0x80)
                return false;
    }
    return true;
}

/* Hundreds of clients whose msgpack has random bytes changed or is cut
 * short: each read succeeds or fails with an error naming the file and the
 * client, never crashes (the sanitizer run checks memory). */
static void test_mutated_clients(void **state)
{
    (void)state;
    enum { N = 600 };
    msgpack_sbuffer sb, inner;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk, pi;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    const float xs[6] = {1, 2, 3, 4, 5, 6};
    msgpack_sbuffer_init(&inner);
    msgpack_packer_init(&pi, &inner, msgpack_sbuffer_write);
    msgpack_pack_array(&pi, 3);
    msgpack_pack_array(&pi, 2);
    msgpack_pack_uint64(&pi, 3);
    msgpack_pack_uint64(&pi, 2);
    msgpack_pack_str_with_body(&pi, "float32", 7);
    msgpack_pack_bin_with_body(&pi, xs, sizeof xs);
    msgpack_pack_str_with_body(&pk, "x", 1);
    msgpack_pack_ext_with_body(&pk, inner.data, inner.size, 1);
    msgpack_sbuffer_clear(&inner);
    msgpack_pack_array(&pi, 2);
    msgpack_pack_array(&pi, 1);
    msgpack_pack_uint64(&pi, 3);
    msgpack_pack_array(&pi, 3);
    msgpack_pack_bin_with_body(&pi, "a", 1);
    msgpack_pack_bin_with_body(&pi, "bc", 2);
    msgpack_pack_bin_with_body(&pi, "", 0);
    msgpack_pack_str_with_body(&pk, "s", 1);
    msgpack_pack_ext_with_body(&pk, inner.data, inner.size, 4);
    msgpack_sbuffer_clear(&inner);
    msgpack_pack_array(&pi, 3);
    msgpack_pack_array(&pi, 1);
    msgpack_pack_uint64(&pi, 3);
    msgpack_pack_str_with_body(&pi, "bytes16", 7);
    msgpack_pack_bin_with_body(&pi, "abcdef", 6);
    msgpack_pack_str_with_body(&pk, "w", 1);
    msgpack_pack_ext_with_body(&pk, inner.data, inner.size, 1);
    msgpack_sbuffer_destroy(&inner);

    static char idbuf[N][16];
    const char *ids[N];
    const void *blobs[N];
    size_t lens[N];
    int64_t counts[N];
    unsigned char *owned[N];
    uint32_t x = 88172645u;
    for (int i = 0; i < N; i++) {
        unsigned char *m = malloc(sb.size);
        memcpy(m, sb.data, sb.size);
        size_t len = sb.size;
        if (i > 0) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            if (x % 5 == 0) {
                len = x % sb.size; /* cut short */
            } else {
                for (uint32_t k = 0; k <= x % 3; k++) {
                    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                    m[x % sb.size] = (unsigned char)(x >> 8);
                }
            }
        }
        zlib_blob(m, len, &owned[i], &lens[i]);
        free(m);
        snprintf(idbuf[i], sizeof idbuf[i], "c%03d", i);
        ids[i] = idbuf[i];
        blobs[i] = owned[i];
        counts[i] = 3;
    }
    msgpack_sbuffer_destroy(&sb);
    char path[256];
    tmp("mutated.sqlite", path);
    fedjax_file(path, N, ids, blobs, lens, counts);
    for (int i = 0; i < N; i++)
        free(owned[i]);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    int failed = 0;
    for (int i = 0; i < N; i++) {
        fvm_value *v = NULL;
        fvm_status st = fvm_dataset_read(ds, i, &v, &d);
        if (st == FVM_OK) {
            assert_non_null(v);
            assert_int_equal(v->n, 3);
            fvm_value_release(v);
            continue;
        }
        failed++;
        assert_null(v);
        char who[16];
        snprintf(who, sizeof who, "'c%03d'", i);
        assert_true(valid_text(d.errs[0].msg));
        expect_error(&d, st, path, who, NULL);
    }
    assert_true(failed > N / 2);
    fvm_dataset_close(ds);
}

/* ---- TFF files --------------------------------------------------------------------------- */

/* A serialized Example with features label (int64), x (float, n values), tag (bytes). */
static size_t tff_example(int64_t label, int n, const char *tag, unsigned char **out)
{
    Tensorflow__Int64List il = TENSORFLOW__INT64_LIST__INIT;
    Tensorflow__FloatList fl = TENSORFLOW__FLOAT_LIST__INIT;
    Tensorflow__BytesList bl = TENSORFLOW__BYTES_LIST__INIT;
    il.n_value = 1;
    il.value = &label;
    float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    fl.n_value = (size_t)n;
    fl.value = xs;
    ProtobufCBinaryData bytes = {strlen(tag), (uint8_t *)(uintptr_t)tag};
    bl.n_value = 1;
    bl.value = &bytes;
    Tensorflow__Feature f[3] = {TENSORFLOW__FEATURE__INIT, TENSORFLOW__FEATURE__INIT, TENSORFLOW__FEATURE__INIT};
    f[0].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
    f[0].int64_list = &il;
    f[1].kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
    f[1].float_list = &fl;
    f[2].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
    f[2].bytes_list = &bl;
    Tensorflow__Features__FeatureEntry e[3] = {TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT,
                                               TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT,
                                               TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT};
    char k0[] = "label", k1[] = "x", k2[] = "tag";
    e[0].key = k0;
    e[0].value = &f[0];
    e[1].key = k1;
    e[1].value = &f[1];
    e[2].key = k2;
    e[2].value = &f[2];
    Tensorflow__Features__FeatureEntry *ep[3] = {&e[2], &e[0], &e[1]};
    Tensorflow__Features fs = TENSORFLOW__FEATURES__INIT;
    fs.n_feature = 3;
    fs.feature = ep;
    Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;
    ex.features = &fs;
    size_t len = tensorflow__example__get_packed_size(&ex);
    *out = malloc(len ? len : 1);
    assert_non_null(*out);
    tensorflow__example__pack(&ex, *out);
    return len;
}

/* Runs st, the insert of an example whose other parameters are bound, with
 * the serialized example [proto, proto+len) as parameter 'col'. */
static void insert_proto(sqlite3_stmt *st, int col, const void *proto, size_t len)
{
    sqlite3_bind_blob(st, col, proto, (int)len, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
}

/* The same with tff_example(label, n, tag). */
static void insert_example(sqlite3_stmt *st, int col, int64_t label, int n, const char *tag)
{
    unsigned char *p;
    size_t len = tff_example(label, n, tag, &p);
    insert_proto(st, col, p, len);
    free(p);
}

static void tff_file(const char *path, bool corrupt_second, int second_len)
{
    sqlite3 *db =
        db_new(path, TFF_TABLES "INSERT INTO client_metadata VALUES ('zed', 'train', 2), ('amy', 'train', 1)");
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO examples VALUES ('train', ?, ?)", -1, &st, NULL), SQLITE_OK);
    struct {
        const char *id;
        int n;
        const char *tag;
    } rows[3] = {{"zed", second_len, "first"}, {"amy", 3, "only"}, {"zed", 3, "second"}};
    for (int i = 0; i < 3; i++) {
        sqlite3_bind_text(st, 1, rows[i].id, -1, SQLITE_STATIC);
        if (corrupt_second && i == 2)
            insert_proto(st, 2, "\x0a\xff\xff\xff\x0f", 5);
        else
            insert_example(st, 2, 10 + i, rows[i].n, rows[i].tag);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_tff_small(void **state)
{
    (void)state;
    char path[256];
    tmp("tff.sqlite", path);
    tff_file(path, false, 3);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d); /* the only split */
    assert_int_equal(fvm_dataset_clients(ds), 2);
    const void *id;
    size_t len;
    int64_t count;
    ok(fvm_dataset_client(ds, 0, &id, &len, &count, &d), &d);
    assert_memory_equal(id, "amy", 3); /* sorted, not in insertion order */
    assert_int_equal(count, 1);
    assert_int_equal(fvm_dataset_find(ds, "zed", 3), 1);
    assert_int_equal(fvm_dataset_find(ds, "bob", 3), -1);
    const fvm_column *cols;
    assert_int_equal(fvm_dataset_columns(ds, &cols), 3);
    assert_string_equal(cols[2].name, "x");
    assert_int_equal(cols[2].shape.d[0], -1); /* TFF lists: their length is not the format's to fix */
    fvm_value *seq;
    ok(fvm_dataset_read(ds, 1, &seq, &d), &d);
    assert_int_equal(seq->n, 2);
    assert_null(seq->cols); /* tags 'first' and 'second' differ in length */
    const fvm_tensor *tag = &seq->items[1]->items[1]->t;
    assert_memory_equal(fvm_tensor_data(tag), "second", 6);
    assert_int_equal(fvm_tensor_get_i64(&seq->items[0]->items[0]->t, 0), 10); /* rowid order */
    fvm_value_release(seq);
    fvm_dataset_close(ds);

    /* a corrupt protobuf in client 'zed' */
    tff_file(path, true, 3);
    ok(fvm_dataset_open(path, "train", &ds, &d), &d);
    assert_int_equal(fvm_dataset_read(ds, 1, &seq, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "'zed' (index 1)", "example 1", "tf.train.Example", NULL);
    fvm_dataset_close(ds);

    /* a float list whose length differs in a later client than the first: TFF allows it */
    tff_file(path, false, 5);
    ok(fvm_dataset_open(path, "train", &ds, &d), &d);
    ok(fvm_dataset_read(ds, 1, &seq, &d), &d);
    assert_null(seq->cols);
    const fvm_tensor *x0 = &seq->items[0]->items[2]->t, *x1 = &seq->items[1]->items[2]->t;
    assert_int_equal(x0->shape.d[0], 5);
    assert_int_equal(x1->shape.d[0], 3);
    assert_true(fvm_tensor_get_f64(x0, 4) == 5.0 && fvm_tensor_get_f64(x1, 2) == 3.0);
    fvm_value_release(seq);
    fvm_dataset_close(ds);

    /* client_metadata disagreeing with examples */
    sql_file(path, "UPDATE client_metadata SET num_examples = 4 WHERE client_id = 'zed'");
    ok(fvm_dataset_open(path, "train", &ds, &d), &d);
    assert_int_equal(fvm_dataset_read(ds, 1, &seq, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "says 4 examples", NULL);
    fvm_dataset_close(ds);

    /* only one of the two tables */
    sql_file(path, "DROP TABLE client_metadata");
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "only one of the two", NULL);
}

/* ---- hostile files ------------------------------------------------------------------------ */

static void test_escape(void **state)
{
    (void)state;
    char buf[64];
    /* hand-written expectations: text stays, quotes and backslashes get one, controls and bad bytes \xHH */
    assert_string_equal(fvm_dataset_escape("pixels", 6, buf, sizeof buf), "pixels");
    assert_string_equal(fvm_dataset_escape("y\0", 2, buf, sizeof buf), "y\\x00");
    assert_string_equal(fvm_dataset_escape("it's \"q\" \\", 10, buf, sizeof buf), "it\\'s \\\"q\\\" \\\\");
    assert_string_equal(fvm_dataset_escape("a\nb\tc\x1b[31m", 10, buf, sizeof buf), "a\\nb\\tc\\x1b[31m");
    assert_string_equal(fvm_dataset_escape("x\xff\xc3", 3, buf, sizeof buf), "x\\xff\\xc3");
    assert_string_equal(fvm_dataset_escape("caf\xc3\xa9", 5, buf, sizeof buf), "caf\xc3\xa9"); /* é */
    assert_string_equal(fvm_dataset_escape("a\xe2\x80\xae"
                                           "b",
                                           5, buf, sizeof buf),
                        "a\\u202eb"); /* RLO */
    assert_string_equal(fvm_dataset_escape("\xc2\x85", 2, buf, sizeof buf), "\\u0085"); /* NEL */
    assert_string_equal(fvm_dataset_escape("\xed\xa0\x80", 3, buf, sizeof buf), "\\xed\\xa0\\x80"); /* a surrogate */
    assert_string_equal(fvm_dataset_escape("\xc0\xaf", 2, buf, sizeof buf), "\\xc0\\xaf"); /* overlong '/' */
    /* too long: cut at a whole escape, "..." after */
    assert_string_equal(fvm_dataset_escape("abcdefghij", 10, buf, 8), "abcd...");
    assert_string_equal(fvm_dataset_escape("\x01\x02\x03", 3, buf, 10), "\\x01...");
    assert_string_equal(fvm_dataset_escape("", 0, buf, sizeof buf), "");
}

/* A zlib'd msgpack map of int32 columns [1] named names[k] (lens[k] bytes),
 * keys as msgpack str, or bin when bin_keys. */
static void pack_named(int n, const char *const *names, const size_t *lens, bool bin_keys, unsigned char **out,
                       size_t *len)
{
    msgpack_sbuffer outer, inner;
    msgpack_sbuffer_init(&outer);
    msgpack_packer po, pi;
    msgpack_packer_init(&po, &outer, msgpack_sbuffer_write);
    msgpack_pack_map(&po, (size_t)n);
    for (int k = 0; k < n; k++) {
        int32_t v = k;
        msgpack_sbuffer_init(&inner);
        msgpack_packer_init(&pi, &inner, msgpack_sbuffer_write);
        msgpack_pack_array(&pi, 3);
        msgpack_pack_array(&pi, 1);
        msgpack_pack_uint64(&pi, 1);
        msgpack_pack_str_with_body(&pi, "int32", 5);
        msgpack_pack_bin_with_body(&pi, &v, 4);
        if (bin_keys)
            msgpack_pack_bin_with_body(&po, names[k], lens[k]);
        else
            msgpack_pack_str_with_body(&po, names[k], lens[k]);
        msgpack_pack_ext_with_body(&po, inner.data, inner.size, 1);
        msgpack_sbuffer_destroy(&inner);
    }
    zlib_blob(outer.data, outer.size, out, len);
    msgpack_sbuffer_destroy(&outer);
}

/* Column names with a NUL byte, not UTF-8, empty, too long, or not strings
 * are refused, naming the file, the client and the escaped name; "y\0" read
 * as "y" before. */
static void test_column_names(void **state)
{
    (void)state;
    char path[256];
    tmp("names.sqlite", path);
    const struct {
        const char *name;
        size_t len;
        bool bin;
        const char *says, *shown;
    } bad[] = {
        {"y\0", 2, false, "holds a NUL byte", "'y\\x00'"},
        {"x\xff\"q", 4, false, "is not valid UTF-8", "'x\\xff\\\"q'"},
        {"", 0, false, "is empty", "''"},
        {"y", 1, true, "not a msgpack string", "column 0"},
    };
    char long_name[300];
    memset(long_name, 'n', sizeof long_name);
    for (size_t c = 0; c < sizeof bad / sizeof bad[0] + 1; c++) {
        const char *names[2] = {"x", c < 4 ? bad[c].name : long_name};
        size_t lens[2] = {1, c < 4 ? bad[c].len : sizeof long_name};
        unsigned char *blob;
        size_t len;
        pack_named(2, names, lens, c < 4 && bad[c].bin, &blob, &len);
        const char *ids[1] = {"a"};
        const void *blobs[1] = {blob};
        int64_t counts[1] = {1};
        fedjax_file(path, 1, ids, blobs, &len, counts);
        free(blob);
        fvm_diag d = {0};
        fvm_dataset *ds = NULL;
        assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
        assert_null(ds);
        assert_true(valid_text(d.errs[0].msg));
        if (c < 4)
            expect_error(&d, FVM_ERR_FORMAT, path, "'a' (index 0)", bad[c].shown, bad[c].says, NULL);
        else
            expect_error(&d, FVM_ERR_FORMAT, path, "'a' (index 0)", "nnn...", "longer than 255 bytes", NULL);
    }
    /* "y\0" in a later client: not column 'y' of the schema */
    const char *first[2] = {"x", "y"}, *later[2] = {"x", "y\0"};
    size_t lens[2] = {1, 1}, later_lens[2] = {1, 2};
    unsigned char *b0, *b1;
    size_t l[2];
    pack_named(2, first, lens, false, &b0, &l[0]);
    pack_named(2, later, later_lens, false, &b1, &l[1]);
    const char *ids[2] = {"a", "b"};
    const void *blobs[2] = {b0, b1};
    int64_t counts[2] = {1, 1};
    fedjax_file(path, 2, ids, blobs, l, counts);
    free(b0);
    free(b1);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    fvm_value *v = NULL;
    assert_int_equal(fvm_dataset_read(ds, 1, &v, &d), FVM_ERR_FORMAT);
    assert_null(v);
    expect_error(&d, FVM_ERR_FORMAT, path, "'b' (index 1)", "'y\\x00'", "NUL", NULL);
    assert_int_equal(fvm_dataset_column_find(ds, "y"), 1);
    assert_int_equal(fvm_dataset_column_find(ds, "z"), -1);
    fvm_dataset_close(ds);
}

/* Columns matched by name whatever their order, in one client or the next:
 * 2000 columns, the second client's in reverse, the third's shuffled. */
static void test_column_order(void **state)
{
    (void)state;
    enum { N = 2000 };
    static char namebuf[N][8];
    const char *names[N];
    size_t lens[N];
    for (int k = 0; k < N; k++) {
        snprintf(namebuf[k], sizeof namebuf[k], "c%04d", k);
        names[k] = namebuf[k];
        lens[k] = 5;
    }
    /* column k holds k (pack_named), so reorder names only: the value tells the position packed */
    const char *rev[N], *shuf[N];
    size_t rlens[N];
    for (int k = 0; k < N; k++) {
        rev[k] = names[N - 1 - k];
        shuf[k] = names[(k * 7) % N]; /* 7 is prime to 2000: a permutation */
        rlens[k] = 5;
    }
    unsigned char *b[3];
    size_t l[3];
    pack_named(N, names, lens, false, &b[0], &l[0]);
    pack_named(N, rev, rlens, false, &b[1], &l[1]);
    pack_named(N, shuf, rlens, false, &b[2], &l[2]);
    char path[256];
    tmp("order.sqlite", path);
    const char *ids[3] = {"a", "b", "c"};
    const void *blobs[3] = {b[0], b[1], b[2]};
    int64_t counts[3] = {1, 1, 1};
    fedjax_file(path, 3, ids, blobs, l, counts);
    for (int k = 0; k < 3; k++)
        free(b[k]);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    for (int c = 0; c < 3; c++) {
        fvm_value *v;
        ok(fvm_dataset_read(ds, c, &v, &d), &d);
        for (int k = 0; k < N; k++) {
            /* schema column k is named c<k>; client c packed it at position p */
            int64_t p = c == 0 ? k : c == 1 ? N - 1 - k : -1;
            if (c == 2)
                for (int j = 0; j < N; j++)
                    if ((j * 7) % N == k)
                        p = j;
            assert_int_equal(fvm_tensor_get_i64(&v->cols->items[k]->t, 0), p);
        }
        fvm_value_release(v);
    }
    fvm_dataset_close(ds);
}

/* A FedJAX table with extra columns (as a hostile file may have). */
static void odd_table(const char *path, const char *create, const char *after)
{
    const mcol one[1] = {{"y", 1, "int32", 1, {1}, 4}}, two[1] = {{"y", 1, "int32", 1, {2}, 8}};
    unsigned char *b1, *b2;
    size_t l1, l2;
    pack_client(one, 1, &b1, &l1);
    pack_client(two, 1, &b2, &l2);
    sqlite3 *db = db_new(path, create);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO federated_data (client_id, data, num_examples) VALUES (?, ?, ?)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    for (int i = 0; i < 2; i++) {
        sqlite3_bind_blob(st, 1, i ? "b" : "a", 1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, i ? b2 : b1, (int)(i ? l2 : l1), SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, i + 1);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (after)
        sql(db, after);
    sqlite3_close(db);
    free(b1);
    free(b2);
}

/* The file odd_table wrote reads back: clients 'a' (one example) and 'b'
 * (two), each read and found by its id. */
static void check_odd_table(const char *path)
{
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_clients(ds), 2);
    for (int i = 0; i < 2; i++) {
        const void *id;
        size_t len;
        int64_t count;
        ok(fvm_dataset_client(ds, i, &id, &len, &count, &d), &d);
        assert_memory_equal(id, i ? "b" : "a", 1);
        assert_int_equal(count, i + 1);
        fvm_value *v;
        ok(fvm_dataset_read(ds, i, &v, &d), &d);
        assert_int_equal(v->n, i + 1);
        fvm_value_release(v);
        assert_int_equal(fvm_dataset_find(ds, i ? "b" : "a", 1), i);
    }
    fvm_dataset_close(ds);
}

/* A column named rowid (or _rowid_) hid SQLite's rowid: two clients read one row. */
static void test_rowid_names(void **state)
{
    (void)state;
    char path[256];
    tmp("rowid.sqlite", path);
    const char *base = FEDJAX_COLUMNS;
    const char *extra[3] = {", rowid INTEGER)", ", rowid INTEGER, \"_ROWID_\" INTEGER)",
                            ", oid INTEGER, x INTEGER GENERATED ALWAYS AS (1), rowid INTEGER GENERATED ALWAYS AS (1))"};
    for (int k = 0; k < 3; k++) {
        char create[512];
        snprintf(create, sizeof create, "%s%s", base, extra[k]);
        odd_table(path, create, k < 2 ? "UPDATE federated_data SET rowid = 1" : NULL);
        check_odd_table(path);
    }
    /* all three names hidden; no rowid at all */
    char create[512];
    snprintf(create, sizeof create, "%s, rowid INTEGER, _rowid_ INTEGER, OID INTEGER)", base);
    odd_table(path, create, NULL);
    fvm_diag d = {0};
    fvm_dataset *ds;
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "rowid, _rowid_ and oid", NULL);
    snprintf(create, sizeof create, "%s) WITHOUT ROWID", base);
    odd_table(path, create, NULL);
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "WITHOUT ROWID", NULL);
}

/* Rowids at the ends of int64: max - min overflowed (UBSan), and so did
 * rowid - first in find. */
static void test_extreme_rowids(void **state)
{
    (void)state;
    char path[256];
    tmp("extreme.sqlite", path);
    const char *create = FEDJAX_TABLE;
    const char *moves[3] = {
        "UPDATE federated_data SET rowid = -9223372036854775808 WHERE client_id = x'61';"
        "UPDATE federated_data SET rowid = 9223372036854775807 WHERE client_id = x'62'",
        "UPDATE federated_data SET rowid = 9223372036854775806 WHERE client_id = x'61';"
        "UPDATE federated_data SET rowid = 9223372036854775807 WHERE client_id = x'62'",
        "UPDATE federated_data SET rowid = -9223372036854775808 WHERE client_id = x'61';"
        "UPDATE federated_data SET rowid = -9223372036854775807 WHERE client_id = x'62'",
    };
    for (int k = 0; k < 3; k++) {
        odd_table(path, create, moves[k]);
        check_odd_table(path);
    }
}

/* Client ids must tell clients apart as bytes. */
static void test_duplicate_ids(void **state)
{
    (void)state;
    char path[256];
    tmp("dup.sqlite", path);
    /* no primary key: one id twice */
    odd_table(
        path, "CREATE TABLE federated_data (client_id BLOB, data BLOB, num_examples INTEGER)",
        "INSERT INTO federated_data SELECT client_id, data, num_examples FROM federated_data WHERE client_id = x'62'");
    fvm_diag d = {0};
    fvm_dataset *ds;
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "client id 'b' appears 2 times", NULL);
    /* FedJAX's primary key, with the text 'b' beside the bytes 'b' */
    odd_table(path, FEDJAX_TABLE,
              "INSERT INTO federated_data SELECT CAST(client_id AS TEXT), data, "
              "num_examples FROM federated_data WHERE client_id = x'62'");
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "client id 'b' appears 2 times", NULL);
    /* text ids alone are fine */
    odd_table(path, FEDJAX_TABLE, "UPDATE federated_data SET client_id = CAST(client_id AS TEXT)");
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_find(ds, "b", 1), 1);
    fvm_dataset_close(ds);
    /* ids found as bytes whatever collation the file declares: 'B' is not 'b' */
    odd_table(path,
              "CREATE TABLE federated_data (client_id TEXT COLLATE NOCASE NOT NULL PRIMARY KEY, data BLOB NOT "
              "NULL, num_examples INTEGER NOT NULL)",
              "UPDATE federated_data SET client_id = upper(client_id)");
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_find(ds, "B", 1), 1);
    assert_int_equal(fvm_dataset_find(ds, "b", 1), -1);
    fvm_dataset_close(ds);
}

/* Decodes a FedJAX client's data blob from memory (count: its num_examples, or -1). */
static fvm_status fedjax_decode(fvm_dataset *ds, const char *who, const void *blob, size_t len, int64_t count,
                                fvm_value **out, fvm_diag *d)
{
    const void *parts[1] = {blob};
    ds_raw raw = {count, 1, parts, &len};
    return fvm_dataset_decode(ds, who, &raw, out, d);
}

/* Decodes a TFF client's n serialized examples from memory. */
static fvm_status tff_decode(fvm_dataset *ds, const char *who, int64_t n, const void *const *protos, const size_t *lens,
                             fvm_value **out, fvm_diag *d)
{
    ds_raw raw = {n, n, protos, lens};
    return fvm_dataset_decode(ds, who, &raw, out, d);
}

/* An array with no elements but absurd dims: every dim is bounded. */
static void test_absurd_dims(void **state)
{
    (void)state;
    const mcol absurd[1] = {{"x", 1, "float32", 3, {2, INT64_MAX, 0}, 0}};
    check_bad_map("absurd.sqlite", absurd, 1, 2, FVM_ERR_LIMIT, "f32[2,9223372036854775807,0]");
    const mcol big[1] = {{"x", 1, "uint8", 3, {2, (int64_t)1 << 32, 0}, 0}};
    check_bad_map("big.sqlite", big, 1, 2, FVM_ERR_LIMIT, "limit");
    /* within the limit: read */
    const mcol fine[1] = {{"x", 1, "float32", 3, {2, 1000, 0}, 0}};
    unsigned char *blob;
    size_t len;
    pack_client(fine, 1, &blob, &len);
    fvm_dataset *ds = ds_new("memory", &fvm_dataset_format_fedjax);
    assert_non_null(ds);
    fvm_diag d = {0};
    fvm_value *v;
    ok(fedjax_decode(ds, "'fine'", blob, len, 2, &v, &d), &d);
    assert_int_equal(v->cols->items[0]->t.shape.d[1], 1000);
    fvm_value_release(v);
    fvm_dataset_close(ds);
    free(blob);
}

/* The decoders of one client's bytes, from memory (what fuzzing drives). */
static void test_decode_memory(void **state)
{
    (void)state;
    const mcol good[1] = {{"x", 1, "float32", 2, {2, 3}, 24}}, other[1] = {{"x", 1, "int32", 2, {2, 3}, 24}};
    unsigned char *b1, *b2;
    size_t l1, l2;
    pack_client(good, 1, &b1, &l1);
    pack_client(other, 1, &b2, &l2);
    fvm_dataset *ds = ds_new("memory", &fvm_dataset_format_fedjax);
    fvm_diag d = {0};
    fvm_value *v;
    ok(fedjax_decode(ds, "'one'", b1, l1, -1, &v, &d), &d); /* sets the schema */
    assert_int_equal(v->n, 2);
    fvm_value_release(v);
    assert_int_equal(fedjax_decode(ds, "'two'", b2, l2, -1, &v, &d), FVM_ERR_TYPE);
    expect_error(&d, FVM_ERR_TYPE, "memory", "'two'", "column 'x'", NULL);
    assert_int_equal(fedjax_decode(ds, "'three'", b1, l1, 5, &v, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "num_examples is 5", NULL);
    assert_int_equal(fedjax_decode(ds, "'four'", b1, l1 / 2, -1, &v, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "truncated", NULL);
    const void *two_blobs[2] = {b1, b1};
    size_t two_lens[2] = {l1, l1};
    ds_raw two = {-1, 2, two_blobs, two_lens};
    assert_int_equal(fvm_dataset_decode(ds, "'five'", &two, &v, &d), FVM_ERR_USAGE);
    assert_null(v);
    expect_error(&d, FVM_ERR_USAGE, "'five'", "one data blob, not 2", NULL);
    fvm_dataset_close(ds);
    free(b1);
    free(b2);

    /* tf.train.Example, written out by hand: {features {feature {key: "y\0" value {int64_list {value: 1}}}}} */
    static const unsigned char nul_key[] = {0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x02, 'y', 0x00,
                                            0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x01};
    /* the same with key "y" (one byte less in every length) */
    static const unsigned char y_key[] = {0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'y',
                                          0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x07};
    ds = ds_new("memory", &fvm_dataset_format_tff);
    const void *protos[2] = {y_key, nul_key};
    size_t lens[2] = {sizeof y_key, sizeof nul_key};
    assert_int_equal(tff_decode(ds, "'c'", 2, protos, lens, &v, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "memory", "'c'", "example 1", "'y\\x00'", "NUL", NULL);
    ok(tff_decode(ds, "'c'", 1, protos, lens, &v, &d), &d);
    assert_int_equal(fvm_tensor_get_i64(&v->cols->items[0]->t, 0), 7);
    fvm_value_release(v);
    ds_raw claims_two = {2, 1, protos, lens}; /* a count the examples do not have */
    assert_int_equal(fvm_dataset_decode(ds, "'c'", &claims_two, &v, &d), FVM_ERR_FORMAT);
    assert_null(v);
    expect_error(&d, FVM_ERR_FORMAT, "'c'", "says 2 examples, but there are 1", NULL);
    ok(tff_decode(ds, "'empty'", 0, protos, lens, &v, &d), &d);
    assert_int_equal(v->n, 0);
    fvm_value_release(v);
    const void *junk[1] = {"\x0a\xff\xff\xff\x0f"};
    size_t junk_len[1] = {5};
    assert_int_equal(tff_decode(ds, "'junk'", 1, junk, junk_len, &v, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "'junk'", "tf.train.Example", NULL);
    fvm_dataset_close(ds);
}

/* ---- the format interface ---------------------------------------------------------------- */

/* A format of this test's own, from memory only: each part of a client is one
 * example of one column 'x', its bytes as i32 values (a length that is not a
 * multiple of 4: as u8 values). The generic code sets nothing itself: the
 * schema comes from ds_set_schema, and every check and the sequences from the
 * generic decode path. */
static fvm_status mock_decode(fvm_dataset *ds, const char *who, const ds_raw *raw, int64_t *n, ds_col **cols,
                              fvm_diag *d)
{
    ds_col *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *n = raw->nparts;
    bool same = true;
    for (int64_t e = 1; e < raw->nparts; e++)
        same = same && raw->lens[e] == raw->lens[0];
    fvm_dtype dt = raw->nparts && raw->lens[0] % 4 ? FVM_DTYPE_U8 : FVM_DTYPE_I32;
    size_t es = fvm_dtype_size(dt);
    if (same) {
        fvm_dims shape = {.rank = 2, .d = {raw->nparts, raw->nparts ? (int64_t)(raw->lens[0] / es) : 0}};
        ok(fvm_tensor_alloc(&c->full, dt, &shape, d), d);
        for (int64_t e = 0; e < raw->nparts; e++)
            memcpy((char *)fvm_tensor_data(&c->full) + (size_t)e * raw->lens[0], raw->parts[e], raw->lens[e]);
    } else {
        c->rows = calloc((size_t)raw->nparts, sizeof *c->rows);
        c->nrows = raw->nparts;
        for (int64_t e = 0; e < raw->nparts; e++) {
            fvm_dims shape = {.rank = 1, .d = {(int64_t)(raw->lens[e] / es)}};
            ok(fvm_tensor_alloc(&c->rows[e], dt, &shape, d), d);
            memcpy(fvm_tensor_data(&c->rows[e]), raw->parts[e], raw->lens[e]);
        }
    }
    if (!ds->schema) {
        const char *names[1] = {"x"};
        size_t lens[1] = {1};
        fvm_status s = ds_set_schema(ds, who, 1, names, lens, c, d);
        if (s) {
            fvm_dataset_cols_free(c, 1);
            return s;
        }
        ds->cols[0].shape.d[0] = -1; /* lengths may differ between clients */
    }
    *cols = c;
    return FVM_OK;
}

static const struct fvm_dataset_format_i mock_format = {.name = "mock", .decode = mock_decode};
static const struct fvm_dataset_format_i mock_no_decode = {.name = "silent"};

/* The generic read path reaches a format only through its interface: the
 * format decodes, the generic code checks the columns against the schema
 * and builds the sequence (by columns, or a list of examples). */
static void test_format_interface(void **state)
{
    (void)state;
    fvm_dataset *ds = ds_new("memory", &mock_format);
    assert_non_null(ds);
    assert_string_equal(fvm_dataset_format(ds), "mock");
    fvm_diag d = {0};
    fvm_value *v = NULL;
    const int32_t a[2] = {1, 2}, b[3] = {3, 4, 5};
    const void *parts[2] = {a, b};
    size_t same[2] = {8, 8}, differ[2] = {8, 12};
    ds_raw raw = {-1, 2, parts, same};
    ok(fvm_dataset_decode(ds, "'first'", &raw, &v, &d), &d); /* sets the schema: x i32[?] */
    const fvm_column *cols;
    assert_int_equal(fvm_dataset_columns(ds, &cols), 1);
    assert_string_equal(cols[0].name, "x");
    assert_int_equal(cols[0].dtype, FVM_DTYPE_I32);
    assert_int_equal(cols[0].shape.d[0], -1);
    assert_int_equal(fvm_dataset_column_find(ds, "x"), 0);
    assert_non_null(v->cols); /* one length: by columns */
    assert_int_equal(v->n, 2);
    assert_int_equal(fvm_tensor_get_i64(&v->cols->items[0]->t, 3), 4);
    fvm_value_release(v);
    raw.lens = differ;
    ok(fvm_dataset_decode(ds, "'second'", &raw, &v, &d), &d);
    assert_null(v->cols); /* lengths 2 and 3: a list of examples */
    assert_int_equal(v->items[1]->items[0]->t.shape.d[0], 3);
    assert_int_equal(fvm_tensor_get_i64(&v->items[1]->items[0]->t, 2), 5);
    fvm_value_release(v);
    const char bytes[3] = {1, 2, 3};
    const void *one[1] = {bytes};
    size_t three[1] = {3};
    ds_raw other = {-1, 1, one, three}; /* u8 values: not the schema's dtype */
    assert_int_equal(fvm_dataset_decode(ds, "'third'", &other, &v, &d), FVM_ERR_TYPE);
    assert_null(v);
    expect_error(&d, FVM_ERR_TYPE, "memory", "client 'third', column 'x': examples are u8[3]", "has i32[?]", NULL);
    fvm_dataset_close(ds);
    /* a format that cannot decode from memory */
    ds = ds_new("memory", &mock_no_decode);
    assert_int_equal(fvm_dataset_decode(ds, "'any'", &raw, &v, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "silent", "from memory", NULL);
    fvm_dataset_close(ds);
}

/* A TFF file of clients with the given examples: each example x (float, xs[k]
 * values of 1, 2, ...) and y (int64, the example's number). */
static void tff_clients(const char *path, int n, const char *const *ids, const int *counts, const int *xlens)
{
    sqlite3 *db = db_new(path, TFF_TABLES);
    sqlite3_stmt *ex, *meta;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO examples VALUES ('train', ?, ?)", -1, &ex, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO client_metadata VALUES (?, 'train', ?)", -1, &meta, NULL),
                     SQLITE_OK);
    int e = 0;
    for (int c = 0; c < n; c++) {
        sqlite3_bind_text(meta, 1, ids[c], -1, SQLITE_STATIC);
        sqlite3_bind_int(meta, 2, counts[c]);
        assert_int_equal(sqlite3_step(meta), SQLITE_DONE);
        sqlite3_reset(meta);
        for (int k = 0; k < counts[c]; k++, e++) {
            sqlite3_bind_text(ex, 1, ids[c], -1, SQLITE_STATIC);
            insert_example(ex, 2, e, xlens[e], "t");
        }
    }
    sqlite3_finalize(ex);
    sqlite3_finalize(meta);
    sqlite3_close(db);
}

/* TFF allows a first client without examples and lengths that vary only in
 * a later client; both were errors. */
static void test_tff_schema(void **state)
{
    (void)state;
    char path[256];
    tmp("tff_schema.sqlite", path);
    const char *ids[3] = {"a_empty", "b", "c"};
    const int counts[3] = {0, 2, 2}, xlens[4] = {2, 2, 1, 3};
    tff_clients(path, 3, ids, counts, xlens);
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    const fvm_column *cols;
    assert_int_equal(fvm_dataset_columns(ds, &cols), 3);
    assert_string_equal(cols[2].name, "x");
    assert_int_equal(cols[2].dtype, FVM_DTYPE_F32);
    assert_int_equal(cols[2].shape.d[0], -1);
    fvm_value *v;
    ok(fvm_dataset_read(ds, 0, &v, &d), &d); /* no examples: empty columns */
    assert_int_equal(v->n, 0);
    assert_int_equal(v->cols->n, 3);
    fvm_value_release(v);
    ok(fvm_dataset_read(ds, 1, &v, &d), &d); /* x of length 2 in both: by columns */
    assert_non_null(v->cols);
    assert_int_equal(v->cols->items[2]->t.shape.d[1], 2);
    assert_int_equal(fvm_tensor_get_i64(&v->cols->items[0]->t, 1), 1); /* label of example 1 */
    fvm_value_release(v);
    ok(fvm_dataset_read(ds, 2, &v, &d), &d); /* lengths 1 and 3 */
    assert_null(v->cols);
    assert_int_equal(v->items[0]->items[2]->t.shape.d[0], 1);
    assert_int_equal(v->items[1]->items[2]->t.shape.d[0], 3);
    assert_true(fvm_tensor_get_f64(&v->items[1]->items[2]->t, 2) == 3.0);
    assert_int_equal(fvm_tensor_get_i64(&v->items[1]->items[0]->t, 0), 3);
    fvm_value_release(v);
    fvm_dataset_close(ds);

    /* no client has examples: no columns, every client empty */
    const int none[2] = {0, 0};
    tff_clients(path, 2, ids, none, xlens);
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_columns(ds, &cols), 0);
    ok(fvm_dataset_read(ds, 1, &v, &d), &d);
    assert_int_equal(v->n, 0);
    fvm_value_release(v);
    fvm_dataset_close(ds);
}

/* client_metadata's rows are checked when the file is opened: text names,
 * counts in range, one row per client; errors name the row. */
static void test_tff_metadata(void **state)
{
    (void)state;
    char path[256];
    tmp("tff_meta.sqlite", path);
    const char *ids[2] = {"a", "b"};
    const int counts[2] = {1, 1}, xlens[2] = {2, 2};
    const struct {
        const char *sql, *says;
    } bad[] = {
        {"UPDATE client_metadata SET split_name = CAST(split_name AS BLOB) WHERE client_id = 'b'",
         "client_metadata row 2: split_name is a blob, not text"},
        {"UPDATE client_metadata SET client_id = CAST(client_id AS BLOB) WHERE client_id = 'b'",
         "client_metadata row 2: client_id is a blob, not text"},
        {"UPDATE client_metadata SET num_examples = 2305843009213693952 WHERE client_id = 'a'",
         "client_metadata row 1: num_examples is 2305843009213693952, not a count"},
        {"UPDATE client_metadata SET num_examples = 1.5 WHERE client_id = 'a'",
         "client_metadata row 1: num_examples is a real, not an integer"},
        {"UPDATE client_metadata SET num_examples = -1 WHERE client_id = 'a'", "num_examples is -1"},
        {"INSERT INTO client_metadata VALUES ('a', 'train', 1)", "2 rows for client 'a' in split 'train'"},
        {"UPDATE client_metadata SET split_name = CAST(x'74726169ff6e' AS TEXT)",
         "split name 'trai\\xffn' is not valid UTF-8"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tff_clients(path, 2, ids, counts, xlens);
        sql_file(path, bad[k].sql);
        fvm_diag d = {0};
        fvm_dataset *ds = NULL;
        assert_int_equal(fvm_dataset_open(path, "train", &ds, &d), FVM_ERR_FORMAT);
        assert_null(ds);
        assert_true(valid_text(d.errs[0].msg));
        expect_error(&d, FVM_ERR_FORMAT, path, bad[k].says, NULL);
    }
    /* a count within range that the rows do not have: read without an allocation of that size */
    tff_clients(path, 2, ids, counts, xlens);
    sql_file(path, "UPDATE client_metadata SET num_examples = 2147483647 WHERE client_id = 'b'");
    fvm_diag d = {0};
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, "train", &ds, &d), &d);
    fvm_value *v = NULL;
    assert_int_equal(fvm_dataset_read(ds, 1, &v, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "'b' (index 1)", "says 2147483647 examples, but table examples has 1", NULL);
    fvm_dataset_close(ds);
}

/* Client ids compared as bytes, whatever collation the file declares. */
static void test_tff_collation(void **state)
{
    (void)state;
    char path[256];
    tmp("tff_nocase.sqlite", path);
    sqlite3 *db =
        db_new(path, "CREATE TABLE examples (split_name TEXT NOT NULL COLLATE NOCASE, client_id TEXT NOT "
                     "NULL COLLATE NOCASE, serialized_example_proto BLOB NOT NULL);"
                     "CREATE TABLE client_metadata (client_id TEXT NOT NULL COLLATE NOCASE, split_name TEXT NOT "
                     "NULL, num_examples INTEGER NOT NULL);"
                     "INSERT INTO client_metadata VALUES ('a', 'train', 1), ('A', 'train', 2), ('b', 'TRAIN', 1)");
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO examples VALUES (?, ?, ?)", -1, &st, NULL), SQLITE_OK);
    const char *rows[4][2] = {{"train", "a"}, {"train", "A"}, {"train", "A"}, {"TRAIN", "b"}};
    for (int i = 0; i < 4; i++) {
        sqlite3_bind_text(st, 1, rows[i][0], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, rows[i][1], -1, SQLITE_STATIC);
        insert_example(st, 3, i, 1, "t");
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    fvm_diag d = {0};
    char **splits;
    int nsplits;
    ok(fvm_dataset_splits(path, &splits, &nsplits, &d), &d);
    assert_int_equal(nsplits, 2); /* TRAIN and train */
    fvm_dataset_free_splits(splits, nsplits);
    fvm_dataset *ds;
    ok(fvm_dataset_open(path, "train", &ds, &d), &d);
    assert_int_equal(fvm_dataset_clients(ds), 2);
    assert_int_equal(fvm_dataset_find(ds, "A", 1), 0); /* 'A' < 'a' as bytes */
    assert_int_equal(fvm_dataset_find(ds, "a", 1), 1);
    fvm_value *v;
    ok(fvm_dataset_read(ds, 0, &v, &d), &d);
    assert_int_equal(v->n, 2);
    assert_int_equal(fvm_tensor_get_i64(&v->cols->items[0]->t, 0), 1);
    fvm_value_release(v);
    ok(fvm_dataset_read(ds, 1, &v, &d), &d);
    assert_int_equal(v->n, 1);
    assert_int_equal(fvm_tensor_get_i64(&v->cols->items[0]->t, 0), 0);
    fvm_value_release(v);
    fvm_dataset_close(ds);
}

/* Not a regular file: refused at once (a FIFO made SQLite wait forever). */
static void test_special_files(void **state)
{
    (void)state;
    char path[256];
    fvm_diag d = {0};
    fvm_dataset *ds;
    tmp("fifo.sqlite", path);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, path, "a FIFO, not a regular file", NULL);
    char **splits;
    int n;
    assert_int_equal(fvm_dataset_splits(path, &splits, &n, &d), FVM_ERR_IO);
    fvm_diag_clear(&d);
    assert_int_equal(fvm_dataset_open("/dev/null", NULL, &ds, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "/dev/null", "a device", NULL);
    tmp("empty.sqlite", path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, path, "the file is empty", NULL);
}

/* A file another process is writing: a clear error, not a wrong answer. */
static void test_locked_file(void **state)
{
    (void)state;
    char path[256];
    tmp("locked.sqlite", path);
    odd_table(path, FEDJAX_TABLE, NULL);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sql(db, "BEGIN EXCLUSIVE; DELETE FROM federated_data");
    fvm_diag d = {0};
    fvm_dataset *ds;
    assert_int_equal(fvm_dataset_open(path, NULL, &ds, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, path, "locked by another process", NULL);
    sql(db, "ROLLBACK");
    sqlite3_close(db);
    ok(fvm_dataset_open(path, NULL, &ds, &d), &d);
    assert_int_equal(fvm_dataset_clients(ds), 2);
    fvm_dataset_close(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fedjax_fixture),
        cmocka_unit_test(test_tff_fixture),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_compressible_client),
        cmocka_unit_test(test_writer_refusals),
        cmocka_unit_test(test_corrupt_fedjax),
        cmocka_unit_test(test_fedjax_byte_strings),
        cmocka_unit_test(test_write_byte_strings),
        cmocka_unit_test(test_fedjax_sparse_rowids),
        cmocka_unit_test(test_mutated_clients),
        cmocka_unit_test(test_tff_small),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_column_names),
        cmocka_unit_test(test_column_order),
        cmocka_unit_test(test_rowid_names),
        cmocka_unit_test(test_extreme_rowids),
        cmocka_unit_test(test_duplicate_ids),
        cmocka_unit_test(test_absurd_dims),
        cmocka_unit_test(test_decode_memory),
        cmocka_unit_test(test_format_interface),
        cmocka_unit_test(test_tff_schema),
        cmocka_unit_test(test_tff_metadata),
        cmocka_unit_test(test_tff_collation),
        cmocka_unit_test(test_special_files),
        cmocka_unit_test(test_locked_file),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
