/* ir_attrs.c - instruction attributes from their documents into typed fields, by the tables of
 * vm/ir/attrs.def and vm/ir/op_attrs.def; const values into tensors. */
#include "ir_read.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/core/suggest.h"
#include "value_doc.h"

typedef struct dec {
    const fvm_program *p;
    fvm_arena *a;
    fvm_diag *d;
} dec;

static bool cerr(dec *C, fvm_status code, const fvm_loc *l, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reports an error; false, for 'ok = cerr(...)'. */
static bool cerr(dec *C, fvm_status code, const fvm_loc *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(C->d, code, l, fmt, ap);
    va_end(ap);
    return false;
}

static const char *attr_list(uint64_t mask, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < FVM_ATTR_COUNT; i++) {
        if (!(mask & (UINT64_C(1) << i)))
            continue;
        if (buf[0])
            strncat(buf, ", ", n - strlen(buf) - 1);
        strncat(buf, fvm_attr_table[i].name, n - strlen(buf) - 1);
    }
    return buf;
}

/* A bound or a value as text: whole numbers without a fraction. */
static void num_text(double x, char buf[32])
{
    if (x == trunc(x) && fabs(x) < 0x1p53)
        snprintf(buf, 32, "%lld", (long long)x);
    else
        fvm_format_real(buf, x, false);
}

static bool in_bounds(const fvm_attr_domain *dom, double x)
{
    if (dom->has_min && !(dom->min_open ? x > dom->min : x >= dom->min))
        return false;
    if (dom->has_max && !(dom->max_open ? x < dom->max : x <= dom->max))
        return false;
    return true;
}

/* Whether s is one of the '|'-separated values of list. */
static bool in_list(const char *list, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = list;;) {
        const char *e = strchr(p, '|');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, s, n))
            return true;
        if (!e)
            return false;
        p = e + 1;
    }
}

/* "a, b or c" (each quoted when quote) from the '|'-separated list. */
static void alternatives(const char *list, bool quote, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (const char *p = list; len < n;) {
        const char *e = strchr(p, '|');
        int k = (int)(e ? (size_t)(e - p) : strlen(p));
        const char *sep = p == list ? "" : e ? ", " : " or ";
        len += (size_t)snprintf(buf + len, n - len, quote ? "%s\"%.*s\"" : "%s%.*s", sep, k, p);
        if (!e)
            break;
        p = e + 1;
    }
}

/* What an attribute of this kind and domain must be: "an integer from 1 to 64". */
static const char *want_text(fvm_attr_kind kind, const fvm_attr_domain *dom, char *buf, size_t n)
{
    char b[96] = "", lo[32], hi[32], alts[200];
    num_text(dom->min, lo);
    num_text(dom->max, hi);
    const char *ge = dom->min_open ? ">" : ">=", *le = dom->max_open ? "<" : "<=";
    if (dom->has_min && dom->has_max && !dom->min_open && !dom->max_open)
        snprintf(b, sizeof b, " from %s to %s", lo, hi);
    else if (dom->has_min && dom->has_max)
        snprintf(b, sizeof b, " %s %s and %s %s", ge, lo, le, hi);
    else if (dom->has_min)
        snprintf(b, sizeof b, " %s %s", ge, lo);
    else if (dom->has_max)
        snprintf(b, sizeof b, " %s %s", le, hi);
    switch (kind) {
    case FVM_AK_FUNC:
        return "a function name (a string)";
    case FVM_AK_INT:
        snprintf(buf, n, "an integer%s", b);
        return buf;
    case FVM_AK_REAL:
        snprintf(buf, n, "a number%s", b);
        return buf;
    case FVM_AK_BOOL:
        return "true or false";
    case FVM_AK_INTS: {
        int nlo = dom->has_len ? dom->min_len : 0, nhi = dom->has_len ? dom->max_len : FVM_MAX_RANK;
        if (nlo == nhi)
            snprintf(buf, n, "a list of %d integer%s%s", nlo, nlo == 1 ? "" : "s", b);
        else if (nlo == 0)
            snprintf(buf, n, "a list of at most %d integers%s", nhi, b);
        else
            snprintf(buf, n, "a list of %d to %d integers%s", nlo, nhi, b);
        return buf;
    }
    case FVM_AK_DTYPE:
        alternatives(dom->one_of ? dom->one_of : "bool|u8|i32|i64|u32|f32|f64", false, alts, sizeof alts);
        snprintf(buf, n, "a dtype: %s", alts);
        return buf;
    case FVM_AK_PLACEMENT:
        return "a placement: \"SERVER\" or \"CLIENTS\"";
    case FVM_AK_STRING:
        if (!dom->one_of)
            return "a string";
        alternatives(dom->one_of, true, buf, n);
        return buf;
    case FVM_AK_STRINGS:
        return "a list of distinct identifiers";
    case FVM_AK_VALUE:
        return "a value";
    }
    return "?";
}

