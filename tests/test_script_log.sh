# shellcheck shell=bash
# Messages of the test scripts (tests/slurm, tests/cluster), sourced by each:
#   test_script_log NAME REQUIRED_VARIABLE
# then log MESSAGE (prefixed with NAME and the seconds since the call), skip REASON (exit 77,
# which ctest reports as skipped, but exit 1 where the environment sets REQUIRED_VARIABLE=1:
# CI, where a skip would hide a broken test) and fail REASON (exit 1).
test_script_log() {
  TEST_SCRIPT_NAME=$1
  TEST_SCRIPT_REQUIRED=$2
  start=$SECONDS
}
log() { printf '[%s %3ds] %s\n' "$TEST_SCRIPT_NAME" $((SECONDS - start)) "$*"; }
skip() {
  if [ "${!TEST_SCRIPT_REQUIRED:-0}" = 1 ]; then log "FAIL ($TEST_SCRIPT_REQUIRED=1): $*"; exit 1; fi
  log "SKIP: $*"; exit 77
}
fail() { log "FAIL: $*"; exit 1; }
