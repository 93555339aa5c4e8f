/* autodiff.c - differentiation of IR functions into IR functions: inlining, activity analysis, the
 * forward copy, the backward pass through the VJP rules, and forward mode as its transpose. */
#include "autodiff_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const fvm_vjp_fn vjp_table[FVM_OP_COUNT] = {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) [FVM_OP_##ID] = VJP,
#include "../ir/ops.def"
#undef FVM_OP
};

fvm_arena *fvm_ad_arena(fvm_ad *ad)
{
    return ad->a;
}

/* A name not yet bound in the function being built: base, or base#2, base#3... */
static const char *claim(fvm_ad *ad, const char *base)
{
    builder *b = ad->b;
    const char *s = base;
    for (int k = 2; fvm_names_get(&b->names, s, -1) >= 0; k++)
        if (!(s = fvm_arena_printf(ad->a, "%s#%d", base, k)))
            return NULL;
    return fvm_names_put(&b->names, s, 0) ? s : NULL;
}

void fvm_ad_nomem(fvm_ad *ad)
{
    if (!ad->failed)
        ad->status = fvm_diag_add(ad->env->d, FVM_ERR_NOMEM, ad->env->where, "out of memory while differentiating");
    ad->failed = true;
}

/* A function name not used in the program. */
static const char *func_name(fvm_ad *ad, const char *base)
{
    const char *s = base;
    for (int k = 2; s && fvm_program_func(ad->p, s); k++)
        s = fvm_arena_printf(ad->a, "%s#%d", base, k);
    return s;
}

fvm_status fvm_ad_begin(fvm_ad *ad, const char *base, int nparams, const char *const *names,
                        const fvm_type *const *types)
{
    fvm_arena *a = ad->a;
    builder *b = fvm_arena_alloc(a, sizeof *b);
    fvm_func *f = fvm_arena_alloc(a, sizeof *f);
    if (!b || !f)
        return fvm_ad_nomem(ad), FVM_ERR_NOMEM;
    b->f = f;
    fvm_names_init(&b->names, a, (size_t)nparams + 16);
    b->outer = ad->b;
    b->loc = ad->b ? ad->b->loc : ad->env->where;
    ad->b = b;
    f->name = func_name(ad, base);
    f->nparams = nparams;
    f->param_names = fvm_arena_array(a, (size_t)nparams + 1, sizeof(char *));
    f->param_types = fvm_arena_array(a, (size_t)nparams + 1, sizeof(fvm_type *));
    f->param_locs = fvm_arena_array(a, (size_t)nparams + 1, sizeof(fvm_loc));
    f->param_name_locs = fvm_arena_array(a, (size_t)nparams + 1, sizeof(fvm_loc));
    if (!f->name || !f->param_names || !f->param_types || !f->param_locs || !f->param_name_locs)
        return fvm_ad_nomem(ad), FVM_ERR_NOMEM;
    f->loc = *b->loc;
    for (int i = 0; i < nparams; i++) {
        f->param_names[i] = claim(ad, names[i]);
        f->param_types[i] = types[i];
        f->param_locs[i] = *b->loc;
        f->param_name_locs[i] = *b->loc;
        if (!f->param_names[i])
            return fvm_ad_nomem(ad), FVM_ERR_NOMEM;
    }
    return FVM_OK;
}

const char *fvm_ad_param(fvm_ad *ad, int i)
{
    return ad->b->f->param_names[i];
}

/* Appends 'name = op(args)' to the function being built. */
static const char *emit_named(fvm_ad *ad, const char *name, fvm_op op, const fvm_doc *attrs, int nargs,
                              const char *const *args)
{
    builder *b = ad->b;
    fvm_func *f = b->f;
    if (!name || ad->failed)
        return NULL;
    for (int i = 0; i < nargs; i++)
        if (!args[i])
            return NULL; /* an earlier emission failed */
    if (++ad->cache->emitted > FVM_AD_MAX_DERIVED) {
        ad->status = fvm_diag_add(ad->env->d, FVM_ERR_LIMIT, ad->env->where,
                                  "differentiating '%s' takes the code derived in this program past %d instructions "
                                  "(fedvm's limit on derived code, which bounds the memory of checking it); "
                                  "differentiate a smaller function, or fewer functions or parameters",
                                  ad->top->name, FVM_AD_MAX_DERIVED);
        ad->failed = true;
        return NULL;
    }
    if (f->ninstrs == b->cap) {
        int cap = b->cap ? b->cap * 2 : 32;
        fvm_instr *in = fvm_arena_array(ad->a, (size_t)cap, sizeof *in);
        if (!in)
            return fvm_ad_nomem(ad), NULL;
        if (f->ninstrs)
            memcpy(in, f->instrs, (size_t)f->ninstrs * sizeof *in);
        f->instrs = in;
        b->cap = cap;
    }
    fvm_instr *in = &f->instrs[f->ninstrs];
    memset(in, 0, sizeof *in);
    in->name = name;
    in->op = op;
    in->attrs = attrs;
    in->nargs = nargs;
    in->arg_names = fvm_arena_array(ad->a, (size_t)nargs + 1, sizeof(char *));
    in->arg_locs = fvm_arena_array(ad->a, (size_t)nargs + 1, sizeof(fvm_loc));
    if (!in->arg_names || !in->arg_locs)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < nargs; i++) {
        in->arg_names[i] = args[i];
        in->arg_locs[i] = *b->loc;
    }
    in->loc = in->name_loc = in->attrs_loc = *b->loc;
    f->ninstrs++;
    return name;
}

const char *fvm_ad_op(fvm_ad *ad, fvm_op op, fvm_doc *attrs, int nargs, const char *const *args)
{
    return emit_named(ad, claim(ad, ad->b->hint ? ad->b->hint : "t"), op, attrs, nargs, args);
}

