/* fedvm_sweep.c - fedvm run --grid/--seeds: a sweep of training runs (vm/runtime/sweep.h), one
 * metrics file per run and an index, progress on stderr. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include "../format/doc_io.h"
#include "../format/value_doc.h"
#include "../vm/runtime/sweep.h"
#include "cli.h"

enum { MAX_RUNS = 10000, MAX_VALUES = 1000 };

typedef struct grid {
    const char *name; /* malloc'd */
    int n;
    char **values; /* JSON texts, malloc'd */
} grid;

typedef struct sweep_cli {
    const cli_sweep_opts *o;
    grid *grids;
    int ngrids;
    int64_t *seeds;
    int nseeds;
    fvm_sweep_run *runs;
    char **texts; /* everything malloc'd for runs: sets and file names */
    int ntexts;
    fvm_arena arena; /* the index document */
    fvm_doc **finals; /* each run's final figures, or NULL */
    int nruns, finished, failed;
} sweep_cli;

static void free_grids(grid *g, int n)
{
    for (int i = 0; i < n; i++) {
        free((char *)g[i].name);
        for (int k = 0; k < g[i].n; k++)
            free(g[i].values[k]);
        free(g[i].values);
    }
    free(g);
}

/* "NAME=V1,V2,...": values split at commas outside brackets and quotes. */
static bool parse_grid(const char *spec, grid *g)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return false;
    if (!(g->name = strndup(spec, (size_t)(eq - spec))))
        return false;
    int depth = 0;
    bool quoted = false;
    for (const char *p = eq + 1, *start = p;; p++) {
        if (*p == '"' && (p == start || p[-1] != '\\'))
            quoted = !quoted;
        else if (!quoted && (*p == '[' || *p == '{'))
            depth++;
        else if (!quoted && (*p == ']' || *p == '}'))
            depth--;
        if (*p && (*p != ',' || depth > 0 || quoted))
            continue;
        if (p == start || g->n == MAX_VALUES)
            return false;
        char **v = realloc(g->values, (size_t)(g->n + 1) * sizeof *v);
        if (!v)
            return false;
        g->values = v;
        if (!(g->values[g->n++] = strndup(start, (size_t)(p - start))))
            return false;
        if (!*p)
            return true;
        start = p + 1;
    }
}

/* "A-B" (A <= B), or "A,B,...", or "A": seeds >= 0. */
static bool parse_seeds(const char *spec, int64_t **out, int *n)
{
    long long a, b;
    const char *dash = strchr(spec + 1, '-'); /* not a leading sign */
    char left[32];
    if (dash && !strchr(spec, ',') && (size_t)(dash - spec) < sizeof left) {
        memcpy(left, spec, (size_t)(dash - spec));
        left[dash - spec] = 0;
        if (!cli_int(left, 0, LLONG_MAX, &a) || !cli_int(dash + 1, a, LLONG_MAX, &b) || b - a >= MAX_RUNS)
            return false;
        if (!(*out = malloc((size_t)(b - a + 1) * sizeof **out)))
            return false;
        for (long long s = a; s <= b; s++)
            (*out)[(*n)++] = s;
        return true;
    }
    char *copy = strdup(spec), *save = NULL;
    if (!copy || !(*out = malloc((strlen(spec) / 2 + 1) * sizeof **out))) {
        free(copy);
        return false;
    }
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save))
        if ((ok = cli_int(t, 0, LLONG_MAX, &a)))
            (*out)[(*n)++] = a;
    free(copy);
    return ok && *n > 0;
}

/* The index of grid g's value in run k: the runs go through the product of
 * the grids, the first varying slowest, then through the seeds. */
static int value_of(const sweep_cli *w, int k, int g)
{
    int i = k / w->nseeds;
    for (int h = w->ngrids - 1; h > g; h--)
        i /= w->grids[h].n;
    return i % w->grids[g].n;
}

/* The text of run k's configuration: "lr=0.1, epochs=2, seed 3". */
static void run_label(const sweep_cli *w, int k, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (int g = 0; g < w->ngrids && len < size; g++)
        len +=
            (size_t)snprintf(buf + len, size - len, "%s=%s, ", w->grids[g].name, w->grids[g].values[value_of(w, k, g)]);
    if (len < size)
        snprintf(buf + len, size - len, "seed %lld", (long long)w->seeds[k % w->nseeds]);
}

