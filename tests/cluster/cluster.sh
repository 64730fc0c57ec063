#!/usr/bin/env bash
# Brings a cluster up, runs one command, and always brings the cluster down again: when
# the command ends, fails, or this script is interrupted (Ctrl-C) or terminated.
#   tests/cluster/cluster.sh [--hosts N] [--rate RATE] [--delay DELAY] -- command [args...]
# The command runs in the root namespace; it reaches the hosts through cluster_mpirun.sh
# and host_exec.sh. Example:
#   tests/cluster/cluster.sh --hosts 2 --rate 1gbit -- \
#     tests/cluster/cluster_mpirun.sh -np 4 build/tests/dist_collectives
# Exits with the command's status. If this script is killed outright (SIGKILL), the next
# cluster_up.sh finds the cluster's owner gone and removes it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
up_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts | --rate | --delay) up_args+=("$1" "$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "cluster.sh: unknown argument $1 (the command follows --)" >&2; exit 1 ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: cluster.sh [--hosts N] [--rate RATE] [--delay DELAY] -- command..." >&2; exit 1; }
trap '"$here/cluster_down.sh" --owner $$' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$here/cluster_up.sh" --owner $$ "${up_args[@]}"
"$@"
