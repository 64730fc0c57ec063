# shellcheck shell=bash
# Sourced by the scripts that start a private Slurm cluster: tests/slurm/run_slurm_test.sh
# (one node, this machine) and tests/cluster/run_cluster_slurm_test.sh (one node per
# namespaced host). What both need: the tools, a munge key and munged, the slurm.conf
# settings that do not depend on the nodes, waiting for nodes, and stopping what was started.
# The caller defines log, skip and fail (each script words its own messages) before calling.
#
# Commands that talk to slurmctld (sinfo, squeue, scancel) run as
#   "${slurm_client[@]}" sinfo ...
# slurm_client is empty by default (slurmctld is reachable from here); the cluster test sets
# it to host_exec.sh on the host that runs slurmctld, since only the hosts reach its subnet.
slurm_client=()
SLURM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Root, munge and Slurm present (installed through scripts/install_deps.sh where missing),
# else skip. slurmd must be root to start job steps (it switches to the job's user); a
# private cluster as another user is not supported by Slurm.
slurm_require_tools() {
  [ "$(id -u)" = 0 ] || skip "needs root to run slurmd (running as uid $(id -u))"
  # The daemons live in sbin, which a non-login shell's PATH may lack.
  PATH=$PATH:/usr/sbin:/sbin
  local need=(munged mungekey munge unmunge slurmctld slurmd srun sinfo squeue scancel scontrol)
  local c missing=""
  for c in "${need[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=" $c"; done
  [ -n "$missing" ] || return 0
  # install_deps.sh returns at once when everything is there; it installs what is missing.
  log "missing:$missing; running scripts/install_deps.sh"
  "$SLURM_LIB_DIR/../../scripts/install_deps.sh" || skip "scripts/install_deps.sh could not install Slurm and munge"
  for c in "${need[@]}"; do
    command -v "$c" >/dev/null 2>&1 || skip "still missing $c (packages slurmctld slurmd slurm-client munge)"
  done
}

# Inside a real Slurm allocation srun would try to join that job: forget it.
slurm_forget_allocation() {
  local v
  for v in $(compgen -e); do
    case "$v" in SLURM_*|SRUN_*|SBATCH_*|SALLOC_*) unset "$v" ;; esac
  done
}

slurm_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Stops one process started by the caller: TERM, up to 10 s, then KILL.
slurm_stop() {
  slurm_alive "$1" || return 0
  kill "$1" 2>/dev/null || true
  for _ in $(seq 100); do slurm_alive "$1" || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}

# A new munge key in FILE (every munged of one cluster shares it).
slurm_munge_key() {
  mungekey --create --keyfile="$1" >/dev/null 2>&1 || skip "mungekey could not create a key"
  chmod 600 "$1"
}

# Starts munged in the foreground (a child of the caller), optionally through a launcher:
#   slurm_start_munged KEY SOCKET LOG [launcher words...]; its pid is then in munge_pid.
# It logs to LOG.log (its own log) and LOG.out.log (stdout and stderr).
# The socket's directory must be traversable by everyone (munged checks). Waits until a
# credential made on the socket decodes, else prints munged's log and skips.
slurm_start_munged() {
  local key=$1 socket=$2 log=$3; shift 3
  "$@" munged --foreground --socket="$socket" --key-file="$key" \
    --pid-file="$socket.pid" --log-file="$log.log" \
    --seed-file="$socket.seed" >"$log.out.log" 2>&1 &
  munge_pid=$!
  # (The socket is looked for through the launcher: it may sit in a path bound elsewhere there.)
  for _ in $(seq 100); do "$@" test -S "$socket" && break; slurm_alive "$munge_pid" || break; sleep 0.1; done
  # shellcheck disable=SC2016  # expanded by sh
  if ! "$@" sh -c 'munge -S "$1" -n | unmunge -S "$1"' munge-check "$socket" >/dev/null 2>&1; then
    tail -n 5 "$log.log" "$log.out.log" 2>/dev/null || true
    skip "munged did not start (see its log above)"
  fi
}

# The slurm.conf lines that do not depend on the nodes: authentication through the munged on
# SOCKET, the controller's state in STATE, no cgroups (works in containers and network
# namespaces, and leaves the machine's cgroup tree alone), no accounting, PMIx by default.
#   slurm_conf_common SOCKET STATE
slurm_conf_common() {
  cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$1
StateSaveLocation=$2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
MailProg=/bin/true
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
SlurmctldDebug=info
SlurmdDebug=info
EOF
}

# CPUs (nproc alone would report OMP_NUM_THREADS, which tests set to 1) and memory in MiB as
# slurmd measures it (a node whose slurm.conf claims more than that is drained).
slurm_cpus() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }
slurm_memory() {
  local mem
  mem=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  [ -n "$mem" ] || mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
  echo "$mem"
}

# Waits up to 60 s until every NODE is idle; DAEMON_PIDS (a space-separated list) must stay
# alive meanwhile, else skip with their logs (LOGS: files to show).
#   slurm_wait_idle "PID PID..." "LOG LOG..." NODE...
slurm_wait_idle() {
  local pids=$1 logs=$2; shift 2
  local p n state idle
  for _ in $(seq 120); do
    for p in $pids; do
      if ! slurm_alive "$p"; then
        # shellcheck disable=SC2086  # a list of files
        tail -n 15 $logs 2>/dev/null || true
        skip "a Slurm daemon (pid $p) exited during start-up (logs above)"
      fi
    done
    idle=0
    for n in "$@"; do
      state=$("${slurm_client[@]}" sinfo -h -N -n "$n" -o '%t' 2>/dev/null | head -1 || true)
      [ "$state" = idle ] && idle=$((idle + 1))
    done
    [ "$idle" = $# ] && return 0
    sleep 0.5
  done
  for n in "$@"; do "${slurm_client[@]}" scontrol show node "$n" 2>&1 | sed 's/^/  /' || true; done
  fail "nodes $* not all idle after 60 s"
}

# Job steps run in slurmstepd processes that are not slurmd's children; ours are those that
# hold a file under DIR open (slurmd's log, the spool).
slurm_stepds_under() {
  local p fd
  for p in $(pgrep -x slurmstepd || true); do
    for fd in /proc/"$p"/fd/*; do
      if [[ "$(readlink "$fd" 2>/dev/null)" == "$1/"* ]]; then echo "$p"; break; fi
    done
  done
  return 0
}

# Cancels every job and waits up to 10 s for them and for the slurmstepds under DIR to end:
# done while slurmd, slurmctld and munged can still talk to each other, since a step whose
# slurmd is gone never finishes.
slurm_cancel_all() {
  "${slurm_client[@]}" squeue -h -o %A 2>/dev/null | xargs -r "${slurm_client[@]}" scancel 2>/dev/null || true
  for _ in $(seq 100); do
    [ -z "$("${slurm_client[@]}" squeue -h 2>/dev/null)" ] && [ -z "$(slurm_stepds_under "$1")" ] && return 0
    sleep 0.1
  done
}
