/* autodiff.h - reverse-mode automatic differentiation as a source-to-source transformation of the IR.
 *
 * The pullback of a function f(p1..pn) -> R for a set of its parameters is a
 * new, plain-IR function
 *
 *     f'(p1..pn, ct: ct(R)) -> <value=R, grads=<pi=ct(Ti) for each chosen pi>>
 *
 * that recomputes f and returns the cotangents of the chosen parameters
 * given the cotangent ct of the result. It is built from f's body: calls are
 * inlined; the forward instructions that contribute to the result are
 * copied; then every instruction through which a chosen parameter reaches the
 * result contributes, in reverse order, the instructions its op's VJP rule
 * (the vjp column of ops.def, vjp.c) emits. The new function is added to the
 * program and checked like any other, and it uses only ops and intrinsics
 * of the IR, so every backend and plan handles it with no special case.
 *
 * The cotangent type of T, ct(T), is T, except that an all-equal value
 * T@CLIENTS gets one cotangent per client, {T}@CLIENTS (their sum is the
 * cotangent of the value: the adjoint of federated_broadcast is
 * federated_sum). Integer leaves carry zeros.
 *
 * A pullback returns exactly these types: where a cotangent computed as an
 * all-equal T@CLIENTS (the adjoint of federated_sum or federated_mean is a
 * federated_broadcast) is returned as a {T}@CLIENTS (the pullback's grads,
 * and its value, which inlined calls may leave all-equal), it passes through
 * a call of the generated vjp.per_client, whose parameter is typed
 * {T}@CLIENTS: the call makes one member per client with the run's client
 * count, as every call does (fvm_coerce). So the value of grad, and of a
 * call of a pullback, holds one value per client where its type says so;
 * grads_match checks it (a value is all-equal or per client as its type
 * says: the runtime represents the two differently).
 *
 * Calls are inlined while a derived function takes in at most
 * FVM_AD_MAX_INLINE instructions through them; a call beyond that stays a
 * call, and its backward step calls the callee's pullback, derived once per
 * (callee, parameters) and shared by all its calls (the callee's forward
 * pass then runs twice: once forward, once inside its pullback). Without
 * the bound a call tree in which each function calls the next twice
 * inlines into 2^depth copies. FVM_AD_MAX_DERIVED bounds what remains: the
 * instructions all derivations may add to one program. */
#ifndef FVM_AUTODIFF_H
#define FVM_AUTODIFF_H

#include "../ir/check.h"
#include "../core/doc.h"

typedef struct fvm_ad fvm_ad;

/* Instructions a derived function takes in by inlining calls. Inlining saves
 * recomputing a callee's forward pass in the pullback; the largest derivation
 * among the example and test programs inlines about 200 instructions (a
 * character LSTM), so every ordinary program is inlined whole, and a call
 * tree of any depth derives into a number of instructions linear in its
 * number of functions. */
#define FVM_AD_MAX_INLINE 1024
/* Instructions that derivations may add to one program (pullbacks, loop
 * bodies, helpers). Checking a derived instruction takes about 3 KB, so
 * this bounds derived code to about 200 MB; the largest derivation among the
 * example and test programs adds about 200 instructions. Past it the
 * derivation is an FVM_ERR_LIMIT error at the instruction that asked. */
#define FVM_AD_MAX_DERIVED 65536

/* What a derivation needs from the checker that starts it. */
typedef struct fvm_ad_env {
    fvm_program *p;
    fvm_diag *d;
    /* Checks a function added to p (its callees are checked already). */
    fvm_status (*check)(void *ctx, fvm_func *f);
    void *ctx;
    const fvm_loc *where; /* the instruction that asked, for errors */
    /* fvm_ad_pullback: f returns <value=R, aux=A> (grad and value_and_grad
     * with has_aux, as JAX's): the pullback takes the cotangent of the value
     * alone, f'(p1..pn, ct: ct(R)) -> <value=<value, aux>, grads=<g>>, and
     * no gradient flows back from aux (what only aux needs is computed
     * forward, never differentiated). */
    bool has_aux;
} fvm_ad_env;

