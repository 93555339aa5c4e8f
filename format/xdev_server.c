/* xdev_server.c - 'fedvm server': a cross-device plan's server phase, the initial state, a round's broadcast and its aggregation, their files read and written (see xdev_run.h; what the round computes: vm/runtime/xdev_phases.c). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <nettle/sha2.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../vm/exec/aggregate.h"
#include "../vm/runtime/xdev_phases.h"
#include "file.h"
#include "metrics.h"
#include "xdev_impl.h"
#include "xdev_run.h"

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

/* ---- states ------------------------------------------------------------------- */

/* The state file of round 'round', written and synced beside out (*w;
 * fvm_atomic_end puts it in place). */
static fvm_status stage_state(const fvm_xdev_plan *pl, const char *out, const fvm_value *state, int64_t round,
                              uint64_t seed, fvm_atomic *w, fvm_diag *d)
{
    char r[32], s[32];
    snprintf(r, sizeof r, "%lld", (long long)round);
    snprintf(s, sizeof s, "%" PRIu64, seed);
    const char *type = fvm_type_str(&pl->ph.server->arena, pl->ph.state, false);
    if (!type)
        return nomem(d);
    const char *meta[] = {XDEV_KIND, "state", XDEV_PLAN, pl->id, XDEV_ROUND, r, XDEV_SEED, s, XDEV_STATE_TYPE, type};
    return fvm_safetensors_stage(out, state, pl->ph.state, 5, meta, w, d);
}

static fvm_status save_state(const fvm_xdev_plan *pl, const char *out, const fvm_value *state, int64_t round,
                             uint64_t seed, fvm_diag *d)
{
    fvm_atomic w;
    fvm_status s = stage_state(pl, out, state, round, seed, &w, d);
    return s ? s : fvm_atomic_end(&w, d);
}

/* A state file: its value, round and seed. States are not tied to one plan
 * file: any state of the plan's state type will do. */
static fvm_status load_state(const fvm_xdev_plan *pl, const char *path, fvm_value **state, int64_t *round,
                             uint64_t *seed, fvm_diag *d)
{
    fvm_safetensors *f = NULL;
    fvm_status s = xdev_load(path, "state", NULL, &f, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_ROUND, 0, UINT32_MAX - 2, round, d);
    if (s == FVM_OK)
        s = xdev_meta_seed(f, path, seed, d);
    if (s == FVM_OK)
        s = fvm_safetensors_value(f, pl->ph.state, state, d);
    fvm_safetensors_free(f);
    return s;
}

fvm_status fvm_xdev_server_init(const fvm_xdev_plan *pl, uint64_t seed, const char *init_weights, const char *out,
                                int *replaced, fvm_diag *d)
{
    *replaced = 0;
    fvm_value *state = NULL;
    const char *in[] = {pl->path, init_weights}, *role[] = {"the plan", "the initial weights (--init)"};
    fvm_status s = fvm_file_not_input(out, "the state's file (--out)", 2, in, role, d);
    if (s == FVM_OK)
        s = fvm_xdev_initialize(&pl->ph, seed, &state, d);
    if (s == FVM_OK && init_weights)
        s = fvm_safetensors_overlay_file(init_weights, pl->ph.state, &state, replaced, d);
    if (s == FVM_OK)
        s = save_state(pl, out, state, 0, seed, d);
    fvm_value_release(state);
    return s;
}

/* ---- the broadcast ------------------------------------------------------------ */

