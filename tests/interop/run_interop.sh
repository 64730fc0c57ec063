#!/usr/bin/env bash
# ctest interop_hf: runs hf_interop.py in the PyTorch 2.x + transformers venv made by
# scripts/setup_peer_venv.sh ($STRATA_PEER_VENV, default <repo>/.venv-peer) against the
# strata_hf_interop program. Exits 77 (ctest: skipped) when that venv is missing.
#   run_interop.sh PATH/TO/strata_hf_interop
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${STRATA_PEER_VENV:-$root/.venv-peer}
if ! [ -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, transformers, safetensors' 2>/dev/null; then
  echo "interop_hf: skipped: no venv with torch, transformers and safetensors at $venv" \
       "(create it with scripts/setup_peer_venv.sh, about 5.6 GB, or point STRATA_PEER_VENV at one)"
  exit 77
fi
export HF_HUB_OFFLINE=1  # everything is local; never reach for the hub
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" -c 'import torch, transformers; print(f"interop_hf: torch {torch.__version__}, transformers {transformers.__version__}")'
"$venv/bin/python" "$here/hf_interop.py" "$1" "$work"