/* The pullback of f for the parameters whose bit is set in mask (derived
 * once per (f, mask) and reused). Errors (a parameter without floats, an op
 * that cannot be differentiated on the way from a parameter to the result)
 * are reported in env->d at the instruction at fault. */
fvm_status fvm_ad_pullback(const fvm_ad_env *env, fvm_func *f, uint64_t mask, fvm_func **out);

/* The forward derivative of f for the one parameter P whose bit is set in
 * mask (derived once per (f, mask) and reused):
 *
 *     f.jvp(P)(p1..pn, t: ct(T_P)) -> <value=R, tangent=ct(R)>
 *
 * the value of f and the Jacobian-vector product J t. It is the transpose of
 * f's pullback: the pullback f.vjp(P)(p1..pn, u) is linear in u, and its own
 * pullback for u at the cotangent <0, <t>> of its result is J t, derived by
 * the same VJP rules (each op's rule written once). So the tangent of a
 * federated_broadcast is a federated_broadcast (the adjoint of the adjoint,
 * federated_sum), of a federated_sum a federated_sum, of a federated_map a
 * federated_map of the function's derivative. Errors as fvm_ad_pullback's. */
fvm_status fvm_ad_jvp(const fvm_ad_env *env, fvm_func *f, uint64_t mask, fvm_func **out);

/* Is t a tensor, or a struct tree of tensors, whose leaves are all floats of
 * one dtype (then *dt)? False for a tree without leaves. */
bool fvm_ad_one_float_dtype(const fvm_type *t, fvm_dtype *dt);

/* ---- for the VJP rules (vjp.c) ------------------------------------------- */

/* One VJP rule application: the forward instruction y = op(x...) and the
 * cotangent of y; the rule sets dx[i] for each i with want[i] (NULL when the
 * op passes no gradient to that argument). */
typedef struct fvm_vjp {
    fvm_ad *ad;
    const fvm_instr *in; /* the forward instruction: op, decoded attributes, types */
    const char **x; /* the derived names of its arguments */
    const char *y; /* ... of its result */
    const char *aux; /* loops: the sequence of states the forward pass kept */
    const char *ct; /* the cotangent of y */
    const bool *want;
    const char **dx;
} fvm_vjp;

typedef fvm_status (*fvm_vjp_fn)(fvm_vjp *v);

/* Emits 'name = op(args...)' into the function being built and returns its
 * (fresh) name, or NULL after reporting an error. attrs may be NULL. */
const char *fvm_ad_op(fvm_ad *ad, fvm_op op, fvm_doc *attrs, int nargs, const char *const *args);
#define FVM_AD(ad, op, attrs, ...) \
    fvm_ad_op((ad), (op), (attrs), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
              (const char *[]){__VA_ARGS__})
/* A scalar constant of a dtype. */
const char *fvm_ad_const(fvm_ad *ad, double v, fvm_dtype dtype);
/* An empty attribute object, and setters. */
fvm_doc *fvm_ad_attrs(fvm_ad *ad);
void fvm_ad_set_int(fvm_ad *ad, fvm_doc *o, const char *key, int64_t v);
void fvm_ad_set_ints(fvm_ad *ad, fvm_doc *o, const char *key, const fvm_ints *v);
void fvm_ad_set_str(fvm_ad *ad, fvm_doc *o, const char *key, const char *s);
void fvm_ad_set_bool(fvm_ad *ad, fvm_doc *o, const char *key, bool v);
/* Copies the attributes of the forward instruction (for ops whose VJP
 * reuses them, as slice -> unslice). */
fvm_doc *fvm_ad_copy_attrs(fvm_ad *ad, const fvm_instr *in, const char *const *keys);

/* A struct type's field names as a 'names' attribute, or NULL for a struct
 * whose fields are not all named (it is built positionally). */
fvm_doc *fvm_ad_names(fvm_ad *ad, const fvm_type *st);

/* Zeros shaped as the value 'like' of type t (placed values through
 * federated_map/apply, sequences through sequence_map); and a + b for
 * values of type t (sequences of one length, element by element). */
const char *fvm_ad_zeros(fvm_ad *ad, const char *like, const fvm_type *t);
const char *fvm_ad_add(fvm_ad *ad, const char *a, const char *b, const fvm_type *t);

/* A generated helper function, added to the program once per type and kind:
 * see the kinds above (t2: the second parameter's type where it differs). */
