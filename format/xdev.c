/* xdev.c - a cross-device plan read back: its configuration checked against its phases' programs (see xdev.h). */
#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/ir/aggregation.h"
#include "doc_io.h"
#include "../vm/ir/check.h"
#include "../vm/core/doc.h"
#include "file.h"
#include "ir_read.h"
#include "safetensors.h"
#include "xdev_impl.h"

typedef struct rd {
    fvm_xdev_plan *pl;
    fvm_diag *d;
    const char *text; /* the plan's bytes, read once: its id and its programs come from them */
    size_t len;
} rd;

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

static fvm_loc at(rd *r, const fvm_doc *n, const char *ptr)
{
    return (fvm_loc){.file = r->pl->path, .line = n ? n->line : 0, .col = n ? n->col : 0, .ptr = ptr};
}

static const char *kind_name(fvm_doc_kind k)
{
    static const char *const names[] = {"null",     "a boolean", "an integer", "a number",
                                        "a string", "an array",  "an object"};
    return names[k];
}

/* Member key of object obj (at pointer ptr) of the given kind; NULL after an
 * error saying what it should be. */
static const fvm_doc *member(rd *r, const fvm_doc *obj, const char *ptr, const char *key, fvm_doc_kind kind,
                             const char *what)
{
    const fvm_doc *v = fvm_doc_get(obj, key);
    const char *p = fvm_pointer_join(&r->pl->arena, ptr, key);
    fvm_loc loc;
    if (!v) {
        loc = at(r, obj, ptr);
        fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "missing \"%s\" (%s)", key, what);
    } else if (v->kind != kind) {
        loc = at(r, v, p);
        fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "\"%s\" must be %s (%s), found %s", key, kind_name(kind), what,
                     kind_name(v->kind));
        v = NULL;
    }
    return v;
}

/* A function of phase program q named by member key of obj; NULL after an error. */
static const fvm_func *phase_func(rd *r, const fvm_program *q, const fvm_doc *obj, const char *ptr, const char *key,
                                  const char *what)
{
    const fvm_doc *v = member(r, obj, ptr, key, FVM_DOC_STRING, what);
    if (!v)
        return NULL;
    const fvm_func *f = fvm_program_func(q, v->u.str.s);
    if (!f) {
        fvm_loc loc = at(r, v, fvm_pointer_join(&r->pl->arena, ptr, key));
        fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "no function '%s' in the program of %s", v->u.str.s,
                     q == r->pl->ph.client ? "client" : "server");
    }
    return f;
}

/* Loads and checks the program at member ptr of the plan (from the bytes
 * read, not the file again), which must be self-contained: a plan's
 * program that includes a file is refused, and no file is read for it. */
static fvm_status load_program(rd *r, const char *ptr, fvm_program **out)
{
    fvm_load_opts o = {.no_include = true};
    fvm_status s = fvm_program_load_opts(r->pl->path, r->text, r->len, ptr, &o, out, r->d);
    if (s == FVM_OK)
        s = fvm_check(*out, r->d);
    return s;
}

/* ---- the configuration, from the programs ------------------------------------------ */

static const fvm_type *unplaced(const fvm_type *t)
{
    return t->kind == FVM_T_FED ? t->u.fed.member : t;
}

/* Can a value of type a go where f is expected, placements aside (at any
 * depth: a phase's functions place a struct's fields or the struct)? */
static bool fits(const fvm_type *a, const fvm_type *f)
{
    a = unplaced(a);
    f = unplaced(f);
    if (a->kind != FVM_T_STRUCT || f->kind != FVM_T_STRUCT)
        return fvm_type_compatible(a, f);
    if (a->u.strct.n != f->u.strct.n)
        return false;
    for (int k = 0; k < a->u.strct.n; k++) {
        const char *x = a->u.strct.names ? a->u.strct.names[k] : NULL,
                   *y = f->u.strct.names ? f->u.strct.names[k] : NULL;
        if ((x && y && strcmp(x, y)) || !fits(a->u.strct.elems[k], f->u.strct.elems[k]))
            return false;
    }
    return true;
}

fvm_status xdev_tensor_list(fvm_arena *a, fvm_doc *list, const char *prefix, const fvm_type *t, const char **bad,
                            const fvm_type **bad_type)
{
    if (t->kind == FVM_T_FED)
        t = t->u.fed.member;
    if (t->kind == FVM_T_STRUCT) {
        for (int k = 0; k < t->u.strct.n; k++) {
            const char *name = t->u.strct.names[k] ? t->u.strct.names[k] : fvm_arena_printf(a, "%d", k);
            const char *p = !name ? NULL : *prefix ? fvm_arena_printf(a, "%s.%s", prefix, name) : name;
            if (!p)
                return FVM_ERR_NOMEM;
            FVM_TRY(xdev_tensor_list(a, list, p, t->u.strct.elems[k], bad, bad_type));
        }
        return FVM_OK;
    }
    const char *path = *prefix ? prefix : "value";
    if (t->kind != FVM_T_TENSOR) {
        *bad = path;
        *bad_type = t;
        return FVM_ERR_TYPE;
    }
    fvm_doc *e = fvm_doc_new(a, FVM_DOC_OBJECT), *shape = fvm_doc_new(a, FVM_DOC_ARRAY);
    if (!e || !shape)
        return FVM_ERR_NOMEM;
    e->flow = shape->flow = true;
    for (int k = 0; k < t->u.tensor.dims.rank; k++) {
        int64_t n = t->u.tensor.dims.d[k];
        if (fvm_doc_push(a, shape, n < 0 ? fvm_doc_new(a, FVM_DOC_NULL) : fvm_doc_int(a, n)))
            return FVM_ERR_NOMEM;
    }
    if (fvm_doc_set(a, e, "name", fvm_doc_string(a, path)) ||
        fvm_doc_set(a, e, "dtype", fvm_doc_string(a, fvm_safetensors_dtype_name(t->u.tensor.dtype))) ||
        fvm_doc_set(a, e, "shape", shape) || fvm_doc_push(a, list, e))
        return FVM_ERR_NOMEM;
    return FVM_OK;
}

const fvm_type *xdev_sent_type(fvm_arena *a, const fvm_type *work_result)
{
    if (work_result->kind != FVM_T_STRUCT || work_result->u.strct.n <= 2)
        return work_result;
    return fvm_type_struct(a, 2, work_result->u.strct.names, work_result->u.strct.elems);
}

