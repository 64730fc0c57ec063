#!/usr/bin/env bash
# Removes the cluster made by cluster_up.sh, or whatever a killed run left of one: every
# process inside a host's namespaces (mpirun, orted, ranks), the holders, the veth links,
# the bridge and the state directory. Safe to run at any time and more than once.
#   tests/cluster/cluster_down.sh [--locked | --owner PID]
#     --locked     the caller already holds the state lock (cluster_up.sh)
#     --owner PID  leave a cluster alone that another running process owns (the traps of
#                  cluster.sh and the tests: their cluster_up.sh may have failed because
#                  someone else's cluster is up)
set -uo pipefail
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ "$(id -u)" = 0 ] || cluster_die "needs root"
if [ "${1:-}" != --locked ]; then
  mkdir -p "$(dirname "$CLUSTER_STATE")"
  exec 9>"$CLUSTER_STATE.lock"
  flock -w 30 9 || cluster_die "another cluster_up.sh/cluster_down.sh holds $CLUSTER_STATE.lock"
fi
if [ "${1:-}" = --owner ]; then
  owner=$(cat "$CLUSTER_STATE/owner" 2>/dev/null) || owner=""
  if [ -n "$owner" ] && [ "$owner" != "$2" ] && cluster_running "$owner"; then
    cluster_log "the cluster belongs to running pid $owner, not $2: left alone"
    exit 0
  fi
fi

# Signals the given pids with TERM, waits up to 5 s, then KILLs what is left.
stop_all() {
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  local p left
  for _ in $(seq 50); do
    left=0
    for p in "$@"; do cluster_running "$p" && left=1; done
    [ "$left" = 1 ] || return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null
  return 0
}

# First what runs inside the hosts: a namespace lives as long as any process in it, and
# the holder must outlive them so that its namespace identifies them.
while read -r pid host; do
  [ -n "$pid" ] || continue
  ns=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
  # shellcheck disable=SC2046  # one pid per word
  stop_all $(cluster_in_namespace "$ns" "$pid")
  stop_all "$pid"
  cluster_log "stopped $host (holder $pid)"
done < <(cluster_find_holders)

# A veth pair disappears with its namespace; delete any near end that survived anyway.
for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^strata-v[0-9]*$'); do
  ip link del "$link" 2>/dev/null || true
done
ip link del "$CLUSTER_BRIDGE" 2>/dev/null || true
rm -rf "$CLUSTER_STATE"
exit 0
