#!/usr/bin/env bash
# examples/train_gpt --zero STAGE under `mpirun -np 2`: every stage exports the same weights,
# byte for byte, as the DDP run (stage 0), and a bad stage is a clear error.
#   train_gpt_zero_smoke.sh <mpirun> <train_gpt binary>
set -euo pipefail
mpirun=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$mpirun" --oversubscribe -np 2 "$bin" "$@"; }
common=(--steps 10 --batch 4 --layers 2 --width 32 --heads 2 --digits 2 --warmup 2 --log-every 5
        --eval-examples 20 --metrics "")

run "${common[@]}" --export-hf "$work/ddp" > "$work/ddp.log"
for stage in 0 1 2 3; do
  run "${common[@]}" --zero "$stage" --export-hf "$work/zero$stage" > "$work/zero$stage.log"
  [ "$(grep -c "^step 10/10 | loss" "$work/zero$stage.log")" -eq 1 ] \
    || { echo "stage $stage: expected one final progress line"; cat "$work/zero$stage.log"; exit 1; }
  cmp "$work/ddp/model.safetensors" "$work/zero$stage/model.safetensors" \
    || { echo "--zero $stage exported different weights from DDP"; exit 1; }
done
if run "${common[@]}" --zero 4 > "$work/bad.log" 2>&1; then echo "--zero 4 was accepted"; exit 1; fi
grep -q "stage 4 is not a ZeRO stage" "$work/bad.log" || { echo "no clear error for --zero 4"; cat "$work/bad.log"; exit 1; }
echo "train_gpt --zero smoke test passed"
