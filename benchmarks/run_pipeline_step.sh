#!/usr/bin/env bash
# Pipeline schedules (benchmarks/pipeline_step.cpp) on 2 ranks of one thread each (one core
# per rank: the compute a stage reports is not inflated by sharing a core), then on 4
# oversubscribed ranks (2 per core: read the memory and held columns; the times mix in the
# other rank's compute). Prints per stage step and compute time, the measured bubble beside
# (p-1)/m (divided by v interleaved), peak activation memory and micro-batches held.
#   benchmarks/run_pipeline_step.sh [build-dir]
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
bench="$build/benchmarks/bench_pipeline_step"
strata_build_benchmark "$build" bench_pipeline_step
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) vCPUs; one thread per rank"
echo "== 2 ranks"
mpirun --oversubscribe -np 2 --bind-to none "$bench"
echo "== 4 ranks (oversubscribed)"
mpirun --oversubscribe -np 4 --bind-to none "$bench"
