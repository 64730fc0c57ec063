#!/usr/bin/env bash
# Starts a private one-node Slurm cluster on this machine (its own munged, slurmctld and
# slurmd, all state, sockets and logs in a temporary directory, on free ports), runs
#   srun --mpi=pmix -n <ranks> <binary> [args...]
# on it, checks the result and stops everything again (also on failure or interrupt).
# Nothing outside the temporary directory is changed, so it runs beside a real munge or
# Slurm installation without touching it.
#
#   tests/slurm/run_slurm_test.sh [--ranks N] [--expect REGEX] [--srun-arg ARG]... binary [args...]
#     --ranks N      tasks to start (default 2); more tasks than CPUs are overcommitted
#     --expect REGEX the output must contain a line matching REGEX (grep -E) from every rank,
#                    i.e. at least N matching lines
#     --srun-arg ARG an extra srun argument (repeatable), e.g. --srun-arg=--cpus-per-task=1
#
# Exit status: 0 passed, 1 failed, 77 skipped (ctest: SKIP_RETURN_CODE 77): not root, Slurm
# or munge not installed and not installable, or the daemons cannot start here.
# Environment: STRATA_SLURM_KEEP=1 keeps the temporary directory (logs, slurm.conf);
# STRATA_SLURM_TIMEOUT seconds for the srun step (default 120); STRATA_SLURM_REQUIRED=1
# turns every skip into a failure (CI, where Slurm must work).
set -euo pipefail

ranks=2
expect=""
srun_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --ranks=*) ranks=${1#*=}; shift ;;
    --expect) expect=$2; shift 2 ;;
    --expect=*) expect=${1#*=}; shift ;;
    --srun-arg) srun_extra+=("$2"); shift 2 ;;
    --srun-arg=*) srun_extra+=("${1#*=}"); shift ;;
    --) shift; break ;;
    -*) echo "run_slurm_test: unknown option $1" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ]; then
  echo "usage: $0 [--ranks N] [--expect REGEX] [--srun-arg ARG]... binary [args...]" >&2
  exit 1
fi
binary=$(realpath "$1"); shift
[ -x "$binary" ] || { echo "run_slurm_test: $binary is not an executable" >&2; exit 1; }
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "run_slurm_test: --ranks needs a positive integer, got '$ranks'" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/test_script_log.sh
source "$here/../test_script_log.sh"
test_script_log slurm-test STRATA_SLURM_REQUIRED

# --- 1. root, packages -----------------------------------------------------------------
# shellcheck source=tests/slurm/slurm_lib.sh
source "$here/slurm_lib.sh"
slurm_require_tools

# --- 2. temporary directory and cleanup -------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-slurm.XXXXXX")
# munged insists that everyone may traverse its socket's directory.
chmod 755 "$work"
munge_pid="" ctld_pid="" slurmd_pid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if slurm_alive "$ctld_pid"; then slurm_cancel_all "$work"; fi
  slurm_stop "$slurmd_pid"
  slurm_stop "$ctld_pid"
  local p
  for p in $(slurm_stepds_under "$work"); do kill -KILL "$p" 2>/dev/null || true; done
  slurm_stop "$munge_pid"
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for f in "$work"/log/{slurmctld,slurmd,munged}.log; do
      [ -s "$f" ] || continue
      echo "---- last lines of $f ----"
      tail -n 20 "$f"
    done
  fi
  if [ "${STRATA_SLURM_KEEP:-0}" = 1 ]; then
    log "kept $work"
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$work"/{munge,log,state,spool,tmp}
chmod 755 "$work/munge"

# --- 3. munge: a private key and daemon on a private socket ------------------------------
socket="$work/munge/munge.sock"
slurm_munge_key "$work/munge/munge.key"
slurm_start_munged "$work/munge/munge.key" "$socket" "$work/log/munged"
log "munged up (socket $socket)"

# --- 4. slurm.conf ----------------------------------------------------------------------
port_free() {
  if command -v ss >/dev/null 2>&1; then
    [ -z "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]
  else
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 1; fi
  fi
}
# Two free ports for slurmctld and slurmd, away from Slurm's defaults (6817, 6818).
ports=()
for p in $(seq $((16817 + RANDOM % 2000)) 19999); do
  port_free "$p" && ports+=("$p")
  [ ${#ports[@]} = 2 ] && break
done
[ ${#ports[@]} = 2 ] || skip "found no two free TCP ports"

node=$(hostname -s)
cpus=$(slurm_cpus)
mem=$(slurm_memory)
conf="$work/slurm.conf"
{
  cat <<EOF
# Written by tests/slurm/run_slurm_test.sh: a private one-node cluster.
ClusterName=strata-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmdSpoolDir=$work/spool
# Where the PMIx plugin puts its per-step directories (else /tmp).
TmpFS=$work/tmp
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  slurm_conf_common "$socket" "$work/state"
} >"$conf"
slurm_forget_allocation
export SLURM_CONF=$conf
log "slurm.conf: node $node, $cpus CPUs, ${mem} MiB, ports ${ports[*]}"

# --- 5. slurmctld and slurmd in the foreground (-D), as children of this script ----------
slurmctld -D -c -f "$conf" >"$work/log/slurmctld.out.log" 2>&1 &
ctld_pid=$!
slurmd -D -f "$conf" -N "$node" >"$work/log/slurmd.out.log" 2>&1 &
slurmd_pid=$!

slurm_wait_idle "$ctld_pid $slurmd_pid" "$work/log/slurmctld.log $work/log/slurmctld.out.log $work/log/slurmd.log $work/log/slurmd.out.log" "$node"
log "cluster up: node $node idle"

# --- 6. the job step --------------------------------------------------------------------
srun_args=(--mpi=pmix -n "$ranks" -N 1 --kill-on-bad-exit=1 --job-name=strata-slurm-test)
# More tasks than CPUs only fit when the step overcommits them.
[ "$ranks" -le "$cpus" ] || srun_args+=(--overcommit)
srun_args+=("${srun_extra[@]}")
log "srun ${srun_args[*]} $binary $*"
out="$work/srun.out"
step_start=$SECONDS
set +e
timeout -k 10 "${STRATA_SLURM_TIMEOUT:-120}" srun "${srun_args[@]}" "$binary" "$@" >"$out" 2>&1
rc=$?
set -e
sed 's/^/  | /' "$out"
log "srun exited with $rc after $((SECONDS - step_start)) s"
[ "$rc" != 124 ] || fail "srun did not finish in ${STRATA_SLURM_TIMEOUT:-120} s"
[ "$rc" = 0 ] || fail "srun exited with $rc"
if [ -n "$expect" ]; then
  matched=$(grep -cE -- "$expect" "$out" || true)
  [ "$matched" -ge "$ranks" ] || fail "expected a line matching '$expect' from each of $ranks ranks, found $matched"
fi
log "PASSED (total $((SECONDS - start)) s)"
