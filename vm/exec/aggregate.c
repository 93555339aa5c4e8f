/* aggregate.c - the fixed block-then-pairwise reduction tree over clients, merged as blocks arrive. */
#include "aggregate.h"

fvm_status fvm_tree_block(fvm_ctx *x, const fvm_reducer *r, int64_t lo, int64_t hi, fvm_value **out)
{
    fvm_value *acc = NULL;
    for (int64_t i = lo; i < hi; i++) {
        fvm_value *next = NULL;
        fvm_status s = r->step(x, r->u, acc, i, &next);
        fvm_value_release(acc);
        if (s)
            return s;
        acc = next;
    }
    *out = acc;
    return FVM_OK;
}

void fvm_tree_merger_init(fvm_tree_merger *m, const fvm_reducer *r)
{
    m->r = *r;
    m->depth = 0;
}

void fvm_tree_merger_clear(fvm_tree_merger *m)
{
    while (m->depth > 0)
        fvm_value_release(m->part[--m->depth]);
}

/* Merges the two partials on top into one. */
static fvm_status merge_top(fvm_ctx *x, fvm_tree_merger *m)
{
    fvm_value *a = m->part[m->depth - 2], *b = m->part[m->depth - 1], *ab = NULL;
    fvm_status s = m->r.merge(x, m->r.u, a, b, &ab);
    fvm_value_release(a);
    fvm_value_release(b);
    m->depth -= 2;
    if (s) {
        fvm_tree_merger_clear(m);
        return s;
    }
    m->blocks[m->depth] += m->blocks[m->depth + 1];
    m->part[m->depth++] = ab;
    return FVM_OK;
}

fvm_status fvm_tree_push(fvm_ctx *x, fvm_tree_merger *m, fvm_value *part)
{
    m->part[m->depth] = part;
    m->blocks[m->depth++] = 1;
    fvm_status s = FVM_OK;
    while (s == FVM_OK && m->depth >= 2 && m->blocks[m->depth - 1] == m->blocks[m->depth - 2])
        s = merge_top(x, m);
    return s;
}

fvm_status fvm_tree_finish(fvm_ctx *x, fvm_tree_merger *m, fvm_value **out)
{
    fvm_status s = FVM_OK;
    while (s == FVM_OK && m->depth >= 2)
        s = merge_top(x, m);
    if (s)
        return s;
    *out = m->part[0];
    m->depth = 0;
    return FVM_OK;
}

fvm_status fvm_tree_reduce(fvm_ctx *x, const fvm_reducer *r, int64_t n, fvm_value **out)
{
    fvm_tree_merger m;
    fvm_tree_merger_init(&m, r);
    for (int64_t lo = 0; lo < n; lo += FVM_AGG_BLOCK) {
        fvm_value *part = NULL;
        fvm_status s = fvm_tree_block(x, r, lo, lo + FVM_AGG_BLOCK < n ? lo + FVM_AGG_BLOCK : n, &part);
        if (s == FVM_OK)
            s = fvm_tree_push(x, &m, part);
        if (s) {
            fvm_tree_merger_clear(&m);
            return s;
        }
    }
    return fvm_tree_finish(x, &m, out);
}
