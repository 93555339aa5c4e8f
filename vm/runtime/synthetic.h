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

/* Client k's domain, for Agnostic FedAvg's per-example domain_id: LEAF with
 * two or more clusters, the cluster of the client's model (0..clusters-1);
 * -1 where there are no domains (FedProx, LEAF with one cluster). */
FVM_API int64_t fvm_synth_domain(const fvm_synth *s, int64_t k);

/* Generates client k into new tensors *x (f32[n, dim]) and *y (i32[n]), each
 * owned by the caller. FVM_ERR_LIMIT when a client would pass
 * FVM_MAX_TENSOR_BYTES, FVM_ERR_NOMEM. Thread-safe (s is only read). */
FVM_API fvm_status fvm_synth_client(const fvm_synth *s, int64_t k, fvm_tensor *x, fvm_tensor *y, fvm_diag *d);

/* A stand-in for FedJAX's federated EMNIST (fedjax.datasets.emnist.load_split:
 * columns pixels f32[28,28], background 1 and ink towards 0, and label i32,
 * 62 classes: digits 0-9, uppercase 10-35, lowercase 36-61; only_digits: 10),
 * for when the real files cannot be had. Each class is a glyph of one to
 * three quadratic strokes (the lowercase c k o p s u v w x y z are their
 * uppercase glyphs, smaller, as EMNIST's confusable pairs); each client is a
 * writer with its own stroke width, slant, size and darkness; each example
 * jitters the strokes and their place. Labels: digits 49%, uppercase 26%,
 * lowercase 25% (EMNIST ByClass's shares). Client ids are FedJAX's form,
 * "[16 hex digits]:f[NIST form number]_[copy]", so fedjax.datasets.emnist's
 * domain_id applies: forms 2100-2599 are the high-school writers (domain 0),
 * about 12% of the clients, the others the Census Bureau's (1). Sizes:
 * train floor(N(198, 77)) clipped to [10, 500] examples (FedJAX's 671,585
 * over 3400 writers), test about 11.5% of it. Made one client at a time, in
 * any order, the same for the same configuration. */
typedef struct fvm_emnist_config {
    int64_t clients; /* 1 to 410000 (default 3400, as FedJAX's EMNIST) */
    bool only_digits; /* the 10 digit classes only */
    uint64_t seed;
} fvm_emnist_config;
typedef struct fvm_emnist fvm_emnist;

FVM_API void fvm_emnist_defaults(fvm_emnist_config *c);
FVM_API fvm_status fvm_emnist_new(const fvm_emnist_config *c, fvm_emnist **out, fvm_diag *d);
FVM_API void fvm_emnist_free(fvm_emnist *e);
/* Client k's id (NUL-terminated, 25 bytes) and its domain (0 or 1, from the id's form number). */
FVM_API void fvm_emnist_client_id(const fvm_emnist *e, int64_t k, char id[32]);
FVM_API int fvm_emnist_domain(int64_t k);
/* The number of examples of client k in the train (test false) or test split. */
FVM_API int64_t fvm_emnist_size(const fvm_emnist *e, int64_t k, bool test);
/* Client k's examples of a split into new tensors *pixels (f32[n,28,28]) and
 * *labels (i32[n]), owned by the caller. Thread-safe (e is only read). */
FVM_API fvm_status fvm_emnist_client(const fvm_emnist *e, int64_t k, bool test, fvm_tensor *pixels, fvm_tensor *labels,
                                     fvm_diag *d);

/* A stand-in for FedJAX's federated Shakespeare (fedjax.datasets.shakespeare.
 * load_split: one column, snippets, an ndarray of bytes objects, each a
 * speaking turn of a role in a play; 715 roles in TFF's and FedJAX's split),
 * for when the real files cannot be had. The text is made, not quoted: a
 * lexicon of 1200 words spelled by a first-order chain over the letters,
 * drawn by Zipf's law (exponent 1.07), each role with 60 words of its own
 * (30% of its words) and its own line width (35-60 characters); sentences
 * capitalised, commas and stops, lines broken with '\n'. Snippets per role:
 * train 1 + floor(lognormal(2.3, 1.25)) capped at 2000 (TFF's 16,068 over
 * 715, mean 22.5, a heavy tail), test 1 + floor(0.1 n + u) (2,356 over 715);
 * a snippet about lognormal(4.6, 1) characters, at most 4000. Client ids
 * PLAY_NN_NAME_K, unique. Made one role at a time, in any order, the same
 * for the same configuration. */
