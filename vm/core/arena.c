/* arena.c - bump allocator with a linked list of chunks. */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fvm_arena_chunk {
    fvm_arena_chunk *next;
    size_t size;
    _Alignas(16) unsigned char data[];
};

enum { CHUNK_MIN = 64 * 1024, ALIGN = 16 };

void *fvm_arena_alloc(fvm_arena *a, size_t size)
{
    size = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (size == 0)
        size = ALIGN;
    if (!a->head || a->head->size - a->used < size) {
        size_t want = size > CHUNK_MIN ? size : CHUNK_MIN;
        if (want > SIZE_MAX - sizeof(fvm_arena_chunk))
            return NULL;
        fvm_arena_chunk *c = malloc(sizeof *c + want);
        if (!c)
            return NULL;
        c->size = want;
        /* A big one-off block goes behind the head so the head's free space is kept. */
        if (a->head && want == size && a->head->size - a->used > ALIGN) {
            c->next = a->head->next;
            a->head->next = c;
            a->total += size;
            memset(c->data, 0, size);
            return c->data;
        }
        c->next = a->head;
        a->head = c;
        a->used = 0;
    }
    void *p = a->head->data + a->used;
    a->used += size;
    a->total += size;
    memset(p, 0, size);
    return p;
}

void *fvm_arena_array(fvm_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return fvm_arena_alloc(a, n * size);
}

char *fvm_arena_strndup(fvm_arena *a, const char *s, size_t len)
{
    if (len == SIZE_MAX)
        return NULL;
    char *p = fvm_arena_alloc(a, len + 1);
    if (p && len)
        memcpy(p, s, len);
    return p;
}

char *fvm_arena_strdup(fvm_arena *a, const char *s)
{
    return fvm_arena_strndup(a, s, strlen(s));
}

char *fvm_arena_printf(fvm_arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : fvm_arena_alloc(a, (size_t)n + 1);
    if (p)
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void fvm_arena_free(fvm_arena *a)
{
    fvm_arena_chunk *c = a->head;
    while (c) {
        fvm_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}
