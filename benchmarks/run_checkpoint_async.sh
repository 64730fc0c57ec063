#!/usr/bin/env bash
# What a checkpoint costs the training loop, synchronous vs asynchronous (train_gpt
# --async-save): the same 2-rank run without saves, saving every --every steps, and saving
# every --every steps in the background. Per save: (time - time without saves) / saves, the
# median of --repeat runs of each, interleaved so that drift on a shared machine hits all
# three alike. One thread per rank.
#   benchmarks/run_checkpoint_async.sh [--width 512] [--layers 4] [--steps 60] [--every 10] [--repeat 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
width=512
layers=4
steps=60
every=10
repeat=3
dir=${STRATA_BENCH_DIR:-$(mktemp -d)}
while [ $# -gt 0 ]; do
  case "$1" in
    --width) width=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
build=${STRATA_BUILD_DIR:-$STRATA_ROOT/build}
[ -f "$build/CMakeCache.txt" ] || STRATA_BUILD_DIR=$build strata_configure > /dev/null
cmake --build "$build" -j "$STRATA_JOBS" --target train_gpt > /dev/null
bin="$build/examples/train_gpt/train_gpt"
strata_mpi_env
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
common=(--steps "$steps" --layers "$layers" --width "$width" --heads 8 --digits 3 --global-batch 16 --warmup 1
        --log-every 1000 --eval-examples 10 --metrics "" --keep-last 1)

seconds() {  # wall seconds of one 2-rank run with extra flags
  local start end
  start=$(date +%s.%N)
  mpirun --oversubscribe -np 2 "$bin" "${common[@]}" "$@" > "$dir/run.log" 2>&1 || { cat "$dir/run.log"; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

none=() sync=() async=()
for _ in $(seq 1 "$repeat"); do
  none+=("$(seconds)")
  rm -rf "$dir/ckpt"; sync+=("$(seconds --save "$dir/ckpt" --save-every "$every")")
  rm -rf "$dir/ckpt"; async+=("$(seconds --save "$dir/ckpt" --save-every "$every" --async-save)")
done
mb=$(du -sm "$dir/ckpt" | cut -f1)
saves=$((steps / every))
t_none=$(median "${none[@]}")
t_sync=$(median "${sync[@]}")
t_async=$(median "${async[@]}")
echo "train_gpt width $width, $layers layers, 2 ranks x 1 thread, $steps steps, a save every $every ($saves saves of ${mb} MB)"
printf "%-22s %10s %14s\n" "variant" "wall (s)" "per save (s)"
printf "%-22s %10.2f %14s\n" "no saves" "$t_none" "-"
printf "%-22s %10.2f %14.3f\n" "synchronous save" "$t_sync" "$(awk -v t="$t_sync" -v n="$t_none" -v s="$saves" 'BEGIN { print (t - n) / s }')"
printf "%-22s %10.2f %14.3f\n" "asynchronous save" "$t_async" "$(awk -v t="$t_async" -v n="$t_none" -v s="$saves" 'BEGIN { print (t - n) / s }')"
echo "runs (none / sync / async): ${none[*]} / ${sync[*]} / ${async[*]}"
[ -n "${STRATA_BENCH_DIR:-}" ] || rm -rf "$dir"
