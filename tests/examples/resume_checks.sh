# Sourced by the train_gpt smoke scripts (which define losses() and fail()):
# expect_resumed_like REFERENCE_LOG LOG...: each LOG resumed at step 6 and logged the losses
# of steps 8 and 12 exactly as REFERENCE_LOG (an uninterrupted run) did.
expect_resumed_like() {
  local reference=$1 log
  shift
  after_6() { losses "$1" | grep -E "^step (8|12)/"; }
  for log in "$@"; do
    grep -q "resumed from .* at step 6" "$log" || { cat "$log"; fail "$log: no resume"; }
    [ "$(after_6 "$log")" = "$(after_6 "$reference")" ] \
      || { paste <(after_6 "$reference") <(after_6 "$log"); fail "$log: losses differ from the uninterrupted run"; }
  done
}