static void done(void *user, int k, fvm_status s, const fvm_session *ss, const fvm_diag *d)
{
    sweep_cli *w = user;
    char label[512];
    run_label(w, k, label, sizeof label);
    w->finished++;
    if (s) {
        w->failed++;
        fprintf(stderr, "fedvm: run %d (%s) failed:\n", k + 1, label);
        cli_print_errors(d);
        return;
    }
    const fvm_type *tt = NULL, *et = NULL;
    const fvm_value *train = fvm_session_train(ss, &tt), *eval = fvm_session_eval(ss, &et);
    fvm_doc *f = fvm_doc_new(&w->arena, FVM_DOC_OBJECT);
    if (f && train)
        fvm_doc_set(&w->arena, f, "train", fvm_value_to_doc(&w->arena, train, tt));
    if (f && eval)
        fvm_doc_set(&w->arena, f, "eval", fvm_value_to_doc(&w->arena, eval, et));
    if (f)
        f->flow = true;
    w->finals[k] = f;
    double acc = fvm_session_metric(ss, "eval.accuracy"), loss = fvm_session_metric(ss, "eval.loss");
    fprintf(stderr, "fedvm: [%d/%d] run %d (%s)", w->finished, w->nruns, k + 1, label);
    if (!isnan(acc))
        fprintf(stderr, ": eval accuracy %.4f", acc);
    else if (!isnan(loss))
        fprintf(stderr, ": eval loss %.4f", loss);
    else
        fprintf(stderr, " done");
    fprintf(stderr, "\n");
}

/* out_dir must be new or empty: the runs' files are appended to. */
static int prepare_dir(const char *dir)
{
    if (mkdir(dir, 0777) == 0)
        return 0;
    if (errno != EEXIST) {
        fprintf(stderr, "fedvm: cannot create %s: %s\n", dir, strerror(errno));
        return EXIT_INVALID;
    }
    DIR *dh = opendir(dir);
    if (!dh) {
        fprintf(stderr, "fedvm: cannot read %s: %s\n", dir, strerror(errno));
        return EXIT_INVALID;
    }
    int files = 0;
    for (struct dirent *e; (e = readdir(dh));)
        files += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dh);
    if (files) {
        fprintf(stderr, "fedvm: --out-dir %s is not empty: a sweep writes its runs into a new or empty directory\n",
                dir);
        return EXIT_USAGE;
    }
    return 0;
}

/* index.json: the program, the grid, the seeds and each run's file, seed, values and final figures. */
static int write_index(sweep_cli *w)
{
    fvm_arena *a = &w->arena;
    fvm_doc *root = fvm_doc_new(a, FVM_DOC_OBJECT), *gd = fvm_doc_new(a, FVM_DOC_OBJECT),
            *sd = fvm_doc_new(a, FVM_DOC_ARRAY), *rd = fvm_doc_new(a, FVM_DOC_ARRAY);
    bool ok = root && gd && sd && rd && !fvm_doc_set(a, root, "program", fvm_doc_string(a, w->o->file)) &&
              !fvm_doc_set(a, root, "grid", gd) && !fvm_doc_set(a, root, "seeds", sd) &&
              !fvm_doc_set(a, root, "runs", rd);
    fvm_diag d = {0};
    fvm_doc **vals = NULL;
    int nvals = 0;
    for (int g = 0; ok && g < w->ngrids; g++) {
        fvm_doc *arr = fvm_doc_new(a, FVM_DOC_ARRAY);
        ok = arr && !fvm_doc_set(a, gd, w->grids[g].name, arr);
        if (ok)
            arr->flow = true;
        for (int i = 0; ok && i < w->grids[g].n; i++) {
            fvm_doc *v = NULL;
            fvm_doc_src src = {"--grid", w->grids[g].values[i], strlen(w->grids[g].values[i])};
            ok = !fvm_json_parse(a, &src, &v, &d) && !fvm_doc_push(a, arr, v);
            fvm_doc **nv = ok ? realloc(vals, (size_t)(nvals + 1) * sizeof *nv) : NULL;
            if ((ok = nv != NULL)) {
                vals = nv;
                vals[nvals++] = v;
            }
        }
    }
    sd->flow = true;
    for (int s = 0; ok && s < w->nseeds; s++)
        ok = !fvm_doc_push(a, sd, fvm_doc_int(a, w->seeds[s]));
    for (int k = 0; ok && k < w->nruns; k++) {
        fvm_doc *r = fvm_doc_new(a, FVM_DOC_OBJECT), *set = fvm_doc_new(a, FVM_DOC_OBJECT);
        const char *slash = strrchr(w->runs[k].metrics, '/');
        ok = r && set && !fvm_doc_set(a, r, "file", fvm_doc_string(a, slash ? slash + 1 : w->runs[k].metrics)) &&
             !fvm_doc_set(a, r, "seed", fvm_doc_int(a, (int64_t)w->runs[k].seed)) && !fvm_doc_set(a, r, "set", set);
        for (int g = 0, base = 0; ok && g < w->ngrids; base += w->grids[g].n, g++)
            ok = !fvm_doc_set(a, set, w->grids[g].name, vals[base + value_of(w, k, g)]);
        if (ok && w->finals[k])
            ok = !fvm_doc_set(a, r, "final", w->finals[k]);
        if (ok) {
            r->flow = true;
            ok = !fvm_doc_push(a, rd, r);
        }
    }
    free(vals);
    char *text = NULL, *path = NULL;
    size_t len = 0;
    int rc = EXIT_INVALID;
    if (ok && !fvm_json_write(root, &text, &len, &d) && (path = fvm_arena_printf(a, "%s/index.json", w->o->out_dir)))
        rc = cli_write_atomic(path, text, len);
    else
        fprintf(stderr, "fedvm: cannot write the sweep's index\n");
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    free(text);
    return rc;
}