fvm_func *fvm_ad_end(fvm_ad *ad, const char *result)
{
    builder *b = ad->b;
    fvm_func *f = b->f;
    ad->b = b->outer;
    if (ad->failed || !result)
        return NULL;
    f->result_name = result;
    f->result_loc = *b->loc;
    if (fvm_program_add_func(ad->p, f))
        return fvm_ad_nomem(ad), NULL;
    if (ad->env->check(ad->env->ctx, f)) {
        /* The checker said what is wrong; say where it came from. */
        fvm_diag_add(ad->env->d, FVM_ERR_TYPE, b->loc, "the derived function '%s' does not check", f->name);
        ad->failed = true;
        return NULL;
    }
    return f;
}

/* ---- emission helpers for the rules ------------------------------------------------ */

fvm_doc *fvm_ad_attrs(fvm_ad *ad)
{
    fvm_doc *o = fvm_doc_new(ad->a, FVM_DOC_OBJECT);
    if (!o)
        fvm_ad_nomem(ad);
    else
        o->flow = true;
    return o;
}

void fvm_ad_set_int(fvm_ad *ad, fvm_doc *o, const char *key, int64_t v)
{
    if (o && fvm_doc_set(ad->a, o, key, fvm_doc_int(ad->a, v)))
        fvm_ad_nomem(ad);
}

void fvm_ad_set_ints(fvm_ad *ad, fvm_doc *o, const char *key, const fvm_ints *v)
{
    fvm_doc *arr = fvm_doc_new(ad->a, FVM_DOC_ARRAY);
    if (!arr)
        return fvm_ad_nomem(ad);
    arr->flow = true;
    for (int i = 0; i < v->n; i++)
        if (fvm_doc_push(ad->a, arr, fvm_doc_int(ad->a, v->v[i])))
            return fvm_ad_nomem(ad);
    if (o && fvm_doc_set(ad->a, o, key, arr))
        fvm_ad_nomem(ad);
}

void fvm_ad_set_str(fvm_ad *ad, fvm_doc *o, const char *key, const char *s)
{
    if (o && fvm_doc_set(ad->a, o, key, fvm_doc_string(ad->a, s)))
        fvm_ad_nomem(ad);
}

void fvm_ad_set_bool(fvm_ad *ad, fvm_doc *o, const char *key, bool v)
{
    if (o && fvm_doc_set(ad->a, o, key, fvm_doc_bool(ad->a, v)))
        fvm_ad_nomem(ad);
}

fvm_doc *fvm_ad_copy_attrs(fvm_ad *ad, const fvm_instr *in, const char *const *keys)
{
    fvm_doc *o = fvm_ad_attrs(ad);
    for (int i = 0; o && keys[i]; i++) {
        fvm_doc *v = fvm_doc_get(in->attrs, keys[i]);
        if (v && fvm_doc_set(ad->a, o, keys[i], v))
            fvm_ad_nomem(ad);
    }
    return o;
}

const char *fvm_ad_const(fvm_ad *ad, double v, fvm_dtype dtype)
{
    fvm_doc *o = fvm_ad_attrs(ad);
    if (!o)
        return NULL;
    fvm_doc *val = fvm_dtype_is_float(dtype) ? fvm_doc_real(ad->a, v) : fvm_doc_int(ad->a, (int64_t)v);
    if (fvm_doc_set(ad->a, o, "value", val))
        return fvm_ad_nomem(ad), NULL;
    fvm_ad_set_str(ad, o, "dtype", fvm_dtype_name(dtype));
    return emit_named(ad, claim(ad, "c"), FVM_OP_CONST, o, 0, NULL);
}

fvm_status fvm_ad_error(fvm_vjp *v, const char *fmt, ...)
{
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fvm_diag_add(v->ad->env->d, FVM_ERR_TYPE, &v->in->loc, "cannot differentiate %s: %s", fvm_op_table[v->in->op].name,
                 msg);
    v->ad->failed = true;
    return FVM_ERR_TYPE;
}

/* ---- flattening: calls inlined ----------------------------------------------------------- */

typedef struct node {
    const fvm_instr *in;
    int *args; /* value ids: < nparams for the function's parameters, else nparams + node index */
    const char *base;
    bool varied, useful;
    const char *name, *aux;
} node;

typedef struct flat {
    node *nodes;
    int n, cap;
    int nparams;
    int inlined; /* instructions taken in by inlining (FVM_AD_MAX_INLINE) */
    fvm_arena scratch;
} flat;

static size_t ptr_hash(const void *p, size_t cap)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

/* f's number of instructions with every call inlined, or FVM_AD_MAX_INLINE + 1
 * when it is larger; remembered per function (the callees of a call tree are
 * counted once each, not once per path), -1 when out of memory. */
static int inline_size(fvm_ad *ad, const fvm_func *f)
{
    struct fvm_ad_cache *c = ad->cache;
    if (c->scap)
        for (size_t i = ptr_hash(f, c->scap); c->sizes[i].f; i = (i + 1) & (c->scap - 1))
            if (c->sizes[i].f == f)
                return c->sizes[i].size;
    int n = 0;
    for (int k = 0; k < f->ninstrs && n <= FVM_AD_MAX_INLINE; k++) {
        const fvm_instr *in = &f->instrs[k];
        int m = 1;
        if (in->op == FVM_OP_CALL) {
            m = inline_size(ad, in->a.fn);
        } else if (fvm_ad_is_deriv(in->op)) {
            const fvm_func *w = fvm_ad_deriv_fn(ad, in);
            m = w ? inline_size(ad, w) : -1;
        }
        if (m < 0)
            return -1;
        n += m;
    }
    if (n > FVM_AD_MAX_INLINE)
        n = FVM_AD_MAX_INLINE + 1;
    if (2 * (c->nsizes + 1) > c->scap) {
        size_t cap = c->scap ? 2 * c->scap : 64;
        size_entry *t = fvm_arena_array(ad->a, cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < c->scap; i++) {
            if (!c->sizes[i].f)
                continue;
            size_t j = ptr_hash(c->sizes[i].f, cap);
            while (t[j].f)
                j = (j + 1) & (cap - 1);
            t[j] = c->sizes[i];
        }
        c->sizes = t;
        c->scap = cap;
    }
    size_t j = ptr_hash(f, c->scap);
    while (c->sizes[j].f)
        j = (j + 1) & (c->scap - 1);
    c->sizes[j].f = f;
    c->sizes[j].size = n;
    c->nsizes++;
    return n;
}