fvm_status fvm_xdev_server_prepare(const fvm_xdev_plan *pl, const char *state_path, int64_t population,
                                   int64_t per_round, const char *out, int64_t *round, int64_t **clients,
                                   int64_t *nclients, fvm_diag *d)
{
    *clients = NULL;
    *nclients = 0;
    if (population < 1 || per_round < 1 || per_round > population)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "cannot select %lld of %lld clients", (long long)per_round,
                            (long long)population);
    fvm_value *state = NULL, *bc = NULL;
    int64_t *picked = malloc((size_t)per_round * sizeof *picked);
    uint64_t seed = 0;
    uint32_t key[2];
    char *list = NULL;
    const char *in[] = {pl->path, state_path}, *role[] = {"the plan", "the state (--state)"};
    fvm_status s = picked ? FVM_OK : nomem(d);
    if (s == FVM_OK)
        s = fvm_file_not_input(out, "the broadcast's file (--out)", 2, in, role, d);
    if (s == FVM_OK)
        s = load_state(pl, state_path, &state, round, &seed, d);
    if (s == FVM_OK)
        s = fvm_xdev_prepare(&pl->ph, state, seed, ++*round, population, per_round, picked, key, &bc, d);
    if (s == FVM_OK && !(list = xdev_ints_text(picked, per_round)))
        s = nomem(d);
    if (s == FVM_OK) {
        char r[32], sd[32], k[32], pop[32];
        snprintf(r, sizeof r, "%lld", (long long)*round);
        snprintf(sd, sizeof sd, "%" PRIu64, seed);
        snprintf(k, sizeof k, "%" PRIu32 ",%" PRIu32, key[0], key[1]);
        snprintf(pop, sizeof pop, "%lld", (long long)population);
        const char *meta[] = {XDEV_KIND, "broadcast", XDEV_PLAN,       pl->id, XDEV_ROUND,   r,   XDEV_SEED, sd,
                              XDEV_KEY,  k,           XDEV_POPULATION, pop,    XDEV_CLIENTS, list};
        s = fvm_safetensors_save(out, bc, pl->ph.prepare->result_type, 7, meta, d);
    }
    free(list);
    fvm_value_release(bc);
    fvm_value_release(state);
    if (s) {
        free(picked);
        return s;
    }
    *clients = picked;
    *nclients = per_round;
    return FVM_OK;
}

/* ---- the updates ---------------------------------------------------------------- */

/* The SHA-256 of a file's bytes as read. */
static void digest_of(const fvm_safetensors *f, uint8_t out[SHA256_DIGEST_SIZE])
{
    size_t len = 0;
    const void *bytes = fvm_safetensors_image(f, &len);
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, len, bytes);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

/* The updates of a round, read one at a time as the aggregation asks. Each
 * was checked when the round began; what is read now must be the bytes
 * checked then (the same SHA-256), or the file was changed or swapped in
 * between and the round stops: an update is never used unchecked. (Keeping
 * every update in memory instead would make the server's memory grow with
 * the round's clients; this keeps it at one update.) */
typedef struct updates {
    fvm_source base;
    char **paths; /* per client of the round, in index order */
    uint8_t (*digest)[SHA256_DIGEST_SIZE]; /* of each, as checked */
    int64_t n;
    const fvm_type *type;
} updates;

static fvm_status updates_get(fvm_source *src, int64_t i, fvm_value **out, fvm_diag *d)
{
    updates *u = (updates *)src;
    fvm_safetensors *f = NULL;
    uint8_t now[SHA256_DIGEST_SIZE];
    fvm_status s = fvm_safetensors_load(u->paths[i], &f, d);
    if (s == FVM_OK) {
        digest_of(f, now);
        if (memcmp(now, u->digest[i], sizeof now)) {
            fvm_loc loc = {.file = u->paths[i]};
            s = fvm_diag_add(d, FVM_ERR_IO, &loc,
                             "changed after it was checked (replaced or written while the "
                             "round was aggregated); nothing is written: aggregate the round again");
        }
    }
    if (s == FVM_OK)
        s = fvm_safetensors_value(f, u->type, out, d);
    fvm_safetensors_free(f);
    return s;
}

static void updates_free(fvm_source *src)
{
    updates *u = (updates *)src;
    for (int64_t i = 0; u->paths && i < u->n; i++)
        free(u->paths[i]);
    free(u->paths);
    free(u->digest);
    free(u);
}

