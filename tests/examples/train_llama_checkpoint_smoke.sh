#!/usr/bin/env bash
# examples/train_llama's checkpoint options on one process: a run saved at step 6 (--save,
# --save-every, --stop-at) and resumed (--resume, --resume-latest, --async-save) exports the
# same bytes (--export-hf) and logs the same losses as an uninterrupted run; --keep-last
# prunes; --init-from starts from a save's weights; with strata-ckpt, the export imports back
# (a Hugging Face LlamaForCausalLM directory) and starts a run with the exporting run's
# validation loss; --padded-vocab-multiple pads what the export strips. Refusals: a save past
# --stop-at, --resume-latest without --save.
#   train_llama_checkpoint_smoke.sh <train_llama binary> [strata-ckpt binary]
set -euo pipefail
bin=$1
ckpt_tool=${2:-}
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
common=(--layers 1 --width 32 --heads 2 --kv-heads 1 --intermediate 64 --context 32 --batch 4 --warmup 2
        --steps 12 --log-every 4 --eval-every 6 --eval-windows 16 --samples 1 --sample-tokens 8
        --tokens-out "$work/corpus.tokens")
# The loss values of a JSONL file (training and validation, in file order), one per line.
losses() { grep -o '"\(val_\)\?loss":[^,}]*' "$1"; }
final_val() { grep -o "^eval  step 12 | validation loss [0-9.]*" "$1" | sed 's/.*loss //'; }
first_val() { grep -o "^eval  step 0 | validation loss [0-9.]*" "$1" | sed 's/.*loss //'; }

"$bin" "${common[@]}" --metrics "$work/straight.jsonl" --export-hf "$work/straight" > "$work/straight.log"
grep -q "^exported Hugging Face LlamaForCausalLM weights to $work/straight" "$work/straight.log" \
  || { cat "$work/straight.log"; fail "no export line"; }

# --padded-vocab-multiple: 384 rows for the 256 byte tokens, recorded in the save; the export
# holds the 256 real rows (the unpadded export's size), and sampling still gives bytes.
"$bin" "${common[@]}" --metrics "" --padded-vocab-multiple 384 --save "$work/padded" --export-hf "$work/padded_hf" \
  > "$work/padded.log" || { cat "$work/padded.log"; fail "--padded-vocab-multiple run"; }
grep -rqE '"config.padded_vocab_size": ?"384"' "$work/padded" || fail "config.padded_vocab_size not saved"
[ "$(stat -c %s "$work/padded_hf/model.safetensors")" = "$(stat -c %s "$work/straight/model.safetensors")" ] \
  || fail "--padded-vocab-multiple: the export kept the padding rows"
grep -q "^sample" "$work/padded.log" || { cat "$work/padded.log"; fail "--padded-vocab-multiple: no sample"; }

# resume_case NAME FLAGS...: stop at step 6 with saves every 3 steps, continue with FLAGS.
resume_case() {
  local name=$1
  shift
  "$bin" "${common[@]}" --metrics "$work/$name.jsonl" --save "$work/ckpt_$name" --save-every 3 --stop-at 6 \
    "${first_flags[@]}" > "$work/$name.first.log"
  grep -q "^stopped at step 6 of 12 (--stop-at)" "$work/$name.first.log" \
    || { cat "$work/$name.first.log"; fail "$name: no stop"; }
  grep -q "^sample" "$work/$name.first.log" && fail "$name: sampled although it stopped early"
  "$bin" "${common[@]}" --metrics "$work/$name.jsonl" "$@" --export-hf "$work/$name" > "$work/$name.log"
  grep -q "^resumed from .* at step 6$" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: no resume"; }
  cmp "$work/straight/model.safetensors" "$work/$name/model.safetensors" \
    || fail "$name: the resumed run exported other weights than the uninterrupted run"
  cmp <(losses "$work/straight.jsonl") <(losses "$work/$name.jsonl") \
    || fail "$name: the two parts' metrics differ from the uninterrupted run's"
}
first_flags=()
resume_case resume --resume "$work/ckpt_resume"
resume_case latest --save "$work/ckpt_latest" --resume-latest
first_flags=(--async-save)
resume_case async --resume "$work/ckpt_async"
# --keep-last 2 (the default) kept the saves of steps 3 and 6; the continued run saved step 12.
saves() { (cd "$1" && ls -d step-*) | sed 's/^\(step-[0-9]*\)-.*/\1/' | sort -V | tr '\n' ' '; }
[ "$(saves "$work/ckpt_resume")" = "step-3 step-6 " ] || fail "--keep-last: expected the step-3 and step-6 saves"
[ "$(saves "$work/ckpt_latest")" = "step-6 step-12 " ] \
  || { ls "$work/ckpt_latest"; fail "--keep-last: expected the step-6 and step-12 saves"; }