/* f's instructions as nodes, calls inlined while the derived function stays
 * within FVM_AD_MAX_INLINE inlined instructions (within a callee taken in
 * whole, every call is). A call left in place is a node whose backward step
 * calls the callee's pullback (vjp_call). */
static bool flatten(fvm_ad *ad, flat *fl, const fvm_func *f, const int *argvals, const char *prefix, bool whole,
                    int *result)
{
    int *slot = fvm_arena_array(&fl->scratch, (size_t)f->nslots + 1, sizeof(int));
    if (!slot)
        return false;
    for (int i = 0; i < f->nparams; i++)
        slot[i] = argvals[i];
    for (int k = 0; k < f->ninstrs; k++) {
        const fvm_instr *in = &f->instrs[k];
        int *args = fvm_arena_array(&fl->scratch, (size_t)in->nargs + 1, sizeof(int));
        if (!args)
            return false;
        for (int j = 0; j < in->nargs; j++)
            args[j] = slot[in->args[j]];
        /* a call, or a derivative op as the function it computes (fvm_ad_deriv_fn) */
        const fvm_func *callee = in->op == FVM_OP_CALL ? in->a.fn : NULL;
        if (fvm_ad_is_deriv(in->op) && !(callee = fvm_ad_deriv_fn(ad, in)))
            return false;
        bool take = whole;
        if (callee && !whole) {
            int size = inline_size(ad, callee);
            if (size < 0)
                return false;
            if ((take = fl->inlined + size <= FVM_AD_MAX_INLINE))
                fl->inlined += size;
        }
        if (callee && take) {
            /* named after the call site: unique where one function is called twice */
            const char *pre = fvm_arena_printf(&fl->scratch, "%s%s/", prefix, in->name);
            if (!pre || !flatten(ad, fl, callee, args, pre, true, &slot[in->slot]))
                return false;
            continue;
        }
        if (fl->n == fl->cap) {
            int cap = fl->cap ? fl->cap * 2 : 64;
            node *ns = realloc(fl->nodes, (size_t)cap * sizeof *ns);
            if (!ns)
                return false;
            fl->nodes = ns;
            fl->cap = cap;
        }
        node *nd = &fl->nodes[fl->n];
        memset(nd, 0, sizeof *nd);
        nd->in = in;
        nd->args = args;
        nd->base = fvm_arena_printf(ad->a, "%s%s", prefix, in->name);
        if (!nd->base)
            return false;
        slot[in->slot] = fl->nparams + fl->n++;
    }
    *result = slot[f->result_slot];
    return true;
}

/* ---- the derivation ---------------------------------------------------------------------- */

/* A value's cotangent contributions: whole cotangents (field -1), or, from
 * the field instructions that read a struct, the cotangent of one field.
 * Field contributions are summed field by field and assembled into one
 * struct, instead of one struct per field read with zeros elsewhere (which
 * costs a pass over the whole struct per field: a model's weights, say). */
typedef struct cts {
    const char **v;
    int *field;
    int n, cap;
} cts;

static bool ct_push(cts *c, const char *name, int field)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 2;
        const char **v = realloc(c->v, (size_t)cap * sizeof *v);
        if (v)
            c->v = v;
        int *fl = realloc(c->field, (size_t)cap * sizeof *fl);
        if (fl)
            c->field = fl;
        if (!v || !fl)
            return false;
        c->cap = cap;
    }
    c->field[c->n] = field;
    c->v[c->n++] = name;
    return true;
}

/* The sum of a value's cotangent contributions (NULL when it has none); like
 * names the value itself (zeros for fields nothing read are shaped as it). */
static const char *ct_total(fvm_ad *ad, cts *c, const fvm_type *t, const char *like)
{
    if (!c->n)
        return NULL;
    const fvm_type *ct = fvm_type_cotangent(ad->a, t);
    if (!ct)
        return fvm_ad_nomem(ad), NULL;
    const char *sum = NULL;
    bool fields = false;
    for (int i = 0; i < c->n; i++)
        fields = fields || c->field[i] >= 0;
    if (fields) {
        int nf = ct->u.strct.n;
        const char **fs = fvm_arena_array(ad->a, (size_t)nf + 1, sizeof *fs);
        if (!fs)
            return fvm_ad_nomem(ad), NULL;
        for (int j = 0; j < nf; j++) {
            fs[j] = NULL;
            for (int i = 0; i < c->n; i++)
                if (c->field[i] == j)
                    fs[j] = fs[j] ? fvm_ad_add(ad, fs[j], c->v[i], ct->u.strct.elems[j]) : c->v[i];
            if (!fs[j])
                fs[j] = fvm_ad_zeros(ad, fvm_ad_field(ad, like, j), t->u.strct.elems[j]);
        }
        sum = fvm_ad_op(ad, FVM_OP_STRUCT, fvm_ad_names(ad, ct), nf, fs);
    }
    for (int i = 0; i < c->n; i++)
        if (c->field[i] < 0)
            sum = sum ? fvm_ad_add(ad, sum, c->v[i], ct) : c->v[i];
    c->n = 1;
    c->v[0] = sum;
    c->field[0] = -1;
    return sum;
}

