/* cli.h - what the fedvm and fedplan commands' source files share: exit codes, option parsing, error printing. */
#ifndef FVM_CLI_H
#define FVM_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "../vm/fedvm.h"

enum { EXIT_INVALID = 1, EXIT_USAGE = 2 };

/* The command's name for messages ("fedvm" unless its main sets another). */
extern const char *cli_prog;

/* Prints every error of d on stderr (file:line:col: pointer: message). */
void cli_print_errors(const fvm_diag *d);
/* "<cli_prog>: <fmt with arg>" and the usage text on stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *usage, const char *fmt, const char *arg);
/* "<cli_prog>: unknown option 'arg'", with "did you mean" the nearest option
 * that usage names, and the usage text, on stderr; returns EXIT_USAGE. The
 * usage text is the list of options, so the two cannot drift. */
int cli_unknown_option(const char *usage, const char *arg);
/* "<cli_prog><where>: unknown <what> 'word'", with "did you mean" the nearest
 * of the n commands, and the usage text, on stderr; returns EXIT_USAGE. */
int cli_unknown_command(const char *where, const char *what, const char *word, const char *const *commands, int n,
                        const char *usage);
/* The nearest of the n words to word within a few edits, or NULL. */
const char *cli_nearest(const char *word, const char *const *words, int n);
/* "--name value" or "--name=value" at argv[*i]: the value (advancing *i), "" when the value is missing, NULL when argv[*i] is another option. */
const char *cli_opt(int argc, char **argv, int *i, const char *name);
/* A decimal integer in [lo, hi]. */
bool cli_int(const char *s, long long lo, long long hi, long long *out);
/* Ends a command: flushes and closes standard output and, when a write or
 * the close failed (a full disk, a closed pipe), says so and turns status 0
 * into EXIT_INVALID. Every command's main returns through it. */
int cli_finish(int status);
/* Makes writes to a closed pipe fail with EPIPE (reported by cli_finish)
 * instead of killing the process; called first in every command's main. */
void cli_start(void);
/* Replaces path with data atomically (temporary file, fsync, rename). 0 or EXIT_INVALID (message printed). */
int cli_write_atomic(const char *path, const char *data, size_t len);

/* The options of every command that loads a program (their help text is
 * CLI_LOAD_HELP): --set NAME=VALUE (a hyperparameter's value) and -I DIR (an
 * include directory; the ':'-separated directories of FEDVM_PATH follow).
 * True when argv[*i] is one of them (consumed, with its value; *rc is then 0,
 * or EXIT_USAGE after a message naming usage). */
bool cli_load_opt(int argc, char **argv, int *i, const char *usage, int *rc);
#define CLI_LOAD_HELP \
    "  --set NAME=VALUE   a hyperparameter's value, as JSON of its type (0.1, 5, [1, 2]),\n" \
    "                     instead of the program's default; repeatable\n" \
    "  -I DIR             look for included files in DIR too, after the including\n" \
    "                     file's folder (then in FEDVM_PATH's folders, ':'-separated)\n"
/* What cli_load_opt gathered, for fvm_program_load_opts. */
const fvm_load_opts *cli_load_opts(void);

/* Loads (with cli_load_opts) and checks a program, reporting every error of both stages; *p is NULL on error. */
fvm_status cli_load_checked(const char *path, fvm_program **p, fvm_diag *d);
/* Prints a document as JSON (a message on stderr on failure). 0 or EXIT_INVALID. */
int cli_print_doc(const fvm_doc *doc, FILE *out);
/* Prints a value of type t as JSON. 0 or EXIT_INVALID. */
int cli_print_value(const fvm_value *v, const fvm_type *t, FILE *out);

/* fedvm run ... (tools/fedvm_run.c) */
extern const char *const fvm_usage_run;
int fvm_cmd_run(int argc, char **argv);

/* fedvm run --grid/--seeds (tools/fedvm_sweep.c): a sweep of training runs */
typedef struct cli_sweep_opts {
    const char *file; /* the program */
    const char *usage; /* for usage errors */
    const char *const *grids; /* ngrids "NAME=V1,V2,..." */
    int ngrids;
    const char *seeds; /* "A-B" or "A,B,...", or NULL: seed alone */
    long long seed;
    const char *out_dir;
    int threads; /* runs at once (0: one per core) */
    const fvm_session_opts *session; /* every run's options but seed and metrics */
} cli_sweep_opts;
int cli_sweep(const cli_sweep_opts *o);

/* fedvm data ... (tools/fedvm_data.c, dispatched from main) */
int fvm_cmd_data(int argc, char **argv);

/* fedvm device ... and fedvm server ... (tools/fedvm_xdev.c): the sides of a cross-device plan */
extern const char *const fvm_usage_device, *const fvm_usage_server;
int fvm_cmd_device(int argc, char **argv);
int fvm_cmd_server(int argc, char **argv);

/* fedvm privacy ... (tools/fedvm_privacy.c) */
extern const char *const fvm_usage_privacy;
int fvm_cmd_privacy(int argc, char **argv);

/* fedvm plot ... (tools/fedvm_plot.c) */
extern const char *const fvm_usage_plot;
int fvm_cmd_plot(int argc, char **argv);

#endif
