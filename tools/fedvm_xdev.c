/* fedvm_xdev.c - fedvm device and fedvm server: the two sides of a cross-device plan (format/xdev_run.h, format/PLANS.md). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../format/file.h"
#include "../format/metrics.h"
#include "../format/xdev_run.h"
#include "cli.h"

const char *const fvm_usage_device =
    "usage: fedvm device PLAN --checkpoint BROADCAST [--data [NAME=]FILE[:SPLIT]]...\n"
    "                    (--client ID | --index K)... (--out UPDATE | --out-dir DIR | --partial OUT)\n"
    "                    [--state FILE | --state-dir DIR]\n"
    "\n"
    "Runs the client phase of a cross-device plan ('fedplan P --to cross-device') for\n"
    "one client, or for each of several, and writes each client's update as a\n"
    "safetensors file (atomically) for 'fedvm server PLAN aggregate', or the partial\n"
    "aggregate of a block of clients for 'fedvm server PLAN merge'.\n"
    "\n"
    "  --checkpoint FILE  the round's broadcast, written by 'fedvm server PLAN prepare'\n"
    "  --data [NAME=]FILE[:SPLIT]\n"
    "                     the clients' data for the plan's data input NAME (NAME= may be\n"
    "                     left out when there is one): a FedJAX or TFF SQLite dataset, or\n"
    "                     a .json/.yaml file with one member per client\n"
    "  --client ID        a client by its id in the (first) dataset; repeat for several\n"
    "  --index K          a client by its index in the data; repeat for several\n"
    "  --out UPDATE       the update file (one client)\n"
    "  --out-dir DIR      one update per client, DIR/client-K.safetensors (K: the index)\n"
    "  --partial OUT      the clients' updates folded into one partial aggregate: the\n"
    "                     clients must be one whole block of the round (16 consecutive\n"
    "                     clients of the round's, in index order; the last may be shorter)\n"
    "  --state FILE       the client's state, for a plan of a program that keeps one on\n"
    "                     each client (initialize_client): a safetensors file the device\n"
    "                     keeps and never sends. Read when it is there (else the client's\n"
    "                     first state comes from initialize_client, with its key as 'fedvm\n"
    "                     run' gives it); its new state replaces it once the update is\n"
    "                     written (meanwhile FILE.pending holds it)\n"
    "  --state-dir DIR    the same for each client, DIR/client-K.safetensors (several\n"
    "                     clients, --out-dir or --partial)\n"
    "\n"
    "Every client must be one the round selected, and every client's state of an\n"
    "earlier round than the broadcast's. Prints the path of each update or partial written.\n"
    "exit status: 0 success, 1 invalid plan, file or data, 2 usage error\n";

const char *const fvm_usage_server =
    "usage: fedvm server PLAN init [--seed S] [--init WEIGHTS.safetensors] --out STATE\n"
    "       fedvm server PLAN prepare --state STATE --clients N [--clients-per-round K] --out BROADCAST\n"
    "       fedvm server PLAN aggregate --state STATE --broadcast BROADCAST UPDATES_DIR --out STATE\n"
    "                                   [--metrics FILE.jsonl]\n"
    "       fedvm server PLAN merge --state STATE --broadcast BROADCAST PARTIALS_DIR --out STATE\n"
    "                               [--metrics FILE.jsonl]\n"
    "\n"
    "Runs the server phase of a cross-device plan ('fedplan P --to cross-device'); every\n"
    "file is safetensors, written atomically.\n"
    "\n"
    "  init       runs initialize (its key from --seed S, default 0); --init replaces the\n"
    "             tensors a safetensors file holds, as 'fedvm run --init'. Writes the\n"
    "             state of round 0.\n"
    "  prepare    the broadcast of the round after STATE's: selects the round's clients\n"
    "             (K of N, drawn from the seed and the round as 'fedvm run\n"
    "             --clients-per-round' draws them; all N by default) and prints their\n"
    "             indices, one per line.\n"
    "  aggregate  combines the round's updates in UPDATES_DIR (every *.safetensors file;\n"
    "             one per selected client, all of them, of this plan and round) in client\n"
    "             index order, writes the new state and prints the round's metrics as\n"
    "             'fedvm run' does: {\"round\": R, \"train\": METRICS}. --metrics appends the\n"
    "             line, with the number of clients, to FILE.\n"
    "  merge      the same from the partial aggregates of the round's blocks of 16\n"
    "             clients in PARTIALS_DIR ('fedvm device --partial'; one per block, all\n"
    "             of them), merged pairwise in block order: the same state and metrics.\n"
    "\n"
    "exit status: 0 success, 1 invalid plan or files, 2 usage error\n";

#define MAX_LIST 4096

/* ---- device -------------------------------------------------------------------- */

