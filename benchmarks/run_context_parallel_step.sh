#!/usr/bin/env bash
# Context parallelism on a LLaMA (benchmarks/context_parallel_step.cpp: width 256, 4 heads of
# 64, 2 kv heads, 2 layers, one sequence per step) at sequence lengths 4096 and 8192, CP 1, 2
# and 4 (ring attention), one thread per rank, the same global tokens at every degree.
# Prints one table: step time and its speed-up over CP 1, tokens/s, the activation bytes a
# rank holds at the end of forward and their ratio to CP 1's, the step's peak, and the ring's
# bytes sent per rank. CP 1 runs the unsplit attention (one process, the T x T probabilities
# kept for backward); CP 4 on fewer than 4 cores shares them.
#   benchmarks/run_context_parallel_step.sh [build-dir] [steps] [width]
# The vCPUs here are shared and noisy: compare only figures of one run.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
steps=${2:-3}
width=${3:-256}
bench="$build/benchmarks/bench_context_parallel_step"
strata_build_benchmark "$build" bench_context_parallel_step
strata_mpi_env
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }

printf "%-6s %-3s %9s %8s %9s %14s %9s %9s %9s\n" seq cp step_ms speedup tokens/s activation_MiB vs_cp1 peak_MiB sent_MiB
for seq in 4096 8192; do
  base_ms="" base_act=""
  for cp in 1 2 4; do
    out=$(mpirun -np "$cp" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS \
            "$bench" --seq "$seq" --width "$width" --steps "$steps")
    ms=$(echo "$out" | value step_ms)
    act=$(echo "$out" | value activation_mib)
    base_ms=${base_ms:-$ms}
    base_act=${base_act:-$act}
    awk -v seq="$seq" -v cp="$cp" -v ms="$ms" -v b="$base_ms" -v act="$act" -v ba="$base_act" \
        -v tps="$(echo "$out" | value tokens_per_s)" -v peak="$(echo "$out" | value peak_mib)" \
        -v sent="$(echo "$out" | value sent_mib)" \
        'BEGIN { printf "%-6s %-3s %9.1f %7.2fx %9.0f %14.1f %8.3fx %9.1f %9.2f\n", seq, cp, ms, b / ms, tps, act, act / ba, peak, sent }'
  done
done
