/* exec_control.c - runtime of structs, calls, conditionals, loops and sequence ops. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "../core/rand.h"

fvm_status exec_struct(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_value *s = fvm_value_list(FVM_V_STRUCT, in->nargs);
    if (!s)
        return fvm_nomem(x);
    for (int i = 0; i < in->nargs; i++)
        s->items[i] = fvm_value_retain(args[i]);
    *out = s;
    return FVM_OK;
}

fvm_status exec_field(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    *out = fvm_value_retain(args[0]->items[in->a.index]);
    return FVM_OK;
}

/* Calls fn with args, converting all-equal client values where the callee
 * expects one value per client. */
static fvm_status call_with(fvm_ctx *x, const fvm_func *fn, int nargs, fvm_value *const *args,
                            const fvm_type *const *types, fvm_value **out)
{
    fvm_argv av;
    fvm_value **conv = fvm_argv_init(&av, nargs);
    if (!conv)
        return fvm_nomem(x);
    fvm_status s = FVM_OK;
    int done = 0;
    for (; done < nargs && s == FVM_OK; done++)
        s = fvm_coerce(x, args[done], types[done], fn->param_types[done], &conv[done]);
    if (s == FVM_OK)
        s = fvm_exec_call(x, fn, conv, out);
    for (int i = 0; i < done; i++)
        fvm_value_release(conv[i]);
    fvm_argv_free(&av);
    return s;
}

fvm_status exec_call(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    if (in->op == FVM_OP_FEDERATED_APPLY) /* server values are their members */
        return fvm_exec_call(x, in->a.fn, args, out);
    return call_with(x, in->a.fn, in->nargs, args, in->arg_types, out);
}

fvm_status exec_cond(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    bool p = fvm_tensor_get_i64(&args[0]->t, 0) != 0;
    const fvm_func *fn = p ? in->a.then_fn : in->a.else_fn;
    return call_with(x, fn, in->nargs - 1, args + 1, in->arg_types + 1, out);
}

static fvm_status scalar_i32(fvm_ctx *x, int32_t v, fvm_value **out)
{
    fvm_dims d = {0};
    fvm_status s = fvm_new_tensor(x, FVM_DTYPE_I32, &d, out);
    if (s == FVM_OK)
        *(int32_t *)fvm_tensor_data(&(*out)->t) = v;
    return s;
}

fvm_status exec_fori(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs + 1);
    if (!argv)
        return fvm_nomem(x);
    fvm_value *state = fvm_value_retain(args[0]);
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < in->a.n && s == FVM_OK; i++) {
        fvm_value *iv = NULL, *next = NULL;
        if ((s = scalar_i32(x, (int32_t)i, &iv)))
            break;
        argv[0] = iv;
        argv[1] = state;
        for (int k = 1; k < in->nargs; k++)
            argv[k + 1] = args[k];
        s = fvm_exec_call_giving(x, in->a.fn, argv, 1u << 1, &next); /* the state is the body's */
        fvm_value_release(iv);
        state = next;
    }
    fvm_argv_free(&av);
    if (s) {
        fvm_value_release(state);
        return s;
    }
    *out = state;
    return FVM_OK;
}

fvm_status exec_while(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    int n = in->nargs;
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, n);
    if (!argv)
        return fvm_nomem(x);
    fvm_value *state = fvm_value_retain(args[0]);
    fvm_status s = FVM_OK;
    for (int64_t it = 0;; it++) {
        fvm_value *c = NULL, *next = NULL;
        argv[0] = state;
        for (int k = 1; k < n; k++)
            argv[k] = args[k];
        if ((s = fvm_exec_call(x, in->a.cond_fn, argv, &c)))
            break;
        bool go = fvm_tensor_get_i64(&c->t, 0) != 0;
        fvm_value_release(c);
        if (!go)
            break;
        if (it == in->a.max_iter) {
            s = fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                             "while: the loop did not end within max_iter = %lld iterations",
                             (long long)in->a.max_iter);
            break;
        }
        s = fvm_exec_call_giving(x, in->a.body_fn, argv, 1u << 0, &next); /* the state is the body's */
        state = next;
        if (s)
            break;
    }
    fvm_argv_free(&av);
    if (s) {
        fvm_value_release(state);
        return s;
    }
    *out = state;
    return FVM_OK;
}

/* ---- sequences --------------------------------------------------------------------- */

