/* fedvm.c - the fedvm command: run, check and format federated programs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../vm/fedvm.h"
#include "cli.h"

static const char *const usage_main =
    "usage: fedvm COMMAND [options]\n"
    "       fedvm FILE [run options]      same as 'fedvm run FILE'\n"
    "\n"
    "fedvm checks and runs federated computations written as a JSON or YAML IR.\n"
    "\n"
    "commands:\n"
    "  run FILE        check a program and run it; print the result as JSON\n"
    "  check FILE...   check programs without running them\n"
    "  fmt FILE        print a program in canonical form (JSON or YAML)\n"
    "  grad FILE FN    print the derivative of a function as IR (a complete program)\n"
    "  data COMMAND    federated datasets: import, synthetic, info, head ('fedvm data --help')\n"
    "  help [COMMAND]  show help\n"
    "\n"
    "options: --help, --version\n"
    "exit status: 0 success, 1 invalid program or failed run, 2 usage error\n"
    "The format is described in format/SPEC.md.\n";

static const char *const usage_run =
    "usage: fedvm run FILE [--fn NAME] [--arg NAME=VALUE|@FILE]... [--clients N] [--seed S] [--rounds R]\n"
    "\n"
    "Checks FILE, then runs a function and prints its result as JSON on stdout.\n"
    "\n"
    "  --fn NAME          the function to run (default: main; for an iterative program\n"
    "                     without main: initialize, then next for --rounds rounds)\n"
    "  --arg NAME=VALUE   a parameter's value as JSON text, or @FILE (.json, .yaml);\n"
    "                     {T}@CLIENTS takes an array with one member per client\n"
    "  --clients N        the number of clients when no client data is given\n"
    "  --seed S           seed of the random key given to a parameter named 'key' of\n"
    "                     type u32[2] when it is not bound with --arg (default 0)\n"
    "  --rounds R         rounds of an iterative program (default 1); each round prints\n"
    "                     one JSON line {\"round\": r, \"metrics\": ...}; next's 'key'\n"
    "                     parameter gets the seed's key folded with the round number\n";

static const char *const usage_check =
    "usage: fedvm check [--format text|json|github] FILE...\n"
    "\n"
    "Checks every FILE (names, types, shapes, placements, attributes) without running\n"
    "it and reports every error with file:line:col and the JSON pointer of the node.\n"
    "\n"
    "  --format text     'file:line:col: pointer: message' lines on stderr (default)\n"
    "  --format json     one JSON array of errors on stdout\n"
    "  --format github   GitHub Actions '::error file=F,line=L,col=C::message' lines on stdout\n"
    "\n"
    "exit status: 0 all valid, 1 some invalid, 2 usage error\n";

static const char *const usage_grad =
    "usage: fedvm grad FILE FN [--wrt PARAM] [--to json|yaml] [-o OUT]\n"
    "\n"
    "Derives the reverse-mode derivative of function FN with respect to its\n"
    "parameter PARAM (default: the first) and prints the program with it: every\n"
    "function of FILE and its includes, then the derived function\n"
    "  FN.vjp(PARAM)(params..., ct) -> <value=FN(params...), grads=<d FN / d PARAM . ct>>\n"
    "and the helpers it calls. The output is plain IR that 'fedvm check' accepts; the\n"
    "derivative of a federated function uses only federated intrinsics.\n"
    "\n"
    "  --wrt PARAM      the parameter to differentiate with respect to\n"
    "  --to json|yaml   output format (default json)\n"
    "  -o OUT           write to OUT (replaced atomically) instead of stdout\n";

static const char *const usage_fmt =
    "usage: fedvm fmt FILE [--to json|yaml] [-o OUT]\n"
    "\n"
    "Prints FILE in canonical form: fixed key order, canonical type notation, one\n"
    "instruction per line. Reading the output gives back the same program.\n"
    "\n"
    "  --to json|yaml   output format (default: that of FILE)\n"
    "  -o OUT           write to OUT (replaced atomically) instead of stdout\n";

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Loads and checks, reporting every error of both stages. */
static fvm_status load_checked(const char *path, fvm_program **p, fvm_diag *d)
{
    fvm_status s = fvm_program_load(path, p, d);
    if (*p) {
        fvm_status c = fvm_check(*p, d);
        if (s == FVM_OK)
            s = c;
    }
    if (s && *p) {
        fvm_program_free(*p);
        *p = NULL;
    }
    return s;
}

static int print_doc(const fvm_doc *doc, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    fvm_diag d = {0};
    int rc = 0;
    if (!doc || fvm_json_write(doc, &text, &len, &d)) {
        cli_print_errors(&d);
        fprintf(stderr, "fedvm: cannot print the result\n");
        rc = EXIT_INVALID;
    } else {
        fwrite(text, 1, len, out);
    }
    free(text);
    fvm_diag_clear(&d);
    return rc;
}