fvm_doc *xdev_columns(fvm_arena *a, const fvm_type *member, bool *nomem)
{
    *nomem = false;
    const fvm_type *ex = member->kind == FVM_T_SEQ ? member->u.seq.elem : NULL;
    if (!ex || ex->kind != FVM_T_STRUCT || !ex->u.strct.n || !ex->u.strct.names[0])
        return NULL;
    fvm_doc *cols = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (cols)
        cols->flow = true;
    for (int c = 0; cols && c < ex->u.strct.n; c++) {
        const char *ts = fvm_type_str(a, ex->u.strct.elems[c], false);
        if (!ts || fvm_doc_set(a, cols, ex->u.strct.names[c], fvm_doc_string(a, ts)))
            cols = NULL;
    }
    *nomem = !cols;
    return cols;
}

/* "'b0.w' F32 [60,10]" of a tensor entry (as listed, or as expected). */
static const char *tensor_text(rd *r, const fvm_doc *e)
{
    const fvm_doc *name = e && e->kind == FVM_DOC_OBJECT ? fvm_doc_get(e, "name") : NULL,
                  *dt = e && e->kind == FVM_DOC_OBJECT ? fvm_doc_get(e, "dtype") : NULL,
                  *shape = e && e->kind == FVM_DOC_OBJECT ? fvm_doc_get(e, "shape") : NULL;
    if (!name || name->kind != FVM_DOC_STRING || !dt || dt->kind != FVM_DOC_STRING || !shape ||
        shape->kind != FVM_DOC_ARRAY || shape->u.coll.n > FVM_MAX_RANK)
        return "an entry that is not {\"name\", \"dtype\", \"shape\"}";
    char dims[FVM_MAX_RANK * 24 + 4] = "[";
    size_t len = 1;
    for (size_t k = 0; k < shape->u.coll.n; k++) {
        const fvm_doc *v = shape->u.coll.items[k];
        len += (size_t)snprintf(dims + len, sizeof dims - len, "%s", k ? "," : "");
        if (v->kind == FVM_DOC_INT)
            len += (size_t)snprintf(dims + len, sizeof dims - len, "%lld", (long long)v->u.i);
        else
            len += (size_t)snprintf(dims + len, sizeof dims - len, "%s", v->kind == FVM_DOC_NULL ? "null" : "?");
    }
    snprintf(dims + len, sizeof dims - len, "]");
    return fvm_arena_printf(&r->pl->arena, "'%s' %s %s", name->u.str.s, dt->u.str.s, dims);
}

/* Does the listed entry e equal the expected entry want (name, dtype, shape)? */
static bool tensor_equal(const fvm_doc *e, const fvm_doc *want)
{
    if (!e || e->kind != FVM_DOC_OBJECT)
        return false;
    static const char *const keys[] = {"name", "dtype", "shape"};
    for (int k = 0; k < 3; k++)
        if (!fvm_doc_equal(fvm_doc_get(e, keys[k]), fvm_doc_get(want, keys[k])))
            return false;
    return true;
}

/* The "tensors" list of obj (at ptr) must be the tensors of type t named
 * below prefix, in order; what says whose they are ("the broadcast 'b0'"). */
static fvm_status tensors_fit(rd *r, const fvm_doc *obj, const char *ptr, const char *prefix, const fvm_type *t,
                              const char *what)
{
    fvm_arena *a = &r->pl->arena;
    const fvm_doc *list = member(r, obj, ptr, "tensors", FVM_DOC_ARRAY, "the tensors of the file");
    if (!list)
        return FVM_ERR_FORMAT;
    const char *lp = fvm_pointer_join(a, ptr, "tensors"), *bad = NULL;
    const fvm_type *bad_type = NULL;
    fvm_doc *want = fvm_doc_new(a, FVM_DOC_ARRAY);
    fvm_status s = want ? xdev_tensor_list(a, want, prefix, t, &bad, &bad_type) : FVM_ERR_NOMEM;
    fvm_loc loc = at(r, list, lp);
    if (s == FVM_ERR_NOMEM)
        return nomem(r->d);
    if (s) {
        char buf[256];
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "%s is written to safetensors files, which hold tensors "
                            "only, and in the program its part '%s' is %s",
                            what, bad, fvm_type_format(bad_type, true, buf, sizeof buf));
    }
    size_t n = list->u.coll.n, m = want->u.coll.n;
    for (size_t i = 0; i < n && i < m; i++) {
        const fvm_doc *e = list->u.coll.items[i];
        if (tensor_equal(e, want->u.coll.items[i]))
            continue;
        loc = at(r, e, fvm_pointer_index(a, lp, i));
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the plan lists %s here, but %s has %s in the program (a configuration that does not "
                            "fit the plan's programs)",
                            tensor_text(r, e), what, tensor_text(r, want->u.coll.items[i]));
    }
    if (n != m)
        return n > m ? fvm_diag_add(r->d, FVM_ERR_TYPE,
                                    (loc = at(r, list->u.coll.items[m], fvm_pointer_index(a, lp, m)), &loc),
                                    "the plan lists %s here, but %s has only %zu tensor%s in the program (a "
                                    "configuration that does not fit the plan's programs)",
                                    tensor_text(r, list->u.coll.items[m]), what, m, m == 1 ? "" : "s")
                     : fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                                    "the plan lists %zu tensor%s, but %s has %zu in the program (the first missing: "
                                    "%s; a configuration that does not fit the plan's programs)",
                                    n, n == 1 ? "" : "s", what, m, tensor_text(r, want->u.coll.items[n]));
    return FVM_OK;
}

/* Member key of obj (at ptr) must be the string of type t (aliases
 * expanded, as the writer gives it). */
static fvm_status type_fits(rd *r, const fvm_doc *obj, const char *ptr, const char *key, const fvm_type *t,
                            const char *what)
{
    const fvm_doc *v = member(r, obj, ptr, key, FVM_DOC_STRING, what);
    if (!v)
        return FVM_ERR_FORMAT;
    const char *want = fvm_type_str(&r->pl->arena, t, false);
    if (!want)
        return nomem(r->d);
    if (!strcmp(v->u.str.s, want))
        return FVM_OK;
    fvm_loc loc = at(r, v, fvm_pointer_join(&r->pl->arena, ptr, key));
    return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                        "%s is %s in the plan, but %s in its program (a configuration that does not fit the plan's "
                        "programs)",
                        what, v->u.str.s, want);
}

