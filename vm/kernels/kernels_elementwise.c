/* kernels_elementwise.c - elementwise kernels: unary, binary and select with broadcasting, cast, fill, iota, fused chains. */
#include <math.h>
#include <stdint.h>

#include "kernels_impl.h"
#include "kernels_scalar.h"

/* Elementwise kernels may write into a buffer that is exactly one of their
 * same-shaped inputs (each element is read before it is written); partial
 * overlaps are not supported. */

/* ---- broadcasting -------------------------------------------------------- */

enum { BC_MAX_IN = FVM_FUSED_MAX_IN };

/* One contiguous run of n output elements. in[k] points at the first element
 * of input k; when bit k of scalar is set that element is repeated (stride 0),
 * otherwise the input advances with the output. */
typedef void (*run_fn)(const void *const in[BC_MAX_IN], unsigned scalar, void *out, int64_t n, const void *ctx);

/* Inputs broadcast against a contiguous output, with the dims coalesced:
 * size-1 dims are dropped and neighbours merged when every input steps across
 * them contiguously. Equal shapes and scalars become one run over the whole
 * output, [B,N] op [N] becomes B runs of N, and the general case iterates the
 * outer dims with an index counter. The innermost stride of each input is 0 or
 * 1, so the run functions are plain vectorisable loops. */
typedef struct bcast {
    int nin;
    int rank; /* >= 1 */
    int64_t shape[FVM_MAX_RANK];
    int64_t stride[BC_MAX_IN][FVM_MAX_RANK]; /* elements, 0 where broadcast */
} bcast;

/* Requires every input shape to broadcast to out (checked by the caller). */
static void bcast_init(bcast *it, const fvm_dims *out, const fvm_tensor *const *in, int nin)
{
    int64_t full[BC_MAX_IN][FVM_MAX_RANK];
    for (int k = 0; k < nin; k++) {
        int64_t st[FVM_MAX_RANK];
        const fvm_dims *s = &in[k]->shape;
        kernel_strides(s, st);
        for (int i = 0; i < out->rank; i++) {
            int j = i - (out->rank - s->rank);
            full[k][i] = (j < 0 || s->d[j] == 1) ? 0 : st[j];
        }
    }
    it->nin = nin;
    it->rank = 0;
    for (int i = 0; i < out->rank; i++) {
        int64_t n = out->d[i];
        if (n == 1)
            continue;
        int r = it->rank;
        bool merge = r > 0;
        for (int k = 0; k < nin && merge; k++)
            merge = it->stride[k][r - 1] == full[k][i] * n;
        if (merge) {
            it->shape[r - 1] *= n;
            for (int k = 0; k < nin; k++)
                it->stride[k][r - 1] = full[k][i];
        } else {
            it->shape[r] = n;
            for (int k = 0; k < nin; k++)
                it->stride[k][r] = full[k][i];
            it->rank++;
        }
    }
    if (it->rank == 0) { /* a single element */
        it->rank = 1;
        it->shape[0] = 1;
        for (int k = 0; k < nin; k++)
            it->stride[k][0] = 0;
    }
}

/* Calls f on every run; esize[k] / osize are element sizes in bytes. */
static void bcast_run(const bcast *it, run_fn f, const void *ctx, const unsigned char *const *in, const size_t *esize,
                      unsigned char *out, size_t osize)
{
    int r = it->rank - 1;
    int64_t n = it->shape[r];
    unsigned scalar = 0;
    for (int k = 0; k < it->nin; k++)
        if (it->stride[k][r] == 0)
            scalar |= 1u << k;
    int64_t rows = 1;
    for (int i = 0; i < r; i++)
        rows *= it->shape[i];
    int64_t idx[FVM_MAX_RANK] = {0};
    int64_t off[BC_MAX_IN] = {0};
    const void *p[BC_MAX_IN] = {NULL};
    for (int64_t row = 0; row < rows; row++) {
        for (int k = 0; k < it->nin; k++)
            p[k] = in[k] + (size_t)off[k] * esize[k];
        f(p, scalar, out + (size_t)(row * n) * osize, n, ctx);
        for (int i = r - 1; i >= 0; i--) {
            for (int k = 0; k < it->nin; k++)
                off[k] += it->stride[k][i];
            if (++idx[i] < it->shape[i])
                break;
            for (int k = 0; k < it->nin; k++)
                off[k] -= it->stride[k][i] * it->shape[i];
            idx[i] = 0;
        }
    }
}

