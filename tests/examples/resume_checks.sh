# Sourced by the train_gpt smoke scripts (which define losses() and fail()).

# same_losses "$(losses REFERENCE_LOG)" "$(losses LOG)": LOG logged the steps of REFERENCE_LOG
# (lines "step N/M | loss X"), each loss within one unit of the last printed digit.
# The runs compute in float32 along different paths (GEMMs split over ranks or micro-batches:
# other kernels and orders, which depend on the CPU), so their losses differ by float32
# rounding (~1e-6 relative; tests/distributed bound the same paths), and the log rounds them
# to 4 decimals: a value at a rounding boundary prints 1e-4 apart on some CPUs and not on
# others. Anything further apart is a real difference.
same_losses() {
  [ -n "$1" ] || return 1
  paste -d' ' <(printf '%s\n' "$1") <(printf '%s\n' "$2") \
    | awk 'NF != 10 || $2 != $7 || $5 - $10 > 1.5e-4 || $10 - $5 > 1.5e-4 { bad = 1 } END { exit bad }'
}

# expect_resumed_like REFERENCE_LOG LOG...: each LOG resumed at step 6 and logged the losses
# of steps 8 and 12 as REFERENCE_LOG (an uninterrupted run) did (same_losses).
expect_resumed_like() {
  local reference=$1 log
  shift
  after_6() { losses "$1" | grep -E "^step (8|12)/"; }
  for log in "$@"; do
    grep -q "resumed from .* at step 6" "$log" || { cat "$log"; fail "$log: no resume"; }
    same_losses "$(after_6 "$reference")" "$(after_6 "$log")" \
      || { paste <(after_6 "$reference") <(after_6 "$log"); fail "$log: losses differ from the uninterrupted run"; }
  done
}

# close_lines "$(lines A)" "$(lines B)": as many lines, each with the same words but its last,
# which, where a number, is within one unit of the 4th printed decimal (as same_losses) and
# otherwise equal. For logs mixing training, validation and sample lines.
close_lines() {
  [ -n "$1" ] || return 1
  [ "$(printf '%s\n' "$1" | wc -l)" = "$(printf '%s\n' "$2" | wc -l)" ] || return 1
  paste -d'\t' <(printf '%s\n' "$1") <(printf '%s\n' "$2") | awk -F'\t' '
    { na = split($1, a, " "); nb = split($2, b, " ")
      if (na != nb) bad = 1
      for (i = 1; i < na; ++i) if (a[i] != b[i]) bad = 1
      if (a[na] ~ /^[0-9]+\.[0-9]+$/ && b[nb] ~ /^[0-9]+\.[0-9]+$/) {
        if (a[na] - b[nb] > 1.5e-4 || b[nb] - a[na] > 1.5e-4) bad = 1
      } else if (a[na] != b[nb]) bad = 1 }
    END { exit bad }'
}
