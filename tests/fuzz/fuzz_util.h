/* fuzz_util.h - what the libFuzzer targets share: a scratch directory, files written from the input,
 * inputs split into parts, and the checks every decoder's errors must pass. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../vm/core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the run with a message: libFuzzer reports the abort as a crash and
 * saves the input. For broken promises that no sanitizer sees. */
#define FUZZ_FAIL(...) \
    do { \
        fprintf(stderr, "fuzz: %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr); \
        abort(); \
    } while (0)

static char fuzz_dir_path[256];

static inline void fuzz_rm_tree(const char *path)
{
    DIR *dh = opendir(path);
    if (dh) {
        for (struct dirent *e; (e = readdir(dh));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            fuzz_rm_tree(sub);
        }
        closedir(dh);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static inline void fuzz_dir_remove(void)
{
    if (fuzz_dir_path[0])
        fuzz_rm_tree(fuzz_dir_path);
}

/* This process's scratch directory (in /dev/shm when there is one, so the
 * files the targets write stay in memory), removed at exit. */
static inline const char *fuzz_dir(void)
{
    if (fuzz_dir_path[0])
        return fuzz_dir_path;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/fedvm-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path))
        FUZZ_FAIL("cannot make a scratch directory under %s", base);
    atexit(fuzz_dir_remove);
    return fuzz_dir_path;
}

/* path = the scratch directory / name, into buf. */
static inline const char *fuzz_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", fuzz_dir(), name);
    return buf;
}

/* Writes len bytes to path (replacing it). */
static inline void fuzz_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        FUZZ_FAIL("cannot write %s", path);
    for (size_t at = 0; at < len;) {
        ssize_t r = write(fd, (const char *)data + at, len - at);
        if (r <= 0)
            FUZZ_FAIL("cannot write %s", path);
        at += (size_t)r;
    }
    close(fd);
}

/* Splits data at every occurrence of sep into at most max parts (the last
 * part takes the rest); returns the number of parts (at least 1). */
typedef struct fuzz_part {
    const uint8_t *p;
    size_t n;
} fuzz_part;

static inline int fuzz_split(const uint8_t *data, size_t size, const char *sep, fuzz_part *parts, int max)
{
    size_t m = strlen(sep), start = 0;
    int n = 0;
    for (size_t i = 0; n < max - 1 && i + m <= size;) {
        if (!memcmp(data + i, sep, m)) {
            parts[n++] = (fuzz_part){data + start, i - start};
            i += m;
            start = i;
        } else {
            i++;
        }
    }
    parts[n++] = (fuzz_part){data + start, size - start};
    return n;
}

/* A failed call must say why: at least one error, each with a message and,
 * when 'located', a file. (A call that succeeds may have left nothing.) */
static inline void fuzz_check_errors(fvm_status s, const fvm_diag *d, int located)
{
    if (getenv("FUZZ_VERBOSE")) { /* for looking at what an input does */
        fprintf(stderr, "fuzz: %s\n", fvm_status_name(s));
        for (int i = 0; i < d->n; i++) {
            char *e = fvm_error_format(&d->errs[i]);
            fprintf(stderr, "  %s\n", e ? e : "?");
            free(e);
        }
    }
    if (s == FVM_OK)
        return;
    if (s >= FVM_STATUS_COUNT)
        FUZZ_FAIL("status %d is not a status", (int)s);
    if (d->n == 0 && d->dropped == 0)
        FUZZ_FAIL("failed with status %s and no error", fvm_status_name(s));
    for (int i = 0; i < d->n; i++) {
        const fvm_error *e = &d->errs[i];
        if (e->code == FVM_OK || e->code >= FVM_STATUS_COUNT)
            FUZZ_FAIL("error %d has code %d", i, (int)e->code);
        if (!e->msg || !e->msg[0])
            FUZZ_FAIL("error %d (%s) has no message", i, fvm_status_name(e->code));
        if (located && (!e->loc.file || !e->loc.file[0]) && e->code != FVM_ERR_NOMEM)
            FUZZ_FAIL("error %d has no file: %s", i, e->msg);
    }
}

#endif
