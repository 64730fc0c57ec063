#!/usr/bin/env bash
# A two-node Slurm cluster on the namespaced hosts (cluster_up.sh), and strata run across it
# with srun --mpi=pmix. Each host is a Slurm node as on a real cluster:
#   - strata-h0 and strata-h1 each run their own munged (one shared key) and a slurmd with
#     NodeName = the host's hostname and NodeAddr = its address on the cluster subnet;
#   - strata-h0 also runs slurmctld (the head node is a compute node too), and srun, sinfo
#     and scancel run there: the subnet exists only inside the hosts, so the root namespace
#     cannot reach slurmctld, and slurmd must be able to connect back to srun;
#   - one slurm.conf for all (a shared file system, as /etc/slurm on NFS); the directories
#     slurm.conf names as node-local (spool, TmpFS for the PMIx plugin, munge's socket, the
#     slurmd log) are one path bound to a different directory in each host's mount
#     namespace, so each slurmd has its own state under the same name;
#   - the standard ports 6817/6818: each host has its own network stack.
# Then checks, with 2 tasks on each host:
#   1. placement: SLURM_PROCID 0-1 on node 0 = strata-h0, 2-3 on node 1 = strata-h1, each
#      SLURM_LOCALID 0-1 (hostnames from the tasks' own UTS namespaces)
#   2. strata's world group (strata_slurm_collectives 4): ranks agree with SLURM_PROCID and
#      SLURM_LOCALID, local_size() is 2 on every rank (strata found its node-mates through
#      MPI, not from the whole world), collectives correct
#   3. dist_collectives (the gtest suite) passes, and its traffic crossed strata-h1's link
#   4. train_gpt trains a few steps on the 4 ranks
# Everything is stopped on exit, failure, interrupt or when the time budget runs out; the
# daemons and steps all live inside the hosts, so cluster_down.sh (also run by the next
# cluster_up.sh after a SIGKILL) removes whatever a killed run leaves.
#
#   tests/cluster/run_cluster_slurm_test.sh [--build DIR]
# Exit status: 0 passed, 1 failed, 77 skipped (not root, Slurm/munge/namespaces missing, or
# the daemons cannot start here). Environment: STRATA_CLUSTER_TIMEOUT seconds for the whole
# test (default 150); STRATA_CLUSTER_REQUIRED=1 turns every skip into a failure;
# STRATA_CLUSTER_KEEP=DIR copies slurm.conf and every log to DIR before teardown.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${STRATA_BUILD_DIR:-$repo/build}
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    *) echo "run_cluster_slurm_test: unknown argument $1" >&2; exit 1 ;;
  esac
done
build=$(realpath -m "$build")
# shellcheck source=tests/test_script_log.sh
source "$here/../test_script_log.sh"
test_script_log cluster-slurm STRATA_CLUSTER_REQUIRED
deadline=$((start + ${STRATA_CLUSTER_TIMEOUT:-150}))

# --- 1. can this machine make hosts and run Slurm? ----------------------------------------
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"
# shellcheck source=tests/slurm/slurm_lib.sh
source "$repo/tests/slurm/slurm_lib.sh"
reason=$(cluster_probe) || skip "$reason"
slurm_require_tools
bins=(tests/dist_collectives tests/strata_slurm_collectives examples/train_gpt/train_gpt)
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || fail "$build/$b is missing: build the tests and examples first"
done
hosts=(strata-h0 strata-h1)
head=${hosts[0]}

