#!/usr/bin/env bash
# examples/train_llama end to end on one process: it builds byte-level tokens from Debian's
# licence texts, the loss falls by a clear margin, the validation loss is logged and falls,
# samples are printed, the JSONL parses, token files from tools/text_to_tokens train too, and
# scripts/plot_loss.py writes a PNG where matplotlib is importable. Options it cannot honour
# (pipeline options without --pp), a --prompt longer than the context, and
# --text paths that are devices, that --tokens-out would overwrite or that are too large are
# refused before training.
#   train_llama_smoke.sh <train_llama binary> <text_to_tokens binary> <repository root>
set -euo pipefail
bin=$1
text_to_tokens=$2
root=$3
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
small=(--layers 1 --width 64 --heads 4 --kv-heads 2 --intermediate 128 --context 32 --batch 8 --warmup 4
       --lr 3e-3 --eval-windows 64 --samples 2 --sample-tokens 24)

"$bin" "${small[@]}" --steps 40 --log-every 10 --eval-every 20 --metrics "$work/m.jsonl" \
  --tokens-out "$work/corpus.tokens" > "$work/run.log"
grep -q "^data: $corpus -> $work/corpus.tokens ([0-9]* byte-level tokens" "$work/run.log" \
  || { cat "$work/run.log"; fail "no line about the built token file"; }
grep -q "^LLaMA: [0-9]* parameters (1 layers, 4 heads, 2 kv heads" "$work/run.log" || { cat "$work/run.log"; fail "banner missing"; }
grep -q "^step 40/40 | loss" "$work/run.log" || { cat "$work/run.log"; fail "final progress line missing"; }
[ "$(grep -c "^eval  step [0-9]* | validation loss" "$work/run.log")" -eq 3 ] \
  || { cat "$work/run.log"; fail "expected validation at steps 0, 20 and 40"; }
[ "$(grep -c "^sample [12]/2 " "$work/run.log")" -eq 2 ] || { cat "$work/run.log"; fail "expected 2 samples"; }
# A sample is the bracketed prompt (the start of a held-out line) and at least one more byte.
[ "$(grep -c "^\[[^]]*\]." "$work/run.log")" -ge 1 ] || { cat "$work/run.log"; fail "no sample text after a prompt"; }

# The metrics: one record per step (train_gpt's keys) plus the validation records; the
# training loss of the last 5 steps is well below the first 5 (about 5.5, ln 256 at the
# start), and the validation loss falls too.
[ "$(grep -c '"loss"' "$work/m.jsonl")" -eq 40 ] || fail "expected 40 training records"
command -v python3 > /dev/null || { echo "SKIP: no python3 to parse the JSONL"; exit 77; }
python3 - "$work/m.jsonl" <<'PY'
import json, math, sys
records = [json.loads(line) for line in open(sys.argv[1])]
train = [r for r in records if "loss" in r]
val = [r for r in records if "val_loss" in r]
assert [r["step"] for r in train] == list(range(1, 41)), [r["step"] for r in train]
for r in train:
    assert set(r) == {"step", "loss", "lr", "grad_norm", "tokens_per_second"}, r
    assert math.isfinite(r["loss"]) and r["lr"] > 0, r
assert [r["step"] for r in val] == [0, 20, 40], val
first = sum(r["loss"] for r in train[:5]) / 5
last = sum(r["loss"] for r in train[-5:]) / 5
assert last < 0.75 * first, f"training loss fell only from {first:.3f} to {last:.3f}"
assert val[-1]["val_loss"] < 0.8 * val[0]["val_loss"], f"validation loss {val[0]['val_loss']:.3f} -> {val[-1]['val_loss']:.3f}"
print(f"loss {first:.3f} -> {last:.3f}, validation {val[0]['val_loss']:.3f} -> {val[-1]['val_loss']:.3f}")
PY

# Token files made by the CLI: --data and --val-data.
"$text_to_tokens" "$corpus/GPL-3" "$work/gpl.tokens" --val-fraction 0.1 --val-output "$work/gpl.val.tokens" \
  > "$work/cli.log"
