#!/usr/bin/env bash
# examples/train_llama under `mpirun -np 2`: DDP and ZeRO stages 1-3 log the same losses
# (training and validation, to the last digit of the JSONL) with rank 0 alone printing, the
# samples come out once, and bf16 parameters under ZeRO-3 learn as well.
#   train_llama_dist_smoke.sh <mpirun> <train_llama binary>
set -euo pipefail
mpirun=$1
bin=$2
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
run() { "$mpirun" --oversubscribe -np 2 "$bin" "$@"; }
common=(--layers 2 --width 32 --heads 2 --kv-heads 1 --intermediate 64 --context 32 --batch 4 --warmup 3
        --lr 3e-3 --steps 30 --log-every 10 --eval-every 15 --eval-windows 32 --samples 1 --sample-tokens 8
        --tokens-out "$work/corpus.tokens")
# The loss values of a JSONL file (training and validation, in file order), one per line.
losses() { grep -o '"\(val_\)\?loss":[^,}]*' "$1"; }
# Fails unless the mean training loss of the last 5 steps is below 0.8 x that of the first 5.
check_learns() {
  grep -o '"loss":[^,}]*' "$1" | cut -d: -f2 | awk -v what="$2" '
    { loss[NR] = $1 }
    END { for (i = 1; i <= 5; ++i) { a += loss[i] / 5; b += loss[NR - 5 + i] / 5 }
          if (NR != 30 || !(b < 0.8 * a)) { printf "FAIL: %s: %d steps, loss %.3f -> %.3f\n", what, NR, a, b; exit 1 }
          printf "%s: loss %.3f -> %.3f\n", what, a, b }'
}

run "${common[@]}" --metrics "$work/ddp.jsonl" > "$work/ddp.log"
grep -q "batch 4 x 2 rank(s); DDP" "$work/ddp.log" || { cat "$work/ddp.log"; fail "2-rank DDP banner missing"; }
[ "$(grep -c "^step 30/30 | loss" "$work/ddp.log")" -eq 1 ] || { cat "$work/ddp.log"; fail "expected one final progress line"; }
[ "$(grep -c "^sample 1/1 " "$work/ddp.log")" -eq 1 ] || { cat "$work/ddp.log"; fail "expected one sample (rank 0 only)"; }
[ "$(losses "$work/ddp.jsonl" | wc -l)" -eq 33 ] || fail "expected 30 training and 3 validation losses"
check_learns "$work/ddp.jsonl" DDP
for stage in 1 2 3; do
  run "${common[@]}" --zero "$stage" --metrics "$work/zero$stage.jsonl" > "$work/zero$stage.log"
  grep -q "ZeRO stage $stage" "$work/zero$stage.log" || { cat "$work/zero$stage.log"; fail "stage $stage banner missing"; }
  [ "$(grep -c "^sample 1/1 " "$work/zero$stage.log")" -eq 1 ] || fail "stage $stage: expected one sample"
  cmp <(losses "$work/ddp.jsonl") <(losses "$work/zero$stage.jsonl") \
    || fail "--zero $stage logged other losses than DDP"
done
run "${common[@]}" --zero 3 --param-dtype bf16 --metrics "$work/bf16.jsonl" > "$work/bf16.log"
grep -q "parameters bf16 (fp32 master)" "$work/bf16.log" || { cat "$work/bf16.log"; fail "bf16 banner missing"; }
check_learns "$work/bf16.jsonl" "ZeRO-3 bf16"
echo "train_llama 2-rank smoke test passed"
