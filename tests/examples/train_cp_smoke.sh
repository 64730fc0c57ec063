#!/usr/bin/env bash
# examples/train_gpt and train_llama with --cp: context parallelism (ring and all-gather, alone
# and beside data parallelism with ZeRO, tensor parallelism with sequence parallelism, and a
# pipeline) trains like one process on the same global batch: the logged losses agree to within
# one unit of the printed digits (resume_checks.sh, same_losses). A save under --cp resumes
# under --cp and in one process; bad degrees and sequence lengths are refused by name.
#   train_cp_smoke.sh <mpirun> <train_gpt binary> <train_llama binary>
set -euo pipefail
mpirun=$1
gpt=$2
llama=$3
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
# shellcheck source=tests/examples/resume_checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/resume_checks.sh"
run() {  # run NP ARGS...: mpirun with NP ranks
  local np=$1
  shift
  "$mpirun" --oversubscribe -np "$np" "$@"
}
losses() { grep -o "^step *[0-9]*/12 | loss [0-9.]*" "$1" | tr -s " "; }
expect_same() {  # expect_same REFERENCE_LOG LOG WHAT
  same_losses "$(losses "$1")" "$(losses "$2")" || { paste <(losses "$1") <(losses "$2"); fail "$3"; }
}

# GPT: 3-digit sums are 12 tokens, 4 chunks of 3 at --cp 2; --context 16 pads them for --cp 4.
common=(--steps 12 --layers 2 --width 32 --heads 4 --digits 3 --warmup 2 --log-every 4 --eval-examples 20
        --metrics "")
"$gpt" "${common[@]}" --batch 4 > "$work/one.log"
run 2 "$gpt" "${common[@]}" --batch 4 --cp 2 > "$work/cp2.log"
grep -q "batch 4 x 1 rank(s) (data) x 2 context-parallel ranks (ring)" "$work/cp2.log" \
  || { cat "$work/cp2.log"; fail "CP banner"; }
expect_same "$work/one.log" "$work/cp2.log" "--cp 2 differs from one process"
run 4 "$gpt" "${common[@]}" --global-batch 4 --cp 2 --tp 2 --sequence-parallel > "$work/cp2tp2.log"
expect_same "$work/one.log" "$work/cp2tp2.log" "--cp 2 --tp 2 --sequence-parallel differs from one process"
run 4 "$gpt" "${common[@]}" --global-batch 4 --cp 2 --pp 2 --micro-batches 2 > "$work/cp2pp2.log"
expect_same "$work/one.log" "$work/cp2pp2.log" "--cp 2 --pp 2 differs from one process"
"$gpt" "${common[@]}" --batch 4 --context 16 > "$work/one16.log"
run 4 "$gpt" "${common[@]}" --batch 4 --context 16 --cp 4 --cp-attention all-gather > "$work/cp4.log"
expect_same "$work/one16.log" "$work/cp4.log" "--cp 4 (all-gather) differs from one process"
expect_same "$work/one.log" "$work/one16.log" "--context 16 (padding) changed the losses"

# dp=2 x cp=2 under ZeRO-3 equals 2-rank DDP; a save under dp=2 x cp=2 with ZeRO-2 resumes
# there and in one process (ZeRO shards over the 4 data x context ranks).
run 2 "$gpt" "${common[@]}" --batch 4 > "$work/ddp.log"
run 4 "$gpt" "${common[@]}" --batch 4 --cp 2 --zero 3 > "$work/dpcp_z3.log"
expect_same "$work/ddp.log" "$work/dpcp_z3.log" "dp=2 x cp=2 ZeRO-3 differs from DDP"
run 4 "$gpt" "${common[@]}" --batch 4 --cp 2 --zero 2 > "$work/dpcp.log"
run 4 "$gpt" "${common[@]}" --batch 4 --cp 2 --zero 2 --save "$work/ckpt" --stop-at 6 > "$work/dpcp_first.log"
run 4 "$gpt" "${common[@]}" --batch 4 --cp 2 --zero 2 --resume "$work/ckpt" > "$work/dpcp_resumed.log"
"$gpt" "${common[@]}" --batch 8 --resume "$work/ckpt" > "$work/dpcp_as_one.log"
expect_resumed_like "$work/dpcp.log" "$work/dpcp_resumed.log" "$work/dpcp_as_one.log"

# LLaMA (rotary positions, grouped-query heads): --cp 2 (ring) and 4 (all-gather) equal one process.
llama_args=(--layers 2 --width 32 --heads 2 --kv-heads 1 --intermediate 64 --batch 4 --warmup 2 --lr 3e-3
            --steps 12 --log-every 4 --eval-every 6 --eval-windows 16 --samples 1 --sample-tokens 8 --metrics ""
            --tokens-out "$work/corpus.tokens" --context 24)
"$llama" "${llama_args[@]}" > "$work/llama_one.log"
run 2 "$llama" "${llama_args[@]}" --data "$work/corpus.tokens" --cp 2 > "$work/llama_cp2.log"
expect_same "$work/llama_one.log" "$work/llama_cp2.log" "train_llama --cp 2 differs from one process"
run 4 "$llama" "${llama_args[@]}" --data "$work/corpus.tokens" --cp 4 --cp-attention all-gather > "$work/llama_cp4.log"
expect_same "$work/llama_one.log" "$work/llama_cp4.log" "train_llama --cp 4 (all-gather) differs from one process"

# Bad input, before any training.
if run 2 "$gpt" "${common[@]}" --cp 2 --context 14 > "$work/bad.log" 2>&1; then fail "--cp 2 --context 14 ran"; fi
grep -q -- "--cp 2 splits each sequence into 4 load-balanced chunks .*: the sequence length 14 must be a multiple of 4" \
  "$work/bad.log" || { cat "$work/bad.log"; fail "--cp 2 sequence message"; }
if run 4 "$gpt" "${common[@]}" --cp 3 > "$work/bad.log" 2>&1; then fail "--cp 3 on 4 ranks ran"; fi
grep -q -- "--cp 3 does not divide the 4 ranks" "$work/bad.log" || { cat "$work/bad.log"; fail "--cp divide message"; }
if "$llama" "${llama_args[@]}" --context 30 --cp 2 > "$work/bad.log" 2>&1; then fail "--context 30 --cp 2 ran"; fi
grep -q -- "the sequence length 30 must be a multiple of 4; change --context" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "--context message"; }
echo "train_gpt/train_llama context-parallel smoke test passed"
