/* test_roundtrip.c - load -> canonical write -> load gives the identical program, for every program in programs/. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../format/doc_io.h"

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Structural identity of two modules: everything a program means. */
static void assert_same_module(const fvm_module *a, const fvm_module *b)
{
    assert_true(same_str(a->doc, b->doc));
    assert_int_equal(a->nincludes, b->nincludes);
    for (int i = 0; i < a->nincludes; i++)
        assert_string_equal(a->includes[i], b->includes[i]);
    assert_int_equal(a->naliases, b->naliases);
    for (int i = 0; i < a->naliases; i++) {
        assert_string_equal(a->aliases[i].name, b->aliases[i].name);
        assert_true(fvm_type_equal(a->aliases[i].type, b->aliases[i].type));
    }
    assert_int_equal(a->nfuncs, b->nfuncs);
    for (int i = 0; i < a->nfuncs; i++) {
        const fvm_func *f = a->funcs[i], *g = b->funcs[i];
        assert_string_equal(f->name, g->name);
        assert_true(same_str(f->doc, g->doc));
        assert_int_equal(f->nparams, g->nparams);
        for (int k = 0; k < f->nparams; k++) {
            assert_string_equal(f->param_names[k], g->param_names[k]);
            assert_true(fvm_type_equal(f->param_types[k], g->param_types[k]));
        }
        assert_int_equal(f->ninstrs, g->ninstrs);
        for (int k = 0; k < f->ninstrs; k++) {
            const fvm_instr *x = &f->instrs[k], *y = &g->instrs[k];
            assert_string_equal(x->name, y->name);
            assert_int_equal(x->op, y->op);
            assert_int_equal(x->nargs, y->nargs);
            for (int j = 0; j < x->nargs; j++)
                assert_string_equal(x->arg_names[j], y->arg_names[j]);
            /* Attributes: same set with equal values (order may be canonicalised). */
            size_t nx = x->attrs ? x->attrs->u.coll.n : 0, ny = y->attrs ? y->attrs->u.coll.n : 0;
            assert_int_equal(nx, ny);
            for (size_t j = 0; j < nx; j++) {
                const fvm_doc *v = fvm_doc_get(y->attrs, x->attrs->u.coll.keys[j]->u.str.s);
                assert_non_null(v);
                assert_true(fvm_doc_equal(x->attrs->u.coll.items[j], v));
            }
        }
        assert_string_equal(f->result_name, g->result_name);
    }
}

static fvm_program *load_checked_text(const char *name, const char *text, size_t len)
{
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_status s = fvm_program_load_text(name, text, len, &p, &d);
    if (s == FVM_OK)
        s = fvm_compile(p, &d);
    for (int i = 0; i < d.n; i++)
        print_error("%s: %s\n", name, d.errs[i].msg);
    fvm_diag_clear(&d);
    assert_int_equal(s, FVM_OK);
    return p;
}

/* Writes p's root in one format, reads it back under a name of that format
 * in the same directory (so includes resolve), and compares. */
static void roundtrip(const char *path, fvm_program *p, bool yaml)
{
    fvm_diag d = {0};
    char *text1 = NULL, *text2 = NULL;
    size_t len1, len2;
    assert_int_equal(fvm_module_write(p->root, yaml, &text1, &len1, &d), FVM_OK);
    char name[600];
    snprintf(name, sizeof name, "%s.roundtrip.%s", path, yaml ? "yaml" : "json");
    fvm_program *q = load_checked_text(name, text1, len1);
    assert_same_module(p->root, q->root);
    /* The canonical form is a fixed point. */
    assert_int_equal(fvm_module_write(q->root, yaml, &text2, &len2, &d), FVM_OK);
    assert_int_equal(len1, len2);
    assert_memory_equal(text1, text2, len1);
    fvm_program_free(q);
    free(text1);
    free(text2);
    fvm_diag_clear(&d);
}

static int visit(const char *dir)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = strlen(e->d_name);
        if (e->d_type == DT_DIR && e->d_name[0] != '.' && strcmp(e->d_name, "data")) {
            n += visit(path);
            continue;
        }
        bool json = len > 5 && !strcmp(e->d_name + len - 5, ".json");
        bool yaml = len > 5 && !strcmp(e->d_name + len - 5, ".yaml");
        if (!json && !yaml)
            continue;
        char *text;
        size_t tl;
        fvm_diag d = {0};
        assert_int_equal(fvm_read_file(path, &text, &tl, &d), FVM_OK);
        fvm_program *p = load_checked_text(path, text, tl);
        roundtrip(path, p, false);
        roundtrip(path, p, true);
        fvm_program_free(p);
        free(text);
        print_message("roundtrip %s: ok\n", path);
        n++;
    }
    closedir(dp);
    return n;
}

static void test_every_program_roundtrips(void **state)
{
    (void)state;
    assert_true(visit("programs") >= 7);
}

/* The writer is canonical: a program written with other spacing, attribute
 * order and non-canonical type spelling comes out in one fixed form. */
