#!/usr/bin/env bash
# DistributedDataParallel on the core benchmark's GPT (benchmarks/gpt_step.cpp: 21.6 GFLOP per
# rank per step, batch 8 per rank), strata beside PyTorch's DDP (gloo) in the same run, one
# thread per rank (OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1). Prints one table:
#   2-rank step with overlap, with every bucket reduced after backward (DDPOptions::overlap =
#   false), compute only (both ranks under no_sync), the fraction of the communication hidden
#   = (no_overlap - overlap) / (no_overlap - compute), clamped to [0, 1] (each difference the
#   median of the per-step differences: the modes run in turn), the 1-rank step
#   (plain model, no DDP; timed before and after the 2-rank runs, mean of the two), the
#   scaling efficiency = 2-rank tokens/s / (2 x 1-rank tokens/s) = 1-rank step / 2-rank step,
#   and strata / PyTorch.
#   benchmarks/run_ddp_step.sh [build-dir] [steps] [bucket-MiB]
# The vCPUs here are shared and noisy: compare only figures of one run.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
steps=${2:-20}
bucket_mb=${3:-4}
bench="$build/benchmarks/bench_ddp_step"
torch_py="$(dirname "${BASH_SOURCE[0]}")/ddp_step_torch.py"
strata_build_benchmark "$build" bench_ddp_step
strata_mpi_env
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }

single() { "$bench" --single --steps "$steps" | value single_ms; }
s1a=$(single)
# --bind-to none: Open MPI would pin each rank to one core, where its MPI worker thread then
# competes with its compute; mpi_yield_when_idle: a waiting rank yields its core (see
# run_collectives.sh). PyTorch's processes are not pinned either.
out=$(mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
        -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x OMP_WAIT_POLICY \
        "$bench" --steps "$steps" --bucket-mb "$bucket_mb")
torch_out=$(/usr/bin/python3 "$torch_py" --steps "$steps" --bucket-mb "$bucket_mb")
s1b=$(single)

echo "$out" | sed "s/^/  strata: /"; echo "  torch: $torch_out"
ov=$(echo "$out" | value overlap_ms)
no=$(echo "$out" | value no_overlap_ms)
co=$(echo "$out" | value compute_ms)
tddp=$(echo "$torch_out" | value torch_ddp_ms)
tco=$(echo "$torch_out" | value torch_compute_ms)
exposed=$(echo "$out" | value exposed_paired_ms)
saved=$(echo "$out" | value saved_paired_ms)
texposed=$(echo "$torch_out" | value torch_exposed_paired_ms)
awk -v ov="$ov" -v no="$no" -v co="$co" -v exposed="$exposed" -v saved="$saved" -v texposed="$texposed" -v s1a="$s1a" -v s1b="$s1b" -v tddp="$tddp" -v tco="$tco" \
    -v p10="$(echo "$out" | value overlap_p10)" -v p90="$(echo "$out" | value overlap_p90)" 'BEGIN {
  s1 = (s1a + s1b) / 2
  h = (exposed > 0) ? saved / exposed : -1
  hc = (h < 0) ? 0 : ((h > 1) ? 1 : h)
  eff = s1 / ov
  printf "%-44s %10s %10s %8s\n", "", "strata", "PyTorch", "ratio"
  printf "%-44s %10.1f %10.1f %8.3f\n", "2-rank step, overlap (ms)", ov, tddp, ov / tddp
  printf "%-44s %10.1f %10s %8s\n", "2-rank step, all buckets after backward (ms)", no, "", ""
  printf "%-44s %10.1f %10.1f %8.3f\n", "2-rank compute only, no_sync (ms)", co, tco, co / tco
  printf "%-44s %10.1f %10s %8s\n", "1-rank step, no DDP (ms; runs before/after)", s1, "", ""
  printf "  (overlap p10/p90 %.1f/%.1f ms; 1-rank %.1f then %.1f ms)\n", p10, p90, s1a, s1b
  printf "%-44s %10.1f %10s\n", "exposed communication without overlap (ms)", exposed, ""
  printf "%-44s %10.1f %10.1f\n", "exposed communication with overlap (ms)", exposed - saved, texposed
  if (exposed > 0) printf "%-44s %9.0f%% %10s (raw %.2f)\n", "communication hidden", 100 * hc, "", h
  else printf "%-44s %10s (no_overlap - compute = %.1f ms: below the noise)\n", "communication hidden", "n/a", exposed
  printf "%-44s %9.1f%%\n", "scaling efficiency (1-rank step / 2-rank step)", 100 * eff
  t1 = (ov / tddp <= 0.9) ? "met" : "NOT met"
  t2 = (eff >= 0.9) ? "met" : "NOT met"
  t3 = (exposed <= 0) ? "n/a" : ((hc >= 0.8) ? "met" : "NOT met")
  printf "targets: step <= 0.9x PyTorch: %s; scaling >= 90%%: %s; hidden >= 80%%: %s\n", t1, t2, t3
}'
