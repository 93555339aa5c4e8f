/* test_file.c - the files fedvm exchanges: reading only regular files, within a cap, as one snapshot (format/file.c);
 * outputs that are inputs; atomic replacement and the temporaries of writers that died (format/atomic.c);
 * checkpoint names, exactly, and resuming from them (format/checkpoint.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../format/atomic.h"
#include "../format/checkpoint.h"
#include "../format/file.h"
#include "../format/safetensors.h"
#include "test_files.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_make("test_file");
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- reading -------------------------------------------------------------------------- */

/* A FIFO (with no writer: an open without O_NONBLOCK would wait forever), a
 * device that never ends, a directory: each refused by name, at once, by
 * the safetensors reader and the plan reader alike. */
static void test_not_regular(void **state)
{
    (void)state;
    char fifo[256], link[256];
    assert_int_equal(mkfifo(tmp("pipe.safetensors", fifo), 0600), 0);
    assert_int_equal(symlink("/dev/zero", tmp("zero.safetensors", link)), 0);
    fvm_diag d = {0};
    fvm_safetensors *f = NULL;
    char *text = NULL;
    size_t len = 0;
    double t0 = seconds();
    assert_int_equal(fvm_safetensors_load(fifo, &f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, fifo, "is a FIFO (named pipe), not a regular file", NULL);
    assert_int_equal(fvm_safetensors_load("/dev/zero", &f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "/dev/zero", "is a character device, not a regular file", NULL);
    assert_int_equal(fvm_safetensors_load(link, &f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, link, "is a character device", NULL);
    assert_int_equal(fvm_safetensors_load(tmpdir, &f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "is a directory", NULL);
    assert_int_equal(fvm_file_read(fifo, "a cross-device plan", 100, &text, &len, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "is a FIFO", "a cross-device plan is read from a regular file only", NULL);
    assert_null(f);
    assert_null(text);
    assert_true(seconds() - t0 < 2);
}

/* A file past the cap is refused before it is read: a sparse file of
 * FVM_SAFETENSORS_MAX_FILE + 1 bytes, and a 1 GiB one whose header is
 * zeros (refused from its first 8 bytes, without reading the rest). */
static void test_caps(void **state)
{
    (void)state;
    char path[256];
    fvm_diag d = {0};
    fvm_safetensors *f = NULL;
    int fd = open(tmp("sparse.safetensors", path), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    if (ftruncate(fd, (off_t)FVM_SAFETENSORS_MAX_FILE + 1) != 0) {
        close(fd);
        skip(); /* a file system without sparse files */
    }
    close(fd);
    double t0 = seconds();
    assert_int_equal(fvm_safetensors_load(path, &f, &d), FVM_ERR_LIMIT);
    expect_error(&d, FVM_ERR_LIMIT, path, "is 68719476737 bytes, larger than the limit of 68719476736 bytes", NULL);
    assert_int_equal(truncate(path, (off_t)1 << 30), 0);
    assert_int_equal(fvm_safetensors_load(path, &f, &d), FVM_ERR_FORMAT);
    expect_error(&d, FVM_ERR_FORMAT, "the header length 0 is too small", NULL);
    /* a header that claims 99 MB of JSON the file does have (zeros): read, found not JSON */
    put(path, "");
    fd = open(path, O_WRONLY);
    unsigned char lenb[8] = {0x00, 0xe1, 0xf5, 0x05}; /* 100000000 */
    assert_int_equal(write(fd, lenb, 8), 8);
    close(fd);
    assert_int_equal(truncate(path, 8 + 100000000 + 16), 0);
    assert_int_equal(fvm_safetensors_load(path, &f, &d), FVM_ERR_SYNTAX);
    expect_error(&d, FVM_ERR_SYNTAX, "not valid JSON", NULL);
    assert_true(seconds() - t0 < 5);
    assert_null(f);
    char *text = NULL;
    size_t len = 0;
    put(path, "0123456789");
    assert_int_equal(fvm_file_read(path, "a plan", 9, &text, &len, &d), FVM_ERR_LIMIT);
    expect_error(&d, FVM_ERR_LIMIT, "is 10 bytes, larger than the limit of 9 bytes for a plan", NULL);
    assert_int_equal(fvm_file_read(path, "a plan", 10, &text, &len, &d), FVM_OK);
    assert_int_equal(len, 10);
    assert_string_equal(text, "0123456789");
    free(text);
    unlink(path);
}

/* A file that shrinks or grows after it was opened is an error, never a mix. */
static void test_changed_while_read(void **state)
{
    (void)state;
    char path[256];
    fvm_diag d = {0};
    put(tmp("moving", path), "0123456789");
    fvm_file f;
    char buf[16];
    assert_int_equal(fvm_file_open(path, "a file", 100, &f, &d), FVM_OK);
    assert_int_equal(f.size, 10);
    assert_int_equal(truncate(path, 4), 0);
    assert_int_equal(fvm_file_read_at(&f, 0, buf, 10, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, path, "changed while it was read", NULL);
    put(path, "0123456789abc");
    assert_int_equal(fvm_file_read_at(&f, 0, buf, 10, &d), FVM_OK);
    assert_int_equal(fvm_file_check_end(&f, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "changed while it was read: it had 10 bytes and has more now", NULL);
    fvm_file_close(&f);
    fvm_file_close(&f);
}

/* ---- outputs that are inputs ------------------------------------------------------------ */

static void test_same_file(void **state)
{
    (void)state;
    char a[256], b[256], l[256], h[256], sub[256], via[256];
    put(tmp("a", a), "a");
    assert_int_equal(symlink(a, tmp("link-to-a", l)), 0);
    assert_int_equal(link(a, tmp("hard-a", h)), 0);
    assert_int_equal(mkdir(tmp("sub", sub), 0700), 0);
    snprintf(via, sizeof via, "%s/sub/../a", tmpdir);
    assert_true(fvm_file_same(a, a));
    assert_true(fvm_file_same(a, l));
    assert_true(fvm_file_same(a, h));
    assert_true(fvm_file_same(a, via));
    assert_false(fvm_file_same(a, tmp("b", b)));
    /* neither exists: the same when their resolved paths are */
    char n1[256], n2[320];
    snprintf(n2, sizeof n2, "%s/sub/../new", tmpdir);
    assert_true(fvm_file_same(tmp("new", n1), n2));
    assert_false(fvm_file_same(n1, b));
    assert_true(fvm_file_in_dir(a, tmpdir));
    assert_false(fvm_file_in_dir(a, sub));
    fvm_diag d = {0};
    const char *in[] = {b, NULL, l}, *role[] = {"the state", "nothing", "the broadcast"};
    assert_int_equal(fvm_file_not_input(a, "--out", 3, in, role, &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, a, "--out is the broadcast (", "would overwrite an input", NULL);
    assert_int_equal(fvm_file_not_input(n1, "--out", 3, in, role, &d), FVM_OK);
}

/* ---- atomic replacement and stale temporaries ------------------------------------------ */

static int count_temps(const char *name)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '^%s\\.tmp' > '%s/count'", tmpdir, name, tmpdir);
    if (system(cmd) < 0)
        return -1;
    char path[256];
    FILE *f = fopen(tmp("count", path), "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1)
        n = -1;
    if (f)
        fclose(f);
    return n;
}

/* The temporary of a writer that died (its lock gone) is replaced by the
 * next write of the same file; a live writer's is not, nor a name that
 * fedvm's pattern does not make, nor the temporaries of other files; a
 * directory's cleaning removes every stale one (random names too, as
 * mkstemp and older versions made them). */
static void test_stale_temporaries(void **state)
{
    (void)state;
    char out[256], dead[300], random[300], alien[300], other[300], odd[300], live[300];
    tmp("state.safetensors", out);
    snprintf(dead, sizeof dead, "%s.tmp000000", out);
    snprintf(live, sizeof live, "%s.tmp000001", out);
    snprintf(random, sizeof random, "%s.tmpAb12Cd", out);
    snprintf(alien, sizeof alien, "%s.tmp-mine", out);
    snprintf(odd, sizeof odd, "%s.tmpAb12C!", out);
    snprintf(other, sizeof other, "%s/other.safetensors.tmpZZ99zz", tmpdir);
    put(dead, "half a file");
    put(live, "being written");
    put(random, "half a file");
    put(alien, "not fedvm's");
    put(odd, "not fedvm's");
    put(other, "another file's");
    /* a live writer: a child holds the lock on its temporary */
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(live, O_RDWR);
        flock(fd, LOCK_EX);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(count_temps("state.safetensors"), 5);
    fvm_diag d = {0};
    assert_int_equal(fvm_atomic_write(out, "new", 3, &d), FVM_OK);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_not_equal(stat(dead, &st), 0); /* replaced, then renamed into place */
    assert_int_equal(stat(live, &st), 0);
    assert_int_equal(stat(random, &st), 0);
    assert_int_equal(stat(alien, &st), 0);
    assert_int_equal(stat(odd, &st), 0);
    assert_int_equal(stat(other, &st), 0);
    /* a second write while the live writer still holds 000001: 000000 again */
    assert_int_equal(fvm_atomic_write(out, "newer", 5, &d), FVM_OK);
    assert_int_equal(stat(live, &st), 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* its writer gone, that temporary is stale now */
    int removed = -1;
    fvm_atomic_clean(tmpdir, NULL, NULL, &removed);
    assert_int_equal(removed, 3); /* the live one, now dead; the random one; other.safetensors's */
    assert_int_not_equal(stat(live, &st), 0);
    assert_int_not_equal(stat(random, &st), 0);
    assert_int_not_equal(stat(other, &st), 0);
    assert_int_equal(stat(alien, &st), 0);
    assert_int_equal(stat(odd, &st), 0);
    close(ready[0]);
    close(ready[1]);
    unlink(alien);
    unlink(odd);
}

/* A staged file is invisible until it is ended; an abort leaves nothing. */
static void test_begin_abort(void **state)
{
    (void)state;
    char path[256];
    fvm_diag d = {0};
    fvm_atomic w;
    tmp("staged", path);
    assert_int_equal(fvm_atomic_begin(&w, path, &d), FVM_OK);
    assert_int_equal(fvm_atomic_put(&w, "abc", 3, &d), FVM_OK);
    assert_int_equal(fvm_atomic_sync(&w, &d), FVM_OK);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    /* a cleaner does not take a live writer's temporary */
    int removed = -1;
    fvm_atomic_clean(tmpdir, NULL, NULL, &removed);
    assert_int_equal(removed, 0);
    fvm_atomic_abort(&w);
    fvm_atomic_abort(&w);
    assert_int_equal(count_temps("staged"), 0);
    assert_int_not_equal(stat(path, &st), 0);
    assert_int_equal(fvm_atomic_begin(&w, path, &d), FVM_OK);
    assert_int_equal(fvm_atomic_put(&w, "abc", 3, &d), FVM_OK);
    assert_int_equal(fvm_atomic_end(&w, &d), FVM_OK);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_equal(count_temps("staged"), 0);
    /* a directory that is not there: the error names the file */
    assert_int_equal(fvm_atomic_write("/nonexistent-dir/x", "abc", 3, &d), FVM_ERR_IO);
    expect_error(&d, FVM_ERR_IO, "/nonexistent-dir/x", NULL);
}

/* ---- checkpoint names ------------------------------------------------------------------- */

static void test_checkpoint_names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t round;
    } cases[] = {
        {"round-000000.safetensors", 0},
        {"round-000003.safetensors", 3},
        {"round-999999.safetensors", 999999},
        {"round-1000000.safetensors", 1000000},
        {"round-1234567.safetensors", 1234567},
        {"round-9223372036854775807.safetensors", INT64_MAX},
        /* not a name fedvm writes */
        {"round-0000003.safetensors", -1},
        {"round-0999999.safetensors", -1},
        {"round-01000000.safetensors", -1},
        {"round-00003.safetensors", -1},
        {"round-3.safetensors", -1},
        {"round-+00003.safetensors", -1},
        {"round- 00003.safetensors", -1},
        {"round-00000a.safetensors", -1},
        {"round-9223372036854775808.safetensors", -1},
        {"round-99999999999999999999.safetensors", -1},
        {"round-000003.safetensors.tmpAb12Cd", -1},
        {"round-000003.safetensorsx", -1},
        {"xround-000003.safetensors", -1},
        {"round-.safetensors", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (fvm_checkpoint_round(cases[i].name) != cases[i].round)
            fail_msg("%s: round %lld, expected %lld", cases[i].name, (long long)fvm_checkpoint_round(cases[i].name),
                     (long long)cases[i].round);
}

/* A state <w=f32[2]> worth x, saved as the checkpoint of round r. */
static void save_round(const char *ck, const fvm_type *t, int64_t r, float x, const fvm_run_info *run)
{
    fvm_diag d = {0};
    fvm_tensor w;
    fvm_dims two = {.rank = 1, .d = {2}};
    assert_int_equal(fvm_tensor_alloc(&w, FVM_DTYPE_F32, &two, &d), FVM_OK);
    ((float *)fvm_tensor_data(&w))[0] = x;
    ((float *)fvm_tensor_data(&w))[1] = -x;
    fvm_value *v = fvm_value_list(FVM_V_STRUCT, 1);
    v->items[0] = fvm_value_tensor_take(&w);
    assert_int_equal(fvm_checkpoint_save(ck, r, v, t, run, &d), FVM_OK);
    fvm_value_release(v);
}

static float resumed(const char *ck, const fvm_type *t, const fvm_run_info *run, int64_t *round, fvm_diag *d)
{
    fvm_value *v = NULL;
    if (fvm_checkpoint_last(ck, t, run, round, &v, d) != FVM_OK)
        return -1;
    float x = ((const float *)fvm_tensor_data(&v->items[0]->t))[0];
    fvm_value_release(v);
    return x;
}

/* Resuming takes the highest round among the names fedvm writes, across
 * the 6-digit width, opens that very file, and removes the temporaries
 * of a save that was cut short. */
static void test_checkpoint_resume(void **state)
{
    (void)state;
    fvm_arena a = {0};
    fvm_diag d = {0};
    const fvm_type *t = NULL;
    assert_int_equal(fvm_type_parse(&a, "<w=f32[2]>", NULL, NULL, &t, &d), FVM_OK);
    fvm_run_info run = {.seed = 7, .clients_per_round = 3, .program = "p.json"};
    char ck[256], p[300], q[300];
    tmp("ck", ck);
    save_round(ck, t, 999998, 1, &run);
    save_round(ck, t, 999999, 2, &run);
    int64_t round = 0;
    assert_true(resumed(ck, t, &run, &round, &d) == 2);
    assert_int_equal(round, 999999);
    save_round(ck, t, 1000000, 3, &run);
    assert_true(resumed(ck, t, &run, &round, &d) == 3);
    assert_int_equal(round, 1000000);
    snprintf(p, sizeof p, "%s/round-1000000.safetensors", ck);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    /* a 7-digit name with a leading zero is not a checkpoint: it was read as round 1000001 and
       round-1000001.safetensors, another file, opened */
    snprintf(q, sizeof q, "%s/round-01000001.safetensors", ck);
    put(q, "not a checkpoint");
    snprintf(q, sizeof q, "%s/round-0000004.safetensors", ck);
    put(q, "not a checkpoint");
    assert_true(resumed(ck, t, &run, &round, &d) == 3);
    assert_int_equal(round, 1000000);
    /* a stale temporary of the next save is removed; a FIFO as the last checkpoint is refused */
    snprintf(q, sizeof q, "%s/round-1000001.safetensors.tmpXy12Zw", ck);
    put(q, "half a checkpoint");
    assert_true(resumed(ck, t, &run, &round, &d) == 3);
    assert_int_not_equal(stat(q, &st), 0);
    snprintf(q, sizeof q, "%s/round-1000002.safetensors", ck);
    assert_int_equal(mkfifo(q, 0600), 0);
    assert_true(resumed(ck, t, &run, &round, &d) == -1);
    expect_error(&d, FVM_ERR_IO, q, "is a FIFO (named pipe), not a regular file", NULL);
    unlink(q);
    /* a checkpoint renamed to a later round: its fedvm.round says otherwise */
    snprintf(q, sizeof q, "%s/round-1000005.safetensors", ck);
    assert_int_equal(link(p, q), 0);
    assert_true(resumed(ck, t, &run, &round, &d) == -1);
    expect_error(&d, FVM_ERR_FORMAT, q, "records round 1000000, but its name is round 1000005's", NULL);
    unlink(q);
    /* an input the run would overwrite */
    assert_int_equal(fvm_checkpoint_not_input(ck, 1, 1000000, p, "--init FILE", &d), FVM_ERR_USAGE);
    expect_error(&d, FVM_ERR_USAGE, "--init FILE is the checkpoint of round 1000000", "copy it elsewhere", NULL);
    assert_int_equal(fvm_checkpoint_not_input(ck, 1, 999999, p, "--init FILE", &d), FVM_OK);
    fvm_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_regular),        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_changed_while_read), cmocka_unit_test(test_same_file),
        cmocka_unit_test(test_stale_temporaries),  cmocka_unit_test(test_begin_abort),
        cmocka_unit_test(test_checkpoint_names),   cmocka_unit_test(test_checkpoint_resume),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
