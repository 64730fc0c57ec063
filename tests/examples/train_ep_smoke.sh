#!/usr/bin/env bash
# Expert parallelism in examples/train_llama --model mixtral on 4 ranks: --ep 2 under DDP,
# --ep 4 under ZeRO-1, --ep 2 x --cp 2 under ZeRO-2 (the load-balancing loss over the global
# batch), --ep 2 x --pp 2, --tp 2 and --ep 2 x --tp 2 (every expert split over the tensor
# group; also --sequence-parallel under ZeRO-2, --tp 2 x --cp 2 and --tp 2 x --pp 2) log one
# process's losses and clipped gradient norms on the same global batch (one unit of the
# printed digit, resume_checks.sh). A save at --ep 2 resumes at --ep 4 and in one process,
# one process's save resumes at --ep 2, a save at --tp 2 resumes in one process and one at
# --tp 4 at --tp 2: the experts reshard by their global names. Refused
# by name before training: --ep without --model mixtral, an --ep that does not divide
# --experts or the data ranks, --zero 3, --hsdp, --export-hf, and experts that cannot fit in
# memory; train_gpt refuses --ep (its GPT has no experts).
#   train_ep_smoke.sh <mpirun> <train_llama binary> <train_gpt binary>
set -euo pipefail
mpirun=$1
llama=$2
gpt=$3
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
# shellcheck source=tests/examples/resume_checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/resume_checks.sh"
run4() { "$mpirun" --oversubscribe -np 4 "$llama" "$@"; }
# "step  4/12 | loss X" (the log pads the step) as "step 4/12 | loss X", for every logged step.
losses() { grep -o "^step *[0-9]*/12 | loss [0-9.]*" "$1" | tr -s ' '; }
# The clipped steps' gradient norms, printed as the losses are.
norms() {
  python3 -c 'import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if "grad_norm" in r: print("step %d/12 | norm %.4f" % (r["step"], r["grad_norm"]))' "$1"
}
expect_same() {  # expect_same REFERENCE RUN WHAT: RUN logged REFERENCE's losses and gradient norms
  local kind ext
  for kind in losses norms; do
    ext=log
    [ "$kind" = losses ] || ext=jsonl
    same_losses "$("$kind" "$work/$1.$ext")" "$("$kind" "$work/$2.$ext")" \
      || { paste <("$kind" "$work/$1.$ext") <("$kind" "$work/$2.$ext"); fail "$3: $kind differ from one process"; }
  done
}
expect_refused() {  # expect_refused MESSAGE RANKS ARGS...: the run fails, saying MESSAGE
  local message=$1 ranks=$2
  shift 2
  if "$mpirun" --oversubscribe -np "$ranks" "$llama" "$@" > "$work/bad.log" 2>&1; then fail "accepted: $*"; fi
  grep -q -- "$message" "$work/bad.log" || { cat "$work/bad.log"; fail "no clear error for: $*"; }
}

args=(--model mixtral --experts 4 --experts-top-k 2 --layers 2 --width 32 --heads 2 --kv-heads 1 --intermediate 32
      --context 32 --global-batch 8 --warmup 2 --lr 3e-3 --steps 12 --log-every 4 --eval-every 6 --eval-windows 16
      --samples 1 --sample-tokens 8 --clip 1)
"$llama" "${args[@]}" --aux-loss-coef 0.01 --tokens-out "$work/corpus.tokens" --metrics "$work/one.jsonl" \
  > "$work/one.log"
args+=(--data "$work/corpus.tokens")
balanced=("${args[@]}" --aux-loss-coef 0.01)
run4 "${balanced[@]}" --ep 2 --metrics "$work/ep2.jsonl" > "$work/ep2.log"
grep -q "experts sharded over 2 expert-parallel ranks" "$work/ep2.log" || { cat "$work/ep2.log"; fail "--ep banner"; }
grep -q "aux loss coefficient 0.01 (over the global batch)" "$work/ep2.log" || fail "global balancing banner"
expect_same one ep2 "--ep 2 (DDP)"
run4 "${balanced[@]}" --ep 4 --zero 1 --metrics "$work/ep4.jsonl" > "$work/ep4.log"
expect_same one ep4 "--ep 4 --zero 1"
run4 "${balanced[@]}" --ep 2 --cp 2 --zero 2 --metrics "$work/ep_cp.jsonl" > "$work/ep_cp.log"
expect_same one ep_cp "--ep 2 --cp 2 --zero 2"
# A pipeline refuses auxiliary losses: --aux-loss-coef 0 there, against its own one process.
"$llama" "${args[@]}" --aux-loss-coef 0 --metrics "$work/one_plain.jsonl" > "$work/one_plain.log"
run4 "${args[@]}" --aux-loss-coef 0 --ep 2 --pp 2 --micro-batches 2 --zero 1 --metrics "$work/ep_pp.jsonl" \
  > "$work/ep_pp.log"
expect_same one_plain ep_pp "--ep 2 --pp 2 --zero 1"

# Tensor parallelism splits every expert (w1, w3 column-, w2 row-parallel), the router whole;
# its degree divides the heads: 2 key-value heads, against their own one process.
split_heads=("${balanced[@]}")
for i in "${!split_heads[@]}"; do [ "${split_heads[$i]}" != --kv-heads ] || split_heads[i + 1]=2; done
"$llama" "${split_heads[@]}" --metrics "$work/one_kv2.jsonl" > "$work/one_kv2.log"
"$mpirun" --oversubscribe -np 2 "$llama" "${split_heads[@]}" --tp 2 --metrics "$work/tp2.jsonl" \
  --export-hf "$work/hf_tp2" > "$work/tp2.log"
