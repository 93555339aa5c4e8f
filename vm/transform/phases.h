/* phases.h - the client phases of a federated function: per-client work fused with the aggregations
 * that consume it, so that clients stream through one at a time.
 *
 * In a federated function, federated_map and federated_zip make {T}@CLIENTS
 * lists, and aggregations (federated_sum, federated_mean, ...) reduce lists
 * to server values. Executed one instruction at a time, every list is held
 * whole: memory grows with the number of clients. A segment is a connected
 * group of such maps and zips together with the aggregations that consume
 * their lists, where no list made inside the group is used outside it (by
 * another op or as the result). A segment runs client by client: for each
 * client, the maps and zips compute that client's members, each aggregation
 * folds them into its partial, and the members are released, in the blocks
 * and merge order of aggregate.h, so the results are bit-identical to the
 * instruction-by-instruction ones.
 *
 * A segment runs as one step of a schedule: the function's instructions in a
 * topological order (pure functions, so any such order gives the same
 * values) with each segment contracted to one step, as close to the written
 * order as dependencies allow. A segment whose inputs would depend on its own
 * aggregations (a second broadcast of an aggregate, say) is not fused. */
#ifndef FVM_PHASES_H
#define FVM_PHASES_H

#include "../core/arena.h"
#include "../ir/ir.h"

typedef struct fvm_segment {
    int n; /* member instructions (maps, zips, aggregations), in written order */
    int *instrs; /* their indices in the function */
} fvm_segment;

typedef struct fvm_step {
    int instr; /* an instruction's index, or -1 for a segment */
    int segment; /* a segment's index, or -1 for an instruction */
    int nrelease; /* slots whose last use (in schedule order) is this step */
    int *release;
} fvm_step;

struct fvm_phases {
    int nsegments;
    fvm_segment *segments;
    int nsteps;
    fvm_step *steps;
    int *segment_of; /* per instruction: its segment, or -1 */
};
typedef struct fvm_phases fvm_phases;

/* The phases of a checked function (slots, types and liveness filled), in
 * arena a; NULL when no segment forms (or out of memory: the function then
 * runs one instruction at a time, which is always correct). */
fvm_phases *fvm_phases_plan(fvm_arena *a, const fvm_func *f);

/* Is the instruction an aggregation over a {T}@CLIENTS list? */
bool fvm_phases_is_aggregation(const fvm_instr *in);

#endif