int cli_sweep(const cli_sweep_opts *o)
{
    sweep_cli w = {.o = o};
    int rc = EXIT_USAGE;
    if (!(w.grids = calloc((size_t)o->ngrids + 1, sizeof *w.grids)))
        return EXIT_INVALID;
    w.ngrids = o->ngrids;
    long long nconf = 1;
    for (int g = 0; g < o->ngrids; g++) {
        if (!parse_grid(o->grids[g], &w.grids[g])) {
            rc = cli_usage_error(o->usage, "--grid needs NAME=VALUE,VALUE,... (JSON values), found '%s'", o->grids[g]);
            goto done;
        }
        nconf *= w.grids[g].n;
        if (nconf > MAX_RUNS) {
            rc = cli_usage_error(o->usage, "a sweep has at most %s runs", "10000");
            goto done;
        }
    }
    if (!o->seeds) { /* the one seed of --seed */
        if (!(w.seeds = malloc(sizeof *w.seeds)))
            goto done;
        w.seeds[w.nseeds++] = o->seed;
    } else if (!parse_seeds(o->seeds, &w.seeds, &w.nseeds)) {
        rc = cli_usage_error(o->usage, "--seeds needs A-B or A,B,... (integers >= 0), found '%s'", o->seeds);
        goto done;
    }
    if (nconf * w.nseeds > MAX_RUNS) {
        rc = cli_usage_error(o->usage, "a sweep has at most %s runs", "10000");
        goto done;
    }
    int nruns = w.nruns = (int)(nconf * w.nseeds);
    if ((rc = prepare_dir(o->out_dir)))
        goto done;
    rc = EXIT_INVALID;
    w.runs = calloc((size_t)nruns, sizeof *w.runs);
    w.finals = calloc((size_t)nruns, sizeof *w.finals);
    w.texts = calloc((size_t)nruns * ((size_t)w.ngrids + 2), sizeof *w.texts);
    const char **sets = calloc((size_t)nruns * ((size_t)w.ngrids + 1), sizeof *sets);
    if (!w.runs || !w.finals || !w.texts || !sets) {
        free(sets);
        fprintf(stderr, "fedvm: out of memory\n");
        goto done;
    }
    int width = snprintf(NULL, 0, "%d", nruns);
    for (int k = 0; k < nruns; k++) {
        const char **rs = sets + (size_t)k * ((size_t)w.ngrids + 1);
        for (int g = 0; g < w.ngrids; g++) {
            char *t = NULL;
            if (asprintf(&t, "%s=%s", w.grids[g].name, w.grids[g].values[value_of(&w, k, g)]) < 0)
                t = NULL;
            rs[g] = w.texts[w.ntexts++] = t;
        }
        char *file = NULL;
        if (asprintf(&file, "%s/run-%0*d.jsonl", o->out_dir, width, k + 1) < 0)
            file = NULL;
        w.texts[w.ntexts++] = file;
        bool nomem = !file;
        for (int g = 0; g < w.ngrids; g++)
            nomem = nomem || !rs[g];
        if (nomem) {
            free(sets);
            fprintf(stderr, "fedvm: out of memory\n");
            goto done;
        }
        w.runs[k] = (fvm_sweep_run){rs, w.ngrids, (uint64_t)w.seeds[k % w.nseeds], file};
    }
    fprintf(stderr, "fedvm: a sweep of %d run%s (%lld configuration%s x %d seed%s) into %s\n", nruns,
            nruns == 1 ? "" : "s", nconf, nconf == 1 ? "" : "s", w.nseeds, w.nseeds == 1 ? "" : "s", o->out_dir);
    fvm_diag d = {0};
    fvm_sweep_opts so = {.program = o->file,
                         .load = cli_load_opts(),
                         .session = o->session,
                         .runs = w.runs,
                         .nruns = nruns,
                         .threads = o->threads,
                         .done = done,
                         .user = &w};
    fvm_status s = fvm_sweep(&so, &d);
    free(sets);
    cli_print_errors(&d);
    fvm_diag_clear(&d);
    int irc = write_index(&w);
    rc = s == FVM_ERR_USAGE && !w.finished ? EXIT_USAGE : s || irc ? EXIT_INVALID : 0;
    if (!s)
        fprintf(stderr, "fedvm: %d runs done; %s/index.json lists them ('fedvm plot %s/index.json -o sweep.svg')\n",
                nruns, o->out_dir, o->out_dir);
done:
    free_grids(w.grids, w.ngrids);
    free(w.seeds);
    for (int i = 0; i < w.ntexts; i++)
        free(w.texts[i]);
    free(w.texts);
    free(w.runs);
    free(w.finals);
    fvm_arena_free(&w.arena);
    return rc;
}
