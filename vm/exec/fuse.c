/* fuse.c - running chains of elementwise instructions (planned by vm/transform/fuse_plan.c) as one pass over memory. */
#include "fuse.h"

#include "exec.h"

/* Do the inputs (tensors, or structs of tensors of one size) fit the fused
 * kernel, leaf by leaf? */
static bool fits(const fvm_fused *c, fvm_value *const *vs)
{
    const fvm_value *s = NULL;
    for (int k = 0; k < c->nin; k++) {
        if (vs[k]->kind == FVM_V_STRUCT && !s)
            s = vs[k];
        else if (vs[k]->kind == FVM_V_STRUCT && vs[k]->n != s->n)
            return false;
        else if (vs[k]->kind != FVM_V_TENSOR && vs[k]->kind != FVM_V_STRUCT)
            return false;
    }
    if (!s) {
        const fvm_tensor *ts[FVM_FUSED_MAX_IN];
        fvm_dims b = vs[0]->t.shape;
        fvm_dtype dt;
        for (int k = 0; k < c->nin; k++) {
            ts[k] = &vs[k]->t;
            if (fvm_dims_broadcast(&b, &ts[k]->shape, &b, NULL))
                return false;
        }
        return fvm_k_fused_dtype(c->steps, c->nsteps, ts, c->nin, &dt);
    }
    for (int64_t i = 0; i < s->n; i++) {
        fvm_value *sub[FVM_FUSED_MAX_IN];
        for (int k = 0; k < c->nin; k++)
            sub[k] = vs[k]->kind == FVM_V_STRUCT ? vs[k]->items[i] : vs[k];
        if (!fits(c, sub))
            return false;
    }
    return true;
}

/* Does the chain hold its k-th input alone (it dies here and no other
 * value holds it)? Then its buffer may take the result. */
static bool owns(const fvm_fused *c, fvm_value *const *slots, int k)
{
    bool dies = false;
    for (int j = 0; j < c->nrelease && !dies; j++)
        dies = c->release[j] == c->in[k];
    return dies && __atomic_load_n(&slots[c->in[k]]->refs, __ATOMIC_ACQUIRE) == 1;
}

/* May a result of dtype dt and shape take t's buffer (held by nothing else)? */
static bool buffer_free(const fvm_tensor *t, fvm_dtype dt, const fvm_dims *shape)
{
    return t->buf && __atomic_load_n(&t->buf->refs, __ATOMIC_ACQUIRE) == 1 && t->dtype == dt &&
           fvm_dims_equal(&t->shape, shape);
}

/* A new value holding t (retained): the result written into t's buffer. */
static fvm_status take_buffer(fvm_ctx *x, const fvm_tensor *t, fvm_value **out)
{
    fvm_tensor r = *t;
    fvm_tensor_retain(&r);
    if (!(*out = fvm_value_tensor_take(&r))) {
        fvm_tensor_release(&r);
        return fvm_nomem(x);
    }
    return FVM_OK;
}

/* The chain over inputs vs (checked by fits); owned[k]: nothing but this
 * chain holds vs[k], so its buffer may take the result. */
static fvm_status run_lifted(fvm_ctx *x, const fvm_fused *c, fvm_value *const *vs, const bool *owned, fvm_value **out)
{
    const fvm_value *s = NULL;
    for (int k = 0; k < c->nin && !s; k++)
        if (vs[k]->kind == FVM_V_STRUCT)
            s = vs[k];
    if (s) {
        fvm_value *r = fvm_value_list(FVM_V_STRUCT, s->n);
        if (!r)
            return fvm_nomem(x);
        for (int64_t i = 0; i < s->n; i++) {
            fvm_value *sub[FVM_FUSED_MAX_IN];
            bool sub_owned[FVM_FUSED_MAX_IN];
            for (int k = 0; k < c->nin; k++) {
                bool st = vs[k]->kind == FVM_V_STRUCT;
                sub[k] = st ? vs[k]->items[i] : vs[k];
                /* a tensor input meets every leaf: shared */
                sub_owned[k] = st && owned[k] && __atomic_load_n(&sub[k]->refs, __ATOMIC_ACQUIRE) == 1;
            }
            fvm_status e = run_lifted(x, c, sub, sub_owned, &r->items[i]);
            if (e) {
                fvm_value_release(r);
                return e;
            }
        }
        *out = r;
        return FVM_OK;
    }
    const fvm_tensor *ts[FVM_FUSED_MAX_IN];
    fvm_dims shape = vs[0]->t.shape;
    fvm_dtype dt;
    for (int k = 0; k < c->nin; k++) {
        ts[k] = &vs[k]->t;
        fvm_dims_broadcast(&shape, &ts[k]->shape, &shape, NULL); /* checked by fits */
    }
    fvm_k_fused_dtype(c->steps, c->nsteps, ts, c->nin, &dt);
    fvm_value *o = NULL;
    fvm_status e = FVM_OK;
    for (int k = 0; k < c->nin && !o && !e; k++)
        if (owned[k] && buffer_free(ts[k], dt, &shape))
            e = take_buffer(x, ts[k], &o);
    if (e)
        return e;
    e = o ? FVM_OK : fvm_new_tensor(x, dt, &shape, &o);
    if (e == FVM_OK && (e = x->vm->kernels->fused(c->steps, c->nsteps, ts, c->nin, &o->t, x->d))) {
        fvm_value_release(o);
        return e;
    }
    *out = o;
    return e;
}