/* What was found instead, for messages: "3", "\"same\"", "a list of 3 entries". */
static const char *found_text(const fvm_doc *v, char *buf, size_t n)
{
    char num[32];
    switch (v->kind) {
    case FVM_DOC_NULL:
        return "null";
    case FVM_DOC_BOOL:
        return v->u.b ? "true" : "false";
    case FVM_DOC_INT:
        snprintf(buf, n, "%lld", (long long)v->u.i);
        return buf;
    case FVM_DOC_REAL:
        fvm_format_real(num, v->u.r, false);
        snprintf(buf, n, "%s", num);
        return buf;
    case FVM_DOC_STRING:
        for (size_t i = 0; i < v->u.str.len; i++)
            if ((unsigned char)v->u.str.s[i] < 0x20 || v->u.str.s[i] == 0x7f)
                return "a string";
        if (v->u.str.len > 40)
            return "a string";
        snprintf(buf, n, "\"%s\"", v->u.str.s);
        return buf;
    case FVM_DOC_ARRAY:
        snprintf(buf, n, "a list of %zu entr%s", v->u.coll.n, v->u.coll.n == 1 ? "y" : "ies");
        return buf;
    case FVM_DOC_OBJECT:
        return "an object";
    }
    return "?";
}

/* The function a FUNC attribute names, from the program's namespace; an
 * error with a suggestion when there is none. */
static fvm_func *find_fn(dec *C, const fvm_instr *in, const fvm_doc *v, const fvm_loc *l, const char *attr)
{
    fvm_func *g = fvm_program_func(C->p, v->u.str.s);
    if (g)
        return g;
    fvm_suggest s;
    fvm_suggest_init(&s, v->u.str.s);
    for (int i = 0; i < C->p->nfuncs; i++)
        fvm_suggest_add(&s, C->p->funcs[i]->name);
    if (s.best)
        cerr(C, FVM_ERR_NAME, l, "%s: %s names an undefined function '%s'; did you mean '%s'?",
             fvm_op_table[in->op].name, attr, v->u.str.s, s.best);
    else
        cerr(C, FVM_ERR_NAME, l, "%s: %s names an undefined function '%s'", fvm_op_table[in->op].name, attr,
             v->u.str.s);
    return NULL;
}

/* The hyperparameter named name, or NULL after an error at l with a suggestion. */
static fvm_hparam *find_hparam(dec *C, const char *name, const fvm_loc *l, const char *what)
{
    fvm_hparam *h = fvm_program_hparam(C->p, name);
    if (h)
        return h;
    fvm_suggest s;
    fvm_suggest_init(&s, name);
    for (int i = 0; i < C->p->nhparams; i++)
        fvm_suggest_add(&s, C->p->hparams[i]->name);
    if (s.best)
        cerr(C, FVM_ERR_NAME, l, "%s names an undeclared hyperparameter '%s'; did you mean '%s'?", what, name, s.best);
    else
        cerr(C, FVM_ERR_NAME, l, "%s names an undeclared hyperparameter '%s' (declare it in the program's \"hparams\")",
             what, name);
    return NULL;
}

/* An integer or real attribute written as {"hparam": name}: the
 * hyperparameter's bound value (a scalar; an integer one for INT) into *x.
 * 0: not a reference; 1: *x set; -1: an error, reported. */
