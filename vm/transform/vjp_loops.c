/* vjp_loops.c - the reverse-mode rules of the ops that run functions: calls, derivatives, cond, loops,
 * sequences and key selection; their backward passes walk sequences, so they differentiate again. */
#include <string.h>

#include "autodiff.h"

#define OP(op, attrs, ...) FVM_AD(v->ad, FVM_OP_##op, attrs, __VA_ARGS__)

static void set(fvm_vjp *v, int k, const char *g)
{
    if (v->want[k])
        v->dx[k] = g;
}

static const char *fn_op(fvm_vjp *v, fvm_op op, const fvm_func *fn, int n, const char *const *args)
{
    if (!fn)
        return NULL;
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ad_set_str(v->ad, o, "fn", fn->name);
    return fvm_ad_op(v->ad, op, o, n, args);
}

static const char *field_index(fvm_vjp *v, const char *s, int i)
{
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ad_set_int(v->ad, o, "index", i);
    return OP(FIELD, o, s);
}

static const char *field_name(fvm_vjp *v, const char *s, const char *name)
{
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ad_set_str(v->ad, o, "name", name);
    return OP(FIELD, o, s);
}

/* The grads of a call of a pullback (field 'grads' of its result). */
static const char *grads_of(fvm_vjp *v, const fvm_func *pb, int n, const char *const *args)
{
    return field_name(v, fn_op(v, FVM_OP_CALL, pb, n, args), "grads");
}

fvm_func *fvm_vjp_pullback_for(fvm_vjp *v, fvm_func *fn, int first_arg, int shift, uint64_t always)
{
    uint64_t mask = always;
    for (int k = first_arg; k < v->in->nargs; k++)
        if (v->want[k])
            mask |= UINT64_C(1) << (k + shift);
    return fvm_ad_pullback_of(v->ad, fn, mask);
}

/* The grads of a pullback's result, and the positions of the wanted arguments
 * in it (in parameter order). */
static void take_grads(fvm_vjp *v, const char *grads, int first_arg, int pos0)
{
    int pos = pos0;
    for (int k = first_arg; k < v->in->nargs; k++)
        if (v->want[k])
            v->dx[k] = field_index(v, grads, pos++);
}

/* ---- calls and derivatives -------------------------------------------------------------------- */

/* A call of fn that the derivation did not inline (autodiff.h): fn's
 * pullback, derived once and shared by all its calls. */
static fvm_status call_back(fvm_vjp *v, fvm_func *fn)
{
    fvm_func *pb = fvm_vjp_pullback_for(v, fn, 0, 0, 0);
    if (!pb)
        return FVM_ERR_TYPE;
    int n = v->in->nargs;
    const char **args = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)n + 2, sizeof *args);
    if (!args)
        return FVM_ERR_NOMEM;
    for (int k = 0; k < n; k++)
        args[k] = v->x[k];
    args[n] = v->ct;
    take_grads(v, grads_of(v, pb, n + 1, args), 0, 0);
    return FVM_OK;
}

fvm_status vjp_call(fvm_vjp *v)
{
    return call_back(v, v->in->a.fn);
}

fvm_status vjp_deriv(fvm_vjp *v)
{
    /* grad, value_and_grad, vjp, jvp: the function the op computes (a call of
     * the derivative it took), differentiated as a call: second derivatives */
    fvm_func *w = fvm_ad_deriv_fn(v->ad, v->in);
    return w ? call_back(v, w) : FVM_ERR_TYPE;
}

fvm_status vjp_cond(fvm_vjp *v)
{
    fvm_func *t = fvm_vjp_pullback_for(v, v->in->a.then_fn, 1, -1, 0);
    fvm_func *e = fvm_vjp_pullback_for(v, v->in->a.else_fn, 1, -1, 0);
    if (!t || !e)
        return FVM_ERR_TYPE;
    int n = v->in->nargs;
    const char **args = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)n + 2, sizeof *args);
    if (!args)
        return FVM_ERR_NOMEM;
    for (int k = 0; k < n; k++)
        args[k] = v->x[k];
    args[n] = v->ct;
    fvm_doc *o = fvm_ad_attrs(v->ad);
    fvm_ad_set_str(v->ad, o, "then", t->name);
    fvm_ad_set_str(v->ad, o, "else", e->name);
    const char *r = fvm_ad_op(v->ad, FVM_OP_COND, o, n + 1, args);
    take_grads(v, field_name(v, r, "grads"), 1, 0);
    return FVM_OK;
}

