/* test_session.c - a training session driven through the C API alone: rounds, metrics like fedvm run's, resume, progress, errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../format/metrics.h"
#include "../vm/fedvm.h"
#include "../vm/runtime/session.h"
#include "test_util.h"

/* FedAvg of programs/ over 12 clients of Synthetic(1,1), made once by the
 * fedvm command ($FVM_BIN/fedvm, default bin/fedvm; the Makefile sets
 * FVM_BIN to the build's) in a scratch directory. */
static const char *const program_path = "programs/fedavg.json";
static char dir[64];
static char fedvm[256];
static fvm_program *program;

/* dir/name in buf. */
static const char *in_dir(const char *name, char buf[256])
{
    snprintf(buf, 256, "%s/%s", dir, name);
    return buf;
}

static int setup(void **state)
{
    (void)state;
    const char *bin = getenv("FVM_BIN");
    snprintf(fedvm, sizeof fedvm, "%s/fedvm", bin && *bin ? bin : "bin");
    snprintf(dir, sizeof dir, "/tmp/fvm_test_session_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s data synthetic --kind fedprox --clients 12 --seed 5 -o %s/syn.sqlite >/dev/null 2>&1",
             fedvm, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_session: cannot make the data with %s\n", fedvm);
        return -1;
    }
    fvm_diag d = {0};
    fvm_status s = fvm_program_load(program_path, &program, &d);
    if (s == FVM_OK)
        s = fvm_compile(program, &d);
    fvm_diag_clear(&d);
    return s == FVM_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fvm_program_free(program);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The data bindings: train and test of the synthetic file. */
typedef struct bindings {
    char train[256], test[256];
    fvm_named_text args[2];
} bindings;

static void bind_data(bindings *b)
{
    snprintf(b->train, sizeof b->train, "%s/syn.sqlite", dir);
    snprintf(b->test, sizeof b->test, "%s/syn.sqlite:test", dir);
    b->args[0] = (fvm_named_text){"train", b->train, FVM_ARG_DATA};
    b->args[1] = (fvm_named_text){"test", b->test, FVM_ARG_DATA};
}

/* What the progress callback saw. */
typedef struct seen {
    int rounds, resumed; /* ROUND and RESUMED events */
    int64_t last_round, first;
    int64_t resumed_after;
    char lines[8192]; /* each round's line as fedvm run prints it */
    size_t len;
    const fvm_session **session; /* to read the state from the callback */
    bool state_is_rounds; /* the session's state was the round's in every callback */
} seen;

static fvm_status progress(void *user, const fvm_session_event *e, fvm_diag *d)
{
    seen *sn = user;
    if (e->kind == FVM_SESSION_RESUMED) {
        sn->resumed++;
        sn->resumed_after = e->round;
        return FVM_OK;
    }
    if (e->kind != FVM_SESSION_ROUND)
        return FVM_OK;
    sn->rounds++;
    assert_int_equal(e->round, sn->last_round ? sn->last_round + 1 : e->first);
    sn->last_round = e->round;
    sn->first = e->first;
    if (sn->session && fvm_session_round(*sn->session) != e->round)
        sn->state_is_rounds = false;
    fvm_metrics_round shown = *e->figures;
    shown.fields = 0;
    char *line = NULL;
    size_t len = 0;
    fvm_status s = fvm_metrics_line(&shown, &line, &len, d);
    assert_int_equal(s, FVM_OK);
    assert_true(sn->len + len < sizeof sn->lines);
    memcpy(sn->lines + sn->len, line, len);
    sn->len += len;
    sn->lines[sn->len] = 0;
    free(line);
    return FVM_OK;
}

/* Runs a session to its end; its final state (a new reference) in *state. */
static void run_session(const fvm_session_opts *o, fvm_value **state)
{
    fvm_session *s = NULL;
    fvm_diag d = {0};
    fvm_status st = fvm_session_new(program, o, &s, &d);
    if (st == FVM_OK)
        st = fvm_session_run(s, &d);
    test_print_errors(&d, "");
    assert_int_equal(st, FVM_OK);
    assert_true(fvm_session_done(s));
    assert_int_equal(fvm_session_round(s), o->rounds);
    *state = fvm_value_retain((fvm_value *)fvm_session_state(s, NULL));
    fvm_session_free(s);
    fvm_diag_clear(&d);
}

/* The file's text (malloc'd). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 16);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    text[n] = 0;
    fclose(f);
    return text;
}

/* Two metrics files hold the same series, bit for bit, but for the times. */
static void same_metrics(const char *a_path, const char *b_path)
{
    fvm_metrics *a = NULL, *b = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_metrics_read(a_path, &a, &d), FVM_OK);
    assert_int_equal(fvm_metrics_read(b_path, &b, &d), FVM_OK);
    assert_int_equal(a->nseries, b->nseries);
    assert_int_equal(a->rounds, b->rounds);
    int compared = 0;
    for (size_t i = 0; i < a->nseries; i++) {
        const fvm_series *x = &a->series[i], *y = fvm_metrics_get(b, x->name);
        if (!y)
            fail_msg("no series %s in %s", x->name, b_path);
        if (strstr(x->name, "seconds"))
            continue; /* seconds, eval_seconds, cpu_seconds */
        assert_int_equal(x->n, y->n);
        assert_memory_equal(x->rounds, y->rounds, x->n * sizeof *x->rounds);
        assert_memory_equal(x->values, y->values, x->n * sizeof *x->values);
        compared++;
    }
    assert_true(compared >= 6); /* train.loss, .accuracy, .examples, eval's, clients */
    fvm_metrics_free(a);
    fvm_metrics_free(b);
}

