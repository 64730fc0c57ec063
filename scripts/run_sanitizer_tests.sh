#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (in build-asan/,
# CPU only, -O1 with assertions on) and runs them. Arguments go to ctest.
# Environment, besides those in scripts/common.sh: STRATA_ASAN_BUILD_DIR (default build-asan),
# STRATA_TEST_TIMEOUT (seconds per test, default 600).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
build_dir=${STRATA_ASAN_BUILD_DIR:-$STRATA_ROOT/build-asan}

strata_section "dependencies"
"$STRATA_ROOT/scripts/install_deps.sh"

strata_section "configure $build_dir (ASan + UBSan)"
STRATA_BUILD_DIR=$build_dir STRATA_BUILD_TYPE=Debug STRATA_WITH_CUDA=OFF strata_configure \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DSTRATA_SANITIZE=ON \
  -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_BUILD_EXAMPLES=OFF

strata_section "build unit tests (-j$STRATA_JOBS)"
start=$SECONDS
cmake --build "$build_dir" --target strata_all_unit_tests -j "$STRATA_JOBS"
strata_log "build took $((SECONDS - start)) s"

strata_section "unit tests under ASan + UBSan"
# LeakSanitizer works here (it needs ptrace-like access, which some containers deny; there
# use ASAN_OPTIONS=detect_leaks=0).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
strata_log "ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS"
ctest --test-dir "$build_dir" -L unit --output-on-failure --no-tests=error \
  --timeout "${STRATA_TEST_TIMEOUT:-600}" "$@"
