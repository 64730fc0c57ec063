#!/usr/bin/env bash
# examples/train_llama under `mpirun -np 2`: DDP and ZeRO stages 1-3 log the same losses
# (training and validation, to the last digit of the JSONL) with rank 0 alone printing, the
# samples come out once, and bf16 parameters under ZeRO-3 learn as well. Save at step 6 and
# resume equals the uninterrupted run (exported weights, byte for byte) under DDP, ZeRO-3 bf16
# and --tp 2; --sequence-parallel; the saves load into other layouts; --init-from,
# --global-batch and --timeline; --pp 2 under each schedule equals one process.
#   train_llama_dist_smoke.sh <mpirun> <train_llama binary>
set -euo pipefail
mpirun=$1
bin=$2
# shellcheck source=tests/examples/train_llama_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_llama_setup.sh"
# shellcheck source=tests/examples/resume_checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/resume_checks.sh"
run() { "$mpirun" --oversubscribe -np 2 "$bin" "$@"; }
common=(--layers 2 --width 32 --heads 2 --kv-heads 1 --intermediate 64 --context 32 --batch 4 --warmup 3
        --lr 3e-3 --steps 30 --log-every 10 --eval-every 15 --eval-windows 32 --samples 1 --sample-tokens 8
        --tokens-out "$work/corpus.tokens")
# The loss values of a JSONL file (training and validation, in file order), one per line.
losses() { grep -o '"\(val_\)\?loss":[^,}]*' "$1"; }
# Fails unless the mean training loss of the last 5 steps is below 0.8 x that of the first 5.
check_learns() {
  grep -o '"loss":[^,}]*' "$1" | cut -d: -f2 | awk -v what="$2" '
    { loss[NR] = $1 }
    END { for (i = 1; i <= 5; ++i) { a += loss[i] / 5; b += loss[NR - 5 + i] / 5 }
          if (NR != 30 || !(b < 0.8 * a)) { printf "FAIL: %s: %d steps, loss %.3f -> %.3f\n", what, NR, a, b; exit 1 }
          printf "%s: loss %.3f -> %.3f\n", what, a, b }'
}

run "${common[@]}" --metrics "$work/ddp.jsonl" > "$work/ddp.log"
grep -q "batch 4 x 2 rank(s); DDP" "$work/ddp.log" || { cat "$work/ddp.log"; fail "2-rank DDP banner missing"; }
[ "$(grep -c "^step 30/30 | loss" "$work/ddp.log")" -eq 1 ] || { cat "$work/ddp.log"; fail "expected one final progress line"; }
[ "$(grep -c "^sample 1/1 " "$work/ddp.log")" -eq 1 ] || { cat "$work/ddp.log"; fail "expected one sample (rank 0 only)"; }
[ "$(losses "$work/ddp.jsonl" | wc -l)" -eq 33 ] || fail "expected 30 training and 3 validation losses"
check_learns "$work/ddp.jsonl" DDP
for stage in 1 2 3; do
  run "${common[@]}" --zero "$stage" --metrics "$work/zero$stage.jsonl" > "$work/zero$stage.log"
  grep -q "ZeRO stage $stage" "$work/zero$stage.log" || { cat "$work/zero$stage.log"; fail "stage $stage banner missing"; }
  [ "$(grep -c "^sample 1/1 " "$work/zero$stage.log")" -eq 1 ] || fail "stage $stage: expected one sample"
  cmp <(losses "$work/ddp.jsonl") <(losses "$work/zero$stage.jsonl") \
    || fail "--zero $stage logged other losses than DDP"
done
# HSDP on 2 ranks: shard groups of 1 replicated twice, and --hsdp (one node: both ranks shard).
for hsdp in "--shard-size 1" "--hsdp"; do
  # shellcheck disable=SC2086  # the flags split into words
  run "${common[@]}" --zero 3 $hsdp --metrics "$work/hsdp.jsonl" > "$work/hsdp.log"
  grep -q "HSDP: ZeRO-3 sharded over" "$work/hsdp.log" || { cat "$work/hsdp.log"; fail "$hsdp: HSDP banner missing"; }
  cmp <(losses "$work/ddp.jsonl") <(losses "$work/hsdp.jsonl") || fail "--zero 3 $hsdp logged other losses than DDP"