bool fvm_kernel_bcast_matches(const fvm_tensor *const *in, int nin, const fvm_dims *out)
{
    fvm_dims s = in[0]->shape;
    for (int k = 1; k < nin; k++)
        if (fvm_dims_broadcast(&s, &in[k]->shape, &s, NULL) != FVM_OK)
            return false;
    return fvm_dims_equal(&s, out);
}

/* ---- the loops of the scalar kernels ----------------------------------------- */

/* Each FVM_EW row of ops.def whose step is UNARY, BINARY or COMPARE gets one
 * loop per dtype of its dtypes column over its scalar kernel
 * (kernels_scalar.h), vectorised (KERNEL_CLONES, KERNEL_FOR), and a row of
 * the tables below; a row whose kernel has no scalar function for one of
 * its dtypes does not compile. */

typedef void (*map_fn)(const void *x, void *out, int64_t n);

/* out[i] = K(x[i]) over n elements of dtype T. */
#define UN_LOOP(K, S, T, E) \
    KERNEL_CLONES static void un_##K##_##S(const void *px, void *po, int64_t n) \
    { \
        const T *xs = px; \
        T *o = po; \
        KERNEL_FOR(i, n, T x = xs[i]; o[i] = sk_##K##_##S(x);); \
    }

/* One run of a binary op in the four stride patterns (bit 0: a repeats,
 * bit 1: b repeats); the result has dtype TO. */
#define BIN_LOOP_TO(K, S, T, TO) \
    KERNEL_CLONES static void bin_##K##_##S(const void *const in[BC_MAX_IN], unsigned sc, void *po, int64_t n, \
                                            const void *ctx) \
    { \
        const T *as = in[0], *bs = in[1]; \
        TO *o = po; \
        (void)ctx; \
        if (sc == 0) { \
            KERNEL_FOR(i, n, T x = as[i]; T y = bs[i]; o[i] = sk_##K##_##S(x, y);); \
        } else if (sc == 2) { \
            T y = bs[0]; \
            KERNEL_FOR(i, n, T x = as[i]; o[i] = sk_##K##_##S(x, y);); \
        } else if (sc == 1) { \
            T x = as[0]; \
            KERNEL_FOR(i, n, T y = bs[i]; o[i] = sk_##K##_##S(x, y);); \
        } else { \
            T x = as[0], y = bs[0]; \
            TO r = sk_##K##_##S(x, y); \
            KERNEL_FOR(i, n, o[i] = r;); \
        } \
    }
#define BIN_LOOP(K, S, T, E) BIN_LOOP_TO(K, S, T, T)
#define CMP_LOOP(K, S, T, E) BIN_LOOP_TO(K, S, T, uint8_t)

#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    EW_LOOPS_##STEP(KERNEL, DTYPES)
#define EW_LOOPS_UNARY(K, D) SK_DTYPES_##D(UN_LOOP, K)
#define EW_LOOPS_BINARY(K, D) SK_DTYPES_##D(BIN_LOOP, K)
#define EW_LOOPS_COMPARE(K, D) SK_DTYPES_##D(CMP_LOOP, K)
#define EW_LOOPS_SELECT(K, D)
#define EW_LOOPS_CAST(K, D)
#define EW_LOOPS_FILL(K, D)
#include "../ir/ops.def"
#undef FVM_EW

#define UN_ENTRY(K, S, T, E) [FVM_DTYPE_##E] = un_##K##_##S,
#define BIN_ENTRY(K, S, T, E) [FVM_DTYPE_##E] = bin_##K##_##S,

static const map_fn unary_table[FVM_UN_COUNT][FVM_DTYPE_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_UNARY_##STEP([FVM_UN_##ID] = {SK_DTYPES_##DTYPES(UN_ENTRY, KERNEL)}, )
#include "../ir/ops.def"
#undef FVM_EW
};

static const run_fn binary_table[FVM_BIN_COUNT][FVM_DTYPE_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_BINARY_##STEP([FVM_BIN_##ID] = {SK_DTYPES_##DTYPES(BIN_ENTRY, KERNEL)}, )
#include "../ir/ops.def"
#undef FVM_EW
};

_Static_assert(sizeof unary_table / sizeof *unary_table == FVM_UN_COUNT &&
                   sizeof binary_table / sizeof *binary_table == FVM_BIN_COUNT,
               "a loop table row for every unary and binary op of ops.def");

/* ---- unary --------------------------------------------------------------- */

fvm_status fvm_kernel_unary_check(fvm_unary op, const fvm_tensor *x, const fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "unary: x");
    KREQUIRE_TENSOR(d, out, "unary: out");
    if ((unsigned)op >= FVM_UN_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "unknown unary op %d", (int)op);
    if (!unary_table[op][x->dtype])
        return kernel_type_error(d, fvm_elementwise_unary_name(op), x->dtype);
    KREQUIRE(d, out->dtype == x->dtype && fvm_dims_equal(&out->shape, &x->shape),
             "%s: out must have x's dtype and shape", fvm_elementwise_unary_name(op));
    return FVM_OK;
}

fvm_status fvm_k_unary(fvm_unary op, const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_unary_check(op, x, out, d);
    if (s)
        return s;
    int64_t n = fvm_tensor_count(x);
    if (n > 0)
        unary_table[op][x->dtype](kernel_bytes(x), kernel_bytes(out), n);
    return FVM_OK;
}

/* ---- binary -------------------------------------------------------------- */

/* Index of the first zero among n integers of dtype t, or -1. */
static int64_t find_zero(const void *p, fvm_dtype t, int64_t n)
{
    switch (t) {
#define FIND_ZERO(E, T) \
    case FVM_DTYPE_##E: { \
        const T *v = p; \
        for (int64_t i = 0; i < n; i++) \
            if (v[i] == 0) \
                return i; \
        return -1; \
    }
        FIND_ZERO(I32, int32_t)
        FIND_ZERO(I64, int64_t)
        FIND_ZERO(U32, uint32_t)
        FIND_ZERO(U8, uint8_t)
#undef FIND_ZERO
    default:
        return -1;
    }
}

fvm_status fvm_kernel_binary_check(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, const fvm_tensor *out,
                                   fvm_diag *d)
{
    KREQUIRE_TENSOR(d, a, "binary: a");
    KREQUIRE_TENSOR(d, b, "binary: b");
    KREQUIRE_TENSOR(d, out, "binary: out");
    if ((unsigned)op >= FVM_BIN_COUNT)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "unknown binary op %d", (int)op);
    const char *name = fvm_elementwise_binary_name(op);
    if (a->dtype != b->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "%s: operand dtypes differ (%s and %s)", name,
                            fvm_dtype_name(a->dtype), fvm_dtype_name(b->dtype));
    if (!binary_table[op][a->dtype])
        return kernel_type_error(d, name, a->dtype);
    const fvm_tensor *in[2] = {a, b};
    KREQUIRE(d,
             out->dtype == (fvm_elementwise_compares(op) ? FVM_DTYPE_BOOL : a->dtype) &&
                 fvm_kernel_bcast_matches(in, 2, &out->shape),
             "%s: out must have the broadcast shape and the result dtype", name);
    if (fvm_tensor_count(out) > 0 && op == FVM_BIN_DIV && fvm_dtype_is_int(a->dtype)) {
        int64_t z = find_zero(kernel_bytes(b), b->dtype, fvm_tensor_count(b));
        if (z >= 0)
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "integer division by zero (divisor element %lld)",
                                (long long)z);
    }
    return FVM_OK;
}

