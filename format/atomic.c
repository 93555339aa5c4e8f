/* atomic.c - replacing a file atomically, and removing the temporaries of writers that died (see atomic.h). */
#include "atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char TMP_SUFFIX[] = ".tmp"; /* then mkstemp's six letters or digits */

static fvm_status io_error(const char *path, fvm_diag *d)
{
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot write: %s", strerror(errno));
}

/* fsync of a file or directory by name; 0 or -1 (errno set). */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* path's directory ("." when it has none), malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

/* The NAME of a temporary NAME.tmpXXXXXX (malloc'd), or NULL for other names. */
static char *temp_owner(const char *entry)
{
    size_t n = strlen(entry), ns = sizeof TMP_SUFFIX - 1;
    if (n < ns + 6 + 1 || strncmp(entry + n - 6 - ns, TMP_SUFFIX, ns))
        return NULL;
    for (size_t i = n - 6; i < n; i++) {
        char c = entry[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return NULL;
    }
    return strndup(entry, n - 6 - ns);
}

/* Removes entry of directory dfd when it is a regular file whose lock can
 * be taken (its writer is gone) and still the file that was locked. */
static bool remove_stale(int dfd, const char *entry)
{
    int fd = openat(dfd, entry, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat a, b;
    bool gone = false;
    if (fstat(fd, &a) == 0 && S_ISREG(a.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        fstatat(dfd, entry, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        gone = unlinkat(dfd, entry, 0) == 0;
    close(fd); /* releases the lock */
    return gone;
}

void fvm_atomic_clean(const char *dir, bool (*accept)(const char *name, void *ctx), void *ctx, int *removed)
{
    if (removed)
        *removed = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dh = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!dh) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    for (struct dirent *e; (e = readdir(dh));) {
        char *owner = temp_owner(e->d_name);
        if (owner && (!accept || accept(owner, ctx)) && remove_stale(dfd, e->d_name) && removed)
            ++*removed;
        free(owner);
    }
    closedir(dh); /* closes dfd */
}

/* Removes the file at path when it is a regular file whose lock can be
 * taken (its writer is gone) and still the file that was locked. */
static bool remove_stale_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat a, b;
    bool gone = false;
    if (fstat(fd, &a) == 0 && S_ISREG(a.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 && lstat(path, &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        gone = unlink(path) == 0;
    close(fd);
    return gone;
}

/* A new temporary beside path, *tmp (a buffer of n bytes) naming it: the
 * names path.tmp000000, path.tmp000001, ... are tried in turn, so the
 * temporary a dead writer of path left is found by name, without listing
 * the directory (whose size would make every save slower), and replaced;
 * after 64 names held by live writers, a random name (mkstemp's). -1
 * with errno set when no file could be created. */
static int create_temp(const char *path, char *tmp, size_t n)
{
    for (unsigned i = 0, tries = 0; i < 64 && tries < 256; tries++) {
        snprintf(tmp, n, "%s%s%06u", path, TMP_SUFFIX, i);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -1;
        if (!remove_stale_path(tmp)) /* a live writer's (or not a file of ours): the next name */
            i++;
    }
    snprintf(tmp, n, "%s%sXXXXXX", path, TMP_SUFFIX);
    return mkostemp(tmp, O_CLOEXEC);
}

fvm_status fvm_atomic_open(const char *path, char **tmp, int *fd, fvm_diag *d)
{
    size_t n = strlen(path) + 16;
    *tmp = malloc(n);
    if (!*tmp)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    *fd = create_temp(path, *tmp, n);
    if (*fd < 0) {
        fvm_status s = io_error(path, d);
        free(*tmp);
        *tmp = NULL;
        return s;
    }
    /* held until the rename or the process's end: the temporary is not stale */
    flock(*fd, LOCK_EX | LOCK_NB);
    /* the temporary is created private; give it the usual permissions. */
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
    char *dir = dir_of(path);
    if (dir)
        sync_path(dir, O_RDONLY | O_DIRECTORY); /* best effort: the rename itself is done */
    free(dir);
    return FVM_OK;
}

fvm_status fvm_atomic_begin(fvm_atomic *w, const char *path, fvm_diag *d)
{
    *w = (fvm_atomic){.fd = -1};
    if (!(w->path = strdup(path)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_status s = fvm_atomic_open(path, &w->tmp, &w->fd, d);
    if (s) {
        free(w->path);
        *w = (fvm_atomic){.fd = -1};
    }
    return s;
}

fvm_status fvm_atomic_put(fvm_atomic *w, const void *data, size_t len, fvm_diag *d)
{
    const unsigned char *p = data;
    for (size_t off = 0; off < len;) {
        ssize_t r = write(w->fd, p + off, len - off > (1u << 30) ? (1u << 30) : len - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ENOSPC;
            return io_error(w->path, d);
        }
        off += (size_t)r;
    }
    return FVM_OK;
}

fvm_status fvm_atomic_sync(fvm_atomic *w, fvm_diag *d)
{
    if (w->synced)
        return FVM_OK;
    if (fsync(w->fd) != 0)
        return io_error(w->path, d);
    w->synced = true;
    return FVM_OK;
}

void fvm_atomic_abort(fvm_atomic *w)
{
    if (w->tmp) {
        unlink(w->tmp);
        if (w->fd >= 0)
            close(w->fd);
    }
    free(w->tmp);
    free(w->path);
    *w = (fvm_atomic){.fd = -1};
}

fvm_status fvm_atomic_end(fvm_atomic *w, fvm_diag *d)
{
    fvm_status s = fvm_atomic_sync(w, d);
    if (s == FVM_OK && rename(w->tmp, w->path) != 0)
        s = io_error(w->path, d);
    if (s) {
        fvm_atomic_abort(w);
        return s;
    }
    /* close after the rename: the lock covers the temporary until it is gone */
    int rc = close(w->fd);
    w->fd = -1;
    char *dir = dir_of(w->path);
    if (dir)
        sync_path(dir, O_RDONLY | O_DIRECTORY); /* best effort: the rename itself is done */
    free(dir);
    (void)rc; /* synced already: a close error cannot lose data */
    free(w->tmp);
    free(w->path);
    *w = (fvm_atomic){.fd = -1};
    return FVM_OK;
}

fvm_status fvm_atomic_rename(const char *from, const char *path, fvm_diag *d)
{
    if (rename(from, path) != 0)
        return io_error(path, d);
    char *dir = dir_of(path);
    if (dir)
        sync_path(dir, O_RDONLY | O_DIRECTORY); /* best effort: the rename itself is done */
    free(dir);
    return FVM_OK;
}

fvm_status fvm_atomic_write(const char *path, const void *data, size_t len, fvm_diag *d)
{
    fvm_atomic w;
    fvm_status s = fvm_atomic_begin(&w, path, d);
    if (s == FVM_OK && (s = fvm_atomic_put(&w, data, len, d)) != FVM_OK)
        fvm_atomic_abort(&w);
    else if (s == FVM_OK)
        s = fvm_atomic_end(&w, d);
    return s;
}