/* Three rounds of 4 clients with an evaluation after rounds 2 and 3: the
 * lines and the metrics file are those of 'fedvm run' with the same seed;
 * the callback is called once per round, with the round's state in place. */
static void test_same_as_fedvm_run(void **state)
{
    (void)state;
    bindings b;
    bind_data(&b);
    char metrics[256], run_metrics[256], run_out[256];
    in_dir("session.jsonl", metrics);
    in_dir("run.jsonl", run_metrics);
    in_dir("run.out", run_out);
    const fvm_session *handle = NULL;
    seen sn = {.session = &handle, .state_is_rounds = true};
    fvm_session_opts o = {.program = program_path,
                          .args = b.args,
                          .nargs = 2,
                          .seed = 3,
                          .rounds = 3,
                          .clients_per_round = 4,
                          .eval_every = 2,
                          .metrics = metrics,
                          .progress = progress,
                          .user = &sn};
    fvm_session *s = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_session_new(program, &o, &s, &d), FVM_OK);
    handle = s;
    assert_int_equal(fvm_session_round(s), -1);
    assert_false(fvm_session_done(s));
    assert_true(isnan(fvm_session_metric(s, "train.loss")));
    fvm_status st = fvm_session_run(s, &d);
    test_print_errors(&d, "");
    assert_int_equal(st, FVM_OK);
    assert_int_equal(sn.rounds, 3);
    assert_int_equal(sn.first, 1);
    assert_true(sn.state_is_rounds);
    assert_int_equal(fvm_session_round(s), 3);
    const fvm_type *t = NULL;
    assert_non_null(fvm_session_state(s, &t));
    assert_int_equal(t->kind, FVM_T_FED);
    assert_non_null(fvm_session_eval(s, &t));

    char cmd[1600];
    snprintf(cmd, sizeof cmd,
             "%s run %s --data train=%s --data test=%s --rounds 3 --clients-per-round 4 --seed 3 --eval-every 2 "
             "--metrics %s >%s 2>/dev/null",
             fedvm, program_path, b.train, b.test, run_metrics, run_out);
    assert_int_equal(system(cmd), 0);
    char *printed = slurp(run_out);
    assert_string_equal(sn.lines, printed);
    same_metrics(metrics, run_metrics);
    /* the latest figures by name: round 3's training loss, the evaluation after it */
    fvm_metrics *m = NULL;
    assert_int_equal(fvm_metrics_read(run_metrics, &m, &d), FVM_OK);
    const fvm_series *loss = fvm_metrics_get(m, "train.loss"), *acc = fvm_metrics_get(m, "eval.accuracy");
    assert_non_null(loss);
    assert_non_null(acc);
    assert_int_equal(acc->n, 2);
    assert_true((float)fvm_session_metric(s, "train.loss") == (float)loss->values[2]);
    assert_true((float)fvm_session_metric(s, "eval.accuracy") == (float)acc->values[1]);
    assert_true(isnan(fvm_session_metric(s, "train.nothing")));
    assert_true(isnan(fvm_session_metric(s, "eval")));
    /* done: another step runs nothing */
    assert_int_equal(fvm_session_step(s, &d), FVM_OK);
    assert_int_equal(sn.rounds, 3);
    fvm_metrics_free(m);
    free(printed);
    fvm_session_free(s);
    fvm_diag_clear(&d);
}

