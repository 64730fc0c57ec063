#!/usr/bin/env bash
# DDP across hosts: benchmarks/ddp_step.cpp (the core benchmark's GPT, batch 8 per rank, one
# thread per rank) on the namespaced test cluster (tests/cluster), 2 hosts x 1 rank, beside
# the same 2 ranks on one host and beside one rank alone, in one run. Prints, per placement,
# the 2-rank step (with overlap), the compute-only step (no_sync), the communication left
# exposed (overlap - compute, the medians' difference) and the scaling efficiency
# (1-rank step / 2-rank step). Needs root (namespaces); --rate shapes the links (tc tbf).
#   benchmarks/run_cluster_ddp_step.sh [--build DIR] [--steps N] [--rate RATE]
# The 2 vCPUs here are shared and noisy, and both hosts share them: compare only figures of
# one run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build steps=20 rate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "run_cluster_ddp_step: unknown argument $1" >&2; exit 1 ;;
  esac
done
build=$(realpath -m "$build")
bench=$build/benchmarks/bench_ddp_step
[ -x "$bench" ] || { echo "run_cluster_ddp_step: build bench_ddp_step first ($bench)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run_cluster_ddp_step: needs root (network namespaces)" >&2; exit 1; }
cluster=$repo/tests/cluster
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
trap '"$cluster/cluster_down.sh" --owner $$' EXIT
"$cluster/cluster_up.sh" --hosts 2 --owner $$ ${rate:+--rate "$rate"} >/dev/null
value() { tr " " "\n" | sed -n "s/^$1=//p" | head -1; }

single() { "$cluster/host_exec.sh" strata-h0 "$bench" --single --steps "$steps" | value single_ms; }
two() {  # mpirun placement options
  "$cluster/cluster_mpirun.sh" "$@" -x OPENBLAS_NUM_THREADS -x OMP_WAIT_POLICY "$bench" --steps "$steps"
}
s1a=$(single)
across=$(two -np 2 --map-by node)
within=$(two -np 2 --host strata-h0:2)
s1b=$(single)
one=$(awk -v a="$s1a" -v b="$s1b" 'BEGIN { printf "%.1f", (a + b) / 2 }')

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc --all) vCPUs; links: ${rate:-unshaped}; $steps timed steps"
echo "1 rank alone: $one ms/step (before $s1a, after $s1b)"
row() {  # label, the benchmark's output
  local ov co
  ov=$(echo "$2" | value overlap_ms)
  co=$(echo "$2" | value compute_ms)
  awk -v l="$1" -v ov="$ov" -v co="$co" -v one="$one" \
    'BEGIN { printf "%-22s %10.1f %10.1f %12.1f %9.1f%%\n", l, ov, co, ov - co, 100 * one / ov }'
}
printf '%-22s %10s %10s %12s %10s\n' placement step_ms compute_ms exposed_ms scaling
row "2 hosts x 1 rank" "$across"
row "1 host x 2 ranks" "$within"
