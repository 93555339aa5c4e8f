#!/usr/bin/env bash
# run_cohort.sh BIN - a round's memory stays flat and its time linear in its clients: the
# measurement of 'make bench-cohort' (bench/cohort.py) at sizes for CI. FedSGD over 1,000, 10,000
# and 100,000 of 110,000 LEAF synthetic clients and FedAvg of the 2NN over 300 and 3,000 of
# Fashion-MNIST's clients, each on seq and on 2 mpi ranks (when Open MPI is there): every peak
# under 256 MB a rank and at most 16 MB more at the largest count than at a tenth of it; seq's CPU
# time per client at the largest count at most 3 times that at a tenth (bench/cohort.py's
# CheckSetup says why these bounds). A FedSGD that holds every client's gradient must fail the
# memory goal, or the check could not see what it is for. About 30 s of CPU (its data, 110,000
# clients and Fashion-MNIST cut into 20,000, made in its scratch directory each time).
# Under a sanitizer it is skipped: its allocator keeps freed memory, and its runs are 5-10 times
# slower (tests/run_memory.sh checks the streaming there).
set -u
BIN=${1:?usage: tests/run_cohort.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

if ldd "$BIN" 2>/dev/null | grep -qE 'lib(a|t)san'; then
    echo "run_cohort: skipped under a sanitizer (peak memory and CPU time are the sanitizer's)"
    exit 0
fi
PY=$(python_with json) || { echo "run_cohort: no python3"; exit 1; }
mpi_setup run_cohort "$BIN"
if "$PY" bench/cohort.py --check "$T" --fedvm "$BIN" --mpirun "$MPI"; then
    echo "run_cohort: passed"
else
    echo "run_cohort: FAILED"
    exit 1
fi