/* ---- loops: a backward pass is a sequence_reduce over the kept states, from the last ---------- */

/* The carry of a backward pass: <lead..., ct of the state, ct of each wanted
 * extra argument (arguments first_extra..nargs-1)>, lead an i32 counter for
 * fori and scan (nlead 1), none for the sequence folds. */
static const fvm_type *carry_type(fvm_vjp *v, int nlead, const fvm_type *state, int first_extra)
{
    fvm_arena *a = fvm_ad_arena(v->ad);
    const fvm_type **es = fvm_arena_array(a, (size_t)v->in->nargs + 3, sizeof *es);
    if (!es)
        return NULL;
    int n = 0;
    if (nlead)
        es[n++] = fvm_type_scalar(a, FVM_DTYPE_I32);
    es[n++] = fvm_type_cotangent(a, state);
    for (int k = first_extra; k < v->in->nargs; k++)
        if (v->want[k])
            es[n++] = fvm_type_cotangent(a, v->in->arg_types[k]);
    return fvm_type_struct(a, n, NULL, es);
}

/* In a backward body: the next carry from the carry and the grads of the
 * body's pullback (the state's first, then the wanted extras'): the lead
 * counter minus 1, the state's cotangent (plus 'plus', a cotangent kept for
 * the state, or NULL), the extras' added up. */
static const char *next_carry(fvm_vjp *v, const char *carry, int nlead, const char *grads, const char *plus,
                              const fvm_type *ct)
{
    int n = ct->u.strct.n;
    const char **fs = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)n + 1, sizeof *fs);
    if (!fs)
        return NULL;
    if (nlead)
        fs[0] = OP(SUB, NULL, field_index(v, carry, 0), fvm_ad_const(v->ad, 1, FVM_DTYPE_I32));
    const char *cs = field_index(v, grads, 0);
    fs[nlead] = plus ? fvm_ad_add(v->ad, cs, plus, ct->u.strct.elems[nlead]) : cs;
    for (int i = nlead + 1; i < n; i++)
        fs[i] = fvm_ad_add(v->ad, field_index(v, carry, i), field_index(v, grads, i - nlead), ct->u.strct.elems[i]);
    return fvm_ad_op(v->ad, FVM_OP_STRUCT, NULL, n, fs);
}

/* The first carry, in the function being differentiated: <lead, ct, zeros
 * for the wanted extras>. */
static const char *first_carry(fvm_vjp *v, const char *lead, const char *ct, int first_extra)
{
    const char **fs = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)v->in->nargs + 3, sizeof *fs);
    if (!fs)
        return NULL;
    int n = 0;
    if (lead)
        fs[n++] = lead;
    fs[n++] = ct;
    for (int k = first_extra; k < v->in->nargs; k++)
        if (v->want[k])
            fs[n++] = fvm_ad_zeros(v->ad, v->x[k], v->in->arg_types[k]);
    return fvm_ad_op(v->ad, FVM_OP_STRUCT, NULL, n, fs);
}

/* Begins a backward body BODY.backward(carry, e, extras...) over the elements
 * e of type et; its extras are the op's arguments first_extra.., named after
 * fn's parameters from first_param. */
static fvm_status begin_body(fvm_vjp *v, const fvm_func *fn, const fvm_type *carry, const char *ename,
                             const fvm_type *et, int first_extra, int first_param)
{
    fvm_arena *a = fvm_ad_arena(v->ad);
    int nx = v->in->nargs - first_extra, np = 2 + nx;
    const char **pn = fvm_arena_array(a, (size_t)np, sizeof *pn);
    const fvm_type **pt = fvm_arena_array(a, (size_t)np, sizeof *pt);
    const char *base = fvm_arena_printf(a, "%s.backward", fn->name);
    if (!pn || !pt || !base || !carry || !et)
        return FVM_ERR_NOMEM;
    pn[0] = "carry", pt[0] = carry;
    pn[1] = ename, pt[1] = et;
    for (int k = 0; k < nx; k++)
        pn[2 + k] = fn->param_names[first_param + k], pt[2 + k] = v->in->arg_types[first_extra + k];
    return fvm_ad_begin(v->ad, base, np, pn, pt) ? FVM_ERR_TYPE : FVM_OK;
}

