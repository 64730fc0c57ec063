#!/usr/bin/env bash
# examples/train_gpt with --pp: pipeline parallelism (every schedule, beside DDP, ZeRO and
# tensor parallelism) trains like one process on the same global batch: the logged losses
# agree to within one unit of the printed digits (resume_checks.sh, same_losses). Also
# save/resume across layouts, the timeline file and the refusals.
#   train_gpt_pp_smoke.sh <mpirun> <train_gpt binary>
set -euo pipefail
mpirun=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=tests/examples/resume_checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/resume_checks.sh"
common=(--steps 12 --batch 4 --layers 4 --width 32 --heads 4 --digits 3 --warmup 2 --log-every 4
        --eval-examples 20 --metrics "")
losses() { grep -o "^step *[0-9]*/12 | loss [0-9.]*" "$1" | tr -s " "; }
same() {  # <reference log> <log> <what>
  same_losses "$(losses "$1")" "$(losses "$2")" || { paste <(losses "$1") <(losses "$2"); fail "$3 losses differ"; }
}

"$bin" "${common[@]}" > "$work/one.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --timeline "$work/step.json" > "$work/pp.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --schedule gpipe --micro-batches 4 > "$work/gpipe.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --schedule interleaved --chunks 2 > "$work/inter.log"
grep -q "x 2 pipeline stages (1f1b, 4 micro-batches)" "$work/pp.log" || { cat "$work/pp.log"; fail "PP banner"; }
for run in pp gpipe inter; do same "$work/one.log" "$work/$run.log" "$run"; done
grep -q "final exact-match accuracy" "$work/pp.log" || fail "no evaluation through the pipeline"
# The timeline: one process per rank, forwards and backwards of every micro-batch.
python3 - "$work/step.json" <<'PY' || fail "timeline"
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
assert sorted({e["pid"] for e in events}) == [0, 1], "ranks"
for pid in (0, 1):
    names = [e["name"] for e in events if e["pid"] == pid]
    assert names.count("forward") == 4 and names.count("backward") == 4, names
PY

# pp=2 x dp=2 with ZeRO-2 equals 2-rank DDP; pp=2 x tp=2 equals one process.
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" > "$work/ddp.log"
"$mpirun" --oversubscribe -np 4 "$bin" "${common[@]}" --pp 2 --zero 2 > "$work/pp_dp.log"
same "$work/ddp.log" "$work/pp_dp.log" "pp=2 x dp=2 ZeRO-2"
"$mpirun" --oversubscribe -np 4 "$bin" "${common[@]}" --pp 2 --tp 2 > "$work/pp_tp.log"
same "$work/one.log" "$work/pp_tp.log" "pp=2 x tp=2"

# Save at step 6 under pp=2 x tp=2, resume under --pp 2 and in one process (the checkpoint
# loads into any layout): the losses after the resume are the uninterrupted run's.
"$mpirun" --oversubscribe -np 4 "$bin" "${common[@]}" --pp 2 --tp 2 --save "$work/pp_ckpt" --stop-at 6 > "$work/pp_first.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --resume "$work/pp_ckpt" > "$work/pp_resumed.log"
"$bin" "${common[@]}" --resume "$work/pp_ckpt" > "$work/pp_as_one.log"
expect_resumed_like "$work/one.log" "$work/pp_resumed.log" "$work/pp_as_one.log"

# Refusals, by name.
if "$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --zero 3 > "$work/bad.log" 2>&1; then fail "--zero 3 with --pp ran"; fi
grep -q -- "--zero 3 cannot run with --pp" "$work/bad.log" || { cat "$work/bad.log"; fail "--zero 3 message"; }
if "$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --layers 1 > "$work/bad2.log" 2>&1; then fail "--layers 1 with --pp 2 ran"; fi
grep -q -- "--layers 1 is fewer than the 2 pipeline stages" "$work/bad2.log" || { cat "$work/bad2.log"; fail "--layers message"; }
if "$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --micro-batches 3 > "$work/bad3.log" 2>&1; then fail "--micro-batches 3 ran"; fi
grep -q -- "--batch 4 does not divide into 3 micro-batches" "$work/bad3.log" || { cat "$work/bad3.log"; fail "--micro-batches message"; }
if "$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --pp 2 --export-hf "$work/hf" > "$work/bad4.log" 2>&1; then fail "--export-hf with --pp ran"; fi
grep -q -- "--export-hf does not support --pp 2" "$work/bad4.log" || { cat "$work/bad4.log"; fail "--export-hf message"; }
echo "train_gpt pipeline-parallel smoke test passed"
