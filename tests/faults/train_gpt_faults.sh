#!/usr/bin/env bash
# Fault probe of examples/train_gpt: corrupted, edited and mixed checkpoints, a kill inside
# the sharded save, a stalled peer, and bad command-line values. Each case asserts the named
# error (and a non-zero exit without a crash signal) or an intact resume.
#   train_gpt_faults.sh <mpirun> <train_gpt binary>
set -uo pipefail
mpirun=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
tiny=(--steps 20 --layers 1 --width 32 --heads 2 --batch 8 --digits 2 --warmup 2 --log-every 10
      --eval-examples 10 --metrics "")
one() { timeout 60 "$bin" "${tiny[@]}" "$@"; }
two() { timeout 90 "$mpirun" --oversubscribe -np 2 "$bin" "${tiny[@]}" "$@"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_error NAME PATTERN RUNNER ARGS...: the run exits non-zero (not by a signal, not by
# the timeout) and its output matches PATTERN (grep -E).
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$@" > "$work/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ]; then fail "$name: exited 0"; cat "$work/$name.log"; return; fi
  if [ "$rc" -ge 124 ]; then fail "$name: exit status $rc (timeout or signal)"; cat "$work/$name.log"; return; fi
  grep -Eq -- "$pattern" "$work/$name.log" || { fail "$name: no match for '$pattern'"; cat "$work/$name.log"; return; }
  echo "ok   $name"
}
# expect_ok NAME PATTERN RUNNER ARGS...: exit 0 and the output matches PATTERN.
expect_ok() {
  local name=$1 pattern=$2
  shift 2
  "$@" > "$work/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit status $rc"; cat "$work/$name.log"; return; fi
  grep -Eq -- "$pattern" "$work/$name.log" || { fail "$name: no match for '$pattern'"; cat "$work/$name.log"; return; }
  echo "ok   $name"
}
# The step directory a sharded checkpoint's `latest` names.
latest() { echo "$1/$(cat "$1/latest")"; }
# Rewrites index.json's metadata field $2 to $3 and recomputes index_crc32 (a deliberate
# edit that passes the checksum), so that the checks behind it are reached.
rewrite_index() {
  python3 - "$(latest "$1")/index.json" "$2" "$3" <<'PY'
import json, sys, zlib
path, key, value = sys.argv[1:]
index = json.load(open(path))
index["metadata"][key] = value
del index["index_crc32"]
text = json.dumps(index, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
index["index_crc32"] = "%08x" % zlib.crc32(text.encode())
json.dump(index, open(path, "w"), indent=1)
PY
}

# --- Command-line values: refused at once, before training ---
expect_error log_every_0 "--log-every must be at least 1, got 0" one --log-every 0
expect_error zero_minus_2 "--zero must be -1 \(off\) or a ZeRO stage 0-3, got -2" one --zero -2
expect_error save_every_minus_1 "--save-every must be 0 or more, got -1" one --save-every -1
expect_error stop_at_minus_1 "--stop-at must be 0 or more, got -1" one --stop-at -1
expect_error clip_nan "--clip must be a finite number" one --clip nan
expect_error steps_overflow "--steps" one --steps 99999999999999999999
expect_error steps_huge "--steps 9223372036854775807 is too large" one --steps 9223372036854775807
expect_error eval_examples_0 "--eval-examples must be at least 1, got 0" one --eval-examples 0
expect_error batch_oom "out of memory: requested [0-9]+ bytes" one --batch 2000000000
expect_error timeout_bad "--collective-timeout .* must be a number of seconds" one --collective-timeout 0
touch "$work/a_file"
expect_error export_hf_uncreatable "--export-hf '$work/a_file/hf': cannot create the directory" \
  one --export-hf "$work/a_file/hf"
grep -q "^step" "$work/export_hf_uncreatable.log" && fail "export_hf_uncreatable: trained before failing"
expect_ok metrics_in_cwd "final exact-match accuracy" one --steps 2 --metrics m.jsonl
[ -s "$work/m.jsonl" ] || fail "metrics_in_cwd: m.jsonl not written"

# --- One process's checkpoint ---
expect_ok single_save "final exact-match accuracy" one --save "$work/s"
cp -r "$work/s" "$work/s.orig"
expect_error single_relabel_stop_at "saved at step 20, after the requested end \(--stop-at 10\)" \
  one --resume "$work/s" --stop-at 10 --save "$work/s"
expect_error single_relabel_steps "saved at step 20, after the requested end \(--steps 10\)" \
  one --resume "$work/s" --steps 10 --save "$work/s"
# (.save.lock names each run that held the directory: not part of the checkpoint)
diff -r -x .save.lock "$work/s" "$work/s.orig" > /dev/null || fail "single_relabel: the checkpoint was rewritten"
expect_error single_heads "'config.n_head' is 2 in the checkpoint, 4 in this run" one --resume "$work/s.orig" --heads 4
touch "$work/old_single_file.ckpt"
expect_error save_to_a_file "--save '$work/old_single_file.ckpt' is a file" one --save "$work/old_single_file.ckpt"

# --- Sharded checkpoints of 2 ranks (ZeRO-2) ---
zero=(--zero 2)
expect_ok zero_save10 "stopped at step 10" two "${zero[@]}" --save "$work/zA" --stop-at 10
cp -r "$work/zA" "$work/zB"
expect_ok zero_save20 "resumed from .* at step 10" two "${zero[@]}" --resume "$work/zB" --save "$work/zB" --stop-at 20 \
  --keep-last 1
[ "$(find "$work/zB" -maxdepth 1 -name 'step-*' | wc -l)" -eq 1 ] || fail "zero_save20: older step directories left"
# Mixed shards: shard_1 of the step-10 save copied into the step-20 save.
cp -r "$work/zB" "$work/zM"
cp "$(latest "$work/zA")/shard_1.safetensors" "$(latest "$work/zM")/shard_1.safetensors"
expect_error zero_mixed_shards "shard_1.safetensors': (\\[rank 1\\] )?header checksum mismatch: expected [0-9a-f]{8} \(index.json\)" \
  two "${zero[@]}" --resume "$work/zM"
# A flipped byte in a shard's data: named by file and tensor.
cp -r "$work/zB" "$work/zC"
python3 - "$(latest "$work/zC")/shard_0.safetensors" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[-5] ^= 0xFF
open(path, "wb").write(data)
PY
expect_error zero_corrupt_shard "tensor '.*' in '.*shard_0.safetensors': checksum mismatch" two "${zero[@]}" --resume "$work/zC"
# Edited index: the step, the sampler position.
cp -r "$work/zB" "$work/zE"
sed -i 's/"step":20/"step":30/' "$(latest "$work/zE")/index.json"
expect_error zero_edited_step "index checksum mismatch" two "${zero[@]}" --resume "$work/zE"
cp -r "$work/zB" "$work/zS"
sed -i -E 's/"sampler.step":"([0-9]+)"/"sampler.step":"1\1"/' "$(latest "$work/zS")/index.json"
expect_error zero_edited_sampler "index checksum mismatch" two "${zero[@]}" --resume "$work/zS"
# Malformed numbers behind a valid checksum: named errors, no abort.
cp -r "$work/zB" "$work/zN"
rewrite_index "$work/zN" step "-"
expect_error zero_step_dash "metadata field 'step' is not an integer in .*: '-'" two "${zero[@]}" --resume "$work/zN"
rewrite_index "$work/zN" step "99999999999999999999"
expect_error zero_step_20_digits "metadata field 'step' is not an integer" two "${zero[@]}" --resume "$work/zN"
# Model configuration and step label.
expect_error zero_heads "'config.n_head' is 2 in the checkpoint, 4 in this run" \
  two "${zero[@]}" --resume "$work/zB" --heads 4
expect_error zero_relabel "saved at step 20, after the requested end \(--stop-at 10\)" \
  two "${zero[@]}" --resume "$work/zB" --stop-at 10 --save "$work/zB"
# A kill inside the save, before the step directory is renamed into place, and after the
# rename but before `latest` moves: the previous save still loads; a later save completes and
# cleans up.
cp -r "$work/zA" "$work/zK"
for point in before_rename before_pointer; do
  STRATA_TEST_CRASH_AT=sharded_save.$point two "${zero[@]}" --resume "$work/zK" --save "$work/zK" --stop-at 20 \
    > "$work/zero_kill_$point.log" 2>&1 && fail "zero_kill_$point: the injected kill did not happen"
  grep -q "killing the process at sharded_save.$point" "$work/zero_kill_$point.log" \
    || fail "zero_kill_$point: not killed at the point"
  expect_ok "zero_after_kill_$point" "resumed from .* at step 10" two "${zero[@]}" --resume "$work/zK" --stop-at 10
done
STRATA_TEST_CRASH_AT=sharded_save.after_pointer two "${zero[@]}" --resume "$work/zK" --save "$work/zK" --stop-at 20 \
  > "$work/zero_kill2.log" 2>&1 && fail "zero_kill2: the injected kill did not happen"
expect_ok zero_after_kill2 "resumed from .* at step 20" two "${zero[@]}" --resume "$work/zK" --stop-at 20 --save "$work/zK" \
  --keep-last 1
[ "$(find "$work/zK" -maxdepth 1 -name 'step-*' -o -maxdepth 1 -name '.tmp-*' | wc -l)" -eq 1 ] \
  || fail "zero_after_kill2: older step directories or leftovers of killed saves remain"
expect_ok zero_after_kill3 "resumed from .* at step 20" two "${zero[@]}" --resume "$work/zK" --stop-at 20

# --- A stalled peer: the survivor fails with the timeout and every process exits (without the
# fix it hangs in MPI_Finalize: `timeout 60` then ends it with status 124, a failure here) ---
start=$(date +%s)
expect_error stalled_peer "timed out after 2000 ms" env STRATA_TEST_STALL_RANK=1 STRATA_TEST_STALL_AT_STEP=3 \
  timeout 60 "$mpirun" --oversubscribe -np 2 "$bin" "${tiny[@]}" --collective-timeout 2
[ $(( $(date +%s) - start )) -le 30 ] || fail "stalled_peer: took more than 30 s"
start=$(date +%s)
expect_error stalled_peer_env "timed out after 1500 ms" env STRATA_TEST_STALL_RANK=0 STRATA_TEST_STALL_AT_STEP=2 \
  STRATA_COLLECTIVE_TIMEOUT=1.5 timeout 60 "$mpirun" --oversubscribe -np 2 "$bin" "${tiny[@]}" --zero 3
[ $(( $(date +%s) - start )) -le 30 ] || fail "stalled_peer_env: took more than 30 s"

if [ "$failures" -ne 0 ]; then echo "$failures fault case(s) failed"; exit 1; fi
echo "train_gpt fault probe passed"
