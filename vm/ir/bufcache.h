/* bufcache.h - tensor buffers from a per-thread cache of freed ones, so that steady-state loops allocate nothing. */
#ifndef FVM_BUFCACHE_H
#define FVM_BUFCACHE_H

#include <stddef.h>

#include "tensor.h"

/* A buffer for 'bytes' bytes of data (> 0), 64-byte aligned, refs 1 and
 * ->bytes set, its data uninitialised; NULL when out of memory. It is a
 * freed buffer of the same allocation size when one is cached (the calling
 * thread's own first, then the shared reserve), else a new one from malloc. */
fvm_buf *fvm_buf_alloc(size_t bytes);

/* Gives back a buffer whose last reference is gone, for the next
 * fvm_buf_alloc of its size: into the calling thread's cache when that
 * thread allocated it, else into the shared reserve (under a lock), where
 * the thread that allocates that size finds it. A full cache frees its
 * oldest buffers (past FVM_BUFCACHE_SLOTS buffers or FVM_BUFCACHE_BYTES). A
 * thread's cache is freed when the thread exits. */
void fvm_buf_free(fvm_buf *b);

/* Frees every buffer in the calling thread's cache and in the reserve. */
void fvm_bufcache_trim(void);

/* Bounds of one cache (each thread's and the reserve). A training step of
 * the models in programs/ frees at most a few dozen buffers of at most a few
 * MB. */
#define FVM_BUFCACHE_SLOTS 256
#define FVM_BUFCACHE_BYTES ((size_t)64 << 20)

#endif
