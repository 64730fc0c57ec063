#!/usr/bin/env bash
# Runs on the GPU machine: unpacks a bundle made by bundle.sh and runs the GPU checks (the
# gpu-labelled tests, compute-sanitizer over them, the fused AdamW benchmark), printing each
# check's output and exit status (each limited to LIMIT seconds, default 150). Exits
# non-zero if any check failed. SANITIZERS=0 leaves out the compute-sanitizer passes (the
# longest part); GPT2_BENCH=1 adds the GPT-2 comparison with PyTorch.
#   scripts/gpu/run_checks.sh BUNDLE.tar.xz [LOG]
set -uo pipefail
bundle=${1:?usage: run_checks.sh BUNDLE.tar.xz [LOG]}
log=${2:-/dev/null}
dest=/tmp/strata-gpu
rm -rf "$dest" && mkdir -p "$dest"
xz -dc "$bundle" | tar -C "$dest" -xf - || { echo "run_checks.sh: cannot unpack $bundle"; exit 2; }
# An Open MPI 4 of this machine's own is used whole (libmpi.so.40 is one ABI across 4.x;
# its components need its own libraries); otherwise the bundled one, unpacked at its own
# paths.
mpi_libs=$dest/strata/lib-mpi
if command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q 'Open MPI.* 4\.'; then
  echo "using this machine's $(mpirun --version | head -1) at $(command -v mpirun)"
  mpi_libs=""
else
  (cd "$dest/root" && find . -type f -o -type l | while read -r f; do
    [ -e "/$f" ] || { mkdir -p "/$(dirname "$f")" && cp -P "$f" "/$f"; }; done)
fi

# CUDA runtime, cuBLAS, NCCL, cuDNN (and NVRTC, which cuDNN's run-time compiled engines load)
# from this machine (its toolkit, or the Python wheels).
cuda_dirs=""
for lib in libcudart.so.13 libnccl.so.2 libcublasLt.so.13 libcublas.so.13 libcudnn.so.9 libnvrtc.so.13; do
  d=$(dirname "$(find /usr/local /usr/lib /opt -name "$lib" 2>/dev/null | head -1)" 2>/dev/null)
  [ -n "$d" ] && [ "$d" != . ] && cuda_dirs="$cuda_dirs:$d"