static const struct fvm_source_i updates_i = {updates_get, updates_free};

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.safetensors files of dir, sorted (malloc'd paths). */
static fvm_status list_dir(const char *dir, char ***out, int64_t *n, fvm_diag *d)
{
    fvm_loc loc = {.file = dir};
    DIR *dh = opendir(dir);
    if (!dh)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot read the directory of updates: %s", strerror(errno));
    char **paths = NULL;
    int64_t cap = 0;
    *n = 0;
    fvm_status s = FVM_OK;
    for (struct dirent *e; s == FVM_OK && (e = readdir(dh));) {
        size_t len = strlen(e->d_name), ext = strlen(".safetensors");
        if (len <= ext || strcmp(e->d_name + len - ext, ".safetensors"))
            continue;
        if (*n == cap) {
            char **p = realloc(paths, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *p);
            if (!p) {
                s = nomem(d);
                break;
            }
            paths = p;
        }
        if (asprintf(&paths[*n], "%s/%s", dir, e->d_name) < 0)
            s = nomem(d);
        else
            ++*n;
    }
    closedir(dh);
    if (s) {
        for (int64_t i = 0; i < *n; i++)
            free(paths[i]);
        free(paths);
        return s;
    }
    qsort(paths, (size_t)*n, sizeof *paths, by_name);
    *out = paths;
    return FVM_OK;
}

/* Checks an update file f (named path, of this plan) for round 'round'
 * whose clients are sel[0..n) (increasing): its round, its client (one of
 * sel; *client) and its tensors (those the server aggregates). Every
 * problem is an error naming path. */
static fvm_status update_fits(const fvm_xdev_plan *pl, const char *path, const fvm_safetensors *f, int64_t round,
                              const int64_t *sel, int64_t n, int64_t *client, fvm_diag *d)
{
    fvm_value *v = NULL;
    int64_t r = 0, c = 0;
    fvm_loc loc = {.file = path};
    const fvm_type *type = pl->ph.aggregate->param_types[0]->u.fed.member;
    fvm_status s = xdev_meta_int(f, path, XDEV_ROUND, 1, INT64_MAX, &r, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_CLIENT, 0, INT64_MAX, &c, d);
    if (s == FVM_OK && r != round)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this is an update of round %lld, and the round being aggregated is "
                         "%lld (a %s update)",
                         (long long)r, (long long)round, r < round ? "stale" : "future");
    if (s == FVM_OK && xdev_position(sel, n, c) < 0)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "this is an update of client %lld, which round %lld did not select",
                         (long long)c, (long long)round);
    if (s == FVM_OK)
        s = fvm_safetensors_value(f, type, &v, d);
    fvm_value_release(v);
    if (s == FVM_OK)
        *client = c;
    return s;
}

/* Checks one update file of round 'round': its plan, round, client (one of
 * sel, not seen before in at[]) and tensors; records it in at[]. */
static fvm_status check_update(const fvm_xdev_plan *pl, char *path, int64_t round, const int64_t *sel, int64_t n,
                               char **at, uint8_t (*digest)[SHA256_DIGEST_SIZE], fvm_diag *d)
{
    fvm_safetensors *f = NULL;
    int64_t c = 0, pos = -1;
    fvm_loc loc = {.file = path};
    fvm_status s = xdev_load(path, "update", pl, &f, d);
    if (s == FVM_OK)
        s = update_fits(pl, path, f, round, sel, n, &c, d);
    if (s == FVM_OK && at[pos = xdev_position(sel, n, c)])
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "a second update of client %lld (the first is %s)", (long long)c,
                         at[pos]);
    if (s == FVM_OK) {
        at[pos] = path;
        digest_of(f, digest[pos]);
    }
    fvm_safetensors_free(f);
    return s;
}

fvm_status fvm_xdev_update_parse(const fvm_xdev_plan *pl, const char *name, const void *bytes, size_t len,
                                 int64_t round, const int64_t *clients, int64_t n, int64_t *client, fvm_diag *d)
{
    *client = -1;
    if (!pl->ph.server)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "checking an update needs the plan's server phase loaded");
    fvm_safetensors *f = NULL;
    fvm_status s = fvm_safetensors_parse(name, bytes, len, &f, d);
    if (s == FVM_OK)
        s = xdev_kind(f, name, "update", pl, d);
    if (s == FVM_OK)
        s = update_fits(pl, name, f, round, clients, n, client, d);
    fvm_safetensors_free(f);
    return s;
}

/* The round's updates from dir as a {W}@CLIENTS value read on demand, after
 * every file was checked (all problems reported). */
