#include "distributed/mpi/build_identity.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "distributed/env_settings.h"
#include "distributed/mpi/engine.h"
#include "strata/core/error.h"
#include "strata/core/hash.h"

// Set for this file by src/CMakeLists.txt; the fallbacks keep other build systems compiling.
#ifndef STRATA_VERSION_STRING
#define STRATA_VERSION_STRING "unknown"
#endif
#ifndef STRATA_BUILD_CONFIG
#define STRATA_BUILD_CONFIG "unknown configuration"
#endif

namespace strata::dist::mpi {
namespace {

#define STRATA_STR2(x) #x
#define STRATA_STR(x) STRATA_STR2(x)

// What the preprocessor knows about the ABI, beside what CMake passed.
std::string compiled_abi() {
  std::string s;
#if defined(__VERSION__)
  s += "cc " __VERSION__;
#endif
  s += ", C++ " STRATA_STR(__cplusplus);
#if defined(_GLIBCXX_USE_CXX11_ABI)
  s += ", libstdc++ cxx11 ABI " STRATA_STR(_GLIBCXX_USE_CXX11_ABI);
#endif
  s += ", pointer " + std::to_string(sizeof(void*)) + " long " + std::to_string(sizeof(long));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  s += ", big-endian";
#else
  s += ", little-endian";
#endif
#if defined(OMPI_MAJOR_VERSION)
  s += ", Open MPI " STRATA_STR(OMPI_MAJOR_VERSION) "." STRATA_STR(OMPI_MINOR_VERSION) "." STRATA_STR(
      OMPI_RELEASE_VERSION);
#else
  s += ", MPI " STRATA_STR(MPI_VERSION) "." STRATA_STR(MPI_SUBVERSION);
#endif
  return s;
}

// One rank's entry in the all-gather: fixed size, so that even builds that differ in every
// other respect exchange it alike.
struct Entry {
  uint64_t hash = 0;
  char host[64] = {};
  char text[440] = {};
};

std::string quoted(const Entry& e) {
  std::string q = "'";
  q.append(e.text).append("'");
  return q;
}

std::string hex(uint64_t h) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

std::string build_identity() {
  if (const char* forced = detail::test_build_identity()) return forced;
  std::string s = "strata " STRATA_VERSION_STRING " [" STRATA_BUILD_CONFIG ", ";
  s.append(compiled_abi()).append("]");
  return s;
}

void check_build_identity(MPI_Comm world) {
  int rank = 0, size = 1;
  STRATA_MPI(MPI_Comm_rank(world, &rank));
  STRATA_MPI(MPI_Comm_size(world, &size));
  Entry mine;
  const std::string text = build_identity();
  mine.hash = fnv1a(text);
  std::snprintf(mine.text, sizeof(mine.text), "%s", text.c_str());
  if (gethostname(mine.host, sizeof(mine.host) - 1) != 0) std::snprintf(mine.host, sizeof(mine.host), "?");
  std::vector<Entry> all(static_cast<size_t>(size));
  STRATA_MPI(MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, all.data(), sizeof(Entry), MPI_BYTE, world));
  const Entry& ref = all[0];
  std::string diff;
  int differing = 0;
  for (int r = 1; r < size; ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    if (e.hash == ref.hash) continue;
    if (++differing > 4) continue;
    if (differing > 1) diff.append("; ");
    diff.append("rank ").append(std::to_string(r)).append(" on host ").append(e.host);
    diff.append(" runs ").append(quoted(e)).append(" (identity ").append(hex(e.hash)).append(")");
  }
  if (differing == 0) return;
  if (differing > 4) diff.append("; and ").append(std::to_string(differing - 4)).append(" more ranks");
  STRATA_FAIL("dist::init: the ranks run different strata builds: ", diff, ", but rank 0 on host ", ref.host, " runs ",
              quoted(ref), " (identity ", hex(ref.hash),
              "). Every host must run the same strata build (version, compiler, build options); rebuild or "
              "redeploy the differing hosts");
}

}  // namespace strata::dist::mpi
