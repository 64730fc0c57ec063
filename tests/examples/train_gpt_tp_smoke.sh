#!/usr/bin/env bash
# examples/train_gpt with --tp: tensor parallelism (with and without sequence parallelism,
# under DDP and ZeRO) trains like one process on the same global batch: the logged losses agree
# to within one unit of the printed digits (resume_checks.sh, same_losses). Also save/resume
# under --tp and into one process, the mesh check and the export of gathered weights.
#   train_gpt_tp_smoke.sh <mpirun> <train_gpt binary>
set -euo pipefail
mpirun=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=tests/examples/resume_checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/resume_checks.sh"
common=(--steps 12 --batch 4 --layers 2 --width 32 --heads 4 --digits 3 --warmup 2 --log-every 4
        --eval-examples 20 --metrics "")
losses() { grep -o "^step *[0-9]*/12 | loss [0-9.]*" "$1" | tr -s " "; }

"$bin" "${common[@]}" > "$work/one.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --tp 2 --export-hf "$work/hf" > "$work/tp.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --tp 2 --sequence-parallel --zero 1 > "$work/tp_sp.log"
grep -q "batch 4 x 1 rank(s) (data) x 2 tensor-parallel ranks" "$work/tp.log" || { cat "$work/tp.log"; fail "TP banner"; }
for run in tp tp_sp; do
  same_losses "$(losses "$work/one.log")" "$(losses "$work/$run.log")" \
    || { paste <(losses "$work/one.log") <(losses "$work/$run.log"); fail "$run losses differ from one process"; }
done
[ -s "$work/hf/model.safetensors" ] || fail "no export from the TP run"

# dp=2 x tp=2 with ZeRO-3 equals plain 2-rank DDP.
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" > "$work/ddp.log"
"$mpirun" --oversubscribe -np 4 "$bin" "${common[@]}" --tp 2 --zero 3 > "$work/dp_tp.log"
same_losses "$(losses "$work/ddp.log")" "$(losses "$work/dp_tp.log")" \
  || { paste <(losses "$work/ddp.log") <(losses "$work/dp_tp.log"); fail "dp=2 x tp=2 ZeRO-3 differs from DDP"; }

# Save at step 6 under --tp 2, resume under --tp 2 and in one process (the checkpoint loads
# into any layout): the losses after the resume are the uninterrupted run's.
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --tp 2 --save "$work/tp_ckpt" --stop-at 6 > "$work/tp_first.log"
"$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --tp 2 --resume "$work/tp_ckpt" > "$work/tp_resumed.log"
"$bin" "${common[@]}" --resume "$work/tp_ckpt" > "$work/tp_as_one.log"
expect_resumed_like "$work/tp.log" "$work/tp_resumed.log" "$work/tp_as_one.log"

# A degree that does not divide the ranks is refused by name.
if "$mpirun" --oversubscribe -np 2 "$bin" "${common[@]}" --tp 3 > "$work/bad.log" 2>&1; then fail "--tp 3 on 2 ranks ran"; fi
grep -q -- "--tp 3 does not divide the 2 ranks" "$work/bad.log" || { cat "$work/bad.log"; fail "--tp message"; }
echo "train_gpt tensor-parallel smoke test passed"
