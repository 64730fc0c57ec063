#pragma once
// Which machine (node) this rank runs on, for layouts that keep traffic inside a node
// (HSDP's shard groups, parallel/hsdp.h).
#include <string>

namespace strata::dist {

// This process's node: its hostname (ranks on one host share it; a namespaced host of the
// cluster tests has its own). Under STRATA_TEST_NODE_SIZE=S (tests on one machine) the world
// is cut into pretend nodes of S consecutive world ranks, as the collectives' topology does:
// "<hostname>/pretend-node-<world rank / S>". Needs dist::init().
std::string node_name();

}  // namespace strata::dist
