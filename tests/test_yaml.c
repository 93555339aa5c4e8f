/* test_yaml.c - YAML reader (positions, core schema, tags, aliases, limits, errors) and the JSON/YAML writers' round trips. */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../vm/core/doc.h"
#include "../format/doc_io.h"
#include "test_util.h"

/* Per-test state, freed by the teardown even when an assertion fails. */
typedef struct fx {
    fvm_arena a;
    fvm_diag d;
    char *bufs[8]; /* writer outputs and generated texts */
    int nbufs;
} fx;

static int setup(void **state)
{
    return test_fixture_new(state, sizeof(fx));
}

static int teardown(void **state)
{
    fx *f = *state;
    fvm_arena_free(&f->a);
    fvm_diag_clear(&f->d);
    for (int i = 0; i < f->nbufs; i++)
        free(f->bufs[i]);
    free(f);
    return 0;
}

static char *keep(fx *f, char *p)
{
    assert_non_null(p);
    assert_true(f->nbufs < 8);
    f->bufs[f->nbufs++] = p;
    return p;
}

/* A string repeated n times, kept by f. */
static char *repeat(fx *f, const char *s, int n)
{
    size_t len = strlen(s);
    char *p = keep(f, malloc(len * (size_t)n + 1));
    for (int i = 0; i < n; i++)
        memcpy(p + len * (size_t)i, s, len);
    p[len * (size_t)n] = 0;
    return p;
}

static fvm_status yparse_n(fx *f, const char *text, size_t len, fvm_doc **out)
{
    fvm_diag_clear(&f->d);
    fvm_doc_src src = {.file = "t.yaml", .text = text, .len = len};
    return fvm_yaml_parse(&f->a, &src, out, &f->d);
}

static fvm_doc *yparse(fx *f, const char *text)
{
    fvm_doc *doc = NULL;
    fvm_status st = yparse_n(f, text, strlen(text), &doc);
    if (st != FVM_OK)
        fail_msg("parsing \"%.40s...\": %s (%d:%d) %s", text, fvm_status_name(st), f->d.n ? f->d.errs[0].loc.line : 0,
                 f->d.n ? f->d.errs[0].loc.col : 0, f->d.n ? f->d.errs[0].msg : "");
    assert_non_null(doc);
    assert_int_equal(f->d.n, 0);
    return doc;
}

static fvm_doc *jparse(fx *f, const char *text)
{
    fvm_diag_clear(&f->d);
    fvm_doc *doc = NULL;
    fvm_doc_src src = {.file = "t.json", .text = text, .len = strlen(text)};
    fvm_status st = fvm_json_parse(&f->a, &src, &doc, &f->d);
    if (st != FVM_OK)
        fail_msg("parsing JSON %s: %s", text, f->d.n ? f->d.errs[0].msg : "");
    assert_non_null(doc);
    return doc;
}

/* The one recorded error must have this code, position (0 = any) and message part. */
static void check_error(fx *f, fvm_status st, fvm_status code, int line, int col, const char *part)
{
    if (st != code)
        fail_msg("expected %s, got %s: %s", fvm_status_name(code), fvm_status_name(st),
                 f->d.n ? f->d.errs[0].msg : "(no message)");
    assert_int_equal(f->d.n, 1);
    const fvm_error *e = &f->d.errs[0];
    assert_int_equal(e->code, code);
    if (line) {
        if (e->loc.line != line || e->loc.col != col)
            fail_msg("error \"%s\" at %d:%d, expected %d:%d", e->msg, e->loc.line, e->loc.col, line, col);
    }
    if (part && !strstr(e->msg, part))
        fail_msg("message \"%s\" lacks \"%s\"", e->msg, part);
}

static void expect_yaml_error_n(fx *f, const char *text, size_t len, fvm_status code, int line, int col,
                                const char *part)
{
    fvm_doc *doc = (fvm_doc *)&doc;
    fvm_status st = yparse_n(f, text, len, &doc);
    check_error(f, st, code, line, col, part);
    assert_null(doc);
    assert_non_null(f->d.errs[0].loc.file);
    assert_string_equal(f->d.errs[0].loc.file, "t.yaml");
}

static void expect_yaml_error(fx *f, const char *text, fvm_status code, int line, int col, const char *part)
{
    expect_yaml_error_n(f, text, strlen(text), code, line, col, part);
}

/* The value of key v in the document "v: <text>". */
static fvm_doc *value_of(fx *f, const char *text)
{
    char buf[256];
    snprintf(buf, sizeof buf, "v: %s\n", text);
    fvm_doc *root = yparse(f, buf);
    assert_int_equal(root->kind, FVM_DOC_OBJECT);
    fvm_doc *v = fvm_doc_get(root, "v");
    assert_non_null(v);
    return v;
}

static void check_pos(const fvm_doc *n, int line, int col)
{
    assert_non_null(n);
    if (n->line != line || n->col != col)
        fail_msg("node at %d:%d, expected %d:%d", n->line, n->col, line, col);
}

static void check_string(const fvm_doc *n, const char *s)
{
    assert_non_null(n);
    assert_int_equal(n->kind, FVM_DOC_STRING);
    assert_int_equal(n->u.str.len, strlen(s));
    assert_string_equal(n->u.str.s, s);
}

/* ---- positions ------------------------------------------------------------ */

static void test_positions(void **state)
{
    fx *f = *state;
    fvm_doc *root = yparse(f, "a: 1\n"
                              "bb:\n"
                              "  - x\n"
                              "  - {k: v}\n"
                              "\"é\": [1, 2]\n"
                              "héllo: wörld\n");
    check_pos(root, 1, 1);
    assert_int_equal(root->u.coll.n, 4);
    check_pos(root->u.coll.keys[0], 1, 1);
    check_pos(root->u.coll.items[0], 1, 4);
    check_pos(root->u.coll.keys[1], 2, 1);
    fvm_doc *bb = root->u.coll.items[1];
    assert_int_equal(bb->kind, FVM_DOC_ARRAY);
    assert_false(bb->flow);
    check_pos(bb, 3, 3);
    check_pos(bb->u.coll.items[0], 3, 5);
    fvm_doc *m = bb->u.coll.items[1];
    assert_true(m->flow);
    check_pos(m, 4, 5);
    check_pos(m->u.coll.keys[0], 4, 6);
    check_pos(m->u.coll.items[0], 4, 9);
    /* columns count code points, not bytes */
    check_string(root->u.coll.keys[2], "é");
    check_pos(root->u.coll.keys[2], 5, 1);
    fvm_doc *arr = root->u.coll.items[2];
    assert_true(arr->flow);
    check_pos(arr, 5, 6);
    check_pos(arr->u.coll.items[0], 5, 7);
    check_pos(arr->u.coll.items[1], 5, 10);
    check_pos(root->u.coll.keys[3], 6, 1);
    check_string(root->u.coll.items[3], "wörld");
    check_pos(root->u.coll.items[3], 6, 8);
}

