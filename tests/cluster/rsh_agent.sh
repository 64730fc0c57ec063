#!/usr/bin/env bash
# Open MPI's remote-start agent for the cluster (mpirun --mca plm_rsh_agent <this>): mpirun
# calls it exactly as it would call ssh,
#   rsh_agent.sh [ssh options] HOST COMMAND WORDS...
# and, like ssh, it runs COMMAND WORDS joined by spaces through `sh -c` on HOST (here: in
# that host's namespaces) and returns when that command does. mpirun runs it in the
# background and treats its exit status as ssh's; the command it sends starts
# `orted --daemonize`, which detaches and stays in the host's namespaces after we return.
# Like an ssh login, the command gets a fresh environment (only PATH, HOME, LANG and
# LD_LIBRARY_PATH pass), so orted on a host sees what mpirun sends it and not mpirun's own
# environment by accident.
# Like ssh, it first connects over the network: a host that the caller's host cannot reach
# (its link down, say) fails at once with status 255, as ssh would with "No route to
# host", rather than starting an orted that could never call mpirun back (mpirun would then
# wait for it forever: orte_startup_timeout is off by default).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"
# Skip ssh's options; these take a value (ssh(1)).
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    -[bcDEeFIiJLlmOopQRSWw]*) shift ;;   # value glued on, e.g. -p22
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "rsh_agent: usage: rsh_agent.sh [ssh options] HOST COMMAND..." >&2; exit 255; }
host=$1; shift
# 255 is ssh's status for "could not reach the host", which mpirun reports as such.
"$here/host_exec.sh" "$host" true 2>/dev/null || { echo "rsh_agent: no host $host in the cluster" >&2; exit 255; }
why=$(cluster_reachable "$(hostname)" "$host") ||
  { echo "rsh_agent: cannot connect to host $host from $(hostname): $why" >&2; exit 255; }
# Like an ssh command, orted starts outside the caller's directory (mpirun tells it the
# ranks' working directory).
cd /
exec "$here/host_exec.sh" "$host" env -i PATH="$PATH" HOME="${HOME:-/root}" LANG="${LANG:-C}" \
  ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} sh -c "$*"
