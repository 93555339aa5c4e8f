/* fedvm.c - the fedvm command: run, check and format federated programs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../vm/fedvm.h"
#include "../format/doc_io.h"
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
    "  plot FILE...    draw training curves from 'run --metrics' files as SVG or PNG\n"
    "  privacy         the (epsilon, delta) of rounds of DP-FedAvg's Gaussian mechanism\n"
    "  device PLAN     run a cross-device plan's client phase on a device's data\n"
    "  server PLAN     run a cross-device plan's server phase: init, prepare, aggregate, merge\n"
    "  help [COMMAND]  show help\n"
    "\n"
    "options: --help, --version\n"
    "exit status: 0 success, 1 invalid program or failed run, 2 usage error\n"
    "The format is described in format/SPEC.md.\n";

static const char *const usage_check =
    "usage: fedvm check [--format text|json|github] [--set NAME=VALUE]... [-I DIR]... FILE...\n"
    "\n"
    "Checks every FILE (names, types, shapes, placements, attributes) without running\n"
    "it and reports every error with file:line:col and the JSON pointer of the node.\n"
    "\n"
    "  --format text     'file:line:col: pointer: message' lines on stderr (default)\n"
    "  --format json     one JSON array of errors on stdout\n"
    "  --format github   GitHub Actions '::error file=F,line=L,col=C::message' lines on stdout\n" CLI_LOAD_HELP "\n"
    "exit status: 0 all valid, 1 some invalid, 2 usage error\n";

static const char *const usage_grad =
    "usage: fedvm grad FILE FN [--wrt PARAM] [--to json|yaml] [-o OUT] [--set NAME=VALUE]... [-I DIR]...\n"
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
    "  -o OUT           write to OUT (replaced atomically) instead of stdout\n" CLI_LOAD_HELP "\n"
    "exit status: 0 success, 1 invalid program or function, 2 usage error\n";

static const char *const usage_fmt = "usage: fedvm fmt FILE [--to json|yaml] [-o OUT] [-I DIR]...\n"
                                     "\n"
                                     "Prints FILE in canonical form: fixed key order, canonical type notation, one\n"
                                     "instruction per line. Reading the output gives back the same program.\n"
                                     "\n"
                                     "  --to json|yaml   output format (default: that of FILE)\n"
                                     "  -o OUT           write to OUT (replaced atomically) instead of stdout\n"
                                     "  -I DIR           look for included files in DIR too (then in FEDVM_PATH's)\n"
                                     "\n"
                                     "exit status: 0 success, 1 invalid program, 2 usage error\n";

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
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
    int nfiles = 0, invalid = 0, rc;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_check, stdout);
            return 0;
        } else if (cli_load_opt(argc, argv, &i, usage_check, &rc)) {
            if (rc)
                return rc;
        } else if ((v = cli_opt(argc, argv, &i, "--format"))) {
            if (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "github"))
                return cli_usage_error(usage_check, "--format must be text, json or github, found '%s'", v);
            format = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_check, argv[i]);
        } else {
            argv[nfiles++] = argv[i]; /* the files, in order, at the front (nfiles <= i) */
        }
    }
    if (!nfiles)
        return cli_usage_error(usage_check, "%s", "check needs at least one FILE");
    bool json = !strcmp(format, "json"), github = !strcmp(format, "github");
    if (json)
        printf("[");
    int printed = 0;
    for (int i = 0; i < nfiles; i++) {
        fvm_diag d = {0};
        fvm_program *p = NULL;
        if (cli_load_checked(argv[i], &p, &d) != FVM_OK)
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
    int rc;
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
        } else if (!strncmp(argv[i], "-I", 2) && cli_load_opt(argc, argv, &i, usage_fmt, &rc)) {
            if (rc)
                return rc;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_fmt, argv[i]);
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
    rc = EXIT_INVALID;
    if (cli_load_checked(file, &p, &d) == FVM_OK && fvm_module_write(p->root, yaml, &text, &len, &d) == FVM_OK) {
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
    int rc;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_grad, stdout);
            return 0;
        } else if (cli_load_opt(argc, argv, &i, usage_grad, &rc)) {
            if (rc)
                return rc;
        } else if ((v = cli_opt(argc, argv, &i, "--wrt"))) {
            wrt = v;
        } else if ((v = cli_opt(argc, argv, &i, "--to"))) {
            if (strcmp(v, "json") && strcmp(v, "yaml"))
                return cli_usage_error(usage_grad, "--to must be json or yaml, found '%s'", v);
            to = v;
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_grad, argv[i]);
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
    rc = EXIT_INVALID;
    if (cli_load_checked(file, &p, &d) == FVM_OK && fvm_passes_pullback(p, fn, wrt, &derived, &d) == FVM_OK) {
        const char *doc = fvm_arena_printf(&a, "%s with the derivative of '%s' as '%s', derived by fedvm grad", file,
                                           fn, derived->name);
        fvm_doc *root = fvm_program_to_doc(&a, p, doc);
        fvm_status s = !root                 ? fvm_diag_add(&d, FVM_ERR_NOMEM, NULL, "out of memory")
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

static int unknown_command(const char *cmd, const char *where)
{
    static const char *const commands[] = {"run",  "check",   "fmt",    "grad",   "data",
                                           "plot", "privacy", "device", "server", "help"};
    return cli_unknown_command(where, "command", cmd, commands, (int)(sizeof commands / sizeof *commands), usage_main);
}

static int dispatch(int argc, char **argv)
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
        const char *text = !*topic                     ? usage_main
                           : !strcmp(topic, "run")     ? fvm_usage_run
                           : !strcmp(topic, "check")   ? usage_check
                           : !strcmp(topic, "fmt")     ? usage_fmt
                           : !strcmp(topic, "grad")    ? usage_grad
                           : !strcmp(topic, "plot")    ? fvm_usage_plot
                           : !strcmp(topic, "privacy") ? fvm_usage_privacy
                           : !strcmp(topic, "device")  ? fvm_usage_device
                           : !strcmp(topic, "server")  ? fvm_usage_server
                           : !strcmp(topic, "help")    ? usage_main
                                                       : NULL;
        if (!text)
            return unknown_command(topic, " help");
        fputs(text, stdout);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return fvm_cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "check"))
        return cmd_check(argc - 2, argv + 2);
    if (!strcmp(cmd, "fmt"))
        return cmd_fmt(argc - 2, argv + 2);
    if (!strcmp(cmd, "grad"))
        return cmd_grad(argc - 2, argv + 2);
    if (!strcmp(cmd, "data"))
        return fvm_cmd_data(argc - 2, argv + 2);
    if (!strcmp(cmd, "plot"))
        return fvm_cmd_plot(argc - 2, argv + 2);
    if (!strcmp(cmd, "privacy"))
        return fvm_cmd_privacy(argc - 2, argv + 2);
    if (!strcmp(cmd, "device"))
        return fvm_cmd_device(argc - 2, argv + 2);
    if (!strcmp(cmd, "server"))
        return fvm_cmd_server(argc - 2, argv + 2);
    if (cmd[0] != '-' && (strchr(cmd, '.') || strchr(cmd, '/')))
        return fvm_cmd_run(argc - 1, argv + 1); /* fedvm program.json ... */
    return unknown_command(cmd, "");
}

int main(int argc, char **argv)
{
    cli_start();
    return cli_finish(dispatch(argc, argv));
}
