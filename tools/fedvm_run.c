/* fedvm_run.c - fedvm run: a function once, or a training session of an iterative process
 * (vm/runtime/session.h) with its rounds shown as JSON lines or a progress bar. */
#include <errno.h>
#include <sys/ioctl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../format/metrics.h"
#include "../vm/runtime/session.h"
#include "cli.h"

const char *const fvm_usage_run =
    "usage: fedvm run FILE [--fn NAME] [--arg NAME=VALUE|@FILE]... [--data NAME=FILE[:SPLIT]]...\n"
    "                 [--clients N] [--seed S] [--backend seq|threads|mpi] [--threads N]\n"
    "                 [--kernels cpu|portable]\n"
    "                 [--rounds R] [--clients-per-round K]\n"
    "                 [--client-ids ID,...|@FILE] [--eval-every E] [--metrics FILE.jsonl]\n"
    "                 [--checkpoint-dir D [--checkpoint-every N]] [--resume D] [--init FILE]\n"
    "                 [--max-steps N] [--time-limit S] [--set NAME=VALUE]... [-I DIR]...\n"
    "                 [--grid NAME=V1,V2,...]... [--seeds A-B|A,B,...] [--out-dir D]\n"
    "\n"
    "Checks FILE, then runs a function and prints its result as JSON on stdout; or,\n"
    "for an iterative process (initialize, next, optional evaluate) without main,\n"
    "runs training rounds.\n"
    "\n"
    "  --fn NAME          the function to run (default: main; without main, the rounds\n"
    "                     of initialize and next)\n"
    "  --arg NAME=VALUE   a parameter's value as JSON text, or @FILE (.json, .yaml);\n"
    "                     {T}@CLIENTS takes an array with one member per client\n"
    "  --data NAME=FILE[:SPLIT]\n"
    "                     a dataset split (FedJAX or TFF SQLite) for a parameter of type\n"
    "                     {T*}@CLIENTS (clients read as used) or T* (the split in memory);\n"
    "                     T's fields name the columns\n"
    "  --clients N        the number of clients when no client data is given\n"
    "  --seed S           the run's seed (default 0): a parameter 'key' (u32[2]) gets\n"
    "                     random_key(S), 'client_keys' ({u32[2]}@CLIENTS) one key per client\n"
    "  --backend NAME     where client work runs: threads, seq, or mpi (the ranks of\n"
    "                     'mpirun -np P fedvm run ...', clients split among them; rank 0\n"
    "                     alone prints and writes files); default: mpi under mpirun,\n"
    "                     else threads; results are bit-identical on every backend,\n"
    "                     thread count and rank count\n"
    "  --threads N        worker threads of the threads backend (default: one per core)\n"
    "  --kernels NAME     what computes the ops: cpu (default: vectorised loops and\n"
    "                     BLAS) or portable (plain loops, no SIMD, no BLAS: what a\n"
    "                     device without them runs; slower); the same bits but where\n"
    "                     the cpu kernels use BLAS (format/SPEC.md, reproducibility)\n" CLI_LOAD_HELP
    "  --max-steps N      stop with an error once N steps have run (instructions,\n"
    "                     counted as their functions are entered, on every thread and\n"
    "                     over every round; default: no bound)\n"
    "  --time-limit S     stop with an error once the run has taken S seconds of wall\n"
    "                     time (checked as functions are entered; default: no limit)\n"
    "\n"
    "training runs (next's parameters bound by name; see format/SPEC.md):\n"
    "  --rounds R         rounds to run (default 1)\n"
    "  --clients-per-round K\n"
    "                     clients sampled uniformly without replacement each round, from\n"
    "                     the seed and the round number (default: every client)\n"
    "  --client-ids LIST  the same clients every round: ids (or indices) separated by\n"
    "                     commas, or @FILE with one per line\n"
    "  --eval-every E     run evaluate after every E-th round (default: after the last\n"
    "                     round only); evaluate's data comes from --data/--arg too\n"
    "  --metrics FILE     append one JSON object per round to FILE (JSON lines)\n"
    "  --checkpoint-dir D save the server state as D/round-N.safetensors\n"
    "  --checkpoint-every N\n"
    "                     every N rounds (default 1) and after the last\n"
    "  --resume D         continue from the last checkpoint in D (same program, seed\n"
    "                     and clients per round), to --rounds; checkpoints go on in D\n"
    "  --init FILE        start from the weights in a safetensors file (tensors named\n"
    "                     by their path in the state, e.g. model.w1, or below one\n"
    "                     field of it, e.g. w1)\n"
    "\n"
    "sweeps (training runs of every combination of values and seeds, in one process):\n"
    "  --grid NAME=V1,V2,...\n"
    "                     values of a hyperparameter to run (JSON, split at commas outside\n"
    "                     brackets); repeatable: the runs are the product of the grids\n"
    "  --seeds A-B        each combination with each of these seeds (or A,B,...;\n"
    "                     default: --seed)\n"
    "  --out-dir D        where the runs' metrics (run-N.jsonl) and D/index.json go (a new\n"
    "                     or empty directory; default: sweep); --threads N runs at once\n"
    "                     (default one per core), each run bit-identical to the same run\n"
    "                     alone; 'fedvm plot D/index.json' draws the sweep\n"
    "\n"
    "Each round prints one JSON line {\"round\", \"train\", \"eval\"} on stdout; on a terminal\n"
    "a progress bar (round, training loss and accuracy, the latest evaluation's\n"
    "accuracy, rounds/s, ETA) replaces the lines.\n"
    "\n"
    "exit status: 0 success, 1 invalid program, data or failed run, 2 usage error\n";