static void test_canonical_form(void **state)
{
    (void)state;
    const char *src = "{\"functions\": {\"main\": {\"result\": \"y\", \"body\": [[\"y\", \"sum\", "
                      "{\"keepdims\": true, \"axes\": [0]}, \"x\"]], \"params\": {\"x\": \"f32 [ 2 , ? ]\"}}},"
                      " \"fedvm\": 1}";
    fvm_program *p = load_checked_text("canon.json", src, strlen(src));
    char *text = NULL;
    size_t len;
    fvm_diag d = {0};
    assert_int_equal(fvm_module_write(p->root, false, &text, &len, &d), FVM_OK);
    const char *want = "{\n"
                       "  \"fedvm\": 1,\n"
                       "  \"functions\": {\n"
                       "    \"main\": {\n"
                       "      \"params\": {\n"
                       "        \"x\": \"f32[2,?]\"\n"
                       "      },\n"
                       "      \"body\": [\n"
                       "        [\"y\", \"sum\", {\"axes\": [0], \"keepdims\": true}, \"x\"]\n"
                       "      ],\n"
                       "      \"result\": \"y\"\n"
                       "    }\n"
                       "  }\n"
                       "}\n";
    assert_string_equal(text, want);
    free(text);
    fvm_program_free(p);
}

/* Literals and destructurings are written as written (the consts and fields
 * the loader made of them are not), and read back as the same program; a
 * function's own name with '#' pushes a literal's const to another name. */
static void test_literals_and_fields_as_written(void **state)
{
    (void)state;
    const char *src =
        "{\"fedvm\": 1, \"functions\": {\"main\": {\"params\": {\"s\": \"<a=f32[],b=<f64[2],u8[]>>\", "
        "\"p\": \"bool[]\"}, \"body\": [[[\"a\", \"b\"],\"fields\",\"s\"], [\"h#2\", \"mul\", \"a\", 1.0], "
        "[\"h\", \"mul\", \"a\", 0.5], [[\"v\", \"k\"], \"fields\", \"b\"], [\"w\", \"sub\", 1, \"v\"], "
        "[\"q\", \"and\", \"p\", true], [[\"x\"], \"fields\", {\"names\": [\"a\"]}, \"s\"], "
        "[\"m\", \"minimum\", \"k\", 2e2], [\"r\", \"struct\", \"h\", \"h#2\", \"w\", \"q\", \"x\", \"m\"]], "
        "\"result\": \"r\"}}}";
    fvm_program *p = load_checked_text("literals.json", src, strlen(src));
    char *text = NULL;
    size_t len;
    fvm_diag d = {0};
    assert_int_equal(fvm_module_write(p->root, false, &text, &len, &d), FVM_OK);
    const char *want = "{\n"
                       "  \"fedvm\": 1,\n"
                       "  \"functions\": {\n"
                       "    \"main\": {\n"
                       "      \"params\": {\n"
                       "        \"s\": \"<a=f32[],b=<f64[2],u8[]>>\",\n"
                       "        \"p\": \"bool[]\"\n"
                       "      },\n"
                       "      \"body\": [\n"
                       "        [[\"a\", \"b\"], \"fields\", \"s\"],\n"
                       "        [\"h#2\", \"mul\", \"a\", 1.0],\n"
                       "        [\"h\", \"mul\", \"a\", 0.5],\n"
                       "        [[\"v\", \"k\"], \"fields\", \"b\"],\n"
                       "        [\"w\", \"sub\", 1, \"v\"],\n"
                       "        [\"q\", \"and\", \"p\", true],\n"
                       "        [[\"x\"], \"fields\", {\"names\": [\"a\"]}, \"s\"],\n"
                       "        [\"m\", \"minimum\", \"k\", 200.0],\n"
                       "        [\"r\", \"struct\", \"h\", \"h#2\", \"w\", \"q\", \"x\", \"m\"]\n"
                       "      ],\n"
                       "      \"result\": \"r\"\n"
                       "    }\n"
                       "  }\n"
                       "}\n";
    assert_string_equal(text, want);
    /* what runs: 16 instructions, the literals consts of their operands' dtypes, the fields fields */
    const fvm_func *f = p->root->funcs[0];
    assert_int_equal(f->ninstrs, 16);
    const char *names[] = {"a",   "b", "h#2#2", "h#2", "h#2#", "h",   "v", "k",
                           "w#1", "w", "q#2",   "q",   "x",    "m#2", "m", "r"};
    for (int i = 0; i < 16; i++)
        assert_string_equal(f->instrs[i].name, names[i]);
    assert_int_equal(f->instrs[14].arg_literals != NULL, 1);
    assert_int_equal(f->instrs[13].konst.dtype, FVM_DTYPE_U8);
    assert_int_equal(f->instrs[4].konst.dtype, FVM_DTYPE_F32);
    assert_int_equal(f->instrs[8].konst.dtype, FVM_DTYPE_F64);
    assert_int_equal(f->instrs[10].konst.dtype, FVM_DTYPE_BOOL);
    assert_int_equal(f->instrs[1].op, FVM_OP_FIELD);
    roundtrip("literals.json", p, false);
    roundtrip("literals.json", p, true);
    free(text);
    fvm_program_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_program_roundtrips),
        cmocka_unit_test(test_canonical_form),
        cmocka_unit_test(test_literals_and_fields_as_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