static bool is_i64_scalar(const fvm_type *t)
{
    return t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_I64 && t->u.tensor.dims.rank == 0;
}

/* The inputs list at obj.inputs (at ptr): each {"param", "kind"} with kind
 * one of names[0..n) (mapped to kinds[]), in the order of f's parameters
 * from 0. */
static fvm_status inputs(rd *r, const fvm_doc *obj, const char *ptr, const fvm_func *f, int n, const char *const *names,
                         const xdev_input_kind *kinds, bool per_client, int *count, xdev_input_kind **out)
{
    const fvm_doc *list = member(r, obj, ptr, "inputs", FVM_DOC_ARRAY, "the phase's inputs");
    if (!list)
        return FVM_ERR_FORMAT;
    const char *lp = fvm_pointer_join(&r->pl->arena, ptr, "inputs");
    *count = (int)list->u.coll.n;
    *out = fvm_arena_array(&r->pl->arena, list->u.coll.n + 1, sizeof **out);
    if (!*out || !lp)
        return nomem(r->d);
    fvm_status s = FVM_OK;
    for (size_t i = 0; i < list->u.coll.n; i++) {
        const fvm_doc *e = list->u.coll.items[i];
        const char *ep = fvm_pointer_index(&r->pl->arena, lp, i);
        fvm_loc loc = at(r, e, ep);
        if (e->kind != FVM_DOC_OBJECT) {
            s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "an input must be an object {\"param\", \"kind\"}");
            continue;
        }
        const fvm_doc *param = member(r, e, ep, "param", FVM_DOC_STRING, "a parameter name"),
                      *kind = member(r, e, ep, "kind", FVM_DOC_STRING, "how the parameter gets its value");
        if (!param || !kind) {
            s = FVM_ERR_FORMAT;
            continue;
        }
        int k = 0;
        while (k < n && strcmp(kind->u.str.s, names[k]))
            k++;
        loc = at(r, kind, fvm_pointer_join(&r->pl->arena, ep, "kind"));
        if (k == n) {
            char expected[256] = "";
            for (int j = 0; j < n; j++)
                snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
                         j == 0       ? ""
                         : j == n - 1 ? " or "
                                      : ", ",
                         names[j]);
            s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "unknown kind of input '%s' (expected %s)", kind->u.str.s,
                             expected);
            continue;
        }
        (*out)[i] = kinds[k];
        loc = at(r, param, fvm_pointer_join(&r->pl->arena, ep, "param"));
        if ((int)i >= f->nparams || strcmp(f->param_names[i], param->u.str.s))
            s = fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "input %zu is '%s', but parameter %zu of '%s' is %s%s%s", i,
                             param->u.str.s, i, f->name, (int)i < f->nparams ? "'" : "",
                             (int)i < f->nparams ? f->param_names[i] : "missing", (int)i < f->nparams ? "'" : "");
        else if ((kinds[k] == XDEV_CLIENT_KEY || kinds[k] == XDEV_ROUND_KEY) && !fvm_bind_is_key(f->param_types[i]))
            s = fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "'%s' receives a key, so it must be u32[2]", param->u.str.s);
        else if ((kinds[k] == XDEV_CLIENT_INDEX || kinds[k] == XDEV_NUM_CLIENTS) &&
                 !is_i64_scalar(unplaced(f->param_types[i])))
            s = fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "'%s' receives %s, so it must be i64[]", param->u.str.s,
                             kinds[k] == XDEV_CLIENT_INDEX ? "the client's index" : "the number of clients");
        else {
            /* the type the plan gives the input is next's parameter: {T}@CLIENTS for a device's T, T@SERVER
               for the server's */
            const fvm_type *t = f->param_types[i]->kind == FVM_T_FED
                                    ? f->param_types[i]
                                    : fvm_type_fed(&r->pl->arena, f->param_types[i],
                                                   per_client ? FVM_PL_CLIENTS : FVM_PL_SERVER, !per_client);
            bool oom = false;
            fvm_doc *cols =
                per_client && kinds[k] == XDEV_DATA ? xdev_columns(&r->pl->arena, f->param_types[i], &oom) : NULL;
            const fvm_doc *have = fvm_doc_get(e, "columns");
            fvm_status st = !t || oom
                                ? nomem(r->d)
                                : type_fits(r, e, ep, "type", t,
                                            fvm_arena_printf(&r->pl->arena, "the type of input '%s'", param->u.str.s));
            if (st == FVM_OK && (cols || have) && !fvm_doc_equal(cols, have)) {
                loc = at(r, have ? have : e, have ? fvm_pointer_join(&r->pl->arena, ep, "columns") : ep);
                st = fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                                  "the columns of input '%s' are not those of its type in the program (a "
                                  "configuration that does not fit the plan's programs)",
                                  param->u.str.s);
            }
            s = st ? st : s;
        }
    }
    return s;
}

/* ---- the client phase ---------------------------------------------------------- */

/* A secure sum's entry (aggregation secure_sum): its op (absent in plans
 * written before there were other secure sums than
 * federated_secure_sum_bitwidth: that one) and the op's attribute, as its
 * type rule bounds it for the secure inputs' type t: a bit width from 1 to
 * the narrowest integer dtype's width, a modulus from 1 to the largest value
 * of the narrowest dtype plus one, an optional max_input up to that value. */
