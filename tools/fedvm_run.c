/* fedvm_run.c - fedvm run: a function once, or a training run of an iterative process
 * (rounds over sampled clients, evaluation, progress, metrics, checkpoints). */
#include <errno.h>
#include <sys/ioctl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../format/atomic.h"
#include "../format/doc_io.h"
#include "../format/checkpoint.h"
#include "../format/file.h"
#include "../format/data_bind.h"
#include "../format/safetensors.h"
#include "../format/dataset.h"
#include "../vm/runtime/rounds.h"
#include "cli.h"

const char *const fvm_usage_run =
    "usage: fedvm run FILE [--fn NAME] [--arg NAME=VALUE|@FILE]... [--data NAME=FILE[:SPLIT]]...\n"
    "                 [--clients N] [--seed S] [--backend seq|threads|mpi] [--threads N]\n"
    "                 [--kernels cpu|portable]\n"
    "                 [--rounds R] [--clients-per-round K]\n"
    "                 [--client-ids ID,...|@FILE] [--eval-every E] [--metrics FILE.jsonl]\n"
    "                 [--checkpoint-dir D [--checkpoint-every N]] [--resume D] [--init FILE]\n"
    "                 [--max-steps N] [--time-limit S]\n"
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
    "                     the cpu kernels use BLAS (format/SPEC.md, reproducibility)\n"
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
    long long clients, seed, rounds, per_round, eval_every, checkpoint_every, threads, max_steps;
    double time_limit;
} run_opts;

static int parse_opts(int argc, char **argv, run_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *v;
        long long n;
        fvm_arg_kind kind = FVM_ARG_JSON;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(fvm_usage_run, stdout);
            return -1;
        } else if ((v = cli_opt(argc, argv, &i, "--fn"))) {
            o->fn = v;
        } else if ((v = cli_opt(argc, argv, &i, "--arg")) || ((v = cli_opt(argc, argv, &i, "--data")) &&
                                                               (kind = FVM_ARG_DATA))) {
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
    if (o->resume && !o->checkpoint_dir)
        o->checkpoint_dir = o->resume;
    if (!o->checkpoint_every)
        o->checkpoint_every = 1;
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
        (nclients < 0 || fvm_vm_set_clients(vm, nclients, d) == FVM_OK) &&
        fvm_vm_call(vm, f, vals, &res, d) == FVM_OK)
        rc = b->rank ? 0 : cli_print_value(res, f->result_type, stdout);
    fvm_value_release(res);
    fvm_values_free(vals, f->nparams);
    return rc;
}

/* ---- training runs ------------------------------------------------------------- */

/* What the per-round report needs. */
typedef struct train {
    const run_opts *o;
    fvm_backend *backend;   /* only its rank 0 prints and writes files */
    FILE *metrics;          /* --metrics, or NULL */
    bool bar;               /* a progress bar on stdout (a terminal) instead of JSON lines */
    bool sampled;           /* clients are sampled (the metrics file lists them) */
    double start;           /* wall clock at the first round */
    int64_t first;          /* the first round of this process */
    double loss, accuracy;  /* the latest evaluation's (NAN: none yet) */
    double train_loss, train_accuracy; /* the latest round's training metrics (NAN: none) */
    bool have_eval;
    const fvm_type *state_type;
    fvm_run_info info;      /* what checkpoints record */
} train;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A scalar field 'name' of a struct of metrics (placed or not), or NAN. */
static double metric(const fvm_value *v, const fvm_type *t, const char *name)
{
    if (!v || !t)
        return NAN;
    if (t->kind == FVM_T_FED)
        t = t->u.fed.member;
    if (t->kind != FVM_T_STRUCT || v->kind != FVM_V_STRUCT)
        return NAN;
    int i = fvm_type_field_index(t, name);
    if (i < 0 || v->items[i]->kind != FVM_V_TENSOR || fvm_tensor_count(&v->items[i]->t) != 1)
        return NAN;
    return fvm_tensor_get_f64(&v->items[i]->t, 0);
}

/* The round's record: {"round", "train", "eval"?, and for the metrics file
 * "seconds", "eval_seconds"?, "cpu_seconds", "clients", "sampled"?}. */
