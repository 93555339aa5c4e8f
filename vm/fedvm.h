/* fedvm.h - the public API in one include: load, check, run, write. */
#ifndef FVM_FEDVM_H
#define FVM_FEDVM_H

#include "../format/bind.h"
#include "../format/doc.h"
#include "../format/ir_read.h"
#include "../format/ir_write.h"
#include "../format/plan.h"
#include "../format/value_doc.h"
#include "check.h"
#include "interp.h"
#include "ir.h"
#include "prng.h"
#include "status.h"
#include "types.h"
#include "value.h"

#define FVM_VERSION "0.1.0"

#endif
