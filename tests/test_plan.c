/* test_plan.c - plan writers (format/plan.c, format/plan_dot.c, format/plan_beam.c): the format
 * list, the choice of function, DOT escaping, JavaScript string literals, where each value is drawn,
 * and errors. Graphviz itself reads the
 * pictures in tests/run_plan.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/transform/plan.h"
#include "../format/plan_beam.h"
#include "../format/plan_dot.h"
#include "../vm/fedvm.h"
#include "test_util.h"

/* The program src (single quotes for double) as "dir/test.json", loaded and (when checked) checked. */
static fvm_program *load(const char *src, bool checked)
{
    return test_load("dir/test.json", src, checked);
}

/* fvm_plan_dot_escape(s) as a string (malloc'd). */
static char *escaped(const char *s)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    assert_non_null(f);
    fvm_plan_dot_escape(f, s);
    fclose(f);
    return text;
}

static void test_escape(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain_name", "plain_name"},
        {"a\"b", "a\\\"b"},
        {"back\\slash", "back\\\\slash"},
        {"ends\\", "ends\\\\"},
        {"\\n \\l \\N", "\\\\n \\\\l \\\\N"}, /* DOT's escapes stay literal */
        {"{<a|b>}", "{<a|b>}"}, /* plain labels: nothing to do */
        {"two\nlines\ttab", "two\\\\nlines\\\\ttab"}, /* shown as \n and \t, never a line break */
        {"bell\x07", "bell\\\\x07"},
        {"caf\xc3\xa9", "caf\xc3\xa9"}, /* UTF-8 passes through */
        {"bad\xff\xc3", "bad\\\\xff\\\\xc3"}, /* bytes that are not UTF-8 do not */
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = escaped(cases[i].in);
        assert_string_equal(s, cases[i].out);
        free(s);
    }
}