static fvm_doc *record(fvm_arena *a, const fvm_round_report *r, bool full, bool sampled)
{
    fvm_doc *doc = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!doc || fvm_doc_set(a, doc, "round", fvm_doc_int(a, r->round)) ||
        fvm_doc_set(a, doc, "train", fvm_value_to_doc(a, r->metrics, r->metrics_type)))
        return NULL;
    if (r->eval && fvm_doc_set(a, doc, "eval", fvm_value_to_doc(a, r->eval, r->eval_type)))
        return NULL;
    if (full) {
        if (fvm_doc_set(a, doc, "seconds", fvm_doc_real(a, round(r->seconds * 1e6) / 1e6)) ||
            (r->eval && fvm_doc_set(a, doc, "eval_seconds", fvm_doc_real(a, round(r->eval_seconds * 1e6) / 1e6))) ||
            fvm_doc_set(a, doc, "cpu_seconds", fvm_doc_real(a, round(r->cpu_seconds * 1e6) / 1e6)) ||
            fvm_doc_set(a, doc, "clients", fvm_doc_int(a, r->nclients)))
            return NULL;
        if (sampled) {
            fvm_doc *ids = fvm_doc_new(a, FVM_DOC_ARRAY);
            if (!ids || fvm_doc_set(a, doc, "sampled", ids))
                return NULL;
            ids->flow = true;
            for (int64_t j = 0; j < r->nclients; j++)
                if (fvm_doc_push(a, ids, fvm_doc_int(a, r->clients[j])))
                    return NULL;
        }
    }
    doc->flow = true;
    return doc;
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
static void draw_bar(train *t, const fvm_round_report *r)
{
    double elapsed = now() - t->start;
    double done = (double)(r->round - t->first + 1), left = (double)(r->last - r->round);
    double rate = elapsed > 0 ? done / elapsed : 0;
    long eta = rate > 0 ? (long)(left / rate + 0.5) : -1;
    enum { NPARTS = 5 };
    char parts[NPARTS][48] = {{0}}; /* in the order shown */
    static const int priority[NPARTS] = {0, 3, 1, 4, 2}; /* 0: kept longest */
    if (!isnan(t->train_loss))
        snprintf(parts[0], sizeof parts[0], " loss %.4f", t->train_loss);
    if (!isnan(t->train_accuracy))
        snprintf(parts[1], sizeof parts[1], " acc %.4f", t->train_accuracy);
    if (t->have_eval && !isnan(t->accuracy))
        snprintf(parts[2], sizeof parts[2], " eval acc %.4f", t->accuracy);
    if (rate > 0)
        snprintf(parts[3], sizeof parts[3], " %.2f rounds/s", rate);
    if (eta >= 0)
        snprintf(parts[4], sizeof parts[4], " ETA %ld:%02ld", eta / 60, eta % 60);
    int width = term_width() - 1;
    char head[64];
    snprintf(head, sizeof head, "round %lld/%lld", (long long)r->round, (long long)r->last);
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
        int filled = r->last > 0 ? (int)(bw * r->round / r->last) : bw;
        printf(" [");
        for (int i = 0; i < bw; i++)
            putchar(i < filled ? '#' : '.');
        printf("]");
    }
    for (int k = 0; k < NPARTS; k++)
        printf("%s", parts[k]);
    printf("\033[K");
    if (r->round == r->last)
        printf("\n");
    fflush(stdout);
}

static fvm_status report_round(void *user, const fvm_round_report *r, fvm_diag *d)
{
    train *t = user;
    if (t->backend->rank) /* rank 0 writes; every rank learns whether it could */
        return fvm_backend_agree(t->backend, FVM_OK, d);
    /* Shown: this round's training figures and the latest evaluation. */
    t->train_loss = metric(r->metrics, r->metrics_type, "loss");
    t->train_accuracy = metric(r->metrics, r->metrics_type, "accuracy");
    if (r->eval) {
        t->loss = metric(r->eval, r->eval_type, "loss");
        t->accuracy = metric(r->eval, r->eval_type, "accuracy");
    }
    t->have_eval = t->have_eval || r->eval;
    fvm_arena a = {0};
    fvm_status s = FVM_OK;
    bool checkpoint = t->o->checkpoint_dir && (r->round % t->o->checkpoint_every == 0 || r->round == r->last);
    if (t->bar) {
        draw_bar(t, r);
    } else {
        fvm_doc *line = record(&a, r, false, false);
        if (!line || cli_print_doc(line, stdout))
            s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot print round %lld", (long long)r->round);
        fflush(stdout);
    }
    if (s == FVM_OK && t->metrics) {
        fvm_doc *rec = record(&a, r, true, t->sampled);
        char *text = NULL;
        size_t len = 0;
        if (!rec || fvm_json_write(rec, &text, &len, d) || fwrite(text, 1, len, t->metrics) != len ||
            fflush(t->metrics) != 0 || (checkpoint && fsync(fileno(t->metrics)) != 0))
            s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", t->o->metrics,
                             strerror(errno));
        free(text);
    }
    /* The checkpoint after the round's metrics line (synced first): a run
     * stopped between the two resumes from the previous checkpoint and drops
     * the later line (keep_rounds), so every round keeps exactly one line. */
    if (s == FVM_OK && checkpoint)
        s = fvm_checkpoint_save(t->o->checkpoint_dir, r->round, r->state, t->state_type, &t->info, d);
    fvm_arena_free(&a);
    return fvm_backend_agree(t->backend, s, d);
}

