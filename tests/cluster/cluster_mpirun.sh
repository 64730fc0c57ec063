#!/usr/bin/env bash
# mpirun across the running cluster's hosts, with Open MPI's own launcher:
#   tests/cluster/cluster_mpirun.sh [mpirun options] program [args...]
# mpirun runs on the first host (so its own hostname is strata-h0 and its node is one of
# the cluster's), reads a host file naming every host with STRATA_CLUSTER_SLOTS slots
# (default 2), and starts its daemon on each other host through rsh_agent.sh instead of
# ssh. Out-of-band and MPI traffic both use TCP on the hosts' veth subnet (ob1 + tcp BTL;
# vader, shared memory, only between ranks of one host), so bytes between hosts cross the
# links that cluster_up.sh shaped.
# Ranks run oversubscribed, unbound, one thread each (OMP_NUM_THREADS=1 is passed on).
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
slots=${STRATA_CLUSTER_SLOTS:-2}
mapfile -t hosts < <(cluster_hosts)
hostfile=$CLUSTER_STATE/hostfile
for h in "${hosts[@]}"; do echo "$h slots=$slots"; done >"$hostfile"
# Every host of the host file must be reachable from mpirun's host over the network (a TCP
# connect, milliseconds each): otherwise mpirun would start the daemon there (rsh_agent.sh
# refuses, as ssh would) and print Open MPI's generic "unable to reliably start one or more
# daemons", which names no host. This names it.
for h in "${hosts[@]:1}"; do
  why=$(cluster_reachable "${hosts[0]}" "$h") ||
    cluster_die "host $h of $hostfile is unreachable from ${hosts[0]}, where mpirun runs: $why"
done
# Open MPI refuses to run as root unless told that it is meant (CI and this VM are root).
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# The transports: CLUSTER_OMPI_MCA (lib.sh). plm_rsh_no_tree_spawn: mpirun starts every
# daemon itself rather than daemons starting daemons, so only mpirun's host needs the agent.
mca=()
for ((i = 0; i < ${#CLUSTER_OMPI_MCA[@]}; i += 2)); do
  mca+=(--mca "${CLUSTER_OMPI_MCA[i]}" "${CLUSTER_OMPI_MCA[i + 1]}")
done
exec "$CLUSTER_DIR/host_exec.sh" "${hosts[0]}" mpirun --hostfile "$hostfile" \
  --mca plm_rsh_agent "$CLUSTER_DIR/rsh_agent.sh" --mca plm_rsh_no_tree_spawn 1 "${mca[@]}" \
  --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS=1 "$@"
