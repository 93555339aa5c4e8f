/* test_metrics.c - metrics files (JSON lines of rounds): a round's line written, files cut back, read into series (names, values, order, errors with lines). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../format/doc_io.h"
#include "../format/metrics.h"
#include "../format/value_doc.h"
#include "test_util.h"

/* Per-test state, freed by the teardown even when an assertion fails. */
typedef struct fx {
    fvm_metrics *m;
    fvm_diag d;
} fx;

static int setup(void **state)
{
    return test_fixture_new(state, sizeof(fx));
}

static int teardown(void **state)
{
    fx *f = *state;
    fvm_metrics_free(f->m);
    fvm_diag_clear(&f->d);
    free(f);
    return 0;
}

static fvm_status parse(fx *f, const char *text)
{
    fvm_metrics_free(f->m);
    f->m = NULL;
    fvm_diag_clear(&f->d);
    return fvm_metrics_parse("m.jsonl", text, strlen(text), &f->m, &f->d);
}

/* The series called name, which must exist with n points. */
static const fvm_series *series(fx *f, const char *name, size_t n)
{
    const fvm_series *s = fvm_metrics_get(f->m, name);
    if (!s)
        fail_msg("no series '%s'", name);
    assert_int_equal(s->n, n);
    return s;
}

/* The one error: its code, line, column (0: any) and a piece of its message. */
static void expect_error(fx *f, fvm_status code, int line, int col, const char *text)
{
    assert_int_equal(f->d.n, 1);
    const fvm_error *e = &f->d.errs[0];
    assert_int_equal(e->code, code);
    assert_string_equal(e->loc.file, "m.jsonl");
    assert_int_equal(e->loc.line, line);
    if (col)
        assert_int_equal(e->loc.col, col);
    if (!strstr(e->msg, text))
        fail_msg("'%s' not in '%s'", text, e->msg);
    assert_null(f->m);
}