static void test_position_after_bom(void **state)
{
    fx *f = *state;
    fvm_doc *root = yparse(f, "\xEF\xBB\xBF"
                              "ab: c\n");
    check_pos(root->u.coll.keys[0], 1, 1);
    check_pos(root->u.coll.items[0], 1, 5);
}

/* ---- core schema ---------------------------------------------------------- */

static void test_null(void **state)
{
    fx *f = *state;
    const char *nulls[] = {"null", "Null", "NULL", "~", ""};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        assert_int_equal(value_of(f, nulls[i])->kind, FVM_DOC_NULL);
    fvm_doc *seq = yparse(f, "- \n- ~\n");
    assert_int_equal(seq->u.coll.items[0]->kind, FVM_DOC_NULL);
    assert_int_equal(yparse(f, "---\n")->kind, FVM_DOC_NULL);
    check_string(value_of(f, "nULL"), "nULL");
    check_string(value_of(f, "None"), "None");
}

static void test_bool(void **state)
{
    fx *f = *state;
    const char *t[] = {"true", "True", "TRUE"}, *fl[] = {"false", "False", "FALSE"};
    for (int i = 0; i < 3; i++) {
        fvm_doc *v = value_of(f, t[i]);
        assert_int_equal(v->kind, FVM_DOC_BOOL);
        assert_true(v->u.b);
        v = value_of(f, fl[i]);
        assert_int_equal(v->kind, FVM_DOC_BOOL);
        assert_false(v->u.b);
    }
    /* YAML 1.1 spellings are strings under the core schema */
    const char *s[] = {"tRUE", "yes", "no", "on", "off", "y"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        check_string(value_of(f, s[i]), s[i]);
}

static void test_int(void **state)
{
    fx *f = *state;
    static const struct {
        const char *text;
        int64_t v;
    } ok[] = {
        {"0", 0},
        {"-12", -12},
        {"+7", 7},
        {"007", 7},
        {"0o17", 15},
        {"0x1F", 31},
        {"0xff", 255},
        {"9223372036854775807", INT64_MAX},
        {"-9223372036854775808", INT64_MIN},
        {"0x7FFFFFFFFFFFFFFF", INT64_MAX},
        {"0o777777777777777777777", INT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fvm_doc *v = value_of(f, ok[i].text);
        if (v->kind != FVM_DOC_INT || v->u.i != ok[i].v)
            fail_msg("%s: kind %d value %" PRId64, ok[i].text, v->kind, v->u.i);
    }
    const char *big[] = {"9223372036854775808", "-9223372036854775809", "0x8000000000000000",
                         "0o1000000000000000000000", "123456789012345678901234567890"};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "v: %s\n", big[i]);
        expect_yaml_error(f, buf, FVM_ERR_FORMAT, 1, 4, "out of range");
    }
    /* not integers under the core schema: strings */
    const char *s[] = {"0o",    "0x", "0o8",  "0xG",   "1_000", "0X1F", "0O17",
                       "0b101", "+",  "1:20", "12abc", "-0x1F", "0x-1", "1 2"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        check_string(value_of(f, s[i]), s[i]);
}

static void test_float(void **state)
{
    fx *f = *state;
    static const struct {
        const char *text;
        double v;
    } ok[] = {
        {"1.5", 1.5},         {"-2e3", -2000.0},    {".5", 0.5},          {"1.", 1.0},        {"+1.5e-3", 1.5e-3},
        {"1e3", 1000.0},      {"1E3", 1000.0},      {"-0.0", -0.0},       {"2.5E+2", 250.0},  {"-.5", -0.5},
        {"1e-400", 0.0},      {".inf", INFINITY},   {".Inf", INFINITY},   {".INF", INFINITY}, {"+.inf", INFINITY},
        {"-.inf", -INFINITY}, {"-.Inf", -INFINITY}, {"-.INF", -INFINITY},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fvm_doc *v = value_of(f, ok[i].text);
        if (v->kind != FVM_DOC_REAL || v->u.r != ok[i].v)
            fail_msg("%s: kind %d value %g", ok[i].text, v->kind, v->u.r);
    }
    assert_true(signbit(value_of(f, "-0.0")->u.r));
    const char *nans[] = {".nan", ".NaN", ".NAN"};
    for (int i = 0; i < 3; i++) {
        fvm_doc *v = value_of(f, nans[i]);
        assert_int_equal(v->kind, FVM_DOC_REAL);
        assert_true(isnan(v->u.r));
    }
    const char *s[] = {"inf",   "nan",   "-.nan", "+.nan", ".",        "1e",   "e3",
                       "1.5.2", ".inf5", "1e+",   ".e3",   "Infinity", "1.5f", "1.5 x"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        check_string(value_of(f, s[i]), s[i]);
    expect_yaml_error(f, "v: 1e999\n", FVM_ERR_FORMAT, 1, 4, "out of range");
    expect_yaml_error(f, "v: -1e999\n", FVM_ERR_FORMAT, 1, 4, "out of range");
}

static void test_quoted_and_block_strings(void **state)
{
    fx *f = *state;
    check_string(value_of(f, "\"1\""), "1");
    check_string(value_of(f, "'1'"), "1");
    check_string(value_of(f, "'true'"), "true");
    check_string(value_of(f, "\"null\""), "null");
    check_string(value_of(f, "\"~\""), "~");
    check_string(value_of(f, "\"\""), "");
    check_string(value_of(f, "''"), "");
    check_string(value_of(f, "\".inf\""), ".inf");
    check_string(value_of(f, "\"x\\ny\""), "x\ny");
    check_string(value_of(f, "\"h\\u00e9llo\""), "héllo");
    check_string(value_of(f, "|\n  12\n"), "12\n");
    check_string(value_of(f, ">-\n  true\n"), "true");
    check_string(value_of(f, "hello world"), "hello world");
    check_string(value_of(f, "f32[3]@SERVER"), "f32[3]@SERVER");
    /* a quoted NUL would end a C string early: refused */
    expect_yaml_error(f, "v: \"x\\0y\"\n", FVM_ERR_FORMAT, 1, 4, "NUL");
}

/* ---- tags ----------------------------------------------------------------- */

static void test_tags(void **state)
{
    fx *f = *state;
    check_string(value_of(f, "!!str 12"), "12");
    check_string(value_of(f, "!!str"), "");
    check_string(value_of(f, "!<tag:yaml.org,2002:str> true"), "true");
    check_string(value_of(f, "! 12"), "12"); /* the non-specific tag: not resolved */
    fvm_doc *v = value_of(f, "!!int \"12\"");
    assert_int_equal(v->kind, FVM_DOC_INT);
    assert_int_equal(v->u.i, 12);
    v = value_of(f, "!<tag:yaml.org,2002:int> 0x10");
    assert_int_equal(v->kind, FVM_DOC_INT);
    assert_int_equal(v->u.i, 16);
    v = value_of(f, "!!float 1");
    assert_int_equal(v->kind, FVM_DOC_REAL);
    assert_true(v->u.r == 1.0);
    v = value_of(f, "!!float '.inf'");
    assert_int_equal(v->kind, FVM_DOC_REAL);
    assert_true(isinf(v->u.r));
    v = value_of(f, "!!bool 'false'");
    assert_int_equal(v->kind, FVM_DOC_BOOL);
    assert_false(v->u.b);
    assert_int_equal(value_of(f, "!!null ''")->kind, FVM_DOC_NULL);
    assert_int_equal(value_of(f, "!!null ~")->kind, FVM_DOC_NULL);
    v = value_of(f, "!!map {a: 1}");
    assert_int_equal(v->kind, FVM_DOC_OBJECT);
    v = value_of(f, "!!seq [1]");
    assert_int_equal(v->kind, FVM_DOC_ARRAY);
    v = value_of(f, "!<tag:yaml.org,2002:seq> [1]");
    assert_int_equal(v->kind, FVM_DOC_ARRAY);

    expect_yaml_error(f, "v: !!int x\n", FVM_ERR_FORMAT, 1, 4, "integer");
    expect_yaml_error(f, "v: !!int 1.5\n", FVM_ERR_FORMAT, 1, 4, "integer");
    expect_yaml_error(f, "v: !!float 0x10\n", FVM_ERR_FORMAT, 1, 4, "number");
    expect_yaml_error(f, "v: !!bool yes\n", FVM_ERR_FORMAT, 1, 4, "boolean");
    expect_yaml_error(f, "v: !!null x\n", FVM_ERR_FORMAT, 1, 4, "null");
    expect_yaml_error(f, "v: !!set {a}\n", FVM_ERR_FORMAT, 1, 4, "!!set");
    expect_yaml_error(f, "v: !!binary aGk=\n", FVM_ERR_FORMAT, 1, 4, "!!binary");
    expect_yaml_error(f, "v: !foo bar\n", FVM_ERR_FORMAT, 1, 4, "!foo");
    expect_yaml_error(f, "v: !foo [1]\n", FVM_ERR_FORMAT, 1, 4, "!foo");
    expect_yaml_error(f, "%TAG !e! tag:example.com,2024:\n---\nv: !e!thing 1\n", FVM_ERR_FORMAT, 3, 4,
                      "tag:example.com,2024:thing");
    expect_yaml_error(f, "v: !!map [1]\n", FVM_ERR_FORMAT, 1, 4, "!!map");
    expect_yaml_error(f, "v: !!seq {a: 1}\n", FVM_ERR_FORMAT, 1, 4, "!!seq");
    expect_yaml_error(f, "v: !!str [1]\n", FVM_ERR_FORMAT, 1, 4, "!!str");
    expect_yaml_error(f, "v: !!map x\n", FVM_ERR_FORMAT, 1, 4, "!!map");
}

/* ---- anchors and aliases -------------------------------------------------- */

static void test_alias_shared(void **state)
{
    fx *f = *state;
    fvm_doc *root = yparse(f, "base: &b {x: 1, y: [1, 2]}\n"
                              "use: *b\n"
                              "list: [*b, &s str, *s]\n"
                              "&k key: 1\n"
                              "other: {*k : 2}\n");
    fvm_doc *base = fvm_doc_get(root, "base");
    assert_int_equal(base->kind, FVM_DOC_OBJECT);
    assert_ptr_equal(fvm_doc_get(root, "use"), base); /* shared, not copied */
    fvm_doc *list = fvm_doc_get(root, "list");
    assert_ptr_equal(list->u.coll.items[0], base);
    assert_ptr_equal(list->u.coll.items[2], list->u.coll.items[1]);
    check_string(list->u.coll.items[2], "str");
    /* an alias used as a key */
    fvm_doc *other = fvm_doc_get(root, "other");
    assert_ptr_equal(other->u.coll.keys[0], root->u.coll.keys[3]);
    check_string(other->u.coll.keys[0], "key");
    /* a later anchor of the same name wins */
    root = yparse(f, "- &a 1\n- &a 2\n- *a\n");
    assert_int_equal(root->u.coll.items[2]->u.i, 2);

    expect_yaml_error(f, "a: 1\nb: *nope\n", FVM_ERR_SYNTAX, 2, 4, "undefined alias *nope");
    expect_yaml_error(f, "&a [1, *a]\n", FVM_ERR_CYCLE, 1, 8, "*a");
    expect_yaml_error(f, "&m {k: *m}\n", FVM_ERR_CYCLE, 1, 8, "*m");
}

/* The limit counts aliases by their expanded size: this document has exactly
 * FVM_MAX_DOC_NODES nodes once expanded (though far fewer events), one more is refused. */
static void test_alias_counted(void **state)
{
    fx *f = *state;
    assert_int_equal(FVM_MAX_DOC_NODES, 10000000);
    /* root 1 + anchored sequence (1 + 999) + 9998 aliases of 1000 + 999 scalars = 10,000,000 */
    char *items = repeat(f, "x, ", 998);
    char *aliases = repeat(f, ", *a", 9998);
    char *tail = repeat(f, ", y", 999);
    size_t cap = strlen(items) + strlen(aliases) + strlen(tail) + 64;
    char *text = keep(f, malloc(cap));
    snprintf(text, cap, "[&a [%sx]%s%s]", items, aliases, tail);
    fvm_doc *root = yparse(f, text);
    assert_int_equal(root->u.coll.n, 1 + 9998 + 999);
    assert_ptr_equal(root->u.coll.items[1], root->u.coll.items[0]);
    assert_int_equal(root->u.coll.items[0]->u.coll.n, 999);

    snprintf(text, cap, "[&a [%sx]%s%s, z]", items, aliases, tail);
    expect_yaml_error(f, text, FVM_ERR_LIMIT, 0, 0, "nodes");
    size_t len = strlen(text);
    assert_int_equal(f->d.errs[0].loc.line, 1);
    assert_int_equal(f->d.errs[0].loc.col, (int)len - 1); /* at the z */
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_billion_laughs(void **state)
{
    fx *f = *state;
    const char *lol = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
                      "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                      "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                      "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                      "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                      "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                      "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
                      "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
                      "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    double t0 = now_ms();
    /* g expands to 5,380,840 nodes; the first *g in h passes 10,000,000 */
    expect_yaml_error(f, lol, FVM_ERR_LIMIT, 8, 8, "aliases");
    double ms = now_ms() - t0;
    if (ms > 100)
        fail_msg("refusing took %.1f ms", ms);
    if (f->a.total > 64 * 1024)
        fail_msg("refusing used %zu arena bytes", f->a.total);
}

/* ---- nesting -------------------------------------------------------------- */

static void test_deep_nesting(void **state)
{
    fx *f = *state;
    assert_int_equal(FVM_MAX_DEPTH, 512);
    char *open = repeat(f, "[", 513), *close = repeat(f, "]", 513);
    char *text = keep(f, malloc(2000));
    snprintf(text, 2000, "%.512s%.512s", open, close);
    fvm_doc *n = yparse(f, text);
    for (int i = 1; i < 512; i++)
        n = n->u.coll.items[0];
    assert_int_equal(n->kind, FVM_DOC_ARRAY);
    assert_int_equal(n->u.coll.n, 0);
    snprintf(text, 2000, "%s%s", open, close);
    expect_yaml_error(f, text, FVM_ERR_LIMIT, 1, 513, "nesting deeper than 512");

    /* block mappings: the 513th starts on line 513 after 1024 spaces */
    size_t cap = 600 * 605;
    char *block = keep(f, malloc(cap)), *p = block;
    for (int i = 0; i < 600; i++) {
        memset(p, ' ', (size_t)i * 2);
        p += i * 2;
        memcpy(p, "k:\n", 3);
        p += 3;
    }
    *p = 0;
    expect_yaml_error(f, block, FVM_ERR_LIMIT, 513, 1025, "nesting");
}

static void test_alias_depth(void **state)
{
    fx *f = *state;
    /* a's value is 300 sequences deep; under 300 more, *a would reach 601 */
    char *o = repeat(f, "[", 300), *c = repeat(f, "]", 300);
    size_t cap = 2000;
    char *text = keep(f, malloc(cap));
    snprintf(text, cap, "a: &a %s%s\nb: %s*a%s\n", o, c, o, c);
    expect_yaml_error(f, text, FVM_ERR_LIMIT, 2, 304, "alias *a");
    /* the same alias fits where the total stays within the limit */
    snprintf(text, cap, "a: &a %s%s\nb: [*a]\n", o, c);
    yparse(f, text);
}

/* ---- mapping keys --------------------------------------------------------- */

static void test_duplicate_keys(void **state)
{
    fx *f = *state;
    expect_yaml_error(f, "a: 1\nb: 2\na: 3\n", FVM_ERR_FORMAT, 3, 1, "duplicate key \"a\"");
    expect_yaml_error(f, "m: {x: 1, y: 2, x: 3}\n", FVM_ERR_FORMAT, 1, 17, "\"x\"");
    /* the first repeat in source order is reported */
    expect_yaml_error(f, "b: 1\na: 1\na: 2\nb: 2\n", FVM_ERR_FORMAT, 3, 1, "\"a\"");
    /* "1" quoted and plain string keys compare by text */
    expect_yaml_error(f, "'k': 1\n\"k\": 2\n", FVM_ERR_FORMAT, 2, 1, "\"k\"");
    /* through an alias: reported where the alias is */
    expect_yaml_error(f, "- &k a\n- {a: 1, *k : 2}\n", FVM_ERR_FORMAT, 2, 10, "\"a\"");
    /* the same key in different mappings is fine */
    fvm_doc *root = yparse(f, "m1: {a: 1}\nm2: {a: 2}\nm3:\n  a: 3\n");
    assert_int_equal(root->u.coll.n, 3);
}

static void test_key_must_be_string(void **state)
{
    fx *f = *state;
    expect_yaml_error(f, "1: x\n", FVM_ERR_FORMAT, 1, 1, "mapping key must be a string");
    expect_yaml_error(f, "a: 1\ntrue: x\n", FVM_ERR_FORMAT, 2, 1, "mapping key must be a string");
    expect_yaml_error(f, "~: x\n", FVM_ERR_FORMAT, 1, 1, "mapping key must be a string");
    expect_yaml_error(f, "1.5: x\n", FVM_ERR_FORMAT, 1, 1, "mapping key must be a string");
    expect_yaml_error(f, "? [a]\n: x\n", FVM_ERR_FORMAT, 1, 3, "mapping key must be a string");
    expect_yaml_error(f, "{[a]: x}\n", FVM_ERR_FORMAT, 1, 2, "mapping key must be a string");
    expect_yaml_error(f, "? {a: 1}\n: x\n", FVM_ERR_FORMAT, 1, 3, "mapping key must be a string");
    expect_yaml_error(f, "- &n 5\n- {*n : x}\n", FVM_ERR_FORMAT, 2, 4, "mapping key must be a string");
    fvm_doc *root = yparse(f, "\"1\": x\n!!str 2: y\n");
    check_string(root->u.coll.keys[0], "1");
    check_string(root->u.coll.keys[1], "2");
}

/* ---- errors from the YAML text ------------------------------------------- */

static void test_invalid_utf8(void **state)
{
    fx *f = *state;
    expect_yaml_error(f, "a: \xff\xfe", FVM_ERR_SYNTAX, 1, 4, "invalid YAML");
    expect_yaml_error(f, "a: b\nc: \xc3", FVM_ERR_SYNTAX, 2, 4, "invalid YAML");
    expect_yaml_error(f, "héllo: \xc3\x28", FVM_ERR_SYNTAX, 1, 8, "invalid YAML");
    expect_yaml_error(f, "a: \xed\xa0\x80\n", FVM_ERR_SYNTAX, 1, 4, "invalid YAML"); /* a surrogate */
    /* a UTF-16 byte order mark does not switch the encoding */
    expect_yaml_error_n(f,
                        "\xff\xfe"
                        "a\0:\0 \0"
                        "1\0",
                        10, FVM_ERR_SYNTAX, 1, 1, "invalid YAML");
    /* NUL and other control characters */
    expect_yaml_error_n(f, "a: b\0c\n", 7, FVM_ERR_SYNTAX, 1, 5, "invalid YAML");
}

static void test_documents(void **state)
{
    fx *f = *state;
    expect_yaml_error(f, "a: 1\n---\nb: 2\n", FVM_ERR_FORMAT, 2, 1, "single YAML document");
    expect_yaml_error(f, "--- a\n--- b\n", FVM_ERR_FORMAT, 2, 1, "single YAML document");
    expect_yaml_error(f, "a: 1\n...\n---\n", FVM_ERR_FORMAT, 3, 1, "single YAML document");
    expect_yaml_error(f, "", FVM_ERR_FORMAT, 1, 1, "empty YAML stream");
    expect_yaml_error(f, "# only a comment\n", FVM_ERR_FORMAT, 2, 1, "empty YAML stream");
    fvm_doc *root = yparse(f, "%YAML 1.1\n---\na: 1\n...\n");
    assert_int_equal(fvm_doc_get(root, "a")->u.i, 1);
    fvm_doc_src src = {.file = "t.yaml", .text = NULL, .len = 0};
    fvm_doc *doc = NULL;
    fvm_diag_clear(&f->d);
    check_error(f, fvm_yaml_parse(&f->a, &src, &doc, &f->d), FVM_ERR_FORMAT, 1, 1, "empty");
}

static void test_syntax_errors(void **state)
{
    fx *f = *state;
    expect_yaml_error(f, "a: [1, 2\n", FVM_ERR_SYNTAX, 2, 1,
                      "invalid YAML: did not find expected ',' or ']' while parsing a flow sequence");
    expect_yaml_error(f, "a: b: c\n", FVM_ERR_SYNTAX, 1, 5, "invalid YAML: mapping values are not allowed");
    expect_yaml_error(f, "a:\n  - 1\n  b: 2\n", FVM_ERR_SYNTAX, 3, 3, "invalid YAML");
    expect_yaml_error(f, "a: \"x\n", FVM_ERR_SYNTAX, 2, 1, "invalid YAML: found unexpected end of stream");
    expect_yaml_error(f, "a: @x\n", FVM_ERR_SYNTAX, 1, 4, "invalid YAML");
}

/* ---- JSON and YAML agree -------------------------------------------------- */

static const char program_json[] =
    "{\n"
    "  \"fedvm\": 1,\n"
    "  \"functions\": {\n"
    "    \"client_update\": {\n"
    "      \"params\": {\"w\": \"f32[3]\", \"xs\": \"<x=f32[3],y=f32[]>*\"},\n"
    "      \"body\": [\n"
    "        [\"g\", \"grad\", {\"fn\": \"loss\", \"wrt\": \"w\"}, \"w\", \"xs\"],\n"
    "        [\"lr\", \"const\", {\"value\": 0.1, \"dtype\": \"f32\"}],\n"
    "        [\"step\", \"mul\", \"lr\", \"g\"],\n"
    "        [\"w2\", \"sub\", \"w\", \"step\"]\n"
    "      ],\n"
    "      \"result\": \"w2\"\n"
    "    },\n"
    "    \"next\": {\n"
    "      \"params\": {\"w\": \"f32[3]@SERVER\", \"data\": \"{<x=f32[3],y=f32[]>*}@CLIENTS\"},\n"
    "      \"body\": [\n"
    "        [\"wc\", \"federated_broadcast\", \"w\"],\n"
    "        [\"wn\", \"federated_map\", {\"fn\": \"client_update\"}, \"wc\", \"data\"],\n"
    "        [\"avg\", \"federated_mean\", \"wn\"]\n"
    "      ],\n"
    "      \"result\": \"avg\",\n"
    "      \"rounds\": null,\n"
    "      \"debug\": false\n"
    "    }\n"
    "  }\n"
    "}\n";

static const char program_yaml[] = "# The same program, written the way people write YAML.\n"
                                   "fedvm: 1\n"
                                   "functions:\n"
                                   "  client_update:\n"
                                   "    params: {w: \"f32[3]\", xs: \"<x=f32[3],y=f32[]>*\"}\n"
                                   "    body:\n"
                                   "      - [g, grad, {fn: loss, wrt: w}, w, xs]\n"
                                   "      - [lr, const, {value: 0.1, dtype: f32}]\n"
                                   "      - [step, mul, lr, g]\n"
                                   "      - [w2, sub, w, step]\n"
                                   "    result: w2\n"
                                   "  next:\n"
                                   "    params:\n"
                                   "      w: f32[3]@SERVER\n"
                                   "      data: \"{<x=f32[3],y=f32[]>*}@CLIENTS\"\n"
                                   "    body:\n"
                                   "    - [wc, federated_broadcast, w]\n"
                                   "    - [wn, federated_map, {fn: client_update}, wc, data]\n"
                                   "    - [avg, federated_mean, wn]\n"
                                   "    result: avg\n"
                                   "    rounds:\n"
                                   "    debug: False\n";

static void test_json_and_yaml_agree(void **state)
{
    fx *f = *state;
    fvm_doc *j = jparse(f, program_json);
    fvm_doc *y = yparse(f, program_yaml);
    assert_true(fvm_doc_equal(j, y));
    assert_true(fvm_doc_equal(y, j));
    /* and the comparison is not vacuous */
    fvm_doc *y2 = yparse(f, "fedvm: 1\nfunctions: {}\n");
    assert_false(fvm_doc_equal(j, y2));
    fvm_doc *fn = fvm_doc_get(fvm_doc_get(y, "functions"), "next");
    check_string(fvm_doc_get(fvm_doc_get(fn, "params"), "data"), "{<x=f32[3],y=f32[]>*}@CLIENTS");
    check_pos(fvm_doc_get(fn, "result"), 20, 13);
}

/* ---- writers -------------------------------------------------------------- */

static fvm_doc *obj(fvm_arena *a, bool flow)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    assert_non_null(o);
    o->flow = flow;
    return o;
}

static fvm_doc *arr(fvm_arena *a, bool flow)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_ARRAY);
    assert_non_null(o);
    o->flow = flow;
    return o;
}