static fvm_status secure_entry(rd *r, const fvm_doc *e, const char *ep, const char *name, const fvm_type *t,
                               fvm_secure *out)
{
    fvm_arena *a = &r->pl->arena;
    const fvm_doc *opd = fvm_doc_get(e, "op");
    fvm_op op = FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH;
    if (opd) {
        op = opd->kind == FVM_DOC_STRING ? fvm_op_lookup(opd->u.str.s) : FVM_OP_COUNT;
        if (op != FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH && op != FVM_OP_FEDERATED_SECURE_MODULAR_SUM &&
            op != FVM_OP_FEDERATED_SECURE_SUM) {
            fvm_loc loc = at(r, opd, fvm_pointer_join(a, ep, "op"));
            return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                                "secure sum '%s' must name its intrinsic: federated_secure_sum_bitwidth, "
                                "federated_secure_modular_sum or federated_secure_sum",
                                name);
        }
    }
    fvm_attrs attrs = {0};
    fvm_loc loc = at(r, e, ep);
    uint64_t hi = fvm_int_leaf_max(t);
    if (op == FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH) {
        const fvm_doc *bits = member(r, e, ep, "bitwidth", FVM_DOC_INT, "the secure sum's bit width");
        if (!bits)
            return FVM_ERR_FORMAT;
        int maxbits = fvm_modsum_bits(t);
        if (!maxbits || bits->u.i < 1 || bits->u.i > maxbits)
            return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                                "secure sum '%s' needs a bit width from 1 to the width of its narrowest integer "
                                "dtype (%d) over integer tensors",
                                name, maxbits);
        attrs.bitwidth = bits->u.i;
    } else if (op == FVM_OP_FEDERATED_SECURE_MODULAR_SUM) {
        const fvm_doc *mod = member(r, e, ep, "modulus", FVM_DOC_INT, "the secure sum's modulus");
        if (!mod)
            return FVM_ERR_FORMAT;
        if (!hi || mod->u.i < 1 || (uint64_t)mod->u.i - 1 > hi)
            return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                                "secure sum '%s' needs a modulus from 1 to %llu (the largest value of its narrowest "
                                "integer dtype, plus one) over integer tensors",
                                name, (unsigned long long)hi + 1);
        attrs.modulus = mod->u.i;
    } else if (fvm_doc_get(e, "max_input")) {
        const fvm_doc *max = member(r, e, ep, "max_input", FVM_DOC_INT, "the secure sum's max_input");
        if (!max)
            return FVM_ERR_FORMAT;
        if (!hi || max->u.i < 0 || (uint64_t)max->u.i > hi)
            return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                                "secure sum '%s' needs a max_input from 0 to %llu (the largest value of its "
                                "narrowest integer dtype) over integer tensors",
                                name, (unsigned long long)hi);
        attrs.max_input = max->u.i;
        attrs.present = A(MAX_INPUT);
    } else if (!hi) {
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "secure sum '%s' sums integer tensors only", name);
    }
    *out = fvm_secure_of(op, &attrs);
    return FVM_OK;
}

/* client.outputs: one entry per field of work's result, the updates'
 * (u0, ...) then the secure sums' (s0, ...), each with the tensors of its
 * field; a secure sum's entry has its op and its bit width, modulus or
 * max_input (secure_entry). */
static fvm_status outputs(rd *r, const fvm_doc *client)
{
    fvm_xdev_plan *pl = r->pl;
    fvm_arena *a = &pl->arena;
    const fvm_doc *outs = member(r, client, "/client", "outputs", FVM_DOC_ARRAY, "the client's outputs");
    if (!outs)
        return FVM_ERR_FORMAT;
    const fvm_type *res = pl->ph.work->result_type;
    int upd = res->kind == FVM_T_STRUCT ? fvm_type_field_index(res, "updates") : -1,
        sec = res->kind == FVM_T_STRUCT ? fvm_type_field_index(res, "secure") : -1;
    const fvm_type *ut = upd >= 0 ? res->u.strct.elems[upd] : NULL, *st = sec >= 0 ? res->u.strct.elems[sec] : NULL;
    fvm_loc wloc = at(r, client, "/client");
    int nres = pl->ph.client_state ? 3 : 2; /* the new state last, in a round with client state */
    if (!ut || !st || ut->kind != FVM_T_STRUCT || st->kind != FVM_T_STRUCT || upd != 0 || sec != 1 ||
        res->u.strct.n != nres || (nres == 3 && fvm_type_field_index(res, "client_state") != 2))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &wloc, "the client's '%s' must return <updates=<...>, secure=<...>%s>",
                            pl->ph.work->name, nres == 3 ? ", client_state=C" : "");
    int nu = ut->u.strct.n, ns = st->u.strct.n;
    pl->ph.secure = fvm_arena_array(a, (size_t)ns + 1, sizeof *pl->ph.secure);
    if (!pl->ph.secure)
        return nomem(r->d);
    size_t n = outs->u.coll.n;
    if (n != (size_t)(nu + ns)) {
        fvm_loc loc = at(r, outs, "/client/outputs");
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                            "the plan lists %zu output%s, but '%s' returns %d updates and %d secure-sum inputs (a "
                            "configuration that does not fit the plan's programs)",
                            n, n == 1 ? "" : "s", pl->ph.work->name, nu, ns);
    }
    for (size_t i = 0; i < n; i++) {
        const fvm_doc *e = outs->u.coll.items[i];
        const char *ep = fvm_pointer_index(a, "/client/outputs", i);
        fvm_loc loc = at(r, e, ep);
        if (e->kind != FVM_DOC_OBJECT)
            return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                                "an output must be an object {\"name\", \"aggregation\", "
                                "\"tensors\", ...}");
        bool secure = i >= (size_t)nu;
        int j = secure ? (int)i - nu : (int)i;
        const fvm_type *grp = secure ? st : ut;
        const char *field = grp->u.strct.names[j];
        const fvm_doc *name = member(r, e, ep, "name", FVM_DOC_STRING, "the output's name"),
                      *agg = member(r, e, ep, "aggregation", FVM_DOC_STRING, "how the output is aggregated");
        if (!name || !agg)
            return FVM_ERR_FORMAT;
        if (!field || strcmp(field, name->u.str.s))
            return fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "%s '%s' is not field %d of the %s that '%s' returns",
                                secure ? "secure sum" : "output", name->u.str.s, j,
                                secure ? "secure inputs" : "updates", pl->ph.work->name);
        if (secure != !strcmp(agg->u.str.s, "secure_sum")) {
            loc = at(r, agg, fvm_pointer_join(a, ep, "aggregation"));
            return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                                secure ? "'%s' is a secure sum's input in '%s' (its field 'secure'), so its "
                                         "aggregation is secure_sum"
                                       : "'%s' is an update in '%s' (its field 'updates'), so its aggregation is not "
                                         "secure_sum",
                                name->u.str.s, pl->ph.work->name);
        }
        if (secure)
            FVM_TRY(secure_entry(r, e, ep, name->u.str.s, st->u.strct.elems[j], &pl->ph.secure[pl->ph.nsecure++]));
        FVM_TRY(tensors_fit(r, e, ep, fvm_arena_printf(a, "%s.%s", secure ? "secure" : "updates", field),
                            grp->u.strct.elems[j],
                            fvm_arena_printf(a, "the %s '%s'", secure ? "secure sum" : "update", field)));
    }
    return FVM_OK;
}

/* client.broadcast: one entry per field of work's last parameter (what
 * prepare sends), b0, ..., each with the tensors of its field. */
