#!/usr/bin/env bash
# Expert parallelism on an 8-expert MoE layer (benchmarks/expert_parallel_step.cpp: width 256,
# SwiGLU experts of 512, top-2, dropless), 4096 global tokens split over the ranks, EP = the
# ranks (1, 2, 4), one thread per rank. Prints one table: step time, tokens/s and their ratio
# to EP 1, the share of the step spent in the token exchange's all_to_all_v (the slowest
# rank's; waiting for slower ranks included) and the bytes a rank sends per step. EP 4 on
# fewer than 4 cores shares them.
#   benchmarks/run_expert_parallel_step.sh [build-dir] [steps] [tokens]
# The vCPUs here are shared and noisy: compare only figures of one run.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
steps=${2:-5}
tokens=${3:-4096}
bench="$build/benchmarks/bench_expert_parallel_step"
strata_build_benchmark "$build" bench_expert_parallel_step
strata_mpi_env
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }

printf "%-3s %9s %10s %9s %15s %9s\n" ep step_ms tokens/s vs_ep1 all_to_all_share sent_MiB
base=""
for ep in 1 2 4; do
  out=$(mpirun -np "$ep" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS \
          "$bench" --tokens "$tokens" --steps "$steps")
  tps=$(echo "$out" | value tokens_per_s)
  base=${base:-$tps}
  awk -v ep="$ep" -v ms="$(echo "$out" | value step_ms)" -v tps="$tps" -v b="$base" \
      -v share="$(echo "$out" | value all_to_all_share)" -v sent="$(echo "$out" | value sent_mib)" \
      'BEGIN { printf "%-3s %9.1f %10.0f %8.2fx %15.3f %9.2f\n", ep, ms, tps, tps / b, share, sent }'
done
