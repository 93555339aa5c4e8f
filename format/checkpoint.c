/* checkpoint.c - training-run checkpoints as safetensors files (see checkpoint.h). */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic.h"
#include "safetensors.h"

static void file_name(const char *dir, int64_t round, char *buf, size_t n)
{
    snprintf(buf, n, "%s/round-%06lld.safetensors", dir, (long long)round);
}

fvm_status fvm_checkpoint_save(const char *dir, int64_t round, const fvm_value *state, const fvm_type *t,
                               const fvm_run_info *run, fvm_diag *d)
{
    fvm_loc loc = {.file = dir};
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot create the checkpoint directory: %s", strerror(errno));
    char path[4096], r[32], seed[32], per[32], type[1024];
    file_name(dir, round, path, sizeof path);
    snprintf(r, sizeof r, "%lld", (long long)round);
    snprintf(seed, sizeof seed, "%" PRIu64, run->seed);
    snprintf(per, sizeof per, "%lld", (long long)run->clients_per_round);
    fvm_type_format(t, false, type, sizeof type);
    const char *meta[] = {"fedvm.round",
                          r,
                          "fedvm.seed",
                          seed,
                          "fedvm.clients_per_round",
                          per,
                          "fedvm.program",
                          run->program,
                          "fedvm.state",
                          type,
                          NULL,
                          NULL,
                          NULL,
                          NULL};
    int n = 5;
    if (run->hparams) {
        meta[2 * n] = "fedvm.hparams";
        meta[2 * n++ + 1] = run->hparams;
    }
    if (run->client_state) {
        meta[2 * n] = "fedvm.client_state";
        meta[2 * n++ + 1] = run->client_state;
    }
    return fvm_safetensors_save(path, state, t, n, meta, d);
}

int64_t fvm_checkpoint_round(const char *name)
{
    const char *pre = "round-", *suf = ".safetensors";
    size_t n = strlen(name), np = strlen(pre), ns = strlen(suf);
    if (n < np + 6 + ns || strncmp(name, pre, np) || strcmp(name + n - ns, suf))
        return -1;
    size_t digits = n - np - ns;
    if (digits > 6 && name[np] == '0') /* wider than 6 digits only without leading zeros */
        return -1;
    int64_t r = 0;
    for (size_t i = np; i < n - ns; i++) {
        if (name[i] < '0' || name[i] > '9' || r > (INT64_MAX - (name[i] - '0')) / 10)
            return -1;
        r = r * 10 + (name[i] - '0');
    }
    return r;
}

static bool checkpoint_name(const char *name, void *ctx)
{
    (void)ctx;
    return fvm_checkpoint_round(name) >= 0;
}

/* The checkpoint's metadata value must equal want (be absent for want NULL). */
static fvm_status agree(const fvm_safetensors *f, const char *path, const char *key, const char *want, const char *what,
                        fvm_diag *d)
{
    const char *got = fvm_safetensors_meta(f, key);
    if (want ? got && !strcmp(got, want) : !got)
        return FVM_OK;
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                        "this checkpoint was made with %s %s, this run has %s; resume with the same settings", what,
                        got ? got : "(none)", want ? want : "(none)");
}

fvm_status fvm_checkpoint_last(const char *dir, const fvm_type *t, const fvm_run_info *run, int64_t *round,
                               fvm_value **state, fvm_diag *d)
{
    *state = NULL;
    fvm_loc loc = {.file = dir};
    /* the temporaries of saves cut short (a run killed while it wrote) */
    fvm_atomic_clean(dir, checkpoint_name, NULL, NULL);
    DIR *dh = opendir(dir);
    if (!dh)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot read the checkpoint directory: %s", strerror(errno));
    int64_t best = -1;
    for (struct dirent *e; (e = readdir(dh));) {
        int64_t r = fvm_checkpoint_round(e->d_name);
        if (r > best)
            best = r;
    }
    closedir(dh);
    if (best < 0)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "no checkpoint (round-N.safetensors) to resume from");
    /* the name parsed is the name written: file_name(best) is that entry */
    char path[4096], seed[32], per[32], type[1024], r[32];
    file_name(dir, best, path, sizeof path);
    fvm_safetensors *f = NULL;
    fvm_status s = fvm_safetensors_load(path, &f, d);
    if (s)
        return s;
    snprintf(seed, sizeof seed, "%" PRIu64, run->seed);
    snprintf(per, sizeof per, "%lld", (long long)run->clients_per_round);
    snprintf(r, sizeof r, "%lld", (long long)best);
    fvm_type_format(t, false, type, sizeof type);
    const char *got = fvm_safetensors_meta(f, "fedvm.round");
    if (!got || strcmp(got, r)) {
        fvm_loc at = {.file = path};
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &at,
                         "this checkpoint records round %s, but its name is round %s's (a renamed or copied file?)",
                         got ? got : "(none)", r);
    }
    if (!s && !(s = agree(f, path, "fedvm.seed", seed, "--seed", d)) &&
        !(s = agree(f, path, "fedvm.clients_per_round", per, "clients per round", d)) &&
        !(s = agree(f, path, "fedvm.state", type, "the state type", d)) &&
        !(s = agree(f, path, "fedvm.hparams", run->hparams, "the hyperparameters", d)) &&
        !(s = agree(f, path, "fedvm.client_state", run->client_state, "the client state type", d)))
        s = fvm_safetensors_value(f, t, state, d);
    fvm_safetensors_free(f);
    if (s == FVM_OK)
        *round = best;
    return s;
}

fvm_status fvm_checkpoint_not_input(const char *dir, int64_t first, int64_t last, const char *path, const char *what,
                                    fvm_diag *d)
{
    struct stat in, c;
    DIR *dh = stat(path, &in) == 0 ? opendir(dir) : NULL;
    if (!dh)
        return FVM_OK; /* no such file or directory yet: nothing to overwrite */
    fvm_status s = FVM_OK;
    char p[4096];
    for (struct dirent *e; s == FVM_OK && (e = readdir(dh));) {
        int64_t r = fvm_checkpoint_round(e->d_name);
        if (r < first || r > last)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &c) == 0 && c.st_dev == in.st_dev && c.st_ino == in.st_ino) {
            fvm_loc loc = {.file = path};
            s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                             "%s is the checkpoint of round %lld in %s, which this run writes again: copy it "
                             "elsewhere first",
                             what, (long long)r, dir);
        }
    }
    closedir(dh);
    return s;
}
