#!/usr/bin/env bash
# Runs bench_collectives (strata's ProcessGroup beside raw MPI: all_reduce, all_gather,
# reduce_scatter, 4 KiB to 64 MiB) under mpirun with 2 and 4 ranks, one thread each.
# On a machine with fewer cores than ranks the ranks are oversubscribed (--oversubscribe),
# which makes the times noisy and slow: compare the ratio column, not the bandwidths.
#   benchmarks/run_collectives.sh [build-dir] [bench_collectives options...]
# e.g. benchmarks/run_collectives.sh build --max-bytes 4194304 --iters 20
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
if [ $# -gt 0 ]; then shift; fi
bench="$build/benchmarks/bench_collectives"
[ -x "$bench" ] || { echo "build $bench first (cmake --build $build --target bench_collectives)" >&2; exit 1; }
strata_mpi_env
for np in 2 4; do
  strata_section "mpirun -np $np ($(nproc) cores)"
  # --bind-to none: Open MPI would otherwise pin each rank to one core, and with more ranks
  # than cores pinning piles them onto the same ones. mpi_yield_when_idle: a waiting rank
  # yields its core; without it, on a machine whose cores other work also uses (the 2-core
  # CI and dev machines), a collective waits whole scheduler slices (milliseconds) for a
  # descheduled peer. Both halves run under the same settings.
  mpirun -np "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "$bench" "$@"
done
