#!/usr/bin/env bash
# The cluster test: makes 2 namespaced hosts on this machine (cluster_up.sh), starts 2 ranks
# on each with mpirun through the namespace-entering agent (cluster_mpirun.sh), and checks
#   1. placement: ranks 0-1 run on strata-h0 and ranks 2-3 on strata-h1, each host with
#      local size 2 (the hostname comes from the rank's own UTS namespace)
#   2. a plain MPI world across the hosts (strata_mpi_hello, where built)
#   3. strata's collectives test (dist_collectives) passes, and bytes crossed strata-h1's link;
#      the collective-path checks (dist_hier's DistCollectivePaths) pass with the hierarchical
#      path chosen automatically for the world (2 nodes x 2 ranks, STRATA_DEBUG_PATHS says so)
#   3b. HSDP (dist_zero's Hsdp tests) takes each host as a shard group and trains like ZeRO-3
#   4. train_gpt trains 50 steps with --global-batch 16 (its loss is printed beside a run
#      of the same 4 ranks on one host), then as ZeRO-3 and HSDP: HSDP sends fewer bytes
#      between the hosts; not with --no-train (the ctest cluster_mpirun)
#   5. with --bench, bench_collectives all_reduce 1-256 MiB, hierarchical vs flat ring vs raw
#      Open MPI (--compare-flat; informational, not checked)
# and removes the cluster on exit, failure or interrupt.
#   tests/cluster/run_cluster_test.sh [--build DIR] [--rate RATE] [--delay DELAY] [--bench] [--no-train]
#     --build DIR    the build directory (default $STRATA_BUILD_DIR, else <repo>/build)
#     --rate/--delay shape the hosts' links (cluster_up.sh)
# Exit status: 0 passed, 1 failed, 77 skipped (not root, a tool missing, or the kernel
# refuses namespaces, veth, bridges or -- for --delay -- netem).
# Environment: STRATA_CLUSTER_TIMEOUT seconds per mpirun (default 300);
# STRATA_CLUSTER_REQUIRED=1 turns every skip into a failure (CI, where it must run).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${STRATA_BUILD_DIR:-$repo/build} rate="" delay="" bench=0 train=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --bench) bench=1; shift ;;
    --no-train) train=0; shift ;;
    *) echo "run_cluster_test: unknown argument $1" >&2; exit 1 ;;
  esac
done
build=$(realpath -m "$build")
timeout_s=${STRATA_CLUSTER_TIMEOUT:-300}
# shellcheck source=tests/test_script_log.sh
source "$here/../test_script_log.sh"
test_script_log cluster-test STRATA_CLUSTER_REQUIRED

# --- 1. can this machine make hosts? -------------------------------------------------
PATH=$PATH:/usr/sbin:/sbin
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"
reason=$(cluster_probe) || skip "$reason"
command -v mpirun >/dev/null || skip "missing command: mpirun (package openmpi-bin)"
if [ -n "$delay" ]; then
  unshare --net -- sh -c "ip link set lo up && tc qdisc add dev lo root netem delay $delay" 2>/dev/null ||
    skip "--delay needs tc netem, which this kernel lacks (CONFIG_NET_SCH_NETEM)"
fi
bins=(tests/dist_collectives tests/dist_hier tests/dist_zero)
[ "$train" = 0 ] || bins+=(examples/train_gpt/train_gpt)
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || fail "$build/$b is missing: build the tests and examples first"
done

# --- 2. the cluster --------------------------------------------------------------------
trap '"$here/cluster_down.sh" --owner $$' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$here/cluster_up.sh" --hosts 2 --owner $$ ${rate:+--rate "$rate"} ${delay:+--delay "$delay"}
run() { timeout "$timeout_s" "$here/cluster_mpirun.sh" "$@"; }
out=$(mktemp -d "${TMPDIR:-/tmp}/strata-cluster-test.XXXXXX")
trap '"$here/cluster_down.sh" --owner $$; rm -rf "$out"' EXIT
# The ranks' working directory: train_gpt writes nothing with --metrics '', but be safe.
cd "$out"

# --- 3. checks ---------------------------------------------------------------------------
log "placement: 4 ranks on 2 hosts"
# shellcheck disable=SC2016  # expanded by each rank's shell
run -np 4 sh -c 'echo "rank=$OMPI_COMM_WORLD_RANK host=$(hostname) local=$OMPI_COMM_WORLD_LOCAL_RANK/$OMPI_COMM_WORLD_LOCAL_SIZE"' \
  | sort | tee placement.txt
want=$(printf 'rank=%d host=strata-h%d local=%d/2\n' 0 0 0 1 0 1 2 1 0 3 1 1)
[ "$(cat placement.txt)" = "$want" ] || fail "placement differs from 2 ranks on each of strata-h0, strata-h1"

if [ -x "$build/tests/strata_mpi_hello" ]; then
  log "strata_mpi_hello: one MPI world across the hosts"
  run -np 4 "$build/tests/strata_mpi_hello" 4 | tee hello.txt
  [ "$(grep -c ' OK$' hello.txt)" = 4 ] || fail "strata_mpi_hello: not every rank reported OK"
  [ "$(grep -c 'on strata-h1:' hello.txt)" = 2 ] || fail "strata_mpi_hello: expected 2 ranks on strata-h1"
fi