#define MAX_ARGS 256

typedef struct run_opts {
    const char *file, *fn, *client_ids, *metrics, *checkpoint_dir, *resume, *init, *backend;
    const fvm_kernels *kernels;
    fvm_named_text args[MAX_ARGS];
    int nargs;
    const char *grids[MAX_ARGS], *seeds, *out_dir;
    int ngrids;
    long long clients, seed, rounds, per_round, eval_every, checkpoint_every, threads, max_steps;
    double time_limit;
} run_opts;

static int parse_opts(int argc, char **argv, run_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *v;
        long long n;
        fvm_arg_kind kind = FVM_ARG_JSON;
        int rc;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(fvm_usage_run, stdout);
            return -1;
        } else if (cli_load_opt(argc, argv, &i, fvm_usage_run, &rc)) {
            if (rc)
                return rc;
        } else if ((v = cli_opt(argc, argv, &i, "--fn"))) {
            o->fn = v;
        } else if ((v = cli_opt(argc, argv, &i, "--arg")) ||
                   ((v = cli_opt(argc, argv, &i, "--data")) && (kind = FVM_ARG_DATA))) {
            const char *eq = strchr(v, '=');
            const char *opt = kind == FVM_ARG_DATA ? "--data" : "--arg";
            if (!eq || eq == v)
                return cli_usage_error(fvm_usage_run,
                                       kind == FVM_ARG_DATA ? "--data needs NAME=FILE[:SPLIT], found '%s'"
                                                            : "--arg needs NAME=VALUE, found '%s'",
                                       v);
            if (o->nargs == MAX_ARGS)
                return cli_usage_error(fvm_usage_run, "at most 256 %s and --data options", opt);
            char *name = strndup(v, (size_t)(eq - v));
            if (!name)
                return EXIT_INVALID;
            o->args[o->nargs++] = (fvm_named_text){name, eq + 1, kind};
        } else if ((v = cli_opt(argc, argv, &i, "--clients-per-round"))) {
            if (!cli_int(v, 1, FVM_MAX_CLIENTS, &n))
                return cli_usage_error(fvm_usage_run, "--clients-per-round needs a number >= 1, found '%s'", v);
            o->per_round = n;
        } else if ((v = cli_opt(argc, argv, &i, "--client-ids"))) {
            o->client_ids = v;
        } else if ((v = cli_opt(argc, argv, &i, "--clients"))) {
            if (!cli_int(v, 0, FVM_MAX_CLIENTS, &n))
                return cli_usage_error(fvm_usage_run, "--clients needs a number of clients, found '%s'", v);
            o->clients = n;
        } else if ((v = cli_opt(argc, argv, &i, "--seed"))) {
            if (!cli_int(v, LLONG_MIN, LLONG_MAX, &n))
                return cli_usage_error(fvm_usage_run, "--seed needs an integer, found '%s'", v);
            o->seed = n;
        } else if ((v = cli_opt(argc, argv, &i, "--rounds"))) {
            if (!cli_int(v, 0, 1000000000, &n))
                return cli_usage_error(fvm_usage_run, "--rounds needs a number >= 0, found '%s'", v);
            o->rounds = n;
        } else if ((v = cli_opt(argc, argv, &i, "--eval-every"))) {
            if (!cli_int(v, 1, 1000000000, &n))
                return cli_usage_error(fvm_usage_run, "--eval-every needs a number >= 1, found '%s'", v);
            o->eval_every = n;
        } else if ((v = cli_opt(argc, argv, &i, "--backend"))) {
            if (strcmp(v, "seq") && strcmp(v, "threads") && strcmp(v, "mpi"))
                return cli_usage_error(fvm_usage_run, "--backend is seq, threads or mpi, found '%s'", v);
            o->backend = v;
        } else if ((v = cli_opt(argc, argv, &i, "--kernels"))) {
            if (!(o->kernels = fvm_kernels_lookup(v)))
                return cli_usage_error(fvm_usage_run, "--kernels is cpu or portable, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--threads"))) {
            if (!cli_int(v, 1, 1024, &n))
                return cli_usage_error(fvm_usage_run, "--threads needs a number from 1 to 1024, found '%s'", v);
            o->threads = n;
        } else if ((v = cli_opt(argc, argv, &i, "--max-steps"))) {
            if (!cli_int(v, 1, LLONG_MAX, &n))
                return cli_usage_error(fvm_usage_run, "--max-steps needs a number >= 1, found '%s'", v);
            o->max_steps = n;
        } else if ((v = cli_opt(argc, argv, &i, "--time-limit"))) {
            char *end;
            errno = 0;
            o->time_limit = strtod(v, &end);
            if (!*v || *end || errno || !(o->time_limit > 0) || o->time_limit > 1e9)
                return cli_usage_error(fvm_usage_run, "--time-limit needs a number of seconds > 0, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--checkpoint-dir"))) {
            if (!*v)
                return cli_usage_error(fvm_usage_run, "%s", "--checkpoint-dir needs a directory");
            o->checkpoint_dir = v;
        } else if ((v = cli_opt(argc, argv, &i, "--checkpoint-every"))) {
            if (!cli_int(v, 1, 1000000000, &n))
                return cli_usage_error(fvm_usage_run, "--checkpoint-every needs a number >= 1, found '%s'", v);
            o->checkpoint_every = n;
        } else if ((v = cli_opt(argc, argv, &i, "--resume"))) {
            if (!*v)
                return cli_usage_error(fvm_usage_run, "%s", "--resume needs a checkpoint directory");
            o->resume = v;
        } else if ((v = cli_opt(argc, argv, &i, "--init"))) {
            if (!*v)
                return cli_usage_error(fvm_usage_run, "%s", "--init needs a safetensors FILE");
            o->init = v;
        } else if ((v = cli_opt(argc, argv, &i, "--grid"))) {
            if (o->ngrids == MAX_ARGS)
                return cli_usage_error(fvm_usage_run, "at most %s --grid options", "256");
            o->grids[o->ngrids++] = v;
        } else if ((v = cli_opt(argc, argv, &i, "--seeds"))) {
            o->seeds = v;
        } else if ((v = cli_opt(argc, argv, &i, "--out-dir"))) {
            if (!*v)
                return cli_usage_error(fvm_usage_run, "%s", "--out-dir needs a directory");
            o->out_dir = v;
        } else if ((v = cli_opt(argc, argv, &i, "--metrics"))) {
            if (!*v)
                return cli_usage_error(fvm_usage_run, "%s", "--metrics needs a FILE");
            o->metrics = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(fvm_usage_run, argv[i]);
        } else if (o->file) {
            return cli_usage_error(fvm_usage_run, "one program at a time; unexpected '%s'", argv[i]);
        } else {
            o->file = argv[i];
        }
    }
    if (!o->file)
        return cli_usage_error(fvm_usage_run, "%s", "run needs a program FILE");
    if (o->threads && o->backend && strcmp(o->backend, "threads"))
        return cli_usage_error(fvm_usage_run, "%s", "--threads is for --backend threads");
    if (o->resume && o->init)
        return cli_usage_error(fvm_usage_run, "%s", "--resume continues a run; --init starts one: give one of them");
    if (o->checkpoint_every && !o->checkpoint_dir && !o->resume)
        return cli_usage_error(fvm_usage_run, "%s", "--checkpoint-every needs --checkpoint-dir (or --resume)");
    bool sweep = o->ngrids || o->seeds;
    if (o->out_dir && !sweep)
        return cli_usage_error(fvm_usage_run, "%s", "--out-dir is for sweeps (--grid or --seeds)");
    if (sweep && (o->metrics || o->checkpoint_dir || o->resume || o->init))
        return cli_usage_error(fvm_usage_run, "%s",
                               "a sweep writes one metrics file per run into --out-dir; --metrics, "
                               "--checkpoint-dir, --resume and --init are for single runs");
    if (sweep && o->backend && strcmp(o->backend, "threads"))
        return cli_usage_error(fvm_usage_run, "%s", "a sweep runs on this machine's threads (--threads N)");
    return 0;
}