static fvm_status read_updates(const fvm_xdev_plan *pl, const char *dir, int64_t round, const int64_t *sel, int64_t n,
                               fvm_value **out, fvm_diag *d)
{
    char **files = NULL;
    int64_t nfiles = 0;
    const fvm_type *w = pl->ph.aggregate->param_types[0]->u.fed.member;
    fvm_status s = list_dir(dir, &files, &nfiles, d), first = FVM_OK;
    if (s)
        return s;
    updates *u = calloc(1, sizeof *u);
    char **at = calloc((size_t)n, sizeof *at);
    if (!u || !at || !(u->paths = calloc((size_t)n, sizeof *u->paths)) ||
        !(u->digest = calloc((size_t)n, sizeof *u->digest)))
        first = nomem(d);
    for (int64_t i = 0; i < nfiles && first != FVM_ERR_NOMEM; i++)
        if ((s = check_update(pl, files[i], round, sel, n, at, u->digest, d)) && !first)
            first = s;
    for (int64_t j = 0; j < n && !first; j++)
        if (!at[j]) {
            int64_t have = 0;
            for (int64_t k = 0; k < n; k++)
                have += at[k] != NULL;
            fvm_loc loc = {.file = dir};
            first = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                                 "no update of client %lld: round %lld selected %lld clients and %lld of them have "
                                 "an update here",
                                 (long long)sel[j], (long long)round, (long long)n, (long long)have);
        }
    for (int64_t j = 0; j < n && !first; j++)
        if (!(u->paths[j] = strdup(at[j])))
            first = nomem(d);
    for (int64_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(at);
    if (u && !first) {
        u->base.iface = &updates_i;
        u->n = n;
        u->type = w;
        if (!(*out = fvm_value_clients_source_take(n, &u->base))) {
            updates_free(&u->base);
            return nomem(d);
        }
        return FVM_OK;
    }
    if (u) {
        u->n = n;
        updates_free(&u->base);
    }
    return first;
}

/* ---- the partials of blocks ------------------------------------------------------ */

/* Checks one partial file of round 'round' (clients sel[0..n)): its plan,
 * round, block (one of the round's, not seen before in at[]), the block's
 * clients and its tensors; records the file in at[] and its value in vals[]. */
static fvm_status check_partial(const fvm_xdev_plan *pl, char *path, int64_t round, const int64_t *sel, int64_t n,
                                char **at, fvm_value **vals, fvm_diag *d)
{
    fvm_safetensors *f = NULL;
    fvm_value *v = NULL;
    int64_t r = 0, b = 0, *cl = NULL, ncl = 0, nblocks = (n + FVM_AGG_BLOCK - 1) / FVM_AGG_BLOCK;
    fvm_loc loc = {.file = path};
    fvm_status s = xdev_load(path, "partial", pl, &f, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_ROUND, 1, INT64_MAX, &r, d);
    if (s == FVM_OK)
        s = xdev_meta_int(f, path, XDEV_BLOCK, 0, INT64_MAX, &b, d);
    if (s == FVM_OK)
        s = xdev_meta_ints(f, path, XDEV_CLIENTS, 0, FVM_MAX_CLIENTS, true, &cl, &ncl, d);
    if (s == FVM_OK && r != round)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this is a partial of round %lld, and the round being aggregated is "
                         "%lld (a %s partial)",
                         (long long)r, (long long)round, r < round ? "stale" : "future");
    if (s == FVM_OK && b >= nblocks)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this is a partial of block %lld, and round %lld has %lld blocks of "
                         "its %lld clients",
                         (long long)b, (long long)round, (long long)nblocks, (long long)n);
    const int64_t *want = s == FVM_OK ? sel + b * FVM_AGG_BLOCK : NULL;
    int64_t nwant = b + 1 < nblocks ? FVM_AGG_BLOCK : n - b * FVM_AGG_BLOCK;
    if (want && (ncl != nwant || memcmp(cl, want, (size_t)ncl * sizeof *cl))) {
        char *w = xdev_ints_text(want, nwant), *g = xdev_ints_text(cl, ncl);
        s = w && g ? fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                                  "this partial of block %lld holds the clients %s, but block "
                                  "%lld of round %lld is the clients %s (a partial of another selection)",
                                  (long long)b, g, (long long)b, (long long)round, w)
                   : nomem(d);
        free(w);
        free(g);
    }
    if (s == FVM_OK && at[b])
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "a second partial of block %lld (the first is %s)", (long long)b,
                         at[b]);
    if (s == FVM_OK)
        s = fvm_safetensors_value(f, pl->ph.partial_type, &v, d);
    free(cl);
    fvm_safetensors_free(f);
    if (s == FVM_OK) {
        at[b] = path;
        vals[b] = v;
    }
    return s;
}