static void set(fvm_arena *a, fvm_doc *o, const char *k, fvm_doc *v)
{
    assert_int_equal(fvm_doc_set(a, o, k, v), FVM_OK);
}

static void push(fvm_arena *a, fvm_doc *o, fvm_doc *v)
{
    assert_int_equal(fvm_doc_push(a, o, v), FVM_OK);
}

static const char *const tricky[] = {
    "true",
    "12",
    "~",
    "{f32[]}@CLIENTS",
    "a: b",
    "",
    "x\ny",
    "héllo",
    "null",
    "Null",
    "-x",
    "- x",
    " lead",
    "trail ",
    "#c",
    "a #c",
    "1.5",
    ".inf",
    "-.inf",
    ".nan",
    "0x1F",
    "0o17",
    "+7",
    "1e3",
    "yes",
    "No",
    "on",
    "a, b",
    "[x]",
    "{x}",
    "*x",
    "&x",
    "!x",
    "|x",
    ">x",
    "'x",
    "\"x",
    "%x",
    "@x",
    "`x",
    "?x",
    ":x",
    "x:",
    "tab\there",
    "quote\"s",
    "back\\slash",
    "\001ctl",
    "line\r\nbreak",
    "\n",
    "x\n\ny\n",
    "\xe2\x80\xa8sep",
    "\xe2\x80\xa9ps",
    "nel\xc2\x85x",
    "\xc2\x85",
    "x\r",
    "f32[3]@SERVER",
    "<x=f32[3],y=f32[]>*",
    "日本語",
    "emoji \xF0\x9F\x98\x80",
    "<<",
};

