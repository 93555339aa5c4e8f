/* fedvm_cli.c - helpers shared by the fedvm command's subcommands: errors, options, atomic writes. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/atomic.h"
#include "../format/doc_io.h"
#include "../vm/core/suggest.h"
#include "cli.h"

const char *cli_prog = "fedvm";

void cli_start(void)
{
    signal(SIGPIPE, SIG_IGN);
}

int cli_finish(int status)
{
    /* A write that failed earlier left ferror set and, unless something
     * since has changed it, its reason in errno: kept when it is one a write
     * gives. */
    int err = errno;
    bool earlier = ferror(stdout);
    if (!earlier || (err != ENOSPC && err != EPIPE && err != EIO && err != EDQUOT && err != EFBIG && err != EBADF))
        err = 0;
    errno = 0;
    bool failed = fflush(stdout) != 0 || earlier || ferror(stdout);
    if (errno)
        err = errno;
    if (fclose(stdout) != 0 && !failed) {
        failed = true;
        err = errno;
    }
    if (!failed)
        return status;
    if (err)
        fprintf(stderr, "%s: cannot write standard output: %s\n", cli_prog, strerror(err));
    else /* an earlier write failed; its errno is gone */
        fprintf(stderr, "%s: cannot write standard output (a full disk or a closed pipe?); the output is incomplete\n",
                cli_prog);
    return status ? status : EXIT_INVALID;
}

int cli_usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", cli_prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n%s", usage);
    return EXIT_USAGE;
}

void cli_print_errors(const fvm_diag *d)
{
    for (int i = 0; i < d->n; i++) {
        char *s = fvm_error_format(&d->errs[i]);
        if (!d->errs[i].loc.file && !d->errs[i].loc.ptr)
            fprintf(stderr, "%s: %s\n", cli_prog, s ? s : d->errs[i].msg);
        else
            fprintf(stderr, "%s\n", s ? s : d->errs[i].msg);
        free(s);
    }
    if (d->dropped)
        fprintf(stderr, "%s: %d more errors not shown\n", cli_prog, d->dropped);
}

const char *cli_nearest(const char *word, const char *const *words, int n)
{
    fvm_suggest s;
    fvm_suggest_init(&s, word);
    for (int i = 0; i < n; i++)
        fvm_suggest_add(&s, words[i]);
    return s.best;
}

int cli_unknown_command(const char *where, const char *what, const char *word, const char *const *commands, int n,
                        const char *usage)
{
    const char *best = cli_nearest(word, commands, n);
    fprintf(stderr, "%s%s: unknown %s '%s'", cli_prog, where, what, word);
    if (best)
        fprintf(stderr, "; did you mean '%s'?", best);
    fprintf(stderr, "\n\n%s", usage);
    return EXIT_USAGE;
}

int cli_unknown_option(const char *usage, const char *arg)
{
    /* The options usage names: words that start with '-' after a blank or '[' */
    enum { MAX_OPTS = 64, MAX_LEN = 40 };
    char opts[MAX_OPTS][MAX_LEN];
    const char *ptrs[MAX_OPTS];
    int n = 0;
    size_t eq = strcspn(arg, "=");
    char word[MAX_LEN];
    snprintf(word, sizeof word, "%.*s", (int)(eq < sizeof word ? eq : sizeof word - 1), arg);
    for (const char *p = usage; *p && n < MAX_OPTS; p++) {
        if (*p != '-' || (p > usage && p[-1] != ' ' && p[-1] != '[' && p[-1] != '|' && p[-1] != '('))
            continue;
        size_t len = strspn(p, "-abcdefghijklmnopqrstuvwxyz0123456789");
        if (len < 2 || len >= MAX_LEN || p[1] == ' ' || (p[1] == '-' && len < 3)) {
            p += len ? len - 1 : 0;
            continue;
        }
        memcpy(opts[n], p, len);
        opts[n][len] = '\0';
        bool seen = false;
        for (int i = 0; i < n && !seen; i++)
            seen = !strcmp(opts[i], opts[n]);
        if (!seen) {
            ptrs[n] = opts[n];
            n++;
        }
        p += len - 1;
    }
    const char *best = cli_nearest(word, ptrs, n);
    fprintf(stderr, "%s: unknown option '%s'", cli_prog, arg);
    if (best)
        fprintf(stderr, "; did you mean '%s'?", best);
    fprintf(stderr, "\n\n%s", usage);
    return EXIT_USAGE;
}

