/* fedvm.h - fedvm's public API in one include (docs/API.md): load, check and write programs, run them, train,
 * read and write datasets, checkpoints and metrics, write plans, run cross-device plans.
 *
 * Installed as <fedvm/fedvm.h>. Every header it includes is public and
 * installed; every other header of the library is internal. */
#ifndef FVM_FEDVM_H
#define FVM_FEDVM_H

/* core: errors, arenas, documents, random keys */
#include "core/arena.h"
#include "core/doc.h"
#include "core/prng.h"
#include "core/status.h"
#include "core/suggest.h"
/* the IR: types, values, programs, the checker */
#include "ir/check.h"
#include "ir/ir.h"
#include "ir/keys.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "ir/value.h"
/* bytes <-> values and programs */
#include "../format/atomic.h"
#include "../format/bind.h"
#include "../format/checkpoint.h"
#include "../format/data_bind.h"
#include "../format/dataset.h"
#include "../format/doc_io.h"
#include "../format/file.h"
#include "../format/idx.h"
#include "../format/ir_read.h"
#include "../format/ir_write.h"
#include "../format/metrics.h"
#include "../format/plans.h"
#include "../format/safetensors.h"
#include "../format/value_doc.h"
#include "../format/xdev.h"
/* the passes after checking, derivatives, plan formats */
#include "transform/passes.h"
#include "transform/plan.h"
/* running: the VM, backends, kernel providers */
#include "exec/backend.h"
#include "exec/interp.h"
#include "kernels/providers.h"
/* runtimes: training sessions, data preparation */
#include "runtime/partition.h"
#include "runtime/privacy.h"
#include "runtime/session.h"
#include "runtime/sweep.h"
#include "runtime/synthetic.h"
/* cross-device: the device and the server, over a plan's files */
#include "../format/xdev_run.h"

#endif
