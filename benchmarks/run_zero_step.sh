#!/usr/bin/env bash
# ZeroOptimizer stages 0-3 beside DistributedDataParallel (benchmarks/zero_step.cpp).
#   benchmarks/run_zero_step.sh [build-dir] [steps] [speed|memory|all]
# speed: the core benchmark's GPT (4 layers, width 256, batch 8 x 128 tokens per rank, AdamW,
#   float32) on 2 ranks, one thread each; DDP + AdamW, stages 0-3 and stage 3 without prefetch
#   stepped in turn; prints each mode's median step, p10/p90, the median of its per-step
#   ratio to DDP's step, its phases, and whether the targets are met (stages 1-2 <= 1.10x
#   DDP, stage 3 <= 1.25x).
# memory: a GPT whose model states dominate (8 layers, width 512: 25.3M parameters; 1 x 32
#   tokens per rank), each mode in its own mpirun on 2 and on 4 ranks (--oversubscribe:
#   memory does not depend on speed); float32 training steps, then bf16 parameters + float32
#   master weights (real training steps of the bf16 GPT).
#   Prints peak resident memory per rank above the pre-model baseline beside the formula and
#   ZeroOptimizer::memory(). MALLOC_MMAP_THRESHOLD_ is fixed so that glibc maps every large
#   block on its own and returns it when freed (its default raises the threshold after the
#   first large free, and later freed heap blocks then stay resident and count in the peak).
# The vCPUs here are shared and noisy: compare only ratios of one run.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
steps=${2:-20}
what=${3:-all}
bench="$build/benchmarks/bench_zero_step"
strata_build_benchmark "$build" bench_zero_step
strata_mpi_env
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# --bind-to none and mpi_yield_when_idle: as run_ddp_step.sh (a rank's MPI worker thread must
# not share one pinned core with its compute; a waiting rank yields its core).
mpi=(mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
     -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x OMP_WAIT_POLICY)
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }

if [ "$what" = speed ] || [ "$what" = all ]; then
  out=$("${mpi[@]}" -np 2 "$bench" --steps "$steps")
  echo "$out" | sed "s/^/  /"
  printf '%-20s %9s %9s %9s %8s   %s\n' "mode (2 ranks)" "step ms" "p10" "p90" "x DDP" "phases ms (rank 0 medians)"
  for m in ddp stage0 stage1 stage2 stage3 stage3_noprefetch; do
    printf '%-20s %9s %9s %9s %8s   %s\n' "$m" "$(echo "$out" | value "${m}_ms")" "$(echo "$out" | value "${m}_p10")" \
      "$(echo "$out" | value "${m}_p90")" "$(echo "$out" | value "${m}_ratio")" "$(echo "$out" | value "${m}_phases")"
  done
  awk -v r1="$(echo "$out" | value stage1_ratio)" -v r2="$(echo "$out" | value stage2_ratio)" \
      -v r3="$(echo "$out" | value stage3_ratio)" 'BEGIN {
    printf "targets: stage 1 <= 1.10x DDP: %s; stage 2 <= 1.10x: %s; stage 3 <= 1.25x: %s\n",
      (r1 <= 1.10 ? "met" : "NOT met"), (r2 <= 1.10 ? "met" : "NOT met"), (r3 <= 1.25 ? "met" : "NOT met") }'
fi

if [ "$what" = memory ] || [ "$what" = all ]; then
  printf '\n%-5s %-8s %-4s %10s %10s %10s %10s %10s %12s\n' ranks dtype mode "formula MB" "memory() MB" \
    "peak MB" "peak-form." "built MB" "tensor pk MB"
  for np in 2 4; do
    for dtype in float32 bfloat16; do
      modes="ddp 0 1 2 3"; [ "$dtype" = bfloat16 ] && modes="0 1 2 3"
      for m in $modes; do
        out=$(MALLOC_MMAP_THRESHOLD_=131072 "${mpi[@]}" -x MALLOC_MMAP_THRESHOLD_ -np "$np" \
              "$bench" --memory "$m" --dtype "$dtype" --steps 3)
        f=$(echo "$out" | value formula_mb); p=$(echo "$out" | value peak_rss_mb)
        printf '%-5s %-8s %-4s %10s %10s %10s %10.1f %10s %12s\n' "$np" "$dtype" "$m" "$f" \
          "$(echo "$out" | value report_mb)" "$p" "$(awk -v p="$p" -v f="$f" 'BEGIN{print p-f}')" \
          "$(echo "$out" | value built_rss_mb)" "$(echo "$out" | value peak_tensor_mb)"
        [ "$(echo "$out" | value peak_reset)" = 1 ] || echo "  (VmHWM could not be reset: the peak includes construction)"
      done
    done
  done
  echo "(MB = 1e6 bytes per rank, largest rank; peak = VmHWM - VmRSS before the model was built;"
  echo " built = resident after construction; tensor pk = the allocator's peak bytes in use)"
fi