/* A tree with every kind, block and flow collections nested both ways, tricky
 * strings as values and keys, a shared node, and (for YAML) non-finite reals. */
static fvm_doc *build_tree(fvm_arena *a, bool nonfinite)
{
    fvm_doc *root = obj(a, false);
    set(a, root, "null", fvm_doc_new(a, FVM_DOC_NULL));
    set(a, root, "t", fvm_doc_bool(a, true));
    set(a, root, "f", fvm_doc_bool(a, false));
    set(a, root, "i", fvm_doc_int(a, 42));
    set(a, root, "min", fvm_doc_int(a, INT64_MIN));
    set(a, root, "max", fvm_doc_int(a, INT64_MAX));
    fvm_doc *reals = arr(a, true);
    const double rs[] = {1.5, -2e-300, 0.1, 1e300, 3.0, -0.0, 123456789.125, 5e-324, 1.7976931348623157e308};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
        push(a, reals, fvm_doc_real(a, rs[i]));
    if (nonfinite) {
        push(a, reals, fvm_doc_real(a, NAN));
        push(a, reals, fvm_doc_real(a, INFINITY));
        push(a, reals, fvm_doc_real(a, -INFINITY));
    }
    set(a, root, "reals", reals);
    fvm_doc *block_strings = arr(a, false), *flow_strings = arr(a, true), *keys = obj(a, false),
            *flow_keys = obj(a, true);
    for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++) {
        push(a, block_strings, fvm_doc_string(a, tricky[i]));
        push(a, flow_strings, fvm_doc_string(a, tricky[i]));
        set(a, keys, tricky[i], fvm_doc_int(a, (int64_t)i));
        set(a, flow_keys, tricky[i], fvm_doc_string(a, tricky[i]));
    }
    set(a, root, "block strings", block_strings);
    set(a, root, "flow strings", flow_strings);
    set(a, root, "keys", keys);
    set(a, root, "flow keys", flow_keys);
    /* flow inside block inside flow ... */
    fvm_doc *fa = arr(a, true), *inner = obj(a, false), *n = arr(a, false);
    push(a, n, fvm_doc_int(a, 1));
    push(a, n, fvm_doc_int(a, 2));
    set(a, inner, "k", fvm_doc_string(a, "v"));
    set(a, inner, "n", n);
    push(a, fa, fvm_doc_int(a, 1));
    push(a, fa, fvm_doc_string(a, "two"));
    push(a, fa, inner); /* block flag ignored inside flow */
    push(a, fa, arr(a, false));
    push(a, fa, obj(a, true));
    set(a, root, "flow", fa);
    fvm_doc *block = arr(a, false), *bo = obj(a, false), *ba = arr(a, false);
    set(a, bo, "x", fvm_doc_int(a, 1));
    set(a, bo, "y", fa); /* the flow array again: shared */
    set(a, bo, "z", bo->u.coll.items[0]);
    push(a, ba, arr(a, false));
    push(a, ba, obj(a, false));
    push(a, ba, block_strings);
    push(a, block, bo);
    push(a, block, ba);
    push(a, block, arr(a, true));
    set(a, root, "block", block);
    set(a, root, "empty array", arr(a, false));
    set(a, root, "empty object", obj(a, false));
    fvm_doc *deep = root;
    for (int i = 0; i < 20; i++) {
        fvm_doc *next = i % 2 ? obj(a, i % 3 == 0) : arr(a, i % 3 == 0);
        if (deep->kind == FVM_DOC_OBJECT)
            set(a, deep, "deep", next);
        else
            push(a, deep, next);
        deep = next;
    }
    assert_int_equal(deep->kind, FVM_DOC_OBJECT);
    set(a, deep, "bottom", fvm_doc_string(a, "bottom"));
    return root;
}

