/* atomic.h - replacing a file atomically: write beside it, fsync, rename, fsync the directory; and the temporaries of writers that died.
 *
 * A reader never sees a partial file at 'path', and a process killed at any
 * point leaves either the old file or the new one, plus at worst its
 * temporary, path.tmpXXXXXX (six letters or digits: path.tmp000000, the
 * next free of path.tmp000001, ... when other writers of path hold those).
 * A writer holds an exclusive flock on its temporary until the rename, so
 * a temporary whose lock can be taken is one whose writer has died (a lock
 * goes with its process, SIGKILL included): the next write of the same
 * path finds such a temporary by name and replaces it (fvm_atomic_begin,
 * fvm_atomic_open; no directory listing, so a save costs the same in a
 * directory of 10,000 checkpoints), and fvm_atomic_clean removes them from
 * a whole directory. Nothing else is ever removed: only names of that exact
 * form, regular files, unlocked. */
#ifndef FVM_ATOMIC_H
#define FVM_ATOMIC_H

#include <stdbool.h>
#include <stddef.h>

#include "../vm/core/status.h"

/* A file being replaced. Zero-initialise (fd 0 is never used: begin sets it). */
typedef struct fvm_atomic {
    char *path; /* the file to replace (malloc'd copy) */
    char *tmp; /* the temporary beside it (malloc'd) */
    int fd; /* open for writing and locked; -1 once committed or aborted */
    bool synced; /* fvm_atomic_sync succeeded */
} fvm_atomic;

/* Creates a new temporary beside path (replacing a stale one of path's)
 * with the permissions a new file gets (0666 less the umask), open and
 * locked. Errors (FVM_ERR_IO) name path; w is then clear (fd -1). */
FVM_API fvm_status fvm_atomic_begin(fvm_atomic *w, const char *path, fvm_diag *d);

/* Appends len bytes to the temporary. FVM_ERR_IO naming w->path ("No space
 * left on device", ...). */
FVM_API fvm_status fvm_atomic_put(fvm_atomic *w, const void *data, size_t len, fvm_diag *d);

/* Makes the temporary durable (fsync); a full disk that a file system
 * reports only now (NFS, delayed allocation) is an error here. Idempotent. */
FVM_API fvm_status fvm_atomic_sync(fvm_atomic *w, fvm_diag *d);

/* Syncs (unless done), renames the temporary to path, fsyncs the directory,
 * releases w. On failure the temporary is removed and path is as it was. */
FVM_API fvm_status fvm_atomic_end(fvm_atomic *w, fvm_diag *d);

/* Removes the temporary and releases w; a released or zeroed w is a no-op. */
FVM_API void fvm_atomic_abort(fvm_atomic *w);

/* Removes from dir the stale temporaries NAME.tmpXXXXXX whose NAME accept
 * takes (accept NULL: any NAME); *removed (optional) counts them. Best
 * effort: a file it cannot inspect is left alone. */
FVM_API void fvm_atomic_clean(const char *dir, bool (*accept)(const char *name, void *ctx), void *ctx, int *removed);

/* The older interface, kept for writers that close before committing:
 * creates a new temporary beside path as begin does, *tmp (malloc'd, the
 * caller frees it) names it and *fd is open for writing and locked (until
 * the caller closes it). Errors name path. */
FVM_API fvm_status fvm_atomic_open(const char *path, char **tmp, int *fd, fvm_diag *d);

/* Makes tmp (written and closed) durable and renames it to path, then
 * fsyncs path's directory. On failure tmp is removed. tmp stays the
 * caller's to free. */
FVM_API fvm_status fvm_atomic_commit(const char *tmp, const char *path, fvm_diag *d);

/* Renames from, a complete file already durable (one written through this
 * module), to path, which it replaces atomically, then fsyncs path's
 * directory. FVM_ERR_IO naming path; on failure both files are as they
 * were. */
FVM_API fvm_status fvm_atomic_rename(const char *from, const char *path, fvm_diag *d);

/* Replaces path with len bytes of data (begin, put, end). */
FVM_API fvm_status fvm_atomic_write(const char *path, const void *data, size_t len, fvm_diag *d);

#endif