"$bin" "${small[@]}" --steps 4 --samples 1 --metrics "" --data "$work/gpl.tokens" --val-data "$work/gpl.val.tokens" \
  > "$work/data.log"
train_tokens=$(sed -n 's/^.*gpl.tokens: \([0-9]*\) tokens$/\1/p' "$work/cli.log")
grep -q "data: $train_tokens training and [0-9]* validation tokens" "$work/data.log" \
  || { cat "$work/cli.log" "$work/data.log"; fail "--data/--val-data not read as the CLI wrote them"; }
grep -q "^data: " "$work/data.log" && fail "built a token file although --data was given"

# --model mixtral: the same run with a mixture of experts in every block; its loss falls too,
# and --export-hf writes a MixtralForCausalLM directory (the config entries name the family).
"$bin" "${small[@]}" --model mixtral --experts 4 --experts-top-k 2 --aux-loss-coef 0.01 --steps 30 --samples 0 \
  --metrics "$work/mixtral.jsonl" --tokens-out "$work/corpus.tokens" --export-hf "$work/mixtral_hf" \
  > "$work/mixtral.log"
grep -q "^Mixtral: 4 experts per layer, 2 per token, aux loss coefficient 0.01" "$work/mixtral.log" \
  || { cat "$work/mixtral.log"; fail "no Mixtral banner"; }
grep -q '"model_type": *"mixtral"' "$work/mixtral_hf/config.json" \
  || { cat "$work/mixtral.log"; fail "--export-hf did not write a Mixtral config.json"; }
python3 - "$work/mixtral.jsonl" <<'PY'
import json, sys
train = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
first, last = sum(train[:5]) / 5, sum(train[-5:]) / 5
assert last < 0.8 * first, f"Mixtral training loss fell only from {first:.3f} to {last:.3f}"
PY

# Bad options are refused before anything starts.
if "$bin" --heads 4 --kv-heads 3 > "$work/bad.log" 2>&1; then fail "--kv-heads 3 with --heads 4 was accepted"; fi
grep -q "must be a multiple of --kv-heads" "$work/bad.log" || { cat "$work/bad.log"; fail "no clear error for --kv-heads"; }
# refused "<message>" FLAGS...: the run fails naming the problem, before any training step.
refused() {
  local message=$1
  shift
  if "$bin" "${small[@]}" --steps 4 --metrics "" "$@" > "$work/bad.log" 2>&1; then fail "ran: $*"; fi
  grep -q -- "$message" "$work/bad.log" || { cat "$work/bad.log"; fail "no clear error for $*"; }
  grep -q "^step " "$work/bad.log" && { cat "$work/bad.log"; fail "trained before refusing $*"; }
  return 0
}
refused "--chunks 3 takes effect with --schedule interleaved only" --chunks 3
refused "--experts-top-k 3 exceeds --experts 2" --model mixtral --experts 2 --experts-top-k 3
refused "--prompt of 40 bytes leaves no room in --context 32" --prompt "$(printf 'x%.0s' {1..40})" \
  --tokens-out "$work/corpus.tokens"
# --text: a device is never read; --tokens-out must not replace the text it is built from;
# a text too large to tokenise in memory points to text_to_tokens.
refused "--text '/dev/zero' is not a regular file or a directory" --text /dev/zero --tokens-out "$work/z.tokens"
printf 'some text\n' > "$work/own.txt"
refused "--tokens-out '$work/./own.txt' is the --text file '$work/own.txt'" --text "$work/own.txt" \
  --tokens-out "$work/./own.txt"
[ "$(cat "$work/own.txt")" = "some text" ] || fail "--tokens-out replaced the --text file"
truncate -s 1T "$work/huge.txt" 2> /dev/null && {
  refused "convert it with text_to_tokens (which streams) and pass --data" --text "$work/huge.txt" \
    --tokens-out "$work/huge.tokens"
  rm -f "$work/huge.txt"
}

refused "--micro-batches and --schedule take effect with --pp of 2 or more" --micro-batches 2
refused "--collective-timeout (or STRATA_COLLECTIVE_TIMEOUT) must be a number of seconds in (0, 1e6], got 0" \
  --collective-timeout 0
refused "--top-p must be in (0, 1], got 0" --top-p 0
refused "--temperature must be a number > 0, got 0" --temperature 0

