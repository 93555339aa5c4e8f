/* test_types.c - unit tests for type strings: parsing, canonical printing, equality, compatibility, well-formedness. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/ir/types.h"
#include "test_util.h"

/* Every error location is given relative to this one: the type string is the
 * JSON string whose opening quote is at line 7, column 20 of prog.json, so the
 * character at byte offset k of an ASCII type string is at column 20 + 1 + k. */
static const fvm_loc LOC = {"prog.json", 7, 20, "/functions/main/params/x"};
#define COL(k) (LOC.col + 1 + (k))

typedef struct fixture {
    fvm_arena a;
    fvm_diag d;
} fixture;

static int setup(void **state)
{
    return test_fixture_new(state, sizeof(fixture));
}

static int teardown(void **state)
{
    fixture *f = *state;
    fvm_diag_clear(&f->d);
    fvm_arena_free(&f->a);
    free(f);
    return 0;
}

/* Parses text that must be valid. */
static const fvm_type *ok(fixture *f, const char *text)
{
    const fvm_type *t = NULL;
    fvm_diag_clear(&f->d);
    fvm_status s = fvm_type_parse(&f->a, text, NULL, &LOC, &t, &f->d);
    if (s != FVM_OK) {
        for (int i = 0; i < f->d.n; i++)
            print_error("%s\n", f->d.errs[i].msg);
        fail_msg("\"%s\" did not parse (status %d)", text, (int)s);
    }
    assert_non_null(t);
    assert_int_equal(f->d.n, 0);
    return t;
}

/* Parses text that must be rejected with code at column col; returns the message. */
static const char *bad(fixture *f, const char *text, fvm_status code, int col)
{
    fvm_diag_clear(&f->d);
    const fvm_type *t = NULL;
    fvm_status s = fvm_type_parse(&f->a, text, NULL, &LOC, &t, &f->d);
    if (s == FVM_OK)
        fail_msg("\"%s\" was accepted", text);
    assert_int_equal(f->d.n, 1);
    const fvm_error *e = &f->d.errs[0];
    if (e->code != code || e->loc.col != col)
        fail_msg("\"%s\": got code %d at column %d (%s), expected code %d at column %d", text, (int)e->code, e->loc.col,
                 e->msg, (int)code, col);
    assert_int_equal(s, code);
    assert_int_equal(e->loc.line, LOC.line);
    assert_string_equal(e->loc.file, LOC.file);
    assert_string_equal(e->loc.ptr, LOC.ptr);
    return e->msg;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

static const char *show(const fvm_type *t)
{
    static char buf[4096];
    return fvm_type_format(t, false, buf, sizeof buf);
}

static void assert_tensor(const fvm_type *t, fvm_dtype dt, int rank, ...)
{
    assert_int_equal(t->kind, FVM_T_TENSOR);
    assert_int_equal(t->u.tensor.dtype, dt);
    assert_int_equal(t->u.tensor.dims.rank, rank);
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        assert_int_equal(t->u.tensor.dims.d[i], va_arg(ap, int));
    va_end(ap);
}

/* ---- parsing ------------------------------------------------------------------ */

static void test_every_dtype(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *name;
        fvm_dtype dt;
    } dts[] = {{"bool", FVM_DTYPE_BOOL}, {"i32", FVM_DTYPE_I32}, {"i64", FVM_DTYPE_I64},
               {"u32", FVM_DTYPE_U32},   {"f32", FVM_DTYPE_F32}, {"f64", FVM_DTYPE_F64}};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        char text[64];
        snprintf(text, sizeof text, "%s", dts[i].name);
        assert_tensor(ok(f, text), dts[i].dt, 0);
        snprintf(text, sizeof text, "%s[]", dts[i].name);
        assert_tensor(ok(f, text), dts[i].dt, 0);
        snprintf(text, sizeof text, "%s[2,3]", dts[i].name);
        const fvm_type *t = ok(f, text);
        assert_tensor(t, dts[i].dt, 2, 2, 3);
        assert_string_equal(show(t), text);
    }
    /* Not dtypes: names the parser must not take for one. */
    bad(f, "f16[2]", FVM_ERR_NAME, COL(0));
    bad(f, "float32", FVM_ERR_NAME, COL(0));
    bad(f, "f32x", FVM_ERR_NAME, COL(0));
    bad(f, "F32", FVM_ERR_NAME, COL(0));
}