typedef enum fvm_ad_helper {
    FVM_AD_FIELD, /* (s: T) -> s.index */
    FVM_AD_PICK2, /* (a: T, b: T2) -> b */
    FVM_AD_ADD, /* (a: T, b: T) -> a + b */
    FVM_AD_ZEROS, /* (a: T) -> zeros like a */
    FVM_AD_DIV, /* (a: T, n: float scalar T2) -> a / n, leaf by leaf (n cast to each leaf's dtype) */
    FVM_AD_MUL, /* (a: T, w: float scalar T2) -> a * w (likewise) */
    FVM_AD_TIE, /* (x: T, y: T, c: T) -> c where x == y, else 0 */
    FVM_AD_HIT, /* (x: T, y: T) -> 1 where x == y, else 0 (in x's dtypes) */
    FVM_AD_QUOT, /* (a: T, b: T) -> a / b, element by element */
    FVM_AD_PER_CLIENT, /* (a: T) -> a, T holding {U}@CLIENTS: see above */
    FVM_AD_ADD_PAIR /* (p: <T, T>) -> p.0 + p.1 (sums of sequences, element by element) */
} fvm_ad_helper;
fvm_func *fvm_ad_helper_fn(fvm_ad *ad, fvm_ad_helper kind, const fvm_type *t, const fvm_type *t2, int index);

/* v, computed as a value whose type may have all-equal T@CLIENTS parts,
 * as a value of type t, where they are {T}@CLIENTS (see above): v itself
 * when t holds no {T}@CLIENTS. */
const char *fvm_ad_conform(fvm_ad *ad, const char *v, const fvm_type *t);

/* grad, value_and_grad, vjp, jvp: the ops that take a derivative. */
bool fvm_ad_is_deriv(fvm_op op);

/* The function a derivative instruction in computes from its arguments,
 * made once per derivative and op from the derived in->derived:
 *   grad:           F.grad(P)(p1..pn)           = F.vjp(P)(p1..pn, 1).grads.0
 *   value_and_grad: F.value_and_grad(P)(p1..pn) = <value=..., grad=...> of the same call
 *   vjp:            F.vjp(P).grads(p1..pn, ct)  = F.vjp(P)(p1..pn, ct).grads.0
 *   jvp:            F.jvp(P) itself
 * A derivation inlines it as a call (or differentiates it as vjp_call does):
 * derivatives of derivatives. NULL after an error, reported. */
fvm_func *fvm_ad_deriv_fn(fvm_ad *ad, const fvm_instr *in);

/* The pullback of g for mask (a nested derivation). */
fvm_func *fvm_ad_pullback_of(fvm_ad *ad, fvm_func *g, uint64_t mask);

/* A new function built from scratch (a loop's backward body): params with
 * types, then emit into it with fvm_ad_op through the returned context, then
 * finish it with its result. The helpers above work on the function being
 * built most recently begun and not yet finished. */
fvm_status fvm_ad_begin(fvm_ad *ad, const char *base, int nparams, const char *const *names,
                        const fvm_type *const *types);
fvm_func *fvm_ad_end(fvm_ad *ad, const char *result);
/* The name of parameter i of the function being built. */
const char *fvm_ad_param(fvm_ad *ad, int i);

/* For the rules of ops that run functions: the pullback of fn for the
 * parameters whose arguments the rule wants a cotangent for (v->want):
 * argument k (from first_arg) is parameter k + shift; 'always' adds
 * parameter bits. NULL after an error, reported. */
fvm_func *fvm_vjp_pullback_for(fvm_vjp *v, fvm_func *fn, int first_arg, int shift, uint64_t always);

/* Why an op whose rule is vjp_unsupported passes no gradient and what to
 * write instead, for its error; NULL when there is nothing to add. */
const char *fvm_vjp_unsupported_why(fvm_op op);

/* Reports an error at the forward instruction; returns FVM_ERR_TYPE. */
fvm_status fvm_ad_error(fvm_vjp *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
fvm_arena *fvm_ad_arena(fvm_ad *ad);

#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) fvm_status VJP(fvm_vjp *v);
#include "../ir/ops.def"
#undef FVM_OP

#endif