static int hparam_ref(dec *C, const fvm_instr *in, const fvm_attr_info *ai, const fvm_doc *v, const fvm_loc *l,
                      double *x)
{
    if (v->kind != FVM_DOC_OBJECT || v->u.coll.n != 1 || strcmp(v->u.coll.keys[0]->u.str.s, "hparam"))
        return 0;
    const fvm_doc *nm = v->u.coll.items[0];
    fvm_loc nl = {l->file, nm->line, nm->col, fvm_pointer_join(C->a, l->ptr, "hparam")};
    if (nm->kind != FVM_DOC_STRING)
        return cerr(C, FVM_ERR_FORMAT, &nl, "%s: {\"hparam\": ...} in attribute '%s' must name a hyperparameter",
                    fvm_op_table[in->op].name, ai->name),
               -1;
    char what[96];
    snprintf(what, sizeof what, "%s: attribute '%s'", fvm_op_table[in->op].name, ai->name);
    const fvm_hparam *h = find_hparam(C, nm->u.str.s, &nl, what);
    if (!h)
        return -1;
    if (!h->bound)
        return -1; /* its declaration or value is at fault, reported */
    bool isint = fvm_dtype_is_int(h->value.dtype);
    if (h->value.shape.rank != 0 || !(isint || (ai->kind == FVM_AK_REAL && fvm_dtype_is_float(h->value.dtype)))) {
        char buf[64];
        cerr(C, FVM_ERR_TYPE, &nl, "%s: hyperparameter '%s' is %s; attribute '%s' needs %s scalar",
             fvm_op_table[in->op].name, h->name, fvm_type_format(h->type, true, buf, sizeof buf), ai->name,
             ai->kind == FVM_AK_INT ? "an integer" : "a number");
        return -1;
    }
    *x = isint ? (double)fvm_tensor_get_i64(&h->value, 0) : fvm_tensor_get_f64(&h->value, 0);
    return 1;
}

/* Decodes each attribute of in into in->a, checking that the op takes it, its
 * JSON kind and its domain (attrs.def, op_attrs.def), and that the op's
 * required ones are there. Errors are located at the value at fault. */
/* The member "loc" of any op's attributes: "FILE:LINE", where a generator made the instruction. */
static bool decode_origin(dec *C, fvm_instr *in, const fvm_doc *v, const fvm_loc *l)
{
    const char *s = v->kind == FVM_DOC_STRING ? v->u.str.s : NULL;
    const char *colon = s ? strrchr(s, ':') : NULL;
    char *end = NULL;
    long line = colon && colon > s && colon[1] >= '0' && colon[1] <= '9' ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || !end || *end || line < 1 || line > INT32_MAX) {
        char found[64];
        return cerr(C, FVM_ERR_FORMAT, l,
                    "%s: 'loc' must be a string FILE:LINE (where a generator made the instruction), found %s",
                    fvm_op_table[in->op].name, found_text(v, found, sizeof found));
    }
    const char *file = fvm_arena_strndup(C->a, s, (size_t)(colon - s));
    if (!file)
        return cerr(C, FVM_ERR_NOMEM, l, "out of memory");
    in->origin = (fvm_loc){file, (int)line, 0, NULL};
    return true;
}