static int print_value(const fvm_value *v, const fvm_type *t, FILE *out)
{
    fvm_arena a = {0};
    int rc = print_doc(fvm_value_to_doc(&a, v, t), out);
    fvm_arena_free(&a);
    return rc;
}

/* ---- run ------------------------------------------------------------------- */

typedef struct run_opts {
    const char *file, *fn;
    fvm_named_text *args;
    int nargs;
    long long clients, seed, rounds;
} run_opts;

static int run_rounds(fvm_vm *vm, const fvm_program *p, const run_opts *o, fvm_diag *d)
{
    fvm_func *init = fvm_program_func(p, "initialize"), *next = fvm_program_func(p, "next");
    fvm_value *state = NULL;
    int rc = 0;
    if (fvm_vm_call(vm, init, NULL, &state, d))
        return EXIT_INVALID;
    /* next's parameters after the state come from --arg; 'key' from the seed. */
    int64_t nclients = fvm_vm_clients(vm);
    uint32_t base[2];
    fvm_prng_key((uint64_t)o->seed, base);
    for (long long r = 1; r <= o->rounds && rc == 0; r++) {
        uint32_t k[2];
        fvm_prng_fold_in(base, (uint32_t)r, k);
        uint64_t round_seed = ((uint64_t)k[0] << 32) | k[1];
        fvm_value **vals = NULL;
        /* Bind the data once per round: values are immutable, so this is cheap to redo. */
        fvm_func view = *next;
        view.nparams = next->nparams - 1;
        view.param_names = next->param_names + 1;
        view.param_types = next->param_types + 1;
        if (fvm_bind_args(&view, o->nargs, o->args, round_seed, &nclients, &vals, d) ||
            (nclients >= 0 && fvm_vm_set_clients(vm, nclients, d))) {
            rc = EXIT_INVALID;
            break;
        }
        fvm_value **all = calloc((size_t)next->nparams, sizeof *all);
        fvm_value *res = NULL;
        if (!all) {
            fvm_values_free(vals, view.nparams);
            rc = EXIT_INVALID;
            break;
        }
        all[0] = state;
        for (int i = 1; i < next->nparams; i++)
            all[i] = vals[i - 1];
        if (fvm_vm_call(vm, next, all, &res, d)) {
            rc = EXIT_INVALID;
        } else {
            /* One line per round: {"round": r, "metrics": ...} */
            fvm_arena a = {0};
            fvm_doc *line = fvm_doc_new(&a, FVM_DOC_OBJECT);
            if (!line || fvm_doc_set(&a, line, "round", fvm_doc_int(&a, r)) ||
                fvm_doc_set(&a, line, "metrics",
                            fvm_value_to_doc(&a, res->items[1], next->result_type->u.strct.elems[1])))
                rc = EXIT_INVALID;
            else
                line->flow = true;
            if (rc == 0 && print_doc(line, stdout))
                rc = EXIT_INVALID;
            fvm_arena_free(&a);
            fvm_value_release(state);
            state = fvm_value_retain(res->items[0]);
            fvm_value_release(res);
        }
        free(all);
        fvm_values_free(vals, view.nparams);
    }
    fvm_value_release(state);
    return rc;
}