typedef fvm_status (*writer_fn)(const fvm_doc *, char **, size_t *, fvm_diag *);

/* Runs a writer that must succeed; the output is kept by f. */
static char *write_ok(fx *f, writer_fn write, const fvm_doc *doc, size_t *len)
{
    char *out = NULL;
    fvm_diag_clear(&f->d);
    fvm_status st = write(doc, &out, len, &f->d);
    if (st != FVM_OK)
        fail_msg("writer: %s: %s", fvm_status_name(st), f->d.n ? f->d.errs[0].msg : "");
    return keep(f, out);
}

static void test_json_round_trip(void **state)
{
    fx *f = *state;
    fvm_doc *tree = build_tree(&f->a, false);
    size_t len = 0;
    char *out = write_ok(f, fvm_json_write, tree, &len);
    assert_int_equal(len, strlen(out));
    assert_true(len > 0 && out[len - 1] == '\n');
    fvm_doc *back = jparse(f, out);
    assert_true(fvm_doc_equal(tree, back));
    /* a YAML reader reads JSON too */
    fvm_doc *yback = yparse(f, out);
    assert_true(fvm_doc_equal(tree, yback));
}

static void test_yaml_round_trip(void **state)
{
    fx *f = *state;
    fvm_doc *tree = build_tree(&f->a, true);
    size_t len = 0;
    char *out = write_ok(f, fvm_yaml_write, tree, &len);
    assert_int_equal(len, strlen(out));
    assert_true(len > 0 && out[len - 1] == '\n');
    fvm_doc *back = yparse(f, out);
    if (!fvm_doc_equal(tree, back))
        fail_msg("YAML round trip differs:\n%s", out);
    /* flow collections came back as flow, block ones as block */
    assert_true(fvm_doc_get(back, "flow")->flow);
    assert_true(fvm_doc_get(back, "flow keys")->flow);
    assert_false(fvm_doc_get(back, "keys")->flow);
    assert_false(fvm_doc_get(back, "block")->flow);
    /* the emitter output of a parsed tree is stable */
    assert_string_equal(out, write_ok(f, fvm_yaml_write, back, NULL));
}

