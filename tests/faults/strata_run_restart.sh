#!/usr/bin/env bash
# tools/strata_run/strata-run restarts a training job after a rank is killed (SIGKILL at step
# 12, saves every 5 steps): at the same world size the final model equals an uninterrupted
# run's byte for byte; at a smaller one (4 -> 2 ranks) it equals the resharded continuation
# (2 ranks resuming the 4-rank step-10 save). A damaged newest save is set aside and the
# restart resumes from the one before. Also the refusals of bad options.
#   strata_run_restart.sh <strata-run> <train_gpt binary> [strata-ckpt binary]
set -uo pipefail
run=$1
bin=$2
ckpt_tool=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--steps 20 --layers 1 --width 32 --heads 2 --global-batch 8 --digits 2 --warmup 2 --log-every 5
        --eval-examples 10 --metrics "" --save-every 5)
mpi=(--launcher-arg --oversubscribe)

# 1. Same world size: the restarted job equals the uninterrupted one.
mpirun --oversubscribe -np 2 "$bin" "${common[@]}" --save "$work/straight" --export-hf "$work/straight_hf" \
  > "$work/straight.log" 2>&1 || { cat "$work/straight.log"; fail "uninterrupted run"; }
STRATA_TEST_KILL_RANK=1 STRATA_TEST_KILL_AT_STEP=12 "$run" --np 2 --max-restarts 2 "${mpi[@]}" -- \
  "$bin" "${common[@]}" --save "$work/a" --resume-latest --export-hf "$work/a_hf" > "$work/a.log" 2>&1 \
  || { cat "$work/a.log"; fail "restarted run failed"; }
grep -q "restart 1 of 2 on 2 rank(s)" "$work/a.log" || { cat "$work/a.log"; fail "no restart logged"; }
grep -q "resumed from .* at step 10" "$work/a.log" || { cat "$work/a.log"; fail "did not resume at step 10"; }
cmp "$work/straight_hf/model.safetensors" "$work/a_hf/model.safetensors" || fail "restarted model differs"
echo "ok   same world size: equal to the uninterrupted run"

# 2. A smaller world: 4 ranks killed at step 12 restart on 2 from the step-10 save.
mpirun --oversubscribe -np 4 "$bin" "${common[@]}" --save "$work/ref4" --stop-at 10 > "$work/ref4.log" 2>&1 \
  || { cat "$work/ref4.log"; fail "4-rank run to step 10"; }
mpirun --oversubscribe -np 2 "$bin" "${common[@]}" --resume "$work/ref4" --export-hf "$work/ref2_hf" \
  > "$work/ref2.log" 2>&1 || { cat "$work/ref2.log"; fail "2-rank continuation"; }
STRATA_TEST_KILL_RANK=3 STRATA_TEST_KILL_AT_STEP=12 "$run" --np 4 --shrink-by 2 --min-np 2 --max-restarts 1 "${mpi[@]}" \
  -- "$bin" "${common[@]}" --save "$work/b" --resume-latest --export-hf "$work/b_hf" > "$work/b.log" 2>&1 \
  || { cat "$work/b.log"; fail "shrunk restart failed"; }
grep -q "restart 1 of 1 on 2 rank(s)" "$work/b.log" || { cat "$work/b.log"; fail "no restart on 2 ranks"; }
cmp "$work/ref2_hf/model.safetensors" "$work/b_hf/model.safetensors" || fail "shrunk restart differs from the continuation"
echo "ok   smaller world: equal to the resharded continuation"

# 3. With strata-ckpt: a damaged newest save is set aside, the restart resumes from the one before.
if [ -n "$ckpt_tool" ] && [ -x "$ckpt_tool" ]; then
  mpirun --oversubscribe -np 2 "$bin" "${common[@]}" --save "$work/c" --stop-at 10 > "$work/c0.log" 2>&1 \
    || { cat "$work/c0.log"; fail "run to step 10"; }
  newest="$work/c/$(cat "$work/c/latest")"
  python3 - "$newest/shard_0.safetensors" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[-1] ^= 0xFF
open(sys.argv[1], "wb").write(data)
PY
  # The first run fails at once (a resume from a damaged save); the restart verifies first.
  "$run" --np 2 --max-restarts 1 --checkpoint "$work/c" --verify-with "$ckpt_tool" "${mpi[@]}" -- \
    "$bin" "${common[@]}" --save "$work/c" --resume-latest > "$work/c.log" 2>&1 || { cat "$work/c.log"; fail "damaged-save restart"; }
  grep -q "is damaged (.*): setting it aside" "$work/c.log" || { cat "$work/c.log"; fail "damaged save not set aside"; }
  grep -q "resumed from .* at step 5" "$work/c.log" || { cat "$work/c.log"; fail "did not resume from step 5"; }
  echo "ok   damaged newest save set aside"
else
  echo "skip damaged-save case: no strata-ckpt"
fi

# 4. Bad options are refused by name; a command that keeps failing ends with its status.
"$run" --np x -- true > "$work/bad.log" 2>&1 && fail "--np x accepted"
grep -q -- "--np must be a whole number, got 'x'" "$work/bad.log" || { cat "$work/bad.log"; fail "--np message"; }
"$run" --np 1 > "$work/bad2.log" 2>&1 && fail "no command accepted"
grep -q "no command given" "$work/bad2.log" || fail "no-command message"
"$run" --np 1 --max-restarts 1 "${mpi[@]}" -- false > "$work/bad3.log" 2>&1
[ $? -ne 0 ] || fail "a failing command reported success"
grep -q "all 1 restart(s) are used: giving up" "$work/bad3.log" || { cat "$work/bad3.log"; fail "give-up message"; }
echo "strata-run restart test passed"
