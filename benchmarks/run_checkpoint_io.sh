#!/usr/bin/env bash
# Checkpoint save and load bandwidth (benchmarks/checkpoint_io.cpp) beside the disk's raw
# sequential bandwidth, taken in the same run on the same directory by dd. R rounds, each:
#   dd write   N dd processes at once (one per rank), each writing MB of random bytes (from a
#              tmpfs file, not /dev/zero) with conv=fdatasync: write(2) then fsync, as strata
#   dd read    after dropping the page cache, the N files read back at once (buffered reads
#              with readahead, as strata's pread)
#   strata     mpirun -np N bench_checkpoint_io --reps 1: save_sharded, drop the cache, read
# Rounds interleave the two so that a disk whose speed drifts (cloud volumes) moves both.
# Prints best and median of each figure and strata / dd. Dropping the page cache needs root;
# without it the load and dd read figures are cache-warm, and the script says so.
#   benchmarks/run_checkpoint_io.sh [build-dir] [ranks=2] [mb-per-rank=256] [rounds=5] [dir]
# dir defaults to <build-dir>/ckpt-io (the build's filesystem); it is removed at the end.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
build=${1:-$STRATA_BUILD_DIR}
ranks=${2:-2}
mb=${3:-256}
rounds=${4:-5}
dir=${5:-$build/ckpt-io}
bench="$build/benchmarks/bench_checkpoint_io"
strata_build_benchmark "$build" bench_checkpoint_io
export LC_ALL=C OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$dir/dd" "$dir/strata"
src_dir=/dev/shm
[ -w "$src_dir" ] || src_dir=${TMPDIR:-/tmp}
src=$(mktemp "$src_dir/ckpt-io-src.XXXXXX")
trap 'rm -rf "$src" "$dir"' EXIT
head -c "$((mb * 1000000))" /dev/urandom >"$src"

drop_caches() { sync; { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; }
if drop_caches; then cache="dropped before every read"; else cache="NOT dropped: read figures are cache-warm"; fi

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) vCPUs, $(free -g | awk '/^Mem:/{print $2}') GiB"
echo "disk: $(df -hT "$dir" | awk 'NR==2{print $1", "$2", "$3" total, "$5" free, mounted on "$7}')"
echo "run: $ranks ranks x $mb MB, $rounds rounds, in $dir; page cache $cache"

# dd_round write|read: N dd at once; prints each process's MB/s, then the aggregate (N x size
# over the wall time until the slowest finished).
dd_round() {
  local op=$1 i pids=() t0 t1 secs
  if [ "$op" = write ]; then rm -f "$dir"/dd/f*; sync; else drop_caches || true; fi
  t0=$(date +%s.%N)
  for ((i = 0; i < ranks; i++)); do
    if [ "$op" = write ]; then
      dd if="$src" of="$dir/dd/f$i" bs=1000000 count="$mb" conv=fdatasync 2>"$dir/dd/log$i" &
    else
      dd if="$dir/dd/f$i" of=/dev/null bs=1000000 2>"$dir/dd/log$i" &
    fi
    pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N)
  for ((i = 0; i < ranks; i++)); do
    secs=$(sed -n 's/.*copied, \([0-9.e+-]*\) s.*/\1/p' "$dir/dd/log$i")
    awk -v b="$mb" -v s="$secs" 'BEGIN{printf "%.1f ", b / s}'
  done
  awk -v b="$((mb * ranks))" -v a="$t0" -v z="$t1" 'BEGIN{printf "%.1f\n", b / (z - a)}'
}

dd_w_rank=() dd_w_agg=() dd_r_rank=() dd_r_agg=()
s_w_rank=() s_w_agg=() s_r_rank=() s_r_agg=()
for ((round = 0; round < rounds; round++)); do
  read -r -a x <<<"$(dd_round write)"
  dd_w_rank+=("${x[@]:0:ranks}") dd_w_agg+=("${x[ranks]}")
  read -r -a x <<<"$(dd_round read)"
  dd_r_rank+=("${x[@]:0:ranks}") dd_r_agg+=("${x[ranks]}")
  out=$(mpirun --oversubscribe -np "$ranks" --bind-to none "$bench" --dir "$dir/strata" --mb "$mb" --reps 1)
  while read -r w r; do s_w_rank+=("$w") s_r_rank+=("$r"); done < <(
    sed -n 's/^rep=.* rank=.* write_mbps=\([0-9.]*\) load_mbps=\([0-9.]*\)$/\1 \2/p' <<<"$out")
  while read -r w r; do s_w_agg+=("$w") s_r_agg+=("$r"); done < <(
    sed -n 's/^rep=.* aggregate save_mbps=\([0-9.]*\) load_mbps=\([0-9.]*\)$/\1 \2/p' <<<"$out")
  grep -q '^drop_caches=1' <<<"$out" || cache="NOT dropped by the benchmark: strata's load figures are cache-warm"
  echo "round $round: dd write ${dd_w_agg[-1]} read ${dd_r_agg[-1]}; strata save ${s_w_agg[-1]} load ${s_r_agg[-1]} MB/s (aggregate)"
done

# "best median" of the arguments (the upper median, as bench_util.h's).
stats() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[NR], a[int(NR / 2) + 1]}'; }
row() {
  local name=$1 s d
  shift
  read -r -a s <<<"$(stats "${@:1:$(($# / 2))}")"
  read -r -a d <<<"$(stats "${@:$(($# / 2 + 1))}")"
  printf '| %s | %s / %s | %s / %s | %.2f / %.2f |\n' "$name" "${s[0]}" "${s[1]}" "${d[0]}" "${d[1]}" \
    "$(awk -v a="${s[0]}" -v b="${d[0]}" 'BEGIN{print a / b}')" "$(awk -v a="${s[1]}" -v b="${d[1]}" 'BEGIN{print a / b}')"
}
echo
echo "page cache: $cache"
echo "| figure (MB/s, 1 MB = 1e6 B) | strata best / median | dd best / median | strata / dd (best / median) |"
echo "|---|---|---|---|"
row "save, per rank (shard write to fsync)" "${s_w_rank[@]}" "${dd_w_rank[@]}"
row "save, aggregate (whole collective)" "${s_w_agg[@]}" "${dd_w_agg[@]}"
row "load, per rank" "${s_r_rank[@]}" "${dd_r_rank[@]}"
row "load, aggregate" "${s_r_agg[@]}" "${dd_r_agg[@]}"
