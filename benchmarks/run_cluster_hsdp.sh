#!/usr/bin/env bash
# HSDP vs ZeRO-3 across hosts: examples/train_gpt --zero 3 on the namespaced test cluster
# (tests/cluster), 2 hosts x 2 ranks, as plain ZeRO-3 over the 4 ranks (strata's default
# hierarchical collectives, and the flat ring: STRATA_MPI_HIERARCHICAL=0) and as HSDP
# (--hsdp: ZeRO-3 inside each host, the 2 hosts replicas). Per step: the bytes that crossed
# strata-h1's link (rx + tx of its veth, counted by the kernel) and the wall time, each as the
# difference between a run of --steps LONG and one of --steps SHORT (start-up, the initial
# broadcast and the final evaluation cancel). Needs root (namespaces); --rate shapes the links.
#   benchmarks/run_cluster_hsdp.sh [--build DIR] [--short N] [--long N] [--rate RATE]
# The 2 vCPUs here are shared by both hosts: compare only figures of one run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build short=10 long=110 rate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --short) short=$2; shift 2 ;;
    --long) long=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "run_cluster_hsdp: unknown argument $1" >&2; exit 1 ;;
  esac
done
build=$(realpath -m "$build")
gpt=$build/examples/train_gpt/train_gpt
[ -x "$gpt" ] || { echo "run_cluster_hsdp: build train_gpt first ($gpt)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run_cluster_hsdp: needs root (network namespaces)" >&2; exit 1; }
cluster=$repo/tests/cluster
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
trap '"$cluster/cluster_down.sh" --owner $$' EXIT
"$cluster/cluster_up.sh" --hosts 2 --owner $$ ${rate:+--rate "$rate"} >/dev/null
work=$(mktemp -d)
trap '"$cluster/cluster_down.sh" --owner $$; rm -rf "$work"' EXIT
cd "$work"
link_bytes() { local s=/sys/class/net/strata-v1/statistics; echo $(($(cat $s/rx_bytes) + $(cat $s/tx_bytes))); }
model=(--layers 4 --width 128 --heads 4 --global-batch 16 --warmup 0 --log-every 1000 --eval-examples 16 --metrics '')

# One run: prints "<link bytes> <milliseconds>". Arguments: mpirun options, then train_gpt's.
measure() {
  local before start
  before=$(link_bytes)
  start=$(date +%s%N)
  "$cluster/cluster_mpirun.sh" "$@" >run.log 2>&1 || { cat run.log >&2; exit 1; }
  echo "$(($(link_bytes) - before)) $((($(date +%s%N) - start) / 1000000))"
}
# Per step: the difference between the long and the short run.
per_step() {  # label, mpirun options..., --, train_gpt options...
  local label=$1 mpi=() a b
  shift
  while [ "$1" != -- ]; do mpi+=("$1"); shift; done
  shift
  a=$(measure -np 4 "${mpi[@]}" "$gpt" "${model[@]}" --steps "$short" "$@")
  b=$(measure -np 4 "${mpi[@]}" "$gpt" "${model[@]}" --steps "$long" "$@")
  grep -q "^HSDP" run.log && hsdp_line=$(grep "^HSDP" run.log)
  awk -v l="$label" -v a="$a" -v b="$b" -v n=$((long - short)) 'BEGIN {
    split(a, x, " "); split(b, y, " ");
    printf "%-28s %14.0f %10.1f\n", l, (y[1] - x[1]) / n, (y[2] - x[2]) / n }'
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc --all) vCPUs; links: ${rate:-unshaped}"
echo "train_gpt ${model[*]} --zero 3; per step = (steps $long - steps $short) / $((long - short))"
grep -m1 "^GPT:" run.log 2>/dev/null || true
printf '%-28s %14s %10s\n' layout link_bytes/step ms/step
hsdp_line=""
per_step "ZeRO-3 x4 (hierarchical)" -- --zero 3
per_step "ZeRO-3 x4 (flat ring)" -x STRATA_MPI_HIERARCHICAL=0 -- --zero 3
per_step "HSDP 2 hosts x shard 2" -- --zero 3 --hsdp
echo "$hsdp_line"
grep -m1 "^GPT:" run.log || true