/* The op's extra arguments (first_extra..), after 'lead' values, as the
 * arguments of a loop over the backward body. */
static const char **loop_args(fvm_vjp *v, int nlead, int first_extra)
{
    int nx = v->in->nargs - first_extra;
    const char **fa = fvm_arena_array(fvm_ad_arena(v->ad), (size_t)(nlead + nx) + 1, sizeof *fa);
    if (!fa)
        return NULL;
    for (int k = 0; k < nx; k++)
        fa[nlead + k] = v->x[first_extra + k];
    return fa;
}

/* fori and scan: fn(i, state, extras...) run n times from init (argument 0),
 * the states each iteration started with kept in 'states'. ct_state is the
 * final state's cotangent, ct_states (or NULL) a cotangent for each kept
 * state (scan's second result). Backward: a sequence_reduce over the states
 * from the last (with their cotangents), the carry <i, ct of the state, ct
 * of each wanted extra> starting at <n-1, ct_state, zeros>; each step calls
 * fn's pullback at (i, state_i, extras) and counts i down. */
static fvm_status loop_back(fvm_vjp *v, const char *ct_state, const char *states, const char *ct_states)
{
    fvm_func *body = v->in->a.fn;
    fvm_arena *a = fvm_ad_arena(v->ad);
    int nx = v->in->nargs - 1;
    fvm_func *pb = fvm_vjp_pullback_for(v, body, 1, 1, UINT64_C(1) << 1);
    const fvm_type *state = body->param_types[1], *ct = carry_type(v, 1, state, 1);
    const fvm_type *pair[2] = {state, fvm_type_cotangent(a, state)};
    const fvm_type *et = ct_states ? fvm_type_struct(a, 2, NULL, pair) : state;
    if (!pb)
        return FVM_ERR_TYPE;
    fvm_status s = begin_body(v, body, ct, ct_states ? "pair" : "state", et, 1, 2);
    if (s)
        return s;
    const char *carry = fvm_ad_param(v->ad, 0), *e = fvm_ad_param(v->ad, 1);
    const char **args = fvm_arena_array(a, (size_t)nx + 4, sizeof *args);
    if (!args)
        return FVM_ERR_NOMEM;
    args[0] = field_index(v, carry, 0);
    args[1] = ct_states ? field_index(v, e, 0) : e;
    for (int k = 0; k < nx; k++)
        args[2 + k] = fvm_ad_param(v->ad, 2 + k);
    args[2 + nx] = field_index(v, carry, 1);
    const char *g = grads_of(v, pb, nx + 3, args);
    fvm_func *bw = fvm_ad_end(v->ad, next_carry(v, carry, 1, g, ct_states ? field_index(v, e, 1) : NULL, ct));
    if (!bw)
        return FVM_ERR_TYPE;
    /* back in the function being differentiated */
    const char *seq = ct_states ? OP(SEQUENCE_ZIP, NULL, states, ct_states) : states;
    const char **fa = loop_args(v, 2, 1);
    if (!fa)
        return FVM_ERR_NOMEM;
    fa[0] = OP(SEQUENCE_REVERSE, NULL, seq);
    fa[1] = first_carry(v, fvm_ad_const(v->ad, (double)(v->in->a.n - 1), FVM_DTYPE_I32), ct_state, 1);
    const char *r = fn_op(v, FVM_OP_SEQUENCE_REDUCE, bw, nx + 2, fa);
    set(v, 0, field_index(v, r, 1));
    take_grads(v, r, 1, 2);
    return FVM_OK;
}

fvm_status vjp_fori(fvm_vjp *v)
{
    /* forward, a scan kept the state each iteration started with (v->aux) */
    return loop_back(v, v->ct, v->aux, NULL);
}

fvm_status vjp_scan(fvm_vjp *v)
{
    /* <state, states>: the states are the scan's own */
    return loop_back(v, field_index(v, v->ct, 0), field_name(v, v->y, "states"), field_index(v, v->ct, 1));
}