/* The round's partials from dir, one per block in block order (*out:
 * malloc'd, nblocks values), after every file was checked (all problems
 * reported). */
static fvm_status read_partials(const fvm_xdev_plan *pl, const char *dir, int64_t round, const int64_t *sel, int64_t n,
                                fvm_value ***out, fvm_diag *d)
{
    char **files = NULL;
    int64_t nfiles = 0, nblocks = (n + FVM_AGG_BLOCK - 1) / FVM_AGG_BLOCK;
    fvm_status s = list_dir(dir, &files, &nfiles, d), first = FVM_OK;
    if (s)
        return s;
    char **at = calloc((size_t)nblocks, sizeof *at);
    fvm_value **vals = calloc((size_t)nblocks, sizeof *vals);
    if (!at || !vals)
        first = nomem(d);
    for (int64_t i = 0; i < nfiles && first != FVM_ERR_NOMEM; i++)
        if ((s = check_partial(pl, files[i], round, sel, n, at, vals, d)) && !first)
            first = s;
    for (int64_t b = 0; b < nblocks && !first; b++)
        if (!at[b]) {
            int64_t have = 0;
            for (int64_t k = 0; k < nblocks; k++)
                have += at[k] != NULL;
            fvm_loc loc = {.file = dir};
            first = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                                 "no partial of block %lld: round %lld has %lld blocks of its %lld clients and "
                                 "%lld of them have a partial here",
                                 (long long)b, (long long)round, (long long)nblocks, (long long)n, (long long)have);
        }
    for (int64_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(at);
    if (first) {
        fvm_values_free(vals, (int)nblocks);
        return first;
    }
    *out = vals;
    return FVM_OK;
}

/* ---- the aggregation and the result ----------------------------------------------- */

/* A round being aggregated: the state of round r - 1 and the broadcast of
 * round r, which must agree (round and seed). Sets res->clients and
 * res->population. */
static fvm_status open_round(const fvm_xdev_plan *pl, const char *state_path, const char *broadcast, fvm_value **state,
                             uint64_t *seed, int64_t *r, fvm_xdev_result *res, fvm_diag *d)
{
    fvm_safetensors *bf = NULL;
    int64_t round = 0;
    uint64_t bseed = 0;
    fvm_loc loc = {.file = broadcast};
    fvm_status s = load_state(pl, state_path, state, &round, seed, d);
    if (s == FVM_OK)
        s = xdev_load(broadcast, "broadcast", pl, &bf, d);
    if (s == FVM_OK)
        s = xdev_meta_int(bf, broadcast, XDEV_ROUND, 1, UINT32_MAX - 1, r, d);
    if (s == FVM_OK && *r != round + 1)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this is the broadcast of round %lld, but the state %s is of round "
                         "%lld, whose next round is %lld",
                         (long long)*r, state_path, (long long)round, (long long)round + 1);
    if (s == FVM_OK)
        s = xdev_meta_seed(bf, broadcast, &bseed, d);
    if (s == FVM_OK && bseed != *seed)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this broadcast was prepared with seed %" PRIu64 ", and the state %s has seed %" PRIu64, bseed,
                         state_path, *seed);
    if (s == FVM_OK)
        s = xdev_meta_int(bf, broadcast, XDEV_POPULATION, 1, FVM_MAX_CLIENTS, &res->population, d);
    if (s == FVM_OK)
        s = xdev_meta_ints(bf, broadcast, XDEV_CLIENTS, 0, res->population - 1, true, &res->clients, &res->nclients, d);
    if (s == FVM_OK && res->nclients == 0)
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: the round selected no clients", XDEV_CLIENTS);
    fvm_safetensors_free(bf);
    return s;
}

