# fedvm - federated computations as a portable IR, checked and run by a small VM.
#
# make deps     install missing Debian packages (apt-get; run as root)
# make          build bin/fedvm, bin/fedplan, lib/libfedvm.a and lib/libfedvm.so
# make test     unit, golden, invalid-input, command-line, backend-conformance and
#               fidelity tests (the mpi backend's under mpirun when Open MPI is installed)
# make check-f32math-exhaustive  the f32 LSTM gates' exp, sigmoid and tanh over every f32 input (minutes)
# make test-beam  the Beam pipelines of 'fedplan --to beam' on Beam's direct runner (npm)
# make wasm     fedvm device in WebAssembly (Emscripten) into build/wasm; make test-wasm
#               runs it in Node and in headless Chromium against the native one
# make asan     the whole test suite under AddressSanitizer + UBSan
# make fuzz     every decoder's libFuzzer target over its corpus, a minute each (clang)
# make fresh-root  make demo, make test and make install in a new Debian 12 root (debootstrap; as root)
# make bench    benchmarks: fedvm against NumPy, PyTorch and the SGEMM peak (BENCHMARKS.md)
# make bench-doc  the same, its tables written into BENCHMARKS.md
# make bench-cohort  a round's time and memory over up to 1,000,000 clients (BENCHMARKS.md)
# make demo     the main job on a built-in default (installs missing packages first)
# make install  PREFIX=/usr/local DESTDIR=   (uninstall likewise)
# make format   the C sources in .clang-format's style (make test checks it)
# make MPI=no   any of these without Open MPI (the mpi backend then says it is missing)
# make PLOT=no  without cairo ('fedvm plot' then says it is missing)
# make NO_BLAS=1  without OpenBLAS, for small devices: the same bits where fedvm's own kernels compute
# make test-noblas  a build without OpenBLAS against this one, bit for bit (build-noblas/)
# make CROSS=aarch64-linux-gnu-  a cross build with Debian's cross toolchain (make cross-deps)
# make test-arm64 / test-s390x  cross builds run under qemu-user against this one, bit for bit

# ---- settings --------------------------------------------------------------
CC       ?= cc
# CROSS=TRIPLET- builds for another machine with Debian's cross toolchain
# (crossbuild-essential-ARCH; make cross-deps), e.g. CROSS=aarch64-linux-gnu-:
# CC is TRIPLET-gcc and PKG_CONFIG reads the target's .pc files (multiarch
# -dev packages, ARCH's). CC=... alone works too: a compiler whose target
# (-dumpmachine) is not this machine's makes the build a cross build.
CROSS    ?=
ifneq ($(CROSS),)
ifeq ($(origin CC),default)
CC       := $(CROSS)gcc
endif
endif
TARGET   := $(shell $(CC) -dumpmachine 2>/dev/null)
CROSSING := $(if $(filter $(shell uname -m)-%,$(TARGET)),,yes)
MULTIARCH   := $(shell $(CC) -print-multiarch 2>/dev/null)
ifeq ($(CROSSING),yes)
PKG_CONFIG ?= PKG_CONFIG_LIBDIR=/usr/lib/$(MULTIARCH)/pkgconfig:/usr/share/pkgconfig pkg-config
else
PKG_CONFIG ?= pkg-config
endif
PREFIX   ?= /usr/local
DESTDIR  ?=
BUILD    ?= build
BIN      ?= bin
LIBD     ?= lib
OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wwrite-strings -Wno-unused-parameter -Wvla -Werror=implicit-function-declaration
CSTD     := -std=c11 -D_GNU_SOURCE
PKGS     := jansson yaml-0.1 sqlite3 zlib libdeflate msgpack libprotobuf-c nettle
# OpenBLAS's pthread build (Debian's default): it is safe to call from
# several threads at once, which fedvm's threads backend does (each call on
# one thread; see fvm_vm_new). The serial build is not: concurrent calls
# share its buffers and give wrong results.
# The binaries find that build by its own directory (rpath), whatever the
# system's libopenblas.so.0 alternative points to.
# NO_BLAS=1 builds without OpenBLAS (for small devices): the products the
# CPU kernels would hand to it are fused multiply-add chains in order, the
# portable provider's (vm/kernels/noblas/), so the bits are those of
# --kernels portable, and the same as with OpenBLAS wherever fedvm's own
# kernels compute (format/SPEC.md, reproducibility).
NO_BLAS  ?=
BLAS_PTHREAD := /usr/lib/$(MULTIARCH)/openblas-pthread
ifeq ($(NO_BLAS),1)
BLAS_CFLAGS := -Ivm/kernels/noblas -DFVM_NO_BLAS
BLAS_LIBS   :=
else ifneq ($(wildcard $(BLAS_PTHREAD)/libopenblas.so),)
BLAS_CFLAGS := -I/usr/include/$(MULTIARCH)/openblas-pthread
BLAS_LIBS   := -L$(BLAS_PTHREAD) -Wl,-rpath,$(BLAS_PTHREAD) -lopenblas
else
BLAS_CFLAGS := $(shell $(PKG_CONFIG) --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell $(PKG_CONFIG) --libs openblas 2>/dev/null || echo -lopenblas)
endif
CFLAGS   ?= $(OPT)
# The library exports only what its public headers mark FVM_API (docs/API.md);
# calls inside it to its own exported functions bind locally.
VISIBILITY := -fvisibility=hidden -fno-semantic-interposition
ALL_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) -fPIC $(VISIBILITY) -MMD -MP \
             $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null) $(BLAS_CFLAGS) -I$(BUILD)/gen
LIBS     = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null || echo -ljansson -lyaml -lsqlite3 -lz -ldeflate -lmsgpackc -lprotobuf-c -lnettle) \
           $(BLAS_LIBS) -lm -lpthread
