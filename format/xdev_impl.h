/* xdev_impl.h - what the cross-device runtime's files share: the plan as read, and the metadata of the files exchanged. */
#ifndef FVM_XDEV_IMPL_H
#define FVM_XDEV_IMPL_H

#include "../vm/core/doc.h"
#include "../vm/ir/aggregation.h"
#include "../vm/runtime/xdev_phases.h"
#include "safetensors.h"
#include "xdev.h"

/* The plan as read: its file, its id, and its phases as the round runs
 * them (vm/runtime/xdev_phases.h); what it reads lives in its arena. */
struct fvm_xdev_plan {
    char *path;
    char id[65]; /* SHA-256 of the file, hex */
    fvm_arena arena;
    fvm_xdev_phases ph; /* the phases read (phases & FVM_XDEV_CLIENT, FVM_XDEV_SERVER) */
};

/* The metadata keys of the files, and the kinds of files. */
#define XDEV_KIND "fedvm.kind"
#define XDEV_PLAN "fedvm.plan"
#define XDEV_ROUND "fedvm.round"
#define XDEV_SEED "fedvm.seed"
#define XDEV_KEY "fedvm.key"
#define XDEV_CLIENTS "fedvm.clients"
#define XDEV_POPULATION "fedvm.population"
#define XDEV_CLIENT "fedvm.client"
#define XDEV_CLIENT_ID "fedvm.client_id"
#define XDEV_STATE_TYPE "fedvm.state"
#define XDEV_BLOCK "fedvm.block"

/* Loads the safetensors file at path, which must be of the given kind
 * ("state", "broadcast", "update", "partial", "client_state") and, unless plan is NULL, of that plan.
 * Errors name the file and say what was expected. */
fvm_status xdev_load(const char *path, const char *kind, const fvm_xdev_plan *plan, fvm_safetensors **out, fvm_diag *d);

/* The same checks of a file already read. */
fvm_status xdev_kind(const fvm_safetensors *f, const char *path, const char *kind, const fvm_xdev_plan *plan,
                     fvm_diag *d);

/* The integer metadata value of key (an error naming the file when it is
 * missing or not a decimal integer in [lo, hi]). */
fvm_status xdev_meta_int(const fvm_safetensors *f, const char *path, const char *key, int64_t lo, int64_t hi,
                         int64_t *out, fvm_diag *d);

/* The metadata value of key as a list of integers "1,5,9" (malloc'd), each
 * in [lo, hi], written as fedvm writes them (no empty item, sign, space or
 * leading zero), and with increasing, each above the one before. */
fvm_status xdev_meta_ints(const fvm_safetensors *f, const char *path, const char *key, int64_t lo, int64_t hi,
                          bool increasing, int64_t **out, int64_t *n, fvm_diag *d);

/* The run's seed in metadata fedvm.seed (an unsigned decimal), or an error
 * naming the file. */
fvm_status xdev_meta_seed(const fvm_safetensors *f, const char *path, uint64_t *seed, fvm_diag *d);

/* Appends {"name", "dtype", "shape"} (flow objects; an unknown dimension
 * null) to the document list for each tensor of t (placements stripped),
 * named below prefix ("" at the root; a bare tensor is "value") as
 * safetensors.h names a state's leaves: the "tensors" of a plan, as fedplan
 * writes them and the runtimes check them. FVM_ERR_TYPE when a part is
 * not a tensor or a struct (*bad: its path, *bad_type: its type);
 * FVM_ERR_NOMEM. Nothing is reported. */
fvm_status xdev_tensor_list(fvm_arena *a, fvm_doc *list, const char *prefix, const fvm_type *t, const char **bad,
                            const fvm_type **bad_type);

/* What a client sends of work's result (<updates, secure>): the result
 * itself, or without its last field, the new state, when it has three. */
const fvm_type *xdev_sent_type(fvm_arena *a, const fvm_type *work_result);

/* The "columns" of a client data input whose member type is member: each
 * field of a sequence of named examples with its type (a flow object), or
 * NULL when it has none (*nomem tells an allocation failure apart). */
fvm_doc *xdev_columns(fvm_arena *a, const fvm_type *member, bool *nomem);

#endif