static void test_scalar_forms_are_one_type(void **state)
{
    fixture *f = *state;
    const fvm_type *a = ok(f, "f32"), *b = ok(f, "f32[]"), *c = ok(f, "f32[1]");
    assert_true(fvm_type_equal(a, b));
    assert_true(fvm_type_equal(b, a));
    assert_false(fvm_type_equal(a, c)); /* rank 1, not a scalar */
    assert_string_equal(show(a), "f32[]");
    assert_string_equal(show(b), "f32[]");
    assert_true(fvm_type_equal(ok(f, "<a=f32>"), ok(f, "<a=f32[]>")));
}

static void test_unknown_dims(void **state)
{
    fixture *f = *state;
    assert_tensor(ok(f, "f32[?,784]"), FVM_DTYPE_F32, 2, -1, 784);
    assert_tensor(ok(f, "i64[?,?,3]"), FVM_DTYPE_I64, 3, -1, -1, 3);
    assert_tensor(ok(f, "u32[0]"), FVM_DTYPE_U32, 1, 0);
    assert_string_equal(show(ok(f, "f32[?,784]")), "f32[?,784]");
    /* Eight dims is the most a tensor may have. */
    assert_tensor(ok(f, "bool[1,2,3,4,5,6,7,8]"), FVM_DTYPE_BOOL, 8, 1, 2, 3, 4, 5, 6, 7, 8);
}

static void test_structs(void **state)
{
    fixture *f = *state;
    const fvm_type *t = ok(f, "<w=f32[3],b=f32[]>");
    assert_int_equal(t->kind, FVM_T_STRUCT);
    assert_int_equal(t->u.strct.n, 2);
    assert_string_equal(t->u.strct.names[0], "w");
    assert_string_equal(t->u.strct.names[1], "b");
    assert_tensor(t->u.strct.elems[0], FVM_DTYPE_F32, 1, 3);
    assert_tensor(t->u.strct.elems[1], FVM_DTYPE_F32, 0);
    assert_int_equal(fvm_type_field_index(t, "b"), 1);
    assert_int_equal(fvm_type_field_index(t, "x"), -1);

    t = ok(f, "<f32[],i32[2]>");
    assert_int_equal(t->u.strct.n, 2);
    assert_null(t->u.strct.names[0]);
    assert_null(t->u.strct.names[1]);
    assert_tensor(t->u.strct.elems[1], FVM_DTYPE_I32, 1, 2);

    /* Mixed: named and positional fields side by side. */
    t = ok(f, "<a=f32[],i32[],c=bool[]>");
    assert_string_equal(t->u.strct.names[0], "a");
    assert_null(t->u.strct.names[1]);
    assert_string_equal(t->u.strct.names[2], "c");
    assert_int_equal(fvm_type_field_index(t, "c"), 2);

    /* Nested, three levels. */
    t = ok(f, "<model=<w=f32[784,10],b=f32[10]>,<i64[],<u32[2]>>>");
    assert_int_equal(t->u.strct.n, 2);
    const fvm_type *m = t->u.strct.elems[0];
    assert_int_equal(m->kind, FVM_T_STRUCT);
    assert_tensor(m->u.strct.elems[0], FVM_DTYPE_F32, 2, 784, 10);
    const fvm_type *inner = t->u.strct.elems[1]->u.strct.elems[1];
    assert_int_equal(inner->kind, FVM_T_STRUCT);
    assert_tensor(inner->u.strct.elems[0], FVM_DTYPE_U32, 1, 2);

    t = ok(f, "<>");
    assert_int_equal(t->kind, FVM_T_STRUCT);
    assert_int_equal(t->u.strct.n, 0);

    /* Structs may hold placed values (TFF's <a=T@SERVER,b={U}@CLIENTS>). */
    t = ok(f, "<s=f32[]@SERVER,c={f32[]}@CLIENTS>");
    assert_true(fvm_type_is_placed(t));
    assert_false(fvm_type_is_tensor_tree(t));

    /* A struct with more fields than the parser's first buffer (64). */
    char big[2048] = "<";
    for (int i = 0; i < 100; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "%sf%d=i32[%d]", i ? "," : "", i, i);
    strcat(big, ">");
    t = ok(f, big);
    assert_int_equal(t->u.strct.n, 100);
    assert_string_equal(t->u.strct.names[99], "f99");
    assert_tensor(t->u.strct.elems[70], FVM_DTYPE_I32, 1, 70);
    assert_string_equal(show(t), big);
}

