/* xdev.h - cross-device plans: written by fedplan, read back (checked against their phases' programs) for 'fedvm device' and 'fedvm server' (format/PLANS.md).
 *
 * A plan is one JSON document (format version FVM_XDEV_VERSION) holding an
 * iterative process's round as a client phase and a server phase, each a
 * complete fedvm program plus its configuration. Devices and the server
 * exchange safetensors files, each written atomically and naming in its
 * metadata the plan (the SHA-256 of the plan file's bytes, as sha256sum
 * prints it), what it is and the round it belongs to:
 *
 *   state      the server state after a round (round 0: initialize's)
 *   broadcast  what prepare sends the round's clients, with the round's key
 *              and the indices of the clients the round selected
 *   update     one client's result of the client phase
 *   partial    a block of clients' updates, folded (the aggregation in stages)
 *   client_state  a client's state, kept by its device from one of its
 *              rounds to the next (a program with initialize_client); never
 *              sent to the server
 *
 * A round: the server prepares the broadcast from its state; every selected
 * client runs the client phase on its own data and the broadcast, giving
 * one update; the server aggregates the updates, in client index order
 * through the fixed reduction tree, and computes the new state and the
 * round's metrics. Keys and client sampling are those of 'fedvm run'
 * (vm/runtime/sample.h), so the same seed gives the same bits. The device
 * and the server that run a plan are xdev_run.h. */
#ifndef FVM_XDEV_H
#define FVM_XDEV_H

#include <stdint.h>

#include "bind.h"
#include "../vm/transform/plan.h"

/* The plan format version this fedvm writes and reads. */
#define FVM_XDEV_VERSION 2

/* ---- reading a plan ---------------------------------------------------------- */

typedef enum fvm_xdev_phase { FVM_XDEV_CLIENT = 1, FVM_XDEV_SERVER = 2 } fvm_xdev_phase;

typedef struct fvm_xdev_plan fvm_xdev_plan;

/* The largest plan read: 16 MiB. A plan is programs and their
 * configuration (tens of KiB for the programs of programs/; the 2NN's is
 * 32 KiB), never tensors, which travel in safetensors files; the cap keeps
 * the parsed document's memory bounded. */
#define FVM_XDEV_MAX_PLAN (UINT64_C(16) << 20)

/* Reads the plan file at path, once (a regular file of at most
 * FVM_XDEV_MAX_PLAN bytes; format/file.h), and parses it as
 * fvm_xdev_parse does. */
FVM_API fvm_status fvm_xdev_open(const char *path, unsigned phases, fvm_xdev_plan **out, fvm_diag *d);

/* The plan in len bytes of text (borrowed; name is the file name errors
 * give): loads and checks the programs of the phases asked for (a bitwise
 * or of fvm_xdev_phase). The programs must be self-contained: an
 * "include" in them is an error, and no file is read. Every problem is an
 * error located in the plan (line:col and JSON pointer): not JSON, another
 * format version or kind, a missing or malformed member, a program that
 * does not check, a configuration that does not fit its program (the
 * inputs' types and columns, the broadcast's and outputs' names and
 * tensors, the state's type and tensors, the metrics' type, a partial's
 * tensors; one state type through initialize, prepare and result; and,
 * with both phases, the server sends what the client takes and aggregates
 * what it sends). *out (free with fvm_xdev_close) is NULL on error. Before
 * the programs run, the passes after checking must run over them
 * (fvm_xdev_compile, below). */
FVM_API fvm_status fvm_xdev_parse(const char *name, const char *text, size_t len, unsigned phases, fvm_xdev_plan **out,
                                  fvm_diag *d);

/* Frees the plan; NULL is a no-op. */
FVM_API void fvm_xdev_close(fvm_xdev_plan *plan);

/* Runs the passes after checking (vm/transform/passes.h) over the programs
 * of a plan fvm_xdev_open or fvm_xdev_parse read, so that the device and
 * the server can run them. Once per plan; again is a no-op. */
FVM_API fvm_status fvm_xdev_compile(fvm_xdev_plan *plan, fvm_diag *d);

/* The plan's id: the SHA-256 of its file's bytes, 64 hex digits (owned by plan). */
FVM_API const char *fvm_xdev_id(const fvm_xdev_plan *plan);

/* Whether the plan keeps a state on each client (its client phase was
 * read, and the program has initialize_client: client.state): a device
 * then reads the client's state and keeps its new one, in a file of its
 * own (xdev_run.h). */
FVM_API bool fvm_xdev_keeps_client_state(const fvm_xdev_plan *plan);

#endif