static fvm_status broadcasts(rd *r, const fvm_doc *client)
{
    fvm_xdev_plan *pl = r->pl;
    fvm_arena *a = &pl->arena;
    const fvm_doc *list = member(r, client, "/client", "broadcast", FVM_DOC_ARRAY, "what the server sends");
    if (!list)
        return FVM_ERR_FORMAT;
    const fvm_type *bt = pl->ph.work->param_types[pl->ph.work->nparams - 1];
    if (bt->kind == FVM_T_FED)
        bt = bt->u.fed.member;
    fvm_loc loc = at(r, list, "/client/broadcast");
    if (bt->kind != FVM_T_STRUCT)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the client's '%s' must take the broadcast <b0, ...> last",
                            pl->ph.work->name);
    if (list->u.coll.n != (size_t)bt->u.strct.n)
        return fvm_diag_add(
            r->d, FVM_ERR_FORMAT, &loc,
            "the plan lists %zu broadcast value%s, but '%s' takes %d (a configuration that does not fit "
            "the plan's programs)",
            list->u.coll.n, list->u.coll.n == 1 ? "" : "s", pl->ph.work->name, bt->u.strct.n);
    for (size_t j = 0; j < list->u.coll.n; j++) {
        const fvm_doc *e = list->u.coll.items[j];
        const char *ep = fvm_pointer_index(a, "/client/broadcast", j), *field = bt->u.strct.names[j];
        loc = at(r, e, ep);
        if (e->kind != FVM_DOC_OBJECT)
            return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                                "a broadcast must be an object {\"name\", \"tensors\", "
                                "...}");
        const fvm_doc *name = member(r, e, ep, "name", FVM_DOC_STRING, "the broadcast value's name");
        if (!name)
            return FVM_ERR_FORMAT;
        if (!field || strcmp(field, name->u.str.s))
            return fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "broadcast '%s' is not field %zu of what '%s' takes last",
                                name->u.str.s, j, pl->ph.work->name);
        FVM_TRY(tensors_fit(r, e, ep, field, bt->u.strct.elems[j], fvm_arena_printf(a, "the broadcast '%s'", field)));
    }
    return FVM_OK;
}

/* client.state, in a plan whose client phase keeps the client's state
 * (and only there: the input of kind client_state and this member go
 * together): the input it is ("input"), the field of work's result that is
 * the new state ("output": client_state), its type and tensors, and the
 * function of the client program that makes a client's first state
 * ("initialize": ( -> C) or (key: u32[2] -> C)). */
static fvm_status client_state(rd *r, const fvm_doc *client)
{
    fvm_xdev_plan *pl = r->pl;
    fvm_arena *a = &pl->arena;
    const char *sp = "/client/state";
    int in = -1;
    for (int i = 0; i < pl->ph.ninputs; i++)
        if (pl->ph.inputs[i] == XDEV_CLIENT_STATE) {
            fvm_loc loc = at(r, client, "/client/inputs");
            if (in >= 0)
                return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "two inputs are the client's state ('%s' and '%s')",
                                    pl->ph.work->param_names[in], pl->ph.work->param_names[i]);
            in = i;
        }
    const fvm_doc *state = fvm_doc_get(client, "state");
    if (in < 0 && !state)
        return FVM_OK;
    fvm_loc loc = at(r, state ? state : client, state ? sp : "/client");
    if (in < 0)
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                            "the plan describes a client state, but no input of the client phase is of kind "
                            "client_state");
    if (!(state = member(r, client, "/client", "state", FVM_DOC_OBJECT, "the client's state")))
        return FVM_ERR_FORMAT;
    const fvm_doc *input = member(r, state, sp, "input", FVM_DOC_STRING, "the input that is the client's state"),
                  *output = member(r, state, sp, "output", FVM_DOC_STRING,
                                   "the field of work's result that is the "
                                   "client's new state");
    const fvm_func *init = phase_func(r, pl->ph.client, state, sp, "initialize", "a client's first state");
    if (!input || !output || !init)
        return FVM_ERR_FORMAT;
    if (strcmp(input->u.str.s, pl->ph.work->param_names[in])) {
        loc = at(r, input, fvm_pointer_join(a, sp, "input"));
        return fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "the client's state is the input '%s', not '%s'",
                            pl->ph.work->param_names[in], input->u.str.s);
    }
    if (strcmp(output->u.str.s, "client_state")) {
        loc = at(r, output, fvm_pointer_join(a, sp, "output"));
        return fvm_diag_add(r->d, FVM_ERR_NAME, &loc,
                            "the client's new state is the field 'client_state' of what '%s' returns, not '%s'",
                            pl->ph.work->name, output->u.str.s);
    }
    const fvm_type *c = unplaced(pl->ph.work->param_types[in]);
    loc = at(r, state, sp);
    if (init->federated || init->nparams > 1 || (init->nparams && !fvm_bind_is_key(init->param_types[0])) ||
        !fits(init->result_type, c) || !fits(c, init->result_type)) {
        char buf[256];
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the client's '%s' must take nothing or a key (u32[2]) and return a client's state, %s",
                            init->name, fvm_type_format(c, false, buf, sizeof buf));
    }
    pl->ph.client_state = c;
    pl->ph.init_client = init;
    FVM_TRY(type_fits(r, state, sp, "type", c, "the client's state's type"));
    return tensors_fit(r, state, sp, "", c, "the client's state");
}

static fvm_status read_client(rd *r, const fvm_doc *root)
{
    fvm_xdev_plan *pl = r->pl;
    const fvm_doc *client = member(r, root, "", "client", FVM_DOC_OBJECT, "the client phase");
    if (!client)
        return FVM_ERR_FORMAT;
    fvm_status s = load_program(r, "/client/program", &pl->ph.client);
    if (s)
        return s;
    if (!(pl->ph.work = phase_func(r, pl->ph.client, client, "/client", "work", "the client's function")))
        return FVM_ERR_NAME;
    static const char *const names[] = {"data", "client_key", "client_index", "client_state"};
    static const xdev_input_kind kinds[] = {XDEV_DATA, XDEV_CLIENT_KEY, XDEV_CLIENT_INDEX, XDEV_CLIENT_STATE};
    if ((s = inputs(r, client, "/client", pl->ph.work, 4, names, kinds, true, &pl->ph.ninputs, &pl->ph.inputs)))
        return s;
    fvm_loc loc = at(r, client, "/client");
    if (pl->ph.work->federated || pl->ph.work->nparams != pl->ph.ninputs + 1)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the client's '%s' must be a local function of the inputs and the broadcast (%d "
                            "parameters)",
                            pl->ph.work->name, pl->ph.ninputs + 1);
    FVM_TRY(client_state(r, client));
    FVM_TRY(broadcasts(r, client));
    FVM_TRY(outputs(r, client));
    return (pl->ph.sent = xdev_sent_type(&pl->arena, pl->ph.work->result_type)) ? FVM_OK : nomem(r->d);
}