/* Forward mode as the transpose of reverse mode (fvm_ad_jvp_of): the
 * derivation of pb = F.vjp(P) for its cotangent parameter u, built as
 *   F.jvp(P)(p1..pn, t) -> <value=R, tangent=ct(R)>
 * pb is linear in u, so its pullback for u at the cotangent <0, <t>> of its
 * result <value, grads> is J t, whatever u is: u stands for zeros shaped as
 * F's value, made where it is first used (after F's forward pass, which
 * precedes every use of u in pb). */
typedef struct jvp_mode {
    const fvm_func *f; /* F */
    int u; /* pb's cotangent parameter (its value id) */
    int like; /* the value id of F's result in pb */
    const char *u_name; /* the zeros standing for u, once made */
} jvp_mode;

static const char *value_name(fvm_ad *ad, const flat *fl, const fvm_func *pb, jvp_mode *jv, int v);

/* Does t have one shape whatever the values (tensors of known dims, placed
 * or in structs; no sequences)? */
static bool static_shape(const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_TENSOR:
        for (int i = 0; i < t->u.tensor.dims.rank; i++)
            if (t->u.tensor.dims.d[i] < 0)
                return false;
        return true;
    case FVM_T_FED:
        return static_shape(t->u.fed.member);
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (!static_shape(t->u.strct.elems[i]))
                return false;
        return true;
    default:
        return false;
    }
}

/* Zeros of t, a static_shape type, from constants: placed parts by
 * federated_value (all-equal at the clients), so that they depend on no
 * value of the function (no aggregation comes before them). */
static const char *const_zeros(fvm_ad *ad, const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR) {
        fvm_doc *o = fvm_ad_attrs(ad);
        fvm_dtype dt = t->u.tensor.dtype;
        fvm_doc *val = fvm_dtype_is_float(dt) ? fvm_doc_real(ad->a, 0.0)
                       : dt == FVM_DTYPE_BOOL ? fvm_doc_bool(ad->a, false)
                                              : fvm_doc_int(ad->a, 0);
        if (!o || fvm_doc_set(ad->a, o, "value", val))
            return fvm_ad_nomem(ad), NULL;
        fvm_ad_set_str(ad, o, "dtype", fvm_dtype_name(t->u.tensor.dtype));
        fvm_ints shape = {.n = t->u.tensor.dims.rank};
        for (int i = 0; i < shape.n; i++)
            shape.v[i] = t->u.tensor.dims.d[i];
        if (shape.n)
            fvm_ad_set_ints(ad, o, "shape", &shape);
        return fvm_ad_op(ad, FVM_OP_CONST, o, 0, NULL);
    }
    if (t->kind == FVM_T_FED) {
        fvm_doc *o = fvm_ad_attrs(ad);
        fvm_ad_set_str(ad, o, "placement", t->u.fed.pl == FVM_PL_SERVER ? "SERVER" : "CLIENTS");
        return FVM_AD(ad, FVM_OP_FEDERATED_VALUE, o, const_zeros(ad, t->u.fed.member));
    }
    int n = t->u.strct.n;
    const char **fs = fvm_arena_array(ad->a, (size_t)n + 1, sizeof *fs);
    if (!fs)
        return fvm_ad_nomem(ad), NULL;
    for (int i = 0; i < n; i++)
        fs[i] = const_zeros(ad, t->u.strct.elems[i]);
    return fvm_ad_op(ad, FVM_OP_STRUCT, fvm_ad_names(ad, t), n, fs);
}

static const char *u_zeros(fvm_ad *ad, const flat *fl, const fvm_func *pb, jvp_mode *jv)
{
    if (jv->u_name)
        return jv->u_name;
    const fvm_type *r = jv->f->result_type, *ct = fvm_type_cotangent(ad->a, r);
    const char *hint = ad->b->hint, *z;
    if (!ct)
        return fvm_ad_nomem(ad), NULL;
    ad->b->hint = "u";
    if (static_shape(r)) {
        z = const_zeros(ad, r);
    } else { /* shaped as F's value */
        const char *like = value_name(ad, fl, pb, jv, jv->like);
        z = like ? fvm_ad_zeros(ad, like, r) : NULL;
    }
    jv->u_name = fvm_ad_conform(ad, z, ct);
    ad->b->hint = hint;
    return jv->u_name;
}

/* Does in compute only what is linear in its varied arguments (elementwise
 * ops, the linear aggregations, calls of generated helpers), never a
 * value besides (as a call of a pullback returns the function's value)? */
static bool linear_op(fvm_ad *ad, const fvm_instr *in)
{
    if (fvm_op_table[in->op].flags & OPF_LIFT)
        return true;
    switch (in->op) {
    case FVM_OP_FEDERATED_BROADCAST:
    case FVM_OP_FEDERATED_SUM:
    case FVM_OP_FEDERATED_MEAN:
        return true;
    case FVM_OP_CALL:
    case FVM_OP_FEDERATED_MAP:
    case FVM_OP_FEDERATED_APPLY:
        for (const helper_entry *e = ad->cache->helpers; e; e = e->next)
            if (e->fn == in->a.fn)
                return strncmp(e->key, "deriv/", 6) != 0;
        return false;
    default:
        return false;
    }
}

/* Are all of t's leaves floats (so a value linear in u is zero with u)? */
static bool all_float(const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR)
        return fvm_dtype_is_float(t->u.tensor.dtype);
    if (t->kind == FVM_T_FED)
        return all_float(t->u.fed.member);
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (!all_float(t->u.strct.elems[i]))
            return false;
    return true;
}

