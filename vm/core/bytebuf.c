/* bytebuf.c - a growing byte buffer (see bytebuf.h). */
#include "bytebuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

fvm_status fvm_bytes_put(fvm_bytes *b, const void *src, size_t n, fvm_diag *d)
{
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2)
                return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
            cap *= 2;
        }
        unsigned char *p = realloc(b->data, cap);
        if (!p)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        b->data = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, src, n);
    b->len += n;
    return FVM_OK;
}

void fvm_bytes_free(fvm_bytes *b)
{
    free(b->data);
    *b = (fvm_bytes){0};
}
