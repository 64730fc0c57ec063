#!/usr/bin/env bash
# A non-finite loss stops both trainers before any optimizer step writes it into the weights:
# the exit status is nonzero, the message names the step and the loss, and the newest
# checkpoint is the last good one (a background save of it completes, the bad state is never
# saved) and verifies. With --skip-nonfinite-steps the run skips that step instead, says so,
# counts it in the metrics and trains on. The loss is poisoned through the documented test
# hook STRATA_TEST_NAN_LOSS_AT_STEP=N (0-based step index; the log calls it step N + 1).
#   nonfinite_loss.sh <train_gpt> <train_llama> [strata-ckpt] [mpiexec]
set -euo pipefail
gpt=$1
llama=$2
ckpt_tool=${3:-}
mpiexec=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
gpt_args=(--steps 12 --batch 8 --layers 1 --width 32 --heads 2 --digits 2 --warmup 2 --log-every 4
          --eval-examples 20)

# expect_stop LOG STATUS: the run failed and its message names step 7 of 12 and the nan loss.
expect_stop() {
  [ "$2" -ne 0 ] || { cat "$1"; fail "a nan loss did not stop the run"; }
  grep -q "step 7/12: the loss is nan (non-finite). Stopped before the optimizer step" "$1" \
    || { cat "$1"; fail "the message does not name the step and the loss"; }
  grep -q "skip-nonfinite-steps" "$1" || { cat "$1"; fail "the message does not name the option"; }
}

# 1. train_gpt, saves every 3 steps in the background: step 7 (index 6) is poisoned, so the
#    save of step 6, still being written when the loss arrives, must complete and be the newest.
status=0
STRATA_TEST_NAN_LOSS_AT_STEP=6 "$gpt" "${gpt_args[@]}" --metrics "" --save "$work/gpt" --save-every 3 --async-save \
  > "$work/gpt_stop.log" 2>&1 || status=$?
expect_stop "$work/gpt_stop.log" "$status"
newest=$(cat "$work/gpt/latest")
case "$newest" in step-6-*) ;; *) fail "latest names '$newest', not the save of step 6";; esac
[ -z "$(find "$work/gpt" -maxdepth 1 -name 'step-7-*')" ] || fail "the state of the bad step was saved"
if [ -n "$ckpt_tool" ]; then
  "$ckpt_tool" verify "$work/gpt" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "the save does not verify"; }
fi
# The stopped run resumes from it and finishes (the hook is off now).
"$gpt" "${gpt_args[@]}" --metrics "" --resume "$work/gpt" > "$work/gpt_resumed.log" 2>&1 \
  || { cat "$work/gpt_resumed.log"; fail "the run does not resume from the last good save"; }
grep -q "resumed from .* at step 6" "$work/gpt_resumed.log" || { cat "$work/gpt_resumed.log"; fail "no resume line"; }

# 2. train_gpt --skip-nonfinite-steps: step 7 is skipped, said and counted; training goes on.
STRATA_TEST_NAN_LOSS_AT_STEP=6 "$gpt" "${gpt_args[@]}" --skip-nonfinite-steps --metrics "$work/skip.jsonl" \
  > "$work/gpt_skip.log" 2>&1 || { cat "$work/gpt_skip.log"; fail "--skip-nonfinite-steps did not finish the run"; }
grep -q "^step 7/12 skipped: loss nan" "$work/gpt_skip.log" || { cat "$work/gpt_skip.log"; fail "no skip line"; }
grep -q "(1 step(s) skipped so far)" "$work/gpt_skip.log" || { cat "$work/gpt_skip.log"; fail "no skip count"; }
grep -q "^step 12/12 | loss" "$work/gpt_skip.log" || { cat "$work/gpt_skip.log"; fail "training did not go on"; }
grep -q '"skipped":1,"skipped_steps":1,"step":7' "$work/skip.jsonl" || { cat "$work/skip.jsonl"; fail "metrics lack the skip"; }
grep -q '"skipped":0,"skipped_steps":1,"step":12' "$work/skip.jsonl" || fail "metrics lack the running count"
[ "$(grep -c '"skipped"' "$work/skip.jsonl")" -eq 6 ] || fail "steps before the skip carry a skip count"

# 3. Two ranks (DDP): the poisoned loss stops both ranks alike, with the step named.
if [ -n "$mpiexec" ]; then
  status=0
  STRATA_TEST_NAN_LOSS_AT_STEP=6 timeout 120 "$mpiexec" --oversubscribe -np 2 -x STRATA_TEST_NAN_LOSS_AT_STEP \
    "$gpt" "${gpt_args[@]}" --metrics "" --save "$work/ddp" --save-every 3 > "$work/ddp.log" 2>&1 || status=$?
  expect_stop "$work/ddp.log" "$status"
  case "$(cat "$work/ddp/latest")" in step-6-*) ;; *) fail "two ranks: latest is not the save of step 6";; esac
fi

# 4. train_llama: the same stop and skip (skipped without Debian's licence texts, its corpus).
corpus=/usr/share/common-licenses
if [ -d "$corpus" ]; then
  llama_args=(--layers 1 --width 32 --heads 2 --kv-heads 1 --intermediate 64 --context 32 --batch 4 --warmup 2
              --steps 12 --log-every 4 --eval-every 0 --eval-windows 16 --samples 1 --sample-tokens 8
              --tokens-out "$work/corpus.tokens" --metrics "")
  status=0
  STRATA_TEST_NAN_LOSS_AT_STEP=6 "$llama" "${llama_args[@]}" --save "$work/llama" --save-every 3 \
    > "$work/llama_stop.log" 2>&1 || status=$?
  expect_stop "$work/llama_stop.log" "$status"
  case "$(cat "$work/llama/latest")" in step-6-*) ;; *) fail "train_llama: latest is not the save of step 6";; esac
  STRATA_TEST_NAN_LOSS_AT_STEP=6 "$llama" "${llama_args[@]}" --skip-nonfinite-steps > "$work/llama_skip.log" 2>&1 \
    || { cat "$work/llama_skip.log"; fail "train_llama --skip-nonfinite-steps did not finish"; }
  grep -q "^step 7/12 skipped: loss nan" "$work/llama_skip.log" || { cat "$work/llama_skip.log"; fail "train_llama: no skip line"; }
fi
echo "nonfinite loss: stops before the update keeping the last good save; --skip-nonfinite-steps skips"