/* ---- the server phase ------------------------------------------------------------ */

/* server.partial: the aggregation in stages, blocks of FVM_AGG_BLOCK
 * clients folded into partials <acc, secure>, merged and combined. */
static fvm_status read_partial(rd *r, const fvm_doc *server)
{
    fvm_xdev_plan *pl = r->pl;
    const char *pp = "/server/partial";
    const fvm_doc *part = member(r, server, "/server", "partial", FVM_DOC_OBJECT, "the aggregation in stages"),
                  *block = part ? member(r, part, pp, "block", FVM_DOC_INT, "the clients of a block") : NULL;
    if (!block)
        return FVM_ERR_FORMAT;
    pl->ph.partial = phase_func(r, pl->ph.server, part, pp, "function", "a block's partial aggregate");
    pl->ph.merge = phase_func(r, pl->ph.server, part, pp, "merge", "the merge of two accumulators");
    pl->ph.combine = phase_func(r, pl->ph.server, part, pp, "combine", "the partials combined");
    if (!pl->ph.partial || !pl->ph.merge || !pl->ph.combine)
        return FVM_ERR_NAME;
    fvm_loc loc = at(r, block, "/server/partial/block");
    if (block->u.i != FVM_AGG_BLOCK)
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "blocks of %lld clients; fedvm aggregates blocks of %d",
                            (long long)block->u.i, FVM_AGG_BLOCK);
    loc = at(r, part, pp);
    const fvm_type *ps = pl->ph.combine->nparams == 2 ? pl->ph.combine->param_types[1] : NULL, *pt;
    if (!ps || ps->kind != FVM_T_FED || ps->u.fed.pl != FVM_PL_CLIENTS ||
        (pt = ps->u.fed.member)->kind != FVM_T_STRUCT || pt->u.strct.n != 2 || fvm_type_field_index(pt, "acc") != 0 ||
        fvm_type_field_index(pt, "secure") != 1 || pl->ph.partial->nparams != 1 ||
        !fvm_type_equal(pl->ph.partial->param_types[0], pl->ph.aggregate->param_types[0]) ||
        pl->ph.merge->nparams != 2 || pl->ph.merge->federated ||
        !fvm_type_equal(pl->ph.combine->result_type, pl->ph.aggregate->result_type))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the partial aggregate's functions must be: '%s' the updates ({U}@CLIENTS) -> <acc, "
                            "secure>; '%s' (A, A) -> A; '%s' (A@SERVER, {<acc, secure>}@CLIENTS) -> <report, "
                            "secure>",
                            pl->ph.partial->name, pl->ph.merge->name, pl->ph.combine->name);
    if (!fits(pl->ph.partial->result_type, pt))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the server's '%s' must return the <acc, secure> that '%s' takes",
                            pl->ph.partial->name, pl->ph.combine->name);
    pl->ph.partial_type = pt;
    return tensors_fit(r, part, pp, "", pt, "a block's partial aggregate");
}

static fvm_status read_server(rd *r, const fvm_doc *root)
{
    fvm_xdev_plan *pl = r->pl;
    const fvm_doc *server = member(r, root, "", "server", FVM_DOC_OBJECT, "the server phase");
    if (!server)
        return FVM_ERR_FORMAT;
    fvm_status s = load_program(r, "/server/program", &pl->ph.server);
    if (s)
        return s;
    const char *sp = "/server";
    pl->ph.initialize = phase_func(r, pl->ph.server, server, sp, "initialize", "the server's initial state");
    pl->ph.prepare = phase_func(r, pl->ph.server, server, sp, "prepare", "what the server broadcasts");
    pl->ph.aggregate = phase_func(r, pl->ph.server, server, sp, "aggregate", "the aggregation of the updates");
    pl->ph.result = phase_func(r, pl->ph.server, server, sp, "result", "the new state and the metrics");
    if (!pl->ph.initialize || !pl->ph.prepare || !pl->ph.aggregate || !pl->ph.result)
        return FVM_ERR_NAME;
    static const char *const names[] = {"state", "round_key", "num_clients"};
    static const xdev_input_kind kinds[] = {XDEV_STATE, XDEV_ROUND_KEY, XDEV_NUM_CLIENTS};
    if ((s = inputs(r, server, sp, pl->ph.prepare, 3, names, kinds, false, &pl->ph.nserver, &pl->ph.server_inputs)))
        return s;
    fvm_loc loc = at(r, server, sp);
    const fvm_type *res = pl->ph.result->result_type, *agg = pl->ph.aggregate->result_type;
    const fvm_type *ws = pl->ph.aggregate->nparams == 1 ? pl->ph.aggregate->param_types[0] : NULL;
    bool once = pl->ph.nserver >= 1 && pl->ph.server_inputs[0] == XDEV_STATE;
    for (int i = 1; once && i < pl->ph.nserver; i++)
        for (int j = 0; j < i; j++)
            once = once && pl->ph.server_inputs[i] != pl->ph.server_inputs[j];
    if (!once || pl->ph.prepare->nparams != pl->ph.nserver)
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc,
                            "the server's inputs are the state, then the round key and the number of clients (each "
                            "at most once), and they are all of '%s''s parameters",
                            pl->ph.prepare->name);
    if (pl->ph.initialize->nparams > 1 ||
        (pl->ph.initialize->nparams && !fvm_bind_is_key(pl->ph.initialize->param_types[0])))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the server's '%s' takes nothing or a key",
                            pl->ph.initialize->name);
    if (!ws || ws->kind != FVM_T_FED || ws->u.fed.pl != FVM_PL_CLIENTS || ws->u.fed.all_equal ||
        agg->kind != FVM_T_STRUCT || agg->u.strct.n != 2)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the server's '%s' must take the updates ({U}@CLIENTS) and return <report, secure>",
                            pl->ph.aggregate->name);
    if (pl->ph.result->nparams != pl->ph.nserver + 2 || res->kind != FVM_T_STRUCT || res->u.strct.n != 2)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the server's '%s' must take the inputs, the report and the secure sums and return "
                            "<state, metrics>",
                            pl->ph.result->name);
    const fvm_type *st = pl->ph.initialize->result_type;
    pl->ph.state = st->kind == FVM_T_FED ? st->u.fed.member : st;
    pl->ph.metrics = res->u.strct.elems[1];
    /* one state throughout: initialize's and result's outputs are what prepare and result take */
    const fvm_type *in = unplaced(pl->ph.prepare->param_types[0]), *outs = unplaced(res->u.strct.elems[0]);
    bool same_inputs = true;
    for (int i = 0; i < pl->ph.nserver; i++)
        same_inputs = same_inputs && fits(pl->ph.prepare->param_types[i], pl->ph.result->param_types[i]) &&
                      fits(pl->ph.result->param_types[i], pl->ph.prepare->param_types[i]);
    if (!fits(pl->ph.state, in) || !fits(outs, in) || !same_inputs) {
        char a[256], b[256], c[256];
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the server's state must have one type: '%s' makes %s, '%s' takes %s and '%s' makes %s "
                            "(and takes the inputs '%s' takes)",
                            pl->ph.initialize->name, fvm_type_format(pl->ph.state, true, a, sizeof a),
                            pl->ph.prepare->name, fvm_type_format(in, true, b, sizeof b), pl->ph.result->name,
                            fvm_type_format(outs, true, c, sizeof c), pl->ph.prepare->name);
    }
    if (!fits(agg->u.strct.elems[0], pl->ph.result->param_types[pl->ph.nserver]) ||
        !fits(agg->u.strct.elems[1], pl->ph.result->param_types[pl->ph.nserver + 1]))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the server's '%s' must take what '%s' returns: <report, secure>",
                            pl->ph.result->name, pl->ph.aggregate->name);
    const fvm_doc *state = member(r, server, sp, "state", FVM_DOC_OBJECT, "the server state"),
                  *metrics = member(r, server, sp, "metrics", FVM_DOC_OBJECT, "the round's metrics");
    if (!state || !metrics)
        return FVM_ERR_FORMAT;
    const fvm_type *mt = unplaced(pl->ph.metrics);
    FVM_TRY(type_fits(r, state, "/server/state", "type", pl->ph.state, "the state's type"));
    FVM_TRY(tensors_fit(r, state, "/server/state", "", pl->ph.state, "the state"));
    FVM_TRY(type_fits(r, metrics, "/server/metrics", "type", mt, "the metrics' type"));
    return read_partial(r, server);
}

