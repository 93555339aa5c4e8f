/* file.c - regular files read with a cap as one snapshot, and outputs that are not inputs (see file.h). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static fvm_status err_at(const char *path, fvm_status code, fvm_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fvm_status err_at(const char *path, fvm_status code, fvm_diag *d, const char *fmt, ...)
{
    fvm_loc loc = {.file = path};
    va_list ap;
    va_start(ap, fmt);
    fvm_status s = fvm_diag_vadd(d, code, &loc, fmt, ap);
    va_end(ap);
    return s;
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO (named pipe)"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

fvm_status fvm_file_open(const char *path, const char *what, uint64_t max, fvm_file *f, fvm_diag *d)
{
    *f = (fvm_file){.fd = -1, .path = path};
    /* O_NONBLOCK: opening a FIFO without a writer, or a terminal, must not block */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return err_at(path, FVM_ERR_IO, d, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fvm_status s = err_at(path, FVM_ERR_IO, d, "cannot read: %s", strerror(errno));
        close(fd);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_at(path, FVM_ERR_IO, d, "is %s, not a regular file: %s is read from a regular file only",
                      kind_of(st.st_mode), what);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return err_at(path, FVM_ERR_LIMIT, d, "is %llu bytes, larger than the limit of %llu bytes for %s",
                      (unsigned long long)st.st_size, (unsigned long long)max, what);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    f->fd = fd;
    f->size = (uint64_t)st.st_size;
    return FVM_OK;
}

fvm_status fvm_file_read_at(fvm_file *f, uint64_t off, void *buf, size_t n, fvm_diag *d)
{
    unsigned char *p = buf;
    for (size_t got = 0; got < n;) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        ssize_t r = pread(f->fd, p + got, want, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_at(f->path, FVM_ERR_IO, d, "cannot read: %s", strerror(errno));
        if (r == 0)
            return err_at(f->path, FVM_ERR_IO, d,
                          "changed while it was read: it had %llu bytes and ends at byte %llu now",
                          (unsigned long long)f->size, (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return FVM_OK;
}

fvm_status fvm_file_check_end(fvm_file *f, fvm_diag *d)
{
    unsigned char extra;
    for (;;) {
        ssize_t r = pread(f->fd, &extra, 1, (off_t)f->size);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_at(f->path, FVM_ERR_IO, d, "cannot read: %s", strerror(errno));
        if (r > 0)
            return err_at(f->path, FVM_ERR_IO, d, "changed while it was read: it had %llu bytes and has more now",
                          (unsigned long long)f->size);
        return FVM_OK;
    }
}

void fvm_file_close(fvm_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

fvm_status fvm_file_read(const char *path, const char *what, uint64_t max, char **out, size_t *len, fvm_diag *d)
{
    *out = NULL;
    *len = 0;
    fvm_file f;
    fvm_status s = fvm_file_open(path, what, max, &f, d);
    if (s)
        return s;
    char *buf = f.size < SIZE_MAX ? malloc((size_t)f.size + 1) : NULL;
    if (!buf)
        s = err_at(path, FVM_ERR_NOMEM, d, "out of memory for its %llu bytes", (unsigned long long)f.size);
    if (s == FVM_OK)
        s = fvm_file_read_at(&f, 0, buf, (size_t)f.size, d);
    if (s == FVM_OK)
        s = fvm_file_check_end(&f, d);
    fvm_file_close(&f);
    if (s) {
        free(buf);
        return s;
    }
    buf[f.size] = '\0';
    *out = buf;
    *len = (size_t)f.size;
    return FVM_OK;
}

/* The absolute path of path: realpath of the whole when it exists, else of
 * its directory with the last name appended. NULL when neither resolves
 * (malloc'd otherwise). */
static char *resolve(const char *path)
{
    char *r = realpath(path, NULL);
    if (r)
        return r;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return NULL;
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *rd = dir ? realpath(dir, NULL) : NULL;
    char *out = NULL;
    if (rd && asprintf(&out, "%s%s%s", rd, strcmp(rd, "/") ? "/" : "", base) < 0)
        out = NULL;
    free(dir);
    free(rd);
    return out;
}

bool fvm_file_same(const char *a, const char *b)
{
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) /* one exists, the other does not */
        return false;
    char *ra = resolve(a), *rb = resolve(b);
    bool same = ra && rb && !strcmp(ra, rb);
    free(ra);
    free(rb);
    return same;
}

bool fvm_file_in_dir(const char *path, const char *dir)
{
    const char *slash = strrchr(path, '/');
    char *pd = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    struct stat sa, sb;
    bool in = pd && stat(pd, &sa) == 0 && stat(dir, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    free(pd);
    return in;
}

fvm_status fvm_file_not_input(const char *out, const char *what_out, int n, const char *const *in,
                              const char *const *what_in, fvm_diag *d)
{
    for (int k = 0; k < n; k++)
        if (in[k] && fvm_file_same(out, in[k]))
            return err_at(out, FVM_ERR_USAGE, d,
                          "%s is %s%s%s%s: writing it would overwrite an input; give another file", what_out,
                          what_in[k], strcmp(out, in[k]) ? " (" : "", strcmp(out, in[k]) ? in[k] : "",
                          strcmp(out, in[k]) ? ")" : "");
    return FVM_OK;
}
