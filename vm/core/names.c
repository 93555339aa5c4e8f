/* names.c - a map from names to ints in an arena (names.h). */
#include "names.h"

#include <stdint.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Where key is, or the empty place it would go. */
static size_t place(const fvm_names *m, const char *key)
{
    size_t i = hash(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key))
        i = (i + 1) & (m->cap - 1);
    return i;
}

void fvm_names_init(fvm_names *m, fvm_arena *a, size_t hint)
{
    *m = (fvm_names){.a = a};
    size_t cap = 16;
    while (cap < 2 * hint + 2)
        cap *= 2;
    const char **keys = fvm_arena_array(a, cap, sizeof *keys);
    int *vals = fvm_arena_array(a, cap, sizeof *vals);
    if (keys && vals) /* else the first binding tries again */
        m->keys = keys, m->vals = vals, m->cap = cap;
}

int fvm_names_get(const fvm_names *m, const char *key, int missing)
{
    if (!m->cap)
        return missing;
    size_t i = place(m, key);
    return m->keys[i] ? m->vals[i] : missing;
}

bool fvm_names_put(fvm_names *m, const char *key, int v)
{
    if (m->cap) {
        size_t i = place(m, key);
        if (m->keys[i]) {
            m->vals[i] = v;
            return true;
        }
    }
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        const char **keys = fvm_arena_array(m->a, cap, sizeof *keys);
        int *vals = fvm_arena_array(m->a, cap, sizeof *vals);
        if (!keys || !vals)
            return false;
        fvm_names old = *m;
        m->keys = keys, m->vals = vals, m->cap = cap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i]) {
                size_t j = place(m, old.keys[i]);
                m->keys[j] = old.keys[i];
                m->vals[j] = old.vals[i];
            }
    }
    size_t i = place(m, key);
    m->keys[i] = key;
    m->vals[i] = v;
    m->n++;
    return true;
}

void fvm_names_clear(fvm_names *m)
{
    if (m->cap)
        memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->n = 0;
}
