#!/usr/bin/env bash
# examples/train_gpt end to end: train a few steps with a save, resume from it, export to
# Hugging Face safetensors, and check that the resumed run equals an uninterrupted one
# (the exported weights are compared bit for bit) and that Python reads the export. With
# strata-ckpt: the export imported back starts a run (--init-from) with the same accuracy.
# --dropout trains, is saved and checked; values outside [0, 1) and --chunks without an
# interleaved pipeline are refused. The optimizer, schedule, evaluation, timeline and
# --async-save options have their effect; --padded-vocab-multiple pads what the export strips.
#   train_gpt_smoke.sh <train_gpt binary> <tests source dir> [strata-ckpt binary]
set -euo pipefail
bin=$1
tests=$2
ckpt_tool=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--steps 12 --batch 8 --layers 1 --width 32 --heads 2 --digits 2 --warmup 2 --log-every 4
        --eval-examples 20)

"$bin" "${common[@]}" --metrics "$work/straight.jsonl" --export-hf "$work/straight" > "$work/straight.log"
"$bin" "${common[@]}" --metrics "$work/resumed.jsonl" --save "$work/state.ckpt" --save-every 3 --stop-at 6 \
  > "$work/first.log"
"$bin" "${common[@]}" --metrics "$work/resumed.jsonl" --resume "$work/state.ckpt" --export-hf "$work/resumed" \
  > "$work/resumed.log"

grep -q "resumed from .* at step 6" "$work/resumed.log" || { echo "resume message missing"; cat "$work/resumed.log"; exit 1; }
grep -q "^step 12/12 | loss" "$work/straight.log" || { echo "progress line missing"; cat "$work/straight.log"; exit 1; }
grep -q "exact-match accuracy" "$work/straight.log" || { echo "accuracy missing"; exit 1; }
cmp "$work/straight/model.safetensors" "$work/resumed/model.safetensors" \
  || { echo "resumed run differs from the uninterrupted run"; exit 1; }
[ "$(wc -l < "$work/resumed.jsonl")" -ge 12 ] || { echo "metrics lines missing"; exit 1; }

if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - "$work/straight" <<'PY'
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
config = json.load(open(d + "/config.json"))
assert config["n_layer"] == 1 and config["n_embd"] == 32, config
assert header["h.0.attn.c_attn.weight"]["shape"] == [32, 96], header["h.0.attn.c_attn.weight"]
assert header["wte.weight"]["shape"] == [14, 32]
print("python read", len(header) - ("__metadata__" in header), "tensors")
PY
fi
if [ -n "$ckpt_tool" ]; then
  # Hugging Face export -> checkpoint -> a new run's weights: a step at a negligible lr leaves
  # the evaluation where the exporting run ended.
  "$ckpt_tool" import "$work/straight" --out "$work/imported" > "$work/import.log" || { cat "$work/import.log"; exit 1; }
  "$bin" "${common[@]}" --steps 1 --warmup 0 --lr 1e-12 --metrics "" --init-from "$work/imported" > "$work/init.log"
  grep -q "initialised the weights from" "$work/init.log" || { cat "$work/init.log"; exit 1; }
  [ "$(grep -o "final exact-match accuracy: .*" "$work/init.log")" = "$(grep -o "final exact-match accuracy: .*" "$work/straight.log")" ] \
    || { echo "--init-from did not reproduce the exported model"; tail -2 "$work/straight.log" "$work/init.log"; exit 1; }
fi
# --padded-vocab-multiple: 16 rows for the 14 tokens, recorded in the save's configuration;
# the export holds the 14 real rows (the unpadded export's size).
"$bin" "${common[@]}" --metrics "" --padded-vocab-multiple 16 --save "$work/padded" --export-hf "$work/padded_hf" \
  > "$work/padded.log"
grep -rqE '"config.padded_vocab_size": ?"16"' "$work/padded" || { echo "config.padded_vocab_size not saved"; exit 1; }
[ "$(stat -c %s "$work/padded_hf/model.safetensors")" = "$(stat -c %s "$work/straight/model.safetensors")" ] \
  || { echo "--padded-vocab-multiple: the export kept the padding rows"; exit 1; }
# --dropout: trains (other losses than without), is stored in the checkpoint's configuration
# (and so checked on resume), and is refused outside [0, 1).
"$bin" "${common[@]}" --steps 4 --metrics "" > "$work/nodrop.log"
"$bin" "${common[@]}" --steps 4 --metrics "" --dropout 0.2 --save "$work/drop" > "$work/drop.log"
if [ "$(grep "^step 4/4" "$work/nodrop.log")" = "$(grep "^step 4/4" "$work/drop.log")" ]; then
  echo "--dropout 0.2 trained like --dropout 0"; exit 1
fi
grep -q '"config.dropout":"0.20000000000000001"' "$work/drop/$(cat "$work/drop/latest")/index.json" \
  || { echo "--dropout is not in the checkpoint's configuration"; exit 1; }
if "$bin" "${common[@]}" --steps 8 --metrics "" --resume "$work/drop" > "$work/drop_bad.log" 2>&1; then
  echo "a --dropout 0.2 checkpoint resumed with --dropout 0"; exit 1