typedef struct device_opts {
    const char *plan, *checkpoint, *out, *out_dir, *partial, *state, *state_dir;
    const char *data[MAX_LIST];
    int ndata;
    const char *ids[MAX_LIST]; /* a client id, or NULL for an index */
    long long index[MAX_LIST];
    int nclients;
} device_opts;

static int device_args(int argc, char **argv, device_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *v;
        long long n;
        bool by_index = false;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(fvm_usage_device, stdout);
            return -1;
        } else if ((v = cli_opt(argc, argv, &i, "--checkpoint"))) {
            o->checkpoint = v;
        } else if ((v = cli_opt(argc, argv, &i, "--data"))) {
            if (!*v || o->ndata == MAX_LIST)
                return cli_usage_error(fvm_usage_device, "%s", "--data needs [NAME=]FILE[:SPLIT]");
            o->data[o->ndata++] = v;
        } else if ((v = cli_opt(argc, argv, &i, "--client")) ||
                   ((v = cli_opt(argc, argv, &i, "--index")) && (by_index = true))) {
            bool by_id = !by_index;
            if (o->nclients == MAX_LIST)
                return cli_usage_error(fvm_usage_device, "%s", "at most 4096 clients in one call");
            if (!*v)
                return cli_usage_error(fvm_usage_device, "%s", by_id ? "--client needs an ID" : "--index needs K");
            if (!by_id && !cli_int(v, 0, FVM_MAX_CLIENTS - 1, &n))
                return cli_usage_error(fvm_usage_device, "--index needs a client index, found '%s'", v);
            o->ids[o->nclients] = by_id ? v : NULL;
            o->index[o->nclients++] = by_id ? -1 : n;
        } else if ((v = cli_opt(argc, argv, &i, "--out"))) {
            o->out = v;
        } else if ((v = cli_opt(argc, argv, &i, "--out-dir"))) {
            o->out_dir = v;
        } else if ((v = cli_opt(argc, argv, &i, "--partial"))) {
            o->partial = v;
        } else if ((v = cli_opt(argc, argv, &i, "--state"))) {
            o->state = v;
        } else if ((v = cli_opt(argc, argv, &i, "--state-dir"))) {
            o->state_dir = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(fvm_usage_device, argv[i]);
        } else if (o->plan) {
            return cli_usage_error(fvm_usage_device, "one plan at a time; unexpected '%s'", argv[i]);
        } else {
            o->plan = argv[i];
        }
    }
    if (!o->plan)
        return cli_usage_error(fvm_usage_device, "%s", "device needs a PLAN");
    if (!o->checkpoint || !*o->checkpoint)
        return cli_usage_error(fvm_usage_device, "%s", "--checkpoint BROADCAST is required");
    if (!o->nclients)
        return cli_usage_error(fvm_usage_device, "%s", "name the client with --client ID or --index K");
    if ((o->out && *o->out) + (o->out_dir && *o->out_dir) + (o->partial && *o->partial) != 1)
        return cli_usage_error(fvm_usage_device, "%s",
                               "give --out UPDATE (one client), --out-dir DIR or --partial OUT (a block)");
    if (o->out && o->nclients > 1)
        return cli_usage_error(fvm_usage_device, "%s", "several clients write to --out-dir DIR, one file each");
    if ((o->state && !*o->state) || (o->state_dir && !*o->state_dir) || (o->state && o->state_dir))
        return cli_usage_error(fvm_usage_device, "%s", "give --state FILE (one client) or --state-dir DIR");
    if (o->state && o->nclients > 1)
        return cli_usage_error(fvm_usage_device, "%s",
                               "--state FILE is one client's; several clients keep theirs in --state-dir DIR");
    return 0;
}

