# cmake -DCOMMAND=a|b|c -DREGEX=... -DCOUNT=n -P StrataExpectLines.cmake: runs COMMAND and
# succeeds when exactly COUNT lines of its output match REGEX (its exit status is ignored:
# used by fault tests in which a rank dies on purpose).
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90 RESULT_VARIABLE rc)
message("${out}")
message("${err}")
string(REGEX MATCHALL "${REGEX}[^\n]*" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL COUNT)
  message(FATAL_ERROR "expected ${COUNT} lines matching '${REGEX}', got ${n} (exit status ${rc})")
endif()
message(STATUS "${n} lines match '${REGEX}' (exit status ${rc})")
