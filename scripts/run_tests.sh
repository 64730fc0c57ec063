#!/usr/bin/env bash
# Installs the dependencies, builds strata (Release, in build/) and runs its tests with ctest.
# Arguments go to ctest, e.g. `scripts/run_tests.sh -L unit` or `-R install_consumer`.
# Environment, besides those in scripts/common.sh:
#   STRATA_TEST_TIMEOUT  seconds per test unless the test sets its own (default 600)
#   STRATA_TEST_JOBS     tests run at once (default 1: tests use the cores themselves)
# Tests labelled gpu are skipped when no GPU is visible.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

strata_section "dependencies"
"$STRATA_ROOT/scripts/install_deps.sh"

strata_section "configure $STRATA_BUILD_DIR"
strata_configure

strata_section "build (-j$STRATA_JOBS)"
start=$SECONDS
cmake --build "$STRATA_BUILD_DIR" -j "$STRATA_JOBS"
strata_log "build took $((SECONDS - start)) s"

strata_section "test"
ctest_args=(--test-dir "$STRATA_BUILD_DIR" --output-on-failure --no-tests=error
            --timeout "${STRATA_TEST_TIMEOUT:-600}" -j "${STRATA_TEST_JOBS:-1}")
if ! strata_has_gpu; then
  strata_log "no GPU visible (nvidia-smi -L failed): skipping tests labelled gpu"
  ctest_args+=(-LE gpu)
fi
strata_mpi_env
ctest "${ctest_args[@]}" "$@"