fvm_status fvm_k_binary(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_binary_check(op, a, b, out, d);
    if (s || fvm_tensor_count(out) == 0)
        return s;
    const fvm_tensor *in[2] = {a, b};
    bcast it;
    bcast_init(&it, &out->shape, in, 2);
    const unsigned char *ptr[2] = {kernel_bytes(a), kernel_bytes(b)};
    size_t es[2] = {fvm_dtype_size(a->dtype), fvm_dtype_size(b->dtype)};
    bcast_run(&it, binary_table[op][a->dtype], NULL, ptr, es, kernel_bytes(out), fvm_dtype_size(out->dtype));
    return FVM_OK;
}

/* ---- select -------------------------------------------------------------- */

/* Element copies go through fixed-size memcpy, which compiles to plain loads
 * and stores without type punning. The usual patterns (nothing repeats, or
 * one branch does: a ReLU's mask against zeros) are loops the compiler
 * vectorises; the others go element by element. */
#define SEL_FN(name, T) \
    KERNEL_CLONES static void name(const void *const in[BC_MAX_IN], unsigned sc, void *po, int64_t n, const void *ctx) \
    { \
        const uint8_t *p = in[0]; \
        const unsigned char *a = in[1], *b = in[2]; \
        unsigned char *o = po; \
        const size_t es = sizeof(T); \
        T x, y, r; \
        (void)ctx; \
        if (sc == 0) { \
            KERNEL_FOR(i, n, memcpy(&x, a + (size_t)i * es, es); memcpy(&y, b + (size_t)i * es, es); r = p[i] ? x : y; \
                       memcpy(o + (size_t)i * es, &r, es);); \
        } else if (sc == 4) { \
            memcpy(&y, b, es); \
            KERNEL_FOR(i, n, memcpy(&x, a + (size_t)i * es, es); r = p[i] ? x : y; \
                       memcpy(o + (size_t)i * es, &r, es);); \
        } else { \
            int64_t sp = !(sc & 1), sa = !(sc & 2), sb = !(sc & 4); \
            for (int64_t i = 0; i < n; i++) \
                memcpy(o + (size_t)i * es, p[i * sp] ? a + (size_t)(i * sa) * es : b + (size_t)(i * sb) * es, es); \
        } \
    }

