# shellcheck shell=bash
# Sourced by the scripts in this folder: paths, logging and the shared configure step.
# Environment (all optional):
#   STRATA_BUILD_DIR   build directory (default: <repo>/build)
#   STRATA_BUILD_TYPE  CMake build type (default: Release)
#   STRATA_JOBS        parallel compile jobs (default: nproc)
#   STRATA_WERROR      ON/OFF: compiler warnings as errors (CI sets ON; unset keeps the
#                      build directory's setting, so switching never forces a rebuild)
#   STRATA_CMAKE_ARGS  extra configure arguments, split on spaces
STRATA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STRATA_BUILD_DIR=${STRATA_BUILD_DIR:-$STRATA_ROOT/build}
STRATA_JOBS=${STRATA_JOBS:-$(nproc)}

strata_log() { printf '[strata] %s\n' "$*"; }
strata_section() { printf '\n======== %s ========\n' "$*"; }

# True when an NVIDIA GPU is visible (a CUDA toolkit alone is not enough to run GPU tests).
strata_has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

# Open MPI refuses to start as root unless told that it is meant; containers and CI are root.
strata_mpi_env() {
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
}

# strata_configure [cmake args...]: configures $STRATA_BUILD_DIR. CUDA kernels are built
# where nvcc is found (PATH, $CUDA_HOME or /usr/local/cuda), whether or not a GPU is present.
# shellcheck disable=SC2120  # callers may pass no arguments
strata_configure() {
  local args=(-S "$STRATA_ROOT" -B "$STRATA_BUILD_DIR"
              -DCMAKE_BUILD_TYPE="${STRATA_BUILD_TYPE:-Release}"
              -DSTRATA_WITH_CUDA="${STRATA_WITH_CUDA:-AUTO}")
  if [ -n "${STRATA_WERROR:-}" ]; then args+=(-DSTRATA_WERROR="$STRATA_WERROR"); fi
  # shellcheck disable=SC2206  # word splitting of the extra arguments is intended
  args+=(${STRATA_CMAKE_ARGS:-} "$@")
  cmake "${args[@]}"
}

# strata_build_benchmark BUILD_DIR TARGET: builds benchmarks/TARGET in BUILD_DIR when it is
# missing (configuring the tree first if it never was), quietly.
strata_build_benchmark() {
  local build=$1 target=$2
  [ -x "$build/benchmarks/$target" ] && return 0
  strata_log "building $build/benchmarks/$target"
  [ -f "$build/CMakeCache.txt" ] || STRATA_BUILD_DIR=$build strata_configure -DSTRATA_BUILD_BENCHMARKS=ON >/dev/null
  cmake -S "$STRATA_ROOT" -B "$build" -DSTRATA_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build" -j "$STRATA_JOBS" --target "$target" >/dev/null
}