/* Does t hold one value per client somewhere? */
static bool holds_clients(const fvm_type *t)
{
    if (t->kind == FVM_T_FED)
        return t->u.fed.pl == FVM_PL_CLIENTS;
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (holds_clients(t->u.strct.elems[i]))
            return true;
    return false;
}

static const char *value_name(fvm_ad *ad, const flat *fl, const fvm_func *pb, jvp_mode *jv, int v)
{
    if (jv && v == jv->u)
        return u_zeros(ad, fl, pb, jv);
    return v < fl->nparams ? pb->param_names[v] : fl->nodes[v - fl->nparams].name;
}

/* Copies the forward instructions that the result needs. A loop through
 * which a gradient flows becomes a scan that keeps its states (aux). */
static void emit_forward(fvm_ad *ad, flat *fl, const fvm_func *pb, jvp_mode *jv)
{
    for (int i = 0; i < fl->n && !ad->failed; i++) {
        node *nd = &fl->nodes[i];
        if (!nd->useful)
            continue;
        const fvm_instr *in = nd->in;
        const char **args = fvm_arena_array(ad->a, (size_t)in->nargs + 1, sizeof *args);
        if (!args)
            return fvm_ad_nomem(ad);
        ad->b->loc = &in->loc;
        bool loop = nd->varied && (in->op == FVM_OP_FORI || in->op == FVM_OP_SEQUENCE_REDUCE);
        if (jv && nd->varied && linear_op(ad, in) && all_float(in->type) && !holds_clients(in->type) &&
            static_shape(in->type)) {
            /* pb is linear in u, and these ops pass on only what is linear
             * in their varied arguments, so with u zero their value is zero:
             * a varied argument of their type stands for it (no instruction;
             * so no zero computed from an aggregation reaches the clients,
             * and a jvp of one round stays one round) */
            int k = 0;
            for (; k < in->nargs; k++) {
                int a = nd->args[k];
                bool varied = a < fl->nparams ? a == jv->u : fl->nodes[a - fl->nparams].varied;
                if (varied && fvm_type_equal(in->arg_types[k], in->type))
                    break;
            }
            if (k < in->nargs) {
                nd->name = value_name(ad, fl, pb, jv, nd->args[k]);
                continue;
            }
        }
        for (int k = 0; k < in->nargs; k++)
            args[k] = value_name(ad, fl, pb, jv, nd->args[k]);
        if (!loop) {
            nd->name = emit_named(ad, claim(ad, nd->base), in->op, in->attrs, in->nargs, args);
            if (nd->name) /* a derivative op (not inlined) or federated_select keeps what the passes derived */
                ad->b->f->instrs[ad->b->f->ninstrs - 1].derived = in->derived;
            continue;
        }
        bool fori = in->op == FVM_OP_FORI;
        const char *scan = emit_named(ad, claim(ad, fvm_arena_printf(ad->a, "%s.scan", nd->base)),
                                      fori ? FVM_OP_SCAN : FVM_OP_SEQUENCE_SCAN, in->attrs, in->nargs, args);
        fvm_doc *o1 = fvm_ad_attrs(ad), *o2 = fvm_ad_attrs(ad);
        fvm_ad_set_str(ad, o1, "name", fori ? "state" : "acc");
        fvm_ad_set_str(ad, o2, "name", fori ? "states" : "accs");
        nd->name = emit_named(ad, claim(ad, nd->base), FVM_OP_FIELD, o1, 1, &scan);
        nd->aux = emit_named(ad, claim(ad, fvm_arena_printf(ad->a, "%s.states", nd->base)), FVM_OP_FIELD, o2, 1, &scan);
    }
}

/* Equal types, but for dims known on one side only (and names given on one
 * side only): in particular all-equal T@CLIENTS and {T}@CLIENTS differ,
 * since their values differ (a member, a list). */
static bool same_type(const fvm_type *a, const fvm_type *b)
{
    return fvm_type_compatible(a, b) && fvm_type_compatible(b, a);
}

static bool mismatch(fvm_ad *ad, const fvm_func *pb, const char *what, const fvm_type *got, const fvm_type *want)
{
    char tw[256], tg[256];
    ad->status = fvm_diag_add(ad->env->d, FVM_ERR_TYPE, ad->env->where,
                              "internal error: the derived function '%s' gives %s the type %s, expected %s", pb->name,
                              what, got ? fvm_type_format(got, false, tg, sizeof tg) : "(none)",
                              fvm_type_format(want, false, tw, sizeof tw));
    ad->failed = true;
    return false;
}

/* The derived pullback must return f's value with f's result type and give
 * each chosen parameter a cotangent of type ct(T) (dims may be more or less
 * known), one value per client where the type says so: the rules' contract,
 * checked so a broken rule is reported where it shows, not as a wrong value
 * at run time. */
static bool grads_match(fvm_ad *ad, const fvm_func *f, uint64_t mask, const fvm_func *pb)
{
    const fvm_type *r = pb->result_type;
    bool pair = r && r->kind == FVM_T_STRUCT && r->u.strct.n == 2;
    const fvm_type *gs = pair ? r->u.strct.elems[1] : NULL, *value = pair ? r->u.strct.elems[0] : NULL;
    if (!value || !same_type(value, f->result_type))
        return mismatch(ad, pb, "the value", value, f->result_type);
    int k = 0;
    for (int i = 0; i < f->nparams; i++) {
        if (!(mask >> i & 1))
            continue;
        const fvm_type *want = fvm_type_cotangent(ad->a, f->param_types[i]);
        const fvm_type *got = gs && gs->kind == FVM_T_STRUCT && k < gs->u.strct.n ? gs->u.strct.elems[k] : NULL;
        k++;
        if (!want)
            return fvm_ad_nomem(ad), false;
        if (got && same_type(got, want))
            continue;
        const char *what = fvm_arena_printf(ad->a, "the cotangent of '%s'", f->param_names[i]);
        return mismatch(ad, pb, what ? what : "a cotangent", got, want);
    }
    return true;
}

