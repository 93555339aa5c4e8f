/* ad_helpers.c - what derivations generate besides pullbacks: the helper functions the rules call
 * (fields, sums, zeros, scalings of placed values and sequences), and the function a derivative op computes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff_impl.h"

/* ---- generated helpers ---------------------------------------------------------------- */

fvm_doc *fvm_ad_names(fvm_ad *ad, const fvm_type *st)
{
    bool named = st->u.strct.n > 0;
    for (int i = 0; i < st->u.strct.n; i++)
        named = named && st->u.strct.names[i];
    if (!named)
        return NULL;
    fvm_doc *o = fvm_ad_attrs(ad), *arr = fvm_doc_new(ad->a, FVM_DOC_ARRAY);
    if (!o || !arr)
        return fvm_ad_nomem(ad), NULL;
    arr->flow = true;
    for (int i = 0; i < st->u.strct.n; i++)
        if (fvm_doc_push(ad->a, arr, fvm_doc_string(ad->a, st->u.strct.names[i])))
            return fvm_ad_nomem(ad), NULL;
    if (fvm_doc_set(ad->a, o, "names", arr))
        return fvm_ad_nomem(ad), NULL;
    return o;
}

const char *fvm_ad_field(fvm_ad *ad, const char *s, int i)
{
    fvm_doc *o = fvm_ad_attrs(ad);
    fvm_ad_set_int(ad, o, "index", i);
    return FVM_AD(ad, FVM_OP_FIELD, o, s);
}

const char *fvm_ad_fn_op(fvm_ad *ad, fvm_op op, const fvm_func *fn, int nargs, const char *const *args)
{
    if (!fn)
        return NULL;
    fvm_doc *o = fvm_ad_attrs(ad);
    fvm_ad_set_str(ad, o, "fn", fn->name);
    return fvm_ad_op(ad, op, o, nargs, args);
}

static bool one_float_dtype(const fvm_type *t, fvm_dtype *dt)
{
    if (t->kind == FVM_T_TENSOR) {
        bool first = *dt == FVM_DTYPE_COUNT;
        if (!fvm_dtype_is_float(t->u.tensor.dtype) || (!first && t->u.tensor.dtype != *dt))
            return false;
        *dt = t->u.tensor.dtype;
        return true;
    }
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (!one_float_dtype(t->u.strct.elems[i], dt))
            return false;
    return true;
}

bool fvm_ad_one_float_dtype(const fvm_type *t, fvm_dtype *dt)
{
    *dt = FVM_DTYPE_COUNT;
    return one_float_dtype(t, dt) && *dt != FVM_DTYPE_COUNT;
}

/* a op b for a tree a of type t and a float scalar b of dtype bt, leaf by
 * leaf: b is cast to each float leaf's dtype (once per dtype, cast[] holds
 * the casts made so far); integer leaves, which hold zero cotangents, pass
 * unchanged. */
static const char *scale_tree(fvm_ad *ad, fvm_op op, const char *a, const fvm_type *t, const char *b, fvm_dtype bt,
                              const char *cast[FVM_DTYPE_COUNT])
{
    if (t->kind == FVM_T_TENSOR) {
        fvm_dtype dt = t->u.tensor.dtype;
        if (!fvm_dtype_is_float(dt))
            return a;
        if (dt != bt && !cast[dt]) {
            fvm_doc *o = fvm_ad_attrs(ad);
            fvm_ad_set_str(ad, o, "dtype", fvm_dtype_name(dt));
            cast[dt] = FVM_AD(ad, FVM_OP_CAST, o, b);
        }
        return fvm_ad_op(ad, op, NULL, 2, (const char *[]){a, dt == bt ? b : cast[dt]});
    }
    int n = t->u.strct.n;
    const char **fs = fvm_arena_array(ad->a, (size_t)n + 1, sizeof *fs);
    if (!fs)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < n; i++)
        fs[i] = scale_tree(ad, op, fvm_ad_field(ad, a, i), t->u.strct.elems[i], b, bt, cast);
    return fvm_ad_op(ad, FVM_OP_STRUCT, fvm_ad_names(ad, t), n, fs);
}