static void test_program_round_trips(void **state)
{
    fx *f = *state;
    fvm_doc *prog = yparse(f, program_yaml);
    char *js = write_ok(f, fvm_json_write, prog, NULL);
    char *ys = write_ok(f, fvm_yaml_write, prog, NULL);
    assert_true(fvm_doc_equal(prog, jparse(f, js)));
    assert_true(fvm_doc_equal(prog, yparse(f, ys)));
    /* the JSON writer reproduces the hand-written layout exactly */
    fvm_doc *j = jparse(f, program_json);
    fvm_doc *fns = fvm_doc_get(j, "functions");
    for (size_t i = 0; i < fns->u.coll.n; i++) {
        fvm_doc *fn = fns->u.coll.items[i];
        fvm_doc_get(fn, "params")->flow = true;
        fvm_doc *body = fvm_doc_get(fn, "body");
        for (size_t k = 0; k < body->u.coll.n; k++)
            body->u.coll.items[k]->flow = true;
    }
    assert_string_equal(write_ok(f, fvm_json_write, j, NULL), program_json);
}

static void test_json_layout(void **state)
{
    fx *f = *state;
    fvm_arena *a = &f->a;
    fvm_doc *root = obj(a, false), *b = arr(a, false), *c = obj(a, false), *e = arr(a, true), *fo = obj(a, false);
    set(a, root, "a", fvm_doc_int(a, 1));
    push(a, b, fvm_doc_bool(a, true));
    push(a, b, fvm_doc_new(a, FVM_DOC_NULL));
    push(a, b, fvm_doc_real(a, 1.5));
    push(a, b, fvm_doc_real(a, 2.0));
    push(a, b, fvm_doc_real(a, -INFINITY));
    push(a, b, fvm_doc_real(a, NAN));
    set(a, root, "b", b);
    set(a, c, "d", fvm_doc_string(a, "x\"y\\z\n\x01/é\xe2\x80\xa8.\xe2\x80\xa9\xc2\x85"));
    set(a, root, "c", c);
    push(a, e, fvm_doc_int(a, -3));
    set(a, fo, "f", arr(a, false));
    set(a, fo, "g", fvm_doc_real(a, 1e300));
    push(a, e, fo); /* block object inside a flow array: written flow */
    set(a, root, "e", e);
    set(a, root, "g", obj(a, false));
    set(a, root, "h", arr(a, true));
    size_t len = 0;
    char *out = write_ok(f, fvm_json_write, root, &len);
    const char *want = "{\n"
                       "  \"a\": 1,\n"
                       "  \"b\": [\n"
                       "    true,\n"
                       "    null,\n"
                       "    1.5,\n"
                       "    2.0,\n"
                       "    \"-inf\",\n"
                       "    \"nan\"\n"
                       "  ],\n"
                       "  \"c\": {\n"
                       "    \"d\": \"x\\\"y\\\\z\\n\\u0001/é\\u2028.\\u2029\\u0085\"\n"
                       "  },\n"
                       "  \"e\": [-3, {\"f\": [], \"g\": 1e+300}],\n"
                       "  \"g\": {},\n"
                       "  \"h\": []\n"
                       "}\n";
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    /* scalars and empty roots */
    fvm_doc *s = fvm_doc_string(a, "hi");
    assert_string_equal(write_ok(f, fvm_json_write, s, NULL), "\"hi\"\n");
}

