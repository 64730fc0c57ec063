#!/usr/bin/env bash
# HSDP beside tensor and pipeline parallelism in examples/train_gpt and train_llama, on 8 ranks:
# ZeRO-3 in shard groups of 2 data ranks x 2 replicas x --tp 2 (with and without
# --sequence-parallel, and with --cp 2), and ZeRO-1/2 HSDP x --pp 2 (with --tp 2), log one
# process's losses and clipped gradient norms on the same global batch (one unit of the
# printed digit, resume_checks.sh). A save under HSDP+TP resumes there and in one process, one process's save
# resumes under HSDP+TP, and a save under HSDP+PP+TP resumes in one process; the first replica
# alone writes the shards. Refused by name: --zero 3 with --pp, a shard size that does not
# divide the data ranks of the mesh, one that does not match one stage's nodes, and --hsdp
# where the nodes would give the stages different shard sizes.
#   train_hsdp_mesh_smoke.sh <mpirun> <train_gpt binary> <train_llama binary>
set -euo pipefail
mpirun=$1
gpt=$2
llama=$3
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
# shellcheck source=tests/examples/resume_checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/resume_checks.sh"
run8() { "$mpirun" --oversubscribe -np 8 "$@"; }
# "step  4/12 | loss X" (the log pads the step) as "step 4/12 | loss X", for every logged step.
losses() { grep -o "^step *[0-9]*/12 | loss [0-9.]*" "$1" | tr -s ' '; }
# The clipped steps' gradient norms (--clip 1: the runs' norms are above it), printed as the
# losses are: "step N/12 | norm X.XXXX", compared within one unit of the 4th decimal too.
norms() {
  python3 -c 'import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if "grad_norm" in r: print("step %d/12 | norm %.4f" % (r["step"], r["grad_norm"]))' "$1"
}
# same_prefix KIND REFERENCE LOG WHAT: LOG's steps (from step 1, perhaps stopped early) logged
# REFERENCE's losses (KIND losses, from REFERENCE.log) or gradient norms (norms, .jsonl).
same_prefix() {
  local ext=log
  [ "$1" = losses ] || ext=jsonl
  local mine reference
  mine=$("$1" "$work/$3.$ext")
  reference=$("$1" "$work/$2.$ext" | awk -v n="$(printf '%s\n' "$mine" | wc -l)" 'NR <= n')
  same_losses "$reference" "$mine" || { paste <(printf '%s\n' "$reference") <(printf '%s\n' "$mine"); fail "$4: $1 differ from $2"; }
}
expect_same() {  # expect_same REFERENCE LOG WHAT: the logged losses and gradient norms
  same_prefix losses "$@"
  same_prefix norms "$@"
}
expect_refused() {  # expect_refused MESSAGE MPIRUN_ARGS...: the run fails, saying MESSAGE
  local message=$1
  shift
  if "$mpirun" --oversubscribe "$@" > "$work/bad.log" 2>&1; then fail "accepted: $*"; fi
  grep -q -- "$message" "$work/bad.log" || { cat "$work/bad.log"; fail "no clear error for: $*"; }
}

common=(--steps 12 --layers 2 --width 32 --heads 4 --digits 3 --warmup 2 --log-every 4 --eval-examples 20
        --global-batch 8 --clip 1)
"$gpt" "${common[@]}" --metrics "$work/one.jsonl" > "$work/one.log"
hsdp_tp=(--tp 2 --zero 3 --shard-size 2)
run8 "$gpt" "${common[@]}" "${hsdp_tp[@]}" --sequence-parallel --metrics "$work/tp_sp.jsonl" > "$work/tp_sp.log"
grep -q "HSDP: ZeRO-3 sharded over 2 data ranks .* 2 replicas" "$work/tp_sp.log" \
  || { cat "$work/tp_sp.log"; fail "HSDP+TP banner"; }
expect_same one tp_sp "HSDP x --tp 2 --sequence-parallel"
# The shard groups take data x context ranks: 1 data x 2 context ranks each, 2 replicas.
run8 "$gpt" "${common[@]}" "${hsdp_tp[@]}" --cp 2 --sequence-parallel --metrics "$work/cp_tp.jsonl" > "$work/cp_tp.log"
grep -q "HSDP: ZeRO-3 sharded over 2 data ranks (group 'dp_cp(.* 2 replicas" "$work/cp_tp.log" \
  || { cat "$work/cp_tp.log"; fail "HSDP+CP+TP banner"; }
expect_same one cp_tp "HSDP x --cp 2 x --tp 2"
run8 "$gpt" "${common[@]}" --pp 2 --micro-batches 2 --zero 2 --shard-size 2 --metrics "$work/pp.jsonl" \
  > "$work/pp.log"
grep -q "HSDP: ZeRO-2 sharded over 2 data ranks .* 2 replicas" "$work/pp.log" || { cat "$work/pp.log"; fail "HSDP+PP banner"; }
expect_same one pp "ZeRO-2 HSDP x --pp 2"