static void test_sequences(void **state)
{
    fixture *f = *state;
    const fvm_type *t = ok(f, "f32[]*");
    assert_int_equal(t->kind, FVM_T_SEQ);
    assert_tensor(t->u.seq.elem, FVM_DTYPE_F32, 0);

    t = ok(f, "<x=f32[3],y=f32[]>*");
    assert_int_equal(t->kind, FVM_T_SEQ);
    assert_int_equal(t->u.seq.elem->kind, FVM_T_STRUCT);
    assert_string_equal(t->u.seq.elem->u.strct.names[0], "x");

    t = ok(f, "i32[2]**"); /* a sequence of sequences */
    assert_int_equal(t->kind, FVM_T_SEQ);
    assert_int_equal(t->u.seq.elem->kind, FVM_T_SEQ);
    assert_tensor(t->u.seq.elem->u.seq.elem, FVM_DTYPE_I32, 1, 2);

    t = ok(f, "<a=f32[]*,b=i32[]>");
    assert_int_equal(t->u.strct.elems[0]->kind, FVM_T_SEQ);
    assert_false(fvm_type_is_tensor_tree(t));
}

static void test_federated_forms(void **state)
{
    fixture *f = *state;
    const fvm_type *t = ok(f, "{f32[3]}@CLIENTS");
    assert_int_equal(t->kind, FVM_T_FED);
    assert_int_equal(t->u.fed.pl, FVM_PL_CLIENTS);
    assert_false(t->u.fed.all_equal);
    assert_tensor(t->u.fed.member, FVM_DTYPE_F32, 1, 3);

    t = ok(f, "f32[3]@CLIENTS");
    assert_int_equal(t->kind, FVM_T_FED);
    assert_int_equal(t->u.fed.pl, FVM_PL_CLIENTS);
    assert_true(t->u.fed.all_equal);

    t = ok(f, "f32[3]@SERVER");
    assert_int_equal(t->kind, FVM_T_FED);
    assert_int_equal(t->u.fed.pl, FVM_PL_SERVER);
    assert_true(t->u.fed.all_equal);

    t = ok(f, "{<x=f32[3],y=f32[]>*}@CLIENTS");
    assert_false(t->u.fed.all_equal);
    assert_int_equal(t->u.fed.member->kind, FVM_T_SEQ);
    assert_int_equal(t->u.fed.member->u.seq.elem->kind, FVM_T_STRUCT);

    t = ok(f, "<w=f32[2],b=f32[]>@SERVER");
    assert_int_equal(t->u.fed.member->kind, FVM_T_STRUCT);
    assert_true(fvm_type_is_placed(t));
    assert_false(fvm_type_is_placed(t->u.fed.member));
}

static void test_function_types(void **state)
{
    fixture *f = *state;
    const fvm_type *t = ok(f, "(f32[3] -> i32[])");
    assert_int_equal(t->kind, FVM_T_FN);
    assert_tensor(t->u.fn.param, FVM_DTYPE_F32, 1, 3);
    assert_tensor(t->u.fn.result, FVM_DTYPE_I32, 0);

    t = ok(f, "( -> f32[]@SERVER)");
    assert_int_equal(t->kind, FVM_T_FN);
    assert_null(t->u.fn.param);
    assert_int_equal(t->u.fn.result->kind, FVM_T_FED);

    t = ok(f, "(->f32[])");
    assert_null(t->u.fn.param);

    t = ok(f, "(<a=f32[],b={i32[]}@CLIENTS> -> (f32[] -> f32[]))");
    assert_int_equal(t->u.fn.param->kind, FVM_T_STRUCT);
    assert_int_equal(t->u.fn.result->kind, FVM_T_FN);
    assert_true(fvm_type_is_placed(t));
}

static void test_whitespace(void **state)
{
    fixture *f = *state;
    const fvm_type *ref = ok(f, "<a=f32[2,3],b={i32[]}@CLIENTS,c=f64[]*>");
    const char *spaced[] = {
        " <a=f32[2,3],b={i32[]}@CLIENTS,c=f64[]*> ",
        "< a = f32 [ 2 , 3 ] , b = { i32 [ ] } @CLIENTS , c = f64 [ ] * >",
        "<a=f32[2,3],\n b={i32[]}@CLIENTS,\n c=f64[]*>",
        "<\ta=\tf32[2,\t3],\tb={i32[]}\t@CLIENTS,\tc=f64[]\t*>",
    };
    for (size_t i = 0; i < sizeof spaced / sizeof *spaced; i++) {
        const fvm_type *t = ok(f, spaced[i]);
        if (!fvm_type_equal(t, ref))
            fail_msg("\"%s\" parsed as %s", spaced[i], show(t));
    }
    assert_true(fvm_type_equal(ok(f, "( f32[] -> i32[] )"), ok(f, "(f32[]->i32[])")));
    assert_true(fvm_type_equal(ok(f, "(  ->  f32[] )"), ok(f, "(->f32[])")));
}