/* ---- one function ------------------------------------------------------------- */

/* The result is printed by rank 0 of a distributed backend (b) alone. */
static int run_once(fvm_vm *vm, fvm_backend *b, const fvm_func *f, const run_opts *o, fvm_diag *d)
{
    int64_t nclients = o->clients;
    fvm_value **vals = NULL, *res = NULL;
    int rc = EXIT_INVALID;
    /* binding reads files: every rank must have them */
    if (fvm_backend_agree(b, fvm_bind_args(f, o->nargs, o->args, (uint64_t)o->seed, &nclients, &vals, d), d) ==
            FVM_OK &&
        (nclients < 0 || fvm_vm_set_clients(vm, nclients, d) == FVM_OK) && fvm_vm_call(vm, f, vals, &res, d) == FVM_OK)
        rc = b->rank ? 0 : cli_print_value(res, f->result_type, stdout);
    fvm_value_release(res);
    fvm_values_free(vals, f->nparams);
    return rc;
}

/* ---- training runs ------------------------------------------------------------- */

/* What the progress callback shows a session by. */
typedef struct show {
    const run_opts *o;
    const fvm_session *session;
    bool bar; /* a progress bar on stdout (a terminal) instead of JSON lines */
    double start; /* wall clock at the start */
} show;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The terminal's width in columns (stdout's, else $COLUMNS, else 80). */
static int term_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    long long n;
    return c && cli_int(c, 1, 10000, &n) ? (int)n : 80;
}