static void test_yaml_layout(void **state)
{
    fx *f = *state;
    fvm_arena *a = &f->a;
    fvm_doc *root = obj(a, false), *b = arr(a, false), *c = obj(a, false), *e = arr(a, true), *fo = obj(a, false);
    set(a, root, "a", fvm_doc_int(a, 1));
    push(a, b, fvm_doc_bool(a, true));
    push(a, b, fvm_doc_new(a, FVM_DOC_NULL));
    push(a, b, fvm_doc_string(a, "12"));
    push(a, b, fvm_doc_real(a, -INFINITY));
    set(a, root, "b", b);
    set(a, c, "d", fvm_doc_string(a, "x"));
    set(a, c, "{T}@CLIENTS", fvm_doc_real(a, 0.5));
    set(a, root, "c", c);
    push(a, e, fvm_doc_int(a, 1));
    set(a, fo, "f", fvm_doc_string(a, "g"));
    push(a, e, fo);
    set(a, root, "e", e);
    set(a, root, "s", fvm_doc_string(a, "héllo"));
    set(a, root, "m", fvm_doc_string(a, "x\ny\xe2\x80\xa8z"));
    set(a, root, "yes", fvm_doc_string(a, "off"));
    set(a, root, "empty", arr(a, false));
    assert_string_equal(write_ok(f, fvm_yaml_write, root, NULL), "a: 1\n"
                                                                 "b:\n"
                                                                 "- true\n"
                                                                 "- null\n"
                                                                 "- \"12\"\n"
                                                                 "- -.inf\n"
                                                                 "c:\n"
                                                                 "  d: x\n"
                                                                 "  \"{T}@CLIENTS\": 0.5\n"
                                                                 "e: [1, {f: g}]\n"
                                                                 "s: héllo\n"
                                                                 "m: \"x\\ny\\Lz\"\n"
                                                                 "\"yes\": \"off\"\n"
                                                                 "empty: []\n");
}