fvm_status exec_sequence_map(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    fvm_value *res = fvm_value_list(FVM_V_SEQ, seq->n);
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs);
    if (!res || !argv) {
        fvm_value_release(res);
        fvm_argv_free(&av);
        return fvm_nomem(x);
    }
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < seq->n && s == FVM_OK; i++) {
        fvm_value *e = NULL;
        if ((s = fvm_seq_get(seq, i, &e, x->d)))
            break;
        argv[0] = e;
        for (int k = 1; k < in->nargs; k++)
            argv[k] = args[k];
        s = fvm_exec_call(x, in->a.fn, argv, &res->items[i]);
        fvm_value_release(e);
    }
    fvm_argv_free(&av);
    if (s) {
        fvm_value_release(res);
        return s;
    }
    *out = res;
    return FVM_OK;
}

fvm_status exec_sequence_reduce(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs);
    if (!argv)
        return fvm_nomem(x);
    fvm_value *acc = fvm_value_retain(args[1]);
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < seq->n && s == FVM_OK; i++) {
        fvm_value *e = NULL, *next = NULL;
        if ((s = fvm_seq_get(seq, i, &e, x->d)))
            break;
        argv[0] = acc;
        argv[1] = e;
        for (int k = 2; k < in->nargs; k++)
            argv[k] = args[k];
        s = fvm_exec_call_giving(x, in->a.fn, argv, 1u << 0, &next); /* the accumulator is the call's */
        fvm_value_release(e);
        acc = next;
    }
    fvm_argv_free(&av);
    if (s) {
        fvm_value_release(acc);
        return s;
    }
    *out = acc;
    return FVM_OK;
}

fvm_status exec_sequence_sum(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    if (seq->n == 0)
        return fvm_zeros_of_type(x, in->type, out);
    fvm_value *acc = NULL;
    fvm_status s = fvm_seq_get(seq, 0, &acc, x->d);
    for (int64_t i = 1; i < seq->n && s == FVM_OK; i++) {
        fvm_value *e = NULL, *next = NULL;
        if ((s = fvm_seq_get(seq, i, &e, x->d)))
            break;
        s = fvm_lift_binary(x, FVM_BIN_ADD, acc, e, true, &next);
        fvm_value_release(e);
        fvm_value_release(acc);
        acc = next;
    }
    if (s) {
        fvm_value_release(acc);
        return s;
    }
    *out = acc;
    return FVM_OK;
}

fvm_status exec_sequence_length(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    if (args[0]->n > INT32_MAX)
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "sequence longer than 2^31-1 elements");
    return scalar_i32(x, (int32_t)args[0]->n, out);
}

/* Stacks elements lo..hi-1 (tensor trees of one structure and shape) into one
 * tree with a leading dimension hi-lo. */
static fvm_status stack(fvm_ctx *x, fvm_value *const *es, int64_t n, fvm_value **out)
{
    const fvm_value *e0 = es[0];
    if (e0->kind == FVM_V_STRUCT) {
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, e0->n);
        fvm_value **sub = malloc((size_t)n * sizeof *sub);
        if (!r || !sub) {
            fvm_value_release(r);
            free(sub);
            return fvm_nomem(x);
        }
        fvm_status s = FVM_OK;
        for (int64_t k = 0; k < e0->n && s == FVM_OK; k++) {
            for (int64_t i = 0; i < n; i++)
                sub[i] = es[i]->items[k];
            s = stack(x, sub, n, &r->items[k]);
        }
        free(sub);
        if (s) {
            fvm_value_release(r);
            return s;
        }
        *out = r;
        return FVM_OK;
    }
    const fvm_tensor *t0 = &e0->t;
    if (t0->shape.rank == FVM_MAX_RANK)
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "batch: elements already have rank %d", FVM_MAX_RANK);
    fvm_dims d = {.rank = t0->shape.rank + 1};
    d.d[0] = n;
    memcpy(d.d + 1, t0->shape.d, sizeof(int64_t) * (size_t)t0->shape.rank);
    fvm_status s = fvm_new_tensor(x, t0->dtype, &d, out);
    if (s)
        return s;
    size_t row = fvm_tensor_bytes(t0);
    unsigned char *dst = fvm_tensor_data(&(*out)->t);
    for (int64_t i = 0; i < n; i++) {
        if (!fvm_dims_equal(&es[i]->t.shape, &t0->shape)) {
            char a[FVM_DIMS_STR], b[FVM_DIMS_STR];
            fvm_dims_format(&t0->shape, a);
            fvm_dims_format(&es[i]->t.shape, b);
            fvm_value_release(*out);
            *out = NULL;
            return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL,
                                "batch: element %lld has shape %s, the first element of its batch %s", (long long)i, b,
                                a);
        }
        if (row)
            memcpy(dst + (size_t)i * row, fvm_tensor_data(&es[i]->t), row);
    }
    return FVM_OK;
}

