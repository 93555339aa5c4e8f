/* bytebuf.h - a growing byte buffer: what the mpi backend's wire encoding and safetensors files in memory are built in. */
#ifndef FVM_BYTEBUF_H
#define FVM_BYTEBUF_H

#include <stddef.h>

#include "status.h"

/* A growing byte buffer. Zero-initialise; fvm_bytes_free frees it. */
typedef struct fvm_bytes {
    unsigned char *data;
    size_t len, cap;
} fvm_bytes;

/* Appends the n bytes at src to b, doubling its capacity (from 256 bytes)
 * as needed; FVM_ERR_NOMEM (in d) when it cannot grow, b unchanged. */
fvm_status fvm_bytes_put(fvm_bytes *b, const void *src, size_t n, fvm_diag *d);

void fvm_bytes_free(fvm_bytes *b);

#endif
