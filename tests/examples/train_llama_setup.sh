# shellcheck shell=bash
# Sourced by the train_llama smoke tests: the corpus they train on (skipped where it is
# missing), a self-cleaning work directory, and fail.
corpus=/usr/share/common-licenses  # Debian's base-files ships it on every system
[ -d "$corpus" ] || { echo "SKIP: $corpus is missing (not a Debian system)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