/* sequence_reduce and sequence_scan: fn(acc, e, extras...) folded over s
 * (argument 0) from init (argument 1), accs the accumulator before each
 * element. ct_acc is the final accumulator's cotangent, ct_accs (or NULL) one
 * for each accumulator in accs (sequence_scan's second result). Backward: a
 * fold of BODY.backward over the triples <e, acc, ct> from the last, its
 * carry <ct of the accumulator, ct of each wanted extra>. The cotangent of
 * s, when wanted, needs the accumulator's cotangent after each element: the
 * backward fold is then a sequence_scan, which keeps them, and a
 * sequence_map of BODY.elem_back gives each element's from fn's pullback for
 * the element. */
static fvm_status fold_back(fvm_vjp *v, const char *ct_acc, const char *accs, const char *ct_accs)
{
    fvm_func *fn = v->in->a.fn;
    fvm_arena *a = fvm_ad_arena(v->ad);
    int nx = v->in->nargs - 2;
    fvm_func *pb = fvm_vjp_pullback_for(v, fn, 2, 0, UINT64_C(1) << 0);
    const fvm_type *acc = fn->param_types[0], *elem = fn->param_types[1];
    const fvm_type *ct = carry_type(v, 0, acc, 2);
    const fvm_type *triple[3] = {elem, acc, fvm_type_cotangent(a, acc)};
    const fvm_type *et = fvm_type_struct(a, ct_accs ? 3 : 2, NULL, triple);
    if (!pb)
        return FVM_ERR_TYPE;
    fvm_status s = begin_body(v, fn, ct, "pair", et, 2, 2);
    if (s)
        return s;
    const char *carry = fvm_ad_param(v->ad, 0), *pair = fvm_ad_param(v->ad, 1);
    const char **args = fvm_arena_array(a, (size_t)nx + 4, sizeof *args);
    if (!args)
        return FVM_ERR_NOMEM;
    args[0] = field_index(v, pair, 1);
    args[1] = field_index(v, pair, 0);
    for (int k = 0; k < nx; k++)
        args[2 + k] = fvm_ad_param(v->ad, 2 + k);
    args[2 + nx] = field_index(v, carry, 0);
    const char *g = grads_of(v, pb, nx + 3, args);
    fvm_func *bw = fvm_ad_end(v->ad, next_carry(v, carry, 0, g, ct_accs ? field_index(v, pair, 2) : NULL, ct));
    if (!bw)
        return FVM_ERR_TYPE;
    /* back in the function being differentiated */
    const char *seq = ct_accs ? OP(SEQUENCE_ZIP, NULL, v->x[0], accs, ct_accs) : OP(SEQUENCE_ZIP, NULL, v->x[0], accs);
    const char **fa = loop_args(v, 2, 2);
    if (!fa)
        return FVM_ERR_NOMEM;
    fa[0] = OP(SEQUENCE_REVERSE, NULL, seq);
    fa[1] = first_carry(v, NULL, ct_acc, 2);
    if (!v->want[0]) {
        const char *r = fn_op(v, FVM_OP_SEQUENCE_REDUCE, bw, nx + 2, fa);
        set(v, 1, field_index(v, r, 0));
        take_grads(v, r, 2, 1);
        return FVM_OK;
    }
    const char *sc = fn_op(v, FVM_OP_SEQUENCE_SCAN, bw, nx + 2, fa), *r = field_name(v, sc, "acc");
    set(v, 1, field_index(v, r, 0));
    take_grads(v, r, 2, 1);
    /* the carry before each element from the last: the accumulator's
     * cotangent after the element; in sequence order */
    fvm_func *first = fvm_ad_helper_fn(v->ad, FVM_AD_FIELD, ct, NULL, 0);
    const char *before = field_name(v, sc, "accs");
    const char *after = OP(SEQUENCE_REVERSE, NULL, fn_op(v, FVM_OP_SEQUENCE_MAP, first, 1, &before));
    /* BODY.elem_back(<e, acc, ct after>, extras...) = fn'(acc, e, extras, ct).grads.0 */
    fvm_func *pe = fvm_ad_pullback_of(v->ad, fn, UINT64_C(1) << 1);
    const fvm_type *after3[3] = {elem, acc, triple[2]};
    if (!pe)
        return FVM_ERR_TYPE;
    const char **pn = fvm_arena_array(a, (size_t)nx + 2, sizeof *pn);
    const fvm_type **pt = fvm_arena_array(a, (size_t)nx + 2, sizeof *pt);
    const char *base = fvm_arena_printf(a, "%s.elem_back", fn->name);
    if (!pn || !pt || !base)
        return FVM_ERR_NOMEM;
    pn[0] = "triple", pt[0] = fvm_type_struct(a, 3, NULL, after3);
    for (int k = 0; k < nx; k++)
        pn[1 + k] = fn->param_names[2 + k], pt[1 + k] = v->in->arg_types[2 + k];
    if (!pt[0] || fvm_ad_begin(v->ad, base, nx + 1, pn, pt))
        return FVM_ERR_TYPE;
    const char *t = fvm_ad_param(v->ad, 0);
    args[0] = field_index(v, t, 1);
    args[1] = field_index(v, t, 0);
    for (int k = 0; k < nx; k++)
        args[2 + k] = fvm_ad_param(v->ad, 1 + k);
    args[2 + nx] = field_index(v, t, 2);
    fvm_func *eb = fvm_ad_end(v->ad, field_index(v, grads_of(v, pe, nx + 3, args), 0));
    const char **ma = loop_args(v, 1, 2);
    if (!eb || !ma)
        return eb ? FVM_ERR_NOMEM : FVM_ERR_TYPE;
    ma[0] = OP(SEQUENCE_ZIP, NULL, v->x[0], accs, after);
    v->dx[0] = fn_op(v, FVM_OP_SEQUENCE_MAP, eb, nx + 1, ma);
    return FVM_OK;
}