fvm_func *fvm_ad_helper_fn(fvm_ad *ad, fvm_ad_helper kind, const fvm_type *t, const fvm_type *t2, int index)
{
    static const char *const kinds[] = {"field", "pick2", "add",  "zeros",      "div",     "mul",
                                        "tie",   "hit",   "quot", "per_client", "add_pair"};
    const char *ts = fvm_type_str(ad->a, t, false), *ts2 = t2 ? fvm_type_str(ad->a, t2, false) : "";
    const char *key = ts && ts2 ? fvm_arena_printf(ad->a, "%s/%d/%s/%s", kinds[kind], index, ts, ts2) : NULL;
    if (!key)
        return fvm_ad_nomem(ad), NULL;
    for (helper_entry *e = ad->cache->helpers; e; e = e->next)
        if (!strcmp(e->key, key))
            return e->fn;
    const char *base = fvm_arena_printf(ad->a, "vjp.%s", kinds[kind]);
    const char *pn[3] = {"a", "b", "c"};
    const fvm_type *pt[3] = {t, t2 ? t2 : t, t};
    int np = kind == FVM_AD_FIELD || kind == FVM_AD_ZEROS || kind == FVM_AD_PER_CLIENT || kind == FVM_AD_ADD_PAIR ? 1
             : kind == FVM_AD_TIE                                                                                 ? 3
                                                                                                                  : 2;
    if (kind == FVM_AD_ADD_PAIR) { /* its parameter: <T, T> */
        const fvm_type *pair[2] = {t, t};
        if (!(pt[0] = fvm_type_struct(ad->a, 2, NULL, pair)))
            return fvm_ad_nomem(ad), NULL;
    }
    if (!base || fvm_ad_begin(ad, base, np, pn, pt))
        return NULL;
    const char *a = ad->b->f->param_names[0], *b = np > 1 ? ad->b->f->param_names[1] : NULL, *r = NULL;
    switch (kind) {
    case FVM_AD_FIELD:
        r = fvm_ad_field(ad, a, index);
        break;
    case FVM_AD_PICK2:
        r = b;
        break;
    case FVM_AD_ADD:
        r = fvm_ad_add(ad, a, b, t);
        break;
    case FVM_AD_ADD_PAIR:
        r = fvm_ad_add(ad, fvm_ad_field(ad, a, 0), fvm_ad_field(ad, a, 1), t);
        break;
    case FVM_AD_ZEROS:
        r = fvm_ad_zeros(ad, a, t);
        break;
    case FVM_AD_DIV:
    case FVM_AD_MUL: {
        /* b is a float scalar, converted to each leaf's dtype where it differs;
         * when a has one dtype, b is cast at most once and the op lifted over a */
        fvm_op op = kind == FVM_AD_DIV ? FVM_OP_DIV : FVM_OP_MUL;
        fvm_dtype bt = t2->u.tensor.dtype, dt;
        const char *cast[FVM_DTYPE_COUNT] = {0};
        const fvm_type *ta = fvm_ad_one_float_dtype(t, &dt) ? fvm_type_scalar(ad->a, dt) : t;
        r = ta ? scale_tree(ad, op, a, ta, b, bt, cast) : (fvm_ad_nomem(ad), NULL);
        break;
    }
    case FVM_AD_TIE: {
        const char *c = ad->b->f->param_names[2];
        const char *hit = FVM_AD(ad, FVM_OP_EQ, NULL, a, b);
        r = FVM_AD(ad, FVM_OP_SELECT, NULL, hit, c, FVM_AD(ad, FVM_OP_ZEROS_LIKE, NULL, c));
        break;
    }
    case FVM_AD_HIT: {
        const char *hit = FVM_AD(ad, FVM_OP_EQ, NULL, a, b);
        r = FVM_AD(ad, FVM_OP_SELECT, NULL, hit, FVM_AD(ad, FVM_OP_ONES_LIKE, NULL, a),
                   FVM_AD(ad, FVM_OP_ZEROS_LIKE, NULL, a));
        break;
    }
    case FVM_AD_QUOT:
        r = FVM_AD(ad, FVM_OP_DIV, NULL, a, b);
        break;
    case FVM_AD_PER_CLIENT:
        r = a; /* the call does the work: its argument becomes one member per client */
        break;
    }
    fvm_func *fn = fvm_ad_end(ad, r);
    helper_entry *e = fvm_arena_alloc(ad->a, sizeof *e);
    if (!fn || !e)
        return fn ? (fvm_ad_nomem(ad), NULL) : NULL;
    e->key = key;
    e->fn = fn;
    e->next = ad->cache->helpers;
    ad->cache->helpers = e;
    return fn;
}

/* Does t hold a {T}@CLIENTS (one value per client) outside sequences? */
static bool holds_list(const fvm_type *t)
{
    if (t->kind == FVM_T_FED)
        return t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (holds_list(t->u.strct.elems[i]))
            return true;
    return false;
}

