/* test_safetensors.c - safetensors checkpoints: round trips, the exact bytes, metadata, corrupt files, values and overlays. */
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

#include "../format/safetensors.h"
#include "test_files.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_make("test_safetensors");
}

static const fvm_type *ty(fvm_arena *a, const char *text)
{
    fvm_diag d = {0};
    const fvm_type *t = NULL;
    ok_silent(fvm_type_parse(a, text, NULL, NULL, &t, &d), &d);
    return t;
}

/* ---- values with known contents ------------------------------------------------------ */

/* Element i of leaf k: the formula tests/check_safetensors.py repeats. */
static void fill(fvm_tensor *x, int k)
{
    int64_t n = fvm_tensor_count(x);
    unsigned char *p = fvm_tensor_data(x);
    for (int64_t i = 0; i < n; i++) {
        switch (x->dtype) {
        case FVM_DTYPE_BOOL:
            p[i] = (i * 7 + k) % 3 == 0;
            break;
        case FVM_DTYPE_U8:
            p[i] = (unsigned char)((i * 37 + k) % 256);
            break;
        case FVM_DTYPE_I32:
        case FVM_DTYPE_U32: {
            uint32_t v = (uint32_t)((uint64_t)i * 2654435761u + (uint64_t)k * 97u);
            memcpy(p + 4 * i, &v, 4);
            break;
        }
        case FVM_DTYPE_I64: {
            uint64_t v = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)k;
            memcpy(p + 8 * i, &v, 8);
            break;
        }
        case FVM_DTYPE_F32: {
            float v = (float)((double)(i - 5) / 3.0 + k);
            memcpy(p + 4 * i, &v, 4);
            break;
        }
        case FVM_DTYPE_F64: {
            double v = (double)(i - 5) / 3.0 + k;
            memcpy(p + 8 * i, &v, 8);
            break;
        }
        default:
            break;
        }
    }
}

/* A value of type t (concrete dims; '?' becomes 2) with leaf k filled by
 * fill(k), leaves counted in path order. */
static fvm_value *make(const fvm_type *t, int *k)
{
    switch (t->kind) {
    case FVM_T_TENSOR: {
        fvm_dims s = t->u.tensor.dims;
        for (int i = 0; i < s.rank; i++)
            if (s.d[i] < 0)
                s.d[i] = 2;
        fvm_tensor x;
        fvm_diag d = {0};
        ok_silent(fvm_tensor_alloc(&x, t->u.tensor.dtype, &s, &d), &d);
        fill(&x, (*k)++);
        fvm_value *v = fvm_value_tensor_take(&x);
        assert_non_null(v);
        return v;
    }
    case FVM_T_STRUCT: {
        fvm_value *v = fvm_value_list(FVM_V_STRUCT, t->u.strct.n);
        assert_non_null(v);
        for (int i = 0; i < t->u.strct.n; i++)
            v->items[i] = make(t->u.strct.elems[i], k);
        return v;
    }
    case FVM_T_FED:
        if (t->u.fed.all_equal)
            return make(t->u.fed.member, k);
        return fvm_value_list(FVM_V_CLIENTS, 0);
    case FVM_T_SEQ:
        return fvm_value_list(FVM_V_SEQ, 0);
    default:
        return fvm_value_list(FVM_V_STRUCT, 0); /* functions have no value */
    }
}

static fvm_value *make_value(const fvm_type *t)
{
    int k = 0;
    return make(t, &k);
}

static fvm_value *scalar_f32(float x)
{
    fvm_tensor t;
    fvm_dims s = {0};
    fvm_diag d = {0};
    ok_silent(fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, &d), &d);
    memcpy(fvm_tensor_data(&t), &x, 4);
    return fvm_value_tensor_take(&t);
}

static unsigned char *read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Saves v, loads it back, checks the entries (names in the order of the
 * data: widest dtype first, then by name) and that every tensor's data
 * starts at a multiple of its element size (8-byte aligned buffer), and
 * that the value read is identical. Returns the loaded file (caller frees). */
static fvm_safetensors *round_trip(const char *file, const fvm_value *v, const fvm_type *t, int n,
                                   const char *const *names)
{
    char path[256];
    fvm_diag d = {0};
    ok_silent(fvm_safetensors_save(tmp(file, path), v, t, 0, NULL, &d), &d);
    fvm_safetensors *f = NULL;
    ok_silent(fvm_safetensors_load(path, &f, &d), &d);
    assert_int_equal(fvm_safetensors_count(f), n);
    size_t len = 0;
    const unsigned char *img = fvm_safetensors_image(f, &len);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | img[i];
    assert_int_equal(hl % 8, 0);
    for (int i = 0; i < n; i++) {
        const fvm_safetensors_entry *e = fvm_safetensors_entry_at(f, i);
        assert_string_equal(e->name, names[i]);
        assert_int_equal(fvm_safetensors_find(f, names[i]), i);
        assert_int_equal((8 + hl + e->begin) % fvm_dtype_size(e->dtype), 0);
    }
    assert_int_equal(fvm_safetensors_find(f, "nope"), -1);
    fvm_value *back = NULL;
    ok_silent(fvm_safetensors_value(f, t, &back, &d), &d);
    assert_true(fvm_value_identical(v, back));
    fvm_value_release(back);
    return f;
}

/* ---- round trips --------------------------------------------------------------------- */

