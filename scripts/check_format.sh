#!/usr/bin/env bash
# Checks (default) or applies (--fix) the tree's C++/CUDA formatting: .clang-format at the
# repository root, clang-format 14 (Debian 12's; other versions format some constructs
# differently, so the check names the version it ran). Files: every tracked .h/.cpp/.cu/.cuh.
#   scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$fmt" ] || { echo "check_format: clang-format not found (scripts/install_deps.sh clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
if [ "${1:-}" = --fix ]; then
  "$fmt" -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files with $("$fmt" --version)"
  exit 0
fi
if ! "$fmt" --dry-run --Werror "${files[@]}" 2>/tmp/check_format.$$; then
  grep -E "^[^ ].*: error:" /tmp/check_format.$$ | cut -d: -f1 | sort -u | sed 's/^/  needs formatting: /'
  echo "check_format: the files above differ from .clang-format ($("$fmt" --version)); run scripts/check_format.sh --fix" >&2
  rm -f /tmp/check_format.$$
  exit 1
fi
rm -f /tmp/check_format.$$
echo "check_format: ${#files[@]} files match .clang-format ($("$fmt" --version))"
