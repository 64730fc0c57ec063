#!/usr/bin/env bash
# The main job's default recipe (train_gpt with no options but --seed) reaches >= 99% exact
# match whatever the thread count and the number of ranks: each case is "THREADS RANKS SEED",
# run to the end with the defaults. The full 20-run check (1 and 2 threads x 1 and 2 ranks x
# seeds 1-5) is in docs/performance.md "The main job across threads, ranks and seeds"; CI
# runs one rank x one thread x seed 3, which ended at 98.8% under the previous recipe (4
# heads), and the main job itself (two ranks).
#   train_gpt_main_job.sh <mpirun> <train_gpt binary> "THREADS RANKS SEED"...
set -euo pipefail
mpirun=$1
bin=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threshold=99
failed=0
for case in "$@"; do
  read -r threads ranks seed <<<"$case"
  log="$work/t${threads}-r${ranks}-s${seed}.log"
  start=$SECONDS
  # As scripts/run_main_job.sh runs it: OMP_NUM_THREADS only.
  OMP_NUM_THREADS=$threads "$mpirun" --oversubscribe --bind-to none -np "$ranks" "$bin" --seed "$seed" --metrics "" \
    > "$log" 2>&1 \
    || { echo "train_gpt failed: $threads thread(s), $ranks rank(s), seed $seed"; cat "$log"; exit 1; }
  accuracy=$(sed -n 's/^final exact-match accuracy: \([0-9.]*\)%$/\1/p' "$log")
  [ -n "$accuracy" ] || { echo "no final accuracy in the log"; cat "$log"; exit 1; }
  echo "$threads thread(s), $ranks rank(s), seed $seed: ${accuracy}% in $((SECONDS - start)) s"
  if ! awk -v a="$accuracy" -v t="$threshold" 'BEGIN { exit !(a >= t) }'; then
    echo "  below ${threshold}%:"
    grep -E "^step [0-9]*[02468]00/|^eval" "$log" | sed 's/^/    /'
    failed=1
  fi
done
[ "$failed" -eq 0 ] || { echo "the main job's default recipe missed ${threshold}% exact match"; exit 1; }
echo "main job reached >= ${threshold}% in every case"
