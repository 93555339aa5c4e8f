/* arena.h - bump allocator: everything of one loaded program lives in one arena, freed at once. */
#ifndef FVM_ARENA_H
#define FVM_ARENA_H

#include <stddef.h>

#include "api.h"

typedef struct fvm_arena_chunk fvm_arena_chunk;

/* Zero-initialise to use. Not thread-safe. */
typedef struct fvm_arena {
    fvm_arena_chunk *head;
    size_t used; /* bytes used in head */
    size_t total; /* bytes handed out, for statistics */
} fvm_arena;

/* Zeroed, 16-byte aligned memory valid until fvm_arena_free(); NULL when out of memory. */
FVM_API void *fvm_arena_alloc(fvm_arena *a, size_t size);
/* Overflow-checked n * size allocation. */
FVM_API void *fvm_arena_array(fvm_arena *a, size_t n, size_t size);
/* Copies of strings; NULL when out of memory. strndup copies exactly len bytes and adds a NUL. */
FVM_API char *fvm_arena_strdup(fvm_arena *a, const char *s);
FVM_API char *fvm_arena_strndup(fvm_arena *a, const char *s, size_t len);
/* printf into the arena. */
FVM_API char *fvm_arena_printf(fvm_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees every chunk; the arena is empty and reusable. */
FVM_API void fvm_arena_free(fvm_arena *a);

#endif
