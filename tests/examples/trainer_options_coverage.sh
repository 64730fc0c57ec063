#!/usr/bin/env bash
# Every option the example trainers print in --help is honoured or refused, and a test shows
# which: tests/examples/trainer_options.txt maps each option to the test script that passes it
# (and checks its effect) or to the refusal it gets. Fails, naming the program and the
# option, when --help prints an option the list lacks (a new option needs its test), when the
# list names an option --help no longer prints, when a named script is missing or does not
# pass the option, or when a refused option runs or fails with another message.
#   trainer_options_coverage.sh <tests source dir> <train_gpt binary> <train_llama binary>
set -euo pipefail
tests=$1
declare -A binary=([train_gpt]=$(realpath "$2") [train_llama]=$(realpath "$3"))
list=$tests/examples/trainer_options.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
errors=0
problem() { echo "FAIL: $*"; errors=$((errors + 1)); }
# The options of each program's --help, one per line (CLI11: "  --name TYPE=default  help").
for program in "${!binary[@]}"; do
  "${binary[$program]}" --help | grep -oE '^ +(-[a-zA-Z],)?--[a-z0-9-]+' | sed 's/.*,//; s/^ *//' \
    | grep -vx -- --help > "$work/$program.options"
done
help_options() { cat "$work/$1.options"; }
# True when the script passes `option` as a word (not as the prefix of a longer option).
passes() { grep -qE -- "(^|[^A-Za-z0-9-])$2([^A-Za-z0-9-]|\$)" "$1"; }

declare -A listed=()
while read -r program option kind script rest; do
  [[ -z "$program" || "$program" == \#* ]] && continue
  key="$program $option"
  [ -z "${listed[$key]:-}" ] || problem "$list: $key is listed twice"
  listed[$key]=1
  [ -n "${binary[$program]:-}" ] || { problem "$list: unknown program '$program'"; continue; }
  help_options "$program" | grep -qx -- "$option" \
    || problem "$list: $program --help has no $option (remove the line or restore the option)"
  [ -f "$tests/$script" ] || { problem "$list: $key: no test script tests/$script"; continue; }
  grep -q "$program" <<< "$script" || grep -q "$program" "$tests/$script" \
    || problem "$key: tests/$script is not a test of $program"
  passes "$tests/$script" "$option" || problem "$key: tests/$script never passes $option"
  case $kind in
    exercised) ;;
    refused)
      args=${rest%% -- *}
      message=${rest#* -- }
      [ "$args" != "$rest" ] || { problem "$list: $key: expected 'refused <script> <args> -- <message>'"; continue; }
      grep -qF -- "$message" "$tests/$script" || problem "$key: tests/$script does not check the message '$message'"
      # A refusal comes before any work: 60 s are plenty. (The arguments as written in the list.)
      status=0
      # shellcheck disable=SC2086
      (cd "$work" && timeout 60 "${binary[$program]}" $args > "$work/out.log" 2>&1) || status=$?
      if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
        problem "$key: '$program $args' ran instead of being refused"
      elif ! grep -qF -- "$message" "$work/out.log"; then
        cat "$work/out.log"
        problem "$key: '$program $args' failed without the message '$message'"
      elif grep -q "^step " "$work/out.log"; then
        problem "$key: '$program $args' trained before refusing"
      fi
      ;;
    *) problem "$list: $key: unknown kind '$kind' (exercised or refused)" ;;
  esac
done < "$list"

for program in "${!binary[@]}"; do
  count=0
  while read -r option; do
    count=$((count + 1))
    [ -n "${listed[$program $option]:-}" ] \
      || problem "$program $option is in --help but not in $list: add the test that exercises it (or refuses it)"
  done < <(help_options "$program")
  [ "$count" -ge 10 ] || problem "$program --help: only $count options parsed (has its format changed?)"
done
[ "$errors" -eq 0 ] || { echo "$errors problem(s)"; exit 1; }
echo "every option of ${!binary[*]} is exercised or refused by a test (${#listed[@]} options)"
