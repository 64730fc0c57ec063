#pragma once
// Fault injection for the tests of crash safety (tests/faults/, tests/distributed/): when the
// environment variable STRATA_TEST_CRASH_AT names `point`, the process is killed there
// (SIGKILL, as a power cut or an OOM kill would), or with "<point>:throw" a strata::Error is
// thrown instead (for in-process tests). Unset: a getenv and nothing else.
namespace strata::checkpoint::detail {

void crash_point(const char* point);

}  // namespace strata::checkpoint::detail
