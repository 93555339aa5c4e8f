/* check.c - the static checker: resolves names and functions, decodes attributes, applies the type
 * rules, enforces placements, rejects recursion, computes liveness and checks program conventions. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/doc.h"
#include "../transform/autodiff.h"
#include "../transform/fuse_plan.h"
#include "../transform/phases.h"
#include "rules.h"
#include "../core/suggest.h"

static const fvm_rule_fn rule_table[FVM_OP_COUNT] = {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) [FVM_OP_##ID] = RULE,
#include "ops.def"
#undef FVM_OP
};

enum { F_NEW, F_BUSY, F_DONE };

typedef struct checker {
    fvm_program *p;
    fvm_arena *a;
    fvm_diag *d;
    int errors;
    fvm_func *stack[FVM_MAX_CALL_DEPTH];
    int depth;
} checker;

/* ---- messages ------------------------------------------------------------- */

fvm_status fvm_rerr(fvm_rctx *c, int i, fvm_status code, const char *fmt, ...)
{
    const fvm_loc *l = &c->in->loc;
    if (i == FVM_RLOC_ATTRS)
        l = &c->in->attrs_loc;
    else if (i >= 0 && i < c->in->nargs)
        l = &c->in->arg_locs[i];
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fvm_diag_add(c->d, code, l, "%s: %s", fvm_op_table[c->in->op].name, msg);
}

const char *fvm_rtype(fvm_rctx *c, const fvm_type *t)
{
    const char *s = t ? fvm_type_str(c->a, t, true) : "?";
    return s ? s : "?";
}

static void cerr(checker *C, fvm_status code, const fvm_loc *l, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void cerr(checker *C, fvm_status code, const fvm_loc *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(C->d, code, l, fmt, ap);
    va_end(ap);
    C->errors++;
}

static const char *tstr(checker *C, const fvm_type *t)
{
    const char *s = fvm_type_str(C->a, t, true);
    return s ? s : "?";
}

/* ---- a small string -> slot map per function ---------------------------------- */

typedef struct scope {
    const char **keys;
    int *vals;
    size_t cap;
} scope;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool scope_init(scope *s, fvm_arena *a, size_t n)
{
    s->cap = 16;
    while (s->cap < 2 * n + 2)
        s->cap *= 2;
    s->keys = fvm_arena_array(a, s->cap, sizeof *s->keys);
    s->vals = fvm_arena_array(a, s->cap, sizeof *s->vals);
    return s->keys && s->vals;
}

static int scope_get(const scope *s, const char *k)
{
    for (size_t i = hash_str(k) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->keys[i])
            return -1;
        if (!strcmp(s->keys[i], k))
            return s->vals[i];
    }
}

static void scope_put(scope *s, const char *k, int v)
{
    size_t i = hash_str(k) & (s->cap - 1);
    while (s->keys[i] && strcmp(s->keys[i], k))
        i = (i + 1) & (s->cap - 1);
    s->keys[i] = k;
    s->vals[i] = v;
}

/* ---- attributes --------------------------------------------------------------- */

static void check_func(checker *C, fvm_func *f);

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


/* Resolves a function attribute; checks the callee first (so its signature is
 * known) and detects recursion through the stack of functions being checked. */
