/* partition.c - iid, label-shard and Dirichlet partitions of a labelled dataset over clients. */
#include "partition.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"
#include "../core/rand.h"

#define DIRICHLET_ATTEMPTS 1000

fvm_status fvm_partition_parse(const char *text, fvm_partition_spec *out, fvm_diag *d)
{
    fvm_partition_spec s = {.min_size = FVM_PARTITION_MIN_SIZE};
    char *end;
    if (!strcmp(text, "iid")) {
        s.kind = FVM_PARTITION_IID;
    } else if (!strncmp(text, "shards:", 7)) {
        errno = 0;
        long long k = strtoll(text + 7, &end, 10);
        if (!text[7] || *end || errno || k < 1 || k > 1000000)
            return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                                "partition '%s': shards:K needs a number of shards per "
                                "client K >= 1",
                                text);
        s.kind = FVM_PARTITION_SHARDS;
        s.shards = k;
    } else if (!strncmp(text, "dirichlet:", 10)) {
        errno = 0;
        double a = strtod(text + 10, &end);
        if (!text[10] || *end || errno || !(a > 0) || !isfinite(a))
            return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                                "partition '%s': dirichlet:ALPHA needs a concentration "
                                "ALPHA > 0, e.g. dirichlet:0.5",
                                text);
        s.kind = FVM_PARTITION_DIRICHLET;
        s.alpha = a;
    } else {
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "unknown partition '%s'; expected iid, shards:K or "
                            "dirichlet:ALPHA",
                            text);
    }
    *out = s;
    return FVM_OK;
}

void fvm_partition_free(fvm_partition *p)
{
    free(p->offsets);
    free(p->index);
    memset(p, 0, sizeof *p);
}

/* Builds the lists from client_of[i] (the client of example i): ascending
 * indices per client. */
static fvm_status collect(const int64_t *client_of, int64_t n, int64_t nclients, fvm_partition *out, fvm_diag *d)
{
    out->nclients = nclients;
    out->offsets = calloc((size_t)nclients + 1, sizeof *out->offsets);
    out->index = malloc((size_t)(n ? n : 1) * sizeof *out->index);
    int64_t *next = malloc((size_t)nclients * sizeof *next);
    if (!out->offsets || !out->index || !next) {
        free(next);
        fvm_partition_free(out);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory partitioning %lld examples", (long long)n);
    }
    for (int64_t i = 0; i < n; i++)
        out->offsets[client_of[i] + 1]++;
    for (int64_t k = 0; k < nclients; k++) {
        out->offsets[k + 1] += out->offsets[k];
        next[k] = out->offsets[k];
    }
    for (int64_t i = 0; i < n; i++)
        out->index[next[client_of[i]]++] = i;
    free(next);
    return FVM_OK;
}

/* Example indices grouped by label (ascending within a label): label c's are
 * by_label[start[c]] .. by_label[start[c+1] - 1]. */
