/* test_golden.c - runs every golden case in tests/golden and compares with the reference expectation,
 * and the bits of every backend with those of seq ('test_golden --mpi' under mpirun: the mpi backend). */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/fedvm.h"
#include "../vm/kernels/provider.h"
#include "../format/doc_io.h"

/* Numbers within tol relative (absolute below 1), zeros of the same sign; structure exact. */
static bool close_docs(const fvm_doc *a, const fvm_doc *b, double tol, char *why, size_t n)
{
    bool an = a->kind == FVM_DOC_INT || a->kind == FVM_DOC_REAL;
    bool bn = b->kind == FVM_DOC_INT || b->kind == FVM_DOC_REAL;
    if (an && bn) {
        double x = a->kind == FVM_DOC_INT ? (double)a->u.i : a->u.r;
        double y = b->kind == FVM_DOC_INT ? (double)b->u.i : b->u.r;
        double lim = tol * (fabs(y) > 1 ? fabs(y) : 1);
        if (x == 0 && y == 0 && signbit(x) != signbit(y)) {
            snprintf(why, n, "got %s0.0, expected %s0.0", signbit(x) ? "-" : "", signbit(y) ? "-" : "");
            return false;
        }
        if (fabs(x - y) <= lim)
            return true;
        snprintf(why, n, "got %.17g, expected %.17g (tolerance %g)", x, y, lim);
        return false;
    }
    if (a->kind != b->kind) {
        snprintf(why, n, "kinds differ (%d vs %d)", a->kind, b->kind);
        return false;
    }
    if (a->kind == FVM_DOC_ARRAY || a->kind == FVM_DOC_OBJECT) {
        if (a->u.coll.n != b->u.coll.n) {
            snprintf(why, n, "sizes differ (%zu vs %zu)", a->u.coll.n, b->u.coll.n);
            return false;
        }
        for (size_t i = 0; i < a->u.coll.n; i++) {
            if (a->kind == FVM_DOC_OBJECT && strcmp(a->u.coll.keys[i]->u.str.s, b->u.coll.keys[i]->u.str.s)) {
                snprintf(why, n, "field %s vs %s", a->u.coll.keys[i]->u.str.s, b->u.coll.keys[i]->u.str.s);
                return false;
            }
            if (!close_docs(a->u.coll.items[i], b->u.coll.items[i], tol, why, n))
                return false;
        }
        return true;
    }
    if (!fvm_doc_equal(a, b)) {
        snprintf(why, n, "values differ");
        return false;
    }
    return true;
}

/* The same documents, numbers compared bit for bit (0.0 is not -0.0). */
static bool same_bits(const fvm_doc *a, const fvm_doc *b)
{
    if (!a || !b || a->kind != b->kind)
        return a == b;
    if (a->kind == FVM_DOC_REAL)
        return memcmp(&a->u.r, &b->u.r, sizeof a->u.r) == 0;
    if (a->kind != FVM_DOC_ARRAY && a->kind != FVM_DOC_OBJECT)
        return fvm_doc_equal(a, b);
    if (a->u.coll.n != b->u.coll.n)
        return false;
    for (size_t i = 0; i < a->u.coll.n; i++)
        if ((a->kind == FVM_DOC_OBJECT && !fvm_doc_equal(a->u.coll.keys[i], b->u.coll.keys[i])) ||
            !same_bits(a->u.coll.items[i], b->u.coll.items[i]))
            return false;
    return true;
}

/* Set by --mpi: the cases run on it (fused and unfused) instead of on threads. */
static fvm_backend *mpi;

static fvm_named_text *case_args(const fvm_doc *args, int *n)
{
    *n = args ? (int)args->u.coll.n : 0;
    fvm_named_text *t = calloc((size_t)*n + 1, sizeof *t);
    assert_non_null(t);
    for (int i = 0; i < *n; i++) {
        t[i].name = args->u.coll.keys[i]->u.str.s;
        t[i].text = args->u.coll.items[i]->u.str.s;
    }
    return t;
}