"$bin" "${common[@]}" --metrics "" --save "$work/ckpt_keep1" --save-every 2 --keep-last 1 > /dev/null
[ "$(saves "$work/ckpt_keep1")" = "step-12 " ] || { ls "$work/ckpt_keep1"; fail "--keep-last 1 kept more"; }
# --resume-latest with an empty --save directory starts afresh.
"$bin" "${common[@]}" --metrics "" --save "$work/ckpt_fresh" --resume-latest --stop-at 3 > "$work/fresh.log"
grep -q "resumed from" "$work/fresh.log" && fail "--resume-latest resumed from an empty directory"

# --init-from the step-12 save: the validation loss at step 0 is the saving run's at step 12.
"$bin" "${common[@]}" --metrics "" --init-from "$work/ckpt_latest" --steps 1 --warmup 0 --eval-every 0 \
  > "$work/init.log"
grep -q "^initialised the weights from $work/ckpt_latest" "$work/init.log" \
  || { cat "$work/init.log"; fail "no --init-from line"; }
[ "$(first_val "$work/init.log")" = "$(final_val "$work/straight.log")" ] \
  || { grep "validation" "$work/init.log" "$work/straight.log"; fail "--init-from did not load the saved weights"; }

if [ -n "$ckpt_tool" ]; then
  # The export is a LlamaForCausalLM directory that strata-ckpt imports; a run started from
  # the import evaluates as the exporting run ended.
  python3 - "$work/straight/config.json" <<'PY' || fail "config.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["model_type"] == "llama" and c["architectures"] == ["LlamaForCausalLM"], c
assert (c["num_hidden_layers"], c["hidden_size"], c["num_key_value_heads"], c["vocab_size"]) == (1, 32, 1, 256), c
PY
  "$ckpt_tool" import "$work/straight" --out "$work/imported" > "$work/import.log" \
    || { cat "$work/import.log"; fail "import"; }
  grep -q "(llama)" "$work/import.log" || { cat "$work/import.log"; fail "not imported as llama"; }
  "$bin" "${common[@]}" --metrics "" --init-from "$work/imported" --steps 1 --warmup 0 --eval-every 0 > "$work/hf.log"
  [ "$(first_val "$work/hf.log")" = "$(final_val "$work/straight.log")" ] \
    || { grep "validation" "$work/hf.log" "$work/straight.log"; fail "the imported export is not the trained model"; }
fi

# Refusals, by name, before anything is trained or saved.
if "$bin" "${common[@]}" --metrics "" --resume "$work/ckpt_latest" --stop-at 8 > "$work/bad.log" 2>&1; then
  fail "a resume past --stop-at ran"
fi
grep -q "was saved at step 12, after the requested end (--stop-at 8)" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "past-end message"; }
if "$bin" "${common[@]}" --resume-latest > "$work/bad.log" 2>&1; then fail "--resume-latest without --save ran"; fi
grep -q -- "--resume-latest resumes from the --save directory" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "--resume-latest message"; }
if "$bin" "${common[@]}" --init-from "$work/ckpt_latest" --resume "$work/ckpt_latest" > "$work/bad.log" 2>&1; then
  fail "--init-from with --resume ran"
fi
grep -q -- "--init-from starts a new run" "$work/bad.log" || { cat "$work/bad.log"; fail "--init-from message"; }
# A --keep-last that does not fit the save options' int would wrap (4294967297 -> 1) and prune.
if "$bin" "${common[@]}" --save "$work/ckpt_latest" --keep-last 4294967297 > "$work/bad.log" 2>&1; then
  fail "--keep-last 4294967297 ran"
fi
grep -q -- "--keep-last 4294967297 is too large" "$work/bad.log" || { cat "$work/bad.log"; fail "--keep-last message"; }
[ "$(saves "$work/ckpt_latest")" = "step-6 step-12 " ] || fail "a refused run changed the saves"
echo "train_llama checkpoint smoke test passed"