fvm_status exec_batch(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    int64_t b = in->a.size, n = seq->n;
    int64_t nb = in->a.drop_remainder ? n / b : (n + b - 1) / b;
    fvm_value *res = fvm_value_list(FVM_V_SEQ, nb);
    if (!res)
        return fvm_nomem(x);
    fvm_status s = FVM_OK;
    for (int64_t k = 0; k < nb && s == FVM_OK; k++) {
        int64_t lo = k * b, hi = lo + b < n ? lo + b : n;
        if (seq->cols) {
            s = fvm_value_rows(seq->cols, lo, hi, &res->items[k], x->d);
        } else {
            s = stack(x, seq->items + lo, hi - lo, &res->items[k]);
        }
    }
    if (s) {
        fvm_value_release(res);
        return s;
    }
    *out = res;
    return FVM_OK;
}

/* ---- scans: loops that keep their states (what differentiating a loop needs) ---------- */

/* <a, list of history> */
static fvm_status pair(fvm_ctx *x, fvm_value *a_take, fvm_value *hist_take, fvm_value **out)
{
    fvm_value *s = fvm_value_list(FVM_V_STRUCT, 2);
    if (!s) {
        fvm_value_release(a_take);
        fvm_value_release(hist_take);
        return fvm_nomem(x);
    }
    s->items[0] = a_take;
    s->items[1] = hist_take;
    *out = s;
    return FVM_OK;
}

fvm_status exec_scan(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs + 1);
    fvm_value *hist = fvm_value_list(FVM_V_SEQ, in->a.n);
    if (!argv || !hist) {
        fvm_argv_free(&av);
        fvm_value_release(hist);
        return fvm_nomem(x);
    }
    fvm_value *state = fvm_value_retain(args[0]);
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < in->a.n && s == FVM_OK; i++) {
        fvm_value *iv = NULL, *next = NULL;
        if ((s = scalar_i32(x, (int32_t)i, &iv)))
            break;
        hist->items[i] = fvm_value_retain(state);
        argv[0] = iv;
        argv[1] = state;
        for (int k = 1; k < in->nargs; k++)
            argv[k + 1] = args[k];
        s = fvm_exec_call(x, in->a.fn, argv, &next);
        fvm_value_release(iv);
        fvm_value_release(state);
        state = next;
    }
    fvm_argv_free(&av);
    if (s) {
        fvm_value_release(state);
        fvm_value_release(hist);
        return s;
    }
    return pair(x, state, hist, out);
}

fvm_status exec_sequence_scan(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs);
    fvm_value *hist = fvm_value_list(FVM_V_SEQ, seq->n);
    if (!argv || !hist) {
        fvm_argv_free(&av);
        fvm_value_release(hist);
        return fvm_nomem(x);
    }
    fvm_value *acc = fvm_value_retain(args[1]);
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < seq->n && s == FVM_OK; i++) {
        fvm_value *e = NULL, *next = NULL;
        if ((s = fvm_seq_get(seq, i, &e, x->d)))
            break;
        hist->items[i] = fvm_value_retain(acc);
        argv[0] = acc;
        argv[1] = e;
        for (int k = 2; k < in->nargs; k++)
            argv[k] = args[k];
        s = fvm_exec_call(x, in->a.fn, argv, &next);
        fvm_value_release(e);
        fvm_value_release(acc);
        acc = next;
    }
    fvm_argv_free(&av);
    if (s) {
        fvm_value_release(acc);
        fvm_value_release(hist);
        return s;
    }
    return pair(x, acc, hist, out);
}

fvm_status exec_sequence_get(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    int64_t i = fvm_tensor_get_i64(&args[1]->t, 0);
    if (args[1]->t.dtype == FVM_DTYPE_U32 || args[1]->t.dtype == FVM_DTYPE_U8)
        i = (int64_t)(uint64_t)i;
    return fvm_seq_get(args[0], i, out, x->d);
}