# Checkpoints: HSDP+TP (without sequence parallelism) to HSDP+TP and one process, and back.
run8 "$gpt" "${common[@]}" "${hsdp_tp[@]}" --metrics "$work/tp_first.jsonl" --save "$work/ckpt" --stop-at 6 \
  > "$work/tp_first.log"
expect_same one tp_first "HSDP x --tp 2 (first 6 steps)"
# World ranks 4-7 are the second replica (data ranks 2-3 of each tensor rank): they write nothing.
index=$(ls "$work"/ckpt/step-6-*/index.json)
python3 -c 'import json, sys
files = {p["file"] for t in json.load(open(sys.argv[1]))["tensors"].values() for p in t["pieces"]}
sys.exit(0 if files == {"shard_%d.safetensors" % r for r in range(4)} else "written by " + str(sorted(files)))' "$index" \
  || fail "HSDP x --tp 2: not the first replica alone wrote the checkpoint"
run8 "$gpt" "${common[@]}" "${hsdp_tp[@]}" --metrics "" --resume "$work/ckpt" > "$work/tp_resumed.log"
"$gpt" "${common[@]}" --metrics "" --resume "$work/ckpt" > "$work/tp_as_one.log"
"$gpt" "${common[@]}" --metrics "" --save "$work/one_ckpt" --stop-at 6 > "$work/one_first.log"
run8 "$gpt" "${common[@]}" "${hsdp_tp[@]}" --metrics "" --resume "$work/one_ckpt" > "$work/one_as_tp.log"
expect_resumed_like "$work/one.log" "$work/tp_resumed.log" "$work/tp_as_one.log" "$work/one_as_tp.log"
# HSDP (shard groups of 1, 2 replicas) x --pp 2 x --tp 2 to one process.
run8 "$gpt" "${common[@]}" --pp 2 --tp 2 --micro-batches 2 --zero 1 --shard-size 1 --metrics "" \
  --save "$work/pp_ckpt" --stop-at 6 > "$work/pp_tp_first.log"
"$gpt" "${common[@]}" --metrics "" --resume "$work/pp_ckpt" > "$work/pp_tp_as_one.log"
expect_resumed_like "$work/one.log" "$work/pp_tp_as_one.log"

# LLaMA (grouped-query heads split by --tp, RMSNorm weights replicated over the tensor ranks).
llama_args=(--layers 2 --width 32 --heads 2 --kv-heads 2 --intermediate 64 --global-batch 8 --warmup 2 --lr 3e-3
            --steps 12 --log-every 4 --eval-every 6 --eval-windows 16 --samples 1 --sample-tokens 8 --context 24
            --clip 1)
"$llama" "${llama_args[@]}" --tokens-out "$work/corpus.tokens" --metrics "$work/llama_one.jsonl" > "$work/llama_one.log"
llama_args+=(--data "$work/corpus.tokens")
run8 "$llama" "${llama_args[@]}" "${hsdp_tp[@]}" --sequence-parallel --metrics "$work/llama_tp.jsonl" \
  > "$work/llama_tp.log"
expect_same llama_one llama_tp "train_llama HSDP x --tp 2 --sequence-parallel"
run8 "$llama" "${llama_args[@]}" --pp 2 --micro-batches 2 --zero 2 --shard-size 2 --metrics "$work/llama_pp.jsonl" \
  > "$work/llama_pp.log"
expect_same llama_one llama_pp "train_llama ZeRO-2 HSDP x --pp 2"

# Refusals, naming the options and the rule.
short=(--steps 2 --layers 2 --width 32 --heads 4 --digits 2 --warmup 1 --eval-examples 4 --metrics "" --global-batch 8)
expect_refused "--zero 3 cannot run with --pp .* (--hsdp / --shard-size then shard ZeRO-1/2's states" \
  -np 8 "$gpt" "${short[@]}" --pp 2 --zero 3 --shard-size 2
expect_refused "--shard-size 3: shard size 3 does not divide the data group's 4 ranks (8 ranks / (--pp 1 x --tp 2)" \
  -np 8 "$gpt" "${short[@]}" --tp 2 --zero 3 --shard-size 3
# Pretend nodes of 3 ranks: stage 0's data ranks 2-3 (world ranks 2, 3) straddle two nodes.
expect_refused "--shard-size 2 with --pp 2 (HSDP over the 4 data ranks .*shard size 2 does not match the nodes" \
  -np 8 -x STRATA_TEST_NODE_SIZE=3 "$gpt" "${short[@]}" --pp 2 --micro-batches 2 --zero 2 --shard-size 2
# Uneven nodes (world ranks 0-3 on one, 4-5 and 6-7 on two more): --hsdp would shard stage 0
# over 4 ranks and stage 1 over 2.
pp_hsdp=("$gpt" "${short[@]}" --pp 2 --micro-batches 2 --zero 2 --hsdp)
expect_refused "--hsdp with --pp 2: a shard group .* would hold 4 ranks for world rank 0 but 2 for world rank 4" \
  -np 4 -x STRATA_TEST_NODE_SIZE=4 "${pp_hsdp[@]}" : -np 4 -x STRATA_TEST_NODE_SIZE=2 "${pp_hsdp[@]}"
echo "train_gpt/train_llama HSDP x TP x PP smoke test passed"
