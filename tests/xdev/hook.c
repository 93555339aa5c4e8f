/* hook.c - an LD_PRELOAD library for tests: it stops fedvm in the middle of a save or between two renames, or swaps a file between two opens of it.
 *
 *   FVM_HOOK_STALL=TEXT        an fsync of a file whose path holds TEXT creates the file FVM_HOOK_MARK
 *                              (when set) and then waits forever: the test kills the process there, with
 *                              the file written but not yet renamed into place.
 *   FVM_HOOK_SWAP=PATH:OTHER   the second open of PATH (as fedvm names it) first renames OTHER over PATH:
 *                              a file replaced between its check and its use.
 *   FVM_HOOK_STALL_RENAME=END  a rename to a path that ends with END creates FVM_HOOK_MARK (when set) and
 *                              waits forever, before renaming: the test kills the process between two files
 *                              it writes (a device's update written, its new state not yet in place).
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

/* Creates FVM_HOOK_MARK (when set) and waits for the test to kill the process. */
static void stall_here(void)
{
    const char *mark = getenv("FVM_HOOK_MARK");
    if (mark) {
        int m = creat(mark, 0644);
        if (m >= 0)
            close(m);
    }
    for (;;)
        pause();
}

int rename(const char *from, const char *to)
{
    const char *end = getenv("FVM_HOOK_STALL_RENAME");
    size_t n = to ? strlen(to) : 0, m = end ? strlen(end) : 0;
    if (m && n >= m && !strcmp(to + n - m, end))
        stall_here();
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    return real(from, to);
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
            if (strstr(path, stall))
                stall_here();
        }
    }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}