typedef struct fvm_shakespeare_config {
    int64_t clients; /* 1 to 1000000 (default 715, as FedJAX's Shakespeare) */
    uint64_t seed;
} fvm_shakespeare_config;
typedef struct fvm_shakespeare fvm_shakespeare;

FVM_API void fvm_shakespeare_defaults(fvm_shakespeare_config *c);
FVM_API fvm_status fvm_shakespeare_new(const fvm_shakespeare_config *c, fvm_shakespeare **out, fvm_diag *d);
FVM_API void fvm_shakespeare_free(fvm_shakespeare *s);
/* Client k's id, NUL-terminated. */
FVM_API void fvm_shakespeare_client_id(const fvm_shakespeare *s, int64_t k, char id[64]);
/* The number of snippets of client k in the train (test false) or test split. */
FVM_API int64_t fvm_shakespeare_size(const fvm_shakespeare *s, int64_t k, bool test);
/* Client k's snippets of a split: *n of them, snippet i the bytes
 * [(*offsets)[i], (*offsets)[i + 1]) of *bytes; both malloc'd, owned by the
 * caller (free). Thread-safe (s is only read). */
FVM_API fvm_status fvm_shakespeare_client(const fvm_shakespeare *s, int64_t k, bool test, uint8_t **bytes,
                                          int64_t **offsets, int64_t *n, fvm_diag *d);

/* FedJAX's Shakespeare labels (fedjax.datasets.shakespeare): PAD 0, BOS 1,
 * EOS 2, the 86 characters of its table 3..88, any other byte OOV 89; 90
 * labels in all (programs/models/char_lstm.json's vocabulary). */
enum { FVM_SHAKESPEARE_PAD = 0, FVM_SHAKESPEARE_BOS = 1, FVM_SHAKESPEARE_EOS = 2, FVM_SHAKESPEARE_OOV = 89 };
enum { FVM_SHAKESPEARE_VOCAB = 90 };
/* A byte's label. */
FVM_API int32_t fvm_shakespeare_label(uint8_t byte);
/* fedjax.datasets.shakespeare.preprocess_client: a client's n snippets
 * (snippet i the lens[i] bytes at snippets[i], borrowed) joined as labels,
 * each with BOS before and EOS after, then split into new tensors *x and
 * *y (i32[M, sequence_length], owned by the caller): x the joined labels
 * but the last, y but the first, both padded with PAD to a multiple of the
 * sequence length. FVM_ERR_LIMIT past 2^31-1 labels. */
FVM_API fvm_status fvm_shakespeare_preprocess(int64_t n, const uint8_t *const *snippets, const int64_t *lens,
                                              int64_t sequence_length, fvm_tensor *x, fvm_tensor *y, fvm_diag *d);

/* A stand-in for FedJAX's federated Stack Overflow (fedjax.datasets.
 * stackoverflow.load_split: per client, one example per sentence with the
 * columns creation_date, title, tags, tokens and type (byte strings) and
 * score (int64); splits train, held_out and test as TFF made them: held_out
 * every example of the users whose id % 10 == 0, train the others' examples
 * dated before 2018-01-01 UTC, test theirs from then on). The text is made,
 * not quoted: 30000 made-up words (and punctuation tokens) drawn by Zipf's
 * law (exponent 1.1), each word with a favoured successor (35% of the
 * time), sentences of 1 + floor(lognormal(2.4, 0.55)) tokens; posts of a few
 * sentences sharing a date, title, tags, type and score. Sentences per user
 * 100 + floor(lognormal(5.2, 1.1)), at most 5000 (TFF kept only users with
 * 100 sentences or more; mean about 430 as TFF's 169 million over 381,000
 * users). Made one user at a time, in any order, the same for the same
 * configuration (format/DATASETS.md). */
typedef struct fvm_stackoverflow_config {
    int64_t clients; /* 1 to 1000000 (default 300) */
    uint64_t seed;
} fvm_stackoverflow_config;
typedef struct fvm_stackoverflow fvm_stackoverflow;

/* The splits, in FedJAX's order (fedjax.datasets.stackoverflow.SPLITS). */
enum { FVM_STACKOVERFLOW_TRAIN = 0, FVM_STACKOVERFLOW_HELD_OUT = 1, FVM_STACKOVERFLOW_TEST = 2 };
/* The byte-string columns of an example, in this order. */
enum {
    FVM_STACKOVERFLOW_CREATION_DATE,
    FVM_STACKOVERFLOW_TITLE,
    FVM_STACKOVERFLOW_TAGS,
    FVM_STACKOVERFLOW_TOKENS,
    FVM_STACKOVERFLOW_TYPE,
    FVM_STACKOVERFLOW_TEXT_COLUMNS
};
FVM_API extern const char *const fvm_stackoverflow_columns[FVM_STACKOVERFLOW_TEXT_COLUMNS];

