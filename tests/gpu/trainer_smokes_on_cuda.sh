#!/usr/bin/env bash
# The example trainers' CPU smoke tests again with every run on the GPU (--device cuda): the
# save/resume/export round trip (resumed equals uninterrupted), --zero 1-3 (each stage
# exports DDP's weights), --tp and --pp (equal to one process within the scripts' bounds) for
# train_gpt, and train_llama's data, tensor and pipeline parallel runs, all at 2 ranks on one
# GPU. Skips (77) where no GPU is visible.
#   trainer_smokes_on_cuda.sh <mpirun> <train_gpt binary> <train_llama binary> <tests source dir>
set -euo pipefail
mpirun=$1
gpt=$2
llama=$3
tests=$4
nvidia-smi -L > /dev/null 2>&1 || { echo "skipped: no GPU is visible (nvidia-smi -L)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each trainer behind a wrapper that puts it on the GPU; the scripts pass their own options after.
for pair in "train_gpt:$gpt" "train_llama:$llama"; do
  printf '#!/usr/bin/env bash\nexec %q --device cuda "$@"\n' "${pair#*:}" > "$work/${pair%%:*}"
  chmod +x "$work/${pair%%:*}"
done
failed=0
run() {
  local name=$1
  shift
  local start=$SECONDS
  if "$@" > "$work/$name.log" 2>&1; then
    echo "$name: passed on cuda ($((SECONDS - start)) s)"
  else
    echo "$name: FAILED on cuda (exit $?)"
    tail -30 "$work/$name.log"
    failed=$((failed + 1))
  fi
}
run train_gpt_smoke "$tests/examples/train_gpt_smoke.sh" "$work/train_gpt" "$tests"
run train_gpt_zero_smoke "$tests/examples/train_gpt_zero_smoke.sh" "$mpirun" "$work/train_gpt"
run train_gpt_tp_smoke "$tests/examples/train_gpt_tp_smoke.sh" "$mpirun" "$work/train_gpt"
run train_gpt_pp_smoke "$tests/examples/train_gpt_pp_smoke.sh" "$mpirun" "$work/train_gpt"
run train_llama_dist_smoke "$tests/examples/train_llama_dist_smoke.sh" "$mpirun" "$work/train_llama"
[ "$failed" -eq 0 ] || { echo "$failed trainer smoke test(s) failed on cuda"; exit 1; }
echo "trainer smoke tests on cuda: all passed"