/* The clients of --client-ids: ids of the dataset bound to next's client
 * data (else indices), increasing and distinct. *out malloc'd. */
static fvm_status fixed_clients(const run_opts *o, const char *data_spec, int64_t population, int64_t **out,
                                int64_t *k, fvm_diag *d)
{
    char *text = NULL;
    size_t len;
    if (o->client_ids[0] == '@') {
        fvm_status s = fvm_read_file(o->client_ids + 1, &text, &len, d);
        if (s)
            return s;
    } else if (!(text = strdup(o->client_ids))) {
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    fvm_dataset *ds = NULL;
    char *file = NULL, *split = NULL;
    fvm_status s = FVM_OK;
    if (data_spec && !(s = fvm_data_spec(data_spec, &file, &split, d)))
        s = fvm_dataset_open(file, split, &ds, d);
    int64_t n = 0, cap = 16;
    int64_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids && !s)
        s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (char *tok = strtok(s ? NULL : text, ",\n\r"); tok && !s; tok = strtok(NULL, ",\n\r")) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t tl = strlen(tok);
        while (tl && (tok[tl - 1] == ' ' || tok[tl - 1] == '\t'))
            tok[--tl] = 0;
        if (!tl)
            continue;
        long long idx = -1;
        if (ds)
            idx = fvm_dataset_find(ds, tok, tl);
        else if (!cli_int(tok, 0, population - 1, &idx))
            idx = -1;
        if (idx < 0) {
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--client-ids: no client '%s' in %s", tok,
                             ds ? file : "the data (give indices 0..N-1)");
            break;
        }
        if (n == cap) {
            int64_t *p = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!p) {
                s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
                break;
            }
            ids = p;
        }
        ids[n++] = idx;
    }
    /* increasing, distinct */
    for (int64_t i = 1; i < n && !s; i++)
        for (int64_t j = i; j > 0 && ids[j - 1] >= ids[j]; j--) {
            if (ids[j - 1] == ids[j]) {
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--client-ids: client index %lld is given twice",
                                 (long long)ids[j]);
                break;
            }
            int64_t tmp = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = tmp;
        }
    if (!s && n == 0)
        s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--client-ids lists no client");
    fvm_dataset_close(ds);
    free(file);
    free(split);
    free(text);
    if (s) {
        free(ids);
        return s;
    }
    *out = ids;
    *k = n;
    return FVM_OK;
}

/* Drops the lines of a metrics file after round 'last' (a resumed run
 * writes those rounds again) and an incomplete last line; rewrites the file
 * atomically. */
static fvm_status keep_rounds(const char *path, int64_t last, fvm_diag *d)
{
    char *text = NULL;
    size_t len = 0;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return FVM_OK;
    /* a regular file (it is rewritten), read without blocking: a FIFO is refused */
    fvm_status s = fvm_file_read(path, "the metrics file of a resumed run", UINT64_C(1) << 30, &text, &len, d);
    if (s)
        return s;
    size_t keep = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        if (!nl) /* an incomplete last line: the run was stopped while writing it */
            break;
        size_t end = (size_t)(nl - text) + 1;
        long long r = -1;
        if (sscanf(text + at, "{\"round\": %lld", &r) == 1 && r > last)
            break;
        keep = end;
        at = end;
    }
    if (keep < len)
        s = fvm_atomic_write(path, text, keep, d);
    free(text);
    return s;
}

/* Is every parameter of f after the state given (or a key)? Sets *any when
 * some argument names one of them. */
static bool all_given(const fvm_func *f, const run_opts *o, bool *any)
{
    bool all = true;
    *any = false;
    for (int i = 1; i < f->nparams; i++) {
        bool given = false;
        for (int k = 0; k < o->nargs; k++)
            given = given || !strcmp(o->args[k].name, f->param_names[i]);
        bool key = (!strcmp(f->param_names[i], "key") && fvm_bind_is_key(f->param_types[i])) ||
                   (!strcmp(f->param_names[i], "client_keys") && fvm_bind_is_client_keys(f->param_types[i]));
        *any = *any || given;
        all = all && (given || key);
    }
    return all;
}

