/* providers.h - the kernel providers by name: what a VM computes with (fvm_vm_config.kernels).
 *
 * The providers' interface, a table of kernels a device fills in, is
 * provider.h (internal to the library: a provider is built into it). */
#ifndef FVM_PROVIDERS_H
#define FVM_PROVIDERS_H

#include "../core/status.h"

typedef struct fvm_kernels fvm_kernels;

/* The provider named name ("cpu", the default: vectorised loops, fedvm's
 * f32 product kernel and OpenBLAS; "portable": plain C, no SIMD, no BLAS),
 * NULL when there is none. Static storage. */
FVM_API const fvm_kernels *fvm_kernels_lookup(const char *name);

#endif