static void test_whitespace_before_equals(void **state)
{
    fixture *f = *state;
    /* Tabs and newlines are whitespace everywhere in a type, so also between
     * a field name and its '='. */
    const fvm_type *ref = ok(f, "<a=f32[2],b=i32[]>");
    const char *spaced[] = {
        "<a =f32[2],b =i32[]>",
        "<a\t=f32[2],b\t=i32[]>",
        "<a\n=f32[2],b\n=i32[]>",
        "<a \t\n =f32[2],b=i32[]>",
    };
    for (size_t i = 0; i < sizeof spaced / sizeof *spaced; i++) {
        const fvm_type *t = ok(f, spaced[i]);
        if (!fvm_type_equal(t, ref))
            fail_msg("\"%s\" parsed as %s", spaced[i], show(t));
    }
}

/* ---- printing --------------------------------------------------------------------- */

/* Canonical strings, written by hand: printing their parse gives them back. */
static const char *const canonical[] = {
    "bool[]",
    "i32[]",
    "i64[7]",
    "u32[2]",
    "f32[784,10]",
    "f64[?,3]",
    "f32[?,?,?,?,?,?,?,?]",
    "f32[0,5]",
    "<>",
    "<w=f32[784,10],b=f32[10]>",
    "<f32[],i32[]>",
    "<a=f32[],i32[],c=bool[]>",
    "<model=<w=f32[3],b=f32[]>,<i64[],<u32[2]>>>",
    "f32[]*",
    "<x=f32[3],y=f32[]>*",
    "i32[]**",
    "{f32[]}@CLIENTS",
    "f32[]@CLIENTS",
    "f32[]@SERVER",
    "{<x=f32[3],y=f32[]>*}@CLIENTS",
    "<w=f32[3],n=i64[]>@SERVER",
    "<s=f32[]@SERVER,c={f32[]}@CLIENTS>",
    "(f32[] -> i32[])",
    "(<a=f32[],b=f32[]> -> <f32[],f32[]>)",
    "(f32[]@SERVER -> (f32[] -> f32[]))",
    "( -> f32[]@SERVER)",
};

static void test_print_canonical(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < sizeof canonical / sizeof *canonical; i++) {
        const fvm_type *t = ok(f, canonical[i]);
        char buf[512];
        const char *got = fvm_type_format(t, false, buf, sizeof buf);
        if (strcmp(got, canonical[i]))
            fail_msg("printed \"%s\" as \"%s\"", canonical[i], got);
        const char *s = fvm_type_str(&f->a, t, false);
        assert_non_null(s);
        assert_string_equal(s, canonical[i]);
    }
}

