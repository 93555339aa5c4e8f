/* atomic.c - replacing a file atomically (see atomic.h). */
#include "atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static fvm_status io_error(const char *path, fvm_diag *d)
{
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot write: %s", strerror(errno));
}

/* fsync of a file or directory by name; 0 or -1 (errno set). */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

fvm_status fvm_atomic_open(const char *path, char **tmp, int *fd, fvm_diag *d)
{
    size_t n = strlen(path) + 16;
    *tmp = malloc(n);
    if (!*tmp)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    snprintf(*tmp, n, "%s.tmpXXXXXX", path);
    *fd = mkstemp(*tmp);
    if (*fd < 0) {
        fvm_status s = io_error(path, d);
        free(*tmp);
        *tmp = NULL;
        return s;
    }
    /* mkstemp makes the file private; give it the usual permissions. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(*fd, 0666 & ~mask) != 0) {
        fvm_status s = io_error(path, d);
        close(*fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return s;
    }
    return FVM_OK;
}

fvm_status fvm_atomic_commit(const char *tmp, const char *path, fvm_diag *d)
{
    if (sync_path(tmp, O_RDONLY) != 0 || rename(tmp, path) != 0) {
        fvm_status s = io_error(path, d);
        unlink(tmp);
        return s;
    }
    char *dir = strdup(path);
    if (dir)
        sync_path(dirname(dir), O_RDONLY | O_DIRECTORY); /* best effort: the rename itself is done */
    free(dir);
    return FVM_OK;
}

fvm_status fvm_atomic_write(const char *path, const void *data, size_t len, fvm_diag *d)
{
    char *tmp;
    int fd;
    fvm_status s = fvm_atomic_open(path, &tmp, &fd, d);
    if (s)
        return s;
    const char *p = data;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s = io_error(path, d);
            break;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 && s == FVM_OK)
        s = io_error(path, d);
    if (s == FVM_OK)
        s = fvm_atomic_commit(tmp, path, d);
    else
        unlink(tmp);
    free(tmp);
    return s;
}
