#!/usr/bin/env bash
# Shapes what leaves one network device (in the namespace this runs in) with tc:
#   tests/cluster/shape_link.sh DEV RATE DELAY      (either may be "", not both)
# RATE is <number>{kbit,mbit,gbit}, DELAY is tc time syntax (0.2ms, 100us).
# Only a delay needs netem (sch_netem); a rate alone uses tbf, which more kernels have:
# e.g. the 2-vCPU development VM's kernel is built without netem, so there links can be
# rate-limited but not delayed.
set -euo pipefail
dev=$1 rate=$2 delay=$3
PATH=$PATH:/usr/sbin:/sbin
[ -n "$rate$delay" ] || exit 0
if [ -n "$delay" ]; then
  # shellcheck disable=SC2086  # the optional words are meant to split
  tc qdisc add dev "$dev" root netem delay "$delay" ${rate:+rate $rate} limit 10000 2>/dev/null && exit 0
  echo "shape_link: cannot add a netem qdisc on $dev (kernel without sch_netem, CONFIG_NET_SCH_NETEM?): --delay is unavailable here" >&2
  exit 1
fi
[[ "$rate" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || { echo "shape_link: rate must be <number>{kbit,mbit,gbit}, got '$rate'" >&2; exit 1; }
case ${BASH_REMATCH[2]} in kbit) mult=1000 ;; mbit) mult=1000000 ;; gbit) mult=1000000000 ;; esac
bytes_per_s=$((BASH_REMATCH[1] * mult / 8))
# tbf needs a bucket of at least one timer tick's worth of bytes and of one (GSO) packet:
# 2 ms of traffic, at least 64 KiB. latency bounds the queue; 50 ms keeps TCP from losing
# packets at the queue while the bucket is empty.
burst=$((bytes_per_s / 500)); [ "$burst" -ge 65536 ] || burst=65536
tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
