#!/usr/bin/env bash
# measure_rank_memory.sh BIN [CLIENTS...] - peak memory of each mpi rank as the clients grow.
#
# For each count (default 200 2000) generates a LEAF synthetic dataset of 200-400 examples a
# client (about 58 KB of data each), then runs one round of FedAvg over every client
# (tests/train/softmax.json) on 3 ranks and prints each rank's peak resident memory (GNU time),
# beside a sequential run's. Fused segments stream clients, so a rank holds one client's data
# at a time: the peaks should stay flat while each rank's share of the data grows tenfold.
# Not part of 'make test' (it writes about 130 MB and takes half a minute).
set -eu
BIN=${1:?usage: tests/measure_rank_memory.sh path/to/fedvm [CLIENTS...]}
shift
COUNTS=${*:-200 2000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
MPI="mpirun --oversubscribe -np 3"
[ "$(id -u)" -eq 0 ] && MPI="$MPI --allow-run-as-root"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none

printf '%-8s %9s | %-40s | %s\n' clients "data MB" "peak MB of ranks 0, 1, 2 (3 ranks)" "peak MB in sequence"
for n in $COUNTS; do
    f="$T/leaf_$n.sqlite"
    "$BIN" data synthetic --kind leaf --clients "$n" --min-examples 200 --max-examples 400 --seed 1 -o "$f" >/dev/null 2>&1
    run="$BIN run tests/train/softmax.json --data train=$f --rounds 1"
    $MPI sh -c '/usr/bin/time -f "%M" -o "$0.$OMPI_COMM_WORLD_RANK" "$@" >/dev/null 2>&1' "$T/peak" $run --backend mpi
    /usr/bin/time -f "%M" -o "$T/peak.seq" $run --backend seq >/dev/null 2>&1
    mb() { awk '{ printf "%.1f", $1 / 1024 }' "$1"; }
    printf '%-8s %9s | %-40s | %s\n' "$n" "$(( $(stat -c %s "$f") / 1048576 ))" \
        "$(mb "$T/peak.0"), $(mb "$T/peak.1"), $(mb "$T/peak.2")" "$(mb "$T/peak.seq")"
done