SEL_FN(select_1, uint8_t)
SEL_FN(select_4, uint32_t)
SEL_FN(select_8, uint64_t)

fvm_status fvm_kernel_select_check(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, const fvm_tensor *out,
                                   fvm_diag *d)
{
    KREQUIRE_TENSOR(d, p, "select: p");
    KREQUIRE_TENSOR(d, a, "select: a");
    KREQUIRE_TENSOR(d, b, "select: b");
    KREQUIRE_TENSOR(d, out, "select: out");
    if (p->dtype != FVM_DTYPE_BOOL)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "select: the predicate must be bool, not %s",
                            fvm_dtype_name(p->dtype));
    if (a->dtype != b->dtype)
        return fvm_diag_add(d, FVM_ERR_TYPE, NULL, "select: branch dtypes differ (%s and %s)", fvm_dtype_name(a->dtype),
                            fvm_dtype_name(b->dtype));
    const fvm_tensor *in[3] = {p, a, b};
    KREQUIRE(d, out->dtype == a->dtype && fvm_kernel_bcast_matches(in, 3, &out->shape),
             "select: out must have the broadcast shape and the branches' dtype");
    return FVM_OK;
}

fvm_status fvm_k_select(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_select_check(p, a, b, out, d);
    if (s || fvm_tensor_count(out) == 0)
        return s;
    const fvm_tensor *in[3] = {p, a, b};
    size_t es = fvm_dtype_size(a->dtype);
    run_fn f = es == 1 ? select_1 : es == 4 ? select_4 : select_8;
    bcast it;
    bcast_init(&it, &out->shape, in, 3);
    const unsigned char *ptr[3] = {kernel_bytes(p), kernel_bytes(a), kernel_bytes(b)};
    size_t ess[3] = {1, es, es};
    bcast_run(&it, f, NULL, ptr, ess, kernel_bytes(out), es);
    return FVM_OK;
}

