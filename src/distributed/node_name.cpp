// dist::node_name: the hostname, or the pretend node of the tests' STRATA_TEST_NODE_SIZE.
#include <unistd.h>

#include <array>
#include <string>

#include "distributed/env_settings.h"
#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/distributed/node.h"

namespace strata::dist {

std::string node_name() {
  std::array<char, 256> buf{};
  STRATA_CHECK(gethostname(buf.data(), buf.size() - 1) == 0, "dist::node_name: gethostname failed");
  std::string name(buf.data());
  // The same cut as the collectives' topology (src/distributed/mpi/topology.h).
  const int64_t pretend = detail::test_node_size();
  if (pretend > 0) name += "/pretend-node-" + std::to_string(world().rank() / pretend);
  return name;
}

}  // namespace strata::dist
