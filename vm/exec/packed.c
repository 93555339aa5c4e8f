/* packed.c - a context's transposed copies of matrices that products read transposed (see packed.h). */
#include "packed.h"

#include <stdint.h>

#include "exec.h"

typedef struct copy {
    fvm_tensor src; /* retained: its buffer stays as it is */
    fvm_tensor t; /* src^T */
    uint64_t used;
} copy;

struct fvm_packed {
    copy c[FVM_PACKED_SLOTS];
    int n;
    uint64_t clock;
};

bool fvm_packed_wanted(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb)
{
    if (!tb || a->dtype != FVM_DTYPE_F32 || b->dtype != FVM_DTYPE_F32 || a->shape.rank != 2 || b->shape.rank != 2)
        return false;
    int64_t m = ta ? a->shape.d[1] : a->shape.d[0], elems = b->shape.d[0] * b->shape.d[1];
    return m <= 8 && elems >= ((int64_t)1 << 15) && elems <= FVM_PACKED_MAX;
}

static bool same(const fvm_tensor *a, const fvm_tensor *b)
{
    return a->buf == b->buf && a->offset == b->offset && a->dtype == b->dtype && fvm_dims_equal(&a->shape, &b->shape);
}

static void drop(copy *c)
{
    fvm_tensor_release(&c->src);
    fvm_tensor_release(&c->t);
}

const fvm_tensor *fvm_packed_transpose(fvm_ctx *x, const fvm_tensor *b)
{
    fvm_packed *p = x->packed;
    if (!p && !(p = x->packed = calloc(1, sizeof *p)))
        return NULL;
    p->clock++;
    for (int i = 0; i < p->n; i++)
        if (same(&p->c[i].src, b)) {
            p->c[i].used = p->clock;
            return &p->c[i].t;
        }
    int at = p->n;
    if (at == FVM_PACKED_SLOTS) { /* the least recently used goes */
        at = 0;
        for (int i = 1; i < p->n; i++)
            if (p->c[i].used < p->c[at].used)
                at = i;
        drop(&p->c[at]);
        p->n--;
        p->c[at] = p->c[p->n];
        at = p->n;
    }
    fvm_dims shape = {.rank = 2, .d = {b->shape.d[1], b->shape.d[0]}};
    static const int perm[2] = {1, 0};
    copy *c = &p->c[at];
    if (x->vm->kernels->alloc(&c->t, FVM_DTYPE_F32, &shape, NULL))
        return NULL;
    if (x->vm->kernels->transpose(b, perm, &c->t, NULL)) {
        fvm_tensor_release(&c->t);
        return NULL;
    }
    c->src = *b;
    fvm_tensor_retain(&c->src);
    c->used = p->clock;
    p->n++;
    return &c->t;
}

void fvm_packed_free(fvm_packed *p)
{
    for (int i = 0; p && i < p->n; i++)
        drop(&p->c[i]);
    free(p);
}
