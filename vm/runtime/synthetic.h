/* synthetic.h - synthetic federated classification data: FedProx's Synthetic(alpha, beta) and LEAF's generator.
 *
 * Each client k gets x: f32[n_k, dim] and y: i32[n_k] (labels in [0, classes)),
 * generated one client at a time from streams keyed by (seed, k), so any
 * client can be made alone, in any order, in constant memory, and the same
 * configuration always gives the same data.
 *
 * FedProx (Li et al., "Federated Optimization in Heterogeneous Networks",
 * 2020; its generate_synthetic scripts): n_k = floor(lognormal(4, 2)) + 50;
 * u_k ~ N(0, alpha), B_k ~ N(0, beta); W_k (dim x classes), b_k ~ N(u_k, 1);
 * v_k ~ N(B_k, 1) per dimension; x ~ N(v_k, diag(j^-1.2)), j = 1..dim;
 * y = argmax softmax(x W_k + b_k). As in that code, the second parameter of
 * N(., .) is a standard deviation. The iid variant draws one W, b ~ N(0, 1)
 * for everyone and x ~ N(0, diag(j^-1.2)) (alpha and beta unused).
 *
 * LEAF (Caldas et al., "LEAF: A Benchmark for Federated Settings", 2018; its
 * data/synthetic generator): n_k = min(floor(lognormal(3, 2)) + 5, 1000);
 * Q ~ N(0, 1) of shape (dim+1) x classes x clusters; per cluster c a mean
 * m_c ~ N(l_c, 1) (clusters values) with l_c ~ N(0, 1); per client a cluster
 * chosen uniformly, B ~ N(0, 1), a location ~ N(B, 1) per dimension,
 * x ~ N(location, diag(j^-1.2)), model info ~ N(m_c, 0.1), w = Q . info;
 * logits z = [1, x] w + N(0, 0.1) noise; and y = argmax over classes of
 * exp(z) normalised, as LEAF's code does, over the client's examples for each
 * class (not over classes).
 *
 * Labels are computed from x after rounding to f32, so they agree exactly
 * with the stored data. */
#ifndef FVM_SYNTHETIC_H
#define FVM_SYNTHETIC_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/tensor.h"

typedef enum fvm_synth_kind { FVM_SYNTH_FEDPROX, FVM_SYNTH_LEAF } fvm_synth_kind;

typedef struct fvm_synth_config {
    fvm_synth_kind kind;
    int64_t clients; /* >= 1 (default 30) */
    int64_t dim; /* features per example (default 60) */
    int64_t classes; /* >= 2 (default 10) */
    double alpha, beta; /* FedProx: >= 0 (default 1, 1: Synthetic(1,1)) */
    bool iid; /* FedProx: the iid variant */
    int64_t clusters; /* LEAF: model clusters, chosen uniformly (default 1, as LEAF) */
    int64_t min_examples; /* added to floor(lognormal): 50 FedProx, 5 LEAF */
    int64_t max_examples; /* cap on a client's examples, 0 = none: none FedProx, 1000 LEAF */
    uint64_t seed;
} fvm_synth_config;

/* The defaults above for a kind. */
FVM_API void fvm_synth_defaults(fvm_synth_kind kind, fvm_synth_config *c);

typedef struct fvm_synth fvm_synth;

/* Checks the configuration (FVM_ERR_USAGE naming the bad field: clients in
 * [1, FVM_MAX_CLIENTS], dim in [1, 1000000], classes in [2, 1000000],
 * clusters in [1, 1000], alpha and beta finite and >= 0, min_examples >= 1,
 * max_examples 0 or >= min_examples) and draws what clients share. *out is
 * owned by the caller. */
FVM_API fvm_status fvm_synth_new(const fvm_synth_config *c, fvm_synth **out, fvm_diag *d);
FVM_API void fvm_synth_free(fvm_synth *s);

/* The number of examples of client k (0 <= k < clients), without generating them. */
FVM_API int64_t fvm_synth_size(const fvm_synth *s, int64_t k);

/* Generates client k into new tensors *x (f32[n, dim]) and *y (i32[n]), each
 * owned by the caller. FVM_ERR_LIMIT when a client would pass
 * FVM_MAX_TENSOR_BYTES, FVM_ERR_NOMEM. Thread-safe (s is only read). */
FVM_API fvm_status fvm_synth_client(const fvm_synth *s, int64_t k, fvm_tensor *x, fvm_tensor *y, fvm_diag *d);

#endif
