#!/usr/bin/env bash
# Runs clang-tidy with the checks in .clang-tidy (the repository root) over every C++
# translation unit of the library, the kernels' host code, the tools and the examples
# (src/, kernels/, tools/, examples/ and the headers they include from include/), and fails
# on any finding. CUDA sources (.cu) are left out: clang-tidy 14's clang cannot parse CUDA 13.
#   scripts/run_clang_tidy.sh [BUILD_DIR]      (default build/; needs its compile_commands.json,
#                                              which strata_configure writes)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "run_clang_tidy: clang-tidy not found (scripts/install_deps.sh clang-tidy)" >&2; exit 1; }
[ -f "$build/compile_commands.json" ] ||
  { echo "run_clang_tidy: $build/compile_commands.json missing: configure with scripts/common.sh's strata_configure" >&2; exit 1; }
mapfile -t files < <(python3 - "$build/compile_commands.json" "$root" <<'PY'
import json, os, sys
root = sys.argv[2] + "/"
for entry in json.load(open(sys.argv[1])):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    rel = path[len(root):] if path.startswith(root) else None
    if rel and rel.split("/")[0] in ("src", "kernels", "tools", "examples") and rel.endswith(".cpp"):
        print(path)
PY
)
[ ${#files[@]} -gt 0 ] || { echo "run_clang_tidy: no translation units found in $build/compile_commands.json" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
# stdout holds the findings; stderr only clang-tidy's "N warnings generated" counts (system
# and third-party headers, filtered out by HeaderFilterRegex).
rc=0
printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet >"$log" 2>/dev/null || rc=$?
findings=$(grep -cE "^/.*: (warning|error):" "$log" || true)
if [ "$rc" != 0 ] || [ "$findings" != 0 ]; then
  cat "$log"
  echo "run_clang_tidy: $findings finding(s) in ${#files[@]} translation units (.clang-tidy; clang-tidy status $rc)" >&2
  exit 1
fi
echo "run_clang_tidy: ${#files[@]} translation units clean ($("$tidy" --version | grep -m1 -o 'version [0-9.]*'), $((SECONDS - start)) s)"
