#!/usr/bin/env bash
# examples/train_gpt --zero STAGE under `mpirun -np 2`: every stage exports the same weights,
# byte for byte, as the DDP run (stage 0); --save/--resume (sharded checkpoints) at stages 2
# and 3, float32 and bf16 parameters, export the same bytes as an uninterrupted run, and load
# into other layouts; only rank 0 prints; bad flags are clear errors.
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
# Stop at step 6 (saved every 3 steps), resume in a new job: the same bytes as straight through.
resume_case() {  # name, then train_gpt flags; compares against $work/<name>/model.safetensors
  local name=$1
  shift
  run "${common[@]}" "$@" --save "$work/ckpt_$name" --save-every 3 --stop-at 6 > "$work/$name.first.log"
  [ "$(grep -c "stopped at step 6 of 10" "$work/$name.first.log")" -eq 1 ] \
    || { echo "$name: expected one stop line (rank 0 only)"; cat "$work/$name.first.log"; exit 1; }
  local step_dir="$work/ckpt_$name/$(cat "$work/ckpt_$name/latest")"
  [ -f "$step_dir/index.json" ] && [ -f "$step_dir/shard_0.safetensors" ] \
    && [ -f "$step_dir/shard_1.safetensors" ] || { echo "$name: sharded checkpoint missing"; exit 1; }
  # --keep-last 2 (the default): the saves of steps 3 and 6, `latest` naming step 6's.
  [ "$(basename "$step_dir")" = "$(cd "$work/ckpt_$name" && ls -d step-6-*)" ] \
    && [ "$(cd "$work/ckpt_$name" && ls -d step-* | wc -l)" -eq 2 ] \
    || { echo "$name: expected the step-3 and step-6 saves"; ls "$work/ckpt_$name"; exit 1; }
  run "${common[@]}" "$@" --resume "$work/ckpt_$name" --export-hf "$work/$name.resumed" > "$work/$name.resumed.log"
  [ "$(grep -c "resumed from .* at step 6" "$work/$name.resumed.log")" -eq 1 ] \
    || { echo "$name: expected one resume line (rank 0 only)"; cat "$work/$name.resumed.log"; exit 1; }
  [ "$(grep -c "^step 10/10 | loss" "$work/$name.resumed.log")" -eq 1 ] \
    || { echo "$name: expected one final progress line"; cat "$work/$name.resumed.log"; exit 1; }
  cmp "$work/$name/model.safetensors" "$work/$name.resumed/model.safetensors" \
    || { echo "$name: the resumed run exported different weights from the uninterrupted run"; exit 1; }
}
resume_case zero2 --zero 2
resume_case zero3 --zero 3
run "${common[@]}" --zero 3 --param-dtype bf16 --export-hf "$work/zero3bf16" > "$work/zero3bf16.log"
grep -q "parameters bf16 (fp32 master)" "$work/zero3bf16.log" || { echo "bf16 banner missing"; cat "$work/zero3bf16.log"; exit 1; }
[ "$(grep -c "final exact-match accuracy" "$work/zero3bf16.log")" -eq 1 ] || { echo "bf16: accuracy missing"; exit 1; }
resume_case zero3bf16 --zero 3 --param-dtype bf16
# Checkpoints load into other layouts: the bf16 (fp32 master) one as float32 DDP, the ZeRO-2
# one (2 ranks x --batch 4) in one process with the same global batch.
run "${common[@]}" --resume "$work/ckpt_zero3bf16" > "$work/bf16_as_fp32.log"
grep -q "resumed from .* at step 6" "$work/bf16_as_fp32.log" || { echo "bf16 -> float32 resume failed"; cat "$work/bf16_as_fp32.log"; exit 1; }
"$bin" "${common[@]}" --global-batch 8 --resume "$work/ckpt_zero2" > "$work/zero2_as_one.log"
grep -q "resumed from .* at step 6" "$work/zero2_as_one.log" && grep -q "final exact-match accuracy" "$work/zero2_as_one.log" \
  || { echo "2-rank ZeRO-2 -> one process resume failed"; cat "$work/zero2_as_one.log"; exit 1; }

if run "${common[@]}" --param-dtype bf16 > "$work/bad_bf16.log" 2>&1; then echo "bf16 without --zero was accepted"; exit 1; fi
grep -q "needs --zero" "$work/bad_bf16.log" || { echo "no clear error for bf16 without --zero"; cat "$work/bad_bf16.log"; exit 1; }
if run "${common[@]}" --zero 4 > "$work/bad.log" 2>&1; then echo "--zero 4 was accepted"; exit 1; fi
grep -q "stage 4 is not a ZeRO stage" "$work/bad.log" || { echo "no clear error for --zero 4"; cat "$work/bad.log"; exit 1; }
echo "train_gpt --zero smoke test passed"
