#!/usr/bin/env bash
# Times the GPT step's GEMM shapes (benchmarks/gemm_shapes.cpp) through OpenBLAS, BLIS and
# oneDNN at 1 and 2 threads and prints GFLOP/s per shape and library, side by side, with the
# step's total GEMM time per library. Libraries missing at configure time are skipped with
# a note (apt-get install libblis-openmp-dev libdnnl-dev).
#   benchmarks/run_gemm_shapes.sh [build-dir] [reps]
# The vCPUs here are shared and noisy: compare libraries only within one run.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
reps=${2:-15}
strata_build_benchmark "$build" bench_gemm_shapes
for t in 1 2; do
  strata_section "$t thread(s)"
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t BLIS_NUM_THREADS=$t OMP_WAIT_POLICY=passive \
    "$build/benchmarks/bench_gemm_shapes" --reps "$reps"
done