static int cmd_run(int argc, char **argv)
{
    run_opts o = {.clients = -1, .rounds = 1};
    o.args = calloc((size_t)argc + 1, sizeof *o.args);
    if (!o.args)
        return EXIT_INVALID;
    int rc = 0;
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *v;
        long long n;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_run, stdout);
            free(o.args);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--fn"))) {
            o.fn = v;
        } else if ((v = cli_opt(argc, argv, &i, "--arg"))) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v)
                rc = cli_usage_error(usage_run, "--arg needs NAME=VALUE, found '%s'", v);
            else {
                char *name = strndup(v, (size_t)(eq - v));
                if (!name) {
                    rc = EXIT_INVALID;
                    break;
                }
                o.args[o.nargs].name = name;
                o.args[o.nargs++].text = eq + 1;
            }
        } else if ((v = cli_opt(argc, argv, &i, "--clients"))) {
            if (!cli_int(v, 0, FVM_MAX_CLIENTS, &n))
                rc = cli_usage_error(usage_run, "--clients needs a number of clients, found '%s'", v);
            o.clients = n;
        } else if ((v = cli_opt(argc, argv, &i, "--seed"))) {
            if (!cli_int(v, LLONG_MIN, LLONG_MAX, &n))
                rc = cli_usage_error(usage_run, "--seed needs an integer, found '%s'", v);
            o.seed = n;
        } else if ((v = cli_opt(argc, argv, &i, "--rounds"))) {
            if (!cli_int(v, 0, 1000000000, &n))
                rc = cli_usage_error(usage_run, "--rounds needs a number >= 0, found '%s'", v);
            o.rounds = n;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = cli_usage_error(usage_run, "unknown option '%s'", argv[i]);
        } else if (o.file) {
            rc = cli_usage_error(usage_run, "one program at a time; unexpected '%s'", argv[i]);
        } else {
            o.file = argv[i];
        }
    }
    if (rc == 0 && !o.file)
        rc = cli_usage_error(usage_run, "%s", "run needs a program FILE");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_vm *vm = NULL;
    fvm_value **vals = NULL;
    fvm_value *res = NULL;
    const fvm_func *f = NULL;
    if (rc)
        goto done;
    rc = EXIT_INVALID;
    if (load_checked(o.file, &p, &d))
        goto done;
    fvm_vm_config cfg = {.nclients = o.clients};
    if (fvm_vm_new(p, &cfg, &vm, &d))
        goto done;
    f = fvm_program_func(p, o.fn ? o.fn : "main");
    if (!f && !o.fn && fvm_program_func(p, "next")) {
        rc = run_rounds(vm, p, &o, &d);
        goto done;
    }
    if (!f) {
        fprintf(stderr, "fedvm: %s has no function '%s'; functions:", o.file, o.fn ? o.fn : "main");
        for (int i = 0; i < p->nfuncs; i++)
            fprintf(stderr, " %s", p->funcs[i]->name);
        fprintf(stderr, "\n");
        goto done;
    }
    int64_t nclients = o.clients;
    if (fvm_bind_args(f, o.nargs, o.args, (uint64_t)o.seed, &nclients, &vals, &d))
        goto done;
    if (nclients >= 0 && fvm_vm_set_clients(vm, nclients, &d))
        goto done;
    if (fvm_vm_call(vm, f, vals, &res, &d))
        goto done;
    rc = print_value(res, f->result_type, stdout);
done:
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    fvm_value_release(res);
    if (f)
        fvm_values_free(vals, f->nparams);
    fvm_vm_free(vm);
    fvm_program_free(p);
    for (int i = 0; i < o.nargs; i++)
        free((char *)o.args[i].name);
    free(o.args);
    return rc;
}

/* ---- check ----------------------------------------------------------------- */

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void github_escape(FILE *out, const char *s, bool property)
{
    for (; *s; s++) {
        if (*s == '%')
            fputs("%25", out);
        else if (*s == '\r')
            fputs("%0D", out);
        else if (*s == '\n')
            fputs("%0A", out);
        else if (property && *s == ':')
            fputs("%3A", out);
        else if (property && *s == ',')
            fputs("%2C", out);
        else
            fputc(*s, out);
    }
}

static int cmd_check(int argc, char **argv)
{
    const char *format = "text";
    int nfiles = 0, invalid = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_check, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--format"))) {
            if (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "github"))
                return cli_usage_error(usage_check, "--format must be text, json or github, found '%s'", v);
            format = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(usage_check, "unknown option '%s'", argv[i]);
        } else {
            nfiles++;
        }
    }
    if (!nfiles)
        return cli_usage_error(usage_check, "%s", "check needs at least one FILE");
    bool json = !strcmp(format, "json"), github = !strcmp(format, "github");
    if (json)
        printf("[");
    int printed = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--format")) {
            i++;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            continue;
        fvm_diag d = {0};
        fvm_program *p = NULL;
        if (load_checked(argv[i], &p, &d) != FVM_OK)
            invalid++;
        fvm_program_free(p);
        for (int k = 0; k < d.n; k++) {
            const fvm_error *e = &d.errs[k];
            const char *file = e->loc.file ? e->loc.file : argv[i];
            if (json) {
                printf("%s\n  {\"file\": ", printed++ ? "," : "");
                json_string(stdout, file);
                printf(", \"line\": %d, \"col\": %d, \"pointer\": ", e->loc.line, e->loc.col);
                json_string(stdout, e->loc.ptr ? e->loc.ptr : "");
                printf(", \"code\": \"%s\", \"message\": ", fvm_status_name(e->code));
                json_string(stdout, e->msg);
                printf("}");
            } else if (github) {
                printf("::error file=");
                github_escape(stdout, file, true);
                if (e->loc.line)
                    printf(",line=%d,col=%d", e->loc.line, e->loc.col);
                printf("::");
                if (e->loc.ptr) {
                    github_escape(stdout, e->loc.ptr[0] ? e->loc.ptr : "/", false);
                    printf(": ");
                }
                github_escape(stdout, e->msg, false);
                printf("\n");
            }
        }
        if (!json && !github) {
            cli_print_errors(&d);
            if (d.n == 0)
                fprintf(stderr, "%s: ok\n", argv[i]);
        }
        fvm_diag_clear(&d);
    }
    if (json)
        printf("%s]\n", printed ? "\n" : "");
    if (!json && !github && nfiles > 1)
        fprintf(stderr, "%d file%s checked, %d invalid\n", nfiles, nfiles == 1 ? "" : "s", invalid);
    return invalid ? EXIT_INVALID : 0;
}