int fvm_cmd_device(int argc, char **argv)
{
    device_opts o = {0};
    int rc = device_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    fvm_diag d = {0};
    fvm_xdev_plan *plan = NULL;
    fvm_xdev_device *dev = NULL;
    int64_t idx[MAX_LIST];
    static char states[MAX_LIST][PATH_MAX]; /* each client's state file (a plan with client state) */
    const char *state_of[MAX_LIST];
    rc = EXIT_INVALID;
    if (fvm_xdev_open(o.plan, FVM_XDEV_CLIENT | (o.partial ? FVM_XDEV_SERVER : 0), &plan, &d) ||
        fvm_xdev_compile(plan, &d) || fvm_xdev_device_open(plan, o.checkpoint, o.ndata, o.data, &dev, &d))
        goto done;
    bool keeps = fvm_xdev_keeps_client_state(plan);
    if (keeps != (o.state || o.state_dir)) {
        fvm_loc loc = {.file = o.plan};
        fvm_diag_add(&d, FVM_ERR_USAGE, &loc,
                     keeps ? "this plan keeps a state on each client (its program has initialize_client): give the "
                             "client's state file, --state FILE (one client) or --state-dir DIR"
                           : "this plan keeps no state on the clients (its program has no initialize_client): "
                             "--state and --state-dir are for plans that do");
        goto done;
    }
    /* every client (and its state) is checked before any runs */
    for (int k = 0; k < o.nclients; k++)
        fvm_xdev_device_client(dev, o.ids[k], o.index[k], &idx[k], &d);
    if (d.n)
        goto done;
    if (o.state_dir && mkdir(o.state_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fedvm: cannot create %s: %s\n", o.state_dir, strerror(errno));
        goto done;
    }
    for (int k = 0; keeps && k < o.nclients; k++) {
        if (o.state_dir)
            snprintf(states[k], sizeof states[k], "%s/client-%lld.safetensors", o.state_dir, (long long)idx[k]);
        else
            snprintf(states[k], sizeof states[k], "%s", o.state);
        state_of[k] = states[k];
        fvm_xdev_device_check_state(dev, idx[k], states[k], &d);
    }
    if (d.n)
        goto done;
    if (o.partial) {
        if (fvm_xdev_device_partial(dev, idx, o.nclients, o.partial, keeps ? state_of : NULL, &d))
            goto done;
        printf("%s\n", o.partial);
    }
    if (o.out_dir && mkdir(o.out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fedvm: cannot create %s: %s\n", o.out_dir, strerror(errno));
        goto done;
    }
    for (int k = 0; k < o.nclients && !o.partial; k++) {
        char path[PATH_MAX];
        if (o.out_dir)
            snprintf(path, sizeof path, "%s/client-%lld.safetensors", o.out_dir, (long long)idx[k]);
        else
            snprintf(path, sizeof path, "%s", o.out);
        if (fvm_xdev_device_update(dev, idx[k], path, keeps ? state_of[k] : NULL, &d))
            goto done;
        printf("%s\n", path);
    }
    rc = fflush(stdout) == 0 ? 0 : EXIT_INVALID;
done:
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    fvm_xdev_device_close(dev);
    fvm_xdev_close(plan);
    return rc;
}

/* ---- server ---------------------------------------------------------------------- */

typedef struct server_opts {
    const char *plan, *step, *out, *state, *broadcast, *updates, *init, *metrics;
    long long seed, clients, per_round;
    bool has_seed;
} server_opts;

static int server_args(int argc, char **argv, server_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(fvm_usage_server, stdout);
            return -1;
        } else if ((v = cli_opt(argc, argv, &i, "--out"))) {
            o->out = v;
        } else if ((v = cli_opt(argc, argv, &i, "--state"))) {
            o->state = v;
        } else if ((v = cli_opt(argc, argv, &i, "--broadcast"))) {
            o->broadcast = v;
        } else if ((v = cli_opt(argc, argv, &i, "--init"))) {
            o->init = v;
        } else if ((v = cli_opt(argc, argv, &i, "--metrics"))) {
            o->metrics = v;
        } else if ((v = cli_opt(argc, argv, &i, "--seed"))) {
            if (!cli_int(v, LLONG_MIN, LLONG_MAX, &o->seed))
                return cli_usage_error(fvm_usage_server, "--seed needs an integer, found '%s'", v);
            o->has_seed = true;
        } else if ((v = cli_opt(argc, argv, &i, "--clients-per-round"))) {
            if (!cli_int(v, 1, FVM_MAX_CLIENTS, &o->per_round))
                return cli_usage_error(fvm_usage_server, "--clients-per-round needs a number >= 1, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--clients"))) {
            if (!cli_int(v, 1, FVM_MAX_CLIENTS, &o->clients))
                return cli_usage_error(fvm_usage_server, "--clients needs a number of clients >= 1, found '%s'", v);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(fvm_usage_server, argv[i]);
        } else if (!o->plan) {
            o->plan = argv[i];
        } else if (!o->step) {
            o->step = argv[i];
        } else if (!o->updates && o->step && (!strcmp(o->step, "aggregate") || !strcmp(o->step, "merge"))) {
            o->updates = argv[i];
        } else {
            return cli_usage_error(fvm_usage_server, "unexpected '%s'", argv[i]);
        }
    }
    if (!o->plan || !o->step)
        return cli_usage_error(fvm_usage_server, "%s",
                               "server needs a PLAN and a step: init, prepare, aggregate or merge");
    bool init = !strcmp(o->step, "init"), prepare = !strcmp(o->step, "prepare"),
         aggregate = !strcmp(o->step, "aggregate") || !strcmp(o->step, "merge");
    if (!init && !prepare && !aggregate)
        return cli_usage_error(fvm_usage_server, "unknown step '%s' (init, prepare, aggregate or merge)", o->step);
    if (!o->out || !*o->out)
        return cli_usage_error(fvm_usage_server, "%s", "--out FILE is required");
    if (!init && (!o->state || !*o->state))
        return cli_usage_error(fvm_usage_server, "%s", "--state STATE is required");
    if (init && (o->state || o->broadcast || o->clients || o->per_round || o->metrics))
        return cli_usage_error(fvm_usage_server, "%s", "init takes --seed, --init and --out");
    if (prepare && !o->clients)
        return cli_usage_error(fvm_usage_server, "%s", "prepare needs --clients N (the clients to select from)");
    if (prepare && (o->broadcast || o->init || o->metrics || o->has_seed))
        return cli_usage_error(fvm_usage_server, "%s",
                               "prepare takes --state, --clients, --clients-per-round and --out (the seed is the "
                               "state's)");
    bool merge = !strcmp(o->step, "merge");
    if (aggregate && (!o->broadcast || !o->updates))
        return cli_usage_error(fvm_usage_server, "%s",
                               merge ? "merge needs --broadcast BROADCAST and PARTIALS_DIR"
                                     : "aggregate needs --broadcast BROADCAST and UPDATES_DIR");
    if (aggregate && (o->init || o->clients || o->per_round || o->has_seed))
        return cli_usage_error(fvm_usage_server, "%s",
                               merge ? "merge takes --state, --broadcast, PARTIALS_DIR, --out and --metrics"
                                     : "aggregate takes --state, --broadcast, UPDATES_DIR, --out and --metrics");
    return 0;
}

