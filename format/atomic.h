/* atomic.h - replacing a file atomically: write beside it, fsync, rename, fsync the directory.
 *
 * A reader never sees a partial file at 'path', and a process killed at any
 * point leaves either the old file or the new one (plus, at worst, a stray
 * temporary named path.tmpXXXXXX). */
#ifndef FVM_ATOMIC_H
#define FVM_ATOMIC_H

#include <stddef.h>

#include "../vm/status.h"

/* Creates a new temporary file beside path (path.tmpXXXXXX) with the
 * permissions a new file gets (0666 less the umask). *tmp (malloc'd, the
 * caller frees it) names it and *fd is open for writing. Errors name path. */
fvm_status fvm_atomic_open(const char *path, char **tmp, int *fd, fvm_diag *d);

/* Makes tmp (written and closed) durable and renames it to path, then
 * fsyncs path's directory. On failure tmp is removed. tmp stays the
 * caller's to free. */
fvm_status fvm_atomic_commit(const char *tmp, const char *path, fvm_diag *d);

/* Replaces path with len bytes of data (open, write, commit). */
fvm_status fvm_atomic_write(const char *path, const void *data, size_t len, fvm_diag *d);

#endif
