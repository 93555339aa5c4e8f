/* fedplan.c - the fedplan command: check a program and write it as a plan for another system (format/PLANS.md). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/transform/plan.h"
#include "../vm/fedvm.h"
#include "cli.h"

/* The help text, with one line per format of fvm_plan_formats (filled by main). */
static char usage[2048];

static void make_usage(void)
{
    size_t n = 0;
#define ADD(...) (n += (size_t)snprintf(usage + n, n < sizeof usage ? sizeof usage - n : 0, __VA_ARGS__))
    ADD("usage: fedplan PROGRAM --to FORMAT [-o OUT] [--fn NAME] [--set NAME=VALUE]... [-I DIR]...\n"
        "\n"
        "Checks PROGRAM (JSON or YAML IR) and writes it as a plan for another system.\n"
        "The plan carries the program's hyperparameters with their values as defaults.\n"
        "\n"
        "  --to FORMAT        the plan format (below)\n"
        "  --fn NAME          the function to use (default: next, else main)\n"
        "  -o OUT             write to OUT (replaced atomically) instead of stdout\n" CLI_LOAD_HELP
        "  --help             show this help;  --version  show the version\n"
        "\n"
        "formats:\n");
    for (int i = 0; i < fvm_plan_nformats; i++) {
        const fvm_plan_format *pf = &fvm_plan_formats[i];
        ADD("  %-22s %s\n", pf->name, pf->summary);
    }
    ADD("\n"
        "exit status: 0 success, 1 invalid program or unwritable output, 2 usage error\n"
        "The formats are described in format/PLANS.md. A picture: fedplan P.json --to dot | dot -Tsvg -o P.svg\n");
#undef ADD
    assert(n < sizeof usage); /* the help text fits */
}

/* "fedplan: <what>; formats: dot, ..." on stderr; returns EXIT_USAGE. */
static int format_error(const char *what, const char *name)
{
    fprintf(stderr, "%s: ", cli_prog);
    fprintf(stderr, what, name);
    fputs("; formats: ", stderr);
    for (int i = 0; i < fvm_plan_nformats; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", fvm_plan_formats[i].name);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

static int dispatch(int argc, char **argv)
{
    cli_prog = "fedplan";
    make_usage();
    const char *file = NULL, *to = NULL, *out = NULL, *fn = NULL;
    int rc;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (cli_load_opt(argc, argv, &i, usage, &rc)) {
            if (rc)
                return rc;
        } else if (!strcmp(argv[i], "--version")) {
            printf("fedplan %s (IR format version 1)\n", FVM_VERSION);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--to"))) {
            if (!*v)
                return cli_usage_error(usage, "%s", "--to needs a format");
            to = v;
        } else if ((v = cli_opt(argc, argv, &i, "--fn"))) {
            if (!*v)
                return cli_usage_error(usage, "%s", "--fn needs a function name");
            fn = v;
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage_error(usage, "%s", "-o needs a file name");
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage, argv[i]);
        } else if (file) {
            return cli_usage_error(usage, "one program at a time; unexpected '%s'", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file)
        return cli_usage_error(usage, "%s", "no PROGRAM given");
    if (!to)
        return format_error("%s", "--to FORMAT is required");
    const fvm_plan_format *pf = fvm_plan_format_lookup(to);
    if (!pf)
        return format_error("unknown format '%s'", to);

    fvm_diag d = {0};
    fvm_program *p = NULL;
    char *text = NULL;
    size_t len = 0;
    rc = EXIT_INVALID;
    fvm_plan_opts opts = {.fn = fn};
    fvm_status st = cli_load_checked(file, &p, &d);
    if (st == FVM_OK)
        st = pf->write(p, &opts, &text, &len, &d);
    if (st == FVM_OK) {
        if (out) {
            rc = cli_write_atomic(out, text, len);
        } else {
            fwrite(text, 1, len, stdout); /* checked by cli_finish */
            rc = 0;
        }
    }
    cli_print_errors(&d);
    if (st == FVM_ERR_NAME && p && !fn)
        fprintf(stderr, "%s: choose the function with --fn NAME\n", cli_prog);
    fvm_diag_clear(&d);
    free(text);
    fvm_program_free(p);
    return rc;
}

int main(int argc, char **argv)
{
    cli_start();
    return cli_finish(dispatch(argc, argv));
}
