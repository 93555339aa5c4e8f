/* bufcache.c - tensor buffers from a per-thread cache of freed ones, so that steady-state loops allocate nothing. */
#include "bufcache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Under AddressSanitizer a cached buffer's data is poisoned, so a use after
 * its last release is still reported. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

enum { BUF_ALIGN = 64 };

/* One thread's freed buffers, oldest first. Only its own thread touches it,
 * so it needs no lock: a buffer released on another thread than the one
 * that allocated it goes to the releasing thread's cache. */
typedef struct buf_cache {
    int n;
    bool registered; /* the thread-exit destructor knows it */
    size_t total;    /* allocation sizes of the cached buffers, summed */
    fvm_buf *slot[FVM_BUFCACHE_SLOTS];
} buf_cache;

static _Thread_local buf_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

/* The allocation size of a buffer for 'bytes' bytes of data. */
static size_t alloc_size(size_t bytes)
{
    return (sizeof(fvm_buf) + bytes + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1);
}

static void drop(buf_cache *c, int i)
{
    fvm_buf *b = c->slot[i];
    size_t total = alloc_size(b->bytes);
    UNPOISON(b->data, total - sizeof(fvm_buf));
    c->total -= total;
    memmove(c->slot + i, c->slot + i + 1, (size_t)(c->n - i - 1) * sizeof *c->slot);
    c->n--;
    free(b);
}

static void trim(buf_cache *c)
{
    while (c->n > 0)
        drop(c, c->n - 1);
}

static void cache_exit(void *c)
{
    trim(c);
}

static void make_key(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_exit) == 0;
}

fvm_buf *fvm_buf_alloc(size_t bytes)
{
    size_t total = alloc_size(bytes);
    buf_cache *c = &cache;
    fvm_buf *b = NULL;
    for (int i = c->n - 1; i >= 0; i--) /* the most recently freed first: warm in cache */
        if (alloc_size(c->slot[i]->bytes) == total) {
            b = c->slot[i];
            memmove(c->slot + i, c->slot + i + 1, (size_t)(c->n - i - 1) * sizeof *c->slot);
            c->n--;
            c->total -= total;
            UNPOISON(b->data, total - sizeof(fvm_buf));
            break;
        }
    if (!b && !(b = aligned_alloc(BUF_ALIGN, total)))
        return NULL;
    __atomic_store_n(&b->refs, 1, __ATOMIC_RELAXED);
    b->bytes = bytes;
    return b;
}

void fvm_buf_free(fvm_buf *b)
{
    if (!b)
        return;
    size_t total = alloc_size(b->bytes);
    buf_cache *c = &cache;
    if (!c->registered) {
        pthread_once(&cache_once, make_key);
        c->registered = cache_key_ok && pthread_setspecific(cache_key, c) == 0;
    }
    if (!c->registered || total > FVM_BUFCACHE_BYTES) {
        free(b);
        return;
    }
    while (c->n == FVM_BUFCACHE_SLOTS || c->total + total > FVM_BUFCACHE_BYTES)
        drop(c, 0);
    POISON(b->data, total - sizeof(fvm_buf));
    c->slot[c->n++] = b;
    c->total += total;
}

void fvm_bufcache_trim(void)
{
    trim(&cache);
}