expect_same one_kv2 tp2 "--tp 2"
# --export-hf gathers each expert's parts: 2 layers x 4 experts x (w1, w2, w3), each whole.
python3 - "$work/hf_tp2/model.safetensors" <<'PY' || fail "--tp 2 --export-hf: expert tensors not whole"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
experts = {k: v["shape"] for k, v in header.items() if ".experts." in k}
assert len(experts) == 24 and all(s == [32, 32] for s in experts.values()), experts
PY
run4 "${split_heads[@]}" --ep 2 --tp 2 --zero 1 --metrics "$work/ep_tp.jsonl" > "$work/ep_tp.log"
expect_same one_kv2 ep_tp "--ep 2 --tp 2 --zero 1"
# Sequence parallel: every tensor rank gathers the sequence for the router and the experts.
run4 "${split_heads[@]}" --ep 2 --tp 2 --sequence-parallel --zero 2 --metrics "$work/ep_sp.jsonl" > "$work/ep_sp.log"
grep -q "(sequence parallel)" "$work/ep_sp.log" || { cat "$work/ep_sp.log"; fail "--sequence-parallel banner"; }
expect_same one_kv2 ep_sp "--ep 2 --tp 2 --sequence-parallel --zero 2"
# ... beside context parallelism, and (without auxiliary losses) a pipeline.
run4 "${split_heads[@]}" --tp 2 --cp 2 --metrics "$work/tp_cp.jsonl" > "$work/tp_cp.log"
expect_same one_kv2 tp_cp "--tp 2 --cp 2"
plain_heads=("${split_heads[@]}" --aux-loss-coef 0)
"$llama" "${plain_heads[@]}" --metrics "$work/one_kv2_plain.jsonl" > "$work/one_kv2_plain.log"
run4 "${plain_heads[@]}" --tp 2 --pp 2 --micro-batches 2 --metrics "$work/tp_pp.jsonl" > "$work/tp_pp.log"
expect_same one_kv2_plain tp_pp "--tp 2 --pp 2"

# Checkpoints: the experts are saved under their global names by the ranks that hold them.
run4 "${balanced[@]}" --ep 2 --metrics "" --save "$work/ep2_ckpt" --stop-at 6 > "$work/ep2_first.log"
run4 "${balanced[@]}" --ep 4 --zero 1 --metrics "" --resume "$work/ep2_ckpt" > "$work/ep2_as_ep4.log"
"$llama" "${balanced[@]}" --metrics "" --resume "$work/ep2_ckpt" > "$work/ep2_as_one.log"
"$llama" "${balanced[@]}" --metrics "" --save "$work/one_ckpt" --stop-at 6 > "$work/one_first.log"
run4 "${balanced[@]}" --ep 2 --metrics "" --resume "$work/one_ckpt" > "$work/one_as_ep2.log"
expect_resumed_like "$work/one.log" "$work/ep2_as_ep4.log" "$work/ep2_as_one.log" "$work/one_as_ep2.log"
# ... and whole, from their tensor-parallel parts: a save at --tp 2 resumes in one process.
"$mpirun" --oversubscribe -np 2 "$llama" "${split_heads[@]}" --tp 2 --metrics "" --save "$work/tp2_ckpt" \
  --stop-at 6 > "$work/tp2_first.log"
"$llama" "${split_heads[@]}" --metrics "" --resume "$work/tp2_ckpt" > "$work/tp2_as_one.log"
expect_resumed_like "$work/one_kv2.log" "$work/tp2_as_one.log"
# Between two tensor-parallel degrees: 4 heads, a save at --tp 4 resumes at --tp 2.
four_heads=("${split_heads[@]}")
for i in "${!four_heads[@]}"; do
  case "${four_heads[$i]}" in --heads | --kv-heads) four_heads[i + 1]=4 ;; esac
done
"$llama" "${four_heads[@]}" --metrics "" > "$work/one_kv4.log"
run4 "${four_heads[@]}" --tp 4 --metrics "" --save "$work/tp4_ckpt" --stop-at 6 > "$work/tp4_first.log"
"$mpirun" --oversubscribe -np 2 "$llama" "${four_heads[@]}" --tp 2 --metrics "" --resume "$work/tp4_ckpt" \
  > "$work/tp4_as_tp2.log"
expect_resumed_like "$work/one_kv4.log" "$work/tp4_as_tp2.log"

# Refusals, before any training.
short=("${args[@]}" --steps 2 --warmup 1 --samples 0 --metrics "")
expect_refused "--ep 2 shards a mixture of experts: it takes effect with --model mixtral" 2 "${short[@]}" --model llama --ep 2
expect_refused "--ep 3 must divide --experts 4" 3 "${short[@]}" --ep 3
expect_refused "--ep 3 does not divide the 4 data x context ranks" 4 "${short[@]}" --experts 6 --ep 3
expect_refused "--ep 2 runs beside DDP or --zero 1 or 2, not --zero 3" 2 "${short[@]}" --ep 2 --zero 3
expect_refused "--ep 2 cannot run with --hsdp" 2 "${short[@]}" --ep 2 --zero 1 --hsdp
expect_refused "--export-hf with --ep 2" 2 "${short[@]}" --ep 2 --export-hf "$work/hf"
expect_refused "expert parallelism: 4096 experts per rank (num_experts 4096 / ep 1) in each of 2 layers need about" 1 \
  "${short[@]}" --experts 4096 --width 1024 --intermediate 4096
if "$gpt" --steps 1 --warmup 0 --ep 2 > "$work/bad.log" 2>&1; then fail "train_gpt accepted --ep 2"; fi
grep -q -- "--ep 2 shards a mixture of experts: train_gpt's GPT has none" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "train_gpt --ep: no clear error"; }
echo "train_llama expert parallelism smoke test passed"
