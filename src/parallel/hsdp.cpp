// HSDP's replicate x shard groups: the shard size checked against the nodes, then the splits.
#include "strata/parallel/hsdp.h"

#include <map>
#include <numeric>
#include <sstream>

#include "strata/core/error.h"
#include "strata/distributed/node.h"
#include "strata/distributed/object_collectives.h"

namespace strata::parallel {
namespace {

// "strata-h0: ranks 0,1; strata-h1: ranks 2,3" for the ranks in [begin, end).
std::string ranks_by_node(const std::vector<std::string>& nodes, int begin, int end) {
  std::map<std::string, std::vector<int>> by_node;
  for (int r = begin; r < end; ++r) by_node[nodes[static_cast<size_t>(r)]].push_back(r);
  std::ostringstream os;
  for (const auto& [node, ranks] : by_node) {
    if (os.tellp() > 0) os << "; ";
    os << node << ": rank" << (ranks.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  }
  return os.str();
}

// The default shard size: the ranks per node, which must be the same on every node.
int ranks_per_node(const std::vector<std::string>& nodes) {
  std::map<std::string, int> count;
  for (const std::string& n : nodes) ++count[n];
  const int first = count.begin()->second;
  for (const auto& [node, c] : count)
    STRATA_CHECK(c == first, "HSDP: the default shard group is one node, so every node must hold the same number of ",
                 "the data group's ranks, but they differ (", ranks_by_node(nodes, 0, static_cast<int>(nodes.size())),
                 "); pass a shard size that divides every node's count");
  return first;
}

}  // namespace

int plan_hybrid_shard_size(const std::vector<std::string>& nodes, int shard_size) {
  const int n = static_cast<int>(nodes.size());
  STRATA_CHECK(n > 0, "HSDP: the data group has no ranks");
  STRATA_CHECK(shard_size >= 0, "HSDP: shard size ", shard_size, " must be positive (or 0: one node's ranks)");
  const int s = shard_size == 0 ? ranks_per_node(nodes) : shard_size;
  STRATA_CHECK(n % s == 0, "HSDP: shard size ", s, " does not divide the data group's ", n,
               " ranks; the shard groups are the replicas of each other, so the shard size must divide it");
  for (int begin = 0; begin < n; begin += s) {
    bool one_node = true;
    for (int r = begin + 1; r < begin + s; ++r)
      one_node = one_node && nodes[static_cast<size_t>(r)] == nodes[static_cast<size_t>(begin)];
    STRATA_CHECK(one_node, "HSDP: shard size ", s, " does not match the nodes: the shard group of data ranks ", begin,
                 "-", begin + s - 1, " spans several nodes (", ranks_by_node(nodes, begin, begin + s),
                 "); a shard group must lie inside one node (its reduce_scatter and all_gather are the intra-node ",
                 "traffic), so the shard size must divide each node's ranks, which must be consecutive data ranks");
  }
  return s;
}

HybridShardGroups make_hybrid_shard_groups(dist::ProcessGroup& data, int shard_size) {
  // Checked locally first: a negative size needs no exchange.
  STRATA_CHECK(shard_size >= 0, "HSDP: shard size ", shard_size, " must be positive (or 0: one node's ranks)");
  const std::vector<std::string> nodes = dist::all_gather_strings(data, dist::node_name());
  HybridShardGroups out;
  out.shard_size = plan_hybrid_shard_size(nodes, shard_size);  // the same verdict on every rank
  out.replicas = data.size() / out.shard_size;
  const int s = out.shard_size, me = data.rank();
  std::vector<int> shard(static_cast<size_t>(s));
  std::iota(shard.begin(), shard.end(), me / s * s);
  std::vector<int> replicate;
  replicate.reserve(static_cast<size_t>(out.replicas));
  for (int k = 0; k < out.replicas; ++k) replicate.push_back(k * s + me % s);
  out.shard = data.split(shard, data.name() + ".shard" + std::to_string(me / s));
  out.replicate = data.split(replicate, data.name() + ".replicate" + std::to_string(me % s));
  return out;
}

}  // namespace strata::parallel
