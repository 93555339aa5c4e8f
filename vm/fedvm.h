/* fedvm.h - the public API in one include: load, check, run, write. */
#ifndef FVM_FEDVM_H
#define FVM_FEDVM_H

#include "../format/bind.h"
#include "core/doc.h"
#include "../format/ir_read.h"
#include "../format/ir_write.h"
#include "../format/plan.h"
#include "../format/value_doc.h"
#include "ir/check.h"
#include "exec/interp.h"
#include "transform/passes.h"
#include "transform/plans.h"
#include "ir/ir.h"
#include "core/prng.h"
#include "core/status.h"
#include "ir/types.h"
#include "ir/value.h"

#define FVM_VERSION "0.1.0"

#endif
