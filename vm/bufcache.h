/* bufcache.h - tensor buffers from a per-thread cache of freed ones, so that steady-state loops allocate nothing. */
#ifndef FVM_BUFCACHE_H
#define FVM_BUFCACHE_H

#include <stddef.h>

#include "tensor.h"

/* A buffer for 'bytes' bytes of data (> 0), 64-byte aligned, refs 1 and
 * ->bytes set, its data uninitialised; NULL when out of memory. It is a
 * buffer the calling thread freed earlier with the same allocation size when
 * one is cached, else a new one from malloc. */
fvm_buf *fvm_buf_alloc(size_t bytes);

/* Gives back a buffer whose last reference is gone: it is kept in the calling
 * thread's cache for the next fvm_buf_alloc of its size, or freed when the
 * cache is full (FVM_BUFCACHE_SLOTS buffers or FVM_BUFCACHE_BYTES in all; the
 * oldest go first). A thread's cache is freed when the thread exits. */
void fvm_buf_free(fvm_buf *b);

/* Frees every buffer in the calling thread's cache. */
void fvm_bufcache_trim(void);

/* Bounds of one thread's cache. A training step of the models in programs/
 * frees at most a few dozen buffers of at most a few MB. */
#define FVM_BUFCACHE_SLOTS 256
#define FVM_BUFCACHE_BYTES ((size_t)64 << 20)

#endif