/* With both phases: what the server sends is what the client takes, and
 * what the client sends is what the server aggregates. */
static fvm_status phases_agree(rd *r, const fvm_doc *root)
{
    fvm_xdev_plan *pl = r->pl;
    const fvm_type *sent = unplaced(pl->ph.prepare->result_type),
                   *taken = pl->ph.work->param_types[pl->ph.work->nparams - 1],
                   *upd = pl->ph.aggregate->param_types[0]->u.fed.member, *res = pl->ph.work->result_type;
    fvm_loc loc = at(r, root, "");
    char a[256], b[256];
    if (!fits(sent, taken))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the server's '%s' sends %s, but the client's '%s' takes %s",
                            pl->ph.prepare->name, fvm_type_format(sent, true, a, sizeof a), pl->ph.work->name,
                            fvm_type_format(taken, true, b, sizeof b));
    /* what the client sends: its result without the new state, which it keeps */
    const fvm_type *sends = xdev_sent_type(&pl->arena, res);
    if (!sends)
        return nomem(r->d);
    if (!fits(sends, upd))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the client's '%s' sends %s, but the server's '%s' aggregates %s",
                            pl->ph.work->name, fvm_type_format(sends, true, a, sizeof a), pl->ph.aggregate->name,
                            fvm_type_format(upd, true, b, sizeof b));
    return FVM_OK;
}

/* ---- the plan ------------------------------------------------------------------- */

static void sha256_hex(const char *text, size_t len, char out[65])
{
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, (const uint8_t *)text);
    sha256_digest(&ctx, sizeof digest, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

fvm_status fvm_xdev_parse(const char *name, const char *text, size_t len, unsigned phases, fvm_xdev_plan **out,
                          fvm_diag *d)
{
    *out = NULL;
    fvm_xdev_plan *pl = calloc(1, sizeof *pl);
    if (!pl || !(pl->path = strdup(name))) {
        free(pl);
        return nomem(d);
    }
    rd r = {pl, d, text, len};
    fvm_doc *root = NULL;
    sha256_hex(text, len, pl->id);
    fvm_doc_src src = {.file = pl->path, .text = text, .len = len};
    fvm_status s = fvm_doc_parse(&pl->arena, &src, &root, d);
    if (s == FVM_OK && root->kind != FVM_DOC_OBJECT) {
        fvm_loc loc = at(&r, root, "");
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc,
                         "expected a cross-device plan (an object with \"plan\": %d), found %s", FVM_XDEV_VERSION,
                         kind_name(root->kind));
    }
    const fvm_doc *ver = s ? NULL : fvm_doc_get(root, "plan"), *kind = s ? NULL : fvm_doc_get(root, "kind");
    fvm_loc loc = at(&r, ver ? ver : root, ver ? "/plan" : "");
    if (s == FVM_OK && !ver)
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc,
                         "missing \"plan\": %d (the plan format version); a cross-device plan is written by "
                         "'fedplan PROGRAM --to cross-device'",
                         FVM_XDEV_VERSION);
    else if (s == FVM_OK && (ver->kind != FVM_DOC_INT || ver->u.i != FVM_XDEV_VERSION))
        s = ver->kind == FVM_DOC_INT
                ? fvm_diag_add(d, FVM_ERR_FORMAT, &loc,
                               "plan format version %lld; this fedvm reads version %d (write the plan again with "
                               "this version's fedplan)",
                               (long long)ver->u.i, FVM_XDEV_VERSION)
                : fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "the plan format version must be the integer %d, found %s",
                               FVM_XDEV_VERSION, kind_name(ver->kind));
    if (s == FVM_OK && (!kind || kind->kind != FVM_DOC_STRING || strcmp(kind->u.str.s, "cross-device"))) {
        loc = at(&r, kind ? kind : root, kind ? "/kind" : "");
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "expected \"kind\": \"cross-device\"%s%s",
                         kind && kind->kind == FVM_DOC_STRING ? ", found " : "",
                         kind && kind->kind == FVM_DOC_STRING ? kind->u.str.s : "");
    }
    if (s == FVM_OK && (phases & FVM_XDEV_CLIENT))
        s = read_client(&r, root);
    if (s == FVM_OK && (phases & FVM_XDEV_SERVER))
        s = read_server(&r, root);
    if (s == FVM_OK && (phases & FVM_XDEV_CLIENT) && (phases & FVM_XDEV_SERVER))
        s = phases_agree(&r, root);
    if (s) {
        fvm_xdev_close(pl);
        return s;
    }
    *out = pl;
    return FVM_OK;
}