/* One split of a client: n examples; text column c of example i the bytes
 * [offsets[c][i], offsets[c][i + 1]) of bytes[c]; score[i] its score. */
typedef struct fvm_stackoverflow_examples {
    int64_t n;
    uint8_t *bytes[FVM_STACKOVERFLOW_TEXT_COLUMNS];
    int64_t *offsets[FVM_STACKOVERFLOW_TEXT_COLUMNS];
    int64_t *score;
} fvm_stackoverflow_examples;

FVM_API void fvm_stackoverflow_defaults(fvm_stackoverflow_config *c);
FVM_API fvm_status fvm_stackoverflow_new(const fvm_stackoverflow_config *c, fvm_stackoverflow **out, fvm_diag *d);
FVM_API void fvm_stackoverflow_free(fvm_stackoverflow *s);
/* Client k's id: its user id, 8 digits, NUL-terminated; ids grow with k. */
FVM_API void fvm_stackoverflow_client_id(const fvm_stackoverflow *s, int64_t k, char id[16]);
/* Client k's examples in each split (out[FVM_STACKOVERFLOW_TRAIN] ...), in
 * date order; a split may have none. The arrays are malloc'd, owned by the
 * caller (fvm_stackoverflow_examples_free). Thread-safe (s is only read). */
FVM_API fvm_status fvm_stackoverflow_client(const fvm_stackoverflow *s, int64_t k, fvm_stackoverflow_examples out[3],
                                            fvm_diag *d);
FVM_API void fvm_stackoverflow_examples_free(fvm_stackoverflow_examples *e);

/* FedJAX's StackoverflowTokenizer: PAD 0, BOS 1, EOS 2, the vocabulary's
 * word i at 3 + i, any other word the one OOV bucket 3 + size. */
enum { FVM_STACKOVERFLOW_PAD = 0, FVM_STACKOVERFLOW_BOS = 1, FVM_STACKOVERFLOW_EOS = 2 };
typedef struct fvm_wordtab fvm_wordtab;
/* An empty table of words (byte strings), each with an index (its order of
 * insertion) and a count. */
FVM_API fvm_status fvm_wordtab_new(fvm_wordtab **out, fvm_diag *d);
FVM_API void fvm_wordtab_free(fvm_wordtab *t);
FVM_API int64_t fvm_wordtab_size(const fvm_wordtab *t);
/* The word's index, or -1. */
FVM_API int64_t fvm_wordtab_find(const fvm_wordtab *t, const uint8_t *w, int64_t len);
/* Adds count to the word's count, inserting it first if new (*added true then, if added is not NULL). */
FVM_API fvm_status fvm_wordtab_add(fvm_wordtab *t, const uint8_t *w, int64_t len, int64_t count, bool *added,
                                   fvm_diag *d);
/* Adds each word of tokens (its bytes split at every ' ', as Python's
 * bytes.split(b' ') and tf.strings.split with sep ' ': empty words where
 * spaces meet or end the string) with count 1. */
FVM_API fvm_status fvm_wordtab_count(fvm_wordtab *t, const uint8_t *tokens, int64_t len, fvm_diag *d);
/* The words with the k largest counts (all if k exceeds the size): count
 * descending, then bytes ascending; a new table of them in that order, with
 * their counts. */
FVM_API fvm_status fvm_wordtab_top(const fvm_wordtab *t, int64_t k, fvm_wordtab **out, fvm_diag *d);
/* Word i (0 <= i < size): its bytes (borrowed), length and count. */
FVM_API const uint8_t *fvm_wordtab_word(const fvm_wordtab *t, int64_t i, int64_t *len, int64_t *count);
/* StackoverflowTokenizer.as_preprocess_batch(max_length) on n examples'
 * tokens (example i the lens[i] bytes at tokens[i], borrowed) with the
 * vocabulary vocab: BOS, each word's id, EOS; x that without its last id
 * and y without its first, each truncated or padded with PAD to max_length;
 * new tensors *x and *y (i32[n, max_length]) owned by the caller. */
FVM_API fvm_status fvm_stackoverflow_preprocess(const fvm_wordtab *vocab, int64_t n, const uint8_t *const *tokens,
                                                const int64_t *lens, int64_t max_length, fvm_tensor *x, fvm_tensor *y,
                                                fvm_diag *d);

#endif