static bool decode(dec *C, fvm_instr *in)
{
    const fvm_op_info *op = &fvm_op_table[in->op];
    const fvm_doc *o = in->attrs;
    bool ok = true;
    char list[512];
    for (size_t k = 0; o && k < o->u.coll.n; k++) {
        const fvm_doc *key = o->u.coll.keys[k], *v = o->u.coll.items[k];
        const char *ptr = fvm_pointer_join(C->a, in->attrs_loc.ptr, key->u.str.s);
        fvm_loc l = {in->loc.file, v->line, v->col, ptr};
        fvm_loc kl = {in->loc.file, key->line, key->col, ptr};
        if (strcmp(key->u.str.s, "loc") == 0) {
            ok = decode_origin(C, in, v, &l) && ok;
            continue;
        }
        fvm_attr_id id = fvm_attr_lookup(key->u.str.s);
        if (id == FVM_ATTR_COUNT || !(op->attrs & (UINT64_C(1) << id))) {
            fvm_suggest s;
            fvm_suggest_init(&s, key->u.str.s);
            for (int i = 0; i < FVM_ATTR_COUNT; i++)
                if (op->attrs & (UINT64_C(1) << i))
                    fvm_suggest_add(&s, fvm_attr_table[i].name);
            if (!op->attrs)
                cerr(C, FVM_ERR_FORMAT, &kl, "%s takes no attributes, found '%s'", op->name, key->u.str.s);
            else if (s.best)
                cerr(C, FVM_ERR_FORMAT, &kl, "%s has no attribute '%s'; did you mean '%s'?", op->name, key->u.str.s,
                     s.best);
            else
                cerr(C, FVM_ERR_FORMAT, &kl, "%s has no attribute '%s' (it takes: %s)", op->name, key->u.str.s,
                     attr_list(op->attrs, list, sizeof list));
            ok = false;
            continue;
        }
        const fvm_attr_info *ai = &fvm_attr_table[id];
        const fvm_attr_domain *dom = fvm_attr_domain_of(in->op, id);
        char *field = (char *)&in->a + ai->offset;
        bool good = true;
        int entry = -1; /* the entry of a list at fault, if one is */
        int64_t iv = 0;
        switch (ai->kind) {
        case FVM_AK_FUNC:
            if (v->kind != FVM_DOC_STRING) {
                good = false;
                break;
            }
            *(fvm_func **)field = find_fn(C, in, v, &l, ai->name);
            if (!*(fvm_func **)field)
                ok = false;
            else if (!in->fn_locs && !(in->fn_locs = fvm_arena_array(C->a, FVM_NFUNC_ATTRS, sizeof(fvm_loc))))
                ok = cerr(C, FVM_ERR_NOMEM, &l, "out of memory");
            else
                in->fn_locs[id] = l;
            break;
        case FVM_AK_INT:
        case FVM_AK_REAL: {
            double x = 0;
            int ref = hparam_ref(C, in, ai, v, &l, &x);
            if (ref < 0) {
                ok = false;
                continue;
            }
            if (ref > 0) { /* {"hparam": name}: its value, in the attribute's domain */
                if (!in_bounds(dom, x)) {
                    char want[256], got[32];
                    num_text(x, got);
                    cerr(C, FVM_ERR_FORMAT, &l, "%s: attribute '%s' must be %s; hyperparameter '%s' is %s", op->name,
                         ai->name, want_text(ai->kind, dom, want, sizeof want), v->u.coll.items[0]->u.str.s, got);
                    ok = false;
                    continue;
                }
                if (ai->kind == FVM_AK_INT)
                    *(int64_t *)field = (int64_t)x;
                else
                    *(double *)field = x;
            } else if (ai->kind == FVM_AK_INT) {
                if ((good = fvm_doc_integer(v, &iv) && in_bounds(dom, (double)iv)))
                    *(int64_t *)field = iv;
            } else {
                x = v->kind == FVM_DOC_INT ? (double)v->u.i : v->u.r;
                if ((good = (v->kind == FVM_DOC_REAL || v->kind == FVM_DOC_INT) && in_bounds(dom, x)))
                    *(double *)field = x;
            }
            break;
        }
        case FVM_AK_BOOL:
            if ((good = v->kind == FVM_DOC_BOOL))
                *(bool *)field = v->u.b;
            break;
        case FVM_AK_INTS: {
            fvm_ints *ints = (fvm_ints *)field;
            size_t n = v->kind == FVM_DOC_ARRAY ? v->u.coll.n : 0;
            good = v->kind == FVM_DOC_ARRAY && n <= FVM_MAX_RANK &&
                   (!dom->has_len || (n >= (size_t)dom->min_len && n <= (size_t)dom->max_len));
            for (size_t i = 0; good && i < n; i++) {
                if (!(good = fvm_doc_integer(v->u.coll.items[i], &iv) && in_bounds(dom, (double)iv)))
                    entry = (int)i;
                else
                    ints->v[ints->n++] = iv;
            }
            break;
        }
        case FVM_AK_DTYPE:
            good = v->kind == FVM_DOC_STRING && fvm_dtype_parse(v->u.str.s, v->u.str.len, (fvm_dtype *)field) &&
                   (!dom->one_of || in_list(dom->one_of, fvm_dtype_name(*(fvm_dtype *)field)));
            break;
        case FVM_AK_PLACEMENT:
            good = v->kind == FVM_DOC_STRING && (!strcmp(v->u.str.s, "SERVER") || !strcmp(v->u.str.s, "CLIENTS"));
            if (good)
                *(fvm_placement *)field = !strcmp(v->u.str.s, "SERVER") ? FVM_PL_SERVER : FVM_PL_CLIENTS;
            break;
        case FVM_AK_STRING:
            if ((good = v->kind == FVM_DOC_STRING && (!dom->one_of || in_list(dom->one_of, v->u.str.s))))
                *(const char **)field = v->u.str.s;
            break;
        case FVM_AK_STRINGS: {
            fvm_strings *ss = (fvm_strings *)field;
            good = v->kind == FVM_DOC_ARRAY;
            if (good)
                ss->v = fvm_arena_array(C->a, v->u.coll.n + 1, sizeof(char *));
            for (size_t i = 0; good && ss->v && i < v->u.coll.n; i++) {
                const fvm_doc *it = v->u.coll.items[i];
                good = it->kind == FVM_DOC_STRING && fvm_is_identifier(it->u.str.s);
                for (int j = 0; good && j < ss->n; j++)
                    good = strcmp(ss->v[j], it->u.str.s) != 0;
                if (good)
                    ss->v[ss->n++] = it->u.str.s;
            }
            break;
        }
        case FVM_AK_VALUE:
            *(const fvm_doc **)field = v;
            break;
        }
        if (!good) {
            char want[256], found[64];
            want_text(ai->kind, dom, want, sizeof want);
            if (entry >= 0) {
                const fvm_doc *e = v->u.coll.items[entry];
                fvm_loc el = {in->loc.file, e->line, e->col, fvm_pointer_index(C->a, ptr, (size_t)entry)};
                cerr(C, FVM_ERR_FORMAT, &el, "%s: attribute '%s' must be %s; entry %d is %s", op->name, ai->name, want,
                     entry, found_text(e, found, sizeof found));
            } else {
                cerr(C, FVM_ERR_FORMAT, &l, "%s: attribute '%s' must be %s, found %s", op->name, ai->name, want,
                     found_text(v, found, sizeof found));
            }
            ok = false;
            continue;
        }
        in->a.present |= UINT64_C(1) << id;
    }
    uint64_t missing = op->required & ~in->a.present;
    /* A bad value was reported already; only report what is truly absent. */
    for (size_t k = 0; o && k < o->u.coll.n; k++) {
        fvm_attr_id id = fvm_attr_lookup(o->u.coll.keys[k]->u.str.s);
        if (id != FVM_ATTR_COUNT)
            missing &= ~(UINT64_C(1) << id);
    }
    if (missing) {
        cerr(C, FVM_ERR_FORMAT, &in->loc, "%s needs the attribute%s %s", op->name, (missing & (missing - 1)) ? "s" : "",
             attr_list(missing, list, sizeof list));
        ok = false;
    }
    return ok;
}