/* One line, never wider than the terminal (a wrapped line would leave a stale
 * copy at every update): the round, a bar, this round's training loss and
 * accuracy, the latest evaluation's accuracy, rounds/s and the time left.
 * Parts that don't fit are left out, the least important first (rounds/s,
 * then the training accuracy, the bar, the time left, the evaluation). */
static void draw_bar(const show *sh, const fvm_session_event *e)
{
    double elapsed = now() - sh->start;
    double done = (double)(e->round - e->first + 1), left = (double)(e->last - e->round);
    double rate = elapsed > 0 ? done / elapsed : 0;
    long eta = rate > 0 ? (long)(left / rate + 0.5) : -1;
    enum { NPARTS = 5 };
    char parts[NPARTS][48] = {{0}}; /* in the order shown */
    static const int priority[NPARTS] = {0, 3, 1, 4, 2}; /* 0: kept longest */
    double train_loss = fvm_session_metric(sh->session, "train.loss");
    double train_accuracy = fvm_session_metric(sh->session, "train.accuracy");
    double accuracy = fvm_session_metric(sh->session, "eval.accuracy"); /* the latest evaluation's */
    if (!isnan(train_loss))
        snprintf(parts[0], sizeof parts[0], " loss %.4f", train_loss);
    if (!isnan(train_accuracy))
        snprintf(parts[1], sizeof parts[1], " acc %.4f", train_accuracy);
    if (!isnan(accuracy))
        snprintf(parts[2], sizeof parts[2], " eval acc %.4f", accuracy);
    if (rate > 0)
        snprintf(parts[3], sizeof parts[3], " %.2f rounds/s", rate);
    if (eta >= 0)
        snprintf(parts[4], sizeof parts[4], " ETA %ld:%02ld", eta / 60, eta % 60);
    int width = term_width() - 1;
    char head[64];
    snprintf(head, sizeof head, "round %lld/%lld", (long long)e->round, (long long)e->last);
    enum { BAR_MIN = 10, BAR_MAX = 30, BAR_PRIORITY = 2 }; /* the bar goes after the training accuracy */
    bool with_bar = true;
    int used = (int)strlen(head) + BAR_MIN + 3; /* " [" bar "]" */
    for (int k = 0; k < NPARTS; k++)
        used += (int)strlen(parts[k]);
    for (int drop = NPARTS - 1; drop >= 0 && used > width; drop--) {
        for (int k = 0; k < NPARTS; k++)
            if (priority[k] == drop) {
                used -= (int)strlen(parts[k]);
                parts[k][0] = 0;
            }
        if (drop == BAR_PRIORITY + 1 && used > width) {
            with_bar = false;
            used -= BAR_MIN + 3;
        }
    }
    int bw = width - used + BAR_MIN;
    bw = bw > BAR_MAX ? BAR_MAX : bw;
    printf("\r%.*s", width, head);
    if (with_bar && bw >= BAR_MIN) {
        int filled = e->last > 0 ? (int)(bw * e->round / e->last) : bw;
        printf(" [");
        for (int i = 0; i < bw; i++)
            putchar(i < filled ? '#' : '.');
        printf("]");
    }
    for (int k = 0; k < NPARTS; k++)
        printf("%s", parts[k]);
    printf("\033[K");
    if (e->round == e->last)
        printf("\n");
    fflush(stdout);
}

