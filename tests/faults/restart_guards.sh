#!/usr/bin/env bash
# Guards around restarts (issue 27): strata-run never renames or deletes a save unless a working
# verifier found it damaged, refuses to start without one and on bad options, gives up (rather
# than spin) when it cannot set a save aside or the command keeps failing the same way, passes
# SIGTERM/SIGINT on to the job and waits for it, and locks the checkpoint directory; train_gpt
# locks its --save directory, refuses a read-only one at startup, and --resume-latest without
# `latest` resumes from the newest save that verifies instead of starting at step 0.
#   restart_guards.sh <strata-run> <train_gpt binary> <strata-ckpt binary or "">
set -uo pipefail
run=$1
bin=$2
ckpt_tool=${3:-}
work=$(mktemp -d)
mounts=()
pids=()
cleanup() {
  local m p
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  for m in "${mounts[@]}"; do umount "$m" 2> /dev/null; done
  chmod -R u+w "$work" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
common=(--steps 20 --layers 1 --width 32 --heads 2 --global-batch 8 --digits 2 --warmup 2 --log-every 5
        --eval-examples 10 --metrics "" --save-every 5)
mpi=(--launcher-arg --oversubscribe)
{ [ -n "$ckpt_tool" ] && [ -x "$ckpt_tool" ]; } || { echo "skip: strata-ckpt is not built (CLI11 missing?)"; exit 77; }

# A checkpoint with two saves (steps 5 and 10) that the cases copy.
"$bin" "${common[@]}" --save "$work/base" --stop-at 10 > "$work/base.log" 2>&1 \
  || { cat "$work/base.log"; echo "FAIL: making the base checkpoint"; exit 1; }
step5=$(cd "$work/base" && echo step-5-*)
step10=$(cd "$work/base" && echo step-10-*)
copy_base() { rm -rf "$1" && cp -a "$work/base" "$1"; }
# The names in a checkpoint directory (but the lock files) and what `latest` says.
listing() {
  (cd "$1" && find . -mindepth 1 -maxdepth 1 ! -name '*.lock' | sort | tr '\n' ' '; cat latest 2> /dev/null)
}
damage() {  # flips the last byte of a save's shard (tensor data)
  python3 - "$1/shard_0.safetensors" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[-1] ^= 0xFF
open(sys.argv[1], "wb").write(data)
PY
}
# Makes directory $1 read-only: a read-only bind mount as root (root ignores permissions),
# else chmod. The strata-run cases run it from inside the job, as a filesystem that turns
# read-only mid-run.
make_readonly_cmd() {
  if [ "$(id -u)" -eq 0 ]; then echo "mount -o remount,ro,bind '$1'"; else echo "chmod a-w '$1'"; fi
}
prepare_readonly() {  # $1: a directory that make_readonly_cmd may later make read-only
  if [ "$(id -u)" -eq 0 ]; then
    mount --bind "$1" "$1" || return 1
    mounts+=("$1")
  fi
}

# --- 1. A verifier that cannot work is no verdict: nothing is renamed or deleted ---
copy_base "$work/v1"
before=$(listing "$work/v1")
"$run" --np 1 --checkpoint "$work/v1" --verify-with /nonexistent/strata-ckpt "${mpi[@]}" -- touch "$work/v1.ran" \
  > "$work/v1.log" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || [ -e "$work/v1.ran" ] \
  || ! grep -q "'/nonexistent/strata-ckpt' is not an executable file" "$work/v1.log"; then
  fail "missing verifier: exit $rc"; cat "$work/v1.log"
elif [ "$(listing "$work/v1")" != "$before" ]; then
  fail "missing verifier: the checkpoint changed: $(listing "$work/v1")"
else
  ok "a missing verifier is refused at startup, the command does not run"
fi
# Verifiers that run but give no verdict: a crash, and status 1 without a FAILED: line.
mkdir -p "$work/fake"
# shellcheck disable=SC2016  # the $2 and $$ are the fake verifiers' own
printf '#!/bin/sh\n[ "$2" = --help ] && exit 0\nkill -SEGV $$\n' > "$work/fake/crashes"
# shellcheck disable=SC2016
printf '#!/bin/sh\n[ "$2" = --help ] && exit 0\necho "Traceback: no module named x" >&2\nexit 1\n' > "$work/fake/exits1"
chmod +x "$work/fake/crashes" "$work/fake/exits1"
for fake in crashes exits1; do
  copy_base "$work/v_$fake"
  damage "$work/v_$fake/$step10"
  before=$(listing "$work/v_$fake")
  "$run" --np 1 --max-restarts 3 --checkpoint "$work/v_$fake" --verify-with "$work/fake/$fake" "${mpi[@]}" -- false \
    > "$work/v_$fake.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] || ! grep -q "cannot verify save $work/v_$fake/$step10: .*no verdict.*nothing was changed" \
    "$work/v_$fake.log"; then
    fail "verifier that $fake: exit $rc"; cat "$work/v_$fake.log"
  elif [ "$(listing "$work/v_$fake")" != "$before" ]; then
    fail "verifier that $fake: the checkpoint changed: $(listing "$work/v_$fake")"
  else
    ok "a verifier that $fake gives no verdict: strata-run gives up, the saves untouched"
  fi
done

# --- 2. No verifier anywhere: refused, naming where it looked ---
mkdir -p "$work/copy/tools/strata_run"
cp "$run" "$work/copy/tools/strata_run/strata-run"
copy_base "$work/nv"
PATH=/usr/bin:/bin "$work/copy/tools/strata_run/strata-run" --np 1 --checkpoint "$work/nv" -- touch "$work/nv.ran" \
  > "$work/nv.log" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || [ -e "$work/nv.ran" ] \
  || ! grep -qF "needs a verifier and there is none: no strata-ckpt on PATH (/usr/bin:/bin), beside this script\
 ($work/copy/tools/strata_run/strata-ckpt) or in the build tree ($work/copy/build/tools/strata_ckpt/strata-ckpt)" \
    "$work/nv.log"; then
  fail "no verifier: exit $rc"; cat "$work/nv.log"
else
  ok "no verifier found: refused, naming PATH, beside the script and the build tree"
fi

# --- 3. Bad options: refused by name, with the bound ---
bad_option() {  # expected message, then the options
  local expected=$1
  shift
  "$run" "$@" > "$work/bad.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$expected" "$work/bad.log"; then
    fail "$* : exit $rc"; cat "$work/bad.log"; return
  fi
  ok "refused: $*"
}
bad_option "--np needs a value" --np
bad_option "--np 99999999999 is too large: at most 100000" --np 99999999999 -- true
bad_option "--shrink-by 99 is too large: at most 1 (--np 2 - 1)" --np 2 --shrink-by 99 -- true
bad_option "--max-restarts 1000000 is too large: at most 1000" --np 2 --max-restarts 1000000 -- true
bad_option "--checkpoint '$work/typo' is not a directory" \
  --np 1 --checkpoint "$work/typo" --verify-with "$ckpt_tool" -- true

# --- 4. A damaged newest save in a directory that turned read-only: give up, do not spin ---
copy_base "$work/ro"
damage "$work/ro/$step10"
if prepare_readonly "$work/ro"; then
  timeout 60 "$run" --np 1 --max-restarts 5 --checkpoint "$work/ro" --verify-with "$ckpt_tool" "${mpi[@]}" -- \
    sh -c "$(make_readonly_cmd "$work/ro"); exit 1" > "$work/ro.log" 2>&1
  rc=$?
  asides=$(grep -c "setting it aside" "$work/ro.log")
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$asides" -ne 1 ] \
    || ! grep -q "cannot set aside the damaged save $work/ro/$step10: Read-only file system" "$work/ro.log"; then
    fail "read-only directory: exit $rc, $asides set-aside lines"; tail -n 20 "$work/ro.log"
  elif [ ! -d "$work/ro/$step10" ] || [ ! -d "$work/ro/$step5" ]; then
    fail "read-only directory: a save is gone"
  else
    ok "read-only directory: gives up naming the save and the error"
  fi
else
  echo "skip read-only case: cannot bind-mount"
fi

# --- 5. The same failure again and again: give up after 3, naming the last error ---
"$run" --np 1 --max-restarts 50 "${mpi[@]}" -- sh -c 'echo "boom: disk on fire" >&2; exit 7' > "$work/same.log" 2>&1
rc=$?
runs=$(grep -c "strata-run: run [0-9]*:" "$work/same.log")
if [ "$rc" -ne 7 ] || [ "$runs" -ne 3 ] \
  || ! grep -q "failed 3 times in a row with exit status 7 .*giving up; last error: boom: disk on fire" \
    "$work/same.log"; then
  fail "identical failures: exit $rc after $runs runs"; cat "$work/same.log"
else
  ok "identical failures: gives up after 3 runs, naming the last error"
fi

# --- 6. SIGTERM and SIGINT reach the job; strata-run waits for it and exits 128 + N ---
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2> /dev/null; }
for sig in TERM INT; do
  rm -rf "$work/sig" && mkdir -p "$work/sig"
  set -m  # a background job of a script ignores SIGINT otherwise
  "$run" --np 2 "${mpi[@]}" -- sh -c "echo \$\$ > $work/sig/rank.\$OMPI_COMM_WORLD_RANK; exec sleep 60" \
    > "$work/sig.log" 2>&1 &
  sup=$!
  set +m
  for _ in $(seq 300); do [ -s "$work/sig/rank.0" ] && [ -s "$work/sig/rank.1" ] && break; sleep 0.1; done
  read -r -a ranks <<< "$(cat "$work/sig"/rank.* 2> /dev/null | tr '\n' ' ')"
  pids+=("${ranks[@]}")
  kill -s "$sig" "$sup"
  wait "$sup"
  rc=$?
  sleep 1
  left=""
  for p in "${ranks[@]}"; do alive "$p" && left+="$p "; done
  expected=$((128 + $(kill -l "$sig")))
  if [ "$rc" -ne "$expected" ] || [ -n "$left" ] || [ "${#ranks[@]}" -ne 2 ] \
    || ! grep -q "received SIG$sig: passing it to the job" "$work/sig.log"; then
    fail "SIG$sig: exit $rc (expected $expected), ranks still running: '$left'"; cat "$work/sig.log"
  else
    ok "SIG$sig: passed to the job, which ended; exit $rc"
  fi
