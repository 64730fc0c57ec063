#!/usr/bin/env bash
# Runs a command on one host of the cluster: inside its UTS, network and mount namespaces
# (hostname, interfaces and /etc/hosts are the host's), in the caller's working directory
# and with the caller's environment. Exits with the command's status.
#   tests/cluster/host_exec.sh HOST command [args...]      e.g. host_exec.sh strata-h1 hostname
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -ge 2 ] || cluster_die "usage: host_exec.sh HOST command [args...]"
host=$1; shift
pid=$(cluster_host_pid "$host") || cluster_die "no such host in the running cluster: $host"
# --wd: entering a mount namespace would otherwise leave the command in /.
exec nsenter -t "$pid" -u -n -m --wd="$PWD" -- "$@"