static void test_what_fedvm_run_writes(void **state)
{
    fx *f = *state;
    assert_int_equal(parse(f,
                           "{\"round\": 1, \"train\": {\"loss\": 2.5, \"examples\": 100.0}, \"seconds\": 0.5, "
                           "\"clients\": 10, \"sampled\": [1, 4, 7]}\n"
                           "{\"round\": 2, \"train\": {\"loss\": 1.5, \"examples\": 90.0}, \"eval\": {\"loss\": 1.25, "
                           "\"accuracy\": 0.5}, \"seconds\": 0.25, \"clients\": 10, \"sampled\": [0, 2, 3]}\n"),
                     FVM_OK);
    assert_string_equal(f->m->file, "m.jsonl");
    assert_int_equal(f->m->rounds, 2);
    /* in order of first appearance; the sampled clients are no series */
    static const char *const names[] = {"train.loss", "train.examples", "seconds",
                                        "clients",    "eval.loss",      "eval.accuracy"};
    assert_int_equal(f->m->nseries, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(f->m->series[i].name, names[i]);
    const fvm_series *loss = series(f, "train.loss", 2);
    assert_int_equal(loss->rounds[0], 1);
    assert_int_equal(loss->rounds[1], 2);
    assert_true(loss->values[0] == 2.5 && loss->values[1] == 1.5);
    const fvm_series *acc = series(f, "eval.accuracy", 1);
    assert_int_equal(acc->rounds[0], 2);
    assert_true(acc->values[0] == 0.5);
    assert_true(series(f, "clients", 2)->values[1] == 10);
    assert_null(fvm_metrics_get(f->m, "sampled"));
    assert_null(fvm_metrics_get(f->m, "round"));
    assert_int_equal(f->m->restart_line, 0);
    assert_int_equal(f->m->replaced, 0);
    assert_int_equal(f->m->partial_line, 0);
}

static void test_names_and_leaves(void **state)
{
    fx *f = *state;
    /* a bare scalar, nested objects, the writer's non-finite strings; other leaves skipped */
    assert_int_equal(parse(f, "{\"round\": 0, \"train\": 3, \"eval\": {\"per_class\": {\"a\": 1, \"b\": 2}}, "
                              "\"x\": \"nan\", \"y\": \"inf\", \"z\": \"-inf\", \"s\": \"text\", \"b\": true, "
                              "\"n\": null, \"arr\": [1, 2]}\n"),
                     FVM_OK);
    assert_true(series(f, "train", 1)->values[0] == 3);
    assert_true(series(f, "eval.per_class.a", 1)->values[0] == 1);
    assert_true(series(f, "eval.per_class.b", 1)->values[0] == 2);
    assert_true(isnan(series(f, "x", 1)->values[0]));
    assert_true(series(f, "y", 1)->values[0] == INFINITY);
    assert_true(series(f, "z", 1)->values[0] == -INFINITY);
    assert_int_equal(f->m->nseries, 6);
    /* "round" inside an object is a metric like any other */
    assert_int_equal(parse(f, "{\"round\": 4, \"train\": {\"round\": 7}}\n"), FVM_OK);
    assert_true(series(f, "train.round", 1)->values[0] == 7);
    assert_int_equal(series(f, "train.round", 1)->rounds[0], 4);
}

static void test_blank_lines_and_crlf(void **state)
{
    fx *f = *state;
    assert_int_equal(parse(f, "\n{\"round\": 1, \"v\": 1}\r\n   \n\t\n{\"round\": 2, \"v\": 2}"), FVM_OK);
    assert_int_equal(series(f, "v", 2)->rounds[1], 2);
    assert_int_equal(f->m->partial_line, 0); /* a valid last line without its newline is kept */
    /* lines are counted through blank ones */
    assert_int_equal(parse(f, "\n\n{\"round\": 1, \"v\": 1}\n\n{\"round\": 2, \"v\": }\n"), FVM_ERR_SYNTAX);
    expect_error(f, FVM_ERR_SYNTAX, 5, 19, "invalid JSON");
}

static void test_line_errors(void **state)
{
    fx *f = *state;
    const char *ok = "{\"round\": 1, \"v\": 1}\n";
    char text[256];
    snprintf(text, sizeof text, "%s{\"round\": 2, \"v\": 1\n%s", ok, ok);
    assert_int_equal(parse(f, text), FVM_ERR_SYNTAX);
    expect_error(f, FVM_ERR_SYNTAX, 2, 0, "end of line"); /* not "end of file": the line ended */
    snprintf(text, sizeof text, "%s[1, 2]\n", ok);
    assert_int_equal(parse(f, text), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 2, 1, "must be a JSON object");
    snprintf(text, sizeof text, "%s%s{\"v\": 1}\n", ok, ok);
    assert_int_equal(parse(f, text), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 3, 1, "no \"round\"");
    assert_int_equal(parse(f, "{\"v\": 1, \"round\": 1.5}\n"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 1, 19, "\"round\" must be an integer >= 0");
    assert_int_equal(parse(f, "{\"round\": -1, \"v\": 1}\n"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 1, 11, "must be an integer");
    assert_int_equal(parse(f, "{\"round\": \"3\", \"v\": 1}\n"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 1, 11, "must be an integer");
    assert_int_equal(parse(f, "{\"round\": 1, \"v\": 1, \"v\": 2}\n"), FVM_ERR_SYNTAX);
    expect_error(f, FVM_ERR_SYNTAX, 1, 0, "duplicate");
}

static void test_no_usable_rows(void **state)
{
    fx *f = *state;
    assert_int_equal(parse(f, ""), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 0, 0, "no rounds: the file is empty");
    assert_int_equal(parse(f, "\n  \n"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 0, 0, "the file is empty");
    assert_int_equal(parse(f, "{\"round\": 1, \"tr"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 0, 0, "its only line is incomplete");
    assert_int_equal(parse(f, "{\"round\": 1, \"sampled\": [1]}\n{\"round\": 2, \"name\": \"x\"}\n"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 0, 0, "no metrics: its 2 lines hold a round but no numbers");
}

static void test_incomplete_last_line(void **state)
{
    fx *f = *state;
    /* a process stopped while writing its last line */
    assert_int_equal(parse(f, "{\"round\": 1, \"v\": 1}\n{\"round\": 2, \"v\": 2}\n{\"round\": 3, \"v\""), FVM_OK);
    assert_int_equal(f->m->partial_line, 3);
    assert_int_equal(series(f, "v", 2)->rounds[1], 2);
    /* with its newline written it is an error like any other */
    assert_int_equal(parse(f, "{\"round\": 1, \"v\": 1}\n{\"round\": 3, \"v\"\n"), FVM_ERR_SYNTAX);
    expect_error(f, FVM_ERR_SYNTAX, 2, 0, "invalid JSON");
    /* and so is a bad line that is not the last */
    assert_int_equal(parse(f, "{\"round\": 1, \"v\": 1}\n{\"round\": 3, \"v\"\n{\"round\": 4, \"v\""), FVM_ERR_SYNTAX);
    expect_error(f, FVM_ERR_SYNTAX, 2, 0, "invalid JSON");
    /* an unterminated last line that is JSON but not a round is no excuse */
    assert_int_equal(parse(f, "{\"round\": 1, \"v\": 1}\n[1]"), FVM_ERR_FORMAT);
    expect_error(f, FVM_ERR_FORMAT, 2, 1, "must be a JSON object");
}

static void test_appended_runs(void **state)
{
    fx *f = *state;
    /* a second run appended to the file: each round from its last line, whole */
    assert_int_equal(parse(f, "{\"round\": 1, \"train\": {\"loss\": 9}}\n"
                              "{\"round\": 2, \"train\": {\"loss\": 8}, \"eval\": {\"loss\": 7}}\n"
                              "{\"round\": 1, \"train\": {\"loss\": 3}}\n"
                              "{\"round\": 2, \"train\": {\"loss\": 2}}\n"
                              "{\"round\": 3, \"train\": {\"loss\": 1}, \"eval\": {\"loss\": 0.5}}\n"),
                     FVM_OK);
    assert_int_equal(f->m->restart_line, 3);
    assert_int_equal(f->m->replaced, 2);
    assert_int_equal(f->m->rounds, 3);
    const fvm_series *loss = series(f, "train.loss", 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(loss->rounds[i], i + 1);
        assert_true(loss->values[i] == 3 - i);
    }
    /* round 2's evaluation was in the replaced line */
    const fvm_series *ev = series(f, "eval.loss", 1);
    assert_int_equal(ev->rounds[0], 3);
    assert_true(ev->values[0] == 0.5);
    /* lines out of order are sorted */
    assert_int_equal(parse(f, "{\"round\": 5, \"v\": 5}\n{\"round\": 2, \"v\": 2}\n{\"round\": 9, \"v\": 9}\n"),
                     FVM_OK);
    const fvm_series *v = series(f, "v", 3);
    assert_int_equal(v->rounds[0], 2);
    assert_int_equal(v->rounds[1], 5);
    assert_int_equal(v->rounds[2], 9);
    assert_int_equal(f->m->restart_line, 2);
    assert_int_equal(f->m->replaced, 0);
}

static void test_many_rounds(void **state)
{
    fx *f = *state;
    /* rounds whose keys come in different orders, and metrics that come and go */
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int r = 1; r <= 5000; r++) {
        if (r % 2)
            len += (size_t)snprintf(text + len, cap - len, "{\"round\": %d, \"a\": %d, \"b\": %d.5}\n", r, r, r);
        else
            len += (size_t)snprintf(text + len, cap - len, "{\"b\": %d.5, \"round\": %d, \"c\": {\"d\": 1}}\n", r, r);
    }
    fvm_status s = fvm_metrics_parse("m.jsonl", text, len, &f->m, &f->d);
    free(text);
    assert_int_equal(s, FVM_OK);
    assert_int_equal(series(f, "a", 2500)->rounds[2499], 4999);
    const fvm_series *b = series(f, "b", 5000);
    for (size_t i = 0; i < 5000; i++)
        assert_true(b->rounds[i] == (int64_t)i + 1 && b->values[i] == (double)i + 1.5);
    assert_int_equal(series(f, "c.d", 2500)->rounds[0], 2);
}

/* 100,000 series: 60,000 in one line, then 40,000 lines of a new one each
 * (and one seen before). Every series is found by name, with its points;
 * the file takes the same time a series whatever their number (a lookup by
 * scanning the names took 30 s of CPU for this file; 5 s is the bound). */
static void test_many_series(void **state)
{
    fx *f = *state;
    enum { WIDE = 60000, LINES = 40000 };
    size_t cap = (size_t)WIDE * 24 + (size_t)LINES * 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len, "{\"round\": 0");
    for (int k = 0; k < WIDE; k++)
        len += (size_t)snprintf(text + len, cap - len, ", \"w%d\": %d", k, k);
    len += (size_t)snprintf(text + len, cap - len, "}\n");
    for (int r = 1; r <= LINES; r++)
        len += (size_t)snprintf(text + len, cap - len, "{\"round\": %d, \"n\": {\"s%d\": %d}, \"w%d\": 1}\n", r, r, -r,
                                r % WIDE);
    clock_t start = clock();
    fvm_status s = fvm_metrics_parse("m.jsonl", text, len, &f->m, &f->d);
    double cpu = (double)(clock() - start) / CLOCKS_PER_SEC;
    free(text);
    assert_int_equal(s, FVM_OK);
    assert_int_equal(f->m->nseries, WIDE + LINES);
    assert_int_equal(f->m->rounds, LINES + 1);
    char name[32];
    for (int k = 0; k < WIDE; k++) {
        snprintf(name, sizeof name, "w%d", k);
        const fvm_series *w = fvm_metrics_get(f->m, name);
        assert_non_null(w);
        assert_ptr_equal(w, &f->m->series[k]);
        assert_true(w->values[0] == k);
    }
    for (int r = 1; r <= LINES; r++) {
        snprintf(name, sizeof name, "n.s%d", r);
        const fvm_series *x = series(f, name, 1);
        assert_true(x->rounds[0] == r && x->values[0] == -r);
    }
    assert_int_equal(series(f, "w7", 2)->rounds[1], 7);
    assert_null(fvm_metrics_get(f->m, "n.s0"));
    assert_null(fvm_metrics_get(f->m, "w60000"));
    assert_null(fvm_metrics_get(f->m, "n"));
    if (cpu > 5)
        fail_msg("reading 100,000 series took %.1f s of CPU", cpu);
}

static void test_files(void **state)
{
    fx *f = *state;
    assert_int_equal(fvm_metrics_read("/nonexistent/m.jsonl", &f->m, &f->d), FVM_ERR_IO);
    assert_null(f->m);
    assert_int_equal(f->d.n, 1);
    char path[] = "/tmp/fvm_test_metrics_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fputs("{\"round\": 1, \"v\": 1}\n{\"round\": 2, \"v\": \n", fp);
    fclose(fp);
    fvm_diag_clear(&f->d);
    fvm_status s = fvm_metrics_read(path, &f->m, &f->d);
    remove(path);
    assert_int_equal(s, FVM_ERR_SYNTAX);
    assert_string_equal(f->d.errs[0].loc.file, path);
    assert_int_equal(f->d.errs[0].loc.line, 2);
    fvm_metrics_free(NULL);
}

/* A value of type text from JSON text; its type in *t (in a). */
static fvm_value *value_of(fvm_arena *a, const char *type, const char *json, const fvm_type **t)
{
    fvm_diag d = {0};
    fvm_doc *doc = NULL;
    fvm_doc_src src = {.file = "v", .text = json, .len = strlen(json)};
    fvm_value *v = NULL;
    int64_t n = -1;
    assert_int_equal(fvm_type_parse(a, type, NULL, NULL, t, &d), FVM_OK);
    assert_int_equal(fvm_json_parse(a, &src, &doc, &d), FVM_OK);
    assert_int_equal(fvm_value_from_doc(doc, *t, "v", "", &n, &v, &d), FVM_OK);
    fvm_diag_clear(&d);
    return v;
}

/* fvm_metrics_line's text, checked and freed. */
static void line_is(const fvm_metrics_round *r, const char *want)
{
    char *line = NULL;
    size_t len = 0;
    fvm_diag d = {0};
    assert_int_equal(fvm_metrics_line(r, &line, &len, &d), FVM_OK);
    assert_string_equal(line, want);
    assert_int_equal(len, strlen(want));
    free(line);
}

/* A round's line: the members asked for, in their order, on one line; seconds to the microsecond. */
static void test_line(void **state)
{
    (void)state;
    fvm_arena a = {0};
    const fvm_type *tt, *et;
    fvm_value *train = value_of(&a, "<loss=f32[],examples=f32[]>@SERVER", "{\"loss\": 0.25, \"examples\": 3}", &tt);
    fvm_value *eval = value_of(&a, "<accuracy=f32[]>", "{\"accuracy\": 0.75}", &et);
    int64_t clients[] = {4, 9};
    fvm_metrics_round r = {.round = 3, .train = train, .train_type = tt};
    line_is(&r, "{\"round\": 3, \"train\": {\"loss\": 0.25, \"examples\": 3.0}}\n");
    r.fields = FVM_METRICS_CLIENTS;
    r.nclients = 2;
    line_is(&r, "{\"round\": 3, \"train\": {\"loss\": 0.25, \"examples\": 3.0}, \"clients\": 2}\n");
    r = (fvm_metrics_round){
        3,          train,     tt,  eval, et,     FVM_METRICS_TIMES | FVM_METRICS_CLIENTS | FVM_METRICS_SAMPLED,
        0.12345678, 0.0500004, 1.5, 2,    clients};
    line_is(&r, "{\"round\": 3, \"train\": {\"loss\": 0.25, \"examples\": 3.0}, \"eval\": {\"accuracy\": 0.75}, "
                "\"seconds\": 0.123457, \"eval_seconds\": 0.05, \"cpu_seconds\": 1.5, \"clients\": 2, "
                "\"sampled\": [4, 9]}\n");
    r.eval = NULL; /* no evaluation: no eval_seconds */
    r.fields = FVM_METRICS_TIMES;
    line_is(&r, "{\"round\": 3, \"train\": {\"loss\": 0.25, \"examples\": 3.0}, \"seconds\": 0.123457, "
                "\"cpu_seconds\": 1.5}\n");
    fvm_value_release(train);
    fvm_value_release(eval);
    fvm_arena_free(&a);
}

/* Writes text to path. */
static void put(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* path holds exactly text. */
static void holds(const char *path, const char *text)
{
    char buf[512] = {0};
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    assert_string_equal(buf, text);
}

/* Cut back for a run resumed after round 2: the lines of later rounds and an
 * incomplete last line go, lines without a round stay, a missing file stays missing. */
static void test_cut(void **state)
{
    fx *f = *state;
    char path[] = "/tmp/fvm_test_metrics_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    put(path, "{\"round\": 1, \"v\": 1}\nnot json\n{\"round\": 2, \"v\": 2}\n{\"round\": 3, \"v\": 3}\n"
              "{\"round\": 2, \"v\": 4}\n{\"rou");
    assert_int_equal(fvm_metrics_cut(path, 2, &f->d), FVM_OK);
    holds(path, "{\"round\": 1, \"v\": 1}\nnot json\n{\"round\": 2, \"v\": 2}\n");
    assert_int_equal(fvm_metrics_cut(path, 2, &f->d), FVM_OK);
    holds(path, "{\"round\": 1, \"v\": 1}\nnot json\n{\"round\": 2, \"v\": 2}\n");
    put(path, "{\"v\": 0, \"round\": 5}\n{\"round\": 1}\n");
    assert_int_equal(fvm_metrics_cut(path, 0, &f->d), FVM_OK);
    holds(path, "");
    remove(path);
    assert_int_equal(fvm_metrics_cut(path, 2, &f->d), FVM_OK);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(f->d.n, 0);
    assert_int_equal(fvm_metrics_cut("/dev/null", 2, &f->d), FVM_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_what_fedvm_run_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_and_leaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blank_lines_and_crlf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_usable_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incomplete_last_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_appended_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_rounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_series, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files, setup, teardown),
        cmocka_unit_test(test_line),
        cmocka_unit_test_setup_teardown(test_cut, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