/* Drops the instructions of the function being built that its result does
 * not need (jvp: pb's own cotangents of its parameters, and the zeros its
 * value's cotangent would get). */
static void prune(fvm_ad *ad, const char *result)
{
    fvm_func *f = ad->b->f;
    int n = f->ninstrs;
    fvm_names at; /* name -> its instruction, with room for all: binding never fails */
    fvm_names_init(&at, ad->a, (size_t)n);
    bool *live = calloc((size_t)n + 1, sizeof *live);
    if (!at.cap || !live) {
        free(live);
        return; /* nothing pruned: the function is right, only larger */
    }
    for (int i = 0; i < n; i++)
        (void)fvm_names_put(&at, f->instrs[i].name, i);
    /* SSA: an instruction's arguments come before it, so one pass from the
     * result back marks every instruction it needs */
    for (int i = n; i >= 0; i--) {
        if (i < n && !live[i])
            continue;
        int nargs = i == n ? 1 : f->instrs[i].nargs;
        for (int k = 0; k < nargs; k++) {
            int j = fvm_names_get(&at, i == n ? result : f->instrs[i].arg_names[k], -1);
            if (j >= 0)
                live[j] = true;
        }
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (live[i])
            f->instrs[m++] = f->instrs[i];
    f->ninstrs = m;
    free(live);
}

/* F.jvp(P) must return <value=R, tangent=ct(R)>, R F's result type. */
static bool tangent_matches(fvm_ad *ad, const fvm_func *f, const fvm_func *jf)
{
    const fvm_type *r = jf->result_type, *want = fvm_type_cotangent(ad->a, f->result_type);
    bool pair = r && r->kind == FVM_T_STRUCT && r->u.strct.n == 2;
    if (!want)
        return fvm_ad_nomem(ad), false;
    if (!pair || !same_type(r->u.strct.elems[0], f->result_type))
        return mismatch(ad, jf, "the value", pair ? r->u.strct.elems[0] : NULL, f->result_type);
    if (!same_type(r->u.strct.elems[1], want))
        return mismatch(ad, jf, "the tangent", r->u.strct.elems[1], want);
    return true;
}

/* A positional struct of names, for a result: {"names": [a, b]}. */
static fvm_doc *names2(fvm_ad *ad, const char *a, const char *b)
{
    fvm_doc *o = fvm_ad_attrs(ad), *arr = fvm_doc_new(ad->a, FVM_DOC_ARRAY);
    if (!arr || fvm_doc_push(ad->a, arr, fvm_doc_string(ad->a, a)) ||
        fvm_doc_push(ad->a, arr, fvm_doc_string(ad->a, b)) || !o || fvm_doc_set(ad->a, o, "names", arr))
        return fvm_ad_nomem(ad), NULL;
    arr->flow = true;
    return o;
}

/* The pullback of f for mask; with jv (f the pullback jv->f's, mask its
 * cotangent parameter), jv->f's forward derivative (see jvp_mode). */
static fvm_func *derive(fvm_ad *ad, fvm_func *f, uint64_t mask, jvp_mode *jv, bool aux)
{
    flat fl = {.nparams = f->nparams};
    fvm_func *pb = NULL;
    cts *ct = NULL;
    int nvals = 0, result = -1;
    int *ids = fvm_arena_array(&fl.scratch, (size_t)f->nparams + 1, sizeof(int));
    if (!ids)
        goto oom;
    for (int i = 0; i < f->nparams; i++)
        ids[i] = i;
    if (!flatten(ad, &fl, f, ids, "", false, &result))
        goto oom;
    nvals = fl.nparams + fl.n;

    /* Activity: varied (depends on a chosen parameter through ops that pass
     * gradients, and holds floats) and useful (reaches the result). */
    for (int i = 0; i < fl.n; i++) {
        node *nd = &fl.nodes[i];
        bool any = false;
        for (int k = 0; k < nd->in->nargs; k++) {
            int v = nd->args[k];
            any = any || (v < fl.nparams ? (mask >> v & 1) : fl.nodes[v - fl.nparams].varied);
        }
        nd->varied = any && vjp_table[nd->in->op] != vjp_none && nd->in->type && fvm_type_has_floats(nd->in->type);
    }
    if (result >= fl.nparams)
        fl.nodes[result - fl.nparams].useful = true;
    for (int i = fl.n - 1; i >= 0; i--)
        if (fl.nodes[i].useful)
            for (int k = 0; k < fl.nodes[i].in->nargs; k++)
                if (fl.nodes[i].args[k] >= fl.nparams)
                    fl.nodes[fl.nodes[i].args[k] - fl.nparams].useful = true;

    if (jv) { /* F's result in pb = <value, grads> (a struct instruction) */
        const node *r = result >= fl.nparams ? &fl.nodes[result - fl.nparams] : NULL;
        if (!r || r->in->op != FVM_OP_STRUCT || r->in->nargs != 2)
            goto oom; /* not a pullback: cannot happen */
        jv->like = r->args[0];
        jv->u = f->nparams - 1;
    }

    /* f'(params..., ct), or F.jvp(P)(params..., t) */
    if (jv) {
        const fvm_type *gs = f->result_type->u.strct.elems[1];
        const char *sel = strrchr(f->name, '(');
        const char *base = sel ? fvm_arena_printf(ad->a, "%s.jvp%s", jv->f->name, sel) : NULL;
        const char **pn = fvm_arena_array(&fl.scratch, (size_t)f->nparams + 1, sizeof *pn);
        const fvm_type **pt = fvm_arena_array(&fl.scratch, (size_t)f->nparams + 1, sizeof *pt);
        if (!base || !pn || !pt)
            goto oom;
        for (int i = 0; i < jv->u; i++) {
            pn[i] = f->param_names[i];
            pt[i] = f->param_types[i];
        }
        pn[jv->u] = "t";
        pt[jv->u] = gs->u.strct.elems[0];
        if (fvm_ad_begin(ad, base, f->nparams, pn, pt))
            goto oom;
    } else {
        const char **pn = fvm_arena_array(&fl.scratch, (size_t)f->nparams + 2, sizeof *pn);
        const fvm_type **pt = fvm_arena_array(&fl.scratch, (size_t)f->nparams + 2, sizeof *pt);
        if (!pn || !pt)
            goto oom;
        for (int i = 0; i < f->nparams; i++) {
            pn[i] = f->param_names[i];
            pt[i] = f->param_types[i];
        }
        pn[f->nparams] = "ct";
        /* has_aux: the cotangent of the value, field 0 of f's result, alone */
        pt[f->nparams] = fvm_type_cotangent(ad->a, aux ? f->result_type->u.strct.elems[0] : f->result_type);
        char sel[256] = "";
        for (int i = 0; i < f->nparams; i++)
            if (mask >> i & 1) {
                if (sel[0])
                    strncat(sel, ",", sizeof sel - strlen(sel) - 1);
                strncat(sel, f->param_names[i], sizeof sel - strlen(sel) - 1);
            }
        const char *base = fvm_arena_printf(ad->a, aux ? "%s.vjp_value(%s)" : "%s.vjp(%s)", f->name, sel);
        if (!pt[f->nparams] || !base || fvm_ad_begin(ad, base, f->nparams + 1, pn, pt))
            goto oom;
    }
    pb = ad->b->f;
    emit_forward(ad, &fl, pb, jv);

    /* Backward: each active instruction, last first, turns the cotangent of
     * its result into contributions to its arguments' cotangents. jvp: the
     * cotangent of pb's result is <0, <t>>, given as its field 1. */
    ct = calloc((size_t)nvals + 1, sizeof *ct);
    if (!ct)
        goto oom;
    if (jv) {
        ad->b->hint = "t";
        const char *t = fvm_ad_param(ad, jv->u), *ts = FVM_AD(ad, FVM_OP_STRUCT, NULL, t);
        if (!ts || !ct_push(&ct[result], ts, 1))
            goto oom;
    } else if (!ct_push(&ct[result], pb->param_names[f->nparams], aux ? 0 : -1)) {
        goto oom;
    }
    for (int i = fl.n - 1; i >= 0 && !ad->failed; i--) {
        node *nd = &fl.nodes[i];
        if (!nd->varied || !nd->useful)
            continue;
        const fvm_instr *in = nd->in;
        ad->b->loc = &in->loc;
        ad->b->hint = fvm_arena_printf(ad->a, "d.%s", nd->name);
        cts *mine = &ct[fl.nparams + i];
        bool by_field = in->op == FVM_OP_STRUCT && mine->n > 0;
        for (int k = 0; by_field && k < mine->n; k++)
            by_field = mine->field[k] >= 0;
        if (by_field) {
            /* a struct read field by field (cts): each field's cotangent
             * goes to its argument, with no struct assembled in between */
            for (int k = 0; k < mine->n; k++) {
                int a = nd->args[mine->field[k]];
                bool wanted = a < fl.nparams ? (mask >> a & 1) : fl.nodes[a - fl.nparams].varied;
                if (wanted && !ct_push(&ct[a], mine->v[k], -1))
                    goto oom;
            }
            continue;
        }
        const char *c = ct_total(ad, mine, in->type, nd->name);
        if (!c)
            continue;
        if (vjp_table[in->op] == vjp_unsupported) {
            fvm_vjp v = {.ad = ad, .in = in};
            const char *why = fvm_vjp_unsupported_why(in->op);
            fvm_ad_error(&v, "it does not pass gradients (a gradient was asked through '%s')%s%s", in->name,
                         why ? "; " : "", why ? why : "");
            break;
        }
        if (in->op == FVM_OP_FIELD && in->arg_types[0]->kind == FVM_T_STRUCT) {
            /* the struct's cotangent, one field at a time (see cts) */
            int a = nd->args[0];
            bool wanted = a < fl.nparams ? (mask >> a & 1) : fl.nodes[a - fl.nparams].varied;
            if (wanted && !ct_push(&ct[a], c, (int)in->a.index))
                goto oom;
            continue;
        }
        int n = in->nargs;
        bool *want = calloc((size_t)n + 1, sizeof *want);
        const char **x = calloc((size_t)n + 1, sizeof *x), **dx = calloc((size_t)n + 1, sizeof *dx);
        if (!want || !x || !dx) {
            free(want), free(x), free(dx);
            goto oom;
        }
        for (int k = 0; k < n; k++) {
            int a = nd->args[k];
            want[k] = a < fl.nparams ? (mask >> a & 1) : fl.nodes[a - fl.nparams].varied;
            x[k] = value_name(ad, &fl, pb, jv, a);
        }
        fvm_vjp v = {.ad = ad, .in = in, .x = x, .y = nd->name, .aux = nd->aux, .ct = c, .want = want, .dx = dx};
        bool ok = vjp_table[in->op](&v) == FVM_OK;
        for (int k = 0; ok && k < n; k++)
            if (want[k] && dx[k] && !ct_push(&ct[nd->args[k]], dx[k], -1))
                ok = false;
        free(want), free(x), free(dx);
        if (!ok && !ad->failed)
            goto oom;
    }

    /* jvp: <value, tangent> */
    if (!ad->failed && jv) {
        ad->b->loc = ad->env->where;
        ad->b->hint = "tangent";
        const fvm_type *r = jv->f->result_type, *rt = fvm_type_cotangent(ad->a, r);
        const char *like = value_name(ad, &fl, pb, jv, jv->like);
        const char *tan = ct_total(ad, &ct[jv->u], f->param_types[jv->u], u_zeros(ad, &fl, pb, jv));
        if (!rt)
            goto oom;
        tan = fvm_ad_conform(ad, tan ? tan : fvm_ad_zeros(ad, like, r), rt);
        const char *res = FVM_AD(ad, FVM_OP_STRUCT, names2(ad, "value", "tangent"), fvm_ad_conform(ad, like, r), tan);
        if (res)
            prune(ad, res);
        if ((pb = fvm_ad_end(ad, res)) && !tangent_matches(ad, jv->f, pb))
            pb = NULL;
        goto done;
    }
    /* <value, grads=<one cotangent per chosen parameter>> */
    if (!ad->failed) {
        ad->b->loc = ad->env->where;
        ad->b->hint = "grad";
        int ng = 0;
        const char *gs[64];
        for (int i = 0; i < f->nparams; i++) {
            if (!(mask >> i & 1))
                continue;
            const char *g = ct_total(ad, &ct[i], f->param_types[i], pb->param_names[i]);
            const fvm_type *want = fvm_type_cotangent(ad->a, f->param_types[i]);
            if (!want)
                goto oom;
            gs[ng++] = g ? fvm_ad_conform(ad, g, want) : fvm_ad_zeros(ad, pb->param_names[i], f->param_types[i]);
        }
        const char *grads = fvm_ad_op(ad, FVM_OP_STRUCT, NULL, ng, gs);
        fvm_doc *o = names2(ad, "value", "grads");
        if (!o)
            goto oom;
        /* inlined calls may leave the value all-equal where f's result is one per client */
        const char *value = fvm_ad_conform(ad, value_name(ad, &fl, pb, NULL, result), f->result_type);
        const char *res = FVM_AD(ad, FVM_OP_STRUCT, o, value, grads);
        if ((pb = fvm_ad_end(ad, res)) && !grads_match(ad, f, mask, pb))
            pb = NULL;
    } else {
        ad->b = ad->b->outer;
        pb = NULL;
    }
    goto done;
oom:
    fvm_ad_nomem(ad);
    if (pb && ad->b && ad->b->f == pb)
        ad->b = ad->b->outer;
    pb = NULL;
done:
    for (int i = 0; ct && i < nvals; i++)
        free(ct[i].v), free(ct[i].field);
    free(ct);
    free(fl.nodes);
    fvm_arena_free(&fl.scratch);
    return pb;
}

/* g's pullback (or, jvp, its forward derivative) for mask, derived once. */
static fvm_func *derived_of(fvm_ad *ad, fvm_func *g, uint64_t mask, bool jvp, bool aux)
{
    for (pb_entry *e = ad->cache->pullbacks; e; e = e->next)
        if (e->f == g && e->mask == mask && e->jvp == jvp && e->aux == aux)
            return e->pb;
    if (ad->depth >= FVM_MAX_CALL_DEPTH) {
        if (!ad->failed)
            ad->status = fvm_diag_add(ad->env->d, FVM_ERR_LIMIT, ad->env->where, "derivations nest more than %d deep",
                                      FVM_MAX_CALL_DEPTH);
        ad->failed = true;
        return NULL;
    }
    fvm_func *pb = NULL;
    if (jvp) {
        jvp_mode jv = {.f = g};
        fvm_func *back = derived_of(ad, g, mask, false, false);
        ad->depth++;
        pb = back ? derive(ad, back, UINT64_C(1) << (back->nparams - 1), &jv, false) : NULL;
        ad->depth--;
    } else {
        ad->depth++;
        pb = derive(ad, g, mask, NULL, aux);
        ad->depth--;
    }
    pb_entry *e = pb ? fvm_arena_alloc(ad->a, sizeof *e) : NULL;
    if (pb && !e)
        return fvm_ad_nomem(ad), NULL;
    if (e) {
        e->f = g;
        e->mask = mask;
        e->jvp = jvp;
        e->aux = aux;
        e->pb = pb;
        e->next = ad->cache->pullbacks;
        ad->cache->pullbacks = e;
    }
    return pb;
}

fvm_func *fvm_ad_pullback_of(fvm_ad *ad, fvm_func *g, uint64_t mask)
{
    return derived_of(ad, g, mask, false, false);
}

static fvm_status start(const fvm_ad_env *env, fvm_func *f, uint64_t mask, bool jvp, fvm_func **out)
{
    fvm_ad ad = {.env = env, .p = env->p, .a = &env->p->arena, .top = f};
    if (!env->p->ad && !(env->p->ad = fvm_arena_alloc(ad.a, sizeof *env->p->ad)))
        return fvm_diag_add(env->d, FVM_ERR_NOMEM, env->where, "out of memory");
    ad.cache = env->p->ad;
    *out = derived_of(&ad, f, mask, jvp, !jvp && env->has_aux);
    if (*out)
        return FVM_OK;
    if (!ad.failed)
        fvm_diag_add(env->d, FVM_ERR_TYPE, env->where, "cannot differentiate '%s'", f->name);
    return ad.status ? ad.status : FVM_ERR_TYPE;
}

fvm_status fvm_ad_pullback(const fvm_ad_env *env, fvm_func *f, uint64_t mask, fvm_func **out)
{
    return start(env, f, mask, false, out);
}

fvm_status fvm_ad_jvp(const fvm_ad_env *env, fvm_func *f, uint64_t mask, fvm_func **out)
{
    return start(env, f, mask, true, out);
}
