#!/usr/bin/env bash
# Creates the Python venv that holds the current PyTorch 2.x from PyPI, the second peer of the
# benchmarks (benchmarks/run_gpt_step.sh times strata beside Debian's torch 1.13 under
# /usr/bin/python3 and beside this one). Only the benchmarks use it; the tests and CI do not.
#   scripts/setup_peer_venv.sh [DIR]     (default: $STRATA_PEER_VENV or <repo>/.venv-peer)
# Installs torch, transformers and safetensors with pip, unpinned (what a user gets today),
# and prints their versions. PyPI's Linux torch wheel is the CUDA build; it runs on the CPU
# where there is no GPU. Cost: about 5.6 GB of disk (most of it the CUDA libraries) and about
# 90 s on the 2-vCPU VM, bound by the download. Idempotent: when the venv's python already
# imports torch and transformers it prints the versions and returns. A half-made venv (an
# interrupted pip) is completed on the next call. pip's own environment applies, e.g.
# PIP_INDEX_URL for a mirror. python3-venv is installed with apt when missing (root or sudo).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
venv=${1:-${STRATA_PEER_VENV:-$STRATA_ROOT/.venv-peer}}
py=/usr/bin/python3
packages=(torch transformers safetensors)
log() { printf '[setup_peer_venv] %s\n' "$*"; }

versions() {
  "$venv/bin/python" -c 'import sys, torch, transformers, safetensors
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}, safetensors {safetensors.__version__}")'
}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, transformers' 2>/dev/null; then
  log "$venv is ready: $(versions)"
  exit 0
fi

start=$SECONDS
[ -x "$py" ] || { log "$py not found: install python3 (Debian: apt-get install python3)" >&2; exit 1; }
# Debian's python3 has the venv module but not ensurepip, which venv needs to put pip in the
# venv; both come with python3-venv.
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  log "installing python3-venv"
  "$STRATA_ROOT/scripts/install_deps.sh" python3-venv
fi

log "creating $venv with $py ($("$py" --version 2>&1))"
"$py" -m venv "$venv"
log "installing ${packages[*]} (about 5.6 GB)"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off "${packages[@]}" ||
  { log "pip failed; the venv is kept, and running this again completes it" >&2; exit 1; }
"$venv/bin/python" -c 'import torch, transformers' || { log "the venv at $venv cannot import torch and transformers" >&2; exit 1; }
log "ready in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1) at $venv: $(versions)"