const char *fvm_ad_conform(fvm_ad *ad, const char *v, const fvm_type *t)
{
    if (!v || !holds_list(t))
        return v;
    return fvm_ad_fn_op(ad, FVM_OP_CALL, fvm_ad_helper_fn(ad, FVM_AD_PER_CLIENT, t, NULL, 0), 1, &v);
}

/* Does t hold placed values or sequences (whose zeros and sums take
 * intrinsics or generated helpers)? */
static bool needs_helpers(const fvm_type *t)
{
    return fvm_type_is_placed(t) || fvm_type_has_seq(t);
}

const char *fvm_ad_zeros(fvm_ad *ad, const char *like, const fvm_type *t)
{
    if (!needs_helpers(t))
        return FVM_AD(ad, FVM_OP_ZEROS_LIKE, NULL, like);
    if (t->kind == FVM_T_FED) {
        fvm_func *z = fvm_ad_helper_fn(ad, FVM_AD_ZEROS, t->u.fed.member, NULL, 0);
        return fvm_ad_fn_op(ad, t->u.fed.pl == FVM_PL_CLIENTS ? FVM_OP_FEDERATED_MAP : FVM_OP_FEDERATED_APPLY, z, 1,
                            &like);
    }
    if (t->kind == FVM_T_SEQ) /* as long as the sequence, element by element */
        return fvm_ad_fn_op(ad, FVM_OP_SEQUENCE_MAP, fvm_ad_helper_fn(ad, FVM_AD_ZEROS, t->u.seq.elem, NULL, 0), 1,
                            &like);
    /* a struct holding placed values or sequences: field by field */
    int n = t->u.strct.n;
    const char **zs = fvm_arena_array(ad->a, (size_t)n + 1, sizeof *zs);
    if (!zs)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < n; i++)
        zs[i] = fvm_ad_zeros(ad, fvm_ad_field(ad, like, i), t->u.strct.elems[i]);
    return fvm_ad_op(ad, FVM_OP_STRUCT, fvm_ad_names(ad, t), n, zs);
}

const char *fvm_ad_add(fvm_ad *ad, const char *a, const char *b, const fvm_type *t)
{
    if (!needs_helpers(t))
        return FVM_AD(ad, FVM_OP_ADD, NULL, a, b);
    if (t->kind == FVM_T_FED) {
        fvm_func *add = fvm_ad_helper_fn(ad, FVM_AD_ADD, t->u.fed.member, NULL, 0);
        const char *args[2] = {a, b};
        return fvm_ad_fn_op(ad, t->u.fed.pl == FVM_PL_CLIENTS ? FVM_OP_FEDERATED_MAP : FVM_OP_FEDERATED_APPLY, add, 2,
                            args);
    }
    if (t->kind == FVM_T_SEQ) { /* element by element: the sequences have one length */
        const char *z = FVM_AD(ad, FVM_OP_SEQUENCE_ZIP, NULL, a, b);
        return fvm_ad_fn_op(ad, FVM_OP_SEQUENCE_MAP, fvm_ad_helper_fn(ad, FVM_AD_ADD_PAIR, t->u.seq.elem, NULL, 0), 1,
                            &z);
    }
    int n = t->u.strct.n;
    const char **ss = fvm_arena_array(ad->a, (size_t)n + 1, sizeof *ss);
    if (!ss)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < n; i++)
        ss[i] = fvm_ad_add(ad, fvm_ad_field(ad, a, i), fvm_ad_field(ad, b, i), t->u.strct.elems[i]);
    return fvm_ad_op(ad, FVM_OP_STRUCT, fvm_ad_names(ad, t), n, ss);
}

/* ---- the derivative ops as functions ---------------------------------------------------------- */

bool fvm_ad_is_deriv(fvm_op op)
{
    return op == FVM_OP_GRAD || op == FVM_OP_VALUE_AND_GRAD || op == FVM_OP_VJP || op == FVM_OP_JVP;
}

/* 1 of a float scalar type, unplaced or at the server (grad's cotangent). */
static const char *one_of(fvm_ad *ad, const fvm_type *t)
{
    const fvm_type *m = t->kind == FVM_T_FED ? t->u.fed.member : t;
    const char *one = fvm_ad_const(ad, 1.0, m->u.tensor.dtype);
    if (t->kind != FVM_T_FED)
        return one;
    fvm_doc *o = fvm_ad_attrs(ad);
    fvm_ad_set_str(ad, o, "placement", t->u.fed.pl == FVM_PL_SERVER ? "SERVER" : "CLIENTS");
    return FVM_AD(ad, FVM_OP_FEDERATED_VALUE, o, one);
}

