/* aggregate.c - the fixed block-then-pairwise reduction tree over clients. */
#include "aggregate.h"

#include <stdlib.h>

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

fvm_status fvm_tree_merge(fvm_ctx *x, const fvm_reducer *r, fvm_value **parts, int64_t k, fvm_value **out)
{
    fvm_status s = FVM_OK;
    while (k > 1 && s == FVM_OK) {
        int64_t j = 0;
        for (int64_t i = 0; i + 1 < k; i += 2) {
            fvm_value *m = NULL;
            if (s == FVM_OK)
                s = r->merge(x, r->u, parts[i], parts[i + 1], &m);
            fvm_value_release(parts[i]);
            fvm_value_release(parts[i + 1]);
            parts[j++] = m;
        }
        if (k % 2)
            parts[j++] = parts[k - 1];
        k = j;
    }
    if (s) {
        for (int64_t i = 0; i < k; i++)
            fvm_value_release(parts[i]);
        return s;
    }
    *out = parts[0];
    return FVM_OK;
}

fvm_status fvm_tree_reduce(fvm_ctx *x, const fvm_reducer *r, int64_t n, fvm_value **out)
{
    int64_t k = (n + FVM_AGG_BLOCK - 1) / FVM_AGG_BLOCK;
    fvm_value **parts = calloc((size_t)k, sizeof *parts);
    if (!parts)
        return fvm_nomem(x);
    for (int64_t b = 0; b < k; b++) {
        int64_t lo = b * FVM_AGG_BLOCK, hi = lo + FVM_AGG_BLOCK < n ? lo + FVM_AGG_BLOCK : n;
        fvm_status s = fvm_tree_block(x, r, lo, hi, &parts[b]);
        if (s) {
            for (int64_t i = 0; i < b; i++)
                fvm_value_release(parts[i]);
            free(parts);
            return s;
        }
    }
    fvm_status s = fvm_tree_merge(x, r, parts, k, out);
    free(parts);
    return s;
}