done

# --- 6b. What outlives the launcher is stopped: a rank leaves a child behind when it fails ---
rm -f "$work/orphan.pid"
"$run" --np 1 --max-restarts 0 "${mpi[@]}" -- \
  sh -c "sh -c 'trap \"\" TERM; exec sleep 60' > /dev/null 2>&1 & echo \$! > $work/orphan.pid; exit 3" > "$work/orphan.log" 2>&1
rc=$?
orphan=$(cat "$work/orphan.pid" 2> /dev/null)
pids+=("$orphan")
if [ "$rc" -ne 3 ] || [ -z "$orphan" ] || alive "$orphan" \
  || ! grep -q "the job ended with process(es) $orphan still running: sending them SIGTERM" "$work/orphan.log"; then
  fail "leftover: exit $rc (expected 3), process '$orphan' left running or not named"; cat "$work/orphan.log"
else
  ok "a process the job left behind is stopped before strata-run exits, named (exit $rc)"
fi

# --- 7. Locks: a second strata-run on one directory, a second trainer on one --save ---
copy_base "$work/lk"
"$run" --np 1 --checkpoint "$work/lk" --verify-with "$ckpt_tool" "${mpi[@]}" -- sleep 30 > "$work/lk1.log" 2>&1 &
first=$!
pids+=("$first")
for _ in $(seq 300); do grep -q "PID $first" "$work/lk/.strata-run.lock" 2> /dev/null && break; sleep 0.1; done
"$run" --np 1 --checkpoint "$work/lk" --verify-with "$ckpt_tool" "${mpi[@]}" -- touch "$work/lk.ran" \
  > "$work/lk2.log" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || [ -e "$work/lk.ran" ] \
  || ! grep -q "checkpoint directory '$work/lk' is in use: PID $first" "$work/lk2.log"; then
  fail "second strata-run: exit $rc"; cat "$work/lk2.log"