fvm_status exec_sequence_zip(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    int64_t n = args[0]->n;
    bool cols = true;
    for (int k = 0; k < in->nargs; k++) {
        if (args[k]->n != n)
            return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "sequences of %lld and %lld elements", (long long)n,
                                (long long)args[k]->n);
        cols = cols && args[k]->cols;
    }
    if (cols) { /* column-stored sequences zip to a struct of their columns, no copy */
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, in->nargs);
        if (!st)
            return fvm_nomem(x);
        for (int k = 0; k < in->nargs; k++)
            st->items[k] = fvm_value_retain(args[k]->cols);
        if (!(*out = fvm_value_seq_cols_take(n, st))) {
            fvm_value_release(st);
            return fvm_nomem(x);
        }
        return FVM_OK;
    }
    fvm_value *res = fvm_value_list(FVM_V_SEQ, n);
    if (!res)
        return fvm_nomem(x);
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < n && s == FVM_OK; i++) {
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, in->nargs);
        if (!st) {
            s = fvm_nomem(x);
            break;
        }
        res->items[i] = st;
        for (int k = 0; k < in->nargs && s == FVM_OK; k++)
            s = fvm_seq_get(args[k], i, &st->items[k], x->d);
    }
    if (s) {
        fvm_value_release(res);
        return s;
    }
    *out = res;
    return FVM_OK;
}

fvm_status exec_sequence_reverse(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    fvm_value *res = fvm_value_list(FVM_V_SEQ, seq->n);
    if (!res)
        return fvm_nomem(x);
    for (int64_t i = 0; i < seq->n; i++) {
        fvm_status s = fvm_seq_get(seq, seq->n - 1 - i, &res->items[i], x->d);
        if (s) {
            fvm_value_release(res);
            return s;
        }
    }
    *out = res;
    return FVM_OK;
}

/* Elements [lo, hi) of seq, without copying data: seq itself when that is all
 * of it, views of rows of its columns, or its elements shared. */
static fvm_status seq_range(fvm_ctx *x, fvm_value *seq, int64_t lo, int64_t hi, fvm_value **out)
{
    if (lo == 0 && hi == seq->n) {
        *out = fvm_value_retain(seq);
        return FVM_OK;
    }
    if (seq->cols) {
        fvm_value *cols = NULL;
        fvm_status s = fvm_value_rows(seq->cols, lo, hi, &cols, x->d);
        if (s)
            return s;
        if (!(*out = fvm_value_seq_cols_take(hi - lo, cols))) {
            fvm_value_release(cols);
            return fvm_nomem(x);
        }
        return FVM_OK;
    }
    fvm_value *res = fvm_value_list(FVM_V_SEQ, hi - lo);
    if (!res)
        return fvm_nomem(x);
    for (int64_t i = lo; i < hi; i++)
        res->items[i - lo] = fvm_value_retain(seq->items[i]);
    *out = res;
    return FVM_OK;
}

/* sequence_take: the first n elements; sequence_skip: those after them. */
fvm_status exec_sequence_take(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    int64_t len = args[0]->n, k = in->a.n < len ? in->a.n : len;
    if (in->op == FVM_OP_SEQUENCE_SKIP)
        return seq_range(x, args[0], k, len, out);
    return seq_range(x, args[0], 0, k, out);
}

/* Rows idx[0..m) of a column-stored tree (rows may repeat), copied into new
 * contiguous tensors with a leading dimension m. */
static fvm_status take_rows(fvm_ctx *x, const fvm_value *cols, const int64_t *idx, int64_t m, fvm_value **out)
{
    if (cols->kind == FVM_V_STRUCT) {
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, cols->n);
        if (!r)
            return fvm_nomem(x);
        for (int64_t k = 0; k < cols->n; k++) {
            fvm_status s = take_rows(x, cols->items[k], idx, m, &r->items[k]);
            if (s) {
                fvm_value_release(r);
                return s;
            }
        }
        *out = r;
        return FVM_OK;
    }
    fvm_dims d = cols->t.shape;
    d.d[0] = m;
    fvm_status s = fvm_new_tensor(x, cols->t.dtype, &d, out);
    if (s)
        return s;
    size_t row = cols->t.shape.d[0] ? fvm_tensor_bytes(&cols->t) / (size_t)cols->t.shape.d[0] : 0;
    if (row) {
        const unsigned char *src = fvm_tensor_data(&cols->t);
        unsigned char *dst = fvm_tensor_data(&(*out)->t);
        for (int64_t i = 0; i < m; i++)
            memcpy(dst + (size_t)i * row, src + (size_t)idx[i] * row, row);
    }
    return FVM_OK;
}