/* The session's progress (process 0 alone): notes on stderr, and each
 * round's line {"round", "train", "eval"} (or the bar) on stdout. */
static fvm_status progress(void *user, const fvm_session_event *e, fvm_diag *d)
{
    const show *sh = user;
    if (e->kind == FVM_SESSION_RESUMED) {
        fprintf(stderr, "fedvm: resuming after round %lld from %s\n", (long long)e->round, sh->o->resume);
    } else if (e->kind == FVM_SESSION_INIT) {
        fprintf(stderr, "fedvm: %d tensors of the initial state from %s\n", e->replaced, sh->o->init);
    } else if (sh->bar) {
        draw_bar(sh, e);
    } else {
        fvm_metrics_round shown = *e->figures;
        shown.fields &= FVM_METRICS_PRIVACY; /* the metrics file's line has the times and clients too */
        char *line = NULL;
        size_t len = 0;
        fvm_status s = fvm_metrics_line(&shown, &line, &len, d);
        if (s)
            return s;
        fwrite(line, 1, len, stdout); /* a failed write is reported when the command ends (cli_finish) */
        free(line);
        fflush(stdout);
    }
    return FVM_OK;
}

/* The session options of o (the backend, progress and its user are the caller's). */
static fvm_session_opts session_opts(const run_opts *o)
{
    return (fvm_session_opts){
        .program = o->file,
        .args = o->args,
        .nargs = o->nargs,
        .has_clients = o->clients >= 0,
        .clients = o->clients,
        .seed = (uint64_t)o->seed,
        .rounds = o->rounds,
        .clients_per_round = o->per_round,
        .client_ids = o->client_ids,
        .eval_every = o->eval_every,
        .metrics = o->metrics,
        .checkpoint_dir = o->checkpoint_dir,
        .checkpoint_every = o->checkpoint_every,
        .resume = o->resume,
        .init = o->init,
        .kernels = o->kernels,
        .max_steps = o->max_steps,
        .time_limit = o->time_limit,
    };
}

/* A training run. With a distributed backend every rank runs it; rank 0
 * alone prints and writes files. */
static int run_training(fvm_backend *b, const fvm_program *p, const run_opts *o, fvm_diag *d)
{
    bool quiet = b->rank != 0;
    /* no progress bar under mpirun: it gives each rank a terminal as stdout,
     * whatever its own stdout is */
    show sh = {.o = o, .bar = !quiet && isatty(1) && strcmp(b->iface->name, "mpi"), .start = now()};
    fvm_session_opts so = session_opts(o);
    so.backend = b;
    so.progress = progress;
    so.user = &sh;
    fvm_session *s = NULL;
    fvm_status st = fvm_session_new(p, &so, &s, d);
    if (st)
        return st == FVM_ERR_USAGE ? EXIT_USAGE : EXIT_INVALID;
    sh.session = s;
    int rc = EXIT_INVALID;
    if (fvm_session_run(s, d) == FVM_OK) {
        rc = 0;
        if (!quiet) {
            double secs = now() - sh.start;
            int64_t first = fvm_session_first(s);
            long long ran = o->rounds >= first ? o->rounds - first + 1 : 0;
            double accuracy = fvm_session_metric(s, "eval.accuracy"), loss = fvm_session_metric(s, "eval.loss");
            fprintf(stderr, "fedvm: %lld round%s in %.1f s", ran, ran == 1 ? "" : "s", secs);
            if (!isnan(accuracy))
                fprintf(stderr, "; final evaluation: accuracy %.4f", accuracy);
            if (!isnan(loss))
                fprintf(stderr, "%s loss %.4f", isnan(accuracy) ? "; final evaluation:" : ",", loss);
            fprintf(stderr, "\n");
        }
    } else if (fvm_session_round(s) >= 0 && !fvm_session_done(s)) /* failed in a round */
        fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "round %lld of %lld did not finish", (long long)fvm_session_round(s) + 1,
                     (long long)o->rounds);
    fvm_session_free(s);
    return rc;
}