/* What a training run starts from (owned; run_training frees it). */
typedef struct setup {
    fvm_value **next_args, **eval_args, *state;
    int64_t *fixed, nfixed, population, eval_clients, per_round;
} setup;

/* Everything a training run reads before its first round: next's and
 * evaluate's data, the fixed clients, the state to resume from (into su,
 * and t's checkpoint record and first round). */
static fvm_status read_inputs(const fvm_func *init, const fvm_func *next, const fvm_func *eval, const run_opts *o,
                              setup *su, train *t, fvm_diag *d)
{
    bool used[MAX_ARGS] = {0};
    fvm_bind_opts bo = {.first = 1, .seed = (uint64_t)o->seed, .leave_keys = true, .used = used};
    fvm_status s = fvm_bind_params(next, o->nargs, o->args, &bo, &su->population, &su->next_args, d);
    if (s)
        return s;
    if (eval) {
        fvm_bind_opts be = {.first = 1, .seed = (uint64_t)o->seed, .used = used};
        if ((s = fvm_bind_params(eval, o->nargs, o->args, &be, &su->eval_clients, &su->eval_args, d)))
            return s;
    }
    for (int k = 0; k < o->nargs; k++)
        if (!used[k])
            return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "neither next nor evaluate has a parameter '%s'",
                                o->args[k].name);
    if (su->population < 0 && (o->per_round || o->client_ids))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "the number of clients is not known: bind client data "
                                                    "(--data/--arg) or give --clients N");
    if (o->client_ids) {
        /* ids of the dataset bound to next's first client-data parameter */
        const char *spec = NULL;
        for (int k = 0; k < o->nargs && !spec; k++)
            for (int i = 1; i < next->nparams && !spec; i++)
                if (o->args[k].kind == FVM_ARG_DATA && !strcmp(o->args[k].name, next->param_names[i]))
                    spec = o->args[k].text;
        if ((s = fixed_clients(o, spec, su->population, &su->fixed, &su->nfixed, d)))
            return s;
    }
    su->per_round = su->fixed ? su->nfixed : o->per_round ? o->per_round : su->population;
    if (su->per_round > su->population)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "--clients-per-round %lld: the data has %lld clients",
                            (long long)su->per_round, (long long)su->population);
    const char *base = strrchr(o->file, '/');
    t->info = (fvm_run_info){(uint64_t)o->seed, su->population < 0 ? -1 : su->per_round, base ? base + 1 : o->file};
    if (o->resume) {
        int64_t done_rounds = 0;
        if ((s = fvm_checkpoint_last(o->resume, init->result_type, &t->info, &done_rounds, &su->state, d)))
            return s;
        t->first = done_rounds + 1;
    }
    return FVM_OK;
}

/* The start of the run after the inputs: the initial state (initialize, or
 * the resumed one, and --init's weights), the metrics file (rank 0). */
static fvm_status start(fvm_vm *vm, const fvm_func *init, const run_opts *o, setup *su, train *t, fvm_diag *d)
{
    bool quiet = t->backend->rank != 0;
    fvm_status s = FVM_OK;
    if (o->resume) {
        if (!quiet && o->metrics && (s = keep_rounds(o->metrics, t->first - 1, d)))
            return s;
        if (!quiet)
            fprintf(stderr, "fedvm: resuming after round %lld from %s\n", (long long)(t->first - 1), o->resume);
    } else {
        if ((s = fvm_rounds_initialize(vm, init, (uint64_t)o->seed, &su->state, d)))
            return s;
    }
    if (o->init) {
        int replaced = 0;
        if (o->checkpoint_dir &&
            (s = fvm_checkpoint_not_input(o->checkpoint_dir, t->first, o->rounds, o->init, "--init FILE", d)))
            return s;
        if ((s = fvm_safetensors_overlay_file(o->init, init->result_type, &su->state, &replaced, d)))
            return s;
        if (!quiet)
            fprintf(stderr, "fedvm: %d tensors of the initial state from %s\n", replaced, o->init);
    }
    if (!quiet && o->metrics && !(t->metrics = fopen(o->metrics, "a")))
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot open the metrics file %s: %s", o->metrics, strerror(errno));
    return FVM_OK;
}

/* A training run. With a distributed backend every rank runs it; rank 0
 * alone prints and writes files, and the steps that read or write files
 * end with every rank agreeing whether they failed. */