/* The new state out of a round must not be one of its inputs: the plan,
 * the state, the broadcast, a file of the directory dir (of updates or
 * partials; nor a new *.safetensors file there, which the next look at the
 * directory would take for one of them). */
static fvm_status out_not_input(const fvm_xdev_plan *pl, const char *state, const char *broadcast, const char *dir,
                                const char *out, const char *what, fvm_diag *d)
{
    const char *in[] = {pl->path, state, broadcast},
               *role[] = {"the plan", "the state (--state)", "the broadcast (--broadcast)"};
    fvm_status s = fvm_file_not_input(out, "the new state's file (--out)", 3, in, role, d);
    size_t n = strlen(out), ext = strlen(".safetensors");
    if (s == FVM_OK && n >= ext && !strcmp(out + n - ext, ".safetensors") && fvm_file_in_dir(out, dir)) {
        fvm_loc loc = {.file = out};
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "the new state's file (--out) is in the directory of %s %s, where it would be taken for one "
                         "of them; write it elsewhere",
                         what, dir);
    }
    return s;
}

/* The end of round r, computed (out): the new state written to out and
 * synced, its metrics and privacy figures in res. */
static fvm_status finish_round(const fvm_xdev_plan *pl, const fvm_xdev_server_round *sr, fvm_xdev_outcome *oc,
                               const char *out, fvm_xdev_result *res, fvm_diag *d)
{
    fvm_status s = stage_state(pl, out, oc->state, sr->round, sr->seed, &res->state, d);
    if (s == FVM_OK) {
        res->round = sr->round;
        res->metrics = oc->metrics;
        oc->metrics = NULL;
        res->dp = oc->dp;
        res->epsilon = oc->epsilon;
        res->delta = oc->delta;
    }
    fvm_xdev_outcome_clear(oc);
    return s;
}

fvm_status fvm_xdev_server_aggregate(const fvm_xdev_plan *pl, const char *state_path, const char *broadcast,
                                     const char *dir, const char *out, fvm_xdev_result *res, fvm_diag *d)
{
    *res = (fvm_xdev_result){.metrics_type = pl->ph.metrics};
    fvm_value *state = NULL, *work = NULL;
    fvm_xdev_outcome oc = {0};
    int64_t r = 0;
    uint64_t seed = 0;
    fvm_status s = out_not_input(pl, state_path, broadcast, dir, out, "updates", d);
    if (s == FVM_OK)
        s = open_round(pl, state_path, broadcast, &state, &seed, &r, res, d);
    if (s == FVM_OK)
        s = read_updates(pl, dir, r, res->clients, res->nclients, &work, d);
    fvm_xdev_server_round sr = {state, seed, r, res->population, res->nclients};
    if (s == FVM_OK)
        s = fvm_xdev_aggregate(&pl->ph, &sr, work, &oc, d);
    if (s == FVM_OK)
        s = finish_round(pl, &sr, &oc, out, res, d);
    fvm_value_release(work);
    fvm_value_release(state);
    if (s)
        fvm_xdev_result_clear(res);
    return s;
}

fvm_status fvm_xdev_server_merge(const fvm_xdev_plan *pl, const char *state_path, const char *broadcast,
                                 const char *dir, const char *out, fvm_xdev_result *res, fvm_diag *d)
{
    *res = (fvm_xdev_result){.metrics_type = pl->ph.metrics};
    fvm_value *state = NULL, **parts = NULL;
    fvm_xdev_outcome oc = {0};
    int64_t r = 0, nblocks = 0;
    uint64_t seed = 0;
    fvm_status s = out_not_input(pl, state_path, broadcast, dir, out, "partials", d);
    if (s == FVM_OK)
        s = open_round(pl, state_path, broadcast, &state, &seed, &r, res, d);
    if (s == FVM_OK) {
        nblocks = (res->nclients + FVM_AGG_BLOCK - 1) / FVM_AGG_BLOCK;
        s = read_partials(pl, dir, r, res->clients, res->nclients, &parts, d);
    }
    fvm_xdev_server_round sr = {state, seed, r, res->population, res->nclients};
    if (s == FVM_OK)
        s = fvm_xdev_merge(&pl->ph, &sr, parts, nblocks, &oc, d);
    if (s == FVM_OK)
        s = finish_round(pl, &sr, &oc, out, res, d);
    fvm_values_free(parts, (int)nblocks);
    fvm_value_release(state);
    if (s)
        fvm_xdev_result_clear(res);
    return s;
}

