/* file.h - reading the files fedvm exchanges (checkpoints, plans, updates): regular files only, with a size cap, read as one snapshot; and outputs that must not be inputs.
 *
 * Every reader of a checkpoint, a --init or --resume file, a cross-device
 * plan, broadcast, update or partial goes through fvm_file_open: the path is
 * opened once (O_NONBLOCK | O_NOCTTY, so a FIFO or a terminal cannot block
 * the open) and the open descriptor is checked (fstat), so what is checked
 * is what is read: a FIFO, a device (/dev/zero), a socket or a directory is
 * refused by name before a byte is read, and so is a regular file past the
 * caller's cap. A file that changes size while it is read is an error, not
 * a mix of two versions. */
#ifndef FVM_FILE_H
#define FVM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "../vm/core/status.h"

/* An open regular file. */
typedef struct fvm_file {
    int fd; /* -1 when closed */
    const char *path; /* borrowed: the name errors give */
    uint64_t size; /* at the open */
} fvm_file;

/* Opens path for reading: a regular file (following symbolic links) of at
 * most max bytes. what names the file's role in errors ("a checkpoint", "a
 * plan"). Errors name path: FVM_ERR_IO when it cannot be opened or is not a
 * regular file ("is a FIFO (named pipe), not a regular file"), FVM_ERR_LIMIT
 * past max. f is closed (fd -1) on error. */
FVM_API fvm_status fvm_file_open(const char *path, const char *what, uint64_t max, fvm_file *f, fvm_diag *d);

/* Reads exactly n bytes at offset off (off + n <= f->size). A file that
 * has become shorter is FVM_ERR_IO ("changed while it was read"). */
FVM_API fvm_status fvm_file_read_at(fvm_file *f, uint64_t off, void *buf, size_t n, fvm_diag *d);

/* Checks that the file has not grown since it was opened (a byte past
 * f->size is FVM_ERR_IO, "changed while it was read"). */
FVM_API fvm_status fvm_file_check_end(fvm_file *f, fvm_diag *d);

/* Closes f; a closed f is a no-op. */
FVM_API void fvm_file_close(fvm_file *f);

/* The whole file at path (fvm_file_open's checks and cap) into *out
 * (malloc'd, NUL-terminated after its *len bytes; the caller frees it). */
FVM_API fvm_status fvm_file_read(const char *path, const char *what, uint64_t max, char **out, size_t *len,
                                 fvm_diag *d);

/* Whether paths a and b name the same file: the same device and inode when
 * both exist (a symbolic link is followed), else the same absolute path
 * once the directories are resolved (realpath of the directory, then the
 * last name). Paths that cannot be resolved are not the same. */
FVM_API bool fvm_file_same(const char *a, const char *b);

/* Whether path's directory (its last name removed; "." when it has none)
 * is the directory dir (device and inode). */
FVM_API bool fvm_file_in_dir(const char *path, const char *dir);

/* Refuses an output that is one of the inputs: out (what_out: "--out")
 * against in[0..n) (what_in[k]: "the state"; NULL entries are skipped).
 * FVM_ERR_USAGE naming out and the input it would overwrite. */
FVM_API fvm_status fvm_file_not_input(const char *out, const char *what_out, int n, const char *const *in,
                                      const char *const *what_in, fvm_diag *d);

#endif