# What crossed strata-h1's link: the root namespace's end of its veth pair counts it.
link_bytes() { local s=/sys/class/net/strata-v1/statistics; echo $(($(cat $s/rx_bytes) + $(cat $s/tx_bytes))); }
log "dist_collectives on 2 hosts x 2 ranks"
before=$(link_bytes)
run -np 4 "$build/tests/dist_collectives" >collectives.txt 2>&1 || { cat collectives.txt; fail "dist_collectives failed"; }
crossed=$(($(link_bytes) - before))
grep -E '^\[  (PASSED|FAILED)' collectives.txt
grep -q '^\[  FAILED' collectives.txt && fail "dist_collectives reported failures"
log "dist_collectives passed; $crossed bytes crossed strata-h1's link"
# Open MPI's start-up alone moves a few KiB; the collectives move far more. 64 KiB is a
# floor that only a run whose ranks talked over the link exceeds.
[ "$crossed" -gt 65536 ] || fail "only $crossed bytes crossed the link: the ranks did not talk over the network"

log "dist_hier's collective-path checks on 2 hosts x 2 ranks (hierarchical path)"
# No STRATA_TEST_NODE_SIZE: the nodes are real; the test takes the ranks per node from
# OMPI_COMM_WORLD_LOCAL_SIZE and checks the hierarchical order's bits.
run -np 4 -x STRATA_DEBUG_PATHS=1 "$build/tests/dist_hier" --gtest_filter='DistCollectivePaths.*' >hier.txt 2>&1 ||
  { cat hier.txt; fail "dist_hier failed on 2 hosts"; }
grep -E '^\[  (PASSED|FAILED)' hier.txt
grep -q '^\[  FAILED' hier.txt && fail "dist_hier reported failures"
for op in all_reduce reduce_scatter all_gather; do
  line=$(grep -m1 "^strata: group 'world' of 4 ranks (2 nodes x 2 ranks): $op of .* takes the hierarchical path" hier.txt) ||
    fail "the world's $op did not take the hierarchical path on 2 hosts x 2 ranks"
  log "$line"
done

log "HSDP on 2 hosts x 2 ranks: the shard group is the host (dist_zero's Hsdp tests)"
run -np 4 "$build/tests/dist_zero" --gtest_filter='HsdpNodes.*:Hsdp.*:*HsdpEquivalence*' >hsdp_tests.txt 2>&1 ||
  { cat hsdp_tests.txt; fail "dist_zero's HSDP tests failed on 2 hosts"; }
grep -E '^\[  (PASSED|FAILED)' hsdp_tests.txt
grep -q 'SKIPPED' hsdp_tests.txt && { cat hsdp_tests.txt; fail "HsdpNodes skipped: the hosts were not seen as 2 nodes of 2 ranks"; }

if [ "$train" = 1 ]; then
  log "train_gpt --steps 50 --global-batch 16 on 2 hosts x 2 ranks"
  gpt=("$build/examples/train_gpt/train_gpt" --steps 50 --global-batch 16 --log-every 25 --metrics '')
  run -np 4 "${gpt[@]}" >gpt.txt 2>&1 || { cat gpt.txt; fail "train_gpt failed on 2 hosts"; }
  grep -E '^step 50/50|^final' gpt.txt || fail "train_gpt did not reach step 50"
  # The same job with all 4 ranks on strata-h0: for the reader, the multi-host loss beside it.
  run -np 4 --host strata-h0:4 "${gpt[@]}" >gpt1.txt 2>&1 || { cat gpt1.txt; fail "train_gpt failed on 1 host"; }
  loss() { grep -oE '^step 50/50 \| loss [0-9.]+' "$1" | awk '{print $NF}'; }
  log "train_gpt step-50 loss: $(loss gpt.txt) on 2 hosts, $(loss gpt1.txt) on 1 host"
  # ZeRO-3 over the 4 ranks against HSDP (ZeRO-3 inside each host): what crossed the link.
  crossed_in() {  # output file, then train_gpt flags; prints the bytes that crossed the link
    local file=$1 before
    shift
    before=$(link_bytes)
    run -np 4 "${gpt[@]}" "$@" >"$file" 2>&1 || { cat "$file" >&2; fail "train_gpt $* failed"; }
    echo $(($(link_bytes) - before))
  }
  zero3_bytes=$(crossed_in zero3.txt --zero 3)
  hsdp_bytes=$(crossed_in hsdp.txt --zero 3 --hsdp)
  grep -q "^HSDP: ZeRO-3 sharded over 2 data ranks" hsdp.txt || { cat hsdp.txt; fail "--hsdp did not shard over a host"; }
  log "train_gpt --zero 3: $zero3_bytes bytes crossed the link; with --hsdp $hsdp_bytes"
  [ "$hsdp_bytes" -lt "$zero3_bytes" ] || fail "HSDP sent no fewer bytes between the hosts than ZeRO-3"
fi

if [ "$bench" = 1 ]; then
  if [ -x "$build/benchmarks/bench_collectives" ]; then
    log "bench_collectives all_reduce 1-256 MiB: hierarchical vs flat ring vs raw Open MPI (informational)"
    run -np 4 "$build/benchmarks/bench_collectives" --ops "${STRATA_CLUSTER_BENCH_OPS:-all_reduce}" --compare-flat \
      --min-bytes 1048576 --max-bytes 268435456 --iters "${STRATA_CLUSTER_BENCH_ITERS:-5}" --warmup 1 ||
      fail "bench_collectives failed"
  else
    log "no $build/benchmarks/bench_collectives: bench skipped (configure with -DSTRATA_BUILD_BENCHMARKS=ON)"
  fi
fi
log "PASSED"