/* The chain's update with its product (c->product), into the root's slot,
 * when the values fit the kernel (*done); else nothing, and the
 * instructions run one by one. */
static fvm_status run_update(fvm_ctx *x, const fvm_func *f, const fvm_fused *c, fvm_value **slots, bool *done)
{
    const fvm_instr *mm = &f->instrs[c->product], *root = &f->instrs[c->root];
    const fvm_value *a = slots[mm->args[0]], *b = slots[mm->args[1]];
    const fvm_value *scale = c->scale_in >= 0 ? slots[c->in[c->scale_in]] : NULL, *base = slots[c->in[c->base_in]];
    *done = false;
    if (a->kind != FVM_V_TENSOR || b->kind != FVM_V_TENSOR || base->kind != FVM_V_TENSOR ||
        a->t.dtype != FVM_DTYPE_F32 || b->t.dtype != FVM_DTYPE_F32 || base->t.dtype != FVM_DTYPE_F32 ||
        (scale && (scale->kind != FVM_V_TENSOR || scale->t.dtype != FVM_DTYPE_F32 || scale->t.shape.rank != 0)))
        return FVM_OK;
    fvm_dims shape;
    if (fvm_shape_matmul(&a->t.shape, &b->t.shape, mm->a.transpose_a, mm->a.transpose_b, &shape, NULL) ||
        shape.rank != 2 || !fvm_dims_equal(&shape, &base->t.shape))
        return FVM_OK; /* the instructions say what is wrong */
    /* in place when the base dies here, is no operand of the product and
     * the kernel can (the new weights into the old ones' buffer) */
    const fvm_kernels *k = x->vm->kernels;
    bool in_place = owns(c, slots, c->base_in) && buffer_free(&base->t, FVM_DTYPE_F32, &shape) &&
                    base->t.buf != a->t.buf && base->t.buf != b->t.buf && k->matmul_update_in_place &&
                    k->matmul_update_in_place(&a->t, &b->t, mm->a.transpose_a, mm->a.transpose_b, &base->t);
    fvm_value *o = NULL;
    fvm_status s = in_place ? take_buffer(x, &base->t, &o) : fvm_new_tensor(x, FVM_DTYPE_F32, &shape, &o);
    if (s == FVM_OK && (s = k->matmul_update(&a->t, &b->t, mm->a.transpose_a, mm->a.transpose_b,
                                             scale ? &scale->t : NULL, &base->t, &o->t, x->d))) {
        fvm_value_release(o);
        fvm_diag_place_last(x->d, &root->loc, fvm_op_table[root->op].name, s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s);
        return s;
    }
    if (s == FVM_OK) {
        slots[root->slot] = o;
        *done = true;
    }
    return s;
}

fvm_status fvm_exec_fused(fvm_ctx *x, const fvm_func *f, const fvm_fused *c, fvm_value **slots)
{
    if (c->product >= 0) {
        bool done;
        fvm_status s = run_update(x, f, c, slots, &done);
        if (s || done)
            return s;
        if ((s = fvm_exec_instr(x, &f->instrs[c->product], slots)))
            return s;
    }
    fvm_value *vs[FVM_FUSED_MAX_IN];
    bool owned[FVM_FUSED_MAX_IN];
    for (int k = 0; k < c->nin; k++) {
        vs[k] = slots[c->in[k]];
        owned[k] = owns(c, slots, k);
    }
    if (!fits(c, vs)) { /* one by one, where the root stands */
        fvm_status s = FVM_OK;
        for (int m = 0; m < c->nmembers && s == FVM_OK; m++)
            s = fvm_exec_instr(x, &f->instrs[c->members[m]], slots);
        return s ? s : fvm_exec_instr(x, &f->instrs[c->root], slots);
    }
    const fvm_instr *root = &f->instrs[c->root];
    fvm_value *res = NULL;
    fvm_status s = run_lifted(x, c, vs, owned, &res);
    if (s) {
        fvm_diag_place_last(x->d, &root->loc, fvm_op_table[root->op].name, s == FVM_ERR_TYPE ? FVM_ERR_RUNTIME : s);
        return s;
    }
    slots[root->slot] = res;
    return FVM_OK;
}
