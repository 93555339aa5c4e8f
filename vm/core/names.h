/* names.h - a map from names to ints in an arena: a function's names to its slots (the checker), the names a
 * body binds (the passes that build bodies). */
#ifndef FVM_NAMES_H
#define FVM_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"

/* Open addressing (FNV-1a, linear probing), at most half full; the keys
 * are kept, not copied (they live as long as the map: arena strings).
 * Everything lives in the arena, so there is nothing to free. */
typedef struct fvm_names {
    fvm_arena *a;
    const char **keys;
    int *vals;
    size_t cap, n;
} fvm_names;

/* An empty map in a, with room for hint names before it grows. */
void fvm_names_init(fvm_names *m, fvm_arena *a, size_t hint);
/* The value bound to key, or missing when none is. */
int fvm_names_get(const fvm_names *m, const char *key, int missing);
/* Binds key to v (replacing a binding of key); false when the arena is
 * out of memory (m then unchanged). */
bool fvm_names_put(fvm_names *m, const char *key, int v);
/* Forgets every binding (the room stays). */
void fvm_names_clear(fvm_names *m);

#endif