fvm_status vjp_sequence_reduce(fvm_vjp *v)
{
    /* forward, a sequence_scan kept the accumulator before each element (v->aux) */
    return fold_back(v, v->ct, v->aux, NULL);
}

fvm_status vjp_sequence_scan(fvm_vjp *v)
{
    /* <acc, accs>: the accumulators are the scan's own */
    return fold_back(v, field_index(v, v->ct, 0), field_name(v, v->y, "accs"), field_index(v, v->ct, 1));
}

/* ---- sequences ------------------------------------------------------------------------------------ */

/* FN.elem_back(<e, ct>, extras...) = pb(e, extras..., ct).grads.0: one
 * element's cotangent through fn(e, extras...) (pb: fn's pullback for e);
 * the extras are the op's arguments 1... */
static fvm_func *elem_back(fvm_vjp *v, fvm_func *fn, fvm_func *pb)
{
    fvm_arena *a = fvm_ad_arena(v->ad);
    int nx = v->in->nargs - 1;
    const char **pn = fvm_arena_array(a, (size_t)nx + 2, sizeof *pn);
    const fvm_type **pt = fvm_arena_array(a, (size_t)nx + 2, sizeof *pt);
    const char **args = fvm_arena_array(a, (size_t)nx + 3, sizeof *args);
    const fvm_type *pair[2] = {fn->param_types[0], fvm_type_cotangent(a, fn->result_type)};
    const char *base = fvm_arena_printf(a, "%s.elem_back", fn->name);
    if (!pn || !pt || !args || !base || !pair[1])
        return NULL;
    pn[0] = "pair", pt[0] = fvm_type_struct(a, 2, NULL, pair);
    for (int k = 0; k < nx; k++)
        pn[1 + k] = fn->param_names[1 + k], pt[1 + k] = v->in->arg_types[1 + k];
    if (!pt[0] || fvm_ad_begin(v->ad, base, nx + 1, pn, pt))
        return NULL;
    const char *p = fvm_ad_param(v->ad, 0);
    args[0] = field_index(v, p, 0);
    for (int k = 0; k < nx; k++)
        args[1 + k] = fvm_ad_param(v->ad, 1 + k);
    args[1 + nx] = field_index(v, p, 1);
    return fvm_ad_end(v->ad, field_index(v, grads_of(v, pb, nx + 2, args), 0));
}

