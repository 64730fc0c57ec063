#!/usr/bin/env bash
# examples/train_gpt on the GPU: 2 ranks with --device cuda --autocast bf16 train (the loss
# falls, the progress line shows tokens/s and the peak GPU memory, the banner names the GPU
# and the process groups); a batch that cannot fit fails at its step with the allocator's
# requested and free bytes and a non-zero status, without hanging; --device cuda:N past the
# visible GPUs is refused naming the index and the count. Skips (77) where no GPU is visible.
#   train_gpt_cuda.sh <mpiexec> <train_gpt binary>
set -euo pipefail
mpiexec=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "$count" -gt 0 ] || { echo "skipped: no GPU is visible (nvidia-smi -L)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
small=(--layers 2 --width 64 --heads 4 --digits 2 --batch 32 --warmup 5 --lr 3e-3 --eval-examples 50 --metrics "")

timeout 240 "$mpiexec" --oversubscribe -np 2 "$bin" "${small[@]}" --steps 60 --log-every 10 --device cuda \
  --autocast bf16 > "$work/np2.log" 2>&1 || { cat "$work/np2.log"; fail "2 ranks on cuda failed"; }
cat "$work/np2.log"
grep -q "; autocast bf16" "$work/np2.log" || fail "the banner does not name autocast bf16"
grep -q " on cuda:[0-9]* (process groups: MPI" "$work/np2.log" || fail "the banner does not name the GPU and groups"
grep -qE "^step 60/60 \| loss [0-9.]+ \| .*k tok/s \| ETA .* \| peak GPU memory [0-9.]+ GiB$" "$work/np2.log" \
  || fail "the progress line lacks tokens/s or the peak GPU memory"
loss() { grep "^step $1/60 " "$work/np2.log" | sed 's/.* | loss \([0-9.]*\) .*/\1/'; }
awk -v a="$(loss 10)" -v b="$(loss 60)" 'BEGIN { exit !(b < 0.8 * a) }' \
  || fail "the loss did not fall ($(loss 10) at step 10, $(loss 60) at step 60)"

# Out of memory inside a step: one rank, a batch of a million problems.
status=0
timeout 120 "$bin" "${small[@]}" --steps 2 --warmup 0 --batch 1000000 --device cuda > "$work/oom.log" 2>&1 || status=$?
cat "$work/oom.log"
if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then fail "out of memory: exit status $status (124: it hung)"; fi
grep -q "step 1/2 failed: .*out of memory on cuda:[0-9]*: requested [0-9]* bytes" "$work/oom.log" \
  || fail "out of memory: no message naming the step and the requested bytes"

status=0
"$bin" "${small[@]}" --device "cuda:$count" > "$work/index.log" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "--device cuda:$count was accepted with $count GPU(s)"
grep -q -- "--device cuda:$count: there is no GPU $count, only $count GPU(s) are visible" "$work/index.log" \
  || { cat "$work/index.log"; fail "--device cuda:$count: no message naming the index and the count"; }
echo "train_gpt_cuda passed"