static void test_every_dtype(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const fvm_type *t = ty(&a, "<b=bool[3],u=u8[2,2],i=i32[4],l=i64[3],w=u32[3],f=f32[2,3],g=f64[6]>");
    fvm_value *v = make_value(t);
    /* extremes and special floats */
    int32_t i32[4] = {INT32_MIN, INT32_MAX, -1, 0};
    int64_t i64[3] = {INT64_MIN, INT64_MAX, -1};
    uint32_t u32[3] = {UINT32_MAX, 0, 1u << 31};
    float f32[6] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-45f, 3.4028235e38f};
    double f64[6] = {-NAN, INFINITY, -INFINITY, -0.0, 5e-324, 1.7976931348623157e308};
    memcpy(fvm_tensor_data(&v->items[2]->t), i32, sizeof i32);
    memcpy(fvm_tensor_data(&v->items[3]->t), i64, sizeof i64);
    memcpy(fvm_tensor_data(&v->items[4]->t), u32, sizeof u32);
    memcpy(fvm_tensor_data(&v->items[5]->t), f32, sizeof f32);
    memcpy(fvm_tensor_data(&v->items[6]->t), f64, sizeof f64);
    /* the data in the reference writer's order: I64, F64, F32, U32, I32, U8, BOOL */
    const char *names[] = {"l", "g", "f", "w", "i", "u", "b"};
    static const int item[] = {3, 6, 5, 4, 2, 1, 0};
    fvm_safetensors *f = round_trip("dtypes.safetensors", v, t, 7, names);
    static const fvm_dtype dts[] = {FVM_DTYPE_I64, FVM_DTYPE_F64, FVM_DTYPE_F32, FVM_DTYPE_U32,
                                    FVM_DTYPE_I32, FVM_DTYPE_U8,  FVM_DTYPE_BOOL};
    static const char *st[] = {"I64", "F64", "F32", "U32", "I32", "U8", "BOOL"};
    /* by hand: 3*8, 6*8, 6*4, 3*4, 4*4, 4*1, 3*1 bytes */
    static const uint64_t begins[] = {0, 24, 72, 96, 108, 124, 128};
    uint64_t off = 0;
    for (int i = 0; i < 7; i++) {
        const fvm_safetensors_entry *e = fvm_safetensors_entry_at(f, i);
        assert_int_equal(e->dtype, dts[i]);
        assert_string_equal(fvm_safetensors_dtype_name(dts[i]), st[i]);
        assert_true(fvm_dims_equal(&e->shape, &v->items[item[i]]->t.shape));
        assert_int_equal(e->begin, off);
        assert_int_equal(e->begin, begins[i]);
        off = e->end;
    }
    assert_int_equal(off, 131);
    /* one tensor alone */
    fvm_tensor x;
    fvm_diag d = {0};
    ok_silent(fvm_safetensors_tensor(f, fvm_safetensors_find(f, "f"), &x, &d), &d);
    assert_true(fvm_tensor_identical(&x, &v->items[5]->t));
    fvm_tensor_release(&x);
    fvm_safetensors_free(f);
    fvm_safetensors_free(NULL);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

