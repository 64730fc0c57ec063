#!/usr/bin/env bash
# Times one training step of a model in strata and in two PyTorch peers on the CPU, in the
# same run, at 1 and 2 threads, and prints the medians, both ratios (strata / torch 1.13,
# strata / torch 2.x) and strata's GFLOP/s against the 1024^3 float32 matmul rate of its
# GEMM backend. run_gpt_step.sh and run_llama_step.sh call it.
#   benchmarks/run_step_vs_torch.sh gpt|llama [build-dir] [steps]
# strata's side is bench_<model>_step (benchmarks/<model>_step.cpp); the peers run
# benchmarks/<model>_step_torch.py, the same model, batch and step:
#   torch 1.13  Debian's python3-torch under /usr/bin/python3 (OpenBLAS; attention as an
#               explicit masked softmax, the fastest 1.13 offers)
#   torch 2.x   PyPI's current torch in the venv $STRATA_PEER_VENV (default <repo>/.venv-peer;
#               made by scripts/setup_peer_venv.sh, about 5.6 GB; MKL/oneDNN; attention by
#               F.scaled_dot_product_attention). Skipped with a note when the venv is missing.
# At each thread count the three run one after the other (strata, 1.13, 2.x), so all see
# the machine in about the same state. The 2 vCPUs here are shared and noisy: compare only
# the ratios printed by one run, and prefer the median over a few runs.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
model=${1:?usage: run_step_vs_torch.sh gpt|llama [build-dir] [steps]}
build=${2:-$STRATA_BUILD_DIR}
steps=${3:-20}
bench="$build/benchmarks/bench_${model}_step"
torch_py="$(dirname "${BASH_SOURCE[0]}")/${model}_step_torch.py"
[ -f "$torch_py" ] || { echo "run_step_vs_torch.sh: no peer $torch_py for model '$model'" >&2; exit 2; }
venv=${STRATA_PEER_VENV:-$STRATA_ROOT/.venv-peer}
strata_build_benchmark "$build" "bench_${model}_step"
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }

py113=/usr/bin/python3
if ! "$py113" -c 'import torch' 2>/dev/null; then
  echo "torch 1.13: skipped ($py113 has no torch; scripts/install_deps.sh installs python3-torch)"
  py113=
fi
py2="$venv/bin/python"
if ! { [ -x "$py2" ] && "$py2" -c 'import torch' 2>/dev/null; }; then
  echo "torch 2.x: skipped (no venv with torch at $venv; create it with scripts/setup_peer_venv.sh," \
       "about 5.6 GB and 90 s, or point STRATA_PEER_VENV at one)"
  py2=
fi

# peer PYTHON THREADS OPENBLAS_THREADS: one peer run; prints its output line.
peer() {
  OMP_NUM_THREADS=$2 MKL_NUM_THREADS=$2 OPENBLAS_NUM_THREADS=$3 \
    "$1" "$torch_py" --threads "$2" --steps "$steps"
}
min() { awk -v a="$1" -v b="$2" 'BEGIN{print (a<b)?a:b}'; }

rows=()
about113="" about2="" backend=""
for t in 1 2; do
  s=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t OMP_WAIT_POLICY=passive "$bench" --steps "$steps")
  backend=$(echo "$s" | value gemm_backend)
  p1=-
  if [ -n "$py113" ]; then
    # Debian's torch uses OpenBLAS: its own t threads with OpenBLAS at 1, and (t > 1) with
    # OpenBLAS at t too; the better counts.
    out=$(peer "$py113" "$t" 1)
    p1=$(echo "$out" | value torch_ms_median)
    if [ "$t" -gt 1 ]; then
      p1b=$(peer "$py113" "$t" "$t" | value torch_ms_median)
      echo "  (torch 1.13 at $t threads: OpenBLAS 1 thread ${p1} ms, OpenBLAS $t threads ${p1b} ms)"
      p1=$(min "$p1" "$p1b")
    fi
    about113="torch $(echo "$out" | value torch), attention $(echo "$out" | value attention)"
  fi
  p2=-
  if [ -n "$py2" ]; then
    out=$(peer "$py2" "$t" "$t")  # MKL and oneDNN threads follow MKL_NUM_THREADS/OMP_NUM_THREADS
    p2=$(echo "$out" | value torch_ms_median)
    about2="torch $(echo "$out" | value torch), attention $(echo "$out" | value attention)"
  fi
  rows+=("$t $(echo "$s" | value strata_ms_median) $p1 $p2 $(echo "$s" | value gflops) $(echo "$s" | value sgemm_gflops)")
done

echo "machine:    $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) vCPUs; model $model, $steps timed steps"
echo "strata:     GEMM backend ${backend:-?} (sgemm_gflops: 1024^3 float32 matmul through it)"
[ -z "$py113" ] || echo "torch 1.13: $py113, $about113"
[ -z "$py2" ] || echo "torch 2.x:  $py2, $about2"
printf '%-8s %-10s %-13s %-12s %-14s %-13s %-8s %-13s %s\n' \
  threads strata_ms torch1.13_ms torch2.x_ms strata/1.13 strata/2.x gflops sgemm_gflops of_sgemm
for r in "${rows[@]}"; do
  # shellcheck disable=SC2086  # the row is split into its fields on purpose
  set -- $r
  awk -v t="$1" -v ms="$2" -v p1="$3" -v p2="$4" -v gf="$5" -v sg="$6" 'BEGIN{
    r1 = (p1 == "-") ? "-" : sprintf("%.3f", ms / p1)
    r2 = (p2 == "-") ? "-" : sprintf("%.3f", ms / p2)
    s1 = (p1 == "-") ? "-" : sprintf("%.1f", p1)
    s2 = (p2 == "-") ? "-" : sprintf("%.1f", p2)
    printf "%-8s %-10.1f %-13s %-12s %-14s %-13s %-8.1f %-13.1f %.1f%%\n", t, ms, s1, s2, r1, r2, gf, sg, 100 * gf / sg
  }'
done
