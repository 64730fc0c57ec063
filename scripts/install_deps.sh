#!/usr/bin/env bash
# Installs what strata needs to build and test from the Debian/Ubuntu archive (Debian 12,
# Ubuntu 24.04 or newer: CMake >= 3.25). Idempotent: when every package is installed it
# returns at once without calling apt. Runs apt through sudo when not root. Arguments are
# further required packages (scripts/setup_peer_venv.sh passes python3-venv).
# The CUDA toolkit is not in the archive and is not installed here; where nvcc exists
# (/usr/local/cuda), the build picks it up.
set -euo pipefail

required=(build-essential cmake g++ libopenblas-openmp-dev libopenmpi-dev openmpi-bin
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev "$@")
# Only the reference tests (comparisons with PyTorch) use the first two, scripts/plot_loss.py
# the third, only the Slurm tests (tests/slurm: a private one-node cluster running srun
# --mpi=pmix; tests/cluster's two-node one) the next four, and only the namespaced-host
# cluster tests (tests/cluster: ip, tc) iproute2, and their fault test's packet loss
# (run_cluster_faults_test.sh: nft) nftables; those tests (or steps) skip without them.
# libdnnl-dev (oneDNN) runs large float32 GEMMs faster than OpenBLAS (docs/performance.md);
# without it the build uses OpenBLAS for every product.
optional=(python3-torch python3-numpy python3-matplotlib slurmctld slurmd slurm-client munge iproute2 nftables libdnnl-dev)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for p in "${required[@]}" "${optional[@]}"; do
  installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all $(( ${#required[@]} + ${#optional[@]} )) packages already installed"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_deps: apt-get not found; on this system install the equivalents of: ${missing[*]}" >&2
  exit 1
fi

if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install_deps: need root or sudo to install ${missing[*]}" >&2
  exit 1
fi
# Waits for the dpkg lock instead of failing (a fresh machine often runs unattended upgrades).
apt_get() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=600 "$@"
}

# A mirror can fail for a moment; try the index update a few times.
for attempt in 1 2 3; do
  if apt_get update -qq; then break; fi
  if [ "$attempt" = 3 ]; then echo "install_deps: apt-get update failed" >&2; exit 1; fi
  sleep 10
done

to_install=()
for p in "${missing[@]}"; do
  if [[ " ${optional[*]} " == *" $p "* ]] && ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "install_deps: warning: optional package $p is not available here; what uses it is skipped" >&2
  else
    to_install+=("$p")
  fi
done
if [ ${#to_install[@]} -gt 0 ]; then
  apt_get install -y -qq --no-install-recommends "${to_install[@]}"
fi
echo "install_deps: done"
