#!/usr/bin/env bash
# Creates a cluster of N "hosts" on this machine. Each host is a set of namespaces held open
# by one long-lived process (its "holder"):
#   - UTS: its own hostname, strata-h<i>
#   - net: its own loopback and an eth0 with address <subnet>.(10+i)/24, the far end of a
#     veth pair whose near end is a port of the bridge strata-br0 in the root namespace
#   - mount: a private copy of the mount table in which a generated hosts file is bound
#     over /etc/hosts, so every host resolves every other host's name while the real
#     /etc/hosts is never written
# Why a holder process instead of `ip netns add`: `ip netns` pins only a network namespace;
# the hostname needs a UTS namespace and the hosts file a mount namespace, and a process
# holds all three at once and is entered with one `nsenter -t PID -u -n -m` (host_exec.sh).
# Namespaces vanish with the last process inside them, so teardown (cluster_down.sh) only
# has to stop processes; no bind-mounted namespace files are left behind on a crash.
#
#   tests/cluster/cluster_up.sh [--hosts N] [--rate RATE] [--delay DELAY] [--owner PID]
#     --hosts N      hosts to create (default 2)
#     --rate RATE    limit each host's link to RATE in each direction (1gbit, 100mbit);
#                    default: unlimited
#     --delay DELAY  delay each packet a host sends by DELAY (tc syntax: 0.2ms), i.e.
#                    one-way host-to-host latency DELAY; needs sch_netem; default: none
#     --owner PID    the process the cluster belongs to (default: the caller); a later
#                    cluster_up.sh removes the cluster once that process is gone
# A cluster left over by a killed run is removed first; one whose owner still runs is an
# error (the names are fixed, so two clusters cannot coexist). On failure everything built
# so far is removed again.
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

hosts=2 rate="" delay="" owner=$PPID
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --owner) owner=$2; shift 2 ;;
    *) cluster_die "cluster_up.sh: unknown argument $1" ;;
  esac
done
if ! [[ "$hosts" =~ ^[1-9][0-9]?$ ]] || [ "$hosts" -gt 64 ]; then cluster_die "--hosts needs 1..64, got '$hosts'"; fi
[ "$(id -u)" = 0 ] || cluster_die "needs root (network namespaces, veth, bridge, tc)"
for c in unshare nsenter ip tc setsid flock; do
  command -v "$c" >/dev/null || cluster_die "missing command: $c"
done

# --- one cluster at a time; a dead owner's cluster is stale --------------------------
mkdir -p "$(dirname "$CLUSTER_STATE")"
exec 9>"$CLUSTER_STATE.lock"
flock -w 30 9 || cluster_die "another cluster_up.sh/cluster_down.sh holds $CLUSTER_STATE.lock"
if [ -f "$CLUSTER_STATE/owner" ]; then
  old=$(cat "$CLUSTER_STATE/owner")
  if [ "$old" != "$owner" ] && cluster_running "$old"; then
    cluster_die "a cluster owned by running pid $old exists; stop it or run tests/cluster/cluster_down.sh"
  fi
fi
if [ -n "$(cluster_find_holders)" ] || [ -d "$CLUSTER_STATE" ] || ip link show "$CLUSTER_BRIDGE" >/dev/null 2>&1; then
  cluster_log "removing a stale cluster"
  "$CLUSTER_DIR/cluster_down.sh" --locked
fi

# From here a failure removes the half-built cluster.
ok=0
on_exit() { [ "$ok" = 1 ] || "$CLUSTER_DIR/cluster_down.sh" --locked || true; }
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$CLUSTER_STATE"
echo "$owner" >"$CLUSTER_STATE/owner"
# The hosts file every host sees as /etc/hosts: each name maps to its eth0 address (as on
# a real cluster), never to 127.0.1.1, so Open MPI's "is this name me?" checks work.
{
  echo "127.0.0.1 localhost"
  echo "::1 localhost ip6-localhost ip6-loopback"
  for ((i = 0; i < hosts; i++)); do echo "$(cluster_addr "$i") $(cluster_hostname "$i")"; done
} >"$CLUSTER_STATE/hosts"
: >"$CLUSTER_STATE/hosts.list"

ip link add "$CLUSTER_BRIDGE" type bridge
ip link set "$CLUSTER_BRIDGE" up

for ((i = 0; i < hosts; i++)); do
  host=$(cluster_hostname "$i")
  # setsid: the holder is not in the terminal's process group, so Ctrl-C reaches only the
  # scripts, whose traps then tear down in order. Its stdio is /dev/null so that it never
  # keeps a caller's pipe open. fd 9 (the lock) is closed so a holder never holds it.
  # shellcheck disable=SC2016  # expanded by the holder's shell
  setsid unshare --uts --net --mount --propagation private -- bash -c '
    set -e
    hostname "$1"
    ip link set lo up
    mount --bind "$2" /etc/hosts
    exec -a "$3:$1" sleep infinity' holder "$host" "$CLUSTER_STATE/hosts" "$CLUSTER_HOLDER_TAG" \
    </dev/null >/dev/null 2>"$CLUSTER_STATE/$host.holder.err" 9>&- &
  pid=$!
  echo "$pid" >"$CLUSTER_STATE/$host.pid"
  # Wait until the holder has configured itself and become `sleep` under its tag.
  for _ in $(seq 100); do cluster_host_pid "$host" >/dev/null && break; sleep 0.05; done
  cluster_host_pid "$host" >/dev/null ||
    cluster_die "host $host did not start: $(cat "$CLUSTER_STATE/$host.holder.err" 2>/dev/null)"

  veth=$(cluster_veth "$i")
  ip link add "$veth" type veth peer name eth0 netns "$pid"
  ip link set "$veth" master "$CLUSTER_BRIDGE" up
  nsenter -t "$pid" -n ip addr add "$(cluster_addr "$i")/24" dev eth0
  nsenter -t "$pid" -n ip link set eth0 up
  # Shaping (shape_link.sh): what the host sends is delayed and rate-limited on its eth0;
  # what it receives is rate-limited on the bridge side too, so that several senders cannot
  # push more than RATE into one host. The delay is applied once: one way between hosts
  # takes DELAY, a round trip 2 x DELAY.
  if [ -n "$rate$delay" ]; then
    nsenter -t "$pid" -n "$CLUSTER_DIR/shape_link.sh" eth0 "$rate" "$delay"
    [ -z "$rate" ] || "$CLUSTER_DIR/shape_link.sh" "$veth" "$rate" ""
  fi
  echo "$host" >>"$CLUSTER_STATE/hosts.list"
  cluster_log "$host: pid $pid, $(cluster_addr "$i")/24 via $veth${rate:+, rate $rate}${delay:+, delay $delay}"
done

# Every host must reach every other one (cluster_reachable, lib.sh: e.g. bridge traffic
# dropped by a firewall through br_netfilter fails here). Peers are named, not numbered, so
# each host's /etc/hosts is checked too.
for ((i = 0; i < hosts; i++)); do
  for ((j = 0; j < hosts; j++)); do
    [ "$i" != "$j" ] || continue
    why=$(cluster_reachable "$(cluster_hostname "$i")" "$(cluster_hostname "$j")" 5) ||
      cluster_die "$(cluster_hostname "$i") cannot reach $(cluster_hostname "$j") over the bridge: $why"
  done
done
ok=1
cluster_log "up: $hosts hosts on $CLUSTER_CIDR (bridge $CLUSTER_BRIDGE, state $CLUSTER_STATE)"
