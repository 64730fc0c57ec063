# shellcheck shell=bash
# Sourced by the tests/cluster scripts: the names and addresses every script must agree on,
# and the helpers that find a host's namespaces. One cluster per machine at a time (the
# names are fixed so that a later run can find and remove what a killed run left behind).
#
# Environment (all optional):
#   STRATA_CLUSTER_SUBNET  first three octets of the hosts' /24 (default 10.77.0); host i
#                          gets .(10+i). Pick a subnet no real interface uses.
#   STRATA_CLUSTER_STATE   state directory (default /run/strata-cluster): pid files, the
#                          hosts file, the mpirun host file
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_SUBNET=${STRATA_CLUSTER_SUBNET:-10.77.0}
CLUSTER_CIDR=$CLUSTER_SUBNET.0/24
CLUSTER_STATE=${STRATA_CLUSTER_STATE:-/run/strata-cluster}
CLUSTER_BRIDGE=strata-br0
# argv[0] of each host's namespace holder; cleanup finds holders by it even without the
# state directory (a run killed before it wrote its pid files).
CLUSTER_HOLDER_TAG=strata-cluster-host
# ip, tc and nsenter live in sbin, which a non-login shell's PATH may lack.
PATH=$PATH:/usr/sbin:/sbin

cluster_log() { printf '[cluster] %s\n' "$*" >&2; }
cluster_die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

cluster_hostname() { echo "strata-h$1"; }         # host index -> hostname
cluster_addr() { echo "$CLUSTER_SUBNET.$((10 + $1))"; }
cluster_veth() { echo "strata-v$1"; }             # the root namespace's end of host i's link

# Whether PID still runs. One that has exited but is not reaped yet (a zombie) counts as
# gone: the processes here are mostly orphans, which PID 1 may reap only a second later.
cluster_running() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Pid of the process that holds HOST's namespaces (from the state directory), checked to
# still be our holder: a pid file can outlive its process and the pid be reused.
cluster_host_pid() {
  local host=$1 pid
  pid=$(cat "$CLUSTER_STATE/$host.pid" 2>/dev/null) || return 1
  [[ "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" == "$CLUSTER_HOLDER_TAG:$host "* ]] || return 1
  echo "$pid"
}

# Processes whose network namespace is NS (an "net:[inode]" link), the holder HOLDER excepted:
# what runs "on" a host (mpirun, orted, ranks, daemons).
cluster_in_namespace() {
  local ns=$1 holder=$2 d
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" != "$holder" ] || continue
    [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$ns" ] && echo "${d#/proc/}"
  done
  return 0
}

# The pids of every process on HOST of the running cluster (its holder excepted).
cluster_host_procs() {
  local pid ns
  pid=$(cluster_host_pid "$1") || return 1
  ns=$(readlink "/proc/$pid/ns/net") || return 1
  cluster_in_namespace "$ns" "$pid"
}

# Whether host FROM reaches host TO (by name, through FROM's /etc/hosts) over the network
# within TIMEOUT seconds (default STRATA_CLUSTER_REACH_TIMEOUT, else 2): a TCP connect to a closed port that is refused proves
# the path works (TO's kernel answered); a timeout or "no route" does not (a link down, a
# firewall dropping bridge traffic through br_netfilter, a name that does not resolve).
# Prints what the connect said when it fails.
cluster_reachable() {
  local from=$1 to=$2 t=${3:-${STRATA_CLUSTER_REACH_TIMEOUT:-2}} out
  out=$("$CLUSTER_DIR/host_exec.sh" "$from" timeout "$t" bash -c "exec 3<>/dev/tcp/$to/9" 2>&1) || true
  [[ "$out" == *"refused"* ]] && return 0
  out=${out##*: }                       # bash's "...: /dev/tcp/HOST/9: No route to host"
  echo "${out:-no answer within ${t} s}"
  return 1
}

# All running holders, "PID HOST" per line, found by scanning /proc (stale ones included).
cluster_find_holders() {
  local d argv0
  for d in /proc/[0-9]*; do
    argv0=$(tr '\0' '\n' 2>/dev/null <"$d/cmdline" | head -n 1) || continue
    [[ "$argv0" == "$CLUSTER_HOLDER_TAG:"* ]] && echo "${d#/proc/} ${argv0#*:}"
  done
  return 0
}

# Whether this machine can make a cluster: prints the reason and returns 1 when it cannot
# (not root, a command missing, the kernel or container refusing namespaces, veth pairs or
# bridges). Creates nothing that outlives it (the probes run in throwaway namespaces).
cluster_probe() {
  local c
  if [ "$(id -u)" != 0 ]; then
    echo "needs root to create network namespaces, veth pairs and a bridge (uid $(id -u))"; return 1
  fi
  for c in unshare nsenter ip tc setsid flock timeout; do
    command -v "$c" >/dev/null || { echo "missing command: $c (packages util-linux, iproute2, coreutils)"; return 1; }
  done
  unshare --uts --net --mount -- true 2>/dev/null ||
    { echo "the kernel or container refuses new UTS/network/mount namespaces (unshare failed)"; return 1; }
  unshare --net -- sh -c 'ip link add p0 type veth peer name p1 && ip link add b0 type bridge' 2>/dev/null ||
    { echo "cannot create veth pairs or bridges (kernel without CONFIG_VETH/CONFIG_BRIDGE?)"; return 1; }
  return 0
}

# Open MPI's MCA settings for ranks on the cluster, as name value pairs: the ob1 PML with
# TCP between hosts and shared memory (vader) within one, on the hosts' subnet only. The ucx
# PML would choose its own transports (shared memory and CMA reach across network
# namespaces on one kernel) and hide the network. cluster_mpirun.sh passes them as --mca,
# run_cluster_slurm_test.sh as OMPI_MCA_* variables (srun has no --mca).
# shellcheck disable=SC2054  # tcp,self,vader is one value
CLUSTER_OMPI_MCA=(pml ob1 btl tcp,self,vader btl_tcp_if_include "$CLUSTER_CIDR"
                  oob_tcp_if_include "$CLUSTER_CIDR" mpi_yield_when_idle 1)

# The hosts of the running cluster, in index order (one hostname per line).
cluster_hosts() {
  [ -f "$CLUSTER_STATE/hosts.list" ] || cluster_die "no cluster is up (no $CLUSTER_STATE/hosts.list): run tests/cluster/cluster_up.sh"
  cat "$CLUSTER_STATE/hosts.list"
}
