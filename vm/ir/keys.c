/* keys.c - the keys of rounds and clients, and keys as values (see keys.h). */
#include "keys.h"

#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"

void fvm_round_key(uint64_t seed, int64_t round, uint32_t out[2])
{
    uint32_t base[2];
    fvm_prng_key(seed, base);
    fvm_prng_fold_in(base, (uint32_t)round, out);
}

void fvm_client_key(uint64_t seed, int64_t round, int64_t client, uint32_t out[2])
{
    uint32_t r[2];
    fvm_round_key(seed, round, r);
    fvm_prng_fold_in(r, (uint32_t)client, out);
}

void fvm_client_init_key(uint64_t seed, int64_t client, uint32_t out[2])
{
    uint32_t base[2], stream[2];
    fvm_prng_key(seed, base);
    fvm_prng_fold_in(base, 0xfffffffeu, stream);
    fvm_prng_fold_in(stream, (uint32_t)client, out);
}

static bool is_key_tensor(const fvm_type *t)
{
    return t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_U32 && t->u.tensor.dims.rank == 1 &&
           t->u.tensor.dims.d[0] == 2;
}

static bool is_i64_scalar(const fvm_type *t)
{
    return t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_I64 && t->u.tensor.dims.rank == 0;
}

fvm_given fvm_given_param(const char *name, const fvm_type *t)
{
    bool server = t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_SERVER;
    bool clients = t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
    const fvm_type *m = t->kind == FVM_T_FED ? t->u.fed.member : t;
    if (!strcmp(name, "key") && (server || t == m) && is_key_tensor(m))
        return FVM_GIVEN_KEY;
    if (!strcmp(name, "client_keys") && clients && is_key_tensor(m))
        return FVM_GIVEN_CLIENT_KEYS;
    if (!strcmp(name, "client_indices") && clients && is_i64_scalar(m))
        return FVM_GIVEN_CLIENT_INDICES;
    if (!strcmp(name, "num_clients") && (server || t == m) && is_i64_scalar(m))
        return FVM_GIVEN_NUM_CLIENTS;
    if (!strcmp(name, "client_states") && clients)
        return FVM_GIVEN_CLIENT_STATES;
    return FVM_GIVEN_NONE;
}

fvm_status fvm_i64_value(int64_t v, fvm_value **out, fvm_diag *d)
{
    fvm_dims dims = {.rank = 0};
    fvm_tensor t;
    fvm_status s = fvm_tensor_alloc(&t, FVM_DTYPE_I64, &dims, d);
    if (s)
        return s;
    memcpy(fvm_tensor_data(&t), &v, sizeof v);
    if (!(*out = fvm_value_tensor_take(&t))) {
        fvm_tensor_release(&t);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

fvm_status fvm_key_value(const uint32_t key[2], fvm_value **out, fvm_diag *d)
{
    fvm_dims dims = {.rank = 1, .d = {2}};
    fvm_tensor t;
    fvm_status s = fvm_tensor_alloc(&t, FVM_DTYPE_U32, &dims, d);
    if (s)
        return s;
    memcpy(fvm_tensor_data(&t), key, 2 * sizeof *key);
    if (!(*out = fvm_value_tensor_take(&t))) {
        fvm_tensor_release(&t);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

/* Client keys made when asked: member j is fold_in(key, idx[j]), so a round
 * holds 8 bytes per client (the index) rather than a value per client. */
typedef struct keys_source {
    fvm_source base;
    uint32_t key[2];
    int64_t *idx; /* owned; NULL: member j is client j */
} keys_source;

static fvm_status keys_get(fvm_source *src, int64_t j, fvm_value **out, fvm_diag *d)
{
    const keys_source *ks = (const keys_source *)src;
    uint32_t k[2];
    fvm_prng_fold_in(ks->key, (uint32_t)(ks->idx ? ks->idx[j] : j), k);
    return fvm_key_value(k, out, d);
}

static void keys_free(fvm_source *src)
{
    keys_source *ks = (keys_source *)src;
    free(ks->idx);
    free(ks);
}

static const struct fvm_source_i keys_iface = {.get = keys_get, .free = keys_free};

fvm_status fvm_client_keys_value(const uint32_t key[2], const int64_t *idx, int64_t n, fvm_value **out, fvm_diag *d)
{
    keys_source *ks = calloc(1, sizeof *ks);
    if (ks && idx && (ks->idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx)))
        memcpy(ks->idx, idx, (size_t)n * sizeof *idx);
    if (!ks || (idx && !ks->idx)) {
        free(ks);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    ks->base.iface = &keys_iface;
    memcpy(ks->key, key, sizeof ks->key);
    if (!(*out = fvm_value_clients_source_take(n, &ks->base))) {
        keys_free(&ks->base);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

/* Client indices made when asked, like the keys above. */
typedef struct index_source {
    fvm_source base;
    int64_t *idx; /* owned; NULL: member j is client j */
} index_source;

static fvm_status index_get(fvm_source *src, int64_t j, fvm_value **out, fvm_diag *d)
{
    const index_source *is = (const index_source *)src;
    return fvm_i64_value(is->idx ? is->idx[j] : j, out, d);
}

static void index_free(fvm_source *src)
{
    index_source *is = (index_source *)src;
    free(is->idx);
    free(is);
}

static const struct fvm_source_i index_iface = {.get = index_get, .free = index_free};

fvm_status fvm_client_indices_value(const int64_t *idx, int64_t n, fvm_value **out, fvm_diag *d)
{
    index_source *is = calloc(1, sizeof *is);
    if (is && idx && (is->idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx)))
        memcpy(is->idx, idx, (size_t)n * sizeof *idx);
    if (!is || (idx && !is->idx)) {
        free(is);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    is->base.iface = &index_iface;
    if (!(*out = fvm_value_clients_source_take(n, &is->base))) {
        index_free(&is->base);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}