static int group_by_label(const int32_t *labels, int64_t n, int32_t nlabels, int64_t **by_label, int64_t **start)
{
    *start = calloc((size_t)nlabels + 1, sizeof **start);
    *by_label = malloc((size_t)(n ? n : 1) * sizeof **by_label);
    int64_t *next = malloc((size_t)nlabels * sizeof *next);
    if (!*start || !*by_label || !next) {
        free(next);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        (*start)[labels[i] + 1]++;
    for (int32_t c = 0; c < nlabels; c++) {
        (*start)[c + 1] += (*start)[c];
        next[c] = (*start)[c];
    }
    for (int64_t i = 0; i < n; i++)
        (*by_label)[next[labels[i]]++] = i;
    free(next);
    return 0;
}

static void assign_iid(fvm_rand *r, int64_t n, int64_t nclients, int64_t *perm, int64_t *client_of)
{
    fvm_rand_permutation(r, n, perm);
    int64_t base = n / nclients, rem = n % nclients, pos = 0;
    for (int64_t k = 0; k < nclients; k++)
        for (int64_t j = 0; j < base + (k < rem); j++)
            client_of[perm[pos++]] = k;
}

static void assign_shards(fvm_rand *r, const int64_t *sorted, int64_t n, int64_t nclients, int64_t per_client,
                          int64_t *perm, int64_t *client_of)
{
    int64_t nshards = nclients * per_client, base = n / nshards, rem = n % nshards;
    fvm_rand_permutation(r, nshards, perm);
    /* Shard s covers sorted[first(s) .. first(s) + size(s) - 1]. */
    for (int64_t slot = 0; slot < nshards; slot++) {
        int64_t s = perm[slot], k = slot / per_client;
        int64_t first = s * base + (s < rem ? s : rem), size = base + (s < rem);
        for (int64_t j = 0; j < size; j++)
            client_of[sorted[first + j]] = k;
    }
}

/* One Dirichlet draw; returns the size of the smallest client. */
static int64_t assign_dirichlet(fvm_rand *r, double alpha, const int64_t *by_label, const int64_t *start,
                                int32_t nlabels, int64_t nclients, int64_t *perm, double *p, int64_t *sizes,
                                int64_t *client_of)
{
    memset(sizes, 0, (size_t)nclients * sizeof *sizes);
    for (int32_t c = 0; c < nlabels; c++) {
        int64_t nc = start[c + 1] - start[c];
        fvm_rand_permutation(r, nc, perm);
        fvm_rand_dirichlet(r, alpha, (size_t)nclients, p);
        double cum = 0.0;
        int64_t lo = 0;
        for (int64_t k = 0; k < nclients; k++) {
            cum += p[k];
            int64_t hi = k == nclients - 1 ? nc : (int64_t)floor(cum * (double)nc);
            if (hi > nc)
                hi = nc;
            if (hi < lo)
                hi = lo;
            for (int64_t j = lo; j < hi; j++)
                client_of[by_label[start[c] + perm[j]]] = k;
            sizes[k] += hi - lo;
            lo = hi;
        }
    }
    int64_t least = INT64_MAX;
    for (int64_t k = 0; k < nclients; k++)
        if (sizes[k] < least)
            least = sizes[k];
    return least;
}

fvm_status fvm_partition_make(const fvm_partition_spec *spec, const int32_t *labels, int64_t n, int64_t nclients,
                              uint64_t seed, fvm_partition *out, fvm_diag *d)
{
    memset(out, 0, sizeof *out);
    if (nclients < 1 || nclients > n)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "cannot partition %lld examples over %lld clients: every "
                            "client needs at least one example",
                            (long long)n, (long long)nclients);
    if ((spec->kind == FVM_PARTITION_SHARDS && spec->shards < 1) ||
        (spec->kind == FVM_PARTITION_DIRICHLET && (!(spec->alpha > 0) || !isfinite(spec->alpha) || spec->min_size < 0)))
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "invalid partition parameters");
    int32_t nlabels = 0;
    for (int64_t i = 0; i < n; i++) {
        if (labels[i] < 0)
            return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "label %d of example %lld is negative", (int)labels[i],
                                (long long)i);
        if (labels[i] >= nlabels)
            nlabels = labels[i] + 1;
    }
    if (spec->kind == FVM_PARTITION_SHARDS && (spec->shards > n / nclients))
        return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                            "shards:%lld over %lld clients needs %lld shards, more than "
                            "the %lld examples",
                            (long long)spec->shards, (long long)nclients, (long long)(spec->shards * nclients),
                            (long long)n);

    uint32_t key[2];
    fvm_prng_key(seed, key);
    int64_t *client_of = malloc((size_t)n * sizeof *client_of);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    int64_t *by_label = NULL, *start = NULL, *sizes = NULL;
    double *p = NULL;
    fvm_status s = FVM_OK;
    if (!client_of || !perm)
        goto nomem;
    fvm_rand r;
    switch (spec->kind) {
    case FVM_PARTITION_IID:
        fvm_rand_init_fold(&r, key, 0);
        assign_iid(&r, n, nclients, perm, client_of);
        break;
    case FVM_PARTITION_SHARDS:
        if (group_by_label(labels, n, nlabels, &by_label, &start))
            goto nomem;
        fvm_rand_init_fold(&r, key, 0);
        assign_shards(&r, by_label, n, nclients, spec->shards, perm, client_of);
        break;
    case FVM_PARTITION_DIRICHLET: {
        sizes = malloc((size_t)nclients * sizeof *sizes);
        p = malloc((size_t)nclients * sizeof *p);
        if (!sizes || !p || group_by_label(labels, n, nlabels, &by_label, &start))
            goto nomem;
        int64_t best = -1;
        for (uint32_t attempt = 0; attempt < DIRICHLET_ATTEMPTS; attempt++) {
            fvm_rand_init_fold(&r, key, attempt);
            int64_t least =
                assign_dirichlet(&r, spec->alpha, by_label, start, nlabels, nclients, perm, p, sizes, client_of);
            if (least >= spec->min_size) {
                best = -1;
                break;
            }
            if (least > best)
                best = least;
        }
        if (best >= 0) {
            s = fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                             "no Dirichlet(%g) draw out of %d gave each of %lld clients "
                             "at least %lld examples (the best left one with %lld); lower the minimum client "
                             "size, raise alpha or use fewer clients",
                             spec->alpha, DIRICHLET_ATTEMPTS, (long long)nclients, (long long)spec->min_size,
                             (long long)best);
            goto done;
        }
        break;
    }
    }
    s = collect(client_of, n, nclients, out, d);
    goto done;
nomem:
    s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory partitioning %lld examples", (long long)n);
done:
    free(client_of);
    free(perm);
    free(by_label);
    free(start);
    free(sizes);
    free(p);
    return s;
}