/* The elements idx[0..m) of seq, as a new sequence of the same layout. */
static fvm_status take_elements(fvm_ctx *x, const fvm_value *seq, const int64_t *idx, int64_t m, fvm_value **out)
{
    if (seq->cols) {
        fvm_value *cols = NULL;
        fvm_status s = take_rows(x, seq->cols, idx, m, &cols);
        if (s)
            return s;
        if (!(*out = fvm_value_seq_cols_take(m, cols))) {
            fvm_value_release(cols);
            return fvm_nomem(x);
        }
        return FVM_OK;
    }
    fvm_value *res = fvm_value_list(FVM_V_SEQ, m);
    if (!res)
        return fvm_nomem(x);
    for (int64_t i = 0; i < m; i++)
        res->items[i] = fvm_value_retain(seq->items[idx[i]]);
    *out = res;
    return FVM_OK;
}

fvm_status exec_sequence_shuffle(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0], *key = args[1];
    if (fvm_tensor_count(&key->t) != 2)
        return fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "sequence_shuffle: the key has %lld words, expected 2",
                            (long long)fvm_tensor_count(&key->t));
    int64_t n = seq->n;
    int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    if (!perm)
        return fvm_nomem(x);
    fvm_rand r;
    fvm_rand_init(&r, fvm_tensor_data(&key->t));
    fvm_rand_permutation(&r, n, perm);
    fvm_status s = take_elements(x, seq, perm, n, out);
    free(perm);
    return s;
}

fvm_status exec_sequence_repeat(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_value *seq = args[0];
    int64_t n = seq->n, count = in->a.count;
    if (n && count > FVM_MAX_SEQ_LEN / n)
        return fvm_diag_add(x->d, FVM_ERR_LIMIT, NULL,
                            "sequence_repeat: %lld copies of %lld elements exceed %lld elements", (long long)count,
                            (long long)n, (long long)FVM_MAX_SEQ_LEN);
    int64_t m = n * count;
    int64_t *idx = malloc((size_t)(m ? m : 1) * sizeof *idx);
    if (!idx)
        return fvm_nomem(x);
    for (int64_t i = 0; i < m; i++)
        idx[i] = i % n;
    fvm_status s = take_elements(x, seq, idx, m, out);
    free(idx);
    return s;
}

/* The elements for which fn(e, extra...) is true, in order: a range of them
 * as seq_range gives it (no copy), others gathered as take_elements does. */
fvm_status exec_sequence_filter(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    fvm_value *seq = args[0];
    int64_t n = seq->n, m = 0;
    int64_t *keep = malloc((size_t)(n ? n : 1) * sizeof *keep);
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, in->nargs);
    if (!keep || !argv) {
        free(keep);
        fvm_argv_free(&av);
        return fvm_nomem(x);
    }
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < n && s == FVM_OK; i++) {
        fvm_value *e = NULL, *p = NULL;
        if ((s = fvm_seq_get(seq, i, &e, x->d)))
            break;
        argv[0] = e;
        for (int k = 1; k < in->nargs; k++)
            argv[k] = args[k];
        s = fvm_exec_call(x, in->a.fn, argv, &p);
        fvm_value_release(e);
        if (s == FVM_OK && fvm_tensor_get_i64(&p->t, 0))
            keep[m++] = i;
        fvm_value_release(p);
    }
    fvm_argv_free(&av);
    if (s == FVM_OK) {
        if (m == 0 || keep[m - 1] - keep[0] == m - 1)
            s = seq_range(x, seq, m ? keep[0] : 0, m ? keep[0] + m : 0, out);
        else
            s = take_elements(x, seq, keep, m, out);
    }
    free(keep);
    return s;
}

/* ---- automatic differentiation -------------------------------------------------------- */

/* The cotangent 1 of a float scalar result (placement is static: the same value). */
static fvm_status one_like(fvm_ctx *x, const fvm_type *t, fvm_value **out)
{
    if (t->kind == FVM_T_FED)
        t = t->u.fed.member;
    fvm_status s = fvm_new_tensor(x, t->u.tensor.dtype, &t->u.tensor.dims, out);
    if (s == FVM_OK)
        fvm_tensor_set_f64(&(*out)->t, 0, 1.0);
    return s;
}