int fvm_cmd_run(int argc, char **argv)
{
    run_opts o = {.clients = -1, .rounds = 1};
    int rc = parse_opts(argc, argv, &o);
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_vm *vm = NULL;
    fvm_backend *backend = NULL;
    if (rc) {
        rc = rc < 0 ? 0 : rc;
        goto done;
    }
    rc = EXIT_INVALID;
    if (o.ngrids || o.seeds) { /* a sweep: every run loads the program with its own values */
        fvm_session_opts so = session_opts(&o);
        cli_sweep_opts sw = {.file = o.file,
                             .usage = fvm_usage_run,
                             .grids = o.grids,
                             .ngrids = o.ngrids,
                             .seeds = o.seeds,
                             .seed = o.seed,
                             .out_dir = o.out_dir ? o.out_dir : "sweep",
                             .threads = (int)o.threads,
                             .session = &so};
        rc = cli_sweep(&sw);
        goto done;
    }
    /* under mpirun (Open MPI tells its ranks their number), the ranks share
     * the work unless told otherwise */
    if (!o.backend && getenv("OMPI_COMM_WORLD_SIZE") && !o.threads)
        o.backend = "mpi";
    if (o.backend && !strcmp(o.backend, "mpi")) {
        if (fvm_backend_mpi(&backend, &d))
            goto done;
    } else {
        backend = o.backend && !strcmp(o.backend, "seq") ? fvm_backend_seq() : fvm_backend_threads((int)o.threads);
        if (!backend) {
            fprintf(stderr, "fedvm: out of memory\n");
            goto done;
        }
    }
    bool quiet = backend->rank != 0; /* rank 0 of mpi prints for all */
    if (fvm_backend_agree(backend, cli_load_checked(o.file, &p, &d), &d))
        goto done;
    const fvm_func *f = fvm_program_func(p, o.fn ? o.fn : "main");
    if (!f && !o.fn && fvm_program_func(p, "next")) {
        rc = run_training(backend, p, &o, &d);
        goto done;
    }
    if (!f) {
        if (!quiet) {
            fprintf(stderr, "fedvm: %s has no function '%s'; functions:", o.file, o.fn ? o.fn : "main");
            for (int i = 0; i < p->nfuncs; i++)
                fprintf(stderr, " %s", p->funcs[i]->name);
            fprintf(stderr, "\n");
        }
        goto done;
    }
    bool training_opts =
        o.per_round || o.client_ids || o.eval_every || o.metrics || o.checkpoint_dir || o.resume || o.init;
    if (training_opts) {
        if (!quiet)
            fprintf(stderr, "fedvm: --clients-per-round, --client-ids, --eval-every, --metrics, --checkpoint-dir, "
                            "--resume and --init are for training runs (a program with initialize and next, "
                            "without main or --fn)\n");
        rc = EXIT_USAGE;
        goto done;
    }
    fvm_vm_config cfg = {
        .nclients = -1, .backend = backend, .kernels = o.kernels, .max_steps = o.max_steps, .time_limit = o.time_limit};
    if (fvm_vm_new(p, &cfg, &vm, &d))
        goto done;
    rc = run_once(vm, backend, f, &o, &d);
done:
    if (!backend || !backend->rank)
        cli_print_errors(&d);
    fvm_diag_clear(&d);
    fvm_vm_free(vm);
    fvm_backend_free(backend);
    fvm_program_free(p);
    for (int i = 0; i < o.nargs; i++)
        free((char *)o.args[i].name);
    return rc;
}