/* Four rounds at once; two, then a resume to four; and four one step at a
 * time: the same final state, bit for bit, and the resumed metrics file
 * has each round once. */
static void test_resume(void **state)
{
    (void)state;
    bindings b;
    bind_data(&b);
    char whole[256], part[256], metrics[256];
    in_dir("whole", whole);
    in_dir("part", part);
    in_dir("resumed.jsonl", metrics);
    fvm_session_opts o = {.program = program_path,
                          .args = b.args,
                          .nargs = 2,
                          .seed = 9,
                          .rounds = 4,
                          .clients_per_round = 5,
                          .checkpoint_dir = whole,
                          .checkpoint_every = 2};
    fvm_value *a = NULL, *c = NULL, *e = NULL;
    run_session(&o, &a);
    char ck[300];
    snprintf(ck, sizeof ck, "%s/round-000002.safetensors", whole);
    assert_int_equal(access(ck, F_OK), 0);

    o.rounds = 2;
    o.checkpoint_dir = part;
    o.metrics = metrics;
    fvm_value *half = NULL;
    run_session(&o, &half);
    assert_false(fvm_value_identical(half, a));
    fvm_value_release(half);

    seen sn = {.state_is_rounds = true};
    fvm_session_opts r = o;
    r.rounds = 4;
    r.checkpoint_dir = NULL; /* the resume directory */
    r.resume = part;
    r.progress = progress;
    r.user = &sn;
    fvm_session *s = NULL;
    fvm_diag d = {0};
    assert_int_equal(fvm_session_new(program, &r, &s, &d), FVM_OK);
    assert_int_equal(fvm_session_start(s, &d), FVM_OK);
    assert_int_equal(sn.resumed, 1);
    assert_int_equal(sn.resumed_after, 2);
    assert_int_equal(fvm_session_round(s), 2);
    assert_int_equal(fvm_session_first(s), 3);
    assert_int_equal(fvm_session_run(s, &d), FVM_OK);
    assert_int_equal(sn.rounds, 2);
    c = fvm_value_retain((fvm_value *)fvm_session_state(s, NULL));
    fvm_session_free(s);
    assert_true(fvm_value_identical(a, c));
    snprintf(ck, sizeof ck, "%s/round-000004.safetensors", part);
    assert_int_equal(access(ck, F_OK), 0);
    fvm_metrics *m = NULL;
    assert_int_equal(fvm_metrics_read(metrics, &m, &d), FVM_OK);
    assert_int_equal(m->rounds, 4);
    assert_int_equal(m->replaced, 0);
    fvm_metrics_free(m);

    /* one round at a time */
    fvm_session_opts one = {
        .program = program_path, .args = b.args, .nargs = 2, .seed = 9, .rounds = 4, .clients_per_round = 5};
    assert_int_equal(fvm_session_new(program, &one, &s, &d), FVM_OK);
    for (int64_t k = 1; k <= 4; k++) {
        assert_false(fvm_session_done(s));
        assert_int_equal(fvm_session_step(s, &d), FVM_OK);
        assert_int_equal(fvm_session_round(s), k);
    }
    assert_true(fvm_session_done(s));
    e = fvm_value_retain((fvm_value *)fvm_session_state(s, NULL));
    fvm_session_free(s);
    assert_true(fvm_value_identical(a, e));
    fvm_value_release(a);
    fvm_value_release(c);
    fvm_value_release(e);
    fvm_diag_clear(&d);
}

/* The first error of a session made with o and run: its code, and its
 * location's file (NULL: none) and line (0: any), a piece of its message. */