/* Runs one case on a VM made with cfg; the result as a document in arena a. */
static fvm_doc *run_case(fvm_arena *a, const fvm_doc *c, const fvm_vm_config *cfg, fvm_diag *d)
{
    const char *path = fvm_doc_get(c, "program")->u.str.s;
    const fvm_doc *rounds = fvm_doc_get(c, "rounds");
    int nargs;
    fvm_named_text *args = case_args(fvm_doc_get(c, "args"), &nargs);
    fvm_program *p = NULL;
    fvm_vm *vm = NULL;
    fvm_doc *result = NULL;
    assert_int_equal(fvm_program_load(path, &p, d), FVM_OK);
    assert_int_equal(fvm_compile(p, d), FVM_OK);
    assert_int_equal(fvm_vm_new(p, cfg, &vm, d), FVM_OK);
    int64_t nclients = -1;
    if (!rounds) {
        const fvm_func *f = fvm_program_func(p, "main");
        fvm_value **vals = NULL, *res = NULL;
        assert_int_equal(fvm_bind_args(f, nargs, args, 0, &nclients, &vals, d), FVM_OK);
        if (nclients >= 0) /* a program without client data */
            assert_int_equal(fvm_vm_set_clients(vm, nclients, d), FVM_OK);
        assert_int_equal(fvm_vm_call(vm, f, vals, &res, d), FVM_OK);
        result = fvm_value_to_doc(a, res, f->result_type);
        fvm_value_release(res);
        fvm_values_free(vals, f->nparams);
    } else {
        const fvm_func *init = fvm_program_func(p, "initialize"), *next = fvm_program_func(p, "next");
        fvm_value *state = NULL;
        assert_int_equal(fvm_vm_call(vm, init, NULL, &state, d), FVM_OK);
        fvm_func view = *next;
        view.nparams--;
        view.param_names++;
        view.param_types++;
        fvm_value **vals = NULL;
        assert_int_equal(fvm_bind_args(&view, nargs, args, 0, &nclients, &vals, d), FVM_OK);
        assert_int_equal(fvm_vm_set_clients(vm, nclients, d), FVM_OK);
        fvm_doc *metrics = fvm_doc_new(a, FVM_DOC_ARRAY);
        for (int64_t r = 0; r < rounds->u.i; r++) {
            fvm_value *argv[8] = {state}, *res = NULL;
            for (int i = 0; i < view.nparams; i++)
                argv[i + 1] = vals[i];
            assert_int_equal(fvm_vm_call(vm, next, argv, &res, d), FVM_OK);
            fvm_doc_push(a, metrics, fvm_value_to_doc(a, res->items[1], next->result_type->u.strct.elems[1]));
            fvm_value_release(state);
            state = fvm_value_retain(res->items[0]);
            fvm_value_release(res);
        }
        result = fvm_doc_new(a, FVM_DOC_OBJECT);
        fvm_doc_set(a, result, "metrics", metrics);
        fvm_doc_set(a, result, "state", fvm_value_to_doc(a, state, init->result_type));
        fvm_value_release(state);
        fvm_values_free(vals, view.nparams);
    }
    fvm_vm_free(vm);
    fvm_program_free(p);
    free(args);
    return result;
}

static void test_golden_cases(void **state)
{
    (void)state;
    DIR *dir = opendir("tests/golden");
    assert_non_null(dir);
    int ran = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "tests/golden/%s", e->d_name);
        fvm_arena a = {0};
        fvm_diag d = {0};
        char *text;
        size_t n;
        assert_int_equal(fvm_read_file(path, &text, &n, &d), FVM_OK);
        fvm_doc_src src = {path, text, n};
        fvm_doc *c = NULL;
        assert_int_equal(fvm_json_parse(&a, &src, &c, &d), FVM_OK);
        fvm_vm_config seq = {.nclients = -1};
        fvm_doc *got = run_case(&a, c, &seq, &d);
        for (int i = 0; i < d.n; i++)
            print_error("%s: %s\n", path, d.errs[i].msg);
        assert_non_null(got);
        /* The same bits one instruction at a time, and on 1, 2 and 4 threads
         * (or on mpi's ranks, fused and unfused), and with the portable
         * kernel provider, fused on 2 threads and unfused in sequence. */
        for (int k = 0; k < (mpi ? 2 : 6); k++) {
            fvm_backend *b = mpi || !k || k == 5 ? NULL : fvm_backend_threads(k == 4 ? 2 : 1 << (k - 1));
            fvm_vm_config cfg = {.nclients = -1,
                                 .unfused = k == 0 || k == 5,
                                 .backend = mpi ? mpi : b,
                                 .kernels = k >= 4 ? fvm_kernels_portable() : NULL};
            fvm_doc *other = run_case(&a, c, &cfg, &d);
            if (!other || !same_bits(got, other))
                fail_msg("%s: differs %s%s", path, cfg.unfused ? "when run unfused" : "fused",
                         mpi      ? " on mpi"
                         : k >= 4 ? " with the portable kernels"
                         : k      ? " on threads"
                                  : "");
            fvm_backend_free(b);
        }
        const fvm_doc *tol = fvm_doc_get(c, "tolerance");
        double t = tol ? (tol->kind == FVM_DOC_INT ? (double)tol->u.i : tol->u.r) : 0;
        char why[256] = "";
        if (!close_docs(got, fvm_doc_get(c, "expect"), t, why, sizeof why))
            fail_msg("%s: %s", path, why);
        if (mpi)
            print_message("golden %s on %d mpi ranks (rank %d): ok\n", e->d_name, mpi->workers, mpi->rank);
        else
            print_message("golden %s: ok\n", e->d_name);
        ran++;
        fvm_diag_clear(&d);
        free(text);
        fvm_arena_free(&a);
    }
    closedir(dir);
    assert_true(ran >= 6);
}

int main(int argc, char **argv)
{
    fvm_diag d = {0};
    if (argc > 1 && strcmp(argv[1], "--mpi") == 0 && fvm_backend_mpi(&mpi, &d)) {
        fprintf(stderr, "test_golden: %s\n", d.errs[0].msg);
        fvm_diag_clear(&d);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_cases),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* A rank that failed leaves without finalising MPI, so that mpirun ends
     * the ranks still waiting for it instead of letting them hang. */
    if (!failed)
        fvm_backend_free(mpi);
    return failed;
}