fi
grep -q "config.dropout" "$work/drop_bad.log" || { cat "$work/drop_bad.log"; exit 1; }
for bad in 1 -0.1 nan; do
  if "$bin" "${common[@]}" --dropout "$bad" > "$work/bad.log" 2>&1; then echo "--dropout $bad was accepted"; exit 1; fi
  grep -q -- "--dropout must be in \[0, 1), got" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
done
if "$bin" "${common[@]}" --chunks 3 > "$work/bad.log" 2>&1; then
  echo "--chunks 3 without a pipeline was accepted"; exit 1
fi
grep -q -- "--chunks 3 takes effect with --schedule interleaved only" "$work/bad.log" \
  || { cat "$work/bad.log"; exit 1; }

# The optimizer and schedule options change what the metrics record: --min-lr-ratio 1 keeps
# the peak lr, --clip 0 records no gradient norm, --seed and --weight-decay change the losses.
opts() { "$bin" "${common[@]}" --steps 6 --warmup 0 --eval-examples 5 "$@"; }
field() { grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2 | sort -u | tr '\n' ' '; }
opts --metrics "$work/flat.jsonl" --min-lr-ratio 1 --clip 0 > /dev/null
[ "$(field "$work/flat.jsonl" lr)" = "0.001 " ] \
  || { echo "--min-lr-ratio 1: lr $(field "$work/flat.jsonl" lr)"; exit 1; }
[ "$(field "$work/flat.jsonl" grad_norm)" = "0.0 " ] || { echo "--clip 0 recorded gradient norms"; exit 1; }
# --lr-schedule: wsd holds the peak until the last --decay-fraction 0.5 of the steps, then
# decays linearly to --min-lr-ratio (0.1: 0.7 and 0.4 of the peak); constant never decays.
opts --metrics "$work/wsd.jsonl" --lr-schedule wsd --decay-fraction 0.5 > /dev/null
[ "$(field "$work/wsd.jsonl" lr)" = "0.0004 0.0007000000000000001 0.001 " ] \
  || { echo "--lr-schedule wsd: lr $(field "$work/wsd.jsonl" lr)"; exit 1; }
opts --metrics "$work/const.jsonl" --lr-schedule constant > /dev/null
[ "$(field "$work/const.jsonl" lr)" = "0.001 " ] || { echo "--lr-schedule constant decayed"; exit 1; }
if "$bin" "${common[@]}" --decay-fraction 0.3 > "$work/bad.log" 2>&1; then
  echo "--decay-fraction without --lr-schedule wsd was accepted"; exit 1
fi
grep -q -- "--decay-fraction takes effect with --lr-schedule wsd only" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
opts --metrics "$work/seed1.jsonl" > /dev/null
opts --metrics "$work/seed2.jsonl" --seed 2 > /dev/null
opts --metrics "$work/wd.jsonl" --weight-decay 0.5 --lr 0.05 > /dev/null
opts --metrics "$work/wd0.jsonl" --weight-decay 0 --lr 0.05 > /dev/null
[ "$(field "$work/seed1.jsonl" grad_norm)" != "0.0 " ] || { echo "--clip 1 recorded no gradient norm"; exit 1; }
for other in seed2:seed1 wd0:wd; do
  if [ "$(field "$work/${other%:*}.jsonl" loss)" = "$(field "$work/${other#*:}.jsonl" loss)" ]; then
    echo "${other%:*} and ${other#*:} logged the same losses"; exit 1
  fi
done
# --eval-every: evaluations at steps 2 and 4 and at the end; --timeline-step picks the step.
opts --metrics "" --eval-every 2 --timeline "$work/t.json" --timeline-step 3 > "$work/every.log"
[ "$(grep -c "^eval  step [246] " "$work/every.log")" -eq 3 ] \
  || { cat "$work/every.log"; echo "--eval-every 2"; exit 1; }
grep -q "^wrote the timeline of step 3 to" "$work/every.log" \
  || { cat "$work/every.log"; echo "--timeline-step 3"; exit 1; }
grep -q '"step":3' "$work/t.json" || { echo "--timeline-step 3: no span of step 3"; exit 1; }
# --profile-step: rank 0 prints step 2's op table (forward ops and backward nodes); a step
# past the run is refused before training.
opts --metrics "" --profile-step 2 > "$work/profile.log"
grep -q "^profile of step 2 (rank 0):" "$work/profile.log" && grep -q "Host total ms" "$work/profile.log" \
  && grep -q "^LinearBackward " "$work/profile.log" || { cat "$work/profile.log"; echo "--profile-step 2"; exit 1; }
if opts --metrics "" --profile-step 6 > "$work/profile_bad.log" 2>&1; then echo "--profile-step 6 ran"; exit 1; fi
grep -q -- "--profile-step 6 is past the last step (--steps 6)" "$work/profile_bad.log" \
  || { cat "$work/profile_bad.log"; echo "--profile-step 6 message"; exit 1; }
# --async-save: a background save at step 6, resumed, exports what the uninterrupted run did.
"$bin" "${common[@]}" --metrics "" --save "$work/async" --async-save --save-every 3 --stop-at 6 > "$work/async.log"
"$bin" "${common[@]}" --metrics "" --resume "$work/async" --export-hf "$work/async_resumed" > /dev/null
cmp "$work/straight/model.safetensors" "$work/async_resumed/model.safetensors" \
  || { echo "--async-save: the resumed run differs"; exit 1; }
echo "train_gpt smoke test passed"