int fvm_cmd_server(int argc, char **argv)
{
    server_opts o = {0};
    int rc = server_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    fvm_diag d = {0};
    fvm_xdev_plan *plan = NULL;
    rc = EXIT_INVALID;
    if (fvm_xdev_open(o.plan, FVM_XDEV_SERVER, &plan, &d) || fvm_xdev_compile(plan, &d))
        goto done;
    if (!strcmp(o.step, "init")) {
        int replaced = 0;
        if (fvm_xdev_server_init(plan, (uint64_t)o.seed, o.init, o.out, &replaced, &d))
            goto done;
        if (o.init)
            fprintf(stderr, "fedvm: %d tensors of the initial state from %s\n", replaced, o.init);
    } else if (!strcmp(o.step, "prepare")) {
        int64_t round, *clients = NULL, n = 0;
        if (fvm_xdev_server_prepare(plan, o.state, o.clients, o.per_round ? o.per_round : o.clients, o.out, &round,
                                    &clients, &n, &d))
            goto done;
        for (int64_t k = 0; k < n; k++)
            printf("%lld\n", (long long)clients[k]);
        free(clients);
    } else {
        /* the metrics file is an output too: not an input, not the new state */
        const char *in[] = {o.plan, o.state, o.broadcast, o.out};
        const char *role[] = {"the plan", "the state (--state)", "the broadcast (--broadcast)",
                              "the new state's file (--out)"};
        if (o.metrics && fvm_file_not_input(o.metrics, "the metrics file (--metrics)", 4, in, role, &d))
            goto done;
        fvm_xdev_result res;
        if ((!strcmp(o.step, "merge") ? fvm_xdev_server_merge : fvm_xdev_server_aggregate)(plan, o.state, o.broadcast,
                                                                                           o.updates, o.out, &res, &d))
            goto done;
        /* the round's line as 'fedvm run' prints it, (epsilon, delta) included (the metrics file's has the
           clients too), made first; the state and the metrics line are then written all or nothing, and the
           round is printed only once they are */
        fvm_metrics_round shown = fvm_xdev_result_figures(&res);
        shown.fields &= FVM_METRICS_PRIVACY;
        char *line = NULL;
        size_t len = 0;
        if (fvm_metrics_line(&shown, &line, &len, &d))
            fvm_xdev_result_clear(&res);
        else if (fvm_xdev_result_commit(&res, o.metrics, &d) == FVM_OK)
            fwrite(line, 1, len, stdout);
        free(line);
        if (d.n)
            goto done;
    }
    rc = fflush(stdout) == 0 ? 0 : EXIT_INVALID;
done:
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    fvm_xdev_close(plan);
    return rc;
}