/* ---- cast ---------------------------------------------------------------- */

#define CAST_FN(name, ST, DT, CONV) \
    KERNEL_CLONES static void name(const void *px, void *po, int64_t n) \
    { \
        const ST *x = px; \
        DT *o = po; \
        KERNEL_FOR(i, n, o[i] = CONV(x[i]);); \
    }

/* Every source/destination pair; integers convert through int64 (int32 when they fit), floats
 * through double (both exact), then the destination's conversion rounds once. */
#define CAST_FROM(S, ST, K, E) \
    CAST_FN(cast_##S##_b, ST, uint8_t, from_##K##_b) \
    CAST_FN(cast_##S##_i32, ST, int32_t, from_##K##_i32) \
    CAST_FN(cast_##S##_i64, ST, int64_t, from_##K##_i64) \
    CAST_FN(cast_##S##_u32, ST, uint32_t, from_##K##_u32) \
    CAST_FN(cast_##S##_u8, ST, uint8_t, from_##K##_u8) \
    CAST_FN(cast_##S##_f32, ST, float, from_##K##_f32) \
    CAST_FN(cast_##S##_f64, ST, double, from_##K##_f64)
FVM_K_DTYPES(CAST_FROM)

#define CAST_ROW(S, ST, K, E) \
    [FVM_DTYPE_## \
        E] = {[FVM_DTYPE_BOOL] = cast_##S##_b,  [FVM_DTYPE_I32] = cast_##S##_i32, [FVM_DTYPE_I64] = cast_##S##_i64, \
              [FVM_DTYPE_U32] = cast_##S##_u32, [FVM_DTYPE_U8] = cast_##S##_u8,   [FVM_DTYPE_F32] = cast_##S##_f32, \
              [FVM_DTYPE_F64] = cast_##S##_f64},

static const map_fn cast_table[FVM_DTYPE_COUNT][FVM_DTYPE_COUNT] = {FVM_K_DTYPES(CAST_ROW)};

fvm_status fvm_kernel_cast_check(const fvm_tensor *x, const fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "cast: x");
    KREQUIRE_TENSOR(d, out, "cast: out");
    KREQUIRE(d, fvm_dims_equal(&x->shape, &out->shape), "cast: out must have x's shape");
    return FVM_OK;
}

fvm_status fvm_k_cast(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d)
{
    fvm_status s = fvm_kernel_cast_check(x, out, d);
    int64_t n = fvm_tensor_count(x);
    if (s || n == 0)
        return s;
    if (x->dtype == out->dtype) {
        if (kernel_bytes(out) != kernel_bytes(x))
            memmove(kernel_bytes(out), kernel_bytes(x), fvm_tensor_bytes(x));
        return FVM_OK;
    }
    cast_table[x->dtype][out->dtype](kernel_bytes(x), kernel_bytes(out), n);
    return FVM_OK;
}

/* ---- fill and iota ------------------------------------------------------- */

fvm_status fvm_k_fill(double v, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, out, "fill: out");
    int64_t n = fvm_tensor_count(out);
    if (n == 0)
        return FVM_OK;
    void *p = kernel_bytes(out);
    switch (out->dtype) {
#define FILL(S, T, K, E) \
    case FVM_DTYPE_##E: { \
        T x = from_f_##S(v), *o = p; \
        KERNEL_FOR(i, n, o[i] = x;); \
        break; \
    }
        FVM_K_DTYPES(FILL)
#undef FILL
    default:
        break;
    }
    return FVM_OK;
}

fvm_status fvm_k_iota(int axis, fvm_tensor *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, out, "iota: out");
    KREQUIRE(d, axis >= 0 && axis < out->shape.rank, "iota: axis %d out of range for rank %d", axis, out->shape.rank);
    if (out->dtype == FVM_DTYPE_BOOL)
        return kernel_type_error(d, "iota", out->dtype);
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    int64_t outer = kernel_span(&out->shape, 0, axis), len = out->shape.d[axis];
    int64_t inner = kernel_span(&out->shape, axis + 1, out->shape.rank);
    void *p = kernel_bytes(out);
    /* The size limit keeps every index below 2^31, so (T)i is exact for the
     * integer dtypes and rounds as C does for f32. */
    switch (out->dtype) {
#define IOTA(S, T, K, E) \
    case FVM_DTYPE_##E: { \
        T *o = p; \
        for (int64_t r = 0; r < outer; r++) \
            for (int64_t i = 0; i < len; i++) { \
                T v = (T)i; \
                for (int64_t j = 0; j < inner; j++) \
                    *o++ = v; \
            } \
        break; \
    }
        FVM_K_DTYPES(IOTA)
#undef IOTA
    default:
        break;
    }
    return FVM_OK;
}

/* ---- fused chains -------------------------------------------------------- */

/* Steps run on blocks of one broadcast run: every step's block (at most
 * FUSED_BLOCK elements) is in a scratch area of FUSED_SCRATCH bytes that
 * stays in the L1 cache; a chain of many or wide steps takes shorter
 * blocks. */
enum { FUSED_BLOCK = 1024, FUSED_SCRATCH = 32768 };

typedef struct fused_ctx {
    const fvm_fstep *steps;
    int nsteps;
    fvm_dtype dt[FVM_FUSED_MAX_STEPS]; /* each step's dtype */
    bool scalar[FVM_FUSED_MAX_STEPS]; /* a step whose operands are all scalars in a run (fills) */
    fvm_dtype in_dt[FVM_FUSED_MAX_IN];
    /* per step and operand: its dtype and element size */
    fvm_dtype op_dt[FVM_FUSED_MAX_STEPS][3];
    size_t op_size[FVM_FUSED_MAX_STEPS][3];
    /* each fill's value, in its dtype */
    _Alignas(8) unsigned char fill[FVM_FUSED_MAX_STEPS][8];
    int64_t block; /* elements a block */
    size_t tmp_off[FVM_FUSED_MAX_STEPS]; /* each step's block in the scratch area */
} fused_ctx;

bool fvm_kernel_fused_types(const fvm_fstep *steps, int nsteps, const fvm_dtype *in_dt, int nin, fvm_dtype *dt)
{
    if (nsteps < 1 || nsteps > FVM_FUSED_MAX_STEPS || nin < 1 || nin > FVM_FUSED_MAX_IN)
        return false;
    for (int k = 0; k < nin; k++)
        if ((unsigned)in_dt[k] >= FVM_DTYPE_COUNT)
            return false;
    for (int s = 0; s < nsteps; s++) {
        const fvm_fstep *st = &steps[s];
        fvm_dtype op[3];
        for (int j = 0; j < kernel_step_arity(st); j++) {
            int a = st->arg[j];
            if (a >= nin || a < -s)
                return false;
            op[j] = a >= 0 ? in_dt[a] : dt[-a - 1];
        }
        switch (st->kind) {
        case FVM_FS_UNARY:
            if ((unsigned)st->op >= FVM_UN_COUNT || !unary_table[st->op][op[0]])
                return false;
            dt[s] = op[0];
            break;
        case FVM_FS_BINARY:
            if ((unsigned)st->op >= FVM_BIN_COUNT || !binary_table[st->op][op[0]] || op[1] != op[0] ||
                (st->op == FVM_BIN_DIV && fvm_dtype_is_int(op[0])))
                return false;
            dt[s] = fvm_elementwise_compares((fvm_binary)st->op) ? FVM_DTYPE_BOOL : op[0];
            break;
        case FVM_FS_SELECT:
            if (op[0] != FVM_DTYPE_BOOL || op[1] != op[2])
                return false;
            dt[s] = op[1];
            break;
        case FVM_FS_CAST:
            if ((unsigned)st->dtype >= FVM_DTYPE_COUNT)
                return false;
            dt[s] = st->dtype;
            break;
        case FVM_FS_FILL:
            dt[s] = op[0];
            break;
        default:
            return false;
        }
    }
    return true;
}

void fvm_kernel_fill_value(fvm_dtype t, double v, void *out)
{
    switch (t) {
#define FILL_VALUE(S, T, K, E) \
    case FVM_DTYPE_##E: { \
        T x = from_f_##S(v); \
        memcpy(out, &x, sizeof x); \
        break; \
    }
        FVM_K_DTYPES(FILL_VALUE)
#undef FILL_VALUE
    default:
        break;
    }
}

/* Fills in c's dtypes and fill values; false when a step is not defined
 * for its operands' dtypes (the caller runs the steps one by one, whose
 * kernels report it) or is an integer division (which checks its divisor). */
static bool fused_plan(fused_ctx *c, const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin)
{
    if (nin < 1 || nin > FVM_FUSED_MAX_IN)
        return false;
    for (int k = 0; k < nin; k++)
        c->in_dt[k] = in[k]->dtype;
    if (!fvm_kernel_fused_types(steps, nsteps, c->in_dt, nin, c->dt))
        return false;
    c->steps = steps;
    c->nsteps = nsteps;
    for (int s = 0; s < nsteps; s++) {
        const fvm_fstep *st = &steps[s];
        for (int j = 0; j < kernel_step_arity(st); j++) {
            int a = st->arg[j];
            c->op_dt[s][j] = a >= 0 ? c->in_dt[a] : c->dt[-a - 1];
            c->op_size[s][j] = fvm_dtype_size(c->op_dt[s][j]);
        }
        if (st->kind == FVM_FS_FILL)
            fvm_kernel_fill_value(c->dt[s], st->value, c->fill[s]);
    }
    size_t per = 0; /* scratch bytes per element, each step's block 64-byte aligned */
    for (int s = 0; s < nsteps; s++)
        per += fvm_dtype_size(c->dt[s]);
    c->block = (FUSED_SCRATCH - 64 * nsteps) / (int64_t)per & ~(int64_t)63; /* >= 192 for 16 steps of 8 bytes */
    if (c->block > FUSED_BLOCK)
        c->block = FUSED_BLOCK;
    size_t off = 0;
    for (int s = 0; s < nsteps; s++) {
        c->tmp_off[s] = off;
        off += ((size_t)c->block * fvm_dtype_size(c->dt[s]) + 63) & ~(size_t)63;
    }
    return true;
}

/* One broadcast run of n output elements: in[k] and bit k of sc as in
 * run_fn. Block by block, every step writes its block (or its single
 * element, when all its operands are scalars) to a scratch buffer, the last
 * one to out. */
static void fused_run(const void *const in[BC_MAX_IN], unsigned sc, void *po, int64_t n, const void *pc)
{
    const fused_ctx *c = pc;
    _Alignas(64) unsigned char scratch[FUSED_SCRATCH];
    unsigned char *tmp[FVM_FUSED_MAX_STEPS];
    bool scalar[FVM_FUSED_MAX_STEPS];
    int last = c->nsteps - 1;
    size_t osize = fvm_dtype_size(c->dt[last]);
    for (int s = 0; s <= last; s++)
        tmp[s] = scratch + c->tmp_off[s];
    for (int64_t b = 0; b < n; b += c->block) {
        int64_t m = n - b < c->block ? n - b : c->block;
        for (int s = 0; s <= last; s++) {
            const fvm_fstep *st = &c->steps[s];
            const void *ops[BC_MAX_IN] = {NULL};
            unsigned osc = 0;
            bool all = true;
            for (int j = 0; j < kernel_step_arity(st); j++) {
                int a = st->arg[j];
                bool one = a >= 0 ? (sc >> a) & 1 : scalar[-a - 1];
                ops[j] = a >= 0 ? (const unsigned char *)in[a] + (one ? 0 : (size_t)b * c->op_size[s][j]) : tmp[-a - 1];
                osc |= (unsigned)one << j;
                all = all && one;
            }
            all = all || st->kind == FVM_FS_FILL;
            scalar[s] = all;
            void *dst = s == last && !all ? (unsigned char *)po + (size_t)b * osize : tmp[s];
            int64_t len = all ? 1 : m;
            switch (st->kind) {
            case FVM_FS_UNARY:
                unary_table[st->op][c->op_dt[s][0]](ops[0], dst, len);
                break;
            case FVM_FS_BINARY:
                binary_table[st->op][c->op_dt[s][0]](ops, osc, dst, len, NULL);
                break;
            case FVM_FS_SELECT: {
                size_t es = c->op_size[s][1];
                (es == 1 ? select_1 : es == 4 ? select_4 : select_8)(ops, osc, dst, len, NULL);
                break;
            }
            case FVM_FS_CAST:
                if (c->op_dt[s][0] == c->dt[s])
                    memmove(dst, ops[0], (size_t)len * c->op_size[s][0]);
                else
                    cast_table[c->op_dt[s][0]][c->dt[s]](ops[0], dst, len);
                break;
            case FVM_FS_FILL:
                memcpy(dst, c->fill[s], fvm_dtype_size(c->dt[s]));
                break;
            }
        }
        if (scalar[last]) /* every operand a scalar: the output repeats one value */
            for (int64_t i = 0; i < m; i++)
                memcpy((unsigned char *)po + (size_t)(b + i) * osize, tmp[last], osize);
    }
}

bool fvm_k_fused_dtype(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_dtype *out)
{
    fused_ctx c;
    if (!fused_plan(&c, steps, nsteps, in, nin))
        return false;
    *out = c.dt[nsteps - 1];
    return true;
}

fvm_status fvm_k_fused(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_tensor *out,
                       fvm_diag *d)
{
    for (int k = 0; k < nin && k < FVM_FUSED_MAX_IN; k++)
        KREQUIRE_TENSOR(d, in[k], "fused: input");
    KREQUIRE_TENSOR(d, out, "fused: out");
    fused_ctx c;
    KREQUIRE(d, fused_plan(&c, steps, nsteps, in, nin), "fused: a step is not defined for its operands");
    KREQUIRE(d, out->dtype == c.dt[nsteps - 1] && fvm_kernel_bcast_matches(in, nin, &out->shape),
             "fused: out must have the broadcast shape and the chain's dtype");
    if (fvm_tensor_count(out) == 0)
        return FVM_OK;
    bcast it;
    bcast_init(&it, &out->shape, in, nin);
    const unsigned char *ptr[BC_MAX_IN];
    size_t es[BC_MAX_IN];
    for (int k = 0; k < nin; k++) {
        /* an input without elements never reaches a non-empty output */
        ptr[k] = kernel_bytes(in[k]);
        es[k] = fvm_dtype_size(in[k]->dtype);
    }
    bcast_run(&it, fused_run, &c, ptr, es, kernel_bytes(out), fvm_dtype_size(out->dtype));
    return FVM_OK;
}