done
export LD_LIBRARY_PATH="$dest/strata/lib${mpi_libs:+:$mpi_libs}$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=8
bin=$dest/strata/bin
failed=0
check() {
  local name=$1; shift
  echo; echo "==== $name: $*"
  local start=$SECONDS
  timeout "${LIMIT:-150}" "$@" 2>&1 | tail -n "${TAIL:-40}"
  local rc=${PIPESTATUS[0]}
  echo "==== $name: exit $rc after $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
exec > >(tee "$log") 2>&1
echo "GPU: $(nvidia-smi -L 2>&1 | head -2)"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "mpirun: $(command -v mpirun) $(mpirun --version 2>&1 | head -1)"
check gpu_tests "$bin/strata_gpu_tests"
[ -x "$bin/gpu_nccl" ] && check gpu_nccl_world1 "$bin/gpu_nccl"
[ -x "$bin/gpu_nccl_failure" ] && check gpu_nccl_failure_world1 "$bin/gpu_nccl_failure"
# World size 2 needs two GPUs (the test skips on one).
[ -x "$bin/gpu_nccl_failure_np2" ] && command -v mpirun >/dev/null &&
  check gpu_nccl_failure_np2 mpirun --oversubscribe -np 2 -x LD_LIBRARY_PATH "$bin/gpu_nccl_failure_np2"
[ -x "$bin/gpu_mpi_cuda" ] && command -v mpirun >/dev/null &&
  check gpu_mpi_cuda_np2 mpirun --oversubscribe -np 2 -x LD_LIBRARY_PATH "$bin/gpu_mpi_cuda"
for t in gpu_ddp gpu_zero gpu_tp gpu_expert_parallel; do
  [ -x "$bin/$t" ] && command -v mpirun >/dev/null &&
    check "${t}_np2" mpirun --oversubscribe -np 2 -x LD_LIBRARY_PATH "$bin/$t"
done
# The example trainers on the GPU: a handful of small steps, the progress lines printed (loss,
# tokens/s, peak GPU memory); tests/gpu/train_gpt_cuda.sh checks the loss falls and the errors.
if [ -x "$bin/train_gpt" ] && command -v mpirun >/dev/null; then
  check train_gpt_cuda_np2 mpirun --oversubscribe -np 2 -x LD_LIBRARY_PATH "$bin/train_gpt" --device cuda \
    --autocast bf16 --steps 40 --log-every 10 --layers 2 --width 64 --heads 4 --digits 2 --batch 32 --warmup 5 \
    --lr 3e-3 --eval-examples 50 --metrics ""
  # A batch that cannot fit: the run must fail at step 1, naming the bytes, and not hang.
  # shellcheck disable=SC2016
  check train_gpt_cuda_oom bash -c 'out=$("$0" "$@" 2>&1); rc=$?; echo "$out"; echo "exit $rc (expected non-zero)";
    [ "$rc" -ne 0 ] && grep -q "step 1/2 failed: .*out of memory on cuda" <<< "$out"' "$bin/train_gpt" \
    --device cuda --steps 2 --warmup 0 --batch 1000000 --layers 2 --width 64 --heads 4 --digits 2 --metrics ""
fi
[ -x "$bin/train_llama" ] && [ -d /usr/share/common-licenses ] &&
  check train_llama_cuda_np1 "$bin/train_llama" --device cuda --autocast fp16 --steps 40 --log-every 10 \
    --layers 2 --width 64 --heads 4 --kv-heads 2 --intermediate 128 --context 64 --batch 16 --warmup 5 --lr 3e-3 \
    --eval-windows 64 --samples 1 --sample-tokens 32 --tokens-out /tmp/strata-gpu/corpus.tokens --metrics ""
# The trainers' CPU smoke scripts (save/resume/export, --zero 1-3, --tp, --pp) with every run
# on the GPU; they live in the source tree beside this script.
tests_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tests" 2>/dev/null && pwd)
[ -x "$bin/train_gpt" ] && [ -x "$bin/train_llama" ] && [ -n "$tests_dir" ] && command -v mpirun >/dev/null &&
  LIMIT=300 check trainer_smokes_on_cuda "$tests_dir/gpu/trainer_smokes_on_cuda.sh" mpirun "$bin/train_gpt" \
    "$bin/train_llama" "$tests_dir"
# Attention's host and device time per call, fused beside composed (issue 28: host cost per sequence).
[ -x "$bin/bench_attention_gpu" ] && check attention_bench "$bin/bench_attention_gpu" --batches 1,8 --iters 5
# One GPT-2 124M step through the op profiler (issue 28 item 5): the table sorted by device time.
[ -x "$bin/bench_gpt2_gpu" ] && TAIL=60 check gpt2_profile "$bin/bench_gpt2_gpu" --batch 8 --steps 3 --warmup 2 --profile
check fused_adam_bench "$bin/bench_fused_adam" --device cuda --steps 50
check fused_adam_bench_bf16 "$bin/bench_fused_adam" --device cuda --steps 50 --low-copy
if [ "${SANITIZERS:-1}" = 0 ]; then
  echo "compute-sanitizer: skipped (SANITIZERS=0)"
elif command -v compute-sanitizer >/dev/null; then
  # The out-of-memory test's failing cudaMalloc calls are what it tests; memcheck reports
  # every failed API call as an error, so that one test runs outside it.
  for tool in memcheck racecheck synccheck; do
    TAIL=8 check "sanitizer_$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/strata_gpu_tests" \
      --gtest_filter='-*OutOfMemory*'
  done
else
  echo "compute-sanitizer not found"; failed=$((failed + 1))
fi
# GPT2_BENCH=1: GPT-2 124M training, strata beside PyTorch (torch.compile) at the batch
# strata found to fit, when this machine's python3 has torch with CUDA.
if [ "${GPT2_BENCH:-0}" = 1 ] && [ -x "$bin/bench_gpt2_gpu" ]; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$gpu_name" in *A100*) peak=312 ;; *) peak=989 ;; esac  # dense bf16 TFLOP/s (H100/H200: 989)
  echo; echo "==== gpt2: $gpu_name, peak $peak TFLOP/s"
  line=$(timeout "${LIMIT:-300}" "$bin/bench_gpt2_gpu" --peak-tflops "$peak" 2>&1 | tail -1)
  echo "$line"
  batch=$(echo "$line" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
  if [ -n "$batch" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    timeout "${LIMIT:-300}" python3 "$bin/gpt2_gpu_torch.py" --batch "$batch" --peak-tflops "$peak" 2>&1 | tail -1
  else
    echo "torch peer: skipped (no batch from strata, or no python3 torch with CUDA here)"
  fi
fi
echo; echo "run_checks.sh: $failed check(s) failed"
exit $((failed > 0))