done
run "${common[@]}" --zero 3 --param-dtype bf16 --metrics "$work/bf16.jsonl" > "$work/bf16.log"
grep -q "parameters bf16 (fp32 master)" "$work/bf16.log" || { cat "$work/bf16.log"; fail "bf16 banner missing"; }
check_learns "$work/bf16.jsonl" "ZeRO-3 bf16"

# Save at step 6, resume in a new 2-rank job: the exported weights are the uninterrupted
# run's, byte for byte, under DDP, ZeRO-3 with bf16 parameters and tensor parallelism.
short=(--layers 1 --width 32 --heads 2 --kv-heads 2 --intermediate 64 --context 32 --batch 4 --warmup 2
       --steps 12 --log-every 4 --eval-every 6 --eval-windows 16 --samples 1 --sample-tokens 8 --metrics ""
       --tokens-out "$work/corpus.tokens")
resume_case() {  # name, then the layout's flags
  local name=$1
  shift
  run "${short[@]}" "$@" --export-hf "$work/$name.straight" > "$work/$name.straight.log"
  run "${short[@]}" "$@" --save "$work/ckpt_$name" --save-every 3 --stop-at 6 > "$work/$name.first.log"
  [ "$(grep -c "^stopped at step 6 of 12" "$work/$name.first.log")" -eq 1 ] \
    || { cat "$work/$name.first.log"; fail "$name: stop"; }
  run "${short[@]}" "$@" --resume "$work/ckpt_$name" --export-hf "$work/$name.resumed" > "$work/$name.resumed.log"
  [ "$(grep -c "^resumed from .* at step 6$" "$work/$name.resumed.log")" -eq 1 ] \
    || { cat "$work/$name.resumed.log"; fail "$name: expected one resume line (rank 0 only)"; }
  cmp "$work/$name.straight/model.safetensors" "$work/$name.resumed/model.safetensors" \
    || fail "$name: the resumed 2-rank run exported other weights than the uninterrupted one"
}
resume_case ddp
resume_case zero3bf16 --zero 3 --param-dtype bf16
resume_case tp --tp 2
# Sequence parallelism (norms and residuals on each rank's half of the sequence) trains as
# plain --tp 2 does, to the printed digits (close_lines: one unit of the last).
run "${short[@]}" --tp 2 --sequence-parallel > "$work/sp.log"
grep -q "2 tensor-parallel ranks (sequence parallel)" "$work/sp.log" || { cat "$work/sp.log"; fail "SP banner"; }
# "step  4/12 | loss X" (the log pads the step) as "step 4/12 | loss X", for every logged step.
printed() { grep -o "^step *[0-9]*/12 | loss [0-9.]*" "$1" | tr -s ' '; }
[ "$(printed "$work/sp.log" | wc -l)" = 3 ] || { cat "$work/sp.log"; fail "--sequence-parallel: not 3 logged steps"; }
close_lines "$(printed "$work/sp.log")" "$(printed "$work/tp.straight.log")" \
  || { paste <(printed "$work/tp.straight.log") <(printed "$work/sp.log"); fail "--sequence-parallel losses differ"; }
# The checkpoints load into other layouts with the same global batch: ZeRO-3 bf16 (2 x 4
# sequences per step) into one float32 process, TP (1 data rank x 4) into 2-rank DDP.
"$bin" "${short[@]}" --global-batch 8 --resume "$work/ckpt_zero3bf16" > "$work/bf16_as_one.log"
resumed_as() { grep -q "^resumed from .* at step 6$" "$1" && grep -q "$2" "$1"; }  # <log> <banner part>
resumed_as "$work/bf16_as_one.log" "batch 8 x 1 rank(s)" || { cat "$work/bf16_as_one.log"; fail "bf16 -> one process"; }
run "${short[@]}" --global-batch 4 --resume "$work/ckpt_tp" > "$work/tp_as_ddp.log"
resumed_as "$work/tp_as_ddp.log" "batch 2 x 2 rank(s); DDP" || { cat "$work/tp_as_ddp.log"; fail "TP -> DDP"; }
# --init-from a 2-rank save into a 2-rank ZeRO-1 run.
run "${short[@]}" --zero 1 --init-from "$work/ckpt_ddp" --steps 1 --warmup 0 > "$work/init.log"
[ "$(grep -c "^initialised the weights from" "$work/init.log")" -eq 1 ] || { cat "$work/init.log"; fail "--init-from"; }

