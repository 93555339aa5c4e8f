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

/* Freed buffers, oldest first. Each thread has one of its own, which needs
 * no lock, for the buffers it allocated itself. A buffer released on
 * another thread (a client's result, made by a worker and released by the
 * thread that aggregates) goes to the shared reserve instead, under its
 * lock, where the thread that allocated it finds it again: otherwise it
 * would sit in a cache whose thread never asks for its size, while its own
 * thread allocated fresh memory (and took its page faults) every round. */
typedef struct buf_cache {
    int n;
    size_t total; /* allocation sizes of the cached buffers, summed */
    fvm_buf *slot[FVM_BUFCACHE_SLOTS];
} buf_cache;

static _Thread_local buf_cache cache;
static _Thread_local bool registered; /* the thread-exit destructor knows this thread's cache */
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

static buf_cache reserve;
static pthread_mutex_t reserve_lock = PTHREAD_MUTEX_INITIALIZER;

/* The allocation size of a buffer for 'bytes' bytes of data. */
static size_t alloc_size(size_t bytes)
{
    return (sizeof(fvm_buf) + bytes + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1);
}

/* Removes slot i from c and returns its buffer. */
static fvm_buf *take(buf_cache *c, int i)
{
    fvm_buf *b = c->slot[i];
    size_t total = alloc_size(b->bytes);
    UNPOISON(b->data, total - sizeof(fvm_buf));
    c->total -= total;
    memmove(c->slot + i, c->slot + i + 1, (size_t)(c->n - i - 1) * sizeof *c->slot);
    c->n--;
    return b;
}

/* The most recently freed buffer of allocation size total in c (the one
 * most likely still in the CPU's caches), or NULL. */
static fvm_buf *find(buf_cache *c, size_t total)
{
    for (int i = c->n - 1; i >= 0; i--)
        if (alloc_size(c->slot[i]->bytes) == total)
            return take(c, i);
    return NULL;
}

/* Keeps b in c, freeing the oldest buffers to make room (or b itself when it
 * is larger than a whole cache). */
static void keep(buf_cache *c, fvm_buf *b)
{
    size_t total = alloc_size(b->bytes);
    if (total > FVM_BUFCACHE_BYTES) {
        free(b);
        return;
    }
    while (c->n == FVM_BUFCACHE_SLOTS || c->total + total > FVM_BUFCACHE_BYTES)
        free(take(c, 0));
    POISON(b->data, total - sizeof(fvm_buf));
    c->slot[c->n++] = b;
    c->total += total;
}

static void trim(buf_cache *c)
{
    while (c->n > 0)
        free(take(c, c->n - 1));
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
    fvm_buf *b = find(&cache, total);
    if (!b) {
        pthread_mutex_lock(&reserve_lock);
        b = find(&reserve, total);
        pthread_mutex_unlock(&reserve_lock);
    }
    if (!b && !(b = aligned_alloc(BUF_ALIGN, total)))
        return NULL;
    __atomic_store_n(&b->refs, 1, __ATOMIC_RELAXED);
    b->bytes = bytes;
    b->home = &cache;
    return b;
}

void fvm_buf_free(fvm_buf *b)
{
    if (!b)
        return;
    if (b->home != &cache) {
        pthread_mutex_lock(&reserve_lock);
        keep(&reserve, b);
        pthread_mutex_unlock(&reserve_lock);
        return;
    }
    if (!registered) {
        pthread_once(&cache_once, make_key);
        registered = cache_key_ok && pthread_setspecific(cache_key, &cache) == 0;
        if (!registered) {
            free(b);
            return;
        }
    }
    keep(&cache, b);
}

void fvm_bufcache_trim(void)
{
    trim(&cache);
    pthread_mutex_lock(&reserve_lock);
    trim(&reserve);
    pthread_mutex_unlock(&reserve_lock);
}