static void test_shapes_and_paths(void **state)
{
    (void)state;
    fvm_arena a = {0};
    /* scalars, empty tensors, full rank, nesting, positional fields, placements */
    const fvm_type *t =
        ty(&a,
           "<s=f64[],e=f32[0],z=i32[3,0,2],r=u8[1,2,1,2,1,2,1,2],n=<m=<k=i64[2]>>,p=<f32[2],<bool[],x=u32[]>>>@SERVER");
    fvm_value *v = make_value(t);
    const char *names[] = {"n.m.k", "s", "e", "p.0", "p.1.x", "z", "r", "p.1.0"};
    fvm_safetensors *f = round_trip("shapes.safetensors", v, t, 8, names);
    const fvm_safetensors_entry *z = fvm_safetensors_entry_at(f, fvm_safetensors_find(f, "z"));
    assert_int_equal(z->shape.rank, 3);
    assert_int_equal(z->shape.d[1], 0);
    assert_int_equal(z->begin, z->end);
    assert_int_equal(fvm_safetensors_entry_at(f, 1)->shape.rank, 0);
    fvm_safetensors_free(f);
    fvm_value_release(v);

    /* a state that is one tensor is "value"; T@CLIENTS all-equal is T */
    const fvm_type *bare[] = {ty(&a, "f32[2,2]"), ty(&a, "f32[2,2]@SERVER"), ty(&a, "f32[2,2]@CLIENTS")};
    const char *value[] = {"value"};
    for (int i = 0; i < 3; i++) {
        v = make_value(bare[i]);
        f = round_trip("bare.safetensors", v, bare[i], 1, value);
        fvm_safetensors_free(f);
        fvm_value_release(v);
    }
    /* a struct with no tensors: just the header */
    const fvm_type *none = ty(&a, "<a=<>,b=<>>");
    v = make_value(none);
    f = round_trip("none.safetensors", v, none, 0, NULL);
    fvm_safetensors_free(f);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

/* The file for <w=f32[2],b=i32[]> = <w=[1, -2], b=7> with metadata round=12,
 * worked out by hand. */
static void test_exact_bytes(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const fvm_type *t = ty(&a, "<w=f32[2],b=i32[]>");
    fvm_value *v = make_value(t);
    float w[2] = {1.0f, -2.0f};
    int32_t b = 7;
    memcpy(fvm_tensor_data(&v->items[0]->t), w, sizeof w);
    memcpy(fvm_tensor_data(&v->items[1]->t), &b, sizeof b);

    /* 137 bytes of JSON and 7 spaces: a 144-byte (0x90) header */
    static const char header[] = "{\"__metadata__\":{\"round\":\"12\"},"
                                 "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                 "\"b\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[8,12]}}"
                                 "       ";
    static const unsigned char lenb[8] = {0x90, 0, 0, 0, 0, 0, 0, 0};
    static const unsigned char data[12] = {0x00, 0x00, 0x80, 0x3f, /* 1.0f */
                                           0x00, 0x00, 0x00, 0xc0, /* -2.0f */
                                           0x07, 0x00, 0x00, 0x00}; /* 7 */
    assert_int_equal(strlen(header), 0x90);
    unsigned char want[8 + 0x90 + 12];
    memcpy(want, lenb, 8);
    memcpy(want + 8, header, 0x90);
    memcpy(want + 8 + 0x90, data, 12);

    char path[256];
    fvm_diag d = {0};
    const char *meta[] = {"round", "12"};
    ok_silent(fvm_safetensors_save(tmp("exact.safetensors", path), v, t, 1, meta, &d), &d);
    size_t len;
    unsigned char *got = read_bytes(path, &len);
    assert_int_equal(len, sizeof want);
    assert_memory_equal(got, want, sizeof want);
    free(got);

    /* Same value and metadata (given in another order): the same bytes. */
    const char *meta2[] = {"z", "last", "a", "first", "round", "12"};
    const char *meta3[] = {"round", "12", "a", "first", "z", "last"};
    char p2[256], p3[256];
    ok_silent(fvm_safetensors_save(tmp("m2.safetensors", p2), v, t, 3, meta2, &d), &d);
    ok_silent(fvm_safetensors_save(tmp("m3.safetensors", p3), v, t, 3, meta3, &d), &d);
    size_t l2, l3;
    unsigned char *b2 = read_bytes(p2, &l2), *b3 = read_bytes(p3, &l3);
    assert_int_equal(l2, l3);
    assert_memory_equal(b2, b3, l2);
    assert_int_equal((b2[0] | b2[1] << 8) % 8, 0);
    free(b2);
    free(b3);

    /* Overwriting replaces the file and leaves no temporary behind. */
    ok_silent(fvm_safetensors_save(path, v, t, 1, meta, &d), &d);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    assert_int_not_equal(system(cmd), 0);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

/* Mixed dtypes: the data in the reference writer's order (F64, then I32,
 * then U8), every tensor at a multiple of its element size; the bytes of
 * <a=u8[3],b=f64[1],c=i32[]> = <[1,2,3], [0.5], -1>, worked out by hand
 * (161 bytes of JSON and 7 spaces: 168, 0xa8). */
static void test_aligned_bytes(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const fvm_type *t = ty(&a, "<a=u8[3],b=f64[1],c=i32[]>");
    fvm_value *v = make_value(t);
    const unsigned char a3[3] = {1, 2, 3};
    const double b1 = 0.5;
    const int32_t c = -1;
    memcpy(fvm_tensor_data(&v->items[0]->t), a3, 3);
    memcpy(fvm_tensor_data(&v->items[1]->t), &b1, 8);
    memcpy(fvm_tensor_data(&v->items[2]->t), &c, 4);
    static const char header[] = "{\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                                 "\"c\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[8,12]},"
                                 "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[12,15]}}"
                                 "       ";
    static const unsigned char data[15] = {0,    0,    0,    0,    0, 0, 0xe0, 0x3f, /* 0.5 */
                                           0xff, 0xff, 0xff, 0xff, /* -1 */
                                           1,    2,    3};
    assert_int_equal(strlen(header), 0xa8);
    unsigned char want[8 + 0xa8 + 15] = {0xa8};
    memcpy(want + 8, header, 0xa8);
    memcpy(want + 8 + 0xa8, data, 15);
    char path[256];
    fvm_diag d = {0};
    ok_silent(fvm_safetensors_save(tmp("aligned.safetensors", path), v, t, 0, NULL, &d), &d);
    size_t len;
    unsigned char *got = read_bytes(path, &len);
    assert_int_equal(len, sizeof want);
    assert_memory_equal(got, want, sizeof want);
    free(got);

    /* the same state as an older fedvm wrote it, in path order and unaligned (U8 at 0, F64 at 3,
       I32 at 11): still read, to the same value */
    static const char old[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                              "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[3,11]},"
                              "\"c\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[11,15]}}"
                              "       ";
    static const unsigned char old_data[15] = {1, 2, 3, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(strlen(old), 0xa8);
    unsigned char before[8 + 0xa8 + 15] = {0xa8};
    memcpy(before + 8, old, 0xa8);
    memcpy(before + 8 + 0xa8, old_data, 15);
    write_bytes(tmp("old.safetensors", path), before, sizeof before);
    fvm_safetensors *f = NULL;
    ok_silent(fvm_safetensors_load(path, &f, &d), &d);
    fvm_value *back = NULL;
    ok_silent(fvm_safetensors_value(f, t, &back, &d), &d);
    assert_true(fvm_value_identical(back, v));
    fvm_value_release(back);
    fvm_safetensors_free(f);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

static void test_metadata(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const fvm_type *t = ty(&a, "<w=f32[2]>");
    fvm_value *v = make_value(t);
    char path[256];
    fvm_diag d = {0};
    const char *meta[] = {"program", "fedavg.json", "round", "3", "note", "quote \" backslash \\ newline \n \xc3\xa9",
                          "",        "empty key"};
    ok_silent(fvm_safetensors_save(tmp("meta.safetensors", path), v, t, 4, meta, &d), &d);
    fvm_safetensors *f = NULL;
    ok_silent(fvm_safetensors_load(path, &f, &d), &d);
    assert_int_equal(fvm_safetensors_meta_count(f), 4);
    assert_string_equal(fvm_safetensors_meta(f, "round"), "3");
    assert_string_equal(fvm_safetensors_meta(f, "note"), meta[5]);
    assert_string_equal(fvm_safetensors_meta(f, ""), "empty key");
    assert_null(fvm_safetensors_meta(f, "absent"));
    const char *k, *val;
    fvm_safetensors_meta_at(f, 0, &k, &val);
    assert_string_equal(k, "");
    fvm_safetensors_meta_at(f, 3, &k, &val);
    assert_string_equal(k, "round");
    fvm_safetensors_free(f);

    /* no metadata: no __metadata__ at all */
    ok_silent(fvm_safetensors_save(path, v, t, 0, NULL, &d), &d);
    size_t len;
    unsigned char *b = read_bytes(path, &len);
    b[len - 1] = 0;
    assert_null(strstr((char *)b + 8, "__metadata__"));
    free(b);
    ok_silent(fvm_safetensors_load(path, &f, &d), &d);
    assert_int_equal(fvm_safetensors_meta_count(f), 0);
    assert_null(fvm_safetensors_meta(f, "round"));
    fvm_safetensors_free(f);

    /* refusals leave the old file in place */
    const char *dup[] = {"a", "1", "a", "2"};
    assert_int_equal(fvm_safetensors_save(path, v, t, 2, dup, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, path, "'a' given twice", NULL);
    const char *bad_utf8[] = {"k", "\xff\xfe"};
    assert_int_equal(fvm_safetensors_save(path, v, t, 1, bad_utf8, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "metadata 'k' is not valid UTF-8", NULL);
    const char *null_value[] = {"k", NULL};
    assert_int_equal(fvm_safetensors_save(path, v, t, 1, null_value, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "metadata value 0 is NULL", NULL);
    ok_silent(fvm_safetensors_load(path, &f, &d), &d);
    fvm_safetensors_free(f);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

static void test_unsaveable(void **state)
{
    (void)state;
    fvm_arena a = {0};
    fvm_diag d = {0};
    char path[256];
    tmp("never.safetensors", path);
    static const struct {
        const char *type, *what, *where;
    } cases[] = {
        {"<model=<w=f32[2]>,data=f32[3]*>", "sequence", "'data'"},
        {"<model=<w=f32[2]>,opt=<clients={f32[2]}@CLIENTS>>", "per-client", "'opt.clients'"},
        {"<model=<w=f32[2]>,<f=(f32[] -> f32[])>>", "function", "'1.f'"},
        {"{<w=f32[2]>}@CLIENTS", "per-client", "the state is"},
        {"f32[2]*", "sequence", "the state is"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const fvm_type *t = ty(&a, cases[i].type);
        fvm_value *v = make_value(t);
        assert_int_equal(fvm_safetensors_save(path, v, t, 0, NULL, &d), FVM_ERR_TYPE);
        expect_error(&d, FVM_ERR_TYPE, path, cases[i].what, cases[i].where, "cannot hold", NULL);
        fvm_value_release(v);
    }
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);

    /* a value that is not of its type */
    const fvm_type *t = ty(&a, "<w=f32[2],b=i32[]>");
    const fvm_type *other = ty(&a, "<w=f32[3],b=i32[]>");
    fvm_value *v = make_value(other);
    assert_int_equal(fvm_safetensors_save(path, v, t, 0, NULL, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "'w'", "f32[2]", NULL);
    fvm_value_release(v);
    v = scalar_f32(1);
    assert_int_equal(fvm_safetensors_save(path, v, t, 0, NULL, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "not of its type", NULL);
    fvm_value_release(v);
    /* two leaves of one name (types built by hand can have any field names) */
    const fvm_type *f32 = ty(&a, "f32[]");
    const char *inner_names[] = {"b"};
    const fvm_type *inner = fvm_type_struct(&a, 1, inner_names, &f32);
    const char *outer_names[] = {"a", "a.b"};
    const fvm_type *outer_elems[] = {inner, f32};
    const fvm_type *clash = fvm_type_struct(&a, 2, outer_names, outer_elems);
    v = make_value(clash);
    assert_int_equal(fvm_safetensors_save(path, v, clash, 0, NULL, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, "two tensors of the state are both named 'a.b'", NULL);
    fvm_value_release(v);
    /* a directory that does not exist */
    v = make_value(t);
    assert_int_equal(fvm_safetensors_save("/nonexistent-dir/x.safetensors", v, t, 0, NULL, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "/nonexistent-dir/x.safetensors", NULL);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

/* ---- corrupt files ------------------------------------------------------------------- */

/* A file of header text h (unpadded) and n data bytes (zeros). */
static unsigned char *file_of(const char *h, size_t n, size_t *len)
{
    size_t hl = strlen(h);
    *len = 8 + hl + n;
    unsigned char *b = calloc(1, *len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, h, hl);
    return b;
}

/* Header h with n data bytes must be rejected with code, the message
 * mentioning want (and the file's name). */
static void bad_header(const char *h, size_t n, fvm_status code, const char *want)
{
    size_t len;
    unsigned char *b = file_of(h, n, &len);
    fvm_safetensors *f = (fvm_safetensors *)&f;
    fvm_diag d = {0};
    if (fvm_safetensors_parse("bad.safetensors", b, len, &f, &d) == FVM_OK)
        fail_msg("header %s was accepted", h);
    assert_null(f);
    assert_int_equal(d.n, 1);
    expect_error(&d, code, "bad.safetensors: ", want, NULL);
    free(b);
}

static void good_header(const char *h, size_t n)
{
    size_t len;
    unsigned char *b = file_of(h, n, &len);
    fvm_safetensors *f = NULL;
    fvm_diag d = {0};
    ok_silent(fvm_safetensors_parse("good.safetensors", b, len, &f, &d), &d);
    fvm_safetensors_free(f);
    free(b);
}

#define T(name, dt, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}"

static void test_load_errors(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_safetensors *f = NULL;
    char path[256];

    /* the file itself */
    assert_int_equal(fvm_safetensors_load(tmp("missing.safetensors", path), &f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "missing.safetensors", "cannot open", NULL);
    assert_int_equal(fvm_safetensors_load(tmpdir, &f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "directory", NULL);
    write_bytes(tmp("empty.safetensors", path), "", 0);
    assert_int_equal(fvm_safetensors_load(path, &f, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "empty.safetensors", "0 bytes", NULL);
    write_bytes(tmp("five.safetensors", path), "\x02\0\0\0\0", 5);
    assert_int_equal(fvm_safetensors_load(path, &f, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "five.safetensors", "5 bytes", NULL);

    /* header length */
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    assert_int_equal(fvm_safetensors_parse("h.safetensors", huge, 10, &f, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "18446744073709551615 runs past the end", NULL);
    unsigned char past[16] = {3, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    assert_int_equal(fvm_safetensors_parse("h.safetensors", past, 10, &f, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "header length 3 runs past the end", NULL);
    unsigned char zero[16] = {0};
    assert_int_equal(fvm_safetensors_parse("h.safetensors", zero, 16, &f, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "header length 0 is too small", NULL);
    size_t big = 8 + (size_t)FVM_SAFETENSORS_MAX_HEADER + 1;
    unsigned char *hb = calloc(1, big);
    assert_non_null(hb);
    uint64_t over = (uint64_t)FVM_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++)
        hb[i] = (unsigned char)(over >> (8 * i));
    assert_int_equal(fvm_safetensors_parse("h.safetensors", hb, big, &f, &d), FVM_ERR_LIMIT);
    expect_error(&d, FVM_ERR_LIMIT, "larger than the limit", NULL);
    free(hb);
    unsigned char nul[12] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, 0}; /* NUL padding, not spaces */
    assert_int_equal(fvm_safetensors_parse("h.safetensors", nul, 12, &f, &d), FVM_ERR_SYNTAX);
    expect_error(&d, FVM_ERR_SYNTAX, "not valid JSON", "(around file offset 10)", NULL);

    /* the JSON */
    bad_header("{not json}", 0, FVM_ERR_SYNTAX, "not valid JSON");
    bad_header("{\"a\":1", 0, FVM_ERR_SYNTAX, "not valid JSON");
    bad_header("\x89PNG\r\n\x1a\n", 0, FVM_ERR_SYNTAX, "not valid JSON");
    bad_header("{\"\xff\":1}", 0, FVM_ERR_SYNTAX, "not valid JSON");
    bad_header("\"text\"", 0, FVM_ERR_SYNTAX, "not valid JSON");
    bad_header("[1,2]", 0, FVM_ERR_FORMAT, "the header is an array, not a JSON object");
    bad_header("{" T("a", "F32", "[1]", "0", "4") "," T("a", "F32", "[1]", "4", "8") "}", 8, FVM_ERR_FORMAT,
               "has a key twice");
    /* entries */
    bad_header("{\"a\":1}", 0, FVM_ERR_FORMAT, "tensor 'a': the header entry is an integer, not an object");
    bad_header("{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4, FVM_ERR_FORMAT, "tensor 'a' has no \"dtype\"");
    bad_header("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, FVM_ERR_FORMAT, "'a' has no \"shape\"");
    bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", 4, FVM_ERR_FORMAT, "'a' has no \"data_offsets\"");
    bad_header("{" T("a", "F16", "[2]", "0", "4") "}", 4, FVM_ERR_FORMAT,
               "'a' has dtype 'F16', which fedvm does not read");
    bad_header("{" T("b", "BF16", "[2]", "0", "4") "}", 4, FVM_ERR_FORMAT, "'b' has dtype 'BF16'");
    bad_header("{" T("a", "f32", "[1]", "0", "4") "}", 4, FVM_ERR_FORMAT, "dtype 'f32'");
    /* control characters in names are not printed */
    bad_header("{" T("a\\u001b[2J\\n", "F16", "[1]", "0", "2") "}", 2, FVM_ERR_FORMAT, "tensor 'a?[2J?' has dtype");
    bad_header("{\"a\":{\"dtype\":5,\"shape\":[],\"data_offsets\":[0,4]}}", 4, FVM_ERR_FORMAT, "dtype is an integer");
    /* shapes */
    bad_header("{" T("a", "F32", "[-1]", "0", "4") "}", 4, FVM_ERR_FORMAT,
               "'a': shape element 0 is not a non-negative");
    bad_header("{" T("a", "F32", "[1.5]", "0", "4") "}", 4, FVM_ERR_FORMAT, "shape element 0");
    bad_header("{" T("a", "F32", "[1,\"2\"]", "0", "8") "}", 8, FVM_ERR_FORMAT, "shape element 1");
    bad_header("{" T("a", "F32", "4", "0", "16") "}", 16, FVM_ERR_FORMAT, "'a': shape is an integer, not an array");
    bad_header("{" T("a", "U8", "[1,1,1,1,1,1,1,1,1]", "0", "1") "}", 1, FVM_ERR_FORMAT, "'a' has 9 dims");
    bad_header("{" T("a", "F32", "[1099511627776,1099511627776]", "0", "4") "}", 4, FVM_ERR_LIMIT, "'a' (f32[");
    bad_header("{" T("a", "F64", "[4611686018427387904,4611686018427387904,4]", "0", "0") "}", 0, FVM_ERR_LIMIT,
               "larger than fedvm's limit");
    bad_header("{" T("a", "F64", "[0,4611686018427387904,4611686018427387904]", "0", "0") "}", 0, FVM_ERR_LIMIT,
               "larger than fedvm's limit");
    bad_header("{" T("a", "F32", "[99999999999999999999]", "0", "4") "}", 4, FVM_ERR_SYNTAX, "too big integer");
    /* offsets */
    bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, FVM_ERR_FORMAT,
               "'a': data_offsets is not [begin, end]");
    bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, FVM_ERR_FORMAT,
               "data_offsets is not");
    bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 4, FVM_ERR_FORMAT,
               "data_offsets is not");
    bad_header("{" T("a", "F32", "[1]", "-4", "0") "}", 4, FVM_ERR_FORMAT, "data_offsets is not");
    bad_header("{" T("a", "F32", "[1]", "8", "4") "}", 8, FVM_ERR_FORMAT, "[8, 4] is not a range");
    bad_header("{" T("a", "F32", "[1]", "4", "8") "}", 4, FVM_ERR_FORMAT, "within the data buffer (4 bytes)");
    bad_header("{" T("a", "F32", "[1]", "9223372036854775800", "9223372036854775807") "}", 4, FVM_ERR_FORMAT,
               "not a range");
    bad_header("{" T("a", "F32", "[2]", "0", "4") "}", 4, FVM_ERR_FORMAT,
               "'a' (f32[2]) takes 8 bytes, but data_offsets [0, 4] hold 4");
    bad_header("{" T("a", "F32", "[2]", "0", "8") "," T("b", "I32", "[2]", "4", "12") "}", 12, FVM_ERR_FORMAT,
               "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
    bad_header("{" T("a", "F32", "[2]", "0", "8") "," T("b", "I32", "[2]", "0", "8") "}", 8, FVM_ERR_FORMAT, "overlap");
    bad_header("{" T("a", "F32", "[2]", "0", "8") "," T("e", "I32", "[0]", "4", "4") "}", 8, FVM_ERR_FORMAT, "overlap");
    bad_header("{" T("a", "F32", "[2]", "0", "8") "," T("b", "I32", "[2]", "12", "20") "}", 20, FVM_ERR_FORMAT,
               "bytes [8, 12) of the data buffer belong to no tensor (a hole before 'b')");
    bad_header("{" T("b", "I32", "[2]", "4", "12") "}", 12, FVM_ERR_FORMAT, "bytes [0, 4)");
    bad_header("{" T("a", "F32", "[2]", "0", "8") "}", 10, FVM_ERR_FORMAT,
               "bytes [8, 10) of the data buffer belong to no tensor (after 'a'");
    bad_header("{}", 3, FVM_ERR_FORMAT, "holds 3 bytes but the header has no tensors");
    /* metadata */
    bad_header("{\"__metadata__\":[]}", 0, FVM_ERR_FORMAT, "__metadata__ is an array, not an object");
    bad_header("{\"__metadata__\":{\"round\":3}}", 0, FVM_ERR_FORMAT,
               "__metadata__ 'round' is an integer, not a string");
    bad_header("{\"__metadata__\":{\"x\":null}}", 0, FVM_ERR_FORMAT, "'x' is null");
    bad_header("{\"__metadata__\":{\"x\":{\"y\":\"z\"}}}", 0, FVM_ERR_FORMAT, "'x' is an object");
    bad_header("{\"__metadata__\":{},\"__metadata__\":{}}", 0, FVM_ERR_FORMAT, "twice");

    /* valid files fedvm would not write that way: any key order, no padding,
     * data in another order than the header, extra entry members, empty
     * tensors anywhere, metadata last, whitespace */
    good_header("{}", 0);
    good_header("{" T("b", "I32", "[2]", "8", "16") "," T("a", "F32", "[2]", "0", "8") "}", 16);
    good_header(
        "{\"a\":{\"data_offsets\":[0,2],\"shape\":[2],\"dtype\":\"U8\",\"extra\":[1]},\"__metadata__\":{\"k\":\"v\"}}",
        2);
    good_header("{" T("e", "F64", "[0,3]", "0", "0") "," T("a", "BOOL", "[2]", "0", "2") "," T(
                    "z", "I64", "[]", "2", "10") "," T("y", "U32", "[3,0]", "10", "10") "}  \n\t ",
                10);

    /* the order of the listing is the order of the data */
    size_t len;
    unsigned char *b = file_of("{" T("b", "I32", "[2]", "8", "16") "," T("a", "F32", "[2]", "0", "8") "}", 16, &len);
    ok_silent(fvm_safetensors_parse("x", b, len, &f, &d), &d);
    assert_string_equal(fvm_safetensors_entry_at(f, 0)->name, "a");
    assert_string_equal(fvm_safetensors_entry_at(f, 1)->name, "b");
    assert_int_equal(fvm_safetensors_find(f, "b"), 1);
    fvm_safetensors_free(f);
    free(b);
}

/* A small generator (xorshift64*) so the corruption loop repeats exactly. */
static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next_rand(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

static void test_random_corruption(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const fvm_type *t = ty(&a, "<model=<w=f32[3,4],b=f64[4]>,opt=<i64[],<u8[5],bool[2]>>,e=i32[0,2]>");
    fvm_value *v = make_value(t);
    char path[256];
    fvm_diag d = {0};
    const char *meta[] = {"round", "7", "program", "p.json"};
    ok_silent(fvm_safetensors_save(tmp("good.safetensors", path), v, t, 2, meta, &d), &d);
    size_t len;
    unsigned char *good = read_bytes(path, &len);
    size_t hl = (size_t)good[0] | (size_t)good[1] << 8;
    unsigned char *b = malloc(len);
    assert_non_null(b);
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(b, good, len);
        size_t n = len;
        int kind = (int)(next_rand() % 6);
        if (kind == 0) {
            n = (size_t)(next_rand() % len); /* truncate */
        } else if (kind == 1) {
            b[next_rand() % 8] = (unsigned char)next_rand(); /* the length */
        } else if (kind == 5) {
            /* swap a digit or punctuation for another in the header */
            static const char pick[] = "0123456789[]{},:\" -.eE";
            for (int k = 1 + (int)(next_rand() % 3); k > 0; k--)
                b[8 + next_rand() % hl] = (unsigned char)pick[next_rand() % (sizeof pick - 1)];
        } else {
            /* flip 1 to 4 bytes, mostly in the header */
            for (int k = 1 + (int)(next_rand() % 4); k > 0; k--) {
                size_t at = kind == 4 ? next_rand() % len : 8 + next_rand() % hl;
                b[at] ^= (unsigned char)(1u << (next_rand() % 8));
            }
        }
        fvm_safetensors *f = NULL;
        fvm_status s = fvm_safetensors_parse("c.safetensors", b, n, &f, &d);
        if (s == FVM_OK) {
            accepted++;
            assert_non_null(f);
            for (int i = 0; i < fvm_safetensors_count(f); i++) {
                fvm_tensor x;
                if (fvm_safetensors_tensor(f, i, &x, &d) == FVM_OK)
                    fvm_tensor_release(&x);
            }
            fvm_value *back = NULL;
            if (fvm_safetensors_value(f, t, &back, &d) == FVM_OK)
                fvm_value_release(back);
            if (fvm_safetensors_overlay(f, v, t, &back, NULL, &d) == FVM_OK)
                fvm_value_release(back);
            fvm_safetensors_free(f);
        } else {
            rejected++;
            assert_null(f);
            assert_true(d.n >= 1);
            assert_non_null(d.errs[0].loc.file);
            assert_string_equal(d.errs[0].loc.file, "c.safetensors");
        }
        fvm_diag_clear(&d);
    }
    print_message("corruptions: %d rejected, %d accepted\n", rejected, accepted);
    assert_true(rejected > 10000);
    assert_true(accepted > 0); /* flips in the data bytes keep a valid file */
    /* a few through the file system as well */
    for (size_t cut = 0; cut < len; cut += 7) {
        write_bytes(path, good, cut);
        fvm_safetensors *f = NULL;
        assert_int_not_equal(fvm_safetensors_load(path, &f, &d), FVM_OK);
        assert_null(f);
        fvm_diag_clear(&d);
    }
    free(b);
    free(good);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

/* ---- values and overlays ------------------------------------------------------------- */

/* f loaded from a file holding value v of type t. */
static fvm_safetensors *saved(const char *name, const fvm_type *t, const fvm_value *v)
{
    char path[256];
    fvm_diag d = {0};
    ok_silent(fvm_safetensors_save(tmp(name, path), v, t, 0, NULL, &d), &d);
    fvm_safetensors *f = NULL;
    ok_silent(fvm_safetensors_load(path, &f, &d), &d);
    return f;
}

static void test_value_mismatches(void **state)
{
    (void)state;
    fvm_arena a = {0};
    fvm_diag d = {0};
    const fvm_type *t = ty(&a, "<model=<w1=f32[3,4],b1=f32[4]>,count=i32[]>");
    fvm_value *v = make_value(t);
    fvm_safetensors *f = saved("v.safetensors", t, v);
    fvm_value *out = NULL;

    /* '?' dims take any size; placements are transparent */
    ok_silent(fvm_safetensors_value(f, ty(&a, "<model=<w1=f32[?,4],b1=f32[?]>,count=i32[]>@SERVER"), &out, &d), &d);
    assert_true(fvm_value_identical(out, v));
    fvm_value_release(out);

    out = (fvm_value *)&out;
    assert_int_equal(
        fvm_safetensors_value(f, ty(&a, "<model=<w1=f32[3,4],b1=f32[4],w2=f32[4]>,count=i32[]>"), &out, &d),
        FVM_ERR_NAME);
    assert_null(out);
    expect_error(&d, FVM_ERR_NAME, "v.safetensors: ", "no tensor 'model.w2' (f32[4])", NULL);
    assert_int_equal(fvm_safetensors_value(f, ty(&a, "<model=<w1=f64[3,4],b1=f32[4]>,count=i32[]>"), &out, &d),
                     FVM_ERR_TYPE);
    expect_error(&d, FVM_ERR_TYPE, "'model.w1' is f32[3,4] in the file, the state needs f64[3,4]", NULL);
    assert_int_equal(fvm_safetensors_value(f, ty(&a, "<model=<w1=f32[4,3],b1=f32[4,1]>,count=i32[]>"), &out, &d),
                     FVM_ERR_TYPE);
    assert_int_equal(d.n, 2); /* every problem */
    expect_error(&d, FVM_ERR_TYPE, "'model.w1' is f32[3,4] in the file, the state needs f32[4,3]", NULL);
    assert_int_equal(fvm_safetensors_value(f, ty(&a, "<model=<w1=f32[3,4]>>"), &out, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, "2 tensors of the file are not part of the state: 'model.b1', 'count'",
                 "another program", NULL);
    assert_int_equal(fvm_safetensors_value(f, ty(&a, "f32[3,4]"), &out, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, "no tensor 'value'", NULL);
    assert_int_equal(
        fvm_safetensors_value(f, ty(&a, "<model=<w1=f32[3,4],b1=f32[4]>,count=i32[],d=f32[2]*>"), &out, &d),
        FVM_ERR_TYPE);
    expect_error(&d, FVM_ERR_TYPE, "'d' is a sequence", NULL);
    fvm_safetensors_free(f);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

/* Replaces every leaf of t with a fresh value (fill seed k0 + leaf index). */
static fvm_value *make_from(const fvm_type *t, int k0)
{
    int k = k0;
    return make(t, &k);
}

static void test_overlay(void **state)
{
    (void)state;
    fvm_arena a = {0};
    fvm_diag d = {0};
    const fvm_type *t = ty(&a, "<model=<w1=f32[3,4],b1=f32[4]>,opt=<m=<w1=f32[3,4],b1=f32[4]>,count=i32[]>>@SERVER");
    fvm_value *state_v = make_value(t);
    fvm_value *out = NULL;
    int replaced = -1;

    /* the model alone, saved as its own state: names relative to 'model' */
    const fvm_type *mt = ty(&a, "<w1=f32[3,4],b1=f32[4]>");
    fvm_value *model = make_from(mt, 100);
    fvm_safetensors *f = saved("model.safetensors", mt, model);
    ok_silent(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), &d);
    assert_int_equal(replaced, 2);
    assert_true(fvm_value_identical(out->items[0], model));
    assert_ptr_equal(out->items[1], state_v->items[1]); /* shared, not copied */
    assert_false(fvm_value_identical(out, state_v));
    fvm_value_release(out);
    fvm_safetensors_free(f);

    /* full paths */
    const fvm_type *ft = ty(&a, "<model=<b1=f32[4]>,opt=<count=i32[]>>");
    fvm_value *part = make_from(ft, 200);
    f = saved("full.safetensors", ft, part);
    ok_silent(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), &d);
    assert_int_equal(replaced, 2);
    assert_ptr_equal(out->items[0]->items[0], state_v->items[0]->items[0]);
    assert_true(fvm_value_identical(out->items[0]->items[1], part->items[0]->items[0]));
    assert_true(fvm_value_identical(out->items[1]->items[1], part->items[1]->items[0]));
    assert_ptr_equal(out->items[1]->items[0], state_v->items[1]->items[0]);
    fvm_value_release(out);
    fvm_safetensors_free(f);
    fvm_value_release(part);

    /* relative to 'opt', two levels deep */
    const fvm_type *ot = ty(&a, "<m=<w1=f32[3,4]>>");
    part = make_from(ot, 300);
    f = saved("opt.safetensors", ot, part);
    ok_silent(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), &d);
    assert_int_equal(replaced, 1);
    assert_true(fvm_value_identical(out->items[1]->items[0]->items[0], part->items[0]->items[0]));
    assert_ptr_equal(out->items[0], state_v->items[0]);
    fvm_value_release(out);
    fvm_safetensors_free(f);
    fvm_value_release(part);

    /* nothing in the file: nothing replaced */
    const fvm_type *et = ty(&a, "<>");
    part = make_value(et);
    f = saved("none.safetensors", et, part);
    ok_silent(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), &d);
    assert_int_equal(replaced, 0);
    assert_ptr_equal(out, state_v);
    fvm_value_release(out);
    fvm_safetensors_free(f);
    fvm_value_release(part);

    /* a wrong shape or dtype */
    const fvm_type *wt = ty(&a, "<w1=f32[4,3],b1=f64[4]>");
    part = make_value(wt);
    f = saved("wrong.safetensors", wt, part);
    out = (fvm_value *)&out;
    assert_int_equal(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), FVM_ERR_TYPE);
    assert_null(out);
    assert_int_equal(replaced, 0);
    assert_int_equal(d.n, 2);
    expect_error(&d, FVM_ERR_TYPE, "wrong.safetensors",
                 "tensor 'w1' is f32[4,3] in the file, the state's 'model.w1' needs f32[3,4]", NULL);
    fvm_safetensors_free(f);
    fvm_value_release(part);

    /* names that are no leaf */
    const fvm_type *zt = ty(&a, "<w1=f32[3,4],zzz=f32[]>");
    part = make_value(zt);
    f = saved("zzz.safetensors", zt, part);
    assert_int_equal(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, "1 tensor of the file names no tensor of the state: 'zzz'",
                 "'model.w1', 'model.b1', 'opt.m.w1', 'opt.m.b1', 'opt.count'", NULL);
    fvm_safetensors_free(f);
    fvm_value_release(part);

    /* a mix of forms: 'w1' below model, 'opt.count' a full path */
    const fvm_type *xt = ty(&a, "<w1=f32[3,4],opt=<count=i32[]>>");
    part = make_value(xt);
    f = saved("mix.safetensors", xt, part);
    assert_int_equal(fvm_safetensors_overlay(f, state_v, t, &out, &replaced, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, "mix full paths and paths below different top-level fields", NULL);
    fvm_safetensors_free(f);
    fvm_value_release(part);

    /* ambiguous: 'w' fits below 'model' and below 'ema' */
    const fvm_type *at = ty(&a, "<model=<w=f32[2]>,ema=<w=f32[2]>,step=i32[]>");
    fvm_value *av = make_value(at);
    const fvm_type *wt2 = ty(&a, "<w=f32[2]>");
    part = make_value(wt2);
    f = saved("amb.safetensors", wt2, part);
    assert_int_equal(fvm_safetensors_overlay(f, av, at, &out, &replaced, &d), FVM_ERR_NAME);
    expect_error(&d, FVM_ERR_NAME, "several top-level fields of the state ('model', 'ema')", "'model.w'", NULL);
    fvm_safetensors_free(f);
    fvm_value_release(part);
    fvm_value_release(av);

    /* a bare tensor state takes a file named "value" */
    const fvm_type *bt = ty(&a, "f32[3,4]");
    fvm_value *bv = make_value(bt);
    f = saved("bare.safetensors", bt, model->items[0]);
    ok_silent(fvm_safetensors_overlay(f, bv, bt, &out, &replaced, &d), &d);
    assert_int_equal(replaced, 1);
    assert_true(fvm_value_identical(out, model->items[0]));
    fvm_value_release(out);
    fvm_safetensors_free(f);
    fvm_value_release(bv);

    /* states that cannot be checkpointed */
    f = saved("model2.safetensors", mt, model);
    const fvm_type *st = ty(&a, "<model=<w1=f32[3,4],b1=f32[4]>,data={f32[2]*}@CLIENTS>");
    fvm_value *sv = make_value(st);
    assert_int_equal(fvm_safetensors_overlay(f, sv, st, &out, &replaced, &d), FVM_ERR_TYPE);
    expect_error(&d, FVM_ERR_TYPE, "'data' is a per-client value", NULL);
    fvm_value_release(sv);
    assert_int_equal(fvm_safetensors_overlay(f, model, t, &out, &replaced, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "not of its type", NULL);
    fvm_safetensors_free(f);

    fvm_value_release(model);
    fvm_value_release(state_v);
    fvm_arena_free(&a);
}

/* ---- files for tests/check_safetensors.py -------------------------------------------- */

/* Writes the files the independent reader checks into $FVM_SAFETENSORS_OUT. */
static void test_export(void **state)
{
    (void)state;
    const char *dir = getenv("FVM_SAFETENSORS_OUT");
    if (!dir || !*dir)
        dir = tmpdir;
    fvm_arena a = {0};
    fvm_diag d = {0};
    char path[512];
    /* keep in step with tests/check_safetensors.py */
    const fvm_type *t = ty(&a, "<model=<w1=f32[3,4],b1=f32[4],w2=f64[4,2]>,opt=<step=i64[],m=<w1=f32[3,4]>,"
                               "p=<u8[5],bool[2,3]>>,stats=<i32[6],u32[3],empty=f32[2,0],scalar=f64[]>>@SERVER");
    fvm_value *v = make_value(t);
    const char *meta[] = {"program", "fedavg.json", "round", "12", "note", "\xc3\xbcnicode \"quoted\"\n"};
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    ok_silent(fvm_safetensors_save(path, v, t, 3, meta, &d), &d);
    fvm_value_release(v);
    const fvm_type *bt = ty(&a, "f32[2,3]@SERVER");
    v = make_value(bt);
    snprintf(path, sizeof path, "%s/bare.safetensors", dir);
    ok_silent(fvm_safetensors_save(path, v, bt, 0, NULL, &d), &d);
    fvm_value_release(v);
    fvm_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_dtype),      cmocka_unit_test(test_shapes_and_paths),
        cmocka_unit_test(test_exact_bytes),      cmocka_unit_test(test_aligned_bytes),
        cmocka_unit_test(test_metadata),         cmocka_unit_test(test_unsaveable),
        cmocka_unit_test(test_load_errors),      cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_value_mismatches), cmocka_unit_test(test_overlay),
        cmocka_unit_test(test_export),
    };
    /* With FVM_SAFETENSORS_OUT set, only write the files for the Python check. */
    if (getenv("FVM_SAFETENSORS_OUT")) {
        const struct CMUnitTest export_only[] = {cmocka_unit_test(test_export)};
        return cmocka_run_group_tests(export_only, setup, tmpdir_teardown);
    }
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