TEST_LIBS = $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)
# cairo (with fontconfig for its fonts) draws 'fedvm plot' pictures; only the
# fedvm command links them, not the library.
# PLOT=auto draws with them when their development files are found, yes
# requires them, no leaves them out ('fedvm plot' then says so).
PLOT     ?= auto
ifneq ($(PLOT),no)
PLOT_CFLAGS := $(shell $(PKG_CONFIG) --cflags cairo fontconfig 2>/dev/null)
PLOT_LIBS   := $(shell $(PKG_CONFIG) --libs cairo fontconfig 2>/dev/null)
endif
ifeq ($(PLOT)$(PLOT_LIBS),yes)
$(error PLOT=yes but cairo's development files were not found (make deps installs libcairo2-dev))
endif
# Open MPI, for the mpi backend (vm/exec/backend_mpi.c): auto builds it when
# Open MPI's development files are found (Debian's libopenmpi-dev), yes
# requires them, no leaves it out; without it '--backend mpi' says so and
# everything else builds and runs the same.
MPI      ?= auto
ifneq ($(MPI),no)
# A cross build asks only the target's pkg-config: this machine's mpicc
# would give its own Open MPI's paths.
MPI_SHOWME := $(if $(CROSSING),false,mpicc)
MPI_CFLAGS := $(shell $(PKG_CONFIG) --cflags ompi-c 2>/dev/null || $(MPI_SHOWME) --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell $(PKG_CONFIG) --libs ompi-c 2>/dev/null || $(MPI_SHOWME) --showme:link 2>/dev/null)
endif
ifeq ($(MPI)$(MPI_LIBS),yes)
$(error MPI=yes but Open MPI's development files were not found (make deps installs libopenmpi-dev))
endif
PYTHON   ?= python3
# The Python package (tools/python/fedvm, docs/PYTHON.md) goes where Debian's
# python3 looks under PREFIX: PREFIX/lib/python3.X/dist-packages.
SYS_PYTHON := $(firstword $(wildcard /usr/bin/python3) python3)
PY_SITE  ?= $(PREFIX)/lib/python$(shell $(SYS_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages
PY_SRC   := $(wildcard tools/python/fedvm/*.py tools/python/fedvm/*/*.py)
VERSION  := $(shell sed -n 's/^\#define FVM_VERSION "\(.*\)"/\1/p' vm/core/api.h)

# Debian packages the build, the tests and the demo need.
DEB_PACKAGES := build-essential pkg-config libjansson-dev libyaml-dev \
                libopenblas-pthread-dev libcmocka-dev python3 python3-jsonschema \
                libsqlite3-dev zlib1g-dev libdeflate-dev libmsgpack-dev libprotobuf-c-dev protobuf-c-compiler \
                python3-msgpack python3-numpy python3-pytest python3-yaml dataset-fashion-mnist \
                libcairo2-dev libfontconfig-dev fonts-dejavu-core graphviz nettle-dev clang-format \
                libopenmpi-dev openmpi-bin iproute2

# ---- sources ---------------------------------------------------------------
# The library's layers, bottom up (docs/ARCHITECTURE.md): each folder may
# include only the ones before it (tests/check_layers.sh checks it).
LAYERS    := vm/core vm/ir vm/kernels vm/transform vm/exec vm/runtime format
LIB_SRC   := $(foreach d,$(LAYERS),$(wildcard $(d)/*.c)) $(if $(filter 1,$(NO_BLAS)),vm/kernels/noblas/cblas.c)
# Protocol buffer schemas (tf.Example) compiled by protoc-c into $(BUILD)/gen.
PROTO     := $(wildcard format/proto/*.proto)
PROTO_C   := $(PROTO:format/proto/%.proto=$(BUILD)/gen/%.pb-c.c)
PROTO_H   := $(PROTO_C:.c=.h)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(PROTO_C:.c=.o)
TOOLS     := fedvm fedplan
TOOL_BIN  := $(TOOLS:%=$(BIN)/%)
# The fedvm command: tools/fedvm.c and its subcommands tools/fedvm_*.c.
# Without cairo (PLOT=no, or not found) tools/plot_none.c stands in for fedvm_plot.c.
FEDVM_OBJ := $(patsubst %.c,$(BUILD)/%.o,tools/fedvm.c $(filter-out $(if $(PLOT_LIBS),,tools/fedvm_plot.c),$(wildcard tools/fedvm_*.c)) \
             $(if $(PLOT_LIBS),,tools/plot_none.c))
# The fedplan command: tools/fedplan.c and the helpers it shares with fedvm.
FEDPLAN_OBJ := $(BUILD)/tools/fedplan.o $(BUILD)/tools/fedvm_cli.o
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# The public headers, the only ones installed: vm/fedvm.h and every header it
# includes (tests/check_api.sh checks the list against the includes, and that
# libfedvm.so exports exactly their FVM_API functions). The others are internal.
PUBLIC_H  := vm/fedvm.h vm/core/api.h vm/core/arena.h vm/core/doc.h vm/core/prng.h vm/core/status.h vm/core/suggest.h \
             vm/ir/check.h vm/ir/ir.h vm/ir/keys.h vm/ir/ops.h vm/ir/tensor.h vm/ir/types.h vm/ir/value.h \
             vm/ir/ops.def vm/ir/attrs.def vm/kernels/providers.h vm/transform/passes.h vm/transform/plan.h \
             vm/exec/backend.h vm/exec/interp.h vm/runtime/partition.h vm/runtime/privacy.h vm/runtime/session.h vm/runtime/figures.h vm/runtime/named_text.h vm/runtime/sweep.h \
             vm/runtime/synthetic.h format/atomic.h format/bind.h format/checkpoint.h \
             format/data_bind.h format/dataset.h format/doc_io.h format/file.h format/idx.h format/ir_read.h \
             format/ir_write.h format/metrics.h format/plans.h format/safetensors.h format/value_doc.h format/xdev.h format/xdev_run.h

.PHONY: check-f32math-exhaustive test-noblas cross-deps test-arm64 test-s390x test-cross format format-check all deps bench-deps bench-blas test test-run demo-run test-beam fresh-root asan tsan fuzz fuzz-build fuzz-long fuzz-open bench bench-doc bench-cohort demo pydoc install uninstall clean

all: $(TOOL_BIN) $(LIBD)/libfedvm.a $(LIBD)/libfedvm.so

# Keep objects of the test binaries (make would delete them as intermediates).
.SECONDARY:

$(BUILD)/%.o: %.c | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: format/proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=format/proto --c_out=$(BUILD)/gen $<

# The Beam pipeline's driver (format/beam_pipeline.js) as a C string for the
# beam plan writer: each line a string literal, with \, " and ? escaped
# (the last so that '??' is never a trigraph).
$(BUILD)/gen/beam_pipeline.h: format/beam_pipeline.js
	@mkdir -p $(BUILD)/gen
	{ echo 'static const char beam_pipeline_js[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; \
	  echo '    "";'; } >$@.tmp && mv $@.tmp $@

$(BUILD)/format/plan_beam.o: $(BUILD)/gen/beam_pipeline.h

$(BUILD)/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c | $(PROTO_H)
	$(CC) $(CSTD) $(CFLAGS) -fPIC $(VISIBILITY) -MMD -MP -I$(BUILD)/gen $(shell $(PKG_CONFIG) --cflags libprotobuf-c) -c $< -o $@

$(LIBD)/libfedvm.a: $(LIB_OBJ)
	@mkdir -p $(LIBD)
	rm -f $@
	ar rcs $@ $^

$(LIBD)/libfedvm.so: $(LIB_OBJ)
	@mkdir -p $(LIBD)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libfedvm.so.0 -Wl,-Bsymbolic-functions -o $@ $^ $(LIBS)
	ln -sf libfedvm.so $(LIBD)/libfedvm.so.0

$(BUILD)/tools/fedvm_plot.o: ALL_CFLAGS += $(PLOT_CFLAGS)
ifneq ($(MPI_LIBS),)
$(BUILD)/vm/exec/backend_mpi.o: ALL_CFLAGS += -DFVM_HAVE_MPI $(MPI_CFLAGS)
LIBS += $(MPI_LIBS)
endif

# The commands link libfedvm.so, so they can use its public API only; they
# find it beside them ($ORIGIN: lib/ next to bin/, here and once installed).
TOOL_LDFLAGS = -L$(LIBD) -lfedvm -Wl,-rpath,'$$ORIGIN/$(shell realpath -m --relative-to=$(BIN) $(LIBD))' -lm
$(BIN)/fedvm: $(FEDVM_OBJ) $(LIBD)/libfedvm.so
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(FEDVM_OBJ) $(TOOL_LDFLAGS) $(PLOT_LIBS)

$(BIN)/fedplan: $(FEDPLAN_OBJ) $(LIBD)/libfedvm.so
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(FEDPLAN_OBJ) $(TOOL_LDFLAGS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIBD)/libfedvm.a
	$(CC) $(CFLAGS) -o $@ $< $(LIBD)/libfedvm.a $(TEST_LIBS) $(LIBS)

# ---- tests -----------------------------------------------------------------
# Each cmocka binary runs from the repository root; tests/run_invalid.sh
# checks every invalid input's error through the fedvm command,
# tests/run_data.sh the 'fedvm data' commands and the files they write, and
# tests/run_train.sh training runs over datasets, tests/run_memory.sh that
# a round's peak memory does not grow with its clients, tests/run_cohort.sh
# bench-cohort's measurement at CI sizes (FedSGD over up to 100,000 clients,
# the 2NN over 3,000, seq and 2 mpi ranks: memory flat, time linear; about
# 30 s of CPU), tests/run_backends.sh
# the same bits on every backend (seq, threads, and mpi on 1-3 ranks under
# mpirun when it is installed), tests/run_multihost.sh mpi across hosts made of
# network namespaces (as root; a killed rank, resume on other hosts; about 40 s
# on a loaded machine, so in the plain build only), tests/run_providers.sh training runs with the
# portable kernel provider against the CPU one, tests/run_plot.sh the
# pictures 'fedvm plot' draws of them, tests/run_plan.sh the fedplan
# command and its plans (the pictures through Graphviz's dot),
# tests/run_forms.sh the round forms, run against their sources,
# tests/run_xdev.sh cross-device plans run by fedvm device and fedvm server
# processes against fedvm run, and
# tests/run_fidelity.sh what training must reproduce (the demo's accuracy
# against the NumPy FedAvg of bench/, FedProx's stability on
# Synthetic(1,1); about a minute on two cores, so in the plain build only,
# not under the sanitizers); tests/check_format_docs.py that format/SPEC.md
# and the schema match the op table, and tests/check_readme.py that every
# command of README.md, run in order in a scratch directory, prints what the
# README shows (about 30 s, four times that under ASan, so in the plain build
# only; the Beam pipeline's lines in 'make test-beam').
# The flags above come from pkg-config and the installed libraries when make
# reads this file, so on a new machine the targets that install packages
# first (test, demo) build in a second make that reads it after 'deps'.
# Without a -j of its own (make -j1 test: one check at a time), make test runs one check a core.
test: deps
	+@$(MAKE) --no-print-directory --output-sync=target $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) test-run

# Each check of make test is a target of its own (check-NAME), so that make -jN
# test runs N at a time (CI runs make with -j$(nproc)); -O prints a check's
# output whole when it ends. Every check works in its own temporary directory.
# The longest checks come first, so that the last to start are short ones.
CHECK_UNITS := $(TEST_BIN:$(BUILD)/tests/%=check-unit-%)
CHECK_SCRIPTS := cohort cli data stackoverflow train client_state hparams sweep algos privacy robust compress invalid memory providers plot
CHECKS := check-readme check-xdev check-fidelity check-backends $(CHECK_SCRIPTS:%=check-%) check-multihost \
  check-python check-plan check-forms check-hostile $(CHECK_UNITS) check-layers check-format check-api \
  check-reference check-accountant check-safetensors check-format-docs check-install
.PHONY: $(CHECKS)

test-run: $(CHECKS)
	@echo "all tests passed"

$(CHECKS): all $(TEST_BIN)

$(CHECK_UNITS): check-unit-%:
	@echo "== $(BUILD)/tests/$*"; FVM_BIN=$(BIN) $(BUILD)/tests/$*

$(CHECK_SCRIPTS:%=check-%):
	@tests/run_$(@:check-%=%).sh $(BIN)/fedvm

check-layers:
	@tests/check_layers.sh $(BUILD)
check-format:
	@$(MAKE) --no-print-directory format-check
check-api:
	@tests/check_api.sh $(LIBD)/libfedvm.so $(PUBLIC_H)
check-hostile:
	@tests/run_hostile.sh $(BIN)
check-backends:
	@tests/run_backends.sh $(BIN)/fedvm $(BUILD)/tests/test_golden
check-multihost:
	@if [ "$(BUILD)" = build ]; then tests/run_multihost.sh $(BIN)/fedvm; \
	  else echo "run_multihost: skipped in $(BUILD) (run it with 'make test')"; fi
check-plan:
	@tests/run_plan.sh $(BIN)/fedplan
check-forms:
	@tests/run_forms.sh $(BIN)
check-xdev:
	@tests/run_xdev.sh $(BIN)
check-fidelity:
	@if [ "$(BUILD)" = build ]; then tests/run_fidelity.sh $(BIN)/fedvm; \
	  else echo "run_fidelity: skipped in $(BUILD) (run it with 'make test')"; fi
check-reference:
	@py=$$(for p in $(PYTHON) /usr/bin/python3; do $$p -c 'import numpy' 2>/dev/null && { echo $$p; break; }; done); \
	  if [ -z "$$py" ]; then echo "reference.py: no python3 with numpy (make deps installs python3-numpy)"; exit 1; fi; \
	  $$py tests/golden/reference.py --check
# exp, sigmoid and tanh of vm/kernels/f32math.h (the f32 LSTM gates) against double over all 2^32 f32
# inputs: their error bounds (a few minutes of one core, so not in make test, whose test_f32math
# samples a stride of the inputs)
check-f32math-exhaustive: $(BUILD)/tests/test_f32math
	$(BUILD)/tests/test_f32math --exhaustive
# the accountant against the library through ctypes: a sanitized library cannot be loaded into
# Python (tests/run_privacy.sh and test_privacy check it there through fedvm and C)
check-accountant:
	@if [ "$(BUILD)" = build ]; then $(SYS_PYTHON) tests/dp/accountant.py --check $(LIBD)/libfedvm.so; \
	  else echo "accountant.py --check: skipped in $(BUILD) (run it with 'make test')"; fi
check-safetensors:
	@d=$$(mktemp -d) && { FVM_SAFETENSORS_OUT=$$d $(BUILD)/tests/test_safetensors >$$d/log 2>&1 || { cat $$d/log; false; }; } && /usr/bin/python3 tests/check_safetensors.py $$d; rc=$$?; rm -rf $$d; exit $$rc
check-format-docs:
	@$(PYTHON) tests/check_format_docs.py --fedvm $(BIN)/fedvm
check-python:
	@if [ "$(BUILD)" = build ]; then FEDVM_BIN=$(BIN) $(SYS_PYTHON) -m pytest -q -p no:cacheprovider tests/python; \
	  else echo "tests/python: skipped in $(BUILD) (run it with 'make test')"; fi
check-readme:
	@if [ "$(BUILD)" = build ]; then $(PYTHON) tests/check_readme.py $(BIN); \
	  else echo "check_readme: skipped in $(BUILD) (run it with 'make test')"; fi
check-install:
	+@if [ "$(BUILD)" = build ]; then tests/run_install.sh; fi

# The pipelines 'fedplan --to beam' writes, run on Beam's direct runner against
# 'fedvm run' (tests/run_beam.sh, about two minutes): needs node and npm
# (Debian's nodejs and npm are installed when node is missing) and the npm
# package apache-beam, installed once into $(BUILD)/beam (from the npm
# registry), so it is not part of 'make test'.
BEAM_DEB_PACKAGES := nodejs npm
test-beam: all
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  echo "installing: $(BEAM_DEB_PACKAGES)"; \
	  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get install -y --no-install-recommends $(BEAM_DEB_PACKAGES) || \
	  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $(BEAM_DEB_PACKAGES); }; \
	fi
	@tests/run_beam.sh $(BIN) $(BUILD)/beam

# ---- builds without BLAS, and for other machines ----------------------------
# make test-noblas: fedvm built without OpenBLAS and cairo (NO_BLAS=1 PLOT=no,
# in build-noblas/) runs its golden cases (test_golden), its kernels' and
# providers' tests, 'fedvm plot' (which must say it has no cairo), and tests/run_bits.sh
# against this build: every golden program, the datasets, FedAvg on
# Synthetic(1,1) and the 2NN on Fashion-MNIST give the same bytes; without
# BLAS the CNN's conv2d gives the portable kernels' bits on the cpu ones too.
NOBLAS_DIR := build-noblas
NOBLAS_TESTS := test_golden test_kernels test_providers
test-noblas: all
	+@$(MAKE) --no-print-directory NO_BLAS=1 MPI=no PLOT=no BUILD=$(NOBLAS_DIR) BIN=$(NOBLAS_DIR)/bin \
	  LIBD=$(NOBLAS_DIR)/lib all $(NOBLAS_TESTS:%=$(NOBLAS_DIR)/tests/%)
	@set -e; for t in $(NOBLAS_TESTS); do echo "== $(NOBLAS_DIR)/tests/$$t"; $(NOBLAS_DIR)/tests/$$t; done
	@out=$$($(NOBLAS_DIR)/bin/fedvm plot m.jsonl -o m.svg 2>&1); rc=$$?; \
	  if [ $$rc -eq 1 ] && echo "$$out" | grep -q "built without cairo"; then echo "fedvm plot without cairo: says so"; \
	  else echo "FAIL: fedvm plot without cairo: exit $$rc: $$out"; exit 1; fi
	@tests/run_bits.sh --no-blas $(BIN)/fedvm $(NOBLAS_DIR)/bin/fedvm

# make cross-deps CROSS_ARCH=arm64 (or s390x, big-endian): Debian's cross
# toolchain, qemu-user and the -dev packages of the target's libraries
# (multiarch; the architecture is added to dpkg's first).
# make test-arm64, make test-s390x: fedvm cross-built for that machine
# (CROSS=TRIPLET-, in build-ARCH/; MPI and cairo as found for the target:
# make cross-deps installs neither, so without them) runs under
# qemu-user: the golden cases, the kernels' and providers' tests, the file
# formats' (safetensors, datasets, the cross-device wire format), then
# tests/run_bits.sh against this machine's build: the same bytes.
CROSS_ARCH ?= arm64
CROSS_TRIPLET_arm64 := aarch64-linux-gnu
CROSS_TRIPLET_s390x := s390x-linux-gnu
CROSS_QEMU_arm64 := qemu-aarch64
CROSS_QEMU_s390x := qemu-s390x
CROSS_TRIPLET = $(CROSS_TRIPLET_$(CROSS_ARCH))
CROSS_DIR     = build-$(CROSS_ARCH)
CROSS_DEV     := libjansson-dev libyaml-dev libsqlite3-dev zlib1g-dev libdeflate-dev libmsgpack-dev \
                 libprotobuf-c-dev nettle-dev libcmocka-dev libopenblas-pthread-dev
CROSS_TESTS   := test_golden test_kernels test_providers test_safetensors test_file test_dataset test_wire
cross-deps:
	@if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	if ! dpkg --print-foreign-architectures | grep -qx '$(CROSS_ARCH)'; then \
	  echo "adding the architecture $(CROSS_ARCH) to dpkg's"; \
	  $$SUDO dpkg --add-architecture $(CROSS_ARCH) && $$SUDO apt-get update -qq; \
	fi
	$(call install_missing,crossbuild-essential-$(CROSS_ARCH) qemu-user $(CROSS_DEV:%=%:$(CROSS_ARCH)))

test-arm64 test-s390x: test-%:
	+@$(MAKE) --no-print-directory CROSS_ARCH=$* cross-deps
	+@$(MAKE) --no-print-directory CROSS_ARCH=$* test-cross

test-cross: all
	+@$(MAKE) --no-print-directory CROSS=$(CROSS_TRIPLET)- BUILD=$(CROSS_DIR) BIN=$(CROSS_DIR)/bin \
	  LIBD=$(CROSS_DIR)/lib all $(CROSS_TESTS:%=$(CROSS_DIR)/tests/%)
	@readelf -h $(CROSS_DIR)/bin/fedvm | grep -q "Machine: *$(CROSS_MACHINE_$(CROSS_ARCH))" || \
	  { echo "$(CROSS_DIR)/bin/fedvm is not a $(CROSS_ARCH) program"; exit 1; }
	@set -e; for t in $(CROSS_TESTS); do echo "== $(CROSS_DIR)/tests/$$t (qemu)"; \
	  FVM_BIN=$(CROSS_DIR)/bin $(CROSS_QEMU_$(CROSS_ARCH)) $(CROSS_DIR)/tests/$$t; done
	@tests/run_bits.sh $(BIN)/fedvm $(CROSS_DIR)/bin/fedvm $(CROSS_QEMU_$(CROSS_ARCH))
CROSS_MACHINE_arm64 := AArch64
CROSS_MACHINE_s390x := IBM S/390

# ---- WebAssembly ------------------------------------------------------------
# fedvm device (the client phase of a cross-device plan) compiled with
# Emscripten (Debian's emscripten, installed when emcc is missing) into
# $(WASM): fedvm-device.js runs it in Node on the real files (node
# build/wasm/fedvm-device.js ARGS as 'fedvm device ARGS'), web/ in a browser
# (web/device.html, tools/wasm/device.html). It is the library without
# OpenBLAS, SQLite, YAML, MPI or cairo (the CBLAS calls of NO_BLAS=1,
# vm/kernels/noblas/; tools/wasm/stand-ins.c: data from .json files) and with jansson and nettle's SHA-256
# compiled from their Debian source packages (apt-get source, no deb-src
# line needed; kept in $(WASM)/dep). Its linker runs Debian's node-acorn,
# which a Node from elsewhere finds through NODE_PATH. make test-wasm runs
# tests/run_wasm.sh (about a minute): the updates in Node and in headless Chromium (Debian's chromium, installed
# when missing) against the native fedvm device's, and a round with browser
# clients served over HTTP against fedvm run.
WASM         := $(BUILD)/wasm
EMCC         ?= emcc
WASM_DEB_PACKAGES := emscripten nodejs chromium
WASM_DEPS_SRC := jansson nettle
WASM_SRC     := $(filter-out format/client_store.c format/data_bind.c $(wildcard format/dataset*.c) format/idx.c \
                  format/yaml_read.c format/doc_write.c format/plan_beam.c,$(LIB_SRC)) \
                tools/fedvm_xdev.c tools/fedvm_cli.c tools/wasm/device.c tools/wasm/stand-ins.c vm/kernels/noblas/cblas.c
WASM_OBJ     := $(WASM_SRC:%.c=$(WASM)/obj/%.o)
WASM_CFLAGS  := $(CSTD) $(WARN) -O2 -MMD -MP -I$(WASM)/dep/include -Ivm/kernels/noblas -DFVM_NO_BLAS
WASM_LDFLAGS := -O2 -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=33554432
.PHONY: wasm wasm-deps install-wasm-deps test-wasm

wasm: wasm-deps
	+@$(MAKE) --no-print-directory $(WASM)/fedvm-device.js $(WASM)/web/fedvm-device.js $(WASM)/web/device.html

wasm-deps:
	@if ! command -v $(EMCC) >/dev/null || ! command -v node >/dev/null || ! command -v chromium >/dev/null; then \
	  $(MAKE) --no-print-directory install-wasm-deps; fi

install-wasm-deps:
	$(call install_missing,$(WASM_DEB_PACKAGES))

# jansson and nettle from Debian's source packages, with the configuration
# their build would find for Emscripten's libc; compiled once.
$(WASM)/dep/stamp:
	@rm -rf $(WASM)/dep && mkdir -p $(WASM)/dep/apt/lists/partial $(WASM)/dep/include/nettle $(WASM)/dep/obj
	echo 'deb-src http://deb.debian.org/debian bookworm main' >$(WASM)/dep/apt/sources.list
	set -e; cd $(WASM)/dep/apt; o="-o Dir::Etc::SourceList=$$PWD/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$$PWD/lists"; \
	  apt-get $$o update >/dev/null; apt-get $$o source --download-only $(WASM_DEPS_SRC) >/dev/null 2>&1; \
	  tar xzf jansson_*.orig.tar.gz; tar xzf nettle_*.orig.tar.gz; mv jansson-*/ ../jansson; mv nettle-*/ ../nettle
	cd $(WASM)/dep && sed -e 's/@json_inline@/inline/' -e 's/@json_have_[a-z_]*@/1/' jansson/src/jansson_config.h.in >include/jansson_config.h && \
	  cp jansson/src/jansson.h include/ && cp nettle/sha2.h nettle/nettle-types.h include/nettle/ && \
	  { printf '#define %s 1\n' HAVE_STDINT_H HAVE_LOCALECONV HAVE_ATOMIC_BUILTINS HAVE_SYNC_BUILTINS HAVE_UNISTD_H \
	      HAVE_SYS_TYPES_H HAVE_SYS_STAT_H HAVE_FCNTL_H HAVE_GETPID HAVE_OPEN HAVE_READ HAVE_CLOSE HAVE_SYS_TIME_H \
	      HAVE_GETTIMEOFDAY USE_URANDOM; echo '#define INITIAL_HASHTABLE_ORDER 3'; } >include/jansson_private_config.h
	set -e; cd $(WASM)/dep; for f in jansson/src/*.c; do $(EMCC) -O2 -DHAVE_CONFIG_H -Iinclude -c $$f -o obj/jansson_$$(basename $$f .c).o; done; \
	  for f in sha256 sha256-compress write-be32; do $(EMCC) -O2 -Inettle -c nettle/$$f.c -o obj/nettle_$$f.o; done
	touch $@

$(WASM)/obj/%.o: %.c $(WASM)/dep/stamp
	@mkdir -p $(dir $@)
	$(EMCC) $(WASM_CFLAGS) -c $< -o $@

$(WASM)/fedvm-device.js: $(WASM_OBJ) $(WASM)/dep/stamp
	NODE_PATH=/usr/share/nodejs $(EMCC) $(WASM_LDFLAGS) -sNODERAWFS=1 -sENVIRONMENT=node -sWASM_ASYNC_COMPILATION=0 -sEXIT_RUNTIME=1 -o $@ $(WASM_OBJ) $(WASM)/dep/obj/*.o

$(WASM)/web/fedvm-device.js: $(WASM_OBJ) $(WASM)/dep/stamp
	@mkdir -p $(dir $@)
	NODE_PATH=/usr/share/nodejs $(EMCC) $(WASM_LDFLAGS) -sENVIRONMENT=web -sINVOKE_RUN=0 -sFORCE_FILESYSTEM=1 \
	  -sEXPORTED_RUNTIME_METHODS=FS,callMain -o $@ $(WASM_OBJ) $(WASM)/dep/obj/*.o

$(WASM)/web/device.html: tools/wasm/device.html
	@mkdir -p $(dir $@)
	cp $< $@

test-wasm: all wasm
	@tests/run_wasm.sh $(BIN) $(WASM)

-include $(WASM_OBJ:.o=.d)

# The README's set-up on a new machine, for real: a minimal Debian 12 root made
# with debootstrap, the repository copied in, then make demo, make test and
# make install there as root, each on the first try (tests/fresh_root.sh;
# about ten minutes; CI runs it).
fresh-root:
	tests/fresh_root.sh

# The C style of .clang-format (clang-format 14, Debian 12's): make format
# rewrites the sources in place, make format-check (in make test) fails
# on any file it would change.
FORMAT_SRC = $(shell git ls-files 'vm/*.[ch]' 'format/*.[ch]' 'tools/*.[ch]' 'tests/*.[ch]' 'bench/*.[ch]' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRC)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format-check: ok ($(words $(FORMAT_SRC)) files)"

asan:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(MAKE) BUILD=build-asan BIN=build-asan/bin LIBD=build-asan/lib \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# The threads backend under ThreadSanitizer: the tests that run clients on
# several threads (fused and unfused segments, golden cases on 1-4 threads,
# training runs on 1-3 threads).
tsan:
	$(MAKE) BUILD=build-tsan BIN=build-tsan/bin LIBD=build-tsan/lib \
	  CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" all build-tsan/tests/test_phases build-tsan/tests/test_golden
	TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/test_phases
	TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/test_golden
	TSAN_OPTIONS=halt_on_error=1 tests/run_train.sh build-tsan/bin/fedvm
	TSAN_OPTIONS=halt_on_error=1 tests/run_sweep.sh build-tsan/bin/fedvm
	TSAN_OPTIONS=halt_on_error=1 tests/run_client_state.sh build-tsan/bin/fedvm

# ---- fuzzing ----------------------------------------------------------------
# libFuzzer targets, one a decoder (tests/fuzz/fuzz_NAME.c; tests/fuzz/README.md),
# built with clang under AddressSanitizer and UBSan into build-fuzz/ (clang and
# its runtime, libclang-rt-14-dev, are installed when missing).
# make fuzz       replays every saved crash (tests/fuzz/regress/NAME/), then runs
#                 each target FUZZ_SECONDS (60) over its corpus (tests/fuzz/corpus/NAME/),
#                 as many targets at a time as make's -j allows;
#                 fails on any crash, leak, timeout (10 s) or memory past 1 GiB
# make fuzz-long FUZZ_SECONDS=N   the same for N seconds a target, keeping what it
#                 finds in build-fuzz/corpus/NAME/ for the next run
# FUZZ_TARGETS="safetensors wire" picks targets; make fuzz-open replays the open
# findings (tests/fuzz/open/NAME/), which are not fixed yet, and lists them.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_DEB_PACKAGES := clang libclang-rt-14-dev
FUZZ_FLAGS   := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_BIN     := $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)

# The product kernel's unrolled tiles take clang many minutes to instrument
# (and decode nothing): they are built without it.
FUZZ_PLAIN   := $(BUILD)/vm/kernels/kernels_gemm.o
$(FUZZ_PLAIN): ALL_CFLAGS += $(FUZZ_PLAIN_CFLAGS)

fuzz-build:
	$(call install_missing,$(FUZZ_DEB_PACKAGES))
	+@$(MAKE) --no-print-directory CC=$(FUZZ_CC) MPI=no BUILD=build-fuzz/obj BIN=build-fuzz/bin LIBD=build-fuzz/lib \
	  CFLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link" FUZZ_PLAIN_CFLAGS=-fno-sanitize=all build-fuzz/lib/libfedvm.a
	+@$(MAKE) --no-print-directory MPI=no $(FUZZ_BIN)

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h build-fuzz/lib/libfedvm.a
	$(FUZZ_CC) $(CSTD) $(WARN) $(FUZZ_FLAGS) -fsanitize=fuzzer -MMD -MP -Ibuild-fuzz/obj/gen \
	  -DFUZZ_REPO='"$(CURDIR)"' $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null) $(BLAS_CFLAGS) \
	  $< build-fuzz/lib/libfedvm.a -o $@ $(LIBS)

# Each target fuzzes as a job of its own (fuzz-run-NAME), so make -jN fuzz runs N at a time.
fuzz: fuzz-build
	@tests/fuzz/run.sh replay build-fuzz $(FUZZ_TARGETS)
	+@$(MAKE) --no-print-directory --output-sync=target $(FUZZ_TARGETS:%=fuzz-run-%)

fuzz-run-%:
	@tests/fuzz/run.sh fuzz build-fuzz $(FUZZ_SECONDS) $*

fuzz-long: fuzz-build
	@tests/fuzz/run.sh replay build-fuzz $(FUZZ_TARGETS)
	@tests/fuzz/run.sh long build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-open: fuzz-build
	@tests/fuzz/run.sh open build-fuzz $(FUZZ_TARGETS)

# ---- benchmarks ------------------------------------------------------------
# bench/bench_*.c measure kernels against BLAS. bench/bench.py then runs the
# reference workload (FedAvg with the 2NN on Fashion-MNIST) with fedvm
# (bench/fedavg_2nn), plain NumPy and plain PyTorch side by side, the SGEMM
# peak (bench/sgemm_peak.c), a count of the flops fedvm hands to BLAS
# (bench/flop_count.c, preloaded), backends and threads, and a round's time
# and memory against its clients; a few minutes on two cores. Its report
# goes to build/bench/results.md; 'make bench-doc' also writes it into
# BENCHMARKS.md. PyTorch is large, so it is installed for the benchmarks
# only (BENCH_PACKAGES).
BENCH_PACKAGES := python3-torch
BENCH_PYTHON ?= /usr/bin/python3
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
BENCH_TOOLS := $(BUILD)/bench/sgemm_peak $(BUILD)/bench/flop_count.so bench-blas
# fedvm with every matrix product in BLAS, none in vm/kernels/kernels_gemm.c: bench.py
# counts the flops it hands to BLAS, and runs the workload with it beside
# bin/fedvm.
BENCH_BLAS := $(BUILD)/bench/blas
bench-blas:
	+@$(MAKE) --no-print-directory BUILD=$(BENCH_BLAS) BIN=$(BENCH_BLAS)/bin LIBD=$(BENCH_BLAS)/lib \
	  CFLAGS="$(CFLAGS) -DFVM_GEMM_MAX_MACS=0" $(BENCH_BLAS)/bin/fedvm

bench: bench-deps all $(BENCH_BIN) $(BENCH_TOOLS)
	@set -e; for b in $(BENCH_BIN); do echo "== $$b"; $$b; done
	$(BENCH_PYTHON) bench/bench.py

bench-doc: bench-deps all $(BENCH_BIN) $(BENCH_TOOLS)
	$(BENCH_PYTHON) bench/bench.py --doc BENCHMARKS.md

# A round's time and peak memory against its clients (bench/cohort.py): FedSGD
# over up to 1,000,000 clients, FedAvg of the 2NN over up to 10,000, on seq and
# on 2 mpi ranks; the tables go into BENCHMARKS.md. The first run makes its
# data in $(BUILD)/bench (about 650 MB); it takes several minutes.
bench-cohort: deps all
	$(SYS_PYTHON) bench/cohort.py --doc BENCHMARKS.md

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBD)/libfedvm.a
	$(CC) $(CFLAGS) -o $@ $< $(LIBD)/libfedvm.a $(LIBS)

$(BUILD)/bench/flop_count.so: bench/flop_count.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -fPIC -shared $(BLAS_CFLAGS) $< -o $@ -ldl -lpthread

# ---- demo ------------------------------------------------------------------
# The main job on a built-in default: McMahan et al.'s FedAvg with the 2NN on
# Fashion-MNIST (100 IID clients, 10 per round, E=1, B=10, lr 0.05, 20
# rounds); the final test accuracy must reach 0.80.
DEMO := $(BUILD)/demo
demo: deps
	+@$(MAKE) --no-print-directory demo-run

demo-run: all
	@mkdir -p $(DEMO)
	@test -f $(DEMO)/fashion_mnist.sqlite || \
	  $(BIN)/fedvm data import fashion-mnist --clients 100 --partition iid --seed 0 -o $(DEMO)/fashion_mnist.sqlite
	@rm -f $(DEMO)/fedavg_2nn.jsonl
	$(BIN)/fedvm run programs/fedavg_2nn.json --data train=$(DEMO)/fashion_mnist.sqlite \
	  --data test=$(DEMO)/fashion_mnist.sqlite:test --rounds 20 --clients-per-round 10 --eval-every 1 \
	  --seed 0 --metrics $(DEMO)/fedavg_2nn.jsonl
	@tail -n 1 $(DEMO)/fedavg_2nn.jsonl | sed -n 's/.*"eval": {[^}]*"accuracy": \([0-9.e-]*\).*/\1/p' | \
	  awk '{ ok = ($$1 >= 0.80); printf "final test accuracy %.4f (target 0.80): %s\n", $$1, ok ? "met" : "NOT MET"; exit (ok ? 0 : 1) }'
	$(BIN)/fedvm plot $(DEMO)/fedavg_2nn.jsonl --label "FedAvg 2NN, Fashion-MNIST" -o $(DEMO)/fedavg_2nn.svg
	@echo "metrics: $(DEMO)/fedavg_2nn.jsonl, curves: $(DEMO)/fedavg_2nn.svg"

# ---- dependencies ----------------------------------------------------------
# install_missing PACKAGES: apt-get installs those not installed yet (as root,
# else through sudo).
define install_missing
@missing=""; for p in $(1); do \
  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
  echo "installing:$$missing"; \
  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
  $$SUDO apt-get install -y --no-install-recommends $$missing || \
  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $$missing; }; \
else echo "all Debian packages present"; fi
endef

deps:
	$(call install_missing,$(DEB_PACKAGES))

bench-deps:
	$(call install_missing,$(DEB_PACKAGES) $(BENCH_PACKAGES))

# ---- the Python package's API reference ------------------------------------
# One HTML page per public module, from their docstrings (pydoc, in Debian's
# python3); tests/python/test_docstrings.py checks every public name has one.
PYDOC_MODULES := fedvm fedvm.algorithms fedvm.algorithms.scaffold fedvm.algorithms.synthetic fedvm.data fedvm.lax \
                 fedvm.ops fedvm.program fedvm.tracer fedvm.train fedvm.types
pydoc: all
	@rm -rf $(BUILD)/doc/python && mkdir -p $(BUILD)/doc/python
	@cd $(BUILD)/doc/python && PYTHONPATH=$(CURDIR)/tools/python $(SYS_PYTHON) -m pydoc -w $(PYDOC_MODULES) >/dev/null
	@echo "pydoc: $(BUILD)/doc/python/fedvm.html ($(words $(PYDOC_MODULES)) modules)"

# ---- install ---------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(addprefix $(DESTDIR)$(PREFIX)/include/fedvm/,vm $(LAYERS))
	install -m 755 $(TOOL_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIBD)/libfedvm.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBD)/libfedvm.so $(DESTDIR)$(PREFIX)/lib/libfedvm.so.$(VERSION)
	ln -sf libfedvm.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libfedvm.so.0
	ln -sf libfedvm.so.0 $(DESTDIR)$(PREFIX)/lib/libfedvm.so
	for h in $(PUBLIC_H); do install -m 644 $$h $(DESTDIR)$(PREFIX)/include/fedvm/$$h || exit 1; done
	for f in $(PY_SRC); do install -D -m 644 $$f $(DESTDIR)$(PY_SITE)/$${f#tools/python/} || exit 1; done
	printf '%s\n' '/* fedvm.h - the public API of libfedvm (docs/API.md of the sources). */' '#include "vm/fedvm.h"' \
	  > $(DESTDIR)$(PREFIX)/include/fedvm/fedvm.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@MPI_LIBS@|$(MPI_LIBS)|g' fedvm.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/fedvm.pc
	@# A system install (no DESTDIR) is found by the dynamic linker at once: its
	@# cache is rebuilt, and a PREFIX outside its search path is said.
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null && [ "$$(id -u)" -eq 0 ]; then \
	  ldconfig; \
	  ldconfig -p | grep -qF "$(PREFIX)/lib/libfedvm.so.0" || \
	    echo "note: $(PREFIX)/lib is not in the dynamic linker's search path; add it to /etc/ld.so.conf.d/ (or set LD_LIBRARY_PATH)"; \
	elif [ -z "$(DESTDIR)" ]; then echo "note: run ldconfig as root so that libfedvm.so.0 is found"; fi

uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%)
	rm -f $(DESTDIR)$(PREFIX)/lib/libfedvm.a $(DESTDIR)$(PREFIX)/lib/libfedvm.so $(DESTDIR)$(PREFIX)/lib/libfedvm.so.0 $(DESTDIR)$(PREFIX)/lib/libfedvm.so.$(VERSION)
	rm -f $(DESTDIR)$(PREFIX)/lib/pkgconfig/fedvm.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/fedvm $(DESTDIR)$(PY_SITE)/fedvm
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null && [ "$$(id -u)" -eq 0 ]; then ldconfig; fi

clean:
	rm -rf build build-asan build-tsan build-fuzz build-noblas build-arm64 build-s390x bin lib

-include $(LIB_OBJ:.o=.d) $(FUZZ_BIN:=.d) $(FEDVM_OBJ:.o=.d) $(FEDPLAN_OBJ:.o=.d) $(TEST_BIN:%=%.d) $(BENCH_BIN:%=%.d)