/* "--name value" or "--name=value": returns the value and advances *i. */
const char *cli_opt(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != 0)
        return NULL;
    if (*i + 1 >= argc)
        return "";
    return argv[++*i];
}

bool cli_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Replaces path with data atomically; prints the error. */
int cli_write_atomic(const char *path, const char *data, size_t len)
{
    fvm_diag d = {0};
    int rc = fvm_atomic_write(path, data, len, &d) ? EXIT_INVALID : 0;
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    return rc;
}

enum { MAX_LOAD_OPTS = 256 };
static const char *load_sets[MAX_LOAD_OPTS], *load_dirs[MAX_LOAD_OPTS];
static fvm_load_opts load_opts = {.sets = load_sets, .include_dirs = load_dirs};
static bool load_env_read;

bool cli_load_opt(int argc, char **argv, int *i, const char *usage, int *rc)
{
    const char *v;
    *rc = 0;
    if ((v = cli_opt(argc, argv, i, "--set"))) {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v)
            *rc = cli_usage_error(usage, "--set needs NAME=VALUE, found '%s'", v);
        else if (load_opts.nsets == MAX_LOAD_OPTS)
            *rc = cli_usage_error(usage, "at most %s --set options", "256");
        else
            load_sets[load_opts.nsets++] = v;
        return true;
    }
    if ((v = cli_opt(argc, argv, i, "-I"))) {
        if (!*v)
            *rc = cli_usage_error(usage, "%s", "-I needs a directory");
        else if (load_opts.ninclude_dirs == MAX_LOAD_OPTS)
            *rc = cli_usage_error(usage, "at most %s include directories", "256");
        else
            load_dirs[load_opts.ninclude_dirs++] = v;
        return true;
    }
    if (!strncmp(argv[*i], "-I", 2) && argv[*i][2]) { /* -IDIR, as compilers take it */
        if (load_opts.ninclude_dirs == MAX_LOAD_OPTS)
            *rc = cli_usage_error(usage, "at most %s include directories", "256");
        else
            load_dirs[load_opts.ninclude_dirs++] = argv[*i] + 2;
        return true;
    }
    return false;
}

const fvm_load_opts *cli_load_opts(void)
{
    if (!load_env_read) { /* FEDVM_PATH's folders after every -I */
        load_env_read = true;
        const char *env = getenv("FEDVM_PATH");
        static char *copy;
        if (env && *env && (copy = strdup(env)))
            for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir && load_opts.ninclude_dirs < MAX_LOAD_OPTS;
                 dir = strtok_r(NULL, ":", &save))
                load_dirs[load_opts.ninclude_dirs++] = dir;
    }
    return &load_opts;
}

/* Loads and checks, reporting every error of both stages. */
fvm_status cli_load_checked(const char *path, fvm_program **p, fvm_diag *d)
{
    fvm_status s = fvm_program_load_opts(path, NULL, 0, NULL, cli_load_opts(), p, d);
    if (*p) {
        fvm_status c = fvm_compile(*p, d);
        if (s == FVM_OK)
            s = c;
    }
    if (s && *p) {
        fvm_program_free(*p);
        *p = NULL;
    }
    return s;
}

int cli_print_doc(const fvm_doc *doc, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    fvm_diag d = {0};
    int rc = 0;
    if (!doc || fvm_json_write(doc, &text, &len, &d)) {
        cli_print_errors(&d);
        fprintf(stderr, "%s: cannot print the result\n", cli_prog);
        rc = EXIT_INVALID;
    } else {
        fwrite(text, 1, len, out);
    }
    free(text);
    fvm_diag_clear(&d);
    return rc;
}

int cli_print_value(const fvm_value *v, const fvm_type *t, FILE *out)
{
    fvm_arena a = {0};
    int rc = cli_print_doc(fvm_value_to_doc(&a, v, t), out);
    fvm_arena_free(&a);
    return rc;
}