fvm_status vjp_sequence_map(fvm_vjp *v)
{
    /* The extra arguments' cotangents are summed over the elements; each
     * element's is fn's pullback for it at its cotangent. */
    fvm_func *body = v->in->a.fn;
    fvm_arena *a = fvm_ad_arena(v->ad);
    int nx = v->in->nargs - 1, ne = 0;
    const char *pairs = OP(SEQUENCE_ZIP, NULL, v->x[0], v->ct);
    if (v->want[0]) {
        fvm_func *pe = fvm_ad_pullback_of(v->ad, body, UINT64_C(1) << 0);
        fvm_func *eb = pe ? elem_back(v, body, pe) : NULL;
        const char **ma = loop_args(v, 1, 1);
        if (!eb || !ma)
            return FVM_ERR_TYPE;
        ma[0] = pairs;
        v->dx[0] = fn_op(v, FVM_OP_SEQUENCE_MAP, eb, nx + 1, ma);
    }
    for (int k = 1; k <= nx; k++)
        ne += v->want[k];
    if (!ne)
        return FVM_OK;
    fvm_func *pb = fvm_vjp_pullback_for(v, body, 1, 0, 0);
    const fvm_type **es = fvm_arena_array(a, (size_t)nx + 1, sizeof *es);
    if (!pb || !es)
        return FVM_ERR_TYPE;
    ne = 0;
    for (int k = 1; k <= nx; k++)
        if (v->want[k])
            es[ne++] = fvm_type_cotangent(a, v->in->arg_types[k]);
    const fvm_type *ct = fvm_type_struct(a, ne, NULL, es);
    const fvm_type *pair_elems[2] = {body->param_types[0], fvm_type_cotangent(a, body->result_type)};
    fvm_status s = begin_body(v, body, ct, "pair", fvm_type_struct(a, 2, NULL, pair_elems), 1, 1);
    if (s)
        return s;
    const char *carry = fvm_ad_param(v->ad, 0), *pair = fvm_ad_param(v->ad, 1);
    const char **args = fvm_arena_array(a, (size_t)nx + 3, sizeof *args);
    const char **fs = fvm_arena_array(a, (size_t)ne + 1, sizeof *fs);
    if (!args || !fs)
        return FVM_ERR_NOMEM;
    args[0] = field_index(v, pair, 0);
    for (int k = 0; k < nx; k++)
        args[1 + k] = fvm_ad_param(v->ad, 2 + k);
    args[1 + nx] = field_index(v, pair, 1);
    const char *grads = grads_of(v, pb, nx + 2, args);
    for (int i = 0; i < ne; i++)
        fs[i] = fvm_ad_add(v->ad, field_index(v, carry, i), field_index(v, grads, i), ct->u.strct.elems[i]);
    fvm_func *bw = fvm_ad_end(v->ad, fvm_ad_op(v->ad, FVM_OP_STRUCT, NULL, ne, fs));
    if (!bw)
        return FVM_ERR_TYPE;
    const char **zs = fvm_arena_array(a, (size_t)ne + 1, sizeof *zs), **fa = loop_args(v, 2, 1);
    if (!zs || !fa)
        return FVM_ERR_NOMEM;
    int z = 0;
    for (int k = 1; k <= nx; k++)
        if (v->want[k])
            zs[z++] = fvm_ad_zeros(v->ad, v->x[k], v->in->arg_types[k]);
    fa[0] = pairs;
    fa[1] = fvm_ad_op(v->ad, FVM_OP_STRUCT, NULL, ne, zs);
    take_grads(v, fn_op(v, FVM_OP_SEQUENCE_REDUCE, bw, nx + 2, fa), 1, 0);
    return FVM_OK;
}

fvm_status vjp_sequence_sum(fvm_vjp *v)
{
    /* Every element gets the sum's cotangent. */
    const fvm_type *seq = v->in->arg_types[0];
    fvm_func *pick = fvm_ad_helper_fn(v->ad, FVM_AD_PICK2, seq->u.seq.elem, v->in->type, 0);
    const char *args[2] = {v->x[0], v->ct};
    set(v, 0, fn_op(v, FVM_OP_SEQUENCE_MAP, pick, 2, args));
    return FVM_OK;
}

fvm_status vjp_sequence_zip(fvm_vjp *v)
{
    /* each sequence's cotangent: its field of the pairs' */
    const fvm_type *elem = v->in->type->u.seq.elem;
    for (int k = 0; k < v->in->nargs; k++)
        if (v->want[k])
            v->dx[k] = fn_op(v, FVM_OP_SEQUENCE_MAP, fvm_ad_helper_fn(v->ad, FVM_AD_FIELD, elem, NULL, k), 1, &v->ct);
    return FVM_OK;
}

fvm_status vjp_sequence_reverse(fvm_vjp *v)
{
    set(v, 0, OP(SEQUENCE_REVERSE, NULL, v->ct));
    return FVM_OK;
}

/* ---- key selection -------------------------------------------------------------------------------- */

