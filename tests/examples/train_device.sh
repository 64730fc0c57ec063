#!/usr/bin/env bash
# --device and --autocast of the example trainers on the CPU: --device cpu trains exactly as
# before (the same losses as without the option); the progress line shows tokens/s;
# --autocast bf16 and fp16 train (the loss falls; fp16 reports its loss scale); --device cuda
# on a machine without a GPU, or in a build without CUDA, fails at once naming which, and a
# malformed --device is refused naming the value. train_llama shares the options (the same
# refusals). Where a GPU is visible the refusal part is skipped (tests/gpu covers that side).
#   train_device.sh <train_gpt binary> <train_llama binary> <cuda built: ON/OFF>
set -euo pipefail
gpt=$1
llama=$2
cuda_built=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--steps 12 --batch 8 --layers 1 --width 32 --heads 2 --digits 2 --warmup 2 --log-every 4
        --eval-examples 20 --metrics "")
losses() { grep "^step " "$1" | sed 's/ | lr .*//'; }

# --device cpu is the default: the same steps and losses.
"$gpt" "${common[@]}" > "$work/default.log"
"$gpt" "${common[@]}" --device cpu > "$work/cpu.log"
[ -n "$(losses "$work/cpu.log")" ] || { cat "$work/cpu.log"; fail "no progress lines"; }
[ "$(losses "$work/default.log")" = "$(losses "$work/cpu.log")" ] || fail "--device cpu trained differently"
grep -qE "^step 12/12 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| [0-9.]+k tok/s \| ETA" "$work/cpu.log" \
  || { cat "$work/cpu.log"; fail "the progress line has no tokens/s"; }
grep -q "peak GPU memory" "$work/cpu.log" && fail "a CPU run reported GPU memory"

# --autocast: bf16 and fp16 products on the CPU (rounded around float32 GEMMs) still train.
loss_at() { grep "^step " "$1" | sed -n "$2" | sed 's/.* | loss \([0-9.]*\) .*/\1/'; }
for mode in bf16 fp16; do
  "$gpt" "${common[@]}" --steps 40 --log-every 1 --lr 3e-3 --autocast "$mode" > "$work/$mode.log"
  start=$(loss_at "$work/$mode.log" 1p)
  end=$(loss_at "$work/$mode.log" "\$p")
  awk -v a="$start" -v b="$end" 'BEGIN { exit !(b < 0.8 * a) }' \
    || { cat "$work/$mode.log"; fail "--autocast $mode: the loss did not fall ($start -> $end)"; }
  grep -q "autocast $mode" "$work/$mode.log" || fail "--autocast $mode: not in the banner"
done
"$gpt" "${common[@]}" --steps 40 --log-every 1 --lr 3e-3 > "$work/none.log"
[ "$(losses "$work/none.log")" != "$(losses "$work/bf16.log")" ] || fail "--autocast bf16 changed nothing"
grep -q "^step 40/40 | .* | loss scale [0-9]* ([0-9]* overflow step(s) skipped)$" "$work/fp16.log" \
  || { tail -3 "$work/fp16.log"; fail "--autocast fp16: no loss scale on the progress line"; }
grep -q "loss scale" "$work/bf16.log" && fail "--autocast bf16 reported a loss scale"
# The loss scale is part of a checkpoint: resumed at step 20 (after its early back-offs), fp16
# ends with the uninterrupted run's loss and scale (a fresh 65536 would overflow again).
fp16=("${common[@]}" --steps 40 --log-every 1 --lr 3e-3 --autocast fp16)
"$gpt" "${fp16[@]}" --save "$work/fp16_ckpt" --stop-at 20 > "$work/fp16_first.log"
"$gpt" "${fp16[@]}" --resume "$work/fp16_ckpt" > "$work/fp16_resumed.log"
loss_and_scale() { grep "^step 40/40" "$1" | sed 's/ | lr [^|]*|[^|]*|[^|]*//; s/ (.*//'; }
straight=$(loss_and_scale "$work/fp16.log")
if [ -z "$straight" ] || [ "$straight" != "$(loss_and_scale "$work/fp16_resumed.log")" ]; then
  paste <(tail -3 "$work/fp16.log") <(tail -3 "$work/fp16_resumed.log"); fail "--autocast fp16: the resumed run differs"
fi

# train_llama takes the same options (its corpus: Debian's licence texts, where present).
if [ -d /usr/share/common-licenses ]; then
  "$llama" --layers 1 --width 32 --heads 2 --kv-heads 1 --intermediate 64 --context 16 --batch 4 --steps 4 --warmup 1 \
    --log-every 2 --eval-windows 8 --samples 1 --sample-tokens 4 --tokens-out "$work/corpus.tokens" --metrics "" \
    --device cpu --autocast bf16 > "$work/llama.log"
  grep -q "^LLaMA: .*; autocast bf16$" "$work/llama.log" || { cat "$work/llama.log"; fail "train_llama: no autocast in the banner"; }
  grep -qE "^step 4/4 \| loss [0-9.]+ \| .*k tok/s" "$work/llama.log" || fail "train_llama: no progress line"
fi

# Refusals: before any training, within seconds, a non-zero exit status, naming the problem.
refused() {  # refused <program> <message> <args...>
  local program=$1 message=$2 status=0
  shift 2
  timeout 60 "$program" "$@" > "$work/refused.log" 2>&1 || status=$?
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    cat "$work/refused.log"; fail "$(basename "$program") $*: exit status $status"
  fi
  grep -qF -- "$message" "$work/refused.log" || { cat "$work/refused.log"; fail "$(basename "$program") $*: no '$message'"; }
  grep -q "^step " "$work/refused.log" && fail "$(basename "$program") $*: trained before refusing"
  return 0
}
for program in "$gpt" "$llama"; do
  refused "$program" "--device 'gpu' is not cpu, cuda or cuda:N" --device gpu
  refused "$program" "--device 'cuda:x' is not cpu, cuda or cuda:N" --device cuda:x
  refused "$program" "--autocast: fp8 not in {none,bf16,fp16}" --autocast fp8
done
if nvidia-smi -L > /dev/null 2>&1; then
  echo "a GPU is visible: the no-GPU refusals are checked by the gpu tests instead"
elif [ "$cuda_built" = ON ]; then
  for program in "$gpt" "$llama"; do
    refused "$program" "--device cuda: no GPU is visible to this process" --device cuda
    refused "$program" "--device cuda:7: no GPU is visible to this process" --device cuda:7
  done
else
  for program in "$gpt" "$llama"; do
    refused "$program" "--device cuda: strata was built without CUDA" --device cuda
  done
fi
echo "train_device passed"