fvm_status fvm_xdev_open(const char *path, unsigned phases, fvm_xdev_plan **out, fvm_diag *d)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    /* read once: the plan's id and its programs are of the same bytes */
    fvm_status s = fvm_file_read(path, "a cross-device plan", FVM_XDEV_MAX_PLAN, &text, &len, d);
    if (s == FVM_OK)
        s = fvm_xdev_parse(path, text, len, phases, out, d);
    free(text);
    return s;
}

void fvm_xdev_close(fvm_xdev_plan *pl)
{
    if (!pl)
        return;
    fvm_program_free(pl->ph.client);
    fvm_program_free(pl->ph.server);
    fvm_arena_free(&pl->arena);
    free(pl->path);
    free(pl);
}

const char *fvm_xdev_id(const fvm_xdev_plan *pl)
{
    return pl->id;
}

bool fvm_xdev_keeps_client_state(const fvm_xdev_plan *pl)
{
    return pl->ph.client_state != NULL;
}

/* ---- the files exchanged --------------------------------------------------------- */

static const char *writer_of(const char *kind)
{
    return !strcmp(kind, "state")          ? "'fedvm server PLAN init', 'aggregate' or 'merge'"
           : !strcmp(kind, "broadcast")    ? "'fedvm server PLAN prepare'"
           : !strcmp(kind, "partial")      ? "'fedvm device --partial'"
           : !strcmp(kind, "client_state") ? "'fedvm device --state' or '--state-dir'"
                                           : "'fedvm device'";
}

fvm_status xdev_load(const char *path, const char *kind, const fvm_xdev_plan *plan, fvm_safetensors **out, fvm_diag *d)
{
    fvm_status s = fvm_safetensors_load(path, out, d);
    if (s == FVM_OK && (s = xdev_kind(*out, path, kind, plan, d)) != FVM_OK) {
        fvm_safetensors_free(*out);
        *out = NULL;
    }
    return s;
}

fvm_status xdev_kind(const fvm_safetensors *f, const char *path, const char *kind, const fvm_xdev_plan *plan,
                     fvm_diag *d)
{
    fvm_status s = FVM_OK;
    fvm_loc loc = {.file = path};
    const char *k = fvm_safetensors_meta(f, XDEV_KIND), *id = fvm_safetensors_meta(f, XDEV_PLAN);
    if (!k || strcmp(k, kind))
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "%s%s%s, not a%s %s (the file %s writes)",
                         k ? (*k == 'u' ? "this is an " : "this is a ")
                           : "not a file of a cross-device plan (no fedvm.kind in its metadata)",
                         k ? k : "", k ? " file of a cross-device plan" : "", *kind == 'u' ? "n" : "", kind,
                         writer_of(kind));
    else if (plan && (!id || strcmp(id, plan->id)))
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this %s belongs to another plan (fedvm.plan %.16s...), not to %s (%.16s...)", kind,
                         id ? id : "not recorded", plan->path, plan->id);
    return s;
}

fvm_status xdev_meta_seed(const fvm_safetensors *f, const char *path, uint64_t *seed, fvm_diag *d)
{
    const char *v = fvm_safetensors_meta(f, XDEV_SEED);
    char *end = NULL;
    errno = 0;
    if (v && *v >= '0' && *v <= '9' && !(*v == '0' && v[1]) && (*seed = strtoull(v, &end, 10), !*end && !errno))
        return FVM_OK;
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: expected the run's seed (an integer), found %s",
                        XDEV_SEED, v ? v : "nothing");
}

/* A decimal integer exactly as fedvm writes one ("-"? and digits, no
 * leading zero, sign or space) in [lo, hi]. */
static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    const char *p = s + (*s == '-');
    if (*p < '0' || *p > '9' || (*p == '0' && p[1]))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

fvm_status xdev_meta_int(const fvm_safetensors *f, const char *path, const char *key, int64_t lo, int64_t hi,
                         int64_t *out, fvm_diag *d)
{
    const char *v = fvm_safetensors_meta(f, key);
    if (v && parse_int(v, lo, hi, out))
        return FVM_OK;
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: expected an integer from %lld to %lld, found %s%s%s",
                        key, (long long)lo, (long long)hi, v ? "'" : "", v ? v : "nothing", v ? "'" : "");
}

fvm_status xdev_meta_ints(const fvm_safetensors *f, const char *path, const char *key, int64_t lo, int64_t hi,
                          bool increasing, int64_t **out, int64_t *n, fvm_diag *d)
{
    *out = NULL;
    *n = 0;
    const char *v = fvm_safetensors_meta(f, key);
    fvm_loc loc = {.file = path};
    if (!v)
        return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s is missing", key);
    size_t cap = 1;
    for (const char *c = v; *c; c++)
        cap += *c == ',';
    char *copy = strdup(v);
    int64_t *vals = malloc(cap * sizeof *vals);
    if (!copy || !vals) {
        free(copy);
        free(vals);
        return nomem(d);
    }
    fvm_status s = FVM_OK;
    /* "1,5,9": no empty item, each an integer in range (and above the one before, when increasing) */
    for (char *tok = copy, *next; *copy && tok && !s; tok = next) {
        char *comma = strchr(tok, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        if (!parse_int(tok, lo, hi, &vals[*n]))
            s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: '%s' is not an integer from %lld to %lld", key, tok,
                             (long long)lo, (long long)hi);
        else if (increasing && *n > 0 && vals[*n] <= vals[*n - 1])
            s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: %lld after %lld; the list must be increasing", key,
                             (long long)vals[*n], (long long)vals[*n - 1]);
        else
            ++*n;
    }
    free(copy);
    if (s) {
        free(vals);
        *n = 0;
        return s;
    }
    *out = vals;
    return FVM_OK;
}