static void test_writer_refusals(void **state)
{
    fx *f = *state;
    fvm_arena *a = &f->a;
    char *out = (char *)&out;
    /* deeper than FVM_MAX_DEPTH */
    fvm_doc *top = arr(a, false), *n = top;
    for (int i = 1; i < 513; i++) {
        fvm_doc *m = arr(a, false);
        push(a, n, m);
        n = m;
    }
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_write(top, &out, NULL, &f->d), FVM_ERR_LIMIT, 0, 0, "nested");
    assert_null(out);
    fvm_diag_clear(&f->d);
    check_error(f, fvm_yaml_write(top, &out, NULL, &f->d), FVM_ERR_LIMIT, 0, 0, "nested");
    assert_null(out);
    /* 512 levels are fine */
    write_ok(f, fvm_json_write, top->u.coll.items[0], NULL);
    /* a DAG whose expansion is too big: refused before writing it */
    fvm_doc *leaf = fvm_doc_string(a, "lol");
    for (int i = 0; i < 8; i++) {
        fvm_doc *up = arr(a, false);
        for (int k = 0; k < 10; k++)
            push(a, up, leaf);
        leaf = up;
    }
    fvm_diag_clear(&f->d);
    double t0 = now_ms();
    check_error(f, fvm_yaml_write(leaf, &out, NULL, &f->d), FVM_ERR_LIMIT, 0, 0, "too large");
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_write(leaf, &out, NULL, &f->d), FVM_ERR_LIMIT, 0, 0, "too large");
    if (now_ms() - t0 > 5000)
        fail_msg("refusing took %.0f ms", now_ms() - t0);
    /* strings must be UTF-8 without NUL */
    const char *bad[] = {"\xff", "a\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fvm_doc *o = obj(a, false);
        set(a, o, "k", fvm_doc_string(a, bad[i]));
        fvm_diag_clear(&f->d);
        check_error(f, fvm_json_write(o, &out, NULL, &f->d), FVM_ERR_USAGE, 0, 0, "UTF-8");
        fvm_diag_clear(&f->d);
        check_error(f, fvm_yaml_write(o, &out, NULL, &f->d), FVM_ERR_USAGE, 0, 0, "UTF-8");
        fvm_doc *k = obj(a, true);
        set(a, k, bad[i], fvm_doc_int(a, 1));
        fvm_diag_clear(&f->d);
        check_error(f, fvm_yaml_write(k, &out, NULL, &f->d), FVM_ERR_USAGE, 0, 0, "UTF-8");
    }
    fvm_doc *nul = fvm_doc_new(a, FVM_DOC_STRING);
    nul->u.str.s = "a\0b";
    nul->u.str.len = 3;
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_write(nul, &out, NULL, &f->d), FVM_ERR_USAGE, 0, 0, "NUL");
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_write(NULL, &out, NULL, &f->d), FVM_ERR_USAGE, 0, 0, "NULL");
}

/* ---- JSON reader regressions ---------------------------------------------- */

/* The error column counted jansson's code-point column as bytes. */
static void test_json_error_column(void **state)
{
    fx *f = *state;
    fvm_doc_src src = {.file = "t.json", .text = "{\"ééé\": x}", .len = strlen("{\"ééé\": x}")};
    fvm_doc *doc = NULL;
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_parse(&f->a, &src, &doc, &f->d), FVM_ERR_SYNTAX, 1, 9, "invalid JSON");
    src.text = "";
    src.len = 0;
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_parse(&f->a, &src, &doc, &f->d), FVM_ERR_SYNTAX, 1, 1, "invalid JSON");
}

/* JSON documents had no FVM_MAX_DEPTH limit (only jansson's 2048). */
static void test_json_depth(void **state)
{
    fx *f = *state;
    char *open = repeat(f, "[", 513), *close = repeat(f, "]", 513);
    char *text = keep(f, malloc(2000));
    snprintf(text, 2000, " %.512s%.512s", open, close);
    fvm_doc_src src = {.file = "t.json", .text = text, .len = strlen(text)};
    fvm_doc *doc = NULL;
    fvm_diag_clear(&f->d);
    assert_int_equal(fvm_json_parse(&f->a, &src, &doc, &f->d), FVM_OK);
    snprintf(text, 2000, " %s%s", open, close);
    src.len = strlen(text);
    fvm_diag_clear(&f->d);
    check_error(f, fvm_json_parse(&f->a, &src, &doc, &f->d), FVM_ERR_LIMIT, 1, 514, "nesting");
}

/* ---- growing parsed trees (regression) ------------------------------------ */

/* The readers sized child arrays exactly while fvm_doc_push assumed its own
 * capacity rule, so pushing onto a parsed 5-member collection wrote over the
 * arena memory behind it (a neighbouring node), silently. */
static void check_push_on_parsed(fx *f, fvm_doc *root)
{
    fvm_doc *inner = root->u.coll.items[0], *next = root->u.coll.items[1];
    for (int i = 0; i < 20; i++)
        assert_int_equal(fvm_doc_push(&f->a, inner, fvm_doc_int(&f->a, 100 + i)), FVM_OK);
    assert_int_equal(inner->u.coll.n, 25);
    for (int i = 0; i < 25; i++) {
        assert_int_equal(inner->u.coll.items[i]->kind, FVM_DOC_INT);
        assert_int_equal(inner->u.coll.items[i]->u.i, i < 5 ? i + 1 : 100 + i - 5);
    }
    assert_int_equal(next->kind, FVM_DOC_ARRAY);
    assert_int_equal(next->u.coll.items[0]->kind, FVM_DOC_INT);
    assert_int_equal(next->u.coll.items[0]->u.i, 6);
    fvm_doc *m = root->u.coll.items[2];
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(fvm_doc_set(&f->a, m, key, fvm_doc_int(&f->a, i)), FVM_OK);
    }
    assert_int_equal(m->u.coll.n, 15);
    check_string(m->u.coll.keys[0], "a");
    assert_int_equal(fvm_doc_get(m, "e")->u.i, 5);
    assert_int_equal(fvm_doc_get(m, "k9")->u.i, 9);
    check_string(root->u.coll.items[3], "tail");
    /* push is for arrays and set for objects */
    assert_int_equal(fvm_doc_push(&f->a, m, fvm_doc_int(&f->a, 1)), FVM_ERR_USAGE);
    assert_int_equal(fvm_doc_set(&f->a, inner, "k", fvm_doc_int(&f->a, 1)), FVM_ERR_USAGE);
    assert_int_equal(m->u.coll.n, 15);
    assert_int_equal(inner->u.coll.n, 25);
}

static void test_push_on_parsed(void **state)
{
    fx *f = *state;
    check_push_on_parsed(
        f, jparse(f, "[[1, 2, 3, 4, 5], [6], {\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5}, \"tail\"]"));
    check_push_on_parsed(f, yparse(f, "- [1, 2, 3, 4, 5]\n- [6]\n- {a: 1, b: 2, c: 3, d: 4, e: 5}\n- tail\n"));
    /* empty parsed collections grow too */
    fvm_doc *e = yparse(f, "[[], {}]");
    assert_int_equal(fvm_doc_push(&f->a, e->u.coll.items[0], fvm_doc_int(&f->a, 1)), FVM_OK);
    assert_int_equal(fvm_doc_set(&f->a, e->u.coll.items[1], "k", fvm_doc_int(&f->a, 1)), FVM_OK);
    assert_int_equal(fvm_doc_get(e->u.coll.items[1], "k")->u.i, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_positions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_position_after_bom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_int, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quoted_and_block_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alias_shared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alias_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_billion_laughs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_nesting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alias_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_must_be_string, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_documents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_and_yaml_agree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yaml_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_program_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yaml_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_error_column, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_on_parsed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
