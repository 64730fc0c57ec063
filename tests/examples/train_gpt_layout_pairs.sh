#!/usr/bin/env bash
# Every layout loads into every other: train_gpt saves at step K in layout A, resumes in
# layout B and trains to step N; the weights it ends with must be those of A's uninterrupted
# run to within a bound. Layouts: one process, DDP 2, ZeRO 1/2/3 at 2 and 3 ranks, TP 2,
# PP 2, PP 2 x TP 2, and ZeRO-3 at 2 ranks with bf16 parameters (fp32 master weights).
# Each layout trains once (saving at K and N), then every ordered pair (the same layout
# included) resumes once: 12 + 144 launches.
#
# The bound. The resumed run and A's own uninterrupted run start from the same bits at step K
# (the load is exact: float32 into float32; bf16 runs are compared through their fp32 master
# weights, which load exactly too), so they differ only by what layout B computes differently
# in steps K..N. continuation_compare measures
#   rho = ||resumed(N) - uninterrupted(N)|| / ||uninterrupted(N) - uninterrupted(K)||,
# the difference against the progress made after K (2-norms over every weight, in float64).
#  - Both sides float32: the same sums in another order (data-parallel reductions,
#    tensor-parallel partial products, pipeline micro-batches). A sum of m terms rounds to
#    within m u of the sum of their magnitudes (u = 2^-24, float32's unit roundoff); the longest
#    sums here have m <= 2^8 (a weight gradient sums 12 sequences x 9 tokens, a projection up
#    to 128 products). AdamW normalises each update by the gradient's own size, so a relative
#    difference of the gradients is one of the updates; where a gradient nearly cancels it can
#    about double per step: 2^2 for the two continued steps, and a margin of 2^2. Bound:
#    u x 2^8 x 2^4 = 2^-12 = 2.4e-4. Measured: at most 4.3e-6.
#  - One side bf16: its forward and backward see each weight rounded to bf16, up to
#    u_bf16 = 2^-8 relative, so its gradients and hence its updates differ from the float32
#    side's by about that fraction per step. Bound: u_bf16 x 2^3 (the same doubling over two
#    steps, a margin of 2) = 2^-5 = 3.1e-2. Measured: 2.7e-3.
# What the bounds must catch is of order 1, as measured by loading a step-K save with its
# optimizer tensors removed (rho 1.06: AdamW's first update is lr x sign(g)) or its sampler
# position one batch ahead (rho 0.40).
#   train_gpt_layout_pairs.sh <mpirun> <train_gpt> <continuation_compare>
set -euo pipefail
mpirun=$1
bin=$2
compare=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

K=3
N=5
common=(--layers 2 --width 32 --heads 2 --digits 2 --global-batch 12 --steps 8 --warmup 2 --stop-at "$N"
        --log-every 100 --eval-examples 1 --metrics "" --keep-last 2)
layouts=(one ddp2 z1n2 z2n2 z3n2 z1n3 z2n3 z3n3 tp2 pp2 pp2tp2 bf16)
declare -A np=([one]=1 [ddp2]=2 [z1n2]=2 [z2n2]=2 [z3n2]=2 [z1n3]=3 [z2n3]=3 [z3n3]=3 [tp2]=2 [pp2]=2 [pp2tp2]=4
               [bf16]=2)
declare -A flags=([one]="" [ddp2]="" [z1n2]="--zero 1" [z2n2]="--zero 2" [z3n2]="--zero 3" [z1n3]="--zero 1"
                  [z2n3]="--zero 2" [z3n3]="--zero 3" [tp2]="--tp 2" [pp2]="--pp 2" [pp2tp2]="--pp 2 --tp 2"
                  [bf16]="--zero 3 --param-dtype bf16")
readonly bound_f32=2.4e-4 bound_bf16=3.1e-2

# run LAYOUT LOG ARGS...: train_gpt in LAYOUT (one process without mpirun).
run() {
  local layout=$1 log=$2
  shift 2
  # shellcheck disable=SC2086 # the layout's flags are words
  if [ "${np[$layout]}" = 1 ]; then
    "$bin" "${common[@]}" ${flags[$layout]} "$@" > "$log" 2>&1
  else
    "$mpirun" --oversubscribe -np "${np[$layout]}" "$bin" "${common[@]}" ${flags[$layout]} "$@" > "$log" 2>&1
  fi
}

step_dir() {  # step_dir CHECKPOINT_DIR STEP: its one step-STEP-* save (a failure ends the script)
  local d
  d=$(find "$1" -maxdepth 1 -name "step-$2-*" -type d)
  if [ -z "$d" ] || [ "$(echo "$d" | wc -l)" != 1 ]; then
    echo "FAIL: $1 has no single step-$2 save" >&2
    exit 1
  fi
  echo "$d"
}

start=$SECONDS
for a in "${layouts[@]}"; do
  run "$a" "$work/$a.log" --save "$work/$a" --save-every "$K" || { cat "$work/$a.log"; fail "layout $a did not train"; }
done
pairs=$work/pairs.txt
: > "$pairs"
for a in "${layouts[@]}"; do
  at_k=$(step_dir "$work/$a" "$K")
  at_n=$(step_dir "$work/$a" "$N")
  for b in "${layouts[@]}"; do
    out=$work/$a-to-$b
    run "$b" "$out.log" --resume "$at_k" --save "$out" \
      || { cat "$out.log"; fail "the step-$K save of layout $a does not resume in layout $b"; }
    grep -q "resumed from .* at step $K" "$out.log" || { cat "$out.log"; fail "$a -> $b: no resume at step $K"; }
    bound=$bound_f32
    if [ "$a" = bf16 ] || [ "$b" = bf16 ]; then bound=$bound_bf16; fi
    echo "$a->$b $bound $out $at_n $at_k" >> "$pairs"
  done
done
echo "trained and resumed ${#layouts[@]} x ${#layouts[@]} layout pairs in $((SECONDS - start)) s"
"$compare" "$pairs" || fail "a continuation is outside its bound"
echo "train_gpt layout pairs test passed"