/* select_keys(keys, max_key, x) = [fn(x, k) for k in keys]: the cotangent of
 * x is the sum over the keys of fn's pullback for x at (x, k) with that
 * element's cotangent, computed by generated functions
 *   fn.select_back(keys, cts, x) = field 1 of a sequence_reduce of fn.select_step
 *                                  over cts from <0, zeros_like(x)>
 *   fn.select_step(<i, acc>, ct, keys, x) = <i + 1, acc + fn'(x, keys[i], ct).grads[0]>
 * The keys are integers (no cotangent). NULL after an error. */
static const fvm_func *select_back(fvm_vjp *v, const fvm_type *keys, const fvm_type *cts)
{
    fvm_func *fn = v->in->a.fn;
    const fvm_type *val = fn->param_types[0];
    fvm_func *pb = fvm_ad_pullback_of(v->ad, fn, UINT64_C(1) << 0);
    if (!pb)
        return NULL;
    fvm_arena *a = fvm_ad_arena(v->ad);
    const fvm_type *carry[2] = {fvm_type_scalar(a, FVM_DTYPE_I32), fvm_type_cotangent(a, val)};
    const char *pn[4] = {"carry", "ct", "keys", "x"};
    const fvm_type *pt[4] = {fvm_type_struct(a, 2, NULL, carry), cts->u.seq.elem, keys, val};
    if (!pt[0] || fvm_ad_begin(v->ad, fvm_arena_printf(a, "%s.select_step", fn->name), 4, pn, pt))
        return NULL;
    const char *c = fvm_ad_param(v->ad, 0), *i = field_index(v, c, 0);
    const char *args[3] = {fvm_ad_param(v->ad, 3), OP(GATHER, NULL, fvm_ad_param(v->ad, 2), i), fvm_ad_param(v->ad, 1)};
    const char *g = field_index(v, grads_of(v, pb, 3, args), 0);
    const char *next[2] = {OP(ADD, NULL, i, fvm_ad_const(v->ad, 1, FVM_DTYPE_I32)),
                           fvm_ad_add(v->ad, field_index(v, c, 1), g, carry[1])};
    const fvm_func *step = fvm_ad_end(v->ad, fvm_ad_op(v->ad, FVM_OP_STRUCT, NULL, 2, next));
    const char *bn[3] = {"keys", "cts", "x"};
    const fvm_type *bt[3] = {keys, cts, val};
    if (!step || fvm_ad_begin(v->ad, fvm_arena_printf(a, "%s.select_back", fn->name), 3, bn, bt))
        return NULL;
    const char *x = fvm_ad_param(v->ad, 2);
    const char *c0[2] = {fvm_ad_const(v->ad, 0, FVM_DTYPE_I32), fvm_ad_zeros(v->ad, x, val)};
    const char *fa[4] = {fvm_ad_param(v->ad, 1), fvm_ad_op(v->ad, FVM_OP_STRUCT, NULL, 2, c0), fvm_ad_param(v->ad, 0),
                         x};
    return fvm_ad_end(v->ad, field_index(v, fn_op(v, FVM_OP_SEQUENCE_REDUCE, step, 4, fa), 1));
}

fvm_status vjp_select_keys(fvm_vjp *v)
{
    if (!v->want[2])
        return FVM_OK;
    const fvm_func *back = select_back(v, v->in->arg_types[0], v->in->type);
    if (!back)
        return FVM_ERR_TYPE;
    const char *args[3] = {v->x[0], v->ct, v->x[2]};
    v->dx[2] = fn_op(v, FVM_OP_CALL, back, 3, args);
    return FVM_OK;
}

/* federated_select: each client's select_keys; the server value's cotangent
 * is the sum over the clients of select_keys's (its adjoint broadcast). */
fvm_status vjp_federated_select(fvm_vjp *v)
{
    if (!v->want[2])
        return FVM_OK;
    const fvm_func *back = select_back(v, v->in->arg_types[0]->u.fed.member, v->in->type->u.fed.member);
    if (!back)
        return FVM_ERR_TYPE;
    const char *args[3] = {v->x[0], v->ct, OP(FEDERATED_BROADCAST, NULL, v->x[2])};
    v->dx[2] = OP(FEDERATED_SUM, NULL, fn_op(v, FVM_OP_FEDERATED_MAP, back, 3, args));
    return FVM_OK;
}