/* ---- fmt --------------------------------------------------------------------- */

static int cmd_fmt(int argc, char **argv)
{
    const char *file = NULL, *to = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_fmt, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--to"))) {
            if (strcmp(v, "json") && strcmp(v, "yaml"))
                return cli_usage_error(usage_fmt, "--to must be json or yaml, found '%s'", v);
            to = v;
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage_error(usage_fmt, "%s", "-o needs a file name");
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(usage_fmt, "unknown option '%s'", argv[i]);
        } else if (file) {
            return cli_usage_error(usage_fmt, "one file at a time; unexpected '%s'", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file)
        return cli_usage_error(usage_fmt, "%s", "fmt needs a FILE");
    bool yaml = to ? !strcmp(to, "yaml") : (ends_with(file, ".yaml") || ends_with(file, ".yml"));
    fvm_diag d = {0};
    fvm_program *p = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = EXIT_INVALID;
    if (fvm_program_load(file, &p, &d) == FVM_OK && fvm_check(p, &d) == FVM_OK &&
        fvm_module_write(p->root, yaml, &text, &len, &d) == FVM_OK) {
        if (out) {
            rc = cli_write_atomic(out, text, len);
        } else {
            fwrite(text, 1, len, stdout);
            rc = 0;
        }
    }
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    free(text);
    fvm_program_free(p);
    return rc;
}

static int cmd_grad(int argc, char **argv)
{
    const char *file = NULL, *fn = NULL, *wrt = NULL, *to = "json", *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_grad, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--wrt"))) {
            wrt = v;
        } else if ((v = cli_opt(argc, argv, &i, "--to"))) {
            if (strcmp(v, "json") && strcmp(v, "yaml"))
                return cli_usage_error(usage_grad, "--to must be json or yaml, found '%s'", v);
            to = v;
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(usage_grad, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else if (!fn) {
            fn = argv[i];
        } else {
            return cli_usage_error(usage_grad, "unexpected '%s'", argv[i]);
        }
    }
    if (!file || !fn)
        return cli_usage_error(usage_grad, "%s", "grad needs a FILE and a function FN");
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_func *derived = NULL;
    fvm_arena a = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = EXIT_INVALID;
    if (load_checked(file, &p, &d) == FVM_OK && fvm_check_derive(p, fn, wrt, &derived, &d) == FVM_OK) {
        const char *doc = fvm_arena_printf(&a, "%s with the derivative of '%s' as '%s', derived by fedvm grad", file,
                                           fn, derived->name);
        fvm_doc *root = fvm_program_to_doc(&a, p, doc);
        fvm_status s = !root ? fvm_diag_add(&d, FVM_ERR_NOMEM, NULL, "out of memory")
                       : !strcmp(to, "yaml") ? fvm_yaml_write(root, &text, &len, &d)
                                             : fvm_json_write(root, &text, &len, &d);
        if (s == FVM_OK && out) {
            rc = cli_write_atomic(out, text, len);
        } else if (s == FVM_OK) {
            fwrite(text, 1, len, stdout);
            rc = 0;
        }
    }
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    free(text);
    fvm_arena_free(&a);
    fvm_program_free(p);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("fedvm %s (IR format version 1)\n", FVM_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help")) {
        const char *topic = argc > 2 ? argv[2] : "";
        if (!strcmp(topic, "data")) { /* fedvm help data [COMMAND] */
            char help[] = "help", none[] = "";
            char *args[] = {help, argc > 3 ? argv[3] : none};
            return fvm_cmd_data(2, args);
        }
        fputs(!strcmp(topic, "run")     ? usage_run
              : !strcmp(topic, "check") ? usage_check
              : !strcmp(topic, "fmt")   ? usage_fmt
              : !strcmp(topic, "grad")  ? usage_grad
                                        : usage_main,
              stdout);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "check"))
        return cmd_check(argc - 2, argv + 2);
    if (!strcmp(cmd, "fmt"))
        return cmd_fmt(argc - 2, argv + 2);
    if (!strcmp(cmd, "grad"))
        return cmd_grad(argc - 2, argv + 2);
    if (!strcmp(cmd, "data"))
        return fvm_cmd_data(argc - 2, argv + 2);
    if (cmd[0] != '-' && (strchr(cmd, '.') || strchr(cmd, '/')))
        return cmd_run(argc - 1, argv + 1); /* fedvm program.json ... */
    fprintf(stderr, "fedvm: unknown command '%s'\n\n%s", cmd, usage_main);
    return EXIT_USAGE;
}
