/* safetensors.c - safetensors checkpoints: writing a state, reading and validating a file, values from it. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../vm/core/bytebuf.h"
#include "atomic.h"
#include "file.h"

static const char *const st_names[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_BOOL] = "BOOL", [FVM_DTYPE_U8] = "U8",   [FVM_DTYPE_I32] = "I32", [FVM_DTYPE_I64] = "I64",
    [FVM_DTYPE_U32] = "U32",   [FVM_DTYPE_F32] = "F32", [FVM_DTYPE_F64] = "F64",
};

const char *fvm_safetensors_dtype_name(fvm_dtype t)
{
    return (unsigned)t < FVM_DTYPE_COUNT ? st_names[t] : "?";
}

static bool st_dtype_parse(const char *s, fvm_dtype *out)
{
    for (int t = 0; t < FVM_DTYPE_COUNT; t++)
        if (strcmp(st_names[t], s) == 0) {
            *out = (fvm_dtype)t;
            return true;
        }
    return false;
}

/* The order of the reference writer (huggingface/safetensors' Dtype, "in
 * increasing alignment order"): a file lists its tensors by this rank,
 * highest first, then by name, so that each tensor's data starts at a
 * multiple of its element size. */
static const int st_rank[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_BOOL] = 0, [FVM_DTYPE_U8] = 1,   [FVM_DTYPE_I32] = 9,  [FVM_DTYPE_U32] = 10,
    [FVM_DTYPE_F32] = 11, [FVM_DTYPE_F64] = 12, [FVM_DTYPE_I64] = 13,
};

static bool host_le(void)
{
    const uint16_t probe = 1;
    return *(const unsigned char *)&probe == 1;
}

/* Reverses the bytes of each es-byte element of p (little <-> big endian). */
static void swap_elems(unsigned char *p, size_t bytes, size_t es)
{
    for (size_t i = 0; es > 1 && i + es <= bytes; i += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char c = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = c;
        }
}

/* Names come from files: control characters in a message become '?', and a
 * character cut off by the message's length limit is dropped, so it prints
 * safely. */