static void test_print_normalises(void **state)
{
    fixture *f = *state;
    static const char *const pairs[][2] = {
        {"f32", "f32[]"},
        {" < a = f32 , b = i32 [ 2 ] > ", "<a=f32[],b=i32[2]>"},
        {"{ f32 [ ? ] } @CLIENTS", "{f32[?]}@CLIENTS"},
        {"(f32->i32)", "(f32[] -> i32[])"},
        {"f32[007]", "f32[7]"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
        assert_string_equal(show(ok(f, pairs[i][0])), pairs[i][1]);
}

static void test_round_trip(void **state)
{
    fixture *f = *state;
    const char *texts[] = {
        "f32",
        "<a = f32[2], <i32, b = bool[?]>>*",
        "{ <x=f32[3],y=f32>* }@CLIENTS",
        "(-> <f32@SERVER, {i64}@CLIENTS>)",
        "(<f32[2]*> -> (f32 -> f32))",
        "<>@SERVER",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        const fvm_type *t = ok(f, texts[i]);
        char *printed = fvm_type_str(&f->a, t, false);
        assert_non_null(printed);
        const fvm_type *back = ok(f, printed);
        if (!fvm_type_equal(t, back))
            fail_msg("\"%s\" printed as \"%s\" reads back differently", texts[i], printed);
        assert_string_equal(fvm_type_str(&f->a, back, false), printed);
    }
}

static void test_print_truncates(void **state)
{
    fixture *f = *state;
    const fvm_type *t = ok(f, "<a=f32[3],b=i32[]>"); /* 18 characters */
    char buf[10];
    memset(buf, 'x', sizeof buf);
    /* 9 characters fit: "<a=f32[3]", of which the last three become "...". */
    assert_string_equal(fvm_type_format(t, false, buf, sizeof buf), "<a=f32...");
    char exact[19];
    assert_string_equal(fvm_type_format(t, false, exact, sizeof exact), "<a=f32[3],b=i32[]>");
    char one[1] = {'x'};
    assert_string_equal(fvm_type_format(t, false, one, sizeof one), "");
}

/* An alias environment: "Model" is <w=f32[3],b=f32[]> declared as an alias. */
static const fvm_type *lookup_model(void *ctx, const char *name, const fvm_loc *loc, int depth, int *levels,
                                    fvm_diag *d)
{
    const fvm_type *model = ctx;
    (void)depth;
    *levels = 2; /* a struct of tensors */
    if (!strcmp(name, "Model"))
        return model;
    fvm_diag_add(d, FVM_ERR_NAME, loc, "unknown type '%s'", name);
    return NULL;
}

static void test_aliases(void **state)
{
    fixture *f = *state;
    fvm_type *model = fvm_arena_alloc(&f->a, sizeof *model);
    *model = *ok(f, "<w=f32[3],b=f32[]>");
    model->alias = "Model";
    fvm_type_env env = {lookup_model, model};
    const fvm_type *t = NULL;
    assert_int_equal(fvm_type_parse(&f->a, "{Model}@CLIENTS", &env, &LOC, &t, &f->d), FVM_OK);
    char buf[128];
    assert_string_equal(fvm_type_format(t, true, buf, sizeof buf), "{Model}@CLIENTS");
    assert_string_equal(fvm_type_format(t, false, buf, sizeof buf), "{<w=f32[3],b=f32[]>}@CLIENTS");
    /* Equality ignores aliases. */
    assert_true(fvm_type_equal(t, ok(f, "{<w=f32[3],b=f32[]>}@CLIENTS")));

    /* An unknown name reaches the environment with the column of the name:
     * "<a=Modle>" has the name at offset 3. */
    assert_int_not_equal(fvm_type_parse(&f->a, "<a=Modle>", &env, &LOC, &t, &f->d), FVM_OK);
    assert_int_equal(f->d.n, 1);
    assert_int_equal(f->d.errs[0].code, FVM_ERR_NAME);
    assert_int_equal(f->d.errs[0].loc.col, COL(3));
    assert_int_equal(f->d.errs[0].loc.line, 7);
}

/* ---- equality and compatibility ------------------------------------------------------ */

static void test_equal_and_compatible(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *a, *b;
        bool equal, a_to_b, b_to_a; /* equal; a passes for b; b passes for a */
    } cases[] = {
        {"f32[3]", "f32[3]", true, true, true},
        {"f32[3]", "f64[3]", false, false, false},
        {"f32[3]", "f32[3,1]", false, false, false},
        {"f32[3]", "f32[4]", false, false, false},
        /* '?' matches any dim for compatibility, only '?' for equality */
        {"f32[?,3]", "f32[5,3]", false, true, true},
        {"f32[?,3]", "f32[?,3]", true, true, true},
        {"f32[?,3]", "f32[5,4]", false, false, false},
        {"<f32[?]>*", "<f32[2]>*", false, true, true},
        /* an all-equal CLIENTS value may go where one value per client is expected, not back */
        {"f32[]@CLIENTS", "{f32[]}@CLIENTS", false, true, false},
        {"f32[]@SERVER", "f32[]@CLIENTS", false, false, false},
        {"f32[]@SERVER", "{f32[]}@CLIENTS", false, false, false},
        {"<a=f32[]@CLIENTS>", "<a={f32[]}@CLIENTS>", false, true, false},
        {"f32[]@SERVER", "f32[]", false, false, false},
        /* names must agree where both sides have one */
        {"<a=f32[],b=i32[]>", "<f32[],i32[]>", false, true, true},
        {"<a=f32[],b=i32[]>", "<a=f32[],i32[]>", false, true, true},
        {"<a=f32[],b=i32[]>", "<b=f32[],a=i32[]>", false, false, false},
        {"<a=f32[]>", "<a=f32[],b=f32[]>", false, false, false},
        {"<a=f32[],b=i32[]>", "<a=f32[],b=i32[]>", true, true, true},
        {"f32[]*", "f32[]", false, false, false},
        {"(f32[?] -> f32[])", "(f32[3] -> f32[])", false, true, true},
        {"( -> f32[])", "(f32[] -> f32[])", false, false, false},
        {"<>", "<>", true, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const fvm_type *a = ok(f, cases[i].a), *b = ok(f, cases[i].b);
        if (fvm_type_equal(a, b) != cases[i].equal || fvm_type_equal(b, a) != cases[i].equal)
            fail_msg("equal(%s, %s) should be %d", cases[i].a, cases[i].b, cases[i].equal);
        if (fvm_type_compatible(a, b) != cases[i].a_to_b)
            fail_msg("compatible(%s, %s) should be %d", cases[i].a, cases[i].b, cases[i].a_to_b);
        if (fvm_type_compatible(b, a) != cases[i].b_to_a)
            fail_msg("compatible(%s, %s) should be %d", cases[i].b, cases[i].a, cases[i].b_to_a);
        /* every type is equal to and compatible with itself */
        assert_true(fvm_type_equal(a, a) && fvm_type_compatible(a, a));
    }
}

static void test_helpers(void **state)
{
    fixture *f = *state;
    assert_true(fvm_type_is_tensor_tree(ok(f, "<a=f32[2],<i32[],b=bool[]>>")));
    assert_false(fvm_type_is_tensor_tree(ok(f, "<a=f32[2]*>")));
    assert_false(fvm_type_is_tensor_tree(ok(f, "f32[]@SERVER")));
    assert_true(fvm_type_all_leaves(ok(f, "<a=f32[2],<f64[]>>"), fvm_dtype_is_float));
    assert_false(fvm_type_all_leaves(ok(f, "<a=f32[2],<i32[]>>"), fvm_dtype_is_float));
    assert_false(fvm_type_is_placed(ok(f, "<a=f32[2]*,(f32 -> f32)>")));
    assert_true(fvm_type_is_placed(ok(f, "<a=<b=f32[]@SERVER>>")));
    assert_true(fvm_type_is_placed(ok(f, "(-> f32@SERVER)")));

    /* Constructors agree with the parser. */
    fvm_dims d23 = {.rank = 2, .d = {2, 3}};
    const fvm_type *x = fvm_type_tensor(&f->a, FVM_DTYPE_F32, &d23);
    const fvm_type *y = fvm_type_scalar(&f->a, FVM_DTYPE_I32);
    const char *names[] = {"x", "y"};
    const fvm_type *elems[] = {x, y};
    const fvm_type *s = fvm_type_struct(&f->a, 2, names, elems);
    const fvm_type *fed = fvm_type_fed(&f->a, fvm_type_seq(&f->a, s), FVM_PL_CLIENTS, false);
    assert_true(fvm_type_equal(fed, ok(f, "{<x=f32[2,3],y=i32[]>*}@CLIENTS")));
    /* at SERVER a value is always all-equal, whatever the caller says */
    const fvm_type *srv = fvm_type_fed(&f->a, y, FVM_PL_SERVER, false);
    assert_true(srv->u.fed.all_equal);
    assert_true(fvm_type_equal(srv, ok(f, "i32[]@SERVER")));
    assert_true(fvm_type_equal(fvm_type_fn(&f->a, NULL, srv), ok(f, "( -> i32[]@SERVER)")));
}

/* ---- well-formedness errors and their columns -------------------------------------------- */

static void test_placement_errors(void **state)
{
    fixture *f = *state;
    const char *m;
    /* A placed type inside a sequence: reported at the start of the element type. */
    m = bad(f, "{f32[]}@CLIENTS*", FVM_ERR_TYPE, COL(0));
    assert_contains(m, "sequence");
    m = bad(f, "<a=f32[],b=<{f32[]}@CLIENTS>*>", FVM_ERR_TYPE, COL(11));
    assert_contains(m, "sequence");
    /* {T}@SERVER: reported at "SERVER" (offset 8). */
    m = bad(f, "{f32[]}@SERVER", FVM_ERR_TYPE, COL(8));
    assert_contains(m, "T@SERVER");
    m = bad(f, "<a={i32[2]}@SERVER>", FVM_ERR_TYPE, COL(12));
    /* Double placement: at the second '@' (offset 15). */
    m = bad(f, "{f32[]}@CLIENTS@SERVER", FVM_ERR_TYPE, COL(15));
    assert_contains(m, "placed again");
    /* A placement inside a placement: at the member (offset 1) or the placed
     * struct (offset 0). */
    m = bad(f, "{{f32[]}@CLIENTS}@CLIENTS", FVM_ERR_TYPE, COL(1));
    assert_contains(m, "inside a federated type");
    bad(f, "{f32[]@SERVER}@CLIENTS", FVM_ERR_TYPE, COL(1));
    bad(f, "<a=f32[]@SERVER>@CLIENTS", FVM_ERR_TYPE, COL(0));
    bad(f, "<w=f32[],<s=i32[]@SERVER>*>", FVM_ERR_TYPE, COL(9));
    /* Function types are not values: not in a sequence nor placed. */
    m = bad(f, "(f32[] -> f32[])*", FVM_ERR_TYPE, COL(0));
    assert_contains(m, "function type");
    bad(f, "(f32[] -> f32[])@SERVER", FVM_ERR_TYPE, COL(0));
    bad(f, "{( -> f32[])}@CLIENTS", FVM_ERR_TYPE, COL(1));
}

static void test_double_placement_postfix(void **state)
{
    fixture *f = *state;
    /* T@SERVER@CLIENTS is a second placement too: rejected at the second '@'
     * (offset 12). */
    fvm_diag_clear(&f->d);
    const fvm_type *t = NULL;
    assert_int_not_equal(fvm_type_parse(&f->a, "f32[]@SERVER@CLIENTS", NULL, &LOC, &t, &f->d), FVM_OK);
    assert_int_equal(f->d.n, 1);
    assert_int_equal(f->d.errs[0].loc.col, COL(12));
    /* T@CLIENTS* is a placed value in a sequence position: rejected at '*'. */
    fvm_diag_clear(&f->d);
    assert_int_not_equal(fvm_type_parse(&f->a, "f32[]@CLIENTS*", NULL, &LOC, &t, &f->d), FVM_OK);
    assert_int_equal(f->d.n, 1);
    assert_int_equal(f->d.errs[0].loc.col, COL(13));
}

/* n '<' around a tensor: n + 1 nested type levels. */
static char *nested_structs(int n)
{
    char *s = malloc((size_t)n * 2 + 8);
    assert_non_null(s);
    memset(s, '<', (size_t)n);
    memcpy(s + n, "f32[]", 5);
    memset(s + n + 5, '>', (size_t)n);
    s[2 * n + 5] = 0;
    return s;
}

static void test_depth_limit(void **state)
{
    fixture *f = *state;
    /* 63 structs around a tensor: 64 levels, the most allowed. */
    char *s = nested_structs(FVM_MAX_TYPE_DEPTH - 1);
    const fvm_type *t = ok(f, s);
    int levels = 1;
    while (t->kind == FVM_T_STRUCT) {
        t = t->u.strct.elems[0];
        levels++;
    }
    assert_int_equal(levels, FVM_MAX_TYPE_DEPTH);
    free(s);
    /* 64 structs: the 65th level starts right after the 64th '<', offset 64. */
    s = nested_structs(FVM_MAX_TYPE_DEPTH);
    const char *m = bad(f, s, FVM_ERR_LIMIT, COL(FVM_MAX_TYPE_DEPTH));
    assert_contains(m, "64");
    free(s);
    /* Function types nest as well: "(" x 64 opens the 65th level at offset
     * 64 too. */
    char fed[512] = "";
    for (int i = 0; i < FVM_MAX_TYPE_DEPTH; i++)
        strcat(fed, "(");
    strcat(fed, "f32");
    bad(f, fed, FVM_ERR_LIMIT, COL(FVM_MAX_TYPE_DEPTH));
}

static void test_sequence_depth_limit(void **state)
{
    fixture *f = *state;
    /* T* nests T one level deeper, like <T>: a tensor with 64 stars is 65
     * levels deep and passes the limit (each '*' would otherwise cost a
     * rescan of the element, quadratic in the string's length). */
    char s[128] = "f32[]";
    for (int i = 0; i < FVM_MAX_TYPE_DEPTH - 1; i++)
        strcat(s, "*");
    const fvm_type *t = ok(f, s); /* 64 levels */
    assert_int_equal(t->kind, FVM_T_SEQ);
    strcat(s, "*");
    fvm_diag_clear(&f->d);
    assert_int_equal(fvm_type_parse(&f->a, s, NULL, &LOC, &t, &f->d), FVM_ERR_LIMIT);
    assert_int_equal(f->d.n, 1);
    assert_int_equal(f->d.errs[0].code, FVM_ERR_LIMIT);
}

static void test_rank_limit(void **state)
{
    fixture *f = *state;
    /* "f32[" is 4 bytes and each "1," 2: the ninth dim is at offset 4 + 8 * 2. */
    const char *m = bad(f, "f32[1,1,1,1,1,1,1,1,1]", FVM_ERR_LIMIT, COL(20));
    assert_contains(m, "8");
    bad(f, "<a=i32[],b=f32[?,?,?,?,?,?,?,?,?]>", FVM_ERR_LIMIT, COL(15 + 16));
}

static void test_size_limit(void **state)
{
    fixture *f = *state;
    /* 2^30 f32 are exactly 4 GiB: allowed; one more element is not. */
    ok(f, "f32[1073741824]");
    ok(f, "bool[4294967296]");
    ok(f, "f64[65536,8192]"); /* 2^16 * 2^13 * 8 = 2^32 */
    ok(f, "f64[?,536870912]"); /* unknown dims count as 1 */
    ok(f, "f32[0,1073741824]"); /* no elements; the other dims within the limit */
    bad(f, "f32[0,99999999999]", FVM_ERR_LIMIT, COL(0)); /* no elements, but 10^11 empty rows to walk */
    const char *m = bad(f, "f32[1073741825]", FVM_ERR_LIMIT, COL(0));
    assert_contains(m, "4294967296");
    bad(f, "bool[4294967297]", FVM_ERR_LIMIT, COL(0));
    bad(f, "u32[65536,65536]", FVM_ERR_LIMIT, COL(0));
    bad(f, "f64[?,536870913]", FVM_ERR_LIMIT, COL(0));
    /* dims whose product overflows 64 bits */
    bad(f, "i64[4294967296,4294967296,4294967296]", FVM_ERR_LIMIT, COL(0));
    /* inside a struct: at the tensor's dtype, offset 11 */
    bad(f, "<a=f32[],b=f64[536870913]>", FVM_ERR_LIMIT, COL(11));
    bad(f, "{f32[2000000000]}@CLIENTS", FVM_ERR_LIMIT, COL(1));
}

static void test_syntax_errors(void **state)
{
    fixture *f = *state;
    bad(f, "", FVM_ERR_SYNTAX, COL(0));
    bad(f, "f32[3.5]", FVM_ERR_SYNTAX, COL(4));
    bad(f, "f32[-1]", FVM_ERR_SYNTAX, COL(4));
    bad(f, "f32[2,]", FVM_ERR_SYNTAX, COL(6));
    bad(f, "f32[2 3]", FVM_ERR_SYNTAX, COL(6));
    bad(f, "f32[2", FVM_ERR_SYNTAX, COL(5));
    bad(f, "<a=f32[],b=i32[]", FVM_ERR_SYNTAX, COL(16));
    bad(f, "{f32[]@CLIENTS", FVM_ERR_TYPE, COL(1));
    bad(f, "{f32[]}", FVM_ERR_SYNTAX, COL(7));
    bad(f, "{f32[]}@clients", FVM_ERR_SYNTAX, COL(8));
    bad(f, "f32[]@EVERYWHERE", FVM_ERR_SYNTAX, COL(6));
    bad(f, "f32[] i32[]", FVM_ERR_SYNTAX, COL(6));
    bad(f, "(f32[] i32[])", FVM_ERR_SYNTAX, COL(7));
    bad(f, "(f32[] -> i32[]", FVM_ERR_SYNTAX, COL(15));
    bad(f, "CLIENTS", FVM_ERR_SYNTAX, COL(0));
    bad(f, "<a=f32[],a=i32[]>", FVM_ERR_NAME, COL(9));
    bad(f, "<a=float>", FVM_ERR_NAME, COL(3));
}

static void test_error_without_line(void **state)
{
    fixture *f = *state;
    /* An unknown location (line 0) keeps its column untouched; NULL loc is allowed. */
    fvm_loc none = {0};
    const fvm_type *t;
    assert_int_equal(fvm_type_parse(&f->a, "f32[x]", NULL, &none, &t, &f->d), FVM_ERR_SYNTAX);
    assert_int_equal(f->d.errs[0].loc.line, 0);
    assert_int_equal(f->d.errs[0].loc.col, 0);
    assert_int_equal(fvm_type_parse(&f->a, "f32[x]", NULL, NULL, &t, &f->d), FVM_ERR_SYNTAX);
    assert_int_equal(f->d.n, 2);
    assert_int_equal(fvm_type_parse(&f->a, "f32[x]", NULL, NULL, &t, NULL), FVM_ERR_SYNTAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_dtype, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scalar_forms_are_one_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_dims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_structs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sequences, setup, teardown),
        cmocka_unit_test_setup_teardown(test_federated_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_function_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whitespace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whitespace_before_equals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_canonical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_normalises, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_truncates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aliases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_equal_and_compatible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_helpers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_placement_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_double_placement_postfix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sequence_depth_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rank_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_without_line, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