/* Each expected literal is written by hand from ECMA-262's string literal grammar (and JSON's). */
static void test_js_string(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {"plain", 5, "\"plain\""},
        {"", 0, "\"\""},
        {"q\"uote", 6, "\"q\\\"uote\""},
        {"back\\slash\\", 11, "\"back\\\\slash\\\\\""},
        {"`${x}` */ // '", 14, "\"`${x}` */ // '\""}, /* inert inside a double-quoted literal */
        {"a\nb\r\t\b\f", 7, "\"a\\nb\\r\\t\\b\\f\""},
        {"nul\0\x1f\x7f", 6, "\"nul\\u0000\\u001f\\u007f\""},
        {"caf\xc3\xa9", 5, "\"caf\\u00e9\""}, /* U+00E9 */
        {"\xe2\x80\xa8\xe2\x80\xa9", 6, "\"\\u2028\\u2029\""}, /* line and paragraph separators */
        {"\xf0\x9f\x98\x80", 4, "\"\\ud83d\\ude00\""}, /* U+1F600: a surrogate pair */
        {"\xef\xbf\xbf\xf4\x8f\xbf\xbf", 7, "\"\\uffff\\udbff\\udfff\""}, /* U+FFFF, U+10FFFF */
        {"bad\xff", 4, "\"bad\\ufffd\""}, /* not UTF-8 */
        {"\xc3(", 2, "\"\\ufffd(\""}, /* a cut sequence */
        {"\xc0\xaf", 2, "\"\\ufffd\\ufffd\""}, /* overlong '/' */
        {"\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""}, /* an encoded surrogate */
        {"\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* past U+10FFFF */
        {"\xe2\x82", 2, "\"\\ufffd\\ufffd\""}, /* cut at the end */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = fvm_plan_js_string(cases[i].in, cases[i].n);
        assert_non_null(s);
        assert_string_equal(s, cases[i].out);
        free(s);
    }
}

static void test_formats(void **state)
{
    (void)state;
    static const char *const names[] = {"dot", "mapreduce", "distribute-aggregate", "cross-device", "beam"};
    assert_int_equal(fvm_plan_nformats, 5);
    for (int i = 0; i < 5; i++) {
        const fvm_plan_format *pf = fvm_plan_format_lookup(names[i]);
        assert_non_null(pf);
        assert_ptr_equal(pf, &fvm_plan_formats[i]);
        assert_true(pf->summary && *pf->summary);
        assert_non_null(pf->write);
    }
    assert_null(fvm_plan_format_lookup("svg"));
    assert_null(fvm_plan_format_lookup(NULL));
}

#define LOCAL "'double': {'params': {'x': 'f32[]'}, 'body': [['y', 'add', 'x', 'x']], 'result': 'y'}"
#define MAIN "'main': {'params': {'x': '{f32[]}@CLIENTS'}, 'body': [['m', 'federated_mean', 'x']], 'result': 'm'}"
#define INIT \
    "'initialize': {'params': {}, 'body': [['z', 'const', {'value': 0.0}], " \
    "['s', 'federated_value', {'placement': 'SERVER'}, 'z']], 'result': 's'}"
#define NEXT \
    "'next': {'params': {'s': 'f32[]@SERVER', 'x': '{f32[]}@CLIENTS'}, 'body': [" \
    "['m', 'federated_mean', 'x'], ['r', 'struct', {'names': ['state', 'metrics']}, 's', 'm']], 'result': 'r'}"

static void test_entry(void **state)
{
    (void)state;
    fvm_diag d = {0};
    const fvm_func *f = NULL;
    fvm_program *p = load("{'fedvm': 1, 'functions': {" LOCAL ", " MAIN ", " INIT ", " NEXT "}}", true);
    assert_int_equal(fvm_plan_entry(p, NULL, &f, &d), FVM_OK);
    assert_string_equal(f->name, "next"); /* the iterative process first */
    assert_int_equal(fvm_plan_entry(p, "double", &f, &d), FVM_OK);
    assert_string_equal(f->name, "double");
    assert_int_equal(fvm_plan_entry(p, "dubble", &f, &d), FVM_ERR_NAME);
    assert_null(f);
    assert_string_equal(d.errs[0].msg, "no function 'dubble'; did you mean 'double'?");
    assert_string_equal(d.errs[0].loc.file, "dir/test.json"); /* located at the "functions" object */
    assert_string_equal(d.errs[0].loc.ptr, "/functions");
    assert_int_equal(d.errs[0].loc.line, 1);
    assert_int_equal(d.errs[0].loc.col, 27);
    assert_int_equal(fvm_plan_entry(p, "zzz", &f, &d), FVM_ERR_NAME); /* nothing close: the file's functions */
    assert_string_equal(d.errs[1].msg,
                        "no function 'zzz'; expected one of the program's functions: double, main, initialize, next");
    fvm_diag_clear(&d);
    fvm_program_free(p);

    p = load("{'fedvm': 1, 'functions': {" LOCAL ", " MAIN "}}", true);
    assert_int_equal(fvm_plan_entry(p, NULL, &f, &d), FVM_OK);
    assert_string_equal(f->name, "main");
    fvm_program_free(p);

    p = load("{'fedvm': 1, 'functions': {" LOCAL "}}", true);
    assert_int_equal(fvm_plan_entry(p, NULL, &f, &d), FVM_ERR_NAME);
    assert_string_equal(d.errs[0].msg, "no function 'next' or 'main' to make the plan of; name one of the program's "
                                       "functions: double");
    assert_string_equal(d.errs[0].loc.ptr, "/functions");
    fvm_diag_clear(&d);
    fvm_program_free(p);
}

/* The DOT text of function fn (NULL: the default) of a checked program. */
static char *dot(const char *src, const char *fn)
{
    fvm_program *p = load(src, true);
    fvm_diag d = {0};
    fvm_plan_opts o = {.fn = fn};
    char *text = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    assert_int_equal(fvm_plan_dot(p, &o, &text, &len, &d), FVM_OK);
    assert_int_equal(strlen(text), len);
    assert_int_equal(fvm_plan_dot(p, &o, &again, &len2, &d), FVM_OK);
    assert_string_equal(text, again); /* deterministic */
    free(again);
    fvm_program_free(p);
    return text;
}

/* The text between "subgraph NAME {" and the next "  }", or "" when there is no such cluster. */
static char *cluster(const char *text, const char *name)
{
    char head[64];
    snprintf(head, sizeof head, "subgraph %s {", name);
    const char *a = strstr(text, head);
    if (!a)
        return strdup("");
    const char *b = strstr(a, "\n  }\n");
    assert_non_null(b);
    return strndup(a, (size_t)(b - a));
}

static void test_dot_places(void **state)
{
    (void)state;
    char *text = dot("{'fedvm': 1, 'functions': {" LOCAL ", " MAIN ", " INIT ", " NEXT "}}", NULL);
    char *server = cluster(text, "cluster_server"), *clients = cluster(text, "cluster_clients");
    assert_non_null(strstr(text, "graph [label=\"test.json: next\"")); /* the file's base name */
    /* next: s and m at the server, r (a struct of two server values) too, and the result */
    assert_non_null(strstr(server, "p0 [label=\"s\\nf32[]@SERVER\", shape=invhouse"));
    assert_non_null(strstr(server, "i0 [label=\"m\\nfederated_mean\", shape=hexagon"));
    assert_non_null(strstr(server, "i1 [label=\"r\\nstruct\"]"));
    assert_non_null(strstr(server, "result [label=\"returns\""));
    assert_non_null(strstr(clients, "p1 [label=\"x\\n{f32[]}@CLIENTS\""));
    assert_null(strstr(clients, "i0"));
    /* the aggregation's argument crosses; the struct's arguments do not */
    assert_non_null(strstr(text, "p1 -> i0 [label=\"{f32[]}@CLIENTS\", color=\"#c0392b\""));
    assert_non_null(strstr(text, "p0 -> i1 [label=\"f32[]@SERVER\"];"));
    assert_non_null(strstr(text, "i1 -> result;")); /* <state=f32[]@SERVER,metrics=f32[]@SERVER>: too long */
    free(server);
    free(clients);
    free(text);

    /* a local function: no clusters, every node outside */
    text = dot("{'fedvm': 1, 'functions': {" LOCAL ", " MAIN "}}", "double");
    assert_null(strstr(text, "subgraph"));
    assert_non_null(strstr(text, "i0 [label=\"y\\nadd\"];"));
    assert_non_null(strstr(text, "p0 -> i0 [label=\"f32[]\"];\n  p0 -> i0 [label=\"f32[]\"];")); /* x used twice */
    free(text);

    /* initialize: an unplaced constant outside, federated_value placing it at the server */
    text = dot("{'fedvm': 1, 'functions': {" INIT ", " NEXT "}}", "initialize");
    server = cluster(text, "cluster_server");
    assert_non_null(strstr(server, "i1 [label=\"s\\nfederated_value(SERVER)\", shape=hexagon"));
    assert_null(strstr(server, "i0 "));
    assert_non_null(strstr(text, "i0 -> i1 [label=\"f32[]\"];")); /* unplaced to placed: not bold */
    free(server);
    free(text);
}

static void test_dot_mixed_and_attrs(void **state)
{
    (void)state;
    /* a struct of a server and a client value lives in neither cluster; aggregate shows its functions */
    char *text = dot("{'fedvm': 1, 'functions': {"
                     "'acc': {'params': {'a': 'f32[]', 'v': 'f32[]'}, 'body': [['s', 'add', 'a', 'v']], 'result': 's'},"
                     "'main': {'params': {'s': 'f32[]@SERVER', 'x': '{f32[]}@CLIENTS'}, 'body': ["
                     "  ['zero', 'const', {'value': 0.0}],"
                     "  ['t', 'federated_aggregate', {'accumulate': 'acc', 'merge': 'acc'}, 'x', 'zero'],"
                     "  ['both', 'struct', 's', 'x']], 'result': 'both'}}}",
                     NULL);
    char *server = cluster(text, "cluster_server");
    assert_non_null(
        strstr(server, "i1 [label=\"t\\nfederated_aggregate\\naccumulate=acc\\nmerge=acc\", shape=hexagon"));
    assert_null(strstr(server, "i2 "));
    assert_non_null(strstr(text, "  }\n  i0 [label=\"zero\\nconst\"];\n  i2 [label=\"both\\nstruct\"];\n  result"));
    free(server);
    free(text);
}

static void test_dot_unchecked(void **state)
{
    (void)state;
    fvm_program *p = load("{'fedvm': 1, 'functions': {" MAIN "}}", false);
    fvm_diag d = {0};
    char *text = (char *)"untouched";
    size_t len = 7;
    assert_int_equal(fvm_plan_dot(p, NULL, &text, &len, &d), FVM_ERR_USAGE);
    assert_null(text);
    assert_int_equal(len, 0);
    assert_non_null(strstr(d.errs[0].msg, "is not checked"));
    fvm_diag_clear(&d);
    fvm_program_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),        cmocka_unit_test(test_js_string),
        cmocka_unit_test(test_formats),       cmocka_unit_test(test_entry),
        cmocka_unit_test(test_dot_places),    cmocka_unit_test(test_dot_mixed_and_attrs),
        cmocka_unit_test(test_dot_unchecked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
