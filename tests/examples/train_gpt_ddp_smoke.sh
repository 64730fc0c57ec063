#!/usr/bin/env bash
# examples/train_gpt under `mpirun -np 2`: progress from rank 0 only, and a save at step 6 +
# resume under 2 ranks equals an uninterrupted 2-rank run (exported weights bit for bit).
#   train_gpt_ddp_smoke.sh <mpirun> <train_gpt binary>
set -euo pipefail
mpirun=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$mpirun" --oversubscribe -np 2 "$bin" "$@"; }
common=(--steps 10 --batch 4 --layers 1 --width 32 --heads 2 --digits 2 --warmup 2 --log-every 5
        --eval-examples 20)

run "${common[@]}" --metrics "$work/straight.jsonl" --export-hf "$work/straight" > "$work/straight.log"
run "${common[@]}" --metrics "$work/resumed.jsonl" --save "$work/state.ckpt" --save-every 3 --stop-at 6 \
  > "$work/first.log"
run "${common[@]}" --metrics "$work/resumed.jsonl" --resume "$work/state.ckpt" --export-hf "$work/resumed" \
  > "$work/resumed.log"

grep -q "batch 4 x 2 rank(s)" "$work/straight.log" || { echo "2-rank banner missing"; cat "$work/straight.log"; exit 1; }
[ "$(grep -c "^step 10/10 | loss" "$work/straight.log")" -eq 1 ] \
  || { echo "expected exactly one final progress line (rank 0 only)"; cat "$work/straight.log"; exit 1; }
[ "$(grep -c "resumed from .* at step 6" "$work/resumed.log")" -eq 1 ] \
  || { echo "resume message missing"; cat "$work/resumed.log"; exit 1; }
[ "$(grep -c "final exact-match accuracy" "$work/straight.log")" -eq 1 ] || { echo "accuracy missing"; exit 1; }
cmp "$work/straight/model.safetensors" "$work/resumed/model.safetensors" \
  || { echo "resumed 2-rank run differs from the uninterrupted 2-rank run"; exit 1; }
[ "$(wc -l < "$work/straight.jsonl")" -ge 10 ] || { echo "metrics lines missing"; exit 1; }
echo "train_gpt 2-rank smoke test passed"