static void refused(const fvm_session_opts *o, bool at_new, fvm_status code, const char *file, int line,
                    const char *text)
{
    fvm_session *s = NULL;
    fvm_diag d = {0};
    fvm_status st = fvm_session_new(program, o, &s, &d);
    assert_int_equal(st == FVM_OK, !at_new);
    if (st == FVM_OK) {
        st = fvm_session_run(s, &d);
        assert_int_equal(st, code);
        /* a failed session runs no more */
        fvm_diag more = {0};
        assert_int_equal(fvm_session_step(s, &more), FVM_ERR_USAGE);
        fvm_diag_clear(&more);
    }
    assert_true(d.n >= 1);
    const fvm_error *e = &d.errs[0];
    if (e->code != code || !strstr(e->msg, text) || (file && (!e->loc.file || !strstr(e->loc.file, file))) ||
        (!file && e->loc.file) || (line && e->loc.line != line)) {
        test_print_errors(&d, "");
        fail_msg("expected %s error '%s' at %s:%d", fvm_status_name(code), text, file ? file : "-", line);
    }
    fvm_session_free(s);
    fvm_diag_clear(&d);
}

/* Errors are located values: a value that does not bind, a missing data
 * file, evaluation without evaluate's data, an argument no parameter takes,
 * an unknown client, too many clients, a directory without checkpoints, a
 * missing init file. */
static void test_errors(void **state)
{
    (void)state;
    bindings b;
    bind_data(&b);
    char none[256], empty[256];
    in_dir("none.sqlite", none);
    in_dir("empty", empty);
    fvm_session_opts o = {.program = program_path, .args = b.args, .nargs = 2, .rounds = 1};
    fvm_named_text args[2] = {b.args[0], {"test", "[1, 2", FVM_ARG_JSON}};
    o.args = args;
    refused(&o, false, FVM_ERR_SYNTAX, "--arg test", 1, "");
    args[1] = (fvm_named_text){"test", "1", FVM_ARG_JSON};
    refused(&o, false, FVM_ERR_TYPE, "--arg test", 1, "expected SyntheticExample* as an array");
    args[1] = b.args[1];
    args[0] = (fvm_named_text){"train", none, FVM_ARG_DATA};
    refused(&o, false, FVM_ERR_IO, "none.sqlite", 0, "cannot open");
    /* evaluation asked for without evaluate's data */
    o.args = b.args;
    o.nargs = 1;
    o.eval_every = 1;
    refused(&o, true, FVM_ERR_USAGE, NULL, 0,
            "evaluate needs every one of its parameters after the state; give --data/--arg test=...");
    o.eval_every = 0;
    fvm_named_text three[3] = {b.args[0], b.args[1], {"bogus", "1", FVM_ARG_JSON}};
    o.args = three;
    o.nargs = 3;
    refused(&o, false, FVM_ERR_USAGE, NULL, 0, "neither next nor evaluate has a parameter 'bogus'");
    o.args = b.args;
    o.nargs = 2;
    o.client_ids = "f_00002,nobody";
    refused(&o, false, FVM_ERR_USAGE, NULL, 0, "no client 'nobody'");
    o.client_ids = NULL;
    o.clients_per_round = 13;
    refused(&o, false, FVM_ERR_USAGE, NULL, 0, "the data has 12 clients");
    o.clients_per_round = 0;
    assert_int_equal(mkdir(empty, 0777), 0);
    o.resume = empty;
    refused(&o, false, FVM_ERR_IO, empty, 0, "no checkpoint");
    o.init = none;
    refused(&o, true, FVM_ERR_USAGE, NULL, 0, "give one of them");
    o.resume = NULL;
    refused(&o, false, FVM_ERR_IO, "none.sqlite", 0, "");
    o.init = NULL;
    /* a program that is not an iterative process */
    fvm_program *p = NULL;
    fvm_diag d = {0};
    fvm_session *s = NULL;
    assert_int_equal(fvm_program_load("programs/histogram.json", &p, &d), FVM_OK);
    assert_int_equal(fvm_compile(p, &d), FVM_OK);
    assert_int_equal(fvm_session_new(p, &o, &s, &d), FVM_ERR_USAGE);
    assert_null(s);
    fvm_program_free(p);
    fvm_diag_clear(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_fedvm_run),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