static fvm_func *resolve_fn(checker *C, fvm_instr *in, const fvm_doc *v, const fvm_loc *l, const char *attr)
{
    fvm_func *g = fvm_program_func(C->p, v->u.str.s);
    if (!g) {
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
    if (g->state == F_BUSY) {
        char chain[1024] = "";
        int from = 0;
        for (int i = 0; i < C->depth; i++)
            if (C->stack[i] == g)
                from = i;
        for (int i = from; i < C->depth; i++) {
            strncat(chain, C->stack[i]->name, sizeof chain - strlen(chain) - 1);
            strncat(chain, " -> ", sizeof chain - strlen(chain) - 1);
        }
        strncat(chain, g->name, sizeof chain - strlen(chain) - 1);
        cerr(C, FVM_ERR_CYCLE, l, "%s: recursion is not allowed: %s", fvm_op_table[in->op].name, chain);
        return NULL;
    }
    if (g->state == F_NEW) {
        if (C->depth == FVM_MAX_CALL_DEPTH) {
            cerr(C, FVM_ERR_LIMIT, l, "calls nest more than %d functions deep (through '%s')", FVM_MAX_CALL_DEPTH,
                 g->name);
            return NULL;
        }
        check_func(C, g);
    }
    return g;
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

/* Decodes each attribute of in into in->a, checking that the op takes it, its
 * JSON kind and its domain (attrs.def, op_attrs.def), and that the op's
 * required ones are there. Errors are located at the value at fault. */
static bool decode_attrs(checker *C, fvm_func *f, fvm_instr *in)
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
            *(fvm_func **)field = resolve_fn(C, in, v, &l, ai->name);
            if (!*(fvm_func **)field)
                ok = false;
            break;
        case FVM_AK_INT:
            if ((good = fvm_doc_integer(v, &iv) && in_bounds(dom, (double)iv)))
                *(int64_t *)field = iv;
            break;
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
        case FVM_AK_REAL: {
            double x = v->kind == FVM_DOC_INT ? (double)v->u.i : v->u.r;
            if ((good = (v->kind == FVM_DOC_REAL || v->kind == FVM_DOC_INT) && in_bounds(dom, x)))
                *(double *)field = x;
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
                cerr(C, FVM_ERR_FORMAT, &el, "%s: attribute '%s' must be %s; entry %d is %s", op->name, ai->name,
                     want, entry, found_text(e, found, sizeof found));
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
        cerr(C, FVM_ERR_FORMAT, &in->loc, "%s needs the attribute%s %s", op->name,
             (missing & (missing - 1)) ? "s" : "", attr_list(missing, list, sizeof list));
        ok = false;
    }
    (void)f;
    return ok;
}

/* ---- functions ------------------------------------------------------------------ */

static bool calls_federated(const fvm_instr *in)
{
    const fvm_attrs *a = &in->a;
    const fvm_func *fs[] = {a->fn, a->then_fn, a->else_fn, a->cond_fn, a->body_fn};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if (fs[i] && fs[i]->federated)
            return true;
    return false;
}

/* The deepest call chain below an instruction (0 when it calls nothing). */
static int callee_height(const fvm_instr *in)
{
    const fvm_attrs *a = &in->a;
    const fvm_func *fs[] = {a->fn, a->then_fn, a->else_fn, a->cond_fn, a->body_fn, a->accumulate, a->merge, a->report};
    int h = 0;
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if (fs[i] && fs[i]->height > h)
            h = fs[i]->height;
    return h;
}

static void name_suggest(checker *C, const fvm_func *f, int upto, const char *name, const fvm_loc *l,
                         const char *what)
{
    fvm_suggest s;
    fvm_suggest_init(&s, name);
    for (int i = 0; i < f->nparams; i++)
        fvm_suggest_add(&s, f->param_names[i]);
    for (int i = 0; i < upto; i++)
        if (f->instrs[i].name)
            fvm_suggest_add(&s, f->instrs[i].name);
    bool later = false;
    for (int i = upto; i < f->ninstrs; i++)
        if (f->instrs[i].name && !strcmp(f->instrs[i].name, name))
            later = true;
    if (later)
        cerr(C, FVM_ERR_NAME, l, "%s '%s' is used before the instruction that defines it", what, name);
    else if (s.best)
        cerr(C, FVM_ERR_NAME, l, "undefined name '%s' in %s; did you mean '%s'?", name, what, s.best);
    else
        cerr(C, FVM_ERR_NAME, l, "undefined name '%s' in %s (names are the function's parameters and earlier "
             "instructions)", name, what);
}

/* A function a type rule adds (a derived pullback or a generated helper). */
static fvm_status check_new(void *ctx, fvm_func *f)
{
    checker *C = ctx;
    if (f->state == F_NEW) {
        if (C->depth == FVM_MAX_CALL_DEPTH) {
            cerr(C, FVM_ERR_LIMIT, &f->loc, "derived functions nest more than %d deep", FVM_MAX_CALL_DEPTH);
            return FVM_ERR_LIMIT;
        }
        check_func(C, f);
    }
    return f->ok ? FVM_OK : FVM_ERR_TYPE;
}

static void check_instr(checker *C, fvm_func *f, int idx, scope *sc, const fvm_type **slot_types)
{
    fvm_instr *in = &f->instrs[idx];
    in->slot = f->nparams + idx;
    if (in->op == FVM_OP_COUNT || !in->arg_names) {
        /* Malformed (reported by the loader): bind its name, poisoned, so its
         * uses don't cascade into more errors. */
        slot_types[in->slot] = NULL;
        if (in->name && scope_get(sc, in->name) < 0)
            scope_put(sc, in->name, in->slot);
        return;
    }
    in->args = fvm_arena_array(C->a, (size_t)in->nargs + 1, sizeof(int));
    in->arg_types = fvm_arena_array(C->a, (size_t)in->nargs + 1, sizeof(fvm_type *));
    if (!in->args || !in->arg_types) {
        cerr(C, FVM_ERR_NOMEM, &in->loc, "out of memory");
        return;
    }
    const fvm_op_info *op = &fvm_op_table[in->op];
    bool ok = true;
    if (in->nargs < op->min_args || (op->max_args >= 0 && in->nargs > op->max_args)) {
        if (op->min_args == op->max_args)
            cerr(C, FVM_ERR_TYPE, &in->loc, "%s takes %d argument%s, found %d", op->name, op->min_args,
                 op->min_args == 1 ? "" : "s", in->nargs);
        else if (op->max_args < 0)
            cerr(C, FVM_ERR_TYPE, &in->loc, "%s takes at least %d argument%s, found %d", op->name, op->min_args,
                 op->min_args == 1 ? "" : "s", in->nargs);
        else
            cerr(C, FVM_ERR_TYPE, &in->loc, "%s takes %d to %d arguments, found %d", op->name, op->min_args,
                 op->max_args, in->nargs);
        ok = false;
    }
    for (int i = 0; i < in->nargs; i++) {
        in->args[i] = -1;
        if (!in->arg_names[i]) {
            ok = false;
            continue;
        }
        int s = scope_get(sc, in->arg_names[i]);
        if (s < 0) {
            name_suggest(C, f, idx, in->arg_names[i], &in->arg_locs[i], "an argument");
            ok = false;
            continue;
        }
        in->args[i] = s;
        in->arg_types[i] = slot_types[s];
        if (!slot_types[s])
            ok = false; /* its definition failed: already reported */
    }
    if (!decode_attrs(C, f, in))
        ok = false;
    if (ok && !(op->flags & OPF_PLACED)) {
        for (int i = 0; i < in->nargs; i++) {
            if (fvm_type_is_placed(in->arg_types[i])) {
                cerr(C, FVM_ERR_PLACEMENT, &in->arg_locs[i],
                     "%s: '%s' is placed (%s); %s operates on unplaced values: run it per client with "
                     "federated_map or on the server with federated_apply",
                     op->name, in->arg_names[i], tstr(C, in->arg_types[i]), op->name);
                ok = false;
                break;
            }
        }
    }
    if (ok) {
        fvm_rctx rc = {.a = C->a, .d = C->d, .p = C->p, .f = f, .in = in, .args = in->arg_types, .nargs = in->nargs,
                       .check_new = check_new, .check_ctx = C};
        const fvm_type *t = NULL;
        int before = C->d->n;
        fvm_status st = rule_table[in->op](&rc, &t);
        if (st != FVM_OK) {
            if (C->d->n == before)
                cerr(C, st, &in->loc, "%s: %s", op->name, st == FVM_ERR_NOMEM ? "out of memory" : "invalid operands");
            else
                C->errors += C->d->n - before;
            t = NULL;
        }
        in->type = t;
    }
    if ((op->flags & OPF_FED) || (in->type && fvm_type_is_placed(in->type)) || calls_federated(in))
        f->federated = true;
    slot_types[in->slot] = in->type;
    if (in->name) {
        int prev = scope_get(sc, in->name);
        if (prev >= 0) {
            const fvm_loc *pl = prev < f->nparams ? &f->param_name_locs[prev] : &f->instrs[prev - f->nparams].name_loc;
            cerr(C, FVM_ERR_NAME, &in->name_loc, "'%s' is already defined (at %d:%d); every instruction binds a new "
                 "name", in->name, pl->line, pl->col);
        } else {
            scope_put(sc, in->name, in->slot);
        }
    }
}

/* Last use of every slot: values are released right after it. */
static void liveness(checker *C, fvm_func *f)
{
    int *last = fvm_arena_array(C->a, (size_t)f->nslots + 1, sizeof(int));
    if (!last)
        return;
    for (int s = 0; s < f->nslots; s++)
        last[s] = -1;
    for (int i = 0; i < f->ninstrs; i++)
        for (int k = 0; k < f->instrs[i].nargs; k++)
            if (f->instrs[i].args && f->instrs[i].args[k] >= 0)
                last[f->instrs[i].args[k]] = i;
    if (f->result_slot >= 0)
        last[f->result_slot] = f->ninstrs; /* returned, never released here */
    int *count = fvm_arena_array(C->a, (size_t)f->ninstrs + 1, sizeof(int));
    if (!count)
        return;
    int unused_params = 0;
    for (int s = 0; s < f->nslots; s++) {
        if (last[s] >= 0 && last[s] < f->ninstrs)
            count[last[s]]++;
        else if (last[s] < 0 && s >= f->nparams)
            count[s - f->nparams]++; /* dead result: released right away */
        else if (last[s] < 0)
            unused_params++;
    }
    for (int i = 0; i < f->ninstrs; i++) {
        f->instrs[i].release = fvm_arena_array(C->a, (size_t)count[i] + 1, sizeof(int));
        if (!f->instrs[i].release)
            return;
    }
    f->param_release = fvm_arena_array(C->a, (size_t)unused_params + 1, sizeof(int));
    if (!f->param_release)
        return;
    for (int s = 0; s < f->nslots; s++) {
        if (last[s] >= 0 && last[s] < f->ninstrs) {
            fvm_instr *in = &f->instrs[last[s]];
            in->release[in->nrelease++] = s;
        } else if (last[s] < 0 && s >= f->nparams) {
            fvm_instr *in = &f->instrs[s - f->nparams];
            in->release[in->nrelease++] = s;
        } else if (last[s] < 0) {
            f->param_release[f->nparam_release++] = s;
        }
    }
}

static void check_func(checker *C, fvm_func *f)
{
    int errors_before = C->errors;
    bool params_ok = true;
    f->state = F_BUSY;
    C->stack[C->depth++] = f;
    f->nslots = f->nparams + f->ninstrs;
    f->result_slot = -1;
    const fvm_type **slot_types = fvm_arena_array(C->a, (size_t)f->nslots + 1, sizeof(fvm_type *));
    scope sc;
    if (!slot_types || !scope_init(&sc, C->a, (size_t)f->nslots)) {
        cerr(C, FVM_ERR_NOMEM, &f->loc, "out of memory");
        goto done;
    }
    for (int i = 0; i < f->nparams; i++) {
        slot_types[i] = f->param_types[i];
        if (!f->param_types[i])
            params_ok = false; /* its type string was reported by the loader */
        else if (fvm_type_is_placed(f->param_types[i]))
            f->federated = true;
        scope_put(&sc, f->param_names[i], i);
    }
    f->height = 1;
    for (int i = 0; i < f->ninstrs; i++) {
        check_instr(C, f, i, &sc, slot_types);
        int h = 1 + callee_height(&f->instrs[i]);
        if (h > f->height)
            f->height = h;
    }
    /* The same limit whatever order functions are declared (and checked) in. */
    if (f->height > FVM_MAX_CALL_DEPTH && C->depth == 1)
        cerr(C, FVM_ERR_LIMIT, &f->loc, "calls nest more than %d functions deep below '%s'", FVM_MAX_CALL_DEPTH,
             f->name);
    if (f->result_name) {
        int s = scope_get(&sc, f->result_name);
        if (s < 0) {
            name_suggest(C, f, f->ninstrs, f->result_name, &f->result_loc, "the result");
        } else {
            f->result_slot = s;
            f->result_type = slot_types[s];
        }
    }
done:
    /* The passes after checking see well-formed, fully typed functions only:
     * an instruction the loader could not read leaves the program's
     * load_errors set and its slot untyped. */
    f->ok = C->errors == errors_before && params_ok && f->result_type && !C->p->load_errors;
    if (f->ok) {
        liveness(C, f);
        f->phases = fvm_phases_plan(C->a, f);
        f->fusion = fvm_fusion_plan(C->a, f);
    }
    if (f->ok && fvm_type_is_placed(f->result_type))
        f->federated = true;
    C->depth--;
    f->state = F_DONE;
}

/* ---- program conventions --------------------------------------------------------- */

static void check_conventions(checker *C)
{
    fvm_func *init = fvm_program_func(C->p, "initialize"), *next = fvm_program_func(C->p, "next");
    fvm_func *eval = fvm_program_func(C->p, "evaluate");
    if (!next && !init)
        return; /* not iterative ('evaluate' alone is just a function) */
    if (next && !init) {
        cerr(C, FVM_ERR_FORMAT, &next->loc, "an iterative program with 'next' also needs 'initialize' ( -> S@SERVER)");
        return;
    }
    if (init && !next) {
        cerr(C, FVM_ERR_FORMAT, &init->loc, "an iterative program with 'initialize' also needs 'next'");
        return;
    }
    if (!init->ok || !next->ok || (eval && !eval->ok))
        return;
    const fvm_type *s = init->result_type, *k = init->nparams == 1 ? init->param_types[0] : NULL;
    if (k && k->kind == FVM_T_FED && k->u.fed.pl == FVM_PL_SERVER)
        k = k->u.fed.member;
    bool key_only = k && !strcmp(init->param_names[0], "key") && k->kind == FVM_T_TENSOR &&
                    k->u.tensor.dtype == FVM_DTYPE_U32 && k->u.tensor.dims.rank == 1 && k->u.tensor.dims.d[0] == 2;
    if ((init->nparams != 0 && !key_only) || s->kind != FVM_T_FED || s->u.fed.pl != FVM_PL_SERVER) {
        cerr(C, FVM_ERR_TYPE, &init->loc, "initialize must take no parameters (or only 'key': u32[2]) and return the "
             "server state S@SERVER; it is (%d parameters) -> %s", init->nparams, tstr(C, s));
        return;
    }
    if (next->nparams < 1 || !fvm_type_compatible(s, next->param_types[0])) {
        cerr(C, FVM_ERR_TYPE, &next->loc, "next's first parameter must be the state %s from initialize%s%s",
             tstr(C, s), next->nparams ? "; it is " : "", next->nparams ? tstr(C, next->param_types[0]) : "");
        return;
    }
    const fvm_type *r = next->result_type;
    if (r->kind != FVM_T_STRUCT || r->u.strct.n != 2 || !fvm_type_compatible(r->u.strct.elems[0], s) ||
        r->u.strct.elems[1]->kind != FVM_T_FED || r->u.strct.elems[1]->u.fed.pl != FVM_PL_SERVER) {
        cerr(C, FVM_ERR_TYPE, &next->result_loc, "next must return <state=%s, metrics=M@SERVER>; it returns %s",
             tstr(C, s), tstr(C, r));
        return;
    }
    if (eval && (eval->nparams < 1 || !fvm_type_compatible(s, eval->param_types[0])))
        cerr(C, FVM_ERR_TYPE, &eval->loc, "evaluate's first parameter must be the state %s", tstr(C, s));
}

fvm_status fvm_check(fvm_program *p, fvm_diag *d)
{
    checker C = {.p = p, .a = &p->arena, .d = d};
    for (int i = 0; i < p->nfuncs; i++)
        if (p->funcs[i]->state == F_NEW)
            check_func(&C, p->funcs[i]);
    if (C.errors == 0 && !p->load_errors)
        check_conventions(&C);
    if (C.errors == 0 && !p->load_errors)
        return FVM_OK;
    return d && d->n ? d->errs[0].code : FVM_ERR_TYPE;
}

fvm_status fvm_check_derive(fvm_program *p, const char *fn, const char *wrt, fvm_func **out, fvm_diag *d)
{
    *out = NULL;
    fvm_func *f = fvm_program_func(p, fn);
    if (!f)
        return fvm_diag_add(d, FVM_ERR_NAME, NULL, "no function '%s'", fn);
    if (!f->ok)
        return fvm_diag_add(d, FVM_ERR_USAGE, &f->loc, "function '%s' has not passed the checker", fn);
    int k = 0;
    if (wrt)
        while (k < f->nparams && strcmp(f->param_names[k], wrt))
            k++;
    if (k >= f->nparams || k >= 64)
        return fvm_diag_add(d, FVM_ERR_NAME, &f->loc, wrt ? "function '%s' has no parameter '%s'"
                                                          : "function '%s' has no parameter", fn, wrt);
    if (fvm_ad_check_wrt(f, k, d, &f->param_locs[k]))
        return FVM_ERR_TYPE;
    checker C = {.p = p, .a = &p->arena, .d = d};
    fvm_ad_env env = {.p = p, .d = d, .check = check_new, .ctx = &C, .where = &f->loc};
    return fvm_ad_pullback(&env, f, UINT64_C(1) << k, out);
}
