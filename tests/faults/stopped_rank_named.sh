#!/usr/bin/env bash
# A rank stopped (SIGSTOP) at a random moment of training: the survivor's timeout must name
# it, whether the stop fell between collectives ("ranks 1 of 2 had not reached it") or
# inside one after it had announced it (the roll call: "ranks 1 of 2 did not answer").
# Before the roll call, about half of such runs said only "every rank had entered it".
#   stopped_rank_named.sh <mpirun> <train_gpt binary> [runs]
set -uo pipefail
mpirun=$1
bin=$2
runs=${3:-6}
work=$(mktemp -d)
stopped=""
trap '[ -n "$stopped" ] && kill -KILL $stopped 2> /dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The processes below $1, recursively.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done
}

for i in $(seq 1 "$runs"); do
  log=$work/run$i.log
  timeout 60 "$mpirun" --oversubscribe -np 2 "$bin" --steps 1000000 --layers 1 --width 32 --heads 2 --batch 8 \
    --digits 2 --warmup 2 --log-every 1000000 --eval-examples 10 --metrics "" --collective-timeout 2 \
    ${ZERO:+--zero "$ZERO"} > "$log" 2>&1 &
  job=$!
  sleep "2.$((RANDOM % 10))$((RANDOM % 10))"  # startup, then some steps
  stopped=""
  for pid in $(descendants "$job"); do
    if [ "$(cat "/proc/$pid/comm" 2> /dev/null)" = "train_gpt" ] &&
       tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
      stopped=$pid
    fi
  done
  if [ -z "$stopped" ]; then fail "run $i: rank 1 not found"; kill "$job"; wait "$job"; continue; fi
  kill -STOP "$stopped"
  wait "$job"
  rc=$?
  kill -KILL "$stopped" 2> /dev/null
  stopped=""
  message=$(grep -o "timed out after 2000 ms.*" "$log" | head -1)
  if [ "$rc" -eq 124 ]; then fail "run $i: still running after 60 s"; cat "$log"
  elif echo "$message" | grep -Eq "ranks 1 of 2 (had not reached it|did not answer within)"; then
    echo "ok   run $i: $message"
  else
    fail "run $i: rank 1 not named: '${message:-no timeout message}'"; cat "$log"
  fi
done

if [ "$failures" -ne 0 ]; then echo "$failures run(s) failed"; exit 1; fi
echo "stopped rank named in $runs run(s)"