# --- 2. teardown, set before anything starts ------------------------------------------------
work=$CLUSTER_STATE/slurm   # inside the cluster's state: cluster_down.sh removes it
ctld_pid="" slurmd_pids=() munge_pids=()
cleanup() {
  local rc=$? p
  set +e         # every step below must run, whatever fails before it
  trap - EXIT INT TERM
  trap '' PIPE   # a reader that went away (| head) must not cut the teardown short
  if slurm_alive "$ctld_pid"; then slurm_cancel_all "$work"; fi
  for p in "${slurmd_pids[@]}"; do slurm_stop "$p"; done
  slurm_stop "$ctld_pid"
  for p in "${munge_pids[@]}"; do slurm_stop "$p"; done
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for f in "$work"/log/*.log "$work"/nodes/*/slurmd.log; do
      [ -s "$f" ] || continue
      echo "---- last lines of $f ----"
      tail -n 15 "$f"
    done
  fi
  if [ -n "${STRATA_CLUSTER_KEEP:-}" ] && [ -d "$work" ]; then
    mkdir -p "$STRATA_CLUSTER_KEEP" && cp -r "$work"/slurm.conf "$work"/log "$work"/nodes "$STRATA_CLUSTER_KEEP"/ 2>/dev/null
    log "kept slurm.conf and the logs in $STRATA_CLUSTER_KEEP"
  fi
  # Whatever still runs inside the hosts (a step that ignored scancel), the hosts, $work.
  "$here/cluster_down.sh" --owner $$
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 3. the hosts and their node-local directories ------------------------------------------
"$here/cluster_up.sh" --hosts 2 --owner $$
on() { "$here/host_exec.sh" "$@"; }
mkdir -p "$work"/{log,state,local}
# munged insists that everyone may traverse its socket's and key's directories.
chmod 755 "$work" "$work/local"
for h in "${hosts[@]}"; do
  mkdir -p "$work/nodes/$h"/{spool,tmp,munge}
  chmod 755 "$work/nodes/$h" "$work/nodes/$h/munge"
  # Only this host's mount namespace sees the bind (cluster_up.sh made it private).
  on "$h" mount --bind "$work/nodes/$h" "$work/local" || skip "cannot bind-mount inside $h's mount namespace"
done

# --- 4. munge on every host, one key ---------------------------------------------------------
socket=$work/local/munge/munge.sock
slurm_munge_key "$work/munge.key"
for h in "${hosts[@]}"; do
  slurm_start_munged "$work/munge.key" "$socket" "$work/log/munged-$h" "$here/host_exec.sh" "$h"
  munge_pids+=("$munge_pid")
done
# A credential made on one host decodes on the other: the key is shared and each host
# reaches its own daemon.
on "$head" munge -S "$socket" -n -s "from $head" >"$work/cred" || fail "munge on $head failed"
on "${hosts[1]}" unmunge -S "$socket" <"$work/cred" >/dev/null ||
  fail "a munge credential made on $head does not decode on ${hosts[1]}"
log "munged up on ${hosts[*]} (socket $socket in each)"

# --- 5. slurm.conf, slurmctld on the head, slurmd on every host ---------------------------
cpus=$(slurm_cpus)
mem=$(slurm_memory)
conf=$work/slurm.conf
{
  cat <<EOF
# Written by tests/cluster/run_cluster_slurm_test.sh: one node per namespaced host.
ClusterName=strata-cluster
SlurmctldHost=$head($(cluster_addr 0))
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=$work/slurmctld.pid
SlurmctldLogFile=$work/log/slurmctld.log
# Node-local (a different directory on each host under the same name):
SlurmdSpoolDir=$work/local/spool
SlurmdPidFile=$work/local/slurmd.pid
SlurmdLogFile=$work/local/slurmd.log
# Where the PMIx plugin puts its per-step directories (else /tmp).
TmpFS=$work/local/tmp
EOF
  for i in "${!hosts[@]}"; do
    echo "NodeName=${hosts[i]} NodeAddr=$(cluster_addr "$i") CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  done
  echo "PartitionName=cluster Nodes=$(IFS=,; echo "${hosts[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
  slurm_conf_common "$socket" "$work/state"
} >"$conf"
slurm_forget_allocation
export SLURM_CONF=$conf
slurm_client=("$here/host_exec.sh" "$head")

on "$head" slurmctld -D -c -f "$conf" >"$work/log/slurmctld.out.log" 2>&1 &
ctld_pid=$!
for h in "${hosts[@]}"; do
  on "$h" slurmd -D -f "$conf" -N "$h" >"$work/log/slurmd-$h.out.log" 2>&1 &
  slurmd_pids+=($!)
done
slurm_wait_idle "$ctld_pid ${slurmd_pids[*]}" \
  "$work/log/slurmctld.log $work/log/*.out.log $work/nodes/*/slurmd.log" "${hosts[@]}"
log "Slurm up: $("${slurm_client[@]}" sinfo -h -N -o '%N %t %c' | tr '\n' ' ')($cpus CPUs each)"

# --- 6. job steps: 2 tasks on each host --------------------------------------------------
# Open MPI's transports as with mpirun (lib.sh), as variables since srun passes the
# environment to the tasks.
for ((i = 0; i < ${#CLUSTER_OMPI_MCA[@]}; i += 2)); do
  export "OMPI_MCA_${CLUSTER_OMPI_MCA[i]}=${CLUSTER_OMPI_MCA[i + 1]}"
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
srun_args=(--mpi=pmix -N 2 -n 4 --ntasks-per-node=2 --kill-on-bad-exit=1 --job-name=strata-cluster-test)
[ "$cpus" -ge 2 ] || srun_args+=(--overcommit)
out=$work/out
mkdir -p "$out"
# Runs srun on the head with what is left of the time budget, output to $out/NAME.txt. In
# the background so that INT/TERM reach the trap at once rather than after srun.
step() {
  local name=$1 left=$((deadline - SECONDS)) rc=0; shift
  [ "$left" -gt 5 ] || fail "time budget (STRATA_CLUSTER_TIMEOUT=${STRATA_CLUSTER_TIMEOUT:-150} s) spent before $name"
  log "srun ${srun_args[*]} $*"
  timeout -k 5 "$left" "$here/host_exec.sh" "$head" srun "${srun_args[@]}" "$@" >"$out/$name.txt" 2>&1 &
  wait $! || rc=$?
  [ "$rc" != 124 ] || { cat "$out/$name.txt"; fail "$name: srun still running when the time budget ran out"; }
  [ "$rc" = 0 ] || { cat "$out/$name.txt"; fail "$name: srun exited with $rc"; }
}

# shellcheck disable=SC2016  # expanded by each task's shell
step placement sh -c 'echo "rank=$SLURM_PROCID node=$SLURM_NODEID host=$(hostname) local=$SLURM_LOCALID"'
sort "$out/placement.txt" | tee "$out/placement.sorted"
want=$(printf 'rank=%d node=%d host=strata-h%d local=%d\n' 0 0 0 0 1 0 0 1 2 1 1 0 3 1 1 1)
[ "$(cat "$out/placement.sorted")" = "$want" ] || fail "placement differs from 2 tasks on each of strata-h0 (node 0), strata-h1 (node 1)"

step world "$build/tests/strata_slurm_collectives" 4
grep '^slurm_collectives:' "$out/world.txt" | sort
n=$(grep -cE '^slurm_collectives: rank [0-3] of 4, local rank [01] of 2 \(SLURM_LOCALID=[01]\): OK$' "$out/world.txt" || true)
[ "$n" = 4 ] || fail "strata_slurm_collectives: expected 4 ranks reporting local rank 0-1 of 2 and OK, got $n"

# What crossed strata-h1's link: the root namespace's end of its veth pair counts it.
link_bytes() { local s; s=/sys/class/net/$(cluster_veth 1)/statistics; echo $(($(cat "$s/rx_bytes") + $(cat "$s/tx_bytes"))); }
before=$(link_bytes)
# --label: each output line starts with its task's number, so each rank's verdict is known.
step dist_collectives --label "$build/tests/dist_collectives"
crossed=$(($(link_bytes) - before))
grep -E '^ *[0-9]+: \[  (PASSED|FAILED)' "$out/dist_collectives.txt" | sort
passed=$(grep -E '^ *[0-3]: \[  PASSED  \]' "$out/dist_collectives.txt" | cut -d: -f1 | sort -u | wc -l)
[ "$passed" = 4 ] || fail "dist_collectives: $passed of 4 ranks reported PASSED"
! grep -qE '^ *[0-9]+: \[  FAILED' "$out/dist_collectives.txt" || fail "dist_collectives reported failures"
log "dist_collectives passed on 4 ranks; $crossed bytes crossed $(cluster_veth 1)"
# Slurm's and Open MPI's start-up move a few KiB; the collectives far more.
[ "$crossed" -gt 65536 ] || fail "only $crossed bytes crossed the link: the ranks did not talk over the network"

steps=20
step train_gpt "$build/examples/train_gpt/train_gpt" --steps "$steps" --warmup 5 --global-batch 16 \
  --log-every 10 --metrics ''
# One data-parallel job of 4 ranks (4 singletons, had the PMIx wire-up failed, would say 1).
grep -E '^GPT: .* x 4 rank\(s\)' "$out/train_gpt.txt" || fail "train_gpt did not run as one job of 4 ranks"
grep -E "^step $steps/$steps" "$out/train_gpt.txt" || fail "train_gpt did not reach step $steps"
log "PASSED (total $((SECONDS - start)) s)"
