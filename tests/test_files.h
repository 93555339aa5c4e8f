/* test_files.h - what the tests of file readers and writers share: a scratch directory for the group, and the errors a call must (not) give.
 * Include it after <cmocka.h>. */
#ifndef FVM_TEST_FILES_H
#define FVM_TEST_FILES_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../vm/core/status.h"

/* The scratch directory of the test group (tmpdir_make). */
static char tmpdir[64];

/* tmpdir/name in buf. */
static inline const char *tmp(const char *name, char buf[256])
{
    snprintf(buf, 256, "%s/%s", tmpdir, name);
    return buf;
}

/* Makes tmpdir, /tmp/fvm_<name>_XXXXXX: for a group setup, which returns
 * what this returns (0, or -1 when it cannot). */
static inline int tmpdir_make(const char *name)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fvm_%s_XXXXXX", name);
    return mkdtemp(tmpdir) ? 0 : -1;
}

/* A group teardown: removes tmpdir and all in it. */
static inline int tmpdir_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The first error must have this code and its formatted text every one of
 * the NULL-terminated substrings. Clears d. */
static inline void expect_error(fvm_diag *d, fvm_status code, ...)
{
    if (d->n < 1)
        fail_msg("expected a %s error, got none", fvm_status_name(code));
    char *text = fvm_error_format(&d->errs[0]);
    assert_non_null(text);
    if (d->errs[0].code != code)
        fail_msg("expected a %s error, got %s: %s", fvm_status_name(code), fvm_status_name(d->errs[0].code), text);
    va_list ap;
    va_start(ap, code);
    for (const char *s; (s = va_arg(ap, const char *));)
        if (!strstr(text, s))
            fail_msg("error '%s' does not mention '%s'", text, s);
    va_end(ap);
    free(text);
    fvm_diag_clear(d);
}

/* The call that returned s succeeded; when not, the test fails with its
 * first error. (Diagnostics left with FVM_OK are not looked at: ok_silent.) */
static inline void ok(fvm_status s, fvm_diag *d)
{
    if (s != FVM_OK) {
        char *text = d->n ? fvm_error_format(&d->errs[0]) : NULL;
        fail_msg("unexpected error: %s", text ? text : fvm_status_name(s));
    }
}

/* ok, and the call reported nothing at all. */
static inline void ok_silent(fvm_status s, fvm_diag *d)
{
    ok(s, d);
    assert_int_equal(d->n, 0);
}

#endif
