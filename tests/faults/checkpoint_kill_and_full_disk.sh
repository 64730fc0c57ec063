#!/usr/bin/env bash
# Checkpoint crash safety against a real kill and a real full disk (issue: "kill -9 of one
# rank at random points during save, 20 times"; "a full disk fails the save cleanly"):
#  1. 20 times: 2 ranks save every step; after a random delay one rank gets SIGKILL (mostly
#     inside a save: saving is most of each step). Afterwards every step-* directory verifies
#     (strata-ckpt, when given) and `latest` loads (train_gpt resumes from it).
#  2. A 50 MB tmpfs: two saves fit, the third fails on every rank naming "No space left on
#     device", leaves no temporary directory, and the previous checkpoint still loads. Skipped
#     (with a note) where tmpfs cannot be mounted (not root).
#   checkpoint_kill_and_full_disk.sh <mpirun> <train_gpt binary> [strata-ckpt binary]
set -uo pipefail
mpirun=$1
bin=$2
ckpt_tool=${3:-}
work=$(mktemp -d)
mnt=""
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# A model whose save (about 11 MB per rank with AdamW state) is most of each step.
model=(--layers 4 --width 192 --heads 4 --digits 2 --global-batch 4 --warmup 1 --log-every 1000
       --eval-examples 10 --metrics "")

# The pids of the ranks of the job whose command line holds $1 (not mpirun itself).
rank_pids() {
  local pid
  for pid in $(pgrep -f -- "$1"); do
    tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && echo "$pid"
  done
}

verify_all() {  # every complete save in $1 verifies; `latest` loads
  local dir=$1 name=$2 d
  if [ -n "$ckpt_tool" ]; then
    for d in "$dir"/step-*; do
      [ -d "$d" ] || continue
      "$ckpt_tool" verify "$d" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "$name: $d does not verify"; }
    done
  fi
  [ -f "$dir/latest" ] || return 0  # killed before the first save completed
  local step
  step=$(sed -E 's/^step-([0-9]+)-.*/\1/' "$dir/latest")
  "$bin" "${model[@]}" --steps 1000 --resume "$dir" --stop-at "$step" > "$work/load.log" 2>&1 \
    && grep -q "resumed from .* at step $step" "$work/load.log" \
    || { cat "$work/load.log"; fail "$name: latest (step $step) does not load"; }
}

# --- 1. SIGKILL of one rank at random moments, 20 times ---
kills=0
for i in $(seq 1 20); do
  dir="$work/kill_$i"
  "$mpirun" --oversubscribe -np 2 "$bin" "${model[@]}" --steps 1000 --save "$dir" --save-every 1 \
    > "$work/run_$i.log" 2>&1 &
  job=$!
  # 0.5 to 2.5 s: past start-up, during the saves.
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.5 + 2.0 * r / 32767 }')"
  pids=($(rank_pids "$dir"))
  if [ "${#pids[@]}" -gt 0 ]; then
    victim=${pids[$((RANDOM % ${#pids[@]}))]}
    kill -9 "$victim" 2> /dev/null && kills=$((kills + 1))
  fi
  wait "$job" 2> /dev/null
  verify_all "$dir" "kill $i"
  rm -rf "$dir"
done
[ "$kills" -ge 15 ] || fail "only $kills of 20 runs were killed (the job ended or never started?)"
echo "ok   $kills kills at random moments: every complete save verifies and latest loads"

# --- 2. A full disk ---
mnt="$work/small"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=50m tmpfs "$mnt" 2> /dev/null; then
  mnt=""
  echo "skip full-disk case: cannot mount a tmpfs (needs root)"
  if [ "$failures" -ne 0 ]; then exit 1; fi
  exit 0
fi
"$mpirun" --oversubscribe -np 2 "$bin" "${model[@]}" --steps 40 --save "$mnt/ckpt" --save-every 2 --keep-last 3 \
  > "$work/full.log" 2>&1
status=$?
[ "$status" -ne 0 ] && [ "$status" -lt 124 ] || { cat "$work/full.log"; fail "full disk: exit status $status"; }
grep -q "No space left on device" "$work/full.log" || { cat "$work/full.log"; fail "full disk: no ENOSPC message"; }
ls -a "$mnt/ckpt" | grep -q '^\.tmp-' && fail "full disk: a temporary directory was left"
grep -q "^saved " "$work/full.log" || fail "full disk: no save succeeded before the disk filled"
verify_all "$mnt/ckpt" "full disk"
echo "ok   full disk: the save failed cleanly, the previous checkpoint loads"

if [ "$failures" -ne 0 ]; then echo "$failures case(s) failed"; exit 1; fi
echo "checkpoint kill and full-disk test passed"