static int run_training(fvm_vm *vm, fvm_backend *b, const fvm_program *p, const run_opts *o, fvm_diag *d)
{
    const fvm_func *init = fvm_program_func(p, "initialize"), *next = fvm_program_func(p, "next");
    const fvm_func *eval = fvm_program_func(p, "evaluate");
    bool any_eval = false, quiet = b->rank != 0;
    if (eval && !all_given(eval, o, &any_eval)) {
        if (any_eval || o->eval_every) {
            if (!quiet) {
                fprintf(stderr, "fedvm: evaluate needs every one of its parameters after the state; give");
                for (int i = 1; i < eval->nparams; i++)
                    fprintf(stderr, " --data/--arg %s=...", eval->param_names[i]);
                fprintf(stderr, "\n");
            }
            return EXIT_USAGE;
        }
        eval = NULL; /* no evaluation data: training only */
    } else if (!eval && o->eval_every) {
        if (!quiet)
            fprintf(stderr, "fedvm: --eval-every: %s has no function 'evaluate'\n", o->file);
        return EXIT_USAGE;
    }
    setup su = {.population = o->clients, .eval_clients = -1};
    fvm_value *final = NULL;
    int rc = EXIT_INVALID;
    /* no progress bar under mpirun: it gives each rank a terminal as stdout,
     * whatever its own stdout is */
    bool bar = !quiet && isatty(1) && strcmp(b->iface->name, "mpi");
    train t = {.o = o, .backend = b, .bar = bar, .start = now(), .first = 1, .loss = NAN, .train_loss = NAN,
               .train_accuracy = NAN,
               .accuracy = NAN, .state_type = init->result_type};
    if (fvm_backend_agree(b, read_inputs(init, next, eval, o, &su, &t, d), d) ||
        fvm_backend_agree(b, start(vm, init, o, &su, &t, d), d))
        goto done;
    t.sampled = !su.fixed && su.per_round < su.population;
    fvm_rounds r = {
        .vm = vm,
        .next = next,
        .evaluate = eval,
        .next_args = su.next_args,
        .eval_args = su.eval_args,
        .eval_population = su.eval_clients,
        .population = su.population,
        .per_round = su.per_round,
        .fixed = su.fixed,
        .seed = (uint64_t)o->seed,
        .first = t.first,
        .last = o->rounds,
        .eval_every = o->eval_every,
        .report = report_round,
        .user = &t,
    };
    fvm_status s = fvm_rounds_run(&r, su.state, &final, d);
    if (t.metrics && fclose(t.metrics) != 0 && !s)
        s = fvm_diag_add(d, FVM_ERR_IO, NULL, "cannot write the metrics file %s: %s", o->metrics, strerror(errno));
    t.metrics = NULL;
    if (s)
        goto done;
    double secs = now() - t.start;
    if (!quiet) {
        long long ran = o->rounds >= t.first ? o->rounds - t.first + 1 : 0;
        fprintf(stderr, "fedvm: %lld round%s in %.1f s", ran, ran == 1 ? "" : "s", secs);
        if (t.have_eval && !isnan(t.accuracy))
            fprintf(stderr, "; final evaluation: accuracy %.4f", t.accuracy);
        if (t.have_eval && !isnan(t.loss))
            fprintf(stderr, "%s loss %.4f", isnan(t.accuracy) ? "; final evaluation:" : ",", t.loss);
        fprintf(stderr, "\n");
    }
    rc = 0;
done:
    if (t.metrics)
        fclose(t.metrics);
    fvm_value_release(final);
    fvm_value_release(su.state);
    fvm_values_free(su.next_args, next->nparams);
    if (eval)
        fvm_values_free(su.eval_args, eval->nparams);
    free(su.fixed);
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
    fvm_vm_config cfg = {.nclients = -1, .backend = backend, .kernels = o.kernels, .max_steps = o.max_steps,
                         .time_limit = o.time_limit};
    if (fvm_vm_new(p, &cfg, &vm, &d))
        goto done;
    const fvm_func *f = fvm_program_func(p, o.fn ? o.fn : "main");
    if (!f && !o.fn && fvm_program_func(p, "next")) {
        rc = run_training(vm, backend, p, &o, &d);
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
    bool training_opts = o.per_round || o.client_ids || o.eval_every || o.metrics || o.checkpoint_dir || o.init;
    if (training_opts) {
        if (!quiet)
            fprintf(stderr, "fedvm: --clients-per-round, --client-ids, --eval-every, --metrics, --checkpoint-dir, "
                            "--resume and --init are for training runs (a program with initialize and next, "
                            "without main or --fn)\n");
        rc = EXIT_USAGE;
        goto done;
    }
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