/* grad, value_and_grad, vjp: call the pullback the passes derived (vm/transform/passes.h),
 * f'(args, ct) -> <value, grads=<g>> (with has_aux ct is the cotangent of value's field 0,
 * and grad returns <g, value's field 1>); jvp: call the forward derivative, f.jvp(args, t) ->
 * <value, tangent>, and return its result. */
fvm_status exec_grad(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_func *fn = in->a.fn, *pb = in->derived;
    if (!pb) /* the passes after checking derive it (fvm_compile) */
        return fvm_diag_add(x->d, FVM_ERR_USAGE, &in->loc, "%s of '%s': its derivative was not derived (fvm_compile)",
                            fvm_op_table[in->op].name, fn->name);
    if (in->op == FVM_OP_JVP) /* the tangent may be all-equal where f.jvp takes one per client */
        return call_with(x, pb, in->nargs, args, in->arg_types, out);
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, fn->nparams + 1);
    if (!argv)
        return fvm_nomem(x);
    fvm_value *ct = NULL, *res = NULL;
    fvm_status s = FVM_OK;
    if (in->op == FVM_OP_VJP)
        ct = fvm_value_retain(args[fn->nparams]);
    else
        s = one_like(x, pb->param_types[fn->nparams], &ct);
    const fvm_type *local[9];
    const fvm_type **types = fn->nparams < 9 ? local : malloc((size_t)(fn->nparams + 1) * sizeof *types);
    if (s == FVM_OK && !types)
        s = fvm_nomem(x);
    if (s == FVM_OK) {
        for (int i = 0; i < fn->nparams; i++) {
            argv[i] = args[i];
            types[i] = in->arg_types[i];
        }
        argv[fn->nparams] = ct;
        /* vjp's cotangent may be all-equal where the pullback takes one per client */
        types[fn->nparams] = in->op == FVM_OP_VJP ? in->arg_types[fn->nparams] : pb->param_types[fn->nparams];
        s = call_with(x, pb, fn->nparams + 1, argv, types, &res);
    }
    if (types && types != local)
        free(types);
    fvm_value_release(ct);
    fvm_argv_free(&av);
    if (s)
        return s;
    fvm_value *g = fvm_value_retain(res->items[1]->items[0]);
    bool vg_op = in->op == FVM_OP_VALUE_AND_GRAD;
    if (!vg_op && !in->a.has_aux) {
        *out = g;
        fvm_value_release(res);
        return FVM_OK;
    }
    fvm_value *vg = fvm_value_list(FVM_V_STRUCT, 2);
    if (!vg) {
        fvm_value_release(g);
        fvm_value_release(res);
        return fvm_nomem(x);
    }
    /* value_and_grad: <value, g>; grad with has_aux: <g, aux> */
    vg->items[0] = vg_op ? fvm_value_retain(res->items[0]) : g;
    vg->items[1] = vg_op ? g : fvm_value_retain(res->items[0]->items[1]);
    fvm_value_release(res);
    *out = vg;
    return FVM_OK;
}

fvm_status exec_select_keys(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out)
{
    const fvm_tensor *keys = &args[0]->t;
    int64_t max = fvm_tensor_get_i64(&args[1]->t, 0), n = fvm_tensor_count(keys);
    fvm_value *seq = fvm_value_list(FVM_V_SEQ, n);
    if (!seq)
        return fvm_nomem(x);
    static const fvm_dims scalar = {0};
    fvm_status s = FVM_OK;
    for (int64_t j = 0; j < n && s == FVM_OK; j++) {
        int64_t k = fvm_tensor_get_i64(keys, j);
        if (k < 0 || k >= max) {
            s = fvm_diag_add(x->d, FVM_ERR_RUNTIME, &in->loc,
                             "%s: key %lld (entry %lld of the keys) is outside [0, %lld)", fvm_op_table[in->op].name,
                             (long long)k, (long long)j, (long long)max);
            break;
        }
        fvm_value *key = NULL;
        if ((s = fvm_new_tensor(x, FVM_DTYPE_I32, &scalar, &key)))
            break;
        fvm_tensor_set_i64(&key->t, 0, k);
        fvm_value *argv[2] = {args[2], key};
        s = fvm_exec_call(x, in->a.fn, argv, &seq->items[j]);
        fvm_value_release(key);
    }
    if (s) {
        fvm_value_release(seq);
        return s;
    }
    *out = seq;
    return FVM_OK;
}
