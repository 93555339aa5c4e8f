/* hook.c - an LD_PRELOAD library for tests: it stops fedvm in the middle of a save, or swaps a file between two opens of it.
 *
 *   FVM_HOOK_STALL=TEXT        an fsync of a file whose path holds TEXT creates the file FVM_HOOK_MARK
 *                              (when set) and then waits forever: the test kills the process there, with
 *                              the file written but not yet renamed into place.
 *   FVM_HOOK_SWAP=PATH:OTHER   the second open of PATH (as fedvm names it) first renames OTHER over PATH:
 *                              a file replaced between its check and its use.
 *
 * Build: cc -shared -fPIC -o hook.so tests/xdev/hook.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int swap_count;

static void maybe_swap(const char *path)
{
    const char *spec = getenv("FVM_HOOK_SWAP"), *colon = spec ? strchr(spec, ':') : NULL;
    if (!colon || strlen(path) != (size_t)(colon - spec) || strncmp(path, spec, (size_t)(colon - spec)))
        return;
    if (++swap_count == 2)
        rename(colon + 1, path);
}

typedef int (*open_fn)(const char *, int, ...);

static int call_open(const char *name, const char *path, int flags, va_list ap)
{
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    maybe_swap(path);
    open_fn real = (open_fn)dlsym(RTLD_NEXT, name);
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = call_open("open", path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = call_open("open64", path, flags, ap);
    va_end(ap);
    return fd;
}

int fsync(int fd)
{
    const char *stall = getenv("FVM_HOOK_STALL");
    if (stall && *stall) {
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            if (strstr(path, stall)) {
                const char *mark = getenv("FVM_HOOK_MARK");
                if (mark) {
                    int m = creat(mark, 0644);
                    if (m >= 0)
                        close(m);
                }
                for (;;)
                    pause();
            }
        }
    }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}