static void clean(char *s)
{
    size_t n = strlen(s), k = n;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            s[i] = '?';
    while (k > 0 && ((unsigned char)s[k - 1] & 0xC0) == 0x80)
        k--;
    if (k > 0) {
        unsigned char lead = (unsigned char)s[k - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (n - (k - 1) < need)
            s[k - 1] = '\0';
    }
}

/* An error located at file. */
static fvm_status ferr(fvm_diag *d, fvm_status code, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fvm_status ferr(fvm_diag *d, fvm_status code, const char *file, const char *fmt, ...)
{
    fvm_loc loc = {.file = file};
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clean(msg);
    fvm_diag_add(d, code, &loc, "%s", msg);
    return code;
}

/* "f32[784,200]" into buf. */
static const char *tensor_str(fvm_dtype dt, const fvm_dims *s, char buf[FVM_DIMS_STR + 8])
{
    char dims[FVM_DIMS_STR];
    fvm_dims_format(s, dims);
    snprintf(buf, FVM_DIMS_STR + 8, "%s%s", fvm_dtype_name(dt), dims);
    return buf;
}

/* ---- the leaves of a state ----------------------------------------------------------- */

/* One tensor of a state, in path order. */
typedef struct leaf {
    const char *path; /* "model.w1"; lives in the walk's arena */
    const fvm_type *t; /* its TENSOR type */
    const fvm_value *v; /* its TENSOR value, NULL in a walk of a type alone */
    int top; /* the top-level field it is under, -1 when the state is one tensor */
    const char *rest; /* the path below that field ("w1"), NULL when the leaf is the field itself */
    int index; /* its place in path order */
} leaf;

typedef struct walk {
    fvm_arena a;
    leaf *l;
    int n, cap;
    int ntop; /* fields of the root struct (0 when the root is a tensor) */
    const char **tops; /* their names, in the arena */
    bool values; /* walking a value with its type, not a type alone */
    const char *file; /* for messages */
    fvm_diag *d;
} walk;

static void walk_free(walk *w)
{
    free(w->l);
    fvm_arena_free(&w->a);
}

static fvm_status nomem(walk *w)
{
    return ferr(w->d, FVM_ERR_NOMEM, w->file, "out of memory");
}

static fvm_status unsaveable(walk *w, const fvm_type *t, const char *path, const char *what)
{
    char ts[256];
    fvm_type_format(t, false, ts, sizeof ts);
    if (path)
        return ferr(w->d, FVM_ERR_TYPE, w->file,
                    "'%s' is %s (%s), which a safetensors checkpoint cannot hold (only tensors and structs of them)",
                    path, what, ts);
    return ferr(w->d, FVM_ERR_TYPE, w->file,
                "the state is %s (%s), which a safetensors checkpoint cannot hold (only tensors and structs of them)",
                what, ts);
}

static fvm_status mismatch(walk *w, const fvm_type *t, const char *path)
{
    char ts[256];
    fvm_type_format(t, false, ts, sizeof ts);
    if (path)
        return ferr(w->d, FVM_ERR_USAGE, w->file, "the value at '%s' is not of its type %s", path, ts);
    return ferr(w->d, FVM_ERR_USAGE, w->file, "the value is not of its type %s", ts);
}

/* Does tensor x have type t (dtype, rank, known dims) and a well-formed buffer? */
static bool tensor_fits(const fvm_tensor *x, const fvm_type *t)
{
    if (x->dtype != t->u.tensor.dtype || x->shape.rank != t->u.tensor.dims.rank)
        return false;
    for (int k = 0; k < x->shape.rank; k++)
        if (x->shape.d[k] < 0 || (t->u.tensor.dims.d[k] >= 0 && x->shape.d[k] != t->u.tensor.dims.d[k]))
            return false;
    if (fvm_dims_check_size(&x->shape, x->dtype, NULL) != FVM_OK)
        return false;
    return fvm_tensor_bytes(x) == 0 || x->buf != NULL;
}

/* Appends the leaves of t (and of v, when w->values) below path (NULL at
 * the root) to w. top_len is the length of the top-level field's name at the
 * start of path, -1 above it. */
static fvm_status collect(walk *w, const fvm_type *t, const fvm_value *v, const char *path, int top, int top_len)
{
    switch (t->kind) {
    case FVM_T_FED:
        if (!t->u.fed.all_equal)
            return unsaveable(w, t, path, "a per-client value");
        return collect(w, t->u.fed.member, v, path, top, top_len);
    case FVM_T_SEQ:
        return unsaveable(w, t, path, "a sequence");
    case FVM_T_FN:
        return unsaveable(w, t, path, "a function");
    case FVM_T_TENSOR: {
        if (w->values && (!v || v->kind != FVM_V_TENSOR || !tensor_fits(&v->t, t)))
            return mismatch(w, t, path);
        if (w->n == w->cap) {
            int cap = w->cap ? 2 * w->cap : 16;
            leaf *l = realloc(w->l, (size_t)cap * sizeof *l);
            if (!l)
                return nomem(w);
            w->l = l;
            w->cap = cap;
        }
        leaf *l = &w->l[w->n];
        l->index = w->n++;
        l->path = path ? path : "value";
        l->t = t;
        l->v = v;
        l->top = top;
        l->rest = top >= 0 && path[top_len] == '.' ? path + top_len + 1 : NULL;
        return FVM_OK;
    }
    case FVM_T_STRUCT: {
        int n = t->u.strct.n;
        if (w->values && (!v || v->kind != FVM_V_STRUCT || v->n != n || (n && !v->items)))
            return mismatch(w, t, path);
        if (!path) {
            w->ntop = n;
            w->tops = fvm_arena_array(&w->a, (size_t)(n ? n : 1), sizeof *w->tops);
            if (!w->tops)
                return nomem(w);
        }
        for (int i = 0; i < n; i++) {
            const char *name = t->u.strct.names ? t->u.strct.names[i] : NULL;
            char idx[16];
            if (!name) {
                snprintf(idx, sizeof idx, "%d", i);
                name = idx;
            }
            char *p = path ? fvm_arena_printf(&w->a, "%s.%s", path, name) : fvm_arena_strdup(&w->a, name);
            if (!p)
                return nomem(w);
            if (!path)
                w->tops[i] = p;
            fvm_status s = collect(w, t->u.strct.elems[i], v ? v->items[i] : NULL, p, path ? top : i,
                                   path ? top_len : (int)strlen(p));
            if (s)
                return s;
        }
        return FVM_OK;
    }
    }
    return mismatch(w, t, path);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_leaf_path(const void *a, const void *b)
{
    return strcmp(((const leaf *)a)->path, ((const leaf *)b)->path);
}

/* The leaves of t (and v, when not NULL) into w, with no two of the same name. */
static fvm_status walk_state(walk *w, const fvm_type *t, const fvm_value *v)
{
    w->values = v != NULL;
    fvm_status s = collect(w, t, v, NULL, -1, 0);
    if (s || w->n < 2)
        return s;
    const char **names = malloc((size_t)w->n * sizeof *names);
    if (!names)
        return nomem(w);
    for (int i = 0; i < w->n; i++)
        names[i] = w->l[i].path;
    qsort(names, (size_t)w->n, sizeof *names, cmp_str_ptr);
    for (int i = 1; i < w->n && !s; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            s = ferr(w->d, FVM_ERR_NAME, w->file, "two tensors of the state are both named '%s'", names[i]);
    free(names);
    return s;
}

/* ---- writing ------------------------------------------------------------------------- */

/* Where the bytes of a file go: a file being replaced, or memory. */
typedef fvm_status (*put_fn)(void *sink, const void *data, size_t len, fvm_diag *d);

static fvm_status put_mem(void *sink, const void *data, size_t len, fvm_diag *d)
{
    return fvm_bytes_put(sink, data, len, d);
}

/* A tensor's bytes in little-endian order. */
static fvm_status write_tensor(put_fn put, void *sink, const fvm_tensor *x, fvm_diag *d)
{
    size_t bytes = fvm_tensor_bytes(x), es = fvm_dtype_size(x->dtype);
    if (bytes == 0)
        return FVM_OK;
    if (host_le() || es == 1)
        return put(sink, fvm_tensor_data(x), bytes, d);
    unsigned char chunk[1 << 16];
    const unsigned char *p = fvm_tensor_data(x);
    for (size_t off = 0; off < bytes; off += sizeof chunk) {
        size_t n = bytes - off < sizeof chunk ? bytes - off : sizeof chunk;
        memcpy(chunk, p + off, n);
        swap_elems(chunk, n, es);
        FVM_TRY(put(sink, chunk, n, d));
    }
    return FVM_OK;
}

static int cmp_meta_key(const void *a, const void *b)
{
    return strcmp(((const char *const *)a)[0], ((const char *const *)b)[0]);
}

/* Adds key: value to object o; false when either is not UTF-8 (or no memory). */
static bool set_utf8(json_t *o, const char *key, json_t *value)
{
    json_t *k = json_string(key); /* NULL when key is not UTF-8 */
    bool ok = k && value && json_object_set_new_nocheck(o, key, value) == 0;
    if (!ok && !k)
        json_decref(value);
    json_decref(k);
    return ok;
}

/* Leaves in the order of the data: by dtype rank (st_rank), highest first,
 * then by name. */
static int cmp_data_order(const void *a, const void *b)
{
    const leaf *x = *(const leaf *const *)a, *y = *(const leaf *const *)b;
    int rx = st_rank[x->t->u.tensor.dtype], ry = st_rank[y->t->u.tensor.dtype];
    return rx != ry ? (rx < ry) - (rx > ry) : strcmp(x->path, y->path);
}

/* The header JSON (unpadded, malloc'd) of the leaves, in data order
 * (order[0..w->n)), and the metadata. */
static fvm_status header_text(walk *w, leaf *const *order, int nmeta, const char *const *meta, char **out)
{
    fvm_status s = FVM_OK;
    json_t *h = json_object();
    const char **pairs = NULL;
    if (!h)
        return nomem(w);
    if (nmeta > 0) {
        pairs = malloc((size_t)nmeta * 2 * sizeof *pairs);
        json_t *m = json_object();
        if (!pairs || !m || json_object_set_new_nocheck(h, "__metadata__", m) != 0) {
            s = nomem(w);
            goto done;
        }
        for (int i = 0; i < 2 * nmeta; i++)
            if (!(pairs[i] = meta[i])) {
                s = ferr(w->d, FVM_ERR_USAGE, w->file, "metadata %s %d is NULL", i % 2 ? "value" : "key", i / 2);
                goto done;
            }
        qsort(pairs, (size_t)nmeta, 2 * sizeof *pairs, cmp_meta_key);
        for (int i = 0; i < nmeta; i++) {
            if (i > 0 && strcmp(pairs[2 * i - 2], pairs[2 * i]) == 0) {
                s = ferr(w->d, FVM_ERR_USAGE, w->file, "metadata key '%s' given twice", pairs[2 * i]);
                goto done;
            }
            if (!set_utf8(m, pairs[2 * i], json_string(pairs[2 * i + 1]))) {
                s = ferr(w->d, FVM_ERR_USAGE, w->file, "metadata '%s' is not valid UTF-8", pairs[2 * i]);
                goto done;
            }
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const fvm_tensor *x = &order[i]->v->t;
        json_t *shape = json_array();
        for (int k = 0; shape && k < x->shape.rank; k++)
            if (json_array_append_new(shape, json_integer((json_int_t)x->shape.d[k])) != 0) {
                json_decref(shape);
                shape = NULL;
            }
        uint64_t end = off + fvm_tensor_bytes(x);
        json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype", st_names[x->dtype], "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)end);
        if (!e) {
            s = nomem(w);
            goto done;
        }
        if (!set_utf8(h, order[i]->path, e)) {
            s = ferr(w->d, FVM_ERR_USAGE, w->file, "tensor name '%s' is not valid UTF-8", order[i]->path);
            goto done;
        }
        off = end;
    }
    *out = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!*out)
        s = nomem(w);
done:
    free(pairs);
    json_decref(h);
    return s;
}

/* The file's bytes, to put(sink, ...); begin (optional) is called once
 * everything is known to be writable, before the first byte. name is the
 * file errors name. */
static fvm_status compose(const char *name, const fvm_value *v, const fvm_type *t, int nmeta, const char *const *meta,
                          fvm_status (*begin)(void *sink, fvm_diag *d), put_fn put, void *sink, fvm_diag *d)
{
    walk w = {.file = name, .d = d};
    char *text = NULL;
    leaf **order = NULL;
    fvm_status s;
    if (!v || !t || nmeta < 0 || (nmeta > 0 && !meta)) {
        s = ferr(d, FVM_ERR_USAGE, name, "no value, type or metadata to save");
        goto done;
    }
    if ((s = walk_state(&w, t, v)))
        goto done;
    if (!(order = malloc((size_t)(w.n ? w.n : 1) * sizeof *order))) {
        s = nomem(&w);
        goto done;
    }
    for (int i = 0; i < w.n; i++)
        order[i] = &w.l[i];
    qsort(order, (size_t)w.n, sizeof *order, cmp_data_order);
    if ((s = header_text(&w, order, nmeta, meta, &text)))
        goto done;
    /* Spaces pad the header to a multiple of 8 bytes, so the data buffer
     * starts 8-byte aligned and, in this order, every tensor at a multiple
     * of its element size. */
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    static const char spaces[8] = "        ";
    if (begin && (s = begin(sink, d)))
        goto done;
    if (!(s = put(sink, lenb, 8, d)) && !(s = put(sink, text, len, d)))
        s = put(sink, spaces, padded - len, d);
    for (int i = 0; i < w.n && !s; i++)
        s = write_tensor(put, sink, &order[i]->v->t, d);
done:
    free(order);
    free(text);
    walk_free(&w);
    return s;
}

/* A file replaced atomically, begun when compose knows what to write. */
typedef struct staged {
    const char *path;
    fvm_atomic a;
} staged;

static fvm_status begin_staged(void *sink, fvm_diag *d)
{
    staged *st = sink;
    return fvm_atomic_begin(&st->a, st->path, d);
}

static fvm_status put_staged(void *sink, const void *data, size_t len, fvm_diag *d)
{
    return fvm_atomic_put(&((staged *)sink)->a, data, len, d);
}

fvm_status fvm_safetensors_stage(const char *path, const fvm_value *v, const fvm_type *t, int nmeta,
                                 const char *const *meta, fvm_atomic *out, fvm_diag *d)
{
    *out = (fvm_atomic){.fd = -1};
    staged st = {.path = path, .a = {.fd = -1}};
    fvm_status s = compose(path, v, t, nmeta, meta, begin_staged, put_staged, &st, d);
    if (!s)
        s = fvm_atomic_sync(&st.a, d);
    if (s)
        fvm_atomic_abort(&st.a);
    else
        *out = st.a;
    return s;
}

fvm_status fvm_safetensors_bytes(const fvm_value *v, const fvm_type *t, int nmeta, const char *const *meta, void **out,
                                 size_t *len, fvm_diag *d)
{
    fvm_bytes m = {0};
    *out = NULL;
    *len = 0;
    fvm_status s = compose("a value", v, t, nmeta, meta, NULL, put_mem, &m, d);
    if (s) {
        fvm_bytes_free(&m);
        return s;
    }
    *out = m.data;
    *len = m.len;
    return FVM_OK;
}

fvm_status fvm_safetensors_save(const char *path, const fvm_value *v, const fvm_type *t, int nmeta,
                                const char *const *meta, fvm_diag *d)
{
    fvm_atomic a;
    fvm_status s = fvm_safetensors_stage(path, v, t, nmeta, meta, &a, d);
    return s ? s : fvm_atomic_end(&a, d);
}

/* ---- reading ------------------------------------------------------------------------- */

typedef struct name_ix {
    const char *name;
    int i; /* index into e */
} name_ix;

struct fvm_safetensors {
    fvm_arena a; /* names, entries, metadata */
    const char *file;
    unsigned char *bytes; /* the whole file (malloc'd) */
    size_t size;
    const unsigned char *data; /* the data buffer within bytes */
    size_t data_len;
    fvm_safetensors_entry *e; /* by data offset */
    int n;
    name_ix *by_name; /* the entries' names, sorted */
    const char **meta; /* key0, value0, ... sorted by key */
    int nmeta;
};

void fvm_safetensors_free(fvm_safetensors *f)
{
    if (!f)
        return;
    free(f->bytes);
    fvm_arena a = f->a;
    fvm_arena_free(&a); /* f lives in its own arena */
}

static int cmp_entry_offset(const void *a, const void *b)
{
    const fvm_safetensors_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name_ix(const void *a, const void *b)
{
    return strcmp(((const name_ix *)a)->name, ((const name_ix *)b)->name);
}

static const char *json_kind(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* A non-negative JSON integer into *out. */
static bool json_nonneg(const json_t *j, uint64_t *out)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return false;
    *out = (uint64_t)json_integer_value(j);
    return true;
}

/* Reads one tensor entry named name of the header into e. */
static fvm_status read_entry(fvm_safetensors *f, const char *name, json_t *j, fvm_safetensors_entry *e, fvm_diag *d)
{
    const char *file = f->file;
    if (!json_is_object(j))
        return ferr(d, FVM_ERR_FORMAT, file, "tensor '%s': the header entry is %s, not an object", name, json_kind(j));
    json_t *dt = json_object_get(j, "dtype"), *shape = json_object_get(j, "shape"),
           *offs = json_object_get(j, "data_offsets");
    if (!dt || !shape || !offs)
        return ferr(d, FVM_ERR_FORMAT, file, "tensor '%s' has no \"%s\"", name,
                    !dt      ? "dtype"
                    : !shape ? "shape"
                             : "data_offsets");
    if (!json_is_string(dt))
        return ferr(d, FVM_ERR_FORMAT, file, "tensor '%s': dtype is %s, not a string", name, json_kind(dt));
    if (!st_dtype_parse(json_string_value(dt), &e->dtype))
        return ferr(d, FVM_ERR_FORMAT, file,
                    "tensor '%s' has dtype '%s', which fedvm does not read (BOOL, U8, I32, I64, U32, F32, F64)", name,
                    json_string_value(dt));
    if (!json_is_array(shape))
        return ferr(d, FVM_ERR_FORMAT, file, "tensor '%s': shape is %s, not an array", name, json_kind(shape));
    if (json_array_size(shape) > FVM_MAX_RANK)
        return ferr(d, FVM_ERR_FORMAT, file, "tensor '%s' has %zu dims (fedvm takes at most %d)", name,
                    json_array_size(shape), FVM_MAX_RANK);
    e->shape.rank = (int)json_array_size(shape);
    /* The size with zero dims left out must be within the limit too: every
     * product of dims must stay representable elsewhere in fedvm. */
    uint64_t es = fvm_dtype_size(e->dtype), bytes = es, nonzero = es;
    bool over = false;
    for (int k = 0; k < e->shape.rank; k++) {
        uint64_t dim;
        if (!json_nonneg(json_array_get(shape, (size_t)k), &dim))
            return ferr(d, FVM_ERR_FORMAT, file, "tensor '%s': shape element %d is not a non-negative integer", name,
                        k);
        e->shape.d[k] = (int64_t)dim;
        if (dim > 0 && (__builtin_mul_overflow(nonzero, dim, &nonzero) || nonzero > FVM_MAX_TENSOR_BYTES))
            over = true;
        if (!over)
            bytes *= dim; /* <= nonzero, no overflow */
    }
    if (over) {
        char ts[FVM_DIMS_STR + 8];
        return ferr(d, FVM_ERR_LIMIT, file, "tensor '%s' (%s) is larger than fedvm's limit of %llu bytes", name,
                    tensor_str(e->dtype, &e->shape, ts), (unsigned long long)FVM_MAX_TENSOR_BYTES);
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_nonneg(json_array_get(offs, 0), &e->begin) ||
        !json_nonneg(json_array_get(offs, 1), &e->end))
        return ferr(d, FVM_ERR_FORMAT, file,
                    "tensor '%s': data_offsets is not [begin, end] (two non-negative integers)", name);
    if (e->end < e->begin || e->end > f->data_len)
        return ferr(d, FVM_ERR_FORMAT, file,
                    "tensor '%s': data_offsets [%llu, %llu] is not a range within the data buffer (%zu bytes)", name,
                    (unsigned long long)e->begin, (unsigned long long)e->end, f->data_len);
    if (e->end - e->begin != bytes) {
        char ts[FVM_DIMS_STR + 8];
        return ferr(d, FVM_ERR_FORMAT, file,
                    "tensor '%s' (%s) takes %llu bytes, but data_offsets [%llu, %llu] hold %llu", name,
                    tensor_str(e->dtype, &e->shape, ts), (unsigned long long)bytes, (unsigned long long)e->begin,
                    (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
    }
    return FVM_OK;
}

static fvm_status read_meta(fvm_safetensors *f, json_t *m, fvm_diag *d)
{
    if (!json_is_object(m))
        return ferr(d, FVM_ERR_FORMAT, f->file, "__metadata__ is %s, not an object of strings", json_kind(m));
    size_t n = json_object_size(m);
    f->meta = fvm_arena_array(&f->a, 2 * n + 1, sizeof *f->meta);
    if (!f->meta)
        return ferr(d, FVM_ERR_NOMEM, f->file, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach(m, key, val)
    {
        if (!json_is_string(val))
            return ferr(d, FVM_ERR_FORMAT, f->file, "__metadata__ '%s' is %s, not a string", key, json_kind(val));
        const char *k = fvm_arena_strdup(&f->a, key), *v = fvm_arena_strdup(&f->a, json_string_value(val));
        if (!k || !v)
            return ferr(d, FVM_ERR_NOMEM, f->file, "out of memory");
        f->meta[2 * f->nmeta] = k;
        f->meta[2 * f->nmeta + 1] = v;
        f->nmeta++;
    }
    qsort(f->meta, (size_t)f->nmeta, 2 * sizeof *f->meta, cmp_meta_key);
    return FVM_OK;
}

/* The tensors must tile the data buffer: sorted by offset, each starts where
 * the previous one ended, and the last ends at the end. */
static fvm_status check_coverage(const fvm_safetensors *f, fvm_diag *d)
{
    uint64_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        const fvm_safetensors_entry *e = &f->e[i];
        if (e->begin < pos)
            return ferr(d, FVM_ERR_FORMAT, f->file,
                        "tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap in the data buffer", f->e[i - 1].name,
                        (unsigned long long)f->e[i - 1].begin, (unsigned long long)f->e[i - 1].end, e->name,
                        (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->begin > pos)
            return ferr(d, FVM_ERR_FORMAT, f->file,
                        "bytes [%llu, %llu) of the data buffer belong to no tensor (a hole before '%s')",
                        (unsigned long long)pos, (unsigned long long)e->begin, e->name);
        pos = e->end;
    }
    if (pos != f->data_len) {
        if (f->n)
            return ferr(d, FVM_ERR_FORMAT, f->file,
                        "bytes [%llu, %zu) of the data buffer belong to no tensor (after '%s', the last one)",
                        (unsigned long long)pos, f->data_len, f->e[f->n - 1].name);
        return ferr(d, FVM_ERR_FORMAT, f->file, "the data buffer holds %zu bytes but the header has no tensors",
                    f->data_len);
    }
    return FVM_OK;
}

/* The header length hl of a file of size bytes, checked: within the file
 * and the limit, and room for JSON. */
static fvm_status header_length(const char *file, const unsigned char lenb[8], size_t size, uint64_t *hl, fvm_diag *d)
{
    *hl = 0;
    for (int i = 7; i >= 0; i--)
        *hl = *hl << 8 | lenb[i];
    if (*hl > size - 8)
        return ferr(d, FVM_ERR_FORMAT, file,
                    "not a safetensors file: the header length %llu runs past the end of the file (%zu bytes)",
                    (unsigned long long)*hl, size);
    if (*hl > FVM_SAFETENSORS_MAX_HEADER)
        return ferr(d, FVM_ERR_LIMIT, file, "the header length %llu is larger than the limit of %d bytes",
                    (unsigned long long)*hl, FVM_SAFETENSORS_MAX_HEADER);
    if (*hl < 2)
        return ferr(d, FVM_ERR_FORMAT, file, "not a safetensors file: the header length %llu is too small for JSON",
                    (unsigned long long)*hl);
    return FVM_OK;
}

static fvm_status too_short(const char *file, size_t size, fvm_diag *d)
{
    return ferr(d, FVM_ERR_FORMAT, file, "not a safetensors file: %zu bytes, fewer than the 8 of the header length",
                size);
}

/* Validates the header, f->bytes[8, 8 + hl) (read), against a file of
 * f->size bytes, and fills in the rest of f but the data pointer. Reads no
 * byte of the data buffer. */
static fvm_status parse_header(fvm_safetensors *f, uint64_t hl, fvm_diag *d)
{
    const char *file = f->file;
    f->data_len = f->size - 8 - (size_t)hl;
    json_error_t jerr;
    json_t *h = json_loadb((const char *)f->bytes + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &jerr);
    if (!h) {
        if (json_error_code(&jerr) == json_error_duplicate_key)
            return ferr(d, FVM_ERR_FORMAT, file, "the header has a key twice (%s)", jerr.text);
        /* jansson's position is just past the token it stopped at */
        return ferr(d, FVM_ERR_SYNTAX, file, "the header is not valid JSON: %s (around file offset %llu)", jerr.text,
                    (unsigned long long)jerr.position + 8 - (jerr.position > 0));
    }
    fvm_status s = FVM_OK;
    if (!json_is_object(h)) {
        s = ferr(d, FVM_ERR_FORMAT, file, "the header is %s, not a JSON object", json_kind(h));
        goto done;
    }
    size_t n = json_object_size(h);
    f->e = fvm_arena_array(&f->a, n + 1, sizeof *f->e);
    f->by_name = fvm_arena_array(&f->a, n + 1, sizeof *f->by_name);
    if (!f->e || !f->by_name) {
        s = ferr(d, FVM_ERR_NOMEM, file, "out of memory");
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(h, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if ((s = read_meta(f, val, d)))
                goto done;
            continue;
        }
        fvm_safetensors_entry *e = &f->e[f->n];
        if ((s = read_entry(f, key, val, e, d)))
            goto done;
        if (!(e->name = fvm_arena_strdup(&f->a, key))) {
            s = ferr(d, FVM_ERR_NOMEM, file, "out of memory");
            goto done;
        }
        f->n++;
    }
    qsort(f->e, (size_t)f->n, sizeof *f->e, cmp_entry_offset);
    if ((s = check_coverage(f, d)))
        goto done;
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = (name_ix){f->e[i].name, i};
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name_ix);
done:
    json_decref(h);
    return s;
}

/* A new, empty file object named name (copied). */
static fvm_status new_file(const char *name, fvm_safetensors **out, fvm_diag *d)
{
    fvm_arena a = {0};
    fvm_safetensors *f = fvm_arena_alloc(&a, sizeof *f);
    const char *file = f ? fvm_arena_strdup(&a, name) : NULL;
    if (!file) {
        fvm_arena_free(&a);
        return ferr(d, FVM_ERR_NOMEM, name, "out of memory");
    }
    f->a = a;
    f->file = file;
    *out = f;
    return FVM_OK;
}

fvm_status fvm_safetensors_parse(const char *name, const void *bytes, size_t len, fvm_safetensors **out, fvm_diag *d)
{
    *out = NULL;
    fvm_safetensors *f = NULL;
    uint64_t hl = 0;
    fvm_status s = new_file(name, &f, d);
    if (s)
        return s;
    if (!(f->bytes = malloc(len ? len : 1)))
        s = ferr(d, FVM_ERR_NOMEM, name, "out of memory for %zu bytes", len);
    else if (len)
        memcpy(f->bytes, bytes, len);
    f->size = len;
    if (s == FVM_OK && len < 8)
        s = too_short(name, len, d);
    if (s == FVM_OK)
        s = header_length(name, f->bytes, len, &hl, d);
    if (s == FVM_OK)
        s = parse_header(f, hl, d);
    if (s) {
        fvm_safetensors_free(f);
        return s;
    }
    f->data = f->bytes + 8 + hl;
    *out = f;
    return FVM_OK;
}

/* Reading a file: the header length and the header first, checked against
 * the file's size, then the data the header describes (so a file whose
 * header is wrong is refused before its data is read or memory reserved
 * for it). */
fvm_status fvm_safetensors_load(const char *path, fvm_safetensors **out, fvm_diag *d)
{
    *out = NULL;
    fvm_file file;
    fvm_safetensors *f = NULL;
    unsigned char lenb[8];
    uint64_t hl = 0;
    fvm_status s = fvm_file_open(path, "a safetensors file", FVM_SAFETENSORS_MAX_FILE, &file, d);
    if (s)
        return s;
    size_t size = (size_t)file.size;
    if ((s = new_file(path, &f, d)))
        goto done;
    f->size = size;
    if (size < 8)
        s = too_short(path, size, d);
    if (s == FVM_OK)
        s = fvm_file_read_at(&file, 0, lenb, 8, d);
    if (s == FVM_OK)
        s = header_length(path, lenb, size, &hl, d);
    if (s == FVM_OK && !(f->bytes = malloc(8 + (size_t)hl)))
        s = ferr(d, FVM_ERR_NOMEM, path, "out of memory for a header of %llu bytes", (unsigned long long)hl);
    if (s == FVM_OK)
        s = fvm_file_read_at(&file, 0, f->bytes, 8 + (size_t)hl, d);
    if (s == FVM_OK)
        s = parse_header(f, hl, d);
    if (s == FVM_OK) {
        unsigned char *all = realloc(f->bytes, size ? size : 1);
        if (!all)
            s = ferr(d, FVM_ERR_NOMEM, path, "out of memory for its %zu bytes", size);
        else
            f->bytes = all;
    }
    if (s == FVM_OK)
        s = fvm_file_read_at(&file, 8 + hl, f->bytes + 8 + hl, f->data_len, d);
    if (s == FVM_OK)
        s = fvm_file_check_end(&file, d);
done:
    fvm_file_close(&file);
    if (s) {
        fvm_safetensors_free(f);
        return s;
    }
    f->data = f->bytes + 8 + hl;
    *out = f;
    return FVM_OK;
}

const void *fvm_safetensors_image(const fvm_safetensors *f, size_t *len)
{
    *len = f->size;
    return f->bytes;
}

const char *fvm_safetensors_meta(const fvm_safetensors *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0)
            return f->meta[2 * i + 1];
    return NULL;
}

int fvm_safetensors_meta_count(const fvm_safetensors *f)
{
    return f->nmeta;
}

void fvm_safetensors_meta_at(const fvm_safetensors *f, int i, const char **key, const char **value)
{
    *key = f->meta[2 * i];
    *value = f->meta[2 * i + 1];
}

int fvm_safetensors_count(const fvm_safetensors *f)
{
    return f->n;
}

const fvm_safetensors_entry *fvm_safetensors_entry_at(const fvm_safetensors *f, int i)
{
    return &f->e[i];
}

int fvm_safetensors_find(const fvm_safetensors *f, const char *name)
{
    name_ix key = {name, -1};
    const name_ix *hit = bsearch(&key, f->by_name, (size_t)f->n, sizeof key, cmp_name_ix);
    return hit ? hit->i : -1;
}

fvm_status fvm_safetensors_tensor(const fvm_safetensors *f, int i, fvm_tensor *out, fvm_diag *d)
{
    const fvm_safetensors_entry *e = &f->e[i];
    fvm_status s = fvm_tensor_alloc(out, e->dtype, &e->shape, d);
    if (s) {
        fvm_diag_locate_last(d, &(fvm_loc){.file = f->file});
        return s;
    }
    size_t bytes = fvm_tensor_bytes(out);
    if (bytes) {
        memcpy(fvm_tensor_data(out), f->data + e->begin, bytes);
        if (!host_le())
            swap_elems(fvm_tensor_data(out), bytes, fvm_dtype_size(e->dtype));
    }
    return FVM_OK;
}

/* ---- values from a file ---------------------------------------------------------------- */

/* Up to 'max' names of list (n of them), quoted, comma-separated, with
 * "and N more" after, into buf. */
static const char *name_list(const char *const *list, int n, int max, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && i < max && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s'%s'", i ? ", " : "", list[i]);
    if (n > max && len < cap)
        snprintf(buf + len, cap - len, " and %d more", n - max);
    return buf;
}

/* Does entry e have leaf l's dtype and shape (the type's, '?' taking any
 * size; or, with exact, the value's)? */
static bool entry_fits(const fvm_safetensors_entry *e, const leaf *l, bool exact)
{
    const fvm_dims *want = exact ? &l->v->t.shape : &l->t->u.tensor.dims;
    if (e->dtype != l->t->u.tensor.dtype || e->shape.rank != want->rank)
        return false;
    for (int k = 0; k < want->rank; k++)
        if (want->d[k] >= 0 && want->d[k] != e->shape.d[k])
            return false;
    return true;
}

static fvm_status wrong_tensor(walk *w, const fvm_safetensors_entry *e, const leaf *l, bool exact)
{
    char have[FVM_DIMS_STR + 8], want[FVM_DIMS_STR + 8];
    tensor_str(e->dtype, &e->shape, have);
    tensor_str(l->t->u.tensor.dtype, exact ? &l->v->t.shape : &l->t->u.tensor.dims, want);
    if (strcmp(e->name, l->path) == 0)
        return ferr(w->d, FVM_ERR_TYPE, w->file, "tensor '%s' is %s in the file, the state needs %s", e->name, have,
                    want);
    return ferr(w->d, FVM_ERR_TYPE, w->file, "tensor '%s' is %s in the file, the state's '%s' needs %s", e->name, have,
                l->path, want);
}

/* Builds the value of type t from its leaves, leaf *next onward: new[i]
 * (a new tensor value, taken) replaces leaf i, and a leaf with no new value
 * keeps v's (retained). Subtrees with nothing new are shared. */
static fvm_status rebuild(walk *w, const fvm_type *t, fvm_value *v, fvm_value **repl, int *next, fvm_value **out)
{
    switch (t->kind) {
    case FVM_T_FED:
        return rebuild(w, t->u.fed.member, v, repl, next, out);
    case FVM_T_TENSOR: {
        int i = (*next)++;
        *out = repl[i] ? repl[i] : fvm_value_retain(v);
        repl[i] = NULL;
        return FVM_OK;
    }
    case FVM_T_STRUCT: {
        int n = t->u.strct.n;
        fvm_value *s = fvm_value_list(FVM_V_STRUCT, n);
        if (!s)
            return nomem(w);
        bool same = v != NULL;
        for (int i = 0; i < n; i++) {
            fvm_status st = rebuild(w, t->u.strct.elems[i], v ? v->items[i] : NULL, repl, next, &s->items[i]);
            if (st) {
                fvm_value_release(s);
                return st;
            }
            same = same && s->items[i] == v->items[i];
        }
        if (same) {
            fvm_value_release(s);
            s = fvm_value_retain(v);
        }
        *out = s;
        return FVM_OK;
    }
    default:
        return mismatch(w, t, NULL); /* walk_state has ruled these out */
    }
}

/* New tensor values for the leaves that map[i] (an entry index or -1) gives
 * one, then the value rebuilt from them and v. */
static fvm_status assemble(walk *w, const fvm_safetensors *f, const fvm_type *t, fvm_value *v, const int *map,
                           fvm_value **out)
{
    fvm_status s = FVM_OK;
    fvm_value **repl = calloc((size_t)(w->n ? w->n : 1), sizeof *repl);
    if (!repl)
        return nomem(w);
    for (int i = 0; i < w->n && !s; i++) {
        if (map[i] < 0)
            continue;
        fvm_tensor x;
        if ((s = fvm_safetensors_tensor(f, map[i], &x, w->d)))
            break;
        if (!(repl[i] = fvm_value_tensor_take(&x))) {
            fvm_tensor_release(&x);
            s = nomem(w);
        }
    }
    int next = 0;
    if (!s)
        s = rebuild(w, t, v, repl, &next, out);
    for (int i = 0; i < w->n; i++)
        fvm_value_release(repl[i]);
    free(repl);
    return s;
}

fvm_status fvm_safetensors_value(const fvm_safetensors *f, const fvm_type *t, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    walk w = {.file = f->file, .d = d};
    int *map = NULL;
    bool *used = NULL;
    const char **extra = NULL;
    fvm_status s = walk_state(&w, t, NULL);
    if (s)
        goto done;
    map = malloc((size_t)(w.n ? w.n : 1) * sizeof *map);
    used = calloc((size_t)(f->n ? f->n : 1), sizeof *used);
    extra = malloc((size_t)(f->n ? f->n : 1) * sizeof *extra);
    if (!map || !used || !extra) {
        s = nomem(&w);
        goto done;
    }
    for (int i = 0; i < w.n; i++) {
        const leaf *l = &w.l[i];
        map[i] = fvm_safetensors_find(f, l->path);
        if (map[i] < 0) {
            char ts[FVM_DIMS_STR + 8];
            s = ferr(d, FVM_ERR_NAME, f->file, "no tensor '%s' (%s) in the file", l->path,
                     tensor_str(l->t->u.tensor.dtype, &l->t->u.tensor.dims, ts));
            continue;
        }
        used[map[i]] = true;
        if (!entry_fits(&f->e[map[i]], l, false)) {
            wrong_tensor(&w, &f->e[map[i]], l, false);
            s = s ? s : FVM_ERR_TYPE;
        }
    }
    int nextra = 0;
    for (int j = 0; j < f->n; j++)
        if (!used[j])
            extra[nextra++] = f->e[j].name;
    if (nextra) {
        char list[600];
        s = ferr(d, FVM_ERR_NAME, f->file,
                 "%d tensor%s of the file %s not part of the state: %s (a checkpoint of "
                 "another program or state?)",
                 nextra, nextra == 1 ? "" : "s", nextra == 1 ? "is" : "are",
                 name_list(extra, nextra, 5, list, sizeof list));
    }
    if (!s)
        s = assemble(&w, f, t, NULL, map, out);
done:
    free(map);
    free(used);
    free(extra);
    walk_free(&w);
    return s;
}

/* Leaves sorted by path / by (rest, top) for the name matching of overlay. */
static int cmp_leaf_rest(const void *a, const void *b)
{
    const leaf *x = *(const leaf *const *)a, *y = *(const leaf *const *)b;
    if (!x->rest || !y->rest)
        return !x->rest - !y->rest; /* leaves without a rest last */
    int c = strcmp(x->rest, y->rest);
    return c ? c : (x->top > y->top) - (x->top < y->top);
}

/* The first of n sorted leaves (through idx) whose rest is name; n if none. */
static int lower_rest(leaf *const *idx, int n, const char *name)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (idx[mid]->rest && strcmp(idx[mid]->rest, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The leaf below top-level field top whose rest is name, or NULL. */
static const leaf *find_rest(leaf *const *idx, int n, const char *name, int top)
{
    for (int k = lower_rest(idx, n, name); k < n && idx[k]->rest && strcmp(idx[k]->rest, name) == 0; k++)
        if (idx[k]->top == top)
            return idx[k];
    return NULL;
}

static const leaf *find_path(const leaf *sorted, int n, const char *name)
{
    leaf key = {.path = name};
    return bsearch(&key, sorted, (size_t)n, sizeof *sorted, cmp_leaf_path);
}

/* map[i] gets the entry of f that replaces leaf i of w, or -1 (see the rule in
 * safetensors.h). */
static fvm_status match_names(walk *w, const fvm_safetensors *f, int *map)
{
    fvm_status s = FVM_OK;
    leaf *by_path = malloc((size_t)(w->n ? w->n : 1) * sizeof *by_path);
    leaf **by_rest = malloc((size_t)(w->n ? w->n : 1) * sizeof *by_rest);
    const char **names = malloc(((size_t)f->n + (size_t)w->n + (size_t)w->ntop + 1) * sizeof *names);
    if (!by_path || !by_rest || !names) {
        s = nomem(w);
        goto done;
    }
    for (int i = 0; i < w->n; i++) {
        map[i] = -1;
        by_path[i] = w->l[i];
        by_rest[i] = &w->l[i];
    }
    qsort(by_path, (size_t)w->n, sizeof *by_path, cmp_leaf_path);
    qsort(by_rest, (size_t)w->n, sizeof *by_rest, cmp_leaf_rest);

    /* 1. Full paths. */
    int full = 0;
    for (int j = 0; j < f->n; j++)
        full += find_path(by_path, w->n, f->e[j].name) != NULL;
    int top = -1;
    if (full < f->n) {
        /* 2. Below one top-level field. */
        int nfit = 0;
        for (int k = 0; k < w->ntop; k++) {
            int j = 0;
            while (j < f->n && find_rest(by_rest, w->n, f->e[j].name, k))
                j++;
            if (j == f->n) {
                names[nfit++] = w->tops[k];
                top = k;
            }
        }
        if (nfit > 1) {
            char list[600];
            s = ferr(w->d, FVM_ERR_NAME, w->file,
                     "the file's tensor names fit below several top-level fields of the state (%s): ambiguous; "
                     "name them by full path (e.g. '%s.%s')",
                     name_list(names, nfit, 5, list, sizeof list), names[0], f->e[0].name);
            goto done;
        }
        if (nfit == 0) {
            int nbad = 0;
            for (int j = 0; j < f->n; j++) {
                bool any = find_path(by_path, w->n, f->e[j].name) != NULL;
                for (int k = 0; k < w->ntop && !any; k++)
                    any = find_rest(by_rest, w->n, f->e[j].name, k) != NULL;
                if (!any)
                    names[nbad++] = f->e[j].name;
            }
            const char **leaves = names + nbad;
            for (int i = 0; i < w->n; i++)
                leaves[i] = w->l[i].path;
            char bad[600], some[600];
            name_list(leaves, w->n, 5, some, sizeof some);
            if (nbad)
                s = ferr(w->d, FVM_ERR_NAME, w->file,
                         "%d tensor%s of the file name%s no tensor of the state: %s (the state has %s; names are "
                         "full paths or paths below one top-level field)",
                         nbad, nbad == 1 ? "" : "s", nbad == 1 ? "s" : "", name_list(names, nbad, 5, bad, sizeof bad),
                         w->n ? some : "no tensors");
            else
                s = ferr(w->d, FVM_ERR_NAME, w->file,
                         "the file's tensor names mix full paths and paths below different top-level fields; use "
                         "one form (the state has %s)",
                         some);
            goto done;
        }
    }
    for (int j = 0; j < f->n; j++) {
        const leaf *l = top < 0 ? find_path(by_path, w->n, f->e[j].name) : find_rest(by_rest, w->n, f->e[j].name, top);
        map[l->index] = j;
    }
done:
    free(by_path);
    free(by_rest);
    free(names);
    return s;
}

fvm_status fvm_safetensors_overlay(const fvm_safetensors *f, fvm_value *v, const fvm_type *t, fvm_value **out,
                                   int *replaced, fvm_diag *d)
{
    *out = NULL;
    if (replaced)
        *replaced = 0;
    walk w = {.file = f->file, .d = d};
    int *map = NULL;
    if (!v)
        return ferr(d, FVM_ERR_USAGE, f->file, "no state to overlay the file on");
    fvm_status s = walk_state(&w, t, v);
    if (s)
        goto done;
    map = malloc((size_t)(w.n ? w.n : 1) * sizeof *map);
    if (!map) {
        s = nomem(&w);
        goto done;
    }
    if ((s = match_names(&w, f, map)))
        goto done;
    for (int i = 0; i < w.n; i++)
        if (map[i] >= 0 && !entry_fits(&f->e[map[i]], &w.l[i], true))
            s = wrong_tensor(&w, &f->e[map[i]], &w.l[i], true);
    if (s)
        goto done;
    if ((s = assemble(&w, f, t, v, map, out)))
        goto done;
    if (replaced)
        *replaced = f->n;
done:
    free(map);
    walk_free(&w);
    return s;
}

fvm_status fvm_safetensors_overlay_file(const char *path, const fvm_type *t, fvm_value **state, int *replaced,
                                        fvm_diag *d)
{
    fvm_safetensors *f = NULL;
    fvm_value *v = NULL;
    fvm_status s = fvm_safetensors_load(path, &f, d);
    if (s == FVM_OK)
        s = fvm_safetensors_overlay(f, *state, t, &v, replaced, d);
    fvm_safetensors_free(f);
    if (s == FVM_OK) {
        fvm_value_release(*state);
        *state = v;
    }
    return s;
}
