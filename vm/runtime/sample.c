/* sample.c - clients sampled uniformly without replacement (see sample.h). */
#include "sample.h"

#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"
#include "../ir/keys.h"
#include "../core/rand.h"

#define SAMPLE_STREAM 0xffffffffu

/* The positions a partial Fisher-Yates shuffle has moved: an open-addressing
 * map from position to the value now there (absent: the position itself). */
typedef struct moved {
    int64_t *pos, *val;
    uint64_t mask;
} moved;

static uint64_t slot_of(const moved *m, int64_t pos)
{
    uint64_t h = (uint64_t)pos * 0x9E3779B97F4A7C15ull;
    uint64_t i = (h >> 17) & m->mask;
    while (m->pos[i] != -1 && m->pos[i] != pos)
        i = (i + 1) & m->mask;
    return i;
}

static int64_t get_at(const moved *m, int64_t pos)
{
    uint64_t i = slot_of(m, pos);
    return m->pos[i] == -1 ? pos : m->val[i];
}

static void set_at(moved *m, int64_t pos, int64_t val)
{
    uint64_t i = slot_of(m, pos);
    m->pos[i] = pos;
    m->val[i] = val;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

fvm_status fvm_sample_clients(uint64_t seed, int64_t round, int64_t n, int64_t k, int64_t *out, fvm_diag *d)
{
    if (n < 0 || k < 0 || k > n)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "cannot sample %lld of %lld clients", (long long)k, (long long)n);
    /* Every swap touches two positions: 2k entries at most, kept under half full. */
    uint64_t cap = 16;
    while (cap < 4 * (uint64_t)k)
        cap <<= 1;
    moved m = {malloc(cap * sizeof *m.pos), malloc(cap * sizeof *m.val), cap - 1};
    if (!m.pos || !m.val) {
        free(m.pos);
        free(m.val);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    for (uint64_t i = 0; i < cap; i++)
        m.pos[i] = -1;
    uint32_t base[2], stream[2];
    fvm_prng_key(seed, base);
    fvm_prng_fold_in(base, SAMPLE_STREAM, stream);
    fvm_rand r;
    fvm_rand_init_fold(&r, stream, (uint32_t)round);
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i + (int64_t)fvm_rand_below(&r, (uint64_t)(n - i));
        int64_t vi = get_at(&m, i), vj = get_at(&m, j);
        set_at(&m, i, vj);
        set_at(&m, j, vi);
        out[i] = vj;
    }
    free(m.pos);
    free(m.val);
    qsort(out, (size_t)k, sizeof *out, cmp_i64);
    return FVM_OK;
}
