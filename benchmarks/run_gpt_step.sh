#!/usr/bin/env bash
# Times one GPT training step in strata and in PyTorch (CPU) in the same run, at 1 and 2
# threads, and prints both medians, the ratio, and strata's GFLOP/s against the sgemm rate.
#   benchmarks/run_gpt_step.sh [build-dir] [steps]
# The 2 vCPUs here are shared and noisy: compare only the ratios printed by one run, and
# prefer the median over a few runs.
set -euo pipefail
build=${1:-build}
steps=${2:-20}
bench="$build/benchmarks/bench_gpt_step"
torch_py="$(dirname "$0")/gpt_step_torch.py"
[ -x "$bench" ] || { echo "build $bench first (cmake --build $build --target bench_gpt_step)"; exit 1; }
value() { tr " " "\n" | sed -n "s/^$1=//p"; }

printf '%-8s %-12s %-12s %-10s %-10s %-12s %-10s\n' threads strata_ms torch_ms ratio gflops sgemm_gflops of_sgemm
for t in 1 2; do
  s=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t OMP_WAIT_POLICY=passive "$bench" --steps "$steps")
  # PyTorch: its own t threads with OpenBLAS at 1, and (t > 1) with OpenBLAS at t too; the better counts.
  p=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$torch_py" --threads "$t" --steps "$steps" | value torch_ms_median)
  if [ "$t" -gt 1 ]; then
    p2=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t /usr/bin/python3 "$torch_py" --threads "$t" --steps "$steps" | value torch_ms_median)
    echo "  (torch at $t threads: OpenBLAS 1 thread ${p} ms, OpenBLAS $t threads ${p2} ms)"
    p=$(awk -v a="$p" -v b="$p2" 'BEGIN{print (a<b)?a:b}')
  fi
  ms=$(echo "$s" | value strata_ms_median)
  gf=$(echo "$s" | value 'gflops')
  sg=$(echo "$s" | value sgemm_gflops)
  awk -v t="$t" -v ms="$ms" -v p="$p" -v gf="$gf" -v sg="$sg" \
    'BEGIN{printf "%-8s %-12.1f %-12.1f %-10.3f %-10.1f %-12.1f %-10.1f%%\n", t, ms, p, ms/p, gf, sg, 100*gf/sg}'
done