fvm_func *fvm_ad_deriv_fn(fvm_ad *ad, const fvm_instr *in)
{
    const fvm_func *fn = in->a.fn;
    fvm_func *pb = in->derived;
    if (!pb) {
        if (!ad->failed)
            ad->status = fvm_diag_add(ad->env->d, FVM_ERR_TYPE, &in->loc,
                                      "cannot differentiate %s: the derivative it takes was not derived",
                                      fvm_op_table[in->op].name);
        ad->failed = true;
        return NULL;
    }
    if (in->op == FVM_OP_JVP) /* F.jvp(P)(p1..pn, t) computes the op itself */
        return pb;
    const char *key = fvm_arena_printf(ad->a, "deriv/%d/%s", (int)in->op, pb->name);
    if (!key)
        return fvm_ad_nomem(ad), NULL;
    for (helper_entry *e = ad->cache->helpers; e; e = e->next)
        if (!strcmp(e->key, key))
            return e->fn;
    int n = fn->nparams, np = n + (in->op == FVM_OP_VJP);
    const char *wrt = (in->a.present & A(WRT)) ? in->a.wrt : fn->param_names[0];
    const char *base = in->op == FVM_OP_GRAD ? fvm_arena_printf(ad->a, "%s.grad(%s)", fn->name, wrt)
                       : in->op == FVM_OP_VALUE_AND_GRAD
                           ? fvm_arena_printf(ad->a, "%s.value_and_grad(%s)", fn->name, wrt)
                           : fvm_arena_printf(ad->a, "%s.vjp(%s).grads", fn->name, wrt);
    const char **pn = fvm_arena_array(ad->a, (size_t)np + 1, sizeof *pn);
    const fvm_type **pt = fvm_arena_array(ad->a, (size_t)np + 1, sizeof *pt);
    if (!base || !pn || !pt)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < n; i++)
        pn[i] = fn->param_names[i], pt[i] = fn->param_types[i];
    if (np > n)
        pn[n] = "ct", pt[n] = pb->param_types[n];
    if (fvm_ad_begin(ad, base, np, pn, pt))
        return NULL;
    ad->b->loc = &in->loc;
    ad->b->hint = "g";
    const char **args = fvm_arena_array(ad->a, (size_t)n + 2, sizeof *args);
    if (!args)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < n; i++)
        args[i] = fvm_ad_param(ad, i);
    args[n] = np > n ? fvm_ad_param(ad, n) : one_of(ad, pb->param_types[n]);
    const char *r = fvm_ad_fn_op(ad, FVM_OP_CALL, pb, n + 1, args);
    fvm_doc *o = fvm_ad_attrs(ad);
    fvm_ad_set_str(ad, o, "name", "grads");
    const char *g = fvm_ad_field(ad, FVM_AD(ad, FVM_OP_FIELD, o, r), 0), *res = g;
    bool vg = in->op == FVM_OP_VALUE_AND_GRAD;
    if (vg || in->a.has_aux) { /* <value, grad>, or grad with has_aux: <grad, aux> (value's field 1) */
        fvm_doc *ov = fvm_ad_attrs(ad), *on = fvm_ad_attrs(ad), *arr = fvm_doc_new(ad->a, FVM_DOC_ARRAY);
        if (!arr || fvm_doc_push(ad->a, arr, fvm_doc_string(ad->a, vg ? "value" : "grad")) ||
            fvm_doc_push(ad->a, arr, fvm_doc_string(ad->a, vg ? "grad" : "aux")) || !on ||
            fvm_doc_set(ad->a, on, "names", arr))
            return fvm_ad_nomem(ad), NULL;
        arr->flow = true;
        fvm_ad_set_str(ad, ov, "name", "value");
        const char *v = FVM_AD(ad, FVM_OP_FIELD, ov, r);
        res = vg ? FVM_AD(ad, FVM_OP_STRUCT, on, v, g) : FVM_AD(ad, FVM_OP_STRUCT, on, g, fvm_ad_field(ad, v, 1));
    }
    fvm_func *w = fvm_ad_end(ad, res);
    helper_entry *e = w ? fvm_arena_alloc(ad->a, sizeof *e) : NULL;
    if (!e)
        return w ? (fvm_ad_nomem(ad), NULL) : NULL;
    e->key = key;
    e->fn = w;
    e->next = ad->cache->helpers;
    ad->cache->helpers = e;
    return w;
}
