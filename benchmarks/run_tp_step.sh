#!/usr/bin/env bash
# Tensor parallelism against one process at the same global work (benchmarks/tp_step.cpp):
# the single-process step at 1 thread, then TP = 2 (and with sequence parallelism) on 2 ranks
# of 1 thread each, twice, alternating; prints per-rank parameter and activation bytes, the
# step times, the speed-up and its fraction of the ideal 2x.
#   benchmarks/run_tp_step.sh [build-dir]
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
bench="$build/benchmarks/bench_tp_step"
strata_build_benchmark "$build" bench_tp_step
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) vCPUs; one thread per rank"
for round in 1 2; do
  single=$("$bench")
  tp=$(mpirun --oversubscribe -np 2 --bind-to none "$bench")
  echo "round $round"
  echo "  $single"
  echo "$tp" | sed 's/^/  /'
  t1=$(echo "$single" | value step_ms)
  for mode in tp tp_sp; do
    t2=$(echo "$tp" | grep "mode=$mode " | value step_ms)
    awk -v a="$t1" -v b="$t2" -v m="$mode" \
      'BEGIN { printf "  %s: speed-up %.2fx over one rank, %.0f%% of the ideal 2x\n", m, a / b, 50 * a / b }'
  done
done