# Sampling: greedy choices (--top-k 1, a tiny --top-p or --temperature) give the same
# sample whatever the seed; the default sampling does not.
opts() { "$bin" "${small[@]}" --steps 4 --metrics "" --tokens-out "$work/corpus.tokens" --samples 2 "$@"; }
sample() { awk -v n="$2" '/^sample [0-9]+\/2 /{f = index($0, "sample " n "/2 ") == 1; next} f' "$1" | sed '/^$/d'; }
samples_equal() { [ "$(sample "$1" 1)" = "$(sample "$1" 2)" ]; }
for greedy in "--top-k 1" "--top-p 1e-9" "--temperature 1e-4"; do
  # shellcheck disable=SC2086  # the option and its value
  opts $greedy > "$work/greedy.log"
  samples_equal "$work/greedy.log" || { cat "$work/greedy.log"; fail "$greedy: the samples differ"; }
done
opts --top-k 0 --temperature 2 --collective-timeout 30 --prompt "GNU " > "$work/hot.log"
samples_equal "$work/hot.log" && { cat "$work/hot.log"; fail "two samples at temperature 2 are the same"; }
[ "$(grep -ac "^\[GNU \]" "$work/hot.log")" -eq 2 ] \
  || { cat "$work/hot.log"; fail "--prompt was not the samples' prompt"; }
# The optimizer and schedule: --min-lr-ratio 1 keeps the peak lr, --clip 0 records no
# gradient norm, --seed and --weight-decay change the losses.
field() { grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2 | sort -u | tr '\n' ' '; }
opts --samples 0 --warmup 0 --lr 0.002 --metrics "$work/flat.jsonl" --min-lr-ratio 1 --clip 0 > /dev/null
[ "$(field "$work/flat.jsonl" lr)" = "0.002 " ] || fail "--min-lr-ratio 1: lr $(field "$work/flat.jsonl" lr)"
[ "$(field "$work/flat.jsonl" grad_norm)" = "0.0 " ] || fail "--clip 0 recorded gradient norms"
# --lr-schedule linear decays to --min-lr-ratio 0.1 of the peak; wsd with --decay-fraction 0
# never decays before the last step.
opts --samples 0 --warmup 0 --lr 0.002 --metrics "$work/linear.jsonl" --lr-schedule linear > /dev/null
[ "$(field "$work/linear.jsonl" lr)" != "0.002 " ] || fail "--lr-schedule linear kept the peak lr"
opts --samples 0 --warmup 0 --lr 0.002 --metrics "$work/wsd.jsonl" --lr-schedule wsd --decay-fraction 0 > /dev/null
[ "$(field "$work/wsd.jsonl" lr)" = "0.002 " ] || fail "--lr-schedule wsd --decay-fraction 0: $(field "$work/wsd.jsonl" lr)"
opts --samples 0 --metrics "$work/seed1.jsonl" > /dev/null
opts --samples 0 --metrics "$work/seed2.jsonl" --seed 2 > /dev/null
opts --samples 0 --metrics "$work/wd.jsonl" --weight-decay 0.5 --lr 0.05 > /dev/null
opts --samples 0 --metrics "$work/wd0.jsonl" --weight-decay 0 --lr 0.05 > /dev/null
[ "$(field "$work/seed1.jsonl" loss)" != "$(field "$work/seed2.jsonl" loss)" ] || fail "--seed 2 changed nothing"
[ "$(field "$work/wd.jsonl" loss)" != "$(field "$work/wd0.jsonl" loss)" ] || fail "--weight-decay changed nothing"

# The plot, with whichever python3 has matplotlib (Debian's python3-matplotlib is /usr/bin/python3's).
for py in /usr/bin/python3 python3; do
  if "$py" -c "import matplotlib" 2>/dev/null; then
    "$py" "$root/scripts/plot_loss.py" "$work/m.jsonl" -o "$work/loss.png" > /dev/null
    [ "$(head -c 8 "$work/loss.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "loss.png is not a PNG"
    echo "plot_loss.py wrote a PNG"
    break
  fi
done
echo "train_llama smoke test passed"
