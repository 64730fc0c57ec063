#!/usr/bin/env bash
# examples/train_gpt --zero 3 with HSDP (--shard-size N, --hsdp) under `mpirun -np 4`: 2 shard
# groups of 2 ranks; a save/resume in HSDP exports the same bytes as the uninterrupted run;
# the HSDP checkpoint (each shard written once, by the first replica) resumes as plain ZeRO-3
# on 4 ranks and as one process on the same global batch, ending at the uninterrupted run's
# loss; --hsdp on pretend nodes of 2 ranks (STRATA_TEST_NODE_SIZE) takes the node as the shard
# group, and on nodes of one rank it warns that nothing is sharded; bad shard sizes are clear
# errors.
#   train_gpt_hsdp_smoke.sh <mpirun> <train_gpt binary>
set -euo pipefail
mpirun=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi_extra=()  # mpirun's own flags (pretend nodes)
run() { "$mpirun" --oversubscribe "${mpi_extra[@]}" -np 4 "$bin" "$@"; }
common=(--steps 10 --batch 4 --layers 2 --width 32 --heads 2 --digits 2 --warmup 2 --log-every 5
        --eval-examples 20 --metrics "")
final_loss() { grep -E "^step 10/10 \| loss" "$1" | sed 's/.*| loss \([0-9.]*\).*/\1/'; }

run "${common[@]}" --zero 3 --shard-size 2 --export-hf "$work/straight" > "$work/straight.log"
grep -q "HSDP: ZeRO-3 sharded over 2 data ranks .* 2 replicas" "$work/straight.log" \
  || { echo "HSDP banner missing"; cat "$work/straight.log"; exit 1; }
run "${common[@]}" --zero 3 --shard-size 2 --save "$work/ckpt" --save-every 3 --stop-at 6 > "$work/first.log"
run "${common[@]}" --zero 3 --shard-size 2 --resume "$work/ckpt" --export-hf "$work/resumed" > "$work/resumed.log"
cmp "$work/straight/model.safetensors" "$work/resumed/model.safetensors" \
  || { echo "HSDP: the resumed run exported different weights from the uninterrupted run"; exit 1; }
expected=$(final_loss "$work/straight.log")
[ -n "$expected" ] || { echo "no final loss line"; cat "$work/straight.log"; exit 1; }
# Other layouts: plain ZeRO-3 on 4 ranks, one process with the global batch of 16.
run "${common[@]}" --zero 3 --resume "$work/ckpt" > "$work/as_zero3.log"
"$bin" "${common[@]}" --global-batch 16 --resume "$work/ckpt" > "$work/as_one.log"
for f in as_zero3 as_one; do
  grep -q "resumed from .* at step 6" "$work/$f.log" || { echo "$f: resume failed"; cat "$work/$f.log"; exit 1; }
  [ "$(final_loss "$work/$f.log")" = "$expected" ] \
    || { echo "$f: final loss $(final_loss "$work/$f.log"), the HSDP run's $expected"; exit 1; }
done
# The default shard group is the node: pretend nodes of 2 ranks.
mpi_extra=(-x STRATA_TEST_NODE_SIZE=2)
run "${common[@]}" --zero 3 --hsdp > "$work/node.log" 2>&1 \
  || { echo "--hsdp failed"; cat "$work/node.log"; exit 1; }
grep -q "HSDP: ZeRO-3 sharded over 2 data ranks .* 2 replicas" "$work/node.log" \
  || { echo "--hsdp: the shard group is not the node"; cat "$work/node.log"; exit 1; }
# Nodes of one rank: shard groups of one shard nothing, which the banner says.
mpi_extra=(-x STRATA_TEST_NODE_SIZE=1)
run "${common[@]}" --zero 3 --hsdp > "$work/single.log" 2>&1 \
  || { echo "--hsdp on one-rank nodes failed"; cat "$work/single.log"; exit 1; }
grep -q "shard groups have one rank: nothing is sharded" "$work/single.log" \
  || { echo "--hsdp on one-rank nodes: no warning"; cat "$work/single.log"; exit 1; }

expect_error() {  # message, then flags (run on 4 ranks, the environment as given)
  local message=$1
  shift
  if run "${common[@]}" "$@" > "$work/bad.log" 2>&1; then echo "accepted: $*"; exit 1; fi
  grep -q "$message" "$work/bad.log" || { echo "no clear error for $*"; cat "$work/bad.log"; exit 1; }
}
mpi_extra=()
expect_error "needs --zero 1, 2 or 3" --hsdp
expect_error "shard size 3 does not divide the data group's 4 ranks" --zero 3 --shard-size 3
mpi_extra=(-x STRATA_TEST_NODE_SIZE=2)
expect_error "shard size 4 does not match the nodes" --zero 3 --shard-size 4
echo "train_gpt HSDP smoke test passed"