# --global-batch sets the per-rank batch; one it cannot split is refused by name.
run "${short[@]}" --global-batch 6 --steps 2 --warmup 0 > "$work/gb.log"
grep -q "batch 3 x 2 rank(s)" "$work/gb.log" || { cat "$work/gb.log"; fail "--global-batch 6 was not 3 per rank"; }
if run "${short[@]}" --global-batch 7 > "$work/bad.log" 2>&1; then fail "--global-batch 7 on 2 ranks ran"; fi
grep -q -- "--global-batch 7 does not divide over the 2 data-parallel rank(s)" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "--global-batch message"; }
# --timeline: one file with every rank's spans of the traced step; --profile-step of the same
# step adds each rank's op spans to it and prints rank 0's op table.
run "${short[@]}" --steps 3 --warmup 0 --timeline "$work/step.json" --timeline-step 1 --profile-step 1 > "$work/tl.log"
grep -q "^profile of step 1 (rank 0):" "$work/tl.log" || { cat "$work/tl.log"; fail "--profile-step 1"; }
python3 - "$work/step.json" <<'PY' || fail "timeline"
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
assert sorted({e["pid"] for e in events}) == [0, 1], "ranks"
for pid in (0, 1):
    names = [e["name"] for e in events if e["pid"] == pid]
    assert names.count("training step") == 1 and names.count("forward") == 1, names
    assert any(e["cat"] == "op" for e in events if e["pid"] == pid), "no op spans of --profile-step"
PY

# Pipeline parallelism: 2 stages train, validate and sample as one process does, to the
# printed digits, under every schedule; a save under --pp 2 resumes under --pp 2 and in one
# process with the uninterrupted run's losses; --export-hf and too few layers are refused.
pipe=("${short[@]}" --layers 4)  # the last one counts: two blocks per stage, one per chunk interleaved
printed_all() {
  grep -ao "^\(step *[0-9]*/12 | loss\|eval *step *[0-9]* | validation loss\) [0-9.]*\|^\[.*" "$1" | tr -s ' '
}
"$bin" "${pipe[@]}" > "$work/pp_one.log"
run "${pipe[@]}" --pp 2 > "$work/pp.log"
grep -q "x 2 pipeline stages (1f1b, 4 micro-batches); no data parallelism" "$work/pp.log" \
  || { cat "$work/pp.log"; fail "PP banner"; }
run "${pipe[@]}" --pp 2 --schedule gpipe --micro-batches 2 > "$work/pp_gpipe.log"
run "${pipe[@]}" --pp 2 --schedule interleaved --chunks 2 > "$work/pp_inter.log"
for log in pp pp_gpipe pp_inter; do
  close_lines "$(printed_all "$work/$log.log")" "$(printed_all "$work/pp_one.log")" \
    || { paste <(printed_all "$work/pp_one.log") <(printed_all "$work/$log.log"); fail "$log differs from one rank"; }
done
run "${pipe[@]}" --pp 2 --save "$work/ckpt_pp" --stop-at 6 > "$work/pp_first.log"
run "${pipe[@]}" --pp 2 --resume "$work/ckpt_pp" > "$work/pp_resumed.log"
"$bin" "${pipe[@]}" --resume "$work/ckpt_pp" > "$work/pp_as_one.log"
after_6() { printed_all "$1" | grep "^\(step 8/12\|step 12/12\|eval step 12\) "; }
for log in pp_resumed pp_as_one; do
  grep -q "^resumed from .* at step 6$" "$work/$log.log" || { cat "$work/$log.log"; fail "$log: no resume"; }
  [ "$(after_6 "$work/$log.log" | wc -l)" = 3 ] || { cat "$work/$log.log"; fail "$log: not 3 lines after the resume"; }
  close_lines "$(after_6 "$work/$log.log")" "$(after_6 "$work/pp.log")" \
    || { paste <(after_6 "$work/pp.log") <(after_6 "$work/$log.log"); fail "$log: losses after the resume differ"; }
done
if run "${pipe[@]}" --pp 2 --export-hf "$work/pp_hf" > "$work/bad.log" 2>&1; then fail "--export-hf with --pp ran"; fi
grep -q -- "--export-hf does not support --pp 2" "$work/bad.log" || { cat "$work/bad.log"; fail "--export-hf message"; }
if run "${short[@]}" --pp 2 > "$work/bad.log" 2>&1; then fail "--layers 1 with --pp 2 ran"; fi
grep -q -- "--layers 1 is fewer than the 2 pipeline stages" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "--layers message"; }
echo "train_llama 2-rank smoke test passed"