/* hparam: the hyperparameter's bound value (fvm_program_load binds them before decoding). */
static bool decode_hparam(dec *C, fvm_instr *in)
{
    const char *ptr = fvm_pointer_join(C->a, in->attrs_loc.ptr ? in->attrs_loc.ptr : "", "name");
    const fvm_doc *nm = fvm_doc_get(in->attrs, "name");
    fvm_loc l = {in->loc.file, nm ? nm->line : in->loc.line, nm ? nm->col : in->loc.col, ptr};
    const fvm_hparam *h = find_hparam(C, in->a.name, &l, "hparam");
    if (!h || !h->bound)
        return false;
    fvm_tensor_release(&in->konst);
    in->konst = h->value;
    fvm_tensor_retain(&in->konst);
    return true;
}

/* const: the value as a tensor of its dtype and shape. */
static bool decode_const(dec *C, fvm_instr *in)
{
    const fvm_attrs *a = &in->a;
    const char *ptr = fvm_pointer_join(C->a, in->attrs_loc.ptr ? in->attrs_loc.ptr : "", "value");
    return fvm_tensor_from_doc(a->value, (a->present & A(DTYPE)) != 0, a->dtype,
                               (a->present & A(SHAPE)) ? &a->shape : NULL, in->loc.file, ptr, &in->konst,
                               C->d) == FVM_OK;
}

fvm_status fvm_ir_decode_attrs(const fvm_program *p, fvm_arena *a, fvm_instr *in, fvm_diag *d)
{
    dec C = {.p = p, .a = a, .d = d};
    memset(&in->a, 0, sizeof in->a);
    in->attrs_bad = false;
    if (in->op == FVM_OP_COUNT || (in->literal && !in->attrs))
        return FVM_OK; /* malformed: reported by the loader; a literal's const: the checker's */
    int before = d->n;
    bool ok = decode(&C, in) && (in->op != FVM_OP_CONST || decode_const(&C, in)) &&
              (in->op != FVM_OP_HPARAM || decode_hparam(&C, in));
    in->attrs_bad = !ok;
    if (ok)
        return FVM_OK;
    return d->n > before ? d->errs[before].code : FVM_ERR_FORMAT;
}