else
  ok "a second strata-run on one checkpoint directory is refused, naming the holder's PID"
fi
kill -TERM "$first"
wait "$first"

STRATA_TEST_STALL_RANK=0 STRATA_TEST_STALL_AT_STEP=3 "$bin" "${common[@]}" --save "$work/tl" > "$work/tl1.log" 2>&1 &
trainer=$!
pids+=("$trainer")
for _ in $(seq 600); do grep -q "PID $trainer" "$work/tl/.save.lock" 2> /dev/null && break; sleep 0.1; done
"$bin" "${common[@]}" --save "$work/tl" > "$work/tl2.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "checkpoint directory '$work/tl' is in use: PID $trainer" "$work/tl2.log"; then
  fail "second trainer on one --save: exit $rc"; cat "$work/tl2.log"
else
  ok "a second train_gpt --save into a directory in use is refused, naming the holder's PID"
fi
kill -9 "$trainer"
wait "$trainer" 2> /dev/null

# --- 8. train_gpt --save into an existing read-only directory: refused before training ---
mkdir -p "$work/rosave"
if prepare_readonly "$work/rosave"; then
  sh -c "$(make_readonly_cmd "$work/rosave")"
  "$bin" "${common[@]}" --save "$work/rosave" > "$work/rosave.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] || grep -q "^GPT: " "$work/rosave.log" \
    || ! grep -q -- "--save '$work/rosave': the directory is not writable" "$work/rosave.log"; then
    fail "read-only --save: exit $rc"; cat "$work/rosave.log"
  else
    ok "a read-only --save directory is refused at startup, naming it"
  fi
else
  echo "skip read-only --save case: cannot bind-mount"
fi

# --- 9. --resume-latest without `latest`: the newest save that verifies, never step 0 ---
copy_base "$work/nl"
rm "$work/nl/latest"
"$bin" "${common[@]}" --save "$work/nl" --resume-latest --stop-at 15 > "$work/nl.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q "resuming from $step10" "$work/nl.log" \
  || ! grep -q "resumed from .* at step 10" "$work/nl.log" \
  || [ ! -d "$work/nl/$step10" ]; then
  fail "missing latest: exit $rc"; cat "$work/nl.log"
else
  ok "missing latest: resumed from the newest save ($step10)"
fi
copy_base "$work/nl2"
rm "$work/nl2/latest"
damage "$work/nl2/$step10"
"$bin" "${common[@]}" --save "$work/nl2" --resume-latest --stop-at 8 > "$work/nl2.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q "resuming from $step5, .*passed over (kept): $step10" "$work/nl2.log" \
  || ! grep -q "resumed from .* at step 5" "$work/nl2.log" || [ ! -d "$work/nl2/$step10" ] \
  || ! grep -q "an older step than $step10, which is kept" "$work/nl2.log"; then
  fail "missing latest, damaged newest: exit $rc"; cat "$work/nl2.log"; ls "$work/nl2"
else
  ok "missing latest, damaged newest: resumed from $step5, $step10 kept and named"
fi

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "restart guards passed"