void fvm_xdev_result_clear(fvm_xdev_result *res)
{
    fvm_value_release(res->metrics);
    free(res->clients);
    fvm_atomic_abort(&res->state);
    res->metrics = NULL;
    res->clients = NULL;
    res->nclients = 0;
}

/* Appends the line to the metrics file, synced; *fd and *before (its
 * length, -1 when the append created it) let it be undone. */
static fvm_status append_line(const char *metrics, const char *line, size_t len, int *fd, off_t *before, fvm_diag *d)
{
    fvm_loc loc = {.file = metrics};
    *before = -1;
    *fd = open(metrics, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (*fd < 0 && errno == ENOENT)
        *fd = open(metrics, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOCTTY | O_CLOEXEC, 0666);
    else if (*fd >= 0)
        *before = 0; /* an existing file: its length is read below */
    struct stat st;
    if (*fd < 0 && errno != ENXIO) /* ENXIO: a FIFO with no reader */
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open the metrics file: %s", strerror(errno));
    if (*fd >= 0 && fstat(*fd, &st) != 0)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot read the metrics file: %s", strerror(errno));
    if (*fd < 0 || !S_ISREG(st.st_mode))
        return fvm_diag_add(d, FVM_ERR_IO, &loc,
                            "the metrics file is not a regular file: a round's line must be undone when its state "
                            "cannot be written, and only a regular file can be cut back");
    if (*before >= 0)
        *before = st.st_size;
    for (size_t off = 0; off < len;) {
        ssize_t r = write(*fd, line + off, len - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ENOSPC;
            return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot write the metrics file: %s", strerror(errno));
        }
        off += (size_t)r;
    }
    if (fsync(*fd) != 0)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot write the metrics file: %s", strerror(errno));
    return FVM_OK;
}

/* Undoes append_line: the file cut back to its length before, or removed
 * when the append created it. */
static void undo_line(const char *metrics, int fd, off_t before)
{
    if (fd < 0)
        return;
    if (before < 0) {
        unlink(metrics);
    } else if (ftruncate(fd, before) == 0) {
        fsync(fd);
    }
}

fvm_metrics_round fvm_xdev_result_figures(const fvm_xdev_result *res)
{
    return (fvm_metrics_round){.round = res->round,
                               .train = res->metrics,
                               .train_type = res->metrics_type,
                               .fields = FVM_METRICS_CLIENTS | (res->dp ? FVM_METRICS_PRIVACY : 0),
                               .nclients = res->nclients,
                               .clients = res->clients,
                               .epsilon = res->epsilon,
                               .delta = res->delta};
}

fvm_status fvm_xdev_result_commit(fvm_xdev_result *res, const char *metrics, fvm_diag *d)
{
    int fd = -1;
    off_t before = -1;
    char *line = NULL;
    size_t len = 0;
    fvm_metrics_round fig = fvm_xdev_result_figures(res);
    fvm_status s = res->state.tmp ? FVM_OK : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "no new state to commit");
    if (s == FVM_OK && metrics)
        s = fvm_metrics_line(&fig, &line, &len, d);
    /* the line first, synced; then the state, whose rename cannot run out of space: a step that fails
       leaves neither */
    if (s == FVM_OK && metrics && (s = append_line(metrics, line, len, &fd, &before, d)) != FVM_OK)
        undo_line(metrics, fd, before);
    if (s == FVM_OK && (s = fvm_atomic_end(&res->state, d)) != FVM_OK)
        undo_line(metrics, fd, before);
    if (fd >= 0)
        close(fd);
    free(line);
    fvm_xdev_result_clear(res);
    return s;
}
