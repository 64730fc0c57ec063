#!/usr/bin/env bash
# The row ops (layer_norm, rms_norm, softmax, cross-entropy; forward + backward) in strata
# (benchmarks/row_ops.cpp) beside PyTorch 1.13 (benchmarks/row_ops_torch.py) at 1 thread,
# the two alternating per round, and prints microseconds and strata / torch per op.
#   benchmarks/run_row_ops.sh [build-dir] [rounds]
# The vCPUs here are shared and noisy: read the ratios of one run, over its rounds.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
rounds=${2:-3}
strata_build_benchmark "$build" bench_row_ops
py=/usr/bin/python3
"$py" -c 'import torch' 2>/dev/null || { echo "torch 1.13 missing (scripts/install_deps.sh installs python3-torch)"; exit 2; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), 1 thread; microseconds (25th percentile of the repetitions)"
printf "%-22s %-6s %12s %12s %10s\n" op round strata_us torch1.13_us ratio
for r in $(seq 1 "$rounds"); do
  s=$("$build/benchmarks/bench_row_ops")
  t=$("$py" "$(dirname "${BASH_SOURCE[0]}")/row_ops_torch.py")
  while read -r op us; do
    tu=$(echo "$t" | awk -v o="$op" '$1 == o {print $2}')
    printf "%-22s %-6s %12s %12s %10s\n" "$op" "$r" "$us" "$tu" "$(awk -v a="$us" -v b="$tu" 'BEGIN{printf "%.2f", a/b}')"
  done <<< "$s"
done
