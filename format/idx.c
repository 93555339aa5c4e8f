/* idx.c - IDX files (MNIST's format) through zlib's gzip reader. */
#include "idx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

/* Reads exactly n bytes; returns the bytes read, or -1 on a read error. */
static int64_t read_all(gzFile f, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(f, (unsigned char *)buf + got, (unsigned)want);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

fvm_status fvm_idx_read(const char *path, fvm_tensor *out, fvm_diag *d)
{
    memset(out, 0, sizeof *out);
    fvm_loc loc = {.file = path};
    /* gzopen reads plain files unchanged, so .gz and uncompressed files alike. */
    gzFile f = gzopen(path, "rb");
    if (!f)
        return fvm_diag_add(d, errno == ENOMEM ? FVM_ERR_NOMEM : FVM_ERR_IO, &loc, "cannot open: %s",
                            errno ? strerror(errno) : "out of memory");
    fvm_status s = FVM_OK;
    unsigned char head[4], dimb[4 * 255], extra;
    int errnum;
    if (read_all(f, head, 4) != 4 || head[0] != 0 || head[1] != 0) {
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "not an IDX file (no 00 00 magic)");
        goto done;
    }
    fvm_dtype dt;
    switch (head[2]) {
    case 0x08:
        dt = FVM_DTYPE_U8;
        break;
    case 0x0C:
        dt = FVM_DTYPE_I32;
        break;
    case 0x0D:
        dt = FVM_DTYPE_F32;
        break;
    case 0x0E:
        dt = FVM_DTYPE_F64;
        break;
    default:
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc,
                         "IDX type 0x%02x is not supported (0x08 bytes, 0x0C int32, "
                         "0x0D float32, 0x0E float64)",
                         head[2]);
        goto done;
    }
    fvm_dims shape = {.rank = head[3]};
    if (shape.rank < 1 || shape.rank > FVM_MAX_RANK) {
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "IDX file with %d dims (fedvm takes 1 to %d)", shape.rank,
                         FVM_MAX_RANK);
        goto done;
    }
    if (read_all(f, dimb, (size_t)shape.rank * 4) != shape.rank * 4) {
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "IDX header truncated");
        goto done;
    }
    for (int k = 0; k < shape.rank; k++)
        shape.d[k] = (int64_t)dimb[4 * k] << 24 | dimb[4 * k + 1] << 16 | dimb[4 * k + 2] << 8 | dimb[4 * k + 3];
    if ((s = fvm_dims_check_size(&shape, dt, d))) {
        fvm_diag_locate_last(d, &loc);
        goto done;
    }
    /* Nothing is allocated for data the file does not hold: a plain file's
     * size is known; a compressed one is read into a buffer that grows with
     * the data read, up to the size the dims say. */
    size_t bytes = (size_t)fvm_dims_count(&shape) * fvm_dtype_size(dt), head_len = 4 + 4 * (size_t)shape.rank;
    struct stat st;
    int64_t got = 0;
    if (gzdirect(f) && stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size != head_len + bytes) {
        got = (uint64_t)st.st_size < head_len + bytes ? (int64_t)(st.st_size - (off_t)head_len) : (int64_t)bytes;
    } else if (gzdirect(f)) {
        if ((s = fvm_tensor_alloc(out, dt, &shape, d)))
            goto done;
        got = bytes ? read_all(f, fvm_tensor_data(out), bytes) : 0;
    } else {
        unsigned char *buf = NULL;
        size_t cap = 0;
        while (got >= 0 && (size_t)got == cap && cap < bytes) {
            size_t want = cap ? (cap < bytes / 2 ? 2 * cap : bytes) : (bytes < (1u << 20) ? bytes : (1u << 20));
            unsigned char *nb = realloc(buf, want);
            if (!nb) {
                free(buf);
                s = fvm_diag_add(d, FVM_ERR_NOMEM, &loc, "out of memory reading the file");
                goto done;
            }
            buf = nb;
            int64_t r = read_all(f, buf + cap, want - cap);
            got = r < 0 ? -1 : got + r;
            cap = want;
        }
        if (got >= 0 && (size_t)got == bytes && (s = fvm_tensor_alloc(out, dt, &shape, d)) == FVM_OK && bytes)
            memcpy(fvm_tensor_data(out), buf, bytes);
        free(buf);
        if (s)
            goto done;
    }
    if (got < 0) {
        s = fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot read: %s", gzerror(f, &errnum));
        goto done;
    }
    if ((size_t)got != bytes || read_all(f, &extra, 1) != 0) {
        char dims[FVM_DIMS_STR];
        fvm_dims_format(&shape, dims);
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "IDX data of shape %s should be %zu bytes, found %s", dims, bytes,
                         (size_t)got != bytes ? "fewer" : "more");
        goto done;
    }
    /* IDX values are big-endian. */
    size_t es = fvm_dtype_size(dt);
    unsigned char *p = fvm_tensor_data(out);
    const uint16_t probe = 1;
    if (es > 1 && *(const unsigned char *)&probe == 1)
        for (size_t i = 0; i < bytes; i += es)
            for (size_t a = 0, b = es - 1; a < b; a++, b--) {
                unsigned char t = p[i + a];
                p[i + a] = p[i + b];
                p[i + b] = t;
            }
done:
    gzclose(f);
    if (s)
        fvm_tensor_release(out);
    return s;
}
