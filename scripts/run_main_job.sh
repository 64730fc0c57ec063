#!/usr/bin/env bash
# The main job: installs the dependencies, builds strata and trains a GPT on the built-in
# synthetic task. Arguments go to train_gpt (see examples/train_gpt).
# Environment, besides those in scripts/common.sh:
#   STRATA_NP        number of ranks (default 2): data parallel with DistributedDataParallel;
#                    --batch is per rank, so the global batch is STRATA_NP x --batch
#   OMP_NUM_THREADS  threads per rank (default: cores / ranks, at least 1)
# Where a GPU is visible (nvidia-smi -L) and strata was built with CUDA, the job trains with
# --device cuda (each rank on GPU local-rank % GPUs; the same recipe, float32); a --device of
# your own in the arguments comes after it and wins.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
np=${STRATA_NP:-2}

strata_section "dependencies"
"$STRATA_ROOT/scripts/install_deps.sh"

strata_section "configure $STRATA_BUILD_DIR"
strata_configure

strata_section "build train_gpt (-j$STRATA_JOBS)"
cmake --build "$STRATA_BUILD_DIR" --target train_gpt -j "$STRATA_JOBS"

strata_section "train: mpirun -np $np train_gpt $*"
strata_mpi_env
threads=$(( $(nproc) / np ))
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( threads > 0 ? threads : 1 ))}
bin=$STRATA_BUILD_DIR/examples/train_gpt/train_gpt
device=()
if nvidia-smi -L > /dev/null 2>&1 && ldd "$bin" 2>/dev/null | grep -q libcudart; then
  device=(--device cuda)
  echo "a GPU is visible and strata was built with CUDA: training with --device cuda ($(nvidia-smi -L | head -1))"
else
  echo "training on the CPU (no GPU visible, or strata built without CUDA)"
fi
# --oversubscribe: allow more ranks than cores. --bind-to none: Open MPI would otherwise pin
# each rank to one core, and its OpenMP threads with it.
exec mpirun --oversubscribe --bind-to none -np "$np" "$bin" ${device[@]+"${device[@]}"} "$@"
